//! CUDA's virtual memory management (VMM) calls in small RAII guards.
//!
//! `ncclMemAlloc` is four driver calls, and `ncclMemFree` their inverses in
//! reverse order. Each guard holds what one call made:
//!
//! | guard | made by | released by |
//! |---|---|---|
//! | [`Allocation`] | `cuMemCreate`, or `cuMemImportFromShareableHandle` for a peer's | `cuMemRelease` |
//! | [`AddressRange`] | `cuMemAddressReserve` | `cuMemAddressFree` |
//! | [`Mapping`] | `cuMemMap` (takes the range and the allocation) | `cuMemUnmap` (gives them back) |
//! | [`SharedFd`] | `cuMemExportToShareableHandle`, or a peer | `close` |
//!
//! The order is in the types: a [`Mapping`] owns its range and its allocation
//! and hands them back only from [`Mapping::unmap`], so nothing can free the
//! addresses or release the memory while they are still mapped. Each guard has
//! an explicit release method that returns the driver's error, used on the
//! success path; its `Drop` makes the same call when an error path skipped it
//! (a `Mapping` drops as: unmap, free the range, release the allocation).
//! `cuMemSetAccess`, which has nothing to undo, stays in `main.rs`.

use std::ffi::{c_int, c_void};
use std::fmt;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, IntoRawFd, OwnedFd};

#[cfg(not(test))]
use cudarc::driver::sys;
// The unit tests swap the driver for a recorder with the same signatures, so
// they check the guards' real code (the order of the calls) without a GPU.
#[cfg(test)]
use fake_driver as sys;

use sys::{CUdeviceptr, CUmemAllocationProp, CUmemGenericAllocationHandle, CUresult};

/// A driver call that did not return `CUDA_SUCCESS`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CuError {
    pub call: &'static str,
    pub code: CUresult,
}

impl fmt::Display for CuError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The variant's name (CUDA_ERROR_OUT_OF_MEMORY, ...) says what went wrong.
        write!(f, "{} returned {:?}", self.call, self.code)
    }
}

impl std::error::Error for CuError {}

/// Turns a `CUresult` into a `Result`.
pub trait CuCheck {
    /// `Ok` for `CUDA_SUCCESS`; otherwise a [`CuError`] naming `call`.
    fn check(self, call: &'static str) -> Result<(), CuError>;
}

impl CuCheck for CUresult {
    fn check(self, call: &'static str) -> Result<(), CuError> {
        if self == CUresult::CUDA_SUCCESS {
            Ok(())
        } else {
            Err(CuError { call, code: self })
        }
    }
}

/// `size` rounded up to a multiple of `granularity`; `None` if the result does
/// not fit in a `usize` or the granularity is 0. `cuMemCreate`, `cuMemMap` and
/// `cuMemAddressReserve` all refuse sizes that are not such multiples.
pub fn round_up(size: usize, granularity: usize) -> Option<usize> {
    if granularity == 0 {
        return None;
    }
    size.checked_next_multiple_of(granularity)
}

/// The least common multiple of the ranks' granularities: a size that is a
/// multiple of it suits every rank's GPU, so all ranks can allocate the same
/// size. `None` for an empty list, a 0, or an overflow. (Granularities are
/// powers of two in practice, so this is the largest of them.)
pub fn common_granularity(granularities: &[usize]) -> Option<usize> {
    fn gcd(a: usize, b: usize) -> usize {
        if b == 0 {
            a
        } else {
            gcd(b, a % b)
        }
    }
    let (&first, rest) = granularities.split_first()?;
    rest.iter()
        .try_fold(first, |lcm, &g| {
            if lcm == 0 || g == 0 {
                return None;
            }
            (lcm / gcd(lcm, g)).checked_mul(g)
        })
        .filter(|&lcm| lcm > 0)
}

/// Physical memory on one GPU, known by its allocation handle: from
/// `cuMemCreate`, or a peer's from `cuMemImportFromShareableHandle`.
pub struct Allocation {
    handle: Option<CUmemGenericAllocationHandle>,
    size: usize,
}

impl Allocation {
    /// `cuMemCreate(&handle, size, prop, 0)`: `size` bytes of physical memory
    /// where `prop` says (pinned, on one device), with no address yet.
    /// `size` must be a multiple of the granularity for `prop`.
    pub fn create(size: usize, prop: &CUmemAllocationProp) -> Result<Self, CuError> {
        let mut handle: CUmemGenericAllocationHandle = 0;
        // SAFETY: `handle` receives the new allocation; `prop` is a valid description.
        unsafe { sys::cuMemCreate(&mut handle, size, prop, 0) }.check("cuMemCreate")?;
        Ok(Self {
            handle: Some(handle),
            size,
        })
    }

    /// `cuMemImportFromShareableHandle(&handle, (void *)fd, POSIX_FILE_DESCRIPTOR)`:
    /// a handle to the allocation that `fd` stands for, made in another rank.
    ///
    /// The fd carries no size: the importer must know it (here every rank
    /// allocates the same `size`, which is what makes the memory symmetric).
    pub fn import(fd: BorrowedFd<'_>, size: usize) -> Result<Self, CuError> {
        let mut handle: CUmemGenericAllocationHandle = 0;
        // NOTE: for POSIX fds the "OS handle" is the descriptor's *value* cast
        // to a pointer, not a pointer to it (export, below, takes a pointer to
        // an int). Passing &fd compiles and fails with CUDA_ERROR_INVALID_VALUE.
        let os_handle = fd.as_raw_fd() as usize as *mut c_void;
        // SAFETY: `handle` receives the import; the driver only reads the fd,
        // which stays open for the call (and may be closed after it).
        unsafe {
            sys::cuMemImportFromShareableHandle(
                &mut handle,
                os_handle,
                sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
            )
        }
        .check("cuMemImportFromShareableHandle")?;
        Ok(Self {
            handle: Some(handle),
            size,
        })
    }

    /// The `CUmemGenericAllocationHandle` (0 once released).
    pub fn handle(&self) -> CUmemGenericAllocationHandle {
        self.handle.unwrap_or(0)
    }

    pub fn size(&self) -> usize {
        self.size
    }

    /// `cuMemRelease(handle)`: gives up this handle. The physical memory is
    /// freed once no handle and no mapping refers to it any more, in any
    /// process; so a peer's release never pulls memory from under its owner.
    pub fn release(mut self) -> Result<(), CuError> {
        match self.handle.take() {
            // SAFETY: `handle` is live and nothing maps it (a Mapping would own `self`).
            Some(handle) => unsafe { sys::cuMemRelease(handle) }.check("cuMemRelease"),
            None => Ok(()),
        }
    }

    fn released() -> Self {
        Self {
            handle: None,
            size: 0,
        }
    }
}

impl Drop for Allocation {
    fn drop(&mut self) {
        if let Some(handle) = self.handle.take() {
            // SAFETY: as in `release`.
            warn_on_error(unsafe { sys::cuMemRelease(handle) }.check("cuMemRelease"));
        }
    }
}

/// A range of this process's GPU virtual addresses from `cuMemAddressReserve`:
/// addresses only, with no memory behind them until something is mapped there.
pub struct AddressRange {
    base: CUdeviceptr,
    size: usize,
    live: bool,
}

impl AddressRange {
    /// `cuMemAddressReserve(&base, size, alignment, 0, 0)`: `size` bytes of
    /// virtual addresses, starting at a multiple of `alignment`, anywhere (no
    /// address hint, no flags).
    pub fn reserve(size: usize, alignment: usize) -> Result<Self, CuError> {
        let mut base: CUdeviceptr = 0;
        // SAFETY: `base` receives the start of the new range.
        unsafe { sys::cuMemAddressReserve(&mut base, size, alignment, 0, 0) }
            .check("cuMemAddressReserve")?;
        Ok(Self {
            base,
            size,
            live: true,
        })
    }

    pub fn base(&self) -> CUdeviceptr {
        self.base
    }

    pub fn size(&self) -> usize {
        self.size
    }

    /// `cuMemAddressFree(base, size)`: the addresses go back to the process.
    pub fn free(mut self) -> Result<(), CuError> {
        if !std::mem::replace(&mut self.live, false) {
            return Ok(());
        }
        // SAFETY: the range is live and unmapped (a Mapping would own `self`).
        unsafe { sys::cuMemAddressFree(self.base, self.size) }.check("cuMemAddressFree")
    }

    fn freed() -> Self {
        Self {
            base: 0,
            size: 0,
            live: false,
        }
    }
}

impl Drop for AddressRange {
    fn drop(&mut self) {
        if std::mem::replace(&mut self.live, false) {
            // SAFETY: as in `free`.
            warn_on_error(
                unsafe { sys::cuMemAddressFree(self.base, self.size) }.check("cuMemAddressFree"),
            );
        }
    }
}

/// An allocation mapped at the start of an address range (`cuMemMap`). It owns
/// both until [`unmap`](Self::unmap) gives them back.
pub struct Mapping {
    // Dropped in this order after `Drop::drop` unmaps: range, then allocation.
    range: AddressRange,
    allocation: Allocation,
    mapped: bool,
}

impl Mapping {
    /// `cuMemMap(range.base, allocation.size, 0, allocation.handle, 0)`: the
    /// whole allocation (offset 0) at the start of the range. The addresses
    /// exist now, but no device may touch them before `cuMemSetAccess`.
    ///
    /// On failure the range is freed and the allocation released.
    pub fn map(range: AddressRange, allocation: Allocation) -> Result<Self, CuError> {
        let mapped = if allocation.size > range.size {
            Err(CuError {
                call: "cuMemMap (allocation larger than the address range)",
                code: CUresult::CUDA_ERROR_INVALID_VALUE,
            })
        } else {
            // SAFETY: the range is reserved and unmapped; the handle is live;
            // both are owned by the Mapping from here on.
            unsafe { sys::cuMemMap(range.base, allocation.size, 0, allocation.handle(), 0) }
                .check("cuMemMap")
        };
        if let Err(err) = mapped {
            // Nothing is mapped: free the range, release the memory, in the usual order.
            drop(range);
            drop(allocation);
            return Err(err);
        }
        Ok(Self {
            range,
            allocation,
            mapped: true,
        })
    }

    /// The device address of the mapped memory.
    pub fn ptr(&self) -> CUdeviceptr {
        self.range.base
    }

    pub fn size(&self) -> usize {
        self.allocation.size
    }

    pub fn allocation(&self) -> &Allocation {
        &self.allocation
    }

    /// `cuMemUnmap(base, size)`; then the range can be freed and the
    /// allocation released, in that order.
    pub fn unmap(mut self) -> Result<(AddressRange, Allocation), CuError> {
        let parts = (
            std::mem::replace(&mut self.range, AddressRange::freed()),
            std::mem::replace(&mut self.allocation, Allocation::released()),
        );
        self.mapped = false;
        // SAFETY: the memory is mapped at `base`; every copy through it has finished.
        unsafe { sys::cuMemUnmap(parts.0.base, parts.1.size) }.check("cuMemUnmap")?;
        Ok(parts)
    }

    /// The whole teardown of one buffer: unmap, free the range, release the
    /// allocation.
    pub fn release(self) -> Result<(), CuError> {
        let (range, allocation) = self.unmap()?;
        range.free()?;
        allocation.release()
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        if std::mem::replace(&mut self.mapped, false) {
            // SAFETY: as in `unmap`; the fields drop after this: range, then allocation.
            warn_on_error(
                unsafe { sys::cuMemUnmap(self.range.base, self.allocation.size) }
                    .check("cuMemUnmap"),
            );
        }
    }
}

/// A POSIX file descriptor that stands for an allocation: exported here by
/// `cuMemExportToShareableHandle`, or received from a peer. Whoever holds it
/// can map the memory, so it is a capability: it travels only to peers.
pub struct SharedFd {
    fd: OwnedFd,
}

impl SharedFd {
    /// `cuMemExportToShareableHandle(&fd, handle, POSIX_FILE_DESCRIPTOR, 0)`.
    /// Works only if the allocation asked for this handle type in
    /// `requestedHandleTypes` when it was created.
    pub fn export(allocation: &Allocation) -> Result<Self, CuError> {
        let mut fd: c_int = -1;
        // SAFETY: for POSIX fds the driver writes an int to the pointer.
        unsafe {
            sys::cuMemExportToShareableHandle(
                (&mut fd as *mut c_int).cast::<c_void>(),
                allocation.handle(),
                sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
                0,
            )
        }
        .check("cuMemExportToShareableHandle")?;
        // SAFETY: the driver just opened `fd` for us; nobody else owns it.
        Ok(Self {
            fd: unsafe { OwnedFd::from_raw_fd(fd) },
        })
    }

    /// A descriptor a peer sent us (see `fd_channel`).
    pub fn from_peer(fd: OwnedFd) -> Self {
        Self { fd }
    }

    /// `close(fd)`, reporting its error (dropping an `OwnedFd` ignores it).
    /// Closing does not touch handles imported from the fd, nor mappings.
    pub fn close(self) -> std::io::Result<()> {
        let raw = self.fd.into_raw_fd();
        // SAFETY: we own `raw` and never use it again.
        if unsafe { libc::close(raw) } == 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error())
        }
    }
}

impl AsFd for SharedFd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

fn warn_on_error(result: Result<(), CuError>) {
    if let Err(err) = result {
        eprintln!("warning: cleanup: {err}");
    }
}

/// The driver calls this module makes, recorded instead of made. Same names
/// and signatures as `cudarc::driver::sys`.
#[cfg(test)]
#[allow(non_snake_case, clippy::missing_safety_doc)]
pub(crate) mod fake_driver {
    use std::cell::{Cell, RefCell};
    use std::ffi::{c_int, c_ulonglong, c_void};

    pub use cudarc::driver::sys::{
        CUdeviceptr, CUmemAllocationHandleType, CUmemAllocationProp, CUmemGenericAllocationHandle,
        CUresult,
    };

    thread_local! {
        static CALLS: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
        static FAIL: Cell<Option<&'static str>> = const { Cell::new(None) };
        static NEXT: Cell<u64> = const { Cell::new(1) };
    }

    /// The calls made on this thread so far, oldest first; clears the record.
    pub fn take_calls() -> Vec<String> {
        CALLS.with(|c| std::mem::take(&mut *c.borrow_mut()))
    }

    /// Makes the next call named `name` fail with CUDA_ERROR_OUT_OF_MEMORY.
    pub fn fail_next(name: &'static str) {
        FAIL.with(|f| f.set(Some(name)));
    }

    fn record(name: &'static str, text: String) -> CUresult {
        CALLS.with(|c| c.borrow_mut().push(text));
        if FAIL.with(|f| f.get()) == Some(name) {
            FAIL.with(|f| f.set(None));
            return CUresult::CUDA_ERROR_OUT_OF_MEMORY;
        }
        CUresult::CUDA_SUCCESS
    }

    fn next() -> u64 {
        NEXT.with(|n| {
            let v = n.get();
            n.set(v + 1);
            v
        })
    }

    pub unsafe fn cuMemCreate(
        handle: *mut CUmemGenericAllocationHandle,
        size: usize,
        _prop: *const CUmemAllocationProp,
        _flags: c_ulonglong,
    ) -> CUresult {
        let h = 0x100 + next();
        *handle = h;
        record("cuMemCreate", format!("cuMemCreate({size}) -> h{h:x}"))
    }

    pub unsafe fn cuMemImportFromShareableHandle(
        handle: *mut CUmemGenericAllocationHandle,
        os_handle: *mut c_void,
        _ty: CUmemAllocationHandleType,
    ) -> CUresult {
        let h = 0x100 + next();
        *handle = h;
        record(
            "cuMemImportFromShareableHandle",
            format!(
                "cuMemImportFromShareableHandle(fd {}) -> h{h:x}",
                os_handle as usize
            ),
        )
    }

    pub unsafe fn cuMemRelease(handle: CUmemGenericAllocationHandle) -> CUresult {
        record("cuMemRelease", format!("cuMemRelease(h{handle:x})"))
    }

    pub unsafe fn cuMemAddressReserve(
        ptr: *mut CUdeviceptr,
        size: usize,
        alignment: usize,
        _addr: CUdeviceptr,
        _flags: c_ulonglong,
    ) -> CUresult {
        let base = next() << 32;
        *ptr = base;
        record(
            "cuMemAddressReserve",
            format!("cuMemAddressReserve({size}, {alignment}) -> va{base:x}"),
        )
    }

    pub unsafe fn cuMemAddressFree(ptr: CUdeviceptr, size: usize) -> CUresult {
        record(
            "cuMemAddressFree",
            format!("cuMemAddressFree(va{ptr:x}, {size})"),
        )
    }

    pub unsafe fn cuMemMap(
        ptr: CUdeviceptr,
        size: usize,
        offset: usize,
        handle: CUmemGenericAllocationHandle,
        _flags: c_ulonglong,
    ) -> CUresult {
        record(
            "cuMemMap",
            format!("cuMemMap(va{ptr:x}, {size}, {offset}, h{handle:x})"),
        )
    }

    pub unsafe fn cuMemUnmap(ptr: CUdeviceptr, size: usize) -> CUresult {
        record("cuMemUnmap", format!("cuMemUnmap(va{ptr:x}, {size})"))
    }

    pub unsafe fn cuMemExportToShareableHandle(
        shareable: *mut c_void,
        handle: CUmemGenericAllocationHandle,
        _ty: CUmemAllocationHandleType,
        _flags: c_ulonglong,
    ) -> CUresult {
        // A real descriptor, so that SharedFd can own and close it.
        let fd = libc::open(c"/dev/null".as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
        *shareable.cast::<c_int>() = fd;
        record(
            "cuMemExportToShareableHandle",
            format!("cuMemExportToShareableHandle(h{handle:x})"),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::fake_driver::{fail_next, take_calls};
    use super::*;

    const MIB2: usize = 2 << 20;

    fn prop() -> CUmemAllocationProp {
        // SAFETY: all-zero is a valid (if meaningless) description; the fake ignores it.
        unsafe { std::mem::zeroed() }
    }

    /// The call names only, without arguments.
    fn names(calls: &[String]) -> Vec<&str> {
        calls
            .iter()
            .map(|c| c.split('(').next().unwrap_or(""))
            .collect()
    }

    #[test]
    fn sizes_round_up_to_the_granularity() {
        assert_eq!(round_up(1, MIB2), Some(MIB2));
        assert_eq!(round_up(MIB2, MIB2), Some(MIB2));
        assert_eq!(round_up(MIB2 + 1, MIB2), Some(2 * MIB2));
        assert_eq!(round_up(0, MIB2), Some(0));
        assert_eq!(round_up(3 << 20, 1 << 16), Some(3 << 20));
    }

    #[test]
    fn rounding_that_overflows_is_refused() {
        assert_eq!(round_up(usize::MAX, MIB2), None);
        assert_eq!(round_up(usize::MAX - MIB2 + 2, MIB2), None);
        assert_eq!(
            round_up(usize::MAX - MIB2 + 1, MIB2),
            Some(usize::MAX - MIB2 + 1)
        );
        assert_eq!(round_up(5, 0), None);
    }

    #[test]
    fn every_rank_gets_a_granularity_that_suits_all() {
        assert_eq!(common_granularity(&[MIB2, MIB2]), Some(MIB2));
        assert_eq!(common_granularity(&[1 << 16, MIB2]), Some(MIB2));
        assert_eq!(common_granularity(&[4, 6]), Some(12));
        assert_eq!(common_granularity(&[]), None);
        assert_eq!(common_granularity(&[MIB2, 0]), None);
        assert_eq!(common_granularity(&[usize::MAX, usize::MAX - 1]), None);
    }

    #[test]
    fn a_buffer_is_created_reserved_and_mapped_in_that_order() {
        take_calls();
        let allocation = Allocation::create(MIB2, &prop()).unwrap();
        let range = AddressRange::reserve(MIB2, MIB2).unwrap();
        let mapping = Mapping::map(range, allocation).unwrap();
        assert_eq!(mapping.size(), MIB2);
        assert_eq!(
            names(&take_calls()),
            ["cuMemCreate", "cuMemAddressReserve", "cuMemMap"]
        );
        mapping.release().unwrap();
        take_calls();
    }

    #[test]
    fn release_unmaps_then_frees_the_range_then_releases_the_handle() {
        let mapping = Mapping::map(
            AddressRange::reserve(MIB2, MIB2).unwrap(),
            Allocation::create(MIB2, &prop()).unwrap(),
        )
        .unwrap();
        let (va, handle) = (mapping.ptr(), mapping.allocation().handle());
        take_calls();
        mapping.release().unwrap();
        assert_eq!(
            take_calls(),
            [
                format!("cuMemUnmap(va{va:x}, {MIB2})"),
                format!("cuMemAddressFree(va{va:x}, {MIB2})"),
                format!("cuMemRelease(h{handle:x})"),
            ]
        );
    }

    #[test]
    fn dropping_on_an_error_path_tears_down_in_the_same_order() {
        let mapping = Mapping::map(
            AddressRange::reserve(MIB2, MIB2).unwrap(),
            Allocation::create(MIB2, &prop()).unwrap(),
        )
        .unwrap();
        take_calls();
        drop(mapping);
        assert_eq!(
            names(&take_calls()),
            ["cuMemUnmap", "cuMemAddressFree", "cuMemRelease"]
        );
    }

    #[test]
    fn a_failed_map_frees_the_range_and_releases_the_allocation() {
        let allocation = Allocation::create(MIB2, &prop()).unwrap();
        let range = AddressRange::reserve(MIB2, MIB2).unwrap();
        take_calls();
        fail_next("cuMemMap");
        let err = Mapping::map(range, allocation).err().unwrap();
        assert_eq!(
            err.to_string(),
            "cuMemMap returned CUDA_ERROR_OUT_OF_MEMORY"
        );
        assert_eq!(
            names(&take_calls()),
            ["cuMemMap", "cuMemAddressFree", "cuMemRelease"]
        );
    }

    #[test]
    fn a_failed_unmap_is_reported_and_each_release_is_tried_once() {
        let mapping = Mapping::map(
            AddressRange::reserve(MIB2, MIB2).unwrap(),
            Allocation::create(MIB2, &prop()).unwrap(),
        )
        .unwrap();
        take_calls();
        fail_next("cuMemUnmap");
        assert!(mapping.release().is_err());
        assert_eq!(
            names(&take_calls()),
            ["cuMemUnmap", "cuMemAddressFree", "cuMemRelease"]
        );
    }

    #[test]
    fn explicit_steps_give_the_same_order_as_release() {
        let mapping = Mapping::map(
            AddressRange::reserve(MIB2, MIB2).unwrap(),
            Allocation::create(MIB2, &prop()).unwrap(),
        )
        .unwrap();
        take_calls();
        let (range, allocation) = mapping.unmap().unwrap();
        range.free().unwrap();
        allocation.release().unwrap();
        assert_eq!(
            names(&take_calls()),
            ["cuMemUnmap", "cuMemAddressFree", "cuMemRelease"]
        );
    }

    #[test]
    fn peers_are_unmapped_before_the_owner_releases() {
        // What Step 8 does on one rank: every imported peer buffer first,
        // then the rank's own buffer.
        let own = Mapping::map(
            AddressRange::reserve(MIB2, MIB2).unwrap(),
            Allocation::create(MIB2, &prop()).unwrap(),
        )
        .unwrap();
        let exported = SharedFd::export(own.allocation()).unwrap();
        let import = Mapping::map(
            AddressRange::reserve(MIB2, MIB2).unwrap(),
            Allocation::import(exported.as_fd(), MIB2).unwrap(),
        )
        .unwrap();
        let (own_handle, peer_handle) = (own.allocation().handle(), import.allocation().handle());
        take_calls();
        import.release().unwrap();
        own.release().unwrap();
        exported.close().unwrap();
        let calls = take_calls();
        assert_eq!(
            names(&calls),
            [
                "cuMemUnmap",
                "cuMemAddressFree",
                "cuMemRelease",
                "cuMemUnmap",
                "cuMemAddressFree",
                "cuMemRelease"
            ]
        );
        assert_eq!(calls[2], format!("cuMemRelease(h{peer_handle:x})"));
        assert_eq!(calls[5], format!("cuMemRelease(h{own_handle:x})"));
    }

    #[test]
    fn import_passes_the_descriptor_value_not_a_pointer_to_it() {
        let file = std::fs::File::open("/dev/null").unwrap();
        let fd = file.as_raw_fd();
        take_calls();
        let allocation = Allocation::import(file.as_fd(), MIB2).unwrap();
        let calls = take_calls();
        assert!(
            calls[0].starts_with(&format!("cuMemImportFromShareableHandle(fd {fd})")),
            "{calls:?}"
        );
        allocation.release().unwrap();
    }

    #[test]
    fn released_guards_do_nothing_more_on_drop() {
        let allocation = Allocation::create(MIB2, &prop()).unwrap();
        let range = AddressRange::reserve(MIB2, MIB2).unwrap();
        take_calls();
        allocation.release().unwrap();
        range.free().unwrap();
        assert_eq!(names(&take_calls()), ["cuMemRelease", "cuMemAddressFree"]);
    }
}
