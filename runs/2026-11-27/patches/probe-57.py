"""Probe 57's build (PERF_NOTES.md, "One copy of the kernels' code on a shared
GPU"): in a checkout of HEAD, as python3 probe-57.py DIR. With PROBE57_SHARE
set, device_build's Module::load loads each cubin once per process and hands
the same module to every rank thread after the first (all of them share one
CUDA context on one GPU), and no module is unloaded; without it, each rank
loads its own copy, as HEAD does. Not committed."""
import sys

from probe_edit import replace

MODULE = '/device_build/src/module.rs'


def build(wt):
    m = wt + MODULE
    replace(m, '''/// A loaded CUDA module (`cuModuleLoadData`), unloaded on drop.
pub struct Module(cu_sys::CUmodule);
''', '''/// A loaded CUDA module (`cuModuleLoadData`), unloaded on drop.
pub struct Module(cu_sys::CUmodule);

// PROBE 57: the modules loaded so far (path, CUmodule), where PROBE57_SHARE is set.
static PROBE57: std::sync::Mutex<Vec<(std::path::PathBuf, usize)>> = std::sync::Mutex::new(Vec::new());
fn probe57() -> bool {
    std::env::var_os("PROBE57_SHARE").is_some()
}
''')
    replace(m, '''    pub fn load(cubin: &Path) -> Result<Self> {
        let image''', '''    pub fn load(cubin: &Path) -> Result<Self> {
        let mut loaded = PROBE57.lock().unwrap();
        if probe57() {
            if let Some(&(_, raw)) = loaded.iter().find(|(p, _)| p == cubin) {
                return Ok(Self(raw as cu_sys::CUmodule));
            }
        }
        let image''')
    replace(m, '''            unsafe { cu::module::load_data(image.as_ptr().cast()) }.context("cuModuleLoadData")?;
        Ok(Self(module))''', '''            unsafe { cu::module::load_data(image.as_ptr().cast()) }.context("cuModuleLoadData")?;
        if probe57() {
            loaded.push((cubin.to_path_buf(), module as usize));
        }
        Ok(Self(module))''')
    replace(m, '''    fn drop(&mut self) {
        // SAFETY''', '''    fn drop(&mut self) {
        if probe57() {
            return;  // shared by the ranks: left loaded until the process ends
        }
        // SAFETY''')


if __name__ == '__main__':
    build(sys.argv[1])
