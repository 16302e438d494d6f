//! The Triton kernel built on the CPU (Triton compiles without a GPU): the
//! lesson's own build path (`symm_primitive::triton`) runs `tp_tail.py` with
//! a real Triton, which links the library's bitcode and NCCL 2.32.3's
//! `libnccl_device.bc` into an sm_90 cubin, and refuses PTX that calls a
//! function nothing defines.
//!
//! Needs a Python with Triton 3.6+ (`TRITON_PYTHON`) and NCCL 2.32.3's
//! device bitcode (`DEVICE_BUILD_WHEELS`, staged by `.ci/jit-wheels DIR`).
//! Skips with a `skipped:` line when either is missing, unless
//! `TRITON_BUILD_REQUIRED=1` (CI), when it fails.
//!
//! Also here: `triton/build-bitcode` without a clang 20+ exits 2 with the fix,
//! and does not take packages from the directory it was started in.

use std::path::PathBuf;
use std::process::Command;

use device_build::CacheRoot;
use symm_primitive::triton::{self, Python};
use symm_primitive::Dtype;

fn pieces() -> Option<(Python, PathBuf)> {
    let nccl_bc = std::env::var_os("DEVICE_BUILD_WHEELS")
        .map(|d| PathBuf::from(d).join("nvidia/nccl/lib/libnccl_device.bc"))
        .filter(|p| p.is_file());
    let python = std::env::var_os("TRITON_PYTHON").and_then(|p| {
        let found = triton::find_python(&[PathBuf::from(p)]);
        if let Err(e) = &found {
            eprintln!("TRITON_PYTHON: {}", e.reason);
        }
        found.ok()
    });
    match (python, nccl_bc) {
        (Some(python), Some(nccl_bc)) => Some((python, nccl_bc)),
        (python, nccl_bc) => {
            let missing: Vec<&str> = [
                (python.is_none(), "a TRITON_PYTHON with Triton 3.6+"),
                (
                    nccl_bc.is_none(),
                    "libnccl_device.bc under DEVICE_BUILD_WHEELS (stage it with .ci/jit-wheels DIR)",
                ),
            ]
            .into_iter()
            .filter_map(|(absent, what)| absent.then_some(what))
            .collect();
            testkit::skip(&missing.join(" and "), Some("TRITON_BUILD_REQUIRED"));
            None
        }
    }
}

#[test]
fn the_triton_kernel_links_the_library_and_nccl_into_a_cubin() {
    let Some((python, nccl_bc)) = pieces() else {
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let cache = CacheRoot::Kept(tmp.path().join("cache"));
    for dtype in [Dtype::F32, Dtype::Bf16] {
        let built = triton::build_or_reuse(&python, 90, dtype, &nccl_bc, &cache)
            .unwrap_or_else(|e| panic!("{}: {e:#}", dtype.name()));
        assert!(built.build.compiled);
        let cubin = std::fs::read(built.cubin()).unwrap();
        assert_eq!(&cubin[..4], b"\x7fELF", "not a cubin");
        assert_eq!(built.meta.threads(), 512);
        // The library and NCCL's device API are in the kernel: no call
        // leaves it (tp_tail.py refuses such PTX; this checks it said so).
        let ptx = std::fs::read_to_string(built.build.file("tp_tail_triton.ptx")).unwrap();
        assert!(ptx.contains(".entry tp_tail_triton"));
        assert!(
            !ptx.lines().any(|l| l.starts_with(".extern .func")),
            "unresolved functions in the PTX"
        );
        // The second time it comes from the cache.
        let again = triton::build_or_reuse(&python, 90, dtype, &nccl_bc, &cache).unwrap();
        assert!(!again.build.compiled);
    }
}

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
