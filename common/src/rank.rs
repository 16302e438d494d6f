//! The rank context: what a lesson knows about itself and its peers.

use std::fmt::{self, Display};
use std::io::Write;

use anyhow::Result;

use crate::error::{exit_code, render, EXIT_CANNOT_RUN, EXIT_FAILED};

/// The host-side collectives a launch mode provides. Rank 0 is the root of
/// every one of them. Every rank must call them in the same order.
pub(crate) trait Backend {
    fn barrier(&self, rank: usize) -> Result<()>;
    /// Root's bytes overwrite everyone's; every rank passes a buffer of the same length.
    fn broadcast(&self, rank: usize, bytes: &mut [u8]) -> Result<()>;
    /// Root receives every rank's bytes, in rank order; the others receive `None`.
    fn gather(&self, rank: usize, bytes: Vec<u8>) -> Result<Option<Vec<Vec<u8>>>>;
}

/// One rank's view of the run: who it is, which GPU it drives, and the
/// host-side collectives it shares with its peers (thread mode: shared memory;
/// MPI mode: MPI).
///
/// The collectives ([`barrier`](Self::barrier), [`broadcast`](Self::broadcast),
/// [`println_ordered`](Self::println_ordered), [`all_ok`](Self::all_ok)) must be
/// called by every rank in the same order, like NCCL's.
pub struct RankContext<'a> {
    rank: usize,
    size: usize,
    device: usize,
    ranks_per_gpu: usize,
    backend: &'a dyn Backend,
}

/// A failure that [`RankContext::all_ok`] has already printed for every rank;
/// the launcher only turns it into the exit code.
#[derive(Debug)]
pub(crate) struct Reported {
    pub code: u8,
    pub ranks: Vec<usize>,
}

impl Display for Reported {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list: Vec<String> = self.ranks.iter().map(usize::to_string).collect();
        write!(f, "failed on rank {}", list.join(", "))
    }
}

impl std::error::Error for Reported {}

impl<'a> RankContext<'a> {
    pub(crate) fn new(
        rank: usize,
        size: usize,
        device: usize,
        ranks_per_gpu: usize,
        backend: &'a dyn Backend,
    ) -> Self {
        Self {
            rank,
            size,
            device,
            ranks_per_gpu: ranks_per_gpu.max(1),
            backend,
        }
    }

    /// This rank, `0..size()`.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// How many ranks take part (the NCCL communicator's size).
    pub fn size(&self) -> usize {
        self.size
    }

    /// The CUDA device ordinal this rank drives: the rank (in MPI mode, the
    /// rank within its node) modulo the visible GPUs, so the rank itself
    /// when every rank has a GPU of its own.
    pub fn device(&self) -> usize {
        self.device
    }

    /// The most ranks of this job that share one GPU: 1 when every rank has
    /// its own, more when `NCCL_MULTI_RANK_GPU_ENABLE=1` let ranks share
    /// (see `placement.rs`). The same on every rank.
    pub fn ranks_per_gpu(&self) -> usize {
        self.ranks_per_gpu
    }

    /// This rank's share of `blocks` that a GPU holds at once:
    /// `blocks / ranks_per_gpu()`, the same on every rank. A kernel whose
    /// blocks wait for other blocks or ranks (an LSA barrier, a cooperative
    /// grid) must launch no more than this, or the ranks sharing the GPU
    /// cannot all be resident and their barriers wait for blocks that never
    /// start. 0 when there are fewer blocks than ranks on the GPU.
    pub fn share_of_gpu(&self, blocks: u32) -> u32 {
        blocks / self.ranks_per_gpu as u32
    }

    /// Rank 0: the one that creates the NCCL unique id and prints shared lines.
    pub fn is_root(&self) -> bool {
        self.rank == 0
    }

    /// Waits until every rank has arrived.
    pub fn barrier(&self) -> Result<()> {
        self.backend.barrier(self.rank)
    }

    /// Copies rank 0's `bytes` into every other rank's `bytes` (same length
    /// everywhere). This is how the NCCL unique id travels.
    pub fn broadcast(&self, bytes: &mut [u8]) -> Result<()> {
        self.backend.broadcast(self.rank, bytes)
    }

    /// Rank 0 receives every rank's bytes in rank order; the others get `None`.
    pub fn gather(&self, bytes: Vec<u8>) -> Result<Option<Vec<Vec<u8>>>> {
        self.backend.gather(self.rank, bytes)
    }

    /// Rank 0's `bytes`, of any length, on every rank.
    pub fn broadcast_vec(&self, bytes: Vec<u8>) -> Result<Vec<u8>> {
        let mut len = (bytes.len() as u64).to_le_bytes();
        self.broadcast(&mut len)?;
        let mut out = if self.is_root() {
            bytes
        } else {
            vec![0; u64::from_le_bytes(len) as usize]
        };
        self.broadcast(&mut out)?;
        Ok(out)
    }

    /// Prints `line` once, from rank 0. Not a collective: other ranks return at once.
    pub fn println_root(&self, line: impl Display) {
        if self.is_root() {
            let mut out = std::io::stdout().lock();
            // A closed stdout (a pipe whose reader left) is not the lesson's failure.
            let _ = writeln!(out, "{line}");
        }
    }

    /// Collective: every rank passes one line; rank 0 prints them in rank order.
    /// The output is the same in thread and MPI mode, whatever the scheduling.
    pub fn println_ordered(&self, line: impl Display) -> Result<()> {
        let line = line.to_string();
        if let Some(lines) = self.gather(line.clone().into_bytes())? {
            let mut out = std::io::stdout().lock();
            for line in lines {
                let _ = writeln!(out, "{}", String::from_utf8_lossy(&line));
            }
        }
        // The tests' fault hook (SYMMEM_TEST_FAULT=...:after:<text>).
        crate::fault::at(self.rank, crate::fault::Point::AfterLine(&line))
    }

    /// Collective: succeeds on every rank (with its own `local` value) only if
    /// `local` succeeded on every rank.
    ///
    /// Use it where every rank reaches the same point even when something went
    /// wrong (verification). Rank 0 prints each failing rank's error in rank
    /// order; every rank then returns an error that makes the run exit 1 (or 2 if
    /// the failures were all "cannot run here"), without aborting anyone.
    pub fn all_ok<T>(&self, local: Result<T>) -> Result<T> {
        let mine = match &local {
            Ok(_) => vec![],
            Err(err) => {
                let mut report = vec![exit_code(err)];
                report.extend_from_slice(render(&self.prefix(), err).as_bytes());
                report
            }
        };
        let summary = match self.gather(mine)? {
            Some(reports) => {
                let mut failed = Vec::new();
                let mut code = EXIT_CANNOT_RUN;
                for (rank, report) in reports.iter().enumerate() {
                    if let Some((&rank_code, text)) = report.split_first() {
                        eprintln!("{}", String::from_utf8_lossy(text));
                        failed.push(rank as u8);
                        if rank_code == EXIT_FAILED {
                            code = EXIT_FAILED;
                        }
                    }
                }
                let _ = std::io::stderr().flush();
                if failed.is_empty() {
                    vec![]
                } else {
                    [vec![code], failed].concat()
                }
            }
            None => vec![],
        };
        let summary = self.broadcast_vec(summary)?;
        match summary.split_first() {
            None => local,
            Some((&code, ranks)) => Err(Reported {
                code,
                ranks: ranks.iter().map(|&r| r as usize).collect(),
            }
            .into()),
        }
    }

    /// `[rank r/n] `: the prefix of this rank's error lines.
    pub fn prefix(&self) -> String {
        format!("[rank {}/{}] ", self.rank, self.size)
    }
}

thread_local! {
    /// What this rank's launcher wants to hear the moment the rank starts to
    /// leave through an error; see [`leaving_on_error`].
    static ON_ERROR_PATH: std::cell::RefCell<Option<Box<dyn FnOnce()>>> =
        const { std::cell::RefCell::new(None) };
}

/// Sets what [`leaving_on_error`] calls on this thread (the rank's).
pub(crate) fn when_leaving_on_error(notice: Box<dyn FnOnce()>) {
    ON_ERROR_PATH.with(|slot| *slot.borrow_mut() = Some(notice));
}

/// Tells the launcher that this rank is leaving through an error. Call it
/// from the `Drop` of a guard whose release may wait for other ranks, before
/// that release, when the guard is dropped unreleased (which only happens on
/// an error path); the NCCL guards in [`nccl`](crate::nccl) do.
///
/// The launcher then hears of the failure at once rather than when the rank
/// returns: the guard's release (a window deregistration is collective) may
/// wait for peers that are themselves stuck waiting for this rank, and then
/// the rank never returns. Once told, the launcher stops the run if the rank
/// has not returned within [`ABANDON_AFTER`](crate::ABANDON_AFTER).
pub fn leaving_on_error() {
    if let Some(notice) = ON_ERROR_PATH.with(|slot| slot.borrow_mut().take()) {
        notice();
    }
}
