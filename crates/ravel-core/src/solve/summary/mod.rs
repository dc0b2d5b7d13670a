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

/// Completes `inf` (the standard errors of `solve::inference`) with the summary: intervals,
/// VIFs, the model's figures, the hypotheses' tests, and selective inference where it applies.
pub(crate) fn complete(
    problem: &Problem,
    req: &Request,
    fit: &Fit,
    mse: f64,
    names: Option<&[String]>,
    inf: &mut Inference,
) -> Result<(), String> {
    let design = figures::Design::of(problem, req, fit)?;
    figures::fill(problem, &design, req, mse, inf)?;
    for (i, h) in req.hypotheses.iter().enumerate() {
        match hypotheses::test(problem, &design, h, names, mse, inf) {
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
