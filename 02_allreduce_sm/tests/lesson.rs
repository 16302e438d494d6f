//! Lesson 02's tests. CPU tests run everywhere; the GPU tests are ignored by
//! default: `cargo test -- --include-ignored` on a machine with 2 GPUs
//! (`GPU_TEST_RANKS=4` for 4). In an MPI build (`--features mpi`) the GPU
//! tests launch the lesson with mpirun.
//!
//! The `fault_` tests are the fault matrix's cases for a lesson
//! (docs/src/testing.md): rank 1 fails before, during or after the
//! AllReduce, or (MPI) is killed while rank 0 waits in it. Each run must end
//! within 5 s, exit non-zero, name the rank and leave nothing behind. Run them
//! in both builds: the default one tests threads, `--features mpi` mpirun.

use common::testing::{gpu_ranks, Disturb, LessonUnderTest};

common::lesson_tests!("02_allreduce_sm");

/// Rank 1 fails at `place` (a `SYMMEM_TEST_FAULT` place); the run must end
/// cleanly and name rank 1.
fn rank_1_fails(place: &str) {
    let ranks = gpu_ranks();
    lesson()
        .fault(
            ranks,
            Some(&format!("fail:1:{place}")),
            &[],
            "rank 1 fails here on purpose",
            Disturb::Nothing,
            &[],
        )
        .assert_clean(&format!(
            "{}error: ",
            LessonUnderTest::rank_prefix(1, ranks)
        ));
}

#[test]
#[ignore = "needs 2 GPUs"]
fn fault_a_rank_fails_before_the_communicator_exists() {
    // The others wait inside ncclCommInitRank for a rank that never comes.
    rank_1_fails("init");
}

#[test]
#[ignore = "needs 2 GPUs"]
fn fault_a_rank_fails_during_the_allreduce() {
    // Rank 1 never enters ncclAllReduce; the others wait inside it, and rank
    // 1's own error path deregisters its windows, a collective call.
    rank_1_fails("after:Rank 1 data initialized");
}

#[test]
#[ignore = "needs 2 GPUs"]
fn fault_a_rank_fails_after_the_allreduce() {
    rank_1_fails("after:Rank 1 symmetric memory windows deregistered");
}

#[test]
#[ignore = "needs 2 GPUs"]
#[cfg(feature = "mpi")]
fn fault_kill_9_of_one_mpi_rank_while_the_other_waits_in_the_allreduce() {
    lesson()
        .fault(
            gpu_ranks(),
            Some("stall:1:after:Rank 1 data initialized"),
            &[],
            "rank 1 stalls here on purpose",
            Disturb::KillMpiRank(1),
            &[],
        )
        // mpirun's own words.
        .assert_clean("process rank 1 with PID");
}
