#!/usr/bin/env bash
# Stages two carries for tail-1gpu.sh, from the project root (NCCL's 56 MB
# tarball and both together pass the 64 MiB a call carries):
#   .carry/tail-a.txz: lesson 06's release binaries with the changed
#     tp_tail.cu (bin/), and the benchmark as it was before the change
#     (old/: the previous build's 06_symm_bench, given as the argument);
#   .carry/tail-b.txz: a nextest archive of lesson 06's tests and the runner
#     (the suite after the change).
set -euo pipefail
previous=${1:?usage: tail-stage.sh PREVIOUS_06_SYMM_BENCH (the benchmark built before the change)}
test -x "$previous" || { echo "error: $previous is not an executable" >&2; exit 2; }
cargo build --release --bin 06_symm_primitive --bin 06_symm_bench
rm -rf .carry/tail && mkdir -p .carry/tail/bin .carry/tail/old
cp target/release/06_symm_{primitive,bench} .carry/tail/bin/
cp "$previous" .carry/tail/old/06_symm_bench
tar cf - -C .carry/tail bin old | xz -6 -T0 > .carry/tail-a.txz
rm -rf .carry/tail && mkdir -p .carry/tail
cargo nextest archive --release -p symm_primitive --archive-file .carry/tail/tests.tar.zst
cp "$(command -v cargo-nextest)" .carry/tail/cargo-nextest
tar cf - -C .carry/tail . | xz -6 -T0 > .carry/tail-b.txz
rm -rf .carry/tail .carry/tail.txz
du -sh .carry/tail-a.txz .carry/tail-b.txz
