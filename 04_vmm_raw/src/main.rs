//! # Lesson 04: ncclMemAlloc by hand, mapped by every peer
//!
//! What `ncclMemAlloc` does underneath, with the CUDA driver's virtual memory
//! management (VMM) calls, and what NCCL then does to make the memory
//! *symmetric*: every rank allocates the same size, exports its allocation as
//! a file descriptor, passes the descriptor to its peers, and maps every
//! peer's allocation into its own GPU's address space. Then each rank writes
//! into every buffer through those mappings, and reads every buffer back.
//!
//! Why it matters: lessons 01, 02, 03 and 05 call `ncclMemAlloc` and trust it.
//! When NCCL has no symmetric memory, the cause is one of the calls below: no
//! VMM, no shareable handles, no peer access between two GPUs, or a
//! descriptor that cannot reach another process. Here each one is visible.
//!
//! Run it:
//!
//! ```text
//! NTHREADS=2 cargo run --release --bin 04_vmm_raw          # two GPUs, one thread each
//! cargo build --release --features mpi
//! mpirun -np 2 target/release/04_vmm_raw                   # one process per GPU
//! NTHREADS=2 target/release/04_vmm_raw --size-bytes 64M    # or VMM_SIZE_BYTES=64M
//! ```
//!
//! Left out on purpose: fabric handles (`CU_MEM_HANDLE_TYPE_FABRIC`, for
//! multi-node NVLink), which NCCL also requests when the GPU has them;
//! multicast objects (`cuMulticastCreate`), which must not be used on shared
//! machines; the look-ups `ncclMemFree` makes from a bare pointer
//! (`cuMemRetainAllocationHandle`, `cuMemGetAddressRange`); and kernels: the
//! copies here go through the copy engines (lesson 05 has a kernel).

use std::ffi::{c_int, c_void};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::process::ExitCode;

use anyhow::{Context, Result};
use common::verify::check_all;
use common::{Lesson, Needs, RankContext};
use cudarc::driver::sys::CUdevice_attribute as A;
use cudarc::driver::{result, sys, CudaContext};
use vmm_raw::fd_channel::FdChannel;
use vmm_raw::{
    gather_peers, no_peer_access, require_one_node, require_support, symmetric_size, word,
    AddressRange, Allocation, Buffer, Layout, Mapping,
};

const LESSON: Lesson = Lesson {
    name: "04_vmm_raw",
    about: "What ncclMemAlloc does underneath: cuMemCreate, map, export as a file descriptor, import in every peer",
    needs: Needs::Gpu,
    tool: None,
};

const POSIX_FD: sys::CUmemAllocationHandleType =
    sys::CUmemAllocationHandleType::CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;

#[derive(clap::Args, Debug)]
struct Args {
    /// Bytes of GPU memory per rank, such as 2097152, 64K, 256M or 1G (powers
    /// of 1024); rounded up to the allocation granularity (often 2 MiB).
    #[arg(
        long = "size-bytes",
        env = "VMM_SIZE_BYTES",
        value_name = "BYTES",
        default_value = "2M",
        value_parser = common::parse_size
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
        "Lesson 04: ncclMemAlloc by hand, mapped by every peer ({size} rank{})",
        common::plural(size)
    ));

    // Step 1: Check that each GPU can share its memory, and how finely it allocates.
    ctx.println_root(
        "Step 1: Check that each GPU can share its memory, and how finely it allocates.",
    );
    let gpu = CudaContext::new(ctx.device()).context("Step 1: bind the GPU")?;
    let device = gpu.cu_device();
    let attribute = |attr: A| -> Result<c_int> {
        let mut value = 0;
        // SAFETY: writes one int.
        unsafe { sys::cuDeviceGetAttribute(&mut value, attr, device) }
            .result()
            .with_context(|| format!("Step 1: cuDeviceGetAttribute({attr:?})"))?;
        Ok(value)
    };
    let vmm = attribute(A::CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED)?;
    let posix_fd = attribute(A::CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED)?;
    let rdma = attribute(A::CU_DEVICE_ATTRIBUTE_GPU_DIRECT_RDMA_WITH_CUDA_VMM_SUPPORTED)?;
    ctx.all_ok(require_support(ctx.device(), vmm, posix_fd).context("Step 1"))?;
    let prop = pinned_device_memory(device, rdma == 1);
    let mut granularity = 0;
    // SAFETY: writes one size_t; `prop` is a valid description.
    unsafe {
        sys::cuMemGetAllocationGranularity(
            &mut granularity,
            &prop,
            sys::CUmemAllocationGranularity_flags::CU_MEM_ALLOC_GRANULARITY_RECOMMENDED,
        )
    }
    .result()
    .context("Step 1: cuMemGetAllocationGranularity")?;
    ctx.println_ordered(format!(
        "  Rank {rank}: device {}, VMM {vmm}, POSIX fd handles {posix_fd}, GPUDirect RDMA {rdma}, granularity {granularity} bytes",
        ctx.device()
    ))?;
    // NOTE: a mapping of a peer's memory is usable only if this GPU reaches
    // the peer's GPU by CUDA P2P (NVLink or PCIe); ask before mapping.
    let peers = gather_peers(ctx, ctx.device(), granularity).context("Step 1")?;
    let reach_every_peer = || -> Result<()> {
        require_one_node(
            rank,
            &peers.iter().map(|p| p.host.as_str()).collect::<Vec<_>>(),
        )?;
        for (peer, theirs) in peers.iter().enumerate() {
            if theirs.device == ctx.device() {
                continue;
            }
            let peer_device = result::device::get(theirs.device as c_int)?;
            let mut can_access = 0;
            // SAFETY: writes one int.
            unsafe { sys::cuDeviceCanAccessPeer(&mut can_access, device, peer_device) }
                .result()
                .context("cuDeviceCanAccessPeer")?;
            if can_access != 1 {
                return Err(no_peer_access(ctx.device(), peer, theirs.device).into());
            }
        }
        Ok(())
    };
    ctx.all_ok(reach_every_peer().context("Step 1"))?;

    // Step 2: Allocate, reserve, map and allow access: ncclMemAlloc by hand.
    // NOTE: symmetric means the same size on every rank, so the size is a
    // multiple of every rank's granularity, not just this one's.
    ctx.println_root("Step 2: Allocate, reserve, map and allow access: ncclMemAlloc by hand.");
    let granularities: Vec<usize> = peers.iter().map(|p| p.granularity).collect();
    let total = gpu.total_mem().context("Step 2: cuDeviceTotalMem")?;
    let (bytes, alignment) =
        ctx.all_ok(symmetric_size(args.size_bytes, &granularities, total).context("Step 2"))?;
    ctx.println_root(format!(
        "  Every rank allocates {bytes} bytes ({} requested, rounded up to a multiple of {alignment}) and maps them for its GPU",
        args.size_bytes
    ));
    let mut handle = 0;
    // SAFETY: `handle` receives the new allocation; `prop` is a valid description.
    unsafe { sys::cuMemCreate(&mut handle, bytes, &prop, 0) }
        .result()
        .context("Step 2: cuMemCreate")?;
    // SAFETY: cuMemCreate just made `handle`, and only the guard releases it.
    let allocation = unsafe { Allocation::adopt(handle) };
    let own = map_for_this_gpu(allocation, bytes, alignment, device).context("Step 2")?;

    // Step 3: Export the allocation as a file descriptor and pass it to every peer.
    // NOTE: whoever holds the descriptor can map this memory, so it travels
    // only to the run's own processes (SCM_RIGHTS over Unix sockets in a
    // private directory: see fd_channel.rs). Threads take the same path.
    ctx.println_root(
        "Step 3: Export the allocation as a file descriptor and pass it to every peer.",
    );
    let mut fd: c_int = -1;
    // SAFETY: for POSIX fds the driver writes an int through the pointer.
    unsafe {
        sys::cuMemExportToShareableHandle(
            (&mut fd as *mut c_int).cast::<c_void>(),
            own.allocation.handle(),
            POSIX_FD,
            0,
        )
    }
    .result()
    .context("Step 3: cuMemExportToShareableHandle")?;
    // SAFETY: the driver just opened `fd` for us; nobody else owns it.
    let exported = unsafe { OwnedFd::from_raw_fd(fd) };
    let channel = FdChannel::open(ctx).context("Step 3: open the socket directory")?;
    ctx.println_ordered(format!(
        "  Rank {rank} exported its allocation and listens on rank-{rank}.sock"
    ))?;
    let peer_fds = channel
        .exchange(ctx, exported.as_fd())
        .context("Step 3: pass the descriptors to the peers")?;
    // Every peer now holds a descriptor of its own for the same memory.
    drop(exported);
    let peer_ranks: Vec<usize> = (0..size).filter(|&p| peer_fds[p].is_some()).collect();

    // Step 4: Import every peer's allocation and map it for this GPU.
    // NOTE: an imported handle has no address and no access yet: reserve, map
    // and cuMemSetAccess again, for this rank's device.
    ctx.println_root("Step 4: Import every peer's allocation and map it for this GPU.");
    let mut imports: Vec<(usize, Buffer)> = Vec::new();
    for (peer, fd) in peer_fds.into_iter().enumerate() {
        let Some(fd) = fd else { continue };
        let mut handle = 0;
        // NOTE: for POSIX fds the "OS handle" is the descriptor's value cast
        // to a pointer, not a pointer to it as in the export. Passing a
        // pointer compiles, and fails with CUDA_ERROR_INVALID_VALUE.
        // SAFETY: `handle` receives the import; the driver only reads the fd.
        unsafe {
            sys::cuMemImportFromShareableHandle(
                &mut handle,
                fd.as_raw_fd() as usize as *mut c_void,
                POSIX_FD,
            )
        }
        .result()
        .with_context(|| {
            format!("Step 4: cuMemImportFromShareableHandle of rank {peer}'s descriptor")
        })?;
        // SAFETY: the import just made `handle`, and only the guard releases it.
        let allocation = unsafe { Allocation::adopt(handle) };
        // The handle keeps the memory alive; the descriptor can go (NCCL closes it here too).
        drop(fd);
        let buffer = map_for_this_gpu(allocation, bytes, alignment, device)
            .with_context(|| format!("Step 4: map rank {peer}'s allocation"))?;
        imports.push((peer, buffer));
    }
    ctx.println_ordered(if peer_ranks.is_empty() {
        format!("  Rank {rank} has no peers: nothing to import")
    } else {
        format!(
            "  Rank {rank} mapped the allocations of ranks {peer_ranks:?} read-write for device {}",
            ctx.device()
        )
    })?;

    // Step 5: Write this rank's slot of every buffer through the mappings.
    // Each buffer has one slot per rank; rank w writes slot w of all of them,
    // its own included, with words that name the writer and the owner.
    ctx.println_root("Step 5: Write this rank's slot of every buffer through the mappings.");
    let layout = Layout {
        words: bytes / 4,
        ranks: size,
    };
    let mut buffers: Vec<(usize, sys::CUdeviceptr)> = imports
        .iter()
        .map(|(peer, buffer)| (*peer, buffer.mapping.ptr()))
        .collect();
    buffers.insert(rank, (rank, own.mapping.ptr()));
    let slot = layout.slot(rank);
    for &(owner, ptr) in &buffers {
        let words: Vec<u32> = (0..slot.len()).map(|i| word(rank, owner, i)).collect();
        let at = ptr + (slot.start * 4) as u64;
        // SAFETY: the slot lies inside a mapping this rank's device may write.
        unsafe { sys::cuMemcpyHtoD_v2(at, words.as_ptr().cast(), slot.len() * 4) }
            .result()
            .with_context(|| format!("Step 5: cuMemcpyHtoD into rank {owner}'s buffer"))?;
    }
    // NOTE: a copy from pageable host memory may return before the data has
    // landed: synchronize before telling the peers it is there.
    gpu.synchronize().context("Step 5: cuCtxSynchronize")?;
    ctx.barrier()?;
    ctx.println_ordered(format!(
        "  Rank {rank} wrote {} words into slot {rank} of each of the {size} buffers",
        slot.len()
    ))?;

    // Step 6: Read every buffer back through the mappings and check every word.
    ctx.println_root("Step 6: Read every buffer back through the mappings and check every word.");
    let read_back = || -> Result<()> {
        let mut data = vec![0u32; layout.words];
        for &(owner, ptr) in &buffers {
            // SAFETY: `data` has room for the whole buffer, which this device may read.
            unsafe { sys::cuMemcpyDtoH_v2(data.as_mut_ptr().cast(), ptr, data.len() * 4) }
                .result()
                .with_context(|| format!("cuMemcpyDtoH from rank {owner}'s buffer"))?;
            let (checked, expected) = layout.expected(owner);
            let what = format!("rank {owner}'s buffer, read by rank {rank}");
            check_all(&what, &data[..checked], expected)?;
        }
        Ok(())
    };
    ctx.all_ok(read_back().context("Step 6"))?;
    ctx.println_ordered(format!(
        "  Rank {rank} found every rank's words in all {size} buffers (verified)"
    ))?;
    ctx.println_root("Results verified correctly");

    // Step 7: Tear down: every peer's mapping first, then this rank's own allocation.
    // NOTE: the driver frees memory only once no handle and no mapping refers
    // to it in any process, so an owner that went first would not crash its
    // peers; in this order the memory is really gone when its owner's
    // cuMemRelease returns. On an error path the guards' Drop makes the same
    // calls, in the same order, on each rank.
    ctx.println_root(
        "Step 7: Tear down: every peer's mapping first, then this rank's own allocation.",
    );
    let peers_released = imports.into_iter().try_for_each(|(peer, buffer)| {
        release(buffer, bytes).with_context(|| format!("rank {peer}'s buffer"))
    });
    ctx.all_ok(peers_released.context("Step 7: release the peers' buffers"))?;
    ctx.println_root("  Every rank unmapped its peers' buffers, freed their addresses and released the imported handles");
    ctx.all_ok(release(own, bytes).context("Step 7: release this rank's buffer"))?;
    ctx.println_root(
        "  Every rank unmapped its own buffer, freed its addresses and released its allocation",
    );
    ctx.println_root("All resources cleaned up successfully");
    Ok(())
}

/// What `ncclMemAlloc` asks `cuMemCreate` for: pinned (resident, never paged)
/// memory on this device, exportable as a POSIX file descriptor, and open to a
/// NIC's DMA (GPUDirect RDMA) when the GPU allows it. (NCCL also asks for
/// fabric handles when the GPU has them, and retries without if refused.)
fn pinned_device_memory(device: sys::CUdevice, rdma: bool) -> sys::CUmemAllocationProp {
    sys::CUmemAllocationProp {
        type_: sys::CUmemAllocationType::CU_MEM_ALLOCATION_TYPE_PINNED,
        requestedHandleTypes: POSIX_FD,
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

/// `allocation` at fresh addresses, read-write for `device`: reserve, map, allow access.
fn map_for_this_gpu(
    allocation: Allocation,
    bytes: usize,
    alignment: usize,
    device: sys::CUdevice,
) -> Result<Buffer> {
    let mut ptr = 0;
    // SAFETY: `ptr` receives the start of `bytes` fresh addresses, aligned to
    // `alignment`; no address hint (0), no flags (0).
    unsafe { sys::cuMemAddressReserve(&mut ptr, bytes, alignment, 0, 0) }
        .result()
        .context("cuMemAddressReserve")?;
    // SAFETY: just reserved, and only the guard frees it.
    let range = unsafe { AddressRange::adopt(ptr, bytes) };
    // SAFETY: the whole allocation, from offset 0, onto the whole range; no flags.
    unsafe { sys::cuMemMap(ptr, bytes, 0, allocation.handle(), 0) }
        .result()
        .context("cuMemMap")?;
    // SAFETY: just mapped, and only the guard unmaps it.
    let mapping = unsafe { Mapping::adopt(ptr, bytes) };
    // NOTE: until cuMemSetAccess the mapping exists but every access faults.
    // cudaMalloc does this for you; people forget it here.
    let access = sys::CUmemAccessDesc {
        location: sys::CUmemLocation {
            type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
            id: device,
        },
        flags: sys::CUmemAccess_flags::CU_MEM_ACCESS_FLAGS_PROT_READWRITE,
    };
    // SAFETY: `ptr..ptr+bytes` is mapped; one access descriptor is passed.
    unsafe { sys::cuMemSetAccess(ptr, bytes, &access, 1) }
        .result()
        .context("cuMemSetAccess")?;
    Ok(Buffer {
        mapping,
        range,
        allocation,
    })
}

/// The guards give up what they hold, and the calls they would make are made
/// here, in their order: unmap, free the addresses, release the handle.
fn release(buffer: Buffer, bytes: usize) -> Result<()> {
    // Bound in this order so that, if a call fails, the rest still drop in order.
    let Buffer {
        allocation,
        range,
        mapping,
    } = buffer;
    // SAFETY: every copy through the mapping has finished.
    unsafe { sys::cuMemUnmap(mapping.into_raw(), bytes) }
        .result()
        .context("cuMemUnmap")?;
    // SAFETY: nothing is mapped there any more.
    unsafe { sys::cuMemAddressFree(range.into_raw(), bytes) }
        .result()
        .context("cuMemAddressFree")?;
    // SAFETY: the handle is no longer mapped here.
    unsafe { sys::cuMemRelease(allocation.into_raw()) }
        .result()
        .context("cuMemRelease")?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn sizes_take_k_m_and_g_suffixes() {
        use clap::Parser;
        #[derive(clap::Parser)]
        struct Cli {
            #[command(flatten)]
            args: super::Args,
        }
        let size = |text| {
            let cli = Cli::try_parse_from(["04_vmm_raw", "--size-bytes", text]);
            cli.map(|cli| cli.args.size_bytes)
                .map_err(|e| e.to_string())
        };
        assert_eq!(size("2097152"), Ok(2 << 20));
        assert_eq!(size("64K"), Ok(64 << 10));
        assert_eq!(size("256M"), Ok(256 << 20));
        assert_eq!(size("1g"), Ok(1 << 30));
        assert!(size("2MiB")
            .unwrap_err()
            .contains("is not a size such as 4096, 64K or 256M"));
        assert!(size("0").unwrap_err().contains("at least 1 byte"));
    }
}
