#!/usr/bin/env bash
# Issue 25 on one machine with 2 GPUs (kind nvidia-h200-x2; 4 GPUs, when
# lent, give 2 nodes of 2): every lesson and benchmark on 2 emulated nodes,
# on NCCL 2.28.3 (the system's) and 2.32.3 (staged), then the emulated GPU
# tests of the MPI build; also on 2.28.9 (the PyTorch venv's wheel), where
# symmetric support has no node condition. Not run yet: only one-GPU machines were lent on
# 2026-11-25.
#
# The emulation: tools/emulate-nodes, started by mpirun in place of each
# program, sets NCCL_HOSTID=emulated-node-<rank / EMULATED_RANKS_PER_NODE>,
# so NCCL treats the ranks as on different nodes (network transport, an LSA
# team per node, symmetric support decided as across nodes), while MPI sees
# one host and each process keeps its own GPU. MPI binaries only.
#
# Staging (run from the project root; each piece fits one call's carry):
#   .gpu: runs/2026-11-22/scripts/stage.sh (.gpu/mpi: the MPI build's
#         binaries; .gpu/tests-mpi.tar.zst and .gpu/run-tests-mpi: its tests).
#   NCCL 2.32.3 and the jit tools, as runs/2026-11-24/scripts/call-jit.sh
#   stages them, in calls made back to back while the machine is warm:
#     call 1: carry .jit/jit-tools.tar.gz   command: runs/2026-11-24/scripts/call-jit.sh stage
#     call 2: carry .nccl                   command: runs/2026-11-24/scripts/call-jit.sh stage
#     call 3: carry .gpu                    command: CALL=call16 runs/2026-11-25/scripts/multinode-2gpu.sh
#   Without the 2.32.3 pieces, only the 2.28.3 half runs (index.txt says so).
# tools/emulate-nodes is tracked: it travels with the working tree.
#
# What it expects (predictions read from NCCL's source, none seen yet):
# * 01: verified over the network transport (NET/Socket in the NCCL log), on both releases.
# * 02: 2.28.3: verified, "Kernel NCCL ran for this AllReduce:" an ordinary kernel (no
#   symmetric kernel across nodes); 2.32.3 without GIN: exit 2 at a NULL window.
# * 03: 2.28.3: verified; 2.32.3: exit 2 at a NULL window.
# * 04: verified: it makes no NCCL call and MPI sees one host, so the emulation does not
#   reach its cross-node refusal.
# * 05 (simple, fast) and 05_allreduce_bench: exit 2 before any kernel: "does not support
#   symmetric memory" at ncclDevCommCreate (2.28.3), a NULL window (2.32.3 without GIN), or
#   "LSA team holds 1 of the 2 ranks: the ranks span 2 nodes" (2.28.9, if its device
#   communicator is created across nodes). NEVER exit 1.
# * 06 and 06_symm_bench (if built): as 05 for the NCCL backend. Lesson 06 does not check
#   the LSA team yet (device_build::shim::check_lsa_team is there for it): on 2.28.9 it may
#   end in exit 1, which this run would show.
# * 02 on 2.28.9: verified, an ordinary kernel (symmetric kernels are masked off when
#   nNodes > 1).
# * the benchmarks 02 and 03: exit 0 (0 wrong) or exit 2 at a NULL window.
# Every step's log is in $OUT/$CALL/<name>.log; index.txt has each exit code and key lines.
set -u
CALL=${CALL:?name the call, e.g. CALL=call16}
. runs/2026-11-25/scripts/gpu-run-lib.sh
[ -d "$M" ] || { echo "no $M: stage the MPI build (runs/2026-11-22/scripts/stage.sh)" | tee -a "$L/index.txt"; exit 2; }
E=tools/emulate-nodes
NGPU=$(nvidia-smi -L | wc -l)
RANKS=2
[ "$NGPU" -ge 4 ] && RANKS=${RANKS4:-4}
[ "$NGPU" -lt 2 ] && { echo "$NGPU GPU: emulated nodes need 2 (one per node)" | tee -a "$L/index.txt"; }
export EMULATED_RANKS_PER_NODE=$((RANKS / 2))
echo "ranks $RANKS on 2 emulated nodes of $EMULATED_RANKS_PER_NODE" | tee -a "$L/index.txt"
MN=/tmp/multinode; mkdir -p $MN
SITE=/tmp/jit/site                       # where call-jit.sh stage unpacked 2.32.3
VENV=/opt/torch/.venv/lib/python3.12/site-packages
keys='verified|PASSED|error:|fix:|Kernel NCCL ran|deviceApiSupport|LSA team|NULL window|symmetric memory|Launch:|note: build route|exit [0-9]+'
key() { grep -aE "$keys" "$L/$1.log" | head -8 | sed 's/^/      /' >> "$L/index.txt"; }
# emu NAME LIMIT RELEASE-ENV... -- PROGRAM ARGS...: mpirun through the wrapper.
emu() {
  local name=$1 lim=$2; shift 2
  local envs=()
  while [ "$1" != -- ]; do envs+=("$1"); shift; done; shift
  local xs=(-x EMULATED_RANKS_PER_NODE)
  for e in "${envs[@]}"; do xs+=(-x "${e%%=*}"); done
  run "$name" "$lim" env "${envs[@]}" mpirun -np $RANKS "${xs[@]}" $E "$@"
  key "$name"
}

every_program() {
  local tag=$1; shift   # then the release's environment, VAR=value each
  emu $tag-01 120 "$@" -- $M/01_allreduce_ub
  emu $tag-02 120 "$@" -- $M/02_allreduce_sm
  emu $tag-02-bench 300 "$@" -- $M/02_allreduce_bench -b 8 -e 64M -f 8
  emu $tag-03 120 "$@" -- $M/03_alltoallv_sm
  emu $tag-03-bench 300 "$@" -- $M/03_alltoallv_bench -b 1K -e 64M -f 8
  emu $tag-04 120 "$@" -- $M/04_vmm_raw
  emu $tag-05-simple 300 "$@" -- $M/05_device_lsa
  emu $tag-05-fast 300 "$@" -- $M/05b_lsa_fast
  emu $tag-05-bench 300 "$@" -- $M/05_allreduce_bench --kernels nccl,simple,fast -b 8 -e 64M -f 8
  # Lesson 06 and its benchmark, where built (issue 25 asks the same of them as of 05).
  [ -x $M/06_symm_primitive ] && emu $tag-06 300 "$@" -- $M/06_symm_primitive
  [ -x $M/06_symm_bench ] && emu $tag-06-bench 300 "$@" -- $M/06_symm_bench
  # What NCCL saw: the host ids, the transport between the nodes, the kernel.
  emu $tag-01-nccl-log 120 "$@" NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ENV,NET,TUNING -- $M/01_allreduce_ub
  grep -aE "NCCL_HOSTID|via NET|via P2P|nNodes|Symmetric|Algo" "$L/$tag-01-nccl-log.log" | sort | uniq -c | head -20 \
    | sed 's/^/      /' >> "$L/index.txt"
  emu $tag-02-nccl-log 120 "$@" NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,TUNING -- $M/02_allreduce_sm
  grep -aE "Symmetric|Algo|symmetric" "$L/$tag-02-nccl-log.log" | sort | uniq -c | head -10 | sed 's/^/      /' >> "$L/index.txt"
}

{ nvidia-smi -L; nvidia-smi topo -m; date -u; ls -l "$SITE/nvidia/nccl/lib" 2>&1; } > "$L/recon-multinode.log" 2>&1

# --- NCCL 2.28.3, the system's (nvcc route for 05) ---
every_program nccl-2.28.3 LD_LIBRARY_PATH= XDG_CACHE_HOME=$MN/cache

# --- NCCL 2.28.9, the PyTorch venv's wheel ($W, linked as /tmp/wheel/libnccl.so by
#     gpu-run-lib.sh): from 2.28.7 symmetric support has no node condition, so
#     ncclDevCommCreate may succeed across nodes with an LSA team of one node: the
#     case lesson 05's LSA team check is for ---
if [ -f "$W/lib/libnccl.so.2" ]; then
  every_program nccl-2.28.9 LD_LIBRARY_PATH=/tmp/wheel NCCL_HOME=$W XDG_CACHE_HOME=$MN/cache
else
  echo "no NCCL 2.28.9 wheel at $W: its runs were skipped" | tee -a "$L/index.txt"
fi

# --- NCCL 2.32.3, staged (auto route for 05: jit where NVRTC and nvJitLink are staged) ---
if [ -f "$SITE/nvidia/nccl/lib/libnccl.so.2" ]; then
  R=(LD_LIBRARY_PATH="$SITE/nvidia/nccl/lib" NCCL_HOME="$SITE/nvidia/nccl" XDG_CACHE_HOME=$MN/cache)
  if [ ! -f "$SITE/nvidia/cu13/lib/libnvrtc.so.13" ]; then
    VENV_NVRTC=$(ls "$VENV"/nvidia/*/lib/libnvrtc.so.1[23] 2>/dev/null | head -1)
    [ -n "$VENV_NVRTC" ] && R+=(NVRTC="$VENV_NVRTC")
  fi
  every_program nccl-2.32.3 "${R[@]}"
else
  echo "NCCL 2.32.3 not staged in $SITE: its half was not run (see the staging above)" | tee -a "$L/index.txt"
fi

# --- one node, the same binaries, for contrast (05 must verify there) ---
run one-node-05-fast 300 mpirun -np $RANKS $M/05b_lsa_fast; key one-node-05-fast

# --- the emulated GPU tests of the MPI build (GPU_TEST_RANKS: the ranks above) ---
if [ -x .gpu/run-tests-mpi ]; then
  run suite-mpi-emulated 600 env GPU_TEST_RANKS=$RANKS .gpu/run-tests-mpi -E 'binary(emulated_nodes)'
  grep -aE "PASS|FAIL|Summary" "$L/suite-mpi-emulated.log" | tail -15 | sed 's/^/      /' >> "$L/index.txt"
fi
# Never exit 1 across nodes: list any step that did.
grep -l "^exit 1$" "$L"/*.log 2>/dev/null | sed 's/^/EXIT 1 (a defect here): /' | tee -a "$L/index.txt"
echo done >> "$L/index.txt"
tar -czf "$OUT/$CALL.tgz" -C "$OUT" "$CALL"
