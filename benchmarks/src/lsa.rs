//! How `05_allreduce_bench` (and `06_symm_bench`, for its `fast05`
//! baseline) builds its kernels: lesson 05's (NVIDIA's) and lesson 05b's
//! (the fast ones) in one build, by the route `--build` picks, and, for the
//! jit-only contenders, NCCL's primitives kernels
//! (`kernels/allreduce_nccl_prims.cu`) linked into the same jit cubin. The
//! lessons' own builds leave them out: linking NCCL's reduce/copy loops is
//! most of the jit route's cold build time.

use std::path::{Path, PathBuf};

use anyhow::Result;
use common::nccl::loaded_nccl;
use common::NcclVersion;
use device_build::route::{self, Build, Chosen, Plan, Program};
use device_build::shim::Shim;
use device_build::{cache, jit, nvcc, CacheRoot, Env, Source};
use device_lsa::{KERNEL, KERNEL_C};
use lsa_fast::{FAST, FAST_C};

/// The AllReduce made of NCCL's own primitives (jit route only).
pub const PRIMS: Source = Source {
    file: "allreduce_nccl_prims.cu",
    text: include_str!("../kernels/allreduce_nccl_prims.cu"),
};

/// The program name the build cache is kept under.
pub const CACHE_NAME: &str = "05_allreduce_bench";

/// Lessons 05's and 05b's device code, and with `with_prims` the primitives
/// kernels in the jit build. Both lessons' kernels take the same block size
/// (`ALLREDUCE_THREADS`); lesson 05b's defines cover both.
pub fn program(with_prims: bool) -> Program {
    let mut wrapper_names = device_lsa::WRAPPER_NAMES.to_vec();
    for name in lsa_fast::WRAPPER_NAMES {
        if !wrapper_names.contains(&name) {
            wrapper_names.push(name);
        }
    }
    let mut program = Program {
        nvcc_kernels: vec![KERNEL, FAST],
        jit_kernels: vec![KERNEL_C, FAST_C],
        defines: lsa_fast::defines(),
        wrapper_names,
    };
    if with_prims {
        program.jit_kernels.push(PRIMS);
        program
            .wrapper_names
            .extend(["ncclLsaReduceSumCopy_F32", "ncclLsaReduceSum_F32"]);
    }
    program
}

/// The route for `build` on this GPU and the loaded NCCL, and why.
pub fn choose_route(build: Build, major: i32, minor: i32, with_prims: bool) -> Result<Chosen> {
    let nccl = loaded_nccl()?;
    route::choose(
        build,
        &Env::from_process(),
        &format!("sm_{major}{minor}"),
        nccl.version,
        &nccl.path,
        &program(with_prims),
    )
}

/// The benchmark's built kernels, from either route.
pub struct Built {
    /// `nvcc` or `jit`.
    pub route: &'static str,
    pub build: cache::Built,
    simple: PathBuf,
    fast: PathBuf,
    prims: Option<PathBuf>,
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
    /// The module of the NCCL-primitives kernels (jit route, built with them).
    pub fn prims_cubin(&self) -> Option<&Path> {
        self.prims.as_deref()
    }
    /// How this route makes the device communicator: the shim (nvcc), or
    /// NCCL called directly with 2.32.3's requirements layout (jit).
    pub fn dev_comm_maker(&self) -> Result<Shim> {
        Shim::for_build(self.shim.as_deref(), &self.library, self.nccl)
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
                prims: None,
                shim: Some(built.shim.clone()),
                nccl: target.nccl,
                library: target.library.clone(),
                build: built.build,
            }
        }
        Plan::Jit(target) => {
            let build = jit::build_or_reuse(target, cache)?;
            let cubin = build.file(jit::CUBIN);
            let with_prims = target.kernels.contains(&PRIMS);
            Built {
                route: "jit",
                simple: cubin.clone(),
                fast: cubin.clone(),
                prims: with_prims.then_some(cubin),
                shim: None,
                nccl: target.nccl,
                library: target.library.clone(),
                build,
            }
        }
    })
}

/// [`build`], falling back to nvcc under `--build auto` when the jit build
/// fails for want of a tool ([`route::build_or_fall_back`]). Not when
/// `with_prims`: NCCL's primitives exist on the jit route alone.
pub fn build_chosen(
    requested: Build,
    chosen: &mut Chosen,
    cache: &CacheRoot,
    (major, minor): (i32, i32),
    with_prims: bool,
) -> Result<Built> {
    if with_prims {
        return build(&chosen.plan, cache);
    }
    route::build_or_fall_back(
        requested,
        chosen,
        |plan| build(plan, cache),
        || choose_route(Build::Nvcc, major, minor, with_prims),
    )
}
