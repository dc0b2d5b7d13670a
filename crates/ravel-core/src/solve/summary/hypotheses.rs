//! Tests of hypotheses on a least-squares model (issue 60 item 3), a field of the model
//! request (`hypotheses`), so that a window, a select or a refit give their model's tests with
//! no other route:
//!
//! - `{"drop": ["x3", "x4"]}`: the nested model without those features, refitted by least
//!   squares on the same statistics; F = ((ssr_r - ssr) / q) / (ssr / df_resid) with q the
//!   features dropped (statsmodels' `compare_f_test`).
//! - `{"restrictions": [{"terms": {"x1": 1, "x2": -1}, "equals": 0}, ...]}`: the Wald test of
//!   R b = r over the intercept (`intercept`) and the model's coefficients; W = (R b - r)^T (R V
//!   R^T)^-1 (R b - r), F = W / q (statsmodels' `f_test`), and the chi-squared form W.

use super::{ParamError, Problem};
use crate::gram::linear::solve_subset;
use crate::model::{HypothesisTest, Inference};
use crate::solve::inference::Design;
use faer::linalg::solvers::Solve;
use faer::{Mat, Side};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Most features or restriction rows one hypothesis may name.
pub const MAX_TERMS: usize = 10_000;

/// One hypothesis: features to drop, or linear restrictions (exactly one of the two).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct Hypothesis {
    /// Features (names, or column indices as strings) whose coefficients are 0: the F test of
    /// the model without them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub drop: Vec<String>,
    /// The rows of R b = r.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub restrictions: Vec<Restriction>,
}

/// One row of R b = r: coefficients by feature name (`intercept` for the intercept) and r.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct Restriction {
    /// Feature name to its weight in the row.
    pub terms: BTreeMap<String, f64>,
    /// The row's value r (default 0).
    #[serde(default)]
    pub equals: f64,
}

impl Hypothesis {
    /// The features the hypothesis names (`intercept` aside).
    pub(super) fn features(&self) -> impl Iterator<Item = &String> {
        self.drop.iter().chain(
            self.restrictions
                .iter()
                .flat_map(|r| r.terms.keys())
                .filter(|k| k.as_str() != "intercept"),
        )
    }

    pub(super) fn check(&self, _p: usize) -> Result<(), ParamError> {
        let bad = |m: String| Err(ParamError::Invalid(m));
        match (self.drop.is_empty(), self.restrictions.is_empty()) {
            (true, true) | (false, false) => {
                return bad("each hypothesis gives either \"drop\": [features] or \
                     \"restrictions\": [{\"terms\": {feature: weight}, \"equals\": r}]"
                    .into());
            }
            _ => {}
        }
        if self.drop.len() > MAX_TERMS || self.restrictions.len() > MAX_TERMS {
            return bad(format!(
                "a hypothesis names at most {MAX_TERMS} features or rows"
            ));
        }
        for r in &self.restrictions {
            if r.terms.is_empty() || r.terms.len() > MAX_TERMS {
                return bad(format!(
                    "each restriction has 1 to {MAX_TERMS} terms {{feature: weight}}"
                ));
            }
            if !r.equals.is_finite() || r.terms.values().any(|w| !w.is_finite()) {
                return bad("restriction weights and values must be finite numbers".into());
            }
        }
        Ok(())
    }
}

/// The position in the model's support of a feature named `name` (or its index).
fn position(name: &str, d: &Design, names: Option<&[String]>) -> Result<usize, String> {
    let index = names
        .and_then(|n| n.iter().position(|f| f == name))
        .or_else(|| name.parse::<usize>().ok())
        .ok_or_else(|| format!("no feature named {name:?} in the stream"))?;
    d.orig.binary_search(&index).map_err(|_| {
        format!(
            "feature {name:?} is not in the model (not selected, constant or a duplicate): \
             test only the model's own coefficients"
        )
    })
}

/// The test of one hypothesis on the model of `d`.
pub(super) fn test(
    problem: &Problem,
    d: &Design,
    h: &Hypothesis,
    names: Option<&[String]>,
    mse: f64,
    inf: &Inference,
) -> Result<HypothesisTest, String> {
    let n = problem.n_kish;
    let df_resid = inf.df_resid;
    let ssr = n * mse;
    if !h.drop.is_empty() {
        let mut dropped = Vec::new();
        for name in &h.drop {
            let k = position(name, d, names)?;
            if !dropped.contains(&k) {
                dropped.push(k);
            }
        }
        let kept: Vec<usize> = (0..d.support.len())
            .filter(|k| !dropped.contains(k))
            .map(|k| d.support[k])
            .collect();
        let g = &problem.gram;
        let sol = solve_subset(g, &kept, 0.0);
        if sol.jitter > 0.0 {
            return Err("the nested model's least-squares system is singular".into());
        }
        let ssr_r = n * (2.0 * g.loss(&sol.b)).max(0.0);
        let q = dropped.len() as f64;
        let f = ((ssr_r - ssr) / q) / (ssr / df_resid);
        return Ok(HypothesisTest {
            test: "nested_f".into(),
            hypothesis: format!("the coefficients of {} are 0", h.drop.join(", ")),
            f_statistic: f,
            df_num: q,
            df_denom: df_resid,
            p_value: super::dist::f_sf(f, q, df_resid),
            ssr_restricted: Some(ssr_r),
            chi2: None,
            chi2_p_value: None,
        });
    }
    // Wald: theta = (b0, beta_S), V its covariance.
    let cov = inf
        .covariance
        .as_ref()
        .ok_or("the model's covariance is missing")?;
    let s = d.support.len();
    let m = s + 1;
    let at = |i: usize, j: usize| cov.cov[i + j * s];
    let mut v = Mat::<f64>::zeros(m, m);
    for j in 0..s {
        for i in 0..s {
            v[(i + 1, j + 1)] = at(i, j);
        }
        // Cov(b0, beta_j) = -sum_i mu_i Cov(beta_i, beta_j), b0 = ybar - mu^T beta; a model
        // without an intercept has b0 = 0 exactly (no variance, no covariance).
        if inf.intercept.is_some() {
            let c0: f64 = -(0..s).map(|i| cov.mean[i] * at(i, j)).sum::<f64>();
            v[(0, j + 1)] = c0;
            v[(j + 1, 0)] = c0;
        }
    }
    // Coefficients absent from `coefficients` (an exact 0 of OLS) stay 0.
    let mut theta = vec![0.0; m];
    if let Some(b0) = &inf.intercept {
        v[(0, 0)] = b0.se * b0.se;
        theta[0] = b0.value;
    }
    for e in &inf.coefficients {
        if let Some(k) = e.index.and_then(|i| d.orig.binary_search(&i).ok()) {
            theta[k + 1] = e.value;
        }
    }
    let q = h.restrictions.len();
    let mut r = Mat::<f64>::zeros(q, m);
    let mut rhs = vec![0.0; q];
    for (row, res) in h.restrictions.iter().enumerate() {
        for (name, w) in &res.terms {
            let col = if name == "intercept" {
                0
            } else {
                position(name, d, names)? + 1
            };
            r[(row, col)] += w;
        }
        rhs[row] = res.equals;
    }
    let diff = Mat::from_fn(q, 1, |i, _| {
        (0..m).map(|k| r[(i, k)] * theta[k]).sum::<f64>() - rhs[i]
    });
    let rvr = &r * &v * r.transpose();
    let llt = rvr.llt(Side::Lower).map_err(|_| {
        "the restrictions are linearly dependent (R V R^T is singular): drop the redundant rows"
            .to_string()
    })?;
    let sol = llt.solve(&diff);
    let w: f64 = (0..q).map(|i| diff[(i, 0)] * sol[(i, 0)]).sum();
    let qf = q as f64;
    let f = w / qf;
    let words: Vec<String> = h
        .restrictions
        .iter()
        .map(|res| {
            let lhs: Vec<String> = res.terms.iter().map(|(k, w)| format!("{w} {k}")).collect();
            format!("{} = {}", lhs.join(" + "), res.equals)
        })
        .collect();
    Ok(HypothesisTest {
        test: "wald".into(),
        hypothesis: words.join("; "),
        f_statistic: f,
        df_num: qf,
        df_denom: df_resid,
        p_value: super::dist::f_sf(f, qf, df_resid),
        ssr_restricted: None,
        chi2: Some(w),
        chi2_p_value: Some(super::dist::chi2_sf(w, qf)),
    })
}
