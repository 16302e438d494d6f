//! Measurement with nccl-tests' definitions, so numbers can be compared with
//! `all_reduce_perf` and friends.
//!
//! * time: host wall clock over `iters` back-to-back launches plus one stream
//!   synchronisation, divided by `iters`, after `warmup` untimed launches; the
//!   slowest rank's time is the operation's time;
//! * algbw = bytes / time, in GB/s (1 GB = 1e9 B);
//! * busbw = algbw × a per-collective factor that makes the number comparable to
//!   the hardware's link bandwidth.

use std::time::Instant;

use anyhow::Result;

use crate::RankContext;

/// The collectives nccl-tests measures, for their bus-bandwidth factor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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

/// Bytes per second in GB/s (1e9).
pub fn gb_per_s(bytes: usize, seconds: f64) -> f64 {
    bytes as f64 / seconds / 1e9
}

/// Seconds per operation: `warmup` untimed launches, then `iters` timed
/// launches and one `sync`, divided by `iters`.
pub fn time_per_op(
    warmup: usize,
    iters: usize,
    mut launch: impl FnMut() -> Result<()>,
    sync: impl Fn() -> Result<()>,
) -> Result<f64> {
    assert!(iters > 0, "time_per_op needs at least one timed iteration");
    for _ in 0..warmup {
        launch()?;
    }
    sync()?;
    let start = Instant::now();
    for _ in 0..iters {
        launch()?;
    }
    sync()?;
    Ok(start.elapsed().as_secs_f64() / iters as f64)
}

/// Collective: the largest of every rank's `seconds`, on every rank.
pub fn slowest_rank(ctx: &RankContext, seconds: f64) -> Result<f64> {
    let slowest = ctx.gather(seconds.to_le_bytes().to_vec())?.map(|all| {
        all.iter()
            .map(|bytes| f64::from_le_bytes(bytes.as_slice().try_into().unwrap_or([0; 8])))
            .fold(0.0, f64::max)
    });
    let bytes = ctx.broadcast_vec(slowest.unwrap_or(0.0).to_le_bytes().to_vec())?;
    Ok(f64::from_le_bytes(bytes.as_slice().try_into()?))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bus_factors_match_nccl_tests() {
        assert_eq!(Collective::AllReduce.bus_factor(4), 1.5);
        assert_eq!(Collective::AllReduce.bus_factor(2), 1.0);
        assert_eq!(Collective::AlltoAll.bus_factor(4), 0.75);
        assert_eq!(Collective::AllGather.bus_factor(8), 0.875);
        assert_eq!(Collective::SendRecv.bus_factor(8), 1.0);
    }

    #[test]
    fn bandwidth_is_in_decimal_gigabytes() {
        assert_eq!(gb_per_s(1_000_000_000, 0.5), 2.0);
    }

    #[test]
    fn time_per_op_counts_only_timed_iterations() {
        let mut launches = 0;
        let per_op = time_per_op(
            3,
            10,
            || {
                launches += 1;
                Ok(())
            },
            || Ok(()),
        )
        .unwrap();
        assert_eq!(launches, 13);
        assert!(per_op >= 0.0);
    }

    #[test]
    fn size_labels() {
        assert_eq!(size_label(1024), "1K");
        assert_eq!(size_label(256 << 20), "256M");
        assert_eq!(size_label(3 << 30), "3G");
        assert_eq!(size_label(1000), "1000");
        assert_eq!(size_label(1536), "1536");
    }
}
