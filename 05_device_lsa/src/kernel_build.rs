//! Building the kernel and the shim: find nvcc and the NCCL headers, check
//! that the headers are the loaded library's, compile with nvcc, and cache.
//!
//! Device-API code is compiled against one NCCL release and only runs with
//! that release, so the build is made here, at run time, against the headers
//! of the library this process loaded, for this GPU's architecture. The result
//! is cached under the user's cache directory, keyed by everything that goes
//! into it, so later runs reuse it.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result};
use common::{CannotRun, NcclVersion};
use sha2::{Digest, Sha256};

/// The kernel, compiled into the binary as source.
pub const KERNEL_SOURCE: &str = include_str!("../kernels/allreduce_lsa.cu");
/// The host shim around `ncclDevCommCreate`/`Destroy`, also compiled in.
pub const SHIM_SOURCE: &str = include_str!("../kernels/devcomm_shim.cu");
/// The kernel's entry point (declared `extern "C"` in the source).
pub const KERNEL_NAME: &str = "allreduce_lsa";
/// The fast kernels (`--kernel fast`), also compiled in as source.
pub const FAST_SOURCE: &str = include_str!("../kernels/allreduce_lsa_fast.cu");
/// 8-byte units one block of the fast one-shot kernel carries: its LL
/// staging buffer is sized for this, and the kernel is compiled with it.
pub const LL_UNITS_PER_BLOCK: u32 = 2048;

/// The environment variables that steer the search, captured once so that the
/// search is a pure function the tests can drive.
#[derive(Debug, Clone, Default)]
pub struct Env {
    pub nvcc: Option<OsString>,
    pub cuda_home: Option<OsString>,
    pub path: Option<OsString>,
    pub nccl_home: Option<OsString>,
    pub xdg_cache_home: Option<OsString>,
    pub home: Option<OsString>,
}

impl Env {
    pub fn from_process() -> Self {
        let var = |name| std::env::var_os(name).filter(|v| !v.is_empty());
        Self {
            nvcc: var("NVCC"),
            cuda_home: var("CUDA_HOME"),
            path: var("PATH"),
            nccl_home: var("NCCL_HOME"),
            xdg_cache_home: var("XDG_CACHE_HOME"),
            home: var("HOME"),
        }
    }
}

/// Where nvcc is looked for, in order: `$NVCC` (a path; if set, nothing else
/// is tried), `$CUDA_HOME/bin/nvcc`, every directory of `$PATH`, and
/// `/usr/local/cuda/bin/nvcc`, where the CUDA toolkit installs itself.
pub fn nvcc_candidates(env: &Env) -> Vec<PathBuf> {
    if let Some(nvcc) = &env.nvcc {
        return vec![PathBuf::from(nvcc)];
    }
    let mut candidates = Vec::new();
    if let Some(home) = &env.cuda_home {
        candidates.push(Path::new(home).join("bin/nvcc"));
    }
    if let Some(path) = &env.path {
        candidates.extend(std::env::split_paths(path).map(|dir| dir.join("nvcc")));
    }
    candidates.push(PathBuf::from("/usr/local/cuda/bin/nvcc"));
    candidates
}

/// The first nvcc candidate that exists, or why there is none.
pub fn find_nvcc(env: &Env) -> Result<PathBuf, CannotRun> {
    pick_nvcc(env, &nvcc_candidates(env))
}

fn pick_nvcc(env: &Env, candidates: &[PathBuf]) -> Result<PathBuf, CannotRun> {
    if let Some(found) = candidates.iter().find(|c| c.is_file()) {
        return Ok(found.clone());
    }
    let looked: Vec<String> = candidates.iter().map(|c| c.display().to_string()).collect();
    Err(CannotRun::new(
        match &env.nvcc {
            Some(nvcc) => format!("nvcc not found: NVCC={} does not exist", Path::new(nvcc).display()),
            None => format!("nvcc not found (looked for {})", looked.join(", ")),
        },
        "this lesson compiles its kernel at run time: install the CUDA toolkit (nvcc), or point NVCC\n\
         at the nvcc binary, or CUDA_HOME at the toolkit's directory",
    ))
}

/// Where the NCCL headers are looked for, in order: `$NCCL_HOME/include` (if
/// set, nothing else is tried), the `include` directory beside the loaded
/// library's `lib` directory (pip wheels and tarballs), and `/usr/include`
/// (distribution packages).
pub fn header_candidates(env: &Env, library: &Path) -> Vec<PathBuf> {
    if let Some(home) = &env.nccl_home {
        return vec![Path::new(home).join("include")];
    }
    let mut candidates = Vec::new();
    if let Some(prefix) = library.parent().and_then(Path::parent) {
        candidates.push(prefix.join("include"));
    }
    candidates.push(PathBuf::from("/usr/include"));
    candidates
}

/// The first candidate with both `nccl.h` and `nccl_device.h`.
pub fn find_nccl_headers(env: &Env, library: &Path) -> Result<PathBuf, CannotRun> {
    let candidates = header_candidates(env, library);
    if let Some(found) = candidates
        .iter()
        .find(|dir| dir.join("nccl.h").is_file() && dir.join("nccl_device.h").is_file())
    {
        return Ok(found.canonicalize().unwrap_or_else(|_| found.clone()));
    }
    let looked: Vec<String> = candidates.iter().map(|c| c.display().to_string()).collect();
    Err(CannotRun::new(
        format!(
            "NCCL's device-API headers (nccl.h and nccl_device.h) not found in {}",
            looked.join(", ")
        ),
        "install NCCL's development files (e.g. libnccl-dev, the same version as the library),\n\
         or set NCCL_HOME to the NCCL installation whose include/ holds nccl_device.h",
    ))
}

/// The version `nccl.h` declares (`NCCL_MAJOR`, `NCCL_MINOR`, `NCCL_PATCH`).
pub fn parse_header_version(nccl_h: &str) -> Option<NcclVersion> {
    let define = |name: &str| -> Option<u32> {
        nccl_h.lines().find_map(|line| {
            let mut words = line.split_whitespace();
            (words.next() == Some("#define") && words.next() == Some(name))
                .then(|| words.next()?.parse().ok())?
        })
    };
    Some(NcclVersion::new(
        define("NCCL_MAJOR")?,
        define("NCCL_MINOR")?,
        define("NCCL_PATCH")?,
    ))
}

/// The version of the headers in `include`.
pub fn header_version(include: &Path) -> Result<NcclVersion> {
    let path = include.join("nccl.h");
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("read {}", path.display()))?;
    parse_header_version(&text)
        .with_context(|| format!("{} declares no NCCL_MAJOR/MINOR/PATCH", path.display()))
}

/// Device code built against one NCCL release does not run on another: the
/// headers must be exactly the loaded library's release.
pub fn check_same_release(
    headers: NcclVersion,
    include: &Path,
    library: NcclVersion,
    library_path: &Path,
) -> Result<(), CannotRun> {
    if headers == library {
        return Ok(());
    }
    Err(CannotRun::new(
        format!(
            "the NCCL headers are {headers} ({}) but the loaded library is {library} ({}); device-API code only runs with the release it was compiled for",
            include.join("nccl.h").display(),
            library_path.display()
        ),
        "use headers and library from the same NCCL: set NCCL_HOME to the installation of the library,\n\
         or put the library matching the headers first on LD_LIBRARY_PATH",
    ))
}

/// Everything the build depends on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// `sm_90` for compute capability 9.0.
    pub arch: String,
    pub nvcc: PathBuf,
    /// `nvcc --version`'s output.
    pub nvcc_version: String,
    pub include: PathBuf,
    pub nccl: NcclVersion,
    /// The NCCL library the shim links to.
    pub library: PathBuf,
    /// Threads per block, compiled into the kernel's launch bounds.
    pub threads: u32,
}

impl Target {
    pub fn kernel_args(&self) -> Vec<String> {
        vec![
            "-std=c++17".into(),
            format!("-arch={}", self.arch),
            "-cubin".into(),
            format!("-DALLREDUCE_THREADS={}", self.threads),
            format!("-DLL_UNITS_PER_BLOCK={LL_UNITS_PER_BLOCK}"),
            format!("-I{}", self.include.display()),
        ]
    }

    pub fn shim_args(&self) -> Vec<String> {
        let dir = self.library.parent().unwrap_or(Path::new("."));
        let file = self
            .library
            .file_name()
            .map(|f| f.to_string_lossy().into_owned())
            .unwrap_or_default();
        vec![
            "-std=c++17".into(),
            "-shared".into(),
            "-Xcompiler".into(),
            "-fPIC".into(),
            // The shim has no device code and makes no CUDA runtime calls:
            // compile it as plain C++ (the NCCL headers allow that) and link no
            // runtime, instead of a second, static copy of it.
            "-cudart=none".into(),
            "-x".into(),
            "c++".into(),
            format!("-I{}", self.include.display()),
            format!("-L{}", dir.display()),
            format!("-l:{file}"),
        ]
    }

    /// A hash of both sources, every flag, the nvcc version and the NCCL
    /// release: any change in them gives a new key and so a new build.
    pub fn cache_key(&self) -> String {
        let mut hash = Sha256::new();
        for part in [
            KERNEL_SOURCE,
            FAST_SOURCE,
            SHIM_SOURCE,
            &self.nvcc_version,
            &self.nccl.to_string(),
        ] {
            hash.update(part.as_bytes());
            hash.update([0]);
        }
        for arg in self.kernel_args().iter().chain(&self.shim_args()) {
            hash.update(arg.as_bytes());
            hash.update([0]);
        }
        hash.update(self.nvcc.as_os_str().as_encoded_bytes());
        hash.finalize()[..12]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }
}

/// `$XDG_CACHE_HOME/nccl-symmem-rs/05_device_lsa`, else `~/.cache/...`, else
/// the system temporary directory.
pub fn cache_root(env: &Env) -> PathBuf {
    let base = match (&env.xdg_cache_home, &env.home) {
        (Some(xdg), _) => PathBuf::from(xdg),
        (None, Some(home)) => Path::new(home).join(".cache"),
        (None, None) => std::env::temp_dir(),
    };
    base.join("nccl-symmem-rs/05_device_lsa")
}

/// What `build_or_reuse` produced.
#[derive(Debug, Clone)]
pub struct Built {
    pub cubin: PathBuf,
    /// The fast kernels' module.
    pub fast_cubin: PathBuf,
    pub shim: PathBuf,
    /// False if the cache already held this build.
    pub compiled: bool,
    pub seconds: f64,
}

/// The cached build for `target`, compiling it first if the cache lacks it.
pub fn build_or_reuse(target: &Target, cache_root: &Path) -> Result<Built> {
    let start = Instant::now();
    let dir = cache_root.join(target.cache_key());
    let (cubin, shim) = (dir.join("allreduce_lsa.cubin"), dir.join("devcomm_shim.so"));
    let fast_cubin = dir.join("allreduce_lsa_fast.cubin");
    if cubin.is_file() && fast_cubin.is_file() && shim.is_file() {
        return Ok(Built {
            cubin,
            fast_cubin,
            shim,
            compiled: false,
            seconds: start.elapsed().as_secs_f64(),
        });
    }
    // Build in a private directory, then rename it into place: another rank
    // or process building the same key at the same time cannot see half a build.
    std::fs::create_dir_all(cache_root)
        .with_context(|| format!("create {}", cache_root.display()))?;
    let work = tempfile_dir(cache_root)?;
    std::fs::write(work.join("allreduce_lsa.cu"), KERNEL_SOURCE)?;
    std::fs::write(work.join("devcomm_shim.cu"), SHIM_SOURCE)?;
    std::fs::write(work.join("allreduce_lsa_fast.cu"), FAST_SOURCE)?;
    nvcc(
        target,
        &target.kernel_args(),
        &work,
        "allreduce_lsa.cu",
        "allreduce_lsa.cubin",
    )?;
    nvcc(
        target,
        &target.kernel_args(),
        &work,
        "allreduce_lsa_fast.cu",
        "allreduce_lsa_fast.cubin",
    )?;
    nvcc(
        target,
        &target.shim_args(),
        &work,
        "devcomm_shim.cu",
        "devcomm_shim.so",
    )?;
    if std::fs::rename(&work, &dir).is_err() {
        // Someone else finished first; theirs is the same build.
        let _ = std::fs::remove_dir_all(&work);
    }
    Ok(Built {
        cubin,
        fast_cubin,
        shim,
        compiled: true,
        seconds: start.elapsed().as_secs_f64(),
    })
}

fn tempfile_dir(root: &Path) -> Result<PathBuf> {
    for attempt in 0..100u32 {
        let dir = root.join(format!(".build-{}-{attempt}", std::process::id()));
        if std::fs::create_dir(&dir).is_ok() {
            return Ok(dir);
        }
    }
    anyhow::bail!("cannot create a build directory under {}", root.display())
}

fn nvcc(target: &Target, args: &[String], dir: &Path, input: &str, output: &str) -> Result<()> {
    let result = Command::new(&target.nvcc)
        .args(args)
        .args(["-o", output, input])
        .current_dir(dir)
        .output()
        .with_context(|| format!("start {}", target.nvcc.display()))?;
    if result.status.success() {
        return Ok(());
    }
    let message: Vec<String> = String::from_utf8_lossy(&result.stderr)
        .lines()
        .chain(String::from_utf8_lossy(&result.stdout).lines())
        .take(40)
        .map(str::to_string)
        .collect();
    Err(CannotRun::new(
        format!(
            "nvcc could not compile {input} ({}):\n{}",
            target.nvcc.display(),
            message.join("\n")
        ),
        format!(
            "the command was: cd {} && {} {} -o {output} {input}\n\
             check that nvcc supports {} and that the NCCL headers in {} are complete",
            dir.display(),
            target.nvcc.display(),
            args.join(" "),
            target.arch,
            target.include.display()
        ),
    )
    .into())
}

/// `nvcc --version`.
pub fn nvcc_version(nvcc: &Path) -> Result<String> {
    let out = Command::new(nvcc)
        .arg("--version")
        .output()
        .with_context(|| format!("run {} --version", nvcc.display()))?;
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn touch(path: &Path) {
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(path, "").unwrap();
    }

    fn target() -> Target {
        Target {
            arch: "sm_90".into(),
            nvcc: "/usr/local/cuda/bin/nvcc".into(),
            nvcc_version: "Cuda compilation tools, release 13.0, V13.0.88".into(),
            include: "/usr/include".into(),
            nccl: NcclVersion::new(2, 28, 3),
            library: "/usr/lib/x86_64-linux-gnu/libnccl.so.2.28.3".into(),
            threads: 512,
        }
    }

    #[test]
    fn nvcc_search_order_is_nvcc_then_cuda_home_then_path_then_default() {
        let tmp = tempfile::tempdir().unwrap();
        let (home, path_a, path_b) = (
            tmp.path().join("cuda"),
            tmp.path().join("a"),
            tmp.path().join("b"),
        );
        let env = Env {
            cuda_home: Some(home.clone().into()),
            path: Some(std::env::join_paths([&path_a, &path_b]).unwrap()),
            ..Env::default()
        };
        assert_eq!(
            nvcc_candidates(&env),
            vec![
                home.join("bin/nvcc"),
                path_a.join("nvcc"),
                path_b.join("nvcc"),
                "/usr/local/cuda/bin/nvcc".into()
            ]
        );
        touch(&path_b.join("nvcc"));
        assert_eq!(find_nvcc(&env).unwrap(), path_b.join("nvcc"));
        touch(&home.join("bin/nvcc"));
        assert_eq!(find_nvcc(&env).unwrap(), home.join("bin/nvcc"));
        let explicit = Env {
            nvcc: Some(tmp.path().join("my-nvcc").into()),
            ..env
        };
        assert_eq!(nvcc_candidates(&explicit), vec![tmp.path().join("my-nvcc")]);
    }

    #[test]
    fn missing_nvcc_says_where_it_looked_and_what_to_set() {
        let tmp = tempfile::tempdir().unwrap();
        let env = Env {
            nvcc: Some(tmp.path().join("nope/nvcc").into()),
            ..Env::default()
        };
        let err = find_nvcc(&env).unwrap_err();
        assert!(
            err.reason.contains("nvcc not found: NVCC="),
            "{}",
            err.reason
        );
        assert!(err.fix.contains("install the CUDA toolkit"), "{}", err.fix);
        let looked = [tmp.path().join("a/nvcc"), tmp.path().join("b/nvcc")];
        let err = pick_nvcc(&Env::default(), &looked).unwrap_err();
        assert_eq!(
            err.reason,
            format!(
                "nvcc not found (looked for {}, {})",
                looked[0].display(),
                looked[1].display()
            )
        );
    }

    #[test]
    fn header_search_order_is_nccl_home_then_beside_the_library_then_usr_include() {
        let tmp = tempfile::tempdir().unwrap();
        let wheel = tmp.path().join("nvidia/nccl");
        let library = wheel.join("lib/libnccl.so.2");
        let env = Env::default();
        assert_eq!(
            header_candidates(&env, &library),
            vec![wheel.join("include"), "/usr/include".into()]
        );
        touch(&wheel.join("include/nccl.h"));
        // nccl.h alone is not enough: the device API lives in nccl_device.h.
        assert_ne!(
            find_nccl_headers(&env, &library).ok(),
            Some(wheel.join("include").canonicalize().unwrap())
        );
        touch(&wheel.join("include/nccl_device.h"));
        assert_eq!(
            find_nccl_headers(&env, &library).unwrap(),
            wheel.join("include").canonicalize().unwrap()
        );
        let home = tmp.path().join("nccl-home");
        let env = Env {
            nccl_home: Some(home.clone().into()),
            ..Env::default()
        };
        assert_eq!(
            header_candidates(&env, &library),
            vec![home.join("include")]
        );
        let err = find_nccl_headers(&env, &library).unwrap_err();
        assert!(err.reason.contains("nccl_device.h"), "{}", err.reason);
        assert!(err.fix.contains("NCCL_HOME"), "{}", err.fix);
    }

    #[test]
    fn header_version_comes_from_the_defines() {
        let nccl_h = "#define NCCL_H_\n#define NCCL_MAJOR 2\n#define NCCL_MINOR 28\n#define NCCL_PATCH 9\n#define NCCL_SUFFIX \"\"\n#define NCCL_VERSION_CODE 22809\n";
        assert_eq!(
            parse_header_version(nccl_h),
            Some(NcclVersion::new(2, 28, 9))
        );
        assert_eq!(parse_header_version("#define NCCL_MAJOR 2\n"), None);
        assert_eq!(
            parse_header_version(
                "#define NCCL_MAJOR_X 2\n#define NCCL_MINOR 1\n#define NCCL_PATCH 1"
            ),
            None
        );
    }

    #[test]
    fn headers_must_be_the_library_release() {
        let (inc, lib) = (
            Path::new("/opt/nccl/include"),
            Path::new("/usr/lib/libnccl.so.2.28.3"),
        );
        assert!(check_same_release(
            NcclVersion::new(2, 28, 3),
            inc,
            NcclVersion::new(2, 28, 3),
            lib
        )
        .is_ok());
        let err = check_same_release(
            NcclVersion::new(2, 28, 9),
            inc,
            NcclVersion::new(2, 28, 3),
            lib,
        )
        .unwrap_err();
        assert!(
            err.reason
                .contains("headers are 2.28.9 (/opt/nccl/include/nccl.h)"),
            "{}",
            err.reason
        );
        assert!(
            err.reason
                .contains("library is 2.28.3 (/usr/lib/libnccl.so.2.28.3)"),
            "{}",
            err.reason
        );
    }

    #[test]
    fn cache_key_is_stable_and_changes_with_every_input() {
        let base = target();
        assert_eq!(base.cache_key(), target().cache_key());
        assert_eq!(base.cache_key().len(), 24);
        let variants = [
            Target {
                arch: "sm_100".into(),
                ..target()
            },
            Target {
                nvcc_version: "release 13.1".into(),
                ..target()
            },
            Target {
                include: "/opt/nccl/include".into(),
                ..target()
            },
            Target {
                nccl: NcclVersion::new(2, 28, 9),
                ..target()
            },
            Target {
                library: "/opt/nccl/lib/libnccl.so.2".into(),
                ..target()
            },
            Target {
                threads: 256,
                ..target()
            },
            Target {
                nvcc: "/opt/cuda/bin/nvcc".into(),
                ..target()
            },
        ];
        for variant in variants {
            assert_ne!(variant.cache_key(), base.cache_key(), "{variant:?}");
        }
    }

    #[test]
    fn cache_lives_under_xdg_cache_home_or_home() {
        let env = Env {
            xdg_cache_home: Some("/x".into()),
            home: Some("/h".into()),
            ..Env::default()
        };
        assert_eq!(
            cache_root(&env),
            Path::new("/x/nccl-symmem-rs/05_device_lsa")
        );
        let env = Env {
            home: Some("/h".into()),
            ..Env::default()
        };
        assert_eq!(
            cache_root(&env),
            Path::new("/h/.cache/nccl-symmem-rs/05_device_lsa")
        );
    }

    #[test]
    fn a_complete_cache_entry_is_reused_without_nvcc() {
        let tmp = tempfile::tempdir().unwrap();
        let target = Target {
            nvcc: tmp.path().join("no-such-nvcc"),
            ..target()
        };
        let dir = tmp.path().join(target.cache_key());
        touch(&dir.join("allreduce_lsa.cubin"));
        touch(&dir.join("allreduce_lsa_fast.cubin"));
        touch(&dir.join("devcomm_shim.so"));
        let built = build_or_reuse(&target, tmp.path()).unwrap();
        assert!(!built.compiled);
        assert_eq!(built.cubin, dir.join("allreduce_lsa.cubin"));
    }

    #[test]
    fn a_failed_compile_shows_nvccs_message() {
        let tmp = tempfile::tempdir().unwrap();
        // A stand-in "nvcc" that fails the way nvcc does.
        let fake = tmp.path().join("nvcc");
        fs::write(&fake, "#!/bin/sh\necho 'allreduce_lsa.cu(1): error: identifier \"ncclTeamLsa\" is undefined' >&2\nexit 1\n").unwrap();
        fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
        let target = Target {
            nvcc: fake,
            ..target()
        };
        let err = build_or_reuse(&target, &tmp.path().join("cache")).unwrap_err();
        let cannot = err
            .downcast_ref::<CannotRun>()
            .expect("a compile error is exit code 2");
        assert!(
            cannot
                .reason
                .contains("nvcc could not compile allreduce_lsa.cu"),
            "{}",
            cannot.reason
        );
        assert!(
            cannot
                .reason
                .contains("identifier \"ncclTeamLsa\" is undefined"),
            "{}",
            cannot.reason
        );
        assert!(cannot.fix.contains("-arch=sm_90"), "{}", cannot.fix);
    }
}
