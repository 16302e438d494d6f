//! The layer tail from Triton (lesson 06b): the fused kernel written in Triton
//! ([`triton/tp_tail.py`](../triton/tp_tail.py)) that calls the same
//! `symm_all_reduce`, linked from the library's LLVM bitcode
//! (`symm_comm::triton`: `symm_comm/triton/symm_comm_nccl.bc`) and NCCL
//! 2.32.3's `libnccl_device.bc`.
//!
//! The host side is here: the kernel as a program for `device_build`'s
//! Triton route ([`program`]; the route runs Triton's compiler ahead of
//! time, Python, no GPU needed, and keeps the cubin in the build cache),
//! the checks of the GPU and of what was built ([`check_gpu`],
//! [`Meta::load`]), and the launch: cooperative, with the context it already
//! made for the CUDA kernel. What Triton needs from a host is only that: the kernel's
//! parameters in order, two hidden scratch pointers (NULL while Triton asks
//! for no scratch), its block size and its dynamic shared memory, all read
//! from the JSON the script writes beside the cubin.

use anyhow::{ensure, Context, Result};
use common::kernel;
use common::{CannotRun, NcclVersion};
use cudarc::driver::{result as cu, sys as cu_sys, CudaStream, LaunchConfig};
use device_build::cache;
use device_build::triton::Program;
use serde::Deserialize;

use crate::launch::LayerArgs;
use crate::Dtype;

/// The Triton kernel and its ahead-of-time build (`python3 tp_tail.py`).
pub const KERNEL_SCRIPT: &str = include_str!("../triton/tp_tail.py");
/// The NCCL release whose headers the library's bitcode was built against
/// (`symm_comm::triton::NCCL`): the loaded NCCL must be it.
pub const NCCL: NcclVersion = symm_comm::triton::NCCL;

/// The files a build leaves in its cache directory.
pub const CUBIN: &str = "tp_tail_triton.cubin";
pub const META: &str = "tp_tail_triton.json";

/// The Triton kernel for `dtype`, as `device_build::triton` builds it:
/// `tp_tail.py --dtype f32|bf16`, with the library's binding and bitcode
/// (`symm_comm::triton`) beside it, writing [`CUBIN`] and [`META`].
pub fn program(dtype: Dtype) -> Program {
    let dtype = match dtype {
        Dtype::F32 => "f32",
        Dtype::Bf16 => "bf16",
    };
    Program {
        script: "tp_tail.py",
        script_text: KERNEL_SCRIPT,
        // The names symm_comm::triton::write_beside gives them.
        beside: vec![
            ("symm.py", symm_comm::triton::SCRIPT.as_bytes()),
            ("symm_comm_nccl.bc", symm_comm::triton::BITCODE),
        ],
        args: vec!["--dtype".into(), dtype.into()],
        outputs: vec![CUBIN.into(), META.into()],
        nccl: NCCL,
    }
}

/// What `tp_tail.py` reports about the kernel it compiled.
#[derive(Debug, Clone, Deserialize)]
pub struct Meta {
    /// The kernel's symbol in the cubin.
    pub name: String,
    pub num_warps: u32,
    /// Dynamic shared memory, bytes.
    pub shared: u32,
    /// The kernel's own parameters, in order (Triton appends two hidden ones).
    pub params: Vec<String>,
    /// How many parameters the compiled entry takes, hidden ones included
    /// (counted in its PTX).
    pub entry_params: usize,
    pub triton: String,
    #[serde(default)]
    pub global_scratch_size: u64,
    #[serde(default)]
    pub profile_scratch_size: u64,
}

/// The parameters [`launch`] passes, in this order: a kernel that takes
/// others was built from another script and is refused.
pub const PARAMS: [&str; 13] = [
    "ctx",
    "buffer",
    "byte_offset",
    "x",
    "w",
    "residual",
    "gamma",
    "out",
    "tokens",
    "hidden",
    "k",
    "eps",
    "status",
];

impl Meta {
    /// What the script wrote beside the cubin of `build`, checked
    /// ([`Meta::check`]).
    pub fn load(build: &cache::Built) -> Result<Self> {
        let text = std::fs::read_to_string(build.file(META)).context("read the kernel's JSON")?;
        let meta: Meta = serde_json::from_str(&text).context("parse the kernel's JSON")?;
        meta.check()?;
        Ok(meta)
    }

    /// Threads per program.
    pub fn threads(&self) -> u32 {
        self.num_warps * 32
    }

    /// Refuses a kernel this host cannot launch as built.
    pub fn check(&self) -> Result<()> {
        ensure!(
            self.params == PARAMS,
            "the Triton kernel takes ({}), the host passes ({})",
            self.params.join(", "),
            PARAMS.join(", ")
        );
        // Triton 3.6 appends two hidden parameters; another release may not.
        ensure!(
            self.entry_params == PARAMS.len() + 2,
            "the compiled Triton kernel takes {} parameters; this host passes {} ({} and Triton 3.6's two scratch pointers): a Triton that adds other hidden parameters needs this host changed",
            self.entry_params,
            PARAMS.len() + 2,
            PARAMS.len()
        );
        ensure!(
            self.global_scratch_size == 0 && self.profile_scratch_size == 0,
            "the Triton kernel asks for scratch memory ({} B global, {} B profile); this host passes NULL for both",
            self.global_scratch_size,
            self.profile_scratch_size
        );
        Ok(())
    }
}

/// NCCL 2.32.3's `libnccl_device.bc` is built for sm_90 and uses its
/// `multimem` instructions, so ptxas refuses it for older GPUs (seen for
/// sm_80 and sm_89: "Feature 'multimem.red' requires .target sm_90 or
/// higher"): the Triton kernel needs a Hopper GPU or newer.
pub fn check_gpu(major: i32, minor: i32) -> Result<(), CannotRun> {
    if major < 9 {
        return Err(CannotRun::new(
            format!(
                "this GPU has compute capability {major}.{minor}; the Triton kernel links NCCL 2.32.3's libnccl_device.bc, which is built for sm_90 (Hopper) and newer"
            ),
            "run 06b_symm_triton on a Hopper or newer GPU, or the CUDA kernel (06_symm_primitive) here",
        ));
    }
    Ok(())
}

/// Lets the kernel use `meta.shared` bytes of dynamic shared memory (the
/// default limit is 48 KiB).
///
/// # Safety
/// `kernel` must be a function of a module that is still loaded.
pub unsafe fn set_shared(kernel: cu_sys::CUfunction, meta: &Meta) -> Result<()> {
    if meta.shared > 48 * 1024 {
        // SAFETY: a loaded function (the caller's promise); the attribute
        // takes a byte count.
        unsafe {
            cu::function::set_function_attribute(
                kernel,
                cu_sys::CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                meta.shared as i32,
            )
        }
        .context("cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)")?;
    }
    Ok(())
}

/// The Triton kernel on `blocks` programs, cooperative: `symm_all_reduce`
/// inside it waits for every program, so all must be resident at once.
/// The context, the buffer and the layer's arrays are the CUDA kernel's
/// ([`LayerArgs`]; the dtype is compiled in).
///
/// # Safety
/// `kernel` must come from a build whose [`Meta`] passed [`Meta::check`];
/// every address must be live device memory of the sizes the layer needs.
pub unsafe fn launch(
    kernel: cu_sys::CUfunction,
    meta: &Meta,
    blocks: u32,
    stream: &CudaStream,
    args: LayerArgs,
) -> Result<()> {
    let mut launch = kernel::launch_builder(stream, kernel);
    // tp_tail_fused's parameters without `dtype`, which is compiled in.
    // (`byte_offset` is a usize there and Triton's i64 here: the same 8 bytes.)
    args.fused_params(launch.args());
    // Then Triton's two hidden parameters, global and profile scratch:
    // NULL, as Meta::check made sure the kernel asks for none.
    let (global_scratch, profile_scratch) = (0u64, 0u64);
    launch
        .arg(&args.status)
        .arg(&global_scratch)
        .arg(&profile_scratch);
    let config = LaunchConfig {
        shared_mem_bytes: meta.shared,
        ..kernel::grid(blocks, meta.threads())
    };
    // SAFETY: the caller's promise; the arguments are the kernel's, as
    // Meta::check found them.
    unsafe { launch.launch_cooperative(config) }
        .with_context(|| format!("cuLaunchCooperativeKernel({})", meta.name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_gpu_older_than_hopper_is_refused() {
        let err = check_gpu(8, 9).unwrap_err();
        assert!(
            err.reason.contains("compute capability 8.9"),
            "{}",
            err.reason
        );
        assert!(err.fix.contains("06_symm_primitive"), "{}", err.fix);
        assert!(check_gpu(9, 0).is_ok() && check_gpu(10, 0).is_ok());
    }

    #[test]
    fn a_kernel_with_other_parameters_is_refused() {
        let mut meta = Meta {
            name: "tp_tail_triton".into(),
            num_warps: 16,
            shared: 64,
            params: PARAMS.iter().map(|s| s.to_string()).collect(),
            triton: "3.6.0".into(),
            entry_params: 15,
            global_scratch_size: 0,
            profile_scratch_size: 0,
        };
        assert!(meta.check().is_ok());
        assert_eq!(meta.threads(), 512);
        meta.params.swap(0, 1);
        assert!(meta.check().is_err());
        meta.params.swap(0, 1);
        meta.entry_params = 16;
        assert!(meta.check().is_err());
        meta.entry_params = 15;
        meta.global_scratch_size = 16;
        assert!(meta.check().is_err());
    }
}
