//! MPI mode: this process is one rank of an `mpirun` job.
//!
//! The local GPU is the rank within the node, found with
//! `MPI_Comm_split_type(MPI_COMM_TYPE_SHARED)` like NCCL's examples; the NCCL
//! unique id travels by `MPI_Bcast`. Started without mpirun, the program is a
//! job of one rank (an MPI "singleton").
//!
//! A rank that fails prints its error and calls `MPI_Abort`, which makes
//! mpirun stop every process, including those blocked inside NCCL. A failure
//! every rank agrees on (a wrong result, "cannot run here") ends through
//! `MPI_Finalize` instead, every rank returning the same code.
//!
//! NOTE: Open MPI 4's mpirun stops a job in which a process exits non-zero
//! even when every process is already exiting, and sleeps a second before
//! each of its SIGTERM and SIGKILL (`odls_base_sigkill_timeout`, default 1),
//! so an agreed failure ends about 2 s after the ranks have. `MPI_Abort` ends
//! faster but prints a banner meant for crashes; a refused run stays clean.

use std::io::Write;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use anyhow::Result;
use mpi::collective::SystemOperation;
use mpi::datatype::PartitionMut;
use mpi::topology::SimpleCommunicator;
use mpi::traits::*;
use mpi::Count;

use crate::cli::LaunchArgs;
use crate::error::{
    exit_code, fix_lines, flush_and_exit, panic_message, render, EXIT_CANNOT_RUN, EXIT_FAILED,
    EXIT_OK,
};
use crate::lesson::{print_banner, Lesson, ABANDON_AFTER};
use crate::placement::{self, MultiRank, Placement};
use crate::preflight::{self, Needs, System};
use crate::rank::{Backend, RankContext, Reported};

struct Mpi {
    world: SimpleCommunicator,
}

impl Backend for Mpi {
    fn barrier(&self, _rank: usize) -> Result<()> {
        self.world.barrier();
        Ok(())
    }

    fn broadcast(&self, _rank: usize, bytes: &mut [u8]) -> Result<()> {
        // An empty slice's dangling pointer is 0x1, which Open MPI reads as
        // MPI_IN_PLACE; with nothing to send, send nothing.
        if !bytes.is_empty() {
            self.world.process_at_rank(0).broadcast_into(bytes);
        }
        Ok(())
    }

    fn gather(&self, rank: usize, bytes: Vec<u8>) -> Result<Option<Vec<Vec<u8>>>> {
        // One leading byte so that no rank sends from an empty Vec (see broadcast).
        let bytes = [&[0u8][..], &bytes].concat();
        let root = self.world.process_at_rank(0);
        let len = bytes.len() as Count;
        if rank != 0 {
            root.gather_into(&len);
            root.gather_varcount_into(&bytes[..]);
            return Ok(None);
        }
        let mut lens = vec![0 as Count; self.world.size() as usize];
        root.gather_into_root(&len, &mut lens[..]);
        let displs: Vec<Count> = lens
            .iter()
            .scan(0, |at, &n| {
                let start = *at;
                *at += n;
                Some(start)
            })
            .collect();
        let mut all = vec![0u8; lens.iter().map(|&n| n as usize).sum()];
        {
            let mut partition = PartitionMut::new(&mut all[..], &lens[..], &displs[..]);
            root.gather_varcount_into_root(&bytes[..], &mut partition);
        }
        Ok(Some(
            displs
                .iter()
                .zip(&lens)
                .map(|(&at, &n)| all[at as usize + 1..(at + n) as usize].to_vec())
                .collect(),
        ))
    }
}

/// MPI mode's launch: this process is one rank; checks the machine on every
/// rank (see `agree_on_preflight`), prints the banner on rank 0, runs `body`.
pub(crate) fn start<F>(lesson: &Lesson, launch: LaunchArgs, body: F) -> u8
where
    F: Fn(&RankContext) -> Result<()>,
{
    let Some(universe) = mpi::initialize() else {
        eprintln!("error: MPI was initialised before the launcher ran");
        return EXIT_FAILED;
    };
    let world = universe.world();
    let (rank, size) = (world.rank() as usize, world.size() as usize);
    let node = world.split_shared(world.rank());
    let mpi = Mpi { world };
    // The device is known after the preflight has counted the GPUs: this
    // context serves the preflight's collectives, run_rank makes the
    // lesson's.
    let ctx = RankContext::new(rank, size, node.rank() as usize, 1, &mpi);
    crate::signals::set_ranks(vec![ctx.prefix()]);
    // Returning drops `universe` last, which calls MPI_Finalize.
    run_rank(&ctx, &mpi, &node, lesson, launch, body)
}

/// Runs this rank; returns the exit code every rank agreed on, or stops the
/// job (`MPI_Abort`) when this rank failed on its own.
fn run_rank<F>(
    ctx: &RankContext,
    mpi: &Mpi,
    node: &SimpleCommunicator,
    lesson: &Lesson,
    launch: LaunchArgs,
    body: F,
) -> u8
where
    F: Fn(&RankContext) -> Result<()>,
{
    let (size, local_rank) = (ctx.size(), node.rank() as usize);
    let (system, placement) = match agree_on_preflight(ctx, node, lesson) {
        Ok(Some(found)) => found,
        Ok(None) => return EXIT_CANNOT_RUN,
        Err(err) => {
            eprintln!("{}", render(&ctx.prefix(), &err));
            return EXIT_FAILED;
        }
    };
    let mut nodes = 0i32;
    mpi.world.all_reduce_into(
        &i32::from(local_rank == 0),
        &mut nodes,
        SystemOperation::sum(),
    );
    let mut ranks_per_gpu = 0i32;
    mpi.world.all_reduce_into(
        &(placement.most_per_gpu() as i32),
        &mut ranks_per_gpu,
        SystemOperation::max(),
    );
    let ranks_per_gpu = ranks_per_gpu.max(1) as usize;
    let device = placement.device_of(local_rank);
    if ctx.is_root() {
        if launch.nthreads.is_some() {
            eprintln!(
                "note: NTHREADS is not used in MPI mode: mpirun's -np sets the number of ranks"
            );
        }
        print_banner(
            &system,
            &placement::mpi_launch_text(
                size,
                nodes as usize,
                ranks_per_gpu,
                &MultiRank::from_process(),
            ),
        );
        if ranks_per_gpu > 1 {
            eprintln!(
                "{}",
                placement::sharing_note(
                    ranks_per_gpu,
                    preflight::multiprocessors(device),
                    system.nccl.is_some(),
                    std::env::var("NCCL_MAX_CTAS").ok().as_deref(),
                )
            );
        }
    }
    let ctx = &RankContext::new(ctx.rank(), size, device, ranks_per_gpu, mpi);

    let returned = Arc::new(AtomicBool::new(false));
    stop_if_stuck_after_failing(ctx.prefix(), Arc::clone(&returned));
    let outcome = catch_unwind(AssertUnwindSafe(|| body(ctx)))
        .unwrap_or_else(|panic| Err(anyhow::anyhow!("panicked: {}", panic_message(&*panic))));
    returned.store(true, Ordering::SeqCst);
    let _ = std::io::stdout().flush();
    match outcome {
        Ok(()) => EXIT_OK,
        // Every rank knows and returns the same code: leave through MPI_Finalize.
        Err(err) if err.chain().any(|e| e.is::<Reported>()) => err
            .chain()
            .find_map(|e| e.downcast_ref::<Reported>())
            .map_or(EXIT_FAILED, |r| r.code),
        Err(err) => {
            eprintln!("{}", render(&ctx.prefix(), &err));
            let _ = std::io::stderr().flush();
            if size == 1 {
                flush_and_exit(exit_code(&err));
            }
            // The others may be blocked in NCCL waiting for this rank: stop the job.
            abort_job(exit_code(&err))
        }
    }
}

/// `MPI_Abort`: mpirun stops every process of the job, also those blocked
/// inside NCCL. This process first removes the directories it registered
/// (see [`cleanup`](crate::cleanup)): no destructor runs after this.
fn abort_job(code: u8) -> ! {
    crate::cleanup::remove_registered();
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    // SAFETY: MPI is initialised and not finalised; MPI_Abort does not return.
    // Called from a second thread only by `stop_if_stuck_after_failing`, when
    // the main thread is stuck inside NCCL: Open MPI aborts from any thread.
    unsafe { mpi::ffi::MPI_Abort(mpi::ffi::RSMPI_COMM_WORLD, code.into()) };
    flush_and_exit(code)
}

/// When this rank starts to leave through an error (its NCCL guards are
/// dropped), a guard's NCCL call may wait for ranks that are themselves stuck
/// waiting for this one, and the error would never be printed nor the job
/// aborted. So a watchdog stops the job if the rank has not returned within
/// [`ABANDON_AFTER`] of that moment.
fn stop_if_stuck_after_failing(prefix: String, returned: Arc<AtomicBool>) {
    crate::rank::when_leaving_on_error(Box::new(move || {
        let _ = std::thread::Builder::new()
            .name("watchdog".into())
            .spawn(move || {
                std::thread::sleep(ABANDON_AFTER);
                if !returned.load(Ordering::SeqCst) {
                    eprintln!(
                        "{prefix}error: failed, but its error is still on its way: releasing its NCCL resources has waited {} s for ranks that are stuck; stopping the job",
                        ABANDON_AFTER.as_secs()
                    );
                    abort_job(EXIT_FAILED);
                }
            });
    }));
}

/// Preflight on every rank; rank 0 prints every rank's problems, grouped, and
/// all ranks agree whether to go on. `Ok(None)`: cannot run (already printed).
///
/// Each node's first rank checks first, and the others only if it found
/// nothing wrong: when a node cannot run the lesson (no driver, more ranks
/// than GPUs), 64 ranks need not all initialise the CUDA driver to find the
/// same thing, which costs seconds on a node with large GPUs.
fn agree_on_preflight(
    ctx: &RankContext,
    node: &SimpleCommunicator,
    lesson: &Lesson,
) -> Result<Option<(System, Placement)>> {
    let (local_size, local_rank) = (node.size() as usize, node.rank() as usize);
    let check_here = || {
        preflight::check(lesson.needs, lesson.tool).and_then(|system| {
            let gpus = system.driver.map_or(0, |d| d.gpus);
            let nccl = system.nccl.as_ref().map(|nccl| nccl.version);
            let placement = placement::place_program(lesson.needs, local_size, gpus, true, nccl)
                .map_err(|p| vec![p])?;
            if lesson.needs == Needs::Nothing {
                return Ok((system, placement));
            }
            // Processes that share a GPU do so through CUDA MPS.
            let device = placement.device_of(local_rank);
            placement::check_mps(
                placement.ranks_on(device),
                local_size,
                device,
                preflight::mps_enabled(device),
            )
            .map_err(|p| vec![p])?;
            Ok((system, placement))
        })
    };
    let leader = node.process_at_rank(0);
    let local = if node.rank() == 0 {
        let local = check_here();
        leader.broadcast_into(&mut u8::from(local.is_ok()));
        local
    } else {
        let mut leader_ok = 0u8;
        leader.broadcast_into(&mut leader_ok);
        if leader_ok == 1 {
            check_here()
        } else {
            // The leader reports this node's problem; nothing to add.
            Err(Vec::new())
        }
    };
    let text = match &local {
        Ok(_) => String::new(),
        Err(problems) => problems
            .iter()
            .map(|p| format!("  - {}{}", p.reason, fix_lines(&p.fix, "    ")))
            .collect::<Vec<_>>()
            .join("\n"),
    };
    let go = match ctx.gather(text.into_bytes())? {
        Some(reports) => {
            let mut groups: Vec<(String, Vec<usize>)> = Vec::new();
            for (rank, report) in reports.into_iter().enumerate() {
                let report = String::from_utf8_lossy(&report).into_owned();
                if report.is_empty() {
                    continue;
                }
                match groups.iter_mut().find(|(text, _)| *text == report) {
                    Some((_, ranks)) => ranks.push(rank),
                    None => groups.push((report, vec![rank])),
                }
            }
            for (report, ranks) in &groups {
                let ranks: Vec<String> = ranks.iter().map(usize::to_string).collect();
                eprintln!(
                    "error: {} cannot run on this system (rank {} of {}):\n{report}",
                    lesson.name,
                    ranks.join(", "),
                    ctx.size()
                );
            }
            vec![u8::from(groups.is_empty())]
        }
        None => vec![0],
    };
    let go = ctx.broadcast_vec(go)?;
    Ok(match (go.first(), local) {
        (Some(1), Ok(found)) => Some(found),
        _ => None,
    })
}
