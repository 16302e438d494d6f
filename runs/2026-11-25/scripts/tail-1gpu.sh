#!/usr/bin/env bash
# A change to lesson 06's CUDA layer tail (06_symm_primitive/PERF_NOTES.md
# has each change's prediction, written before its run), on one H200 and
# NCCL 2.32.3, against the benchmark built before the change. Calls 32/34:
# more loads in flight per thread (tiled compute, batched epilogue), against
# commit 0746a67; calls 35/36: four columns per thread, against call 32's
# build. Two calls back to
# back on one warm machine (stage with tail-stage.sh):
#   PART=1, carry .nccl/nccl-2.32.3.tar.xz and .carry/tail-a.txz: the lesson
#           in both dtypes, the benchmark new and old, ncu on each phase;
#   PART=2, carry .carry/tail-b.txz: lesson 06's suite after the change (on
#           the 2.32.3 that PART=1 unpacked into /tmp/n).
#   CALL=call32 PART=1 bash runs/2026-11-25/scripts/tail-1gpu.sh
set -u
. runs/2026-11-25/scripts/gpu-run-lib.sh
export NCCL_HOME=/tmp/n/nccl-2.32.3 XDG_CACHE_HOME=/tmp/cache TRITON_PYTHON=/opt/torch/.venv/bin/python
T=/tmp/t
if [ "${PART:-}" = 1 ]; then
  mkdir -p /tmp/n $T && tar xJf .nccl/nccl-2.32.3.tar.xz -C /tmp/n && tar xJf .carry/tail-a.txz -C $T
  # 1. The lesson verifies with the new kernel, both dtypes.
  run lesson-f32 120 env NTHREADS=1 $T/bin/06_symm_primitive --kernel cuda --build nvcc
  run lesson-bf16 120 env NTHREADS=1 $T/bin/06_symm_primitive --kernel cuda --build nvcc --dtype bf16
  # 2. Timed: the new binary (CUDA fused, Triton, unfused) and the old one
  #    (CUDA fused, unfused) back to back; every timed operation is checked.
  S="-b 128M -e 512M -f 4 -n 5 -w 1 --trials 3"
  run bench-f32-new 150 env NTHREADS=1 $T/bin/06_symm_bench --build nvcc --contenders fused,triton,unfused-nccl $S --json $L/bench-f32-new.json
  run bench-f32-old 120 env NTHREADS=1 $T/old/06_symm_bench --build nvcc --contenders fused,unfused-nccl $S --json $L/bench-f32-old.json
  B="-b 128M -e 128M -n 5 -w 1 --trials 3 --dtype bf16"
  run bench-bf16-new 60 env NTHREADS=1 $T/bin/06_symm_bench --build nvcc --contenders fused,triton,unfused-nccl $B --json $L/bench-bf16-new.json
  run bench-bf16-old 60 env NTHREADS=1 $T/old/06_symm_bench --build nvcc --contenders fused,unfused-nccl $B --json $L/bench-bf16-old.json
  # 3. Where the time goes: each phase of the unfused path, new and old.
  for v in new old; do
    bin=$T/bin/06_symm_bench; [ $v = old ] && bin=$T/old/06_symm_bench
    run ncu-$v 60 env NTHREADS=1 ncu --clock-control none -k regex:'tp_compute|tp_residual_rmsnorm' -c 2 \
      --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,launch__registers_per_thread \
      $bin --build nvcc --contenders unfused-nccl -b 512M -e 512M -n 1 -w 1 --trials 1
  done
else
  [ -d /tmp/n/nccl-2.32.3 ] || { echo "error: /tmp/n/nccl-2.32.3 missing: run PART=1 first, on the same warm machine" >&2; exit 2; }
  mkdir -p $T/b && tar xJf .carry/tail-b.txz -C $T/b
  # 4. Lesson 06's suite after the change (2.32.3 with Triton: all of it runs at one rank).
  run suite-06 200 env GPU_TEST_RANKS=1 $T/b/cargo-nextest nextest run --archive-file $T/b/tests.tar.zst --workspace-remap . \
    --run-ignored all --no-fail-fast --test-threads 1
fi
cat "$L/index.txt"
tar czf "$OUT/$CALL.tgz" -C "$OUT" "$CALL" && rm -rf "$L"
