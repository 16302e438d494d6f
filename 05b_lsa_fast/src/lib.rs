//! Lesson 05b's building blocks, shared by the lesson (`main.rs`) and the
//! benchmarks (`05_allreduce_bench`, `06_symm_bench`, in
//! `benchmarks/src/bin/`): the fast kernels' sources, which the
//! `device_build` crate builds at run time (nvcc and its host shim, or
//! NVRTC + nvJitLink with NCCL's device library), launching them
//! ([`launch`]), and their choice of algorithm and grid ([`fast`]).

pub mod fast;
pub mod launch;

use std::path::{Path, PathBuf};

use anyhow::Result;
use common::nccl::loaded_nccl;
use common::{CannotRun, NcclVersion};
use device_build::route::{self, Build, Chosen, Plan, Program};
use device_build::shim::Shim;
use device_build::{cache, jit, nvcc, CacheRoot, Env, Source};

/// The fast kernels on the C++ device API (the nvcc route).
pub const FAST: Source = Source {
    file: "allreduce_lsa_fast.cu",
    text: include_str!("../kernels/allreduce_lsa_fast.cu"),
};
/// The fast two-shot kernel on nccl_device_wrapper.h's C API (the jit
/// route, which has no one-shot).
pub const FAST_C: Source = Source {
    file: "allreduce_lsa_fast_c.cu",
    text: include_str!("../kernels/allreduce_lsa_fast_c.cu"),
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
/// 8-byte units one block of the one-shot kernel carries: its LL staging
/// buffer is sized for this, and the kernel is compiled with it.
pub const LL_UNITS_PER_BLOCK: u32 = 2048;
/// The program name the build cache is kept under.
pub const CACHE_NAME: &str = "05b_lsa_fast";

/// Threads per block of both kernels (compiled into their launch bounds).
pub const THREADS: u32 = 512;

/// What the kernel sources are compiled with: the block size and the LL
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
        nvcc_kernels: vec![FAST],
        jit_kernels: vec![FAST_C],
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
    fast: PathBuf,
    shim: Option<PathBuf>,
    nccl: NcclVersion,
    library: PathBuf,
}

impl Built {
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
                fast: built.cubin(&FAST),
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
                fast: build.file(jit::CUBIN),
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
