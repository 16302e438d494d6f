//! A lesson's device code in one call: the route for this GPU and the loaded
//! NCCL ([`choose`]), the build on it, falling back to nvcc under `--build
//! auto` ([`build_chosen`]), and where each kernel's module is ([`Built`]).
//! What lessons 05 and 05b and the benchmarks each wrote out before.

use std::path::PathBuf;

use anyhow::Result;
use common::nccl::loaded_nccl;
use common::{CannotRun, NcclVersion, RankContext};

use crate::route::{self, Build, Chosen, Plan, Program};
use crate::shim::Shim;
use crate::{cache, command, jit, nvcc, CacheRoot, Env, Source};

/// The preflight tool check a lesson names in `Lesson::tool`: nvcc or NVRTC
/// is found, so that a machine with neither hears so before any rank
/// starts, beside any other problem, rather than at the build on every rank.
pub fn tool_found() -> Result<(), CannotRun> {
    route::some_route_found(&Env::from_process())
}

/// The route for `build` on a GPU of compute capability `major.minor` and
/// the loaded NCCL, and why.
pub fn choose(build: Build, (major, minor): (i32, i32), program: &Program) -> Result<Chosen> {
    let nccl = loaded_nccl()?;
    route::choose(
        build,
        &Env::from_process(),
        &format!("sm_{major}{minor}"),
        nccl.version,
        &nccl.path,
        program,
    )
}

/// A program's built device code, from either route.
pub struct Built {
    /// `nvcc` or `jit`.
    pub route: &'static str,
    pub build: cache::Built,
    shim: Option<PathBuf>,
    nccl: NcclVersion,
    library: PathBuf,
    /// The compiler and linker calls this build made, one line each (see
    /// [`crate::command`]); empty when the cache held it.
    pub commands: Vec<String>,
    /// The files the program loads from the build: every cubin, and the
    /// shim on the nvcc route.
    pub files: Vec<PathBuf>,
}

impl Built {
    /// The module holding the kernels of `nvcc_source`: its own cubin on the
    /// nvcc route; on the jit route, the one cubin every source is linked into.
    pub fn cubin(&self, nvcc_source: &Source) -> PathBuf {
        match self.route {
            "nvcc" => self.build.file(&nvcc_source.cubin()),
            _ => self.build.file(jit::CUBIN),
        }
    }

    /// The source this route compiled: `nvcc_source` or `jit_source`.
    pub fn source(&self, nvcc_source: &Source, jit_source: &Source) -> &'static str {
        match self.route {
            "nvcc" => nvcc_source.file,
            _ => jit_source.file,
        }
    }

    /// On rank 0 only, on stderr: what this build made, how, and how long
    /// it took ([`build_note`](Self::build_note)).
    pub fn print_build_note(&self, ctx: &RankContext, jit_output: &str) {
        command::print_on_root(ctx, [self.build_note(jit_output)]);
    }

    /// What [`print_build_note`](Self::print_build_note) prints:
    /// `note: kernel and shim compiled with nvcc in 3.81 s (<dir>)` on the
    /// nvcc route, `note: <jit_output> compiled with NVRTC and linked with
    /// nvJitLink in ...` on the jit route (`jit_output` is the lesson's
    /// word for what that route builds: `kernel` or `kernels`), and
    /// `... reused from the cache in ...` when the cache held the build.
    pub fn build_note(&self, jit_output: &str) -> String {
        let jit = self.route == "jit";
        let what = if jit { jit_output } else { "kernel and shim" };
        let how = match (self.build.compiled, jit) {
            (true, true) => "compiled with NVRTC and linked with nvJitLink",
            (true, false) => "compiled with nvcc",
            (false, _) => "reused from the cache",
        };
        format!(
            "note: {what} {how} in {:.2} s ({})",
            self.build.seconds,
            self.build.dir.display()
        )
    }

    /// On rank 0 only, on stderr: the exact commands this build ran
    /// (`note: ran: ...`), or, when the cache held the build, the cached
    /// files the program uses (`note: cached: ...`).
    pub fn print_commands(&self, ctx: &RankContext) {
        command::print_on_root(ctx, self.command_notes());
    }

    /// What [`print_commands`](Self::print_commands) prints.
    pub fn command_notes(&self) -> Vec<String> {
        command::notes(self.build.compiled, &self.commands, &self.files)
    }

    /// Why Rust sees a `ncclDevComm` only as bytes, as the lessons print it
    /// after its size: on the nvcc route only the shim knows its layout; on
    /// the jit route its size is the one this build knows for the release.
    pub fn dev_comm_opacity(&self) -> &'static str {
        if self.route == "nvcc" {
            "opaque to Rust: only the shim knows its layout"
        } else {
            "opaque to Rust: its size is the one this build knows for the release"
        }
    }

    /// How this route makes the device communicator: the shim (nvcc), or
    /// NCCL called directly with 2.32.3's requirements layout (jit).
    pub fn dev_comm_maker(&self) -> Result<Shim> {
        Shim::for_build(self.shim.as_deref(), &self.library, self.nccl)
    }
}

/// Builds (or reuses) the device code of `plan`.
pub fn build(plan: &Plan, cache: &CacheRoot) -> Result<Built> {
    Ok(match plan {
        Plan::Nvcc(target) => {
            let built = nvcc::build_or_reuse(target, cache)?;
            let mut files: Vec<PathBuf> = target.kernels.iter().map(|k| built.cubin(k)).collect();
            files.push(built.shim.clone());
            Built {
                route: "nvcc",
                shim: Some(built.shim),
                nccl: target.nccl,
                library: target.library.clone(),
                build: built.build,
                commands: built.commands,
                files,
            }
        }
        Plan::Jit(target) => {
            let (build, commands) = jit::build_or_reuse_saying(target, cache)?;
            Built {
                route: "jit",
                files: vec![build.file(jit::CUBIN)],
                build,
                shim: None,
                nccl: target.nccl,
                library: target.library.clone(),
                commands,
            }
        }
    })
}

/// [`build`], falling back to nvcc under `--build auto` when the jit build
/// fails for want of a tool ([`route::build_or_fall_back`]).
pub fn build_chosen(
    requested: Build,
    chosen: &mut Chosen,
    cache: &CacheRoot,
    capability: (i32, i32),
    program: &Program,
) -> Result<Built> {
    route::build_or_fall_back(
        requested,
        chosen,
        |plan| build(plan, cache),
        || choose(Build::Nvcc, capability, program),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn built(route: &'static str, compiled: bool, seconds: f64) -> Built {
        Built {
            route,
            build: cache::Built::record("/cache/3f2a".into(), compiled, seconds),
            shim: None,
            nccl: NcclVersion::new(2, 32, 3),
            library: PathBuf::new(),
            commands: Vec::new(),
            files: Vec::new(),
        }
    }

    #[test]
    fn the_build_note_names_what_was_built_and_by_which_tools() {
        // The nvcc route builds a kernel and the shim, whatever the lesson
        // calls its jit output.
        for jit_output in ["kernel", "kernels"] {
            assert_eq!(
                built("nvcc", true, 3.812).build_note(jit_output),
                "note: kernel and shim compiled with nvcc in 3.81 s (/cache/3f2a)"
            );
            assert_eq!(
                built("nvcc", false, 0.0041).build_note(jit_output),
                "note: kernel and shim reused from the cache in 0.00 s (/cache/3f2a)"
            );
        }
        // The jit route: lesson 05's word, then 05b's.
        assert_eq!(
            built("jit", true, 6.987).build_note("kernel"),
            "note: kernel compiled with NVRTC and linked with nvJitLink in 6.99 s (/cache/3f2a)"
        );
        assert_eq!(
            built("jit", true, 6.987).build_note("kernels"),
            "note: kernels compiled with NVRTC and linked with nvJitLink in 6.99 s (/cache/3f2a)"
        );
        assert_eq!(
            built("jit", false, 0.009).build_note("kernel"),
            "note: kernel reused from the cache in 0.01 s (/cache/3f2a)"
        );
        assert_eq!(
            built("jit", false, 0.009).build_note("kernels"),
            "note: kernels reused from the cache in 0.01 s (/cache/3f2a)"
        );
    }
    #[test]
    fn the_device_communicator_is_opaque_for_the_reason_of_its_route() {
        assert_eq!(
            built("nvcc", true, 0.0).dev_comm_opacity(),
            "opaque to Rust: only the shim knows its layout"
        );
        assert_eq!(
            built("jit", true, 0.0).dev_comm_opacity(),
            "opaque to Rust: its size is the one this build knows for the release"
        );
    }
}
