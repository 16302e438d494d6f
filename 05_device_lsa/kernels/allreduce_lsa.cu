// An AllReduce (sum of floats) written against NCCL's device API.
//
// Compiled at run time by nvcc, for the GPU in use and against the headers of
// the NCCL library in use (device-API code is tied to one NCCL release), into
// a cubin that the Rust host loads with cuModuleLoadData.
//
// The idea: both buffers are symmetric windows, so every rank can load from
// and store to every peer's buffer directly ("load/store accessible", LSA).
// Each rank sums a disjoint share of the elements by reading that share from
// every peer's send buffer, and writes the sum into every peer's receive
// buffer. An LSA barrier before and after keeps the ranks in step.

#include <nccl.h>
#include <nccl_device.h>

// extern "C": the host finds the kernel by this plain name.
//
// The grid size and the device communicator's lsaBarrierCount come from one
// Rust constant (BLOCKS in main.rs): block b uses LSA barrier b, so there must
// be a barrier for every block. ALLREDUCE_THREADS, the block size, is passed
// by the host on the nvcc command line from the same place as the launch's.
extern "C" __global__ void __launch_bounds__(ALLREDUCE_THREADS)
allreduce_lsa(ncclWindow_t sendwin, size_t sendoffset,
              ncclWindow_t recvwin, size_t recvoffset,
              size_t count, struct ncclDevComm devComm) {
  // One barrier session per block (CTA), over the LSA team: the ranks whose
  // memory this GPU can reach with loads and stores. Every block of every rank
  // that uses barrier index blockIdx.x meets every other such block.
  ncclLsaBarrierSession<ncclCoopCta> bar{ncclCoopCta(), devComm, ncclTeamLsa(devComm),
                                         devComm.lsaBarrier, blockIdx.x};

  // Acquire: after this, every peer has arrived, so its send buffer is filled
  // (its host copy finished before its launch) and we may read it. A relaxed
  // barrier here would let our loads be satisfied before the peers' data is
  // visible to us.
  bar.sync(ncclCoopCta(), cuda::memory_order_acquire);

  // NOTE: peers are numbered within the LSA team (the ranks this GPU reaches
  // by loads and stores), which is what ncclGetLsaPointer takes. NVIDIA's
  // example uses the world rank and size (devComm.rank, devComm.nRanks);
  // they agree only while the LSA team is the whole communicator: on one
  // node. From NCCL 2.28.7 a communicator across nodes can have symmetric
  // memory, with one LSA team per node, and there the world rank would
  // index the wrong peer.
  const ncclTeam lsa = ncclTeamLsa(devComm);
  const int rank = lsa.rank, nRanks = lsa.nRanks;

  // Threads of all ranks together cover the elements once: rank r's block b
  // owns the chunk of blockDim.x elements at (b * nRanks + r), then strides by
  // the total thread count of all ranks. So the ranks' shares are disjoint.
  const size_t first = threadIdx.x + (size_t)blockDim.x * (rank + (size_t)blockIdx.x * nRanks);
  const size_t stride = (size_t)blockDim.x * gridDim.x * nRanks;

  for (size_t i = first; i < count; i += stride) {
    float sum = 0.0f;
    for (int peer = 0; peer < nRanks; peer++) {
      // The peer's send buffer, mapped into this GPU's address space.
      const float* peer_send = (const float*)ncclGetLsaPointer(sendwin, sendoffset, peer);
      sum += peer_send[i];
    }
    for (int peer = 0; peer < nRanks; peer++) {
      float* peer_recv = (float*)ncclGetLsaPointer(recvwin, recvoffset, peer);
      peer_recv[i] = sum;
    }
  }

  // Release: our stores into the peers' receive buffers are ordered before our
  // arrival. No rank leaves this barrier before every rank has arrived, so when
  // any rank's kernel ends, every store into its receive buffer has been made.
  bar.sync(ncclCoopCta(), cuda::memory_order_release);
}
