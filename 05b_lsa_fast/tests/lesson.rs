//! Lesson 05b's tests. CPU tests run everywhere (the build logic has unit
//! tests in the `device_build` crate); the GPU tests are ignored by default:
//! `cargo test -- --include-ignored` on a machine with 2 GPUs, nvcc and the
//! NCCL headers (`GPU_TEST_RANKS=4` for 4). In an MPI build the GPU tests
//! launch the lesson with mpirun.

use std::time::Duration;

use testkit::{gpu_ranks, run_with_timeout};

testkit::lesson_tests!("05b_lsa_fast");

/// Runs the lesson on the test's GPUs with extra environment; returns (exit code, stdout, stderr).
fn run_with_env(vars: &[(&str, &std::path::Path)]) -> (Option<i32>, String, String) {
    run_with(gpu_ranks(), &[], vars)
}

/// Runs the lesson on `ranks` ranks with `args` and extra environment.
fn run_with(
    ranks: usize,
    args: &[&str],
    vars: &[(&str, &std::path::Path)],
) -> (Option<i32>, String, String) {
    let lesson = lesson();
    let mut cmd = lesson.command(ranks);
    cmd.args(args);
    for (name, value) in vars {
        cmd.env(name, value);
    }
    let out = run_with_timeout(&mut cmd, Duration::from_secs(300));
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code(), text(&out.stdout), text(&out.stderr))
}

/// The fast kernel verifies like lesson 05's, on the route that has both of
/// its paths.
#[test]
#[ignore = "needs 2 GPUs"]
fn the_fast_kernel_verifies() {
    // The nvcc route by name: the jit route has no one-shot kernel, and no
    // LL staging buffer.
    let (stdout, _) = lesson().run_to_success(gpu_ranks(), &["--build", "nvcc"]);
    for line in [
        "Kernel allreduce_lsa_fast.cu built for sm_",
        "LSA barriers and an LL staging buffer",
        "AllReduce completed. Result verification: PASSED",
    ] {
        assert!(stdout.contains(line), "{line:?} missing:\n{stdout}");
    }
}

/// nvcc and NVRTC are looked for with the preflight, before any rank starts,
/// so this holds on any machine: with a GPU, the missing tools are the one
/// problem; without, they are listed beside the missing driver.
#[test]
fn a_missing_nvcc_and_nvrtc_are_named_before_any_rank_starts() {
    let (code, stdout, stderr) = run_with_env(&[
        ("NVCC", std::path::Path::new("/nonexistent/nvcc")),
        ("NVRTC", std::path::Path::new("/nonexistent/libnvrtc.so")),
    ]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("cannot run on this system"), "{stderr}");
    assert!(
        stderr.contains("nvcc not found: NVCC=/nonexistent/nvcc does not exist"),
        "{stderr}"
    );
    assert!(stderr.contains("NVRTC (libnvrtc.so) not found"), "{stderr}");
    assert!(
        stderr.contains("--build nvcc") || stderr.contains("nvidia-cuda-nvrtc"),
        "{stderr}"
    );
    assert!(!stdout.contains("Starting"), "a rank started: {stdout}");
}
