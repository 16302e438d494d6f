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
//! dtype)` which backend holds the symmetric memory, and it dispatches at
//! run time:
//!
//! * `--backend nccl` (default): an NCCL window and a device communicator;
//!   the library calls NCCL's device API, built by nvcc against the loaded
//!   NCCL's headers (2.28+) or by NVRTC + nvJitLink with NCCL 2.32.3's own
//!   device library (`--build auto|nvcc|jit`, as in lesson 05);
//! * `--backend nvshmem`: NVSHMEM's symmetric heap, one PE per process, so
//!   MPI mode only; the library links with `libnvshmem_device.a` through
//!   nvJitLink.
//!
//! Run it (nvcc and NCCL's headers, or NCCL 2.32.3 with the NVRTC and
//! nvJitLink wheels; for NVSHMEM the `nvidia-nvshmem-cu13` wheel or
//! `NVSHMEM_HOME`):
//!
//! ```text
//! cargo run --release --bin 06_symm_primitive                  # one thread per visible GPU
//! NTHREADS=2 cargo run --release --bin 06_symm_primitive -- --dtype bf16
//! cargo build --release --features mpi
//! mpirun -np 2 target/release/06_symm_primitive --backend nvshmem
//! ```
//!
//! `--kernel triton` runs the same layer tail written in Triton
//! (`triton/tp_tail.py`), which calls the same `symm_all_reduce` linked from
//! the library's LLVM bitcode and NCCL 2.32.3's `libnccl_device.bc`; this
//! host compiles it with Triton's compiler (Python, `TRITON_PYTHON`) and
//! launches it with the same context (see `src/triton.rs`).
//!
//! Every rank checks every element of its output and its new residual
//! against a CPU reference. The backend and the build route are printed on
//! stderr, so the transcript is the same for every one of them.
//!
//! Left out on purpose: the weights and activations are made up (small
//! dyadic fractions, so the sums are exact), the "GEMM" is a plain loop,
//! and the AllReduce is sum-only (float32 and bfloat16), like PyTorch's.

use std::process::ExitCode;

use anyhow::{Context, Result};
use common::nccl::{Communicator, NcclBuffer, Window};
use common::setup;
use common::{CannotRun, Lesson, NcclVersion, Needs, RankContext};
use cudarc::driver::{sys as cu_sys, CudaContext};
use device_build::program;
use device_build::route::Build;
use device_build::shim::{check_lsa_team, DevComm, Shim};
use device_build::Module;
use device_build::{cache, Env};
use symm_comm::context::{
    bytes_of, DeviceBytes, NcclSymmContext, NvshmemSymmContext, SymmContext, BACKEND_NCCL,
    BACKEND_NVSHMEM,
};
use symm_comm::{codes, nvshmem};
use symm_primitive::launch::{self, LayerArgs};
use symm_primitive::reference::{self, Layer};
use symm_primitive::{triton, Backend, Dtype, Kernel, CACHE_NAME, FUSED_KERNEL, THREADS};

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
    /// Which backend holds the symmetric memory (nvshmem: MPI mode only).
    #[arg(long, value_enum, default_value_t = Backend::Nccl)]
    backend: Backend,
    /// The element type of the partial outputs, residual and output.
    #[arg(long, value_enum, default_value_t = Dtype::F32)]
    dtype: Dtype,
    /// How the NCCL backend is built: nvcc, jit (NVRTC + nvJitLink with
    /// NCCL's device library, NCCL 2.32.3), or auto.
    #[arg(long, value_enum, default_value_t = Build::Auto)]
    build: Build,
    /// The fused kernel: CUDA C++ (kernels/tp_tail.cu) or Triton
    /// (triton/tp_tail.py; NCCL backend, NCCL 2.32.3, Python with Triton
    /// 3.6+ found as TRITON_PYTHON, the active venv's python, or python3).
    #[arg(long, value_enum, default_value_t = Kernel::Cuda)]
    kernel: Kernel,
}

const LESSON: Lesson = Lesson {
    name: "06_symm_primitive",
    about: "A device-side AllReduce (symm_all_reduce, NCCL or NVSHMEM backend) fused into a tensor-parallel layer tail",
    needs: Needs::GpuAndNccl {
        min: NcclVersion::new(2, 28, 0),
        feature: "the device API (nccl_device.h)",
    },
    tool: Some(symm_primitive::build_tool_found),
};

fn main() -> ExitCode {
    common::run_checked(
        &LESSON,
        |args: &Args| {
            symm_primitive::check_kernel(args.kernel, args.backend)?;
            symm_primitive::check_backend(args.backend, common::launch_mode())
        },
        symm_primitive_lesson,
    )
}

/// What Step 2 made, whichever the route.
struct Built {
    cubin: std::path::PathBuf,
    /// `nvcc`, `jit`, `nvshmem` or `triton`.
    route: &'static str,
    /// How the NCCL backend makes its device communicator.
    shim: Option<Shim>,
    seconds: f64,
    /// False when the cache held the build.
    compiled: bool,
    /// The Triton kernel's name, block size and shared memory (`--kernel triton`).
    triton: Option<triton::Meta>,
}

/// What holds this rank's symmetric buffer, per backend.
enum Symmetric<'nccl, 'nvshmem> {
    // NOTE: fields drop in declaration order, which is the teardown order
    // on an error path: the device communicator before its window.
    Nccl {
        /// The device communicator's bytes, copied to device memory: the
        /// context points at them.
        dev_comm_copy: DeviceBytes,
        dev_comm: DevComm<'nccl>,
        window: Window<'nccl>,
    },
    Nvshmem {
        buffer: nvshmem::SymmetricBuffer<'nvshmem>,
    },
}

impl Symmetric<'_, '_> {
    /// The device communicator before the window (NCCL); `nvshmem_free`.
    fn release(self) -> Result<()> {
        match self {
            Symmetric::Nccl {
                window,
                dev_comm,
                dev_comm_copy,
            } => {
                drop(dev_comm_copy);
                dev_comm.destroy().context("Step 9: ncclDevCommDestroy")?;
                window
                    .deregister()
                    .context("Step 9: deregister the window")?;
            }
            Symmetric::Nvshmem { buffer } => buffer.free(),
        }
        Ok(())
    }
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
    ctx.all_ok(if major >= 7 && size <= codes::MAX_RANKS {
        Ok(())
    } else if major < 7 {
        Err(CannotRun::new(
            format!("GPU {} has compute capability {major}.{minor}; the library needs 7.0 (Volta) or newer", ctx.device()),
            "run on a Volta or newer GPU",
        )
        .into())
    } else {
        Err(CannotRun::new(
            format!("{size} ranks: symm_all_reduce covers at most {} (one node)", codes::MAX_RANKS),
            "run with 8 ranks or fewer",
        )
        .into())
    })?;
    let stream = gpu.new_stream().context("Step 1: create a stream")?;
    ctx.println_ordered(format!("  Rank {rank} using GPU device {}", ctx.device()))?;
    if ctx.is_root() {
        eprintln!(
            "note: backend: {} ({})",
            args.backend.name(),
            match args.backend {
                Backend::Nccl => "NCCL window and device communicator",
                Backend::Nvshmem => "NVSHMEM symmetric heap, one PE per process",
            }
        );
    }

    // Step 2: Build the library and the user kernels (nvcc, NVRTC and nvJitLink, or Triton), or reuse the cache.
    // NOTE: rank 0 builds first and the others wait, so that they find the
    // cache filled instead of all compiling at once.
    let arch = format!("sm_{major}{minor}");
    let cache = Env::from_process().cache_root(CACHE_NAME);
    let build = || -> Result<Built> {
        match args.backend {
            Backend::Nccl if args.kernel == Kernel::Triton => {
                // The Triton kernel links NCCL's device library itself; NCCL
                // is called directly for the device communicator, with
                // 2.32.3's requirements layout, as on the jit route.
                let here = triton::build_for_this_process(major, minor, dtype, &cache)?;
                if ctx.is_root() {
                    eprintln!(
                        "note: build route: triton (Triton {} from {}, with {})",
                        here.python.triton,
                        here.python.path.display(),
                        here.nccl_bitcode.display()
                    );
                }
                let shim = Shim::direct(&here.nccl_library, triton::NCCL)?;
                Ok(Built {
                    cubin: here.built.cubin(),
                    route: "triton",
                    shim: Some(shim),
                    seconds: here.built.build.seconds,
                    compiled: here.built.build.compiled,
                    triton: Some(here.built.meta),
                })
            }
            Backend::Nccl => {
                let device_code = symm_primitive::nccl_program();
                let mut chosen = program::choose(args.build, (major, minor), &device_code)?;
                let built = program::build_chosen(
                    args.build,
                    &mut chosen,
                    &cache,
                    (major, minor),
                    &device_code,
                )?;
                if ctx.is_root() {
                    eprintln!("note: build route: {} ({})", chosen.plan.name(), chosen.why);
                }
                let shim = built.dev_comm_maker()?;
                Ok(Built {
                    cubin: built.cubin(&symm_primitive::source()),
                    route: built.route,
                    shim: Some(shim),
                    seconds: built.build.seconds,
                    compiled: built.build.compiled,
                    triton: None,
                })
            }
            Backend::Nvshmem => {
                let found = nvshmem::find(&nvshmem::Search::from_process())?;
                let target = nvshmem::Target::find(
                    &Env::from_process(),
                    &arch,
                    found,
                    symm_primitive::source(),
                    symm_primitive::defines(Backend::Nvshmem),
                )?;
                if ctx.is_root() {
                    eprintln!(
                        "note: build route: nvshmem ({}, {} with {})",
                        target.nvrtc,
                        target.nvjitlink,
                        target.nvshmem.device_library.display()
                    );
                }
                let built = nvshmem::build_or_reuse(&target, &cache)?;
                Ok(Built {
                    cubin: built.file(nvshmem::CUBIN),
                    route: "nvshmem",
                    shim: None,
                    seconds: built.seconds,
                    compiled: built.compiled,
                    triton: None,
                })
            }
        }
    };
    let Built {
        cubin,
        route,
        shim,
        seconds,
        compiled,
        triton: triton_meta,
    } = cache::root_first(ctx, "Step 2: build the library and kernels", build)?;
    if ctx.is_root() {
        let how = if compiled {
            "built"
        } else {
            "reused from the cache"
        };
        eprintln!("note: module {how} in {seconds:.2} s (route {route}, {arch})");
    }
    ctx.println_root(format!(
        "Layer: {} tokens x {} features, {} input features per rank, {}",
        LAYER.tokens,
        LAYER.hidden,
        LAYER.k,
        dtype.name()
    ));

    // Step 3: Set up symmetric memory: a window and a device communicator (NCCL), or nvshmem_malloc (NVSHMEM).
    // NOTE: every call here is collective: every rank, the same order.
    let bytes = LAYER.elements() * dtype.size();
    let nvshmem_found = match args.backend {
        Backend::Nvshmem => Some(nvshmem::find(&nvshmem::Search::from_process())?),
        Backend::Nccl => None,
    };
    let nvshmem_library = nvshmem_found
        .as_ref()
        .map(nvshmem::Library::load)
        .transpose()
        .context("Step 3: load NVSHMEM's host library")?;
    let nvshmem_session = match &nvshmem_library {
        Some(library) => {
            // The project's own launcher carries the id, as it carries NCCL's.
            let mut id = [0u8; nvshmem::UNIQUEID_BYTES];
            if ctx.is_root() {
                id = library
                    .unique_id()
                    .context("Step 3: nvshmemx_get_uniqueid")?;
            }
            ctx.broadcast(&mut id)
                .context("Step 3: share the NVSHMEM unique id")?;
            Some(
                library
                    .init(rank, size, &id)
                    .context("Step 3: initialise NVSHMEM")?,
            )
        }
        None => None,
    };
    let comm: Option<Communicator> = match args.backend {
        Backend::Nccl => Some(setup::communicator(ctx).context("Step 3: create the communicator")?),
        Backend::Nvshmem => None,
    };
    let nccl_buffer: Option<NcclBuffer> = match args.backend {
        Backend::Nccl => Some(setup::buffer(bytes).context("Step 3: ncclMemAlloc")?),
        Backend::Nvshmem => None,
    };
    let symmetric = match (&comm, &nccl_buffer, &shim, &nvshmem_session) {
        (Some(comm), Some(buffer), Some(shim), _) => {
            let window = setup::window(comm, buffer).context("Step 3: ncclCommWindowRegister")?;
            // One LSA barrier: only block 0 of the kernel synchronises with
            // the other ranks (see the calling convention in symm_comm.cuh).
            let dev_comm =
                DevComm::create(shim, comm, 1, None).context("Step 3: ncclDevCommCreate")?;
            // NOTE: symm_all_reduce reaches its peers by loads and stores: the
            // LSA team must hold every rank, or the sum would stop at the node
            // (across nodes the device API needs its GIN half): exit 2 then.
            ctx.all_ok(check_lsa_team(dev_comm.lsa_size(), ctx.size()).map_err(Into::into))?;
            // SAFETY: the shim's buffer holds dev_comm_size() bytes.
            let host_bytes = unsafe {
                std::slice::from_raw_parts(
                    dev_comm.as_kernel_arg().cast::<u8>(),
                    shim.dev_comm_size(),
                )
            };
            let dev_comm_copy = DeviceBytes::from_slice(host_bytes)
                .context("Step 3: copy the device communicator to the GPU")?;
            Symmetric::Nccl {
                window,
                dev_comm,
                dev_comm_copy,
            }
        }
        (_, _, _, Some(session)) => {
            let buffer = session.malloc(bytes).context("Step 3: nvshmem_malloc")?;
            // NOTE: as the LSA team above: every PE reachable by loads and
            // stores, asked here and agreed by every rank before any kernel
            // waits in NVSHMEM's barrier (exit 2 otherwise).
            let unreachable = buffer.unreachable_pes(size);
            ctx.all_ok(nvshmem::check_reachable(rank, &unreachable).map_err(Into::into))?;
            Symmetric::Nvshmem { buffer }
        }
        _ => unreachable!("one backend is set up"),
    };
    ctx.println_ordered(format!(
        "  Rank {rank} set up its symmetric buffer ({} MiB)",
        bytes >> 20
    ))?;

    // Step 4: Load the module (cuModuleLoadData); for NVSHMEM, also nvshmemx_cumodule_init.
    let module = Module::load(&cubin).context("Step 4: load the module")?;
    let module_init = match &nvshmem_session {
        // SAFETY: the module stays loaded until after the guard is dropped (Step 9).
        Some(session) => Some(
            unsafe { session.init_module(module.raw()) }
                .context("Step 4: nvshmemx_cumodule_init")?,
        ),
        None => None,
    };
    let kernel_name = triton_meta
        .as_ref()
        .map_or(FUSED_KERNEL, |m| m.name.as_str());
    let kernel = module.function(kernel_name).context("Step 4")?;
    if let Some(meta) = &triton_meta {
        // SAFETY: the module is loaded until Step 9.
        unsafe { triton::set_shared(kernel, meta) }.context("Step 4")?;
    }

    // Step 5: Write the context the kernel reads (SymmContext, then the backend's fields) into device memory.
    // NOTE: the grid barrier's two words must start zeroed and belong to
    // this context alone.
    let grid_sync = DeviceBytes::zeroed(8).context("Step 5: grid-barrier words")?;
    let header = |kind| SymmContext {
        kind,
        rank: rank as i32,
        world_size: size as i32,
    };
    let (context_bytes, buffer_address) = match &symmetric {
        Symmetric::Nccl {
            window,
            dev_comm_copy,
            ..
        } => {
            let local = nccl_buffer.as_ref().map_or(0, |b| b.as_ptr() as u64);
            let context = NcclSymmContext {
                base: header(BACKEND_NCCL),
                buffer_window: window.as_raw().cast(),
                signal_window: std::ptr::null_mut(),
                dev_comm: dev_comm_copy.address(),
                local_buffer: local,
                buffer_size: bytes as u64,
                device_idx: ctx.device() as i32,
                reserved: 0,
                grid_sync: grid_sync.address(),
            };
            (bytes_of(&context), local)
        }
        Symmetric::Nvshmem { buffer } => {
            let context = NvshmemSymmContext {
                base: header(BACKEND_NVSHMEM),
                local_buffer: buffer.as_ptr() as u64,
                buffer_size: bytes as u64,
                device_idx: ctx.device() as i32,
                reserved: 0,
                offset: 0,
                grid_sync: grid_sync.address(),
            };
            (bytes_of(&context), buffer.as_ptr() as u64)
        }
    };
    let context = DeviceBytes::from_slice(&context_bytes).context("Step 5: copy the context")?;

    // Step 6: Upload this rank's inputs: activations, weight rows, residual and RMSNorm weight.
    let x = DeviceBytes::from_slice(&reference::activations(&LAYER, rank))
        .context("Step 6: activations")?;
    let w =
        DeviceBytes::from_slice(&reference::weights(&LAYER, rank)).context("Step 6: weights")?;
    let residual = DeviceBytes::from_slice(&reference::encode(&reference::residual(&LAYER), dtype))
        .context("Step 6: residual")?;
    let gamma =
        DeviceBytes::from_slice(&reference::gamma(&LAYER)).context("Step 6: RMSNorm weight")?;
    let out = DeviceBytes::zeroed(bytes).context("Step 6: output")?;
    let status = DeviceBytes::from_slice(&[i32::MIN]).context("Step 6: status word")?;

    // Step 7: Launch the fused kernel cooperatively: compute, symm_all_reduce, residual + RMSNorm.
    // NOTE: symm_all_reduce waits for every block of the grid, so the grid
    // must fit on the GPU at once; cuLaunchCooperativeKernel checks that.
    // One block of 512 threads per multiprocessor fits (launch bounds; the
    // Triton kernel's 16 warps of at most 128 registers each, too).
    // Every rank launches the same grid: the smallest GPU's multiprocessors,
    // divided among the ranks that share a GPU, whose grids must all be
    // resident at once (symm_primitive::agreed_blocks).
    let multiprocessors = gpu
        .attribute(cu_sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
        .context("Step 7: multiprocessor count")? as u32;
    let blocks = symm_primitive::agreed_blocks(ctx, multiprocessors).context("Step 7: the grid")?;
    if ctx.is_root() {
        let threads = triton_meta.as_ref().map_or(THREADS, triton::Meta::threads);
        eprintln!("note: {kernel_name} on {blocks} blocks x {threads} threads");
    }
    let layer_args = LayerArgs {
        context: context.address(),
        buffer: buffer_address,
        byte_offset: 0,
        x: x.address(),
        w: w.address(),
        residual: residual.address(),
        gamma: gamma.address(),
        out: out.address(),
        tokens: LAYER.tokens as i32,
        hidden: LAYER.hidden as i32,
        k: LAYER.k as i32,
        eps: LAYER.eps,
        dtype: dtype.code(),
        status: status.address(),
    };
    // SAFETY: every address is live device memory of the layer's sizes.
    unsafe {
        match &triton_meta {
            Some(meta) => triton::launch(kernel, meta, blocks, &stream, layer_args),
            None => launch::fused(kernel, blocks, THREADS, &stream, layer_args),
        }
    }
    .context("Step 7: launch the fused kernel")?;
    stream
        .synchronize()
        .context("Step 7: wait for the kernel")?;
    let mut code = [0i32];
    status.read(&mut code).context("Step 7: read the status")?;
    ctx.all_ok(if code[0] == codes::OK {
        Ok(())
    } else {
        Err(anyhow::anyhow!(
            "Step 7: symm_all_reduce returned {} ({})",
            code[0],
            codes::describe(code[0])
        ))
    })?;
    ctx.println_root(format!("Kernel {kernel_name} completed on every rank"));

    // Step 8: Verify every output and new-residual element on every rank against the CPU reference.
    let (want_out, want_residual) = reference::expected(&LAYER, size, dtype);
    let mut got = vec![0u8; bytes];
    out.read(&mut got).context("Step 8: copy the output")?;
    let got_out = reference::decode(&got, dtype);
    residual
        .read(&mut got)
        .context("Step 8: copy the residual")?;
    let got_residual = reference::decode(&got, dtype);
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

    // Step 9: Release in order: device communicator, window, buffer, communicator; or NVSHMEM's state and heap.
    drop((context, grid_sync, x, w, residual, gamma, out, status));
    drop(module_init);
    symmetric.release()?;
    if let Some(buffer) = nccl_buffer {
        buffer.free().context("Step 9: free the buffer")?;
    }
    if let Some(comm) = comm {
        comm.destroy().context("Step 9: destroy the communicator")?;
    }
    drop(module);
    if let Some(session) = nvshmem_session {
        session.finalize();
    }
    Ok(())
}
