"""Your own Triton kernel calling symm_all_reduce, and its ahead-of-time build.

  python3 your_triton_kernel.py --arch 90 --nccl-device-bc .../libnccl_device.bc --out DIR

compiles the kernel for one GPU architecture without a GPU, linking the
library's bitcode (symm_comm_nccl.bc, beside symm.py) and NCCL 2.32.3's
libnccl_device.bc, and writes DIR/kernel.cubin and DIR/kernel.txt (the
kernel's name, threads per program, dynamic shared memory). The host
(your_triton_kernel.rs) runs this script, loads the cubin and launches it.
"""

import argparse
import os
import sys

try:
    import triton
    import triton.language as tl
except ImportError as missing:
    print(f"{missing}: this needs a Python with Triton 3.6", file=sys.stderr)
    sys.exit(2)

# symm.py: symm_comm/triton/ (the host writes it beside this script).
from symm import SYMM_DTYPE_FLOAT32, SYMM_OK, SYMM_REDUCE_SUM, extern_libs, symm_all_reduce

BLOCK = 1024


@triton.jit
def sum_then_add_one(ctx, buffer, n, rank, status, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    step = tl.num_programs(0) * BLOCK
    for start in range(pid * BLOCK, n, step):
        i = start + tl.arange(0, BLOCK)
        tl.store(buffer + i, ((rank + 1) * (i % 64)).to(tl.float32), mask=i < n)
    # Every thread of every program calls it, at the top level of the kernel.
    # byte_offset and n are int64, as symm_all_reduce_triton declares them.
    rc = symm_all_reduce(ctx, buffer.to(tl.int64), tl.cast(0, tl.int64), n, SYMM_REDUCE_SUM,
                         SYMM_DTYPE_FLOAT32)
    if pid == 0:
        tl.store(status, rc)
    if rc == SYMM_OK:
        # The whole sum is visible here; .cg reads it from L2, past this
        # multiprocessor's L1, which may hold the line from before the call.
        for start in range(pid * BLOCK, n, step):
            i = start + tl.arange(0, BLOCK)
            total = tl.load(buffer + i, mask=i < n, cache_modifier=".cg")
            tl.store(buffer + i, total + 1.0, mask=i < n)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--arch", type=int, required=True, help="compute capability, e.g. 90")
    parser.add_argument("--nccl-device-bc", required=True, help="NCCL 2.32.3's libnccl_device.bc")
    parser.add_argument("--out", required=True, help="directory for kernel.cubin and kernel.txt")
    args = parser.parse_args()
    signature = {"ctx": "i64", "buffer": "*fp32", "n": "i64", "rank": "i32", "status": "*i32",
                 "BLOCK": "constexpr"}
    source = triton.compiler.ASTSource(fn=sum_then_add_one, signature=signature,
                                       constexprs={"BLOCK": BLOCK})
    target = triton.backends.compiler.GPUTarget("cuda", args.arch, 32)
    options = {"num_warps": 16, "num_stages": 1, "extern_libs": extern_libs(args.nccl_device_bc)}
    kernel = triton.compile(source, target=target, options=options)
    for scratch in ("global_scratch_size", "profile_scratch_size"):
        if getattr(kernel.metadata, scratch, 0):
            print(f"error: the kernel wants {scratch}; this host passes NULL", file=sys.stderr)
            return 1
    with open(os.path.join(args.out, "kernel.cubin"), "wb") as f:
        f.write(kernel.asm["cubin"])
    with open(os.path.join(args.out, "kernel.txt"), "w") as f:
        meta = kernel.metadata
        f.write(f"{meta.name}\n{meta.num_warps * 32}\n{meta.shared}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
