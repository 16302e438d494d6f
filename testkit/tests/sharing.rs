//! The launcher's decisions about ranks that share a GPU, for real:
//! `launch-probe --needs nccl` (or `gpu`) run against a stand-in CUDA driver
//! that reports `gpus` GPUs of 132 multiprocessors, and a stand-in NCCL of
//! a chosen release, both built by the C compiler. No GPU needed.
//!
//! Threads: more ranks than GPUs run only with `NCCL_MULTI_RANK_GPU_ENABLE=1`
//! and NCCL 2.30 or later; every other case exits 2 naming what is missing.
//! MPI (`--features mpi`): processes that share a GPU also need an MPS server.

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use testkit::{build_fake_nccl, describe, run_with_timeout};

fn probe() -> std::path::PathBuf {
    testkit::binary("launch-probe", env!("CARGO_BIN_EXE_launch-probe"))
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// A directory holding a stand-in `libcuda.so` (`gpus` GPUs of 132
/// multiprocessors; `CU_DEVICE_ATTRIBUTE_MPS_ENABLED` answers `mps`) and a
/// stand-in `libnccl.so` of NCCL `nccl_code` (e.g. 23203 for 2.32.3).
/// `None` without a C compiler (the test then passes without checking).
fn machine(gpus: u32, mps: bool, nccl_code: u32) -> Option<tempfile::TempDir> {
    let dir = tempfile::tempdir().unwrap();
    let source = format!(
        "int cuInit(unsigned flags) {{ return 0; }}\n\
         int cuDriverGetVersion(int *out) {{ *out = 13000; return 0; }}\n\
         int cuDeviceGetCount(int *out) {{ *out = {gpus}; return 0; }}\n\
         int cuDeviceGet(int *device, int ordinal) {{\n\
           if (ordinal < 0 || ordinal >= {gpus}) return 101; /* CUDA_ERROR_INVALID_DEVICE */\n\
           *device = ordinal; return 0;\n\
         }}\n\
         int cuDeviceGetAttribute(int *out, int attribute, int device) {{\n\
           switch (attribute) {{\n\
             case 16: *out = 132; return 0; /* MULTIPROCESSOR_COUNT */\n\
             case 133: *out = {}; return 0; /* MPS_ENABLED */\n\
             default: *out = 0; return 0;\n\
           }}\n\
         }}\n",
        i32::from(mps)
    );
    testkit::build_fake_driver(dir.path(), &source)?;
    build_fake_nccl(dir.path(), "libnccl.so", nccl_code);
    Some(dir)
}

/// The probe's environment on `machine`: its libraries first on the loader
/// path, no NCCL_HOME or Python environment to look elsewhere, and
/// `NCCL_MULTI_RANK_GPU_ENABLE` as given.
fn on_machine(cmd: &mut Command, machine: &Path, multi_rank: Option<&str>) {
    cmd.env("LD_LIBRARY_PATH", machine)
        .env_remove("NCCL_HOME")
        .env_remove("VIRTUAL_ENV")
        .env_remove("CONDA_PREFIX")
        .env_remove("NCCL_MAX_CTAS")
        .env_remove("NCCL_RUNTIME_CONNECT")
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1");
    match multi_rank {
        Some(value) => cmd.env("NCCL_MULTI_RANK_GPU_ENABLE", value),
        None => cmd.env_remove("NCCL_MULTI_RANK_GPU_ENABLE"),
    };
}

#[cfg(not(feature = "mpi"))]
mod threads {
    use super::*;

    fn run(machine: &Path, ranks: usize, needs: &str, multi_rank: Option<&str>) -> Output {
        let mut cmd = Command::new(probe());
        cmd.args(["--needs", needs])
            .env("NTHREADS", ranks.to_string());
        on_machine(&mut cmd, machine, multi_rank);
        run_with_timeout(&mut cmd, Duration::from_secs(30))
    }

    #[test]
    fn with_the_variable_and_nccl_2_30_or_later_ranks_share_the_gpu() {
        let Some(machine) = machine(1, false, 23203) else {
            return;
        };
        let out = run(machine.path(), 4, "nccl", Some("1"));
        assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
        let stdout = text(&out.stdout);
        assert!(
            stdout.contains(
                "\nLaunch: 4 ranks on 1 GPU, one thread each (NCCL_MULTI_RANK_GPU_ENABLE=1)\n"
            ),
            "{}",
            describe(&out)
        );
        for rank in 0..4 {
            assert!(
                stdout.contains(&format!(
                    "  Rank {rank} of 4 on device 0 (up to 4 ranks per GPU) passed the barrier\n"
                )),
                "{}",
                describe(&out)
            );
        }
        // The launcher says what it capped, once.
        let stderr = text(&out.stderr);
        assert_eq!(
            stderr
                .matches("note: up to 4 ranks share each GPU (132 multiprocessors)")
                .count(),
            1,
            "{}",
            describe(&out)
        );
        assert!(
            stderr.contains("NCCL's at most 32 (maxCTAs"),
            "{}",
            describe(&out)
        );
    }

    #[test]
    fn ranks_go_round_robin_over_the_gpus() {
        let Some(machine) = machine(2, false, 23203) else {
            return;
        };
        let out = run(machine.path(), 3, "nccl", Some("1"));
        assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
        let stdout = text(&out.stdout);
        assert!(
            stdout.contains(
                "Launch: 3 ranks on 2 GPUs, one thread each (NCCL_MULTI_RANK_GPU_ENABLE=1)"
            ),
            "{}",
            describe(&out)
        );
        for (rank, device) in [(0, 0), (1, 1), (2, 0)] {
            assert!(
                stdout.contains(&format!(
                    "Rank {rank} of 3 on device {device} (up to 2 ranks per GPU)"
                )),
                "{}",
                describe(&out)
            );
        }
        // As many ranks as GPUs: no sharing, no note, the usual banner.
        let out = run(machine.path(), 2, "nccl", Some("1"));
        assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
        assert!(text(&out.stdout).contains("Launch: 2 ranks, one thread per GPU\n"));
        assert!(text(&out.stdout).contains("Rank 1 of 2 on device 1 passed"));
        assert!(
            !text(&out.stderr).contains("share each GPU"),
            "{}",
            describe(&out)
        );
    }

    #[test]
    fn without_the_variable_more_ranks_than_gpus_exits_2_naming_it() {
        let Some(machine) = machine(1, false, 23203) else {
            return;
        };
        for unset in [None, Some("0")] {
            let out = run(machine.path(), 4, "nccl", unset);
            assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
            let stderr = text(&out.stderr);
            assert!(
                stderr.contains("NTHREADS=4 asks for 4 ranks, but only 1 GPU is visible"),
                "{}",
                describe(&out)
            );
            assert!(
                stderr.contains("NCCL_MULTI_RANK_GPU_ENABLE=1 NTHREADS=4 <program>"),
                "{}",
                describe(&out)
            );
            assert!(
                stderr.contains("NCCL 2.32.3 allows it"),
                "{}",
                describe(&out)
            );
            assert!(text(&out.stdout).is_empty(), "{}", describe(&out));
        }
    }

    #[test]
    fn without_the_variable_an_old_nccl_names_the_release_needed() {
        let Some(machine) = machine(1, false, 22803) else {
            return;
        };
        let out = run(machine.path(), 2, "nccl", None);
        assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
        let stderr = text(&out.stderr);
        assert!(
            stderr.contains("with NCCL 2.28.3 each rank needs a GPU of its own"),
            "{}",
            describe(&out)
        );
        assert!(
            stderr.contains("load NCCL 2.30.0 or newer"),
            "{}",
            describe(&out)
        );
    }

    #[test]
    fn the_variable_with_nccl_2_28_or_2_29_exits_2_naming_the_release() {
        for (code, version) in [(22803, "2.28.3"), (22907, "2.29.7")] {
            let Some(machine) = machine(1, false, code) else {
                return;
            };
            let out = run(machine.path(), 2, "nccl", Some("1"));
            assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
            let stderr = text(&out.stderr);
            assert!(
                stderr.contains(&format!(
                    "NCCL_MULTI_RANK_GPU_ENABLE=1 asks 2 ranks to share 1 GPU, but NCCL {version} cannot"
                )),
                "{}",
                describe(&out)
            );
            assert!(
                stderr.contains("Duplicate GPU detected"),
                "{}",
                describe(&out)
            );
        }
    }

    #[test]
    fn a_value_that_is_not_a_number_is_named() {
        let Some(machine) = machine(1, false, 23203) else {
            return;
        };
        let out = run(machine.path(), 2, "nccl", Some("yes"));
        assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
        assert!(
            text(&out.stderr)
                .contains("NCCL_MULTI_RANK_GPU_ENABLE=\"yes\" does not let them share one"),
            "{}",
            describe(&out)
        );
    }

    #[test]
    fn a_program_without_nccl_shares_on_the_same_request() {
        let Some(machine) = machine(1, false, 22803) else {
            return;
        };
        let out = run(machine.path(), 2, "gpu", Some("1"));
        assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
        assert!(
            text(&out.stdout).contains("Launch: 2 ranks on 1 GPU, one thread each"),
            "{}",
            describe(&out)
        );
        assert!(
            !text(&out.stderr).contains("NCCL's at most"),
            "{}",
            describe(&out)
        );
        let out = run(machine.path(), 2, "gpu", None);
        assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
        assert!(
            text(&out.stderr).contains("this program uses no NCCL"),
            "{}",
            describe(&out)
        );
    }

    #[test]
    fn ranks_that_share_a_gpu_connect_at_init_unless_the_user_says() {
        let Some(machine) = machine(1, false, 23203) else {
            return;
        };
        let out = run(machine.path(), 2, "nccl", Some("1"));
        assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
        assert!(
            text(&out.stdout).contains("launch-probe: NCCL_RUNTIME_CONNECT=0\n"),
            "{}",
            describe(&out)
        );
        assert!(
            text(&out.stderr).contains("note: NCCL_RUNTIME_CONNECT=0 (set by the launcher, "),
            "{}",
            describe(&out)
        );
        // The user's own value stays, and no note claims otherwise.
        let mut cmd = Command::new(probe());
        cmd.args(["--needs", "nccl"]).env("NTHREADS", "2");
        on_machine(&mut cmd, machine.path(), Some("1"));
        cmd.env("NCCL_RUNTIME_CONNECT", "1");
        let out = run_with_timeout(&mut cmd, Duration::from_secs(30));
        assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
        assert!(text(&out.stdout).contains("launch-probe: NCCL_RUNTIME_CONNECT=1\n"));
        assert!(
            !text(&out.stderr).contains("set by the launcher"),
            "{}",
            describe(&out)
        );
        // With the request but a GPU per rank it is set too, and said.
        let out = run(machine.path(), 1, "nccl", Some("1"));
        assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
        assert!(
            text(&out.stderr).contains("note: NCCL_RUNTIME_CONNECT=0 (set by the launcher, "),
            "{}",
            describe(&out)
        );
        // Without the request, nothing is set.
        let out = run(machine.path(), 1, "nccl", None);
        assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
        assert!(
            !text(&out.stdout).contains("NCCL_RUNTIME_CONNECT"),
            "{}",
            describe(&out)
        );
    }

    #[test]
    fn the_users_own_nccl_max_ctas_is_named() {
        let Some(machine) = machine(1, false, 23203) else {
            return;
        };
        let mut cmd = Command::new(probe());
        cmd.args(["--needs", "nccl"]).env("NTHREADS", "8");
        on_machine(&mut cmd, machine.path(), Some("1"));
        cmd.env("NCCL_MAX_CTAS", "64");
        let out = run_with_timeout(&mut cmd, Duration::from_secs(30));
        assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
        let stderr = text(&out.stderr);
        assert!(
            stderr.contains("NCCL_MAX_CTAS=64 says (yours; it overrides the config's 16)"),
            "{}",
            describe(&out)
        );
        assert!(stderr.contains("may not fit at once"), "{}", describe(&out));
    }
}

#[cfg(feature = "mpi")]
mod mpi {
    use super::*;

    fn run(machine: &Path, ranks: usize, multi_rank: Option<&str>) -> Output {
        let mut cmd = testkit::mpirun(ranks, &probe());
        cmd.args(["--needs", "nccl"]);
        on_machine(&mut cmd, machine, multi_rank);
        run_with_timeout(&mut cmd, Duration::from_secs(60))
    }

    #[test]
    fn processes_that_share_a_gpu_run_under_mps() {
        let Some(machine) = machine(1, true, 23203) else {
            return;
        };
        let out = run(machine.path(), 2, Some("1"));
        assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
        let stdout = text(&out.stdout);
        assert!(
            stdout.contains(
                "\nLaunch: 2 ranks, one MPI process each, 1 node, up to 2 per GPU (NCCL_MULTI_RANK_GPU_ENABLE=1, MPS)\n"
            ),
            "{}",
            describe(&out)
        );
        for rank in 0..2 {
            assert!(
                stdout.contains(&format!(
                    "Rank {rank} of 2 on device 0 (up to 2 ranks per GPU) passed"
                )),
                "{}",
                describe(&out)
            );
        }
    }

    #[test]
    fn processes_that_share_a_gpu_without_mps_exit_2_saying_how_to_start_it() {
        let Some(machine) = machine(1, false, 23203) else {
            return;
        };
        let out = run(machine.path(), 2, Some("1"));
        assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
        let stderr = text(&out.stderr);
        assert!(
            stderr.contains(
                "2 MPI processes share GPU 0, and processes that share a GPU need CUDA MPS"
            ),
            "{}",
            describe(&out)
        );
        assert!(
            stderr.contains("nvidia-cuda-mps-control -d"),
            "{}",
            describe(&out)
        );
    }

    #[test]
    fn without_the_variable_processes_may_not_share() {
        let Some(machine) = machine(1, true, 23203) else {
            return;
        };
        let out = run(machine.path(), 2, None);
        assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
        let stderr = text(&out.stderr);
        assert!(
            stderr.contains("2 MPI processes share this node, but it has only 1 GPU"),
            "{}",
            describe(&out)
        );
        assert!(
            stderr.contains("mpirun -np 2 -x NCCL_MULTI_RANK_GPU_ENABLE=1"),
            "{}",
            describe(&out)
        );
    }
}
