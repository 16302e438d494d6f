//! The fd channel for real, without a GPU: `04_fd_channel_check` passes
//! descriptors of anonymous temporary files between the ranks and reads them
//! back. In the default build the ranks are threads (both transports); with
//! `--features mpi` they are processes under `mpirun`, and the descriptors
//! cross process boundaries over Unix sockets with SCM_RIGHTS.

use std::process::Output;
use std::time::Duration;

use common::testing::{binary, describe, run_with_timeout};

fn check() -> std::path::PathBuf {
    binary(
        "04_fd_channel_check",
        env!("CARGO_BIN_EXE_04_fd_channel_check"),
    )
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The output of a successful check with `ranks` ranks, after the launch line.
fn expected(ranks: usize, transport: &str) -> String {
    let mut lines = vec![format!(
        "fd channel check: {ranks} ranks pass descriptors of anonymous files, transport {transport}"
    )];
    for rank in 0..ranks {
        for peer in (0..ranks).filter(|&p| p != rank) {
            lines.push(format!(
                "  Rank {rank} read rank {peer}'s file through the descriptor it received: 4121 bytes (verified)"
            ));
        }
    }
    lines.push("fd channel check: every rank read every peer's file".into());
    lines.join("\n") + "\n"
}

/// The socket directories (ours, or left by others) in `dir`.
fn no_leftovers(dir: &std::path::Path) -> Vec<String> {
    common::testing::leftovers(dir, &["vmm-raw-"])
}

/// A socket directory in `dir` as a rank 0 that was killed (SIGKILL) during
/// the exchange leaves it: named for this host and a process that is gone.
fn plant_stale_directory(dir: &std::path::Path) -> std::path::PathBuf {
    let stale = dir.join(common::testing::stale_dir_name("vmm-raw-"));
    std::fs::create_dir(&stale).unwrap();
    std::fs::write(stale.join("rank-0.sock"), b"").unwrap();
    stale
}

#[cfg(not(feature = "mpi"))]
mod threads {
    use super::*;
    use std::process::Command;

    fn run_check(nthreads: usize, args: &[&str], tmp: &std::path::Path) -> Output {
        run_with_timeout(
            Command::new(check())
                .env("NTHREADS", nthreads.to_string())
                .env("TMPDIR", tmp)
                .env_remove("XDG_RUNTIME_DIR")
                .args(args),
            Duration::from_secs(60),
        )
    }

    #[test]
    fn threads_share_descriptors_through_the_common_fd_table() {
        let tmp = tempfile::tempdir().unwrap();
        let out = run_check(3, &[], tmp.path());
        assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
        assert_eq!(
            text(&out.stdout),
            format!(
                "Launch: 3 ranks, one thread per GPU\n{}",
                expected(3, "shared-table")
            )
        );
    }

    #[test]
    fn threads_can_pass_descriptors_over_unix_sockets_too() {
        let tmp = tempfile::tempdir().unwrap();
        for _ in 0..3 {
            let out = run_check(4, &["--transport", "unix-socket"], tmp.path());
            assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
            assert_eq!(
                text(&out.stdout),
                format!(
                    "Launch: 4 ranks, one thread per GPU\n{}",
                    expected(4, "unix-socket")
                )
            );
        }
        assert_eq!(no_leftovers(tmp.path()), Vec::<String>::new());
    }

    #[test]
    fn a_socket_directory_left_by_a_killed_run_is_removed() {
        let tmp = tempfile::tempdir().unwrap();
        plant_stale_directory(tmp.path());
        let out = run_check(2, &["--transport", "unix-socket"], tmp.path());
        assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
        assert_eq!(no_leftovers(tmp.path()), Vec::<String>::new());
    }

    #[test]
    fn a_socket_directory_path_too_long_for_an_address_is_a_clear_error() {
        let tmp = tempfile::tempdir().unwrap();
        let deep = tmp.path().join("d".repeat(120));
        std::fs::create_dir(&deep).unwrap();
        let out = run_check(2, &["--transport", "unix-socket"], &deep);
        assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
        assert!(
            text(&out.stderr).contains("does not fit in a Unix socket address"),
            "{}",
            describe(&out)
        );
        assert_eq!(no_leftovers(&deep), Vec::<String>::new());
    }
}

#[cfg(feature = "mpi")]
mod mpi {
    use super::*;
    use common::testing::mpirun;

    fn run_check(ranks: usize, args: &[&str], tmp: &std::path::Path) -> Output {
        run_with_timeout(
            mpirun(ranks, &check())
                .args(args)
                .env("TMPDIR", tmp)
                .env_remove("XDG_RUNTIME_DIR"),
            Duration::from_secs(120),
        )
    }

    #[test]
    fn processes_pass_real_descriptors_over_unix_sockets() {
        let tmp = tempfile::tempdir().unwrap();
        for ranks in [2, 3] {
            let out = run_check(ranks, &[], tmp.path());
            assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
            assert_eq!(
                text(&out.stdout),
                format!(
                    "Launch: {ranks} ranks, one MPI process per GPU, 1 node\n{}",
                    expected(ranks, "unix-socket")
                )
            );
        }
        assert_eq!(no_leftovers(tmp.path()), Vec::<String>::new());
    }

    #[test]
    fn a_socket_directory_left_by_a_killed_rank_0_is_removed() {
        let tmp = tempfile::tempdir().unwrap();
        plant_stale_directory(tmp.path());
        let out = run_check(2, &[], tmp.path());
        assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
        assert_eq!(no_leftovers(tmp.path()), Vec::<String>::new());
    }

    #[test]
    fn sharing_descriptor_numbers_across_processes_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let out = run_check(2, &["--transport", "shared-table"], tmp.path());
        assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
        assert!(
            text(&out.stderr).contains("a descriptor number means nothing in another process"),
            "{}",
            describe(&out)
        );
    }
}
