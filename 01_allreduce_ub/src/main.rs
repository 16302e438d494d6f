//! # Lesson 01: AllReduce on registered user buffers
//!
//! Allocates a send and a receive buffer with `ncclMemAlloc`, registers both
//! with the communicator (`ncclCommRegister`), and sums one float per element
//! across all ranks with `ncclAllReduce`.
//!
//! Why it matters: without registration NCCL copies user data through its own
//! internal buffers. A registered buffer can be read and written in place
//! (zero-copy), and the registration cost is paid once instead of per call,
//! which is what iterative programs (training loops) want.
//!
//! Run it:
//!
//! ```text
//! cargo run --release --bin 01_allreduce_ub               # one thread per visible GPU
//! NTHREADS=2 cargo run --release --bin 01_allreduce_ub    # two GPUs
//! cargo build --release --features mpi
//! mpirun -np 2 target/release/01_allreduce_ub             # one process per GPU
//! ```
//!
//! Left out on purpose: timing (registration pays off over many calls, and
//! lesson 03 shows how to measure), and `cudaMalloc` buffers, which
//! `ncclCommRegister` only accepts with `NCCL_LEGACY_CUDA_REGISTER=1`.

use std::ffi::c_int;
use std::process::ExitCode;
use std::ptr;

use anyhow::{Context, Result};
use common::nccl::{
    comm_config, nccl_stream, share_unique_id, sys, Communicator, NcclBuffer, NcclCheck,
    Registration,
};
use common::verify::check_all;
use common::{Lesson, NcclVersion, Needs, NoArgs, RankContext};
use cudarc::driver::CudaContext;

/// Elements per buffer: 1M floats (4 MiB), as in NCCL's example.
const COUNT: usize = 1024 * 1024;

const LESSON: Lesson = Lesson {
    name: "01_allreduce_ub",
    about: "AllReduce on ncclMemAlloc buffers registered with ncclCommRegister",
    needs: Needs::GpuAndNccl {
        min: NcclVersion::new(2, 19, 0),
        feature: "ncclMemAlloc and ncclCommRegister",
    },
    tool: None,
};

fn main() -> ExitCode {
    common::run(&LESSON, allreduce_ub)
}

/// Runs on every rank at once (a thread or an MPI process each).
fn allreduce_ub(ctx: &RankContext, _: &NoArgs) -> Result<()> {
    let (rank, size) = (ctx.rank(), ctx.size());
    ctx.println_root(format!("Starting AllReduce example with {size} ranks"));

    // Step 1: Bind this rank's GPU and create a stream.
    // cudarc makes the GPU's primary context current on this thread; NCCL and
    // ncclMemAlloc work on whatever device is current.
    let gpu = CudaContext::new(ctx.device()).context("Step 1: bind the GPU")?;
    let stream = gpu.new_stream().context("Step 1: create a stream")?;

    // Step 2: Create the communicator from a unique id that rank 0 shares.
    // Rank 0 asks NCCL for an id (ncclGetUniqueId); the launcher copies its
    // 128 bytes to every rank (shared memory, or MPI_Bcast under mpirun).
    // ncclCommInitRankConfig returns only when all ranks have called it with it.
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
    // SAFETY: the communicator just made; the guard destroys it (Step 8).
    let comm = unsafe { Communicator::adopt(raw_comm) };
    ctx.println_ordered(format!(
        "  Rank {rank} communicator initialized using device {}",
        ctx.device()
    ))?;

    // Step 3: Allocate the send and receive buffers with ncclMemAlloc.
    // ncclMemAlloc uses CUDA's virtual-memory API (lesson 04), which is what
    // NCCL can register and map into peers; plain cudaMalloc memory is not.
    let bytes = COUNT * std::mem::size_of::<f32>();
    ctx.println_root("User Buffer allocation:");
    ctx.println_ordered(format!(
        "  Rank {rank} allocating {:.2} MB per buffer",
        bytes as f64 / (1 << 20) as f64
    ))?;
    let (mut send_ptr, mut recv_ptr) = (ptr::null_mut(), ptr::null_mut());
    // SAFETY: each call writes one device pointer, which a guard then owns
    // and frees with ncclMemFree (Step 8).
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

    // Step 4: Register both buffers with the communicator (ncclCommRegister).
    // NOTE: if any rank passes registered buffers to a collective, every rank
    // must; so every rank registers, in the same order. A thread that drives
    // several communicators would wrap these calls in ncclGroupStart/End.
    let (mut send_handle, mut recv_handle) = (ptr::null_mut(), ptr::null_mut());
    // SAFETY: the buffers and the communicator outlive the registrations,
    // whose guards borrow them and deregister them (Step 8).
    let (send_registration, recv_registration) = unsafe {
        sys::ncclCommRegister(comm.as_raw(), send.as_ptr(), bytes, &mut send_handle)
            .check("ncclCommRegister")
            .context("Step 4: register the send buffer")?;
        let send_registration = Registration::adopt(&comm, &send, send_handle);
        sys::ncclCommRegister(comm.as_raw(), recv.as_ptr(), bytes, &mut recv_handle)
            .check("ncclCommRegister")
            .context("Step 4: register the receive buffer")?;
        (
            send_registration,
            Registration::adopt(&comm, &recv, recv_handle),
        )
    };

    // Step 5: Fill the send buffer with this rank's id.
    send.upload(&vec![rank as f32; COUNT], &stream)
        .context("Step 5: fill the send buffer")?;
    ctx.println_ordered(format!("  Rank {rank} data initialized (value: {rank})"))?;

    // Step 6: Sum the send buffers of all ranks into every receive buffer (ncclAllReduce).
    // The call only enqueues the work on the stream; the synchronize waits for it.
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

    // Step 8: Deregister, free and destroy, in that order.
    // NOTE: the registrations borrow the buffers and the communicator, so the
    // compiler refuses any other order. On an error path the guards' Drop
    // makes the same calls (and aborts the communicator instead).
    send_registration
        .deregister()
        .context("Step 8: deregister the send buffer")?;
    recv_registration
        .deregister()
        .context("Step 8: deregister the receive buffer")?;
    ctx.println_ordered(format!("  Rank {rank} buffers deregistered"))?;
    send.free().context("Step 8: free the send buffer")?;
    recv.free().context("Step 8: free the receive buffer")?;
    comm.destroy().context("Step 8: destroy the communicator")?;
    ctx.println_root("All resources cleaned up successfully");
    Ok(())
}
