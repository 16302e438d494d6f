//! Launching the user kernels of `kernels/tp_tail.cu` with the CUDA driver
//! API. The kernels that call `symm_all_reduce` are launched cooperatively
//! (`cuLaunchCooperativeKernel`): the call waits for every block of the grid,
//! so all blocks must be resident at once, and a cooperative launch makes the
//! driver check that (it fails with COOPERATIVE_LAUNCH_TOO_LARGE instead of
//! hanging).

use std::ffi::c_void;

use anyhow::{Context, Result};
use cudarc::driver::{result as cu, sys as cu_sys, CudaStream};

use symm_comm::codes::Shape;

/// How a kernel is launched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Launch {
    /// `cuLaunchKernel`.
    Plain,
    /// `cuLaunchCooperativeKernel`: every block resident at once, or an error.
    Cooperative,
}

/// `kernel<<<blocks, threads, shared, stream>>>(params)` on a 1-D grid,
/// `grid` = (blocks, threads); `name` names the kernel in the error.
///
/// # Safety
/// `params` must point to live values of the kernel's parameters, in its
/// order and with their sizes.
pub(crate) unsafe fn launch_1d(
    how: Launch,
    kernel: cu_sys::CUfunction,
    (blocks, threads): (u32, u32),
    shared: u32,
    stream: &CudaStream,
    params: &mut [*mut c_void],
    name: &str,
) -> Result<()> {
    launch_shaped(
        how,
        kernel,
        Shape::OneD.dims(blocks, threads),
        shared,
        stream,
        params,
        name,
    )
}

/// [`launch_1d`] with any grid and block: the bad-input cases launch 2-D
/// ones on purpose.
///
/// # Safety
/// As [`launch_1d`].
#[allow(clippy::too_many_arguments)]
unsafe fn launch_shaped(
    how: Launch,
    kernel: cu_sys::CUfunction,
    (grid, block): ((u32, u32, u32), (u32, u32, u32)),
    shared: u32,
    stream: &CudaStream,
    params: &mut [*mut c_void],
    name: &str,
) -> Result<()> {
    let stream = stream.cu_stream();
    match how {
        Launch::Plain => cu::launch_kernel(kernel, grid, block, shared, stream, params)
            .with_context(|| format!("cuLaunchKernel({name})")),
        Launch::Cooperative => {
            cu::launch_cooperative_kernel(kernel, grid, block, shared, stream, params)
                .with_context(|| format!("cuLaunchCooperativeKernel({name})"))
        }
    }
}

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
    /// `tp_tail_fused`'s parameters in its order, as the driver takes them:
    /// pointers into `self`, which must stay in place until the launch
    /// returns. (Triton's kernel takes the same ones but `dtype`.)
    pub(crate) fn param_ptrs(&mut self) -> [*mut c_void; 14] {
        [
            (&mut self.context as *mut u64).cast(),
            (&mut self.buffer as *mut u64).cast(),
            (&mut self.byte_offset as *mut usize).cast(),
            (&mut self.x as *mut u64).cast(),
            (&mut self.w as *mut u64).cast(),
            (&mut self.residual as *mut u64).cast(),
            (&mut self.gamma as *mut u64).cast(),
            (&mut self.out as *mut u64).cast(),
            (&mut self.tokens as *mut i32).cast(),
            (&mut self.hidden as *mut i32).cast(),
            (&mut self.k as *mut i32).cast(),
            (&mut self.eps as *mut f32).cast(),
            (&mut self.dtype as *mut i32).cast(),
            (&mut self.status as *mut u64).cast(),
        ]
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
    mut args: LayerArgs,
) -> Result<()> {
    let mut params = args.param_ptrs();
    launch_1d(
        Launch::Cooperative,
        kernel,
        (blocks, threads),
        0,
        stream,
        &mut params,
        "tp_tail_fused",
    )
}

/// `tp_compute<<<blocks, threads>>>`: the partial output into `partial`.
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
    let (mut x, mut w, mut partial) = (args.x, args.w, partial);
    let (mut tokens, mut hidden, mut k, mut dtype) = (args.tokens, args.hidden, args.k, args.dtype);
    let mut params: [*mut c_void; 7] = [
        (&mut x as *mut u64).cast(),
        (&mut w as *mut u64).cast(),
        (&mut partial as *mut u64).cast(),
        (&mut tokens as *mut i32).cast(),
        (&mut hidden as *mut i32).cast(),
        (&mut k as *mut i32).cast(),
        (&mut dtype as *mut i32).cast(),
    ];
    launch_1d(
        Launch::Plain,
        kernel,
        (blocks, threads),
        0,
        stream,
        &mut params,
        "tp_compute",
    )
}

/// `tp_residual_rmsnorm<<<blocks, threads>>>`: residual + RMSNorm on `sum`.
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
    let (mut sum, mut residual, mut gamma, mut out) = (sum, args.residual, args.gamma, args.out);
    let (mut tokens, mut hidden, mut eps, mut dtype) =
        (args.tokens, args.hidden, args.eps, args.dtype);
    let mut params: [*mut c_void; 8] = [
        (&mut sum as *mut u64).cast(),
        (&mut residual as *mut u64).cast(),
        (&mut gamma as *mut u64).cast(),
        (&mut out as *mut u64).cast(),
        (&mut tokens as *mut i32).cast(),
        (&mut hidden as *mut i32).cast(),
        (&mut eps as *mut f32).cast(),
        (&mut dtype as *mut i32).cast(),
    ];
    launch_1d(
        Launch::Plain,
        kernel,
        (blocks, threads),
        0,
        stream,
        &mut params,
        "tp_residual_rmsnorm",
    )
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
    all_reduce_shaped(kernel, Shape::OneD, blocks, threads, stream, call)
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
    let AllReduceCall {
        mut context,
        mut local_ptr,
        mut byte_offset,
        mut num_elements,
        mut reduce_op,
        mut dtype,
        mut status,
    } = call;
    let mut params: [*mut c_void; 7] = [
        (&mut context as *mut u64).cast(),
        (&mut local_ptr as *mut u64).cast(),
        (&mut byte_offset as *mut usize).cast(),
        (&mut num_elements as *mut usize).cast(),
        (&mut reduce_op as *mut i32).cast(),
        (&mut dtype as *mut i32).cast(),
        (&mut status as *mut u64).cast(),
    ];
    launch_shaped(
        Launch::Cooperative,
        kernel,
        shape.dims(blocks, threads),
        0,
        stream,
        &mut params,
        "symm_all_reduce_kernel",
    )
}
