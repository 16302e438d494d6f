#!/usr/bin/env bash
# Issue 24's "Done when", ready for a machine with 2 GPUs (nvidia-h200-x2):
# lesson 06's Triton kernel verified at 2 ranks (threads and MPI, float32 and
# bfloat16), and timed in one run beside the CUDA kernel and the unfused path
# (compute, ncclAllReduce, epilogue), at 06_symm_bench's sizes; the stress
# mode and memcheck at 2 ranks. Same carry as triton-1gpu.sh:
# .nccl/nccl-2.32.3.tar.xz and .carry/l06.txz (triton-stage.sh). Run as
#   CALL=callNN PART=1 bash runs/2026-11-25/scripts/triton-2gpu.sh   (lessons, float32 timing)
#   CALL=callMM PART=2 bash runs/2026-11-25/scripts/triton-2gpu.sh   (bfloat16 timing, stress, memcheck)
# Each part fits one call's 600 s; without PART both run.
set -u
part() { [ -z "${PART:-}" ] || [ "$PART" = "$1" ]; }
. runs/2026-11-25/scripts/gpu-run-lib.sh
mkdir -p /tmp/n /tmp/l06 && tar xJf .nccl/nccl-2.32.3.tar.xz -C /tmp/n && tar xJf .carry/l06.txz -C /tmp/l06
export NCCL_HOME=/tmp/n/nccl-2.32.3 TRITON_PYTHON=/opt/torch/.venv/bin/python XDG_CACHE_HOME=/tmp/cache
T=/tmp/l06/bin Q=/tmp/l06/mpi
part 1 && run lesson-triton-f32 300 env NTHREADS=2 $T/06b_symm_triton
part 1 && run lesson-triton-bf16 300 env NTHREADS=2 $T/06b_symm_triton --dtype bf16
part 1 && run lesson-triton-mpi 300 mpirun -np 2 -x NCCL_HOME -x TRITON_PYTHON -x XDG_CACHE_HOME $Q/06b_symm_triton
part 1 && run lesson-cuda-f32 300 env NTHREADS=2 $T/06_symm_primitive --build nvcc
S="-b 8M -e 512M -f 4 -n 8 -w 2 --trials 3"
part 1 && run bench-f32 280 env NTHREADS=2 $T/06_symm_bench --build nvcc --contenders fused,triton,unfused-nccl $S --json $L/bench-f32.json
part 2 && run bench-bf16 280 env NTHREADS=2 $T/06_symm_bench --build nvcc --dtype bf16 --contenders fused,triton,unfused-nccl $S --json $L/bench-bf16.json
part 2 && run stress 200 env NTHREADS=2 $T/06_symm_bench --build nvcc --contenders fused,triton --stress 500 -b 64K -e 64M -f 8
part 2 && run memcheck-triton 200 compute-sanitizer --tool memcheck --report-api-errors no env NTHREADS=2 $T/06b_symm_triton
tar czf "$OUT/$CALL.tgz" -C "$OUT" "$CALL" && rm -rf "$L"
