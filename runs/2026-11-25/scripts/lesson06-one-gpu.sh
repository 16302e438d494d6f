#!/usr/bin/env bash
# GPU call for issue 20 (lesson 06, symm_all_reduce) on ONE GPU (nvidia-h200 or
# nvidia-h100-x1), at one rank. Run from the project root after:
#   * stage.sh on the build machine (.carry/final.tgz: .gpu/bin threads build,
#     .gpu/mpi MPI build, both test archives), unpacked with tar xzf;
#   * for the 2.32.3 jit runs: two calls before this one, back to back while the
#     machine is warm, `runs/2026-11-24/scripts/call-jit.sh stage` with
#     .jit/jit-tools.tar.gz carried, then with .nccl carried (NCCL 2.32.3 unpacks
#     to /tmp/jit/site/nvidia/nccl, NVRTC/nvJitLink 13.5 to /tmp/jit/site/nvidia/cu13).
#     Without them the 2.32.3 steps exit 2 naming what is missing; the rest runs.
# What it runs (logs in $OUT/$CALL/, index.txt lists each step's exit code; one
# tar, $OUT/$CALL.tgz, at the end):
#   * the lesson, NCCL backend: 2.28.9 (PyTorch venv wheel) through nvcc, f32 and
#     bf16, threads and mpirun -np 1; 2.32.3 through jit (f32, bf16) and through
#     nvcc (the C++ API against 2.32.3's headers); 2.28.3 (system) expects exit 2
#     (no symmetric memory at one rank);
#   * the lesson, NVSHMEM backend (the venv's NVSHMEM 3.4.5, NVRTC + nvJitLink of
#     the machine's CUDA 13.0): mpirun -np 1, f32 and bf16; thread mode expects
#     exit 2 naming the MPI build;
#   * 06_symm_bench --bad-input (every documented return code, from the device);
#   * 06_symm_bench at one rank (8 B - 512 MB by 4): NCCL 2.28.9 nvcc f32 and bf16,
#     2.32.3 jit, NVSHMEM; --json/--svg beside the logs;
#   * stress 2000 on the fused kernel, NCCL and NVSHMEM;
#   * compute-sanitizer memcheck on the fused kernel (NCCL backend; NVSHMEM's
#     init stalls under the sanitizer, see ../shared/DEVICE_CODE.md);
#   * registers/stack of every lesson-06 cubin (cuobjdump -res-usage);
#   * lesson 06's GPU tests from both archives at GPU_TEST_RANKS=1 (the transcript
#     test fails until the README has a transcript block: it is owed).
set -u
CALL=${CALL:-lesson06-1gpu}
# LIMIT_PERCENT scales every step's time limit, so that the call fits 10 minutes.
scale() { echo $(( $1 * ${LIMIT_PERCENT:-100} / 100 )); }
. runs/2026-11-25/scripts/gpu-run-lib.sh
export XDG_CACHE_HOME=/tmp/l06-cache
NV=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/nvshmem
J=/tmp/jit/site/nvidia/nccl
H9="env -u LD_LIBRARY_PATH NCCL_HOME=$W"
H32="env -u LD_LIBRARY_PATH NCCL_HOME=$J"
# The NVSHMEM backend: NCCL 2.28.9 for the launcher's preflight, NVSHMEM 3.4.5.
HN="env -u LD_LIBRARY_PATH NCCL_HOME=$W NVSHMEM_HOME=$NV"
MPI="mpirun -np 1 -x NCCL_HOME -x NVSHMEM_HOME -x NVSHMEM_DISABLE_NVLS -x XDG_CACHE_HOME"
{ ls -l $NV/lib $NV/include | head -20; ls -l $J/lib /tmp/jit/site/nvidia/cu13/lib 2>&1; } > "$L/recon-06.log" 2>&1

# The lesson, NCCL backend.
run 06-2.28.9-nvcc-f32 $(scale 300) $H9 NTHREADS=1 $B/06_symm_primitive --build nvcc
run 06-2.28.9-nvcc-f32-cached $(scale 120) $H9 NTHREADS=1 $B/06_symm_primitive --build nvcc
run 06-2.28.9-nvcc-bf16 $(scale 300) $H9 NTHREADS=1 $B/06_symm_primitive --build nvcc --dtype bf16
run 06-2.28.9-nvcc-mpi $(scale 300) $H9 $MPI $M/06_symm_primitive --build nvcc
run 06-2.32.3-jit-f32 $(scale 300) $H32 NTHREADS=1 $B/06_symm_primitive --build jit
run 06-2.32.3-jit-bf16 $(scale 300) $H32 NTHREADS=1 $B/06_symm_primitive --build jit --dtype bf16
run 06-2.32.3-jit-mpi $(scale 300) $H32 $MPI $M/06_symm_primitive --build jit
run 06-2.32.3-nvcc-f32 $(scale 300) $H32 NTHREADS=1 $B/06_symm_primitive --build nvcc
run 06-2.28.3-expect-2 $(scale 120) env NTHREADS=1 $B/06_symm_primitive --build nvcc
# The lesson, NVSHMEM backend.
run 06-nvshmem-f32 $(scale 300) $HN $MPI $M/06_symm_primitive --backend nvshmem
run 06-nvshmem-bf16 $(scale 300) $HN $MPI $M/06_symm_primitive --backend nvshmem --dtype bf16
run 06-nvshmem-threads-expect-2 $(scale 60) $HN NTHREADS=1 $B/06_symm_primitive --backend nvshmem
# Bad input, from the device.
run 06-bad-input $(scale 300) $H9 NTHREADS=1 $B/06_symm_bench --build nvcc --bad-input
# The benchmark at one rank.
run 06-bench-2.28.9-f32 $(scale 600) $H9 NTHREADS=1 $B/06_symm_bench --build nvcc -b 8 -e 512M -f 4 \
  --json $L/06-bench-2.28.9-f32.json --svg $L/06-bench-2.28.9-f32.svg
run 06-bench-2.28.9-bf16 $(scale 600) $H9 NTHREADS=1 $B/06_symm_bench --build nvcc --dtype bf16 \
  --contenders fused,unfused-nccl,symm-layer -b 8 -e 512M -f 4 --json $L/06-bench-2.28.9-bf16.json
run 06-bench-2.32.3-jit $(scale 600) $H32 NTHREADS=1 $B/06_symm_bench --build jit -b 8 -e 512M -f 4 \
  --json $L/06-bench-2.32.3-jit.json
run 06-bench-nvshmem $(scale 600) $HN $MPI $M/06_symm_bench --backend nvshmem --contenders fused,symm-layer \
  -b 8 -e 512M -f 4 --json $L/06-bench-nvshmem.json
# Stress: 2000 back-to-back fused layer tails per size, ranks skewed.
run 06-stress-nccl $(scale 600) $H9 NTHREADS=1 $B/06_symm_bench --build nvcc --stress 2000 -b 4K -e 4M -f 32
run 06-stress-nvshmem $(scale 600) $HN $MPI $M/06_symm_bench --backend nvshmem --contenders fused --stress 2000 -b 4K -e 4M -f 32
# compute-sanitizer on the fused kernel (NCCL backend).
run 06-memcheck $(scale 600) $H9 NTHREADS=1 compute-sanitizer --tool memcheck $B/06_symm_primitive --build nvcc
run 06-memcheck-bf16 $(scale 600) $H9 NTHREADS=1 compute-sanitizer --tool memcheck $B/06_symm_primitive --build nvcc --dtype bf16
# Registers, stack and spills of every cubin this call built.
run 06-resources $(scale 60) bash -c "find $XDG_CACHE_HOME -name '*.cubin' | while read c; do echo \"== \$c\"; cuobjdump -res-usage \"\$c\" | grep -A1 -E 'tp_|symm_'; done"
# Lesson 06's tests from both archives at one rank.
run 06-suite-threads ${SUITE_LIMIT:-400} env GPU_TEST_RANKS=1 $H9 .gpu/run-tests -E 'package(symm_primitive)'
run 06-suite-mpi ${SUITE_LIMIT:-400} env GPU_TEST_RANKS=1 $HN .gpu/run-tests-mpi -E 'package(symm_primitive)'
echo done >> "$L/index.txt"
tar czf $OUT/$CALL.tgz -C $OUT $CALL && rm -rf $OUT/$CALL
