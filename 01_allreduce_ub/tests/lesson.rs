//! Lesson 01's tests. CPU tests run everywhere; the GPU tests are ignored by
//! default: `cargo test -- --include-ignored` on a machine with 2 GPUs
//! (`GPU_TEST_RANKS=4` for 4). In an MPI build (`--features mpi`) the GPU
//! tests launch the lesson with mpirun.

common::lesson_tests!("01_allreduce_ub");

/// Runs the lesson on the GPUs with NCCL's tuning log on, and returns what
/// NCCL logged (stdout and stderr together).
fn nccl_tuning_log() -> String {
    let lesson = lesson();
    let mut cmd = lesson.command(common::testing::gpu_ranks());
    cmd.env("NCCL_DEBUG", "INFO")
        .env("NCCL_DEBUG_SUBSYS", "TUNING");
    let out = common::testing::run_with_timeout(&mut cmd, std::time::Duration::from_secs(300));
    let log = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(0), "{log}");
    log
}

/// Lesson 01's buffers are registered with ncclCommRegister, not as windows:
/// NCCL runs its ordinary kernels (lesson 02's test shows the other side).
#[test]
#[ignore = "needs 2 GPUs"]
fn nccl_does_not_run_a_symmetric_kernel_on_registered_buffers() {
    let log = nccl_tuning_log();
    assert!(
        log.contains("AllReduce: 4194304 Bytes -> Algo"),
        "no tuning line:\n{log}"
    );
    assert!(!log.contains("[Symmetric]"), "{log}");
}
