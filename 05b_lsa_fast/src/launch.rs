//! Launching lesson 05b's fast kernels with the CUDA driver API (the cubin is
//! loaded by `device_build::Module`).

use std::ffi::c_void;

use anyhow::{Context, Result};
use cudarc::driver::{result as cu, sys as cu_sys, CudaStream};

/// How many blocks of `threads` threads of `kernel` one multiprocessor holds
/// at once (`cuOccupancyMaxActiveBlocksPerMultiprocessor`, no dynamic
/// shared memory: none of this lesson's kernels uses any).
///
/// # Safety
/// `kernel` must come from a module that is still loaded ([`Module::function`]).
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
/// device communicator's bytes and any `extra` by-value arguments after it.
/// cuLaunchKernel takes one pointer per kernel parameter and copies as many
/// bytes as the parameter's type has, so opaque structs travel by value.
///
/// # Safety
/// The kernel's parameters must be the six of [`AllReduceArgs`] plus one per
/// `extra`, each pointing to a value of the parameter's type and size.
pub unsafe fn launch_allreduce(
    kernel: cu_sys::CUfunction,
    grid: u32,
    block: u32,
    stream: &CudaStream,
    args: AllReduceArgs,
    dev_comm: *mut c_void,
    extra: &[*mut c_void],
) -> Result<()> {
    let AllReduceArgs {
        mut send_window,
        mut send_offset,
        mut recv_window,
        mut recv_offset,
        mut count,
    } = args;
    let mut params: Vec<*mut c_void> = vec![
        (&mut send_window as *mut common::nccl::sys::ncclWindow_t).cast(),
        (&mut send_offset as *mut usize).cast(),
        (&mut recv_window as *mut common::nccl::sys::ncclWindow_t).cast(),
        (&mut recv_offset as *mut usize).cast(),
        (&mut count as *mut usize).cast(),
        dev_comm,
    ];
    params.extend_from_slice(extra);
    cu::launch_kernel(
        kernel,
        (grid, 1, 1),
        (block, 1, 1),
        0,
        stream.cu_stream(),
        &mut params,
    )
    .context("cuLaunchKernel")
}
