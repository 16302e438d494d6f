//! Lesson 03's tests. CPU tests run everywhere; the GPU tests are ignored by
//! default: `cargo test -- --include-ignored` on a machine with 2 GPUs
//! (`GPU_TEST_RANKS=4` for 4). In an MPI build (`--features mpi`) the GPU
//! tests launch the programs with mpirun.

use std::process::Command;
use std::time::Duration;

use testkit::{gpu_ranks, run_with_timeout};

testkit::lesson_tests!("03_alltoallv_sm");

/// Runs the lesson with `--base-count <value>`; returns (exit code, stderr).
fn with_base_count(value: &str) -> (Option<i32>, String) {
    let out = run_with_timeout(
        Command::new(&lesson().binary).args(["--base-count", value]),
        Duration::from_secs(60),
    );
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn base_count_zero_is_refused() {
    let (code, stderr) = with_base_count("0");
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("--base-count must be at least 1"),
        "{stderr}"
    );
}

#[test]
fn base_count_that_is_not_a_number_is_refused() {
    let (code, stderr) = with_base_count("many");
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("'many' is not a whole number of elements"),
        "{stderr}"
    );
}

#[test]
fn base_count_beyond_the_encoding_is_refused() {
    let (code, stderr) = with_base_count("4294967296");
    assert_eq!(code, Some(2), "{stderr}");
    assert!(
        stderr.contains("the most one block can index (32 bits)"),
        "{stderr}"
    );
}

#[test]
#[ignore = "needs 4 GPUs"]
fn buffers_larger_than_the_gpu_exit_2() {
    // With 2 ranks even the largest --base-count (2^32-1) needs only 112 GiB,
    // which an H200 has; with 4 it needs 188 GiB.
    if gpu_ranks() < 4 {
        eprintln!("not run: needs GPU_TEST_RANKS=4 to exceed an H200's memory");
        return;
    }
    let out = lesson().run(4, &["--base-count", "4294967295"], Duration::from_secs(120));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("GiB per GPU for 4 ranks, and this GPU has"),
        "{stderr}"
    );
}
