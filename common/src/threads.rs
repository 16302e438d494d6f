//! Thread mode: one OS thread per rank, collectives through shared memory.
//!
//! NCCL's `ncclCommInitRank` blocks until every rank has joined, so the ranks
//! must truly run at once: plain scoped threads, never a bounded pool such as
//! rayon's.
//!
//! When a rank fails, the others must not wait forever. Ranks waiting in one of
//! our collectives are woken and stop with [`PeerFailed`]. A rank blocked
//! inside NCCL or CUDA (say, in `ncclCommInitRank` for a peer that will never
//! come) cannot be woken from outside; after [`ABANDON_AFTER`] the process
//! exits without it, which releases its GPU resources too.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::mpsc;
use std::sync::{Condvar, Mutex};
use std::time::Instant;

use anyhow::{anyhow, Result};

use crate::cli::LaunchArgs;
use crate::error::{
    exit_code, flush_and_exit, panic_message, render, PeerFailed, EXIT_FAILED, EXIT_OK,
};
use crate::lesson::{print_banner, Lesson, ABANDON_AFTER};
use crate::placement::{self, MultiRank};
use crate::preflight::Needs;
use crate::rank::{Backend, RankContext, Reported};
use crate::CannotRun;

/// The ranks of one process and what they share.
pub(crate) struct Team {
    size: usize,
    state: Mutex<TeamState>,
    changed: Condvar,
}

struct TeamState {
    arrived: usize,
    generation: u64,
    aborted: bool,
    slots: Vec<Vec<u8>>,
}

impl Team {
    pub(crate) fn new(size: usize) -> Self {
        Self {
            size,
            state: Mutex::new(TeamState {
                arrived: 0,
                generation: 0,
                aborted: false,
                slots: vec![Vec::new(); size],
            }),
            changed: Condvar::new(),
        }
    }

    /// Wakes every rank waiting in a collective; they and any later collective
    /// fail with [`PeerFailed`].
    pub(crate) fn abort(&self) {
        let mut state = self.state.lock().unwrap_or_else(|p| p.into_inner());
        state.aborted = true;
        self.changed.notify_all();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, TeamState> {
        // A rank that panicked while holding the lock has already been reported;
        // the data (a counter and byte slots) stays consistent.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn wait_all(&self) -> Result<()> {
        let mut state = self.lock();
        if state.aborted {
            return Err(PeerFailed { ranks: vec![] }.into());
        }
        state.arrived += 1;
        if state.arrived == self.size {
            state.arrived = 0;
            state.generation += 1;
            self.changed.notify_all();
            return Ok(());
        }
        let generation = state.generation;
        while state.generation == generation && !state.aborted {
            state = self.changed.wait(state).unwrap_or_else(|p| p.into_inner());
        }
        if state.generation == generation {
            return Err(PeerFailed { ranks: vec![] }.into());
        }
        Ok(())
    }
}

impl Backend for Team {
    fn barrier(&self, _rank: usize) -> Result<()> {
        self.wait_all()
    }

    fn broadcast(&self, rank: usize, bytes: &mut [u8]) -> Result<()> {
        if rank == 0 {
            self.lock().slots[0] = bytes.to_vec();
        }
        self.wait_all()?;
        if rank != 0 {
            let state = self.lock();
            let root = &state.slots[0];
            if root.len() != bytes.len() {
                return Err(anyhow!(
                    "broadcast: rank 0 sent {} bytes, rank {rank} expected {}",
                    root.len(),
                    bytes.len()
                ));
            }
            bytes.copy_from_slice(root);
        }
        // Nobody may start the next collective (and overwrite the slot) before
        // everyone has read this one.
        self.wait_all()
    }

    fn gather(&self, rank: usize, bytes: Vec<u8>) -> Result<Option<Vec<Vec<u8>>>> {
        self.lock().slots[rank] = bytes;
        self.wait_all()?;
        let all = (rank == 0).then(|| std::mem::take(&mut self.lock().slots));
        if let Some(all) = &all {
            self.lock().slots = vec![Vec::new(); all.len()];
        }
        self.wait_all()?;
        Ok(all)
    }
}

/// How one rank ended.
type Outcome = Result<()>;

/// What a rank thread tells the launcher.
enum Report {
    /// The rank started to leave through an error (its NCCL guards are being
    /// dropped); its outcome may never come if a guard's NCCL call blocks.
    Failing(usize),
    /// The rank returned.
    Done(usize, Outcome),
}

/// Thread mode's launch: refuses a start by mpirun and checks the machine
/// (printing why it cannot run, exit code 2), prints the banner, then runs
/// `body` on one thread per rank (see [`run`]).
pub(crate) fn start<F>(lesson: &Lesson, launch: LaunchArgs, body: F) -> u8
where
    F: Fn(&RankContext) -> Result<()> + Sync,
{
    if let Some(problem) = started_by_mpirun_without_mpi() {
        return cannot_run(lesson, &[problem]);
    }
    let system = match crate::preflight::check(lesson.needs, lesson.tool) {
        Ok(system) => system,
        Err(problems) => return cannot_run(lesson, &problems),
    };
    let gpus = system.driver.map_or(0, |d| d.gpus);
    let size = match (launch.nthreads, lesson.needs) {
        (Some(n), _) => n,
        (None, Needs::Nothing) => 1,
        (None, _) => gpus,
    };
    let nccl = system.nccl.as_ref().map(|nccl| nccl.version);
    let placement = match placement::place_program(lesson.needs, size, gpus, false, nccl) {
        Ok(placement) => placement,
        Err(problem) => return cannot_run(lesson, &[problem]),
    };
    print_banner(
        &system,
        &placement::thread_launch_text(&placement, &MultiRank::from_process()),
    );
    let ranks_per_gpu = placement.most_per_gpu();
    if placement.shares() {
        let multiprocessors = (0..placement.gpus_used())
            .map(crate::preflight::multiprocessors)
            .min()
            .unwrap_or(0);
        eprintln!(
            "{}",
            placement::sharing_note(
                ranks_per_gpu,
                multiprocessors,
                system.nccl.is_some(),
                std::env::var("NCCL_MAX_CTAS").ok().as_deref(),
            )
        );
    }
    // Said whenever the launcher set it (it decides before it knows whether
    // the ranks will share a GPU): NCCL then connects every rank at init.
    if system.nccl.is_some() && placement::runtime_connect_set_here() {
        eprintln!(
            "note: NCCL_RUNTIME_CONNECT=0 (set by the launcher, as NCCL_MULTI_RANK_GPU_ENABLE is on): ranks connect at ncclCommInitRank, not in their first collective, where ranks that share a GPU in one process can wait for each other (see the book's \"One GPU, several ranks\")"
        );
    }
    crate::signals::set_ranks((0..size).map(|r| format!("[rank {r}/{size}] ")).collect());
    let devices: Vec<usize> = (0..size).map(|r| placement.device_of(r)).collect();
    run(size, &devices, ranks_per_gpu, body)
}

/// Prints why the lesson cannot run here and returns exit code 2.
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

/// A thread-mode binary started by mpirun would run every GPU once per process.
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

/// Runs `body` on `size` threads, rank r on device `devices[r]`, up to
/// `ranks_per_gpu` of them on one GPU, and returns the exit code. Prints each failing rank's error as `[rank r/n] error: ...`.
/// If a rank fails and another does not return within [`ABANDON_AFTER`], exits
/// the process from here.
pub(crate) fn run<F>(size: usize, devices: &[usize], ranks_per_gpu: usize, body: F) -> u8
where
    F: Fn(&RankContext) -> Result<()> + Sync,
{
    let team = Team::new(size);
    let (report, reports) = mpsc::channel::<Report>();
    std::thread::scope(|scope| {
        for (rank, &device) in devices.iter().enumerate().take(size) {
            let (rank_report, team, body) = (report.clone(), &team, &body);
            let spawned = std::thread::Builder::new()
                .name(format!("rank-{rank}"))
                .spawn_scoped(scope, move || {
                    let failing = rank_report.clone();
                    crate::rank::when_leaving_on_error(Box::new(move || {
                        let _ = failing.send(Report::Failing(rank));
                    }));
                    let ctx = RankContext::new(rank, size, device, ranks_per_gpu, team);
                    let outcome =
                        catch_unwind(AssertUnwindSafe(|| body(&ctx))).unwrap_or_else(|panic| {
                            Err(anyhow!("panicked: {}", panic_message(&*panic)))
                        });
                    if outcome.is_err() {
                        team.abort();
                    }
                    let _ = rank_report.send(Report::Done(rank, outcome));
                });
            if let Err(err) = spawned {
                team.abort();
                let _ = report.send(Report::Done(
                    rank,
                    Err(anyhow!("could not start the thread for rank {rank}: {err}")),
                ));
            }
        }
        drop(report);

        let mut outcomes: Vec<Option<Outcome>> = (0..size).map(|_| None).collect();
        let mut failing = Vec::new();
        let mut deadline: Option<Instant> = None;
        while outcomes.iter().any(Option::is_none) {
            let next = match deadline {
                None => reports.recv().ok(),
                Some(at) => reports
                    .recv_timeout(at.saturating_duration_since(Instant::now()))
                    .ok(),
            };
            let failed = match next {
                None => break,
                Some(Report::Failing(rank)) => {
                    failing.push(rank);
                    true
                }
                Some(Report::Done(rank, outcome)) => {
                    let failed = outcome.is_err();
                    outcomes[rank] = Some(outcome);
                    failed
                }
            };
            if failed && deadline.is_none() {
                // Wake the ranks waiting in our collectives, and give the
                // others a little time to stop.
                team.abort();
                deadline = Some(Instant::now() + ABANDON_AFTER);
            }
        }

        let code = report_outcomes(&outcomes);
        for &rank in failing.iter().filter(|&&rank| outcomes[rank].is_none()) {
            eprintln!(
                "[rank {rank}/{size}] error: failed, but its error is still on its way: releasing its NCCL resources has waited {} s for ranks that are stuck",
                ABANDON_AFTER.as_secs()
            );
        }
        let stuck: Vec<usize> = (0..size)
            .filter(|&rank| outcomes[rank].is_none() && !failing.contains(&rank))
            .collect();
        if outcomes.iter().any(Option::is_none) {
            if !stuck.is_empty() {
                eprintln!(
                    "note: {} did not stop within {} s of the failure (blocked inside NCCL or CUDA, waiting for a peer that has stopped); exiting without {}",
                    ranks_text(&stuck),
                    ABANDON_AFTER.as_secs(),
                    if stuck.len() == 1 { "it" } else { "them" }
                );
            }
            flush_and_exit(code);
        }
        code
    })
}

/// `rank 2`, `ranks 0 and 1`, `ranks 0, 1 and 3`.
fn ranks_text(ranks: &[usize]) -> String {
    match ranks {
        [one] => format!("rank {one}"),
        [rest @ .., last] => {
            let rest: Vec<String> = rest.iter().map(usize::to_string).collect();
            format!("ranks {} and {last}", rest.join(", "))
        }
        [] => "no rank".into(),
    }
}

/// Did this rank stop only because another one failed?
fn is_peer_failure(err: &anyhow::Error) -> bool {
    err.chain().any(|e| e.is::<PeerFailed>())
}

/// Prints the errors of the ranks that failed first, in rank order, and
/// returns the exit code of the run.
fn report_outcomes(outcomes: &[Option<Outcome>]) -> u8 {
    let size = outcomes.len();
    let mut code = EXIT_OK;
    let mut worst = |c: u8| {
        // A real failure (1) outranks "cannot run here" (2).
        if code == EXIT_OK || c == EXIT_FAILED {
            code = c;
        }
    };
    for (rank, outcome) in outcomes.iter().enumerate() {
        let Some(Err(err)) = outcome else { continue };
        if let Some(reported) = err.chain().find_map(|e| e.downcast_ref::<Reported>()) {
            worst(reported.code);
        } else if is_peer_failure(err) {
            continue;
        } else {
            eprintln!("{}", render(&format!("[rank {rank}/{size}] "), err));
            worst(exit_code(err));
        }
    }
    if code == EXIT_OK && outcomes.iter().any(|o| !matches!(o, Some(Ok(())))) {
        // Only peer failures or ranks that never returned: still a failure.
        code = EXIT_FAILED;
    }
    code
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::Duration;

    #[test]
    fn peer_failure_is_recognised_through_context() {
        let err = anyhow::Error::new(PeerFailed { ranks: vec![1, 3] }).context("barrier");
        assert!(is_peer_failure(&err));
        assert_eq!(
            format!("{err:#}"),
            "barrier: stopped because rank 1, 3 failed"
        );
    }

    #[test]
    fn rank_lists_read_as_english() {
        assert_eq!(ranks_text(&[2]), "rank 2");
        assert_eq!(ranks_text(&[0, 1]), "ranks 0 and 1");
        assert_eq!(ranks_text(&[0, 1, 3]), "ranks 0, 1 and 3");
    }

    #[test]
    fn every_rank_sees_roots_broadcast() {
        let seen = Mutex::new(vec![Vec::new(); 4]);
        let code = run(4, &[0, 1, 2, 3], 1, |ctx| {
            let mut id = if ctx.is_root() {
                vec![7u8; 128]
            } else {
                vec![0u8; 128]
            };
            ctx.broadcast(&mut id)?;
            seen.lock().unwrap()[ctx.rank()] = id;
            Ok(())
        });
        assert_eq!(code, EXIT_OK);
        assert!(seen
            .into_inner()
            .unwrap()
            .iter()
            .all(|id| id == &vec![7u8; 128]));
    }

    #[test]
    fn gather_returns_rank_order_on_root_only() {
        let gathered = Mutex::new(None);
        let code = run(3, &[0, 1, 2], 1, |ctx| {
            // Make the ranks arrive out of order.
            std::thread::sleep(Duration::from_millis(10 * (3 - ctx.rank() as u64)));
            let all = ctx.gather(vec![ctx.rank() as u8; ctx.rank() + 1])?;
            assert_eq!(all.is_some(), ctx.is_root());
            if let Some(all) = all {
                *gathered.lock().unwrap() = Some(all);
            }
            Ok(())
        });
        assert_eq!(code, EXIT_OK);
        assert_eq!(
            gathered.into_inner().unwrap(),
            Some(vec![vec![0], vec![1, 1], vec![2, 2, 2]])
        );
    }

    #[test]
    fn barrier_holds_everyone_until_the_last_arrives() {
        let before = AtomicUsize::new(0);
        let code = run(4, &[0, 1, 2, 3], 1, |ctx| {
            for round in 1..=20 {
                before.fetch_add(1, Ordering::SeqCst);
                ctx.barrier()?;
                assert!(before.load(Ordering::SeqCst) >= 4 * round);
                ctx.barrier()?;
            }
            Ok(())
        });
        assert_eq!(code, EXIT_OK);
    }

    #[test]
    fn a_failing_rank_releases_the_others_from_the_barrier() {
        let start = Instant::now();
        let code = run(3, &[0, 1, 2], 1, |ctx| {
            if ctx.rank() == 1 {
                anyhow::bail!("rank 1 gives up");
            }
            ctx.barrier()
        });
        assert_eq!(code, EXIT_FAILED);
        assert!(
            start.elapsed() < ABANDON_AFTER,
            "the others waited for the timeout"
        );
    }

    #[test]
    fn cannot_run_everywhere_exits_2() {
        let code = run(2, &[0, 1], 1, |_| {
            Err(crate::CannotRun::new("no", "yes").into())
        });
        assert_eq!(code, crate::EXIT_CANNOT_RUN);
    }

    #[test]
    fn all_ok_fails_everyone_when_one_rank_fails() {
        let results = Mutex::new(vec![]);
        let code = run(3, &[0, 1, 2], 1, |ctx| {
            let local = if ctx.rank() == 2 {
                Err(anyhow!("element 5 is wrong"))
            } else {
                Ok(())
            };
            let agreed = ctx.all_ok(local);
            results.lock().unwrap().push((ctx.rank(), agreed.is_err()));
            agreed
        });
        assert_eq!(code, EXIT_FAILED);
        assert!(results
            .into_inner()
            .unwrap()
            .iter()
            .all(|(_, failed)| *failed));
    }

    #[test]
    fn panics_become_failures() {
        let code = run(2, &[0, 1], 1, |ctx| {
            if ctx.rank() == 0 {
                panic!("boom");
            }
            ctx.barrier()
        });
        assert_eq!(code, EXIT_FAILED);
    }
}
