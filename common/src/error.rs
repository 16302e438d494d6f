//! Exit codes and the two error types the launcher treats specially.

use std::fmt;

/// Every rank verified its result.
pub const EXIT_OK: u8 = 0;
/// A rank failed: a wrong result, an NCCL or CUDA error, a panic.
pub const EXIT_FAILED: u8 = 1;
/// This system cannot run the lesson (no GPU, too few GPUs, NCCL missing or too
/// old, a feature the hardware lacks). The message says why and how to fix it.
pub const EXIT_CANNOT_RUN: u8 = 2;

/// "This machine cannot run the lesson", with the reason and the fix.
///
/// Return it (through `anyhow`) from anywhere in a lesson; the run then exits
/// with [`EXIT_CANNOT_RUN`] and prints the fix under the error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CannotRun {
    pub reason: String,
    pub fix: String,
}

impl CannotRun {
    pub fn new(reason: impl Into<String>, fix: impl Into<String>) -> Self {
        Self {
            reason: reason.into(),
            fix: fix.into(),
        }
    }
}

impl fmt::Display for CannotRun {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.reason)
    }
}

impl std::error::Error for CannotRun {}

/// This rank stopped because another rank failed. The launcher prints nothing
/// for it: the rank that failed prints its own error.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PeerFailed {
    /// The ranks that failed, when known.
    pub ranks: Vec<usize>,
}

impl fmt::Display for PeerFailed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.ranks.as_slice() {
            [] => f.write_str("stopped because another rank failed"),
            ranks => {
                let list: Vec<String> = ranks.iter().map(usize::to_string).collect();
                write!(f, "stopped because rank {} failed", list.join(", "))
            }
        }
    }
}

impl std::error::Error for PeerFailed {}

/// The exit code an error stands for: [`EXIT_CANNOT_RUN`] if a [`CannotRun`]
/// is anywhere in its chain, [`EXIT_FAILED`] otherwise.
pub fn exit_code(err: &anyhow::Error) -> u8 {
    if find_cannot_run(err).is_some() {
        EXIT_CANNOT_RUN
    } else {
        EXIT_FAILED
    }
}

pub(crate) fn find_cannot_run(err: &anyhow::Error) -> Option<&CannotRun> {
    err.chain().find_map(|e| e.downcast_ref::<CannotRun>())
}

/// `error: <context chain>` and, for a [`CannotRun`], the fix on the next line.
pub(crate) fn render(prefix: &str, err: &anyhow::Error) -> String {
    let mut text = format!("{prefix}error: {err:#}");
    if let Some(cannot) = find_cannot_run(err) {
        text.push_str(&fix_lines(&cannot.fix, "  "));
    }
    text
}

/// `\n<indent>fix: first line` and the further lines aligned under it.
pub(crate) fn fix_lines(fix: &str, indent: &str) -> String {
    let mut text = String::new();
    for (i, line) in fix.lines().enumerate() {
        text.push('\n');
        text.push_str(indent);
        text.push_str(if i == 0 { "fix: " } else { "     " });
        text.push_str(line);
    }
    text
}

pub(crate) fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = panic.downcast_ref::<&str>() {
        s.to_string()
    } else if let Some(s) = panic.downcast_ref::<String>() {
        s.clone()
    } else {
        "(no message)".into()
    }
}

/// Leaves the process at once with `code`, while other threads may still be
/// inside NCCL or CUDA: removes the directories the run registered (see
/// [`cleanup`](crate::cleanup)), flushes what we printed, then `_exit`.
///
/// Not `std::process::exit`: that runs the C exit handlers and static
/// destructors (the CUDA runtime's, NCCL's, MPI's) under the threads still
/// using them, which can crash or hang the exit. `_exit` ends the process
/// without them; the kernel then releases its memory, files and GPU contexts.
pub(crate) fn flush_and_exit(code: u8) -> ! {
    use std::io::Write;
    crate::cleanup::remove_registered();
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    // SAFETY: _exit has no preconditions and does not return.
    unsafe { libc::_exit(code.into()) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::Context;

    #[test]
    fn cannot_run_anywhere_in_the_chain_means_exit_2() {
        let err = anyhow::Error::new(CannotRun::new("no GPU", "use a GPU"))
            .context("Step 1: bind the GPU");
        assert_eq!(exit_code(&err), EXIT_CANNOT_RUN);
        let plain = anyhow::anyhow!("wrong sum").context("Step 6: verify");
        assert_eq!(exit_code(&plain), EXIT_FAILED);
    }

    #[test]
    fn render_shows_the_context_chain_and_the_fix() {
        let err: anyhow::Result<()> = Err(CannotRun::new(
            "only 2 GPUs are visible",
            "set NTHREADS=2\nor make more GPUs visible",
        )
        .into());
        let err = err.context("launch").unwrap_err();
        assert_eq!(
            render("[rank 0/4] ", &err),
            "[rank 0/4] error: launch: only 2 GPUs are visible\n  fix: set NTHREADS=2\n       or make more GPUs visible"
        );
    }
}
