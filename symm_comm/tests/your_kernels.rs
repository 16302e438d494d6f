//! The two "your own kernel" programs (`src/bin/`): without a GPU they exit
//! 2 and say why, on any machine; on GPUs (ignored by default, `cargo test
//! -- --include-ignored`) every rank verifies every element, in threads or,
//! in an MPI build, under mpirun.

use std::time::Duration;

use testkit::{gpu_ranks, LessonUnderTest};

fn cuda() -> LessonUnderTest {
    LessonUnderTest::new(
        "your_cuda_kernel",
        env!("CARGO_BIN_EXE_your_cuda_kernel"),
        env!("CARGO_MANIFEST_DIR"),
    )
}

fn triton() -> LessonUnderTest {
    LessonUnderTest::new(
        "your_triton_kernel",
        env!("CARGO_BIN_EXE_your_triton_kernel"),
        env!("CARGO_MANIFEST_DIR"),
    )
}

/// Every rank's line and the PASSED line, in rank order.
fn assert_verified(stdout: &str, kernel: &str, ranks: usize) {
    for rank in 0..ranks {
        let line = format!("  Rank {rank} verified 1048576 sums");
        assert!(stdout.contains(&line), "no `{line}`: {stdout}");
    }
    let passed = format!("symm_all_reduce in your {kernel} kernel: PASSED");
    assert!(stdout.contains(&passed), "{stdout}");
}

#[test]
fn without_a_gpu_both_exit_2_and_say_why() {
    cuda().assert_exits_2_without_a_gpu();
    triton().assert_exits_2_without_a_gpu();
}

#[test]
#[ignore = "needs 2 GPUs"]
fn your_cuda_kernel_verifies() {
    let (stdout, _) = cuda().run_to_success(gpu_ranks(), &[]);
    assert_verified(&stdout, "CUDA", gpu_ranks());
}

/// With NCCL 2.32.3 loaded (e.g. `NCCL_HOME`), a Hopper GPU and a Python
/// with Triton 3.6 (`TRITON_PYTHON`) it must verify; without them, exit 2
/// naming what is missing, before any kernel runs. With `TRITON_PYTHON`
/// set, as the GPU machine's scripts set it, only verifying passes: an exit
/// 2 there would hide a regression behind "not available here".
#[test]
#[ignore = "needs 2 GPUs; NCCL 2.32.3 and Triton 3.6 to verify"]
fn your_triton_kernel_verifies_or_names_what_it_lacks() {
    let out = triton().run(gpu_ranks(), &[], Duration::from_secs(300));
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    if out.status.code() == Some(2) && std::env::var_os("TRITON_PYTHON").is_none() {
        assert!(
            stderr.contains("NCCL") || stderr.contains("Triton"),
            "exit 2 for another reason: {stderr}"
        );
        eprintln!("not verified here (exit 2 as documented): {stderr}");
        return;
    }
    assert!(out.status.success(), "{}", testkit::describe(&out));
    assert_verified(&stdout, "Triton", gpu_ranks());
}

/// The Triton kernel compiles on the CPU (Triton needs no GPU), linking the
/// library's bitcode and NCCL 2.32.3's `libnccl_device.bc`: needs
/// `TRITON_PYTHON` and the wheels in `DEVICE_BUILD_WHEELS` (`.ci/jit-wheels
/// DIR`); skipped without them unless `TRITON_BUILD_REQUIRED=1`.
#[test]
fn your_triton_kernel_compiles_without_a_gpu() {
    let nccl_bc = std::env::var_os("DEVICE_BUILD_WHEELS")
        .map(|d| std::path::PathBuf::from(d).join("nvidia/nccl/lib/libnccl_device.bc"))
        .filter(|p| p.is_file());
    let (Some(python), Some(nccl_bc)) = (std::env::var_os("TRITON_PYTHON"), nccl_bc) else {
        testkit::skip(
            "TRITON_PYTHON and libnccl_device.bc under DEVICE_BUILD_WHEELS",
            Some("TRITON_BUILD_REQUIRED"),
        );
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let script = dir.path().join("your_triton_kernel.py");
    std::fs::write(&script, include_str!("../src/bin/your_triton_kernel.py")).unwrap();
    symm_comm::triton::write_beside(dir.path()).unwrap();
    let out = std::process::Command::new(python)
        .arg(&script)
        .args(["--arch", "90", "--out"])
        .arg(dir.path())
        .arg("--nccl-device-bc")
        .arg(&nccl_bc)
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", testkit::describe(&out));
    let cubin = std::fs::read(dir.path().join("kernel.cubin")).unwrap();
    assert_eq!(&cubin[..4], b"\x7fELF", "not a cubin");
    let meta = std::fs::read_to_string(dir.path().join("kernel.txt")).unwrap();
    assert_eq!(
        meta.lines().collect::<Vec<_>>()[..2],
        ["sum_then_add_one", "512"]
    );
}
