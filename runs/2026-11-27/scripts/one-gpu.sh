#!/usr/bin/env bash
# 2026-11-27, on ONE GPU (several ranks share it: NCCL_MULTI_RANK_GPU_ENABLE=1,
# NCCL 2.32.3). Calls made back to back on one warm machine (files under /tmp
# stay while it is warm), each with CALL=callNN and one PART:
#   PART=stage  carry one piece per call: .nccl/nccl-2.32.3.tar.xz, then
#               .jit/jit-tools.tar.gz (../2026-11-25/scripts/one-gpu-stage.sh
#               makes both)
#   PART=exp1   carry .carry/exp1.txz: HEAD's 06_symm_bench ($G/base) and the
#               same with patches/experiment-1.patch ($G/exp), whose
#               TP_EXPERIMENT bits pick kernel variants (1 no compute, 2 no
#               epilogue, 4 the row kept in registers, 8 columns by tokens);
#               issue 32's phase breakdown and candidate changes at 1 rank
#   PART=exp2   carry .carry/exp2.txz: HEAD's 06_symm_bench ($G/base) and the
#               same with patches/experiment-2.patch ($G/exp: columns by tokens
#               always; bits 16 the pipelined compute loop, 64 the row and gamma
#               kept in registers, 1 and 2 as in exp1; TP_PLAIN_LAUNCH=1 launches
#               fused and symm-layer without cuLaunchCooperativeKernel; the
#               contenders fused-graph and triton-graph); 1 and 2 ranks
#   PART=perf   after the last change (carry .carry/threads.txz the first
#               time, .carry/timing.txz in the stage call before it): issue 31's
#               before/after at 1 rank (05b's fast kernel: 16150d1's
#               05_allreduce_bench against this build's; the fused kernel:
#               cbcc826's 06_symm_bench against a2b4489's, the launch builder's
#               change alone); issue 32's change 6 (a2b4489 against this build)
#               at 1 and 2 ranks, float32 and bfloat16, 8 B to 256 KiB and 16
#               and 128 MiB, the graph contenders; 4 ranks; the default sweeps'
#               wall time at 1 and 2 ranks
#   PART=perf7  change 7 (carry .carry/threads.txz and .carry/c7.txz: change
#               6's 06_symm_bench in $G/c6): change 6 against this build at 1
#               and 2 ranks, float32 and bfloat16, small and large sizes; the
#               default sweeps' wall time at 1 and 2 ranks
#   PART=perf8  change 7 as kept (carry .carry/threads.txz and .carry/c8.txz:
#               change 6's 06_symm_bench in $G/c6, change 7's as first run in
#               $G/c7): the three at 1 and 2 ranks, float32 and bfloat16, small
#               and large sizes; 4 ranks; the default sweeps' wall time
#   PART=perf9  change 8 (carry .carry/c9.txz: 083ecbd's 06_symm_bench in
#               $G/base, this build's in $G/after, and in $G/exp this build's
#               with Triton's BLOCK_T = 32): the three at 1 and 2 ranks,
#               float32 and bfloat16, small and large sizes; the default
#               sweeps' wall time; ncu's stall samples per instruction of
#               both fused kernels at 32 KiB
#   PART=perf10 change 9 (carry .carry/c10.txz: 083ecbd's 06_symm_bench in
#               $G/base, change 8's in $G/c8, this build's in $G/c9, and in
#               $G/exp this build's with Triton's BLOCK_T = 32, built into its
#               own target directory): the four at 1 rank, float32 and
#               bfloat16, small and large sizes, and at 2 ranks small sizes;
#               the default sweeps' wall time
#   PART=verify the thread suite at GPU_TEST_RANKS=2; 06_symm_bench's stress
#               mode on both fused kernels at 2 and 4 ranks (f32, bf16,
#               one-region)
#   PART=programs every program at $RANKS (default "1 2 4") ranks
#   PART=mps    carry .carry/mpi.txz: 06c (NVSHMEM) at 1 and 2 PEs under a
#               private MPS daemon, float32 and bfloat16, and its stress mode
#   PART=last   after ea94c97 (the floor's copy rate measured by rank 0 alone;
#               carry .carry/threads.txz): the thread suite at GPU_TEST_RANKS=2,
#               the stress mode at 2 ranks, and 16 and 128 MiB at 1 and 2 ranks
#               with the floor's note
#   PART=ncu2   carry .carry/ncu.txz (the kept build's 06_symm_bench in
#               $G/final, change 7's first in $G/c7): ncu on tp_tail_fused at
#               8 B and 32 KiB, one rank, both builds, and on the Triton kernel:
#               duration, instructions executed, and the warps' stall reasons
#               per issued instruction, instruction fetch ("no instruction")
#               among them; the kernels' code size (cuobjdump of the cubins)
#   PART=perf11 change 10 (carry .carry/c11.txz: change 8's 06_symm_bench in
#               $G/c8, this build's in $G/c10): the two, in turn, twice at 1
#               rank, float32 small and large sizes; bfloat16 large and 2
#               ranks small once each
#   PART=perf12 change 11 (carry .carry/c12.txz: change 8's 06_symm_bench in
#               $G/c8, this build's in $G/c11): as perf11, with Triton
#   PART=perf13 change 12 (carry .carry/c13.txz: change 8's 06_symm_bench in
#               $G/c8, this build's in $G/c12; and .carry/threads.txz, this
#               build): perf12's runs for change 12; if the fused kernel is at
#               least 2 % faster at 128 MiB in both runs, the thread suite at
#               GPU_TEST_RANKS=2 and the stress mode at 2 ranks
#   PART=perf14 change 13 (carry .carry/c14.txz: change 8's 06_symm_bench in
#               $G/c8, this build's in $G/c13; and .carry/threads.txz, this
#               build): perf12's runs for change 13; if it is kept by its rule
#               (at least 2 % faster at 128 MiB in both runs, no size from 8 B
#               to 256 KiB more than 2 % slower), the thread suite at
#               GPU_TEST_RANKS=2 and the stress mode at 2 ranks
#   PART=perf15 change 14 (carry .carry/c15.txz: change 13's 06_symm_bench in
#               $G/c13, this build's in $G/c14; and .carry/threads.txz, this
#               build): perf14's runs, Triton's time deciding as perf14's rule
#               (at least 2 % faster at 128 MiB in both runs, no size from 8 B
#               to 256 KiB more than 2 % slower); if kept, the thread suite at
#               GPU_TEST_RANKS=2, the stress mode at 2 ranks and 06b at 1, 2, 4
#   PART=perf16 change 15 (carry .carry/c16.txz: change 13's 06_symm_bench in
#               $G/c13, this build's in $G/c15, the diagnostic build without
#               the tokens test in $G/c15u; and .carry/threads.txz, this
#               build): perf15's runs for the three; kept by change 15's rule
#               (PERF_NOTES.md), then perf15's suite, stress mode and 06b
#   PART=perf17 change 17 (carry .carry/c17.txz: change 15's 06_symm_bench in
#               $G/c15, this build's in $G/c17; and .carry/threads.txz, this
#               build): perf15's runs, kept by change 17's rule (PERF_NOTES.md),
#               then the thread suite at GPU_TEST_RANKS=2 and the stress mode
#   PART=perf18 changes 18, 19 and 20 (carry .carry/c18.txz: HEAD 164dc68's
#               06_symm_bench in $G/c17, changes 18 and 19's in $G/c18, the same
#               with change 20 in $G/c20; and .carry/threads.txz, c20's build):
#               the three in turn, twice at 1 rank in float32, once in
#               bfloat16 (small and large sizes) and at 2 ranks; each change
#               kept by its rule (PERF_NOTES.md, decision.txt); the stress mode
#               at 2 ranks with k = 40 and k = 100 on c20's build; if all three
#               are kept, the thread suite at GPU_TEST_RANKS=2 and the stress mode
#   PART=perf21 changes 21, 22 and 23, as perf18 (carry .carry/c21.txz: HEAD's
#               build in $G/c17, changes 21 and 23's in $G/c21, the same with
#               change 22 in $G/c22; and .carry/threads.txz, c22's build;
#               KEEP_ALL="21 23 22" runs the suite if all three are kept)
#   PART=perf24 change 24, as perf18 (carry .carry/c24.txz: c21 from perf21 in
#               $G/c21, the same with change 24 in $G/c24); no suite
#   PART=perf25 changes 25 to 28, as perf18 (carry .carry/c25.txz: HEAD f85a061's
#               build in $G/c23, changes 25 and 26's in $G/c25, with 27 in $G/c27,
#               with 28 in $G/c28); no suite
#   PART=probe29 carry .carry/c29.txz: $G/c23 and $G/c27 from perf25, $G/cu (c27
#               with its aligned branches compiled out: the unaligned path
#               alone) and $G/c29 (c27 with bfloat16's one-row loop as before
#               change 26): 8 B to 256 KiB three times each in float32 and
#               bfloat16, 16 and 128 MiB twice in bfloat16 (c27, c29); change
#               29 kept by its rule (decision.txt); the stress mode on c29
#   PART=perf30 carry .carry/c30.txz: $G/c29 (the committed build) and $G/c30
#               (change 30): each twice, in turn, at 1 rank, float32 and bfloat16,
#               8 B to 256 KiB and 16 and 128 MiB; change 30 kept by its rule
#               (decision.txt); the stress mode on c30's Triton kernel, bfloat16
#   PART=perf31 carry .carry/c31.txz: $G/c30 (HEAD d9220f9's build), $G/c31
#               (change 31), $G/c32 and $G/c32n (change 32, two ways): each twice,
#               in turn, at 1 rank, float32 and bfloat16, 8 B to 256 KiB and 16
#               and 128 MiB; changes kept by their rules (decision.txt); the
#               stress mode at 2 ranks on c32n and c32 (2 to 32 MiB, k = 16, 40, 100)
#   PART=perf33 carry .carry/c33.txz: $G/c31 (change 31's build), $G/c33 and
#               $G/c33s (change 33, two ways), as perf31; the stress mode at 2 ranks
#               on c33 and c33s (both types, 8 B to 1 MiB and 2 to 32 MiB, k = 40)
#   PART=perf34 carry .carry/c34.txz: $G/c31 (change 31's build), $G/c34 and
#               $G/c34p (change 34, two ways), as perf31; the stress mode at 2 ranks
#               on both (both types, 8 B to 1 MiB and 2 to 32 MiB, k = 40 and 100)
#   PART=probe35 carry .carry/c35.txz: $G/c31, $G/c35 (change 35), $G/c35f and
#               $G/c35b (c35 with the fused kernel's dtype compiled in: float32
#               runs only, bfloat16 runs only), as perf31 in the dtypes each can
#               run; change 35 kept by its rule (decision.txt); the stress mode at
#               2 ranks on c35 (both types, 8 B to 1 MiB and 2 to 32 MiB)
#   PART=perf36 carry .carry/c36.txz: $G/c35 (change 35's build) and $G/c36
#               (change 36), as perf31; the nvcc route's cubins of both (for their
#               layout); the stress mode at 2 ranks on c36 (both types, 8 B to 1 MiB
#               and 2 to 32 MiB, k = 40 and 100)
#   PART=perf37 carry .carry/c37.txz: $G/c35 (HEAD a9b0d16's build) and $G/c37
#               (change 37), as perf36 (the nvcc route's cubins; the stress mode on c37)
#   PART=perf38 carry .carry/c38.txz: $G/c35 (HEAD's build), $G/c38 and $G/c38p
#               (change 38, two ways), as perf37
#   PART=perf39 carry .carry/c39.txz: $G/c35 (HEAD's build) and $G/c39 (change 39,
#               the Triton kernel's tiles of 32 tokens), as perf31; the stress mode
#               on c39's Triton kernel at 2 ranks (both types, 8 B to 256 KiB and 2
#               to 32 MiB, k = 40 and 100)
#   PART=perf40 carry .carry/c40.txz: $G/c35 (HEAD's build) and $G/c40 (change 40,
#               the Triton kernel's tiles of 32 tokens where every program has two),
#               as perf39
#   PART=perf41 carry .carry/c41.txz: $G/c40 (HEAD 9aebf2f's build), $G/c41 (change
#               41, the CUDA compute phase's steps with no test per j and its stores
#               a row at a time) and $G/c42 (c41 with change 42, the CUDA kernel's
#               activations copied a chunk ahead, and change 43, the Triton kernel's
#               64-token tiles), as perf31; the stress mode at 2 ranks on c42, both
#               kernels (both types, 8 B to 256 KiB and 2 to 32 MiB, k = 40 and 100);
#               the nvcc route's cubins of the three
#   PART=final  after the last change to GPU code (carry .carry/threads.txz;
#               STAND=1 adds stand: the fused and unfused contenders side by side):
#               the thread suite at GPU_TEST_RANKS=2; the stress mode at 2
#               ranks (float32, bfloat16, one-region, 2 to 32 MiB, k = 40 and
#               100); lessons 06 and 06b and the two "your kernel" examples at
#               1, 2 and 4 ranks; 06_symm_bench's default sweep at 1 and 2 ranks
#   PART=stand  carry .carry/threads.txz: stand (above) alone, DTYPES="f32 bf16"
#   PART=sweeps carry .carry/threads.txz: 06_symm_bench's default sweep at 1
#               and 2 ranks (its wall time in each log), every operation checked
#   PART=ncu4   carry .carry/threads.txz: ncu (caches flushed) on the fused
#               Triton and CUDA kernels at 128 MiB, one rank, float32 (or
#               NCU_DTYPE=bf16; NCU_BIN another 06_symm_bench; NCU_SIZE another
#               size than 128M): speed
#               of light, memory, warp state, and the warps' stall samples
#               per SASS instruction (the source page as CSV, gzipped)
#   PART=ncu5   carry .carry/threads.txz and .carry/c41.txz: ncu (caches flushed) on
#               the fused CUDA kernel at 256 KiB, one rank, float32, of HEAD 9aebf2f's
#               build ($G/c40) and the committed one ($G/threads), and at 128 MiB in
#               bfloat16 of the committed one: as ncu4
#   PART=probe44 carry .carry/threads.txz: why unfused05-graph took 12.4 µs at 8 B
#               in call 291's default sweep and 8.2 in its side-by-side run (one
#               rank, the nvcc route): the same binary, 8 B to 256 KiB (and to 512
#               MiB), with unfused05-graph alone, with the default contender list,
#               and with the side-by-side list, each twice in turn
#   PART=probe45 carry .carry/p45.txz (06_symm_bench with patches/probe-45.patch,
#               in $G/p45): what one operation costs the host and the GPU at 1, 2
#               and 4 ranks on one GPU: each contender's host enqueue time per
#               operation beside its event time, with the stream free and with it
#               held by a 1 GiB memset while the host enqueues each round
#               (BENCH_HOLD_BYTES), 8 B to 256 KiB, float32, twice each in turn
#   PART=perf45 carry .carry/c45.txz (06_symm_bench of HEAD with probe 45's prints
#               in $G/p45, of change 45 with them and SYMM_EXPERIMENT bits in $G/c45):
#               the two in turn at 2 ranks (twice) and 1 rank (twice), float32, 8 B
#               to 256 KiB; 2 ranks in bfloat16 and 4 ranks once; c45 with bits 2, 8
#               and 10 at 2 ranks; c45's stress mode at 2 and 4 ranks; decide.py
#   PART=perf49 carry .carry/c49.txz (06_symm_bench of HEAD 0269502 in $G/c48,
#               with change 49 in $G/c49; .carry/threads.txz may come along,
#               extracted for PART=final): the two in turn, float32 at 2 and 1
#               ranks three times each, bfloat16 at 2 ranks and float32 at 4
#               twice each, 8 B to 256 KiB; c49's stress mode at 2 and 4 ranks
#               and --bad-input at 2; decide.py perf49
#   PART=probe50 carry .carry/c50.txz (patches/probe-50.py's builds p49a, p49b
#               and p49c; c48 and c49 from .carry/c49.txz): the five
#               in turn, float32, 2 and 1 ranks, twice each, 8 B to 256 KiB
#   PART=probe51 carry .carry/c51.txz (patches/probe-51.py's builds q1, q2
#               and q3 of HEAD 0269502) and .carry/c49.txz and .carry/c50.txz
#               (c48 and p49c): the five in turn, float32, 2 and 1 ranks, twice
#   PART=probe52 carry .carry/c52.txz (patches/probe-52.py's builds r1 and r2)
#               and c49, c50 and c51 (c48, p49c, q3): the five in turn,
#               float32, 2 and 1 ranks, twice
#   PART=perf49b carry .carry/c53.txz (change 49b's 06_symm_bench, $G/c49b),
#               .carry/c49.txz (c48) and .carry/threads.txz (extracted for
#               PART=final): as PART=perf49 with c49b in c49's place;
#               decide.py perf49b
#   PART=probe53 carry .carry/c54.txz (patches/probe-53.py's build c49c),
#               .carry/c53.txz (c49b) and .carry/c49.txz (c48): the three in
#               turn, float32, 2 ranks three times and 1 rank twice
#   PART=probe54 carry .carry/c55.txz (patches/probe-54.py's build p54: the
#               fused CUDA kernel prints its phases' times) and .carry/c49.txz
#               (c48, HEAD's GPU code): the two in turn at 2 and 1 ranks, float32,
#               three times; p54 once more in bfloat16 at 2 ranks and at 4 ranks
#   PART=perf55 carry .carry/c56.txz (c55a: change 55a; c55b: 55a and 55b)
#               and .carry/c49.txz (c48): the three in turn, float32 at 2 and 1
#               ranks three times, bfloat16 at 2 ranks twice, 4 ranks once; 16
#               and 128 MiB at 1 rank for c55a and c55b, both types, twice; the
#               stress mode and --bad-input on c55b; decide.py perf55
#   PART=perf56 carry .carry/c57.txz (c56: change 56; c56b: 56 and 55b) and
#               .carry/c49.txz (c48): as perf55, with 16 and 128 MiB for all
#               three and bfloat16 at 1 rank twice; decide.py perf56
#   PART=probe57 carry .carry/c58.txz (patches/probe-57.py's build p57): with
#               and without PROBE57_SHARE in turn, float32 at 2 ranks four times,
#               1 rank twice, 4 ranks once; bfloat16 at 2 ranks twice
#   PART=probe58 carry .carry/c59.txz (patches/probe-58.py's build p58: block
#               0 of the fused CUDA kernel prints its steps' cycles) and
#               .carry/c49.txz (c48): the two in turn, float32 at 1 and 2 ranks
#               twice, bfloat16 once
#   PART=probe59 carry .carry/c60.txz (patches/probe-59.py's build p59: block
#               0 of the fused CUDA kernel prints the AllReduce's steps' cycles):
#               float32 at 2 ranks three times and 1 rank once, bfloat16 at 2
#               ranks once, 4 ranks once
#   PART=perf57 carry .carry/c61.txz (c57a: change 57a; c57b: 57a and 57b)
#               and .carry/c49.txz (c48): as perf56; decide.py perf57
#   PART=perf57c carry .carry/c62.txz (c57c), .carry/c61.txz (c57a) and
#               .carry/c49.txz (c48): as perf56, 16 and 128 MiB for c48 and c57c,
#               no bfloat16 at 1 rank; decide.py perf57c
#   PART=perf57d carry .carry/c63.txz (c57d) and .carry/c49.txz (c48): as
#               perf57c with the two; decide.py perf57d
#   PART=confirm57d carry .carry/c63.txz (c57d) and .carry/c49.txz (c48): the
#               two in turn, float32, 2 ranks six times and 1 rank twice;
#               decide.py confirm57d (by medians)
#   PART=perf60 carry .carry/c64.txz (c60a: change 55a on 57d's tree; c60: 60a
#               and whole lines in one 8-byte load or store) and .carry/c63.txz
#               (c57d, HEAD's GPU code): the three in turn, 2 ranks six times and 1
#               rank twice, float32 and bfloat16; c60's stress mode and
#               --bad-input; decide.py perf60 (by medians)
#   PART=perf60c carry .carry/c65.txz (c60c: change 60 in the C API's builds
#               only) and .carry/c63.txz: as perf60 with c57d and c60c;
#               decide.py perf60c
#   PART=confirm60c carry .carry/c65.txz and .carry/c63.txz: c57d and c60c in
#               ABBA order, eight runs at 2 ranks and two at 1, both types;
#               decide.py confirm60c (by medians)
#   PART=confirm60c2 the same carries: ten runs at 2 ranks (CONFIRM_RUNS=N for N)
#               and three at 1, ABBA;
#               decide.py confirm60c2 (medians of the runs whose NCCL graph was not
#               slow)
#   PART=confirm60c3 the same carries: twelve runs at 2 ranks (CONFIRM_RUNS=N)
#               and three at 1, ABBA; decide.py confirm60c3 (the control:
#               decide.py unslowed_runs); then PART=final STAND=1 on 60c's tree
#               if it pays
#   PART=confirm61 carry .carry/c63.txz, .carry/c65.txz and .carry/c66.txz: c57d,
#               c60c and c61 in turn, twelve runs at 2 ranks (CONFIRM_RUNS=N) and
#               three at 1; decide.py confirm61; then PART=final STAND=1 on the
#               kept tree
#   PART=confirm62 carry .carry/c66.txz and .carry/c67.txz: c61 and c62 in ABBA
#               order, ten runs at 2 ranks (CONFIRM_RUNS=N) and three at 1;
#               decide.py confirm62; then PART=final STAND=1 on 62's tree if it pays
#   PART=confirm63 carry .carry/c66.txz and .carry/c68.txz: as confirm62 with c63,
#               eight runs at 2 ranks
#   PART=confirm64 carry .carry/c68.txz and .carry/c69.txz: c63 and c64 (Triton's one-row
#               epilogue keeps its first chunk and gamma) in ABBA order, ten runs at 1 rank
#               and six at 2 (CONFIRM_RUNS=N for the 1-rank runs), both types; 16 and 128
#               MiB at 1 rank twice; c63 from 8 and from 16 to 64 B by doubling, three
#               runs each;
#               decide.py confirm64; then PART=final STAND=1 on 64's tree if it pays
#   PART=confirm45 carry .carry/c45.txz: p45 and c45 in turn at 1 rank, three
#               times each, float32, 8 B to 256 KiB; decide.py confirm45
#   PART=probe46 carry .carry/threads.txz: the committed build's 06_symm_bench
#               at 1 and 2 ranks, float32, 8 B to 256 KiB, on the default grid
#               and with --blocks 8, 16 and 32, twice each in turn
#   PART=probe47 carry .carry/threads.txz: as probe46 at 2 ranks only, with the
#               default grid (66) and --blocks 65, 64, 48 and 32, twice each in
#               turn; and 16 and 128 MiB at 2 ranks on 66, 64 and 32 blocks
#   PART=probe48 carry .carry/c48.txz (06_symm_bench of fa22845 with
#               patches/probe-48.patch in $G/p48, the same with change 45's
#               symm_comm.cuh and bitcode in $G/c48; each prints its ranks'
#               grid-barrier addresses): the two in turn, eight times each, at 2
#               ranks, fused and symm-layer, 8 B, 512 B and 32 KiB
#   PART=two-gpus carry .carry/threads.txz, on a machine with 2 GPUs (one rank
#               each; the staging parts as on one): the thread suite at
#               GPU_TEST_RANKS=2 and the stress mode at 2 ranks (as final), the
#               fused and unfused contenders side by side at 2 ranks in float32
#               (twice; three times from call 379 on) and bfloat16 (once; twice
#               from call 379 on), lesson 06 and 06b at 2 ranks
#   PART=ncu3   carry .carry/threads.txz: ncu on tp_compute (the compute
#               phase alone, from the unfused05 contender) and tp_tail_fused at
#               128 MiB, one rank: throughput, memory, stall reasons, scheduler
#   PART=ncu1   after exp1: ncu on the fused CUDA and Triton kernels and the
#               AllReduce alone at 8 B, one rank, with the SASS source page
# Logs go to $OUT/$CALL/ (index.txt: each step's exit code), returned as
# $OUT/$CALL.tgz.
set -u
CALL=${CALL:?CALL=callNN}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
L=$OUT/$CALL; mkdir -p "$L"
# run NAME LIMIT CMD...: one step, logged to $L/NAME.log (the command, the
# start, the output, the end, the exit code) and listed in $L/index.txt; a step that
# would start past $BUDGET seconds is listed as skipped.
run() {
  local name=$1 lim=$2; shift 2
  if [ $((SECONDS + 5)) -gt ${BUDGET:-560} ]; then
    printf '%-34s %s\n' "$name" "skipped: out of time" | tee -a "$L/index.txt"; return
  fi
  [ $((SECONDS + lim)) -gt ${BUDGET:-560} ] && lim=$((${BUDGET:-560} - SECONDS))
  { echo "\$ $*"; date -u +%FT%TZ; timeout "$lim" "$@"; rc=$?; date -u +%FT%TZ; echo "exit $rc"; } > "$L/$name.log" 2>&1
  printf '%-34s %s\n' "$name" "$(tail -1 "$L/$name.log")" | tee -a "$L/index.txt"
}
S=/tmp/jit/site                         # NCCL 2.32.3 in a wheel's layout, nvJitLink 13.5
J=$S/nvidia/nccl
NVJ=$S/nvidia/cu13/lib/libnvJitLink.so.13
G=/tmp/g
E32=(env -u LD_LIBRARY_PATH NCCL_HOME=$J NVJITLINK=$NVJ XDG_CACHE_HOME=/tmp/cache
     TRITON_PYTHON=/opt/torch/.venv/bin/python)
SHARE=(NCCL_MULTI_RANK_GPU_ENABLE=1)
CMP=runs/2026-11-25/scripts/compare.py
# The GPU, its driver and the time, in every call's logs.
{ nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,memory.total,compute_mode --format=csv
  date -u; } > "$L/recon.log" 2>&1
# The logs come back as one archive, $OUT/$CALL.tgz (a call returns few files).
finish() { tar czf "$OUT/$CALL.tgz" -C "$OUT" "$CALL" && rm -rf "$L"; }
trap finish EXIT

# The thread suite at GPU_TEST_RANKS=2, then the stress mode at 2 ranks on both
# fused kernels (float32, bfloat16, one-region, 2 to 32 MiB), from
# $G/threads; sets B and R2 for the steps after it.
suite_and_stress() {
  B=$G/threads/bin
  run suite-threads-n2 ${SUITE_LIMIT:-330} "${E32[@]}" GPU_TEST_RANKS=2 PATH=$G/threads/bin:$PATH \
    $G/threads/cargo-nextest nextest run --archive-file $G/threads/tests.tar.zst --workspace-remap . \
    --run-ignored all --no-fail-fast --test-threads 1
  R2=("${E32[@]}" NTHREADS=2 "${SHARE[@]}")
  for d in f32 bf16; do
    run 06-stress-$d-n2 60 "${R2[@]}" $B/06_symm_bench --build nvcc --contenders fused,triton --dtype $d --stress 500 -b 8 -e 1M -f 8
  done
  run 06-stress-one-region-n2 60 "${R2[@]}" $B/06_symm_bench --build nvcc --contenders fused,triton --stress 500 --one-region -b 8 -e 1M -f 8
  run 06-stress-big-n2 90 "${R2[@]}" $B/06_symm_bench --build nvcc --contenders fused,triton --stress 50 -b 2M -e 32M -f 4
}

# Where issue 32's targets stand, on $B's build: the fused kernels and the
# unfused paths side by side, perf25's sizes and settings, in each dtype named
# (default both; unfused05-graph, lesson 05b's kernels, sums float32 only).
# STAND_RUNS=N (from call 377 on; default 1) repeats the small sizes at 1 and 2
# ranks and the big ones N times in turn, runs 2.. suffixed -2, -3, ...
# (call 313 ran float32 at 2 ranks twice); scripts/stand.py reads each size by
# its median over the runs.
stand() {
  local d i s C SMALL BIG R=("${E32[@]}" NTHREADS=1) R2=("${E32[@]}" NTHREADS=2 "${SHARE[@]}")
  for i in $(seq 1 ${STAND_RUNS:-1}); do
    s=; [ $i = 1 ] || s=-$i
    for d in ${@:-f32 bf16}; do
      C=(--contenders fused,triton,unfused-nccl-graph); [ $d = f32 ] && C[1]+=,unfused05-graph
      SMALL=(--build nvcc -b 8 -e 256K -f 8 -n 20 -w 5 --trials 3 "${C[@]}" --dtype $d)
      BIG=(--build nvcc -b 16M -e 128M -f 8 -n 8 -w 2 --trials 3 "${C[@]}" --dtype $d)
      run stand-small-$d$s 60 "${R[@]}" $B/06_symm_bench "${SMALL[@]}" --json $L/stand-small-$d$s.json
      run stand-big-$d$s 60 "${R[@]}" $B/06_symm_bench "${BIG[@]}" --json $L/stand-big-$d$s.json
      run stand-small-$d-n2$s 60 "${R2[@]}" $B/06_symm_bench "${SMALL[@]}" --json $L/stand-small-$d-n2$s.json
      # Call 313 ran float32 at 2 ranks twice when STAND_RUNS did not exist.
      [ ${STAND_RUNS:-1} = 1 ] && [ $d = f32 ] && run stand-small-f32-n2-2 60 "${R2[@]}" $B/06_symm_bench "${SMALL[@]}" --json $L/stand-small-f32-n2-2.json
      [ $i = 1 ] && [ $d = f32 ] && run stand-small-f32-n4 90 "${E32[@]}" NTHREADS=4 "${SHARE[@]}" $B/06_symm_bench "${SMALL[@]}" --json $L/stand-small-f32-n4.json
    done
  done
  python3 runs/2026-11-27/scripts/stand.py $L > $L/stand.txt 2>&1; cat $L/stand.txt
}

# build_variants "V1 V2 ..." [DTYPE...]: builds each variant's modules once
# ($G/V/06_symm_bench at 8 B, one rank, its own cache /tmp/cache-V), so that
# the timed runs after it only time: step build-V, or build-V-DTYPE for each
# dtype named.
build_variants() {
  local v d variants=$1; shift
  local W=(--build nvcc -b 8 -e 8 -n 1 -w 0 --trials 1 --contenders fused,triton)
  for v in $variants; do
    local B=("${E32[@]}" NTHREADS=1 XDG_CACHE_HOME=/tmp/cache-$v $G/$v/06_symm_bench "${W[@]}")
    [ $# = 0 ] && run build-$v 200 "${B[@]}"
    for d; do run build-$v-$d 200 "${B[@]}" --dtype $d; done
  done
}

# unpack C...: each .carry/C.txz there is, into $G (its builds' folders).
unpack() {
  local c
  for c; do
    [ -f .carry/$c.txz ] && { mkdir -p $G && tar -xJf .carry/$c.txz -C $G --strip-components=1; }
  done
}

# nvcc_modules: every build in $V compiles its nvcc route's modules once, in parallel, before
# any timed run (the module cache is shared; a compile must not land in a timing).
nvcc_modules() {
  local v d
  for v in $V; do
    for d in f32 bf16; do
      "${E32[@]}" NTHREADS=1 $G/$v/06_symm_bench --build nvcc -b 8 -e 8 -n 1 -w 0 --trials 1 --contenders fused,triton --dtype $d > $L/build-$v-$d.log 2>&1 &
    done
  done
  wait
}

# order_of I: run I's order of the builds in $V: $V turned left by I - 1 (three builds), or
# reversed in even runs (two: ABBA). A part with an order of its own redefines it (perf60).
order_of() {
  set -- $1 $V
  if [ $# = 4 ]; then
    case $(($1 % 3)) in 1) echo $2 $3 $4 ;; 2) echo $3 $4 $2 ;; 0) echo $4 $2 $3 ;; esac
  elif [ $(($1 % 2)) = 0 ]; then echo $3 $2; else echo $2 $3; fi
}

# in_turn RUNS ONE [TWO]: runs i = 1 to RUNS of each build, in the order `order_of i` prints,
# 8 B to 256 KiB with the fused, Triton, symm-layer and NCCL-graph contenders, float32 and
# bfloat16, at 2 ranks in the first TWO runs (default all), and at 1 rank in the first ONE
# runs; each run's report n<ranks>-<type>-<build>-<i>.json.
in_turn() {
  local i n d v
  local t=(--build nvcc -b 8 -e 256K -f 8 -n 20 -w 5 --trials 3 --contenders fused,triton,symm-layer,unfused-nccl-graph)
  for i in $(seq 1 $1); do
    for n in 2 1; do
      { [ $n = 1 ] && [ $i -gt $2 ]; } && continue
      { [ $n = 2 ] && [ $i -gt ${3:-$1} ]; } && continue
      for d in f32 bf16; do
        for v in $(order_of $i); do
          run n$n-$d-$v-$i 60 "${E32[@]}" NTHREADS=$n "${SHARE[@]}" $G/$v/06_symm_bench "${t[@]}" --dtype $d --json $L/n$n-$d-$v-$i.json
        done
      done
    done
  done
}

# printing_probe CONTENDERS: T, the timed runs' options, and W, a build's, for a
# probe build that prints a size's times when the next size starts (so to 2 MiB).
printing_probe() {
  T=(--build nvcc -b 8 -e 2M -f 8 -n 20 -w 5 --trials 3 --contenders $1)
  W=(--build nvcc -b 8 -e 8 -n 1 -w 0 --trials 1 --contenders fused)
}

# stress_and_decide X: the stress mode on build X (float32, bfloat16 and
# one-region at 2 ranks, float32 at 4), its --bad-input at 2 ranks, then
# decide.py $PART into decision.txt.
stress_and_decide() {
  local x=$1 d
  R2=("${E32[@]}" NTHREADS=2 "${SHARE[@]}")
  for d in f32 bf16; do
    run stress-$d-$x-n2 60 "${R2[@]}" $G/$x/06_symm_bench --build nvcc --contenders fused,triton --dtype $d --stress 500 -b 8 -e 1M -f 8
  done
  run stress-one-region-$x-n2 60 "${R2[@]}" $G/$x/06_symm_bench --build nvcc --contenders fused,triton --stress 500 --one-region -b 8 -e 4M -f 8
  run stress-f32-$x-n4 90 "${E32[@]}" NTHREADS=4 "${SHARE[@]}" $G/$x/06_symm_bench --build nvcc --contenders fused,triton --stress 200 -b 8 -e 1M -f 8
  run bad-input-$x-n2 60 "${R2[@]}" $G/$x/06_symm_bench --bad-input
  python3 runs/2026-11-27/scripts/decide.py $L $PART > $L/decision.txt 2>&1; cat $L/decision.txt
}

# side_by_side "BUILDS" "BIGS" N1BF16 X: BUILDS (the baseline first, each in
# $G) in turn, float32 at 2 and 1 ranks three times, bfloat16 at 2 ranks twice
# (and at 1 rank twice where N1BF16 is yes), 4 ranks once; 16 and 128 MiB at 1
# rank for BIGS, both types, twice; the stress mode and --bad-input on X (the
# build with every change); then decide.py $PART.
side_by_side() {
  local builds=$1 bigs=$2 n1bf16=$3 x=$4 first=${1%% *} v d i n
  C=fused,triton,symm-layer,unfused-nccl-graph,unfused05-graph
  T=(--build nvcc -b 8 -e 256K -f 8 -n 20 -w 5 --trials 3)
  BIG=(--build nvcc -b 16M -e 128M -f 8 -n 8 -w 2 --trials 3 --contenders fused,triton)
  W=(--build nvcc -b 8 -e 8 -n 1 -w 0 --trials 1 --contenders fused,triton)
  # The first build alone (the modules every build shares), then the rest side by side.
  run build-$first-f32 200 "${E32[@]}" NTHREADS=1 $G/$first/06_symm_bench "${W[@]}"
  for v in $builds; do
    for d in f32 bf16; do
      [ $v-$d = $first-f32 ] && continue
      "${E32[@]}" NTHREADS=1 $G/$v/06_symm_bench "${W[@]}" --dtype $d > $L/build-$v-$d.log 2>&1 &
    done
  done
  wait
  for i in 1 2 3; do
    for n in 2 1; do
      for v in $builds; do
        run n$n-f32-$v-$i 60 "${E32[@]}" NTHREADS=$n "${SHARE[@]}" $G/$v/06_symm_bench "${T[@]}" --contenders $C --json $L/n$n-f32-$v-$i.json
      done
    done
  done
  for i in 1 2; do
    for v in $builds; do
      run n2-bf16-$v-$i 60 "${E32[@]}" NTHREADS=2 "${SHARE[@]}" $G/$v/06_symm_bench "${T[@]}" --contenders fused,triton,unfused-nccl-graph --dtype bf16 --json $L/n2-bf16-$v-$i.json
    done
  done
  [ $n1bf16 = yes ] && for i in 1 2; do
    for v in $builds; do
      run n1-bf16-$v-$i 60 "${E32[@]}" NTHREADS=1 $G/$v/06_symm_bench "${T[@]}" --contenders fused,triton,unfused-nccl-graph --dtype bf16 --json $L/n1-bf16-$v-$i.json
    done
  done
  for v in $builds; do
    run n4-f32-$v-1 90 "${E32[@]}" NTHREADS=4 "${SHARE[@]}" $G/$v/06_symm_bench "${T[@]}" --contenders $C --json $L/n4-f32-$v-1.json
  done
  for i in 1 2; do
    for v in $bigs; do
      for d in f32 bf16; do
        run big-$d-$v-$i 60 "${E32[@]}" NTHREADS=1 $G/$v/06_symm_bench "${BIG[@]}" --dtype $d --json $L/big-$d-$v-$i.json
      done
    done
  done
  stress_and_decide $x
}

case ${PART:?PART=stage|exp1|exp2|perf|perf7|perf8|perf9|perf10|perf11|perf12|perf13|perf14|perf15|perf16|perf17|perf18|perf21|perf24|perf25|probe29|perf30|perf31|perf33|perf34|probe35|perf36|perf37|perf38|perf39|perf40|perf41|probe44|probe45|perf45|confirm45|perf49|perf49b|probe50|probe51|probe52|probe53|probe54|perf55|perf56|probe57|probe58|probe59|perf57|perf57c|perf57d|confirm57d|perf60|perf60c|confirm60c|confirm60c2|confirm60c3|confirm61|confirm62|confirm63|confirm64|probe46|probe47|probe48|two-gpus|final|stand|sweeps|ncu4|ncu5|ncu3|verify|programs|mps|last|ncu2|ncu1} in
stage)
  mkdir -p $J /tmp/jit
  if [ -f .nccl/nccl-2.32.3.tar.xz ]; then
    tar -xJf .nccl/nccl-2.32.3.tar.xz -C $J --strip-components=1 && ln -sf libnccl.so.2 $J/lib/libnccl.so
    echo "staged NCCL 2.32.3" | tee -a "$L/index.txt"
  fi
  if [ -f .jit/jit-tools.tar.gz ]; then
    tar -xzf .jit/jit-tools.tar.gz -C /tmp/jit && echo "staged jit-tools" | tee -a "$L/index.txt"
  fi
  ;;
exp1)
  [ -f .carry/exp1.txz ] && { mkdir -p $G && tar -xJf .carry/exp1.txz -C $G --strip-components=1; }
  R=("${E32[@]}" NTHREADS=1)
  # Build every variant's module first, in parallel (each is its own nvcc
  # build: TP_EXPERIMENT is a -D), so that the timed runs below only time.
  W=(--build nvcc -b 8 -e 8 -n 1 -w 0 --trials 1)
  run build-base 200 "${R[@]}" $G/base/06_symm_bench "${W[@]}" --contenders fused,triton
  for bits in 0 1 2 4 8 12 3; do
    "${R[@]}" TP_EXPERIMENT=$bits $G/exp/06_symm_bench "${W[@]}" --contenders fused > $L/build-exp$bits.log 2>&1 &
  done
  wait
  tail -n 3 $L/build-exp*.log > $L/build-exp.txt 2>&1
  SMALL=(--build nvcc -b 8 -e 256K -f 8 -n 20 -w 5 --trials 3)
  BIG=(--build nvcc -b 16M -e 128M -f 8 -n 8 -w 2 --trials 3)
  # Small sizes: base with its controls; each variant; base again.
  for i in 1 2; do
    run small-base-$i 60 "${R[@]}" $G/base/06_symm_bench "${SMALL[@]}" --contenders fused,triton,symm-layer,unfused05,unfused-nccl-graph --json $L/small-base-$i.json
    for bits in 0 4 8 12 1 2 3; do
      run small-exp$bits-$i 40 "${R[@]}" TP_EXPERIMENT=$bits $G/exp/06_symm_bench "${SMALL[@]}" --contenders fused,unfused05 --json $L/small-exp$bits-$i.json
    done
  done
  # Large sizes: the phases (no compute, no epilogue) and the candidates.
  for i in 1 2; do
    run big-base-$i 60 "${R[@]}" $G/base/06_symm_bench "${BIG[@]}" --contenders fused,triton,unfused05 --json $L/big-base-$i.json
    for bits in 4 12 1 2; do
      run big-exp$bits-$i 40 "${R[@]}" TP_EXPERIMENT=$bits $G/exp/06_symm_bench "${BIG[@]}" --contenders fused,unfused05 --json $L/big-exp$bits-$i.json
    done
  done
  python3 $CMP $L/small-base-1.json $L/small-exp0-1.json $L/small-exp4-1.json $L/small-exp8-1.json $L/small-exp12-1.json $L/small-exp1-1.json $L/small-exp2-1.json $L/small-exp3-1.json $L/small-base-2.json > $L/small-1.txt 2>&1
  python3 $CMP $L/small-base-2.json $L/small-exp0-2.json $L/small-exp4-2.json $L/small-exp8-2.json $L/small-exp12-2.json $L/small-exp1-2.json $L/small-exp2-2.json $L/small-exp3-2.json > $L/small-2.txt 2>&1
  python3 $CMP $L/big-base-1.json $L/big-exp4-1.json $L/big-exp12-1.json $L/big-exp1-1.json $L/big-exp2-1.json $L/big-base-2.json $L/big-exp4-2.json $L/big-exp12-2.json $L/big-exp1-2.json $L/big-exp2-2.json > $L/big.txt 2>&1
  ;;
exp2)
  [ -f .carry/exp2.txz ] && { mkdir -p $G && tar -xJf .carry/exp2.txz -C $G --strip-components=1; }
  R=("${E32[@]}" NTHREADS=1)
  W=(--build nvcc -b 8 -e 8 -n 1 -w 0 --trials 1)
  run build-base 200 "${R[@]}" $G/base/06_symm_bench "${W[@]}" --contenders fused,triton
  for bits in 0 16 64 80 81 82; do
    "${R[@]}" TP_EXPERIMENT=$bits $G/exp/06_symm_bench "${W[@]}" --contenders fused > $L/build-exp$bits.log 2>&1 &
  done
  wait
  SMALL=(--build nvcc -b 8 -e 256K -f 8 -n 20 -w 5 --trials 3)
  BIG=(--build nvcc -b 16M -e 128M -f 8 -n 8 -w 2 --trials 3)
  for i in 1 2; do
    run small-base-$i 60 "${R[@]}" $G/base/06_symm_bench "${SMALL[@]}" --contenders fused,triton,symm-layer,unfused-nccl-graph --json $L/small-base-$i.json
    for bits in 0 16 64; do
      run small-exp$bits-$i 40 "${R[@]}" TP_EXPERIMENT=$bits $G/exp/06_symm_bench "${SMALL[@]}" --contenders fused --json $L/small-exp$bits-$i.json
    done
    run small-exp80-$i 90 "${R[@]}" TP_EXPERIMENT=80 $G/exp/06_symm_bench "${SMALL[@]}" --contenders fused,fused-graph,triton,triton-graph,unfused05-graph,unfused-nccl-graph,symm-layer --json $L/small-exp80-$i.json
    run small-plain80-$i 40 "${R[@]}" TP_EXPERIMENT=80 TP_PLAIN_LAUNCH=1 $G/exp/06_symm_bench "${SMALL[@]}" --contenders fused,symm-layer --json $L/small-plain80-$i.json
  done
  for i in 1 2; do
    run big-base-$i 60 "${R[@]}" $G/base/06_symm_bench "${BIG[@]}" --contenders fused,triton --json $L/big-base-$i.json
    for bits in 0 16 64 80 81 82; do
      run big-exp$bits-$i 40 "${R[@]}" TP_EXPERIMENT=$bits $G/exp/06_symm_bench "${BIG[@]}" --contenders fused --json $L/big-exp$bits-$i.json
    done
  done
  R2=("${E32[@]}" NTHREADS=2 "${SHARE[@]}")
  for i in 1 2; do
    run n2-base-$i 60 "${R2[@]}" $G/base/06_symm_bench "${SMALL[@]}" --contenders fused,triton,unfused05-graph,unfused-nccl-graph --json $L/n2-base-$i.json
    run n2-exp80-$i 60 "${R2[@]}" TP_EXPERIMENT=80 $G/exp/06_symm_bench "${SMALL[@]}" --contenders fused,fused-graph,triton-graph --json $L/n2-exp80-$i.json
  done
  run n2-stress-exp80 60 "${R2[@]}" TP_EXPERIMENT=80 $G/exp/06_symm_bench --build nvcc --contenders fused --stress 300 -b 8 -e 1M -f 8
  run n1-bf16-exp80 60 "${R[@]}" TP_EXPERIMENT=80 $G/exp/06_symm_bench "${SMALL[@]}" --dtype bf16 --contenders fused,fused-graph
  S1=(); S2=(); B1=(); N2=()
  for v in base exp0 exp16 exp64 exp80 plain80; do S1+=($L/small-$v-1.json); S2+=($L/small-$v-2.json); done
  for v in base exp0 exp16 exp64 exp80 exp81 exp82; do B1+=($L/big-$v-1.json $L/big-$v-2.json); done
  python3 $CMP "${S1[@]}" > $L/small-1.txt 2>&1
  python3 $CMP "${S2[@]}" > $L/small-2.txt 2>&1
  python3 $CMP "${B1[@]}" > $L/big.txt 2>&1
  python3 $CMP $L/n2-base-1.json $L/n2-exp80-1.json $L/n2-base-2.json $L/n2-exp80-2.json > $L/n2.txt 2>&1
  ;;
perf)
  [ -f .carry/threads.txz ] && { mkdir -p $G && tar -xJf .carry/threads.txz -C $G; }
  [ -f .carry/timing.txz ] && { mkdir -p $G && tar -xJf .carry/timing.txz -C $G --strip-components=1; }
  A=$G/threads/bin
  R=("${E32[@]}" NTHREADS=1)
  # Build every module first (nvcc, Triton; the before binaries' too).
  W=(--build nvcc -b 8 -e 8 -n 1 -w 0 --trials 1)
  run build-after 200 "${R[@]}" $A/06_symm_bench "${W[@]}" --contenders fused,triton
  run build-base 200 "${R[@]}" $G/base/06_symm_bench "${W[@]}" --contenders fused,triton
  run build-prebuilder 200 "${R[@]}" $G/prebuilder/06_symm_bench "${W[@]}" --contenders fused
  # Issue 31: the fast kernel and the fused kernel, before/after, alternating.
  for i in 1 2; do
    for v in before31 after; do
      b=$A; [ $v = before31 ] && b=$G/before31
      run 05-fast-$v-$i 100 "${R[@]}" $b/05_allreduce_bench --build nvcc --kernels fast -b 8 -e 256M -f 8 -n 20 -w 5 --trials 3 --json $L/05-fast-$v-$i.json
    done
    for v in prebuilder base; do
      run 06-fused-$v-$i 100 "${R[@]}" $G/$v/06_symm_bench --build nvcc --contenders fused -b 32K -e 128M -f 8 -n 8 -w 2 --trials 3 --json $L/06-fused-$v-$i.json
    done
  done
  python3 $CMP $L/05-fast-before31-1.json $L/05-fast-after-1.json $L/05-fast-before31-2.json $L/05-fast-after-2.json > $L/05-before-after.txt 2>&1
  python3 $CMP $L/06-fused-prebuilder-1.json $L/06-fused-base-1.json $L/06-fused-prebuilder-2.json $L/06-fused-base-2.json > $L/06-launch-builder.txt 2>&1
  # Issue 32's change 6: a2b4489 (base) against this build, 1 and 2 ranks.
  SMALL=(--build nvcc -b 8 -e 256K -f 8 -n 20 -w 5 --trials 3)
  BIG=(--build nvcc -b 16M -e 128M -f 8 -n 8 -w 2 --trials 3)
  C=fused,triton,symm-layer,unfused05-graph,unfused-nccl-graph
  for n in 1 2; do
    Rn=("${E32[@]}" NTHREADS=$n "${SHARE[@]}")
    for i in 1 2; do
      run small-base-n$n-$i 90 "${Rn[@]}" $G/base/06_symm_bench "${SMALL[@]}" --contenders $C --json $L/small-base-n$n-$i.json
      run small-after-n$n-$i 90 "${Rn[@]}" $A/06_symm_bench "${SMALL[@]}" --contenders $C,fused-graph,triton-graph --json $L/small-after-n$n-$i.json
    done
    python3 $CMP $L/small-base-n$n-1.json $L/small-after-n$n-1.json $L/small-base-n$n-2.json $L/small-after-n$n-2.json > $L/small-n$n.txt 2>&1
  done
  for v in base after; do
    b=$A; [ $v = base ] && b=$G/base
    run bf16-$v-n1 60 "${R[@]}" $b/06_symm_bench "${SMALL[@]}" --dtype bf16 --contenders fused,triton,unfused-nccl-graph --json $L/bf16-$v-n1.json
    run big-$v-n1 90 "${R[@]}" $b/06_symm_bench "${BIG[@]}" --contenders fused,triton,unfused05,unfused05-graph,unfused-nccl-graph --json $L/big-$v-n1.json
  done
  run big-bf16-after-n1 90 "${R[@]}" $A/06_symm_bench "${BIG[@]}" --dtype bf16 --contenders fused,triton,unfused-nccl-graph --json $L/big-bf16-after-n1.json
  python3 $CMP $L/bf16-base-n1.json $L/bf16-after-n1.json > $L/bf16-n1.txt 2>&1
  python3 $CMP $L/big-base-n1.json $L/big-after-n1.json > $L/big-n1.txt 2>&1
  run small-after-n4 90 "${E32[@]}" NTHREADS=4 "${SHARE[@]}" $A/06_symm_bench "${SMALL[@]}" --contenders fused,triton,unfused05-graph,unfused-nccl-graph --json $L/small-after-n4.json
  for n in 1 2; do
    run default-n$n 90 "${E32[@]}" NTHREADS=$n "${SHARE[@]}" $A/06_symm_bench --json $L/default-n$n.json
  done
  ;;
perf7)
  [ -f .carry/threads.txz ] && { mkdir -p $G && tar -xJf .carry/threads.txz -C $G; }
  [ -f .carry/c7.txz ] && { mkdir -p $G && tar -xJf .carry/c7.txz -C $G --strip-components=1; }
  A=$G/threads/bin
  R=("${E32[@]}" NTHREADS=1)
  W=(--build nvcc -b 8 -e 8 -n 1 -w 0 --trials 1)
  run build-after 200 "${R[@]}" $A/06_symm_bench "${W[@]}" --contenders fused,triton
  run build-c6 200 "${R[@]}" $G/c6/06_symm_bench "${W[@]}" --contenders fused,triton
  SMALL=(--build nvcc -b 8 -e 256K -f 8 -n 20 -w 5 --trials 3)
  BIG=(--build nvcc -b 16M -e 128M -f 8 -n 8 -w 2 --trials 3)
  C=fused,triton,symm-layer,unfused05-graph,unfused-nccl-graph
  for n in 1 2; do
    Rn=("${E32[@]}" NTHREADS=$n "${SHARE[@]}")
    for i in 1 2; do
      run small-c6-n$n-$i 90 "${Rn[@]}" $G/c6/06_symm_bench "${SMALL[@]}" --contenders $C --json $L/small-c6-n$n-$i.json
      run small-after-n$n-$i 90 "${Rn[@]}" $A/06_symm_bench "${SMALL[@]}" --contenders $C,fused-graph,triton-graph --json $L/small-after-n$n-$i.json
    done
    python3 $CMP $L/small-c6-n$n-1.json $L/small-after-n$n-1.json $L/small-c6-n$n-2.json $L/small-after-n$n-2.json > $L/small-n$n.txt 2>&1
  done
  for v in c6 after; do
    b=$A; [ $v = c6 ] && b=$G/c6
    run bf16-$v-n1 60 "${R[@]}" $b/06_symm_bench "${SMALL[@]}" --dtype bf16 --contenders fused,triton,unfused-nccl-graph --json $L/bf16-$v-n1.json
    run big-$v-n1 90 "${R[@]}" $b/06_symm_bench "${BIG[@]}" --contenders fused,triton,unfused05,unfused05-graph,unfused-nccl-graph --json $L/big-$v-n1.json
    run big-bf16-$v-n1 90 "${R[@]}" $b/06_symm_bench "${BIG[@]}" --dtype bf16 --contenders fused,triton,unfused-nccl-graph --json $L/big-bf16-$v-n1.json
  done
  python3 $CMP $L/bf16-c6-n1.json $L/bf16-after-n1.json > $L/bf16-n1.txt 2>&1
  python3 $CMP $L/big-c6-n1.json $L/big-after-n1.json > $L/big-n1.txt 2>&1
  python3 $CMP $L/big-bf16-c6-n1.json $L/big-bf16-after-n1.json > $L/big-bf16-n1.txt 2>&1
  run small-after-n4 90 "${E32[@]}" NTHREADS=4 "${SHARE[@]}" $A/06_symm_bench "${SMALL[@]}" --contenders fused,triton,unfused05-graph,unfused-nccl-graph --json $L/small-after-n4.json
  for n in 1 2; do
    run default-n$n 90 "${E32[@]}" NTHREADS=$n "${SHARE[@]}" $A/06_symm_bench --json $L/default-n$n.json
  done
  ;;
perf8)
  [ -f .carry/threads.txz ] && { mkdir -p $G && tar -xJf .carry/threads.txz -C $G; }
  [ -f .carry/c8.txz ] && { mkdir -p $G && tar -xJf .carry/c8.txz -C $G --strip-components=1; }
  mkdir -p $G/after && ln -sf $G/threads/bin/06_symm_bench $G/after/06_symm_bench
  R=("${E32[@]}" NTHREADS=1)
  W=(--build nvcc -b 8 -e 8 -n 1 -w 0 --trials 1)
  for v in after c6 c7; do
    run build-$v 200 "${R[@]}" $G/$v/06_symm_bench "${W[@]}" --contenders fused,triton
  done
  SMALL=(--build nvcc -b 8 -e 256K -f 8 -n 20 -w 5 --trials 3)
  BIG=(--build nvcc -b 16M -e 128M -f 8 -n 8 -w 2 --trials 3)
  C=fused,triton,symm-layer,unfused05-graph,unfused-nccl-graph
  for n in 1 2; do
    Rn=("${E32[@]}" NTHREADS=$n "${SHARE[@]}")
    for i in 1 2; do
      for v in c6 c7 after; do
        run small-$v-n$n-$i 90 "${Rn[@]}" $G/$v/06_symm_bench "${SMALL[@]}" --contenders $C,fused-graph,triton-graph --json $L/small-$v-n$n-$i.json
      done
    done
    python3 $CMP $L/small-c6-n$n-1.json $L/small-c7-n$n-1.json $L/small-after-n$n-1.json $L/small-c6-n$n-2.json $L/small-c7-n$n-2.json $L/small-after-n$n-2.json > $L/small-n$n.txt 2>&1
  done
  for v in c6 c7 after; do
    run bf16-$v-n1 60 "${R[@]}" $G/$v/06_symm_bench "${SMALL[@]}" --dtype bf16 --contenders fused,triton,unfused-nccl-graph --json $L/bf16-$v-n1.json
    run big-$v-n1 90 "${R[@]}" $G/$v/06_symm_bench "${BIG[@]}" --contenders fused,triton,unfused05,unfused05-graph,unfused-nccl-graph --json $L/big-$v-n1.json
    run big-bf16-$v-n1 90 "${R[@]}" $G/$v/06_symm_bench "${BIG[@]}" --dtype bf16 --contenders fused,triton,unfused-nccl-graph --json $L/big-bf16-$v-n1.json
  done
  for t in bf16 big big-bf16; do
    python3 $CMP $L/$t-c6-n1.json $L/$t-c7-n1.json $L/$t-after-n1.json > $L/$t-n1.txt 2>&1
  done
  run small-after-n4 90 "${E32[@]}" NTHREADS=4 "${SHARE[@]}" $G/after/06_symm_bench "${SMALL[@]}" --contenders fused,triton,unfused05-graph,unfused-nccl-graph --json $L/small-after-n4.json
  for n in 1 2; do
    run default-n$n 90 "${E32[@]}" NTHREADS=$n "${SHARE[@]}" $G/after/06_symm_bench --json $L/default-n$n.json
  done
  ;;
perf9)
  [ -f .carry/c9.txz ] && { mkdir -p $G && tar -xJf .carry/c9.txz -C $G --strip-components=1; }
  R=("${E32[@]}" NTHREADS=1)
  build_variants "base after exp"
  SMALL=(--build nvcc -b 8 -e 256K -f 8 -n 20 -w 5 --trials 3)
  BIG=(--build nvcc -b 16M -e 128M -f 8 -n 8 -w 2 --trials 3)
  C=fused,triton,symm-layer,unfused05-graph,unfused-nccl-graph
  for n in 1 2; do
    Rn=("${E32[@]}" NTHREADS=$n "${SHARE[@]}")
    for i in 1 2; do
      for v in base after exp; do
        run small-$v-n$n-$i 90 "${Rn[@]}" XDG_CACHE_HOME=/tmp/cache-$v $G/$v/06_symm_bench "${SMALL[@]}" --contenders $C --json $L/small-$v-n$n-$i.json
      done
    done
    python3 $CMP $L/small-base-n$n-1.json $L/small-after-n$n-1.json $L/small-exp-n$n-1.json $L/small-base-n$n-2.json $L/small-after-n$n-2.json $L/small-exp-n$n-2.json > $L/small-n$n.txt 2>&1
  done
  for i in 1 2; do
    for v in base after exp; do
      Rv=("${R[@]}" XDG_CACHE_HOME=/tmp/cache-$v)
      run bf16-$v-$i 60 "${Rv[@]}" $G/$v/06_symm_bench "${SMALL[@]}" --dtype bf16 --contenders fused,triton,unfused-nccl-graph --json $L/bf16-$v-$i.json
      run big-$v-$i 90 "${Rv[@]}" $G/$v/06_symm_bench "${BIG[@]}" --contenders fused,triton,unfused05-graph,unfused-nccl-graph --json $L/big-$v-$i.json
      run big-bf16-$v-$i 90 "${Rv[@]}" $G/$v/06_symm_bench "${BIG[@]}" --dtype bf16 --contenders fused,triton,unfused-nccl-graph --json $L/big-bf16-$v-$i.json
    done
  done
  for t in bf16 big big-bf16; do
    python3 $CMP $L/$t-base-1.json $L/$t-after-1.json $L/$t-exp-1.json $L/$t-base-2.json $L/$t-after-2.json $L/$t-exp-2.json > $L/$t-n1.txt 2>&1
  done
  for v in base after; do
    run big-$v-n2 90 "${E32[@]}" NTHREADS=2 "${SHARE[@]}" XDG_CACHE_HOME=/tmp/cache-$v $G/$v/06_symm_bench "${BIG[@]}" --contenders fused,triton,unfused05-graph --json $L/big-$v-n2.json
  done
  python3 $CMP $L/big-base-n2.json $L/big-after-n2.json > $L/big-n2.txt 2>&1
  for n in 1 2; do
    run default-n$n 90 "${E32[@]}" NTHREADS=$n "${SHARE[@]}" XDG_CACHE_HOME=/tmp/cache-after $G/after/06_symm_bench --json $L/default-n$n.json
  done
  # Where the small sizes wait: ncu's warp-stall samples per SASS instruction,
  # this build's fused CUDA and Triton kernels at 32 KiB, one rank.
  N=(ncu --cache-control none --clock-control none --launch-skip 20 --launch-count 1
     --section WarpStateStats --section SourceCounters)
  A=(--build nvcc -b 32K -e 32K -n 20 -w 5 --trials 1)
  for k in fused triton; do
    run ncu-$k-32K 120 "${R[@]}" XDG_CACHE_HOME=/tmp/cache-after "${N[@]}" -k regex:tp_tail_$k -o $L/$k-32K $G/after/06_symm_bench "${A[@]}" --contenders $k
    [ -f $L/$k-32K.ncu-rep ] && ncu -i $L/$k-32K.ncu-rep --page source --csv --print-source sass > $L/$k-32K-sass.csv 2>&1
  done
  ;;
perf10)
  [ -f .carry/c10.txz ] && { mkdir -p $G && tar -xJf .carry/c10.txz -C $G --strip-components=1; }
  R=("${E32[@]}" NTHREADS=1)
  V="base c8 c9 exp"
  build_variants "$V"
  SMALL=(--build nvcc -b 8 -e 256K -f 8 -n 20 -w 5 --trials 3)
  BIG=(--build nvcc -b 16M -e 128M -f 8 -n 8 -w 2 --trials 3)
  C=fused,triton,symm-layer,unfused05-graph,unfused-nccl-graph
  for i in 1 2; do
    for v in $V; do
      Rv=("${R[@]}" XDG_CACHE_HOME=/tmp/cache-$v)
      run small-$v-$i 90 "${Rv[@]}" $G/$v/06_symm_bench "${SMALL[@]}" --contenders $C --json $L/small-$v-$i.json
      run big-$v-$i 90 "${Rv[@]}" $G/$v/06_symm_bench "${BIG[@]}" --contenders fused,triton,unfused05-graph,unfused-nccl-graph --json $L/big-$v-$i.json
    done
  done
  for v in $V; do
    Rv=("${R[@]}" XDG_CACHE_HOME=/tmp/cache-$v)
    run bf16-$v 60 "${Rv[@]}" $G/$v/06_symm_bench "${SMALL[@]}" --dtype bf16 --contenders fused,triton,unfused-nccl-graph --json $L/bf16-$v.json
    run big-bf16-$v 90 "${Rv[@]}" $G/$v/06_symm_bench "${BIG[@]}" --dtype bf16 --contenders fused,triton,unfused-nccl-graph --json $L/big-bf16-$v.json
    run small-$v-n2 90 "${E32[@]}" NTHREADS=2 "${SHARE[@]}" XDG_CACHE_HOME=/tmp/cache-$v $G/$v/06_symm_bench "${SMALL[@]}" --contenders fused,triton,unfused05-graph,unfused-nccl-graph --json $L/small-$v-n2.json
  done
  for t in small big; do
    python3 $CMP $L/$t-base-1.json $L/$t-c8-1.json $L/$t-c9-1.json $L/$t-exp-1.json $L/$t-base-2.json $L/$t-c8-2.json $L/$t-c9-2.json $L/$t-exp-2.json > $L/$t-n1.txt 2>&1
  done
  for t in bf16 big-bf16; do
    python3 $CMP $L/$t-base.json $L/$t-c8.json $L/$t-c9.json $L/$t-exp.json > $L/$t-n1.txt 2>&1
  done
  python3 $CMP $L/small-base-n2.json $L/small-c8-n2.json $L/small-c9-n2.json $L/small-exp-n2.json > $L/small-n2.txt 2>&1
  for n in 1 2; do
    run default-n$n 90 "${E32[@]}" NTHREADS=$n "${SHARE[@]}" XDG_CACHE_HOME=/tmp/cache-c9 $G/c9/06_symm_bench --json $L/default-n$n.json
  done
  ;;
verify)
  [ -f .carry/threads.txz ] && { mkdir -p $G && tar -xJf .carry/threads.txz -C $G; }
  B=$G/threads/bin
  run suite-threads-n2 ${SUITE_LIMIT:-330} "${E32[@]}" GPU_TEST_RANKS=2 PATH=$G/threads/bin:$PATH \
    $G/threads/cargo-nextest nextest run --archive-file $G/threads/tests.tar.zst --workspace-remap . \
    --run-ignored all --no-fail-fast --test-threads 1
  for n in 2 4; do
    R=("${E32[@]}" NTHREADS=$n "${SHARE[@]}")
    ops=500; [ $n = 4 ] && ops=200
    for d in f32 bf16; do
      run 06-stress-$d-n$n 60 "${R[@]}" $B/06_symm_bench --build nvcc --contenders fused,triton --dtype $d --stress $ops -b 8 -e 1M -f 8
      run 06-stress-one-region-$d-n$n 60 "${R[@]}" $B/06_symm_bench --build nvcc --contenders fused,triton --dtype $d --stress $ops --one-region -b 8 -e 1M -f 8
    done
    run 06-stress-big-n$n 90 "${R[@]}" $B/06_symm_bench --build nvcc --contenders fused,triton --stress 50 -b 2M -e 32M -f 4
  done
  ;;
programs)
  [ -f .carry/threads.txz ] && { mkdir -p $G && tar -xJf .carry/threads.txz -C $G; }
  B=$G/threads/bin
  for n in ${RANKS:-1 2 4}; do
    R=("${E32[@]}" NTHREADS=$n "${SHARE[@]}")
    [ $n = 1 ] && R=("${E32[@]}" NTHREADS=1)
    run 01-n$n 60 "${R[@]}" $B/01_allreduce_ub
    run 02-n$n 60 "${R[@]}" $B/02_allreduce_sm
    run 03-n$n 60 "${R[@]}" $B/03_alltoallv_sm
    run 04-n$n 60 "${R[@]}" $B/04_vmm_raw
    run 05-nvcc-n$n 120 "${R[@]}" XDG_CACHE_HOME=/tmp/cache-$n $B/05_device_lsa --build nvcc
    run 05-nvcc-cached-n$n 60 "${R[@]}" XDG_CACHE_HOME=/tmp/cache-$n $B/05_device_lsa --build nvcc
    run 05-jit-n$n 120 "${R[@]}" $B/05_device_lsa --build jit
    run 05b-nvcc-n$n 120 "${R[@]}" $B/05b_lsa_fast --build nvcc
    run 05b-jit-n$n 120 "${R[@]}" $B/05b_lsa_fast --build jit
    run 06-nvcc-n$n 120 "${R[@]}" $B/06_symm_primitive --build nvcc
    run 06-nvcc-bf16-n$n 120 "${R[@]}" $B/06_symm_primitive --build nvcc --dtype bf16
    run 06-jit-n$n 120 "${R[@]}" $B/06_symm_primitive --build jit
    run 06-jit-bf16-n$n 120 "${R[@]}" $B/06_symm_primitive --build jit --dtype bf16
    run 06b-n$n 120 "${R[@]}" $B/06b_symm_triton
    run 06b-bf16-n$n 120 "${R[@]}" $B/06b_symm_triton --dtype bf16
    run your-cuda-kernel-n$n 120 "${R[@]}" $B/your_cuda_kernel
    run your-triton-kernel-n$n 120 "${R[@]}" $B/your_triton_kernel
  done
  ;;
mps)
  [ -f .carry/mpi.txz ] && { mkdir -p $G && tar -xJf .carry/mpi.txz -C $G; }
  M=$G/mpi/bin
  NV=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/nvshmem
  X=(-x NCCL_HOME -x NVJITLINK -x XDG_CACHE_HOME -x NCCL_MULTI_RANK_GPU_ENABLE -x NVSHMEM_HOME)
  export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
  mkdir -p -m 700 $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
  run mps-start 30 nvidia-cuda-mps-control -d
  for n in 1 2; do
    for d in f32 bf16; do
      run 06c-$d-np$n 120 "${E32[@]}" NVSHMEM_HOME=$NV "${SHARE[@]}" mpirun -np $n --oversubscribe "${X[@]}" $M/06c_symm_nvshmem --dtype $d
    done
  done
  run 06c-stress-np2 120 "${E32[@]}" NVSHMEM_HOME=$NV "${SHARE[@]}" mpirun -np 2 --oversubscribe "${X[@]}" $M/06_symm_bench --backend nvshmem --contenders fused --stress 300 -b 8 -e 1M -f 8
  run mps-stop 30 sh -c 'echo quit | nvidia-cuda-mps-control'
  ;;
last)
  [ -f .carry/threads.txz ] && { mkdir -p $G && tar -xJf .carry/threads.txz -C $G; }
  B=$G/threads/bin
  run suite-threads-n2 ${SUITE_LIMIT:-330} "${E32[@]}" GPU_TEST_RANKS=2 PATH=$G/threads/bin:$PATH \
    $G/threads/cargo-nextest nextest run --archive-file $G/threads/tests.tar.zst --workspace-remap . \
    --run-ignored all --no-fail-fast --test-threads 1
  R2=("${E32[@]}" NTHREADS=2 "${SHARE[@]}")
  run 06-stress-n2 60 "${R2[@]}" $B/06_symm_bench --build nvcc --contenders fused,triton --stress 500 -b 8 -e 1M -f 8
  run 06-stress-big-n2 90 "${R2[@]}" $B/06_symm_bench --build nvcc --contenders fused,triton --stress 50 -b 2M -e 32M -f 4
  for n in 1 2; do
    run big-n$n 90 "${E32[@]}" NTHREADS=$n "${SHARE[@]}" $B/06_symm_bench --build nvcc -b 16M -e 128M -f 8 -n 8 -w 2 --trials 3 --contenders fused,triton,unfused05-graph --json $L/big-n$n.json
  done
  ;;
ncu2)
  [ -f .carry/ncu.txz ] && { mkdir -p $G && tar -xJf .carry/ncu.txz -C $G --strip-components=1; }
  R=("${E32[@]}" NTHREADS=1)
  M=gpu__time_duration.sum,smsp__inst_executed.sum,sm__warps_active.avg.pct_of_peak_sustained_active
  for r in no_instruction long_scoreboard short_scoreboard barrier wait membar branch_resolving lg_throttle math_pipe_throttle; do
    M=$M,smsp__average_warps_issue_stalled_${r}_per_issue_active.ratio
  done
  N=(ncu --cache-control none --clock-control none --launch-skip 20 --launch-count 3 --metrics $M)
  for v in final c7; do
    run build-$v 200 "${R[@]}" XDG_CACHE_HOME=/tmp/cache-$v $G/$v/06_symm_bench --build nvcc -b 8 -e 8 -n 1 -w 0 --trials 1 --contenders fused,triton
    for b in 8 32K; do
      run ncu-fused-$v-$b 120 "${R[@]}" XDG_CACHE_HOME=/tmp/cache-$v "${N[@]}" -k regex:tp_tail_fused $G/$v/06_symm_bench --build nvcc --contenders fused -b $b -e $b -n 20 -w 5 --trials 1
    done
    # The cubins, for their code size (cuobjdump on the build machine).
    find /tmp/cache-$v -name "*tp_tail*.cubin" | while read -r c; do cp "$c" "$L/$v-$(basename "$c")"; done
  done
  run ncu-triton-final-8 120 "${R[@]}" XDG_CACHE_HOME=/tmp/cache-final "${N[@]}" -k regex:tp_tail_triton $G/final/06_symm_bench --build nvcc --contenders triton -b 8 -e 8 -n 20 -w 5 --trials 1
  run ncu-symm-final-8 120 "${R[@]}" XDG_CACHE_HOME=/tmp/cache-final "${N[@]}" -k regex:symm_all_reduce_kernel $G/final/06_symm_bench --build nvcc --contenders symm-layer -b 8 -e 8 -n 20 -w 5 --trials 1
  ;;
perf11|perf12|perf13|perf14|perf15|perf16|perf17)
  # Whichever archive this call carried (in this order, a later one's files win).
  for c in c13 c11 c12 c14 c15 c16 c17; do
    [ -f .carry/$c.txz ] && { mkdir -p $G && tar -xJf .carry/$c.txz -C $G --strip-components=1; }
  done
  R=("${E32[@]}" NTHREADS=1)
  W=(--build nvcc -b 8 -e 8 -n 1 -w 0 --trials 1)
  V="c8 c10"; N=c10; T=""; [ $PART = perf12 ] && { V="c8 c11"; N=c11; T=",triton"; }
  [ $PART = perf13 ] && { V="c8 c12"; N=c12; T=",triton"; }
  [ $PART = perf14 ] && { V="c8 c13"; N=c13; T=",triton"; }
  TB=""; [ $PART = perf15 ] && { V="c13 c14"; N=c14; T=",triton"; TB=",triton"; }
  [ $PART = perf16 ] && { V="c13 c15 c15u"; N=c15; T=",triton"; TB=",triton"; }
  [ $PART = perf17 ] && { V="c15 c17"; N=c17; T=",triton"; TB=",triton"; }
  B0=${V%% *}  # the baseline
  for v in $V; do
    run build-$v 200 "${R[@]}" XDG_CACHE_HOME=/tmp/cache-$v $G/$v/06_symm_bench "${W[@]}" --contenders fused
  done
  SMALL=(--build nvcc -b 8 -e 256K -f 8 -n 20 -w 5 --trials 3)
  BIG=(--build nvcc -b 16M -e 128M -f 8 -n 8 -w 2 --trials 3)
  for i in 1 2; do
    for v in $V; do
      Rv=("${R[@]}" XDG_CACHE_HOME=/tmp/cache-$v)
      run small-$v-$i 60 "${Rv[@]}" $G/$v/06_symm_bench "${SMALL[@]}" --contenders fused$T,unfused-nccl-graph --json $L/small-$v-$i.json
      run big-$v-$i 60 "${Rv[@]}" $G/$v/06_symm_bench "${BIG[@]}" --contenders fused$T,unfused05-graph,unfused-nccl-graph --json $L/big-$v-$i.json
    done
  done
  for v in $V; do
    Rv=("${R[@]}" XDG_CACHE_HOME=/tmp/cache-$v)
    run big-bf16-$v 60 "${Rv[@]}" $G/$v/06_symm_bench "${BIG[@]}" --dtype bf16 --contenders fused$TB,unfused-nccl-graph --json $L/big-bf16-$v.json
    run small-$v-n2 60 "${E32[@]}" NTHREADS=2 "${SHARE[@]}" XDG_CACHE_HOME=/tmp/cache-$v $G/$v/06_symm_bench "${SMALL[@]}" --contenders fused$TB,unfused05-graph --json $L/small-$v-n2.json
  done
  for t in small big; do
    python3 $CMP $L/$t-$B0-1.json $L/$t-$N-1.json $L/$t-$B0-2.json $L/$t-$N-2.json > $L/$t-n1.txt 2>&1
  done
  python3 $CMP $L/big-bf16-$B0.json $L/big-bf16-$N.json > $L/big-bf16-n1.txt 2>&1
  python3 $CMP $L/small-$B0-n2.json $L/small-$N-n2.json > $L/small-n2.txt 2>&1
  if [ $PART = perf16 ]; then
    for t in small big; do
      python3 $CMP $L/$t-c13-1.json $L/$t-c15u-1.json $L/$t-c13-2.json $L/$t-c15u-2.json > $L/$t-n1-c15u.txt 2>&1
    done
    python3 $CMP $L/big-bf16-c13.json $L/big-bf16-c15u.json > $L/big-bf16-n1-c15u.txt 2>&1
  fi
  [ $PART = perf13 ] || [ $PART = perf14 ] || [ $PART = perf15 ] || [ $PART = perf16 ] || [ $PART = perf17 ] || exit 0
  # The suite and the stress mode only if the change is kept: perf13 by its
  # 128 MiB time, perf14 by change 13's whole rule (small sizes too).
  python3 - "$L" $N $PART $B0 > $L/decision.txt <<'PY' || exit 0
import json, os, sys
L, N, part, B0 = sys.argv[1:]
S = "triton-nccl" if part in ("perf15", "perf16", "perf17") else "fused-nccl"
def t(f, size):
    d = json.load(open(f"{L}/{f}.json"))
    return [r["out_of_place"]["time_us"] for s in d["series"] if s["name"] == S
            for r in s["rows"] if r["bytes"] == size][0]
ratios = [t(f"big-{N}-{i}", 134217728) / t(f"big-{B0}-{i}", 134217728) for i in (1, 2)]
print(f"{S} at 128 MiB, {N} / {B0}:", " ".join(f"{r:.3f}" for r in ratios))
ok = max(ratios) <= {"perf16": 0.99, "perf17": 0.97}.get(part, 0.98)
if part == "perf17":
    r16 = [t(f"big-{N}-{i}", 16777216) / t(f"big-{B0}-{i}", 16777216) for i in (1, 2)]
    print(f"{S} at 16 MiB, {N} / {B0}:", " ".join(f"{r:.3f}" for r in r16))
    bf = [t(f"big-bf16-{N}", size) / t(f"big-bf16-{B0}", size) for size in (16777216, 134217728)]
    print(f"{S} in bfloat16 at 16 and 128 MiB, {N} / {B0}:", " ".join(f"{r:.3f}" for r in bf))
    wrong = 0
    for f in os.listdir(L):
        if f.endswith(".json") and N in f:
            d = json.load(open(f"{L}/{f}"))
            wrong += sum((r.get(p) or {}).get("wrong", 0) for s in d["series"] for r in s["rows"]
                         for p in ("out_of_place", "in_place"))
    print(f"wrong elements in {N}'s runs: {wrong}")
    ok = ok and max(r16) <= 1.0 and max(bf) <= 1.02 and wrong == 0
if part == "perf16":
    r16 = [t(f"big-{N}-{i}", 16777216) / t(f"big-{B0}-{i}", 16777216) for i in (1, 2)]
    print(f"{S} at 16 MiB, {N} / {B0}:", " ".join(f"{r:.3f}" for r in r16))
    bf = [t(f"big-bf16-{N}", size) / t(f"big-bf16-{B0}", size) for size in (16777216, 134217728)]
    print(f"{S} in bfloat16 at 16 and 128 MiB, {N} / {B0}:", " ".join(f"{r:.3f}" for r in bf))
    ok = ok and max(r16) <= 0.975 and max(bf) <= 1.02
if part != "perf13":
    d = json.load(open(f"{L}/small-{B0}-1.json"))
    sizes = [r["bytes"] for s in d["series"] if s["name"] == S for r in s["rows"]]
    for size in sizes:
        r = sum(t(f"small-{N}-{i}", size) for i in (1, 2)) / sum(t(f"small-{B0}-{i}", size) for i in (1, 2))
        print(f"{S} at {size} B, {N} / {B0} (mean of two runs): {r:.3f}")
        ok = ok and r <= 1.02
print("kept" if ok else "not kept")
sys.exit(0 if ok else 1)
PY
  [ -f .carry/threads.txz ] && { mkdir -p $G && tar -xJf .carry/threads.txz -C $G; }
  suite_and_stress
  [ $PART = perf15 ] || [ $PART = perf16 ] || exit 0
  for n in 1 2 4; do
    Rn=("${E32[@]}" NTHREADS=$n "${SHARE[@]}")
    run 06b-n$n 120 "${Rn[@]}" $B/06b_symm_triton
    run 06b-bf16-n$n 120 "${Rn[@]}" $B/06b_symm_triton --dtype bf16
    run your-triton-kernel-n$n 120 "${Rn[@]}" $B/your_triton_kernel
  done
  ;;
perf18|perf21|perf24|perf25)
  for c in c18 c21 c24 c25; do
    [ -f .carry/$c.txz ] && { mkdir -p $G && tar -xJf .carry/$c.txz -C $G --strip-components=1; }
  done
  [ -f .carry/threads.txz ] && { mkdir -p $G && tar -xJf .carry/threads.txz -C $G; }
  V="c17 c18 c20"; [ $PART = perf21 ] && V="c17 c21 c22"; [ $PART = perf24 ] && V="c21 c24"
  [ $PART = perf25 ] && V="c23 c25 c27 c28"
  set -- $V; A=$1 N=${!#}  # the baseline, the last build (every change)
  files() { for v in $V; do printf '%s ' "$L/$1-$v${2:-}.json"; done; }  # files PREFIX SUFFIX
  R=("${E32[@]}" NTHREADS=1)
  build_variants "$V"
  SMALL=(--build nvcc -b 8 -e 256K -f 8 -n 20 -w 5 --trials 3)
  BIG=(--build nvcc -b 16M -e 128M -f 8 -n 8 -w 2 --trials 3)
  for i in 1 2; do
    for v in $V; do
      Rv=("${R[@]}" XDG_CACHE_HOME=/tmp/cache-$v)
      run small-$v-$i 60 "${Rv[@]}" $G/$v/06_symm_bench "${SMALL[@]}" --contenders fused,triton,unfused-nccl-graph --json $L/small-$v-$i.json
      run big-$v-$i 60 "${Rv[@]}" $G/$v/06_symm_bench "${BIG[@]}" --contenders fused,triton,unfused05-graph,unfused-nccl-graph --json $L/big-$v-$i.json
    done
  done
  for v in $V; do
    Rv=("${R[@]}" XDG_CACHE_HOME=/tmp/cache-$v)
    run big-bf16-$v 60 "${Rv[@]}" $G/$v/06_symm_bench "${BIG[@]}" --dtype bf16 --contenders fused,triton,unfused-nccl-graph --json $L/big-bf16-$v.json
    run small-bf16-$v 60 "${Rv[@]}" $G/$v/06_symm_bench "${SMALL[@]}" --dtype bf16 --contenders fused,triton,unfused-nccl-graph --json $L/small-bf16-$v.json
    run small-$v-n2 60 "${E32[@]}" NTHREADS=2 "${SHARE[@]}" XDG_CACHE_HOME=/tmp/cache-$v $G/$v/06_symm_bench "${SMALL[@]}" --contenders fused,triton,unfused05-graph --json $L/small-$v-n2.json
  done
  for t in small big; do
    python3 $CMP $(files $t -1) $(files $t -2) > $L/$t-n1.txt 2>&1
    python3 $CMP $(files $t-bf16) > $L/$t-bf16-n1.txt 2>&1
  done
  python3 $CMP $(files small -n2) > $L/small-n2.txt 2>&1
  python3 runs/2026-11-27/scripts/decide.py $L $PART > $L/decision.txt 2>&1
  # k > 16 (several steps of j; above 64 the CUDA kernel's chunks), both kernels, the last build.
  R2=("${E32[@]}" NTHREADS=2 "${SHARE[@]}" XDG_CACHE_HOME=/tmp/cache-$N)
  for d in f32 bf16; do
    run 06-stress-k40-$d-n2 60 "${R2[@]}" $G/$N/06_symm_bench --build nvcc --contenders fused,triton --dtype $d --k 40 --stress 200 -b 8 -e 1M -f 8
  done
  run 06-stress-k100-n2 60 "${R2[@]}" $G/$N/06_symm_bench --build nvcc --contenders fused,triton --k 100 --stress 50 -b 8 -e 4M -f 8
  [ $PART != perf18 ] && run 06-stress-k40-big-n2 90 "${R2[@]}" $G/$N/06_symm_bench --build nvcc --contenders fused,triton --k 40 --stress 20 -b 16M -e 32M -f 2
  tail -1 $L/decision.txt | grep -qx "kept: changes ${KEEP_ALL:-18 19 20}" || exit 0
  suite_and_stress
  ;;
probe29)
  [ -f .carry/c29.txz ] && { mkdir -p $G && tar -xJf .carry/c29.txz -C $G --strip-components=1; }
  V="c23 c27 cu c29"
  R=("${E32[@]}" NTHREADS=1)
  build_variants "$V"
  SMALL=(--build nvcc -b 8 -e 256K -f 8 -n 20 -w 5 --trials 3 --contenders fused,triton)
  BIG=(--build nvcc -b 16M -e 128M -f 8 -n 8 -w 2 --trials 3 --contenders fused,triton)
  for i in 1 2 3; do
    for v in $V; do
      Rv=("${R[@]}" XDG_CACHE_HOME=/tmp/cache-$v)
      run small-$v-$i 60 "${Rv[@]}" $G/$v/06_symm_bench "${SMALL[@]}" --json $L/small-$v-$i.json
      run small-bf16-$v-$i 60 "${Rv[@]}" $G/$v/06_symm_bench "${SMALL[@]}" --dtype bf16 --json $L/small-bf16-$v-$i.json
    done
  done
  for i in 1 2; do
    for v in c27 c29; do
      run big-bf16-$v-$i 60 "${R[@]}" XDG_CACHE_HOME=/tmp/cache-$v $G/$v/06_symm_bench "${BIG[@]}" --dtype bf16 --json $L/big-bf16-$v-$i.json
    done
  done
  for t in small small-bf16; do
    python3 $CMP $(for i in 1 2 3; do for v in $V; do printf '%s ' $L/$t-$v-$i.json; done; done) > $L/$t-n1.txt 2>&1
  done
  python3 $CMP $L/big-bf16-c27-1.json $L/big-bf16-c29-1.json $L/big-bf16-c27-2.json $L/big-bf16-c29-2.json > $L/big-bf16-n1.txt 2>&1
  python3 runs/2026-11-27/scripts/decide.py $L $PART > $L/decision.txt 2>&1
  R2=("${E32[@]}" NTHREADS=2 "${SHARE[@]}" XDG_CACHE_HOME=/tmp/cache-c29)
  for d in f32 bf16; do
    run 06-stress-$d-n2 60 "${R2[@]}" $G/c29/06_symm_bench --build nvcc --contenders fused,triton --dtype $d --stress 500 -b 8 -e 1M -f 8
  done
  ;;
perf30|perf31|perf33|perf34|probe35|perf36|perf37|perf38|perf39|perf40|perf41)
  for c in c30 c31 c33 c34 c35 c36 c37 c38 c39 c40 c41; do
    [ -f .carry/$c.txz ] && { mkdir -p $G && tar -xJf .carry/$c.txz -C $G --strip-components=1; }
  done
  V="c30 c31 c32 c32n"; [ $PART = perf30 ] && V="c29 c30"; [ $PART = perf33 ] && V="c31 c33 c33s"
  [ $PART = perf34 ] && V="c31 c34 c34p"; [ $PART = probe35 ] && V="c31 c35 c35f c35b"
  [ $PART = perf36 ] && V="c35 c36"; [ $PART = perf37 ] && V="c35 c37"
  [ $PART = perf38 ] && V="c35 c38 c38p"; [ $PART = perf39 ] && V="c35 c39"
  [ $PART = perf40 ] && V="c35 c40"; [ $PART = perf41 ] && V="c40 c41 c42"
  dtypes() { case $1 in c35f) echo f32;; c35b) echo bf16;; *) echo f32 bf16;; esac; }
  R=("${E32[@]}" NTHREADS=1)
  for v in $V; do build_variants $v $(dtypes $v); done
  SMALL=(--build nvcc -b 8 -e 256K -f 8 -n 20 -w 5 --trials 3 --contenders fused,triton)
  BIG=(--build nvcc -b 16M -e 128M -f 8 -n 8 -w 2 --trials 3 --contenders fused,triton)
  for i in 1 2; do
    for v in $V; do
      Rv=("${R[@]}" XDG_CACHE_HOME=/tmp/cache-$v)
      for d in $(dtypes $v); do
        run small-$d-$v-$i 60 "${Rv[@]}" $G/$v/06_symm_bench "${SMALL[@]}" --dtype $d --json $L/small-$d-$v-$i.json
        run big-$d-$v-$i 60 "${Rv[@]}" $G/$v/06_symm_bench "${BIG[@]}" --dtype $d --json $L/big-$d-$v-$i.json
      done
    done
  done
  for t in small-f32 big-f32 small-bf16 big-bf16; do
    python3 $CMP $(for i in 1 2; do for v in $V; do [ -f $L/$t-$v-$i.json ] && printf '%s ' $L/$t-$v-$i.json; done; done) > $L/$t-n1.txt 2>&1
  done
  python3 runs/2026-11-27/scripts/decide.py $L $PART > $L/decision.txt 2>&1
  if [ $PART = probe35 ]; then
    R2=("${E32[@]}" NTHREADS=2 "${SHARE[@]}" XDG_CACHE_HOME=/tmp/cache-c35)
    for d in f32 bf16; do
      run 06-stress-$d-c35-n2 60 "${R2[@]}" $G/c35/06_symm_bench --build nvcc --contenders fused,triton --dtype $d --stress 500 -b 8 -e 1M -f 8
      run 06-stress-$d-big-c35-n2 90 "${R2[@]}" $G/c35/06_symm_bench --build nvcc --contenders fused,triton --dtype $d --stress 50 -b 2M -e 32M -f 4
    done
    exit 0
  fi
  if [ $PART = perf30 ]; then
    R2=("${E32[@]}" NTHREADS=2 "${SHARE[@]}" XDG_CACHE_HOME=/tmp/cache-c30)
    run 06-stress-bf16-n2 60 "${R2[@]}" $G/c30/06_symm_bench --build nvcc --contenders triton --dtype bf16 --stress 500 -b 8 -e 1M -f 8
    run 06-stress-bf16-big-n2 90 "${R2[@]}" $G/c30/06_symm_bench --build nvcc --contenders triton --dtype bf16 --stress 50 -b 2M -e 32M -f 4
    run 06-stress-bf16-k40-n2 90 "${R2[@]}" $G/c30/06_symm_bench --build nvcc --contenders triton --dtype bf16 --k 40 --stress 20 -b 16M -e 32M -f 2
    exit 0
  fi
  [ $PART = perf36 -o $PART = perf37 -o $PART = perf38 -o $PART = perf41 ] && for v in $V; do
    find /tmp/cache-$v -name '*.cubin' | while read -r f; do cp "$f" $L/$v-$(basename "$f"); done
  done
  if [ $PART != perf31 ]; then
    K=fused; [ $PART = perf39 -o $PART = perf40 ] && K=triton  # the kernel the change touched
    [ $PART = perf41 ] && { K=fused,triton; V=c42; }
    for v in ${V#c3[15] }; do
      R2=("${E32[@]}" NTHREADS=2 "${SHARE[@]}" XDG_CACHE_HOME=/tmp/cache-$v)
      for d in f32 bf16; do
        run 06-stress-$d-$v-n2 60 "${R2[@]}" $G/$v/06_symm_bench --build nvcc --contenders $K --dtype $d --stress 500 -b 8 -e 1M -f 8
        run 06-stress-$d-big-$v-n2 90 "${R2[@]}" $G/$v/06_symm_bench --build nvcc --contenders $K --dtype $d --stress 50 -b 2M -e 32M -f 4
      done
      run 06-stress-k40-$v-n2 90 "${R2[@]}" $G/$v/06_symm_bench --build nvcc --contenders $K --k 40 --stress 20 -b 8 -e 32M -f 8
      [ $PART != perf33 ] && run 06-stress-k100-$v-n2 90 "${R2[@]}" $G/$v/06_symm_bench --build nvcc --contenders $K --k 100 --stress 20 -b 8 -e 32M -f 8
    done
    exit 0
  fi
  for v in c32n c32; do
    R2=("${E32[@]}" NTHREADS=2 "${SHARE[@]}" XDG_CACHE_HOME=/tmp/cache-$v)
    for d in f32 bf16; do
      run 06-stress-$d-big-$v-n2 90 "${R2[@]}" $G/$v/06_symm_bench --build nvcc --contenders fused --dtype $d --stress 50 -b 2M -e 32M -f 4
      run 06-stress-$d-k40-$v-n2 90 "${R2[@]}" $G/$v/06_symm_bench --build nvcc --contenders fused --dtype $d --k 40 --stress 20 -b 2M -e 32M -f 4
    done
    run 06-stress-k100-$v-n2 60 "${R2[@]}" $G/$v/06_symm_bench --build nvcc --contenders fused --k 100 --stress 20 -b 2M -e 32M -f 4
  done
  ;;
final)
  [ -f .carry/threads.txz ] && { mkdir -p $G && tar -xJf .carry/threads.txz -C $G; }
  suite_and_stress
  run 06-stress-k40-n2 60 "${R2[@]}" $B/06_symm_bench --build nvcc --contenders fused,triton --k 40 --stress 200 -b 8 -e 1M -f 8
  run 06-stress-k40-big-n2 90 "${R2[@]}" $B/06_symm_bench --build nvcc --contenders fused,triton --k 40 --stress 20 -b 16M -e 32M -f 2
  run 06-stress-k100-n2 60 "${R2[@]}" $B/06_symm_bench --build nvcc --contenders fused,triton --k 100 --stress 50 -b 8 -e 4M -f 8
  for n in 1 2 4; do
    R=("${E32[@]}" NTHREADS=$n "${SHARE[@]}")
    [ $n = 1 ] && R=("${E32[@]}" NTHREADS=1)
    run 06-nvcc-n$n 120 "${R[@]}" $B/06_symm_primitive --build nvcc
    run 06-nvcc-bf16-n$n 120 "${R[@]}" $B/06_symm_primitive --build nvcc --dtype bf16
    run 06-jit-n$n 120 "${R[@]}" $B/06_symm_primitive --build jit
    run 06b-n$n 120 "${R[@]}" $B/06b_symm_triton
    run 06b-bf16-n$n 120 "${R[@]}" $B/06b_symm_triton --dtype bf16
    run your-cuda-kernel-n$n 120 "${R[@]}" $B/your_cuda_kernel
    run your-triton-kernel-n$n 120 "${R[@]}" $B/your_triton_kernel
  done
  for n in 1 2; do
    run default-n$n 90 "${E32[@]}" NTHREADS=$n "${SHARE[@]}" $B/06_symm_bench --json $L/default-n$n.json
  done
  # STAND=1: where issue 32's targets stand, on this build: the fused kernels
  # and the unfused paths side by side, perf25's sizes and settings.
  [ "${STAND:-0}" = 1 ] || exit 0
  stand
  ;;
stand)
  [ -f .carry/threads.txz ] && { mkdir -p $G && tar -xJf .carry/threads.txz -C $G; }
  B=$G/threads/bin
  stand ${DTYPES:-f32 bf16}
  ;;
ncu4)
  [ -f .carry/threads.txz ] && { mkdir -p $G && tar -xJf .carry/threads.txz -C $G; }
  R=("${E32[@]}" NTHREADS=1)
  N=(ncu --cache-control all --clock-control none --launch-skip 5 --launch-count 1
     --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats
     --section SchedulerStats --section SourceCounters)
  Z=${NCU_SIZE:-128M}
  A=(--build nvcc -b $Z -e $Z -n 5 -w 2 --trials 1 --dtype ${NCU_DTYPE:-f32})
  for k in triton fused; do
    o=$k-$Z; [ ${NCU_DTYPE:-f32} = f32 ] || o=$k-$Z-$NCU_DTYPE
    run ncu-$o 150 "${R[@]}" "${N[@]}" -k regex:tp_tail_$k -o $L/$o ${NCU_BIN:-$G/threads/bin/06_symm_bench} "${A[@]}" --contenders $k
    [ -f $L/$o.ncu-rep ] || continue
    ncu -i $L/$o.ncu-rep > $L/$o-details.txt 2>&1
    ncu -i $L/$o.ncu-rep --page source --csv --print-source sass 2>&1 | gzip > $L/$o-sass.csv.gz
    rm -f $L/$o.ncu-rep
  done
  ;;
probe44)
  [ -f .carry/threads.txz ] && { mkdir -p $G && tar -xJf .carry/threads.txz -C $G; }
  R=("${E32[@]}" NTHREADS=1)
  DEF=fused,unfused05,unfused05-graph,unfused-nccl,unfused-nccl-graph,symm-layer,symm,fast05,nccl
  STD=fused,triton,unfused-nccl-graph,unfused05-graph
  T=(--build nvcc -n 20 -w 5 --trials 3)
  run build-probe 200 "${R[@]}" $G/threads/bin/06_symm_bench --build nvcc -b 8 -e 8 -n 1 -w 0 --trials 1 --contenders fused,triton,unfused05-graph
  for i in 1 2; do
    run alone-$i 60 "${R[@]}" $G/threads/bin/06_symm_bench "${T[@]}" -b 8 -e 256K -f 8 --contenders unfused05-graph --json $L/alone-$i.json
    run alone-512M-$i 60 "${R[@]}" $G/threads/bin/06_symm_bench "${T[@]}" -b 8 -e 512M -f 64 --contenders unfused05-graph --json $L/alone-512M-$i.json
    run default-list-$i 60 "${R[@]}" $G/threads/bin/06_symm_bench "${T[@]}" -b 8 -e 256K -f 8 --contenders $DEF --json $L/default-list-$i.json
    run stand-list-$i 60 "${R[@]}" $G/threads/bin/06_symm_bench "${T[@]}" -b 8 -e 256K -f 8 --contenders $STD --json $L/stand-list-$i.json
    run pair-$i 60 "${R[@]}" $G/threads/bin/06_symm_bench "${T[@]}" -b 8 -e 256K -f 8 --contenders unfused05,unfused05-graph --json $L/pair-$i.json
  done
  ;;
probe45)
  [ -f .carry/p45.txz ] && { mkdir -p $G && tar -xJf .carry/p45.txz -C $G --strip-components=1; }
  P=$G/p45/06_symm_bench
  C=fused,fused-graph,triton,symm-layer,unfused-nccl,unfused-nccl-graph,unfused05-graph
  T=(--build nvcc -b 8 -e 256K -f 8 -n 20 -w 5 --trials 3 --contenders $C)
  HOLD=(BENCH_HOLD_BYTES=1073741824)
  run build-probe 200 "${E32[@]}" NTHREADS=1 $P --build nvcc -b 8 -e 8 -n 1 -w 0 --trials 1 --contenders fused,triton,unfused05-graph
  for i in 1 2; do
    for n in 1 2; do
      run n$n-free-$i 60 "${E32[@]}" NTHREADS=$n "${SHARE[@]}" $P "${T[@]}" --json $L/n$n-free-$i.json
      run n$n-held-$i 60 "${E32[@]}" NTHREADS=$n "${SHARE[@]}" "${HOLD[@]}" $P "${T[@]}" --json $L/n$n-held-$i.json
    done
  done
  run n4-free 90 "${E32[@]}" NTHREADS=4 "${SHARE[@]}" $P "${T[@]}" --json $L/n4-free.json
  run n4-held 90 "${E32[@]}" NTHREADS=4 "${SHARE[@]}" "${HOLD[@]}" $P "${T[@]}" --json $L/n4-held.json
  ;;
perf45)
  [ -f .carry/c45.txz ] && { mkdir -p $G && tar -xJf .carry/c45.txz -C $G --strip-components=1; }
  C=fused,triton,symm-layer,unfused-nccl-graph,unfused05-graph
  T=(--build nvcc -b 8 -e 256K -f 8 -n 20 -w 5 --trials 3)
  for v in p45 c45; do
    for d in f32 bf16; do
      run build-$v-$d 200 "${E32[@]}" NTHREADS=1 $G/$v/06_symm_bench --build nvcc -b 8 -e 8 -n 1 -w 0 --trials 1 --contenders fused,triton --dtype $d
    done
  done
  for x in 2 8 10; do
    run build-exp$x 200 "${E32[@]}" NTHREADS=1 SYMM_EXPERIMENT=$x $G/c45/06_symm_bench --build nvcc -b 8 -e 8 -n 1 -w 0 --trials 1 --contenders fused
  done
  for i in 1 2; do
    for n in 2 1; do
      for v in p45 c45; do
        run n$n-f32-$v-$i 60 "${E32[@]}" NTHREADS=$n "${SHARE[@]}" $G/$v/06_symm_bench "${T[@]}" --contenders $C --json $L/n$n-f32-$v-$i.json
      done
    done
  done
  for v in p45 c45; do
    run n2-bf16-$v 60 "${E32[@]}" NTHREADS=2 "${SHARE[@]}" $G/$v/06_symm_bench "${T[@]}" --contenders fused,triton,unfused-nccl-graph --dtype bf16 --json $L/n2-bf16-$v.json
    run n4-f32-$v 90 "${E32[@]}" NTHREADS=4 "${SHARE[@]}" $G/$v/06_symm_bench "${T[@]}" --contenders $C --json $L/n4-f32-$v.json
  done
  for x in 2 8 10; do
    run n2-exp$x 60 "${E32[@]}" NTHREADS=2 "${SHARE[@]}" SYMM_EXPERIMENT=$x $G/c45/06_symm_bench "${T[@]}" --contenders fused,symm-layer --json $L/n2-exp$x.json
  done
  R2=("${E32[@]}" NTHREADS=2 "${SHARE[@]}")
  for d in f32 bf16; do
    run stress-$d-c45-n2 60 "${R2[@]}" $G/c45/06_symm_bench --build nvcc --contenders fused,triton --dtype $d --stress 500 -b 8 -e 1M -f 8
  done
  run stress-one-region-c45-n2 60 "${R2[@]}" $G/c45/06_symm_bench --build nvcc --contenders fused,triton --stress 500 --one-region -b 8 -e 1M -f 8
  run stress-f32-c45-n4 90 "${E32[@]}" NTHREADS=4 "${SHARE[@]}" $G/c45/06_symm_bench --build nvcc --contenders fused,triton --stress 200 -b 8 -e 1M -f 8
  python3 runs/2026-11-27/scripts/decide.py $L perf45 > $L/decision.txt 2>&1; cat $L/decision.txt
  ;;
perf49|perf49b)
  for c in c49 c53; do
    [ -f .carry/$c.txz ] && { mkdir -p $G && tar -xJf .carry/$c.txz -C $G --strip-components=1; }
  done
  N=c49; [ $PART = perf49b ] && N=c49b
  [ -f .carry/threads.txz ] && { mkdir -p $G && tar -xJf .carry/threads.txz -C $G; }
  C=fused,triton,symm-layer,unfused-nccl-graph,unfused05-graph
  T=(--build nvcc -b 8 -e 256K -f 8 -n 20 -w 5 --trials 3)
  for v in c48 $N; do
    for d in f32 bf16; do
      run build-$v-$d 200 "${E32[@]}" NTHREADS=1 $G/$v/06_symm_bench --build nvcc -b 8 -e 8 -n 1 -w 0 --trials 1 --contenders fused,triton --dtype $d
    done
  done
  for i in 1 2 3; do
    for n in 2 1; do
      for v in c48 $N; do
        run n$n-f32-$v-$i 60 "${E32[@]}" NTHREADS=$n "${SHARE[@]}" $G/$v/06_symm_bench "${T[@]}" --contenders $C --json $L/n$n-f32-$v-$i.json
      done
    done
  done
  for i in 1 2; do
    for v in c48 $N; do
      run n2-bf16-$v-$i 60 "${E32[@]}" NTHREADS=2 "${SHARE[@]}" $G/$v/06_symm_bench "${T[@]}" --contenders fused,triton,unfused-nccl-graph --dtype bf16 --json $L/n2-bf16-$v-$i.json
      run n4-f32-$v-$i 90 "${E32[@]}" NTHREADS=4 "${SHARE[@]}" $G/$v/06_symm_bench "${T[@]}" --contenders $C --json $L/n4-f32-$v-$i.json
    done
  done
  stress_and_decide $N
  ;;
probe50)
  [ -f .carry/c50.txz ] && { mkdir -p $G && tar -xJf .carry/c50.txz -C $G --strip-components=1; }
  [ -f .carry/c49.txz ] && { mkdir -p $G && tar -xJf .carry/c49.txz -C $G --strip-components=1; }
  C=fused,triton,symm-layer,unfused-nccl-graph
  T=(--build nvcc -b 8 -e 256K -f 8 -n 20 -w 5 --trials 3)
  for v in p49a p49b p49c; do
    run build-$v-f32 200 "${E32[@]}" NTHREADS=1 $G/$v/06_symm_bench --build nvcc -b 8 -e 8 -n 1 -w 0 --trials 1 --contenders fused,triton
  done
  for i in 1 2; do
    for n in 2 1; do
      for v in c48 c49 p49a p49b p49c; do
        run n$n-$v-$i 60 "${E32[@]}" NTHREADS=$n "${SHARE[@]}" $G/$v/06_symm_bench "${T[@]}" --contenders $C --json $L/n$n-$v-$i.json
      done
    done
  done
  ;;
probe51|probe52)
  for c in c49 c50 c51 c52; do
    [ -f .carry/$c.txz ] && { mkdir -p $G && tar -xJf .carry/$c.txz -C $G --strip-components=1; }
  done
  C=fused,triton,symm-layer,unfused-nccl-graph
  T=(--build nvcc -b 8 -e 256K -f 8 -n 20 -w 5 --trials 3)
  V="c48 p49c q1 q2 q3"; [ $PART = probe52 ] && V="c48 q3 p49c r1 r2"
  for v in $V; do
    run build-$v-f32 200 "${E32[@]}" NTHREADS=1 $G/$v/06_symm_bench --build nvcc -b 8 -e 8 -n 1 -w 0 --trials 1 --contenders fused,triton
  done
  for i in 1 2; do
    for n in 2 1; do
      for v in $V; do
        run n$n-$v-$i 60 "${E32[@]}" NTHREADS=$n "${SHARE[@]}" $G/$v/06_symm_bench "${T[@]}" --contenders $C --json $L/n$n-$v-$i.json
      done
    done
  done
  ;;
probe53)
  for c in c49 c53 c54; do
    [ -f .carry/$c.txz ] && { mkdir -p $G && tar -xJf .carry/$c.txz -C $G --strip-components=1; }
  done
  C=fused,triton,symm-layer,unfused-nccl-graph
  T=(--build nvcc -b 8 -e 256K -f 8 -n 20 -w 5 --trials 3)
  for v in c48 c49b c49c; do
    run build-$v-f32 200 "${E32[@]}" NTHREADS=1 $G/$v/06_symm_bench --build nvcc -b 8 -e 8 -n 1 -w 0 --trials 1 --contenders fused,triton
  done
  for i in 1 2 3; do
    for n in 2 1; do
      [ $n = 1 ] && [ $i = 3 ] && continue
      for v in c48 c49b c49c; do
        run n$n-$v-$i 60 "${E32[@]}" NTHREADS=$n "${SHARE[@]}" $G/$v/06_symm_bench "${T[@]}" --contenders $C --json $L/n$n-$v-$i.json
      done
    done
  done
  ;;
probe54)
  unpack c49 c55
  printing_probe fused,symm-layer,unfused-nccl-graph
  for v in c48 p54; do run build-$v-f32 200 "${E32[@]}" NTHREADS=1 $G/$v/06_symm_bench "${W[@]}"; done
  run build-p54-bf16 200 "${E32[@]}" NTHREADS=1 $G/p54/06_symm_bench "${W[@]}" --dtype bf16
  for i in 1 2 3; do
    for n in 2 1; do
      for v in c48 p54; do
        run n$n-$v-$i 60 "${E32[@]}" NTHREADS=$n "${SHARE[@]}" $G/$v/06_symm_bench "${T[@]}" --json $L/n$n-$v-$i.json
      done
    done
  done
  run n2-bf16-p54 60 "${E32[@]}" NTHREADS=2 "${SHARE[@]}" $G/p54/06_symm_bench "${T[@]}" --dtype bf16 --json $L/n2-bf16-p54.json
  run n4-p54 90 "${E32[@]}" NTHREADS=4 "${SHARE[@]}" $G/p54/06_symm_bench "${T[@]}" --json $L/n4-p54.json
  ;;
perf55)
  unpack c49 c56
  side_by_side "c48 c55a c55b" "c55a c55b" no c55b
  ;;
perf56)
  unpack c49 c57
  side_by_side "c48 c56 c56b" "c48 c56 c56b" yes c56b
  ;;
probe57)
  [ -f .carry/c58.txz ] && { mkdir -p $G && tar -xJf .carry/c58.txz -C $G --strip-components=1; }
  C=fused,triton,symm-layer,unfused-nccl-graph,unfused05-graph
  T=(--build nvcc -b 8 -e 256K -f 8 -n 20 -w 5 --trials 3)
  for d in f32 bf16; do
    run build-p57-$d 200 "${E32[@]}" NTHREADS=1 $G/p57/06_symm_bench --build nvcc -b 8 -e 8 -n 1 -w 0 --trials 1 --contenders fused,triton --dtype $d
  done
  # each: "own" (a module per rank, as HEAD) and "one" (PROBE57_SHARE: one per process)
  mode() { [ $1 = one ] && echo PROBE57_SHARE=1 || echo PROBE57_OWN=1; }
  for i in 1 2 3 4; do
    for n in 2 1 4; do
      { [ $n = 1 ] && [ $i -gt 2 ]; } && continue
      { [ $n = 4 ] && [ $i -gt 1 ]; } && continue
      for m in own one; do
        run n$n-f32-$m-$i 90 "${E32[@]}" NTHREADS=$n "${SHARE[@]}" $(mode $m) $G/p57/06_symm_bench "${T[@]}" --contenders $C --json $L/n$n-f32-$m-$i.json
      done
    done
  done
  for i in 1 2; do
    for m in own one; do
      run n2-bf16-$m-$i 60 "${E32[@]}" NTHREADS=2 "${SHARE[@]}" $(mode $m) $G/p57/06_symm_bench "${T[@]}" --contenders fused,triton,unfused-nccl-graph --dtype bf16 --json $L/n2-bf16-$m-$i.json
    done
  done
  ;;
probe58)
  unpack c49 c59
  printing_probe fused,symm-layer,unfused-nccl-graph
  for v in c48 p58; do
    for d in f32 bf16; do run build-$v-$d 200 "${E32[@]}" NTHREADS=1 $G/$v/06_symm_bench "${W[@]}" --dtype $d; done
  done
  for i in 1 2; do
    for n in 1 2; do
      for v in c48 p58; do
        run n$n-f32-$v-$i 60 "${E32[@]}" NTHREADS=$n "${SHARE[@]}" $G/$v/06_symm_bench "${T[@]}" --json $L/n$n-f32-$v-$i.json
      done
    done
  done
  for n in 1 2; do
    for v in c48 p58; do
      run n$n-bf16-$v 60 "${E32[@]}" NTHREADS=$n "${SHARE[@]}" $G/$v/06_symm_bench "${T[@]}" --dtype bf16 --json $L/n$n-bf16-$v.json
    done
  done
  ;;
probe59)
  unpack c60
  printing_probe fused
  for d in f32 bf16; do run build-p59-$d 200 "${E32[@]}" NTHREADS=1 $G/p59/06_symm_bench "${W[@]}" --dtype $d; done
  for i in 1 2 3; do run n2-f32-p59-$i 60 "${E32[@]}" NTHREADS=2 "${SHARE[@]}" $G/p59/06_symm_bench "${T[@]}" --json $L/n2-f32-p59-$i.json; done
  run n1-f32-p59-1 60 "${E32[@]}" NTHREADS=1 $G/p59/06_symm_bench "${T[@]}" --json $L/n1-f32-p59-1.json
  run n2-bf16-p59-1 60 "${E32[@]}" NTHREADS=2 "${SHARE[@]}" $G/p59/06_symm_bench "${T[@]}" --dtype bf16 --json $L/n2-bf16-p59-1.json
  run n4-f32-p59-1 90 "${E32[@]}" NTHREADS=4 "${SHARE[@]}" $G/p59/06_symm_bench "${T[@]}" --json $L/n4-f32-p59-1.json
  ;;
perf57)
  unpack c49 c61
  side_by_side "c48 c57a c57b" "c48 c57a c57b" yes c57b
  ;;
perf57c)
  unpack c49 c61 c62
  side_by_side "c48 c57a c57c" "c48 c57c" no c57c
  ;;
perf57d)
  unpack c49 c63
  side_by_side "c48 c57d" "c48 c57d" no c57d
  ;;
confirm57d)
  unpack c49 c63
  T=(--build nvcc -b 8 -e 256K -f 8 -n 20 -w 5 --trials 3 --contenders fused,triton,symm-layer,unfused-nccl-graph)
  for v in c48 c57d; do
    "${E32[@]}" NTHREADS=1 $G/$v/06_symm_bench --build nvcc -b 8 -e 8 -n 1 -w 0 --trials 1 --contenders fused,triton > $L/build-$v-f32.log 2>&1 &
  done
  wait
  for i in 1 2 3 4 5 6; do
    for n in 2 1; do
      { [ $n = 1 ] && [ $i -gt 2 ]; } && continue
      for v in c48 c57d; do
        run n$n-f32-$v-$i 60 "${E32[@]}" NTHREADS=$n "${SHARE[@]}" $G/$v/06_symm_bench "${T[@]}" --json $L/n$n-f32-$v-$i.json
      done
    done
  done
  python3 runs/2026-11-27/scripts/decide.py $L $PART > $L/decision.txt 2>&1; cat $L/decision.txt
  ;;
perf60|perf60c|confirm60c|confirm60c2|confirm60c3)
  # c57d (HEAD's GPU code) from .carry/c63.txz; c60a and c60 from .carry/c64.txz,
  # or c60c from .carry/c65.txz. perf60 and perf60c: the builds in turn, six runs at
  # 2 ranks and two at 1 in each type, then the stress mode on the last build;
  # confirm60c: c57d and c60c in ABBA order, eight runs at 2 ranks; confirm60c2: ten
  # at 2 ranks and three at 1; confirm60c3: twelve and three.
  unpack c63 c64 c65
  V="c57d c60a c60"; [ $PART = perf60 ] || V="c57d c60c"
  RUNS=6; [ $PART = confirm60c ] && RUNS=8; [ $PART = confirm60c2 ] && RUNS=${CONFIRM_RUNS:-10}
  [ $PART = confirm60c3 ] && RUNS=${CONFIRM_RUNS:-12}
  ONE=2; [ $PART = confirm60c2 ] || [ $PART = confirm60c3 ] && ONE=3
  order_of() {
    if [ ${PART#confirm} != $PART ] && [ $(($1 % 2)) = 0 ]; then echo c60c c57d; else echo $V; fi
  }
  nvcc_modules
  in_turn $RUNS $ONE
  if [ ${PART#confirm} != $PART ]; then
    python3 runs/2026-11-27/scripts/decide.py $L $PART > $L/decision.txt 2>&1; cat $L/decision.txt
  else
    stress_and_decide ${V##* }
  fi
  ;;
confirm61|confirm62|confirm63)
  # confirm61: c57d (.carry/c63.txz), c60c (.carry/c65.txz) and c61 (.carry/c66.txz: 60c
  # and the one-shot's staging addresses in registers) in turn, each first, second and third
  # in as many runs, twelve runs at 2 ranks. confirm62 and confirm63: c61 and c62
  # (.carry/c67.txz) or c63 (.carry/c68.txz) in ABBA order, ten runs at 2 ranks for c62 and
  # eight for c63. CONFIRM_RUNS=N for N; three runs at 1 rank; both types.
  unpack c63 c65 c66 c67 c68
  case $PART in
    confirm61) V="c57d c60c c61"; RUNS=${CONFIRM_RUNS:-12} ;;
    confirm62) V="c61 c62"; RUNS=${CONFIRM_RUNS:-10} ;;
    confirm63) V="c61 c63"; RUNS=${CONFIRM_RUNS:-8} ;;
  esac
  nvcc_modules
  in_turn $RUNS 3
  python3 runs/2026-11-27/scripts/decide.py $L $PART > $L/decision.txt 2>&1; cat $L/decision.txt
  ;;
confirm64)
  # c63 (.carry/c68.txz: HEAD's GPU code) and c64 (.carry/c69.txz: Triton's one-row epilogue
  # keeps its first chunk, h and gamma, in registers) in ABBA order: ten runs at 1 rank
  # (CONFIRM_RUNS=N), six at 2, both types; then 16 and 128 MiB at 1 rank, both types, twice
  # in ABBA order; then, on c63, 8 to 64 B and 16 to 64 B by doubling at 1 rank, three times
  # each (where Triton's 8 B time comes from: 16 B takes its aligned path, and a sweep from
  # 16 B has no 8 B before it). decide.py confirm64.
  unpack c68 c69
  V="c63 c64"; RUNS=${CONFIRM_RUNS:-10}
  nvcc_modules
  in_turn $RUNS $RUNS 6
  BIG=(--build nvcc -b 16M -e 128M -f 8 -n 8 -w 2 --trials 3 --contenders fused,triton,unfused-nccl-graph)
  for i in 1 2; do
    for d in f32 bf16; do
      for v in $(order_of $i); do
        run big-$d-$v-$i 60 "${E32[@]}" NTHREADS=1 $G/$v/06_symm_bench "${BIG[@]}" --dtype $d --json $L/big-$d-$v-$i.json
      done
    done
  done
  for i in 1 2 3; do
    for b in 8 16; do
      run tiny$b-c63-$i 60 "${E32[@]}" NTHREADS=1 $G/c63/06_symm_bench --build nvcc -b $b -e 64 -f 2 -n 20 -w 5 --trials 3 --contenders fused,triton,unfused-nccl-graph --json $L/tiny$b-c63-$i.json
    done
  done
  python3 runs/2026-11-27/scripts/decide.py $L $PART > $L/decision.txt 2>&1; cat $L/decision.txt
  ;;
confirm45)
  [ -f .carry/c45.txz ] && { mkdir -p $G && tar -xJf .carry/c45.txz -C $G --strip-components=1; }
  T=(--build nvcc -b 8 -e 256K -f 8 -n 20 -w 5 --trials 3 --contenders fused,triton,symm-layer,unfused-nccl-graph)
  run build-p45 200 "${E32[@]}" NTHREADS=1 $G/p45/06_symm_bench --build nvcc -b 8 -e 8 -n 1 -w 0 --trials 1 --contenders fused,triton
  run build-c45 200 "${E32[@]}" NTHREADS=1 $G/c45/06_symm_bench --build nvcc -b 8 -e 8 -n 1 -w 0 --trials 1 --contenders fused,triton
  for i in 1 2 3; do
    for v in p45 c45; do
      run n1-$v-$i 60 "${E32[@]}" NTHREADS=1 $G/$v/06_symm_bench "${T[@]}" --json $L/n1-$v-$i.json
    done
  done
  python3 runs/2026-11-27/scripts/decide.py $L confirm45 > $L/decision.txt 2>&1; cat $L/decision.txt
  ;;
probe46)
  [ -f .carry/threads.txz ] && { mkdir -p $G && tar -xJf .carry/threads.txz -C $G; }
  B=$G/threads/bin
  C=fused,triton,symm-layer,unfused-nccl-graph,unfused05-graph
  T=(--build nvcc -b 8 -e 256K -f 8 -n 20 -w 5 --trials 3 --contenders $C)
  run build-probe 200 "${E32[@]}" NTHREADS=1 $B/06_symm_bench --build nvcc -b 8 -e 8 -n 1 -w 0 --trials 1 --contenders fused,triton,unfused05-graph
  for i in 1 2; do
    for n in 2 1; do
      for g in all 8 16 32; do
        X=(); [ $g = all ] || X=(--blocks $g)
        run n$n-g$g-$i 60 "${E32[@]}" NTHREADS=$n "${SHARE[@]}" $B/06_symm_bench "${T[@]}" "${X[@]}" --json $L/n$n-g$g-$i.json
      done
    done
  done
  ;;
probe47)
  [ -f .carry/threads.txz ] && { mkdir -p $G && tar -xJf .carry/threads.txz -C $G; }
  B=$G/threads/bin
  C=fused,triton,symm-layer,unfused-nccl-graph,unfused05-graph
  T=(--build nvcc -b 8 -e 256K -f 8 -n 20 -w 5 --trials 3 --contenders $C)
  BIG=(--build nvcc -b 16M -e 128M -f 8 -n 8 -w 2 --trials 3 --contenders fused,triton,unfused-nccl-graph)
  run build-probe 200 "${E32[@]}" NTHREADS=1 $B/06_symm_bench --build nvcc -b 8 -e 8 -n 1 -w 0 --trials 1 --contenders fused,triton,unfused05-graph
  for i in 1 2; do
    for g in all 65 64 48 32; do
      X=(); [ $g = all ] || X=(--blocks $g)
      run n2-g$g-$i 60 "${E32[@]}" NTHREADS=2 "${SHARE[@]}" $B/06_symm_bench "${T[@]}" "${X[@]}" --json $L/n2-g$g-$i.json
    done
  done
  for g in all 64 32; do
    X=(); [ $g = all ] || X=(--blocks $g)
    run n2-big-g$g 90 "${E32[@]}" NTHREADS=2 "${SHARE[@]}" $B/06_symm_bench "${BIG[@]}" "${X[@]}" --json $L/n2-big-g$g.json
  done
  ;;
probe48)
  [ -f .carry/c48.txz ] && { mkdir -p $G && tar -xJf .carry/c48.txz -C $G --strip-components=1; }
  T=(--build nvcc -b 8 -e 32K -f 64 -n 20 -w 5 --trials 3 --contenders fused,symm-layer)
  for v in p48 c48; do
    run build-$v 200 "${E32[@]}" NTHREADS=1 $G/$v/06_symm_bench --build nvcc -b 8 -e 8 -n 1 -w 0 --trials 1 --contenders fused
  done
  for i in 1 2 3 4 5 6 7 8; do
    for v in p48 c48; do
      run n2-$v-$i 60 "${E32[@]}" NTHREADS=2 "${SHARE[@]}" $G/$v/06_symm_bench "${T[@]}" --json $L/n2-$v-$i.json
    done
  done
  ;;
two-gpus)
  [ -f .carry/threads.txz ] && { mkdir -p $G && tar -xJf .carry/threads.txz -C $G; }
  { nvidia-smi topo -m; } > "$L/topo.log" 2>&1
  suite_and_stress
  C=(--contenders fused,triton,unfused-nccl-graph,unfused05-graph)
  SMALL=(--build nvcc -b 8 -e 256K -f 8 -n 20 -w 5 --trials 3)
  # Float32 three times and bfloat16 twice from call 379 on (call 325: twice and once).
  for i in 1 2 3; do
    run stand-small-f32-2gpu-$i 60 "${E32[@]}" NTHREADS=2 $B/06_symm_bench "${SMALL[@]}" "${C[@]}" --json $L/stand-small-f32-2gpu-$i.json
    [ $i = 3 ] && continue
    s=; [ $i = 1 ] || s=-$i
    run stand-small-bf16-2gpu$s 60 "${E32[@]}" NTHREADS=2 $B/06_symm_bench "${SMALL[@]}" --contenders fused,triton,unfused-nccl-graph --dtype bf16 --json $L/stand-small-bf16-2gpu$s.json
  done
  run 06-nvcc-2gpu 120 "${E32[@]}" NTHREADS=2 $B/06_symm_primitive --build nvcc
  run 06b-2gpu 120 "${E32[@]}" NTHREADS=2 $B/06b_symm_triton
  ;;
ncu5)
  [ -f .carry/threads.txz ] && { mkdir -p $G && tar -xJf .carry/threads.txz -C $G; }
  [ -f .carry/c41.txz ] && { mkdir -p $G && tar -xJf .carry/c41.txz -C $G --strip-components=1; }
  N=(ncu --cache-control all --clock-control none --launch-skip 5 --launch-count 1
     --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats
     --section SchedulerStats --section SourceCounters)
  for o in fused-256K-c40 fused-256K-threads fused-128M-bf16-threads; do
    v=${o##*-}; b=$G/$v/06_symm_bench; [ $v = threads ] && b=$G/threads/bin/06_symm_bench
    A=(--build nvcc -b 256K -e 256K -n 5 -w 2 --trials 1 --contenders fused)
    [ $o = fused-128M-bf16-threads ] && A=(--build nvcc -b 128M -e 128M -n 5 -w 2 --trials 1 --contenders fused --dtype bf16)
    run ncu-$o 150 "${E32[@]}" NTHREADS=1 XDG_CACHE_HOME=/tmp/cache-ncu-$v "${N[@]}" -k regex:tp_tail_fused -o $L/$o $b "${A[@]}"
    [ -f $L/$o.ncu-rep ] || continue
    ncu -i $L/$o.ncu-rep > $L/$o-details.txt 2>&1
    ncu -i $L/$o.ncu-rep --page source --csv --print-source sass 2>&1 | gzip > $L/$o-sass.csv.gz
    rm -f $L/$o.ncu-rep
  done
  ;;
sweeps)
  [ -f .carry/threads.txz ] && { mkdir -p $G && tar -xJf .carry/threads.txz -C $G; }
  for n in 1 2; do
    run default-n$n 90 "${E32[@]}" NTHREADS=$n "${SHARE[@]}" $G/threads/bin/06_symm_bench --json $L/default-n$n.json
  done
  ;;
ncu3)
  [ -f .carry/threads.txz ] && { mkdir -p $G && tar -xJf .carry/threads.txz -C $G; }
  R=("${E32[@]}" NTHREADS=1 XDG_CACHE_HOME=/tmp/cache-ncu3)
  N=(ncu --cache-control all --clock-control none --launch-skip 3 --launch-count 1
     --section SpeedOfLight --section MemoryWorkloadAnalysis --section WarpStateStats
     --section SchedulerStats --section Occupancy --section LaunchStats)
  A=(--build nvcc -b 128M -e 128M -n 5 -w 1 --trials 1)
  run build-ncu3 200 "${R[@]}" $G/threads/bin/06_symm_bench --build nvcc -b 8 -e 8 -n 1 -w 0 --trials 1 --contenders fused,unfused05
  run ncu-compute-128M 120 "${R[@]}" "${N[@]}" -k regex:tp_compute $G/threads/bin/06_symm_bench "${A[@]}" --contenders unfused05
  run ncu-fused-128M 120 "${R[@]}" "${N[@]}" -k regex:tp_tail_fused $G/threads/bin/06_symm_bench "${A[@]}" --contenders fused
  run ncu-epilogue-128M 120 "${R[@]}" "${N[@]}" -k regex:tp_residual_rmsnorm $G/threads/bin/06_symm_bench "${A[@]}" --contenders unfused05
  ;;
ncu1)
  R=("${E32[@]}" NTHREADS=1)
  N=(ncu --cache-control none --clock-control none --launch-skip 20 --launch-count 1
     --section SpeedOfLight --section WarpStateStats --section InstructionStats
     --section SourceCounters --section LaunchStats)
  A=(--build nvcc -b 8 -e 8 -n 20 -w 5 --trials 1)
  run ncu-fused-8 120 "${R[@]}" "${N[@]}" -k regex:tp_tail_fused -o $L/fused-8 $G/base/06_symm_bench "${A[@]}" --contenders fused
  run ncu-triton-8 120 "${R[@]}" "${N[@]}" -k regex:tp_tail_triton -o $L/triton-8 $G/base/06_symm_bench "${A[@]}" --contenders triton
  run ncu-symm-8 120 "${R[@]}" "${N[@]}" -k regex:symm_all_reduce_kernel -o $L/symm-8 $G/base/06_symm_bench "${A[@]}" --contenders symm-layer
  for r in fused-8 triton-8 symm-8; do
    [ -f $L/$r.ncu-rep ] || continue
    ncu -i $L/$r.ncu-rep --page details > $L/$r-details.txt 2>&1
    ncu -i $L/$r.ncu-rep --page source --csv --print-source sass > $L/$r-sass.csv 2>&1
  done
  ;;
esac
