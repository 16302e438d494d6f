//! NCCL's C API: error checking, and small RAII guards for the objects the
//! lessons create.
//!
//! cudarc's safe `Comm` hides the raw `ncclComm_t` and only accepts cudarc's
//! own allocations, so it cannot register memory. The lessons therefore call
//! `cudarc::nccl::sys` directly, in their own `main.rs`, and hand each handle
//! an NCCL call returned to a guard that owns it from then on:
//!
//! | guard | adopts what this returned | released by |
//! |---|---|---|
//! | [`Communicator`] | `ncclCommInitRank`, `ncclCommInitRankConfig` | `ncclCommFinalize` + `ncclCommDestroy` (`ncclCommAbort` on error paths) |
//! | [`NcclBuffer`] | `ncclMemAlloc` | `ncclMemFree` |
//! | [`Registration`] | `ncclCommRegister` | `ncclCommDeregister` |
//! | [`Window`] | `ncclCommWindowRegister` | `ncclCommWindowDeregister` |
//!
//! Each guard has an explicit release method that returns the error, used on
//! the success path, and a `Drop` that makes the same call if an error path
//! skipped it. `Registration` and `Window` borrow the communicator and the
//! buffer, so the compiler enforces NCCL's teardown order: deregister before
//! `ncclMemFree`, and before the communicator is destroyed. A `Drop` that
//! finds its resource unreleased first tells the launcher that this rank is
//! failing: its NCCL call may wait for peers that wait for this rank, and the
//! launcher must not wait for it to return (see `threads.rs`, `mpi_launch.rs`).

use std::ffi::{c_int, c_void, CStr};
use std::fmt;
use std::marker::PhantomData;
use std::ptr;
use std::sync::Arc;

use anyhow::{ensure, Context, Result};
use cudarc::driver::{result as cu, CudaStream};
pub use cudarc::nccl::sys;

use crate::preflight::{library_path, NcclLibrary};
use crate::{CannotRun, NcclVersion, RankContext};

/// `NCCL_WIN_COLL_SYMMETRIC` from `nccl.h` (2.27+): every rank registers a
/// buffer of the same size, so NCCL may use its symmetric kernels.
pub const NCCL_WIN_COLL_SYMMETRIC: c_int = 0x01;

/// `NCCL_CONFIG_UNDEF_INT` from `nccl.h`: "NCCL's default" for a config field.
const CONFIG_UNDEF_INT: c_int = c_int::MIN;
/// `NCCL_API_MAGIC` from `nccl.h`: marks a config made by its initializer.
const API_MAGIC: std::ffi::c_uint = 0xcafe_beef;

/// The `ncclConfig_t` this rank's communicator is made with
/// (`ncclCommInitRankConfig`): `NCCL_CONFIG_INITIALIZER` (every field
/// NCCL's default), except, when ranks share a GPU, `maxCTAs`, which caps
/// NCCL's blocks per rank at its share of the GPU
/// ([`placement::nccl_max_ctas`](crate::placement::nccl_max_ctas)). NCCL's
/// kernels wait for their peers' kernels, so every rank's blocks must fit on
/// the GPU at once; NCCL's docs for `NCCL_MULTI_RANK_GPU_ENABLE` ask for
/// such a cap. A user's own `NCCL_MAX_CTAS` overrides it (NCCL reads the
/// variable after the config).
///
/// The layout is `nccl.h`'s of 2.28 (cudarc's): `size` and `version` tell a
/// later NCCL which fields this struct has, so it reads no further.
pub fn comm_config(ctx: &RankContext) -> sys::ncclConfig_t {
    let multiprocessors = crate::preflight::multiprocessors(ctx.device());
    let max_ctas = crate::placement::nccl_max_ctas(multiprocessors, ctx.ranks_per_gpu());
    sys::ncclConfig_t {
        size: std::mem::size_of::<sys::ncclConfig_t>(),
        magic: API_MAGIC,
        version: NcclVersion::new(2, 28, 0).code(),
        blocking: CONFIG_UNDEF_INT,
        cgaClusterSize: CONFIG_UNDEF_INT,
        minCTAs: CONFIG_UNDEF_INT,
        maxCTAs: max_ctas.map_or(CONFIG_UNDEF_INT, |cap| cap as c_int),
        netName: ptr::null(),
        splitShare: CONFIG_UNDEF_INT,
        trafficClass: CONFIG_UNDEF_INT,
        commName: ptr::null(),
        collnetEnable: CONFIG_UNDEF_INT,
        CTAPolicy: CONFIG_UNDEF_INT,
        shrinkShare: CONFIG_UNDEF_INT,
        nvlsCTAs: CONFIG_UNDEF_INT,
        nChannelsPerNetPeer: CONFIG_UNDEF_INT,
        nvlinkCentricSched: CONFIG_UNDEF_INT,
    }
}

/// An NCCL call that did not return `ncclSuccess`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NcclError {
    pub call: &'static str,
    pub code: sys::ncclResult_t,
    /// `ncclGetErrorString(code)`.
    pub text: String,
    /// `ncclGetLastError`: NCCL's own words on the last failure, often the useful part.
    pub last: String,
}

impl fmt::Display for NcclError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} returned {:?} ({})", self.call, self.code, self.text)?;
        if !self.last.is_empty() {
            write!(f, "; NCCL says: {}", self.last.trim())?;
        }
        Ok(())
    }
}

impl std::error::Error for NcclError {}

/// Turns an `ncclResult_t` into a `Result`.
pub trait NcclCheck {
    /// `Ok` for `ncclSuccess`; otherwise an [`NcclError`] naming `call`.
    fn check(self, call: &'static str) -> Result<(), NcclError>;
}

impl NcclCheck for sys::ncclResult_t {
    fn check(self, call: &'static str) -> Result<(), NcclError> {
        if self == sys::ncclResult_t::ncclSuccess {
            return Ok(());
        }
        // SAFETY: both return pointers to static or thread-local C strings (or
        // NULL); ncclGetLastError accepts a NULL communicator.
        let (text, last) = unsafe {
            (
                c_text(sys::ncclGetErrorString(self)),
                c_text(sys::ncclGetLastError(ptr::null_mut())),
            )
        };
        Err(NcclError {
            call,
            code: self,
            text,
            last,
        })
    }
}

unsafe fn c_text(text: *const std::ffi::c_char) -> String {
    if text.is_null() {
        String::new()
    } else {
        CStr::from_ptr(text).to_string_lossy().into_owned()
    }
}

/// The NCCL this process loaded (through cudarc): its version and its file.
pub fn loaded_nccl() -> Result<NcclLibrary> {
    let mut code: c_int = 0;
    // SAFETY: writes one int.
    unsafe { sys::ncclGetVersion(&mut code) }.check("ncclGetVersion")?;
    let path = library_path(nccl_get_version_address()? as usize)
        .context("find the loaded NCCL's file")?;
    Ok(NcclLibrary {
        version: NcclVersion::from_code(code as u32),
        path,
    })
}

/// `ncclGetVersion`'s address in the NCCL that cudarc loaded.
pub fn nccl_get_version_address() -> Result<*const c_void> {
    // SAFETY: cudarc's NCCL handle; looking up a symbol has no side effects.
    unsafe {
        let symbol: libloading::Symbol<unsafe extern "C" fn(*mut c_int) -> sys::ncclResult_t> =
            sys::culib()
                .get(b"ncclGetVersion\0")
                .context("look up ncclGetVersion")?;
        Ok(*symbol as *const c_void)
    }
}

/// The stream handle NCCL takes (`cudaStream_t`) for a cudarc stream: both are
/// the same driver object.
pub fn nccl_stream(stream: &CudaStream) -> sys::cudaStream_t {
    stream.cu_stream() as sys::cudaStream_t
}

/// Copies rank 0's unique id (from `ncclGetUniqueId`) to every rank: 128
/// plain bytes, through shared memory in thread mode and `MPI_Bcast` under
/// mpirun. Collective. Every rank then passes the same id to
/// `ncclCommInitRank`.
pub fn share_unique_id(ctx: &RankContext, id: &mut sys::ncclUniqueId) -> Result<()> {
    // SAFETY: ncclUniqueId is 128 plain bytes with no invalid values.
    let bytes =
        unsafe { std::slice::from_raw_parts_mut(id.internal.as_mut_ptr().cast::<u8>(), 128) };
    ctx.broadcast(bytes).context("sharing the NCCL unique id")?;
    // The tests' fault hook (SYMMEM_TEST_FAULT=...:init): the next call is
    // ncclCommInitRank, which the other ranks enter.
    crate::fault::at(ctx.rank(), crate::fault::Point::Init)
}

/// An NCCL communicator (`ncclComm_t`) for this rank.
pub struct Communicator {
    raw: sys::ncclComm_t,
}

impl Communicator {
    /// Takes ownership of the communicator `ncclCommInitRank` returned.
    ///
    /// # Safety
    /// `raw` must be a live communicator from `ncclCommInitRank` that nothing
    /// else destroys.
    pub unsafe fn adopt(raw: sys::ncclComm_t) -> Self {
        Self { raw }
    }

    pub fn as_raw(&self) -> sys::ncclComm_t {
        self.raw
    }

    /// `ncclCommFinalize` (waits for this communicator's outstanding work and
    /// releases its peers' resources), then `ncclCommDestroy`.
    pub fn destroy(mut self) -> Result<()> {
        let raw = std::mem::replace(&mut self.raw, ptr::null_mut());
        // SAFETY: `raw` is a live communicator; nothing borrows it any more
        // (windows and registrations borrow `self`, which we own).
        unsafe {
            sys::ncclCommFinalize(raw).check("ncclCommFinalize")?;
            sys::ncclCommDestroy(raw).check("ncclCommDestroy")?;
        }
        Ok(())
    }
}

impl Drop for Communicator {
    /// Error path: `ncclCommAbort` does not wait for peers that may never come.
    fn drop(&mut self) {
        if !self.raw.is_null() {
            crate::rank::leaving_on_error();
            // SAFETY: `raw` is live and not used after this.
            if let Err(err) = unsafe { sys::ncclCommAbort(self.raw) }.check("ncclCommAbort") {
                eprintln!("warning: cleanup: {err}");
            }
        }
    }
}

/// Device memory from `ncclMemAlloc`: CUDA virtual-memory (cuMem) allocations
/// that NCCL can register and map into its peers (lesson 04 shows how).
pub struct NcclBuffer {
    ptr: *mut c_void,
    bytes: usize,
}

impl NcclBuffer {
    /// Takes ownership of `bytes` bytes of device memory from `ncclMemAlloc`.
    ///
    /// # Safety
    /// `ptr` must come from `ncclMemAlloc(&ptr, bytes)` and not be freed elsewhere.
    pub unsafe fn adopt(ptr: *mut c_void, bytes: usize) -> Self {
        Self { ptr, bytes }
    }

    pub fn as_ptr(&self) -> *mut c_void {
        self.ptr
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Copies `data` to the start of the buffer, in `stream` order.
    pub fn upload<T: Copy>(&self, data: &[T], stream: &Arc<CudaStream>) -> Result<()> {
        let bytes = std::mem::size_of_val(data);
        ensure!(
            bytes <= self.bytes,
            "upload of {bytes} bytes into a {}-byte buffer",
            self.bytes
        );
        // SAFETY: the destination holds `bytes`; the copy reads `data` before
        // returning (pageable host memory is staged synchronously).
        unsafe { cu::memcpy_htod_async(self.ptr as u64, data, stream.cu_stream()) }
            .context("cuMemcpyHtoDAsync")?;
        Ok(())
    }

    /// Copies the start of the buffer into `out`, after all earlier work in
    /// `stream`, and waits for it.
    pub fn download<T: Copy>(&self, out: &mut [T], stream: &Arc<CudaStream>) -> Result<()> {
        let bytes = std::mem::size_of_val(out);
        ensure!(
            bytes <= self.bytes,
            "download of {bytes} bytes from a {}-byte buffer",
            self.bytes
        );
        // SAFETY: the source holds `bytes`; we wait before `out` is read.
        unsafe { cu::memcpy_dtoh_async(out, self.ptr as u64, stream.cu_stream()) }
            .context("cuMemcpyDtoHAsync")?;
        stream.synchronize().context("cuStreamSynchronize")?;
        Ok(())
    }

    /// `ncclMemFree(ptr)`.
    pub fn free(mut self) -> Result<()> {
        let ptr = std::mem::replace(&mut self.ptr, ptr::null_mut());
        // SAFETY: `ptr` came from ncclMemAlloc; registrations borrowed `self`
        // and are gone.
        unsafe { sys::ncclMemFree(ptr) }.check("ncclMemFree")?;
        Ok(())
    }
}

impl Drop for NcclBuffer {
    fn drop(&mut self) {
        if !self.ptr.is_null() {
            crate::rank::leaving_on_error();
            // SAFETY: as in `free`.
            if let Err(err) = unsafe { sys::ncclMemFree(self.ptr) }.check("ncclMemFree") {
                eprintln!("warning: cleanup: {err}");
            }
        }
    }
}

/// A buffer registered with a communicator (`ncclCommRegister`): NCCL may
/// read and write it directly instead of copying through its own buffers.
pub struct Registration<'a> {
    comm: &'a Communicator,
    handle: *mut c_void,
    _buffer: PhantomData<&'a NcclBuffer>,
}

impl<'a> Registration<'a> {
    /// Takes ownership of the handle `ncclCommRegister(comm, buffer, ...)`
    /// returned; it borrows both until it is deregistered.
    ///
    /// # Safety
    /// `handle` must come from `ncclCommRegister` on `comm` for `buffer`.
    pub unsafe fn adopt(
        comm: &'a Communicator,
        _buffer: &'a NcclBuffer,
        handle: *mut c_void,
    ) -> Self {
        Self {
            comm,
            handle,
            _buffer: PhantomData,
        }
    }

    /// `ncclCommDeregister(comm, handle)`.
    pub fn deregister(mut self) -> Result<()> {
        let handle = std::mem::replace(&mut self.handle, ptr::null_mut());
        // SAFETY: `handle` came from ncclCommRegister on this communicator.
        unsafe { sys::ncclCommDeregister(self.comm.raw, handle) }.check("ncclCommDeregister")?;
        Ok(())
    }
}

impl Drop for Registration<'_> {
    fn drop(&mut self) {
        if !self.handle.is_null() {
            crate::rank::leaving_on_error();
            // SAFETY: as in `deregister`.
            if let Err(err) = unsafe { sys::ncclCommDeregister(self.comm.raw, self.handle) }
                .check("ncclCommDeregister")
            {
                eprintln!("warning: cleanup: {err}");
            }
        }
    }
}

/// A buffer registered as a window (`ncclCommWindowRegister`): with
/// [`NCCL_WIN_COLL_SYMMETRIC`], every rank's buffer is mapped into every peer
/// at the same offset of one symmetric address range.
pub struct Window<'a> {
    comm: &'a Communicator,
    raw: sys::ncclWindow_t,
    _buffer: PhantomData<&'a NcclBuffer>,
}

impl<'a> Window<'a> {
    /// Takes ownership of the window `ncclCommWindowRegister(comm, buffer,
    /// ...)` returned; it borrows both until it is deregistered.
    ///
    /// A NULL window with success means that this communicator gives the
    /// buffer no symmetric memory: that becomes a "cannot run here" error that
    /// says what is needed. NCCL 2.29+ returns NULL whenever the communicator
    /// lacks symmetric support. NCCL 2.28 returns NULL only if local
    /// registration is off too (`NCCL_LOCAL_REGISTER=0`); otherwise it hands
    /// back a plain local registration as the window, and collectives on it
    /// run NCCL's ordinary kernels (lesson 02 shows how to tell). NCCL 2.27
    /// returns NULL with `NCCL_LOCAL_REGISTER=0` or with cuMem off.
    ///
    /// # Safety
    /// `raw` must be NULL or come from `ncclCommWindowRegister` on `comm` for `buffer`.
    pub unsafe fn adopt(
        comm: &'a Communicator,
        _buffer: &'a NcclBuffer,
        raw: sys::ncclWindow_t,
    ) -> Result<Self> {
        if raw.is_null() {
            return Err(CannotRun::new(
                "ncclCommWindowRegister returned success but a NULL window: this communicator has no symmetric-memory support",
                "symmetric windows need the GPUs of a node to reach each other by CUDA P2P (NVLink or PCIe P2P),\n\
                 cuMem-based allocations (do not set NCCL_CUMEM_ENABLE=0) and windows enabled (do not set NCCL_WIN_ENABLE=0);\n\
                 NCCL 2.29+ also needs one node (or GPU-initiated networking), and logs why with\n\
                 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT: look for \"Symmetric memory is not supported\" (2.29, 2.30)\n\
                 or \"symmetricSupport 0\" (2.31, 2.32, whose libraries carry that line instead).\n\
                 NCCL 2.27 and 2.28 log no such line, and return a NULL window only with NCCL_LOCAL_REGISTER=0 (2.27 also\n\
                 with cuMem off); otherwise they return a usable window even without symmetric support, and run ordinary kernels",
            )
            .into());
        }
        Ok(Self {
            comm,
            raw,
            _buffer: PhantomData,
        })
    }

    /// The `ncclWindow_t` a device kernel takes (lesson 05).
    pub fn as_raw(&self) -> sys::ncclWindow_t {
        self.raw
    }

    /// `ncclCommWindowDeregister(comm, win)`. Collective, like the registration.
    pub fn deregister(mut self) -> Result<()> {
        let raw = std::mem::replace(&mut self.raw, ptr::null_mut());
        // SAFETY: `raw` came from ncclCommWindowRegister on this communicator.
        unsafe { sys::ncclCommWindowDeregister(self.comm.raw, raw) }
            .check("ncclCommWindowDeregister")?;
        Ok(())
    }
}

impl Drop for Window<'_> {
    fn drop(&mut self) {
        if !self.raw.is_null() {
            crate::rank::leaving_on_error();
            // SAFETY: as in `deregister`.
            if let Err(err) = unsafe { sys::ncclCommWindowDeregister(self.comm.raw, self.raw) }
                .check("ncclCommWindowDeregister")
            {
                eprintln!("warning: cleanup: {err}");
            }
        }
    }
}
