#!/usr/bin/env bash
# GPU call 20 (nvidia-h200, ONE GPU): lesson 06's benchmark after the fix for
# call 17's wrong elements (writes through the legacy default stream now wait
# with cuCtxSynchronize before the layer's kernels start on the benchmark's
# non-blocking stream), at the sizes that were wrong: the fused kernel and
# the unfused layer, 8 MiB to 512 MiB, a short trial (-n 2) so that the
# host-side check of every region fits the call. Carries only the binary.
set -u
CALL=${CALL:-call20}
. runs/2026-11-25/scripts/gpu-run-lib.sh
H9="env -u LD_LIBRARY_PATH NCCL_HOME=$W NTHREADS=1 XDG_CACHE_HOME=/tmp/l06-cache"
run 06-bench-fused-large 240 $H9 $B/06_symm_bench --build nvcc --contenders fused,unfused05 -b 8M -e 512M -f 4 -n 2 -w 1 --trials 2 --json $L/06-bench-fused-large.json
echo done >> "$L/index.txt"
