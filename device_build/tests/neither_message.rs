//! The preflight's message when neither build route is available (issue
//! item 20): one line per route saying what was missing, one fix per route,
//! no list of search paths, no parentheses inside parentheses, no command
//! given twice.

use device_build::route::some_route_found;
use device_build::Env;

/// The deepest nesting of parentheses in `text`.
fn paren_depth(text: &str) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    for c in text.chars() {
        match c {
            '(' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            ')' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

#[test]
fn neither_route_reads_one_line_per_route_with_one_fix_each() {
    let root = tempfile::tempdir().unwrap();
    // Twelve directories on PATH, none with nvcc; a Python environment and a
    // toolkit directory without NVRTC.
    let dirs: Vec<_> = (0..12)
        .map(|i| root.path().join(format!("bin{i}")))
        .collect();
    for dir in &dirs {
        std::fs::create_dir(dir).unwrap();
    }
    let env = Env {
        path: Some(std::env::join_paths(&dirs).unwrap()),
        cuda_home: Some(root.path().join("cuda").into()),
        virtual_env: Some(root.path().join("venv").into()),
        home: Some(root.path().join("home").into()),
        ..Env::default()
    };
    let err = some_route_found(&env).unwrap_err();
    let whole = format!("{}\n{}", err.reason, err.fix);
    let reason: Vec<&str> = err.reason.lines().collect();
    assert_eq!(reason.len(), 3, "{whole}");
    assert_eq!(reason[0], "neither route can build the kernels:", "{whole}");
    assert_eq!(reason[1], "  jit: NVRTC (libnvrtc.so) not found", "{whole}");
    assert_eq!(reason[2], "  nvcc: nvcc not found", "{whole}");
    let fix: Vec<&str> = err.fix.lines().collect();
    assert_eq!(fix.len(), 2, "{whole}");
    assert!(
        fix[0].starts_with("jit route (no toolkit): pip install -U "),
        "{whole}"
    );
    assert!(
        fix[1].starts_with("nvcc route: install the CUDA toolkit"),
        "{whole}"
    );
    assert!(paren_depth(&whole) <= 1, "{whole}");
    assert_eq!(whole.matches("nvidia-cuda-nvrtc").count(), 1, "{whole}");
    assert!(
        !whole.contains(&root.path().display().to_string()),
        "{whole}"
    );
}

/// A path the user named (`NVRTC=...`) stays in the line.
#[test]
fn the_one_path_a_user_named_is_kept() {
    let root = tempfile::tempdir().unwrap();
    let nvrtc = root.path().join("libnvrtc.so.13");
    let env = Env {
        nvrtc: Some(nvrtc.clone().into()),
        nvcc: Some(root.path().join("nvcc").into()),
        ..Env::default()
    };
    let err = some_route_found(&env).unwrap_err();
    let reason: Vec<&str> = err.reason.lines().collect();
    assert_eq!(
        reason[1],
        format!(
            "  jit: NVRTC (libnvrtc.so) not found at {}",
            nvrtc.display()
        ),
        "{}",
        err.reason
    );
    assert!(
        reason[2].starts_with("  nvcc: nvcc not found: NVCC="),
        "{}",
        err.reason
    );
}
