//! # Lesson 05: an AllReduce kernel on NCCL's device API
//!
//! Lessons 01-03 asked NCCL to run its own kernels. Here we write the kernel:
//! [`kernels/allreduce_lsa.cu`](../kernels/allreduce_lsa.cu) sums float
//! buffers across ranks by loading directly from every peer's symmetric
//! window and storing into every peer's receive window ("load/store
//! accessible" peers, LSA), with LSA barriers keeping the ranks in step. The
//! host side, in Rust, sets up the windows and a *device communicator*, then
//! launches the kernel with the CUDA driver API.
//!
//! Why it matters: the device API lets computation and communication share
//! one kernel (fusing an AllReduce into the layer that produces its input,
//! say) and lets you write collectives NCCL does not have.
//!
//! Device code only runs with the NCCL release it was built against, so the
//! program builds its kernel at run time, for this GPU and the NCCL it
//! loaded, and caches it (the `device_build` crate), by one of two routes
//! (`--build auto|nvcc|jit`):
//!
//! * `nvcc`: the C++ kernel, compiled by nvcc against the loaded NCCL's
//!   headers (any release from 2.28), with a small host shim that owns every
//!   NCCL struct whose layout changes between releases;
//! * `jit`: the same kernel on the C API of `nccl_device_wrapper.h`
//!   (`kernels/allreduce_lsa_c.cu`), compiled by NVRTC and linked by nvJitLink with
//!   NCCL's own device library (`libnccl_device.ltoir`, NCCL 2.32.3): no
//!   toolkit, only pip wheels, and `ncclDevCommCreate` called from Rust.
//!
//! `auto` takes jit when it can and says why on stderr.
//!
//! Run it (needs nvcc and the NCCL headers matching the library, or NCCL
//! 2.32.3 with NVRTC and nvJitLink; and GPUs with P2P access to each other):
//!
//! ```text
//! cargo run --release --bin 05_device_lsa               # one thread per visible GPU
//! NTHREADS=2 cargo run --release --bin 05_device_lsa
//! cargo build --release --features mpi
//! mpirun -np 2 target/release/05_device_lsa             # one process per GPU
//! ```
//!
//! Left out on purpose: speed (lesson 05b, `05b_lsa_fast`, makes the same
//! AllReduce as fast as the links allow, and `05_allreduce_bench`, in
//! `benchmarks/`, measures both against NCCL), multimem (NVLink SHARP) and
//! the GPU-initiated networking (GIN) half of the device API, which needs a
//! network.

use std::ffi::CString;
use std::process::ExitCode;

use anyhow::{Context, Result};
use common::verify::check_all;
use common::{kernel, setup};
use common::{CannotRun, Lesson, NcclVersion, Needs, RankContext};
use cudarc::driver::{result as cu, sys as cu_sys, CudaContext};
use device_build::program::{self, build_chosen};
use device_build::route::Build;
use device_build::shim::{check_lsa_team, DevComm};
use device_build::{cache, Env, Module};
use device_lsa::{check_fixed_grid, CACHE_NAME, KERNEL, KERNEL_C, KERNEL_NAME, THREADS};

/// Elements per buffer: 1M floats (4 MiB), as in NCCL's example.
const COUNT: usize = 1024 * 1024;
/// Blocks in the grid, and LSA barriers in the device communicator: one
/// constant for both, because block `b` synchronises on barrier `b`. More
/// blocks than barriers would make blocks share a barrier and corrupt it.
const BLOCKS: u32 = 16;

#[derive(clap::Args, Debug)]
struct Args {
    /// How the kernel is built: nvcc (CUDA toolkit, NCCL 2.28+), jit (NVRTC +
    /// nvJitLink with NCCL's device library, NCCL 2.32.3), or auto.
    #[arg(long, value_enum, default_value_t = Build::Auto)]
    build: Build,
}

const LESSON: Lesson = Lesson {
    name: "05_device_lsa",
    about: "An AllReduce kernel on NCCL's device API (LSA pointers and barriers), built at run time (nvcc, or NVRTC + nvJitLink)",
    needs: Needs::GpuAndNccl {
        min: NcclVersion::new(2, 28, 0),
        feature: "the device API (nccl_device.h)",
    },
    tool: Some(program::tool_found),
};

/// The loaded NCCL's version (the headers and the device library are checked
/// to be the same release).
fn loaded_version() -> Result<NcclVersion> {
    Ok(common::nccl::loaded_nccl()?.version)
}

fn main() -> ExitCode {
    common::run(&LESSON, device_lsa)
}

/// Runs on every rank at once (a thread or an MPI process each).
fn device_lsa(ctx: &RankContext, args: &Args) -> Result<()> {
    let (rank, size) = (ctx.rank(), ctx.size());
    ctx.println_root("Starting Device API AllReduce initialization");

    // Step 1: Bind this rank's GPU, check that it can run the device API, and create a stream.
    let gpu = CudaContext::new(ctx.device()).context("Step 1: bind the GPU")?;
    let (major, minor) = gpu
        .compute_capability()
        .context("Step 1: compute capability")?;
    ctx.all_ok(if major >= 7 {
        Ok(())
    } else {
        Err(CannotRun::new(
            format!("GPU {} has compute capability {major}.{minor}; NCCL's device API needs 7.0 (Volta) or newer", ctx.device()),
            "run on a Volta or newer GPU",
        )
        .into())
    })?;
    let stream = gpu.new_stream().context("Step 1: create a stream")?;
    ctx.println_ordered(format!("  Rank {rank} using GPU device {}", ctx.device()))?;

    // Step 2: Build the kernel (nvcc and a host shim, or NVRTC and nvJitLink), or reuse the cached build.
    // NOTE: device code only runs with the NCCL release it was built for:
    // nvcc compiles against the loaded NCCL's headers; the jit route links
    // with the loaded NCCL's own device library. Rank 0 builds first and the
    // others wait, so that they find the cache filled instead of all
    // compiling at once.
    let device_code = device_lsa::program();
    let mut chosen = ctx.all_ok(
        program::choose(args.build, (major, minor), &device_code)
            .context("Step 2: choose how to build the kernels"),
    )?;
    let cache = Env::from_process().cache_root(CACHE_NAME);
    let built = cache::root_first(ctx, "Step 2: build the kernels", || {
        build_chosen(
            args.build,
            &mut chosen,
            &cache,
            (major, minor),
            &device_code,
        )
    })?;
    if ctx.is_root() {
        eprintln!("note: build route: {} ({})", chosen.plan.name(), chosen.why);
    }
    ctx.println_root(format!(
        "Kernel {} built for sm_{major}{minor} against NCCL {} headers in {}",
        built.source(&KERNEL, &KERNEL_C),
        loaded_version()?,
        chosen.plan.nccl_include().display()
    ));
    // On rank 0's stderr: what was built, by which tools, in how long; then
    // the exact nvcc commands, or NVRTC's options and nvJitLink's inputs, or,
    // on a cache hit, the cached files used.
    built.print_build_note(ctx, "kernel");
    built.print_commands(ctx);

    // Step 3: Load the kernel (cuModuleLoadData) and the shim, and check both match the NCCL in use.
    let cubin_path = built.cubin(&KERNEL);
    let cubin = std::fs::read(&cubin_path)
        .with_context(|| format!("Step 3: read {}", cubin_path.display()))?;
    // SAFETY: the context is current (Step 1) and `cubin` is a complete ELF image.
    let module = unsafe { cu::module::load_data(cubin.as_ptr().cast()) }
        .context("Step 3: cuModuleLoadData")?;
    let module = Module::adopt(module);
    // SAFETY: the module is loaded; the name is the kernel's extern "C" name.
    let function = unsafe { cu::module::get_function(module.raw(), CString::new(KERNEL_NAME)?) }
        .context("Step 3: cuModuleGetFunction")?;
    // The nvcc route's shim (dlopen), or, on the jit route, NCCL's own
    // ncclDevCommCreate with the requirements laid out for 2.32.3.
    let shim = built
        .dev_comm_maker()
        .context("Step 3: load the device-communicator calls")?;
    ctx.println_root(format!(
        "ncclDevComm is {} bytes in NCCL {} ({})",
        shim.dev_comm_size(),
        loaded_version()?,
        built.dev_comm_opacity()
    ));

    // Step 4: Create the communicator from a unique id that rank 0 shares.
    // The calls of lesson 01's Step 2, made by common::setup.
    let comm = setup::communicator(ctx).context("Step 4: create the communicator")?;
    ctx.println_ordered(format!(
        "  Rank {rank} initialized NCCL communicator for {size} total ranks"
    ))?;

    // Step 5: Allocate the buffers with ncclMemAlloc and register them as symmetric windows.
    // The kernel reaches peers only through windows: ncclGetLsaPointer turns
    // (window, offset, peer) into an address this GPU can load from.
    let bytes = COUNT * std::mem::size_of::<f32>();
    // The calls of lesson 02's Steps 3 and 4 (ncclMemAlloc,
    // ncclCommWindowRegister with NCCL_WIN_COLL_SYMMETRIC), made by common::setup.
    let send = setup::buffer(bytes).context("Step 5: allocate the send buffer")?;
    let recv = setup::buffer(bytes).context("Step 5: allocate the receive buffer")?;
    let send_window = setup::window(&comm, &send).context("Step 5: register the send window")?;
    let recv_window = setup::window(&comm, &recv).context("Step 5: register the receive window")?;

    // Step 6: Fill the send buffer with this rank's id.
    send.upload(&vec![rank as f32; COUNT], &stream)
        .context("Step 6: fill the send buffer")?;
    ctx.println_ordered(format!("  Rank {rank} initialized data with value {rank}"))?;

    // Step 7: Create the device communicator with one LSA barrier per block (ncclDevCommCreate).
    // NOTE: collective, like the window registration. The device communicator
    // is a plain struct the kernel takes by value; its barriers live in memory
    // NCCL allocated for this communicator.
    let multiprocessors = gpu
        .attribute(cu_sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
        .context("Step 7: multiprocessor count")? as u32;
    // NVIDIA's kernel runs BLOCKS blocks whatever the GPU: check that every
    // rank's fit at once when ranks share it (RankContext::share_of_gpu).
    // SAFETY: `function` comes from `module`, which is loaded.
    let per_multiprocessor = unsafe { device_lsa::blocks_per_multiprocessor(function, THREADS) }
        .context("Step 7: occupancy of the kernel")?;
    ctx.all_ok(
        check_fixed_grid(
            BLOCKS,
            ctx.share_of_gpu(per_multiprocessor * multiprocessors),
        )
        .map_err(Into::into),
    )?;
    let dev_comm =
        DevComm::create(&shim, &comm, BLOCKS, None).context("Step 7: ncclDevCommCreate")?;
    // NOTE: the kernel reaches only the LSA team, the ranks whose memory this
    // GPU maps (one node at most). If it holds fewer than every rank, the
    // ranks span nodes and the kernel would sum within each node: refuse
    // (exit 2) before any launch rather than verify a wrong answer.
    ctx.all_ok(check_lsa_team(dev_comm.lsa_size(), size).map_err(Into::into))?;
    ctx.println_ordered(format!(
        "  Rank {rank} created device communicator with {BLOCKS} LSA barriers"
    ))?;

    // Step 8: Launch the kernel on this rank's stream, the device communicator passed by value.
    // cuLaunchKernel takes one pointer per kernel parameter and copies as many
    // bytes as the parameter's type has, so the devComm bytes travel by value;
    // common::kernel's builder collects those pointers, as cudarc's
    // launch_builder does for its own modules.
    // NOTE: the host copy in Step 6 and the kernel share `stream`, so the send
    // buffer is filled before the kernel starts; other ranks' buffers are
    // ordered by the kernel's first (acquire) barrier.
    let expected = (size * (size - 1) / 2) as f32;
    ctx.println_root(format!(
        "Starting AllReduce with {COUNT} elements ({} MB) using Device API",
        bytes >> 20
    ));
    ctx.println_root(format!(
        "Expected result: sum of ranks 0 to {} = {expected} per element",
        size - 1
    ));
    // 16 blocks of 512 threads, as in NVIDIA's example.
    let (send_win, recv_win) = (send_window.as_raw(), recv_window.as_raw());
    let (send_offset, recv_offset) = (0usize, 0usize);
    let mut launch = kernel::launch_builder(&stream, function);
    launch
        .arg(&send_win)
        .arg(&send_offset)
        .arg(&recv_win)
        .arg(&recv_offset)
        .arg(&COUNT)
        .arg_bytes(dev_comm.kernel_arg());
    // SAFETY: the arguments match the kernel's signature (window, size_t,
    // window, size_t, size_t, ncclDevComm), and the module is loaded.
    unsafe { launch.launch(kernel::grid(BLOCKS, THREADS)) }.context("Step 8: cuLaunchKernel")?;
    stream
        .synchronize()
        .context("Step 8: wait for the kernel")?;
    ctx.println_ordered(format!(
        "  Rank {rank} completed AllReduce kernel execution"
    ))?;

    // Step 9: Verify every element on every rank against 0 + 1 + ... + (n-1).
    let mut result = vec![0f32; COUNT];
    recv.download(&mut result, &stream)
        .context("Step 9: copy the result to the host")?;
    ctx.all_ok(check_all("receive buffer", &result, |_| expected).context("Step 9: verify"))?;
    ctx.println_root("AllReduce completed. Result verification: PASSED");
    ctx.println_root(format!(
        "All elements correctly sum to {expected} (ranks 0-{})",
        size - 1
    ));

    // Step 10: Release: the device communicator, the windows, the buffers, the communicator.
    dev_comm.destroy().context("Step 10: ncclDevCommDestroy")?;
    send_window
        .deregister()
        .context("Step 10: deregister the send window")?;
    recv_window
        .deregister()
        .context("Step 10: deregister the receive window")?;
    send.free().context("Step 10: free the send buffer")?;
    recv.free().context("Step 10: free the receive buffer")?;
    comm.destroy()
        .context("Step 10: destroy the communicator")?;
    drop(module);
    Ok(())
}
