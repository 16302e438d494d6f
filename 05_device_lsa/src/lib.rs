//! Lesson 05's building blocks, shared by the lesson (`main.rs`) and the
//! benchmark `05_allreduce_bench` (in `benchmarks/src/bin/`): the kernel
//! sources, which the `device_build` crate builds at run time (nvcc and its
//! host shim, or NVRTC + nvJitLink with NCCL's device library), and the
//! check that the kernel's fixed grid fits this rank's share of the GPU.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use common::nccl::loaded_nccl;
use common::{CannotRun, NcclVersion};
use cudarc::driver::{result as cu, sys as cu_sys};
use device_build::route::{self, Build, Chosen, Plan, Program};
use device_build::shim::Shim;
use device_build::{cache, jit, nvcc, CacheRoot, Env, Source};

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

/// The lesson's preflight tool check (`Lesson::tool`): nvcc or NVRTC is
/// found, so that a machine with neither hears so before any rank starts,
/// beside any other problem, rather than at Step 2 on every rank.
pub fn build_tool_found() -> Result<(), CannotRun> {
    route::some_route_found(&Env::from_process())
}

/// The route for `build` on this GPU and the loaded NCCL, and why.
pub fn choose_route(build: Build, major: i32, minor: i32) -> Result<Chosen> {
    let nccl = loaded_nccl()?;
    route::choose(
        build,
        &Env::from_process(),
        &format!("sm_{major}{minor}"),
        nccl.version,
        &nccl.path,
        &program(),
    )
}

/// The lesson's built kernel, from either route.
pub struct Built {
    /// `nvcc` or `jit`.
    pub route: &'static str,
    pub build: cache::Built,
    cubin: PathBuf,
    shim: Option<PathBuf>,
    nccl: NcclVersion,
    library: PathBuf,
}

impl Built {
    /// The module of NVIDIA's kernel (`allreduce_lsa`).
    pub fn cubin(&self) -> &Path {
        &self.cubin
    }
    /// How this route makes the device communicator: the shim (nvcc), or
    /// NCCL called directly with 2.32.3's requirements layout (jit).
    pub fn dev_comm_maker(&self) -> Result<Shim> {
        Shim::for_build(self.shim.as_deref(), &self.library, self.nccl)
    }
    /// The source file of NVIDIA's kernel on this route.
    pub fn source(&self) -> &'static str {
        if self.shim.is_some() {
            KERNEL.file
        } else {
            KERNEL_C.file
        }
    }
}

/// Builds (or reuses) the kernel of `plan`.
pub fn build(plan: &Plan, cache: &CacheRoot) -> Result<Built> {
    Ok(match plan {
        Plan::Nvcc(target) => {
            let built = nvcc::build_or_reuse(target, cache)?;
            Built {
                route: "nvcc",
                cubin: built.cubin(&KERNEL),
                shim: Some(built.shim.clone()),
                nccl: target.nccl,
                library: target.library.clone(),
                build: built.build,
            }
        }
        Plan::Jit(target) => {
            let build = jit::build_or_reuse(target, cache)?;
            Built {
                route: "jit",
                cubin: build.file(jit::CUBIN),
                shim: None,
                nccl: target.nccl,
                library: target.library.clone(),
                build,
            }
        }
    })
}

/// [`build`], falling back to nvcc under `--build auto` when the jit build
/// fails for want of a tool ([`route::build_or_fall_back`]).
pub fn build_chosen(
    requested: Build,
    chosen: &mut Chosen,
    cache: &CacheRoot,
    (major, minor): (i32, i32),
) -> Result<Built> {
    route::build_or_fall_back(
        requested,
        chosen,
        |plan| build(plan, cache),
        || choose_route(Build::Nvcc, major, minor),
    )
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
