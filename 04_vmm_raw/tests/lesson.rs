//! Lesson 04's tests. CPU tests run everywhere; the GPU tests are ignored by
//! default: `cargo test -- --include-ignored` on a machine with 2 GPUs
//! (`GPU_TEST_RANKS=4` for 4). In an MPI build (`--features mpi`) the GPU
//! tests launch the lesson with mpirun, so the ranks are processes that
//! really pass descriptors to each other and import each other's memory.
//! The descriptor channel's own tests, CPU only, are in `src/fd_channel.rs`.

use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use testkit::{
    describe, gpu_ranks, keep_multicast_off, leftovers, mpirun, run_with_timeout, Started,
};

testkit::lesson_tests!("04_vmm_raw");

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// The lesson binary run directly (no mpirun, no NTHREADS): for usage errors,
/// which clap reports before any rank starts.
fn run_directly(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new(&lesson().binary);
    cmd.args(args)
        .env_remove("NTHREADS")
        .env_remove("VMM_SIZE_BYTES");
    cmd.envs(env.iter().copied());
    run_with_timeout(&mut cmd, Duration::from_secs(60))
}

/// Exit code 2 and `message` on stderr.
fn assert_exit_2(out: &Output, message: &str) {
    assert_eq!(out.status.code(), Some(2), "{}", describe(out));
    assert!(
        text(&out.stderr).contains(message),
        "no {message:?} in\n{}",
        describe(out)
    );
}

#[test]
fn main_rs_makes_every_cumem_call_and_the_readme_explains_each() {
    let (lesson, readme) = (lesson(), lesson().readme());
    let source = lesson.source();
    for call in [
        "cuMemGetAllocationGranularity",
        "cuMemCreate",
        "cuMemAddressReserve",
        "cuMemMap",
        "cuMemSetAccess",
        "cuMemExportToShareableHandle",
        "cuMemImportFromShareableHandle",
        "cuMemUnmap",
        "cuMemAddressFree",
        "cuMemRelease",
    ] {
        assert!(
            source.contains(&format!("sys::{call}(")),
            "main.rs never calls {call}"
        );
    }
    // Every driver call in main.rs, the ten above and the rest, is in the README.
    for (at, _) in source.match_indices("sys::cu") {
        let call: String = source[at + "sys::".len()..]
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
            .collect();
        let call = call.trim_end_matches("_v2");
        assert!(readme.contains(call), "README never mentions {call}");
    }
}

#[test]
fn a_malformed_size_is_a_usage_error_also_from_the_environment() {
    let out = run_directly(&["--size-bytes", "0"], &[]);
    assert_exit_2(&out, "a size must be at least 1 byte");
    let out = run_directly(&[], &[("VMM_SIZE_BYTES", "2MiB")]);
    assert_exit_2(&out, "'2MiB' is not a size such as 4096, 64K or 256M");
    let out = run_directly(&["--size-bytes", "99999999999999999999G"], &[]);
    assert_exit_2(&out, "is not a size");
    let out = run_directly(&["--size-bytes", "17179869184G"], &[]);
    assert_exit_2(&out, "'17179869184G' is too large");
}

#[test]
fn help_documents_the_size_its_suffixes_and_its_variable() {
    let out = run_directly(&["--help"], &[]);
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let help = text(&out.stdout);
    for expected in [
        "--size-bytes <BYTES>",
        "64K, 256M or 1G",
        "[env: VMM_SIZE_BYTES",
        "[default: 2M]",
    ] {
        assert!(help.contains(expected), "no {expected:?} in\n{help}");
    }
}

#[test]
#[ignore = "needs 2 GPUs"]
fn a_larger_buffer_verifies_too() {
    // 256 MiB + 1 byte: rounded up, and more words per slot than the
    // pattern's 24-bit index counts, so the index wraps.
    let out = lesson().run(
        gpu_ranks(),
        &["--size-bytes", "268435457"],
        Duration::from_secs(300),
    );
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert!(
        text(&out.stdout).contains("268435457 requested, rounded up"),
        "{}",
        describe(&out)
    );
}

#[test]
#[ignore = "needs 2 GPUs"]
fn a_size_that_cannot_be_allocated_exits_2() {
    let run = |size| {
        lesson().run(
            gpu_ranks(),
            &["--size-bytes", size],
            Duration::from_secs(120),
        )
    };
    let out = run("18446744073709551615");
    assert_exit_2(&out, "does not fit in 64 bits");
    assert!(text(&out.stderr).contains("fix: "), "{}", describe(&out));
    assert_exit_2(&run("1048576G"), "bytes of memory");
}

#[test]
#[ignore = "needs 2 GPUs"]
fn fault_a_socket_directory_left_by_a_killed_rank_0_is_removed_by_the_next_run() {
    // Rank 0 stalls while its socket directory exists, and is killed with
    // SIGKILL (the whole process in thread mode), which nothing can catch.
    let tmp = tempfile::tempdir().unwrap();
    let ranks = gpu_ranks();
    let mut cmd = lesson().command(ranks);
    cmd.env("TMPDIR", tmp.path());
    cmd.env(
        common::fault::VARIABLE,
        "stall:0:after:Rank 0 exported its allocation",
    );
    let mut started = Started::new(&mut cmd);
    started.wait_for("rank 0 stalls here on purpose", Duration::from_secs(120));
    let rank_0 = if cfg!(feature = "mpi") {
        started.mpi_rank_pid(0).expect("the process of MPI rank 0")
    } else {
        started.pid()
    };
    // SAFETY: kill only sends a signal.
    unsafe { libc::kill(rank_0, libc::SIGKILL) };
    let killed = started.finish(Duration::from_secs(30));
    let left = leftovers(tmp.path(), &["vmm-raw-"]);
    assert_eq!(
        left.len(),
        1,
        "the kill should leave the directory: {left:?}\n{}",
        describe(&killed)
    );
    let mut cmd = lesson().command(ranks);
    cmd.env("TMPDIR", tmp.path());
    let out = run_with_timeout(&mut cmd, Duration::from_secs(300));
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    assert_eq!(leftovers(tmp.path(), &["vmm-raw-"]), Vec::<String>::new());
}

#[test]
#[ignore = "needs 2 GPUs"]
fn memcheck_is_clean() {
    // compute-sanitizer (or $COMPUTE_SANITIZER) around the lesson: under
    // mpirun in an MPI build, so that each process is checked.
    let sanitizer = std::env::var("COMPUTE_SANITIZER").unwrap_or("compute-sanitizer".into());
    let mut cmd = if cfg!(feature = "mpi") {
        mpirun(gpu_ranks(), Path::new(&sanitizer))
    } else {
        let mut cmd = Command::new(&sanitizer);
        cmd.env("NTHREADS", gpu_ranks().to_string());
        keep_multicast_off(&mut cmd);
        cmd
    };
    testkit::share_gpus_if_needed(&mut cmd, gpu_ranks());
    cmd.args(["--tool", "memcheck", "--error-exitcode", "99"])
        .arg(&lesson().binary);
    let out = run_with_timeout(&mut cmd, Duration::from_secs(600));
    assert_eq!(out.status.code(), Some(0), "{}", describe(&out));
    let stdout = text(&out.stdout);
    assert!(
        stdout.contains("ERROR SUMMARY: 0 errors"),
        "{}",
        describe(&out)
    );
    assert!(
        stdout.contains("All resources cleaned up successfully"),
        "{}",
        describe(&out)
    );
}
