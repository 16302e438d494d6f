//! The library sets environment variables only before any thread starts: in
//! the option check that `common::run_checked` calls first
//! (`nvshmem::check_before_threads`, which lesson 06c and 06_symm_bench
//! call; the benchmark's `Args::before_threads` is checked the same way in
//! `benchmarks/tests/environment.rs`), never
//! in a rank's body, where the CUDA driver (and MPI) already run threads
//! that may read the environment: `set_var` then is undefined behaviour
//! (`unsafe` from edition 2024). Read from the sources, as the README's
//! walk-through is.

/// The functions that may call `set_var`: each runs before any thread.
const BEFORE_THREADS: [&str; 1] = ["check_before_threads"];

#[test]
fn environment_variables_are_set_only_before_threads_start() {
    let dir = testkit::crate_dir(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "rs") {
            files.push(path);
        }
    }
    testkit::assert_set_var_only_before_threads(&files, &BEFORE_THREADS);
}
