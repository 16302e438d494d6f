//! The one entry point: parse the command line, check the machine, start the
//! ranks, turn their outcome into an exit code.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Result;
use clap::{CommandFactory, FromArgMatches};

use crate::cli::{after_help, Cli};
pub use crate::preflight::Needs;
use crate::preflight::System;
use crate::rank::RankContext;
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

/// Runs `body` once per rank and returns the process exit code.
///
/// `A` is the lesson's own command-line options (`common::NoArgs` if none).
/// In thread mode `body` runs on `NTHREADS` threads at once; in MPI mode once,
/// in this process. The first lines printed are the NCCL version and the
/// launch mode, then whatever the lesson prints.
pub fn run<A, F>(lesson: &Lesson, body: F) -> ExitCode
where
    A: clap::Args + Sync,
    F: Fn(&RankContext, &A) -> Result<()> + Sync,
{
    run_checked(lesson, |_| Ok(()), body)
}

/// [`run`], with `check` run on the parsed options before anything else: an
/// option that cannot work (a benchmark's `--min-bytes` above its
/// `--max-bytes`, say) is refused with exit code 2 on any machine, before the
/// GPU and NCCL are looked for.
pub fn run_checked<A, F>(
    lesson: &Lesson,
    check: impl Fn(&A) -> Result<(), CannotRun>,
    body: F,
) -> ExitCode
where
    A: clap::Args + Sync,
    F: Fn(&RankContext, &A) -> Result<()> + Sync,
{
    let command = Cli::<A>::command()
        .name(lesson.name)
        .about(lesson.about)
        .after_help(after_help(lesson.name));
    // args_os: an argument that is not UTF-8 is clap's to refuse, not a panic.
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let parsed = command
        .try_get_matches_from(&args)
        .and_then(|matches| Cli::<A>::from_arg_matches(&matches));
    let cli = match parsed {
        Ok(cli) => cli,
        Err(err) => match crate::cli::nthreads_from_env_error(&err, &args) {
            Some(reason) => {
                eprintln!("error: {}: {reason}", lesson.name);
                return ExitCode::from(crate::EXIT_CANNOT_RUN);
            }
            None => err.exit(),
        },
    };
    // The tests' fault hook is checked like an option (see fault.rs).
    let checked = check(&cli.lesson).and_then(|()| crate::fault::check_request());
    if let Err(problem) = checked {
        eprintln!(
            "error: {}: {}{}",
            lesson.name,
            problem.reason,
            crate::error::fix_lines(&problem.fix, "  ")
        );
        return ExitCode::from(crate::EXIT_CANNOT_RUN);
    }
    // Before any thread starts, ours or a library's: see signals.rs.
    crate::signals::stop_on_signals();
    ExitCode::from(start(lesson, cli, body))
}

#[cfg(not(feature = "mpi"))]
fn start<A, F>(lesson: &Lesson, cli: Cli<A>, body: F) -> u8
where
    A: clap::Args + Sync,
    F: Fn(&RankContext, &A) -> Result<()> + Sync,
{
    use crate::preflight::check_gpu_count;

    if let Some(problem) = started_by_mpirun_without_mpi() {
        return cannot_run(lesson, &[problem]);
    }
    let system = match crate::preflight::check(lesson.needs, lesson.tool) {
        Ok(system) => system,
        Err(problems) => return cannot_run(lesson, &problems),
    };
    let gpus = system.driver.map_or(0, |d| d.gpus);
    let size = match (cli.launch.nthreads, lesson.needs) {
        (Some(n), _) => n,
        (None, Needs::Nothing) => 1,
        (None, _) => gpus,
    };
    if lesson.needs != Needs::Nothing {
        if let Err(problem) = check_gpu_count(size, gpus, false) {
            return cannot_run(lesson, &[problem]);
        }
    }
    print_banner(
        &system,
        &format!("{size} rank{}, one thread per GPU", plural(size)),
    );
    crate::signals::set_ranks((0..size).map(|r| format!("[rank {r}/{size}] ")).collect());
    let devices: Vec<usize> = (0..size).collect();
    crate::threads::run(size, &devices, |ctx| body(ctx, &cli.lesson))
}

#[cfg(feature = "mpi")]
fn start<A, F>(lesson: &Lesson, cli: Cli<A>, body: F) -> u8
where
    A: clap::Args + Sync,
    F: Fn(&RankContext, &A) -> Result<()> + Sync,
{
    crate::mpi_launch::run(lesson, cli.launch, |ctx| body(ctx, &cli.lesson))
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

/// Prints why the lesson cannot run here and returns exit code 2.
#[cfg(not(feature = "mpi"))]
fn cannot_run(lesson: &Lesson, problems: &[CannotRun]) -> u8 {
    eprintln!("error: {} cannot run on this system:", lesson.name);
    for problem in problems {
        eprintln!(
            "  - {}{}",
            problem.reason,
            crate::error::fix_lines(&problem.fix, "    ")
        );
    }
    crate::EXIT_CANNOT_RUN
}

/// `"s"` unless `n` is 1: `format!("{n} rank{}", plural(n))`.
pub fn plural(n: usize) -> &'static str {
    if n == 1 {
        ""
    } else {
        "s"
    }
}

/// A thread-mode binary started by mpirun would run every GPU once per process.
#[cfg(not(feature = "mpi"))]
fn started_by_mpirun_without_mpi() -> Option<CannotRun> {
    let size = [
        "OMPI_COMM_WORLD_SIZE",
        "PMI_SIZE",
        "PMIX_SIZE",
        "MPI_LOCALNRANKS",
    ]
    .iter()
    .find_map(|var| std::env::var(var).ok()?.parse::<usize>().ok())?;
    (size > 1).then(|| {
        CannotRun::new(
            format!("this binary was built without MPI support, but an MPI launcher started {size} copies of it; each would use every GPU on its own"),
            "build with MPI support and launch that binary:\n\
             cargo build --release --features mpi\n\
             mpirun -np N target/release/<lesson>\n\
             (or run this binary without mpirun: NTHREADS=N target/release/<lesson>)",
        )
    })
}
