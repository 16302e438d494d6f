//! `06_symm_bench`'s tests (lesson 06's benchmark). CPU tests run
//! everywhere; the GPU tests are ignored by default: `cargo test --
//! --include-ignored` on a machine with GPUs, nvcc and the NCCL headers (or
//! NCCL 2.32.3 and the jit wheels). In an MPI build the GPU tests launch it
//! with mpirun.

mod support;

use support::BenchmarkChecks;
use testkit::{gpu_ranks, LessonUnderTest};

fn bench() -> LessonUnderTest {
    LessonUnderTest::new(
        "06_symm_bench",
        env!("CARGO_BIN_EXE_06_symm_bench"),
        env!("CARGO_MANIFEST_DIR"),
    )
}

/// Every bad input gets its documented return code from the device, the
/// same code the host-side checks (`codes::check`) give.
#[test]
#[ignore = "needs 1 GPU"]
fn bad_input_gets_the_documented_code_on_the_device() {
    let (stdout, _) = bench().run_to_success(gpu_ranks(), &["--bad-input"]);
    assert!(stdout.contains("bad input: 13 of 13 cases"), "{stdout}");
}

#[test]
#[ignore = "needs 2 GPUs"]
fn benchmark_runs_and_finds_no_wrong_element() {
    let args = [
        "-b", "8", "-e", "4M", "-f", "8", "-n", "5", "-w", "2", "--trials", "2",
    ];
    // run_to_success: a wrong element would exit 1.
    let (stdout, _) = bench().run_to_success(gpu_ranks(), &args);
    for series in [
        "fused-nccl",
        "unfused05-nccl",
        "unfused-nccl-nccl",
        "symm",
        "fast05",
    ] {
        assert!(stdout.contains(series), "{series} missing:\n{stdout}");
    }
}

#[test]
#[ignore = "needs 2 GPUs"]
fn stress_finds_no_wrong_element_in_the_fused_kernel() {
    let args = ["--stress", "2000", "-b", "4K", "-e", "4M", "-f", "32"];
    let (stdout, _) = bench().run_to_success(gpu_ranks(), &args);
    assert!(stdout.contains("# wrong elements in all: 0"), "{stdout}");
}

/// Calls that follow each other on one region, their inputs changing each
/// time: a call that overlapped a peer's previous one would read partials of
/// the wrong call (the other stress test gives every call its own region,
/// with the same inputs, where such a race cannot show).
#[test]
#[ignore = "needs 2 GPUs"]
fn back_to_back_calls_on_one_region_are_each_right() {
    let args = [
        "--stress",
        "1000",
        "--one-region",
        "-b",
        "4K",
        "-e",
        "1M",
        "-f",
        "16",
    ];
    let (stdout, stderr) = bench().run_to_success(gpu_ranks(), &args);
    assert!(stdout.contains("all in one region"), "{stdout}");
    assert!(stdout.contains("fused-nccl-one-region"), "{stdout}");
    bench().assert_stress_table(&stdout, &stderr, 1000, 3);
}

#[test]
fn one_region_without_stress_is_refused() {
    let out = bench().run(1, &["--one-region"], std::time::Duration::from_secs(30));
    assert_eq!(out.status.code(), Some(2), "{}", testkit::describe(&out));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("--stress"),
        "{}",
        testkit::describe(&out)
    );
}

/// `--json` and `--svg` are checked before the GPU is looked for, not after
/// the sweep: a directory that does not exist, and a directory given as
/// the file.
#[test]
fn benchmark_refuses_an_output_path_it_cannot_write_before_the_sweep() {
    let dir = tempfile::tempdir().unwrap();
    let svg_dir = dir.path().to_str().unwrap();
    for (line, named) in [
        (
            vec!["--json", "/nonexistent/dir/x.json"],
            "--json /nonexistent/dir/x.json".to_string(),
        ),
        (
            vec!["--svg", svg_dir],
            format!("--svg {svg_dir}: is a directory"),
        ),
    ] {
        let started = std::time::Instant::now();
        let out = bench().run(1, &line, std::time::Duration::from_secs(30));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{}", testkit::describe(&out));
        assert!(stderr.contains(&named), "{stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
        assert!(
            started.elapsed() < std::time::Duration::from_secs(10),
            "{stderr}"
        );
    }
}

/// `--blocks 0`, and `--k` outside 1 to 256, are refused by the option
/// parser (exit 2, naming the option), before any GPU is looked for.
#[test]
fn zero_blocks_and_a_bad_k_are_refused() {
    for (option, value) in [("--blocks", "0"), ("--k", "0"), ("--k", "257")] {
        let out = bench().run(1, &[option, value], std::time::Duration::from_secs(30));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{}", testkit::describe(&out));
        assert!(stderr.contains(option), "{stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}
