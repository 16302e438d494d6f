//! The NCCL objects lessons 01 and 02 teach how to make, one call each, for
//! the programs that build on them.
//!
//! Lessons 01 and 02 make these calls in their own `main.rs` (Steps 2 to 4),
//! where the README walks through them. Lessons 03 and 05 and the benchmarks
//! need the same objects but are about something else (an alltoallv, a
//! device kernel, a measurement), so they take them from here.

use std::ffi::c_int;
use std::ptr;

use anyhow::{Context, Result};

use crate::nccl::{
    comm_config, share_unique_id, sys, Communicator, NcclBuffer, NcclCheck, Registration, Window,
    NCCL_WIN_COLL_SYMMETRIC,
};
use crate::RankContext;

/// `ncclGetUniqueId` on rank 0, shared, then `ncclCommInitRankConfig` on
/// every rank, with [`comm_config`] (NCCL's defaults, but for ranks that
/// share a GPU).
pub fn communicator(ctx: &RankContext) -> Result<Communicator> {
    let mut id = sys::ncclUniqueId { internal: [0; 128] };
    if ctx.is_root() {
        // SAFETY: writes the 128-byte id.
        unsafe { sys::ncclGetUniqueId(&mut id) }.check("ncclGetUniqueId")?;
    }
    share_unique_id(ctx, &mut id)?;
    let mut raw = ptr::null_mut();
    let mut config = comm_config(ctx);
    let (size, rank) = (ctx.size() as c_int, ctx.rank() as c_int);
    // SAFETY: `raw` receives the new communicator; every rank passes the same
    // id; NCCL reads the config during the call.
    unsafe { sys::ncclCommInitRankConfig(&mut raw, size, id, rank, &mut config) }
        .check("ncclCommInitRankConfig")?;
    // SAFETY: `raw` is the communicator just made.
    Ok(unsafe { Communicator::adopt(raw) })
}

/// `ncclMemAlloc(&ptr, bytes)` on the current device.
pub fn buffer(bytes: usize) -> Result<NcclBuffer> {
    let mut ptr = ptr::null_mut();
    // SAFETY: `ptr` receives the allocation.
    unsafe { sys::ncclMemAlloc(&mut ptr, bytes) }
        .check("ncclMemAlloc")
        .with_context(|| format!("allocate {bytes} bytes"))?;
    // SAFETY: `ptr` holds `bytes` bytes from ncclMemAlloc.
    Ok(unsafe { NcclBuffer::adopt(ptr, bytes) })
}

/// `ncclCommRegister(comm, buffer, size, &handle)`.
pub fn register<'a>(comm: &'a Communicator, buffer: &'a NcclBuffer) -> Result<Registration<'a>> {
    let mut handle = ptr::null_mut();
    // SAFETY: the buffer and communicator outlive the registration.
    unsafe { sys::ncclCommRegister(comm.as_raw(), buffer.as_ptr(), buffer.bytes(), &mut handle) }
        .check("ncclCommRegister")?;
    // SAFETY: `handle` is the registration just made on `comm` for `buffer`.
    Ok(unsafe { Registration::adopt(comm, buffer, handle) })
}

/// `ncclCommWindowRegister(comm, buffer, size, &win, NCCL_WIN_COLL_SYMMETRIC)`.
pub fn window<'a>(comm: &'a Communicator, buffer: &'a NcclBuffer) -> Result<Window<'a>> {
    let mut raw = ptr::null_mut();
    // SAFETY: the buffer and communicator outlive the window.
    unsafe {
        sys::ncclCommWindowRegister(
            comm.as_raw(),
            buffer.as_ptr(),
            buffer.bytes(),
            &mut raw,
            NCCL_WIN_COLL_SYMMETRIC,
        )
    }
    .check("ncclCommWindowRegister")?;
    // SAFETY: `raw` is NULL or the window just made on `comm` for `buffer`.
    unsafe { Window::adopt(comm, buffer, raw) }
}
