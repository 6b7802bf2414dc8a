//! Median and spread of a cell's successful runs.
//!
//! Why the median and min–max and not mean and deviation: a handful of runs on a shared machine
//! has outliers (writeback kicking in, a neighbour's I/O), and the median ignores them while the
//! spread still shows them. This module only ever sees times of runs that succeeded; it must
//! never be handed the time of a failed run.

use serde::Serialize;

/// Median, minimum and maximum of a non-empty set of seconds.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Spread {
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

impl Spread {
    /// The spread of `seconds`, or `None` when there are none.
    pub fn of(seconds: &[f64]) -> Option<Spread> {
        let mut v: Vec<f64> = seconds.iter().copied().filter(|s| s.is_finite()).collect();
        if v.is_empty() {
            return None;
        }
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 };
        Some(Spread { median, min: v[0], max: v[n - 1] })
    }
}

/// `self / base`, the durability tax against the row's `none`; `None` when `base` is zero.
pub fn ratio(value: f64, base: f64) -> Option<f64> {
    (base > 0.0).then(|| value / base)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(Spread::of(&[3.0, 1.0, 2.0]), Some(Spread { median: 2.0, min: 1.0, max: 3.0 }));
        assert_eq!(
            Spread::of(&[4.0, 1.0, 2.0, 3.0]),
            Some(Spread { median: 2.5, min: 1.0, max: 4.0 })
        );
        assert_eq!(Spread::of(&[0.5]), Some(Spread { median: 0.5, min: 0.5, max: 0.5 }));
    }

    #[test]
    fn nothing_to_summarize_is_none() {
        assert_eq!(Spread::of(&[]), None);
        assert_eq!(Spread::of(&[f64::NAN]), None);
    }

    #[test]
    fn ratio_against_zero_is_undefined() {
        assert_eq!(ratio(2.0, 0.5), Some(4.0));
        assert_eq!(ratio(2.0, 0.0), None);
    }
}
