"""Probe 53's build (PERF_NOTES.md): in a checkout of HEAD 0269502 with
patches/change-49b.patch applied (and triton/build-bitcode run after), as
python3 probe-53.py DIR: the call count's word at grid_sync + 128 bytes, a
line of its own in the context's grid-barrier memory (the bench allocates
256 bytes), not in the staging window's header."""
import sys

from probe_edit import count_word_at, grid_sync_bytes

wt = sys.argv[1]
count_word_at(wt, '(ctx->grid_sync + 32)', 'PROBE 53')
grid_sync_bytes(wt, 256, 'PROBE 53')
