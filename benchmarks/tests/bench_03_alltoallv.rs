//! `03_alltoallv_bench`'s tests (lesson 03's benchmark). CPU tests run
//! everywhere; the GPU tests are ignored by default: `cargo test --
//! --include-ignored` on a machine with 2 GPUs (`GPU_TEST_RANKS=4` for 4).
//! In an MPI build (`--features mpi`) the GPU tests launch it with mpirun.

mod support;

use std::time::Duration;

use support::BenchmarkChecks;
use testkit::{gpu_ranks, stopped_by_ctrl_c, Disturb, LessonUnderTest};

fn bench() -> LessonUnderTest {
    LessonUnderTest::new(
        "03_alltoallv_bench",
        env!("CARGO_BIN_EXE_03_alltoallv_bench"),
        env!("CARGO_MANIFEST_DIR"),
    )
}

#[test]
#[ignore = "needs 2 GPUs"]
fn benchmark_runs_and_finds_no_wrong_element() {
    let bench = bench();
    // 1K..1M by 2: 11 sizes, in the three registration modes.
    bench.assert_benchmark_clean(
        gpu_ranks(),
        &[
            "-b", "1K", "-e", "1M", "-n", "3", "-w", "1", "--trials", "2",
        ],
        3,
        11,
    );
    bench.assert_benchmark_clean(
        gpu_ranks(),
        &["-b", "64K", "-e", "1M", "-n", "3", "--unaligned", "-R", "2"],
        1,
        5,
    );
}

/// `--json` and `--svg` are checked before the GPU is looked for, not after
/// the sweep.
#[test]
fn benchmark_refuses_an_output_path_it_cannot_write_before_the_sweep() {
    let bench = bench();
    let out = bench.run(
        1,
        &["--json", "/nonexistent/dir/x.json"],
        Duration::from_secs(60),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--json /nonexistent/dir/x.json"),
        "{stderr}"
    );
}

#[test]
#[ignore = "needs 2 GPUs"]
fn fault_ctrl_c_stops_the_benchmark_mid_sweep() {
    // The fault matrix's benchmark case (docs/src/testing.md): Ctrl-C while
    // every rank is busy timing. Threads get SIGINT; under mpirun, mpirun
    // gets it and stops the ranks with SIGTERM.
    let ranks = gpu_ranks();
    let bench = bench();
    bench
        .fault(
            ranks,
            None,
            &["-b", "1K", "-e", "1G", "-n", "200"],
            // NCCL is set up and the sweep (minutes long) under way by then.
            "Launch: ",
            Disturb::CtrlC(Duration::from_secs(3)),
            &[],
        )
        .assert_clean(&stopped_by_ctrl_c(0, ranks));
}
