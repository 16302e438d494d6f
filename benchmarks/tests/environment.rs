//! `06_symm_bench` sets environment variables only before any thread
//! starts: in the option check that `common::run_checked` calls first
//! (`Args::before_threads`; symm_comm's `nvshmem::check_before_threads` is
//! checked the same way in `symm_comm/tests/environment.rs`), never
//! in a rank's body, where the CUDA driver (and MPI) already run threads
//! that may read the environment: `set_var` then is undefined behaviour
//! (`unsafe` from edition 2024). Read from the sources, as the README's
//! walk-through is.

/// The functions that may call `set_var`: each runs before any thread.
const BEFORE_THREADS: [&str; 1] = ["before_threads"];

#[test]
fn the_06_benchmark_sets_environment_variables_only_before_threads_start() {
    let dir = testkit::crate_dir(env!("CARGO_MANIFEST_DIR")).join("src");
    let files = [dir.join("bin/06_symm_bench.rs")];
    testkit::assert_set_var_only_before_threads(&files, &BEFORE_THREADS);
}
