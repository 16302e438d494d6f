//! Device code built at run time, for the GPU in use and the NCCL this
//! process loaded.
//!
//! Code on NCCL's device API only runs with the NCCL release it was built
//! against, so a program that ships as source (a lesson) builds its kernels
//! when it runs. Two routes for CUDA kernels on NCCL:
//!
//! * [`nvcc`]: the CUDA toolkit's compiler, against the loaded NCCL's
//!   headers, plus a small host shim ([`shim`]) that owns every NCCL struct
//!   whose layout changes between releases. Works from NCCL 2.28 on; needs a
//!   CUDA toolkit.
//! * [`jit`]: NVRTC and nvJitLink (from pip wheels or a toolkit), linked
//!   with NCCL's own device library, `libnccl_device.ltoir`, through the C
//!   API of `nccl_device_wrapper.h`. NCCL 2.32.3; no toolkit.
//!
//! Two more, each for one kind of device code, each one call for a program
//! with the same notes of what it ran:
//!
//! * [`nvshmem`]: kernels on NVSHMEM's device API, NVRTC then nvJitLink
//!   with `libnvshmem_device.a` (lesson 06c), and where NVSHMEM is found;
//! * [`triton`]: a Triton kernel, compiled by Triton's own compiler (a
//!   Python with Triton 3.6+) with a library's LLVM bitcode and NCCL's
//!   `libnccl_device.bc` (lesson 06b).
//!
//! [`route`] chooses between nvcc and jit (`--build auto|nvcc|jit`), [`program`]
//! makes the choice and the build one call for a lesson, and [`Module`]
//! loads what either made. Rank 0 prints the exact commands a build ran
//! ([`command`], [`program::Built::print_commands`]), or the cached files
//! it used.
//!
//! Every route caches its output under the same rules ([`cache`]): a
//! directory private to this user, never half-written, named by a hash of
//! everything that went into the build.

pub mod cache;
pub mod command;
pub mod env;
pub mod jit;
pub mod module;
pub mod nvcc;
pub mod nvshmem;
pub mod program;
pub mod route;
pub mod shim;
pub mod triton;

pub use cache::CacheRoot;
pub use env::Env;
pub use module::Module;

/// One CUDA source file of a program, compiled into `<stem>.cubin`. The
/// program owns its sources (`include_str!`); this crate only builds them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Source {
    /// The file name, e.g. `allreduce_lsa.cu`.
    pub file: &'static str,
    pub text: &'static str,
}

impl Source {
    /// The name of the cubin built from this source.
    pub fn cubin(&self) -> String {
        let stem = self.file.strip_suffix(".cu").unwrap_or(self.file);
        format!("{stem}.cubin")
    }
}
