//! Lesson 06's tests. CPU tests run everywhere; the GPU tests are ignored by
//! default: `cargo test -- --include-ignored` on a machine with GPUs, nvcc
//! and the NCCL headers (or NCCL 2.32.3 and the jit wheels). In an MPI build
//! the GPU tests launch the lesson with mpirun. The Triton and NVSHMEM
//! variants' tests are in 06b_symm_triton/ and 06c_symm_nvshmem/; the CPU
//! builds of the layer's kernels, CUDA and Triton, in layer_tail/tests/.

use std::time::Duration;

use testkit::{gpu_ranks, run_with_timeout};

testkit::lesson_tests!("06_symm_primitive");

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
