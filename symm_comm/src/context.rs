//! The contexts of `kernels/symm_comm.cuh`, laid out byte for byte as the
//! header declares them (`#[repr(C)]`; the tests check every offset against
//! the numbers the header's `static_assert`s check on the device side), their
//! bytes as the device reads them, written field by field by one macro
//! ([`bytes_of`]), and the device address of the memory they are written
//! to ([`address`]: a `CudaSlice` that cudarc copies on the rank's stream).

use std::ffi::c_void;
use std::mem::{offset_of, size_of};

use cudarc::driver::{CudaSlice, DevicePtr};

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
    /// NULL, or the `ncclWindow_t` of the one-shot's staging: a window of
    /// [`crate::codes::STAGING_BYTES`], zeroed, that every rank registered
    /// and that this context alone uses. With it, `symm_all_reduce` takes
    /// regions up to [`crate::codes::ONE_SHOT_MAX_BYTES`] in one exchange
    /// with no barrier round between the ranks.
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

/// The device address of `slice`, for a kernel argument or a context field.
///
/// NOTE: cudarc orders a slice's uses across streams with events, recorded
/// when the guard `device_ptr` returns is dropped; it is dropped here at
/// once, so use the address only on the slice's own stream (every program
/// here does: one stream per rank), where stream order alone puts the kernel
/// after the uploads and the frees after the kernel.
pub fn address<T>(slice: &CudaSlice<T>) -> u64 {
    let (address, _record) = slice.device_ptr(slice.stream());
    address
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
