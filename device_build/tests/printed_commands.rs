//! What a build prints is what it ran: a stand-in nvcc records the
//! directory it ran in and every argument it got, and the `note: ran:`
//! lines must name exactly those, quoted so that a shell given the line runs
//! the same command again. A cache hit names the cached files instead.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use common::NcclVersion;
use device_build::cache::BUILD_PREFIX;
use device_build::command::command_line;
use device_build::nvcc::Target;
use device_build::program;
use device_build::route::Plan;
use device_build::{CacheRoot, Source};

const KERNEL: Source = Source {
    file: "allreduce_lsa.cu",
    text: "extern \"C\" __global__ void allreduce_lsa() {}",
};

/// One call of the stand-in nvcc: where it ran and what it was given.
#[derive(Debug, PartialEq)]
struct Call {
    cwd: PathBuf,
    args: Vec<String>,
}

/// A stand-in nvcc that appends its working directory and arguments to
/// `log`, one per line, and writes its `-o` file.
fn recording_nvcc(dir: &Path, log: &Path) -> PathBuf {
    let script = format!(
        "#!/bin/sh\n\
         {{ printf 'cwd=%s\\n' \"$PWD\"; for a in \"$@\"; do printf 'arg=%s\\n' \"$a\"; done; echo end; }} >> '{}'\n\
         while [ $# -gt 0 ]; do [ \"$1\" = -o ] && out=$2; shift; done\n\
         echo built > \"$out\"\n",
        log.display()
    );
    let nvcc = dir.join("nvcc");
    fs::write(&nvcc, script).unwrap();
    fs::set_permissions(&nvcc, fs::Permissions::from_mode(0o755)).unwrap();
    nvcc
}

fn calls(log: &Path) -> Vec<Call> {
    let mut calls = Vec::new();
    let (mut cwd, mut args) = (PathBuf::new(), Vec::new());
    for line in fs::read_to_string(log).unwrap().lines() {
        if let Some(dir) = line.strip_prefix("cwd=") {
            cwd = dir.into();
        } else if let Some(arg) = line.strip_prefix("arg=") {
            args.push(arg.to_string());
        } else {
            assert_eq!(line, "end");
            calls.push(Call {
                cwd: std::mem::take(&mut cwd),
                args: std::mem::take(&mut args),
            });
        }
    }
    calls
}

fn target(nvcc: PathBuf) -> Target {
    Target {
        arch: "sm_90".into(),
        nvcc,
        nvcc_version: "Cuda compilation tools, release 13.0, V13.0.88".into(),
        // A path with a space: the printed line must quote it.
        include: "/opt/my nccl/include".into(),
        nccl: NcclVersion::new(2, 28, 3),
        library: "/usr/lib/x86_64-linux-gnu/libnccl.so.2.28.3".into(),
        defines: vec![("ALLREDUCE_THREADS".into(), "512".into())],
        kernels: vec![KERNEL],
    }
}

#[test]
fn the_printed_nvcc_commands_are_the_ones_that_ran_and_run_again_in_a_shell() {
    let tmp = tempfile::tempdir().unwrap();
    let log = tmp.path().join("calls.log");
    let target = target(recording_nvcc(tmp.path(), &log));
    let root = tmp.path().join("cache");
    let plan = Plan::Nvcc(target.clone());

    let built = program::build(&plan, &CacheRoot::Kept(root.clone())).unwrap();
    assert!(built.build.compiled);
    let ran = calls(&log);
    // The kernel, then the shim.
    assert_eq!(ran.len(), 2, "{ran:?}");
    let expected: Vec<String> = ran
        .iter()
        .map(|call| {
            format!(
                "note: ran: {}",
                command_line(&built.build.dir, &target.nvcc, &call.args)
            )
        })
        .collect();
    assert_eq!(built.command_notes(), expected);
    for call in &ran {
        // It ran in a private build directory, since renamed into the
        // cache: the printed line names where the files are now.
        let name = call.cwd.file_name().unwrap().to_string_lossy();
        assert!(name.starts_with(BUILD_PREFIX), "{}", call.cwd.display());
        assert_eq!(call.cwd.parent(), Some(root.as_path()));
        let input = call.args.last().unwrap();
        assert!(built.build.dir.join(input).is_file(), "{input}");
    }
    assert!(ran[0].args.contains(&"-I/opt/my nccl/include".to_string()));
    assert!(
        expected[0].contains("'-I/opt/my nccl/include'"),
        "{}",
        expected[0]
    );

    // The printed lines, given to a shell, make the same calls again.
    fs::remove_file(&log).unwrap();
    for note in &expected {
        let line = note.strip_prefix("note: ran: ").unwrap();
        let status = Command::new("sh").arg("-c").arg(line).status().unwrap();
        assert!(status.success(), "{line}");
    }
    let again = calls(&log);
    for (first, second) in ran.iter().zip(&again) {
        assert_eq!(first.args, second.args);
        assert_eq!(second.cwd, built.build.dir);
    }
    assert_eq!(again.len(), ran.len());

    // A cache hit runs nothing and names the cached files it uses.
    fs::remove_file(&log).unwrap();
    let cached = program::build(&plan, &CacheRoot::Kept(root)).unwrap();
    assert!(!cached.build.compiled);
    assert!(!log.exists(), "nvcc ran on a cache hit");
    assert!(cached.commands.is_empty());
    let dir = &cached.build.dir;
    assert_eq!(
        cached.command_notes(),
        [
            format!(
                "note: cached: {}",
                dir.join("allreduce_lsa.cubin").display()
            ),
            format!("note: cached: {}", cached.files[1].display()),
        ]
    );
    assert_eq!(cached.files[0], cached.cubin(&KERNEL));
    assert!(cached.files.iter().all(|f| f.is_file()));
}
