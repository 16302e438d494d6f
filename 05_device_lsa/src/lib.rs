//! Lesson 05's building blocks, shared by the lesson (`main.rs`) and its
//! benchmark (`bin/bench.rs`): building the kernels with nvcc
//! ([`kernel_build`]), the host shim and the device communicator ([`shim`]),
//! loading and launching kernels ([`launch`]), and the fast kernels' choice
//! of algorithm and grid ([`fast`]).

pub mod fast;
pub mod kernel_build;
pub mod launch;
pub mod shim;

use anyhow::Result;
use common::nccl::loaded_nccl;
use common::CannotRun;
use kernel_build::{
    check_same_release, find_nccl_headers, find_nvcc, header_version, nvcc_version, Env, Target,
};

/// Threads per block of every kernel of this lesson (compiled into their
/// launch bounds).
pub const THREADS: u32 = 512;

/// The lesson's preflight tool check (`Lesson::tool`): nvcc is found, so that
/// a machine without it hears so before any rank starts, beside any other
/// problem, rather than at Step 6 on every rank.
pub fn nvcc_found() -> Result<(), CannotRun> {
    find_nvcc(&Env::from_process()).map(drop)
}

/// Everything the build depends on: nvcc, the headers of the loaded NCCL (of
/// the same release), and this GPU's architecture.
pub fn build_target(major: i32, minor: i32) -> Result<Target> {
    let env = Env::from_process();
    let nccl = loaded_nccl()?;
    let nvcc = find_nvcc(&env)?;
    let include = find_nccl_headers(&env, &nccl.path)?;
    check_same_release(
        header_version(&include)?,
        &include,
        nccl.version,
        &nccl.path,
    )?;
    Ok(Target {
        arch: format!("sm_{major}{minor}"),
        nvcc_version: nvcc_version(&nvcc)?,
        nvcc,
        include,
        nccl: nccl.version,
        library: nccl.path,
        threads: THREADS,
    })
}
