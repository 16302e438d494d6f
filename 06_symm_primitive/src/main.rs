//! # Lesson 06: a symmetric-memory AllReduce that your own kernel calls
//!
//! Lessons 01-05 launch kernels that do nothing but communicate. Here the
//! communication lives inside a user's kernel: the tail of a
//! tensor-parallel transformer layer computes this rank's partial output,
//! all-reduces it across the ranks, adds the residual and runs an RMSNorm on
//! the sum, in ONE kernel launch, with no round trip to the host in between.
//!
//! The AllReduce is a device function from a small library, the
//! `symm_comm` crate's
//! [`symm_comm.cuh`](../../symm_comm/kernels/symm_comm.cuh), shaped like
//! PyTorch's `torch/csrc/_extern_triton` (`symm_comm.cuh`, `torch_symm.cu`):
//! a context tells `symm_all_reduce(ctx, local_ptr, byte_offset, n, op,
//! dtype)` where the symmetric memory is. Here it is NCCL's: a window and a
//! device communicator; the library calls NCCL's device API, built by nvcc
//! against the loaded NCCL's headers (2.28+) or by NVRTC + nvJitLink with
//! NCCL 2.32.3's own device library (`--build auto|nvcc|jit`, as in lesson
//! 05). The same layer in Triton is `06b_symm_triton`; on NVSHMEM's heap,
//! `06c_symm_nvshmem`. The layer itself, its kernels
//! ([`tp_tail.cu`](../../layer_tail/kernels/tp_tail.cu)), data and CPU
//! reference, is the `layer_tail` crate's, which those two share.
//!
//! Run it (nvcc and NCCL's headers, or NCCL 2.32.3 with the NVRTC and
//! nvJitLink wheels):
//!
//! ```text
//! cargo run --release --bin 06_symm_primitive                  # one thread per visible GPU
//! NTHREADS=2 cargo run --release --bin 06_symm_primitive -- --dtype bf16
//! cargo build --release --features mpi
//! mpirun -np 2 target/release/06_symm_primitive
//! ```
//!
//! Every rank checks every element of its output and its new residual
//! against a CPU reference. The build route is printed on stderr, so the
//! transcript is the same for every route.
//!
//! Left out on purpose: the weights and activations are made up (small
//! dyadic fractions, so the sums are exact), the "GEMM" is a plain loop,
//! and the AllReduce is sum-only (float32 and bfloat16), like PyTorch's.

use std::process::ExitCode;

use anyhow::{Context, Result};
use common::{kernel, setup};
use common::{Lesson, NcclVersion, Needs, RankContext};
use cudarc::driver::{sys as cu_sys, CudaContext};
use device_build::program;
use device_build::route::Build;
use device_build::shim::{check_lsa_team, DevComm};
use device_build::{cache, command, Env, Module};
use layer_tail::reference::{self, Layer};
use layer_tail::{Dtype, CACHE_NAME, FUSED_KERNEL, THREADS};
use symm_comm::codes;
use symm_comm::context::{address, bytes_of, NcclSymmContext, SymmContext, BACKEND_NCCL};

/// The layer: 512 tokens of 4096 features (8 MiB of float32 all-reduced),
/// 16 input features per rank.
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
    /// How the library and kernels are built: nvcc, jit (NVRTC + nvJitLink
    /// with NCCL's device library, NCCL 2.32.3), or auto.
    #[arg(long, value_enum, default_value_t = Build::Auto)]
    build: Build,
}

const LESSON: Lesson = Lesson {
    name: "06_symm_primitive",
    about: "A device-side AllReduce (symm_all_reduce, NCCL backend) fused into a tensor-parallel layer tail",
    needs: Needs::GpuAndNccl {
        min: NcclVersion::new(2, 28, 0),
        feature: "the device API (nccl_device.h)",
    },
    tool: Some(program::tool_found),
};

fn main() -> ExitCode {
    common::run(&LESSON, symm_primitive_lesson)
}

/// Runs on every rank at once (a thread or an MPI process each).
fn symm_primitive_lesson(ctx: &RankContext, args: &Args) -> Result<()> {
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

    // Step 2: Build the library and the user kernels (nvcc, or NVRTC and nvJitLink), or reuse the cache.
    // NOTE: rank 0 builds first; the others then find the cache filled.
    let arch = format!("sm_{major}{minor}");
    let cache = Env::from_process().cache_root(CACHE_NAME);
    let device_code = layer_tail::nccl_program();
    let (chosen, built) = cache::root_first(ctx, "Step 2: build the library and kernels", || {
        let mut chosen = program::choose(args.build, (major, minor), &device_code)?;
        let built = program::build_chosen(
            args.build,
            &mut chosen,
            &cache,
            (major, minor),
            &device_code,
        )?;
        Ok((chosen, built))
    })?;
    let route = format!("note: build route: {} ({})", chosen.plan.name(), chosen.why);
    let module = command::module_note(&built.build, built.route, &arch);
    command::print_on_root(ctx, [route, module]);
    // The exact commands (nvcc, or NVRTC and nvJitLink), or the cached files used.
    built.print_commands(ctx);
    let shim = built.dev_comm_maker()?;
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
    // One LSA barrier: only block 0 meets the other ranks (symm_comm.cuh).
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

    // Step 4: Load the module (cuModuleLoadData) and find the fused kernel.
    let module =
        Module::load(&built.cubin(&layer_tail::source())).context("Step 4: load the module")?;
    let fused = module.function(FUSED_KERNEL).context("Step 4")?;

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

    // Step 7: Launch the fused kernel cooperatively: compute, symm_all_reduce, residual + RMSNorm.
    // NOTE: symm_all_reduce waits for every block, so the whole grid must be
    // resident at once (cuLaunchCooperativeKernel checks): one 512-thread block
    // per multiprocessor (launch bounds), the multiprocessors divided among the
    // ranks sharing a GPU, the same grid on every rank (layer_tail::agreed_blocks).
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

    // Step 9: Release in order: device communicator, window, buffer, communicator.
    // (cudarc frees the CudaSlices on the stream when they go out of scope.)
    dev_comm.destroy().context("Step 9: ncclDevCommDestroy")?;
    window
        .deregister()
        .context("Step 9: deregister the window")?;
    buffer.free().context("Step 9: free the buffer")?;
    comm.destroy().context("Step 9: destroy the communicator")?;
    drop(module);
    Ok(())
}
