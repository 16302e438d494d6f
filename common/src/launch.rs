//! The one entry point: parse the command line, check the options, and hand
//! the ranks to one of the two modes (`threads.rs`, `mpi_launch.rs`), which
//! check the machine, start the ranks and turn their outcome into an exit code.

use std::process::ExitCode;

use anyhow::Result;
use clap::{CommandFactory, FromArgMatches};

use crate::cli::{after_help, Cli};
use crate::lesson::Lesson;
use crate::rank::RankContext;
use crate::CannotRun;

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
        return refuse(lesson, &problem);
    }
    // NCCL from pip or NCCL_HOME: re-executes with a private libnccl.so link
    // when cudarc would not find it (see nccl_path.rs). Before anything starts.
    if matches!(lesson.needs, crate::preflight::Needs::GpuAndNccl { .. }) {
        if let Err(problem) = crate::nccl_path::reexec_with_pip_nccl() {
            return refuse(lesson, &problem);
        }
    }
    // Thread mode, ranks asked to share GPUs: NCCL connects them at
    // ncclCommInitRank (see placement.rs). Set while this is the process's
    // only thread, before NCCL reads it.
    #[cfg(not(feature = "mpi"))]
    if matches!(lesson.needs, crate::preflight::Needs::GpuAndNccl { .. })
        && cli.launch.nthreads.is_some()
    {
        crate::placement::connect_at_init_when_sharing();
    }
    // Before any thread starts, ours or a library's: see signals.rs.
    crate::signals::stop_on_signals();
    // The one choice this file makes: which mode starts the ranks.
    #[cfg(not(feature = "mpi"))]
    let code = crate::threads::start(lesson, cli.launch, |ctx| body(ctx, &cli.lesson));
    #[cfg(feature = "mpi")]
    let code = crate::mpi_launch::start(lesson, cli.launch, |ctx| body(ctx, &cli.lesson));
    ExitCode::from(code)
}

/// Says why `lesson` cannot run as asked, with the fix; exit code 2.
fn refuse(lesson: &Lesson, problem: &CannotRun) -> ExitCode {
    eprintln!(
        "error: {}: {}{}",
        lesson.name,
        problem.reason,
        crate::error::fix_lines(&problem.fix, "  ")
    );
    ExitCode::from(crate::EXIT_CANNOT_RUN)
}
