//! The restart with NCCL from a pip wheel, for real: `launch-probe --needs
//! nccl` with a stand-in NCCL in a fake virtual environment and a stand-in
//! CUDA driver, both built by the C compiler. No GPU needed.
//!
//! The restart puts a private directory first on `LD_LIBRARY_PATH`. The
//! loader keeps searching it for every later `dlopen` by bare name (NCCL's
//! `libnccl-net.so`, `libcuda.so`), and children inherit the variable, so a
//! name on that path that no longer exists is one any local user can create
//! in `/tmp` and fill with a library of their own.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use testkit::{build_fake_nccl, describe, run_with_timeout};

fn probe() -> PathBuf {
    testkit::binary("launch-probe", env!("CARGO_BIN_EXE_launch-probe"))
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A shell script that `cuInit` runs (through `system`, so the shell is the
/// program's child): for the program (its `/proc/<pid>/environ`, the block
/// the loader read) and for the child itself, each `LD_LIBRARY_PATH` entry
/// as `<who> <entry> <uid> <mode>`, or `<who> <entry> missing`; and whether
/// the child inherited `SYMMEM_NCCL_LINK_DIR`.
const REPORT: &str = r#"
report() {
  who=$1; list=$2
  old_ifs=$IFS; IFS=:
  for entry in $list; do
    if [ -e "$entry" ]; then echo "$who $entry $(stat -c '%u %a' "$entry")";
    else echo "$who $entry missing"; fi
  done
  IFS=$old_ifs
}
{
  report program "$(tr '\0' '\n' < /proc/$PPID/environ | sed -n 's/^LD_LIBRARY_PATH=//p')"
  report child "$LD_LIBRARY_PATH"
  echo "child-link-variable ${SYMMEM_NCCL_LINK_DIR-unset}"
} > "$SYMMEM_TEST_REPORT"
"#;

/// A stand-in CUDA driver (1 GPU) whose `cuInit` runs `$SYMMEM_TEST_AT_CUINIT`
/// in a shell: the preflight calls it after the restart, while the program
/// runs. `None` without a C compiler.
fn driver_that_reports(dir: &Path) -> Option<()> {
    let source = "#include <stdlib.h>\n\
         int cuInit(unsigned flags) {\n\
           const char *script = getenv(\"SYMMEM_TEST_AT_CUINIT\");\n\
           if (script) system(script);\n\
           return 0;\n\
         }\n\
         int cuDriverGetVersion(int *out) { *out = 13000; return 0; }\n\
         int cuDeviceGetCount(int *out) { *out = 1; return 0; }\n\
         int cuDeviceGet(int *device, int ordinal) { *device = ordinal; return ordinal == 0 ? 0 : 101; }\n\
         int cuDeviceGetAttribute(int *out, int attribute, int device) {\n\
           *out = attribute == 16 ? 132 : 0; return 0;\n\
         }\n";
    testkit::build_fake_driver(dir, source)
}

/// `root/venv` with a stand-in NCCL 2.28.3 where `pip install
/// nvidia-nccl-cu13` puts it; returns the venv.
fn venv_with_wheel_nccl(root: &Path) -> PathBuf {
    let venv = root.join("venv");
    let lib = venv.join("lib/python3.12/site-packages/nvidia/nccl/lib");
    std::fs::create_dir_all(&lib).unwrap();
    build_fake_nccl(&lib, "libnccl.so.2", 22803);
    venv
}

/// `launch-probe --needs nccl`, one rank, with only `venv` to find NCCL in and
/// `tmp` as its `TMPDIR`.
fn probe_with_venv(venv: &Path, tmp: &Path) -> Command {
    let mut cmd = Command::new(probe());
    cmd.args(["--needs", "nccl"])
        .env("NTHREADS", "1")
        .env_remove("NCCL_HOME")
        .env_remove("CONDA_PREFIX")
        .env_remove("SYMMEM_NCCL_LINK_DIR")
        .env("VIRTUAL_ENV", venv)
        .env("TMPDIR", tmp)
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", "/nonexistent")
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    cmd
}

#[test]
fn every_loader_path_entry_the_program_and_its_children_see_is_private() {
    if testkit::nccl_present() {
        testkit::skip(
            "a machine where NCCL does not load under cudarc's names (here it does, so the wheel would not be used)",
            None,
        );
        return;
    }
    let root = tempfile::tempdir().unwrap();
    // The driver's directory is private too (0700), so that every entry
    // the loader searches must be.
    let machine = root.path().join("machine");
    std::fs::create_dir(&machine).unwrap();
    std::fs::set_permissions(&machine, std::fs::Permissions::from_mode(0o700)).unwrap();
    if driver_that_reports(&machine).is_none() {
        testkit::skip("a C compiler (cc) for the stand-in CUDA driver", None);
        return;
    }
    let venv = venv_with_wheel_nccl(root.path());
    let tmp = root.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let report = root.path().join("report.txt");
    let out: Output = run_with_timeout(
        probe_with_venv(&venv, &tmp)
            .env("LD_LIBRARY_PATH", &machine)
            .env("SYMMEM_TEST_AT_CUINIT", REPORT)
            .env("SYMMEM_TEST_REPORT", &report),
        Duration::from_secs(60),
    );
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert!(
        text(&out.stdout).contains("NCCL 2.28.3"),
        "the wheel's NCCL is not the one loaded\n{}",
        describe(&out)
    );
    let report = std::fs::read_to_string(&report)
        .unwrap_or_else(|e| panic!("cuInit wrote no report ({e})\n{}", describe(&out)));
    let me = common::unix::effective_uid().to_string();
    let entries: Vec<Vec<&str>> = report
        .lines()
        .filter(|line| line.starts_with("program ") || line.starts_with("child "))
        .map(|line| line.split(' ').collect())
        .collect();
    assert!(
        entries
            .iter()
            .any(|e| e[0] == "program" && e[1].contains("/symmem-nccl-")),
        "the program did not restart with a private link directory:\n{report}"
    );
    for entry in &entries {
        assert_eq!(
            entry[2..],
            [me.as_str(), "700"],
            "an LD_LIBRARY_PATH entry is missing, someone else's or not 0700 ({}):\n{report}",
            entry[1]
        );
    }
    assert!(
        report.contains("child-link-variable unset\n"),
        "the child inherited SYMMEM_NCCL_LINK_DIR:\n{report}"
    );
    let left = testkit::leftovers(&tmp, &["symmem-nccl-"]);
    assert!(
        left.is_empty(),
        "the private link directory outlived the program: {left:?}"
    );
}

/// An inherited `SYMMEM_NCCL_LINK_DIR` that this process did not make (here
/// one named for another process, as a parent's would be) is neither loaded
/// from nor removed: exit 2, naming it.
#[test]
fn a_link_directory_this_process_did_not_make_is_refused() {
    let root = tempfile::tempdir().unwrap();
    let venv = venv_with_wheel_nccl(root.path());
    let tmp = root.path().join("tmp");
    std::fs::create_dir(&tmp).unwrap();
    let other = tmp.join(testkit::stale_dir_name("symmem-nccl-"));
    std::fs::create_dir(&other).unwrap();
    std::fs::set_permissions(&other, std::fs::Permissions::from_mode(0o700)).unwrap();
    let out = run_with_timeout(
        probe_with_venv(&venv, &tmp)
            .env("SYMMEM_NCCL_LINK_DIR", &other)
            .env("LD_LIBRARY_PATH", &other),
        Duration::from_secs(60),
    );
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    assert!(
        text(&out.stderr).contains(&format!(
            "SYMMEM_NCCL_LINK_DIR={} is not this program's private link directory: its name does not start with",
            other.display()
        )),
        "{}",
        describe(&out)
    );
    assert!(other.is_dir(), "another process's directory was removed");
}

/// `launch-probe --needs nccl` with `NCCL_HOME` as given and nothing else
/// to find NCCL in.
fn probe_with_nccl_home(home: &Path) -> Output {
    let mut cmd = Command::new(probe());
    cmd.args(["--needs", "nccl"])
        .env("NTHREADS", "1")
        .env("NCCL_HOME", home)
        .env_remove("VIRTUAL_ENV")
        .env_remove("CONDA_PREFIX")
        .env_remove("SYMMEM_NCCL_LINK_DIR")
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", "/nonexistent");
    run_with_timeout(&mut cmd, Duration::from_secs(60))
}

/// Each usual `NCCL_HOME` mistake is named, with the directory meant where
/// the library is one level away: not the generic "NCCL not found".
#[test]
fn nccl_home_mistakes_are_named() {
    let root = tempfile::tempdir().unwrap();
    let install = root.path().join("nccl");
    let lib = install.join("lib");
    std::fs::create_dir_all(&lib).unwrap();
    let library = build_fake_nccl(&lib, "libnccl.so.2", 22803);
    let empty = root.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let cases = [
        (
            root.path().join("absent"),
            "does not exist",
            "point NCCL_HOME at an NCCL installation".to_string(),
        ),
        (
            library.clone(),
            "is a file, not a directory",
            format!("set NCCL_HOME={}", install.display()),
        ),
        (
            empty.clone(),
            "has no lib/libnccl.so.2",
            "point NCCL_HOME at an NCCL installation".to_string(),
        ),
        (
            lib.clone(),
            "has no lib/libnccl.so.2",
            format!("set NCCL_HOME={}", install.display()),
        ),
    ];
    for (home, mistake, fix) in cases {
        let out = probe_with_nccl_home(&home);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
        assert!(
            stderr.contains(&format!("NCCL_HOME={} {mistake}", home.display())),
            "{}",
            describe(&out)
        );
        assert!(stderr.contains(&fix), "{}", describe(&out));
        assert!(!stderr.contains("NCCL not found"), "{}", describe(&out));
    }
}
