"""The edits probes 50 to 53's scripts share (PERF_NOTES.md): each moves the
count's word somewhere and gives the bench the grid-barrier memory it needs."""

BENCH = '/benchmarks/src/bin/06_symm_bench.rs'
HEADER = '/symm_comm/kernels/symm_comm.cuh'


def replace(path, old, new):
    """OLD, which must be in the file at PATH, becomes NEW."""
    s = open(path).read()
    assert old in s, old
    open(path, 'w').write(s.replace(old, new))


def grid_sync_bytes(wt, n, tag):
    """The bench allocates N bytes of grid-barrier memory, not 8."""
    replace(wt + BENCH, 'let grid_sync = stream.alloc_zeros::<u8>(8).context("grid-barrier words")?;',
            f'let grid_sync = stream.alloc_zeros::<u8>({n}).context("grid-barrier words")?; // {tag}')


def count_word_at(wt, address, tag):
    """Change 49's count word (calls_word) at ADDRESS, not the staging header."""
    replace(wt + HEADER, 'unsigned long long* calls_word = (unsigned long long*)staging[rank];',
            f'unsigned long long* calls_word = (unsigned long long*){address};  // {tag}')


def stamps(n, slots):
    """Probes 58 and 59's C: per-rank sums, SLOTS shared stamps of block 0's thread 0,
    %globaltimer, and PROBE<N>(i), which stamps clock64 into slot i."""
    return rf'''
// ---- PROBE {n} (runs/2026-11-27/patches/probe-{n}.py, not committed) ---------
__device__ unsigned long long probe{n}_sum[SYMM_MAX_RANKS][16];
__device__ __forceinline__ unsigned long long& probe{n}_t(int i) {{
  __shared__ unsigned long long t[{slots}];
  return t[i];
}}
__device__ __forceinline__ unsigned long long probe{n}_now() {{
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}}
#define PROBE{n}(i)                                                      \
  do {{                                                                  \
    if (blockIdx.x == 0 && threadIdx.x == 0) probe{n}_t(i) = clock64(); \
  }} while (0)'''


def one_shot_points(header, after_barrier_1, before_barrier_2, after_barrier_2):
    """Inserts the three C lines given into the one-shot of the symm_comm.cuh at HEADER:
    after its first grid barrier (none where None), before its second, after its second."""
    barrier_1 = '''    symm_grid_sync(ctx->grid_sync);
    __shared__ unsigned int symm_epoch;'''
    if after_barrier_1 is not None:
        replace(header, barrier_1, barrier_1.replace('\n', f'\n    {after_barrier_1}\n', 1))
    replace(header, '''    // Every block's sums, visible to every block of the calling kernel.''',
            f'''    {before_barrier_2}
    // Every block's sums, visible to every block of the calling kernel.''')
    replace(header, '''    if (blockIdx.x == 0 && threadIdx.x == 0) *(volatile unsigned int*)epoch_word = epoch;
    return SYMM_OK;''', f'''    if (blockIdx.x == 0 && threadIdx.x == 0) *(volatile unsigned int*)epoch_word = epoch;
    {after_barrier_2}
    return SYMM_OK;''')
