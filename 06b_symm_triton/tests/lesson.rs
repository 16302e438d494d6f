//! Lesson 06b's tests. CPU tests run everywhere; the GPU tests are ignored
//! by default: `cargo test -- --include-ignored` on a machine with a Hopper
//! GPU, NCCL 2.32.3 (e.g. `NCCL_HOME`) and a Python with Triton 3.6+
//! (`TRITON_PYTHON`). In an MPI build they launch the lesson with mpirun.

use std::time::Duration;

use testkit::gpu_ranks;

testkit::lesson_tests!("06b_symm_triton");

/// The Triton kernel, both dtypes. With NCCL 2.32.3 loaded (e.g.
/// `NCCL_HOME`) and a Python with Triton 3.6+ (`TRITON_PYTHON`) it must
/// verify; without either, it must exit 2 and name what is missing, before
/// any kernel runs.
#[test]
#[ignore = "needs 2 GPUs; NCCL 2.32.3 and Triton 3.6+ to verify"]
fn the_triton_kernel_verifies_or_names_what_it_lacks() {
    for dtype in ["f32", "bf16"] {
        let out = lesson().run(gpu_ranks(), &["--dtype", dtype], Duration::from_secs(300));
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
