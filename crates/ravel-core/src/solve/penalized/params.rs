//! The family's parameters (`Penalized<P>`, with `P` the penalty's own: `LassoParams`,
//! `ElasticNetParams`, `McpParams`, `ScadParams`) as requests spell them, their checks, and
//! the `Solver` implementation: one model at k or lambda, or the warm-started path.

use super::super::{
    Fit, Method, ParamError, Problem, Solver, Sparsity, check, jitter_note, limits, usable_k,
};
use super::nonconvex::{below_rounding, refit_loss};
use super::{CdOptions, PathPoint, Penalty, lambda_grid, path, second_k, solve_at, solve_for_k};
use crate::gram::Gram;
use crate::gram::linear::solve_subset;
use crate::solve::select::kpath::RefitPath;
use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The parameters every coordinate-descent method shares, with its own (`P`: none for Lasso,
/// `l1_ratio` for elastic net, `gamma` for MCP and SCAD) in the same JSON object:
/// `{"method": "mcp", "k": 10, "gamma": 3}`. One model takes exactly one of `k` or `lambda`;
/// the path takes neither.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Penalized<P> {
    /// Exactly k nonzeros (the lambda is searched along the path, then bisected).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub k: Option<usize>,
    /// The penalty level (>= 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lambda: Option<f64>,
    /// Refit OLS on the selected support. Default: true for a k request (paper 003 Alg. 3
    /// selects k features with the penalty, then fits them by OLS), false for a lambda request
    /// and the path (the penalized estimate). `false` with `k` gives the penalized estimate at
    /// the lambda that selects k.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refit: Option<bool>,
    /// Lambda path length (default 100, at most `limits::MAX_PATH_POINTS`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path_points: Option<usize>,
    /// lambda_min / lambda_max (default 1e-4 when n > p, else 1e-2, as glmnet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lambda_min_ratio: Option<f64>,
    /// Convergence tolerance (default 1e-10; see `CdOptions::tol`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tol: Option<f64>,
    /// The penalty's own parameters (flattened into the same JSON object).
    #[serde(flatten)]
    pub penalty: P,
    /// Fields no parameter claims (refused by `check`: serde cannot deny unknown fields
    /// through a flattened struct).
    #[serde(flatten, skip_serializing)]
    #[cfg_attr(feature = "openapi", schema(ignore))]
    unknown: BTreeMap<String, IgnoredAny>,
}

impl<P: Default> Default for Penalized<P> {
    fn default() -> Self {
        Penalized {
            k: None,
            lambda: None,
            refit: None,
            path_points: None,
            lambda_min_ratio: None,
            tol: None,
            penalty: P::default(),
            unknown: BTreeMap::new(),
        }
    }
}

impl<P: Default> Penalized<P> {
    /// Exactly k nonzeros, other settings default.
    pub fn k(k: usize) -> Self {
        Penalized {
            k: Some(k),
            ..Self::default()
        }
    }
    /// At penalty lambda, other settings default.
    pub fn lambda(lambda: f64) -> Self {
        Penalized {
            lambda: Some(lambda),
            ..Self::default()
        }
    }
    /// The whole path, default settings.
    pub fn path() -> Self {
        Self::default()
    }
}

/// A penalty's own parameters.
pub trait PenaltyParams {
    /// The method these parameters are for.
    const METHOD: Method;
    /// Whether the penalty is indifferent to how weight is split among identical columns
    /// (`Solver::merges_duplicates`): not elastic net, whose l2 part splits it evenly.
    const MERGES_DUPLICATES: bool = true;
    /// Checks the penalty's own parameters.
    fn check(&self) -> Result<(), ParamError>;
    /// The penalty they define.
    fn penalty(&self) -> Penalty;
}

/// Lasso has no parameter of its own.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LassoParams {}

/// Elastic net's default mixing. Measured on paper 003's Table 2 design with y standardized
/// (`scripts/table2.py --methods elastic-net --extra 'elastic-net=--l1-ratio R'`, 5 seeds, k =
/// 100, n = 300 / 500 / 1000 / 3000 / 10000; paper 24.7 / 27.7 / 32.1 / 45.2 / 72.4): R = 0.5
/// detects 21.6 / 23.0 / 24.0 / 38.6 / 58.8, R = 0.8 23.8 / 26.8 / 28.0 / 43.6 / 68.0, R = 0.9
/// 25.8 / 27.6 / 30.4 / 46.4 / 70.4, R = 0.95 26.0 / 28.0 / 31.2 / 47.6 / 71.6. 0.9 is the
/// largest l2 share within 3 points of the paper at every n (the paper's elastic net, like
/// this one, trails its Lasso by about a point).
pub const DEFAULT_L1_RATIO: f64 = 0.9;

/// Elastic net's mixing: 1 is Lasso, towards 0 ridge.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ElasticNetParams {
    /// In (0, 1]; default 0.9 (`DEFAULT_L1_RATIO`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub l1_ratio: Option<f64>,
}

/// MCP's concavity.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct McpParams {
    /// > 1; default 3.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gamma: Option<f64>,
}

/// SCAD's concavity.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ScadParams {
    /// > 2; default 3.7.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gamma: Option<f64>,
}

/// Lasso: `{"method": "lasso", "k": 10}` or `{"method": "lasso", "lambda": 0.1}`.
pub type Lasso = Penalized<LassoParams>;
/// Elastic net, with `l1_ratio`.
pub type ElasticNet = Penalized<ElasticNetParams>;
/// MCP, with `gamma`.
pub type Mcp = Penalized<McpParams>;
/// SCAD, with `gamma`.
pub type Scad = Penalized<ScadParams>;

impl PenaltyParams for LassoParams {
    const METHOD: Method = Method::Lasso;
    fn check(&self) -> Result<(), ParamError> {
        Ok(())
    }
    fn penalty(&self) -> Penalty {
        Penalty::Lasso
    }
}

impl PenaltyParams for ElasticNetParams {
    const METHOD: Method = Method::ElasticNet;
    const MERGES_DUPLICATES: bool = false;
    fn check(&self) -> Result<(), ParamError> {
        match self.l1_ratio {
            Some(r) if !(r.is_finite() && r > 0.0 && r <= 1.0) => Err(ParamError::Invalid(
                format!("l1_ratio must lie in (0, 1], got {r}"),
            )),
            _ => Ok(()),
        }
    }
    fn penalty(&self) -> Penalty {
        Penalty::ElasticNet {
            l1_ratio: self.l1_ratio.unwrap_or(DEFAULT_L1_RATIO),
            y_scale: 1.0,
        }
    }
}

fn check_gamma(method: Method, gamma: Option<f64>, min: f64) -> Result<(), ParamError> {
    match gamma {
        Some(gm) if !(gm.is_finite() && gm > min) => Err(ParamError::Invalid(format!(
            "gamma for {method} must be > {min}, got {gm}"
        ))),
        _ => Ok(()),
    }
}

impl PenaltyParams for McpParams {
    const METHOD: Method = Method::Mcp;
    fn check(&self) -> Result<(), ParamError> {
        check_gamma(Self::METHOD, self.gamma, 1.0)
    }
    fn penalty(&self) -> Penalty {
        Penalty::Mcp {
            gamma: self.gamma.unwrap_or(3.0),
        }
    }
}

impl PenaltyParams for ScadParams {
    const METHOD: Method = Method::Scad;
    fn check(&self) -> Result<(), ParamError> {
        check_gamma(Self::METHOD, self.gamma, 2.0)
    }
    fn penalty(&self) -> Penalty {
        Penalty::Scad {
            gamma: self.gamma.unwrap_or(3.7),
        }
    }
}

impl<P: PenaltyParams> Penalized<P> {
    fn options(&self) -> CdOptions {
        CdOptions {
            tol: self.tol.unwrap_or(1e-10),
            ..CdOptions::default()
        }
    }
    fn ratio(&self, problem: &Problem) -> f64 {
        self.lambda_min_ratio
            .unwrap_or(if problem.n as usize > problem.p {
                1e-4
            } else {
                1e-2
            })
    }
    /// The solver's answer at one point as a `Fit` (refitted when asked; along a path the
    /// refits share one factor, `RefitPath`).
    fn point_fit(
        &self,
        g: &Gram,
        point: PathPoint,
        k_exact: Option<bool>,
        refits: Option<&mut RefitPath>,
    ) -> Fit {
        let pen = self.penalty.penalty();
        let convex = pen.is_convex();
        let mut notes = Vec::new();
        let mut b = point.b;
        let mut singular_ridge = None;
        if self.refits() {
            let support: Vec<usize> = (0..g.m).filter(|&j| b[j] != 0.0).collect();
            let sol = match refits {
                Some(path) => path.solve(g, &support),
                None => solve_subset(g, &support, 0.0),
            };
            singular_ridge = jitter_note(sol.jitter, &mut notes);
            b = sol.b;
        }
        let (l1_ratio, gamma) = match pen {
            Penalty::ElasticNet { l1_ratio, .. } => (Some(l1_ratio), None),
            Penalty::Mcp { gamma } | Penalty::Scad { gamma } => (None, Some(gamma)),
            Penalty::Lasso => (None, None),
        };
        Fit {
            b,
            lambda: Some(point.lambda),
            l1_ratio,
            gamma,
            iterations: point.info.iterations,
            gap: convex.then_some(point.info.measure),
            convergence: (!convex).then_some(point.info.measure),
            converged: point.info.converged,
            requested_k: self.k,
            k_exact,
            refit: self.refits(),
            singular_ridge,
            notes,
            ..Fit::default()
        }
    }
}

impl<P: PenaltyParams> Solver for Penalized<P> {
    fn check(&self, p: usize, path: bool) -> Result<(), ParamError> {
        if let Some(name) = self.unknown.keys().next() {
            return Err(ParamError::UnknownField(format!(
                "unknown field `{name}` for {}: expected k, lambda, refit, path_points, \
                 lambda_min_ratio, tol{}",
                P::METHOD,
                match P::METHOD {
                    Method::ElasticNet => ", l1_ratio",
                    Method::Mcp | Method::Scad => ", gamma",
                    _ => "",
                }
            )));
        }
        self.penalty.check()?;
        check::nonneg("lambda", self.lambda)?;
        if let Some(k) = self.k {
            check::k(k, p)?;
        }
        check::within(
            "lambda_min_ratio",
            self.lambda_min_ratio,
            limits::MIN_PATH_RATIO,
            1.0 - f64::EPSILON,
        )?;
        check::within("path_points", self.path_points, 1, limits::MAX_PATH_POINTS)?;
        check::tol(self.tol)?;
        check::no_point(path, self.k, self.lambda)?;
        if !path && self.k.is_some() == self.lambda.is_some() {
            return Err(ParamError::Invalid(format!(
                "{} needs exactly one of k or lambda (or ask for the whole path)",
                P::METHOD
            )));
        }
        Ok(())
    }

    fn fit(&self, problem: &Problem) -> Fit {
        let g = &problem.gram;
        let pen = self.penalty.penalty().for_problem(problem);
        let opt = self.options();
        let mut notes = Vec::new();
        let mut fit = match self.sparsity() {
            Sparsity::K(k) => {
                let k = usable_k(k, g, &mut notes);
                let sol = solve_for_k(
                    g,
                    &pen,
                    k,
                    self.ratio(problem),
                    self.path_points.unwrap_or(100),
                    &opt,
                );
                let mut exact = sol.exact;
                let had_above = sol.above.is_some();
                let (mut point, from) = sol.truncated(g, k);
                if let Some(other) = second_k(g, &pen, k, point.lambda, &opt) {
                    let (mine, theirs) = (refit_loss(g, &point.b), refit_loss(g, &other.b));
                    if below_rounding(theirs, mine, g) {
                        notes.push(format!(
                            "the {k} features come from the second start (003 Algorithm 3 \
                             from 0, then coordinate descent; lambda = {:.4e}): their least-squares \
                             fit is better than the warm-started path's (training loss {theirs:.4e} \
                             against {mine:.4e})",
                            other.lambda
                        ));
                        point = other;
                        exact = true;
                    }
                }
                if !exact {
                    notes.push(if had_above {
                        format!(
                            "no lambda gives exactly {k} nonzeros (the path jumps from fewer to \
                             {from}); returning the {k} largest of that {from}-feature model \
                             (lambda = {:.4e}){}",
                            point.lambda,
                            if self.refits() {
                                ", refitted on them"
                            } else {
                                ": its coefficients are not a penalized solution"
                            }
                        )
                    } else {
                        format!(
                            "no lambda gives exactly {k} nonzeros; returning the closest below \
                             ({from})"
                        )
                    });
                }
                self.point_fit(g, point, Some(exact), None)
            }
            Sparsity::Lambda(lambda) => {
                self.point_fit(g, solve_at(g, &pen, lambda, &opt), None, None)
            }
        };
        notes.append(&mut fit.notes);
        fit.notes = notes;
        fit
    }

    fn path(&self, problem: &Problem) -> Vec<Fit> {
        let g = &problem.gram;
        let pen = self.penalty.penalty().for_problem(problem);
        let lambdas = lambda_grid(
            pen.lambda_max(g),
            self.ratio(problem),
            self.path_points.unwrap_or(100),
        );
        let mut refits = RefitPath::new();
        path(g, &pen, &lambdas, &self.options())
            .into_iter()
            .map(|pt| self.point_fit(g, pt, None, Some(&mut refits)))
            .collect()
    }

    fn merges_duplicates(&self) -> bool {
        P::MERGES_DUPLICATES
    }
}

impl<P: PenaltyParams> Penalized<P> {
    /// The path at given lambdas (decreasing), warm-started: a cross-validation fold follows
    /// the full data's grid (`select`).
    pub fn path_at(&self, problem: &Problem, lambdas: &[f64]) -> Vec<Fit> {
        let g = &problem.gram;
        let mut refits = RefitPath::new();
        path(g, &self.penalty.penalty(), lambdas, &self.options())
            .into_iter()
            .map(|pt| self.point_fit(g, pt, None, Some(&mut refits)))
            .collect()
    }
}

impl<P> Penalized<P> {
    /// Whether the answer is refitted by OLS on its support: as asked, else for a k request
    /// only (see `refit`). Why the default follows the paper: on 003's Table 2 design at
    /// n = 3000 (p = 1000, k = 100; seeds 1-3, RMSE on 2000 fresh rows) the penalized Lasso at
    /// k = 100 (the most shrunk point of its k plateau) predicts with RMSE 59.2-63.5 against
    /// the paper's 9.5; refitted, 9.40-9.51 (issue 11 item 4).
    pub fn refits(&self) -> bool {
        self.refit.unwrap_or(self.k.is_some())
    }

    /// k or lambda, whichever `check` let through (k when both are absent is impossible
    /// after a model check).
    fn sparsity(&self) -> Sparsity {
        match (self.k, self.lambda) {
            (Some(k), _) => Sparsity::K(k),
            (None, lambda) => Sparsity::Lambda(lambda.unwrap_or(0.0)),
        }
    }
}
