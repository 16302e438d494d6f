#!/usr/bin/env bash
# GPU call 15 (nvidia-h200, ONE GPU: no kind with 2 or more GPUs was lent on
# 2026-11-25), after issues 19 and 22's changes, at one rank:
# - issue 19: runs/2026-11-24/scripts/call-jit.sh (lesson 05 and its benchmark
#   through the jit route on NCCL 2.32.3 with no nvcc, through nvcc on 2.28.3;
#   the machine's own nvJitLink 13.0 refused). Staged by two calls before this
#   one, back to back: `call-jit.sh stage` with .jit/jit-tools.tar.gz carried,
#   then with .nccl carried (2.32.3 unpacks to /tmp/jit/site/nvidia/nccl).
# - issue 22: NCCL from a wheel's folder given only as NCCL_HOME (2.32.3, the
#   folder as pip unpacks it: no libnccl.so, nothing on LD_LIBRARY_PATH),
#   also under mpirun; every lesson at one rank on 2.32.3, both launch modes;
#   02_allreduce_bench at one rank on 2.32.3.
# - the suites of both builds at GPU_TEST_RANKS=1 (tests that need 2 ranks
#   fail there, as in calls 11 to 14).
# Run from the project root after `tar xzf .carry/final.tgz` (stage.sh).
set -u
CALL=${CALL:-call15}
. runs/2026-11-25/scripts/gpu-run-lib.sh
OUT=$OUT bash runs/2026-11-24/scripts/call-jit.sh run > "$L/call-jit-run.log" 2>&1
echo "call-jit                     $(grep -c 'exit 0' $OUT/call-jit/index.txt 2>/dev/null) steps exit 0" | tee -a "$L/index.txt"
# A wheel's folder as pip leaves it: lib/libnccl.so.2 and include/, no libnccl.so.
P=/tmp/pip-nccl-2.32.3
rm -rf $P && cp -r /tmp/jit/site/nvidia/nccl $P && rm -f $P/lib/libnccl.so
H="env -u LD_LIBRARY_PATH NCCL_HOME=$P"
run pip-ls 10 ls -l $P/lib
for lesson in 01_allreduce_ub 02_allreduce_sm 03_alltoallv_sm 04_vmm_raw 05_device_lsa; do
  run $lesson-2.32.3-threads 300 $H NTHREADS=1 $B/$lesson
  run $lesson-2.32.3-mpi 300 $H mpirun -np 1 -x NCCL_HOME $M/$lesson
done
run 05-fast-2.32.3-threads 300 $H NTHREADS=1 $B/05_device_lsa --kernel fast
run 05-nvcc-2.32.3-threads 300 $H NTHREADS=1 $B/05_device_lsa --build nvcc --kernel fast
run 02-bench-2.32.3 300 $H NTHREADS=1 $B/02_allreduce_bench -b 8 -e 512M -f 4 --json $L/02-bench-2.32.3.json
run 02-bench-2.28.3 300 env NTHREADS=1 $B/02_allreduce_bench -b 8 -e 512M -f 4 --json $L/02-bench-2.28.3.json
run 02-wheel-venv-2.28.9 120 env -u LD_LIBRARY_PATH NCCL_HOME=$W NTHREADS=1 $B/02_allreduce_sm
run suite-threads-1gpu ${SUITE_LIMIT:-200} env GPU_TEST_RANKS=1 .gpu/run-tests
run suite-mpi-1gpu ${SUITE_LIMIT:-220} env GPU_TEST_RANKS=1 .gpu/run-tests-mpi
echo done >> "$L/index.txt"
cp $OUT/call-jit.tgz $L/ 2>/dev/null
tar czf $OUT/$CALL.tgz -C $OUT $CALL && rm -rf $OUT/$CALL $OUT/call-jit $OUT/call-jit.tgz
