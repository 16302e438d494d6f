//! `02_allreduce_bench`'s tests (lesson 02's benchmark). CPU tests run
//! everywhere; the GPU tests are ignored by default: `cargo test --
//! --include-ignored` on a machine with 2 GPUs (`GPU_TEST_RANKS=4` for 4).
//! In an MPI build (`--features mpi`) the GPU tests launch it with mpirun.

mod support;

use support::BenchmarkChecks;
use testkit::LessonUnderTest;

fn bench() -> LessonUnderTest {
    LessonUnderTest::new(
        "02_allreduce_bench",
        env!("CARGO_BIN_EXE_02_allreduce_bench"),
        env!("CARGO_MANIFEST_DIR"),
    )
}

#[test]
#[ignore = "needs 2 GPUs"]
fn benchmark_runs_and_finds_no_wrong_element() {
    let bench = bench();
    // 8 B..1 MiB by 4: 9 sizes (8 B to 512 KiB), in the three registration modes.
    let report = bench.assert_benchmark_clean(
        testkit::gpu_ranks(),
        &[
            "-b", "8", "-e", "1M", "-f", "4", "-n", "5", "-w", "2", "--trials", "2",
        ],
        3,
        9,
    );
    assert_eq!(report.series[2].name, "-R 2");
}

/// The stress mode on ncclAllReduce in the three registration modes: 2,000
/// back-to-back operations per size and placement, each in its own region
/// and checked, with the ranks skewed by up to 20 µs before each launch.
#[test]
#[ignore = "needs 2 GPUs"]
fn stress_finds_no_wrong_element_in_any_registration_mode() {
    let bench = bench();
    // 8 B, 256 B, 8 KiB and 256 KiB (LL) up to 4 MiB.
    let args = ["--stress", "2000", "-b", "8", "-e", "4M", "-f", "32"];
    bench.assert_stress_clean(testkit::gpu_ranks(), &args, 2000, 3 * 4);
}

#[test]
fn benchmark_refuses_min_above_max() {
    let bench = bench();
    // Refused before the GPU is looked for: the same answer on any machine.
    let out = bench.run(
        1,
        &["-b", "1M", "-e", "1K"],
        std::time::Duration::from_secs(60),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--min-bytes 1048576 is larger than --max-bytes 1024"),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// `--json` and `--svg` are checked before any rank starts (and before the
/// GPU is looked for): a directory that does not exist is named at once,
/// not after the whole sweep.
#[test]
fn benchmark_refuses_an_output_path_it_cannot_write_before_the_sweep() {
    let bench = bench();
    let started = std::time::Instant::now();
    let out = bench.run(
        1,
        &["--json", "/nonexistent/dir/x.json"],
        std::time::Duration::from_secs(60),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--json /nonexistent/dir/x.json"),
        "{stderr}"
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(10),
        "{stderr}"
    );
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn benchmark_refuses_a_stress_run_of_no_operation() {
    let bench = bench();
    let out = bench.run(1, &["--stress", "0"], std::time::Duration::from_secs(60));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--stress"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}
