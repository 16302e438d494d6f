//! `symm_all_reduce`'s return codes (`kernels/symm_comm.cuh`), what each
//! means, and the same argument checks on the host ([`check`]), so that the
//! rules can be tested without a GPU. The GPU test
//! (`benchmarks/tests/bench_06_symm.rs:
//! bad_input_gets_the_documented_code_on_the_device`)
//! runs the device's checks on the same cases and expects the same codes.
//!
//! The header's `#define`s are the one source: the tests check these copies,
//! and `triton/symm.py`'s, against it.

pub const OK: i32 = 0;
pub const ERR_NULL_CONTEXT: i32 = -1;
pub const ERR_UNKNOWN_BACKEND: i32 = -2;
pub const ERR_UNSUPPORTED_OP: i32 = -3;
pub const ERR_UNSUPPORTED_DTYPE: i32 = -4;
pub const ERR_OUT_OF_BOUNDS: i32 = -5;
pub const ERR_MISALIGNED: i32 = -6;
pub const ERR_TOPOLOGY: i32 = -7;
pub const ERR_NO_GRID_SYNC: i32 = -8;
pub const ERR_GRID_SHAPE: i32 = -9;

pub const REDUCE_SUM: i32 = 0;
pub const DTYPE_FLOAT32: i32 = 0;
pub const DTYPE_BFLOAT16: i32 = 1;

/// Ranks the device library's unrolled loops cover (`SYMM_MAX_RANKS`).
pub const MAX_RANKS: usize = 8;
/// The largest region `symm_all_reduce` takes in its one-shot
/// (`SYMM_ONE_SHOT_MAX_BYTES`): NCCL backend, a staging window in the context.
pub const ONE_SHOT_MAX_BYTES: usize = 256 * 1024;
/// The bytes of the one-shot's staging window (`SYMM_STAGING_BYTES`), the
/// window a context's `signal_window` names: a 128-byte header, then two
/// halves of `MAX_RANKS` slots of 16-byte lines carrying 8 bytes each.
pub const STAGING_BYTES: usize = 128 + 2 * MAX_RANKS * 2 * ONE_SHOT_MAX_BYTES;

/// What a return code means, as the header documents it.
pub fn describe(code: i32) -> &'static str {
    match code {
        OK => "success",
        ERR_NULL_CONTEXT => "null context",
        ERR_UNKNOWN_BACKEND => "unknown backend (or one not compiled into this module)",
        ERR_UNSUPPORTED_OP => "unsupported reduction (only sum)",
        ERR_UNSUPPORTED_DTYPE => "unsupported data type (float32 and bfloat16)",
        ERR_OUT_OF_BOUNDS => "byte_offset + size beyond the context's buffer",
        ERR_MISALIGNED => "local_ptr or byte_offset not a multiple of the element size",
        ERR_TOPOLOGY => "more than 8 ranks, or a rank not reachable by loads and stores",
        ERR_NO_GRID_SYNC => "the context has no grid-barrier words",
        ERR_GRID_SHAPE => "the calling kernel's grid or block is not 1-D",
        _ => "not a symm_all_reduce code",
    }
}

/// How the calling kernel was launched. The library splits its work over
/// `threadIdx.x` and `blockIdx.x` and its grid barrier counts `gridDim.x`
/// blocks, so it needs a 1-D grid of 1-D blocks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// `<<<blocks, threads>>>`.
    OneD,
    /// A grid with `gridDim.y` 2.
    TwoDGrid,
    /// Blocks with `blockDim.y` 2.
    TwoDBlock,
}

impl Shape {
    /// The launch's (grid, block) for a 1-D launch of `blocks` x `threads`,
    /// arranged in this shape: never more blocks than `blocks` (the rank's
    /// share of the GPU), but 2 for the 2-D grid when `blocks` is 1; never
    /// more threads per block than `threads`.
    pub fn dims(self, blocks: u32, threads: u32) -> ((u32, u32, u32), (u32, u32, u32)) {
        match self {
            Shape::OneD => ((blocks, 1, 1), (threads, 1, 1)),
            Shape::TwoDGrid => (((blocks / 2).max(1), 2, 1), (threads, 1, 1)),
            Shape::TwoDBlock => ((blocks, 1, 1), ((threads / 2).max(1), 2, 1)),
        }
    }
}

/// One call's arguments as the checks see them: the context (`None` for a
/// null pointer), where `local_ptr` points, counted from the buffer's first
/// byte (negative: before it), and the calling kernel's launch shape.
#[derive(Debug, Clone, Copy)]
pub struct Call {
    /// `SymmContext::type`, or None for a null context.
    pub backend: Option<i32>,
    /// The calling kernel's grid and block.
    pub shape: Shape,
    /// The context's buffer_size.
    pub buffer_size: u64,
    /// The buffer's first byte's address (its alignment matters).
    pub buffer_address: u64,
    /// local_ptr - buffer, in bytes.
    pub local_offset: i64,
    pub byte_offset: u64,
    pub num_elements: u64,
    pub reduce_op: i32,
    pub dtype: i32,
}

/// The code `symm_all_reduce` returns for `call` before it touches memory,
/// in the header's order. (The topology and grid-barrier checks depend on
/// the running system and are left to the device.)
pub fn check(call: &Call) -> i32 {
    let Some(backend) = call.backend else {
        return ERR_NULL_CONTEXT;
    };
    if call.shape != Shape::OneD {
        return ERR_GRID_SHAPE;
    }
    if backend != crate::context::BACKEND_NCCL && backend != crate::context::BACKEND_NVSHMEM {
        return ERR_UNKNOWN_BACKEND;
    }
    if call.reduce_op != REDUCE_SUM {
        return ERR_UNSUPPORTED_OP;
    }
    let element: u64 = match call.dtype {
        DTYPE_FLOAT32 => 4,
        DTYPE_BFLOAT16 => 2,
        _ => return ERR_UNSUPPORTED_DTYPE,
    };
    let local = call.buffer_address.wrapping_add(call.local_offset as u64);
    if !(local | call.byte_offset).is_multiple_of(element) {
        return ERR_MISALIGNED;
    }
    if call.local_offset < 0 {
        return ERR_OUT_OF_BOUNDS;
    }
    let into = call.local_offset as u64;
    let size = call.buffer_size;
    if into > size || call.byte_offset > size - into {
        return ERR_OUT_OF_BOUNDS;
    }
    if call.num_elements > (size - into - call.byte_offset) / element {
        return ERR_OUT_OF_BOUNDS;
    }
    OK
}

/// The bad-input cases the lesson's tests run, on the host here and on the
/// device in the GPU test: (what, call, expected code). `good` is a valid
/// call on a buffer of `good.buffer_size` bytes.
pub fn bad_input_cases(good: Call) -> Vec<(&'static str, Call, i32)> {
    let elements = good.buffer_size / 4;
    vec![
        ("a valid call", good, OK),
        (
            "a null context",
            Call {
                backend: None,
                ..good
            },
            ERR_NULL_CONTEXT,
        ),
        (
            "an unknown backend",
            Call {
                backend: Some(7),
                ..good
            },
            ERR_UNKNOWN_BACKEND,
        ),
        (
            "an unsupported reduction (max)",
            Call {
                reduce_op: 1,
                ..good
            },
            ERR_UNSUPPORTED_OP,
        ),
        (
            "an unsupported dtype (float64)",
            Call { dtype: 2, ..good },
            ERR_UNSUPPORTED_DTYPE,
        ),
        (
            "byte_offset + size beyond the buffer",
            Call {
                byte_offset: 4,
                num_elements: elements,
                ..good
            },
            ERR_OUT_OF_BOUNDS,
        ),
        (
            "byte_offset alone beyond the buffer",
            Call {
                byte_offset: good.buffer_size + 4,
                num_elements: 1,
                ..good
            },
            ERR_OUT_OF_BOUNDS,
        ),
        (
            "an element count that overflows",
            Call {
                num_elements: u64::MAX / 2,
                ..good
            },
            ERR_OUT_OF_BOUNDS,
        ),
        (
            "local_ptr before the buffer",
            Call {
                local_offset: -16,
                ..good
            },
            ERR_OUT_OF_BOUNDS,
        ),
        (
            "a misaligned local_ptr",
            Call {
                local_offset: 2,
                num_elements: 1,
                ..good
            },
            ERR_MISALIGNED,
        ),
        (
            "a misaligned byte_offset",
            Call {
                byte_offset: 6,
                num_elements: 1,
                ..good
            },
            ERR_MISALIGNED,
        ),
        (
            "a 2-D grid",
            Call {
                shape: Shape::TwoDGrid,
                ..good
            },
            ERR_GRID_SHAPE,
        ),
        (
            "2-D blocks",
            Call {
                shape: Shape::TwoDBlock,
                ..good
            },
            ERR_GRID_SHAPE,
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn good() -> Call {
        Call {
            backend: Some(crate::context::BACKEND_NCCL),
            shape: Shape::OneD,
            buffer_size: 1 << 20,
            buffer_address: 0x7f00_0000_0000,
            local_offset: 0,
            byte_offset: 0,
            num_elements: (1 << 20) / 4,
            reduce_op: REDUCE_SUM,
            dtype: DTYPE_FLOAT32,
        }
    }

    /// The rank's own bytes go through the caller's address, in both
    /// backends: the window's second mapping of them, used beside the
    /// caller's, would be the virtual aliasing the CUDA Programming Guide
    /// wants `fence.proxy.alias` for. (Read from the header: no run on one
    /// GPU showed a wrong element either way.)
    #[test]
    fn the_own_slot_is_read_and_written_through_the_callers_address() {
        let header = crate::HEADER;
        assert_eq!(
            header
                .matches("p == rank ? local_ptr + byte_offset")
                .count(),
            2,
            "each backend's peers[] must take local_ptr + byte_offset for p == rank"
        );
    }

    #[test]
    fn a_shaped_launch_stays_within_the_share() {
        for blocks in [1u32, 2, 33, 66, 132] {
            for shape in [Shape::OneD, Shape::TwoDGrid, Shape::TwoDBlock] {
                let ((gx, gy, gz), (bx, by, bz)) = shape.dims(blocks, 512);
                assert!(gx * gy * gz <= blocks.max(2), "{shape:?} {blocks}");
                assert!(bx * by * bz <= 512, "{shape:?} {blocks}");
                assert_eq!(gy * gz * by * bz == 1, shape == Shape::OneD);
            }
        }
    }

    #[test]
    fn every_bad_input_gets_its_documented_code() {
        for (what, call, expected) in bad_input_cases(good()) {
            assert_eq!(check(&call), expected, "{what}: {call:?}");
        }
    }

    #[test]
    fn the_whole_buffer_fits_and_one_element_more_does_not() {
        let mut call = good();
        assert_eq!(check(&call), OK);
        call.num_elements += 1;
        assert_eq!(check(&call), ERR_OUT_OF_BOUNDS);
        // bfloat16: twice the elements fit; an odd byte offset does not.
        let call = Call {
            dtype: DTYPE_BFLOAT16,
            num_elements: (1 << 20) / 2,
            ..good()
        };
        assert_eq!(check(&call), OK);
        assert_eq!(
            check(&Call {
                byte_offset: 1,
                num_elements: 1,
                ..call
            }),
            ERR_MISALIGNED
        );
        // A local_ptr inside the buffer counts towards the end.
        assert_eq!(
            check(&Call {
                local_offset: 1024,
                num_elements: ((1 << 20) - 1024) / 4,
                ..good()
            }),
            OK
        );
    }

    /// The header's `#define SYMM_<NAME> <value>` lines with an integer
    /// value (`0`, `(-1)`): the one source of the codes.
    fn header_defines() -> std::collections::BTreeMap<String, i32> {
        crate::HEADER
            .lines()
            .filter_map(|line| {
                let mut words = line.strip_prefix("#define ")?.split_whitespace();
                let name = words.next()?.strip_prefix("SYMM_")?;
                let value = words.next()?.trim_start_matches('(').trim_end_matches(')');
                Some((name.to_string(), value.parse().ok()?))
            })
            .collect()
    }

    /// Every code, reduction, dtype and limit of the header, as this module
    /// names it (without the `SYMM_` prefix).
    const RUST: [(&str, i32); 16] = [
        ("OK", OK),
        ("ERR_NULL_CONTEXT", ERR_NULL_CONTEXT),
        ("ERR_UNKNOWN_BACKEND", ERR_UNKNOWN_BACKEND),
        ("ERR_UNSUPPORTED_OP", ERR_UNSUPPORTED_OP),
        ("ERR_UNSUPPORTED_DTYPE", ERR_UNSUPPORTED_DTYPE),
        ("ERR_OUT_OF_BOUNDS", ERR_OUT_OF_BOUNDS),
        ("ERR_MISALIGNED", ERR_MISALIGNED),
        ("ERR_TOPOLOGY", ERR_TOPOLOGY),
        ("ERR_NO_GRID_SYNC", ERR_NO_GRID_SYNC),
        ("ERR_GRID_SHAPE", ERR_GRID_SHAPE),
        ("REDUCE_SUM", REDUCE_SUM),
        ("DTYPE_FLOAT32", DTYPE_FLOAT32),
        ("DTYPE_BFLOAT16", DTYPE_BFLOAT16),
        ("MAX_RANKS", MAX_RANKS as i32),
        ("ONE_SHOT_MAX_BYTES", ONE_SHOT_MAX_BYTES as i32),
        ("STAGING_BYTES", STAGING_BYTES as i32),
    ];

    #[test]
    fn the_rust_copies_match_the_header() {
        let header = header_defines();
        for (name, value) in RUST {
            assert_eq!(header.get(name), Some(&value), "SYMM_{name}");
        }
        // And the header has no code this module lacks, each described.
        for (name, value) in header.iter().filter(|(n, _)| n.starts_with("ERR_")) {
            assert!(RUST.contains(&(name.as_str(), *value)), "SYMM_{name}");
            assert_ne!(describe(*value), describe(1), "SYMM_{name} undescribed");
        }
    }

    #[test]
    fn the_python_copies_match_the_header() {
        let header = header_defines();
        let python: Vec<(&str, i32)> = crate::triton::SCRIPT
            .lines()
            .filter_map(|line| {
                let (name, value) = line.split_once(" = tl.constexpr(")?;
                let name = name.strip_prefix("SYMM_")?;
                Some((name, value.strip_suffix(')')?.parse().ok()?))
            })
            .collect();
        assert!(python.len() >= 4, "symm.py's constants: {python:?}");
        for (name, value) in python {
            assert_eq!(header.get(name), Some(&value), "symm.py's SYMM_{name}");
        }
    }
}
