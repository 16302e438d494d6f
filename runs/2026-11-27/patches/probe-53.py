"""Probe 53's build (PERF_NOTES.md): in a checkout of HEAD 0269502 with
patches/change-49b.patch applied (and triton/build-bitcode run after), as
python3 probe-53.py DIR: the call count's word at grid_sync + 128 bytes, a
line of its own in the context's grid-barrier memory (the bench allocates
256 bytes), not in the staging window's header."""
import sys

wt = sys.argv[1]
p = wt + '/symm_comm/kernels/symm_comm.cuh'
s = open(p).read()
old = 'unsigned long long* calls_word = (unsigned long long*)staging[rank];'
assert old in s
open(p, 'w').write(s.replace(old, 'unsigned long long* calls_word = (unsigned long long*)(ctx->grid_sync + 32);  // PROBE 53'))
p = wt + '/benchmarks/src/bin/06_symm_bench.rs'
s = open(p).read()
old = 'let grid_sync = stream.alloc_zeros::<u8>(8).context("grid-barrier words")?;'
assert old in s
open(p, 'w').write(s.replace(old, 'let grid_sync = stream.alloc_zeros::<u8>(256).context("grid-barrier words")?; // PROBE 53'))
