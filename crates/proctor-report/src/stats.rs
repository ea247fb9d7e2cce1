//! The numbers every report is built from: a rate with its n, a median with its n, a
//! median / mean / total with their n, a matched
//! change between two arms, and the pass@k / pass^k estimators.
//!
//! None of these ever produce a non-finite float: an empty sample gives `None` (JSON `null`),
//! and a relative change from an exact zero baseline gives `relative: null` with
//! `relative_unbounded: true` (docs/metrics.md).

use std::borrow::Cow;
use std::fmt;

use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Serialize};

pub use proctor_suite::model::Statistic;

/// A rate as `k` of `n`: it renders `k/n (p%)` and serializes as
/// `{"k": .., "n": .., "rate": p}` where `rate` is the fraction k/n (0..1), or `null` when n = 0.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "RateRepr", from = "RateRepr")]
pub struct Rate {
    /// How many of the n counted.
    pub k: u64,
    /// The denominator.
    pub n: u64,
}

/// The serialized form of [`Rate`].
#[derive(Clone, Copy, Serialize, Deserialize, JsonSchema)]
#[schemars(rename = "Rate")]
struct RateRepr {
    /// How many of the n counted.
    k: u64,
    /// The denominator.
    n: u64,
    /// k / n as a fraction from 0 to 1; `null` when n = 0.
    #[serde(default)]
    rate: Option<f64>,
}

impl From<Rate> for RateRepr {
    fn from(r: Rate) -> Self {
        RateRepr {
            k: r.k,
            n: r.n,
            rate: r.value(),
        }
    }
}

impl From<RateRepr> for Rate {
    fn from(r: RateRepr) -> Self {
        Rate { k: r.k, n: r.n }
    }
}

impl JsonSchema for Rate {
    fn schema_name() -> Cow<'static, str> {
        "Rate".into()
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        RateRepr::json_schema(generator)
    }
}

impl Rate {
    /// A rate of `k` out of `n`.
    pub fn new(k: u64, n: u64) -> Rate {
        Rate { k, n }
    }

    /// k / n, or `None` when n = 0.
    pub fn value(&self) -> Option<f64> {
        (self.n > 0).then(|| self.k as f64 / self.n as f64)
    }
}

impl fmt::Display for Rate {
    /// `k/n (p%)`; `p` is a whole percent, shown as `<1%` or `>99%` rather than rounding a
    /// nonzero count to 0% or an incomplete one to 100%; `k/0 (n/a)` when n = 0.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.value() {
            None => write!(f, "{}/{} (n/a)", self.k, self.n),
            Some(p) => {
                let pct = (p * 100.0).round();
                if self.k > 0 && pct == 0.0 {
                    write!(f, "{}/{} (<1%)", self.k, self.n)
                } else if self.k < self.n && pct == 100.0 {
                    write!(f, "{}/{} (>99%)", self.k, self.n)
                } else {
                    write!(f, "{}/{} ({pct:.0}%)", self.k, self.n)
                }
            }
        }
    }
}

/// A median with the number of values it was taken over. Missing values are left out, never
/// counted as 0, so `n` may be smaller than the number of trials.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Median {
    /// The median (the mean of the two middle values for an even n); `null` when n = 0.
    pub median: Option<f64>,
    /// How many values it was taken over.
    pub n: u64,
}

impl Median {
    /// The median of the finite values among `values`; `None`s and non-finite values are left out.
    pub fn of(values: impl IntoIterator<Item = Option<f64>>) -> Median {
        let mut v: Vec<f64> = values
            .into_iter()
            .flatten()
            .filter(|x| x.is_finite())
            .collect();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = match n {
            0 => None,
            _ if n % 2 == 1 => Some(v[n / 2]),
            _ => Some((v[n / 2 - 1] + v[n / 2]) / 2.0),
        };
        Median {
            median,
            n: n as u64,
        }
    }
}

impl fmt::Display for Median {
    /// `value (n=N)`, or `- (n=0)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.median {
            Some(m) => write!(f, "{} (n={})", number(m), self.n),
            None => write!(f, "- (n={})", self.n),
        }
    }
}

/// The median, mean and total of one per-trial metric over the trials of a cell that reported
/// it, all three over the same `n` values: the median shows the typical trial, the mean and the
/// total show a tail the median hides (one task's 24 wrong turns among ten trials). Missing
/// values are left out, never counted as 0; with n = 0 all three are `null`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Summary {
    /// The median (the mean of the two middle values for an even n); `null` when n = 0.
    pub median: Option<f64>,
    /// The arithmetic mean; `null` when n = 0.
    pub mean: Option<f64>,
    /// The sum; `null` when n = 0 (nothing was measured, which is not a total of 0).
    pub total: Option<f64>,
    /// How many values all three were taken over.
    pub n: u64,
}

impl Summary {
    /// The summary of the finite values among `values`; `None`s and non-finite values are left
    /// out.
    pub fn of(values: impl IntoIterator<Item = Option<f64>>) -> Summary {
        let v: Vec<f64> = values
            .into_iter()
            .flatten()
            .filter(|x| x.is_finite())
            .collect();
        let median = Median::of(v.iter().map(|x| Some(*x)));
        let total: f64 = v.iter().sum();
        let n = v.len();
        let finite = |x: f64| x.is_finite().then_some(x);
        Summary {
            median: median.median,
            mean: if n == 0 {
                None
            } else {
                finite(total / n as f64)
            },
            total: if n == 0 { None } else { finite(total) },
            n: n as u64,
        }
    }

    /// The value of one statistic.
    pub fn get(&self, statistic: Statistic) -> Option<f64> {
        match statistic {
            Statistic::Median => self.median,
            Statistic::Mean => self.mean,
            Statistic::Total => self.total,
        }
    }

    /// The median alone, with the same n.
    pub fn as_median(&self) -> Median {
        Median {
            median: self.median,
            n: self.n,
        }
    }
}

impl fmt::Display for Summary {
    /// `median / mean / total (n=N)`, or `- (n=0)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match (self.median, self.mean, self.total) {
            (Some(m), Some(a), Some(t)) => write!(
                f,
                "{} / {} / {} (n={})",
                number(m),
                number(a),
                number(t),
                self.n
            ),
            _ => write!(f, "- (n={})", self.n),
        }
    }
}

/// A number as a person reads it: whole numbers without decimals, others with up to two.
pub fn number(x: f64) -> String {
    if !x.is_finite() {
        return "-".to_string();
    }
    if x.fract() == 0.0 && x.abs() < 1e15 {
        return format!("{x:.0}");
    }
    let s = format!("{x:.2}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    if s == "-0" {
        "0".to_string()
    } else {
        s.to_string()
    }
}

/// A difference of two rates (fractions 0..1) in percentage points, signed: `+25 points`. A
/// difference that is not zero never reads as `+0 points`: it gets the decimals it needs
/// (`+0.4 points`, `-0.05 points`).
pub fn points(d: f64) -> String {
    if !d.is_finite() {
        return "-".to_string();
    }
    let p = d * 100.0;
    if p.abs() < 1e-7 {
        return "+0 points".to_string();
    }
    let mut decimals = 0;
    let mut s = format!("{p:+.0}");
    while decimals < 6 && s[1..].chars().all(|c| c == '0' || c == '.') {
        decimals += 1;
        s = format!("{p:+.decimals$}");
    }
    format!("{s} points")
}

/// The relative change (b − a) / a. From an exact zero baseline it is `None` with
/// `unbounded = true` when b differs from 0 (no finite percentage exists), and `None` with
/// `unbounded = false` when b is 0 too (no change).
pub fn relative(a: f64, b: f64) -> (Option<f64>, bool) {
    if a == 0.0 {
        (None, b != 0.0)
    } else {
        let r = (b - a) / a.abs();
        if r.is_finite() {
            (Some(r), false)
        } else {
            (None, true)
        }
    }
}

/// The unbiased pass@k estimator for one task: with `n` graded trials of which `c` succeeded,
/// the probability that at least one of `k` trials drawn without replacement succeeds,
/// 1 − C(n−c, k) / C(n, k). `None` when k = 0 or k > n.
pub fn pass_at_k(n: u64, c: u64, k: u64) -> Option<f64> {
    if k == 0 || k > n || c > n {
        return None;
    }
    if n - c < k {
        return Some(1.0);
    }
    // C(n−c, k) / C(n, k) = Π_{i<k} (n−c−i) / (n−i)
    let none = (0..k)
        .map(|i| (n - c - i) as f64 / (n - i) as f64)
        .product::<f64>();
    Some(1.0 - none)
}

/// The pass^k estimator for one task: the probability that all of `k` trials drawn without
/// replacement from the `n` graded ones succeeded, C(c, k) / C(n, k) (unbiased for p^k, the
/// chance that k independent trials all succeed). `None` when k = 0 or k > n.
pub fn pass_pow_k(n: u64, c: u64, k: u64) -> Option<f64> {
    if k == 0 || k > n || c > n {
        return None;
    }
    if c < k {
        return Some(0.0);
    }
    Some((0..k).map(|i| (c - i) as f64 / (n - i) as f64).product())
}

/// The level of the sign test a comparison's direction needs: two-sided, 5%.
pub const SIGN_TEST_LEVEL_PERCENT: u64 = 5;

/// What the exact two-sided sign test at [`SIGN_TEST_LEVEL_PERCENT`] says of `higher` pairs
/// that went one way and `lower` that went the other (ties left out).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SignTest {
    /// No pair went either way.
    NoPairs,
    /// So few pairs went either way (N ≤ 5) that even N of N on one side is within what fair
    /// coin flips give: nothing can be said.
    TooFew,
    /// One side has at least `needs` of the N pairs: beyond what fair coin flips give.
    Clear {
        /// True when the `higher` side is the lopsided one.
        higher: bool,
        /// The critical count K for N.
        needs: u64,
    },
    /// Neither side has `needs` of the N pairs: no clear difference.
    NotClear {
        /// The critical count K for N.
        needs: u64,
    },
}

impl SignTest {
    /// The test of `higher` pairs one way against `lower` the other.
    pub fn of(higher: u64, lower: u64) -> SignTest {
        let n = higher + lower;
        if n == 0 {
            return SignTest::NoPairs;
        }
        match sign_test_critical(n) {
            None => SignTest::TooFew,
            Some(needs) if higher >= needs => SignTest::Clear {
                higher: true,
                needs,
            },
            Some(needs) if lower >= needs => SignTest::Clear {
                higher: false,
                needs,
            },
            Some(needs) => SignTest::NotClear { needs },
        }
    }

    /// The critical count, when there is one.
    pub fn needs(self) -> Option<u64> {
        match self {
            SignTest::Clear { needs, .. } | SignTest::NotClear { needs } => Some(needs),
            SignTest::NoPairs | SignTest::TooFew => None,
        }
    }
}

/// The critical count K of the exact two-sided sign test at 5% for `n` pairs that went one way
/// or the other: the smallest K such that K or more of the `n` on one side happens with
/// probability at most 5% when each pair is a fair coin flip, i.e. 2 · P(X ≥ K) ≤ 0.05 for
/// X ~ Binomial(n, 1/2). `None` when even n of n is not that rare (n ≤ 5).
pub fn sign_test_critical(n: u64) -> Option<u64> {
    if n <= EXACT_UP_TO {
        critical_exact(n)
    } else {
        critical_float(n)
    }
}

/// Up to this many pairs the critical count is found in integers, exactly.
const EXACT_UP_TO: u64 = 120;

/// 2 · P(X ≥ K) ≤ level  ⇔  P(X ≥ K) ≤ 1 / `TAIL_DENOMINATOR` (1/40 at 5%).
const TAIL_DENOMINATOR: u64 = 200 / SIGN_TEST_LEVEL_PERCENT;

/// [`sign_test_critical`] in integers: 40 · Σ_{i ≥ K} C(n, i) ≤ 2^n. Exact for n ≤ 120
/// (C(120, 60) · 120 and 40 · 2^120 fit in a u128).
fn critical_exact(n: u64) -> Option<u64> {
    let total = 1u128 << n;
    let mut tail: u128 = 0;
    let mut c: u128 = 1; // C(n, i) for i = n, n − 1, ...
    let mut needs = None;
    for i in (0..=n).rev() {
        tail += c;
        if tail * u128::from(TAIL_DENOMINATOR) > total {
            break;
        }
        needs = Some(i);
        // C(n, i − 1) = C(n, i) · i / (n − i + 1), exact at every step.
        if i > 0 {
            c = c * u128::from(i) / u128::from(n - i + 1);
        }
    }
    // A critical count is on the larger side of n / 2.
    needs.filter(|&k| 2 * k > n)
}

/// [`sign_test_critical`] in logarithms, for any n: each term exp(ln C(n, i) − n ln 2), summed
/// from i = n down. The tail is a multiple of 2^−n and never exactly 1/40, so the rounding of
/// f64 cannot move the boundary (checked against [`critical_exact`] in tests).
fn critical_float(n: u64) -> Option<u64> {
    let ln2 = std::f64::consts::LN_2;
    let nf = n as f64;
    let limit = 1.0 / TAIL_DENOMINATOR as f64;
    let mut ln_c = 0.0f64; // ln C(n, n)
    let mut tail = 0.0f64;
    let mut needs = None;
    for i in (0..=n).rev() {
        if i < n {
            // C(n, i) = C(n, i + 1) · (i + 1) / (n − i).
            ln_c += ((i + 1) as f64).ln() - ((n - i) as f64).ln();
        }
        tail += (ln_c - nf * ln2).exp();
        if tail > limit {
            break;
        }
        needs = Some(i);
    }
    needs.filter(|&k| 2 * k > n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rate_renders_k_of_n_and_never_rounds_to_a_false_extreme() {
        assert_eq!(Rate::new(7, 12).to_string(), "7/12 (58%)");
        assert_eq!(Rate::new(0, 5).to_string(), "0/5 (0%)");
        assert_eq!(Rate::new(0, 0).to_string(), "0/0 (n/a)");
        assert_eq!(Rate::new(1, 1000).to_string(), "1/1000 (<1%)");
        assert_eq!(Rate::new(999, 1000).to_string(), "999/1000 (>99%)");
    }

    #[test]
    fn rate_serializes_with_its_fraction_or_null() {
        let j = serde_json::to_value(Rate::new(1, 4)).unwrap();
        assert_eq!(j, serde_json::json!({"k": 1, "n": 4, "rate": 0.25}));
        let j = serde_json::to_value(Rate::new(0, 0)).unwrap();
        assert_eq!(j, serde_json::json!({"k": 0, "n": 0, "rate": null}));
        let back: Rate =
            serde_json::from_value(serde_json::json!({"k": 1, "n": 4, "rate": 0.25})).unwrap();
        assert_eq!(back, Rate::new(1, 4));
    }

    #[test]
    fn rate_rises_with_k() {
        assert!(Rate::new(3, 10).value() > Rate::new(2, 10).value());
    }

    #[test]
    fn median_leaves_nulls_out_instead_of_counting_them_as_zero() {
        let m = Median::of([Some(4.0), None, Some(6.0), None, None]);
        assert_eq!(
            m,
            Median {
                median: Some(5.0),
                n: 2
            }
        );
        assert_eq!(Median::of([None, None]), Median { median: None, n: 0 });
        assert_eq!(
            Median::of([Some(f64::NAN), Some(1.0)]),
            Median {
                median: Some(1.0),
                n: 1
            }
        );
    }

    #[test]
    fn median_is_the_middle_value_or_the_mean_of_the_two_middle_ones() {
        let m = |v: &[f64]| Median::of(v.iter().map(|x| Some(*x))).median;
        assert_eq!(m(&[7.0]), Some(7.0));
        assert_eq!(m(&[9.0, 1.0, 5.0]), Some(5.0));
        assert_eq!(m(&[1.0, 2.0, 4.0, 10.0]), Some(3.0));
        assert_eq!(m(&[5.0, 1.0, 3.0, 100.0, 2.0]), Some(3.0));
        assert_eq!(m(&[1.0, 3.0, 6.0, 8.0, 20.0, 40.0]), Some(7.0));
        assert_eq!(m(&[]), None);
    }

    #[test]
    fn each_statistic_of_a_summary_is_its_own() {
        let s = Summary::of([Some(1.0), Some(2.0), Some(9.0)]);
        assert_eq!(s.get(Statistic::Median), Some(2.0));
        assert_eq!(s.get(Statistic::Mean), Some(4.0));
        assert_eq!(s.get(Statistic::Total), Some(12.0));
        assert_eq!(
            s.as_median(),
            Median {
                median: Some(2.0),
                n: 3
            }
        );
    }

    #[test]
    fn median_rises_when_values_rise() {
        let low = Median::of([Some(1.0), Some(2.0), Some(3.0)]);
        let high = Median::of([Some(1.0), Some(5.0), Some(6.0)]);
        assert!(high.median > low.median);
    }

    #[test]
    fn relative_from_zero_is_unbounded_not_infinite() {
        assert_eq!(relative(0.0, 0.5), (None, true));
        assert_eq!(relative(0.0, 0.0), (None, false));
        assert_eq!(relative(0.5, 0.75), (Some(0.5), false));
        assert_eq!(relative(0.5, 0.25), (Some(-0.5), false));
    }

    #[test]
    fn pass_at_k_matches_the_unbiased_estimator() {
        // n = 5, c = 2, k = 2: 1 − C(3,2)/C(5,2) = 1 − 3/10.
        assert!((pass_at_k(5, 2, 2).unwrap() - 0.7).abs() < 1e-12);
        assert_eq!(pass_at_k(5, 0, 3), Some(0.0));
        assert_eq!(pass_at_k(5, 4, 2), Some(1.0));
        assert_eq!(pass_at_k(3, 1, 4), None);
        assert_eq!(pass_at_k(3, 1, 0), None);
        // k = 1 is the plain success rate.
        assert!((pass_at_k(4, 1, 1).unwrap() - 0.25).abs() < 1e-12);
    }

    #[test]
    fn pass_pow_k_is_the_chance_that_all_k_drawn_succeed() {
        // n = 5, c = 3, k = 2: C(3,2)/C(5,2) = 3/10.
        assert!((pass_pow_k(5, 3, 2).unwrap() - 0.3).abs() < 1e-12);
        assert_eq!(pass_pow_k(5, 5, 5), Some(1.0));
        assert_eq!(pass_pow_k(5, 1, 2), Some(0.0));
        assert_eq!(pass_pow_k(2, 1, 3), None);
    }

    #[test]
    fn pass_at_k_and_pass_pow_k_rise_with_successes() {
        for k in 1..=4 {
            for c in 0..5 {
                assert!(pass_at_k(5, c + 1, k) >= pass_at_k(5, c, k));
                assert!(pass_pow_k(5, c + 1, k) >= pass_pow_k(5, c, k));
            }
            assert!(pass_at_k(5, 2, k) < pass_at_k(5, 3, k) || pass_at_k(5, 2, k) == Some(1.0));
            assert!(pass_pow_k(5, 4, k) > pass_pow_k(5, 3, k));
        }
    }

    #[test]
    fn number_formats_whole_and_fractional_values() {
        assert_eq!(number(3.0), "3");
        assert_eq!(number(2.5), "2.5");
        assert_eq!(number(1.2345), "1.23");
        assert_eq!(number(f64::NAN), "-");
    }

    #[test]
    fn points_never_read_as_zero_unless_zero() {
        assert_eq!(points(0.0), "+0 points");
        assert_eq!(points(-0.0), "+0 points");
        assert_eq!(points(0.25), "+25 points");
        assert_eq!(points(-0.125), "-12 points");
        assert_eq!(points(1.0 / 300.0), "+0.3 points");
        assert_eq!(points(-1.0 / 2500.0), "-0.04 points");
    }

    #[test]
    fn summary_mean_and_total_see_the_tail_the_median_hides() {
        // Nine trials with no wrong turn and one with 24: the median stays 0.
        let quiet = Summary::of((0..10).map(|_| Some(0.0)));
        let tail = Summary::of((0..10).map(|i| Some(if i == 9 { 24.0 } else { 0.0 })));
        assert_eq!(tail.median, quiet.median);
        assert!(tail.mean > quiet.mean, "{tail:?} vs {quiet:?}");
        assert!(tail.total > quiet.total, "{tail:?} vs {quiet:?}");
        assert_eq!(tail.mean, Some(2.4));
        assert_eq!(tail.total, Some(24.0));
        assert_eq!(tail.n, 10);
    }

    #[test]
    fn summary_leaves_missing_values_out_and_is_null_when_empty() {
        let s = Summary::of([Some(4.0), None, Some(6.0), Some(f64::INFINITY)]);
        assert_eq!(
            s,
            Summary {
                median: Some(5.0),
                mean: Some(5.0),
                total: Some(10.0),
                n: 2
            }
        );
        let empty = Summary::of([None, None]);
        assert_eq!(empty, Summary::default());
        assert_eq!(
            serde_json::to_value(empty).unwrap(),
            serde_json::json!({"median": null, "mean": null, "total": null, "n": 0})
        );
        assert_eq!(empty.to_string(), "- (n=0)");
        assert_eq!(s.to_string(), "5 / 5 / 10 (n=2)");
    }

    #[test]
    fn summary_statistics_rise_when_values_rise() {
        let low = Summary::of([Some(1.0), Some(2.0), Some(3.0)]);
        let high = Summary::of([Some(1.0), Some(5.0), Some(6.0)]);
        for st in [Statistic::Median, Statistic::Mean, Statistic::Total] {
            assert!(high.get(st) > low.get(st), "{st:?}");
        }
    }

    #[test]
    fn sign_test_critical_counts_are_the_textbook_ones() {
        // Two-sided 5%: N of N from N = 6; the table's N = 10 -> 9, 20 -> 15, 25 -> 18.
        for n in 0..=5 {
            assert_eq!(sign_test_critical(n), None, "{n}");
        }
        for (n, k) in [
            (6, 6),
            (7, 7),
            (8, 8),
            (9, 8),
            (10, 9),
            (12, 10),
            (15, 12),
            (20, 15),
            (25, 18),
            (30, 21),
            (50, 33),
            (100, 61),
        ] {
            assert_eq!(sign_test_critical(n), Some(k), "{n}");
        }
    }

    #[test]
    fn sign_test_critical_counts_are_the_smallest_beyond_five_percent() {
        // Directly from the binomial tail in f64: 2 P(X >= K) <= 0.05 < 2 P(X >= K - 1).
        let tail = |n: u64, k: u64| -> f64 {
            (k..=n)
                .map(|i| {
                    (0..i).fold(1.0, |c: f64, j| c * (n - j) as f64 / (j + 1) as f64)
                        / 2f64.powi(n as i32)
                })
                .sum()
        };
        for n in 6..=60 {
            let k = sign_test_critical(n).unwrap();
            assert!(2.0 * tail(n, k) <= 0.05, "{n}: {k}");
            assert!(2.0 * tail(n, k - 1) > 0.05, "{n}: {k}");
        }
    }

    #[test]
    fn the_float_critical_count_agrees_with_the_exact_one_and_grows() {
        for n in 1..=EXACT_UP_TO {
            assert_eq!(critical_float(n), critical_exact(n), "{n}");
        }
        let mut last = 0;
        for n in [121, 200, 500, 1000, 5000] {
            let k = sign_test_critical(n).unwrap();
            assert!(k > n / 2 && k > last, "{n}: {k}");
            last = k;
        }
    }

    #[test]
    fn a_sign_test_is_clear_only_at_the_critical_count() {
        assert_eq!(SignTest::of(0, 0), SignTest::NoPairs);
        assert_eq!(SignTest::of(5, 0), SignTest::TooFew);
        assert_eq!(SignTest::of(2, 1), SignTest::TooFew);
        assert_eq!(SignTest::of(4, 2), SignTest::NotClear { needs: 6 });
        assert_eq!(
            SignTest::of(6, 0),
            SignTest::Clear {
                higher: true,
                needs: 6
            }
        );
        assert_eq!(
            SignTest::of(0, 6),
            SignTest::Clear {
                higher: false,
                needs: 6
            }
        );
        assert_eq!(
            SignTest::of(1, 8),
            SignTest::Clear {
                higher: false,
                needs: 8
            }
        );
        assert_eq!(SignTest::of(2, 7), SignTest::NotClear { needs: 8 });
        assert_eq!(SignTest::of(4, 2).needs(), Some(6));
        assert_eq!(SignTest::of(0, 9).needs(), Some(8));
        assert_eq!(SignTest::of(3, 2).needs(), None);
        assert_eq!(SignTest::of(0, 0).needs(), None);
    }
}
