#!/usr/bin/env bash
# GPU calls 8a, 8b and 8c (nvidia-h200-x2):
#   a: the whole test suite from its archives (thread build, then MPI build),
#      compute-sanitizer on the fast kernel's two paths, the pip wheel's NCCL,
#      and lesson 05 --kernel fast as the README quotes it;
#   b: the benchmarks the READMEs quote, memcheck without NCCL's API-probing
#      noise, and nccl-tests beside ours at small sizes with -n 20 and -n 200;
#   c: the whole suite again, after the last change (two tests' row counts).
set -u
part=$1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
L=$OUT/call8$part; mkdir -p "$L"
B=.gpu/bin M=.gpu/mpi NT=/tmp/nt/build
run() {
  local name=$1 lim=$2; shift 2
  { echo "\$ $*"; date -u +%FT%TZ; timeout "$lim" "$@"; echo "exit $?"; } > "$L/$name.log" 2>&1
  printf '%-28s %s\n' "$name" "$(tail -1 "$L/$name.log")" | tee -a "$L/index.txt"
}
{ nvidia-smi -L; date -u; } > "$L/recon.log" 2>&1

if [ "$part" = a ]; then
  run suite-threads 420 .gpu/run-tests
  run suite-mpi 420 .gpu/run-tests-mpi
  run 05-fast-threads 120 env NTHREADS=2 $B/05_device_lsa --kernel fast
  run 05-fast-mpi 120 mpirun -np 2 $M/05_device_lsa --kernel fast
  # Both paths of the fast kernel: 4 KiB takes the one-shot, 4 MiB the two-shot.
  for tool in memcheck racecheck synccheck; do
    run sanitizer-$tool 200 env NTHREADS=2 compute-sanitizer --tool $tool --error-exitcode 9 \
      $B/05_allreduce_bench --kernels fast,twoshot -b 4K -e 4M -f 1024 -n 1 -w 0 --trials 1
  done
  W=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/nccl
  mkdir -p /tmp/wheel && ln -sf $W/lib/libnccl.so.2 /tmp/wheel/libnccl.so
  run wheel-05-fast 120 env LD_LIBRARY_PATH=/tmp/wheel NTHREADS=2 $B/05_device_lsa --kernel fast
  run wheel-05-bench 120 env LD_LIBRARY_PATH=/tmp/wheel NTHREADS=2 $B/05_allreduce_bench \
    --kernels nccl,simple,oneshot,fast -b 8 -e 1M -f 8 --json "$L/wheel-05.json"
elif [ "$part" = b ]; then
  mkdir -p /tmp/nt && tar xzf .yard/nccl-tests.tar.gz -C /tmp/nt
  ( cd /tmp/nt && make -j16 MPI=1 MPI_HOME=/usr/lib/x86_64-linux-gnu/openmpi NCCL_HOME=/usr \
      NVCC_GENCODE=-gencode=arch=compute_90,code=sm_90 > /dev/null 2>&1 ) &
  build=$!
  run 05-steps-small 150 env NTHREADS=2 $B/05_allreduce_bench --kernels nccl,simple,vec16,twoshot,oneshot,fast -e 1M --json "$L/05-steps-small.json"
  # API errors are NCCL's own probing (call 8a's log shows them); memory errors still fail.
  run sanitizer-memcheck 200 env NTHREADS=2 compute-sanitizer --tool memcheck --report-api-errors no --error-exitcode 9 \
    $B/05_allreduce_bench --kernels fast,twoshot -b 4K -e 4M -f 1024 -n 1 -w 0 --trials 1
  wait $build; echo "nccl-tests build: $?" >> "$L/index.txt"
  run 05-bench-threads 200 env NTHREADS=2 $B/05_allreduce_bench --kernels nccl,simple,vec16,twoshot,fast --json "$L/05-threads.json" --svg "$L/05-threads.svg"
  run 05-bench-mpi 150 mpirun -np 2 $M/05_allreduce_bench --json "$L/05-mpi.json" --svg "$L/05-mpi.svg"
  run 02-bench-threads 120 env NTHREADS=2 $B/02_allreduce_bench -f 4 --json "$L/02-threads.json"
  run 02-symctas-64 90 env NCCL_SYM_CTAS=64 NTHREADS=2 $B/02_allreduce_bench -R 2 -b 2M -f 4 --json "$L/02-symctas-64.json"
  for n in 20 200; do
    run nt-small-R2-n$n 60 $NT/all_reduce_perf -b 8 -e 256K -f 8 -n $n -w 5 -t 2 -g 1 -R 2
    run 02-small-R2-n$n 60 env NTHREADS=2 $B/02_allreduce_bench -R 2 -b 8 -e 256K -f 8 -n $n
  done
else
  run suite-threads 300 .gpu/run-tests
  run suite-mpi 280 .gpu/run-tests-mpi
fi
echo done >> "$L/index.txt"
