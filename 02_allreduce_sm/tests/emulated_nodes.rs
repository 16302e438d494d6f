//! Lesson 02 on 2 emulated nodes (issue 25): each rank
//! gets its own NCCL_HOSTID through `tools/emulate-nodes`. NCCL runs no
//! symmetric kernel across nodes: up to 2.28 the windows still register and
//! the lesson verifies and names the ordinary kernel NCCL ran; from 2.29,
//! without GIN, registration returns a NULL window and the lesson exits 2.
//! Never a wrong answer. MPI build, 2 GPUs (`GPU_TEST_RANKS=4`: 2 nodes of 2).

use testkit::{gpu_ranks, Emulated, LessonUnderTest};

fn lesson() -> LessonUnderTest {
    LessonUnderTest::new(
        "02_allreduce_sm",
        env!("CARGO_BIN_EXE_02_allreduce_sm"),
        env!("CARGO_MANIFEST_DIR"),
    )
}

#[test]
#[ignore = "needs 2 GPUs"]
fn verifies_or_refuses_a_null_window_across_two_emulated_nodes() {
    let ended = lesson().assert_on_two_emulated_nodes(
        gpu_ranks(),
        &[],
        Emulated {
            verified: Some("Results verified correctly"),
            refused: &["NULL window"],
        },
    );
    if let Some((0, stdout, _)) = ended {
        // Which kernel NCCL ran: never a symmetric one across nodes.
        assert!(
            stdout.contains("Kernel NCCL ran for this AllReduce"),
            "{stdout}"
        );
        assert!(!stdout.contains("[Symmetric]"), "{stdout}");
    }
}
