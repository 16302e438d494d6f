//! The nvcc route: find nvcc and the NCCL headers, check that the headers are
//! the loaded library's, compile the lesson's kernels and the host shim with
//! nvcc, and cache them.
//!
//! Device-API code is compiled against one NCCL release and only runs with
//! that release, so the build is made here, at run time, against the headers
//! of the library this process loaded, for this GPU's architecture. The result
//! is cached under the user's cache directory (see [`crate::cache`]), keyed by
//! everything that goes into it, so later runs reuse it.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result};
use common::{CannotRun, NcclVersion};

use crate::cache::{self, CacheRoot, Job};
use crate::command::{command_line, Ran};
use crate::env::Env;
use crate::Source;

/// The host shim around `ncclDevCommCreate`/`Destroy`, compiled in: it is the
/// same for every lesson (see [`crate::shim`]).
pub const SHIM_SOURCE: &str = include_str!("../shim/devcomm_shim.cu");
/// The shim's file names in a build directory.
const SHIM_FILE: &str = "devcomm_shim.cu";
const SHIM_LIBRARY: &str = "devcomm_shim.so";

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
    // The toolkit's own place (/usr/local/cuda from the process; none in
    // Env::default(), so that a test sees only what it made).
    candidates.extend(env.default_toolkit.iter().map(|t| t.join("bin/nvcc")));
    // A directory named twice in PATH is looked in once.
    let mut seen = std::collections::HashSet::new();
    candidates.retain(|c| seen.insert(c.clone()));
    candidates
}

/// The first nvcc candidate that exists, or why there is none; refused
/// (exit 2) if another user could change it ([`common::trust`]).
pub fn find_nvcc(env: &Env) -> Result<PathBuf, CannotRun> {
    let nvcc = pick_nvcc(env, &nvcc_candidates(env))?;
    common::trust::check_trusted(&nvcc, "nvcc")?;
    Ok(nvcc)
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

/// The first candidate with both `nccl.h` and `nccl_device.h`; refused
/// (exit 2) if another user could change one of the headers device code
/// includes ([`nccl_header_names`], [`common::trust`]): the shim compiled
/// from them runs in this process.
pub fn find_nccl_headers(env: &Env, library: &Path) -> Result<PathBuf, CannotRun> {
    let candidates = header_candidates(env, library);
    if let Some(found) = candidates
        .iter()
        .find(|dir| dir.join("nccl.h").is_file() && dir.join("nccl_device.h").is_file())
    {
        for name in nccl_header_names(found) {
            let header = found.join(name);
            if let Some(open) = common::trust::find_untrusted(&header) {
                return Err(common::trust::refusal(&header, "NCCL's headers", &open));
            }
        }
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
    /// `-DNAME=VALUE` for every kernel (block size, buffer sizes, ...).
    pub defines: Vec<(String, String)>,
    /// The lesson's kernel sources, each compiled into its own cubin.
    pub kernels: Vec<Source>,
}

impl Target {
    pub fn kernel_args(&self) -> Vec<String> {
        let mut args = vec![
            "-std=c++17".into(),
            format!("-arch={}", self.arch),
            "-cubin".into(),
        ];
        args.extend(self.defines.iter().map(|(n, v)| format!("-D{n}={v}")));
        args.push(format!("-I{}", self.include.display()));
        args
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

    /// Everything that goes into the build, as text: the route, every
    /// source, every flag, the nvcc version and path, the NCCL release, and
    /// which NCCL exactly: the SHA-256 of each of its headers the kernels
    /// and the shim include, and its library's [`cache::file_stamp`]. A
    /// rebuilt NCCL of the same version may lay `ncclDevComm` out otherwise;
    /// any change in them gives a new key and so a new build.
    pub fn key_text(&self) -> String {
        let mut text = format!(
            "route=nvcc\nnvcc={}\nnvcc_version={}\nnccl={}\nlibrary={}\n",
            self.nvcc.display(),
            self.nvcc_version.trim(),
            self.nccl,
            cache::file_stamp(&self.library)
        );
        for (header, hash) in nccl_header_hashes(&self.include) {
            text.push_str(&format!("header={hash}  {header}\n"));
        }
        for arg in self.kernel_args().iter().chain(&self.shim_args()) {
            text.push_str(&format!("arg={arg}\n"));
        }
        for source in self.kernels.iter().chain([&shim_source()]) {
            text.push_str(&format!("source={}\n{}\n", source.file, source.text));
        }
        text
    }

    /// The name of the directory this build is cached in.
    pub fn cache_key(&self) -> String {
        self.job(&|_| Ok(())).key()
    }

    fn job<'a>(&self, compile: &'a dyn Fn(&Path) -> Result<()>) -> Job<'a> {
        let mut outputs: Vec<String> = self.kernels.iter().map(Source::cubin).collect();
        outputs.push(SHIM_LIBRARY.into());
        Job {
            key_text: self.key_text(),
            outputs,
            compile,
        }
    }
}

/// The NCCL headers in `include` that device code includes: `nccl.h`,
/// `nccl_device.h` and every file under `nccl_device/`, in name order.
pub fn nccl_header_names(include: &Path) -> Vec<String> {
    let mut names = vec!["nccl.h".to_string(), "nccl_device.h".to_string()];
    let mut below = Vec::new();
    let mut dirs = vec![PathBuf::from("nccl_device")];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(include.join(&dir)) else {
            continue;
        };
        for entry in entries.flatten() {
            let relative = dir.join(entry.file_name());
            match entry.file_type() {
                Ok(kind) if kind.is_dir() => dirs.push(relative),
                Ok(_) => below.push(relative.to_string_lossy().into_owned()),
                Err(_) => {}
            }
        }
    }
    below.sort();
    names.extend(below);
    names
}

/// The SHA-256 of each of [`nccl_header_names`] (a few hundred KB: read on
/// every run, cache hits included). A header that cannot be read stands as
/// `missing` (its build fails).
pub fn nccl_header_hashes(include: &Path) -> Vec<(String, String)> {
    nccl_header_names(include)
        .into_iter()
        .map(|name| {
            let hash = std::fs::read(include.join(&name))
                .map_or_else(|_| "missing".to_string(), |bytes| cache::sha256_hex(&bytes));
            (name, hash)
        })
        .collect()
}

fn shim_source() -> Source {
    Source {
        file: SHIM_FILE,
        text: SHIM_SOURCE,
    }
}

/// What [`build_or_reuse`] produced: a cubin per kernel source and the shim.
#[derive(Debug, Clone)]
pub struct Built {
    pub build: cache::Built,
    pub shim: PathBuf,
    /// The nvcc commands this build ran, one line each, as a shell would
    /// run them ([`command_line`]); empty when the cache held the build.
    pub commands: Vec<String>,
}

impl Built {
    /// The cubin built from `source`.
    pub fn cubin(&self, source: &Source) -> PathBuf {
        self.build.file(&source.cubin())
    }
}

/// The cached build for `target`, compiling it first if the cache lacks it.
/// If the cache cannot be used safely, says why (once per process) and builds
/// privately instead.
pub fn build_or_reuse(target: &Target, cache_root: &CacheRoot) -> Result<Built> {
    let ran = Ran::default();
    let compile = |dir: &Path| compile_into(target, dir, &ran);
    let build = cache::build_or_reuse(&target.job(&compile), cache_root)?;
    Ok(Built {
        shim: build.file(SHIM_LIBRARY),
        commands: ran.lines_in(&build.dir),
        build,
    })
}

/// Writes every source into `dir` and compiles it there with nvcc.
fn compile_into(target: &Target, dir: &Path, ran: &Ran) -> Result<()> {
    for source in target.kernels.iter().chain([&shim_source()]) {
        std::fs::write(dir.join(source.file), source.text)
            .with_context(|| format!("write {}", source.file))?;
    }
    for kernel in &target.kernels {
        nvcc(
            target,
            &target.kernel_args(),
            dir,
            kernel.file,
            &kernel.cubin(),
            ran,
        )?;
    }
    nvcc(
        target,
        &target.shim_args(),
        dir,
        SHIM_FILE,
        SHIM_LIBRARY,
        ran,
    )
}

fn nvcc(
    target: &Target,
    args: &[String],
    dir: &Path,
    input: &str,
    output: &str,
    ran: &Ran,
) -> Result<()> {
    let mut args = args.to_vec();
    args.extend(["-o".into(), output.into(), input.into()]);
    let line = command_line(dir, &target.nvcc, &args);
    ran.record(dir, line.clone());
    let result = Command::new(&target.nvcc)
        .args(&args)
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
            "the command was: {line}\n\
             check that nvcc supports {} and that the NCCL headers in {} are complete",
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
    use crate::cache::{cache_root, open_cache, BUILD_PREFIX, PRIVATE_PREFIX};
    use common::unix::effective_uid;
    use std::fs::{self, Permissions};
    use std::os::unix::fs::{MetadataExt, PermissionsExt};

    const KERNEL: Source = Source {
        file: "allreduce_lsa.cu",
        text: "extern \"C\" __global__ void allreduce_lsa() {}",
    };
    const FAST: Source = Source {
        file: "allreduce_lsa_fast.cu",
        text: "extern \"C\" __global__ void allreduce_twoshot() {}",
    };

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
            defines: vec![("ALLREDUCE_THREADS".into(), "512".into())],
            kernels: vec![KERNEL, FAST],
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
            default_toolkit: Some("/usr/local/cuda".into()),
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
        // Env::default() names no toolkit directory: a test sees only its own.
        let bare = Env {
            default_toolkit: None,
            ..env.clone()
        };
        assert_eq!(nvcc_candidates(&bare).len(), 3);
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
    fn an_nvcc_others_can_write_is_not_run() {
        let tmp = tempfile::tempdir().unwrap();
        fs::create_dir_all(tmp.path().join("cuda/bin")).unwrap();
        let nvcc = fake_nvcc(&tmp.path().join("cuda/bin"), true);
        let env = Env {
            cuda_home: Some(tmp.path().join("cuda").into()),
            ..Env::default()
        };
        assert_eq!(find_nvcc(&env).unwrap(), nvcc);
        fs::set_permissions(tmp.path().join("cuda"), Permissions::from_mode(0o777)).unwrap();
        let err = find_nvcc(&env).unwrap_err();
        assert!(err.reason.starts_with("nvcc at "), "{err}");
        assert!(err.reason.contains("mode 0777"), "{err}");
        // The same through a link (as /usr/local/cuda is): judged by where it leads.
        fs::set_permissions(tmp.path().join("cuda"), Permissions::from_mode(0o755)).unwrap();
        fs::set_permissions(&nvcc, Permissions::from_mode(0o777)).unwrap();
        std::os::unix::fs::symlink(tmp.path().join("cuda"), tmp.path().join("cuda-link")).unwrap();
        let env = Env {
            cuda_home: Some(tmp.path().join("cuda-link").into()),
            ..Env::default()
        };
        assert!(find_nvcc(&env).unwrap_err().reason.contains("mode 0777"));
    }

    #[test]
    fn the_key_names_the_nccl_headers_and_library_by_content() {
        // A rebuilt NCCL of the same version (another ncclDevComm layout)
        // must not reuse the cubin and shim built against the old one.
        let tmp = tempfile::tempdir().unwrap();
        let include = tmp.path().join("nccl/include");
        let library = tmp.path().join("nccl/lib/libnccl.so.2");
        fs::create_dir_all(include.join("nccl_device")).unwrap();
        fs::write(include.join("nccl.h"), "#define NCCL_MAJOR 2\n").unwrap();
        fs::write(
            include.join("nccl_device.h"),
            "#include \"nccl_device/core.h\"\n",
        )
        .unwrap();
        fs::write(
            include.join("nccl_device/core.h"),
            "struct ncclDevComm { int a; };\n",
        )
        .unwrap();
        touch(&library);
        fs::write(&library, "library 1").unwrap();
        let at = |include: &Path, library: &Path| Target {
            include: include.into(),
            library: library.into(),
            ..target()
        };
        let before = at(&include, &library).cache_key();
        assert_eq!(at(&include, &library).cache_key(), before);
        fs::write(
            include.join("nccl_device/core.h"),
            "struct ncclDevComm { int a, b; };\n",
        )
        .unwrap();
        let new_headers = at(&include, &library).cache_key();
        assert_ne!(new_headers, before, "a changed device header kept the key");
        fs::write(include.join("nccl.h"), "#define NCCL_MAJOR 2 \n").unwrap();
        let new_nccl_h = at(&include, &library).cache_key();
        assert_ne!(new_nccl_h, new_headers, "a changed nccl.h kept the key");
        // The library is named by identity (size, time, inode), not read:
        // replaced by a file of another size, the key changes.
        fs::remove_file(&library).unwrap();
        fs::write(&library, "library 2, rebuilt").unwrap();
        assert_ne!(
            at(&include, &library).cache_key(),
            new_nccl_h,
            "a rebuilt library kept the key"
        );
    }

    #[test]
    fn a_build_without_its_key_record_is_rebuilt_not_reused() {
        let tmp = tempfile::tempdir().unwrap();
        let target = Target {
            nvcc: fake_nvcc(tmp.path(), true),
            ..target()
        };
        let root = tmp.path().join("cache");
        let dir = root.join(target.cache_key());
        touch(&dir.join("allreduce_lsa.cubin"));
        touch(&dir.join("allreduce_lsa_fast.cubin"));
        touch(&dir.join("devcomm_shim.so"));
        let built = build_or_reuse(&target, &CacheRoot::Kept(root)).unwrap();
        assert!(
            built.build.compiled,
            "a directory with no key.txt was reused unchecked"
        );
        assert_eq!(fs::read_to_string(built.cubin(&KERNEL)).unwrap(), "built\n");
        assert!(dir.join(crate::cache::KEY_FILE).is_file());
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
    fn headers_others_can_write_are_not_compiled() {
        // The shim compiled from them runs in this process.
        let tmp = tempfile::tempdir().unwrap();
        let wheel = tmp.path().join("nvidia/nccl");
        let library = wheel.join("lib/libnccl.so.2");
        touch(&library);
        touch(&wheel.join("include/nccl.h"));
        touch(&wheel.join("include/nccl_device.h"));
        touch(&wheel.join("include/nccl_device/core.h"));
        assert!(find_nccl_headers(&Env::default(), &library).is_ok());
        let open = wheel.join("include/nccl_device");
        fs::set_permissions(&open, Permissions::from_mode(0o777)).unwrap();
        let err = find_nccl_headers(&Env::default(), &library).unwrap_err();
        assert!(err.reason.contains("NCCL's headers at "), "{err}");
        assert!(
            err.reason
                .contains(&format!("{} has mode 0777", open.display())),
            "{err}"
        );
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
                defines: vec![("ALLREDUCE_THREADS".into(), "256".into())],
                ..target()
            },
            Target {
                kernels: vec![KERNEL],
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
            env.cache_root("05_device_lsa"),
            CacheRoot::Kept("/x/nccl-symmem-rs/05_device_lsa".into())
        );
        let env = Env {
            xdg_cache_home: Some("relative/cache".into()),
            home: Some("/h".into()),
            ..Env::default()
        };
        assert_eq!(
            env.cache_root("05_device_lsa"),
            CacheRoot::Kept("/h/.cache/nccl-symmem-rs/05_device_lsa".into())
        );
    }

    #[test]
    fn without_home_there_is_no_cache_and_never_the_temp_dir() {
        // It used to be the system temporary directory: a predictable path
        // another user could create first, with a shim of theirs in it.
        let CacheRoot::Private { why } = cache_root(None, None, "05_device_lsa") else {
            panic!("expected no cache")
        };
        assert!(why.contains("neither XDG_CACHE_HOME nor HOME"), "{why}");
    }

    /// A stand-in nvcc that writes its `-o` file, or fails like nvcc.
    fn fake_nvcc(dir: &Path, works: bool) -> PathBuf {
        let script = if works {
            "#!/bin/sh\nwhile [ $# -gt 0 ]; do [ \"$1\" = -o ] && out=$2; shift; done\necho built > \"$out\"\n"
        } else {
            "#!/bin/sh\necho 'allreduce_lsa.cu(1): error: identifier \"ncclTeamLsa\" is undefined' >&2\nexit 1\n"
        };
        let fake = dir.join(if works { "nvcc" } else { "failing-nvcc" });
        fs::write(&fake, script).unwrap();
        fs::set_permissions(&fake, Permissions::from_mode(0o755)).unwrap();
        fake
    }

    fn mode(path: &Path) -> u32 {
        fs::symlink_metadata(path).unwrap().mode() & 0o7777
    }

    fn build_dirs(root: &Path) -> Vec<String> {
        testkit::leftovers(root, &[BUILD_PREFIX])
    }

    #[test]
    fn the_cache_is_made_private_and_builds_land_in_it() {
        let tmp = tempfile::tempdir().unwrap();
        let target = Target {
            nvcc: fake_nvcc(tmp.path(), true),
            ..target()
        };
        let root = tmp.path().join("cache/nccl-symmem-rs/05_device_lsa");
        let built = build_or_reuse(&target, &CacheRoot::Kept(root.clone())).unwrap();
        assert!(built.build.compiled);
        assert_eq!(
            built.cubin(&KERNEL),
            root.join(target.cache_key()).join("allreduce_lsa.cubin")
        );
        assert_eq!(mode(&root), 0o700);
        assert_eq!(mode(root.parent().unwrap()), 0o700);
        assert_eq!(mode(&built.shim) & 0o022, 0);
        assert_eq!(build_dirs(&root), Vec::<String>::new());
        // A cache this user made readable by others, in an earlier version, is tightened.
        fs::set_permissions(&root, Permissions::from_mode(0o755)).unwrap();
        let again = build_or_reuse(&target, &CacheRoot::Kept(root.clone())).unwrap();
        assert!(!again.build.compiled);
        assert_eq!(mode(&root), 0o700);
    }

    #[test]
    fn a_cache_others_can_write_is_not_loaded_from() {
        let tmp = tempfile::tempdir().unwrap();
        let target = Target {
            nvcc: fake_nvcc(tmp.path(), true),
            ..target()
        };
        // Another user's shim, planted where the cache key says it would be.
        let root = tmp.path().join("shared-cache");
        let planted = root.join(target.cache_key());
        touch(&planted.join("allreduce_lsa.cubin"));
        touch(&planted.join("devcomm_shim.so"));
        fs::set_permissions(&root, Permissions::from_mode(0o777)).unwrap();
        let why = open_cache(&root).unwrap_err();
        assert!(
            why.contains("has mode 0777: other users can write to it"),
            "{why}"
        );
        assert!(why.contains("chmod 700"), "{why}");
        let built = build_or_reuse(&target, &CacheRoot::Kept(root.clone())).unwrap();
        assert!(built.build.compiled, "the planted build was used");
        assert!(!built.shim.starts_with(&root), "{}", built.shim.display());
        let private = built.shim.parent().unwrap().to_path_buf();
        assert_eq!(mode(&private), 0o700);
        drop(built);
        assert!(
            !private.exists(),
            "the private build directory was not removed"
        );
    }

    #[test]
    fn a_cache_under_a_directory_others_can_write_is_refused() {
        let tmp = tempfile::tempdir().unwrap();
        let open = tmp.path().join("open");
        fs::create_dir(&open).unwrap();
        fs::set_permissions(&open, Permissions::from_mode(0o777)).unwrap();
        let why = open_cache(&open.join("cache")).unwrap_err();
        assert!(
            why.contains("so another user could replace the cache"),
            "{why}"
        );
        // Sticky, as /tmp is: others cannot rename what is ours in it.
        fs::set_permissions(&open, Permissions::from_mode(0o1777)).unwrap();
        assert_eq!(open_cache(&open.join("cache")), Ok(()));
    }

    #[test]
    fn a_cache_of_another_user_is_refused() {
        // Only root can make one; elsewhere the ownership check is covered by code review.
        if effective_uid() != 0 {
            return;
        }
        let tmp = tempfile::tempdir().unwrap();
        let theirs = tmp.path().join("theirs");
        fs::create_dir(&theirs).unwrap();
        fs::set_permissions(&theirs, Permissions::from_mode(0o700)).unwrap();
        std::os::unix::fs::chown(&theirs, Some(65534), None).unwrap();
        let why = open_cache(&theirs).unwrap_err();
        assert!(
            why.contains("belongs to uid 65534, not to this user"),
            "{why}"
        );
    }

    #[test]
    fn without_a_cache_the_ranks_of_a_process_share_one_private_build() {
        let tmp = tempfile::tempdir().unwrap();
        let target = Target {
            nvcc: fake_nvcc(tmp.path(), true),
            ..target()
        };
        let none = CacheRoot::Private {
            why: "a test".into(),
        };
        let first = build_or_reuse(&target, &none).unwrap();
        let second = build_or_reuse(&target, &none).unwrap();
        assert!(first.build.compiled && !second.build.compiled);
        assert_eq!(first.cubin(&KERNEL), second.cubin(&KERNEL));
        let dir = first.build.dir.clone();
        assert!(dir
            .file_name()
            .unwrap()
            .to_string_lossy()
            .starts_with(PRIVATE_PREFIX));
        assert_eq!(mode(&dir), 0o700);
        drop(first);
        assert!(dir.exists(), "removed while a rank still used it");
        drop(second);
        assert!(!dir.exists(), "the private build directory was not removed");
    }

    #[test]
    fn a_failed_compile_shows_nvccs_message_and_leaves_no_build_directory() {
        let tmp = tempfile::tempdir().unwrap();
        let target = Target {
            nvcc: fake_nvcc(tmp.path(), false),
            ..target()
        };
        let root = tmp.path().join("cache");
        let err = build_or_reuse(&target, &CacheRoot::Kept(root.clone())).unwrap_err();
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
        // It used to leave its .build-<pid>-<n> behind.
        assert_eq!(build_dirs(&root), Vec::<String>::new());
    }

    #[test]
    fn a_build_directory_left_by_a_killed_process_is_removed() {
        let tmp = tempfile::tempdir().unwrap();
        let target = Target {
            nvcc: fake_nvcc(tmp.path(), true),
            ..target()
        };
        let root = tmp.path().join("cache");
        let stale = root.join(testkit::stale_dir_name(BUILD_PREFIX));
        fs::create_dir_all(&stale).unwrap();
        build_or_reuse(&target, &CacheRoot::Kept(root.clone())).unwrap();
        assert!(!stale.exists());
        assert_eq!(build_dirs(&root), Vec::<String>::new());
    }
}
