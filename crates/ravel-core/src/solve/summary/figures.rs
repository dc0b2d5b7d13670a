//! The coefficients' confidence intervals and VIFs and the model's figures (adjusted R^2, the
//! regression's F test, the Gaussian log-likelihood, statsmodels' AIC / BIC, the condition
//! numbers), from the Gram of the model's support. With nobs the sample size (Kish's effective
//! one under forgetting), ssr = nobs train_mse and the centred tss = nobs Var(y):
//! R^2_adj = 1 - (nobs - 1) / df_resid (1 - R^2), F = ((tss - ssr) / df_model) / (ssr /
//! df_resid), llf = -nobs / 2 (ln 2 pi + ln(ssr / nobs) + 1), AIC = -2 llf + 2 (df_model + 1),
//! BIC = -2 llf + ln(nobs) (df_model + 1) (statsmodels' `RegressionResults`). VIF_j = Q_jj
//! (Q^-1)_jj over the support, 1 / (1 - R_j^2) of column j on the others and a constant
//! (statsmodels' `variance_inflation_factor` on a design with its constant).

use super::dist::t_quantile;
use super::{Estimator, Fit, Problem, Request, level_of};
use crate::model::{Covariance, Inference, Summary};
use faer::linalg::solvers::Solve;
use faer::{Mat, Side};
use std::sync::Arc;

/// The model's support and the matrices of its covariance, in solver units.
pub(super) struct Design {
    /// Support, as indices into the problem's active columns (ascending).
    pub support: Vec<usize>,
    /// The same as feature indices.
    pub orig: Vec<usize>,
    /// Ridge's lambda (0 for least squares).
    pub ridge: f64,
    /// Q_SS.
    pub q: Mat<f64>,
    /// n Cov(b_S) / sigma^2: Q_SS^-1, or A^-1 Q_SS A^-1 for ridge.
    pub cov_unit: Mat<f64>,
    /// Q_SS^-1 when it exists (the VIFs).
    pub qinv: Option<Mat<f64>>,
    /// The model's degrees of freedom: s, or tr(Q_SS A^-1) for ridge.
    pub df_model: f64,
}

fn inverse(a: &Mat<f64>) -> Option<Mat<f64>> {
    let s = a.nrows();
    if s == 0 {
        return Some(Mat::zeros(0, 0));
    }
    let llt = a.llt(Side::Lower).ok()?;
    let inv = llt.solve(Mat::<f64>::identity(s, s));
    (0..s)
        .all(|i| inv[(i, i)].is_finite() && inv[(i, i)] > 0.0)
        .then_some(inv)
}

impl Design {
    /// The support of `fit` as `solve::inference` takes it: every column for OLS and ridge,
    /// the nonzeros otherwise.
    pub(super) fn of(problem: &Problem, req: &Request, fit: &Fit) -> Result<Design, String> {
        let g = &problem.gram;
        let (support, ridge): (Vec<usize>, f64) = match &req.estimator {
            Estimator::Ols(_) => ((0..g.m).collect(), 0.0),
            Estimator::Ridge(r) => ((0..g.m).collect(), r.lambda),
            _ => ((0..g.m).filter(|&j| fit.b[j] != 0.0).collect(), 0.0),
        };
        let s = support.len();
        let q = Mat::from_fn(s, s, |i, j| g.at(support[i], support[j]));
        let qinv = inverse(&q);
        let (cov_unit, df_model) = if ridge == 0.0 {
            let inv = qinv
                .clone()
                .ok_or("the least-squares system does not factor")?;
            (inv, s as f64)
        } else {
            let a = Mat::from_fn(s, s, |i, j| q[(i, j)] + if i == j { ridge } else { 0.0 });
            let ainv = inverse(&a).ok_or("the ridge system does not factor")?;
            let qa = &q * &ainv;
            let df = (0..s).map(|i| qa[(i, i)]).sum::<f64>();
            (&ainv * &qa, df)
        };
        Ok(Design {
            orig: support.iter().map(|&a| problem.active[a]).collect(),
            support,
            ridge,
            q,
            cov_unit,
            qinv,
            df_model,
        })
    }

    /// Cov(beta_S) in the data's units, s x s column-major, for residual variance sigma2 and
    /// sample size n.
    pub(super) fn covariance(&self, problem: &Problem, sigma2: f64, n: f64) -> Vec<f64> {
        let s = self.support.len();
        let mut cov = vec![0.0; s * s];
        for j in 0..s {
            for i in 0..s {
                cov[i + j * s] = sigma2 / n * self.cov_unit[(i, j)]
                    / (problem.scale[self.support[i]] * problem.scale[self.support[j]]);
            }
        }
        cov
    }
}

/// The condition number sigma_max / sigma_min of a design X whose Gram is X^T X = R^T R (R
/// upper triangular): ||R|| ||R^-1||, each the square root of the largest eigenvalue of R^T R
/// and of R^-1 R^-T. Largest eigenvalues keep their digits, and R^-1 (a triangular solve)
/// carries relative rounding about eps cond(R), as an SVD of the rows would; the smallest
/// eigenvalue of X^T X itself would lose eps cond^2. Two symmetric eigenvalue problems and a
/// triangular inverse: at p = 1000 about a fifth of an SVD's time.
fn condition(r: &Mat<f64>) -> Option<f64> {
    let s = r.nrows();
    if s == 0 {
        return None;
    }
    let largest = |a: &Mat<f64>| -> Option<f64> {
        let ev = a.self_adjoint_eigenvalues(Side::Lower).ok()?;
        ev.last().copied().filter(|v| v.is_finite() && *v > 0.0)
    };
    let top = largest(&(r.transpose() * r))?;
    let mut inv = Mat::<f64>::identity(s, s);
    faer::linalg::triangular_solve::solve_upper_triangular_in_place(
        r.as_ref(),
        inv.as_mut(),
        faer::Par::Seq,
    );
    if !(0..s).all(|i| inv[(i, i)].is_finite()) {
        return None;
    }
    let bottom = largest(&(&inv * inv.transpose()))?;
    Some((top * bottom).sqrt())
}

/// The upper factor L^T of a symmetric positive definite matrix (None when it does not
/// factor).
fn upper_factor(a: &Mat<f64>) -> Option<Mat<f64>> {
    let llt = a.llt(Side::Lower).ok()?;
    Some(llt.L().transpose().to_owned())
}

/// Fills the intervals, VIFs, the summary and the covariance into `inf`.
pub(super) fn fill(
    problem: &Problem,
    d: &Design,
    req: &Request,
    mse: f64,
    inf: &mut Inference,
) -> Result<(), String> {
    let n = problem.n_kish;
    let df_resid = inf.df_resid;
    let level = level_of(req);
    let tq = t_quantile(1.0 - (1.0 - level) / 2.0, df_resid);
    let pos = |index: usize| d.orig.binary_search(&index).ok();
    for e in inf.intercept.iter_mut().chain(inf.coefficients.iter_mut()) {
        e.ci_lower = Some(e.value - tq * e.se);
        e.ci_upper = Some(e.value + tq * e.se);
        if let (Some(i), Some(qinv)) = (e.index.and_then(pos), &d.qinv) {
            e.vif = Some(d.q[(i, i)] * qinv[(i, i)]);
        }
    }
    let g = &problem.gram;
    let ssr = n * mse;
    let tss = n * g.yy;
    // The constant's degree of freedom: 1 with an intercept.
    let k_const = (n - df_resid - d.df_model).round();
    let r2 = if tss > 0.0 { 1.0 - ssr / tss } else { 0.0 };
    let f_statistic = ((tss - ssr) / d.df_model) / (ssr / df_resid);
    let log_likelihood = -n / 2.0 * ((2.0 * std::f64::consts::PI).ln() + (ssr / n).ln() + 1.0);
    let k = d.df_model + k_const;
    // The standardized design: its Gram is the support's correlation matrix.
    let s = d.support.len();
    let corr = Mat::from_fn(s, s, |i, j| {
        d.q[(i, j)] / (d.q[(i, i)] * d.q[(j, j)]).sqrt()
    });
    // Its eigenvalue ratio: a correlation matrix's conditioning is mild enough (the Gram's
    // eps cond^2 rounding is 1e-12 at cond 100) that one eigenvalue problem does.
    let condition_std = corr
        .self_adjoint_eigenvalues(Side::Lower)
        .ok()
        .filter(|ev| !ev.is_empty() && ev[0] > 0.0)
        .map(|ev| (ev[ev.len() - 1] / ev[0]).sqrt());
    // The raw design with its constant, [1, x] = [1, x - mu] T with T = [[1, mu^T], [0, I]]:
    // X^T X / n = T^T diag(1, C) T = R^T R with R = [[1, mu^T], [0, L^T]], C = L L^T the
    // covariance in the data's units.
    let mean = problem.mean_x();
    let mu: Vec<f64> = d.orig.iter().map(|&j| mean[j]).collect();
    let sc: Vec<f64> = d.support.iter().map(|&a| problem.scale[a]).collect();
    let c = Mat::from_fn(s, s, |i, j| d.q[(i, j)] * sc[i] * sc[j]);
    let condition_raw = upper_factor(&c).and_then(|lt| {
        let r = Mat::from_fn(s + 1, s + 1, |i, j| match (i, j) {
            (0, 0) => 1.0,
            (0, j) => mu[j - 1],
            (_, 0) => 0.0,
            (i, j) => lt[(i - 1, j - 1)],
        });
        condition(&r)
    });
    inf.summary = Some(Summary {
        level,
        nobs: n,
        nobs_rule: if n < problem.n as f64 {
            format!(
                "Kish's effective sample size (sum w)^2 / sum w^2 of the forgetting schedule's \
                 row weights, {n:.1} of {} rows",
                problem.n
            )
        } else {
            "the rows".into()
        },
        df_model: d.df_model,
        df_resid,
        ssr,
        r2,
        r2_adj: 1.0 - (n - k_const) / df_resid * (1.0 - r2),
        f_statistic,
        f_p_value: super::dist::f_sf(f_statistic, d.df_model, df_resid),
        log_likelihood,
        likelihood_aic: -2.0 * log_likelihood + 2.0 * k,
        likelihood_bic: -2.0 * log_likelihood + n.ln() * k,
        condition_number: condition_std,
        condition_number_raw: condition_raw,
    });
    if d.ridge > 0.0 {
        inf.notes.push(
            "ridge: the F test, log-likelihood, AIC and BIC take df_model = tr(Q A^-1) and the \
             ridge's residuals; they are not a least-squares fit's"
                .into(),
        );
    }
    inf.covariance = Some(Arc::new(Covariance {
        index: d.orig.clone(),
        mean: mu,
        cov: d.covariance(problem, inf.sigma2, n),
        sigma2: inf.sigma2,
        n,
        df_resid,
    }));
    Ok(())
}
