//! Directories a run makes and must not leave behind: lesson 04's socket
//! directory, lesson 05's build directory.
//!
//! A run can end in four ways, and each one is covered:
//!
//! * it returns, on success or through an error: the directory's owner
//!   ([`OwnedDir`]) removes it when dropped;
//! * the launcher forces the exit (ranks stuck after a failure, `MPI_Abort`) or
//!   a signal stops it (Ctrl-C, mpirun's SIGTERM): destructors do not run then,
//!   so the launcher first removes every directory still registered here;
//! * `SIGKILL`, which nothing can catch: the directory's name says which host
//!   and process made it (`<prefix><host>-<pid>-XXXXXX`), and the next run
//!   removes those whose process is gone ([`remove_stale`]).

use std::io;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;

/// Directories to remove before a forced exit, by registration number.
static REGISTERED: Mutex<Vec<(u64, PathBuf)>> = Mutex::new(Vec::new());
static NEXT: AtomicU64 = AtomicU64::new(0);

/// A directory in [`REGISTERED`] until this is dropped.
#[derive(Debug)]
struct Registration(u64);

impl Registration {
    fn new(path: &Path) -> Self {
        let id = NEXT.fetch_add(1, Ordering::Relaxed);
        lock_registered().push((id, path.to_path_buf()));
        Self(id)
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        lock_registered().retain(|(id, _)| *id != self.0);
    }
}

fn lock_registered() -> std::sync::MutexGuard<'static, Vec<(u64, PathBuf)>> {
    // The list stays consistent whatever a panicking holder was doing.
    REGISTERED.lock().unwrap_or_else(|p| p.into_inner())
}

/// Removes every registered directory. The launcher calls it just before a
/// forced exit, when no destructor will run.
pub(crate) fn remove_registered() {
    for (_, path) in lock_registered().drain(..) {
        let _ = std::fs::remove_dir_all(&path);
    }
}

/// Keeps `path` for the rest of the process's life and removes it when the
/// process ends: a normal exit through a C exit handler, a forced exit
/// through [`remove_registered`], a `SIGKILL` through the next run's
/// [`remove_stale`]. For a directory that nothing owns, such as the one a
/// restarted program inherits (see `nccl_path.rs`).
pub(crate) fn remove_at_exit(path: &Path) {
    extern "C" fn remove_registered_at_exit() {
        remove_registered();
    }
    let id = NEXT.fetch_add(1, Ordering::Relaxed);
    lock_registered().push((id, path.to_path_buf()));
    static HANDLER: std::sync::Once = std::sync::Once::new();
    // SAFETY: atexit only records the function pointer; the handler does not
    // unwind (remove_registered ignores every error).
    HANDLER.call_once(|| unsafe {
        libc::atexit(remove_registered_at_exit);
    });
}

/// A fresh directory `<base>/<prefix><host>-<pid>-XXXXXX` that only this user
/// can enter (mode 0700 from the moment it exists). Removed when dropped, or
/// by the launcher before a forced exit; after a `SIGKILL`, by the next run's
/// [`remove_stale`].
#[derive(Debug)]
pub struct OwnedDir {
    dir: tempfile::TempDir,
    _registration: Registration,
}

impl OwnedDir {
    pub fn create(base: &Path, prefix: &str) -> io::Result<Self> {
        let dir = tempfile::Builder::new()
            .prefix(&owner_prefix(prefix))
            .permissions(std::fs::Permissions::from_mode(0o700))
            .tempdir_in(base)?;
        let registration = Registration::new(dir.path());
        Ok(Self {
            dir,
            _registration: registration,
        })
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Removes the directory and everything in it, and says if that failed.
    pub fn remove(self) -> io::Result<()> {
        self.dir.close()
    }

    /// Renames the directory to `to` and gives it up: it is no longer removed.
    /// On failure (`to` exists, say) it is still owned, and removed as usual.
    pub fn rename_to(self, to: &Path) -> Result<(), (Self, io::Error)> {
        match std::fs::rename(self.dir.path(), to) {
            Ok(()) => {
                // Nothing left at the old path for TempDir to remove.
                let _ = self.dir.keep();
                Ok(())
            }
            Err(err) => Err((self, err)),
        }
    }
}

/// `<prefix><host>-<pid>-`: the start of the name of a directory this process
/// makes, saying who made it. The host keeps a run on one node from removing
/// a live directory of another node's process with the same pid, in a
/// directory that several nodes share (a home directory on NFS, say).
pub fn owner_prefix(prefix: &str) -> String {
    format!("{prefix}{}-{}-", directory_host_name(), std::process::id())
}

/// Removes the directories in `base` that a process of this host made with
/// `prefix` (see [`owner_prefix`]) and that are left behind: owned by this
/// user, their process gone. Returns what it removed. Errors (a directory
/// that cannot be read, a race with another run doing the same) are ignored:
/// leftovers are tidied, never a reason to fail.
pub fn remove_stale(base: &Path, prefix: &str) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(base) else {
        return Vec::new();
    };
    let host = directory_host_name();
    let me = crate::unix::effective_uid();
    let mut removed = Vec::new();
    for entry in entries.filter_map(Result::ok) {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|name| name.strip_prefix(prefix))
            .and_then(|rest| maker(rest, &host))
        else {
            continue;
        };
        let path = entry.path();
        let ours =
            std::fs::symlink_metadata(&path).is_ok_and(|meta| meta.is_dir() && meta.uid() == me);
        if ours && !process_exists(pid) && std::fs::remove_dir_all(&path).is_ok() {
            removed.push(path);
        }
    }
    removed
}

/// The pid in `<host>-<pid>-XXXXXX` if `<host>` is this host. Host names may
/// contain `-`, the random part does not: read from the right.
fn maker(rest: &str, host: &str) -> Option<i32> {
    let mut parts = rest.rsplitn(3, '-');
    let (_random, pid, made_on) = (parts.next()?, parts.next()?, parts.next()?);
    (made_on == host).then(|| pid.parse().ok())?
}

/// Is there a process `pid`? `kill(pid, 0)` sends nothing and only checks;
/// EPERM means it exists but belongs to someone else (a reused pid): keep.
fn process_exists(pid: i32) -> bool {
    if pid <= 0 {
        return true;
    }
    // SAFETY: signal 0 is never delivered; kill only looks the pid up.
    let found = unsafe { libc::kill(pid, 0) } == 0;
    found || io::Error::last_os_error().raw_os_error() != Some(libc::ESRCH)
}

/// This machine's name (`gethostname`), or `unknown-host`.
pub fn host_name() -> String {
    let mut name = [0u8; 256];
    // SAFETY: gethostname writes at most `len` bytes into `name`; the last
    // byte is left out of `len`, so the name always ends in a NUL even where
    // a longer one is cut without one.
    let ok = unsafe { libc::gethostname(name.as_mut_ptr().cast(), name.len() - 1) } == 0;
    let len = name.iter().position(|&b| b == 0).unwrap_or(name.len());
    match String::from_utf8_lossy(&name[..len])
        .split_whitespace()
        .next()
    {
        Some(host) if ok => host.to_string(),
        _ => "unknown-host".to_string(),
    }
}

/// The host name as it goes into a directory name: in full, as a shorter
/// one would take the directories of another node whose name starts the
/// same for this node's. A Linux host name has at most 64 bytes
/// (`HOST_NAME_MAX`), which a Unix socket path of lesson 04 in `/tmp` still
/// fits (107 bytes in all).
fn directory_host_name() -> String {
    plain_host_name(&host_name())
}

/// `host` with letters, digits, `.` and `-` only.
fn plain_host_name(host: &str) -> String {
    host.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '.' {
                c
            } else {
                '-'
            }
        })
        .collect()
}

/// Names of directories that a gone process left, for the tests of this
/// module and of `nccl_path`. testkit has the same two for every other
/// crate's tests; `common`'s own cannot use testkit, which depends on it.
#[cfg(test)]
pub(crate) mod test_names {
    /// A process id that is free now: a child's that has exited and been
    /// collected.
    pub(crate) fn dead_pid() -> u32 {
        let mut child = std::process::Command::new("true")
            .spawn()
            .expect("start `true`");
        let pid = child.id();
        let _ = child.wait();
        pid
    }

    /// The name of a directory that a process of this host, now gone, made
    /// with `prefix`: what a killed run leaves behind.
    pub(crate) fn stale_dir_name(prefix: &str) -> String {
        let mine = super::owner_prefix(prefix);
        let this_host = mine.trim_end_matches(&format!("{}-", std::process::id()));
        format!("{this_host}{}-AbC123", dead_pid())
    }
}

#[cfg(test)]
mod tests {
    use super::test_names::dead_pid;
    use super::*;

    #[test]
    fn owned_directories_are_private_named_for_their_maker_and_removed() {
        let base = tempfile::tempdir().unwrap();
        let dir = OwnedDir::create(base.path(), "test-").unwrap();
        let meta = std::fs::symlink_metadata(dir.path()).unwrap();
        assert_eq!(meta.mode() & 0o777, 0o700);
        let name = dir
            .path()
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .to_string();
        assert!(name.starts_with(&owner_prefix("test-")), "{name}");
        assert_eq!(
            maker(name.strip_prefix("test-").unwrap(), &directory_host_name()),
            Some(std::process::id() as i32)
        );
        let path = dir.path().to_path_buf();
        assert!(lock_registered().iter().any(|(_, p)| *p == path));
        drop(dir);
        assert!(!path.exists());
        assert!(!lock_registered().iter().any(|(_, p)| *p == path));
    }

    #[test]
    fn a_renamed_directory_is_kept() {
        let base = tempfile::tempdir().unwrap();
        let dir = OwnedDir::create(base.path(), ".build-").unwrap();
        let to = base.path().join("final");
        dir.rename_to(&to).unwrap();
        assert!(to.is_dir());
        let taken = base.path().join("taken");
        std::fs::create_dir(&taken).unwrap();
        std::fs::write(taken.join("x"), b"").unwrap();
        let dir = OwnedDir::create(base.path(), ".build-").unwrap();
        let path = dir.path().to_path_buf();
        let (dir, _err) = dir.rename_to(&taken).unwrap_err();
        drop(dir);
        assert!(
            !path.exists(),
            "a failed rename still removes the directory"
        );
    }

    #[test]
    fn stale_directories_of_dead_processes_on_this_host_are_removed() {
        let base = tempfile::tempdir().unwrap();
        let host = directory_host_name();
        let dead = base
            .path()
            .join(format!("vmm-raw-{host}-{}-AbC123", dead_pid()));
        let alive = base
            .path()
            .join(format!("vmm-raw-{host}-{}-XyZ789", std::process::id()));
        let elsewhere = base
            .path()
            .join(format!("vmm-raw-other-{host}-{}-Qq1", dead_pid()));
        let unrelated = base.path().join(format!("other-{host}-{}-Rr2", dead_pid()));
        for dir in [&dead, &alive, &elsewhere, &unrelated] {
            std::fs::create_dir(dir).unwrap();
        }
        std::fs::write(dead.join("rank-0.sock"), b"").unwrap();
        assert_eq!(remove_stale(base.path(), "vmm-raw-"), vec![dead.clone()]);
        assert!(!dead.exists());
        assert!(alive.exists() && elsewhere.exists() && unrelated.exists());
        assert!(remove_stale(&base.path().join("absent"), "vmm-raw-").is_empty());
    }

    #[test]
    fn host_names_in_directory_names_are_plain() {
        let host = directory_host_name();
        assert!(!host.is_empty() && host.len() <= 64, "{host}");
        assert!(host
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-'));
    }

    #[test]
    fn hosts_that_differ_after_20_characters_are_told_apart() {
        // Nodes of one cluster often share a long prefix; a run on one must
        // not take another's live directory, on a shared home, for its own.
        let a = plain_host_name("gpu-cluster-east-rack07-node0001.example.org");
        let b = plain_host_name("gpu-cluster-east-rack07-node0002.example.org");
        assert_eq!(a, "gpu-cluster-east-rack07-node0001.example.org");
        assert_ne!(a, b);
        let made_on_b = format!("{b}-4242-AbC123");
        assert_eq!(maker(&made_on_b, &a), None);
        assert_eq!(maker(&made_on_b, &b), Some(4242));
        assert_eq!(plain_host_name("node_1 x"), "node-1-x");
    }

    #[test]
    fn the_host_name_is_the_kernels_in_full() {
        let Ok(kernel) = std::fs::read_to_string("/proc/sys/kernel/hostname") else {
            return;
        };
        assert_eq!(host_name(), kernel.trim());
    }
}
