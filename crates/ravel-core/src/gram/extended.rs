//! The Gram problem in double-double (`Extended`), for statistics that keep their moments so
//! (p <= 16, stats/extended.rs): the least-squares solve (`solve`), the residual mean square
//! of any coefficients (`mse`) and the inverse the standard errors take, all from the centred
//! moments to about 32 digits. In doubles the normal equations lose twice the digits a QR of
//! the rows loses (cond(Q) = cond(X)^2) and RSS = Syy - b'Sxy cancels when R^2 is near 1; here
//! the same algebra keeps about 32 - log10(cond(Q)) digits, more than the doubles the answer is
//! rounded to whenever cond(Q) < 1e16 (NIST's Filip has about 1e18 on the correlation scale:
//! still about 14 digits of its own arithmetic).
//!
//! The solve is scale-free: the system is scaled to unit diagonal (the correlation scale)
//! before it is factored, so its conditioning test reads the same with and without
//! standardized columns.

use super::{LowMoments, Moments};
use crate::dd::Dd;

/// Below this reciprocal condition number (1-norm, on the correlation scale) a system counts
/// as singular in double-double: the rounding of moments accumulated over many rows is some
/// n eps^2 (eps^2 = 1.2e-32) of the diagonal, so an exactly dependent design (duplicated
/// columns, n <= p) sits near 1e-30 and below; a design whose dependency is only near (Filip:
/// 1e-18 to 1e-20) is solved to 1e-24 / 1e-32 = 1e8 times better than that bound allows.
pub const EXT_RCOND_TOL: f64 = 1e-24;

/// 1/2 b^T q b - c^T b + yy/2 in double-double, over the active columns in solver units (the
/// same problem as the `Gram` beside it in `Problem`).
#[derive(Debug, Clone)]
pub struct Extended {
    m: usize,
    /// Full symmetric m x m, column-major.
    q: Vec<Dd>,
    c: Vec<Dd>,
    yy: Dd,
    /// E[x] of the active columns (original units) and E[y]: the intercept and its variance
    /// are taken from them (`intercept`, `mean_form`).
    means: Vec<Dd>,
    mean_y: Dd,
}

/// A least-squares solve in double-double.
#[derive(Debug, Clone)]
pub struct ExtSolution {
    /// The solution (length m, zero off the support), rounded to doubles.
    pub b: Vec<f64>,
    /// The reciprocal condition number (1-norm) of the system on the correlation scale.
    pub rcond: f64,
    /// The inverse of (Q_SS + ridge I), s x s column-major in support order.
    pub inverse: Vec<Dd>,
}

impl Extended {
    /// The problem of the moments (with their low parts `low`) over the columns `active`,
    /// divided by `scale`; with `origin` the problem without an intercept, on the raw moments
    /// E[x x^T], E[x y], E[y^2] (`Problem::through_origin`; its intercept is then 0).
    pub(super) fn of(
        stats: &impl Moments,
        low: LowMoments<'_>,
        active: &[usize],
        scale: &[f64],
        origin: bool,
    ) -> Extended {
        let p = stats.p();
        let dx = |j: usize| Dd {
            hi: stats.dx()[j],
            lo: low.dx[j],
        };
        let dy = Dd {
            hi: stats.dy(),
            lo: low.dy,
        };
        let mean = |j: usize| Dd::from(stats.shift_x()[j]) + dx(j);
        let mean_y = Dd::from(stats.shift_y()) + dy;
        // The centred moment, plus the product of the means on the raw (origin) scale.
        let cov = |i: usize, j: usize| {
            let (r, c) = if i >= j { (i, j) } else { (j, i) };
            let centred = Dd {
                hi: stats.dxx_at(r, c),
                lo: low.dxx[r + c * p],
            } - dx(i) * dx(j);
            if origin {
                centred + mean(i) * mean(j)
            } else {
                centred
            }
        };
        let m = active.len();
        let mut q = vec![Dd::ZERO; m * m];
        for (b, &jb) in active.iter().enumerate() {
            for (a, &ja) in active.iter().enumerate().skip(b) {
                let v = cov(ja, jb) / Dd::from(scale[a]) / Dd::from(scale[b]);
                q[a + b * m] = v;
                q[b + a * m] = v;
            }
        }
        let c = active
            .iter()
            .zip(scale)
            .map(|(&j, &s)| {
                let xy = Dd {
                    hi: stats.dxy()[j],
                    lo: low.dxy[j],
                };
                let centred = xy - dx(j) * dy;
                let v = if origin {
                    centred + mean(j) * mean_y
                } else {
                    centred
                };
                v / Dd::from(s)
            })
            .collect();
        let mut yy = Dd {
            hi: stats.dyy(),
            lo: low.dyy,
        } - dy * dy;
        if yy.hi < 0.0 {
            yy = Dd::ZERO;
        }
        if origin {
            yy = yy + mean_y * mean_y;
        }
        Extended {
            m,
            q,
            c,
            yy,
            // Without an intercept nothing moves it: the intercept is 0.
            means: active
                .iter()
                .map(|&j| if origin { Dd::ZERO } else { mean(j) })
                .collect(),
            mean_y: if origin { Dd::ZERO } else { mean_y },
        }
    }

    /// The problem over the columns `keep` (indices into this one's), in their order.
    pub fn restrict(&self, keep: &[usize]) -> Extended {
        let k = keep.len();
        let mut q = vec![Dd::ZERO; k * k];
        for (j, &b) in keep.iter().enumerate() {
            for (i, &a) in keep.iter().enumerate() {
                q[i + j * k] = self.q[a + b * self.m];
            }
        }
        Extended {
            m: k,
            q,
            c: keep.iter().map(|&a| self.c[a]).collect(),
            yy: self.yy,
            means: keep.iter().map(|&a| self.means[a]).collect(),
            mean_y: self.mean_y,
        }
    }

    /// The intercept `E[y] - sum_a beta_a E[x_a]` of coefficients `beta_active` in original
    /// units (one per active column), without the cancellation of large means.
    pub fn intercept(&self, beta_active: &[f64]) -> f64 {
        let fitted = beta_active
            .iter()
            .zip(&self.means)
            .fold(Dd::ZERO, |t, (&b, &m)| t + m.mul_f64(b));
        (self.mean_y - fitted).to_f64()
    }

    /// `u^T inverse u` with `u_a = E[x_a] / scale_a` over `support` (`inverse` from `solve` on
    /// it): the part of Var(b0) n / sigma^2 the slopes bring, whose terms cancel when the
    /// columns are nearly dependent.
    pub fn mean_form(&self, support: &[usize], inverse: &[Dd], scale: &[f64]) -> f64 {
        let s = support.len();
        let u: Vec<Dd> = support
            .iter()
            .map(|&a| self.means[a] / Dd::from(scale[a]))
            .collect();
        let mut total = Dd::ZERO;
        for j in 0..s {
            let mut col = Dd::ZERO;
            for i in 0..s {
                col = col + inverse[i + j * s] * u[i];
            }
            total = total + col * u[j];
        }
        total.to_f64()
    }

    /// Var(y), rounded.
    pub fn var_y(&self) -> f64 {
        self.yy.to_f64()
    }

    /// The residual mean square of coefficients `b` (solver units, length m):
    /// yy - 2 c^T b + b^T q b, without the cancellation a double suffers when R^2 is near 1;
    /// clamped at 0.
    pub fn mse(&self, b: &[f64]) -> f64 {
        let support: Vec<usize> = (0..self.m).filter(|&j| b[j] != 0.0).collect();
        let mut total = self.yy;
        for &j in &support {
            let bj = Dd::from(b[j]);
            let mut qb = Dd::ZERO;
            for &k in &support {
                qb = qb + self.q[k + j * self.m].mul_f64(b[k]);
            }
            total = total + bj * qb - (self.c[j] * bj).mul_f64(2.0);
        }
        total.to_f64().max(0.0)
    }

    /// Solves (Q_SS + ridge I) b_S = c_S: scaled to unit diagonal, Cholesky, the inverse of
    /// the scaled system and its 1-norm condition number, all in double-double (s <= 16:
    /// a few thousand operations). `Err(rcond)` when the system is singular at this precision
    /// (`EXT_RCOND_TOL`) or does not factor (rcond 0).
    pub fn solve(&self, support: &[usize], ridge: f64) -> Result<ExtSolution, f64> {
        let s = support.len();
        let mut b = vec![0.0; self.m];
        if s == 0 {
            return Ok(ExtSolution {
                b,
                rcond: 1.0,
                inverse: Vec::new(),
            });
        }
        let at = |i: usize, j: usize| {
            let v = self.q[support[i] + support[j] * self.m];
            if i == j { v + Dd::from(ridge) } else { v }
        };
        let mut d = Vec::with_capacity(s);
        for i in 0..s {
            let a = at(i, i);
            if !(a.hi > 0.0 && a.is_finite()) {
                return Err(0.0);
            }
            d.push(a.sqrt());
        }
        // The scaled system A' = D^-1 A D^-1 (unit diagonal), column-major.
        let mut a = vec![Dd::ZERO; s * s];
        for j in 0..s {
            for i in 0..s {
                a[i + j * s] = if i == j {
                    Dd::ONE
                } else {
                    at(i, j) / d[i] / d[j]
                };
            }
        }
        // Cholesky A' = L L^T (L lower, column-major).
        let mut l = vec![Dd::ZERO; s * s];
        for j in 0..s {
            let mut djj = a[j + j * s];
            for k in 0..j {
                djj = djj - l[j + k * s] * l[j + k * s];
            }
            if djj.hi.is_nan() || djj.hi <= 0.0 {
                return Err(0.0);
            }
            let ljj = djj.sqrt();
            l[j + j * s] = ljj;
            for i in j + 1..s {
                let mut v = a[i + j * s];
                for k in 0..j {
                    v = v - l[i + k * s] * l[j + k * s];
                }
                l[i + j * s] = v / ljj;
            }
        }
        // X = A'^-1, column by column: L y = e_k, then L^T x = y.
        let mut x = vec![Dd::ZERO; s * s];
        for k in 0..s {
            let col = &mut x[k * s..(k + 1) * s];
            for i in 0..s {
                let mut v = if i == k { Dd::ONE } else { Dd::ZERO };
                for t in 0..i {
                    v = v - l[i + t * s] * col[t];
                }
                col[i] = v / l[i + i * s];
            }
            for i in (0..s).rev() {
                let mut v = col[i];
                for t in i + 1..s {
                    v = v - l[t + i * s] * col[t];
                }
                col[i] = v / l[i + i * s];
            }
        }
        let norm1 = |m: &[Dd]| {
            (0..s)
                .map(|j| {
                    m[j * s..(j + 1) * s]
                        .iter()
                        .map(|v| v.hi.abs())
                        .sum::<f64>()
                })
                .fold(0.0, f64::max)
        };
        let rcond = 1.0 / (norm1(&a) * norm1(&x));
        if rcond.is_nan() || rcond < EXT_RCOND_TOL {
            return Err(if rcond.is_finite() { rcond } else { 0.0 });
        }
        // b = D^-1 X D^-1 c.
        let rhs: Vec<Dd> = (0..s).map(|i| self.c[support[i]] / d[i]).collect();
        for i in 0..s {
            let mut z = Dd::ZERO;
            for k in 0..s {
                z = z + x[i + k * s] * rhs[k];
            }
            b[support[i]] = (z / d[i]).to_f64();
        }
        let mut inverse = vec![Dd::ZERO; s * s];
        for j in 0..s {
            for i in 0..s {
                inverse[i + j * s] = x[i + j * s] / d[i] / d[j];
            }
        }
        Ok(ExtSolution { b, rcond, inverse })
    }
}

#[cfg(test)]
mod tests {
    use crate::gram::Problem;
    use crate::stats::{AlphaSchedule, RunningStats};

    #[test]
    fn an_exact_polynomial_is_solved_to_the_last_digit_and_its_residual_is_zero() {
        // y = 1 + x + ... + x^5 on x = 0..20 (NIST's Wampler1): exact in doubles.
        let mut x = Vec::new();
        let mut y = Vec::new();
        for k in (0..=20).rev() {
            let v = k as f64;
            let row: Vec<f64> = (1..=5).map(|e| v.powi(e)).collect();
            y.push(1.0 + row.iter().sum::<f64>());
            x.extend(row);
        }
        let mut s = RunningStats::new(5, AlphaSchedule::Plain);
        s.update_batch(&x, &y).unwrap();
        for standardize in [true, false] {
            let problem = Problem::regression(&s, standardize).unwrap();
            let ext = problem.extended.as_ref().expect("double-double problem");
            let sol = ext.solve(&[0, 1, 2, 3, 4], 0.0).unwrap();
            let (beta, b0) = problem.to_original(&sol.b);
            assert_eq!(b0, ext.intercept(&beta));
            for (j, b) in beta.iter().enumerate() {
                assert!((b - 1.0).abs() < 1e-13, "b{j} = {b} ({standardize})");
            }
            assert!((b0 - 1.0).abs() < 1e-9, "b0 = {b0}");
            assert!(ext.mse(&sol.b) < 1e-20 * ext.var_y(), "{}", ext.mse(&sol.b));
        }
    }
}
