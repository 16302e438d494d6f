//! Lesson 01's tests. CPU tests run everywhere; the GPU tests are ignored by
//! default: `cargo test -- --include-ignored` on a machine with 2 GPUs
//! (`GPU_TEST_RANKS=4` for 4). In an MPI build (`--features mpi`) the GPU
//! tests launch the lesson with mpirun.

common::lesson_tests!("01_allreduce_ub");
