//! Which model? Information criteria along a path and exact K-fold cross-validation, both from
//! the running statistics alone (issue 17).
//!
//! Every model's residual sum of squares comes from the moments: with the intercept profiled
//! out, RSS/n = E[(y - b0 - x b)^2] = 2 x (the Gram loss) (gram/mod.rs), which is
//! `Diagnostics::train_mse` (`Problem::mse`: exact in exact arithmetic; in doubles it cancels
//! when R^2 is near 1, so streams of p <= 16 compute it in double-double). The criteria (n the effective sample size, s the nonzeros):
//!
//! - AIC  = n ln(RSS/n) + 2 df
//! - BIC  = n ln(RSS/n) + df ln n
//! - EBIC = BIC + 2 gamma ln C(p, s)  (Chen & Chen 2008, eq. (2); p the stream's features)
//!
//! Degrees of freedom: the nonzeros for Lasso (Zou, Hastie & Tibshirani 2007, unbiased),
//! for MCP and SCAD (the convention of ncvreg), for Frank-Wolfe and for every refitted or l0
//! model (OLSth, FSA, IHT, HTP, a refit: the size of the support, which ignores the search and
//! so favours larger models); for the elastic net tr(Q_A (Q_A + lambda (1 - l1_ratio) I)^-1)
//! on its active set A (Zou & Hastie 2005, section 3.4). The EBIC's default gamma is
//! 1 - ln n / (2 ln p) clipped to [0, 1]: Chen & Chen's bound for consistency when p = n^kappa
//! (gamma > 1 - 1/(2 kappa)), which is BIC when p <= sqrt(n) and grows towards 1 as p
//! outgrows n; `ebic_gamma` sets it.
//!
//! Paths: the penalized families' lambda path (fw-lasso: delta; refitted by default under
//! `select`, `with_select_defaults`), and for the l0 families (OLSth, FSA, IHT, HTP) the
//! k-path k = 1..=k, each point the fit of that k alone, computed together (`kpath`). A
//! request with `select` and no method gets OLSth's k-path (`DEFAULT_METHOD`).
//!
//! Cross-validation: K fold statistics (`Stats` each) beside nothing else; the training
//! statistics of fold j are the merge of the other folds (the exact merge of scale-out), the
//! model at each point of the full data's lambda grid is fitted on them (standardized by the
//! training folds' own sd, as glmnet and a StandardScaler fitted on the training rows do), and
//! its held-out error is exact from fold j's moments:
//! E_j[(y - b0 - x b)^2] = Var_j(y - x b) + (E_j\[y\] - b0 - E_j\[x\] b)^2. The mean and standard
//! error over folds are cv.glmnet's: cvm = sum_j n_j e_j / sum_j n_j and
//! cvse = sqrt(sum_j n_j (e_j - cvm)^2 / sum_j n_j / (K - 1)); `cv` takes the minimum,
//! `cv_1se` the sparsest point within one standard error of it. A stream's folds
//! (`stats::FoldSet`, `cross_validate_folds`) weigh by their shares of the stream's weight
//! instead of their rows, in the training merges and in the mean (n_j = share_j x the
//! stream's effective rows; the rows themselves for plain averages). Classification: the
//! class-weighted squared loss of paper 003 section 3.6 as the held-out error.

mod cv;
pub mod kpath;

pub use cv::{cross_validate, cross_validate_folds};

use super::{
    Estimator, Fit, ParamError, Problem, Request, check, for_solver, limits, problem_of, to_model,
};
use crate::gram::Moments;
use crate::model::{Criteria, CurvePoint, Method, Model, PathModel, Selection};
use crate::stats::Stats;
use serde::{Deserialize, Serialize};
use std::time::Instant;

/// The most folds a cross-validation may have.
pub const MAX_FOLDS: usize = 20;

/// How `select` chooses a point of the path.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Criterion {
    /// Akaike's information criterion.
    Aic,
    /// Bayesian information criterion.
    Bic,
    /// Extended BIC (for p large against n).
    Ebic,
    /// The minimum of the K-fold cross-validation error.
    Cv,
    /// The sparsest point within one standard error of the CV minimum (glmnet's rule).
    #[serde(rename = "cv_1se")]
    Cv1se,
}

impl Criterion {
    /// The name in a request (`aic`, `bic`, `ebic`, `cv`, `cv_1se`).
    pub fn name(&self) -> &'static str {
        match self {
            Criterion::Aic => "aic",
            Criterion::Bic => "bic",
            Criterion::Ebic => "ebic",
            Criterion::Cv => "cv",
            Criterion::Cv1se => "cv_1se",
        }
    }
    /// Whether the criterion needs fold statistics.
    pub fn is_cv(&self) -> bool {
        matches!(self, Criterion::Cv | Criterion::Cv1se)
    }
}

impl std::str::FromStr for Criterion {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.trim().to_ascii_lowercase().replace('-', "_").as_str() {
            "aic" => Ok(Criterion::Aic),
            "bic" => Ok(Criterion::Bic),
            "ebic" => Ok(Criterion::Ebic),
            "cv" => Ok(Criterion::Cv),
            "cv_1se" | "cv1se" => Ok(Criterion::Cv1se),
            other => Err(format!(
                "unknown criterion '{other}': expected aic, bic, ebic, cv or cv_1se"
            )),
        }
    }
}

/// The fold of row `index` among `k`: a stable hash (splitmix64's finalizer) of the index, so
/// the same row always lands in the same fold and a periodic file order does not line up with
/// the folds. `ravel fit --folds K` numbers rows from 0 in file order.
pub fn fold_of(index: u64, k: usize) -> usize {
    (splitmix64(index) % k.max(1) as u64) as usize
}

/// splitmix64's output function (Steele, Lea & Flood 2014) of `x`.
pub fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// EBIC's default gamma for n rows and p features (module header).
pub fn default_ebic_gamma(n: f64, p: usize) -> f64 {
    if p < 2 || n <= 1.0 {
        return 0.0;
    }
    (1.0 - n.ln() / (2.0 * (p as f64).ln())).clamp(0.0, 1.0)
}

/// ln C(p, s), summed term by term (exact to rounding; s <= p).
pub fn ln_choose(p: usize, s: usize) -> f64 {
    let s = s.min(p - s.min(p));
    (1..=s).map(|i| ((p - s + i) as f64 / i as f64).ln()).sum()
}

/// The criteria of a model with residual mean square `mse` over `n` (effective) rows.
pub fn criteria(n: f64, p: usize, df: f64, nonzeros: usize, mse: f64, gamma: f64) -> Criteria {
    // A perfect fit has RSS 0; the smallest positive double keeps the logarithm finite.
    let fit = n * mse.max(f64::MIN_POSITIVE).ln();
    let bic = fit + df * n.ln();
    Criteria {
        df,
        rss: n * mse,
        n_eff: n,
        aic: fit + 2.0 * df,
        bic,
        ebic: bic + 2.0 * gamma * ln_choose(p, nonzeros.min(p)),
        ebic_gamma: gamma,
    }
}

/// The degrees of freedom rule of a method, in words (`Selection::df_rule`).
pub fn df_rule(req: &Request) -> &'static str {
    match &req.estimator {
        Estimator::ElasticNet(e) if !e.refits() => {
            "tr(Q_A (Q_A + lambda (1 - l1_ratio) I)^-1) over the active set (Zou & Hastie 2005)"
        }
        Estimator::Lasso(e) if !e.refits() => "nonzeros (Zou, Hastie & Tibshirani 2007)",
        Estimator::Mcp(_) | Estimator::Scad(_) if !refits(req) => "nonzeros (as ncvreg)",
        Estimator::FwLasso(_) => "nonzeros",
        _ => {
            "support size of a least-squares fit on a selected support; it ignores the search, \
             so it favours larger models"
        }
    }
}

fn refits(req: &Request) -> bool {
    match &req.estimator {
        Estimator::Lasso(e) => e.refits(),
        Estimator::ElasticNet(e) => e.refits(),
        Estimator::Mcp(e) => e.refits(),
        Estimator::Scad(e) => e.refits(),
        _ => true,
    }
}

/// Degrees of freedom of one fit on `problem` (module header).
pub(crate) fn df_of(problem: &Problem, req: &Request, fit: &Fit) -> f64 {
    let g = &problem.gram;
    let support: Vec<usize> = (0..g.m).filter(|&j| fit.b[j] != 0.0).collect();
    if let Estimator::ElasticNet(e) = &req.estimator
        && !e.refits()
        && !support.is_empty()
    {
        let l2 = fit.lambda.unwrap_or(0.0) * (1.0 - fit.l1_ratio.unwrap_or(0.5));
        return ridge_trace(g, &support, l2);
    }
    support.len() as f64
}

/// tr(Q_SS (Q_SS + mu I)^-1) = sum_i ev_i / (ev_i + mu) over the eigenvalues of Q_SS.
pub(crate) fn ridge_trace(g: &crate::gram::Gram, support: &[usize], mu: f64) -> f64 {
    let s = support.len();
    if mu == 0.0 {
        return s as f64;
    }
    let a = faer::Mat::from_fn(s, s, |i, j| g.at(support[i], support[j]));
    match a.self_adjoint_eigenvalues(faer::Side::Lower) {
        Ok(ev) => ev.iter().map(|&e| e.max(0.0) / (e.max(0.0) + mu)).sum(),
        Err(_) => s as f64,
    }
}

/// Whether the estimator's path is a k-path (one fit per k = 1..=k).
pub(crate) fn is_k_family(est: &Estimator) -> bool {
    matches!(
        est,
        Estimator::Olsth(_) | Estimator::Fsa(_) | Estimator::Iht(_) | Estimator::Htp(_)
    )
}

/// The largest k of a k-family request.
fn k_max(est: &Estimator) -> usize {
    match est {
        Estimator::Olsth(e) => e.k,
        Estimator::Fsa(e) => e.k,
        Estimator::Iht(e) => e.0.k,
        Estimator::Htp(e) => e.0.k,
        _ => 0,
    }
}

/// The same estimator at another k.
fn at_k(est: &Estimator, k: usize) -> Estimator {
    let mut e = est.clone();
    match &mut e {
        Estimator::Olsth(s) => s.k = k,
        Estimator::Fsa(s) => s.k = k,
        Estimator::Iht(s) => s.0.k = k,
        Estimator::Htp(s) => s.0.k = k,
        _ => {}
    }
    e
}

/// Checks what `select` adds to a request: a method with a path or a k-path, and gamma's range.
pub(crate) fn check_select(req: &Request, p: usize) -> Result<(), ParamError> {
    check::within("ebic_gamma", req.ebic_gamma, 0.0, 1.0)?;
    let Some(criterion) = req.select else {
        if req.ebic_gamma.is_some() {
            return Err(ParamError::Invalid(
                "ebic_gamma applies to a select request (select = ebic)".into(),
            ));
        }
        return Ok(());
    };
    let est = &req.estimator;
    if is_k_family(est) {
        if k_max(est) > limits::MAX_PATH_POINTS {
            return Err(ParamError::OutOfBounds {
                name: "k",
                value: k_max(est).to_string(),
                bound: format!(
                    "with select, k is the largest k tried (k = 1..=k): at most {}",
                    limits::MAX_PATH_POINTS
                ),
            });
        }
        return est.solver().check(p, false);
    }
    match est {
        Estimator::Lasso(_) | Estimator::ElasticNet(_) | Estimator::Mcp(_) | Estimator::Scad(_) => {
            est.solver().check(p, true)
        }
        Estimator::FwLasso(_) if !criterion.is_cv() => est.solver().check(p, true),
        Estimator::FwLasso(_) => Err(ParamError::Invalid(
            "select = cv is for lasso, elastic-net, mcp, scad (over lambda) and olsth, fsa, iht, \
             htp (over k); fw-lasso takes aic, bic or ebic"
                .into(),
        )),
        other => Err(ParamError::Invalid(format!(
            "{} has no path to select from: select applies to lasso, elastic-net, mcp, scad, \
             fw-lasso (their path, without k or lambda) and to olsth, fsa, iht, htp (k = 1..=k)",
            other.method()
        ))),
    }
}

/// The method a `select` request that names none gets (issue 34): OLSth's k-path k = 1..=K,
/// K = `default_k_max(p, n)`. Measured (docs/selection.md, `examples/detection_select.rs`):
/// with EBIC on paper 003's Table 2 design it chooses all 100 true features and at most 3
/// false ones at n >= 3000, where Lasso's refitted path chooses 1.3-1.8 times as many
/// features and its penalized path 2.6; on the demo's design exactly the 10. Its path is one
/// OLS fit plus K refits on one growing factor (`kpath`).
pub const DEFAULT_METHOD: Method = Method::Olsth;

/// The largest k of the default k-path, before the caps of `default_k_max`. The path's cost
/// beyond its one full fit grows as K^3 (the refits, and each point's loss and gradient check
/// in the answer): measured at p = 1000, n = 3000 on a shared 2-core machine, K = 1000 took
/// about 6 s against 0.4 s for K = 500; K = 300 takes 141 ms (`benches/kpath.rs`)
/// while covering supports three times paper 003's k* = 100. A request's `k` goes further.
pub const DEFAULT_K_MAX: usize = 300;

/// Whether `method`'s path runs over k (k = 1..=k, the support growing): olsth, fsa, iht,
/// htp. A `select` request naming one without `k` takes the default largest k
/// (`default_k_max`), as a request naming no method does.
pub fn selects_over_k(method: Method) -> bool {
    matches!(
        method,
        Method::Olsth | Method::Fsa | Method::Iht | Method::Htp
    )
}

/// The largest k of the default k-path on a stream of p features and n rows: `DEFAULT_K_MAX`,
/// at most p and n / 2. Beyond n / 2 a least-squares refit spends half the rows on its
/// coefficients (its RSS falls by about k / n of the noise whatever the features), and the
/// refits near n are singular, each then solved from scratch with a ridge: at p = 1000 and
/// n = 1000 the path to n - 1 took seconds against milliseconds to n / 2.
pub fn default_k_max(p: usize, n: f64) -> usize {
    DEFAULT_K_MAX.min(p).min((n / 2.0) as usize).max(1)
}

/// What the answer to a `select` request without a method says about its choice.
pub fn default_method_note(criterion: Criterion, k_max: usize) -> String {
    format!(
        "no method named: {criterion} over OLSth's k-path k = 1..{k_max} (one OLS fit on all \
         features, then the k largest coefficients refitted for each k), the default because \
         on correlated designs it recovers the true support where Lasso's path selects many \
         false features too (docs/methods.md \"Choosing k\", docs/selection.md); name a method to \
         select along its own path",
        criterion = criterion.name()
    )
}

/// Fills in what a `select` request leaves to its defaults: penalized methods (Lasso,
/// elastic net, MCP, SCAD) select on their refitted path (each point's support fitted by
/// least squares, df = its size) unless `refit` says otherwise, since the penalized
/// estimates' criteria favour supports with many small false features (issue 34:
/// Lasso + EBIC on 003's Table 2 design chose 237-257 features for 100 true).
pub(crate) fn with_select_defaults(mut req: Request) -> Request {
    if req.select.is_some() {
        match &mut req.estimator {
            Estimator::Lasso(e) => e.refit = Some(e.refit.unwrap_or(true)),
            Estimator::ElasticNet(e) => e.refit = Some(e.refit.unwrap_or(true)),
            Estimator::Mcp(e) => e.refit = Some(e.refit.unwrap_or(true)),
            Estimator::Scad(e) => e.refit = Some(e.refit.unwrap_or(true)),
            _ => {}
        }
    }
    req
}

/// The largest k a k-path goes to on `problem`: the request's k, at most the columns and
/// n - 1 (with the intercept profiled out, n rows fit n - 1 columns exactly: beyond, every
/// refit interpolates and the criteria reward it).
pub(crate) fn k_path_top(problem: &Problem, est: &Estimator) -> usize {
    let rank = (problem.n_eff.floor() as usize).saturating_sub(1).max(1);
    k_max(est).min(problem.gram.m).min(rank)
}

/// The fits of a select request on `problem` (already without duplicates when the solver
/// merges them): the penalized path, or the k-path.
pub(crate) fn path_fits(problem: &Problem, req: &Request) -> Vec<Fit> {
    let est = &req.estimator;
    if is_k_family(est) {
        let top = k_path_top(problem, est);
        let ks: Vec<usize> = (1..=top).collect();
        kpath::k_fits(problem, est, &ks)
    } else {
        est.solver().path(problem)
    }
}

/// The k-path of a k-family request one k at a time, each from scratch: the reference the
/// fast k-path (`kpath`) is tested against.
pub fn k_fits_one_by_one(problem: &Problem, est: &Estimator, top: usize) -> Vec<Fit> {
    (1..=top.min(problem.gram.m))
        .map(|k| at_k(est, k).solver().fit(problem))
        .collect()
}

/// The grid a CV fold follows: the full data's lambdas, or its ks.
enum Grid {
    Lambdas(Vec<f64>),
    Ks(Vec<usize>),
}

fn fits_on_grid(problem: &Problem, req: &Request, grid: &Grid) -> Vec<Fit> {
    match (grid, &req.estimator) {
        (Grid::Ks(ks), est) => {
            let ks: Vec<usize> = ks.iter().map(|&k| k.min(problem.gram.m).max(1)).collect();
            kpath::k_fits(problem, est, &ks)
        }
        (Grid::Lambdas(l), Estimator::Lasso(e)) => e.path_at(problem, l),
        (Grid::Lambdas(l), Estimator::ElasticNet(e)) => e.path_at(problem, l),
        (Grid::Lambdas(l), Estimator::Mcp(e)) => e.path_at(problem, l),
        (Grid::Lambdas(l), Estimator::Scad(e)) => e.path_at(problem, l),
        _ => Vec::new(),
    }
}

/// The criterion's curve over `points` (each with its `criteria`) and the chosen index.
pub(crate) fn select_by_criterion(
    points: &[Model],
    req: &Request,
    criterion: Criterion,
) -> Selection {
    let curve: Vec<CurvePoint> = points
        .iter()
        .map(|m| {
            let c = m.diagnostics.criteria.expect("path points carry criteria");
            CurvePoint {
                lambda: m.diagnostics.lambda,
                delta: m.diagnostics.delta,
                k: m.k,
                df: c.df,
                value: match criterion {
                    Criterion::Aic => c.aic,
                    Criterion::Bic => c.bic,
                    _ => c.ebic,
                },
                se: None,
                fold_errors: None,
            }
        })
        .collect();
    let chosen = argmin(curve.iter().map(|c| c.value));
    Selection {
        criterion: criterion.name().into(),
        chosen,
        chosen_k: curve.get(chosen).map_or(0, |c| c.k),
        minimum: None,
        curve,
        fold_sizes: None,
        df_rule: df_rule(req).into(),
        notes: k_path_notes(points.len(), req),
    }
}

/// The note of a k-path that stopped below the request's k (`k_path_top`).
pub(crate) fn k_path_notes(points: usize, req: &Request) -> Vec<String> {
    let est = &req.estimator;
    if is_k_family(est) && points > 0 && points < k_max(est) {
        vec![format!(
            "the k-path goes to k = {points}, not {}: at most the features that are neither \
             constant nor duplicates, and n - 1 (more columns than that fit the rows exactly)",
            k_max(est)
        )]
    } else {
        Vec::new()
    }
}

/// The sparsest model of comparable fit to a chosen support of `chosen` features with
/// training loss `loss` (`Gram::loss`, = RSS / 2n): the smallest k on OLSth's k-path whose
/// RSS exceeds the chosen's by at most 2 sigma^2 per dropped feature (AIC's price of a
/// feature; sigma^2 = RSS / (n - chosen)), when that k is at most 2/3 of `chosen`. Its note
/// tells a user that the penalty let in many features that each explain less than noise.
pub(crate) fn sparser_comparable(problem: &Problem, chosen: usize, loss: f64) -> Option<String> {
    let g = &problem.gram;
    let n = problem.n_eff;
    if chosen < 3 || (chosen as f64) + 1.0 >= n {
        return None;
    }
    let rss_c = 2.0 * n * loss;
    let sigma2 = rss_c / (n - chosen as f64);
    let path = kpath::olsth_path(g, chosen * 2 / 3, 0.0);
    let k = path.iter().position(|sol| {
        let rss = 2.0 * n * g.loss(&sol.b);
        rss <= rss_c + 2.0 * (chosen - sol.support.len()) as f64 * sigma2
    })? + 1;
    Some(format!(
        "the chosen support ({chosen} features) is much larger than the sparsest model of \
         comparable fit: OLSth's k-path reaches a residual sum of squares within 2 sigma^2 per \
         dropped feature of it at k = {k}; the other features each explain less than the \
         noise. For the support itself, select along OLSth's k-path (send select without a \
         method) or use mcp"
    ))
}

/// The first index of the smallest value (the sparsest among ties: paths run sparse first).
fn argmin(values: impl Iterator<Item = f64>) -> usize {
    let mut best = (0, f64::INFINITY);
    for (i, v) in values.enumerate() {
        if v < best.1 {
            best = (i, v);
        }
    }
    best.0
}

/// The chosen model of a selected path, with the selection attached.
pub fn chosen_model(path: PathModel) -> Result<Model, ParamError> {
    let Some(selection) = path.selection else {
        return Err(ParamError::Invalid("the path has no selection".into()));
    };
    let mut model = path
        .points
        .into_iter()
        .nth(selection.chosen)
        .ok_or_else(|| ParamError::Invalid("the path is empty: nothing to select".into()))?;
    model.selection = Some(Box::new(selection));
    Ok(model)
}

#[allow(unused)]
fn _method_is_used(_: Method) {}

#[cfg(test)]
mod tests {
    use super::*;

    /// The one CV implementation, two weightings: under plain averages a stream's folds
    /// (`FoldSet`, weighted by shares) give the same curve and choice as folds that each
    /// average their own rows (`ravel fit --folds`, weighted by rows), for regression and for
    /// the class-weighted loss of classification.
    #[test]
    fn stream_folds_give_the_file_folds_curve_under_plain_averages() {
        use crate::stats::{AlphaSchedule, FoldSet};
        use crate::task::Task;
        let (p, n, k) = (6, 900, 4);
        let mut state = 3u64;
        let mut next = move || {
            state = splitmix64(state);
            (state >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0
        };
        let x: Vec<f64> = (0..n * p).map(|_| next() * 3.0 + 1.0).collect();
        let noise: Vec<f64> = (0..n).map(|_| next()).collect();
        for task in [Task::Regression, Task::Classification] {
            let y: Vec<f64> = (0..n)
                .map(|i| {
                    let v = 1.5 * x[i * p] - x[i * p + 2] + 0.5 * x[i * p + 4] + 2.0 * noise[i];
                    match task {
                        Task::Regression => v,
                        Task::Classification => (v - 1.0).signum(),
                    }
                })
                .collect();
            let ids: Vec<u8> = (0..n).map(|i| fold_of(i as u64, k) as u8).collect();
            let mut stream = Stats::new(task, p, AlphaSchedule::Plain);
            let mut folds = FoldSet::new(task, p, k);
            for c in (0..n).step_by(128) {
                let e = (c + 128).min(n);
                folds
                    .update(&mut stream, &x[c * p..e * p], &y[c..e], &ids[c..e])
                    .unwrap();
            }
            let mut own: Vec<Stats> = (0..k)
                .map(|_| Stats::new(task, p, AlphaSchedule::Plain))
                .collect();
            for i in 0..n {
                own[ids[i] as usize]
                    .update_batch(&x[i * p..(i + 1) * p], &y[i..i + 1])
                    .unwrap();
            }
            let body = match task {
                Task::Regression => {
                    serde_json::json!({"method": "lasso", "select": "cv_1se", "path_points": 25})
                }
                Task::Classification => {
                    serde_json::json!({"method": "lasso", "select": "cv", "path_points": 25, "w_pos": 2.0, "w_neg": 0.5})
                }
            };
            let req = serde_json::from_value::<Request>(body)
                .unwrap()
                .check_path(p)
                .unwrap();
            let a = cross_validate_folds(&stream, &folds, &req, None).unwrap();
            let b = cross_validate(&stream, &own, &req, None).unwrap();
            let (sa, sb) = (a.selection.unwrap(), b.selection.unwrap());
            assert_eq!(sa.fold_sizes, sb.fold_sizes);
            assert_eq!((sa.chosen, sa.minimum), (sb.chosen, sb.minimum), "{task}");
            assert!(sa.notes.is_empty());
            for (i, (u, v)) in sa.curve.iter().zip(&sb.curve).enumerate() {
                let rel = (u.value - v.value).abs() / v.value.abs();
                assert!(rel < 1e-9, "{task} point {i}: {} vs {}", u.value, v.value);
                let (su, sv) = (u.se.unwrap(), v.se.unwrap());
                assert!(
                    (su - sv).abs() <= 1e-9 * sv.abs().max(1e-12),
                    "{task} se {i}"
                );
            }
        }
    }

    /// Issue 34's strong-signal design (p = 200, k* = 20 of strength 1 at j = 10 i, pairwise
    /// correlation 0.5, n = 4000): EBIC over OLSth's k-path (the default of a select request
    /// without a method) chooses exactly the true support; Lasso's penalized path chooses
    /// false features too, and its answer says that a much sparser model fits as well.
    #[test]
    fn the_default_k_path_recovers_the_support_where_lasso_notes_its_excess() {
        use crate::stats::AlphaSchedule;
        use crate::task::Task;
        use rand::SeedableRng;
        use rand_distr::{Distribution, StandardNormal};
        let (p, k, n) = (200, 20, 4000);
        let mut rng = rand::rngs::StdRng::seed_from_u64(34);
        let mut normal = || -> f64 { StandardNormal.sample(&mut rng) };
        let mut x = vec![0.0; n * p];
        let mut y = vec![0.0; n];
        for i in 0..n {
            let z = normal();
            let row = &mut x[i * p..(i + 1) * p];
            for v in row.iter_mut() {
                *v = z + normal();
            }
            y[i] = (0..k).map(|t| row[t * (p / k)]).sum::<f64>() + normal();
        }
        let mut stats = Stats::new(Task::Regression, p, AlphaSchedule::Plain);
        stats.update_batch(&x, &y).unwrap();
        let truth: Vec<usize> = (0..k).map(|t| t * (p / k)).collect();
        let model = |body: serde_json::Value| {
            let req: Request = serde_json::from_value(body).unwrap();
            req.model(&stats, None).unwrap()
        };
        let default = model(serde_json::json!({"method": "olsth", "k": p, "select": "ebic"}));
        let got: Vec<usize> = default.coefficients.iter().map(|c| c.index).collect();
        assert_eq!(got, truth, "OLSth's k-path with EBIC");
        let lasso = model(serde_json::json!({"method": "lasso", "refit": false, "select": "ebic"}));
        let sel = lasso.selection.as_ref().unwrap();
        assert!(lasso.k > k, "penalized Lasso + EBIC chose {}", lasso.k);
        assert!(
            sel.notes
                .iter()
                .any(|n| n.contains("much larger than the sparsest model")),
            "{} features, notes {:?}",
            lasso.k,
            sel.notes
        );
        // Refitted (select's default for Lasso): still every true feature.
        let refitted = model(serde_json::json!({"method": "lasso", "select": "ebic"}));
        assert!(refitted.diagnostics.refit);
        let chosen: Vec<usize> = refitted.coefficients.iter().map(|c| c.index).collect();
        assert!(truth.iter().all(|j| chosen.contains(j)), "{chosen:?}");
    }

    #[test]
    fn ln_choose_matches_products() {
        assert_eq!(ln_choose(10, 0), 0.0);
        assert!((ln_choose(10, 3) - 120f64.ln()).abs() < 1e-12);
        assert!((ln_choose(10, 7) - 120f64.ln()).abs() < 1e-12);
        assert!((ln_choose(5, 5)).abs() < 1e-12);
    }

    #[test]
    fn default_gamma_is_chen_and_chens_bound() {
        // p = n^2: kappa = 2, gamma = 1 - 1/4.
        assert!((default_ebic_gamma(100.0, 10_000) - 0.75).abs() < 1e-12);
        // p <= sqrt(n): BIC.
        assert_eq!(default_ebic_gamma(10_000.0, 50), 0.0);
        assert_eq!(default_ebic_gamma(10.0, 1), 0.0);
    }

    #[test]
    fn criteria_parse_by_name() {
        for c in [
            Criterion::Aic,
            Criterion::Bic,
            Criterion::Ebic,
            Criterion::Cv,
            Criterion::Cv1se,
        ] {
            assert_eq!(c.name().parse::<Criterion>().unwrap(), c);
            let json = serde_json::to_string(&c).unwrap();
            assert_eq!(json, format!("\"{}\"", c.name()));
        }
        assert!("mdl".parse::<Criterion>().is_err());
    }
}
