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
//! (not at its end); what is in it is checked next. Write by the group is
//! writing by others too, unless the group is this user's private group
//! (Red Hat's and Debian's user private groups, where umask 002 makes a
//! user's own venv mode 0775): see `Identity::private_group_is`.
//! Then the same for the canonical path, the file the links lead to: on a
//! real system `/usr/local/cuda` is a link to `/usr/local/cuda-13.0`, and a
//! venv's `bin/python` a link to `/usr/bin/python3.12`, both root's.
//!
//! A production loader would also open the file once and load that open
//! file (as the build cache does, see `device_build::cache`); here the
//! libraries come from the system or the user's own environment, and the
//! check makes sure no one else can swap them between check and load.

use std::ffi::{c_char, CStr};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use crate::unix::{effective_gid, effective_uid};
use crate::CannotRun;

/// Why a path is not trusted: the directory, link or file on its way that
/// another user could change, and what lets them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Untrusted {
    /// The offending directory, link or file.
    pub path: PathBuf,
    /// E.g. `has mode 0777: other users can write it`.
    pub why: String,
    /// Set when the reason is its owner: another user's uid (neither this
    /// user nor root). Only that user could change its mode, so the fix is
    /// not a `chmod`.
    pub owner: Option<u32>,
}

/// Who this process is, as far as the check cares: its effective uid and
/// gid, and the names and listed members that decide whether that group is
/// the user's private group.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Identity {
    uid: u32,
    egid: u32,
    /// The name of `uid`; `None` if it has none (no passwd entry).
    user: Option<String>,
    /// The name of `egid`; `None` if it has none.
    group: Option<String>,
    /// The members the group entry of `egid` lists (`gr_mem`).
    members: Vec<String>,
}

impl Identity {
    /// This process's, looked up once: the effective ids do not change
    /// while it runs.
    fn of_process() -> &'static Identity {
        static ME: OnceLock<Identity> = OnceLock::new();
        ME.get_or_init(|| {
            let (uid, egid) = (effective_uid(), effective_gid());
            let (group, members) = match group_entry(egid) {
                Some((name, members)) => (Some(name), members),
                None => (None, Vec::new()),
            };
            Identity {
                uid,
                egid,
                user: user_name(uid),
                group,
                members,
            }
        })
    }

    /// Is `gid` this user's private group, so that its write bit lets no one
    /// else write? As Red Hat's and Debian's "user private groups" are made
    /// (and as their login scripts decide on umask 002): the process's
    /// effective group, named as the user, listing no other member. Never
    /// for root or root's group (those scripts give root umask 022, and
    /// gid 0 is no one's private group). Another account whose passwd entry
    /// names this group as its primary one is not in the listed members;
    /// the passwd database is not searched for one (on a directory service
    /// that would mean reading every account), as `useradd` makes no such
    /// account.
    fn private_group_is(&self, gid: u32) -> bool {
        let Some(user) = &self.user else {
            return false;
        };
        self.uid != 0
            && gid != 0
            && gid == self.egid
            && self.group.as_ref() == Some(user)
            && self.members.iter().all(|member| member == user)
    }

    /// The pure decision: can a user other than this one (and root) write
    /// an entry with `mode` whose group is `gid`? Write for others, always;
    /// write for the group, unless the group is this user's private group.
    fn others_can_write(&self, mode: u32, gid: u32) -> bool {
        mode & 0o002 != 0 || (mode & 0o020 != 0 && !self.private_group_is(gid))
    }
}

/// Runs a `get*_r` lookup with a buffer that grows while it is too small.
/// `None` if there is no entry or the lookup fails.
fn with_buffer<T>(mut lookup: impl FnMut(&mut [c_char]) -> Result<Option<T>, i32>) -> Option<T> {
    let mut buf = vec![0 as c_char; 1024];
    loop {
        match lookup(&mut buf) {
            Err(libc::ERANGE) if buf.len() < 1 << 20 => buf.resize(buf.len() * 2, 0),
            Err(_) => return None,
            Ok(found) => return found,
        }
    }
}

/// A name from the user and group databases, if it is UTF-8 (one that is
/// not matches nothing, which keeps the check strict).
///
/// # Safety
/// `name` is null or points at a NUL-terminated string.
unsafe fn name_of(name: *const c_char) -> Option<String> {
    if name.is_null() {
        return None;
    }
    // SAFETY: as the caller promises.
    unsafe { CStr::from_ptr(name) }
        .to_str()
        .ok()
        .map(str::to_owned)
}

/// The user name of `uid` (`getpwuid_r`).
fn user_name(uid: u32) -> Option<String> {
    with_buffer(|buf| {
        // SAFETY: passwd is plain data; getpwuid_r writes it and the strings
        // it points to into `buf`, which outlives every use below.
        unsafe {
            let mut entry: libc::passwd = std::mem::zeroed();
            let mut result = std::ptr::null_mut();
            let rc = libc::getpwuid_r(uid, &mut entry, buf.as_mut_ptr(), buf.len(), &mut result);
            if rc != 0 {
                return Err(rc);
            }
            Ok(if result.is_null() {
                None
            } else {
                name_of(entry.pw_name)
            })
        }
    })
}

/// The name of group `gid` and the members it lists (`getgrgid_r`).
fn group_entry(gid: u32) -> Option<(String, Vec<String>)> {
    with_buffer(|buf| {
        // SAFETY: group is plain data; getgrgid_r writes it, its strings and
        // its NULL-terminated member array into `buf`.
        unsafe {
            let mut entry: libc::group = std::mem::zeroed();
            let mut result = std::ptr::null_mut();
            let rc = libc::getgrgid_r(gid, &mut entry, buf.as_mut_ptr(), buf.len(), &mut result);
            if rc != 0 {
                return Err(rc);
            }
            if result.is_null() {
                return Ok(None);
            }
            let Some(name) = name_of(entry.gr_name) else {
                return Ok(None);
            };
            let mut members = Vec::new();
            let mut at = entry.gr_mem;
            while !at.is_null() && !(*at).is_null() {
                // A member that is not UTF-8 is kept as a name no user has,
                // so that the group is not taken for private.
                members.push(name_of(*at).unwrap_or_else(|| "\u{fffd}".into()));
                at = at.add(1);
            }
            Ok(Some((name, members)))
        }
    })
}

/// The first directory, link or file on the way to `path` (as named, then
/// its canonical target) that another user could change; `None` if there
/// is none. A path that cannot be inspected is not trusted.
pub fn find_untrusted(path: &Path) -> Option<Untrusted> {
    find_untrusted_for(path, Identity::of_process(), Last::Used)
}

/// As [`find_untrusted`], for a directory this program makes its own
/// private entries in (the system's temporary directory, `TMPDIR`): the
/// directory itself may be a sticky one that root or this user owns, as
/// `/tmp` is, since other users cannot remove or rename what is made in it;
/// every step above it is checked as usual. What is made in it must then be
/// checked by the caller (this user's, mode 0700).
pub fn find_untrusted_place(dir: &Path) -> Option<Untrusted> {
    find_untrusted_for(dir, Identity::of_process(), Last::Holder)
}

/// What the last step of a path is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Last {
    /// What is loaded or run: a sticky directory there is no exception.
    Used,
    /// A directory to make private entries in: it may be sticky.
    Holder,
}

fn find_untrusted_for(path: &Path, me: &Identity, last: Last) -> Option<Untrusted> {
    let absolute = match std::path::absolute(path) {
        Ok(absolute) => absolute,
        Err(e) => {
            return Some(Untrusted {
                path: path.to_path_buf(),
                why: format!("is relative and the current directory is unknown ({e})"),
                owner: None,
            })
        }
    };
    if let Some(found) = check_chain(&absolute, me, last) {
        return Some(found);
    }
    match absolute.canonicalize() {
        Ok(real) if real != absolute => check_chain(&real, me, last),
        Ok(_) => None,
        Err(e) => Some(Untrusted {
            path: absolute,
            why: format!("cannot be resolved ({e})"),
            owner: None,
        }),
    }
}

/// Every prefix of `path`, from `/` down to `path` itself.
fn check_chain(path: &Path, me: &Identity, last: Last) -> Option<Untrusted> {
    let mut chain: Vec<&Path> = path.ancestors().collect();
    chain.reverse();
    let end = chain.len() - 1;
    chain.into_iter().enumerate().find_map(|(at, step)| {
        let found = |why: String, owner: Option<u32>| {
            Some(Untrusted {
                path: step.to_path_buf(),
                why,
                owner,
            })
        };
        let meta = match std::fs::symlink_metadata(step) {
            Ok(meta) => meta,
            Err(e) => return found(format!("cannot be inspected ({e})"), None),
        };
        if meta.uid() != me.uid && meta.uid() != 0 {
            return found(
                format!(
                    "belongs to uid {}, neither this user (uid {}) nor root",
                    meta.uid(),
                    me.uid
                ),
                Some(meta.uid()),
            );
        }
        // A link's own mode means nothing (always 0777): who may replace it
        // is decided by the directory that holds it, checked one step above.
        if meta.file_type().is_symlink() {
            return None;
        }
        let mode = meta.mode() & 0o7777;
        if !me.others_can_write(mode, meta.gid()) {
            return None;
        }
        // The owner is this user or root (checked above): others may add
        // entries, not remove or rename theirs, and the entry below it is
        // checked next (or, for a holder, by the caller).
        let sticky = meta.is_dir() && mode & 0o1000 != 0;
        if sticky && (at != end || last == Last::Holder) {
            return None;
        }
        found(
            format!("has mode {mode:04o}: other users can write it"),
            None,
        )
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
    let fix = match open.owner {
        // Only its owner could change its mode or give it away.
        Some(owner) => format!(
            "{shown} is owned by uid {owner} (not you, not root): ask its owner, \
             or install your own copy (for example in a Python venv)"
        ),
        None => format!(
            "make {shown} writable by you or root only (chmod go-w {shown}, if it is yours),\n\
             or install {what} where only you or root can write (a virtual environment of your own, or the system's packages)"
        ),
    };
    CannotRun::new(
        format!(
            "{what} at {} is not used: {shown} {}, so another user could change what runs",
            path.display(),
            open.why
        ),
        fix,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::{self, Permissions};
    use std::os::unix::fs::PermissionsExt;

    /// This user, as the check sees it, with `egid` and the names and
    /// members given: the tests decide whether the group is private, not
    /// the machine they run on.
    fn identity(egid: u32, user: &str, group: &str, members: &[&str]) -> Identity {
        Identity {
            uid: effective_uid(),
            egid,
            user: Some(user.into()),
            group: Some(group.into()),
            members: members.iter().map(|m| m.to_string()).collect(),
        }
    }

    /// A group that is no one's private group: write by it is refused.
    fn shared() -> Identity {
        identity(4343, "alice", "staff", &["alice", "bob"])
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
        let open = find_untrusted_for(&lib, &shared(), Last::Used).expect("refused");
        assert_eq!(open.path, tmp.path().join("a"));
        assert!(open.why.contains("mode 0775"), "{open:?}");
        assert_eq!(open.owner, None);
        let err = refusal(&lib, "NVRTC", &open);
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
        if effective_uid() == 0 {
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
        assert_eq!(find_untrusted_for(&lib, &shared(), Last::Used), None);
        // Another user's (only root can make one): its owner may replace
        // what is in it.
        if give_away(&[&a]) == 4242 {
            let open = find_untrusted_for(&lib, &shared(), Last::Used).unwrap();
            assert_eq!(open.path, a);
            assert!(open.why.contains("belongs to uid 4242"), "{open:?}");
            std::os::unix::fs::lchown(&a, Some(effective_uid()), None).unwrap();
        }
        // At the end of the path a sticky directory is no exception.
        assert!(find_untrusted_for(&a, &shared(), Last::Used).is_some());
        // Not sticky: refused, even though it is ours.
        chmod(&a, 0o777);
        let open = find_untrusted_for(&lib, &shared(), Last::Used).unwrap();
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
        let me = Identity {
            uid: if owner == 4242 { 0 } else { 4242 },
            ..shared()
        };
        let open = find_untrusted_for(&lib, &me, Last::Used).unwrap();
        assert!(open.path.starts_with(tmp.path()), "{open:?}");
        assert!(open.why.contains("belongs to uid"), "{open:?}");
        assert!(open.owner.is_some(), "{open:?}");
    }

    #[test]
    fn a_step_another_user_owns_is_not_fixed_with_chmod() {
        // Only its owner could chmod it: the fix says to ask them or to
        // install a copy of one's own.
        let tmp = tempfile::tempdir().unwrap();
        let lib = tree(tmp.path());
        let b = tmp.path().join("a/b");
        let owner = give_away(&[&b]);
        let me = Identity {
            uid: if owner == 4242 { 0 } else { 4242 },
            ..shared()
        };
        let open = find_untrusted_for(&lib, &me, Last::Used).unwrap();
        // As root, `a` (root's) is fine and `b` is 4242's; otherwise the
        // first step this user owns is "another user's" to uid 4242.
        assert_eq!(open.owner, Some(owner));
        let err = refusal(&lib, "NVRTC", &open);
        let shown = open.path.display();
        assert_eq!(
            err.fix,
            format!(
                "{shown} is owned by uid {owner} (not you, not root): ask its owner, \
                 or install your own copy (for example in a Python venv)"
            )
        );
        assert!(!err.fix.contains("chmod"), "{}", err.fix);
        assert!(
            err.reason.contains(&format!("belongs to uid {owner}")),
            "{err}"
        );
    }

    #[test]
    fn group_write_is_allowed_only_for_the_user_private_group() {
        let (mode, gid) = (0o775, 1000);
        // Uid 1000, whoever runs the tests: the rule is never root's.
        let identity = |egid, user, group, members: &[&str]| Identity {
            uid: 1000,
            ..identity(egid, user, group, members)
        };
        // Red Hat's user private group: umask 002, the venv is 0775.
        let private = identity(1000, "alice", "alice", &[]);
        assert!(!private.others_can_write(mode, gid));
        // Listing only the user itself is no other member either.
        assert!(!identity(1000, "alice", "alice", &["alice"]).others_can_write(mode, gid));
        // Write for others is never the group's.
        assert!(private.others_can_write(0o777, gid));
        assert!(private.others_can_write(0o757, gid));
        // Another group than the process's effective one.
        assert!(private.others_can_write(mode, 1001));
        // Named otherwise than the user.
        assert!(identity(1000, "alice", "users", &[]).others_can_write(mode, gid));
        // Another member listed.
        assert!(identity(1000, "alice", "alice", &["bob"]).others_can_write(mode, gid));
        assert!(identity(1000, "alice", "alice", &["alice", "bob"]).others_can_write(mode, gid));
        // Names unknown: no passwd or group entry.
        let unnamed = Identity {
            user: None,
            group: None,
            ..private.clone()
        };
        assert!(unnamed.others_can_write(mode, gid));
        // Never root or root's group.
        let root = Identity {
            uid: 0,
            egid: 0,
            user: Some("root".into()),
            group: Some("root".into()),
            members: Vec::new(),
        };
        assert!(root.others_can_write(mode, 0));
        assert!(identity(0, "root", "root", &[]).others_can_write(mode, 0));
        // Nothing writable by group or others: no one else, whoever asks.
        assert!(!shared().others_can_write(0o755, gid));
        assert!(!shared().others_can_write(0o1700, gid));
    }

    #[test]
    fn a_venv_made_with_umask_002_in_a_private_group_is_trusted() {
        let tmp = tempfile::tempdir().unwrap();
        let lib = tree(tmp.path());
        let steps = [
            tmp.path().join("a"),
            tmp.path().join("a/b"),
            tmp.path().join("a/b/lib"),
        ];
        for dir in &steps {
            chmod(dir, 0o775);
        }
        chmod(&lib, 0o664);
        // The rule is for a user other than root, in a group other than
        // root's. As root, the tree (root's, which any user may trust) is
        // given group 4343 and checked as if by uid 4242; as anyone else,
        // it is this user's, in this user's group.
        let uid = if effective_uid() == 0 {
            for path in steps.iter().chain([&lib]) {
                std::os::unix::fs::lchown(path, None, Some(4343)).unwrap();
            }
            4242
        } else {
            effective_uid()
        };
        let gid = fs::metadata(&lib).unwrap().gid();
        let private = Identity {
            uid,
            ..identity(gid, "alice", "alice", &[])
        };
        assert_eq!(find_untrusted_for(&lib, &private, Last::Used), None);
        // The same tree in a group that is not private: refused at the top.
        let staff = Identity {
            uid,
            ..identity(gid, "alice", "staff", &["alice", "bob"])
        };
        let open = find_untrusted_for(&lib, &staff, Last::Used).unwrap();
        assert_eq!(open.path, steps[0]);
        assert!(open.why.contains("mode 0775"), "{open:?}");
        // Write for others stays refused in a private group.
        chmod(&steps[1], 0o777);
        let open = find_untrusted_for(&lib, &private, Last::Used).unwrap();
        assert_eq!(open.path, steps[1]);
    }

    #[test]
    fn a_sticky_directory_may_hold_private_entries_but_no_open_one_above_it() {
        let tmp = tempfile::tempdir().unwrap();
        let holder = tmp.path().join("tmp");
        fs::create_dir(&holder).unwrap();
        chmod(&holder, 0o1777);
        // As /tmp: a place to make private entries, not a thing to load.
        assert_eq!(find_untrusted_for(&holder, &shared(), Last::Holder), None);
        assert!(find_untrusted_for(&holder, &shared(), Last::Used).is_some());
        // Not sticky: others could rename what is made in it.
        chmod(&holder, 0o777);
        let open = find_untrusted_for(&holder, &shared(), Last::Holder).unwrap();
        assert_eq!(open.path, holder);
        // A private directory under one others can write: the step above.
        chmod(&holder, 0o700);
        chmod(tmp.path(), 0o777);
        let open = find_untrusted_place(&holder).unwrap();
        assert_eq!(open.path, tmp.path());
        chmod(tmp.path(), 0o700);
        assert_eq!(find_untrusted_place(&holder), None);
    }

    #[test]
    fn the_user_and_group_databases_are_read_as_etc_files_say() {
        // Root's entries, where the files list them (NSS reads them first).
        let passwd = fs::read_to_string("/etc/passwd").unwrap_or_default();
        if let Some(line) = passwd.lines().find(|l| l.split(':').nth(2) == Some("0")) {
            assert_eq!(user_name(0).as_deref(), line.split(':').next());
        }
        let group = fs::read_to_string("/etc/group").unwrap_or_default();
        if let Some(line) = group.lines().find(|l| l.split(':').nth(2) == Some("0")) {
            let fields: Vec<&str> = line.split(':').collect();
            let members: Vec<String> = fields[3]
                .split(',')
                .filter(|m| !m.is_empty())
                .map(str::to_owned)
                .collect();
            assert_eq!(group_entry(0), Some((fields[0].to_owned(), members)));
        }
        let me = Identity::of_process();
        assert_eq!((me.uid, me.egid), (effective_uid(), effective_gid()));
        assert_eq!(me.user, user_name(me.uid));
    }

    #[test]
    fn a_missing_file_is_not_trusted() {
        let tmp = tempfile::tempdir().unwrap();
        let open = find_untrusted(&tmp.path().join("none")).unwrap();
        assert!(open.why.contains("cannot be inspected"), "{open:?}");
    }
}
