#!/usr/bin/env bash
# Stages, on the build machine, what one-gpu.sh needs on a machine with ONE
# GPU, in pieces that each fit a device call's carry (64 MiB), from the
# project root:
#   .nccl/nccl-2.32.3.tar.xz, nccl-2.30.7.tar.xz, nccl-2.31.2.tar.xz
#                          ../shared/tools/nccl-release VERSION (one per call)
#   .jit/jit-tools.tar.gz  nvJitLink 13.5 and the CUDA headers NVRTC needs
#                          (runs/2026-11-24/scripts/stage-jit.sh)
#   .carry/threads.txz     the thread build: release binaries, a nextest
#                          archive of every test, the runner
#   .carry/mpi.txz         the MPI build: the same, built with --features mpi
set -euo pipefail
root=$(git rev-parse --show-toplevel)
cd "$root"
for v in 2.32.3 2.30.7 2.31.2; do
  [ -f .nccl/nccl-$v.tar.xz ] || ../shared/tools/nccl-release $v
done
[ -f .jit/jit-tools.tar.gz ] || runs/2026-11-24/scripts/stage-jit.sh
mkdir -p .carry
bins=$(cargo metadata --format-version 1 --no-deps |
  jq -r '.packages[].targets[] | select(.kind[] == "bin") | .name')
for build in threads mpi; do
  features=()
  [ $build = mpi ] && features=(--features mpi)
  export CARGO_TARGET_DIR=$root/target/stage-$build
  cargo build --release --workspace --bins "${features[@]}"
  rm -rf .carry/$build && mkdir -p .carry/$build/bin
  for b in $bins; do cp "$CARGO_TARGET_DIR/release/$b" .carry/$build/bin/; done
  cargo nextest archive --release --workspace "${features[@]}" --archive-file .carry/$build/tests.tar.zst
  cp "$(command -v cargo-nextest)" .carry/$build/cargo-nextest
  tar cf - -C .carry $build | xz -6 -T0 > .carry/$build.txz
  rm -rf .carry/$build
done
du -sh .carry/threads.txz .carry/mpi.txz .jit/jit-tools.tar.gz .nccl/*.tar.xz
