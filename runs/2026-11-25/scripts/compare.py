#!/usr/bin/env python3
"""Lays benchmark reports (--json) side by side: out-of-place time per series
and size, each report's column, and every report's ratio to the first.

    scripts/compare.py before-1.json after-1.json before-2.json after-2.json
"""
import json, sys

reports = [json.load(open(path)) for path in sys.argv[1:]]
names = [path.rsplit("/", 1)[-1].removesuffix(".json") for path in sys.argv[1:]]
print(f"# out-of-place time (us) per operation; ratio = each report / {names[0]}")
print(f"{'series':>8} {'bytes':>10} " + " ".join(f"{n:>12}" for n in names)
      + " " + " ".join(f"{'/' + n:>12}" for n in names[1:]))
rows = {}
for i, report in enumerate(reports):
    for series in report["series"]:
        for row in series["rows"]:
            rows.setdefault((series["name"], row["bytes"]), [None] * len(reports))[i] = row["out_of_place"]["time_us"]
for (name, size), times in rows.items():
    cells = " ".join(f"{t:12.2f}" if t else f"{'-':>12}" for t in times)
    ratios = " ".join(f"{t / times[0]:12.3f}" if t and times[0] else f"{'-':>12}" for t in times[1:])
    print(f"{name:>8} {size:>10} {cells} {ratios}")
