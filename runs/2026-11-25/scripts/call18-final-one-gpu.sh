#!/usr/bin/env bash
# GPU call 18 (nvidia-h200, ONE GPU), after the last code change of the day:
# - lesson 05 after issue 21's kernel and launch changes, at one rank: the
#   stress mode on every kernel (nvcc on the 2.28.9 wheel; the jit route's
#   kernels and NCCL's primitives on 2.32.3 with nvJitLink 13.5, staged by
#   call-jit.sh stage as for call 15), lesson 05 on both routes, a
#   --twoshot-blocks the GPU cannot hold resident (exit 2);
# - lesson 02 on 2.32.3 with NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT, with and
#   without NCCL_WIN_ENABLE=0: which INIT line says whether symmetric memory
#   is supported (the NULL window's fix names it);
# - the suites of both builds at GPU_TEST_RANKS=1.
set -u
CALL=${CALL:-call18}
. runs/2026-11-25/scripts/gpu-run-lib.sh
J=/tmp/jit/site/nvidia/nccl
H9="env -u LD_LIBRARY_PATH NCCL_HOME=$W NTHREADS=1"
H32="env -u LD_LIBRARY_PATH NCCL_HOME=$J NVJITLINK=/tmp/jit/site/nvidia/cu13/lib/libnvJitLink.so.13 NTHREADS=1"
run 05-stress-2.28.9 240 $H9 $B/05_allreduce_bench --stress 2000 --kernels nccl,simple,vec16,twoshot,fast -b 4K -e 4M -f 32
run 05-stress-oneshot-2.28.9 240 $H9 $B/05_allreduce_bench --stress 2000 --kernels oneshot -b 8 -e 1M -f 128
run 05-stress-jit-2.32.3 300 $H32 $B/05_allreduce_bench --build jit --stress 2000 --kernels fast-jit,prims,prims-oneshot,prims-twoshot -b 4K -e 4M -f 32
run 05-jit-2.32.3 120 $H32 $B/05_device_lsa --build jit --kernel fast
run 05-auto-2.32.3 120 $H32 $B/05_device_lsa --kernel fast
run 05-nvcc-2.28.9 120 $H9 $B/05_device_lsa --kernel fast
run 05-blocks-too-many 120 $H9 $B/05_allreduce_bench --kernels twoshot --twoshot-blocks 1024 -b 1M -e 1M
run 02-2.32.3-init 120 env -u LD_LIBRARY_PATH NCCL_HOME=$J NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT NTHREADS=1 $B/02_allreduce_sm
run 02-2.32.3-init-win-off 120 env -u LD_LIBRARY_PATH NCCL_HOME=$J NCCL_WIN_ENABLE=0 NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT NTHREADS=1 $B/02_allreduce_sm
grep -h "ymmetric" "$L"/02-2.32.3-init*.log > "$L/02-2.32.3-symmetric-lines.log" 2>&1
run suite-threads-1gpu ${SUITE_LIMIT:-150} env GPU_TEST_RANKS=1 .gpu/run-tests
run suite-mpi-1gpu ${SUITE_LIMIT:-220} env GPU_TEST_RANKS=1 .gpu/run-tests-mpi
echo done >> "$L/index.txt"
