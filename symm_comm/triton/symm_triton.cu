// The device library for Triton kernels: lesson 06's symm_comm.cuh, NCCL
// backend, compiled by clang to LLVM bitcode (./build-bitcode), which Triton
// links into a kernel through `extern_libs`, before NCCL's own
// libnccl_device.bc. See README.md in this folder.
//
// Triton passes a device address as a 64-bit integer (a Triton pointer is
// `ptr addrspace(1)` in LLVM, clang's `void*` a generic `ptr`: a call
// across that mismatch is undefined). So Triton calls this entry point,
// which takes the same arguments as symm_all_reduce as integers, as
// PyTorch's torch_symm.cu does, and hands them on.
#define SYMM_WITH_NCCL 1
#include "../kernels/symm_comm.cuh"

extern "C" __device__ int symm_all_reduce_triton(long long ctx, long long local_ptr,
                                                 long long byte_offset, long long num_elements,
                                                 int reduce_op, int dtype) {
  // Negative sizes would wrap to huge unsigned ones; the range check then
  // refuses them as out of bounds.
  return symm_all_reduce((void*)ctx, (void*)local_ptr, (size_t)byte_offset,
                         (size_t)num_elements, reduce_op, dtype);
}
