// The lesson's user kernels: the tail of a tensor-parallel transformer layer,
// fused as inference engines do (TensorRT-LLM's allReduceFusion, FlashInfer,
// NCCL's 07_kernel_fusion/01_rmsnorm_lsa). Compiled after symm_comm.cuh in one
// translation unit (src/lib.rs); block size SYMM_THREADS, a power of two, -D.
//
// Rank r holds a slice of the input features, x_r (tokens x k, float32), and
// the matching rows of the weight, w_r (k x hidden); x_r w_r is its term:
//   sum      = sum over ranks of x_r w_r      (all-reduce)
//   h        = sum + residual                 (the new residual)
//   out[t,i] = h[t,i] / sqrt(mean_i h[t,i]^2 + eps) * gamma[i]
// `partial`, `residual`, `out`: `dtype` (float32 or bfloat16); sums in float32.

// Two floats as bfloat16, lo in the low half, rounded to nearest even as symm_f32_to_bf16:
// one instruction from sm_80 on, where symm_f32_to_bf16 takes about seven for one
// (PERF_NOTES.md, change 31). A NaN stays a NaN (the canonical one; the library's keeps
// its bits).
__device__ __forceinline__ unsigned int tp_bf16x2(float lo, float hi) {
#if __CUDA_ARCH__ >= 800
  unsigned int packed;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(packed) : "f"(hi), "f"(lo));
  return packed;
#else
  return symm_f32_to_bf16(lo) | (unsigned int)symm_f32_to_bf16(hi) << 16;
#endif
}

// One value of dtype, written from a float.
__device__ __forceinline__ void tp_store(void* p, size_t i, int dtype, float v) {
  if (dtype == SYMM_DTYPE_FLOAT32) ((float*)p)[i] = v;
  else ((unsigned short*)p)[i] = (unsigned short)tp_bf16x2(v, 0.0f);
}

// One block of SYMM_THREADS per multiprocessor (the fused launch is cooperative;
// the unfused ones use the same grid) leaves SYMM_THREADS / 32 warps to hide
// latency with, so each thread keeps several loads in flight (PERF_NOTES.md):
//   TP_TILE_TOKENS   tokens per compute tile: each weight loaded serves as many
//   TP_TILE_COLUMNS  tile columns per thread: each activation serves as many
//   TP_ROW_ITEMS     row elements an epilogue thread loads before using one
//   TP_K_CHUNK       input features (j) of activations staged in shared memory
//   TP_K_STEP        j whose weights a thread (one column) loads before its fmas
//   TP_K_HELD        the same at TP_TILE_COLUMNS, kept from tile to tile if k fits
#define TP_TILE_TOKENS 8
#define TP_TILE_COLUMNS 4
#define TP_ROW_ITEMS 8
#define TP_K_STEP 8
#define TP_K_HELD 16
#define TP_K_CHUNK 64
static_assert(TP_K_STEP <= TP_K_CHUNK && TP_K_HELD <= TP_K_CHUNK, "held weights: one chunk's");

// *src (or 0 where !load, src then unread) copied to *dst in shared memory without waiting
// for it: from sm_80 on, an asynchronous copy (cp.async; where !load it reads 0 bytes and
// writes 4 zeros). The thread's copies are done once tp_staged returns; before sm_80, a
// load and a store. The compute phase copies the next chunk's activations this way while
// this chunk's fmas run (PERF_NOTES.md, change 42).
__device__ __forceinline__ void tp_stage(float* dst, const float* src, bool load) {
#if __CUDA_ARCH__ >= 800
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(
                   (unsigned int)__cvta_generic_to_shared(dst)),
               "l"(src), "r"(load ? 4 : 0)
               : "memory");
#else
  *dst = load ? *src : 0.0f;
#endif
}
__device__ __forceinline__ void tp_staged() {
#if __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_all;" ::: "memory");
#endif
}

// Phase "compute": partial[t, i] = sum_j x[t, j] w[j, i], by tiles of TP_TILE_TOKENS
// tokens x COLUMNS * SYMM_THREADS columns. A thread owns COLUMNS columns SYMM_THREADS apart
// (coalesced), their sums in registers. The tile's activations go to shared memory
// TP_K_CHUNK j at a time (one round trip per block, then broadcast reads), zeros past the
// chunk's end to a whole STEP, so that the fmas run with no test per j; per STEP j a thread
// loads all its weights (0s past the chunk's end) before the first fma, kept for the
// block's next tile where one step covers k and the columns stay (PERF_NOTES.md, changes 8
// and 41).
template <int COLUMNS, int STEP>
__device__ __forceinline__ void tp_partial_tiles(const float* x, const float* w, void* partial,
                                                 int tokens, int hidden, int k, int dtype) {
  static_assert(TP_K_CHUNK % STEP == 0, "a chunk's steps stay inside xs");
  static_assert(TP_K_CHUNK * TP_TILE_TOKENS == SYMM_THREADS, "a thread stages one activation");
  __shared__ __align__(16) float xs[2][TP_K_CHUNK][TP_TILE_TOKENS];  // this chunk, the next
  // The activation this thread stages: token t0 + ut's input feature c0 + jt (neighbours
  // load neighbouring features).
  const int ut = threadIdx.x / TP_K_CHUNK, jt = threadIdx.x % TP_K_CHUNK;
  constexpr int tile_width = COLUMNS * SYMM_THREADS;
  const int column_tiles = (hidden + tile_width - 1) / tile_width;
  const int tiles = (tokens + TP_TILE_TOKENS - 1) / TP_TILE_TOKENS * column_tiles;
  // Stages tile's chunk at c0 into xs[buffer]: x[t, c0 + jt] of token t0 + ut, 0 past k to a
  // whole STEP (rows past `tokens` load the last token's, in bounds; their sums are not stored).
  auto stage = [&](int buffer, int tile, int c0) {
    const int t = min(tile / column_tiles * TP_TILE_TOKENS + ut, tokens - 1);
    const bool in_k = c0 + jt < k;
    if (jt < (min(TP_K_CHUNK, k - c0) + STEP - 1) / STEP * STEP)
      tp_stage(&xs[buffer][jt][ut], x + (in_k ? (size_t)t * k + c0 + jt : 0), in_k);
  };
  int buffer = 0;  // the one the next chunk's fmas read
  if (blockIdx.x < tiles) stage(buffer, blockIdx.x, 0);
  float wj[STEP][COLUMNS];
  int held = -1;  // the first column whose weights wj holds, where k <= STEP
  for (int tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const int t0 = tile / column_tiles * TP_TILE_TOKENS;
    const int i0 = tile % column_tiles * tile_width + threadIdx.x;
    float acc[TP_TILE_TOKENS][COLUMNS] = {};
    for (int c0 = 0; c0 < k; c0 += TP_K_CHUNK) {
      const int chunk = min(TP_K_CHUNK, k - c0);
      tp_staged();
      __syncthreads();  // this chunk staged by every thread, and the previous one read
      // The next chunk (this tile's, else the block's next tile's first) is copied while
      // this one's fmas run: one barrier a chunk, and its loads' trip to memory hidden.
      const int c1 = c0 + TP_K_CHUNK < k ? c0 + TP_K_CHUNK : 0;
      const int tile1 = c1 > 0 ? tile : tile + gridDim.x;
      if (tile1 < tiles) stage(buffer ^ 1, tile1, c1);
      const float(*xc)[TP_TILE_TOKENS] = xs[buffer];
      buffer ^= 1;
      for (int s0 = 0; s0 < chunk; s0 += STEP) {
        if (k > STEP || i0 != held) {
#pragma unroll
          for (int s = 0; s < STEP; s++) {
            const size_t j = c0 + min(s0 + s, chunk - 1);
#pragma unroll
            for (int c = 0; c < COLUMNS; c++) {
              const int i = i0 + c * SYMM_THREADS;
              wj[s][c] = s0 + s < chunk && i < hidden ? w[j * hidden + i] : 0.0f;
            }
          }
        }
#pragma unroll
        for (int s = 0; s < STEP; s++) {
#pragma unroll
          for (int u = 0; u < TP_TILE_TOKENS; u++) {
            const float xj = xc[s0 + s][u];
#pragma unroll
            for (int c = 0; c < COLUMNS; c++)
              acc[u][c] = fmaf(xj, wj[s][c], acc[u][c]);  // in j order, as the CPU reference
          }
        }
      }
    }
    held = i0;
    // Row by row, the row's COLUMNS stores at constant offsets from one address (change 41).
#pragma unroll
    for (int u = 0; u < TP_TILE_TOKENS; u++) {
      if (t0 + u >= tokens) break;
      const size_t row = (size_t)(t0 + u) * hidden + i0;
#pragma unroll
      for (int c = 0; c < COLUMNS; c++)
        if (i0 + c * SYMM_THREADS < hidden)
          tp_store(partial, row + c * SYMM_THREADS, dtype, acc[u][c]);
    }
  }
}

// TP_TILE_COLUMNS columns a thread where the tiles cover the grid; else one,
// so that 4 times as many blocks share the weights (PERF_NOTES.md, change 6).
__device__ __forceinline__ void tp_partial(const float* x, const float* w, void* partial,
                                           int tokens, int hidden, int k, int dtype) {
  const int wide = TP_TILE_COLUMNS * SYMM_THREADS;
  const int tiles = (tokens + TP_TILE_TOKENS - 1) / TP_TILE_TOKENS * ((hidden + wide - 1) / wide);
  tiles < (int)gridDim.x
      ? tp_partial_tiles<1, TP_K_STEP>(x, w, partial, tokens, hidden, k, dtype)
      : tp_partial_tiles<TP_TILE_COLUMNS, TP_K_HELD>(x, w, partial, tokens, hidden, k, dtype);
}

// v rounded to dtype and back: what tp_store then tp_loads give.
__device__ __forceinline__ float tp_round(float v, int dtype) {
  // bfloat16: v rounded, in the high half of a word, is that float's bits.
  return dtype == SYMM_DTYPE_FLOAT32 ? v : __uint_as_float(tp_bf16x2(0.0f, v) & 0xffff0000u);
}

// The sum of `v` over the block, returned to every thread.
__device__ __forceinline__ float tp_block_sum(float v) {
  __shared__ float scratch[32];
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  if (threadIdx.x % 32 == 0) scratch[threadIdx.x / 32] = v;
  __syncthreads();
  float total = 0.0f;
  for (int w = 0; w < (int)(blockDim.x / 32); w++) total += scratch[w];
  __syncthreads();
  return total;
}

// V elements of DTYPE at p + i, read as floats or written from them: one element, or (V =
// 4 float32 or 8 bfloat16) 16 bytes in one instruction where the caller checked that they
// are 16-byte aligned (PERF_NOTES.md, change 25: a request then carries 4 to 8 times the bytes).
template <int DTYPE, int V>
__device__ __forceinline__ void tp_loads(const void* p, size_t i, float* v) {
  if (V == 1) {
    v[0] = DTYPE == SYMM_DTYPE_FLOAT32 ? ((const float*)p)[i]
                                       : symm_bf16_to_f32(((const unsigned short*)p)[i]);
    return;
  }
  const uint4 raw = *(const uint4*)((const char*)p + i * (16 / V));
  const unsigned int w[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int e = 0; e < V; e++)  // bfloat16: element 2n in word n's low half
    v[e] = V == 4 ? __uint_as_float(w[e])
                  : symm_bf16_to_f32((unsigned short)(w[e / 2] >> e % 2 * 16));
}
template <int DTYPE, int V>
__device__ __forceinline__ void tp_stores(void* p, size_t i, const float* v) {
  if (V == 1) { tp_store(p, i, DTYPE, v[0]); return; }
  unsigned int w[4];
#pragma unroll
  for (int e = 0; e < 4; e++)
    w[e] = V == 4 ? __float_as_uint(v[e]) : tp_bf16x2(v[2 * e], v[2 * e + 1]);
  *(uint4*)((char*)p + i * (16 / V)) = make_uint4(w[0], w[1], w[2], w[3]);
}

// Phase "epilogue": h = sum + residual is the new residual, a row's mean square its
// RMSNorm scale. A block takes two tokens (rows) at a time, t and t + gridDim.x (twice
// the loads in flight: PERF_NOTES.md, change 13), and a last odd one alone (TWO false).
// A thread loads TP_ROW_ITEMS of a row, V at a time (i, i + V * blockDim.x, ...), before
// using one.
template <bool TWO, int DTYPE, int V>
__device__ __forceinline__ void tp_rows(const void* sum, void* residual, const float* gamma,
                                        void* out, int t, int hidden, float eps) {
  const size_t row = (size_t)t * hidden, row1 = row + (size_t)gridDim.x * hidden;
  const int stride = TP_ROW_ITEMS * blockDim.x;
  float squares = 0.0f, squares1 = 0.0f;
  for (int first = threadIdx.x * V; first < hidden; first += stride) {
    float s[TP_ROW_ITEMS] = {}, r[TP_ROW_ITEMS] = {};  // sum and residual, row t
    float s1[TP_ROW_ITEMS] = {}, r1[TP_ROW_ITEMS] = {};  // row t + gridDim.x
#pragma unroll
    for (int u = 0; u < TP_ROW_ITEMS; u += V) {
      const int i = first + u * blockDim.x;
      if (i >= hidden) continue;
      tp_loads<DTYPE, V>(sum, row + i, s + u);
      tp_loads<DTYPE, V>(residual, row + i, r + u);
      if (TWO) tp_loads<DTYPE, V>(sum, row1 + i, s1 + u);
      if (TWO) tp_loads<DTYPE, V>(residual, row1 + i, r1 + u);
    }
#pragma unroll
    for (int u = 0; u < TP_ROW_ITEMS; u += V) {
      const int i = first + u * blockDim.x;
      if (i >= hidden) continue;
      // The norm of h as stored: the residual the next layer reads (bf16 rounds).
      float h[V], h1[V];
#pragma unroll
      for (int e = 0; e < V; e++) {
        h[e] = tp_round(s[u + e] + r[u + e], DTYPE);
        h1[e] = tp_round(s1[u + e] + r1[u + e], DTYPE);
        squares = fmaf(h[e], h[e], squares);
        squares1 = fmaf(h1[e], h1[e], squares1);
      }
      tp_stores<DTYPE, V>(residual, row + i, h);
      if (TWO) tp_stores<DTYPE, V>(residual, row1 + i, h1);
    }
  }
  const float scale = rsqrtf(tp_block_sum(squares) / hidden + eps);
  const float scale1 = TWO ? rsqrtf(tp_block_sum(squares1) / hidden + eps) : 0.0f;
  for (int first = threadIdx.x * V; first < hidden; first += stride) {
    float h[TP_ROW_ITEMS] = {}, h1[TP_ROW_ITEMS] = {}, g[TP_ROW_ITEMS] = {};
#pragma unroll
    for (int u = 0; u < TP_ROW_ITEMS; u += V) {
      const int i = first + u * blockDim.x;
      if (i >= hidden) continue;
      tp_loads<DTYPE, V>(residual, row + i, h + u);
      if (TWO) tp_loads<DTYPE, V>(residual, row1 + i, h1 + u);
#pragma unroll
      for (int e = 0; e < V; e += 4)  // gamma: float32, 4 a load
        tp_loads<SYMM_DTYPE_FLOAT32, V == 1 ? 1 : 4>(gamma, i + e, g + u + e);
    }
#pragma unroll
    for (int u = 0; u < TP_ROW_ITEMS; u += V) {
      const int i = first + u * blockDim.x;
      if (i >= hidden) continue;
#pragma unroll
      for (int e = 0; e < V; e++) {
        h[u + e] = h[u + e] * scale * g[u + e];
        h1[u + e] = h1[u + e] * scale1 * g[u + e];
      }
      tp_stores<DTYPE, V>(out, row + i, h + u);
      if (TWO) tp_stores<DTYPE, V>(out, row1 + i, h1 + u);
    }
  }
}
// Block b takes rows b and b + G (G = gridDim.x), then b + 2G and b + 3G, ...
template <int DTYPE, int V>
__device__ __forceinline__ void tp_epilogue(const void* sum, void* residual, const float* gamma,
                                            void* out, int tokens, int hidden, float eps) {
  int t = blockIdx.x;
  for (; t + gridDim.x < tokens; t += 2 * gridDim.x)
    tp_rows<true, DTYPE, V>(sum, residual, gamma, out, t, hidden, eps);
  if (t < tokens) tp_rows<false, DTYPE, V>(sum, residual, gamma, out, t, hidden, eps);
}
// Each dtype's rows compiled apart, with no test of dtype per element (PERF_NOTES.md, change
// 21); 16 bytes a load where every row and gamma start 16-byte aligned (change 25).
template <int DTYPE>
__device__ __forceinline__ void tp_epilogue(const void* sum, void* residual, const float* gamma,
                                            void* out, int tokens, int hidden, float eps) {
  constexpr int V = DTYPE == SYMM_DTYPE_FLOAT32 ? 4 : 8;
  const size_t bases = (size_t)sum | (size_t)residual | (size_t)gamma | (size_t)out;
  hidden % V == 0 && bases % 16 == 0
      ? tp_epilogue<DTYPE, V>(sum, residual, gamma, out, tokens, hidden, eps)
      : tp_epilogue<DTYPE, 1>(sum, residual, gamma, out, tokens, hidden, eps);
}
__device__ __forceinline__ void tp_epilogue(const void* sum, void* residual, const float* gamma,
                                            void* out, int tokens, int hidden, float eps,
                                            int dtype) {
  dtype == SYMM_DTYPE_FLOAT32
      ? tp_epilogue<SYMM_DTYPE_FLOAT32>(sum, residual, gamma, out, tokens, hidden, eps)
      : tp_epilogue<SYMM_DTYPE_BFLOAT16>(sum, residual, gamma, out, tokens, hidden, eps);
}

// The fused kernel: compute, all-reduce (in place at buffer + byte_offset), residual + RMSNorm,
// one launch. *status gets symm_all_reduce's return code; on an error nothing after the call runs.
extern "C" __global__ void __launch_bounds__(SYMM_THREADS, 1)
tp_tail_fused(void* ctx, void* buffer, size_t byte_offset, const float* x, const float* w,
              void* residual, const float* gamma, void* out, int tokens, int hidden, int k,
              float eps, int dtype, int* status) {
  void* partial = (char*)buffer + byte_offset;
  // Compute: this rank's term of the layer's output, into the symmetric buffer.
  tp_partial(x, w, partial, tokens, hidden, k, dtype);
  // All-reduce, in place: every thread of every block calls it (symm_comm.cuh's
  // calling convention); on 0 the whole sum is visible to every thread here.
  const int rc = symm_all_reduce(ctx, buffer, byte_offset, (size_t)tokens * hidden,
                                 SYMM_REDUCE_SUM, dtype);
  if (blockIdx.x == 0 && threadIdx.x == 0) *status = rc;
  if (rc != SYMM_OK) return;  // uniform: every thread got the same code
  // Residual + RMSNorm on the sum, reading the all-reduced buffer directly.
  tp_epilogue(partial, residual, gamma, out, tokens, hidden, eps, dtype);
}

// The same work unfused, for the benchmark: three launches.
extern "C" __global__ void __launch_bounds__(SYMM_THREADS, 1)
tp_compute(const float* x, const float* w, void* partial, int tokens, int hidden, int k,
           int dtype) {
  tp_partial(x, w, partial, tokens, hidden, k, dtype);
}
extern "C" __global__ void __launch_bounds__(SYMM_THREADS, 1)
tp_residual_rmsnorm(const void* sum, void* residual, const float* gamma, void* out, int tokens,
                    int hidden, float eps, int dtype) {
  tp_epilogue(sum, residual, gamma, out, tokens, hidden, eps, dtype);
}

// symm_all_reduce alone (the benchmark; bad-input tests: any argument, any code).
extern "C" __global__ void __launch_bounds__(SYMM_THREADS, 1)
symm_all_reduce_kernel(void* ctx, void* local_ptr, size_t byte_offset, size_t num_elements,
                       int reduce_op, int dtype, int* status) {
  const int rc = symm_all_reduce(ctx, local_ptr, byte_offset, num_elements, reduce_op, dtype);
  if (blockIdx.x == 0 && threadIdx.x == 0) *status = rc;
}
