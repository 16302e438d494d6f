#!/usr/bin/env bash
# GPU call 14 (nvidia-h200, ONE GPU: no kind with 2 or more GPUs was lent on
# 2026-11-25). Issue 18 (the house) at one rank, after the crate split and
# the benchmarks' new check:
# - before/after: the same sweep timed by the binaries of c004f35 (.gpu/old:
#   one extra, untimed operation checked) and of this change (every timed
#   operation checked), alternating, in one call. 05_allreduce_bench needs
#   NCCL 2.28.7+ at one rank (2.28.3 gives one rank no symmetric memory), so
#   it runs on the 2.28.9 wheel; 02_allreduce_bench on the system's 2.28.3.
# - the stress mode at one rank (the skew needs a peer to matter; this shows
#   the code path and the check on one GPU);
# - the thread build's suite at GPU_TEST_RANKS=1 (tests written for 2 GPUs
#   fail there, as in calls 11 to 13).
# Run from the project root after `tar xzf .carry/final.tgz` (stage.sh).
set -u
CALL=${CALL:-call14}
. runs/2026-11-25/scripts/gpu-run-lib.sh
WHEEL="env LD_LIBRARY_PATH=/tmp/wheel NCCL_HOME=$W NTHREADS=1"
S="-b 8 -e 512M -f 4"
for k in 1 2; do
  run 05-bench-before-$k 240 $WHEEL $O/05_allreduce_bench --kernels nccl,simple,fast $S --json $L/05-before-$k.json
  run 05-bench-after-$k 240 $WHEEL $B/05_allreduce_bench --kernels nccl,simple,fast $S --json $L/05-after-$k.json
done
run 02-bench-before 240 env NTHREADS=1 $O/02_allreduce_bench $S --json $L/02-before.json
run 02-bench-after 240 env NTHREADS=1 $B/02_allreduce_bench $S --json $L/02-after.json
run 05-stress 240 $WHEEL $B/05_allreduce_bench --stress 2000 --kernels nccl,simple,vec16,twoshot,fast -b 4K -e 4M -f 32
run 05-stress-oneshot 240 $WHEEL $B/05_allreduce_bench --stress 2000 --kernels oneshot -b 8 -e 1M -f 128
run 02-stress 240 env NTHREADS=1 $B/02_allreduce_bench --stress 2000 -b 8 -e 4M -f 32
run 02-stress-mpi 240 mpirun -np 1 $M/02_allreduce_bench --stress 2000 -b 8 -e 4M -f 32
run 02-bench-too-large 60 env NTHREADS=1 $B/02_allreduce_bench -b 8G -e 8G
run suite-threads-1gpu ${SUITE_LIMIT:-200} env GPU_TEST_RANKS=1 .gpu/run-tests
echo done >> "$L/index.txt"
