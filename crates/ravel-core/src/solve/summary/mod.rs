//! The rest of a regression summary, beside `solve::inference`'s standard errors (issue 60):
//! every figure is an exact function of (n, means, Gram, X'y, y'y), so it comes from the
//! statistics alone.
//!
//! - `dist`: the t, F, chi-squared, normal and truncated normal distributions.
//! - `figures`: the confidence intervals and VIFs of the coefficients, and the model's adjusted
//!   R^2, F test, log-likelihood, AIC / BIC and condition numbers (statsmodels' definitions),
//!   with the covariance prediction intervals need.
//! - `intervals`: the intervals of predictions (statsmodels' `summary_frame`).
//! - `hypotheses`: the nested model's F test and the Wald test of R b = r.
//! - `selective`: inference after the Lasso's selection at a fixed lambda (Lee et al. 2016).

pub mod dist;
mod figures;
mod hypotheses;
mod intervals;
mod selective;

use super::inference::Design;
pub use hypotheses::{Hypothesis, Restriction};
pub use intervals::prediction_intervals;
pub use selective::{polyhedral_limits, selective_interval, selective_p_value};

use super::{Estimator, Fit, ParamError, Problem, Request};
use crate::model::Inference;

/// The default confidence level.
pub const DEFAULT_LEVEL: f64 = 0.95;
/// At most this many hypotheses in one request.
pub const MAX_HYPOTHESES: usize = 100;

/// The confidence level a request asks for.
pub fn level_of(req: &Request) -> f64 {
    req.level.unwrap_or(DEFAULT_LEVEL)
}

/// Checks the summary's fields of a request (with the request; p features).
pub(crate) fn check(req: &Request, p: usize) -> Result<(), ParamError> {
    if !req.inference && (req.level.is_some() || !req.hypotheses.is_empty() || req.sigma.is_some())
    {
        return Err(ParamError::Invalid(
            "level, hypotheses and sigma qualify inference: add \"inference\": true \
             (ravel fit: --inference)"
                .into(),
        ));
    }
    if let Some(l) = req.level
        && !(l.is_finite() && l > 0.0 && l < 1.0)
    {
        return Err(ParamError::Invalid(format!(
            "level must lie strictly between 0 and 1 (0.95 for 95 % intervals), got {l}"
        )));
    }
    if let Some(s) = req.sigma
        && !(s.is_finite() && s > 0.0)
    {
        return Err(ParamError::Invalid(format!(
            "sigma must be a positive number (the noise standard deviation), got {s}"
        )));
    }
    if req.sigma.is_some() && selective::applies(req).is_err() {
        return Err(ParamError::Invalid(
            "sigma is for the selective inference of a Lasso at a fixed lambda, refitted \
             (method lasso, lambda, refit: true)"
                .into(),
        ));
    }
    if req.hypotheses.len() > MAX_HYPOTHESES {
        return Err(ParamError::Invalid(format!(
            "at most {MAX_HYPOTHESES} hypotheses per request, got {}",
            req.hypotheses.len()
        )));
    }
    for h in &req.hypotheses {
        h.check(p)?;
    }
    if !req.hypotheses.is_empty() && matches!(req.estimator, Estimator::Ridge(_)) {
        return Err(ParamError::Invalid(
            "hypotheses are tested on least-squares fits (ols, refitted models), not ridge: \
             the F distribution does not hold for a shrunk estimate"
                .into(),
        ));
    }
    Ok(())
}

/// Checks that every feature the request's hypotheses name is one of the stream's (by name,
/// or a column index below p).
pub(crate) fn check_names(
    req: &Request,
    names: Option<&[String]>,
    p: usize,
) -> Result<(), ParamError> {
    for h in &req.hypotheses {
        for name in h.features() {
            let known = names.is_some_and(|n| n.iter().any(|f| f == name))
                || name.parse::<usize>().is_ok_and(|j| j < p);
            if !known {
                return Err(ParamError::Invalid(format!(
                    "hypotheses: no feature named {name:?} in the stream (a feature's name, or \
                     its column index below {p}; `intercept` in restrictions)"
                )));
            }
        }
    }
    Ok(())
}

/// The full inference of a fit: the standard errors of `solve::inference` completed with the
/// summary (intervals, VIFs, the model's figures, the hypotheses' tests, and selective
/// inference where it applies), all on one `Design` (one inverse of the support's system).
pub(crate) fn inference(
    problem: &Problem,
    req: &Request,
    fit: &Fit,
    mse: f64,
    names: Option<&[String]>,
) -> Result<Inference, String> {
    super::inference::applies(problem, fit, mse)?;
    let design = Design::of(problem, req, fit)?;
    let mut inf = super::inference::inference(problem, req, fit, mse, names, &design)?;
    complete(problem, req, fit, mse, names, &design, &mut inf)?;
    Ok(inf)
}

/// Completes `inf` (the standard errors of `solve::inference`) with the summary.
fn complete(
    problem: &Problem,
    req: &Request,
    fit: &Fit,
    mse: f64,
    names: Option<&[String]>,
    design: &Design,
    inf: &mut Inference,
) -> Result<(), String> {
    figures::fill(problem, design, req, mse, inf)?;
    for (i, h) in req.hypotheses.iter().enumerate() {
        match hypotheses::test(problem, design, h, names, mse, inf) {
            Ok(test) => inf.hypotheses.push(test),
            Err(why) => inf.notes.push(format!("hypothesis {i} not tested: {why}")),
        }
    }
    if selective::applies(req).is_ok() {
        match selective::selective(problem, req, fit, names, inf) {
            Ok(s) => {
                selective::replace(inf, &s);
                inf.selective = Some(s);
            }
            Err(why) => inf.notes.push(format!("no selective inference: {why}")),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::{AlphaSchedule, Stats};
    use crate::task::Task;
    use std::time::Instant;

    /// Rows of an ill-conditioned design: columns about their large means (1000 + 100 j),
    /// column 1 nearly column 0, and y a linear function plus noise.
    fn offset_rows(n: usize, p: usize) -> (Vec<f64>, Vec<f64>) {
        let mut state = 0x2545_f491_4f6c_dd1d_u64;
        let mut uniform = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 11) as f64 / (1u64 << 53) as f64 - 0.5
        };
        let (mut x, mut y) = (Vec::with_capacity(n * p), Vec::with_capacity(n));
        for _ in 0..n {
            let row: Vec<f64> = (0..p).map(|_| uniform()).collect();
            for j in 0..p {
                let v = if j == 1 {
                    row[0] + 1e-3 * row[1]
                } else {
                    row[j]
                };
                x.push(1000.0 + 100.0 * j as f64 + (j + 1) as f64 * v);
            }
            let r = &x[x.len() - p..];
            y.push(
                r.iter()
                    .enumerate()
                    .map(|(j, v)| (j as f64 - 1.5) * v)
                    .sum::<f64>()
                    + uniform(),
            );
        }
        (x, y)
    }

    /// sigma_max / sigma_min of the n x k row-major matrix `a`, by faer's SVD.
    fn svd_condition(a: &[f64], n: usize, k: usize) -> f64 {
        let m = faer::Mat::from_fn(n, k, |i, j| a[i * k + j]);
        let sv = m.singular_values().unwrap();
        sv.iter().copied().fold(0.0, f64::max) / sv.iter().copied().fold(f64::INFINITY, f64::min)
    }

    /// Both condition numbers against an SVD of the rows, with and without an intercept, at
    /// p = 5 (the double-double inverse) and p = 20 (the doubles'): the raw design's (with
    /// its constant, as statsmodels' `condition_number`) from Q and Q^-1, and the
    /// standardized one.
    #[test]
    fn condition_numbers_equal_an_svd_of_the_rows() {
        for p in [5, 20] {
            let n = 400;
            let (x, y) = offset_rows(n, p);
            let mut stats = Stats::new(Task::Regression, p, AlphaSchedule::Plain);
            stats.update_batch(&x, &y).unwrap();
            for intercept in [true, false] {
                let mut req = Request::ols();
                req.inference = true;
                req.intercept = intercept;
                let m = req.model(&stats, None).unwrap();
                let summary = m.inference.as_ref().unwrap().summary.clone().unwrap();
                // The raw design, with its constant when the model has an intercept.
                let k = p + usize::from(intercept);
                let raw: Vec<f64> = x
                    .chunks(p)
                    .flat_map(|r| {
                        intercept
                            .then_some(1.0)
                            .into_iter()
                            .chain(r.iter().copied())
                    })
                    .collect();
                let want = svd_condition(&raw, n, k);
                let got = summary.condition_number_raw.unwrap();
                // Through the origin the raw Gram E[x x^T] is all the statistics hold of the
                // design: it carries rounding eps cond^2, as statsmodels' eigenvalues of X^T X
                // do (about 2e-6 at p = 20); with an intercept the means are taken exactly.
                let tol = if intercept {
                    1e-8
                } else {
                    (f64::EPSILON * want * want).max(1e-8)
                };
                assert!(
                    (got - want).abs() <= tol * want,
                    "p = {p}, intercept {intercept}: raw condition {got} vs SVD {want}"
                );
                // Ill-conditioned: by the means with the constant (about 4e9 at p = 5), by
                // the raw columns' spread without it (about 2e4).
                let bound = if intercept { 1e9 } else { 1e4 };
                assert!(want > bound, "an ill-conditioned design: {want}");
            }
            // The standardized design: centred, unit-variance columns.
            let mean: Vec<f64> = (0..p)
                .map(|j| x.chunks(p).map(|r| r[j]).sum::<f64>() / n as f64)
                .collect();
            let sd: Vec<f64> = (0..p)
                .map(|j| {
                    (x.chunks(p).map(|r| (r[j] - mean[j]).powi(2)).sum::<f64>() / n as f64).sqrt()
                })
                .collect();
            let z: Vec<f64> = x
                .chunks(p)
                .flat_map(|r| (0..p).map(|j| (r[j] - mean[j]) / sd[j]).collect::<Vec<_>>())
                .collect();
            let want = svd_condition(&z, n, p);
            let mut req = Request::ols();
            req.inference = true;
            let m = req.model(&stats, None).unwrap();
            let got = m
                .inference
                .unwrap()
                .summary
                .unwrap()
                .condition_number
                .unwrap();
            assert!(
                (got - want).abs() <= 1e-8 * want,
                "p = {p}: standardized condition {got} vs SVD {want}"
            );
        }
    }

    /// The cost of `inference: true` at p = 1000 (docs/benchmarks.md): OLS on paper 003's
    /// design at n = 3000, with and without the summary, median of 5. Run by hand:
    /// `cargo test -p ravel-lm --lib inference_cost_at_p_1000 -- --ignored --nocapture`.
    #[test]
    #[ignore = "a measurement, not a check"]
    fn inference_cost_at_p_1000() {
        let (p, n) = (1000, 3000);
        let spec: crate::synthetic::SyntheticSpec =
            format!("p={p},k=100,n={n},seed=1").parse().unwrap();
        let (mut x, mut y) = (vec![], vec![]);
        spec.rows().fill(n, &mut x, &mut y);
        let mut stats = Stats::new(Task::Regression, p, AlphaSchedule::Plain);
        stats.update_batch(&x, &y).unwrap();
        let time = |req: &Request| {
            let mut t: Vec<f64> = (0..5)
                .map(|_| {
                    let at = Instant::now();
                    let m = req.model(&stats, None).unwrap();
                    assert_eq!(m.inference.is_some(), req.inference);
                    at.elapsed().as_secs_f64() * 1e3
                })
                .collect();
            t.sort_by(f64::total_cmp);
            t[2]
        };
        let plain = Request::ols();
        let mut full = Request::ols();
        full.inference = true;
        let (a, b) = (time(&plain), time(&full));
        println!(
            "OLS p = {p}: {a:.1} ms; with inference: {b:.1} ms (+{:.1} ms)",
            b - a
        );
    }
}
