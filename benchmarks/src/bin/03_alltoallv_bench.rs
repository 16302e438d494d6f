//! `03_alltoallv_bench`: what do registration and alignment do for lesson 03's alltoallv?
//!
//! Times the lesson's exchange (same count pattern, same `alltoallv`) over a
//! size sweep, on the same `ncclMemAlloc` buffers registered three ways, like
//! nccl-tests' `-R`:
//!
//! * `-R 0`: not registered;
//! * `-R 1`: registered with `ncclCommRegister` (lesson 01);
//! * `-R 2`: registered as symmetric windows (lessons 02 and 03).
//!
//! The counts are the lesson's, rounded so that every block starts on a
//! 16-byte boundary; `--unaligned` uses the unrounded pattern with an odd
//! base, so that blocks start on 8-byte boundaries, to show what that costs.
//!
//! Measurement follows the `bench` crate (nccl-tests' definitions): `size` is
//! the largest total any rank sends or receives, as nccl-tests' alltoallv
//! counts it; algbw = size / time; busbw = algbw × (n-1)/n. Every timed
//! exchange writes a receive region of its own, marked untouched before it
//! and checked element by element on the GPU after it (`#wrong`, summed
//! over ranks; `bench::data`'s sequence kernels); any wrong element makes
//! the run exit 1. The regions rotate as the AllReduce benchmarks' do
//! (`bench::allreduce::regions`: enough to cover L2 four times, within 4
//! times the largest receive size). An exchange has no in-place form:
//! those columns read N/A.
//!
//! The default sweep (8 B to 512 MiB) should take about 3 s at 2 ranks
//! on one H100, plus NCCL's start: the estimate is in the `bench` crate's
//! "How long a default sweep takes".
//!
//! ```text
//! NTHREADS=2 cargo run --release --bin 03_alltoallv_bench
//! mpirun -np 4 target/release/03_alltoallv_bench -b 1K -e 256M --json a2av.json --svg a2av.svg
//! NTHREADS=2 target/release/03_alltoallv_bench -b 64M -e 256M --unaligned
//! ```

use std::process::ExitCode;

use alltoallv_sm::{
    alltoallv, count_matrix, send_counts, unaligned_send_counts, Element, Plan, UNTOUCHED,
};
use anyhow::{Context, Result};
use bench::allreduce::{l2_bytes, regions};
use bench::data::DataKernels;
use bench::report::{Machine, Report, Row, Series};
use bench::{
    across_ranks, registration_about, sum_over_ranks, time_rotating, with_registration, Collective,
    RegistrationArgs, Sample, SweepArgs,
};
use common::nccl::{nccl_stream, sys, Communicator, NcclBuffer};
use common::setup;
use common::{Lesson, NcclVersion, Needs, RankContext};
use cudarc::driver::{result as cu, CudaStream};

#[derive(clap::Args, Debug)]
struct Args {
    #[command(flatten)]
    sweep: SweepArgs,
    #[command(flatten)]
    registration: RegistrationArgs,
    /// Use the pattern without rounding, with an odd base: blocks start on 8-byte boundaries.
    #[arg(long)]
    unaligned: bool,
}

const BENCH: Lesson = Lesson {
    name: "03_alltoallv_bench",
    about:
        "Times lesson 03's alltoallv unregistered, with ncclCommRegister and with symmetric windows",
    needs: Needs::GpuAndNccl {
        min: NcclVersion::new(2, 27, 0),
        feature: "ncclCommWindowRegister",
    },
    tool: None,
};

fn main() -> ExitCode {
    common::run_checked(&BENCH, |args: &Args| args.sweep.check(8), bench)
}

/// The counts one rank sends for `base`: the lesson's, or unrounded.
fn counts_for(base: usize, ranks: usize, unaligned: bool) -> Vec<usize> {
    if unaligned {
        unaligned_send_counts(base, ranks)
    } else {
        send_counts(base, ranks)
    }
}

/// What nccl-tests' alltoallv divides by the time: the largest total any
/// rank sends or receives, in bytes.
fn traffic_bytes(plan: &Plan) -> usize {
    plan.send_capacity.max(plan.recv_capacity) * std::mem::size_of::<u64>()
}

/// The largest base whose exchange moves at most `bytes` (at least base 1);
/// with `unaligned`, the largest odd one, so that rank 1's block starts on an
/// 8-byte boundary.
fn base_for(bytes: usize, ranks: usize, unaligned: bool) -> usize {
    let moves = |base: usize| {
        let counts = counts_for(base, ranks, unaligned);
        Plan::from_matrix(&count_matrix(&counts), ranks, 0)
            .map_or(usize::MAX, |p| traffic_bytes(&p))
    };
    let (mut low, mut high) = (1, (bytes / 8).max(1));
    while low < high {
        let mid = low + (high - low).div_ceil(2);
        if moves(mid) <= bytes {
            low = mid;
        } else {
            high = mid - 1;
        }
    }
    if unaligned && low.is_multiple_of(2) && low > 1 {
        low - 1
    } else {
        low
    }
}

fn bench(ctx: &RankContext, args: &Args) -> Result<()> {
    let (rank, size) = (ctx.rank(), ctx.size());
    let sizes = ctx.all_ok(args.sweep.sizes(8).map_err(Into::into))?;
    let plans: Vec<Plan> = sizes
        .iter()
        .map(|&bytes| {
            let counts = counts_for(base_for(bytes, size, args.unaligned), size, args.unaligned);
            Plan::from_matrix(&count_matrix(&counts), size, rank)
        })
        .collect::<Result<_>>()?;
    let send_capacity = plans.iter().map(|p| p.send_capacity).max().unwrap_or(1);

    let gpu = cudarc::driver::CudaContext::new(ctx.device()).context("bind the GPU")?;
    let stream = gpu.new_stream().context("create a stream")?;
    let comm = setup::communicator(ctx).context("create the communicator")?;
    // Each plan's exchange rotates through regions of the receive buffer,
    // as many as cover L2 four times, within 4 times the largest.
    let rotation = Rotation::new(&plans, l2_bytes(ctx, &stream)?, args.sweep.iters);
    bench::check_free_memory(ctx, send_capacity * 8 + rotation.buffer_bytes)?;
    let send = setup::buffer(send_capacity * 8).context("allocate the send buffer")?;
    let recv = setup::buffer(rotation.buffer_bytes).context("allocate the receive buffer")?;
    let data = DataKernels::load()?;
    data.self_test_checks(&stream)
        .context("the benchmark's check kernels (data.ptx) fail their self-test")?;

    let progress = bench::progress(ctx, sizes.len() * args.registration.modes.len(), BENCH.name);
    let mut series = Vec::new();
    for &mode in &args.registration.modes {
        // The same buffers every time; only the registration changes.
        let timed = |about: &str| -> Result<Series> {
            let rows = plans
                .iter()
                .enumerate()
                .map(|(k, plan)| {
                    progress.inc(1);
                    let buffers = Buffers {
                        send: &send,
                        recv: &recv,
                        stride: rotation.strides[k],
                        regions: rotation.regions[k],
                    };
                    time_exchange(ctx, args, plan, &comm, &stream, &buffers, &data)
                })
                .collect::<Result<_>>()
                .with_context(|| format!("-R {mode}: timing"))?;
            Ok(Series {
                name: format!("-R {mode}"),
                about: about.into(),
                datatype: None,
                rows,
            })
        };
        series.push(with_registration(mode, &comm, [&send, &recv], || {
            timed(&format!("alltoallv, {}", registration_about(mode)))
        })?);
    }
    progress.finish_and_clear();

    let report = Report {
        benchmark: format!(
            "{}{}",
            BENCH.name,
            if args.unaligned { " --unaligned" } else { "" }
        ),
        collective: Collective::AlltoAll,
        datatype: "uint64".into(),
        redop: "none".into(),
        machine: Machine::describe(ctx, &gpu)?,
        options: args.sweep.clone(),
        series,
    };
    report.publish(ctx)?;
    if ctx.is_root() {
        let counts: Vec<String> = plans
            .iter()
            .map(|p| {
                format!(
                    "{}:{}",
                    bench::size_label(traffic_bytes(p)),
                    p.send_counts[size.min(2) - 1]
                )
            })
            .collect();
        eprintln!(
            "note: blocks {} (size:count sent to rank {}): {}",
            if args.unaligned {
                "unaligned"
            } else {
                "16-byte aligned"
            },
            size.min(2) - 1,
            counts.join(" ")
        );
    }
    drop(data);
    send.free()?;
    recv.free()?;
    comm.destroy()?;
    report.fail_on_wrong(ctx)
}

/// Where each plan's exchanges land: a plan's receive region is its
/// `recv_capacity` words rounded up to 256 bytes (so that every region keeps
/// the blocks' alignment), and its exchanges rotate through
/// `bench::allreduce::regions` of them, as the AllReduce benchmarks do.
struct Rotation {
    /// Bytes from one receive region to the next, per plan.
    strides: Vec<usize>,
    /// Receive regions, per plan.
    regions: Vec<usize>,
    /// The receive buffer's bytes: every plan's regions fit.
    buffer_bytes: usize,
}

impl Rotation {
    fn new(plans: &[Plan], l2_bytes: usize, iters: u32) -> Self {
        let strides: Vec<usize> = plans
            .iter()
            .map(|p| (p.recv_capacity * 8).next_multiple_of(256).max(256))
            .collect();
        let largest = strides.iter().copied().max().unwrap_or(256);
        let regions: Vec<usize> = strides
            .iter()
            .map(|&stride| regions(stride, largest, l2_bytes, iters))
            .collect();
        let buffer_bytes = strides
            .iter()
            .zip(&regions)
            .map(|(stride, regions)| stride * regions)
            .max()
            .unwrap_or(256);
        Self {
            strides,
            regions,
            buffer_bytes,
        }
    }
}

/// The buffers of one plan's exchanges: one send region, `regions` receive
/// regions `stride` bytes apart.
struct Buffers<'a> {
    send: &'a NcclBuffer,
    recv: &'a NcclBuffer,
    stride: usize,
    regions: usize,
}

/// What receive region `region` of `plan` must hold on `rank`, as
/// `(address, words, (first, step))` parts for `DataKernels::check_sequences`:
/// each source's block, `Element::new(source, rank, i)` for its `i`-th
/// word, then the rest of the region untouched.
fn expected_parts(
    plan: &Plan,
    rank: usize,
    region: u64,
) -> impl Iterator<Item = (u64, usize, (u64, u64))> + '_ {
    let blocks = plan.recv_displs.iter().zip(&plan.recv_counts).enumerate();
    let total = plan.recv_total();
    blocks
        .map(move |(source, (&start, &count))| {
            (
                region + 8 * start as u64,
                count,
                (Element::new(source, rank, 0).0, 1),
            )
        })
        .chain(std::iter::once((
            region + 8 * total as u64,
            plan.recv_capacity - total,
            (UNTOUCHED, 0),
        )))
}

/// The element word `index` of a receive region must hold: what
/// [`expected_parts`] says, one word at a time (for the error message).
fn expected_at(plan: &Plan, rank: usize, index: usize) -> Element {
    let blocks = plan.recv_displs.iter().zip(&plan.recv_counts).enumerate();
    for (source, (&start, &count)) in blocks {
        if (start..start + count).contains(&index) {
            return Element::new(source, rank, index - start);
        }
    }
    Element(UNTOUCHED)
}

/// Times one plan's exchange with the buffers as they are registered now,
/// and checks every received element of every timed exchange on the GPU.
///
/// The send data is written once per size, on the GPU (every exchange
/// reads it). Before each round of a trial (see `bench::time_rotating`) the
/// receive regions are marked untouched; after it, every block of every
/// region is compared with the elements its source sent, and the rest of
/// the region with the untouched mark.
fn time_exchange(
    ctx: &RankContext,
    args: &Args,
    plan: &Plan,
    comm: &Communicator,
    stream: &std::sync::Arc<CudaStream>,
    buffers: &Buffers,
    data: &DataKernels,
) -> Result<Row> {
    let rank = ctx.rank();
    let (send, recv) = (buffers.send.as_ptr() as u64, buffers.recv.as_ptr() as u64);
    for (dest, (&start, &count)) in plan.send_displs.iter().zip(&plan.send_counts).enumerate() {
        let first = Element::new(rank, dest, 0).0;
        data.fill_sequence(send + 8 * start as u64, count, (first, 1), stream)?;
    }
    let region = |i: usize| recv + (buffers.stride * (i % buffers.regions)) as u64;
    let (seconds, wrong) = time_rotating(
        ctx,
        stream,
        &args.sweep,
        buffers.regions,
        |regions| {
            // SAFETY: the receive buffer holds `buffers.regions` regions.
            unsafe { cu::memset_d8_async(recv, 0xff, regions * buffers.stride, stream.cu_stream()) }
                .context("cuMemsetD8Async (mark the receive regions untouched)")
        },
        |i| {
            // SAFETY: the send buffer holds the largest plan's capacity, and
            // every receive region this plan's.
            unsafe {
                alltoallv(
                    buffers.send.as_ptr(),
                    &plan.send_counts,
                    &plan.send_displs,
                    region(i) as *mut _,
                    &plan.recv_counts,
                    &plan.recv_displs,
                    sys::ncclDataType_t::ncclUint64,
                    comm,
                    nccl_stream(stream),
                )
            }
        },
        |regions| check_regions(ctx, plan, regions, region, stream, data),
    )?;
    let bytes = traffic_bytes(plan);
    Ok(Row {
        bytes,
        count: bytes / 8,
        out_of_place: Sample::new(
            bytes,
            across_ranks(ctx, seconds, args.sweep.slowest)?,
            Collective::AlltoAll.bus_factor(ctx.size()),
            sum_over_ranks(ctx, wrong)?,
        ),
        in_place: None,
    })
}

/// Checks the first `regions` receive regions on the GPU; the first wrong
/// element is reported on stderr with the rank, the exchange and what it
/// should have been.
fn check_regions(
    ctx: &RankContext,
    plan: &Plan,
    regions: usize,
    region: impl Fn(usize) -> u64,
    stream: &CudaStream,
    data: &DataKernels,
) -> Result<u64> {
    let rank = ctx.rank();
    let parts: Vec<_> = (0..regions)
        .flat_map(|i| expected_parts(plan, rank, region(i)).collect::<Vec<_>>())
        .collect();
    let checked = data.check_sequences(&parts, stream)?;
    if let Some(first) = checked.first {
        let words = plan.recv_capacity.max(1);
        let (exchange, index) = (first as usize / words, first as usize % words);
        let mut got = [0u64];
        // SAFETY: the word is inside the region just checked; we wait for
        // the stream before reading `got`.
        unsafe {
            cu::memcpy_dtoh_async(
                &mut got[..],
                region(exchange) + 8 * index as u64,
                stream.cu_stream(),
            )
        }
        .context("cuMemcpyDtoHAsync (the first wrong element)")?;
        stream
            .synchronize()
            .context("wait for the first wrong element")?;
        eprintln!(
            "{}wrong result: exchange {exchange} of {regions}, word {index} of {words}: expected {}, got {} ({} words wrong)",
            ctx.prefix(),
            expected_at(plan, rank, index),
            Element(got[0]),
            checked.wrong,
        );
    }
    Ok(checked.wrong)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_count_fits_the_requested_size() {
        for unaligned in [false, true] {
            for ranks in 1..=8 {
                for bytes in [64, 1024, 4096, 1 << 20, 256 << 20] {
                    let base = base_for(bytes, ranks, unaligned);
                    let plan = |base| {
                        let counts = counts_for(base, ranks, unaligned);
                        traffic_bytes(&Plan::from_matrix(&count_matrix(&counts), ranks, 0).unwrap())
                    };
                    assert!(
                        plan(base) <= bytes.max(16 * ranks),
                        "{ranks} ranks, {bytes} B: base {base}"
                    );
                    let next = if unaligned { base + 2 } else { base + 1 };
                    assert!(
                        plan(next) > bytes || bytes < 16 * ranks,
                        "base {base} is not the largest for {bytes}"
                    );
                }
            }
        }
    }

    /// The GPU's check (`expected_parts`, sequences of words) expects what
    /// the lesson's exchange delivers: every source's `send_data` block for
    /// this rank at its receive displacement, the rest untouched.
    #[test]
    fn the_gpu_check_expects_what_every_source_sends() {
        for unaligned in [false, true] {
            for ranks in 1..=4 {
                for bytes in [64, 4096, 1 << 20] {
                    let counts = counts_for(base_for(bytes, ranks, unaligned), ranks, unaligned);
                    let matrix = count_matrix(&counts);
                    let plans: Vec<Plan> = (0..ranks)
                        .map(|r| Plan::from_matrix(&matrix, ranks, r).unwrap())
                        .collect();
                    for (rank, plan) in plans.iter().enumerate() {
                        // What the exchange delivers, on the host.
                        let mut delivered = vec![UNTOUCHED; plan.recv_capacity];
                        for (source, from) in plans.iter().enumerate() {
                            let sent = alltoallv_sm::send_data(source, &from.send_counts);
                            let block = &sent[from.send_displs[rank]..][..from.send_counts[rank]];
                            delivered[plan.recv_displs[source]..][..block.len()]
                                .copy_from_slice(block);
                        }
                        // What the check kernels compare with: the parts laid
                        // one after the other cover the region, in order.
                        let mut expected = Vec::new();
                        let mut next = 0;
                        for (at, count, (first, step)) in expected_parts(plan, rank, 0) {
                            assert_eq!(at, 8 * next as u64, "parts are contiguous");
                            expected
                                .extend((0..count as u64).map(|i| first.wrapping_add(step * i)));
                            next += count;
                        }
                        assert_eq!(expected, delivered, "{ranks} ranks, rank {rank}, {bytes} B");
                        for (index, &word) in delivered.iter().enumerate() {
                            assert_eq!(expected_at(plan, rank, index), Element(word));
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn receive_regions_keep_the_alignment_and_the_memory_bound() {
        let ranks = 2;
        let plans: Vec<Plan> = bench::sweep_sizes(8, 512 << 20, 2, 8)
            .into_iter()
            .map(|bytes| {
                let counts = counts_for(base_for(bytes, ranks, false), ranks, false);
                Plan::from_matrix(&count_matrix(&counts), ranks, 0).unwrap()
            })
            .collect();
        let rotation = Rotation::new(&plans, 50 << 20, 20);
        assert!(rotation.strides.iter().all(|s| s % 256 == 0));
        let largest = *rotation.strides.iter().max().unwrap();
        assert!(rotation.buffer_bytes <= 4 * largest.max(50 << 20));
        for (k, plan) in plans.iter().enumerate() {
            assert!(rotation.strides[k] >= plan.recv_capacity * 8);
            assert!(rotation.strides[k] * rotation.regions[k] <= rotation.buffer_bytes);
        }
        assert_eq!(
            rotation.regions[0], 21,
            "small exchanges: one region per operation"
        );
    }

    #[test]
    fn unaligned_bases_are_odd_and_misalign_rank_1s_block() {
        for ranks in 2..=8 {
            for bytes in [1 << 20, 64 << 20, 256 << 20] {
                let base = base_for(bytes, ranks, true);
                assert_eq!(base % 2, 1);
                let counts = counts_for(base, ranks, true);
                assert_eq!(alltoallv_sm::displacements(&counts)[1] * 8 % 16, 8);
            }
        }
    }
}
