"""Probe 52's builds (PERF_NOTES.md): in checkouts of HEAD 0269502 after
`probe-51.py DIR 123` (q3), as python3 probe-52.py DIR r1, or DIR r2 H where
H is symm_comm.cuh with change-49.patch applied.
r1: the count's word at grid_sync + 8 (the bench allocates 16 bytes), as
change 49's p49a to p49c had it; r2: the one-shot's loops as change 49 wrote
them (SymmLines, the item range passed in), one line a thread."""
import sys

from probe_edit import grid_sync_bytes

wt, step = sys.argv[1:3]
p = wt + '/symm_comm/kernels/symm_comm.cuh'
s = open(p).read()
if step == 'r1':
    old = '    unsigned int* epoch_word = (unsigned int*)staging[rank];  // the last call\'s epoch'
    assert old in s
    s = s.replace(old, '    unsigned int* epoch_word = ctx->grid_sync + 2;  // PROBE r1')
    grid_sync_bytes(wt, 16, 'PROBE r1')
if step == 'r2':
    # change 49's SymmLines and symm_one_shot, one line a thread.
    h = open(sys.argv[3]).read()
    body = h[h.index('// The lines a call covers'):h.index("// Both backends' checks")]
    body = body.replace('SYMM_UNROLL', '1 /* PROBE r2 */') + '\n'
    a = s.index('template <int DTYPE>\n__device__ __forceinline__ void symm_one_shot(')
    e = s.index("// Both backends' checks")
    s = s[:a] + body + s[e:]
    old = '    const unsigned int epoch = 1u + (unsigned int)((*(volatile unsigned long long*)epoch_word >> 32) & 0x7fffffffu);  // PROBE q3'
    assert old in s
    s = s.replace(old, '''    const unsigned long long calls = *(volatile unsigned long long*)epoch_word >> 32;  // PROBE r2
    const SymmLines lines = {0, 1, (num_elements * element + 7) / 8, 0};
    const size_t item0 = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    const size_t stride = (size_t)gridDim.x * blockDim.x;''')
    for dt in ('FLOAT32', 'BFLOAT16'):
        old = f'symm_one_shot<SYMM_DTYPE_{dt}>(staging, mine, rank, nRanks, num_elements, epoch);'
        assert old in s, old
        s = s.replace(old, f'symm_one_shot<SYMM_DTYPE_{dt}>(staging, mine, rank, nRanks, num_elements, calls, lines, item0, stride);')
open(p, 'w').write(s)
