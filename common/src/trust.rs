//! One check for every library and tool a program loads or runs from a path
//! the environment names: NCCL, NVRTC, nvJitLink, NCCL's device libraries,
//! nvcc, NVSHMEM's host library and its bootstrap plugin, Python.
//!
//! What is loaded from a path is only ours to decide if no other user can
//! change what the path leads to. So every directory on the way, and the
//! file at its end, must belong to this user or to root and be writable by
//! no one else; each is looked at with `symlink_metadata`, so that a link is
//! judged as a link (who may replace it) and not by what it points to. A
//! sticky directory (`/tmp`, mode 1777) lets other users remove only their
//! own entries, so one that root or this user owns may stand on the way
//! (not at its end); what is in it is checked next.
//! Then the same for the canonical path, the file the links lead to: on a
//! real system `/usr/local/cuda` is a link to `/usr/local/cuda-13.0`, and a
//! venv's `bin/python` a link to `/usr/bin/python3.12`, both root's.
//!
//! A production loader would also open the file once and load that open
//! file (as the build cache does, see `device_build::cache`); here the
//! libraries come from the system or the user's own environment, and the
//! check makes sure no one else can swap them between check and load.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use crate::CannotRun;

/// Why a path is not trusted: the directory, link or file on its way that
/// another user could change, and what lets them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Untrusted {
    /// The offending directory, link or file.
    pub path: PathBuf,
    /// E.g. `has mode 0777: other users can write it`.
    pub why: String,
}

/// The first directory, link or file on the way to `path` (as named, then
/// its canonical target) that another user could change; `None` if there
/// is none. A path that cannot be inspected is not trusted.
pub fn find_untrusted(path: &Path) -> Option<Untrusted> {
    // SAFETY: geteuid cannot fail and has no preconditions.
    let me = unsafe { libc::geteuid() };
    find_untrusted_for(path, me)
}

fn find_untrusted_for(path: &Path, me: u32) -> Option<Untrusted> {
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        match std::env::current_dir() {
            Ok(dir) => dir.join(path),
            Err(e) => {
                return Some(Untrusted {
                    path: path.to_path_buf(),
                    why: format!("is relative and the current directory is unknown ({e})"),
                })
            }
        }
    };
    if let Some(found) = check_chain(&absolute, me) {
        return Some(found);
    }
    match absolute.canonicalize() {
        Ok(real) if real != absolute => check_chain(&real, me),
        Ok(_) => None,
        Err(e) => Some(Untrusted {
            path: absolute,
            why: format!("cannot be resolved ({e})"),
        }),
    }
}

/// Every prefix of `path`, from `/` down to `path` itself.
fn check_chain(path: &Path, me: u32) -> Option<Untrusted> {
    let mut chain: Vec<&Path> = path.ancestors().collect();
    chain.reverse();
    let last = chain.len() - 1;
    chain.into_iter().enumerate().find_map(|(at, step)| {
        let found = |why: String| {
            Some(Untrusted {
                path: step.to_path_buf(),
                why,
            })
        };
        let meta = match std::fs::symlink_metadata(step) {
            Ok(meta) => meta,
            Err(e) => return found(format!("cannot be inspected ({e})")),
        };
        if meta.uid() != me && meta.uid() != 0 {
            return found(format!(
                "belongs to uid {}, neither this user (uid {me}) nor root",
                meta.uid()
            ));
        }
        // A link's own mode means nothing (always 0777): who may replace it
        // is decided by the directory that holds it, checked one step above.
        if meta.file_type().is_symlink() {
            return None;
        }
        let mode = meta.mode() & 0o7777;
        if mode & 0o022 == 0 {
            return None;
        }
        // The owner is this user or root (checked above): others may add
        // entries, not remove or rename theirs, and the entry below it is
        // checked next.
        let sticky = meta.is_dir() && mode & 0o1000 != 0;
        if sticky && at != last {
            return None;
        }
        found(format!("has mode {mode:04o}: other users can write it"))
    })
}

/// Exit 2 (with the fix) unless [`find_untrusted`] finds nothing on the way
/// to `path`. `what` names the thing, as messages name it: "NVRTC", "nvcc".
pub fn check_trusted(path: &Path, what: &str) -> Result<(), CannotRun> {
    match find_untrusted(path) {
        None => Ok(()),
        Some(open) => Err(refusal(path, what, &open)),
    }
}

/// The refusal for `what` at `path`, because of `open`.
pub fn refusal(path: &Path, what: &str, open: &Untrusted) -> CannotRun {
    let shown = open.path.display();
    CannotRun::new(
        format!(
            "{what} at {} is not used: {shown} {}, so another user could change what runs",
            path.display(),
            open.why
        ),
        format!(
            "make {shown} writable by you or root only (chmod go-w {shown}, if it is yours),\n\
             or install {what} where only you or root can write (a virtual environment of your own, or the system's packages)"
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::{self, Permissions};
    use std::os::unix::fs::PermissionsExt;

    fn me() -> u32 {
        // SAFETY: geteuid cannot fail.
        unsafe { libc::geteuid() }
    }

    fn chmod(path: &Path, mode: u32) {
        fs::set_permissions(path, Permissions::from_mode(mode)).unwrap();
    }

    /// `<tmp>/a/b/lib/libx.so`, every directory 0755 and the file 0644.
    fn tree(tmp: &Path) -> PathBuf {
        let lib = tmp.join("a/b/lib/libx.so");
        fs::create_dir_all(lib.parent().unwrap()).unwrap();
        fs::write(&lib, "").unwrap();
        for dir in ["a", "a/b", "a/b/lib"] {
            chmod(&tmp.join(dir), 0o755);
        }
        chmod(&lib, 0o644);
        lib
    }

    #[test]
    fn a_private_tree_under_the_sticky_tmp_is_trusted() {
        // tempdir() is under the system's /tmp: root's, mode 1777.
        let tmp = tempfile::tempdir().unwrap();
        let lib = tree(tmp.path());
        assert_eq!(find_untrusted(&lib), None);
        assert_eq!(check_trusted(&lib, "NVRTC"), Ok(()));
    }

    #[test]
    fn a_group_writable_ancestor_is_named_not_only_the_parent() {
        let tmp = tempfile::tempdir().unwrap();
        let lib = tree(tmp.path());
        // Two levels above the file: the old check looked at the file and
        // its parent only.
        chmod(&tmp.path().join("a"), 0o775);
        let open = find_untrusted(&lib).expect("refused");
        assert_eq!(open.path, tmp.path().join("a"));
        assert!(open.why.contains("mode 0775"), "{open:?}");
        let err = check_trusted(&lib, "NVRTC").unwrap_err();
        assert!(err.reason.starts_with("NVRTC at "), "{err}");
        assert!(err.reason.contains("mode 0775"), "{err}");
        assert!(err.fix.contains("chmod go-w"), "{}", err.fix);
        let err = anyhow::Error::from(err);
        assert_eq!(crate::exit_code(&err), crate::EXIT_CANNOT_RUN);
    }

    #[test]
    fn a_writable_file_is_named() {
        let tmp = tempfile::tempdir().unwrap();
        let lib = tree(tmp.path());
        chmod(&lib, 0o666);
        assert_eq!(find_untrusted(&lib).unwrap().path, lib);
    }

    #[test]
    fn a_link_into_a_directory_others_can_write_is_refused_by_its_target() {
        let tmp = tempfile::tempdir().unwrap();
        // The link and the directory holding it are fine; where it leads is
        // not. Following links (metadata) saw only the private target dir.
        let open = tmp.path().join("open");
        let real = open.join("cuda-13.0/lib64");
        fs::create_dir_all(&real).unwrap();
        fs::write(real.join("libnvrtc.so"), "").unwrap();
        chmod(&real.join("libnvrtc.so"), 0o644);
        chmod(&real, 0o755);
        chmod(&open.join("cuda-13.0"), 0o755);
        chmod(&open, 0o777);
        let mine = tmp.path().join("mine");
        fs::create_dir(&mine).unwrap();
        chmod(&mine, 0o755);
        std::os::unix::fs::symlink(open.join("cuda-13.0"), mine.join("cuda")).unwrap();
        let named = mine.join("cuda/lib64/libnvrtc.so");
        let found = find_untrusted(&named).expect("refused");
        assert_eq!(found.path, open);
        // The same layout with a private target directory is fine: the link
        // itself (mode 0777, as every link) is no reason to refuse.
        chmod(&open, 0o755);
        assert_eq!(find_untrusted(&named), None);
    }

    #[test]
    fn a_writable_link_target_file_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let lib = tree(tmp.path());
        let link = tmp.path().join("a/b/lib/libx.so.1");
        std::os::unix::fs::symlink("libx.so", &link).unwrap();
        assert_eq!(find_untrusted(&link), None);
        chmod(&lib, 0o646);
        assert_eq!(find_untrusted(&link).unwrap().path, lib);
    }

    /// Gives `paths` to uid 4242 when the tests run as root; returns the
    /// uid that owns them now.
    fn give_away(paths: &[&Path]) -> u32 {
        if me() == 0 {
            for path in paths {
                std::os::unix::fs::lchown(path, Some(4242), None).unwrap();
            }
        }
        fs::symlink_metadata(paths[0]).unwrap().uid()
    }

    #[test]
    fn a_sticky_directory_on_the_way_is_allowed_unless_another_user_owns_it() {
        let tmp = tempfile::tempdir().unwrap();
        let lib = tree(tmp.path());
        let a = tmp.path().join("a");
        chmod(&a, 0o1777);
        // Ours or root's, as /tmp is: others may add entries, not replace ours.
        assert_eq!(find_untrusted_for(&lib, me()), None);
        // Another user's (only root can make one): its owner may replace
        // what is in it.
        if give_away(&[&a]) == 4242 {
            let open = find_untrusted_for(&lib, me()).unwrap();
            assert_eq!(open.path, a);
            assert!(open.why.contains("belongs to uid 4242"), "{open:?}");
            std::os::unix::fs::lchown(&a, Some(me()), None).unwrap();
        }
        // At the end of the path a sticky directory is no exception.
        assert!(find_untrusted_for(&a, me()).is_some());
        // Not sticky: refused, even though it is ours.
        chmod(&a, 0o777);
        let open = find_untrusted_for(&lib, me()).unwrap();
        assert_eq!(open.path, a);
        assert!(open.why.contains("mode 0777"), "{open:?}");
    }

    #[test]
    fn a_file_of_another_user_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let lib = tree(tmp.path());
        // As root, the file is given to uid 4242; as anyone else, the check
        // runs as if it were uid 4242's: either way not ours, not root's.
        let owner = give_away(&[&lib]);
        let me = if owner == 4242 { 0 } else { 4242 };
        let open = find_untrusted_for(&lib, me).unwrap();
        assert!(open.path.starts_with(tmp.path()), "{open:?}");
        assert!(open.why.contains("belongs to uid"), "{open:?}");
    }

    #[test]
    fn a_missing_file_is_not_trusted() {
        let tmp = tempfile::tempdir().unwrap();
        let open = find_untrusted(&tmp.path().join("none")).unwrap();
        assert!(open.why.contains("cannot be inspected"), "{open:?}");
    }
}
