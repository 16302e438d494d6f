//! What the benchmarks share beyond the measurement crate (`bench`): for
//! `05_allreduce_bench`, the build of lessons 05's and 05b's kernels
//! together with the AllReduce made of NCCL's own primitives ([`lsa`],
//! [`prims`]), and its own two-shot grid options ([`grid`]). The lessons
//! never use this crate; it uses theirs.

pub mod grid;
pub mod lsa;
pub mod prims;
