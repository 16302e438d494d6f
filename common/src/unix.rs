//! The process's effective user and group ids, in one place: the checks
//! that a file, directory or socket peer is this user's all ask for them.

/// This process's effective user id (`geteuid`).
pub fn effective_uid() -> u32 {
    // SAFETY: geteuid cannot fail and has no preconditions.
    unsafe { libc::geteuid() }
}

/// This process's effective group id (`getegid`).
pub fn effective_gid() -> u32 {
    // SAFETY: getegid cannot fail and has no preconditions.
    unsafe { libc::getegid() }
}
