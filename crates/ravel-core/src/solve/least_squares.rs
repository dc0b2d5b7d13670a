//! The dense estimators: OLS and ridge on every column that is not constant. The solve itself
//! is `gram::linear::solve_subset` (shared with every refit), or its double-double twin
//! (`gram::Extended::solve`) when the statistics kept their moments so (p <= 16); this file
//! holds their parameters and their `Solver` implementations, and the note a singular system
//! gets: its condition number and the columns of its weakest direction.

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
        dense(problem, 0.0, None)
    }
}

impl Solver for Ridge {
    fn check(&self, _p: usize, path: bool) -> Result<(), ParamError> {
        check::nonneg("lambda", Some(self.lambda))?;
        check::has_no_path(path, super::Method::Ridge)
    }
    fn fit(&self, problem: &Problem) -> Fit {
        dense(problem, self.lambda, Some(self.lambda))
    }
    /// Ridge splits weight evenly among identical columns: all of them stay.
    fn merges_duplicates(&self) -> bool {
        false
    }
}

fn dense(problem: &Problem, ridge: f64, lambda: Option<f64>) -> Fit {
    let g = &problem.gram;
    let all: Vec<usize> = (0..g.m).collect();
    if let Some(ext) = &problem.extended
        && let Ok(sol) = ext.solve(&all, ridge)
    {
        let measure = grad_norm(g, &sol.b, ridge);
        return Fit {
            b: sol.b,
            lambda,
            iterations: 1,
            convergence: Some(measure),
            converged: true,
            ..Fit::default()
        };
    }
    let sol = linear::solve_subset(g, &all, ridge);
    let mut notes = Vec::new();
    if sol.jitter > 0.0 {
        notes.push(conditioning_note(problem, &sol));
    }
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

/// Why a least-squares system counts as singular, in numbers: its condition number on the
/// correlation scale (the same with and without `standardize`) and the features its weakest
/// direction is made of (column indices of the stream).
fn conditioning_note(problem: &Problem, sol: &linear::LsSolution) -> String {
    let cond = if sol.rcond > 0.0 {
        format!("about {:.1e}", 1.0 / sol.rcond)
    } else {
        "infinite (the system does not factor)".into()
    };
    let columns: Vec<String> = sol
        .weakest
        .iter()
        .take(12)
        .map(|&a| problem.active[a].to_string())
        .collect();
    let which = if columns.is_empty() {
        String::new()
    } else {
        format!(
            "; the nearly dependent columns (the weakest direction, largest weight first): {}",
            columns.join(", ")
        )
    };
    format!(
        "the covariance of the columns is singular to working precision: condition number \
         {cond} on the correlation scale, beyond {:.0e}{which}; no standard errors",
        1.0 / linear::RCOND_TOL
    )
}
