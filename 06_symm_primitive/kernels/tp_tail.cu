// The lesson's user kernels: the tail of a tensor-parallel transformer layer,
// the way inference engines fuse it (TensorRT-LLM's allReduceFusion,
// FlashInfer, NCCL's 07_kernel_fusion/01_rmsnorm_lsa).
//
// Compiled after symm_comm.cuh, in the same translation unit (the host puts
// the two together: src/lib.rs). Block size SYMM_THREADS, a power of two,
// from the host's -D.
//
// The layer: every rank holds a slice of the input features (x_r, tokens x
// k, in float32) and the matching rows of a weight (w_r, k x hidden). Its
// partial output x_r w_r is one term of the layer's output; the all-reduce
// adds the terms, then the residual is added and an RMSNorm runs on the sum:
//   sum      = sum over ranks of x_r w_r      (all-reduce)
//   h        = sum + residual                 (the new residual)
//   out[t,i] = h[t,i] / sqrt(mean_i h[t,i]^2 + eps) * gamma[i]
// `partial`, `residual` and `out` hold `dtype` elements (float32 or
// bfloat16); every sum is taken in float32.

// One value of dtype, read or written as float.
__device__ __forceinline__ float tp_load(const void* p, size_t i, int dtype) {
  return dtype == SYMM_DTYPE_FLOAT32 ? ((const float*)p)[i]
                                     : symm_bf16_to_f32(((const unsigned short*)p)[i]);
}
__device__ __forceinline__ void tp_store(void* p, size_t i, int dtype, float v) {
  if (dtype == SYMM_DTYPE_FLOAT32) {
    ((float*)p)[i] = v;
  } else {
    ((unsigned short*)p)[i] = symm_f32_to_bf16(v);
  }
}

// Phase "compute": partial[t, i] = sum_j x[t, j] w[j, i], one element per
// thread, grid-stride.
__device__ __forceinline__ void tp_partial(const float* x, const float* w, void* partial,
                                           int tokens, int hidden, int k, int dtype) {
  const size_t total = (size_t)tokens * hidden;
  for (size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x; e < total;
       e += (size_t)gridDim.x * blockDim.x) {
    const size_t t = e / hidden, i = e % hidden;
    float acc = 0.0f;
    for (int j = 0; j < k; j++) acc = fmaf(x[t * k + j], w[(size_t)j * hidden + i], acc);
    tp_store(partial, e, dtype, acc);
  }
}

// The sum of `v` over the block, returned to every thread.
__device__ __forceinline__ float tp_block_sum(float v, float* scratch) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  float total = 0.0f;
  for (int w = 0; w < (int)(blockDim.x / 32); w++) total += scratch[w];
  __syncthreads();
  return total;
}

// Phase "epilogue": one token (row) per block at a time. h = sum + residual
// is written back as the new residual; the row's mean square gives the
// RMSNorm's scale.
__device__ __forceinline__ void tp_epilogue(const void* sum, void* residual, const float* gamma,
                                            void* out, int tokens, int hidden, float eps,
                                            int dtype) {
  __shared__ float scratch[32];
  for (int t = blockIdx.x; t < tokens; t += gridDim.x) {
    const size_t row = (size_t)t * hidden;
    float squares = 0.0f;
    for (int i = threadIdx.x; i < hidden; i += blockDim.x) {
      const float h = tp_load(sum, row + i, dtype) + tp_load(residual, row + i, dtype);
      tp_store(residual, row + i, dtype, h);
      // The norm is taken over h as stored, so that it matches the residual
      // the next layer reads (bfloat16 rounds here).
      const float stored = tp_load(residual, row + i, dtype);
      squares = fmaf(stored, stored, squares);
    }
    const float scale = rsqrtf(tp_block_sum(squares, scratch) / hidden + eps);
    for (int i = threadIdx.x; i < hidden; i += blockDim.x) {
      const float h = tp_load(residual, row + i, dtype);
      tp_store(out, row + i, dtype, h * scale * gamma[i]);
    }
  }
}

// The fused kernel: compute, all-reduce, residual + RMSNorm, one launch.
// `partial` is this rank's address of the context's buffer at byte_offset
// 0 .. (the all-reduce is in place there). *status gets symm_all_reduce's
// return code; on an error nothing after the call runs.
extern "C" __global__ void __launch_bounds__(SYMM_THREADS, 1)
tp_tail_fused(void* ctx, void* buffer, size_t byte_offset, const float* x, const float* w,
              void* residual, const float* gamma, void* out, int tokens, int hidden, int k,
              float eps, int dtype, int* status) {
  void* partial = (char*)buffer + byte_offset;
  // Compute: this rank's term of the layer's output, into the symmetric buffer.
  tp_partial(x, w, partial, tokens, hidden, k, dtype);
  // All-reduce, in place. Every thread of every block calls it (see the
  // calling convention in symm_comm.cuh); when it returns 0 the whole sum is
  // visible to every thread here.
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

// symm_all_reduce alone (the benchmark's AllReduce, and the bad-input
// tests: every argument is the caller's, so any return code can be provoked).
extern "C" __global__ void __launch_bounds__(SYMM_THREADS, 1)
symm_all_reduce_kernel(void* ctx, void* local_ptr, size_t byte_offset, size_t num_elements,
                       int reduce_op, int dtype, int* status) {
  const int rc = symm_all_reduce(ctx, local_ptr, byte_offset, num_elements, reduce_op, dtype);
  if (blockIdx.x == 0 && threadIdx.x == 0) *status = rc;
}
