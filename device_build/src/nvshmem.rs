//! The NVSHMEM route: your kernels and NVSHMEM's device library in one
//! module. NVRTC compiles the source (the library and the kernels that call
//! it, one translation unit) to LTO-IR against NVSHMEM's headers, and
//! nvJitLink links it with `libnvshmem_device.a` into one cubin; NVRTC and
//! nvJitLink are found as the [`jit`] route finds them, first in NVSHMEM's
//! own wheel. Also where NVSHMEM is found ([`find`]), which the host side
//! (`symm_comm::nvshmem`: init, heap, `nvshmemx_cumodule_init`) loads from.
//!
//! One call for a program ([`build_for_this_process`]): NVSHMEM, the tools
//! and the build, with a [`Built`] that says what it made and the exact
//! NVRTC and nvJitLink calls ([`Built::print_commands`]).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use common::{CannotRun, RankContext};

use crate::command::{self, Ran};
use crate::jit::{self, LinkInput};
use crate::{cache, CacheRoot, Env, Source};

/// The host library's name in every NVSHMEM 3.x layout.
pub const HOST_LIBRARY: &str = "libnvshmem_host.so.3";
/// The device library nvJitLink links the module with.
pub const DEVICE_LIBRARY: &str = "libnvshmem_device.a";

/// Where NVSHMEM is looked for.
#[derive(Debug, Clone, Default)]
pub struct Search {
    /// `NVSHMEM_HOME`: a directory with `lib/` and `include/`; if set, nothing
    /// else is tried.
    pub nvshmem_home: Option<OsString>,
    /// The active Python environments, whose site-packages may hold the
    /// `nvidia-nvshmem-cu13` wheel (`nvidia/nvshmem`).
    pub virtual_env: Option<OsString>,
    pub conda_prefix: Option<OsString>,
}

impl Search {
    pub fn from_process() -> Self {
        let var = |name| std::env::var_os(name).filter(|v| !v.is_empty());
        Self {
            nvshmem_home: var("NVSHMEM_HOME"),
            virtual_env: var("VIRTUAL_ENV"),
            conda_prefix: var("CONDA_PREFIX"),
        }
    }

    /// The directories that may be NVSHMEM's root, in order.
    pub fn candidates(&self) -> Vec<PathBuf> {
        if let Some(home) = &self.nvshmem_home {
            return vec![PathBuf::from(home)];
        }
        common::pip::environment_sites(&[self.virtual_env.as_deref(), self.conda_prefix.as_deref()])
            .into_iter()
            .map(|site| site.join(common::pip::NVSHMEM))
            .collect()
    }
}

/// An NVSHMEM installation: its host library, device library and headers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    pub root: PathBuf,
    pub host_library: PathBuf,
    pub device_library: PathBuf,
    pub include: PathBuf,
}

/// The fix named whenever NVSHMEM is not found.
pub const INSTALL: &str = "pip install nvidia-nvshmem-cu13 into the active Python environment (VIRTUAL_ENV), or set NVSHMEM_HOME to a directory with lib/libnvshmem_host.so.3, lib/libnvshmem_device.a and include/nvshmem.h; or use the NCCL backend (06_symm_primitive, or 06_symm_bench without --backend nvshmem)";

/// Finds NVSHMEM, or says where it looked and how to install it (exit 2).
pub fn find(search: &Search) -> Result<Found, CannotRun> {
    let candidates = search.candidates();
    for root in &candidates {
        let found = Found {
            host_library: root.join("lib").join(HOST_LIBRARY),
            device_library: root.join("lib").join(DEVICE_LIBRARY),
            include: root.join("include"),
            root: root.clone(),
        };
        if found.host_library.is_file()
            && found.device_library.is_file()
            && found.include.join("nvshmem.h").is_file()
        {
            return Ok(found);
        }
    }
    let looked = if candidates.is_empty() {
        "NVSHMEM_HOME is not set and no Python environment is active".to_string()
    } else {
        let dirs: Vec<String> = candidates.iter().map(|c| c.display().to_string()).collect();
        format!(
            "looked for lib/{HOST_LIBRARY}, lib/{DEVICE_LIBRARY} and include/nvshmem.h in {}",
            dirs.join(", ")
        )
    };
    Err(CannotRun::new(
        format!("NVSHMEM not found ({looked})"),
        INSTALL,
    ))
}

impl Found {
    /// The site-packages this NVSHMEM came in, when it is the
    /// `nvidia-nvshmem-cu13` wheel (`<site>/nvidia/nvshmem`): the NVRTC and
    /// nvJitLink wheels installed with it sit there too.
    pub fn site(&self) -> Option<PathBuf> {
        let depth = Path::new(common::pip::NVSHMEM).components().count();
        self.root
            .ends_with(common::pip::NVSHMEM)
            .then(|| self.root.ancestors().nth(depth))
            .flatten()
            .map(Path::to_path_buf)
    }

    /// Where the build looks for NVRTC, nvJitLink and CUDA's headers: this
    /// NVSHMEM's own site-packages ([`Found::site`]) first, then those of
    /// `NCCL_HOME` and the active Python environments
    /// (`device_build::jit::site_packages`), each once.
    pub fn sites(&self, env: &Env) -> Vec<PathBuf> {
        // No NCCL library is involved: a path that is no wheel's NCCL
        // leaves only NCCL_HOME's site and the environments' sites.
        let others = jit::site_packages(env, &self.root.join("lib/x"));
        let own = self.site();
        own.iter()
            .cloned()
            .chain(others.into_iter().filter(|s| Some(s) != own.as_ref()))
            .collect()
    }

    /// Exit 2 (with the fix) if another user could change what the build
    /// takes from NVSHMEM: the device library linked into the kernel, and
    /// the headers NVRTC includes (common::trust).
    pub fn check_build_inputs(&self) -> Result<(), CannotRun> {
        common::trust::check_trusted(&self.device_library, "NVSHMEM's device library")?;
        common::trust::check_trusted(&self.include, "NVSHMEM's headers")
    }
}

// ---------------------------------------------------------------------------
// The module: NVRTC -> LTO-IR, nvJitLink with libnvshmem_device.a -> cubin.
// ---------------------------------------------------------------------------

/// What NVSHMEM 3.4.5's headers need under NVRTC and do not get from it:
/// three type traits in `std`, forwarded to libcu++ (3.8.0's headers need
/// none of this, and are not disturbed by it).
pub const PRELUDE: &str = "#include <cuda/std/type_traits>\n\
namespace std {\n\
using cuda::std::is_integral;\n\
using cuda::std::is_signed;\n\
using cuda::std::is_unsigned;\n\
}\n";

/// The one cubin the NVSHMEM build makes.
pub const CUBIN: &str = "symm_nvshmem.cubin";

/// Everything the NVSHMEM build depends on.
pub struct Target {
    pub arch: String,
    /// The library and the kernels that call it, one translation unit
    /// (`symm_comm::with_library`).
    pub source: Source,
    /// `-D` for the compile: at least (`symm_comm::WITH_NVSHMEM`, `1`).
    pub defines: Vec<(String, String)>,
    pub nvrtc: jit::Nvrtc,
    pub nvjitlink: jit::NvJitLink,
    pub cuda_include: Vec<PathBuf>,
    pub nvshmem: Found,
}

impl Target {
    /// NVRTC, nvJitLink and the CUDA headers, found as the jit route finds
    /// them (`NVRTC`, `NVJITLINK`, the Python environments, `CUDA_HOME`),
    /// and first in the site-packages of NVSHMEM's own wheel
    /// ([`Found::site`]), to build `source` with `defines`.
    pub fn find(
        env: &Env,
        arch: &str,
        nvshmem: Found,
        source: Source,
        defines: Vec<(String, String)>,
    ) -> Result<Self> {
        nvshmem.check_build_inputs()?;
        let sites = nvshmem.sites(env);
        let nvrtc_path = jit::find_nvrtc(env, &sites)?;
        let nvjitlink_path = jit::find_nvjitlink(env, &sites)?;
        let nvrtc = jit::Nvrtc::load(&nvrtc_path)
            .with_context(|| format!("load NVRTC from {}", nvrtc_path.display()))?;
        let nvjitlink = jit::NvJitLink::load(&nvjitlink_path)
            .with_context(|| format!("load nvJitLink from {}", nvjitlink_path.display()))?;
        let cuda_include = jit::find_cuda_headers(env, &sites)?;
        Ok(Self {
            arch: arch.into(),
            source,
            defines,
            nvrtc,
            nvjitlink,
            cuda_include,
            nvshmem,
        })
    }

    /// NVRTC's options: LTO-IR, relocatable device code, NVSHMEM's and
    /// CUDA's headers, and the prelude pre-included.
    pub fn options(&self, prelude: &Path) -> Vec<String> {
        let mut options = vec![
            format!("-arch={}", self.arch),
            "-dlto".into(),
            "-rdc=true".into(),
            "-default-device".into(),
            "-std=c++17".into(),
            format!("--pre-include={}", prelude.display()),
        ];
        options.extend(self.defines.iter().map(|(n, v)| format!("-D{n}={v}")));
        options.push(format!("-I{}", self.nvshmem.include.display()));
        options.extend(
            self.cuda_include
                .iter()
                .map(|d| format!("-I{}", d.display())),
        );
        options
    }

    /// Everything that goes into the build, as text (its hash names the
    /// cache directory).
    pub fn key_text(&self) -> String {
        let mut text = format!(
            "route=nvshmem\nnvrtc={}.{} {}\nnvjitlink={}.{} {}\ndevice_library={}\nheader={}\n",
            self.nvrtc.version.0,
            self.nvrtc.version.1,
            self.nvrtc.path.display(),
            self.nvjitlink.version.0,
            self.nvjitlink.version.1,
            self.nvjitlink.path.display(),
            cache::file_stamp(&self.nvshmem.device_library),
            cache::file_stamp(&self.nvshmem.include.join("nvshmem.h")),
        );
        for option in self.options(Path::new("prelude.h")) {
            text.push_str(&format!("option={option}\n"));
        }
        text.push_str(&format!(
            "prelude\n{PRELUDE}\nsource={}\n{}\n",
            self.source.file, self.source.text
        ));
        text
    }
}

/// An NVSHMEM build: the cubin, the NVSHMEM it was built with (and whose
/// host library the program loads), and how it was made.
pub struct Built {
    pub build: cache::Built,
    /// The NVSHMEM whose device library is linked in.
    pub nvshmem: Found,
    /// The target architecture, e.g. `sm_90`.
    pub arch: String,
    /// `NVRTC 13.0 (<path>), nvJitLink 13.0 (<path>)`: the tools found.
    pub tools: String,
    /// The NVRTC and nvJitLink calls this build made, one line each in the
    /// form of a command ([`jit::nvrtc_line`], [`jit::link_inputs_line`]);
    /// empty when the cache held it.
    pub commands: Vec<String>,
}

impl Built {
    /// The one module: the library, the kernels and NVSHMEM's device code.
    pub fn cubin(&self) -> PathBuf {
        self.build.file(CUBIN)
    }

    /// On rank 0 only, on stderr: the route and its tools, then what the
    /// build did and how long it took ([`build_notes`](Self::build_notes)).
    pub fn print_build_note(&self, ctx: &RankContext) {
        command::print_on_root(ctx, self.build_notes());
    }

    /// What [`print_build_note`](Self::print_build_note) prints:
    /// `note: build route: nvshmem (NVRTC ..., nvJitLink ... with
    /// <libnvshmem_device.a>)`, then `note: module built in 6.99 s (route
    /// nvshmem, sm_90)`, or `... reused from the cache in ...`.
    pub fn build_notes(&self) -> [String; 2] {
        [
            format!(
                "note: build route: nvshmem ({} with {})",
                self.tools,
                self.nvshmem.device_library.display()
            ),
            command::module_note(&self.build, "nvshmem", &self.arch),
        ]
    }

    /// On rank 0 only, on stderr: the exact NVRTC and nvJitLink calls this
    /// build made (`note: ran: ...`), or the cached cubin it used (`note:
    /// cached: ...`).
    pub fn print_commands(&self, ctx: &RankContext) {
        command::print_on_root(ctx, self.command_notes());
    }

    /// What [`print_commands`](Self::print_commands) prints.
    pub fn command_notes(&self) -> Vec<String> {
        command::notes(self.build.compiled, &self.commands, &[self.cubin()])
    }
}

/// The NVSHMEM module of `source` for `arch` (e.g. `sm_90`) in one call:
/// finds NVSHMEM (`NVSHMEM_HOME`, the active Python environments), then
/// NVRTC, nvJitLink and CUDA's headers ([`Target::find`]), and builds it or
/// reuses the cache ([`build`]). Each check that fails is an exit 2 with
/// the fix.
pub fn build_for_this_process(
    arch: &str,
    source: Source,
    defines: Vec<(String, String)>,
    cache_root: &CacheRoot,
) -> Result<Built> {
    let nvshmem = find(&Search::from_process())?;
    let target = Target::find(&Env::from_process(), arch, nvshmem, source, defines)?;
    build(&target, cache_root)
}

/// The cached NVSHMEM module for `target`, compiling it first if needed,
/// with the calls the build made.
pub fn build(target: &Target, cache_root: &CacheRoot) -> Result<Built> {
    let ran = Ran::default();
    let compile = |dir: &Path| compile_into(target, dir, &ran);
    let job = cache::Job {
        key_text: target.key_text(),
        outputs: vec![CUBIN.into()],
        compile: &compile,
    };
    let build = cache::build_or_reuse(&job, cache_root)?;
    let commands = ran.lines_in(&build.dir);
    Ok(Built {
        build,
        nvshmem: target.nvshmem.clone(),
        arch: target.arch.clone(),
        tools: format!("{}, {}", target.nvrtc, target.nvjitlink),
        commands,
    })
}

/// Compiles the library and the user kernels to LTO-IR and links them with
/// `libnvshmem_device.a` into `dir/symm_nvshmem.cubin`, recording each call
/// in `ran`.
fn compile_into(target: &Target, dir: &Path, ran: &Ran) -> Result<()> {
    let prelude = dir.join("prelude.h");
    std::fs::write(&prelude, PRELUDE).context("write prelude.h")?;
    let options = target.options(&prelude);
    ran.record(
        dir,
        jit::nvrtc_line(&target.nvrtc, &options, target.source.file),
    );
    let ir = target
        .nvrtc
        .compile_ltoir(target.source.file, target.source.text, &options)?
        .map_err(|log| {
            CannotRun::new(
                format!(
                    "NVRTC {}.{} could not compile {} against NVSHMEM in {}:\n{}",
                    target.nvrtc.version.0,
                    target.nvrtc.version.1,
                    target.source.file,
                    target.nvshmem.root.display(),
                    log.lines().take(40).collect::<Vec<_>>().join("\n")
                ),
                "use NVSHMEM 3.4.5 or 3.8.0 (pip install nvidia-nvshmem-cu13), or the NCCL backend (06_symm_primitive)",
            )
        })?;
    let archive = std::fs::read(&target.nvshmem.device_library)
        .with_context(|| format!("read {}", target.nvshmem.device_library.display()))?;
    let inputs = [
        (target.source.file, ir.as_slice(), LinkInput::Ltoir),
        (DEVICE_LIBRARY, archive.as_slice(), LinkInput::Library),
    ];
    let out = dir.join(CUBIN);
    let named = [
        (target.source.file.to_string(), LinkInput::Ltoir),
        (
            target.nvshmem.device_library.display().to_string(),
            LinkInput::Library,
        ),
    ];
    ran.record(
        dir,
        jit::link_inputs_line(&target.nvjitlink, &target.arch, &named, &out),
    );
    let cubin = target
        .nvjitlink
        .link_inputs(&target.arch, &inputs)?
        .map_err(|failure| {
            CannotRun::new(
                format!(
                    "{} could not link with {} (status {}):\n{}",
                    target.nvjitlink,
                    target.nvshmem.device_library.display(),
                    failure.status,
                    failure.log.lines().take(40).collect::<Vec<_>>().join("\n")
                ),
                "use an nvJitLink at least as new as the CUDA that built NVSHMEM (pip install -U nvidia-nvjitlink, or set NVJITLINK)",
            )
        })?;
    std::fs::write(&out, cubin).with_context(|| format!("write {}", out.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An NVSHMEM root in `tmp` with every file `find` looks for (empty).
    fn nvshmem_root(tmp: &Path) -> Found {
        let root = tmp.join("nvidia/nvshmem");
        for file in [
            "lib/libnvshmem_host.so.3",
            "lib/libnvshmem_device.a",
            "include/nvshmem.h",
        ] {
            let path = root.join(file);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, "").unwrap();
        }
        find(&Search {
            nvshmem_home: Some(root.into()),
            ..Search::default()
        })
        .unwrap()
    }

    fn chmod(path: &Path, mode: u32) {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn a_device_library_or_headers_others_can_write_are_not_built_with() {
        let tmp = tempfile::tempdir().unwrap();
        let found = nvshmem_root(tmp.path());
        assert!(found.check_build_inputs().is_ok());
        chmod(&found.include, 0o777);
        let err = found.check_build_inputs().unwrap_err();
        assert!(err.reason.contains("NVSHMEM's headers"), "{err:?}");
        chmod(&found.include, 0o755);
        chmod(&found.root.join("lib"), 0o777);
        let err = found.check_build_inputs().unwrap_err();
        assert!(err.reason.contains("NVSHMEM's device library"), "{err:?}");
        // Target::find checks them before anything else.
        let source = Source {
            file: "k.cu",
            text: "",
        };
        let err = Target::find(&Env::default(), "sm_90", found, source, vec![])
            .err()
            .expect("refused");
        let refused = err.downcast_ref::<CannotRun>().expect("exit code 2");
        assert!(
            refused.reason.contains("NVSHMEM's device library"),
            "{refused:?}"
        );
    }

    #[test]
    fn the_wheels_own_site_is_searched_first_for_nvrtc_and_nvjitlink() {
        let tmp = tempfile::tempdir().unwrap();
        let site = tmp.path().join("venv/lib/python3.12/site-packages");
        let found = nvshmem_root(&site);
        assert_eq!(found.site(), Some(site.clone()));
        let other = tmp.path().join("other");
        let conda = other.join("lib/python3.12/site-packages");
        std::fs::create_dir_all(&conda).unwrap();
        let env = Env {
            conda_prefix: Some(other.into()),
            ..Env::default()
        };
        assert_eq!(found.sites(&env), vec![site.clone(), conda]);
        // Its NVRTC there is the one found.
        let nvrtc = site.join(common::pip::NVRTC[0]);
        std::fs::create_dir_all(nvrtc.parent().unwrap()).unwrap();
        std::fs::write(&nvrtc, "").unwrap();
        assert_eq!(
            jit::find_nvrtc(&Env::default(), &found.sites(&Env::default())).unwrap(),
            nvrtc
        );
        // An NVSHMEM_HOME not laid out as the wheel: no site of its own.
        let home = Found {
            root: tmp.path().join("opt/nvshmem-3.8"),
            ..found
        };
        assert_eq!(home.site(), None);
        assert_eq!(
            home.sites(&env),
            vec![tmp.path().join("other/lib/python3.12/site-packages")]
        );
    }

    #[test]
    fn missing_nvshmem_names_where_it_looked_and_the_fix() {
        let tmp = tempfile::tempdir().unwrap();
        let search = Search {
            nvshmem_home: Some(tmp.path().into()),
            ..Search::default()
        };
        let err = find(&search).unwrap_err();
        assert!(err.reason.contains("NVSHMEM not found"), "{err}");
        assert!(
            err.reason.contains(&tmp.path().display().to_string()),
            "{err}"
        );
        assert!(err.fix.contains("pip install nvidia-nvshmem-cu13"), "{err}");
        assert!(
            err.fix
                .contains("or use the NCCL backend (06_symm_primitive"),
            "{err}"
        );
    }

    #[test]
    fn the_wheel_in_the_active_venv_is_found() {
        let tmp = tempfile::tempdir().unwrap();
        let root = tmp
            .path()
            .join("venv/lib/python3.12/site-packages/nvidia/nvshmem");
        for file in [
            "lib/libnvshmem_host.so.3",
            "lib/libnvshmem_device.a",
            "include/nvshmem.h",
        ] {
            let path = root.join(file);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, "").unwrap();
        }
        let search = Search {
            virtual_env: Some(tmp.path().join("venv").into()),
            ..Search::default()
        };
        let found = find(&search).unwrap();
        assert_eq!(found.root, root);
    }

    #[test]
    fn the_nvshmem_calls_read_as_commands_with_every_option_in_order() {
        let tmp = tempfile::tempdir().unwrap();
        let nvshmem = Found {
            root: "/w/nvidia/nvshmem".into(),
            host_library: "/w/nvidia/nvshmem/lib/libnvshmem_host.so.3".into(),
            device_library: "/w/nvidia/nvshmem/lib/libnvshmem_device.a".into(),
            include: "/w/nvidia/nvshmem/include".into(),
        };
        // The options NVRTC is given, in order, with the prelude
        // pre-included from the build directory.
        let options = |cuda_include: Vec<PathBuf>| {
            let mut options = vec![
                "-arch=sm_90".to_string(),
                "-dlto".into(),
                "-rdc=true".into(),
                "-default-device".into(),
                "-std=c++17".into(),
                "--pre-include=/c/k/prelude.h".into(),
                "-DSYMM_WITH_NVSHMEM=1".into(),
                "-DSYMM_THREADS=512".into(),
                "-I/w/nvidia/nvshmem/include".into(),
            ];
            options.extend(cuda_include.iter().map(|d| format!("-I{}", d.display())));
            options
        };
        let cuda = vec![PathBuf::from("/w/nvidia/cu13/include")];
        assert_eq!(
            jit::nvrtc_line(
                &"NVRTC 13.0 (/w/nvidia/cu13/lib/libnvrtc.so.13)",
                &options(cuda),
                "symm_tp_tail.cu"
            ),
            "nvrtc -arch=sm_90 -dlto -rdc=true -default-device -std=c++17 \
             --pre-include=/c/k/prelude.h -DSYMM_WITH_NVSHMEM=1 -DSYMM_THREADS=512 \
             -I/w/nvidia/nvshmem/include -I/w/nvidia/cu13/include symm_tp_tail.cu  \
             # nvrtcCompileProgram, NVRTC 13.0 (/w/nvidia/cu13/lib/libnvrtc.so.13), to LTO-IR"
        );
        let named = [
            ("symm_tp_tail.cu".to_string(), LinkInput::Ltoir),
            (
                nvshmem.device_library.display().to_string(),
                LinkInput::Library,
            ),
        ];
        assert_eq!(
            jit::link_inputs_line(
                &"nvJitLink 13.0 (/w/nvidia/cu13/lib/libnvJitLink.so.13)",
                "sm_90",
                &named,
                Path::new("/c/k/symm_nvshmem.cubin")
            ),
            "nvjitlink -arch=sm_90 -lto symm_tp_tail.cu /w/nvidia/nvshmem/lib/libnvshmem_device.a \
             -o /c/k/symm_nvshmem.cubin  # nvJitLinkCreate, nvJitLinkAddData (LTO-IR, archive), \
             nvJitLinkComplete, nvJitLink 13.0 (/w/nvidia/cu13/lib/libnvJitLink.so.13)"
        );
        // What a build prints: the calls it made, or the cached cubin.
        let mut built = Built {
            build: cache::Built::record(tmp.path().join("3f2a"), true, 6.987),
            nvshmem,
            arch: "sm_90".into(),
            tools: "NVRTC 13.0 (/n), nvJitLink 13.0 (/j)".into(),
            commands: vec!["nvrtc -arch=sm_90 k.cu".into(), "nvjitlink -o k".into()],
        };
        assert_eq!(
            built.command_notes(),
            [
                "note: ran: nvrtc -arch=sm_90 k.cu",
                "note: ran: nvjitlink -o k"
            ]
        );
        let dir = tmp.path().join("3f2a").display().to_string();
        assert_eq!(
            built.build_notes(),
            [
                "note: build route: nvshmem (NVRTC 13.0 (/n), nvJitLink 13.0 (/j) with \
                 /w/nvidia/nvshmem/lib/libnvshmem_device.a)"
                    .to_string(),
                "note: module built in 6.99 s (route nvshmem, sm_90)".to_string()
            ]
        );
        built.build = cache::Built::record(tmp.path().join("3f2a"), false, 0.004);
        assert_eq!(
            built.command_notes(),
            [format!("note: cached: {dir}/symm_nvshmem.cubin")]
        );
        assert_eq!(
            built.build_notes()[1],
            "note: module reused from the cache in 0.00 s (route nvshmem, sm_90)"
        );
    }
}
