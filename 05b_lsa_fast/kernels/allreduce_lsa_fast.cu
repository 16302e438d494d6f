// A fast AllReduce (sum of floats) on NCCL's device API: two kernels that
// the host picks between by size (05b_lsa_fast/src/fast.rs).
//
// * allreduce_oneshot_ll, for small buffers: no barrier at all. Each rank
//   broadcasts its whole input into every peer's LL staging buffer (NCCL's
//   low-latency protocol: every 16-byte store carries 8 bytes of data and a
//   flag twice, so a reader knows the data has arrived by looking at the
//   line itself), then sums what arrived from every rank, in rank order,
//   into its own output. Latency: one NVLink store plus one local poll.
// * allreduce_twoshot, for large buffers: reduce-scatter by loads, then
//   all-gather by stores, in one pass. Each rank owns a contiguous 1/n of
//   the 16-byte vectors; it loads its share from every peer, sums, and
//   stores the sum into every peer's output. Each rank moves 2(n-1)/n of
//   the buffer over NVLink, the least an AllReduce can. An LSA barrier
//   before (inputs ready) and after (outputs complete).
//
// Compiled at run time by nvcc against the headers of the NCCL in use, like
// allreduce_lsa.cu. The host passes on the command line:
//   ALLREDUCE_THREADS   threads per block (both kernels)
//   LL_UNITS_PER_BLOCK  8-byte units one block of the one-shot kernel may
//                       carry; the LL staging buffer is sized for it.

#include <nccl.h>
#include <nccl_device.h>

// The unrolled loops below cover LSA teams of up to this many ranks (a
// node of 8 GPUs); the host refuses larger teams for these kernels.
#define MAX_LSA_RANKS 8
// 16-byte vectors each thread has in flight per peer in the two-shot loop.
#define UNROLL 4

__device__ __forceinline__ float4 add(float4 a, float4 b) {
  return make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
}
__device__ __forceinline__ float2 add(float2 a, float2 b) {
  return make_float2(a.x + b.x, a.y + b.y);
}

// ---------------------------------------------------------------------------
// One-shot over LL: small buffers.
// ---------------------------------------------------------------------------

// NOTE: three conditions this kernel assumes and cannot check itself:
// * Every rank launches the same grid (blocks talk to the same-numbered
//   block of every peer). The host derives the grid from the options and the
//   count alone, and compares those across ranks before the first launch
//   (fast.rs: check_same_plan).
// * Every block holds at least one unit, so that each block sends to and
//   receives from every peer in every epoch, as ncclLLA2ASession::endEpoch
//   requires. The host sizes the grid that way and checks it against the
//   staging buffer before each launch (fast.rs: oneshot_blocks, check_grid).
// * Launches on one device communicator are serialized: one stream per rank,
//   never two launches at once. The epoch kept in NCCL memory is per block,
//   so two overlapping launches would share it and read each other's lines.
//   Nothing on the host can see every stream and process that holds a copy
//   of the device communicator: this is the caller's promise (the lesson
//   and the benchmark launch on one stream).
extern "C" __global__ void __launch_bounds__(ALLREDUCE_THREADS)
allreduce_oneshot_ll(ncclWindow_t sendwin, size_t sendoffset,
                     ncclWindow_t recvwin, size_t recvoffset,
                     size_t count, struct ncclDevComm devComm,
                     ncclLLA2AHandle llHandle) {
  // NOTE: peers are numbered by LSA rank within the LSA team, the ranks
  // whose memory this GPU reaches by loads and stores.
  const ncclTeam lsa = ncclTeamLsa(devComm);
  const int rank = lsa.rank, nRanks = lsa.nRanks;
  const int slotsPerBlock = nRanks * LL_UNITS_PER_BLOCK;

  // This block's units (pairs of floats; the last may be half empty).
  const size_t units = (count + 1) / 2;
  const size_t first = units * blockIdx.x / gridDim.x;
  const size_t last = units * (blockIdx.x + 1) / gridDim.x;

  const float* input = (const float*)ncclGetLocalPointer(sendwin, sendoffset);
  float* output = (float*)ncclGetLocalPointer(recvwin, recvoffset);

  // The session keeps this block's epoch in NCCL memory between launches:
  // epochs alternate between two halves of the staging buffer, and a
  // stale line from the previous launch carries the previous epoch.
  ncclLLA2ASession<ncclCoopCta> ll(ncclCoopCta(), devComm, lsa, llHandle,
                                   blockIdx.x, slotsPerBlock);

  // Send: our unit u goes into slot (rank, u) of every rank's staging
  // buffer, our own included. Scalar loads: no alignment is assumed.
  for (size_t u = first + threadIdx.x; u < last; u += blockDim.x) {
    const size_t i = 2 * u;
    const float2 pair = make_float2(input[i], i + 1 < count ? input[i + 1] : 0.0f);
    ll.bcast(rank * LL_UNITS_PER_BLOCK + (int)(u - first), pair);
  }

  // Receive: poll slots (0, u) ... (n-1, u) of our own staging buffer until
  // every rank's flag shows this epoch, then add in rank order, so that
  // every rank computes bitwise the same sum.
  for (size_t u = first + threadIdx.x; u < last; u += blockDim.x) {
    float2 got[MAX_LSA_RANKS];
    ll.template recvUnrolled</*MinEltCount=*/1, /*MaxEltCount=*/MAX_LSA_RANKS>(
        (int)(u - first), nRanks, LL_UNITS_PER_BLOCK, got);
    float2 sum = got[0];
#pragma unroll
    for (int peer = 1; peer < MAX_LSA_RANKS; peer++) {
      if (peer < nRanks) sum = add(sum, got[peer]);
    }
    const size_t i = 2 * u;
    output[i] = sum.x;
    if (i + 1 < count) output[i + 1] = sum.y;
  }

  // Every peer was sent to and received from: the next launch may reuse
  // the other half of the staging buffer.
  ll.endEpoch(ncclCoopCta());
}

// ---------------------------------------------------------------------------
// Two-shot: large buffers.
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
// NOTE: as for the one-shot, every rank must launch the same grid (checked
// on the host before the first launch), launches on one device communicator
// must be serialized (one stream: the caller's promise), and every block must
// be resident at once, since each waits at the barrier for its peers' blocks
// (the host caps the grid with the occupancy API: fast.rs, twoshot_cap).
extern "C" __global__ void __launch_bounds__(ALLREDUCE_THREADS)
allreduce_twoshot(ncclWindow_t sendwin, size_t sendoffset,
                  ncclWindow_t recvwin, size_t recvoffset,
                  size_t count, struct ncclDevComm devComm) {
  const ncclTeam lsa = ncclTeamLsa(devComm);
  const int rank = lsa.rank, nRanks = lsa.nRanks;
  ncclLsaBarrierSession<ncclCoopCta> bar{ncclCoopCta(), devComm, lsa,
                                         devComm.lsaBarrier, blockIdx.x};

  // Every peer's buffers, mapped into this GPU's address space, looked up
  // once instead of in every iteration.
  float* send[MAX_LSA_RANKS];
  float* recv[MAX_LSA_RANKS];
#pragma unroll
  for (int peer = 0; peer < MAX_LSA_RANKS; peer++) {
    const int p = peer < nRanks ? peer : 0;
    send[peer] = (float*)ncclGetLsaPointer(sendwin, sendoffset, p);
    recv[peer] = (float*)ncclGetLsaPointer(recvwin, recvoffset, p);
  }

  // Acquire: every peer has started this kernel, so the stream work before
  // it (the copy or kernel that wrote its input) is done, and our loads
  // below cannot be satisfied before that data is visible to us.
  bar.sync(ncclCoopCta(), cuda::memory_order_acquire);

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
  bar.sync(ncclCoopCta(), cuda::memory_order_release);
}
