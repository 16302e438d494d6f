//! `05_allreduce_bench`'s own choice of the two-shot grid, beyond lesson
//! 05b's: `--twoshot-blocks N`, and one cap for several kernels that share
//! a device communicator (the two-shot of both builds and NCCL's
//! primitives).

use common::CannotRun;
use lsa_fast::fast::{self, Residency};
use lsa_fast::THREADS;

/// The tighter of two kernels' residencies (the same grid cap serves both).
pub fn tighter(a: Residency, b: Residency) -> Residency {
    Residency {
        per_multiprocessor: a.per_multiprocessor.min(b.per_multiprocessor),
        multiprocessors: a.multiprocessors.min(b.multiprocessors),
    }
}

/// The most blocks the two-shot kernel may run: `requested`
/// (`--twoshot-blocks`) or, by default, lesson 05b's
/// ([`fast::twoshot_cap`]: one block per multiprocessor), and never more
/// than this rank's share of [`Residency::blocks`] when `ranks_per_gpu`
/// ranks share the GPU. A request above the share is refused (exit code 2):
/// the two-shot's blocks wait for each other at LSA barriers, so every
/// block must be resident.
pub fn twoshot_cap(
    requested: Option<u32>,
    residency: Residency,
    ranks_per_gpu: usize,
) -> Result<u32, CannotRun> {
    let default = fast::twoshot_cap(residency, ranks_per_gpu)?;
    let resident = residency.blocks();
    let sharing = ranks_per_gpu.max(1) as u32;
    let share = resident / sharing;
    let Residency {
        per_multiprocessor,
        multiprocessors,
    } = residency;
    let whose = if sharing > 1 {
        format!(
            "this rank's share of what this GPU holds at once ({sharing} ranks share it): {share} of {resident}"
        )
    } else {
        format!("this GPU holds at once: {resident}")
    };
    match requested {
        None => Ok(default),
        Some(blocks) if blocks <= share => Ok(blocks.max(1)),
        Some(blocks) => Err(CannotRun::new(
            format!(
                "--twoshot-blocks {blocks} asks for more blocks than {whose} \
                 ({per_multiprocessor} blocks of {THREADS} threads of the two-shot kernel per multiprocessor, \
                 from cuOccupancyMaxActiveBlocksPerMultiprocessor, x {multiprocessors} multiprocessors); \
                 its blocks wait for each other at LSA barriers, so a block that is not resident would \
                 leave progress to the order in which the GPU dispatches blocks"
            ),
            format!(
                "pass --twoshot-blocks {share} or fewer, or leave it out (default: one block per multiprocessor{}, {default})",
                if sharing > 1 { " and rank" } else { "" },
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An H200: 132 multiprocessors, 2 two-shot blocks of 512 threads each.
    const H200: Residency = Residency {
        per_multiprocessor: 2,
        multiprocessors: 132,
    };

    #[test]
    fn the_twoshot_grid_is_capped_at_what_can_be_resident() {
        assert_eq!(twoshot_cap(None, H200, 1), Ok(132));
        assert_eq!(twoshot_cap(Some(264), H200, 1), Ok(264));
        assert_eq!(twoshot_cap(Some(16), H200, 1), Ok(16));
        let one = Residency {
            per_multiprocessor: 1,
            multiprocessors: 80,
        };
        assert_eq!(twoshot_cap(None, one, 1), Ok(80));
        assert_eq!(
            tighter(one, H200),
            Residency {
                per_multiprocessor: 1,
                multiprocessors: 80
            }
        );
    }

    #[test]
    fn more_blocks_than_can_be_resident_are_refused_with_the_fix() {
        let err = twoshot_cap(Some(1024), H200, 1).unwrap_err();
        assert!(
            err.reason.starts_with(
                "--twoshot-blocks 1024 asks for more blocks than this GPU holds at once: 264 (2 blocks of 512 threads"
            ),
            "{}",
            err.reason
        );
        assert!(
            err.reason.contains("x 132 multiprocessors"),
            "{}",
            err.reason
        );
        assert!(err.reason.contains("LSA barriers"), "{}", err.reason);
        assert_eq!(
            err.fix,
            "pass --twoshot-blocks 264 or fewer, or leave it out (default: one block per multiprocessor, 132)"
        );
        let none = Residency {
            per_multiprocessor: 0,
            multiprocessors: 132,
        };
        assert!(twoshot_cap(None, none, 1).is_err());
    }

    #[test]
    fn ranks_that_share_a_gpu_each_take_their_share() {
        assert_eq!(twoshot_cap(None, H200, 2), Ok(66));
        assert_eq!(twoshot_cap(Some(132), H200, 2), Ok(132));
        assert_eq!(twoshot_cap(None, H200, 8), Ok(16));
        let err = twoshot_cap(Some(133), H200, 2).unwrap_err();
        assert!(
            err.reason.starts_with(
                "--twoshot-blocks 133 asks for more blocks than this rank's share of what this GPU holds at once (2 ranks share it): 132 of 264"
            ),
            "{}",
            err.reason
        );
        assert_eq!(
            err.fix,
            "pass --twoshot-blocks 132 or fewer, or leave it out (default: one block per multiprocessor and rank, 66)"
        );
        let err = twoshot_cap(None, H200, 300).unwrap_err();
        assert!(
            err.reason.contains("fewer than one per rank"),
            "{}",
            err.reason
        );
    }
}
