//! Model extraction from running averages, through typed estimators.
//!
//! A request is a [`Request`]: an [`Estimator`] (one variant per method, serde-tagged by
//! `method`, holding that family's parameter struct) plus how the Gram problem is built
//! (standardization, class weights). `Request::check` validates it once against the stream's
//! p into a [`Checked`] (or [`CheckedPath`]) value, the only thing [`extract`] and
//! [`extract_path`] accept: the linfa `ParamGuard` pattern. Bounds on the work a request can
//! order (path points, iterations, tolerances) are part of each family's check (`limits`).
//!
//! One file per solver family, each holding its algorithm, its parameter struct and the
//! [`Solver`] implementation that turns one into the other: `least_squares` (OLS, ridge),
//! `threshold` (OLSth, FSA), `penalized` (coordinate descent for Lasso, elastic net, MCP, SCAD,
//! with the k search; `cholesky` is the factor its active-set step updates), `frank_wolfe`
//! (constrained Lasso, paper 004), `iht` (IHT / HTP with the sparse duality certificate, paper
//! 002 ch. 3), `ksupport` (k-support-norm regression by k-FCFW, paper 002 ch. 2). Adding a
//! solver is one such file, one line in the `estimators!` list below and its name in
//! `model::estimator_names!`; docs/contributing.md "Adding a solver". Beside the families: `select` (which point of
//! a path: information criteria and exact K-fold cross-validation, a request's `select`) and
//! `inference` (standard errors of least-squares models, a request's `inference`), and
//! `summary` (the rest of a regression summary: intervals, VIFs, the model's figures, tests of
//! hypotheses, prediction intervals, selective inference for the Lasso).

pub mod cholesky;
pub mod frank_wolfe;
pub mod iht;
pub mod inference;
pub mod interrupt;
pub mod ksupport;
pub mod least_squares;
#[cfg(feature = "openapi")]
mod openapi;
pub mod penalized;
pub mod select;
pub mod summary;
pub mod threshold;

mod error;
mod extract;
mod request;

pub use error::ParamError;
pub(crate) use error::check;
pub use extract::*;
pub use request::{Checked, CheckedPath, Request};

pub use crate::gram::{Gram, Problem, ProblemError, linear};
pub use crate::model::{
    Certificate, Coefficient, Covariance, Criteria, CurvePoint, Diagnostics, Duplicate, Estimate,
    HypothesisTest, Inference, Method, Model, PathModel, PredictionInterval, Selection, Selective,
    SelectiveEstimate, Summary,
};
use crate::stats::{RunningStats, Stats};
pub use select::Criterion;
use serde::{Deserialize, Serialize};
use std::time::Instant;

/// Bounds on the work one request can order; a request beyond them gets a `ParamError` naming
/// the parameter and the limit. They keep one request from holding a core for minutes or
/// allocating gigabytes (a path of 3 million points, a tolerance of 0).
pub mod limits {
    /// Points on a lambda or delta path (each is a full model in the answer).
    pub const MAX_PATH_POINTS: usize = 1000;
    /// Smallest lambda_min / lambda_max (and delta_min / delta_max): below it coordinate
    /// descent runs towards the unpenalized fit at p > n, where it never converges.
    pub const MIN_PATH_RATIO: f64 = 1e-8;
    /// Smallest relative tolerance: below it the stopping rules ask for less than rounding.
    pub const MIN_TOL: f64 = 1e-14;
    /// Iterations of the iterative solvers whose iterations cost O(p^2) or more (FSA, IHT,
    /// DIHT, k-support).
    pub const MAX_ITERATIONS: usize = 10_000;
    /// Frank-Wolfe iterations (each O(p)).
    pub const MAX_FW_ITERATIONS: usize = 1_000_000;
}

/// What a sparse request fixes: exactly k nonzeros, or the penalty level.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Sparsity {
    /// Exactly k nonzeros.
    K(usize),
    /// The penalty level lambda.
    Lambda(f64),
}

/// Raw outcome of a solver, in solver (standardized) units, before it becomes a `Model`.
#[derive(Debug, Clone, Default)]
pub struct Fit {
    /// The coefficients (solver units, active columns).
    pub b: Vec<f64>,
    /// The penalty level.
    pub lambda: Option<f64>,
    /// Frank-Wolfe's l1 radius.
    pub delta: Option<f64>,
    /// Elastic net's mixing.
    pub l1_ratio: Option<f64>,
    /// MCP's or SCAD's concavity.
    pub gamma: Option<f64>,
    /// Iterations made.
    pub iterations: usize,
    /// Duality gap (convex problems).
    pub gap: Option<f64>,
    /// Convergence measure of the other solvers.
    pub convergence: Option<f64>,
    /// Whether the solver met its tolerance.
    pub converged: bool,
    /// The k asked for.
    pub requested_k: Option<usize>,
    /// Whether exactly k nonzeros were reached.
    pub k_exact: Option<bool>,
    /// Whether the support was refitted by least squares.
    pub refit: bool,
    /// IHT / HTP's optimality certificate.
    pub certificate: Option<Certificate>,
    /// The ridge a singular least-squares system needed (`jitter_note`).
    pub singular_ridge: Option<f64>,
    /// Anything the caller should know (in words).
    pub notes: Vec<String>,
}

/// One family of estimators: what its parameters allow, and how it solves a Gram problem.
pub trait Solver {
    /// Validates the parameters against a stream with p features; `path` when the whole path
    /// is asked for (then k / lambda / delta are absent).
    fn check(&self, p: usize, path: bool) -> Result<(), ParamError>;
    /// One model. Called only after `check` passed.
    fn fit(&self, problem: &Problem) -> Fit;
    /// The warm-started path, for the families that have one (`check(p, true)` refuses the
    /// others).
    fn path(&self, _problem: &Problem) -> Vec<Fit> {
        Vec::new()
    }
    /// Whether the method solves on the problem without duplicate columns
    /// (`Problem::without_duplicates`): true where moving weight between identical columns
    /// changes neither the fit nor the objective's value (least squares, l1, MCP, SCAD, l0).
    /// False where the penalty can prefer weight spread over the copies (ridge, elastic net,
    /// k-support, the l0-constrained ridge of IHT / HTP with lambda > 0).
    fn merges_duplicates(&self) -> bool {
        true
    }
}

/// Declares `Estimator` from one list: variant, parameter type, JSON name and aliases.
/// `Estimator` from two lists zipped by position: the families' types here (with the variants'
/// docs) and the names and aliases of `model::estimator_names!`, written once there. A variant
/// out of step with the names fails to compile (the `const` check below).
macro_rules! estimators {
    (
        { $( $(#[$doc:meta])* $variant:ident($ty:ty); )* }
        $( $(#[$mdoc:meta])* $m:ident = $name:literal $(| $alias:literal)* ; )*
    ) => {
        /// Every method `extract` knows, with its family's parameters; JSON
        /// `{"method": "lasso", "k": 10, ...}`.
        #[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
        #[serde(tag = "method")]
        pub enum Estimator {
            $( $(#[$doc])* #[serde(rename = $name $(, alias = $alias)*)] $variant($ty), )*
        }

        // Each variant sits beside its own method's name.
        const _: () = { $( assert!(matches!(Method::$variant, Method::$m)); )* };

        impl Estimator {
            /// The method's name as `Model.method` reports it.
            pub fn method(&self) -> Method {
                match self { $( Estimator::$variant(_) => Method::$variant, )* }
            }
            /// The family that validates and solves it.
            pub fn solver(&self) -> &dyn Solver {
                match self { $( Estimator::$variant(s) => s, )* }
            }
        }

        /// Each estimator's name with its parameters' schema (`openapi` builds `Request`'s).
        #[cfg(feature = "openapi")]
        pub(crate) fn variant_schemas() -> Vec<openapi::Variant> {
            vec![ $( openapi::Variant::of::<$ty>($name), )* ]
        }
    };
}

crate::model::estimator_names!(estimators {
    /// Ordinary least squares on every column.
    Ols(least_squares::Ols);
    /// Ridge regression.
    Ridge(least_squares::Ridge);
    /// OLS with thresholding (paper 003 Alg. 1).
    Olsth(threshold::Olsth);
    /// Feature selection with annealing (paper 003 Alg. 2).
    Fsa(threshold::Fsa);
    /// Lasso by coordinate descent.
    Lasso(penalized::Lasso);
    /// Elastic net by coordinate descent.
    ElasticNet(penalized::ElasticNet);
    /// Minimax concave penalty.
    Mcp(penalized::Mcp);
    /// Smoothly clipped absolute deviation.
    Scad(penalized::Scad);
    /// Frank-Wolfe for the l1-constrained Lasso (paper 004).
    FwLasso(frank_wolfe::FwLasso);
    /// Iterative hard thresholding with the sparse duality certificate (paper 002).
    Iht(iht::Iht);
    /// Hard thresholding pursuit with the same certificate.
    Htp(iht::Htp);
    /// k-support-norm regularized regression by k-FCFW (paper 002).
    KSupport(ksupport::KSupport);
});

/// serde default for the boolean options that are on unless turned off.
pub(crate) fn yes() -> bool {
    true
}

/// serde's `skip_serializing_if` for those options: written only when turned off.
pub(crate) fn is_true(b: &bool) -> bool {
    *b
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The JSON name of every estimator is its `Method::name`, and every method of
    /// `Method::ESTIMATORS` has a variant.
    #[test]
    fn every_estimator_name_round_trips() {
        for m in Method::ESTIMATORS {
            let json = format!(
                "{{\"method\": \"{}\", \"k\": 1, \"lambda\": 1.0}}",
                m.name()
            );
            // Not every family takes k and lambda together: only the tag matters here.
            let tag = serde_json::from_str::<serde_json::Value>(&json).unwrap();
            let name = tag["method"].as_str().unwrap();
            assert_eq!(name.parse::<Method>().unwrap(), m);
            // The name and every alias (`Method::aliases`) name this estimator.
            for name in std::iter::once(m.name()).chain(m.aliases().iter().copied()) {
                let minimal = format!("{{\"method\": \"{name}\"}}");
                match serde_json::from_str::<Request>(&minimal) {
                    Ok(r) => assert_eq!(r.method(), m),
                    // Families with required fields say which one is missing, not "unknown
                    // variant".
                    Err(e) => assert!(e.to_string().contains("missing field"), "{name}: {e}"),
                }
            }
        }
    }

    #[test]
    fn unknown_fields_are_refused_for_every_family() {
        for m in Method::ESTIMATORS {
            let json = format!("{{\"method\": \"{}\", \"bogus\": 1}}", m.name());
            let err = match serde_json::from_str::<Request>(&json) {
                Err(e) => e.to_string(),
                Ok(r) => r.check(10).unwrap_err().to_string(),
            };
            assert!(err.contains("bogus"), "{m}: {err}");
        }
    }
}
