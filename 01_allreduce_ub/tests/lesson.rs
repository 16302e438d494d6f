//! Lesson 01's tests. CPU tests run everywhere; the GPU tests are ignored by
//! default: `cargo test -- --include-ignored` on a machine with 2 GPUs
//! (`GPU_TEST_RANKS=4` for 4). In an MPI build (`--features mpi`) the GPU
//! tests launch the lesson with mpirun.

testkit::lesson_tests!("01_allreduce_ub");

/// Lesson 01's buffers are registered with ncclCommRegister, not as windows:
/// NCCL runs its ordinary kernels (lesson 02's test shows the other side).
#[test]
#[ignore = "needs 2 GPUs"]
fn nccl_does_not_run_a_symmetric_kernel_on_registered_buffers() {
    let log = lesson().nccl_tuning_log(testkit::gpu_ranks());
    assert!(
        log.contains("AllReduce: 4194304 Bytes -> Algo"),
        "no tuning line:\n{log}"
    );
    assert!(!log.contains("[Symmetric]"), "{log}");
}
