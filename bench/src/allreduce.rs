//! AllReduce (float32, sum) measured the same way for every contender: the
//! `ncclAllReduce` modes of `02_allreduce_bench` and the kernels of
//! `05_allreduce_bench`.
//!
//! Data: rank `r`'s element `i` is a pseudo-random integer in [-1024, 1023]
//! drawn from a seed that rank 0 picks afresh for every size and series and
//! broadcasts. Integers that small add up exactly in float32 for any number
//! of ranks a node has, so the expected sum is exact and every rank computes
//! it on its own (in f64) from the seed, without seeing the others' data.
//! Never a constant: a kernel that reads the wrong peer, the wrong offset or
//! a stale buffer gets a different sum.
//!
//! Check: after the timed operations, the input is written again at the
//! start of the buffers, the output is poisoned with NaN (out of place), and
//! one more operation, launched straight after the timed ones, is checked
//! element by element.

use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;

use anyhow::{Context, Result};
use cudarc::driver::{result as cu, sys as cu_sys, CudaStream};
use rayon::prelude::*;

use super::report::{Row, Series};
use super::{across_ranks, sum_over_ranks, time_trials, Collective, Placement, Sample, SweepArgs};
use common::nccl::NcclBuffer;
use common::verify::check_all;
use common::RankContext;

/// A NaN, written over the output before it is computed: it equals nothing,
/// so an element the operation did not write cannot pass the check.
pub const POISON: u32 = 0x7fc0_0bad;

/// Element `index` of rank `rank`'s input for `seed`: an integer in [-1024, 1023].
pub fn value(seed: u64, rank: usize, index: usize) -> f32 {
    let mixed = splitmix64(seed ^ (rank as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ index as u64);
    (mixed % 2048) as f32 - 1024.0
}

/// SplitMix64's finalizer: a cheap, well-mixed hash of one word.
fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Rank `rank`'s input of `count` elements.
pub fn input(seed: u64, rank: usize, count: usize) -> Vec<f32> {
    (0..count)
        .into_par_iter()
        .map(|i| value(seed, rank, i))
        .collect()
}

/// The sum over `ranks` ranks of every element, added in f64 (exact here).
pub fn expected(seed: u64, ranks: usize, count: usize) -> Vec<f32> {
    (0..count)
        .into_par_iter()
        .map(|i| {
            (0..ranks)
                .map(|r| f64::from(value(seed, r, i)))
                .sum::<f64>() as f32
        })
        .collect()
}

/// A seed that rank 0 draws from the operating system's randomness (through
/// the standard library's hasher keys) and every rank receives.
pub fn fresh_seed(ctx: &RankContext) -> Result<u64> {
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos()),
    );
    let mut seed = hasher.finish().to_le_bytes();
    ctx.broadcast(&mut seed)?;
    Ok(u64::from_le_bytes(seed))
}

/// The buffers every contender runs on: the data starts `send_offset` and
/// `recv_offset` bytes into `send` and `recv`, which hold the largest size
/// of the sweep past those offsets. In place uses `recv` alone.
pub struct Buffers<'a> {
    pub send: &'a NcclBuffer,
    pub recv: &'a NcclBuffer,
    pub send_offset: usize,
    pub recv_offset: usize,
}

impl Buffers<'_> {
    /// Buffers used from their first byte.
    pub fn whole<'a>(send: &'a NcclBuffer, recv: &'a NcclBuffer) -> Buffers<'a> {
        Buffers {
            send,
            recv,
            send_offset: 0,
            recv_offset: 0,
        }
    }

    /// Bytes available past the offsets in both buffers.
    fn capacity(&self) -> usize {
        let send = self.send.bytes().saturating_sub(self.send_offset);
        let recv = self.recv.bytes().saturating_sub(self.recv_offset);
        send.min(recv) / 4 * 4
    }

    fn send_at(&self) -> u64 {
        self.send.as_ptr() as u64 + self.send_offset as u64
    }

    fn recv_at(&self) -> u64 {
        self.recv.as_ptr() as u64 + self.recv_offset as u64
    }
}

/// Times one contender over every size of `sizes` (bytes), out of place and
/// in place, and checks every element. `op(placement, count, shift)`
/// enqueues one AllReduce of `count` floats on `stream`, `shift` bytes past
/// the buffers' offsets: from `send` into `recv`, or in `recv` itself.
/// Collective: every rank calls it with the same arguments.
///
/// Timed operation `i` uses the region `i mod (capacity / size)` of the
/// buffers, as nccl-tests does: a size that fits in L2 many times over is
/// otherwise timed from the cache. Every region holds random data. The
/// check is one more operation at shift 0, on fresh data, into a poisoned
/// output.
#[allow(clippy::too_many_arguments)]
pub fn run_series(
    ctx: &RankContext,
    args: &SweepArgs,
    stream: &Arc<CudaStream>,
    buffers: &Buffers,
    sizes: &[usize],
    (name, about): (&str, &str),
    progress: &indicatif::ProgressBar,
    mut op: impl FnMut(Placement, usize, usize) -> Result<()>,
) -> Result<Series> {
    let factor = Collective::AllReduce.bus_factor(ctx.size());
    let capacity = buffers.capacity();
    // Random data in every region that the rotation reaches.
    let filler = input(fresh_seed(ctx)?, ctx.rank(), capacity / 4);
    upload(buffers.send_at(), &filler, stream)?;
    upload(buffers.recv_at(), &filler, stream)?;
    drop(filler);
    let mut rows = Vec::with_capacity(sizes.len());
    for &bytes in sizes {
        progress.set_message(format!("{name} {}", super::size_label(bytes)));
        let count = bytes / std::mem::size_of::<f32>();
        let regions = (capacity / bytes).max(1);
        let shift = |i: usize| bytes * (i % regions);
        let seed = fresh_seed(ctx)?;
        let data = input(seed, ctx.rank(), count);
        let sum = expected(seed, ctx.size(), count);
        let what = |placement: Placement| format!("{name}, {bytes} B, {placement:?}");

        let mut placements = [None, None];
        for (slot, placement) in [Placement::OutOfPlace, Placement::InPlace]
            .into_iter()
            .enumerate()
        {
            let seconds = time_trials(ctx, stream, args, |i| op(placement, count, shift(i)))
                .with_context(|| what(placement))?;
            // The check: fresh input at shift 0, poisoned output (in place,
            // the input is the output), one operation.
            let target = match placement {
                Placement::OutOfPlace => {
                    upload(buffers.send_at(), &data, stream)?;
                    poison(buffers.recv_at(), count, stream)?;
                    buffers.recv_at()
                }
                Placement::InPlace => {
                    upload(buffers.recv_at(), &data, stream)?;
                    buffers.recv_at()
                }
            };
            ctx.barrier()?;
            op(placement, count, 0).with_context(|| what(placement))?;
            let wrong = wrong_elements(ctx, target, &sum, stream, &what(placement))?;
            placements[slot] = Some(Sample::new(
                bytes,
                across_ranks(ctx, seconds, args.slowest)?,
                factor,
                sum_over_ranks(ctx, wrong)?,
            ));
        }
        let [Some(out_of_place), in_place] = placements else {
            unreachable!("both placements were timed")
        };
        rows.push(Row {
            bytes,
            count,
            out_of_place,
            in_place,
        });
        progress.inc(1);
    }
    Ok(Series {
        name: name.into(),
        about: about.into(),
        rows,
    })
}

/// `ncclAllReduce` of `count` floats (sum) from `input` to `output`, on
/// `stream`: what `02_allreduce_bench` times, and `05_allreduce_bench`'s
/// `nccl` contender.
///
/// # Safety
/// Both pointers must hold `count` floats of device memory that outlive the
/// stream's work.
pub unsafe fn nccl_allreduce(
    input: *const std::ffi::c_void,
    output: *mut std::ffi::c_void,
    count: usize,
    comm: &common::nccl::Communicator,
    stream: &CudaStream,
) -> Result<()> {
    use common::nccl::{nccl_stream, sys, NcclCheck};
    sys::ncclAllReduce(
        input,
        output,
        count,
        sys::ncclDataType_t::ncclFloat32,
        sys::ncclRedOp_t::ncclSum,
        comm.as_raw(),
        nccl_stream(stream),
    )
    .check("ncclAllReduce")?;
    Ok(())
}

/// The report of an AllReduce (float32, sum) benchmark on this machine.
pub fn report(
    ctx: &RankContext,
    gpu: &Arc<cudarc::driver::CudaContext>,
    benchmark: String,
    options: &SweepArgs,
    series: Vec<Series>,
) -> Result<super::report::Report> {
    Ok(super::report::Report {
        benchmark,
        collective: Collective::AllReduce,
        datatype: "float".into(),
        redop: "sum".into(),
        machine: super::report::Machine::describe(ctx, gpu)?,
        options: options.clone(),
        series,
    })
}

/// NaN over `count` floats at device address `at`, in stream order.
fn poison(at: u64, count: usize, stream: &Arc<CudaStream>) -> Result<()> {
    // cuMemsetD32 wants 4-byte alignment, which float data has.
    // SAFETY: `at` starts `count` floats inside a buffer (the sweep's largest size).
    unsafe { cu_sys::cuMemsetD32Async(at, POISON, count, stream.cu_stream()) }
        .result()
        .context("cuMemsetD32Async (poison)")
}

/// Copies `data` to device address `at`, in stream order.
fn upload(at: u64, data: &[f32], stream: &Arc<CudaStream>) -> Result<()> {
    // SAFETY: `at` has room for `data` (the sweep's largest size); the copy
    // reads `data` before returning (pageable host memory is staged).
    unsafe { cu::memcpy_htod_async(at, data, stream.cu_stream()) }.context("cuMemcpyHtoDAsync")
}

/// Waits for the stream, then counts the elements of `buffer` that differ
/// from `expected`; the first one is reported on stderr with the rank.
fn wrong_elements(
    ctx: &RankContext,
    at: u64,
    expected: &[f32],
    stream: &Arc<CudaStream>,
    what: &str,
) -> Result<u64> {
    let mut got = vec![0f32; expected.len()];
    // SAFETY: `at` holds `expected.len()` floats; we wait before reading `got`.
    unsafe { cu::memcpy_dtoh_async(&mut got, at, stream.cu_stream()) }
        .context("cuMemcpyDtoHAsync")?;
    stream
        .synchronize()
        .context("copy the result to the host")?;
    match check_all(what, &got, |i| expected[i]) {
        Ok(()) => Ok(0),
        Err(mismatch) => {
            eprintln!("{}wrong result: {mismatch}", ctx.prefix());
            Ok(mismatch.wrong as u64)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_small_integers_that_change_with_seed_rank_and_index() {
        let a = input(1, 0, 10_000);
        assert!(a
            .iter()
            .all(|v| v.fract() == 0.0 && (-1024.0..1024.0).contains(v)));
        assert_ne!(a, input(2, 0, 10_000), "a new seed gives new data");
        assert_ne!(a, input(1, 1, 10_000), "ranks hold different data");
        let distinct: std::collections::BTreeSet<i32> = a.iter().map(|&v| v as i32).collect();
        assert!(
            distinct.len() > 1500,
            "not a constant: {} values",
            distinct.len()
        );
    }

    #[test]
    fn the_expected_sum_is_exact_in_float32() {
        for ranks in [1, 2, 3, 4, 8] {
            let sum = expected(7, ranks, 5000);
            for (i, &s) in sum.iter().enumerate() {
                // The order a kernel adds in does not matter: every partial sum is exact.
                let forward = (0..ranks).fold(0f32, |acc, r| acc + value(7, r, i));
                let backward = (0..ranks).rev().fold(0f32, |acc, r| acc + value(7, r, i));
                assert_eq!((forward, backward), (s, s));
            }
        }
    }

    #[test]
    fn poison_is_a_nan_that_no_check_accepts() {
        let poison = f32::from_bits(POISON);
        assert!(poison.is_nan());
        assert!(check_all("x", &[poison], |_| 0.0).is_err());
    }
}
