//! Ctrl-C and `kill`: stop at once, tidy up, and say which ranks stopped.
//!
//! Left alone, SIGINT and SIGTERM end the process on the spot, silently, and
//! leave behind what a rank made (a socket or build directory, see
//! [`cleanup`](crate::cleanup)). A signal handler could do little about it:
//! it may only call async-signal-safe functions, and the rank threads may be
//! blocked inside NCCL or CUDA, where nothing can reach them. So the launcher
//! blocks both signals in every thread instead (a thread inherits the mask of
//! the thread that creates it, so the rank threads and the threads NCCL, CUDA
//! and MPI start block them too), and one thread of its own waits for them
//! with `sigwait`. That thread runs ordinary code: when a signal comes it
//! prints which ranks it stops, removes the registered directories and leaves
//! with `_exit(128 + signal)`, the status a shell shows for a process ended by
//! that signal. Child processes (nvcc) start with the default mask: Rust's
//! `Command` resets it.
//!
//! In MPI mode, Ctrl-C reaches mpirun (each rank has a process group of its
//! own), which stops the ranks with SIGTERM.

use std::io::Write;
use std::sync::Mutex;

/// `[rank r/n] `, one per rank of this process, once the launcher knows them.
static RANKS: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Blocks SIGINT and SIGTERM and starts the thread that waits for them. Call
/// it on the main thread before any other thread starts. If the thread cannot
/// start, the signals keep their default action.
pub(crate) fn stop_on_signals() {
    // SAFETY: sigemptyset and sigaddset fill a local set; pthread_sigmask
    // changes only this thread's mask.
    let signals = unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGINT);
        libc::sigaddset(&mut set, libc::SIGTERM);
        if libc::pthread_sigmask(libc::SIG_BLOCK, &set, std::ptr::null_mut()) != 0 {
            return;
        }
        set
    };
    let waiter = std::thread::Builder::new()
        .name("signals".into())
        .spawn(move || loop {
            let mut signal = 0;
            // SAFETY: waits for one of the signals in the set, blocked in every thread.
            if unsafe { libc::sigwait(&signals, &mut signal) } == 0 {
                stop(signal);
            }
        });
    if waiter.is_err() {
        // SAFETY: as above; restores the default for this thread.
        unsafe { libc::pthread_sigmask(libc::SIG_UNBLOCK, &signals, std::ptr::null_mut()) };
    }
}

/// The ranks of this process, as `[rank r/n] ` prefixes, for the message.
pub(crate) fn set_ranks(prefixes: Vec<String>) {
    *RANKS.lock().unwrap_or_else(|p| p.into_inner()) = prefixes;
}

fn stop(signal: i32) -> ! {
    let name = match signal {
        libc::SIGINT => "SIGINT (Ctrl-C)",
        libc::SIGTERM => "SIGTERM",
        _ => "a signal",
    };
    let ranks = RANKS.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let mut text = String::new();
    if ranks.is_empty() {
        text.push_str(&format!("stopped by {name}\n"));
    }
    for prefix in ranks {
        text.push_str(&format!("{prefix}stopped by {name}\n"));
    }
    let _ = std::io::stderr().write_all(text.as_bytes());
    crate::error::flush_and_exit(128u8.saturating_add(signal as u8))
}
