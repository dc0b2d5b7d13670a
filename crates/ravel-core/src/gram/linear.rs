//! Least squares on a subset of columns from the Gram form: OLS, ridge, and the OLS refit every
//! sparse method offers. Cholesky (faer) on Q_SS + ridge I, with an honest singularity test: a
//! system whose factor has a pivot within rounding of 0 (p >= n, duplicated or collinear
//! columns) is solved with a data-scaled ridge instead, and says so.
//!
//! Why the test: at n = p the centred covariance has rank n - 1, yet Cholesky in floating point
//! usually "succeeds" on it, with a last pivot of rounding size (1e-14 of the diagonal) whose
//! inverse blows the solution up along the null direction. OLSth then ranks noise: paper 003's
//! Table 2 design at n = p = 1000 detected 10-24% of the true features (the paper: 94.5%).
//! Each pivot d_k = L_kk^2 of the factor is at least the smallest eigenvalue of the matrix,
//! and so is 1 / ||A^-1 v|| for any unit v (inverse iteration with the factor tightens it to
//! the smallest eigenvalue whatever the column order; the pivots alone can miss a dependency,
//! see `smallest_eigenvalue_bound`). Either below `RCOND_TOL` on the correlation scale (below)
//! proves a condition number above 1 / `RCOND_TOL`: the solution is then meaningless in its
//! weakest direction, and
//! the ridge `SINGULAR_RIDGE` times the mean diagonal (1e-3 on standardized columns, the ridge
//! the paper's remedy uses) picks the well-determined part (measured: 100% detection there).
//!
//! The test is scale-free: the system is scaled to unit diagonal (the correlation scale) before
//! it is factored, so a column in cents and one in millions do not look "singular" to it
//! without `standardize` (issue 58: NIST's Longley, Pontius and Wampler were refused so, with
//! 0 correct digits). Its pivots and its inverse-iteration bound then measure dependence only.

use super::Gram;
use faer::linalg::solvers::Solve;
use faer::{Mat, Side};

/// A pivot below this fraction of the largest diagonal entry counts as singular. Rounding puts
/// the pivot of an exactly singular direction near m eps (m = 1000: 2e-13) of the diagonal;
/// a full-rank sample covariance at n = p + 1 (the smallest case that is not singular) has its
/// smallest eigenvalue near 1 / (4 n^2) of the diagonal (1e-7 at n = 1000). 1e-10 separates both.
pub const RCOND_TOL: f64 = 1e-10;
/// The ridge, relative to the mean diagonal, put on a singular system.
pub const SINGULAR_RIDGE: f64 = 1e-3;

/// A least-squares solve: the dense solution (length m, zero off the support), the ridge that
/// was added to the one asked for (0 when the system was well-conditioned as asked; INFINITY
/// when nothing could be solved, b is then 0), and the conditioning test's result.
pub struct LsSolution {
    /// The solution (length m).
    pub b: Vec<f64>,
    /// The ridge added (see the type).
    pub jitter: f64,
    /// An upper bound on the smallest eigenvalue of the system as asked (the smallest Cholesky
    /// pivot, or inverse iteration's bound when lower) over its largest diagonal entry (at least
    /// the reciprocal condition number; 0 when it did not factor). Below `RCOND_TOL` the
    /// system counts as singular and `jitter` holds the ridge that was added.
    pub rcond: f64,
    /// When the system counts as singular: the columns (Gram indices) that carry the weakest
    /// direction (inverse iteration's vector, entries of at least a tenth of its largest), the
    /// largest first; empty otherwise.
    pub weakest: Vec<usize>,
}

/// Solves (Q_SS + ridge I) b_S = c_S. When that system is singular or nearly so (a Cholesky
/// pivot below `RCOND_TOL` of the largest diagonal entry, or no factor at all), solves it with
/// `SINGULAR_RIDGE` x the mean diagonal added (10 and 100 times more if even that fails).
pub fn solve_subset(g: &Gram, support: &[usize], ridge: f64) -> LsSolution {
    let s = support.len();
    let mut b = vec![0.0; g.m];
    if s == 0 {
        return LsSolution {
            b,
            jitter: 0.0,
            rcond: 1.0,
            weakest: Vec::new(),
        };
    }
    let mean_diag = support.iter().map(|&j| g.at(j, j)).sum::<f64>() / s as f64;
    let rhs = Mat::from_fn(s, 1, |i, _| g.c[support[i]]);
    // (solution, rcond, weakest direction) of the system A with `extra` on its diagonal. The
    // conditioning is read on the correlation scale D^-1 A D^-1 (D = sqrt(diag A)), from the
    // factor of A itself: its pivots there are L_kk^2 / A_kk, and inverse iteration solves
    // with D A^-1 D; the solution is A's, as before the test was scaled.
    let solve = |extra: f64| -> Option<(Vec<f64>, f64, Vec<f64>)> {
        let a = Mat::from_fn(s, s, |i, j| {
            g.at(support[i], support[j]) + if i == j { ridge + extra } else { 0.0 }
        });
        let d: Vec<f64> = (0..s)
            .map(|i| {
                let v = a[(i, i)];
                if v > 0.0 && v.is_finite() {
                    v.sqrt()
                } else {
                    0.0
                }
            })
            .collect();
        if d.contains(&0.0) {
            return None;
        }
        let llt = a.llt(Side::Lower).ok()?;
        let l = llt.L();
        let min_pivot = (0..s)
            .map(|i| l[(i, i)] * l[(i, i)] / a[(i, i)])
            .fold(f64::INFINITY, f64::min);
        let (bound, weak) = smallest_eigenvalue_bound(&llt, &d, RCOND_TOL);
        let rcond = min_pivot.min(bound);
        let x = llt.solve(&rhs);
        (0..s)
            .all(|i| x[(i, 0)].is_finite())
            .then(|| ((0..s).map(|i| x[(i, 0)]).collect(), rcond, weak))
    };
    let (rcond, weak) = match solve(0.0) {
        Some((x, rcond, _)) if rcond >= RCOND_TOL => {
            for (i, &j) in support.iter().enumerate() {
                b[j] = x[i];
            }
            return LsSolution {
                b,
                jitter: 0.0,
                rcond,
                weakest: Vec::new(),
            };
        }
        Some((_, rcond, weak)) => (rcond, weak),
        None => (0.0, Vec::new()),
    };
    let largest = weak.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let mut weakest: Vec<usize> = (0..weak.len())
        .filter(|&i| largest > 0.0 && weak[i].abs() >= 0.1 * largest)
        .collect();
    weakest.sort_by(|&a, &b| weak[b].abs().total_cmp(&weak[a].abs()));
    let weakest: Vec<usize> = weakest.into_iter().map(|i| support[i]).collect();
    for scale in [SINGULAR_RIDGE, 1e-2, 1e-1] {
        let jitter = scale * mean_diag.max(f64::MIN_POSITIVE);
        if let Some((x, _, _)) = solve(jitter) {
            for (i, &j) in support.iter().enumerate() {
                b[j] = x[i];
            }
            return LsSolution {
                b,
                jitter,
                rcond,
                weakest,
            };
        }
    }
    // Give up on the fit rather than return garbage: the zero model is always valid.
    LsSolution {
        b,
        jitter: f64::INFINITY,
        rcond,
        weakest,
    }
}

/// An upper bound on the smallest eigenvalue of D^-1 A D^-1 for the factored A = L L^T (the
/// correlation scale when d = sqrt(diag A)), by inverse
/// iteration with the factor (two triangular solves a step, O(s^2), against the O(s^3)
/// factorization): ||A^-1 v|| <= 1 / lambda_min for a unit v, so 1 / ||A^-1 v|| is at least
/// lambda_min, and it falls towards it as v turns to the weakest direction. The Cholesky
/// pivots bound lambda_min from above too, but only through the leading block where a
/// near-dependency closes: when its last column carries a small weight w of the null vector
/// that pivot is about lambda_min / w^2, so an exactly singular system can show pivots of 1e-8
/// (tests below); this bound does not depend on the column order. Stops early once it is
/// below `enough` (already singular) or moves by less than 1%. Also returns the last
/// iterate, the direction of the weakest eigenvector the bound comes from (empty when the
/// iteration broke down).
fn smallest_eigenvalue_bound(
    llt: &faer::linalg::solvers::Llt<f64>,
    d: &[f64],
    enough: f64,
) -> (f64, Vec<f64>) {
    let s = d.len();
    // A start with a component along every direction: no fixed pattern of signs a data set
    // could be orthogonal to by construction.
    let mut v = Mat::from_fn(s, 1, |i, _| {
        ((i as f64 + 1.0) * 0.618_033_988_749_895).fract() - 0.5
    });
    let mut estimate = f64::INFINITY;
    for _ in 0..10 {
        let norm = (0..s).map(|i| v[(i, 0)] * v[(i, 0)]).sum::<f64>().sqrt();
        if !(norm > 0.0 && norm.is_finite()) {
            return (0.0, Vec::new());
        }
        // w = (D^-1 A D^-1)^-1 v = D A^-1 D v.
        let dv = Mat::from_fn(s, 1, |i, _| d[i] * v[(i, 0)]);
        let w = llt.solve(&dv);
        let w = Mat::from_fn(s, 1, |i, _| d[i] * w[(i, 0)]);
        let wnorm = (0..s).map(|i| w[(i, 0)] * w[(i, 0)]).sum::<f64>().sqrt();
        if !wnorm.is_finite() {
            return (0.0, Vec::new());
        }
        let next = norm / wnorm;
        let settled = next > 0.99 * estimate;
        estimate = estimate.min(next);
        v = w;
        if estimate < enough || settled {
            break;
        }
    }
    (estimate, (0..s).map(|i| v[(i, 0)]).collect())
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Unit-diagonal Gram of columns a, b (correlation 1 - delta) and c = (b - a) / |b - a|:
    /// rank 2 for every delta, null vector (1, -1, sqrt(2 delta)).
    fn dependent(delta: f64) -> Gram {
        let h = (delta / 2.0).sqrt();
        #[rustfmt::skip]
        let q = vec![
            1.0, 1.0 - delta, -h,
            1.0 - delta, 1.0, h,
            -h, h, 1.0,
        ];
        Gram {
            m: 3,
            q,
            c: vec![1.0, 0.5, 0.25],
            yy: 2.0,
        }
    }

    /// The dependency closes at c, which carries a weight of 1e-4 of the null vector: the
    /// pivots in this column order are 1, 2e-8 and about 1e-8 (rounding / 1e-8), all above
    /// `RCOND_TOL`, yet the system is singular. Inverse iteration finds it whatever the order.
    #[test]
    fn a_singular_system_with_no_small_pivot_is_found() {
        let g = dependent(1e-8);
        let llt = Mat::from_fn(3, 3, |i, j| g.at(i, j))
            .llt(Side::Lower)
            .expect("it factors");
        let l = llt.L();
        let min_pivot = (0..3).map(|i| l[(i, i)] * l[(i, i)]).fold(1.0, f64::min);
        assert!(
            min_pivot > RCOND_TOL,
            "pivots alone would catch it: {min_pivot:e}"
        );
        let sol = solve_subset(&g, &[0, 1, 2], 0.0);
        assert!(sol.rcond < RCOND_TOL, "rcond {:e}", sol.rcond);
        assert!(sol.jitter > 0.0 && sol.jitter.is_finite());
        // The solution of (Q + jitter I) b = c: its residual is rounding, and |b| is at most
        // |c| / jitter (no 1e8-sized coefficients along the null direction).
        for i in 0..3 {
            let r: f64 =
                (0..3).map(|j| g.at(i, j) * sol.b[j]).sum::<f64>() + sol.jitter * sol.b[i] - g.c[i];
            assert!(r.abs() < 1e-10, "residual {r:e}");
        }
        let norm = |v: &[f64]| v.iter().map(|x| x * x).sum::<f64>().sqrt();
        assert!(
            norm(&sol.b) <= norm(&g.c) / sol.jitter * 1.000001,
            "{:?}",
            sol.b
        );
        for order in [[2, 0, 1], [1, 2, 0]] {
            assert!(solve_subset(&g, &order, 0.0).rcond < RCOND_TOL, "{order:?}");
        }
    }

    /// Well-conditioned systems are solved as asked: no ridge, the exact solution, and an
    /// rcond at the smallest eigenvalue over the largest diagonal entry (eigenvalues 0.5 and 1.5
    /// of [[1, 0.5], [0.5, 1]]: 0.5).
    #[test]
    fn a_well_conditioned_system_is_solved_as_asked() {
        let g = Gram {
            m: 2,
            q: vec![1.0, 0.5, 0.5, 1.0],
            c: vec![1.0, 0.0],
            yy: 2.0,
        };
        let sol = solve_subset(&g, &[0, 1], 0.0);
        assert_eq!(sol.jitter, 0.0);
        let want = [4.0 / 3.0, -2.0 / 3.0];
        for (b, w) in sol.b.iter().zip(want) {
            assert!((b - w).abs() < 1e-14, "{:?}", sol.b);
        }
        assert!((sol.rcond - 0.5).abs() < 0.01, "rcond {}", sol.rcond);
    }

    /// The test reads the correlation scale: columns in units 1e12 apart (correlation 0.5, as
    /// above) are as well-conditioned as the unit ones, not "singular" because the largest
    /// diagonal entry dwarfs the other (issue 58: `--no-standardize` on NIST's Longley).
    #[test]
    fn the_conditioning_test_does_not_see_column_units() {
        let (s0, s1) = (1e-4, 1e8);
        let g = Gram {
            m: 2,
            q: vec![s0 * s0, 0.5 * s0 * s1, 0.5 * s0 * s1, s1 * s1],
            c: vec![s0, 0.0],
            yy: 2.0,
        };
        let sol = solve_subset(&g, &[0, 1], 0.0);
        assert_eq!(sol.jitter, 0.0);
        assert!((sol.rcond - 0.5).abs() < 0.01, "rcond {}", sol.rcond);
        let want = [4.0 / 3.0 / s0, -2.0 / 3.0 / s1];
        for (b, w) in sol.b.iter().zip(want) {
            assert!((b - w).abs() < 1e-13 * w.abs(), "{:?}", sol.b);
        }
    }
}
