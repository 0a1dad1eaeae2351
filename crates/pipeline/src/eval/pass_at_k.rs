//! The figures of a pass rate: pass@k by the unbiased estimator of Chen et al.
//! (2021), 1 − C(n−c, k) / C(n, k) for a case with n graded tries of which c
//! resolved, averaged over cases; and the Wilson score interval (95 %) of pass@1
//! over all graded runs, which stays inside [0, 1] and is sound for few runs.

/// pass@k of one case: n graded tries, c resolved. None when k > n (not estimable).
pub fn pass_at_k(n: u64, c: u64, k: u64) -> Option<f64> {
    if k == 0 || k > n || c > n {
        return None;
    }
    if n - c < k {
        return Some(1.0);
    }
    // C(n−c, k) / C(n, k) = Π_{i=n−c+1}^{n} (1 − k / i), stable for large n.
    let mut ratio = 1.0;
    for i in (n - c + 1)..=n {
        ratio *= 1.0 - k as f64 / i as f64;
    }
    Some(1.0 - ratio)
}

/// pass@k averaged over the cases (each `(n, c)`) that have at least k graded
/// tries; None when none has.
pub fn mean_pass_at_k(cases: &[(u64, u64)], k: u64) -> Option<f64> {
    let values: Vec<f64> = cases
        .iter()
        .filter_map(|&(n, c)| pass_at_k(n, c, k))
        .collect();
    if values.is_empty() {
        return None;
    }
    Some(values.iter().sum::<f64>() / values.len() as f64)
}

/// The Wilson score interval at 95 % for `successes` of `n`; None for n = 0.
pub fn wilson_95(successes: u64, n: u64) -> Option<(f64, f64)> {
    if n == 0 {
        return None;
    }
    let z = 1.959_963_984_540_054_f64;
    let n_f = n as f64;
    let p = successes as f64 / n_f;
    let z2 = z * z;
    let centre = (p + z2 / (2.0 * n_f)) / (1.0 + z2 / n_f);
    let half = z * ((p * (1.0 - p) / n_f + z2 / (4.0 * n_f * n_f)).sqrt()) / (1.0 + z2 / n_f);
    Some(((centre - half).max(0.0), (centre + half).min(1.0)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn pass_at_k_against_hand_computed_values() {
        // n=5, c=2, k=1: 1 − C(3,1)/C(5,1) = 1 − 3/5 = 0.4.
        assert!(close(pass_at_k(5, 2, 1).unwrap(), 0.4));
        // n=5, c=2, k=2: 1 − C(3,2)/C(5,2) = 1 − 3/10 = 0.7.
        assert!(close(pass_at_k(5, 2, 2).unwrap(), 0.7));
        // n=4, c=1, k=3: 1 − C(3,3)/C(4,3) = 1 − 1/4 = 0.75.
        assert!(close(pass_at_k(4, 1, 3).unwrap(), 0.75));
        // n−c < k: every draw of k has a resolved one.
        assert!(close(pass_at_k(3, 2, 2).unwrap(), 1.0));
        assert!(close(pass_at_k(3, 0, 2).unwrap(), 0.0));
        assert_eq!(pass_at_k(2, 1, 3), None);
        // Mean over cases: (0.4 + 1.0 + 0.0) / 3 at k=1 for (5,2), (1,1), (2,0).
        assert!(close(
            mean_pass_at_k(&[(5, 2), (1, 1), (2, 0)], 1).unwrap(),
            1.4 / 3.0
        ));
        // At k=2 the one-try case is left out: (0.7 + 0.0) / 2.
        assert!(close(
            mean_pass_at_k(&[(5, 2), (1, 1), (2, 0)], 2).unwrap(),
            0.35
        ));
        assert_eq!(mean_pass_at_k(&[], 1), None);
    }

    #[test]
    fn wilson_interval_against_hand_computed_values() {
        // 8 of 10: centre (0.8 + 0.19207)/1.38415 = 0.71674, half 0.22658.
        let (lo, hi) = wilson_95(8, 10).unwrap();
        assert!((lo - 0.4902).abs() < 1e-3, "{lo}");
        assert!((hi - 0.9433).abs() < 1e-3, "{hi}");
        let (lo, hi) = wilson_95(0, 4).unwrap();
        assert!(close(lo, 0.0));
        assert!((hi - 0.4899).abs() < 1e-3, "{hi}");
        assert_eq!(wilson_95(0, 0), None);
    }
}
