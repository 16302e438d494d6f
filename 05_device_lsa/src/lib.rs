//! Lesson 05's building blocks, shared by the lesson (`main.rs`) and its
//! benchmark (`bin/bench.rs`): the kernel sources, which the `device_build`
//! crate builds at run time (nvcc and its host shim), loading and launching
//! kernels ([`launch`]), and the fast kernels' choice of algorithm and grid
//! ([`fast`]).

pub mod fast;
pub mod launch;

use anyhow::Result;
use common::nccl::loaded_nccl;
use common::CannotRun;
use device_build::nvcc::{
    check_same_release, find_nccl_headers, find_nvcc, header_version, nvcc_version, Target,
};
use device_build::{Env, Source};

/// NVIDIA's example kernel, compiled into the binary as source.
pub const KERNEL: Source = Source {
    file: "allreduce_lsa.cu",
    text: include_str!("../kernels/allreduce_lsa.cu"),
};
/// The kernel's entry point (declared `extern "C"` in the source).
pub const KERNEL_NAME: &str = "allreduce_lsa";
/// The fast kernels (`--kernel fast`), also compiled in as source.
pub const FAST: Source = Source {
    file: "allreduce_lsa_fast.cu",
    text: include_str!("../kernels/allreduce_lsa_fast.cu"),
};
/// 8-byte units one block of the fast one-shot kernel carries: its LL
/// staging buffer is sized for this, and the kernel is compiled with it.
pub const LL_UNITS_PER_BLOCK: u32 = 2048;
/// The program name the build cache is kept under.
pub const CACHE_NAME: &str = "05_device_lsa";

/// What every kernel source is compiled with: the block size and the LL
/// staging buffer's size per block.
pub fn defines() -> Vec<(String, String)> {
    vec![
        ("ALLREDUCE_THREADS".into(), THREADS.to_string()),
        ("LL_UNITS_PER_BLOCK".into(), LL_UNITS_PER_BLOCK.to_string()),
    ]
}

/// Threads per block of every kernel of this lesson (compiled into their
/// launch bounds).
pub const THREADS: u32 = 512;

/// The lesson's preflight tool check (`Lesson::tool`): nvcc is found, so that
/// a machine without it hears so before any rank starts, beside any other
/// problem, rather than at Step 6 on every rank.
pub fn nvcc_found() -> Result<(), CannotRun> {
    find_nvcc(&Env::from_process()).map(drop)
}

/// Everything the build depends on: nvcc, the headers of the loaded NCCL (of
/// the same release), and this GPU's architecture.
pub fn build_target(major: i32, minor: i32) -> Result<Target> {
    let env = Env::from_process();
    let nccl = loaded_nccl()?;
    let nvcc = find_nvcc(&env)?;
    let include = find_nccl_headers(&env, &nccl.path)?;
    check_same_release(
        header_version(&include)?,
        &include,
        nccl.version,
        &nccl.path,
    )?;
    Ok(Target {
        arch: format!("sm_{major}{minor}"),
        nvcc_version: nvcc_version(&nvcc)?,
        nvcc,
        include,
        nccl: nccl.version,
        library: nccl.path,
        defines: defines(),
        kernels: vec![KERNEL, FAST],
    })
}
