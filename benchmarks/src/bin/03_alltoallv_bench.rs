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
//! counts it; algbw = size / time; busbw = algbw × (n-1)/n. After each
//! timing the receive buffers are checked element by element (`#wrong`,
//! summed over ranks); any wrong element makes the run exit 1. An exchange
//! has no in-place form: those columns read N/A.
//!
//! ```text
//! NTHREADS=2 cargo run --release --bin 03_alltoallv_bench
//! mpirun -np 4 target/release/03_alltoallv_bench -b 1K -e 256M --json a2av.json --svg a2av.svg
//! NTHREADS=2 target/release/03_alltoallv_bench -b 64M -e 256M --unaligned
//! ```

use std::process::ExitCode;

use alltoallv_sm::{
    alltoallv, count_matrix, send_counts, send_data, unaligned_send_counts, Element, Plan,
    UNTOUCHED,
};
use anyhow::{Context, Result};
use bench::report::{Machine, Report, Row, Series};
use bench::{
    across_ranks, registration_about, sum_over_ranks, time_trials, with_registration, Collective,
    RegistrationArgs, Sample, SweepArgs,
};
use common::nccl::{nccl_stream, sys, Communicator, NcclBuffer};
use common::setup;
use common::verify::check_all;
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
    let recv_capacity = plans.iter().map(|p| p.recv_capacity).max().unwrap_or(1);

    let gpu = cudarc::driver::CudaContext::new(ctx.device()).context("bind the GPU")?;
    let stream = gpu.new_stream().context("create a stream")?;
    let comm = setup::communicator(ctx).context("create the communicator")?;
    bench::check_free_memory(ctx, (send_capacity + recv_capacity) * 8)?;
    let send = setup::buffer(send_capacity * 8).context("allocate the send buffer")?;
    let recv = setup::buffer(recv_capacity * 8).context("allocate the receive buffer")?;

    let progress = bench::progress(ctx, sizes.len() * args.registration.modes.len(), BENCH.name);
    let mut series = Vec::new();
    for &mode in &args.registration.modes {
        // The same buffers every time; only the registration changes.
        let timed = |about: &str| -> Result<Series> {
            let rows = plans
                .iter()
                .map(|plan| {
                    progress.inc(1);
                    time_exchange(ctx, args, plan, &comm, &stream, &send, &recv)
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
    send.free()?;
    recv.free()?;
    comm.destroy()?;
    report.fail_on_wrong(ctx)
}

/// Times one plan's exchange with the buffers as they are registered now,
/// then checks every received element.
fn time_exchange(
    ctx: &RankContext,
    args: &Args,
    plan: &Plan,
    comm: &Communicator,
    stream: &std::sync::Arc<CudaStream>,
    send: &NcclBuffer,
    recv: &NcclBuffer,
) -> Result<Row> {
    let rank = ctx.rank();
    send.upload(&send_data(rank, &plan.send_counts), stream)?;
    // SAFETY: the receive buffer holds the largest plan's capacity.
    unsafe {
        cu::memset_d8_async(
            recv.as_ptr() as u64,
            0xff,
            plan.recv_capacity * 8,
            stream.cu_stream(),
        )
    }?;
    // Unlike the AllReduce runner, every exchange uses the same bytes: the
    // blocks of one plan already spread over the whole buffer at large sizes.
    let seconds = time_trials(ctx, stream, &args.sweep, |_| {
        // SAFETY: both buffers were sized for the largest plan.
        unsafe {
            alltoallv(
                send.as_ptr(),
                &plan.send_counts,
                &plan.send_displs,
                recv.as_ptr(),
                &plan.recv_counts,
                &plan.recv_displs,
                sys::ncclDataType_t::ncclUint64,
                comm,
                nccl_stream(stream),
            )
        }
    })?;

    let mut received = vec![0u64; plan.recv_capacity];
    recv.download(&mut received, stream)?;
    let received: Vec<Element> = received.into_iter().map(Element).collect();
    let mut wrong = 0;
    let blocks = plan.recv_displs.iter().zip(&plan.recv_counts).enumerate();
    for (source, (&start, &count)) in blocks {
        if let Err(mismatch) = check_all("block", &received[start..start + count], |i| {
            Element::new(source, rank, i)
        }) {
            eprintln!(
                "{}wrong result from rank {source}: {mismatch}",
                ctx.prefix()
            );
            wrong += mismatch.wrong;
        }
    }
    if let Err(mismatch) = check_all("tail", &received[plan.recv_total()..], |_| {
        Element(UNTOUCHED)
    }) {
        eprintln!("{}written past the blocks: {mismatch}", ctx.prefix());
        wrong += mismatch.wrong;
    }
    let bytes = traffic_bytes(plan);
    Ok(Row {
        bytes,
        count: bytes / 8,
        out_of_place: Sample::new(
            bytes,
            across_ranks(ctx, seconds, args.sweep.slowest)?,
            Collective::AlltoAll.bus_factor(ctx.size()),
            sum_over_ranks(ctx, wrong as u64)?,
        ),
        in_place: None,
    })
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
