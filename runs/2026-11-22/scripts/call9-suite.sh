#!/usr/bin/env bash
# GPU call 9 (nvidia-h200-x2): the whole suite, thread build then MPI build,
# after the last code change (the benchmarks' duplicated host code merged
# into common::bench).
set -u
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
L=$OUT/call9; mkdir -p "$L"
run() {
  local name=$1 lim=$2; shift 2
  { echo "\$ $*"; date -u +%FT%TZ; timeout "$lim" "$@"; echo "exit $?"; } > "$L/$name.log" 2>&1
  printf '%-28s %s\n' "$name" "$(tail -1 "$L/$name.log")" | tee -a "$L/index.txt"
}
{ nvidia-smi -L; date -u; } > "$L/recon.log" 2>&1
run suite-threads 150 .gpu/run-tests
run suite-mpi 200 .gpu/run-tests-mpi
echo done >> "$L/index.txt"
