//! The AllReduce made of NCCL's own device primitives
//! (`kernels/allreduce_nccl_prims.cu`, jit route only): which of its two
//! kernels runs, and with how many blocks.
//!
//! * **One-shot** (`ncclLsaReduceSum_F32` into the local output): every
//!   rank loads all of every peer's input; no second hop.
//! * **Two-shot** (`ncclLsaReduceSumCopy_F32` on this rank's share): loads
//!   the share from every peer, stores the sum into every peer's output.
//!
//! The grids follow the same rules as the hand-written fast kernel's (a block
//! of [`THREADS`] threads per 16-byte vector of work, at most one block per
//! multiprocessor), so the two are compared at equal footing; only the inner
//! loop is NCCL's.

use anyhow::Result;
use cudarc::driver::{sys as cu_sys, CudaStream};
use device_build::shim::DevComm;

use device_build::Module;
use lsa_fast::fast::{twoshot_blocks, Residency};
use lsa_fast::launch::{blocks_per_multiprocessor, launch_allreduce, AllReduceArgs};
use lsa_fast::THREADS;

/// Which primitives kernel runs, and its grid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PrimsPath {
    OneShot { blocks: u32 },
    TwoShot { blocks: u32 },
}

/// Blocks for the one-shot kernel over `count` floats: a thread per 16-byte
/// vector, at most `max_blocks`.
pub fn oneshot_blocks(count: usize, max_blocks: u32) -> u32 {
    let vectors = count.div_ceil(4).max(1);
    vectors
        .div_ceil(THREADS as usize)
        .min(max_blocks.max(1) as usize) as u32
}

/// One-shot up to `oneshot_max_bytes`, two-shot above, and two-shot at
/// every size `in_place`.
///
/// In place the one-shot cannot be right: each rank stores its sums into
/// its own output, which is its input, while its peers may still be
/// loading that input for their own sums, and they would add a sum where
/// they expect one rank's value. (`ncclLsaReduceSum_F32` loads and stores
/// as it goes, so no barrier can sit between the two.) The two-shot is safe
/// in place: the element a block stores into every peer is one that only
/// this block loads, and it has loaded it from every peer first.
pub fn choose(
    count: usize,
    ranks: usize,
    oneshot_max_bytes: usize,
    max_blocks: u32,
    in_place: bool,
) -> PrimsPath {
    if count * 4 <= oneshot_max_bytes && !in_place {
        PrimsPath::OneShot {
            blocks: oneshot_blocks(count, max_blocks),
        }
    } else {
        PrimsPath::TwoShot {
            blocks: twoshot_blocks(count, ranks, max_blocks),
        }
    }
}

/// The two primitives kernels, loaded.
pub struct PrimsKernels {
    oneshot: cu_sys::CUfunction,
    twoshot: cu_sys::CUfunction,
}

impl PrimsKernels {
    pub fn load(module: &Module) -> Result<Self> {
        Ok(Self {
            oneshot: module.function("allreduce_prims_oneshot")?,
            twoshot: module.function("allreduce_prims_twoshot")?,
        })
    }

    /// The tighter residency of the two kernels (they share the grid cap).
    pub fn residency(&self, multiprocessors: u32) -> Result<Residency> {
        // SAFETY: both came from Module::function, and the caller keeps their
        // module loaded while it holds these kernels.
        let per_multiprocessor = unsafe {
            blocks_per_multiprocessor(self.oneshot, THREADS)?
                .min(blocks_per_multiprocessor(self.twoshot, THREADS)?)
        };
        Ok(Residency {
            per_multiprocessor,
            multiprocessors,
        })
    }

    /// Enqueues `path` on `stream`. The device communicator needs one LSA
    /// barrier per block.
    pub fn launch(
        &self,
        path: PrimsPath,
        stream: &CudaStream,
        args: AllReduceArgs,
        dev_comm: &DevComm,
    ) -> Result<()> {
        let (kernel, blocks) = match path {
            PrimsPath::OneShot { blocks } => (self.oneshot, blocks),
            PrimsPath::TwoShot { blocks } => (self.twoshot, blocks),
        };
        // SAFETY: both kernels take the six common arguments.
        unsafe {
            launch_allreduce(
                kernel,
                blocks,
                THREADS,
                stream,
                args,
                dev_comm.kernel_arg(),
                None,
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grids_grow_with_the_size_up_to_one_block_per_multiprocessor() {
        assert_eq!(oneshot_blocks(1, 132), 1);
        assert_eq!(oneshot_blocks(4 * 512, 132), 1);
        assert_eq!(oneshot_blocks(4 * 512 + 1, 132), 2);
        assert_eq!(oneshot_blocks(128 << 20, 132), 132);
        assert_eq!(
            choose(1024, 2, 512 << 10, 132, false),
            PrimsPath::OneShot { blocks: 1 }
        );
        assert_eq!(
            choose(128 << 20, 2, 512 << 10, 132, false),
            PrimsPath::TwoShot { blocks: 132 }
        );
        // 0: two-shot at every size.
        assert!(matches!(
            choose(1, 2, 0, 132, false),
            PrimsPath::TwoShot { .. }
        ));
    }

    #[test]
    fn in_place_never_takes_the_oneshot() {
        for count in [1, 1024, 1 << 20] {
            assert!(matches!(
                choose(count, 2, usize::MAX, 132, true),
                PrimsPath::TwoShot { .. }
            ));
        }
    }
}
