#!/usr/bin/env bash
# Several ranks on ONE GPU (NCCL_MULTI_RANK_GPU_ENABLE=1, NCCL 2.30+): every
# lesson at 2, 3, 4 and 8 ranks, the stress modes, the GPU suites at 2 and 4
# ranks, MPI mode under a private MPS daemon, the emulated nodes, and NCCL
# 2.30.7 and 2.31.2 for lessons 01 to 05. Staged by one-gpu-stage.sh; calls
# made back to back on one warm machine (files under /tmp stay while it is
# warm), each with CALL=callNN and one PART:
#   PART=stage   carry one piece per call: .nccl/nccl-2.32.3.tar.xz, then
#                .jit/jit-tools.tar.gz (unpacked into /tmp/jit, a wheel layout)
#   PART=lessons carry .carry/threads.txz (the first time): the refusals, then
#                every lesson at $RANKS ranks (default "2 3 4 8") on 2.32.3 (nvcc
#                and jit routes, CUDA f32/bf16 and Triton), lesson 02's NCCL log
#   PART=stress  the stress modes at 2 and 4 ranks
#   PART=suite   the thread build's whole suite at GPU_TEST_RANKS=$RANKS
#   PART=mpi     carry .carry/mpi.txz (the first time): MPI mode without MPS
#                (exit 2), then under a private MPS daemon every lesson at 2
#                ranks, NVSHMEM at 2 PEs, the emulated nodes (SUITE_ONLY=1 skips
#                these), and the MPI build's suite at GPU_TEST_RANKS=$RANKS
#                (FAULTS_ONLY=1: its fault matrix alone)
#   PART=recheck lesson 03 at 2 to 8 ranks, 06_symm_bench's sweep at 2 ranks
#   PART=stress06 06_symm_bench's stress mode on both fused kernels (CUDA and
#                Triton) at 2 and 4 ranks
#   PART=final   after the last change (carry .carry/threads.txz): the
#                thread suite at GPU_TEST_RANKS=2, the one-region stress mode
#                on both fused kernels at 2 and 4 ranks, lesson 06 and the
#                your_*_kernel examples at 4 ranks, lesson 06 at 8 (NO_N8=1
#                leaves those out)
#   PART=programs after issue 31's split: every program at $RANKS (default
#                "1 4") ranks, the your_*_kernel examples, lesson 05's build
#                from an empty cache and then cached
#   PART=timing  carry .carry/before-bench.txz: the fast kernel and the fused
#                kernel at one rank, the binaries from before issue 31's moves
#                against this build's, alternating
#   PART=change4 carry .carry/change4.txz (this build's 06_symm_bench in
#                $G/after, aa6d77e's in $G/before-ll): issue 32's change 4
#                before/after at 1, 2 and 4 ranks, alternating; the graph
#                contenders; 128 MiB; bfloat16; stress on the one-shot sizes
#                (both fused kernels, f32 and bf16, also --one-region); the
#                default sweep's wall time at 1 and 2 ranks
#   PART=probe4  after change4 (carry .carry/change4.txz): why the after
#                binary's timing run at 4 ranks gave no output in 90 s (each
#                contender alone at 4 ranks), ncu on both fused kernels and the
#                unfused kernels at 1 rank, and the cubins' resource use and SASS
#   PART=change5 carry .carry/change5.txz (change 4's 06_symm_bench in
#                $G/c4, this build's in $G/c5): change 5 before/after at 1 and
#                2 ranks and at 128 MiB, the stress mode at 2 ranks, and the
#                4-rank timing run that printed nothing in call 115, with gdb's
#                backtraces of every thread if it is still running after 45 s
#   PART=bisect4 carry .carry/change5.txz: which contenders, timed together
#                at 4 ranks on one GPU, make the run of call 119 hang
#   PART=last1   after this session's last change (carry .carry/threads.txz):
#                the thread suite at GPU_TEST_RANKS=2, lesson 06's stress mode
#                on the one-shot's sizes at 2 and 4 ranks (f32, bf16,
#                one-region), the 4-rank timing run that hung in calls 115,
#                119 and 121, and the default sweep's wall time at 1 and 2 ranks
#   PART=last3   carry .carry/mpi.txz: 06c (NVSHMEM) at 1 and 2 PEs under a
#                private MPS daemon, float32 and bfloat16
#   PART=recheck06 carry .carry/final06.txz (lesson 06's programs, threads
#                and MPI builds, in $G/f06): after the last host-side and
#                comment-only changes, lesson 06 through nvcc and jit, 06b,
#                your_cuda_kernel at 2 ranks, 06c at 1 and 2 PEs under MPS,
#                and a short 06_symm_bench run with a graph contender
#   PART=release carry .nccl/nccl-$NCCL.tar.xz: lessons 01 to 05 at 2, 3, 4 and 8
#                ranks on that release (05 through nvcc)
# Logs go to $OUT/$CALL/ (index.txt: each step's exit code) and come back as
# $OUT/$CALL.tgz.
set -u
CALL=${CALL:?CALL=callNN}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
L=$OUT/$CALL; mkdir -p "$L"
# run NAME LIMIT CMD...: one step, logged to $L/NAME.log (the command, the
# start, the output, the exit code) and listed in $L/index.txt. A step that
# would start past $BUDGET seconds into the call is listed as skipped, so
# that the logs come back before the call's 600 s are up.
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
S=/tmp/jit/site                         # NCCL 2.32.3 in a wheel's layout, nvJitLink 13.5
J=$S/nvidia/nccl
NVJ=$S/nvidia/cu13/lib/libnvJitLink.so.13
G=/tmp/g                                # the unpacked builds: $G/threads, $G/mpi
# NCCL 2.32.3 from its directory (the programs find its libnccl.so.2 there),
# the kernel cache in /tmp, Triton from the machine's PyTorch environment.
E32=(env -u LD_LIBRARY_PATH NCCL_HOME=$J NVJITLINK=$NVJ XDG_CACHE_HOME=/tmp/cache
     TRITON_PYTHON=/opt/torch/.venv/bin/python)
SHARE=(NCCL_MULTI_RANK_GPU_ENABLE=1)

case ${PART:?PART=stage|lessons|stress|stress06|final|programs|timing|change4|probe4|change5|bisect4|last1|last3|recheck06|suite|mpi|recheck|release} in
stage)
  mkdir -p $J /tmp/jit
  if [ -f .nccl/nccl-2.32.3.tar.xz ]; then
    tar -xJf .nccl/nccl-2.32.3.tar.xz -C $J --strip-components=1 && ln -sf libnccl.so.2 $J/lib/libnccl.so
    echo "staged NCCL 2.32.3" | tee -a "$L/index.txt"
  fi
  if [ -f .jit/jit-tools.tar.gz ]; then
    tar -xzf .jit/jit-tools.tar.gz -C /tmp/jit && echo "staged jit-tools" | tee -a "$L/index.txt"
  fi
  { nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version,memory.total,compute_mode --format=csv
    ls -l /usr/lib/x86_64-linux-gnu/libnccl.so*; date -u; } > "$L/recon.log" 2>&1
  ;;
lessons)
  B=$G/threads/bin
  if [ -f .carry/threads.txz ]; then
    mkdir -p $G && tar -xJf .carry/threads.txz -C $G
    # 1. The refusals, before any rank starts: no variable (2.32.3); the
    #    variable with the system's NCCL 2.28.3; no variable with 2.28.3.
    run refuse-no-variable 60 "${E32[@]}" NTHREADS=2 $B/01_allreduce_ub
    run refuse-2.28.3-variable 60 env -u NCCL_HOME -u LD_LIBRARY_PATH NTHREADS=2 "${SHARE[@]}" $B/01_allreduce_ub
    run refuse-2.28.3-no-variable 60 env -u NCCL_HOME -u LD_LIBRARY_PATH NTHREADS=2 $B/01_allreduce_ub
  fi
  # 2. Every lesson at $RANKS ranks on one GPU, NCCL 2.32.3.
  for n in ${RANKS:-2 3 4 8}; do
    R=("${E32[@]}" NTHREADS=$n "${SHARE[@]}")
    run 01-n$n 120 "${R[@]}" $B/01_allreduce_ub
    run 02-n$n 120 "${R[@]}" $B/02_allreduce_sm
    run 03-n$n 120 "${R[@]}" $B/03_alltoallv_sm
    run 04-n$n 120 "${R[@]}" $B/04_vmm_raw
    run 05-simple-nvcc-n$n 300 "${R[@]}" $B/05_device_lsa --build nvcc
    run 05-fast-nvcc-n$n 120 "${R[@]}" $B/05b_lsa_fast --build nvcc
    run 05-simple-jit-n$n 300 "${R[@]}" $B/05_device_lsa --build jit
    run 05-fast-jit-n$n 120 "${R[@]}" $B/05b_lsa_fast --build jit
    run 06-cuda-f32-nvcc-n$n 300 "${R[@]}" $B/06_symm_primitive --build nvcc
    run 06-cuda-bf16-nvcc-n$n 120 "${R[@]}" $B/06_symm_primitive --build nvcc --dtype bf16
    run 06-cuda-f32-jit-n$n 300 "${R[@]}" $B/06_symm_primitive --build jit
    run 06-triton-f32-n$n 300 "${R[@]}" $B/06b_symm_triton
  done
  # 3. Which kernel NCCL ran for lesson 02 (its symmetric kernel?); Triton in bfloat16.
  for n in ${RANKS:-2 3 4 8}; do
    case $n in 2|8) ;; *) continue ;; esac
    run 02-nccl-log-n$n 120 "${E32[@]}" NTHREADS=$n "${SHARE[@]}" NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,TUNING $B/02_allreduce_sm
    run 06-triton-bf16-n$n 120 "${E32[@]}" NTHREADS=$n "${SHARE[@]}" $B/06b_symm_triton --dtype bf16
  done
  finish
  ;;
stress)
  B=$G/threads/bin
  # 4. The stress modes: 2,000 back-to-back operations per size at 2 ranks,
  #    500 at 4; every kernel of 05_allreduce_bench, both fused kernels of
  #    06_symm_bench; in place and out of place; every operation checked.
  for n in 2 4; do
    ops=2000; [ $n = 4 ] && ops=500
    R=("${E32[@]}" NTHREADS=$n "${SHARE[@]}")
    SZ=(-b 4K -e 4M -f 32)
    run 05-stress-nvcc-n$n 300 "${R[@]}" $B/05_allreduce_bench --build nvcc --stress $ops --kernels nccl,simple,vec16,twoshot,fast "${SZ[@]}"
    run 05-stress-oneshot-n$n 200 "${R[@]}" $B/05_allreduce_bench --build nvcc --stress $ops --kernels oneshot -b 8 -e 1M -f 128
    run 05-stress-jit-n$n 300 "${R[@]}" $B/05_allreduce_bench --stress $ops --kernels fast-jit,prims,prims-oneshot,prims-twoshot "${SZ[@]}"
    # Both fused kernels: the CUDA one, and Triton's when it is a contender
    # (calls 41 ran without --contenders: the CUDA kernel alone).
    run 06-stress-n$n 300 "${R[@]}" $B/06_symm_bench --build nvcc --contenders fused,triton --stress $ops "${SZ[@]}"
  done
  finish
  ;;
stress06)
  # Both fused kernels under stress (call 41 ran the CUDA one alone).
  B=$G/threads/bin
  for n in 2 4; do
    ops=2000; [ $n = 4 ] && ops=500
    run 06-stress-n$n 200 "${E32[@]}" NTHREADS=$n "${SHARE[@]}" $B/06_symm_bench --build nvcc --contenders fused,triton --stress $ops -b 4K -e 4M -f 32
  done
  finish
  ;;
final)
  [ -f .carry/threads.txz ] && { mkdir -p $G && tar -xJf .carry/threads.txz -C $G; }
  B=$G/threads/bin
  run suite-threads-n2 ${SUITE_LIMIT:-330} "${E32[@]}" GPU_TEST_RANKS=2 PATH=$G/threads/bin:$PATH \
    $G/threads/cargo-nextest nextest run --archive-file $G/threads/tests.tar.zst --workspace-remap . \
    --run-ignored all --no-fail-fast --test-threads 1
  for n in 2 4; do
    ops=2000; [ $n = 4 ] && ops=500
    run 06-one-region-n$n 120 "${E32[@]}" NTHREADS=$n "${SHARE[@]}" $B/06_symm_bench --build nvcc \
      --contenders fused,triton --stress $ops --one-region -b 4K -e 4M -f 32
  done
  R=("${E32[@]}" NTHREADS=4 "${SHARE[@]}")
  run 06-cuda-f32-n4 120 "${R[@]}" $B/06_symm_primitive --build nvcc
  run 06-cuda-bf16-n4 120 "${R[@]}" $B/06_symm_primitive --build nvcc --dtype bf16
  run 06-jit-f32-n4 120 "${R[@]}" $B/06_symm_primitive --build jit
  run 06-triton-f32-n4 120 "${R[@]}" $B/06b_symm_triton
  run 06-bad-input-n4 120 "${R[@]}" $B/06_symm_bench --build nvcc --bad-input
  run your-cuda-kernel-n4 120 "${R[@]}" $B/your_cuda_kernel
  run your-triton-kernel-n4 120 "${R[@]}" $B/your_triton_kernel
  if [ -z "${NO_N8:-}" ]; then
    R=("${E32[@]}" NTHREADS=8 "${SHARE[@]}")
    run 06-cuda-f32-n8 120 "${R[@]}" $B/06_symm_primitive --build nvcc
    run 06-triton-f32-n8 120 "${R[@]}" $B/06b_symm_triton
  fi
  finish
  ;;
suite)
  R=${RANKS:?RANKS=2|4}
  run suite-threads-n$R 580 "${E32[@]}" GPU_TEST_RANKS=$R PATH=$G/threads/bin:$PATH \
    $G/threads/cargo-nextest nextest run --archive-file $G/threads/tests.tar.zst --workspace-remap . \
    --run-ignored all --no-fail-fast --test-threads 1
  finish
  ;;
mpi)
  [ -f .carry/mpi.txz ] && { mkdir -p $G && tar -xJf .carry/mpi.txz -C $G; }
  M=$G/mpi/bin
  R=${RANKS:-2}
  X=(-x NCCL_HOME -x NVJITLINK -x XDG_CACHE_HOME -x TRITON_PYTHON -x NCCL_MULTI_RANK_GPU_ENABLE -x NVSHMEM_HOME)
  MPI=(mpirun -np $R --oversubscribe "${X[@]}")
  NV=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/nvshmem
  SUITE=("${E32[@]}" NVSHMEM_HOME=$NV GPU_TEST_RANKS=$R PATH=$G/mpi/bin:$PATH
         $G/mpi/cargo-nextest nextest run --archive-file $G/mpi/tests.tar.zst --workspace-remap .
         --run-ignored all --no-fail-fast --test-threads 1)
  # 1. No MPS server: exit 2, saying how to start one.
  [ -z "${SUITE_ONLY:-}" ] && run mpi-no-mps 60 "${E32[@]}" "${SHARE[@]}" "${MPI[@]}" $M/02_allreduce_sm
  # 2. A private MPS daemon in directories of our own; the GPU's compute
  #    mode and settings stay as they are (read before and after).
  export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
  mkdir -p -m 700 $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
  nvidia-smi --query-gpu=compute_mode --format=csv > "$L/compute-mode-before.log" 2>&1
  run mps-start 30 nvidia-cuda-mps-control -d
  if [ -z "${SUITE_ONLY:-}" ]; then
    run mpi-01 120 "${E32[@]}" "${SHARE[@]}" "${MPI[@]}" $M/01_allreduce_ub
    run mpi-02 120 "${E32[@]}" "${SHARE[@]}" "${MPI[@]}" $M/02_allreduce_sm
    run mpi-03 120 "${E32[@]}" "${SHARE[@]}" "${MPI[@]}" $M/03_alltoallv_sm
    run mpi-04 120 "${E32[@]}" "${SHARE[@]}" "${MPI[@]}" $M/04_vmm_raw
    run mpi-05-simple 300 "${E32[@]}" "${SHARE[@]}" "${MPI[@]}" $M/05_device_lsa --build nvcc
    run mpi-05-fast-jit 300 "${E32[@]}" "${SHARE[@]}" "${MPI[@]}" $M/05b_lsa_fast --build jit
    run mpi-06-cuda 300 "${E32[@]}" "${SHARE[@]}" "${MPI[@]}" $M/06_symm_primitive --build nvcc
    run mpi-06-triton 300 "${E32[@]}" "${SHARE[@]}" "${MPI[@]}" $M/06b_symm_triton
    run mpi-your-cuda-kernel 120 "${E32[@]}" "${SHARE[@]}" "${MPI[@]}" $M/your_cuda_kernel
    run mpi-06-nvshmem 300 "${E32[@]}" NVSHMEM_HOME=$NV "${SHARE[@]}" "${MPI[@]}" $M/06c_symm_nvshmem
    run mpi-emulated-01 120 "${E32[@]}" "${SHARE[@]}" "${MPI[@]}" tools/emulate-nodes $M/01_allreduce_ub
    run mpi-emulated-02 120 "${E32[@]}" "${SHARE[@]}" "${MPI[@]}" tools/emulate-nodes $M/02_allreduce_sm
    run mpi-emulated-05 120 "${E32[@]}" "${SHARE[@]}" "${MPI[@]}" tools/emulate-nodes $M/05_device_lsa --build nvcc
  fi
  # 3. The MPI build's suite: first every test that kills no rank, then,
  #    after a fresh MPS server, the fault matrix (its killed ranks can leave
  #    the server failing new clients: see the book's "One GPU, several ranks").
  # (FAULTS_ONLY=1: the fault matrix alone.)
  [ -z "${FAULTS_ONLY:-}" ] && run suite-mpi-n$R ${SUITE_LIMIT:-400} "${SUITE[@]}" -E 'not test(/fault/)'
  # A suite stopped at its limit leaves its processes behind, and the
  # daemon's quit waits for every client (a restart once timed out so).
  pkill -9 -f "$G/mpi/bin/" 2>/dev/null; pkill -9 -f /tmp/nextest-archive 2>/dev/null; sleep 2
  run mps-restart 60 sh -c 'echo quit | nvidia-cuda-mps-control; sleep 1; nvidia-cuda-mps-control -d'
  run suite-mpi-faults-n$R ${SUITE_LIMIT:-200} "${SUITE[@]}" -E 'test(/fault/)'
  run mps-stop 30 sh -c 'echo quit | nvidia-cuda-mps-control'
  nvidia-smi --query-gpu=compute_mode --format=csv > "$L/compute-mode-after.log" 2>&1
  cp $CUDA_MPS_LOG_DIRECTORY/control.log "$L/mps-control.log" 2>/dev/null
  cp $CUDA_MPS_LOG_DIRECTORY/server.log "$L/mps-server.log" 2>/dev/null
  finish
  ;;
programs)
  # After issue 31's split: every program at 1 and 4 ranks on one GPU (the
  # suite runs them at 2), the examples that call symm_all_reduce from a
  # kernel of your own included; lesson 05's first run from an empty cache
  # and its second (the build's "note: ran:" and "note: cached:" lines).
  [ -f .carry/threads.txz ] && { mkdir -p $G && tar -xJf .carry/threads.txz -C $G; }
  B=$G/threads/bin
  for n in ${RANKS:-1 4}; do
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
    run 06-jit-bf16-n$n 120 "${R[@]}" $B/06_symm_primitive --build jit --dtype bf16
    run 06b-n$n 120 "${R[@]}" $B/06b_symm_triton
    run your-cuda-kernel-n$n 120 "${R[@]}" $B/your_cuda_kernel
    run your-triton-kernel-n$n 120 "${R[@]}" $B/your_triton_kernel
  done
  finish
  ;;
timing)
  # Before/after at one rank, in one call: lesson 05b's fast kernel
  # (05_allreduce_bench --kernels fast) and lesson 06's fused kernel
  # (06_symm_bench --contenders fused), the binaries of the commit before
  # issue 31's moves (carry .carry/before-bench.txz: $G/before) against this
  # build's, alternating, twice each; scripts/compare.py lays them side by side.
  [ -f .carry/before-bench.txz ] && { mkdir -p $G/before && tar -xJf .carry/before-bench.txz -C $G/before --strip-components=1; }
  R=("${E32[@]}" NTHREADS=1)
  for i in 1 2; do
    for v in before after; do
      b=$G/threads/bin; [ $v = before ] && b=$G/before/bin
      run 05-fast-$v-$i 100 "${R[@]}" $b/05_allreduce_bench --build nvcc --kernels fast -b 8 -e 256M -f 8 -n 20 -w 5 --trials 3 --json $L/05-fast-$v-$i.json
      run 06-fused-$v-$i 100 "${R[@]}" $b/06_symm_bench --build nvcc --contenders fused -b 32K -e 128M -f 8 -n 8 -w 2 --trials 3 --json $L/06-fused-$v-$i.json
    done
  done
  python3 runs/2026-11-25/scripts/compare.py $L/05-fast-before-1.json $L/05-fast-after-1.json $L/05-fast-before-2.json $L/05-fast-after-2.json > $L/05-before-after.txt 2>&1
  python3 runs/2026-11-25/scripts/compare.py $L/06-fused-before-1.json $L/06-fused-after-1.json $L/06-fused-before-2.json $L/06-fused-after-2.json > $L/06-before-after.txt 2>&1
  finish
  ;;
change4)
  [ -f .carry/change4.txz ] && { mkdir -p $G && tar -xJf .carry/change4.txz -C $G; }
  A=$G/after/bin/06_symm_bench; P=$G/before-ll/bin/06_symm_bench
  OLD=fused,triton,symm-layer,unfused05,unfused-nccl
  NEW=$OLD,unfused05-graph,unfused-nccl-graph
  SMALL=(--build nvcc -b 8 -e 256K -f 8 -n 20 -w 5 --trials 3)
  for n in 1 2; do
    R=("${E32[@]}" NTHREADS=$n "${SHARE[@]}")
    for i in 1 2; do
      run 06-before-n$n-$i 60 "${R[@]}" $P "${SMALL[@]}" --contenders $OLD --json $L/06-before-n$n-$i.json
      run 06-after-n$n-$i 60 "${R[@]}" $A "${SMALL[@]}" --contenders $NEW --json $L/06-after-n$n-$i.json
    done
    python3 runs/2026-11-25/scripts/compare.py $L/06-before-n$n-1.json $L/06-after-n$n-1.json \
      $L/06-before-n$n-2.json $L/06-after-n$n-2.json > $L/06-before-after-n$n.txt 2>&1
  done
  R=("${E32[@]}" NTHREADS=4 "${SHARE[@]}")
  run 06-before-n4 90 "${R[@]}" $P "${SMALL[@]}" --contenders $OLD --json $L/06-before-n4.json
  run 06-after-n4 90 "${R[@]}" $A "${SMALL[@]}" --contenders $NEW --json $L/06-after-n4.json
  python3 runs/2026-11-25/scripts/compare.py $L/06-before-n4.json $L/06-after-n4.json > $L/06-before-after-n4.txt 2>&1
  for n in 1 2; do
    R=("${E32[@]}" NTHREADS=$n "${SHARE[@]}")
    BIG=(--build nvcc -b 16M -e 128M -f 8 -n 10 -w 2 --trials 3)
    run 06-big-before-n$n 90 "${R[@]}" $P "${BIG[@]}" --contenders fused,triton,unfused05,unfused-nccl --json $L/06-big-before-n$n.json
    run 06-big-after-n$n 90 "${R[@]}" $A "${BIG[@]}" --contenders fused,triton,unfused05,unfused05-graph,unfused-nccl,unfused-nccl-graph --json $L/06-big-after-n$n.json
    python3 runs/2026-11-25/scripts/compare.py $L/06-big-before-n$n.json $L/06-big-after-n$n.json > $L/06-big-before-after-n$n.txt 2>&1
    run 06-bf16-after-n$n 60 "${R[@]}" $A "${SMALL[@]}" --dtype bf16 --contenders fused,triton,symm-layer,unfused-nccl,unfused-nccl-graph --json $L/06-bf16-after-n$n.json
  done
  for n in 2 4; do
    R=("${E32[@]}" NTHREADS=$n "${SHARE[@]}")
    ops=1000; [ $n = 4 ] && ops=300
    for d in f32 bf16; do
      run 06-stress-$d-n$n 90 "${R[@]}" $A --build nvcc --contenders fused,triton --dtype $d --stress $ops -b 8 -e 1M -f 8
      run 06-stress-one-region-$d-n$n 90 "${R[@]}" $A --build nvcc --contenders fused,triton --dtype $d --stress $ops --one-region -b 8 -e 1M -f 8
    done
  done
  for n in 1 2; do
    run 06-default-n$n 120 "${E32[@]}" NTHREADS=$n "${SHARE[@]}" $A --json $L/06-default-n$n.json
  done
  finish
  ;;
probe4)
  [ -f .carry/change4.txz ] && { mkdir -p $G && tar -xJf .carry/change4.txz -C $G; }
  A=$G/after/bin/06_symm_bench
  R=("${E32[@]}" NTHREADS=4 "${SHARE[@]}")
  for c in fused triton symm-layer unfused05 unfused-nccl unfused05-graph unfused-nccl-graph; do
    run n4-$c 30 "${R[@]}" $A --build nvcc --contenders $c -b 8 -e 256K -f 8 -n 5 -w 2 --trials 1
  done
  R=("${E32[@]}" NTHREADS=1)
  NCU=(ncu --clock-control none --launch-skip 10 --launch-count 1 --section SpeedOfLight --section LaunchStats --section Occupancy --section WarpStateStats --section SourceCounters)
  run ncu-fused 60 "${R[@]}" "${NCU[@]}" -k regex:tp_tail_fused $A --build nvcc --contenders fused -b 32K -e 32K -n 20 -w 5 --trials 1
  run ncu-triton 60 "${R[@]}" "${NCU[@]}" -k regex:tp_tail_triton $A --build nvcc --contenders triton -b 32K -e 32K -n 20 -w 5 --trials 1
  run ncu-unfused 60 "${R[@]}" ncu --clock-control none --launch-skip 30 --launch-count 3 --section SpeedOfLight $A --build nvcc --contenders unfused05 -b 32K -e 32K -n 20 -w 5 --trials 1
  for f in /tmp/cache/nccl-symmem-rs/06_symm_primitive/*/*.cubin; do
    echo "== $f"; /usr/local/cuda/bin/cuobjdump --dump-resource-usage "$f"
  done > $L/resource-usage.txt 2>&1
  for f in /tmp/cache/nccl-symmem-rs/06_symm_primitive/*/*.cubin; do
    echo "== $f"; /usr/local/cuda/bin/cuobjdump -sass "$f"
  done > $L/sass.txt 2>&1
  finish
  ;;
change5)
  [ -f .carry/change5.txz ] && { mkdir -p $G && tar -xJf .carry/change5.txz -C $G; }
  P=$G/c4/bin/06_symm_bench; A=$G/c5/bin/06_symm_bench
  C=fused,triton,symm-layer,unfused05,unfused05-graph,unfused-nccl-graph
  SMALL=(--build nvcc -b 8 -e 256K -f 8 -n 20 -w 5 --trials 3 --contenders $C)
  R=("${E32[@]}" NTHREADS=1)
  for i in 1 2; do
    run 06-c4-n1-$i 60 "${R[@]}" $P "${SMALL[@]}" --json $L/06-c4-n1-$i.json
    run 06-c5-n1-$i 60 "${R[@]}" $A "${SMALL[@]}" --json $L/06-c5-n1-$i.json
  done
  python3 runs/2026-11-25/scripts/compare.py $L/06-c4-n1-1.json $L/06-c5-n1-1.json $L/06-c4-n1-2.json $L/06-c5-n1-2.json > $L/06-c4-c5-n1.txt 2>&1
  R=("${E32[@]}" NTHREADS=2 "${SHARE[@]}")
  run 06-c4-n2 60 "${R[@]}" $P "${SMALL[@]}" --json $L/06-c4-n2.json
  run 06-c5-n2 60 "${R[@]}" $A "${SMALL[@]}" --json $L/06-c5-n2.json
  python3 runs/2026-11-25/scripts/compare.py $L/06-c4-n2.json $L/06-c5-n2.json > $L/06-c4-c5-n2.txt 2>&1
  R=("${E32[@]}" NTHREADS=1)
  BIG=(--build nvcc -b 16M -e 128M -f 8 -n 10 -w 2 --trials 3 --contenders fused,triton,unfused05,unfused05-graph)
  run 06-big-c4-n1 60 "${R[@]}" $P "${BIG[@]}" --json $L/06-big-c4-n1.json
  run 06-big-c5-n1 60 "${R[@]}" $A "${BIG[@]}" --json $L/06-big-c5-n1.json
  python3 runs/2026-11-25/scripts/compare.py $L/06-big-c4-n1.json $L/06-big-c5-n1.json > $L/06-big-c4-c5-n1.txt 2>&1
  R=("${E32[@]}" NTHREADS=2 "${SHARE[@]}")
  run 06-stress-n2 60 "${R[@]}" $A --build nvcc --contenders fused,triton --stress 500 -b 8 -e 1M -f 8
  run 06-stress-one-region-n2 60 "${R[@]}" $A --build nvcc --contenders fused,triton --stress 500 --one-region -b 8 -e 1M -f 8
  # The 4-rank run of call 115, with backtraces if it hangs.
  { echo "\$ NTHREADS=4 06_symm_bench (call 115's 06-after-n4 arguments)"; date -u +%FT%TZ
    "${E32[@]}" NTHREADS=4 "${SHARE[@]}" timeout 75 $A --build nvcc -b 8 -e 256K -f 8 -n 20 -w 5 --trials 3       --contenders fused,triton,symm-layer,unfused05,unfused-nccl,unfused05-graph,unfused-nccl-graph &
    bg=$!
    for t in 1 2 3 4 5 6 7 8 9; do sleep 5; kill -0 $bg 2>/dev/null || break; done
    pid=$(pgrep -f "c5/bin/06_symm_bench" | head -1)
    if [ -n "$pid" ]; then
      echo "still running after 45 s: backtraces of pid $pid"; command -v gdb
      timeout 60 gdb -p "$pid" -batch -ex "thread apply all bt 25" 2>&1 | grep -v "^\[New LWP\|^$" | head -600
    fi
    wait; echo "exit $?"; } > $L/06-n4-hang.log 2>&1
  printf '%-34s %s
' 06-n4-hang "$(tail -1 $L/06-n4-hang.log)" | tee -a "$L/index.txt"
  finish
  ;;
bisect4)
  [ -f .carry/change5.txz ] && { mkdir -p $G && tar -xJf .carry/change5.txz -C $G; }
  A=$G/c5/bin/06_symm_bench
  R=("${E32[@]}" NTHREADS=4 "${SHARE[@]}")
  i=0
  for c in fused,triton,symm-layer,unfused05,unfused-nccl unfused-nccl,unfused-nccl-graph \
           unfused05,unfused05-graph unfused05-graph,unfused-nccl-graph fused,unfused-nccl-graph \
           fused,triton,symm-layer,unfused05,unfused-nccl,unfused05-graph; do
    i=$((i + 1))
    run n4-set$i 25 "${R[@]}" $A --build nvcc -b 8 -e 256K -f 8 -n 20 -w 5 --trials 3 --contenders $c
  done
  finish
  ;;
last1)
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
  done
  run 06-timing-n4 60 "${E32[@]}" NTHREADS=4 "${SHARE[@]}" $B/06_symm_bench --build nvcc -b 8 -e 256K -f 8 -n 20 -w 5 --trials 3 \
    --contenders fused,triton,symm-layer,unfused05,unfused-nccl,unfused05-graph,unfused-nccl-graph --json $L/06-timing-n4.json
  for n in 1 2; do
    run 06-default-n$n 90 "${E32[@]}" NTHREADS=$n "${SHARE[@]}" $B/06_symm_bench --json $L/06-default-n$n.json
  done
  finish
  ;;
last3)
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
  finish
  ;;
recheck06)
  [ -f .carry/final06.txz ] && { mkdir -p $G && tar -xJf .carry/final06.txz -C $G; }
  T=$G/f06/threads; M=$G/f06/mpi
  R=("${E32[@]}" NTHREADS=2 "${SHARE[@]}")
  run 06-nvcc-n2 120 "${R[@]}" $T/06_symm_primitive --build nvcc
  run 06-jit-bf16-n2 120 "${R[@]}" $T/06_symm_primitive --build jit --dtype bf16
  run 06b-n2 120 "${R[@]}" $T/06b_symm_triton
  run your-cuda-kernel-n2 60 "${R[@]}" $T/your_cuda_kernel
  run 06-bench-n2 60 "${R[@]}" $T/06_symm_bench --build nvcc -b 8 -e 256K -f 8 -n 5 -w 2 --trials 1 --contenders fused,triton,unfused-nccl-graph
  NV=/opt/torch/.venv/lib/python3.12/site-packages/nvidia/nvshmem
  X=(-x NCCL_HOME -x NVJITLINK -x XDG_CACHE_HOME -x NCCL_MULTI_RANK_GPU_ENABLE -x NVSHMEM_HOME)
  export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
  mkdir -p -m 700 $CUDA_MPS_PIPE_DIRECTORY $CUDA_MPS_LOG_DIRECTORY
  run mps-start 30 nvidia-cuda-mps-control -d
  for n in 1 2; do
    run 06c-np$n 120 "${E32[@]}" NVSHMEM_HOME=$NV "${SHARE[@]}" mpirun -np $n --oversubscribe "${X[@]}" $M/06c_symm_nvshmem
  done
  run mps-stop 30 sh -c 'echo quit | nvidia-cuda-mps-control'
  finish
  ;;
recheck)
  # After the fixes of lesson 03 and the benchmarks' first barrier: lesson
  # 03 at every rank count (twice at 5 and 8, where it hung before), and
  # 06_symm_bench's sweep at 2 ranks (before: no output in 300 s).
  [ -f .carry/threads.txz ] && { mkdir -p $G && tar -xJf .carry/threads.txz -C $G; }
  B=$G/threads/bin
  for n in 2 3 4 5 5b 6 7 8 8b; do
    R=("${E32[@]}" NTHREADS=${n%b} "${SHARE[@]}")
    run 03-n$n 45 "${R[@]}" $B/03_alltoallv_sm
  done
  run 06-bench-n2 240 "${E32[@]}" NTHREADS=2 "${SHARE[@]}" $B/06_symm_bench -b 8 -e 4M -f 8 -n 5 -w 2 --trials 2 --json $L/06-bench-n2.json
  finish
  ;;
release)
  V=${NCCL:?NCCL=2.30.7|2.31.2}
  mkdir -p /tmp/r && tar -xJf .nccl/nccl-$V.tar.xz -C /tmp/r
  [ -d $G/threads/bin ] || { echo "error: $G/threads missing: PART=lessons first, on this warm machine" >&2; exit 2; }
  B=$G/threads/bin
  for n in ${RANKS:-2 3 4 8}; do
    R=(env -u LD_LIBRARY_PATH NCCL_HOME=/tmp/r/nccl-$V XDG_CACHE_HOME=/tmp/cache NTHREADS=$n "${SHARE[@]}")
    run $V-01-n$n 120 "${R[@]}" $B/01_allreduce_ub
    run $V-02-n$n 120 "${R[@]}" $B/02_allreduce_sm
    run $V-03-n$n 120 "${R[@]}" $B/03_alltoallv_sm
    run $V-04-n$n 120 "${R[@]}" $B/04_vmm_raw
    run $V-05-simple-n$n 300 "${R[@]}" $B/05_device_lsa --build nvcc
    run $V-05-fast-n$n 120 "${R[@]}" $B/05b_lsa_fast --build nvcc
  done
  finish
  ;;
esac
cat "$L/index.txt" 2>/dev/null
