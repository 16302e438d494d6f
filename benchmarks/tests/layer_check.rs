//! `06_symm_bench` checks every layer-tail output on the GPU: lesson 06's
//! CPU reference (`reference::expected`, `reference::sums`) gives the
//! expected values once per size, and `bench::data`'s `check_close` kernel
//! compares every timed operation's outputs with them where they are. These
//! CPU tests hold that kernel's test (`bench::data::close`, the same float32
//! operations) to the reference's own check (`reference::check_close`):
//! they accept and refuse the same values, in both dtypes.

use bench::data::close;
use layer_tail::reference::{self, Layer};
use layer_tail::Dtype;

/// Values near `want` that a check must sort right: itself, a float32 ulp
/// and a bfloat16 ulp away, at and just past the tolerance, NaN, the poison.
fn candidates(want: f32, tolerance: f32) -> Vec<f32> {
    let bound = tolerance * want.abs().max(1.0);
    let ulp = |v: f32| f32::from_bits(v.to_bits() + 1) - v;
    vec![
        want,
        want + ulp(want),
        want - ulp(want).max(f32::MIN_POSITIVE),
        reference::from_bf16(reference::to_bf16(want).wrapping_add(1)),
        want + bound,
        want - bound,
        want + bound * 1.001 + ulp(want),
        -want,
        f32::NAN,
        f32::from_bits(bench::data::POISON),
        f32::INFINITY,
    ]
}

#[test]
fn the_gpu_check_accepts_exactly_what_the_reference_check_accepts() {
    let layer = Layer {
        tokens: 3,
        hidden: 64,
        k: 16,
        eps: 1e-6,
    };
    for dtype in [Dtype::F32, Dtype::Bf16] {
        let (want_out, want_residual) = reference::expected(&layer, 2, dtype);
        let want_sum = reference::sums(&layer, 2, dtype);
        let output = reference::output_tolerance(dtype);
        for (wants, tolerance) in [(&want_out, output), (&want_residual, 0.0), (&want_sum, 0.0)] {
            for &want in wants.iter() {
                for got in candidates(want, tolerance) {
                    let reference_says =
                        reference::check_close("x", &[got], &[want], tolerance).is_ok();
                    assert_eq!(
                        close(got, want, tolerance),
                        reference_says,
                        "{dtype:?}: got {got}, want {want}, tolerance {tolerance}"
                    );
                }
            }
        }
    }
}

/// The kernel reads a bfloat16 output as its 16 bits shifted into the top
/// of a float32, as the reference decodes the device's bytes.
#[test]
fn the_gpu_check_reads_bfloat16_as_the_reference_decodes_it() {
    for bits in (0..=u16::MAX).step_by(7) {
        let kernel = f32::from_bits(u32::from(bits) << 16);
        let host = reference::decode(&bits.to_ne_bytes(), Dtype::Bf16)[0];
        assert!(kernel.to_bits() == host.to_bits(), "{bits:#06x}");
    }
}
