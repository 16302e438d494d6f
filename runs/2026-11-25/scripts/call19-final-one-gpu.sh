#!/usr/bin/env bash
# GPU call 19 (nvidia-h200, ONE GPU), after the day's last change to GPU code
# (lesson 06's layout asserts left to nvcc, since NVRTC 13.0 rejected them
# in call 17): lesson 06 through the jit route (NCCL 2.32.3, the machine's
# NVRTC 13.0, nvJitLink 13.5 staged by call-jit.sh stage) and its NVSHMEM
# backend (the venv's NVSHMEM 3.4.5, mpirun -np 1), f32 and bf16; its
# benchmark at one rank up to 16 MiB (call 17 found wrong elements from
# 32 MiB on); the suites of both builds at GPU_TEST_RANKS=1.
set -u
CALL=${CALL:-call19}
. runs/2026-11-25/scripts/gpu-run-lib.sh
export XDG_CACHE_HOME=/tmp/l06-cache
NV=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/nvshmem
J=/tmp/jit/site/nvidia/nccl
H9="env -u LD_LIBRARY_PATH NCCL_HOME=$W"
H32="env -u LD_LIBRARY_PATH NCCL_HOME=$J NVJITLINK=/tmp/jit/site/nvidia/cu13/lib/libnvJitLink.so.13"
HN="env -u LD_LIBRARY_PATH NCCL_HOME=$W NVSHMEM_HOME=$NV"
MPI="mpirun -np 1 -x NCCL_HOME -x NVSHMEM_HOME -x NVSHMEM_DISABLE_NVLS -x XDG_CACHE_HOME -x NVJITLINK"
run 06-2.32.3-jit-f32 180 $H32 NTHREADS=1 $B/06_symm_primitive --build jit
run 06-2.32.3-jit-bf16 120 $H32 NTHREADS=1 $B/06_symm_primitive --build jit --dtype bf16
run 06-2.32.3-jit-mpi 120 $H32 $MPI $M/06_symm_primitive --build jit
run 06-nvshmem-f32 180 $HN $MPI $M/06_symm_primitive --backend nvshmem
run 06-nvshmem-bf16 120 $HN $MPI $M/06_symm_primitive --backend nvshmem --dtype bf16
run 06-bench-2.28.9-f32 180 $H9 NTHREADS=1 $B/06_symm_bench --build nvcc -b 8 -e 16M -f 4 --json $L/06-bench-2.28.9-f32.json
run 06-bench-2.32.3-jit 180 $H32 NTHREADS=1 $B/06_symm_bench --build jit -b 8 -e 16M -f 4 --json $L/06-bench-2.32.3-jit.json
run suite-threads-1gpu ${SUITE_LIMIT:-120} env GPU_TEST_RANKS=1 .gpu/run-tests
run suite-mpi-1gpu ${SUITE_LIMIT:-200} env GPU_TEST_RANKS=1 .gpu/run-tests-mpi
echo done >> "$L/index.txt"
