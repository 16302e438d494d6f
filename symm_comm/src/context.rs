//! The contexts of `kernels/symm_comm.cuh`, laid out byte for byte as the
//! header declares them (`#[repr(C)]`; the tests check every offset against
//! the numbers the header's `static_assert`s check on the device side), their
//! bytes as the device reads them, written field by field by one macro
//! ([`bytes_of`]), and the device memory they are written to.

use std::ffi::c_void;
use std::mem::{offset_of, size_of};

use anyhow::{Context, Result};
use cudarc::driver::{result as cu, sys as cu_sys};

/// `SymmContext::type` of the NCCL backend.
pub const BACKEND_NCCL: i32 = 0;
/// `SymmContext::type` of the NVSHMEM backend.
pub const BACKEND_NVSHMEM: i32 = 1;

/// `SymmContext`: the header every context starts with.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SymmContext {
    /// [`BACKEND_NCCL`] or [`BACKEND_NVSHMEM`].
    pub kind: i32,
    pub rank: i32,
    pub world_size: i32,
}

/// `NcclSymmContext`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct NcclSymmContext {
    pub base: SymmContext,
    /// `ncclWindow_t` over `local_buffer`.
    pub buffer_window: *mut c_void,
    /// `ncclWindow_t` for signals; unused by `symm_all_reduce` (NULL here).
    pub signal_window: *mut c_void,
    /// Device address of a copy of the `ncclDevComm`.
    pub dev_comm: u64,
    /// This rank's address of the window's first byte.
    pub local_buffer: u64,
    pub buffer_size: u64,
    pub device_idx: i32,
    pub reserved: i32,
    /// Device address of two zeroed words for the grid barrier.
    pub grid_sync: u64,
}

/// `NvshmemSymmContext`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct NvshmemSymmContext {
    pub base: SymmContext,
    /// A symmetric address from `nvshmem_malloc`.
    pub local_buffer: u64,
    pub buffer_size: u64,
    pub device_idx: i32,
    pub reserved: i32,
    /// Where the context's bytes start, counted from `local_buffer`.
    pub offset: u64,
    pub grid_sync: u64,
}

/// A context as the device reads it: its bytes, written field by field at
/// the header's offsets, the padding between them zero.
///
/// NOTE: not a copy of the struct's memory: both contexts have four bytes
/// of padding after their 12-byte `SymmContext`, and reading padding as
/// bytes is undefined behaviour in Rust (it need not hold any value).
pub trait DeviceBytesOf: Sized {
    /// Writes this value's bytes at `at` of `out`.
    fn put_into(&self, out: &mut [u8], at: usize);

    /// This value's bytes, padding zero.
    fn device_bytes(&self) -> Vec<u8> {
        let mut out = vec![0u8; size_of::<Self>()];
        self.put_into(&mut out, 0);
        out
    }
}

/// The bytes of a context, to copy to the device.
pub fn bytes_of<T: DeviceBytesOf>(value: &T) -> Vec<u8> {
    value.device_bytes()
}

impl DeviceBytesOf for i32 {
    fn put_into(&self, out: &mut [u8], at: usize) {
        out[at..at + 4].copy_from_slice(&self.to_ne_bytes());
    }
}

impl DeviceBytesOf for u64 {
    fn put_into(&self, out: &mut [u8], at: usize) {
        out[at..at + 8].copy_from_slice(&self.to_ne_bytes());
    }
}

impl DeviceBytesOf for *mut c_void {
    fn put_into(&self, out: &mut [u8], at: usize) {
        (*self as usize as u64).put_into(out, at);
    }
}

/// `DeviceBytesOf` for a struct: each field at its `offset_of!`. The struct
/// pattern names every field without `..`, so a field added to the struct
/// and not listed here does not compile.
macro_rules! device_bytes_by_field {
    ($type:ident { $($field:ident),+ $(,)? }) => {
        impl DeviceBytesOf for $type {
            fn put_into(&self, out: &mut [u8], at: usize) {
                let $type { $($field),+ } = self;
                $($field.put_into(out, at + offset_of!($type, $field));)+
            }
        }
    };
}

device_bytes_by_field!(SymmContext {
    kind,
    rank,
    world_size
});
device_bytes_by_field!(NcclSymmContext {
    base,
    buffer_window,
    signal_window,
    dev_comm,
    local_buffer,
    buffer_size,
    device_idx,
    reserved,
    grid_sync,
});
device_bytes_by_field!(NvshmemSymmContext {
    base,
    local_buffer,
    buffer_size,
    device_idx,
    reserved,
    offset,
    grid_sync,
});

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

    /// Copies the device bytes at `offset` into `out`.
    pub fn read_at(&self, offset: usize, out: &mut [u8]) -> Result<()> {
        anyhow::ensure!(offset + out.len() <= self.len, "read past the end");
        // SAFETY: bounds checked above.
        unsafe { cu::memcpy_dtoh_sync(out, self.ptr + offset as u64) }.context("cuMemcpyDtoH")
    }

    /// Overwrites the bytes at `offset` with `data`.
    pub fn write_at(&self, offset: usize, data: &[u8]) -> Result<()> {
        anyhow::ensure!(offset + data.len() <= self.len, "write past the end");
        // SAFETY: bounds checked above.
        unsafe { cu::memcpy_htod_sync(self.ptr + offset as u64, data) }.context("cuMemcpyHtoD")?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::mem::MaybeUninit;

    /// The offsets symm_comm.cuh's static_asserts check on the device side.
    #[test]
    fn the_contexts_have_the_headers_layout() {
        assert_eq!(size_of::<SymmContext>(), 12);
        assert_eq!(offset_of!(NcclSymmContext, buffer_window), 16);
        assert_eq!(offset_of!(NcclSymmContext, signal_window), 24);
        assert_eq!(offset_of!(NcclSymmContext, dev_comm), 32);
        assert_eq!(offset_of!(NcclSymmContext, local_buffer), 40);
        assert_eq!(offset_of!(NcclSymmContext, buffer_size), 48);
        assert_eq!(offset_of!(NcclSymmContext, device_idx), 56);
        assert_eq!(offset_of!(NcclSymmContext, grid_sync), 64);
        assert_eq!(size_of::<NcclSymmContext>(), 72);
        assert_eq!(offset_of!(NvshmemSymmContext, local_buffer), 16);
        assert_eq!(offset_of!(NvshmemSymmContext, buffer_size), 24);
        assert_eq!(offset_of!(NvshmemSymmContext, device_idx), 32);
        assert_eq!(offset_of!(NvshmemSymmContext, offset), 40);
        assert_eq!(offset_of!(NvshmemSymmContext, grid_sync), 48);
        assert_eq!(size_of::<NvshmemSymmContext>(), 56);
    }

    #[test]
    fn the_header_checks_the_same_offsets() {
        let header = crate::HEADER;
        for line in [
            "static_assert(__builtin_offsetof(NcclSymmContext, grid_sync) == 64",
            "static_assert(sizeof(NcclSymmContext) == 72",
            "static_assert(__builtin_offsetof(NvshmemSymmContext, offset) == 40",
            "static_assert(sizeof(NvshmemSymmContext) == 56",
        ] {
            assert!(header.contains(line), "symm_comm.cuh lacks {line}");
        }
    }

    /// A context whose padding holds 0xAA (as a stack slot may), made
    /// field by field: its device bytes hold every field where the header
    /// puts it, and zero in the padding, which is never read.
    #[test]
    fn the_device_bytes_are_the_fields_and_zero_padding() {
        let mut slot = MaybeUninit::<NcclSymmContext>::uninit();
        let p = slot.as_mut_ptr();
        // SAFETY: `p` is valid for writes of the struct; every field is
        // written before the reference is made (padding may stay as it is).
        let context = unsafe {
            p.cast::<u8>()
                .write_bytes(0xAA, size_of::<NcclSymmContext>());
            std::ptr::addr_of_mut!((*p).base).write(SymmContext {
                kind: BACKEND_NCCL,
                rank: 3,
                world_size: 8,
            });
            std::ptr::addr_of_mut!((*p).buffer_window).write(0x1111usize as *mut c_void);
            std::ptr::addr_of_mut!((*p).signal_window).write(std::ptr::null_mut());
            std::ptr::addr_of_mut!((*p).dev_comm).write(0x2222);
            std::ptr::addr_of_mut!((*p).local_buffer).write(0x3333);
            std::ptr::addr_of_mut!((*p).buffer_size).write(0x4444);
            std::ptr::addr_of_mut!((*p).device_idx).write(5);
            std::ptr::addr_of_mut!((*p).reserved).write(0);
            std::ptr::addr_of_mut!((*p).grid_sync).write(0x6666);
            &*p
        };
        let bytes = bytes_of(context);
        assert_eq!(bytes.len(), 72);
        let word = |at: usize| u64::from_ne_bytes(bytes[at..at + 8].try_into().unwrap());
        let int = |at: usize| i32::from_ne_bytes(bytes[at..at + 4].try_into().unwrap());
        assert_eq!((int(0), int(4), int(8)), (BACKEND_NCCL, 3, 8));
        assert_eq!(&bytes[12..16], &[0; 4], "padding");
        assert_eq!(
            [word(16), word(24), word(32), word(40), word(48), word(64)],
            [0x1111, 0, 0x2222, 0x3333, 0x4444, 0x6666]
        );
        assert_eq!((int(56), int(60)), (5, 0));

        let nvshmem = NvshmemSymmContext {
            base: SymmContext {
                kind: BACKEND_NVSHMEM,
                rank: 1,
                world_size: 2,
            },
            local_buffer: 0x10,
            buffer_size: 0x20,
            device_idx: 3,
            reserved: 0,
            offset: 0x40,
            grid_sync: 0x50,
        };
        let bytes = bytes_of(&nvshmem);
        let word = |at: usize| u64::from_ne_bytes(bytes[at..at + 8].try_into().unwrap());
        assert_eq!(bytes.len(), 56);
        assert_eq!(&bytes[12..16], &[0; 4], "padding");
        assert_eq!(
            [word(16), word(24), word(40), word(48)],
            [0x10, 0x20, 0x40, 0x50]
        );
    }
}
