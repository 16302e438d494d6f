//! `triton/build-bitcode`, the script that makes the library's LLVM
//! bitcode for Triton: without a clang 20+ it exits 2 with the fix, and it
//! does not take packages from the directory it was started in.

use std::path::PathBuf;
use std::process::Command;

#[test]
fn build_bitcode_without_clang_20_exits_2_with_the_fix() {
    let script = testkit::crate_dir(env!("CARGO_MANIFEST_DIR")).join("triton/build-bitcode");
    // A clang that is not one.
    let out = Command::new(&script)
        .env("CLANG", "/bin/true")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", testkit::describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("needs 20 or newer"), "{stderr}");
    assert!(stderr.contains("fix: install clang 20"), "{stderr}");
    // No clang on PATH at all: only what the script needs before it looks.
    let bin = tempfile::tempdir().unwrap();
    for tool in ["dirname", "bash"] {
        let found = ["/usr/bin", "/bin"]
            .iter()
            .map(|d| PathBuf::from(d).join(tool))
            .find(|p| p.is_file())
            .unwrap();
        std::os::unix::fs::symlink(found, bin.path().join(tool)).unwrap();
    }
    let out = Command::new(bin.path().join("bash"))
        .arg(&script)
        .env_remove("CLANG")
        .env("PATH", bin.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", testkit::describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("no clang 20 or newer found"), "{stderr}");
}

/// `triton/build-bitcode` finds NCCL's headers and Triton's through Python,
/// never in the directory it was started in: a planted `nvidia` package
/// there must not pick the headers clang compiles the library with.
#[test]
fn build_bitcode_does_not_look_for_packages_in_the_working_directory() {
    use std::os::unix::fs::PermissionsExt;
    let script = testkit::crate_dir(env!("CARGO_MANIFEST_DIR")).join("triton/build-bitcode");
    let tmp = tempfile::tempdir().unwrap();
    // A clang 22 as far as the script's version check can tell.
    let clang = tmp.path().join("clang");
    std::fs::write(&clang, "#!/bin/sh\necho 'clang version 22.1.8'\n").unwrap();
    std::fs::set_permissions(&clang, std::fs::Permissions::from_mode(0o755)).unwrap();
    let planted = tmp.path().join("cwd");
    std::fs::create_dir_all(planted.join("nvidia/nccl/include")).unwrap();
    std::fs::write(planted.join("nvidia/__init__.py"), "").unwrap();
    let out = Command::new(&script)
        .current_dir(&planted)
        .env("CLANG", &clang)
        .env("PYTHON", "python3")
        .env_remove("NCCL_INCLUDE")
        .env_remove("CCCL_INCLUDE")
        .env_remove("CUDA_HEADERS")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains(&planted.display().to_string()),
        "the planted nvidia/ package was used: {}",
        testkit::describe(&out)
    );
}
