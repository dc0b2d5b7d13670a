//! The dense vector kernels the solvers and the feature selection share: x^T y (dot) and
//! y += a x (axpy), e.g. the partial gradient x^T g and the score update u += w x of every OS
//! step. Written with independent accumulators so that they vectorize in release builds and
//! keep the FPU busy at the test profile's opt-level 1; the summation order is fixed, so
//! results are reproducible run to run. At the bottom of the crate: it imports nothing.

/// x^T y with eight partial sums.
#[inline]
pub fn dot(x: &[f64], y: &[f64]) -> f64 {
    debug_assert_eq!(x.len(), y.len());
    let mut acc = [0.0f64; 8];
    let (cx, cy) = (x.chunks_exact(8), y.chunks_exact(8));
    let (rx, ry) = (cx.remainder(), cy.remainder());
    for (a, b) in cx.zip(cy) {
        for l in 0..8 {
            acc[l] += a[l] * b[l];
        }
    }
    let mut s = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    for (a, b) in rx.iter().zip(ry) {
        s += a * b;
    }
    s
}

/// y += a x.
#[inline]
pub fn axpy(a: f64, x: &[f64], y: &mut [f64]) {
    debug_assert_eq!(x.len(), y.len());
    for (yi, xi) in y.iter_mut().zip(x) {
        *yi += a * xi;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dot_and_axpy_match_the_naive_loops() {
        for n in [0, 1, 7, 8, 9, 31, 100] {
            let x: Vec<f64> = (0..n).map(|i| (i as f64 * 0.37).sin()).collect();
            let y: Vec<f64> = (0..n).map(|i| (i as f64 * 1.3).cos() + 0.5).collect();
            let naive: f64 = x.iter().zip(&y).map(|(a, b)| a * b).sum();
            assert!(
                (dot(&x, &y) - naive).abs() <= 1e-12 * (1.0 + naive.abs()),
                "n = {n}"
            );
            let mut z = y.clone();
            axpy(-2.5, &x, &mut z);
            for i in 0..n {
                assert_eq!(z[i], y[i] - 2.5 * x[i]);
            }
        }
    }
}
