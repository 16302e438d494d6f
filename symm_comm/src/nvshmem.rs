//! The NVSHMEM backend's host side: the host calls (`dlopen` of
//! `libnvshmem_host.so.3`): init over the project's own launcher with a
//! unique id, `nvshmem_malloc`, `nvshmemx_cumodule_init`, teardown. NVSHMEM
//! is found, and the module of your kernels and the library built (NVRTC,
//! then nvJitLink with `libnvshmem_device.a`), by `device_build::nvshmem`.
//!
//! NVSHMEM hosts one PE per process (its documentation; NVIDIA/nvshmem#48),
//! so this backend runs under `mpirun` only ([`check_before_threads`]
//! refuses it in thread mode).

use std::ffi::{c_int, c_uint, c_void, OsStr};
use std::path::{Path, PathBuf};

use anyhow::{ensure, Context, Result};
use common::CannotRun;
use cudarc::driver::sys as cu_sys;
use device_build::nvshmem::{find, Found, Search};

/// The check a program that uses NVSHMEM runs before any rank starts (its
/// option check, `common::run_checked`), on any machine: NVSHMEM needs one
/// process per GPU (`run` is the command the fix names), and its library
/// must be found. Names its bootstrap plugin by its full, checked path
/// ([`bootstrap_plugin`]) while no other thread exists.
pub fn check_before_threads(launch_mode: &str, run: &str) -> Result<(), CannotRun> {
    if launch_mode == "threads" {
        return Err(CannotRun::new(
            "the NVSHMEM backend needs one process per GPU: NVSHMEM cannot host several PEs in one process, and this build runs ranks as threads",
            format!("build with MPI and start one process per GPU:\n  cargo build --release --features mpi\n  mpirun -np 2 target/release/{run}"),
        ));
    }
    let found = find(&Search::from_process())?;
    let plugin = bootstrap_plugin(
        &found,
        std::env::var_os(BOOTSTRAP_PLUGIN_VARIABLE).as_deref(),
    )?;
    // NOTE: set here because the option check runs before any thread
    // starts (common::run_checked calls it first, in every MPI process):
    // set_var while another thread may read the environment is undefined
    // behaviour (unsafe from edition 2024), and by a rank's body the CUDA
    // driver and MPI run threads of their own. Always a full path, even
    // where the user named the plugin bare: NVSHMEM's loader would search
    // LD_LIBRARY_PATH first and could load a file nothing checked.
    std::env::set_var(BOOTSTRAP_PLUGIN_VARIABLE, plugin);
    Ok(())
}

/// The file name of NVSHMEM's unique-id bootstrap plugin, which its host
/// library `dlopen`s unless `NVSHMEM_BOOTSTRAP_UID_PLUGIN` names another.
pub const BOOTSTRAP_PLUGIN: &str = "nvshmem_bootstrap_uid.so.3";

/// The full path of the bootstrap plugin to name in
/// `NVSHMEM_BOOTSTRAP_UID_PLUGIN`, checked (common::trust): the one the user
/// `named` there, else NVSHMEM's own. A name with a slash is that file; a
/// bare name is found as the loader would find it
/// (`common::nccl_path::loader_search`: `LD_LIBRARY_PATH` first), else
/// beside the host library. Exit 2 (with the fix) if it is nowhere, or
/// another user could change it: NVSHMEM is then given the file checked,
/// never a name its loader might resolve to another.
pub fn bootstrap_plugin(found: &Found, named: Option<&OsStr>) -> Result<PathBuf, CannotRun> {
    resolve_plugin(found, named, common::nccl_path::loader_search)
}

/// [`bootstrap_plugin`], with the loader's search given (`loader_search`).
fn resolve_plugin(
    found: &Found,
    named: Option<&OsStr>,
    loader_search: impl Fn(&str) -> Option<PathBuf>,
) -> Result<PathBuf, CannotRun> {
    let beside = |name: &Path| found.host_library.with_file_name(name);
    let plugin = match named.filter(|n| !n.is_empty()) {
        None => Some(beside(Path::new(BOOTSTRAP_PLUGIN)))
            .filter(|p| p.is_file())
            .or_else(|| loader_search(BOOTSTRAP_PLUGIN)),
        Some(named) => {
            let path = Path::new(named);
            if path.components().count() > 1 || path.has_root() {
                std::path::absolute(path).ok().filter(|p| p.is_file())
            } else {
                named
                    .to_str()
                    .and_then(&loader_search)
                    .or_else(|| Some(beside(path)).filter(|p| p.is_file()))
            }
        }
    };
    let Some(plugin) = plugin else {
        let what = named.map_or(BOOTSTRAP_PLUGIN.into(), |n| {
            format!("NVSHMEM_BOOTSTRAP_UID_PLUGIN={}", n.to_string_lossy())
        });
        return Err(CannotRun::new(
            format!(
                "NVSHMEM's bootstrap plugin {what} was found nowhere (not on LD_LIBRARY_PATH, not in the loader's directories, not beside {})",
                found.host_library.display()
            ),
            format!(
                "set NVSHMEM_BOOTSTRAP_UID_PLUGIN to the plugin's full path, or unset it to use {} beside NVSHMEM's host library (the nvidia-nvshmem-cu13 wheel has it)",
                BOOTSTRAP_PLUGIN
            ),
        ));
    };
    common::trust::check_trusted(&plugin, "NVSHMEM's bootstrap plugin")?;
    Ok(plugin)
}

// ---------------------------------------------------------------------------
// The host library.
// ---------------------------------------------------------------------------

/// `nvshmemx_uniqueid_t`: 128 bytes (the id rank 0 makes and shares).
pub const UNIQUEID_BYTES: usize = 128;
/// `NVSHMEMX_INIT_WITH_UNIQUEID`.
pub const INIT_WITH_UNIQUEID: c_uint = 1 << 3;
/// `nvshmemx_init_attr_t` is 144 bytes in 3.4.5 and 3.8.0.
const ATTR_WORDS: usize = 18;

/// `nvshmemx_init_attr_t`, as bytes, with the version fields that NVSHMEM's
/// inline `nvshmemx_init_attr` would set (version 1 layouts: `attr` 144
/// bytes, `args` 128 at offset 16, `uid_args` 24 at offset 24).
fn init_attr() -> [u64; ATTR_WORDS] {
    let mut attr = [0u64; ATTR_WORDS];
    let mut put = |offset: usize, value: i32| {
        let word = &mut attr[offset / 8];
        let shift = (offset % 8) * 8;
        *word = (*word & !(0xffff_ffffu64 << shift)) | ((value as u32 as u64) << shift);
    };
    put(0, (1 << 16) + 144);
    put(16, (1 << 16) + 128);
    put(24, (1 << 16) + 24);
    attr
}

type GetUniqueId = unsafe extern "C" fn(*mut c_void) -> c_int;
type SetUniqueIdArgs = unsafe extern "C" fn(c_int, c_int, *const c_void, *mut c_void) -> c_int;
type InitAttr = unsafe extern "C" fn(c_uint, *mut c_void) -> c_int;
type Malloc = unsafe extern "C" fn(usize) -> *mut c_void;
type Free = unsafe extern "C" fn(*mut c_void);
type ModuleCall = unsafe extern "C" fn(cu_sys::CUmodule) -> c_int;
type Finalize = unsafe extern "C" fn();
type PeQuery = unsafe extern "C" fn() -> c_int;
type PeerPointer = unsafe extern "C" fn(*const c_void, c_int) -> *mut c_void;

/// `libnvshmem_host.so.3`, `dlopen`ed. Nothing initialised yet.
pub struct Library {
    pub path: PathBuf,
    get_uniqueid: GetUniqueId,
    set_uniqueid_args: SetUniqueIdArgs,
    init_attr: InitAttr,
    malloc: Malloc,
    free: Free,
    cumodule_init: ModuleCall,
    cumodule_finalize: ModuleCall,
    finalize: Finalize,
    my_pe: PeQuery,
    n_pes: PeQuery,
    peer_pointer: PeerPointer,
    _library: libloading::Library,
}

impl Library {
    pub fn load(found: &Found) -> Result<Self> {
        let path = &found.host_library;
        // NVSHMEM dlopens its unique-id bootstrap plugin from
        // NVSHMEM_BOOTSTRAP_UID_PLUGIN, which the option check
        // ([`check_before_threads`]) set to a full, checked path
        // ([`bootstrap_plugin`]): there, before any thread starts, not here,
        // where the CUDA driver's threads may read the environment. Both are
        // loaded from paths the environment names: refused (exit 2) if
        // another user could change them (common::trust).
        common::trust::check_trusted(path, "NVSHMEM's host library")?;
        check_plugin_variable(
            found,
            std::env::var_os(BOOTSTRAP_PLUGIN_VARIABLE).as_deref(),
        )?;
        // SAFETY: NVSHMEM's initialisers have no preconditions; the symbol
        // types are nvshmemx_api.h's and nvshmem_api.h's.
        unsafe {
            let library = libloading::Library::new(path)
                .with_context(|| format!("dlopen {}", path.display()))?;
            macro_rules! get {
                ($name:literal) => {
                    *library
                        .get(concat!($name, "\0").as_bytes())
                        .with_context(|| format!("{} has no {}", path.display(), $name))?
                };
            }
            Ok(Self {
                path: path.clone(),
                get_uniqueid: get!("nvshmemx_get_uniqueid"),
                set_uniqueid_args: get!("nvshmemx_set_attr_uniqueid_args"),
                init_attr: get!("nvshmemx_hostlib_init_attr"),
                malloc: get!("nvshmem_malloc"),
                free: get!("nvshmem_free"),
                cumodule_init: get!("nvshmemx_cumodule_init"),
                cumodule_finalize: get!("nvshmemx_cumodule_finalize"),
                finalize: get!("nvshmemx_hostlib_finalize"),
                my_pe: get!("nvshmem_my_pe"),
                n_pes: get!("nvshmem_n_pes"),
                peer_pointer: get!("nvshmem_ptr"),
                _library: library,
            })
        }
    }

    /// `nvshmemx_get_uniqueid`: on rank 0, the id the others join with.
    pub fn unique_id(&self) -> Result<[u8; UNIQUEID_BYTES]> {
        let mut id = [0u64; UNIQUEID_BYTES / 8];
        // SAFETY: writes the 128-byte id.
        let status = unsafe { (self.get_uniqueid)(id.as_mut_ptr().cast()) };
        ensure!(status == 0, "nvshmemx_get_uniqueid failed ({status})");
        let mut bytes = [0u8; UNIQUEID_BYTES];
        for (chunk, word) in bytes.chunks_exact_mut(8).zip(id) {
            chunk.copy_from_slice(&word.to_ne_bytes());
        }
        Ok(bytes)
    }

    /// `nvshmemx_set_attr_uniqueid_args` then `nvshmemx_hostlib_init_attr(
    /// NVSHMEMX_INIT_WITH_UNIQUEID)`: this process becomes PE `rank` of
    /// `ranks`, on the CUDA device current in this thread. Collective.
    pub fn init(
        &self,
        rank: usize,
        ranks: usize,
        id: &[u8; UNIQUEID_BYTES],
    ) -> Result<Session<'_>> {
        let mut words = [0u64; UNIQUEID_BYTES / 8];
        for (word, chunk) in words.iter_mut().zip(id.chunks_exact(8)) {
            *word = u64::from_ne_bytes(chunk.try_into().expect("8 bytes"));
        }
        let mut attr = init_attr();
        // SAFETY: `words` and `attr` have the sizes NVSHMEM 3.x declares;
        // NVSHMEM keeps the id pointer only until init returns.
        unsafe {
            let status = (self.set_uniqueid_args)(
                rank as c_int,
                ranks as c_int,
                words.as_ptr().cast(),
                attr.as_mut_ptr().cast(),
            );
            ensure!(
                status == 0,
                "nvshmemx_set_attr_uniqueid_args failed ({status})"
            );
            let status = (self.init_attr)(INIT_WITH_UNIQUEID, attr.as_mut_ptr().cast());
            ensure!(status == 0, "nvshmemx_hostlib_init_attr failed ({status})");
            let (me, n) = ((self.my_pe)(), (self.n_pes)());
            let session = Session { library: self };
            ensure!(
                me as usize == rank && n as usize == ranks,
                "NVSHMEM made this process PE {me} of {n}, not {rank} of {ranks}"
            );
            Ok(session)
        }
    }
}

/// An initialised NVSHMEM: `nvshmemx_hostlib_finalize` on release.
pub struct Session<'a> {
    library: &'a Library,
}

impl<'a> Session<'a> {
    /// `nvshmem_malloc(bytes)`: collective; the same symmetric address on every PE.
    pub fn malloc(&self, bytes: usize) -> Result<SymmetricBuffer<'a>> {
        // SAFETY: NVSHMEM is initialised.
        let ptr = unsafe { (self.library.malloc)(bytes) };
        ensure!(
            !ptr.is_null(),
            "nvshmem_malloc({bytes}) returned NULL (the symmetric heap is NVSHMEM_SYMMETRIC_SIZE, 1 GiB by default)"
        );
        Ok(SymmetricBuffer {
            library: self.library,
            ptr,
            bytes,
        })
    }

    /// `nvshmemx_cumodule_init(module)`: fills the module's NVSHMEM device
    /// state; without it the device calls read an uninitialised state.
    ///
    /// # Safety
    /// `module` must be loaded in the current context and stay loaded until
    /// the returned guard is dropped.
    pub unsafe fn init_module(&self, module: cu_sys::CUmodule) -> Result<ModuleInit<'a>> {
        // SAFETY: the caller's promise.
        let status = unsafe { (self.library.cumodule_init)(module) };
        ensure!(status == 0, "nvshmemx_cumodule_init failed ({status})");
        Ok(ModuleInit {
            library: self.library,
            module,
        })
    }

    /// `nvshmemx_hostlib_finalize`.
    pub fn finalize(self) {
        // SAFETY: initialised in `init`; nothing NVSHMEM is used after this.
        unsafe { (self.library.finalize)() };
        std::mem::forget(self);
    }
}

impl Drop for Session<'_> {
    fn drop(&mut self) {
        // SAFETY: as in `finalize`.
        unsafe { (self.library.finalize)() };
    }
}

/// A buffer on the symmetric heap: `nvshmem_free` on release.
pub struct SymmetricBuffer<'a> {
    library: &'a Library,
    ptr: *mut c_void,
    bytes: usize,
}

impl SymmetricBuffer<'_> {
    pub fn as_ptr(&self) -> *mut c_void {
        self.ptr
    }
    pub fn bytes(&self) -> usize {
        self.bytes
    }
    /// `nvshmem_free`: collective.
    pub fn free(self) {
        drop(self)
    }
    /// The PEs among `0..pes` whose copy of this buffer this GPU cannot
    /// reach by loads and stores: `nvshmem_ptr` returns NULL for them.
    pub fn unreachable_pes(&self, pes: usize) -> Vec<usize> {
        (0..pes)
            .filter(|&pe| {
                // SAFETY: NVSHMEM is initialised; nvshmem_ptr only looks up
                // the mapping of a symmetric address.
                unsafe { (self.library.peer_pointer)(self.ptr, pe as c_int) }.is_null()
            })
            .collect()
    }
}

/// `symm_all_reduce` reaches every PE by loads and stores. Asked on the host
/// and agreed by every rank (`ctx.all_ok`) before any kernel starts: decided
/// on the device alone, a rank that reaches every peer would wait in
/// NVSHMEM's barrier for one that returned `SYMM_ERR_TOPOLOGY`.
pub fn check_reachable(rank: usize, unreachable: &[usize]) -> Result<(), CannotRun> {
    if unreachable.is_empty() {
        return Ok(());
    }
    let pes: Vec<String> = unreachable.iter().map(usize::to_string).collect();
    Err(CannotRun::new(
        format!(
            "PE {rank} cannot reach PE {} by loads and stores (nvshmem_ptr returned NULL), \
             and symm_all_reduce reaches its peers only so",
            pes.join(", ")
        ),
        "run every PE on GPUs of one node that reach each other by NVLink or PCIe P2P \
         (nvidia-smi topo -m shows the links)",
    ))
}

impl Drop for SymmetricBuffer<'_> {
    fn drop(&mut self) {
        // SAFETY: from nvshmem_malloc, not used after this.
        unsafe { (self.library.free)(self.ptr) };
    }
}

/// A module whose NVSHMEM state was initialised: `nvshmemx_cumodule_finalize`
/// on release (before the module is unloaded).
pub struct ModuleInit<'a> {
    library: &'a Library,
    module: cu_sys::CUmodule,
}

impl Drop for ModuleInit<'_> {
    fn drop(&mut self) {
        // SAFETY: initialised in `init_module`, the module still loaded.
        let status = unsafe { (self.library.cumodule_finalize)(self.module) };
        if status != 0 {
            eprintln!("warning: cleanup: nvshmemx_cumodule_finalize failed ({status})");
        }
    }
}

/// The variable NVSHMEM reads for its unique-id bootstrap plugin.
pub const BOOTSTRAP_PLUGIN_VARIABLE: &str = "NVSHMEM_BOOTSTRAP_UID_PLUGIN";

/// `NVSHMEM_BOOTSTRAP_UID_PLUGIN` as NVSHMEM will read it (`value`) must be
/// the full path [`bootstrap_plugin`] gives: a bare name or no value would
/// let the loader pick a file nothing checked.
fn check_plugin_variable(found: &Found, value: Option<&OsStr>) -> Result<(), CannotRun> {
    let plugin = bootstrap_plugin(found, value)?;
    if value.is_some_and(|v| Path::new(v).is_absolute()) {
        return Ok(());
    }
    Err(CannotRun::new(
        format!(
            "{BOOTSTRAP_PLUGIN_VARIABLE} is {}, not a full path: NVSHMEM's loader could load another file than {} (checked)",
            value.map_or("unset".into(), |v| format!("'{}'", v.to_string_lossy())),
            plugin.display()
        ),
        format!("set {BOOTSTRAP_PLUGIN_VARIABLE}={}", plugin.display()),
    ))
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_nvshmem_others_can_write_is_not_loaded() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp.path().join("nvidia/nvshmem");
        let lib = root.join("lib");
        std::fs::create_dir_all(&lib).unwrap();
        for file in [
            device_build::nvshmem::HOST_LIBRARY,
            device_build::nvshmem::DEVICE_LIBRARY,
        ] {
            std::fs::write(lib.join(file), "").unwrap();
        }
        std::fs::create_dir_all(root.join("include")).unwrap();
        std::fs::write(root.join("include/nvshmem.h"), "").unwrap();
        std::fs::set_permissions(
            tmp.path().join("nvidia"),
            std::fs::Permissions::from_mode(0o777),
        )
        .unwrap();
        let found = super::find(&super::Search {
            nvshmem_home: Some(root.into()),
            ..super::Search::default()
        })
        .unwrap();
        let err = super::Library::load(&found).err().expect("refused");
        let refused = err.downcast_ref::<super::CannotRun>().expect("exit code 2");
        assert!(
            refused.reason.contains("NVSHMEM's host library"),
            "{refused:?}"
        );
    }

    /// An NVSHMEM root in `tmp` with every file `find` looks for (empty),
    /// and the bootstrap plugin beside the host library.
    fn nvshmem_root(tmp: &Path) -> Found {
        let root = tmp.join("nvidia/nvshmem");
        for file in [
            "lib/libnvshmem_host.so.3",
            "lib/libnvshmem_device.a",
            "lib/nvshmem_bootstrap_uid.so.3",
            "include/nvshmem.h",
        ] {
            let path = root.join(file);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, "").unwrap();
        }
        find(&Search {
            nvshmem_home: Some(root.into()),
            ..Search::default()
        })
        .unwrap()
    }

    fn chmod(path: &Path, mode: u32) {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn the_bootstrap_plugin_is_always_named_by_its_full_checked_path() {
        let tmp = tempfile::tempdir().unwrap();
        let found = nvshmem_root(tmp.path());
        let beside = found.root.join("lib").join(BOOTSTRAP_PLUGIN);
        let nowhere = |_: &str| None;
        // Not named: NVSHMEM's own, beside the host library.
        assert_eq!(resolve_plugin(&found, None, nowhere).unwrap(), beside);
        // Named bare: where the loader finds it first (LD_LIBRARY_PATH),
        // not beside the library.
        let other = tmp.path().join("ld-path");
        std::fs::create_dir(&other).unwrap();
        std::fs::write(other.join(BOOTSTRAP_PLUGIN), "").unwrap();
        let on_ld_path = |name: &str| Some(other.join(name)).filter(|p| p.is_file());
        let bare = OsStr::new(BOOTSTRAP_PLUGIN);
        assert_eq!(
            resolve_plugin(&found, Some(bare), on_ld_path).unwrap(),
            other.join(BOOTSTRAP_PLUGIN)
        );
        // ... and checked there: a directory others can write is refused.
        chmod(&other, 0o777);
        let err = resolve_plugin(&found, Some(bare), on_ld_path).unwrap_err();
        assert!(err.reason.contains("bootstrap plugin"), "{err:?}");
        assert!(err.reason.contains("mode 0777"), "{err:?}");
        // Named bare, not on the loader's path: beside the host library.
        assert_eq!(resolve_plugin(&found, Some(bare), nowhere).unwrap(), beside);
        // A bare name found nowhere is refused, not left to the loader.
        let err = resolve_plugin(&found, Some(OsStr::new("libnone.so")), nowhere).unwrap_err();
        assert!(err.reason.contains("libnone.so"), "{err:?}");
        assert!(err.fix.contains("full path"), "{err:?}");
        // A full path is that file, checked.
        let full = other.join(BOOTSTRAP_PLUGIN);
        let err = resolve_plugin(&found, Some(full.as_os_str()), nowhere).unwrap_err();
        assert!(err.reason.contains("mode 0777"), "{err:?}");
        chmod(&other, 0o755);
        assert_eq!(
            resolve_plugin(&found, Some(full.as_os_str()), nowhere).unwrap(),
            full
        );
        // NVSHMEM's own missing, and the loader finds none: refused.
        std::fs::remove_file(&beside).unwrap();
        let err = resolve_plugin(&found, None, nowhere).unwrap_err();
        assert!(err.reason.contains(BOOTSTRAP_PLUGIN), "{err:?}");
    }

    #[test]
    fn the_library_is_loaded_only_with_the_plugin_named_by_full_path() {
        let tmp = tempfile::tempdir().unwrap();
        let found = nvshmem_root(tmp.path());
        let beside = found.root.join("lib").join(BOOTSTRAP_PLUGIN);
        assert!(check_plugin_variable(&found, Some(beside.as_os_str())).is_ok());
        for value in [None, Some(OsStr::new(BOOTSTRAP_PLUGIN))] {
            let err = check_plugin_variable(&found, value).unwrap_err();
            assert!(err.reason.contains("not a full path"), "{err:?}");
            assert!(err.fix.contains(&beside.display().to_string()), "{err:?}");
        }
    }

    #[test]
    fn an_unreachable_pe_is_refused_by_name() {
        assert!(check_reachable(0, &[]).is_ok());
        let refused = check_reachable(1, &[0, 3]).unwrap_err();
        assert!(
            refused.reason.contains("PE 1 cannot reach PE 0, 3"),
            "{refused:?}"
        );
        assert!(refused.fix.contains("P2P"), "{refused:?}");
    }

    use super::*;

    #[test]
    fn the_init_attr_carries_nvshmems_version_words() {
        let attr = init_attr();
        assert_eq!(attr[0] as u32, (1 << 16) + 144);
        assert_eq!(attr[2] as u32, (1 << 16) + 128);
        assert_eq!(attr[3] as u32, (1 << 16) + 24);
        assert_eq!(size_of::<[u64; ATTR_WORDS]>(), 144);
    }
}
