//! The device library and the user kernels built on the CPU, with the real
//! NVIDIA wheels (NVRTC and nvJitLink need no GPU):
//!
//! * the NCCL backend through the jit route: NVRTC against NCCL 2.32.3's
//!   `nccl_device_wrapper.h`, nvJitLink with its `libnccl_device.ltoir`
//!   (wheels from `DEVICE_BUILD_WHEELS`, filled by `.ci/jit-wheels DIR`);
//! * the NVSHMEM backend: NVRTC against NVSHMEM's headers, nvJitLink with
//!   `libnvshmem_device.a` (NVSHMEM from `NVSHMEM_HOME`, e.g. the unpacked
//!   `nvidia-nvshmem-cu13` wheel's `nvidia/nvshmem`).
//!
//! Each test skips with a `skipped:` line when its pieces are missing, unless
//! `DEVICE_BUILD_WHEELS_REQUIRED=1` (CI), when the NCCL one fails.

use std::path::PathBuf;

use common::NcclVersion;
use device_build::route::{choose, Build, Plan};
use device_build::{jit, nvshmem, CacheRoot, Env};
use layer_tail::{ALL_REDUCE_KERNEL, COMPUTE_KERNEL, EPILOGUE_KERNEL, FUSED_KERNEL};

fn wheels() -> Option<PathBuf> {
    let site = std::env::var_os("DEVICE_BUILD_WHEELS")
        .map(PathBuf::from)
        .filter(|d| d.join("nvidia/nccl/lib/libnccl_device.ltoir").is_file());
    if site.is_none() {
        testkit::skip(
            "the NVIDIA wheels staged in DEVICE_BUILD_WHEELS (stage them with .ci/jit-wheels DIR)",
            Some("DEVICE_BUILD_WHEELS_REQUIRED"),
        );
    }
    site
}

fn assert_has_kernels(cubin: &[u8]) {
    for kernel in [
        FUSED_KERNEL,
        COMPUTE_KERNEL,
        EPILOGUE_KERNEL,
        ALL_REDUCE_KERNEL,
    ] {
        let name = format!(".text.{kernel}\0");
        assert!(
            cubin.windows(name.len()).any(|w| w == name.as_bytes()),
            "the cubin has no {kernel}"
        );
    }
}

#[test]
fn the_nccl_backend_builds_through_the_jit_route() {
    let Some(site) = wheels() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let cache = CacheRoot::Kept(tmp.path().join("cache"));
    // NVRTC from the wheels, or the one `NVRTC` names (the GPU machine's
    // NVRTC 13.0 rejected what 13.5 took: call 17).
    let env = Env {
        nvcc: Some(tmp.path().join("no-nvcc").into()),
        nvrtc: std::env::var_os("NVRTC"),
        ..Env::default()
    };
    let started = std::time::Instant::now();
    let chosen = choose(
        Build::Auto,
        &env,
        "sm_90",
        NcclVersion::new(2, 32, 3),
        &site.join("nvidia/nccl/lib/libnccl.so.2"),
        &layer_tail::nccl_program(),
    )
    .unwrap();
    let Plan::Jit(target) = &chosen.plan else {
        panic!("auto took {}", chosen.plan.name())
    };
    let built = jit::build_or_reuse(target, &cache).unwrap();
    assert!(built.compiled);
    let cubin = std::fs::read(built.file(jit::CUBIN)).unwrap();
    assert_has_kernels(&cubin);
    // KEEP_CUBIN=DIR keeps the cubin, for `cuobjdump -res-usage` (PERF_NOTES.md).
    if let Some(dir) = std::env::var_os("KEEP_CUBIN") {
        let kept = PathBuf::from(dir).join("symm_tp_tail_nccl_sm_90.cubin");
        std::fs::write(&kept, &cubin).unwrap();
        eprintln!("kept {}", kept.display());
    }
    eprintln!(
        "NCCL backend, jit route: built in {:.2} s; cubin {} bytes",
        started.elapsed().as_secs_f64(),
        cubin.len()
    );
}

#[test]
fn the_nvshmem_backend_builds_with_libnvshmem_device() {
    let Some(site) = wheels() else { return };
    let search = nvshmem::Search::from_process();
    if search.nvshmem_home.is_none() {
        testkit::skip(
            "NVSHMEM_HOME (unpack the nvidia-nvshmem-cu13 wheel and point it at nvidia/nvshmem)",
            None,
        );
        return;
    }
    let found = nvshmem::find(&search).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let cache = CacheRoot::Kept(tmp.path().join("cache"));
    // NVRTC, nvJitLink and the CUDA headers from the staged wheels.
    let env = Env {
        nvrtc: Some(site.join("nvidia/cu13/lib/libnvrtc.so.13").into()),
        nvjitlink: Some(site.join("nvidia/cu13/lib/libnvJitLink.so.13").into()),
        cuda_home: Some(site.join("nvidia/cu13").into()),
        ..Env::default()
    };
    let target = nvshmem::Target::find(
        &env,
        "sm_90",
        found,
        layer_tail::source(),
        layer_tail::defines(layer_tail::Backend::Nvshmem),
    )
    .unwrap();
    let started = std::time::Instant::now();
    let built = nvshmem::build(&target, &cache).unwrap();
    assert!(built.build.compiled);
    let cubin = std::fs::read(built.cubin()).unwrap();
    assert_has_kernels(&cubin);
    eprintln!(
        "NVSHMEM backend: built in {:.2} s; cubin {} bytes",
        started.elapsed().as_secs_f64(),
        cubin.len()
    );
    // What the lesson prints: the NVRTC call, then the nvJitLink call, each
    // with every option and the directory the build is now in.
    let notes = built.command_notes();
    for line in &notes {
        eprintln!("{line}");
    }
    let dir = built.build.dir.display().to_string();
    let device_library = built.nvshmem.device_library.display();
    assert_eq!(notes.len(), 2, "{notes:#?}");
    assert!(
        notes[0].starts_with(&format!(
            "note: ran: nvrtc -arch=sm_90 -dlto -rdc=true -default-device -std=c++17 \
             --pre-include={dir}/prelude.h -DSYMM_WITH_NVSHMEM=1 -DSYMM_THREADS=512 -I"
        )),
        "{}",
        notes[0]
    );
    assert!(
        notes[0].ends_with(&format!(
            " symm_tp_tail.cu  # nvrtcCompileProgram, {}, to LTO-IR",
            target.nvrtc
        )),
        "{}",
        notes[0]
    );
    assert_eq!(
        notes[1],
        format!(
            "note: ran: nvjitlink -arch=sm_90 -lto symm_tp_tail.cu {device_library} \
             -o {dir}/symm_nvshmem.cubin  # nvJitLinkCreate, nvJitLinkAddData (LTO-IR, archive), \
             nvJitLinkComplete, {}",
            target.nvjitlink
        )
    );
    // The second time the cache holds it: the cubin it used, nothing ran.
    let again = nvshmem::build(&target, &cache).unwrap();
    assert!(!again.build.compiled);
    assert_eq!(
        again.command_notes(),
        [format!("note: cached: {dir}/symm_nvshmem.cubin")]
    );
}
