//! The fast AllReduce (`kernels/allreduce_lsa_fast.cu`): which of its two
//! kernels runs, with how many blocks, and what the device communicator must
//! hold for them.
//!
//! * **One-shot over LL** below [`FastOptions::oneshot_max_bytes`]: no
//!   barrier; each rank pushes its input into every peer's LL staging
//!   buffer and sums what arrives. Its cost is latency, and it moves n-1
//!   copies of the buffer (doubled by the LL flags) out of every rank, so it
//!   only pays for small buffers.
//! * **Two-shot** above it: reduce-scatter by loads and all-gather by
//!   stores, 16-byte vectors, as many blocks as the GPU has multiprocessors,
//!   each rank moving the least an AllReduce can: 2(n-1)/n of the buffer.
//!
//! The choice is made on the host from the size alone, identically on every
//! rank, as both kernels require.

use anyhow::{bail, ensure, Result};
use common::{CannotRun, RankContext};
use cudarc::driver::{sys as cu_sys, CudaStream};

use device_build::shim::{DevComm, LlStaging};

use crate::launch::{blocks_per_multiprocessor, launch_allreduce, AllReduceArgs};
use crate::{LL_UNITS_PER_BLOCK, THREADS};
use device_build::Module;

/// The most LSA ranks the fast kernels' unrolled loops cover (`MAX_LSA_RANKS`
/// in the source).
pub const MAX_LSA_RANKS: usize = 8;
/// 16-byte vectors per peer a two-shot thread has in flight (`UNROLL`).
pub const UNROLL: usize = 4;
/// The most blocks the one-shot kernel runs; its staging buffer has room
/// for this many blocks of [`LL_UNITS_PER_BLOCK`] units.
pub const LL_BLOCKS: u32 = 64;
/// The largest buffer the one-shot kernel can carry: 8 bytes per unit.
pub const ONESHOT_CAPACITY: usize = LL_BLOCKS as usize * LL_UNITS_PER_BLOCK as usize * 8;

/// What the host decides for the fast kernels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FastOptions {
    /// Buffers up to this many bytes take the one-shot kernel.
    pub oneshot_max_bytes: usize,
    /// The most blocks the two-shot kernel runs (and LSA barriers to create).
    pub twoshot_max_blocks: u32,
}

impl FastOptions {
    /// The defaults on `ranks` ranks: one-shot up to
    /// [`default_oneshot_max`]`(ranks)`, two-shot on at most
    /// `twoshot_max_blocks` blocks (from [`twoshot_cap`]: one per
    /// multiprocessor, never more than can be resident).
    pub fn new(ranks: usize, twoshot_max_blocks: u32) -> Self {
        Self {
            oneshot_max_bytes: default_oneshot_max(ranks),
            twoshot_max_blocks: twoshot_max_blocks.max(1),
        }
    }

    /// Two-shot at every size: the jit route, which has no one-shot kernel.
    pub fn two_shot_only(twoshot_max_blocks: u32) -> Self {
        Self {
            oneshot_max_bytes: 0,
            twoshot_max_blocks: twoshot_max_blocks.max(1),
        }
    }

    /// These options with the one-shot kernel kept within `blocks`, this
    /// rank's share of the one-shot blocks the GPU holds at once
    /// (`RankContext::share_of_gpu`). One-shot blocks wait for the LL data
    /// of the same-numbered block of every peer, so, like the two-shot's,
    /// every rank's must be resident together. A buffer of up to `blocks` x
    /// [`THREADS`] units (8 bytes each) takes at most `blocks` blocks
    /// ([`oneshot_blocks`]); larger ones go two-shot. With a GPU to itself
    /// the share covers [`LL_BLOCKS`] and nothing changes.
    pub fn fit_oneshot(self, blocks: u32) -> Self {
        Self {
            oneshot_max_bytes: self.oneshot_max_bytes.min(oneshot_max_within(blocks)),
            ..self
        }
    }
}

/// The largest buffer whose one-shot grid ([`oneshot_blocks`]) takes at most
/// `blocks` blocks: [`ONESHOT_CAPACITY`] from [`LL_BLOCKS`] blocks on, else
/// `blocks` x [`THREADS`] units of 8 bytes.
pub fn oneshot_max_within(blocks: u32) -> usize {
    if blocks >= LL_BLOCKS {
        ONESHOT_CAPACITY
    } else {
        blocks as usize * THREADS as usize * 8
    }
}

/// Where one-shot stops paying at 2 ranks, measured with
/// `05_allreduce_bench` on 2 × H200 (see the README's "Making it fast"): at
/// 512 KiB one-shot took 8.0-8.3 µs against two-shot's 8.4-8.5, at 1 MiB
/// 11.5-11.8 against 10.0.
pub const ONESHOT_MAX_AT_2_RANKS: usize = 512 << 10;

/// The one-shot/two-shot crossover on `ranks` ranks. Measured at 2 ranks
/// ([`ONESHOT_MAX_AT_2_RANKS`]); for more ranks a **prediction, not yet
/// measured** (PERF_NOTES.md, "Crossover per rank count").
///
/// Each rank's one-shot sends its whole buffer to every peer, doubled by the
/// LL flags: 2(n-1)·S bytes; the two-shot sends 2(n-1)/n·S. With t = fixed
/// cost + bytes / link bandwidth for both, the crossover is where the
/// two-shot's extra fixed cost (one more barrier round and the load round
/// trip) pays for the one-shot's extra bytes, 2(n-1)²/n·S:
/// S*(n) = S*(2) · n / (2(n-1)²). That gives 116 KiB at 4 ranks and 44 KiB
/// at 8; the two-shot's barrier rounds cost more with more peers, which
/// moves the crossover up, so each value is rounded up to a power of two:
/// 512 KiB at 2 ranks, 256 KiB at 3, 128 KiB at 4 and 5, 64 KiB from 6 to 8.
pub fn default_oneshot_max(ranks: usize) -> usize {
    if ranks <= 2 {
        return ONESHOT_MAX_AT_2_RANKS;
    }
    let n = ranks as u128;
    let model = ONESHOT_MAX_AT_2_RANKS as u128 * n / (2 * (n - 1) * (n - 1));
    (model.max(1) as usize).next_power_of_two()
}

/// What the occupancy API says about a kernel on this GPU: how many of its
/// blocks of [`THREADS`] threads fit on one multiprocessor at once
/// (`cuOccupancyMaxActiveBlocksPerMultiprocessor`, for the loaded kernel:
/// its registers and shared memory), and how many multiprocessors there are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Residency {
    pub per_multiprocessor: u32,
    pub multiprocessors: u32,
}

impl Residency {
    /// Blocks that can be resident at once on the whole GPU.
    pub fn blocks(&self) -> u32 {
        self.per_multiprocessor.saturating_mul(self.multiprocessors)
    }
}

/// The most blocks the two-shot kernel runs: one per multiprocessor, and
/// never more than this rank's share of [`Residency::blocks`] when
/// `ranks_per_gpu` ranks share the GPU (`RankContext::ranks_per_gpu`).
///
/// Every block of the two-shot waits at an LSA barrier for the
/// same-numbered block of every peer. A block that is not resident cannot
/// arrive until a resident one has left, so past the resident count the
/// kernel's progress would rest on the order in which the GPU dispatches
/// blocks, on every rank at once. Ranks that share a GPU are resident
/// together, so each takes 1/`ranks_per_gpu` of it; none at all is refused
/// (exit code 2). (`05_allreduce_bench --twoshot-blocks` asks for another
/// count within the same share.)
pub fn twoshot_cap(residency: Residency, ranks_per_gpu: usize) -> Result<u32, CannotRun> {
    let resident = residency.blocks();
    let sharing = ranks_per_gpu.max(1) as u32;
    let share = resident / sharing;
    if resident == 0 {
        return Err(CannotRun::new(
            format!(
                "cuOccupancyMaxActiveBlocksPerMultiprocessor says no block of {THREADS} threads of the two-shot kernel fits on a multiprocessor of this GPU"
            ),
            "run on a GPU with more registers per multiprocessor (Volta or newer), or run NVIDIA's kernel: 05_device_lsa",
        ));
    }
    if share == 0 {
        return Err(CannotRun::new(
            format!(
                "{sharing} ranks share this GPU, which holds only {resident} blocks of the two-shot kernel at once: \
                 fewer than one per rank, and every rank's blocks must be resident together"
            ),
            format!("run at most {resident} ranks per GPU, or run NVIDIA's kernel: 05_device_lsa"),
        ));
    }
    Ok((residency.multiprocessors / sharing).max(1).min(share))
}

/// One launch of the fast AllReduce: which kernel, and its grid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Path {
    OneShot { blocks: u32 },
    TwoShot { blocks: u32 },
}

/// Blocks for the one-shot kernel over `count` floats: one per `THREADS`
/// units, at most [`LL_BLOCKS`], and enough that no block carries more than
/// its staging buffer holds. Every block gets at least one unit.
pub fn oneshot_blocks(count: usize) -> u32 {
    let units = count.div_ceil(2).max(1);
    let wanted = units.div_ceil(THREADS as usize);
    let needed = units.div_ceil(LL_UNITS_PER_BLOCK as usize);
    wanted.max(needed).min(LL_BLOCKS as usize).min(units) as u32
}

/// Blocks for the two-shot kernel over `count` floats on `ranks` ranks: a
/// thread per 16-byte vector of a rank's share, at most `max_blocks` (the
/// kernel's threads then loop, `UNROLL` vectors a grid apart per step).
pub fn twoshot_blocks(count: usize, ranks: usize, max_blocks: u32) -> u32 {
    let vectors_per_rank = (count / 4).div_ceil(ranks.max(1));
    let wanted = vectors_per_rank.div_ceil(THREADS as usize).max(1);
    wanted.min(max_blocks.max(1) as usize) as u32
}

/// The path for `count` floats: one-shot when small enough, else two-shot.
pub fn choose(count: usize, ranks: usize, options: &FastOptions) -> Path {
    let bytes = count * 4;
    if options.oneshot_max_bytes > 0 && bytes <= options.oneshot_max_bytes.min(ONESHOT_CAPACITY) {
        Path::OneShot {
            blocks: oneshot_blocks(count),
        }
    } else {
        Path::TwoShot {
            blocks: twoshot_blocks(count, ranks, options.twoshot_max_blocks),
        }
    }
}

/// What the device communicator needs for the fast kernels: one LSA barrier
/// per two-shot block (and at least `at_least`, for other kernels sharing
/// it), and the one-shot kernel's LL staging buffer.
pub fn requirements(options: &FastOptions, ranks: usize, at_least: u32) -> (u32, LlStaging) {
    (
        options.twoshot_max_blocks.max(at_least),
        LlStaging {
            blocks: LL_BLOCKS,
            slots: ranks as u32 * LL_UNITS_PER_BLOCK,
        },
    )
}

/// Whether the fast kernels can run on `ranks` LSA ranks.
pub fn check_ranks(ranks: usize) -> Result<(), CannotRun> {
    if ranks <= MAX_LSA_RANKS {
        return Ok(());
    }
    Err(CannotRun::new(
        format!(
            "the fast kernels cover LSA teams of up to {MAX_LSA_RANKS} ranks; this one has {ranks}"
        ),
        "run NVIDIA's kernel (05_device_lsa), or raise MAX_LSA_RANKS in kernels/allreduce_lsa_fast.cu and fast.rs",
    ))
}

/// What every rank must launch alike, compared across ranks before the
/// first launch ([`check_same_plan`]). Both kernels assume that every rank
/// launches the same grid for the same operation: a block talks only to the
/// same-numbered block of every peer (LSA barrier b, LL staging block b). The
/// grid follows from the options and the element count alone ([`choose`]),
/// so equal options and equal counts on every rank mean equal grids.
/// (Differing options come from GPUs of different models, whose
/// multiprocessor counts differ, or from different command lines under
/// mpirun.)
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct GridPlan {
    pub oneshot_max_bytes: u64,
    pub twoshot_max_blocks: u64,
    /// A digest (FNV-1a) of the element counts to be launched, in order.
    pub counts: u64,
}

impl GridPlan {
    pub fn new(options: &FastOptions, counts: impl IntoIterator<Item = usize>) -> Self {
        let mut digest: u64 = 0xcbf2_9ce4_8422_2325;
        for count in counts {
            for byte in (count as u64).to_le_bytes() {
                digest = (digest ^ u64::from(byte)).wrapping_mul(0x100_0000_01b3);
            }
        }
        Self {
            oneshot_max_bytes: options.oneshot_max_bytes as u64,
            twoshot_max_blocks: u64::from(options.twoshot_max_blocks),
            counts: digest,
        }
    }

    fn to_bytes(self) -> Vec<u8> {
        [self.oneshot_max_bytes, self.twoshot_max_blocks, self.counts]
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect()
    }

    fn from_bytes(bytes: &[u8]) -> Option<Self> {
        let word = |i: usize| -> Option<u64> {
            Some(u64::from_le_bytes(
                bytes.get(8 * i..8 * i + 8)?.try_into().ok()?,
            ))
        };
        Some(Self {
            oneshot_max_bytes: word(0)?,
            twoshot_max_blocks: word(1)?,
            counts: word(2)?,
        })
    }
}

/// Rank 0's verdict on every rank's [`GridPlan`], in rank order: the first
/// rank whose plan differs from rank 0's, and how.
pub fn compare_plans(plans: &[GridPlan]) -> Result<(), CannotRun> {
    let Some(first) = plans.first() else {
        return Ok(());
    };
    for (rank, plan) in plans.iter().enumerate().skip(1) {
        if plan == first {
            continue;
        }
        let what = if plan.counts != first.counts {
            "different element counts".to_string()
        } else {
            format!(
                "one-shot up to {} bytes and two-shot on up to {} blocks, where rank 0 has {} bytes and {} blocks",
                plan.oneshot_max_bytes,
                plan.twoshot_max_blocks,
                first.oneshot_max_bytes,
                first.twoshot_max_blocks
            )
        };
        return Err(CannotRun::new(
            format!(
                "rank {rank} would launch the fast kernels with other grids than rank 0 ({what}); \
                 a block waits for the same-numbered block of every peer, so differing grids would hang or mix operations"
            ),
            "run every rank on the same GPU model, with the same options (--twoshot-blocks and --oneshot-max fix the grids)",
        ));
    }
    Ok(())
}

/// Collective: every rank's [`GridPlan`] gathered to rank 0 and compared
/// ([`compare_plans`]); every rank fails (exit 2) if any differs. Call it
/// before the first launch.
pub fn check_same_plan(ctx: &RankContext, plan: GridPlan) -> Result<()> {
    let verdict = match ctx.gather(plan.to_bytes())? {
        Some(all) => {
            let plans: Option<Vec<GridPlan>> =
                all.iter().map(|b| GridPlan::from_bytes(b)).collect();
            match plans {
                Some(plans) => compare_plans(&plans).map_err(Into::into),
                None => Err(anyhow::anyhow!("a rank sent a grid plan of the wrong size")),
            }
        }
        None => Ok(()),
    };
    ctx.all_ok(verdict)
}

/// The conditions of `path` over `count` floats that the host can check
/// against the device communicator it launches on (`lsa_barriers` LSA
/// barriers, LL staging `ll`): a two-shot block per LSA barrier at most; a
/// one-shot grid within the staging buffer, every block with at least one
/// unit and at most a block's share of it. A failure is this program's bug.
pub fn check_grid(
    path: Path,
    count: usize,
    lsa_barriers: u32,
    ll: Option<LlStaging>,
) -> Result<()> {
    match path {
        Path::TwoShot { blocks } => ensure!(
            (1..=lsa_barriers).contains(&blocks),
            "two-shot on {blocks} blocks, but the device communicator has {lsa_barriers} LSA barriers (block b syncs on barrier b)"
        ),
        Path::OneShot { blocks } => {
            let Some(ll) = ll else {
                bail!("the device communicator has no LL staging buffer")
            };
            let units = count.div_ceil(2).max(1);
            ensure!(
                blocks >= 1 && blocks as usize <= units,
                "one-shot on {blocks} blocks for {units} units: a block without work would not send or receive this epoch"
            );
            ensure!(
                blocks <= ll.blocks,
                "one-shot on {blocks} blocks, but the staging buffer has {} blocks",
                ll.blocks
            );
            ensure!(
                units.div_ceil(blocks as usize) <= LL_UNITS_PER_BLOCK as usize,
                "one-shot: {units} units on {blocks} blocks is more than {LL_UNITS_PER_BLOCK} a block"
            );
        }
    }
    Ok(())
}

/// The fast kernels, loaded. The jit route's module has no one-shot kernel
/// (NCCL 2.32.3's wrapper has no LL API): there every size takes two-shot.
pub struct FastKernels {
    pub oneshot: Option<cu_sys::CUfunction>,
    pub twoshot: cu_sys::CUfunction,
}

impl FastKernels {
    /// The fast kernels of `module`; `with_oneshot`: whether it has the
    /// one-shot kernel (the nvcc route's does).
    pub fn load(module: &Module, with_oneshot: bool) -> Result<Self> {
        Ok(Self {
            oneshot: if with_oneshot {
                Some(module.function("allreduce_oneshot_ll")?)
            } else {
                None
            },
            twoshot: module.function("allreduce_twoshot")?,
        })
    }

    /// What the occupancy API says about the loaded two-shot kernel on this
    /// GPU, of `multiprocessors` multiprocessors (see [`twoshot_cap`]).
    pub fn twoshot_residency(&self, multiprocessors: u32) -> Result<Residency> {
        // SAFETY: `twoshot` came from Module::function, and the caller keeps
        // its module loaded while it holds these kernels.
        let per_multiprocessor = unsafe { blocks_per_multiprocessor(self.twoshot, THREADS)? };
        Ok(Residency {
            per_multiprocessor,
            multiprocessors,
        })
    }

    /// This rank's share of the one-shot blocks the GPU (of
    /// `multiprocessors` multiprocessors) holds at once, from the occupancy
    /// API and `RankContext::share_of_gpu`: the bound of
    /// [`FastOptions::fit_oneshot`]. [`LL_BLOCKS`] on the jit route, which has
    /// no one-shot kernel (fitting to it changes nothing).
    pub fn oneshot_share(&self, ctx: &RankContext, multiprocessors: u32) -> Result<u32> {
        let Some(oneshot) = self.oneshot else {
            return Ok(LL_BLOCKS);
        };
        // SAFETY: as in twoshot_residency.
        let per_multiprocessor = unsafe { blocks_per_multiprocessor(oneshot, THREADS)? };
        let residency = Residency {
            per_multiprocessor,
            multiprocessors,
        };
        Ok(ctx.share_of_gpu(residency.blocks()))
    }

    /// The default options for these kernels on `ctx`'s ranks, two-shot on
    /// at most `twoshot_max_blocks` blocks ([`twoshot_cap`]): one-shot up to
    /// [`default_oneshot_max`] within this rank's share of the GPU
    /// ([`oneshot_share`](Self::oneshot_share)), or two-shot at every size
    /// on the jit route.
    pub fn options(
        &self,
        ctx: &RankContext,
        twoshot_max_blocks: u32,
        multiprocessors: u32,
    ) -> Result<FastOptions> {
        Ok(match self.oneshot {
            Some(_) => FastOptions::new(ctx.size(), twoshot_max_blocks)
                .fit_oneshot(self.oneshot_share(ctx, multiprocessors)?),
            None => FastOptions::two_shot_only(twoshot_max_blocks),
        })
    }

    /// Enqueues `path` on `stream`. The device communicator must have been
    /// created with [`requirements`] for these options; it is only read
    /// (its bytes go into the kernel's parameters).
    pub fn launch(
        &self,
        path: Path,
        stream: &CudaStream,
        args: AllReduceArgs,
        dev_comm: &DevComm,
    ) -> Result<()> {
        check_grid(
            path,
            args.count,
            dev_comm.lsa_barriers(),
            dev_comm.ll_staging(),
        )?;
        let comm_arg = dev_comm.kernel_arg();
        match path {
            Path::OneShot { blocks } => {
                let oneshot = self.oneshot.ok_or_else(|| {
                    anyhow::anyhow!("this build has no one-shot kernel (the jit route)")
                })?;
                let handle = dev_comm.ll_handle_arg().ok_or_else(|| {
                    anyhow::anyhow!("the device communicator has no LL staging buffer")
                })?;
                ensure!(
                    args.count * 4 <= ONESHOT_CAPACITY,
                    "one-shot carries at most {ONESHOT_CAPACITY} bytes"
                );
                // SAFETY: allreduce_oneshot_ll takes the six common
                // arguments and an ncclLLA2AHandle by value.
                unsafe {
                    launch_allreduce(
                        oneshot,
                        blocks,
                        THREADS,
                        stream,
                        args,
                        comm_arg,
                        Some(handle),
                    )
                }
            }
            Path::TwoShot { blocks } => {
                // SAFETY: allreduce_twoshot takes the six common arguments.
                unsafe {
                    launch_allreduce(self.twoshot, blocks, THREADS, stream, args, comm_arg, None)
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_oneshot_block_has_work_and_fits_its_staging_buffer() {
        let capacity_floats = ONESHOT_CAPACITY / 4;
        for count in (1..3000).chain([
            4096,
            8191,
            65_536,
            250_003,
            capacity_floats - 1,
            capacity_floats,
        ]) {
            let units = count.div_ceil(2);
            let blocks = oneshot_blocks(count) as usize;
            assert!(
                blocks >= 1 && blocks <= LL_BLOCKS as usize,
                "{count}: {blocks}"
            );
            // The kernel gives block b units [units*b/B, units*(b+1)/B).
            for b in 0..blocks {
                let (lo, hi) = (units * b / blocks, units * (b + 1) / blocks);
                assert!(hi > lo, "{count} floats: block {b} of {blocks} is empty");
                assert!(
                    hi - lo <= LL_UNITS_PER_BLOCK as usize,
                    "{count}: block {b} carries {}",
                    hi - lo
                );
            }
        }
        assert_eq!(oneshot_blocks(1), 1);
        assert_eq!(oneshot_blocks(2048), 2);
    }

    #[test]
    fn twoshot_grids_grow_with_the_size_up_to_the_cap() {
        assert_eq!(twoshot_blocks(1, 2, 132), 1);
        assert_eq!(twoshot_blocks(2 * 4 * 512, 2, 132), 1);
        assert_eq!(twoshot_blocks(2 * 4 * 512 + 8, 2, 132), 2);
        assert_eq!(twoshot_blocks(512 << 10, 2, 132), 128, "2 MiB: 128 blocks");
        assert_eq!(twoshot_blocks(128 << 20, 2, 132), 132);
        assert_eq!(twoshot_blocks(128 << 20, 4, 16), 16);
    }

    #[test]
    fn small_buffers_take_the_oneshot_and_large_ones_the_twoshot() {
        let options = FastOptions::new(2, 132);
        assert!(matches!(
            choose(2, 2, &options),
            Path::OneShot { blocks: 1 }
        ));
        assert!(matches!(
            choose(ONESHOT_MAX_AT_2_RANKS / 4, 2, &options),
            Path::OneShot { .. }
        ));
        assert!(matches!(
            choose(ONESHOT_MAX_AT_2_RANKS / 4 + 1, 2, &options),
            Path::TwoShot { .. }
        ));
        assert_eq!(
            choose(128 << 20, 4, &options),
            Path::TwoShot { blocks: 132 }
        );
        // Never past the staging buffer, whatever the option says.
        let greedy = FastOptions {
            oneshot_max_bytes: usize::MAX,
            ..options
        };
        assert!(matches!(
            choose(ONESHOT_CAPACITY / 4 + 1, 2, &greedy),
            Path::TwoShot { .. }
        ));
    }

    #[test]
    fn the_device_communicator_gets_a_barrier_per_block_and_a_staging_buffer() {
        let options = FastOptions::new(4, 132);
        let (barriers, ll) = requirements(&options, 4, 16);
        assert_eq!(barriers, 132);
        assert_eq!(
            ll,
            LlStaging {
                blocks: LL_BLOCKS,
                slots: 4 * LL_UNITS_PER_BLOCK
            }
        );
        assert_eq!(
            requirements(
                &FastOptions {
                    twoshot_max_blocks: 8,
                    ..options
                },
                2,
                16
            )
            .0,
            16
        );
    }

    #[test]
    fn the_crossover_falls_with_the_rank_count() {
        let kib = |n: usize| default_oneshot_max(n) >> 10;
        assert_eq!(
            (1..=8).map(kib).collect::<Vec<_>>(),
            [512, 512, 256, 128, 128, 64, 64, 64]
        );
        // Never above what the staging buffer carries.
        assert!((1..=MAX_LSA_RANKS).all(|n| default_oneshot_max(n) <= ONESHOT_CAPACITY));
        // At 4 ranks 200 KiB is two-shot (it would be one-shot at 2 ranks).
        let count = (200 << 10) / 4;
        assert!(matches!(
            choose(count, 4, &FastOptions::new(4, 132)),
            Path::TwoShot { .. }
        ));
        assert!(matches!(
            choose(count, 2, &FastOptions::new(2, 132)),
            Path::OneShot { .. }
        ));
    }

    /// An H200: 132 multiprocessors, 2 blocks of 512 threads each (57
    /// registers a thread).
    const H200: Residency = Residency {
        per_multiprocessor: 2,
        multiprocessors: 132,
    };

    #[test]
    fn the_twoshot_grid_is_capped_at_what_can_be_resident() {
        assert_eq!(H200.blocks(), 264);
        assert_eq!(twoshot_cap(H200, 1), Ok(132));
        // A kernel that fits once per multiprocessor on a small GPU: the
        // default (one per multiprocessor) is what fits.
        let one = Residency {
            per_multiprocessor: 1,
            multiprocessors: 80,
        };
        assert_eq!(twoshot_cap(one, 1), Ok(80));
    }

    #[test]
    fn a_gpu_that_holds_no_block_is_refused() {
        let none = Residency {
            per_multiprocessor: 0,
            multiprocessors: 132,
        };
        assert!(twoshot_cap(none, 1).is_err());
    }

    #[test]
    fn ranks_that_share_a_gpu_each_take_their_share() {
        // 2 ranks on one H200: 132 of its 264 resident blocks each, and by
        // default 66, one per multiprocessor between them.
        assert_eq!(twoshot_cap(H200, 2), Ok(66));
        assert_eq!(twoshot_cap(H200, 8), Ok(16));
        // More ranks than resident blocks: refused, not a grid of 0.
        let err = twoshot_cap(H200, 300).unwrap_err();
        assert!(
            err.reason.contains("fewer than one per rank"),
            "{}",
            err.reason
        );
    }

    #[test]
    fn the_oneshot_grid_stays_within_a_shared_gpus_share() {
        let options = FastOptions::new(8, 16);
        assert_eq!(oneshot_max_within(LL_BLOCKS), ONESHOT_CAPACITY);
        assert_eq!(
            oneshot_blocks(oneshot_max_within(LL_BLOCKS - 1) / 4),
            LL_BLOCKS - 1
        );
        assert_eq!(options.fit_oneshot(LL_BLOCKS), options);
        assert_eq!(options.fit_oneshot(1000), options);
        let fitted = options.fit_oneshot(8);
        assert_eq!(fitted.oneshot_max_bytes, 8 * 512 * 8);
        for count in [1, 1000, fitted.oneshot_max_bytes / 4] {
            match choose(count, 8, &fitted) {
                Path::OneShot { blocks } => assert!(blocks <= 8, "{count}: {blocks}"),
                Path::TwoShot { .. } => panic!("{count} floats fit one-shot"),
            }
        }
        assert!(matches!(
            choose(fitted.oneshot_max_bytes / 4 + 1, 8, &fitted),
            Path::TwoShot { .. }
        ));
        assert_eq!(options.fit_oneshot(0).oneshot_max_bytes, 0);
    }

    #[test]
    fn ranks_that_would_launch_other_grids_are_named() {
        let options = FastOptions::new(2, 132);
        let plan = GridPlan::new(&options, [1 << 20]);
        assert_eq!(GridPlan::from_bytes(&plan.to_bytes()), Some(plan));
        assert_eq!(GridPlan::from_bytes(&[0; 23]), None);
        assert!(compare_plans(&[plan, plan, plan]).is_ok());
        assert!(compare_plans(&[]).is_ok());
        // Rank 2 on a GPU with 114 multiprocessors.
        let other = GridPlan::new(&FastOptions::new(2, 114), [1 << 20]);
        let err = compare_plans(&[plan, plan, other]).unwrap_err();
        assert_eq!(
            err.reason,
            "rank 2 would launch the fast kernels with other grids than rank 0 (one-shot up to 524288 bytes and \
             two-shot on up to 114 blocks, where rank 0 has 524288 bytes and 132 blocks); a block waits for the \
             same-numbered block of every peer, so differing grids would hang or mix operations"
        );
        assert!(err.fix.contains("same GPU model"), "{}", err.fix);
        let counts = GridPlan::new(&options, [1 << 20, 2 << 20]);
        let err = compare_plans(&[plan, counts]).unwrap_err();
        assert!(err.reason.contains("rank 1") && err.reason.contains("different element counts"));
    }

    #[test]
    fn grids_are_checked_against_the_device_communicator() {
        let ll = Some(LlStaging {
            blocks: LL_BLOCKS,
            slots: 2 * LL_UNITS_PER_BLOCK,
        });
        assert!(check_grid(Path::TwoShot { blocks: 132 }, 1 << 20, 132, None).is_ok());
        let err = check_grid(Path::TwoShot { blocks: 133 }, 1 << 20, 132, None).unwrap_err();
        assert!(err.to_string().contains("132 LSA barriers"), "{err}");
        assert!(check_grid(Path::TwoShot { blocks: 0 }, 1, 16, None).is_err());
        // What oneshot_blocks chooses always passes.
        for count in [1, 2, 3, 1000, 4096, 250_003, ONESHOT_CAPACITY / 4] {
            let path = Path::OneShot {
                blocks: oneshot_blocks(count),
            };
            check_grid(path, count, 16, ll).unwrap();
        }
        // A block without work, too many blocks, no staging buffer.
        assert!(check_grid(Path::OneShot { blocks: 2 }, 2, 16, ll).is_err());
        assert!(check_grid(Path::OneShot { blocks: 65 }, 1 << 20, 16, ll).is_err());
        assert!(check_grid(Path::OneShot { blocks: 1 }, 8192, 16, ll).is_err());
        assert!(check_grid(Path::OneShot { blocks: 1 }, 2, 16, None).is_err());
    }

    #[test]
    fn more_than_eight_lsa_ranks_cannot_run() {
        assert!(check_ranks(8).is_ok());
        let err = check_ranks(9).unwrap_err();
        assert!(err.reason.contains("up to 8 ranks"), "{}", err.reason);
    }
}
