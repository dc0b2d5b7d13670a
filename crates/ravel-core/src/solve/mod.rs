//! Model extraction from running averages: one entry point, `extract`, for every method, and
//! `extract_path` for the whole lambda path. The answer is the JSON `Model` that `ravel fit`
//! prints and the HTTP API returns.
//!
//! Files: `problem` builds the Gram form (standardization, classes, constant columns),
//! `linear` OLS/ridge/refits, `threshold` OLSth and FSA, `penalized` coordinate descent for
//! Lasso, elastic net, MCP and SCAD with the k-sparsity search, `cholesky` the factor their
//! active-set step updates as columns enter and leave. `frank_wolfe` (constrained Lasso, paper
//! 004), `iht` (IHT/HTP with the sparse duality certificate, paper 002 ch. 3) and `ksupport`
//! (k-support-norm regression by k-FCFW, paper 002 ch. 2) are functions on a `Gram`, not yet
//! behind `extract`.

pub mod cholesky;
pub mod frank_wolfe;
pub mod iht;
pub mod ksupport;
pub mod penalized;
pub mod threshold;

pub use crate::gram::{Gram, Problem, ProblemError, linear};
pub use crate::model::{Coefficient, Diagnostics, Model, PathModel};
use crate::stats::Stats;
use penalized::{CdOptions, Penalty};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;
use std::time::Instant;

/// The estimators ravel extracts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Method {
    Ols,
    Ridge,
    Olsth,
    Fsa,
    Lasso,
    ElasticNet,
    Mcp,
    Scad,
}

impl Method {
    pub const ALL: [Method; 8] = [
        Method::Ols,
        Method::Ridge,
        Method::Olsth,
        Method::Fsa,
        Method::Lasso,
        Method::ElasticNet,
        Method::Mcp,
        Method::Scad,
    ];
    pub fn name(&self) -> &'static str {
        match self {
            Method::Ols => "ols",
            Method::Ridge => "ridge",
            Method::Olsth => "olsth",
            Method::Fsa => "fsa",
            Method::Lasso => "lasso",
            Method::ElasticNet => "elastic-net",
            Method::Mcp => "mcp",
            Method::Scad => "scad",
        }
    }
    /// Methods with a lambda path.
    pub fn is_penalized(&self) -> bool {
        matches!(
            self,
            Method::Lasso | Method::ElasticNet | Method::Mcp | Method::Scad
        )
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Method {
    type Err = ParamError;
    fn from_str(s: &str) -> Result<Self, ParamError> {
        let s = s.trim().to_ascii_lowercase();
        Method::ALL
            .iter()
            .copied()
            .find(|m| m.name() == s)
            .or(match s.as_str() {
                "elasticnet" | "enet" | "elastic_net" => Some(Method::ElasticNet),
                _ => None,
            })
            .ok_or(ParamError::UnknownMethod(s))
    }
}

/// A request that cannot be served; the message says what to change.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ParamError {
    #[error(
        "unknown method '{0}': expected one of ols, ridge, olsth, fsa, lasso, elastic-net, mcp, scad"
    )]
    UnknownMethod(String),
    #[error("k = {k} is larger than the number of features p = {p}")]
    KTooLarge { k: usize, p: usize },
    #[error("k must be at least 1")]
    KZero,
    #[error("{name} must be a finite number >= 0, got {value}")]
    Negative { name: &'static str, value: f64 },
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Problem(#[from] ProblemError),
}

/// What to extract: validated once by `check` before any solver runs.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Params {
    pub method: Method,
    /// Exact number of nonzeros wanted.
    #[serde(default)]
    pub k: Option<usize>,
    /// Penalty level (ridge: required; penalized: instead of k; olsth: ridge of the first fit).
    #[serde(default)]
    pub lambda: Option<f64>,
    /// Elastic net mixing in (0, 1]; default 0.5.
    #[serde(default)]
    pub l1_ratio: Option<f64>,
    /// MCP (> 1, default 3) or SCAD (> 2, default 3.7) concavity.
    #[serde(default)]
    pub gamma: Option<f64>,
    /// Refit OLS on the selected support (penalized methods; OLSth/FSA always refit).
    #[serde(default)]
    pub refit: bool,
    /// Scale columns to unit variance before the fit (coefficients come back in original units).
    #[serde(default = "yes")]
    pub standardize: bool,
    /// Lambda path length (default 100) and lambda_min / lambda_max (default 1e-4 when n > p,
    /// else 1e-2, as glmnet).
    #[serde(default)]
    pub path_points: Option<usize>,
    #[serde(default)]
    pub lambda_min_ratio: Option<f64>,
    /// FSA iterations (default 300) and annealing parameter mu (default 100).
    #[serde(default)]
    pub fsa_iterations: Option<usize>,
    #[serde(default)]
    pub fsa_mu: Option<f64>,
    /// Classification: class weights of positives and negatives (default 1 each).
    #[serde(default)]
    pub w_pos: Option<f64>,
    #[serde(default)]
    pub w_neg: Option<f64>,
    /// Convergence tolerance (relative duality gap for Lasso / elastic net); default 1e-10.
    #[serde(default)]
    pub tol: Option<f64>,
}

fn yes() -> bool {
    true
}

impl Params {
    pub fn new(method: Method) -> Self {
        Params {
            method,
            k: None,
            lambda: None,
            l1_ratio: None,
            gamma: None,
            refit: false,
            standardize: true,
            path_points: None,
            lambda_min_ratio: None,
            fsa_iterations: None,
            fsa_mu: None,
            w_pos: None,
            w_neg: None,
            tol: None,
        }
    }
    pub fn with_k(mut self, k: usize) -> Self {
        self.k = Some(k);
        self
    }
    pub fn with_lambda(mut self, lambda: f64) -> Self {
        self.lambda = Some(lambda);
        self
    }

    /// Validates the request against a stream with p features. `for_path` allows neither k
    /// nor lambda (the whole path is wanted).
    pub fn check(&self, p: usize, for_path: bool) -> Result<(), ParamError> {
        let nonneg = |name: &'static str, v: Option<f64>| match v {
            Some(x) if !(x.is_finite() && x >= 0.0) => Err(ParamError::Negative { name, value: x }),
            _ => Ok(()),
        };
        nonneg("lambda", self.lambda)?;
        nonneg("w_pos", self.w_pos)?;
        nonneg("w_neg", self.w_neg)?;
        nonneg("tol", self.tol)?;
        if let Some(k) = self.k {
            if k == 0 {
                return Err(ParamError::KZero);
            }
            if k > p {
                return Err(ParamError::KTooLarge { k, p });
            }
        }
        if let Some(r) = self.l1_ratio {
            if self.method != Method::ElasticNet {
                return Err(ParamError::Invalid(format!(
                    "l1_ratio applies to elastic-net only, not {}",
                    self.method
                )));
            }
            if !(r.is_finite() && r > 0.0 && r <= 1.0) {
                return Err(ParamError::Invalid(format!(
                    "l1_ratio must lie in (0, 1], got {r}"
                )));
            }
        }
        if let Some(gm) = self.gamma {
            let min = match self.method {
                Method::Mcp => 1.0,
                Method::Scad => 2.0,
                _ => {
                    return Err(ParamError::Invalid(format!(
                        "gamma applies to mcp and scad only, not {}",
                        self.method
                    )));
                }
            };
            if !(gm.is_finite() && gm > min) {
                return Err(ParamError::Invalid(format!(
                    "gamma for {} must be > {min}, got {gm}",
                    self.method
                )));
            }
        }
        if let Some(r) = self.lambda_min_ratio
            && !(r.is_finite() && r > 0.0 && r < 1.0)
        {
            return Err(ParamError::Invalid(format!(
                "lambda_min_ratio must lie in (0, 1), got {r}"
            )));
        }
        if matches!(self.path_points, Some(0)) {
            return Err(ParamError::Invalid("path_points must be at least 1".into()));
        }
        if matches!(self.fsa_iterations, Some(0)) {
            return Err(ParamError::Invalid(
                "fsa_iterations must be at least 1".into(),
            ));
        }
        if let Some(mu) = self.fsa_mu
            && !(mu.is_finite() && mu >= 0.0)
        {
            return Err(ParamError::Negative {
                name: "fsa_mu",
                value: mu,
            });
        }
        if self.w_pos == Some(0.0) && self.w_neg == Some(0.0) {
            return Err(ParamError::Invalid(
                "w_pos and w_neg cannot both be 0".into(),
            ));
        }
        let m = self.method;
        if for_path {
            if !m.is_penalized() {
                return Err(ParamError::Invalid(format!(
                    "{m} has no lambda path; use lasso, elastic-net, mcp or scad"
                )));
            }
            return Ok(());
        }
        match m {
            Method::Ols if self.k.is_some() || self.lambda.is_some() => Err(ParamError::Invalid(
                "ols takes neither k nor lambda (use olsth for k nonzeros, ridge for a penalty)"
                    .into(),
            )),
            Method::Ridge if self.k.is_some() => Err(ParamError::Invalid(
                "ridge is dense: it takes lambda, not k".into(),
            )),
            Method::Ridge if self.lambda.is_none() => {
                Err(ParamError::Invalid("ridge needs lambda".into()))
            }
            Method::Olsth | Method::Fsa if self.k.is_none() => {
                Err(ParamError::Invalid(format!("{m} needs k")))
            }
            Method::Fsa if self.lambda.is_some() => {
                Err(ParamError::Invalid("fsa takes k, not lambda".into()))
            }
            _ if m.is_penalized() && self.k.is_some() == self.lambda.is_some() => {
                Err(ParamError::Invalid(format!(
                    "{m} needs exactly one of k or lambda (or ask for the whole path)"
                )))
            }
            _ => Ok(()),
        }
    }

    fn penalty(&self) -> Option<Penalty> {
        Some(match self.method {
            Method::Lasso => Penalty::Lasso,
            Method::ElasticNet => Penalty::ElasticNet {
                l1_ratio: self.l1_ratio.unwrap_or(0.5),
            },
            Method::Mcp => Penalty::Mcp {
                gamma: self.gamma.unwrap_or(3.0),
            },
            Method::Scad => Penalty::Scad {
                gamma: self.gamma.unwrap_or(3.7),
            },
            _ => return None,
        })
    }

    fn cd_options(&self) -> CdOptions {
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
}

/// Raw outcome of a solver, in solver units, before it becomes a `Model`.
struct Fit {
    b: Vec<f64>,
    lambda: Option<f64>,
    iterations: usize,
    gap: Option<f64>,
    convergence: Option<f64>,
    converged: bool,
    k_exact: Option<bool>,
    refit: bool,
    notes: Vec<String>,
}

/// Extracts the model `params` asks for from a problem. `names` labels the coefficients.
pub fn extract(
    problem: &Problem,
    params: &Params,
    names: Option<&[String]>,
) -> Result<Model, ParamError> {
    params.check(problem.p, false)?;
    let start = Instant::now();
    let g = &problem.gram;
    let mut notes = Vec::new();
    let mut k = params.k;
    if let Some(kk) = k
        && kk > g.m
    {
        notes.push(format!(
            "k = {kk} but only {} columns are not constant; returning {} nonzeros",
            g.m, g.m
        ));
        k = Some(g.m);
    }
    let fit = match params.method {
        Method::Ols | Method::Ridge => {
            let lambda = params.lambda.unwrap_or(0.0);
            let all: Vec<usize> = (0..g.m).collect();
            let sol = linear::solve_subset(g, &all, lambda);
            jitter_note(sol.jitter, &mut notes);
            let measure = grad_norm(g, &sol.b, lambda);
            Fit {
                b: sol.b,
                lambda: params.lambda,
                iterations: 1,
                gap: None,
                convergence: Some(measure),
                converged: sol.jitter.is_finite(),
                k_exact: None,
                refit: false,
                notes: vec![],
            }
        }
        Method::Olsth | Method::Fsa => {
            let k = k.unwrap_or(0);
            let sol = if params.method == Method::Olsth {
                threshold::olsth(g, k, params.lambda.unwrap_or(0.0))
            } else {
                let opt = threshold::FsaOptions {
                    iterations: params.fsa_iterations.unwrap_or(300),
                    mu: params.fsa_mu.unwrap_or(100.0),
                    ..threshold::FsaOptions::default()
                };
                threshold::fsa(g, k, &opt)
            };
            jitter_note(sol.jitter, &mut notes);
            Fit {
                b: sol.b,
                lambda: params.lambda,
                iterations: sol.iterations,
                gap: None,
                convergence: Some(sol.measure),
                converged: sol.jitter.is_finite(),
                k_exact: Some(true),
                refit: true,
                notes: vec![],
            }
        }
        _ => {
            let pen = params.penalty().expect("penalized method");
            let opt = params.cd_options();
            let (point, k_exact) = if let Some(k) = k {
                let sol = penalized::solve_for_k(
                    g,
                    &pen,
                    k,
                    params.ratio(problem),
                    params.path_points.unwrap_or(100),
                    &opt,
                );
                if !sol.exact {
                    notes.push(format!(
                        "no lambda gives exactly {k} nonzeros; returning the closest below ({})",
                        sol.point.b.iter().filter(|v| **v != 0.0).count()
                    ));
                }
                (sol.point, Some(sol.exact))
            } else {
                let lambda = params.lambda.unwrap_or(0.0);
                let mut state = penalized::CdState::zeros(g);
                let info = state.solve(g, &pen, lambda, &opt);
                (
                    penalized::PathPoint {
                        lambda,
                        b: state.b,
                        info,
                    },
                    None,
                )
            };
            penalized_fit(g, &pen, point, k_exact, params.refit, &mut notes)
        }
    };
    let mut fit = fit;
    fit.notes.append(&mut notes);
    Ok(to_model(problem, params, fit, names, start))
}

/// The whole warm-started path of a penalized method.
pub fn extract_path(
    problem: &Problem,
    params: &Params,
    names: Option<&[String]>,
) -> Result<PathModel, ParamError> {
    params.check(problem.p, true)?;
    let start = Instant::now();
    let g = &problem.gram;
    let pen = params.penalty().expect("checked: penalized");
    let lambdas = penalized::lambda_grid(
        pen.lambda_max(g),
        params.ratio(problem),
        params.path_points.unwrap_or(100),
    );
    let points = penalized::path(g, &pen, &lambdas, &params.cd_options())
        .into_iter()
        .map(|pt| {
            let t = Instant::now();
            let mut notes = vec![];
            let fit = penalized_fit(g, &pen, pt, None, params.refit, &mut notes);
            let mut fit = fit;
            fit.notes = notes;
            to_model(problem, params, fit, names, t)
        })
        .collect();
    Ok(PathModel {
        method: params.method.name().to_string(),
        n: problem.n,
        points,
        elapsed_ms: start.elapsed().as_secs_f64() * 1e3,
    })
}

fn penalized_fit(
    g: &Gram,
    pen: &Penalty,
    point: penalized::PathPoint,
    k_exact: Option<bool>,
    refit: bool,
    notes: &mut Vec<String>,
) -> Fit {
    let convex = pen.is_convex();
    let mut b = point.b;
    if refit {
        let support: Vec<usize> = (0..g.m).filter(|&j| b[j] != 0.0).collect();
        let sol = linear::solve_subset(g, &support, 0.0);
        jitter_note(sol.jitter, notes);
        b = sol.b;
    }
    Fit {
        b,
        lambda: Some(point.lambda),
        iterations: point.info.iterations,
        gap: convex.then_some(point.info.measure),
        convergence: (!convex).then_some(point.info.measure),
        converged: point.info.converged,
        k_exact,
        refit,
        notes: vec![],
    }
}

fn jitter_note(jitter: f64, notes: &mut Vec<String>) {
    if jitter == f64::INFINITY {
        notes.push(
            "the least-squares system is singular even with jitter; coefficients set to 0".into(),
        );
    } else if jitter > 0.0 {
        notes.push(format!(
            "the least-squares system is singular (p > n or collinear columns); added ridge {jitter:.3e}"
        ));
    }
}

fn grad_norm(g: &Gram, b: &[f64], ridge: f64) -> f64 {
    g.gradient(b)
        .iter()
        .zip(b)
        .map(|(gi, bi)| (gi + ridge * bi).abs())
        .fold(0.0, f64::max)
}

fn to_model(
    problem: &Problem,
    params: &Params,
    fit: Fit,
    names: Option<&[String]>,
    start: Instant,
) -> Model {
    let g = &problem.gram;
    let mse = (2.0 * g.loss(&fit.b)).max(0.0);
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
        .collect();
    let pen = params.penalty();
    Model {
        method: params.method.name().to_string(),
        k: nonzeros,
        lambda: fit.lambda,
        intercept,
        coefficients,
        n: problem.n,
        diagnostics: Diagnostics {
            method: params.method.name().to_string(),
            lambda: fit.lambda,
            l1_ratio: match pen {
                Some(Penalty::ElasticNet { l1_ratio }) => Some(l1_ratio),
                _ => None,
            },
            gamma: match pen {
                Some(Penalty::Mcp { gamma }) | Some(Penalty::Scad { gamma }) => Some(gamma),
                _ => None,
            },
            nonzeros,
            requested_k: params.k,
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
            notes: fit.notes,
            elapsed_ms: start.elapsed().as_secs_f64() * 1e3,
        },
    }
}

/// The Gram problem `stats` define under `params` (standardization, class weights); `params`
/// is assumed checked.
pub fn problem_of(stats: &Stats, params: &Params) -> Result<Problem, ParamError> {
    Ok(stats.problem(
        params.standardize,
        params.w_pos.unwrap_or(1.0),
        params.w_neg.unwrap_or(1.0),
    )?)
}

/// Builds the problem and extracts the model; `elapsed_ms` covers both.
pub fn model_from_stats(
    stats: &Stats,
    params: &Params,
    names: Option<&[String]>,
) -> Result<Model, ParamError> {
    let start = Instant::now();
    params.check(stats.p(), false)?;
    let problem = problem_of(stats, params)?;
    let mut model = extract(&problem, params, names)?;
    model.diagnostics.elapsed_ms = start.elapsed().as_secs_f64() * 1e3;
    Ok(model)
}

/// Builds the problem and extracts the whole path; `elapsed_ms` covers both.
pub fn path_from_stats(
    stats: &Stats,
    params: &Params,
    names: Option<&[String]>,
) -> Result<PathModel, ParamError> {
    let start = Instant::now();
    params.check(stats.p(), true)?;
    let problem = problem_of(stats, params)?;
    let mut path = extract_path(&problem, params, names)?;
    path.elapsed_ms = start.elapsed().as_secs_f64() * 1e3;
    Ok(path)
}
