"""Probe 54's build (PERF_NOTES.md, "Where a 2-rank fused operation's time
goes"): in a checkout of HEAD (GPU code of 0269502), as python3 probe-54.py
DIR. The fused CUDA kernel stamps %globaltimer at its phases' ends (thread 0
of each block; block 0 alone after each grid barrier), and the last block,
idle in the compute phase at the small sizes, sums the previous launch's
stamps per rank and size and prints them when the size changes. The launch
count is the context's `reserved` word, which no kernel reads. Not
committed: the library and the lesson's kernel stay as they are."""
import sys

from probe_edit import HEADER, one_shot_points, replace

KERNEL = '/layer_tail/kernels/tp_tail.cu'

PROBE = r'''
// ---- PROBE 54 (runs/2026-11-27/patches/probe-54.py, not committed) ---------
// Per rank and launch parity: every block's entry, compute end, exchange end and
// work end; block 0's ends of grid barriers 1 and 2, and the size's key.
#define PROBE_BLOCKS 160
#define PROBE_ON 0x5054u
__device__ unsigned long long probe_blk[SYMM_MAX_RANKS][2][PROBE_BLOCKS][4];
__device__ unsigned long long probe_b0[SYMM_MAX_RANKS][2][4];
__device__ unsigned long long probe_sum[SYMM_MAX_RANKS][24];
__device__ __forceinline__ unsigned long long probe_now() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}
__device__ __forceinline__ unsigned int& probe_on() { __shared__ unsigned int on; return on; }
__device__ __forceinline__ unsigned int& probe_parity() { __shared__ unsigned int p; return p; }
__device__ __forceinline__ int& probe_rank() { __shared__ int r; return r; }
__device__ __forceinline__ unsigned long long probe_min(unsigned long long a, unsigned long long b) {
  return a < b ? a : b;
}
__device__ __forceinline__ unsigned long long probe_max(unsigned long long a, unsigned long long b) {
  return a > b ? a : b;
}
struct ProbeState {
  unsigned long long t0;
  int rank, launch;
};
// Every thread calls it; thread 0 reads the rank and the launch count (one trip, used later).
__device__ __forceinline__ ProbeState probe_enter(const void* ctx) {
  ProbeState s = {0, 0, 0};
  if (threadIdx.x == 0) {
    s.t0 = probe_now();
    s.rank = __ldcg((const int*)ctx + 1) & (SYMM_MAX_RANKS - 1);
    s.launch = __ldcg((const int*)ctx + 15);  // NcclSymmContext::reserved
  }
  return s;
}
__device__ __forceinline__ void probe_print(int rank, const unsigned long long* S) {
  const unsigned long long n = S[1] > 0 ? S[1] : 1, g = S[10] > 0 ? S[10] : 1;
  printf("probe54 rank %d elems %llu dtype %llu: %llu steady launches (entered under 20 us "
         "after the last one's work end; %llu after a pause left out). Means, ns from the "
         "first block's entry: block 0 entry %llu, last entry %llu, compute end %llu, grid "
         "sync 1 (block 0) %llu, exchange end %llu, grid sync 2 (block 0) %llu, work end %llu "
         "(min %llu); gap from the last launch's work end: mean %llu, min %llu\n",
         rank, S[0] >> 1, S[0] & 1, S[1], S[13], S[3] / n, S[4] / n, S[5] / n, S[6] / n,
         S[7] / n, S[8] / n, S[9] / n, S[20], S[11] / g, S[12]);
}
// The previous launch's stamps (the other parity), added to this rank's sums by the
// last block's first warp; printed when the size changes.
__device__ __forceinline__ void probe_aggregate() {
  const int rank = probe_rank();
  const unsigned int q = probe_parity() ^ 1u;
  unsigned long long emin = ~0ull, emax = 0, cmax = 0, xmax = 0, dmax = 0;
#pragma unroll
  for (int u = 0; u < PROBE_BLOCKS / 32; u++) {
    const int b = threadIdx.x + 32 * u;
    if (b < (int)gridDim.x) {
      const unsigned long long* r = probe_blk[rank][q][b];
      emin = probe_min(emin, __ldcg(r));
      emax = probe_max(emax, __ldcg(r));
      cmax = probe_max(cmax, __ldcg(r + 1));
      xmax = probe_max(xmax, __ldcg(r + 2));
      dmax = probe_max(dmax, __ldcg(r + 3));
    }
  }
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) {
    emin = probe_min(emin, __shfl_xor_sync(0xffffffffu, emin, o));
    emax = probe_max(emax, __shfl_xor_sync(0xffffffffu, emax, o));
    cmax = probe_max(cmax, __shfl_xor_sync(0xffffffffu, cmax, o));
    xmax = probe_max(xmax, __shfl_xor_sync(0xffffffffu, xmax, o));
    dmax = probe_max(dmax, __shfl_xor_sync(0xffffffffu, dmax, o));
  }
  if (threadIdx.x != 0) return;
  const unsigned long long e0 = __ldcg(&probe_blk[rank][q][0][0]);
  const unsigned long long g1 = __ldcg(&probe_b0[rank][q][0]), g2 = __ldcg(&probe_b0[rank][q][1]);
  const unsigned long long key = __ldcg(&probe_b0[rank][q][3]);
  unsigned long long* S = probe_sum[rank];
  if (key == 0 || emin == 0) return;
  if (key != S[0]) {
    if (S[1] + S[13] > 0) probe_print(rank, S);
    for (int f = 1; f < 24; f++)
      if (f != 2) S[f] = 0;
    S[0] = key;
    S[12] = S[20] = ~0ull;
  }
  // Only launches that followed the last one closely (in a round, not after the host's
  // barrier and checks): the steady state the bench's time per operation is.
  const bool steady = S[2] != 0 && emin > S[2] && emin - S[2] < 20000;
  if (!steady) {
    S[13] += 1;
    S[2] = dmax;
    return;
  }
  S[1] += 1;
  S[3] += e0 - emin;
  S[4] += emax - emin;
  S[5] += cmax - emin;
  S[6] += g1 - emin;
  S[7] += xmax - emin;
  S[8] += g2 - emin;
  S[9] += dmax - emin;
  S[20] = probe_min(S[20], dmax - emin);
  S[10] += 1;
  S[11] += emin - S[2];
  S[12] = probe_min(S[12], emin - S[2]);
  S[2] = dmax;
}
// Every thread calls it, after the compute phase.
__device__ __forceinline__ void probe_cend(const ProbeState& s, unsigned long long key) {
  if (threadIdx.x == 0) {
    const unsigned long long t = probe_now();
    const unsigned int par = (unsigned int)s.launch & 1u;
    probe_on() = PROBE_ON;
    probe_parity() = par;
    probe_rank() = s.rank;
    unsigned long long* b = probe_blk[s.rank][par][blockIdx.x];
    b[0] = s.t0;
    b[1] = t;
    if (blockIdx.x == 0) probe_b0[s.rank][par][3] = key;
  }
  if (blockIdx.x == gridDim.x - 1) {
    __syncthreads();
    if (threadIdx.x < 32) probe_aggregate();
  }
}
__device__ __forceinline__ void probe_block0(int field) {
  if (probe_on() == PROBE_ON && blockIdx.x == 0 && threadIdx.x == 0)
    probe_b0[probe_rank()][probe_parity()][field] = probe_now();
}
__device__ __forceinline__ void probe_block(int field) {
  if (probe_on() != PROBE_ON) return;  // uniform: published by a barrier since
  __syncthreads();
  if (threadIdx.x == 0) probe_blk[probe_rank()][probe_parity()][blockIdx.x][field] = probe_now();
}
__device__ __forceinline__ void probe_dend(const ProbeState& s, void* ctx) {
  probe_block(3);
  if (blockIdx.x == 0 && threadIdx.x == 0) *((volatile int*)ctx + 15) = s.launch + 1;
}
// ---- end of PROBE 54 ---------------------------------------------------------

// Both backends' checks:'''


def build(wt):
    h = wt + HEADER
    replace(h, '\n// Both backends\' checks:', PROBE)
    # 1 rank: one grid barrier, no exchange.
    replace(h, '''  if (nRanks == 1) {  // the sum is the input: only make it visible to every block
    symm_grid_sync(ctx->grid_sync);
    return SYMM_OK;
  }
  const ncclTeam lsa''', '''  if (nRanks == 1) {  // the sum is the input: only make it visible to every block
    symm_grid_sync(ctx->grid_sync);
    probe_block0(0);
    probe_block(2);
    probe_block0(1);
    return SYMM_OK;
  }
  const ncclTeam lsa''')
    one_shot_points(h, 'probe_block0(0);', 'probe_block(2);', 'probe_block0(1);')
    k = wt + KERNEL
    replace(k, '''  void* partial = (char*)buffer + byte_offset;
  // Compute: this rank's term of the layer's output, into the symmetric buffer.
  tp_partial(x, w, partial, tokens, hidden, k, dtype);''', '''  const ProbeState probe = probe_enter(ctx);
  void* partial = (char*)buffer + byte_offset;
  // Compute: this rank's term of the layer's output, into the symmetric buffer.
  tp_partial(x, w, partial, tokens, hidden, k, dtype);
  probe_cend(probe, (unsigned long long)tokens * hidden * 2 + dtype);''')
    replace(k, '''  tp_epilogue(partial, residual, gamma, out, tokens, hidden, eps, dtype);
}''', '''  tp_epilogue(partial, residual, gamma, out, tokens, hidden, eps, dtype);
  probe_dend(probe, ctx);
}''')
    replace(k, '''                       int reduce_op, int dtype, int* status) {
  const int rc''', '''                       int reduce_op, int dtype, int* status) {
  if (threadIdx.x == 0) probe_on() = 0;
  const int rc''')


if __name__ == '__main__':
    build(sys.argv[1])
