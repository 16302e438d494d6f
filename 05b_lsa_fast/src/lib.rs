//! Lesson 05b's building blocks, shared by the lesson (`main.rs`) and the
//! benchmarks (`05_allreduce_bench`, `06_symm_bench`, in
//! `benchmarks/src/bin/`): the fast kernels' sources, which
//! `device_build::program` builds at run time (nvcc and its host shim, or
//! NVRTC + nvJitLink with NCCL's device library), launching them
//! ([`launch`]), and their choice of algorithm and grid ([`fast`]).

pub mod fast;
pub mod launch;

use device_build::route::Program;
use device_build::Source;

/// The fast kernels on the C++ device API (the nvcc route).
pub const FAST: Source = Source {
    file: "allreduce_lsa_fast.cu",
    text: include_str!("../kernels/allreduce_lsa_fast.cu"),
};
/// The fast two-shot kernel on nccl_device_wrapper.h's C API (the jit
/// route, which has no one-shot).
pub const FAST_C: Source = Source {
    file: "allreduce_lsa_fast_c.cu",
    text: include_str!("../kernels/allreduce_lsa_fast_c.cu"),
};
/// What the C-API source uses from nccl_device_wrapper.h: NCCL 2.32.3's
/// names, checked in the wrapper before compiling.
pub const WRAPPER_NAMES: [&str; 6] = [
    "ncclCoopAnyInitCta",
    "ncclLsaBarrierSession_C",
    "ncclLsaBarrierSessionInit",
    "ncclLsaBarrierSessionSync",
    "ncclLsaBarrierSessionDestroy",
    "ncclGetPeerPointerTeam",
];
/// 8-byte units one block of the one-shot kernel carries: its LL staging
/// buffer is sized for this, and the kernel is compiled with it.
pub const LL_UNITS_PER_BLOCK: u32 = 2048;
/// The program name the build cache is kept under.
pub const CACHE_NAME: &str = "05b_lsa_fast";

/// Threads per block of both kernels (compiled into their launch bounds).
pub const THREADS: u32 = 512;

/// What the kernel sources are compiled with: the block size and the LL
/// staging buffer's size per block.
pub fn defines() -> Vec<(String, String)> {
    vec![
        ("ALLREDUCE_THREADS".into(), THREADS.to_string()),
        ("LL_UNITS_PER_BLOCK".into(), LL_UNITS_PER_BLOCK.to_string()),
    ]
}

/// The lesson's device code, for both routes.
pub fn program() -> Program {
    Program {
        nvcc_kernels: vec![FAST],
        jit_kernels: vec![FAST_C],
        defines: defines(),
        wrapper_names: WRAPPER_NAMES.to_vec(),
    }
}
