//! Which GPU each rank of a node drives: one GPU per rank, or, when the user
//! asks for it in NCCL's own way, several ranks on one GPU.
//!
//! NCCL 2.30 and later let ranks share a GPU when `NCCL_MULTI_RANK_GPU_ENABLE`
//! is set (to 1; NCCL's `env.rst` calls it experimental). Without it NCCL
//! stops at `ncclCommInitRank` with "Multiple Ranks are using the same GPU";
//! 2.28 and 2.29 stop with "Duplicate GPU detected" whatever the variable
//! says. So the launcher refuses more ranks than GPUs (exit code 2) unless
//! the variable is set and the loaded NCCL is new enough, and its message
//! says which of the two is missing.
//!
//! Ranks go round robin: rank r (in MPI mode, the rank within the node)
//! drives GPU r mod G, as `cudaSetDevice(rank % count)` does in NCCL's and
//! most MPI programs. With 4 ranks on 2 GPUs, ranks 0 and 2 share GPU 0.
//!
//! Ranks that share a GPU share its multiprocessors. A kernel whose blocks
//! wait for other blocks or other ranks (an LSA barrier, a cooperative grid,
//! every NCCL kernel) progresses only if all of them are resident at once,
//! every rank's together. So each rank takes at most its share of the GPU:
//! [`RankContext::share_of_gpu`](crate::RankContext::share_of_gpu) for the
//! lessons' own kernels, [`nccl_max_ctas`] for NCCL's (see
//! [`comm_config`](crate::nccl::comm_config)).

use std::ffi::OsStr;

use crate::lesson::plural;
use crate::preflight::{NcclVersion, Needs};
use crate::CannotRun;

/// NCCL's switch for ranks that share a GPU.
pub const MULTI_RANK_VARIABLE: &str = "NCCL_MULTI_RANK_GPU_ENABLE";

/// NCCL's switch between connecting ranks at their first collective (1,
/// its default) and at `ncclCommInitRank` (0).
pub const RUNTIME_CONNECT_VARIABLE: &str = "NCCL_RUNTIME_CONNECT";

/// The first NCCL release that lets ranks share a GPU.
pub const FIRST_SHARING_NCCL: NcclVersion = NcclVersion::new(2, 30, 0);

/// What `NCCL_MULTI_RANK_GPU_ENABLE` says, read as NCCL reads it (an
/// integer; anything but 0 turns sharing on; a value that is not an integer
/// leaves NCCL's default, 0).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MultiRank {
    /// Not set, or set to 0.
    Off,
    /// Set to a value NCCL reads as on, e.g. `1`.
    On(String),
    /// Set to a value NCCL does not read as a number, e.g. `yes`.
    NotANumber(String),
}

impl MultiRank {
    /// Reads the variable's value (`None`: unset).
    pub fn read(value: Option<&OsStr>) -> Self {
        let Some(value) = value else {
            return MultiRank::Off;
        };
        let text = value.to_string_lossy().into_owned();
        match parse_c_integer(&text) {
            Some(0) => MultiRank::Off,
            Some(_) => MultiRank::On(text),
            None => MultiRank::NotANumber(text),
        }
    }

    /// This process's `NCCL_MULTI_RANK_GPU_ENABLE`.
    pub fn from_process() -> Self {
        Self::read(std::env::var_os(MULTI_RANK_VARIABLE).as_deref())
    }

    pub fn is_on(&self) -> bool {
        matches!(self, MultiRank::On(_))
    }
}

/// An integer as C's `strtoll(text, &end, 0)` reads it when the whole text
/// is the number (NCCL's rule for its variables): decimal, `0x` hex or
/// leading-0 octal, with an optional sign.
fn parse_c_integer(text: &str) -> Option<i64> {
    let (negative, digits) = match text.as_bytes().first()? {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    let value = if let Some(hex) = digits
        .strip_prefix("0x")
        .or_else(|| digits.strip_prefix("0X"))
    {
        i64::from_str_radix(hex, 16).ok()?
    } else if digits.len() > 1 && digits.starts_with('0') {
        i64::from_str_radix(&digits[1..], 8).ok()?
    } else {
        digits
            .parse::<u64>()
            .ok()
            .and_then(|v| i64::try_from(v).ok())?
    };
    Some(if negative { -value } else { value })
}

/// What decides where a node's ranks run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    /// Ranks on this node: `NTHREADS`, or the MPI processes of the node.
    pub ranks_here: usize,
    /// GPUs the CUDA driver sees.
    pub gpus: usize,
    /// MPI mode (one process per rank) rather than thread mode.
    pub mpi: bool,
    /// `NCCL_MULTI_RANK_GPU_ENABLE`.
    pub multi_rank: MultiRank,
    /// The NCCL the program loaded; `None` for a program without NCCL
    /// (lesson 04), whose ranks may share a GPU on the same request.
    pub nccl: Option<NcclVersion>,
}

/// Where a node's ranks run: rank r (within the node) on GPU r mod `gpus`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Placement {
    pub ranks_here: usize,
    pub gpus: usize,
}

impl Placement {
    /// The GPU that rank `local_rank` of this node drives.
    pub fn device_of(&self, local_rank: usize) -> usize {
        local_rank % self.gpus.max(1)
    }

    /// How many of this node's ranks drive GPU `device`.
    pub fn ranks_on(&self, device: usize) -> usize {
        (0..self.ranks_here)
            .filter(|&r| self.device_of(r) == device)
            .count()
    }

    /// The most ranks any GPU of this node holds (1: each rank has its own).
    pub fn most_per_gpu(&self) -> usize {
        self.ranks_here.div_ceil(self.gpus.max(1)).max(1)
    }

    /// The GPUs that have ranks.
    pub fn gpus_used(&self) -> usize {
        self.ranks_here.min(self.gpus)
    }

    /// Do ranks share a GPU?
    pub fn shares(&self) -> bool {
        self.most_per_gpu() > 1
    }
}

/// Decides where the ranks run, or why they cannot (exit code 2, with the fix).
pub fn place(request: &Request) -> Result<Placement, CannotRun> {
    let Request {
        ranks_here,
        gpus,
        mpi,
        ref multi_rank,
        nccl,
    } = *request;
    let placement = Placement { ranks_here, gpus };
    if ranks_here <= gpus {
        return Ok(placement);
    }
    let (asked, fewer) = if mpi {
        (
            format!(
                "{ranks_here} MPI processes share this node, but it has only {gpus} GPU{}",
                plural(gpus)
            ),
            format!(
                "start at most {gpus} process{} per node, e.g. mpirun -np {gpus}",
                if gpus == 1 { "" } else { "es" }
            ),
        )
    } else {
        (
            format!(
                "NTHREADS={ranks_here} asks for {ranks_here} ranks, but only {gpus} GPU{} {} visible",
                plural(gpus),
                if gpus == 1 { "is" } else { "are" }
            ),
            format!(
                "set NTHREADS to {gpus} or fewer, or make more GPUs visible (CUDA_VISIBLE_DEVICES)"
            ),
        )
    };
    let share = if mpi {
        format!("mpirun -np {ranks_here} -x {MULTI_RANK_VARIABLE}=1 <program>, under CUDA MPS")
    } else {
        format!("{MULTI_RANK_VARIABLE}=1 NTHREADS={ranks_here} <program>")
    };
    let chapter = "(see the book's \"One GPU, several ranks\")";
    match (multi_rank, nccl) {
        (MultiRank::On(_), None) => Ok(placement),
        (MultiRank::On(_), Some(version)) if version >= FIRST_SHARING_NCCL => Ok(placement),
        (MultiRank::On(value), Some(version)) => Err(CannotRun::new(
            format!(
                "{MULTI_RANK_VARIABLE}={value} asks {ranks_here} ranks to share {gpus} GPU{}, but NCCL {version} cannot: \
                 ranks share a GPU from NCCL {FIRST_SHARING_NCCL} (older releases stop with \"Duplicate GPU detected\")",
                plural(gpus)
            ),
            format!(
                "load NCCL {FIRST_SHARING_NCCL} or newer: pip install nvidia-nccl-cu13 (-cu12 for CUDA 12), or NCCL_HOME=<its directory>;\n\
                 or {fewer}"
            ),
        )),
        (_, Some(version)) if version < FIRST_SHARING_NCCL => Err(CannotRun::new(
            format!("{asked}: with NCCL {version} each rank needs a GPU of its own"),
            format!(
                "{fewer};\nor let ranks share a GPU, which NCCL allows from {FIRST_SHARING_NCCL}: load NCCL {FIRST_SHARING_NCCL} or newer \
                 with pip install nvidia-nccl-cu13 (-cu12 for CUDA 12) or NCCL_HOME=<its directory>, then {share} {chapter}"
            ),
        )),
        (MultiRank::NotANumber(value), _) => Err(CannotRun::new(
            format!(
                "{asked}, and {MULTI_RANK_VARIABLE}={value:?} does not let them share one: \
                 it is not a number, which NCCL reads as 0"
            ),
            format!("set {MULTI_RANK_VARIABLE}=1 to let ranks share a GPU: {share} {chapter};\nor {fewer}"),
        )),
        (MultiRank::Off, nccl) => Err(CannotRun::new(
            format!(
                "{asked}: each rank needs a GPU of its own unless {MULTI_RANK_VARIABLE}=1 lets ranks share one"
            ),
            format!(
                "{fewer};\nor let ranks share a GPU{}: {share} {chapter}",
                match nccl {
                    Some(version) => format!(" (NCCL {version} allows it; experimental)"),
                    None => " (this program uses no NCCL; the variable is how every lesson here is asked)".into(),
                }
            ),
        )),
    }
}

/// Where the `ranks_here` ranks of a program that needs `needs` run, on a
/// node of `gpus` GPUs: [`place`] for a program that needs a GPU; a
/// program that needs none (the launcher's own probe) puts rank r on
/// "device" r and shares nothing.
pub fn place_program(
    needs: Needs,
    ranks_here: usize,
    gpus: usize,
    mpi: bool,
    nccl: Option<NcclVersion>,
) -> Result<Placement, CannotRun> {
    if needs == Needs::Nothing {
        return Ok(Placement {
            ranks_here,
            gpus: ranks_here,
        });
    }
    place(&Request {
        ranks_here,
        gpus,
        mpi,
        multi_rank: MultiRank::from_process(),
        nccl,
    })
}

/// The launch line of the banner for thread mode: `4 ranks, one thread per
/// GPU`, or, when ranks share GPUs, `4 ranks on 1 GPU, one thread each
/// (NCCL_MULTI_RANK_GPU_ENABLE=1)`.
pub fn thread_launch_text(placement: &Placement, multi_rank: &MultiRank) -> String {
    let ranks = placement.ranks_here;
    if !placement.shares() {
        return format!("{ranks} rank{}, one thread per GPU", plural(ranks));
    }
    let gpus = placement.gpus_used();
    format!(
        "{ranks} ranks on {gpus} GPU{}, one thread each ({})",
        plural(gpus),
        multi_rank_text(multi_rank)
    )
}

/// The launch line of the banner for MPI mode: `2 ranks, one MPI process
/// per GPU, 1 node`, or, when processes share GPUs, `4 ranks, one MPI
/// process each, 1 node, up to 4 per GPU (NCCL_MULTI_RANK_GPU_ENABLE=1, MPS)`.
pub fn mpi_launch_text(
    ranks: usize,
    nodes: usize,
    ranks_per_gpu: usize,
    multi_rank: &MultiRank,
) -> String {
    if ranks_per_gpu <= 1 {
        return format!(
            "{ranks} rank{}, one MPI process per GPU, {nodes} node{}",
            plural(ranks),
            plural(nodes)
        );
    }
    format!(
        "{ranks} ranks, one MPI process each, {nodes} node{}, up to {ranks_per_gpu} per GPU ({}, MPS)",
        plural(nodes),
        multi_rank_text(multi_rank)
    )
}

/// `NCCL_MULTI_RANK_GPU_ENABLE=1`, as the user set it.
pub fn multi_rank_text(multi_rank: &MultiRank) -> String {
    match multi_rank {
        MultiRank::On(value) => format!("{MULTI_RANK_VARIABLE}={value}"),
        _ => format!("{MULTI_RANK_VARIABLE} unset"),
    }
}

/// Thread mode, when the user asks ranks to share GPUs
/// (`NCCL_MULTI_RANK_GPU_ENABLE` on): sets `NCCL_RUNTIME_CONNECT=0` unless the
/// user set it, so that NCCL connects the ranks inside `ncclCommInitRank`
/// rather than in their first collective. Returns whether it set it.
///
/// Why: ranks that share a GPU in one process share its CUDA context, and
/// any CUDA call may wait for the kernels running in that context (CUDA's
/// documentation says so). With NCCL's default, a rank still connecting in
/// its first collective can wait for a peer's kernel of that collective,
/// which waits for this rank: lesson 03 hung so in its first `ncclAllGather`
/// at 5 to 8 ranks on one GPU, and ran with `NCCL_RUNTIME_CONNECT=0`
/// (runs/2026-11-25, calls 42, 47 and 52). Inside `ncclCommInitRank` no
/// rank has launched anything yet. MPI mode needs none of this: there each
/// process has its own context.
///
/// Call it while the process has one thread: NCCL reads the variable once,
/// at its first communicator, and setting a variable while other threads
/// may read the environment is not safe.
pub fn connect_at_init_when_sharing() -> bool {
    if !MultiRank::from_process().is_on() || std::env::var_os(RUNTIME_CONNECT_VARIABLE).is_some() {
        return false;
    }
    // Edition 2021: set_var is safe; the caller makes sure no other thread exists.
    std::env::set_var(RUNTIME_CONNECT_VARIABLE, "0");
    SET_RUNTIME_CONNECT.store(true, std::sync::atomic::Ordering::Relaxed);
    true
}

/// Whether [`connect_at_init_when_sharing`] set the variable in this process.
static SET_RUNTIME_CONNECT: std::sync::atomic::AtomicBool =
    std::sync::atomic::AtomicBool::new(false);

/// Did this process set `NCCL_RUNTIME_CONNECT=0` (see
/// [`connect_at_init_when_sharing`])?
pub fn runtime_connect_set_here() -> bool {
    SET_RUNTIME_CONNECT.load(std::sync::atomic::Ordering::Relaxed)
}

/// NCCL's blocks per rank when `ranks_per_gpu` ranks share a GPU of
/// `multiprocessors` multiprocessors: their share of one block per
/// multiprocessor, rounded down to a power of two (NCCL rounds its
/// point-to-point channels up to one, so a cap that is not a power of two
/// could be exceeded), at least 1. `None` when a rank has its GPU to itself:
/// NCCL's own default then.
///
/// One block per multiprocessor is the conservative count: an NCCL block
/// uses up to 640 threads and much shared memory, and the rank beside it may
/// be running a kernel of its own.
pub fn nccl_max_ctas(multiprocessors: u32, ranks_per_gpu: usize) -> Option<u32> {
    if ranks_per_gpu <= 1 {
        return None;
    }
    let share = (multiprocessors as usize / ranks_per_gpu).max(1) as u32;
    Some(1 << share.ilog2())
}

/// The note the launcher prints (stderr) when ranks share a GPU: what it
/// capped, and what the user's own `NCCL_MAX_CTAS` does to that.
pub fn sharing_note(
    ranks_per_gpu: usize,
    multiprocessors: u32,
    uses_nccl: bool,
    user_max_ctas: Option<&str>,
) -> String {
    let mut note = format!(
        "note: up to {ranks_per_gpu} ranks share each GPU ({multiprocessors} multiprocessors): \
         kernels that wait for other blocks or ranks take at most 1/{ranks_per_gpu} of the GPU's resident blocks per rank"
    );
    if !uses_nccl {
        return note;
    }
    let Some(cap) = nccl_max_ctas(multiprocessors, ranks_per_gpu) else {
        return note;
    };
    match user_max_ctas {
        None => note.push_str(&format!(
            ", and NCCL's at most {cap} (maxCTAs in each communicator's ncclConfig_t; set NCCL_MAX_CTAS to choose)"
        )),
        Some(value) => {
            note.push_str(&format!(", and NCCL's as NCCL_MAX_CTAS={value} says (yours; it overrides the config's {cap})"));
            if value.trim().parse::<u32>().is_ok_and(|v| v > cap) {
                note.push_str(&format!(
                    "; above {cap}, NCCL's kernels of {ranks_per_gpu} ranks may not fit at once and wait for blocks that never start"
                ));
            }
        }
    }
    note
}

/// MPI mode, ranks sharing a GPU: processes can share a GPU only through
/// CUDA MPS. `ranks_on_gpu` processes share GPU `device`, of `ranks_here` on
/// the node; `mps` is `cuDeviceGetAttribute(CU_DEVICE_ATTRIBUTE_MPS_ENABLED)`
/// for the GPU (`None`: this driver cannot say).
pub fn check_mps(
    ranks_on_gpu: usize,
    ranks_here: usize,
    device: usize,
    mps: Option<bool>,
) -> Result<(), CannotRun> {
    if ranks_on_gpu <= 1 || mps != Some(false) {
        return Ok(());
    }
    Err(CannotRun::new(
        format!(
            "{ranks_on_gpu} MPI processes share GPU {device}, and processes that share a GPU need CUDA MPS, \
             but no MPS server serves this one (cuDeviceGetAttribute(CU_DEVICE_ATTRIBUTE_MPS_ENABLED) is 0)"
        ),
        format!(
            "start a private MPS daemon, run the job under it, then stop it (the book's \"One GPU, several ranks\"; Open MPI's -x shown):\n\
             export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-$USER/pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-$USER/log\n\
             mkdir -p -m 700 /tmp/mps-$USER $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY && nvidia-cuda-mps-control -d\n\
             mpirun -np {ranks_here} -x {MULTI_RANK_VARIABLE}=1 <program>\n\
             echo quit | nvidia-cuda-mps-control; unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY\n\
             Or, with no MPS: run the ranks as threads of one process, NTHREADS={ranks_here} with the default build."
        ),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(
        ranks_here: usize,
        gpus: usize,
        multi_rank: Option<&str>,
        nccl: Option<(u32, u32)>,
    ) -> Request {
        Request {
            ranks_here,
            gpus,
            mpi: false,
            multi_rank: MultiRank::read(multi_rank.map(OsStr::new)),
            nccl: nccl.map(|(major, minor)| NcclVersion::new(major, minor, 3)),
        }
    }

    #[test]
    fn the_variable_is_read_as_nccl_reads_it() {
        assert_eq!(MultiRank::read(None), MultiRank::Off);
        assert_eq!(MultiRank::read(Some(OsStr::new("0"))), MultiRank::Off);
        assert_eq!(MultiRank::read(Some(OsStr::new("0x0"))), MultiRank::Off);
        for on in ["1", "2", "-1", "0x1", "010"] {
            assert!(MultiRank::read(Some(OsStr::new(on))).is_on(), "{on}");
        }
        for bad in ["yes", "", "1 ", "true", "0x"] {
            assert_eq!(
                MultiRank::read(Some(OsStr::new(bad))),
                MultiRank::NotANumber(bad.into()),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn ranks_go_round_robin() {
        let p = Placement {
            ranks_here: 4,
            gpus: 2,
        };
        assert_eq!(
            (0..4).map(|r| p.device_of(r)).collect::<Vec<_>>(),
            [0, 1, 0, 1]
        );
        assert_eq!((p.ranks_on(0), p.ranks_on(1)), (2, 2));
        assert_eq!(p.most_per_gpu(), 2);
        let p = Placement {
            ranks_here: 3,
            gpus: 2,
        };
        assert_eq!((p.ranks_on(0), p.ranks_on(1), p.most_per_gpu()), (2, 1, 2));
        let p = Placement {
            ranks_here: 2,
            gpus: 4,
        };
        assert!(!p.shares());
        assert_eq!((p.gpus_used(), p.most_per_gpu()), (2, 1));
    }

    #[test]
    fn as_many_ranks_as_gpus_needs_nothing() {
        assert!(place(&request(2, 2, None, Some((2, 28)))).is_ok());
        assert!(place(&request(1, 8, None, None)).is_ok());
    }

    #[test]
    fn without_the_variable_more_ranks_than_gpus_names_it() {
        let err = place(&request(4, 1, None, Some((2, 32)))).unwrap_err();
        assert!(
            err.reason
                .contains("NTHREADS=4 asks for 4 ranks, but only 1 GPU is visible"),
            "{err}"
        );
        assert!(
            err.fix.contains("set NTHREADS to 1 or fewer"),
            "{}",
            err.fix
        );
        assert!(
            err.fix.contains("NCCL_MULTI_RANK_GPU_ENABLE=1 NTHREADS=4"),
            "{}",
            err.fix
        );
        assert!(err.fix.contains("NCCL 2.32.3 allows it"), "{}", err.fix);
        // "0" is NCCL's default: the same refusal.
        assert_eq!(
            place(&request(4, 1, Some("0"), Some((2, 32)))).unwrap_err(),
            err
        );
    }

    #[test]
    fn without_the_variable_an_old_nccl_names_the_release_needed() {
        let err = place(&request(2, 1, None, Some((2, 28)))).unwrap_err();
        assert!(
            err.reason
                .contains("with NCCL 2.28.3 each rank needs a GPU of its own"),
            "{err}"
        );
        assert!(err.fix.contains("load NCCL 2.30.0 or newer"), "{}", err.fix);
    }

    #[test]
    fn the_variable_with_an_old_nccl_names_the_release() {
        for minor in [28, 29] {
            let err = place(&request(2, 1, Some("1"), Some((2, minor)))).unwrap_err();
            assert!(
                err.reason.starts_with(&format!(
                    "NCCL_MULTI_RANK_GPU_ENABLE=1 asks 2 ranks to share 1 GPU, but NCCL 2.{minor}.3 cannot"
                )),
                "{err}"
            );
            assert!(err.reason.contains("from NCCL 2.30.0"), "{err}");
            assert!(err.fix.contains("load NCCL 2.30.0 or newer"), "{}", err.fix);
        }
    }

    #[test]
    fn the_variable_with_nccl_2_30_or_later_shares() {
        for minor in [30, 31, 32] {
            let p = place(&request(8, 1, Some("1"), Some((2, minor)))).unwrap();
            assert_eq!((p.most_per_gpu(), p.device_of(7)), (8, 0));
        }
        // A program without NCCL shares on the same request.
        assert!(place(&request(4, 1, Some("1"), None)).is_ok());
        let err = place(&request(4, 1, None, None)).unwrap_err();
        assert!(err.fix.contains("this program uses no NCCL"), "{}", err.fix);
    }

    #[test]
    fn a_value_that_is_not_a_number_is_named() {
        let err = place(&request(2, 1, Some("yes"), Some((2, 32)))).unwrap_err();
        assert!(
            err.reason.contains("NCCL_MULTI_RANK_GPU_ENABLE=\"yes\""),
            "{err}"
        );
        assert!(
            err.reason.contains("not a number, which NCCL reads as 0"),
            "{err}"
        );
    }

    #[test]
    fn mpi_mode_words_the_refusal_for_mpirun() {
        let mut req = request(3, 2, None, Some((2, 32)));
        req.mpi = true;
        let err = place(&req).unwrap_err();
        assert!(
            err.reason.contains("3 MPI processes share this node"),
            "{err}"
        );
        assert!(err.fix.contains("mpirun -np 2"), "{}", err.fix);
        assert!(
            err.fix.contains("-x NCCL_MULTI_RANK_GPU_ENABLE=1"),
            "{}",
            err.fix
        );
    }

    #[test]
    fn the_banner_says_how_ranks_sit() {
        let on = MultiRank::On("1".into());
        let p = Placement {
            ranks_here: 4,
            gpus: 1,
        };
        assert_eq!(
            thread_launch_text(&p, &on),
            "4 ranks on 1 GPU, one thread each (NCCL_MULTI_RANK_GPU_ENABLE=1)"
        );
        let p = Placement {
            ranks_here: 2,
            gpus: 2,
        };
        assert_eq!(
            thread_launch_text(&p, &MultiRank::Off),
            "2 ranks, one thread per GPU"
        );
        let p = Placement {
            ranks_here: 3,
            gpus: 2,
        };
        assert_eq!(
            thread_launch_text(&p, &on),
            "3 ranks on 2 GPUs, one thread each (NCCL_MULTI_RANK_GPU_ENABLE=1)"
        );
        assert_eq!(
            mpi_launch_text(2, 1, 1, &MultiRank::Off),
            "2 ranks, one MPI process per GPU, 1 node"
        );
        assert_eq!(
            mpi_launch_text(4, 1, 4, &on),
            "4 ranks, one MPI process each, 1 node, up to 4 per GPU (NCCL_MULTI_RANK_GPU_ENABLE=1, MPS)"
        );
    }

    #[test]
    fn ncclss_cap_is_a_power_of_two_share() {
        assert_eq!(nccl_max_ctas(132, 1), None);
        assert_eq!(nccl_max_ctas(132, 2), Some(64));
        assert_eq!(nccl_max_ctas(132, 3), Some(32));
        assert_eq!(nccl_max_ctas(132, 4), Some(32));
        assert_eq!(nccl_max_ctas(132, 8), Some(16));
        assert_eq!(nccl_max_ctas(4, 8), Some(1));
    }

    #[test]
    fn the_note_names_the_cap_and_the_users_own() {
        let note = sharing_note(4, 132, true, None);
        assert!(note.contains("NCCL's at most 32 (maxCTAs"), "{note}");
        let note = sharing_note(4, 132, true, Some("64"));
        assert!(note.contains("NCCL_MAX_CTAS=64 says (yours"), "{note}");
        assert!(note.contains("may not fit at once"), "{note}");
        assert!(!sharing_note(4, 132, false, None).contains("NCCL"));
    }

    #[test]
    fn processes_sharing_a_gpu_need_mps() {
        assert!(check_mps(1, 1, 0, Some(false)).is_ok());
        assert!(check_mps(2, 2, 0, Some(true)).is_ok());
        assert!(check_mps(2, 2, 0, None).is_ok());
        // 3 processes on 2 GPUs: GPU 0 holds 2 of them; the job is 3.
        let three = check_mps(2, 3, 0, Some(false)).unwrap_err();
        assert!(three.fix.contains("mpirun -np 3 "), "{}", three.fix);
        assert!(three.fix.contains("NTHREADS=3 "), "{}", three.fix);
        let err = check_mps(2, 2, 0, Some(false)).unwrap_err();
        assert!(err.reason.contains("2 MPI processes share GPU 0"), "{err}");
        assert!(
            err.fix.contains("nvidia-cuda-mps-control -d"),
            "{}",
            err.fix
        );
        assert!(err.fix.contains("NTHREADS=2"), "{}", err.fix);
    }
}
