//! Launching a kernel of a raw module (`CUfunction`) through a builder, as
//! cudarc's `stream.launch_builder(&func)` launches one of its own modules.
//!
//! The lessons' cubins are linked with NCCL's device code and loaded by
//! `device_build`, so their kernels are raw driver handles, which cudarc's
//! builder does not take. `cuLaunchKernel` wants one pointer per kernel
//! parameter and copies as many bytes from it as the parameter's type has;
//! [`KernelLaunch`] collects those pointers from borrowed values, so each
//! value outlives the launch (the borrow checker sees to it) and no program
//! writes a `[*mut c_void; N]` by hand:
//!
//! ```ignore
//! let mut launch = common::kernel::launch_builder(&stream, kernel);
//! launch.arg(&send_window).arg(&offset).arg(&count).arg_bytes(dev_comm.kernel_arg());
//! unsafe { launch.launch(LaunchConfig { grid_dim: (16, 1, 1), block_dim: (512, 1, 1), shared_mem_bytes: 0 }) }?;
//! ```

use std::ffi::c_void;
use std::marker::PhantomData;

use cudarc::driver::{result as cu, sys as cu_sys, CudaStream, DriverError, LaunchConfig};

/// The arguments of one launch, in the order of the kernel's parameters:
/// one pointer per parameter, each to a value borrowed for `'a`.
#[derive(Default)]
pub struct KernelArgs<'a> {
    pointers: Vec<*mut c_void>,
    borrows: PhantomData<&'a ()>,
}

impl<'a> KernelArgs<'a> {
    /// The next parameter, by value: `size_of::<T>()` bytes copied from
    /// `value` when the kernel is launched (a number, a device pointer, an
    /// `ncclWindow_t`, a `#[repr(C)]` struct).
    pub fn arg<T: Copy>(&mut self, value: &'a T) -> &mut Self {
        self.pointers.push((value as *const T).cast_mut().cast());
        self
    }

    /// The next parameter, by value, from bytes whose layout only C++ knows
    /// (an `ncclDevComm`): the kernel copies as many bytes as its
    /// parameter's type has, which must be at most `bytes.len()`.
    pub fn arg_bytes(&mut self, bytes: &'a [u8]) -> &mut Self {
        self.pointers.push(bytes.as_ptr().cast_mut().cast());
        self
    }

    /// The array `cuLaunchKernel` takes, valid while the values are borrowed.
    pub fn pointers(&mut self) -> &mut [*mut c_void] {
        &mut self.pointers
    }
}

/// One launch of `function` on a stream, its arguments added in the order of
/// the kernel's parameters. Made by [`launch_builder`].
pub struct KernelLaunch<'a> {
    stream: &'a CudaStream,
    function: cu_sys::CUfunction,
    args: KernelArgs<'a>,
}

/// A launch of `function` on `stream`; add its arguments with
/// [`KernelLaunch::arg`] and [`KernelLaunch::arg_bytes`], then
/// [`KernelLaunch::launch`] it.
pub fn launch_builder(stream: &CudaStream, function: cu_sys::CUfunction) -> KernelLaunch<'_> {
    KernelLaunch {
        stream,
        function,
        args: KernelArgs::default(),
    }
}

impl<'a> KernelLaunch<'a> {
    /// See [`KernelArgs::arg`].
    pub fn arg<T: Copy>(&mut self, value: &'a T) -> &mut Self {
        self.args.arg(value);
        self
    }

    /// See [`KernelArgs::arg_bytes`].
    pub fn arg_bytes(&mut self, bytes: &'a [u8]) -> &mut Self {
        self.args.arg_bytes(bytes);
        self
    }

    /// The arguments added so far, for a helper that adds several at once
    /// (a kernel's parameters taken from one struct, say).
    pub fn args(&mut self) -> &mut KernelArgs<'a> {
        &mut self.args
    }

    /// `cuLaunchKernel` on the stream, with the stream's context current.
    ///
    /// # Safety
    /// The arguments must match the kernel's parameters in number, order and
    /// type, the module the kernel came from must still be loaded, and the
    /// kernel must touch only memory that is valid while it runs.
    pub unsafe fn launch(&mut self, config: LaunchConfig) -> Result<(), DriverError> {
        self.stream.context().bind_to_thread()?;
        cu::launch_kernel(
            self.function,
            config.grid_dim,
            config.block_dim,
            config.shared_mem_bytes,
            self.stream.cu_stream(),
            self.args.pointers(),
        )
    }

    /// `cuLaunchCooperativeKernel`: every block of the grid resident at once,
    /// or an error instead of a launch.
    ///
    /// # Safety
    /// As for [`launch`](Self::launch).
    pub unsafe fn launch_cooperative(&mut self, config: LaunchConfig) -> Result<(), DriverError> {
        self.stream.context().bind_to_thread()?;
        cu::launch_cooperative_kernel(
            self.function,
            config.grid_dim,
            config.block_dim,
            config.shared_mem_bytes,
            self.stream.cu_stream(),
            self.args.pointers(),
        )
    }
}

/// A one-dimensional grid of `blocks` blocks of `threads` threads, no
/// dynamic shared memory.
pub fn grid(blocks: u32, threads: u32) -> LaunchConfig {
    LaunchConfig {
        grid_dim: (blocks, 1, 1),
        block_dim: (threads, 1, 1),
        shared_mem_bytes: 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pointers the arguments give, read back as the driver reads
    /// them: each points to the value it was given, in order.
    #[test]
    fn each_argument_points_to_its_value_in_order() {
        let (window, offset, count) = (0x1234usize as *mut c_void, 8usize, 1024u64);
        let opaque = [7u8; 24];
        let mut args = KernelArgs::default();
        args.arg(&window)
            .arg(&offset)
            .arg(&count)
            .arg_bytes(&opaque);
        let pointers = args.pointers();
        assert_eq!(pointers.len(), 4);
        // SAFETY: each pointer was made from a live value of that type above.
        unsafe {
            assert_eq!(*pointers[0].cast::<*mut c_void>(), window);
            assert_eq!(*pointers[1].cast::<usize>(), 8);
            assert_eq!(*pointers[2].cast::<u64>(), 1024);
            assert_eq!(*pointers[3].cast::<[u8; 24]>(), [7u8; 24]);
        }
    }

    #[test]
    fn a_grid_is_one_dimensional_without_shared_memory() {
        let config = grid(16, 512);
        assert_eq!(config.grid_dim, (16, 1, 1));
        assert_eq!(config.block_dim, (512, 1, 1));
        assert_eq!(config.shared_mem_bytes, 0);
    }
}
