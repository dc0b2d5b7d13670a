//! Standard errors, t statistics and p-values of least-squares models, from the moments alone
//! (issue 17 item 3).
//!
//! For OLS on a support S with an intercept, Cov(beta_S) = sigma^2 (X_c^T X_c)^-1 with X_c the
//! centred columns; X_c^T X_c = n Q_SS (Q the covariance the Gram problem holds), so in solver
//! units Cov(b_S) = (sigma^2 / n) Q_SS^-1 and Var(b0) = sigma^2 / n + mu_S^T Cov(beta_S) mu_S
//! (the mean of y is uncorrelated with the centred-design slopes). sigma^2 = RSS / (n - df - 1)
//! with RSS = n train_mse from the moments (`Problem::mse`; see below for its precision). Ridge (lambda > 0, intercept unpenalized):
//! b_S = A^-1 c_S with A = Q_SS + lambda I, so Cov(b_S) = (sigma^2 / n) A^-1 Q_SS A^-1 and
//! df = tr(Q_SS A^-1) (Hoerl & Kennard's sandwich; the estimate is biased, the standard error
//! is of its spread around its own mean). Standardized columns map back by 1 / sd.
//! p-values are two-sided, from Student's t with n - df - 1 degrees of freedom (the regularized
//! incomplete beta function below). For refitted k-models (OLSth, FSA, IHT / HTP at lambda 0,
//! a refitted Lasso / elastic net / MCP / SCAD) the support was chosen on the same rows:
//! `post_selection` says so, and those standard errors are too small. With a forgetting
//! schedule n is the effective sample size. This reproduces statsmodels' OLS
//! (`standard_errors_equal_statsmodels` in the workspace's `tests/selection.rs`).
//!
//! Without an intercept (`Problem::through_origin`) Q is the raw E[x x^T], so the same
//! formulas give Cov(b_S) = sigma^2 (X^T X)^-1, with sigma^2 = RSS / (n - df): no intercept
//! estimate and no degree of freedom for it, as NIST, R's `lm(y ~ x - 1)` and statsmodels
//! without a constant define them.
//!
//! Statistics of few features keep their moments in double-double (stats/extended.rs): the
//! residual mean square (`Problem::mse`), the inverse and the intercept's variance are then
//! computed in it, without the cancellation of RSS = Syy - b'Sxy near R^2 = 1 or of
//! mu^T Cov mu between nearly dependent columns. An exact fit (residuals 0 to working
//! precision, `Problem::is_exact_fit`) gets no standard errors: they are 0, and in floating
//! point they would be rounding noise with t statistics to match.
//!
//! `Design` holds the support's system and its one inverse, shared by everything the summary
//! computes from it (`solve::summary`: VIFs, condition numbers, prediction intervals' covariance,
//! tests of hypotheses), so that `inference: true` inverts the system once.

use super::{Estimator, Fit, ParamError, Problem, Request};
use crate::gram::extended::ExtSolution;
use crate::model::{Estimate, Inference};
use faer::linalg::solvers::DenseSolveCore;
use faer::{Mat, Side};

/// Whether the method allows inference (checked with the request).
pub(crate) fn check(req: &Request) -> Result<(), ParamError> {
    if !req.inference {
        return Ok(());
    }
    let ok = match &req.estimator {
        Estimator::Ols(_) | Estimator::Ridge(_) | Estimator::Olsth(_) | Estimator::Fsa(_) => true,
        Estimator::Iht(e) => e.0.lambda.unwrap_or(0.0) == 0.0,
        Estimator::Htp(e) => e.0.lambda.unwrap_or(0.0) == 0.0,
        Estimator::Lasso(e) => e.refits(),
        Estimator::ElasticNet(e) => e.refits(),
        Estimator::Mcp(e) => e.refits(),
        Estimator::Scad(e) => e.refits(),
        Estimator::FwLasso(_) | Estimator::KSupport(_) => false,
    };
    if !ok {
        return Err(ParamError::Invalid(format!(
            "inference is for least-squares fits: ols, ridge, olsth, fsa, iht / htp at lambda 0, \
             and lasso, elastic-net, mcp, scad refitted on their support (k, or refit: true); \
             not {}",
            req.method()
        )));
    }
    Ok(())
}

/// The model's support and the matrices of its covariance, in solver units: built once per
/// model, for the standard errors (`solve::inference`), the VIFs, the condition numbers, the
/// covariance of prediction intervals and the tests of hypotheses.
pub(crate) struct Design {
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
    /// Q_SS^-1 when it exists (the VIFs, the raw design's condition number).
    pub qinv: Option<Mat<f64>>,
    /// The model's degrees of freedom: s, or tr(Q_SS A^-1) for ridge.
    pub df_model: f64,
    /// Few features (`Problem::extended`): the system's solution in double-double, whose
    /// inverse the doubles above are rounded from (the intercept's variance uses it).
    pub ext: Option<ExtSolution>,
}

fn inverse(a: &Mat<f64>) -> Option<Mat<f64>> {
    let s = a.nrows();
    if s == 0 {
        return Some(Mat::zeros(0, 0));
    }
    // From the factor: L^-1, then L^-T L^-1 (about 2/3 s^3 flops, a third of solving
    // against the identity).
    let inv = a.llt(Side::Lower).ok()?.inverse();
    positive_diagonal(inv)
}

fn positive_diagonal(inv: Mat<f64>) -> Option<Mat<f64>> {
    (0..inv.nrows())
        .all(|i| inv[(i, i)].is_finite() && inv[(i, i)] > 0.0)
        .then_some(inv)
}

impl Design {
    /// The support of `fit` as `solve::inference` takes it: every column for OLS and ridge,
    /// the nonzeros otherwise. One inverse of the system, in double-double for few features.
    pub(crate) fn of(problem: &Problem, req: &Request, fit: &Fit) -> Result<Design, String> {
        let g = &problem.gram;
        let (support, ridge): (Vec<usize>, f64) = match &req.estimator {
            Estimator::Ols(_) => ((0..g.m).collect(), 0.0),
            Estimator::Ridge(r) => ((0..g.m).collect(), r.lambda),
            _ => ((0..g.m).filter(|&j| fit.b[j] != 0.0).collect(), 0.0),
        };
        let s = support.len();
        let q = Mat::from_fn(s, s, |i, j| g.at(support[i], support[j]));
        let ext = problem
            .extended
            .as_ref()
            .and_then(|e| e.solve(&support, ridge).ok());
        // (Q_SS + ridge I)^-1.
        let ainv = match &ext {
            Some(sol) => {
                positive_diagonal(Mat::from_fn(s, s, |i, j| sol.inverse[i + j * s].to_f64()))
            }
            None if ridge == 0.0 => inverse(&q),
            None => inverse(&Mat::from_fn(s, s, |i, j| {
                q[(i, j)] + if i == j { ridge } else { 0.0 }
            })),
        };
        let (cov_unit, qinv, df_model) = if ridge == 0.0 {
            let inv = ainv.ok_or("the least-squares system does not factor")?;
            (inv.clone(), Some(inv), s as f64)
        } else {
            let ainv = ainv.ok_or("the ridge system does not factor")?;
            let qa = &q * &ainv;
            let df = (0..s).map(|i| qa[(i, i)]).sum::<f64>();
            (&ainv * &qa, inverse(&q), df)
        };
        Ok(Design {
            orig: support.iter().map(|&a| problem.active[a]).collect(),
            support,
            ridge,
            q,
            cov_unit,
            qinv,
            df_model,
            ext,
        })
    }

    /// Cov(beta_S) in the data's units, s x s column-major, for residual variance sigma2 and
    /// sample size n.
    pub(crate) fn covariance(&self, problem: &Problem, sigma2: f64, n: f64) -> Vec<f64> {
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

/// Whether a fit has standard errors at all (`mse` its residual mean square), or why not;
/// checked before the design's matrices are built (`summary::Design`).
pub(crate) fn applies(problem: &Problem, fit: &Fit, mse: f64) -> Result<(), String> {
    if problem.classification {
        return Err("standard errors are for regression".into());
    }
    if fit.singular_ridge.is_some() {
        return Err("the least-squares system is singular (p >= n or collinear columns)".into());
    }
    if problem.is_exact_fit(mse) {
        return Err(
            "the fit is exact (the residuals are 0 to working precision, diagnostics.exact_fit): \
             every standard error is 0"
                .into(),
        );
    }
    Ok(())
}

/// The inference of one fit (`mse` its residual mean square) that `applies`, on its design
/// `d` (the support's inverse, computed once for every figure of the summary), or why there
/// is none.
pub(crate) fn inference(
    problem: &Problem,
    req: &Request,
    fit: &Fit,
    mse: f64,
    names: Option<&[String]>,
    d: &Design,
) -> Result<Inference, String> {
    let post_selection = !matches!(req.estimator, Estimator::Ols(_) | Estimator::Ridge(_));
    let (support, ridge, cov_unit, df) = (&d.support, d.ridge, &d.cov_unit, d.df_model);
    let s = support.len();
    let n = problem.n_kish;
    let df_resid = n - df - if problem.intercept { 1.0 } else { 0.0 };
    if df_resid <= 0.0 {
        return Err(format!(
            "no residual degrees of freedom (n = {n}, model df = {df:.1})"
        ));
    }
    let sigma2 = n * mse / df_resid;
    let (beta, intercept) = problem.to_original(&fit.b);
    let mean = problem.mean_x();
    // Cov(beta_S) in original units: D^-1 Cov(b_S) D^-1.
    let cov = |i: usize, j: usize| {
        sigma2 / n * cov_unit[(i, j)] / (problem.scale[support[i]] * problem.scale[support[j]])
    };
    let orig = &d.orig;
    let mut var0 = sigma2 / n;
    match (&problem.extended, &d.ext) {
        // In double-double when the problem has it (the intercept's mean form).
        (Some(e), Some(sol)) if ridge == 0.0 => {
            var0 += sigma2 / n * e.mean_form(support, &sol.inverse, &problem.scale);
        }
        _ => {
            for i in 0..s {
                for j in 0..s {
                    var0 += mean[orig[i]] * cov(i, j) * mean[orig[j]];
                }
            }
        }
    }
    let estimate = |feature: String, index: Option<usize>, value: f64, var: f64| {
        let se = var.max(0.0).sqrt();
        let t = value / se;
        Estimate {
            feature,
            index,
            value,
            se,
            t,
            p_value: t_two_sided(t, df_resid),
            ..Default::default()
        }
    };
    // Coefficients in index order, as `Model::coefficients` lists the nonzeros.
    let mut order: Vec<usize> = (0..s).collect();
    order.sort_by_key(|&i| orig[i]);
    let coefficients = order
        .into_iter()
        .filter(|&i| beta[orig[i]] != 0.0)
        .map(|i| {
            let j = orig[i];
            let name = names
                .and_then(|n| n.get(j).cloned())
                .unwrap_or_else(|| j.to_string());
            estimate(name, Some(j), beta[j], cov(i, i))
        })
        .collect();
    let mut notes = Vec::new();
    if post_selection {
        notes.push(
            "the support was selected on the same rows: these standard errors ignore the \
             selection, so they are too small and the p-values too optimistic"
                .into(),
        );
    }
    if ridge > 0.0 {
        notes.push(
            "ridge: standard errors of the (biased) estimate's spread, Cov = sigma^2 A^-1 Q A^-1 / n \
             with A = Q + lambda I; df = tr(Q A^-1)"
                .into(),
        );
    }
    if n < problem.n as f64 {
        notes.push(format!(
            "forgetting schedule: n is Kish's effective sample size (sum w)^2 / sum w^2 = \
             {n:.1}, not the {} rows",
            problem.n
        ));
    }
    Ok(Inference {
        sigma2,
        df_resid,
        post_selection,
        intercept: problem
            .intercept
            .then(|| estimate("intercept".into(), None, intercept, var0)),
        coefficients,
        notes,
        ..Default::default()
    })
}

/// Two-sided p-value of t under Student's t with `df` degrees of freedom:
/// P(|T| >= |t|) = I_{df / (df + t^2)}(df / 2, 1 / 2).
pub fn t_two_sided(t: f64, df: f64) -> f64 {
    if t.is_nan() {
        return f64::NAN;
    }
    if t.is_infinite() {
        return 0.0;
    }
    beta_inc(df / 2.0, 0.5, df / (df + t * t))
}

/// ln Gamma(x) for x > 0: Lanczos (g = 7, 9 terms; relative error near 1e-15).
pub fn ln_gamma(x: f64) -> f64 {
    const G: f64 = 7.0;
    const C: [f64; 9] = [
        0.999_999_999_999_809_9,
        676.520_368_121_885_1,
        -1_259.139_216_722_402_8,
        771.323_428_777_653_1,
        -176.615_029_162_140_6,
        12.507_343_278_686_905,
        -0.138_571_095_265_720_12,
        9.984_369_578_019_572e-6,
        1.505_632_735_149_311_6e-7,
    ];
    if x < 0.5 {
        // Reflection.
        let pi = std::f64::consts::PI;
        return (pi / (pi * x).sin()).ln() - ln_gamma(1.0 - x);
    }
    let x = x - 1.0;
    let mut a = C[0];
    let t = x + G + 0.5;
    for (i, c) in C.iter().enumerate().skip(1) {
        a += c / (x + i as f64);
    }
    0.5 * (2.0 * std::f64::consts::PI).ln() + (x + 0.5) * t.ln() - t + a.ln()
}

/// The regularized incomplete beta function I_x(a, b), by its continued fraction (Lentz),
/// on the side where it converges fast (Numerical Recipes section 6.4).
pub fn beta_inc(a: f64, b: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 0.0;
    }
    if x >= 1.0 {
        return 1.0;
    }
    let ln_front = ln_gamma(a + b) - ln_gamma(a) - ln_gamma(b) + a * x.ln() + b * (1.0 - x).ln();
    if x < (a + 1.0) / (a + b + 2.0) {
        (ln_front.exp() * beta_cf(a, b, x)) / a
    } else {
        1.0 - (ln_front.exp() * beta_cf(b, a, 1.0 - x)) / b
    }
}

fn beta_cf(a: f64, b: f64, x: f64) -> f64 {
    const TINY: f64 = 1e-300;
    let (qab, qap, qam) = (a + b, a + 1.0, a - 1.0);
    let mut c = 1.0;
    let mut d = 1.0 - qab * x / qap;
    if d.abs() < TINY {
        d = TINY;
    }
    d = 1.0 / d;
    let mut h = d;
    for m in 1..10_000 {
        let m = m as f64;
        let m2 = 2.0 * m;
        let aa = m * (b - m) * x / ((qam + m2) * (a + m2));
        d = 1.0 + aa * d;
        if d.abs() < TINY {
            d = TINY;
        }
        c = 1.0 + aa / c;
        if c.abs() < TINY {
            c = TINY;
        }
        d = 1.0 / d;
        h *= d * c;
        let aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2));
        d = 1.0 + aa * d;
        if d.abs() < TINY {
            d = TINY;
        }
        c = 1.0 + aa / c;
        if c.abs() < TINY {
            c = TINY;
        }
        d = 1.0 / d;
        let del = d * c;
        h *= del;
        if (del - 1.0).abs() < 1e-16 {
            break;
        }
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ln_gamma_at_integers_and_a_half() {
        let mut f = 1.0f64;
        for k in 1..30 {
            // Gamma(k) = (k - 1)!
            assert!((ln_gamma(k as f64) - f.ln()).abs() < 1e-12 * f.ln().abs().max(1.0));
            f *= k as f64;
        }
        assert!((ln_gamma(0.5) - std::f64::consts::PI.sqrt().ln()).abs() < 1e-14_f64);
    }

    #[test]
    fn t_p_values_in_closed_form() {
        // df = 1 (Cauchy): P(|T| >= t) = 1 - 2 atan(t) / pi.
        for t in [0.1f64, 1.0, 3.0, 50.0] {
            let want = 1.0 - 2.0 * f64::atan(t) / std::f64::consts::PI;
            assert!(
                (t_two_sided(t, 1.0) - want).abs() < 1e-14 * want.max(1e-3),
                "{t}"
            );
        }
        // df = 2: P(|T| >= t) = 1 - t / sqrt(2 + t^2), written without the cancellation.
        for t in [0.1f64, 1.0, 3.0, 50.0] {
            let r = (2.0 + t * t).sqrt();
            let want = 2.0 / (r * (r + t));
            assert!((t_two_sided(t, 2.0) - want).abs() < 1e-13 * want, "{t}");
        }
        assert_eq!(t_two_sided(0.0, 5.0), 1.0);
    }
}
