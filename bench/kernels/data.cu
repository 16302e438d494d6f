// Data for the AllReduce benchmarks, written and checked on the GPU.
//
// Every timed operation of a benchmark reads its own region of the input and
// writes its own region of the output, and every one of them is checked
// (see bench::allreduce). Drawing that data on the host and copying it over,
// then copying every output back, would take longer than the timing itself
// at large sizes (a trial at 512 MB touches 10 GB), so these kernels do it in
// place on the GPU. They are compiled to PTX once, by make-ptx beside this
// file, and the PTX is built into the benchmark binaries: the driver compiles
// it for the GPU at load time, so the benchmarks need no CUDA toolkit.
//
// value() must stay the same function as bench::allreduce::value on the host
// (a CPU test compares them through the PTX's source hash and the host copy).

// SplitMix64's finalizer: a cheap, well-mixed hash of one word.
__device__ unsigned long long splitmix64(unsigned long long x) {
  unsigned long long z = x + 0x9e3779b97f4a7c15ULL;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// Element `index` of rank `rank`'s input for `seed`: an integer in [-1024, 1023].
// Integers that small add up exactly in float32, in any order, for any
// number of ranks a node has: the expected sum is exact.
__device__ float value(unsigned long long seed, unsigned int rank, unsigned long long index) {
  unsigned long long mixed =
      splitmix64(seed ^ ((unsigned long long)rank * 0x9e3779b97f4a7c15ULL) ^ index);
  return (float)(mixed % 2048) - 1024.0f;
}

// data[i] = value(seed, rank, i) for i < count.
extern "C" __global__ void fill_input(float* data, unsigned long long count,
                                      unsigned long long seed, unsigned int rank) {
  unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
       i < count; i += stride) {
    data[i] = value(seed, rank, i);
  }
}

// Counts the elements of data[0, count) that differ from the sum over `ranks`
// ranks of value(seed, r, i), into result[0], and keeps the smallest wrong
// index in result[1]. The caller sets result to {0, ~0} first. A NaN (the
// poison written over outputs before an operation) equals nothing, so an
// element the operation did not write is counted.
extern "C" __global__ void check_sum(const float* data, unsigned long long count,
                                     unsigned long long seed, unsigned int ranks,
                                     unsigned long long* result) {
  unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  unsigned long long wrong = 0;
  for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
       i < count; i += stride) {
    double sum = 0.0;
    for (unsigned int r = 0; r < ranks; ++r) sum += value(seed, r, i);
    if (!(data[i] == (float)sum)) {
      ++wrong;
      atomicMin(&result[1], i);
    }
  }
  if (wrong) atomicAdd(&result[0], wrong);
}

// data[i] = first + step * i for i < count: lesson 03's exchange elements
// (a block of Element values is first = Element(source, dest, 0), step 1),
// or, with step 0, one word everywhere (the "untouched" mark).
extern "C" __global__ void fill_sequence(unsigned long long* data, unsigned long long count,
                                         unsigned long long first, unsigned long long step) {
  unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
       i < count; i += stride) {
    data[i] = first + step * i;
  }
}

// Adds to result[0] the number of i < count with data[i] != first + step * i,
// and keeps the smallest such i, plus `base`, in result[1]: several calls
// (one per block of an exchange, `base` the block's start) add into one
// result, which the caller sets to {0, ~0} before the first.
extern "C" __global__ void check_sequence(const unsigned long long* data,
                                          unsigned long long count, unsigned long long first,
                                          unsigned long long step, unsigned long long base,
                                          unsigned long long* result) {
  unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  unsigned long long wrong = 0;
  for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
       i < count; i += stride) {
    if (data[i] != first + step * i) {
      ++wrong;
      atomicMin(&result[1], base + i);
    }
  }
  if (wrong) atomicAdd(&result[0], wrong);
}

// Adds to result[0] the number of i < count where got[i] (float32, or
// bfloat16 when `bf16` is not 0) is not within tolerance * max(|want[i]|, 1)
// of want[i] (float32), and keeps the smallest such i, plus `base`, in
// result[1]. A NaN is never within. Tolerance 0 asks for the exact value.
// The same test as bench::data::close on the host (and lesson 06's
// reference::check_close, which a CPU test compares it with): each output
// of a timed operation is compared with an expected value the benchmark
// computed once per size, so that no output has to leave the GPU.
extern "C" __global__ void check_close(const void* got, const float* want,
                                       unsigned long long count, unsigned int bf16,
                                       float tolerance, unsigned long long base,
                                       unsigned long long* result) {
  unsigned long long stride = (unsigned long long)gridDim.x * blockDim.x;
  unsigned long long wrong = 0;
  for (unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
       i < count; i += stride) {
    float g = bf16 ? __uint_as_float((unsigned int)((const unsigned short*)got)[i] << 16)
                   : ((const float*)got)[i];
    float w = want[i];
    float bound = tolerance * fmaxf(fabsf(w), 1.0f);
    if (!(fabsf(g - w) <= bound)) {
      ++wrong;
      atomicMin(&result[1], base + i);
    }
  }
  if (wrong) atomicAdd(&result[0], wrong);
}

// Keeps one thread busy for `nanoseconds` of the GPU's global timer: the
// stress mode launches it before an operation on some ranks, so that the
// ranks reach each operation at different times.
extern "C" __global__ void spin(unsigned long long nanoseconds) {
  unsigned long long start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < nanoseconds);
}
