#!/usr/bin/env bash
# Stages .carry/final.txz for this day's calls, from the project root: what
# 2026-11-22/scripts/stage.sh stages (both builds' binaries and test
# archives), plus .gpu/old, the benchmark binaries of commit $OLD (default
# c004f35, before issue 18's new check), so that one call can time the same
# sweep before and after. An existing worktree of $OLD can be named with
# OLD_TREE to reuse its build.
set -euo pipefail
runs/2026-11-22/scripts/stage.sh
old=${OLD:-c004f35}
tree=${OLD_TREE:-}
if [ -z "$tree" ]; then
  tree=$(mktemp -d)
  git worktree add --detach "$tree" "$old"
  trap 'git worktree remove --force "$tree"' EXIT
fi
(cd "$tree" && CARGO_TARGET_DIR="$tree/target" cargo build --release --bin 02_allreduce_bench --bin 05_allreduce_bench)
mkdir -p .gpu/old
cp "$tree"/target/release/{02,05}_allreduce_bench .gpu/old/
# xz, not gzip: with lesson 06 the gzip'd bundle is 68 MB, over the 64 MiB a
# call carries; xz makes it 54 MB. Unpack there with `tar xJf .carry/final.txz`.
rm -f .carry/final.tgz
tar cf - .gpu | xz -6 -T0 > .carry/final.txz
du -sh .carry/final.txz
