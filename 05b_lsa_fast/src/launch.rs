//! Launching lesson 05b's fast kernels with the CUDA driver API (the cubin is
//! loaded by `device_build::Module`).

use anyhow::{Context, Result};
use cudarc::driver::{result as cu, sys as cu_sys, CudaStream};

/// How many blocks of `threads` threads of `kernel` one multiprocessor holds
/// at once (`cuOccupancyMaxActiveBlocksPerMultiprocessor`, no dynamic
/// shared memory: none of this lesson's kernels uses any).
///
/// # Safety
/// `kernel` must come from a module that is still loaded ([`device_build::Module::function`]).
pub unsafe fn blocks_per_multiprocessor(kernel: cu_sys::CUfunction, threads: u32) -> Result<u32> {
    let blocks = cu::occupancy::max_active_block_per_multiprocessor(kernel, threads as i32, 0)
        .context("cuOccupancyMaxActiveBlocksPerMultiprocessor")?;
    Ok(blocks.max(0) as u32)
}

/// The arguments every AllReduce kernel of this lesson starts with:
/// `(ncclWindow_t sendwin, size_t sendoffset, ncclWindow_t recvwin, size_t
/// recvoffset, size_t count, ncclDevComm devComm)`.
#[derive(Debug, Clone, Copy)]
pub struct AllReduceArgs {
    pub send_window: common::nccl::sys::ncclWindow_t,
    pub send_offset: usize,
    pub recv_window: common::nccl::sys::ncclWindow_t,
    pub recv_offset: usize,
    pub count: usize,
}

/// `cuLaunchKernel(kernel, grid, block, ...)` on `stream` with `args`, the
/// device communicator's bytes and, if given, one more by-value argument
/// after it (the one-shot's `ncclLLA2AHandle`). cuLaunchKernel takes one
/// pointer per kernel parameter and copies as many bytes as the parameter's
/// type has, so opaque structs travel by value; `common::kernel`'s builder
/// collects the pointers.
///
/// # Safety
/// The kernel's parameters must be the six of [`AllReduceArgs`] plus
/// `extra`'s, of these types, and its module must be loaded.
pub unsafe fn launch_allreduce(
    kernel: cu_sys::CUfunction,
    grid: u32,
    block: u32,
    stream: &CudaStream,
    args: AllReduceArgs,
    dev_comm: &[u8],
    extra: Option<&[u8]>,
) -> Result<()> {
    let mut launch = common::kernel::launch_builder(stream, kernel);
    launch
        .arg(&args.send_window)
        .arg(&args.send_offset)
        .arg(&args.recv_window)
        .arg(&args.recv_offset)
        .arg(&args.count)
        .arg_bytes(dev_comm);
    if let Some(extra) = extra {
        launch.arg_bytes(extra);
    }
    launch
        .launch(common::kernel::grid(grid, block))
        .context("cuLaunchKernel")
}
