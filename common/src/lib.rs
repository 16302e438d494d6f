//! What every lesson needs that is not the lesson.
//!
//! A lesson is one function, `fn(&RankContext, &Args) -> anyhow::Result<()>`,
//! that runs once per rank. [`run`] decides how the ranks exist:
//!
//! * **thread mode** (default build): one OS thread per GPU in one process,
//!   `NTHREADS` ranks (default: every visible GPU);
//! * **MPI mode** (`--features mpi`, started by `mpirun -np N`): one process per
//!   GPU, the local GPU chosen by the rank within the node.
//!
//! Either way the lesson sees the same [`RankContext`]: its rank, the world
//! size, its GPU, a byte broadcast (for the NCCL unique id), a barrier and
//! rank-ordered printing. Everything NCCL or CUDA that a lesson teaches stays in
//! the lesson's `main.rs`; this crate holds what a lesson needs at run time:
//! launch, preflight, checks ([`verify`]) and output, plus the small RAII
//! guards in [`nccl`] that adopt what a lesson's NCCL calls return,
//! [`kernel`]'s launch builder for kernels of raw modules, and
//! [`setup`], which makes lessons 01 and 02's calls for the programs that
//! build on them (lessons 03 and 05, the benchmarks).
//!
//! Two crates sit beside it, each for another reader: `bench` holds the
//! measurement that only the `*_bench` binaries use, and `testkit` the test
//! support that every other crate takes as a dev-dependency. Neither is
//! needed to follow this one.
//!
//! The rules every program follows (see `DESIGN.md`):
//! exit code 0 = verified, 1 = failed, 2 = cannot run here;
//! one rank's failure ends the whole run promptly with
//! `[rank r/n] error: ...`; per-rank lines are printed in rank order.
//! Ctrl-C and SIGTERM stop every rank with `[rank r/n] stopped by ...`, and
//! no run leaves a directory behind ([`cleanup`]). The tests make a rank fail
//! or hang on purpose through [`fault`]'s `SYMMEM_TEST_FAULT`.

pub mod cleanup;
mod cli;
mod error;
pub mod fault;
pub mod kernel;
mod launch;
mod lesson;
#[cfg(feature = "mpi")]
mod mpi_launch;
pub mod nccl;
pub mod nccl_path;
pub mod pip;
pub mod placement;
pub mod preflight;
mod rank;
pub mod setup;
mod signals;
#[cfg(not(feature = "mpi"))]
mod threads;
pub mod trust;
pub mod unix;
pub mod verify;

pub use cleanup::host_name;
pub use cli::{parse_size, LaunchArgs, NoArgs, MAX_THREAD_RANKS};
pub use error::{exit_code, CannotRun, PeerFailed, EXIT_CANNOT_RUN, EXIT_FAILED, EXIT_OK};
pub use launch::{run, run_checked};
pub use lesson::{plural, Lesson, ABANDON_AFTER};
pub use preflight::{NcclVersion, Needs};
pub use rank::{leaving_on_error, RankContext};

/// How this build starts its ranks: `"threads"` (default) or `"mpi"`.
pub fn launch_mode() -> &'static str {
    if cfg!(feature = "mpi") {
        "mpi"
    } else {
        "threads"
    }
}
