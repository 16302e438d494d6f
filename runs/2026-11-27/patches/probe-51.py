"""Probe 51's builds (PERF_NOTES.md): run in checkouts of HEAD 0269502 (and
triton/build-bitcode after), as python3 probe-51.py /tmp/wtq1 1, ...
/tmp/wtq2 12, ... /tmp/wtq3 123. 1: symm_grid_sync stores words[1];
2: the one-shot's last barrier is the count's barrier on the staging header,
flag 1 + count mod 2^31 read by thread 0 into shared memory; 3: the count
read by every thread."""
import sys

wt, steps = sys.argv[1:3]
p = wt + '/symm_comm/kernels/symm_comm.cuh'
s = open(p).read()
old = '''    while ((symm_ld_acquire(words) & 0x80000000u) == parity) {
    }
  }
  __syncthreads();
}

// ---- The cross-rank barrier'''
assert old in s
s = s.replace(old, '''    while ((symm_ld_acquire(words) & 0x80000000u) == parity) {
    }
    *(volatile unsigned int*)(words + 1) = parity ^ 0x80000000u;  // PROBE q1
  }
  __syncthreads();
}

// ---- The cross-rank barrier''')
if '2' in steps:
    s = s.replace('// ---- The cross-rank barrier', '''__device__ __forceinline__ void symm_calls_barrier(unsigned long long* word) {  // PROBE q2
  __syncthreads();
  if (threadIdx.x == 0) {
    const unsigned long long add = blockIdx.x == 0 ? (1ull << 32) - (gridDim.x - 1) : 1ull;
    unsigned long long old, now;
    asm volatile("atom.acq_rel.gpu.global.add.u64 %0, [%1], %2;"
                 : "=l"(old) : "l"(word), "l"(add) : "memory");
    do {
      asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(now) : "l"(word) : "memory");
    } while (now >> 32 == old >> 32);
  }
  __syncthreads();
}

// ---- The cross-rank barrier''', 1)
    read = '''    if (threadIdx.x == 0) symm_epoch = symm_next_epoch(*(volatile unsigned int*)epoch_word);
    __syncthreads();
    const unsigned int epoch = symm_epoch;'''
    assert read in s
    count = '(unsigned int)((*(volatile unsigned long long*)epoch_word >> 32) & 0x7fffffffu)'
    if '3' in steps:
        new = f'    const unsigned int epoch = 1u + {count};  // PROBE q3'
    else:
        new = f'''    if (threadIdx.x == 0) symm_epoch = 1u + {count};  // PROBE q2
    __syncthreads();
    const unsigned int epoch = symm_epoch;'''
    s = s.replace(read, new)
    end = '''    symm_grid_sync(ctx->grid_sync);
    if (blockIdx.x == 0 && threadIdx.x == 0) *(volatile unsigned int*)epoch_word = epoch;
    return SYMM_OK;'''
    assert end in s
    s = s.replace(end, '''    symm_calls_barrier((unsigned long long*)epoch_word);  // PROBE q2
    return SYMM_OK;''')
open(p, 'w').write(s)
