//! Lesson 06's tests. CPU tests run everywhere; the GPU tests are ignored by
//! default: `cargo test -- --include-ignored` on a machine with GPUs, nvcc
//! and the NCCL headers (or NCCL 2.32.3 and the jit wheels). In an MPI build
//! the GPU tests launch the lesson with mpirun, and the NVSHMEM backend's
//! tests run (they need `NVSHMEM_HOME` or the wheel in the active venv).

use std::time::Duration;

use testkit::{gpu_ranks, mpi_build, run_with_timeout};

testkit::lesson_tests!("06_symm_primitive");

/// NVSHMEM hosts one PE per process: a thread-mode build refuses
/// `--backend nvshmem` before any rank starts, on any machine, and names the
/// MPI build.
#[test]
fn thread_mode_refuses_the_nvshmem_backend_and_names_the_mpi_build() {
    if mpi_build() {
        eprintln!("skipped: this is the MPI build, where --backend nvshmem is allowed");
        return;
    }
    let mut cmd = std::process::Command::new(&lesson().binary);
    cmd.args(["--backend", "nvshmem"]).env("NTHREADS", "2");
    let out = run_with_timeout(&mut cmd, Duration::from_secs(60));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("needs one process per GPU"), "{stderr}");
    assert!(stderr.contains("--features mpi"), "{stderr}");
    assert!(stderr.contains("mpirun -np 2"), "{stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!stdout.contains("Starting"), "a rank started: {stdout}");
}

/// In the MPI build, a missing NVSHMEM is named (where it was looked for,
/// and the pip package) before any rank starts, on any machine.
#[test]
fn missing_nvshmem_exits_2_with_the_fix() {
    if !mpi_build() {
        eprintln!("skipped: the thread-mode build refuses --backend nvshmem before looking for it");
        return;
    }
    let empty = tempfile::tempdir().unwrap();
    let mut cmd = std::process::Command::new(&lesson().binary);
    cmd.args(["--backend", "nvshmem"])
        .env("NVSHMEM_HOME", empty.path());
    let out = run_with_timeout(&mut cmd, Duration::from_secs(60));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("NVSHMEM not found"), "{stderr}");
    assert!(
        stderr.contains(&empty.path().display().to_string()),
        "{stderr}"
    );
    assert!(
        stderr.contains("pip install nvidia-nvshmem-cu13"),
        "{stderr}"
    );
}

/// An NCCL without the device API (here a stand-in 2.27.7 named by
/// NCCL_HOME) is refused with exit code 2, naming the device API and 2.28.
#[test]
fn nccl_without_the_device_api_exits_2() {
    let root = tempfile::tempdir().unwrap();
    let lib = root.path().join("home/lib");
    std::fs::create_dir_all(&lib).unwrap();
    std::fs::create_dir_all(root.path().join("tmp")).unwrap();
    let chosen = testkit::build_fake_nccl(&lib, "libnccl.so.2", 22707);
    let out = run_with_timeout(
        lesson()
            .command(1)
            .env("NCCL_HOME", root.path().join("home"))
            .env("TMPDIR", root.path().join("tmp")),
        Duration::from_secs(60),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    let chosen = chosen.canonicalize().unwrap();
    assert!(
        stderr.contains(&format!("NCCL 2.27.7 ({}) is too old", chosen.display())),
        "{stderr}"
    );
    assert!(stderr.contains("the device API"), "{stderr}");
}

/// The Triton kernel links NCCL's device bitcode: `--backend nvshmem` with
/// it is refused before any rank starts, on any machine.
#[test]
fn the_triton_kernel_refuses_the_nvshmem_backend() {
    let mut cmd = std::process::Command::new(&lesson().binary);
    cmd.args(["--kernel", "triton", "--backend", "nvshmem"])
        .env("NTHREADS", "1");
    let out = run_with_timeout(&mut cmd, Duration::from_secs(60));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("runs on --backend nccl only"), "{stderr}");
    assert!(stderr.contains("--kernel cuda"), "{stderr}");
}

/// The Triton kernel, both dtypes. With NCCL 2.32.3 loaded (e.g.
/// `NCCL_HOME`) and a Python with Triton 3.6+ (`TRITON_PYTHON`) it must
/// verify; without either, it must exit 2 and name what is missing, before
/// any kernel runs.
#[test]
#[ignore = "needs 2 GPUs; NCCL 2.32.3 and Triton 3.6+ to verify"]
fn the_triton_kernel_verifies_or_names_what_it_lacks() {
    for dtype in ["f32", "bf16"] {
        let out = lesson().run(
            gpu_ranks(),
            &["--kernel", "triton", "--dtype", dtype],
            Duration::from_secs(300),
        );
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        if out.status.code() == Some(2) {
            assert!(
                stderr.contains("the loaded NCCL is")
                    || stderr.contains("needs Python with Triton"),
                "exit 2 for another reason: {stderr}"
            );
            eprintln!("not verified here (exit 2 as documented): {stderr}");
            return;
        }
        assert!(out.status.success(), "{}", testkit::describe(&out));
        assert!(stderr.contains("note: build route: triton"), "{stderr}");
        assert!(
            stdout.contains("Kernel tp_tail_triton completed on every rank"),
            "{stdout}"
        );
        assert!(
            stdout.contains("Layer tail verified on every rank: PASSED"),
            "{stdout}"
        );
    }
}

#[test]
#[ignore = "needs 2 GPUs"]
fn bfloat16_verifies() {
    let (stdout, stderr) = lesson().run_to_success(gpu_ranks(), &["--dtype", "bf16"]);
    assert!(
        stdout.contains("Layer tail verified on every rank: PASSED"),
        "{stdout}"
    );
    assert!(stderr.contains("note: backend: nccl"), "{stderr}");
}

/// The NVSHMEM backend, both dtypes, under mpirun (MPI build only).
#[test]
#[ignore = "needs 2 GPUs, the MPI build and NVSHMEM"]
fn the_nvshmem_backend_verifies() {
    if !mpi_build() {
        eprintln!("skipped: NVSHMEM runs in the MPI build only");
        return;
    }
    for dtype in ["f32", "bf16"] {
        let (stdout, stderr) =
            lesson().run_to_success(gpu_ranks(), &["--backend", "nvshmem", "--dtype", dtype]);
        assert!(
            stdout.contains("Layer tail verified on every rank: PASSED"),
            "{stdout}"
        );
        assert!(stderr.contains("note: backend: nvshmem"), "{stderr}");
    }
}
