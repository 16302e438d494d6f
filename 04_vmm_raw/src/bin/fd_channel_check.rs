//! `04_fd_channel_check`: lesson 04's file-descriptor passing, without a GPU.
//!
//! Every rank opens an anonymous temporary file (it has no name anywhere, so
//! the only way to reach it is through the descriptor), writes its own
//! contents, and passes the descriptor to every peer exactly as lesson 04
//! passes its GPU memory (`vmm_raw::fd_channel`). Every rank then reads every
//! peer's file through the descriptor it received and checks the bytes.
//!
//! Use it to find out whether a machine or cluster allows the passing before
//! any GPU is involved (the private socket directory, SO_PEERCRED, SCM_RIGHTS
//! between the processes mpirun starts on one node). The tests run it too.
//!
//! ```text
//! NTHREADS=3 cargo run --bin 04_fd_channel_check                           # threads: shared fd table
//! NTHREADS=3 cargo run --bin 04_fd_channel_check -- --transport unix-socket
//! cargo build --features mpi && mpirun -np 2 target/debug/04_fd_channel_check
//! ```

use std::io::Write;
use std::os::fd::AsFd;
use std::os::unix::fs::FileExt;
use std::process::ExitCode;

use anyhow::{ensure, Context, Result};
use common::{Lesson, Needs, RankContext};
use vmm_raw::fd_channel::{exchange_via, Transport};

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Choice {
    /// The one lesson 04 would use: shared-table for threads of one process,
    /// unix-socket across processes.
    Auto,
    /// Share descriptor numbers and dup them (ranks in one process only).
    SharedTable,
    /// SCM_RIGHTS over Unix-domain sockets in a private directory.
    UnixSocket,
}

#[derive(clap::Args, Debug)]
struct CheckArgs {
    /// How the descriptors travel.
    #[arg(long, value_enum, default_value_t = Choice::Auto)]
    transport: Choice,
}

const CHECK: Lesson = Lesson {
    name: "04_fd_channel_check",
    about: "Passes file descriptors of anonymous files between the ranks as lesson 04 passes GPU memory; no GPU needed",
    needs: Needs::Nothing,
};

fn main() -> ExitCode {
    common::run(&CHECK, check)
}

/// What rank `rank`'s file holds: its rank in words, then bytes that differ
/// per rank and per position.
fn contents(rank: usize) -> Vec<u8> {
    let mut bytes = format!("anonymous file of rank {rank}\n").into_bytes();
    bytes.extend((0..4096usize).map(|i| (rank * 131 + i * 7) as u8));
    bytes
}

fn check(ctx: &RankContext, args: &CheckArgs) -> Result<()> {
    let rank = ctx.rank();
    let forced = match args.transport {
        Choice::Auto => None,
        Choice::SharedTable => Some(Transport::SharedTable),
        Choice::UnixSocket => Some(Transport::UnixSocket),
    };

    let mut file = tempfile::tempfile().context("creating an anonymous temporary file")?;
    file.write_all(&contents(rank))
        .and_then(|()| file.flush())
        .context("writing the file")?;

    let received = exchange_via(ctx, file.as_fd(), forced)?;
    ctx.println_root(format!(
        "fd channel check: {} rank{} pass descriptors of anonymous files, transport {}",
        ctx.size(),
        if ctx.size() == 1 { "" } else { "s" },
        received.transport.name()
    ));

    let mut lines = Vec::new();
    let verify = || -> Result<()> {
        for (peer, fd) in received.fds.into_iter().enumerate() {
            let Some(fd) = fd else { continue };
            let theirs = std::fs::File::from(fd);
            let expected = contents(peer);
            let mut got = vec![0u8; expected.len()];
            // pread: the descriptor shares its file offset with the sender's,
            // so read at an explicit offset instead of moving it.
            theirs
                .read_exact_at(&mut got, 0)
                .with_context(|| format!("reading rank {peer}'s file"))?;
            let first_difference = got.iter().zip(&expected).position(|(a, b)| a != b);
            ensure!(
                first_difference.is_none(),
                "rank {peer}'s file, read by rank {rank}: byte {} differs",
                first_difference.unwrap_or(0)
            );
            lines.push(format!(
                "  Rank {rank} read rank {peer}'s file through the descriptor it received: {} bytes (verified)",
                got.len()
            ));
        }
        Ok(())
    };
    ctx.all_ok(verify())?;
    let text = if lines.is_empty() {
        format!("  Rank {rank} has no peer")
    } else {
        lines.join("\n")
    };
    ctx.println_ordered(text)?;
    ctx.println_root("fd channel check: every rank read every peer's file");
    Ok(())
}
