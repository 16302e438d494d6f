//! Launching the user kernels of `kernels/tp_tail.cu` through
//! `common::kernel`'s builder. The kernels that call `symm_all_reduce` are
//! launched cooperatively (`cuLaunchCooperativeKernel`): the call waits for
//! every block of the grid, so all blocks must be resident at once, and a
//! cooperative launch makes the driver check that (it fails with
//! COOPERATIVE_LAUNCH_TOO_LARGE instead of hanging).

use anyhow::{Context, Result};
use common::kernel::{self, KernelArgs};
use cudarc::driver::{sys as cu_sys, CudaStream, LaunchConfig};

use symm_comm::codes::Shape;

/// Device addresses and shape of one layer-tail call.
#[derive(Debug, Clone, Copy)]
pub struct LayerArgs {
    /// The context (device address), or 0 for a null context.
    pub context: u64,
    /// This rank's address of the symmetric buffer's first byte.
    pub buffer: u64,
    /// Where the partial output starts in the buffer, in bytes.
    pub byte_offset: usize,
    pub x: u64,
    pub w: u64,
    pub residual: u64,
    pub gamma: u64,
    pub out: u64,
    pub tokens: i32,
    pub hidden: i32,
    pub k: i32,
    pub eps: f32,
    pub dtype: i32,
    /// One int the kernel writes symm_all_reduce's return code into.
    pub status: u64,
}

impl LayerArgs {
    /// The parameters both fused kernels start with, in their order:
    /// `ctx, buffer, byte_offset, x, w, residual, gamma, out, tokens,
    /// hidden, k, eps`. `tp_tail_fused` goes on with `dtype, status`;
    /// Triton's kernel, whose dtype is compiled in, with `status`.
    pub(crate) fn fused_params<'a>(&'a self, args: &mut KernelArgs<'a>) {
        args.arg(&self.context)
            .arg(&self.buffer)
            .arg(&self.byte_offset)
            .arg(&self.x)
            .arg(&self.w)
            .arg(&self.residual)
            .arg(&self.gamma)
            .arg(&self.out)
            .arg(&self.tokens)
            .arg(&self.hidden)
            .arg(&self.k)
            .arg(&self.eps);
    }
}

/// `tp_tail_fused<<<blocks, threads>>>`, cooperative.
///
/// # Safety
/// `kernel` must be `tp_tail_fused`; every address must be live device
/// memory of the sizes the layer needs.
pub unsafe fn fused(
    kernel: cu_sys::CUfunction,
    blocks: u32,
    threads: u32,
    stream: &CudaStream,
    args: LayerArgs,
) -> Result<()> {
    let mut launch = kernel::launch_builder(stream, kernel);
    args.fused_params(launch.args());
    launch.arg(&args.dtype).arg(&args.status);
    // SAFETY: the caller's promise; the arguments are tp_tail_fused's.
    unsafe { launch.launch_cooperative(kernel::grid(blocks, threads)) }
        .context("cuLaunchCooperativeKernel(tp_tail_fused)")
}

/// `tp_compute<<<blocks, threads>>>(x, w, partial, tokens, hidden, k,
/// dtype)`: the partial output into `partial`.
///
/// # Safety
/// As [`fused`]; `partial` holds tokens x hidden elements of the dtype.
pub unsafe fn compute(
    kernel: cu_sys::CUfunction,
    blocks: u32,
    threads: u32,
    stream: &CudaStream,
    args: LayerArgs,
    partial: u64,
) -> Result<()> {
    let mut launch = kernel::launch_builder(stream, kernel);
    launch
        .arg(&args.x)
        .arg(&args.w)
        .arg(&partial)
        .arg(&args.tokens)
        .arg(&args.hidden)
        .arg(&args.k)
        .arg(&args.dtype);
    // SAFETY: the caller's promise; the arguments are tp_compute's.
    unsafe { launch.launch(kernel::grid(blocks, threads)) }.context("cuLaunchKernel(tp_compute)")
}

/// `tp_residual_rmsnorm<<<blocks, threads>>>(sum, residual, gamma, out,
/// tokens, hidden, eps, dtype)`: residual + RMSNorm on `sum`.
///
/// # Safety
/// As [`fused`]; `sum` holds tokens x hidden elements of the dtype.
pub unsafe fn epilogue(
    kernel: cu_sys::CUfunction,
    blocks: u32,
    threads: u32,
    stream: &CudaStream,
    args: LayerArgs,
    sum: u64,
) -> Result<()> {
    let mut launch = kernel::launch_builder(stream, kernel);
    launch
        .arg(&sum)
        .arg(&args.residual)
        .arg(&args.gamma)
        .arg(&args.out)
        .arg(&args.tokens)
        .arg(&args.hidden)
        .arg(&args.eps)
        .arg(&args.dtype);
    // SAFETY: the caller's promise; the arguments are tp_residual_rmsnorm's.
    unsafe { launch.launch(kernel::grid(blocks, threads)) }
        .context("cuLaunchKernel(tp_residual_rmsnorm)")
}

/// The arguments of `symm_all_reduce_kernel`, which passes them on to
/// `symm_all_reduce` unchanged.
#[derive(Debug, Clone, Copy)]
pub struct AllReduceCall {
    pub context: u64,
    pub local_ptr: u64,
    pub byte_offset: usize,
    pub num_elements: usize,
    pub reduce_op: i32,
    pub dtype: i32,
    pub status: u64,
}

impl AllReduceCall {
    /// `symm_all_reduce_kernel`'s parameters, in its order.
    fn params<'a>(&'a self, args: &mut KernelArgs<'a>) {
        args.arg(&self.context)
            .arg(&self.local_ptr)
            .arg(&self.byte_offset)
            .arg(&self.num_elements)
            .arg(&self.reduce_op)
            .arg(&self.dtype)
            .arg(&self.status);
    }
}

/// `symm_all_reduce_kernel<<<blocks, threads>>>`, cooperative.
///
/// # Safety
/// `kernel` must be `symm_all_reduce_kernel`; `status` must be live device
/// memory for one int. (The call itself checks the rest and returns a code.)
pub unsafe fn all_reduce(
    kernel: cu_sys::CUfunction,
    blocks: u32,
    threads: u32,
    stream: &CudaStream,
    call: AllReduceCall,
) -> Result<()> {
    // SAFETY: the caller's promise.
    unsafe { all_reduce_shaped(kernel, Shape::OneD, blocks, threads, stream, call) }
}

/// [`all_reduce`] launched in `shape` (the same threads in all): a shape
/// other than 1-D must get `SYMM_ERR_GRID_SHAPE`.
///
/// # Safety
/// As [`all_reduce`].
pub unsafe fn all_reduce_shaped(
    kernel: cu_sys::CUfunction,
    shape: Shape,
    blocks: u32,
    threads: u32,
    stream: &CudaStream,
    call: AllReduceCall,
) -> Result<()> {
    let (grid_dim, block_dim) = shape.dims(blocks, threads);
    let mut launch = kernel::launch_builder(stream, kernel);
    call.params(launch.args());
    let config = LaunchConfig {
        grid_dim,
        block_dim,
        shared_mem_bytes: 0,
    };
    // SAFETY: the caller's promise; the arguments are the kernel's.
    unsafe { launch.launch_cooperative(config) }
        .context("cuLaunchCooperativeKernel(symm_all_reduce_kernel)")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Reads the value argument `i` points to, as the driver reads it.
    fn read<T: Copy>(args: &mut KernelArgs<'_>, i: usize) -> T {
        // SAFETY: the tests below read each pointer as the type it was
        // made from, while the value it points to is borrowed.
        unsafe { *args.pointers()[i].cast::<T>() }
    }

    fn layer() -> LayerArgs {
        LayerArgs {
            context: 1,
            buffer: 2,
            byte_offset: 3,
            x: 4,
            w: 5,
            residual: 6,
            gamma: 7,
            out: 8,
            tokens: 9,
            hidden: 10,
            k: 11,
            eps: 12.5,
            dtype: 13,
            status: 14,
        }
    }

    /// The fused kernels' shared parameters come in tp_tail.cu's order:
    /// `(ctx, buffer, byte_offset, x, w, residual, gamma, out, tokens,
    /// hidden, k, eps, ...)`, each pointing into the `LayerArgs` itself.
    #[test]
    fn the_fused_parameters_are_in_the_kernels_order() {
        let layer = layer();
        let mut args = KernelArgs::default();
        layer.fused_params(&mut args);
        assert_eq!(args.pointers().len(), 12);
        for (i, address) in [(0, 1u64), (1, 2), (3, 4), (4, 5), (5, 6), (6, 7), (7, 8)] {
            assert_eq!(read::<u64>(&mut args, i), address, "argument {i}");
        }
        assert_eq!(read::<usize>(&mut args, 2), 3);
        assert_eq!(read::<i32>(&mut args, 8), 9);
        assert_eq!(read::<i32>(&mut args, 9), 10);
        assert_eq!(read::<i32>(&mut args, 10), 11);
        assert_eq!(read::<f32>(&mut args, 11), 12.5);
        assert_eq!(
            args.pointers()[0].cast_const(),
            (&layer.context as *const u64).cast()
        );
    }

    /// `symm_all_reduce_kernel(ctx, local_ptr, byte_offset, num_elements,
    /// reduce_op, dtype, status)`.
    #[test]
    fn the_all_reduce_parameters_are_in_the_kernels_order() {
        let call = AllReduceCall {
            context: 1,
            local_ptr: 2,
            byte_offset: 3,
            num_elements: 4,
            reduce_op: 5,
            dtype: 6,
            status: 7,
        };
        let mut args = KernelArgs::default();
        call.params(&mut args);
        assert_eq!(args.pointers().len(), 7);
        assert_eq!(read::<u64>(&mut args, 0), 1);
        assert_eq!(read::<u64>(&mut args, 1), 2);
        assert_eq!(read::<usize>(&mut args, 2), 3);
        assert_eq!(read::<usize>(&mut args, 3), 4);
        assert_eq!(read::<i32>(&mut args, 4), 5);
        assert_eq!(read::<i32>(&mut args, 5), 6);
        assert_eq!(read::<u64>(&mut args, 6), 7);
    }
}
