#!/usr/bin/env bash
# Issue 22's release matrix on 2 GPUs (kind nvidia-h200-x2, not lent on
# 2026-11-25): every lesson in threads mode on every NCCL release for CUDA 13
# from 2.28.3 to 2.32.3, lesson 05 with both kernels, 02_allreduce_bench with
# -R 0/1/2 (the chapter "NCCL releases" takes its busbw table at 2 MB, 128 MB
# and 512 MB and its 8 B and 32 KB times from here); on 2.28.3 and 2.32.3
# also both launch modes for every lesson, every benchmark, and the whole
# suite in both builds. Each release but the system's 2.28.3 is loaded from
# its folder given only as NCCL_HOME, as a user with NCCL from pip would.
# Stage first, one call per release, back to back while the machine is warm:
# carry .nccl/nccl-VERSION.tar.xz, run `call16-releases-one-gpu.sh stage`;
# then carry .carry (stage.sh) and run this with CALL set. One call may run
# 10 minutes: split the work with ONLY, e.g. ONLY="2.29.7 2.30.7 2.31.2",
# then ONLY=2.28.3, then ONLY=2.32.3 (the suites take 5 minutes each release).
set -u
CALL=${CALL:?name the call, e.g. CALL=call17}
. runs/2026-11-25/scripts/gpu-run-lib.sh
releases=(2.28.3 2.28.9)
for d in /tmp/nccl/*/; do releases+=("$(basename "$d")"); done
[ -n "${ONLY:-}" ] && read -r -a releases <<< "$ONLY"
for v in "${releases[@]}"; do
  case $v in
    2.28.3) E="env LD_LIBRARY_PATH=" X="" ;;
    2.28.9) E="env -u LD_LIBRARY_PATH NCCL_HOME=$W" X="-x NCCL_HOME" ;;
    *) E="env -u LD_LIBRARY_PATH NCCL_HOME=/tmp/nccl/$v" X="-x NCCL_HOME" ;;
  esac
  for lesson in 01_allreduce_ub 02_allreduce_sm 03_alltoallv_sm 04_vmm_raw 05_device_lsa; do
    run $v-$lesson 300 $E NTHREADS=2 $B/$lesson
  done
  run $v-05-fast 300 $E NTHREADS=2 $B/05b_lsa_fast
  run $v-02-bench 300 $E NTHREADS=2 $B/02_allreduce_bench -b 8 -e 512M -f 2 --json $L/$v-02-bench.json
  if [ $v = 2.28.3 ] || [ $v = 2.32.3 ]; then
    for lesson in 01_allreduce_ub 02_allreduce_sm 03_alltoallv_sm 04_vmm_raw 05_device_lsa; do
      run $v-$lesson-mpi 300 $E mpirun -np 2 $X $M/$lesson
    done
    run $v-05-fast-mpi 300 $E mpirun -np 2 $X $M/05b_lsa_fast
    run $v-03-bench 300 $E NTHREADS=2 $B/03_alltoallv_bench --json $L/$v-03-bench.json
    run $v-05-bench 300 $E NTHREADS=2 $B/05_allreduce_bench --json $L/$v-05-bench.json
    run $v-02-bench-mpi 300 $E mpirun -np 2 $X $M/02_allreduce_bench --json $L/$v-02-bench-mpi.json
    run $v-suite-threads 400 $E .gpu/run-tests
    run $v-suite-mpi 500 $E .gpu/run-tests-mpi
  fi
done
echo done >> "$L/index.txt"
tar czf $OUT/$CALL.tgz -C $OUT $CALL && rm -rf $OUT/$CALL
