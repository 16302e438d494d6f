"""symm_all_reduce for Triton kernels: the symm_comm device library, NCCL backend.

The library is kernels/symm_comm.cuh, compiled by clang to LLVM bitcode
(symm_comm_nccl.bc, made by ./build-bitcode). A Triton kernel calls
`symm_all_reduce` below; Triton links the bitcode, then NCCL's own
libnccl_device.bc, into the kernel (`extern_libs`, in that order: see
`extern_libs`).

The calling convention is the library's (kernels/symm_comm.cuh): EVERY
thread of EVERY program calls it, with the same arguments, and all programs
of the grid must be resident at once (launch it cooperatively). A Triton
scalar expression runs in every thread of a program, so a call at the top
level of the kernel, outside any `if` that differs between programs, meets
the first rule.
"""

import os

import triton.language as tl
from triton.language import core

# The library's constants: copies of kernels/symm_comm.cuh's #defines (a test in
# src/codes.rs checks them; src/codes.rs holds the host's copies).
SYMM_OK = tl.constexpr(0)
SYMM_REDUCE_SUM = tl.constexpr(0)
SYMM_DTYPE_FLOAT32 = tl.constexpr(0)
SYMM_DTYPE_BFLOAT16 = tl.constexpr(1)

HERE = os.path.dirname(os.path.abspath(__file__))
# The bitcode as committed beside this file (build-bitcode remakes it).
LIBRARY = os.path.join(HERE, "symm_comm_nccl.bc")


@core.extern
def symm_all_reduce(ctx, local_ptr, byte_offset, num_elements, reduce_op, dtype, _semantic=None):
    """All-reduces (sum) `num_elements` elements at `local_ptr + byte_offset`,
    in place, across the ranks of the context `ctx`; returns 0 or one of the
    library's negative codes. `ctx` and `local_ptr` are device addresses as
    int64 (`pointer.to(tl.int64)`), as PyTorch's torch_symm passes them."""
    return core.extern_elementwise(
        "",
        "",
        [ctx, local_ptr, byte_offset, num_elements, reduce_op, dtype],
        {
            (core.int64, core.int64, core.int64, core.int64, core.int32, core.int32): (
                "symm_all_reduce_triton",
                core.int32,
            ),
        },
        is_pure=False,  # it reads and writes memory on every rank
        _semantic=_semantic,
    )


def extern_libs(nccl_device_bc, library=LIBRARY):
    """Triton's `extern_libs` for a kernel that calls symm_all_reduce: this
    library first, then NCCL's libnccl_device.bc. The other order leaves
    NCCL's functions unresolved (seen with Triton 3.6.0: ptxas stops on
    ncclGetPeerPointerTeam): Triton links each library in turn, taking from
    it only what the module still lacks, and the kernel itself needs nothing
    from NCCL until this library is in."""
    return {"symm_comm_nccl": library, "libnccl_device": nccl_device_bc}
