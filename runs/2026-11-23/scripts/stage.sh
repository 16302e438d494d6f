#!/usr/bin/env bash
# Stages everything the final GPU calls need, from the project root, into
# .carry/final.tgz (git-ignored): thread-mode binaries and test archive
# (../shared/tools/gpu-bundle), the MPI build's binaries and test archive,
# and the nextest runner. Compressed, because the device takes 64 MiB.
set -euo pipefail
../shared/tools/gpu-bundle
mkdir -p .gpu/mpi
cargo build --release --workspace --bins --features mpi
for b in $(ls .gpu/bin); do cp "target/release/$b" .gpu/mpi/; done
cargo nextest archive --release --workspace --features mpi --archive-file .gpu/tests-mpi.tar.zst
sed -e 's|tests.tar.zst|tests-mpi.tar.zst|; s|export PATH="$here/bin:$PATH"|export PATH="$here/mpi:$PATH"|' \
  .gpu/run-tests > .gpu/run-tests-mpi
chmod +x .gpu/run-tests-mpi
mkdir -p .carry
tar czf .carry/final.tgz .gpu
du -sh .carry/final.tgz
