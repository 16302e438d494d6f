//! # Lesson 03: variable-size all-to-all over symmetric memory
//!
//! Every rank sends a block of a different size to every rank (itself
//! included): `--base-count` elements to rank 0, half as many to rank 1, and
//! so on. The receivers do not know the sizes in advance, so the ranks first
//! exchange their counts with an `ncclAllGather`; then the blocks travel as
//! an alltoallv built from `ncclSend`/`ncclRecv` inside one NCCL group,
//! between `ncclMemAlloc` buffers registered as symmetric windows.
//!
//! Why it matters: NCCL has no alltoallv, yet mixture-of-experts routing,
//! sparse embeddings and sequence packing all need one. This is how to build
//! it, and how to find out what symmetric memory does for it (the benchmark
//! `03_alltoallv_bench` measures; the README shows the result).
//!
//! Run it:
//!
//! ```text
//! cargo run --release --bin 03_alltoallv_sm                    # one thread per visible GPU
//! NTHREADS=4 cargo run --release --bin 03_alltoallv_sm -- --base-count 4096
//! cargo build --release --features mpi
//! mpirun -np 4 target/release/03_alltoallv_sm                  # one process per GPU
//! cargo run --release --bin 03_alltoallv_bench                 # the measurement
//! ```
//!
//! Left out on purpose: overlapping the count exchange with other work, and
//! non-contiguous blocks (MPI's datatypes); both are application choices.

use std::ffi::c_int;
use std::process::ExitCode;

use alltoallv_sm::{
    check_fits, parse_base_count, send_data, window_bytes, Element, Plan, DEFAULT_BASE_COUNT,
    UNTOUCHED,
};
use anyhow::{anyhow, Context, Result};
use common::nccl::{nccl_stream, sys, NcclCheck};
use common::setup;
use common::verify::check_all;
use common::{CannotRun, Lesson, NcclVersion, Needs, RankContext};
use cudarc::driver::{result as cu, CudaContext};

#[derive(clap::Args, Debug)]
struct Args {
    /// Elements each rank sends to rank 0; every next rank gets half as many (at least 1).
    #[arg(long, env = "BASE_COUNT", value_name = "N", default_value_t = DEFAULT_BASE_COUNT, value_parser = parse_base_count)]
    base_count: usize,
}

const LESSON: Lesson = Lesson {
    name: "03_alltoallv_sm",
    about: "Variable-size all-to-all over symmetric memory, from ncclSend/ncclRecv in one group",
    needs: Needs::GpuAndNccl {
        min: NcclVersion::new(2, 27, 0),
        feature: "ncclCommWindowRegister",
    },
    tool: None,
};

fn main() -> ExitCode {
    common::run(&LESSON, alltoallv_sm)
}

/// Runs on every rank at once (a thread or an MPI process each).
fn alltoallv_sm(ctx: &RankContext, args: &Args) -> Result<()> {
    let (rank, size) = (ctx.rank(), ctx.size());
    ctx.println_root(format!("Starting AlltoAllV example with {size} ranks"));

    // Step 1: Bind this rank's GPU and create a stream.
    let gpu = CudaContext::new(ctx.device()).context("Step 1: bind the GPU")?;
    let stream = gpu.new_stream().context("Step 1: create a stream")?;

    // Step 2: Create the communicator from a unique id that rank 0 shares.
    // The calls of lesson 01's Step 2 (ncclGetUniqueId, ncclCommInitRankConfig),
    // made by common::setup: this lesson is about what comes after.
    let comm = setup::communicator(ctx).context("Step 2: create the communicator")?;
    ctx.println_ordered(format!(
        "  Rank {rank} communicator initialized using device {}",
        ctx.device()
    ))?;

    // Step 3: Decide what this rank sends: counts falling with the destination, blocks in rank order.
    // A real application knows only its own send counts (how many tokens go
    // to each expert, say). Every element encodes (source, destination,
    // index), so a misplaced element cannot go unnoticed.
    ctx.println_root("Setting up AlltoAllV with variable-sized transfers");
    let my_counts = alltoallv_sm::send_counts(args.base_count, size);
    let counts_text: Vec<String> = my_counts.iter().map(usize::to_string).collect();
    ctx.println_root(format!("Send counts per rank: {}", counts_text.join(" ")));
    // NOTE: the counts are rounded up to whole 16 bytes (2 elements), so every
    // block starts on a 16-byte boundary: NCCL copies in 16-byte vectors, and
    // blocks on 8-byte boundaries ran at about half the bandwidth (README).
    // NOTE: every rank checks that the buffers fit and all_ok makes the
    // answer collective: a rank that stopped alone would leave its peers
    // waiting in the next NCCL call.
    ctx.all_ok(fits_on_gpu(args.base_count, size).context("Step 3: size the buffers"))?;

    // Step 4: Exchange the counts with ncclAllGather, so every rank learns what it will receive.
    // After it every rank holds the whole count matrix (row = source, column =
    // destination): its column gives the receive counts, and the largest
    // column sum sizes the receive window, which must be the same on every
    // rank. (ncclAlltoAll, 2.28+, would move only the column when that is all
    // you need.)
    let row_bytes = size * std::mem::size_of::<u64>();
    let my_row = setup::buffer(row_bytes).context("Step 4: allocate the count row")?;
    let matrix_buf =
        setup::buffer(row_bytes * size).context("Step 4: allocate the count matrix")?;
    my_row.upload(
        &my_counts.iter().map(|&c| c as u64).collect::<Vec<_>>(),
        &stream,
    )?;
    // SAFETY: `my_row` holds `size` u64, `matrix_buf` size * size; both outlive the synchronize below.
    unsafe {
        sys::ncclAllGather(
            my_row.as_ptr(),
            matrix_buf.as_ptr(),
            size,
            sys::ncclDataType_t::ncclUint64,
            comm.as_raw(),
            nccl_stream(&stream),
        )
    }
    .check("ncclAllGather")
    .context("Step 4: exchange the counts")?;
    let mut matrix = vec![0u64; size * size];
    matrix_buf
        .download(&mut matrix, &stream)
        .context("Step 4: copy the count matrix to the host")?;
    let plan = Plan::from_matrix(&matrix, size, rank)?;
    ctx.println_ordered(format!(
        "  Rank {rank}: Total send elements: {}, Total recv elements: {}",
        plan.send_total(),
        plan.recv_total()
    ))?;

    // Step 5: Allocate both buffers with ncclMemAlloc and register them as symmetric windows.
    // NOTE: window registration is collective and every rank must register the
    // same size, so both windows are sized for the rank that needs most, known
    // from the matrix. Here that is rank 0's receive buffer.
    let elem = std::mem::size_of::<u64>();
    ctx.println_root("Symmetric Memory allocation");
    ctx.println_ordered(format!(
        "  Rank {rank} allocating send: {:.2} MB, recv: {:.2} MB",
        mib(plan.send_capacity * elem),
        mib(plan.recv_capacity * elem)
    ))?;
    // ncclMemAlloc and ncclCommWindowRegister(..., NCCL_WIN_COLL_SYMMETRIC),
    // as in lesson 02's Steps 3 and 4.
    let send =
        setup::buffer(plan.send_capacity * elem).context("Step 5: allocate the send buffer")?;
    let recv =
        setup::buffer(plan.recv_capacity * elem).context("Step 5: allocate the receive buffer")?;
    let send_window = setup::window(&comm, &send).context("Step 5: register the send window")?;
    let recv_window = setup::window(&comm, &recv).context("Step 5: register the receive window")?;

    // Step 6: Fill the send buffer, and the receive buffer with a marker that no block contains.
    // The marker shows any element that no receive wrote.
    send.upload(&send_data(rank, &plan.send_counts), &stream)
        .context("Step 6: fill the send buffer")?;
    recv.upload(&vec![UNTOUCHED; plan.recv_capacity], &stream)
        .context("Step 6: mark the receive buffer")?;

    // Step 7: Exchange the blocks with alltoallv: one ncclSend and one ncclRecv per peer, in one group.
    // NOTE: inside the group NCCL only records the calls; ncclGroupEnd
    // launches them together. Without it, each rank's first ncclSend would
    // wait for a receive its peer has not posted yet: a deadlock. Zero counts
    // are skipped on both sides, which keeps every send matched.
    ctx.println_root("Starting AlltoAllV with variable-sized transfers");
    let (send_base, recv_base) = (send.as_ptr().cast::<u64>(), recv.as_ptr().cast::<u64>());
    // SAFETY: opens a group on this thread; ncclGroupEnd below closes it.
    unsafe { sys::ncclGroupStart() }
        .check("ncclGroupStart")
        .context("Step 7: alltoallv")?;
    let posted = (0..size).try_for_each(|peer| -> Result<()> {
        // SAFETY: the plan's blocks lie inside the buffers (send_capacity and
        // recv_capacity elements), which live until the synchronize below.
        unsafe {
            if plan.send_counts[peer] > 0 {
                sys::ncclSend(
                    send_base.add(plan.send_displs[peer]).cast(),
                    plan.send_counts[peer],
                    sys::ncclDataType_t::ncclUint64,
                    peer as c_int,
                    comm.as_raw(),
                    nccl_stream(&stream),
                )
                .check("ncclSend")?;
            }
            if plan.recv_counts[peer] > 0 {
                sys::ncclRecv(
                    recv_base.add(plan.recv_displs[peer]).cast(),
                    plan.recv_counts[peer],
                    sys::ncclDataType_t::ncclUint64,
                    peer as c_int,
                    comm.as_raw(),
                    nccl_stream(&stream),
                )
                .check("ncclRecv")?;
            }
        }
        Ok(())
    });
    // NOTE: the group is closed also after a failed post, or NCCL would keep
    // this thread in group mode.
    // SAFETY: closes the group opened above.
    let launched = unsafe { sys::ncclGroupEnd() }.check("ncclGroupEnd");
    posted.context("Step 7: post the sends and receives")?;
    launched.context("Step 7: launch the exchange")?;
    stream
        .synchronize()
        .context("Step 7: wait for the exchange")?;
    ctx.println_root("AlltoAllV completed successfully");

    // Step 8: Verify every block: its source, its offset, its count, and every element in it.
    let mut received = vec![0u64; plan.recv_capacity];
    recv.download(&mut received, &stream)
        .context("Step 8: copy the result to the host")?;
    let received: Vec<Element> = received.into_iter().map(Element).collect();
    let mut report = Vec::new();
    let mut checked = Ok(());
    for source in 0..size {
        let (start, count) = (plan.recv_displs[source], plan.recv_counts[source]);
        report.push(format!(
            "  Rank {rank} received from rank {source}: {count} elements at offset {start}"
        ));
        let block = &received[start..start + count];
        checked = checked.and_then(|()| {
            check_all(&format!("block from rank {source}"), block, |i| {
                Element::new(source, rank, i)
            })
        });
    }
    let tail = &received[plan.recv_total()..];
    checked = checked
        .and_then(|()| check_all("space after the last block", tail, |_| Element(UNTOUCHED)));
    ctx.println_root("Verification:");
    ctx.println_ordered(report.join("\n"))?;
    ctx.all_ok(checked.context("Step 8: verify"))?;
    ctx.println_root("Results structure verified correctly");

    // Step 9: Deregister the windows, free the buffers, destroy the communicator.
    send_window
        .deregister()
        .context("Step 9: deregister the send window")?;
    recv_window
        .deregister()
        .context("Step 9: deregister the receive window")?;
    ctx.println_ordered(format!(
        "  Rank {rank} symmetric memory windows deregistered"
    ))?;
    for buffer in [send, recv, my_row, matrix_buf] {
        buffer.free().context("Step 9: free a buffer")?;
    }
    comm.destroy().context("Step 9: destroy the communicator")?;
    ctx.println_root("All resources cleaned up successfully");
    Ok(())
}

/// The windows for `base` and `ranks` fit in this GPU's free memory.
fn fits_on_gpu(base: usize, ranks: usize) -> Result<()> {
    let (send_bytes, recv_bytes) = window_bytes(base, ranks)
        .map_err(|e| anyhow!(CannotRun::new(e, "use a smaller --base-count")))?;
    let (free, _total) = cu::mem_get_info().context("cuMemGetInfo")?;
    Ok(check_fits(base, ranks, send_bytes + recv_bytes, free)?)
}

fn mib(bytes: usize) -> f64 {
    bytes as f64 / (1u64 << 20) as f64
}
