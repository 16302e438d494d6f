//! # Your own CUDA kernel calling `symm_all_reduce`
//!
//! The smallest complete program around the library: a kernel of yours
//! writes this rank's data into a symmetric buffer, calls
//! `symm_all_reduce` in the middle of its own work, and uses the sum in the
//! same launch. The host makes the NCCL backend's context and checks every
//! element on every rank.
//!
//! ```text
//! cargo run --release --bin your_cuda_kernel            # one thread per visible GPU
//! NTHREADS=2 cargo run --release --bin your_cuda_kernel
//! cargo build --release --features mpi && mpirun -np 2 target/release/your_cuda_kernel
//! ```
//!
//! Needs nvcc and the loaded NCCL's headers (2.28+), or NCCL 2.32.3 with the
//! NVRTC and nvJitLink wheels, as lesson 05. Left out: NVSHMEM (lesson 06c
//! shows it), bfloat16, and a grid agreed between GPUs of different sizes.

use std::process::ExitCode;
use std::sync::LazyLock;

use anyhow::{Context, Result};
use common::verify::check_all;
use common::{kernel, setup, CannotRun, Lesson, NcclVersion, Needs, RankContext};
use cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT;
use cudarc::driver::CudaContext;
use device_build::route::{Build, Program};
use device_build::shim::{check_lsa_team, DevComm};
use device_build::{cache, program, Env, Module, Source};
use symm_comm::codes;
use symm_comm::context::{address, bytes_of, NcclSymmContext, SymmContext, BACKEND_NCCL};

/// Your kernel. `symm_comm::with_library` puts the library in front of it.
const KERNEL: &str = r#"
extern "C" __global__ void __launch_bounds__(512, 1)
sum_then_add_one(void* ctx, float* buffer, unsigned long long n, int rank, int* status) {
  size_t first = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  size_t stride = (size_t)gridDim.x * blockDim.x;
  for (size_t i = first; i < n; i += stride) buffer[i] = (float)((rank + 1) * (i % 64));
  // Every thread of every block calls it, with the same arguments.
  int rc = symm_all_reduce(ctx, buffer, 0, n, SYMM_REDUCE_SUM, SYMM_DTYPE_FLOAT32);
  if (first == 0) *status = rc;
  if (rc != SYMM_OK) return;
  // The whole sum is visible here, to every thread: use it in the same launch.
  for (size_t i = first; i < n; i += stride) buffer[i] += 1.0f;
}
"#;
const COUNT: usize = 1 << 20;
const THREADS: u32 = 512;

fn source() -> Source {
    static TEXT: LazyLock<String> = LazyLock::new(|| symm_comm::with_library(KERNEL));
    let text = TEXT.as_str();
    Source {
        file: "your_cuda_kernel.cu",
        text,
    }
}

#[derive(clap::Args)]
struct Args {}

const LESSON: Lesson = Lesson {
    name: "your_cuda_kernel",
    about: "Your own CUDA kernel calling symm_all_reduce (NCCL backend)",
    needs: Needs::GpuAndNccl {
        min: NcclVersion::new(2, 28, 0),
        feature: "the device API",
    },
    tool: Some(program::tool_found),
};

fn main() -> ExitCode {
    common::run(&LESSON, your_kernel)
}

fn your_kernel(ctx: &RankContext, _: &Args) -> Result<()> {
    let (rank, size) = (ctx.rank(), ctx.size());
    ctx.println_root(format!(
        "Your CUDA kernel calls symm_all_reduce on {COUNT} floats"
    ));

    // Step 1: Bind the GPU and create a stream.
    let gpu = CudaContext::new(ctx.device()).context("Step 1: bind the GPU")?;
    let capability = gpu
        .compute_capability()
        .context("Step 1: compute capability")?;
    let stream = gpu.new_stream().context("Step 1: create a stream")?;
    ctx.all_ok(if size <= codes::MAX_RANKS && capability.0 >= 7 {
        Ok(())
    } else {
        Err(CannotRun::new(
            "the library needs a Volta GPU or newer and 8 ranks or fewer",
            "run fewer ranks on newer GPUs",
        )
        .into())
    })?;

    // Step 2: Build your kernel with the library in front of it (nvcc, or NVRTC and nvJitLink).
    let device_code = Program {
        nvcc_kernels: vec![source()],
        jit_kernels: vec![source()],
        defines: vec![(symm_comm::WITH_NCCL.into(), "1".into())],
        wrapper_names: symm_comm::WRAPPER_NAMES.to_vec(),
    };
    let mut chosen = ctx.all_ok(program::choose(Build::Auto, capability, &device_code))?;
    let cache = Env::from_process().cache_root("your_cuda_kernel");
    let built = cache::root_first(ctx, "Step 2: build", || {
        program::build_chosen(Build::Auto, &mut chosen, &cache, capability, &device_code)
    })?;
    built.print_commands(ctx); // the exact compiler commands, on rank 0's stderr
    let module = Module::load(&built.cubin(&source())).context("Step 2: load the module")?;
    let function = module.function("sum_then_add_one")?;

    // Step 3: Make symmetric memory: a window over ncclMemAlloc, a device communicator.
    let comm = setup::communicator(ctx).context("Step 3: communicator")?;
    let buffer = setup::buffer(COUNT * 4).context("Step 3: ncclMemAlloc")?;
    let window = setup::window(&comm, &buffer).context("Step 3: window")?;
    let shim = built.dev_comm_maker()?;
    // One LSA barrier: only block 0 talks to the other ranks.
    let dev_comm = DevComm::create(&shim, &comm, 1, None).context("Step 3: ncclDevCommCreate")?;
    ctx.all_ok(check_lsa_team(dev_comm.lsa_size(), size).map_err(Into::into))?;
    // Copies on the rank's stream land before the kernel launched on it.
    let dev_comm_copy = stream.clone_htod(dev_comm.kernel_arg())?;

    // Step 4: Write the context your kernel takes, with two zeroed grid-barrier words.
    let grid_sync = stream.alloc_zeros::<u8>(8)?;
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
        buffer_size: (COUNT * 4) as u64,
        device_idx: ctx.device() as i32,
        reserved: 0,
        grid_sync: address(&grid_sync),
    };
    let context = stream
        .clone_htod(&bytes_of(&context))
        .context("Step 4: the context")?;

    // Step 5: Launch cooperatively: every block resident, the same grid on every rank.
    let multiprocessors = gpu.attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)? as u32;
    let blocks = ctx.share_of_gpu(multiprocessors).min(8);
    let status = stream.clone_htod(&[i32::MIN])?;
    let (context_address, buffer_address) = (address(&context), buffer.as_ptr() as u64);
    let (count, rank_arg, status_address) = (COUNT as u64, rank as i32, address(&status));
    // Every rank's setup is done before any rank launches. Nothing here waits
    // for the whole CUDA context any more (every copy is on the rank's stream),
    // but ranks that share a GPU share its context, and a setup call that did
    // would wait for a peer's kernel that waits for this rank (call 83): cheap
    // insurance.
    ctx.barrier()
        .context("Step 5: wait for every rank's setup")?;
    let mut launch = kernel::launch_builder(&stream, function);
    launch
        .arg(&context_address)
        .arg(&buffer_address)
        .arg(&count)
        .arg(&rank_arg)
        .arg(&status_address);
    // SAFETY: the arguments match the kernel's signature; the module is loaded.
    unsafe { launch.launch_cooperative(kernel::grid(blocks.max(1), THREADS)) }
        .context("Step 5: cuLaunchCooperativeKernel")?;
    stream
        .synchronize()
        .context("Step 5: wait for the kernel")?;
    // A copy into pageable memory (a Vec) returns once it is done.
    let code = stream.clone_dtoh(&status)?;

    // Step 6: Check the return code and every element on every rank.
    ctx.all_ok(match code[0] {
        codes::OK => Ok(()),
        c => Err(anyhow::anyhow!(
            "symm_all_reduce returned {c} ({})",
            codes::describe(c)
        )),
    })?;
    let mut result = vec![0f32; COUNT];
    buffer
        .download(&mut result, &stream)
        .context("Step 6: copy the result")?;
    let ranks_sum = (size * (size + 1) / 2) as f32;
    let expected = |i: usize| ranks_sum * (i % 64) as f32 + 1.0;
    ctx.all_ok(check_all("buffer", &result, expected).context("Step 6: verify"))?;
    ctx.println_ordered(format!("  Rank {rank} verified {COUNT} sums"))?;
    ctx.println_root("symm_all_reduce in your CUDA kernel: PASSED");

    // Step 7: Release: device communicator, window, buffer, communicator.
    drop((context, grid_sync, status, dev_comm_copy));
    dev_comm.destroy().context("Step 7: ncclDevCommDestroy")?;
    window.deregister().context("Step 7: deregister")?;
    buffer.free().context("Step 7: free")?;
    comm.destroy().context("Step 7: destroy the communicator")?;
    drop(module);
    Ok(())
}
