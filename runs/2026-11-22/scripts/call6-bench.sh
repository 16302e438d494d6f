#!/usr/bin/env bash
# GPU call 6 (nvidia-h200-x2): the new kernels' correctness first, then every
# benchmark side by side with nccl-tests, all in one call so that the numbers
# compare. Binaries come from ../shared/tools/gpu-bundle (.gpu/bin, thread
# mode) and an MPI build copied to .gpu/mpi; nccl-tests' source travels as
# .yard/nccl-tests.tar.gz and is built here (it is not part of the project).
set -u
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
export XDG_CACHE_HOME=/tmp/cache
L=$OUT/call6; mkdir -p "$L"
B=.gpu/bin M=.gpu/mpi NT=/tmp/nt/build
run() { # name limit command...: one log per step, a line in index.txt
  local name=$1 lim=$2; shift 2
  { echo "\$ $*"; date -u +%FT%TZ; timeout "$lim" "$@"; echo "exit $?"; } > "$L/$name.log" 2>&1
  printf '%-28s %s\n' "$name" "$(tail -1 "$L/$name.log")" | tee -a "$L/index.txt"
}
{ nvidia-smi -L; nvidia-smi topo -m; nvcc --version | tail -2; date -u; } > "$L/recon.log" 2>&1

# nccl-tests, built in the background while the correctness runs go.
mkdir -p /tmp/nt && tar xzf .yard/nccl-tests.tar.gz -C /tmp/nt
( cd /tmp/nt && make -j16 MPI=1 MPI_HOME=/usr/lib/x86_64-linux-gnu/openmpi NCCL_HOME=/usr \
    NVCC_GENCODE=-gencode=arch=compute_90,code=sm_90 > "$L/nccl-tests-build.log" 2>&1 ) &
build=$!

# 1. Correctness: lesson 05 both kernels, then every kernel at awkward sizes and offsets.
run 05-fast-threads 180 env NTHREADS=2 $B/05_device_lsa --kernel fast
run 05-simple-threads 120 env NTHREADS=2 $B/05_device_lsa
q="-n 2 -w 1 --trials 1"
run edge-1float 120 env NTHREADS=2 $B/05_allreduce_bench -b 4 -e 4 $q --kernels nccl,simple,vec16,twoshot,oneshot,fast
run edge-3floats-off4 120 env NTHREADS=2 $B/05_allreduce_bench -b 12 -e 12 --send-offset 4 --recv-offset 4 $q --kernels nccl,simple,vec16,twoshot,oneshot,fast
run edge-250003 120 env NTHREADS=2 $B/05_allreduce_bench -b 1000012 -e 1000012 $q --kernels nccl,simple,vec16,twoshot,oneshot,fast
run edge-250003-off20-36 120 env NTHREADS=2 $B/05_allreduce_bench -b 1000012 -e 1000012 --send-offset 20 --recv-offset 36 $q --kernels nccl,simple,vec16,twoshot,oneshot,fast
run edge-250003-off4-12 120 env NTHREADS=2 $B/05_allreduce_bench -b 1000012 -e 1000012 --send-offset 4 --recv-offset 12 $q --kernels nccl,simple,vec16,twoshot,oneshot,fast
run edge-1000003-off8 120 env NTHREADS=2 $B/05_allreduce_bench -b 4000012 -e 4000012 --send-offset 8 --recv-offset 8 $q --kernels nccl,simple,vec16,twoshot,fast
run 05-fast-mpi 180 mpirun -np 2 $M/05_device_lsa --kernel fast
wait $build; echo "nccl-tests build: $?" >> "$L/index.txt"

# 2. AllReduce, side by side: nccl-tests, then ours, threads then MPI.
for R in 0 1 2; do
  run nt-ar-threads-R$R 120 $NT/all_reduce_perf -b 8 -e 512M -f 2 -n 20 -w 5 -t 2 -g 1 -R $R
done
run 02-bench-threads 150 env NTHREADS=2 $B/02_allreduce_bench --json "$L/02-threads.json" --svg "$L/02-threads.svg"
for R in 0 1 2; do
  run nt-ar-mpi-R$R 120 mpirun -np 2 $NT/all_reduce_perf -b 8 -e 512M -f 2 -n 20 -w 5 -R $R
done
run 02-bench-mpi 150 mpirun -np 2 $M/02_allreduce_bench --json "$L/02-mpi.json" --svg "$L/02-mpi.svg"
for c in 16 32 64; do
  run 02-symctas-$c 90 env NCCL_SYM_CTAS=$c NTHREADS=2 $B/02_allreduce_bench -R 2 -b 1M -e 512M --json "$L/02-symctas-$c.json"
done

# 3. Lesson 05's kernels against ncclAllReduce on the same windows.
run 05-bench-steps-small 120 env NTHREADS=2 $B/05_allreduce_bench --kernels nccl,simple,vec16,twoshot,oneshot,fast -e 1M --json "$L/05-steps-small.json"
run 05-bench-threads 180 env NTHREADS=2 $B/05_allreduce_bench --kernels nccl,simple,vec16,twoshot,fast --json "$L/05-threads.json" --svg "$L/05-threads.svg"
run 05-bench-mpi 180 mpirun -np 2 $M/05_allreduce_bench --json "$L/05-mpi.json" --svg "$L/05-mpi.svg"

# 4. Lesson 03's alltoallv: aligned against unaligned blocks.
run 03-bench-threads 150 env NTHREADS=2 $B/03_alltoallv_bench -b 1K -e 256M --json "$L/03-threads.json" --svg "$L/03-threads.svg"
run 03-bench-unaligned 120 env NTHREADS=2 $B/03_alltoallv_bench -b 1M -e 256M --unaligned --json "$L/03-unaligned.json"
run 03-bench-mpi 150 mpirun -np 2 $M/03_alltoallv_bench -b 1K -e 256M --json "$L/03-mpi.json"
run nt-a2a-mpi 60 mpirun -np 2 $NT/alltoall_perf -b 1M -e 256M -f 2 -n 20 -w 5 -R 1

echo done >> "$L/index.txt"
