//! Lesson 06c's tests. CPU tests run everywhere; the GPU tests are ignored
//! by default: `cargo test --features mpi -- --include-ignored` on a machine
//! with GPUs and NVSHMEM (`NVSHMEM_HOME` or the wheel in the active venv).
//! NVSHMEM hosts one PE per process: only the MPI build runs the lesson.

use std::time::Duration;

use testkit::{gpu_ranks, mpi_build, run_with_timeout, LessonUnderTest};

// Not testkit::lesson_tests!: this lesson runs in the MPI build only, and
// its README's transcript is an MPI run's.
fn lesson() -> LessonUnderTest {
    LessonUnderTest::new(
        "06c_symm_nvshmem",
        env!("CARGO_BIN_EXE_06c_symm_nvshmem"),
        env!("CARGO_MANIFEST_DIR"),
    )
}

#[test]
fn readme_walkthrough_matches_the_step_comments() {
    lesson().assert_walkthrough_matches_source();
}

/// Without a GPU it exits 2 and says why, without panicking: the thread
/// build because it runs ranks as threads, the MPI build at the first
/// check that fails (NVSHMEM missing, or no GPU).
#[test]
fn without_a_gpu_it_exits_2_and_says_why() {
    let mut cmd = std::process::Command::new(&lesson().binary);
    cmd.env("CUDA_VISIBLE_DEVICES", "").env_remove("NTHREADS");
    let out = run_with_timeout(&mut cmd, Duration::from_secs(60));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("error: ") && stderr.contains("fix: "),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// The README's transcript, from an MPI run (its launch line a wildcard).
#[test]
#[ignore = "needs 2 GPUs, the MPI build and NVSHMEM"]
fn transcript_matches_the_readme() {
    if !mpi_build() {
        eprintln!("skipped: NVSHMEM runs in the MPI build only");
        return;
    }
    let expected = testkit::readme_transcript(&lesson().readme(), gpu_ranks())
        .expect("README has a transcript block for GPU_TEST_RANKS ranks");
    let (stdout, stderr) = lesson().run_to_success(gpu_ranks(), &[]);
    if let Err(report) = testkit::compare_transcript(&expected, &stdout) {
        panic!("{report}\n--- stderr\n{stderr}");
    }
}

/// NVSHMEM hosts one PE per process: a thread-mode build refuses to run
/// before any rank starts, on any machine, and names the MPI build.
#[test]
fn thread_mode_refuses_the_nvshmem_backend_and_names_the_mpi_build() {
    if mpi_build() {
        eprintln!("skipped: this is the MPI build, where NVSHMEM may run");
        return;
    }
    let mut cmd = std::process::Command::new(&lesson().binary);
    cmd.env("NTHREADS", "2");
    let out = run_with_timeout(&mut cmd, Duration::from_secs(60));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("needs one process per GPU"), "{stderr}");
    assert!(stderr.contains("--features mpi"), "{stderr}");
    assert!(stderr.contains("mpirun -np 2"), "{stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!stdout.contains("Starting"), "a rank started: {stdout}");
}

/// In the MPI build, a missing NVSHMEM is named (where it was looked for,
/// and the pip package) before any rank starts, on any machine.
#[test]
fn missing_nvshmem_exits_2_with_the_fix() {
    if !mpi_build() {
        eprintln!("skipped: the thread-mode build refuses to run before looking for NVSHMEM");
        return;
    }
    let empty = tempfile::tempdir().unwrap();
    let mut cmd = std::process::Command::new(&lesson().binary);
    cmd.env("NVSHMEM_HOME", empty.path());
    let out = run_with_timeout(&mut cmd, Duration::from_secs(60));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("NVSHMEM not found"), "{stderr}");
    assert!(
        stderr.contains(&empty.path().display().to_string()),
        "{stderr}"
    );
    assert!(
        stderr.contains("pip install nvidia-nvshmem-cu13"),
        "{stderr}"
    );
}

/// Both dtypes, under mpirun (MPI build only).
#[test]
#[ignore = "needs 2 GPUs, the MPI build and NVSHMEM"]
fn the_nvshmem_backend_verifies() {
    if !mpi_build() {
        eprintln!("skipped: NVSHMEM runs in the MPI build only");
        return;
    }
    for dtype in ["f32", "bf16"] {
        let (stdout, stderr) = lesson().run_to_success(gpu_ranks(), &["--dtype", dtype]);
        assert!(
            stdout.contains("Layer tail verified on every rank: PASSED"),
            "{stdout}"
        );
        assert!(stderr.contains("note: backend: nvshmem"), "{stderr}");
    }
}
