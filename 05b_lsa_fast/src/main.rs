//! # Lesson 05b: lesson 05's AllReduce, as fast as the links allow
//!
//! Lesson 05 ran NVIDIA's example kernel: 16 blocks, one float per thread,
//! two LSA barriers. Here the same AllReduce (same windows, same device
//! communicator, same check) runs
//! [`kernels/allreduce_lsa_fast.cu`](../kernels/allreduce_lsa_fast.cu):
//! 16-byte vectors, a grid sized to the GPU, a barrier-free one-shot over
//! NCCL's LL protocol for small buffers and a two-shot for large ones, the
//! choice made on the host from the size alone (`fast.rs`). The README's
//! "Making it fast" takes it one measured step at a time, and
//! `05_allreduce_bench` (in `benchmarks/`) measures it against NCCL.
//!
//! The kernels are built at run time as lesson 05's is (`--build
//! auto|nvcc|jit`, see its README). On the jit route
//! (`kernels/allreduce_lsa_fast_c.cu`) every size takes the two-shot: NCCL
//! 2.32.3's `nccl_device_wrapper.h` has no LL API for the one-shot.
//!
//! Run it (needs nvcc and the NCCL headers matching the library, or NCCL
//! 2.32.3 with NVRTC and nvJitLink; and GPUs with P2P access to each other):
//!
//! ```text
//! cargo run --release --bin 05b_lsa_fast               # one thread per visible GPU
//! NTHREADS=2 cargo run --release --bin 05b_lsa_fast
//! cargo build --release --features mpi
//! mpirun -np 2 target/release/05b_lsa_fast             # one process per GPU
//! ```
//!
//! Left out on purpose: what lesson 05 explains (the device API, the
//! routes, the shim), multimem (NVLink SHARP), and launching through a CUDA
//! graph (PERF_NOTES.md).

use std::process::ExitCode;

use anyhow::{Context, Result};
use common::setup;
use common::verify::check_all;
use common::{CannotRun, Lesson, NcclVersion, Needs, RankContext};
use cudarc::driver::{sys as cu_sys, CudaContext};
use device_build::program::{self, build_chosen};
use device_build::route::Build;
use device_build::shim::{check_lsa_team, DevComm};
use device_build::{cache, Env, Module};
use lsa_fast::fast::{self, FastKernels, GridPlan};
use lsa_fast::launch::AllReduceArgs;
use lsa_fast::{CACHE_NAME, FAST, FAST_C};

/// Elements per buffer: 1M floats (4 MiB), as in NCCL's example.
const COUNT: usize = 1024 * 1024;
/// LSA barriers the device communicator holds at least: lesson 05's 16
/// (the fast kernels need one per two-shot block, usually more).
const BLOCKS: u32 = 16;

#[derive(clap::Args, Debug)]
struct Args {
    /// How the kernels are built: nvcc (CUDA toolkit, NCCL 2.28+), jit (NVRTC +
    /// nvJitLink with NCCL's device library, NCCL 2.32.3), or auto.
    #[arg(long, value_enum, default_value_t = Build::Auto)]
    build: Build,
}

const LESSON: Lesson = Lesson {
    name: "05b_lsa_fast",
    about: "Lesson 05's AllReduce made fast: one-shot over NCCL's LL protocol or two-shot on every multiprocessor, built at run time (nvcc, or NVRTC + nvJitLink)",
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
    common::run(&LESSON, lsa_fast)
}

/// Runs on every rank at once (a thread or an MPI process each).
fn lsa_fast(ctx: &RankContext, args: &Args) -> Result<()> {
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

    // Step 2: Build the kernels (nvcc and a host shim, or NVRTC and nvJitLink), or reuse the cached build.
    // NOTE: device code only runs with the NCCL release it was built for:
    // nvcc compiles against the loaded NCCL's headers; the jit route links
    // with the loaded NCCL's own device library. Rank 0 builds first and the
    // others wait, so that they find the cache filled instead of all
    // compiling at once.
    let device_code = lsa_fast::program();
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
        built.source(&FAST, &FAST_C),
        loaded_version()?,
        chosen.plan.nccl_include().display()
    ));
    // On rank 0's stderr: what was built, by which tools, in how long; then
    // the exact nvcc commands, or NVRTC's options and nvJitLink's inputs, or,
    // on a cache hit, the cached files used.
    built.print_build_note(ctx, "kernels");
    built.print_commands(ctx);

    // Step 3: Load the kernels (cuModuleLoadData) and the shim, and check both match the NCCL in use.
    // The nvcc route's module holds both kernels; the jit route's the
    // two-shot alone (see fast.rs).
    let module = Module::load(&built.cubin(&FAST)).context("Step 3: cuModuleLoadData")?;
    let fast_kernels =
        FastKernels::load(&module, built.route == "nvcc").context("Step 3: cuModuleGetFunction")?;
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

    // Step 7: Create the device communicator with one LSA barrier per block and the LL staging buffer.
    // NOTE: collective, like the window registration. The device communicator
    // is a plain struct the kernels take by value; its barriers live in memory
    // NCCL allocated for this communicator. The fast kernels run up to one
    // block per multiprocessor, and their one-shot path needs an LL staging
    // buffer, a resource the device communicator allocates too.
    let multiprocessors = gpu
        .attribute(cu_sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
        .context("Step 7: multiprocessor count")? as u32;
    // One two-shot block per multiprocessor, never more than the occupancy
    // API says can be resident at once: its blocks wait for each other at
    // LSA barriers (fast::twoshot_cap). Ranks that share a GPU each take
    // their share of it, one-shot grids too (RankContext::share_of_gpu).
    let residency = fast_kernels
        .twoshot_residency(multiprocessors)
        .context("Step 7: occupancy of the two-shot kernel")?;
    let twoshot_blocks =
        ctx.all_ok(fast::twoshot_cap(residency, ctx.ranks_per_gpu()).map_err(Into::into))?;
    let fast_options = fast_kernels
        .options(ctx, twoshot_blocks, multiprocessors)
        .context("Step 7: occupancy of the one-shot kernel")?;
    ctx.all_ok(fast::check_ranks(size).map_err(Into::into))?;
    let (barriers, staging) = fast::requirements(&fast_options, size, BLOCKS);
    // The LL staging buffer only for the one-shot kernel (nvcc route).
    let staging = fast_kernels.oneshot.map(|_| staging);
    let dev_comm =
        DevComm::create(&shim, &comm, barriers, staging).context("Step 7: ncclDevCommCreate")?;
    // NOTE: the kernels reach only the LSA team, the ranks whose memory this
    // GPU maps (one node at most). If it holds fewer than every rank, the
    // ranks span nodes and the kernel would sum within each node: refuse
    // (exit 2) before any launch rather than verify a wrong answer.
    ctx.all_ok(check_lsa_team(dev_comm.lsa_size(), size).map_err(Into::into))?;
    let barriers = fast_options.twoshot_max_blocks.max(BLOCKS);
    let barriers = if fast_kernels.oneshot.is_some() {
        format!("{barriers} LSA barriers and an LL staging buffer")
    } else {
        format!("{barriers} LSA barriers")
    };
    ctx.println_ordered(format!(
        "  Rank {rank} created device communicator with {barriers}"
    ))?;

    // Step 8: Launch the one-shot or the two-shot kernel, by size, the device communicator passed by value.
    // cuLaunchKernel takes one pointer per kernel parameter and copies as many
    // bytes as the parameter's type has, so the devComm bytes travel by value
    // (launch.rs, through common::kernel's launch builder). NOTE: the host
    // copy in Step 6 and the kernel share `stream`, so the send buffer is
    // filled before the kernel starts; other ranks' data is ordered by the
    // two-shot's first (acquire) barrier, or by the one-shot's LL flags.
    let expected = (size * (size - 1) / 2) as f32;
    ctx.println_root(format!(
        "Starting AllReduce with {COUNT} elements ({} MB) using Device API",
        bytes >> 20
    ));
    ctx.println_root(format!(
        "Expected result: sum of ranks 0 to {} = {expected} per element",
        size - 1
    ));
    // NOTE: both kernels need the same grid on every rank (block b talks
    // only to block b of each peer); it follows from the options and the
    // count, which every rank compares first.
    fast::check_same_plan(ctx, GridPlan::new(&fast_options, [COUNT]))?;
    let path = fast::choose(COUNT, size, &fast_options);
    let launch_args = AllReduceArgs {
        send_window: send_window.as_raw(),
        send_offset: 0,
        recv_window: recv_window.as_raw(),
        recv_offset: 0,
        count: COUNT,
    };
    fast_kernels
        .launch(path, &stream, launch_args, &dev_comm)
        .context("Step 8: launch the fast kernel")?;
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
