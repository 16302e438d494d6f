//! `06_symm_bench --json` writes one report per run, holding a series for
//! every contender asked for: with only layer-tail contenders it used to
//! write theirs, then the AllReduce sweep's empty report over it (and print
//! the header twice). Needs GPUs: `cargo test -- --include-ignored` with
//! `GPU_TEST_RANKS` ranks (see testkit::gpu_ranks). The report's assembly
//! is tested without one in `src/bin/06_symm_bench.rs`.
//!
//! Before the fix every JSON the benchmark's layer-tail runs left in
//! `runs/2026-11-25` (calls 24, 32 and 35) holds `"series": []`; with it,
//! this test passed in the thread suite at 2 ranks on one H100
//! (`runs/2026-11-25/call74/suite-threads-n2.log`, and again in call 86).

use bench::report::Report;
use testkit::{gpu_ranks, LessonUnderTest};

fn bench() -> LessonUnderTest {
    LessonUnderTest::new(
        "06_symm_bench",
        env!("CARGO_BIN_EXE_06_symm_bench"),
        env!("CARGO_MANIFEST_DIR"),
    )
}

#[test]
#[ignore = "needs 2 GPUs"]
fn the_json_report_holds_every_contender_asked_for() {
    let dir = tempfile::tempdir().unwrap();
    for (contenders, series) in [
        ("fused,symm-layer", &["fused-nccl", "symm-layer-nccl"][..]),
        ("fused,symm", &["fused-nccl", "symm"][..]),
    ] {
        let json = dir.path().join("report.json");
        let json_arg = json.display().to_string();
        let args = [
            "--contenders",
            contenders,
            "--json",
            &json_arg,
            "-b",
            "8K",
            "-e",
            "64K",
            "-f",
            "8",
            "-n",
            "2",
            "-w",
            "1",
            "--trials",
            "1",
        ];
        let (stdout, _) = bench().run_to_success(gpu_ranks(), &args);
        assert_eq!(
            stdout.matches("# 06_symm_bench:").count(),
            1,
            "--contenders {contenders}: one table header:\n{stdout}"
        );
        let report = Report::read_json(&json).unwrap();
        let names: Vec<&str> = report.series.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, series, "--contenders {contenders}");
        assert!(
            report.series.iter().all(|s| !s.rows.is_empty()),
            "--contenders {contenders}: a series without rows"
        );
    }
}
