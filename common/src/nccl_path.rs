//! NCCL from pip or from `NCCL_HOME`, with no symlink to make and no
//! `LD_LIBRARY_PATH` to set.
//!
//! cudarc opens NCCL by name, as `libnccl.so` (and a few other names, none of
//! them `libnccl.so.2`), and takes no path. A pip wheel (`pip install
//! nvidia-nccl-cu13`) and NCCL's runtime packages ship only `libnccl.so.2`,
//! and a wheel's directory is not on the loader path. The loader reads
//! `LD_LIBRARY_PATH` once, when the program starts, so setting it later does
//! nothing. So when `libnccl.so` does not load, the launcher looks for a
//! `libnccl.so.2` where `NCCL_HOME`, the active Python environment, `pip
//! install --user` or the loader path put it, and if it finds one it
//! re-executes the program once, before anything else has started, with a
//! private directory (mode 0700, this user's) first on `LD_LIBRARY_PATH`
//! that holds one link, `libnccl.so` -> that file. The re-executed program
//! checks that the directory is the one it made, takes it off the
//! environment its children inherit, loads NCCL through the link first
//! thing and keeps it loaded. The directory lives as long as the program:
//! the loader searches it for every library loaded by name later (NCCL's
//! `libnccl-net.so`, `libcuda.so`), so a name left there once removed would
//! be anyone's to fill. It is removed at exit. Under `mpirun` every process
//! does the same for itself; `exec` keeps its pid, which is all the MPI
//! launcher knows.
//!
//! Nothing is loaded from a directory that another user can write: a
//! library found there is refused with exit code 2.

use std::ffi::{c_void, CStr, OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};

use crate::CannotRun;

/// Set in the re-executed program: the private directory that holds the
/// `libnccl.so` link.
pub const LINK_DIR_VARIABLE: &str = "SYMMEM_NCCL_LINK_DIR";
/// The start of the private directory's name (see `cleanup::owner_prefix`).
const LINK_DIR_PREFIX: &str = "symmem-nccl-";

/// The environment variables that steer the search, captured once so that the
/// search is a pure function the tests can drive.
#[derive(Debug, Clone, Default)]
pub struct Env {
    pub nccl_home: Option<OsString>,
    pub virtual_env: Option<OsString>,
    pub conda_prefix: Option<OsString>,
    pub path: Option<OsString>,
    pub home: Option<OsString>,
}

impl Env {
    pub fn from_process() -> Self {
        let var = |name| std::env::var_os(name).filter(|v| !v.is_empty());
        Self {
            nccl_home: var("NCCL_HOME"),
            virtual_env: var("VIRTUAL_ENV"),
            conda_prefix: var("CONDA_PREFIX"),
            path: var("PATH"),
            home: var("HOME"),
        }
    }
}

/// A `libnccl.so.2` that exists, and where it was found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    pub library: PathBuf,
    /// How it was found, for messages: "NCCL_HOME", "the Python environment
    /// /home/me/venv", ...
    pub through: String,
}

/// Where a `libnccl.so.2` is looked for, in order, keeping those that exist:
/// `$NCCL_HOME/lib`; the `nvidia/nccl/lib` directory of a pip wheel in the
/// site-packages of `$VIRTUAL_ENV`, of `$CONDA_PREFIX`, of every `python3` on
/// `$PATH` (its prefix and `<prefix>/local`), and of `pip install --user`
/// (`~/.local`): [`crate::pip`] knows those places.
pub fn candidates(env: &Env) -> Vec<Candidate> {
    let mut found = Vec::new();
    if let Some(home) = &env.nccl_home {
        found.push(Candidate {
            library: Path::new(home).join("lib/libnccl.so.2"),
            through: format!("NCCL_HOME={}", Path::new(home).display()),
        });
    }
    let installations = crate::pip::installations(
        env.virtual_env.as_deref(),
        env.conda_prefix.as_deref(),
        env.path.as_deref(),
        env.home.as_deref(),
    );
    for installation in installations {
        for packages in crate::pip::package_dirs(&installation.prefix) {
            found.push(Candidate {
                library: packages.join(crate::pip::NCCL_LIBRARY),
                through: installation.through.clone(),
            });
        }
    }
    found.retain(|c| c.library.is_file());
    let mut seen = std::collections::HashSet::new();
    found.retain(|c| seen.insert(c.library.canonicalize().unwrap_or(c.library.clone())));
    found
}

/// Can another user change what `path` leads to: the file, a directory on
/// the way to it, or the file its links lead to? Then what is loaded from it
/// is not only ours to decide. The check every loaded library and run tool
/// shares: [`crate::trust::find_untrusted`].
pub fn writable_by_others(path: &Path) -> Option<PathBuf> {
    crate::trust::find_untrusted(path).map(|open| open.path)
}

/// `NCCL_HOME`, if set, names an NCCL installation: a directory whose
/// `lib/` holds `libnccl.so.2`. Err names which of the three usual mistakes
/// it is (no such path, a file, a directory without the library), with the
/// fix; where the library sits one level up or down (the `lib/` directory
/// itself, or the library file), the fix names the directory meant.
pub fn check_nccl_home(env: &Env) -> Result<(), CannotRun> {
    let Some(home) = &env.nccl_home else {
        return Ok(());
    };
    let home = Path::new(home);
    const WHAT: &str = "an NCCL installation, the directory whose lib/ holds libnccl.so.2";
    const OR_UNSET: &str = "or unset NCCL_HOME to use the NCCL that pip or the loader provides";
    let installation_above = |lib: &Path| {
        lib.file_name()
            .is_some_and(|n| n == "lib")
            .then(|| lib.parent())
            .flatten()
            .filter(|above| above.join("lib/libnccl.so.2").is_file())
            .map(Path::to_path_buf)
    };
    let (reason, meant) = match std::fs::metadata(home) {
        Err(_) => (format!("NCCL_HOME={} does not exist", home.display()), None),
        Ok(meta) if !meta.is_dir() => (
            format!("NCCL_HOME={} is a file, not a directory", home.display()),
            home.parent().and_then(installation_above),
        ),
        Ok(_) if !home.join("lib/libnccl.so.2").is_file() => (
            format!("NCCL_HOME={} has no lib/libnccl.so.2", home.display()),
            installation_above(home),
        ),
        Ok(_) => return Ok(()),
    };
    let fix = match meant {
        Some(meant) => format!("set NCCL_HOME={} ({WHAT})", meant.display()),
        None => format!("point NCCL_HOME at {WHAT}, {OR_UNSET}"),
    };
    Err(CannotRun::new(reason, fix))
}

/// The file the loader finds for `name`, searched as it searches: a name with
/// a slash is a path; otherwise `LD_LIBRARY_PATH`, the directories listed in
/// `/etc/ld.so.conf.d/*.conf`, then the default ones. `None` if no such file
/// exists there. Used only to say *which* file failed to load.
pub fn loader_search(name: &str) -> Option<PathBuf> {
    if name.contains('/') {
        return Some(PathBuf::from(name));
    }
    let mut dirs: Vec<PathBuf> = std::env::var_os("LD_LIBRARY_PATH")
        .map(|paths| std::env::split_paths(&paths).collect())
        .unwrap_or_default();
    if let Ok(entries) = std::fs::read_dir("/etc/ld.so.conf.d") {
        let mut confs: Vec<PathBuf> = entries.filter_map(|e| Some(e.ok()?.path())).collect();
        confs.sort();
        for conf in confs
            .iter()
            .filter(|p| p.extension() == Some(OsStr::new("conf")))
        {
            let text = std::fs::read_to_string(conf).unwrap_or_default();
            dirs.extend(
                text.lines()
                    .map(str::trim)
                    .filter(|line| line.starts_with('/'))
                    .map(PathBuf::from),
            );
        }
    }
    dirs.extend(
        ["/lib64", "/usr/lib64", "/lib", "/usr/lib"]
            .iter()
            .map(PathBuf::from),
    );
    dirs.into_iter()
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
        .map(|found| found.canonicalize().unwrap_or(found))
}

/// The file of the shared object that holds `address` (a function's, say).
pub fn library_path(address: usize) -> Option<PathBuf> {
    // SAFETY: dladdr only compares the address with the loader's tables, it
    // does not dereference it; dli_fname points into those tables.
    unsafe {
        let mut info: libc::Dl_info = std::mem::zeroed();
        if libc::dladdr(address as *const c_void, &mut info) == 0 || info.dli_fname.is_null() {
            return None;
        }
        let path = Path::new(OsStr::from_bytes(CStr::from_ptr(info.dli_fname).to_bytes()));
        Some(path.canonicalize().unwrap_or_else(|_| path.to_path_buf()))
    }
}

/// Called by the launcher first, before any thread or library starts: if
/// NCCL does not load as cudarc loads it but a `libnccl.so.2` is found (see
/// [`candidates`]; then the loader path), or if `NCCL_HOME` names an NCCL
/// other than the one that loads, re-executes this program with a private
/// `libnccl.so` link first on `LD_LIBRARY_PATH`. Returns only when it
/// did not re-execute: nothing to do, already re-executed, nothing found (the
/// preflight then says what to install), or the exec failed (a warning; the
/// preflight reports what it finds). Refused with exit code 2: a library
/// that other users can write, an `NCCL_HOME` that names no NCCL
/// ([`check_nccl_home`]), an inherited link directory that is not this
/// process's own ([`check_link_dir`]).
pub fn reexec_with_pip_nccl() -> Result<(), CannotRun> {
    if let Some(dir) = std::env::var_os(LINK_DIR_VARIABLE) {
        let dir = PathBuf::from(dir);
        forget_link_dir(&dir);
        check_link_dir(&dir).map_err(|why| {
            CannotRun::new(
                format!(
                    "{LINK_DIR_VARIABLE}={} is not this program's private link directory: {why}",
                    dir.display()
                ),
                format!(
                    "unset {LINK_DIR_VARIABLE} and take that directory off LD_LIBRARY_PATH (the launcher sets both only for itself); \
                     if you set neither, point TMPDIR at a directory only you can write"
                ),
            )
        })?;
        load_through_link(&dir);
        crate::cleanup::remove_at_exit(&dir);
        return Ok(());
    }
    let env = Env::from_process();
    check_nccl_home(&env)?;
    let mut found = candidates(&env);
    let from_home = found.first().filter(|c| c.through.starts_with("NCCL_HOME"));
    // SAFETY: only dlopen()s and closes cudarc's candidate names.
    if unsafe { cudarc::nccl::sys::is_culib_present() } {
        // NCCL loads as it is. Only NCCL_HOME, which the user set to say
        // which NCCL to use, overrules the loader's choice.
        match from_home {
            Some(home) if loaded_as_cudarc_loads() != home.library.canonicalize().ok() => {}
            _ => return Ok(()),
        }
    }
    if let Some(library) = loader_search("libnccl.so.2") {
        found.push(Candidate {
            library,
            through: "the loader path (a runtime-only NCCL package)".into(),
        });
    }
    let Some(candidate) = found.into_iter().next() else {
        return Ok(());
    };
    if let Some(open) = crate::trust::find_untrusted(&candidate.library) {
        return Err(untrusted_nccl(&candidate, &open));
    }
    let Some(dir) = make_link_dir(&std::env::temp_dir(), &candidate.library)? else {
        return Ok(());
    };
    // The environment the program was started with, not the one it has now:
    // a lesson may have set variables for itself before the launcher ran
    // (lesson 02 points NCCL's log at a file of its own), and the restarted
    // program sets them again.
    let started_with = started_environment();
    let mut library_path = OsString::from(dir.path());
    let old = started_with.iter().find(|(k, _)| k == "LD_LIBRARY_PATH");
    if let Some((_, old)) = old.filter(|(_, v)| !v.is_empty()) {
        library_path.push(":");
        library_path.push(old);
    }
    let mut args = std::env::args_os();
    let arg0 = args.next().unwrap_or_default();
    let err = std::process::Command::new("/proc/self/exe")
        .arg0(arg0)
        .args(args)
        .env_clear()
        .envs(started_with)
        .env("LD_LIBRARY_PATH", library_path)
        .env(LINK_DIR_VARIABLE, dir.path())
        .exec();
    // Only reached if exec failed: the directory is removed as `dir` drops.
    eprintln!(
        "warning: could not re-execute with NCCL from {}: {err}",
        candidate.library.display()
    );
    Ok(())
}

/// The refusal of `candidate`, because of `open` on its way. Where another
/// user owns that step, only they could change it: the fix says so (as
/// [`crate::trust::refusal`] does) instead of asking for a `chmod`.
fn untrusted_nccl(candidate: &Candidate, open: &crate::trust::Untrusted) -> CannotRun {
    let found = format!(
        "NCCL found at {} (through {})",
        candidate.library.display(),
        candidate.through
    );
    match open.owner {
        Some(_) => CannotRun::new(
            format!(
                "{found}, but {} {}: it is not loaded from there",
                open.path.display(),
                open.why
            ),
            crate::trust::refusal(&candidate.library, "NCCL", open).fix,
        ),
        None => CannotRun::new(
            format!(
                "{found}, but {} can be written by other users: it is not loaded from there",
                open.path.display()
            ),
            "install NCCL where only you or root can write (a virtual environment of your own, or the system's packages)",
        ),
    }
}

/// The directory the private link directory is made in: `base` (the
/// system's temporary directory, from `TMPDIR`) as an absolute path, so that
/// the re-executed program finds it wherever it runs. Refused with exit code
/// 2 if another user could rename or replace what is made in it: a step on
/// the way that others can write (a sticky one that root or this user owns,
/// as `/tmp`, excepted) or that another user owns; see
/// [`crate::trust::find_untrusted_place`].
fn link_dir_base(base: &Path) -> Result<PathBuf, CannotRun> {
    const FIX: &str = "set TMPDIR to a directory only you can write \
                       (for example: mkdir -m 700 -p ~/tmp && export TMPDIR=~/tmp)";
    let absolute = std::path::absolute(base).map_err(|e| {
        CannotRun::new(
            format!(
                "the temporary directory {} is relative and the current directory is unknown ({e})",
                base.display()
            ),
            FIX,
        )
    })?;
    match crate::trust::find_untrusted_place(&absolute) {
        None => Ok(absolute),
        Some(open) => Err(CannotRun::new(
            format!(
                "NCCL's libnccl.so link would be made in {}, but {} {}, so another user could replace it",
                absolute.display(),
                open.path.display(),
                open.why
            ),
            FIX,
        )),
    }
}

/// Makes the private directory in `base` (see [`link_dir_base`]) with its one
/// link, `libnccl.so` -> `library`. The link's target is absolute: a relative
/// one (from a relative `NCCL_HOME` or `PATH` entry) would be read against the
/// link directory and lead nowhere. `Ok(None)`, after a warning, if the
/// directory or link cannot be made: the preflight then reports what it finds.
fn make_link_dir(
    base: &Path,
    library: &Path,
) -> Result<Option<crate::cleanup::OwnedDir>, CannotRun> {
    let base = link_dir_base(base)?;
    crate::cleanup::remove_stale(&base, LINK_DIR_PREFIX);
    let dir = match crate::cleanup::OwnedDir::create(&base, LINK_DIR_PREFIX) {
        Ok(dir) => dir,
        Err(err) => {
            eprintln!(
                "warning: could not make a private directory in {} for NCCL's libnccl.so link: {err}",
                base.display()
            );
            return Ok(None);
        }
    };
    let linked = std::path::absolute(library)
        .and_then(|target| std::os::unix::fs::symlink(target, dir.path().join("libnccl.so")));
    if let Err(err) = linked {
        eprintln!(
            "warning: could not link libnccl.so to {}: {err}",
            library.display()
        );
        return Ok(None);
    }
    Ok(Some(dir))
}

/// The environment this process was started with: `/proc/self/environ`
/// keeps the block the kernel gave it, which `setenv` leaves as it was.
/// The current environment where that cannot be read.
fn started_environment() -> Vec<(OsString, OsString)> {
    let Ok(block) = std::fs::read("/proc/self/environ") else {
        return std::env::vars_os().collect();
    };
    block
        .split(|&b| b == 0)
        .filter_map(|entry| {
            let at = entry.iter().position(|&b| b == b'=')?;
            let (key, value) = (&entry[..at], &entry[at + 1..]);
            Some((
                OsStr::from_bytes(key).into(),
                OsStr::from_bytes(value).into(),
            ))
        })
        .collect()
}

/// The file that `libnccl.so`, cudarc's first name for NCCL, loads from.
fn loaded_as_cudarc_loads() -> Option<PathBuf> {
    // SAFETY: loading NCCL runs only its ELF constructors; the symbol's
    // address is only looked up, not called.
    unsafe {
        let library = libloading::Library::new("libnccl.so").ok()?;
        let symbol: libloading::Symbol<unsafe extern "C" fn()> =
            library.get(b"ncclGetVersion\0").ok()?;
        library_path(*symbol as usize)
    }
}

/// In the re-executed program: loads NCCL through the link, as cudarc will
/// ask for it (`libnccl.so`), and keeps it loaded, so that later look-ups of
/// that name find the loaded library without searching. The directory stays
/// (see [`check_link_dir`] and `cleanup::remove_at_exit`): the loader keeps
/// searching it for every library loaded by name, so it must not leave a
/// name behind that someone else could fill. If NCCL does not load, the
/// preflight names what is wrong.
fn load_through_link(dir: &Path) {
    static KEEP: std::sync::OnceLock<[libloading::Library; 2]> = std::sync::OnceLock::new();
    let Ok(target) = std::fs::read_link(dir.join("libnccl.so")) else {
        return;
    };
    // The file by its own path first, so that the loader names the library
    // by it (the banner's "NCCL ... from <path>"), then by the link's name,
    // which the loader sees is the same file and adds to that library's
    // names: cudarc's later look-up of `libnccl.so` finds it loaded.
    // SAFETY: loading NCCL runs only its ELF constructors.
    let loaded = unsafe {
        libloading::Library::new(&target)
            .and_then(|by_path| Ok([by_path, libloading::Library::new("libnccl.so")?]))
    };
    if let Ok(libraries) = loaded {
        let _ = KEEP.set(libraries);
    }
}

/// In the re-executed program, first thing: takes the link directory and
/// [`LINK_DIR_VARIABLE`] out of this process's environment, so that the
/// programs it starts (nvcc, Python, their own children) neither search a
/// directory that is gone once this process ends nor take it for theirs.
/// The loader keeps the search path it read at start, so NCCL still loads
/// through the link.
///
/// Runs before any thread starts (`reexec_with_pip_nccl` is the launcher's
/// first step): changing the environment while another thread may read it
/// is undefined behaviour in C.
fn forget_link_dir(dir: &Path) {
    std::env::remove_var(LINK_DIR_VARIABLE);
    if let Some(paths) = std::env::var_os("LD_LIBRARY_PATH") {
        match without_entry(&paths, dir) {
            Some(rest) => std::env::set_var("LD_LIBRARY_PATH", rest),
            None => std::env::remove_var("LD_LIBRARY_PATH"),
        }
    }
}

/// The search path `paths` without `dir`; `None` if nothing is left. Other
/// entries stay as they are, empty ones (the current directory) included.
fn without_entry(paths: &OsStr, dir: &Path) -> Option<OsString> {
    let rest: Vec<PathBuf> = std::env::split_paths(paths)
        .filter(|entry| entry != dir)
        .collect();
    if rest.is_empty() {
        return None;
    }
    std::env::join_paths(rest).ok()
}

/// Is `dir`, inherited in [`LINK_DIR_VARIABLE`], the directory this process
/// made for itself before it restarted? The restart keeps the pid, so the
/// name must carry this host and pid (`cleanup::owner_prefix`); it must be a
/// directory (not a link) of this user's with mode 0700, in a directory
/// where no other user can rename it (no step above it that others can
/// write or that another user owns), and its `libnccl.so` a link to a file
/// no other user can write. Anything else (a variable left from another
/// process, set by hand, a directory someone else made) is not loaded from,
/// and not removed. Err says why.
fn check_link_dir(dir: &Path) -> Result<(), String> {
    let mine_by_name = crate::cleanup::owner_prefix(LINK_DIR_PREFIX);
    let named = dir.is_absolute()
        && dir
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with(&mine_by_name));
    if !named {
        return Err(format!(
            "its name does not start with {mine_by_name} (this host and process)"
        ));
    }
    let me = crate::unix::effective_uid();
    let meta = std::fs::symlink_metadata(dir).map_err(|e| format!("it cannot be read ({e})"))?;
    if !meta.is_dir() {
        return Err("it is not a directory".into());
    }
    if meta.uid() != me {
        return Err(format!("it belongs to user {}, not to you", meta.uid()));
    }
    if meta.mode() & 0o777 != 0o700 {
        return Err(format!("it has mode {:04o}, not 0700", meta.mode() & 0o777));
    }
    // Every step above it, not only its parent, and each as itself (a
    // link judged as a link): see `crate::trust::find_untrusted_place`.
    let parent = dir.parent().unwrap_or(Path::new("/"));
    if let Some(open) = crate::trust::find_untrusted_place(parent) {
        return Err(format!(
            "other users could rename what is in {}: {} {}",
            parent.display(),
            open.path.display(),
            open.why
        ));
    }
    let link = dir.join("libnccl.so");
    let is_link = std::fs::symlink_metadata(&link).is_ok_and(|m| m.file_type().is_symlink());
    let target = std::fs::read_link(&link)
        .ok()
        .filter(|_| is_link)
        .ok_or_else(|| format!("{} is not a link", link.display()))?;
    if let Some(open) = writable_by_others(&target) {
        return Err(format!(
            "its libnccl.so leads to {}, and other users can write {}",
            target.display(),
            open.display()
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn touch(path: &Path) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, b"").unwrap();
    }

    /// Link directories in `dir`: what a refused run must not leave behind.
    fn leftovers(dir: &Path) -> Vec<String> {
        std::fs::read_dir(dir)
            .map(|entries| {
                entries
                    .filter_map(Result::ok)
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|name| name.starts_with(LINK_DIR_PREFIX))
                    .collect()
            })
            .unwrap_or_default()
    }

    #[test]
    fn children_get_the_loader_path_without_the_link_directory() {
        let link = Path::new("/tmp/symmem-nccl-host-1-AbC");
        let paths = OsString::from("/tmp/symmem-nccl-host-1-AbC:/opt/cuda/lib64::/usr/lib");
        assert_eq!(
            without_entry(&paths, link),
            Some(OsString::from("/opt/cuda/lib64::/usr/lib"))
        );
        assert_eq!(without_entry(link.as_os_str(), link), None);
    }

    #[test]
    fn only_this_process_own_private_link_directory_is_trusted() {
        let base = tempfile::tempdir().unwrap();
        let lib = base.path().join("lib/libnccl.so.2");
        touch(&lib);
        let ours = crate::cleanup::OwnedDir::create(base.path(), LINK_DIR_PREFIX).unwrap();
        std::os::unix::fs::symlink(&lib, ours.path().join("libnccl.so")).unwrap();
        assert_eq!(check_link_dir(ours.path()), Ok(()));

        std::fs::set_permissions(ours.path(), std::fs::Permissions::from_mode(0o755)).unwrap();
        let err = check_link_dir(ours.path()).unwrap_err();
        assert_eq!(err, "it has mode 0755, not 0700");
        std::fs::set_permissions(ours.path(), std::fs::Permissions::from_mode(0o700)).unwrap();

        // A parent's directory: the same host, another pid.
        let theirs = base
            .path()
            .join(crate::cleanup::test_names::stale_dir_name(LINK_DIR_PREFIX));
        std::fs::create_dir(&theirs).unwrap();
        let err = check_link_dir(&theirs).unwrap_err();
        assert!(err.starts_with("its name does not start with"), "{err}");

        let open = tempfile::tempdir().unwrap();
        std::fs::set_permissions(open.path(), std::fs::Permissions::from_mode(0o777)).unwrap();
        let in_open = crate::cleanup::OwnedDir::create(open.path(), LINK_DIR_PREFIX).unwrap();
        std::os::unix::fs::symlink(&lib, in_open.path().join("libnccl.so")).unwrap();
        let err = check_link_dir(in_open.path()).unwrap_err();
        assert!(err.contains("other users could rename"), "{err}");
    }

    /// `<tmp>/open` (mode 0777, not sticky) and in it `tmp` (this user's,
    /// 0700): a TMPDIR whose own mode is fine but which another user could
    /// rename away and replace.
    fn tmpdir_under_an_open_directory(root: &Path) -> PathBuf {
        let open = root.join("open");
        let tmp = open.join("tmp");
        std::fs::create_dir_all(&tmp).unwrap();
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o700)).unwrap();
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
        tmp
    }

    #[test]
    fn a_link_directory_below_a_directory_others_can_write_is_refused() {
        // Its parent is private; the old check looked at the parent only.
        let root = tempfile::tempdir().unwrap();
        let lib = root.path().join("lib/libnccl.so.2");
        touch(&lib);
        let tmp = tmpdir_under_an_open_directory(root.path());
        let dir = crate::cleanup::OwnedDir::create(&tmp, LINK_DIR_PREFIX).unwrap();
        std::os::unix::fs::symlink(&lib, dir.path().join("libnccl.so")).unwrap();
        let err = check_link_dir(dir.path()).unwrap_err();
        assert!(err.contains("other users could rename"), "{err}");
        assert!(
            err.contains(&format!(
                "{} has mode 0777",
                root.path().join("open").display()
            )),
            "{err}"
        );
        std::fs::set_permissions(
            root.path().join("open"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        assert_eq!(check_link_dir(dir.path()), Ok(()));
    }

    #[test]
    fn no_link_directory_is_made_in_a_tmpdir_others_can_replace() {
        let root = tempfile::tempdir().unwrap();
        let lib = root.path().join("lib/libnccl.so.2");
        touch(&lib);
        let tmp = tmpdir_under_an_open_directory(root.path());
        let err = make_link_dir(&tmp, &lib).unwrap_err();
        assert!(
            err.reason.contains(&format!(
                "{} has mode 0777",
                root.path().join("open").display()
            )),
            "{err}"
        );
        assert!(
            err.fix
                .starts_with("set TMPDIR to a directory only you can write"),
            "{}",
            err.fix
        );
        let err = anyhow::Error::from(err);
        assert_eq!(crate::exit_code(&err), crate::EXIT_CANNOT_RUN);
        assert!(leftovers(&tmp).is_empty());
        // A TMPDIR that is itself open and not sticky: the same.
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o777)).unwrap();
        std::fs::set_permissions(
            root.path().join("open"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        let err = make_link_dir(&tmp, &lib).unwrap_err();
        assert!(
            err.reason
                .contains(&format!("{} has mode 0777", tmp.display())),
            "{err}"
        );
        // Sticky and this user's (or root's), as /tmp: the directory is made.
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o1777)).unwrap();
        let dir = make_link_dir(&tmp, &lib).unwrap().expect("made");
        assert_eq!(check_link_dir(dir.path()), Ok(()));
    }

    #[test]
    fn a_relative_library_path_is_linked_by_its_absolute_path() {
        // A relative NCCL_HOME (or PATH entry) names the library relative
        // to the current directory; the link is read relative to the link
        // directory, where such a target leads nowhere.
        let root = tempfile::tempdir().unwrap();
        let lib = root.path().join("nccl/lib/libnccl.so.2");
        touch(&lib);
        let cwd = std::env::current_dir().unwrap();
        let up = "../".repeat(cwd.components().count() - 1);
        let relative = Path::new(&up).join(lib.strip_prefix("/").unwrap());
        assert!(relative.is_relative() && relative.is_file(), "{relative:?}");
        let base = root.path().join("tmp");
        std::fs::create_dir(&base).unwrap();
        let dir = make_link_dir(&base, &relative).unwrap().expect("made");
        let link = dir.path().join("libnccl.so");
        let target = std::fs::read_link(&link).unwrap();
        assert!(target.is_absolute(), "{target:?}");
        assert_eq!(
            link.canonicalize().unwrap(),
            lib.canonicalize().unwrap(),
            "the link leads to the library"
        );
        assert_eq!(check_link_dir(dir.path()), Ok(()));
    }

    #[test]
    fn nccl_of_another_user_is_refused_without_a_chmod_fix() {
        let library = PathBuf::from("/home/bob/venv/lib/libnccl.so.2");
        let candidate = Candidate {
            library: library.clone(),
            through: "NCCL_HOME=/home/bob/venv".into(),
        };
        let open = crate::trust::Untrusted {
            path: "/home/bob".into(),
            why: "belongs to uid 1001, neither this user (uid 1000) nor root".into(),
            owner: Some(1001),
        };
        let err = untrusted_nccl(&candidate, &open);
        assert!(
            err.reason.contains("/home/bob belongs to uid 1001"),
            "{err}"
        );
        assert!(
            err.fix
                .starts_with("/home/bob is owned by uid 1001 (not you, not root): ask its owner"),
            "{}",
            err.fix
        );
        assert!(!err.fix.contains("chmod"), "{}", err.fix);
        // Open to others: the message lesson 01's test reads.
        let open = crate::trust::Untrusted {
            why: "has mode 0777: other users can write it".into(),
            owner: None,
            ..open
        };
        let err = untrusted_nccl(&candidate, &open);
        assert!(
            err.reason
                .contains("/home/bob can be written by other users"),
            "{err}"
        );
    }

    #[test]
    fn each_nccl_home_mistake_is_named_with_its_fix() {
        let root = tempfile::tempdir().unwrap();
        let install = root.path().join("nccl");
        touch(&install.join("lib/libnccl.so.2"));
        let check = |home: &Path| {
            check_nccl_home(&Env {
                nccl_home: Some(home.into()),
                ..Env::default()
            })
        };
        assert!(check(&install).is_ok());
        assert!(check_nccl_home(&Env::default()).is_ok());
        let absent = root.path().join("absent");
        let err = check(&absent).unwrap_err();
        assert_eq!(
            err.reason,
            format!("NCCL_HOME={} does not exist", absent.display())
        );
        assert!(err.fix.contains("or unset NCCL_HOME"), "{}", err.fix);
        let file = install.join("lib/libnccl.so.2");
        let err = check(&file).unwrap_err();
        assert_eq!(
            err.reason,
            format!("NCCL_HOME={} is a file, not a directory", file.display())
        );
        assert!(
            err.fix
                .starts_with(&format!("set NCCL_HOME={} (", install.display())),
            "{}",
            err.fix
        );
        let err = check(&install.join("lib")).unwrap_err();
        assert!(
            err.reason.ends_with("/lib has no lib/libnccl.so.2"),
            "{err}"
        );
        assert!(
            err.fix
                .starts_with(&format!("set NCCL_HOME={} (", install.display())),
            "{}",
            err.fix
        );
        let err = check(root.path()).unwrap_err();
        assert!(err.reason.ends_with(" has no lib/libnccl.so.2"), "{err}");
        assert!(err.fix.starts_with("point NCCL_HOME at"), "{}", err.fix);
    }

    #[test]
    fn nccl_home_comes_first_then_the_python_environments() {
        let root = tempfile::tempdir().unwrap();
        let home = root.path().join("nccl");
        let venv = root.path().join("venv");
        let user = root.path().join("user");
        touch(&home.join("lib/libnccl.so.2"));
        touch(&venv.join("lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2"));
        touch(&user.join(".local/lib/python3.11/site-packages/nvidia/nccl/lib/libnccl.so.2"));
        let env = Env {
            nccl_home: Some(home.clone().into()),
            virtual_env: Some(venv.clone().into()),
            home: Some(user.clone().into()),
            ..Env::default()
        };
        let found = candidates(&env);
        let libraries: Vec<&Path> = found.iter().map(|c| c.library.as_path()).collect();
        assert_eq!(
            libraries,
            [
                home.join("lib/libnccl.so.2"),
                venv.join("lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2"),
                user.join(".local/lib/python3.11/site-packages/nvidia/nccl/lib/libnccl.so.2"),
            ]
        );
        assert!(found[0].through.starts_with("NCCL_HOME="));
        assert!(found[1].through.contains("Python environment"));
        assert_eq!(found[2].through, "pip install --user");
    }

    #[test]
    fn the_python_on_path_and_its_local_prefix_are_searched() {
        let root = tempfile::tempdir().unwrap();
        let prefix = root.path().join("usr");
        touch(&prefix.join("bin/python3"));
        touch(&prefix.join("local/lib/python3.11/dist-packages/nvidia/nccl/lib/libnccl.so.2"));
        let env = Env {
            path: Some(prefix.join("bin").into()),
            ..Env::default()
        };
        let found = candidates(&env);
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].through.contains("bin/python3"), "{found:?}");
    }

    #[test]
    fn the_restart_gets_the_environment_the_program_started_with() {
        // What the program sets for itself (lesson 02's NCCL_DEBUG) is not
        // passed on: the restarted program sets it again.
        std::env::set_var("SYMMEM_TEST_SET_AFTER_START", "1");
        let started = started_environment();
        assert!(started.iter().any(|(k, _)| k == "PATH"), "{started:?}");
        assert!(!started
            .iter()
            .any(|(k, _)| k == "SYMMEM_TEST_SET_AFTER_START"));
    }

    #[test]
    fn nothing_is_found_where_nothing_is() {
        let root = tempfile::tempdir().unwrap();
        let env = Env {
            nccl_home: Some(root.path().into()),
            virtual_env: Some(root.path().join("venv").into()),
            home: Some(root.path().into()),
            ..Env::default()
        };
        assert_eq!(candidates(&env), []);
    }

    #[test]
    fn a_library_others_can_write_is_named() {
        let root = tempfile::tempdir().unwrap();
        let lib = root.path().join("lib/libnccl.so.2");
        touch(&lib);
        std::fs::set_permissions(
            lib.parent().unwrap(),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        std::fs::set_permissions(&lib, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(writable_by_others(&lib), None);
        std::fs::set_permissions(
            lib.parent().unwrap(),
            std::fs::Permissions::from_mode(0o777),
        )
        .unwrap();
        assert_eq!(
            writable_by_others(&lib),
            Some(lib.parent().unwrap().to_path_buf())
        );
        std::fs::set_permissions(
            lib.parent().unwrap(),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        std::fs::set_permissions(&lib, std::fs::Permissions::from_mode(0o666)).unwrap();
        assert_eq!(writable_by_others(&lib), Some(lib.clone()));
    }

    #[test]
    fn a_directory_others_can_write_above_the_parent_is_named() {
        // The old check asked about the file and its parent only.
        let root = tempfile::tempdir().unwrap();
        let lib = root.path().join("site/nvidia/nccl/lib/libnccl.so.2");
        touch(&lib);
        let site = root.path().join("site");
        std::fs::set_permissions(&site, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert_eq!(writable_by_others(&lib), Some(site));
    }
}
