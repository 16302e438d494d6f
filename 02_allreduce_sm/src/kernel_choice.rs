//! Which kernel did NCCL run? The evidence lesson 02 prints in Step 8.
//!
//! Registering windows does not make NCCL use them. The communicator decides
//! at `ncclCommInitRank` whether it supports symmetric memory (one node,
//! every GPU pair reachable by CUDA P2P, cuMem on, `NCCL_WIN_ENABLE` not 0),
//! and each collective then qualifies or not (both buffers in windows, sum on
//! fp32/fp16/bf16/fp8, not too large). NCCL 2.28 decides both silently and
//! still returns a usable window without support: the AllReduce then runs
//! NCCL's ordinary ring or tree kernels, correct but not symmetric.
//!
//! Two sources can tell:
//!
//! * **NCCL's own log**, on every release: with `NCCL_DEBUG=INFO` and the
//!   `TUNING` subsystem, rank 0 logs one line per collective,
//!   `AllReduce [Symmetric]: <bytes> Bytes -> Kernel <name> ...` for a
//!   symmetric kernel, `AllReduce: <bytes> Bytes -> Algo <algo> proto <proto> ...`
//!   otherwise. [`NcclLog::capture`] sends that log to a file only this
//!   process can reach (`NCCL_DEBUG_FILE`) before NCCL starts, so the
//!   program can read it.
//! * **`ncclCommQueryProperties`**, from NCCL 2.29: its `deviceApiSupport`
//!   is the communicator's symmetric-memory support.

use std::ffi::{c_int, c_uint};
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::os::fd::FromRawFd;

use anyhow::{Context, Result};
use common::nccl::{sys, NcclCheck};

/// The variables that steer NCCL's log. If the user set any of them, the log
/// is theirs: we neither redirect it nor read it.
const USER_VARIABLES: [&str; 3] = ["NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE"];

/// NCCL's log of its tuning decisions, in a file only this process can
/// reach, or why not.
pub enum NcclLog {
    Captured(File),
    NotCaptured(String),
}

impl NcclLog {
    /// Points NCCL's log at an anonymous in-memory file (`memfd_create`).
    /// NCCL opens it by the name `/proc/self/fd/<fd>`; nothing is created on
    /// disk, so nothing is left behind however the run ends. Call this before
    /// any NCCL call and before any thread starts: NCCL reads these variables
    /// once, when it first logs.
    pub fn capture() -> Self {
        if let Some(set) = USER_VARIABLES
            .iter()
            .find(|name| std::env::var_os(name).is_some())
        {
            return Self::NotCaptured(format!(
                "{set} is set, so NCCL's log is yours: look in it for \"AllReduce [Symmetric]\""
            ));
        }
        // SAFETY: a NUL-terminated name and valid flags; the fd is checked.
        let fd = unsafe { libc::memfd_create(c"nccl-log".as_ptr(), libc::MFD_CLOEXEC) };
        if fd < 0 {
            return Self::NotCaptured(format!(
                "no file for NCCL's log: memfd_create: {}",
                std::io::Error::last_os_error()
            ));
        }
        // SAFETY: `fd` is a new descriptor that nothing else owns.
        let file = unsafe { File::from_raw_fd(fd) };
        // Edition 2021: set_var is safe; no other thread exists yet.
        std::env::set_var("NCCL_DEBUG", "INFO");
        std::env::set_var("NCCL_DEBUG_SUBSYS", "TUNING");
        std::env::set_var("NCCL_DEBUG_FILE", format!("/proc/self/fd/{fd}"));
        Self::Captured(file)
    }

    /// What rank 0's log says about the last AllReduce of `bytes` bytes on a
    /// communicator of `ranks` ranks.
    pub fn allreduce_choice(&self, bytes: usize, ranks: usize) -> Result<Choice> {
        match self {
            Self::Captured(file) => {
                let mut log = String::new();
                // `&File` reads through our own descriptor, from its start:
                // NCCL writes through a descriptor of its own.
                let mut reader = file;
                reader
                    .seek(SeekFrom::Start(0))
                    .and_then(|_| reader.read_to_string(&mut log))
                    .context("read NCCL's log")?;
                Ok(allreduce_choice(&log, bytes).unwrap_or_else(|| {
                    Choice::Unknown(if ranks == 1 {
                        // ncclLaunchOneRank (enqueue.cc): a local copy, no kernel choice to log.
                        "with 1 rank NCCL copies the buffer instead of choosing a kernel".into()
                    } else {
                        "NCCL's log has no line for this AllReduce".into()
                    })
                }))
            }
            Self::NotCaptured(why) => Ok(Choice::Unknown(why.clone())),
        }
    }
}

/// What NCCL ran for one collective.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Choice {
    /// A symmetric kernel, by name (e.g. `AllReduce_RSxLD_AGxST`).
    Symmetric(String),
    /// An ordinary algorithm and protocol (e.g. `RING`, `SIMPLE`).
    Ordinary { algorithm: String, protocol: String },
    /// Not known, and why.
    Unknown(String),
}

impl Choice {
    /// The lesson's last line: it claims symmetric memory only when NCCL's
    /// log shows a symmetric kernel.
    pub fn summary(&self) -> &'static str {
        match self {
            Self::Symmetric(_) => "Example completed - demonstrated symmetric memory lifecycle",
            Self::Ordinary { .. } => {
                "Example completed - windows registered, but NCCL ran an ordinary kernel: no symmetric memory in effect"
            }
            Self::Unknown(_) => {
                "Example completed - windows registered; whether NCCL used symmetric memory was not determined"
            }
        }
    }
}

impl std::fmt::Display for Choice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Symmetric(kernel) => write!(f, "symmetric kernel {kernel} (NCCL's log)"),
            Self::Ordinary {
                algorithm,
                protocol,
            } => write!(
                f,
                "Algo {algorithm} proto {protocol} (NCCL's log), not a symmetric kernel: see the README's Common issues"
            ),
            Self::Unknown(why) => write!(f, "not determined: {why}"),
        }
    }
}

/// The last line of `log` about an AllReduce of `bytes` bytes, read as a
/// [`Choice`]; `None` if there is none.
fn allreduce_choice(log: &str, bytes: usize) -> Option<Choice> {
    let symmetric = format!("AllReduce [Symmetric]: {bytes} Bytes -> Kernel ");
    let ordinary = format!("AllReduce: {bytes} Bytes -> Algo ");
    log.lines().rev().find_map(|line| {
        if let Some((_, rest)) = line.split_once(&symmetric) {
            let kernel = rest.split_whitespace().next()?;
            return Some(Choice::Symmetric(kernel.to_string()));
        }
        let (_, rest) = line.split_once(&ordinary)?;
        let mut words = rest.split_whitespace();
        let algorithm = words.next()?.to_string();
        (words.next()? == "proto").then_some(())?;
        let protocol = words.next()?.to_string();
        Some(Choice::Ordinary {
            algorithm,
            protocol,
        })
    })
}

/// `ncclCommProperties_t` as NCCL 2.29.2 declares it (`nccl_device/core.h`).
/// Later releases append members; the `size` and `version` we pass tell them
/// to fill only these.
#[repr(C)]
struct CommProperties {
    size: usize,
    magic: c_uint,
    version: c_uint,
    rank: c_int,
    n_ranks: c_int,
    cuda_dev: c_int,
    nvml_dev: c_int,
    device_api_support: bool,
    multimem_support: bool,
    gin_type: u8,
}

/// `NCCL_API_MAGIC`: NCCL refuses a properties struct without it.
const NCCL_API_MAGIC: c_uint = 0xcafe_beef;
/// `NCCL_VERSION(2, 29, 2)`: the release whose layout [`CommProperties`] is.
const PROPERTIES_VERSION: c_uint = 22902;

type QueryProperties =
    unsafe extern "C" fn(sys::ncclComm_t, *mut CommProperties) -> sys::ncclResult_t;

/// `ncclCommQueryProperties(comm, &props).deviceApiSupport`: whether this
/// communicator supports symmetric memory. `None` before NCCL 2.29, which
/// does not have the call.
pub fn symmetric_support(comm: sys::ncclComm_t) -> Result<Option<bool>> {
    // SAFETY: looking a symbol up in the NCCL cudarc loaded has no side
    // effects; if present, it has the signature above (2.29+).
    let query = match unsafe { sys::culib().get::<QueryProperties>(b"ncclCommQueryProperties\0") } {
        Ok(symbol) => *symbol,
        Err(_) => return Ok(None),
    };
    let mut props = CommProperties {
        size: std::mem::size_of::<CommProperties>(),
        magic: NCCL_API_MAGIC,
        version: PROPERTIES_VERSION,
        rank: 0,
        n_ranks: 0,
        cuda_dev: 0,
        nvml_dev: 0,
        device_api_support: false,
        multimem_support: false,
        gin_type: 0,
    };
    // SAFETY: `comm` is live; `props` is the 2.29.2 struct, initialised as
    // NCCL_COMM_PROPERTIES_INITIALIZER does.
    unsafe { query(comm, &mut props) }.check("ncclCommQueryProperties")?;
    Ok(Some(props.device_api_support))
}

#[cfg(test)]
mod tests {
    use super::*;

    // Lines as NCCL 2.28.3 wrote them on 2 x H200 (runs/2026-11-22).
    const SYMMETRIC: &str = "vm:2755:2773 [0] NCCL INFO AllReduce [Symmetric]: 4194304 Bytes -> Kernel AllReduce_RSxLD_AGxST nchannels 7 nthreads 512 nWorks 1";
    const RING: &str = "vm:2755:2773 [0] NCCL INFO AllReduce: 4194304 Bytes -> Algo RING proto SIMPLE channel{Lo..Hi}={0..1}";

    #[test]
    fn reads_the_symmetric_kernel_from_the_log() {
        let log = format!("vm:1:1 [0] NCCL INFO NCCL version 2.28.3\n{SYMMETRIC}\n");
        assert_eq!(
            allreduce_choice(&log, 4194304),
            Some(Choice::Symmetric("AllReduce_RSxLD_AGxST".into()))
        );
    }

    #[test]
    fn reads_the_ordinary_algorithm_from_the_log() {
        assert_eq!(
            allreduce_choice(RING, 4194304),
            Some(Choice::Ordinary {
                algorithm: "RING".into(),
                protocol: "SIMPLE".into()
            })
        );
    }

    #[test]
    fn the_last_line_for_the_size_counts_and_other_sizes_do_not() {
        let log = format!("{RING}\n{SYMMETRIC}\n");
        assert_eq!(
            allreduce_choice(&log, 4194304),
            Some(Choice::Symmetric("AllReduce_RSxLD_AGxST".into()))
        );
        assert_eq!(allreduce_choice(&log, 4096), None);
        assert_eq!(allreduce_choice("", 4194304), None);
    }

    /// NCCL fopen()s the name in NCCL_DEBUG_FILE with "w" and writes lines;
    /// the lesson reads them back through its own descriptor.
    #[test]
    fn what_is_written_to_the_log_name_is_read_back() {
        for name in USER_VARIABLES {
            std::env::remove_var(name);
        }
        let log = NcclLog::capture();
        let path = std::env::var("NCCL_DEBUG_FILE").expect("NCCL_DEBUG_FILE set");
        assert!(path.starts_with("/proc/self/fd/"), "{path}");
        assert_eq!(std::env::var("NCCL_DEBUG_SUBSYS").as_deref(), Ok("TUNING"));
        std::fs::write(&path, format!("{RING}\n")).expect("write as NCCL would");
        assert_eq!(
            log.allreduce_choice(4194304, 2).expect("read back"),
            Choice::Ordinary {
                algorithm: "RING".into(),
                protocol: "SIMPLE".into()
            }
        );
        // A user's own NCCL_DEBUG is left alone.
        assert!(
            matches!(NcclLog::capture(), NcclLog::NotCaptured(why) if why.contains("NCCL_DEBUG is set"))
        );
    }

    #[test]
    fn properties_have_the_2_29_2_layout() {
        // size_t, 2 x unsigned, 4 x int, 2 x bool, one uint8 enum, padded to 8.
        assert_eq!(std::mem::size_of::<CommProperties>(), 40);
        assert_eq!(std::mem::offset_of!(CommProperties, rank), 16);
        assert_eq!(std::mem::offset_of!(CommProperties, device_api_support), 32);
        assert_eq!(std::mem::offset_of!(CommProperties, gin_type), 34);
    }
}
