//! `common`'s NCCL preflight against stand-in libraries built by the C
//! compiler: only the runtime name present, too old, new enough, and a
//! library whose own dependency is gone. No GPU needed.
//!
//! They sit here, not beside `probe_nccl`, because they need testkit's
//! C-library builder and `common` takes no dev-dependency on testkit (which
//! depends on it). The cases that need no compiler (a library that is not an
//! ELF file, a missing NCCL) stay in `common/src/preflight.rs`.

use common::preflight::{probe_nccl, NcclProbe};
use common::NcclVersion;
use testkit::{build_c_library, build_fake_nccl};

#[test]
fn only_the_runtime_name_gets_the_symlink_fix() {
    let dir = tempfile::tempdir().unwrap();
    let so2 = build_fake_nccl(dir.path(), "libnccl.so.2", 22803);
    let absent = dir.path().join("libnccl.so").display().to_string();
    let probe = probe_nccl(&[absent], &[so2.display().to_string()]);
    let NcclProbe::OnlyRuntimeName { path, .. } = &probe else {
        panic!("expected OnlyRuntimeName, got {probe:?}")
    };
    assert_eq!(path, &so2.canonicalize().unwrap());
    let err = probe
        .require(NcclVersion::new(2, 27, 0), "windows")
        .unwrap_err();
    assert!(err.reason.contains("only present as"), "{err}");
    assert!(
        err.fix
            .contains(&format!("ln -sf {}", so2.canonicalize().unwrap().display())),
        "{}",
        err.fix
    );
    assert!(err.fix.contains("LD_LIBRARY_PATH"), "{}", err.fix);
}

#[test]
fn too_old_nccl_names_both_versions() {
    let dir = tempfile::tempdir().unwrap();
    let lib = build_fake_nccl(dir.path(), "libnccl.so", 22605);
    let probe = probe_nccl(&[lib.display().to_string()], &[]);
    let NcclProbe::Found(found) = &probe else {
        panic!("{probe:?}")
    };
    assert_eq!(found.version, NcclVersion::new(2, 26, 5));
    let err = probe
        .require(NcclVersion::new(2, 27, 0), "ncclCommWindowRegister")
        .unwrap_err();
    assert!(err.reason.contains("NCCL 2.26.5"), "{err}");
    assert!(
        err.reason
            .contains("2.27.0 or newer for ncclCommWindowRegister"),
        "{err}"
    );
}

#[test]
fn new_enough_nccl_passes_with_its_path() {
    let dir = tempfile::tempdir().unwrap();
    let lib = build_fake_nccl(dir.path(), "libnccl.so", 22803);
    let found = probe_nccl(&[lib.display().to_string()], &[])
        .require(NcclVersion::new(2, 27, 0), "windows")
        .unwrap();
    assert_eq!(found.version, NcclVersion::new(2, 28, 3));
    assert_eq!(found.path, lib.canonicalize().unwrap());
}

#[test]
fn a_library_missing_a_dependency_is_broken_not_missing() {
    // A libnccl.so that exists but needs a library that is gone: the
    // loader's "cannot open shared object file" names the dependency, and
    // that must not read as "NCCL not found".
    let dir = tempfile::tempdir().unwrap();
    let Some(dependency) = build_c_library(
        dir.path(),
        "libgone_for_test.so",
        "int gone(void) { return 1; }\n",
        &[],
    ) else {
        return;
    };
    let search = format!("-L{}", dir.path().display());
    let lib = build_c_library(
        dir.path(),
        "libnccl.so",
        "int gone(void);\nint ncclGetVersion(int *v) { *v = 22803; return gone() - 1; }\n",
        &[&search, "-lgone_for_test"],
    )
    .expect("the compiler that built the dependency builds this too");
    std::fs::remove_file(&dependency).unwrap();
    let probe = probe_nccl(&[lib.display().to_string()], &[]);
    let NcclProbe::Broken { path, error, .. } = &probe else {
        panic!("expected Broken, got {probe:?}")
    };
    assert_eq!(path.as_deref(), Some(lib.as_path()));
    assert!(
        error.contains("libgone_for_test.so: cannot open shared object file"),
        "{error}"
    );
    let err = probe
        .require(NcclVersion::new(2, 27, 0), "windows")
        .unwrap_err();
    assert!(!err.reason.contains("not found"), "{err}");
    assert!(err.reason.contains(&lib.display().to_string()), "{err}");
    assert!(
        err.fix.contains(&format!("ldd {}", lib.display())),
        "{}",
        err.fix
    );
}
