#!/usr/bin/env bash
# GPU call 10b (nvidia-h200-x2), after issue 9's changes: every lesson in
# both launch modes (the READMEs' transcripts come from these logs), lesson 02
# with NCCL_WIN_ENABLE=0 in both modes and on the 2.28.9 wheel, then the whole
# suite from its archives, thread build and MPI build.
# Run from the project root after `tar xzf .carry/final.tgz` (stage.sh).
set -u
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
L=$OUT/call10b; mkdir -p "$L"
B=.gpu/bin M=.gpu/mpi
run() {
  local name=$1 lim=$2; shift 2
  { echo "\$ $*"; date -u +%FT%TZ; timeout "$lim" "$@"; echo "exit $?"; } > "$L/$name.log" 2>&1
  printf '%-28s %s\n' "$name" "$(tail -1 "$L/$name.log")" | tee -a "$L/index.txt"
}
{ nvidia-smi -L; nvidia-smi topo -m; date -u; } > "$L/recon.log" 2>&1
for lesson in 01_allreduce_ub 02_allreduce_sm 03_alltoallv_sm 04_vmm_raw 05_device_lsa; do
  run $lesson-threads 120 env NTHREADS=2 $B/$lesson
  run $lesson-mpi 120 mpirun -np 2 $M/$lesson
done
run 05-fast-threads 60 env NTHREADS=2 $B/05b_lsa_fast
run 05-fast-mpi 60 mpirun -np 2 $M/05b_lsa_fast
run 02-win-enable-0-threads 60 env NCCL_WIN_ENABLE=0 NTHREADS=2 $B/02_allreduce_sm
run 02-win-enable-0-mpi 60 mpirun -np 2 -x NCCL_WIN_ENABLE=0 $M/02_allreduce_sm
run 02-one-rank 60 env NTHREADS=1 $B/02_allreduce_sm
W=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/nccl
mkdir -p /tmp/wheel && ln -sf $W/lib/libnccl.so.2 /tmp/wheel/libnccl.so
run 02-wheel-2.28.9 60 env LD_LIBRARY_PATH=/tmp/wheel NTHREADS=2 $B/02_allreduce_sm
run suite-threads 200 .gpu/run-tests
run suite-mpi 260 .gpu/run-tests-mpi
echo done >> "$L/index.txt"
