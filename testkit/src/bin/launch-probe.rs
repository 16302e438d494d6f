//! `launch-probe`: the launcher with fake work and no GPU.
//!
//! Shows what every lesson gets from `common` before NCCL enters: ranks as
//! threads or MPI processes, a unique id shared from rank 0, a barrier,
//! rank-ordered output, and failure handling. It lives in `testkit` beside the
//! tests that drive its scenarios (`tests/launch.rs`, `tests/sharing.rs`,
//! `tests/nccl_link_dir.rs`); it is also a quick check of an MPI installation:
//!
//! ```text
//! NTHREADS=4 cargo run --bin launch-probe
//! cargo build --features mpi && mpirun -np 2 target/debug/launch-probe
//! NTHREADS=3 cargo run --bin launch-probe -- --scenario hang --rank 1   # exits 1 after 3 s
//! ```

use std::process::ExitCode;

use anyhow::{bail, Result};
use common::{CannotRun, Lesson, NcclVersion, Needs, RankContext};

#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum Scenario {
    /// Share an id, meet at a barrier, print in rank order.
    Ok,
    /// `--rank` returns an error; the others wait in a barrier.
    Fail,
    /// `--rank` returns an error; the others block forever, as a rank stuck
    /// inside NCCL would.
    Hang,
    /// `--rank` fails, and releasing what it holds then blocks forever, as
    /// an NCCL release that waits for peers would; the others are stuck too.
    StuckRelease,
    /// `--rank` panics.
    Panic,
    /// `--rank` finds it cannot run here (exit code 2).
    CannotRun,
    /// `--rank` finds a wrong result; every rank reaches the check.
    WrongResult,
}

/// What the launcher checks before the ranks start.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum ProbeNeeds {
    /// Nothing: the probe runs anywhere.
    Nothing,
    /// A GPU and its driver, as lesson 04 needs: checks a machine's driver
    /// before any lesson runs there.
    Gpu,
    /// A GPU and NCCL 2.19 or later, as lesson 01 needs: the launcher's
    /// decisions that depend on NCCL's release (ranks sharing a GPU).
    Nccl,
}

#[derive(clap::Args, Debug)]
struct ProbeArgs {
    /// What the launcher's preflight checks before the ranks start.
    #[arg(long, value_enum, default_value_t = ProbeNeeds::Nothing)]
    needs: ProbeNeeds,
    /// What the ranks do.
    #[arg(long, value_enum, default_value_t = Scenario::Ok)]
    scenario: Scenario,
    /// The rank that misbehaves.
    #[arg(long, default_value_t = 1)]
    rank: usize,
}

const PROBE: Lesson = Lesson {
    name: "launch-probe",
    about: "Runs the launcher with fake work and no GPU: ids, barrier, ordered output, failures",
    needs: Needs::Nothing,
    tool: None,
};

fn main() -> ExitCode {
    // The preflight runs inside `common::run`, before the probe sees its
    // parsed options, so `--needs` is read here first; clap parses it again
    // (and `--help` documents it) with the other options.
    let args: Vec<String> = std::env::args_os()
        .map(|arg| arg.to_string_lossy().into_owned())
        .collect();
    let asks = |what: &str| {
        args.windows(2)
            .any(|pair| pair[0] == "--needs" && pair[1] == what)
            || args.iter().any(|arg| *arg == format!("--needs={what}"))
    };
    let needs = if asks("gpu") {
        Needs::Gpu
    } else if asks("nccl") {
        Needs::GpuAndNccl {
            min: NcclVersion::new(2, 19, 0),
            feature: "the launcher's checks",
        }
    } else {
        Needs::Nothing
    };
    let lesson = Lesson { needs, ..PROBE };
    common::run(&lesson, probe)
}

fn probe(ctx: &RankContext, args: &ProbeArgs) -> Result<()> {
    let misbehaves = ctx.rank() == args.rank;
    ctx.println_root(format!(
        "launch-probe: {} ranks, scenario {:?}",
        ctx.size(),
        args.scenario
    ));
    // What NCCL would read: the launcher sets it for ranks that share a GPU.
    if let Some(value) = std::env::var_os("NCCL_RUNTIME_CONNECT") {
        ctx.println_root(format!(
            "launch-probe: NCCL_RUNTIME_CONNECT={}",
            value.to_string_lossy()
        ));
    }

    // The stand-in for an NCCL unique id: 128 bytes made on rank 0.
    let mut id = [0u8; 128];
    if ctx.is_root() {
        let seed = std::process::id() as u64 ^ 0x9e37_79b9_7f4a_7c15;
        for (i, byte) in id.iter_mut().enumerate() {
            *byte = (seed.rotate_left(i as u32 % 64) >> 8) as u8 ^ i as u8;
        }
    }
    ctx.broadcast(&mut id)?;
    let fingerprint = id
        .iter()
        .fold(0u32, |h, &b| h.rotate_left(5) ^ u32::from(b));
    let fingerprints = ctx.gather(fingerprint.to_le_bytes().to_vec())?;
    if let Some(all) = fingerprints {
        let same = all.windows(2).all(|pair| pair[0] == pair[1]);
        ctx.println_root(format!(
            "id shared: {}",
            if same {
                "every rank has rank 0's bytes"
            } else {
                "MISMATCH"
            }
        ));
        if !same {
            bail!("the ranks received different ids");
        }
    }

    match args.scenario {
        Scenario::Fail if misbehaves => bail!("rank {} fails on purpose", ctx.rank()),
        Scenario::Hang if misbehaves => {
            bail!("rank {} fails on purpose; the others are stuck", ctx.rank())
        }
        Scenario::Hang => {
            note_if_exit_handlers_run();
            loop {
                std::thread::park();
            }
        }
        Scenario::StuckRelease if misbehaves => {
            let _held = ReleaseThatBlocks;
            bail!(
                "rank {} fails on purpose; releasing its resources blocks",
                ctx.rank()
            )
        }
        Scenario::StuckRelease => loop {
            std::thread::park();
        },
        Scenario::Panic if misbehaves => panic!("rank {} panics on purpose", ctx.rank()),
        Scenario::CannotRun if misbehaves => bail!(CannotRun::new(
            format!("rank {} cannot run here, on purpose", ctx.rank()),
            "nothing to fix: this is a test",
        )),
        _ => {}
    }
    ctx.barrier()?;
    let sharing = match ctx.ranks_per_gpu() {
        1 => String::new(),
        n => format!(" (up to {n} ranks per GPU)"),
    };
    ctx.println_ordered(format!(
        "  Rank {} of {} on device {}{sharing} passed the barrier",
        ctx.rank(),
        ctx.size(),
        ctx.device()
    ))?;

    let check = if args.scenario == Scenario::WrongResult && misbehaves {
        Err(anyhow::anyhow!("element 3 of 8: expected 6, got 5"))
    } else {
        Ok(())
    };
    ctx.all_ok(check)?;
    ctx.println_root("launch-probe: done");
    Ok(())
}

/// A stand-in for an NCCL guard whose release waits for peers that will never
/// come (a window deregistration, say): dropped on the error path, it tells
/// the launcher, as the real guards do, and then blocks forever.
struct ReleaseThatBlocks;

impl Drop for ReleaseThatBlocks {
    fn drop(&mut self) {
        common::leaving_on_error();
        loop {
            std::thread::park();
        }
    }
}

/// Registers a C exit handler that says so on stderr if it runs. The launcher
/// must leave a process whose ranks are stuck with `_exit`, which runs no exit
/// handler: those belong to libraries (CUDA, NCCL, MPI) that the stuck ranks
/// are still inside. The tests check that this line never appears.
fn note_if_exit_handlers_run() {
    extern "C" fn exit_handler_ran() {
        let line = b"launch-probe: an exit handler ran while ranks were stuck\n";
        // SAFETY: writes a static buffer to stderr; no Rust state is touched
        // while the process is exiting.
        unsafe { libc::write(2, line.as_ptr().cast(), line.len()) };
    }
    static ONCE: std::sync::Once = std::sync::Once::new();
    // SAFETY: atexit only records the function pointer.
    ONCE.call_once(|| unsafe {
        libc::atexit(exit_handler_ran);
    });
}
