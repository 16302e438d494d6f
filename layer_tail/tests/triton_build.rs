//! The Triton kernel built on the CPU (Triton compiles without a GPU): the
//! lesson's own build path (`layer_tail::triton`) runs `tp_tail.py` with
//! a real Triton, which links the library's bitcode and NCCL 2.32.3's
//! `libnccl_device.bc` into an sm_90 cubin, and refuses PTX that calls a
//! function nothing defines.
//!
//! Needs a Python with Triton 3.6+ (`TRITON_PYTHON`) and NCCL 2.32.3's
//! device bitcode (`DEVICE_BUILD_WHEELS`, staged by `.ci/jit-wheels DIR`).
//! Skips with a `skipped:` line when either is missing, unless
//! `TRITON_BUILD_REQUIRED=1` (CI), when it fails. (The library's bitcode
//! build, `build-bitcode`, is tested in `symm_comm/tests/build_bitcode.rs`.)

use std::path::PathBuf;

use device_build::CacheRoot;
use layer_tail::triton::{self, Python};
use layer_tail::Dtype;

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
