//! Measurement, in one place, with nccl-tests' definitions, so that a table
//! from a benchmark here can be laid beside `all_reduce_perf`'s.
//!
//! * **time**: CUDA events recorded around `iters` back-to-back operations
//!   on the rank's stream, after `warmup` untimed ones, divided by `iters`
//!   ([`time_trials`]). Like nccl-tests, consecutive operations use
//!   consecutive regions of the buffers, so that a size that fits in L2 is
//!   not timed from the cache: as many regions as cover L2 four times
//!   ([`allreduce::regions`]), so that a buffer holds at most 4 times the
//!   larger of the largest size and L2; where a trial has more operations
//!   than regions, it runs in rounds, each checked before the next writes
//!   over its regions ([`time_rotating`]).
//!   Each size is timed `trials` times and each rank keeps its median trial
//!   (a single hiccup of the host, a few hundred µs, was seen on the GPU
//!   machine). The operation's time is the **average over ranks**, as
//!   nccl-tests reports by default, or the slowest rank's with `--slowest`.
//! * **algbw** = bytes / time, in GB/s (1 GB = 1e9 B). For AllReduce the
//!   bytes are the buffer's; for alltoallv, the largest total any rank sends
//!   or receives, as nccl-tests' `alltoallv_perf` counts them.
//! * **busbw** = algbw × a per-collective factor ([`Collective::bus_factor`])
//!   that makes the figure comparable with the links' bandwidth.
//! * **#wrong**: what was timed is what is checked. For AllReduce every
//!   operation of every trial has its own input and output region, filled
//!   with fresh data and poisoned before the trial (or its round) and
//!   checked element by element, on the GPU, after it ([`time_rotating`],
//!   [`allreduce`]); `--stress N` runs N
//!   operations back to back with the ranks skewed on purpose and checks
//!   each. Any wrong element makes the run exit 1.
//!
//! [`report`] prints the table and writes `--json` and `--svg`;
//! [`allreduce`] holds the AllReduce data, check, sweep and stress run that
//! the 02 and 05 benchmarks share, and [`data`] the GPU kernels that draw and
//! check their data.
//!
//! # How long a default sweep takes
//!
//! Issue 32 asks every default sweep to finish in 60 s at 1 and at 2 ranks
//! on one H100. The estimate, from the code, for `-b 8 -e 512M -f 2 -n 20
//! -w 5 --trials 5`: 27 sizes, each timed out of place and in place, for
//! every series. (Measured on one H100, runs/2026-11-25/call87/times.txt,
//! whole runs at 1 and 2 ranks: `02_allreduce_bench` 3 and 7 s,
//! `03_alltoallv_bench` 2 and 6 s, `05_allreduce_bench` 8 and 11 s.)
//!
//! * **Operations.** Per size and placement: 5 warm-up operations, then 5
//!   trials of 20 timed ones plus one untimed per round
//!   ([`time_rotating`]): 110 up to 8 MiB (one round), 115 at 16 MiB, 125
//!   at 32 MiB, 140 from 64 MiB (4 regions: 7 rounds). The sizes double,
//!   so the sweep's operation time is about 2 × 140 × the time of one at
//!   512 MiB. An H100 moves about 3 TB/s (read + write); an AllReduce of
//!   512 MiB moves 2 × 512 MiB at 1 rank (0.36 ms) and about 6 × 512 MiB
//!   on one GPU shared by 2 ranks (1.1 ms): 0.1 to 0.3 s per placement for
//!   `ncclAllReduce` and the fast kernels. Lesson 05's `simple` kernel (16
//!   blocks, one float per thread) runs at about 41 GB/s (13 ms at 512 MiB,
//!   runs/2026-11-22/call8b): 3.6 s per placement, the largest term.
//! * **Checks**, on the GPU ([`data`]): fill, poison and check are memory
//!   passes plus one SplitMix64 hash per element and rank (about 35 integer
//!   operations; an H100 does about 15e12 a second): about 1.1 ms per
//!   512 MiB region and rank, 27 regions per trial: 0.3 s per placement at
//!   2 ranks.
//! * **Host**: one fresh seed, barrier, event and check read-back per round,
//!   about 0.3 ms; 300 rounds per placement: 0.1 s.
//!
//! So, at 2 ranks on one GPU, summing both placements and all sizes:
//! `02_allreduce_bench` (3 registration modes of `ncclAllReduce`, each
//! about 0.6 s of operations and 1.2 s of checks) about 7 s;
//! `05_allreduce_bench` (`nccl,simple,fast`) about 13 s, 7 of them
//! `simple`'s; `03_alltoallv_bench` (3 modes; an exchange moves about
//! 2 GiB at the top, 0.7 ms, and its check is one memory pass) about 3 s;
//! each plus NCCL's start (a few seconds) and the kernels' build when not
//! cached. One rank is about half. Before this
//! accounting the buffers held 21 copies of the largest size (10.5 GiB each
//! at the defaults) and every trial touched all 21; `03_alltoallv_bench`
//! drew, uploaded, downloaded and compared 2 × 512 MiB per size and mode on
//! the host (about 2 s each).
//!
//! Only the `*_bench` binaries (`02_allreduce_bench`, `03_alltoallv_bench`,
//! `05_allreduce_bench`) and `examples/replot.rs` use this crate; the lessons
//! verify and do not time, and need only `common`.

pub mod allreduce;
pub mod data;
pub mod report;

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::{ensure, Context, Result};
use cudarc::driver::{sys as cu_sys, CudaStream};
use serde::{Deserialize, Serialize};

use common::{parse_size, CannotRun, RankContext};

/// The collectives nccl-tests measures, for their bus-bandwidth factor.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Collective {
    AllReduce,
    AllGather,
    ReduceScatter,
    /// AlltoAll and alltoallv.
    AlltoAll,
    Broadcast,
    Reduce,
    SendRecv,
}

impl Collective {
    /// busbw / algbw for `ranks` ranks: 2(n-1)/n for AllReduce, (n-1)/n for
    /// AllGather, ReduceScatter and AlltoAll, 1 for the rest.
    pub fn bus_factor(self, ranks: usize) -> f64 {
        let n = ranks as f64;
        match self {
            Collective::AllReduce => 2.0 * (n - 1.0) / n,
            Collective::AllGather | Collective::ReduceScatter | Collective::AlltoAll => {
                (n - 1.0) / n
            }
            Collective::Broadcast | Collective::Reduce | Collective::SendRecv => 1.0,
        }
    }
}

/// The sweep options every benchmark takes, named as nccl-tests names them.
#[derive(clap::Args, Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepArgs {
    /// Smallest size in bytes (suffixes K, M, G are powers of 1024).
    #[arg(short = 'b', long, value_name = "BYTES", default_value = "8", value_parser = parse_size)]
    pub min_bytes: usize,
    /// Largest size in bytes.
    #[arg(short = 'e', long, value_name = "BYTES", default_value = "512M", value_parser = parse_size)]
    pub max_bytes: usize,
    /// Each size is this many times the previous one.
    #[arg(short = 'f', long, default_value_t = 2, value_parser = clap::value_parser!(u64).range(2..))]
    pub factor: u64,
    /// Timed operations per trial.
    #[arg(short = 'n', long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..))]
    pub iters: u32,
    /// Untimed operations before the first trial of each size.
    #[arg(short = 'w', long, default_value_t = 5)]
    pub warmup: u32,
    /// Trials per size; each rank keeps its median trial.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
    pub trials: u32,
    /// Report the slowest rank's time instead of the average over ranks.
    #[arg(long)]
    pub slowest: bool,
    /// Also write every row, the system and the options as JSON to FILE.
    #[arg(long, value_name = "FILE")]
    pub json: Option<PathBuf>,
    /// Also draw busbw and time against size as an SVG plot in FILE.
    #[arg(long, value_name = "FILE")]
    pub svg: Option<PathBuf>,
}

/// The largest `--max-bytes` a sweep takes: 1 TiB, more than any GPU holds,
/// and small enough that the buffers' sizes (a few times the largest size,
/// times the ranks on a GPU) cannot overflow.
pub const MAX_SIZE: usize = 1 << 40;

impl SweepArgs {
    /// The sizes of the sweep, in bytes: `min_bytes`, then × `factor` while
    /// not above `max_bytes`, each rounded down to whole elements of
    /// `elem_bytes` (sizes that round to no element are left out).
    pub fn sizes(&self, elem_bytes: usize) -> Result<Vec<usize>, CannotRun> {
        if self.min_bytes > self.max_bytes {
            return Err(CannotRun::new(
                format!(
                    "--min-bytes {} is larger than --max-bytes {}",
                    self.min_bytes, self.max_bytes
                ),
                "swap them, or leave one out",
            ));
        }
        if self.max_bytes > MAX_SIZE {
            return Err(CannotRun::new(
                format!(
                    "--max-bytes {} is larger than any GPU's memory (the sweep takes at most {MAX_SIZE} bytes, 1 TiB)",
                    self.max_bytes
                ),
                "give a size the GPU can hold four times over, such as 512M",
            ));
        }
        Ok(sweep_sizes(
            self.min_bytes,
            self.max_bytes,
            self.factor as usize,
            elem_bytes,
        ))
    }

    /// What a benchmark checks before any rank starts: the sweep
    /// ([`SweepArgs::sizes`]) and that `--json` and `--svg` can be written
    /// ([`check_writable`]), so that a mistyped directory is refused (exit
    /// code 2) at once, not after a sweep of minutes whose results would be
    /// lost.
    pub fn check(&self, elem_bytes: usize) -> Result<(), CannotRun> {
        self.sizes(elem_bytes)?;
        // Rank 0 writes them (Report::publish); under mpirun another rank,
        // perhaps on another node, has no business refusing for its paths.
        if common::launch_mode() == "mpi" && !launcher_says_rank_0() {
            return Ok(());
        }
        for (option, path) in [("--json", &self.json), ("--svg", &self.svg)] {
            if let Some(path) = path {
                check_writable(option, path)?;
            }
        }
        Ok(())
    }
}

/// Does the MPI launcher's environment name this process rank 0 (or name no
/// rank at all)? Open MPI, MPICH and Slurm each set one of these.
fn launcher_says_rank_0() -> bool {
    [
        "OMPI_COMM_WORLD_RANK",
        "PMI_RANK",
        "PMIX_RANK",
        "SLURM_PROCID",
    ]
    .iter()
    .find_map(|name| std::env::var(name).ok())
    .is_none_or(|rank| rank.trim() == "0")
}

/// Can a report be written at `path` (given as `option`)? It is opened for
/// appending, created if missing, and removed again if this created it: an
/// existing file is left as it was, and nothing is left behind. (A link to a
/// file not yet written keeps its link; its target is created empty, as the
/// report would create it.)
pub fn check_writable(option: &str, path: &std::path::Path) -> Result<(), CannotRun> {
    let refuse = |why: String| {
        CannotRun::new(
            format!("{option} {}: {why}", path.display()),
            "name a file in a directory that exists and that you can write to",
        )
    };
    if path.is_dir() {
        return Err(refuse("is a directory".into()));
    }
    // The name itself, not what it points to: a link to a file not yet
    // written exists, and must not be removed after the check.
    let existed = std::fs::symlink_metadata(path).is_ok();
    std::fs::OpenOptions::new()
        .append(true)
        .create(true)
        .open(path)
        .map_err(|err| refuse(format!("cannot be written ({err})")))?;
    if !existed {
        std::fs::remove_file(path)
            .map_err(|err| refuse(format!("cannot be removed after the check ({err})")))?;
    }
    Ok(())
}

/// See [`SweepArgs::sizes`].
pub fn sweep_sizes(min: usize, max: usize, factor: usize, elem_bytes: usize) -> Vec<usize> {
    let mut sizes = Vec::new();
    let mut bytes = min;
    while bytes <= max {
        let whole = bytes / elem_bytes * elem_bytes;
        if whole > 0 && sizes.last() != Some(&whole) {
            sizes.push(whole);
        }
        match bytes.checked_mul(factor.max(2)) {
            Some(next) => bytes = next,
            None => break,
        }
    }
    sizes
}

/// `1K`, `4M`, `256M`: sizes as nccl-tests' `-b/-e` options write them.
pub fn size_label(bytes: usize) -> String {
    const UNITS: [(usize, &str); 3] = [(1 << 30, "G"), (1 << 20, "M"), (1 << 10, "K")];
    for (unit, suffix) in UNITS {
        if bytes >= unit && bytes.is_multiple_of(unit) {
            return format!("{}{suffix}", bytes / unit);
        }
    }
    format!("{bytes}")
}

/// Bytes per second in GB/s (1e9).
pub fn gb_per_s(bytes: usize, seconds: f64) -> f64 {
    bytes as f64 / seconds / 1e9
}

/// Out of place (separate send and receive buffers) or in place (one buffer).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Placement {
    OutOfPlace,
    InPlace,
}

/// One timed size of one series, in one placement.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Sample {
    /// Per operation, in µs: the average over ranks (or the slowest rank).
    pub time_us: f64,
    pub algbw: f64,
    pub busbw: f64,
    /// Wrong elements, summed over ranks.
    pub wrong: u64,
}

impl Sample {
    pub fn new(bytes: usize, seconds: f64, bus_factor: f64, wrong: u64) -> Self {
        let algbw = gb_per_s(bytes, seconds);
        Self {
            time_us: seconds * 1e6,
            algbw,
            busbw: algbw * bus_factor,
            wrong,
        }
    }
}

/// CUDA events around `iters` operations, after `warmup` untimed ones; the
/// median of `trials` such timings, in seconds per operation.
/// `launch(i)` enqueues operation `i` of a trial on `stream`; see
/// [`time_checked`] for the numbering.
pub fn time_trials(
    ctx: &RankContext,
    stream: &Arc<CudaStream>,
    args: &SweepArgs,
    launch: impl FnMut(usize) -> Result<()>,
) -> Result<f64> {
    time_checked(ctx, stream, args, || Ok(()), launch, || Ok(0)).map(|(seconds, _)| seconds)
}

/// [`time_trials`], with the data made before and checked after every trial:
/// `prepare` runs before the warm-up and before each trial, `check` after
/// each trial and returns the wrong elements it found; their sum over the
/// trials comes back beside the median time. Neither is timed.
///
/// A trial is `launch(0)`, untimed, then the start event, `launch(1)` to
/// `launch(iters)`, and the end event, so a benchmark can give each of the
/// `iters + 1` operations its own region of its buffers: nccl-tests moves
/// through its buffers the same way, so that a size that fits in L2 is not
/// timed from the cache, and here it also lets `check` see what every timed
/// operation wrote. The warm-up's operations are numbered the same way.
///
/// The untimed `launch(0)` comes after a host barrier. The host barrier alone
/// leaves the ranks' launches skewed by its wake-up time (tens of µs for
/// thread mode's condition variable), and that skew would be timed as the
/// first operation's wait for its peers; a collective lines the GPUs up
/// instead.
///
/// [`time_rotating`] with as many regions as a trial has operations; it
/// needs `iters + 1` regions at every size.
pub fn time_checked(
    ctx: &RankContext,
    stream: &Arc<CudaStream>,
    args: &SweepArgs,
    mut prepare: impl FnMut() -> Result<()>,
    launch: impl FnMut(usize) -> Result<()>,
    mut check: impl FnMut() -> Result<u64>,
) -> Result<(f64, u64)> {
    let regions = args.iters as usize + 1;
    time_rotating(
        ctx,
        stream,
        args,
        regions,
        |_| prepare(),
        launch,
        |_| check(),
    )
}

/// [`time_checked`] over `regions` regions (at least 2) instead of one per
/// operation, so that the buffers need not hold `iters + 1` copies of the
/// largest size (see [`allreduce::regions`]) while every timed operation is
/// still checked before another writes over its region.
///
/// A trial's `iters` timed operations run in rounds of at most
/// `regions - 1`: each round is `prepare(n)` (fresh data in the first `n`
/// regions), a host barrier, the untimed `launch(0)`, the start event,
/// `launch(1)` to `launch(n - 1)`, the end event, and `check(n)`, which
/// checks the first `n` regions. The trial's time is the sum of its rounds'
/// event times over `iters`. With `regions = iters + 1` a trial is one round,
/// exactly as [`time_checked`] runs it; with fewer, each round adds one
/// untimed operation, a preparation and a check, at sizes whose operations
/// are long enough (4 times L2 over at most `regions - 1` of them) that
/// their launch gaps are small against them.
///
/// The warm-up's operations are `launch(i % regions)` after `prepare(regions)`.
pub fn time_rotating(
    ctx: &RankContext,
    stream: &Arc<CudaStream>,
    args: &SweepArgs,
    regions: usize,
    mut prepare: impl FnMut(usize) -> Result<()>,
    mut launch: impl FnMut(usize) -> Result<()>,
    mut check: impl FnMut(usize) -> Result<u64>,
) -> Result<(f64, u64)> {
    ensure!(
        regions >= 2,
        "a trial needs 2 regions at least (the untimed operation and a timed one), not {regions}"
    );
    let timed = Some(cu_sys::CUevent_flags::CU_EVENT_DEFAULT);
    let iters = args.iters as usize;
    prepare(regions)?;
    // Every rank has prepared before any launches: ranks that share a GPU in
    // thread mode share one CUDA context, and a preparation that waits for
    // the context (cuCtxSynchronize, or any CUDA call that happens to) would
    // wait for a peer's kernel that waits for this rank's.
    ctx.barrier()?;
    for i in 0..args.warmup as usize {
        launch(i % regions)?;
    }
    stream.synchronize().context("warm-up")?;
    let mut trials = Vec::with_capacity(args.trials as usize);
    let mut wrong = 0;
    for _ in 0..args.trials {
        let (mut ms, mut done) = (0f64, 0);
        for round in rounds(iters, regions) {
            // Every rank has checked its last round (its operations are done)
            // before any rank writes over its regions: a peer's last operation
            // may have been reading this rank's, and not every kernel ends
            // with a barrier between the ranks (a one-shot over LL does not).
            ctx.barrier()?;
            prepare(round + 1)?;
            ctx.barrier()?;
            launch(0)?;
            let start = stream.record_event(timed).context("cuEventRecord")?;
            for i in 1..=round {
                launch(i)?;
            }
            let end = stream.record_event(timed).context("cuEventRecord")?;
            ms += f64::from(start.elapsed_ms(&end).context("cuEventElapsedTime")?);
            wrong += check(round + 1)?;
            done += round;
        }
        debug_assert_eq!(done, iters);
        trials.push(ms * 1e-3 / iters as f64);
    }
    Ok((median(&mut trials), wrong))
}

/// The timed operations of each round of a trial of `iters` operations over
/// `regions` regions: `regions - 1` each, the last round what is left.
pub fn rounds(iters: usize, regions: usize) -> impl Iterator<Item = usize> {
    let per_round = regions.saturating_sub(1).max(1);
    (0..iters.div_ceil(per_round)).map(move |k| per_round.min(iters - k * per_round))
}

/// The registration modes to time, as nccl-tests' `-R` (flattened into a
/// benchmark's options).
#[derive(clap::Args, Debug, Clone, PartialEq, Eq)]
pub struct RegistrationArgs {
    /// Registration modes to time, as nccl-tests' -R: 0 none, 1 ncclCommRegister, 2 symmetric window.
    #[arg(short = 'R', long = "registration", value_delimiter = ',', default_value = "0,1,2",
          value_parser = clap::value_parser!(u8).range(0..=2))]
    pub modes: Vec<u8>,
}

/// nccl-tests' `-R`: how the benchmark's buffers are registered while one
/// series is timed. `0` none, `1` `ncclCommRegister` (lesson 01), `2`
/// symmetric windows (lesson 02).
pub fn with_registration<T>(
    mode: u8,
    comm: &common::nccl::Communicator,
    buffers: [&common::nccl::NcclBuffer; 2],
    timed: impl FnOnce() -> Result<T>,
) -> Result<T> {
    match mode {
        0 => timed(),
        1 => {
            let registrations = buffers.map(|buffer| {
                common::setup::register(comm, buffer).context("-R 1: ncclCommRegister")
            });
            let [send, recv] = registrations;
            let (send, recv) = (send?, recv?);
            let result = timed()?;
            send.deregister()?;
            recv.deregister()?;
            Ok(result)
        }
        _ => {
            let windows = buffers.map(|buffer| {
                common::setup::window(comm, buffer).context("-R 2: ncclCommWindowRegister")
            });
            let [send, recv] = windows;
            let (send, recv) = (send?, recv?);
            let result = timed()?;
            send.deregister()?;
            recv.deregister()?;
            Ok(result)
        }
    }
}

/// What `-R mode` means, for a series' description.
pub fn registration_about(mode: u8) -> &'static str {
    match mode {
        0 => "buffers not registered",
        1 => "buffers registered with ncclCommRegister",
        _ => "buffers registered as symmetric windows (ncclCommWindowRegister)",
    }
}

/// Collective: fails with exit code 2 on every rank if any rank's GPU has
/// less than `needed` bytes free (plus 256 MiB for NCCL's own buffers) for
/// each of the ranks that share it.
pub fn check_free_memory(ctx: &RankContext, needed: usize) -> Result<()> {
    let (free, _) = cudarc::driver::result::mem_get_info().context("cuMemGetInfo")?;
    let sharing = ctx.ranks_per_gpu().max(1);
    let all = needed.saturating_add(256 << 20).saturating_mul(sharing);
    ctx.all_ok(if all > free {
        Err(CannotRun::new(
            format!(
                "the sweep needs {needed} bytes of buffers on GPU {}{}, and {free} are free",
                ctx.device(),
                if sharing > 1 {
                    format!(" for each of the {sharing} ranks that share it")
                } else {
                    String::new()
                }
            ),
            "use a smaller --max-bytes (each buffer holds up to 4 times the largest size, to rotate past L2)",
        )
        .into())
    } else {
        Ok(())
    })
}

/// Collective: the bytes each of `buffers` buffers of a benchmark gets:
/// `wanted` where every rank's GPU has room for them and `extra` bytes more
/// (plus 256 MiB for NCCL's own, and shared by the ranks on one GPU); else
/// as much as the fullest GPU leaves, the same on every rank, and never
/// less than `minimum` (exit 2, through [`check_free_memory`], when not
/// even that fits). The benchmarks take as many regions as their buffers
/// hold ([`allreduce::regions`] at most), so a smaller buffer only means
/// fewer regions to rotate through; rank 0 says so on stderr.
pub fn fit_to_memory(
    ctx: &RankContext,
    wanted: usize,
    minimum: usize,
    buffers: usize,
    extra: usize,
) -> Result<usize> {
    let (free, _) = cudarc::driver::result::mem_get_info().context("cuMemGetInfo")?;
    let share = (free / ctx.ranks_per_gpu().max(1)).saturating_sub((256 << 20) + extra);
    // Whole MiB when cut down, as allocators hand memory out.
    let room = share / buffers.max(1) / (1 << 20) * (1 << 20);
    let fits = room.min(wanted).max(minimum);
    let per_buffer = min_over_ranks(ctx, fits as u64)? as usize;
    check_free_memory(
        ctx,
        buffers.saturating_mul(per_buffer).saturating_add(extra),
    )?;
    if per_buffer < wanted && ctx.is_root() {
        eprintln!(
            "note: each of the {buffers} buffers holds {per_buffer} bytes, not the {wanted} that rotate past L2 at every size: \
             that is what the GPU has free ({free} bytes{}); large sizes rotate through fewer regions",
            if ctx.ranks_per_gpu() > 1 {
                format!(", shared by {} ranks", ctx.ranks_per_gpu())
            } else {
                String::new()
            }
        );
    }
    Ok(per_buffer)
}

/// The middle value (the lower middle of an even count).
pub fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[(values.len().max(1) - 1) / 2]
}

/// Collective: every rank's `seconds` combined on rank 0, the average or
/// (with `slowest`) the largest; other ranks get their own value back.
pub fn across_ranks(ctx: &RankContext, seconds: f64, slowest: bool) -> Result<f64> {
    let all = ctx.gather(seconds.to_le_bytes().to_vec())?;
    let Some(all) = all else {
        return Ok(seconds);
    };
    let values: Vec<f64> = all
        .iter()
        .map(|bytes| bytes.as_slice().try_into().map(f64::from_le_bytes))
        .collect::<Result<_, _>>()
        .context("a rank sent a malformed time")?;
    ensure!(!values.is_empty(), "no rank reported a time");
    Ok(if slowest {
        values.iter().copied().fold(0.0, f64::max)
    } else {
        values.iter().sum::<f64>() / values.len() as f64
    })
}

/// Collective: the smallest of every rank's `value`, on every rank.
pub fn min_over_ranks(ctx: &RankContext, value: u64) -> Result<u64> {
    let mut agreed = value.to_le_bytes();
    if let Some(all) = ctx.gather(agreed.to_vec())? {
        let smallest = all
            .iter()
            .map(|bytes| bytes.as_slice().try_into().map(u64::from_le_bytes))
            .collect::<Result<Vec<u64>, _>>()
            .context("a rank sent a malformed value")?
            .into_iter()
            .min()
            .unwrap_or(value);
        agreed = smallest.to_le_bytes();
    }
    ctx.broadcast(&mut agreed)?;
    Ok(u64::from_le_bytes(agreed))
}

/// Collective: the sum of every rank's `count` on rank 0 (others get their own).
pub fn sum_over_ranks(ctx: &RankContext, count: u64) -> Result<u64> {
    let Some(all) = ctx.gather(count.to_le_bytes().to_vec())? else {
        return Ok(count);
    };
    all.iter()
        .map(|bytes| bytes.as_slice().try_into().map(u64::from_le_bytes))
        .sum::<Result<u64, _>>()
        .context("a rank sent a malformed count")
}

/// A progress bar on stderr for a sweep, from rank 0 only, drawn only when
/// stderr is a terminal (indicatif hides it otherwise), so logs stay clean.
pub fn progress(ctx: &RankContext, steps: usize, what: &str) -> indicatif::ProgressBar {
    if !ctx.is_root() {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(steps as u64);
    if let Ok(style) =
        indicatif::ProgressStyle::with_template("{prefix} [{bar:30}] {pos}/{len} {msg} ({elapsed})")
    {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_prefix(what.to_string());
    bar
}

#[cfg(test)]
mod tests {

    #[test]
    fn a_link_to_a_report_not_yet_written_is_kept() {
        let dir = tempfile::tempdir().unwrap();
        let link = dir.path().join("report.json");
        std::os::unix::fs::symlink(dir.path().join("target.json"), &link).unwrap();
        check_writable("--json", &link).unwrap();
        assert!(
            std::fs::symlink_metadata(&link).is_ok(),
            "the link was removed"
        );
    }
    use super::*;
    use clap::Parser;

    #[derive(clap::Parser, Debug)]
    struct Cli {
        #[command(flatten)]
        sweep: SweepArgs,
    }

    #[test]
    fn bus_factors_match_nccl_tests() {
        assert_eq!(Collective::AllReduce.bus_factor(4), 1.5);
        assert_eq!(Collective::AllReduce.bus_factor(2), 1.0);
        assert_eq!(Collective::AllReduce.bus_factor(8), 1.75);
        assert_eq!(Collective::AlltoAll.bus_factor(4), 0.75);
        assert_eq!(Collective::AllGather.bus_factor(8), 0.875);
        assert_eq!(Collective::ReduceScatter.bus_factor(2), 0.5);
        assert_eq!(Collective::SendRecv.bus_factor(8), 1.0);
    }

    #[test]
    fn bandwidth_is_in_decimal_gigabytes() {
        assert_eq!(gb_per_s(1_000_000_000, 0.5), 2.0);
        let s = Sample::new(128 << 20, 470e-6, 1.0, 0);
        assert!((s.busbw - 285.6).abs() < 0.1, "{s:?}");
        assert_eq!(s.time_us, 470.0);
    }

    #[test]
    fn the_options_are_nccl_tests_short_flags() {
        let cli = Cli::try_parse_from([
            "bench", "-b", "1K", "-e", "1M", "-f", "4", "-n", "7", "-w", "2",
        ])
        .unwrap();
        assert_eq!(
            (cli.sweep.min_bytes, cli.sweep.max_bytes, cli.sweep.factor),
            (1024, 1 << 20, 4)
        );
        assert_eq!((cli.sweep.iters, cli.sweep.warmup), (7, 2));
        assert!(Cli::try_parse_from(["bench", "-f", "1"]).is_err());
        assert!(Cli::try_parse_from(["bench", "-n", "0"]).is_err());
        let defaults = Cli::try_parse_from(["bench"]).unwrap().sweep;
        assert_eq!((defaults.min_bytes, defaults.max_bytes), (8, 512 << 20));
        assert!(!defaults.slowest);
    }

    #[test]
    fn sweeps_multiply_by_the_factor_and_round_to_whole_elements() {
        assert_eq!(
            sweep_sizes(8, 64, 2, 4),
            vec![8, 16, 32, 64],
            "both ends included"
        );
        assert_eq!(
            sweep_sizes(1, 16, 2, 4),
            vec![4, 8, 16],
            "1 and 2 B hold no float"
        );
        assert_eq!(sweep_sizes(10, 100, 3, 4), vec![8, 28, 88]);
        assert_eq!(sweep_sizes(8, 8, 2, 8), vec![8]);
        assert_eq!(sweep_sizes(8, 512 << 20, 2, 4).len(), 27);
        assert_eq!(sweep_sizes(usize::MAX / 2, usize::MAX, 4, 1).len(), 1);
    }

    #[test]
    fn a_size_beyond_any_gpu_cannot_run() {
        let cli = Cli::try_parse_from(["bench", "-e", "2048G"]).unwrap();
        let err = cli.sweep.sizes(4).unwrap_err();
        assert!(err
            .reason
            .contains("--max-bytes 2199023255552 is larger than any GPU's memory"));
        let cli = Cli::try_parse_from(["bench", "-e", "1024G"]).unwrap();
        assert_eq!(cli.sweep.sizes(4).unwrap().last(), Some(&MAX_SIZE));
    }

    #[test]
    fn min_above_max_cannot_run() {
        let mut cli = Cli::try_parse_from(["bench", "-b", "1M", "-e", "1K"]).unwrap();
        let err = cli.sweep.sizes(4).unwrap_err();
        assert!(err
            .reason
            .contains("--min-bytes 1048576 is larger than --max-bytes 1024"));
        cli.sweep.max_bytes = 1 << 20;
        assert_eq!(cli.sweep.sizes(4).unwrap(), vec![1 << 20]);
    }

    #[test]
    fn output_paths_are_checked_before_the_sweep() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("no-such-dir/x.json");
        let cli = Cli::try_parse_from(["bench", "--json", missing.to_str().unwrap()]).unwrap();
        let err = cli.sweep.check(4).unwrap_err();
        assert!(err.reason.starts_with("--json "), "{}", err.reason);
        assert!(
            err.reason.contains(missing.to_str().unwrap()),
            "{}",
            err.reason
        );

        let svg_dir = dir.path().to_str().unwrap();
        let cli = Cli::try_parse_from(["bench", "--svg", svg_dir]).unwrap();
        let err = cli.sweep.check(4).unwrap_err();
        assert!(err.reason.contains("is a directory"), "{}", err.reason);

        // A writable path passes and is left as it was: absent stays absent,
        // an existing file keeps its contents.
        let fresh = dir.path().join("fresh.json");
        let old = dir.path().join("old.svg");
        std::fs::write(&old, "kept").unwrap();
        let cli = Cli::try_parse_from([
            "bench",
            "--json",
            fresh.to_str().unwrap(),
            "--svg",
            old.to_str().unwrap(),
        ])
        .unwrap();
        cli.sweep.check(4).unwrap();
        assert!(!fresh.exists());
        assert_eq!(std::fs::read_to_string(&old).unwrap(), "kept");
    }

    /// A path under a file, and one in a directory that cannot be written:
    /// each refused with the option, the path and why, before any sweep.
    #[test]
    fn output_paths_that_cannot_be_created_are_refused_with_the_reason() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("a-file");
        std::fs::write(&file, "").unwrap();
        let under_a_file = file.join("x.svg");
        let err = check_writable("--svg", &under_a_file).unwrap_err();
        assert!(
            err.reason.starts_with(&format!(
                "--svg {}: cannot be written (",
                under_a_file.display()
            )),
            "{}",
            err.reason
        );
        assert!(err.fix.contains("directory that exists"), "{}", err.fix);

        // Permissions do not stop root; a read-only directory does stop others.
        let locked = dir.path().join("locked");
        std::fs::create_dir(&locked).unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o555)).unwrap();
        let inside = locked.join("x.json");
        let writable_anyway = std::fs::write(locked.join("probe"), "").is_ok();
        let result = check_writable("--json", &inside);
        if writable_anyway {
            std::fs::remove_file(locked.join("probe")).unwrap();
            assert!(result.is_ok());
            assert!(!inside.exists(), "the check leaves nothing behind");
        } else {
            let err = result.unwrap_err();
            assert!(err.reason.contains("cannot be written"), "{}", err.reason);
        }
        std::fs::set_permissions(&locked, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[test]
    fn size_labels() {
        assert_eq!(size_label(1024), "1K");
        assert_eq!(size_label(256 << 20), "256M");
        assert_eq!(size_label(3 << 30), "3G");
        assert_eq!(size_label(1000), "1000");
        assert_eq!(size_label(1536), "1536");
    }

    #[test]
    fn median_ignores_one_outlier() {
        assert_eq!(median(&mut [10.0, 400.0, 11.0, 9.0, 10.5]), 10.5);
        assert_eq!(median(&mut [3.0]), 3.0);
        assert_eq!(median(&mut [4.0, 1.0]), 1.0);
    }
}
