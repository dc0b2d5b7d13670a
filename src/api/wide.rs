//! The wide feature-stream endpoints (`wide = true`, paper 004): the Frank-Wolfe Lasso path
//! over delta on the stream's kept columns (`POST .../wide/path`), and one model at a given
//! delta or with at most k features (`POST .../wide/model`), beside online substitution's s
//! best (`features`).
//!
//! Both run `ravel_core::wide` (the sequence of `ravel fit --wide`: `run_path`) on the
//! column-major matrix of the published `WideSnapshot` (built once per snapshot), on the
//! blocking pool like every extraction, under its deadline. The request's keys are
//! `ravel fit --wide`'s flags with underscores, with the same defaults and ranges, so the same
//! columns written as a file give the same answer.

use super::error::{Code, ErrorBody};
use super::{ApiError, AppState};
use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use ravel_core::data::csc::Csc;
use ravel_core::wide::{
    Checked, PathSpec, Sampling, Spelling, WideOptions, WidePoint, WideProblem, WideSettings,
    WideSolver, point_with_k, run_path,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;
use utoipa::ToSchema;

/// The body of `POST /v1/feature-streams/{name}/wide/path` and `.../wide/model`: every key
/// optional, with `ravel fit --wide`'s defaults.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct WideRequest {
    /// `randomized` (default: 004's Algorithm 2) or `deterministic` (every column each
    /// iteration).
    #[schema(examples("randomized", "deterministic"))]
    variant: Option<String>,
    /// Randomized: columns sampled per iteration (default from `sample_fraction`).
    kappa: Option<usize>,
    /// Randomized: columns sampled per iteration as a fraction of the used columns (those
    /// with a nonzero, among which the sample is drawn), in (0, 1] (default 0.01).
    sample_fraction: Option<f64>,
    /// Randomized: the sampling's seed (default 0).
    seed: Option<u64>,
    /// Stop at duality gap <= tol x objective, in (0, 1) (default 1e-3).
    tol: Option<f64>,
    /// Iterations per delta at most (default 100 000).
    max_iterations: Option<usize>,
    /// Away steps (default true).
    away_steps: Option<bool>,
    /// Points of the path (default 100).
    path_points: Option<usize>,
    /// The smallest delta as a fraction of delta_max, in (0, 1) (default 0.01).
    delta_min_ratio: Option<f64>,
    /// delta_max is the l1 norm of the Lasso solution at lambda_max x this, in (0, 1)
    /// (default 0.01), unless `delta_max` is given.
    lambda_min_ratio: Option<f64>,
    /// The largest delta of the path (default: found, as `ravel fit --wide` finds it).
    delta_max: Option<f64>,
    /// `/wide/model` only: the model at this l1 radius.
    delta: Option<f64>,
    /// `/wide/model` only: the path's point with at most k nonzero coefficients and the
    /// largest delta.
    k: Option<usize>,
}

/// One point: the model at one delta.
#[derive(Serialize, ToSchema)]
pub struct WidePointOut {
    /// The l1 radius.
    delta: f64,
    /// ||y_c - X_c b||^2 / (2n): half the training MSE.
    objective: f64,
    /// The duality gap, >= objective - optimum.
    gap: f64,
    /// ||gradient||_inf: the penalized Lasso's lambda with this answer.
    lambda: f64,
    nonzeros: usize,
    iterations: usize,
    /// Column dot products spent at this delta.
    dot_products: u64,
    /// Whether the gap met the tolerance.
    converged: bool,
    intercept: f64,
    /// Feature name -> coefficient (the nonzero ones).
    coefficients: BTreeMap<String, f64>,
}

fn point_out(x: &Csc, pt: &WidePoint) -> WidePointOut {
    WidePointOut {
        delta: pt.delta,
        objective: pt.objective,
        gap: pt.gap,
        lambda: pt.lambda,
        nonzeros: pt.coefficients.len(),
        iterations: pt.iterations,
        dot_products: pt.dot_products,
        converged: pt.converged,
        intercept: pt.intercept,
        coefficients: pt
            .coefficients
            .iter()
            .map(|&(j, v)| (x.name(j), v))
            .collect(),
    }
}

/// How the path was solved, shared by both answers.
#[derive(Serialize, ToSchema)]
pub struct WideRun {
    /// Always `fw-lasso`.
    method: &'static str,
    /// `randomized` or `deterministic`.
    variant: &'static str,
    kappa: Option<usize>,
    seed: Option<u64>,
    tol: f64,
    away_steps: bool,
    /// Samples.
    n: usize,
    /// Columns kept.
    p: usize,
    nnz: usize,
    empty_columns: usize,
    /// Feature messages refused because their column would not fit (`memory_limit`).
    columns_refused: u64,
    /// Wall seconds of the solve.
    seconds: f64,
    /// Anything the caller should know (in words).
    notes: Vec<String>,
}

/// The body of `POST /v1/feature-streams/{name}/wide/path`: `ravel fit --wide`'s answer on
/// the kept columns.
#[derive(Serialize, ToSchema)]
pub struct WidePathAnswer {
    #[serde(flatten)]
    run: WideRun,
    /// ||X_c^T y_c||_inf / n (when delta_max was searched).
    lambda_max: Option<f64>,
    delta_max: f64,
    /// `search` or `delta_max` (given).
    delta_max_from: &'static str,
    /// Totals along the path.
    iterations: usize,
    dot_products: u64,
    mean_active_features: f64,
    /// The points, sparsest first.
    path: Vec<WidePointOut>,
}

/// The body of `POST /v1/feature-streams/{name}/wide/model`.
#[derive(Serialize, ToSchema)]
pub struct WideModelAnswer {
    #[serde(flatten)]
    run: WideRun,
    /// The k asked for, and the index of the chosen point on the path.
    #[serde(skip_serializing_if = "Option::is_none")]
    requested_k: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    path_index: Option<usize>,
    /// The path's delta_max (a k request).
    #[serde(skip_serializing_if = "Option::is_none")]
    delta_max: Option<f64>,
    /// The model.
    model: WidePointOut,
}

fn invalid(msg: impl Into<String>) -> ApiError {
    ApiError::bad_request(Code::InvalidParams, msg)
}

/// The body's settings checked (`ravel fit --wide`'s rules and messages, `WideSettings`, with
/// the body's keys). The API stops each point by the duality gap alone (`ravel fit --wide
/// --gap-rule` answers the same points); the command line's default is paper 004's step rule.
/// `used`: the kept columns with a nonzero (the randomized rule draws among them).
fn settings(r: &WideRequest, used: usize) -> Result<Checked, ApiError> {
    WideSettings {
        variant: r.variant.clone(),
        kappa: r.kappa,
        sample_fraction: r.sample_fraction,
        seed: r.seed,
        tol: r.tol,
        max_iterations: r.max_iterations,
        away_steps: r.away_steps,
        step_rule: false,
        step_tol: None,
        path_points: r.path_points,
        delta_min_ratio: r.delta_min_ratio,
        lambda_min_ratio: r.lambda_min_ratio,
        delta_max: r.delta_max,
    }
    .check(used, Spelling::Key)
    .map_err(invalid)
}

fn run_info(
    x: &Csc,
    opt: &WideOptions,
    refused: u64,
    seconds: f64,
    points: &[&WidePoint],
) -> WideRun {
    let (variant, kappa, seed) = match opt.sampling {
        Sampling::Full => ("deterministic", None, None),
        Sampling::Randomized { kappa, seed } => ("randomized", Some(kappa), Some(seed)),
    };
    let mut notes = Vec::new();
    let not_converged = points.iter().filter(|p| !p.converged).count();
    if not_converged > 0 {
        notes.push(format!(
            "{not_converged} of the {} points stopped at max_iterations {} before the gap met \
             tol {}: their gaps say how far they may be from the optimum",
            points.len(),
            opt.max_iterations,
            opt.tol
        ));
    }
    if x.empty_columns > 0 {
        notes.push(format!(
            "{} of the {} kept columns have no nonzero: they are never selected",
            x.empty_columns, x.p
        ));
    }
    if refused > 0 {
        notes.push(format!(
            "{refused} feature messages were refused (memory_limit): their columns would not \
             fit the stream's share of limits.max_memory, so neither the path nor the selection \
             has them"
        ));
    }
    WideRun {
        method: "fw-lasso",
        variant,
        kappa,
        seed,
        tol: opt.tol,
        away_steps: opt.away_steps,
        n: x.n,
        p: x.p,
        nnz: x.nnz(),
        empty_columns: x.empty_columns,
        columns_refused: refused,
        seconds,
        notes,
    }
}

impl AppState {
    /// The stream's kept columns and the request, checked.
    fn wide_columns(
        &self,
        name: &str,
        body: Result<Json<Value>, JsonRejection>,
    ) -> Result<(Arc<crate::state::wide_columns::WideSnapshot>, WideRequest), ApiError> {
        let h = self.feature_stream(name)?;
        let Json(body) = body?;
        if !body.is_object() {
            return Err(ApiError::bad_request(
                Code::InvalidBody,
                "the body must be a JSON object such as {\"variant\": \"deterministic\"} (or {})",
            ));
        }
        let req: WideRequest = serde_json::from_value(body)
            .map_err(|e| ApiError::bad_request(Code::InvalidBody, e.to_string()))?;
        if !h.config.wide {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                Code::NotWide,
                format!(
                    "feature stream '{name}' does not keep its columns: set wide = true in its \
                     [[feature_streams]] table for paper 004's path (its topic is replayed at start)"
                ),
            ));
        }
        let snap = h.snapshot();
        let Some(wide) = snap.wide.clone() else {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                Code::NoLabels,
                format!(
                    "feature stream '{name}' has no labels yet: send them on topic {} or with PUT /v1/feature-streams/{name}/labels",
                    h.topic
                ),
            ));
        };
        if wide.p == 0 {
            return Err(ApiError::new(
                StatusCode::CONFLICT,
                Code::NoData,
                format!("feature stream '{name}' has kept no column yet"),
            ));
        }
        Ok((wide, req))
    }
}

/// Paper 004's Lasso path on the kept columns.
#[utoipa::path(post, path = "/v1/feature-streams/{name}/wide/path", tag = "feature streams",
    params(("name" = String, Path, description = "The feature stream's name")),
    request_body(content = WideRequest, examples(("deterministic" = (value = json!({"variant": "deterministic", "path_points": 20}))))),
    responses(
        (status = 200, description = "The path over delta", body = WidePathAnswer),
        (status = 400, description = "`invalid_params`, `invalid_body`, `malformed_json`", body = ErrorBody),
        (status = 404, description = "`unknown_stream`", body = ErrorBody),
        (status = 409, description = "`not_wide`, `no_labels`, `no_data`", body = ErrorBody),
        (status = 415, description = "`unsupported_media_type`", body = ErrorBody),
        (status = 503, description = "`shutting_down`, `busy` (with Retry-After), `extraction_timeout`", body = ErrorBody),
    ))]
pub(super) async fn path(
    State(st): State<AppState>,
    Path(name): Path<String>,
    body: Result<Json<Value>, JsonRejection>,
) -> Result<Json<WidePathAnswer>, ApiError> {
    let (wide, req) = st.wide_columns(&name, body)?;
    if req.delta.is_some() || req.k.is_some() {
        return Err(invalid(
            "delta and k choose one model: POST /v1/feature-streams/{name}/wide/model",
        ));
    }
    let Checked {
        options: opt, spec, ..
    } = settings(&req, wide.used)?;
    let answer = st
        .extract(&name, "wide_path", "fw-lasso", move || {
            let x = wide.csc();
            let t = Instant::now();
            let pr = WideProblem::new(&x);
            let path = run_path(&pr, spec, opt);
            let seconds = t.elapsed().as_secs_f64();
            let pts: Vec<&WidePoint> = path.points.iter().collect();
            let n_pts = path.points.len().max(1) as f64;
            Ok(WidePathAnswer {
                run: run_info(&x, &opt, wide.refused, seconds, &pts),
                lambda_max: path.search.as_ref().map(|s| s.lambda_max),
                delta_max: path.delta_max,
                delta_max_from: if path.search.is_some() {
                    "search"
                } else {
                    "delta_max"
                },
                iterations: path.points.iter().map(|p| p.iterations).sum(),
                dot_products: path.points.iter().map(|p| p.dot_products).sum(),
                mean_active_features: path
                    .points
                    .iter()
                    .map(|p| p.coefficients.len())
                    .sum::<usize>() as f64
                    / n_pts,
                path: path.points.iter().map(|p| point_out(&x, p)).collect(),
            })
        })
        .await?;
    Ok(Json(answer))
}

/// One model of paper 004's Lasso on the kept columns: at `delta` (solved there from zero,
/// as `ravel fit --wide --delta-max D --path-points 1`), or with at most `k` features (the
/// path's point with the largest delta among those with k nonzeros or fewer).
#[utoipa::path(post, path = "/v1/feature-streams/{name}/wide/model", tag = "feature streams",
    params(("name" = String, Path, description = "The feature stream's name")),
    request_body(content = WideRequest, examples(
        ("delta" = (value = json!({"delta": 2.5, "variant": "deterministic"}))),
        ("k" = (value = json!({"k": 10}))),
    )),
    responses(
        (status = 200, description = "The model", body = WideModelAnswer),
        (status = 400, description = "`invalid_params`, `invalid_body`, `malformed_json`", body = ErrorBody),
        (status = 404, description = "`unknown_stream`", body = ErrorBody),
        (status = 409, description = "`not_wide`, `no_labels`, `no_data`", body = ErrorBody),
        (status = 415, description = "`unsupported_media_type`", body = ErrorBody),
        (status = 503, description = "`shutting_down`, `busy` (with Retry-After), `extraction_timeout`", body = ErrorBody),
    ))]
pub(super) async fn model(
    State(st): State<AppState>,
    Path(name): Path<String>,
    body: Result<Json<Value>, JsonRejection>,
) -> Result<Json<WideModelAnswer>, ApiError> {
    let (wide, req) = st.wide_columns(&name, body)?;
    let Checked {
        options: opt, spec, ..
    } = settings(&req, wide.used)?;
    enum Want {
        Delta(f64),
        K(usize, PathSpec),
    }
    let want = match (req.delta, req.k) {
        (Some(d), None) => {
            if !(d.is_finite() && d > 0.0) {
                return Err(invalid(format!(
                    "delta {d}: it must be a finite number > 0"
                )));
            }
            if req.path_points.is_some()
                || req.delta_max.is_some()
                || req.delta_min_ratio.is_some()
                || req.lambda_min_ratio.is_some()
            {
                return Err(invalid(
                    "path_points, delta_max, delta_min_ratio and lambda_min_ratio shape the path \
                     of a k request; a delta request solves at delta alone",
                ));
            }
            Want::Delta(d)
        }
        (None, Some(0)) => return Err(invalid("k must be at least 1")),
        (None, Some(k)) => Want::K(k, spec),
        _ => {
            return Err(invalid(
                "give delta (the l1 radius) or k (the most features), one of them",
            ));
        }
    };
    let answer = st
        .extract(&name, "wide_model", "fw-lasso", move || {
            let x = wide.csc();
            let t = Instant::now();
            let pr = WideProblem::new(&x);
            Ok(match want {
                Want::Delta(d) => {
                    let pt = WideSolver::new(&pr, opt).solve(d);
                    let run = run_info(&x, &opt, wide.refused, t.elapsed().as_secs_f64(), &[&pt]);
                    WideModelAnswer {
                        run,
                        requested_k: None,
                        path_index: None,
                        delta_max: None,
                        model: point_out(&x, &pt),
                    }
                }
                Want::K(k, spec) => {
                    let path = run_path(&pr, spec, opt);
                    let seconds = t.elapsed().as_secs_f64();
                    let pts: Vec<&WidePoint> = path.points.iter().collect();
                    let mut run = run_info(&x, &opt, wide.refused, seconds, &pts);
                    let index = match point_with_k(&path.points, k) {
                        Some(i) => i,
                        None if path.points.is_empty() => {
                            return Err(ApiError::new(
                                StatusCode::CONFLICT,
                                Code::NoData,
                                "y is constant or every kept column is: the model is the mean of y",
                            ));
                        }
                        None => {
                            run.notes.push(format!(
                                "every point of the path has more than k = {k} nonzeros: this \
                                 is the sparsest ({}); a smaller delta_min_ratio reaches \
                                 sparser ones",
                                path.points[0].coefficients.len()
                            ));
                            0
                        }
                    };
                    WideModelAnswer {
                        run,
                        requested_k: Some(k),
                        path_index: Some(index),
                        delta_max: Some(path.delta_max),
                        model: point_out(&x, &path.points[index]),
                    }
                }
            })
        })
        .await?;
    Ok(Json(answer))
}
