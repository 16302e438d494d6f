//! Where pip put it: the files NVIDIA's wheels install, and how the
//! `site-packages` directories that hold them are found without running
//! Python.
//!
//! NCCL's search ([`crate::nccl_path`]), the jit route's NVRTC, nvJitLink and
//! CUDA headers (`device_build::jit`) and lesson 06's NVSHMEM all look for
//! wheels through this module: a wheel that moves its files is one change
//! here. pip installs a wheel's `nvidia/` tree into the environment's
//! `<prefix>/lib/python3.X/site-packages` (`dist-packages` for the Python of
//! a Debian or Ubuntu system), so the layouts below are relative to that
//! directory.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};

/// `nvidia-nccl-cu13` (or `-cu12`): NCCL's installation, the directory that
/// `NCCL_HOME` names for a wheel.
pub const NCCL: &str = "nvidia/nccl";
/// NCCL's library in that wheel, under its runtime name only (no `libnccl.so`).
pub const NCCL_LIBRARY: &str = "nvidia/nccl/lib/libnccl.so.2";
/// NVRTC (`nvidia-cuda-nvrtc`): CUDA 13's wheels put every library in
/// `nvidia/cu13/lib`, CUDA 12's in `nvidia/<component>/lib`. Newest first.
pub const NVRTC: [&str; 2] = [
    "nvidia/cu13/lib/libnvrtc.so.13",
    "nvidia/cuda_nvrtc/lib/libnvrtc.so.12",
];
/// nvJitLink (`nvidia-nvjitlink`), laid out as [`NVRTC`]. Newest first.
pub const NVJITLINK: [&str; 2] = [
    "nvidia/cu13/lib/libnvJitLink.so.13",
    "nvidia/nvjitlink/lib/libnvJitLink.so.12",
];
/// The CUDA runtime's headers (`nvidia-cuda-runtime`, CUDA 13), with
/// CCCL's (`nvidia-cuda-cccl`) in its `cccl/`.
pub const CUDA_INCLUDE: &str = "nvidia/cu13/include";
/// `nvidia-nvshmem-cu13`: NVSHMEM's root, with `lib/` and `include/`.
pub const NVSHMEM: &str = "nvidia/nvshmem";

/// A Python installation or environment that pip may have installed into,
/// and how it was found, for messages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Installation {
    pub prefix: PathBuf,
    /// "the Python environment /home/me/venv", "pip install --user", ...
    pub through: String,
}

/// Every Python installation a user may have run `pip install` with, in
/// order: the active virtual environment (`VIRTUAL_ENV`), the active conda
/// environment (`CONDA_PREFIX`), every `python3` on `PATH` (its prefix, then
/// `<prefix>/local`, where Debian's pip installs as root), and
/// `pip install --user` (`$HOME/.local`). NCCL's search looks in all of
/// them; a build's other wheels only in the active environments and beside
/// NCCL ([`sites`]).
pub fn installations(
    virtual_env: Option<&OsStr>,
    conda_prefix: Option<&OsStr>,
    path: Option<&OsStr>,
    home: Option<&OsStr>,
) -> Vec<Installation> {
    let mut found = Vec::new();
    let mut push = |prefix: PathBuf, through: String| found.push(Installation { prefix, through });
    if let Some(venv) = virtual_env {
        let venv = PathBuf::from(venv);
        let through = format!("the Python environment {}", venv.display());
        push(venv, through);
    }
    if let Some(conda) = conda_prefix {
        let conda = PathBuf::from(conda);
        let through = format!("the conda environment {}", conda.display());
        push(conda, through);
    }
    if let Some(path) = path {
        for dir in std::env::split_paths(path) {
            if dir.join("python3").is_file() {
                if let Some(prefix) = dir.parent() {
                    let about = format!("the Python of {}", dir.join("python3").display());
                    push(prefix.to_path_buf(), about.clone());
                    push(prefix.join("local"), about);
                }
            }
        }
    }
    if let Some(home) = home {
        push(Path::new(home).join(".local"), "pip install --user".into());
    }
    found
}

/// The `lib/python3*` directories of a Python installation or environment at
/// `prefix`, in name order: where its `site-packages` (or Debian's
/// `dist-packages`) live.
pub fn python_lib_dirs(prefix: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(prefix.join("lib")) else {
        return Vec::new();
    };
    let mut pythons: Vec<PathBuf> = entries
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("python3"))
        .map(|e| e.path())
        .collect();
    pythons.sort();
    pythons
}

/// Every directory of `prefix` that pip may have installed into, whether it
/// exists or not: `lib/python3*/site-packages` and `dist-packages`, newest
/// Python first. NCCL's search looks for [`NCCL_LIBRARY`] in each.
pub fn package_dirs(prefix: &Path) -> Vec<PathBuf> {
    python_lib_dirs(prefix)
        .iter()
        .rev()
        .flat_map(|python| ["site-packages", "dist-packages"].map(|packages| python.join(packages)))
        .collect()
}

/// The `site-packages` directories that exist under the active Python
/// environments (`VIRTUAL_ENV`, `CONDA_PREFIX`, as given), in that order and
/// by Python name within each, each once.
pub fn environment_sites(environments: &[Option<&OsStr>]) -> Vec<PathBuf> {
    let mut sites = Vec::new();
    for prefix in environments.iter().flatten() {
        sites.extend(
            python_lib_dirs(Path::new(prefix))
                .into_iter()
                .map(|python| python.join("site-packages"))
                .filter(|p| p.is_dir()),
        );
    }
    once_each(sites)
}

/// The `site-packages` that a wheel's `<site-packages>/nvidia/nccl/lib/<file>`
/// sits in; `None` for an NCCL that is not laid out as the wheel's.
pub fn nccl_site(nccl_library: &Path) -> Option<PathBuf> {
    let lib = nccl_library.parent()?;
    let depth = Path::new(NCCL).join("lib").components().count();
    lib.ends_with(Path::new(NCCL).join("lib"))
        .then(|| lib.ancestors().nth(depth))
        .flatten()
        .map(Path::to_path_buf)
}

/// The `site-packages` directories that may hold the NVIDIA wheels a build
/// needs, in order, each once: the one the loaded NCCL (`nccl_library`) came
/// from, the one of the NCCL that `nccl_home` names, then those of the active
/// Python environments ([`environment_sites`]). Wheels installed together
/// sit side by side, so the ones NCCL came with come first.
pub fn sites(
    nccl_library: &Path,
    nccl_home: Option<&OsStr>,
    environments: &[Option<&OsStr>],
) -> Vec<PathBuf> {
    let from_home = nccl_home.map(|home| Path::new(home).join("lib/libnccl.so.2"));
    let mut sites: Vec<PathBuf> = std::iter::once(nccl_library)
        .chain(from_home.as_deref())
        .filter_map(nccl_site)
        .collect();
    sites.extend(environment_sites(environments));
    once_each(sites)
}

/// `paths` without repeats, the first of each kept.
fn once_each(mut paths: Vec<PathBuf>) -> Vec<PathBuf> {
    let mut seen = std::collections::HashSet::new();
    paths.retain(|p| seen.insert(p.clone()));
    paths
}

#[cfg(test)]
mod tests {
    use super::*;

    fn touch(path: &Path) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, b"").unwrap();
    }

    #[test]
    fn the_layouts_are_the_wheels() {
        // As `pip install nvidia-nccl-cu13 nvidia-cuda-nvrtc nvidia-nvjitlink
        // nvidia-cuda-runtime nvidia-cuda-cccl nvidia-nvshmem-cu13` lays
        // them out (CUDA 13), and the CUDA 12 wheels' per-component places.
        assert_eq!(NCCL_LIBRARY, format!("{NCCL}/lib/libnccl.so.2"));
        assert_eq!(NVRTC[0], "nvidia/cu13/lib/libnvrtc.so.13");
        assert_eq!(NVRTC[1], "nvidia/cuda_nvrtc/lib/libnvrtc.so.12");
        assert_eq!(NVJITLINK[0], "nvidia/cu13/lib/libnvJitLink.so.13");
        assert_eq!(NVJITLINK[1], "nvidia/nvjitlink/lib/libnvJitLink.so.12");
        assert_eq!(CUDA_INCLUDE, "nvidia/cu13/include");
        assert_eq!(NVSHMEM, "nvidia/nvshmem");
        for file in [NCCL_LIBRARY, NVRTC[0], NVRTC[1], NVJITLINK[0], NVJITLINK[1]] {
            assert!(
                file.starts_with("nvidia/") && file.contains("/lib/lib"),
                "{file}"
            );
        }
    }

    #[test]
    fn package_directories_come_newest_python_first_site_before_dist() {
        let prefix = tempfile::tempdir().unwrap();
        for python in ["python3.11", "python3.12", "perl5"] {
            std::fs::create_dir_all(prefix.path().join("lib").join(python)).unwrap();
        }
        let lib = prefix.path().join("lib");
        assert_eq!(
            python_lib_dirs(prefix.path()),
            vec![lib.join("python3.11"), lib.join("python3.12")]
        );
        assert_eq!(
            package_dirs(prefix.path()),
            vec![
                lib.join("python3.12/site-packages"),
                lib.join("python3.12/dist-packages"),
                lib.join("python3.11/site-packages"),
                lib.join("python3.11/dist-packages"),
            ]
        );
        assert!(package_dirs(&prefix.path().join("absent")).is_empty());
    }

    #[test]
    fn the_site_of_a_wheels_nccl_is_three_levels_above_its_lib() {
        let site = Path::new("/venv/lib/python3.12/site-packages");
        assert_eq!(
            nccl_site(&site.join(NCCL_LIBRARY)),
            Some(site.to_path_buf())
        );
        assert_eq!(
            nccl_site(&site.join("nvidia/nccl/lib/x")),
            Some(site.into())
        );
        assert_eq!(nccl_site(Path::new("/usr/lib/libnccl.so.2")), None);
        assert_eq!(nccl_site(&site.join("nvidia/nvshmem/lib/x")), None);
        assert_eq!(nccl_site(Path::new("/")), None);
    }

    #[test]
    fn build_sites_start_beside_nccl_then_the_environments_each_once() {
        let tmp = tempfile::tempdir().unwrap();
        let venv_site = tmp.path().join("venv/lib/python3.12/site-packages");
        let conda_site = tmp.path().join("conda/lib/python3.11/site-packages");
        let home_site = tmp.path().join("home/lib/python3.10/site-packages");
        touch(&venv_site.join(NCCL_LIBRARY));
        touch(&conda_site.join("x"));
        touch(&home_site.join(NCCL_LIBRARY));
        let venv = tmp.path().join("venv");
        let conda = tmp.path().join("conda");
        let environments = [Some(venv.as_os_str()), Some(conda.as_os_str())];
        assert_eq!(
            sites(
                &venv_site.join(NCCL_LIBRARY),
                Some(home_site.join(NCCL).as_os_str()),
                &environments
            ),
            vec![venv_site.clone(), home_site, conda_site.clone()]
        );
        assert_eq!(
            environment_sites(&[Some(venv.as_os_str()), Some(venv.as_os_str()), None]),
            vec![venv_site]
        );
        assert_eq!(
            sites(Path::new("/"), None, &[None, Some(conda.as_os_str())]),
            vec![conda_site]
        );
    }
}
