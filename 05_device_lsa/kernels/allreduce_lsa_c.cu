// NVIDIA's example AllReduce (allreduce_lsa.cu), written against the C-style
// API of nccl_device_wrapper.h for the jit route: NVRTC compiles it to
// LTO-IR, and nvJitLink links it with NCCL's libnccl_device.ltoir, which
// defines every function the wrapper declares. The algorithm, the grid and
// the barriers are allreduce_lsa.cu's; see that file for the why of each step.
//
// What changes against the C++ API:
// * the wrapper declares plain functions; their names are NCCL 2.32.3's and
//   change between releases (the host checks them before compiling);
// * ncclTeamLsa() is header-inline C++ that the wrapper does not expose, so
//   the LSA team is built from the device communicator's fields;
// * a barrier session lives in storage the kernel provides and is set up and
//   torn down by calls (Init/Destroy) instead of a constructor/destructor;
// * peer pointers come from ncclGetPeerPointerTeam(window, offset, team, peer).

// NCCL's own headers first, then the wrapper: the header-defined helpers
// (ncclCoopGetLaneMask, ...) then stay inline here; included after, they are
// defined in this file and in the device library, and nvJitLink reports them
// "multiply defined".
#include <nccl_device/utility.h>
#include <nccl_device/coop.h>
#include <nccl_device/core.h>
#include <nccl_device_wrapper.h>

extern "C" __global__ void __launch_bounds__(ALLREDUCE_THREADS)
allreduce_lsa(ncclWindow_t sendwin, size_t sendoffset,
              ncclWindow_t recvwin, size_t recvoffset,
              size_t count, struct ncclDevComm devComm) {
  ncclTeam lsa;
  lsa.nRanks = devComm.lsaSize;
  lsa.rank = devComm.lsaRank;
  lsa.stride = 1;
  const int rank = lsa.rank, nRanks = lsa.nRanks;

  // The whole block (CTA) takes part in each barrier call.
  ncclCoopAny cta;
  ncclCoopAnyInitCta(&cta);
  // The session object's constructor is deleted: Init builds it in place.
  alignas(ncclLsaBarrierSession_C) unsigned char storage[sizeof(ncclLsaBarrierSession_C)];
  ncclLsaBarrierSession_C* bar = reinterpret_cast<ncclLsaBarrierSession_C*>(storage);
  ncclLsaBarrierSessionInit(bar, cta, devComm, lsa, devComm.lsaBarrier, blockIdx.x);

  // Acquire: every peer's send buffer is filled before we read it.
  ncclLsaBarrierSessionSync(bar, cta, cuda::memory_order_acquire);

  const size_t first = threadIdx.x + (size_t)blockDim.x * (rank + (size_t)blockIdx.x * nRanks);
  const size_t stride = (size_t)blockDim.x * gridDim.x * nRanks;
  for (size_t i = first; i < count; i += stride) {
    float sum = 0.0f;
    for (int peer = 0; peer < nRanks; peer++) {
      const float* peer_send = (const float*)ncclGetPeerPointerTeam(sendwin, sendoffset, lsa, peer);
      sum += peer_send[i];
    }
    for (int peer = 0; peer < nRanks; peer++) {
      float* peer_recv = (float*)ncclGetPeerPointerTeam(recvwin, recvoffset, lsa, peer);
      peer_recv[i] = sum;
    }
  }

  // Release: our stores are ordered before our arrival; nobody leaves first.
  ncclLsaBarrierSessionSync(bar, cta, cuda::memory_order_release);
  // Persists the barrier's epoch for the next launch.
  ncclLsaBarrierSessionDestroy(bar);
}
