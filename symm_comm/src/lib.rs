//! `symm_all_reduce`: a device-side AllReduce that your own kernel calls,
//! over symmetric memory held by NCCL (a window and a device communicator)
//! or by NVSHMEM (the symmetric heap). Shaped like PyTorch's
//! `torch/csrc/_extern_triton`: the device library lives apart from its
//! users, one host side per backend, the Triton binding beside it.
//!
//! * [`HEADER`] (`kernels/symm_comm.cuh`): the device library, compiled into
//!   your CUDA source ([`with_library`]);
//! * [`context`]: the `#[repr(C)]` contexts your kernel receives, their
//!   bytes as the device reads them, and device memory to hold them;
//! * [`codes`]: the return codes with their descriptions, and the same
//!   argument checks on the host;
//! * [`nvshmem`]: NVSHMEM's host side (init, heap, module state) as RAII
//!   guards; NVSHMEM is found and your kernels built with it by
//!   `device_build::nvshmem`;
//! * [`triton`]: the Triton binding (`triton/symm.py`) and the library as
//!   LLVM bitcode (`triton/symm_comm_nccl.bc`, made by `triton/build-bitcode`).
//!
//! See `README.md`, "Use it in your kernel", and the two examples
//! (`cargo run --release --example cuda_kernel`, `--example triton_kernel`).

pub mod codes;
pub mod context;
pub mod nvshmem;
pub mod triton;

/// The device library, `kernels/symm_comm.cuh`. Compile it in the same
/// translation unit as the kernel that calls it ([`with_library`]): the
/// library's functions then inline into your kernel, and your kernel's
/// launch bounds hold for them.
pub const HEADER: &str = include_str!("../kernels/symm_comm.cuh");

/// `-D` that compiles the NCCL backend in (`SYMM_WITH_NCCL`).
pub const WITH_NCCL: &str = "SYMM_WITH_NCCL";
/// `-D` that compiles the NVSHMEM backend in (`SYMM_WITH_NVSHMEM`).
pub const WITH_NVSHMEM: &str = "SYMM_WITH_NVSHMEM";

/// What the NCCL backend calls in NCCL 2.32.3's `nccl_device_wrapper.h`
/// (device_build's jit route checks the header has them before compiling).
pub const WRAPPER_NAMES: [&str; 6] = [
    "ncclCoopAnyInitCta",
    "ncclLsaBarrierSession_C",
    "ncclLsaBarrierSessionInit",
    "ncclLsaBarrierSessionSync",
    "ncclLsaBarrierSessionDestroy",
    "ncclGetPeerPointerTeam",
];

/// Your CUDA source with the library in front of it: one translation unit.
pub fn with_library(user_source: &str) -> String {
    format!("{HEADER}\n{user_source}")
}
