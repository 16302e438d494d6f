#!/usr/bin/env bash
# Issue 33 on a machine with 2 GPUs (nvidia-h100-x2), one rank per GPU: what
# only NVLink can show. Staged by one-gpu-stage.sh (the same carries as
# one-gpu.sh); calls made back to back on one warm machine, each with
# CALL=callNN and one PART:
#   PART=stage    carry one piece per call, .nccl/nccl-2.32.3.tar.xz, then
#                 .jit/jit-tools.tar.gz (one-gpu.sh's stage), and read how the
#                 GPUs are linked (nvidia-smi topo -m, nvlink -s)
#   PART=bench    carry .carry/threads.txz: the copy-engine bandwidth between
#                 the GPUs (peer_copy.py); NCCL_SYM_CTAS swept from 2 MiB up,
#                 the best value kept; 05_allreduce_bench with nccl, fast,
#                 fast-jit, prims (nvcc build of fast) and with nccl-tuned,
#                 fast, 8 B to 512 MiB, alternated twice; 06_symm_bench,
#                 float32 with every contender and bfloat16 with the layer-tail
#                 ones, 8 B to 512 MiB
#   PART=lessons  every program at 2 ranks (nvcc and jit routes, CUDA f32/bf16,
#                 Triton, the your_*_kernel examples), lesson 02 with
#                 NCCL_WIN_ENABLE=0, lessons 01 to 05b on the system's 2.28.3
#                 and the PyTorch wheel's 2.28.9; then the stress modes, 2,000
#                 operations per size: every kernel of 05_allreduce_bench,
#                 both fused kernels of 06_symm_bench, and with --one-region
#   PART=suite    the thread build's whole suite at GPU_TEST_RANKS=2
#   PART=mpi      carry .carry/mpi.txz: every program under mpirun -np 2 (no
#                 MPS: one process per GPU), NVSHMEM at 2 PEs, the emulated
#                 nodes, the MPI build's suite at GPU_TEST_RANKS=2, its fault
#                 matrix
#   PART=release  carry .nccl/nccl-$NCCL.tar.xz: lessons 01 to 05b at 2 ranks
#   PART=probe    carry .carry/threads.txz: issue 32's fixed-cost probe,
#                 06_symm_bench from 8 B to 256 KiB with --blocks 1, 4, 16, 66
#                 and 132, at 2 ranks and at 1, and ncu's view of
#                 symm_all_reduce_kernel and tp_tail_fused at 8 B (1 rank)
#   PART=final    after the session's last change (carry .carry/threads.txz,
#                 and .carry/before-barrier.txz for the before/after timing of
#                 lesson 06's change 3 and the stress modes on it): the thread
#                 build's whole suite at GPU_TEST_RANKS=2 (PROBE=1: then the
#                 probe)
#   PART=mpi-transcripts carry .carry/mpi.txz: lessons 02, 04, 06, 06b, 06c
#                 (both dtypes) and your_cuda_kernel under mpirun -np 2, the
#                 NVSHMEM stress mode, the MPI build's transcript tests
# Logs go to $OUT/$CALL/ (index.txt: each step's exit code) and come back as
# $OUT/$CALL.tgz. A step that would start past $BUDGET seconds is skipped.
set -u
CALL=${CALL:?CALL=callNN}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
L=$OUT/$CALL; mkdir -p "$L"
run() {
  local name=$1 lim=$2; shift 2
  if [ $((SECONDS + 5)) -gt ${BUDGET:-560} ]; then
    printf '%-34s %s\n' "$name" "skipped: out of time" | tee -a "$L/index.txt"; return
  fi
  [ $((SECONDS + lim)) -gt ${BUDGET:-560} ] && lim=$((${BUDGET:-560} - SECONDS))
  { echo "\$ $*"; date -u +%FT%TZ; timeout "$lim" "$@"; echo "exit $?"; } > "$L/$name.log" 2>&1
  printf '%-34s %s\n' "$name" "$(tail -1 "$L/$name.log")" | tee -a "$L/index.txt"
}
finish() { tar czf "$OUT/$CALL.tgz" -C "$OUT" "$CALL" && rm -rf "$L"; }
S=/tmp/jit/site; J=$S/nvidia/nccl; NVJ=$S/nvidia/cu13/lib/libnvJitLink.so.13
G=/tmp/g; B=$G/threads/bin; M=$G/mpi/bin
E32=(env -u LD_LIBRARY_PATH NCCL_HOME=$J NVJITLINK=$NVJ XDG_CACHE_HOME=/tmp/cache
     TRITON_PYTHON=/opt/torch/.venv/bin/python)
W=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/nccl   # NCCL 2.28.9, PyTorch's wheel
NV=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/nvshmem
X=(-x NCCL_HOME -x NVJITLINK -x XDG_CACHE_HOME -x TRITON_PYTHON -x NVSHMEM_HOME)
unpack() { [ -f .carry/$1.txz ] && { mkdir -p $G && tar -xJf .carry/$1.txz -C $G; }; }
# lessons01to05 TAG ENV...: lessons 01 to 05b at 2 ranks, threads, with ENV.
lessons01to05() {
  local tag=$1; shift
  run $tag-01 120 "$@" NTHREADS=2 $B/01_allreduce_ub
  run $tag-02 120 "$@" NTHREADS=2 $B/02_allreduce_sm
  run $tag-03 120 "$@" NTHREADS=2 $B/03_alltoallv_sm
  run $tag-04 120 "$@" NTHREADS=2 $B/04_vmm_raw
  run $tag-05 300 "$@" NTHREADS=2 $B/05_device_lsa --build nvcc
  run $tag-05b 300 "$@" NTHREADS=2 $B/05b_lsa_fast --build nvcc
}

case ${PART:?PART=stage|bench|lessons|suite|mpi|release|probe|final|mpi-transcripts} in
stage)
  CALL=$CALL PART=stage bash runs/2026-11-25/scripts/one-gpu.sh > /dev/null
  { nvidia-smi -L; nvidia-smi topo -m; nvidia-smi nvlink -s; } > "$L/topology.log" 2>&1
  ;;
bench)
  unpack threads
  R=("${E32[@]}" NTHREADS=2)
  run peer-copy 120 /opt/torch/.venv/bin/python runs/2026-11-25/scripts/peer_copy.py
  # 1. NCCL_SYM_CTAS, one process per value (NCCL reads it once), 2 MiB up.
  for n in 8 16 32 64; do
    run sym-ctas-$n 60 "${R[@]}" $B/05_allreduce_bench --kernels nccl-tuned --sym-ctas $n \
      -b 2M -e 512M -f 4 --json $L/sym-ctas-$n.json
  done
  best=$(python3 - "$L" <<'PY'
import glob, json, sys
# The value with the highest out-of-place busbw summed over the sizes run.
score = {}
for f in glob.glob(sys.argv[1] + "/sym-ctas-*.json"):
    n = int(f.rsplit("-", 1)[1].split(".")[0])
    rows = [r for s in json.load(open(f))["series"] for r in s["rows"]]
    score[n] = sum(r["out_of_place"]["busbw"] for r in rows)
print(max(score, key=score.get) if score else 64)
PY
)
  echo "best NCCL_SYM_CTAS: $best" | tee -a "$L/index.txt"
  # 2. Lesson 05b's fast kernel against NCCL, defaults and tuned, alternated.
  for i in 1 2; do
    run 05-bench-$i 150 "${R[@]}" $B/05_allreduce_bench --build nvcc --kernels nccl,fast,fast-jit,prims \
      -b 8 -e 512M -f 2 --json $L/05-bench-$i.json
    run 05-tuned-$i 90 "${R[@]}" $B/05_allreduce_bench --build nvcc --kernels nccl-tuned,fast --sym-ctas $best \
      -b 8 -e 512M -f 2 --json $L/05-tuned-$i.json
  done
  # 3. Lesson 06: the fused layer tail against the same work unfused.
  run 06-bench-f32 150 "${R[@]}" $B/06_symm_bench --build nvcc \
    --contenders fused,triton,unfused05,unfused-nccl,symm-layer,symm,fast05,nccl \
    -b 8 -e 512M -f 2 --json $L/06-bench-f32.json
  run 06-bench-bf16 150 "${R[@]}" $B/06_symm_bench --build nvcc --dtype bf16 \
    --contenders fused,triton,unfused-nccl,symm-layer -b 8 -e 512M -f 2 --json $L/06-bench-bf16.json
  finish
  ;;
lessons)
  unpack threads
  R=("${E32[@]}" NTHREADS=2)
  run 01 120 "${R[@]}" $B/01_allreduce_ub
  run 02 120 "${R[@]}" $B/02_allreduce_sm
  run 02-win-enable-0 120 "${R[@]}" NCCL_WIN_ENABLE=0 $B/02_allreduce_sm
  run 03 120 "${R[@]}" $B/03_alltoallv_sm
  run 04 120 "${R[@]}" $B/04_vmm_raw
  run 05-nvcc 300 "${R[@]}" $B/05_device_lsa --build nvcc
  run 05-jit 300 "${R[@]}" $B/05_device_lsa --build jit
  run 05b-nvcc 120 "${R[@]}" $B/05b_lsa_fast --build nvcc
  run 05b-jit 120 "${R[@]}" $B/05b_lsa_fast --build jit
  run 06-nvcc-f32 120 "${R[@]}" $B/06_symm_primitive --build nvcc
  run 06-nvcc-bf16 120 "${R[@]}" $B/06_symm_primitive --build nvcc --dtype bf16
  run 06-jit-f32 120 "${R[@]}" $B/06_symm_primitive --build jit
  run 06b-f32 120 "${R[@]}" $B/06b_symm_triton
  run 06b-bf16 120 "${R[@]}" $B/06b_symm_triton --dtype bf16
  run your-cuda-kernel 120 "${R[@]}" $B/your_cuda_kernel
  run your-triton-kernel 120 "${R[@]}" $B/your_triton_kernel
  run 06c-threads-expect-2 60 "${E32[@]}" NVSHMEM_HOME=$NV NTHREADS=2 $B/06c_symm_nvshmem
  lessons01to05 2.28.3 env -u NCCL_HOME LD_LIBRARY_PATH= XDG_CACHE_HOME=/tmp/cache
  lessons01to05 2.28.9 env -u LD_LIBRARY_PATH NCCL_HOME=$W XDG_CACHE_HOME=/tmp/cache
  # The stress modes: 2,000 back-to-back operations per size, skewed ranks,
  # in place and out of place, every operation checked.
  SZ=(-b 4K -e 4M -f 32)
  run 05-stress-nvcc 200 "${R[@]}" $B/05_allreduce_bench --build nvcc --stress 2000 --kernels nccl,simple,vec16,twoshot,fast "${SZ[@]}"
  run 05-stress-oneshot 120 "${R[@]}" $B/05_allreduce_bench --build nvcc --stress 2000 --kernels oneshot -b 8 -e 1M -f 128
  run 05-stress-jit 200 "${R[@]}" $B/05_allreduce_bench --stress 2000 --kernels fast-jit,prims,prims-oneshot,prims-twoshot "${SZ[@]}"
  run 06-stress 200 "${R[@]}" $B/06_symm_bench --build nvcc --contenders fused,triton --stress 2000 "${SZ[@]}"
  run 06-stress-one-region 200 "${R[@]}" $B/06_symm_bench --build nvcc --contenders fused,triton --stress 2000 --one-region "${SZ[@]}"
  finish
  ;;
suite)
  unpack threads
  run suite-threads ${SUITE_LIMIT:-500} "${E32[@]}" GPU_TEST_RANKS=2 PATH=$G/threads/bin:$PATH \
    $G/threads/cargo-nextest nextest run --archive-file $G/threads/tests.tar.zst --workspace-remap . \
    --run-ignored all --no-fail-fast --test-threads 1
  finish
  ;;
mpi)
  unpack mpi
  MPI=(mpirun -np 2 "${X[@]}")
  if [ -z "${SUITE_ONLY:-}" ]; then
    run mpi-01 120 "${E32[@]}" "${MPI[@]}" $M/01_allreduce_ub
    run mpi-02 120 "${E32[@]}" "${MPI[@]}" $M/02_allreduce_sm
    run mpi-03 120 "${E32[@]}" "${MPI[@]}" $M/03_alltoallv_sm
    run mpi-04 120 "${E32[@]}" "${MPI[@]}" $M/04_vmm_raw
    run mpi-05-nvcc 300 "${E32[@]}" "${MPI[@]}" $M/05_device_lsa --build nvcc
    run mpi-05b-jit 300 "${E32[@]}" "${MPI[@]}" $M/05b_lsa_fast --build jit
    run mpi-06-nvcc 300 "${E32[@]}" "${MPI[@]}" $M/06_symm_primitive --build nvcc
    run mpi-06b 300 "${E32[@]}" "${MPI[@]}" $M/06b_symm_triton
    run mpi-your-cuda-kernel 120 "${E32[@]}" "${MPI[@]}" $M/your_cuda_kernel
    run mpi-06c-f32 300 "${E32[@]}" NVSHMEM_HOME=$NV "${MPI[@]}" $M/06c_symm_nvshmem
    run mpi-06c-bf16 300 "${E32[@]}" NVSHMEM_HOME=$NV "${MPI[@]}" $M/06c_symm_nvshmem --dtype bf16
    run mpi-emulated-01 120 "${E32[@]}" "${MPI[@]}" tools/emulate-nodes $M/01_allreduce_ub
    run mpi-emulated-02 120 "${E32[@]}" "${MPI[@]}" tools/emulate-nodes $M/02_allreduce_sm
    run mpi-emulated-05 120 "${E32[@]}" "${MPI[@]}" tools/emulate-nodes $M/05_device_lsa --build nvcc
  fi
  SUITE=("${E32[@]}" NVSHMEM_HOME=$NV GPU_TEST_RANKS=2 PATH=$G/mpi/bin:$PATH
         $G/mpi/cargo-nextest nextest run --archive-file $G/mpi/tests.tar.zst --workspace-remap .
         --run-ignored all --no-fail-fast --test-threads 1)
  run suite-mpi ${SUITE_LIMIT:-400} "${SUITE[@]}" -E 'not test(/fault/)'
  pkill -9 -f "$G/mpi/bin/" 2>/dev/null; pkill -9 -f /tmp/nextest-archive 2>/dev/null
  run suite-mpi-faults 200 "${SUITE[@]}" -E 'test(/fault/)'
  finish
  ;;
probe|final)
  unpack threads
  if [ $PART = final ] && [ -f .carry/before-barrier.txz ]; then
    # Change 3 of lesson 06's PERF_NOTES, before/after in one call:
    # 06_symm_bench of df44622 (four grid barriers; .carry/before-barrier.txz)
    # against this build's, alternating, twice at 2 ranks, once at 1.
    mkdir -p $G && tar -xJf .carry/before-barrier.txz -C $G
    C=fused,triton,symm-layer,unfused05,unfused-nccl,symm,fast05
    for i in 1 2; do
      for v in before after; do
        b=$B; [ $v = before ] && b=$G/before/bin
        run 06-$v-n2-$i 120 "${E32[@]}" NTHREADS=2 $b/06_symm_bench --build nvcc --contenders $C \
          -b 8 -e 512M -f 8 -n 20 -w 5 --trials 3 --json $L/06-$v-n2-$i.json
      done
    done
    for v in before after; do
      b=$B; [ $v = before ] && b=$G/before/bin
      run 06-$v-n1 90 "${E32[@]}" NTHREADS=1 $b/06_symm_bench --build nvcc --contenders $C \
        -b 8 -e 256K -f 8 -n 20 -w 5 --trials 3 --json $L/06-$v-n1.json
    done
    python3 runs/2026-11-25/scripts/compare.py $L/06-before-n2-1.json $L/06-after-n2-1.json \
      $L/06-before-n2-2.json $L/06-after-n2-2.json > $L/06-before-after-n2.txt 2>&1
    python3 runs/2026-11-25/scripts/compare.py $L/06-before-n1.json $L/06-after-n1.json \
      > $L/06-before-after-n1.txt 2>&1
    SZ=(-b 4K -e 4M -f 32)
    run 06-stress 120 "${E32[@]}" NTHREADS=2 $B/06_symm_bench --build nvcc --contenders fused,triton --stress 2000 "${SZ[@]}"
    run 06-stress-one-region 120 "${E32[@]}" NTHREADS=2 $B/06_symm_bench --build nvcc --contenders fused,triton \
      --stress 2000 --one-region "${SZ[@]}"
  fi
  if [ $PART = final ]; then
    run suite-threads ${SUITE_LIMIT:-420} "${E32[@]}" GPU_TEST_RANKS=2 PATH=$G/threads/bin:$PATH \
      $G/threads/cargo-nextest nextest run --archive-file $G/threads/tests.tar.zst --workspace-remap . \
      --run-ignored all --no-fail-fast --test-threads 1
  fi
  if [ $PART = probe ] || [ -n "${PROBE:-}" ]; then
    P=(--build nvcc --contenders fused,symm-layer,unfused05,unfused-nccl,symm,fast05
       -b 8 -e 256K -f 8 -n 20 -w 5 --trials 3)
    for n in 2 1; do
      for b in 1 4 16 66 132; do
        run probe-n$n-blocks$b 60 "${E32[@]}" NTHREADS=$n $B/06_symm_bench "${P[@]}" --blocks $b \
          --json $L/probe-n$n-blocks$b.json
      done
    done
    NCU=(ncu --clock-control none --launch-skip 10 --launch-count 1
         --section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats
         --section SourceCounters)
    for k in symm_all_reduce_kernel tp_tail_fused; do
      run ncu-$k 90 "${E32[@]}" NTHREADS=1 "${NCU[@]}" -k regex:$k $B/06_symm_bench --build nvcc \
        --contenders fused,symm-layer,symm -b 8 -e 8 -n 20 -w 5 --trials 1
    done
  fi
  finish
  ;;
mpi-transcripts)
  unpack mpi
  MPI=(mpirun -np 2 "${X[@]}")
  for p in 02_allreduce_sm 04_vmm_raw 06_symm_primitive 06b_symm_triton; do
    run mpi-$p 300 "${E32[@]}" "${MPI[@]}" $M/$p
  done
  run mpi-06c-f32 120 "${E32[@]}" NVSHMEM_HOME=$NV "${MPI[@]}" $M/06c_symm_nvshmem
  run mpi-06c-bf16 120 "${E32[@]}" NVSHMEM_HOME=$NV "${MPI[@]}" $M/06c_symm_nvshmem --dtype bf16
  run mpi-your-cuda-kernel 120 "${E32[@]}" "${MPI[@]}" $M/your_cuda_kernel
  run mpi-06-stress-nvshmem 200 "${E32[@]}" NVSHMEM_HOME=$NV "${MPI[@]}" $M/06_symm_bench --backend nvshmem \
    --contenders fused --stress 2000 -b 4K -e 4M -f 32
  run suite-mpi-transcripts 300 "${E32[@]}" NVSHMEM_HOME=$NV GPU_TEST_RANKS=2 PATH=$G/mpi/bin:$PATH \
    $G/mpi/cargo-nextest nextest run --archive-file $G/mpi/tests.tar.zst --workspace-remap . \
    --run-ignored all --no-fail-fast --test-threads 1 -E 'test(/transcript/)'
  finish
  ;;
release)
  V=${NCCL:?NCCL=2.30.7|2.31.2}
  mkdir -p /tmp/r && tar -xJf .nccl/nccl-$V.tar.xz -C /tmp/r
  lessons01to05 $V env -u LD_LIBRARY_PATH NCCL_HOME=/tmp/r/nccl-$V XDG_CACHE_HOME=/tmp/cache
  finish
  ;;
esac
cat "$L/index.txt" 2>/dev/null
