//! Lesson 05's tests. CPU tests run everywhere (the build logic has unit tests
//! in the `device_build` crate); the GPU tests are ignored by default:
//! `cargo test -- --include-ignored` on a machine with 2 GPUs, nvcc and the
//! NCCL headers (`GPU_TEST_RANKS=4` for 4). In an MPI build the GPU tests
//! launch the lesson with mpirun.

use std::time::Duration;

use testkit::{gpu_ranks, run_with_timeout, stopped_by_ctrl_c, Disturb};

testkit::lesson_tests!("05_device_lsa");

/// Runs the lesson on the test's GPUs with extra environment; returns (exit code, stdout, stderr).
fn run_with_env(vars: &[(&str, &std::path::Path)]) -> (Option<i32>, String, String) {
    run_with(gpu_ranks(), &[], vars)
}

/// Runs the lesson on `ranks` ranks with `args` and extra environment.
fn run_with(
    ranks: usize,
    args: &[&str],
    vars: &[(&str, &std::path::Path)],
) -> (Option<i32>, String, String) {
    let lesson = lesson();
    let mut cmd = lesson.command(ranks);
    cmd.args(args);
    for (name, value) in vars {
        cmd.env(name, value);
    }
    let out = run_with_timeout(&mut cmd, Duration::from_secs(300));
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code(), text(&out.stdout), text(&out.stderr))
}

#[test]
#[ignore = "needs 2 GPUs and nvcc"]
fn the_second_run_reuses_the_cached_build() {
    // The nvcc route by name: with NCCL 2.32.3 and the jit tools at hand,
    // `auto` would take the jit route.
    let cache = tempfile::tempdir().unwrap();
    let nvcc = ["--build", "nvcc"];
    let (code, _, stderr) = run_with(gpu_ranks(), &nvcc, &[("XDG_CACHE_HOME", cache.path())]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains("note: kernel and shim compiled with nvcc in"),
        "{stderr}"
    );
    let (code, _, stderr) = run_with(gpu_ranks(), &nvcc, &[("XDG_CACHE_HOME", cache.path())]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains("note: kernel and shim reused from the cache in"),
        "{stderr}"
    );
}

#[test]
#[ignore = "needs 2 GPUs"]
fn headers_of_another_release_are_refused() {
    let fake = tempfile::tempdir().unwrap();
    std::fs::create_dir(fake.path().join("include")).unwrap();
    std::fs::write(
        fake.path().join("include/nccl.h"),
        "#define NCCL_MAJOR 2\n#define NCCL_MINOR 99\n#define NCCL_PATCH 0\n",
    )
    .unwrap();
    std::fs::write(fake.path().join("include/nccl_device.h"), "").unwrap();
    // NCCL_HOME must hold lib/libnccl.so.2 (a directory without it is
    // refused before anything else): the library this machine would load,
    // beside the other release's headers.
    let real = std::env::var_os("NCCL_HOME")
        .map(|home| std::path::Path::new(&home).join("lib/libnccl.so.2"))
        .filter(|lib| lib.is_file())
        .or_else(|| common::nccl_path::loader_search("libnccl.so.2"))
        .expect("an NCCL to load");
    std::fs::create_dir(fake.path().join("lib")).unwrap();
    std::os::unix::fs::symlink(real, fake.path().join("lib/libnccl.so.2")).unwrap();
    // One rank: the refusal comes at the build, before any rank needs a peer.
    let (code, _, stderr) = run_with(1, &[], &[("NCCL_HOME", fake.path())]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("the NCCL headers are 2.99.0"), "{stderr}");
    assert!(stderr.contains("but the loaded library is"), "{stderr}");
}

/// nvcc and NVRTC are looked for with the preflight, before any rank starts,
/// so this holds on any machine: with a GPU, the missing tools are the one
/// problem; without, they are listed beside the missing driver.
#[test]
fn a_missing_nvcc_and_nvrtc_are_named_before_any_rank_starts() {
    let (code, stdout, stderr) = run_with_env(&[
        ("NVCC", std::path::Path::new("/nonexistent/nvcc")),
        ("NVRTC", std::path::Path::new("/nonexistent/libnvrtc.so")),
    ]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("cannot run on this system"), "{stderr}");
    assert!(
        stderr.contains("nvcc not found: NVCC=/nonexistent/nvcc does not exist"),
        "{stderr}"
    );
    assert!(stderr.contains("NVRTC (libnvrtc.so) not found"), "{stderr}");
    assert!(
        stderr.contains("--build nvcc") || stderr.contains("nvidia-cuda-nvrtc"),
        "{stderr}"
    );
    assert!(!stdout.contains("Starting"), "a rank started: {stdout}");
}

#[test]
#[ignore = "needs 1 GPU"]
fn one_rank_verifies_or_is_refused_as_its_nccl_release_says() {
    // NCCL 2.28.3 gives a single-rank communicator no symmetric support, so
    // ncclDevCommCreate refuses it; that is the system's limit (exit 2).
    // 2.28.9 and later give it symmetric memory, and one rank verifies.
    let out = lesson().run(1, &[], Duration::from_secs(300));
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    if stdout.starts_with("NCCL 2.28.3 ") {
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert!(
            stderr.contains("Communicator does not support symmetric memory"),
            "{stderr}"
        );
        assert!(stderr.contains("use NTHREADS=2 or more"), "{stderr}");
    } else {
        assert_eq!(out.status.code(), Some(0), "{stdout}\n{stderr}");
        assert!(
            stdout.contains("AllReduce completed. Result verification: PASSED"),
            "{stdout}"
        );
    }
}

/// Part two: the fast kernel verifies like the simple one.
#[test]
#[ignore = "needs 2 GPUs"]
fn the_fast_kernel_verifies() {
    // The nvcc route by name: the jit route has no one-shot kernel, and no
    // LL staging buffer.
    let (stdout, _) =
        lesson().run_to_success(gpu_ranks(), &["--kernel", "fast", "--build", "nvcc"]);
    for line in [
        "Kernel allreduce_lsa_fast.cu built for sm_",
        "LSA barriers and an LL staging buffer",
        "AllReduce completed. Result verification: PASSED",
    ] {
        assert!(stdout.contains(line), "{line:?} missing:\n{stdout}");
    }
}

fn bench() -> testkit::LessonUnderTest {
    lesson().sibling(
        "05_allreduce_bench",
        env!("CARGO_BIN_EXE_05_allreduce_bench"),
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

/// Where this user's kernel cache is, as the lesson finds it.
fn cache_dir() -> std::path::PathBuf {
    let absolute = |name| {
        std::env::var_os(name)
            .map(std::path::PathBuf::from)
            .filter(|p| p.is_absolute())
    };
    absolute("XDG_CACHE_HOME")
        .or_else(|| absolute("HOME").map(|home| home.join(".cache")))
        .unwrap_or_default()
        .join("nccl-symmem-rs/05_device_lsa")
}

#[test]
#[ignore = "needs 2 GPUs and nvcc"]
fn fault_ctrl_c_stops_a_run_whose_rank_hangs_in_the_kernel() {
    // The fault matrix's lesson case (docs/src/testing.md): rank 1 hangs
    // before the kernel, so rank 0 spins in the kernel's first LSA barrier
    // for ever; Ctrl-C must still end the run, and leave no build directory.
    let ranks = gpu_ranks();
    let cache = cache_dir();
    lesson()
        .fault(
            ranks,
            Some("stall:1:after:Rank 1 created device communicator"),
            &[],
            "rank 1 stalls here on purpose",
            Disturb::CtrlC(Duration::from_millis(500)),
            &[(&cache, ".build-")],
        )
        .assert_clean(&stopped_by_ctrl_c(0, ranks));
}
