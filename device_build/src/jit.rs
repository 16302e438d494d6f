//! The jit route: NVRTC compiles the kernel to LTO-IR, nvJitLink links it with
//! NCCL's own device library (`lib/libnccl_device.ltoir`) into a cubin. No
//! nvcc, no host shim, no CUDA toolkit: NVRTC, nvJitLink and the CUDA headers
//! come from pip wheels (`nvidia-cuda-nvrtc`, `nvidia-nvjitlink`,
//! `nvidia-cuda-cccl`, `nvidia-cuda-runtime`) or from a toolkit.
//!
//! The kernels call the C-style API of `nccl_device_wrapper.h`, whose
//! functions the device library defines. NVRTC and nvJitLink are loaded at run
//! time with `dlopen`; both run without a GPU.

use std::ffi::{c_char, c_int, c_uint, c_void, CStr, CString};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use common::{CannotRun, NcclVersion};

use crate::cache::{self, CacheRoot, Job};
use crate::command::{shell_word, Ran};
use crate::env::Env;
use crate::Source;

/// The stand-ins for the C and C++ library headers that NVRTC does not ship
/// and NCCL's headers include, each forwarding to libcu++ (`cuda/std/...`).
pub const STAND_INS: [(&str, &str); 7] = [
    ("stdint.h", include_str!("../nvrtc-include/stdint.h")),
    ("stdbool.h", include_str!("../nvrtc-include/stdbool.h")),
    ("limits.h", include_str!("../nvrtc-include/limits.h")),
    ("stdlib.h", include_str!("../nvrtc-include/stdlib.h")),
    ("algorithm", include_str!("../nvrtc-include/algorithm")),
    ("cassert", include_str!("../nvrtc-include/cassert")),
    ("type_traits", include_str!("../nvrtc-include/type_traits")),
];

/// The fix named whenever the jit route cannot be taken.
pub const USE_NVCC: &str = "--build nvcc (needs the CUDA toolkit's nvcc)";

// ---------------------------------------------------------------------------
// Finding the pieces.
// ---------------------------------------------------------------------------

/// The Python `site-packages` directories that may hold the NVIDIA wheels,
/// found without running Python ([`common::pip::sites`]): the one the loaded
/// NCCL came from (a wheel installs `site-packages/nvidia/nccl/lib/libnccl.so.2`),
/// the one of the NCCL that `NCCL_HOME` names (`site-packages/nvidia/nccl`),
/// then those of the active virtual environment and conda environment.
pub fn site_packages(env: &Env, nccl_library: &Path) -> Vec<PathBuf> {
    common::pip::sites(
        nccl_library,
        env.nccl_home.as_deref(),
        &[env.virtual_env.as_deref(), env.conda_prefix.as_deref()],
    )
}

/// The toolkit directories: `$CUDA_HOME`, then `/usr/local/cuda`
/// ([`Env::default_toolkit`]).
fn toolkits(env: &Env) -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = env.cuda_home.iter().map(PathBuf::from).collect();
    dirs.extend(env.default_toolkit.clone());
    dirs
}

/// Where a library of the CUDA toolkit is looked for: `explicit` (an
/// environment variable; if set, nothing else is tried), each site-packages'
/// wheel layouts ([`common::pip`]: CUDA 13 wheels put every library in
/// `nvidia/cu13/lib`, CUDA 12 wheels in `nvidia/<component>/lib`), then each
/// toolkit's `lib64`.
fn library_candidates(
    explicit: &Option<std::ffi::OsString>,
    sites: &[PathBuf],
    toolkits: &[PathBuf],
    wheel_files: &[&str],
    toolkit_files: &[&str],
) -> Vec<PathBuf> {
    if let Some(path) = explicit {
        return vec![PathBuf::from(path)];
    }
    let mut candidates = Vec::new();
    for site in sites {
        candidates.extend(wheel_files.iter().map(|f| site.join(f)));
    }
    for toolkit in toolkits {
        candidates.extend(toolkit_files.iter().map(|f| toolkit.join("lib64").join(f)));
    }
    candidates
}

pub fn nvrtc_candidates(env: &Env, sites: &[PathBuf]) -> Vec<PathBuf> {
    library_candidates(
        &env.nvrtc,
        sites,
        &toolkits(env),
        &common::pip::NVRTC,
        &["libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12"],
    )
}

pub fn nvjitlink_candidates(env: &Env, sites: &[PathBuf]) -> Vec<PathBuf> {
    library_candidates(
        &env.nvjitlink,
        sites,
        &toolkits(env),
        &common::pip::NVJITLINK,
        &[
            "libnvJitLink.so",
            "libnvJitLink.so.13",
            "libnvJitLink.so.12",
        ],
    )
}

/// The first candidate that exists, refused (exit 2) if another user could
/// change it ([`common::trust`]); or where it was looked for.
fn pick(candidates: &[PathBuf], what: &str, fix: &str) -> Result<PathBuf, CannotRun> {
    if let Some(found) = candidates.iter().find(|c| c.is_file()) {
        common::trust::check_trusted(found, what)?;
        return Ok(found.clone());
    }
    let looked: Vec<String> = candidates.iter().map(|c| c.display().to_string()).collect();
    Err(CannotRun::new(
        format!("{what} not found (looked for {})", looked.join(", ")),
        format!("{fix}, or {USE_NVCC}"),
    ))
}

pub fn find_nvrtc(env: &Env, sites: &[PathBuf]) -> Result<PathBuf, CannotRun> {
    pick(
        &nvrtc_candidates(env, sites),
        "NVRTC (libnvrtc.so)",
        "pip install nvidia-cuda-nvrtc (into the Python environment NCCL came from), or set NVRTC to libnvrtc.so's path",
    )
}

pub fn find_nvjitlink(env: &Env, sites: &[PathBuf]) -> Result<PathBuf, CannotRun> {
    pick(
        &nvjitlink_candidates(env, sites),
        "nvJitLink (libnvJitLink.so)",
        "pip install nvidia-nvjitlink (into the Python environment NCCL came from), or set NVJITLINK to libnvJitLink.so's path",
    )
}

/// The include directories NVRTC needs for the CUDA headers: the runtime's
/// (`cuda_runtime.h`, `cuda_fp16.h`, ...) and CCCL's (`cuda/std/...`), from
/// the wheels (`nvidia/cu13/include` and `nvidia/cu13/include/cccl`) or from a
/// toolkit (`include`, and `include/cccl` from CUDA 13 on). Each directory
/// is one no other user can change (common::trust), else exit 2: NVRTC
/// compiles what they hold into the kernel.
pub fn find_cuda_headers(env: &Env, sites: &[PathBuf]) -> Result<Vec<PathBuf>, CannotRun> {
    let mut roots: Vec<PathBuf> = sites
        .iter()
        .map(|s| s.join(common::pip::CUDA_INCLUDE))
        .collect();
    roots.extend(toolkits(env).iter().map(|t| t.join("include")));
    let runtime = roots.iter().find(|r| r.join("cuda_runtime.h").is_file());
    let cccl = roots
        .iter()
        .flat_map(|r| [r.join("cccl"), r.clone()])
        .find(|r| r.join("cuda/std/cstdint").is_file());
    match (runtime, cccl) {
        (Some(runtime), Some(cccl)) => {
            let mut dirs = vec![runtime.clone()];
            if cccl != *runtime {
                dirs.push(cccl);
            }
            for dir in &dirs {
                common::trust::check_trusted(dir, "the CUDA headers")?;
            }
            Ok(dirs)
        }
        (runtime, _) => {
            let looked: Vec<String> = roots.iter().map(|c| c.display().to_string()).collect();
            let missing = if runtime.is_none() {
                "cuda_runtime.h"
            } else {
                "cuda/std/cstdint (CCCL)"
            };
            Err(CannotRun::new(
                format!(
                    "the CUDA headers NVRTC needs ({missing}) are not in {}",
                    looked.join(", ")
                ),
                format!(
                    "pip install nvidia-cuda-runtime nvidia-cuda-cccl (into the Python environment NCCL came from), or set CUDA_HOME to a toolkit, or {USE_NVCC}"
                ),
            ))
        }
    }
}

/// NCCL's device library, beside the loaded library (`lib/` of a wheel or a
/// tarball) or in `$NCCL_HOME/lib`.
pub fn find_device_library(
    env: &Env,
    nccl_library: &Path,
    nccl: NcclVersion,
) -> Result<PathBuf, CannotRun> {
    let mut candidates = Vec::new();
    if let Some(home) = &env.nccl_home {
        candidates.push(Path::new(home).join("lib/libnccl_device.ltoir"));
    }
    if let Some(dir) = nccl_library.parent() {
        candidates.push(dir.join("libnccl_device.ltoir"));
    }
    if let Some(found) = candidates.iter().find(|c| c.is_file()) {
        common::trust::check_trusted(found, "NCCL's device library")?;
        return Ok(found.clone());
    }
    let looked: Vec<String> = candidates.iter().map(|c| c.display().to_string()).collect();
    Err(CannotRun::new(
        format!(
            "NCCL {nccl} ({}) ships no device library: no libnccl_device.ltoir in {} (the LTO-IR device library comes with NCCL 2.31 and later)",
            nccl_library.display(),
            looked.join(", ")
        ),
        format!("pip install -U nvidia-nccl-cu13 (2.32.3 or later), or {USE_NVCC}"),
    ))
}

// ---------------------------------------------------------------------------
// What this build knows about the NCCL release.
// ---------------------------------------------------------------------------

/// The NCCL releases whose `ncclDevCommRequirements` layout and wrapper names
/// this build knows (checked in their headers). `ncclDevComm` is 248 bytes in
/// 2.32.3.
pub const KNOWN_RELEASES: [NcclVersion; 1] = [NcclVersion::new(2, 32, 3)];

/// The jit route calls `ncclDevCommCreate` from Rust with a requirements
/// struct laid out by hand, so only releases whose layout is known may run.
pub fn check_known_release(nccl: NcclVersion) -> Result<(), CannotRun> {
    if KNOWN_RELEASES.contains(&nccl) {
        return Ok(());
    }
    let known: Vec<String> = KNOWN_RELEASES.iter().map(|v| v.to_string()).collect();
    Err(CannotRun::new(
        format!(
            "the jit route knows the device-communicator layout and nccl_device_wrapper.h names of NCCL {} only; this is NCCL {nccl}",
            known.join(", ")
        ),
        format!("use NCCL {} (pip install nvidia-nccl-cu13=={}), or {USE_NVCC}", known.join(", "), known[0]),
    ))
}

/// Checks that `nccl_device_wrapper.h` declares every function the kernels
/// call. Its names change between releases: after 2.32.3 NCCL renames them
/// to `ncclIr*`, with opaque fixed-size structs.
pub fn check_wrapper_names(
    wrapper: &str,
    path: &Path,
    nccl: NcclVersion,
    used: &[&str],
) -> Result<(), CannotRun> {
    let declared = |name: &str| {
        wrapper.match_indices(name).any(|(at, _)| {
            let after = wrapper[at + name.len()..].chars().next();
            let before = wrapper[..at].chars().next_back();
            !matches!(after, Some(c) if c.is_alphanumeric() || c == '_')
                && !matches!(before, Some(c) if c.is_alphanumeric() || c == '_')
        })
    };
    let missing: Vec<&str> = used.iter().copied().filter(|n| !declared(n)).collect();
    if missing.is_empty() {
        return Ok(());
    }
    let renamed = if wrapper.contains("ncclIr") {
        " (it uses the later ncclIr* names)"
    } else {
        ""
    };
    Err(CannotRun::new(
        format!(
            "{} (NCCL {nccl}) does not declare {}{renamed}: this build's kernels use the names of NCCL 2.32.3's wrapper, which change between releases",
            path.display(),
            missing.join(", ")
        ),
        format!("use NCCL 2.32.3 (pip install nvidia-nccl-cu13==2.32.3), or {USE_NVCC}"),
    ))
}

// ---------------------------------------------------------------------------
// LTO-IR.
// ---------------------------------------------------------------------------

/// The first bytes of every LTO-IR file (an NVVM container).
pub const LTOIR_MAGIC: [u8; 4] = [0xed, 0x43, 0x4e, 0x7f];

/// The NVVM IR version an LTO-IR file's header records (bytes 5 and 7). Seen:
/// NVRTC 13.0 writes 65.98, NVRTC 13.5 67.131; NCCL 2.31.2's device library
/// is 67.115 and 2.32.3's 67.120, and nvJitLink 13.0 refuses the latter.
pub fn ltoir_version(bytes: &[u8]) -> Option<(u8, u8)> {
    if bytes.len() < 64 || bytes[..4] != LTOIR_MAGIC || bytes[4] != 1 || bytes[6] != 2 {
        return None;
    }
    Some((bytes[5], bytes[7]))
}

/// Checks that `bytes` (read from `path`) look like an LTO-IR file: the
/// magic and a header. A file cut short past its header is found by
/// nvJitLink, and reported by [`link_error`].
pub fn check_ltoir(bytes: &[u8], path: &Path) -> Result<(u8, u8), CannotRun> {
    ltoir_version(bytes).ok_or_else(|| {
        CannotRun::new(
            format!(
                "{} is not an LTO-IR file ({} bytes, no NVVM container header): corrupt or truncated",
                path.display(),
                bytes.len()
            ),
            format!("reinstall NCCL (pip install --force-reinstall nvidia-nccl-cu13), or {USE_NVCC}"),
        )
    })
}

// ---------------------------------------------------------------------------
// NVRTC and nvJitLink, loaded at run time.
// ---------------------------------------------------------------------------

type NvrtcProgram = *mut c_void;
type NvJitLinkHandle = *mut c_void;

/// NVRTC, `dlopen`ed.
pub struct Nvrtc {
    pub path: PathBuf,
    pub version: (i32, i32),
    create: unsafe extern "C" fn(
        *mut NvrtcProgram,
        *const c_char,
        *const c_char,
        c_int,
        *const *const c_char,
        *const *const c_char,
    ) -> c_int,
    compile: unsafe extern "C" fn(NvrtcProgram, c_int, *const *const c_char) -> c_int,
    log_size: unsafe extern "C" fn(NvrtcProgram, *mut usize) -> c_int,
    log: unsafe extern "C" fn(NvrtcProgram, *mut c_char) -> c_int,
    ltoir_size: unsafe extern "C" fn(NvrtcProgram, *mut usize) -> c_int,
    ltoir: unsafe extern "C" fn(NvrtcProgram, *mut c_char) -> c_int,
    destroy: unsafe extern "C" fn(*mut NvrtcProgram) -> c_int,
    _builtins: Vec<libloading::Library>,
    _library: libloading::Library,
}

/// `dlopen`s `path`, refused (exit 2, the [`CannotRun`] uncontexted) if
/// another user could change it ([`common::trust`]).
fn open(path: &Path, global: bool) -> Result<libloading::Library> {
    use libloading::os::unix::{Library, RTLD_GLOBAL, RTLD_LOCAL, RTLD_NOW};
    let what = path
        .file_name()
        .map_or("a library".into(), |n| n.to_string_lossy().into_owned());
    common::trust::check_trusted(path, &what)?;
    let flags = RTLD_NOW | if global { RTLD_GLOBAL } else { RTLD_LOCAL };
    // SAFETY: NVIDIA's libraries run no initialisers with preconditions.
    Ok(unsafe { Library::open(Some(path), flags) }
        .with_context(|| format!("dlopen {}", path.display()))?
        .into())
}

/// `*library.get(name)`, with the name in the error.
///
/// # Safety
/// `T` must be the symbol's type.
unsafe fn symbol<T: Copy>(library: &libloading::Library, name: &str) -> Result<T> {
    let c = CString::new(name)?;
    Ok(*library
        .get::<T>(c.as_bytes_with_nul())
        .with_context(|| format!("look up {name}"))?)
}

impl Nvrtc {
    pub fn load(path: &Path) -> Result<Self> {
        // NVRTC dlopens libnvrtc-builtins.so.<major>.<minor> by name, which
        // the loader finds in a wheel's lib/ only if it is on
        // LD_LIBRARY_PATH (13.5 finds it, 13.0 does not): load it first.
        let mut builtins = Vec::new();
        if let Some(dir) = path.parent() {
            if let Ok(entries) = std::fs::read_dir(dir) {
                let mut names: Vec<PathBuf> = entries
                    .flatten()
                    .map(|e| e.path())
                    .filter(|p| {
                        p.file_name().is_some_and(|n| {
                            n.to_string_lossy().starts_with("libnvrtc-builtins.so")
                        })
                    })
                    .collect();
                names.sort();
                for name in names {
                    builtins.push(open(&name, true)?);
                }
            }
        }
        let library = open(path, false)?;
        // SAFETY: the signatures are nvrtc.h's.
        unsafe {
            let version: unsafe extern "C" fn(*mut c_int, *mut c_int) -> c_int =
                symbol(&library, "nvrtcVersion")?;
            let (mut major, mut minor) = (0, 0);
            version(&mut major, &mut minor);
            Ok(Self {
                path: path.to_path_buf(),
                version: (major, minor),
                create: symbol(&library, "nvrtcCreateProgram")?,
                compile: symbol(&library, "nvrtcCompileProgram")?,
                log_size: symbol(&library, "nvrtcGetProgramLogSize")?,
                log: symbol(&library, "nvrtcGetProgramLog")?,
                ltoir_size: symbol(&library, "nvrtcGetLTOIRSize")?,
                ltoir: symbol(&library, "nvrtcGetLTOIR")?,
                destroy: symbol(&library, "nvrtcDestroyProgram")?,
                _builtins: builtins,
                _library: library,
            })
        }
    }

    /// Compiles `source` with `options` into LTO-IR. Err: NVRTC's log.
    pub fn compile_ltoir(
        &self,
        name: &str,
        source: &str,
        options: &[String],
    ) -> Result<Result<Vec<u8>, String>> {
        let source = CString::new(source)?;
        let name = CString::new(name)?;
        let options: Vec<CString> = options
            .iter()
            .map(|o| CString::new(o.as_str()))
            .collect::<Result<_, _>>()?;
        let pointers: Vec<*const c_char> = options.iter().map(|o| o.as_ptr()).collect();
        let mut program: NvrtcProgram = std::ptr::null_mut();
        // SAFETY: every pointer is a live NUL-terminated string; the program
        // is destroyed before returning.
        unsafe {
            let status = (self.create)(
                &mut program,
                source.as_ptr(),
                name.as_ptr(),
                0,
                std::ptr::null(),
                std::ptr::null(),
            );
            anyhow::ensure!(status == 0, "nvrtcCreateProgram failed ({status})");
            let status = (self.compile)(program, pointers.len() as c_int, pointers.as_ptr());
            let mut size = 0usize;
            (self.log_size)(program, &mut size);
            let mut log = vec![0u8; size.max(1)];
            (self.log)(program, log.as_mut_ptr().cast());
            let log = CStr::from_bytes_until_nul(&log)
                .map(|c| c.to_string_lossy().into_owned())
                .unwrap_or_default();
            let result = if status == 0 {
                (self.ltoir_size)(program, &mut size);
                let mut ir = vec![0u8; size];
                (self.ltoir)(program, ir.as_mut_ptr().cast());
                Ok(ir)
            } else {
                Err(log)
            };
            (self.destroy)(&mut program);
            Ok(result)
        }
    }
}

/// "NVRTC 13.5 (/path/libnvrtc.so.13)", as the notes and errors name it.
impl std::fmt::Display for Nvrtc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (major, minor) = self.version;
        write!(f, "NVRTC {major}.{minor} ({})", self.path.display())
    }
}

/// "nvJitLink 13.5 (/path/libnvJitLink.so.13)", as the notes and errors name it.
impl std::fmt::Display for NvJitLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (major, minor) = self.version;
        write!(f, "nvJitLink {major}.{minor} ({})", self.path.display())
    }
}

/// nvJitLink, `dlopen`ed. Its entry points are versioned
/// (`__nvJitLinkCreate_13_5`): `nvJitLink.h` maps each name to the version of
/// the header, so a program built against it calls those. Loading it
/// dynamically, we ask the library its version (`nvJitLinkVersion`, the one
/// unversioned call) and look up that version's names.
pub struct NvJitLink {
    pub path: PathBuf,
    pub version: (u32, u32),
    create: unsafe extern "C" fn(*mut NvJitLinkHandle, c_uint, *const *const c_char) -> c_int,
    add_data:
        unsafe extern "C" fn(NvJitLinkHandle, c_int, *const c_void, usize, *const c_char) -> c_int,
    complete: unsafe extern "C" fn(NvJitLinkHandle) -> c_int,
    cubin_size: unsafe extern "C" fn(NvJitLinkHandle, *mut usize) -> c_int,
    cubin: unsafe extern "C" fn(NvJitLinkHandle, *mut c_void) -> c_int,
    error_log_size: unsafe extern "C" fn(NvJitLinkHandle, *mut usize) -> c_int,
    error_log: unsafe extern "C" fn(NvJitLinkHandle, *mut c_char) -> c_int,
    destroy: unsafe extern "C" fn(*mut NvJitLinkHandle) -> c_int,
    _library: libloading::Library,
}

/// `nvJitLinkAddData`'s input type for LTO-IR (`NVJITLINK_INPUT_LTOIR`).
const NVJITLINK_INPUT_LTOIR: c_int = 3;
/// `nvJitLinkAddData`'s input type for an archive (`NVJITLINK_INPUT_LIBRARY`).
const NVJITLINK_INPUT_LIBRARY: c_int = 6;

/// What one input to [`NvJitLink::link_inputs`] is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkInput {
    /// LTO-IR (NVRTC's `-dlto` output, NCCL's `libnccl_device.ltoir`).
    Ltoir,
    /// A static archive of device code (`.a`).
    Library,
}
/// `NVJITLINK_ERROR_OUTDATED_LIBRARY`: the input is newer than this nvJitLink.
pub const NVJITLINK_ERROR_OUTDATED_LIBRARY: c_int = 14;

/// The versioned name of an nvJitLink entry point, e.g.
/// `__nvJitLinkCreate_13_5`.
pub fn versioned_name(function: &str, version: (u32, u32)) -> String {
    format!("__nvJitLink{function}_{}_{}", version.0, version.1)
}

impl NvJitLink {
    pub fn load(path: &Path) -> Result<Self> {
        let library = open(path, false)?;
        // SAFETY: the signatures are nvJitLink.h's.
        unsafe {
            let version: unsafe extern "C" fn(*mut c_uint, *mut c_uint) -> c_int =
                symbol(&library, "nvJitLinkVersion")?;
            let (mut major, mut minor) = (0, 0);
            version(&mut major, &mut minor);
            let v = (major, minor);
            let name = |f: &str| versioned_name(f, v);
            Ok(Self {
                path: path.to_path_buf(),
                version: v,
                create: symbol(&library, &name("Create"))?,
                add_data: symbol(&library, &name("AddData"))?,
                complete: symbol(&library, &name("Complete"))?,
                cubin_size: symbol(&library, &name("GetLinkedCubinSize"))?,
                cubin: symbol(&library, &name("GetLinkedCubin"))?,
                error_log_size: symbol(&library, &name("GetErrorLogSize"))?,
                error_log: symbol(&library, &name("GetErrorLog"))?,
                destroy: symbol(&library, &name("Destroy"))?,
                _library: library,
            })
        }
    }

    /// Links LTO-IR inputs (name, bytes) into a cubin for `arch`.
    /// Err: the failing step's status, the input it was adding, and the log.
    pub fn link(
        &self,
        arch: &str,
        inputs: &[(&str, &[u8])],
    ) -> Result<Result<Vec<u8>, LinkFailure>> {
        let typed: Vec<(&str, &[u8], LinkInput)> = inputs
            .iter()
            .map(|(name, bytes)| (*name, *bytes, LinkInput::Ltoir))
            .collect();
        self.link_inputs(arch, &typed)
    }

    /// [`link`](Self::link) with each input's kind given: LTO-IR, or an
    /// archive of relocatable device code (NVSHMEM's `libnvshmem_device.a`,
    /// for lesson 06), which nvJitLink links with `-lto` as well.
    pub fn link_inputs(
        &self,
        arch: &str,
        inputs: &[(&str, &[u8], LinkInput)],
    ) -> Result<Result<Vec<u8>, LinkFailure>> {
        let options = link_options(arch)
            .into_iter()
            .map(CString::new)
            .collect::<Result<Vec<_>, _>>()?;
        let pointers: Vec<*const c_char> = options.iter().map(|o| o.as_ptr()).collect();
        let mut handle: NvJitLinkHandle = std::ptr::null_mut();
        // SAFETY: live pointers and lengths; the handle is destroyed below.
        unsafe {
            let status = (self.create)(&mut handle, pointers.len() as c_uint, pointers.as_ptr());
            anyhow::ensure!(status == 0, "nvJitLinkCreate failed ({status})");
            let mut failure = None;
            for (name, bytes, kind) in inputs {
                let cname = CString::new(*name)?;
                let kind = match kind {
                    LinkInput::Ltoir => NVJITLINK_INPUT_LTOIR,
                    LinkInput::Library => NVJITLINK_INPUT_LIBRARY,
                };
                let status = (self.add_data)(
                    handle,
                    kind,
                    bytes.as_ptr().cast(),
                    bytes.len(),
                    cname.as_ptr(),
                );
                if status != 0 {
                    failure = Some((status, Some(name.to_string())));
                    break;
                }
            }
            if failure.is_none() {
                let status = (self.complete)(handle);
                if status != 0 {
                    failure = Some((status, None));
                }
            }
            let result = match failure {
                None => {
                    let mut size = 0usize;
                    (self.cubin_size)(handle, &mut size);
                    let mut cubin = vec![0u8; size];
                    (self.cubin)(handle, cubin.as_mut_ptr().cast());
                    Ok(cubin)
                }
                Some((status, input)) => {
                    let mut size = 0usize;
                    (self.error_log_size)(handle, &mut size);
                    let mut log = vec![0u8; size + 1];
                    (self.error_log)(handle, log.as_mut_ptr().cast());
                    let log = CStr::from_bytes_until_nul(&log)
                        .map(|c| c.to_string_lossy().into_owned())
                        .unwrap_or_default();
                    Err(LinkFailure { status, input, log })
                }
            };
            (self.destroy)(&mut handle);
            Ok(result)
        }
    }
}

/// nvJitLink's options: the GPU's architecture, and link-time optimisation
/// of the LTO-IR inputs.
pub fn link_options(arch: &str) -> Vec<String> {
    vec![format!("-arch={arch}"), "-lto".into()]
}

/// Why nvJitLink failed.
#[derive(Debug, Clone)]
pub struct LinkFailure {
    pub status: c_int,
    /// The input being added when it failed (None: at nvJitLinkComplete).
    pub input: Option<String>,
    pub log: String,
}

/// The nvJitLink version must be at least NVRTC's: nvJitLink reads only
/// LTO-IR of its own CUDA release or older.
pub fn check_versions(
    nvrtc: (i32, i32),
    nvjitlink: (u32, u32),
    path: &Path,
) -> Result<(), CannotRun> {
    if (nvjitlink.0 as i32, nvjitlink.1 as i32) >= nvrtc {
        return Ok(());
    }
    Err(CannotRun::new(
        format!(
            "nvJitLink {}.{} ({}) is older than NVRTC {}.{}: it cannot read the LTO-IR NVRTC writes",
            nvjitlink.0,
            nvjitlink.1,
            path.display(),
            nvrtc.0,
            nvrtc.1
        ),
        format!("pip install -U nvidia-nvjitlink (or point NVJITLINK at a newer one), or {USE_NVCC}"),
    ))
}

/// What a failed link means, as the reason and the fix.
pub fn link_error(
    failure: &LinkFailure,
    nvjitlink: (u32, u32),
    nvjitlink_path: &Path,
    device_library: &Path,
    library_ir: (u8, u8),
) -> CannotRun {
    let log = failure.log.trim();
    if failure.status == NVJITLINK_ERROR_OUTDATED_LIBRARY
        || log.contains("newer version of nvJitLink")
    {
        return CannotRun::new(
            format!(
                "nvJitLink {}.{} ({}) is older than the CUDA that built {} (LTO-IR version {}.{}): {log}",
                nvjitlink.0,
                nvjitlink.1,
                nvjitlink_path.display(),
                failure.input.as_deref().unwrap_or("an input"),
                library_ir.0,
                library_ir.1
            ),
            format!("pip install -U nvidia-nvjitlink (or point NVJITLINK at a newer one), or {USE_NVCC}"),
        );
    }
    let library_name = "libnccl_device.ltoir";
    if log.contains(&format!("{library_name}: parse"))
        || log.contains("Malformed block")
        || log.contains("Unexpected end of file")
    {
        return CannotRun::new(
            format!(
                "nvJitLink could not read {}: corrupt or truncated ({log})",
                device_library.display()
            ),
            format!(
                "reinstall NCCL (pip install --force-reinstall nvidia-nccl-cu13), or {USE_NVCC}"
            ),
        );
    }
    CannotRun::new(
        format!(
            "nvJitLink {}.{} could not link the kernel with {} (status {}): {log}",
            nvjitlink.0,
            nvjitlink.1,
            device_library.display(),
            failure.status
        ),
        format!("report it with the log above, and meanwhile use {USE_NVCC}"),
    )
}

/// What a failed NVRTC compile means: this release's headers do not compile
/// under NVRTC (2.31.2's do not: a `__host__` declaration in `core.h`).
pub fn compile_error(
    file: &str,
    log: &str,
    nvrtc: (i32, i32),
    nccl: NcclVersion,
    include: &Path,
) -> CannotRun {
    let log: Vec<&str> = log
        .lines()
        .filter(|l| !l.trim().is_empty())
        .take(30)
        .collect();
    CannotRun::new(
        format!(
            "NVRTC {}.{} could not compile {file} against NCCL {nccl}'s headers ({}):\n{}",
            nvrtc.0,
            nvrtc.1,
            include.display(),
            log.join("\n")
        ),
        if nccl == NcclVersion::new(2, 32, 3) {
            // 2.32.3's headers compile under NVRTC 13.0 and 13.5 (call 15):
            // what failed is the program's own code under this NVRTC.
            format!(
                "the kernels' sources do not compile under this NVRTC (NCCL {nccl}'s headers do): \
                 pip install -U nvidia-cuda-nvrtc, or {USE_NVCC}"
            )
        } else {
            format!(
                "NCCL {nccl}'s device headers do not compile under NVRTC (2.32.3's do): use {USE_NVCC}, or NCCL 2.32.3"
            )
        },
    )
}

// ---------------------------------------------------------------------------
// The build.
// ---------------------------------------------------------------------------

/// Everything the jit build depends on.
pub struct Target {
    /// `sm_90` for compute capability 9.0.
    pub arch: String,
    pub nvrtc: Nvrtc,
    pub nvjitlink: NvJitLink,
    /// The NCCL headers (`nccl.h`, `nccl_device_wrapper.h`), of the loaded release.
    pub nccl_include: PathBuf,
    /// The CUDA runtime's and CCCL's include directories.
    pub cuda_include: Vec<PathBuf>,
    pub device_library: PathBuf,
    pub nccl: NcclVersion,
    /// The NCCL library this process loaded (`ncclDevCommCreate` is called from it).
    pub library: PathBuf,
    /// `-DNAME=VALUE` for every kernel.
    pub defines: Vec<(String, String)>,
    /// The kernel sources, each compiled and linked into its own cubin.
    pub kernels: Vec<Source>,
}

/// The directory the stand-in headers are written to, inside a build.
const STAND_IN_DIR: &str = "nvrtc-include";

impl Target {
    /// NVRTC's options for every kernel.
    pub fn nvrtc_options(&self, stand_ins: &Path) -> Vec<String> {
        let mut options = vec![
            format!("-arch={}", self.arch),
            // LTO-IR, which nvJitLink links with the device library.
            "-dlto".into(),
            // Functions without __device__/__host__ are device functions:
            // NCCL's headers have some of those.
            "-default-device".into(),
            "-std=c++17".into(),
            // The wrapper then declares the device API as the library
            // defines it (non-inline, external linkage).
            "-D__NCCL_DEVICE_LTOIR_LIB__".into(),
        ];
        options.extend(self.defines.iter().map(|(n, v)| format!("-D{n}={v}")));
        options.push(format!("-I{}", stand_ins.display()));
        options.push(format!("-I{}", self.nccl_include.display()));
        options.extend(
            self.cuda_include
                .iter()
                .map(|d| format!("-I{}", d.display())),
        );
        options
    }

    /// Everything that goes into the build, as text: the route, NVRTC's and
    /// nvJitLink's versions and paths, the device library (path, size,
    /// modification time) and the NCCL release, every option and source.
    pub fn key_text(&self) -> String {
        let mut text = format!(
            "route=jit\nnvrtc={}.{} {}\nnvjitlink={}.{} {}\ndevice_library={}\nnccl={}\n",
            self.nvrtc.version.0,
            self.nvrtc.version.1,
            self.nvrtc.path.display(),
            self.nvjitlink.version.0,
            self.nvjitlink.version.1,
            self.nvjitlink.path.display(),
            crate::cache::file_stamp(&self.device_library),
            self.nccl,
        );
        for option in self.nvrtc_options(Path::new(STAND_IN_DIR)) {
            text.push_str(&format!("option={option}\n"));
        }
        for (name, body) in STAND_INS {
            text.push_str(&format!("stand-in={name}\n{body}\n"));
        }
        for source in &self.kernels {
            text.push_str(&format!("source={}\n{}\n", source.file, source.text));
        }
        text
    }

    /// The name of the directory this build is cached in.
    pub fn cache_key(&self) -> String {
        self.job(&|_| Ok(())).key()
    }

    fn job<'a>(&self, compile: &'a dyn Fn(&Path) -> Result<()>) -> Job<'a> {
        Job {
            key_text: self.key_text(),
            outputs: vec![CUBIN.into()],
            compile,
        }
    }
}

/// The one cubin the jit route builds: every kernel of every source, linked
/// with the device library in one nvJitLink call, so that the library (10 MB
/// of LTO-IR in 2.32.3) is read and optimised once rather than per source.
pub const CUBIN: &str = "kernels_jit.cubin";

/// The cached build for `target`, compiling it first if the cache lacks it.
pub fn build_or_reuse(target: &Target, cache_root: &CacheRoot) -> Result<cache::Built> {
    Ok(build_or_reuse_saying(target, cache_root)?.0)
}

/// [`build_or_reuse`], with the NVRTC and nvJitLink calls the build made,
/// one line each in the form of a command ([`nvrtc_line`], [`link_line`]);
/// none when the cache held the build.
pub fn build_or_reuse_saying(
    target: &Target,
    cache_root: &CacheRoot,
) -> Result<(cache::Built, Vec<String>)> {
    let ran = Ran::default();
    let compile = |dir: &Path| compile_into(target, dir, &ran);
    let build = cache::build_or_reuse(&target.job(&compile), cache_root)?;
    let lines = ran.lines_in(&build.dir);
    Ok((build, lines))
}

/// The NVRTC call for `source` as a command line: `nvrtc OPTIONS SOURCE`,
/// then what ran it (`nvrtcCompileProgram` of this NVRTC, to LTO-IR in memory).
pub fn nvrtc_line(nvrtc: &dyn std::fmt::Display, options: &[String], source: &str) -> String {
    let mut words = vec!["nvrtc".to_string()];
    words.extend(options.iter().map(|o| shell_word(o)));
    words.push(shell_word(source));
    format!(
        "{}  # nvrtcCompileProgram, {nvrtc}, to LTO-IR",
        words.join(" ")
    )
}

/// The nvJitLink call as a command line: `nvjitlink OPTIONS INPUTS -o
/// CUBIN`, each input named by the source its LTO-IR came from or by its
/// file, then what ran it.
pub fn link_line(
    nvjitlink: &dyn std::fmt::Display,
    arch: &str,
    inputs: &[String],
    cubin: &Path,
) -> String {
    let typed: Vec<(String, LinkInput)> = inputs
        .iter()
        .map(|i| (i.clone(), LinkInput::Ltoir))
        .collect();
    link_inputs_line(nvjitlink, arch, &typed, cubin)
}

/// [`link_line`] with each input's kind given, as
/// [`NvJitLink::link_inputs`] takes them: the kinds added are named after
/// `nvJitLinkAddData`, in the order they first come (`LTO-IR, archive`).
pub fn link_inputs_line(
    nvjitlink: &dyn std::fmt::Display,
    arch: &str,
    inputs: &[(String, LinkInput)],
    cubin: &Path,
) -> String {
    let mut words = vec!["nvjitlink".to_string()];
    words.extend(link_options(arch).iter().map(|o| shell_word(o)));
    words.extend(inputs.iter().map(|(i, _)| shell_word(i)));
    words.extend(["-o".into(), shell_word(&cubin.display().to_string())]);
    let mut kinds: Vec<&str> = Vec::new();
    for (_, kind) in inputs {
        let name = match kind {
            LinkInput::Ltoir => "LTO-IR",
            LinkInput::Library => "archive",
        };
        if !kinds.contains(&name) {
            kinds.push(name);
        }
    }
    format!(
        "{}  # nvJitLinkCreate, nvJitLinkAddData ({}), nvJitLinkComplete, {nvjitlink}",
        words.join(" "),
        kinds.join(", ")
    )
}

/// Compiles every kernel source of `target` to LTO-IR and links them all with
/// the device library into `dir/kernels_jit.cubin`, recording each call in `ran`.
fn compile_into(target: &Target, dir: &Path, ran: &Ran) -> Result<()> {
    let stand_ins = dir.join(STAND_IN_DIR);
    std::fs::create_dir(&stand_ins).with_context(|| format!("create {}", stand_ins.display()))?;
    for (name, body) in STAND_INS {
        std::fs::write(stand_ins.join(name), body).with_context(|| format!("write {name}"))?;
    }
    check_versions(
        target.nvrtc.version,
        target.nvjitlink.version,
        &target.nvjitlink.path,
    )?;
    let library = std::fs::read(&target.device_library)
        .with_context(|| format!("read {}", target.device_library.display()))?;
    let library_ir = check_ltoir(&library, &target.device_library)?;
    let options = target.nvrtc_options(&stand_ins);
    for kernel in &target.kernels {
        ran.record(dir, nvrtc_line(&target.nvrtc, &options, kernel.file));
    }
    // One thread per source: NVRTC compiles separate programs concurrently,
    // and most of each compile is parsing the same headers.
    let compiled: Vec<Result<Result<Vec<u8>, String>>> = std::thread::scope(|scope| {
        let handles: Vec<_> = target
            .kernels
            .iter()
            .map(|kernel| {
                let options = &options;
                scope.spawn(move || {
                    target
                        .nvrtc
                        .compile_ltoir(kernel.file, kernel.text, options)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow::anyhow!("an NVRTC thread panicked")))
            })
            .collect()
    });
    let mut irs = Vec::new();
    for (kernel, result) in target.kernels.iter().zip(compiled) {
        let ir = result?.map_err(|log| {
            compile_error(
                kernel.file,
                &log,
                target.nvrtc.version,
                target.nccl,
                &target.nccl_include,
            )
        })?;
        irs.push((kernel.file, ir));
    }
    let mut inputs: Vec<(&str, &[u8])> = irs.iter().map(|(f, ir)| (*f, ir.as_slice())).collect();
    inputs.push(("libnccl_device.ltoir", &library));
    let out = dir.join(CUBIN);
    let named: Vec<String> = target
        .kernels
        .iter()
        .map(|k| k.file.to_string())
        .chain([target.device_library.display().to_string()])
        .collect();
    ran.record(
        dir,
        link_line(&target.nvjitlink, &target.arch, &named, &out),
    );
    let cubin = target
        .nvjitlink
        .link(&target.arch, &inputs)?
        .map_err(|failure| {
            link_error(
                &failure,
                target.nvjitlink.version,
                &target.nvjitlink.path,
                &target.device_library,
                library_ir,
            )
        })?;
    std::fs::write(&out, cubin).with_context(|| format!("write {}", out.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn touch(path: &Path) {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, "").unwrap();
    }

    #[test]
    fn the_jit_calls_read_as_commands_with_every_option_in_order() {
        let options = vec![
            "-arch=sm_90".to_string(),
            "-dlto".into(),
            "-DALLREDUCE_THREADS=512".into(),
            "-I/opt/my nccl/include".into(),
        ];
        assert_eq!(
            nvrtc_line(
                &"NVRTC 13.0 (/x/libnvrtc.so.13)",
                &options,
                "allreduce_lsa_c.cu"
            ),
            "nvrtc -arch=sm_90 -dlto -DALLREDUCE_THREADS=512 '-I/opt/my nccl/include' \
             allreduce_lsa_c.cu  # nvrtcCompileProgram, NVRTC 13.0 (/x/libnvrtc.so.13), to LTO-IR"
        );
        let inputs = vec![
            "allreduce_lsa_c.cu".to_string(),
            "/w/nvidia/nccl/lib/libnccl_device.ltoir".into(),
        ];
        assert_eq!(
            link_line(
                &"nvJitLink 13.5 (/x/libnvJitLink.so.13)",
                "sm_90",
                &inputs,
                Path::new("/c/k/kernels_jit.cubin")
            ),
            "nvjitlink -arch=sm_90 -lto allreduce_lsa_c.cu /w/nvidia/nccl/lib/libnccl_device.ltoir \
             -o /c/k/kernels_jit.cubin  # nvJitLinkCreate, nvJitLinkAddData (LTO-IR), \
             nvJitLinkComplete, nvJitLink 13.5 (/x/libnvJitLink.so.13)"
        );
        // The options printed are the ones nvJitLinkCreate is given.
        assert_eq!(link_options("sm_90"), ["-arch=sm_90", "-lto"]);
    }

    #[test]
    fn the_wheels_site_packages_is_found_from_the_loaded_nccl_and_the_venv() {
        let tmp = tempfile::tempdir().unwrap();
        let site = tmp.path().join("venv/lib/python3.12/site-packages");
        let nccl = site.join("nvidia/nccl/lib/libnccl.so.2");
        touch(&nccl);
        assert_eq!(site_packages(&Env::default(), &nccl), vec![site.clone()]);
        let env = Env {
            virtual_env: Some(tmp.path().join("venv").into()),
            ..Env::default()
        };
        // The same directory once, from either source.
        assert_eq!(
            site_packages(&env, Path::new("/usr/lib/libnccl.so.2")),
            vec![site.clone()]
        );
        assert_eq!(site_packages(&env, &nccl), vec![site]);
    }

    #[test]
    fn no_nvrtc_says_where_it_looked_and_names_both_fixes() {
        let tmp = tempfile::tempdir().unwrap();
        let sites = vec![tmp.path().to_path_buf()];
        let env = Env {
            cuda_home: Some(tmp.path().join("cuda").into()),
            ..Env::default()
        };
        let err = find_nvrtc(&env, &sites).unwrap_err();
        assert!(
            err.reason.starts_with("NVRTC (libnvrtc.so) not found"),
            "{err}"
        );
        assert!(
            err.reason.contains(
                &tmp.path()
                    .join("nvidia/cu13/lib/libnvrtc.so.13")
                    .display()
                    .to_string()
            ),
            "{err}"
        );
        assert!(
            err.fix.contains("pip install nvidia-cuda-nvrtc"),
            "{}",
            err.fix
        );
        assert!(err.fix.contains("--build nvcc"), "{}", err.fix);
        touch(&tmp.path().join("cuda/lib64/libnvrtc.so"));
        assert_eq!(
            find_nvrtc(&env, &sites).unwrap(),
            tmp.path().join("cuda/lib64/libnvrtc.so")
        );
        touch(&tmp.path().join("nvidia/cu13/lib/libnvrtc.so.13"));
        assert_eq!(
            find_nvrtc(&env, &sites).unwrap(),
            tmp.path().join("nvidia/cu13/lib/libnvrtc.so.13"),
            "the wheel beside NCCL comes first"
        );
    }

    #[test]
    fn no_nvjitlink_says_where_it_looked_and_names_both_fixes() {
        let tmp = tempfile::tempdir().unwrap();
        let env = Env {
            nvjitlink: Some(tmp.path().join("nope.so").into()),
            ..Env::default()
        };
        assert_eq!(
            nvjitlink_candidates(&env, &[tmp.path().into()]),
            vec![tmp.path().join("nope.so")],
            "NVJITLINK set: nothing else is tried"
        );
        let err = find_nvjitlink(&env, &[]).unwrap_err();
        assert!(
            err.reason
                .starts_with("nvJitLink (libnvJitLink.so) not found"),
            "{err}"
        );
        assert!(
            err.fix.contains("pip install nvidia-nvjitlink"),
            "{}",
            err.fix
        );
        assert!(err.fix.contains("--build nvcc"), "{}", err.fix);
    }

    #[test]
    fn an_nccl_without_a_device_library_cannot_take_the_jit_route() {
        let tmp = tempfile::tempdir().unwrap();
        let library = tmp.path().join("nvidia/nccl/lib/libnccl.so.2");
        touch(&library);
        let err =
            find_device_library(&Env::default(), &library, NcclVersion::new(2, 28, 9)).unwrap_err();
        assert!(err.reason.contains("NCCL 2.28.9"), "{err}");
        assert!(err.reason.contains("ships no device library"), "{err}");
        assert!(err.fix.contains("nvidia-nccl-cu13"), "{}", err.fix);
        assert!(err.fix.contains("--build nvcc"), "{}", err.fix);
        touch(&library.with_file_name("libnccl_device.ltoir"));
        assert!(find_device_library(&Env::default(), &library, NcclVersion::new(2, 32, 3)).is_ok());
    }

    #[test]
    fn the_cuda_headers_come_from_the_wheels_or_a_toolkit() {
        let tmp = tempfile::tempdir().unwrap();
        let site = tmp.path().join("site");
        let env = Env {
            cuda_home: Some(tmp.path().join("cuda").into()),
            ..Env::default()
        };
        let err = find_cuda_headers(&env, std::slice::from_ref(&site)).unwrap_err();
        assert!(err.reason.contains("cuda_runtime.h"), "{err}");
        assert!(err.fix.contains("nvidia-cuda-cccl"), "{}", err.fix);
        touch(&site.join("nvidia/cu13/include/cuda_runtime.h"));
        touch(&site.join("nvidia/cu13/include/cccl/cuda/std/cstdint"));
        assert_eq!(
            find_cuda_headers(&env, std::slice::from_ref(&site)).unwrap(),
            vec![
                site.join("nvidia/cu13/include"),
                site.join("nvidia/cu13/include/cccl")
            ]
        );
    }

    #[test]
    fn cuda_headers_others_can_write_are_refused() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().unwrap();
        let site = tmp.path().join("site");
        touch(&site.join("nvidia/cu13/include/cuda_runtime.h"));
        touch(&site.join("nvidia/cu13/include/cccl/cuda/std/cstdint"));
        let sites = std::slice::from_ref(&site);
        assert!(find_cuda_headers(&Env::default(), sites).is_ok());
        let chmod = |dir: &Path, mode| {
            std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode)).unwrap()
        };
        for open in ["nvidia/cu13/include/cccl", "nvidia/cu13/include", "nvidia"] {
            let open = site.join(open);
            chmod(&open, 0o777);
            let err = find_cuda_headers(&Env::default(), sites).unwrap_err();
            assert!(err.reason.contains("the CUDA headers"), "{err}");
            assert!(err.reason.contains("mode 0777"), "{err}");
            chmod(&open, 0o755);
        }
    }

    #[test]
    fn a_wrapper_with_other_names_is_refused_with_the_release_that_has_them() {
        let used = ["ncclLsaBarrierSessionInit", "ncclLsaReduceSumCopy_F32"];
        let ours = "NCCL_IR_EXTERN_C __device__ void ncclLsaBarrierSessionInit(\n\
                    NCCL_IR_EXTERN_C __device__ void ncclLsaReduceSumCopy_F32(";
        let path = Path::new("/x/include/nccl_device_wrapper.h");
        assert!(check_wrapper_names(ours, path, NcclVersion::new(2, 32, 3), &used).is_ok());
        let later = "NCCL_IR_EXTERN_C __device__ void ncclIrLsaBarrierSessionInit(\n\
                     NCCL_IR_EXTERN_C __device__ void ncclIrLsaReduceSumCopy_F32(";
        let err = check_wrapper_names(later, path, NcclVersion::new(2, 32, 6), &used).unwrap_err();
        assert!(
            err.reason
                .contains("does not declare ncclLsaBarrierSessionInit, ncclLsaReduceSumCopy_F32"),
            "{err}"
        );
        assert!(err.reason.contains("ncclIr*"), "{err}");
        assert!(
            err.fix.contains("2.32.3") && err.fix.contains("--build nvcc"),
            "{}",
            err.fix
        );
        // 2.31.2's wrapper has barriers but no reduce/copy.
        let older = "void ncclLsaBarrierSessionInit(";
        let err = check_wrapper_names(older, path, NcclVersion::new(2, 31, 2), &used).unwrap_err();
        assert!(
            err.reason
                .contains("does not declare ncclLsaReduceSumCopy_F32:"),
            "{err}"
        );
    }

    #[test]
    fn only_releases_whose_layout_is_known_take_the_jit_route() {
        assert!(check_known_release(NcclVersion::new(2, 32, 3)).is_ok());
        let err = check_known_release(NcclVersion::new(2, 33, 1)).unwrap_err();
        assert!(err.reason.contains("this is NCCL 2.33.1"), "{err}");
        assert!(err.fix.contains("--build nvcc"), "{}", err.fix);
    }

    #[test]
    fn a_truncated_or_foreign_ltoir_is_refused_before_linking() {
        let path = Path::new("/x/lib/libnccl_device.ltoir");
        let mut header = vec![0xed, 0x43, 0x4e, 0x7f, 0x01, 0x43, 0x02, 0x78];
        header.resize(64, 0);
        assert_eq!(check_ltoir(&header, path).unwrap(), (0x43, 0x78));
        let err = check_ltoir(&header[..10], path).unwrap_err();
        assert!(err.reason.contains("corrupt or truncated"), "{err}");
        assert!(err.fix.contains("--force-reinstall"), "{}", err.fix);
        let err = check_ltoir(b"BC\xc0\xde LLVM bitcode, not LTO-IR .................................................", path)
            .unwrap_err();
        assert!(err.reason.contains("not an LTO-IR file"), "{err}");
    }

    #[test]
    fn an_nvjitlink_older_than_the_ltoir_is_named_with_the_fix() {
        let failure = LinkFailure {
            status: NVJITLINK_ERROR_OUTDATED_LIBRARY,
            input: Some("libnccl_device.ltoir".into()),
            log: "ERROR 4 in nvvmAddNVVMContainerToProgram, may need newer version of nvJitLink library".into(),
        };
        let err = link_error(
            &failure,
            (13, 0),
            Path::new("/opt/venv/nvidia/cu13/lib/libnvJitLink.so.13"),
            Path::new("/x/libnccl_device.ltoir"),
            (0x43, 0x78),
        );
        assert!(err.reason.starts_with("nvJitLink 13.0"), "{err}");
        assert!(err.reason.contains("LTO-IR version 67.120"), "{err}");
        assert!(
            err.fix.contains("pip install -U nvidia-nvjitlink"),
            "{}",
            err.fix
        );
        assert!(err.fix.contains("--build nvcc"), "{}", err.fix);
        let err = check_versions((13, 5), (13, 0), Path::new("/j.so")).unwrap_err();
        assert!(err.reason.contains("older than NVRTC 13.5"), "{err}");
        assert!(check_versions((13, 0), (13, 5), Path::new("/j.so")).is_ok());
    }

    #[test]
    fn a_library_cut_short_is_reported_as_corrupt() {
        let failure = LinkFailure {
            status: 5,
            input: None,
            log: "libnccl_device.ltoir: parse Malformed blockERROR NVVM_ERROR_COMPILATION (9)"
                .into(),
        };
        let err = link_error(
            &failure,
            (13, 5),
            Path::new("/j.so"),
            Path::new("/x/libnccl_device.ltoir"),
            (67, 120),
        );
        assert!(err.reason.contains("corrupt or truncated"), "{err}");
    }

    #[test]
    fn headers_nvrtc_rejects_name_the_release_and_the_nvcc_route() {
        let err = compile_error(
            "allreduce_lsa_c.cu",
            "core.h(239): error: A function explicitly marked as a __host__ function is not allowed in JIT mode\n",
            (13, 5),
            NcclVersion::new(2, 31, 2),
            Path::new("/x/include"),
        );
        assert!(
            err.reason.contains("against NCCL 2.31.2's headers"),
            "{err}"
        );
        assert!(err.reason.contains("__host__"), "{err}");
        assert!(err.fix.contains("--build nvcc"), "{}", err.fix);
    }

    #[test]
    fn nvjitlink_names_carry_the_library_version() {
        assert_eq!(versioned_name("Create", (13, 5)), "__nvJitLinkCreate_13_5");
        assert_eq!(
            versioned_name("GetLinkedCubinSize", (13, 0)),
            "__nvJitLinkGetLinkedCubinSize_13_0"
        );
    }

    /// `dir`, a directory on the way, made writable by every user (0777
    /// without the sticky bit: refused for anyone; group write alone may be
    /// allowed, in a user's private group).
    fn writable_by_all(dir: &Path) {
        use std::os::unix::fs::PermissionsExt;
        fs::set_permissions(dir, fs::Permissions::from_mode(0o777)).unwrap();
    }

    #[test]
    fn nvrtc_nvjitlink_and_the_device_library_under_a_directory_others_can_write_are_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let site = tmp.path().join("venv/lib/python3.12/site-packages");
        let nccl = site.join("nvidia/nccl/lib/libnccl.so.2");
        touch(&nccl);
        touch(&site.join("nvidia/nccl/lib/libnccl_device.ltoir"));
        touch(&site.join("nvidia/cu13/lib/libnvrtc.so.13"));
        touch(&site.join("nvidia/cu13/lib/libnvJitLink.so.13"));
        let sites = vec![site.clone()];
        let env = Env::default();
        let version = NcclVersion::new(2, 32, 3);
        assert!(find_nvrtc(&env, &sites).is_ok());
        assert!(find_nvjitlink(&env, &sites).is_ok());
        assert!(find_device_library(&env, &nccl, version).is_ok());
        // Three levels above the files, not their parent.
        writable_by_all(&site);
        let shown = site.display().to_string();
        for err in [
            find_nvrtc(&env, &sites).unwrap_err(),
            find_nvjitlink(&env, &sites).unwrap_err(),
            find_device_library(&env, &nccl, version).unwrap_err(),
        ] {
            assert!(err.reason.contains("is not used"), "{err}");
            assert!(
                err.reason.contains(&format!("{shown} has mode 0777")),
                "{err}"
            );
            assert!(err.fix.contains("chmod go-w"), "{}", err.fix);
        }
        // Named by NVRTC=: the same.
        let named = Env {
            nvrtc: Some(site.join("nvidia/cu13/lib/libnvrtc.so.13").into()),
            ..Env::default()
        };
        assert!(find_nvrtc(&named, &[]).is_err());
    }

    #[test]
    fn a_library_others_can_write_is_not_dlopened() {
        let tmp = tempfile::tempdir().unwrap();
        let lib = tmp.path().join("open/lib/libnvrtc.so.13");
        touch(&lib);
        writable_by_all(&tmp.path().join("open"));
        let err = Nvrtc::load(&lib).err().expect("refused");
        assert!(err.downcast_ref::<CannotRun>().is_some(), "{err:#}");
        let err = NvJitLink::load(&lib).err().expect("refused");
        assert!(err.downcast_ref::<CannotRun>().is_some(), "{err:#}");
    }

    #[test]
    fn every_stand_in_is_short_and_says_why() {
        for (name, body) in STAND_INS {
            assert!(body.starts_with("// NVRTC ships no"), "{name}");
            assert!(body.lines().count() <= 5, "{name}: {body}");
        }
    }
}
