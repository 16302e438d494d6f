//! Lesson 04's tests. CPU tests run everywhere; the GPU tests are ignored by
//! default: `cargo test -- --include-ignored` on a machine with 2 GPUs
//! (`GPU_TEST_RANKS=4` for 4). In an MPI build (`--features mpi`) the GPU
//! tests launch the lesson with mpirun, so the ranks are processes that
//! really import each other's memory.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use common::testing::{describe, gpu_ranks, keep_multicast_off, mpirun, run_with_timeout};

common::lesson_tests!("04_vmm_raw");

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The lesson binary run directly (no mpirun, no NTHREADS): for usage errors,
/// which clap reports before any rank starts.
fn run_directly(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(&lesson().binary);
    cmd.args(args)
        .env_remove("NTHREADS")
        .env_remove("VMM_SIZE_BYTES");
    for (key, value) in env {
        cmd.env(key, value);
    }
    run_with_timeout(&mut cmd, Duration::from_secs(60))
}

#[test]
fn readme_explains_every_driver_call_the_lesson_makes() {
    let lesson = lesson();
    let readme = lesson.readme();
    let guards = std::fs::read_to_string(lesson.dir.join("src/vmm.rs")).expect("src/vmm.rs");
    let mut calls = BTreeSet::new();
    for source in [lesson.source(), guards] {
        for (at, _) in source.match_indices("sys::cu") {
            let name: String = source[at + "sys::".len()..]
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
                .collect();
            calls.insert(name.trim_end_matches("_v2").to_string());
        }
    }
    assert!(calls.len() >= 15, "found only {calls:?}");
    let missing: Vec<&String> = calls
        .iter()
        .filter(|c| !readme.contains(c.as_str()))
        .collect();
    assert!(missing.is_empty(), "README never mentions {missing:?}");
    assert!(!readme.contains("cuMulticastCreate("), "no multicast here");
}

#[test]
fn readme_has_a_transcript_for_two_ranks() {
    let readme = lesson().readme();
    let transcript = common::testing::readme_transcript(&readme, 2).expect("transcript block");
    assert_eq!(transcript[0], "CUDA driver [..]");
    assert_eq!(transcript[1], "Launch: 2 ranks, one thread per GPU");
    assert_eq!(
        transcript.last().map(String::as_str),
        Some("All resources cleaned up successfully")
    );
}

#[test]
fn a_zero_size_is_a_usage_error() {
    let out = run_directly(&["--size-bytes", "0"], &[]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    assert!(
        text(&out.stderr).contains("at least 1 byte"),
        "{}",
        describe(&out)
    );
}

#[test]
fn a_size_that_is_not_a_number_is_a_usage_error_also_from_the_environment() {
    let out = run_directly(&[], &[("VMM_SIZE_BYTES", "2MiB")]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    assert!(
        text(&out.stderr).contains("'2MiB' is not a whole number of bytes"),
        "{}",
        describe(&out)
    );
    let out = run_directly(&["--size-bytes", "18446744073709551616"], &[]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    assert!(
        text(&out.stderr).contains("fits in 64 bits"),
        "{}",
        describe(&out)
    );
}

#[test]
fn help_documents_the_size_and_its_variable() {
    let out = run_directly(&["--help"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let help = text(&out.stdout);
    assert!(help.contains("--size-bytes <BYTES>"), "{help}");
    assert!(help.contains("[env: VMM_SIZE_BYTES"), "{help}");
    assert!(help.contains("[default: 2097152]"), "{help}");
}

#[test]
#[ignore = "needs 2 GPUs"]
fn every_rank_reads_and_writes_every_peer_in_both_directions() {
    let ranks = gpu_ranks();
    let out = lesson().run(ranks, &[], Duration::from_secs(300));
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let stdout = text(&out.stdout);
    for rank in 0..ranks {
        for peer in (0..ranks).filter(|&p| p != rank) {
            for line in [
                format!("  Rank {rank} read rank {peer}'s buffer through its mapping: "),
                format!("  Rank {rank} found what rank {peer} wrote through its mapping: "),
            ] {
                assert!(
                    stdout
                        .lines()
                        .any(|l| l.starts_with(&line) && l.ends_with("(verified)")),
                    "missing {line:?}\n{}",
                    describe(&out)
                );
            }
        }
    }
}

#[test]
#[ignore = "needs 2 GPUs"]
fn a_larger_buffer_verifies_too() {
    // 256 MiB + 1 byte: rounded up, and more words per half than the
    // pattern's 24-bit index counts, so the index wraps.
    let out = lesson().run(
        gpu_ranks(),
        &["--size-bytes", "268435457"],
        Duration::from_secs(300),
    );
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert!(
        text(&out.stdout).contains("268435457 requested, rounded up"),
        "{}",
        describe(&out)
    );
}

#[test]
#[ignore = "needs 2 GPUs"]
fn a_size_whose_rounding_overflows_exits_2() {
    let out = lesson().run(
        gpu_ranks(),
        &["--size-bytes", "18446744073709551615"],
        Duration::from_secs(120),
    );
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    assert!(
        text(&out.stderr).contains("does not fit in 64 bits"),
        "{}",
        describe(&out)
    );
    assert!(text(&out.stderr).contains("fix: "), "{}", describe(&out));
}

#[test]
#[ignore = "needs 2 GPUs"]
fn a_size_larger_than_the_gpu_exits_2() {
    let out = lesson().run(
        gpu_ranks(),
        &["--size-bytes", "1125899906842624"],
        Duration::from_secs(120),
    );
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    assert!(
        text(&out.stderr).contains("bytes of memory"),
        "{}",
        describe(&out)
    );
}

/// `compute-sanitizer` (or `$COMPUTE_SANITIZER`) around the lesson: under
/// mpirun in an MPI build, so each process is checked.
fn sanitized(ranks: usize, tool: &str) -> Output {
    let sanitizer =
        std::env::var("COMPUTE_SANITIZER").unwrap_or_else(|_| "compute-sanitizer".into());
    let lesson = lesson();
    let mut cmd = if cfg!(feature = "mpi") {
        mpirun(ranks, Path::new(&sanitizer))
    } else {
        let mut cmd = Command::new(&sanitizer);
        cmd.env("NTHREADS", ranks.to_string());
        keep_multicast_off(&mut cmd);
        cmd
    };
    cmd.args(["--tool", tool, "--error-exitcode", "99"])
        .arg(&lesson.binary);
    run_with_timeout(&mut cmd, Duration::from_secs(600))
}

#[test]
#[ignore = "needs 2 GPUs"]
fn memcheck_is_clean() {
    let out = sanitized(gpu_ranks(), "memcheck");
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("ERROR SUMMARY: 0 errors"),
        "{}",
        describe(&out)
    );
    assert!(
        stdout.contains("All resources cleaned up successfully"),
        "{}",
        describe(&out)
    );
}
