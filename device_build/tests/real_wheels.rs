//! The jit route with the real NVIDIA wheels, on the CPU: NVRTC and nvJitLink
//! need no GPU, so a cubin is built here for real.
//!
//! The wheels come from `DEVICE_BUILD_WHEELS`, a directory in site-packages
//! layout (`nvidia/nccl`, `nvidia/cu13`) that `.ci/jit-wheels DIR` fills.
//! Without it these tests skip, each with a `skipped:` line
//! ([`testkit::skip`]), unless `DEVICE_BUILD_WHEELS_REQUIRED=1` (CI sets
//! it), when they fail.

use std::path::{Path, PathBuf};

use common::{CannotRun, NcclVersion};
use device_build::route::{jit_target, Program};
use device_build::shim::LAYOUT_PROBE;
use device_build::{jit, CacheRoot, Env, Source};

/// The staged wheels, or None (after a `skipped:` line) when the test may skip.
fn wheels() -> Option<PathBuf> {
    let dir = std::env::var_os("DEVICE_BUILD_WHEELS").map(PathBuf::from);
    match dir {
        Some(dir) if dir.join("nvidia/nccl/lib/libnccl_device.ltoir").is_file() => Some(dir),
        other => {
            let why = match other {
                Some(dir) => format!("{} holds none", dir.display()),
                None => "DEVICE_BUILD_WHEELS is not set".into(),
            };
            testkit::skip(
                &format!("the staged NVIDIA wheels ({why}; stage them with .ci/jit-wheels DIR)"),
                Some("DEVICE_BUILD_WHEELS_REQUIRED"),
            );
            None
        }
    }
}

const NCCL: NcclVersion = NcclVersion::new(2, 32, 3);

/// A kernel on the wrapper's C API: a barrier, a peer pointer, a reduce-copy.
const KERNEL: Source = Source {
    file: "probe_kernel.cu",
    text: r#"
#include <nccl_device/utility.h>
#include <nccl_device/coop.h>
#include <nccl_device/core.h>
#include <nccl_device_wrapper.h>
extern "C" __global__ void probe_kernel(ncclWindow_t w, size_t n, ncclDevComm devComm) {
  ncclTeam lsa; lsa.nRanks = devComm.lsaSize; lsa.rank = devComm.lsaRank; lsa.stride = 1;
  ncclCoopAny cta; ncclCoopAnyInitCta(&cta);
  alignas(ncclLsaBarrierSession_C) unsigned char storage[sizeof(ncclLsaBarrierSession_C)];
  ncclLsaBarrierSession_C* bar = reinterpret_cast<ncclLsaBarrierSession_C*>(storage);
  ncclLsaBarrierSessionInit(bar, cta, devComm, lsa, devComm.lsaBarrier, blockIdx.x);
  ncclLsaBarrierSessionSync(bar, cta, cuda::memory_order_acquire);
  float* mine = (float*)ncclGetPeerPointerTeam(w, 0, lsa, lsa.rank);
  mine[threadIdx.x % n] += 1.0f;
  ncclLsaBarrierSessionSync(bar, cta, cuda::memory_order_release);
  ncclLsaBarrierSessionDestroy(bar);
}
"#,
};

fn program(kernels: Vec<Source>) -> Program {
    Program {
        nvcc_kernels: vec![],
        jit_kernels: kernels,
        defines: vec![],
        wrapper_names: vec!["ncclLsaBarrierSessionInit", "ncclGetPeerPointerTeam"],
    }
}

fn library(site: &Path) -> PathBuf {
    // Only its directory matters: the device library and the headers are
    // found beside it, and the wheels' site-packages above it.
    site.join("nvidia/nccl/lib/libnccl.so.2")
}

/// The lines a jit build prints are made from the very options and inputs
/// it gives NVRTC and nvJitLink (`jit::nvrtc_line`, `jit::link_line`), with
/// the stand-in headers where the build now is; a cache hit prints none.
#[test]
fn the_jit_build_says_which_nvrtc_and_nvjitlink_calls_it_made() {
    let Some(site) = wheels() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let cache = CacheRoot::Kept(tmp.path().join("cache"));
    let target = jit_target(
        &Env::default(),
        "sm_90",
        NCCL,
        &library(&site),
        &program(vec![LAYOUT_PROBE, KERNEL]),
    )
    .unwrap();
    let (cold, lines) = jit::build_or_reuse_saying(&target, &cache).unwrap();
    assert!(cold.compiled);
    let stand_ins = cold.dir.join("nvrtc-include");
    assert!(stand_ins.is_dir());
    let options = target.nvrtc_options(&stand_ins);
    let mut expected: Vec<String> = target
        .kernels
        .iter()
        .map(|k| jit::nvrtc_line(&target.nvrtc, &options, k.file))
        .collect();
    let inputs: Vec<String> = target
        .kernels
        .iter()
        .map(|k| k.file.to_string())
        .chain([target.device_library.display().to_string()])
        .collect();
    expected.push(jit::link_line(
        &target.nvjitlink,
        &target.arch,
        &inputs,
        &cold.file(jit::CUBIN),
    ));
    assert_eq!(lines, expected);
    eprintln!("{}", lines.join("\n"));
    let (cached, lines) = jit::build_or_reuse_saying(&target, &cache).unwrap();
    assert!(!cached.compiled);
    assert!(lines.is_empty(), "{lines:?}");
}

#[test]
fn a_cubin_is_built_from_the_wheels_alone_and_then_reused() {
    let Some(site) = wheels() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let cache = CacheRoot::Kept(tmp.path().join("cache"));
    let target = jit_target(
        &Env::default(),
        "sm_90",
        NCCL,
        &library(&site),
        &program(vec![LAYOUT_PROBE, KERNEL]),
    )
    .unwrap();
    assert!(
        target.nvrtc.path.starts_with(&site),
        "{}",
        target.nvrtc.path.display()
    );
    let cold = jit::build_or_reuse(&target, &cache).unwrap();
    assert!(cold.compiled);
    let cubin = std::fs::read(cold.file(jit::CUBIN)).unwrap();
    assert_eq!(&cubin[..4], b"\x7fELF", "not a cubin");
    let cached = jit::build_or_reuse(&target, &cache).unwrap();
    assert!(!cached.compiled);
    eprintln!(
        "jit build with NVRTC {}.{} and nvJitLink {}.{}: cold {:.2} s, cached {:.2} ms, cubin {} bytes",
        target.nvrtc.version.0,
        target.nvrtc.version.1,
        target.nvjitlink.version.0,
        target.nvjitlink.version.1,
        cold.seconds,
        cached.seconds * 1e3,
        cubin.len()
    );
}

/// A site-packages copy of the wheels, made of symlinks, with NCCL's files
/// replaced as the test says.
fn fake_site(site: &Path, tmp: &Path) -> PathBuf {
    let fake = tmp.join("site");
    std::fs::create_dir_all(fake.join("nvidia/nccl/lib")).unwrap();
    std::os::unix::fs::symlink(site.join("nvidia/cu13"), fake.join("nvidia/cu13")).unwrap();
    fake
}

#[test]
fn a_truncated_device_library_is_refused_with_the_fix() {
    let Some(site) = wheels() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let fake = fake_site(&site, tmp.path());
    std::os::unix::fs::symlink(
        site.join("nvidia/nccl/include"),
        fake.join("nvidia/nccl/include"),
    )
    .unwrap();
    let real = std::fs::read(site.join("nvidia/nccl/lib/libnccl_device.ltoir")).unwrap();
    std::fs::write(
        fake.join("nvidia/nccl/lib/libnccl_device.ltoir"),
        &real[..real.len() / 2],
    )
    .unwrap();
    let target = jit_target(
        &Env::default(),
        "sm_90",
        NCCL,
        &library(&fake),
        &program(vec![KERNEL]),
    )
    .unwrap();
    let err = jit::build_or_reuse(&target, &CacheRoot::Kept(tmp.path().join("cache"))).unwrap_err();
    let cannot = err.downcast_ref::<CannotRun>().expect("exit code 2");
    assert!(cannot.reason.contains("corrupt or truncated"), "{cannot}");
    assert!(cannot.fix.contains("--build nvcc"), "{}", cannot.fix);
}

#[test]
fn headers_nvrtc_rejects_name_the_release_and_the_nvcc_route() {
    let Some(site) = wheels() else { return };
    let tmp = tempfile::tempdir().unwrap();
    let fake = fake_site(&site, tmp.path());
    std::os::unix::fs::symlink(
        site.join("nvidia/nccl/lib/libnccl_device.ltoir"),
        fake.join("nvidia/nccl/lib/libnccl_device.ltoir"),
    )
    .unwrap();
    // NCCL's headers, with a host-only declaration in core.h as 2.31.2 has.
    let real = site.join("nvidia/nccl/include");
    let include = fake.join("nvidia/nccl/include");
    std::fs::create_dir_all(include.join("nccl_device")).unwrap();
    for entry in std::fs::read_dir(&real).unwrap().flatten() {
        if entry.file_name() != "nccl_device" {
            std::os::unix::fs::symlink(entry.path(), include.join(entry.file_name())).unwrap();
        }
    }
    for entry in std::fs::read_dir(real.join("nccl_device"))
        .unwrap()
        .flatten()
    {
        let to = include.join("nccl_device").join(entry.file_name());
        if entry.file_name() == "core.h" {
            let text = std::fs::read_to_string(entry.path()).unwrap();
            std::fs::write(to, text + "\n__host__ int ncclHostOnlyDeclaration(void);\n").unwrap();
        } else {
            std::os::unix::fs::symlink(entry.path(), to).unwrap();
        }
    }
    let target = jit_target(
        &Env::default(),
        "sm_90",
        NCCL,
        &library(&fake),
        &program(vec![KERNEL]),
    )
    .unwrap();
    let err = jit::build_or_reuse(&target, &CacheRoot::Kept(tmp.path().join("cache"))).unwrap_err();
    let cannot = err.downcast_ref::<CannotRun>().expect("exit code 2");
    assert!(
        cannot.reason.contains("against NCCL 2.32.3's headers"),
        "{cannot}"
    );
    assert!(cannot.reason.contains("__host__"), "{cannot}");
    assert!(cannot.fix.contains("--build nvcc"), "{}", cannot.fix);
}

#[test]
fn an_nvjitlink_older_than_the_device_library_is_named_with_the_fix() {
    let Some(site) = wheels() else { return };
    // nvJitLink 13.0, the GPU machine's own: 2.32.3's LTO-IR is too new for it.
    let old = site.join("nvjitlink-13.0/nvidia/cu13/lib/libnvJitLink.so.13");
    let nvjitlink = jit::NvJitLink::load(&old).unwrap();
    assert_eq!(nvjitlink.version, (13, 0));
    let device_library = site.join("nvidia/nccl/lib/libnccl_device.ltoir");
    let bytes = std::fs::read(&device_library).unwrap();
    let version = jit::check_ltoir(&bytes, &device_library).unwrap();
    let failure = nvjitlink
        .link("sm_90", &[("libnccl_device.ltoir", &bytes)])
        .unwrap()
        .expect_err("nvJitLink 13.0 linked 2.32.3's device library");
    assert_eq!(
        failure.status,
        jit::NVJITLINK_ERROR_OUTDATED_LIBRARY,
        "{failure:?}"
    );
    let cannot = jit::link_error(&failure, nvjitlink.version, &old, &device_library, version);
    assert!(
        cannot
            .reason
            .contains("is older than the CUDA that built libnccl_device.ltoir"),
        "{cannot}"
    );
    assert!(
        cannot.fix.contains("pip install -U nvidia-nvjitlink"),
        "{}",
        cannot.fix
    );
    assert!(cannot.fix.contains("--build nvcc"), "{}", cannot.fix);
}
