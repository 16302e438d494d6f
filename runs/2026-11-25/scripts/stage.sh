#!/usr/bin/env bash
# Stages .carry/final.tgz for this day's calls, from the project root: what
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
tar czf .carry/final.tgz .gpu
du -sh .carry/final.tgz
