//! AllReduce (float32, sum) measured the same way for every contender: the
//! `ncclAllReduce` modes of `02_allreduce_bench` and the kernels of
//! `05_allreduce_bench`.
//!
//! Data: rank `r`'s element `i` is a pseudo-random integer in [-1024, 1023]
//! drawn from a seed that rank 0 picks afresh for every trial and
//! broadcasts. Integers that small add up exactly in float32 for any number
//! of ranks a node has, so the expected sum is exact and every rank checks
//! it on its own from the seed, without seeing the others' data. Never a
//! constant: a kernel that reads the wrong peer, the wrong offset or a stale
//! buffer gets a different sum. The GPU draws and checks the data
//! ([`crate::data`]); [`value`] is the same function on the host.
//!
//! What is checked is what was timed. A trial is one untimed operation that
//! lines the ranks up, then `iters` timed ones; each has its own region of
//! the input, filled for that trial, and its own region of the output,
//! poisoned with NaN before the trial (in place, the input is the output).
//! After the trial every region is checked on every rank. A race between
//! back-to-back operations (launch k+1 writing a peer's buffer while the
//! peer still reads launch k) leaves a wrong element behind. Large sizes
//! have fewer regions than a trial has operations ([`regions`]: enough to
//! rotate past L2, within 4 times the largest size per buffer): their trial
//! runs in rounds of as many operations as there are regions, each round
//! filled, lined up, timed and checked before the next
//! ([`crate::time_rotating`]), so every timed operation is still checked.
//!
//! `--stress N` ([`StressArgs`]) looks for such races on purpose: N
//! back-to-back operations, each in its own region and checked, with the
//! ranks skewed by a spin kernel of random length before each launch.

use std::cell::Cell;
use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;

use anyhow::{ensure, Context, Result};
use common::nccl::NcclBuffer;
use common::RankContext;
use cudarc::driver::{result as cu, CudaStream};
use rayon::prelude::*;

use crate::data::DataKernels;
pub use crate::data::POISON;
use crate::report::{Row, Series};
use crate::{
    across_ranks, size_label, sum_over_ranks, time_rotating, Collective, Placement, Sample,
    SweepArgs,
};

/// Element `index` of rank `rank`'s input for `seed`: an integer in [-1024, 1023].
/// The same function as `value` in `kernels/data.cu`.
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

/// Element `index` of the sum over `ranks` ranks, added in f64 (exact here).
pub fn expected_at(seed: u64, ranks: usize, index: usize) -> f32 {
    (0..ranks)
        .map(|r| f64::from(value(seed, r, index)))
        .sum::<f64>() as f32
}

/// The sum over `ranks` ranks of every element.
pub fn expected(seed: u64, ranks: usize, count: usize) -> Vec<f32> {
    (0..count)
        .into_par_iter()
        .map(|i| expected_at(seed, ranks, i))
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

/// The options of the stress run, which replaces the timed sweep.
#[derive(clap::Args, Debug, Clone, PartialEq, Eq)]
pub struct StressArgs {
    /// Instead of timing: N back-to-back operations per size and placement,
    /// the ranks skewed on purpose, every operation checked.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub stress: Option<u32>,
    /// In the stress run, before each operation each rank spins on the GPU
    /// for a random 0 to US µs, half the time.
    #[arg(long, value_name = "US", default_value_t = 20)]
    pub max_skew_us: u32,
}

/// The most bytes a stress run's buffers hold beyond what the sweep needs:
/// a batch of back-to-back operations is as long as the buffers allow.
const STRESS_BUFFER_BYTES: usize = 1 << 30;

/// How many times over the regions a size rotates through must exceed the
/// GPU's L2 cache, so that no operation finds its data there.
pub const L2_PASSES: usize = 4;

/// Regions a size rotates through at least, where the memory bound allows:
/// each round of a trial is then 3 timed operations and 1 untimed one (see
/// [`crate::time_rotating`]), not 1 and 1.
pub const MIN_REGIONS: usize = 4;

/// The regions that operations of `bytes` bytes rotate through, in a sweep
/// whose largest size is `largest` on a GPU with `l2_bytes` of L2 cache:
/// enough to cover L2 [`L2_PASSES`] times, and [`MIN_REGIONS`] at least;
/// at most one per operation of a trial (`iters + 1`) and at most what
/// keeps a buffer within [`L2_PASSES`] times the larger of `largest` and
/// L2; never fewer than 2 (the untimed operation and a timed one).
///
/// On an H100 (50 MiB of L2) at the defaults: 21 regions up to 8 MiB, 13 at
/// 16 MiB, 7 at 32 MiB, 4 from 64 MiB: 2 GiB per buffer at 512 MiB instead
/// of 21 copies (10.5 GiB).
pub fn regions(bytes: usize, largest: usize, l2_bytes: usize, iters: u32) -> usize {
    let bytes = bytes.max(1);
    let cover = (L2_PASSES * l2_bytes).div_ceil(bytes).max(MIN_REGIONS);
    let within = L2_PASSES * largest.max(l2_bytes) / bytes;
    cover.min(within).clamp(2, (iters as usize + 1).max(2))
}

/// The bytes each of the send and receive buffers holds past their offsets
/// for a sweep of `sizes` on a GPU with `l2_bytes` of L2 cache: the largest
/// of `size × regions(size)` ([`regions`]), at most [`L2_PASSES`] times the
/// larger of the largest size and L2; and for a stress run, room for up to
/// its whole count of operations of the largest size, within 1 GiB.
pub fn rotation_bytes(
    args: &SweepArgs,
    stress: &StressArgs,
    sizes: &[usize],
    l2_bytes: usize,
) -> usize {
    let largest = sizes.iter().copied().max().unwrap_or(0);
    let sweep = sizes
        .iter()
        .map(|&bytes| bytes.saturating_mul(regions(bytes, largest, l2_bytes, args.iters)))
        .max()
        .unwrap_or(0);
    sweep.max(stress_bytes(stress, largest))
}

/// Collective: the L2 cache of the GPU `stream` runs on, in bytes, the
/// smallest over the ranks, so that every rank rotates through as many
/// regions (a rank with more would run other rounds, and its collectives
/// would meet none).
pub fn l2_bytes(ctx: &RankContext, stream: &CudaStream) -> Result<usize> {
    let bytes = stream
        .context()
        .attribute(cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)
        .context("cuDeviceGetAttribute(L2_CACHE_SIZE)")?;
    let bytes = u64::try_from(bytes).unwrap_or(0);
    Ok(crate::min_over_ranks(ctx, bytes)? as usize)
}

/// A stress run's room: up to its whole count of operations of `largest`
/// bytes, within 1 GiB (at least one region); none without `--stress`.
fn stress_bytes(stress: &StressArgs, largest: usize) -> usize {
    let ops = stress.stress.unwrap_or(0) as usize;
    let batch = ops.min((STRESS_BUFFER_BYTES / largest.max(1)).max(1));
    largest.saturating_mul(batch)
}

/// The buffers every contender runs on: the data starts `send_offset` and
/// `recv_offset` bytes into `send` and `recv`, which hold
/// [`rotation_bytes`] past those offsets. In place uses `recv` alone.
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

    /// Device addresses of the input and the output of `placement`.
    fn at(&self, placement: Placement) -> (u64, u64) {
        let recv = self.recv.as_ptr() as u64 + self.recv_offset as u64;
        match placement {
            Placement::OutOfPlace => (self.send.as_ptr() as u64 + self.send_offset as u64, recv),
            Placement::InPlace => (recv, recv),
        }
    }
}

/// One AllReduce benchmark on one rank: its buffers, its sizes and the data
/// kernels. Every method is collective: every rank calls it with the same
/// arguments.
pub struct Sweep<'a> {
    ctx: &'a RankContext<'a>,
    args: &'a SweepArgs,
    stream: &'a Arc<CudaStream>,
    buffers: Buffers<'a>,
    sizes: &'a [usize],
    data: DataKernels,
    /// The GPU's L2 cache, in bytes, for [`regions`].
    l2_bytes: usize,
}

impl<'a> Sweep<'a> {
    /// Loads the data kernels into the rank's GPU and checks that the check
    /// can fail (see [`DataKernels::load`]).
    pub fn new(
        ctx: &'a RankContext<'a>,
        args: &'a SweepArgs,
        stream: &'a Arc<CudaStream>,
        buffers: Buffers<'a>,
        sizes: &'a [usize],
    ) -> Result<Self> {
        let largest = sizes.iter().copied().max().unwrap_or(0);
        // Two regions of the largest size at least; more where they fit.
        let needed = largest.saturating_mul(2);
        ensure!(
            buffers.capacity() >= needed,
            "the buffers hold {} bytes past their offsets; the sweep needs {needed} at least (see rotation_bytes)",
            buffers.capacity(),
        );
        let sweep = Self {
            ctx,
            args,
            stream,
            buffers,
            sizes,
            data: DataKernels::load()?,
            l2_bytes: l2_bytes(ctx, stream)?,
        };
        sweep
            .self_test()
            .context("the benchmark's data kernels (data.ptx) fail their self-test")?;
        Ok(sweep)
    }

    /// Before anything is timed: the GPU draws the host's data, the check
    /// passes on correct data, and it fails, at the right element, on one
    /// poisoned element. A check that cannot fail would prove nothing.
    fn self_test(&self) -> Result<()> {
        let (_, at) = self.buffers.at(Placement::InPlace);
        let count = (self.buffers.capacity() / 4).min(1024);
        ensure!(count >= 2, "the buffers hold fewer than 2 floats");
        let seed = 0x5eed;
        self.data.fill(at, count, seed, 0, self.stream)?;
        let mut drawn = vec![0f32; count];
        // SAFETY: `at` holds `count` floats; the copy is synchronous.
        unsafe { cu::memcpy_dtoh_async(&mut drawn[..], at, self.stream.cu_stream()) }
            .context("cuMemcpyDtoHAsync")?;
        self.stream.synchronize().context("wait for the copy")?;
        ensure!(
            drawn == input(seed, 0, count),
            "the GPU's data differ from the host's value()"
        );
        let clean = self.data.check(at, count, seed, 1, self.stream)?;
        ensure!(
            clean.wrong == 0,
            "the check finds {} wrong elements in correct data",
            clean.wrong
        );
        self.data
            .poison(at + 4 * (count as u64 - 1), 1, self.stream)?;
        let poisoned = self.data.check(at, count, seed, 1, self.stream)?;
        ensure!(
            poisoned.wrong == 1 && poisoned.first == Some(count as u64 - 1),
            "the check misses a poisoned element: {poisoned:?}"
        );
        Ok(())
    }

    /// Times one contender over every size, out of place and in place, and
    /// checks every operation it timed. `op(placement, count, shift)`
    /// enqueues one AllReduce of `count` floats on the stream, `shift` bytes
    /// past the buffers' offsets: from `send` into `recv`, or in `recv`.
    pub fn series(
        &self,
        (name, about): (&str, &str),
        progress: &indicatif::ProgressBar,
        mut op: impl FnMut(Placement, usize, usize) -> Result<()>,
    ) -> Result<Series> {
        let (ctx, stream) = (self.ctx, self.stream);
        let factor = Collective::AllReduce.bus_factor(ctx.size());
        let largest = self.sizes.iter().copied().max().unwrap_or(0);
        let mut rows = Vec::with_capacity(self.sizes.len());
        for &bytes in self.sizes {
            progress.set_message(format!("{name} {}", size_label(bytes)));
            let count = bytes / std::mem::size_of::<f32>();
            // As many regions as cover L2 several times over (see `regions`),
            // within the buffers (which hold two of the largest size at least).
            let slots = regions(bytes, largest, self.l2_bytes, self.args.iters)
                .min(self.buffers.capacity() / bytes.max(1));
            let what = |placement: Placement| format!("{name}, {bytes} B, {placement:?}");
            let mut placements = [None, None];
            for (slot, placement) in [Placement::OutOfPlace, Placement::InPlace]
                .into_iter()
                .enumerate()
            {
                let seed = Cell::new(0);
                let (seconds, wrong) = time_rotating(
                    ctx,
                    stream,
                    self.args,
                    slots,
                    |written| {
                        seed.set(fresh_seed(ctx)?);
                        self.prepare(placement, written * count, seed.get())
                    },
                    |i| op(placement, count, bytes * (i % slots)),
                    |written| self.check(placement, count, written, seed.get(), &what(placement)),
                )
                .with_context(|| what(placement))?;
                placements[slot] = Some(Sample::new(
                    bytes,
                    across_ranks(ctx, seconds, self.args.slowest)?,
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
            datatype: None,
            rows,
        })
    }

    /// The stress run of one contender: `stress.stress` operations per size
    /// and placement, back to back in batches of as many as the buffers
    /// hold, each in its own region; before each launch, each rank spins on
    /// the GPU for a random time half the time. Every operation is checked.
    pub fn stress(
        &self,
        stress: &StressArgs,
        name: &str,
        mut op: impl FnMut(Placement, usize, usize) -> Result<()>,
    ) -> Result<StressSeries> {
        let (ctx, stream) = (self.ctx, self.stream);
        let ops = stress.stress.unwrap_or(0) as usize;
        let max_skew_ns = u64::from(stress.max_skew_us) * 1000;
        let mut rows = Vec::with_capacity(self.sizes.len());
        for &bytes in self.sizes {
            let count = bytes / std::mem::size_of::<f32>();
            let regions = (self.buffers.capacity() / bytes).max(1);
            let mut wrong = [0u64; 2];
            for (slot, placement) in [Placement::OutOfPlace, Placement::InPlace]
                .into_iter()
                .enumerate()
            {
                let what = format!("stress, {name}, {bytes} B, {placement:?}");
                let mut done = 0;
                while done < ops {
                    let batch = regions.min(ops - done);
                    let seed = fresh_seed(ctx)?;
                    self.prepare(placement, batch * count, seed)?;
                    ctx.barrier()?;
                    for k in 0..batch {
                        let skew = skew_ns(seed, ctx.rank(), k, max_skew_ns);
                        if skew > 0 {
                            self.data.spin(skew, stream)?;
                        }
                        op(placement, count, bytes * k).with_context(|| what.clone())?;
                    }
                    wrong[slot] += self.check(placement, count, batch, seed, &what)?;
                    done += batch;
                }
                wrong[slot] = sum_over_ranks(ctx, wrong[slot])?;
            }
            rows.push(StressRow {
                bytes,
                ops,
                out_of_place_wrong: wrong[0],
                in_place_wrong: wrong[1],
            });
        }
        Ok(StressSeries {
            name: name.into(),
            rows,
        })
    }

    /// Fresh input over `count` floats of the placement's input, and (out of
    /// place) NaN over as many of its output.
    fn prepare(&self, placement: Placement, count: usize, seed: u64) -> Result<()> {
        let (input, output) = self.buffers.at(placement);
        self.data
            .fill(input, count, seed, self.ctx.rank(), self.stream)?;
        if placement == Placement::OutOfPlace {
            self.data.poison(output, count, self.stream)?;
        }
        Ok(())
    }

    /// Checks the outputs of `operations` operations of `count` floats each,
    /// laid one after the other; the first wrong element is reported on
    /// stderr with the rank, the operation and the element.
    fn check(
        &self,
        placement: Placement,
        count: usize,
        operations: usize,
        seed: u64,
        what: &str,
    ) -> Result<u64> {
        let (_, output) = self.buffers.at(placement);
        let ranks = self.ctx.size();
        let checked = self
            .data
            .check(output, operations * count, seed, ranks, self.stream)?;
        if let Some(first) = checked.first {
            let mut got = [0f32];
            // On the rank's stream, after the check, like every other copy
            // here: ordered by the stream rather than by the legacy default
            // stream a plain cuMemcpyDtoH runs on (which does not wait for
            // cudarc's non-blocking streams).
            // SAFETY: `first` is inside the region just checked; we wait for
            // the stream before reading `got`.
            unsafe {
                cu::memcpy_dtoh_async(&mut got[..], output + first * 4, self.stream.cu_stream())
            }
            .context("cuMemcpyDtoHAsync (the first wrong element)")?;
            self.stream
                .synchronize()
                .context("wait for the first wrong element")?;
            let index = first as usize;
            eprintln!(
                "{}wrong result: {what}: operation {} of {operations}, element {} of {count}: expected {}, got {} ({} of {} elements wrong)",
                self.ctx.prefix(),
                index / count.max(1),
                index % count.max(1),
                expected_at(seed, ranks, index),
                got[0],
                checked.wrong,
                operations * count,
            );
        }
        Ok(checked.wrong)
    }
}

/// How long rank `rank` spins before operation `k` of a stress batch: zero
/// half the time, else up to `max_ns`, from the batch's seed.
pub fn skew_ns(seed: u64, rank: usize, k: usize, max_ns: u64) -> u64 {
    let h = splitmix64(seed ^ (rank as u64).wrapping_mul(0xd1b5_4a32_d192_ed03) ^ (k as u64) << 20);
    if max_ns == 0 || h & 1 == 0 {
        0
    } else {
        (h >> 1) % (max_ns + 1)
    }
}

/// One size of a stress run: wrong elements summed over ranks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StressRow {
    pub bytes: usize,
    pub ops: usize,
    pub out_of_place_wrong: u64,
    pub in_place_wrong: u64,
}

/// A stress run of one contender.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StressSeries {
    pub name: String,
    pub rows: Vec<StressRow>,
}

/// The stress run's table, and its verdict: collective; every rank fails
/// (exit 1) if any operation left a wrong element.
pub fn publish_stress(
    ctx: &RankContext,
    stress: &StressArgs,
    series: &[StressSeries],
) -> Result<()> {
    publish_stress_where(ctx, stress, series, EACH_IN_ITS_OWN_REGION)
}

/// Where a stress run's operations were, as its table's header says it.
pub const EACH_IN_ITS_OWN_REGION: &str = "each in its own region";

/// [`publish_stress`] for operations placed as `placement` says (the
/// header's words, such as [`EACH_IN_ITS_OWN_REGION`]).
pub fn publish_stress_where(
    ctx: &RankContext,
    stress: &StressArgs,
    series: &[StressSeries],
    placement: &str,
) -> Result<()> {
    let wrong = stress_wrong(series);
    if ctx.is_root() {
        print!(
            "{}",
            stress_table(ctx.size(), ctx.ranks_per_gpu(), stress, series, placement)
        );
    }
    let wrong = if ctx.is_root() { wrong } else { 0 };
    ctx.all_ok(if wrong > 0 {
        Err(anyhow::anyhow!(
            "the stress run found {wrong} wrong elements"
        ))
    } else {
        Ok(())
    })
}

/// The table [`publish_stress`] prints.
pub fn stress_table(
    ranks: usize,
    ranks_per_gpu: usize,
    stress: &StressArgs,
    series: &[StressSeries],
    placement: &str,
) -> String {
    let mut table = format!(
        "# stress: {} back-to-back operations per size and placement on {ranks} rank{}{}, {placement} and checked;\n\
         # before each, every rank spins on the GPU for 0-{} us at random, half the time\n\
         #\n#   series         size      ops   out-of-place #wrong   in-place #wrong\n",
        stress.stress.unwrap_or(0),
        common::plural(ranks),
        if ranks_per_gpu > 1 {
            format!(" (up to {ranks_per_gpu} on one GPU)")
        } else {
            String::new()
        },
        stress.max_skew_us,
    );
    for s in series {
        for row in &s.rows {
            table += &format!(
                "{:>10} {:>12} {:>8} {:>22} {:>17}\n",
                s.name, row.bytes, row.ops, row.out_of_place_wrong, row.in_place_wrong
            );
        }
    }
    let wrong = stress_wrong(series);
    table += &format!("# wrong elements in all: {wrong}\n");
    table
}

/// Wrong elements in every row of every series, both placements.
fn stress_wrong(series: &[StressSeries]) -> u64 {
    series
        .iter()
        .flat_map(|s| &s.rows)
        .map(|r| r.out_of_place_wrong + r.in_place_wrong)
        .sum()
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
) -> Result<crate::report::Report> {
    Ok(crate::report::Report {
        benchmark,
        collective: Collective::AllReduce,
        datatype: "float".into(),
        redop: "sum".into(),
        machine: crate::report::Machine::describe(ctx, gpu)?,
        options: options.clone(),
        series,
    })
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
        assert!(common::verify::check_all("x", &[poison], |_| 0.0).is_err());
    }

    #[test]
    fn regions_cover_l2_four_times_within_four_times_the_largest_size() {
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            sweep: SweepArgs,
        }
        let parse = |line: &[&str]| {
            <Cli as clap::Parser>::try_parse_from(
                std::iter::once("bench").chain(line.iter().copied()),
            )
            .unwrap()
            .sweep
        };
        let h100_l2 = 50 << 20;
        let largest = 512 << 20;
        // Small sizes: one region per operation of a trial, as before.
        assert_eq!(regions(8, largest, h100_l2, 20), 21);
        assert_eq!(regions(8 << 20, largest, h100_l2, 20), 21);
        // Then as many as cover L2 four times (200 MiB).
        assert_eq!(regions(16 << 20, largest, h100_l2, 20), 13);
        assert_eq!(regions(32 << 20, largest, h100_l2, 20), 7);
        assert_eq!(regions(64 << 20, largest, h100_l2, 20), 4);
        // Four at least, where four times the largest size allows.
        assert_eq!(regions(128 << 20, largest, h100_l2, 20), 4);
        assert_eq!(regions(largest, largest, h100_l2, 20), 4);
        assert_eq!(regions(8, 8, h100_l2, 1), 2, "-n 1: two regions");
        assert_eq!(regions(8, 8, h100_l2, 2), 3, "-n 2: three regions");
        // An L2 larger than the sweep: four times L2 still.
        assert_eq!(regions(1 << 30, 1 << 30, 2 << 30, 20), 8);
        assert_eq!(regions(3 << 30, 3 << 30, 1, 20), 4);
        let timing = StressArgs {
            stress: None,
            max_skew_us: 20,
        };
        // Defaults on an H100: 2 GiB per buffer, not 21 × 512 MiB.
        let defaults = parse(&[]);
        let sizes = defaults.sizes(4).unwrap();
        assert_eq!(
            rotation_bytes(&defaults, &timing, &sizes, h100_l2),
            4 * largest
        );
        // Every sweep, every L2: within 4 × max(largest, L2) per buffer.
        for l2 in [6 << 20, 40 << 20, 50 << 20, 60 << 20, 96 << 20, 126 << 20] {
            for (min, max) in [
                (8, 512 << 20),
                (1 << 10, 1 << 20),
                (1 << 20, 48 << 20),
                (3, 100 << 20),
            ] {
                for iters in [1, 5, 20, 100] {
                    let args = SweepArgs {
                        min_bytes: min,
                        max_bytes: max,
                        iters,
                        ..parse(&[])
                    };
                    let sizes = args.sizes(4).unwrap();
                    let largest = *sizes.last().unwrap();
                    let bytes = rotation_bytes(&args, &timing, &sizes, l2);
                    assert!(
                        bytes <= 4 * largest.max(l2),
                        "{l2} {min}..{max} -n {iters}: {bytes}"
                    );
                    for &size in &sizes {
                        let n = regions(size, largest, l2, iters);
                        assert!(n >= 2 && n <= iters as usize + 1);
                        assert!(size * n <= bytes, "the buffers hold every size's regions");
                        // Four times L2, unless a cap holds it back: the
                        // trial's operations, the minimum of 2, or the
                        // memory bound.
                        let capped =
                            n == iters as usize + 1 || n == 2 || n == 4 * largest.max(l2) / size;
                        assert!(
                            size * n >= 4 * l2 || capped,
                            "{l2} {size} -n {iters}: {n} regions"
                        );
                    }
                }
            }
        }
        // A stress run keeps its batches within 1 GiB, as before.
        let stress = StressArgs {
            stress: Some(2000),
            ..timing
        };
        assert_eq!(
            rotation_bytes(&defaults, &stress, &[8, 4 << 20], h100_l2),
            256 * (4 << 20),
            "batches of 256 regions of 4 MiB, within 1 GiB"
        );
        assert_eq!(
            rotation_bytes(&defaults, &stress, &[8], h100_l2),
            16_000,
            "2000 regions of 8 B"
        );
    }

    #[test]
    fn a_trial_runs_in_rounds_of_at_most_regions_minus_one() {
        let all = |iters, regions| crate::rounds(iters, regions).collect::<Vec<_>>();
        assert_eq!(
            all(20, 21),
            vec![20],
            "one round when every operation has a region"
        );
        assert_eq!(all(20, 2), vec![1; 20]);
        assert_eq!(all(20, 7), vec![6, 6, 6, 2]);
        assert_eq!(all(20, 4), vec![3, 3, 3, 3, 3, 3, 2]);
        assert_eq!(all(1, 13), vec![1]);
        for iters in 1..50 {
            for regions in 2..30 {
                let rounds = all(iters, regions);
                assert_eq!(rounds.iter().sum::<usize>(), iters);
                assert!(rounds.iter().all(|&r| r >= 1 && r < regions));
            }
        }
    }

    #[test]
    fn skews_are_random_bounded_and_zero_half_the_time() {
        let max = 20_000;
        let skews: Vec<u64> = (0..10_000).map(|k| skew_ns(42, 1, k, max)).collect();
        assert!(skews.iter().all(|&s| s <= max));
        let idle = skews.iter().filter(|&&s| s == 0).count();
        assert!(
            (4_000..6_000).contains(&idle),
            "{idle} of 10000 without a spin"
        );
        let distinct: std::collections::BTreeSet<u64> = skews.iter().copied().collect();
        assert!(distinct.len() > 1000, "random lengths: {}", distinct.len());
        assert_ne!(
            (0..100).map(|k| skew_ns(42, 0, k, max)).collect::<Vec<_>>(),
            (0..100).map(|k| skew_ns(42, 1, k, max)).collect::<Vec<_>>(),
            "ranks are skewed differently"
        );
        assert_eq!(
            skew_ns(42, 1, 3, 0),
            0,
            "--max-skew-us 0 turns the skew off"
        );
    }

    #[test]
    fn the_stress_table_counts_every_wrong_element() {
        let stress = StressArgs {
            stress: Some(2000),
            max_skew_us: 20,
        };
        let series = [StressSeries {
            name: "fast".into(),
            rows: vec![
                StressRow {
                    bytes: 8,
                    ops: 2000,
                    out_of_place_wrong: 0,
                    in_place_wrong: 0,
                },
                StressRow {
                    bytes: 1 << 20,
                    ops: 2000,
                    out_of_place_wrong: 3,
                    in_place_wrong: 4,
                },
            ],
        }];
        let table = stress_table(2, 1, &stress, &series, EACH_IN_ITS_OWN_REGION);
        assert!(table.starts_with(
            "# stress: 2000 back-to-back operations per size and placement on 2 ranks"
        ));
        assert!(table.ends_with("# wrong elements in all: 7\n"), "{table}");
    }
}
