// The AllReduce built from NCCL's own device primitives instead of a loop of
// our own: ncclLsaReduceSumCopy_F32 (NCCL's docs call it a "one-step
// AllReduce") and ncclLsaReduceSum_F32, from nccl_device_wrapper.h of NCCL
// 2.32.3, linked from libnccl_device.ltoir by the jit route. NCCL chooses the
// vector width, the unrolling and the handling of misaligned ends; we choose
// only who does which elements, and the grid.
//
// Two kernels, picked by size on the host like the fast kernel's:
// * allreduce_prims_twoshot: rank r owns 1/n of the elements; its blocks
//   split that share, and each block calls ReduceSumCopy on its slice: loads
//   the slice from every peer's send window, sums, stores the sum into every
//   peer's receive window. Each rank moves 2(n-1)/n of the buffer.
// * allreduce_prims_oneshot: every rank sums all elements from every peer
//   into its own receive buffer (ReduceSum, a local destination): (n-1)
//   buffers in per rank, but no second hop, which pays for small buffers.
// An LSA barrier before (inputs ready) and after (outputs complete, and
// nobody still reads a send buffer its owner may refill), one per block.

// NCCL's own headers before the wrapper: see allreduce_lsa_c.cu.
#include <nccl_device/utility.h>
#include <nccl_device/coop.h>
#include <nccl_device/core.h>
#include <nccl_device_wrapper.h>

// Slices start on 16-byte boundaries (4 floats) relative to the buffer's
// start, so every slice is aligned as the buffer is.
#define SLICE_ALIGN 4

__device__ __forceinline__ size_t slice_edge(size_t count, size_t part, size_t parts) {
  const size_t units = (count + SLICE_ALIGN - 1) / SLICE_ALIGN;
  const size_t edge = units * part / parts * SLICE_ALIGN;
  return edge < count ? edge : count;
}

extern "C" __global__ void __launch_bounds__(ALLREDUCE_THREADS)
allreduce_prims_twoshot(ncclWindow_t sendwin, size_t sendoffset,
                        ncclWindow_t recvwin, size_t recvoffset,
                        size_t count, struct ncclDevComm devComm) {
  ncclTeam lsa;
  lsa.nRanks = devComm.lsaSize;
  lsa.rank = devComm.lsaRank;
  lsa.stride = 1;
  ncclCoopAny cta;
  ncclCoopAnyInitCta(&cta);
  alignas(ncclLsaBarrierSession_C) unsigned char storage[sizeof(ncclLsaBarrierSession_C)];
  ncclLsaBarrierSession_C* bar = reinterpret_cast<ncclLsaBarrierSession_C*>(storage);
  ncclLsaBarrierSessionInit(bar, cta, devComm, lsa, devComm.lsaBarrier, blockIdx.x);
  ncclLsaBarrierSessionSync(bar, cta, cuda::memory_order_acquire);

  // This rank's share, then this block's slice of it.
  const size_t parts = (size_t)lsa.nRanks * gridDim.x;
  const size_t part = (size_t)lsa.rank * gridDim.x + blockIdx.x;
  const size_t lo = slice_edge(count, part, parts), hi = slice_edge(count, part + 1, parts);
  if (hi > lo) {
    ncclLsaReduceSumCopy_F32(cta, sendwin, sendoffset + lo * sizeof(float),
                             recvwin, recvoffset + lo * sizeof(float), hi - lo, lsa);
  }

  ncclLsaBarrierSessionSync(bar, cta, cuda::memory_order_release);
  ncclLsaBarrierSessionDestroy(bar);
}

extern "C" __global__ void __launch_bounds__(ALLREDUCE_THREADS)
allreduce_prims_oneshot(ncclWindow_t sendwin, size_t sendoffset,
                        ncclWindow_t recvwin, size_t recvoffset,
                        size_t count, struct ncclDevComm devComm) {
  ncclTeam lsa;
  lsa.nRanks = devComm.lsaSize;
  lsa.rank = devComm.lsaRank;
  lsa.stride = 1;
  ncclCoopAny cta;
  ncclCoopAnyInitCta(&cta);
  alignas(ncclLsaBarrierSession_C) unsigned char storage[sizeof(ncclLsaBarrierSession_C)];
  ncclLsaBarrierSession_C* bar = reinterpret_cast<ncclLsaBarrierSession_C*>(storage);
  ncclLsaBarrierSessionInit(bar, cta, devComm, lsa, devComm.lsaBarrier, blockIdx.x);
  ncclLsaBarrierSessionSync(bar, cta, cuda::memory_order_acquire);

  // Every block a slice of all elements, into our own receive buffer.
  const size_t lo = slice_edge(count, blockIdx.x, gridDim.x);
  const size_t hi = slice_edge(count, blockIdx.x + 1, gridDim.x);
  float* out = (float*)ncclGetPeerPointerTeam(recvwin, recvoffset, lsa, lsa.rank);
  if (hi > lo) {
    ncclLsaReduceSum_F32(cta, sendwin, sendoffset + lo * sizeof(float), out + lo, hi - lo, lsa);
  }

  ncclLsaBarrierSessionSync(bar, cta, cuda::memory_order_release);
  ncclLsaBarrierSessionDestroy(bar);
}
