#!/usr/bin/env bash
# Issue 32, "The benchmarks finish": every *_bench binary's default sweep
# (8 B to 512 MiB, -n 20 -w 5 --trials 5) at 1 and at 2 ranks on one GPU,
# each timed against the 60 s target, every timed operation checked on the
# GPU (exit 0 and #wrong 0 in every row); then the stress modes at 2 ranks
# (0 wrong). The estimates to compare with are in bench/src/lib.rs and
# 06_symm_bench's docs ("How long a default sweep takes").
#
# Needs the release binaries in .gpu/bin and NCCL 2.30+ (ranks sharing a GPU,
# NCCL_MULTI_RANK_GPU_ENABLE): NCCL_HOME set as one-gpu.sh sets it for 2.32.3.
# The kernels' builds are warmed first, so the timed runs time the sweep.
#   CALL=callNN NCCL_HOME=/tmp/n/nccl-2.32.3 bash runs/2026-11-25/scripts/bench-defaults-1gpu.sh
# BIN=dir takes the binaries from dir (one-gpu.sh's /tmp/g/threads/bin);
# RANKS="1" or "2" runs the sweeps at those rank counts only (default "1 2");
# NO_STRESS=1 leaves out the stress modes and the bad path, so that the
# steps can be split over calls of at most 600 s.
set -u
. runs/2026-11-25/scripts/gpu-run-lib.sh
B=${BIN:-$B}
export XDG_CACHE_HOME=/tmp/cache NCCL_MULTI_RANK_GPU_ENABLE=1 NCCL_HOME=${NCCL_HOME:?set NCCL_HOME to NCCL 2.30+}
timed() { # NAME LIMIT CMD...: run, and add NAME's wall time to times.txt
  local name=$1 start=$SECONDS
  run "$@"
  printf '%-28s %4d s  %s\n' "$name" $((SECONDS - start)) "$(tail -1 "$L/$name.log")" >> "$L/times.txt"
}
run warm-05 600 env NTHREADS=1 $B/05_allreduce_bench -b 1K -e 1K -n 1 -w 0 --trials 1
run warm-06 600 env NTHREADS=1 $B/06_symm_bench -b 1K -e 1K -n 1 -w 0 --trials 1
for n in ${RANKS:-1 2}; do
  for b in 02_allreduce_bench 03_alltoallv_bench 05_allreduce_bench 06_symm_bench; do
    timed $b-$n 180 env NTHREADS=$n $B/$b --json $L/$b-$n.json --svg $L/$b-$n.svg
  done
  timed 06_symm_bench-bf16-$n 180 env NTHREADS=$n $B/06_symm_bench --dtype bf16 \
    --contenders fused,unfused-nccl,symm-layer,symm,fast05,nccl --json $L/06_symm_bench-bf16-$n.json
done
# The checks find races: back-to-back operations, ranks skewed on purpose.
[ -z "${NO_STRESS:-}" ] && {
timed stress-05 300 env NTHREADS=2 $B/05_allreduce_bench --kernels nccl,simple,fast --stress 2000 -b 4K -e 4M -f 32
timed stress-06 300 env NTHREADS=2 $B/06_symm_bench --stress 2000 -b 4K -e 4M -f 32
timed stress-06-one-region 300 env NTHREADS=2 $B/06_symm_bench --stress 2000 --one-region -b 4K -e 4M -f 32
# A bad report path is refused at once (exit 2), before any GPU work.
timed bad-json 30 env NTHREADS=2 $B/06_symm_bench --json /nonexistent/dir/x.json
}
grep -h "wrong elements\|#wrong\|note:" "$L"/*.log | sort | uniq -c | sort -rn | head -20 > "$L/checks.txt"
cat "$L/times.txt"
tar czf "$OUT/$CALL.tgz" -C "$OUT" "$CALL" && rm -rf "$L"
