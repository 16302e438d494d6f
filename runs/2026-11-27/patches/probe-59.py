"""Probe 59's build (PERF_NOTES.md, "The 2-rank AllReduce's 6 µs, step by
step"): in a checkout of HEAD, as python3 probe-59.py DIR. Thread 0 of the
fused CUDA kernel's block 0 reads clock64 at its entry, at symm_all_reduce's
entry, after the call's checks, after the one-shot's staging addresses, after
the first grid barrier, after the epoch read, after its own lines' exchange,
after the second grid barrier, and after the epilogue (%globaltimer at the
first and last); after its epilogue it adds the steps to its rank's sums and
prints their means when the size changes. At 1 rank the one-shot's points
are the grid barrier's. Nothing runs in the other blocks. Not committed."""
import sys

from probe_edit import HEADER, one_shot_points, replace, stamps

KERNEL = '/layer_tail/kernels/tp_tail.cu'

LIB = stamps(59, 12) + r'''
// ---- end of PROBE 59's library part -------------------------------------------

// Both backends' checks:'''

KERNEL_END = r'''
// PROBE 59: block 0's thread 0, after its epilogue: this launch's steps added to its
// rank's sums (cycles), printed as means when the size changes.
__device__ __forceinline__ void probe59_end(const void* ctx, unsigned long long key) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  probe59_t(9) = clock64();
  probe59_t(11) = probe59_now();
  const int rank = ((const SymmContext*)ctx)->rank & (SYMM_MAX_RANKS - 1);
  unsigned long long* S = probe59_sum[rank];
  if (S[0] != key) {
    const unsigned long long n = S[1] > 0 ? S[1] : 1;
    if (S[1] > 0)
      printf("probe59 rank %d elems %llu dtype %llu: %llu launches; block 0's thread 0, mean "
             "cycles: entry to symm_all_reduce %llu, to checks done %llu, to staging addresses "
             "%llu, to grid barrier 1 %llu, to epoch read %llu, to own lines exchanged %llu, "
             "to grid barrier 2 %llu, to epilogue end %llu; entry to epilogue end %llu cycles, "
             "%llu ns\n",
             rank, S[0] >> 1, S[0] & 1, S[1], S[2] / n, S[3] / n, S[4] / n, S[5] / n, S[6] / n,
             S[7] / n, S[8] / n, S[9] / n, S[10] / n, S[11] / n);
    for (int f = 1; f < 16; f++) S[f] = 0;
    S[0] = key;
  }
  S[1] += 1;
  for (int i = 1; i <= 8; i++) S[1 + i] += probe59_t(i) - probe59_t(i - 1);
  S[10] += probe59_t(9) - probe59_t(0);
  S[11] += probe59_t(11) - probe59_t(10);
}

// The fused kernel:'''


def build(wt):
    h = wt + HEADER
    replace(h, "\n// Both backends' checks:", LIB)
    replace(h, '''extern "C" __device__ int symm_all_reduce(void* ctx, void* local_ptr, size_t byte_offset,
                                          size_t num_elements, int reduce_op, int dtype) {
''', '''extern "C" __device__ int symm_all_reduce(void* ctx, void* local_ptr, size_t byte_offset,
                                          size_t num_elements, int reduce_op, int dtype) {
  PROBE59(1);
''')
    replace(h, '''  if (num_elements == 0) return SYMM_OK;
  if (nRanks == 1) {  // the sum is the input: only make it visible to every block
    symm_grid_sync(ctx->grid_sync);''', '''  if (num_elements == 0) return SYMM_OK;
  PROBE59(2);
  if (nRanks == 1) {  // the sum is the input: only make it visible to every block
    PROBE59(3);
    symm_grid_sync(ctx->grid_sync);
    PROBE59(4);
    PROBE59(5);
    PROBE59(6);
    PROBE59(7);''')
    replace(h, '''    unsigned int* epoch_word = (unsigned int*)staging[rank];  // the last call's epoch
    symm_grid_sync(ctx->grid_sync);
    __shared__ unsigned int symm_epoch;  // read once per block
    if (threadIdx.x == 0) symm_epoch = symm_next_epoch(*(volatile unsigned int*)epoch_word);
    __syncthreads();''', '''    unsigned int* epoch_word = (unsigned int*)staging[rank];  // the last call's epoch
    PROBE59(3);
    symm_grid_sync(ctx->grid_sync);
    PROBE59(4);
    __shared__ unsigned int symm_epoch;  // read once per block
    if (threadIdx.x == 0) symm_epoch = symm_next_epoch(*(volatile unsigned int*)epoch_word);
    __syncthreads();
    PROBE59(5);''')
    one_shot_points(h, None, 'PROBE59(6);', 'PROBE59(7);')
    k = wt + KERNEL
    replace(k, '\n// The fused kernel:', KERNEL_END)
    replace(k, '''  void* partial = (char*)buffer + byte_offset;
  // Compute: this rank's term of the layer's output, into the symmetric buffer.''', '''  PROBE59(0);
  if (blockIdx.x == 0 && threadIdx.x == 0) probe59_t(10) = probe59_now();
  void* partial = (char*)buffer + byte_offset;
  // Compute: this rank's term of the layer's output, into the symmetric buffer.''')
    replace(k, '''  if (blockIdx.x == 0 && threadIdx.x == 0) *status = rc;
  if (rc != SYMM_OK) return;  // uniform: every thread got the same code
  // Residual + RMSNorm on the sum, reading the all-reduced buffer directly.
  tp_epilogue(partial, residual, gamma, out, tokens, hidden, eps, dtype);''', '''  if (blockIdx.x == 0 && threadIdx.x == 0) *status = rc;
  if (rc != SYMM_OK) return;  // uniform: every thread got the same code
  // Residual + RMSNorm on the sum, reading the all-reduced buffer directly.
  tp_epilogue(partial, residual, gamma, out, tokens, hidden, eps, dtype);
  PROBE59(8);
  probe59_end(ctx, (unsigned long long)tokens * hidden * 2 + dtype);''')


if __name__ == '__main__':
    build(sys.argv[1])
