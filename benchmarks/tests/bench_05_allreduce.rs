//! `05_allreduce_bench`'s tests (lesson 05's benchmark). CPU tests run
//! everywhere; the GPU tests are ignored by default: `cargo test --
//! --include-ignored` on a machine with 2 GPUs, nvcc and the NCCL headers
//! (`GPU_TEST_RANKS=4` for 4). In an MPI build the GPU tests launch it with
//! mpirun.

mod support;

use std::time::Duration;

use support::BenchmarkChecks;
use testkit::{gpu_ranks, run_with_timeout, LessonUnderTest};

fn bench() -> LessonUnderTest {
    LessonUnderTest::new(
        "05_allreduce_bench",
        env!("CARGO_BIN_EXE_05_allreduce_bench"),
        env!("CARGO_MANIFEST_DIR"),
    )
}

#[test]
#[ignore = "needs 2 GPUs"]
fn benchmark_runs_and_finds_no_wrong_element() {
    // 8 B..4 MiB by 8: 7 sizes (8 B to 2 MiB), both paths of the fast kernel.
    let args = [
        "-b", "8", "-e", "4M", "-f", "8", "-n", "5", "-w", "2", "--trials", "2",
    ];
    bench().assert_benchmark_clean(gpu_ranks(), &args, 3, 7);
}

/// `nccl-tuned` without `--sym-ctas`, or beside `nccl`, is refused before
/// any GPU is looked for: exit 2 on any machine.
#[test]
fn nccl_tuned_is_refused_without_sym_ctas_or_beside_nccl() {
    for (args, reason) in [
        (
            &["--kernels", "nccl-tuned"][..],
            "nccl-tuned needs --sym-ctas N",
        ),
        (
            &["--kernels", "nccl,nccl-tuned", "--sym-ctas", "64"][..],
            "`nccl` would be tuned too",
        ),
    ] {
        let mut cmd = std::process::Command::new(&bench().binary);
        cmd.args(args).env_remove("NCCL_SYM_CTAS");
        let out = run_with_timeout(&mut cmd, Duration::from_secs(60));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains(reason), "{args:?}: {stderr}");
        assert!(stderr.contains("fix: "), "{args:?}: {stderr}");
    }
}

/// NCCL tuned: ncclAllReduce with NCCL_SYM_CTAS=32, checked like every
/// contender; the series says the value it ran with.
#[test]
#[ignore = "needs 2 GPUs"]
fn the_tuned_nccl_series_finds_no_wrong_element() {
    let args = [
        "--kernels",
        "nccl-tuned,fast",
        "--sym-ctas",
        "32",
        "-b",
        "8",
        "-e",
        "4M",
        "-f",
        "8",
        "-n",
        "5",
        "-w",
        "2",
        "--trials",
        "2",
    ];
    let report = bench().assert_benchmark_clean(gpu_ranks(), &args, 2, 7);
    assert_eq!(report.series[0].name, "nccl-tuned");
    assert!(
        report.series[0].about.ends_with("NCCL_SYM_CTAS=32"),
        "{}",
        report.series[0].about
    );
}

/// More two-shot blocks than the GPU holds at once are refused (exit 2).
#[test]
#[ignore = "needs 2 GPUs"]
fn more_twoshot_blocks_than_can_be_resident_are_refused() {
    let out = bench().run(
        gpu_ranks(),
        &[
            "--kernels",
            "twoshot",
            "--twoshot-blocks",
            "1024",
            "-b",
            "1M",
            "-e",
            "1M",
        ],
        Duration::from_secs(300),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    // With a GPU per rank, "than this GPU holds at once"; with ranks that
    // share one, "than this rank's share of what this GPU holds at once".
    assert!(
        stderr.contains("--twoshot-blocks 1024 asks for more blocks than this")
            && stderr.contains("GPU holds at once"),
        "{stderr}"
    );
}

/// The stress mode on every kernel and on ncclAllReduce: 2,000 back-to-back
/// operations per size and placement, each in its own region and checked,
/// with the ranks skewed by up to 20 µs before each launch. The sizes reach
/// both of the fast kernel's paths: one-shot (4 KiB, 128 KiB) and two-shot
/// (4 MiB); `oneshot` alone carries at most 1 MiB.
#[test]
#[ignore = "needs 2 GPUs"]
fn stress_finds_no_wrong_element_in_any_kernel() {
    let sizes = ["-b", "4K", "-e", "4M", "-f", "32"];
    let mut args = vec![
        "--build",
        "nvcc",
        "--stress",
        "2000",
        "--kernels",
        "nccl,simple,vec16,twoshot,fast",
    ];
    args.extend(sizes);
    bench().assert_stress_clean(gpu_ranks(), &args, 2000, 5 * 3);
    let oneshot = [
        "--build",
        "nvcc",
        "--stress",
        "2000",
        "--kernels",
        "oneshot",
        "-b",
        "8",
        "-e",
        "1M",
        "-f",
        "128",
    ];
    bench().assert_stress_clean(gpu_ranks(), &oneshot, 2000, 3);
}

/// The jit build's kernels (`fast-jit`, and NCCL's device primitives:
/// `prims`, `prims-oneshot`, `prims-twoshot`) under the stress mode, in place
/// and out of place, then at awkward sizes and offsets. They need NCCL
/// 2.32.3 and an nvJitLink as new (the jit route); where the loaded NCCL or
/// the tools cannot build them the benchmark must exit 2 and name the jit
/// route, and this test says it checked only that.
#[test]
#[ignore = "needs 2 GPUs; NCCL 2.32.3 and nvJitLink 13.5+ to run the kernels"]
fn the_jit_kernels_are_right_under_stress_and_at_awkward_sizes() {
    let jit = "fast-jit,prims,prims-oneshot,prims-twoshot";
    let stress = [
        "--stress",
        "2000",
        "--kernels",
        jit,
        "-b",
        "4K",
        "-e",
        "4M",
        "-f",
        "32",
    ];
    let out = bench().run(gpu_ranks(), &stress, Duration::from_secs(600));
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    if out.status.code() == Some(2) {
        assert!(
            stderr.contains("jit"),
            "exit 2 without naming the jit route:\n{stderr}"
        );
        testkit::skip(
            "NCCL 2.32.3 and nvJitLink 13.5+ for the jit route (checked only that the benchmark says so)",
            None,
        );
        eprintln!("{stderr}");
        return;
    }
    assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
    bench().assert_stress_table(&stdout, &stderr, 2000, 4 * 3);
    for (sizes, offsets) in [
        (["-b", "4", "-e", "4"], ["0", "0"]),
        (["-b", "12", "-e", "12"], ["4", "4"]),
        (["-b", "1000012", "-e", "1000012"], ["20", "36"]),
    ] {
        let mut args: Vec<&str> = sizes.to_vec();
        args.extend(["--send-offset", offsets[0], "--recv-offset", offsets[1]]);
        args.extend(["-n", "2", "-w", "1", "--trials", "1", "--kernels", jit]);
        bench().assert_benchmark_clean(gpu_ranks(), &args, 4, 1);
    }
}

/// Fresh random data, poisoned output, in place and out of place, for every
/// kernel at the sizes and offsets where vector code goes wrong: one float,
/// counts that are no multiple of 4 or of the block, and offsets that
/// misalign the buffers (alike, and differently).
#[test]
#[ignore = "needs 2 GPUs"]
fn every_kernel_is_right_at_awkward_sizes_and_offsets() {
    // The nvcc route by name: `oneshot` exists only there.
    let all = "nccl,simple,vec16,twoshot,oneshot,fast";
    let quick = ["-n", "2", "-w", "1", "--trials", "1", "--kernels", all];
    for (sizes, offsets) in [
        (["-b", "4", "-e", "4"], ["0", "0"]),
        (["-b", "12", "-e", "12"], ["4", "4"]),
        (["-b", "1000012", "-e", "1000012"], ["0", "0"]),
        (["-b", "1000012", "-e", "1000012"], ["20", "36"]),
        (["-b", "1000012", "-e", "1000012"], ["4", "12"]),
        (["-b", "4000012", "-e", "4000012"], ["8", "8"]),
    ] {
        let kernels: Vec<&str> = if sizes[1] == "4000012" {
            vec![
                "-n",
                "2",
                "-w",
                "1",
                "--trials",
                "1",
                "--kernels",
                "nccl,simple,vec16,twoshot,fast",
            ]
        } else {
            quick.to_vec()
        };
        let mut args: Vec<&str> = sizes.to_vec();
        args.extend(["--build", "nvcc"]);
        args.extend(["--send-offset", offsets[0], "--recv-offset", offsets[1]]);
        let mut kernels = kernels;
        if oneshot_beyond_the_share(&args, &kernels) {
            // Ranks that share a GPU: the one-shot grid of this size does
            // not fit a rank's share, and was refused as it must be (exit
            // 2, checked there); every other kernel still runs.
            *kernels.last_mut().unwrap() = "nccl,simple,vec16,twoshot,fast";
        }
        args.extend(kernels.iter().copied());
        let series = kernels.last().unwrap().split(',').count();
        bench().assert_benchmark_clean(gpu_ranks(), &args, series, 1);
    }
}

/// Whether `--kernels oneshot` at this size is refused because ranks share
/// a GPU and its grid exceeds a rank's share: checks that such a refusal is
/// exit 2 with its reason, and returns false when the run is not refused.
fn oneshot_beyond_the_share(args: &[&str], kernels: &[&str]) -> bool {
    if !kernels.last().is_some_and(|k| k.contains("oneshot"))
        || gpu_ranks() <= testkit::visible_gpus()
    {
        return false;
    }
    let mut probe: Vec<&str> = args.to_vec();
    probe.extend([
        "-n",
        "1",
        "-w",
        "0",
        "--trials",
        "1",
        "--kernels",
        "oneshot",
    ]);
    let out = bench().run(gpu_ranks(), &probe, Duration::from_secs(300));
    let stderr = String::from_utf8_lossy(&out.stderr);
    if out.status.code() != Some(2) {
        return false;
    }
    assert!(
        stderr.contains("needs more blocks than this rank's share of the GPU"),
        "{stderr}"
    );
    true
}

#[test]
fn benchmark_refuses_bad_offsets_and_oversized_oneshot_before_the_gpu() {
    for (args, reason) in [
        (&["--send-offset", "2"][..], "must be multiples of 4 bytes"),
        (
            &["-e", "2M", "--kernels", "oneshot"][..],
            "the oneshot kernel carries at most 1048576 bytes",
        ),
    ] {
        let out = bench().run(1, args, Duration::from_secs(60));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(reason), "{reason:?} missing:\n{stderr}");
    }
}

/// `--json` and `--svg` are checked before the GPU is looked for.
#[test]
fn benchmark_refuses_an_output_path_it_cannot_write_before_the_gpu() {
    let out = bench().run(
        1,
        &["--svg", "/nonexistent/dir/x.svg"],
        Duration::from_secs(60),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--svg /nonexistent/dir/x.svg"), "{stderr}");
}
