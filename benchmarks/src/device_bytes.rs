//! The benchmark's device memory: `cuMemAlloc`, and synchronous writes that
//! end with `cuCtxSynchronize` ([`settled`]), moved here from `symm_comm`.
//! The programs themselves use cudarc's stream-ordered `CudaSlice`
//! (`symm_comm::context::address`). The benchmark still uses this (its
//! conversion is not done yet): in thread mode, ranks that share a GPU share
//! its CUDA context, so each of its writes is followed by `ctx.barrier()`
//! before any rank launches (`bench`'s trials, the return-code cases), or the
//! context-wide wait could meet a peer's kernel that waits for this rank.

use anyhow::{Context, Result};
use cudarc::driver::{result as cu, sys as cu_sys};

/// Device memory from `cuMemAlloc`, freed on drop.
pub struct DeviceBytes {
    ptr: cu_sys::CUdeviceptr,
    len: usize,
}

/// Waits until every write the driver has taken is in device memory.
///
/// NOTE: `cuMemsetD8` and `cuMemcpyHtoD` from pageable memory return before
/// their device writes are done, and they run on the legacy default stream,
/// which the lessons' streams (cudarc makes them non-blocking) do not wait
/// for. A kernel launched next on such a stream could run before, or under,
/// the write: call 17 saw poisoned outputs left over the fused kernel's from
/// 32 MiB up, where the memset took longer than the launch. So every write
/// here ends with `cuCtxSynchronize`.
pub fn settled() -> Result<()> {
    cu::ctx::synchronize().context("cuCtxSynchronize (let the writes land)")
}

impl DeviceBytes {
    /// `len` bytes of device memory, zeroed.
    pub fn zeroed(len: usize) -> Result<Self> {
        // SAFETY: a context is current (the caller bound its GPU).
        let ptr = unsafe { cu::malloc_sync(len.max(1)) }.context("cuMemAlloc")?;
        let bytes = Self { ptr, len };
        // SAFETY: `ptr` holds `len` bytes.
        unsafe { cu::memset_d8_sync(ptr, 0, len) }.context("cuMemsetD8")?;
        settled()?;
        Ok(bytes)
    }

    /// Device memory holding a copy of `data`.
    pub fn from_slice<T: Copy>(data: &[T]) -> Result<Self> {
        let bytes = Self::zeroed(std::mem::size_of_val(data))?;
        // SAFETY: the allocation holds exactly size_of_val(data) bytes.
        unsafe { cu::memcpy_htod_sync(bytes.ptr, data) }.context("cuMemcpyHtoD")?;
        settled()?;
        Ok(bytes)
    }

    /// Copies the device bytes into `out` (`out` must not be larger).
    pub fn read<T: Copy>(&self, out: &mut [T]) -> Result<()> {
        anyhow::ensure!(std::mem::size_of_val(out) <= self.len, "read past the end");
        // SAFETY: bounds checked above.
        unsafe { cu::memcpy_dtoh_sync(out, self.ptr) }.context("cuMemcpyDtoH")
    }

    /// Overwrites the first bytes with `data`.
    pub fn write<T: Copy>(&self, data: &[T]) -> Result<()> {
        anyhow::ensure!(
            std::mem::size_of_val(data) <= self.len,
            "write past the end"
        );
        // SAFETY: bounds checked above.
        unsafe { cu::memcpy_htod_sync(self.ptr, data) }.context("cuMemcpyHtoD")?;
        settled()
    }

    /// The device address.
    pub fn address(&self) -> u64 {
        self.ptr
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
}

impl Drop for DeviceBytes {
    fn drop(&mut self) {
        // SAFETY: allocated by cuMemAlloc and not used after this.
        if let Err(err) = unsafe { cu::free_sync(self.ptr) } {
            eprintln!("warning: cleanup: cuMemFree: {err}");
        }
    }
}
