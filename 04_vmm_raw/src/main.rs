//! # Lesson 04: ncclMemAlloc by hand, mapped by every peer
//!
//! What `ncclMemAlloc` does underneath, with the CUDA driver's virtual memory
//! management (VMM) calls, and what NCCL then does to make the memory
//! *symmetric*: every rank allocates the same size, exports its allocation as
//! a file descriptor, and maps every peer's allocation into its own GPU's
//! address space. Then each rank reads and writes its peers' memory through
//! those mappings and checks every word.
//!
//! Why it matters: lessons 01, 02 and 05 call `ncclMemAlloc` and
//! `ncclCommWindowRegister` and trust them. When they fail, or NCCL quietly
//! gives you a NULL window, the cause is one of the calls below: no VMM
//! support, no shareable handle type, no peer access between two GPUs, a
//! descriptor that cannot reach another process. Here each one is visible.
//!
//! Run it:
//!
//! ```text
//! NTHREADS=2 cargo run --release --bin 04_vmm_raw          # two GPUs, one thread each
//! cargo build --release --features mpi
//! mpirun -np 2 target/release/04_vmm_raw                   # one process per GPU: real cross-process import
//! NTHREADS=2 cargo run --release --bin 04_vmm_raw -- --size-bytes 67108864
//! mpirun -np 2 target/release/04_fd_channel_check          # only the fd passing, no GPU needed
//! ```
//!
//! Left out on purpose: fabric handles (`CU_MEM_HANDLE_TYPE_FABRIC`, for
//! multi-node NVLink with IMEX channels), which NCCL also requests when the
//! GPU supports them; multicast objects (`cuMulticastCreate`, NVLink SHARP),
//! which must not be used on shared machines; cuMem host memory on a NUMA node;
//! and kernels: the copies here go through the copy engines (lesson 05 has a
//! kernel that reads its peers).

use std::ffi::{c_int, c_void};
use std::os::fd::AsFd;
use std::process::ExitCode;

use anyhow::{anyhow, ensure, Context, Result};
use common::verify::check_all;
use common::{CannotRun, Lesson, Needs, RankContext};
use cudarc::driver::sys::CUdevice_attribute as A;
use cudarc::driver::{result, sys, CudaContext};
use vmm_raw::fd_channel;
use vmm_raw::vmm::{
    common_granularity, round_up, AddressRange, Allocation, CuCheck, Mapping, SharedFd,
};
use vmm_raw::{all_gather, parse_size_bytes, word, Layout, MAX_RANKS};

const LESSON: Lesson = Lesson {
    name: "04_vmm_raw",
    about: "What ncclMemAlloc does underneath: cuMemCreate, map, export as a file descriptor, import in every peer",
    needs: Needs::Gpu,
};

#[derive(clap::Args, Debug)]
struct Args {
    /// Bytes of GPU memory per rank; rounded up to the allocation granularity
    /// (often 2 MiB).
    #[arg(
        long = "size-bytes",
        env = "VMM_SIZE_BYTES",
        value_name = "BYTES",
        default_value = "2097152",
        value_parser = parse_size_bytes
    )]
    size_bytes: usize,
}

fn main() -> ExitCode {
    common::run(&LESSON, vmm_raw)
}

/// Runs on every rank at once (a thread or an MPI process each).
fn vmm_raw(ctx: &RankContext, args: &Args) -> Result<()> {
    let (rank, size) = (ctx.rank(), ctx.size());
    ctx.println_root(format!(
        "Lesson 04: ncclMemAlloc by hand, mapped by every peer ({size} ranks)"
    ));

    // Step 1: Ask each GPU what it supports and how finely it allocates.
    // Every rank asks about its own GPU; rank 0 prints all the answers.
    ctx.println_root("Step 1: Ask each GPU what it supports and how finely it allocates.");
    let gpu = CudaContext::new(ctx.device()).context("Step 1: bind the GPU")?;
    let device = gpu.cu_device();
    let attribute = |attr: A| -> Result<i32> {
        let mut value: c_int = 0;
        // SAFETY: writes one int.
        unsafe { sys::cuDeviceGetAttribute(&mut value, attr, device) }
            .check("cuDeviceGetAttribute")
            .with_context(|| format!("Step 1: {attr:?}"))?;
        Ok(value)
    };
    let mut facts = DeviceFacts {
        host: common::host_name(),
        device: ctx.device(),
        vmm: attribute(A::CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED)?,
        posix_fd: attribute(A::CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED)?,
        fabric: attribute(A::CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_FABRIC_SUPPORTED)?,
        rdma: attribute(A::CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED)?,
        numa: attribute(A::CU_DEVICE_ATTRIBUTE_HOST_NUMA_ID)?,
        minimum: 0,
        recommended: 0,
    };
    require_vmm_and_fds(&facts).context("Step 1")?;
    // What ncclMemAlloc asks for, less the fabric handle type.
    let prop = pinned_device_memory(device, facts.rdma == 1);
    facts.minimum = granularity(&prop, GRANULARITY_MINIMUM).context("Step 1")?;
    facts.recommended = granularity(&prop, GRANULARITY_RECOMMENDED).context("Step 1")?;
    let everyone: Vec<DeviceFacts> = all_gather(ctx, facts.encode())?
        .iter()
        .map(|bytes| DeviceFacts::decode(bytes))
        .collect::<Result<_>>()?;
    for line in support_lines(&everyone) {
        ctx.println_root(line);
    }
    ctx.all_ok(check_peers(ctx, device, &everyone).context("Step 1"))?;
    if size > 1 {
        ctx.println_root(
            "  cuDeviceCanAccessPeer: every rank's GPU can map every other rank's memory",
        );
    }

    // Step 2: Allocate, reserve, map and allow access: ncclMemAlloc by hand.
    // NOTE: symmetric means the same size on every rank, so the size is rounded
    // up to a multiple of every rank's granularity, not just this one's.
    ctx.println_root("Step 2: Allocate, reserve, map and allow access: ncclMemAlloc by hand.");
    let granularities: Vec<usize> = everyone.iter().map(|f| f.recommended).collect();
    let total = gpu.total_mem().context("Step 2: cuDeviceTotalMem")?;
    let (bytes, granularity) = ctx.all_ok(
        symmetric_size(args.size_bytes, &granularities, total, ctx.device()).context("Step 2"),
    )?;
    ctx.println_root(format!(
        "  Every rank allocates {bytes} bytes: {} requested, rounded up to the recommended granularity",
        args.size_bytes
    ));
    let allocation = Allocation::create(bytes, &prop).context("Step 2: allocate")?;
    let range = AddressRange::reserve(bytes, granularity).context("Step 2: reserve addresses")?;
    let own = Mapping::map(range, allocation).context("Step 2: map")?;
    allow_access(own.ptr(), bytes, device).context("Step 2: allow access")?;
    ctx.println_ordered(format!(
        "  Rank {rank}: cuMemCreate on device {d}, cuMemAddressReserve, cuMemMap, cuMemSetAccess read-write for device {d}",
        d = ctx.device()
    ))?;

    // Step 3: Look the allocation up from its address, as ncclMemFree does.
    // ncclMemFree gets nothing but the pointer: it finds the mapping's extent
    // and the allocation handle from it, then unmaps and releases.
    ctx.println_root("Step 3: Look the allocation up from its address, as ncclMemFree does.");
    let inside = own.ptr() + bytes as u64 / 2;
    let (mut base, mut extent) = (0, 0);
    // SAFETY: writes the start and size of the mapping that holds `inside`.
    unsafe { sys::cuMemGetAddressRange_v2(&mut base, &mut extent, inside) }
        .check("cuMemGetAddressRange")
        .context("Step 3")?;
    ensure!(
        (base, extent) == (own.ptr(), bytes),
        "Step 3: cuMemGetAddressRange found {extent} bytes at {base:#x}, not the {bytes} bytes mapped at {:#x}",
        own.ptr()
    );
    let mut retained = 0;
    // SAFETY: `own.ptr()` is mapped; `retained` receives a new reference to its handle.
    unsafe { sys::cuMemRetainAllocationHandle(&mut retained, own.ptr() as *mut c_void) }
        .check("cuMemRetainAllocationHandle")
        .context("Step 3")?;
    // NOTE: every retain needs its own cuMemRelease, or the memory outlives
    // the owner's release of the handle it got from cuMemCreate.
    // SAFETY: `retained` is the reference we just took.
    unsafe { sys::cuMemRelease(retained) }
        .check("cuMemRelease of the retained handle")
        .context("Step 3")?;
    // SAFETY: a plain C struct for which all zeroes is a valid value.
    let mut found: sys::CUmemAllocationProp = unsafe { std::mem::zeroed() };
    // SAFETY: writes the properties of a live allocation into `found`.
    unsafe { sys::cuMemGetAllocationPropertiesFromHandle(&mut found, own.allocation().handle()) }
        .check("cuMemGetAllocationPropertiesFromHandle")
        .context("Step 3")?;
    ensure!(
        same_request(&found, &prop),
        "Step 3: the allocation reports {}, but we asked for {}",
        describe(&found),
        describe(&prop)
    );
    let handle = if retained == own.allocation().handle() {
        "cuMemCreate's".to_string()
    } else {
        format!(
            "{retained:#x}, not cuMemCreate's {:#x}",
            own.allocation().handle()
        )
    };
    ctx.println_ordered(format!(
        "  Rank {rank}: address range = the mapping, retained handle = {handle}, properties = {}",
        describe(&found)
    ))?;

    // Step 4: Export the allocation as a file descriptor and pass it to every peer.
    // NOTE: the descriptor is a capability: whoever holds it can map this
    // GPU memory. Threads share one fd table and exchange numbers; processes
    // need the kernel to copy it (SCM_RIGHTS over a Unix socket in a private
    // directory, same user only). See fd_channel.rs.
    ctx.println_root(
        "Step 4: Export the allocation as a file descriptor and pass it to every peer.",
    );
    let exported = SharedFd::export(own.allocation()).context("Step 4: export")?;
    let received = fd_channel::exchange(ctx, exported.as_fd())
        .context("Step 4: pass the descriptors to the peers")?;
    let peer_fds: Vec<(usize, SharedFd)> = received
        .fds
        .into_iter()
        .enumerate()
        .filter_map(|(peer, fd)| Some((peer, SharedFd::from_peer(fd?))))
        .collect();
    let peers: Vec<usize> = peer_fds.iter().map(|(peer, _)| *peer).collect();
    ctx.println_ordered(format!(
        "  Rank {rank} exported its allocation and holds {}",
        whose(&peers, "descriptor")
    ))?;

    // Step 5: Import every peer's allocation and map it for this GPU.
    // NOTE: an imported handle has no address and no access yet: reserve, map
    // and cuMemSetAccess again, for this rank's device. (Threads of one
    // process could instead grant their devices access to the owner's own
    // mapping, as ncclMemAlloc does for every P2P-capable GPU it sees; the
    // import works for threads and processes alike.)
    ctx.println_root("Step 5: Import every peer's allocation and map it for this GPU.");
    let mut imports: Vec<(usize, Mapping)> = Vec::new();
    for (peer, fd) in &peer_fds {
        let context = || format!("Step 5: map rank {peer}'s allocation");
        let allocation = Allocation::import(fd.as_fd(), bytes).with_context(context)?;
        let range = AddressRange::reserve(bytes, granularity).with_context(context)?;
        let mapping = Mapping::map(range, allocation).with_context(context)?;
        allow_access(mapping.ptr(), bytes, device).with_context(context)?;
        imports.push((*peer, mapping));
    }
    ctx.println_ordered(format!(
        "  Rank {rank} mapped {} read-write for device {}",
        whose(&peers, "allocation"),
        ctx.device()
    ))?;

    // Step 6: Fill this rank's buffer, then read every peer's through the mapping.
    ctx.println_root(
        "Step 6: Fill this rank's buffer, then read every peer's through the mapping.",
    );
    let layout = Layout {
        words: bytes / 4,
        ranks: size,
    };
    let own_words: Vec<u32> = layout.own().map(|i| word(rank, rank, i)).collect();
    copy_to_device(own.ptr(), &own_words).context("Step 6: fill this rank's buffer")?;
    // NOTE: a copy from pageable host memory may return before the data has
    // landed: synchronize before telling the peers it is there.
    gpu.synchronize().context("Step 6: cuCtxSynchronize")?;
    ctx.barrier()?;
    let read_peers = || -> Result<Vec<String>> {
        let mut lines = Vec::new();
        for (peer, mapping) in &imports {
            let mut data = vec![0u32; layout.own().len()];
            copy_to_host(&mut data, mapping.ptr())?;
            let expected = |i| word(*peer, *peer, i);
            check_all(
                &format!("rank {peer}'s buffer, read by rank {rank}"),
                &data,
                expected,
            )?;
            lines.push(format!(
                "  Rank {rank} read rank {peer}'s buffer through its mapping: {} words {:#010x}..{:#010x} (verified)",
                data.len(),
                expected(0),
                expected(data.len() - 1)
            ));
        }
        Ok(lines)
    };
    let lines = ctx.all_ok(read_peers().context("Step 6: read the peers' buffers"))?;
    ctx.println_ordered(lines_or(
        lines,
        format!("  Rank {rank} has no peer to read"),
    ))?;

    // Step 7: Write into every peer's buffer through the mapping, then check this one.
    // Rank w writes slot w of the second half of every peer's buffer; the
    // owner then finds each peer's words in its own memory: access works in
    // both directions.
    ctx.println_root(
        "Step 7: Write into every peer's buffer through the mapping, then check this one.",
    );
    let my_slot = layout.slot(rank);
    for (peer, mapping) in &imports {
        let words: Vec<u32> = (0..my_slot.len()).map(|i| word(rank, *peer, i)).collect();
        let at = mapping.ptr() + (my_slot.start * 4) as u64;
        copy_to_device(at, &words)
            .with_context(|| format!("Step 7: write into rank {peer}'s buffer"))?;
    }
    gpu.synchronize().context("Step 7: cuCtxSynchronize")?;
    ctx.barrier()?;
    let check_writes = || -> Result<Vec<String>> {
        let mut lines = Vec::new();
        for &peer in &peers {
            let slot = layout.slot(peer);
            let mut data = vec![0u32; slot.len()];
            copy_to_host(&mut data, own.ptr() + (slot.start * 4) as u64)?;
            let expected = |i| word(peer, rank, i);
            check_all(
                &format!("rank {peer}'s words in rank {rank}'s buffer"),
                &data,
                expected,
            )?;
            lines.push(format!(
                "  Rank {rank} found what rank {peer} wrote through its mapping: {} words {:#010x}..{:#010x} (verified)",
                data.len(),
                expected(0),
                expected(data.len() - 1)
            ));
        }
        Ok(lines)
    };
    let lines = ctx.all_ok(check_writes().context("Step 7: check what the peers wrote"))?;
    ctx.println_ordered(lines_or(
        lines,
        format!("  Rank {rank} has no peer to write"),
    ))?;
    ctx.println_root("Results verified correctly");

    // Step 8: Tear down: peers' mappings first, then each owner's allocation, then the descriptors.
    // NOTE: the driver frees physical memory only when no handle and no
    // mapping refers to it in any process, so an owner that releases early
    // does not crash its peers; but its memory then stays allocated until the
    // last peer lets go. Peers unmap first, everyone agrees, then owners
    // release: the memory is really gone when the owner's cuMemRelease
    // returns. On an error path the guards' Drop does the same per rank
    // (without waiting for the peers).
    ctx.println_root("Step 8: Tear down: peers' mappings first, then each owner's allocation, then the descriptors.");
    let peers_released: Result<()> = imports.into_iter().try_for_each(|(peer, mapping)| {
        // cuMemUnmap, cuMemAddressFree, cuMemRelease of the imported handle.
        mapping
            .release()
            .with_context(|| format!("rank {peer}'s buffer"))
    });
    ctx.all_ok(peers_released.context("Step 8: release the peers' buffers"))?;
    ctx.println_root("  Every rank unmapped its peers' buffers, freed their address ranges and released the imported handles");
    let own_released = (move || -> Result<()> {
        let (range, allocation) = own.unmap()?; // cuMemUnmap
        range.free()?; // cuMemAddressFree
        allocation.release()?; // cuMemRelease
        Ok(())
    })();
    ctx.all_ok(own_released.context("Step 8: release this rank's buffer"))?;
    ctx.println_root(
        "  Every rank unmapped its own buffer, freed its address range and released its allocation",
    );
    let closed: Result<()> = std::iter::once(exported)
        .chain(peer_fds.into_iter().map(|(_, fd)| fd))
        .try_for_each(|fd| fd.close().context("close"));
    ctx.all_ok(closed.context("Step 8: close the descriptors"))?;
    ctx.println_root("  Every rank closed the descriptor it exported and the ones it received");
    ctx.println_root("All resources cleaned up successfully");
    Ok(())
}

const GRANULARITY_MINIMUM: sys::CUmemAllocationGranularity_flags =
    sys::CUmemAllocationGranularity_flags::CU_MEM_ALLOC_GRANULARITY_MINIMUM;
const GRANULARITY_RECOMMENDED: sys::CUmemAllocationGranularity_flags =
    sys::CUmemAllocationGranularity_flags::CU_MEM_ALLOC_GRANULARITY_RECOMMENDED;

/// The allocation `ncclMemAlloc` asks `cuMemCreate` for: pinned (resident,
/// never paged) memory on this device, exportable as a POSIX file descriptor,
/// and usable by a NIC for GPUDirect RDMA when the GPU allows it. (NCCL also
/// adds `CU_MEM_HANDLE_TYPE_FABRIC` when the GPU supports it, and falls back
/// without it if `cuMemCreate` then refuses.)
fn pinned_device_memory(device: sys::CUdevice, rdma: bool) -> sys::CUmemAllocationProp {
    sys::CUmemAllocationProp {
        type_: sys::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED,
        requestedHandleTypes:
            sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR,
        location: sys::CUmemLocation {
            type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
            id: device,
        },
        win32HandleMetaData: std::ptr::null_mut(),
        allocFlags: sys::CUmemAllocationProp_st__bindgen_ty_1 {
            compressionType: 0,
            gpuDirectRDMACapable: u8::from(rdma),
            usage: 0,
            reserved: [0; 4],
        },
    }
}

/// `cuMemGetAllocationGranularity`: sizes (and address alignments) must be
/// multiples of the minimum; the recommended one is what performs well.
fn granularity(
    prop: &sys::CUmemAllocationProp,
    which: sys::CUmemAllocationGranularity_flags,
) -> Result<usize> {
    let mut bytes = 0;
    // SAFETY: writes one size_t; `prop` is a valid description.
    unsafe { sys::cuMemGetAllocationGranularity(&mut bytes, prop, which) }
        .check("cuMemGetAllocationGranularity")?;
    Ok(bytes)
}

/// `cuMemSetAccess`: lets `device` read and write `size` bytes at `ptr`.
/// Until then the mapping exists, but any access to it faults.
fn allow_access(ptr: sys::CUdeviceptr, size: usize, device: sys::CUdevice) -> Result<()> {
    let access = sys::CUmemAccessDesc {
        location: sys::CUmemLocation {
            type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
            id: device,
        },
        flags: sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
    };
    // SAFETY: `ptr..ptr+size` is mapped; one descriptor is passed.
    unsafe { sys::cuMemSetAccess(ptr, size, &access, 1) }.check("cuMemSetAccess")?;
    Ok(())
}

/// `cuMemcpyHtoD`: `words` to device address `at` (own memory or a peer's mapping).
fn copy_to_device(at: sys::CUdeviceptr, words: &[u32]) -> Result<()> {
    // SAFETY: the range at `at` is mapped with read-write access for this
    // rank's device and holds `words`.
    unsafe { sys::cuMemcpyHtoD_v2(at, words.as_ptr().cast(), std::mem::size_of_val(words)) }
        .check("cuMemcpyHtoD")?;
    Ok(())
}

/// `cuMemcpyDtoH`: device address `from` into `words`; returns when the data is there.
fn copy_to_host(words: &mut [u32], from: sys::CUdeviceptr) -> Result<()> {
    let bytes = std::mem::size_of_val(words);
    // SAFETY: as in `copy_to_device`; `words` has room for `bytes`.
    unsafe { sys::cuMemcpyDtoH_v2(words.as_mut_ptr().cast(), from, bytes) }
        .check("cuMemcpyDtoH")?;
    Ok(())
}

/// What one rank found out about its GPU in Step 1.
#[derive(Debug, Clone, PartialEq, Eq)]
struct DeviceFacts {
    host: String,
    device: usize,
    vmm: i32,
    posix_fd: i32,
    fabric: i32,
    rdma: i32,
    numa: i32,
    minimum: usize,
    recommended: usize,
}

impl DeviceFacts {
    fn encode(&self) -> Vec<u8> {
        format!(
            "{} {} {} {} {} {} {} {} {}",
            self.host,
            self.device,
            self.vmm,
            self.posix_fd,
            self.fabric,
            self.rdma,
            self.numa,
            self.minimum,
            self.recommended
        )
        .into_bytes()
    }

    fn decode(bytes: &[u8]) -> Result<Self> {
        let text = String::from_utf8_lossy(bytes);
        let fields: Vec<&str> = text.split_whitespace().collect();
        let [host, device, vmm, posix_fd, fabric, rdma, numa, minimum, recommended] = fields[..]
        else {
            return Err(anyhow!("Step 1: a rank sent malformed facts: {text:?}"));
        };
        Ok(Self {
            host: host.to_string(),
            device: device.parse()?,
            vmm: vmm.parse()?,
            posix_fd: posix_fd.parse()?,
            fabric: fabric.parse()?,
            rdma: rdma.parse()?,
            numa: numa.parse()?,
            minimum: minimum.parse()?,
            recommended: recommended.parse()?,
        })
    }
}

/// The attributes and what each decides, one value per rank; then the granularities.
fn support_lines(everyone: &[DeviceFacts]) -> Vec<String> {
    type Row = (&'static str, fn(&DeviceFacts) -> i32, &'static str);
    let rows: [Row; 5] = [
        (
            "VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED",
            |f| f.vmm,
            "cuMemCreate, cuMemMap and the rest of this lesson work at all",
        ),
        (
            "HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED",
            |f| f.posix_fd,
            "an allocation can leave its process as a file descriptor",
        ),
        (
            "HANDLE_TYPE_FABRIC_SUPPORTED",
            |f| f.fabric,
            "... or as a fabric handle, across nodes (not used here)",
        ),
        (
            "GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED",
            |f| f.rdma,
            "a NIC may DMA into it: gpuDirectRDMACapable is set",
        ),
        (
            "HOST_NUMA_ID",
            |f| f.numa,
            "the host NUMA node nearest the GPU, for cuMem host memory",
        ),
    ];
    let per_rank = |value: &dyn Fn(&DeviceFacts) -> String| -> String {
        everyone.iter().map(value).collect::<Vec<_>>().join(" ")
    };
    let width = rows
        .iter()
        .map(|(_, get, _)| per_rank(&|f| get(f).to_string()).len())
        .max()
        .unwrap_or(0);
    let mut lines: Vec<String> = rows
        .iter()
        .map(|(name, get, meaning)| {
            let values = per_rank(&|f| get(f).to_string());
            format!("  {name:<43} {values:<width$}  {meaning}")
        })
        .collect();
    lines.push(format!(
        "  Granularity of pinned device memory with POSIX fd handles: minimum {}, recommended {} bytes",
        per_rank(&|f| f.minimum.to_string()),
        per_rank(&|f| f.recommended.to_string())
    ));
    lines
}

/// No VMM or no POSIX fd handles: this GPU cannot do what the lesson shows.
fn require_vmm_and_fds(facts: &DeviceFacts) -> Result<()> {
    let d = facts.device;
    if facts.vmm != 1 {
        return Err(CannotRun::new(
            format!("device {d} has no virtual memory management (CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED = {})", facts.vmm),
            "run on a GPU and driver with VMM (Pascal or newer, on Linux); some virtual GPUs (vGPU) turn it off.\n\
             Without it ncclMemAlloc falls back to cudaMalloc and NCCL has no symmetric memory.",
        )
        .into());
    }
    if facts.posix_fd != 1 {
        return Err(CannotRun::new(
            format!("device {d} cannot export allocations as POSIX file descriptors (CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED = {})", facts.posix_fd),
            "run on Linux with a driver that supports shareable handles (CUDA 10.2 or newer);\n\
             under WSL or with some virtual GPUs only the process that allocated can map the memory",
        )
        .into());
    }
    Ok(())
}

/// Every peer on this node, every peer's GPU reachable by P2P, few enough
/// ranks for the test pattern.
fn check_peers(ctx: &RankContext, device: sys::CUdevice, everyone: &[DeviceFacts]) -> Result<()> {
    let rank = ctx.rank();
    if everyone.len() > MAX_RANKS {
        return Err(CannotRun::new(
            format!(
                "{} ranks: this lesson's test pattern tells at most {MAX_RANKS} ranks apart",
                everyone.len()
            ),
            format!("run with at most {MAX_RANKS} ranks"),
        )
        .into());
    }
    let me = &everyone[rank];
    for (peer, theirs) in everyone.iter().enumerate() {
        if peer == rank || theirs.device == me.device {
            continue;
        }
        if theirs.host != me.host {
            return Err(CannotRun::new(
                format!("rank {peer} runs on {}, rank {rank} on {}: file descriptors pass only between processes of one node", theirs.host, me.host),
                "run every rank on one node, e.g. mpirun -np 2 --host <node>:2;\n\
                 across nodes NCCL uses fabric handles (multi-node NVLink with IMEX) or the network",
            )
            .into());
        }
        let peer_device = result::device::get(theirs.device as c_int)
            .with_context(|| format!("cuDeviceGet({})", theirs.device))?;
        let mut can_access: c_int = 0;
        // SAFETY: writes one int.
        unsafe { sys::cuDeviceCanAccessPeer(&mut can_access, device, peer_device) }
            .check("cuDeviceCanAccessPeer")?;
        if can_access != 1 {
            return Err(CannotRun::new(
                format!("device {} cannot access the memory of device {} (rank {peer}): cuDeviceCanAccessPeer = 0", me.device, theirs.device),
                "run on GPUs that reach each other by CUDA P2P (NVLink, or PCIe P2P); `nvidia-smi topo -p2p r` shows which pairs can.\n\
                 P2P is often off in virtual machines and behind some PCIe switches (ACS); NCCL then copies through host memory\n\
                 and has no symmetric memory. In MPI mode every rank must see the same GPUs (CUDA_VISIBLE_DEVICES).",
            )
            .into());
        }
    }
    Ok(())
}

/// The size every rank allocates, and the alignment of every address range.
fn symmetric_size(
    requested: usize,
    granularities: &[usize],
    total: usize,
    device: usize,
) -> Result<(usize, usize)> {
    let granularity = common_granularity(granularities).ok_or_else(|| {
        anyhow!("the ranks' granularities {granularities:?} have no common multiple that fits in 64 bits")
    })?;
    let fix = "choose a smaller --size-bytes (or VMM_SIZE_BYTES)";
    let bytes = round_up(requested, granularity).ok_or_else(|| {
        CannotRun::new(
            format!("--size-bytes {requested} cannot be rounded up to a multiple of the granularity ({granularity} bytes): the result does not fit in 64 bits"),
            fix,
        )
    })?;
    if bytes > total {
        return Err(CannotRun::new(
            format!("{bytes} bytes ({requested} requested, rounded up) is more than device {device}'s {total} bytes of memory"),
            fix,
        )
        .into());
    }
    Ok((bytes, granularity))
}

/// Did the driver keep what we asked for?
fn same_request(found: &sys::CUmemAllocationProp, asked: &sys::CUmemAllocationProp) -> bool {
    found.type_ == asked.type_
        && found.location == asked.location
        && (found.requestedHandleTypes.0 & asked.requestedHandleTypes.0)
            == asked.requestedHandleTypes.0
}

/// `pinned on device 0, POSIX fd, gpuDirectRDMACapable 1`.
fn describe(prop: &sys::CUmemAllocationProp) -> String {
    let kind = match prop.type_ {
        sys::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED => "pinned".to_string(),
        other => format!("{other:?}"),
    };
    let place = match prop.location.type_ {
        sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE => {
            format!("device {}", prop.location.id)
        }
        other => format!("{other:?} {}", prop.location.id),
    };
    let types = prop.requestedHandleTypes.0;
    let mut handles: Vec<&str> = Vec::new();
    if types & sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR.0 != 0 {
        handles.push("POSIX fd");
    }
    if types & sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_FABRIC.0 != 0 {
        handles.push("fabric");
    }
    if handles.is_empty() {
        handles.push("no shareable handle");
    }
    format!(
        "{kind} on {place}, {}, gpuDirectRDMACapable {}",
        handles.join(" + "),
        prop.allocFlags.gpuDirectRDMACapable
    )
}

/// `rank 1's descriptor`, `the descriptors of ranks 1, 2 and 3`, `no peer's descriptor`.
fn whose(peers: &[usize], thing: &str) -> String {
    match peers {
        [] => format!("no peer's {thing}"),
        [one] => format!("rank {one}'s {thing}"),
        [rest @ .., last] => {
            let rest: Vec<String> = rest.iter().map(usize::to_string).collect();
            format!("the {thing}s of ranks {} and {last}", rest.join(", "))
        }
    }
}

/// The lines, or `none` if there are none (a run of one rank).
fn lines_or(lines: Vec<String>, none: String) -> String {
    if lines.is_empty() {
        none
    } else {
        lines.join("\n")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn facts_survive_the_trip_between_ranks() {
        let facts = DeviceFacts {
            host: "gpu-node-7".into(),
            device: 3,
            vmm: 1,
            posix_fd: 1,
            fabric: 0,
            rdma: 1,
            numa: -1,
            minimum: 2 << 20,
            recommended: 2 << 20,
        };
        assert_eq!(DeviceFacts::decode(&facts.encode()).unwrap(), facts);
        assert!(DeviceFacts::decode(b"gpu-node-7 3 1").is_err());
    }

    #[test]
    fn the_support_table_is_the_one_in_the_readme() {
        let h200 = |device| DeviceFacts {
            host: "node".into(),
            device,
            vmm: 1,
            posix_fd: 1,
            fabric: 1,
            rdma: 1,
            numa: 0,
            minimum: 2 << 20,
            recommended: 2 << 20,
        };
        // Looked up at run time: this test also runs from an archive on the GPU machine.
        let readme_path = common::testing::crate_dir(env!("CARGO_MANIFEST_DIR")).join("README.md");
        let readme = std::fs::read_to_string(&readme_path)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", readme_path.display()));
        let transcript = common::testing::readme_transcript(&readme, 2).expect("transcript");
        for line in support_lines(&[h200(0), h200(1)]) {
            assert!(
                transcript
                    .iter()
                    .any(|pattern| common::testing::line_matches(pattern, &line)),
                "README transcript has no line matching {line:?}"
            );
        }
    }

    #[test]
    fn peers_are_listed_in_plain_words() {
        assert_eq!(whose(&[], "descriptor"), "no peer's descriptor");
        assert_eq!(whose(&[1], "descriptor"), "rank 1's descriptor");
        assert_eq!(
            whose(&[0, 2, 3], "allocation"),
            "the allocations of ranks 0, 2 and 3"
        );
    }

    #[test]
    fn the_symmetric_size_suits_every_rank_and_says_why_not() {
        let gib = 1usize << 30;
        assert_eq!(
            symmetric_size(1, &[2 << 20, 2 << 20], 140 * gib, 0).unwrap(),
            (2 << 20, 2 << 20)
        );
        assert_eq!(
            symmetric_size(3 << 20, &[2 << 20, 64 << 10], 140 * gib, 0).unwrap(),
            (4 << 20, 2 << 20)
        );
        let err = symmetric_size(usize::MAX, &[2 << 20], 140 * gib, 0).unwrap_err();
        assert_eq!(common::exit_code(&err), common::EXIT_CANNOT_RUN);
        assert!(err.to_string().contains("does not fit in 64 bits"), "{err}");
        let err = symmetric_size(200 * gib, &[2 << 20], 140 * gib, 1).unwrap_err();
        assert_eq!(common::exit_code(&err), common::EXIT_CANNOT_RUN);
        assert!(err.to_string().contains("more than device 1's"), "{err}");
    }

    #[test]
    fn missing_vmm_or_fd_support_cannot_run_and_says_why() {
        let mut facts = DeviceFacts {
            host: "h".into(),
            device: 0,
            vmm: 0,
            posix_fd: 1,
            fabric: 0,
            rdma: 0,
            numa: 0,
            minimum: 0,
            recommended: 0,
        };
        let err = require_vmm_and_fds(&facts).unwrap_err();
        assert_eq!(common::exit_code(&err), common::EXIT_CANNOT_RUN);
        assert!(err.to_string().contains("no virtual memory management"));
        facts.vmm = 1;
        facts.posix_fd = 0;
        let err = require_vmm_and_fds(&facts).unwrap_err();
        assert!(err.to_string().contains("POSIX file descriptors"));
        facts.posix_fd = 1;
        assert!(require_vmm_and_fds(&facts).is_ok());
    }

    #[test]
    fn the_request_is_described_like_the_transcript() {
        let prop = pinned_device_memory(1, true);
        assert_eq!(
            describe(&prop),
            "pinned on device 1, POSIX fd, gpuDirectRDMACapable 1"
        );
        assert!(same_request(&prop, &prop));
        let mut other = prop;
        other.location.id = 0;
        assert!(!same_request(&other, &prop));
    }
}
