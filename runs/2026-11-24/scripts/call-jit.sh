#!/usr/bin/env bash
# GPU call(s) for issue 19: lesson 05 and 05_allreduce_bench through the jit
# route (NVRTC -> LTO-IR -> nvJitLink with NCCL 2.32.3's libnccl_device.ltoir,
# no nvcc on PATH) and through nvcc (NCCL 2.28.3, and 2.32.3 for the side by
# side benchmark).
#
# Staged on the build machine by runs/2026-11-24/scripts/stage-jit.sh and by
# runs/2026-11-22/scripts/stage.sh (gpu-bundle's thread build in .gpu/bin, the
# MPI build in .gpu/mpi; without .gpu/mpi the mpirun runs use .gpu/bin).
# Each piece fits one call's carry
# (64 MiB), so stage across calls made back to back while the machine is warm
# (files under /tmp stay while it is warm):
#   call 1: carry .jit/jit-tools.tar.gz   command: runs/2026-11-24/scripts/call-jit.sh stage
#   call 2: carry .nccl                   command: runs/2026-11-24/scripts/call-jit.sh stage
#   call 3 (optional, NVRTC 13.5 instead of the machine's 13.0):
#           carry .jit/nvrtc.tar.gz       command: runs/2026-11-24/scripts/call-jit.sh stage
#   call 4: carry .gpu                    command: runs/2026-11-24/scripts/call-jit.sh run
# (`carry` takes one path per piece: `.jit` as a whole is 108 MB, over the limit;
# move the piece not wanted out of .jit/ before a call, or name the file.)
#
# What it expects to see (logs in $OUT/call-jit/, index.txt lists each step's exit code):
# * jit-05-simple, jit-05-fast (NCCL 2.32.3, 1 rank, NTHREADS=1, no nvcc on PATH):
#   stderr "note: build route: jit (--build jit: NCCL 2.32.3 ships .../libnccl_device.ltoir;
#   NVRTC 13.x (...), nvJitLink 13.5 (...), CUDA headers ...)", "note: kernels compiled with
#   NVRTC and linked with nvJitLink in N s"; stdout "ncclDevComm is 248 bytes in NCCL 2.32.3",
#   "Result verification: PASSED", exit 0. The second run of each says "reused from the cache".
#   (If 2.32.3 gives one rank no symmetric memory, as 2.28.3 does, these exit 2 naming it;
#   then only the 2-rank runs can verify.)
# * jit-05-auto-2.32.3: auto takes jit and says why.
# * jit-05-own-nvjitlink: the machine's nvJitLink 13.0 with 2.32.3: exit 2, "nvJitLink 13.0
#   ... is older than the CUDA that built libnccl_device.ltoir (LTO-IR version 67.120)" and
#   the fix (pip install -U nvidia-nvjitlink, or --build nvcc). With NVRTC 13.5 staged it
#   stops earlier, "nvJitLink 13.0 ... is older than NVRTC 13.5".
# * nvcc-05-2.28.3-auto: auto takes nvcc ("no jit route (NCCL 2.28.3 ... ships no device
#   library ...)"); at 1 rank NCCL 2.28.3 refuses symmetric memory: exit 2, as before.
# * with 2 GPUs: the same runs at 2 ranks, threads and mpirun, exit 0 and PASSED on both
#   routes; bench-2.32.3-both-routes: one table with nccl, fast (nvcc build: one-shot up to
#   512 KiB, two-shot above), fast-jit (two-shot at every size), prims, prims-oneshot,
#   prims-twoshot; 0 wrong everywhere (a wrong element exits 1).
# * cubin-resources.log: registers and stack of every kernel of both builds
#   (cuobjdump -res-usage): the jit two-shot against the nvcc two-shot.
set -u
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export NCCL_NVLS_ENABLE=0 NVSHMEM_DISABLE_NVLS=1 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
S=/tmp/jit                       # the staged site-packages and the caches live here
SITE=$S/site
VENV=/opt/torch/.venv/lib/python3.12/site-packages

stage() {
  mkdir -p "$SITE/nvidia/nccl"
  for piece in .jit/jit-tools.tar.gz .jit/nvrtc.tar.gz; do
    [ -f "$piece" ] && tar -xzf "$piece" -C "$S" && echo "staged $piece"
  done
  if [ -f .nccl/nccl-2.32.3.tar.xz ]; then
    # Into a wheel's layout, so that the program finds the device library,
    # the headers and the site-packages beside the loaded libnccl.so.2.
    tar -xJf .nccl/nccl-2.32.3.tar.xz -C "$SITE/nvidia/nccl" --strip-components=1
    ln -sf libnccl.so.2 "$SITE/nvidia/nccl/lib/libnccl.so"   # the name cudarc loads
    echo "staged NCCL 2.32.3"
  fi
  ls -l "$SITE/nvidia/cu13/lib" "$SITE/nvidia/nccl/lib" 2>&1
}

run_all() {
  L=$OUT/call-jit; mkdir -p "$L"
  B=.gpu/bin M=.gpu/mpi
  [ -d "$M" ] || M=$B
  run() {
    local name=$1 lim=$2; shift 2
    { echo "\$ $*"; date -u +%FT%TZ; timeout "$lim" "$@"; echo "exit $?"; } > "$L/$name.log" 2>&1
    printf '%-34s %s\n' "$name" "$(tail -1 "$L/$name.log")" | tee -a "$L/index.txt"
  }
  NGPU=$(nvidia-smi -L | wc -l)
  { nvidia-smi -L; nvidia-smi --query-gpu=name,driver_version --format=csv; date -u;
    ls -l "$SITE/nvidia/cu13/lib" "$SITE/nvidia/nccl/lib" "$VENV"/nvidia/*/lib 2>&1; } > "$L/recon.log" 2>&1
  if [ ! -f "$SITE/nvidia/nccl/lib/libnccl_device.ltoir" ] || [ ! -f "$SITE/nvidia/cu13/lib/libnvJitLink.so.13" ]; then
    echo "not staged: run 'call-jit.sh stage' with .jit/jit-tools.tar.gz and .nccl carried first" | tee -a "$L/index.txt"
  fi
  # The jit route's environment: NCCL 2.32.3 from the staged wheel layout, no
  # nvcc anywhere on PATH, no CUDA_HOME; NVRTC 13.5 if staged, else the
  # PyTorch venv's 13.0 (NVRTC). Caches in /tmp, so cuobjdump can read them.
  NOCUDA_PATH=$(echo "$PATH" | tr : '\n' | grep -v -i cuda | paste -sd: -)
  J=(env -u CUDA_HOME -u NVCC PATH="$NOCUDA_PATH" LD_LIBRARY_PATH="$SITE/nvidia/nccl/lib" XDG_CACHE_HOME=$S/cache)
  NVRTC_ENV=() NVRTC_X=()
  if [ ! -f "$SITE/nvidia/cu13/lib/libnvrtc.so.13" ]; then
    VENV_NVRTC=$(ls "$VENV"/nvidia/*/lib/libnvrtc.so.1[23] 2>/dev/null | head -1)
    [ -n "$VENV_NVRTC" ] && NVRTC_ENV=(NVRTC="$VENV_NVRTC") NVRTC_X=(-x NVRTC)
  fi
  J+=("${NVRTC_ENV[@]}")
  run which-nvcc-jit-env 10 "${J[@]}" sh -c 'command -v nvcc || echo "no nvcc on PATH"'
  # The nvcc route on the system's NCCL 2.28.3.
  N=(env LD_LIBRARY_PATH= XDG_CACHE_HOME=$S/cache)

  # --- 1 rank ---
  run jit-05-simple 300 "${J[@]}" NTHREADS=1 $B/05_device_lsa --build jit
  run jit-05-simple-cached 120 "${J[@]}" NTHREADS=1 $B/05_device_lsa --build jit
  run jit-05-fast 120 "${J[@]}" NTHREADS=1 $B/05_device_lsa --build jit --kernel fast
  run jit-05-auto-2.32.3 120 "${J[@]}" NTHREADS=1 $B/05_device_lsa
  OWN_NVJITLINK=$(ls "$VENV"/nvidia/*/lib/libnvJitLink.so.1[23] /usr/local/cuda/lib64/libnvJitLink.so.13 2>/dev/null | head -1)
  run jit-05-own-nvjitlink 120 "${J[@]}" NVJITLINK="$OWN_NVJITLINK" XDG_CACHE_HOME=$S/cache-own NTHREADS=1 $B/05_device_lsa --build jit
  run nvcc-05-2.28.3-auto 300 "${N[@]}" NTHREADS=1 $B/05_device_lsa
  run nvcc-05-2.28.3 120 "${N[@]}" NTHREADS=1 $B/05_device_lsa --build nvcc
  run jit-on-2.28.3-refused 60 "${N[@]}" NTHREADS=1 $B/05_device_lsa --build jit
  run bench-1rank-jit 300 "${J[@]}" NTHREADS=1 $B/05_allreduce_bench --build jit --kernels nccl,fast,fast-jit,prims,prims-oneshot,prims-twoshot -e 128M

  # --- 2 ranks, both launch modes ---
  if [ "$NGPU" -ge 2 ]; then
    for k in simple fast; do
      run jit-05-$k-2threads 300 "${J[@]}" NTHREADS=2 $B/05_device_lsa --build jit --kernel $k
      run jit-05-$k-2mpi 300 "${J[@]}" mpirun -np 2 -x PATH -x LD_LIBRARY_PATH -x XDG_CACHE_HOME "${NVRTC_X[@]}" $M/05_device_lsa --build jit --kernel $k
      run nvcc-05-$k-2.28.3-2threads 300 "${N[@]}" NTHREADS=2 $B/05_device_lsa --build nvcc --kernel $k
      run nvcc-05-$k-2.28.3-2mpi 300 "${N[@]}" mpirun -np 2 -x LD_LIBRARY_PATH -x XDG_CACHE_HOME $M/05_device_lsa --build nvcc --kernel $k
    done
    # The fast kernel through both routes, NCCL's primitives and ncclAllReduce,
    # in one call, on NCCL 2.32.3 (nvcc compiles against its headers: NCCL_HOME).
    run bench-2.32.3-both-routes 600 env LD_LIBRARY_PATH="$SITE/nvidia/nccl/lib" NCCL_HOME="$SITE/nvidia/nccl" XDG_CACHE_HOME=$S/cache \
      "${NVRTC_ENV[@]}" NTHREADS=2 $B/05_allreduce_bench --build nvcc --kernels nccl,fast,fast-jit,prims,prims-oneshot,prims-twoshot \
      -b 8 -e 512M -f 4 --json "$L/bench-2.32.3-both-routes.json"
  else
    echo "one GPU: the 2-rank runs and the side-by-side benchmark were not run" | tee -a "$L/index.txt"
  fi

  # Registers and stack of every kernel of every build in the caches.
  if command -v cuobjdump >/dev/null || [ -x /usr/local/cuda/bin/cuobjdump ]; then
    CUOBJDUMP=$(command -v cuobjdump || echo /usr/local/cuda/bin/cuobjdump)
    for c in $(find $S/cache -name '*.cubin' | sort); do
      echo "== $c"; cat "$(dirname "$c")/key.txt" | grep -E '^(route|nvcc_version|nvrtc|nvjitlink|nccl)=' ; $CUOBJDUMP -res-usage "$c"
    done > "$L/cubin-resources.log" 2>&1
  fi
  echo done >> "$L/index.txt"
  tar -czf "$OUT/call-jit.tgz" -C "$OUT" call-jit
}

case "${1:-run}" in
  stage) stage ;;
  run) stage; run_all ;;
  *) echo "usage: call-jit.sh stage|run" >&2; exit 2 ;;
esac
