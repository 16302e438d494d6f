#!/usr/bin/env bash
# GPU call 11 (nvidia-h200, ONE GPU: no kind with 2 or more GPUs was lent on
# 2026-11-23). What one GPU can show after issue 9's changes: every lesson at
# one rank in both launch modes (lesson 04's rewritten cuMem path among them:
# create, reserve, map, set access, export, write, verify, unmap, release;
# importing needs a peer), lesson 02's kernel evidence at one rank, lesson
# 05's nvcc preflight on a machine that has everything else, and the GPU
# suite at GPU_TEST_RANKS=1 (tests written for 2 GPUs are expected to fail
# there; the log says which and why).
# Run from the project root after `tar xzf .carry/final.tgz`, which
# runs/2026-11-22/scripts/stage.sh makes.
set -u
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
L=$OUT/${CALL:-call11}; mkdir -p "$L"
B=.gpu/bin M=.gpu/mpi
run() {
  local name=$1 lim=$2; shift 2
  { echo "\$ $*"; date -u +%FT%TZ; timeout "$lim" "$@"; echo "exit $?"; } > "$L/$name.log" 2>&1
  printf '%-28s %s\n' "$name" "$(tail -1 "$L/$name.log")" | tee -a "$L/index.txt"
}
{ nvidia-smi -L; nvidia-smi topo -m; nvidia-smi --query-gpu=name,driver_version --format=csv; ls -l /usr/lib/x86_64-linux-gnu/libnccl.so*; date -u; } > "$L/recon.log" 2>&1
for lesson in 01_allreduce_ub 02_allreduce_sm 03_alltoallv_sm 04_vmm_raw 05_device_lsa; do
  run $lesson-threads 120 env NTHREADS=1 $B/$lesson
  run $lesson-mpi 120 mpirun -np 1 $M/$lesson
done
run 04-threads-64M 60 env NTHREADS=1 $B/04_vmm_raw --size-bytes 64M
run 04-mpi-3M 60 mpirun -np 1 $M/04_vmm_raw --size-bytes 3M
run 02-win-enable-0-threads 60 env NCCL_WIN_ENABLE=0 NTHREADS=1 $B/02_allreduce_sm
run 02-user-nccl-debug 60 env NCCL_DEBUG=WARN NTHREADS=1 $B/02_allreduce_sm
run 05-no-nvcc 60 env NVCC=/nonexistent/nvcc NTHREADS=1 $B/05_device_lsa
run 05-bench-no-nvcc 60 env NVCC=/nonexistent/nvcc NTHREADS=1 $B/05_allreduce_bench
run nthreads-2-on-1-gpu 60 env NTHREADS=2 $B/01_allreduce_ub
W=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/nccl
mkdir -p /tmp/wheel && ln -sf $W/lib/libnccl.so.2 /tmp/wheel/libnccl.so
run 02-wheel-one-rank 60 env LD_LIBRARY_PATH=/tmp/wheel NTHREADS=1 $B/02_allreduce_sm
run suite-threads-1gpu ${SUITE_LIMIT:-240} env GPU_TEST_RANKS=1 .gpu/run-tests
echo done >> "$L/index.txt"
