//! The lesson's own kernel through the jit route, on the CPU, with the real
//! NVIDIA wheels (NVRTC and nvJitLink need no GPU): NVIDIA's kernel on
//! nccl_device_wrapper.h's C API, compiled and linked with NCCL 2.32.3's
//! device library into a cubin (lesson 05b's fast two-shot is tested the
//! same way in `05b_lsa_fast/tests/jit_build.rs`, and the benchmark's build,
//! with NCCL's primitives beside both, in `benchmarks/tests/jit_build.rs`).
//! Prints the cold and the cached build time.
//!
//! The wheels come from `DEVICE_BUILD_WHEELS` (filled by `.ci/jit-wheels
//! DIR`); without it the test skips with a `skipped:` line, unless
//! `DEVICE_BUILD_WHEELS_REQUIRED=1` (CI), when it fails.

use std::path::PathBuf;

use common::NcclVersion;
use device_build::route::{choose, Build, Plan};
use device_build::{jit, CacheRoot, Env};

#[test]
fn the_lessons_kernels_build_through_the_jit_route() {
    let site = std::env::var_os("DEVICE_BUILD_WHEELS")
        .map(PathBuf::from)
        .filter(|d| d.join("nvidia/nccl/lib/libnccl_device.ltoir").is_file());
    let Some(site) = site else {
        testkit::skip(
            "the NVIDIA wheels staged in DEVICE_BUILD_WHEELS (stage them with .ci/jit-wheels DIR)",
            Some("DEVICE_BUILD_WHEELS_REQUIRED"),
        );
        return;
    };
    let tmp = tempfile::tempdir().unwrap();
    let cache = CacheRoot::Kept(tmp.path().join("cache"));
    let library = site.join("nvidia/nccl/lib/libnccl.so.2");
    // auto takes jit here: the device library, NVRTC and nvJitLink are all in
    // the wheels, and the process has no nvcc to fall back on anyway.
    let env = Env {
        nvcc: Some(tmp.path().join("no-nvcc").into()),
        ..Env::default()
    };
    // The lesson's build: NVIDIA's kernel.
    {
        let started = std::time::Instant::now();
        let chosen = choose(
            Build::Auto,
            &env,
            "sm_90",
            NcclVersion::new(2, 32, 3),
            &library,
            &device_lsa::program(),
        )
        .unwrap();
        // Finding and loading NVRTC and nvJitLink (their versions are part of
        // the cache key): paid on every run, cached or not.
        let choosing = started.elapsed().as_secs_f64();
        assert!(
            chosen.why.starts_with("auto: NCCL 2.32.3 ships "),
            "{}",
            chosen.why
        );
        let Plan::Jit(target) = &chosen.plan else {
            panic!("auto took {}", chosen.plan.name())
        };
        let cold = jit::build_or_reuse(target, &cache).unwrap();
        let cached = jit::build_or_reuse(target, &cache).unwrap();
        assert!(cold.compiled && !cached.compiled);
        let cubin = std::fs::read(cold.file(jit::CUBIN)).unwrap();
        let kernel = "allreduce_lsa";
        let name = format!(".text.{kernel}\0");
        assert!(
            cubin.windows(name.len()).any(|w| w == name.as_bytes()),
            "the cubin has no {kernel}"
        );
        eprintln!(
            "the lesson's jit kernel ({} source, one link): route chosen (NVRTC and nvJitLink loaded) in {:.1} ms; build cold {:.2} s, cached {:.2} ms; cubin {} bytes",
            target.kernels.len(),
            choosing * 1e3,
            cold.seconds,
            cached.seconds * 1e3,
            cubin.len()
        );
    }
}
