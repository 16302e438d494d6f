#!/usr/bin/env bash
# Issue 21's fair comparison on 2 GPUs (kind nvidia-h200-x2; not lent on
# 2026-11-25, so not run yet): NCCL's symmetric kernels with NCCL_SYM_CTAS
# swept, the best value found, then lesson 05's fast kernel against NCCL's
# defaults and NCCL tuned, in one call.
#
# NCCL reads NCCL_SYM_CTAS once per process, so every value is a run of its
# own (05_allreduce_bench --kernels nccl-tuned --sym-ctas N), and `nccl`
# (defaults) and `nccl-tuned` are two runs of one call, alternated twice.
#
# Carry: .gpu (runs/2026-11-22/scripts/stage.sh: .gpu/bin, .gpu/mpi).
# Run from the project root with CALL set: CALL=call16 runs/2026-11-25/scripts/nccl-tuned-sweep.sh
# Logs, JSON and best-sym-ctas.txt in $OUT/$CALL (index.txt: each step's exit code).
set -u
CALL=${CALL:?name the call, e.g. CALL=call16}
. runs/2026-11-25/scripts/gpu-run-lib.sh
unset NCCL_SYM_CTAS
RANKS=${RANKS:-2}
S="-b 8 -e 512M -f 4"
# 1. The sweep: one run per NCCL_SYM_CTAS (NCCL 2.28 caps it at 64).
for n in 4 8 16 24 32 48 64; do
  run sym-ctas-$n 240 env NTHREADS=$RANKS $B/05_allreduce_bench --kernels nccl-tuned --sym-ctas $n $S \
    --json $L/sym-ctas-$n.json
done
# 2. The best value: the highest busbw summed over sizes from 2 MB up (where
#    the block count matters), and the best value at each size for reference.
python3 - "$L" > "$L/best-sym-ctas.txt" <<'PY'
import glob, json, os, sys
L = sys.argv[1]
per = {}
for path in glob.glob(os.path.join(L, "sym-ctas-*.json")):
    n = int(path.rsplit("-", 1)[1].removesuffix(".json"))
    rows = json.load(open(path))["series"][0]["rows"]
    per[n] = {r["bytes"]: r["out_of_place"]["busbw"] for r in rows}
if not per:
    print("BEST none"); sys.exit(0)
score = {n: sum(v for b, v in rows.items() if b >= 2 << 20) for n, rows in per.items()}
best = max(score, key=score.get)
print(f"BEST {best}")
for size in sorted(next(iter(per.values()))):
    top = max(per, key=lambda n: per[n].get(size, 0))
    print(f"{size:>12} B: best NCCL_SYM_CTAS={top} ({per[top][size]:.1f} GB/s busbw); " +
          " ".join(f"{n}:{per[n].get(size, 0):.1f}" for n in sorted(per)))
PY
BEST=$(awk '/^BEST/ {print $2}' "$L/best-sym-ctas.txt")
echo "best NCCL_SYM_CTAS: $BEST" | tee -a "$L/index.txt"
# 3. Side by side, alternated twice: defaults + fast, then tuned.
if [ -n "$BEST" ] && [ "$BEST" != none ]; then
  for k in 1 2; do
    run defaults-$k 300 env NTHREADS=$RANKS $B/05_allreduce_bench --kernels nccl,fast $S --json $L/defaults-$k.json
    run tuned-$k 300 env NTHREADS=$RANKS $B/05_allreduce_bench --kernels nccl-tuned --sym-ctas $BEST $S --json $L/tuned-$k.json
  done
  python3 runs/2026-11-25/scripts/compare.py $L/defaults-1.json $L/tuned-1.json $L/defaults-2.json $L/tuned-2.json \
    > $L/defaults-vs-tuned.txt 2>&1
  # The same under mpirun, once.
  run tuned-mpi 300 mpirun -np $RANKS $M/05_allreduce_bench --kernels nccl-tuned --sym-ctas $BEST $S --json $L/tuned-mpi.json
  # nccl and nccl-tuned never share a run: this must exit 2.
  run refused-both 60 env NTHREADS=$RANKS $B/05_allreduce_bench --kernels nccl,nccl-tuned --sym-ctas $BEST
fi
echo done >> "$L/index.txt"
tar -czf "$OUT/$CALL.tgz" -C "$OUT" "$CALL"
