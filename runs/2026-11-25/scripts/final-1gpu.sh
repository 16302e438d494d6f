#!/usr/bin/env bash
# The session's last GPU calls (one H200), after its last change to GPU code
# (calls 23/24: symm_comm.cuh's C API and stores for clang's bitcode build;
# calls 25/26: the grid agreed across ranks, Module in device_build):
#   PART=1 (carry .carry/final.txz, final-stage.sh): both suites at
#          GPU_TEST_RANKS=1 on the machine's NCCL;
#   PART=2 (carry .nccl/nccl-2.32.3.tar.xz, on the same warm machine):
#          lesson 06's tests on NCCL 2.32.3 with Triton (the Triton test
#          verifies there), the Triton lesson under mpirun -np 1, and the
#          bfloat16 timing call 22 could not finish.
#   CALL=callNN PART=1 bash runs/2026-11-25/scripts/final-1gpu.sh
set -u
. runs/2026-11-25/scripts/gpu-run-lib.sh
export XDG_CACHE_HOME=/tmp/cache TRITON_PYTHON=/opt/torch/.venv/bin/python
if [ "${PART:-}" = 1 ]; then
  tar xJf .carry/final.txz
  run suite-threads-1gpu 240 env GPU_TEST_RANKS=1 .gpu/run-tests
  run suite-mpi-1gpu 300 env GPU_TEST_RANKS=1 .gpu/run-tests-mpi
else
  mkdir -p /tmp/n && tar xJf .nccl/nccl-2.32.3.tar.xz -C /tmp/n
  export NCCL_HOME=/tmp/n/nccl-2.32.3
  run 06-suite-2.32.3-threads 200 env GPU_TEST_RANKS=1 .gpu/run-tests -E 'package(symm_primitive)'
  run 06-triton-test-2.32.3-mpi 90 env GPU_TEST_RANKS=1 .gpu/run-tests-mpi -E 'test(triton)'
  run lesson-triton-mpi 60 mpirun -np 1 -x NCCL_HOME -x TRITON_PYTHON -x XDG_CACHE_HOME .gpu/mpi/06_symm_primitive --kernel triton
  run bench-bf16 170 env NTHREADS=1 .gpu/bin/06_symm_bench --build nvcc --dtype bf16 --contenders fused,triton,unfused-nccl -b 8M -e 128M -f 4 -n 8 -w 2 --trials 3 --json $L/bench-bf16.json
fi
tar czf "$OUT/$CALL.tgz" -C "$OUT" "$CALL" && rm -rf "$L"
