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
//! `model::estimator_names!`; README "Adding a solver". Beside the families: `select` (which point of
//! a path: information criteria and exact K-fold cross-validation, a request's `select`) and
//! `inference` (standard errors of least-squares models, a request's `inference`).

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
pub mod threshold;

pub use crate::gram::{Gram, Problem, ProblemError, linear};
pub use crate::model::{
    Certificate, Coefficient, Criteria, CurvePoint, Diagnostics, Duplicate, Estimate, Inference,
    Method, Model, PathModel, Selection,
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

/// A request that cannot be served; the message says what to change.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ParamError {
    /// A method name no estimator has.
    #[error("{0}")]
    UnknownMethod(String),
    /// k > p.
    #[error("k = {k} is larger than the number of features p = {p}")]
    KTooLarge {
        /// The k asked for.
        k: usize,
        /// Features p.
        p: usize,
    },
    /// k = 0.
    #[error("k must be at least 1")]
    KZero,
    /// A parameter that must be finite and >= 0 is not.
    #[error("{name} must be a finite number >= 0, got {value}")]
    Negative {
        /// The parameter.
        name: &'static str,
        /// Its value.
        value: f64,
    },
    /// A parameter beyond its bound (`limits`).
    #[error("{name} = {value} is out of bounds: {bound}")]
    OutOfBounds {
        /// The parameter.
        name: &'static str,
        /// Its value.
        value: String,
        /// The bound, in words.
        bound: String,
    },
    /// Any other invalid combination, in words.
    #[error("{0}")]
    Invalid(String),
    /// A field no parameter of the method claims.
    #[error("{0}")]
    UnknownField(String),
    /// The statistics cannot define a problem (no rows, one class).
    #[error(transparent)]
    Problem(#[from] ProblemError),
}

/// The checks every family's parameters share.
pub(crate) mod check {
    use super::ParamError;

    pub fn nonneg(name: &'static str, v: Option<f64>) -> Result<(), ParamError> {
        match v {
            Some(x) if !(x.is_finite() && x >= 0.0) => Err(ParamError::Negative { name, value: x }),
            _ => Ok(()),
        }
    }
    pub fn k(k: usize, p: usize) -> Result<(), ParamError> {
        match k {
            0 => Err(ParamError::KZero),
            k if k > p => Err(ParamError::KTooLarge { k, p }),
            _ => Ok(()),
        }
    }
    /// `v` within [lo, hi] (a range, said in the message).
    pub fn within<T: PartialOrd + std::fmt::Display + Copy>(
        name: &'static str,
        v: Option<T>,
        lo: T,
        hi: T,
    ) -> Result<(), ParamError> {
        match v {
            Some(x) if !(x >= lo && x <= hi) => Err(ParamError::OutOfBounds {
                name,
                value: x.to_string(),
                bound: format!("it must lie in [{lo}, {hi}]"),
            }),
            _ => Ok(()),
        }
    }
    pub fn tol(v: Option<f64>) -> Result<(), ParamError> {
        within("tol", v, super::limits::MIN_TOL, 1.0)
    }
    pub fn iterations(name: &'static str, v: Option<usize>, max: usize) -> Result<(), ParamError> {
        within(name, v, 1, max)
    }
    /// Neither k nor lambda when the whole path is asked for.
    pub fn no_point(path: bool, k: Option<usize>, lambda: Option<f64>) -> Result<(), ParamError> {
        if path && (k.is_some() || lambda.is_some()) {
            return Err(ParamError::Invalid(
                "the path covers every lambda: drop k and lambda (ask for one model instead)"
                    .into(),
            ));
        }
        Ok(())
    }
    /// A method without a path refuses a path request.
    pub fn has_no_path(path: bool, method: super::Method) -> Result<(), ParamError> {
        if path {
            return Err(ParamError::Invalid(format!(
                "{method} has no path; paths are for lasso, elastic-net, mcp, scad and fw-lasso"
            )));
        }
        Ok(())
    }
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

/// What to extract: the estimator and how the Gram problem is built. The JSON body of
/// `POST .../model` and `.../path`: `{"method": "lasso", "k": 10, "standardize": true}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Request {
    /// The method and its parameters.
    #[serde(flatten)]
    pub estimator: Estimator,
    /// Scale columns to unit variance before the fit (coefficients come back in original
    /// units). Default true.
    #[serde(default = "yes")]
    pub standardize: bool,
    /// Classification: weight of the positive class (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub w_pos: Option<f64>,
    /// Classification: weight of the negative class (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub w_neg: Option<f64>,
    /// Choose the model along the path instead of giving k or lambda: aic, bic, ebic, or
    /// (with fold statistics) cv, cv_1se (`select`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub select: Option<Criterion>,
    /// EBIC's gamma in [0, 1] (default 1 - ln n / (2 ln p), clipped; `select`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ebic_gamma: Option<f64>,
    /// Standard errors, t statistics and p-values (OLS, ridge, refitted models; `inference`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub inference: bool,
}

impl From<Estimator> for Request {
    fn from(estimator: Estimator) -> Self {
        Request {
            estimator,
            standardize: true,
            w_pos: None,
            w_neg: None,
            select: None,
            ebic_gamma: None,
            inference: false,
        }
    }
}

/// A request validated for one model on a stream of p features: what `extract` accepts.
#[derive(Debug, Clone, PartialEq)]
pub struct Checked {
    request: Request,
    p: usize,
}

/// A request validated for a whole path: what `extract_path` accepts.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckedPath(Checked);

impl Request {
    /// OLS with standardized columns: the commonest request, in one call.
    pub fn ols() -> Request {
        Estimator::Ols(least_squares::Ols {}).into()
    }
    /// Ridge at `lambda` with standardized columns.
    pub fn ridge(lambda: f64) -> Request {
        Estimator::Ridge(least_squares::Ridge { lambda }).into()
    }
    /// The same request with or without standardized columns. Without, penalties apply to
    /// the coefficients in the data's own units (scikit-learn's and linfa's convention);
    /// with (the default), to the coefficients of unit-variance columns (glmnet's).
    ///
    /// ```
    /// use ravel_core::solve::{Estimator, Request, penalized::Lasso};
    ///
    /// let raw = Request::from(Estimator::Lasso(Lasso::lambda(0.1))).with_standardize(false);
    /// assert!(!raw.standardize);
    /// ```
    pub fn with_standardize(mut self, standardize: bool) -> Request {
        self.standardize = standardize;
        self
    }

    /// The method this request extracts.
    pub fn method(&self) -> Method {
        self.estimator.method()
    }

    fn check_common(&self) -> Result<(), ParamError> {
        check::nonneg("w_pos", self.w_pos)?;
        check::nonneg("w_neg", self.w_neg)?;
        if self.w_pos == Some(0.0) && self.w_neg == Some(0.0) {
            return Err(ParamError::Invalid(
                "w_pos and w_neg cannot both be 0".into(),
            ));
        }
        Ok(())
    }

    /// Validates the request for one model on a stream with p features.
    pub fn check(&self, p: usize) -> Result<Checked, ParamError> {
        self.check_common()?;
        select::check_select(self, p)?;
        if self.select.is_none() {
            self.estimator.solver().check(p, false)?;
        }
        inference::check(self)?;
        Ok(Checked {
            request: self.clone(),
            p,
        })
    }

    /// Validates the request for the whole path on a stream with p features.
    pub fn check_path(&self, p: usize) -> Result<CheckedPath, ParamError> {
        self.check_common()?;
        select::check_select(self, p)?;
        if self.select.is_none() {
            self.estimator.solver().check(p, true)?;
        }
        if self.inference && self.select.is_none() {
            return Err(ParamError::Invalid(
                "inference is for one model: ask POST .../model (or ravel fit without --path), \
                 or select one point of the path (select)"
                    .into(),
            ));
        }
        inference::check(self)?;
        Ok(CheckedPath(Checked {
            request: self.clone(),
            p,
        }))
    }

    /// Checks the request against `stats` and extracts the model (the one-call form).
    pub fn model(&self, stats: &Stats, names: Option<&[String]>) -> Result<Model, ParamError> {
        model_from_stats(stats, &self.check(stats.p())?, names)
    }

    /// Checks the request against `stats` and extracts the whole path.
    pub fn path(&self, stats: &Stats, names: Option<&[String]>) -> Result<PathModel, ParamError> {
        path_from_stats(stats, &self.check_path(stats.p())?, names)
    }
}

impl Checked {
    /// The request that was checked.
    pub fn request(&self) -> &Request {
        &self.request
    }
    /// Its method.
    pub fn method(&self) -> Method {
        self.request.method()
    }
    fn same_p(&self, problem: &Problem) -> Result<(), ParamError> {
        if problem.p != self.p {
            return Err(ParamError::Invalid(format!(
                "the request was checked for p = {} but the problem has p = {}",
                self.p, problem.p
            )));
        }
        Ok(())
    }
}

impl CheckedPath {
    /// The request that was checked.
    pub fn request(&self) -> &Request {
        &self.0.request
    }
    /// Its method.
    pub fn method(&self) -> Method {
        self.0.method()
    }
}

/// Extracts the model a checked request asks for from a problem. `names` labels the
/// coefficients.
pub fn extract(
    problem: &Problem,
    req: &Checked,
    names: Option<&[String]>,
) -> Result<Model, ParamError> {
    req.same_p(problem)?;
    let start = Instant::now();
    if let Some(criterion) = req.request.select {
        if criterion.is_cv() {
            return Err(no_folds());
        }
        let mut model = select::chosen_model(path_of_problem(problem, &req.request, names)?)?;
        model.diagnostics.elapsed_ms = start.elapsed().as_secs_f64() * 1e3;
        return Ok(model);
    }
    let solver = req.request.estimator.solver();
    let (reduced, duplicates) = for_solver(problem, solver);
    let fit = solver.fit(&reduced);
    Ok(to_model(
        &reduced,
        &req.request,
        fit,
        &duplicates,
        names,
        start,
        false,
    ))
}

/// The error of a cv request where no fold statistics exist.
fn no_folds() -> ParamError {
    ParamError::Invalid(
        "select = cv needs fold statistics: set cv.folds = K on the stream (ravel fit: --folds K)"
            .into(),
    )
}

/// The problem `solver` works on: without duplicate columns when it merges them.
fn for_solver(problem: &Problem, solver: &dyn Solver) -> (Problem, Vec<Duplicate>) {
    if solver.merges_duplicates() {
        problem.without_duplicates()
    } else {
        (problem.clone(), Vec::new())
    }
}

/// The whole warm-started path of a method that has one.
pub fn extract_path(
    problem: &Problem,
    req: &CheckedPath,
    names: Option<&[String]>,
) -> Result<PathModel, ParamError> {
    let req = &req.0;
    req.same_p(problem)?;
    if req.request.select.is_some_and(|c| c.is_cv()) {
        return Err(no_folds());
    }
    path_of_problem(problem, &req.request, names)
}

/// The path (the k-path of an l0 family asked to select), each point with its information
/// criteria, and the selection of an aic / bic / ebic request.
pub(crate) fn path_of_problem(
    problem: &Problem,
    req: &Request,
    names: Option<&[String]>,
) -> Result<PathModel, ParamError> {
    path_choosing(problem, req, names, |points| {
        Ok(match req.select {
            Some(c) if !c.is_cv() => Some(select::select_by_criterion(points, req, c)),
            _ => None,
        })
    })
}

/// The path with the selection `choose` makes from its points. Standard errors (`inference`)
/// are computed for the chosen point only, not for every point of the path.
pub(crate) fn path_choosing(
    problem: &Problem,
    req: &Request,
    names: Option<&[String]>,
    choose: impl FnOnce(&[Model]) -> Result<Option<Selection>, ParamError>,
) -> Result<PathModel, ParamError> {
    let start = Instant::now();
    let solver = req.estimator.solver();
    let (reduced, duplicates) = for_solver(problem, solver);
    let fits = if req.select.is_some() {
        select::path_fits(&reduced, req)
    } else {
        solver.path(&reduced)
    };
    let plain = Request {
        inference: false,
        ..req.clone()
    };
    let mut points: Vec<Model> = fits
        .iter()
        .map(|fit| {
            let at = Instant::now();
            to_model(&reduced, &plain, fit.clone(), &duplicates, names, at, true)
        })
        .collect();
    let selection = choose(&points)?;
    if let (true, Some(sel)) = (req.inference, &selection)
        && let Some(fit) = fits.get(sel.chosen)
    {
        let at = Instant::now();
        points[sel.chosen] = to_model(&reduced, req, fit.clone(), &duplicates, names, at, true);
    }
    Ok(PathModel {
        method: req.method(),
        n: problem.n,
        points,
        selection,
        elapsed_ms: start.elapsed().as_secs_f64() * 1e3,
    })
}

/// k clamped to the columns left in the problem (neither constant nor duplicates), with a
/// note when it had to be.
pub(crate) fn usable_k(k: usize, g: &Gram, notes: &mut Vec<String>) -> usize {
    if k > g.m {
        notes.push(format!(
            "k = {k} but only {} columns are neither constant nor duplicates; returning {} \
             nonzeros",
            g.m, g.m
        ));
        return g.m;
    }
    k
}

/// The note a least-squares solve's jitter deserves (see `linear::solve_subset`), and the ridge
/// for `Diagnostics::singular_ridge` (the largest of a fit's solves).
pub(crate) fn jitter_note(jitter: f64, notes: &mut Vec<String>) -> Option<f64> {
    if jitter == f64::INFINITY {
        notes.push(
            "the least-squares system is singular even with jitter; coefficients set to 0".into(),
        );
        None
    } else if jitter > 0.0 {
        notes.push(format!(
            "the least-squares system is singular (p > n or collinear columns); added ridge {jitter:.3e}"
        ));
        Some(jitter)
    } else {
        None
    }
}

/// A fit as the `Model` users see: original units, names, diagnostics; with `criteria` the
/// information criteria of `select`, and the standard errors when the request asks.
#[allow(clippy::too_many_arguments)]
fn to_model(
    problem: &Problem,
    req: &Request,
    mut fit: Fit,
    duplicates: &[Duplicate],
    names: Option<&[String]>,
    start: Instant,
    criteria: bool,
) -> Model {
    let g = &problem.gram;
    let mse = (2.0 * g.loss(&fit.b)).max(0.0);
    let criteria = criteria.then(|| {
        let n = problem.n_eff;
        let gamma = req
            .ebic_gamma
            .unwrap_or_else(|| select::default_ebic_gamma(n, problem.p));
        let nonzeros = fit.b.iter().filter(|v| **v != 0.0).count();
        select::criteria(
            n,
            problem.p,
            select::df_of(problem, req, &fit),
            nonzeros,
            mse,
            gamma,
        )
    });
    let inference = if req.inference {
        match inference::inference(problem, req, &fit, mse, names) {
            Ok(inf) => Some(Box::new(inf)),
            Err(why) => {
                fit.notes.push(format!("no inference: {why}"));
                None
            }
        }
    } else {
        None
    };
    let r2 = if g.yy > 0.0 { 1.0 - mse / g.yy } else { 0.0 };
    let (beta, intercept) = problem.to_original(&fit.b);
    let coefficients: Vec<Coefficient> = beta
        .iter()
        .enumerate()
        .filter(|(_, v)| **v != 0.0)
        .map(|(index, &value)| Coefficient {
            feature: names
                .and_then(|n| n.get(index).cloned())
                .unwrap_or_else(|| index.to_string()),
            index,
            value,
        })
        .collect();
    let nonzeros = coefficients.len();
    let excluded_constant = (0..problem.p)
        .filter(|j| problem.active.binary_search(j).is_err())
        .filter(|j| duplicates.iter().all(|d| d.index != *j))
        .collect();
    let method = req.method();
    Model {
        method,
        k: nonzeros,
        lambda: fit.lambda,
        intercept,
        coefficients,
        n: problem.n,
        diagnostics: Diagnostics {
            method,
            lambda: fit.lambda,
            l1_ratio: fit.l1_ratio,
            gamma: fit.gamma,
            delta: fit.delta,
            certificate: fit.certificate,
            nonzeros,
            requested_k: fit.requested_k,
            k_exact: fit.k_exact,
            iterations: fit.iterations,
            duality_gap: fit.gap,
            convergence: fit.convergence,
            converged: fit.converged,
            train_mse: mse,
            r2,
            standardize: problem.standardized,
            refit: fit.refit,
            excluded_constant,
            excluded_duplicate: duplicates.to_vec(),
            singular_ridge: fit.singular_ridge,
            notes: low_r2_note(r2, nonzeros, fit.notes),
            criteria,
            elapsed_ms: start.elapsed().as_secs_f64() * 1e3,
        },
        selection: None,
        inference,
    }
}

/// Below this R^2 a model with nonzeros gets a note (issue 11 items 5 and 9): elastic net at
/// a k that leaves it a near-null model, or least squares under heavy-tailed noise (Cauchy
/// noise on paper 003's design: R^2 about 0.03, 20% detection) answer without any other sign.
pub const LOW_R2: f64 = 0.05;

/// `notes` with the low-R^2 warning added when it applies. Why no tail test: the running
/// statistics are moments up to the second (E[x x^T], E[x y], E[y^2]); a residual's kurtosis
/// needs fourth moments of x and y, which are not kept.
fn low_r2_note(r2: f64, nonzeros: usize, mut notes: Vec<String>) -> Vec<String> {
    if nonzeros > 0 && r2 < LOW_R2 {
        notes.push(format!(
            "R^2 = {r2:.3}: the model explains almost none of the variance of y; heavy-tailed \
             noise or outliers (least squares is not robust to them, and the statistics hold \
             no fourth moments to test the tails), a target unrelated to the features, or a \
             penalty that shrinks too much (elastic net: try l1_ratio near 1) can cause it"
        ));
    }
    notes
}

/// The Gram problem `stats` define under `req` (standardization, class weights).
pub fn problem_of(stats: &Stats, req: &Request) -> Result<Problem, ParamError> {
    Ok(stats.problem(
        req.standardize,
        req.w_pos.unwrap_or(1.0),
        req.w_neg.unwrap_or(1.0),
    )?)
}

/// Builds the problem and extracts the model; `elapsed_ms` covers both.
pub fn model_from_stats(
    stats: &Stats,
    req: &Checked,
    names: Option<&[String]>,
) -> Result<Model, ParamError> {
    let start = Instant::now();
    let problem = problem_of(stats, &req.request)?;
    let mut model = extract(&problem, req, names)?;
    model.diagnostics.elapsed_ms = start.elapsed().as_secs_f64() * 1e3;
    Ok(model)
}

/// `model_from_stats` for a stream that may keep cross-validation folds: with folds, a
/// select = cv | cv_1se request is answered from them (`select::cross_validate_folds`);
/// everything else as `model_from_stats`.
pub fn model_from_folds(
    stats: &Stats,
    folds: Option<&crate::stats::FoldSet>,
    req: &Checked,
    names: Option<&[String]>,
) -> Result<Model, ParamError> {
    match folds {
        Some(f) if req.request.select.is_some_and(|c| c.is_cv()) => {
            let path = select::cross_validate_folds(stats, f, &CheckedPath(req.clone()), names)?;
            select::chosen_model(path)
        }
        _ => model_from_stats(stats, req, names),
    }
}

/// `path_from_stats` for a stream that may keep cross-validation folds (`model_from_folds`).
pub fn path_from_folds(
    stats: &Stats,
    folds: Option<&crate::stats::FoldSet>,
    req: &CheckedPath,
    names: Option<&[String]>,
) -> Result<PathModel, ParamError> {
    match folds {
        Some(f) if req.0.request.select.is_some_and(|c| c.is_cv()) => {
            select::cross_validate_folds(stats, f, req, names)
        }
        _ => path_from_stats(stats, req, names),
    }
}

/// Builds the problem and extracts the whole path; `elapsed_ms` covers both.
pub fn path_from_stats(
    stats: &Stats,
    req: &CheckedPath,
    names: Option<&[String]>,
) -> Result<PathModel, ParamError> {
    let start = Instant::now();
    let problem = problem_of(stats, &req.0.request)?;
    let mut path = extract_path(&problem, req, names)?;
    path.elapsed_ms = start.elapsed().as_secs_f64() * 1e3;
    Ok(path)
}

// The library's one-call forms, on the statistics types (stats sits below solve: the methods
// live here).
impl RunningStats {
    /// Extracts the model `request` asks for from these statistics (checked against p first):
    /// the library's one-call form of `solve::model_from_stats`.
    ///
    /// ```
    /// use ndarray::array;
    /// use ravel_core::solve::{Estimator, Request, penalized::Lasso};
    /// use ravel_core::stats::{AlphaSchedule, RunningStats};
    ///
    /// let x = array![[1.0, 0.0, 0.3], [0.0, 1.0, 0.1], [1.0, 1.0, 0.7], [2.0, 1.0, 0.2], [0.5, 0.0, 0.9]];
    /// let y = array![1.0, 2.0, 3.0, 4.0, 0.5];
    /// let mut stats = RunningStats::new(3, AlphaSchedule::Plain);
    /// stats.update(x.view(), y.view())?;
    /// let lasso = Request::from(Estimator::Lasso(Lasso::k(2)));
    /// let model = stats.extract(&lasso)?;
    /// assert_eq!(model.k, 2);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn extract(&self, request: &Request) -> Result<Model, ParamError> {
        self.extract_named(request, None)
    }

    /// `extract`, with the coefficients labelled by `names` (one per feature; else by index).
    pub fn extract_named(
        &self,
        request: &Request,
        names: Option<&[String]>,
    ) -> Result<Model, ParamError> {
        let checked = request.check(self.p())?;
        let start = std::time::Instant::now();
        let problem = Problem::regression(self, request.standardize)?;
        let mut model = extract(&problem, &checked, names)?;
        model.diagnostics.elapsed_ms = start.elapsed().as_secs_f64() * 1e3;
        Ok(model)
    }
}

impl Stats {
    /// Checks `request` against these statistics and extracts its model, whichever the task
    /// (`Request::model` without feature names).
    ///
    /// ```
    /// use ndarray::array;
    /// use ravel_core::{Stats, Task};
    /// use ravel_core::solve::Request;
    /// use ravel_core::stats::AlphaSchedule;
    ///
    /// let mut stats = Stats::new(Task::Classification, 1, AlphaSchedule::Plain);
    /// stats.update(array![[1.0], [2.0], [-1.0], [-2.0]].view(), array![1.0, 1.0, -1.0, 0.0].view())?;
    /// let model = stats.extract(&Request::ols())?;
    /// assert!(model.coefficients[0].value > 0.0);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn extract(&self, request: &Request) -> Result<Model, ParamError> {
        request.model(self, None)
    }
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
