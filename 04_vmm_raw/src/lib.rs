//! Lesson 04's helpers: the RAII guards that adopt what `main.rs`'s driver
//! calls return, the checks that end a run with exit code 2, the test pattern,
//! and the descriptor channel ([`fd_channel`]). Every CUDA call the lesson
//! teaches is made in `src/main.rs`; the guards only undo them on error paths.

pub mod fd_channel;

use std::ops::Range;

use anyhow::{bail, ensure, Result};
use common::{CannotRun, RankContext};
use cudarc::driver::sys::{CUdeviceptr, CUmemGenericAllocationHandle, CUresult};

// The unit tests swap the driver for a recorder with the same signatures, so
// they check the guards' real teardown order without a GPU.
#[cfg(not(test))]
use cudarc::driver::sys;
#[cfg(test)]
use fake_driver as sys;

/// Physical memory known by its handle, from `cuMemCreate` or
/// `cuMemImportFromShareableHandle`. Dropping it calls `cuMemRelease`.
pub struct Allocation(Option<CUmemGenericAllocationHandle>);

/// Virtual addresses from `cuMemAddressReserve`. Dropping them calls `cuMemAddressFree`.
pub struct AddressRange(Option<(CUdeviceptr, usize)>);

/// An allocation mapped at an address range by `cuMemMap`. Dropping it calls `cuMemUnmap`.
pub struct Mapping(Option<(CUdeviceptr, usize)>);

impl Allocation {
    /// # Safety
    /// `handle` is a live allocation handle that nothing else releases.
    pub unsafe fn adopt(handle: CUmemGenericAllocationHandle) -> Self {
        Self(Some(handle))
    }

    pub fn handle(&self) -> CUmemGenericAllocationHandle {
        self.0.unwrap_or(0)
    }

    /// Disarms the guard: the caller makes the `cuMemRelease` call itself.
    pub fn into_raw(mut self) -> CUmemGenericAllocationHandle {
        self.0.take().unwrap_or(0)
    }
}

impl AddressRange {
    /// # Safety
    /// `ptr..ptr+size` was reserved by `cuMemAddressReserve` and nothing else frees it.
    pub unsafe fn adopt(ptr: CUdeviceptr, size: usize) -> Self {
        Self(Some((ptr, size)))
    }

    /// Disarms the guard: the caller makes the `cuMemAddressFree` call itself.
    pub fn into_raw(mut self) -> CUdeviceptr {
        self.0.take().map_or(0, |(ptr, _)| ptr)
    }
}

impl Mapping {
    /// # Safety
    /// `ptr..ptr+size` was mapped by `cuMemMap` and nothing else unmaps it.
    pub unsafe fn adopt(ptr: CUdeviceptr, size: usize) -> Self {
        Self(Some((ptr, size)))
    }

    pub fn ptr(&self) -> CUdeviceptr {
        self.0.map_or(0, |(ptr, _)| ptr)
    }

    /// Disarms the guard: the caller makes the `cuMemUnmap` call itself.
    pub fn into_raw(mut self) -> CUdeviceptr {
        self.0.take().map_or(0, |(ptr, _)| ptr)
    }
}

impl Drop for Allocation {
    fn drop(&mut self) {
        if let Some(handle) = self.0.take() {
            // SAFETY: `adopt`'s contract; whatever mapped it was dropped first.
            warn_on_error("cuMemRelease", unsafe { sys::cuMemRelease(handle) });
        }
    }
}

impl Drop for AddressRange {
    fn drop(&mut self) {
        if let Some((ptr, size)) = self.0.take() {
            // SAFETY: `adopt`'s contract; the mapping in it was dropped first.
            warn_on_error("cuMemAddressFree", unsafe {
                sys::cuMemAddressFree(ptr, size)
            });
        }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        if let Some((ptr, size)) = self.0.take() {
            // SAFETY: `adopt`'s contract; no copy through it is in flight.
            warn_on_error("cuMemUnmap", unsafe { sys::cuMemUnmap(ptr, size) });
        }
    }
}

/// One mapped buffer, this rank's own or a peer's.
// NOTE: fields drop top to bottom, and that is the teardown order: unmap
// first; only then may the addresses be freed and the handle released.
pub struct Buffer {
    pub mapping: Mapping,
    pub range: AddressRange,
    pub allocation: Allocation,
}

fn warn_on_error(call: &str, result: CUresult) {
    if result != CUresult::CUDA_SUCCESS {
        eprintln!("warning: cleanup: {call} returned {result:?}");
    }
}

/// Collective: every rank's `line` (no newlines in it), in rank order, on every rank.
pub fn all_gather(ctx: &RankContext, line: String) -> Result<Vec<String>> {
    let joined = match ctx.gather(line.into_bytes())? {
        Some(lines) => lines.join(&b'\n'),
        None => Vec::new(),
    };
    let joined = String::from_utf8(ctx.broadcast_vec(joined)?)?;
    let lines: Vec<String> = joined.split('\n').map(str::to_string).collect();
    ensure!(
        lines.len() == ctx.size(),
        "all_gather: {joined:?} has the wrong number of lines"
    );
    Ok(lines)
}

/// Where a rank runs, as Step 1 shares it.
pub struct Peer {
    pub host: String,
    pub device: usize,
    pub granularity: usize,
}

/// Collective: every rank's host, device and granularity, in rank order.
pub fn gather_peers(ctx: &RankContext, device: usize, granularity: usize) -> Result<Vec<Peer>> {
    let lines = all_gather(
        ctx,
        format!("{} {device} {granularity}", common::host_name()),
    )?;
    lines
        .iter()
        .map(|line| {
            let [host, device, granularity] = line.split(' ').collect::<Vec<_>>()[..] else {
                bail!("a rank sent {line:?}, not `host device granularity`");
            };
            Ok(Peer {
                host: host.into(),
                device: device.parse()?,
                granularity: granularity.parse()?,
            })
        })
        .collect()
}

/// No VMM, or no POSIX fd handles: this GPU cannot do what the lesson shows.
pub fn require_support(device: usize, vmm: i32, posix_fd: i32) -> Result<(), CannotRun> {
    if vmm != 1 {
        return Err(CannotRun::new(
            format!("device {device} has no virtual memory management (CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED = {vmm})"),
            "run on a GPU and driver with VMM (Pascal or newer, on Linux); some virtual GPUs (vGPU) turn it off.\n\
             Without it ncclMemAlloc falls back to cudaMalloc and NCCL has no symmetric memory.",
        ));
    }
    if posix_fd != 1 {
        return Err(CannotRun::new(
            format!("device {device} cannot export allocations as POSIX file descriptors (CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED = {posix_fd})"),
            "run on Linux with a driver that supports shareable handles (CUDA 10.2 or newer);\n\
             under WSL or with some virtual GPUs only the process that allocated can map the memory",
        ));
    }
    Ok(())
}

/// At most [`MAX_RANKS`], all on one host: `hosts[r]` is rank `r`'s.
pub fn require_one_node(rank: usize, hosts: &[&str]) -> Result<(), CannotRun> {
    if hosts.len() > MAX_RANKS {
        return Err(CannotRun::new(
            format!(
                "{} ranks: this lesson's test pattern tells at most {MAX_RANKS} ranks apart",
                hosts.len()
            ),
            format!("run with at most {MAX_RANKS} ranks"),
        ));
    }
    match hosts.iter().enumerate().find(|(_, host)| **host != hosts[rank]) {
        Some((peer, host)) => Err(CannotRun::new(
            format!("rank {peer} runs on {host}, rank {rank} on {}: file descriptors pass only between processes of one node", hosts[rank]),
            "run every rank on one node, e.g. mpirun -np 2 --host <node>:2;\n\
             across nodes NCCL uses fabric handles (multi-node NVLink with IMEX) or the network",
        )),
        None => Ok(()),
    }
}

/// `cuDeviceCanAccessPeer` said 0: a mapping of the peer's memory could never be used.
pub fn no_peer_access(device: usize, peer: usize, peer_device: usize) -> CannotRun {
    CannotRun::new(
        format!("device {device} cannot access the memory of device {peer_device} (rank {peer}): cuDeviceCanAccessPeer = 0"),
        "run on GPUs that reach each other by CUDA P2P (NVLink, or PCIe P2P); `nvidia-smi topo -p2p r` shows which pairs can.\n\
         P2P is often off in virtual machines and behind some PCIe switches (ACS); NCCL then copies through host memory\n\
         and has no symmetric memory. In MPI mode every rank must see the same GPUs (CUDA_VISIBLE_DEVICES).",
    )
}

/// The size every rank allocates: `requested` rounded up to a multiple of
/// every rank's `granularities`, and no more than the GPU's `total` memory.
pub fn symmetric_size(
    requested: usize,
    granularities: &[usize],
    total: usize,
) -> Result<(usize, usize), CannotRun> {
    let fix = "choose a smaller --size-bytes (or VMM_SIZE_BYTES)";
    let lcm = |a: usize, b: usize| {
        let (mut x, mut y) = (a, b);
        while y != 0 {
            (x, y) = (y, x % y);
        }
        (a / x.max(1)).checked_mul(b)
    };
    let granularity = granularities.iter().try_fold(1, |all, &g| lcm(all, g));
    let bytes = granularity.and_then(|g| requested.checked_next_multiple_of(g));
    let (Some(granularity), Some(bytes)) = (granularity, bytes) else {
        return Err(CannotRun::new(
            format!("--size-bytes {requested} cannot be rounded up to a multiple of every rank's granularity {granularities:?}: the result does not fit in 64 bits"),
            fix,
        ));
    };
    if bytes > total {
        return Err(CannotRun::new(
            format!("{bytes} bytes ({requested} requested, rounded up) is more than the GPU's {total} bytes of memory"),
            fix,
        ));
    }
    Ok((bytes, granularity))
}

/// The most ranks the test pattern tells apart: 4 bits each for the writer and the owner.
pub const MAX_RANKS: usize = 16;

/// The 32-bit word `writer` puts at `index` of its slot in `owner`'s buffer:
/// `0xWOiiiiii`, so a word from the wrong writer, in the wrong buffer or at
/// the wrong place is caught (the index wraps every 2^24 words).
pub fn word(writer: usize, owner: usize, index: usize) -> u32 {
    ((writer as u32 & 0xF) << 28) | ((owner as u32 & 0xF) << 24) | (index as u32 & 0x00FF_FFFF)
}

/// Every buffer of `words` 32-bit words holds one slot per rank, in rank
/// order; rank `w` writes slot `w` of every buffer, its own included.
pub struct Layout {
    pub words: usize,
    pub ranks: usize,
}

impl Layout {
    pub fn slot(&self, writer: usize) -> Range<usize> {
        let len = self.words / self.ranks;
        writer * len..(writer + 1) * len
    }

    /// The words every slot covers, and what each must hold in `owner`'s buffer.
    pub fn expected(&self, owner: usize) -> (usize, impl Fn(usize) -> u32 + Sync) {
        let len = self.words / self.ranks;
        (len * self.ranks, move |i| word(i / len, owner, i % len))
    }
}

/// The three calls the guards make, recorded instead of made: same names and
/// signatures as `cudarc::driver::sys`.
#[cfg(test)]
#[allow(non_snake_case)]
mod fake_driver {
    use super::*;
    use std::cell::RefCell;

    thread_local! {
        pub static CALLS: RefCell<Vec<String>> = const { RefCell::new(Vec::new()) };
    }

    fn record(call: String) -> CUresult {
        CALLS.with(|calls| calls.borrow_mut().push(call));
        CUresult::CUDA_SUCCESS
    }

    pub unsafe fn cuMemUnmap(ptr: CUdeviceptr, size: usize) -> CUresult {
        record(format!("cuMemUnmap({ptr:#x}, {size})"))
    }

    pub unsafe fn cuMemAddressFree(ptr: CUdeviceptr, size: usize) -> CUresult {
        record(format!("cuMemAddressFree({ptr:#x}, {size})"))
    }

    pub unsafe fn cuMemRelease(handle: CUmemGenericAllocationHandle) -> CUresult {
        record(format!("cuMemRelease({handle})"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn calls() -> Vec<String> {
        fake_driver::CALLS.with(|calls| calls.take())
    }

    fn buffer(ptr: CUdeviceptr, handle: CUmemGenericAllocationHandle) -> Buffer {
        // SAFETY: the fake driver only records the calls.
        unsafe {
            Buffer {
                mapping: Mapping::adopt(ptr, 4096),
                range: AddressRange::adopt(ptr, 4096),
                allocation: Allocation::adopt(handle),
            }
        }
    }

    #[test]
    fn a_dropped_buffer_unmaps_then_frees_the_addresses_then_releases_the_handle() {
        calls();
        drop(vec![buffer(0x1000, 7), buffer(0x2000, 8)]);
        assert_eq!(
            calls(),
            [
                "cuMemUnmap(0x1000, 4096)",
                "cuMemAddressFree(0x1000, 4096)",
                "cuMemRelease(7)",
                "cuMemUnmap(0x2000, 4096)",
                "cuMemAddressFree(0x2000, 4096)",
                "cuMemRelease(8)",
            ]
        );
    }

    #[test]
    fn disarmed_guards_leave_the_release_to_the_caller() {
        calls();
        let Buffer {
            mapping,
            range,
            allocation,
        } = buffer(0x1000, 7);
        assert_eq!(mapping.into_raw(), 0x1000);
        drop(range);
        assert_eq!(allocation.into_raw(), 7);
        assert_eq!(calls(), ["cuMemAddressFree(0x1000, 4096)"]);
    }

    fn reason<T: std::fmt::Debug>(result: Result<T, CannotRun>) -> String {
        result.unwrap_err().reason
    }

    #[test]
    fn missing_vmm_or_fd_support_cannot_run_and_says_why() {
        assert!(reason(require_support(3, 0, 1)).contains("device 3 has no virtual memory"));
        assert!(reason(require_support(0, 1, 0)).contains("as POSIX file descriptors"));
        assert!(require_support(0, 1, 1).is_ok());
    }

    #[test]
    fn ranks_on_two_nodes_or_too_many_cannot_run() {
        assert!(require_one_node(1, &["a", "a"]).is_ok());
        assert!(reason(require_one_node(0, &["a", "b"])).contains("rank 1 runs on b, rank 0 on a"));
        assert!(reason(require_one_node(0, &["a"; 17])).contains("at most 16 ranks"));
    }

    #[test]
    fn the_symmetric_size_suits_every_rank_and_says_why_not() {
        let (mib2, gib) = (2usize << 20, 1usize << 30);
        assert_eq!(symmetric_size(1, &[mib2, mib2], gib), Ok((mib2, mib2)));
        assert_eq!(
            symmetric_size(3 << 20, &[64 << 10, mib2], gib),
            Ok((4 << 20, mib2))
        );
        assert_eq!(symmetric_size(5, &[4, 6], gib), Ok((12, 12)));
        let overflow = symmetric_size(usize::MAX, &[mib2], usize::MAX);
        assert!(reason(overflow).contains("does not fit in 64 bits"));
        assert!(reason(symmetric_size(2 * gib, &[mib2], gib)).contains("more than the GPU's"));
    }

    #[test]
    fn words_name_writer_owner_and_index() {
        assert_eq!(word(1, 0, 5), 0x1000_0005);
        assert_eq!(word(0, 1, 5), 0x0100_0005);
        assert_eq!(word(15, 14, 1 << 24), 0xfe00_0000);
        let pairs: std::collections::HashSet<u32> = (0..MAX_RANKS * MAX_RANKS)
            .map(|p| word(p / MAX_RANKS, p % MAX_RANKS, 7))
            .collect();
        assert_eq!(pairs.len(), MAX_RANKS * MAX_RANKS);
    }

    #[test]
    fn every_rank_has_a_slot_in_every_buffer() {
        let layout = Layout {
            words: 10,
            ranks: 3,
        };
        let slots = [layout.slot(0), layout.slot(1), layout.slot(2)];
        assert_eq!(slots, [0..3, 3..6, 6..9]);
        let (checked, expected) = layout.expected(2);
        assert_eq!(checked, 9);
        assert_eq!(expected(4), word(1, 2, 1));
    }
}
