//! The Triton lesson's start-up check, on any machine: it asks for a
//! Python with Triton (not nvcc or NVRTC), names
//! `TRITON_PYTHON` when that names nothing, and looking for Triton runs
//! nothing from the directory the lesson was started in.

use std::time::Duration;

use testkit::{run_with_timeout, LessonUnderTest};

fn lesson() -> LessonUnderTest {
    LessonUnderTest::new(
        "06b_symm_triton",
        env!("CARGO_BIN_EXE_06b_symm_triton"),
        env!("CARGO_MANIFEST_DIR"),
    )
}

/// `TRITON_PYTHON` naming no program is reported as such, before any rank
/// starts, on any machine.
#[test]
fn triton_python_naming_nothing_exits_2_and_names_the_variable() {
    let mut cmd = std::process::Command::new(&lesson().binary);
    cmd.env("NTHREADS", "1")
        .env("TRITON_PYTHON", "/nonexistent/python");
    let out = run_with_timeout(&mut cmd, Duration::from_secs(60));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("TRITON_PYTHON=/nonexistent/python names no program"),
        "{stderr}"
    );
    assert!(stderr.contains("fix: set TRITON_PYTHON"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// The Triton kernel is compiled by Triton, not by nvcc or NVRTC: the
/// start-up check asks for a Python with Triton (here one without it,
/// `/bin/false`), and not for CUDA's compilers. Without a GPU as well, so
/// that the run ends at the check everywhere.
#[test]
fn the_triton_kernel_s_start_up_check_asks_for_triton_not_nvcc() {
    let mut cmd = std::process::Command::new(&lesson().binary);
    cmd.env("NTHREADS", "1")
        .env("CUDA_VISIBLE_DEVICES", "")
        .env("TRITON_PYTHON", "/bin/false");
    let out = run_with_timeout(&mut cmd, Duration::from_secs(60));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("the Triton kernel needs Python with Triton"),
        "{stderr}"
    );
    assert!(stderr.contains("TRITON_PYTHON=/bin/false"), "{stderr}");
    assert!(stderr.contains("pip install 'triton>=3.6'"), "{stderr}");
    for tool in ["nvcc", "NVRTC"] {
        assert!(!stderr.contains(tool), "asks for {tool}:\n{stderr}");
    }
}

/// The lesson started in a directory holding a `triton.py`: looking for
/// Triton must not run it (it would write the marker).
#[test]
fn the_triton_kernel_does_not_run_a_triton_py_from_the_working_directory() {
    let planted = tempfile::tempdir().unwrap();
    let marker = planted.path().join("planted-triton-ran");
    std::fs::write(
        planted.path().join("triton.py"),
        format!(
            "open({:?}, 'w').write('ran')\n__version__ = '3.6.0'\n",
            marker.display().to_string()
        ),
    )
    .unwrap();
    let mut cmd = std::process::Command::new(&lesson().binary);
    cmd.current_dir(planted.path())
        .env("NTHREADS", "1")
        .env("CUDA_VISIBLE_DEVICES", "")
        .env_remove("TRITON_PYTHON")
        .env_remove("VIRTUAL_ENV");
    let out = run_with_timeout(&mut cmd, Duration::from_secs(60));
    assert_eq!(out.status.code(), Some(2), "{}", testkit::describe(&out));
    assert!(
        !marker.exists(),
        "the planted triton.py ran:\n{}",
        testkit::describe(&out)
    );
}
