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
    // The exact nvcc commands, once (rank 0), and no cached files.
    let ran: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("note: ran: cd "))
        .collect();
    assert_eq!(ran.len(), 2, "{stderr}");
    assert!(
        ran[0].ends_with("-o allreduce_lsa.cubin allreduce_lsa.cu"),
        "{stderr}"
    );
    assert!(!stderr.contains("note: cached: "), "{stderr}");
    let (code, _, stderr) = run_with(gpu_ranks(), &nvcc, &[("XDG_CACHE_HOME", cache.path())]);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(
        stderr.contains("note: kernel and shim reused from the cache in"),
        "{stderr}"
    );
    assert!(!stderr.contains("note: ran: "), "{stderr}");
    assert!(stderr.contains("/allreduce_lsa.cubin\n"), "{stderr}");
    assert_eq!(stderr.matches("note: cached: ").count(), 2, "{stderr}");
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
