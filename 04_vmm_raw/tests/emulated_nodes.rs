//! Lesson 04 under `tools/emulate-nodes` (issue 25). The lesson makes no
//! NCCL call, and NCCL_HOSTID is NCCL's notion of a node: MPI still sees one
//! host, the file descriptors pass between processes of one machine, and
//! the lesson verifies. So the emulation does not exercise its cross-node
//! refusal (host names that differ: exit 2 at Step 1), which needs real
//! hosts; this test pins down that the wrapper changes nothing for it.
//! MPI build, 2 GPUs.

use testkit::{gpu_ranks, Emulated, LessonUnderTest};

fn lesson() -> LessonUnderTest {
    LessonUnderTest::new(
        "04_vmm_raw",
        env!("CARGO_BIN_EXE_04_vmm_raw"),
        env!("CARGO_MANIFEST_DIR"),
    )
}

#[test]
#[ignore = "needs 2 GPUs"]
fn runs_as_on_one_host_under_the_emulation() {
    lesson().assert_on_two_emulated_nodes(
        gpu_ranks(),
        &[],
        Emulated {
            verified: Some("Results verified correctly"),
            refused: &[],
        },
    );
}
