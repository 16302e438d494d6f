//! `03_alltoallv_bench`: what does registration do for lesson 03's alltoallv?
//!
//! Times the lesson's exchange (same count pattern, same `alltoallv`) at send
//! sizes from `--min-bytes` to `--max-bytes` per rank, on the same
//! `ncclMemAlloc` buffers registered three ways, like nccl-tests' `-R`:
//!
//! * `-R 0`: not registered;
//! * `-R 1`: registered with `ncclCommRegister` (lesson 01);
//! * `-R 2`: registered as symmetric windows (lessons 02 and 03).
//!
//! Timing and bandwidth follow nccl-tests (see `common::bench`): `--warmup`
//! untimed exchanges, then `--iters` back to back and one synchronize, the
//! slowest rank's time. Unlike nccl-tests, each size is timed `--trials` times
//! and the median trial is reported: a single hiccup of the host (a few
//! hundred microseconds, seen on the GPU machine) would otherwise dominate a
//! small size's average. algbw = bytes each rank sends / time; busbw = algbw ×
//! (n-1)/n, the AlltoAll factor. After each timing the receive buffers are
//! checked element by element (`#wrong`, summed over ranks); any wrong element
//! makes the run exit 1.
//!
//! ```text
//! NTHREADS=2 cargo run --release --bin 03_alltoallv_bench
//! mpirun -np 4 target/release/03_alltoallv_bench --max-bytes 64M
//! ```

use std::process::ExitCode;

use alltoallv_sm::{alltoallv, count_matrix, send_counts, send_data, Element, Plan, UNTOUCHED};
use anyhow::{bail, Context, Result};
use common::bench::{gb_per_s, size_label, slowest_rank, time_per_op, Collective};
use common::nccl::{
    nccl_stream, sys, Communicator, NcclBuffer, Registration, Window, NCCL_WIN_COLL_SYMMETRIC,
};
use common::verify::check_all;
use common::{CannotRun, Lesson, NcclVersion, Needs, RankContext};
use cudarc::driver::{result as cu, CudaContext, CudaStream};

#[derive(clap::Args, Debug)]
struct Args {
    /// Smallest send size per rank, in bytes (suffixes K, M, G: powers of 1024).
    #[arg(long, default_value = "1K", value_parser = parse_size)]
    min_bytes: usize,
    /// Largest send size per rank.
    #[arg(long, default_value = "256M", value_parser = parse_size)]
    max_bytes: usize,
    /// Each size is this many times the previous one.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(2..))]
    factor: u32,
    /// Timed exchanges per size.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..))]
    iters: u32,
    /// Untimed exchanges before timing.
    #[arg(long, default_value_t = 5)]
    warmup: u32,
    /// Timings per size; the median is reported.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
    trials: u32,
}

/// `4096`, `4K`, `256M`, `1G`.
fn parse_size(text: &str) -> Result<usize, String> {
    let text = text.trim();
    let (digits, unit) = match text.char_indices().last() {
        Some((at, 'K' | 'k')) => (&text[..at], 1usize << 10),
        Some((at, 'M' | 'm')) => (&text[..at], 1 << 20),
        Some((at, 'G' | 'g')) => (&text[..at], 1 << 30),
        _ => (text, 1),
    };
    let n: usize = digits
        .parse()
        .map_err(|_| format!("'{text}' is not a size such as 4096, 64K or 256M"))?;
    match n.checked_mul(unit) {
        Some(0) => Err("a size must be at least 8 bytes (one element)".into()),
        Some(bytes) => Ok(bytes),
        None => Err(format!("'{text}' is too large")),
    }
}

const BENCH: Lesson = Lesson {
    name: "03_alltoallv_bench",
    about:
        "Times lesson 03's alltoallv unregistered, with ncclCommRegister and with symmetric windows",
    needs: Needs::GpuAndNccl {
        min: NcclVersion::new(2, 27, 0),
        feature: "ncclCommWindowRegister",
    },
};

fn main() -> ExitCode {
    common::run(&BENCH, bench)
}

/// One timed size in one registration mode.
struct Sample {
    seconds: f64,
    wrong: usize,
}

/// The base count whose pattern sends as close to `bytes` per rank as possible without exceeding it.
fn base_for(bytes: usize, ranks: usize) -> usize {
    let elements = (bytes / 8).max(1);
    let total = |base: usize| send_counts(base, ranks).iter().sum::<usize>();
    let (mut low, mut high) = (1, elements);
    while low < high {
        let mid = low + (high - low).div_ceil(2);
        if total(mid) <= elements {
            low = mid;
        } else {
            high = mid - 1;
        }
    }
    low
}

fn bench(ctx: &RankContext, args: &Args) -> Result<()> {
    let (rank, size) = (ctx.rank(), ctx.size());
    if args.min_bytes > args.max_bytes {
        bail!(CannotRun::new(
            "--min-bytes is larger than --max-bytes",
            "swap them"
        ));
    }
    let mut sizes = vec![args.min_bytes];
    while let Some(next) = sizes
        .last()
        .and_then(|s| s.checked_mul(args.factor as usize))
        .filter(|&s| s <= args.max_bytes)
    {
        sizes.push(next);
    }
    let bases: Vec<usize> = sizes.iter().map(|&bytes| base_for(bytes, size)).collect();
    let largest = Plan::from_matrix(&count_matrix(*bases.last().unwrap_or(&1), size), size, rank)?;

    let gpu = CudaContext::new(ctx.device()).context("bind the GPU")?;
    let stream = gpu.new_stream().context("create a stream")?;
    let comm = Communicator::init_rank(ctx).context("create the communicator")?;
    let (free, _) = cu::mem_get_info().context("cuMemGetInfo")?;
    let needed = (largest.send_capacity + largest.recv_capacity) * 8;
    ctx.all_ok(if needed > free {
        Err(CannotRun::new(
            format!("--max-bytes needs {needed} bytes per GPU, {free} are free"),
            "use a smaller --max-bytes",
        )
        .into())
    } else {
        Ok(())
    })?;
    let send = NcclBuffer::alloc(largest.send_capacity * 8).context("allocate the send buffer")?;
    let recv =
        NcclBuffer::alloc(largest.recv_capacity * 8).context("allocate the receive buffer")?;

    // The same buffers every time; only the registration changes.
    let timed = |label: &str| {
        sweep(ctx, args, &bases, &comm, &stream, &send, &recv)
            .with_context(|| format!("{label}: timing"))
    };
    let mut results = vec![timed("-R 0")?];
    {
        let send_registration =
            Registration::register(&comm, &send).context("-R 1: ncclCommRegister")?;
        let recv_registration =
            Registration::register(&comm, &recv).context("-R 1: ncclCommRegister")?;
        results.push(timed("-R 1")?);
        send_registration.deregister()?;
        recv_registration.deregister()?;
    }
    {
        let send_window =
            Window::register(&comm, &send, NCCL_WIN_COLL_SYMMETRIC).context("-R 2: window")?;
        let recv_window =
            Window::register(&comm, &recv, NCCL_WIN_COLL_SYMMETRIC).context("-R 2: window")?;
        results.push(timed("-R 2")?);
        send_window.deregister()?;
        recv_window.deregister()?;
    }

    let factor = Collective::AlltoAll.bus_factor(size);
    ctx.println_root(format!(
        "# alltoallv with lesson 03's pattern, {size} ranks, uint64; time = slowest rank, median of {} trials of {} iterations; busbw = algbw x (n-1)/n",
        args.trials, args.iters
    ));
    ctx.println_root(format!(
        "# {:>28}  {:^32}  {:^32}  {:^32}",
        "", "-R 0: not registered", "-R 1: ncclCommRegister", "-R 2: symmetric window"
    ));
    let columns = format!(
        "{:>9} {:>6} {:>6} {:>6}",
        "time(us)", "algbw", "busbw", "#wrong"
    );
    ctx.println_root(format!(
        "# {:>10} {:>7} {:>9}  {columns}  {columns}  {columns}",
        "size", "label", "base"
    ));
    let mut wrong_total = 0;
    for (i, &base) in bases.iter().enumerate() {
        let bytes = send_counts(base, size).iter().sum::<usize>() * 8;
        let mut line = format!("{:>12} {:>7} {:>9}", bytes, size_label(sizes[i]), base);
        for samples in &results {
            let sample = &samples[i];
            let algbw = gb_per_s(bytes, sample.seconds);
            line.push_str(&format!(
                "  {:>9.1} {:>6.1} {:>6.1} {:>6}",
                sample.seconds * 1e6,
                algbw,
                algbw * factor,
                sample.wrong
            ));
            wrong_total += sample.wrong;
        }
        ctx.println_root(line);
    }
    send.free()?;
    recv.free()?;
    comm.destroy()?;
    if wrong_total > 0 {
        bail!("{wrong_total} elements were wrong (see #wrong)");
    }
    Ok(())
}

/// The middle value (the lower middle of an even count).
fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[(values.len() - 1) / 2]
}

/// Times every size once with the buffers as they are registered now.
#[allow(clippy::too_many_arguments)]
fn sweep(
    ctx: &RankContext,
    args: &Args,
    bases: &[usize],
    comm: &Communicator,
    stream: &std::sync::Arc<CudaStream>,
    send: &NcclBuffer,
    recv: &NcclBuffer,
) -> Result<Vec<Sample>> {
    let (rank, size) = (ctx.rank(), ctx.size());
    let mut samples = Vec::new();
    for &base in bases {
        let plan = Plan::from_matrix(&count_matrix(base, size), size, rank)?;
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
        let exchange = || -> Result<()> {
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
        };
        let mut trials = Vec::new();
        for trial in 0..args.trials {
            let warmup = if trial == 0 { args.warmup } else { 0 };
            ctx.barrier()?;
            let seconds = time_per_op(warmup as usize, args.iters as usize, exchange, || {
                Ok(stream.synchronize()?)
            })?;
            trials.push(slowest_rank(ctx, seconds)?);
        }
        let seconds = median(&mut trials);

        let mut received = vec![0u64; plan.recv_capacity];
        recv.download(&mut received, stream)?;
        let received: Vec<Element> = received.into_iter().map(Element).collect();
        let mut wrong = 0;
        for (source, (&start, &count)) in plan.recv_displs.iter().zip(&plan.recv_counts).enumerate()
        {
            if let Err(mismatch) = check_all("block", &received[start..start + count], |i| {
                Element::new(source, rank, i)
            }) {
                wrong += mismatch.wrong;
            }
        }
        if let Err(mismatch) = check_all("tail", &received[plan.recv_total()..], |_| {
            Element(UNTOUCHED)
        }) {
            wrong += mismatch.wrong;
        }
        let all = ctx.gather((wrong as u64).to_le_bytes().to_vec())?;
        let wrong = all.map_or(0, |all| {
            all.iter()
                .map(|b| u64::from_le_bytes(b[..8].try_into().unwrap_or([0; 8])) as usize)
                .sum()
        });
        samples.push(Sample { seconds, wrong });
    }
    Ok(samples)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_ignores_one_outlier() {
        assert_eq!(median(&mut [10.0, 400.0, 11.0, 9.0, 10.5]), 10.5);
        assert_eq!(median(&mut [3.0]), 3.0);
        assert_eq!(median(&mut [4.0, 1.0]), 1.0);
    }

    #[test]
    fn sizes_parse_with_binary_suffixes() {
        assert_eq!(parse_size("1K"), Ok(1024));
        assert_eq!(parse_size("256M"), Ok(256 << 20));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert!(parse_size("0").is_err());
        assert!(parse_size("lots").is_err());
    }

    #[test]
    fn base_count_fits_the_requested_size() {
        for ranks in 1..=8 {
            for bytes in [8, 1024, 4096, 1 << 20, 256 << 20] {
                let base = base_for(bytes, ranks);
                let sent = send_counts(base, ranks).iter().sum::<usize>() * 8;
                assert!(
                    sent <= bytes.max(8 * ranks),
                    "{ranks} ranks, {bytes} B: base {base} sends {sent}"
                );
                let more = send_counts(base + 1, ranks).iter().sum::<usize>() * 8;
                assert!(
                    more > bytes || bytes < 8 * ranks,
                    "base {base} is not the largest that fits {bytes}"
                );
            }
        }
    }
}
