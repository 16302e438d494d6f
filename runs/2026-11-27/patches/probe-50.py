"""Probe 50's builds (PERF_NOTES.md): run in three checkouts of HEAD 0269502
with patches/change-49.patch applied (and triton/build-bitcode run after),
as python3 probe-50.py /tmp/wt49a a, ... /tmp/wt49b ab, ... /tmp/wt49c abc.
a: the count's word at grid_sync + 8 (the bench allocates 16 bytes);
b: the one-shot's loops one line a thread (no batching);
c: neither fused kernel pushes."""
import sys

from probe_edit import HEADER, count_word_at, grid_sync_bytes, replace

wt, steps = sys.argv[1:3]
if 'a' in steps:
    count_word_at(wt, '(ctx->grid_sync + 2)', 'PROBE a')
if 'b' in steps:
    p = wt + HEADER
    s = open(p).read()
    a = s.index('__device__ __forceinline__ void symm_one_shot(')
    b = s.index("// Both backends' checks")
    open(p, 'w').write(s[:a] + s[a:b].replace('SYMM_UNROLL', '1 /* PROBE b */') + s[b:])
grid_sync_bytes(wt, 16, 'PROBE a')
if 'c' in steps:
    replace(wt + '/layer_tail/kernels/tp_tail.cu',
            'const bool push = hidden % (dtype == SYMM_DTYPE_FLOAT32 ? 2 : 4) == 0;',
            'const bool push = false;  // PROBE c')
    replace(wt + '/layer_tail/triton/tp_tail.py',
            '    if hidden % (64 // elem.primitive_bitwidth) == 0:\n        tp_push(',
            '    if hidden < 0:  # PROBE c\n        tp_push(')
