"""Probe 50's builds (PERF_NOTES.md): run in three checkouts of HEAD 0269502
with patches/change-49.patch applied (and triton/build-bitcode run after),
as python3 probe-50.py /tmp/wt49a a, ... /tmp/wt49b ab, ... /tmp/wt49c abc.
a: the count's word at grid_sync + 8 (the bench allocates 16 bytes);
b: the one-shot's loops one line a thread (no batching);
c: neither fused kernel pushes."""
import sys

wt, steps = sys.argv[1:3]
p = wt + '/symm_comm/kernels/symm_comm.cuh'
s = open(p).read()
if 'a' in steps:
    old = 'unsigned long long* calls_word = (unsigned long long*)staging[rank];'
    assert old in s
    s = s.replace(old, 'unsigned long long* calls_word = (unsigned long long*)(ctx->grid_sync + 2);  // PROBE a')
if 'b' in steps:
    a = s.index('__device__ __forceinline__ void symm_one_shot(')
    b = s.index("// Both backends' checks")
    s = s[:a] + s[a:b].replace('SYMM_UNROLL', '1 /* PROBE b */') + s[b:]
open(p, 'w').write(s)
p = wt + '/benchmarks/src/bin/06_symm_bench.rs'
s = open(p).read()
old = 'let grid_sync = stream.alloc_zeros::<u8>(8).context("grid-barrier words")?;'
assert old in s
s = s.replace(old, 'let grid_sync = stream.alloc_zeros::<u8>(16).context("grid-barrier words")?; // PROBE a')
open(p, 'w').write(s)
if 'c' in steps:
    p = wt + '/layer_tail/kernels/tp_tail.cu'
    s = open(p).read()
    old = 'const bool push = hidden % (dtype == SYMM_DTYPE_FLOAT32 ? 2 : 4) == 0;'
    assert old in s
    open(p, 'w').write(s.replace(old, 'const bool push = false;  // PROBE c'))
    p = wt + '/layer_tail/triton/tp_tail.py'
    s = open(p).read()
    old = '    if hidden % (64 // elem.primitive_bitwidth) == 0:\n        tp_push('
    assert old in s
    open(p, 'w').write(s.replace(old, '    if hidden < 0:  # PROBE c\n        tp_push('))
