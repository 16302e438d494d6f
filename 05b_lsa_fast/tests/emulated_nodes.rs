//! Lesson 05b on 2 emulated nodes (issue 25): each rank
//! gets its own NCCL_HOSTID through `tools/emulate-nodes`, so each node has
//! its own LSA team. The kernels reach only their LSA team, so they must not
//! run: exit 2 with the reason (no symmetric memory at ncclDevCommCreate on
//! 2.28, a NULL window on 2.29+ without GIN, or the lesson's own check of
//! the LSA team against the world), never a wrong answer with exit 1.
//! MPI build, 2 GPUs (`GPU_TEST_RANKS=4`: 2 nodes of 2).

use testkit::{gpu_ranks, Emulated, LessonUnderTest, LSA_ACROSS_NODES};

const REFUSED: Emulated = Emulated {
    verified: None,
    refused: LSA_ACROSS_NODES,
};

fn lesson() -> LessonUnderTest {
    LessonUnderTest::new(
        "05b_lsa_fast",
        env!("CARGO_BIN_EXE_05b_lsa_fast"),
        env!("CARGO_MANIFEST_DIR"),
    )
}

#[test]
#[ignore = "needs 2 GPUs"]
fn the_fast_kernels_refuse_across_two_emulated_nodes() {
    if let Some((_, stdout, _)) = lesson().assert_on_two_emulated_nodes(gpu_ranks(), &[], REFUSED) {
        assert!(
            !stdout.contains("completed AllReduce kernel execution"),
            "a kernel ran: {stdout}"
        );
    }
}
