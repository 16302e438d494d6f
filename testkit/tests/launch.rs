//! The launcher, for real: `launch-probe` run as a separate process, in thread
//! mode (default build) or under mpirun (`--features mpi`). No GPU needed.

use std::process::{Command, Output};
use std::time::{Duration, Instant};

use testkit::{binary, describe, run_with_timeout};

fn probe() -> std::path::PathBuf {
    binary("launch-probe", env!("CARGO_BIN_EXE_launch-probe"))
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// Lines of stderr that report a rank's error.
fn rank_errors(out: &Output) -> Vec<String> {
    text(&out.stderr)
        .lines()
        .filter(|l| l.starts_with("[rank ") && l.contains("] error: "))
        .map(str::to_string)
        .collect()
}

/// A stand-in CUDA driver (`libcuda.so`, built by the C compiler) whose
/// `cuInit` succeeds and whose `query` call fails; `None` without a compiler.
fn fake_driver(dir: &std::path::Path, failing: &str) -> Option<()> {
    let body = |call: &str, value: u32| {
        if call == failing {
            "return 999; /* CUDA_ERROR_UNKNOWN */".to_string()
        } else {
            format!("*out = {value}; return 0;")
        }
    };
    let source = format!(
        "int cuInit(unsigned flags) {{ return 0; }}\n\
         int cuDriverGetVersion(int *out) {{ {} }}\n\
         int cuDeviceGetCount(int *out) {{ {} }}\n",
        body("cuDriverGetVersion", 13000),
        body("cuDeviceGetCount", 2)
    );
    testkit::build_c_library(dir, "libcuda.so", &source, &[])?;
    std::fs::copy(dir.join("libcuda.so"), dir.join("libcuda.so.1")).ok()?;
    Some(())
}

#[test]
fn a_driver_call_that_fails_after_cuinit_is_named() {
    // The preflight used to ignore these two return codes: a failing
    // cuDeviceGetCount read as "no GPU", a failing version query as "0.0".
    for failing in ["cuDeviceGetCount", "cuDriverGetVersion"] {
        let dir = tempfile::tempdir().unwrap();
        if fake_driver(dir.path(), failing).is_none() {
            return;
        }
        let out = run_with_timeout(
            Command::new(probe())
                .args(["--needs", "gpu"])
                .env("LD_LIBRARY_PATH", dir.path())
                .env("NTHREADS", "1")
                .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
                .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"),
            Duration::from_secs(30),
        );
        assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
        assert!(
            text(&out.stderr).contains(&format!(
                "the CUDA driver initialised, but {failing} returned CUDA_ERROR_UNKNOWN"
            )),
            "{}",
            describe(&out)
        );
    }
}

/// A process that an MPS setup sends to a daemon that does not answer
/// (cuInit: CUDA_ERROR_MPS_CONNECTION_FAILED) is told so, with the pipe
/// directory, not that the driver and kernel module differ.
#[test]
fn an_mps_server_that_does_not_answer_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let source =
        "int cuInit(unsigned flags) { return 805; /* CUDA_ERROR_MPS_CONNECTION_FAILED */ }\n";
    if testkit::build_c_library(dir.path(), "libcuda.so", source, &[]).is_none() {
        return;
    }
    std::fs::copy(
        dir.path().join("libcuda.so"),
        dir.path().join("libcuda.so.1"),
    )
    .unwrap();
    let out = run_with_timeout(
        Command::new(probe())
            .args(["--needs", "gpu"])
            .env("LD_LIBRARY_PATH", dir.path())
            .env("CUDA_MPS_PIPE_DIRECTORY", "/tmp/no-mps-here")
            .env("NTHREADS", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1"),
        Duration::from_secs(30),
    );
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    let stderr = text(&out.stderr);
    assert!(
        stderr.contains("could not reach an MPS server: cuInit returned CUDA_ERROR_MPS_CONNECTION_FAILED (CUDA_MPS_PIPE_DIRECTORY=/tmp/no-mps-here)"),
        "{}",
        describe(&out)
    );
    assert!(
        stderr.contains("nvidia-cuda-mps-control -d"),
        "{}",
        describe(&out)
    );
}

#[cfg(not(feature = "mpi"))]
mod threads {
    use super::*;

    fn run_probe(nthreads: &str, args: &[&str]) -> Output {
        run_with_timeout(
            Command::new(probe()).env("NTHREADS", nthreads).args(args),
            Duration::from_secs(30),
        )
    }

    #[test]
    fn ranks_share_the_id_and_print_in_rank_order() {
        // Several runs: the order must not depend on thread scheduling.
        for _ in 0..5 {
            let out = run_probe("4", &[]);
            assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
            assert_eq!(
                text(&out.stdout),
                "Launch: 4 ranks, one thread per GPU\n\
                 launch-probe: 4 ranks, scenario Ok\n\
                 id shared: every rank has rank 0's bytes\n  \
                 Rank 0 of 4 on device 0 passed the barrier\n  \
                 Rank 1 of 4 on device 1 passed the barrier\n  \
                 Rank 2 of 4 on device 2 passed the barrier\n  \
                 Rank 3 of 4 on device 3 passed the barrier\n\
                 launch-probe: done\n"
            );
        }
    }

    /// Every bad `NTHREADS` gets the parser's message, naming `NTHREADS`
    /// and not the `--nthreads` flag that the user never typed.
    #[test]
    fn a_bad_nthreads_is_refused_with_a_positive_whole_number_message() {
        for bad in ["0", "abc", "-1", "2.5", "100000", "99999999999999999999999"] {
            let start = Instant::now();
            let out = run_probe(bad, &[]);
            assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
            let stderr = text(&out.stderr);
            assert!(
                stderr.starts_with("error: launch-probe: NTHREADS must be a positive whole number"),
                "{}",
                describe(&out)
            );
            assert!(!stderr.contains("--nthreads"), "{}", describe(&out));
            assert!(!stderr.contains("panicked"), "{}", describe(&out));
            // NTHREADS=100000 used to start threads until the process
            // aborted ("failed to set up alternative stack guard page").
            assert!(start.elapsed() < Duration::from_secs(5));
        }
        let out = run_probe("100000", &[]);
        assert!(
            text(&out.stderr).contains("no larger than 1024"),
            "{}",
            describe(&out)
        );
    }

    /// The same value typed as a flag: clap's usage error, which names the
    /// flag, carrying the same message.
    #[test]
    fn a_bad_nthreads_flag_gets_the_same_message() {
        for bad in ["-1", "0", "100000"] {
            let out = run_with_timeout(
                Command::new(probe())
                    .env_remove("NTHREADS")
                    .args(["--nthreads", bad]),
                Duration::from_secs(30),
            );
            assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
            let stderr = text(&out.stderr);
            assert!(
                stderr.contains(&format!("invalid value '{bad}' for '--nthreads <N>'")),
                "{}",
                describe(&out)
            );
            assert!(
                stderr.contains("NTHREADS must be a positive whole number"),
                "{}",
                describe(&out)
            );
        }
        // A good flag wins over a bad variable, as clap's flags do.
        let out = run_probe("abc", &["--nthreads", "2"]);
        assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    }

    /// An argument that is not UTF-8 is a usage error, not a panic.
    #[test]
    fn an_argument_that_is_not_utf8_is_refused_without_a_panic() {
        use std::os::unix::ffi::OsStrExt;
        let bad = std::ffi::OsStr::from_bytes(b"--nthreads=\xff");
        let out = run_with_timeout(
            Command::new(probe()).env_remove("NTHREADS").arg(bad),
            Duration::from_secs(30),
        );
        assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
        let stderr = text(&out.stderr);
        assert!(stderr.starts_with("error: "), "{}", describe(&out));
        assert!(!stderr.contains("panicked"), "{}", describe(&out));
    }

    #[test]
    fn a_failing_rank_fails_the_run_promptly_with_its_message() {
        let start = Instant::now();
        let out = run_probe("3", &["--scenario", "fail", "--rank", "1"]);
        assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
        assert_eq!(
            rank_errors(&out),
            vec!["[rank 1/3] error: rank 1 fails on purpose"],
            "{}",
            describe(&out)
        );
        assert!(
            start.elapsed() < Duration::from_secs(3),
            "the other ranks were not released at once"
        );
        assert!(!text(&out.stdout).contains("done"));
    }

    #[test]
    fn ranks_stuck_in_a_library_call_do_not_hang_the_run() {
        let start = Instant::now();
        let out = run_probe("3", &["--scenario", "hang", "--rank", "2"]);
        assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
        assert_eq!(
            rank_errors(&out),
            vec!["[rank 2/3] error: rank 2 fails on purpose; the others are stuck"],
            "{}",
            describe(&out)
        );
        assert!(
            text(&out.stderr).contains("ranks 0 and 1 did not stop within 3 s of the failure"),
            "{}",
            describe(&out)
        );
        // The process left with _exit: no exit handler ran under the stuck ranks.
        assert!(
            !text(&out.stderr).contains("an exit handler ran"),
            "{}",
            describe(&out)
        );
        assert!(start.elapsed() < Duration::from_secs(15));
    }

    #[test]
    fn a_panicking_rank_is_a_failure_not_a_crash() {
        let out = run_probe("2", &["--scenario", "panic", "--rank", "0"]);
        assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
        assert_eq!(
            rank_errors(&out),
            vec!["[rank 0/2] error: panicked: rank 0 panics on purpose"],
            "{}",
            describe(&out)
        );
    }

    #[test]
    fn cannot_run_exits_2_with_the_fix() {
        let out = run_probe("2", &["--scenario", "cannot-run", "--rank", "1"]);
        assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
        assert!(
            text(&out.stderr).contains("[rank 1/2] error: rank 1 cannot run here, on purpose\n  fix: nothing to fix: this is a test"),
            "{}",
            describe(&out)
        );
    }

    #[test]
    fn a_wrong_result_is_reported_once_by_rank_0_and_exits_1() {
        let out = run_probe("3", &["--scenario", "wrong-result", "--rank", "2"]);
        assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
        assert_eq!(
            rank_errors(&out),
            vec!["[rank 2/3] error: element 3 of 8: expected 6, got 5"],
            "{}",
            describe(&out)
        );
        assert!(!text(&out.stdout).contains("done"), "{}", describe(&out));
    }

    #[test]
    fn a_thread_mode_binary_under_mpirun_refuses_to_run() {
        let out = run_with_timeout(
            Command::new(probe())
                .env("NTHREADS", "1")
                .env("OMPI_COMM_WORLD_SIZE", "2"),
            Duration::from_secs(30),
        );
        assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
        assert!(
            text(&out.stderr).contains("built without MPI support"),
            "{}",
            describe(&out)
        );
        assert!(
            text(&out.stderr).contains("--features mpi"),
            "{}",
            describe(&out)
        );
    }

    #[test]
    fn help_documents_nthreads_and_the_modes() {
        let out = run_with_timeout(Command::new(probe()).arg("--help"), Duration::from_secs(30));
        assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
        let help = text(&out.stdout);
        assert!(help.contains("[env: NTHREADS"), "{help}");
        assert!(help.contains("mpirun -np 2"), "{help}");
    }
}

#[cfg(feature = "mpi")]
mod mpi {
    use super::*;
    use testkit::mpirun;

    fn run_probe(ranks: usize, args: &[&str]) -> Output {
        run_with_timeout(mpirun(ranks, &probe()).args(args), Duration::from_secs(60))
    }

    #[test]
    fn mpirun_ranks_share_the_id_and_print_in_rank_order() {
        let out = run_probe(2, &[]);
        assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
        assert_eq!(
            text(&out.stdout),
            "Launch: 2 ranks, one MPI process per GPU, 1 node\n\
             launch-probe: 2 ranks, scenario Ok\n\
             id shared: every rank has rank 0's bytes\n  \
             Rank 0 of 2 on device 0 passed the barrier\n  \
             Rank 1 of 2 on device 1 passed the barrier\n\
             launch-probe: done\n"
        );
    }

    #[test]
    fn without_mpirun_the_program_is_one_rank() {
        let mut cmd = Command::new(probe());
        cmd.env("OMPI_ALLOW_RUN_AS_ROOT", "1")
            .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
        let out = run_with_timeout(&mut cmd, Duration::from_secs(60));
        assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
        assert!(
            text(&out.stdout).starts_with("Launch: 1 rank, one MPI process per GPU, 1 node\n"),
            "{}",
            describe(&out)
        );
    }

    #[test]
    fn a_failing_process_aborts_the_job_with_exit_1() {
        let out = run_probe(2, &["--scenario", "fail", "--rank", "1"]);
        assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
        assert_eq!(
            rank_errors(&out),
            vec!["[rank 1/2] error: rank 1 fails on purpose"],
            "{}",
            describe(&out)
        );
    }

    #[test]
    fn processes_stuck_in_a_library_call_are_stopped_by_the_abort() {
        let start = Instant::now();
        let out = run_probe(2, &["--scenario", "hang", "--rank", "1"]);
        assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
        assert!(rank_errors(&out).contains(
            &"[rank 1/2] error: rank 1 fails on purpose; the others are stuck".to_string()
        ));
        assert!(start.elapsed() < Duration::from_secs(30));
    }

    #[test]
    fn cannot_run_exits_2() {
        let out = run_probe(2, &["--scenario", "cannot-run", "--rank", "0"]);
        assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
        assert!(
            text(&out.stderr).contains("fix: nothing to fix"),
            "{}",
            describe(&out)
        );
    }

    #[test]
    fn a_wrong_result_exits_1_without_aborting() {
        let out = run_probe(2, &["--scenario", "wrong-result", "--rank", "1"]);
        assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
        assert_eq!(
            rank_errors(&out),
            vec!["[rank 1/2] error: element 3 of 8: expected 6, got 5"],
            "{}",
            describe(&out)
        );
        assert!(
            !text(&out.stderr).contains("MPI_ABORT"),
            "{}",
            describe(&out)
        );
    }

    #[test]
    fn a_refused_run_is_reported_by_the_nodes_first_rank_and_ends_quickly() {
        // Without a usable GPU every rank would find the same problem; only
        // the node's first rank initialises the driver to find it (with 64
        // ranks on one node that was most of a 12 s refusal), and the run
        // ends within 5 s. mpirun itself adds about 2 s to any non-zero exit.
        let start = Instant::now();
        let out = run_with_timeout(
            mpirun(8, &probe())
                .args(["--needs", "gpu"])
                .env("CUDA_VISIBLE_DEVICES", ""),
            Duration::from_secs(60),
        );
        assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
        assert!(
            text(&out.stderr)
                .contains("error: launch-probe cannot run on this system (rank 0 of 8):"),
            "{}",
            describe(&out)
        );
        assert!(
            start.elapsed() < Duration::from_secs(5),
            "{:?}",
            start.elapsed()
        );
    }

    #[test]
    fn nthreads_is_noted_but_not_used() {
        let out = run_with_timeout(
            mpirun(2, &probe()).env("NTHREADS", "7"),
            Duration::from_secs(60),
        );
        assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
        assert!(
            text(&out.stderr).contains("NTHREADS is not used in MPI mode"),
            "{}",
            describe(&out)
        );
        assert!(
            text(&out.stdout).contains("Launch: 2 ranks"),
            "{}",
            describe(&out)
        );
    }
}

/// The fault matrix on the launcher alone (docs/src/testing.md): a rank that
/// fails, a rank that hangs and then Ctrl-C, a killed MPI rank. Each run must
/// end within 5 s, exit non-zero, name the rank, and leave nothing behind.
mod faults {
    use super::*;
    use testkit::{fault_case, Disturb};

    /// `launch-probe` with `ranks` ranks, as threads or under mpirun.
    fn probe_command(ranks: usize) -> Command {
        if cfg!(feature = "mpi") {
            testkit::mpirun(ranks, &probe())
        } else {
            let mut cmd = Command::new(probe());
            cmd.env("NTHREADS", ranks.to_string());
            cmd
        }
    }

    fn with_fault(ranks: usize, fault: &str) -> Command {
        let mut cmd = probe_command(ranks);
        cmd.env("SYMMEM_TEST_FAULT", fault);
        cmd
    }

    const STARTUP: Duration = Duration::from_secs(30);

    /// Runs a case that must end cleanly with exit code 1 and print `names`.
    fn ends_with_exit_1(cmd: &mut Command, trigger: &str, names: &str) {
        let end = fault_case(cmd, trigger, Disturb::Nothing, STARTUP, &[]);
        end.assert_clean(names);
        assert_eq!(
            end.output.status.code(),
            Some(1),
            "{}",
            describe(&end.output)
        );
    }

    #[test]
    fn a_rank_that_fails_after_the_barrier_ends_the_run() {
        ends_with_exit_1(
            &mut with_fault(3, "fail:1:after:passed the barrier"),
            "rank 1 fails here on purpose",
            "[rank 1/3] error: injected failure (SYMMEM_TEST_FAULT=fail:1:after:passed the barrier)",
        );
    }
    #[test]
    fn ctrl_c_stops_a_run_with_a_hung_rank() {
        let end = fault_case(
            &mut with_fault(2, "stall:1:after:passed the barrier"),
            "rank 1 stalls here on purpose",
            Disturb::CtrlC(Duration::ZERO),
            STARTUP,
            &[],
        );
        end.assert_clean(&testkit::stopped_by_ctrl_c(1, 2));
    }

    #[test]
    fn a_rank_whose_release_blocks_after_an_error_does_not_hang_the_run() {
        // The error never returns: the rank is stuck in its guard's Drop. The
        // guard told the launcher first, so the run still ends, naming it.
        ends_with_exit_1(
            probe_command(3).args(["--scenario", "stuck-release", "--rank", "1"]),
            "id shared",
            "[rank 1/3] error: failed, but its error is still on its way",
        );
    }
    #[test]
    fn a_malformed_fault_request_is_refused_before_any_rank_starts() {
        let out = run_with_timeout(
            &mut with_fault(2, "explode:1:init"),
            Duration::from_secs(60),
        );
        assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
        assert!(
            text(&out.stderr).contains("SYMMEM_TEST_FAULT=\"explode:1:init\" is not"),
            "{}",
            describe(&out)
        );
        assert!(!text(&out.stdout).contains("Launch:"), "{}", describe(&out));
    }

    #[test]
    #[cfg(feature = "mpi")]
    fn killing_one_mpi_rank_ends_the_job() {
        for victim in [1, 0] {
            let end = fault_case(
                &mut with_fault(2, "stall:1:after:passed the barrier"),
                "rank 1 stalls here on purpose",
                Disturb::KillMpiRank(victim),
                STARTUP,
                &[],
            );
            // mpirun names the rank that died.
            end.assert_clean(&format!("process rank {victim} with PID"));
        }
    }
}
