#!/usr/bin/env bash
# Stages .carry/l06.txz for triton-1gpu.sh / triton-2gpu.sh: the release
# builds of lessons 06 and 06b and the benchmark (threads and MPI), from the project root.
set -euo pipefail
cargo build --release --bin 06_symm_primitive --bin 06b_symm_triton --bin 06_symm_bench
CARGO_TARGET_DIR=target/mpi cargo build --release --features mpi --bin 06_symm_primitive --bin 06b_symm_triton --bin 06_symm_bench
rm -rf .carry/l06 && mkdir -p .carry/l06/bin .carry/l06/mpi
cp target/release/06_symm_{primitive,bench} target/release/06b_symm_triton .carry/l06/bin/
cp target/mpi/release/06_symm_{primitive,bench} target/mpi/release/06b_symm_triton .carry/l06/mpi/
tar cf - -C .carry/l06 bin mpi | xz -6 -T0 > .carry/l06.txz
rm -rf .carry/l06
du -sh .carry/l06.txz
