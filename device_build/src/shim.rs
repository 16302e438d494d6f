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
type LsaSizeFn = unsafe extern "C" fn(*const c_void) -> c_int;

/// How the device communicator is made: through the nvcc route's shim, or,
/// on the jit route (no shim), by calling NCCL directly with a requirements
/// struct laid out by [`DevCommRequirements`] for a release whose layout
/// this build knows.
pub struct Shim {
    calls: Calls,
    layout: Layout,
    /// `sizeof(ncclLLA2AHandle)`.
    ll_handle_size: usize,
    // Last: the functions above point into it.
    _library: crate::cache::LoadedLibrary,
}

enum Calls {
    Shim {
        create: CreateFn,
        destroy: DestroyFn,
        lsa_size: LsaSizeFn,
    },
    Direct {
        create: NcclCreateFn,
        destroy: DestroyFn,
    },
}

type NcclCreateFn =
    unsafe extern "C" fn(sys::ncclComm_t, *const DevCommRequirements, *mut c_void) -> c_int;

/// `ncclDevCommRequirements` as NCCL 2.32.3's `nccl_device/host.h` lays it
/// out (120 bytes; the offsets are checked against the real header by
/// NVRTC in the tests). Only what the jit route sets is named in its use;
/// the rest keeps `NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER`'s values.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct DevCommRequirements {
    pub size: usize,
    pub magic: u32,
    pub version: u32,
    pub resource_requirements_list: *mut c_void,
    pub team_requirements_list: *mut c_void,
    pub lsa_multimem: bool,
    pub barrier_count: c_int,
    pub lsa_barrier_count: c_int,
    pub rail_gin_barrier_count: c_int,
    pub lsa_ll_a2a_block_count: c_int,
    pub lsa_ll_a2a_slot_count: c_int,
    pub gin_force_enable: bool,
    pub gin_context_count: c_int,
    pub gin_signal_count: c_int,
    pub gin_counter_count: c_int,
    pub gin_connection_type: c_int,
    pub gin_exclusive_contexts: bool,
    pub gin_queue_depth: c_int,
    pub gin_traffic_class: c_int,
    pub world_gin_barrier_count: c_int,
    pub gin_strong_signals_required: bool,
    pub gin_va_signals_required: bool,
    pub gin_custom_stride: c_int,
    pub gin_type: c_int,
    pub use_runtime_version: bool,
    pub cft_caps: c_int,
    pub cft_barrier_count: c_int,
}

/// A kernel source whose compile asserts, in the real 2.32.3 header, every
/// offset of [`DevCommRequirements`] and `sizeof(ncclDevComm)`.
pub const LAYOUT_PROBE: crate::Source = crate::Source {
    file: "devcomm_layout_probe.cu",
    text: include_str!("../shim/devcomm_layout_probe.cu"),
};

/// `sizeof(ncclDevComm)` in NCCL 2.32.3 (and its alignment).
pub const DEV_COMM_SIZE_2_32_3: usize = 248;
/// `offsetof(ncclDevComm, lsaSize)` in NCCL 2.32.3 (an `int`; asserted in
/// the real header by [`LAYOUT_PROBE`]).
pub const DEV_COMM_LSA_SIZE_OFFSET_2_32_3: usize = 24;
const NCCL_API_MAGIC: u32 = 0xcafe_beef;

impl DevCommRequirements {
    /// `NCCL_DEV_COMM_REQUIREMENTS_INITIALIZER` of NCCL 2.32.3.
    pub fn initializer(version: NcclVersion) -> Self {
        Self {
            size: std::mem::size_of::<Self>(),
            magic: NCCL_API_MAGIC,
            version: version.code(),
            resource_requirements_list: std::ptr::null_mut(),
            team_requirements_list: std::ptr::null_mut(),
            lsa_multimem: false,
            barrier_count: 0,
            lsa_barrier_count: 0,
            rail_gin_barrier_count: 0,
            lsa_ll_a2a_block_count: 0,
            lsa_ll_a2a_slot_count: 0,
            gin_force_enable: false,
            gin_context_count: 4,
            gin_signal_count: 0,
            gin_counter_count: 0,
            gin_connection_type: 0, // NCCL_GIN_CONNECTION_NONE
            gin_exclusive_contexts: false,
            gin_queue_depth: 0,
            gin_traffic_class: c_int::MIN, // NCCL_CONFIG_UNDEF_INT
            world_gin_barrier_count: 0,
            gin_strong_signals_required: true,
            gin_va_signals_required: true,
            gin_custom_stride: 1,
            gin_type: 0, // NCCL_GIN_TYPE_NONE
            use_runtime_version: false,
            cft_caps: 0, // NCCL_CFT_NONE
            cft_barrier_count: 0,
        }
    }
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
            // Loaded from the bytes checked against the build's record, not
            // by path again (see cache::open_library). RTLD_NOW there: a
            // shim that needs a symbol nobody provides fails here, with the
            // loader's message, instead of killing the process later.
            let library = crate::cache::open_library(path)?;
            let header_version: VersionFn = *library.get(b"devcomm_shim_header_version\0")?;
            let size: SizeFn = *library.get(b"devcomm_shim_size\0")?;
            let align: SizeFn = *library.get(b"devcomm_shim_align\0")?;
            let nccl_symbol: SymbolFn = *library.get(b"devcomm_shim_nccl_symbol\0")?;
            let create: CreateFn = *library.get(b"devcomm_shim_create\0")?;
            let destroy: DestroyFn = *library.get(b"devcomm_shim_destroy\0")?;
            let ll_handle_size: SizeFn = *library.get(b"devcomm_shim_ll_handle_size\0")?;
            let lsa_size: LsaSizeFn = *library.get(b"devcomm_shim_lsa_size\0")?;

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
                calls: Calls::Shim {
                    create,
                    destroy,
                    lsa_size,
                },
                layout,
                ll_handle_size: ll_handle_size(),
                _library: library,
            })
        }
    }

    /// The device-communicator maker of a build: the shim the nvcc route
    /// built next to the kernels ([`Shim::load`]), or, where the route built
    /// none (jit), NCCL at `library` called directly ([`Shim::direct`]).
    pub fn for_build(shim: Option<&Path>, library: &Path, nccl: NcclVersion) -> Result<Self> {
        match shim {
            Some(shim) => Self::load(shim, nccl),
            None => Self::direct(library, nccl),
        }
    }

    /// No shim (the jit route): `ncclDevCommCreate`/`Destroy` are called
    /// straight from the NCCL at `library` (the one this process loaded),
    /// with requirements laid out for `version`, which must be a release
    /// whose layout this build knows (2.32.3).
    pub fn direct(library: &Path, version: NcclVersion) -> Result<Self> {
        ensure!(
            version == NcclVersion::new(2, 32, 3),
            "this build knows ncclDevCommRequirements' layout of NCCL 2.32.3 only, not {version}"
        );
        // SAFETY: the library is already loaded (dlopen returns it again);
        // the symbols are host.h's, with the signatures declared above.
        unsafe {
            let flags = libloading::os::unix::RTLD_NOW | libloading::os::unix::RTLD_LOCAL;
            let library: libloading::Library =
                libloading::os::unix::Library::open(Some(library), flags)
                    .with_context(|| format!("dlopen {}", library.display()))?
                    .into();
            let get_version: unsafe extern "C" fn(*mut c_int) -> c_int =
                *library.get(b"ncclGetVersion\0")?;
            if !std::ptr::eq(get_version as *const c_void, nccl_get_version_address()?) {
                bail!("dlopen gave a different NCCL than this process loaded: two copies of NCCL");
            }
            let create: NcclCreateFn = *library.get(b"ncclDevCommCreate\0")?;
            let destroy: DestroyFn = *library.get(b"ncclDevCommDestroy\0")?;
            Ok(Self {
                calls: Calls::Direct { create, destroy },
                layout: Layout::from_size_align(DEV_COMM_SIZE_2_32_3, 8)
                    .context("ncclDevComm's size and alignment")?,
                ll_handle_size: 0,
                _library: library.into(),
            })
        }
    }

    /// `sizeof(ncclDevComm)` in the NCCL in use.
    pub fn dev_comm_size(&self) -> usize {
        self.layout.size()
    }

    /// Whether this way of making the device communicator can ask for an LL
    /// staging buffer (the shim can; the jit route's kernels have no LL API).
    pub fn has_ll(&self) -> bool {
        matches!(self.calls, Calls::Shim { .. })
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
    /// What it was created with: the launches check their grids against it.
    lsa_barriers: u32,
    ll: Option<LlStaging>,
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
            match shim.calls {
                Calls::Shim { create, .. } => create(
                    comm.as_raw(),
                    lsa_barriers as c_int,
                    ll_blocks as c_int,
                    ll_slots as c_int,
                    bytes.cast(),
                    ll_out,
                ),
                Calls::Direct { create, .. } => {
                    if ll.is_some() {
                        dealloc(bytes, shim.layout);
                        bail!("an LL staging buffer needs the shim (the nvcc route)");
                    }
                    let mut reqs = DevCommRequirements::initializer(NcclVersion::new(2, 32, 3));
                    reqs.lsa_barrier_count = lsa_barriers as c_int;
                    create(comm.as_raw(), &reqs, bytes.cast())
                }
            }
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
                     (NCCL 2.28.3 gives a single-rank communicator no symmetric support: use NTHREADS=2 or more),\n\
                     and every rank on one node: NCCL gives a communicator that spans nodes (NCCL_HOSTID differs,\n\
                     or separate hosts) no symmetric support without GIN, and the device API's LSA half reaches\n\
                     only within a node",
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
            lsa_barriers,
            ll,
        })
    }

    /// The LSA barriers it was created with (`lsaBarrierCount`): a kernel
    /// whose block b syncs on barrier b may run at most this many blocks.
    pub fn lsa_barriers(&self) -> u32 {
        self.lsa_barriers
    }

    /// The LL staging buffer it was created with, if any.
    pub fn ll_staging(&self) -> Option<LlStaging> {
        self.ll
    }

    /// `devComm.lsaSize`: how many ranks this one reaches by loads and
    /// stores (its LSA team; one node at most). Read by the shim, which
    /// knows the layout, or on the jit route at 2.32.3's offset.
    pub fn lsa_size(&self) -> usize {
        let size = match self.shim.calls {
            // SAFETY: `bytes` holds the device communicator the shim's
            // ncclDevCommCreate filled.
            Calls::Shim { lsa_size, .. } => unsafe { lsa_size(self.bytes.cast()) },
            // SAFETY: `bytes` holds a 2.32.3 ncclDevComm (Shim::direct
            // refuses any other release), whose int lsaSize sits at this
            // offset, 4-byte aligned in an 8-byte aligned buffer.
            Calls::Direct { .. } => unsafe {
                self.bytes
                    .add(DEV_COMM_LSA_SIZE_OFFSET_2_32_3)
                    .cast::<c_int>()
                    .read()
            },
        };
        size.max(0) as usize
    }

    /// The `ncclDevComm` bytes, for a kernel that takes the device
    /// communicator by value (`common::kernel::KernelArgs::arg_bytes`).
    pub fn kernel_arg(&self) -> &[u8] {
        // SAFETY: `bytes` holds `layout.size()` initialised bytes (zeroed,
        // then filled by ncclDevCommCreate) until `self` is released.
        unsafe { std::slice::from_raw_parts(self.bytes, self.shim.layout.size()) }
    }

    /// The LL staging buffer's handle (`ncclLLA2AHandle`) as kernel-argument
    /// bytes, if one was asked for.
    pub fn ll_handle_arg(&self) -> Option<&[u8]> {
        let words = self.ll_handle.as_deref()?;
        // SAFETY: a `[u64]` is readable as bytes, eight per word.
        Some(unsafe { std::slice::from_raw_parts(words.as_ptr().cast(), words.len() * 8) })
    }

    /// `ncclDevCommDestroy(comm, &devComm)`.
    pub fn destroy(mut self) -> Result<()> {
        let result = self.release();
        std::mem::forget(self);
        result
    }

    fn release(&mut self) -> Result<()> {
        // SAFETY: `bytes` holds the device communicator ncclDevCommCreate made.
        let destroy = match self.shim.calls {
            Calls::Shim { destroy, .. } | Calls::Direct { destroy, .. } => destroy,
        };
        let status = unsafe { destroy(self.comm.as_raw(), self.bytes.cast()) };
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

/// Whether a device communicator whose LSA team holds `lsa_size` ranks can
/// run a kernel that must reach all `world` ranks by loads and stores (an
/// AllReduce on LSA pointers alone). When the team is smaller, the ranks
/// span several nodes: such a kernel would sum within each node and every
/// rank would check a wrong result, so it must not be launched. Exit code 2,
/// naming the nodes, the team and what a cross-node kernel needs.
pub fn check_lsa_team(lsa_size: usize, world: usize) -> Result<(), CannotRun> {
    if lsa_size >= world {
        return Ok(());
    }
    let nodes = world.div_ceil(lsa_size.max(1));
    Err(CannotRun::new(
        format!(
            "the device communicator's LSA team holds {lsa_size} of the {world} ranks: the ranks span {nodes} nodes \
             (world {world} / LSA team {lsa_size}), and this kernel reaches its peers by loads and stores (LSA) only, \
             so it would sum within each node and give every rank a wrong result"
        ),
        "run every rank on one node (all GPUs linked by NVLink or PCIe P2P), or use an AllReduce that crosses nodes:\n\
         ncclAllReduce (lessons 01 and 02); a device-API kernel across nodes needs the API's GIN half\n\
         (GPU-initiated networking: ncclGin, GIN resources in ncclDevCommCreate's requirements, and a network\n\
         with GIN support, such as InfiniBand or RoCE), which this lesson leaves out",
    ))
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
    fn the_requirements_have_the_layout_of_nccl_2_32_3() {
        use std::mem::offset_of;
        type R = DevCommRequirements;
        assert_eq!(std::mem::size_of::<R>(), 120);
        let offsets = [
            offset_of!(R, resource_requirements_list),
            offset_of!(R, team_requirements_list),
            offset_of!(R, lsa_multimem),
            offset_of!(R, barrier_count),
            offset_of!(R, lsa_barrier_count),
            offset_of!(R, rail_gin_barrier_count),
            offset_of!(R, lsa_ll_a2a_block_count),
            offset_of!(R, lsa_ll_a2a_slot_count),
            offset_of!(R, gin_force_enable),
            offset_of!(R, gin_context_count),
            offset_of!(R, gin_signal_count),
            offset_of!(R, gin_counter_count),
            offset_of!(R, gin_connection_type),
            offset_of!(R, gin_exclusive_contexts),
            offset_of!(R, gin_queue_depth),
            offset_of!(R, gin_traffic_class),
            offset_of!(R, world_gin_barrier_count),
            offset_of!(R, gin_strong_signals_required),
            offset_of!(R, gin_va_signals_required),
            offset_of!(R, gin_custom_stride),
            offset_of!(R, gin_type),
            offset_of!(R, use_runtime_version),
            offset_of!(R, cft_caps),
            offset_of!(R, cft_barrier_count),
        ];
        // The offsets LAYOUT_PROBE asserts in the real header.
        assert_eq!(
            offsets,
            [
                16, 24, 32, 36, 40, 44, 48, 52, 56, 60, 64, 68, 72, 76, 80, 84, 88, 92, 93, 96,
                100, 104, 108, 112
            ]
        );
        let reqs = R::initializer(NcclVersion::new(2, 32, 3));
        assert_eq!(
            (reqs.size, reqs.magic, reqs.version),
            (120, 0xcafebeef, 23203)
        );
    }

    #[test]
    fn an_lsa_team_smaller_than_the_world_cannot_run() {
        assert!(check_lsa_team(2, 2).is_ok());
        assert!(check_lsa_team(8, 8).is_ok());
        // 2 emulated nodes of 1 GPU, and 2 x 2.
        let err = check_lsa_team(1, 2).unwrap_err();
        assert!(
            err.reason.starts_with(
                "the device communicator's LSA team holds 1 of the 2 ranks: the ranks span 2 nodes (world 2 / LSA team 1)"
            ),
            "{}",
            err.reason
        );
        assert!(err.reason.contains("wrong result"), "{}", err.reason);
        assert!(err.fix.contains("GIN half"), "{}", err.fix);
        assert!(err.fix.contains("ncclAllReduce"), "{}", err.fix);
        let err = check_lsa_team(2, 4).unwrap_err();
        assert!(err.reason.contains("span 2 nodes"), "{}", err.reason);
        // Uneven nodes (3 ranks, teams of 2): at least 2 nodes.
        assert!(check_lsa_team(2, 3)
            .unwrap_err()
            .reason
            .contains("span 2 nodes"));
        // A team of 0 (a broken read) is refused, not divided by.
        assert!(check_lsa_team(0, 2).is_err());
    }

    #[test]
    fn shim_status_codes_map_to_nccl_results() {
        assert_eq!(nccl_result(0), sys::ncclResult_t::ncclSuccess);
        assert_eq!(nccl_result(5), sys::ncclResult_t::ncclInvalidUsage);
        assert_eq!(nccl_result(7), sys::ncclResult_t::ncclInProgress);
        assert_eq!(nccl_result(99), sys::ncclResult_t::ncclInternalError);
    }
}
