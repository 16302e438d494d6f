#!/usr/bin/env bash
# Issue 24 at one rank (only single-GPU kinds lent): lesson 06's Triton
# kernel beside its CUDA kernel and the unfused path, on NCCL 2.32.3.
# Carry .nccl/nccl-2.32.3.tar.xz and .carry/l06.txz (bin/06_symm_primitive,
# bin/06_symm_bench: runs/2026-11-25/scripts/triton-stage.sh). Run as
#   CALL=call21 bash runs/2026-11-25/scripts/triton-1gpu.sh
# Logs under $OUT/$CALL; index.txt lists each step's exit code.
set -u
. runs/2026-11-25/scripts/gpu-run-lib.sh
mkdir -p /tmp/n /tmp/l06 && tar xJf .nccl/nccl-2.32.3.tar.xz -C /tmp/n && tar xJf .carry/l06.txz -C /tmp/l06
export NCCL_HOME=/tmp/n/nccl-2.32.3
P=/opt/torch/.venv/bin/python
{ for py in "$P" python3; do echo "== $py"; "$py" -c 'import sys, triton; print(sys.version.split()[0], "triton", triton.__version__, triton.__file__)'; done
  "$P" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)'
  "$P" -m pip list 2>/dev/null | grep -i -E "^(triton|torch|nvidia-nccl)"; } > "$L/python.log" 2>&1
export TRITON_PYTHON=$P XDG_CACHE_HOME=/tmp/cache
T=/tmp/l06/bin
# The lesson: Triton, cold (its build is timed on stderr) and cached, both dtypes; the CUDA kernel beside it.
run lesson-triton-f32-cold 300 env NTHREADS=1 $T/06_symm_primitive --kernel triton
run lesson-triton-f32 120 env NTHREADS=1 $T/06_symm_primitive --kernel triton
run lesson-triton-bf16 300 env NTHREADS=1 $T/06_symm_primitive --kernel triton --dtype bf16
run lesson-cuda-f32 300 env NTHREADS=1 $T/06_symm_primitive --kernel cuda --build nvcc
# Bad input, seen on the GPU: a Python without Triton, and NCCL 2.28.9 (torch's wheel) with the 2.32.3 bitcode.
run bad-no-triton 60 env NTHREADS=1 TRITON_PYTHON=/usr/bin/python3 $T/06_symm_primitive --kernel triton
run bad-nccl-2.28.9 60 env NTHREADS=1 NCCL_HOME=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/nccl $T/06_symm_primitive --kernel triton
# Timed side by side in one run: the CUDA kernel, the Triton kernel, the unfused path (compute, ncclAllReduce, epilogue).
# NOTE: every timed operation is checked on the CPU; at 512 MiB a trial of
# the defaults (-n 20) checks 21 x 2 x 512 MiB, and call 21's default run
# passed its 400 s: fewer operations and trials here.
S="-b 8M -e 512M -f 4 -n 8 -w 2 --trials 3"
run bench-f32 170 env NTHREADS=1 $T/06_symm_bench --build nvcc --contenders fused,triton,unfused-nccl $S --json $L/bench-f32.json
run bench-bf16 120 env NTHREADS=1 $T/06_symm_bench --build nvcc --dtype bf16 --contenders fused,triton,unfused-nccl $S --json $L/bench-bf16.json
run stress 100 env NTHREADS=1 $T/06_symm_bench --build nvcc --contenders fused,triton --stress 500 -b 64K -e 64M -f 8
run memcheck-triton 100 compute-sanitizer --tool memcheck --report-api-errors no env NTHREADS=1 $T/06_symm_primitive --kernel triton
cp -r /tmp/cache/nccl-symmem-rs/06_symm_primitive "$L/cache" 2>/dev/null; find "$L/cache" -name '*.cubin' -delete 2>/dev/null
tar czf "$OUT/$CALL.tgz" -C "$OUT" "$CALL" && rm -rf "$L"
