//! # Lesson 06c: the fused layer tail on NVSHMEM's symmetric heap
//!
//! Lesson 06's tensor-parallel layer tail (compute, AllReduce, residual +
//! RMSNorm in one kernel, `layer_tail/kernels/tp_tail.cu`) with the
//! symmetric memory held by NVSHMEM instead of NCCL: the same
//! `symm_all_reduce`, its NVSHMEM backend (`nvshmem_ptr` loads and stores,
//! `nvshmemx_barrier_all_block`), built by NVRTC and linked with
//! `libnvshmem_device.a` through nvJitLink. The context's `type` tells the
//! library which backend it is given.
//!
//! NVSHMEM hosts one PE per process, so this runs under mpirun only:
//!
//! ```text
//! cargo build --release --features mpi
//! NVSHMEM_DISABLE_NVLS=1 mpirun -np 2 -x NVSHMEM_DISABLE_NVLS target/release/06c_symm_nvshmem
//! ```
//!
//! NVSHMEM comes from `NVSHMEM_HOME` or the active Python environment's
//! `nvidia-nvshmem-cu13` wheel; NVRTC and nvJitLink as lesson 05's jit route
//! finds them. Every rank checks every element against the layer's CPU
//! reference (`layer_tail::reference`), as lesson 06 does.
//!
//! Left out on purpose: what lesson 06 leaves out, and NVSHMEM's own
//! launcher (`nvshmrun`): the project's launcher carries NVSHMEM's unique id.

use std::process::ExitCode;

use anyhow::{Context, Result};
use common::{kernel, Lesson, NcclVersion, Needs, RankContext};
use cudarc::driver::{sys as cu_sys, CudaContext};
use device_build::{cache, program, Env, Module};
use layer_tail::reference::{self, Layer};
use layer_tail::{Backend, Dtype, CACHE_NAME, FUSED_KERNEL, THREADS};
use symm_comm::context::{address, bytes_of, NvshmemSymmContext, SymmContext, BACKEND_NVSHMEM};
use symm_comm::{codes, nvshmem};

/// The layer: 512 tokens of 4096 features (8 MiB of float32 all-reduced),
/// 16 input features per rank, as in lesson 06.
const LAYER: Layer = Layer {
    tokens: 512,
    hidden: 4096,
    k: 16,
    eps: 1e-6,
};

#[derive(clap::Args, Debug)]
struct Args {
    /// The element type of the partial outputs, residual and output.
    #[arg(long, value_enum, default_value_t = Dtype::F32)]
    dtype: Dtype,
}

const LESSON: Lesson = Lesson {
    name: "06c_symm_nvshmem",
    about: "Lesson 06's fused layer tail on NVSHMEM's symmetric heap (one process per GPU, MPI)",
    needs: Needs::GpuAndNccl {
        min: NcclVersion::new(2, 28, 0),
        feature: "the device API (nccl_device.h)",
    },
    tool: Some(program::tool_found),
};

fn main() -> ExitCode {
    common::run_checked(
        &LESSON,
        // NVSHMEM needs one process per GPU; names its bootstrap plugin by
        // its full, checked path while no other thread exists.
        |_: &Args| nvshmem::check_before_threads(common::launch_mode(), "06c_symm_nvshmem"),
        symm_nvshmem_lesson,
    )
}

/// Runs on every rank at once (a thread or an MPI process each).
fn symm_nvshmem_lesson(ctx: &RankContext, args: &Args) -> Result<()> {
    let (rank, size) = (ctx.rank(), ctx.size());
    let dtype = args.dtype;
    ctx.println_root(
        "Starting the fused layer tail: compute, symm_all_reduce, residual + RMSNorm in one kernel",
    );

    // Step 1: Bind this rank's GPU, check that it can run the library, and create a stream.
    let gpu = CudaContext::new(ctx.device()).context("Step 1: bind the GPU")?;
    let (major, minor) = gpu
        .compute_capability()
        .context("Step 1: compute capability")?;
    ctx.all_ok(layer_tail::check_gpu(major, minor, ctx.device(), size).map_err(Into::into))?;
    let stream = gpu.new_stream().context("Step 1: create a stream")?;
    ctx.println_ordered(format!("  Rank {rank} using GPU device {}", ctx.device()))?;
    if ctx.is_root() {
        eprintln!("note: backend: nvshmem (NVSHMEM symmetric heap, one PE per process)");
    }

    // Step 2: Build the library and kernels (NVRTC, then nvJitLink with libnvshmem_device.a), or reuse the cache.
    // NOTE: rank 0 builds first and the others wait, so that they find the
    // cache filled instead of all compiling at once.
    let arch = format!("sm_{major}{minor}");
    let cache = Env::from_process().cache_root(CACHE_NAME);
    let built = cache::root_first(ctx, "Step 2: build the library and kernels", || {
        let defines = layer_tail::defines(Backend::Nvshmem);
        device_build::nvshmem::build_for_this_process(&arch, layer_tail::source(), defines, &cache)
    })?;
    built.print_build_note(ctx);
    // The exact commands (NVRTC and nvJitLink), or the cached cubin used.
    built.print_commands(ctx);
    ctx.println_root(format!(
        "Layer: {} tokens x {} features, {} input features per rank, {}",
        LAYER.tokens,
        LAYER.hidden,
        LAYER.k,
        dtype.name()
    ));

    // Step 3: Set up symmetric memory: initialise NVSHMEM with a shared unique id, then nvshmem_malloc.
    // NOTE: every call here is collective: every rank, the same order.
    let bytes = LAYER.elements() * dtype.size();
    let library =
        nvshmem::Library::load(&built.nvshmem).context("Step 3: load NVSHMEM's host library")?;
    // The project's own launcher carries the id, as it carries NCCL's.
    let mut id = [0u8; nvshmem::UNIQUEID_BYTES];
    if ctx.is_root() {
        id = library
            .unique_id()
            .context("Step 3: nvshmemx_get_uniqueid")?;
    }
    ctx.broadcast(&mut id)
        .context("Step 3: share the NVSHMEM unique id")?;
    let session = library
        .init(rank, size, &id)
        .context("Step 3: initialise NVSHMEM")?;
    let buffer = session.malloc(bytes).context("Step 3: nvshmem_malloc")?;
    // NOTE: every PE must be reachable by loads and stores, asked here and
    // agreed by every rank before any kernel waits in NVSHMEM's barrier
    // (exit 2 otherwise).
    let unreachable = buffer.unreachable_pes(size);
    ctx.all_ok(nvshmem::check_reachable(rank, &unreachable).map_err(Into::into))?;
    ctx.println_ordered(format!(
        "  Rank {rank} set up its symmetric buffer ({} MiB)",
        bytes >> 20
    ))?;

    // Step 4: Load the module (cuModuleLoadData) and register it with NVSHMEM (nvshmemx_cumodule_init).
    let module = Module::load(&built.cubin()).context("Step 4: load the module")?;
    // SAFETY: the module stays loaded until after the guard is dropped (Step 9).
    let module_init =
        unsafe { session.init_module(module.raw()) }.context("Step 4: nvshmemx_cumodule_init")?;
    let fused = module.function(FUSED_KERNEL).context("Step 4")?;

    // Step 5: Write the context the kernel reads (SymmContext, then NVSHMEM's fields) into device memory.
    // NOTE: the grid barrier's two words must start zeroed and belong to
    // this context alone.
    // NOTE: every copy here is on the rank's stream, so it lands before the
    // kernel launched next on that stream (cudarc's CudaSlice).
    let grid_sync = stream
        .alloc_zeros::<u8>(8)
        .context("Step 5: grid-barrier words")?;
    let context = NvshmemSymmContext {
        base: SymmContext {
            kind: BACKEND_NVSHMEM,
            rank: rank as i32,
            world_size: size as i32,
        },
        local_buffer: buffer.as_ptr() as u64,
        buffer_size: bytes as u64,
        device_idx: ctx.device() as i32,
        reserved: 0,
        offset: 0,
        grid_sync: address(&grid_sync),
    };
    let context = stream
        .clone_htod(&bytes_of(&context))
        .context("Step 5: copy the context")?;

    // Step 6: Upload this rank's inputs: activations, weight rows, residual and RMSNorm weight.
    let x = stream.clone_htod(&reference::activations(&LAYER, rank));
    let x = x.context("Step 6: activations")?;
    let w = stream.clone_htod(&reference::weights(&LAYER, rank));
    let w = w.context("Step 6: weights")?;
    let residual = stream.clone_htod(&reference::encode(&reference::residual(&LAYER), dtype));
    let residual = residual.context("Step 6: residual")?;
    let gamma = stream.clone_htod(&reference::gamma(&LAYER));
    let gamma = gamma.context("Step 6: RMSNorm weight")?;
    let out = stream.alloc_zeros::<u8>(bytes).context("Step 6: output")?;
    let status = stream
        .clone_htod(&[i32::MIN])
        .context("Step 6: status word")?;

    // Step 7: Launch the fused kernel cooperatively: compute, symm_all_reduce, residual + RMSNorm.
    // NOTE: symm_all_reduce waits for every block of the grid, so the grid
    // must fit on the GPU at once; cuLaunchCooperativeKernel checks that.
    // One block of 512 threads per multiprocessor fits (launch bounds).
    // Every rank launches the same grid: the smallest GPU's multiprocessors,
    // divided among the ranks that share a GPU, whose grids must all be
    // resident at once (layer_tail::agreed_blocks).
    let multiprocessors = gpu
        .attribute(cu_sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
        .context("Step 7: multiprocessor count")? as u32;
    let blocks = layer_tail::agreed_blocks(ctx, multiprocessors).context("Step 7: the grid")?;
    if ctx.is_root() {
        eprintln!("note: {FUSED_KERNEL} on {blocks} blocks x {THREADS} threads");
    }
    // tp_tail_fused(ctx, buffer, byte_offset, x, w, residual, gamma, out,
    // tokens, hidden, k, eps, dtype, status), each argument by address.
    let (context_address, buffer_address, byte_offset) =
        (address(&context), buffer.as_ptr() as u64, 0usize);
    let layer = [
        address(&x),
        address(&w),
        address(&residual),
        address(&gamma),
        address(&out),
    ];
    let shape = [LAYER.tokens as i32, LAYER.hidden as i32, LAYER.k as i32];
    let (eps, dtype_code, status_address) = (LAYER.eps, dtype.code(), address(&status));
    let mut launch = kernel::launch_builder(&stream, fused);
    launch
        .arg(&context_address)
        .arg(&buffer_address)
        .arg(&byte_offset);
    for address in &layer {
        launch.arg(address);
    }
    for n in &shape {
        launch.arg(n);
    }
    launch.arg(&eps).arg(&dtype_code).arg(&status_address);
    // SAFETY: the arguments match tp_tail_fused's parameters; every address
    // is live device memory of the layer's sizes; the module is loaded.
    unsafe { launch.launch_cooperative(kernel::grid(blocks, THREADS)) }
        .context("Step 7: launch the fused kernel")?;
    stream
        .synchronize()
        .context("Step 7: wait for the kernel")?;
    // A copy into pageable memory (a Vec) returns once it is done.
    let code = stream
        .clone_dtoh(&status)
        .context("Step 7: read the status")?;
    ctx.all_ok(if code[0] == codes::OK {
        Ok(())
    } else {
        Err(anyhow::anyhow!(
            "Step 7: symm_all_reduce returned {} ({})",
            code[0],
            codes::describe(code[0])
        ))
    })?;
    ctx.println_root(format!("Kernel {FUSED_KERNEL} completed on every rank"));

    // Step 8: Verify every output and new-residual element on every rank against the CPU reference.
    let (want_out, want_residual) = reference::expected(&LAYER, size, dtype);
    let got_out = stream.clone_dtoh(&out).context("Step 8: copy the output")?;
    let got_residual = stream
        .clone_dtoh(&residual)
        .context("Step 8: copy the residual")?;
    let got_out = reference::decode(&got_out, dtype);
    let got_residual = reference::decode(&got_residual, dtype);
    let checked = reference::check_close("new residual", &got_residual, &want_residual, 0.0)
        .and_then(|()| {
            reference::check_close(
                "normalized output",
                &got_out,
                &want_out,
                reference::output_tolerance(dtype),
            )
        });
    ctx.all_ok(checked.context("Step 8: verify"))?;
    ctx.println_ordered(format!(
        "  Rank {rank} verified {} outputs and {} residuals",
        got_out.len(),
        got_residual.len()
    ))?;
    ctx.println_root("Layer tail verified on every rank: PASSED");

    // Step 9: Release in order: the module's NVSHMEM state, the heap buffer, the module, NVSHMEM.
    drop((context, grid_sync, x, w, residual, gamma, out, status));
    drop(module_init);
    buffer.free();
    drop(module);
    session.finalize();
    Ok(())
}
