//! Passing file descriptors between ranks: `SCM_RIGHTS` over Unix-domain
//! sockets in a directory only this user can enter (README, Step 3, says why).
//!
//! [`FdChannel::open`]: rank 0 makes a fresh directory in `$TMPDIR` (or
//! `/tmp`), mode 0700 from the moment it exists, named after this host and
//! process (`vmm-raw-<host>-<pid>-XXXXXX`), and broadcasts its path; every
//! rank listens on `rank-<r>.sock` in it. [`FdChannel::exchange`]: each rank
//! sends its rank, with its descriptor attached, to every peer, while a
//! second thread accepts the peers' connections, so no order of sends can
//! deadlock. Both ends check `SO_PEERCRED`: the same user, and the very
//! process of the rank the other end claims to be. Threads of one process
//! take the same path. Rank 0 removes the directory at the end, the launcher
//! before a forced exit, and the next run's rank 0 after a `SIGKILL`.

use std::ffi::OsString;
use std::io::{IoSlice, IoSliceMut};
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{anyhow, bail, ensure, Context, Result};
use common::cleanup::{self, OwnedDir};
use common::RankContext;
use nix::sys::socket::{
    accept4, connect, getsockopt, listen, recvmsg, sendmsg, setsockopt, shutdown, socket, sockopt,
    AddressFamily, Backlog, ControlMessage, ControlMessageOwned, MsgFlags, Shutdown, SockFlag,
    SockType, UnixAddr,
};
use nix::sys::time::{TimeVal, TimeValLike};

use crate::all_gather;

/// How long a rank waits for a peer's connection or message before giving up.
pub const PEER_TIMEOUT: Duration = Duration::from_secs(60);

/// The start of a socket directory's name.
pub const DIR_PREFIX: &str = "vmm-raw-";

/// Every rank listening in the run's private socket directory.
pub struct FdChannel {
    rank: usize,
    /// `pids[r]`: rank `r`'s process, the only one that may speak for it.
    pids: Vec<u32>,
    dir: PathBuf,
    /// Rank 0's: the directory itself, removed when dropped.
    owned: Option<OwnedDir>,
    listener: OwnedFd,
}

impl FdChannel {
    /// Collective: rank 0 makes the directory (after removing those that
    /// killed runs left), every rank listens in it.
    pub fn open(ctx: &RankContext) -> Result<Self> {
        let pids = all_gather(ctx, std::process::id().to_string())?
            .iter()
            .map(|pid| pid.parse().context("a rank sent a malformed process id"))
            .collect::<Result<Vec<u32>>>()?;
        let owned = if ctx.is_root() {
            let base = std::env::temp_dir();
            cleanup::remove_stale(&base, DIR_PREFIX);
            let dir = OwnedDir::create(&base, DIR_PREFIX)
                .with_context(|| format!("mkdir of a private directory in {}", base.display()))?;
            Some(dir)
        } else {
            None
        };
        let path = owned
            .as_ref()
            .map(|d| d.path().as_os_str().as_bytes().to_vec());
        let dir = PathBuf::from(OsString::from_vec(
            ctx.broadcast_vec(path.unwrap_or_default())?,
        ));
        let listener = listen_at(&socket_path(&dir, ctx.rank()), ctx.size(), PEER_TIMEOUT)?;
        // Every rank listens before anyone connects.
        ctx.barrier()?;
        Ok(Self {
            rank: ctx.rank(),
            pids,
            dir,
            owned,
            listener,
        })
    }

    /// Collective: sends `mine` to every peer; returns each peer's descriptor
    /// (`None` at this rank's index). Then rank 0 removes the directory.
    pub fn exchange(self, ctx: &RankContext, mine: BorrowedFd<'_>) -> Result<Vec<Option<OwnedFd>>> {
        let (rank, size, pids) = (self.rank, self.pids.len(), &self.pids);
        let received = std::thread::scope(|scope| {
            let receiver =
                scope.spawn(|| receive_from_peers(&self.listener, rank, pids, PEER_TIMEOUT));
            let sent = (1..size)
                .map(|step| (rank + step) % size)
                .try_for_each(|peer| {
                    send_fd(
                        &socket_path(&self.dir, peer),
                        rank,
                        (peer, pids[peer]),
                        mine,
                    )
                });
            if sent.is_err() {
                // Wakes our receiver from accept(): this rank is giving up.
                let _ = shutdown(self.listener.as_raw_fd(), Shutdown::Both);
            }
            let received = receiver
                .join()
                .map_err(|_| anyhow!("the thread receiving descriptors panicked"))?;
            sent?;
            received
        })?;
        // Everyone has everything: the sockets and their directory can go.
        ctx.barrier()?;
        if let Some(dir) = self.owned {
            dir.remove()
                .with_context(|| format!("removing {}", self.dir.display()))?;
        }
        Ok(received)
    }
}

fn socket_path(dir: &Path, rank: usize) -> PathBuf {
    dir.join(format!("rank-{rank}.sock"))
}

/// The process at the other end of `socket` is this user's and one of `pids`;
/// returns its pid. Another process of yours that found the socket gets nothing.
fn check_peer(socket: &OwnedFd, who: &str, pids: &[u32]) -> Result<u32> {
    let creds = getsockopt(socket, sockopt::PeerCredentials)
        .with_context(|| format!("SO_PEERCRED of {who}"))?;
    let me = common::unix::effective_uid();
    ensure!(
        creds.uid() == me,
        "{who} is process {} of uid {}, not of this user (uid {me}): refusing to exchange GPU memory with it",
        creds.pid(),
        creds.uid()
    );
    let pid = u32::try_from(creds.pid()).unwrap_or(0);
    ensure!(
        pids.contains(&pid),
        "{who} is process {pid}, which is not one of this run's ranks (processes {pids:?}): refusing to exchange GPU memory with it"
    );
    Ok(pid)
}

/// A `SOCK_SEQPACKET` socket listening at `path`: connection-oriented (so
/// `SO_PEERCRED` works) and message-preserving (one message, one descriptor).
fn listen_at(path: &Path, peers: usize, timeout: Duration) -> Result<OwnedFd> {
    let listener = seqpacket_socket()?;
    nix::sys::socket::bind(listener.as_raw_fd(), &unix_address(path)?)
        .with_context(|| format!("bind {}", path.display()))?;
    let backlog =
        Backlog::new(i32::try_from(peers).unwrap_or(i32::MAX)).unwrap_or(Backlog::MAXCONN);
    listen(&listener, backlog).with_context(|| format!("listen on {}", path.display()))?;
    // accept() honours SO_RCVTIMEO on Linux: a peer that never comes is an error, not a hang.
    set_timeout(&listener, timeout)?;
    Ok(listener)
}

fn seqpacket_socket() -> Result<OwnedFd> {
    socket(
        AddressFamily::Unix,
        SockType::SeqPacket,
        SockFlag::SOCK_CLOEXEC,
        None,
    )
    .context("socket(AF_UNIX, SOCK_SEQPACKET)")
}

fn unix_address(path: &Path) -> Result<UnixAddr> {
    UnixAddr::new(path).with_context(|| {
        format!(
            "{} does not fit in a Unix socket address (at most 107 bytes): set TMPDIR to a shorter directory",
            path.display()
        )
    })
}

fn set_timeout(socket: &OwnedFd, timeout: Duration) -> Result<()> {
    let micros = i64::try_from(timeout.as_micros()).unwrap_or(i64::MAX);
    setsockopt(
        socket,
        sockopt::ReceiveTimeout,
        &TimeVal::microseconds(micros),
    )
    .context("SO_RCVTIMEO")
}

/// Connects to rank `peer`'s socket at `path` and, if process `peer_pid`
/// listens there, sends our rank with `fd` attached.
fn send_fd(
    path: &Path,
    rank: usize,
    (peer, peer_pid): (usize, u32),
    fd: BorrowedFd<'_>,
) -> Result<()> {
    let socket = seqpacket_socket()?;
    connect(socket.as_raw_fd(), &unix_address(path)?)
        .with_context(|| format!("connect to rank {peer} at {}", path.display()))?;
    check_peer(
        &socket,
        &format!("the listener of rank {peer}"),
        &[peer_pid],
    )?;
    let message = (rank as u32).to_le_bytes();
    sendmsg::<()>(
        socket.as_raw_fd(),
        &[IoSlice::new(&message)],
        &[ControlMessage::ScmRights(&[fd.as_raw_fd()])],
        MsgFlags::empty(),
        None,
    )
    .with_context(|| format!("sendmsg of the descriptor to rank {peer}"))?;
    // Closing our end is fine: the message, descriptor included, waits in the
    // peer's queue until it is read.
    Ok(())
}

/// Accepts one connection from every peer and takes the descriptor each sends.
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
                let missing: Vec<usize> = (0..size)
                    .filter(|&r| r != rank && fds[r].is_none())
                    .collect();
                bail!("no descriptor from rank {missing:?} within {timeout:?}: did that rank stop before the exchange?");
            }
            Err(err) => return Err(err).context("accept"),
        };
        let pid = check_peer(
            &connection,
            "a process that connected to this rank's socket",
            pids,
        )?;
        let (sender, fd) = receive_one(&connection)?;
        ensure!(
            sender < size && sender != rank && fds[sender].is_none(),
            "a descriptor claims to come from rank {sender}, which is not a peer of rank {rank} still to be heard from"
        );
        ensure!(
            pids[sender] == pid,
            "a descriptor claims to come from rank {sender} (process {}), but process {pid} sent it",
            pids[sender]
        );
        fds[sender] = Some(fd);
    }
    Ok(fds)
}

/// Reads one message, a rank, and exactly one descriptor from `connection`.
fn receive_one(connection: &OwnedFd) -> Result<(usize, OwnedFd)> {
    let mut message = [0u8; 5];
    let mut space = nix::cmsg_space!([RawFd; 1]);
    let (bytes, truncated, mut fds) = {
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
                // SAFETY: the kernel installed these for us; owned at once,
                // they are closed on every error path.
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
    let sender: [u8; 4] = message[..bytes].try_into().map_err(|_| {
        anyhow!("a message of {bytes} bytes is not a rank: something else connected")
    })?;
    let sender = u32::from_le_bytes(sender) as usize;
    match (truncated, fds.pop(), fds.is_empty()) {
        (false, Some(fd), true) => Ok((sender, fd)),
        (_, fd, _) => bail!(
            "rank {sender} sent {} descriptors; expected exactly 1",
            fds.len() + usize::from(fd.is_some())
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Seek, Write};
    use std::os::fd::AsFd;

    use testkit::{dead_pid, stale_dir_name};

    /// This process: in most of these tests every "rank" is a thread of it.
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
        let mut text = String::new();
        file.rewind().unwrap();
        file.read_to_string(&mut text).unwrap();
        text
    }

    fn assert_has(err: impl std::fmt::Display, text: &str) {
        let err = format!("{err:#}");
        assert!(err.contains(text), "no {text:?} in {err:?}");
    }

    fn private_dir() -> OwnedDir {
        OwnedDir::create(&std::env::temp_dir(), DIR_PREFIX).unwrap()
    }

    /// Rank `sender` (this process) sends a descriptor of a file holding
    /// `text` to rank 1 of a run whose ranks are `pids`; returns what rank 1 got.
    fn send_to_rank_1(sender: usize, pids: &[u32], text: &str) -> Result<Vec<Option<OwnedFd>>> {
        let dir = private_dir();
        let path = socket_path(dir.path(), 1);
        let listener = listen_at(&path, 1, PEER_TIMEOUT).unwrap();
        let file = file_with(text);
        std::thread::scope(|scope| {
            let receiver = scope.spawn(|| receive_from_peers(&listener, 1, pids, PEER_TIMEOUT));
            // Its own error, if any, is not what these tests look at.
            let _ = send_fd(&path, sender, (1, me()), file.as_fd());
            receiver.join().unwrap()
        })
    }

    #[test]
    fn only_the_runs_processes_may_send_and_only_as_themselves() {
        let refused = |sender, pids: &[u32]| send_to_rank_1(sender, pids, "x").err().unwrap();
        // Rank 1 is this process; a message from it that claims rank 1 is not a peer's.
        assert_has(refused(1, &[me(), me()]), "not a peer of rank 1");
        // SO_PEERCRED: the same user, but not a process of this run.
        let not_ours = format!("is process {}, which is not one of this run's ranks", me());
        assert_has(refused(0, &[dead_pid(), dead_pid()]), &not_ours);
        // A process of this run, but not rank 0's.
        let other = dead_pid();
        let impostor = format!(
            "from rank 0 (process {other}), but process {} sent it",
            me()
        );
        assert_has(refused(0, &[other, me()]), &impostor);
    }

    #[test]
    fn a_listener_that_is_not_the_peers_process_gets_nothing() {
        let dir = private_dir();
        let path = socket_path(dir.path(), 1);
        let _listener = listen_at(&path, 1, PEER_TIMEOUT).unwrap();
        let file = file_with("x");
        let err = send_fd(&path, 0, (1, dead_pid()), file.as_fd()).unwrap_err();
        assert_has(
            err,
            &format!("the listener of rank 1 is process {}, which is not", me()),
        );
    }

    #[test]
    fn a_connection_without_a_descriptor_is_refused() {
        let dir = private_dir();
        let path = socket_path(dir.path(), 1);
        let listener = listen_at(&path, 1, PEER_TIMEOUT).unwrap();
        let result = std::thread::scope(|scope| {
            let receiver =
                scope.spawn(|| receive_from_peers(&listener, 1, &[me(), me()], PEER_TIMEOUT));
            let socket = seqpacket_socket().unwrap();
            connect(socket.as_raw_fd(), &unix_address(&path).unwrap()).unwrap();
            nix::sys::socket::send(socket.as_raw_fd(), &0u32.to_le_bytes(), MsgFlags::empty())
                .unwrap();
            receiver.join().unwrap()
        });
        assert_has(result.err().unwrap(), "sent 0 descriptors");
    }

    #[test]
    fn a_peer_that_never_connects_is_reported_not_waited_for() {
        let dir = private_dir();
        let timeout = Duration::from_millis(200);
        let listener = listen_at(&socket_path(dir.path(), 0), 2, timeout).unwrap();
        let err = receive_from_peers(&listener, 0, &[me(); 3], timeout)
            .err()
            .unwrap();
        assert_has(err, "no descriptor from rank [1, 2] within 200ms");
    }

    #[test]
    fn socket_paths_that_do_not_fit_say_how_to_fix_it() {
        let long = PathBuf::from(format!("/{}", "d".repeat(200)));
        let err = unix_address(&socket_path(&long, 3)).unwrap_err();
        assert_has(err, "at most 107 bytes): set TMPDIR");
    }

    #[test]
    fn a_socket_directory_left_by_a_killed_rank_0_is_removed() {
        // What FdChannel::open does on rank 0 before it makes its own directory.
        let base = tempfile::tempdir().unwrap();
        let stale = base.path().join(stale_dir_name(DIR_PREFIX));
        std::fs::create_dir(&stale).unwrap();
        std::fs::write(stale.join("rank-0.sock"), b"").unwrap();
        let live = OwnedDir::create(base.path(), DIR_PREFIX).unwrap();
        let removed = cleanup::remove_stale(base.path(), DIR_PREFIX);
        assert_eq!(removed, std::slice::from_ref(&stale));
        assert!(!stale.exists() && live.path().exists());
    }

    /// Set for the child that [`a_descriptor_crosses_into_another_process`] starts.
    const CHILD: &str = "VMM_RAW_TEST_SEND_TO";

    #[test]
    fn a_descriptor_crosses_into_another_process() {
        // This test binary, started again, sends as rank 0 of a run whose
        // rank 1 is this process: real SCM_RIGHTS and SO_PEERCRED between two pids.
        let dir = private_dir();
        let path = socket_path(dir.path(), 1);
        let listener = listen_at(&path, 1, PEER_TIMEOUT).unwrap();
        let mut child = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "--exact",
                "fd_channel::tests::child_sends_its_file",
                "--include-ignored",
                "--quiet",
            ])
            .env(CHILD, format!("{}:{}", path.display(), me()))
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let received = receive_from_peers(&listener, 1, &[child.id(), me()], PEER_TIMEOUT);
        assert!(child.wait().unwrap().success());
        let from_0 = received
            .unwrap()
            .swap_remove(0)
            .expect("the child's descriptor");
        assert_eq!(
            read_all(from_0),
            format!("the file of process {}", child.id())
        );
    }

    #[test]
    #[ignore = "the child process of a_descriptor_crosses_into_another_process"]
    fn child_sends_its_file() {
        let Some((path, parent)) = std::env::var(CHILD).ok().and_then(|v| {
            let (path, pid) = v.rsplit_once(':')?;
            Some((PathBuf::from(path), pid.parse().ok()?))
        }) else {
            return;
        };
        let file = file_with(&format!("the file of process {}", me()));
        send_fd(&path, 0, (1, parent), file.as_fd()).unwrap();
    }
}
