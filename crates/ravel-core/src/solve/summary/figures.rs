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
use super::{Problem, Request, level_of};
use crate::model::{Covariance, Inference, Summary};
use crate::solve::inference::Design;
use faer::{Mat, Side};
use std::sync::Arc;

/// The largest eigenvalue of a symmetric positive semi-definite matrix (None when it is not
/// positive and finite).
fn largest_eigenvalue(a: &Mat<f64>) -> Option<f64> {
    let ev = a.self_adjoint_eigenvalues(Side::Lower).ok()?;
    ev.last().copied().filter(|v| v.is_finite() && *v > 0.0)
}

/// The condition number sigma_max / sigma_min of the raw design X (with its constant when the
/// model has an intercept: statsmodels' `condition_number` of the exog), from the support's
/// Q and Q^-1: with mu the means, C = D Q D the covariance in the data's units (D the
/// scales) and T = [[1, mu^T], [0, I]], X^T X / n = M = T^T diag(1, C) T, so M^-1 = T^-1
/// diag(1, C^-1) T^-T = [[1 + mu^T C^-1 mu, -(C^-1 mu)^T], [-C^-1 mu, C^-1]], both formed
/// in O(s^2). cond(X) = sqrt(lambda_max(M) lambda_max(M^-1)): largest eigenvalues keep their
/// digits, and M^-1 carries the rounding of C^-1 (of the centred design's conditioning, not
/// of the raw design's, whose ill-conditioning from the means the exact T takes), where
/// lambda_min(M) would lose eps cond(X)^2. Without an intercept Q is the raw E[x x^T] and
/// M = C. Two symmetric eigenvalue problems of order s + 1.
fn condition_raw(problem: &Problem, d: &Design, mu: &[f64]) -> Option<f64> {
    let qinv = d.qinv.as_ref()?;
    let s = d.support.len();
    if s == 0 {
        return None;
    }
    let sc: Vec<f64> = d.support.iter().map(|&a| problem.scale[a]).collect();
    let c = |i: usize, j: usize| d.q[(i, j)] * sc[i] * sc[j];
    let cinv = |i: usize, j: usize| qinv[(i, j)] / (sc[i] * sc[j]);
    let (m, minv) = if problem.intercept {
        // C^-1 mu.
        let w: Vec<f64> = (0..s)
            .map(|i| (0..s).map(|j| cinv(i, j) * mu[j]).sum())
            .collect();
        let top = 1.0 + mu.iter().zip(&w).map(|(a, b)| a * b).sum::<f64>();
        let m = Mat::from_fn(s + 1, s + 1, |i, j| match (i, j) {
            (0, 0) => 1.0,
            (0, j) => mu[j - 1],
            (i, 0) => mu[i - 1],
            (i, j) => c(i - 1, j - 1) + mu[i - 1] * mu[j - 1],
        });
        let minv = Mat::from_fn(s + 1, s + 1, |i, j| match (i, j) {
            (0, 0) => top,
            (0, j) => -w[j - 1],
            (i, 0) => -w[i - 1],
            (i, j) => cinv(i - 1, j - 1),
        });
        (m, minv)
    } else {
        (Mat::from_fn(s, s, c), Mat::from_fn(s, s, cinv))
    };
    Some((largest_eigenvalue(&m)? * largest_eigenvalue(&minv)?).sqrt())
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
    let mean = problem.mean_x();
    let mu: Vec<f64> = d.orig.iter().map(|&j| mean[j]).collect();
    let condition_raw = condition_raw(problem, d, &mu);
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
