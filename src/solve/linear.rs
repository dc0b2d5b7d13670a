//! Least squares on a subset of columns from the Gram form: OLS, ridge, and the OLS refit every
//! sparse method offers. Cholesky (faer) on Q_SS + ridge I; a singular Q_SS (p > n, duplicated
//! or collinear columns) gets the smallest jitter that makes it factor, and says so.

use super::problem::Gram;
use faer::linalg::solvers::Solve;
use faer::{Mat, Side};

/// A least-squares solve: the dense solution (length m, zero off the support) and the ridge
/// that was actually added (0 when the system factored as asked).
pub struct LsSolution {
    pub b: Vec<f64>,
    pub jitter: f64,
}

/// Solves (Q_SS + ridge I) b_S = c_S. Falls back to an added jitter 1e-12..1e-2 times the mean
/// diagonal when the matrix is not positive definite.
pub fn solve_subset(g: &Gram, support: &[usize], ridge: f64) -> LsSolution {
    let s = support.len();
    let mut b = vec![0.0; g.m];
    if s == 0 {
        return LsSolution { b, jitter: 0.0 };
    }
    let mean_diag = support.iter().map(|&j| g.at(j, j)).sum::<f64>() / s as f64;
    let rhs = Mat::from_fn(s, 1, |i, _| g.c[support[i]]);
    let mut jitter = 0.0;
    let mut scale = 1e-12;
    loop {
        let a = Mat::from_fn(s, s, |i, j| {
            g.at(support[i], support[j]) + if i == j { ridge + jitter } else { 0.0 }
        });
        if let Ok(llt) = a.llt(Side::Lower) {
            let x = llt.solve(&rhs);
            if (0..s).all(|i| x[(i, 0)].is_finite()) {
                for (i, &j) in support.iter().enumerate() {
                    b[j] = x[(i, 0)];
                }
                return LsSolution { b, jitter };
            }
        }
        if scale > 1e-2 {
            // Give up on the fit rather than return garbage: the zero model is always valid.
            return LsSolution {
                b,
                jitter: f64::INFINITY,
            };
        }
        jitter = scale * mean_diag.max(f64::MIN_POSITIVE);
        scale *= 100.0;
    }
}

/// Largest eigenvalue of Q restricted to `support`, by power iteration (an estimate from
/// below; callers leave a margin). `start` warm-starts the iteration.
pub fn largest_eigenvalue(g: &Gram, support: &[usize], iters: usize) -> f64 {
    let s = support.len();
    if s == 0 {
        return 0.0;
    }
    let mut v = vec![1.0 / (s as f64).sqrt(); s];
    let mut w = vec![0.0; s];
    let mut lambda = 0.0;
    for _ in 0..iters {
        for (a, &ja) in support.iter().enumerate() {
            let col = g.col(ja);
            w[a] = support.iter().zip(&v).map(|(&jb, vb)| col[jb] * vb).sum();
        }
        let norm = w.iter().map(|x| x * x).sum::<f64>().sqrt();
        if norm == 0.0 {
            return 0.0;
        }
        let next = norm;
        v.iter_mut().zip(&w).for_each(|(vi, wi)| *vi = wi / norm);
        if (next - lambda).abs() <= 1e-6 * next {
            return next;
        }
        lambda = next;
    }
    lambda
}
