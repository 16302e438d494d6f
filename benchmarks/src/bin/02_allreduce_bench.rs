//! `02_allreduce_bench`: what do registration and symmetric windows buy an
//! AllReduce?
//!
//! Times `ncclAllReduce` (float32, sum) over a size sweep on the same
//! `ncclMemAlloc` buffers, registered three ways, like nccl-tests' `-R`:
//!
//! * `-R 0`: not registered: NCCL copies through its own buffers;
//! * `-R 1`: registered with `ncclCommRegister` (lesson 01);
//! * `-R 2`: registered as symmetric windows (lesson 02): NCCL may run its
//!   symmetric kernels (on 2.28: sum on fp32/fp16/bf16/fp8, one node, every
//!   GPU pair P2P-connected).
//!
//! Every size is timed out of place and in place, and every timed operation
//! is checked element by element (see `bench::allreduce`); a wrong element
//! exits 1. `--stress N` runs N back-to-back operations per size with the
//! ranks skewed on purpose instead, and checks each.
//! The table follows nccl-tests' layout, so it can be laid beside
//! `all_reduce_perf -R 0/1/2`.
//!
//! The default sweep (8 B to 512 MiB) should take about 7 s at 2 ranks
//! on one H100, plus NCCL's start: the estimate is in the `bench` crate's
//! "How long a default sweep takes".
//!
//! ```text
//! NTHREADS=2 cargo run --release --bin 02_allreduce_bench
//! mpirun -np 4 target/release/02_allreduce_bench -b 8 -e 128M --json ar.json --svg ar.svg
//! NCCL_SYM_CTAS=32 NTHREADS=2 target/release/02_allreduce_bench -R 2 -b 1M -e 512M
//! NTHREADS=2 target/release/02_allreduce_bench --stress 2000 -b 8 -e 4M -f 8
//! ```

use std::process::ExitCode;

use anyhow::{Context, Result};
use bench::allreduce::{
    self, l2_bytes, nccl_allreduce, rotation_bytes, Buffers, StressArgs, Sweep,
};
use bench::{registration_about, with_registration, Placement, RegistrationArgs, SweepArgs};
use common::setup;
use common::{Lesson, NcclVersion, Needs, RankContext};
use cudarc::driver::CudaContext;

#[derive(clap::Args, Debug)]
struct Args {
    #[command(flatten)]
    sweep: SweepArgs,
    #[command(flatten)]
    registration: RegistrationArgs,
    #[command(flatten)]
    stress: StressArgs,
}

const BENCH: Lesson = Lesson {
    name: "02_allreduce_bench",
    about: "Times ncclAllReduce unregistered, with ncclCommRegister and on symmetric windows",
    needs: Needs::GpuAndNccl {
        min: NcclVersion::new(2, 27, 0),
        feature: "ncclCommWindowRegister",
    },
    tool: None,
};

fn main() -> ExitCode {
    common::run_checked(&BENCH, |args: &Args| args.sweep.check(4), bench)
}

fn bench(ctx: &RankContext, args: &Args) -> Result<()> {
    let sizes = ctx.all_ok(args.sweep.sizes(4).map_err(Into::into))?;
    let largest = *sizes.last().context("no size in the sweep")?;

    let gpu = CudaContext::new(ctx.device()).context("bind the GPU")?;
    let stream = gpu.new_stream().context("create a stream")?;
    let comm = setup::communicator(ctx).context("create the communicator")?;
    // Enough regions to rotate past L2, within 4 times the largest size.
    let wanted = rotation_bytes(&args.sweep, &args.stress, &sizes, l2_bytes(ctx, &stream)?);
    // Or what the GPU has, with a note: two regions of the largest size at least.
    let buffer_bytes = bench::fit_to_memory(ctx, wanted, 2 * largest, 2, 0)?;
    let send = setup::buffer(buffer_bytes).context("allocate the send buffer")?;
    let recv = setup::buffer(buffer_bytes).context("allocate the receive buffer")?;
    let sweep = Sweep::new(
        ctx,
        &args.sweep,
        &stream,
        Buffers::whole(&send, &recv),
        &sizes,
    )?;

    // One AllReduce of `count` floats, out of place or in place, `shift`
    // bytes into the buffers.
    let allreduce = |placement: Placement, count: usize, shift: usize| -> Result<()> {
        let input = match placement {
            Placement::OutOfPlace => send.as_ptr(),
            Placement::InPlace => recv.as_ptr(),
        };
        // SAFETY: the runner keeps shift + count floats inside the buffers,
        // which outlive the stream's work.
        unsafe {
            nccl_allreduce(
                input.cast::<u8>().add(shift).cast(),
                recv.as_ptr().cast::<u8>().add(shift).cast(),
                count,
                &comm,
                &stream,
            )
        }
    };

    if args.stress.stress.is_some() {
        let mut series = Vec::new();
        for &mode in &args.registration.modes {
            series.push(with_registration(mode, &comm, [&send, &recv], || {
                sweep.stress(&args.stress, &format!("-R {mode}"), allreduce)
            })?);
        }
        drop(sweep);
        send.free()?;
        recv.free()?;
        comm.destroy()?;
        return allreduce::publish_stress(ctx, &args.stress, &series);
    }

    let progress = bench::progress(
        ctx,
        sizes.len() * args.registration.modes.len(),
        "02_allreduce_bench",
    );
    let mut series = Vec::new();
    for &mode in &args.registration.modes {
        // The same buffers every time; only the registration changes.
        series.push(with_registration(mode, &comm, [&send, &recv], || {
            let about = format!("ncclAllReduce, {}", registration_about(mode));
            sweep.series((&format!("-R {mode}"), &about), &progress, allreduce)
        })?);
    }
    progress.finish_and_clear();
    drop(sweep);

    let report = allreduce::report(ctx, &gpu, BENCH.name.into(), &args.sweep, series)?;
    report.publish(ctx)?;
    send.free()?;
    recv.free()?;
    comm.destroy()?;
    report.fail_on_wrong(ctx)
}
