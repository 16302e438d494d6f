# Sourced by this day's call scripts: the environment every GPU call keeps,
# the log directory $L under $OUT, and run NAME LIMIT CMD..., which logs one
# step to $L/NAME.log (command, start time, output, exit code) and adds a
# line to $L/index.txt.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
L=$OUT/$CALL; mkdir -p "$L"
B=.gpu/bin M=.gpu/mpi O=.gpu/old
run() {
  local name=$1 lim=$2; shift 2
  { echo "\$ $*"; date -u +%FT%TZ; timeout "$lim" "$@"; echo "exit $?"; } > "$L/$name.log" 2>&1
  printf '%-28s %s\n' "$name" "$(tail -1 "$L/$name.log")" | tee -a "$L/index.txt"
}
{ nvidia-smi -L; nvidia-smi topo -m; nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
  ls -l /usr/lib/x86_64-linux-gnu/libnccl.so*; date -u; } > "$L/recon.log" 2>&1
# The PyTorch environment's NCCL 2.28.9 wheel, which ships only libnccl.so.2.
W=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/nccl
mkdir -p /tmp/wheel && ln -sf $W/lib/libnccl.so.2 /tmp/wheel/libnccl.so
