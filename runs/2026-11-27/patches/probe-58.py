"""Probe 58's build (PERF_NOTES.md, "The compute phase's 2.2 µs, step by
step"): in a checkout of HEAD, as python3 probe-58.py DIR. Thread 0 of the
fused CUDA kernel's block 0 reads clock64 at its entry, at the compute
phase's start, when its first chunk of activations is staged, when that
chunk's fmas are done, when the tile's stores are issued, at the compute
phase's end, after symm_all_reduce and after the epilogue, and
%globaltimer at the first and the last; after its epilogue it adds the
steps to its rank's sums and prints their means when the size changes.
Nothing runs in the other blocks. Not committed."""
import sys

from probe_edit import replace, stamps

KERNEL = '/layer_tail/kernels/tp_tail.cu'

PROBE = stamps(58, 10) + r'''
// Block 0's thread 0, after its epilogue: the steps of this launch added to its rank's
// sums (cycles), printed as means when the size changes.
__device__ __forceinline__ void probe58_end(const void* ctx, unsigned long long key) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  probe58_t(7) = clock64();
  probe58_t(9) = probe58_now();
  const int rank = ((const SymmContext*)ctx)->rank & (SYMM_MAX_RANKS - 1);
  unsigned long long* S = probe58_sum[rank];
  if (S[0] != key) {
    const unsigned long long n = S[1] > 0 ? S[1] : 1;
    if (S[1] > 0)
      printf("probe58 rank %d elems %llu dtype %llu: %llu launches; block 0's thread 0, mean "
             "cycles: entry to compute start %llu, to activations staged %llu, to fmas done "
             "%llu, to stores issued %llu, to compute end %llu, to all-reduce end %llu, to "
             "epilogue end %llu; entry to epilogue end %llu cycles, %llu ns (min %llu cycles)\n",
             rank, S[0] >> 1, S[0] & 1, S[1], S[2] / n, S[3] / n, S[4] / n, S[5] / n,
             S[6] / n, S[7] / n, S[8] / n, S[9] / n, S[10] / n, S[11]);
    for (int f = 1; f < 16; f++) S[f] = 0;
    S[0] = key;
    S[11] = ~0ull;
  }
  S[1] += 1;
  for (int i = 1; i <= 7; i++) S[1 + i] += probe58_t(i) - probe58_t(i - 1);
  const unsigned long long span = probe58_t(7) - probe58_t(0);
  S[9] += span;
  S[10] += probe58_t(9) - probe58_t(8);
  S[11] = span < S[11] ? span : S[11];
}
// ---- end of PROBE 58 ---------------------------------------------------------

// Phase "compute": partial[t, i]'''


def build(wt):
    k = wt + KERNEL
    replace(k, '\n// Phase "compute": partial[t, i]', PROBE)
    replace(k, '''  int buffer = 0;  // the one the next chunk's fmas read
  if (blockIdx.x < tiles) stage(buffer, blockIdx.x, 0);''', '''  PROBE58(1);
  int buffer = 0;  // the one the next chunk's fmas read
  if (blockIdx.x < tiles) stage(buffer, blockIdx.x, 0);''')
    replace(k, '''      tp_staged();
      __syncthreads();  // this chunk staged by every thread, and the previous one read''',
            '''      tp_staged();
      __syncthreads();  // this chunk staged by every thread, and the previous one read
      if (tile == (int)blockIdx.x && c0 == 0) PROBE58(2);''')
    replace(k, '''    held = i0;
    // Row by row''', '''    if (tile == (int)blockIdx.x) PROBE58(3);
    held = i0;
    // Row by row''')
    replace(k, '''          tp_store(partial, row + c * SYMM_THREADS, dtype, acc[u][c]);
    }
  }
}''', '''          tp_store(partial, row + c * SYMM_THREADS, dtype, acc[u][c]);
    }
    if (tile == (int)blockIdx.x) PROBE58(4);
  }
}''')
    replace(k, '''  void* partial = (char*)buffer + byte_offset;
  // Compute: this rank's term of the layer's output, into the symmetric buffer.
  tp_partial(x, w, partial, tokens, hidden, k, dtype);''', '''  PROBE58(0);
  if (blockIdx.x == 0 && threadIdx.x == 0) probe58_t(8) = probe58_now();
  void* partial = (char*)buffer + byte_offset;
  // Compute: this rank's term of the layer's output, into the symmetric buffer.
  tp_partial(x, w, partial, tokens, hidden, k, dtype);
  PROBE58(5);''')
    replace(k, '''  if (blockIdx.x == 0 && threadIdx.x == 0) *status = rc;
  if (rc != SYMM_OK) return;  // uniform: every thread got the same code
  // Residual + RMSNorm on the sum, reading the all-reduced buffer directly.
  tp_epilogue(partial, residual, gamma, out, tokens, hidden, eps, dtype);''', '''  if (blockIdx.x == 0 && threadIdx.x == 0) *status = rc;
  if (rc != SYMM_OK) return;  // uniform: every thread got the same code
  PROBE58(6);
  // Residual + RMSNorm on the sum, reading the all-reduced buffer directly.
  tp_epilogue(partial, residual, gamma, out, tokens, hidden, eps, dtype);
  probe58_end(ctx, (unsigned long long)tokens * hidden * 2 + dtype);''')


if __name__ == '__main__':
    build(sys.argv[1])
