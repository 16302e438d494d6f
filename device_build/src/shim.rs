//! The host shim (`shim/devcomm_shim.cu`, built by nvcc into a shared
//! library) and the device communicator it creates.
//!
//! `ncclDevCommRequirements` and `ncclDevComm` are C++ structs whose layout
//! changes between NCCL releases. Rust never declares them: the shim, compiled
//! against the headers of the NCCL in use, fills the requirements and calls
//! `ncclDevCommCreate`/`ncclDevCommDestroy`, and reports how many bytes a
//! `ncclDevComm` takes. Rust keeps those bytes in an aligned buffer and hands
//! them to the kernel as its by-value argument.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::ffi::{c_int, c_void};
use std::path::Path;

use anyhow::{bail, ensure, Context, Result};
use common::nccl::{nccl_get_version_address, sys, Communicator, NcclCheck};
use common::preflight::library_path;
use common::{CannotRun, NcclVersion};

type VersionFn = unsafe extern "C" fn() -> c_int;
type SizeFn = unsafe extern "C" fn() -> usize;
type SymbolFn = unsafe extern "C" fn() -> *mut c_void;
type CreateFn =
    unsafe extern "C" fn(sys::ncclComm_t, c_int, c_int, c_int, *mut c_void, *mut c_void) -> c_int;
type DestroyFn = unsafe extern "C" fn(sys::ncclComm_t, *const c_void) -> c_int;

/// The loaded shim library.
pub struct Shim {
    create: CreateFn,
    destroy: DestroyFn,
    layout: Layout,
    /// `sizeof(ncclLLA2AHandle)`.
    ll_handle_size: usize,
    // Last: the functions above point into it.
    _library: libloading::Library,
}

impl Shim {
    /// `dlopen`s the shim and checks that it was built for `expected` and
    /// linked to the very NCCL this process uses: a device communicator made
    /// by a second copy of NCCL would not belong to our communicator.
    pub fn load(path: &Path, expected: NcclVersion) -> Result<Self> {
        // SAFETY: the shim's constructors are those of a plain C++ library;
        // the symbols are the extern "C" functions of devcomm_shim.cu, with
        // the signatures declared above.
        unsafe {
            // RTLD_NOW: a shim that needs a symbol nobody provides fails here,
            // with the loader's message, instead of killing the process later.
            let flags = libloading::os::unix::RTLD_NOW | libloading::os::unix::RTLD_LOCAL;
            let library: libloading::Library =
                libloading::os::unix::Library::open(Some(path), flags)
                    .with_context(|| format!("dlopen {}", path.display()))?
                    .into();
            let header_version: VersionFn = *library.get(b"devcomm_shim_header_version\0")?;
            let size: SizeFn = *library.get(b"devcomm_shim_size\0")?;
            let align: SizeFn = *library.get(b"devcomm_shim_align\0")?;
            let nccl_symbol: SymbolFn = *library.get(b"devcomm_shim_nccl_symbol\0")?;
            let create: CreateFn = *library.get(b"devcomm_shim_create\0")?;
            let destroy: DestroyFn = *library.get(b"devcomm_shim_destroy\0")?;
            let ll_handle_size: SizeFn = *library.get(b"devcomm_shim_ll_handle_size\0")?;

            let built_for = NcclVersion::from_code(header_version() as u32);
            ensure!(
                built_for == expected,
                "the shim was built for NCCL {built_for}, but NCCL {expected} is loaded"
            );
            if !std::ptr::eq(nccl_symbol(), nccl_get_version_address()?) {
                bail!(
                    "the shim resolved NCCL to a different library than this process loaded ({}): two copies of NCCL",
                    library_path(nccl_symbol() as usize).map_or("?".into(), |p| p.display().to_string())
                );
            }
            let layout = Layout::from_size_align(size(), align())
                .context("ncclDevComm's size and alignment")?;
            Ok(Self {
                create,
                destroy,
                layout,
                ll_handle_size: ll_handle_size(),
                _library: library,
            })
        }
    }

    /// `sizeof(ncclDevComm)` in the NCCL in use.
    pub fn dev_comm_size(&self) -> usize {
        self.layout.size()
    }
}

/// A device communicator (`ncclDevComm`): what a kernel needs to reach the
/// communicator's peers, here with `lsaBarrierCount` LSA barriers. Opaque
/// bytes to Rust; `ncclDevCommDestroy` on release.
pub struct DevComm<'a> {
    shim: &'a Shim,
    comm: &'a Communicator,
    bytes: *mut u8,
    /// The `ncclLLA2AHandle` of the LL staging buffer, if one was asked for.
    ll_handle: Option<Vec<u64>>,
}

/// An LL all-to-all staging buffer to ask for along with the device
/// communicator (`ncclLLA2ACreateRequirement`): `blocks` blocks of `slots`
/// 8-byte slots each.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LlStaging {
    pub blocks: u32,
    pub slots: u32,
}

impl<'a> DevComm<'a> {
    /// `ncclDevCommCreate(comm, &reqs, &devComm)` with `reqs.lsaBarrierCount
    /// = lsa_barriers` and, with `ll`, an LL staging buffer among the
    /// resources, through the shim. Collective: every rank calls it.
    pub fn create(
        shim: &'a Shim,
        comm: &'a Communicator,
        lsa_barriers: u32,
        ll: Option<LlStaging>,
    ) -> Result<Self> {
        // SAFETY: the layout has a non-zero size (a struct with members).
        let bytes = unsafe { alloc_zeroed(shim.layout) };
        ensure!(!bytes.is_null(), "out of host memory for ncclDevComm");
        // u64 words: the handle's 4-byte members stay aligned.
        let mut ll_handle = ll.map(|_| vec![0u64; shim.ll_handle_size.div_ceil(8)]);
        let ll_out = ll_handle
            .as_mut()
            .map_or(std::ptr::null_mut(), |h| h.as_mut_ptr().cast::<c_void>());
        let (ll_blocks, ll_slots) = ll.map_or((0, 0), |l| (l.blocks, l.slots));
        // SAFETY: `bytes` is a zeroed, aligned ncclDevComm-sized buffer;
        // `ll_out` is NULL or holds sizeof(ncclLLA2AHandle) bytes.
        let status = unsafe {
            (shim.create)(
                comm.as_raw(),
                lsa_barriers as c_int,
                ll_blocks as c_int,
                ll_slots as c_int,
                bytes.cast(),
                ll_out,
            )
        };
        if status != 0 {
            // Nothing was created: free the bytes without ncclDevCommDestroy.
            // SAFETY: allocated above with this layout.
            unsafe { dealloc(bytes, shim.layout) };
            let err = match nccl_result(status).check("ncclDevCommCreate") {
                Err(err) => err,
                Ok(()) => unreachable!("status {status} is not ncclSuccess"),
            };
            // NCCL's own words say whether the communicator lacks symmetric
            // memory, which is the system's limit, not the program's fault.
            if err.last.contains("symmetric memory") {
                return Err(CannotRun::new(
                    err.to_string(),
                    "the device API needs a communicator with symmetric memory: GPUs that reach each other\n\
                     by CUDA P2P, cuMem enabled (NCCL_CUMEM_ENABLE not 0), and more than one rank\n\
                     (NCCL 2.28.3 gives a single-rank communicator no symmetric support: use NTHREADS=2 or more)",
                )
                .into());
            }
            return Err(err.into());
        }
        Ok(Self {
            shim,
            comm,
            bytes,
            ll_handle,
        })
    }

    /// The kernel argument: a pointer to the `ncclDevComm` bytes, which
    /// `cuLaunchKernel` copies into the kernel's parameter space.
    pub fn as_kernel_arg(&self) -> *mut c_void {
        self.bytes.cast()
    }

    /// The kernel argument for the LL staging buffer's handle
    /// (`ncclLLA2AHandle`, by value), if one was asked for.
    pub fn ll_handle_arg(&mut self) -> Option<*mut c_void> {
        self.ll_handle.as_mut().map(|h| h.as_mut_ptr().cast())
    }

    /// `ncclDevCommDestroy(comm, &devComm)`.
    pub fn destroy(mut self) -> Result<()> {
        let result = self.release();
        std::mem::forget(self);
        result
    }

    fn release(&mut self) -> Result<()> {
        // SAFETY: `bytes` holds the device communicator ncclDevCommCreate made.
        let status = unsafe { (self.shim.destroy)(self.comm.as_raw(), self.bytes.cast()) };
        // SAFETY: allocated in `create` with this layout; not used after this.
        unsafe { dealloc(self.bytes, self.shim.layout) };
        nccl_result(status).check("ncclDevCommDestroy")?;
        Ok(())
    }
}

impl Drop for DevComm<'_> {
    fn drop(&mut self) {
        if let Err(err) = self.release() {
            eprintln!("warning: cleanup: {err:#}");
        }
    }
}

/// The shim returns `ncclResult_t` as an int.
fn nccl_result(status: c_int) -> sys::ncclResult_t {
    use sys::ncclResult_t::*;
    [
        ncclSuccess,
        ncclUnhandledCudaError,
        ncclSystemError,
        ncclInternalError,
        ncclInvalidArgument,
        ncclInvalidUsage,
        ncclRemoteError,
        ncclInProgress,
    ]
    .into_iter()
    .find(|r| *r as c_int == status)
    .unwrap_or(ncclInternalError)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shim_status_codes_map_to_nccl_results() {
        assert_eq!(nccl_result(0), sys::ncclResult_t::ncclSuccess);
        assert_eq!(nccl_result(5), sys::ncclResult_t::ncclInvalidUsage);
        assert_eq!(nccl_result(7), sys::ncclResult_t::ncclInProgress);
        assert_eq!(nccl_result(99), sys::ncclResult_t::ncclInternalError);
    }
}
