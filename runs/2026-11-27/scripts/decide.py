"""The keep rules of changes 18 to 28 (PERF_NOTES.md), from one perf18,
perf21, perf24 or perf25 call's JSON: python3 decide.py LOGDIR PART. perf18: c17 is
HEAD 164dc68's build, c18 adds changes 18 (Triton) and 19 (CUDA, bfloat16),
c20 adds change 20 (CUDA) to c18. perf21: c21 adds changes 21 (CUDA) and
23 (Triton) to c17, c22 adds change 22 (CUDA) to c21. perf24: c24 adds
change 24 (Triton) to c21. perf25: c23 is HEAD f85a061's build, c25 adds
changes 25 (CUDA) and 26 (Triton), c27 adds 27 (Triton) to c25, c28 adds 28
(CUDA) to c27; probe29, perf30 to perf34, probe35, perf36 to perf41, perf45, confirm45, perf49, perf49b, perf55, perf56, perf57, perf57c, perf57d and confirm57d in their functions. Prints each ratio
and rule, then "kept: changes ..." on its last line."""
import json
import os
import statistics
import sys

L, PART = sys.argv[1:3]
MIB = 1 << 20


def times(f, series):
    d = json.load(open(f"{L}/{f}.json"))
    return {r["bytes"]: r["out_of_place"]["time_us"] for s in d["series"] if s["name"] == series
            for r in s["rows"]}


def wrong(v):
    n = 0
    for f in os.listdir(L):
        if f.endswith(".json") and v in f[:-5].split("-"):  # c32 is not c32n
            d = json.load(open(f"{L}/{f}"))
            n += sum((r.get(p) or {}).get("wrong") or 0 for s in d["series"] for r in s["rows"]
                     for p in ("out_of_place", "in_place"))
    return n


def rule(change, series, new, old, big_max, bf16_max, f32_everywhere=False):
    ok = True

    def check(what, r, limit):
        nonlocal ok
        good = r <= limit
        ok = ok and good
        print(f"change {change}, {series}, {what}: {r:.3f} (at most {limit}){'' if good else ' FAILS'}")

    for i in (1, 2):
        b0, b1 = times(f"big-{old}-{i}", series), times(f"big-{new}-{i}", series)
        check(f"float32 128 MiB, run {i}", b1[128 * MIB] / b0[128 * MIB], big_max)
        check(f"float32 16 MiB, run {i}", b1[16 * MIB] / b0[16 * MIB], 1.0 if not f32_everywhere else 1.02)
    s0 = [times(f"small-{old}-{i}", series) for i in (1, 2)]
    s1 = [times(f"small-{new}-{i}", series) for i in (1, 2)]
    for size in sorted(s0[0]):
        check(f"float32 {size} B, mean of two runs", sum(s[size] for s in s1) / sum(s[size] for s in s0), 1.02)
    g0, g1 = times(f"big-bf16-{old}", series), times(f"big-bf16-{new}", series)
    check("bfloat16 128 MiB", g1[128 * MIB] / g0[128 * MIB], bf16_max)
    check("bfloat16 16 MiB", g1[16 * MIB] / g0[16 * MIB], 1.0 if bf16_max < 1 else 1.02)
    h0, h1 = times(f"small-bf16-{old}", series), times(f"small-bf16-{new}", series)
    for size in sorted(h0):
        check(f"bfloat16 {size} B, one run", h1[size] / h0[size], 1.03)
    return ok


# change, series, new build, its baseline, most at 128 MiB float32, most at
# 128 MiB bfloat16, float32 16 MiB within 2 % (else not slower)
PLANS = {
    "perf18": [(18, "triton-nccl", "c18", "c17", 0.97, 1.02, False),
               (19, "fused-nccl", "c18", "c17", 1.02, 0.95, True),
               (20, "fused-nccl", "c20", "c18", 0.98, 1.02, False)],
    "perf21": [(21, "fused-nccl", "c21", "c17", 0.98, 1.02, False),
               (23, "triton-nccl", "c21", "c17", 0.97, 1.02, False),
               (22, "fused-nccl", "c22", "c21", 0.98, 1.02, False)],
    "perf24": [(24, "triton-nccl", "c24", "c21", 0.98, 1.02, False)],
    "perf25": [(25, "fused-nccl", "c25", "c23", 1.00, 0.95, True),
               (26, "triton-nccl", "c25", "c23", 0.99, 0.95, False),
               (27, "triton-nccl", "c27", "c25", 1.02, 0.98, True),
               (28, "fused-nccl", "c28", "c27", 1.02, 0.98, True)],
}


def mean(prefix, v, series, runs):
    """Each size's time in `series`, the mean over runs PREFIX-V-1, -2, ..."""
    ts = [times(f"{prefix}-{v}-{i}", series) for i in runs]
    return {b: sum(t[b] for t in ts) / len(ts) for b in ts[0]}


def probe29():
    """Change 29 (c29 against c27, bfloat16 only: float32's code is the same)
    and the probe of change 26's cost at 8 B (cu: c27's unaligned path alone)."""
    ok = True
    m27, m29 = (mean("small-bf16", v, "triton-nccl", (1, 2, 3)) for v in ("c27", "c29"))
    for size in sorted(m27):
        limit = 0.98 if size == 8 else 1.02
        r = m29[size] / m27[size]
        ok = ok and r <= limit
        print(f"change 29, bfloat16 {size} B, mean of three runs: {r:.3f} (at most {limit})"
              f"{'' if r <= limit else ' FAILS'}")
    b27, b29 = (mean("big-bf16", v, "triton-nccl", (1, 2)) for v in ("c27", "c29"))
    for size in sorted(b27):
        r = b29[size] / b27[size]
        ok = ok and r <= 1.01
        print(f"change 29, bfloat16 {size} B, mean of two runs: {r:.3f} (at most 1.01)"
              f"{'' if r <= 1.01 else ' FAILS'}")
    w = wrong("c29")
    print("wrong elements, c29:", w)
    for dtype, prefix in (("float32", "small"), ("bfloat16", "small-bf16")):
        for series in ("triton-nccl", "fused-nccl"):
            base = mean(prefix, "c23", series, (1, 2, 3))
            for v in ("c27", "cu", "c29"):
                m = mean(prefix, v, series, (1, 2, 3))
                print(f"probe, {series}, {dtype}, {v} / c23 (means of three runs):",
                      " ".join(f"{b} B {m[b] / base[b]:.3f}" for b in sorted(base)))
    print("kept: changes", "29" if ok and w == 0 else "none")


def perf30():
    """Change 30 (c30 against c29, the Triton kernel), means of two runs."""
    def triton(prefix, v):
        return mean(prefix, v, "triton-nccl", (1, 2))

    ok = True

    def check(what, r, limit):
        nonlocal ok
        ok = ok and r <= limit
        print(f"change 30, {what}: {r:.3f} (at most {limit}){'' if r <= limit else ' FAILS'}")

    b29, b30 = triton("big-bf16", "c29"), triton("big-bf16", "c30")
    check("bfloat16 128 MiB", b30[128 * MIB] / b29[128 * MIB], 0.95)
    check("bfloat16 16 MiB", b30[16 * MIB] / b29[16 * MIB], 1.0)
    for prefix, limit in (("small-bf16", 1.03), ("small-f32", 1.02), ("big-f32", 1.02)):
        m29, m30 = triton(prefix, "c29"), triton(prefix, "c30")
        for size in sorted(m29):
            check(f"{prefix} {size} B", m30[size] / m29[size], limit)
    w = wrong("c30")
    print("wrong elements, c30:", w)
    print("kept: changes", "30" if ok and w == 0 else "none")


def perf31():
    """Changes 31 (c31 against c30), 32n and 32 (c32n and c32 against c31):
    the fused CUDA kernel, means of two runs; the Triton kernel (unchanged)
    printed as the control."""
    order = ("big-bf16", "big-f32", "small-bf16", "small-f32")
    control("c30", ("c31", "c32", "c32n"), order)

    def limits(bf16_128, big_max, small_max, bf16_16=None):
        def limit(prefix, size):
            if prefix == "big-bf16" and size == 128 * MIB:
                return bf16_128
            if prefix == "big-bf16" and bf16_16 is not None:
                return bf16_16
            return small_max if prefix.startswith("small") else big_max
        return limit

    kept = []
    if judge("31", "c31", "c30", limits(0.98, 1.02, 1.02, bf16_16=1.0), order):
        kept.append("31")
        if judge("32n", "c32n", "c31", limits(0.97, 1.0, 1.02), order):
            kept.append("32n")
        elif judge("32", "c32", "c31", limits(0.97, 1.0, 1.02), order):
            kept.append("32")
    print("kept: changes", " ".join(kept) if kept else "none")


PREFIXES = ("small-f32", "small-bf16", "big-f32", "big-bf16")


def judge(change, new, old, limits, prefixes=PREFIXES, series="fused-nccl"):
    """A fused kernel (SERIES: the CUDA one unless it says otherwise), NEW against
    OLD, means of two runs; LIMITS(prefix, size) is the most each may take. True
    if every size holds and NEW had 0 wrong."""
    ok = True
    for prefix in prefixes:
        m0, m1 = mean(prefix, old, series, (1, 2)), mean(prefix, new, series, (1, 2))
        for size in sorted(m0):
            limit = limits(prefix, size)
            r = m1[size] / m0[size]
            ok = ok and r <= limit
            print(f"change {change}, {prefix} {size} B: {r:.3f} (at most {limit})"
                  f"{'' if r <= limit else ' FAILS'}")
    w = wrong(new)
    print(f"wrong elements, {new}: {w}")
    return ok and w == 0


def control(base, variants, prefixes=PREFIXES, series="triton-nccl"):
    """The kernel the builds did not change (the Triton one unless SERIES says
    otherwise): each build against BASE."""
    for prefix in prefixes:
        m0 = mean(prefix, base, series, (1, 2))
        for v in variants:
            m = mean(prefix, v, series, (1, 2))
            print(f"control, {series}, {prefix}, {v} / {base}:",
                  " ".join(f"{b} B {m[b] / m0[b]:.3f}" for b in sorted(m0)))


def perf33():
    """Change 33 and 33s (c33 and c33s against c31); 33s judged only if 33 fails."""
    control("c31", ("c33", "c33s"))

    def limits(prefix, size):
        return 0.98 if size in (32768, 262144) else 1.01

    kept = "33" if judge("33", "c33", "c31", limits) else \
        "33s" if judge("33s", "c33s", "c31", limits) else "none"
    print("kept: changes", kept)


def perf34():
    """Change 34 (c34 against c31), then 34p (c34p against c34) if 34 is kept."""
    control("c31", ("c34", "c34p"))
    kept = []
    if judge("34", "c34", "c31", lambda prefix, size: 0.97 if size in (32768, 262144) else 1.01):
        kept.append("34")
        if judge("34p", "c34p", "c34", lambda prefix, size: 0.99 if size in (32768, 262144) else 1.01):
            kept.append("34p")
    print("kept: changes", " ".join(kept) if kept else "none")


def probe35():
    """Change 35 (c35 against c31), and the probe: c35f (float32 runs) and c35b
    (bfloat16 runs), c35 with the fused kernel's dtype compiled in, against c35."""
    control("c31", ("c35",))
    kept = "35" if judge("35", "c35", "c31", lambda prefix, size: 1.0 if size <= 262144 else 1.01) \
        else "none"
    for v, dtype in (("c35f", "f32"), ("c35b", "bf16")):
        for prefix in (f"small-{dtype}", f"big-{dtype}"):
            for series in ("fused-nccl", "triton-nccl"):
                m0, m1 = mean(prefix, "c35", series, (1, 2)), mean(prefix, v, series, (1, 2))
                print(f"probe, {series}, {prefix}, {v} - c35 (us, means of two runs):",
                      " ".join(f"{b} B {m1[b] - m0[b]:+.2f}" for b in sorted(m0)))
    print("kept: changes", kept)


def perf38():
    """Change 38 (c38 against c35); 38p against c38 if 38 is kept, else against c35."""
    if small_gain("38", "c38", "c35", 0.98, verdict=False):
        kept = "38 38p" if small_gain("38p", "c38p", "c38", 0.99, verdict=False) else "38"
    else:
        kept = "38p" if small_gain("38p", "c38p", "c35", 0.98, verdict=False) else "none"
    print("kept: changes", kept)


def triton_tiles(change, small_max):
    """Changes 39 and 40 (c39, c40 against c35): the Triton kernel, means of two
    runs; the CUDA kernel (unchanged) printed as the control."""
    new = "c" + change
    control("c35", (new,), series="fused-nccl")

    def limit(prefix, size):
        if prefix == "big-bf16" and size == 128 * MIB:
            return 0.96
        return small_max if prefix.startswith("small") else 1.0

    kept = judge(change, new, "c35", limit, series="triton-nccl")
    print("kept: changes", change if kept else "none")


def perf41():
    """Change 41 (c41 against c40, the CUDA kernel); 42 (c42 against c41, the
    CUDA kernel), or 41 and 42 together against c40 if 41 is not kept; 43 (c42
    against c41, the Triton kernel), with c41 against c40 as its control."""
    control("c40", ("c41",))

    def limits(bf16_128):
        def limit(prefix, size):
            if prefix == "big-bf16" and size == 128 * MIB:
                return bf16_128
            return 1.01 if prefix.startswith("small") else 1.0
        return limit

    kept = []
    if judge("41", "c41", "c40", limits(0.97)):
        kept.append("41")
        if judge("42", "c42", "c41", limits(0.98)):
            kept.append("42")
    elif judge("41+42", "c42", "c40", limits(0.97)):
        kept += ["41", "42"]
    control("c41", ("c42",), series="fused-nccl")

    def triton(prefix, size):
        if prefix == "big-bf16" and size == 128 * MIB:
            return 0.97
        return 1.02 if prefix.startswith("small") else 1.0

    if judge("43", "c42", "c41", triton, series="triton-nccl"):
        kept.append("43")
    print("kept: changes", " ".join(kept) if kept else "none")


def small_gain(change, new, old, most, verdict=True):
    """NEW against OLD (means of two runs): no small size slower, 16 and 128 MiB
    at most 1.01, 0 wrong, and the four ratios at 32 and 256 KiB in both types
    at most MOST on average. Change 36 asked 0.99, change 37 0.98."""
    control(old, (new,))
    ok = judge(change, new, old, lambda prefix, size: 1.0 if size <= 262144 else 1.01)
    ratios = [mean(p, new, "fused-nccl", (1, 2))[b] / mean(p, old, "fused-nccl", (1, 2))[b]
              for p in ("small-f32", "small-bf16") for b in (32768, 262144)]
    r = sum(ratios) / len(ratios)
    print(f"change {change}, 32 and 256 KiB, both types, mean ratio: {r:.3f} (at most {most})"
          f"{'' if r <= most else ' FAILS'}")
    if verdict:
        print("kept: changes", change if ok and r <= most else "none")
    return ok and r <= most


# The series whose 1-rank times change 45 must not worsen (the path it changes is 2-rank only).
GUARDED_45 = ("fused-nccl", "triton-nccl", "symm-layer-nccl", "unfused-nccl-graph-nccl")


def largest_ratio(prefix, new, old, series, runs):
    """NEW's mean over RUNS against OLD's, size by size: the largest ratio and its size."""
    m0, m1 = mean(prefix, old, series, runs), mean(prefix, new, series, runs)
    worst = max(m0, key=lambda b: m1[b] / m0[b])
    return m1[worst] / m0[worst], worst


def perf45():
    """Change 45 (c45 against p45, HEAD with probe 45's prints): at 2 ranks, in
    both pairs of runs, the mean over 8 B to 256 KiB at least 0.3 us less for
    fused CUDA and for Triton; at 1 rank no size above 1.02 of p45 (means of
    two runs), every series; 0 wrong in every timed run and in the stress logs."""
    ok = True
    for series in ("fused-nccl", "triton-nccl"):
        for i in (1, 2):
            t0, t1 = times(f"n2-f32-p45-{i}", series), times(f"n2-f32-c45-{i}", series)
            d = sum(t1[b] - t0[b] for b in t0) / len(t0)
            good = d <= -0.3
            ok = ok and good
            print(f"change 45, {series}, 2 ranks, run {i}: mean difference {d:+.2f} us (at most -0.3)"
                  f"{'' if good else ' FAILS'}")
    for series in GUARDED_45:
        r, _ = largest_ratio("n1-f32", "c45", "p45", series, (1, 2))
        good = r <= 1.02
        ok = ok and good
        print(f"change 45, {series}, 1 rank, largest ratio: {r:.3f} (at most 1.02){'' if good else ' FAILS'}")
    w = wrong("c45") + wrong("p45")
    stress = [f for f in os.listdir(L) if f.startswith("stress-") and f.endswith(".log")]
    bad = [f for f in stress if "# wrong elements in all: 0" not in open(f"{L}/{f}").read()]
    print(f"wrong elements in timed runs: {w}; stress logs: {len(stress)}, not 0 wrong: {bad}")
    ok = ok and w == 0 and not bad and len(stress) > 0
    print("kept: changes", "45" if ok else "none")


def confirm45():
    """Change 45's guard again (call 310 failed it at symm-layer, 1 rank): c45
    against p45 at 1 rank, three runs each in turn; kept if for every series
    and size c45's sum over its runs is at most 1.02 of p45's."""
    ok = True
    for series in GUARDED_45:
        r, worst = largest_ratio("n1", "c45", "p45", series, (1, 2, 3))
        good = r <= 1.02
        ok = ok and good
        print(f"change 45, {series}, 1 rank, three runs: largest ratio {r:.3f} at {worst} B"
              f" (at most 1.02){'' if good else ' FAILS'}")
    w = wrong("c45") + wrong("p45")
    print(f"wrong elements: {w}")
    print("kept: changes", "45" if ok and w == 0 else "none")


def one_rank_guard(change, new, guarded):
    """At 1 rank, each GUARDED series of NEW at most 1.03 of c48 at every size
    (means of three runs); prints each largest ratio."""
    ok = True
    for series in guarded:
        r, worst = largest_ratio("n1-f32", new, "c48", series, (1, 2, 3))
        ok = ok and r <= 1.03
        print(f"change {change}, {series}, 1 rank, largest ratio {r:.3f} at {worst} B (at most 1.03)"
              f"{'' if r <= 1.03 else ' FAILS'}")
    return ok


def all_right(new, cases=22, others=("c48",)):
    """The last checks of changes 49, 49b and 55: 0 wrong in every timed run of
    NEW and OTHERS, four stress logs each 0 wrong, and NEW's --bad-input CASES
    of CASES."""
    w = wrong(new) + sum(wrong(o) for o in others)
    stress = [f for f in os.listdir(L) if f.startswith("stress-") and f.endswith(".log")]
    bad = [f for f in stress if "# wrong elements in all: 0" not in open(f"{L}/{f}").read()]
    print(f"wrong elements in timed runs: {w}; stress logs: {len(stress)}, not 0 wrong: {bad}")
    log = f"{L}/bad-input-{new}-n2.log"
    codes = os.path.exists(log) and f"bad input: {cases} of {cases} cases" in open(log).read()
    print(f"bad input {cases} of {cases}: {codes}")
    return w == 0 and not bad and len(stress) == 4 and codes


def perf49():
    """Change 49 (c49 against c48, HEAD 0269502's build), PERF_NOTES.md's rule:
    at 2 ranks in float32 (means of three runs) fused CUDA and Triton at least
    0.3 us less than c48 at every size from 8 B to 32 KiB and at most 1.02 of
    it at 256 KiB; bfloat16 at 2 ranks (two runs) no size above 1.05; at 1
    rank no size of the guarded series above 1.03 (three runs); 0 wrong in
    the timed runs and the stress logs; --bad-input 22 of 22."""
    ok = True
    for series in ("fused-nccl", "triton-nccl"):
        m0, m1 = mean("n2-f32", "c48", series, (1, 2, 3)), mean("n2-f32", "c49", series, (1, 2, 3))
        for b in sorted(m0):
            d, r = m1[b] - m0[b], m1[b] / m0[b]
            good = d <= -0.3 if b <= 32768 else r <= 1.02
            ok = ok and good
            print(f"change 49, {series}, 2 ranks, {b} B: {m0[b]:.2f} -> {m1[b]:.2f} us "
                  f"({d:+.2f}, ratio {r:.3f}; {'at most -0.3 us' if b <= 32768 else 'at most 1.02'})"
                  f"{'' if good else ' FAILS'}")
        r, worst = largest_ratio("n2-bf16", "c49", "c48", series, (1, 2))
        good = r <= 1.05
        ok = ok and good
        print(f"change 49, {series}, bfloat16, 2 ranks, largest ratio {r:.3f} at {worst} B"
              f" (at most 1.05){'' if good else ' FAILS'}")
    ok = one_rank_guard("49", "c49", GUARDED_45) and ok
    right = all_right("c49")
    print("kept: changes", "49" if ok and right else "none")


def perf49b():
    """Change 49b (c49b against c48), PERF_NOTES.md's rule: at 2 ranks in
    float32 (three runs) fused CUDA and Triton at least 0.3 us less than c48
    on average over 8 B to 32 KiB, no size above 1.03; symm-layer at 2 ranks
    no size above 1.05; bfloat16 at 2 ranks (two runs) no size above 1.05; at
    1 rank fused, Triton and the NCCL graph no size above 1.03 (three runs);
    0 wrong in the timed runs and the stress logs; --bad-input 22 of 22."""
    ok = True
    for series in ("fused-nccl", "triton-nccl"):
        m0, m1 = mean("n2-f32", "c48", series, (1, 2, 3)), mean("n2-f32", "c49b", series, (1, 2, 3))
        small = [b for b in m0 if b <= 32768]
        d = sum(m1[b] - m0[b] for b in small) / len(small)
        r, worst = largest_ratio("n2-f32", "c49b", "c48", series, (1, 2, 3))
        good = d <= -0.3 and r <= 1.03
        ok = ok and good
        print(f"change 49b, {series}, 2 ranks: mean difference 8 B to 32 KiB {d:+.2f} us (at most -0.3),"
              f" largest ratio {r:.3f} at {worst} B (at most 1.03){'' if good else ' FAILS'}")
        print("  " + " ".join(f"{b}: {m0[b]:.2f} -> {m1[b]:.2f}" for b in sorted(m0)))
        r, worst = largest_ratio("n2-bf16", "c49b", "c48", series, (1, 2))
        good = r <= 1.05
        ok = ok and good
        print(f"change 49b, {series}, bfloat16, 2 ranks, largest ratio {r:.3f} at {worst} B"
              f" (at most 1.05){'' if good else ' FAILS'}")
    r, worst = largest_ratio("n2-f32", "c49b", "c48", "symm-layer-nccl", (1, 2, 3))
    good = r <= 1.05
    ok = ok and good
    print(f"change 49b, symm-layer-nccl, 2 ranks, largest ratio {r:.3f} at {worst} B (at most 1.05)"
          f"{'' if good else ' FAILS'}")
    ok = one_rank_guard("49b", "c49b", ("fused-nccl", "triton-nccl", "unfused-nccl-graph-nccl")) and ok
    right = all_right("c49b")
    print("kept: changes", "49b" if ok and right else "none")


def mean_difference(m0, m1):
    """M1 minus M0, two {size: us} maps, on average over the sizes."""
    return sum(m1[b] - m0[b] for b in m0) / len(m0)


def for_the_record(series, prefix, new, old, runs):
    """Prints NEW's mean difference from OLD in SERIES (means over RUNS): not a rule."""
    m0, m1 = mean(prefix, old, series, runs), mean(prefix, new, series, runs)
    print(f"(for the record) {series}, {prefix}, {new} against {old}: mean difference "
          f"{mean_difference(m0, m1):+.2f} us")


def faster(change, series, prefix, new, old, runs, gain, most):
    """NEW against OLD in SERIES (means over RUNS): on average at least GAIN us less
    over 8 B to 256 KiB, and no size above MOST. Prints both; returns the verdict."""
    m0, m1 = mean(prefix, old, series, runs), mean(prefix, new, series, runs)
    d = mean_difference(m0, m1)
    r, worst = largest_ratio(prefix, new, old, series, runs)
    good = d <= -gain and r <= most
    print(f"change {change}, {series}, {prefix} against {old}: mean difference {d:+.2f} us "
          f"(at most -{gain}), largest ratio {r:.3f} at {worst} B (at most {most})"
          f"{'' if good else ' FAILS'}")
    print("  " + " ".join(f"{b}: {m0[b]:.2f} -> {m1[b]:.2f}" for b in sorted(m0)))
    return good


def no_worse(change, series, prefix, new, old, runs, most):
    """NEW against OLD in SERIES: no size above MOST (means over RUNS)."""
    r, worst = largest_ratio(prefix, new, old, series, runs)
    print(f"change {change}, {series}, {prefix} against {old}: largest ratio {r:.3f} at {worst} B"
          f" (at most {most}){'' if r <= most else ' FAILS'}")
    return r <= most


def perf55():
    """Changes 55a (c55a against c48) and 55b (c55b against c55a), PERF_NOTES.md's
    rule. 55a: at 2 ranks in float32 (three runs) fused CUDA and Triton on average
    at least 0.2 us less over 8 B to 256 KiB, no size above 1.03; bfloat16 at 2
    ranks (two runs) no size above 1.05; at 1 rank fused, Triton and the NCCL
    graph no size above 1.03. 55b: the fused CUDA kernel at 1 and 2 ranks on
    average at least 0.15 us less than c55a, no size above 1.03; bfloat16 at 2
    ranks no size above 1.05; 16 and 128 MiB at 1 rank at most 1.02 in both
    types (two runs). Both: 0 wrong, four stress logs 0 wrong, --bad-input 13 of
    13 (on c55b, which holds both)."""
    a = True
    for series in ("fused-nccl", "triton-nccl"):
        a = faster("55a", series, "n2-f32", "c55a", "c48", (1, 2, 3), 0.2, 1.03) and a
        a = no_worse("55a", series, "n2-bf16", "c55a", "c48", (1, 2), 1.05) and a
    a = one_rank_guard("55a", "c55a", ("fused-nccl", "triton-nccl", "unfused-nccl-graph-nccl")) and a
    b = True
    for prefix in ("n2-f32", "n1-f32"):
        b = faster("55b", "fused-nccl", prefix, "c55b", "c55a", (1, 2, 3), 0.15, 1.03) and b
    b = no_worse("55b", "fused-nccl", "n2-bf16", "c55b", "c55a", (1, 2), 1.05) and b
    for d in ("f32", "bf16"):
        b = no_worse("55b", "fused-nccl", f"big-{d}", "c55b", "c55a", (1, 2), 1.02) and b
    right = all_right("c55b", cases=13, others=("c48", "c55a"))
    kept = [c for c, k in (("55a", a), ("55b", b)) if k and right]
    print("kept: changes", " ".join(kept) if kept else "none")


def perf56():
    """Changes 56 (c56 against c48) and 56b (c56b against c56), PERF_NOTES.md's
    rule. 56: the fused CUDA kernel on average at least 0.3 us less over 8 B to
    256 KiB at 1 and 2 ranks in float32 (three runs) and at 1 rank in bfloat16
    (two), no size above 1.03 there; bfloat16 at 2 ranks no size above 1.05; 16
    and 128 MiB at 1 rank at most 1.02 in both types (two runs). 56b: at 1 rank
    in float32 on average at least 0.15 us less than c56, no size above 1.03; at
    2 ranks not more on average, no size above 1.05; 16 and 128 MiB at most
    1.02. Both: 0 wrong, four stress logs 0 wrong, --bad-input 13 of 13 (on
    c56b, which holds both)."""
    f = "fused-nccl"
    a = faster("56", f, "n2-f32", "c56", "c48", (1, 2, 3), 0.3, 1.03)
    a = faster("56", f, "n1-f32", "c56", "c48", (1, 2, 3), 0.3, 1.03) and a
    a = faster("56", f, "n1-bf16", "c56", "c48", (1, 2), 0.3, 1.03) and a
    a = no_worse("56", f, "n2-bf16", "c56", "c48", (1, 2), 1.05) and a
    for d in ("f32", "bf16"):
        a = no_worse("56", f, f"big-{d}", "c56", "c48", (1, 2), 1.02) and a
    for series in ("unfused-nccl-graph-nccl", "triton-nccl"):  # not rules: what else moved
        for prefix in ("n1-f32", "n2-f32"):
            for_the_record(series, prefix, "c56", "c48", (1, 2, 3))
    b = faster("56b", f, "n1-f32", "c56b", "c56", (1, 2, 3), 0.15, 1.03)
    b = faster("56b", f, "n2-f32", "c56b", "c56", (1, 2, 3), 0.0, 1.05) and b
    for d in ("f32", "bf16"):
        b = no_worse("56b", f, f"big-{d}", "c56b", "c56", (1, 2), 1.02) and b
    right = all_right("c56b", cases=13, others=("c48", "c56"))
    kept = [c for c, k in (("56", a), ("56b", b)) if k and right]
    print("kept: changes", " ".join(kept) if kept else "none")


def mean_guard(change, series, prefix, new, old, runs, mean_most, most):
    """NEW against OLD in SERIES (means over RUNS): the mean ratio over the sizes at most
    MEAN_MOST and no size above MOST."""
    m0, m1 = mean(prefix, old, series, runs), mean(prefix, new, series, runs)
    ratios = {b: m1[b] / m0[b] for b in m0}
    avg, worst = sum(ratios.values()) / len(ratios), max(ratios, key=ratios.get)
    good = avg <= mean_most and ratios[worst] <= most
    print(f"change {change}, {series}, {prefix} against {old}: mean ratio {avg:.3f} (at most "
          f"{mean_most}), largest {ratios[worst]:.3f} at {worst} B (at most {most})"
          f"{'' if good else ' FAILS'}")
    return good


def perf57():
    """Changes 57a (c57a against c48) and 57b (c57b against c57a), PERF_NOTES.md's
    rule. 57a: at 2 ranks in float32 (three runs) fused CUDA, Triton and symm-layer
    on average at least 0.25 us less over 8 B to 256 KiB, no size above 1.03;
    bfloat16 at 2 ranks no size above 1.05; at 1 rank in float32 fused, Triton and
    the NCCL graph at most 1.01 on average over the sizes, no size above 1.05. 57b:
    the fused CUDA kernel on average at least 0.2 us less than c57a at 1 and at 2
    ranks (float32, three runs), no size above 1.03 at 1 rank or 1.05 at 2; 16 and
    128 MiB at 1 rank at most 1.02. Both: 0 wrong, four stress logs 0 wrong,
    --bad-input 13 of 13 (on c57b, which holds both)."""
    a = True
    for series in ("fused-nccl", "triton-nccl", "symm-layer-nccl"):
        a = faster("57a", series, "n2-f32", "c57a", "c48", (1, 2, 3), 0.25, 1.03) and a
    for series in ("fused-nccl", "triton-nccl"):
        a = no_worse("57a", series, "n2-bf16", "c57a", "c48", (1, 2), 1.05) and a
    for series in ("fused-nccl", "triton-nccl", "unfused-nccl-graph-nccl"):
        a = mean_guard("57a", series, "n1-f32", "c57a", "c48", (1, 2, 3), 1.01, 1.05) and a
    f = "fused-nccl"
    b = faster("57b", f, "n1-f32", "c57b", "c57a", (1, 2, 3), 0.2, 1.03)
    b = faster("57b", f, "n2-f32", "c57b", "c57a", (1, 2, 3), 0.2, 1.05) and b
    for d in ("f32", "bf16"):
        b = no_worse("57b", f, f"big-{d}", "c57b", "c57a", (1, 2), 1.02) and b
    for prefix, runs in (("n1-bf16", (1, 2)), ("n2-bf16", (1, 2))):  # not rules: for the record
        for new, old in (("c57a", "c48"), ("c57b", "c57a")):
            for_the_record(f, prefix, new, old, runs)
    right = all_right("c57b", cases=13, others=("c48", "c57a"))
    kept = [c for c, k in (("57a", a), ("57b", b)) if k and right]
    print("kept: changes", " ".join(kept) if kept else "none")


def perf57c():
    """Change 57c (c57c against c48), PERF_NOTES.md's rule: at 2 ranks in float32
    (three runs) fused CUDA, Triton and symm-layer each on average at least 0.2 us
    less over 8 B to 256 KiB, no size above 1.03; bfloat16 at 2 ranks fused and
    Triton no size above 1.05; at 1 rank in float32 fused, Triton and symm-layer at
    most 1.01 on average over the sizes, no size above 1.05; 16 and 128 MiB at most
    1.02; 0 wrong, four stress logs 0 wrong, --bad-input 13 of 13. c57a (call
    362's 57a) runs beside them for the record."""
    ok = True
    for series in ("fused-nccl", "triton-nccl", "symm-layer-nccl"):
        ok = faster("57c", series, "n2-f32", "c57c", "c48", (1, 2, 3), 0.2, 1.03) and ok
        ok = mean_guard("57c", series, "n1-f32", "c57c", "c48", (1, 2, 3), 1.01, 1.05) and ok
    for series in ("fused-nccl", "triton-nccl"):
        ok = no_worse("57c", series, "n2-bf16", "c57c", "c48", (1, 2), 1.05) and ok
    for d in ("f32", "bf16"):
        ok = no_worse("57c", "fused-nccl", f"big-{d}", "c57c", "c48", (1, 2), 1.02) and ok
    for series in ("fused-nccl", "triton-nccl", "symm-layer-nccl"):  # not rules: for the record
        for_the_record(series, "n2-f32", "c57a", "c48", (1, 2, 3))
    right = all_right("c57c", cases=13, others=("c48", "c57a"))
    print("kept: changes", "57c" if ok and right else "none")


def perf57d():
    """Change 57d (c57d against c48), PERF_NOTES.md's rule: at 2 ranks in float32
    (three runs) fused CUDA and symm-layer each on average at least 0.25 us less over
    8 B to 256 KiB, no size above 1.05; Triton (the same SASS as c48's) within 0.3 us
    on average; bfloat16 at 2 ranks fused no size above 1.05; at 1 rank in float32
    fused, Triton and symm-layer at most 1.01 on average over the sizes, no size
    above 1.05; 16 and 128 MiB at most 1.02; 0 wrong, four stress logs 0 wrong,
    --bad-input 13 of 13."""
    ok = True
    for series in ("fused-nccl", "symm-layer-nccl"):
        ok = faster("57d", series, "n2-f32", "c57d", "c48", (1, 2, 3), 0.25, 1.05) and ok
    d = mean_difference(mean("n2-f32", "c48", "triton-nccl", (1, 2, 3)),
                        mean("n2-f32", "c57d", "triton-nccl", (1, 2, 3)))
    ok = ok and abs(d) <= 0.3
    print(f"change 57d, triton-nccl (the control), n2-f32 against c48: mean difference {d:+.2f} us"
          f" (within 0.3){'' if abs(d) <= 0.3 else ' FAILS'}")
    ok = no_worse("57d", "fused-nccl", "n2-bf16", "c57d", "c48", (1, 2), 1.05) and ok
    for series in ("fused-nccl", "triton-nccl", "symm-layer-nccl"):
        ok = mean_guard("57d", series, "n1-f32", "c57d", "c48", (1, 2, 3), 1.01, 1.05) and ok
    for dt in ("f32", "bf16"):
        ok = no_worse("57d", "fused-nccl", f"big-{dt}", "c57d", "c48", (1, 2), 1.02) and ok
    right = all_right("c57d", cases=13, others=("c48",))
    print("kept: changes", "57d" if ok and right else "none")


def medians(prefix, v, series, runs):
    """Each size's median in SERIES over runs PREFIX-V-1, -2, ..."""
    ts = [times(f"{prefix}-{v}-{i}", series) for i in runs]
    return {b: statistics.median(t[b] for t in ts) for b in ts[0]}


def confirm57d():
    """Change 57d by medians (c57d against c48), PERF_NOTES.md's rule: at 2 ranks
    (six runs) fused CUDA and symm-layer each at least 0.2 us less on average over
    the sizes' medians, Triton within 0.2 us; at 1 rank (two runs) the fused
    kernel's median ratio at most 1.01 on average. It keeps nothing: 57d was kept
    after call 374's verification."""
    ok = True
    for series, most in (("fused-nccl", -0.2), ("symm-layer-nccl", -0.2), ("triton-nccl", None)):
        m0, m1 = medians("n2-f32", "c48", series, range(1, 7)), medians("n2-f32", "c57d", series, range(1, 7))
        d = mean_difference(m0, m1)
        good = d <= most if most is not None else abs(d) <= 0.2
        ok = ok and good
        print(f"57d, {series}, 2 ranks, medians of six: mean difference {d:+.2f} us "
              f"({'at most ' + str(most) if most is not None else 'within 0.2'}){'' if good else ' FAILS'}")
        print("  " + " ".join(f"{b}: {m0[b]:.2f} -> {m1[b]:.2f}" for b in sorted(m0)))
    m0, m1 = medians("n1-f32", "c48", "fused-nccl", (1, 2)), medians("n1-f32", "c57d", "fused-nccl", (1, 2))
    r = sum(m1[b] / m0[b] for b in m0) / len(m0)
    ok = ok and r <= 1.01
    print(f"57d, fused-nccl, 1 rank, medians of two: mean ratio {r:.3f} (at most 1.01)"
          f"{'' if r <= 1.01 else ' FAILS'}")
    w = wrong("c57d") + wrong("c48")
    print(f"wrong elements in timed runs: {w}")
    print("57d pays:", "yes" if ok and w == 0 else "no", "(nothing is kept this session)")


def one_rank_ratios(new, dtype, runs0, runs1, most, label, old="c57d"):
    """At 1 rank in DTYPE, the fused kernels' median ratio of NEW (runs RUNS1) to OLD (runs
    RUNS0), on average over the sizes, at most MOST; LABEL says what the medians are of."""
    ok = True
    for series in ("fused-nccl", "triton-nccl"):
        m0 = medians(f"n1-{dtype}", old, series, runs0)
        m1 = medians(f"n1-{dtype}", new, series, runs1)
        r = sum(m1[b] / m0[b] for b in m0) / len(m0)
        ok = ok and r <= most
        print(f"{new}, {series}, {dtype}, 1 rank, {label}: mean ratio {r:.3f} "
              f"(at most {most}){'' if r <= most else ' FAILS'}")
    return ok


def one_rank_60(new):
    """Changes 60 and 60c's guard: at 1 rank (two runs) the fused kernels' median ratio to
    c57d at most 1.01 on average, in both types."""
    ok = True
    for dtype in ("f32", "bf16"):
        ok = one_rank_ratios(new, dtype, (1, 2), (1, 2), 1.01, "medians of two") and ok
    return ok


def perf60():
    """Changes 60a (c60a: 55a on 57d's tree) and 60 (c60: 60a and whole lines moved in one
    8-byte load or store), each against c57d (HEAD's GPU code), PERF_NOTES.md's rule, by
    medians: at 2 ranks (six runs), in bfloat16 the fused CUDA and Triton kernels each at
    least 0.15 us less on average over the sizes; in float32 each, and symm-layer in both
    types, at most +0.05; at 1 rank (two runs) the fused kernels' median ratio at most 1.01
    on average in both types; 0 wrong in every timed run. c60 also needs its four stress logs
    0 wrong and --bad-input 13 of 13. c60 is kept if it passes; c60a only tells 60's parts
    apart."""
    verdicts = {}
    for new in ("c60a", "c60"):
        ok = True
        for dtype, series, most in (("bf16", "fused-nccl", -0.15), ("bf16", "triton-nccl", -0.15),
                                    ("f32", "fused-nccl", 0.05), ("f32", "triton-nccl", 0.05),
                                    ("f32", "symm-layer-nccl", 0.05), ("bf16", "symm-layer-nccl", 0.05)):
            m0 = medians(f"n2-{dtype}", "c57d", series, range(1, 7))
            m1 = medians(f"n2-{dtype}", new, series, range(1, 7))
            d = mean_difference(m0, m1)
            good = d <= most
            ok = ok and good
            print(f"{new}, {series}, {dtype}, 2 ranks, medians of six: mean difference {d:+.2f} us "
                  f"(at most {most:+.2f}){'' if good else ' FAILS'}")
            print("  " + " ".join(f"{b}: {m0[b]:.2f} -> {m1[b]:.2f}" for b in sorted(m0)))
        ok = one_rank_60(new) and ok
        w = wrong(new)
        print(f"{new}: wrong elements in timed runs: {w}")
        verdicts[new] = ok and w == 0
    print(f"c57d: wrong elements in timed runs: {wrong('c57d')}")
    checks = all_right("c60", 13, ("c57d",))
    print("60a pays:", "yes" if verdicts["c60a"] else "no", "(not kept on its own)")
    print("kept:", "change 60" if verdicts["c60"] and checks else "none")


def rule_60c(runs, word):
    """Change 60c's rule (PERF_NOTES.md), c60c against c57d by medians over RUNS at 2 ranks
    (WORD says how many): Triton at least 0.3 us less in bfloat16 and at most +0.05 in
    float32 on average over the sizes; the fused CUDA kernel and symm-layer (nvcc's builds,
    c57d's code) within 0.15 in both types; and one_rank_60."""
    ok = True
    for dtype, series, low, high in (("bf16", "triton-nccl", None, -0.3),
                                     ("f32", "triton-nccl", None, 0.05),
                                     ("f32", "fused-nccl", -0.15, 0.15),
                                     ("bf16", "fused-nccl", -0.15, 0.15),
                                     ("f32", "symm-layer-nccl", -0.15, 0.15),
                                     ("bf16", "symm-layer-nccl", -0.15, 0.15)):
        m0 = medians(f"n2-{dtype}", "c57d", series, runs)
        m1 = medians(f"n2-{dtype}", "c60c", series, runs)
        d = mean_difference(m0, m1)
        good = d <= high and (low is None or d >= low)
        ok = ok and good
        bound = f"at most {high:+.2f}" if low is None else f"within {low:+.2f} to {high:+.2f}"
        print(f"c60c, {series}, {dtype}, 2 ranks, medians of {word}: mean difference {d:+.2f} us "
              f"({bound}){'' if good else ' FAILS'}")
        print("  " + " ".join(f"{b}: {m0[b]:.2f} -> {m1[b]:.2f}" for b in sorted(m0)))
    return one_rank_60("c60c") and ok


def perf60c():
    """Change 60c (c60c: change 60 in the C API's builds only) against c57d: rule_60c on six
    runs; 0 wrong in every timed run, four stress logs 0 wrong, --bad-input 13 of 13."""
    ok = rule_60c(range(1, 7), "six")
    checks = all_right("c60c", 13, ("c57d",))
    print("kept:", "change 60c" if ok and checks else "none")


def confirm60c():
    """Change 60c again (c60c against c57d): rule_60c on eight runs at 2 ranks in each type,
    the two builds in turn in ABBA order (call 381 lost c60c's first two float32 runs to a
    GPU slow in every series), and two at 1 rank. The stress mode and --bad-input ran in call
    381 (0 wrong, 13 of 13); here every timed run must be 0 wrong."""
    ok = rule_60c(range(1, 9), "eight")
    w = wrong("c60c") + wrong("c57d")
    print(f"wrong elements in timed runs: {w}")
    print("c60c pays:", "yes" if ok and w == 0 else "no")


def kept_runs(ranks, dtype, builds, runs, limit=1.10):
    """{build: [run, ...]} of the runs n<RANKS>-<DTYPE>-<build>-<i> that were not slow in
    every series. A run's control is the NCCL graph's time (code no change touches), its
    median over the sizes (one disturbed size does not move it); the reference is the lower
    quartile of the controls of every such run in the call. A run whose control is over
    LIMIT times the reference is left out (calls 380 to 382: the slow runs read 1.13 to 1.33,
    the others 0.93 to 1.09, but for seven whose graph alone was disturbed at two sizes, which
    read 1.23 to 1.33: this control leaves those out too; PERF_NOTES.md, call 383)."""
    ctl = {(v, i): statistics.median(times(f"n{ranks}-{dtype}-{v}-{i}",
                                           "unfused-nccl-graph-nccl").values())
           for v in builds for i in runs}
    ref = sorted(ctl.values())[len(ctl) // 4]
    left = {v: [i for i in runs if ctl[(v, i)] <= limit * ref] for v in builds}
    for v in builds:
        out = [i for i in runs if i not in left[v]]
        print(f"{ranks} rank(s), {dtype}, {v}: runs left out (the NCCL graph over {limit} of the "
              f"reference): {out if out else 'none'}")
    return left


def bounded_differences(old, new, dtype, left, bounds, against="", ranks=2):
    """At RANKS ranks in DTYPE, NEW's mean difference from OLD over the sizes, by each size's
    median over the runs LEFT[build], for each (series, high) of BOUNDS: printed with the
    medians, and (whether every one is at most its high, the differences)."""
    ok, diffs = True, []
    where = f"{ranks} rank{'s' if ranks > 1 else ''}"
    for series, high in bounds:
        m0 = medians(f"n{ranks}-{dtype}", old, series, left[old])
        m1 = medians(f"n{ranks}-{dtype}", new, series, left[new])
        d = mean_difference(m0, m1)
        diffs.append(d)
        ok = ok and d <= high
        print(f"{new}, {series}, {dtype}, {where}, {against}medians of the runs left: mean "
              f"difference {d:+.2f} us (at most {high:+.2f}){'' if d <= high else ' FAILS'}")
        print("  " + " ".join(f"{b}: {m0[b]:.2f} -> {m1[b]:.2f}" for b in sorted(m0)))
    return ok, diffs


def runs_left_rule(select, least, triton_f32, one_rank, builds=("c57d", "c60c")):
    """Change 60c (c60c against c57d) by each size's median over the runs SELECT leaves (at
    least LEAST of each build's at 2 ranks and 2 at 1 rank, in each type): at 2 ranks Triton
    at least 0.3 us less in bfloat16 and at most TRITON_F32 in float32 on average over the
    sizes, the fused CUDA kernel and symm-layer (c57d's code) at most +0.15 in both types; at
    1 rank the fused kernels' median ratio at most ONE_RANK on average; 0 wrong. SELECT's
    control reads every run of BUILDS. Returns whether 60c pays."""
    ok, enough = True, True
    for dtype in ("f32", "bf16"):
        left = select(2, dtype, builds, run_numbers(f"n2-{dtype}-c57d-"))
        enough = enough and all(len(r) >= least for r in left.values())
        good, _ = bounded_differences(
            "c57d", "c60c", dtype, left,
            (("triton-nccl", -0.3 if dtype == "bf16" else triton_f32),
             ("fused-nccl", 0.15), ("symm-layer-nccl", 0.15)))
        ok = good and ok
        left = select(1, dtype, builds, run_numbers(f"n1-{dtype}-c57d-"))
        enough = enough and all(len(r) >= 2 for r in left.values())
        ok = one_rank_ratios("c60c", dtype, left["c57d"], left["c60c"], one_rank,
                             "medians of the runs left") and ok
    w = wrong("c60c") + wrong("c57d")
    print(f"wrong elements in timed runs: {w}")
    print("enough runs left:", "yes" if enough else "no")
    print("c60c pays:", "yes" if ok and enough and w == 0 else "no")
    return ok and enough and w == 0


def confirm60c2():
    """Change 60c a third time (c60c against c57d), its rule written before the run with the
    slow runs left out by kept_runs: ten runs (or CONFIRM_RUNS) at 2 ranks in each type in
    ABBA order and three at 1 rank; runs_left_rule with at least 5 runs left, Triton's
    float32 guard at +0.05 and the 1-rank guard at 1.01."""
    runs_left_rule(kept_runs, 5, 0.05, 1.01)


def run_numbers(prefix):
    """The run numbers i of the call's PREFIX<i>.json reports, in order."""
    return sorted(int(f[len(prefix):-5]) for f in os.listdir(L)
                  if f.startswith(prefix) and f.endswith(".json") and f[len(prefix):-5].isdigit())


def unslowed_runs(ranks, dtype, builds, runs, limit=1.07):
    """{build: [run, ...]} of the runs n<RANKS>-<DTYPE>-<build>-<i> the GPU did not slow down.
    The control is the NCCL graph (code no change touches): at each size, its time over the
    lower quartile of that size's times in every such run of the call. A run slow in every
    series is slow at every size, so its smallest ratio is over LIMIT (calls 380 to 383: 1.10
    to 1.20); one whose graph was disturbed at some sizes only has a small ratio somewhere
    (0.94 to 1.02), and stays. A graph disturbed at every size (2.6 to 2.8 times, twice in
    those calls) leaves its run out too: it controls nothing."""
    g = {(v, i): times(f"n{ranks}-{dtype}-{v}-{i}", "unfused-nccl-graph-nccl")
         for v in builds for i in runs}
    sizes = list(next(iter(g.values())))
    ref = {b: sorted(x[b] for x in g.values())[len(g) // 4] for b in sizes}
    low = {k: min(x[b] / ref[b] for b in sizes) for k, x in g.items()}
    left = {v: [i for i in runs if low[(v, i)] <= limit] for v in builds}
    for v in builds:
        out = [f"{i} ({low[(v, i)]:.2f})" for i in runs if i not in left[v]]
        print(f"{ranks} rank(s), {dtype}, {v}: runs left out (the NCCL graph's smallest ratio "
              f"over {limit}): {', '.join(out) if out else 'none'}")
    return left


def confirm60c3():
    """Change 60c a fourth time (c60c against c57d), written before its run for the next
    session: as confirm60c2, with unslowed_runs for the control, twelve runs at 2 ranks (or
    CONFIRM_RUNS) and three at 1, at least 6 and 2 of them left for each build in each type,
    Triton's float32 guard at +0.15 like the others (calls 380 to 383 read it at -0.07 to
    +0.08), and the 1-rank guard at 1.015 (identical code read up to 1.0102)."""
    runs_left_rule(unslowed_runs, 6, 0.15, 1.015)


def confirm61():
    """Changes 60c and 61 in one call (PERF_NOTES.md, written before its run): c57d (HEAD's
    GPU code), c60c and c61 (60c, and the one-shot's staging addresses chosen rather than
    indexed by the rank, so that they stay in registers) in turn, twelve runs at 2 ranks (or
    CONFIRM_RUNS) and three at 1 in each type, the runs left by unslowed_runs over the three
    builds. 60c: confirm60c3's rule. 61 against c60c, by each size's median over the runs
    left (at least 6 of each build's at 2 ranks and 2 at 1 rank, in each type): at 2 ranks
    the mean difference over the sizes, averaged over the six series (the fused CUDA kernel,
    Triton and symm-layer, in both types), at most -0.10 us, and no series' above +0.15; at
    1 rank the fused kernels' median ratio at most 1.015 on average in both types; 0 wrong.
    Kept: 61 (with 60c) if both pay, 60c alone if 61 does not, else none."""
    builds = ("c57d", "c60c", "c61")
    pays60c = runs_left_rule(unslowed_runs, 6, 0.15, 1.015, builds)
    ok, enough, diffs = True, True, []
    for dtype in ("f32", "bf16"):
        left = unslowed_runs(2, dtype, builds, run_numbers(f"n2-{dtype}-c57d-"))
        enough = enough and all(len(left[v]) >= 6 for v in ("c60c", "c61"))
        good, ds = bounded_differences(
            "c60c", "c61", dtype, left,
            tuple((series, 0.15) for series in ("fused-nccl", "triton-nccl", "symm-layer-nccl")),
            "against c60c, ")
        ok, diffs = good and ok, diffs + ds
        left = unslowed_runs(1, dtype, builds, run_numbers(f"n1-{dtype}-c57d-"))
        enough = enough and all(len(left[v]) >= 2 for v in ("c60c", "c61"))
        ok = one_rank_ratios("c61", dtype, left["c60c"], left["c61"], 1.015,
                             "against c60c, medians of the runs left", old="c60c") and ok
    mean = sum(diffs) / len(diffs)
    ok = ok and mean <= -0.10
    print(f"c61 against c60c, 2 ranks, the six series' mean difference: {mean:+.2f} us "
          f"(at most -0.10){'' if mean <= -0.10 else ' FAILS'}")
    w = wrong("c61")
    print(f"c61: wrong elements in timed runs: {w}")
    print("enough runs left for 61:", "yes" if enough else "no")
    pays61 = ok and enough and w == 0
    print("c61 pays:", "yes" if pays61 else "no")
    print("kept:", "changes 60c and 61" if pays60c and pays61 else
          "change 60c" if pays60c else "none")


def against_c61(new, least):
    """NEW against c61 (HEAD's GPU code after call 385), the rule of changes 62 and 63
    (PERF_NOTES.md), written before their runs: the two builds in ABBA order, the runs left
    by unslowed_runs (at least LEAST of each build's at 2 ranks and 2 at 1 rank, in each
    type). By each size's median over the runs left, at 2 ranks: the fused CUDA kernel in
    bfloat16 at least 0.15 us less on average over the sizes; the fused CUDA kernel in
    float32 and symm-layer in both types at most +0.10; Triton at most +0.15 in both types.
    At 1 rank the fused kernels' median ratio at most 1.015 on average in both types; 0
    wrong."""
    builds = ("c61", new)
    ok, enough = True, True
    for dtype in ("f32", "bf16"):
        left = unslowed_runs(2, dtype, builds, run_numbers(f"n2-{dtype}-c61-"))
        enough = enough and all(len(r) >= least for r in left.values())
        good, _ = bounded_differences(
            "c61", new, dtype, left,
            (("fused-nccl", -0.15 if dtype == "bf16" else 0.10),
             ("symm-layer-nccl", 0.10), ("triton-nccl", 0.15)))
        ok = good and ok
        left = unslowed_runs(1, dtype, builds, run_numbers(f"n1-{dtype}-c61-"))
        enough = enough and all(len(r) >= 2 for r in left.values())
        ok = one_rank_ratios(new, dtype, left["c61"], left[new], 1.015,
                             "medians of the runs left", old="c61") and ok
    w = wrong(new) + wrong("c61")
    print(f"wrong elements in timed runs: {w}")
    print("enough runs left:", "yes" if enough else "no")
    print(f"{new} pays:", "yes" if ok and enough and w == 0 else "no")


def confirm62():
    """Change 62 (c62: change 60's whole-line loads and stores, and the kept own line, in
    nvcc's builds too): against_c61 on ten runs at 2 ranks (or CONFIRM_RUNS) and three at 1,
    at least 6 of them left."""
    against_c61("c62", 6)


def confirm63():
    """Change 63 (c63: the own line asked for before the first peer's is waited for):
    against_c61 on eight runs at 2 ranks (or CONFIRM_RUNS) and three at 1, at least 5 of them
    left (the session's device time holds no more beside the verification after it)."""
    against_c61("c63", 5)


def confirm64():
    """Change 64 (c64: Triton's one-row epilogue keeps its first chunk, h and gamma, in
    registers) against c63 (HEAD's GPU code), the rule written before its run (PERF_NOTES.md):
    the two builds in ABBA order, ten runs at 1 rank (or CONFIRM_RUNS) and six at 2 in each
    type, the runs left by unslowed_runs (at least 6 of each build's at 1 rank and 4 at 2).
    By each size's median over the runs left, at 1 rank in both types: Triton at least 0.08 us
    less on average over the sizes, and at no size more than 0.05 us above c63; the fused CUDA
    kernel and symm-layer (code the change does not touch) within 0.10 us either way. At 2
    ranks, Triton at most +0.10 us on average in both types. 16 and 128 MiB at 1 rank, both
    types: Triton's mean ratio over two runs at most 1.02 at each size. 0 wrong. For the
    record: Triton's median over the NCCL graph's at 8 B, 1 rank, of each build."""
    builds = ("c63", "c64")
    ok, enough = True, True
    for dtype in ("f32", "bf16"):
        left = unslowed_runs(1, dtype, builds, run_numbers(f"n1-{dtype}-c63-"))
        enough = enough and all(len(r) >= 6 for r in left.values())
        good, _ = bounded_differences("c63", "c64", dtype, left, (("triton-nccl", -0.08),),
                                      ranks=1)
        ok = good and ok
        m0 = medians(f"n1-{dtype}", "c63", "triton-nccl", left["c63"])
        m1 = medians(f"n1-{dtype}", "c64", "triton-nccl", left["c64"])
        worst = max(m1[b] - m0[b] for b in m0)
        ok = ok and worst <= 0.05
        print(f"c64, triton-nccl, {dtype}, 1 rank: the largest size's difference {worst:+.2f} us "
              f"(at most +0.05){'' if worst <= 0.05 else ' FAILS'}")
        for series in ("fused-nccl", "symm-layer-nccl"):
            n0 = medians(f"n1-{dtype}", "c63", series, left["c63"])
            n1 = medians(f"n1-{dtype}", "c64", series, left["c64"])
            d = mean_difference(n0, n1)
            ok = ok and abs(d) <= 0.10
            print(f"c64, {series}, {dtype}, 1 rank (the control): mean difference {d:+.2f} us "
                  f"(within 0.10){'' if abs(d) <= 0.10 else ' FAILS'}")
        for v in builds:
            t = medians(f"n1-{dtype}", v, "triton-nccl", left[v])[8]
            g = medians(f"n1-{dtype}", v, "unfused-nccl-graph-nccl", left[v])[8]
            print(f"{v}, {dtype}, 1 rank, 8 B: Triton {t:.2f} us, the NCCL graph {g:.2f}: "
                  f"{t / g:.3f}")
        left = unslowed_runs(2, dtype, builds, run_numbers(f"n2-{dtype}-c63-"))
        enough = enough and all(len(r) >= 4 for r in left.values())
        good, _ = bounded_differences("c63", "c64", dtype, left, (("triton-nccl", 0.10),))
        ok = good and ok
        for size in (16 * MIB, 128 * MIB):
            r = statistics.mean(times(f"big-{dtype}-c64-{i}", "triton-nccl")[size]
                                / times(f"big-{dtype}-c63-{i}", "triton-nccl")[size] for i in (1, 2))
            ok = ok and r <= 1.02
            print(f"c64, triton-nccl, {dtype}, {size // MIB} MiB, 1 rank: mean ratio of two runs "
                  f"{r:.3f} (at most 1.02){'' if r <= 1.02 else ' FAILS'}")
    w = wrong("c64") + wrong("c63")
    print(f"wrong elements in timed runs: {w}")
    print("enough runs left:", "yes" if enough else "no")
    print("c64 pays:", "yes" if ok and enough and w == 0 else "no")


OWN = {"probe29": probe29, "perf30": perf30, "perf31": perf31, "perf33": perf33, "perf34": perf34,
       "probe35": probe35, "perf36": lambda: small_gain("36", "c36", "c35", 0.99),
       "perf37": lambda: small_gain("37", "c37", "c35", 0.98), "perf38": perf38,
       "perf39": lambda: triton_tiles("39", 1.03), "perf40": lambda: triton_tiles("40", 1.02),
       "perf41": perf41, "perf45": perf45, "confirm45": confirm45, "perf49": perf49, "perf49b": perf49b,
       "perf55": perf55, "perf56": perf56,
       "perf57": perf57, "perf57c": perf57c,
       "perf57d": perf57d, "confirm57d": confirm57d, "perf60": perf60,
       "perf60c": perf60c, "confirm60c": confirm60c,
       "confirm60c2": confirm60c2,
       "confirm60c3": confirm60c3, "confirm61": confirm61,
       "confirm62": confirm62, "confirm63": confirm63, "confirm64": confirm64}
if PART in OWN:  # plans of their own, with means over runs
    OWN[PART]()
    sys.exit(0)
plan = PLANS[PART]
w = {v: wrong(v) for v in sorted({c[2] for c in plan} | {c[3] for c in plan})}
print("wrong elements:", w)
kept = [str(c[0]) for c in plan if rule(*c) and w[c[2]] == 0]
print("kept: changes", " ".join(kept) if kept else "none")
