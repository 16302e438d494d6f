//! The benchmarks on 2 emulated nodes (issue 25): each rank gets its own
//! NCCL_HOSTID through `tools/emulate-nodes`. NCCL runs no symmetric kernel
//! across nodes; the lessons' device kernels reach only their LSA team. So
//! `02_allreduce_bench` and `03_alltoallv_bench` verify (NCCL's ordinary
//! kernels, up to 2.28) or refuse a NULL window (2.29+ without GIN), and
//! `05_allreduce_bench` refuses: exit 2 with the reason, never a wrong
//! answer with exit 1. MPI build, 2 GPUs (`GPU_TEST_RANKS=4`: 2 nodes of 2).

use testkit::{gpu_ranks, Emulated, LessonUnderTest, LSA_ACROSS_NODES};

fn program(name: &'static str, cargo_binary: &str) -> LessonUnderTest {
    LessonUnderTest::new(name, cargo_binary, env!("CARGO_MANIFEST_DIR"))
}

mod allreduce_02 {
    use super::*;

    #[test]
    #[ignore = "needs 2 GPUs"]
    fn the_benchmark_finds_no_wrong_element_across_two_emulated_nodes() {
        let bench = program(
            "02_allreduce_bench",
            env!("CARGO_BIN_EXE_02_allreduce_bench"),
        );
        bench.assert_on_two_emulated_nodes(
            gpu_ranks(),
            &["-b", "8", "-e", "1M", "-f", "32", "-n", "5", "-w", "2"],
            Emulated {
                // exit 0 means 0 wrong elements (a wrong one exits 1)
                verified: Some("# NCCL "),
                refused: &["NULL window"],
            },
        );
    }
}

mod alltoallv_03 {
    use super::*;

    #[test]
    #[ignore = "needs 2 GPUs"]
    fn the_benchmark_finds_no_wrong_element_across_two_emulated_nodes() {
        let bench = program(
            "03_alltoallv_bench",
            env!("CARGO_BIN_EXE_03_alltoallv_bench"),
        );
        bench.assert_on_two_emulated_nodes(
            gpu_ranks(),
            &["-b", "8", "-e", "1M", "-f", "32", "-n", "5", "-w", "2"],
            Emulated {
                // exit 0 means 0 wrong elements (a wrong one exits 1)
                verified: Some("# NCCL "),
                refused: &["NULL window"],
            },
        );
    }
}

mod allreduce_05 {
    use super::*;

    const REFUSED: Emulated = Emulated {
        verified: None,
        refused: LSA_ACROSS_NODES,
    };

    #[test]
    #[ignore = "needs 2 GPUs"]
    fn the_benchmark_refuses_across_two_emulated_nodes() {
        let bench = program(
            "05_allreduce_bench",
            env!("CARGO_BIN_EXE_05_allreduce_bench"),
        );
        bench.assert_on_two_emulated_nodes(
            gpu_ranks(),
            &[
                "--kernels",
                "nccl,simple,fast",
                "-b",
                "8",
                "-e",
                "1M",
                "-f",
                "32",
            ],
            REFUSED,
        );
    }
}
