//! Choosing the route: `--build auto|nvcc|jit`.
//!
//! `auto` takes the jit route when the loaded NCCL ships its device library
//! (`libnccl_device.ltoir`), its wrapper has the names this build's kernels
//! call, its device-communicator layout is one this build knows, and a usable
//! NVRTC, nvJitLink and the CUDA headers are found; otherwise it takes nvcc.
//! The choice comes with the reason, which the program prints.

use std::path::Path;

use anyhow::Result;
use common::{CannotRun, NcclVersion};

use crate::env::Env;
use crate::{jit, nvcc, Source};

/// Which route builds the kernels.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Build {
    /// jit when the loaded NCCL and the found tools allow it, else nvcc.
    Auto,
    /// nvcc against the loaded NCCL's headers, with a host shim (NCCL 2.28+).
    Nvcc,
    /// NVRTC + nvJitLink with NCCL's libnccl_device.ltoir (NCCL 2.32.3), no toolkit.
    Jit,
}

/// A program's device code, for both routes.
#[derive(Debug, Clone)]
pub struct Program {
    /// Sources on the C++ device API, for nvcc.
    pub nvcc_kernels: Vec<Source>,
    /// Sources on nccl_device_wrapper.h's C API, for NVRTC + nvJitLink.
    pub jit_kernels: Vec<Source>,
    /// `-DNAME=VALUE` for every source, on both routes.
    pub defines: Vec<(String, String)>,
    /// The wrapper functions the jit sources call: checked before compiling.
    pub wrapper_names: Vec<&'static str>,
}

/// The build a route will make.
pub enum Plan {
    Nvcc(nvcc::Target),
    Jit(Box<jit::Target>),
}

impl Plan {
    pub fn name(&self) -> &'static str {
        match self {
            Plan::Nvcc(_) => "nvcc",
            Plan::Jit(_) => "jit",
        }
    }

    /// The NCCL headers the plan builds against.
    pub fn nccl_include(&self) -> &Path {
        match self {
            Plan::Nvcc(target) => &target.include,
            Plan::Jit(target) => &target.nccl_include,
        }
    }
}

/// The route taken and why.
pub struct Chosen {
    pub plan: Plan,
    pub why: String,
}

/// Everything the nvcc route needs: nvcc, the NCCL headers of the loaded
/// release, their version checked.
pub fn nvcc_target(
    env: &Env,
    arch: &str,
    nccl: NcclVersion,
    library: &Path,
    program: &Program,
) -> Result<nvcc::Target> {
    let nvcc = nvcc::find_nvcc(env)?;
    let include = nvcc::find_nccl_headers(env, library)?;
    nvcc::check_same_release(nvcc::header_version(&include)?, &include, nccl, library)?;
    Ok(nvcc::Target {
        arch: arch.into(),
        nvcc_version: nvcc::nvcc_version(&nvcc)?,
        nvcc,
        include,
        nccl,
        library: library.into(),
        defines: program.defines.clone(),
        kernels: program.nvcc_kernels.clone(),
    })
}

/// Everything the jit route needs, each piece checked in the order a user
/// would fix them: the device library, the headers and their names, the
/// release's layout, NVRTC, nvJitLink and their versions, the CUDA headers.
pub fn jit_target(
    env: &Env,
    arch: &str,
    nccl: NcclVersion,
    library: &Path,
    program: &Program,
) -> Result<jit::Target> {
    let device_library = jit::find_device_library(env, library, nccl)?;
    let nccl_include = nvcc::find_nccl_headers(env, library)?;
    nvcc::check_same_release(
        nvcc::header_version(&nccl_include)?,
        &nccl_include,
        nccl,
        library,
    )?;
    let wrapper_path = nccl_include.join("nccl_device_wrapper.h");
    let wrapper = std::fs::read_to_string(&wrapper_path).map_err(|e| {
        CannotRun::new(
            format!(
                "NCCL {nccl} has no readable {} ({e})",
                wrapper_path.display()
            ),
            format!("use NCCL 2.32.3, or {}", jit::USE_NVCC),
        )
    })?;
    jit::check_wrapper_names(&wrapper, &wrapper_path, nccl, &program.wrapper_names)?;
    jit::check_known_release(nccl)?;
    let sites = jit::site_packages(env, library);
    let nvrtc_path = jit::find_nvrtc(env, &sites)?;
    let nvjitlink_path = jit::find_nvjitlink(env, &sites)?;
    let nvrtc = jit::Nvrtc::load(&nvrtc_path).map_err(|e| {
        refused_or(e, |e| {
            CannotRun::new(
                format!("NVRTC at {} cannot be loaded: {e:#}", nvrtc_path.display()),
                format!(
                    "pip install --force-reinstall nvidia-cuda-nvrtc, or {}",
                    jit::USE_NVCC
                ),
            )
        })
    })?;
    let nvjitlink = jit::NvJitLink::load(&nvjitlink_path).map_err(|e| {
        refused_or(e, |e| {
            CannotRun::new(
                format!(
                    "nvJitLink at {} cannot be loaded: {e:#}",
                    nvjitlink_path.display()
                ),
                format!("pip install -U nvidia-nvjitlink, or {}", jit::USE_NVCC),
            )
        })
    })?;
    jit::check_versions(nvrtc.version, nvjitlink.version, &nvjitlink.path)?;
    let cuda_include = jit::find_cuda_headers(env, &sites)?;
    Ok(jit::Target {
        arch: arch.into(),
        nvrtc,
        nvjitlink,
        nccl_include,
        cuda_include,
        device_library,
        nccl,
        library: library.into(),
        defines: program.defines.clone(),
        kernels: program.jit_kernels.clone(),
    })
}

/// A load's own refusal (a library another user could change, or its
/// NVRTC builtins) as it is; any other failure as `otherwise` says.
fn refused_or(
    error: anyhow::Error,
    otherwise: impl FnOnce(&anyhow::Error) -> CannotRun,
) -> CannotRun {
    match error.downcast_ref::<CannotRun>() {
        Some(refused) => refused.clone(),
        None => otherwise(&error),
    }
}

/// The route for `build`, and why. `auto` falls back to nvcc when the jit
/// route is not available; when neither is, the error names both fixes.
pub fn choose(
    build: Build,
    env: &Env,
    arch: &str,
    nccl: NcclVersion,
    library: &Path,
    program: &Program,
) -> Result<Chosen> {
    let jit_why = |t: &jit::Target| {
        let headers: Vec<String> = t
            .cuda_include
            .iter()
            .map(|d| d.display().to_string())
            .collect();
        format!(
            "NCCL {nccl} ships {}; {}, {}, CUDA headers {}",
            t.device_library.display(),
            t.nvrtc,
            t.nvjitlink,
            headers.join(", ")
        )
    };
    match build {
        Build::Nvcc => {
            let target = nvcc_target(env, arch, nccl, library, program)?;
            let why = format!("--build nvcc: {}", target.nvcc.display());
            Ok(Chosen {
                plan: Plan::Nvcc(target),
                why,
            })
        }
        Build::Jit => {
            let target = jit_target(env, arch, nccl, library, program)?;
            let why = format!("--build jit: {}", jit_why(&target));
            Ok(Chosen {
                plan: Plan::Jit(Box::new(target)),
                why,
            })
        }
        Build::Auto => {
            let jit_error = match jit_target(env, arch, nccl, library, program) {
                Ok(target) => {
                    let why = format!("auto: {}", jit_why(&target));
                    return Ok(Chosen {
                        plan: Plan::Jit(Box::new(target)),
                        why,
                    });
                }
                Err(e) => e,
            };
            let nvcc_error = match nvcc_target(env, arch, nccl, library, program) {
                Ok(target) => {
                    let why = format!(
                        "auto: no jit route ({}); nvcc found at {}",
                        reason(&jit_error),
                        target.nvcc.display()
                    );
                    return Ok(Chosen {
                        plan: Plan::Nvcc(target),
                        why,
                    });
                }
                Err(e) => e,
            };
            Err(neither(&jit_error, &nvcc_error).into())
        }
    }
}

/// Builds `chosen` with `build`. With `--build auto`, a jit build that fails
/// for want of a tool able to do it (an nvJitLink too old for NCCL's device
/// library, say: only linking tells, and `choose` cannot) is retried through
/// nvcc where `choose_nvcc` finds it, and `chosen` then names that route and
/// why: auto promises a route that works. With neither, both fixes.
pub fn build_or_fall_back<B>(
    requested: Build,
    chosen: &mut Chosen,
    mut build: impl FnMut(&Plan) -> Result<B>,
    choose_nvcc: impl FnOnce() -> Result<Chosen>,
) -> Result<B> {
    let jit_error = match (build(&chosen.plan), requested, &chosen.plan) {
        (Err(e), Build::Auto, Plan::Jit(_)) if e.downcast_ref::<CannotRun>().is_some() => e,
        (result, _, _) => return result,
    };
    let nvcc = choose_nvcc()
        .map_err(|nvcc_error| anyhow::Error::from(neither(&jit_error, &nvcc_error)))?;
    chosen.why = format!(
        "auto: the jit build failed ({}); {}",
        reason(&jit_error),
        nvcc.why
    );
    chosen.plan = nvcc.plan;
    build(&chosen.plan)
}

/// The reason of a route's error, without its fix.
pub fn reason(error: &anyhow::Error) -> String {
    match error.downcast_ref::<CannotRun>() {
        Some(cannot) => cannot.reason.clone(),
        None => format!("{error:#}"),
    }
}

fn fix(error: &anyhow::Error) -> String {
    error
        .downcast_ref::<CannotRun>()
        .map(|c| c.fix.clone())
        .unwrap_or_default()
}

/// Neither route can build: one line per route saying what is missing
/// (without the paths searched, which each route's own error lists), and one
/// fix per route. The jit route's fix is the one command that installs all
/// it needs, whichever piece was missing; the nvcc route's is its own.
pub fn neither(jit_error: &anyhow::Error, nvcc_error: &anyhow::Error) -> CannotRun {
    let missing = |error: &anyhow::Error| {
        let reason = reason(error);
        // One place looked in is what the user named (NVRTC=...): kept.
        match reason.split_once(" (looked for ") {
            Some((what, looked)) => match looked.strip_suffix(')') {
                Some(one) if !one.is_empty() && !one.contains(", ") => format!("{what} at {one}"),
                _ => what.to_string(),
            },
            None => reason,
        }
    };
    let nvcc_fix = fix(nvcc_error)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .replace("this lesson compiles its kernel at run time: ", "");
    CannotRun::new(
        format!(
            "neither route can build the kernels:\n  jit: {}\n  nvcc: {}",
            missing(jit_error),
            missing(nvcc_error)
        ),
        format!(
            "jit route (no toolkit): pip install -U nvidia-nccl-cu13==2.32.3 nvidia-cuda-nvrtc nvidia-nvjitlink nvidia-cuda-cccl nvidia-cuda-runtime\n\
             nvcc route: {nvcc_fix}"
        ),
    )
}

/// The preflight's check, before any rank starts and before NCCL is loaded:
/// nvcc is found, or NVRTC is, where the jit route will look for it (`$NVRTC`,
/// the site-packages of the NCCL the launcher will load, of the active
/// Python environment, or a toolkit), so that one route may work. Err names
/// both fixes.
pub fn some_route_found(env: &Env) -> Result<(), CannotRun> {
    let nvcc_error = match nvcc::find_nvcc(env) {
        Ok(_) => return Ok(()),
        Err(e) => e,
    };
    // The NCCL the launcher loads, found as it finds it (NCCL_HOME, the
    // Python environments, pip install --user): its site-packages holds the
    // wheels that came with it.
    let nccl_env = common::nccl_path::Env {
        nccl_home: env.nccl_home.clone(),
        virtual_env: env.virtual_env.clone(),
        conda_prefix: env.conda_prefix.clone(),
        path: env.path.clone(),
        home: env.home.clone(),
    };
    let nccl = common::nccl_path::candidates(&nccl_env)
        .into_iter()
        .next()
        .map_or_else(|| Path::new("/").to_path_buf(), |c| c.library);
    let sites = jit::site_packages(env, &nccl);
    let jit_error = match jit::find_nvrtc(env, &sites) {
        Ok(_) => return Ok(()),
        Err(e) => e,
    };
    Err(neither(&jit_error.into(), &nvcc_error.into()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn with_no_tool_at_all_both_fixes_are_named() {
        let tmp = tempfile::tempdir().unwrap();
        let env = Env {
            nvcc: Some(tmp.path().join("nvcc").into()),
            nvrtc: Some(tmp.path().join("libnvrtc.so").into()),
            ..Env::default()
        };
        let err = some_route_found(&env).unwrap_err();
        assert!(err.reason.contains("neither route"), "{err}");
        assert!(err.reason.contains("nvcc not found: NVCC="), "{err}");
        assert!(
            err.reason.contains("NVRTC (libnvrtc.so) not found"),
            "{err}"
        );
        assert!(err.fix.contains(" nvidia-cuda-nvrtc "), "{}", err.fix);
        assert!(err.fix.contains("install the CUDA toolkit"), "{}", err.fix);
    }

    /// The documented pip layout (05_device_lsa/README.md, "Where the
    /// pieces are looked for"): NCCL's wheel at
    /// `<site-packages>/nvidia/nccl/lib/libnccl.so.2`, NVRTC and nvJitLink
    /// in the same site-packages, from the CUDA 13 wheels
    /// (`nvidia/cu13/lib`) or the CUDA 12 ones (`nvidia/cuda_nvrtc/lib`,
    /// `nvidia/nvjitlink/lib`).
    fn pip_layout(tmp: &Path, cuda13: bool) -> std::path::PathBuf {
        let site = tmp.join("venv/lib/python3.12/site-packages");
        let files: &[&str] = if cuda13 {
            &[
                "nvidia/cu13/lib/libnvrtc.so.13",
                "nvidia/cu13/lib/libnvJitLink.so.13",
            ]
        } else {
            &[
                "nvidia/cuda_nvrtc/lib/libnvrtc.so.12",
                "nvidia/nvjitlink/lib/libnvJitLink.so.12",
            ]
        };
        for file in ["nvidia/nccl/lib/libnccl.so.2", "nvidia/nccl/include/nccl.h"]
            .iter()
            .chain(files)
        {
            let path = site.join(file);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, "").unwrap();
        }
        site
    }

    #[test]
    fn the_tools_beside_an_nccl_named_by_nccl_home_are_found() {
        for cuda13 in [true, false] {
            let tmp = tempfile::tempdir().unwrap();
            let site = pip_layout(tmp.path(), cuda13);
            // No toolkit, no active Python environment: only NCCL_HOME.
            let env = Env {
                nccl_home: Some(site.join("nvidia/nccl").into()),
                nvcc: Some(tmp.path().join("no-nvcc").into()),
                ..Env::default()
            };
            assert_eq!(some_route_found(&env), Ok(()), "cuda13={cuda13}");
            let sites = jit::site_packages(&env, Path::new("/"));
            assert_eq!(sites, vec![site.clone()]);
            let (nvrtc, nvjitlink) = if cuda13 {
                (
                    "nvidia/cu13/lib/libnvrtc.so.13",
                    "nvidia/cu13/lib/libnvJitLink.so.13",
                )
            } else {
                (
                    "nvidia/cuda_nvrtc/lib/libnvrtc.so.12",
                    "nvidia/nvjitlink/lib/libnvJitLink.so.12",
                )
            };
            assert_eq!(jit::find_nvrtc(&env, &sites).unwrap(), site.join(nvrtc));
            assert_eq!(
                jit::find_nvjitlink(&env, &sites).unwrap(),
                site.join(nvjitlink)
            );
        }
    }

    #[test]
    fn the_tools_beside_an_nccl_from_the_active_environment_are_found() {
        // The launcher's own search (common::nccl_path): VIRTUAL_ENV.
        let tmp = tempfile::tempdir().unwrap();
        let site = pip_layout(tmp.path(), true);
        let env = Env {
            virtual_env: Some(tmp.path().join("venv").into()),
            nvcc: Some(tmp.path().join("no-nvcc").into()),
            ..Env::default()
        };
        assert_eq!(some_route_found(&env), Ok(()));
        // pip install --user: ~/.local's site-packages, found the same way.
        let user = tempfile::tempdir().unwrap();
        let local = user.path().join(".local");
        std::fs::create_dir_all(&local).unwrap();
        std::fs::rename(tmp.path().join("venv/lib"), local.join("lib")).unwrap();
        let env = Env {
            home: Some(user.path().into()),
            nvcc: Some(tmp.path().join("no-nvcc").into()),
            ..Env::default()
        };
        assert_eq!(some_route_found(&env), Ok(()));
        let _ = site;
    }

    fn program() -> Program {
        Program {
            nvcc_kernels: vec![],
            jit_kernels: vec![],
            defines: vec![],
            wrapper_names: vec!["ncclLsaReduceSumCopy_F32"],
        }
    }

    /// An NCCL 2.28.9 from a wheel: headers, no device library.
    fn nccl_2_28(dir: &Path) -> std::path::PathBuf {
        let nccl = dir.join("site/nvidia/nccl");
        std::fs::create_dir_all(nccl.join("lib")).unwrap();
        std::fs::create_dir_all(nccl.join("include")).unwrap();
        std::fs::write(nccl.join("lib/libnccl.so.2"), "").unwrap();
        std::fs::write(
            nccl.join("include/nccl.h"),
            "#define NCCL_MAJOR 2\n#define NCCL_MINOR 28\n#define NCCL_PATCH 9\n",
        )
        .unwrap();
        std::fs::write(nccl.join("include/nccl_device.h"), "").unwrap();
        nccl.join("lib/libnccl.so.2")
    }

    #[test]
    fn jit_on_an_nccl_without_device_library_exits_2_with_the_fix() {
        let tmp = tempfile::tempdir().unwrap();
        let library = nccl_2_28(tmp.path());
        let err = choose(
            Build::Jit,
            &Env::default(),
            "sm_90",
            NcclVersion::new(2, 28, 9),
            &library,
            &program(),
        )
        .err()
        .unwrap();
        let cannot = err.downcast_ref::<CannotRun>().expect("exit code 2");
        assert!(
            cannot.reason.contains("ships no device library"),
            "{cannot}"
        );
        assert!(cannot.fix.contains("--build nvcc"), "{}", cannot.fix);
    }

    #[test]
    fn auto_falls_back_to_nvcc_and_says_why() {
        let tmp = tempfile::tempdir().unwrap();
        let library = nccl_2_28(tmp.path());
        let nvcc = tmp.path().join("bin/nvcc");
        std::fs::create_dir_all(nvcc.parent().unwrap()).unwrap();
        std::fs::write(&nvcc, "#!/bin/sh\necho 'release 13.0'\n").unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&nvcc, std::fs::Permissions::from_mode(0o755)).unwrap();
        let env = Env {
            nvcc: Some(nvcc.clone().into()),
            ..Env::default()
        };
        let chosen = choose(
            Build::Auto,
            &env,
            "sm_90",
            NcclVersion::new(2, 28, 9),
            &library,
            &program(),
        )
        .ok()
        .unwrap();
        assert_eq!(chosen.plan.name(), "nvcc");
        assert!(
            chosen.why.starts_with("auto: no jit route ("),
            "{}",
            chosen.why
        );
        assert!(
            chosen.why.contains("ships no device library"),
            "{}",
            chosen.why
        );
        // Without nvcc either: both reasons and both fixes.
        let env = Env {
            nvcc: Some(tmp.path().join("none").into()),
            ..Env::default()
        };
        let err = choose(
            Build::Auto,
            &env,
            "sm_90",
            NcclVersion::new(2, 28, 9),
            &library,
            &program(),
        )
        .err()
        .unwrap();
        let cannot = err.downcast_ref::<CannotRun>().expect("exit code 2");
        assert!(cannot.reason.contains("jit: NCCL 2.28.9"), "{cannot}");
        assert!(cannot.reason.contains("nvcc: nvcc not found"), "{cannot}");
        assert!(cannot.fix.contains("nvidia-nvjitlink"), "{}", cannot.fix);
        assert!(cannot.fix.contains("CUDA toolkit"), "{}", cannot.fix);
    }
}
