//! Placeholder, replaced by the benchmark in a later commit.
fn main() {}
