//! The Triton route's Python runs isolated from where the lesson was started:
//!
//! * the probe for a Python with Triton does not import a `triton.py` from
//!   the working directory (one planted there ran, and its made-up version
//!   passed the version check);
//! * the build sees none of the caller's `TRITON_*` variables (a shared
//!   `TRITON_CACHE_DIR`, `TRITON_KERNEL_OVERRIDE`, ...), only the cache
//!   directory it is given inside its private build directory, and runs in
//!   that directory.
//!
//! Each test runs its body in a child process, this test binary run again
//! with the working directory or the variables under test: a test must not
//! change its own process's working directory or environment, which the
//! other tests' threads read. CPU only; the first needs `python3`.

use std::path::{Path, PathBuf};
use std::process::Command;

use common::NcclVersion;
use device_build::triton::{self, Program};
use device_build::CacheRoot;

/// Names the test whose body the child process runs.
const CHILD: &str = "SYMM_TRITON_ISOLATION_CHILD";

/// True in the child that runs `test`'s body. In the parent, runs that child
/// with `setup` applied and asserts that it passed.
fn run_in_child(test: &str, setup: impl FnOnce(&mut Command)) -> bool {
    if std::env::var_os(CHILD).is_some_and(|v| v == test) {
        return true;
    }
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([test, "--exact", "--nocapture", "--test-threads=1"])
        .env(CHILD, test);
    setup(&mut cmd);
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "{}", testkit::describe(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("1 passed"),
        "the child ran no test: {}",
        testkit::describe(&out)
    );
    false
}

#[test]
fn the_probe_does_not_import_triton_from_the_working_directory() {
    let planted = tempfile::tempdir().unwrap();
    let marker = planted.path().join("planted-triton-ran");
    let in_child = run_in_child(
        "the_probe_does_not_import_triton_from_the_working_directory",
        |cmd| {
            std::fs::write(
                planted.path().join("triton.py"),
                format!(
                    "open({:?}, 'w').write('ran')\n__version__ = '3.6.0'\n",
                    marker.display().to_string()
                ),
            )
            .unwrap();
            cmd.current_dir(planted.path())
                .env("SYMM_TEST_MARKER", &marker);
        },
    );
    if !in_child {
        assert!(
            !marker.exists(),
            "the triton.py in the working directory ran"
        );
        return;
    }
    let marker = PathBuf::from(std::env::var_os("SYMM_TEST_MARKER").unwrap());
    let on_path = std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|d| d.join("python3").is_file()));
    if !on_path {
        // Without a Python nothing could import the planted file.
        testkit::skip("python3 on PATH", None);
        return;
    }
    let found = triton::find_python(&[PathBuf::from("python3")]);
    assert!(!marker.exists(), "the planted triton.py ran: {found:?}");
}

/// A stand-in Python: answers the probe with 3.6.0, and as the build writes
/// its environment and working directory beside itself, then fails.
fn fake_python(dir: &Path) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join("python");
    let here = dir.display();
    std::fs::write(
        &path,
        format!(
            "#!/bin/sh\ncase \"$1\" in\n-c) echo 3.6.0;;\n*) env > '{here}/build-env.txt'; pwd > '{here}/build-cwd.txt'; exit 1;;\nesac\n"
        ),
    )
    .unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    path
}

#[test]
fn the_build_inherits_no_triton_variable_and_runs_in_its_own_directory() {
    let shared = tempfile::tempdir().unwrap();
    let in_child = run_in_child(
        "the_build_inherits_no_triton_variable_and_runs_in_its_own_directory",
        |cmd| {
            cmd.env("TRITON_CACHE_DIR", shared.path())
                .env("TRITON_KERNEL_OVERRIDE", "1")
                .env("TRITON_OVERRIDE_DIR", shared.path())
                .env("TRITON_PTXAS_PATH", "/no/such/ptxas");
        },
    );
    if !in_child {
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let python = triton::find_python(&[fake_python(tmp.path())]).unwrap();
    let nccl_bc = tmp.path().join("libnccl_device.bc");
    std::fs::write(&nccl_bc, b"BC").unwrap();
    let cache_root = tmp.path().join("cache");
    let cache = CacheRoot::Kept(cache_root.clone());
    // A program as lesson 06b's: its script, files beside it, its dtype.
    let program = Program {
        script: "tp_tail.py",
        script_text: "raise SystemExit(1)\n",
        beside: vec![("symm.py", b"")],
        args: vec!["--dtype".into(), "f32".into()],
        outputs: vec!["tp_tail_triton.cubin".into()],
        nccl: NcclVersion::new(2, 32, 3),
    };
    let nccl_library = tmp.path().join("libnccl.so.2");
    let built = triton::build(&python, &program, 90, &nccl_library, &nccl_bc, &cache);
    let err = match built {
        Ok(_) => panic!("the stand-in Python built something"),
        Err(err) => format!("{err:#}"),
    };
    assert!(err.contains("could not compile"), "{err}");
    let env = std::fs::read_to_string(tmp.path().join("build-env.txt")).unwrap();
    let triton_vars: Vec<&str> = env.lines().filter(|l| l.starts_with("TRITON_")).collect();
    assert_eq!(triton_vars.len(), 1, "{triton_vars:?}");
    let cache_dir = triton_vars[0]
        .strip_prefix("TRITON_CACHE_DIR=")
        .unwrap_or_else(|| panic!("{triton_vars:?}"));
    let cwd = std::fs::read_to_string(tmp.path().join("build-cwd.txt")).unwrap();
    let cwd = Path::new(cwd.trim());
    assert!(
        cwd.starts_with(&cache_root) && cwd != cache_root,
        "the build ran in {}, not in its private directory under {}",
        cwd.display(),
        cache_root.display()
    );
    assert_eq!(Path::new(cache_dir), cwd.join("triton-cache"));
}
