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

/// The name of the function around line `at` of `source`.
fn enclosing_fn(lines: &[&str], at: usize) -> Option<String> {
    lines[..=at].iter().rev().find_map(|line| {
        let line = line.trim_start();
        let rest = line
            .strip_prefix("pub fn ")
            .or_else(|| line.strip_prefix("fn "))
            .or_else(|| line.strip_prefix("pub(crate) fn "))?;
        Some(rest.split(['(', '<']).next()?.trim().to_string())
    })
}

#[test]
fn the_06_benchmark_sets_environment_variables_only_before_threads_start() {
    let dir = testkit::crate_dir(env!("CARGO_MANIFEST_DIR")).join("src");
    let files = [dir.join("bin/06_symm_bench.rs")];
    let mut found = 0;
    let mut wrong = Vec::new();
    for file in &files {
        let text = std::fs::read_to_string(file).unwrap();
        // The tests of a file come last; they may set variables of their own.
        let text = text.split("#[cfg(test)]").next().unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        for (at, line) in lines.iter().enumerate() {
            let sets = line.contains("set_var(") || line.contains("remove_var(");
            if line.trim_start().starts_with("//") || !sets {
                continue;
            }
            found += 1;
            let function = enclosing_fn(&lines, at).unwrap_or_default();
            if !BEFORE_THREADS.contains(&function.as_str()) {
                wrong.push(format!(
                    "{}:{}: set_var or remove_var in {function}",
                    file.display(),
                    at + 1
                ));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "set_var or remove_var where threads may exist:\n{}",
        wrong.join("\n")
    );
    assert!(
        found > 0,
        "no set_var found at all: is the scan still looking?"
    );
}
