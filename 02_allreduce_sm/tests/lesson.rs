//! Lesson 02's tests. CPU tests run everywhere; the GPU tests are ignored by
//! default: `cargo test -- --include-ignored` on a machine with 2 GPUs
//! (`GPU_TEST_RANKS=4` for 4). In an MPI build (`--features mpi`) the GPU
//! tests launch the programs with mpirun.
//!
//! The `fault_` tests are the fault matrix's cases for a lesson
//! (docs/src/testing.md): rank 1 fails before, during or after the
//! AllReduce, or (MPI) is killed while rank 0 waits in it. Each run must end
//! within 5 s, exit non-zero, name the rank and leave nothing behind. Run them
//! in both builds: the default one tests threads, `--features mpi` mpirun.

use testkit::{gpu_ranks, Disturb, LessonUnderTest};

testkit::lesson_tests!("02_allreduce_sm");

/// The point of lesson 02: with both buffers in symmetric windows, NCCL's
/// log shows its symmetric kernel (every GPU pair must be NVLink- or
/// P2P-connected, as on the machine the README's runs come from). With
/// NCCL_DEBUG set by the user, the lesson leaves the log alone and says so.
#[test]
#[ignore = "needs 2 GPUs"]
fn nccl_runs_its_symmetric_kernel_on_windows() {
    let log = lesson().nccl_tuning_log(testkit::gpu_ranks());
    assert!(
        log.contains("AllReduce [Symmetric]: 4194304 Bytes -> Kernel"),
        "{log}"
    );
    assert!(
        log.contains("Kernel NCCL ran for this AllReduce: not determined: NCCL_DEBUG is set"),
        "{log}"
    );
    assert!(!log.contains("demonstrated symmetric memory"), "{log}");
}

/// With windows disabled NCCL 2.28 still hands out usable windows and the
/// AllReduce still verifies, but on an ordinary kernel: the lesson must say
/// so and must not claim symmetric memory.
#[test]
#[ignore = "needs 2 GPUs"]
fn with_windows_disabled_it_reports_the_ordinary_kernel() {
    let mut cmd = lesson().command(gpu_ranks());
    cmd.env("NCCL_WIN_ENABLE", "0");
    let out = testkit::run_with_timeout(&mut cmd, std::time::Duration::from_secs(300));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let report = testkit::describe(&out);
    if out.status.code() == Some(2) {
        // A NULL window (2.29+): refused with the reasons, never claimed.
        assert!(report.contains("NULL window"), "{report}");
        return;
    }
    assert_eq!(out.status.code(), Some(0), "{report}");
    assert!(stdout.contains("Results verified correctly"), "{report}");
    assert!(
        stdout.contains("Kernel NCCL ran for this AllReduce: Algo "),
        "{report}"
    );
    assert!(stdout.contains("not a symmetric kernel"), "{report}");
    let last = stdout.lines().last().unwrap_or_default();
    assert!(
        last.contains("no symmetric memory in effect"),
        "last line: {last}\n{report}"
    );
    assert!(
        !stdout.contains("demonstrated symmetric memory"),
        "{report}"
    );
}

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
