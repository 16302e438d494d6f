//! The layer tail from Triton (lesson 06b): the fused kernel written in Triton
//! ([`triton/tp_tail.py`](../triton/tp_tail.py)) that calls the same
//! `symm_all_reduce`, linked from the library's LLVM bitcode
//! (`symm_comm::triton`: `symm_comm/triton/symm_comm_nccl.bc`) and NCCL
//! 2.32.3's `libnccl_device.bc`.
//!
//! The host side is here: it runs Triton's compiler ahead of time
//! (Python, no GPU needed), keeps the cubin in the build cache, loads it and
//! launches it cooperatively with the context it already made for the CUDA
//! kernel. What Triton needs from a host is only that: the kernel's
//! parameters in order, two hidden scratch pointers (NULL while Triton asks
//! for no scratch), its block size and its dynamic shared memory, all read
//! from the JSON the script writes beside the cubin.

use std::ffi::{c_void, OsString};
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, ensure, Context, Result};
use common::{CannotRun, NcclVersion};
use cudarc::driver::{result as cu, sys as cu_sys, CudaStream};
use device_build::{cache, CacheRoot};
use serde::Deserialize;

use crate::launch::{launch_1d, Launch, LayerArgs};
use crate::Dtype;

/// The Triton kernel and its ahead-of-time build (`python3 tp_tail.py`).
pub const KERNEL_SCRIPT: &str = include_str!("../triton/tp_tail.py");
/// The NCCL release whose headers the library's bitcode was built against
/// (`symm_comm::triton::NCCL`): the loaded NCCL must be it.
pub const NCCL: NcclVersion = symm_comm::triton::NCCL;
/// The oldest Triton accepted: 3.6.0 is the one seen reading the library's
/// bitcode and NCCL's and linking them; older ones were not tried. A newer
/// one is taken, and [`Meta::check`] refuses its kernel if its parameters
/// differ from 3.6's.
pub const MIN_TRITON: (u32, u32) = (3, 6);

/// The files a build leaves in its cache directory.
pub const CUBIN: &str = "tp_tail_triton.cubin";
pub const META: &str = "tp_tail_triton.json";

/// What `tp_tail.py` reports about the kernel it compiled.
#[derive(Debug, Clone, Deserialize)]
pub struct Meta {
    /// The kernel's symbol in the cubin.
    pub name: String,
    pub num_warps: u32,
    /// Dynamic shared memory, bytes.
    pub shared: u32,
    /// The kernel's own parameters, in order (Triton appends two hidden ones).
    pub params: Vec<String>,
    /// How many parameters the compiled entry takes, hidden ones included
    /// (counted in its PTX).
    pub entry_params: usize,
    pub triton: String,
    #[serde(default)]
    pub global_scratch_size: u64,
    #[serde(default)]
    pub profile_scratch_size: u64,
}

/// The parameters [`launch`] passes, in this order: a kernel that takes
/// others was built from another script and is refused.
pub const PARAMS: [&str; 13] = [
    "ctx",
    "buffer",
    "byte_offset",
    "x",
    "w",
    "residual",
    "gamma",
    "out",
    "tokens",
    "hidden",
    "k",
    "eps",
    "status",
];

impl Meta {
    /// Threads per program.
    pub fn threads(&self) -> u32 {
        self.num_warps * 32
    }

    /// Refuses a kernel this host cannot launch as built.
    pub fn check(&self) -> Result<()> {
        ensure!(
            self.params == PARAMS,
            "the Triton kernel takes ({}), the host passes ({})",
            self.params.join(", "),
            PARAMS.join(", ")
        );
        // Triton 3.6 appends two hidden parameters; another release may not.
        ensure!(
            self.entry_params == PARAMS.len() + 2,
            "the compiled Triton kernel takes {} parameters; this host passes {} ({} and Triton 3.6's two scratch pointers): a Triton that adds other hidden parameters needs this host changed",
            self.entry_params,
            PARAMS.len() + 2,
            PARAMS.len()
        );
        ensure!(
            self.global_scratch_size == 0 && self.profile_scratch_size == 0,
            "the Triton kernel asks for scratch memory ({} B global, {} B profile); this host passes NULL for both",
            self.global_scratch_size,
            self.profile_scratch_size
        );
        Ok(())
    }
}

/// A Python that has Triton.
#[derive(Debug, Clone)]
pub struct Python {
    /// The interpreter as run: absolute, found on `PATH` when named bare.
    /// Symbolic links are kept, so that a virtual environment's `python`
    /// still finds its environment.
    pub path: PathBuf,
    /// `triton.__version__`.
    pub triton: String,
    /// Where it resolves (`path` with every symbolic link followed) and what
    /// it says of itself (its version, `sys.prefix`, Triton's location):
    /// all of it keys the build, so another interpreter behind the same name
    /// builds anew.
    pub identity: String,
}

/// The probe a candidate runs: Triton's version on the first line, then
/// what identifies the interpreter and its Triton.
const PROBE: &str = "import sys, triton; print(triton.__version__); print('python', sys.version.split()[0]); print('prefix', sys.prefix); print('triton at', triton.__file__)";

/// The interpreter `program` names, as an absolute path: looked up in
/// `path_var` (a `PATH`) when it is a bare name, else made absolute against
/// the working directory. `None` when a bare name is nowhere on the path.
pub fn resolve_interpreter(program: &Path, path_var: Option<&OsString>) -> Option<PathBuf> {
    if program.components().count() == 1 && !program.has_root() {
        let dirs = path_var.map(std::env::split_paths)?;
        for dir in dirs {
            let found = dir.join(program);
            if is_executable(&found) {
                return std::path::absolute(found).ok();
            }
        }
        return None;
    }
    std::path::absolute(program).ok()
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// A command for the interpreter at `path` that cannot import from the
/// caller's working directory: it runs in `workdir` (a private, empty
/// directory), and with `PYTHONSAFEPATH=1` (Python 3.11+) `-c` puts no
/// directory first on `sys.path` at all. Older Pythons put the working
/// directory there, which is then the empty one. `PYTHONPATH` and the user's
/// site directory are kept: they may be where the user's Triton is.
fn python_command(path: &Path, workdir: &Path) -> Command {
    let mut command = Command::new(path);
    command
        .current_dir(workdir)
        .env("PYTHONSAFEPATH", "1")
        .env("PYTHONDONTWRITEBYTECODE", "1");
    command
}

/// Where to look for a Python with Triton: `TRITON_PYTHON`, the active
/// virtual environment's, then `python3` on `PATH`.
pub fn python_candidates(
    triton_python: Option<&OsString>,
    virtual_env: Option<&OsString>,
) -> Vec<PathBuf> {
    let mut found = Vec::new();
    if let Some(p) = triton_python {
        // Named on purpose: nothing else is tried.
        return vec![PathBuf::from(p)];
    }
    if let Some(venv) = virtual_env {
        found.push(Path::new(venv).join("bin").join("python"));
    }
    found.push(PathBuf::from("python3"));
    found
}

/// `major.minor` of a version string such as `3.6.0` or `3.7.0+git1234`.
pub fn major_minor(version: &str) -> Option<(u32, u32)> {
    let mut parts = version.split(|c: char| !c.is_ascii_digit());
    Some((parts.next()?.parse().ok()?, parts.next()?.parse().ok()?))
}

/// The first candidate whose Python imports Triton, checked to be new
/// enough; exit 2 with the fix when there is none.
///
/// NOTE: the probe runs in a private empty directory, never in the caller's:
/// `python -c "import triton"` searches the working directory first, and a
/// `triton.py` planted there would run and could answer any version.
pub fn find_python(candidates: &[PathBuf]) -> Result<Python, CannotRun> {
    let workdir =
        common::cleanup::OwnedDir::create(&std::env::temp_dir(), "nccl-symmem-rs-python-")
            .map_err(|e| {
                CannotRun::new(
                    format!(
                        "no private directory in {} to run Python in: {e}",
                        std::env::temp_dir().display()
                    ),
                    "set TMPDIR to a directory you can write",
                )
            })?;
    let path_var = std::env::var_os("PATH");
    let mut tried = Vec::new();
    for candidate in candidates {
        let Some(path) = resolve_interpreter(candidate, path_var.as_ref()) else {
            tried.push(format!("{} (not on PATH)", candidate.display()));
            continue;
        };
        // Run from a path the environment names: refused (exit 2) if another
        // user could change it (common::trust).
        if path.exists() {
            common::trust::check_trusted(&path, "Python")?;
        }
        let probe = python_command(&path, workdir.path())
            .args(["-c", PROBE])
            .output();
        match probe {
            Ok(out) if out.status.success() => {
                let stdout = String::from_utf8_lossy(&out.stdout);
                let mut lines = stdout.lines();
                let triton = lines.next().unwrap_or("").trim().to_string();
                // What the interpreter imports runs as this process's user
                // too: Triton's package and Python's own prefix (its
                // standard library) are checked like the interpreter.
                check_imported(&stdout)?;
                let canonical = path.canonicalize().unwrap_or_else(|_| path.clone());
                let identity = std::iter::once(format!("resolves to {}", canonical.display()))
                    .chain(lines.map(str::to_string))
                    .collect::<Vec<_>>()
                    .join("\n");
                return match major_minor(&triton) {
                    Some(v) if v >= MIN_TRITON => Ok(Python {
                        path,
                        triton,
                        identity,
                    }),
                    _ => Err(CannotRun::new(
                        format!(
                            "{} has Triton {triton}; this kernel needs Triton {}.{} or newer (3.6.0 is the release seen linking the library's bitcode and NCCL's; older ones were not tried)",
                            path.display(),
                            MIN_TRITON.0,
                            MIN_TRITON.1
                        ),
                        "pip install 'triton>=3.6', or set TRITON_PYTHON to a Python that has it",
                    )),
                };
            }
            Ok(_) => tried.push(format!("{} (no module triton)", path.display())),
            Err(e) => tried.push(format!("{} ({e})", path.display())),
        }
    }
    Err(CannotRun::new(
        format!(
            "the Triton kernel needs Python with Triton to compile it; tried {}",
            tried.join(", ")
        ),
        "pip install 'triton>=3.6' (no GPU needed to compile), or set TRITON_PYTHON to a Python that has it",
    ))
}

/// Exit 2 (with the fix) if another user could change the Triton package
/// (the directory of the `triton at` file the probe prints) or Python's
/// `sys.prefix` (its `prefix` line), as the interpreter reported them in
/// `probe_output`.
fn check_imported(probe_output: &str) -> Result<(), CannotRun> {
    for line in probe_output.lines() {
        if let Some(file) = line.strip_prefix("triton at ") {
            let file = Path::new(file.trim());
            let package = file.parent().unwrap_or(file);
            common::trust::check_trusted(package, "Triton")?;
        } else if let Some(prefix) = line.strip_prefix("prefix ") {
            common::trust::check_trusted(Path::new(prefix.trim()), "Python (its sys.prefix)")?;
        }
    }
    Ok(())
}

/// `TRITON_PYTHON`, when set, must name a program: its path, or a name on
/// `path_var` (a `PATH`). Checked with the options, before anything else,
/// so that a mistyped path is reported as such on any machine.
pub fn check_named_python(
    triton_python: Option<&OsString>,
    path_var: Option<&OsString>,
) -> Result<(), CannotRun> {
    let Some(named) = triton_python else {
        return Ok(());
    };
    let found = resolve_interpreter(Path::new(named), path_var).filter(|p| is_executable(p));
    match found {
        Some(_) => Ok(()),
        None => Err(CannotRun::new(
            format!(
                "TRITON_PYTHON={} names no program{}: the Triton kernel is compiled by the Python it names",
                Path::new(named).display(),
                if Path::new(named).components().count() == 1 {
                    " on PATH"
                } else {
                    " that can be run"
                }
            ),
            "set TRITON_PYTHON to a Python that has Triton 3.6+ (e.g. TRITON_PYTHON=~/venv/bin/python), or unset it to use the active virtual environment's python, then python3",
        )),
    }
}

/// [`find_python`] over this process's candidates ([`python_candidates`]
/// of `TRITON_PYTHON` and `VIRTUAL_ENV`), saying so when the Python was
/// named by `TRITON_PYTHON`.
pub fn find_python_for_this_process() -> Result<Python, CannotRun> {
    let named = std::env::var_os("TRITON_PYTHON");
    find_python(&python_candidates(
        named.as_ref(),
        std::env::var_os("VIRTUAL_ENV").as_ref(),
    ))
    .map_err(|mut e| {
        if let Some(named) = named {
            e.reason = format!(
                "{} (TRITON_PYTHON={})",
                e.reason,
                Path::new(&named).display()
            );
        }
        e
    })
}

/// The loaded NCCL must be the bitcode's release, and ship its device
/// bitcode (`libnccl_device.bc`, beside `libnccl.so.2` from 2.30 on).
/// Returns that file.
pub fn nccl_device_bitcode(version: NcclVersion, library: &Path) -> Result<PathBuf, CannotRun> {
    if version != NCCL {
        return Err(CannotRun::new(
            format!(
                "the Triton kernel's library was built against NCCL {NCCL}'s device headers (its ncclDevComm layout), but the loaded NCCL is {version}"
            ),
            format!(
                "load NCCL {NCCL} beside the one your environment pins (PyTorch pins its own): pip install --target ~/nccl-{NCCL} nvidia-nccl-cu13=={NCCL}, then NCCL_HOME=~/nccl-{NCCL}/nvidia/nccl"
            ),
        ));
    }
    let bitcode = library
        .parent()
        .map(|dir| dir.join("libnccl_device.bc"))
        .filter(|p| p.is_file());
    let bitcode = bitcode.ok_or_else(|| {
        CannotRun::new(
            format!(
                "no libnccl_device.bc beside {}: Triton links NCCL's device library from it",
                library.display()
            ),
            format!("use NCCL {NCCL} from its pip wheel, which ships it in nvidia/nccl/lib: pip install --target ~/nccl-{NCCL} nvidia-nccl-cu13=={NCCL}, then NCCL_HOME=~/nccl-{NCCL}/nvidia/nccl"),
        )
    })?;
    // Linked into the kernel: another user must not be able to change it.
    common::trust::check_trusted(&bitcode, "NCCL's device library")?;
    Ok(bitcode)
}

/// What a Triton build depends on, as text (its hash names the cache
/// entry): the Python (where it resolves, its version and prefix) and its
/// Triton (version and location), the target, digests of what this binary
/// carries, and NCCL's device library by path, size and time, as the other
/// routes name theirs (`cache::file_stamp`). Triton's own variables are not
/// in it: the build removes them ([`child_environment`]).
fn key_text(python: &Python, arch: u32, dtype: Dtype, nccl_bc: &Path) -> String {
    let digest = cache::sha256_hex;
    format!(
        "route triton\npython {}\n{}\ntriton {}\narch {arch}\ndtype {}\nkernel {}\nlibrary.py {}\nlibrary.bc {}\nlibnccl_device.bc {}\n",
        python.path.display(),
        python.identity,
        python.triton,
        dtype.name(),
        digest(KERNEL_SCRIPT.as_bytes()),
        digest(symm_comm::triton::SCRIPT.as_bytes()),
        digest(symm_comm::triton::BITCODE),
        cache::file_stamp(nccl_bc),
    )
}

/// The dtype's name in `tp_tail.py --dtype`.
fn dtype_arg(dtype: Dtype) -> &'static str {
    match dtype {
        Dtype::F32 => "f32",
        Dtype::Bf16 => "bf16",
    }
}

/// Where Triton keeps its own cache during a build: inside the private
/// build directory, removed with the scripts once the build succeeded.
const TRITON_CACHE: &str = "triton-cache";

/// The build child's environment: `inherited` without any `TRITON_*`
/// variable, then the ones set on purpose, `TRITON_CACHE_DIR` (inside the
/// private build directory `dir`) and `PYTHONDONTWRITEBYTECODE=1`.
///
/// NOTE: Triton reads many variables that change what it compiles or where
/// it takes it from (`TRITON_CACHE_DIR`, often one directory shared on a
/// cluster, `TRITON_KERNEL_OVERRIDE` with `TRITON_OVERRIDE_DIR`,
/// `TRITON_PTXAS_PATH`, `TRITON_LIBDEVICE_PATH`, ...), and the build's key
/// names none of them: a build under one of them would be cached for every
/// later run. So none reaches it.
pub fn child_environment(
    inherited: impl IntoIterator<Item = (OsString, OsString)>,
    dir: &Path,
) -> Vec<(OsString, OsString)> {
    let mut env: Vec<(OsString, OsString)> = inherited
        .into_iter()
        .filter(|(name, _)| !name.as_encoded_bytes().starts_with(b"TRITON_"))
        .collect();
    env.push(("TRITON_CACHE_DIR".into(), dir.join(TRITON_CACHE).into()));
    env.push(("PYTHONDONTWRITEBYTECODE".into(), "1".into()));
    env
}

/// Compiles the Triton kernel for `sm_<arch>` and `dtype` into `dir`: writes
/// the scripts and the bitcode there and runs `tp_tail.py`, in `dir` and
/// with the environment of [`child_environment`].
fn compile_into(
    python: &Python,
    arch: u32,
    dtype: Dtype,
    nccl_bc: &Path,
    dir: &Path,
) -> Result<()> {
    // Absolute: the build runs in `dir`, not in this process's directory.
    let nccl_bc = std::path::absolute(nccl_bc).context("the path of libnccl_device.bc")?;
    let dir = std::path::absolute(dir).context("the build directory's path")?;
    let dir = dir.as_path();
    let src = dir.join("src");
    std::fs::create_dir(&src).context("create the script directory")?;
    std::fs::write(src.join("tp_tail.py"), KERNEL_SCRIPT).context("write tp_tail.py")?;
    symm_comm::triton::write_beside(&src)?;
    // NOTE: no PYTHONSAFEPATH here: tp_tail.py imports symm.py from its own
    // directory, which Python puts first on sys.path. That directory is
    // `src`, private and holding only these three files; the working
    // directory (`dir`, private too) is not searched for a script.
    let out = Command::new(&python.path)
        .arg(src.join("tp_tail.py"))
        .arg("--arch")
        .arg(arch.to_string())
        .args(["--dtype", dtype_arg(dtype)])
        .arg("--nccl-device-bc")
        .arg(&nccl_bc)
        .arg("--out")
        .arg(dir)
        .current_dir(dir)
        .env_clear()
        .envs(child_environment(std::env::vars_os(), dir))
        .output()
        .with_context(|| format!("run {}", python.path.display()))?;
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        let tail: Vec<&str> = stderr.lines().rev().take(25).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        bail!(
            "Triton {} could not compile the kernel (tp_tail.py, {}):\n{}",
            python.triton,
            out.status,
            tail.join("\n")
        );
    }
    std::fs::remove_dir_all(&src).context("remove the script directory")?;
    let triton_cache = dir.join(TRITON_CACHE);
    if triton_cache.exists() {
        std::fs::remove_dir_all(&triton_cache).context("remove Triton's cache")?;
    }
    Ok(())
}

/// A Triton build: the cubin and what the kernel needs at launch.
pub struct Built {
    pub build: cache::Built,
    pub meta: Meta,
}

impl Built {
    pub fn cubin(&self) -> PathBuf {
        self.build.file(CUBIN)
    }
}

/// Builds (or reuses) the Triton kernel for `sm_<arch>` and `dtype`.
pub fn build_or_reuse(
    python: &Python,
    arch: u32,
    dtype: Dtype,
    nccl_bc: &Path,
    cache_root: &CacheRoot,
) -> Result<Built> {
    let compile = |dir: &Path| compile_into(python, arch, dtype, nccl_bc, dir);
    let job = cache::Job {
        key_text: key_text(python, arch, dtype, nccl_bc),
        outputs: vec![CUBIN.into(), META.into()],
        compile: &compile,
    };
    let build = cache::build_or_reuse(&job, cache_root)?;
    let text = std::fs::read_to_string(build.file(META)).context("read the kernel's JSON")?;
    let meta: Meta = serde_json::from_str(&text).context("parse the kernel's JSON")?;
    meta.check()?;
    Ok(Built { build, meta })
}

/// NCCL 2.32.3's `libnccl_device.bc` is built for sm_90 and uses its
/// `multimem` instructions, so ptxas refuses it for older GPUs (seen for
/// sm_80 and sm_89: "Feature 'multimem.red' requires .target sm_90 or
/// higher"): the Triton kernel needs a Hopper GPU or newer.
pub fn check_gpu(major: i32, minor: i32) -> Result<(), CannotRun> {
    if major < 9 {
        return Err(CannotRun::new(
            format!(
                "this GPU has compute capability {major}.{minor}; the Triton kernel links NCCL 2.32.3's libnccl_device.bc, which is built for sm_90 (Hopper) and newer"
            ),
            "run 06b_symm_triton on a Hopper or newer GPU, or the CUDA kernel (06_symm_primitive) here",
        ));
    }
    Ok(())
}

/// A Triton build for this process, and what it was made with.
pub struct ForThisProcess {
    pub built: Built,
    pub python: Python,
    /// The loaded NCCL's `libnccl.so.2` and its `libnccl_device.bc`.
    pub nccl_library: PathBuf,
    pub nccl_bitcode: PathBuf,
}

/// Builds (or reuses) the Triton kernel for the GPU of compute capability
/// `major.minor` and the NCCL this process loaded: checks that NCCL is the
/// bitcode's release and finds its `libnccl_device.bc`, then a Python with
/// Triton (`TRITON_PYTHON`, the active virtual environment's, `python3`).
/// Each check that fails is an exit 2 with the fix.
pub fn build_for_this_process(
    major: i32,
    minor: i32,
    dtype: Dtype,
    cache_root: &CacheRoot,
) -> Result<ForThisProcess> {
    check_gpu(major, minor)?;
    let nccl = common::nccl::loaded_nccl()?;
    let nccl_bitcode = nccl_device_bitcode(nccl.version, &nccl.path)?;
    let python = find_python_for_this_process()?;
    let arch = (major * 10 + minor) as u32;
    let built = build_or_reuse(&python, arch, dtype, &nccl_bitcode, cache_root)?;
    Ok(ForThisProcess {
        built,
        python,
        nccl_library: nccl.path,
        nccl_bitcode,
    })
}

/// Lets the kernel use `meta.shared` bytes of dynamic shared memory (the
/// default limit is 48 KiB).
///
/// # Safety
/// `kernel` must be a function of a module that is still loaded.
pub unsafe fn set_shared(kernel: cu_sys::CUfunction, meta: &Meta) -> Result<()> {
    if meta.shared > 48 * 1024 {
        // SAFETY: a loaded function (the caller's promise); the attribute
        // takes a byte count.
        unsafe {
            cu::function::set_function_attribute(
                kernel,
                cu_sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                meta.shared as i32,
            )
        }
        .context("cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)")?;
    }
    Ok(())
}

/// The Triton kernel on `blocks` programs, cooperative: `symm_all_reduce`
/// inside it waits for every program, so all must be resident at once.
/// The context, the buffer and the layer's arrays are the CUDA kernel's
/// ([`LayerArgs`]; the dtype is compiled in).
///
/// # Safety
/// `kernel` must come from a build whose [`Meta`] passed [`Meta::check`];
/// every address must be live device memory of the sizes the layer needs.
pub unsafe fn launch(
    kernel: cu_sys::CUfunction,
    meta: &Meta,
    blocks: u32,
    stream: &CudaStream,
    args: LayerArgs,
) -> Result<()> {
    let mut args = args;
    // (`byte_offset` is a usize there and Triton's i64 here: the same 8 bytes.)
    let fused = args.param_ptrs();
    // Triton's two hidden parameters: global and profile scratch.
    let (mut global_scratch, mut profile_scratch) = (0u64, 0u64);
    // tp_tail_fused's parameters without `dtype` (compiled in), then those two.
    let mut params: [*mut c_void; 15] = [
        fused[0],
        fused[1],
        fused[2],
        fused[3],
        fused[4],
        fused[5],
        fused[6],
        fused[7],
        fused[8],
        fused[9],
        fused[10],
        fused[11],
        fused[13],
        (&mut global_scratch as *mut u64).cast(),
        (&mut profile_scratch as *mut u64).cast(),
    ];
    launch_1d(
        Launch::Cooperative,
        kernel,
        (blocks, meta.threads()),
        meta.shared,
        stream,
        &mut params,
        &meta.name,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The tests that write a stand-in executable or start a program take
    /// turns: a program started by one test (fork, then exec) inherits, until
    /// its exec, the descriptor another test still holds open while it
    /// writes its stand-in, and exec'ing that stand-in then fails with
    /// "Text file busy" (ETXTBSY), as it once did in CI.
    static PROCESSES: std::sync::Mutex<()> = std::sync::Mutex::new(());
    fn one_at_a_time() -> std::sync::MutexGuard<'static, ()> {
        PROCESSES
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    #[test]
    fn python_is_looked_for_where_a_user_keeps_triton() {
        let named = OsString::from("/opt/venv/bin/python");
        let venv = OsString::from("/home/u/venv");
        assert_eq!(
            python_candidates(Some(&named), Some(&venv)),
            vec![PathBuf::from("/opt/venv/bin/python")]
        );
        assert_eq!(
            python_candidates(None, Some(&venv)),
            vec![
                PathBuf::from("/home/u/venv/bin/python"),
                PathBuf::from("python3")
            ]
        );
        assert_eq!(
            python_candidates(None, None),
            vec![PathBuf::from("python3")]
        );
    }

    #[test]
    fn triton_versions_are_compared_by_major_and_minor() {
        assert_eq!(major_minor("3.6.0"), Some((3, 6)));
        assert_eq!(major_minor("3.10.1+git1a2b"), Some((3, 10)));
        assert_eq!(major_minor("nightly"), None);
        assert!(major_minor("3.5.1").unwrap() < MIN_TRITON);
    }

    #[test]
    fn a_python_without_triton_is_a_clear_exit_2() {
        let _turn = one_at_a_time();
        // /bin/false runs and fails: as a Python without the module.
        let err = find_python(&[
            PathBuf::from("/bin/false"),
            PathBuf::from("/no/such/python"),
        ])
        .unwrap_err();
        assert!(
            err.reason.contains("/bin/false (no module triton)"),
            "{}",
            err.reason
        );
        assert!(err.reason.contains("/no/such/python ("), "{}", err.reason);
        assert!(err.fix.contains("pip install"), "{}", err.fix);
    }

    #[test]
    fn an_old_triton_is_refused_with_the_fix() {
        let _turn = one_at_a_time();
        let dir = tempfile::tempdir().unwrap();
        let fake = dir.path().join("python");
        std::fs::write(&fake, "#!/bin/sh\necho 3.5.1\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
        let err = find_python(&[fake]).unwrap_err();
        assert!(err.reason.contains("Triton 3.5.1"), "{}", err.reason);
        assert!(err.reason.contains("3.6 or newer"), "{}", err.reason);
    }

    #[test]
    fn a_python_others_can_write_is_not_run() {
        let _turn = one_at_a_time();
        let dir = tempfile::tempdir().unwrap();
        let open = dir.path().join("open");
        std::fs::create_dir(&open).unwrap();
        let fake = open.join("python");
        fake_python(&fake, "3.6.0");
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        let err = find_python(&[fake]).unwrap_err();
        assert!(err.reason.starts_with("Python at "), "{}", err.reason);
        assert!(err.reason.contains("mode 0777"), "{}", err.reason);
    }

    #[test]
    fn a_triton_package_others_can_write_is_refused() {
        let _turn = one_at_a_time();
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let package = dir.path().join("site-packages").join("triton");
        std::fs::create_dir_all(&package).unwrap();
        std::fs::create_dir(dir.path().join("prefix")).unwrap();
        let fake = dir.path().join("python");
        let probe = |package: &Path| {
            std::fs::write(
                &fake,
                format!(
                    "#!/bin/sh\necho 3.6.0\necho python 3.12.0\necho prefix {}\necho triton at {}/__init__.py\n",
                    dir.path().join("prefix").display(),
                    package.display()
                ),
            )
            .unwrap();
            std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
        };
        probe(&package);
        assert!(find_python(std::slice::from_ref(&fake)).is_ok());
        std::fs::set_permissions(&package, std::fs::Permissions::from_mode(0o777)).unwrap();
        let err = find_python(std::slice::from_ref(&fake)).unwrap_err();
        let shown = format!("Triton at {} is not used", package.display());
        assert!(err.reason.starts_with(&shown), "{}", err.reason);
        assert!(err.reason.contains("mode 0777"), "{}", err.reason);
        std::fs::set_permissions(&package, std::fs::Permissions::from_mode(0o755)).unwrap();
        // Python's own prefix (its standard library), the same.
        std::fs::set_permissions(
            dir.path().join("prefix"),
            std::fs::Permissions::from_mode(0o777),
        )
        .unwrap();
        let err = find_python(std::slice::from_ref(&fake)).unwrap_err();
        assert!(err.reason.contains("sys.prefix"), "{}", err.reason);
        assert!(err.reason.contains("mode 0777"), "{}", err.reason);
    }

    /// A stand-in Python at `path`: answers the probe with `version`, and
    /// as the build, writes its environment and working directory beside
    /// itself and fails.
    fn fake_python(path: &Path, version: &str) {
        use std::os::unix::fs::PermissionsExt;
        let here = path.parent().unwrap().display().to_string();
        std::fs::write(
            path,
            format!(
                "#!/bin/sh\ncase \"$1\" in\n-c) echo {version};;\n*) env > '{here}/build-env.txt'; pwd > '{here}/build-cwd.txt'; exit 1;;\nesac\n"
            ),
        )
        .unwrap();
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }

    #[test]
    fn a_bare_interpreter_name_is_looked_up_on_path() {
        let _turn = one_at_a_time();
        let dir = tempfile::tempdir().unwrap();
        fake_python(&dir.path().join("python3"), "3.6.0");
        let path = std::env::join_paths([Path::new("/no/such/dir"), dir.path()]).unwrap();
        assert_eq!(
            resolve_interpreter(Path::new("python3"), Some(&path)),
            Some(dir.path().join("python3"))
        );
        assert_eq!(resolve_interpreter(Path::new("python9"), Some(&path)), None);
        let relative = resolve_interpreter(Path::new("venv/bin/python"), Some(&path)).unwrap();
        assert!(relative.is_absolute() && relative.ends_with("venv/bin/python"));
    }

    /// The same name, another interpreter behind it (a virtual environment
    /// re-pointed, another Python on PATH): another build.
    #[test]
    fn the_key_changes_when_the_interpreter_resolves_elsewhere() {
        let _turn = one_at_a_time();
        let dir = tempfile::tempdir().unwrap();
        let (first, second) = (dir.path().join("first"), dir.path().join("second"));
        std::fs::create_dir(&first).unwrap();
        std::fs::create_dir(&second).unwrap();
        fake_python(&first.join("python3.11"), "3.6.0");
        fake_python(&second.join("python3.11"), "3.6.0");
        let nccl_bc = dir.path().join("libnccl_device.bc");
        std::fs::write(&nccl_bc, b"BC").unwrap();
        let link = dir.path().join("python");
        std::os::unix::fs::symlink(first.join("python3.11"), &link).unwrap();
        let before = find_python(std::slice::from_ref(&link)).unwrap();
        std::fs::remove_file(&link).unwrap();
        std::os::unix::fs::symlink(second.join("python3.11"), &link).unwrap();
        let after = find_python(std::slice::from_ref(&link)).unwrap();
        assert_eq!(before.path, after.path, "the same name");
        assert_ne!(
            key_text(&before, 90, Dtype::F32, &nccl_bc),
            key_text(&after, 90, Dtype::F32, &nccl_bc),
            "another interpreter, the same key"
        );
    }

    #[test]
    fn the_build_child_gets_no_inherited_triton_variable() {
        let inherited = [
            ("PATH", "/usr/bin"),
            ("TRITON_CACHE_DIR", "/shared/triton"),
            ("TRITON_KERNEL_OVERRIDE", "1"),
            ("TRITON_OVERRIDE_DIR", "/tmp/evil"),
            ("TRITON_PTXAS_PATH", "/tmp/evil/ptxas"),
            ("PYTHONPATH", "/home/u/site"),
        ]
        .map(|(k, v)| (OsString::from(k), OsString::from(v)));
        let env = child_environment(inherited, Path::new("/build/dir"));
        let triton: Vec<_> = env
            .iter()
            .filter(|(k, _)| k.as_encoded_bytes().starts_with(b"TRITON_"))
            .collect();
        assert_eq!(
            triton,
            [&(
                OsString::from("TRITON_CACHE_DIR"),
                OsString::from("/build/dir/triton-cache")
            )]
        );
        assert!(env.contains(&("PYTHONPATH".into(), "/home/u/site".into())));
        assert!(env.contains(&("PATH".into(), "/usr/bin".into())));
    }

    #[test]
    fn a_gpu_older_than_hopper_is_refused() {
        let err = check_gpu(8, 9).unwrap_err();
        assert!(
            err.reason.contains("compute capability 8.9"),
            "{}",
            err.reason
        );
        assert!(err.fix.contains("06_symm_primitive"), "{}", err.fix);
        assert!(check_gpu(9, 0).is_ok() && check_gpu(10, 0).is_ok());
    }

    #[test]
    fn another_nccl_release_than_the_bitcode_s_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let lib = dir.path().join("libnccl.so.2");
        std::fs::write(&lib, b"").unwrap();
        let err = nccl_device_bitcode(NcclVersion::new(2, 28, 9), &lib).unwrap_err();
        assert!(
            err.reason.contains("the loaded NCCL is 2.28.9"),
            "{}",
            err.reason
        );
        assert!(err.fix.contains("nvidia-nccl-cu13==2.32.3"), "{}", err.fix);
        assert!(err.fix.contains("--target"), "{}", err.fix);
        // The right release without its device bitcode.
        let err = nccl_device_bitcode(NCCL, &lib).unwrap_err();
        assert!(
            err.reason.contains("no libnccl_device.bc"),
            "{}",
            err.reason
        );
        std::fs::write(dir.path().join("libnccl_device.bc"), b"BC").unwrap();
        assert_eq!(
            nccl_device_bitcode(NCCL, &lib).unwrap(),
            dir.path().join("libnccl_device.bc")
        );
        // One that other users could rewrite is not linked.
        use std::os::unix::fs::PermissionsExt;
        let bc = dir.path().join("libnccl_device.bc");
        std::fs::set_permissions(&bc, std::fs::Permissions::from_mode(0o666)).unwrap();
        let err = nccl_device_bitcode(NCCL, &lib).unwrap_err();
        assert!(err.reason.contains("libnccl_device.bc"), "{}", err.reason);
    }

    #[test]
    fn a_kernel_with_other_parameters_is_refused() {
        let mut meta = Meta {
            name: "tp_tail_triton".into(),
            num_warps: 16,
            shared: 64,
            params: PARAMS.iter().map(|s| s.to_string()).collect(),
            triton: "3.6.0".into(),
            entry_params: 15,
            global_scratch_size: 0,
            profile_scratch_size: 0,
        };
        assert!(meta.check().is_ok());
        assert_eq!(meta.threads(), 512);
        meta.params.swap(0, 1);
        assert!(meta.check().is_err());
        meta.params.swap(0, 1);
        meta.entry_params = 16;
        assert!(meta.check().is_err());
        meta.entry_params = 15;
        meta.global_scratch_size = 16;
        assert!(meta.check().is_err());
    }
}
