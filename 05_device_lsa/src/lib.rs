//! Lesson 05's building blocks, shared by the lesson (`main.rs`) and its
//! benchmark (`05_allreduce_bench`, in `benchmarks/src/bin/`): the kernel
//! sources, which the `device_build` crate builds at run time (nvcc and its
//! host shim, or NVRTC + nvJitLink with NCCL's device library), loading and launching kernels ([`launch`]),
//! and the fast kernels' choice of algorithm and grid ([`fast`]).

pub mod fast;
pub mod launch;

use std::path::{Path, PathBuf};

use anyhow::Result;
use common::nccl::loaded_nccl;
use common::{CannotRun, NcclVersion};
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
/// The fast kernels (`--kernel fast`) on the C++ device API.
pub const FAST: Source = Source {
    file: "allreduce_lsa_fast.cu",
    text: include_str!("../kernels/allreduce_lsa_fast.cu"),
};
/// NVIDIA's kernel on nccl_device_wrapper.h's C API (the jit route).
pub const KERNEL_C: Source = Source {
    file: "allreduce_lsa_c.cu",
    text: include_str!("../kernels/allreduce_lsa_c.cu"),
};
/// The fast two-shot kernel on the C API (the jit route has no one-shot).
pub const FAST_C: Source = Source {
    file: "allreduce_lsa_fast_c.cu",
    text: include_str!("../kernels/allreduce_lsa_fast_c.cu"),
};
/// What the C-API sources use from nccl_device_wrapper.h: NCCL 2.32.3's
/// names, checked in the wrapper before compiling.
pub const WRAPPER_NAMES: [&str; 8] = [
    "ncclCoopAnyInitCta",
    "ncclLsaBarrierSession_C",
    "ncclLsaBarrierSessionInit",
    "ncclLsaBarrierSessionSync",
    "ncclLsaBarrierSessionDestroy",
    "ncclGetPeerPointerTeam",
    "ncclLsaReduceSumCopy_F32",
    "ncclLsaReduceSum_F32",
];
/// 8-byte units one block of the fast one-shot kernel carries: its LL
/// staging buffer is sized for this, and the kernel is compiled with it.
pub const LL_UNITS_PER_BLOCK: u32 = 2048;
/// The program name the build cache is kept under.
pub const CACHE_NAME: &str = "05_device_lsa";

/// Threads per block of every kernel of this lesson (compiled into their
/// launch bounds).
pub const THREADS: u32 = 512;

/// What every kernel source is compiled with: the block size and the LL
/// staging buffer's size per block.
pub fn defines() -> Vec<(String, String)> {
    vec![
        ("ALLREDUCE_THREADS".into(), THREADS.to_string()),
        ("LL_UNITS_PER_BLOCK".into(), LL_UNITS_PER_BLOCK.to_string()),
    ]
}

/// The lesson's device code, for both routes.
pub fn program() -> Program {
    Program {
        nvcc_kernels: vec![KERNEL, FAST],
        jit_kernels: vec![KERNEL_C, FAST_C],
        defines: defines(),
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

/// The lesson's built kernels, from either route.
pub struct Built {
    /// `nvcc` or `jit`.
    pub route: &'static str,
    pub build: cache::Built,
    simple: PathBuf,
    fast: PathBuf,
    shim: Option<PathBuf>,
    nccl: NcclVersion,
    library: PathBuf,
}

impl Built {
    /// The module of NVIDIA's kernel (`allreduce_lsa`).
    pub fn simple_cubin(&self) -> &Path {
        &self.simple
    }
    /// The module of the fast kernels (`allreduce_twoshot`, and on the nvcc
    /// route `allreduce_oneshot_ll`).
    pub fn fast_cubin(&self) -> &Path {
        &self.fast
    }
    /// How this route makes the device communicator: the shim (nvcc), or
    /// NCCL called directly with 2.32.3's requirements layout (jit).
    pub fn dev_comm_maker(&self) -> Result<Shim> {
        Shim::for_build(self.shim.as_deref(), &self.library, self.nccl)
    }
    /// The source file of NVIDIA's kernel on this route.
    pub fn simple_source(&self) -> &'static str {
        if self.shim.is_some() {
            KERNEL.file
        } else {
            KERNEL_C.file
        }
    }
    /// The source file of the fast kernels on this route.
    pub fn fast_source(&self) -> &'static str {
        if self.shim.is_some() {
            FAST.file
        } else {
            FAST_C.file
        }
    }
}

/// Builds (or reuses) the kernels of `plan`.
pub fn build(plan: &Plan, cache: &CacheRoot) -> Result<Built> {
    Ok(match plan {
        Plan::Nvcc(target) => {
            let built = nvcc::build_or_reuse(target, cache)?;
            Built {
                route: "nvcc",
                simple: built.cubin(&KERNEL),
                fast: built.cubin(&FAST),
                shim: Some(built.shim.clone()),
                nccl: target.nccl,
                library: target.library.clone(),
                build: built.build,
            }
        }
        Plan::Jit(target) => {
            let build = jit::build_or_reuse(target, cache)?;
            let cubin = build.file(jit::CUBIN);
            Built {
                route: "jit",
                simple: cubin.clone(),
                fast: cubin,
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
