//! Lesson 01 on 2 emulated nodes (issue 25): each rank gets its own
//! NCCL_HOSTID through `tools/emulate-nodes`, so NCCL joins the ranks over
//! its network transport instead of P2P. Registration and AllReduce need no
//! single node: the lesson must verify. MPI build, 2 GPUs
//! (`GPU_TEST_RANKS=4`: 2 nodes of 2).

use testkit::{gpu_ranks, Emulated, LessonUnderTest};

fn lesson() -> LessonUnderTest {
    LessonUnderTest::new(
        "01_allreduce_ub",
        env!("CARGO_BIN_EXE_01_allreduce_ub"),
        env!("CARGO_MANIFEST_DIR"),
    )
}

#[test]
#[ignore = "needs 2 GPUs"]
fn verifies_across_two_emulated_nodes() {
    lesson().assert_on_two_emulated_nodes(
        gpu_ranks(),
        &[],
        Emulated {
            verified: Some("Results verified correctly"),
            refused: &[],
        },
    );
}
