//! How `05_allreduce_bench` (and `06_symm_bench`, for its `fast05`
//! baseline) builds its kernels: lesson 05's (NVIDIA's) and lesson 05b's
//! (the fast ones) in one build, by the route `--build` picks, and, for the
//! jit-only contenders, NCCL's primitives kernels
//! (`kernels/allreduce_nccl_prims.cu`) linked into the same jit cubin. The
//! lessons' own builds leave them out: linking NCCL's reduce/copy loops is
//! most of the jit route's cold build time.

use std::path::PathBuf;

use anyhow::Result;
use device_build::program;
pub use device_build::program::{build, Built};
use device_build::route::{Build, Chosen, Program};
use device_build::{CacheRoot, Source};
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
    program::choose(build, (major, minor), &program(with_prims))
}

/// [`build`], falling back to nvcc under `--build auto` when the jit build
/// fails for want of a tool (`device_build::route::build_or_fall_back`).
/// Not when `with_prims`: NCCL's primitives exist on the jit route alone.
pub fn build_chosen(
    requested: Build,
    chosen: &mut Chosen,
    cache: &CacheRoot,
    capability: (i32, i32),
    with_prims: bool,
) -> Result<Built> {
    if with_prims {
        return build(&chosen.plan, cache);
    }
    program::build_chosen(requested, chosen, cache, capability, &program(false))
}

/// The module of the NCCL-primitives kernels: the jit build, made with them.
pub fn prims_cubin(built: &Built, with_prims: bool) -> Option<PathBuf> {
    (built.route == "jit" && with_prims).then(|| built.cubin(&PRIMS))
}
