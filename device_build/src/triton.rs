//! The Triton route: a Triton kernel compiled ahead of time by Triton's
//! own compiler (Python, no GPU needed), linked with a library's LLVM
//! bitcode and the loaded NCCL's `libnccl_device.bc`, and cached under the
//! same rules as the other routes ([`cache`]).
//!
//! The program gives what is its own as data ([`Program`]): the kernel's
//! script, the files it imports from beside itself (a binding and its
//! bitcode), its own arguments and the files it writes. The route finds a
//! Python with Triton ([`find_python`]), checks the loaded NCCL's device
//! bitcode ([`nccl_device_bitcode`]), and runs
//! `python <script> --arch N <args> --nccl-device-bc <file> --out <dir>`
//! in a private directory, with none of the caller's `TRITON_*` variables
//! ([`child_environment`]). One call for a program
//! ([`build_for_this_process`]); its [`Built`] prints the exact command.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use common::{CannotRun, NcclVersion, RankContext};

use crate::command::{self, command_line, Ran};
use crate::{cache, CacheRoot};

/// The oldest Triton accepted: 3.6.0 is the one seen reading the library's
/// bitcode and NCCL's and linking them; older ones were not tried. A newer
/// one is taken, and the program checks what it built (lesson 06b refuses
/// a kernel whose parameters differ from 3.6's).
pub const MIN_TRITON: (u32, u32) = (3, 6);

/// A Triton kernel to build: what is the program's own.
#[derive(Debug, Clone)]
pub struct Program {
    /// The kernel's script, which compiles it when run (e.g. `tp_tail.py`).
    pub script: &'static str,
    pub script_text: &'static str,
    /// Files the script imports or links from beside itself, written next
    /// to it (e.g. `symm.py` and `symm_comm_nccl.bc`, the library's binding
    /// and its bitcode).
    pub beside: Vec<(&'static str, &'static [u8])>,
    /// The script's own arguments, after `--arch N` (e.g. `--dtype f32`).
    pub args: Vec<String>,
    /// The files the script writes into `--out` (the cubin first).
    pub outputs: Vec<String>,
    /// The NCCL release whose headers the library's bitcode was built
    /// against: the loaded NCCL must be it ([`nccl_device_bitcode`]).
    pub nccl: NcclVersion,
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

/// The loaded NCCL (`version`, at `library`) must be the bitcode's
/// release (`nccl`, [`Program::nccl`]), and ship its device
/// bitcode (`libnccl_device.bc`, beside `libnccl.so.2` from 2.30 on).
/// Returns that file.
pub fn nccl_device_bitcode(
    nccl: NcclVersion,
    version: NcclVersion,
    library: &Path,
) -> Result<PathBuf, CannotRun> {
    if version != nccl {
        return Err(CannotRun::new(
            format!(
                "the Triton kernel's library was built against NCCL {nccl}'s device headers (its ncclDevComm layout), but the loaded NCCL is {version}"
            ),
            format!(
                "load NCCL {nccl} beside the one your environment pins (PyTorch pins its own): pip install --target ~/nccl-{nccl} nvidia-nccl-cu13=={nccl}, then NCCL_HOME=~/nccl-{nccl}/nvidia/nccl"
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
            format!("use NCCL {nccl} from its pip wheel, which ships it in nvidia/nccl/lib: pip install --target ~/nccl-{nccl} nvidia-nccl-cu13=={nccl}, then NCCL_HOME=~/nccl-{nccl}/nvidia/nccl"),
        )
    })?;
    // Linked into the kernel: another user must not be able to change it.
    common::trust::check_trusted(&bitcode, "NCCL's device library")?;
    Ok(bitcode)
}

/// What a Triton build depends on, as text (its hash names the cache
/// entry): the Python (where it resolves, its version and prefix) and its
/// Triton (version and location), the target, the script's arguments,
/// digests of the script and of every file beside it, and NCCL's device
/// library by path, size and time, as the other routes name theirs
/// (`cache::file_stamp`). Triton's own variables are not in it: the build
/// removes them ([`child_environment`]).
fn key_text(python: &Python, program: &Program, arch: u32, nccl_bc: &Path) -> String {
    let digest = cache::sha256_hex;
    let mut text = format!(
        "route triton\npython {}\n{}\ntriton {}\narch {arch}\nargs {}\nscript {} {}\n",
        python.path.display(),
        python.identity,
        python.triton,
        program.args.join(" "),
        program.script,
        digest(program.script_text.as_bytes()),
    );
    for (name, bytes) in &program.beside {
        text.push_str(&format!("beside {name} {}\n", digest(bytes)));
    }
    text.push_str(&format!(
        "libnccl_device.bc {}\n",
        cache::file_stamp(nccl_bc)
    ));
    text
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

/// The script's command line: `python <dir>/src/<script> --arch N <args>
/// --nccl-device-bc <file> --out <dir>`, as the program and its arguments.
fn script_command(
    python: &Python,
    program: &Program,
    arch: u32,
    nccl_bc: &Path,
    dir: &Path,
) -> (PathBuf, Vec<String>) {
    let mut args = vec![
        dir.join("src").join(program.script).display().to_string(),
        "--arch".into(),
        arch.to_string(),
    ];
    args.extend(program.args.iter().cloned());
    args.extend([
        "--nccl-device-bc".into(),
        nccl_bc.display().to_string(),
        "--out".into(),
        dir.display().to_string(),
    ]);
    (python.path.clone(), args)
}

/// The line [`Built::print_commands`] prints for the script's run:
/// [`command_line`] of it, then what it ran with (the environment
/// [`child_environment`] gives it, which the line alone would not).
pub fn script_line(python: &Python, program: &Path, args: &[String], dir: &Path) -> String {
    format!(
        "{}  # Triton {}; no TRITON_* variable but TRITON_CACHE_DIR={}",
        command_line(dir, program, args),
        python.triton,
        dir.join(TRITON_CACHE).display()
    )
}

/// Compiles `program` for `sm_<arch>` into `dir`: writes the script and the
/// files beside it there and runs the script, in `dir` and with the
/// environment of [`child_environment`], recording the command in `ran`.
fn compile_into(
    python: &Python,
    program: &Program,
    arch: u32,
    nccl_bc: &Path,
    dir: &Path,
    ran: &Ran,
) -> Result<()> {
    // Absolute: the build runs in `dir`, not in this process's directory.
    let nccl_bc = std::path::absolute(nccl_bc).context("the path of libnccl_device.bc")?;
    let dir = std::path::absolute(dir).context("the build directory's path")?;
    let dir = dir.as_path();
    let src = dir.join("src");
    std::fs::create_dir(&src).context("create the script directory")?;
    std::fs::write(src.join(program.script), program.script_text)
        .with_context(|| format!("write {}", program.script))?;
    for (name, bytes) in &program.beside {
        std::fs::write(src.join(name), bytes).with_context(|| format!("write {name}"))?;
    }
    // NOTE: no PYTHONSAFEPATH here: the script imports its neighbours from
    // its own directory, which Python puts first on sys.path. That
    // directory is `src`, private and holding only the files written above;
    // the working directory (`dir`, private too) is not searched for a script.
    let (interpreter, args) = script_command(python, program, arch, &nccl_bc, dir);
    ran.record(dir, script_line(python, &interpreter, &args, dir));
    let out = Command::new(&interpreter)
        .args(&args)
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
            "Triton {} could not compile the kernel ({}, {}):\n{}",
            python.triton,
            program.script,
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

/// A Triton build, and what it was made with.
pub struct Built {
    pub build: cache::Built,
    pub python: Python,
    /// The loaded NCCL's `libnccl.so.2` and its `libnccl_device.bc`.
    pub nccl_library: PathBuf,
    pub nccl_bitcode: PathBuf,
    /// The target architecture, e.g. `sm_90`.
    pub arch: String,
    /// The script's run as a command line ([`script_line`]); empty when
    /// the cache held the build.
    pub commands: Vec<String>,
    /// The files the build left ([`Program::outputs`]).
    pub files: Vec<PathBuf>,
}

impl Built {
    /// The path of one of the build's files.
    pub fn file(&self, name: &str) -> PathBuf {
        self.build.file(name)
    }

    /// On rank 0 only, on stderr: the route, its Python and NCCL's device
    /// bitcode, then what the build did and how long it took
    /// ([`build_notes`](Self::build_notes)).
    pub fn print_build_note(&self, ctx: &RankContext) {
        command::print_on_root(ctx, self.build_notes());
    }

    /// What [`print_build_note`](Self::print_build_note) prints: `note:
    /// build route: triton (Triton 3.6.0 from <python>, with
    /// <libnccl_device.bc>)`, then `note: module built in 41.20 s (route
    /// triton, sm_90)`, or `... reused from the cache in ...`.
    pub fn build_notes(&self) -> [String; 2] {
        [
            format!(
                "note: build route: triton (Triton {} from {}, with {})",
                self.python.triton,
                self.python.path.display(),
                self.nccl_bitcode.display()
            ),
            command::module_note(&self.build, "triton", &self.arch),
        ]
    }

    /// On rank 0 only, on stderr: the exact command this build ran (`note:
    /// ran: cd <dir> && <python> <script> ...`; Triton links the bitcode
    /// itself, so there is no other), or the cached files it used (`note:
    /// cached: ...`).
    pub fn print_commands(&self, ctx: &RankContext) {
        command::print_on_root(ctx, self.command_notes());
    }

    /// What [`print_commands`](Self::print_commands) prints.
    pub fn command_notes(&self) -> Vec<String> {
        command::notes(self.build.compiled, &self.commands, &self.files)
    }
}

/// Builds (or reuses) `program` for `sm_<arch>` with `python` and NCCL's
/// device bitcode `nccl_bc` (the loaded NCCL's `libnccl.so.2` is
/// `nccl_library`).
pub fn build(
    python: &Python,
    program: &Program,
    arch: u32,
    nccl_library: &Path,
    nccl_bc: &Path,
    cache_root: &CacheRoot,
) -> Result<Built> {
    let ran = Ran::default();
    let compile = |dir: &Path| compile_into(python, program, arch, nccl_bc, dir, &ran);
    let job = cache::Job {
        key_text: key_text(python, program, arch, nccl_bc),
        outputs: program.outputs.clone(),
        compile: &compile,
    };
    let build = cache::build_or_reuse(&job, cache_root)?;
    let commands = ran.lines_in(&build.dir);
    let files = program.outputs.iter().map(|o| build.file(o)).collect();
    Ok(Built {
        build,
        python: python.clone(),
        nccl_library: nccl_library.to_path_buf(),
        nccl_bitcode: nccl_bc.to_path_buf(),
        arch: format!("sm_{arch}"),
        commands,
        files,
    })
}

/// Builds (or reuses) `program` for the GPU of compute capability
/// `major.minor` and the NCCL this process loaded, in one call: checks that
/// NCCL is the bitcode's release and finds its `libnccl_device.bc`
/// ([`nccl_device_bitcode`]), then a Python with Triton
/// ([`find_python_for_this_process`]: `TRITON_PYTHON`, the active virtual
/// environment's, `python3`). Each check that fails is an exit 2 with the fix.
pub fn build_for_this_process(
    program: &Program,
    (major, minor): (i32, i32),
    cache_root: &CacheRoot,
) -> Result<Built> {
    let nccl = common::nccl::loaded_nccl()?;
    let nccl_bitcode = nccl_device_bitcode(program.nccl, nccl.version, &nccl.path)?;
    let python = find_python_for_this_process()?;
    let arch = (major * 10 + minor) as u32;
    build(
        &python,
        program,
        arch,
        &nccl.path,
        &nccl_bitcode,
        cache_root,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The release lesson 06b's bitcode was built against.
    const NCCL: NcclVersion = NcclVersion::new(2, 32, 3);

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
            key_text(&before, &program(), 90, &nccl_bc),
            key_text(&after, &program(), 90, &nccl_bc),
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
    fn another_nccl_release_than_the_bitcode_s_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let lib = dir.path().join("libnccl.so.2");
        std::fs::write(&lib, b"").unwrap();
        let err = nccl_device_bitcode(NCCL, NcclVersion::new(2, 28, 9), &lib).unwrap_err();
        assert!(
            err.reason.contains("the loaded NCCL is 2.28.9"),
            "{}",
            err.reason
        );
        assert!(err.fix.contains("nvidia-nccl-cu13==2.32.3"), "{}", err.fix);
        assert!(err.fix.contains("--target"), "{}", err.fix);
        // The right release without its device bitcode.
        let err = nccl_device_bitcode(NCCL, NCCL, &lib).unwrap_err();
        assert!(
            err.reason.contains("no libnccl_device.bc"),
            "{}",
            err.reason
        );
        std::fs::write(dir.path().join("libnccl_device.bc"), b"BC").unwrap();
        assert_eq!(
            nccl_device_bitcode(NCCL, NCCL, &lib).unwrap(),
            dir.path().join("libnccl_device.bc")
        );
        // One that other users could rewrite is not linked.
        use std::os::unix::fs::PermissionsExt;
        let bc = dir.path().join("libnccl_device.bc");
        std::fs::set_permissions(&bc, std::fs::Permissions::from_mode(0o666)).unwrap();
        let err = nccl_device_bitcode(NCCL, NCCL, &lib).unwrap_err();
        assert!(err.reason.contains("libnccl_device.bc"), "{}", err.reason);
    }

    /// A program as lesson 06b's: a script, two files beside it, its dtype.
    fn program() -> Program {
        Program {
            script: "tp_tail.py",
            script_text: "print('kernel')\n",
            beside: vec![("symm.py", b"# binding\n"), ("symm_comm_nccl.bc", b"BC")],
            args: vec!["--dtype".into(), "f32".into()],
            outputs: vec!["tp_tail_triton.cubin".into(), "tp_tail_triton.json".into()],
            nccl: NCCL,
        }
    }

    #[test]
    fn the_triton_run_reads_as_a_command_with_every_argument_in_order() {
        let python = Python {
            path: "/home/u/my venv/bin/python".into(),
            triton: "3.6.0".into(),
            identity: String::new(),
        };
        let dir = Path::new("/c/06_symm_primitive/3f2a");
        let (interpreter, args) = script_command(
            &python,
            &program(),
            90,
            Path::new("/w/nvidia/nccl/lib/libnccl_device.bc"),
            dir,
        );
        assert_eq!(
            script_line(&python, &interpreter, &args, dir),
            "cd /c/06_symm_primitive/3f2a && '/home/u/my venv/bin/python' \
             /c/06_symm_primitive/3f2a/src/tp_tail.py --arch 90 --dtype f32 \
             --nccl-device-bc /w/nvidia/nccl/lib/libnccl_device.bc --out /c/06_symm_primitive/3f2a  \
             # Triton 3.6.0; no TRITON_* variable but TRITON_CACHE_DIR=/c/06_symm_primitive/3f2a/triton-cache"
        );
    }

    #[test]
    fn what_a_build_did_is_said_in_notes() {
        let tmp = tempfile::tempdir().unwrap();
        let dir = tmp.path().join("3f2a");
        let mut built = Built {
            build: cache::Built::record(dir.clone(), true, 41.204),
            python: Python {
                path: "/v/bin/python".into(),
                triton: "3.6.0".into(),
                identity: String::new(),
            },
            nccl_library: "/n/lib/libnccl.so.2".into(),
            nccl_bitcode: "/n/lib/libnccl_device.bc".into(),
            arch: "sm_90".into(),
            commands: vec!["cd /x && /v/bin/python /x/src/tp_tail.py".into()],
            files: program().outputs.iter().map(|o| dir.join(o)).collect(),
        };
        assert_eq!(
            built.build_notes(),
            [
                "note: build route: triton (Triton 3.6.0 from /v/bin/python, with /n/lib/libnccl_device.bc)"
                    .to_string(),
                "note: module built in 41.20 s (route triton, sm_90)".to_string()
            ]
        );
        assert_eq!(
            built.command_notes(),
            ["note: ran: cd /x && /v/bin/python /x/src/tp_tail.py"]
        );
        built.build = cache::Built::record(dir.clone(), false, 0.012);
        assert_eq!(
            built.build_notes()[1],
            "note: module reused from the cache in 0.01 s (route triton, sm_90)"
        );
        let d = dir.display();
        assert_eq!(
            built.command_notes(),
            [
                format!("note: cached: {d}/tp_tail_triton.cubin"),
                format!("note: cached: {d}/tp_tail_triton.json")
            ]
        );
    }
}
