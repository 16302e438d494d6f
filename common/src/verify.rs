//! Verification: every element, against the closed-form answer.
//!
//! NVIDIA's examples check on rank 0 only and still exit 0 on a wrong answer.
//! Here every rank checks its whole buffer, and a mismatch names the element,
//! what was expected and what was found.

use std::fmt;

use rayon::prelude::*;

/// Equality for verification: exact for integers, a tight relative tolerance
/// for floats (the lessons' sums of small integers are exact in `f32`, but a
/// reader who changes the data should not trip over the last bit).
pub trait Close: Copy + fmt::Display + Send + Sync {
    fn close_to(self, expected: Self) -> bool;
}

macro_rules! exact {
    ($($t:ty),*) => {$(
        impl Close for $t {
            fn close_to(self, expected: Self) -> bool {
                self == expected
            }
        }
    )*};
}
exact!(u8, u16, u32, u64, usize, i8, i16, i32, i64);

impl Close for f32 {
    fn close_to(self, expected: Self) -> bool {
        approx::relative_eq!(self, expected, epsilon = 1e-6, max_relative = 1e-5)
    }
}

impl Close for f64 {
    fn close_to(self, expected: Self) -> bool {
        approx::relative_eq!(self, expected, epsilon = 1e-12, max_relative = 1e-12)
    }
}

/// The first wrong element of a buffer, and how many were wrong.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    /// What was checked, e.g. "receive buffer".
    pub what: String,
    pub index: usize,
    pub expected: String,
    pub got: String,
    pub wrong: usize,
    pub len: usize,
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}: element {} of {}: expected {}, got {} ({} of {} elements wrong)",
            self.what, self.index, self.len, self.expected, self.got, self.wrong, self.len
        )
    }
}

impl std::error::Error for Mismatch {}

/// Checks `data[i]` against `expected(i)` for every `i` (in parallel on the host).
pub fn check_all<T: Close>(
    what: &str,
    data: &[T],
    expected: impl Fn(usize) -> T + Sync,
) -> Result<(), Mismatch> {
    let wrong = |(i, got): (usize, &T)| !got.close_to(expected(i));
    let Some(index) = data.par_iter().enumerate().position_first(wrong) else {
        return Ok(());
    };
    Err(Mismatch {
        what: what.to_string(),
        index,
        expected: expected(index).to_string(),
        got: data[index].to_string(),
        wrong: data
            .par_iter()
            .enumerate()
            .filter(|&item| wrong(item))
            .count(),
        len: data.len(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_correct_buffer_passes() {
        let data = vec![6.0f32; 1 << 20];
        assert_eq!(check_all("sum", &data, |_| 6.0), Ok(()));
        let ramp: Vec<u64> = (0..1000).collect();
        assert_eq!(check_all("ramp", &ramp, |i| i as u64), Ok(()));
    }

    #[test]
    fn the_first_mismatch_is_reported_with_index_expected_and_got() {
        let mut data = vec![6.0f32; 1000];
        data[700] = 5.0;
        data[17] = 0.0;
        let err = check_all("receive buffer", &data, |_| 6.0).unwrap_err();
        assert_eq!((err.index, err.wrong, err.len), (17, 2, 1000));
        assert_eq!(
            err.to_string(),
            "receive buffer: element 17 of 1000: expected 6, got 0 (2 of 1000 elements wrong)"
        );
    }

    #[test]
    fn floats_allow_rounding_but_not_more() {
        assert!(6.000_001f32.close_to(6.0));
        assert!(!6.001f32.close_to(6.0));
        assert!(!f32::NAN.close_to(6.0));
        assert!(!7u32.close_to(6));
    }
}
