"""The nvcc route's translation unit (tp_tail.cu after symm_comm.cuh, NCCL's C++ device
API) compiled by NVRTC into a cubin for sm_90, on a machine without nvcc or a GPU, so that
its SASS can be read (cuobjdump -sass, -res-usage). NVRTC shares nvcc's front end and NVVM;
the GPU machine's nvcc build may still differ in detail. PERF_NOTES.md, change 61.

    python3 nvrtc_sass.py TREE OUT.cubin [-DNAME=VALUE ...]

TREE: the project root whose kernels are compiled. Needs NVRTC and the CUDA headers
(target/jit-wheels, as the jit_build test stages them) and NCCL's headers (the Triton
venv's nvidia-nccl wheel); their paths are the environment's NVRTC, CUDA_INCLUDE and
NCCL_INCLUDE, or those defaults. What NVRTC lacks is stood in for: a few C headers (empty,
or forwarding to libcu++), and NCCL's GIN backends that need Linux's headers are switched
off (the kernels use only LSA). Three of NCCL's GIN proxy static_asserts fail under NVRTC
(it does not pack those structs), so they are dropped from a copy of the headers."""
import ctypes
import os
import re
import shutil
import sys
import tempfile

tree, out = sys.argv[1], sys.argv[2]
root = os.path.dirname(os.path.abspath(__file__)) + "/../../.."
nvrtc = os.environ.get("NVRTC", f"{root}/target/jit-wheels/nvidia/cu13/lib/libnvrtc.so.13")
cuda = os.environ.get("CUDA_INCLUDE", f"{root}/target/jit-wheels/nvidia/cu13/include")
nccl = os.environ.get("NCCL_INCLUDE",
                      f"{root}/target/triton-venv/lib/python3.11/site-packages/nvidia/nccl/include")

work = tempfile.mkdtemp(prefix="nvrtc-sass-")
shutil.copytree(nccl, f"{work}/nccl")
for f, drop in (("nccl_device/gin/proxy/gin_proxy_device_host_common.h", r"static_assert\(sizeof\(ncclGinProxy[^;]*;"),
                ("nccl_device/gin/proxy/gin_proxy.h", r"static_assert\(sizeof\(ncclGinProxyGfd_t\) <=[^;]*;")):
    path = f"{work}/nccl/{f}"
    text = open(path).read()
    text, n = re.subn(drop, "", text, flags=re.S)
    assert n > 0, f"{f}: nothing dropped; NCCL's headers changed"
    open(path, "w").write(text)
stand = f"{work}/stand"
os.makedirs(f"{stand}/linux")
for name in ("new", "assert.h"):
    open(f"{stand}/{name}", "w").write("#pragma once\n")
for name in ("cstdint", "cstddef", "cstring", "climits", "cstdio"):
    open(f"{stand}/{name}", "w").write(f"#pragma once\n#include <cuda/std/{name}>\n")
for name in ("stdio.h", "string.h", "errno.h", "stddef.h", "math.h"):
    open(f"{stand}/{name}", "w").write("#pragma once\n#include <cuda/std/cstddef>\n#include <cuda/std/cstdint>\n")
open(f"{stand}/linux/types.h", "w").write(
    "#pragma once\ntypedef unsigned char __u8; typedef unsigned short __u16; typedef unsigned int __u32;\n"
    "typedef unsigned long long __u64; typedef __u16 __be16; typedef __u32 __be32; typedef __u64 __be64;\n"
    "typedef int __s32; typedef long long __s64;\n")

lib = ctypes.CDLL(nvrtc)
src = b'#define SYMM_WITH_NCCL 1\n#define SYMM_THREADS 512\n#include "symm_comm.cuh"\n#include "tp_tail.cu"\n'
prog = ctypes.c_void_p()
assert lib.nvrtcCreateProgram(ctypes.byref(prog), src, b"tu.cu", 0, None, None) == 0
opts = ["-arch=sm_90", f"-I{stand}", "-default-device", "-std=c++17",
        f"-I{tree}/device_build/nvrtc-include", f"-I{work}/nccl", f"-I{cuda}", f"-I{cuda}/cccl",
        f"-I{tree}/symm_comm/kernels", f"-I{tree}/layer_tail/kernels",
        "-DNCCL_GIN_GDAKI_ENABLE=0", "-DNCCL_GIN_GPI_ENABLE=0", "-DNCCL_GIN_EFA_GDA_ENABLE=0"] + sys.argv[3:]
array = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
rc = lib.nvrtcCompileProgram(prog, len(opts), array)
size = ctypes.c_size_t()
lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
log = ctypes.create_string_buffer(size.value)
lib.nvrtcGetProgramLog(prog, log)
shutil.rmtree(work)
if rc != 0:
    print(log.value.decode(errors="replace"), file=sys.stderr)
    sys.exit(f"NVRTC failed ({rc}); its log is above")
lib.nvrtcGetCUBINSize(prog, ctypes.byref(size))
cubin = ctypes.create_string_buffer(size.value)
lib.nvrtcGetCUBIN(prog, cubin)
open(out, "wb").write(cubin.raw)
print(f"wrote {out} ({size.value} bytes)")
