#!/usr/bin/env bash
# Stages, on the build machine, what one-gpu.sh's verification parts need, in
# pieces that each fit a device call's carry (64 MiB), from the project root:
#   .carry/threads.txz  the thread build: release binaries, a nextest archive
#                       of every test, cargo-nextest
#   .carry/mpi.txz      the same built with --features mpi
# (NCCL 2.32.3 and the jit tools: ../2026-11-25/scripts/one-gpu-stage.sh.)
set -euo pipefail
root=$(git rev-parse --show-toplevel)
cd "$root"
mkdir -p .carry
bins=$(cargo metadata --format-version 1 --no-deps |
  jq -r '.packages[].targets[] | select(.kind[] == "bin") | .name')
for build in ${BUILDS:-threads mpi}; do
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
du -sh .carry/*.txz
