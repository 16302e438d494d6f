//! Test support, a dev-dependency of every crate but `common`: finding and
//! running the lesson binaries, reading the README's expected transcript and
//! walk-through, comparing output, and driving the fault matrix's cases.
//! `common` cannot take this crate, which depends on it, so `common`'s tests
//! that need these helpers live here: the launcher's (`tests/`, driving the
//! GPU-free `launch-probe` of `src/bin/`) and the preflight's.
//!
//! Nothing here runs in a lesson; a lesson's own code needs only `common`.
//!
//! Transcripts in a README are fenced blocks that follow a marker line
//! `<!-- transcript: N ranks -->`. In them `[..]` stands for any text within
//! one line (a path, a version), and nothing else is a wildcard.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The path of a binary of the package under test: `NEXTEST_BIN_EXE_<name>`
/// when nextest runs an archive on another machine, else the path cargo
/// compiled in (`env!("CARGO_BIN_EXE_<name>")`, passed by the caller).
pub fn binary(name: &str, cargo_path: &str) -> PathBuf {
    let underscored = name.replace('-', "_");
    for var in [
        format!("NEXTEST_BIN_EXE_{name}"),
        format!("NEXTEST_BIN_EXE_{underscored}"),
    ] {
        if let Some(path) = std::env::var_os(var) {
            return PathBuf::from(path);
        }
    }
    PathBuf::from(cargo_path)
}

/// The directory of the crate under test, looked up when the test runs:
/// `CARGO_MANIFEST_DIR` as cargo and nextest set it for the test process
/// (nextest's `--workspace-remap` points it at the moved source tree). Only a
/// binary started by hand, without it, falls back to `cargo_manifest_dir`,
/// the build machine's path (`env!("CARGO_MANIFEST_DIR")`, passed by the
/// caller). Never read a test's files through a path fixed at compile time:
/// an archive built here runs on the GPU machine, where that path is gone.
pub fn crate_dir(cargo_manifest_dir: &str) -> PathBuf {
    std::env::var_os("CARGO_MANIFEST_DIR")
        .map_or_else(|| PathBuf::from(cargo_manifest_dir), PathBuf::from)
}

/// How many ranks the GPU tests use: `GPU_TEST_RANKS`, default 2.
pub fn gpu_ranks() -> usize {
    std::env::var("GPU_TEST_RANKS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(2)
}

/// Is this an MPI build (`--features mpi`)? Asked of `common` at run time:
/// the lesson under test and this crate share the one `common` of the build,
/// so its launch mode is the lesson's.
pub fn mpi_build() -> bool {
    common::launch_mode() == "mpi"
}

/// `mpirun -np N <program>`, allowed to run as root and to oversubscribe (CI
/// machines have 2 cores), with NVLink multicast kept off in the children.
pub fn mpirun(ranks: usize, program: &Path) -> Command {
    let mut cmd = Command::new(std::env::var("MPIRUN").unwrap_or_else(|_| "mpirun".into()));
    cmd.args(["-np", &ranks.to_string(), "--oversubscribe"])
        .arg(program)
        .env("OMPI_ALLOW_RUN_AS_ROOT", "1")
        .env("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
        // Containers often forbid the cross-memory attach that Open MPI's
        // shared-memory transport tries first; it then falls back noisily.
        .env("OMPI_MCA_btl_vader_single_copy_mechanism", "none");
    keep_multicast_off(&mut cmd);
    cmd
}

/// GPUs the CUDA driver sees here (0 without a driver).
pub fn visible_gpus() -> usize {
    common::preflight::probe_driver().map_or(0, |driver| driver.gpus)
}

/// With fewer GPUs here than `ranks`, asks for the ranks to share them the
/// way a user does (`NCCL_MULTI_RANK_GPU_ENABLE=1`), unless the environment
/// already says; so that `GPU_TEST_RANKS=2` and `4` run on one GPU. (An MPI
/// build then needs an MPS server: see the book's "One GPU, several ranks".)
pub fn share_gpus_if_needed(cmd: &mut Command, ranks: usize) {
    if ranks > visible_gpus() && std::env::var_os(common::placement::MULTI_RANK_VARIABLE).is_none()
    {
        cmd.env(common::placement::MULTI_RANK_VARIABLE, "1");
    }
}

/// The GPU machines share their GPUs: NVLink multicast (NVLS) stays off.
pub fn keep_multicast_off(cmd: &mut Command) {
    cmd.env("NCCL_NVLS_ENABLE", "0")
        .env("NVSHMEM_DISABLE_NVLS", "1")
        .env("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1");
}

/// Runs `cmd` to completion, panicking if it takes longer than `limit` (the
/// process and everything it started are killed first). A test that hangs is
/// a failed test.
pub fn run_with_timeout(cmd: &mut Command, limit: Duration) -> Output {
    Started::new(cmd).finish(limit)
}

/// A program started by a test, in a session of its own, its output
/// collected as it comes.
///
/// The session holds every process the program starts (mpirun's ranks have
/// process groups of their own, but stay in its session), so the test can
/// find them, kill them all on a timeout, and check that none is left behind,
/// zombies included. The program also leads its own process group, so
/// [`signal_group`](Self::signal_group) is what Ctrl-C in a terminal does.
pub struct Started {
    command: String,
    child: std::process::Child,
    stdout: Collected,
    stderr: Collected,
    readers: Vec<std::thread::JoinHandle<()>>,
}

/// The bytes read so far from one of the program's pipes.
type Collected = Arc<Mutex<Vec<u8>>>;

/// Reads `pipe` into `sink` on a thread of its own, until the pipe closes.
fn collect(mut pipe: impl Read + Send + 'static, sink: &Collected) -> std::thread::JoinHandle<()> {
    let sink = Arc::clone(sink);
    std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while let Ok(n @ 1..) = pipe.read(&mut buf) {
            sink.lock()
                .unwrap_or_else(|p| p.into_inner())
                .extend_from_slice(&buf[..n]);
        }
    })
}

impl Started {
    pub fn new(cmd: &mut Command) -> Self {
        // SAFETY: setsid is async-signal-safe and touches no memory of ours.
        unsafe {
            cmd.pre_exec(|| {
                libc::setsid();
                Ok(())
            });
        }
        let mut child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {cmd:?}: {e}"));
        let (stdout, stderr): (Collected, Collected) = (Arc::default(), Arc::default());
        let readers = vec![
            collect(child.stdout.take().expect("piped stdout"), &stdout),
            collect(child.stderr.take().expect("piped stderr"), &stderr),
        ];
        Self {
            command: format!("{cmd:?}"),
            child,
            stdout,
            stderr,
            readers,
        }
    }

    /// The program's pid, which is also its process group and session.
    pub fn pid(&self) -> i32 {
        self.child.id() as i32
    }

    fn text(&self) -> (String, String) {
        let read = |b: &Collected| {
            String::from_utf8_lossy(&b.lock().unwrap_or_else(|p| p.into_inner())).into_owned()
        };
        (read(&self.stdout), read(&self.stderr))
    }

    /// Waits until stdout or stderr holds `text`, and returns when it did.
    /// Panics, after killing everything, if it does not within `limit` or
    /// the program ends first.
    pub fn wait_for(&mut self, text: &str, limit: Duration) -> Instant {
        let start = Instant::now();
        loop {
            // Whether it ended first, then its output: what it wrote just
            // before it ended may still be in the pipes, so read them out.
            let ended = matches!(self.child.try_wait(), Ok(Some(_)));
            if ended {
                self.drain();
            }
            let (out, err) = self.text();
            if out.contains(text) || err.contains(text) {
                return Instant::now();
            }
            if ended || start.elapsed() > limit {
                self.kill_session();
                panic!(
                    "{}: {text:?} did not appear{}\n--- stdout\n{out}\n--- stderr\n{err}",
                    self.command,
                    if ended {
                        " before it ended"
                    } else {
                        " in time"
                    }
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Once the program has ended: waits, up to 2 s, for the readers to reach
    /// the end of its pipes. A process of the session that outlived the
    /// program may hold them open: do not wait for it to close them.
    fn drain(&self) {
        let until = Instant::now() + Duration::from_secs(2);
        while self.readers.iter().any(|r| !r.is_finished()) && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Sends `signal` to the program's process group: SIGINT is Ctrl-C.
    pub fn signal_group(&self, signal: i32) {
        // SAFETY: kill only sends a signal.
        unsafe { libc::kill(-self.pid(), signal) };
    }

    /// The pid of MPI rank `rank` among the program's processes.
    pub fn mpi_rank_pid(&self, rank: usize) -> Option<i32> {
        let wanted = format!("OMPI_COMM_WORLD_RANK={rank}");
        session_processes(self.pid())
            .into_iter()
            .find_map(|(pid, _)| {
                let environ = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
                environ
                    .split(|&b| b == 0)
                    .any(|var| var == wanted.as_bytes())
                    .then_some(pid)
            })
    }

    /// Waits for the program to end and returns its output. If it has not
    /// ended within `limit`, kills it and everything it started, and panics.
    pub fn finish(mut self, limit: Duration) -> Output {
        let start = Instant::now();
        let status = loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                break status;
            }
            if start.elapsed() > limit {
                self.kill_session();
                let _ = self.child.wait();
                let (out, err) = self.text();
                panic!(
                    "{} did not finish within {limit:?}: killed.\n--- stdout\n{out}\n--- stderr\n{err}",
                    self.command
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        self.drain();
        let (stdout, stderr) = self.text();
        Output {
            status,
            stdout: stdout.into_bytes(),
            stderr: stderr.into_bytes(),
        }
    }

    fn kill_session(&self) {
        for (pid, _) in session_processes(self.pid()) {
            // SAFETY: kill only sends a signal.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
}

/// The processes of session `session` (zombies too): pid and a description
/// (`pid comm state`) from `/proc/<pid>/stat`.
pub fn session_processes(session: i32) -> Vec<(i32, String)> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| {
            let pid: i32 = entry.ok()?.file_name().to_str()?.parse().ok()?;
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
            // pid (comm) state ppid pgrp session ...; comm may hold spaces.
            let (head, rest) = stat.rsplit_once(')')?;
            let comm = head.split_once('(')?.1;
            let fields: Vec<&str> = rest.split_whitespace().collect();
            let sid: i32 = fields.get(3)?.parse().ok()?;
            (sid == session).then(|| (pid, format!("{pid} {comm} {}", fields[0])))
        })
        .collect()
}

/// The processes still in `session` after up to `grace` (a process that has
/// just exited may stay a zombie until its parent or init collects it).
pub fn processes_left(session: i32, grace: Duration) -> Vec<String> {
    let until = Instant::now() + grace;
    loop {
        let left = session_processes(session);
        if left.is_empty() || Instant::now() > until {
            return left.into_iter().map(|(_, text)| text).collect();
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Entries of `dir` whose names start with one of `prefixes`: what a run
/// must not leave behind (socket directories, build directories).
pub fn leftovers(dir: &Path, prefixes: &[&str]) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|name| prefixes.iter().any(|p| name.starts_with(p)))
                .collect()
        })
        .unwrap_or_default()
}

/// A process id that is free now: a child's that has exited and been
/// collected. For directories "left by a process that is gone".
pub fn dead_pid() -> u32 {
    let mut child = Command::new("true").spawn().expect("start `true`");
    let pid = child.id();
    let _ = child.wait();
    pid
}

/// The name of a directory that a process of this host, now gone, made with
/// `prefix` (see [`cleanup::owner_prefix`](common::cleanup::owner_prefix)):
/// what a killed run leaves behind.
pub fn stale_dir_name(prefix: &str) -> String {
    let mine = common::cleanup::owner_prefix(prefix);
    let this_host = mine.trim_end_matches(&format!("{}-", std::process::id()));
    format!("{this_host}{}-AbC123", dead_pid())
}

/// What rank `rank` of `ranks` says when Ctrl-C stops it: in thread mode the
/// process gets SIGINT; under mpirun, mpirun gets it and sends the ranks SIGTERM.
pub fn stopped_by_ctrl_c(rank: usize, ranks: usize) -> String {
    let signal = if mpi_build() {
        "SIGTERM"
    } else {
        "SIGINT (Ctrl-C)"
    };
    format!("[rank {rank}/{ranks}] stopped by {signal}")
}

/// How long a run may take to end once a rank has gone wrong: the fault
/// matrix's bound (docs/src/testing.md).
pub const FAULT_LIMIT: Duration = Duration::from_secs(5);

/// What a fault-matrix case does to the running program once its trigger
/// line has appeared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Disturb {
    /// Nothing: the fault is already asked for (`SYMMEM_TEST_FAULT`).
    Nothing,
    /// SIGINT to the program's process group, as Ctrl-C in a terminal, this
    /// long after the trigger (for a run that is busy, not stuck, then).
    CtrlC(Duration),
    /// `kill -9` of this MPI rank's process.
    KillMpiRank(usize),
}

/// How a fault-matrix case ended.
#[derive(Debug)]
pub struct FaultEnd {
    pub output: Output,
    /// From the fault (the trigger line, or the signal) to the end of the program.
    pub after_trigger: Duration,
    /// Processes of the run still there (zombies included).
    pub processes_left: Vec<String>,
    /// Socket or build directories still there.
    pub dirs_left: Vec<String>,
}

/// Runs `cmd` for the fault matrix: with `TMPDIR` pointing at a fresh
/// directory (where lesson 04 makes its socket directories), waits up to
/// `startup` for `trigger` in its output, disturbs it, and waits for the end.
/// `watch` adds directories to check for entries starting with a prefix
/// (lesson 05's cache and its `.build-` directories).
pub fn fault_case(
    cmd: &mut Command,
    trigger: &str,
    disturb: Disturb,
    startup: Duration,
    watch: &[(&Path, &str)],
) -> FaultEnd {
    let tmp = tempfile::tempdir().expect("a temporary directory");
    cmd.env("TMPDIR", tmp.path()).env_remove("XDG_RUNTIME_DIR");
    let mut started = Started::new(cmd);
    let session = started.pid();
    let mut triggered = started.wait_for(trigger, startup);
    match disturb {
        Disturb::Nothing => {}
        Disturb::CtrlC(after) => {
            std::thread::sleep(after);
            triggered = Instant::now();
            started.signal_group(libc::SIGINT);
        }
        Disturb::KillMpiRank(rank) => {
            let pid = started
                .mpi_rank_pid(rank)
                .unwrap_or_else(|| panic!("no process of MPI rank {rank} found"));
            // SAFETY: kill only sends a signal.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
    }
    let output = started.finish(FAULT_LIMIT * 6);
    let after_trigger = triggered.elapsed();
    if mpi_build() && shares_gpus(cmd) {
        wait_until_mps_serves_again(Duration::from_secs(30));
    }
    let mut dirs_left = leftovers(tmp.path(), &["vmm-raw-"]);
    for (dir, prefix) in watch {
        dirs_left.extend(leftovers(dir, &[prefix]));
    }
    FaultEnd {
        output,
        after_trigger,
        processes_left: processes_left(session, Duration::from_secs(2)),
        dirs_left,
    }
}

/// Does `cmd` ask for ranks to share GPUs (`NCCL_MULTI_RANK_GPU_ENABLE`
/// on, as NCCL reads it, set on the command or inherited)?
fn shares_gpus(cmd: &Command) -> bool {
    use common::placement::{MultiRank, MULTI_RANK_VARIABLE};
    let variable = std::ffi::OsStr::new(MULTI_RANK_VARIABLE);
    let value = match cmd.get_envs().find(|(key, _)| *key == variable) {
        Some((_, value)) => value.map(std::ffi::OsStr::to_os_string),
        None => std::env::var_os(variable),
    };
    MultiRank::read(value.as_deref()).is_on()
}

/// After a fault case whose MPI ranks shared a GPU through an MPS server:
/// waits until a new process can use the GPU again, so that the next test
/// does not fail for this one. A rank killed while its kernel runs is a
/// "fatal GPU error" to the MPS server: it tears down that job's clients,
/// resets the GPU, and the first clients that connect next can fail at their
/// first CUDA call ("unspecified launch failure"). The probe is `gpu-ready`,
/// this crate's binary, beside the binaries under test; tried once a second
/// until it succeeds twice in a row (one success may come just before the
/// server starts its teardown) or `limit` passes (then the next test reports
/// what it finds). Without the probe (a `cargo test -p <lesson>` builds no
/// testkit binary) it says so where the test output shows it, and waits
/// a fixed 10 s.
fn wait_until_mps_serves_again(limit: Duration) {
    use std::io::Write;
    // As `binary` finds a binary under test; else beside the workspace's
    // binaries, one level above the test binaries in target/<profile>/deps/
    // (in a cargo build and in an unpacked nextest archive).
    let beside = std::env::current_exe()
        .ok()
        .and_then(|exe| Some(exe.parent()?.parent()?.join("gpu-ready")))
        .unwrap_or_default();
    let probe = binary("gpu-ready", &beside.to_string_lossy());
    // Written past libtest's capture, as `skip` writes: a passing test's
    // eprintln! is never shown.
    let say = |text: String| {
        let _ = writeln!(std::io::stderr().lock(), "{text}");
    };
    if !probe.is_file() {
        say(
            "note: no gpu-ready binary beside the tests (cargo build -p testkit --bin gpu-ready): \
             waiting 10 s for the MPS server instead"
                .into(),
        );
        std::thread::sleep(Duration::from_secs(10));
        return;
    }
    let start = Instant::now();
    let (mut last, mut in_a_row) = (String::new(), 0);
    while start.elapsed() < limit {
        match Command::new(&probe).output() {
            Ok(out) if out.status.success() => {
                in_a_row += 1;
                if in_a_row == 2 {
                    return;
                }
            }
            Ok(out) => {
                in_a_row = 0;
                last = String::from_utf8_lossy(&out.stderr).trim().to_owned();
            }
            Err(e) => {
                in_a_row = 0;
                last = format!("{}: {e}", probe.display());
            }
        }
        std::thread::sleep(Duration::from_secs(1));
    }
    say(format!(
        "note: the GPU was not usable by a new process {limit:?} after the fault case: {last}"
    ));
}

impl FaultEnd {
    /// What every fault case must do: end within [`FAULT_LIMIT`] of the
    /// trigger, exit non-zero, print `names` (a message naming the rank), and
    /// leave no process, socket directory or build directory behind.
    pub fn assert_clean(&self, names: &str) {
        let all = describe(&self.output);
        assert!(
            self.after_trigger < FAULT_LIMIT,
            "took {:?} after the trigger, more than {FAULT_LIMIT:?}\n{all}",
            self.after_trigger
        );
        assert!(
            !self.output.status.success(),
            "a run with a fault exited 0\n{all}"
        );
        assert!(
            String::from_utf8_lossy(&self.output.stderr).contains(names)
                || String::from_utf8_lossy(&self.output.stdout).contains(names),
            "no {names:?} in the output\n{all}"
        );
        assert!(
            self.processes_left.is_empty(),
            "processes left behind: {:?}\n{all}",
            self.processes_left
        );
        assert!(
            self.dirs_left.is_empty(),
            "directories left behind: {:?}\n{all}",
            self.dirs_left
        );
    }
}

/// The marker before a README's transcript for `ranks` ranks:
/// `<!-- transcript: 2 ranks -->`, `<!-- transcript: 1 rank -->`.
pub fn transcript_marker(ranks: usize) -> String {
    format!("<!-- transcript: {ranks} rank{} -->", common::plural(ranks))
}

/// The marker before a README's transcript for `ranks` ranks sharing
/// `gpus` GPUs: `<!-- transcript: 2 ranks on 1 GPU -->`.
pub fn transcript_marker_on(ranks: usize, gpus: usize) -> String {
    format!(
        "<!-- transcript: {ranks} rank{} on {gpus} GPU{} -->",
        common::plural(ranks),
        common::plural(gpus)
    )
}

/// The expected transcript for `ranks` ranks: the fenced block after
/// [`transcript_marker`], one entry per line.
pub fn readme_transcript(readme: &str, ranks: usize) -> Option<Vec<String>> {
    block_after(readme, &transcript_marker(ranks))
}

/// The expected transcript for `ranks` ranks sharing `gpus` GPUs: the
/// fenced block after [`transcript_marker_on`].
pub fn readme_transcript_on(readme: &str, ranks: usize, gpus: usize) -> Option<Vec<String>> {
    block_after(readme, &transcript_marker_on(ranks, gpus))
}

/// The one-GPU-per-rank transcript turned into what the same program prints
/// when its ranks share `gpus` GPUs (round robin): the launch line of
/// `placement::thread_launch_text`, and `device d` in a rank's line as
/// `device d mod gpus` (d is the rank in a one-GPU-per-rank run).
pub fn as_shared_transcript(expected: &[String], gpus: usize) -> Vec<String> {
    use common::placement::{thread_launch_text, MultiRank, Placement};
    expected
        .iter()
        .map(|line| {
            if let Some(rest) = line.strip_prefix("Launch: ") {
                let ranks: usize = rest
                    .split(' ')
                    .next()
                    .and_then(|n| n.parse().ok())
                    .unwrap_or(0);
                let placement = Placement {
                    ranks_here: ranks,
                    gpus,
                };
                return format!(
                    "Launch: {}",
                    thread_launch_text(&placement, &MultiRank::On("1".into()))
                );
            }
            let Some(at) = line.find("device ") else {
                return line.clone();
            };
            let digits: String = line[at + 7..]
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            match digits.parse::<usize>() {
                Ok(device) => format!(
                    "{}device {}{}",
                    &line[..at],
                    device % gpus.max(1),
                    &line[at + 7 + digits.len()..]
                ),
                Err(_) => line.clone(),
            }
        })
        .collect()
}

fn block_after(readme: &str, marker: &str) -> Option<Vec<String>> {
    let after = &readme[readme.find(marker)? + marker.len()..];
    let fence_start = after.find("```")?;
    let body = &after[fence_start..];
    let body = &body[body.find('\n')? + 1..];
    let end = body.find("\n```")?;
    Some(body[..end].lines().map(str::to_string).collect())
}

/// Does `line` match `pattern`, where `[..]` in the pattern matches any text?
pub fn line_matches(pattern: &str, line: &str) -> bool {
    let parts: Vec<&str> = pattern.split("[..]").collect();
    if parts.len() == 1 {
        return pattern == line;
    }
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if !line.starts_with(first) || line.len() < first.len() + last.len() || !line.ends_with(last) {
        return false;
    }
    let mut rest = &line[first.len()..line.len() - last.len()];
    for part in &parts[1..parts.len() - 1] {
        match rest.find(part) {
            Some(at) => rest = &rest[at + part.len()..],
            None => return false,
        }
    }
    true
}

/// Compares output with an expected transcript line by line; the error shows
/// both in full with the first difference marked.
pub fn compare_transcript(expected: &[String], actual: &str) -> Result<(), String> {
    let actual: Vec<&str> = actual.lines().collect();
    let first_bad =
        (0..expected.len().max(actual.len())).find(|&i| match (expected.get(i), actual.get(i)) {
            (Some(pattern), Some(line)) => !line_matches(pattern, line),
            _ => true,
        });
    let Some(bad) = first_bad else { return Ok(()) };
    let mut report = format!("transcript differs at line {}\n--- expected\n", bad + 1);
    for (i, line) in expected.iter().enumerate() {
        report.push_str(&format!("{}{line}\n", if i == bad { ">>" } else { "  " }));
    }
    report.push_str("--- actual\n");
    for (i, line) in actual.iter().enumerate() {
        report.push_str(&format!("{}{line}\n", if i == bad { ">>" } else { "  " }));
    }
    Err(report)
}

/// The thread-mode transcript turned into the MPI one: only the launch line
/// differs (`placement::mpi_launch_text`'s, one node).
pub fn as_mpi_transcript(expected: &[String]) -> Vec<String> {
    expected
        .iter()
        .map(|line| match line.strip_prefix("Launch: ") {
            Some(rest) => format!("Launch: {}", mpi_launch_of(rest)),
            None => line.clone(),
        })
        .collect()
}

/// The MPI launch text for a thread-mode one: `2 ranks, one thread per
/// GPU`, or `4 ranks on 1 GPU, one thread each (NCCL_MULTI_RANK_GPU_ENABLE=1)`.
fn mpi_launch_of(thread_text: &str) -> String {
    let words: Vec<&str> = thread_text.split(' ').collect();
    let ranks: usize = words.first().and_then(|n| n.parse().ok()).unwrap_or(0);
    match (words.get(2), words.get(3)) {
        (Some(&"on"), Some(gpus)) => {
            let gpus: usize = gpus.parse().unwrap_or(1).max(1);
            let setting = thread_text
                .rsplit_once('(')
                .map_or("", |(_, s)| s.trim_end_matches(')'));
            let multi_rank = common::placement::MultiRank::read(
                setting
                    .split_once('=')
                    .map(|(_, v)| std::ffi::OsStr::new(v)),
            );
            common::placement::mpi_launch_text(ranks, 1, ranks.div_ceil(gpus), &multi_rank)
        }
        _ => thread_text.replace("one thread per GPU", "one MPI process per GPU, 1 node"),
    }
}

/// Asserts that `set_var` and `remove_var` appear in `files` (outside their
/// `#[cfg(test)]` part and comments) only inside the functions named in
/// `before_threads`, which run before any thread starts: in a rank's body
/// the CUDA driver (and MPI) already run threads that may read the
/// environment, and `set_var` there is undefined behaviour (`unsafe` from
/// edition 2024). Also asserts that the scan found at least one call.
pub fn assert_set_var_only_before_threads(files: &[PathBuf], before_threads: &[&str]) {
    let mut found = 0;
    let mut wrong = Vec::new();
    for file in files {
        let text = std::fs::read_to_string(file).unwrap();
        // The tests of a file come last; they may set variables of their own.
        let text = text.split("#[cfg(test)]").next().unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        for (at, line) in lines.iter().enumerate() {
            let sets = line.contains("set_var(") || line.contains("remove_var(");
            if line.trim_start().starts_with("//") || !sets {
                continue;
            }
            found += 1;
            let function = enclosing_fn(&lines, at).unwrap_or_default();
            if !before_threads.contains(&function.as_str()) {
                wrong.push(format!(
                    "{}:{}: set_var or remove_var in {function}",
                    file.display(),
                    at + 1
                ));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "set_var or remove_var where threads may exist:\n{}",
        wrong.join("\n")
    );
    assert!(
        found > 0,
        "no set_var found at all: is the scan still looking?"
    );
}

/// The name of the function around line `at` of `lines`.
fn enclosing_fn(lines: &[&str], at: usize) -> Option<String> {
    lines[..=at].iter().rev().find_map(|line| {
        let line = line.trim_start();
        let rest = line
            .strip_prefix("pub fn ")
            .or_else(|| line.strip_prefix("fn "))
            .or_else(|| line.strip_prefix("pub(crate) fn "))?;
        Some(rest.split(['(', '<']).next()?.trim().to_string())
    })
}

/// `// Step N: text` comments of a source file, as `Step N: text`.
pub fn source_steps(source: &str) -> Vec<String> {
    source
        .lines()
        .filter_map(|line| line.trim().strip_prefix("// "))
        .filter(|text| is_step(text))
        .map(str::to_string)
        .collect()
}

/// `### Step N: text` headings of a README, as `Step N: text`.
pub fn readme_steps(readme: &str) -> Vec<String> {
    readme
        .lines()
        .filter_map(|line| line.strip_prefix("### "))
        .filter(|text| is_step(text))
        .map(str::to_string)
        .collect()
}

fn is_step(text: &str) -> bool {
    text.strip_prefix("Step ")
        .and_then(|rest| rest.split_once(": "))
        .is_some_and(|(n, _)| n.parse::<u32>().is_ok())
}

/// Checks that the README walk-through and the `// Step N:` comments agree
/// word for word, and that steps are numbered 1, 2, 3, ...
pub fn compare_steps(readme: &str, source: &str) -> Result<(), String> {
    let (in_readme, in_source) = (readme_steps(readme), source_steps(source));
    if in_source.is_empty() {
        return Err("main.rs has no `// Step N: ...` comments".into());
    }
    for (i, step) in in_source.iter().enumerate() {
        if !step.starts_with(&format!("Step {}: ", i + 1)) {
            return Err(format!("main.rs: step {} is numbered wrong: {step}", i + 1));
        }
    }
    if in_readme != in_source {
        return Err(format!(
            "README walk-through and main.rs steps differ\n--- README (### headings)\n{}\n--- main.rs (// comments)\n{}",
            in_readme.join("\n"),
            in_source.join("\n")
        ));
    }
    Ok(())
}

/// Builds a stand-in CUDA driver in `dir` from C `source` (the driver calls
/// a test needs, e.g. `cuInit`), as `libcuda.so` and `libcuda.so.1`, the
/// names cudarc looks for; put `dir` first on `LD_LIBRARY_PATH`. `None`
/// without a C compiler (see [`build_c_library`]).
pub fn build_fake_driver(dir: &Path, source: &str) -> Option<()> {
    build_c_library(dir, "libcuda.so", source, &[])?;
    std::fs::copy(dir.join("libcuda.so"), dir.join("libcuda.so.1")).ok()?;
    Some(())
}

/// Builds a stand-in NCCL (a shared library with only `ncclGetVersion`,
/// returning `version_code`) named `name` in `dir`, with the system C compiler
/// (`$CC`, else `cc`). For the preflight tests.
pub fn build_fake_nccl(dir: &Path, name: &str, version_code: u32) -> PathBuf {
    let source =
        format!("int ncclGetVersion(int *version) {{ *version = {version_code}; return 0; }}\n");
    build_c_library(dir, name, &source, &[]).unwrap_or_else(|| {
        panic!("these tests build a stand-in libnccl with a C compiler ($CC, else cc), and none starts")
    })
}

/// Compiles the C `source` into the shared library `dir/name` with the system
/// C compiler (`$CC`, else `cc`), `extra` coming last on its command line
/// (`-L`, `-l`). `None`, with a note on stderr, if there is no compiler: the
/// caller's test then skips. A compile error fails the test.
pub fn build_c_library(dir: &Path, name: &str, source: &str, extra: &[&str]) -> Option<PathBuf> {
    let source_path = dir.join(format!("{name}.c"));
    std::fs::write(&source_path, source).expect("write the C source");
    let output = dir.join(name);
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let status = match Command::new(&cc)
        .args(["-shared", "-fPIC", "-o"])
        .arg(&output)
        .arg(&source_path)
        .args(extra)
        .status()
    {
        Ok(status) => status,
        Err(err) => {
            eprintln!("skipped: this test builds a stand-in library with a C compiler, and `{cc}` does not start ({err}); install gcc or set CC");
            return None;
        }
    };
    assert!(
        status.success(),
        "{cc} failed to build {}",
        output.display()
    );
    Some(output)
}

/// Skips the calling test for want of something from outside the repository
/// (staged wheels, Triton, NVSHMEM): writes one line, `skipped: <test>:
/// needs <needs>`, and returns, for the caller to `return` after it.
///
/// libtest has no skipped result, and it hides what a passing test prints
/// with `eprintln!`; a skip said so was counted as a pass in silence. This
/// line goes to the process's stderr directly, past that capture, so a plain
/// `cargo test` shows it beside the test's `ok` (nextest shows it with
/// `--no-capture`, or `--success-output immediate`).
///
/// Where the environment sets `required` to `1` the test fails instead: CI
/// sets `DEVICE_BUILD_WHEELS_REQUIRED=1` and `TRITON_BUILD_REQUIRED=1`
/// (.ci/run) after staging them, and there a skip would hide a broken setup.
pub fn skip(needs: &str, required: Option<&str>) {
    use std::io::Write;
    let test = std::thread::current()
        .name()
        .filter(|name| *name != "main")
        .unwrap_or("a test")
        .to_string();
    if let Some(var) = required {
        assert!(
            std::env::var_os(var).is_none_or(|value| value != "1"),
            "{test} needs {needs}, and {var}=1 says it must not skip"
        );
    }
    let _ = writeln!(std::io::stderr().lock(), "skipped: {test}: needs {needs}");
}

/// An `Output` in full, for assertion messages: exit status, stdout, stderr.
pub fn describe(out: &Output) -> String {
    format!(
        "status {:?}\n--- stdout\n{}--- stderr\n{}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The tests every lesson has, for the lesson binary `$name` of the calling
/// crate, and the `lesson()` they use (for the crate's own further tests):
///
/// * the README's walk-through equals the `// Step N:` comments;
/// * without a usable GPU the lesson exits 2 and says why;
/// * (ignored, needs 2 GPUs) its output equals the README's transcript for
///   `GPU_TEST_RANKS` ranks, and more ranks than GPUs exits 2.
#[macro_export]
macro_rules! lesson_tests {
    ($name:literal) => {
        fn lesson() -> $crate::LessonUnderTest {
            $crate::LessonUnderTest::new(
                $name,
                env!(concat!("CARGO_BIN_EXE_", $name)),
                env!("CARGO_MANIFEST_DIR"),
            )
        }

        #[test]
        fn readme_walkthrough_matches_the_step_comments() {
            lesson().assert_walkthrough_matches_source();
        }

        #[test]
        fn without_a_gpu_it_exits_2_and_says_why() {
            lesson().assert_exits_2_without_a_gpu();
        }

        #[test]
        #[ignore = "needs 2 GPUs"]
        fn transcript_matches_the_readme() {
            lesson().assert_transcript($crate::gpu_ranks(), &[]);
        }

        #[test]
        #[ignore = "needs 2 GPUs"]
        fn more_ranks_than_gpus_exits_2() {
            lesson().assert_more_ranks_than_gpus_exits_2();
        }
    };
}

/// How a program may end on emulated nodes
/// ([`LessonUnderTest::assert_on_two_emulated_nodes`]): exit code 0 with
/// `verified` on stdout (if `Some`), or exit code 2 with one of `refused` on
/// stderr (if not empty). Anything else, exit code 1 above all, fails.
#[derive(Debug, Clone, Copy)]
pub struct Emulated {
    pub verified: Option<&'static str>,
    pub refused: &'static [&'static str],
}

/// The refusals a kernel on the device API's LSA half may end in across
/// nodes, by NCCL release: no symmetric memory at `ncclDevCommCreate`
/// (2.28), a NULL window at registration (2.29+ without GIN), or the
/// lessons' own check of the LSA team against the world.
pub const LSA_ACROSS_NODES: &[&str] = &["LSA team holds", "symmetric memory", "NULL window"];

/// A lesson binary and its crate, for the tests every lesson shares.
pub struct LessonUnderTest {
    pub name: &'static str,
    pub binary: PathBuf,
    pub dir: PathBuf,
}

impl LessonUnderTest {
    /// `name` is the binary's name; pass `env!("CARGO_BIN_EXE_<name>")` and
    /// `env!("CARGO_MANIFEST_DIR")`. Both are looked up at run time first, so
    /// a nextest archive built on one machine runs on another.
    pub fn new(name: &'static str, cargo_binary: &str, cargo_manifest_dir: &str) -> Self {
        Self {
            name,
            binary: binary(name, cargo_binary),
            dir: crate_dir(cargo_manifest_dir),
        }
    }

    pub fn readme(&self) -> String {
        read(&self.dir.join("README.md"))
    }

    pub fn source(&self) -> String {
        read(&self.dir.join("src/main.rs"))
    }

    /// The README's walk-through headings equal the `// Step N:` comments.
    pub fn assert_walkthrough_matches_source(&self) {
        if let Err(report) = compare_steps(&self.readme(), &self.source()) {
            panic!("{}: {report}", self.name);
        }
    }

    /// A command for the lesson with `ranks` ranks: `NTHREADS=ranks lesson` in
    /// a thread-mode build, `mpirun -np ranks lesson` in an MPI build.
    ///
    /// With fewer GPUs than `ranks`, the ranks share them
    /// ([`share_gpus_if_needed`]).
    pub fn command(&self, ranks: usize) -> Command {
        let mut cmd = if mpi_build() {
            mpirun(ranks, &self.binary)
        } else {
            let mut cmd = Command::new(&self.binary);
            cmd.env("NTHREADS", ranks.to_string());
            keep_multicast_off(&mut cmd);
            cmd
        };
        share_gpus_if_needed(&mut cmd, ranks);
        cmd
    }

    /// Runs the lesson (see [`command`](Self::command)) with `args`, within `limit`.
    pub fn run(&self, ranks: usize, args: &[&str], limit: Duration) -> Output {
        run_with_timeout(self.command(ranks).args(args), limit)
    }

    /// A fault-matrix case of the lesson on `ranks` ranks (threads, or mpirun
    /// in an MPI build), with `SYMMEM_TEST_FAULT=fault` if given: see
    /// [`fault_case`]. Allows 300 s before `trigger` (nvcc may be building).
    pub fn fault(
        &self,
        ranks: usize,
        fault: Option<&str>,
        args: &[&str],
        trigger: &str,
        disturb: Disturb,
        watch: &[(&Path, &str)],
    ) -> FaultEnd {
        let mut cmd = self.command(ranks);
        cmd.args(args);
        if let Some(fault) = fault {
            cmd.env(common::fault::VARIABLE, fault);
        }
        fault_case(&mut cmd, trigger, disturb, Duration::from_secs(300), watch)
    }

    /// The prefix of this run's messages about `rank`: `[rank r/N] `.
    pub fn rank_prefix(rank: usize, ranks: usize) -> String {
        format!("[rank {rank}/{ranks}] ")
    }

    /// Runs the lesson on `ranks` GPUs and compares stdout with the README's
    /// transcript for that many ranks (thread mode's; in an MPI build the
    /// launch line is swapped for MPI's).
    ///
    /// With fewer GPUs here than `ranks` the ranks share them: the README's
    /// transcript for that placement if it has one
    /// ([`transcript_marker_on`]), else its `ranks`-rank transcript with the
    /// launch line and the device numbers this placement prints
    /// ([`as_shared_transcript`]).
    pub fn assert_transcript(&self, ranks: usize, args: &[&str]) {
        let readme = self.readme();
        let gpus = visible_gpus();
        let shared = (ranks > gpus && gpus > 0)
            .then(|| readme_transcript_on(&readme, ranks, gpus))
            .flatten();
        let expected = shared
            .or_else(|| {
                let block = readme_transcript(&readme, ranks)?;
                Some(if ranks > gpus && gpus > 0 {
                    as_shared_transcript(&block, gpus)
                } else {
                    block
                })
            })
            .unwrap_or_else(|| {
                panic!(
                    "{}: README has no `{}` block",
                    self.name,
                    transcript_marker(ranks)
                )
            });
        let expected = if mpi_build() {
            as_mpi_transcript(&expected)
        } else {
            expected
        };
        let (stdout, stderr) = self.run_to_success(ranks, args);
        if let Err(report) = compare_transcript(&expected, &stdout) {
            panic!("{}: {report}\n--- stderr\n{stderr}", self.name);
        }
    }

    /// With no usable GPU the lesson exits 2 and says why, without panicking:
    /// on a machine without a driver it names the missing driver; on a GPU
    /// machine, run with `CUDA_VISIBLE_DEVICES=""`, it says it sees no GPU.
    pub fn assert_exits_2_without_a_gpu(&self) {
        let mut cmd = Command::new(&self.binary);
        cmd.env("CUDA_VISIBLE_DEVICES", "").env_remove("NTHREADS");
        let out = run_with_timeout(&mut cmd, Duration::from_secs(60));
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{}: {stderr}", self.name);
        assert!(
            stderr.contains(&format!("error: {} cannot run on this system", self.name)),
            "{stderr}"
        );
        let reason = if cuda_driver_present() {
            "the CUDA driver sees no GPU"
        } else {
            "no CUDA driver"
        };
        assert!(stderr.contains(reason), "expected {reason:?} in:\n{stderr}");
        assert!(stderr.contains("fix: "), "{stderr}");
        assert!(!stderr.contains("panicked"), "{stderr}");
    }

    /// More ranks than GPUs (one more than this machine has): exit 2 with the
    /// count and the fix, before any NCCL call, within 5 s also under mpirun.
    /// Without `NCCL_MULTI_RANK_GPU_ENABLE`, that is: the ranks may not
    /// share a GPU, and the fix names the variable or the NCCL release
    /// that allows it.
    pub fn assert_more_ranks_than_gpus_exits_2(&self) {
        let gpus = visible_gpus();
        let ranks = gpus + 1;
        let start = Instant::now();
        let mut cmd = self.command(ranks);
        cmd.env_remove(common::placement::MULTI_RANK_VARIABLE);
        let out = run_with_timeout(&mut cmd, Duration::from_secs(120));
        let elapsed = start.elapsed();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{}: {stderr}", self.name);
        let reason = if mpi_build() {
            format!("{ranks} MPI processes share this node")
        } else {
            format!("NTHREADS={ranks} asks for {ranks} ranks")
        };
        assert!(
            stderr.contains(&reason),
            "expected {reason:?} in:\n{stderr}"
        );
        assert!(
            stderr.contains("NCCL_MULTI_RANK_GPU_ENABLE=1"),
            "the fix names the variable or the release:\n{stderr}"
        );
        assert!(
            elapsed < Duration::from_secs(5),
            "{}: refusing {ranks} ranks took {elapsed:?}",
            self.name
        );
    }
}

impl LessonUnderTest {
    /// Runs the program (see [`run`](Self::run)) and asserts exit code 0;
    /// returns its stdout and stderr.
    pub fn run_to_success(&self, ranks: usize, args: &[&str]) -> (String, String) {
        let out = self.run(ranks, args, Duration::from_secs(300));
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        );
        assert_eq!(
            out.status.code(),
            Some(0),
            "{} failed\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
            self.name
        );
        (stdout, stderr)
    }

    /// `mpirun -np ranks tools/emulate-nodes <lesson>`: the ranks on
    /// emulated nodes of `per_node` ranks each (NCCL_HOSTID per node, see
    /// the wrapper and the book's "Beyond one node"). MPI builds only.
    pub fn emulated_nodes_command(&self, ranks: usize, per_node: usize) -> Command {
        let wrapper = self.dir.join("../tools/emulate-nodes");
        let mut cmd = mpirun(ranks, &wrapper);
        cmd.arg(&self.binary)
            .env("EMULATED_RANKS_PER_NODE", per_node.to_string());
        // MPI sees one host, whose GPUs all the "nodes" share.
        share_gpus_if_needed(&mut cmd, ranks);
        cmd
    }

    /// Runs the program on 2 emulated nodes (`ranks` / 2 ranks each) with
    /// `args`, and checks that it ends as `outcome` allows: verified, or
    /// refused with exit code 2 and a reason. Never exit code 1: a wrong
    /// answer across nodes is the defect this looks for. Returns (exit code,
    /// stdout, stderr). In a thread-mode build it cannot emulate (one
    /// process, one environment) and returns `None`.
    pub fn assert_on_two_emulated_nodes(
        &self,
        ranks: usize,
        args: &[&str],
        outcome: Emulated,
    ) -> Option<(i32, String, String)> {
        if !mpi_build() {
            eprintln!(
                "skipped: {} on emulated nodes needs the MPI build (--features mpi)",
                self.name
            );
            return None;
        }
        assert!(
            ranks >= 2 && ranks.is_multiple_of(2),
            "2 emulated nodes need an even number of ranks, not {ranks}"
        );
        let mut cmd = self.emulated_nodes_command(ranks, ranks / 2);
        let out = run_with_timeout(cmd.args(args), Duration::from_secs(300));
        let code = out.status.code().unwrap_or(-1);
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        );
        let context = format!(
            "{} {args:?} on 2 emulated nodes: exit {code}\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
            self.name
        );
        match (code, outcome.verified) {
            (0, Some(key)) => assert!(stdout.contains(key), "{key:?} missing: {context}"),
            (2, _) if !outcome.refused.is_empty() => assert!(
                outcome.refused.iter().any(|reason| stderr.contains(reason)),
                "none of {:?} in the refusal: {context}",
                outcome.refused
            ),
            _ => panic!("not an outcome allowed here ({outcome:?}): {context}"),
        }
        Some((code, stdout, stderr))
    }

    /// Runs the program with NCCL's tuning log on and returns what NCCL
    /// logged, stdout and stderr together: which algorithm or kernel ran.
    ///
    /// NCCL writes its log to files of its own (`NCCL_DEBUG_FILE`, one per
    /// process), read after the run: on stdout its lines and the program's
    /// interleave within a line when several ranks print at once.
    pub fn nccl_tuning_log(&self, ranks: usize) -> String {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("a temporary directory: {e}"));
        let mut cmd = self.command(ranks);
        cmd.env("NCCL_DEBUG", "INFO")
            .env("NCCL_DEBUG_SUBSYS", "TUNING")
            .env("NCCL_DEBUG_FILE", dir.path().join("nccl.%h.%p.log"));
        let out = run_with_timeout(&mut cmd, Duration::from_secs(300));
        let mut log = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let mut files: Vec<_> = std::fs::read_dir(dir.path())
            .map(|entries| entries.filter_map(|e| e.ok()).map(|e| e.path()).collect())
            .unwrap_or_default();
        files.sort();
        for file in files {
            log.push_str(&std::fs::read_to_string(&file).unwrap_or_default());
        }
        assert_eq!(out.status.code(), Some(0), "{}: {log}", self.name);
        log
    }
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// Does NCCL load here under cudarc's names? Tests of finding NCCL elsewhere
/// (a pip wheel, `NCCL_HOME`) need a machine where it does not.
pub fn nccl_present() -> bool {
    // SAFETY: only dlopen()s and closes the candidate names.
    unsafe { cudarc::nccl::sys::is_culib_present() }
}

/// Is a CUDA driver loadable here? Tests about GPU-less machines check this.
pub fn cuda_driver_present() -> bool {
    // SAFETY: only dlopen()s and closes the candidate names.
    unsafe { cudarc::driver::sys::is_culib_present() }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A program that prints what a test waits for and ends at once: when
    /// the test sees it has ended, its last words may still be in the pipes,
    /// and `wait_for` must read them before it says they never came (the
    /// fault matrix's ranks that fail right after the barrier end this fast).
    #[test]
    fn wait_for_sees_what_a_program_printed_just_before_it_ended() {
        for _ in 0..50 {
            let mut started = Started::new(Command::new("sh").args(["-c", "echo ready"]));
            started.wait_for("ready", Duration::from_secs(10));
            let output = started.finish(Duration::from_secs(10));
            assert!(output.status.success(), "{}", describe(&output));
        }
    }

    #[test]
    fn sharing_is_read_as_nccl_reads_the_variable() {
        let variable = common::placement::MULTI_RANK_VARIABLE;
        let with = |value: &str| {
            let mut cmd = Command::new("true");
            cmd.env(variable, value);
            shares_gpus(&cmd)
        };
        assert!(with("1"));
        assert!(with("0x1"));
        assert!(!with("0"));
        assert!(!with("yes"));
        let mut removed = Command::new("true");
        removed.env_remove(variable);
        assert!(!shares_gpus(&removed));
    }

    /// Skips only when `skip_is_seen_in_a_plain_test_run` runs it, as a child.
    #[test]
    fn a_test_that_skips() {
        if std::env::var_os("TESTKIT_SKIP_DEMO").is_some() {
            skip(
                "a demonstration (TESTKIT_SKIP_DEMO)",
                Some("TESTKIT_SKIP_DEMO_REQUIRED"),
            );
        }
    }

    /// The point of `skip`: the test binary run as `cargo test` runs it (output
    /// captured) still shows the skip, named, beside the test's `ok`; and with
    /// the requirement set, the test fails.
    #[test]
    fn skip_is_seen_in_a_plain_test_run_and_fails_where_required() {
        let me = std::env::current_exe().unwrap();
        let run = |required: &str| {
            Command::new(&me)
                .args(["tests::a_test_that_skips", "--exact", "--test-threads=1"])
                .env("TESTKIT_SKIP_DEMO", "1")
                .env("TESTKIT_SKIP_DEMO_REQUIRED", required)
                .output()
                .unwrap()
        };
        let out = run("0");
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        assert!(out.status.success(), "{stdout}{stderr}");
        assert!(
            stderr.contains(
                "skipped: tests::a_test_that_skips: needs a demonstration (TESTKIT_SKIP_DEMO)\n"
            ),
            "{stdout}{stderr}"
        );
        let out = run("1");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(!out.status.success(), "{stdout}");
        assert!(
            stdout.contains("TESTKIT_SKIP_DEMO_REQUIRED=1 says it must not skip"),
            "{stdout}"
        );
    }

    #[test]
    fn wildcards_match_within_a_line() {
        assert!(line_matches(
            "NCCL [..] from [..], CUDA driver 13.0",
            "NCCL 2.28.3 from /usr/lib/libnccl.so.2.28.3, CUDA driver 13.0"
        ));
        assert!(line_matches("a[..]", "a"));
        assert!(line_matches("[..]", "anything"));
        assert!(!line_matches("NCCL [..] from", "NCCL 2.28.3 to"));
        assert!(!line_matches("ab[..]ba", "aba"));
        assert!(line_matches("exact", "exact"));
        assert!(!line_matches("exact", "exact "));
    }

    #[test]
    fn transcripts_are_found_by_rank_count() {
        let readme = "intro\n<!-- transcript: 2 ranks -->\n```text\nline one\n  line two\n```\n<!-- transcript: 4 ranks -->\n```\nfour\n```\n";
        assert_eq!(
            readme_transcript(readme, 2).unwrap(),
            vec!["line one", "  line two"]
        );
        assert_eq!(readme_transcript(readme, 4).unwrap(), vec!["four"]);
        assert!(readme_transcript(readme, 3).is_none());
        let one = "<!-- transcript: 1 rank -->\n```text\nalone\n```\n";
        assert_eq!(readme_transcript(one, 1).unwrap(), vec!["alone"]);
    }

    #[test]
    fn transcript_differences_point_at_the_line() {
        let expected = vec!["a".to_string(), "b[..]".to_string()];
        assert!(compare_transcript(&expected, "a\nbcd\n").is_ok());
        let err = compare_transcript(&expected, "a\nx\n").unwrap_err();
        assert!(err.starts_with("transcript differs at line 2"), "{err}");
        assert!(compare_transcript(&expected, "a\nb\nextra").is_err());
        assert!(compare_transcript(&expected, "a").is_err());
    }

    #[test]
    fn a_shared_gpu_changes_the_launch_line_and_the_devices() {
        let expected: Vec<String> = [
            "NCCL [..]",
            "Launch: 4 ranks, one thread per GPU",
            "  Rank 0 communicator initialized using device 0",
            "  Rank 3 communicator initialized using device 3",
            "  Rank 3 using GPU device 3",
            "All 4 ranks agree",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(
            as_shared_transcript(&expected, 1),
            [
                "NCCL [..]",
                "Launch: 4 ranks on 1 GPU, one thread each (NCCL_MULTI_RANK_GPU_ENABLE=1)",
                "  Rank 0 communicator initialized using device 0",
                "  Rank 3 communicator initialized using device 0",
                "  Rank 3 using GPU device 0",
                "All 4 ranks agree",
            ]
        );
        assert_eq!(
            as_shared_transcript(&expected, 2)[3],
            "  Rank 3 communicator initialized using device 1"
        );
        assert_eq!(
            as_mpi_transcript(&as_shared_transcript(&expected, 1))[1],
            "Launch: 4 ranks, one MPI process each, 1 node, up to 4 per GPU (NCCL_MULTI_RANK_GPU_ENABLE=1, MPS)"
        );
        let readme = "x\n<!-- transcript: 2 ranks on 1 GPU -->\n```text\nshared\n```\n\
                      <!-- transcript: 2 ranks -->\n```text\nown\n```\n";
        assert_eq!(
            readme_transcript_on(readme, 2, 1),
            Some(vec!["shared".into()])
        );
        assert_eq!(readme_transcript(readme, 2), Some(vec!["own".into()]));
        assert_eq!(readme_transcript_on(readme, 4, 1), None);
    }

    #[test]
    fn mpi_transcript_differs_only_in_the_launch_line() {
        let expected = vec![
            "NCCL x".to_string(),
            "Launch: 2 ranks, one thread per GPU".to_string(),
            "Rank".to_string(),
        ];
        let mpi = as_mpi_transcript(&expected);
        assert_eq!(mpi[1], "Launch: 2 ranks, one MPI process per GPU, 1 node");
        assert_eq!((&mpi[0], &mpi[2]), (&expected[0], &expected[2]));
    }

    #[test]
    fn steps_must_agree_word_for_word() {
        let source = "fn main() {\n    // Step 1: Bind the GPU.\n    x();\n    // Step 2: Create the communicator.\n    // Stepping stone, not a step\n}";
        let readme = "## Walk-through\n### Step 1: Bind the GPU.\ntext\n### Step 2: Create the communicator.\n";
        assert_eq!(compare_steps(readme, source), Ok(()));
        let drifted = readme.replace("Create the", "Make the");
        assert!(compare_steps(&drifted, source).is_err());
        let misnumbered = source.replace("Step 2", "Step 3");
        assert!(compare_steps(readme, &misnumbered)
            .unwrap_err()
            .contains("numbered wrong"));
    }

    #[test]
    fn hung_commands_are_killed_and_reported() {
        let result = std::panic::catch_unwind(|| {
            run_with_timeout(Command::new("sleep").arg("10"), Duration::from_millis(200));
        });
        let panic = result.unwrap_err();
        let message = panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        assert!(message.contains("did not finish"), "{message}");
    }
}
