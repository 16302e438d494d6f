//! # Your own Triton kernel calling `symm_all_reduce`
//!
//! The smallest complete program around the library's Triton binding: a
//! Triton kernel of yours ([`your_triton_kernel.py`](your_triton_kernel.py))
//! writes this rank's data into a symmetric buffer, calls `symm_all_reduce`
//! (`symm_comm/triton/symm.py`) and uses the sum in the same launch. Triton's
//! compiler builds it ahead of time, linking the library's bitcode and NCCL
//! 2.32.3's `libnccl_device.bc`; this host makes the NCCL backend's context,
//! launches the cubin cooperatively and checks every element on every rank.
//!
//! ```text
//! NCCL_HOME=~/nccl-2.32.3/nvidia/nccl TRITON_PYTHON=~/venv/bin/python \
//!   NTHREADS=2 cargo run --release --bin your_triton_kernel
//! ```
//!
//! Needs a Hopper GPU or newer, NCCL 2.32.3 (its `libnccl_device.bc` beside
//! `libnccl.so.2`, as the pip wheel has it) and a Python with Triton 3.6
//! (`TRITON_PYTHON`, else `python3`). Left out: the build cache and the
//! checks lesson 06b makes of the interpreter and of the compiled kernel's
//! parameters (through `device_build/src/triton.rs` and
//! `layer_tail/src/triton.rs`).

use std::path::Path;
use std::process::{Command, ExitCode};

use anyhow::{bail, Context, Result};
use common::nccl::loaded_nccl;
use common::verify::check_all;
use common::{kernel, setup, CannotRun, Lesson, Needs, RankContext};
use cudarc::driver::sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT;
use cudarc::driver::{result as cu, CudaContext, LaunchConfig};
use device_build::shim::{check_lsa_team, DevComm, Shim};
use device_build::Module;
use symm_comm::codes;
use symm_comm::context::{address, bytes_of, NcclSymmContext, SymmContext, BACKEND_NCCL};

/// Your Triton kernel and its ahead-of-time build.
const SCRIPT: &str = include_str!("your_triton_kernel.py");
const COUNT: usize = 1 << 20;

#[derive(clap::Args)]
struct Args {}

const LESSON: Lesson = Lesson {
    name: "your_triton_kernel",
    about: "Your own Triton kernel calling symm_all_reduce (NCCL 2.32.3)",
    needs: Needs::GpuAndNccl {
        min: symm_comm::triton::NCCL,
        feature: "libnccl_device.bc, which the library's bitcode links with",
    },
    tool: None,
};

fn main() -> ExitCode {
    common::run(&LESSON, your_kernel)
}

fn your_kernel(ctx: &RankContext, _: &Args) -> Result<()> {
    let (rank, size) = (ctx.rank(), ctx.size());
    ctx.println_root(format!(
        "Your Triton kernel calls symm_all_reduce on {COUNT} floats"
    ));

    // Step 1: Bind the GPU, check it and the NCCL release, and create a stream.
    let gpu = CudaContext::new(ctx.device()).context("Step 1: bind the GPU")?;
    let (major, minor) = gpu.compute_capability().context("Step 1: capability")?;
    let stream = gpu.new_stream().context("Step 1: create a stream")?;
    let nccl = loaded_nccl()?;
    let nccl_bitcode = nccl.path.with_file_name("libnccl_device.bc");
    ctx.all_ok(
        if major >= 9 && nccl.version == symm_comm::triton::NCCL && nccl_bitcode.is_file() {
            Ok(())
        } else {
            Err(CannotRun::new(
                format!("needs a Hopper GPU or newer and NCCL {} with libnccl_device.bc beside it (here sm_{major}{minor}, NCCL {} at {})", symm_comm::triton::NCCL, nccl.version, nccl.path.display()),
                "pip install --target ~/nccl-2.32.3 nvidia-nccl-cu13==2.32.3 and set NCCL_HOME=~/nccl-2.32.3/nvidia/nccl",
            )
            .into())
        },
    )?;

    // Step 2: Compile your Triton kernel with the library's bitcode and NCCL's (Triton, no GPU needed).
    // NOTE: every rank compiles its own copy, in a private directory; a
    // failure on any rank ends every rank (ctx.all_ok) before the collectives.
    let dir = tempfile::tempdir().context("Step 2: a build directory")?;
    let compiled = compile(dir.path(), major * 10 + minor, &nccl_bitcode);
    let (name, threads, shared, cubin) = ctx.all_ok(compiled.context("Step 2"))?;
    // Above 48 KiB of shared memory a launch needs cuFuncSetAttribute first (06b does it).
    anyhow::ensure!(
        shared <= 48 << 10,
        "the kernel wants {shared} bytes of shared memory; this example launches up to 48 KiB"
    );
    // SAFETY: a context is current (Step 1); `cubin` is a complete ELF image.
    let module = Module::adopt(unsafe { cu::module::load_data(cubin.as_ptr().cast()) }?);
    let function = module.function(&name)?;

    // Step 3: Make symmetric memory: a window over ncclMemAlloc, a device communicator.
    let comm = setup::communicator(ctx).context("Step 3: communicator")?;
    let buffer = setup::buffer(COUNT * 4).context("Step 3: ncclMemAlloc")?;
    let window = setup::window(&comm, &buffer).context("Step 3: window")?;
    // NCCL's own ncclDevCommCreate, with 2.32.3's requirements layout.
    let shim = Shim::direct(&nccl.path, symm_comm::triton::NCCL)?;
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

    // Step 5: Launch cooperatively, with Triton's two hidden scratch pointers (NULL).
    let multiprocessors = gpu.attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)? as u32;
    let blocks = ctx.share_of_gpu(multiprocessors).clamp(1, 8);
    let status = stream.clone_htod(&[i32::MIN])?;
    let (context_address, buffer_address) = (address(&context), buffer.as_ptr() as u64);
    let (count, rank_arg, status_address) = (COUNT as i64, rank as i32, address(&status));
    let no_scratch = 0u64;
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
        .arg(&status_address)
        .arg(&no_scratch)
        .arg(&no_scratch);
    let config = LaunchConfig {
        grid_dim: (blocks, 1, 1),
        block_dim: (threads, 1, 1),
        shared_mem_bytes: shared,
    };
    // SAFETY: the arguments match the compiled kernel's; the module is loaded.
    unsafe { launch.launch_cooperative(config) }.context("Step 5: cuLaunchCooperativeKernel")?;
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
    ctx.println_root("symm_all_reduce in your Triton kernel: PASSED");

    // Step 7: Release: device communicator, window, buffer, communicator.
    drop((context, grid_sync, status, dev_comm_copy));
    dev_comm.destroy().context("Step 7: ncclDevCommDestroy")?;
    window.deregister().context("Step 7: deregister")?;
    buffer.free().context("Step 7: free")?;
    comm.destroy().context("Step 7: destroy the communicator")?;
    drop(module);
    Ok(())
}

/// Runs `your_triton_kernel.py` in `dir` with `symm.py` and the library's
/// bitcode beside it: the kernel's name, threads, shared memory and cubin.
fn compile(dir: &Path, arch: i32, nccl_bitcode: &Path) -> Result<(String, u32, u32, Vec<u8>)> {
    std::fs::write(dir.join("your_triton_kernel.py"), SCRIPT)?;
    symm_comm::triton::write_beside(dir)?;
    let python = std::env::var_os("TRITON_PYTHON").unwrap_or("python3".into());
    let out = Command::new(&python)
        .arg(dir.join("your_triton_kernel.py"))
        .args(["--arch", &arch.to_string(), "--out"])
        .arg(dir)
        .arg("--nccl-device-bc")
        .arg(nccl_bitcode)
        .current_dir(dir)
        .output();
    let python = python.to_string_lossy();
    let fix = "set TRITON_PYTHON to a Python with Triton 3.6 (pip install triton==3.6.0)";
    let out = out.map_err(|e| CannotRun::new(format!("cannot run {python}: {e}"), fix))?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if out.status.code() == Some(2) {
        return Err(CannotRun::new(format!("{python}: {}", stderr.trim()), fix).into());
    } else if !out.status.success() {
        bail!("Triton could not compile your kernel:\n{stderr}");
    }
    let meta = std::fs::read_to_string(dir.join("kernel.txt"))?;
    let meta: Vec<&str> = meta.lines().collect();
    let [name, threads, shared] = meta[..] else {
        bail!("kernel.txt: {meta:?}")
    };
    let cubin = std::fs::read(dir.join("kernel.cubin"))?;
    Ok((name.into(), threads.parse()?, shared.parse()?, cubin))
}
