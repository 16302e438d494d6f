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

use std::ffi::c_void;

use anyhow::{ensure, Result};
use common::CannotRun;
use cudarc::driver::{sys as cu_sys, CudaStream};

use device_build::shim::{DevComm, LlStaging};

use crate::launch::{launch_allreduce, AllReduceArgs, Module};
use crate::{LL_UNITS_PER_BLOCK, THREADS};

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
    /// The measured default: one-shot up to `DEFAULT_ONESHOT_MAX` and
    /// two-shot on one block per multiprocessor.
    pub fn for_gpu(multiprocessors: u32) -> Self {
        Self {
            oneshot_max_bytes: DEFAULT_ONESHOT_MAX,
            twoshot_max_blocks: multiprocessors.max(1),
        }
    }

    /// Two-shot at every size: the jit route, which has no one-shot kernel.
    pub fn two_shot_only(multiprocessors: u32) -> Self {
        Self {
            oneshot_max_bytes: 0,
            ..Self::for_gpu(multiprocessors)
        }
    }
}

/// Where one-shot stops paying, measured with `05_allreduce_bench` on
/// 2 × H200 (see the README's "Making it fast"): at 512 KiB one-shot took
/// 8.0-8.3 µs against two-shot's 8.4-8.5, at 1 MiB 11.5-11.8 against 10.0.
pub const DEFAULT_ONESHOT_MAX: usize = 512 << 10;

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
        "use --kernel simple, or raise MAX_LSA_RANKS in kernels/allreduce_lsa_fast.cu and fast.rs",
    ))
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

    /// Enqueues `path` on `stream`. The device communicator must have been
    /// created with [`requirements`] for these options.
    pub fn launch(
        &self,
        path: Path,
        stream: &CudaStream,
        args: AllReduceArgs,
        dev_comm: &mut DevComm,
    ) -> Result<()> {
        let comm_arg = dev_comm.as_kernel_arg();
        match path {
            Path::OneShot { blocks } => {
                let oneshot = self.oneshot.ok_or_else(|| {
                    anyhow::anyhow!("this build has no one-shot kernel (the jit route)")
                })?;
                let handle: *mut c_void = dev_comm.ll_handle_arg().ok_or_else(|| {
                    anyhow::anyhow!("the device communicator has no LL staging buffer")
                })?;
                ensure!(
                    args.count * 4 <= ONESHOT_CAPACITY,
                    "one-shot carries at most {ONESHOT_CAPACITY} bytes"
                );
                // SAFETY: allreduce_oneshot_ll takes the six common
                // arguments and an ncclLLA2AHandle by value.
                unsafe {
                    launch_allreduce(oneshot, blocks, THREADS, stream, args, comm_arg, &[handle])
                }
            }
            Path::TwoShot { blocks } => {
                // SAFETY: allreduce_twoshot takes the six common arguments.
                unsafe {
                    launch_allreduce(self.twoshot, blocks, THREADS, stream, args, comm_arg, &[])
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
        let options = FastOptions::for_gpu(132);
        assert!(matches!(
            choose(2, 2, &options),
            Path::OneShot { blocks: 1 }
        ));
        assert!(matches!(
            choose(DEFAULT_ONESHOT_MAX / 4, 2, &options),
            Path::OneShot { .. }
        ));
        assert!(matches!(
            choose(DEFAULT_ONESHOT_MAX / 4 + 1, 2, &options),
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
        let options = FastOptions::for_gpu(132);
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
    fn more_than_eight_lsa_ranks_cannot_run() {
        assert!(check_ranks(8).is_ok());
        let err = check_ranks(9).unwrap_err();
        assert!(err.reason.contains("up to 8 ranks"), "{}", err.reason);
    }
}
