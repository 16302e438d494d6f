//! Lesson 05's building blocks, shared by the lesson (`main.rs`) and the
//! benchmark `05_allreduce_bench` (in `benchmarks/src/bin/`): the kernel
//! sources, which `device_build::program` builds at run time (nvcc and its
//! host shim, or NVRTC + nvJitLink with NCCL's device library), and the
//! check that the kernel's fixed grid fits this rank's share of the GPU.

use anyhow::{Context, Result};
use common::CannotRun;
use cudarc::driver::{result as cu, sys as cu_sys};
use device_build::route::Program;
use device_build::Source;

/// NVIDIA's example kernel on the C++ device API (the nvcc route).
pub const KERNEL: Source = Source {
    file: "allreduce_lsa.cu",
    text: include_str!("../kernels/allreduce_lsa.cu"),
};
/// The kernel's entry point (declared `extern "C"` in both of its sources).
pub const KERNEL_NAME: &str = "allreduce_lsa";
/// NVIDIA's kernel on nccl_device_wrapper.h's C API (the jit route).
pub const KERNEL_C: Source = Source {
    file: "allreduce_lsa_c.cu",
    text: include_str!("../kernels/allreduce_lsa_c.cu"),
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
/// The program name the build cache is kept under.
pub const CACHE_NAME: &str = "05_device_lsa";

/// Threads per block of the kernel (compiled into its launch bounds).
pub const THREADS: u32 = 512;

/// The lesson's device code, for both routes, compiled with the block size.
pub fn program() -> Program {
    Program {
        nvcc_kernels: vec![KERNEL],
        jit_kernels: vec![KERNEL_C],
        defines: vec![("ALLREDUCE_THREADS".into(), THREADS.to_string())],
        wrapper_names: WRAPPER_NAMES.to_vec(),
    }
}

/// How many blocks of `threads` threads of `kernel` one multiprocessor holds
/// at once (`cuOccupancyMaxActiveBlocksPerMultiprocessor`, no dynamic
/// shared memory: the kernel uses none).
///
/// # Safety
/// `kernel` must come from a module that is still loaded.
pub unsafe fn blocks_per_multiprocessor(kernel: cu_sys::CUfunction, threads: u32) -> Result<u32> {
    let blocks = cu::occupancy::max_active_block_per_multiprocessor(kernel, threads as i32, 0)
        .context("cuOccupancyMaxActiveBlocksPerMultiprocessor")?;
    Ok(blocks.max(0) as u32)
}

/// A kernel of `blocks` fixed blocks (NVIDIA's example, 16) whose blocks
/// wait at LSA barriers, on a GPU of which this rank may use `share`
/// resident blocks: refused (exit code 2) when they would not all fit
/// beside the other ranks' on the same GPU.
pub fn check_fixed_grid(blocks: u32, share: u32) -> Result<(), CannotRun> {
    if blocks <= share {
        return Ok(());
    }
    Err(CannotRun::new(
        format!(
            "the kernel runs {blocks} blocks that wait for each other's peers at LSA barriers, \
             but this rank's share of the blocks its GPU holds at once is {share}: too many ranks share the GPU"
        ),
        "run fewer ranks per GPU",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fixed_grid_must_fit_the_share() {
        assert!(check_fixed_grid(16, 16).is_ok());
        let err = check_fixed_grid(16, 15).unwrap_err();
        assert!(
            err.reason.contains("is 15: too many ranks share the GPU"),
            "{}",
            err.reason
        );
    }
}
