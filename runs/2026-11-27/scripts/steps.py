"""Probes 58 and 59's steps (PERF_NOTES.md, "The compute phase's 2.2 µs, step
by step" and "The 2-rank AllReduce's 6 µs, step by step"): python3 steps.py
58|59 LOGDIR prints, for each of n1-f32, n2-f32, n1-bf16, n2-bf16 and n4-f32
that has logs, per size, the mean over the probe's logs and ranks of block
0's steps in µs, at the clock rate that each print's cycles and ns give."""
import collections
import glob
import re
import sys

HEAD = r"probe{0} rank (\d) elems (\d+) dtype (\d): (\d+) launches; .*?"
TAIL = r" cycles, (\d+) ns"
PROBES = {
    "58": (r"entry to compute start (\d+), to activations staged (\d+), to fmas done (\d+), to "
           r"stores issued (\d+), to compute end (\d+), to all-reduce end (\d+), to epilogue end "
           r"(\d+); entry to epilogue end (\d+)",
           ("start", "staged", "fmas", "stores", "cend", "AR", "epi", "total")),
    "59": (r"entry to symm_all_reduce (\d+), to checks done (\d+), to staging addresses (\d+), to "
           r"grid barrier 1 (\d+), to epoch read (\d+), to own lines exchanged (\d+), to grid "
           r"barrier 2 (\d+), to epilogue end (\d+); entry to epilogue end (\d+)",
           ("compute", "checks", "staging", "gb1", "epoch", "lines", "gb2", "epi", "total")),
}

probe, logs = sys.argv[1:3]
body, steps = PROBES[probe]
pattern = re.compile(HEAD.format(probe) + body + TAIL)
for prefix in ("n1-f32", "n2-f32", "n1-bf16", "n2-bf16", "n4-f32"):
    by_size = collections.defaultdict(list)
    for f in sorted(glob.glob(f"{logs}/{prefix}-p{probe}*.log")):
        for line in open(f):
            m = pattern.search(line)
            if m:
                v = list(map(int, m.groups()))
                by_size[v[1]].append(v)
    if not by_size:
        continue
    print(prefix)
    for elems in sorted(by_size):
        rows = by_size[elems]
        cycles, ns = 4 + len(steps) - 1, 4 + len(steps)
        ghz = sum(r[cycles] for r in rows) / sum(r[ns] for r in rows)
        us = [sum(r[i] for r in rows) / len(rows) / ghz / 1000 for i in range(4, 4 + len(steps))]
        print(f"  {elems:6d} n={len(rows)} GHz {ghz:.3f}  "
              + " ".join(f"{s} {u:.2f}" for s, u in zip(steps, us)))
