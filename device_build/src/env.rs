//! The environment variables that steer both routes, captured once so that
//! every search is a pure function the tests can drive.

use std::ffi::OsString;

/// The environment variables that steer the searches.
#[derive(Debug, Clone, Default)]
pub struct Env {
    /// nvcc's path (the nvcc route).
    pub nvcc: Option<OsString>,
    pub cuda_home: Option<OsString>,
    pub path: Option<OsString>,
    pub nccl_home: Option<OsString>,
    pub xdg_cache_home: Option<OsString>,
    pub home: Option<OsString>,
    /// `libnvrtc.so.*`'s path (the jit route); if set, nothing else is tried.
    pub nvrtc: Option<OsString>,
    /// `libnvJitLink.so.*`'s path (the jit route); if set, nothing else is tried.
    pub nvjitlink: Option<OsString>,
    /// The active Python environment (venv or conda), whose site-packages
    /// may hold the NVIDIA wheels.
    pub virtual_env: Option<OsString>,
    pub conda_prefix: Option<OsString>,
    /// Where the CUDA toolkit installs itself, tried after `cuda_home`:
    /// `/usr/local/cuda` in [`Env::from_process`], none in `Env::default()`,
    /// so that tests see only the directories they make.
    pub default_toolkit: Option<std::path::PathBuf>,
}

impl Env {
    pub fn from_process() -> Self {
        let var = |name| std::env::var_os(name).filter(|v| !v.is_empty());
        Self {
            nvcc: var("NVCC"),
            cuda_home: var("CUDA_HOME"),
            path: var("PATH"),
            nccl_home: var("NCCL_HOME"),
            xdg_cache_home: var("XDG_CACHE_HOME"),
            home: var("HOME"),
            nvrtc: var("NVRTC"),
            nvjitlink: var("NVJITLINK"),
            default_toolkit: Some("/usr/local/cuda".into()),
            virtual_env: var("VIRTUAL_ENV"),
            conda_prefix: var("CONDA_PREFIX"),
        }
    }
}

/// Where this process keeps builds: `cache::cache_root` for the program.
impl Env {
    pub fn cache_root(&self, program: &str) -> crate::cache::CacheRoot {
        crate::cache::cache_root(self.xdg_cache_home.as_ref(), self.home.as_ref(), program)
    }
}
