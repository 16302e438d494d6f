// The fast AllReduce's two-shot kernel (allreduce_lsa_fast.cu), written
// against the C-style API of nccl_device_wrapper.h for the jit route (NVRTC +
// nvJitLink with NCCL's libnccl_device.ltoir). The loop, the vectors and the
// grid are allreduce_lsa_fast.cu's, line for line; only the device-API calls
// differ (see allreduce_lsa_c.cu for what changes and why).
//
// There is no one-shot kernel here: it runs over NCCL's LL protocol
// (ncclLLA2ASession), and NCCL 2.32.3's wrapper declares no LL function, so
// the jit route runs two-shot at every size.

// NCCL's own headers before the wrapper: see allreduce_lsa_c.cu.
#include <nccl_device/utility.h>
#include <nccl_device/coop.h>
#include <nccl_device/core.h>
#include <nccl_device_wrapper.h>

#define MAX_LSA_RANKS 8
#define UNROLL 4

__device__ __forceinline__ float4 add(float4 a, float4 b) {
  return make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
}

// ---------------------------------------------------------------------------
// Two-shot: every size.
// ---------------------------------------------------------------------------

// Elements [lo, hi) one float at a time, spread over every thread of every
// block of every rank: the unaligned head and tail, or everything when the
// send and receive buffers are not 16-byte aligned alike.
__device__ __forceinline__ void scalar_range(float* const (&send)[MAX_LSA_RANKS],
                                             float* const (&recv)[MAX_LSA_RANKS],
                                             int rank, int nRanks, size_t lo, size_t hi) {
  const size_t stride = (size_t)blockDim.x * gridDim.x * nRanks;
  for (size_t i = lo + threadIdx.x + (size_t)blockDim.x * (rank + (size_t)blockIdx.x * nRanks);
       i < hi; i += stride) {
    float sum = send[0][i];
#pragma unroll
    for (int peer = 1; peer < MAX_LSA_RANKS; peer++) {
      if (peer < nRanks) sum += send[peer][i];
    }
#pragma unroll
    for (int peer = 0; peer < MAX_LSA_RANKS; peer++) {
      if (peer < nRanks) recv[peer][i] = sum;
    }
  }
}

// The grid may be any size up to the device communicator's lsaBarrierCount:
// block b synchronises on LSA barrier b.
// NOTE: every rank must launch the same grid (checked on the host before the
// first launch), launches on one device communicator must be serialized (one
// stream: the caller's promise), and every block must be resident at once,
// since each waits at the barrier for its peers' blocks (the host caps the
// grid with the occupancy API: fast.rs, twoshot_cap).
extern "C" __global__ void __launch_bounds__(ALLREDUCE_THREADS)
allreduce_twoshot(ncclWindow_t sendwin, size_t sendoffset,
                  ncclWindow_t recvwin, size_t recvoffset,
                  size_t count, struct ncclDevComm devComm) {
  ncclTeam lsa;
  lsa.nRanks = devComm.lsaSize;
  lsa.rank = devComm.lsaRank;
  lsa.stride = 1;
  const int rank = lsa.rank, nRanks = lsa.nRanks;
  ncclCoopAny cta;
  ncclCoopAnyInitCta(&cta);
  alignas(ncclLsaBarrierSession_C) unsigned char storage[sizeof(ncclLsaBarrierSession_C)];
  ncclLsaBarrierSession_C* bar = reinterpret_cast<ncclLsaBarrierSession_C*>(storage);
  ncclLsaBarrierSessionInit(bar, cta, devComm, lsa, devComm.lsaBarrier, blockIdx.x);

  // Every peer's buffers, mapped into this GPU's address space, looked up
  // once instead of in every iteration.
  float* send[MAX_LSA_RANKS];
  float* recv[MAX_LSA_RANKS];
#pragma unroll
  for (int peer = 0; peer < MAX_LSA_RANKS; peer++) {
    const int p = peer < nRanks ? peer : 0;
    send[peer] = (float*)ncclGetPeerPointerTeam(sendwin, sendoffset, lsa, p);
    recv[peer] = (float*)ncclGetPeerPointerTeam(recvwin, recvoffset, lsa, p);
  }

  // Acquire: every peer has started this kernel, so the stream work before
  // it (the copy or kernel that wrote its input) is done, and our loads
  // below cannot be satisfied before that data is visible to us.
  ncclLsaBarrierSessionSync(bar, cta, cuda::memory_order_acquire);

  // Split [0, count) into an unaligned head, a body of 16-byte vectors and
  // a tail. Windows are mapped at the same offsets on every rank, so one
  // peer's addresses tell the alignment of every peer's.
  const uintptr_t s = (uintptr_t)send[0], r = (uintptr_t)recv[0];
  size_t head = count, body = 0;  // mutually misaligned: all scalar
  if (s % 16 == r % 16) {
    head = ((16 - s % 16) % 16) / sizeof(float);
    if (head > count) head = count;
    body = (count - head) / 4;
  }
  const size_t tail = head + 4 * body;
  scalar_range(send, recv, rank, nRanks, 0, head);

  // The body: rank `rank` owns vectors [mine, mineEnd). Each thread takes
  // UNROLL vectors a grid apart per iteration: every warp's accesses stay
  // contiguous, and the last, partial iteration is spread over all blocks
  // instead of leaving most multiprocessors idle at the end.
  const size_t mine = body * rank / nRanks, mineEnd = body * (rank + 1) / nRanks;
  const size_t grid = (size_t)gridDim.x * blockDim.x;
  const float4* sendv[MAX_LSA_RANKS];
  float4* recvv[MAX_LSA_RANKS];
#pragma unroll
  for (int peer = 0; peer < MAX_LSA_RANKS; peer++) {
    sendv[peer] = (const float4*)(send[peer] + head);
    recvv[peer] = (float4*)(recv[peer] + head);
  }
  for (size_t v = mine + (size_t)blockIdx.x * blockDim.x + threadIdx.x; v < mineEnd;
       v += grid * UNROLL) {
    // Reduce-scatter by loads: UNROLL independent 16-byte loads per peer in
    // flight, so that the NVLink round trips overlap. __ldcg/__stcg: global
    // 16-byte accesses cached in L2 only (each vector is used once).
    // Vectors past the end of this rank's share are zero, not left
    // uninitialized: they are added below (never stored).
    const float4 zero = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    float4 acc[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; u++) {
      acc[u] = v + u * grid < mineEnd ? __ldcg(sendv[0] + v + u * grid) : zero;
    }
#pragma unroll
    for (int peer = 1; peer < MAX_LSA_RANKS; peer++) {
      if (peer < nRanks) {
        float4 got[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
          got[u] = v + u * grid < mineEnd ? __ldcg(sendv[peer] + v + u * grid) : zero;
        }
#pragma unroll
        for (int u = 0; u < UNROLL; u++) acc[u] = add(acc[u], got[u]);
      }
    }
    // All-gather by stores: stores need no reply, so they stream.
#pragma unroll
    for (int peer = 0; peer < MAX_LSA_RANKS; peer++) {
      if (peer < nRanks) {
#pragma unroll
        for (int u = 0; u < UNROLL; u++) {
          if (v + u * grid < mineEnd) __stcg(recvv[peer] + v + u * grid, acc[u]);
        }
      }
    }
  }
  scalar_range(send, recv, rank, nRanks, tail, count);

  // Release: our stores into the peers' outputs are ordered before our
  // arrival, and nobody leaves before everyone has arrived, so when any
  // rank's kernel ends its output is complete. (A kernel that went on to
  // read the output would need acq_rel here: see the README.)
  ncclLsaBarrierSessionSync(bar, cta, cuda::memory_order_release);
  ncclLsaBarrierSessionDestroy(bar);
}
