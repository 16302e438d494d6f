//! Lesson 03 on 2 emulated nodes (issue 25): each rank
//! gets its own NCCL_HOSTID through `tools/emulate-nodes`, so the sends and
//! receives between nodes go over NCCL's network transport. Up to 2.28 the
//! windows register and the lesson verifies; from 2.29, without GIN,
//! registration returns a NULL window and it exits 2. Never a wrong answer.
//! MPI build, 2 GPUs (`GPU_TEST_RANKS=4`: 2 nodes of 2).

use testkit::{gpu_ranks, Emulated, LessonUnderTest};

fn lesson() -> LessonUnderTest {
    LessonUnderTest::new(
        "03_alltoallv_sm",
        env!("CARGO_BIN_EXE_03_alltoallv_sm"),
        env!("CARGO_MANIFEST_DIR"),
    )
}

#[test]
#[ignore = "needs 2 GPUs"]
fn verifies_or_refuses_a_null_window_across_two_emulated_nodes() {
    lesson().assert_on_two_emulated_nodes(
        gpu_ranks(),
        &[],
        Emulated {
            verified: Some("Results structure verified correctly"),
            refused: &["NULL window"],
        },
    );
}
