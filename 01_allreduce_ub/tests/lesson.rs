//! Lesson 01's tests. CPU tests run everywhere; the GPU tests are ignored by
//! default: `cargo test -- --include-ignored` on a machine with 2 GPUs
//! (`GPU_TEST_RANKS=4` for 4). In an MPI build (`--features mpi`) the GPU
//! tests launch the lesson with mpirun.

testkit::lesson_tests!("01_allreduce_ub");

/// Lesson 01's buffers are registered with ncclCommRegister, not as windows:
/// NCCL runs its ordinary kernels (lesson 02's test shows the other side).
#[test]
#[ignore = "needs 2 GPUs"]
fn nccl_does_not_run_a_symmetric_kernel_on_registered_buffers() {
    let log = lesson().nccl_tuning_log(testkit::gpu_ranks());
    assert!(
        log.contains("AllReduce: 4194304 Bytes -> Algo"),
        "no tuning line:\n{log}"
    );
    assert!(!log.contains("[Symmetric]"), "{log}");
}

/// A fake NCCL 2.18.5 in a pip wheel's place in a virtual environment, where
/// only `VIRTUAL_ENV` points: the lesson finds it with no symlink and no
/// `LD_LIBRARY_PATH` (it re-executes itself with a private link), and its
/// preflight then names that very file as too old for lesson 01.
#[test]
fn nccl_from_a_pip_wheel_is_found_without_a_symlink() {
    let Some((root, venv, out)) = run_with_wheel_nccl(0o755) else {
        return;
    };
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    let wheel = venv.join("lib/python3.12/site-packages/nvidia/nccl/lib/libnccl.so.2");
    let wheel = wheel.canonicalize().unwrap_or(wheel);
    assert!(
        stderr.contains(&format!("NCCL 2.18.5 ({}) is too old", wheel.display())),
        "{stderr}"
    );
    assert!(!stderr.contains("NCCL not found"), "{stderr}");
    let left = testkit::leftovers(&root.path().join("tmp"), &["symmem-nccl-"]);
    assert!(
        left.is_empty(),
        "the private link directory is left: {left:?}"
    );
}

/// The same wheel in a directory that every user can write is not loaded.
#[test]
fn nccl_in_a_directory_others_can_write_is_refused() {
    let Some((_root, _venv, out)) = run_with_wheel_nccl(0o777) else {
        return;
    };
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("can be written by other users"), "{stderr}");
}

/// `NCCL_HOME` names the NCCL to use, even where another one loads as
/// `libnccl.so`: here a fake 2.28.3 on `LD_LIBRARY_PATH` and a fake 2.18.5 in
/// `NCCL_HOME`; the preflight names the one in `NCCL_HOME`.
#[test]
fn nccl_home_overrules_the_nccl_the_loader_finds() {
    let root = tempfile::tempdir().unwrap();
    let (loader, home) = (root.path().join("loader"), root.path().join("home/lib"));
    std::fs::create_dir_all(&loader).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    std::fs::create_dir_all(root.path().join("tmp")).unwrap();
    testkit::build_fake_nccl(&loader, "libnccl.so", 22803);
    let chosen = testkit::build_fake_nccl(&home, "libnccl.so.2", 21805);
    let out = testkit::run_with_timeout(
        lesson()
            .command(1)
            .env("LD_LIBRARY_PATH", &loader)
            .env("NCCL_HOME", root.path().join("home"))
            .env("TMPDIR", root.path().join("tmp")),
        std::time::Duration::from_secs(60),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    let chosen = chosen.canonicalize().unwrap();
    assert!(
        stderr.contains(&format!("NCCL 2.18.5 ({}) is too old", chosen.display())),
        "{stderr}"
    );
}

/// Without the wheel, the message names pip beside apt.
#[test]
fn missing_nccl_names_pip_and_apt() {
    if testkit::nccl_present() {
        testkit::skip("a machine where NCCL does not load (it loads here)", None);
        return;
    }
    let out = testkit::run_with_timeout(
        lesson()
            .command(1)
            .env_remove("LD_LIBRARY_PATH")
            .env_remove("NCCL_HOME")
            .env_remove("VIRTUAL_ENV")
            .env_remove("CONDA_PREFIX")
            .env("PATH", "/usr/bin:/bin")
            .env("HOME", "/nonexistent"),
        std::time::Duration::from_secs(60),
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("pip install nvidia-nccl-cu13"), "{stderr}");
    assert!(
        stderr.contains("apt install libnccl2 libnccl-dev"),
        "{stderr}"
    );
}

/// Runs lesson 01 with only a fake NCCL 2.18.5 wheel in a virtual
/// environment whose lib directory has mode `mode`; `None` (skipped) where
/// NCCL loads anyway, as on a GPU machine.
fn run_with_wheel_nccl(
    mode: u32,
) -> Option<(tempfile::TempDir, std::path::PathBuf, std::process::Output)> {
    use std::os::unix::fs::PermissionsExt;
    if testkit::nccl_present() {
        testkit::skip(
            "a machine where NCCL does not load under cudarc's names (here it does, so the wheel would not be used)",
            None,
        );
        return None;
    }
    let root = tempfile::tempdir().unwrap();
    let venv = root.path().join("venv");
    let lib = venv.join("lib/python3.12/site-packages/nvidia/nccl/lib");
    std::fs::create_dir_all(&lib).unwrap();
    std::fs::create_dir_all(root.path().join("tmp")).unwrap();
    testkit::build_fake_nccl(&lib, "libnccl.so.2", 21805);
    std::fs::set_permissions(&lib, std::fs::Permissions::from_mode(mode)).unwrap();
    let out = testkit::run_with_timeout(
        lesson()
            .command(1)
            .env_remove("LD_LIBRARY_PATH")
            .env_remove("NCCL_HOME")
            .env_remove("CONDA_PREFIX")
            .env("VIRTUAL_ENV", &venv)
            .env("TMPDIR", root.path().join("tmp"))
            .env("PATH", "/usr/bin:/bin")
            .env("HOME", "/nonexistent"),
        std::time::Duration::from_secs(60),
    );
    Some((root, venv, out))
}
