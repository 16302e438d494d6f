//! `05_allreduce_bench`: lesson 05's kernel and lesson 05b's fast ones
//! (and the steps between them) against `ncclAllReduce`, on
//! the same symmetric windows.
//!
//! Contenders (`--kernels`, comma-separated; default `nccl,simple,fast`):
//!
//! * `nccl`: `ncclAllReduce` on the windows (NCCL's symmetric kernels),
//!   NCCL's defaults;
//! * `nccl-tuned`: the same with `NCCL_SYM_CTAS` set to `--sym-ctas N`, the
//!   block count of NCCL's symmetric kernels (its default picks few: 7 on
//!   an H200). NCCL reads the variable once per process, so `nccl` and
//!   `nccl-tuned` cannot share a run: time them in two runs of one call, and
//!   find N with the sweep in `runs/2026-11-25/scripts/nccl-tuned-sweep.sh`
//!   (every N, the best at each size, then both runs side by side);
//! * `simple`: NVIDIA's example kernel (16 blocks, one float per thread);
//! * `vec16`: the two-shot kernel, 16-byte vectors, on 16 blocks;
//! * `twoshot`: the same on one block per multiprocessor;
//! * `oneshot`: the barrier-free one-shot over LL (up to 1 MiB);
//! * `fast`: what `05b_lsa_fast` runs: one-shot up to `--oneshot-max`,
//!   two-shot above;
//! * `fast-jit`: the fast two-shot kernel on nccl_device_wrapper.h's C API,
//!   built by the jit route (NVRTC + nvJitLink), at every size;
//! * `prims`, `prims-oneshot`, `prims-twoshot`: the AllReduce made of NCCL's
//!   own primitives (`ncclLsaReduceSum_F32`, `ncclLsaReduceSumCopy_F32`),
//!   jit route; `prims` switches from one-shot to two-shot at
//!   `--prims-oneshot-max`.
//!
//! `--build auto|nvcc|jit` says how the lesson's kernels (`simple` to
//! `fast`) are built; `fast-jit` and `prims*` always take the jit route, so
//! `--build nvcc --kernels nccl,fast,fast-jit,prims` times the fast kernel
//! through both routes, NCCL's primitives and `ncclAllReduce` in one call.
//! On the jit route the lesson's kernels have no one-shot (the wrapper has
//! no LL API): `oneshot` is refused and `fast` is two-shot at every size.
//!
//! The steps from `simple` to `fast` are the rows of the README's "Making
//! it fast". Each size is timed out of place and in place, on fresh random
//! data, and every timed operation is checked element by element (see
//! `bench::allreduce`); a wrong element exits 1. `--stress N` runs N
//! back-to-back operations per size with the ranks skewed on purpose
//! instead, and checks each: races between launches show up there. `--send-offset` and
//! `--recv-offset` place the data that many bytes into the windows, to check
//! the unaligned paths.
//!
//! The default sweep (8 B to 512 MiB) should take about 13 s at 2 ranks
//! on one H100, plus NCCL's start: the estimate is in the `bench` crate's
//! "How long a default sweep takes".
//!
//! ```text
//! NTHREADS=2 cargo run --release --bin 05_allreduce_bench
//! NTHREADS=2 target/release/05_allreduce_bench --kernels nccl,simple,vec16,twoshot,oneshot,fast -e 1M
//! NTHREADS=2 target/release/05_allreduce_bench --build nvcc --kernels nccl,fast,fast-jit,prims
//! mpirun -np 2 target/release/05_allreduce_bench --json ar05.json --svg ar05.svg
//! NTHREADS=2 target/release/05_allreduce_bench --kernels simple,twoshot,fast --stress 2000 -b 4K -e 4M -f 32
//! NTHREADS=2 target/release/05_allreduce_bench --kernels nccl-tuned,fast --sym-ctas 64 -b 2M -e 512M
//! ```

use std::process::ExitCode;

use anyhow::{Context, Result};
use bench::allreduce::{
    self, l2_bytes, nccl_allreduce, rotation_bytes, Buffers, StressArgs, Sweep,
};
use bench::{Placement, SweepArgs};
use benchmarks::grid;
use benchmarks::lsa::{build, build_chosen, choose_route, prims_cubin, CACHE_NAME};
use benchmarks::prims::{self, PrimsKernels};
use common::setup;
use common::{parse_size, CannotRun, Lesson, NcclVersion, Needs, RankContext};
use cudarc::driver::{sys as cu_sys, CudaContext};
use device_build::route::{Build, Plan};
use device_build::shim::{check_lsa_team, DevComm};
use device_build::Module;
use device_build::{cache, Env};
use device_lsa::{KERNEL, KERNEL_NAME};
use lsa_fast::fast::{self, FastKernels, FastOptions, GridPlan, Path};
use lsa_fast::launch::{launch_allreduce, AllReduceArgs};
use lsa_fast::{FAST, THREADS};

/// The contenders, in the order of the README's steps.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
enum Contender {
    /// ncclAllReduce on the same windows, NCCL's defaults.
    Nccl,
    /// ncclAllReduce on the same windows with NCCL_SYM_CTAS=--sym-ctas.
    NcclTuned,
    /// NVIDIA's example kernel: 16 blocks, one float per thread per step.
    Simple,
    /// Two-shot with 16-byte vectors, on 16 blocks.
    Vec16,
    /// Two-shot with 16-byte vectors, one block per multiprocessor.
    Twoshot,
    /// One-shot over LL, no barrier (up to 1 MiB).
    Oneshot,
    /// One-shot up to --oneshot-max, two-shot above: `05b_lsa_fast`.
    Fast,
    /// The fast two-shot kernel on the C API, built by the jit route.
    FastJit,
    /// NCCL's primitives: one-shot up to --prims-oneshot-max, two-shot above (jit).
    Prims,
    /// NCCL's primitives, one-shot (ncclLsaReduceSum_F32) at every size (jit).
    PrimsOneshot,
    /// NCCL's primitives, two-shot (ncclLsaReduceSumCopy_F32) at every size (jit).
    PrimsTwoshot,
}

impl Contender {
    fn about(self, sym_ctas: Option<u32>) -> String {
        let about = match self {
            Contender::Nccl => "ncclAllReduce on the symmetric windows, NCCL's defaults",
            Contender::NcclTuned => {
                return format!(
                    "ncclAllReduce on the symmetric windows, NCCL_SYM_CTAS={}",
                    sym_ctas.unwrap_or(0)
                )
            }
            Contender::Simple => {
                "NVIDIA's example kernel: 16 blocks x 512 threads, one float per thread per step"
            }
            Contender::Vec16 => "two-shot, 16-byte vectors, 4 per peer in flight, 16 blocks",
            Contender::Twoshot => "two-shot, 16-byte vectors, one block per multiprocessor",
            Contender::Oneshot => "one-shot over NCCL's LL protocol, no barrier",
            Contender::Fast => {
                "lesson 05b (05b_lsa_fast): one-shot up to --oneshot-max, two-shot above"
            }
            Contender::FastJit => {
                "the fast two-shot kernel on nccl_device_wrapper.h, NVRTC + nvJitLink"
            }
            Contender::Prims => {
                "NCCL's ncclLsaReduceSum/ReduceSumCopy_F32: one-shot up to --prims-oneshot-max, two-shot above and in place"
            }
            Contender::PrimsOneshot => {
                "NCCL's ncclLsaReduceSum_F32 into the local output (two-shot in place: see prims::choose)"
            }
            Contender::PrimsTwoshot => "NCCL's ncclLsaReduceSumCopy_F32 on this rank's share",
        };
        about.to_string()
    }

    /// Whether it needs the jit route's build whatever --build says.
    fn jit_only(self) -> bool {
        matches!(
            self,
            Contender::FastJit
                | Contender::Prims
                | Contender::PrimsOneshot
                | Contender::PrimsTwoshot
        )
    }
}

#[derive(clap::Args, Debug)]
struct Args {
    #[command(flatten)]
    sweep: SweepArgs,
    /// What to time, comma-separated.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        default_value = "nccl,simple,fast"
    )]
    kernels: Vec<Contender>,
    /// `fast` takes the one-shot kernel up to this many bytes [default: by
    /// rank count: 512K at 2 ranks (measured), 128K at 4, 64K at 8 (predicted)].
    #[arg(long, value_name = "BYTES", value_parser = parse_size)]
    oneshot_max: Option<usize>,
    /// Bytes into the send window where the data starts (a multiple of 4).
    #[arg(long, value_name = "BYTES", default_value_t = 0)]
    send_offset: usize,
    /// Bytes into the receive window where the data starts (a multiple of 4).
    #[arg(long, value_name = "BYTES", default_value_t = 0)]
    recv_offset: usize,
    /// The most blocks the two-shot kernel runs [default: one per multiprocessor];
    /// more than the occupancy API says can be resident at once is refused.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1024))]
    twoshot_blocks: Option<u32>,
    /// `prims` takes NCCL's one-shot primitive up to this many bytes.
    #[arg(long, value_name = "BYTES", value_parser = parse_size, default_value_t = fast::ONESHOT_MAX_AT_2_RANKS)]
    prims_oneshot_max: usize,
    /// How the lesson's kernels are built (fast-jit and prims* always take jit).
    #[arg(long, value_enum, default_value_t = Build::Auto)]
    build: Build,
    /// NCCL_SYM_CTAS for this process, for `nccl-tuned`: the blocks of NCCL's
    /// symmetric kernels (NCCL caps it at its own maximum, 64 in 2.28).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1024))]
    sym_ctas: Option<u32>,
    #[command(flatten)]
    stress: StressArgs,
}

/// `nccl` and `nccl-tuned` against `--sym-ctas` and an `NCCL_SYM_CTAS`
/// already in the environment (`env_sym_ctas`). NCCL reads the variable
/// once per process (`NCCL_PARAM` caches it at the first symmetric
/// collective), so one run cannot time NCCL both with and without it, and
/// a series must not be labelled with a value NCCL did not use.
fn check_sym_ctas(
    kernels: &[Contender],
    sym_ctas: Option<u32>,
    env_sym_ctas: Option<&str>,
) -> Result<(), CannotRun> {
    let (nccl, tuned) = (
        kernels.contains(&Contender::Nccl),
        kernels.contains(&Contender::NcclTuned),
    );
    match (sym_ctas, env_sym_ctas) {
        (None, _) if tuned => Err(CannotRun::new(
            "nccl-tuned needs --sym-ctas N, the NCCL_SYM_CTAS to time NCCL's symmetric kernels with",
            "add --sym-ctas N (runs/2026-11-25/scripts/nccl-tuned-sweep.sh finds the best N)",
        )),
        (Some(n), _) if nccl => Err(CannotRun::new(
            format!(
                "--sym-ctas {n} sets NCCL_SYM_CTAS for the whole process, and NCCL reads it once: `nccl` would be tuned too"
            ),
            "time nccl (NCCL's defaults) and nccl-tuned --sym-ctas N in two runs",
        )),
        (None, Some(value)) if nccl => Err(CannotRun::new(
            format!(
                "NCCL_SYM_CTAS={value} is set in the environment, so `nccl` would not run with NCCL's defaults"
            ),
            "unset NCCL_SYM_CTAS, or time it as nccl-tuned with --sym-ctas N",
        )),
        _ => Ok(()),
    }
}

impl Args {
    /// What can be refused before any GPU is touched.
    fn check(&self) -> Result<(), CannotRun> {
        check_sym_ctas(
            &self.kernels,
            self.sym_ctas,
            std::env::var("NCCL_SYM_CTAS").ok().as_deref(),
        )?;
        self.sweep.check(4)?;
        let sizes = self.sweep.sizes(4)?;
        if !self.send_offset.is_multiple_of(4) || !self.recv_offset.is_multiple_of(4) {
            return Err(CannotRun::new(
                format!(
                    "offsets {} and {} must be multiples of 4 bytes: the data are floats",
                    self.send_offset, self.recv_offset
                ),
                "pass --send-offset and --recv-offset in whole floats",
            ));
        }
        let largest = sizes.last().copied().unwrap_or(0);
        if self.kernels.contains(&Contender::Oneshot) && largest > fast::ONESHOT_CAPACITY {
            return Err(CannotRun::new(
                format!(
                    "the oneshot kernel carries at most {} bytes; -e asks for {largest}",
                    fast::ONESHOT_CAPACITY
                ),
                "use -e 1M with --kernels oneshot, or time `fast`, which switches to two-shot",
            ));
        }
        Ok(())
    }
}

const BENCH: Lesson = Lesson {
    name: "05_allreduce_bench",
    about: "Times lessons 05's and 05b's LSA kernels (nvcc and jit builds) and NCCL's device primitives against ncclAllReduce on the same symmetric windows",
    needs: Needs::GpuAndNccl {
        min: NcclVersion::new(2, 28, 0),
        feature: "the device API (nccl_device.h)",
    },
    tool: Some(device_build::program::tool_found),
};

fn main() -> ExitCode {
    common::run_checked(
        &BENCH,
        |args: &Args| {
            args.check()?;
            // NOTE: before any thread starts and before NCCL is loaded (the
            // launcher calls this first, in every MPI process): NCCL reads
            // NCCL_SYM_CTAS at its first symmetric collective and keeps it.
            if let Some(n) = args.sym_ctas {
                std::env::set_var("NCCL_SYM_CTAS", n.to_string());
            }
            Ok(())
        },
        bench,
    )
}

fn bench(ctx: &RankContext, args: &Args) -> Result<()> {
    let size = ctx.size();
    let sizes = args.sweep.sizes(4)?;
    let largest = *sizes.last().context("no size in the sweep")?;

    // The lesson's Steps 1 to 5, without the printing (see main.rs).
    let gpu = CudaContext::new(ctx.device()).context("bind the GPU")?;
    let (major, minor) = gpu.compute_capability().context("compute capability")?;
    let stream = gpu.new_stream().context("create a stream")?;
    // The lesson's kernels on the route --build picks; the jit build as well
    // when a jit-only contender is asked for and the lesson's route is nvcc.
    let wants_jit = args.kernels.iter().any(|c| c.jit_only());
    let mut chosen =
        ctx.all_ok(choose_route(args.build, major, minor, wants_jit).context("choose the route"))?;
    let jit_plan = match (&chosen.plan, wants_jit) {
        (Plan::Nvcc(_), true) => Some(
            ctx.all_ok(
                choose_route(Build::Jit, major, minor, true)
                    .context("the jit route, for fast-jit and prims"),
            )?
            .plan,
        ),
        _ => None,
    };
    let cache = Env::from_process().cache_root(CACHE_NAME);
    let (built, jit_built) = cache::root_first(ctx, "build the kernels", || {
        let lesson = build_chosen(args.build, &mut chosen, &cache, (major, minor), wants_jit)?;
        let jit = jit_plan.as_ref().map(|p| build(p, &cache)).transpose()?;
        Ok((lesson, jit))
    })?;
    if ctx.is_root() {
        eprintln!("note: build route: {} ({})", chosen.plan.name(), chosen.why);
    }
    if ctx.is_root() {
        for b in std::iter::once(&built).chain(jit_built.as_ref()) {
            let how = if b.build.compiled {
                "built"
            } else {
                "reused from the cache"
            };
            eprintln!(
                "note: {} route: kernels {how} in {:.2} s ({})",
                b.route,
                b.build.seconds,
                b.build.dir.display()
            );
            b.print_commands(ctx);
        }
    }
    let simple_module = Module::load(&built.cubin(&KERNEL))?;
    let simple = simple_module.function(KERNEL_NAME)?;
    let fast_module = Module::load(&built.cubin(&FAST))?;
    let fast_kernels = FastKernels::load(&fast_module, built.route == "nvcc")?;
    // The jit build: the lesson's own when its route is jit.
    let jit = jit_built.as_ref().unwrap_or(&built);
    let jit_module = match prims_cubin(jit, wants_jit) {
        Some(cubin) => Some(Module::load(&cubin)?),
        None => None,
    };
    let jit_kernels = match &jit_module {
        Some(module) => Some((
            FastKernels::load(module, false)?,
            PrimsKernels::load(module)?,
        )),
        None => None,
    };
    // The shim when the lesson's route is nvcc (its device communicator has
    // the one-shot's LL buffer and serves the jit kernels too: one release,
    // one layout), else NCCL's own ncclDevCommCreate.
    let shim = built.dev_comm_maker()?;
    let comm = setup::communicator(ctx).context("create the communicator")?;

    let offset = args.send_offset.max(args.recv_offset);
    let wanted =
        rotation_bytes(&args.sweep, &args.stress, &sizes, l2_bytes(ctx, &stream)?) + offset;
    // Or what the GPU has, with a note: two regions of the largest size at least.
    let window_bytes = bench::fit_to_memory(ctx, wanted, 2 * largest + offset, 2, 0)?;
    let send = setup::buffer(window_bytes).context("allocate the send buffer")?;
    let recv = setup::buffer(window_bytes).context("allocate the receive buffer")?;
    let send_window = setup::window(&comm, &send).context("register the send window")?;
    let recv_window = setup::window(&comm, &recv).context("register the receive window")?;

    let multiprocessors = gpu
        .attribute(cu_sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
        .context("multiprocessor count")? as u32;
    // The two-shot grid cap: what every kernel that takes it (the two-shot,
    // and the jit build's two-shot and primitives) can hold resident at once.
    let mut residency = fast_kernels.twoshot_residency(multiprocessors)?;
    if let Some((jit_fast, prims)) = &jit_kernels {
        residency = grid::tighter(residency, jit_fast.twoshot_residency(multiprocessors)?);
        residency = grid::tighter(residency, prims.residency(multiprocessors)?);
    }
    let twoshot_max_blocks = ctx.all_ok(
        grid::twoshot_cap(args.twoshot_blocks, residency, ctx.ranks_per_gpu()).map_err(Into::into),
    )?;
    let options = FastOptions {
        oneshot_max_bytes: if fast_kernels.oneshot.is_some() {
            args.oneshot_max
                .unwrap_or_else(|| fast::default_oneshot_max(size))
        } else {
            0
        },
        twoshot_max_blocks,
    };
    // Ranks that share a GPU: the one-shot's grids within this rank's share.
    let oneshot_share = fast_kernels.oneshot_share(ctx, multiprocessors)?;
    let options = options.fit_oneshot(oneshot_share);
    let oneshot_fits = fast::oneshot_max_within(oneshot_share);
    if args.kernels.contains(&Contender::Oneshot) && largest > oneshot_fits {
        return Err(CannotRun::new(
            format!(
                "the oneshot kernel at {largest} bytes needs more blocks than this rank's share of the GPU \
                 ({oneshot_share} blocks, with {} ranks per GPU); its blocks wait for every peer's, so all must be resident at once",
                ctx.ranks_per_gpu()
            ),
            format!("use -e {oneshot_fits} or less with --kernels oneshot, or time `fast`, which switches to two-shot"),
        )
        .into());
    }
    if fast_kernels.oneshot.is_none() && args.kernels.contains(&Contender::Oneshot) {
        return Err(CannotRun::new(
            "the oneshot contender needs the nvcc route: NCCL 2.32.3's nccl_device_wrapper.h has no LL API for the jit route",
            "add --build nvcc, or leave oneshot out of --kernels",
        )
        .into());
    }
    ctx.all_ok(fast::check_ranks(size).map_err(Into::into))?;
    // One device communicator for every kernel: barriers for the largest
    // grid, and the one-shot's staging buffer.
    let (barriers, staging) = fast::requirements(&options, size, 16);
    let staging = fast_kernels.oneshot.map(|_| staging);
    let dev_comm = DevComm::create(&shim, &comm, barriers, staging).context("ncclDevCommCreate")?;
    // Every kernel here reaches only the LSA team: ranks on several nodes
    // would sum within each node (device_build::shim::check_lsa_team).
    ctx.all_ok(check_lsa_team(dev_comm.lsa_size(), size).map_err(Into::into))?;

    let buffers = Buffers {
        send: &send,
        recv: &recv,
        send_offset: args.send_offset,
        recv_offset: args.recv_offset,
    };
    // Every rank launches the same grids (fast.rs, GridPlan), checked once
    // before the first launch.
    fast::check_same_plan(ctx, GridPlan::new(&options, sizes.iter().map(|b| b / 4)))?;
    let sweep = Sweep::new(ctx, &args.sweep, &stream, buffers, &sizes)?;
    let progress = bench::progress(ctx, sizes.len() * args.kernels.len(), BENCH.name);
    let (mut series, mut stressed) = (Vec::new(), Vec::new());
    for &contender in &args.kernels {
        let op = |placement: Placement, count: usize, shift: usize| -> Result<()> {
            let (input_window, input_offset, input) = match placement {
                Placement::OutOfPlace => (
                    send_window.as_raw(),
                    args.send_offset + shift,
                    send.as_ptr(),
                ),
                Placement::InPlace => (
                    recv_window.as_raw(),
                    args.recv_offset + shift,
                    recv.as_ptr(),
                ),
            };
            let output_offset = args.recv_offset + shift;
            let kernel_args = AllReduceArgs {
                send_window: input_window,
                send_offset: input_offset,
                recv_window: recv_window.as_raw(),
                recv_offset: output_offset,
                count,
            };
            let twoshot = |max_blocks| Path::TwoShot {
                blocks: fast::twoshot_blocks(count, size, max_blocks),
            };
            match contender {
                // SAFETY: both windows hold the sweep's largest size past the offsets.
                Contender::Nccl | Contender::NcclTuned => unsafe {
                    nccl_allreduce(
                        input.cast::<u8>().add(input_offset).cast(),
                        recv.as_ptr().cast::<u8>().add(output_offset).cast(),
                        count,
                        &comm,
                        &stream,
                    )
                },
                // SAFETY: allreduce_lsa takes exactly the six common arguments.
                Contender::Simple => unsafe {
                    launch_allreduce(
                        simple,
                        16,
                        THREADS,
                        &stream,
                        kernel_args,
                        dev_comm.kernel_arg(),
                        None,
                    )
                },
                Contender::Vec16 => {
                    fast_kernels.launch(twoshot(16), &stream, kernel_args, &dev_comm)
                }
                Contender::Twoshot => fast_kernels.launch(
                    twoshot(options.twoshot_max_blocks),
                    &stream,
                    kernel_args,
                    &dev_comm,
                ),
                Contender::Oneshot => fast_kernels.launch(
                    Path::OneShot {
                        blocks: fast::oneshot_blocks(count),
                    },
                    &stream,
                    kernel_args,
                    &dev_comm,
                ),
                Contender::Fast => fast_kernels.launch(
                    fast::choose(count, size, &options),
                    &stream,
                    kernel_args,
                    &dev_comm,
                ),
                Contender::FastJit => jit_kernels
                    .as_ref()
                    .context("fast-jit needs the jit build")?
                    .0
                    .launch(
                        twoshot(options.twoshot_max_blocks),
                        &stream,
                        kernel_args,
                        &dev_comm,
                    ),
                Contender::Prims | Contender::PrimsOneshot | Contender::PrimsTwoshot => {
                    let oneshot_max = match contender {
                        Contender::PrimsOneshot => usize::MAX,
                        Contender::PrimsTwoshot => 0,
                        _ => args.prims_oneshot_max,
                    };
                    let in_place = placement == Placement::InPlace;
                    let path = prims::choose(
                        count,
                        size,
                        oneshot_max,
                        options.twoshot_max_blocks,
                        in_place,
                    );
                    let kernels = jit_kernels.as_ref().context("prims needs the jit build")?;
                    kernels.1.launch(path, &stream, kernel_args, &dev_comm)
                }
            }
        };
        // The name the command line uses (fast-jit, prims-oneshot, ...).
        let name = clap::ValueEnum::to_possible_value(&contender)
            .map_or_else(|| format!("{contender:?}"), |v| v.get_name().to_string());
        if args.stress.stress.is_some() {
            stressed.push(sweep.stress(&args.stress, &name, op)?);
        } else {
            let about = contender.about(args.sym_ctas);
            series.push(sweep.series((&name, &about), &progress, op)?);
        }
    }
    progress.finish_and_clear();
    drop(sweep);

    let benchmark = if args.send_offset + args.recv_offset > 0 {
        format!(
            "{} --send-offset {} --recv-offset {}",
            BENCH.name, args.send_offset, args.recv_offset
        )
    } else {
        BENCH.name.into()
    };
    let report = if args.stress.stress.is_some() {
        None
    } else {
        let report = allreduce::report(ctx, &gpu, benchmark, &args.sweep, series)?;
        report.publish(ctx)?;
        Some(report)
    };
    if ctx.is_root() {
        eprintln!(
            "note: fast: one-shot up to {} bytes, two-shot on up to {} blocks of {THREADS} threads (the GPU has {multiprocessors} multiprocessors)",
            options.oneshot_max_bytes, options.twoshot_max_blocks
        );
    }
    dev_comm.destroy()?;
    send_window.deregister()?;
    recv_window.deregister()?;
    send.free()?;
    recv.free()?;
    comm.destroy()?;
    drop(jit_module);
    drop(fast_module);
    drop(simple_module);
    match report {
        Some(report) => report.fail_on_wrong(ctx),
        None => allreduce::publish_stress(ctx, &args.stress, &stressed),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use Contender::{Fast, Nccl, NcclTuned};

    #[test]
    fn nccl_tuned_needs_sym_ctas_and_never_shares_a_run_with_nccl() {
        assert!(check_sym_ctas(&[Nccl, Fast], None, None).is_ok());
        assert!(check_sym_ctas(&[NcclTuned, Fast], Some(64), None).is_ok());
        // --sym-ctas wins over the environment's value (it is set before NCCL starts).
        assert!(check_sym_ctas(&[NcclTuned], Some(64), Some("7")).is_ok());
        let err = check_sym_ctas(&[NcclTuned], None, None).unwrap_err();
        assert!(
            err.reason.starts_with("nccl-tuned needs --sym-ctas N"),
            "{}",
            err.reason
        );
        let err = check_sym_ctas(&[Nccl, NcclTuned], Some(32), None).unwrap_err();
        assert!(
            err.reason.contains("`nccl` would be tuned too"),
            "{}",
            err.reason
        );
        assert_eq!(
            err.fix,
            "time nccl (NCCL's defaults) and nccl-tuned --sym-ctas N in two runs"
        );
        let err = check_sym_ctas(&[Nccl], None, Some("64")).unwrap_err();
        assert!(
            err.reason.starts_with("NCCL_SYM_CTAS=64 is set"),
            "{}",
            err.reason
        );
        // Without any NCCL series the variable does not matter.
        assert!(check_sym_ctas(&[Fast], Some(8), Some("64")).is_ok());
    }

    #[test]
    fn the_tuned_series_says_its_block_count() {
        assert_eq!(
            NcclTuned.about(Some(64)),
            "ncclAllReduce on the symmetric windows, NCCL_SYM_CTAS=64"
        );
        assert!(Nccl.about(None).ends_with("NCCL's defaults"));
    }
}
