//! Lesson 02's tests. CPU tests run everywhere; the GPU tests are ignored by
//! default: `cargo test -- --include-ignored` on a machine with 2 GPUs
//! (`GPU_TEST_RANKS=4` for 4). In an MPI build (`--features mpi`) the GPU
//! tests launch the lesson with mpirun.

use common::testing::{gpu_ranks, LessonUnderTest};

fn lesson() -> LessonUnderTest {
    LessonUnderTest::new(
        "02_allreduce_sm",
        env!("CARGO_BIN_EXE_02_allreduce_sm"),
        env!("CARGO_MANIFEST_DIR"),
    )
}

#[test]
fn readme_walkthrough_matches_the_step_comments() {
    lesson().assert_walkthrough_matches_source();
}

#[test]
fn without_a_gpu_it_exits_2_and_says_why() {
    lesson().assert_exits_2_without_a_gpu();
}

#[test]
#[ignore = "needs 2 GPUs"]
fn transcript_matches_the_readme() {
    lesson().assert_transcript(gpu_ranks(), &[]);
}

#[test]
#[ignore = "needs 2 GPUs"]
fn more_ranks_than_gpus_exits_2() {
    lesson().assert_more_ranks_than_gpus_exits_2();
}
