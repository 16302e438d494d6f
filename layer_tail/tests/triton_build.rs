//! The Triton kernel built on the CPU (Triton compiles without a GPU): the
//! lesson's own build path (`device_build::triton` with
//! `layer_tail::triton::program`) runs `tp_tail.py` with
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

use device_build::triton::{self as route, Python};
use device_build::CacheRoot;
use layer_tail::triton::{self, Meta};
use layer_tail::Dtype;

fn pieces() -> Option<(Python, PathBuf)> {
    let nccl_bc = std::env::var_os("DEVICE_BUILD_WHEELS")
        .map(|d| PathBuf::from(d).join("nvidia/nccl/lib/libnccl_device.bc"))
        .filter(|p| p.is_file());
    let python = std::env::var_os("TRITON_PYTHON").and_then(|p| {
        let found = route::find_python(&[PathBuf::from(p)]);
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
    let nccl_library = nccl_bc.with_file_name("libnccl.so.2");
    for dtype in [Dtype::F32, Dtype::Bf16] {
        let program = triton::program(dtype);
        let built = route::build(&python, &program, 90, &nccl_library, &nccl_bc, &cache)
            .unwrap_or_else(|e| panic!("{}: {e:#}", dtype.name()));
        assert!(built.build.compiled);
        let cubin = std::fs::read(built.file(triton::CUBIN)).unwrap();
        assert_eq!(&cubin[..4], b"\x7fELF", "not a cubin");
        let meta = Meta::load(&built.build).unwrap();
        assert_eq!(meta.threads(), 512);
        // The library and NCCL's device API are in the kernel: no call
        // leaves it (tp_tail.py refuses such PTX; this checks it said so).
        let ptx = std::fs::read_to_string(built.file("tp_tail_triton.ptx")).unwrap();
        assert!(ptx.contains(".entry tp_tail_triton"));
        assert!(
            !ptx.lines().any(|l| l.starts_with(".extern .func")),
            "unresolved functions in the PTX"
        );
        // What the lesson prints: the one command that ran, Python running
        // the script where the build is now.
        let dir = built.build.dir.display().to_string();
        let notes = built.command_notes();
        eprintln!("{}", notes.join("\n"));
        assert_eq!(
            notes,
            [format!(
                "note: ran: cd {dir} && {} {dir}/src/tp_tail.py --arch 90 --dtype {} \
                 --nccl-device-bc {} --out {dir}  # Triton {}; no TRITON_* variable but \
                 TRITON_CACHE_DIR={dir}/triton-cache",
                python.path.display(),
                ["f32", "bf16"][(dtype == Dtype::Bf16) as usize],
                std::path::absolute(&nccl_bc).unwrap().display(),
                python.triton
            )]
        );
        // The second time it comes from the cache: the files it used.
        let again = route::build(&python, &program, 90, &nccl_library, &nccl_bc, &cache).unwrap();
        assert!(!again.build.compiled);
        assert_eq!(
            again.command_notes(),
            [
                format!("note: cached: {dir}/tp_tail_triton.cubin"),
                format!("note: cached: {dir}/tp_tail_triton.json")
            ]
        );
    }
}
