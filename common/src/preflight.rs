//! Preflight: can this machine run the lesson at all?
//!
//! cudarc loads the CUDA driver and NCCL lazily and panics when a library is
//! missing. A tutorial must instead say what is missing and how to get it, so
//! before the first CUDA or NCCL call the launcher checks, with its own
//! `dlopen`, that:
//!
//! * the CUDA driver library loads, initialises, is new enough for these
//!   binaries and sees at least one GPU;
//! * NCCL loads under the name cudarc will use (`libnccl.so`, not the runtime
//!   name `libnccl.so.2`), and is new enough for the lesson.
//!
//! Every problem found is reported at once, each with its fix.

use std::ffi::c_int;
use std::fmt;
use std::path::PathBuf;
use std::sync::OnceLock;

use cudarc::driver::sys as cu;

use crate::CannotRun;

/// An NCCL release, as `ncclGetVersion` reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct NcclVersion {
    pub major: u32,
    pub minor: u32,
    pub patch: u32,
}

impl NcclVersion {
    pub const fn new(major: u32, minor: u32, patch: u32) -> Self {
        Self {
            major,
            minor,
            patch,
        }
    }

    /// Decodes `NCCL_VERSION_CODE` / `ncclGetVersion`: `X*1000+Y*100+Z` up to
    /// 2.8, `X*10000+Y*100+Z` from 2.9 on (see `NCCL_VERSION` in `nccl.h`).
    pub fn from_code(code: u32) -> Self {
        if code >= 10_000 {
            Self::new(code / 10_000, code % 10_000 / 100, code % 100)
        } else {
            Self::new(code / 1000, code % 1000 / 100, code % 100)
        }
    }

    /// The inverse of [`from_code`](Self::from_code).
    pub fn code(&self) -> u32 {
        if self.major <= 2 && self.minor <= 8 {
            self.major * 1000 + self.minor * 100 + self.patch
        } else {
            self.major * 10_000 + self.minor * 100 + self.patch
        }
    }
}

impl fmt::Display for NcclVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// What a program needs from the machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Needs {
    /// Nothing: the launcher's own tests and `launch-probe`.
    Nothing,
    /// A GPU and its driver (lesson 04, which uses no NCCL).
    Gpu,
    /// A GPU and an NCCL at least `min`, needed for `feature`.
    GpuAndNccl {
        min: NcclVersion,
        feature: &'static str,
    },
}

/// The CUDA driver as the preflight found it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Driver {
    /// `cuDriverGetVersion`, e.g. 13000 for CUDA 13.0.
    pub version: i32,
    /// Visible GPUs (`cuDeviceGetCount`).
    pub gpus: usize,
}

impl Driver {
    pub fn version_text(&self) -> String {
        format!("{}.{}", self.version / 1000, self.version % 1000 / 10)
    }
}

/// The NCCL library the lessons will use.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NcclLibrary {
    pub version: NcclVersion,
    /// The file the loader picked, symlinks resolved.
    pub path: PathBuf,
}

pub use crate::nccl_path::library_path;

/// What the preflight found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct System {
    pub driver: Option<Driver>,
    pub nccl: Option<NcclLibrary>,
}

/// The oldest driver the binaries are built for: cudarc's `cuda-12030` feature.
pub const MIN_DRIVER: i32 = 12030;

/// Checks what `needs` asks for, and looks for the lesson's `tool` if it has
/// one; on failure returns every problem found.
pub fn check(
    needs: Needs,
    tool: Option<fn() -> Result<(), CannotRun>>,
) -> Result<System, Vec<CannotRun>> {
    let mut system = System::default();
    let mut problems = Vec::new();
    if needs != Needs::Nothing {
        match probe_driver() {
            Ok(driver) => system.driver = Some(driver),
            Err(problem) => problems.push(problem),
        }
    }
    if let Needs::GpuAndNccl { min, feature } = needs {
        let names = cudarc::get_lib_name_candidates("nccl");
        match probe_nccl(&names, &["libnccl.so.2".to_string()]).require(min, feature) {
            Ok(lib) => system.nccl = Some(lib),
            Err(problem) => problems.push(problem),
        }
    }
    if let Some(Err(problem)) = tool.map(|find| find()) {
        problems.push(problem);
    }
    if problems.is_empty() {
        Ok(system)
    } else {
        Err(problems)
    }
}

/// Loads the CUDA driver the way cudarc will, then initialises it and counts GPUs.
pub fn probe_driver() -> Result<Driver, CannotRun> {
    // SAFETY: only dlopen()s the candidate names and closes them again.
    if !unsafe { cu::is_culib_present() } {
        return Err(CannotRun::new(
            "no CUDA driver: the dynamic loader cannot find libcuda.so (the NVIDIA driver library)",
            "run on a machine with an NVIDIA GPU and its driver installed\n\
             (in a container: start it with the NVIDIA runtime, e.g. docker run --gpus all);\n\
             if the driver lives in an unusual place, add its directory to LD_LIBRARY_PATH",
        ));
    }
    // SAFETY: the library is present, so cudarc resolves these symbols; they
    // take plain out-pointers.
    let init = unsafe { cu::cuInit(0) };
    if init != cu::CUresult::CUDA_SUCCESS {
        let visible = std::env::var("CUDA_VISIBLE_DEVICES").ok();
        return Err(match (init, visible) {
            (cu::CUresult::CUDA_ERROR_NO_DEVICE, Some(v)) => CannotRun::new(
                format!("the CUDA driver sees no GPU (CUDA_VISIBLE_DEVICES={v:?})"),
                "unset CUDA_VISIBLE_DEVICES or list the GPUs to use, e.g. CUDA_VISIBLE_DEVICES=0,1",
            ),
            (cu::CUresult::CUDA_ERROR_NO_DEVICE, None) => CannotRun::new(
                "the CUDA driver is installed but sees no GPU",
                "check `nvidia-smi`; in a container, start it with the NVIDIA runtime (--gpus all)",
            ),
            (cu::CUresult::CUDA_ERROR_MPS_CONNECTION_FAILED, _) => CannotRun::new(
                format!(
                    "the CUDA driver could not reach an MPS server: cuInit returned CUDA_ERROR_MPS_CONNECTION_FAILED (CUDA_MPS_PIPE_DIRECTORY={})",
                    std::env::var("CUDA_MPS_PIPE_DIRECTORY").unwrap_or_else(|_| "unset: /tmp/nvidia-mps".into())
                ),
                "start the MPS control daemon for that directory (nvidia-cuda-mps-control -d), \
                 or unset CUDA_MPS_PIPE_DIRECTORY to run without MPS (see the book's \"One GPU, several ranks\")",
            ),
            (err, _) => CannotRun::new(
                format!("the CUDA driver failed to initialise: cuInit returned {err:?}"),
                "check `nvidia-smi`: the kernel module and the user-space driver must be the same version",
            ),
        });
    }
    // SAFETY (both): cuInit succeeded; each call writes one int.
    let version = driver_query("cuDriverGetVersion", |out| unsafe {
        cu::cuDriverGetVersion(out)
    })?;
    let count = driver_query("cuDeviceGetCount", |out| unsafe {
        cu::cuDeviceGetCount(out)
    })?;
    let driver = Driver {
        version,
        gpus: usize::try_from(count).unwrap_or(0),
    };
    if version < MIN_DRIVER {
        return Err(CannotRun::new(
            format!(
                "CUDA driver {} is older than 12.3, the CUDA version these binaries are built against",
                driver.version_text()
            ),
            "update the NVIDIA driver to release 545 or newer",
        ));
    }
    if driver.gpus == 0 {
        return Err(CannotRun::new(
            "the CUDA driver reports no GPU",
            "check `nvidia-smi` and CUDA_VISIBLE_DEVICES",
        ));
    }
    Ok(driver)
}

/// Calls a driver query that writes one int, and turns a failure into a
/// problem that names the call: a driver that initialises but then fails
/// must not be read as "version 0" or "no GPU".
fn driver_query(
    call: &str,
    query: impl FnOnce(*mut c_int) -> cu::CUresult,
) -> Result<c_int, CannotRun> {
    let mut value: c_int = 0;
    match query(&mut value) {
        cu::CUresult::CUDA_SUCCESS => Ok(value),
        err => Err(CannotRun::new(
            format!("the CUDA driver initialised, but {call} returned {err:?}"),
            "check `nvidia-smi`: the kernel module and the user-space driver must be the same version",
        )),
    }
}

/// What looking for NCCL found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NcclProbe {
    /// Loaded under one of the names cudarc uses.
    Found(NcclLibrary),
    /// Not under cudarc's names, but under a runtime name such as `libnccl.so.2`.
    OnlyRuntimeName { name: String, path: PathBuf },
    /// A file by that name exists but does not load (a missing dependency,
    /// say): the loader's own message, and the file where it can be found.
    Broken {
        name: String,
        path: Option<PathBuf>,
        error: String,
    },
    /// Not found at all.
    Missing,
}

/// Tries `names` (cudarc's candidates, in cudarc's order) and then
/// `runtime_names`; the library found first stays loaded for the process.
pub fn probe_nccl(names: &[String], runtime_names: &[String]) -> NcclProbe {
    let mut broken = None;
    for name in names {
        match load_nccl(name) {
            Ok((library, lib)) => {
                static KEEP: OnceLock<libloading::Library> = OnceLock::new();
                let _ = KEEP.set(library);
                return NcclProbe::Found(lib);
            }
            Err(error) if !is_not_found(name, &error) && broken.is_none() => {
                broken = Some(NcclProbe::Broken {
                    name: name.clone(),
                    path: crate::nccl_path::loader_search(name),
                    error,
                });
            }
            Err(_) => {}
        }
    }
    if let Some(broken) = broken {
        return broken;
    }
    for name in runtime_names {
        if let Ok((_library, lib)) = load_nccl(name) {
            return NcclProbe::OnlyRuntimeName {
                name: name.clone(),
                path: lib.path,
            };
        }
    }
    NcclProbe::Missing
}

impl NcclProbe {
    /// The library, if it is there and at least `min`; otherwise the problem
    /// with its fix.
    pub fn require(self, min: NcclVersion, feature: &str) -> Result<NcclLibrary, CannotRun> {
        match self {
            NcclProbe::Found(lib) if lib.version >= min => Ok(lib),
            NcclProbe::Found(lib) => Err(CannotRun::new(
                format!(
                    "NCCL {} ({}) is too old: this lesson needs NCCL {min} or newer for {feature}",
                    lib.version,
                    lib.path.display()
                ),
                format!("install NCCL {min} or newer and put its lib directory first on LD_LIBRARY_PATH"),
            )),
            NcclProbe::OnlyRuntimeName { name, path } => Err(CannotRun::new(
                format!(
                    "NCCL is only present as {name} ({}), but cudarc loads it as libnccl.so, which no directory on the loader path provides",
                    path.display()
                ),
                format!(
                    "give it the development name in a directory of your own and put that first on the loader path:\n\
                     mkdir -p ~/.local/lib/nccl && ln -sf {} ~/.local/lib/nccl/libnccl.so\n\
                     export LD_LIBRARY_PATH=~/.local/lib/nccl:$LD_LIBRARY_PATH\n\
                     (or install the development package, e.g. libnccl-dev, which ships libnccl.so)",
                    path.display()
                ),
            )),
            NcclProbe::Broken { name, path, error } => {
                let (file, ldd) = match &path {
                    Some(path) if path.as_os_str() != name.as_str() => {
                        (format!("{name} at {}", path.display()), path.display().to_string())
                    }
                    _ => (name.clone(), name.clone()),
                };
                Err(CannotRun::new(
                    format!("NCCL is present ({file}) but does not load; the loader says: {error}"),
                    format!(
                        "install what the loader names (`ldd {ldd}` lists what NCCL needs and what is missing),\n\
                         or add its directory to LD_LIBRARY_PATH; or install an NCCL built for this CUDA version"
                    ),
                ))
            }
            NcclProbe::Missing => Err(CannotRun::new(
                "NCCL not found: the dynamic loader finds neither libnccl.so nor libnccl.so.2, and no pip wheel \
                 of it is in NCCL_HOME, the active Python environment or ~/.local",
                format!(
                    "install NCCL {min} or newer, either way:\n\
                     pip install nvidia-nccl-cu13    (in the Python environment you run from; -cu12 for CUDA 12)\n\
                     apt install libnccl2 libnccl-dev    (from NVIDIA's CUDA repository)\n\
                     or point NCCL_HOME at an NCCL whose lib/ holds libnccl.so.2"
                ),
            )),
        }
    }
}

/// Did the loader fail to find `name` itself? glibc says
/// "<name>: cannot open shared object file: No such file or directory". A
/// missing *dependency* reads the same but names the dependency: then NCCL is
/// there and broken, which is a different problem with a different fix.
fn is_not_found(name: &str, error: &str) -> bool {
    error.contains(&format!("{name}: cannot open shared object file"))
}

fn load_nccl(name: &str) -> Result<(libloading::Library, NcclLibrary), String> {
    // SAFETY: loading NCCL runs only its ELF constructors, which have no
    // preconditions; ncclGetVersion writes one int.
    unsafe {
        let library = libloading::Library::new(name).map_err(|e| with_sources(&e))?;
        let get_version: libloading::Symbol<unsafe extern "C" fn(*mut c_int) -> c_int> = library
            .get(b"ncclGetVersion\0")
            .map_err(|e| format!("{name} has no ncclGetVersion: {}", with_sources(&e)))?;
        let mut code: c_int = 0;
        let status = get_version(&mut code);
        if status != 0 {
            return Err(format!("ncclGetVersion returned error {status}"));
        }
        let code = u32::try_from(code)
            .map_err(|_| format!("ncclGetVersion reported version code {code}"))?;
        let path = library_path(*get_version as usize).unwrap_or_else(|| PathBuf::from(name));
        let version = NcclVersion::from_code(code);
        Ok((library, NcclLibrary { version, path }))
    }
}

/// libloading's message ("dlopen failed") followed by the loader's own words.
fn with_sources(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

/// `cuDeviceGetAttribute(attribute)` of GPU `device` (an ordinal the
/// driver counted), or `None` where the driver cannot say (an attribute this
/// driver does not know, say). The driver must be initialised
/// ([`probe_driver`]).
pub fn device_attribute(device: usize, attribute: cu::CUdevice_attribute) -> Option<i32> {
    let ordinal = c_int::try_from(device).ok()?;
    let mut handle: cu::CUdevice = 0;
    let mut value: c_int = 0;
    // SAFETY: cuInit succeeded (the preflight); both calls write one value.
    unsafe {
        if cu::cuDeviceGet(&mut handle, ordinal) != cu::CUresult::CUDA_SUCCESS {
            return None;
        }
        if cu::cuDeviceGetAttribute(&mut value, attribute, handle) != cu::CUresult::CUDA_SUCCESS {
            return None;
        }
    }
    Some(value)
}

/// The multiprocessors of GPU `device` (0 where the driver cannot say).
pub fn multiprocessors(device: usize) -> u32 {
    device_attribute(
        device,
        cu::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
    )
    .map_or(0, |n| n.max(0) as u32)
}

/// Will contexts on GPU `device` be shared through CUDA MPS (an MPS server
/// serves this process)? `None` where the driver cannot say.
pub fn mps_enabled(device: usize) -> Option<bool> {
    device_attribute(
        device,
        cu::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MPS_ENABLED,
    )
    .map(|v| v != 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_codes_decode_both_schemes() {
        assert_eq!(NcclVersion::from_code(22803), NcclVersion::new(2, 28, 3));
        assert_eq!(NcclVersion::from_code(21903), NcclVersion::new(2, 19, 3));
        assert_eq!(NcclVersion::from_code(2804), NcclVersion::new(2, 8, 4));
        for v in [
            NcclVersion::new(2, 8, 4),
            NcclVersion::new(2, 28, 9),
            NcclVersion::new(3, 0, 1),
        ] {
            assert_eq!(NcclVersion::from_code(v.code()), v);
        }
        assert!(NcclVersion::new(2, 28, 3) > NcclVersion::new(2, 27, 7));
        assert_eq!(NcclVersion::new(2, 28, 3).to_string(), "2.28.3");
    }

    #[test]
    fn missing_nccl_says_so_and_how_to_install() {
        let probe = probe_nccl(
            &["libnccl_absent_for_test.so".into()],
            &["libnccl_absent_for_test.so.2".into()],
        );
        assert_eq!(probe, NcclProbe::Missing);
        let err = probe
            .require(NcclVersion::new(2, 27, 0), "windows")
            .unwrap_err();
        assert!(err.reason.contains("NCCL not found"), "{err}");
        assert!(err.fix.contains("2.27.0"), "{}", err.fix);
    }

    #[test]
    fn a_library_that_does_not_load_is_reported_as_broken() {
        let dir = tempfile::tempdir().unwrap();
        let fake = dir.path().join("libnccl.so");
        std::fs::write(&fake, b"not an ELF file").unwrap();
        let probe = probe_nccl(&[fake.display().to_string()], &[]);
        assert!(matches!(probe, NcclProbe::Broken { .. }), "{probe:?}");
        let err = probe
            .require(NcclVersion::new(2, 27, 0), "windows")
            .unwrap_err();
        // The file, and the loader's own words ("file too short"), not a guess.
        assert!(
            err.reason.starts_with(&format!(
                "NCCL is present ({}) but does not load; the loader says: ",
                fake.display()
            )),
            "{err}"
        );
        assert!(err.reason.contains("file too short"), "{err}");
    }

    #[test]
    fn the_loader_search_names_the_file_it_would_load() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("libx.so");
        let search = crate::nccl_path::loader_search;
        assert_eq!(search(&path.display().to_string()), Some(path));
        assert_eq!(search("libnothing_by_this_name_for_test.so"), None);
    }

    #[test]
    fn a_failing_driver_query_names_the_call() {
        let err =
            driver_query("cuDeviceGetCount", |_| cu::CUresult::CUDA_ERROR_UNKNOWN).unwrap_err();
        assert_eq!(
            err.reason,
            "the CUDA driver initialised, but cuDeviceGetCount returned CUDA_ERROR_UNKNOWN"
        );
        let ok = driver_query("cuDriverGetVersion", |out| {
            // SAFETY: `out` points at the query's int.
            unsafe { *out = 13000 };
            cu::CUresult::CUDA_SUCCESS
        });
        assert_eq!(ok.unwrap(), 13000);
    }
}
