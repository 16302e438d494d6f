//! `06_symm_bench`: the fused layer tail against the same work unfused, and
//! `symm_all_reduce` alone against lesson 05b's fast kernel and
//! `ncclAllReduce`, in one run, on the same buffers.
//!
//! Contenders (`--contenders`, comma-separated):
//!
//! * layer tail (compute, AllReduce, residual + RMSNorm) of `size` bytes of
//!   partial output, each operation in its own region, every region checked
//!   on the GPU after each trial (or round, see below) against the CPU
//!   reference's values, computed once per size:
//!   * `fused`: `tp_tail_fused`, one cooperative launch;
//!   * `triton`: `tp_tail_triton`, the same layer tail written in Triton
//!     (`triton/tp_tail.py`, calling the same `symm_all_reduce` from the
//!     library's bitcode), one cooperative launch; NCCL 2.32.3 and a
//!     Python with Triton 3.6+ (not in the default list);
//!   * `unfused05`: `tp_compute`, lesson 05b's fast AllReduce (one-shot or
//!     two-shot by size, as `05b_lsa_fast`; on the jit route two-shot at
//!     every size, as its kernels have no one-shot there: a note says which),
//!     `tp_residual_rmsnorm`: three launches (float32 only: lesson 05b's
//!     kernels sum floats);
//!   * `unfused-nccl`: `tp_compute`, `ncclAllReduce` on the windows,
//!     `tp_residual_rmsnorm`, as a user does today;
//!   * `unfused05-graph`, `unfused-nccl-graph`: the same three launches
//!     captured once per region into a CUDA graph (after the windows and
//!     the device communicator exist), each operation one `cuGraphLaunch`:
//!     the unfused path as inference engines replay it;
//!   * `fused-graph`, `triton-graph`: the fused kernel's one cooperative
//!     launch replayed the same way, so that a graph replay is compared
//!     with a graph replay (not in the default list);
//!   * `symm-layer`: `symm_all_reduce` alone on the layer's partials (the
//!     partials are made untimed before each trial);
//!
//!   The NCCL contexts carry a staging window (`symm_comm::codes::STAGING_BYTES`),
//!   so `symm_all_reduce` takes its one-shot up to
//!   `symm_comm::codes::ONE_SHOT_MAX_BYTES`;
//! * AllReduce alone, float32, on bench's AllReduce sweep (fresh random data,
//!   out of place and in place, every timed operation checked):
//!   * `symm`: `symm_all_reduce_kernel` (in place; its out-of-place column
//!     is a device copy into the output followed by the in-place call);
//!   * `fast05`: lesson 05b's fast kernel (`05b_lsa_fast`);
//!   * `nccl`: `ncclAllReduce`.
//!
//! `--backend nvshmem` (MPI build) runs the layer-tail contenders that need
//! no NCCL: `fused` and `symm-layer`. `--stress N` runs N back-to-back fused
//! layer tails per size with the ranks skewed on purpose, each checked:
//! those of `fused`, and of `triton` when it is among the contenders.
//! With `--one-region`, every stress operation runs in the same region of the
//! symmetric buffer, its activations changing from one operation to the
//! next: an operation that overlaps a peer's previous one reads partials of
//! the wrong operation, and its check fails.
//! `--k` sets the input features a rank holds (default 16, at most 256): above 16
//! both kernels take several steps of them, above 64 the CUDA kernel several
//! chunks, paths that k = 16 leaves unrun.
//! `--bad-input` runs every bad-input case of `codes::bad_input_cases`
//! through `symm_all_reduce_kernel` and compares the device's code with the
//! documented one.
//!
//! ```text
//! NTHREADS=2 cargo run --release --bin 06_symm_bench -- -b 8 -e 64M
//! NTHREADS=2 target/release/06_symm_bench --contenders fused,triton,unfused-nccl -b 8M -e 512M
//! mpirun -np 2 target/release/06_symm_bench --backend nvshmem --json l06-nvshmem.json
//! NTHREADS=2 target/release/06_symm_bench --stress 2000 -b 4K -e 4M -f 32
//! NTHREADS=2 target/release/06_symm_bench --stress 2000 --one-region -b 4K -e 4M -f 32
//! NTHREADS=2 target/release/06_symm_bench --contenders fused,triton --k 40 --stress 200 -e 1M
//! NTHREADS=1 target/release/06_symm_bench --bad-input
//! ```
//!
//! # How long a default sweep takes
//!
//! Issue 32: at most 60 s at 1 and at 2 ranks on one H100. Measured there
//! (runs/2026-11-25/call87/times.txt, whole runs, kernels cached): 16 s at
//! 1 rank and 32 s at 2 in float32; `--dtype bf16` (without Triton) 32 s and
//! 57 s. With the two graph contenders in the default list: 17 s at 1 rank
//! and 35 s at 2, float32 (runs/2026-11-25/call115, the logs' start times). Estimated from the code before that run, defaults `-b 8 -e 512M -n 20
//! -w 5 --trials 5`, float32, 27 sizes, 4 layer-tail contenders (fused,
//! unfused05, unfused-nccl, symm-layer) and 3 AllReduce ones (two
//! placements each).
//!
//! **Before** (every region read back and compared on the host): each
//! buffer held 21 regions of the largest size (10.5 GiB; 4 such buffers,
//! 42 GiB a rank: 2 ranks did not fit an H100). Per size and layer
//! contender, 6 preparations wrote 21 residual regions from the host
//! (synchronous copies) and 5 checks copied 2 × 21 regions back and compared
//! them on the CPU: at 512 MiB, 6 × 21 × 3 × 0.54 GB at about 10 GB/s is
//! 20 s of copies, and 5 × 42 regions of 134 M elements (28 G) decoded and
//! compared at about 1 G a second is 40 s more: about 60 s per contender
//! at 512 MiB, 120 s over the sweep (the sizes double), 480 s for the four
//! (runs/2026-11-25/call21 stopped it past 400 s).
//!
//! **Now**: the CPU reference runs once per size, parallel over tokens
//! (measured on the 2-core CPU machine, release build, 128 MiB at 2 ranks:
//! `reference::expected` 1.47 s, `reference::sums` 1.27 s on 2 threads;
//! so about 22 s of one core at 512 MiB and 44 s for the sweep, per rank:
//! about 6 s at 2 ranks on the GPU machine's 16 cores); its values stay
//! on the GPU, the residuals are copied in
//! from a device copy, the outputs poisoned on the stream, and every output
//! of every timed operation is compared on the GPU (`bench::data`'s
//! `check_close`, 2 memory passes over output and expected value: about
//! 0.7 ms per 512 MiB region). Regions rotate as `bench::allreduce::regions`
//! says (4 from 64 MiB up, 2 GiB a buffer), in rounds of 3 timed
//! operations (140 per size and contender at the top). A fused layer tail
//! of 128 MiB took 441 µs at 1 rank (issue 32), so about 1.8 ms at
//! 512 MiB, say 4 ms at 2 ranks sharing the GPU: 2 × 140 × 4 ms = 1.1 s
//! per contender, 4.5 s for the four, plus 0.5 s of checks; the AllReduce
//! half as `05_allreduce_bench`'s `nccl` and `fast`: about 5 s. About 20 s
//! at 2 ranks, plus NCCL's start and the kernels' build when not cached;
//! the run took 32 s, the CPU reference probably more than the 6 s counted
//! here (not measured apart).

use std::process::ExitCode;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;

use anyhow::{ensure, Context, Result};
use bench::allreduce::{
    self, l2_bytes, nccl_allreduce, regions, rotation_bytes, Buffers, StressArgs, Sweep,
};
use bench::data::DataKernels;
use bench::report::{Row, Series};
use bench::{
    across_ranks, sum_over_ranks, time_rotating, Collective, Placement, Sample, SweepArgs,
};
use common::nccl::{nccl_stream, sys, NcclCheck};
use common::setup;
use common::{CannotRun, Lesson, NcclVersion, Needs, RankContext};
use cudarc::driver::{result as cu, sys as cu_sys, CudaContext, CudaGraph, CudaSlice, CudaStream};
use device_build::program;
use device_build::route::Build;
use device_build::shim::{check_lsa_team, DevComm};
use device_build::Module;
use device_build::{cache, Env};
use layer_tail::launch::{self, AllReduceCall, LayerArgs};
use layer_tail::reference::{self, Layer};
use layer_tail::{
    triton, Backend, Dtype, ALL_REDUCE_KERNEL, CACHE_NAME, COMPUTE_KERNEL, EPILOGUE_KERNEL,
    FUSED_KERNEL, THREADS,
};
use lsa_fast::fast::{self, FastKernels, FastOptions};
use lsa_fast::launch::AllReduceArgs;
use symm_comm::codes::{self, Call};
use symm_comm::context::{
    address, bytes_of, NcclSymmContext, NvshmemSymmContext, SymmContext, BACKEND_NCCL,
    BACKEND_NVSHMEM,
};
use symm_comm::nvshmem;

/// Which kernels the preflight's tool check ([`build_tool_found`]) looks
/// for tools for: bit [`CUDA_KERNELS`] (nvcc or NVRTC), bit
/// [`TRITON_KERNEL`] (Python with Triton). The option check sets it
/// (`Args::before_threads`, through [`build_tools_for`]);
/// `common::run_checked` runs it before the preflight, whose tool check
/// takes no options.
static TOOLS_FOR: AtomicU8 = AtomicU8::new(CUDA_KERNELS);
/// The CUDA kernels: built by nvcc or by NVRTC and nvJitLink.
const CUDA_KERNELS: u8 = 1;
/// The Triton kernel: compiled by Triton's compiler, nothing from CUDA's
/// toolkit (NCCL's device library comes as bitcode).
const TRITON_KERNEL: u8 = 2;

/// Says which kernels this run builds (bits [`CUDA_KERNELS`] and
/// [`TRITON_KERNEL`]), for [`build_tool_found`]. Call it from the option
/// check, before the preflight.
fn build_tools_for(kernels: u8) {
    TOOLS_FOR.store(kernels, Ordering::Relaxed);
}

/// The preflight's tool check (`Lesson::tool`), for the kernels the options
/// chose ([`build_tools_for`]): nvcc or NVRTC for the CUDA kernels, a
/// Python with Triton 3.6+ for the Triton kernel.
fn build_tool_found() -> Result<(), CannotRun> {
    let kernels = TOOLS_FOR.load(Ordering::Relaxed);
    let mut problems = Vec::new();
    if kernels & CUDA_KERNELS != 0 {
        problems.extend(device_build::route::some_route_found(&Env::from_process()).err());
    }
    if kernels & TRITON_KERNEL != 0 {
        problems.extend(device_build::triton::find_python_for_this_process().err());
    }
    match problems.len() {
        0 => Ok(()),
        1 => Err(problems.remove(0)),
        _ => Err(CannotRun::new(
            problems
                .iter()
                .map(|p| p.reason.as_str())
                .collect::<Vec<_>>()
                .join("\n  and "),
            problems
                .iter()
                .map(|p| p.fix.as_str())
                .collect::<Vec<_>>()
                .join("\n"),
        )),
    }
}

/// NCCL's switch for mixing graph-captured and eager launches on one
/// communicator ([`Args::graph_mixing_off`]).
const GRAPH_MIXING: &str = "NCCL_GRAPH_MIXING_SUPPORT";

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
enum Contender {
    /// Compute, symm_all_reduce, residual + RMSNorm: one cooperative launch.
    Fused,
    /// The same in Triton (triton/tp_tail.py): NCCL 2.32.3, Python with Triton.
    Triton,
    /// Compute, lesson 05b's fast AllReduce, epilogue: three launches (float32).
    Unfused05,
    /// Compute, ncclAllReduce on the windows, epilogue: three launches.
    UnfusedNccl,
    /// Unfused05's three launches replayed from a CUDA graph (float32).
    Unfused05Graph,
    /// UnfusedNccl's three launches replayed from a CUDA graph.
    UnfusedNcclGraph,
    /// The fused kernel's cooperative launch replayed from a CUDA graph.
    FusedGraph,
    /// The Triton kernel's cooperative launch replayed from a CUDA graph.
    TritonGraph,
    /// symm_all_reduce alone on the layer's partials.
    SymmLayer,
    /// symm_all_reduce alone on the AllReduce sweep (float32).
    Symm,
    /// Lesson 05's fast kernel on the AllReduce sweep.
    Fast05,
    /// ncclAllReduce on the AllReduce sweep.
    Nccl,
}

impl Contender {
    fn name(self) -> String {
        clap::ValueEnum::to_possible_value(&self)
            .map_or_else(|| format!("{self:?}"), |v| v.get_name().to_string())
    }
    fn about(self) -> &'static str {
        match self {
            Contender::Fused => "layer tail fused: tp_tail_fused (one cooperative launch)",
            Contender::Triton => {
                "layer tail fused in Triton: tp_tail_triton (one cooperative launch)"
            }
            Contender::Unfused05 => {
                "layer tail unfused: tp_compute, lesson 05b fast AllReduce, tp_residual_rmsnorm"
            }
            Contender::UnfusedNccl => {
                "layer tail unfused: tp_compute, ncclAllReduce, tp_residual_rmsnorm"
            }
            Contender::Unfused05Graph => {
                "unfused05's three launches, replayed from one CUDA graph per region"
            }
            Contender::UnfusedNcclGraph => {
                "unfused-nccl's three launches, replayed from one CUDA graph per region"
            }
            Contender::FusedGraph => "fused's one launch, replayed from one CUDA graph per region",
            Contender::TritonGraph => {
                "triton's one launch, replayed from one CUDA graph per region"
            }
            Contender::SymmLayer => "symm_all_reduce alone on the layer's partials (in place)",
            Contender::Symm => "symm_all_reduce_kernel (in place; out of place = copy + in place)",
            Contender::Fast05 => "lesson 05b (05b_lsa_fast)",
            Contender::Nccl => "ncclAllReduce on the symmetric windows",
        }
    }
    fn is_layer(self) -> bool {
        matches!(
            self,
            Contender::Fused
                | Contender::Triton
                | Contender::Unfused05
                | Contender::UnfusedNccl
                | Contender::Unfused05Graph
                | Contender::UnfusedNcclGraph
                | Contender::FusedGraph
                | Contender::TritonGraph
                | Contender::SymmLayer
        )
    }
    /// The contender whose launches a graph contender captures.
    fn captured(self) -> Option<Contender> {
        match self {
            Contender::Unfused05Graph => Some(Contender::Unfused05),
            Contender::UnfusedNcclGraph => Some(Contender::UnfusedNccl),
            Contender::FusedGraph => Some(Contender::Fused),
            Contender::TritonGraph => Some(Contender::Triton),
            _ => None,
        }
    }
    fn needs_nccl(self) -> bool {
        !matches!(
            self,
            Contender::Fused | Contender::FusedGraph | Contender::SymmLayer
        )
    }
    /// Whether the Triton kernel is built for this contender.
    fn uses_triton(self) -> bool {
        matches!(self, Contender::Triton | Contender::TritonGraph)
    }
    /// Whether this contender runs lesson 05b's AllReduce kernels.
    fn uses_05b(self) -> bool {
        matches!(
            self,
            Contender::Unfused05 | Contender::Unfused05Graph | Contender::Fast05
        )
    }
}

#[derive(clap::Args, Debug)]
struct Args {
    #[command(flatten)]
    sweep: SweepArgs,
    /// What to time.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "fused,unfused05,unfused05-graph,unfused-nccl,unfused-nccl-graph,symm-layer,symm,fast05,nccl"
    )]
    contenders: Vec<Contender>,
    /// Which backend holds the symmetric memory (nvshmem: MPI build, fused and symm-layer only).
    #[arg(long, value_enum, default_value_t = Backend::Nccl)]
    backend: Backend,
    /// The layer tail's element type (the AllReduce sweep is float32).
    #[arg(long, value_enum, default_value_t = Dtype::F32)]
    dtype: Dtype,
    /// How the NCCL backend and lesson 05b's kernels are built.
    #[arg(long, value_enum, default_value_t = Build::Auto)]
    build: Build,
    /// Instead of timing: run every bad-input case through the device and
    /// compare its return code with the documented one.
    #[arg(long)]
    bad_input: bool,
    #[command(flatten)]
    stress: StressArgs,
    /// With --stress: every operation in one region of the symmetric buffer
    /// (byte offset 0), its activations changing from one operation to the
    /// next, so that an operation that overlaps a peer's previous one shows
    /// as wrong elements.
    #[arg(long, requires = "stress")]
    one_region: bool,
    /// The grid of every kernel timed (the layer-tail kernels and lesson
    /// 05b's), at most the blocks each rank can keep resident, the default:
    /// issue 32's experiment on what a grid larger than the work costs.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    blocks: Option<u32>,
    /// The layer tail's input features a rank holds (k: the activations are
    /// tokens x k, the weights k x 4096; the floor leaves them out). Above 16
    /// both fused kernels take several steps of them, above 64 the CUDA kernel
    /// several chunks. The CPU reference's time grows with k.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=256))]
    k: u32,
}

impl Args {
    fn check(&self) -> Result<(), CannotRun> {
        self.sweep.check(self.dtype.size())?;
        if self.backend == Backend::Nvshmem {
            nvshmem::check_before_threads(
                common::launch_mode(),
                "06_symm_bench --backend nvshmem",
            )?;
        }
        if self.backend == Backend::Nvshmem {
            if let Some(c) = self.contenders.iter().find(|c| c.needs_nccl()) {
                return Err(CannotRun::new(
                    format!(
                        "--backend nvshmem times fused and symm-layer only; {} needs NCCL",
                        c.name()
                    ),
                    "pass --contenders fused,symm-layer",
                ));
            }
            if self.bad_input {
                return Err(CannotRun::new(
                    "--bad-input runs on the NCCL backend",
                    "leave out --backend nvshmem",
                ));
            }
        }
        if self.dtype == Dtype::Bf16 {
            if let Some(c) = self
                .contenders
                .iter()
                .find(|c| matches!(c, Contender::Unfused05 | Contender::Unfused05Graph))
            {
                return Err(CannotRun::new(
                    format!(
                        "{} runs lesson 05b's kernels, which sum float32 only",
                        c.name()
                    ),
                    format!("leave {} out of --contenders with --dtype bf16", c.name()),
                ));
            }
        }
        Ok(())
    }
}

impl Args {
    /// What the run needs set before any thread starts (the launcher calls
    /// this with the option check, first, in every MPI process): the tools
    /// the preflight looks for, and NVSHMEM's heap size.
    ///
    /// NOTE: set_var while another thread may read the environment is
    /// undefined behaviour (unsafe from edition 2024); in the rank's body
    /// the CUDA driver and MPI already run threads of their own.
    fn before_threads(&self) {
        build_tools_for(if self.contenders.iter().any(|c| c.uses_triton()) {
            CUDA_KERNELS | TRITON_KERNEL
        } else {
            CUDA_KERNELS
        });
        if let Some(bytes) = self.nvshmem_heap_bytes() {
            if std::env::var_os("NVSHMEM_SYMMETRIC_SIZE").is_none() {
                std::env::set_var("NVSHMEM_SYMMETRIC_SIZE", bytes.to_string());
            }
        }
        if self.graph_mixing_off() {
            std::env::set_var(GRAPH_MIXING, "0");
        }
    }

    /// Whether NCCL's support for mixing graph-captured and eager launches
    /// on one communicator is turned off for this run: when a graph
    /// contender is timed and the user did not choose. With it on, at 4
    /// ranks sharing one GPU, `unfused-nccl-graph` after any other contender
    /// hung every time; with `NCCL_GRAPH_MIXING_SUPPORT=0` the same run
    /// finished (call 127). Off is safe here: NCCL then asks that no graph
    /// launch be outstanding when an eager one is made, and every rank waits
    /// for its stream between contenders and between rounds.
    fn graph_mixing_off(&self) -> bool {
        self.contenders.iter().any(|c| c.captured().is_some())
            && std::env::var_os(GRAPH_MIXING).is_none()
    }

    /// With `--backend nvshmem`, the heap this run needs: the regions the
    /// sweep rotates through (`bench::allreduce::rotation_bytes`, the buffer
    /// the run allocates) for the largest L2 a GPU has ([`MAX_L2_BYTES`]:
    /// no GPU is open yet, and a larger L2 only asks for more regions), and
    /// 64 MiB for NVSHMEM's own (its default heap is 1 GiB).
    fn nvshmem_heap_bytes(&self) -> Option<usize> {
        if self.backend != Backend::Nvshmem {
            return None;
        }
        let sizes = self.sweep.sizes(self.dtype.size()).ok()?;
        sizes.last()?;
        Some(rotation_bytes(&self.sweep, &self.stress, &sizes, MAX_L2_BYTES) + (64 << 20))
    }
}

/// At least the L2 cache of any GPU this runs on (an H100 has 50 MiB, an
/// H200 60 MiB, a B200 126 MiB), for the NVSHMEM heap, sized before a GPU
/// is open.
const MAX_L2_BYTES: usize = 256 << 20;

/// Activation sets the one-region stress mode takes in turn.
const ONE_REGION_VARIANTS: usize = 4;
/// From this size of partial output on, the layer contenders' times are also
/// printed against the floor: [`FLOOR_PASSES`] passes at the GPU's copy rate.
const FLOOR_FROM_BYTES: usize = 16 << 20;
/// The HBM passes over the partial output that the layer needs at least: the
/// compute writes it; the epilogue reads it and the residual and writes the
/// new residual and the output (issue 32's byte count; at one rank the
/// AllReduce adds none).
const FLOOR_PASSES: f64 = 5.0;
/// The copy that measures the GPU's copy rate, at most: past L2 many times.
const COPY_RATE_BYTES: usize = 256 << 20;

const BENCH: Lesson = Lesson {
    name: "06_symm_bench",
    about: "Times the fused layer tail (symm_all_reduce inside the kernel) against the same work unfused, and symm_all_reduce against lesson 05b's fast kernel and ncclAllReduce",
    needs: Needs::GpuAndNccl {
        min: NcclVersion::new(2, 28, 0),
        feature: "the device API (nccl_device.h)",
    },
    tool: Some(build_tool_found),
};

fn main() -> ExitCode {
    common::run_checked(
        &BENCH,
        |args: &Args| {
            args.check()?;
            args.before_threads();
            Ok(())
        },
        bench,
    )
}

/// The layer of `bytes` bytes of partial output: 4096 features per token,
/// or one token of all of them below 4096 elements.
fn layer_for(bytes: usize, dtype: Dtype, k: u32) -> Layer {
    let elements = bytes / dtype.size();
    let hidden = elements.clamp(1, 4096);
    Layer {
        tokens: (elements / hidden).max(1),
        hidden,
        k: k as usize,
        eps: 1e-6,
    }
}

/// The symmetric memory of one run, from either backend.
struct Symmetric {
    /// This rank's address of the buffer's first byte.
    buffer: u64,
    /// The context over it, in device memory.
    context: CudaSlice<u8>,
    _grid_sync: CudaSlice<u8>,
}

impl Symmetric {
    /// The context's bytes, and its grid-barrier words (zeroed), copied to
    /// the GPU on `stream`: stream order puts them before any kernel
    /// launched there.
    #[allow(clippy::too_many_arguments)]
    fn new(
        kind: i32,
        ctx: &RankContext,
        stream: &Arc<CudaStream>,
        buffer: u64,
        bytes: usize,
        window: *mut std::ffi::c_void,
        staging: *mut std::ffi::c_void,
        dev_comm: u64,
    ) -> Result<Self> {
        let grid_sync = stream.alloc_zeros::<u8>(8).context("grid-barrier words")?;
        let base = SymmContext {
            kind,
            rank: ctx.rank() as i32,
            world_size: ctx.size() as i32,
        };
        let bytes_of_context = if kind == BACKEND_NCCL {
            bytes_of(&NcclSymmContext {
                base,
                buffer_window: window,
                signal_window: staging,
                dev_comm,
                local_buffer: buffer,
                buffer_size: bytes as u64,
                device_idx: ctx.device() as i32,
                reserved: 0,
                grid_sync: address(&grid_sync),
            })
        } else {
            bytes_of(&NvshmemSymmContext {
                base,
                local_buffer: buffer,
                buffer_size: bytes as u64,
                device_idx: ctx.device() as i32,
                reserved: 0,
                offset: 0,
                grid_sync: address(&grid_sync),
            })
        };
        Ok(Self {
            buffer,
            context: stream
                .clone_htod(&bytes_of_context)
                .context("copy the context")?,
            _grid_sync: grid_sync,
        })
    }
}

/// The kernels of this lesson's module.
struct Kernels {
    fused: cu_sys::CUfunction,
    compute: cu_sys::CUfunction,
    epilogue: cu_sys::CUfunction,
    all_reduce: cu_sys::CUfunction,
    /// tp_tail_triton and what it needs at launch, when `triton` is timed.
    triton: Option<(cu_sys::CUfunction, triton::Meta)>,
}

/// What the unfused contenders need from NCCL.
struct NcclSide<'a, 'd> {
    comm: &'a common::nccl::Communicator,
    send_window: sys::ncclWindow_t,
    recv_window: sys::ncclWindow_t,
    recv: u64,
    fast: &'a FastKernels,
    options: FastOptions,
    dev_comm: &'a DevComm<'d>,
}

fn bench(ctx: &RankContext, args: &Args) -> Result<()> {
    let size = ctx.size();
    let dtype = args.dtype;
    let sizes = args.sweep.sizes(dtype.size())?;
    ensure!(!sizes.is_empty(), "no size in the sweep");
    let gpu = CudaContext::new(ctx.device()).context("bind the GPU")?;
    let (major, minor) = gpu.compute_capability().context("compute capability")?;
    let stream = gpu.new_stream().context("create a stream")?;
    let arch = format!("sm_{major}{minor}");
    let cache = Env::from_process().cache_root(CACHE_NAME);
    let multiprocessors = gpu
        .attribute(cu_sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
        .context("multiprocessor count")? as u32;
    if ctx.is_root() && args.contenders.iter().any(|c| c.captured().is_some()) {
        if let Ok(value) = std::env::var(GRAPH_MIXING) {
            eprintln!(
                "note: {GRAPH_MIXING}={value} for the graph contenders (06_symm_bench sets 0 unless you set it: with 1, ranks sharing a GPU hung)"
            );
        }
    }
    // The same grid on every rank (symm_all_reduce's calling convention).
    let resident = layer_tail::agreed_blocks(ctx, multiprocessors)?;
    let blocks = args.blocks.map_or(resident, |asked| asked.min(resident));
    if ctx.is_root() && args.blocks.is_some() {
        eprintln!("note: every kernel timed on {blocks} blocks ({resident} resident per rank)");
    }
    // Send and receive windows, residuals and outputs, of `window_bytes`
    // each; and one region each of the layer's expected output, new
    // residual and sum, and its residual.
    let largest = sizes.iter().copied().max().unwrap_or(0);
    // Either way one free-memory check (exit 2 when it fails): the fixed
    // 1 MiB of --bad-input here, the sweep's inside fit_to_memory.
    let window_bytes = if args.bad_input {
        let window_bytes = 1 << 20;
        bench::check_free_memory(ctx, 4 * window_bytes + 4 * largest)?;
        window_bytes
    } else {
        // Enough regions to rotate past L2, within 4 times the largest
        // size (bench::allreduce::regions), not one per operation; or what
        // the GPU has, with a note: two regions of the largest size at least.
        let wanted = rotation_bytes(&args.sweep, &args.stress, &sizes, l2_bytes(ctx, &stream)?);
        bench::fit_to_memory(ctx, wanted, 2 * largest, 4, 4 * largest)?
    };

    match args.backend {
        Backend::Nvshmem => {
            let built = cache::root_first(ctx, "build the NVSHMEM module", || {
                let defines = layer_tail::defines(Backend::Nvshmem);
                device_build::nvshmem::build_for_this_process(
                    &arch,
                    layer_tail::source(),
                    defines,
                    &cache,
                )
            })?;
            // The heap holds every region of a trial: NVSHMEM_SYMMETRIC_SIZE,
            // set before any thread started (Args::before_threads).
            let library = nvshmem::Library::load(&built.nvshmem)?;
            let mut id = [0u8; nvshmem::UNIQUEID_BYTES];
            if ctx.is_root() {
                id = library.unique_id()?;
            }
            ctx.broadcast(&mut id)?;
            let session = library.init(ctx.rank(), size, &id)?;
            let heap = session.malloc(window_bytes)?;
            let unreachable = heap.unreachable_pes(size);
            ctx.all_ok(nvshmem::check_reachable(ctx.rank(), &unreachable).map_err(Into::into))?;
            let module = Module::load(&built.cubin())?;
            // SAFETY: the module outlives the guard (dropped below, first).
            let module_init = unsafe { session.init_module(module.raw()) }?;
            let kernels = kernels(&module)?;
            let symmetric = Symmetric::new(
                BACKEND_NVSHMEM,
                ctx,
                &stream,
                heap.as_ptr() as u64,
                window_bytes,
                std::ptr::null_mut(),
                std::ptr::null_mut(),
                0,
            )?;
            let result = run_layer(
                ctx,
                args,
                &stream,
                &kernels,
                &symmetric,
                None,
                blocks,
                &sizes,
                window_bytes,
            );
            drop(symmetric);
            drop(module_init);
            drop(module);
            heap.free();
            session.finalize();
            let series = report_series(args, result?, Vec::new())?;
            publish(ctx, args, &gpu, series)
        }
        Backend::Nccl => {
            // Lesson 06's module, and lesson 05b's fast kernels for the baselines.
            let device_code = layer_tail::nccl_program();
            let mut chosen = ctx.all_ok(
                program::choose(args.build, (major, minor), &device_code)
                    .context("choose the route"),
            )?;
            let mut chosen05 = ctx.all_ok(
                benchmarks::lsa::choose_route(args.build, major, minor, false)
                    .context("choose lesson 05b's route"),
            )?;
            let cache05 = Env::from_process().cache_root(benchmarks::lsa::CACHE_NAME);
            let (built, built05) = cache::root_first(ctx, "build the kernels", || {
                Ok((
                    program::build_chosen(
                        args.build,
                        &mut chosen,
                        &cache,
                        (major, minor),
                        &device_code,
                    )?,
                    benchmarks::lsa::build_chosen(
                        args.build,
                        &mut chosen05,
                        &cache05,
                        (major, minor),
                        false,
                    )?,
                ))
            })?;
            if ctx.is_root() {
                eprintln!("note: build route: {} ({})", chosen.plan.name(), chosen.why);
            }
            built.print_commands(ctx);
            let module = Module::load(&built.cubin(&layer_tail::source()))?;
            let mut kernels = kernels(&module)?;
            // The Triton kernel, built (rank 0 first) and loaded when timed.
            let triton_module = if args.contenders.iter().any(|c| c.uses_triton()) {
                let (built, meta) = cache::root_first(ctx, "build the Triton kernel", || {
                    triton::check_gpu(major, minor)?;
                    let program = triton::program(dtype);
                    let built = device_build::triton::build_for_this_process(
                        &program,
                        (major, minor),
                        &cache,
                    )?;
                    let meta = triton::Meta::load(&built.build)?;
                    Ok((built, meta))
                })?;
                let module = Module::load(&built.file(triton::CUBIN))?;
                let function = module.function(&meta.name)?;
                // SAFETY: the module stays loaded until after the runs.
                unsafe { triton::set_shared(function, &meta) }?;
                kernels.triton = Some((function, meta));
                Some(module)
            } else {
                None
            };
            let fast_module = Module::load(&built05.cubin(&lsa_fast::FAST))?;
            let fast_kernels = FastKernels::load(&fast_module, built05.route == "nvcc")?;
            let shim = built05.dev_comm_maker()?;
            let comm = setup::communicator(ctx)?;
            let send = setup::buffer(window_bytes)?;
            let recv = setup::buffer(window_bytes)?;
            let send_window = setup::window(&comm, &send)?;
            let recv_window = setup::window(&comm, &recv)?;
            // The one-shot's staging (symm_comm::codes::STAGING_BYTES), zeroed
            // before it is registered; both contexts use it, never at once.
            let staging_buffer = setup::buffer(codes::STAGING_BYTES)?;
            staging_buffer
                .upload(&vec![0u8; codes::STAGING_BYTES], &stream)
                .context("zero the staging window")?;
            // Zero before any peer can store into it.
            stream.synchronize().context("zero the staging window")?;
            let staging_window = setup::window(&comm, &staging_buffer)?;
            // `blocks` is already this rank's share of the GPU; the one-shot's
            // grids stay within its share too.
            let options = fast_kernels.options(ctx, blocks, multiprocessors)?;
            if ctx.is_root() && args.contenders.iter().any(|c| c.uses_05b()) {
                eprintln!("{}", fast05_note(&options, built05.route));
            }
            ctx.all_ok(fast::check_ranks(size).map_err(Into::into))?;
            // One device communicator for both modules: lesson 05b's
            // requirements (one barrier per block, the LL staging buffer)
            // include the one barrier symm_all_reduce uses.
            let (barriers, staging) = fast::requirements(&options, size, 16);
            let staging = fast_kernels.oneshot.map(|_| staging);
            let dev_comm = DevComm::create(&shim, &comm, barriers, staging)?;
            // Across nodes the LSA team is one node: exit 2, not a wrong sum.
            ctx.all_ok(check_lsa_team(dev_comm.lsa_size(), size).map_err(Into::into))?;
            // The contexts point at the device communicator: its bytes go to the GPU.
            let dev_comm_copy = stream
                .clone_htod(dev_comm.kernel_arg())
                .context("copy the device communicator to the GPU")?;
            let on_send = Symmetric::new(
                BACKEND_NCCL,
                ctx,
                &stream,
                send.as_ptr() as u64,
                window_bytes,
                send_window.as_raw().cast(),
                staging_window.as_raw().cast(),
                address(&dev_comm_copy),
            )?;
            let on_recv = Symmetric::new(
                BACKEND_NCCL,
                ctx,
                &stream,
                recv.as_ptr() as u64,
                window_bytes,
                recv_window.as_raw().cast(),
                staging_window.as_raw().cast(),
                address(&dev_comm_copy),
            )?;
            let result = if args.bad_input {
                bad_input(ctx, &stream, &kernels, &on_send, blocks, window_bytes)
                    .map(|()| Vec::new())
            } else {
                let nccl_side = NcclSide {
                    comm: &comm,
                    send_window: send_window.as_raw(),
                    recv_window: recv_window.as_raw(),
                    recv: recv.as_ptr() as u64,
                    fast: &fast_kernels,
                    options,
                    dev_comm: &dev_comm,
                };
                run_layer(
                    ctx,
                    args,
                    &stream,
                    &kernels,
                    &on_send,
                    Some(&nccl_side),
                    blocks,
                    &sizes,
                    window_bytes,
                )
                .and_then(|layer_series| {
                    let allreduce_series = run_allreduce(
                        ctx, args, &stream, &kernels, &on_recv, &nccl_side, &send, &recv, blocks,
                    )?;
                    report_series(args, layer_series, allreduce_series)
                })
            };
            drop((on_send, on_recv, dev_comm_copy));
            dev_comm.destroy()?;
            send_window.deregister()?;
            recv_window.deregister()?;
            staging_window.deregister()?;
            send.free()?;
            recv.free()?;
            staging_buffer.free()?;
            comm.destroy()?;
            drop(fast_module);
            drop(triton_module);
            drop(module);
            publish(ctx, args, &gpu, result?)
        }
    }
}

/// A series' name in the report: `<contender>-<backend>` for the layer
/// tail, the contender's own for the AllReduce sweep.
fn series_name(contender: Contender, backend: Backend) -> String {
    if contender.is_layer() {
        format!("{}-{}", contender.name(), backend.name())
    } else {
        contender.name()
    }
}

/// The run's one report's series: the layer tail's, then the AllReduce
/// sweep's, and one for every contender asked for. Under `--stress` and
/// `--bad-input`, which print tables of their own, none.
///
/// NOTE: one report per run. Each half used to publish its own, so that
/// with only layer-tail contenders the sweep's empty report was written
/// over the layer tail's `--json` (and its header printed twice).
fn report_series(args: &Args, layer: Vec<Series>, allreduce: Vec<Series>) -> Result<Vec<Series>> {
    if args.stress.stress.is_some() || args.bad_input {
        return Ok(Vec::new());
    }
    let series: Vec<Series> = layer.into_iter().chain(allreduce).collect();
    for &contender in &args.contenders {
        let name = series_name(contender, args.backend);
        ensure!(
            series.iter().any(|s| s.name == name),
            "the report has no series {name} for --contenders {}",
            contender.name()
        );
    }
    Ok(series)
}

/// Rank 0 prints the run's one report and writes `--json` and `--svg`;
/// then every rank fails if an element was wrong. Called once, after the
/// resources are released; nothing under `--stress` and `--bad-input`.
fn publish(
    ctx: &RankContext,
    args: &Args,
    gpu: &Arc<CudaContext>,
    series: Vec<Series>,
) -> Result<()> {
    if args.stress.stress.is_some() || args.bad_input {
        return Ok(());
    }
    let report = allreduce::report(ctx, gpu, BENCH.name.into(), &args.sweep, series)?;
    report.publish(ctx)?;
    report.fail_on_wrong(ctx)
}

fn kernels(module: &Module) -> Result<Kernels> {
    Ok(Kernels {
        fused: module.function(FUSED_KERNEL)?,
        compute: module.function(COMPUTE_KERNEL)?,
        epilogue: module.function(EPILOGUE_KERNEL)?,
        all_reduce: module.function(ALL_REDUCE_KERNEL)?,
        triton: None,
    })
}

/// The layer-tail contenders (and, with `--stress`, the fused stress run,
/// whose table it prints). Returns their series, for the run's one report
/// ([`report_series`]).
/// What `launches` puts on `stream`, captured into a CUDA graph,
/// instantiated and uploaded: what a graph contender replays. The windows
/// and the device communicator exist before it (NCCL supports capture).
fn capture(stream: &Arc<CudaStream>, launches: impl FnOnce() -> Result<()>) -> Result<CudaGraph> {
    stream
        .begin_capture(cu_sys::CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL)
        .context("cuStreamBeginCapture")?;
    let launched = launches();
    // The capture ends whether or not a launch failed, so that the stream
    // stays usable for the error's way out.
    let graph = stream
        .end_capture(cu_sys::CUgraphInstantiate_flags(0))
        .context("cuStreamEndCapture")?;
    launched?;
    let graph = graph.context("the capture recorded no work")?;
    graph.upload().context("cuGraphUpload")?;
    Ok(graph)
}

#[allow(clippy::too_many_arguments)]
fn run_layer(
    ctx: &RankContext,
    args: &Args,
    stream: &Arc<CudaStream>,
    kernels: &Kernels,
    symmetric: &Symmetric,
    nccl: Option<&NcclSide>,
    blocks: u32,
    sizes: &[usize],
    capacity: usize,
) -> Result<Vec<Series>> {
    let dtype = args.dtype;
    let largest = *sizes.last().context("no size")?;
    let residual = stream
        .alloc_zeros::<u8>(capacity)
        .context("residual regions")?;
    let out = stream
        .alloc_zeros::<u8>(capacity)
        .context("output regions")?;
    let status = stream.alloc_zeros::<i32>(1).context("status word")?;
    // NOTE: addresses taken once, outside the timed launches: each
    // `address` call records an event on the stream (cudarc's tracking of
    // a slice's uses across streams).
    let (residual_address, out_address) = (address(&residual), address(&out));
    let (context_address, status_address) = (address(&symmetric.context), address(&status));
    let factor = Collective::AllReduce.bus_factor(ctx.size());
    // The stress mode's spin, and the GPU checks of every output.
    let data = DataKernels::load()?;
    data.self_test_checks(stream)
        .context("the benchmark's check kernels (data.ptx) fail their self-test")?;
    let l2 = l2_bytes(ctx, stream)?;
    let contenders: Vec<Contender> = args
        .contenders
        .iter()
        .copied()
        .filter(|c| c.is_layer())
        .collect();
    let (mut series, mut stressed) = (Vec::new(), Vec::new());
    let mut rows: Vec<Vec<Row>> = vec![Vec::new(); contenders.len()];
    // The fused kernels the stress mode runs: tp_tail_fused, and
    // tp_tail_triton when it is timed.
    let mut stress_kernels = vec![Contender::Fused];
    if contenders.contains(&Contender::Triton) {
        stress_kernels.push(Contender::Triton);
    }
    let mut stress_rows: Vec<Vec<allreduce::StressRow>> = vec![Vec::new(); stress_kernels.len()];
    for &bytes in sizes {
        let layer = layer_for(bytes, dtype, args.k);
        let bytes = layer.elements() * dtype.size();
        let x = stream.clone_htod(&reference::activations(&layer, ctx.rank()));
        let x = x.context("activations")?;
        let w = stream.clone_htod(&reference::weights(&layer, ctx.rank()));
        let w = w.context("weights")?;
        let gamma = stream.clone_htod(&reference::gamma(&layer));
        let gamma = gamma.context("RMSNorm weight")?;
        // What every operation must produce, from the CPU reference once
        // per size, kept on the GPU: each output is checked where it is
        // (bench::data's check_close), none copied back.
        let residual_in =
            stream.clone_htod(&reference::encode(&reference::residual(&layer), dtype));
        let residual_in = residual_in.context("residual")?;
        let (want_out, want_residual) = reference::expected(&layer, ctx.size(), dtype);
        let want_out = stream.clone_htod(&want_out).context("expected output")?;
        let want_residual = stream
            .clone_htod(&want_residual)
            .context("expected new residual")?;
        let wants = [(address(&want_out), address(&want_residual))];
        let want_sum = if contenders.contains(&Contender::SymmLayer) {
            let sums = reference::sums(&layer, ctx.size(), dtype);
            Some(stream.clone_htod(&sums).context("expected sums")?)
        } else {
            None
        };
        let (x_address, w_address, gamma_address) = (address(&x), address(&w), address(&gamma));
        let residual_in_address = address(&residual_in);
        let want_sum_address = want_sum.as_ref().map(address);
        // As many regions as rotate past L2 (at most one per operation of
        // a trial); a trial with more operations runs in rounds, each
        // checked before the next (bench::time_rotating).
        let slots = regions(bytes, largest, l2, args.sweep.iters)
            .min(capacity / bytes.max(1))
            .max(2);
        let at = |i: usize| LayerArgs {
            context: context_address,
            buffer: symmetric.buffer,
            byte_offset: i * bytes,
            x: x_address,
            w: w_address,
            residual: residual_address + (i * bytes) as u64,
            gamma: gamma_address,
            out: out_address + (i * bytes) as u64,
            tokens: layer.tokens as i32,
            hidden: layer.hidden as i32,
            k: layer.k as i32,
            eps: layer.eps,
            dtype: dtype.code(),
            status: status_address,
        };
        // Fresh residuals and poisoned outputs in `regions` regions, in
        // stream order.
        let prepare_layer = |regions: usize| -> Result<()> {
            for i in 0..regions {
                // SAFETY: `residual` holds `capacity` bytes, `residual_in` one region's.
                unsafe {
                    cu::memcpy_dtod_async(
                        residual_address + (i * bytes) as u64,
                        residual_in_address,
                        bytes,
                        stream.cu_stream(),
                    )
                }
                .context("fresh residuals")?;
            }
            // SAFETY: `out` holds `capacity` bytes; 0xff bytes are NaN in both dtypes.
            unsafe { cu::memset_d8_async(out_address, 0xff, regions * bytes, stream.cu_stream()) }
                .context("poison the outputs")
        };
        // `regions` regions of `buffer` (float32 or bfloat16) against the
        // float32 values at `wants` on the GPU within `tolerance`, on the
        // GPU; the first wrong element is read back and reported.
        let check_regions = |name: &str,
                             buffer: u64,
                             wants: &[u64],
                             tolerance: f32,
                             regions: usize,
                             what: &str|
         -> Result<u64> {
            let count = layer.elements();
            let parts: Vec<(u64, u64, usize)> = (0..regions)
                .map(|i| (buffer + (i * bytes) as u64, wants[i % wants.len()], count))
                .collect();
            let checked = data.check_close(&parts, dtype == Dtype::Bf16, tolerance, stream)?;
            if let Some(first) = checked.first {
                let (i, e) = (first as usize / count, first as usize % count);
                let mut got = vec![0u8; dtype.size()];
                let mut want = [0f32];
                // SAFETY: both lie inside the regions just checked; we wait
                // for the stream before reading them.
                unsafe {
                    cu::memcpy_dtoh_async(
                        &mut got[..],
                        buffer + (i * bytes + e * dtype.size()) as u64,
                        stream.cu_stream(),
                    )
                    .and_then(|()| {
                        cu::memcpy_dtoh_async(
                            &mut want[..],
                            wants[i % wants.len()] + 4 * e as u64,
                            stream.cu_stream(),
                        )
                    })
                }
                .context("cuMemcpyDtoHAsync (the first wrong element)")?;
                stream
                    .synchronize()
                    .context("wait for the first wrong element")?;
                eprintln!(
                    "{}wrong result: {what}, operation {i}: {name}: element {e} of {count}: expected {}, got {} ({} of {} elements wrong)",
                    ctx.prefix(),
                    want[0],
                    reference::decode(&got, dtype)[0],
                    checked.wrong,
                    regions * count,
                );
            }
            Ok(checked.wrong)
        };
        // Slot i's output and new residual against the addresses
        // wants[i % wants.len()] (expected output, expected new residual).
        let check_against = |regions: usize, what: &str, wants: &[(u64, u64)]| -> Result<u64> {
            let outs: Vec<u64> = wants.iter().map(|&(o, _)| o).collect();
            let residuals: Vec<u64> = wants.iter().map(|&(_, r)| r).collect();
            let tolerance = reference::output_tolerance(dtype);
            Ok(check_regions(
                "new residual",
                residual_address,
                &residuals,
                0.0,
                regions,
                what,
            )? + check_regions("output", out_address, &outs, tolerance, regions, what)?)
        };
        let check_layer = |regions: usize, what: &str| check_against(regions, what, &wants);
        let compute_all = |regions: usize| -> Result<()> {
            for i in 0..regions {
                // SAFETY: every address is live and sized for the layer.
                unsafe {
                    launch::compute(
                        kernels.compute,
                        blocks,
                        THREADS,
                        stream,
                        at(i),
                        symmetric.buffer + (i * bytes) as u64,
                    )
                }?;
            }
            stream.synchronize().context("compute the partials")
        };
        let check_sums = |regions: usize, what: &str| -> Result<u64> {
            let want_sum = want_sum_address.context("no sums for symm-layer")?;
            check_regions("sum", symmetric.buffer, &[want_sum], 0.0, regions, what)
        };
        // Operation `i` of `contender` with the layer arguments `a` (the
        // region and slots of operation `i`, unless the caller moved them).
        let op_with = |contender: Contender, a: LayerArgs, i: usize| -> Result<()> {
            let partial = symmetric.buffer + (i * bytes) as u64;
            // SAFETY (every launch): the addresses are live and sized for the layer.
            match contender {
                Contender::Fused => unsafe {
                    launch::fused(kernels.fused, blocks, THREADS, stream, a)
                },
                Contender::Triton => {
                    let (kernel, meta) = kernels.triton.as_ref().context("no Triton kernel")?;
                    unsafe { triton::launch(*kernel, meta, blocks, stream, a) }
                }
                Contender::SymmLayer => unsafe {
                    launch::all_reduce(
                        kernels.all_reduce,
                        blocks,
                        THREADS,
                        stream,
                        AllReduceCall {
                            context: a.context,
                            local_ptr: symmetric.buffer,
                            byte_offset: i * bytes,
                            num_elements: layer.elements(),
                            reduce_op: codes::REDUCE_SUM,
                            dtype: dtype.code(),
                            status: status_address,
                        },
                    )
                },
                Contender::Unfused05 | Contender::UnfusedNccl => {
                    let nccl = nccl.context("the unfused contenders need the NCCL backend")?;
                    let sum = nccl.recv + (i * bytes) as u64;
                    unsafe {
                        launch::compute(kernels.compute, blocks, THREADS, stream, a, partial)
                    }?;
                    if contender == Contender::Unfused05 {
                        let count = layer.elements();
                        nccl.fast.launch(
                            fast::choose(count, ctx.size(), &nccl.options),
                            stream,
                            AllReduceArgs {
                                send_window: nccl.send_window,
                                send_offset: i * bytes,
                                recv_window: nccl.recv_window,
                                recv_offset: i * bytes,
                                count,
                            },
                            nccl.dev_comm,
                        )?;
                    } else {
                        let datatype = match dtype {
                            Dtype::F32 => sys::ncclDataType_t::ncclFloat32,
                            Dtype::Bf16 => sys::ncclDataType_t::ncclBfloat16,
                        };
                        unsafe {
                            sys::ncclAllReduce(
                                partial as *const _,
                                sum as *mut _,
                                layer.elements(),
                                datatype,
                                sys::ncclRedOp_t::ncclSum,
                                nccl.comm.as_raw(),
                                nccl_stream(stream),
                            )
                        }
                        .check("ncclAllReduce")?;
                    }
                    unsafe { launch::epilogue(kernels.epilogue, blocks, THREADS, stream, a, sum) }
                }
                _ => unreachable!("an AllReduce-sweep contender"),
            }
        };
        let op = |contender: Contender, i: usize| op_with(contender, at(i), i);
        if args.stress.stress.is_some() {
            // Each fused kernel, N back-to-back operations, ranks skewed.
            let ops = args.stress.stress.unwrap_or(0) as usize;
            let regions = (capacity / bytes.max(1)).max(1);
            let max_ns = u64::from(args.stress.max_skew_us) * 1000;
            // --one-region: ONE_REGION_VARIANTS sets of activations in turn,
            // each with its reference, every operation at byte offset 0.
            let (variant_x, variant_wants) = if args.one_region {
                let x = (0..ONE_REGION_VARIANTS)
                    .map(|v| {
                        let x = reference::activations_variant(&layer, ctx.rank(), v);
                        stream.clone_htod(&x).context("activations (one region)")
                    })
                    .collect::<Result<Vec<_>>>()?;
                let wants = (0..ONE_REGION_VARIANTS)
                    .map(|v| {
                        let (out, residual) =
                            reference::expected_variant(&layer, ctx.size(), dtype, v);
                        Ok((
                            stream
                                .clone_htod(&out)
                                .context("expected output (one region)")?,
                            stream
                                .clone_htod(&residual)
                                .context("expected new residual (one region)")?,
                        ))
                    })
                    .collect::<Result<Vec<_>>>()?;
                (x, wants)
            } else {
                (Vec::new(), Vec::new())
            };
            let variant_x_addresses: Vec<u64> = variant_x.iter().map(address).collect();
            let variant_want_addresses: Vec<(u64, u64)> = variant_wants
                .iter()
                .map(|(out, residual)| (address(out), address(residual)))
                .collect();
            for (&kernel, rows) in stress_kernels.iter().zip(&mut stress_rows) {
                let (mut done, mut wrong) = (0, 0);
                while done < ops {
                    let batch = regions.min(ops - done);
                    let seed = allreduce::fresh_seed(ctx)?;
                    prepare_layer(batch)?;
                    ctx.barrier()?;
                    for k in 0..batch {
                        let skew = allreduce::skew_ns(seed, ctx.rank(), k, max_ns);
                        if skew > 0 {
                            data.spin(skew, stream)?;
                        }
                        if args.one_region {
                            let a = LayerArgs {
                                byte_offset: 0,
                                x: variant_x_addresses[k % ONE_REGION_VARIANTS],
                                ..at(k)
                            };
                            op_with(kernel, a, k)?;
                        } else {
                            op(kernel, k)?;
                        }
                    }
                    stream.synchronize().context("stress batch")?;
                    let what = format!("stress, {}, {bytes} B", kernel.name());
                    wrong += if args.one_region {
                        check_against(batch, &what, &variant_want_addresses)?
                    } else {
                        check_layer(batch, &what)?
                    };
                    done += batch;
                }
                rows.push(allreduce::StressRow {
                    bytes,
                    ops,
                    out_of_place_wrong: 0,
                    in_place_wrong: sum_over_ranks(ctx, wrong)?,
                });
            }
            continue;
        }
        for (slot, &contender) in contenders.iter().enumerate() {
            let what = format!("{}, {bytes} B", contender.name());
            // A graph contender: each region's three launches captured once,
            // before the timing, into a graph that each operation replays.
            let graphs = match contender.captured() {
                Some(captured) => (0..slots)
                    .map(|i| capture(stream, || op(captured, i)))
                    .collect::<Result<Vec<_>>>()?,
                None => Vec::new(),
            };
            let (seconds, wrong) = if contender.captured().is_some() {
                time_rotating(
                    ctx,
                    stream,
                    &args.sweep,
                    slots,
                    &prepare_layer,
                    |i| graphs[i % slots].launch().context("cuGraphLaunch"),
                    |regions| check_layer(regions, &what),
                )?
            } else if contender == Contender::SymmLayer {
                time_rotating(
                    ctx,
                    stream,
                    &args.sweep,
                    slots,
                    &compute_all,
                    |i| op(contender, i % slots),
                    |regions| check_sums(regions, &what),
                )?
            } else {
                time_rotating(
                    ctx,
                    stream,
                    &args.sweep,
                    slots,
                    &prepare_layer,
                    |i| op(contender, i % slots),
                    |regions| check_layer(regions, &what),
                )?
            };
            stream.synchronize().context("wait for the status word")?;
            let code = stream.clone_dtoh(&status).context("read the status word")?;
            ensure!(
                code[0] == codes::OK,
                "{what}: symm_all_reduce returned {} ({})",
                code[0],
                codes::describe(code[0])
            );
            rows[slot].push(Row {
                bytes,
                count: layer.elements(),
                out_of_place: Sample::new(
                    bytes,
                    across_ranks(ctx, seconds, args.sweep.slowest)?,
                    factor,
                    sum_over_ranks(ctx, wrong)?,
                ),
                in_place: None,
            });
        }
        let _ = largest;
    }
    if args.stress.stress.is_some() {
        for (kernel, rows) in stress_kernels.iter().zip(stress_rows) {
            stressed.push(allreduce::StressSeries {
                name: format!(
                    "{}-{}{}",
                    kernel.name(),
                    args.backend.name(),
                    if args.one_region { "-one-region" } else { "" }
                ),
                rows,
            });
        }
        let placement = if args.one_region {
            "all in one region of the symmetric buffer, the activations changing from one to the next,"
        } else {
            allreduce::EACH_IN_ITS_OWN_REGION
        };
        return allreduce::publish_stress_where(ctx, &args.stress, &stressed, placement)
            .map(|()| Vec::new());
    }
    // Rank 0 alone measures and prints: where ranks share its GPU, their
    // copies at the same time would halve the rate it reads.
    if ctx.is_root() && sizes.iter().any(|&bytes| bytes >= FLOOR_FROM_BYTES) {
        let copied = capacity.min(COPY_RATE_BYTES);
        let rate = copy_rate(stream, &residual, &out, copied)?;
        eprintln!(
            "note: the layer's floor: {FLOOR_PASSES} passes over the partial output at this GPU's copy rate, {:.2} TB/s (cuMemcpyDtoDAsync of {} MiB, bytes read + written){}",
            rate / 1e12,
            copied >> 20,
            floor_caveats(ctx.size(), ctx.ranks_per_gpu())
        );
        for (&contender, rows) in contenders.iter().zip(&rows) {
            if contender == Contender::SymmLayer {
                continue;
            }
            let name = series_name(contender, args.backend);
            for row in rows.iter().filter(|r| r.bytes >= FLOOR_FROM_BYTES) {
                eprintln!("note:   {}", floor_note(&name, row, rate));
            }
        }
    }
    for (&contender, rows) in contenders.iter().zip(rows) {
        series.push(Series {
            name: series_name(contender, args.backend),
            about: format!(
                "{} ({}; the layer is in place: the out-of-place column holds it)",
                contender.about(),
                dtype.name()
            ),
            // nccl-tests' name; the AllReduce-alone contenders are float32.
            datatype: match dtype {
                Dtype::F32 => None,
                Dtype::Bf16 => Some("bfloat16".into()),
            },
            rows,
        });
    }
    Ok(series)
}

/// This GPU's copy rate in bytes read + written per second: `bytes` copied
/// from `from` to `to` (device to device, on the stream) ten times after one
/// untimed copy, between two events.
fn copy_rate(
    stream: &Arc<CudaStream>,
    from: &CudaSlice<u8>,
    to: &CudaSlice<u8>,
    bytes: usize,
) -> Result<f64> {
    const COPIES: usize = 10;
    ensure!(
        bytes > 0 && bytes <= from.len() && bytes <= to.len(),
        "a copy of {bytes} B does not fit the buffers"
    );
    let (src, dst) = (address(from), address(to));
    let copy = || -> Result<()> {
        // SAFETY: both buffers hold at least `bytes` bytes and live past
        // the synchronisation below.
        unsafe { cu::memcpy_dtod_async(dst, src, bytes, stream.cu_stream()) }
            .context("cuMemcpyDtoDAsync")
    };
    copy()?;
    let timed = Some(cu_sys::CUevent_flags::CU_EVENT_DEFAULT);
    let start = stream.record_event(timed).context("cuEventRecord")?;
    for _ in 0..COPIES {
        copy()?;
    }
    let end = stream.record_event(timed).context("cuEventRecord")?;
    let ms = f64::from(start.elapsed_ms(&end).context("cuEventElapsedTime")?);
    Ok((2 * bytes * COPIES) as f64 / (ms * 1e-3))
}

/// What the floor leaves out at `ranks` ranks, `per_gpu` of them on one GPU.
fn floor_caveats(ranks: usize, per_gpu: usize) -> String {
    let mut caveats = String::new();
    if ranks > 1 {
        caveats.push_str("; the AllReduce's own traffic is not counted");
    }
    if per_gpu > 1 {
        caveats.push_str(&format!(
            "; {per_gpu} ranks share this GPU and each moves its own passes: the floor is one rank's"
        ));
    }
    caveats
}

/// Which of lesson 05b's kernels `unfused05` and `fast05` run, by size, for
/// `options` built on `route` (`nvcc` or `jit`): the jit route's kernels have
/// no one-shot, so there they take the two-shot at every size, and a small
/// layer's unfused path is slower than on the nvcc route (calls 297 and
/// 296: 12.5 against 8.2 us at 8 B, one rank; PERF_NOTES.md, probe 44).
fn fast05_note(options: &FastOptions, route: &str) -> String {
    if options.oneshot_max_bytes == 0 {
        format!(
            "note: lesson 05b's AllReduce (unfused05, fast05): two-shot at every size ({route} route{}), on up to {} blocks",
            if route == "jit" { ", which has no one-shot: --build nvcc for it" } else { "" },
            options.twoshot_max_blocks
        )
    } else {
        format!(
            "note: lesson 05b's AllReduce (unfused05, fast05): one-shot up to {} bytes, two-shot above on up to {} blocks ({route} route)",
            options.oneshot_max_bytes, options.twoshot_max_blocks
        )
    }
}

/// One contender's time at one size against the layer's floor: its bytes
/// ([`FLOOR_PASSES`] passes over `row.bytes`) at `rate` bytes per second.
fn floor_note(name: &str, row: &Row, rate: f64) -> String {
    let floor_us = FLOOR_PASSES * row.bytes as f64 / rate * 1e6;
    let took_us = row.out_of_place.time_us;
    format!(
        "{name} {} B: floor {floor_us:.1} us, took {took_us:.1} us: {:.0} % of the floor's rate",
        row.bytes,
        100.0 * floor_us / took_us
    )
}

/// The AllReduce-alone contenders on bench's AllReduce sweep (float32):
/// their series, for the run's one report; none without such a contender.
#[allow(clippy::too_many_arguments)]
fn run_allreduce(
    ctx: &RankContext,
    args: &Args,
    stream: &Arc<CudaStream>,
    kernels: &Kernels,
    on_recv: &Symmetric,
    nccl: &NcclSide,
    send: &common::nccl::NcclBuffer,
    recv: &common::nccl::NcclBuffer,
    blocks: u32,
) -> Result<Vec<Series>> {
    let contenders: Vec<Contender> = args
        .contenders
        .iter()
        .copied()
        .filter(|c| !c.is_layer())
        .collect();
    if args.stress.stress.is_some() || contenders.is_empty() {
        return Ok(Vec::new());
    }
    let sizes = args.sweep.sizes(4)?;
    let status = stream.alloc_zeros::<i32>(1).context("status word")?;
    // Taken once, outside the timed launches (see run_layer).
    let (context_address, status_address) = (address(&on_recv.context), address(&status));
    let sweep = Sweep::new(ctx, &args.sweep, stream, Buffers::whole(send, recv), &sizes)?;
    let mut series = Vec::new();
    let progress = bench::progress(ctx, sizes.len() * contenders.len(), BENCH.name);
    for contender in contenders {
        let op = |placement: Placement, count: usize, shift: usize| -> Result<()> {
            let input = match placement {
                Placement::OutOfPlace => send.as_ptr() as u64,
                Placement::InPlace => recv.as_ptr() as u64,
            };
            let output = recv.as_ptr() as u64;
            match contender {
                Contender::Symm => {
                    if placement == Placement::OutOfPlace {
                        // SAFETY: both buffers hold shift + 4 count bytes.
                        unsafe {
                            cu::memcpy_dtod_async(
                                output + shift as u64,
                                input + shift as u64,
                                4 * count,
                                stream.cu_stream(),
                            )
                        }
                        .context("cuMemcpyDtoDAsync")?;
                    }
                    // SAFETY: the context covers `recv`.
                    unsafe {
                        launch::all_reduce(
                            kernels.all_reduce,
                            blocks,
                            THREADS,
                            stream,
                            AllReduceCall {
                                context: context_address,
                                local_ptr: on_recv.buffer,
                                byte_offset: shift,
                                num_elements: count,
                                reduce_op: codes::REDUCE_SUM,
                                dtype: codes::DTYPE_FLOAT32,
                                status: status_address,
                            },
                        )
                    }
                }
                Contender::Fast05 => {
                    let send_window = match placement {
                        Placement::OutOfPlace => nccl.send_window,
                        Placement::InPlace => nccl.recv_window,
                    };
                    nccl.fast.launch(
                        fast::choose(count, ctx.size(), &nccl.options),
                        stream,
                        AllReduceArgs {
                            send_window,
                            send_offset: shift,
                            recv_window: nccl.recv_window,
                            recv_offset: shift,
                            count,
                        },
                        nccl.dev_comm,
                    )
                }
                // SAFETY: both buffers hold shift + 4 count bytes.
                _ => unsafe {
                    nccl_allreduce(
                        (input + shift as u64) as *const _,
                        (output + shift as u64) as *mut _,
                        count,
                        nccl.comm,
                        stream,
                    )
                },
            }
        };
        series.push(sweep.series((&contender.name(), contender.about()), &progress, op)?);
    }
    progress.finish_and_clear();
    drop(sweep);
    stream.synchronize().context("wait for the status word")?;
    let code = stream.clone_dtoh(&status).context("read the status word")?;
    ensure!(
        code[0] == codes::OK,
        "symm_all_reduce returned {} ({})",
        code[0],
        codes::describe(code[0])
    );
    Ok(series)
}

/// Every case of `codes::bad_input_cases` through the device: the code it
/// returns must be the documented one (and the host's `codes::check`).
fn bad_input(
    ctx: &RankContext,
    stream: &Arc<CudaStream>,
    kernels: &Kernels,
    symmetric: &Symmetric,
    blocks: u32,
    bytes: usize,
) -> Result<()> {
    // A context like `symmetric`'s with an unknown backend type.
    stream.synchronize().context("wait for the context")?;
    let mut unknown = stream
        .clone_dtoh(&symmetric.context)
        .context("read the context")?;
    unknown[..4].copy_from_slice(&7i32.to_ne_bytes());
    let unknown_context = stream
        .clone_htod(&unknown)
        .context("copy the unknown-backend context")?;
    let mut status = stream.alloc_zeros::<i32>(1).context("status word")?;
    let (known_address, unknown_address) = (address(&symmetric.context), address(&unknown_context));
    let status_address = address(&status);
    let good = Call {
        backend: Some(BACKEND_NCCL),
        shape: codes::Shape::OneD,
        buffer_size: bytes as u64,
        buffer_address: symmetric.buffer,
        local_offset: 0,
        byte_offset: 0,
        num_elements: (bytes / 4) as u64,
        reduce_op: codes::REDUCE_SUM,
        dtype: codes::DTYPE_FLOAT32,
    };
    let cases = codes::bad_input_cases(good);
    let mut agreed = 0;
    for (what, call, expected) in &cases {
        let context = match call.backend {
            None => 0,
            Some(BACKEND_NCCL) => known_address,
            Some(_) => unknown_address,
        };
        // On this rank's stream: it lands before the launch below and waits
        // for no peer's kernel, so the ranks need no barrier between cases.
        stream
            .memcpy_htod(&[i32::MIN], &mut status)
            .context("reset the status word")?;
        // SAFETY: the kernel checks every argument before touching memory.
        unsafe {
            launch::all_reduce_shaped(
                kernels.all_reduce,
                call.shape,
                blocks,
                THREADS,
                stream,
                AllReduceCall {
                    context,
                    local_ptr: symmetric.buffer.wrapping_add(call.local_offset as u64),
                    byte_offset: call.byte_offset as usize,
                    num_elements: call.num_elements as usize,
                    reduce_op: call.reduce_op,
                    dtype: call.dtype,
                    status: status_address,
                },
            )
        }?;
        stream.synchronize().context(*what)?;
        let code = stream.clone_dtoh(&status).context("read the status word")?;
        let host = codes::check(call);
        if code[0] == *expected && host == *expected {
            agreed += 1;
        }
        ctx.println_root(format!(
            "  {what}: device {} ({}), documented {expected}, host check {host}",
            code[0],
            codes::describe(code[0])
        ));
    }
    let agreed = ctx.all_ok(Ok(agreed))?;
    ctx.println_root(format!(
        "bad input: {agreed} of {} cases return the documented code",
        cases.len()
    ));
    ctx.all_ok(if agreed == cases.len() {
        Ok(())
    } else {
        Err(anyhow::anyhow!(
            "{} bad-input cases returned another code",
            cases.len() - agreed
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bench::report::{Machine, Report};
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        args: Args,
    }

    fn args(line: &[&str]) -> Args {
        Cli::parse_from(std::iter::once("06_symm_bench").chain(line.iter().copied())).args
    }

    #[test]
    fn the_fast05_note_says_when_the_jit_route_has_no_one_shot() {
        let jit = fast05_note(&FastOptions::two_shot_only(64), "jit");
        assert!(
            jit.contains("two-shot at every size (jit route, which has no one-shot: --build nvcc"),
            "{jit}"
        );
        let nvcc = fast05_note(&FastOptions::new(2, 64), "nvcc");
        assert!(
            nvcc.contains("one-shot up to ") && nvcc.ends_with("(nvcc route)"),
            "{nvcc}"
        );
    }

    /// What the timing loops return for `contenders`: one row each.
    fn timed(contenders: &[Contender], backend: Backend) -> Vec<Series> {
        contenders
            .iter()
            .map(|&c| Series {
                name: series_name(c, backend),
                about: c.about().into(),
                datatype: None,
                rows: vec![Row {
                    bytes: 8192,
                    count: 2048,
                    out_of_place: Sample::new(8192, 1e-5, 1.0, 0),
                    in_place: None,
                }],
            })
            .collect()
    }

    /// Only layer-tail contenders: the one report holds them (it used to be
    /// overwritten by the AllReduce sweep's empty one), written as JSON and
    /// read back.
    #[test]
    fn one_report_holds_every_contender_asked_for() {
        let dir = tempfile::tempdir().unwrap();
        for (line, layer, sweep) in [
            (
                "fused,unfused-nccl,symm-layer",
                vec![
                    Contender::Fused,
                    Contender::UnfusedNccl,
                    Contender::SymmLayer,
                ],
                vec![],
            ),
            (
                "fused,symm,nccl",
                vec![Contender::Fused],
                vec![Contender::Symm, Contender::Nccl],
            ),
            ("symm", vec![], vec![Contender::Symm]),
        ] {
            let args = args(&["--contenders", line]);
            let series = report_series(
                &args,
                timed(&layer, args.backend),
                timed(&sweep, args.backend),
            )
            .unwrap();
            let report = Report {
                benchmark: BENCH.name.into(),
                collective: Collective::AllReduce,
                datatype: "float".into(),
                redop: "sum".into(),
                machine: Machine {
                    device: "a GPU".into(),
                    driver: "13.0".into(),
                    nccl_version: "2.32.3".into(),
                    nccl_path: "/nccl".into(),
                    ranks: 2,
                    ranks_per_gpu: 1,
                    launch: "threads".into(),
                    host: "host".into(),
                    date: "2026-11-25T00:00:00Z".into(),
                },
                options: args.sweep.clone(),
                series,
            };
            let path = dir.path().join("report.json");
            report.write_json(&path).unwrap();
            let names: Vec<String> = Report::read_json(&path)
                .unwrap()
                .series
                .into_iter()
                .map(|s| s.name)
                .collect();
            let want: Vec<String> = args
                .contenders
                .iter()
                .map(|&c| series_name(c, args.backend))
                .collect();
            assert_eq!(names, want, "--contenders {line}");
        }
    }

    /// Lesson 05b's kernels sum float32: with bfloat16, either contender
    /// that runs them is refused by name before any GPU work.
    #[test]
    fn bf16_refuses_the_contenders_that_run_lesson_05b() {
        for contender in ["unfused05", "unfused05-graph"] {
            let asked = args(&["--dtype", "bf16", "--contenders", contender]);
            let err = asked.check().unwrap_err().to_string();
            assert!(
                err.contains(&format!("{contender} runs lesson 05b's kernels")),
                "{err}"
            );
        }
        let asked = args(&[
            "--dtype",
            "bf16",
            "--contenders",
            "fused,unfused-nccl-graph",
        ]);
        assert!(asked.check().is_ok());
    }

    /// NCCL's graph mixing goes off only for a run that times a graph
    /// contender, and only when the user has not set it.
    #[test]
    fn graph_mixing_goes_off_only_for_graph_contenders() {
        assert!(!args(&["--contenders", "fused,unfused-nccl"]).graph_mixing_off());
        if std::env::var_os(GRAPH_MIXING).is_none() {
            assert!(args(&["--contenders", "fused,unfused-nccl-graph"]).graph_mixing_off());
            assert!(
                args(&[]).graph_mixing_off(),
                "the default list has graph contenders"
            );
        }
    }

    /// The floor note: 5 passes of 128 MiB at 3 TB/s are 223.7 us; a
    /// contender that took 300 us ran at 75 % of that rate.
    #[test]
    fn the_floor_note_gives_the_byte_count_at_the_copy_rate() {
        let row = Row {
            bytes: 128 << 20,
            count: 32 << 20,
            out_of_place: Sample::new(128 << 20, 300e-6, 1.0, 0),
            in_place: None,
        };
        assert_eq!(
            floor_note("fused-nccl", &row, 3e12),
            "fused-nccl 134217728 B: floor 223.7 us, took 300.0 us: 75 % of the floor's rate"
        );
    }

    /// The floor's header says what it leaves out: nothing at one rank.
    #[test]
    fn the_floor_names_what_it_leaves_out() {
        assert_eq!(floor_caveats(1, 1), "");
        assert_eq!(
            floor_caveats(2, 1),
            "; the AllReduce's own traffic is not counted"
        );
        assert_eq!(
            floor_caveats(2, 2),
            "; the AllReduce's own traffic is not counted; 2 ranks share this GPU and each moves its own passes: the floor is one rank's"
        );
    }

    /// Each graph contender replays the launches of its unfused contender.
    #[test]
    fn a_graph_contender_captures_its_unfused_one() {
        assert_eq!(
            Contender::Unfused05Graph.captured(),
            Some(Contender::Unfused05)
        );
        assert_eq!(
            Contender::UnfusedNcclGraph.captured(),
            Some(Contender::UnfusedNccl)
        );
        assert_eq!(Contender::FusedGraph.captured(), Some(Contender::Fused));
        assert_eq!(Contender::TritonGraph.captured(), Some(Contender::Triton));
        assert!(!Contender::FusedGraph.needs_nccl() && Contender::TritonGraph.uses_triton());
        assert_eq!(Contender::Fused.captured(), None);
        assert!(Contender::UnfusedNcclGraph.is_layer());
        assert!(Contender::UnfusedNcclGraph.needs_nccl());
    }

    #[test]
    fn a_contender_without_a_series_is_an_error() {
        let asked = args(&["--contenders", "fused,symm"]);
        let err = report_series(
            &asked,
            timed(&[Contender::Fused], asked.backend),
            Vec::new(),
        )
        .unwrap_err();
        assert!(err.to_string().contains("no series symm"), "{err}");
        // The stress and bad-input modes print tables of their own.
        let stress = args(&["--stress", "10"]);
        assert!(report_series(&stress, Vec::new(), Vec::new())
            .unwrap()
            .is_empty());
    }

    #[test]
    fn the_nvshmem_heap_holds_a_trial_s_regions() {
        let nccl = args(&["-b", "1M", "-e", "4M", "-n", "5"]);
        assert_eq!(nccl.nvshmem_heap_bytes(), None);
        let nvshmem = args(&[
            "--backend",
            "nvshmem",
            "--contenders",
            "fused",
            "-b",
            "1M",
            "-e",
            "4M",
            "-n",
            "5",
        ]);
        let sizes = [1 << 20, 2 << 20, 4 << 20];
        let heap = nvshmem.nvshmem_heap_bytes().unwrap();
        assert_eq!(
            heap,
            rotation_bytes(&nvshmem.sweep, &nvshmem.stress, &sizes, MAX_L2_BYTES) + (64 << 20)
        );
        // It holds what the run allocates on any GPU up to that L2, and
        // every operation of a trial has its region at these sizes.
        for l2 in [6 << 20, 50 << 20, 126 << 20] {
            assert!(
                heap >= rotation_bytes(&nvshmem.sweep, &nvshmem.stress, &sizes, l2) + (64 << 20)
            );
        }
        assert_eq!(heap, 6 * (4 << 20) + (64 << 20));
    }
}
