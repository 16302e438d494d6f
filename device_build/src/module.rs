//! A built cubin, loaded: what every route's output becomes on the GPU.
//! cudarc hides a module's raw `CUmodule` (NVSHMEM's `nvshmemx_cumodule_init`
//! needs it) and its functions' handles (a cooperative launch needs them), so
//! the programs load their cubins with the driver API through this type.

use std::ffi::CString;
use std::path::Path;

use anyhow::{Context, Result};
use cudarc::driver::{result as cu, sys as cu_sys};

/// A loaded CUDA module (`cuModuleLoadData`), unloaded on drop.
pub struct Module(cu_sys::CUmodule);

impl Module {
    /// Reads `cubin`, a build's output, once, checks those bytes against
    /// the build's record ([`crate::cache::read_output`]) and loads them
    /// into the current context: what is loaded is what was checked.
    pub fn load(cubin: &Path) -> Result<Self> {
        let image = crate::cache::read_output(cubin)?;
        // SAFETY: a context is current (the caller bound its GPU) and `image`
        // is a complete ELF image that outlives the call.
        let module =
            unsafe { cu::module::load_data(image.as_ptr().cast()) }.context("cuModuleLoadData")?;
        Ok(Self(module))
    }

    /// Takes ownership of a module the caller loaded with `cuModuleLoadData`.
    pub fn adopt(raw: cu_sys::CUmodule) -> Self {
        Self(raw)
    }

    /// The `CUmodule` handle.
    pub fn raw(&self) -> cu_sys::CUmodule {
        self.0
    }

    /// The kernel named `name` (an `extern "C"` name in the source).
    pub fn function(&self, name: &str) -> Result<cu_sys::CUfunction> {
        // SAFETY: the module is loaded.
        unsafe { cu::module::get_function(self.0, CString::new(name)?) }
            .with_context(|| format!("cuModuleGetFunction({name})"))
    }
}

impl Drop for Module {
    fn drop(&mut self) {
        // SAFETY: loaded in `load` and not used after this.
        if let Err(err) = unsafe { cu::module::unload(self.0) } {
            eprintln!("warning: cleanup: cuModuleUnload: {err}");
        }
    }
}
