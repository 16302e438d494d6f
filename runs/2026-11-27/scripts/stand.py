#!/usr/bin/env python3
"""Where issue 32's targets stand, read from one call's logs (PART=final
STAND=1, or PART=stand): the stand-*.json reports of one-gpu.sh's stand(),
each size read by its median over a configuration's runs (stand-small-f32-n2,
stand-small-f32-n2-2, ... are one configuration's runs 1, 2, ...), the floor
notes of the big runs' logs, the default sweeps' wall time, and the stress
logs' wrong elements.

    scripts/stand.py runs/2026-11-28/call377

Prints each target, what was measured and whether it holds. It judges nothing
a report does not hold: a configuration that did not run is said to be
missing, and its target missed. It exits 1 if the call has no stand report,
or a big run's log has no floor notes.
"""
import datetime, glob, json, os, re, statistics, sys

KIB = 1024
SMALL = (32 * KIB, 256 * KIB)  # the 2-rank target's sizes, and the 1-rank 8 us one's
FUSED = ("fused-nccl", "triton-nccl")
NAMES = {"fused-nccl": "CUDA", "triton-nccl": "Triton"}
GRAPH = "unfused-nccl-graph-nccl"
UNFUSED = (GRAPH, "unfused05-graph-nccl", "unfused-nccl-nccl", "unfused05-nccl")


def size(b):
    return f"{b // (1 << 20)} MiB" if b >= 1 << 20 else f"{b // KIB} KiB" if b >= KIB else f"{b} B"


def load(call):
    """{configuration: [report, ...]} of every stand-*.json, in run order, and {configuration:
    [path, ...]} of the reports without ".json" (where the run's log is PATH.log)."""
    runs = {}
    for path in sorted(glob.glob(os.path.join(call, "stand-*.json"))):
        name = path[: -len(".json")]
        m = re.fullmatch(r"(.*?)(?:-(\d+))?", os.path.basename(name))
        base, run = m.group(1), int(m.group(2) or 1)  # "-n2" is ranks: no digit after "-"
        runs.setdefault(base, []).append((run, name))
    names = {k: [n for _, n in sorted(v)] for k, v in runs.items()}
    return {k: [json.load(open(f"{n}.json")) for n in v] for k, v in names.items()}, names


def times(report):
    """{series: {bytes: us}} and the wrong elements of one report."""
    t, wrong = {}, 0
    for s in report["series"]:
        for row in s["rows"]:
            t.setdefault(s["name"], {})[row["bytes"]] = row["out_of_place"]["time_us"]
            wrong += row["out_of_place"]["wrong"]
    return t, wrong


def medians(reports):
    """{series: {bytes: median us over the reports}}, and the per-run times."""
    runs = [times(r)[0] for r in reports]
    out = {}
    for s in runs[0]:
        for b in runs[0][s]:
            vals = [r[s][b] for r in runs if b in r.get(s, {})]
            out.setdefault(s, {})[b] = statistics.median(vals)
    return out, runs


def verdict(ok):
    return "**met**" if ok else "**missed**"


def main(call):
    configs, names = load(call)
    if not configs:
        sys.exit(f"error: no stand-*.json in {call}: run PART=final STAND=1 or PART=stand")
    wrong = sum(times(r)[1] for reps in configs.values() for r in reps)
    lines = []

    def need(name):
        if name not in configs:
            lines.append(f"- {name}: missing (not run in this call)")
            return None
        return medians(configs[name])

    def runs_of(name):
        return len(configs.get(name, []))

    # 1 rank, at most 8 us at 32 and 256 KiB.
    ok, cells = True, []
    for d in ("f32", "bf16"):
        got = need(f"stand-small-{d}")
        if not got:
            ok = False
            continue
        med = got[0]
        for s in FUSED:
            for b in SMALL:
                ok &= med[s][b] <= 8.0
            cells.append(f"{NAMES[s]} {d} " + " / ".join(f"{med[s][b]:.2f}" for b in SMALL))
    lines.append(f"- 1 rank, fused at most 8 us at 32 and 256 KiB (medians of "
                 f"{runs_of('stand-small-f32')} and {runs_of('stand-small-bf16')} runs): "
                 + "; ".join(cells) + f": {verdict(ok)}")

    # 1 rank, at least 85 % of the floor at 128 MiB, 70 % at 16 MiB.
    ok, cells = True, []
    for d in ("f32", "bf16"):
        got = need(f"stand-big-{d}")
        if not got:
            ok = False
            continue
        # Each run's share of its own floor (the copy rate is measured in each run), then the
        # median over the runs.
        shares = {}
        for name, report in zip(names[f"stand-big-{d}"], got[1]):
            log = f"{name}.log"
            floors = {int(m.group(2)): float(m.group(3)) for m in re.finditer(
                r"note:\s+(\S+) (\d+) B: floor ([\d.]+) us", open(log).read())}
            if not floors:
                sys.exit(f"error: no floor notes in {log}")
            for s in FUSED:
                for b in floors:
                    shares.setdefault((s, b), []).append(floors[b] / report[s][b])
        for s in FUSED:
            parts = []
            for b, least in ((16 << 20, 0.70), (128 << 20, 0.85)):
                share = statistics.median(shares[(s, b)])
                ok &= share >= least
                parts.append(f"{share:.0%}")
            cells.append(f"{NAMES[s]} {d} " + " / ".join(parts))
    lines.append("- 1 rank, of the floor's rate at 16 / 128 MiB (at least 70 / 85 %): "
                 + "; ".join(cells) + f": {verdict(ok)}")

    # Never more than 2 % slower than an unfused path, at 1 and 2 ranks: judged apart against
    # the NCCL graph (the unfused path) and against every path (lesson 05b's too).
    for ranks, names in (("1 rank", ("stand-small-f32", "stand-small-bf16", "stand-big-f32",
                                     "stand-big-bf16")),
                         ("2 ranks", ("stand-small-f32-n2", "stand-small-bf16-n2"))):
        ok_graph, ok_all, cells = True, True, []
        for name in names:
            got = need(name)
            if not got:
                ok_graph = ok_all = False
                continue
            med = got[0]
            for s in FUSED:
                for u in UNFUSED:
                    if u not in med:
                        continue
                    b, r = max(((b, med[s][b] / med[u][b]) for b in med[s]), key=lambda x: x[1])
                    ok_all &= r <= 1.02
                    ok_graph &= r <= 1.02 or u != GRAPH
                    cells.append(f"{NAMES[s]} {name.split('-')[2]} / {u.removesuffix('-nccl')} "
                                 f"at most {r:.3f} ({size(b)})")
        lines.append(f"- {ranks}, no size more than 2 % slower than unfused (medians): "
                     + "; ".join(cells) + f": against the NCCL graph {verdict(ok_graph)}, "
                     f"against every unfused path {verdict(ok_all)}")

    # 2 ranks (and 4), at most 0.7 of the NCCL graph at 32 and 256 KiB.
    for name in ("stand-small-f32-n2", "stand-small-bf16-n2", "stand-small-f32-n4"):
        got = need(name)
        if not got:
            continue
        med, runs = got
        ok, cells = True, []
        for s in FUSED:
            for b in SMALL:
                r = med[s][b] / med[GRAPH][b]
                each = [run[s][b] / run[GRAPH][b] for run in runs]
                ok &= r <= 0.7
                cells.append(f"{NAMES[s]} {size(b)} {r:.4f} (runs {min(each):.3f} to "
                             f"{max(each):.3f}; the graph {med[GRAPH][b]:.2f} us)")
        lines.append(f"- {name}, fused at most 0.7 of the NCCL graph (median of {len(runs)} "
                     "runs each; each run's ratio): " + "; ".join(cells) + f": {verdict(ok)}")

    # The default sweeps: wall time, wrong elements.
    for n in (1, 2):
        log = os.path.join(call, f"default-n{n}.log")
        if not os.path.exists(log):
            lines.append(f"- default sweep at {n} rank(s): missing")
            continue
        text = open(log).read().splitlines()
        stamps = [l for l in text if re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", l)]
        t0, t1 = (datetime.datetime.strptime(s, "%Y-%m-%dT%H:%M:%SZ") for s in stamps[:2])
        rc = text[-1]
        sweep_wrong = "?"
        path = os.path.join(call, f"default-n{n}.json")
        if os.path.exists(path):
            sweep_wrong = times(json.load(open(path)))[1]
        secs = (t1 - t0).total_seconds()
        lines.append(f"- default sweep at {n} rank(s): {secs:.0f} s, {rc}, {sweep_wrong} wrong: "
                     f"{verdict(secs <= 60 and rc == 'exit 0' and sweep_wrong == 0)}")

    # The stress mode.
    stress = sorted(glob.glob(os.path.join(call, "06-stress-*.log")))
    counts = []
    for log in stress:
        m = re.findall(r"# wrong elements in all: (\d+)", open(log).read())
        counts.append(int(m[-1]) if m else None)
    ok = bool(stress) and all(c == 0 for c in counts)
    lines.append(f"- stress mode: {len(stress)} logs, wrong elements "
                 f"{[c if c is not None else 'no total' for c in counts]}: {verdict(ok)}")
    lines.append(f"- wrong elements in every stand report: {wrong}")
    print(f"# issue 32's targets in {call}")
    print("\n".join(lines))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
