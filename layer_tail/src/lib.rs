//! The workload lessons 06, 06b and 06c and `06_symm_bench` fuse an
//! AllReduce into: the tail of a tensor-parallel layer (this rank's partial
//! output, `symm_all_reduce`, residual + RMSNorm). Not a lesson: the three
//! lessons and the benchmark use it, and no lesson uses another. The device
//! library itself, its contexts, return codes, NVSHMEM host side and Triton
//! binding are the `symm_comm` crate; here is the layer:
//!
//! * the user kernels with the library in front ([`source`]):
//!   `symm_comm.cuh` and `kernels/tp_tail.cu`, compiled as one translation
//!   unit, and the NCCL backend's device code for `device_build`'s two
//!   routes ([`nccl_program`]);
//! * what every rank checks and agrees on before it launches them
//!   ([`check_gpu`], [`agreed_blocks`]);
//! * the layer's data and CPU reference ([`reference`]), and launches
//!   through the driver's parameter arrays, for the benchmark and the
//!   Triton kernel ([`launch`]);
//! * the same layer tail written in Triton (`triton/tp_tail.py`), built
//!   ahead of time by Triton's compiler with the library as LLVM bitcode
//!   through `device_build::triton` ([`triton`], lesson 06b).

pub mod launch;
pub mod reference;
pub mod triton;

use std::sync::LazyLock;

use common::{CannotRun, RankContext};
use device_build::route::Program;
use device_build::Source;
use symm_comm::codes;

/// The device library (`symm_comm.cuh`, from the `symm_comm` crate)
/// followed by the layer's user kernels (`kernels/tp_tail.cu`): one
/// source, so that a user kernel and the library it calls are compiled and
/// optimised together (the library's functions inline into the kernel, and
/// the kernel's launch bounds hold for them). The same text serves both
/// NCCL routes (the header picks the C++ API or the C API) and the NVSHMEM
/// build.
pub fn source() -> Source {
    static TEXT: LazyLock<String> =
        LazyLock::new(|| symm_comm::with_library(include_str!("../kernels/tp_tail.cu")));
    Source {
        file: "symm_tp_tail.cu",
        text: TEXT.as_str(),
    }
}

/// Threads per block of every kernel here (compiled into their
/// launch bounds and the block reduction).
pub const THREADS: u32 = 512;

/// The kernels' names (`extern "C"` in `tp_tail.cu`).
pub const FUSED_KERNEL: &str = "tp_tail_fused";
pub const COMPUTE_KERNEL: &str = "tp_compute";
pub const EPILOGUE_KERNEL: &str = "tp_residual_rmsnorm";
pub const ALL_REDUCE_KERNEL: &str = "symm_all_reduce_kernel";

/// The program name the build cache is kept under (lesson 06's: lessons
/// 06b and 06c and the benchmark share its cache).
pub const CACHE_NAME: &str = "06_symm_primitive";

/// What the jit route's source calls in nccl_device_wrapper.h (NCCL 2.32.3's
/// names), checked before compiling: the library's.
pub use symm_comm::WRAPPER_NAMES;

/// Which backend holds the symmetric memory.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Backend {
    /// NCCL: a symmetric window and a device communicator (threads or MPI).
    Nccl,
    /// NVSHMEM: the symmetric heap (MPI only: one PE per process).
    Nvshmem,
}

impl Backend {
    pub fn name(self) -> &'static str {
        match self {
            Backend::Nccl => "nccl",
            Backend::Nvshmem => "nvshmem",
        }
    }
}

/// The element type of the all-reduced data.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dtype {
    /// float32.
    F32,
    /// bfloat16, summed in float32.
    Bf16,
}

impl Dtype {
    /// `symm_all_reduce`'s dtype argument (SYMM_DTYPE_*).
    pub fn code(self) -> i32 {
        match self {
            Dtype::F32 => codes::DTYPE_FLOAT32,
            Dtype::Bf16 => codes::DTYPE_BFLOAT16,
        }
    }
    pub fn size(self) -> usize {
        match self {
            Dtype::F32 => 4,
            Dtype::Bf16 => 2,
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            Dtype::F32 => "float32",
            Dtype::Bf16 => "bfloat16",
        }
    }
}

/// `-D` for every compile: the backend and the block size.
pub fn defines(backend: Backend) -> Vec<(String, String)> {
    let with = match backend {
        Backend::Nccl => symm_comm::WITH_NCCL,
        Backend::Nvshmem => symm_comm::WITH_NVSHMEM,
    };
    vec![
        (with.into(), "1".into()),
        ("SYMM_THREADS".into(), THREADS.to_string()),
    ]
}

/// The NCCL backend's device code for both of device_build's routes.
pub fn nccl_program() -> Program {
    Program {
        nvcc_kernels: vec![source()],
        jit_kernels: vec![source()],
        defines: defines(Backend::Nccl),
        wrapper_names: WRAPPER_NAMES.to_vec(),
    }
}

/// Step 1's check, on every rank: the library needs compute capability 7.0
/// or newer and covers at most [`codes::MAX_RANKS`] ranks.
pub fn check_gpu(major: i32, minor: i32, device: usize, ranks: usize) -> Result<(), CannotRun> {
    if major < 7 {
        Err(CannotRun::new(
            format!("GPU {device} has compute capability {major}.{minor}; the library needs 7.0 (Volta) or newer"),
            "run on a Volta or newer GPU",
        ))
    } else if ranks > codes::MAX_RANKS {
        Err(CannotRun::new(
            format!(
                "{ranks} ranks: symm_all_reduce covers at most {} (one node)",
                codes::MAX_RANKS
            ),
            "run with 8 ranks or fewer",
        ))
    } else {
        Ok(())
    }
}

/// The grid every rank launches: one block per multiprocessor of the
/// smallest GPU among the ranks, divided among the ranks that share a GPU
/// (`RankContext::share_of_gpu`). The calling convention wants the same grid
/// on every rank, and every block resident at once, every rank's together
/// where ranks share a GPU: two cooperative grids of 132 blocks cannot both
/// be resident on 132 multiprocessors, and each rank's barrier would wait
/// for blocks that never start. With one model of GPU everywhere and a GPU
/// per rank this is its multiprocessor count.
pub fn agreed_blocks(ctx: &RankContext, multiprocessors: u32) -> anyhow::Result<u32> {
    let multiprocessors = ctx.share_of_gpu(multiprocessors);
    if multiprocessors == 0 {
        return Err(CannotRun::new(
            format!(
                "{} ranks share a GPU with fewer multiprocessors than ranks: the fused kernel needs at least one block per rank, all resident at once",
                ctx.ranks_per_gpu()
            ),
            "run fewer ranks per GPU",
        )
        .into());
    }
    let counts = ctx.gather(multiprocessors.to_le_bytes().to_vec())?;
    let fewest = counts.map(|c| c.iter().filter_map(le_u32).min().unwrap_or(multiprocessors));
    let agreed = ctx.broadcast_vec(fewest.unwrap_or(0).to_le_bytes().to_vec())?;
    le_u32(&agreed)
        .filter(|&n| n > 0)
        .ok_or_else(|| anyhow::anyhow!("the ranks could not agree on a grid"))
}

/// The little-endian u32 that `bytes` starts with, if it has 4 bytes.
fn le_u32(bytes: impl AsRef<[u8]>) -> Option<u32> {
    bytes
        .as_ref()
        .get(..4)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

#[cfg(test)]
mod tests {
    use super::le_u32;

    #[test]
    fn a_grid_size_is_read_from_its_first_four_bytes() {
        assert_eq!(le_u32(132u32.to_le_bytes()), Some(132));
        assert_eq!(le_u32([66, 0, 0, 0, 9]), Some(66));
        assert_eq!(le_u32([1, 2, 3]), None);
    }
}
