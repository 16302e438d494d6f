//! # Lesson 02: AllReduce over symmetric memory windows
//!
//! Lesson 01 again, with one change and its teardown: the buffers are
//! registered as *symmetric windows* (`ncclCommWindowRegister` with
//! `NCCL_WIN_COLL_SYMMETRIC`) instead of with `ncclCommRegister` (Step 4), and
//! deregistered with `ncclCommWindowDeregister` (Step 9); Step 8 finds out
//! from NCCL's own log whether it ran its symmetric kernel on them.
//!
//! Why it matters: a window registration is collective. Every rank registers
//! a buffer of the same size, and NCCL maps all of them into one address range
//! at the same offset on every GPU. A kernel on any GPU can then reach a
//! peer's buffer with plain loads and stores, without exchanging addresses or
//! staging through NCCL's own buffers. On NVLink systems NCCL 2.27+ uses that
//! for dedicated *symmetric kernels* for AllReduce, AllGather and
//! ReduceScatter, which are faster for small and medium messages.
//!
//! Run it:
//!
//! ```text
//! cargo run --release --bin 02_allreduce_sm               # one thread per visible GPU
//! NTHREADS=2 cargo run --release --bin 02_allreduce_sm    # two GPUs
//! cargo build --release --features mpi
//! mpirun -np 2 target/release/02_allreduce_sm             # one process per GPU
//! NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,TUNING NTHREADS=2 \
//!     cargo run --release --bin 02_allreduce_sm           # see NCCL pick the symmetric kernel
//! ```
//!
//! Left out on purpose: writing a kernel against the windows yourself
//! (lesson 05), and how NCCL maps the peers' memory (lesson 04).

use std::ffi::c_int;
use std::process::ExitCode;
use std::ptr;

use kernel_choice::NcclLog;

use anyhow::{Context, Result};
use common::nccl::{
    comm_config, nccl_stream, share_unique_id, sys, Communicator, NcclBuffer, NcclCheck, Window,
    NCCL_WIN_COLL_SYMMETRIC,
};
use common::verify::check_all;
use common::{Lesson, NcclVersion, Needs, NoArgs, RankContext};
use cudarc::driver::CudaContext;

mod kernel_choice;

/// Elements per buffer: 1M floats (4 MiB), as in NCCL's example.
const COUNT: usize = 1024 * 1024;

const LESSON: Lesson = Lesson {
    name: "02_allreduce_sm",
    about: "AllReduce over symmetric memory windows (ncclCommWindowRegister)",
    needs: Needs::GpuAndNccl {
        min: NcclVersion::new(2, 27, 0),
        feature: "ncclCommWindowRegister",
    },
    tool: None,
};

fn main() -> ExitCode {
    // Before NCCL starts: its log of which kernel each collective ran goes to
    // a private file, which Step 8 reads (unless you set NCCL_DEBUG yourself).
    let nccl_log = NcclLog::capture();
    common::run(&LESSON, |ctx, _: &NoArgs| allreduce_sm(ctx, &nccl_log))
}

/// Runs on every rank at once (a thread or an MPI process each).
fn allreduce_sm(ctx: &RankContext, nccl_log: &NcclLog) -> Result<()> {
    let (rank, size) = (ctx.rank(), ctx.size());
    ctx.println_root(format!("Starting AllReduce example with {size} ranks"));

    // Step 1: Bind this rank's GPU and create a stream.
    let gpu = CudaContext::new(ctx.device()).context("Step 1: bind the GPU")?;
    let stream = gpu.new_stream().context("Step 1: create a stream")?;

    // Step 2: Create the communicator from a unique id that rank 0 shares.
    // Whether this communicator can use symmetric memory is decided here: one
    // node, every GPU pair reachable by CUDA P2P, cuMem on, NCCL_WIN_ENABLE
    // not 0. NCCL 2.28 decides it silently; Step 8 shows what it decided.
    let mut id = sys::ncclUniqueId { internal: [0; 128] };
    if ctx.is_root() {
        // SAFETY: writes the 128-byte id.
        unsafe { sys::ncclGetUniqueId(&mut id) }
            .check("ncclGetUniqueId")
            .context("Step 2: create the unique id")?;
    }
    share_unique_id(ctx, &mut id).context("Step 2: share the unique id")?;
    // NOTE: the config is NCCL_CONFIG_INITIALIZER's defaults, except when
    // ranks share a GPU (NCCL_MULTI_RANK_GPU_ENABLE=1): then maxCTAs caps
    // NCCL's blocks per rank at its share of the GPU, or the ranks' kernels
    // could not all be resident at once and would wait for each other.
    let mut config = comm_config(ctx);
    let mut raw_comm = ptr::null_mut();
    // SAFETY: `raw_comm` receives the communicator; every rank passes the same id.
    unsafe {
        sys::ncclCommInitRankConfig(&mut raw_comm, size as c_int, id, rank as c_int, &mut config)
    }
    .check("ncclCommInitRankConfig")
    .context("Step 2: create the communicator")?;
    // SAFETY: the communicator just made; the guard destroys it (Step 9).
    let comm = unsafe { Communicator::adopt(raw_comm) };
    ctx.println_ordered(format!(
        "  Rank {rank} communicator initialized using device {}",
        ctx.device()
    ))?;

    // Step 3: Allocate the send and receive buffers with ncclMemAlloc.
    // Windows need CUDA virtual-memory allocations: ncclMemAlloc makes them.
    let bytes = COUNT * std::mem::size_of::<f32>();
    ctx.println_root("Symmetric Memory allocation");
    ctx.println_ordered(format!(
        "  Rank {rank} allocating {:.2} MB per buffer",
        bytes as f64 / (1 << 20) as f64
    ))?;
    let (mut send_ptr, mut recv_ptr) = (ptr::null_mut(), ptr::null_mut());
    // SAFETY: each call writes one device pointer, which a guard then owns
    // and frees with ncclMemFree (Step 9).
    let (send, recv) = unsafe {
        sys::ncclMemAlloc(&mut send_ptr, bytes)
            .check("ncclMemAlloc")
            .context("Step 3: allocate the send buffer")?;
        let send = NcclBuffer::adopt(send_ptr, bytes);
        sys::ncclMemAlloc(&mut recv_ptr, bytes)
            .check("ncclMemAlloc")
            .context("Step 3: allocate the receive buffer")?;
        (send, NcclBuffer::adopt(recv_ptr, bytes))
    };

    // Step 4: Register both buffers as symmetric windows (ncclCommWindowRegister).
    // NOTE: collective: every rank registers the same sizes in the same order,
    // and the call returns when all have. A thread that drives several
    // communicators must wrap the calls in ncclGroupStart/End or it deadlocks
    // waiting for itself. A NULL window means no symmetric support, and
    // Window::adopt turns it into a "cannot run here" error that says why.
    // NCCL 2.28 may instead return a usable window: Step 8 tells the two apart.
    let (mut send_raw, mut recv_raw) = (ptr::null_mut(), ptr::null_mut());
    // SAFETY: the buffers and the communicator outlive the windows, whose
    // guards borrow them and deregister them (Step 9).
    let (send_window, recv_window) = unsafe {
        sys::ncclCommWindowRegister(
            comm.as_raw(),
            send.as_ptr(),
            bytes,
            &mut send_raw,
            NCCL_WIN_COLL_SYMMETRIC,
        )
        .check("ncclCommWindowRegister")
        .context("Step 4: register the send window")?;
        let send_window =
            Window::adopt(&comm, &send, send_raw).context("Step 4: the send window")?;
        sys::ncclCommWindowRegister(
            comm.as_raw(),
            recv.as_ptr(),
            bytes,
            &mut recv_raw,
            NCCL_WIN_COLL_SYMMETRIC,
        )
        .check("ncclCommWindowRegister")
        .context("Step 4: register the receive window")?;
        (
            send_window,
            Window::adopt(&comm, &recv, recv_raw).context("Step 4: the receive window")?,
        )
    };

    // Step 5: Fill the send buffer with this rank's id.
    send.upload(&vec![rank as f32; COUNT], &stream)
        .context("Step 5: fill the send buffer")?;
    ctx.println_ordered(format!("  Rank {rank} data initialized (value: {rank})"))?;

    // Step 6: Sum the send buffers of all ranks into every receive buffer (ncclAllReduce).
    // The call is the same as in lesson 01: NCCL finds the windows from the
    // pointers. Both buffers are windows, float32 and sum, so on NVLink NCCL
    // may run a symmetric kernel (NCCL_DEBUG=INFO shows "[Symmetric]").
    ctx.println_root(format!(
        "Starting AllReduce with {COUNT} elements ({} MB)",
        bytes >> 20
    ));
    // SAFETY: both buffers hold COUNT floats and stay alive until the stream is synchronized.
    unsafe {
        sys::ncclAllReduce(
            send.as_ptr(),
            recv.as_ptr(),
            COUNT,
            sys::ncclDataType_t::ncclFloat32,
            sys::ncclRedOp_t::ncclSum,
            comm.as_raw(),
            nccl_stream(&stream),
        )
    }
    .check("ncclAllReduce")
    .context("Step 6: allreduce")?;
    stream
        .synchronize()
        .context("Step 6: wait for the allreduce")?;
    ctx.println_root("AllReduce completed successfully");

    // Step 7: Verify every element on every rank against 0 + 1 + ... + (n-1).
    let expected = (size * (size - 1) / 2) as f32;
    let mut result = vec![0f32; COUNT];
    recv.download(&mut result, &stream)
        .context("Step 7: copy the result to the host")?;
    ctx.println_root(format!(
        "Verification - Expected: {expected:.1}, Got: {:.1}",
        result[0]
    ));
    ctx.all_ok(check_all("receive buffer", &result, |_| expected).context("Step 7: verify"))?;
    ctx.println_root("Results verified correctly");

    // Step 8: Find out whether NCCL ran its symmetric kernel.
    // NOTE: registering windows does not make NCCL use them. NCCL 2.28 returns
    // a usable window even where it has no symmetric support, and the
    // AllReduce above then ran an ordinary ring kernel, correct but not what
    // this lesson is about. NCCL logs its choice on rank 0 only; the choice is
    // the communicator's, the same on every rank. From 2.29,
    // ncclCommQueryProperties also reports the communicator's support.
    let summary = if ctx.is_root() {
        let choice = nccl_log
            .allreduce_choice(bytes, size)
            .context("Step 8: read NCCL's log")?;
        ctx.println_root(format!("Kernel NCCL ran for this AllReduce: {choice}"));
        let properties = kernel_choice::symmetric_support(comm.as_raw())
            .context("Step 8: ask NCCL for the communicator's properties")?
            .map_or(
                "not in this NCCL (2.29 added it)".to_string(),
                |supported| format!("deviceApiSupport = {supported}"),
            );
        ctx.println_root(format!("ncclCommQueryProperties: {properties}"));
        choice.summary()
    } else {
        ""
    };

    // Step 9: Deregister the windows, then free the buffers, then destroy the communicator.
    // NOTE: deregistration is collective too, and must not race with
    // collectives on the same communicator from another thread.
    send_window
        .deregister()
        .context("Step 9: deregister the send window")?;
    recv_window
        .deregister()
        .context("Step 9: deregister the receive window")?;
    ctx.println_ordered(format!(
        "  Rank {rank} symmetric memory windows deregistered"
    ))?;
    send.free().context("Step 9: free the send buffer")?;
    recv.free().context("Step 9: free the receive buffer")?;
    comm.destroy().context("Step 9: destroy the communicator")?;
    ctx.println_root("All resources cleaned up successfully");
    ctx.println_root(summary);
    Ok(())
}
