#!/usr/bin/env bash
# The 2-GPU call issue 18 (the house) still needs: kind nvidia-h200-x2,
# which was not lent on 2026-11-25. Run it from the project root after
# `tar xzf .carry/final.tgz` (stage.sh), with CALL set to the call's name.
# - before/after: 05_allreduce_bench (nccl, simple, fast) and
#   02_allreduce_bench timed by the binaries of c004f35 (.gpu/old) and of
#   this change, alternating twice, in one call: issue 18 asks for the
#   same figures within noise at 8 B, 32 KB, 2 MB and 128 MB;
# - the stress mode, threads and MPI: every kernel of 05_allreduce_bench
#   and ncclAllReduce in the three registration modes, 2,000 operations per
#   size and placement, 0 wrong;
# - lesson 04 at 2 ranks in both launch modes: its README's 2-rank
#   transcript comes from these logs;
# - the whole suite from both archives (the stress tests are in it).
set -u
CALL=${CALL:?name the call, e.g. CALL=call15}
. runs/2026-11-25/scripts/gpu-run-lib.sh
S="-b 8 -e 512M -f 2"
for k in 1 2; do
  run 05-bench-before-$k 240 env NTHREADS=2 $O/05_allreduce_bench --kernels nccl,simple,fast $S --json $L/05-before-$k.json
  run 05-bench-after-$k 240 env NTHREADS=2 $B/05_allreduce_bench --kernels nccl,simple,fast $S --json $L/05-after-$k.json
done
run 02-bench-before 240 env NTHREADS=2 $O/02_allreduce_bench $S --json $L/02-before.json
run 02-bench-after 240 env NTHREADS=2 $B/02_allreduce_bench $S --json $L/02-after.json
for mode in threads mpi; do
  if [ $mode = threads ]; then go="env NTHREADS=2 $B"; else go="mpirun -np 2 $M"; fi
  run 05-stress-$mode 300 $go/05_allreduce_bench --stress 2000 --kernels nccl,simple,vec16,twoshot,fast -b 4K -e 4M -f 32
  run 05-stress-oneshot-$mode 300 $go/05_allreduce_bench --stress 2000 --kernels oneshot -b 8 -e 1M -f 128
  run 02-stress-$mode 300 $go/02_allreduce_bench --stress 2000 -b 8 -e 4M -f 32
  run 04_vmm_raw-$mode 120 $go/04_vmm_raw
done
run suite-threads 300 .gpu/run-tests
run suite-mpi 400 .gpu/run-tests-mpi
echo done >> "$L/index.txt"
