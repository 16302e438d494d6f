"""Probe 54's timeline (PERF_NOTES.md, "Where a 2-rank fused operation's time
goes, inside the kernel"): python3 phases54.py LOG... prints, per size, the
mean over the logs and ranks of each phase boundary that p54's fused kernel
printed (µs from the first block's entry), the gap before the next launch,
and the phases' lengths. Call 344's table is from its n1-p54-*, n2-p54-*,
n2-bf16-p54 and n4-p54 logs."""
import collections
import re
import sys

pat=re.compile(r'probe54 rank (\d+) elems (\d+) dtype (\d+): (\d+) steady launches \(entered under 20 us after the last one.s work end; (\d+) after a pause left out\)\. Means, ns from the first block.s entry: block 0 entry (\d+), last entry (\d+), compute end (\d+), grid sync 1 \(block 0\) (\d+), exchange end (\d+), grid sync 2 \(block 0\) (\d+), work end (\d+) \(min (\d+)\); gap from the last launch.s work end: mean (\d+), min (\d+)')
acc = collections.defaultdict(list)
for f in sys.argv[1:]:
    for line in open(f):
        m=pat.search(line)
        if m:
            v=list(map(int,m.groups()))
            acc[v[1]].append(v)
print('elems  n  | last-entry cend g1 x g2 end | end-min gap gap-min  (us; means over %d files)'%len(sys.argv[1:]))
for e in sorted(acc):
    rows=acc[e]; k=len(rows)
    m=lambda i: sum(r[i] for r in rows)/k/1000
    print('%6d %2d | %5.2f %5.2f %5.2f %5.2f %5.2f %5.2f | %5.2f %5.2f %5.2f | cend->g1 %.2f g1->x %.2f x->g2 %.2f g2->end %.2f span+gap %.2f'%(e,k,m(6),m(7),m(8),m(9),m(10),m(11),m(12),m(13),m(14),m(8)-m(7),m(9)-m(8),m(10)-m(9),m(11)-m(10),m(11)+m(13)))
