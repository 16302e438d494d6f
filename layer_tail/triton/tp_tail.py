"""Lesson 06's fused layer tail as a Triton kernel, and its ahead-of-time build.

The kernel does what kernels/tp_tail.cu's tp_tail_fused does, in one launch:
  partial  = x_r w_r                       (this rank's term, into the buffer)
  sum      = symm_all_reduce(partial)      (NCCL's device API, in the kernel)
  h        = sum + residual                (written back: the new residual)
  out[t,i] = h[t,i] / sqrt(mean_i h[t,i]^2 + eps) * gamma[i]

Run as a script, it compiles the kernel for one GPU architecture and dtype,
linking symm_comm_nccl.bc and NCCL's libnccl_device.bc, without a GPU:

  python3 tp_tail.py --arch 90 --dtype f32 --nccl-device-bc .../libnccl_device.bc --out DIR

and writes DIR/tp_tail_triton.cubin, .ptx and .json (the kernel's name, its
warps, its shared memory, its parameters). The lesson's Rust host
(`06b_symm_triton`) runs this script, then loads the cubin
and launches it cooperatively with the context it made.
"""

import argparse
import json
import os
import re
import sys

import triton
import triton.language as tl

# symm.py comes from the symm_comm crate (symm_comm/triton/): the lesson's
# host writes it beside this script; from a checkout, put that directory on
# PYTHONPATH.
from symm import LIBRARY, SYMM_OK, SYMM_REDUCE_SUM, extern_libs, symm_all_reduce

# 16 warps: 512 threads a program, as the CUDA kernels' SYMM_THREADS.
NUM_WARPS = 16
# The compute phase's tile (BLOCK_T tokens by BLOCK_H columns, BLOCK_K input
# features a step: tl.dot takes 16 or more of each), and the epilogue's chunk
# of a row (a whole row of the benchmark's 4096 features: one round trip for
# its loads, not two).
BLOCK_T = 16
BLOCK_H = 256
BLOCK_N = 4096
BLOCK_K = 16


@triton.jit
def tp_tail_triton(ctx, buffer, byte_offset, x, w, residual, gamma, out, tokens, hidden, k, eps,
                   status, DTYPE: tl.constexpr, BLOCK_T: tl.constexpr, BLOCK_H: tl.constexpr,
                   BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    # `buffer` is this rank's address of the context's buffer; the partial
    # output starts byte_offset bytes into it (a multiple of the element size,
    # which symm_all_reduce checks). `ctx` is the context's device address.
    pid = tl.program_id(0)
    programs = tl.num_programs(0)
    elem = buffer.dtype.element_ty
    partial = buffer + byte_offset // (elem.primitive_bitwidth // 8)

    # Where hidden and every address allow it, rows of 16-byte vectors: VEC
    # elements a load or store, not one. Built ahead of time for any pointer,
    # the kernel cannot know this by itself (Triton's JIT would specialize on
    # it), so it checks, and in that branch tells the compiler: hidden // VEC
    # * VEC is then hidden, a multiple of VEC the compiler can see, and the
    # row starts are marked with tl.multiple_of (ALIGN bytes). -5.5 % at 128
    # MiB in float32, about -15 % in bfloat16; where the check fails (the
    # benchmark's 8-byte layer) the aligned code, not run, still costs 0.2 to
    # 0.35 µs (PERF_NOTES.md, changes 26, 27 and 29).
    VEC: tl.constexpr = 128 // elem.primitive_bitwidth
    bases = partial.to(tl.int64) | w.to(tl.int64) | residual.to(tl.int64) | out.to(tl.int64)
    aligned = hidden % VEC == 0 and (bases | gamma.to(tl.int64)) % 16 == 0
    if aligned:
        tp_compute(x, w, partial, pid, programs, tokens, hidden // VEC * VEC, k, BLOCK_T,
                   BLOCK_H, BLOCK_K, ALIGN=16)
    else:
        tp_compute(x, w, partial, pid, programs, tokens, hidden, k, BLOCK_T, BLOCK_H, BLOCK_K,
                   ALIGN=1)

    # All-reduce, in place: every thread of every program calls it (at the
    # top level, the same arguments everywhere). When it returns 0 the whole
    # sum is visible to every thread of the kernel.
    rc = symm_all_reduce(ctx, buffer.to(tl.int64), byte_offset,
                         tokens.to(tl.int64) * hidden, SYMM_REDUCE_SUM, DTYPE)
    if pid == 0:
        tl.store(status, rc)
    if rc == SYMM_OK:
        if aligned:
            tp_epilogue(partial, residual, gamma, out, pid, programs, tokens, hidden // VEC * VEC,
                        eps, DTYPE, BLOCK_N, ALIGN=16)
        else:
            tp_epilogue(partial, residual, gamma, out, pid, programs, tokens, hidden, eps, DTYPE,
                        BLOCK_N, ALIGN=1)


@triton.jit
def tp_compute(x, w, partial, pid, programs, tokens, hidden, k, BLOCK_T: tl.constexpr,
               BLOCK_H: tl.constexpr, BLOCK_K: tl.constexpr, ALIGN: tl.constexpr):
    # partial[t, i] = sum_j x[t, j] w[j, i], one tile at a time, the tiles
    # spread over the programs: one loop over this program's (tile, k step)
    # pairs. Where a program has two tiles or more, Triton's pipeliner
    # (num_stages=2) loads the next pair's operands while this one computes;
    # with one tile there is nothing to overlap, and a pipeline's prologue
    # cost 0.7 µs (PERF_NOTES.md, changes 18 and 23).
    tiles_h = tl.cdiv(hidden, BLOCK_H)
    steps = tl.cdiv(k, BLOCK_K)
    # Large layers, where every program has two tiles of 4 BLOCK_T tokens or more (the
    # same test in every program, which must agree on the tiles), else two of 2 BLOCK_T:
    # each operand loaded serves 4 or 2 times the fmas (PERF_NOTES.md, changes 40 and 43:
    # together -19 % at 128 MiB in bfloat16, -8 % in float32); below, the 16-token tiles,
    # whose masked rows would cost small layers.
    taller = tl.cdiv(tokens, 4 * BLOCK_T) * tiles_h
    tall = tl.cdiv(tokens, 2 * BLOCK_T) * tiles_h
    if taller >= 2 * programs:
        pairs = tl.cdiv(taller - pid, programs) * steps
        tp_tiles(x, w, partial, pairs, pid, programs, steps, tiles_h, tokens, hidden, k,
                 4 * BLOCK_T, BLOCK_H, BLOCK_K, ALIGN, STAGES=2)
    elif tall >= 2 * programs:
        pairs = tl.cdiv(tall - pid, programs) * steps
        tp_tiles(x, w, partial, pairs, pid, programs, steps, tiles_h, tokens, hidden, k,
                 2 * BLOCK_T, BLOCK_H, BLOCK_K, ALIGN, STAGES=2)
    else:
        pairs = tl.cdiv(tl.cdiv(tokens, BLOCK_T) * tiles_h - pid, programs) * steps
        if pairs > steps:
            tp_tiles(x, w, partial, pairs, pid, programs, steps, tiles_h, tokens, hidden, k,
                     BLOCK_T, BLOCK_H, BLOCK_K, ALIGN, STAGES=2)
        else:
            tp_tiles(x, w, partial, pairs, pid, programs, steps, tiles_h, tokens, hidden, k,
                     BLOCK_T, BLOCK_H, BLOCK_K, ALIGN, STAGES=1)


@triton.jit
def tp_tiles(x, w, partial, pairs, pid, programs, steps, tiles_h, tokens, hidden, k,
             BLOCK_T: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_K: tl.constexpr,
             ALIGN: tl.constexpr, STAGES: tl.constexpr):
    # This program's (tile, k step) pairs, in order, through a pipeline STAGES deep.
    acc = tl.zeros([BLOCK_T, BLOCK_H], dtype=tl.float32)
    for q in tl.range(0, pairs, num_stages=STAGES):
        acc = tp_step(x, w, partial, q, acc, pid, programs, steps, tiles_h, tokens, hidden, k,
                      BLOCK_T, BLOCK_H, BLOCK_K, ALIGN)


@triton.jit
def tp_epilogue(partial, residual, gamma, out, pid, programs, tokens, hidden, eps,
                DTYPE: tl.constexpr, BLOCK_N: tl.constexpr, ALIGN: tl.constexpr):
    # Residual + RMSNorm. Where every program has two rows or more, two rows at
    # a time, t and t + programs (twice the loads in flight), then a last odd
    # one alone: in float32, and in bfloat16 where the rows are 16-byte
    # vectors (PERF_NOTES.md, changes 14, 15 and 30: with two-byte loads the
    # pairs were 17 % slower in bfloat16, with vectors 10 % faster).
    # Otherwise one row per program at a time (at few rows the pairs' loop
    # cost 0.4 µs), in a loop of its own (as tp_rows(ROWS=1) it was 2 %
    # slower in bfloat16: change 29). There each row's first chunk (the whole
    # row where hidden <= BLOCK_N) loads gamma with the sum and the residual,
    # and keeps h as stored, so that scaling it makes no second trip to memory
    # (change 64: 0.15 to 0.2 µs less at small sizes and 1 rank, on average).
    # Chunks after the first, and the pairs' rows (tp_rows), read h and gamma
    # back to scale them.
    if (DTYPE == 0 or ALIGN > 1) and tokens >= 2 * programs:  # DTYPE 0: float32 (DTYPES)
        pairs = tl.cdiv(tokens - programs - pid, 2 * programs)
        for p in range(0, pairs):
            tp_rows(partial, residual, gamma, out, pid + p * 2 * programs, programs, hidden,
                    eps, ROWS=2, BLOCK_N=BLOCK_N, ALIGN=ALIGN)
        last = pid + pairs * 2 * programs
        if last < tokens:
            tp_rows(partial, residual, gamma, out, last, programs, hidden, eps, ROWS=1,
                    BLOCK_N=BLOCK_N, ALIGN=ALIGN)
    else:
        elem = partial.dtype.element_ty
        for t in range(pid, tokens, programs):
            row = t.to(tl.int64) * hidden
            sums = tl.multiple_of(partial + row, ALIGN)
            olds = tl.multiple_of(residual + row, ALIGN)
            outs = tl.multiple_of(out + row, ALIGN)
            # The first chunk (names ending in 0): its h and gamma stay in
            # registers. The hint goes on gamma + n0, not on the bare argument
            # gamma: there Triton drops it, and gamma's loads lose their vectors.
            n0 = tl.arange(0, BLOCK_N)
            n0_in = n0 < hidden
            s0 = tl.load(sums + n0, mask=n0_in, other=0.0, cache_modifier=".cg")
            r0 = tl.load(olds + n0, mask=n0_in, other=0.0)
            g0 = tl.load(tl.multiple_of(gamma + n0, [ALIGN]), mask=n0_in, other=0.0)
            h0 = (s0.to(tl.float32) + r0.to(tl.float32)).to(elem)
            tl.store(olds + n0, h0, mask=n0_in)
            stored0 = h0.to(tl.float32)  # h as stored: bfloat16 rounds before the norm
            squares = stored0 * stored0
            # The chunks after it (none where hidden <= BLOCK_N).
            for start in range(BLOCK_N, hidden, BLOCK_N):
                n = start + tl.arange(0, BLOCK_N)
                n_in = n < hidden
                s = tl.load(sums + n, mask=n_in, other=0.0, cache_modifier=".cg")
                r = tl.load(olds + n, mask=n_in, other=0.0)
                h = (s.to(tl.float32) + r.to(tl.float32)).to(elem)
                tl.store(olds + n, h, mask=n_in)
                stored = h.to(tl.float32)
                squares += stored * stored
            scale = tl.math.rsqrt(tl.sum(squares, axis=0) / hidden + eps)
            tl.store(outs + n0, (stored0 * scale * g0).to(elem), mask=n0_in)
            # The chunks after the first, read back to scale them.
            for start in range(BLOCK_N, hidden, BLOCK_N):
                n = start + tl.arange(0, BLOCK_N)
                n_in = n < hidden
                h = tl.load(olds + n, mask=n_in, other=0.0).to(tl.float32)
                g = tl.load(tl.multiple_of(gamma + start, ALIGN) + tl.arange(0, BLOCK_N),
                            mask=n_in, other=0.0)
                tl.store(outs + n, (h * scale * g).to(elem), mask=n_in)


@triton.jit
def tp_step(x, w, partial, q, acc, pid, programs, steps, tiles_h, tokens, hidden, k,
            BLOCK_T: tl.constexpr, BLOCK_H: tl.constexpr, BLOCK_K: tl.constexpr,
            ALIGN: tl.constexpr):
    # A program's pair q: its tile pid + (q // steps) * programs, the tile's
    # k step q % steps. Adds the step's term to acc; on the tile's last step,
    # stores the tile and returns a cleared acc for the next. Rows of w and
    # partial start ALIGN-byte aligned (the caller's to check).
    tile = pid + q // steps * programs
    t = (tile // tiles_h) * BLOCK_T + tl.arange(0, BLOCK_T)
    i = (tile % tiles_h) * BLOCK_H + tl.arange(0, BLOCK_H)
    j = q % steps * BLOCK_K + tl.arange(0, BLOCK_K)
    t_in = t < tokens
    i_in = i < hidden
    j_in = j < k
    xs = tl.load(x + t.to(tl.int64)[:, None] * k + j[None, :],
                 mask=t_in[:, None] & j_in[None, :], other=0.0)
    ws = tl.load(tl.multiple_of(w + j.to(tl.int64) * hidden, [ALIGN])[:, None] + i[None, :],
                 mask=j_in[:, None] & i_in[None, :], other=0.0)
    # BLOCK_K input features a step through tl.dot's fma path
    # (input_precision="ieee"): each output's fmas in j order, as the CPU
    # reference's, with a register tile per thread (PERF_NOTES.md, change 17).
    acc = tl.dot(xs, ws, acc, input_precision="ieee")
    if q % steps == steps - 1:
        rows = tl.multiple_of(partial + t.to(tl.int64) * hidden, [ALIGN])
        tl.store(rows[:, None] + i[None, :], acc.to(partial.dtype.element_ty),
                 mask=t_in[:, None] & i_in[None, :])
        acc = tl.zeros([BLOCK_T, BLOCK_H], dtype=tl.float32)
    return acc


@triton.jit
def tp_rows(partial, residual, gamma, out, t, step, hidden, eps, ROWS: tl.constexpr,
            BLOCK_N: tl.constexpr, ALIGN: tl.constexpr):
    # Rows t, t + step, ... (ROWS of them, each below `tokens`: the caller's to
    # check): h = sum + residual, written back as the new residual, then
    # normalized over h as stored, as the CUDA kernel does (bfloat16 rounds
    # there). Every row, and gamma, start ALIGN-byte aligned (the caller's to
    # check).
    elem = residual.dtype.element_ty
    rows = (t + tl.arange(0, ROWS) * step).to(tl.int64) * hidden
    sums = tl.multiple_of(partial + rows, [ALIGN])[:, None]
    olds = tl.multiple_of(residual + rows, [ALIGN])[:, None]
    outs = tl.multiple_of(out + rows, [ALIGN])[:, None]
    squares = tl.zeros([ROWS, BLOCK_N], dtype=tl.float32)
    for start in range(0, hidden, BLOCK_N):
        n = start + tl.arange(0, BLOCK_N)
        n_in = (n < hidden)[None, :]
        s = tl.load(sums + n[None, :], mask=n_in, other=0.0, cache_modifier=".cg")
        r = tl.load(olds + n[None, :], mask=n_in, other=0.0)
        h = (s.to(tl.float32) + r.to(tl.float32)).to(elem)
        tl.store(olds + n[None, :], h, mask=n_in)
        stored = h.to(tl.float32)
        squares += stored * stored
    scale = tl.math.rsqrt(tl.sum(squares, axis=1) / hidden + eps)
    for start in range(0, hidden, BLOCK_N):
        n = start + tl.arange(0, BLOCK_N)
        n_in = (n < hidden)[None, :]
        h = tl.load(olds + n[None, :], mask=n_in, other=0.0).to(tl.float32)
        g = tl.load(tl.multiple_of(gamma + start, ALIGN) + tl.arange(0, BLOCK_N),
                    mask=n < hidden, other=0.0)
        tl.store(outs + n[None, :], (h * scale[:, None] * g[None, :]).to(elem), mask=n_in)


# The kernel's parameters as the host passes them, in order (the constexprs
# are compiled in, and leave the list).
DTYPES = {"f32": ("fp32", 0), "bf16": ("bf16", 1)}


def signature(dtype):
    t, code = DTYPES[dtype]
    sig = {
        "ctx": "i64", "buffer": f"*{t}", "byte_offset": "i64", "x": "*fp32", "w": "*fp32",
        "residual": f"*{t}", "gamma": "*fp32", "out": f"*{t}", "tokens": "i32", "hidden": "i32",
        "k": "i32", "eps": "fp32", "status": "*i32",
        "DTYPE": "constexpr", "BLOCK_T": "constexpr", "BLOCK_H": "constexpr",
        "BLOCK_N": "constexpr", "BLOCK_K": "constexpr",
    }
    constants = {"DTYPE": code, "BLOCK_T": BLOCK_T, "BLOCK_H": BLOCK_H, "BLOCK_N": BLOCK_N,
                 "BLOCK_K": BLOCK_K}
    return sig, constants


def unresolved(ptx):
    """Functions the PTX declares but does not define: must be none (ptxas
    refuses such PTX first; this names them if it did not)."""
    func = r"\.func\s+(?:\([^)]*\)\s*)?(\w+)"
    declared = set(re.findall(r"^\.extern\s+" + func, ptx, re.M))
    defined = set(re.findall(r"^(?:\.visible\s+|\.weak\s+)?" + func + r"\s*\(", ptx, re.M))
    return sorted(declared - defined)


def entry_params(ptx, name):
    """How many parameters the kernel's entry takes, hidden ones included."""
    match = re.search(r"\.entry\s+" + name + r"\s*\(([^)]*)\)", ptx)
    return len(re.findall(r"\.param\s", match.group(1))) if match else -1


def compile_kernel(arch, dtype, nccl_device_bc, library):
    sig, constants = signature(dtype)
    source = triton.compiler.ASTSource(fn=tp_tail_triton, signature=sig, constexprs=constants)
    target = triton.backends.compiler.GPUTarget("cuda", arch, 32)
    options = {"num_warps": NUM_WARPS, "num_stages": 1,
               "extern_libs": extern_libs(nccl_device_bc, library)}
    return triton.compile(source, target=target, options=options)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--arch", type=int, required=True,
                        help="compute capability, e.g. 90 (NCCL 2.32.3's device library needs 90 or newer)")
    parser.add_argument("--dtype", choices=sorted(DTYPES), required=True)
    parser.add_argument("--nccl-device-bc", required=True,
                        help="NCCL 2.32.3's libnccl_device.bc (the release the library's bitcode was built against)")
    parser.add_argument("--library", default=LIBRARY,
                        help="the library's bitcode (default: symm_comm_nccl.bc beside symm.py)")
    parser.add_argument("--out", required=True, help="directory for the cubin, PTX and JSON")
    args = parser.parse_args()
    for path in (args.nccl_device_bc, args.library):
        if not os.path.isfile(path):
            print(f"error: {path} not found", file=sys.stderr)
            return 2
    kernel = compile_kernel(args.arch, args.dtype, args.nccl_device_bc, args.library)
    ptx = kernel.asm["ptx"]
    missing = unresolved(ptx)
    if missing:
        print(f"error: the PTX calls functions nothing defines: {', '.join(missing)}", file=sys.stderr)
        return 1
    os.makedirs(args.out, exist_ok=True)
    stem = os.path.join(args.out, "tp_tail_triton")
    with open(stem + ".cubin", "wb") as f:
        f.write(kernel.asm["cubin"])
    with open(stem + ".ptx", "w") as f:
        f.write(ptx)
    sig, _ = signature(args.dtype)
    meta = {
        "name": kernel.metadata.name,
        "num_warps": kernel.metadata.num_warps,
        "shared": kernel.metadata.shared,
        "params": [name for name, kind in sig.items() if kind != "constexpr"],
        "entry_params": entry_params(ptx, kernel.metadata.name),
        "triton": triton.__version__,
        "arch": args.arch,
        "dtype": args.dtype,
    }
    for key in ("global_scratch_size", "profile_scratch_size"):
        meta[key] = getattr(kernel.metadata, key, 0)
    with open(stem + ".json", "w") as f:
        json.dump(meta, f, indent=1)
    print(json.dumps(meta))
    return 0


if __name__ == "__main__":
    sys.exit(main())
