#!/usr/bin/env bash
# GPU call for issue 20 (lesson 06, symm_all_reduce) on TWO GPUs
# (nvidia-h200-x2), 2 ranks. Staged like lesson06-one-gpu.sh (stage.sh's
# .carry/final.tgz unpacked; for 2.32.3, call-jit.sh stage twice before).
# What it runs (logs in $OUT/$CALL/, index.txt; one tar at the end):
#   * the lesson, NCCL backend: 2.28.3 (system) and 2.28.9 (wheel) through nvcc,
#     2.32.3 through jit; f32 and bf16; threads and mpirun -np 2;
#   * the lesson, NVSHMEM backend (venv 3.4.5): mpirun -np 2, f32 and bf16;
#     thread mode expects exit 2;
#   * --bad-input at 2 ranks;
#   * 06_symm_bench, 2 ranks, 8 B - 512 MB by 2 (the sizes), NCCL 2.28.3
#     nvcc (all contenders: the fusion gain, symm vs lesson 05's fast kernel),
#     bf16, 2.32.3 jit, NVSHMEM; --json/--svg;
#   * stress 2000, skewed ranks, on the fused kernel: NCCL threads and MPI, NVSHMEM;
#   * compute-sanitizer memcheck on the fused kernel at 2 ranks (NCCL backend);
#   * lesson 06's GPU tests from both archives at GPU_TEST_RANKS=2.
set -u
CALL=${CALL:-lesson06-2gpu}
. runs/2026-11-25/scripts/gpu-run-lib.sh
export XDG_CACHE_HOME=/tmp/l06-cache
NV=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/nvshmem
J=/tmp/jit/site/nvidia/nccl
H9="env -u LD_LIBRARY_PATH NCCL_HOME=$W"
H32="env -u LD_LIBRARY_PATH NCCL_HOME=$J"
HN="env -u LD_LIBRARY_PATH NCCL_HOME=$W NVSHMEM_HOME=$NV"
MPI="mpirun -np 2 -x NCCL_HOME -x NVSHMEM_HOME -x NVSHMEM_DISABLE_NVLS -x XDG_CACHE_HOME"
MPI3="mpirun -np 2 -x NVSHMEM_DISABLE_NVLS -x XDG_CACHE_HOME"

for dtype in f32 bf16; do
  run 06-2.28.3-nvcc-$dtype 300 env NTHREADS=2 $B/06_symm_primitive --build nvcc --dtype $dtype
  run 06-2.28.3-nvcc-mpi-$dtype 300 $MPI3 $M/06_symm_primitive --build nvcc --dtype $dtype
  run 06-2.28.9-nvcc-$dtype 300 $H9 NTHREADS=2 $B/06_symm_primitive --build nvcc --dtype $dtype
  run 06-2.32.3-jit-$dtype 300 $H32 NTHREADS=2 $B/06_symm_primitive --build jit --dtype $dtype
  run 06-2.32.3-jit-mpi-$dtype 300 $H32 $MPI $M/06_symm_primitive --build jit --dtype $dtype
  run 06-nvshmem-$dtype 300 $HN $MPI $M/06c_symm_nvshmem --dtype $dtype
done
run 06-nvshmem-threads-expect-2 60 $HN NTHREADS=2 $B/06c_symm_nvshmem
run 06-bad-input 300 env NTHREADS=2 $B/06_symm_bench --build nvcc --bad-input
run 06-bench-2.28.3 600 env NTHREADS=2 $B/06_symm_bench --build nvcc -b 8 -e 512M -f 2 \
  --json $L/06-bench-2.28.3.json --svg $L/06-bench-2.28.3.svg
run 06-bench-2.28.3-bf16 600 env NTHREADS=2 $B/06_symm_bench --build nvcc --dtype bf16 \
  --contenders fused,unfused-nccl,symm-layer -b 8 -e 512M -f 4 --json $L/06-bench-2.28.3-bf16.json
run 06-bench-2.32.3-jit 600 $H32 NTHREADS=2 $B/06_symm_bench --build jit -b 8 -e 512M -f 4 \
  --json $L/06-bench-2.32.3-jit.json
run 06-bench-nvshmem 600 $HN $MPI $M/06_symm_bench --backend nvshmem --contenders fused,symm-layer \
  -b 8 -e 512M -f 2 --json $L/06-bench-nvshmem.json --svg $L/06-bench-nvshmem.svg
run 06-stress-nccl 600 env NTHREADS=2 $B/06_symm_bench --build nvcc --stress 2000 -b 4K -e 4M -f 32
run 06-stress-nccl-mpi 600 $MPI3 $M/06_symm_bench --build nvcc --stress 2000 -b 4K -e 4M -f 32
run 06-stress-nvshmem 600 $HN $MPI $M/06_symm_bench --backend nvshmem --contenders fused --stress 2000 -b 4K -e 4M -f 32
run 06-memcheck 600 env NTHREADS=2 compute-sanitizer --tool memcheck $B/06_symm_primitive --build nvcc
run 06-resources 60 bash -c "find $XDG_CACHE_HOME -name '*.cubin' | while read c; do echo \"== \$c\"; cuobjdump -res-usage \"\$c\" | grep -A1 -E 'tp_|symm_'; done"
run 06-suite-threads ${SUITE_LIMIT:-600} env GPU_TEST_RANKS=2 .gpu/run-tests -E 'package(symm_primitive)'
run 06-suite-mpi ${SUITE_LIMIT:-600} env GPU_TEST_RANKS=2 $HN .gpu/run-tests-mpi -E 'package(symm_primitive)'
echo done >> "$L/index.txt"
tar czf $OUT/$CALL.tgz -C $OUT $CALL && rm -rf $OUT/$CALL
