//! Passing file descriptors between ranks.
//!
//! `cuMemExportToShareableHandle` turns an allocation into a POSIX file
//! descriptor, and whoever holds that descriptor can import and map the memory.
//! So a descriptor to GPU memory is a *capability*: it must reach the peers and
//! nobody else. A descriptor is an index into one process's fd table, so it
//! cannot travel as a number between processes; the kernel must copy it.
//!
//! * **Ranks in one process** (thread mode) share one fd table: the number *is*
//!   the descriptor. Each rank sends its number to the others through the
//!   launcher's collectives, and each receiver `dup`s the peers' descriptors so
//!   that it owns copies it can close on its own schedule. A barrier keeps every
//!   owner's descriptor open until all peers hold their copies.
//! * **Ranks in different processes** (MPI mode) pass them over Unix-domain
//!   sockets with `SCM_RIGHTS`, which installs a new descriptor for the same
//!   open file in the receiver. Rank 0 creates a private directory (mode 0700,
//!   owned by this user) and broadcasts its path; each rank listens on
//!   `rank-<r>.sock` in it; after a barrier, each rank connects to every peer
//!   and sends one message (its rank) carrying its descriptor, while a second
//!   thread accepts the peers' connections, so nobody waits on anybody's order.
//!   Both ends check the other's credentials (`SO_PEERCRED`): the same user,
//!   and the very process of the rank it claims to be (the ranks share their
//!   process ids first). Another process of the same user that finds the
//!   socket is refused.
//!
//! The directory is named after the host and process that made it
//! (`vmm-raw-<host>-<pid>-XXXXXX`). If rank 0 is killed (SIGKILL) during the
//! exchange, nothing can remove it then; the next run's rank 0 removes every
//! such directory whose process is gone.
//!
//! Why not something simpler:
//!
//! * a socket path in a world-writable place, such as `/tmp/nccl.sock`: any
//!   user could bind that name first and receive the GPU memory, or connect and
//!   confuse the exchange. In a 0700 directory only this user can do either.
//! * an abstract socket (a name starting with `\0`): it has no file, hence no
//!   permissions at all; anyone in the same network namespace can bind or
//!   connect to it.
//! * `pidfd_getfd(pidfd_open(peer_pid), peer_fd)` (Linux 5.6+, what some
//!   libraries use): it copies a descriptor straight out of another process,
//!   with no socket, but the caller needs `PTRACE_MODE_ATTACH` rights over the
//!   peer: the same user *and* a Yama `ptrace_scope` that allows it (0, or 1
//!   with the peer's consent through `prctl(PR_SET_PTRACER)`), or
//!   `CAP_SYS_PTRACE`. Containers and hardened hosts often refuse it (EPERM).
//!   A socket needs no special permission.

use std::ffi::OsString;
use std::io::{IoSlice, IoSliceMut};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{anyhow, bail, ensure, Context, Result};
use common::cleanup::{self, OwnedDir};
use common::RankContext;
use nix::sys::socket::{
    accept4, connect, getsockopt, listen, recvmsg, sendmsg, setsockopt, shutdown, socket, sockopt,
    AddressFamily, Backlog, ControlMessage, ControlMessageOwned, MsgFlags, Shutdown, SockFlag,
    SockType, UnixAddr, UnixCredentials,
};
use nix::sys::time::{TimeVal, TimeValLike};

use crate::all_gather;

/// How long a rank waits for a peer's connection before giving up.
pub const PEER_TIMEOUT: Duration = Duration::from_secs(60);

/// How the descriptors travel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// Every rank lives in this process: share the numbers, `dup` them.
    SharedTable,
    /// Unix-domain sockets with `SCM_RIGHTS`, in a private directory.
    UnixSocket,
}

impl Transport {
    /// The one that works for ranks in these processes: [`SharedTable`] only
    /// if every rank is in one process.
    ///
    /// [`SharedTable`]: Transport::SharedTable
    pub fn for_pids(pids: &[u32]) -> Self {
        match pids.split_first() {
            Some((first, rest)) if rest.iter().all(|p| p == first) => Transport::SharedTable,
            _ => Transport::UnixSocket,
        }
    }

    pub fn name(&self) -> &'static str {
        match self {
            Transport::SharedTable => "shared-table",
            Transport::UnixSocket => "unix-socket",
        }
    }
}

/// Every peer's descriptor, owned by this rank: `fds[r]` came from rank `r`;
/// `None` at this rank's own index.
pub struct PeerFds {
    pub transport: Transport,
    pub fds: Vec<Option<OwnedFd>>,
}

/// Collective: sends `mine` to every other rank and returns a descriptor from
/// each of them. Picks the transport from where the ranks live.
pub fn exchange(ctx: &RankContext, mine: BorrowedFd<'_>) -> Result<PeerFds> {
    exchange_via(ctx, mine, None)
}

/// [`exchange`], with the transport forced (`Some`) or chosen (`None`).
/// Forcing `SharedTable` across processes is refused: the numbers would name
/// unrelated descriptors (or nothing) in the receiver.
pub fn exchange_via(
    ctx: &RankContext,
    mine: BorrowedFd<'_>,
    transport: Option<Transport>,
) -> Result<PeerFds> {
    let pids: Vec<u32> = all_gather(ctx, std::process::id().to_le_bytes().to_vec())?
        .iter()
        .map(|bytes| decode_u32(bytes))
        .collect::<Result<_>>()
        .context("sharing process ids")?;
    let possible = Transport::for_pids(&pids);
    let transport = transport.unwrap_or(possible);
    let mut processes = pids.clone();
    processes.sort_unstable();
    processes.dedup();
    ensure!(
        transport == possible || transport == Transport::UnixSocket,
        "the shared-table transport needs every rank in one process, but the ranks run in {} processes: \
         a descriptor number means nothing in another process",
        processes.len()
    );
    let fds = match transport {
        Transport::SharedTable => share_in_process(ctx, mine)?,
        Transport::UnixSocket => pass_over_sockets(ctx, mine, &pids)?,
    };
    Ok(PeerFds { transport, fds })
}

/// Thread mode: the ranks share one fd table, so the number is enough.
fn share_in_process(ctx: &RankContext, mine: BorrowedFd<'_>) -> Result<Vec<Option<OwnedFd>>> {
    let numbers = all_gather(ctx, mine.as_raw_fd().to_le_bytes().to_vec())?;
    let mut fds = Vec::with_capacity(numbers.len());
    for (peer, bytes) in numbers.iter().enumerate() {
        if peer == ctx.rank() {
            fds.push(None);
            continue;
        }
        let number = decode_u32(bytes)? as RawFd;
        // SAFETY: `number` is rank `peer`'s descriptor in this very process;
        // it stays open until the barrier below, which `peer` also waits in.
        let theirs = unsafe { BorrowedFd::borrow_raw(number) };
        // A copy of our own (F_DUPFD_CLOEXEC), so that closing is never a
        // question of whose turn it is.
        let copy = theirs
            .try_clone_to_owned()
            .with_context(|| format!("dup of rank {peer}'s descriptor {number}"))?;
        fds.push(Some(copy));
    }
    // NOTE: nobody may close its own descriptor before every peer has its copy.
    ctx.barrier()?;
    Ok(fds)
}

/// MPI mode: SCM_RIGHTS over Unix-domain sockets in a private directory.
/// `pids[r]` is rank `r`'s process id: only that process may connect as `r`.
fn pass_over_sockets(
    ctx: &RankContext,
    mine: BorrowedFd<'_>,
    pids: &[u32],
) -> Result<Vec<Option<OwnedFd>>> {
    let (rank, size) = (ctx.rank(), ctx.size());
    let dir = if ctx.is_root() {
        Some(PrivateDir::create(&socket_base_dir()).context("creating the socket directory")?)
    } else {
        None
    };
    let path = ctx.broadcast_vec(
        dir.as_ref()
            .map(|d| d.path().as_os_str().as_bytes().to_vec())
            .unwrap_or_default(),
    )?;
    let dir_path = PathBuf::from(OsString::from_vec(path));
    // Every rank checks the directory before it trusts it with a capability.
    check_private(&dir_path)?;

    let listener = listen_at(&socket_path(&dir_path, rank), size, PEER_TIMEOUT)?;
    // Every rank listens before anyone connects.
    ctx.barrier()?;

    let received = std::thread::scope(|scope| {
        let receiver = scope.spawn(|| receive_from_peers(&listener, rank, pids, PEER_TIMEOUT));
        let sent = (1..size)
            .map(|step| (rank + step) % size)
            .try_for_each(|peer| {
                send_fd(
                    &socket_path(&dir_path, peer),
                    rank,
                    (peer, pids[peer]),
                    mine,
                )
            });
        if sent.is_err() {
            // Wakes our receiver from accept(): this rank is giving up.
            let _ = shutdown(listener.as_raw_fd(), Shutdown::Both);
        }
        let received = receiver
            .join()
            .map_err(|_| anyhow!("the thread receiving descriptors panicked"))?;
        sent?;
        received
    })?;
    drop(listener);

    // Everyone has received everything: rank 0 removes the directory and the
    // sockets in it.
    ctx.barrier()?;
    if let Some(dir) = dir {
        dir.remove()?;
    }
    Ok(received)
}

/// The directory the private socket directory is made in: `$XDG_RUNTIME_DIR`
/// (per user, mode 0700, on tmpfs) if it is set, else the system temp dir
/// (`$TMPDIR` or `/tmp`). All ranks of a node must see the same one.
pub fn socket_base_dir() -> PathBuf {
    std::env::var_os("XDG_RUNTIME_DIR")
        .map(PathBuf::from)
        .filter(|dir| dir.is_absolute() && dir.is_dir())
        .unwrap_or_else(std::env::temp_dir)
}

/// `rank-<r>.sock` in `dir`.
pub fn socket_path(dir: &Path, rank: usize) -> PathBuf {
    dir.join(format!("rank-{rank}.sock"))
}

/// A directory only this user can enter, for the sockets; removed with
/// everything in it by [`remove`](Self::remove), when dropped, or by the
/// launcher before a forced exit (see `common::cleanup`).
pub struct PrivateDir {
    dir: OwnedDir,
}

/// The start of a socket directory's name.
pub const DIR_PREFIX: &str = "vmm-raw-";

impl PrivateDir {
    /// `mkdir` of a fresh `vmm-raw-<host>-<pid>-XXXXXX` in `base`, mode 0700
    /// from the start (never briefly open to others), then checked. First
    /// removes the directories that killed runs left in `base`.
    pub fn create(base: &Path) -> Result<Self> {
        cleanup::remove_stale(base, DIR_PREFIX);
        let dir = OwnedDir::create(base, DIR_PREFIX)
            .with_context(|| format!("mkdir of a private directory in {}", base.display()))?;
        check_private(dir.path())?;
        Ok(Self { dir })
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Removes the directory and the sockets in it.
    pub fn remove(self) -> Result<()> {
        let path = self.dir.path().to_path_buf();
        self.dir
            .remove()
            .with_context(|| format!("removing {}", path.display()))
    }
}

/// Is `path` a real directory (not a symlink), owned by this user, that no
/// other user can enter or change (no group or other permission bits)?
pub fn check_private(path: &Path) -> Result<()> {
    let meta = std::fs::symlink_metadata(path)
        .with_context(|| format!("socket directory {}", path.display()))?;
    ensure!(
        meta.file_type().is_dir(),
        "socket directory {} is not a directory (a symlink or a file): refusing to put sockets there",
        path.display()
    );
    let me = effective_uid();
    ensure!(
        meta.uid() == me,
        "socket directory {} belongs to uid {}, not to this user (uid {me}): refusing to put sockets there",
        path.display(),
        meta.uid()
    );
    let mode = meta.mode() & 0o777;
    ensure!(
        mode & 0o077 == 0 && mode & 0o700 == 0o700,
        "socket directory {} has mode {mode:04o}; it must be 0700 so that no other user can reach the sockets",
        path.display()
    );
    Ok(())
}

fn effective_uid() -> u32 {
    // SAFETY: geteuid cannot fail and has no preconditions.
    unsafe { libc::geteuid() }
}

/// The peer at the other end of `socket` is this same user, and one of the
/// run's processes (`pids`): another process of the same user that found
/// the socket (a second job, a stray script) gets no GPU memory.
fn check_peer(socket: &OwnedFd, who: &str, pids: &[u32]) -> Result<UnixCredentials> {
    let creds = getsockopt(socket, sockopt::PeerCredentials)
        .with_context(|| format!("SO_PEERCRED of {who}"))?;
    let me = effective_uid();
    ensure!(
        creds.uid() == me,
        "{who} is process {} of uid {}, not of this user (uid {me}): refusing to exchange GPU memory with it",
        creds.pid(),
        creds.uid()
    );
    ensure!(
        u32::try_from(creds.pid()).is_ok_and(|pid| pids.contains(&pid)),
        "{who} is process {}, which is not one of this run's ranks (processes {}): refusing to exchange GPU memory with it",
        creds.pid(),
        pids.iter().map(u32::to_string).collect::<Vec<_>>().join(", ")
    );
    Ok(creds)
}

/// A SOCK_SEQPACKET socket listening at `path`: connection-oriented (so
/// `SO_PEERCRED` works) and message-preserving (one message, one descriptor).
/// `accept` on it gives up after `timeout`.
fn listen_at(path: &Path, peers: usize, timeout: Duration) -> Result<OwnedFd> {
    let address = unix_address(path)?;
    let listener = socket(
        AddressFamily::Unix,
        SockType::SeqPacket,
        SockFlag::SOCK_CLOEXEC,
        None,
    )
    .context("socket(AF_UNIX, SOCK_SEQPACKET)")?;
    nix::sys::socket::bind(listener.as_raw_fd(), &address)
        .with_context(|| format!("bind {}", path.display()))?;
    let backlog =
        Backlog::new(i32::try_from(peers).unwrap_or(i32::MAX)).unwrap_or(Backlog::MAXCONN);
    listen(&listener, backlog).with_context(|| format!("listen on {}", path.display()))?;
    // accept() honours SO_RCVTIMEO on Linux: a peer that never comes is an error, not a hang.
    set_timeout(&listener, timeout)?;
    Ok(listener)
}

fn unix_address(path: &Path) -> Result<UnixAddr> {
    UnixAddr::new(path).with_context(|| {
        format!(
            "{} does not fit in a Unix socket address (at most 107 bytes): set TMPDIR (or XDG_RUNTIME_DIR) to a shorter directory",
            path.display()
        )
    })
}

/// Connects to `path` (the socket of rank `peer`, whose process is
/// `peer_pid`) and sends our rank with `fd` attached as SCM_RIGHTS.
fn send_fd(
    path: &Path,
    rank: usize,
    (peer, peer_pid): (usize, u32),
    fd: BorrowedFd<'_>,
) -> Result<()> {
    let address = unix_address(path)?;
    let socket = socket(
        AddressFamily::Unix,
        SockType::SeqPacket,
        SockFlag::SOCK_CLOEXEC,
        None,
    )
    .context("socket(AF_UNIX, SOCK_SEQPACKET)")?;
    connect(socket.as_raw_fd(), &address)
        .with_context(|| format!("connect to rank {peer} at {}", path.display()))?;
    // The listener's credentials, recorded when it called listen(): make sure
    // the capability goes to rank `peer`'s process and nobody else's.
    check_peer(
        &socket,
        &format!("the listener of rank {peer}"),
        &[peer_pid],
    )?;
    let message = encode_message(rank);
    let fds = [fd.as_raw_fd()];
    sendmsg::<()>(
        socket.as_raw_fd(),
        &[IoSlice::new(&message)],
        &[ControlMessage::ScmRights(&fds)],
        MsgFlags::empty(),
        None,
    )
    .with_context(|| format!("sendmsg of the descriptor to rank {peer}"))?;
    // Closing our end is fine: the message, descriptor included, waits in the
    // peer's queue until it is read.
    Ok(())
}

/// `SO_RCVTIMEO`: how long `accept` and `recvmsg` on `socket` wait.
fn set_timeout(socket: &OwnedFd, timeout: Duration) -> Result<()> {
    let micros = i64::try_from(timeout.as_micros()).unwrap_or(i64::MAX);
    setsockopt(
        socket,
        sockopt::ReceiveTimeout,
        &TimeVal::microseconds(micros),
    )
    .context("SO_RCVTIMEO")
}

/// Accepts one connection from every peer and takes the descriptor each
/// sends; `pids[r]` is rank `r`'s process, the only one that may send as `r`.
fn receive_from_peers(
    listener: &OwnedFd,
    rank: usize,
    pids: &[u32],
    timeout: Duration,
) -> Result<Vec<Option<OwnedFd>>> {
    let size = pids.len();
    let mut fds: Vec<Option<OwnedFd>> = (0..size).map(|_| None).collect();
    for _ in 1..size {
        let connection = match accept4(listener.as_raw_fd(), SockFlag::SOCK_CLOEXEC) {
            // SAFETY: accept4 returned a new descriptor that nobody else owns.
            Ok(raw) => unsafe { OwnedFd::from_raw_fd(raw) },
            Err(nix::errno::Errno::EAGAIN) => {
                let missing: Vec<String> = (0..size)
                    .filter(|&r| r != rank && fds[r].is_none())
                    .map(|r| r.to_string())
                    .collect();
                bail!(
                    "no descriptor from rank {} within {timeout:?}: did that rank stop before the exchange?",
                    missing.join(", ")
                );
            }
            Err(err) => return Err(err).context("accept"),
        };
        let creds = check_peer(
            &connection,
            "a process that connected to this rank's socket",
            pids,
        )?;
        set_timeout(&connection, timeout)?;
        let (sender, fd) = receive_one(&connection)?;
        ensure!(
            sender < size && sender != rank,
            "a descriptor claims to come from rank {sender}, which is not a peer of rank {rank} in a run of {size}"
        );
        ensure!(
            i64::from(pids[sender]) == i64::from(creds.pid()),
            "a descriptor claims to come from rank {sender} (process {}), but process {} sent it",
            pids[sender],
            creds.pid()
        );
        ensure!(
            fds[sender].is_none(),
            "rank {sender} sent its descriptor twice"
        );
        fds[sender] = Some(fd);
    }
    Ok(fds)
}

/// Reads one message and exactly one descriptor from `connection`.
fn receive_one(connection: &OwnedFd) -> Result<(usize, OwnedFd)> {
    let mut message = [0u8; MESSAGE_LEN + 1];
    let mut space = nix::cmsg_space!([RawFd; 1]);
    let (bytes, truncated, fds) = {
        let mut iov = [IoSliceMut::new(&mut message)];
        // MSG_CMSG_CLOEXEC: a received descriptor is not inherited by children.
        let received = recvmsg::<()>(
            connection.as_raw_fd(),
            &mut iov,
            Some(&mut space),
            MsgFlags::MSG_CMSG_CLOEXEC,
        )
        .context("recvmsg")?;
        let mut fds = Vec::new();
        for cmsg in received.cmsgs().context("reading the control messages")? {
            if let ControlMessageOwned::ScmRights(raw) = cmsg {
                // SAFETY: the kernel installed these descriptors for us; owning
                // them at once means they are closed on every error path.
                fds.extend(
                    raw.into_iter()
                        .map(|fd| unsafe { OwnedFd::from_raw_fd(fd) }),
                );
            }
        }
        (
            received.bytes,
            received.flags.contains(MsgFlags::MSG_CTRUNC),
            fds,
        )
    };
    let sender = decode_message(&message[..bytes])?;
    ensure!(
        !truncated && fds.len() == 1,
        "rank {sender} sent {} descriptors{}; expected exactly 1",
        fds.len(),
        if truncated { " (truncated)" } else { "" }
    );
    let fd = fds
        .into_iter()
        .next()
        .ok_or_else(|| anyhow!("no descriptor"))?;
    Ok((sender, fd))
}

/// The message that carries a descriptor: a tag and the sender's rank.
const MAGIC: &[u8; 4] = b"VMM4";
const MESSAGE_LEN: usize = 8;

pub fn encode_message(rank: usize) -> [u8; MESSAGE_LEN] {
    let mut message = [0u8; MESSAGE_LEN];
    message[..4].copy_from_slice(MAGIC);
    message[4..].copy_from_slice(&(rank as u32).to_le_bytes());
    message
}

pub fn decode_message(message: &[u8]) -> Result<usize> {
    ensure!(
        message.len() == MESSAGE_LEN && &message[..4] == MAGIC,
        "a message of {} bytes that is not a rank's descriptor message: something else connected to the socket",
        message.len()
    );
    Ok(decode_u32(&message[4..])? as usize)
}

fn decode_u32(bytes: &[u8]) -> Result<u32> {
    let bytes: [u8; 4] = bytes
        .try_into()
        .map_err(|_| anyhow!("expected 4 bytes, got {}", bytes.len()))?;
    Ok(u32::from_le_bytes(bytes))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs::Permissions;
    use std::io::{Read, Seek, Write};
    use std::os::fd::AsFd;
    use std::os::unix::fs::PermissionsExt;

    use common::testing::{dead_pid, stale_dir_name};

    /// This process's id: in these tests every "rank" is a thread of it.
    fn me() -> u32 {
        std::process::id()
    }

    fn file_with(text: &str) -> std::fs::File {
        let mut file = tempfile::tempfile().unwrap();
        file.write_all(text.as_bytes()).unwrap();
        file
    }

    fn read_all(fd: OwnedFd) -> String {
        let mut file = std::fs::File::from(fd);
        file.rewind().unwrap();
        let mut text = String::new();
        file.read_to_string(&mut text).unwrap();
        text
    }

    #[test]
    fn the_transport_follows_where_the_ranks_live() {
        assert_eq!(Transport::for_pids(&[7, 7, 7]), Transport::SharedTable);
        assert_eq!(Transport::for_pids(&[7]), Transport::SharedTable);
        assert_eq!(Transport::for_pids(&[7, 8]), Transport::UnixSocket);
        assert_eq!(Transport::for_pids(&[7, 7, 8]), Transport::UnixSocket);
    }

    #[test]
    fn the_socket_directory_is_0700_and_ours() {
        let base = tempfile::tempdir().unwrap();
        let dir = PrivateDir::create(base.path()).unwrap();
        let meta = std::fs::symlink_metadata(dir.path()).unwrap();
        assert!(meta.is_dir());
        assert_eq!(meta.mode() & 0o777, 0o700);
        assert_eq!(meta.uid(), effective_uid());
        assert!(dir
            .path()
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with("vmm-raw-"));
        let path = dir.path().to_path_buf();
        dir.remove().unwrap();
        assert!(!path.exists());
    }

    #[test]
    fn directories_others_can_reach_are_refused() {
        let base = tempfile::tempdir().unwrap();
        for mode in [0o755, 0o711, 0o770, 0o707, 0o701] {
            let dir = base.path().join(format!("open-{mode:o}"));
            std::fs::create_dir(&dir).unwrap();
            std::fs::set_permissions(&dir, Permissions::from_mode(mode)).unwrap();
            let err = check_private(&dir).unwrap_err().to_string();
            assert!(err.contains("it must be 0700"), "{mode:o}: {err}");
        }
        let private = base.path().join("private");
        std::fs::create_dir(&private).unwrap();
        std::fs::set_permissions(&private, Permissions::from_mode(0o700)).unwrap();
        check_private(&private).unwrap();
    }

    #[test]
    fn symlinks_and_files_are_refused() {
        let base = tempfile::tempdir().unwrap();
        let real = PrivateDir::create(base.path()).unwrap();
        let link = base.path().join("link");
        std::os::unix::fs::symlink(real.path(), &link).unwrap();
        let err = check_private(&link).unwrap_err().to_string();
        assert!(err.contains("not a directory"), "{err}");
        let file = base.path().join("file");
        std::fs::write(&file, b"x").unwrap();
        assert!(check_private(&file).is_err());
        assert!(check_private(&base.path().join("absent")).is_err());
    }

    #[test]
    fn a_directory_of_another_user_is_refused() {
        // Only root can make one; elsewhere the check is covered by the code path above.
        if effective_uid() != 0 {
            return;
        }
        let base = tempfile::tempdir().unwrap();
        let dir = base.path().join("theirs");
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, Permissions::from_mode(0o700)).unwrap();
        std::os::unix::fs::chown(&dir, Some(65534), None).unwrap();
        let err = check_private(&dir).unwrap_err().to_string();
        assert!(err.contains("belongs to uid 65534"), "{err}");
    }

    #[test]
    fn socket_paths_that_do_not_fit_say_how_to_fix_it() {
        let long = PathBuf::from(format!("/{}", "d".repeat(200)));
        let err = format!("{:#}", unix_address(&socket_path(&long, 3)).unwrap_err());
        assert!(err.contains("at most 107 bytes"), "{err}");
        assert!(err.contains("TMPDIR"), "{err}");
    }

    #[test]
    fn messages_carry_the_senders_rank() {
        assert_eq!(decode_message(&encode_message(5)).unwrap(), 5);
        assert!(decode_message(b"VMM4\x01\x00\x00").is_err());
        assert!(decode_message(b"HTTP\x01\x00\x00\x00").is_err());
    }

    #[test]
    fn a_descriptor_crosses_a_socket_and_reads_back() {
        // Both ends of the real code path, on two threads of this process.
        let dir = PrivateDir::create(&std::env::temp_dir()).unwrap();
        let path = socket_path(dir.path(), 1);
        let listener = listen_at(&path, 1, PEER_TIMEOUT).unwrap();
        let file = file_with("rank 0's anonymous file");
        let received = std::thread::scope(|scope| {
            let receiver =
                scope.spawn(|| receive_from_peers(&listener, 1, &[me(), me()], PEER_TIMEOUT));
            send_fd(&path, 0, (1, me()), file.as_fd()).unwrap();
            receiver.join().unwrap()
        })
        .unwrap();
        let mut received = received.into_iter();
        let from_0 = received.next().unwrap().expect("rank 0's descriptor");
        assert!(received.next().unwrap().is_none(), "nothing from self");
        // A new descriptor for the same open file, not the sender's number.
        assert_eq!(read_all(from_0), "rank 0's anonymous file");
        dir.remove().unwrap();
    }

    #[test]
    fn a_peer_that_never_connects_is_reported_not_waited_for() {
        let dir = PrivateDir::create(&std::env::temp_dir()).unwrap();
        let timeout = Duration::from_millis(200);
        let listener = listen_at(&socket_path(dir.path(), 0), 2, timeout).unwrap();
        let start = std::time::Instant::now();
        let err = receive_from_peers(&listener, 0, &[me(); 3], timeout)
            .err()
            .unwrap()
            .to_string();
        assert!(start.elapsed() < Duration::from_secs(5));
        assert!(
            err.contains("no descriptor from rank 1, 2 within 200ms"),
            "{err}"
        );
    }

    /// This process, as rank `sender`, sends a descriptor to rank 1 of a run
    /// whose ranks are the processes `pids`; returns what rank 1 received.
    fn send_to_rank_1(sender: usize, pids: &[u32]) -> Result<Vec<Option<OwnedFd>>> {
        let dir = PrivateDir::create(&std::env::temp_dir()).unwrap();
        let path = socket_path(dir.path(), 1);
        let listener = listen_at(&path, 1, PEER_TIMEOUT).unwrap();
        let file = file_with("x");
        std::thread::scope(|scope| {
            let receiver = scope.spawn(|| receive_from_peers(&listener, 1, pids, PEER_TIMEOUT));
            // Its own error, if any, is not what these tests look at.
            let _ = send_fd(&path, sender, (1, me()), file.as_fd());
            receiver.join().unwrap()
        })
    }

    #[test]
    fn a_sender_claiming_to_be_the_receiver_is_refused() {
        let err = send_to_rank_1(1, &[me(), me()]).err().unwrap().to_string();
        assert!(err.contains("not a peer of rank 1"), "{err}");
    }
    #[test]
    fn a_connection_without_a_descriptor_is_refused() {
        let dir = PrivateDir::create(&std::env::temp_dir()).unwrap();
        let path = socket_path(dir.path(), 1);
        let listener = listen_at(&path, 1, PEER_TIMEOUT).unwrap();
        let result = std::thread::scope(|scope| {
            let receiver =
                scope.spawn(|| receive_from_peers(&listener, 1, &[me(), me()], PEER_TIMEOUT));
            let socket = socket(
                AddressFamily::Unix,
                SockType::SeqPacket,
                SockFlag::SOCK_CLOEXEC,
                None,
            )
            .unwrap();
            connect(socket.as_raw_fd(), &UnixAddr::new(&path).unwrap()).unwrap();
            nix::sys::socket::send(socket.as_raw_fd(), &encode_message(0), MsgFlags::empty())
                .unwrap();
            receiver.join().unwrap()
        });
        let err = result.err().unwrap().to_string();
        assert!(err.contains("sent 0 descriptors"), "{err}");
    }

    #[test]
    fn a_process_that_is_not_one_of_the_ranks_is_refused() {
        // Same user, but not a process of this run: it gets nothing, and
        // what it sends is not taken.
        let ranks = [dead_pid(), dead_pid()];
        let err = send_to_rank_1(0, &ranks).err().unwrap().to_string();
        let expected = format!("is process {}, which is not one of this run's ranks", me());
        assert!(err.contains(&expected), "{err}");
    }
    #[test]
    fn a_rank_must_send_from_its_own_process() {
        // Rank 0 is another process; this one, rank 1, sends as rank 0.
        let other = dead_pid();
        let err = send_to_rank_1(0, &[other, me()]).err().unwrap().to_string();
        let expected = format!(
            "claims to come from rank 0 (process {other}), but process {} sent it",
            me()
        );
        assert!(err.contains(&expected), "{err}");
    }
    #[test]
    fn a_listener_that_is_not_the_peers_process_gets_nothing() {
        let dir = PrivateDir::create(&std::env::temp_dir()).unwrap();
        let path = socket_path(dir.path(), 1);
        let _listener = listen_at(&path, 1, PEER_TIMEOUT).unwrap();
        let file = file_with("x");
        let err = send_fd(&path, 0, (1, dead_pid()), file.as_fd())
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(&format!(
                "the listener of rank 1 is process {}, which is not one of this run's ranks",
                me()
            )),
            "{err}"
        );
    }

    #[test]
    fn a_socket_directory_left_by_a_killed_rank_0_is_removed() {
        let base = tempfile::tempdir().unwrap();
        let stale = base.path().join(stale_dir_name(DIR_PREFIX));
        std::fs::create_dir(&stale).unwrap();
        std::fs::write(stale.join("rank-0.sock"), b"").unwrap();
        let mine = cleanup::owner_prefix(DIR_PREFIX);
        let live = base.path().join(format!("{mine}XyZ789"));
        std::fs::create_dir(&live).unwrap();
        let dir = PrivateDir::create(base.path()).unwrap();
        assert!(!stale.exists(), "the stale directory is still there");
        assert!(live.exists(), "a live run's directory was removed");
        let name = dir.path().file_name().unwrap().to_string_lossy();
        assert!(name.starts_with(&mine), "{name}");
    }
}
