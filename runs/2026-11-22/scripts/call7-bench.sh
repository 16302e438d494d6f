#!/usr/bin/env bash
# GPU call 7 (nvidia-h200-x2): the benchmarks again after two harness fixes
# (nccl-tests' buffer rotation; one untimed collective before each trial's
# start event), beside nccl-tests in the same call; lesson 05's two-shot grid
# (132 against 264 blocks) and the one-shot/two-shot crossover.
set -u
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
export XDG_CACHE_HOME=/tmp/cache
L=$OUT/call7; mkdir -p "$L"
B=.gpu/bin M=.gpu/mpi NT=/tmp/nt/build
run() {
  local name=$1 lim=$2; shift 2
  { echo "\$ $*"; date -u +%FT%TZ; timeout "$lim" "$@"; echo "exit $?"; } > "$L/$name.log" 2>&1
  printf '%-28s %s\n' "$name" "$(tail -1 "$L/$name.log")" | tee -a "$L/index.txt"
}
{ nvidia-smi -L; date -u; } > "$L/recon.log" 2>&1
mkdir -p /tmp/nt && tar xzf .yard/nccl-tests.tar.gz -C /tmp/nt
( cd /tmp/nt && make -j16 MPI=1 MPI_HOME=/usr/lib/x86_64-linux-gnu/openmpi NCCL_HOME=/usr \
    NVCC_GENCODE=-gencode=arch=compute_90,code=sm_90 > "$L/nccl-tests-build.log" 2>&1 ) &
build=$!
q="-n 2 -w 1 --trials 1"
run edge-250003-off20-36 120 env NTHREADS=2 $B/05_allreduce_bench -b 1000012 -e 1000012 --send-offset 20 --recv-offset 36 $q --kernels nccl,simple,vec16,twoshot,oneshot,fast
run edge-1000003-off8 120 env NTHREADS=2 $B/05_allreduce_bench -b 4000012 -e 4000012 --send-offset 8 --recv-offset 8 $q --kernels nccl,simple,vec16,twoshot,fast
run 05-fast-threads 120 env NTHREADS=2 $B/05_device_lsa --kernel fast
wait $build; echo "nccl-tests build: $?" >> "$L/index.txt"

for R in 0 1 2; do run nt-ar-threads-R$R 120 $NT/all_reduce_perf -b 8 -e 512M -f 2 -n 20 -w 5 -t 2 -g 1 -R $R; done
run 02-bench-threads 150 env NTHREADS=2 $B/02_allreduce_bench --json "$L/02-threads.json" --svg "$L/02-threads.svg"
for R in 0 1 2; do run nt-ar-mpi-R$R 120 mpirun -np 2 $NT/all_reduce_perf -b 8 -e 512M -f 2 -n 20 -w 5 -R $R; done
run 02-bench-mpi 150 mpirun -np 2 $M/02_allreduce_bench --json "$L/02-mpi.json" --svg "$L/02-mpi.svg"
for c in 16 32 64; do
  run 02-symctas-$c 90 env NCCL_SYM_CTAS=$c NTHREADS=2 $B/02_allreduce_bench -R 2 -b 1M -e 512M --json "$L/02-symctas-$c.json"
done

run 05-steps-small 120 env NTHREADS=2 $B/05_allreduce_bench --kernels nccl,simple,vec16,twoshot,oneshot,fast -e 1M --json "$L/05-steps-small.json"
run 05-steps-large 180 env NTHREADS=2 $B/05_allreduce_bench --kernels nccl,simple,vec16,twoshot,fast -b 1M --json "$L/05-steps-large.json"
run 05-twoshot-264 120 env NTHREADS=2 $B/05_allreduce_bench --kernels twoshot,fast -b 1M --twoshot-blocks 264 --json "$L/05-twoshot-264.json"
run 05-bench-mpi 180 mpirun -np 2 $M/05_allreduce_bench --json "$L/05-mpi.json" --svg "$L/05-mpi.svg"

run 03-bench-threads 150 env NTHREADS=2 $B/03_alltoallv_bench -b 1K -e 256M --json "$L/03-threads.json" --svg "$L/03-threads.svg"
run 03-bench-unaligned 120 env NTHREADS=2 $B/03_alltoallv_bench -b 1M -e 256M --unaligned --json "$L/03-unaligned.json"
run 03-bench-mpi 150 mpirun -np 2 $M/03_alltoallv_bench -b 1K -e 256M --json "$L/03-mpi.json" --svg "$L/03-mpi.svg"
echo done >> "$L/index.txt"
