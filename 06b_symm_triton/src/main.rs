//! # Lesson 06b: the fused layer tail in Triton, calling the same `symm_all_reduce`
//!
//! Lesson 06's tensor-parallel layer tail (compute, AllReduce, residual +
//! RMSNorm in one kernel) written as a Triton kernel,
//! [`triton/tp_tail.py`](../../layer_tail/triton/tp_tail.py). It calls
//! the same `symm_all_reduce` through the `symm_comm` crate's Triton binding
//! (`symm_comm/triton/symm.py`), linked from the library's LLVM bitcode and
//! NCCL 2.32.3's `libnccl_device.bc`. This host compiles it ahead of time
//! with Triton's compiler (Python, `TRITON_PYTHON`), then launches it with
//! the same NCCL context as lesson 06's CUDA kernel.
//!
//! Run it (a Hopper GPU or newer, NCCL 2.32.3, a Python with Triton 3.6+):
//!
//! ```text
//! NCCL_HOME=~/nccl-2.32.3/nvidia/nccl TRITON_PYTHON=~/venv/bin/python \
//!   NTHREADS=2 cargo run --release --bin 06b_symm_triton
//! cargo build --release --features mpi
//! mpirun -np 2 -x NCCL_HOME -x TRITON_PYTHON target/release/06b_symm_triton
//! ```
//!
//! Every rank checks every element of its output and its new residual
//! against the layer's CPU reference (`layer_tail::reference`), as in
//! lesson 06.
//!
//! Left out on purpose: what lesson 06 leaves out, and Triton's own JIT
//! launcher: the kernel is compiled ahead of time and launched through the
//! driver, cooperatively, as the library's calling convention needs.

use std::process::ExitCode;

use anyhow::{Context, Result};
use common::setup;
use common::{CannotRun, Lesson, NcclVersion, Needs, RankContext};
use cudarc::driver::{sys as cu_sys, CudaContext};
use device_build::shim::{check_lsa_team, DevComm, Shim};
use device_build::{cache, Env, Module};
use layer_tail::launch::LayerArgs;
use layer_tail::reference::{self, Layer};
use layer_tail::{triton, Dtype, CACHE_NAME};
use symm_comm::codes;
use symm_comm::context::{address, bytes_of, NcclSymmContext, SymmContext, BACKEND_NCCL};

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
    name: "06b_symm_triton",
    about: "Lesson 06's fused layer tail as a Triton kernel calling symm_all_reduce (NCCL 2.32.3)",
    needs: Needs::GpuAndNccl {
        min: NcclVersion::new(2, 28, 0),
        feature: "the device API (nccl_device.h)",
    },
    tool: Some(triton_found),
};

/// The preflight's tool check: a Python with Triton 3.6+ (no nvcc or NVRTC:
/// NCCL's device library comes as bitcode).
fn triton_found() -> Result<(), CannotRun> {
    device_build::triton::find_python_for_this_process().map(|_| ())
}

fn main() -> ExitCode {
    common::run_checked(
        &LESSON,
        |_: &Args| {
            device_build::triton::check_named_python(
                std::env::var_os("TRITON_PYTHON").as_ref(),
                std::env::var_os("PATH").as_ref(),
            )
        },
        symm_triton_lesson,
    )
}

/// Runs on every rank at once (a thread or an MPI process each).
fn symm_triton_lesson(ctx: &RankContext, args: &Args) -> Result<()> {
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
        eprintln!("note: backend: nccl (NCCL window and device communicator)");
    }

    // Step 2: Compile the Triton kernel with the library's bitcode and NCCL's, or reuse the cache.
    // NOTE: rank 0 builds first and the others wait, so that they find the
    // cache filled instead of all compiling at once. The kernel links NCCL's
    // device library itself; NCCL is called directly for the device
    // communicator, with 2.32.3's requirements layout, as on the jit route.
    let cache = Env::from_process().cache_root(CACHE_NAME);
    let (built, meta) = cache::root_first(ctx, "Step 2: build the library and kernels", || {
        triton::check_gpu(major, minor)?;
        let built = device_build::triton::build_for_this_process(
            &triton::program(dtype),
            (major, minor),
            &cache,
        )?;
        let meta = triton::Meta::load(&built.build)?;
        Ok((built, meta))
    })?;
    built.print_build_note(ctx);
    // The exact command (Python running Triton's compiler), or the cached files used.
    built.print_commands(ctx);
    let shim = Shim::direct(&built.nccl_library, triton::NCCL)?;
    ctx.println_root(format!(
        "Layer: {} tokens x {} features, {} input features per rank, {}",
        LAYER.tokens,
        LAYER.hidden,
        LAYER.k,
        dtype.name()
    ));

    // Step 3: Set up symmetric memory: a window over ncclMemAlloc and a device communicator.
    // NOTE: every call here is collective: every rank, the same order.
    let bytes = LAYER.elements() * dtype.size();
    let comm = setup::communicator(ctx).context("Step 3: create the communicator")?;
    let buffer = setup::buffer(bytes).context("Step 3: ncclMemAlloc")?;
    let window = setup::window(&comm, &buffer).context("Step 3: ncclCommWindowRegister")?;
    // One LSA barrier: only block 0 of the kernel synchronises with the
    // other ranks (see the calling convention in symm_comm.cuh).
    let dev_comm = DevComm::create(&shim, &comm, 1, None).context("Step 3: ncclDevCommCreate")?;
    // NOTE: symm_all_reduce reaches its peers by loads and stores: the LSA
    // team must hold every rank, or the sum would stop at the node (across
    // nodes the device API needs its GIN half): exit 2 then.
    ctx.all_ok(check_lsa_team(dev_comm.lsa_size(), ctx.size()).map_err(Into::into))?;
    // The context points at the device communicator: its bytes go to the GPU.
    // NOTE: every copy here is on the rank's stream, so it lands before the
    // kernel launched next on that stream (cudarc's CudaSlice).
    let dev_comm_copy = stream
        .clone_htod(dev_comm.kernel_arg())
        .context("Step 3: copy the device communicator to the GPU")?;
    ctx.println_ordered(format!(
        "  Rank {rank} set up its symmetric buffer ({} MiB)",
        bytes >> 20
    ))?;

    // Step 4: Load the module (cuModuleLoadData) and give the kernel its shared memory.
    let module = Module::load(&built.file(triton::CUBIN)).context("Step 4: load the module")?;
    let kernel = module.function(&meta.name).context("Step 4")?;
    // SAFETY: the module is loaded until Step 9.
    unsafe { triton::set_shared(kernel, &meta) }.context("Step 4")?;

    // Step 5: Write the context the kernel reads (SymmContext, then NCCL's fields) into device memory.
    // NOTE: the grid barrier's two words must start zeroed and belong to
    // this context alone.
    let grid_sync = stream
        .alloc_zeros::<u8>(8)
        .context("Step 5: grid-barrier words")?;
    let context = NcclSymmContext {
        base: SymmContext {
            kind: BACKEND_NCCL,
            rank: rank as i32,
            world_size: size as i32,
        },
        buffer_window: window.as_raw().cast(),
        signal_window: std::ptr::null_mut(),
        dev_comm: address(&dev_comm_copy),
        local_buffer: buffer.as_ptr() as u64,
        buffer_size: bytes as u64,
        device_idx: ctx.device() as i32,
        reserved: 0,
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

    // Step 7: Launch the Triton kernel cooperatively: compute, symm_all_reduce, residual + RMSNorm.
    // NOTE: symm_all_reduce waits for every block of the grid, so the grid
    // must fit on the GPU at once; cuLaunchCooperativeKernel checks that.
    // One program of 16 warps per multiprocessor fits (at most 128
    // registers a thread).
    // Every rank launches the same grid: the smallest GPU's multiprocessors,
    // divided among the ranks that share a GPU, whose grids must all be
    // resident at once (layer_tail::agreed_blocks).
    let multiprocessors = gpu
        .attribute(cu_sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
        .context("Step 7: multiprocessor count")? as u32;
    let blocks = layer_tail::agreed_blocks(ctx, multiprocessors).context("Step 7: the grid")?;
    if ctx.is_root() {
        eprintln!(
            "note: {} on {blocks} blocks x {} threads",
            meta.name,
            meta.threads()
        );
    }
    let layer_args = LayerArgs {
        context: address(&context),
        buffer: buffer.as_ptr() as u64,
        byte_offset: 0,
        x: address(&x),
        w: address(&w),
        residual: address(&residual),
        gamma: address(&gamma),
        out: address(&out),
        tokens: LAYER.tokens as i32,
        hidden: LAYER.hidden as i32,
        k: LAYER.k as i32,
        eps: LAYER.eps,
        dtype: dtype.code(),
        status: address(&status),
    };
    // SAFETY: every address is live device memory of the layer's sizes.
    unsafe { triton::launch(kernel, &meta, blocks, &stream, layer_args) }
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
    ctx.println_root(format!("Kernel {} completed on every rank", meta.name));

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

    // Step 9: Release in order: device communicator, window, buffer, communicator.
    drop((
        context,
        grid_sync,
        x,
        w,
        residual,
        gamma,
        out,
        status,
        dev_comm_copy,
    ));
    dev_comm.destroy().context("Step 9: ncclDevCommDestroy")?;
    window
        .deregister()
        .context("Step 9: deregister the window")?;
    buffer.free().context("Step 9: free the buffer")?;
    comm.destroy().context("Step 9: destroy the communicator")?;
    drop(module);
    Ok(())
}
