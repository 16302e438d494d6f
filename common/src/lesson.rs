//! What the launcher knows about a program, and what its two modes (threads,
//! MPI) share: the program's description, how long to wait for ranks once one
//! has failed, and the two lines every run starts with.
//!
//! It sits below `launch.rs` (which chooses a mode) and below `threads.rs` and
//! `mpi_launch.rs` (the modes), so that none of them imports another's.

use std::time::Duration;

use anyhow::Result;

use crate::preflight::{Needs, System};
use crate::CannotRun;

/// How long the launcher waits for the other ranks once one has failed,
/// before it leaves without them (thread mode) or stops the job (MPI mode).
pub const ABANDON_AFTER: Duration = Duration::from_secs(3);

/// What the launcher needs to know about a program.
#[derive(Debug, Clone, Copy)]
pub struct Lesson {
    /// The binary's name, e.g. `02_allreduce_sm`.
    pub name: &'static str,
    /// One line for `--help`.
    pub about: &'static str,
    /// What the machine must provide; checked before any rank starts.
    pub needs: Needs,
    /// A program the lesson runs besides the libraries (lesson 05: nvcc),
    /// looked for with the preflight, so that a missing one is named up front
    /// beside any other problem.
    pub tool: Option<fn() -> Result<(), CannotRun>>,
}

/// The two lines every run starts with: the libraries in use and the launch mode.
pub(crate) fn print_banner(system: &System, launch: &str) {
    match (&system.nccl, &system.driver) {
        (Some(nccl), Some(driver)) => println!(
            "NCCL {} from {}, CUDA driver {}",
            nccl.version,
            nccl.path.display(),
            driver.version_text()
        ),
        (None, Some(driver)) => println!("CUDA driver {}", driver.version_text()),
        _ => {}
    }
    println!("Launch: {launch}");
}

/// `"s"` unless `n` is 1: `format!("{n} rank{}", plural(n))`.
pub fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}
