//! The build cache, shared by both routes: where builds are kept, the checks
//! that make it safe to load from, and the build-then-rename that keeps a
//! half-written build from ever being seen.
//!
//! A build is a directory named by a hash of everything that went into it
//! (the key). Beside its outputs it holds `key.txt`: the key's full text and
//! a SHA-256 of every output. On reuse both are checked, so a cubin that was
//! truncated, replaced, or made for other inputs is refused with the fix
//! instead of being loaded.

use std::ffi::OsString;
use std::fs::Permissions;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Once, Weak};
use std::time::Instant;

use anyhow::{Context, Result};
use common::cleanup::{self, OwnedDir};
use common::unix::effective_uid;
use common::{CannotRun, RankContext};
use sha2::{Digest, Sha256};

/// Runs `build` on rank 0 first and, once it has succeeded there, on every
/// other rank, which then finds the build in the cache instead of all ranks
/// compiling at once. Collective: when rank 0's build fails, every rank
/// fails (rank 0 with its reason, `what` as its context).
pub fn root_first<T>(
    ctx: &RankContext,
    what: &str,
    mut build: impl FnMut() -> Result<T>,
) -> Result<T> {
    let first = if ctx.is_root() {
        build().map(Some)
    } else {
        Ok(None)
    };
    match ctx.all_ok(first.with_context(|| what.to_string()))? {
        Some(built) => Ok(built),
        None => build().with_context(|| what.to_string()),
    }
}

/// Where builds are kept between runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CacheRoot {
    /// `$XDG_CACHE_HOME/nccl-symmem-rs/<program>`, else
    /// `~/.cache/nccl-symmem-rs/<program>`: used once checked to be this
    /// user's alone (see [`open_cache`]).
    Kept(PathBuf),
    /// No cache location: each process builds into a private temporary
    /// directory, removed when the build is no longer used.
    Private { why: String },
}

/// The cache location for `program` (a lesson's name), from the values of
/// `XDG_CACHE_HOME` and `HOME`. Never the system temporary directory: a
/// predictable path there could be made first by another user, with a
/// library or cubin of theirs in it, which the lesson would then load.
pub fn cache_root(
    xdg_cache_home: Option<&OsString>,
    home: Option<&OsString>,
    program: &str,
) -> CacheRoot {
    // The XDG spec ignores a relative XDG_CACHE_HOME; a relative HOME is no home.
    let absolute = |v: Option<&OsString>| v.map(PathBuf::from).filter(|p| p.is_absolute());
    let base = match (absolute(xdg_cache_home), absolute(home)) {
        (Some(xdg), _) => xdg,
        (None, Some(home)) => home.join(".cache"),
        (None, None) => {
            return CacheRoot::Private {
                why: "neither XDG_CACHE_HOME nor HOME is set to an absolute path".into(),
            }
        }
    };
    CacheRoot::Kept(base.join("nccl-symmem-rs").join(program))
}

/// What to build: the key that names it and the files it must produce.
pub struct Job<'a> {
    /// Everything the build depends on, as text; its hash names the directory.
    pub key_text: String,
    /// The files the build writes into its directory.
    pub outputs: Vec<String>,
    /// Writes the outputs into the given (empty, private) directory.
    pub compile: &'a dyn Fn(&Path) -> Result<()>,
}

impl Job<'_> {
    /// The first 24 hex digits of the key text's SHA-256.
    pub fn key(&self) -> String {
        hex(&Sha256::digest(self.key_text.as_bytes())[..12])
    }
}

/// `path`, its size, its modification time (ns) and which file it is
/// (device and inode, of the file its links lead to): how a build's key
/// names a large input it reads or links (a device library, libnccl)
/// without reading it. A file that cannot be read stands as its path alone
/// (its build fails).
pub fn file_stamp(path: &Path) -> String {
    std::fs::metadata(path)
        .map(|m| {
            let modified = m
                .modified()
                .ok()
                .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
                .map_or(0, |d| d.as_nanos());
            format!(
                "{} {} {modified} {}:{}",
                path.display(),
                m.len(),
                m.dev(),
                m.ino()
            )
        })
        .unwrap_or_else(|_| path.display().to_string())
}

/// The SHA-256 of `bytes`, in hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A build directory, in the cache or private to this process.
#[derive(Debug, Clone)]
pub struct Built {
    pub dir: PathBuf,
    /// False if the cache already held this build.
    pub compiled: bool,
    pub seconds: f64,
    /// A private build's directory, removed when the last `Built` that uses
    /// it is dropped: keep this value while its files are used.
    _private: Option<Arc<OwnedDir>>,
}

impl Built {
    /// The path of one of the build's files.
    pub fn file(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
}

#[cfg(test)]
impl Built {
    /// A build in `dir` with no files behind it, for the tests of what is
    /// printed about a build.
    pub(crate) fn record(dir: PathBuf, compiled: bool, seconds: f64) -> Self {
        Built {
            dir,
            compiled,
            seconds,
            _private: None,
        }
    }
}

impl Built {
    /// The bytes of one of the build's files, checked against its record:
    /// see [`read_output`].
    pub fn read(&self, name: &str) -> Result<Vec<u8>> {
        read_output(&self.file(name))
    }
}

/// The bytes of a build's output, read once and checked against the SHA-256
/// that the `key.txt` beside it records for it: what the caller loads is
/// then exactly what was checked, with no second open of the path in
/// between (a file replaced after [`build_or_reuse`] looked at it is
/// refused here). Every route's outputs have a record; a file without one
/// is not a build's output and is refused too.
pub fn read_output(path: &Path) -> Result<Vec<u8>> {
    let bytes = std::fs::read(path).with_context(|| format!("read {}", path.display()))?;
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let refused = |what: &str| -> anyhow::Error {
        CannotRun::new(
            format!("the build {} {what}", dir.display()),
            format!(
                "remove it, and the next run rebuilds it: rm -r {}",
                dir.display()
            ),
        )
        .into()
    };
    let record = match std::fs::read_to_string(dir.join(KEY_FILE)) {
        Ok(record) => record,
        Err(e) => {
            return Err(refused(&format!(
                "has no readable {KEY_FILE} ({e}), so {name} cannot be checked"
            )))
        }
    };
    let recorded = record
        .rsplit_once("\n--\n")
        .map_or("", |(_, hashes)| hashes)
        .lines()
        .find_map(|line| line.strip_suffix(&format!("  {name}")));
    match recorded {
        Some(hash) if hash == sha256_hex(&bytes) => Ok(bytes),
        Some(_) => Err(refused(&format!(
            "holds a file that differs from the {name} it was built with (truncated or replaced)"
        ))),
        None => Err(refused(&format!("records no {name}"))),
    }
}

/// `dlopen`s a build's shared library from the very bytes [`read_output`]
/// checked: they are copied into an anonymous memory file (`memfd_create`),
/// which no other process can change, and the loader opens that. Loading
/// by path would open the file a second time, after the check.
///
/// NOTE: the memory file stays open as long as the library is loaded
/// ([`LoadedLibrary`]). The loader matches an already loaded library by the
/// name it was opened with, `/proc/self/fd/N`: were the file closed after
/// loading, the next library given the same fd number would be handed
/// this one.
pub fn open_library(path: &Path) -> Result<LoadedLibrary> {
    use std::io::Write;
    use std::os::fd::{AsRawFd, FromRawFd};
    let bytes = read_output(path)?;
    let name = std::ffi::CString::new("nccl-symmem-rs-library")?;
    // SAFETY: a valid NUL-terminated name; the fd is owned by `file` below.
    let fd = unsafe { libc::memfd_create(name.as_ptr(), libc::MFD_CLOEXEC) };
    if fd < 0 {
        return Err(std::io::Error::last_os_error()).context("memfd_create");
    }
    // SAFETY: fd was just returned by memfd_create and is owned by nobody else.
    let mut file = unsafe { std::fs::File::from_raw_fd(fd) };
    file.write_all(&bytes)
        .with_context(|| format!("copy {} into memory", path.display()))?;
    let by_fd = format!("/proc/self/fd/{}", file.as_raw_fd());
    let flags = libloading::os::unix::RTLD_NOW | libloading::os::unix::RTLD_LOCAL;
    // SAFETY: the library's initialisers are those of a plain C++ library
    // built by this crate (the shim); `file` is kept open beside it.
    let library = unsafe { libloading::os::unix::Library::open(Some(&by_fd), flags) }
        .with_context(|| format!("dlopen {} (from memory)", path.display()))?;
    Ok(LoadedLibrary {
        library: Some(library.into()),
        memory: Some((file, by_fd)),
    })
}

/// A loaded shared library ([`libloading::Library`] through `Deref`) and,
/// when [`open_library`] loaded it from a memory file, that file: closed
/// only after the library is, so that no other library is opened under
/// the same `/proc/self/fd/N` name while this one is loaded.
pub struct LoadedLibrary {
    library: Option<libloading::Library>,
    memory: Option<(std::fs::File, String)>,
}

impl std::ops::Deref for LoadedLibrary {
    type Target = libloading::Library;

    fn deref(&self) -> &libloading::Library {
        self.library.as_ref().expect("taken only on drop")
    }
}

/// A library loaded by path (no memory file to keep).
impl From<libloading::Library> for LoadedLibrary {
    fn from(library: libloading::Library) -> Self {
        Self {
            library: Some(library),
            memory: None,
        }
    }
}

impl Drop for LoadedLibrary {
    fn drop(&mut self) {
        drop(self.library.take());
        let Some((file, by_fd)) = self.memory.take() else {
            return;
        };
        // A library the loader does not unload on dlclose (one marked
        // NODELETE, or still used by another) keeps its name: the file then
        // stays open, so that the name stays its own.
        let flags = libloading::os::unix::RTLD_NOW | libc::RTLD_NOLOAD;
        // SAFETY: RTLD_NOLOAD loads nothing and runs no initialiser; it only
        // returns a handle (released at once) if the name is still loaded.
        let still_loaded = unsafe { libloading::os::unix::Library::open(Some(&by_fd), flags) };
        match still_loaded {
            Ok(handle) => {
                drop(handle);
                std::mem::forget(file);
            }
            Err(_) => drop(file),
        }
    }
}

/// The file in a build directory that records its key and its outputs' hashes.
pub const KEY_FILE: &str = "key.txt";

/// The cached build for `job`, compiling it first if the cache lacks it. If
/// the cache cannot be used safely, says why (once per process) and builds
/// privately instead.
pub fn build_or_reuse(job: &Job, cache_root: &CacheRoot) -> Result<Built> {
    let start = Instant::now();
    let root = match cache_root {
        CacheRoot::Kept(root) => match open_cache(root) {
            Ok(()) => root,
            Err(why) => return build_private(job, start, &why),
        },
        CacheRoot::Private { why } => return build_private(job, start, why),
    };
    let dir = root.join(job.key());
    let files: Vec<PathBuf> = job.outputs.iter().map(|o| dir.join(o)).collect();
    let checked = |dir: &Path| -> Result<()> {
        let mut paths: Vec<&Path> = vec![dir];
        paths.extend(files.iter().map(PathBuf::as_path));
        check_cached(&paths).map_err(anyhow::Error::msg)?;
        check_key(dir, job)?;
        Ok(())
    };
    if files.iter().all(|f| f.is_file()) {
        if let Err(why) = check_cached_paths(&dir, &files) {
            return build_private(job, start, &why);
        }
        if has_key_record(&dir)? {
            check_key(&dir, job)?;
            return Ok(Built {
                dir,
                compiled: false,
                seconds: start.elapsed().as_secs_f64(),
                _private: None,
            });
        }
        // No record (an older version's cache, or a directory made by
        // hand): nothing says what it holds. It is this user's alone (just
        // checked), so it is removed and built again.
        std::fs::remove_dir_all(&dir)
            .or_else(|e| match e.kind() {
                std::io::ErrorKind::NotFound => Ok(()),
                _ => Err(e),
            })
            .with_context(|| format!("remove {}, a build without {KEY_FILE}", dir.display()))?;
    }
    // Build in a private directory, then rename it into place: another rank
    // or process building the same key at the same time cannot see half a
    // build. A failed build's directory is removed when `work` is dropped; one
    // left by a process that was killed is removed here, by the next build.
    cleanup::remove_stale(root, BUILD_PREFIX);
    let work = OwnedDir::create(root, BUILD_PREFIX)
        .with_context(|| format!("create a build directory in {}", root.display()))?;
    compile_into(job, work.path())?;
    if let Err((work, _)) = work.rename_to(&dir) {
        // Someone else finished first; theirs is the same build.
        drop(work);
        checked(&dir)?;
    }
    Ok(Built {
        dir,
        compiled: true,
        seconds: start.elapsed().as_secs_f64(),
        _private: None,
    })
}

/// Whether `dir` holds a `key.txt` (this user's file, not a link: checked
/// with the outputs by [`check_cached`]).
fn has_key_record(dir: &Path) -> Result<bool> {
    let record = dir.join(KEY_FILE);
    match std::fs::symlink_metadata(&record) {
        Ok(_) => {
            check_cached(&[&record]).map_err(anyhow::Error::msg)?;
            Ok(true)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(e).with_context(|| format!("inspect {}", record.display())),
    }
}

fn check_cached_paths(dir: &Path, files: &[PathBuf]) -> Result<(), String> {
    let mut paths: Vec<&Path> = vec![dir];
    paths.extend(files.iter().map(PathBuf::as_path));
    check_cached(&paths)
}

/// The start of a build directory's name in the cache (`cleanup` adds the
/// host and pid of the process building).
pub const BUILD_PREFIX: &str = ".build-";
/// The start of a private build directory's name in the temporary directory.
pub const PRIVATE_PREFIX: &str = "nccl-symmem-rs-build-";

/// Builds into a private temporary directory (mode 0700, a random name, made
/// atomically), shared by the ranks of this process and removed with the last
/// `Built` that uses it, or at a forced exit.
fn build_private(job: &Job, start: Instant, why: &str) -> Result<Built> {
    static NOTE: Once = Once::new();
    NOTE.call_once(|| {
        eprintln!(
            "note: no kernel cache: {why}; building in a private temporary directory instead"
        );
    });
    // Thread mode: rank 0 builds, the other ranks of the process reuse it.
    static BUILDS: Mutex<Vec<(String, Weak<OwnedDir>)>> = Mutex::new(Vec::new());
    let key = job.key();
    let mut builds = BUILDS.lock().unwrap_or_else(|p| p.into_inner());
    builds.retain(|(_, dir)| dir.strong_count() > 0);
    let reused = builds
        .iter()
        .find(|(built, _)| *built == key)
        .and_then(|(_, dir)| dir.upgrade());
    let compiled = reused.is_none();
    let dir = match reused {
        Some(dir) => dir,
        None => {
            let temp = std::env::temp_dir();
            cleanup::remove_stale(&temp, PRIVATE_PREFIX);
            let dir = OwnedDir::create(&temp, PRIVATE_PREFIX).with_context(|| {
                format!("create a private build directory in {}", temp.display())
            })?;
            compile_into(job, dir.path())?;
            let dir = Arc::new(dir);
            builds.push((key, Arc::downgrade(&dir)));
            dir
        }
    };
    Ok(Built {
        dir: dir.path().to_path_buf(),
        compiled,
        seconds: start.elapsed().as_secs_f64(),
        _private: Some(dir),
    })
}

/// Runs the job's compile in `dir`, makes the outputs writable by their owner
/// only, and records the key and the outputs' hashes.
fn compile_into(job: &Job, dir: &Path) -> Result<()> {
    (job.compile)(dir)?;
    for output in &job.outputs {
        let file = dir.join(output);
        let mode = std::fs::metadata(&file)
            .with_context(|| format!("the build made no {}", file.display()))?
            .permissions()
            .mode();
        std::fs::set_permissions(&file, Permissions::from_mode(mode & !0o022))
            .with_context(|| format!("chmod {}", file.display()))?;
    }
    let record = key_record(job, dir)?;
    std::fs::write(dir.join(KEY_FILE), record)
        .with_context(|| format!("write {}", dir.join(KEY_FILE).display()))
}

/// The key text, then one line per output: its SHA-256 and its name.
fn key_record(job: &Job, dir: &Path) -> Result<String> {
    let mut record = format!("{}\n--\n", job.key_text);
    for output in &job.outputs {
        let path = dir.join(output);
        let bytes = std::fs::read(&path).with_context(|| format!("read {}", path.display()))?;
        record.push_str(&format!("{}  {output}\n", sha256_hex(&bytes)));
    }
    Ok(record)
}

/// A cached build must hold what its key says: the same key text and the
/// same outputs, byte for byte. One without `key.txt` is not reused
/// ([`build_or_reuse`] builds it again; here, where another process just
/// made it, it is refused).
fn check_key(dir: &Path, job: &Job) -> Result<()> {
    let recorded = std::fs::read_to_string(dir.join(KEY_FILE))
        .with_context(|| format!("read {}", dir.join(KEY_FILE).display()))?;
    let expected = key_record(job, dir)?;
    if recorded == expected {
        return Ok(());
    }
    let what = if recorded.split("\n--\n").next() != Some(job.key_text.as_str()) {
        "was made from other inputs than its name says"
    } else {
        "holds files that differ from the ones it was built with (truncated or replaced)"
    };
    Err(CannotRun::new(
        format!("the cached build {} {what}", dir.display()),
        format!(
            "remove it, and the next run rebuilds it: rm -r {}",
            dir.display()
        ),
    )
    .into())
}

/// Makes the cache directory if it is missing (mode 0700) and checks, before
/// anything in it is loaded, that only this user can change what is in it:
/// the directory is this user's and writable by nobody else (a looser mode
/// that only lets others read is tightened to 0700), and no directory above
/// it lets another user replace it (each is this user's or root's, and not
/// writable by others unless sticky, as /tmp is). Err: why not.
pub fn open_cache(dir: &Path) -> Result<(), String> {
    let shown = dir.display();
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .map_err(|e| format!("cannot create {shown}: {e}"))?;
    let meta = std::fs::symlink_metadata(dir).map_err(|e| format!("{shown}: {e}"))?;
    if !meta.is_dir() {
        return Err(format!("{shown} is not a directory (a symlink or a file)"));
    }
    let me = effective_uid();
    if meta.uid() != me {
        return Err(format!(
            "{shown} belongs to uid {}, not to this user (uid {me}), so its owner could put a library there that this lesson would load",
            meta.uid()
        ));
    }
    let mode = meta.mode() & 0o7777;
    if mode & 0o022 != 0 {
        return Err(format!(
            "{shown} has mode {mode:04o}: other users can write to it, so they could put a library there that this lesson would load (fix: chmod 700 {shown})"
        ));
    }
    if mode & 0o077 != 0 {
        std::fs::set_permissions(dir, Permissions::from_mode(0o700))
            .map_err(|e| format!("cannot chmod 700 {shown}: {e}"))?;
    }
    // Every directory above it, each judged as itself (a link by who may
    // replace it, not by what it points to), then the directories its
    // canonical path goes through: see `common::trust`.
    if let Some(open) = common::trust::find_untrusted(dir) {
        return Err(format!(
            "{} (on the way to {shown}) {}, so another user could replace the cache in it",
            open.path.display(),
            open.why
        ));
    }
    Ok(())
}

/// A cached build's directory and files must be this user's and writable by
/// nobody else: in a directory that passed [`open_cache`] they are, unless
/// they were put there before it was made private.
fn check_cached(paths: &[&Path]) -> Result<(), String> {
    let me = effective_uid();
    for path in paths {
        let meta =
            std::fs::symlink_metadata(path).map_err(|e| format!("{}: {e}", path.display()))?;
        if meta.uid() != me || meta.mode() & 0o022 != 0 || meta.file_type().is_symlink() {
            return Err(format!(
                "the cached {} is not this user's alone (uid {}, mode {:04o}); remove it to rebuild",
                path.display(),
                meta.uid(),
                meta.mode() & 0o7777
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn job_writing<'a>(key: &str, compile: &'a dyn Fn(&Path) -> Result<()>) -> Job<'a> {
        Job {
            key_text: key.into(),
            outputs: vec!["a.cubin".into()],
            compile,
        }
    }

    fn write_a(dir: &Path) -> Result<()> {
        fs::write(dir.join("a.cubin"), "cubin bytes")?;
        Ok(())
    }

    #[test]
    fn a_cached_cubin_that_was_truncated_is_refused_with_the_fix() {
        let tmp = tempfile::tempdir().unwrap();
        let root = CacheRoot::Kept(tmp.path().join("cache"));
        let job = job_writing("route=jit\nnvrtc=13.5", &write_a);
        let built = build_or_reuse(&job, &root).unwrap();
        assert!(built.compiled);
        assert!(!build_or_reuse(&job, &root).unwrap().compiled);
        fs::write(built.file("a.cubin"), "cubin").unwrap();
        let err = build_or_reuse(&job, &root).unwrap_err();
        let cannot = err.downcast_ref::<CannotRun>().expect("exit code 2");
        assert!(cannot.reason.contains("truncated or replaced"), "{cannot}");
        assert!(cannot.fix.contains("rm -r"), "{}", cannot.fix);
    }

    #[test]
    fn a_cached_build_whose_key_no_longer_matches_is_refused_with_the_fix() {
        let tmp = tempfile::tempdir().unwrap();
        let root = CacheRoot::Kept(tmp.path().join("cache"));
        let job = job_writing("route=jit\nnvjitlink=13.5", &write_a);
        let built = build_or_reuse(&job, &root).unwrap();
        // The record says the directory was built from other inputs.
        let record = fs::read_to_string(built.file(KEY_FILE)).unwrap();
        fs::write(
            built.file(KEY_FILE),
            record.replace("nvjitlink=13.5", "nvjitlink=13.0"),
        )
        .unwrap();
        let err = build_or_reuse(&job, &root).unwrap_err();
        let cannot = err.downcast_ref::<CannotRun>().expect("exit code 2");
        assert!(cannot.reason.contains("made from other inputs"), "{cannot}");
        assert!(
            cannot
                .fix
                .contains(&format!("rm -r {}", built.dir.display())),
            "{}",
            cannot.fix
        );
    }

    #[test]
    fn a_cache_reached_through_a_link_into_a_directory_others_can_write_is_refused() {
        use std::os::unix::fs::symlink;
        let tmp = tempfile::tempdir().unwrap();
        // ~/.cache as a link to a scratch directory that others can write:
        // following the link, the old check saw only its private target.
        let open = tmp.path().join("scratch");
        fs::create_dir_all(open.join("me")).unwrap();
        fs::set_permissions(&open, Permissions::from_mode(0o777)).unwrap();
        fs::set_permissions(open.join("me"), Permissions::from_mode(0o700)).unwrap();
        let home = tmp.path().join("home");
        fs::create_dir(&home).unwrap();
        symlink(open.join("me"), home.join(".cache")).unwrap();
        let why = open_cache(&home.join(".cache/nccl-symmem-rs/05")).unwrap_err();
        assert!(why.contains(&open.display().to_string()), "{why}");
        assert!(
            why.contains("another user could replace the cache"),
            "{why}"
        );
        // A link to a private directory is fine.
        fs::set_permissions(&open, Permissions::from_mode(0o755)).unwrap();
        assert_eq!(open_cache(&home.join(".cache/nccl-symmem-rs/05")), Ok(()));
    }

    #[test]
    fn an_output_is_read_once_and_checked_against_its_record() {
        let tmp = tempfile::tempdir().unwrap();
        let root = CacheRoot::Kept(tmp.path().join("cache"));
        let job = job_writing("route=jit", &write_a);
        let built = build_or_reuse(&job, &root).unwrap();
        assert_eq!(built.read("a.cubin").unwrap(), b"cubin bytes");
        // Replaced after build_or_reuse checked it, before it was loaded:
        // the bytes handed to the loader are the ones checked.
        fs::write(built.file("a.cubin"), "other bytes").unwrap();
        let err = built.read("a.cubin").unwrap_err();
        let cannot = err.downcast_ref::<CannotRun>().expect("exit code 2");
        assert!(cannot.reason.contains("truncated or replaced"), "{cannot}");
        assert!(read_output(&built.file("a.cubin")).is_err());
        // A file with no record beside it is not a build's output.
        let loose = tmp.path().join("loose.cubin");
        fs::write(&loose, "cubin bytes").unwrap();
        assert!(read_output(&loose).is_err());
    }

    #[test]
    fn a_shared_library_is_loaded_from_the_bytes_checked() {
        // A real library, so that the loader's side (dlopen of the memory
        // file) is exercised too; skipped where no C compiler is found.
        fn compile(dir: &Path) -> Result<()> {
            fs::write(dir.join("answer.c"), "int answer(void) { return 42; }\n")?;
            let status = std::process::Command::new("cc")
                .args(["-shared", "-fPIC", "-o", "libanswer.so", "answer.c"])
                .current_dir(dir)
                .status()?;
            anyhow::ensure!(status.success(), "cc failed");
            Ok(())
        }
        if std::process::Command::new("cc")
            .arg("--version")
            .output()
            .is_err()
        {
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let root = CacheRoot::Kept(tmp.path().join("cache"));
        let job = Job {
            key_text: "shared library".into(),
            outputs: vec!["libanswer.so".into()],
            compile: &compile,
        };
        let built = build_or_reuse(&job, &root).unwrap();
        let library = open_library(&built.file("libanswer.so")).unwrap();
        // SAFETY: answer.c's function, with its signature.
        let answer: libloading::Symbol<unsafe extern "C" fn() -> i32> =
            unsafe { library.get(b"answer\0") }.unwrap();
        assert_eq!(unsafe { answer() }, 42);
        // Replaced after the build was checked: refused, not loaded.
        fs::write(built.file("libanswer.so"), "not the library").unwrap();
        let err = open_library(&built.file("libanswer.so")).err().unwrap();
        assert!(err.downcast_ref::<CannotRun>().is_some(), "{err:#}");
    }

    #[test]
    fn two_libraries_loaded_one_after_the_other_are_each_their_own() {
        // Each from its own memory file: the loader matches a library
        // already loaded by its name (/proc/self/fd/N), so a second library
        // given the first's fd number would be the first again.
        fn compile(dir: &Path, number: i32) -> Result<()> {
            fs::write(
                dir.join("number.c"),
                format!("int number(void) {{ return {number}; }}\n"),
            )?;
            let status = std::process::Command::new("cc")
                .args(["-shared", "-fPIC", "-o", "libnumber.so", "number.c"])
                .current_dir(dir)
                .status()?;
            anyhow::ensure!(status.success(), "cc failed");
            Ok(())
        }
        if std::process::Command::new("cc")
            .arg("--version")
            .output()
            .is_err()
        {
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let root = CacheRoot::Kept(tmp.path().join("cache"));
        let first = |dir: &Path| compile(dir, 1);
        let second = |dir: &Path| compile(dir, 2);
        let built: Vec<Built> = [
            ("first", &first as &dyn Fn(&Path) -> Result<()>),
            ("second", &second),
        ]
        .into_iter()
        .map(|(key, compile)| {
            let job = Job {
                key_text: key.into(),
                outputs: vec!["libnumber.so".into()],
                compile,
            };
            build_or_reuse(&job, &root).unwrap()
        })
        .collect();
        let libraries: Vec<_> = built
            .iter()
            .map(|b| open_library(&b.file("libnumber.so")).unwrap())
            .collect();
        let numbers: Vec<i32> = libraries
            .iter()
            .map(|library| {
                // SAFETY: number.c's function, with its signature.
                let number: libloading::Symbol<unsafe extern "C" fn() -> i32> =
                    unsafe { library.get(b"number\0") }.unwrap();
                unsafe { number() }
            })
            .collect();
        assert_eq!(numbers, [1, 2]);
        // Closed, then opened again in the other order: the fd numbers
        // come back, and each is still its own library.
        drop(libraries);
        let again: Vec<i32> = built
            .iter()
            .rev()
            .map(|b| {
                let library = open_library(&b.file("libnumber.so")).unwrap();
                // SAFETY: number.c's function, with its signature.
                let number: libloading::Symbol<unsafe extern "C" fn() -> i32> =
                    unsafe { library.get(b"number\0") }.unwrap();
                unsafe { number() }
            })
            .collect();
        assert_eq!(again, [2, 1]);
    }

    #[test]
    fn the_key_covers_every_byte_of_the_key_text() {
        let job = job_writing("a", &write_a);
        let other = job_writing("b", &write_a);
        assert_ne!(job.key(), other.key());
        assert_eq!(job.key().len(), 24);
    }
}
