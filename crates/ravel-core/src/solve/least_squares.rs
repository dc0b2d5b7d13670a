//! The dense estimators: OLS and ridge on every column that is not constant. The solve itself
//! is `gram::linear::solve_subset` (shared with every refit); this file holds their parameters
//! and their `Solver` implementations.

use super::{Fit, ParamError, Problem, Solver, check, jitter_note, linear};
use crate::gram::Gram;
use serde::{Deserialize, Serialize};

/// OLS takes no parameters (`{"method": "ols"}`); use olsth for k nonzeros, ridge for a
/// penalty.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ols {}

/// Ridge: `(1/2n)||y - b0 - Xb||^2 + lambda/2 ||b||^2`.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Ridge {
    /// The penalty (required, >= 0).
    pub lambda: f64,
}

impl Solver for Ols {
    fn check(&self, _p: usize, path: bool) -> Result<(), ParamError> {
        check::has_no_path(path, super::Method::Ols)
    }
    fn fit(&self, problem: &Problem) -> Fit {
        dense(&problem.gram, 0.0, None)
    }
}

impl Solver for Ridge {
    fn check(&self, _p: usize, path: bool) -> Result<(), ParamError> {
        check::nonneg("lambda", Some(self.lambda))?;
        check::has_no_path(path, super::Method::Ridge)
    }
    fn fit(&self, problem: &Problem) -> Fit {
        dense(&problem.gram, self.lambda, Some(self.lambda))
    }
    /// Ridge splits weight evenly among identical columns: all of them stay.
    fn merges_duplicates(&self) -> bool {
        false
    }
}

fn dense(g: &Gram, ridge: f64, lambda: Option<f64>) -> Fit {
    let all: Vec<usize> = (0..g.m).collect();
    let sol = linear::solve_subset(g, &all, ridge);
    let mut notes = Vec::new();
    let singular_ridge = jitter_note(sol.jitter, &mut notes);
    let measure = grad_norm(g, &sol.b, ridge);
    Fit {
        b: sol.b,
        lambda,
        iterations: 1,
        convergence: Some(measure),
        converged: sol.jitter.is_finite(),
        singular_ridge,
        notes,
        ..Fit::default()
    }
}

/// Largest |gradient + ridge b|: 0 up to rounding at the exact solution.
fn grad_norm(g: &Gram, b: &[f64], ridge: f64) -> f64 {
    g.gradient(b)
        .iter()
        .zip(b)
        .map(|(gi, bi)| (gi + ridge * bi).abs())
        .fold(0.0, f64::max)
}
