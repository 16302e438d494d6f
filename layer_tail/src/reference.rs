//! The layer's data and its CPU reference.
//!
//! Every input is a small dyadic fraction (x = n/8, w = m/16, residual =
//! r/4), so each rank's partial output and the sum over ranks are exact in
//! float32: the reference then matches the GPU bit for bit up to the
//! RMSNorm, whose sum of squares and `rsqrtf` round differently. bfloat16
//! rounds where the kernel rounds (to nearest even, as `symm_f32_to_bf16`).

use common::verify::Mismatch;
use rayon::prelude::*;

use crate::Dtype;

/// The shape of the layer tail.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Layer {
    pub tokens: usize,
    pub hidden: usize,
    /// Input features per rank (the slice of the row-parallel weight).
    pub k: usize,
    pub eps: f32,
}

impl Layer {
    pub fn elements(&self) -> usize {
        self.tokens * self.hidden
    }
}

/// This rank's activations, tokens x k.
pub fn activations(layer: &Layer, rank: usize) -> Vec<f32> {
    activations_variant(layer, rank, 0)
}

/// This rank's activations in variant `variant` (0 is [`activations`]): the
/// benchmark's one-region stress mode changes them from one operation to the
/// next, so that each operation's partials differ from the last one's.
pub fn activations_variant(layer: &Layer, rank: usize, variant: usize) -> Vec<f32> {
    (0..layer.tokens * layer.k)
        .map(|e| {
            let (t, j) = (e / layer.k, e % layer.k);
            ((t * 7 + j * 3 + rank * 5 + variant * 2) % 17) as f32 / 8.0 - 1.0
        })
        .collect()
}

/// This rank's weight rows, k x hidden.
pub fn weights(layer: &Layer, rank: usize) -> Vec<f32> {
    (0..layer.k * layer.hidden)
        .map(|e| {
            let (j, i) = (e / layer.hidden, e % layer.hidden);
            ((j * 11 + i * 5 + rank * 3) % 13) as f32 / 16.0 - 0.375
        })
        .collect()
}

/// The residual stream before the layer, tokens x hidden (as float32).
pub fn residual(layer: &Layer) -> Vec<f32> {
    (0..layer.elements())
        .map(|e| {
            let (t, i) = (e / layer.hidden, e % layer.hidden);
            ((t + 2 * i) % 9) as f32 / 4.0 - 1.0
        })
        .collect()
}

/// The RMSNorm's weight, hidden.
pub fn gamma(layer: &Layer) -> Vec<f32> {
    (0..layer.hidden)
        .map(|i| 1.0 + (i % 5) as f32 / 8.0)
        .collect()
}

/// float32 -> bfloat16, round to nearest even (NaN stays NaN).
pub fn to_bf16(value: f32) -> u16 {
    let u = value.to_bits();
    if u & 0x7fff_ffff > 0x7f80_0000 {
        return ((u >> 16) | 0x40) as u16;
    }
    (u.wrapping_add(0x7fff + ((u >> 16) & 1)) >> 16) as u16
}

pub fn from_bf16(value: u16) -> f32 {
    f32::from_bits((value as u32) << 16)
}

/// `value` as stored in `dtype` and read back.
pub fn round(value: f32, dtype: Dtype) -> f32 {
    match dtype {
        Dtype::F32 => value,
        Dtype::Bf16 => from_bf16(to_bf16(value)),
    }
}

/// Host values in the device's representation of `dtype`, as raw bytes.
pub fn encode(values: &[f32], dtype: Dtype) -> Vec<u8> {
    match dtype {
        Dtype::F32 => values.iter().flat_map(|v| v.to_ne_bytes()).collect(),
        Dtype::Bf16 => values
            .iter()
            .flat_map(|v| to_bf16(*v).to_ne_bytes())
            .collect(),
    }
}

/// Device bytes of `dtype` as float32 values.
pub fn decode(bytes: &[u8], dtype: Dtype) -> Vec<f32> {
    match dtype {
        Dtype::F32 => bytes
            .chunks_exact(4)
            .map(|c| f32::from_ne_bytes([c[0], c[1], c[2], c[3]]))
            .collect(),
        Dtype::Bf16 => bytes
            .chunks_exact(2)
            .map(|c| from_bf16(u16::from_ne_bytes([c[0], c[1]])))
            .collect(),
    }
}

/// The all-reduced partial outputs (what `symm_all_reduce` leaves in the
/// buffer), as float32 values of `dtype`.
pub fn sums(layer: &Layer, ranks: usize, dtype: Dtype) -> Vec<f32> {
    let (hidden, k) = (layer.hidden, layer.k);
    let x: Vec<Vec<f32>> = (0..ranks).map(|r| activations(layer, r)).collect();
    let w: Vec<Vec<f32>> = (0..ranks).map(|r| weights(layer, r)).collect();
    (0..layer.elements())
        .into_par_iter()
        .map(|e| {
            let (t, i) = (e / hidden, e % hidden);
            let mut sum = 0f32;
            for r in 0..ranks {
                let mut partial = 0f32;
                for j in 0..k {
                    partial = x[r][t * k + j].mul_add(w[r][j * hidden + i], partial);
                }
                sum += round(partial, dtype);
            }
            round(sum, dtype)
        })
        .collect()
}

/// What the layer tail must produce on every rank: (normalized output, new
/// residual), as float32 values of `dtype`.
pub fn expected(layer: &Layer, ranks: usize, dtype: Dtype) -> (Vec<f32>, Vec<f32>) {
    expected_variant(layer, ranks, dtype, 0)
}

/// [`expected`] for the activations of [`activations_variant`] `variant`.
pub fn expected_variant(
    layer: &Layer,
    ranks: usize,
    dtype: Dtype,
    variant: usize,
) -> (Vec<f32>, Vec<f32>) {
    let (tokens, hidden, k) = (layer.tokens, layer.hidden, layer.k);
    let x: Vec<Vec<f32>> = (0..ranks)
        .map(|r| activations_variant(layer, r, variant))
        .collect();
    let w: Vec<Vec<f32>> = (0..ranks).map(|r| weights(layer, r)).collect();
    let residual_in = residual(layer);
    let gamma = gamma(layer);
    let rows: Vec<(Vec<f32>, Vec<f32>)> = (0..tokens)
        .into_par_iter()
        .map(|t| {
            let mut residual_out = vec![0f32; hidden];
            for (i, slot) in residual_out.iter_mut().enumerate() {
                // All-reduce: each rank's partial as stored, summed in rank order.
                let mut sum = 0f32;
                for r in 0..ranks {
                    let mut partial = 0f32;
                    for j in 0..k {
                        partial = x[r][t * k + j].mul_add(w[r][j * hidden + i], partial);
                    }
                    sum += round(partial, dtype);
                }
                let sum = round(sum, dtype);
                let h = sum + round(residual_in[t * hidden + i], dtype);
                *slot = round(h, dtype);
            }
            let squares: f64 = residual_out.iter().map(|h| (*h as f64) * (*h as f64)).sum();
            let scale = 1.0 / ((squares / hidden as f64) as f32 + layer.eps).sqrt();
            let out: Vec<f32> = residual_out
                .iter()
                .zip(&gamma)
                .map(|(h, g)| round(h * scale * g, dtype))
                .collect();
            (out, residual_out)
        })
        .collect();
    let mut out = Vec::with_capacity(tokens * hidden);
    let mut residual_out = Vec::with_capacity(tokens * hidden);
    for (o, r) in rows {
        out.extend(o);
        residual_out.extend(r);
    }
    (out, residual_out)
}

/// The tolerance for the normalized output: float32 differs from the
/// reference only through the order of the sum of squares and `rsqrtf`
/// (a few ulp); bfloat16 can also round the last bit the other way (one
/// bfloat16 ulp is 2^-8 to 2^-7 of the value).
pub fn output_tolerance(dtype: Dtype) -> f32 {
    match dtype {
        Dtype::F32 => 1e-5,
        Dtype::Bf16 => 1.0 / 64.0,
    }
}

/// Checks every element of `got` against `want`, within `relative` (and
/// the same as an absolute bound near zero); the first mismatch is reported
/// with its index, as `common::verify` reports it.
pub fn check_close(what: &str, got: &[f32], want: &[f32], relative: f32) -> Result<(), Mismatch> {
    let wrong = |(g, w): (&f32, &f32)| {
        let tolerance = relative * w.abs().max(1.0);
        let close = (g - w).abs() <= tolerance;
        !close
    };
    let first = got.par_iter().zip(want).position_first(wrong);
    let Some(index) = first else {
        return Ok(());
    };
    Err(Mismatch {
        what: what.into(),
        index,
        expected: want[index].to_string(),
        got: got[index].to_string(),
        wrong: got.par_iter().zip(want).filter(|&p| wrong(p)).count(),
        len: got.len(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn consecutive_activation_variants_give_other_results() {
        // The one-region stress mode takes variants 0, 1, 2, 3 in turn: an
        // operation that read the previous one's partials must give another
        // sum, and so another output, almost everywhere.
        let layer = Layer {
            tokens: 4,
            hidden: 64,
            k: 32,
            eps: 1e-6,
        };
        for variant in 0..4 {
            let (now, _) = expected_variant(&layer, 2, Dtype::F32, variant);
            let (before, _) = expected_variant(&layer, 2, Dtype::F32, (variant + 3) % 4);
            let same = now.iter().zip(&before).filter(|(a, b)| a == b).count();
            assert!(
                same * 10 < now.len(),
                "variant {variant}: {same} of {} equal",
                now.len()
            );
        }
        assert_eq!(activations_variant(&layer, 1, 0), activations(&layer, 1));
    }

    #[test]
    fn bf16_rounds_to_nearest_even() {
        assert_eq!(to_bf16(1.0), 0x3f80);
        // 1 + 2^-8 is halfway between 1 and 1 + 2^-7: to even (1.0).
        assert_eq!(to_bf16(1.0 + 1.0 / 256.0), 0x3f80);
        // 1 + 3 * 2^-8 is halfway between 1 + 2^-7 and 1 + 2^-6: to even.
        assert_eq!(from_bf16(to_bf16(1.0 + 3.0 / 256.0)), 1.0 + 2.0 / 128.0);
        assert!(from_bf16(to_bf16(f32::NAN)).is_nan());
        assert_eq!(from_bf16(to_bf16(-2.5)), -2.5);
    }

    #[test]
    fn the_partials_are_exact_in_float32() {
        let layer = Layer {
            tokens: 3,
            hidden: 64,
            k: 16,
            eps: 1e-6,
        };
        // Every product is a multiple of 2^-7 below 2^2: a sum of 16 of them
        // needs at most 13 bits, so no rounding happens in float32.
        for r in 0..8 {
            let (x, w) = (activations(&layer, r), weights(&layer, r));
            for v in x.iter().chain(&w) {
                assert_eq!((v * 128.0).fract(), 0.0);
            }
        }
    }

    #[test]
    fn one_rank_is_residual_plus_its_partial_normalized() {
        let layer = Layer {
            tokens: 2,
            hidden: 8,
            k: 2,
            eps: 1e-6,
        };
        let (out, res) = expected(&layer, 1, Dtype::F32);
        let (x, w, r0) = (activations(&layer, 0), weights(&layer, 0), residual(&layer));
        let h0 = x[0] * w[0] + x[1] * w[8] + r0[0];
        assert_eq!(res[0], h0);
        let rms = (res[..8].iter().map(|h| h * h).sum::<f32>() / 8.0 + 1e-6).sqrt();
        assert!((out[0] - h0 / rms * gamma(&layer)[0]).abs() < 1e-5);
    }

    #[test]
    fn a_wrong_element_is_reported_with_its_index() {
        let want = vec![1.0f32; 100];
        let mut got = want.clone();
        got[42] = 1.1;
        let err = check_close("output", &got, &want, 1e-5).unwrap_err();
        assert_eq!((err.index, err.wrong), (42, 1));
        assert!(check_close("output", &want, &want, 1e-5).is_ok());
        // NaN is never close.
        got[42] = f32::NAN;
        assert!(check_close("output", &got, &want, 1.0).is_err());
    }

    #[test]
    fn encode_and_decode_round_trip() {
        let values = [0.5f32, -1.25, 3.0];
        for dtype in [Dtype::F32, Dtype::Bf16] {
            assert_eq!(decode(&encode(&values, dtype), dtype), values);
        }
    }
}
