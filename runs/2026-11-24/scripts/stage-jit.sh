#!/usr/bin/env bash
# Stages, on the build machine, what call-jit.sh needs on the GPU machine for
# the jit route, in pieces that each fit one device call's carry (64 MiB):
#   .jit/jit-tools.tar.gz   nvJitLink 13.5 (the GPU machine's own 13.0 refuses
#                           2.32.3's LTO-IR) + the CUDA runtime and CCCL headers
#                           NVRTC needs, in a site-packages layout (~50 MB)
#   .jit/nvrtc.tar.gz       NVRTC 13.5 (optional, ~60 MB; without it the GPU
#                           machine's NVRTC 13.0 from /opt/torch/.venv is used)
#   .nccl/nccl-2.32.3.tar.xz  NCCL 2.32.3 slimmed to sm_90, with its headers and
#                           libnccl_device.ltoir (../shared/tools/nccl-release)
# Also stage the binaries: runs/2026-11-22/scripts/stage.sh (thread build in
# .gpu/bin, MPI build in .gpu/mpi).
# Usage, from the project root:  runs/2026-11-24/scripts/stage-jit.sh
set -euo pipefail
root=$(git rev-parse --show-toplevel)
cd "$root"
mkdir -p .jit   # git-ignored (.gitignore)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
.ci/jit-wheels "$work/site" >/dev/null
# jit-tools: nvJitLink and the headers; no NVRTC, no NCCL.
tar -czf .jit/jit-tools.tar.gz -C "$work" site/nvidia/cu13/lib/libnvJitLink.so.13 site/nvidia/cu13/include
tar -czf .jit/nvrtc.tar.gz -C "$work" site/nvidia/cu13/lib/libnvrtc.so.13 \
  $(cd "$work" && ls site/nvidia/cu13/lib/libnvrtc-builtins.so.*)
if [ ! -f .nccl/nccl-2.32.3.tar.xz ]; then
  # nccl-release writes into .git/info, so it needs a checkout whose .git is a
  # directory: in a worktree, run it in the main checkout and copy its .nccl/.
  ../shared/tools/nccl-release 2.32.3 || echo "stage-jit: stage .nccl/nccl-2.32.3.tar.xz by hand (see above)" >&2
fi
ls -l .jit .nccl 2>/dev/null || true
