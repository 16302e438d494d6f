//! Lesson 03's building blocks, shared by the lesson (`main.rs`) and its
//! benchmark (`03_alltoallv_bench`, in `benchmarks/`): who sends how much to whom, where each block
//! sits in the buffers, what every element holds, and the `alltoallv`
//! exchange itself.
//!
//! NCCL has no alltoallv. MPI's `MPI_Alltoallv` takes, per peer, a count and a
//! displacement for sending and for receiving; [`alltoallv`] offers the same
//! signature and builds it from one `ncclSend` and one `ncclRecv` per peer,
//! grouped so that NCCL runs them together.

use std::ffi::c_void;
use std::fmt;

use anyhow::{ensure, Result};
use common::nccl::{sys, Communicator, NcclCheck};
use common::verify::Close;

/// Elements sent to rank 0 unless `--base-count` says otherwise.
pub const DEFAULT_BASE_COUNT: usize = 1024;

/// Elements per 16 bytes. Every count is a multiple of this, so that every
/// block starts on a 16-byte boundary of its buffer (see [`send_counts`]).
pub const ALIGN_ELEMENTS: usize = 16 / std::mem::size_of::<u64>();

/// Elements each rank sends to each destination: `base` to rank 0, half as
/// many to each next rank (more to lower-ranked, "more important",
/// destinations), but never fewer than 1, so that every pair of ranks
/// exchanges something however many ranks there are; then rounded up to a
/// multiple of [`ALIGN_ELEMENTS`]. Every rank sends the same counts; they
/// differ by destination.
///
/// Why round: NCCL's copy loops move 16-byte vectors. A block that starts on
/// an 8-byte boundary (an odd count of 8-byte elements before it) is copied
/// in smaller pieces, at about half the bandwidth: 1224 µs against 423 µs
/// for comparable exchanges on 2 × H200 (see the README). nccl-tests rounds
/// its blocks the same way.
pub fn send_counts(base: usize, ranks: usize) -> Vec<usize> {
    unaligned_send_counts(base, ranks)
        .into_iter()
        .map(|count| count.next_multiple_of(ALIGN_ELEMENTS))
        .collect()
}

/// The pattern of [`send_counts`] without the rounding: the benchmark's
/// `--unaligned` uses it to show what misaligned blocks cost.
pub fn unaligned_send_counts(base: usize, ranks: usize) -> Vec<usize> {
    (0..ranks)
        .map(|dest| base.checked_shr(dest as u32).unwrap_or(0).max(1))
        .collect()
}

/// The count matrix that Step 4's allgather delivers when every rank sends
/// `counts`: row = source, column = destination.
pub fn count_matrix(counts: &[usize]) -> Vec<u64> {
    counts
        .iter()
        .flat_map(|_| counts.iter().map(|&c| c as u64))
        .collect()
}

/// Where each block starts: the exclusive prefix sum of `counts`.
pub fn displacements(counts: &[usize]) -> Vec<usize> {
    counts
        .iter()
        .scan(0, |at, &count| {
            let start = *at;
            *at += count;
            Some(start)
        })
        .collect()
}

/// One rank's view of the exchange, derived from the count matrix that every
/// rank receives from the allgather of the counts (row = source, column =
/// destination).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    pub send_counts: Vec<usize>,
    pub send_displs: Vec<usize>,
    pub recv_counts: Vec<usize>,
    pub recv_displs: Vec<usize>,
    /// The largest total any rank sends: the size of every rank's send window.
    pub send_capacity: usize,
    /// The largest total any rank receives: the size of every rank's receive window.
    pub recv_capacity: usize,
}

impl Plan {
    /// `matrix[s * ranks + d]` is what rank `s` sends to rank `d`.
    pub fn from_matrix(matrix: &[u64], ranks: usize, rank: usize) -> Result<Self> {
        ensure!(
            matrix.len() == ranks * ranks,
            "count matrix has {} entries, expected {}",
            matrix.len(),
            ranks * ranks
        );
        let at = |s: usize, d: usize| matrix[s * ranks + d] as usize;
        let send_counts: Vec<usize> = (0..ranks).map(|d| at(rank, d)).collect();
        let recv_counts: Vec<usize> = (0..ranks).map(|s| at(s, rank)).collect();
        let send_capacity = (0..ranks)
            .map(|s| (0..ranks).map(|d| at(s, d)).sum())
            .max()
            .unwrap_or(0);
        let recv_capacity = (0..ranks)
            .map(|d| (0..ranks).map(|s| at(s, d)).sum())
            .max()
            .unwrap_or(0);
        Ok(Self {
            send_displs: displacements(&send_counts),
            recv_displs: displacements(&recv_counts),
            send_counts,
            recv_counts,
            send_capacity,
            recv_capacity,
        })
    }

    pub fn send_total(&self) -> usize {
        self.send_counts.iter().sum()
    }

    pub fn recv_total(&self) -> usize {
        self.recv_counts.iter().sum()
    }
}

/// The most ranks the encoding can name (16 bits each for source and destination).
pub const MAX_RANKS: usize = 1 << 16;
/// The most elements one block can hold (32 bits of index).
pub const MAX_BLOCK: usize = u32::MAX as usize;
/// What the receive buffer holds where nothing should have been written.
pub const UNTOUCHED: u64 = u64::MAX;

/// One element of the exchange. Its `u64` says where it came from, where it
/// was going and which one it is: bits 63-48 the source rank, 47-32 the
/// destination rank, 31-0 the index within the block. Integers are exact, so
/// any element that lands in the wrong block, at the wrong index, or from the
/// wrong rank decodes to something else than expected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Element(pub u64);

impl Element {
    pub fn new(source: usize, dest: usize, index: usize) -> Self {
        debug_assert!(source < MAX_RANKS && dest < MAX_RANKS && index <= MAX_BLOCK);
        Self(((source as u64) << 48) | ((dest as u64) << 32) | index as u64)
    }

    /// (source, destination, index).
    pub fn decode(self) -> (usize, usize, usize) {
        (
            (self.0 >> 48) as usize,
            ((self.0 >> 32) & 0xffff) as usize,
            (self.0 & 0xffff_ffff) as usize,
        )
    }
}

impl fmt::Display for Element {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0 == UNTOUCHED {
            return f.write_str("nothing (never written)");
        }
        let (source, dest, index) = self.decode();
        write!(f, "element {index} from rank {source} to rank {dest}")
    }
}

impl Close for Element {
    fn close_to(self, expected: Self) -> bool {
        self == expected
    }
}

/// The send buffer of rank `source`: the block for rank 0 first, then rank 1's, ...
pub fn send_data(source: usize, counts: &[usize]) -> Vec<u64> {
    counts
        .iter()
        .enumerate()
        .flat_map(|(dest, &count)| (0..count).map(move |i| Element::new(source, dest, i).0))
        .collect()
}

/// Bytes a rank needs for its send and receive windows with `base` and `ranks`,
/// or why that cannot work. Checked before anything is allocated.
pub fn window_bytes(base: usize, ranks: usize) -> Result<(usize, usize), String> {
    if base == 0 {
        return Err("--base-count must be at least 1".into());
    }
    if base > MAX_BLOCK {
        return Err(format!("--base-count {base} is more than {MAX_BLOCK} elements, the most one block can index (32 bits)"));
    }
    if ranks > MAX_RANKS {
        return Err(format!(
            "{ranks} ranks are more than the {MAX_RANKS} the element encoding can name"
        ));
    }
    let too_big = || {
        format!("--base-count {base} with {ranks} ranks needs buffers larger than this machine can address")
    };
    let counts = send_counts(base, ranks);
    let send: usize = counts
        .iter()
        .try_fold(0usize, |sum, &c| sum.checked_add(c))
        .ok_or_else(too_big)?;
    // Every rank sends the same counts, so the rank that receives most is rank
    // 0: `ranks` blocks of counts[0] elements.
    let recv = counts[0].checked_mul(ranks).ok_or_else(too_big)?;
    let elem = std::mem::size_of::<u64>();
    Ok((
        send.checked_mul(elem).ok_or_else(too_big)?,
        recv.checked_mul(elem).ok_or_else(too_big)?,
    ))
}

/// Whether `needed` bytes of windows fit in `free` bytes of GPU memory.
pub fn check_fits(
    base: usize,
    ranks: usize,
    needed: usize,
    free: usize,
) -> Result<(), common::CannotRun> {
    if needed <= free {
        return Ok(());
    }
    let gib = |bytes: usize| bytes as f64 / (1u64 << 30) as f64;
    Err(common::CannotRun::new(
        format!(
            "--base-count {base} needs {:.2} GiB per GPU for {ranks} ranks, and this GPU has {:.2} GiB free",
            gib(needed),
            gib(free)
        ),
        "use a smaller --base-count",
    ))
}

/// Parses `--base-count`: a whole number of elements, 1 to 2^32-1.
pub fn parse_base_count(text: &str) -> Result<usize, String> {
    let base: usize = text
        .trim()
        .parse()
        .map_err(|_| format!("'{text}' is not a whole number of elements"))?;
    window_bytes(base, 1).map(|_| base)
}

/// Bytes per element of an NCCL datatype.
pub fn type_size(datatype: sys::ncclDataType_t) -> usize {
    use sys::ncclDataType_t::*;
    match datatype {
        ncclInt8 | ncclUint8 | ncclFloat8e4m3 | ncclFloat8e5m2 => 1,
        ncclFloat16 | ncclBfloat16 => 2,
        ncclInt32 | ncclUint32 | ncclFloat32 => 4,
        ncclInt64 | ncclUint64 | ncclFloat64 => 8,
        ncclNumTypes => 0,
    }
}

/// The exchange of the lesson's Step 7 (written out there in `main.rs`), as
/// a function for the benchmark, which runs it many times.
///
/// `alltoallv`: rank `r` sends `send_counts[p]` elements starting at element
/// `send_displs[p]` of `send` to every peer `p`, and receives `recv_counts[p]`
/// elements from peer `p` into `recv` at element `recv_displs[p]`. Counts and
/// displacements are in elements of `datatype`, as in `MPI_Alltoallv`.
///
/// Built from one `ncclSend` and one `ncclRecv` per peer (the rank itself
/// included) between `ncclGroupStart` and `ncclGroupEnd`: inside a group NCCL
/// only records the operations, and `ncclGroupEnd` launches them together.
/// Without the group, the first blocking send would wait for a receive its
/// peer has not posted yet. Zero counts are skipped on both sides, which keeps
/// every send matched by a receive.
///
/// # Safety
/// `send` and `recv` must be device memory on this rank's GPU that holds every
/// block the counts and displacements describe, and must stay alive until the
/// work enqueued on `stream` has finished.
#[allow(clippy::too_many_arguments)]
pub unsafe fn alltoallv(
    send: *const c_void,
    send_counts: &[usize],
    send_displs: &[usize],
    recv: *mut c_void,
    recv_counts: &[usize],
    recv_displs: &[usize],
    datatype: sys::ncclDataType_t,
    comm: &Communicator,
    stream: sys::cudaStream_t,
) -> Result<()> {
    let peers = send_counts.len();
    ensure!(
        [send_displs.len(), recv_counts.len(), recv_displs.len()]
            .iter()
            .all(|&n| n == peers),
        "alltoallv: counts and displacements must all have one entry per rank"
    );
    let elem = type_size(datatype);
    sys::ncclGroupStart().check("ncclGroupStart")?;
    let posted = (|| -> Result<()> {
        for peer in 0..peers {
            if send_counts[peer] > 0 {
                let block = send
                    .cast::<u8>()
                    .add(send_displs[peer] * elem)
                    .cast::<c_void>();
                sys::ncclSend(
                    block,
                    send_counts[peer],
                    datatype,
                    peer as i32,
                    comm.as_raw(),
                    stream,
                )
                .check("ncclSend")?;
            }
            if recv_counts[peer] > 0 {
                let block = recv
                    .cast::<u8>()
                    .add(recv_displs[peer] * elem)
                    .cast::<c_void>();
                sys::ncclRecv(
                    block,
                    recv_counts[peer],
                    datatype,
                    peer as i32,
                    comm.as_raw(),
                    stream,
                )
                .check("ncclRecv")?;
            }
        }
        Ok(())
    })();
    // The group is always closed, also after a failed post, or NCCL would
    // keep this thread in group mode.
    let launched = sys::ncclGroupEnd().check("ncclGroupEnd");
    posted?;
    launched?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bases() -> impl Iterator<Item = usize> {
        (1..=70).chain([127, 128, 129, 1000, 1023, 1024, 1025, 4096, 65_535, 1 << 20])
    }

    #[test]
    fn default_counts_halve_per_destination() {
        assert_eq!(send_counts(1024, 4), vec![1024, 512, 256, 128]);
        assert_eq!(
            send_counts(1024, 8),
            vec![1024, 512, 256, 128, 64, 32, 16, 8]
        );
        assert_eq!(send_counts(1024, 1), vec![1024]);
    }

    #[test]
    fn the_floor_keeps_every_pair_exchanging() {
        assert_eq!(unaligned_send_counts(4, 8), vec![4, 2, 1, 1, 1, 1, 1, 1]);
        assert_eq!(send_counts(4, 8), vec![4, 2, 2, 2, 2, 2, 2, 2]);
        assert_eq!(send_counts(1, 3), vec![2, 2, 2]);
        assert_eq!(
            send_counts(1024, 80)[79],
            2,
            "shifts past the width must not panic"
        );
    }

    #[test]
    fn counts_and_displacements_hold_for_1_to_8_ranks() {
        for ranks in 1..=8 {
            for base in bases() {
                let counts = send_counts(base, ranks);
                assert!(
                    counts.iter().all(|&c| c >= 1),
                    "{ranks} ranks, base {base}: {counts:?}"
                );
                assert!(
                    counts.windows(2).all(|w| w[0] >= w[1]),
                    "not falling: {counts:?}"
                );
                assert_eq!(counts[0], base.next_multiple_of(2));
                let displs = displacements(&counts);
                assert_eq!(displs[0], 0);
                for d in 1..ranks {
                    assert_eq!(
                        displs[d],
                        displs[d - 1] + counts[d - 1],
                        "blocks must be adjacent"
                    );
                }
                assert_eq!(
                    displs[ranks - 1] + counts[ranks - 1],
                    counts.iter().sum::<usize>()
                );
            }
        }
    }

    #[test]
    fn every_block_starts_on_a_16_byte_boundary() {
        for ranks in 1..=8 {
            for base in bases().chain([22_369_621, 16_777_216, (1 << 32) - 1]) {
                let counts = send_counts(base, ranks);
                let raw = unaligned_send_counts(base, ranks);
                for (&c, &r) in counts.iter().zip(&raw) {
                    assert!(
                        c == r || c == r + 1,
                        "rounded by less than one element: {r} -> {c}"
                    );
                    assert_eq!(c % ALIGN_ELEMENTS, 0);
                }
                for rank in 0..ranks {
                    let plan = Plan::from_matrix(&count_matrix(&counts), ranks, rank).unwrap();
                    for &displ in plan.send_displs.iter().chain(&plan.recv_displs) {
                        assert_eq!(displ * 8 % 16, 0, "{ranks} ranks, base {base}: {plan:?}");
                    }
                }
            }
        }
        // The pattern the issue found misaligned: an odd base.
        let raw = unaligned_send_counts(22_369_621, 2);
        assert_eq!(displacements(&raw)[1] * 8 % 16, 8);
    }

    #[test]
    fn receive_side_is_derived_from_the_gathered_matrix() {
        for ranks in 1..=8 {
            for base in bases() {
                let counts = send_counts(base, ranks);
                let m = count_matrix(&counts);
                for rank in 0..ranks {
                    let plan = Plan::from_matrix(&m, ranks, rank).unwrap();
                    assert_eq!(plan.send_counts, counts);
                    // Every source sends counts[rank] to this rank.
                    assert_eq!(plan.recv_counts, vec![counts[rank]; ranks]);
                    assert_eq!(
                        plan.recv_displs,
                        (0..ranks).map(|s| s * counts[rank]).collect::<Vec<_>>()
                    );
                    assert_eq!(plan.recv_total(), ranks * counts[rank]);
                    assert_eq!(plan.send_total(), counts.iter().sum::<usize>());
                    // Windows are sized for the rank that needs most: rank 0 receives most.
                    assert_eq!(plan.recv_capacity, ranks * counts[0]);
                    assert_eq!(plan.send_capacity, plan.send_total());
                    assert!(plan.recv_total() <= plan.recv_capacity);
                    let (send_bytes, recv_bytes) = window_bytes(base, ranks).unwrap();
                    assert_eq!(
                        (send_bytes, recv_bytes),
                        (plan.send_capacity * 8, plan.recv_capacity * 8)
                    );
                }
            }
        }
    }

    #[test]
    fn totals_for_the_default_pattern() {
        let plan = |ranks, rank| {
            Plan::from_matrix(&count_matrix(&send_counts(1024, ranks)), ranks, rank).unwrap()
        };
        assert_eq!(
            (plan(2, 0).send_total(), plan(2, 0).recv_total()),
            (1536, 2048)
        );
        assert_eq!(
            (plan(2, 1).send_total(), plan(2, 1).recv_total()),
            (1536, 1024)
        );
        assert_eq!(
            (plan(4, 3).send_total(), plan(4, 3).recv_total()),
            (1920, 512)
        );
    }

    #[test]
    fn every_element_decodes_to_its_source_destination_and_index() {
        for ranks in 1..=8 {
            let counts = send_counts(300, ranks);
            for source in 0..ranks {
                let data = send_data(source, &counts);
                let displs = displacements(&counts);
                for (dest, (&count, &start)) in counts.iter().zip(&displs).enumerate() {
                    for i in 0..count {
                        assert_eq!(Element(data[start + i]).decode(), (source, dest, i));
                    }
                }
            }
        }
        let extremes = Element::new(MAX_RANKS - 1, MAX_RANKS - 1, MAX_BLOCK - 1);
        assert_eq!(
            extremes.decode(),
            (MAX_RANKS - 1, MAX_RANKS - 1, MAX_BLOCK - 1)
        );
        assert_ne!(extremes.0, UNTOUCHED);
    }

    #[test]
    fn elements_read_well_in_error_messages() {
        assert_eq!(
            Element::new(1, 0, 17).to_string(),
            "element 17 from rank 1 to rank 0"
        );
        assert_eq!(Element(UNTOUCHED).to_string(), "nothing (never written)");
    }

    #[test]
    fn base_count_is_validated() {
        assert!(parse_base_count("0").unwrap_err().contains("at least 1"));
        assert!(parse_base_count("abc")
            .unwrap_err()
            .contains("not a whole number"));
        assert!(parse_base_count("4294967296")
            .unwrap_err()
            .contains("32 bits"));
        assert_eq!(parse_base_count("1024"), Ok(1024));
        assert_eq!(window_bytes(1024, 2), Ok((1536 * 8, 2048 * 8)));
        assert!(window_bytes(MAX_BLOCK, MAX_RANKS + 1)
            .unwrap_err()
            .contains("encoding"));
    }

    #[test]
    fn buffers_larger_than_free_memory_cannot_run() {
        assert!(check_fits(1024, 2, 1000, 1000).is_ok());
        let err = check_fits(1 << 30, 4, 48 << 30, 40 << 30).unwrap_err();
        assert_eq!(err.reason, "--base-count 1073741824 needs 48.00 GiB per GPU for 4 ranks, and this GPU has 40.00 GiB free");
        assert_eq!(err.fix, "use a smaller --base-count");
    }

    #[test]
    fn type_sizes() {
        assert_eq!(type_size(sys::ncclDataType_t::ncclUint64), 8);
        assert_eq!(type_size(sys::ncclDataType_t::ncclFloat32), 4);
        assert_eq!(type_size(sys::ncclDataType_t::ncclBfloat16), 2);
    }
}
