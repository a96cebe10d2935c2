//! Order statistics of benchmark samples.

/// The median of `v` (the mean of the two middle values for an even count; NaN for none);
/// sorts `v`.
pub fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[m],
        _ => (v[m - 1] + v[m]) / 2.0,
    }
}

/// The value at fraction `p` (0 to 1) of `v` in order, the nearest rank (NaN for none); sorts
/// `v`.
pub fn percentile(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v.get(i).copied().unwrap_or(f64::NAN)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_and_percentiles() {
        assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&mut [4.0, 1.0, 3.0, 2.0]), 2.5);
        assert!(median(&mut []).is_nan());
        let mut v: Vec<f64> = (0..101).rev().map(f64::from).collect();
        assert_eq!(percentile(&mut v, 0.99), 99.0);
        assert_eq!(percentile(&mut v, 0.5), 50.0);
        assert!(percentile(&mut [], 0.5).is_nan());
    }
}
