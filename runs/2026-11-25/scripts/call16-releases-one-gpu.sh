#!/usr/bin/env bash
# GPU call 16 (nvidia-h200, ONE GPU): issue 22's release matrix, the cells
# one GPU can fill: every lesson at one rank on every NCCL release for CUDA 13
# from 2.28.3 to 2.32.3, each loaded from its folder given only as NCCL_HOME
# (as pip unpacks a wheel: libnccl.so.2 and include/, nothing on
# LD_LIBRARY_PATH), lesson 05 with both kernels on the route `auto` picks,
# and 02_allreduce_bench; both launch modes on 2.28.3 and 2.32.3.
# 2.28.3 is the machine's system NCCL, 2.28.9 the PyTorch venv's wheel; the
# others are staged first, one call each, back to back while the machine is
# warm (files under /tmp stay): carry .nccl/nccl-VERSION.tar.xz and run
#   runs/2026-11-25/scripts/call16-releases-one-gpu.sh stage
# then carry .carry (stage.sh) and run it with `run`.
set -u
if [ "${1:-run}" = stage ]; then
  mkdir -p /tmp/nccl
  for f in .nccl/nccl-*.tar.xz; do
    [ -f "$f" ] || continue
    v=$(basename "$f" .tar.xz); v=${v#nccl-}
    rm -rf /tmp/nccl/$v && mkdir -p /tmp/nccl/$v
    tar xJf "$f" -C /tmp/nccl/$v --strip-components=1 && rm -f /tmp/nccl/$v/lib/libnccl.so
    echo "staged $v: $(ls /tmp/nccl/$v/lib | tr '\n' ' ')"
  done
  exit 0
fi
CALL=${CALL:-call16}
. runs/2026-11-25/scripts/gpu-run-lib.sh
ls -l /tmp/nccl/*/lib > "$L/staged.log" 2>&1
releases=(2.28.3 2.28.9)
for d in /tmp/nccl/*/; do releases+=("$(basename "$d")"); done
for v in "${releases[@]}"; do
  case $v in
    2.28.3) E="env LD_LIBRARY_PATH=" ;;                      # the system's NCCL
    2.28.9) E="env -u LD_LIBRARY_PATH NCCL_HOME=$W" ;;       # the venv's wheel
    *) E="env -u LD_LIBRARY_PATH NCCL_HOME=/tmp/nccl/$v" ;;
  esac
  for lesson in 01_allreduce_ub 02_allreduce_sm 03_alltoallv_sm 04_vmm_raw 05_device_lsa; do
    run $v-$lesson 300 $E NTHREADS=1 $B/$lesson
  done
  run $v-05-fast 300 $E NTHREADS=1 $B/05_device_lsa --kernel fast
  run $v-02-bench 300 $E NTHREADS=1 $B/02_allreduce_bench -b 8 -e 128M -f 8 --json $L/$v-02-bench.json
  if [ $v = 2.28.3 ] || [ $v = 2.32.3 ]; then
    X=""; [ $v = 2.28.3 ] || X="-x NCCL_HOME"   # mpirun passes on only what it is told
    for lesson in 01_allreduce_ub 02_allreduce_sm 03_alltoallv_sm 04_vmm_raw 05_device_lsa; do
      run $v-$lesson-mpi 300 $E mpirun -np 1 $X $M/$lesson
    done
  fi
done
echo done >> "$L/index.txt"
tar czf $OUT/$CALL.tgz -C $OUT $CALL && rm -rf $OUT/$CALL
