// symm_comm.cuh: a device-side AllReduce that a user's kernel calls, over
// symmetric memory held by NCCL (windows and a device communicator) or by
// NVSHMEM (the symmetric heap), shaped like PyTorch's torch/csrc/_extern_triton
// (symm_comm.cuh, torch_symm.cu); the implementation is this lesson's. The
// longer why of what follows: README.md, "How the call works".
//
// Backends compiled in (dispatch at run time on SymmContext::type; one not
// compiled in gets SYMM_ERR_UNKNOWN_BACKEND, like an unknown type):
//   SYMM_WITH_NCCL     nccl_device.h's C++ API (nvcc, NCCL 2.28+), or the C API
//                      of nccl_device_wrapper.h (SYMM_NCCL_C_API below).
//   SYMM_WITH_NVSHMEM  nvshmem_ptr loads and stores, nvshmemx_barrier_all_block;
//                      linked with libnvshmem_device.a.
// ---- Calling convention ---------------------------------------------------
// * EVERY thread of EVERY block calls it, with the same arguments, the same
//   number of times, in the same order on every rank: it holds grid-wide and
//   cross-rank barriers, so a thread that skips it (an early `return`) hangs.
// * A 1-D grid of 1-D blocks (else SYMM_ERR_GRID_SHAPE), all blocks resident
//   at once (cuLaunchCooperativeKernel checks; one block of <= 1024 threads
//   per multiprocessor always fits), the same size on every rank. Only block 0
//   meets the other ranks (NCCL: lsaBarrierCount >= 1, barrier index 0). Two
//   kernels that use one context must not run at once.
// * In place: local_ptr + byte_offset gets the sum over ranks of those bytes,
//   in float32, in rank order 0..n-1: bitwise the same on every rank. Two-shot:
//   rank r loads its 1/world_size of the 16-byte vectors (grid-stride) from
//   every rank and stores the sum into every rank; unaligned head, tail: per element.
// * One address per byte: this rank's bytes through the caller's address
//   (local_ptr), the peers' through the backend's mapping (no aliasing: README).
// * Memory ordering: the caller's writes before the call (any block) reach
//   every rank's loads in it (grid barrier + block 0's acq_rel round, or the
//   one-shot's flags); on SYMM_OK the whole result is visible to every thread
//   of the calling kernel, no fence needed. On an error: no access, no barrier.
// * Cost: one rank: one grid barrier. NCCL with signal_window and <=
//   SYMM_ONE_SHOT_MAX_BYTES: the one-shot (below): two grid barriers of one
//   hop, no peer round. Otherwise the two-shot: two grid barriers, each around
//   a peer round.
// ---- Return codes (all uniform across the grid: every thread gets the same) ---
#define SYMM_OK 0
#define SYMM_ERR_NULL_CONTEXT (-1)     // ctx is NULL
#define SYMM_ERR_UNKNOWN_BACKEND (-2)  // ctx->type is neither backend, or not compiled in
#define SYMM_ERR_UNSUPPORTED_OP (-3)   // reduce_op is not SYMM_REDUCE_SUM
#define SYMM_ERR_UNSUPPORTED_DTYPE (-4)  // dtype is not float32 or bfloat16
#define SYMM_ERR_OUT_OF_BOUNDS (-5)    // local_ptr outside the buffer, or (local_ptr -
                                       // buffer) + byte_offset + num_elements * size > buffer_size
#define SYMM_ERR_MISALIGNED (-6)       // local_ptr or byte_offset not element-aligned
#define SYMM_ERR_TOPOLOGY (-7)         // > SYMM_MAX_RANKS ranks, or a rank not reachable by
                                       // loads/stores (LSA team != world; nvshmem_ptr NULL)
#define SYMM_ERR_NO_GRID_SYNC (-8)     // ctx has no grid-barrier words (grid_sync)
#define SYMM_ERR_GRID_SHAPE (-9)       // gridDim.y, .z or blockDim.y, .z > 1

#define SYMM_REDUCE_SUM 0
#define SYMM_DTYPE_FLOAT32 0
#define SYMM_DTYPE_BFLOAT16 1

#define SYMM_MAX_RANKS 8  // ranks the unrolled peer loops cover: one node of 8 GPUs
#define SYMM_ONE_SHOT_MAX_BYTES 262144  // the one-shot's largest region; larger: two-shot
// The staging window: a 128-byte header, then two halves (the epoch's parity)
// of SYMM_MAX_RANKS slots of 16-byte LL lines, each carrying 8 bytes of data.
#define SYMM_STAGING_BYTES 8388736
#define SYMM_UNROLL 4  // 16-byte vectors each thread keeps in flight per peer

// The C API of nccl_device_wrapper.h, which NCCL 2.32.3's device libraries
// define: the jit route (NVRTC + nvJitLink, .ltoir) and Triton's clang (.bc).
#if defined(__NCCL_DEVICE_LTOIR_LIB__) || defined(__clang_llvm_bitcode_lib__)
#define SYMM_NCCL_C_API 1
#endif

#if defined(SYMM_WITH_NCCL)
#if defined(SYMM_NCCL_C_API)
// NCCL's headers before the wrapper (see lesson 05's *_c.cu).
#include <nccl_device/utility.h>
#include <nccl_device/coop.h>
#include <nccl_device/core.h>
#include <nccl_device_wrapper.h>
#else
#include <new>
#include <nccl.h>
#include <nccl_device.h>
#endif
#endif
#if defined(SYMM_WITH_NVSHMEM)
#include <nvshmem.h>
#include <nvshmemx.h>
#endif

#if !defined(SYMM_WITH_NCCL)
// Without NCCL the window fields keep their size and place.
typedef void* ncclWindow_t;
struct ncclDevComm;
#endif

// ---------------------------------------------------------------------------
// Contexts: plain C layouts the host writes byte for byte (src/context.rs).
// The header comes first in each, so a SymmContext* may point at either.

// The common header of every context.
struct SymmContext {
  int type;        // SYMM_BACKEND_NCCL or SYMM_BACKEND_NVSHMEM
  int rank;        // this rank, 0 .. world_size-1
  int world_size;  // ranks taking part
};
#define SYMM_BACKEND_NCCL 0
#define SYMM_BACKEND_NVSHMEM 1

struct NcclSymmContext {
  SymmContext base;            // type = SYMM_BACKEND_NCCL
  ncclWindow_t buffer_window;  // the window registered over local_buffer
                               // (ncclCommWindowRegister, NCCL_WIN_COLL_SYMMETRIC)
  ncclWindow_t signal_window;  // NULL, or the one-shot's staging: SYMM_STAGING_BYTES,
                               // zeroed, registered by every rank, this context's alone
  ncclDevComm* dev_comm;       // device memory holding the ncclDevComm that
                               // ncclDevCommCreate filled (lsaBarrierCount >= 1)
  void* local_buffer;          // this rank's address of the window's first byte
  unsigned long long buffer_size;  // bytes of the window
  int device_idx;              // the CUDA device this context belongs to
  int reserved;                // zero
  unsigned int* grid_sync;     // two zeroed words for the grid barrier, this context's
};

struct NvshmemSymmContext {
  SymmContext base;        // type = SYMM_BACKEND_NVSHMEM
  void* local_buffer;      // a symmetric address (from nvshmem_malloc)
  unsigned long long buffer_size;  // bytes from local_buffer + offset on
  int device_idx;          // the CUDA device this context belongs to
  int reserved;            // zero
  unsigned long long offset;  // this context's first byte, from local_buffer
  unsigned int* grid_sync;    // as in NcclSymmContext
};

// src/context.rs's tests check the same numbers.
static_assert(sizeof(SymmContext) == 12, "SymmContext layout");
// NVRTC 13.0 rejects __builtin_offsetof in a constant expression (call 17):
// only nvcc checks the offsets; every compiler checks the sizes.
#if !defined(__CUDACC_RTC__)
static_assert(__builtin_offsetof(NcclSymmContext, buffer_window) == 16, "NcclSymmContext layout");
static_assert(__builtin_offsetof(NcclSymmContext, dev_comm) == 32, "NcclSymmContext layout");
static_assert(__builtin_offsetof(NcclSymmContext, buffer_size) == 48, "NcclSymmContext layout");
static_assert(__builtin_offsetof(NcclSymmContext, grid_sync) == 64, "NcclSymmContext layout");
static_assert(__builtin_offsetof(NvshmemSymmContext, local_buffer) == 16, "NvshmemSymmContext layout");
static_assert(__builtin_offsetof(NvshmemSymmContext, offset) == 40, "NvshmemSymmContext layout");
#endif
static_assert(sizeof(NcclSymmContext) == 72, "NcclSymmContext layout");
static_assert(sizeof(NvshmemSymmContext) == 56, "NvshmemSymmContext layout");
static_assert(SYMM_STAGING_BYTES == 128 + 2 * SYMM_MAX_RANKS * 2 * SYMM_ONE_SHOT_MAX_BYTES,
              "the staging window's layout");

// ---- Small helpers --------------------------------------------------------

#if defined(__clang_llvm_bitcode_lib__)
// clang's CUDA headers lack the __stcg stores: the library's four, as CUDA's.
__device__ __forceinline__ void __stcg(float* p, float v) {
  asm volatile("st.global.cg.f32 [%0], %1;" ::"l"(p), "f"(v) : "memory");
}
__device__ __forceinline__ void __stcg(unsigned short* p, unsigned short v) {
  asm volatile("st.global.cg.u16 [%0], %1;" ::"l"(p), "h"(v) : "memory");
}
__device__ __forceinline__ void __stcg(uint2* p, uint2 v) {
  asm volatile("st.global.cg.v2.u32 [%0], {%1, %2};" ::"l"(p), "r"(v.x), "r"(v.y) : "memory");
}
__device__ __forceinline__ void __stcg(uint4* p, uint4 v) {
  asm volatile("st.global.cg.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y),
               "r"(v.z), "r"(v.w)
               : "memory");
}
#endif

__device__ __forceinline__ float symm_bf16_to_f32(unsigned short h) {
  return __uint_as_float(((unsigned int)h) << 16);
}
// Round to nearest even, as the host reference does (NaN stays NaN).
__device__ __forceinline__ unsigned short symm_f32_to_bf16(float f) {
  unsigned int u = __float_as_uint(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((u >> 16) | 0x40u);
  u += 0x7fffu + ((u >> 16) & 1u);
  return (unsigned short)(u >> 16);
}

__device__ __forceinline__ unsigned int symm_ld_acquire(const unsigned int* p) {
  unsigned int v;
  asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(v) : "l"(p) : "memory");
  return v;
}
__device__ __forceinline__ unsigned int symm_add_acq_rel(unsigned int* p, unsigned int v) {
  unsigned int old;
  asm volatile("atom.acq_rel.gpu.global.add.u32 %0, [%1], %2;"
               : "=r"(old) : "l"(p), "r"(v) : "memory");
  return old;
}
__device__ __forceinline__ void symm_st_release(unsigned int* p, unsigned int v) {
  asm volatile("st.release.gpu.global.u32 [%0], %1;" ::"l"(p), "r"(v) : "memory");
}

// A barrier across every block of this grid with the cross-rank barrier
// inside: all blocks arrive; block 0 waits for all, runs `cross` with all its
// threads, releases the others. words[0] counts arrivals (block 0 adds 2^31 -
// (gridDim.x - 1), the others 1): its top bit flips as the last block arrives,
// no reset needed (as cooperative groups do); words[1]: the top bit last
// released. One acq_rel atomic per block (after __syncthreads it releases the
// block's writes: no fence), one wait (PERF_NOTES.md, call 102). Writes before
// it happen before `cross`; what `cross` acquired, before reads after it.
template <typename Cross>
__device__ __forceinline__ void symm_grid_barrier(unsigned int* words, Cross cross) {
  __syncthreads();
  unsigned int parity = 0;  // thread 0's: the top bit before this barrier
  if (threadIdx.x == 0) {
    const unsigned int add = blockIdx.x == 0 ? 0x80000000u - (gridDim.x - 1) : 1u;
    parity = symm_add_acq_rel(words, add) & 0x80000000u;
    if (blockIdx.x == 0) {
      while ((symm_ld_acquire(words) & 0x80000000u) == parity) {
      }
    } else {
      while (symm_ld_acquire(words + 1) != (parity ^ 0x80000000u)) {
      }
    }
  }
  if (blockIdx.x == 0) {
    __syncthreads();  // every block has arrived
    cross();
    __syncthreads();
    if (threadIdx.x == 0) symm_st_release(words + 1, parity ^ 0x80000000u);
  }
  __syncthreads();
}

// A barrier with nothing inside: every block waits for the flip itself (one hop
// less). words[1] untouched: every call at world_size 1 takes one, and the
// one-shot two, so that symm_grid_barrier's words[1] keeps up (README.md).
__device__ __forceinline__ void symm_grid_sync(unsigned int* words) {
  __syncthreads();
  if (threadIdx.x == 0) {
    const unsigned int add = blockIdx.x == 0 ? 0x80000000u - (gridDim.x - 1) : 1u;
    const unsigned int parity = symm_add_acq_rel(words, add) & 0x80000000u;
    while ((symm_ld_acquire(words) & 0x80000000u) == parity) {
    }
  }
  __syncthreads();
}

// ---- The cross-rank barrier of each backend, run by block 0 only ----------

#if defined(SYMM_WITH_NCCL)
#if defined(SYMM_NCCL_C_API)
struct SymmNcclBarrier {
  alignas(ncclLsaBarrierSession_C) unsigned char storage[sizeof(ncclLsaBarrierSession_C)];
  ncclCoopAny cta;
  __device__ ncclLsaBarrierSession_C* session() {
    return reinterpret_cast<ncclLsaBarrierSession_C*>(storage);
  }
  __device__ void open(const ncclDevComm& comm, ncclTeam lsa) {
    ncclCoopAnyInitCta(&cta);
    ncclLsaBarrierSessionInit(session(), cta, comm, lsa, comm.lsaBarrier, 0);
  }
  __device__ void sync() { ncclLsaBarrierSessionSync(session(), cta, cuda::memory_order_acq_rel); }
  __device__ void close() { ncclLsaBarrierSessionDestroy(session()); }
};
__device__ __forceinline__ ncclTeam symm_lsa_team(const ncclDevComm& comm) {
  ncclTeam lsa;
  lsa.nRanks = comm.lsaSize;
  lsa.rank = comm.lsaRank;
  lsa.stride = 1;
  return lsa;
}
__device__ __forceinline__ char* symm_nccl_peer(ncclWindow_t w, ncclTeam lsa, int peer) {
  return (char*)ncclGetPeerPointerTeam(w, 0, lsa, peer);
}
#else
struct SymmNcclBarrier {
  typedef ncclLsaBarrierSession<ncclCoopCta> Session;
  alignas(Session) unsigned char storage[sizeof(Session)];
  __device__ Session* session() { return reinterpret_cast<Session*>(storage); }
  __device__ void open(const ncclDevComm& comm, ncclTeam lsa) {
    new (storage) Session(ncclCoopCta(), comm, lsa, comm.lsaBarrier, 0);
  }
  __device__ void sync() { session()->sync(ncclCoopCta(), cuda::memory_order_acq_rel); }
  __device__ void close() { session()->~Session(); }
};
__device__ __forceinline__ ncclTeam symm_lsa_team(const ncclDevComm& comm) {
  return ncclTeamLsa(comm);
}
__device__ __forceinline__ char* symm_nccl_peer(ncclWindow_t w, ncclTeam, int peer) {
  return (char*)ncclGetLsaPointer(w, 0, peer);
}
#endif
#endif

// ---------------------------------------------------------------------------
// The two-shot AllReduce body, both backends'. `peers[p]`: this thread's
// address of the first element on rank p (all ranks' buffers are aligned
// alike: windows and the symmetric heap map at the same offsets).

template <int DTYPE>
struct SymmElem;
template <>
struct SymmElem<SYMM_DTYPE_FLOAT32> {
  typedef float T;
  static constexpr int PER_VEC = 4;
  __device__ static float load(const T* p) { return __ldcg(p); }
  __device__ static void store(T* p, float v) { __stcg(p, v); }
  __device__ static void add(float (&acc)[PER_VEC], uint4 v) {
    acc[0] += __uint_as_float(v.x);
    acc[1] += __uint_as_float(v.y);
    acc[2] += __uint_as_float(v.z);
    acc[3] += __uint_as_float(v.w);
  }
  __device__ static uint4 pack(const float (&acc)[PER_VEC]) {
    return make_uint4(__float_as_uint(acc[0]), __float_as_uint(acc[1]),
                      __float_as_uint(acc[2]), __float_as_uint(acc[3]));
  }
  // The first 8 bytes' sums (an LL line's data) as they are stored.
  __device__ static uint2 line(const float (&acc)[PER_VEC]) {
    return make_uint2(__float_as_uint(acc[0]), __float_as_uint(acc[1]));
  }
};
template <>
struct SymmElem<SYMM_DTYPE_BFLOAT16> {
  typedef unsigned short T;
  static constexpr int PER_VEC = 8;
  __device__ static float load(const T* p) { return symm_bf16_to_f32(__ldcg(p)); }
  __device__ static void store(T* p, float v) { __stcg(p, symm_f32_to_bf16(v)); }
  __device__ static void add2(float& lo, float& hi, unsigned int w) {
    lo += symm_bf16_to_f32((unsigned short)(w & 0xffffu));
    hi += symm_bf16_to_f32((unsigned short)(w >> 16));
  }
  __device__ static void add(float (&acc)[PER_VEC], uint4 v) {
    add2(acc[0], acc[1], v.x);
    add2(acc[2], acc[3], v.y);
    add2(acc[4], acc[5], v.z);
    add2(acc[6], acc[7], v.w);
  }
  __device__ static unsigned int pack2(float lo, float hi) {
    return (unsigned int)symm_f32_to_bf16(lo) | ((unsigned int)symm_f32_to_bf16(hi) << 16);
  }
  __device__ static uint4 pack(const float (&acc)[PER_VEC]) {
    return make_uint4(pack2(acc[0], acc[1]), pack2(acc[2], acc[3]), pack2(acc[4], acc[5]),
                      pack2(acc[6], acc[7]));
  }
  __device__ static uint2 line(const float (&acc)[PER_VEC]) {
    return make_uint2(pack2(acc[0], acc[1]), pack2(acc[2], acc[3]));
  }
};

// Elements [lo, hi) one at a time, over the ranks and all threads: head, tail.
template <int DTYPE>
__device__ __forceinline__ void symm_scalar_range(char* const (&peers)[SYMM_MAX_RANKS], int rank,
                                                  int nRanks, size_t lo, size_t hi) {
  typedef SymmElem<DTYPE> E;
  typedef typename E::T T;
  const size_t stride = (size_t)blockDim.x * gridDim.x * nRanks;
  for (size_t i = lo + threadIdx.x + (size_t)blockDim.x * (rank + (size_t)blockIdx.x * nRanks);
       i < hi; i += stride) {
    float sum = 0.0f;
#pragma unroll
    for (int p = 0; p < SYMM_MAX_RANKS; p++) {
      if (p < nRanks) sum += E::load((const T*)peers[p] + i);
    }
#pragma unroll
    for (int p = 0; p < SYMM_MAX_RANKS; p++) {
      if (p < nRanks) E::store((T*)peers[p] + i, sum);
    }
  }
}

template <int DTYPE>
__device__ __forceinline__ void symm_two_shot(char* const (&peers)[SYMM_MAX_RANKS], int rank,
                                              int nRanks, size_t count) {
  typedef SymmElem<DTYPE> E;
  typedef typename E::T T;
  constexpr int PER_VEC = E::PER_VEC;
  // Head up to the first 16-byte boundary, then whole vectors, then a tail.
  const uintptr_t address = (uintptr_t)peers[0];
  size_t head = ((16 - address % 16) % 16) / sizeof(T);
  if (head > count) head = count;
  const size_t vectors = (count - head) / PER_VEC;
  const size_t tail = head + vectors * PER_VEC;
  symm_scalar_range<DTYPE>(peers, rank, nRanks, 0, head);

  // Rank `rank` owns vectors [mine, mineEnd); a thread takes SYMM_UNROLL a grid
  // apart, so warps stay contiguous (lesson 05's kernels/allreduce_lsa_fast.cu).
  const size_t mine = vectors * rank / nRanks, mineEnd = vectors * (rank + 1) / nRanks;
  const size_t grid = (size_t)gridDim.x * blockDim.x;
  uint4* vec[SYMM_MAX_RANKS];
#pragma unroll
  for (int p = 0; p < SYMM_MAX_RANKS; p++) vec[p] = (uint4*)(peers[p] + head * sizeof(T));
  for (size_t v = mine + (size_t)blockIdx.x * blockDim.x + threadIdx.x; v < mineEnd;
       v += grid * SYMM_UNROLL) {
    // Reduce-scatter by loads: SYMM_UNROLL 16-byte loads per peer in flight.
    float acc[SYMM_UNROLL][PER_VEC];
#pragma unroll
    for (int u = 0; u < SYMM_UNROLL; u++) {
#pragma unroll
      for (int j = 0; j < PER_VEC; j++) acc[u][j] = 0.0f;
    }
#pragma unroll
    for (int p = 0; p < SYMM_MAX_RANKS; p++) {
      if (p < nRanks) {
        uint4 got[SYMM_UNROLL];
#pragma unroll
        for (int u = 0; u < SYMM_UNROLL; u++) {
          if (v + u * grid < mineEnd) got[u] = __ldcg(vec[p] + v + u * grid);
        }
#pragma unroll
        for (int u = 0; u < SYMM_UNROLL; u++) {
          if (v + u * grid < mineEnd) E::add(acc[u], got[u]);
        }
      }
    }
    // All-gather by stores: no reply to wait for, so they stream.
#pragma unroll
    for (int p = 0; p < SYMM_MAX_RANKS; p++) {
      if (p < nRanks) {
#pragma unroll
        for (int u = 0; u < SYMM_UNROLL; u++) {
          if (v + u * grid < mineEnd) __stcg(vec[p] + v + u * grid, E::pack(acc[u]));
        }
      }
    }
  }
  symm_scalar_range<DTYPE>(peers, rank, nRanks, tail, count);
}

__device__ __forceinline__ void symm_reduce(int dtype, char* const (&peers)[SYMM_MAX_RANKS],
                                            int rank, int nRanks, size_t count) {
  if (dtype == SYMM_DTYPE_FLOAT32) {
    symm_two_shot<SYMM_DTYPE_FLOAT32>(peers, rank, nRanks, count);
  } else {
    symm_two_shot<SYMM_DTYPE_BFLOAT16>(peers, rank, nRanks, count);
  }
}

// ---------------------------------------------------------------------------
// The one-shot over LL lines (NCCL, staging window, <= SYMM_ONE_SHOT_MAX_BYTES).
// `staging[p]`: this thread's address of rank p's staging (any address past
// nRanks; never read), `home` this rank's; `mine`: the region.
// Each 8-byte line goes as {data, flag, data, flag} (one 16-byte store, NCCL's
// LL protocol) into this rank's slot of every peer's staging; then per line:
// wait for every peer's flags to be this call's epoch (the last call's, in
// the first word of `home`, advanced; never 0; returned, for
// block 0 to record after the second grid barrier), sum in rank order, store
// in place (how a thread's lines are loaded and stored: SYMM_LINE_VECTORS). No round
// with the peers: the halves alternate by the epoch's parity (README.md, "How
// the call works", has why that is enough).

__device__ __forceinline__ void symm_st_volatile_line(uint4* p, uint4 v) {
  asm volatile("st.volatile.global.v4.u32 [%0], {%1, %2, %3, %4};" ::"l"(p), "r"(v.x), "r"(v.y),
               "r"(v.z), "r"(v.w)
               : "memory");
}
__device__ __forceinline__ uint4 symm_ld_volatile_line(const uint4* p) {
  uint4 v;
  asm volatile("ld.volatile.global.v4.u32 {%0, %1, %2, %3}, [%4];"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p)
               : "memory");
  return v;
}

// How the one-shot moves a thread's lines (PERF_NOTES.md, change 60). In the C API's builds
// (Triton's bitcode, the jit route), a whole 8-byte-aligned line is one 8-byte load and one
// 8-byte store, and a thread keeps its own first line for its sum, loaded while thread 0 reads
// the epoch: Triton's kernel 0.8 µs faster in bfloat16 at 2 ranks. In nvcc's builds (the C++
// API) the same made the fused kernel slower, so they load and store element by element, and
// load their own line again for the sum.
#if defined(SYMM_NCCL_C_API)
#define SYMM_LINE_VECTORS 1
#else
#define SYMM_LINE_VECTORS 0
#endif

// Whether line `line` of a `count`-element region moves as one 8-byte word: whole, 8-byte
// aligned, and SYMM_LINE_VECTORS.
template <typename T>
__device__ __forceinline__ bool symm_line_whole(const T* region, size_t count, size_t line) {
  return SYMM_LINE_VECTORS && ((uintptr_t)region & 7) == 0 &&
         (line + 1) * (8 / sizeof(T)) <= count;
}

// Line `line` of a `count`-element region as two words (0 past the end).
__device__ __forceinline__ uint2 symm_line_load(const float* region, size_t count, size_t line) {
  if (symm_line_whole(region, count, line)) return __ldcg((const uint2*)region + line);
  const unsigned int* words = (const unsigned int*)region;
  const size_t i = line * 2;
  return make_uint2(i < count ? __ldcg(words + i) : 0u, i + 1 < count ? __ldcg(words + i + 1) : 0u);
}
__device__ __forceinline__ uint2 symm_line_load(const unsigned short* region, size_t count,
                                                size_t line) {
  if (symm_line_whole(region, count, line)) return __ldcg((const uint2*)region + line);
  unsigned int h[4];
#pragma unroll
  for (int j = 0; j < 4; j++) {
    const size_t i = line * 4 + j;
    h[j] = i < count ? (unsigned int)__ldcg(region + i) : 0u;
  }
  return make_uint2(h[0] | h[1] << 16, h[2] | h[3] << 16);
}

// a[i] for an i known only at run time, chosen among the elements rather than indexed: an
// array indexed by a run-time value is kept in local memory (the stack), and the one-shot
// then reads its peers' addresses back from there after the first grid barrier
// (PERF_NOTES.md, change 61).
__device__ __forceinline__ char* symm_pick(char* const (&a)[SYMM_MAX_RANKS], int i) {
  char* r = a[0];
#pragma unroll
  for (int p = 1; p < SYMM_MAX_RANKS; p++) r = p == i ? a[p] : r;
  return r;
}

// After `e`: never 0 (the zeroed flags), always the other parity (at the wrap too).
__device__ __forceinline__ unsigned int symm_next_epoch(unsigned int e) {
  return e == 0xffffffffu ? 2u : e + 1u;
}

template <int DTYPE>
__device__ __forceinline__ unsigned int symm_one_shot(char* const (&staging)[SYMM_MAX_RANKS],
                                                      char* home, char* mine, int rank,
                                                      int nRanks, size_t count) {
  typedef SymmElem<DTYPE> E;
  typedef typename E::T T;
  constexpr int PER_LINE = 8 / sizeof(T);
  const size_t lines = (count + PER_LINE - 1) / PER_LINE;
  const size_t first = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  const size_t grid = (size_t)gridDim.x * blockDim.x;
  // SYMM_LINE_VECTORS: this thread's first line, loaded while thread 0 reads the last
  // call's epoch (one trip to L2 for both), and kept for the sum below.
  const bool keep = SYMM_LINE_VECTORS && first < lines;
  const uint2 own = keep ? symm_line_load((const T*)mine, count, first) : make_uint2(0, 0);
  __shared__ unsigned int symm_epoch;  // read once per block
  if (threadIdx.x == 0) symm_epoch = symm_next_epoch(*(volatile unsigned int*)home);
  __syncthreads();
  const unsigned int epoch = symm_epoch;
  const size_t half = 128 + (size_t)(epoch & 1u) * SYMM_MAX_RANKS * 2 * SYMM_ONE_SHOT_MAX_BYTES;
  // This rank's slot in every peer's staging, this call's half.
  uint4* out[SYMM_MAX_RANKS];
  const uint4* in[SYMM_MAX_RANKS];
#pragma unroll
  for (int p = 0; p < SYMM_MAX_RANKS; p++) {
    const size_t slot = half + (size_t)(p < nRanks ? rank : 0) * 2 * SYMM_ONE_SHOT_MAX_BYTES;
    out[p] = (uint4*)(staging[p] + slot);
    in[p] = (const uint4*)(home + half + (size_t)p * 2 * SYMM_ONE_SHOT_MAX_BYTES);
  }
  // Store every line of this thread into every peer's staging.
  for (size_t l = first; l < lines; l += grid) {
    const uint2 d = keep && l == first ? own : symm_line_load((const T*)mine, count, l);
    const uint4 line = make_uint4(d.x, epoch, d.y, epoch);
#pragma unroll
    for (int p = 0; p < SYMM_MAX_RANKS; p++) {
      if (p < nRanks && p != rank) symm_st_volatile_line(out[p] + l, line);
    }
  }
  // Wait for every peer's line, sum in rank order, store in place.
  for (size_t l = first; l < lines; l += grid) {
    // This rank's term, asked for before the first peer's line is waited for, so that the
    // trips overlap (nvcc's bfloat16 build made it a trip of its own: PERF_NOTES.md, change 63).
    const uint2 self = keep && l == first ? own : symm_line_load((const T*)mine, count, l);
    float acc[E::PER_VEC] = {};  // the first PER_LINE are this line's
#pragma unroll
    for (int p = 0; p < SYMM_MAX_RANKS; p++) {
      if (p >= nRanks) continue;
      uint2 d;
      if (p == rank) {
        d = self;
      } else {
        uint4 got;
        do {
          got = symm_ld_volatile_line(in[p] + l);
        } while (got.y != epoch || got.w != epoch);
        d = make_uint2(got.x, got.z);
      }
      E::add(acc, make_uint4(d.x, d.y, 0u, 0u));
    }
    if (symm_line_whole((const T*)mine, count, l)) {
      __stcg((uint2*)mine + l, E::line(acc));
    } else {
#pragma unroll
      for (int j = 0; j < PER_LINE; j++) {
        const size_t i = l * PER_LINE + j;
        if (i < count) E::store((T*)mine + i, acc[j]);
      }
    }
  }
  return epoch;
}

// Both backends' checks: [local_ptr + byte_offset, + num_elements * element)
// inside [base, base + size). Sets *offset to its first byte, from base.
__device__ __forceinline__ int symm_check_range(const char* base, unsigned long long size,
                                                const char* local_ptr, size_t byte_offset,
                                                size_t num_elements, size_t element,
                                                size_t* offset) {
  // element is 2 or 4, a power of two: a mask, and a shift by its log2 (__ffsll - 1), where
  // % and / by a variable are a 64-bit division subroutine every warp calls (lesson 06's
  // PERF_NOTES.md, change 35).
  if (((uintptr_t)local_ptr | byte_offset) & (element - 1)) return SYMM_ERR_MISALIGNED;
  if (local_ptr < base) return SYMM_ERR_OUT_OF_BOUNDS;
  const size_t into = (size_t)(local_ptr - base);
  if (into > size || byte_offset > size - into) return SYMM_ERR_OUT_OF_BOUNDS;
  if (num_elements > (size - into - byte_offset) >> (__ffsll(element) - 1))
    return SYMM_ERR_OUT_OF_BOUNDS;
  *offset = into + byte_offset;
  return SYMM_OK;
}

// ---- The backends ---------------------------------------------------------

#if defined(SYMM_WITH_NCCL)
__device__ __forceinline__ int symm_nccl_all_reduce(const NcclSymmContext* ctx, char* local_ptr,
                                                 size_t byte_offset, size_t num_elements,
                                                 int dtype, size_t element) {
#if !defined(SYMM_NCCL_C_API)
  // The communicator's fields and the staging window's descriptor are each a trip to
  // memory after the context's: both are read before the checks, so that the two trips
  // overlap, and a check that fails discards what was read (PERF_NOTES.md, change 57d;
  // a context with a bad device pointer in them now faults here, before the checks).
  // Not in the C API (Triton's bitcode), whose kernel this order made slower (57a).
  const ncclDevComm& comm = *ctx->dev_comm;
  const int nRanks = ctx->base.world_size, rank = ctx->base.rank;
  const int lsa_size = comm.lsaSize, lsa_rank = comm.lsaRank;
  char* early[SYMM_MAX_RANKS];  // the one-shot's staging windows, where it may be taken
  if (nRanks > 1 && ctx->signal_window != nullptr) {
#pragma unroll
    for (int p = 0; p < SYMM_MAX_RANKS; p++) {
      early[p] = symm_nccl_peer(ctx->signal_window, ncclTeam{}, p < nRanks ? p : 0);
    }
  }
#endif
  size_t offset = 0;
  int rc = symm_check_range((const char*)ctx->local_buffer, ctx->buffer_size, local_ptr,
                            byte_offset, num_elements, element, &offset);
  if (rc != SYMM_OK) return rc;
#if defined(SYMM_NCCL_C_API)
  const ncclDevComm& comm = *ctx->dev_comm;
  const int nRanks = ctx->base.world_size, rank = ctx->base.rank;
  if (nRanks > SYMM_MAX_RANKS || comm.lsaSize != nRanks || comm.lsaRank != rank)
    return SYMM_ERR_TOPOLOGY;
#else
  if (nRanks > SYMM_MAX_RANKS || lsa_size != nRanks || lsa_rank != rank)
    return SYMM_ERR_TOPOLOGY;
#endif
  if (ctx->grid_sync == nullptr) return SYMM_ERR_NO_GRID_SYNC;
  if (num_elements == 0) return SYMM_OK;
  if (nRanks == 1) {  // the sum is the input: only make it visible to every block
    symm_grid_sync(ctx->grid_sync);
    return SYMM_OK;
  }
  const ncclTeam lsa = symm_lsa_team(comm);

  if (ctx->signal_window != nullptr && num_elements * element <= SYMM_ONE_SHOT_MAX_BYTES) {
    // The one-shot: two grid barriers with no peer round, so each block waits
    // for the count's flip itself (symm_grid_sync, one hop less). The first
    // makes every block's writes before the call visible to any line's read.
    char* staging[SYMM_MAX_RANKS];
#pragma unroll
    for (int p = 0; p < SYMM_MAX_RANKS; p++) {
#if defined(SYMM_NCCL_C_API)
      staging[p] = symm_nccl_peer(ctx->signal_window, lsa, p < nRanks ? p : 0);
#else
      staging[p] = early[p];
#endif
    }
    char* home = symm_pick(staging, rank);  // its first word: the last call's epoch
    symm_grid_sync(ctx->grid_sync);
    char* mine = local_ptr + byte_offset;
    const unsigned int epoch =
        dtype == SYMM_DTYPE_FLOAT32
            ? symm_one_shot<SYMM_DTYPE_FLOAT32>(staging, home, mine, rank, nRanks, num_elements)
            : symm_one_shot<SYMM_DTYPE_BFLOAT16>(staging, home, mine, rank, nRanks,
                                                 num_elements);
    // Every block's sums, visible to every block of the calling kernel. Every
    // block has read the epoch by now: block 0 records this call's, which its
    // arrival at the next grid barrier releases to the blocks that read it
    // after that barrier. Two flips of the count's top bit per call leave
    // words[1] what the two-shot's symm_grid_barrier expects (README.md).
    symm_grid_sync(ctx->grid_sync);
    if (blockIdx.x == 0 && threadIdx.x == 0) *(volatile unsigned int*)home = epoch;
    return SYMM_OK;
  }

  // Every rank's address of the region, once per call: the caller's for this
  // rank (one address per byte), the window's mapping for the peers.
  char* peers[SYMM_MAX_RANKS];
#pragma unroll
  for (int p = 0; p < SYMM_MAX_RANKS; p++) {
    peers[p] = p == rank ? local_ptr + byte_offset
                         : symm_nccl_peer(ctx->buffer_window, lsa, p < nRanks ? p : 0) + offset;
  }

  // Phase 1: inputs ready. A grid barrier (every block's writes before the call
  // precede block 0 going on) around block 0's acq_rel LSA barrier (released to
  // the peers, their inputs acquired), so every block sees what block 0 acquired.
  SymmNcclBarrier bar;
  symm_grid_barrier(ctx->grid_sync, [&] {
    bar.open(comm, lsa);
    bar.sync();
  });

  // Phase 2: reduce-scatter by loads, all-gather by stores.
  symm_reduce(dtype, peers, rank, nRanks, num_elements);

  // Phase 3: outputs complete. A grid barrier (every block's stores into the
  // peers precede block 0 going on) around block 0's acq_rel LSA barrier (the
  // peers' stores into our buffer acquired), visible to every block after it.
  symm_grid_barrier(ctx->grid_sync, [&] {
    bar.sync();
    bar.close();
  });
  return SYMM_OK;
}
#endif

#if defined(SYMM_WITH_NVSHMEM)
__device__ __forceinline__ int symm_nvshmem_all_reduce(const NvshmemSymmContext* ctx,
                                                    char* local_ptr, size_t byte_offset,
                                                    size_t num_elements, int dtype,
                                                    size_t element) {
  const char* region = (const char*)ctx->local_buffer + ctx->offset;
  size_t offset = 0;
  int rc = symm_check_range(region, ctx->buffer_size, local_ptr, byte_offset, num_elements,
                            element, &offset);
  if (rc != SYMM_OK) return rc;
  const int nRanks = ctx->base.world_size, rank = ctx->base.rank;
  if (nRanks > SYMM_MAX_RANKS || nRanks != nvshmem_n_pes() || rank != nvshmem_my_pe())
    return SYMM_ERR_TOPOLOGY;
  if (ctx->grid_sync == nullptr) return SYMM_ERR_NO_GRID_SYNC;
  if (num_elements == 0) return SYMM_OK;
  if (nRanks == 1) {  // as in the NCCL backend
    symm_grid_sync(ctx->grid_sync);
    return SYMM_OK;
  }

  // nvshmem_ptr: a peer's copy of a symmetric address mapped into this GPU, or
  // NULL if loads/stores cannot reach it (the host checked every PE before any
  // launch; this is the device's own guard). This rank: the caller's address.
  char* peers[SYMM_MAX_RANKS];
  bool reachable = true;
#pragma unroll
  for (int p = 0; p < SYMM_MAX_RANKS; p++) {
    char* peer = (char*)nvshmem_ptr(region, p < nRanks ? p : 0);
    reachable = reachable && peer != nullptr;
    peers[p] = p == rank ? local_ptr + byte_offset : peer + offset;
  }
  if (!reachable) return SYMM_ERR_TOPOLOGY;

  // The NCCL backend's three phases; NVSHMEM's cross-rank barrier also
  // completes and orders this PE's stores (nvshmem_quiet, system-scope fences).
  auto cross = [] {
    __threadfence_system();
    nvshmemx_barrier_all_block();
    __threadfence_system();
  };
  symm_grid_barrier(ctx->grid_sync, cross);
  symm_reduce(dtype, peers, rank, nRanks, num_elements);
  symm_grid_barrier(ctx->grid_sync, cross);
  return SYMM_OK;
}
#endif

// ---- The entry point ------------------------------------------------------

// All-reduces (sum) num_elements `dtype` elements at local_ptr + byte_offset,
// in place, across the context's ranks. local_ptr: this rank's address in the
// context's buffer (its first byte, as PyTorch passes it, or any element-aligned
// one). Returns SYMM_OK or a SYMM_ERR_* code. Every thread of every block calls it.
extern "C" __device__ int symm_all_reduce(void* ctx, void* local_ptr, size_t byte_offset,
                                          size_t num_elements, int reduce_op, int dtype) {
  if (ctx == nullptr) return SYMM_ERR_NULL_CONTEXT;
  if (gridDim.y != 1 || gridDim.z != 1 || blockDim.y != 1 || blockDim.z != 1)
    return SYMM_ERR_GRID_SHAPE;
  const SymmContext* header = (const SymmContext*)ctx;
  const int type = header->type;
#if !defined(SYMM_WITH_NCCL)
  if (type == SYMM_BACKEND_NCCL) return SYMM_ERR_UNKNOWN_BACKEND;
#endif
#if !defined(SYMM_WITH_NVSHMEM)
  if (type == SYMM_BACKEND_NVSHMEM) return SYMM_ERR_UNKNOWN_BACKEND;
#endif
  if (type != SYMM_BACKEND_NCCL && type != SYMM_BACKEND_NVSHMEM) return SYMM_ERR_UNKNOWN_BACKEND;
  if (reduce_op != SYMM_REDUCE_SUM) return SYMM_ERR_UNSUPPORTED_OP;
  size_t element;
  if (dtype == SYMM_DTYPE_FLOAT32) {
    element = 4;
  } else if (dtype == SYMM_DTYPE_BFLOAT16) {
    element = 2;
  } else {
    return SYMM_ERR_UNSUPPORTED_DTYPE;
  }
#if defined(SYMM_WITH_NCCL)
  if (type == SYMM_BACKEND_NCCL) {
    return symm_nccl_all_reduce((const NcclSymmContext*)ctx, (char*)local_ptr, byte_offset,
                                num_elements, dtype, element);
  }
#endif
#if defined(SYMM_WITH_NVSHMEM)
  if (type == SYMM_BACKEND_NVSHMEM) {
    return symm_nvshmem_all_reduce((const NvshmemSymmContext*)ctx, (char*)local_ptr,
                                   byte_offset, num_elements, dtype, element);
  }
#endif
  return SYMM_ERR_UNKNOWN_BACKEND;
}

// ===========================================================================
// The user kernels follow, in one translation unit with it (src/lib.rs).
// ===========================================================================
