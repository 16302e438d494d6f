//! `gpu-ready`, the probe the fault cases run after a job under MPS: exit 0
//! where a new process can use every GPU, else exit 1 with one line saying
//! why, never a panic (on a machine without a driver too).

use std::time::Duration;

#[test]
fn gpu_ready_says_whether_a_new_process_can_use_the_gpus() {
    let probe = testkit::binary("gpu-ready", env!("CARGO_BIN_EXE_gpu-ready"));
    let out = testkit::run_with_timeout(
        &mut std::process::Command::new(probe),
        Duration::from_secs(60),
    );
    let all = testkit::describe(&out);
    if testkit::visible_gpus() == 0 {
        assert_eq!(out.status.code(), Some(1), "{all}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(stderr.starts_with("gpu-ready: "), "{all}");
        assert!(!stderr.contains("panicked"), "{all}");
    } else {
        assert_eq!(out.status.code(), Some(0), "{all}");
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("usable"),
            "{all}"
        );
    }
}
