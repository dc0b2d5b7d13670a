//! The HTTP API (axum): stream summaries, model extraction, lambda paths, predictions, health
//! and Prometheus metrics; feature streams in `features`. JSON in and out; every error is
//! `ApiError` JSON.
//!
//! Extraction is CPU-bound (up to ~100 ms at p = 1000), so it runs on the blocking pool, from
//! the stream's current immutable snapshot, and at most `http.max_concurrent_extractions` at
//! once; request bodies are limited to `http.body_limit_bytes`.
//!
//! Every route is declared with its OpenAPI operation (`#[utoipa::path]`) and registered
//! through `utoipa_axum::routes!`, so the router and the description served at
//! `/openapi.json` (see `openapi`) are built from the same list; responses are typed structs.

pub mod auth;
mod console;
pub mod error;
mod features;
pub mod openapi;

use crate::feature_streams::FeatureStreams;
use crate::metrics::Metrics;
use crate::streams::{Stats, StreamHandle, Streams};
use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{DefaultBodyLimit, MatchedPath, Path, Query, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::{self, Next};
use axum::response::{IntoResponse, Response};
use axum::{Json, Router};
pub use error::ApiError;
use ravel_core::Task;
use ravel_core::solve::interrupt::{Interrupt, Interruption};
use ravel_core::solve::{
    Method, Model, PathModel, Request as ModelRequest, model_from_folds, path_from_folds,
};
use ravel_core::stats::{DriftStatus, RunningStats};
use serde::Serialize;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// Shared by every handler.
#[derive(Clone)]
pub struct AppState {
    pub streams: Arc<Streams>,
    pub feature_streams: Arc<FeatureStreams>,
    /// Writes labels sent over HTTP to their feature stream's topic (None: no feature streams).
    pub producer: Option<rdkafka::producer::FutureProducer>,
    pub metrics: Arc<Metrics>,
    /// Set by ingest once the consumer group assigned partitions of every stream topic.
    pub ready: Arc<AtomicBool>,
    /// Missing topics, held partitions, authorization errors (`crate::health`).
    pub health: Arc<crate::health::Health>,
    pub extractions: Extractions,
}

/// The bounds on extraction work: how many run at once, how many may wait for a slot, how
/// long one may take, and the flag that stops them all when the server stops.
#[derive(Clone)]
pub struct Extractions {
    pub running: Arc<Semaphore>,
    pub waiting: Arc<AtomicUsize>,
    pub max_waiting: usize,
    /// None: no deadline.
    pub timeout: Option<Duration>,
    pub stopping: Arc<AtomicBool>,
}

impl Extractions {
    pub fn new(
        concurrent: usize,
        max_waiting: usize,
        timeout: Option<Duration>,
        stopping: Arc<AtomicBool>,
    ) -> Self {
        Extractions {
            running: Arc::new(Semaphore::new(concurrent)),
            waiting: Arc::new(AtomicUsize::new(0)),
            max_waiting,
            timeout,
            stopping,
        }
    }
}

/// Counts a request waiting for an extraction slot while it waits.
struct Waiting(Arc<AtomicUsize>, prometheus::IntGauge);
impl Drop for Waiting {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
        self.1.dec();
    }
}

/// Counts an extraction while it computes (held by the blocking task).
struct Running(prometheus::IntGauge);
impl Drop for Running {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// Cancels the extraction when the request's future is dropped before it finished: the
/// client went away, or the server dropped the connection at the end of its drain.
struct CancelOnDrop(Option<Interrupt>);
impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(i) = self.0.take() {
            i.cancel();
        }
    }
}

impl AppState {
    fn stream(&self, name: &str) -> Result<Arc<StreamHandle>, ApiError> {
        self.streams
            .get(name)
            .cloned()
            .ok_or_else(|| ApiError::unknown_stream(name))
    }

    /// Runs a CPU-bound extraction on the blocking pool: at most `running` at once, at most
    /// `max_waiting` queued (503 `busy` beyond), under a deadline, and cancelled when the
    /// client goes away or the server stops. Times it.
    async fn extract<T: Send + 'static>(
        &self,
        stream: &str,
        kind: &'static str,
        method: &'static str,
        f: impl FnOnce() -> Result<T, ApiError> + Send + 'static,
    ) -> Result<T, ApiError> {
        let ex = &self.extractions;
        if ex.stopping.load(Ordering::SeqCst) {
            return Err(ApiError::shutting_down());
        }
        let permit = match ex.running.clone().try_acquire_owned() {
            Ok(p) => p,
            Err(_) => {
                if ex.waiting.fetch_add(1, Ordering::SeqCst) >= ex.max_waiting {
                    ex.waiting.fetch_sub(1, Ordering::SeqCst);
                    self.metrics
                        .extractions_refused
                        .with_label_values(&["busy"])
                        .inc();
                    return Err(ApiError::busy(ex.max_waiting));
                }
                self.metrics.extractions_waiting.inc();
                let _waiting =
                    Waiting(ex.waiting.clone(), self.metrics.extractions_waiting.clone());
                ex.running
                    .clone()
                    .acquire_owned()
                    .await
                    .map_err(|_| ApiError::shutting_down())?
            }
        };
        let interrupt = Interrupt::new(ex.timeout).linked(ex.stopping.clone());
        let mut guard = CancelOnDrop(Some(interrupt.clone()));
        let start = Instant::now();
        self.metrics.extractions_running.inc();
        let running = Running(self.metrics.extractions_running.clone());
        // Counted on the blocking thread: when the client went away, nobody awaits the result.
        let refused = self.metrics.extractions_refused.clone();
        let result = tokio::task::spawn_blocking(move || {
            let (_permit, _running) = (permit, running);
            let r = interrupt.run(f);
            if let Err(why) = &r {
                let reason = match why {
                    Interruption::Deadline(_) => "timeout",
                    Interruption::Cancelled => "cancelled",
                };
                refused.with_label_values(&[reason]).inc();
            }
            r
        })
        .await
        .map_err(|e| ApiError::internal(format!("extraction failed: {e}")))?;
        guard.0 = None;
        self.metrics
            .extraction_seconds
            .with_label_values(&[stream, kind, method])
            .observe(start.elapsed().as_secs_f64());
        match result {
            Ok(answer) => answer,
            Err(why @ Interruption::Deadline(_)) => Err(ApiError::extraction_timeout(why)),
            Err(Interruption::Cancelled) => Err(ApiError::shutting_down()),
        }
    }
}

/// The router and its OpenAPI description, from the same route list; `body_limit` bounds
/// every request body.
pub fn router_and_openapi(
    state: AppState,
    body_limit: usize,
) -> (Router, utoipa::openapi::OpenApi) {
    let (router, api) = routes().split_for_parts();
    let spec =
        Arc::new(serde_json::to_string_pretty(&api).expect("the OpenAPI document serializes"));
    let router = router
        .merge(console::routes())
        .fallback(not_found)
        .method_not_allowed_fallback(method_not_allowed)
        .layer(axum::Extension(openapi::Spec(spec)))
        .layer(DefaultBodyLimit::max(body_limit))
        .layer(middleware::from_fn_with_state(state.clone(), track))
        .with_state(state);
    (router, api)
}

/// Every route with its OpenAPI operation: the one list the router and the document share.
fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(openapi::base())
        .routes(routes!(healthz))
        .routes(routes!(readyz))
        .routes(routes!(metrics))
        .routes(routes!(openapi::serve))
        .routes(routes!(list_streams))
        .routes(routes!(get_stream))
        .routes(routes!(history))
        .routes(routes!(model))
        .routes(routes!(path, path_post))
        .routes(routes!(predict))
        .routes(routes!(features::list))
        .routes(routes!(features::get_one))
        .routes(routes!(features::put_labels))
        .routes(routes!(features::model))
}

/// The router; `body_limit` bounds every request body.
pub fn router(state: AppState, body_limit: usize) -> Router {
    router_and_openapi(state, body_limit).0
}

/// Counts and times every request by route template (never by raw path: bounded labels).
async fn track(State(st): State<AppState>, req: Request, next: Next) -> Response {
    let route = req
        .extensions()
        .get::<MatchedPath>()
        .map(|p| p.as_str().to_string())
        .unwrap_or_else(|| "unmatched".into());
    // Clients can send any method token: only the standard ones become label values, so that
    // invented methods cannot grow /metrics without bound.
    let method = match req.method().as_str() {
        m @ ("GET" | "POST" | "PUT" | "DELETE" | "HEAD" | "OPTIONS" | "PATCH") => m,
        _ => "other",
    }
    .to_string();
    let start = Instant::now();
    let resp = next.run(req).await;
    st.metrics
        .http_requests
        .with_label_values(&[&route, &method, resp.status().as_str()])
        .inc();
    st.metrics
        .http_request_seconds
        .with_label_values(&[&route, &method])
        .observe(start.elapsed().as_secs_f64());
    resp
}

async fn not_found(req: Request) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        "not_found",
        format!(
            "no route for {} {}; the API lives under /v1/streams and /v1/feature-streams",
            req.method(),
            req.uri().path()
        ),
    )
}

async fn method_not_allowed(req: Request) -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        "method_not_allowed",
        format!("{} is not allowed on {}", req.method(), req.uri().path()),
    )
}

/// `{"status": "ok"}` or `{"status": "ready"}`.
#[derive(Serialize, ToSchema)]
pub struct Status {
    #[schema(examples("ok", "ready"))]
    pub status: &'static str,
}

/// 200 while the process runs.
#[utoipa::path(get, path = "/healthz", tag = "operations",
    responses((status = 200, description = "The process runs", body = Status)))]
async fn healthz() -> Json<Status> {
    Json(Status { status: "ok" })
}

/// The body of `/readyz`, ready or not: what is wrong with the Kafka side, if anything.
#[derive(Serialize, ToSchema)]
pub struct Readiness {
    /// `ready` or `not_ready`.
    #[schema(examples("ready", "not_ready"))]
    pub status: &'static str,
    /// Topics ravel needs that the cluster lacks, with the command that creates each.
    pub missing_topics: Vec<crate::health::MissingTopic>,
    /// Partitions held at a message whose dead-letter copy is not delivered yet (listed,
    /// but not a reason to be unready).
    pub held_partitions: Vec<crate::health::HeldPartition>,
    /// Operations Kafka refused.
    pub authorization_errors: Vec<crate::health::Denied>,
    /// When not ready: `not_ready` and every reason.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<error::ErrorDetail>,
}

/// 200 once partitions of every stream topic are assigned, every topic ravel needs exists and
/// Kafka denied nothing; else 503 saying why. Either way the body lists the missing topics
/// (with the command that creates each), the partitions held at a message whose dead-letter
/// copy is not delivered, and the authorization errors.
#[utoipa::path(get, path = "/readyz", tag = "operations",
    responses(
        (status = 200, description = "Ready to serve current statistics", body = Readiness),
        (status = 503, description = "`not_ready`, with the reasons", body = Readiness),
    ))]
async fn readyz(State(st): State<AppState>) -> (StatusCode, Json<Readiness>) {
    let h = st.health.snapshot();
    let assigned = st.ready.load(Ordering::SeqCst);
    let mut reasons: Vec<String> = Vec::new();
    for m in &h.missing_topics {
        reasons.push(format!(
            "topic '{}' does not exist; create it with: {}",
            m.topic, m.create_with
        ));
    }
    for d in &h.authorization_errors {
        reasons.push(format!(
            "Kafka denies {} on {} '{}': {}",
            d.operation, d.resource_type, d.resource, d.error
        ));
    }
    if !assigned {
        reasons.push(
            "the Kafka consumer has not been assigned partitions of every stream topic yet".into(),
        );
    }
    let ready = reasons.is_empty();
    let body = Readiness {
        status: if ready { "ready" } else { "not_ready" },
        missing_topics: h.missing_topics,
        held_partitions: h.held_partitions,
        authorization_errors: h.authorization_errors,
        error: (!ready).then(|| error::ErrorDetail {
            code: "not_ready".into(),
            message: reasons.join("; "),
        }),
    };
    let status = if ready {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    };
    (status, Json(body))
}

/// Prometheus text format (README "Metrics").
#[utoipa::path(get, path = "/metrics", tag = "operations",
    responses((status = 200, description = "Prometheus text exposition format 0.0.4",
        content_type = "text/plain", body = String)))]
async fn metrics(State(st): State<AppState>) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        st.metrics.render(),
    )
        .into_response()
}

/// An observation stream as `GET /v1/streams` lists it.
#[derive(Serialize, ToSchema)]
pub struct StreamSummary {
    name: String,
    topic: String,
    task: Task,
    p: usize,
    /// Rows in the statistics.
    n: u64,
    /// The alpha the next row gets (003 eq. 6), and the schedule.
    alpha: f64,
    schedule: String,
    /// Effective sample size and drift alarms (adaptive schedule: detector state too).
    drift: DriftStatus,
    /// Unix time of the last folded batch, in milliseconds.
    last_update_ms: Option<u64>,
    /// Kafka timestamp (Unix ms; CreateTime or LogAppendTime, as the topic says) of the newest
    /// message in the statistics, never later than `last_update_ms`: how old the answers are.
    /// Null before the first timestamped message.
    #[schema(examples(1_700_000_000_000_u64))]
    as_of: Option<u64>,
    /// Partitions waiting at a rejected message until its dead-letter copy is delivered.
    held_partitions: Vec<crate::health::HeldPartition>,
    /// Partitions of the topic assigned to this instance, and in all: with the `dir` store the
    /// statistics cover the whole stream only when they are equal.
    partitions: crate::health::PartitionCount,
    /// With `state.store = "kafka"`: each partition merged into the statistics, folded here
    /// (`live`) or the latest state another replica published (`changelog`). Absent with the
    /// other stores.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    partition_states: Vec<PartitionStateSummary>,
}

/// One partition of a stream's statistics (`state.store = "kafka"`).
#[derive(Serialize, ToSchema)]
pub struct PartitionStateSummary {
    partition: i32,
    /// Rows of this partition in the statistics.
    n: u64,
    /// `live` (folded by this instance) or `changelog` (published by `writer`).
    source: String,
    /// Unix time of the partition's last folded batch, in milliseconds.
    last_update_ms: Option<u64>,
    /// Kafka timestamp (Unix ms) of the partition's newest message in the statistics.
    as_of: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    writer: Option<String>,
}

fn summary(h: &StreamHandle, health: &crate::health::Health) -> StreamSummary {
    let snap = h.snapshot();
    let state = health.snapshot();
    let partitions = state.partitions.get(&h.topic).copied().unwrap_or_default();
    let held_partitions = state
        .held_partitions
        .into_iter()
        .filter(|p| p.stream == h.name())
        .collect();
    StreamSummary {
        name: h.name().to_string(),
        topic: h.topic.clone(),
        task: h.task(),
        p: h.p(),
        n: snap.stats.n(),
        alpha: snap.stats.current_alpha(),
        schedule: snap.stats.schedule().to_string(),
        drift: snap.stats.drift_status(),
        last_update_ms: snap.last_update.map(crate::unix_ms),
        as_of: snap.as_of_ms,
        held_partitions,
        partitions,
        partition_states: partition_states(&snap),
    }
}

/// The partitions merged into a snapshot (`state.store = "kafka"`; empty otherwise).
fn partition_states(snap: &crate::streams::Snapshot) -> Vec<PartitionStateSummary> {
    snap.parts
        .iter()
        .map(|p| PartitionStateSummary {
            partition: p.partition,
            n: p.n,
            source: p.source.to_string(),
            last_update_ms: p.last_update.map(crate::unix_ms),
            as_of: p.as_of_ms,
            writer: p.writer.clone(),
        })
        .collect()
}

/// The body of `GET /v1/streams`.
#[derive(Serialize, ToSchema)]
pub struct StreamList {
    pub streams: Vec<StreamSummary>,
}

/// Every observation stream, in name order.
#[utoipa::path(get, path = "/v1/streams", tag = "streams",
    responses((status = 200, description = "Every observation stream", body = StreamList)))]
async fn list_streams(State(st): State<AppState>) -> Json<StreamList> {
    Json(StreamList {
        streams: st.streams.iter().map(|h| summary(h, &st.health)).collect(),
    })
}

/// Means and population standard deviations of the features and of y.
#[derive(Serialize, ToSchema)]
pub struct Moments {
    n: u64,
    mean_x: Vec<f64>,
    sd_x: Vec<f64>,
    mean_y: f64,
    sd_y: f64,
}

fn moments(s: &RunningStats) -> Moments {
    Moments {
        n: s.n(),
        mean_x: s.mean_x(),
        sd_x: s.variances().into_iter().map(f64::sqrt).collect(),
        mean_y: s.mean_y(),
        sd_y: ravel_core::gram::Moments::var_y(s).sqrt(),
    }
}

/// One stream: its summary, feature names and moments (classification: per class).
#[derive(Serialize, ToSchema)]
pub struct StreamDetail {
    #[serde(flatten)]
    pub summary: StreamSummary,
    /// Feature names (the column index as text where the stream declares none).
    pub features: Vec<String>,
    /// Regression: means and population standard deviations of x and y.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mean_x: Option<Vec<f64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sd_x: Option<Vec<f64>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mean_y: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub sd_y: Option<f64>,
    /// Classification: the moments of each class.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub classes: Option<Classes>,
}

/// The moments of each class of a classification stream.
#[derive(Serialize, ToSchema)]
pub struct Classes {
    pub positive: Moments,
    pub negative: Moments,
}

/// One observation stream.
#[utoipa::path(get, path = "/v1/streams/{name}", tag = "streams",
    params(("name" = String, Path, description = "The stream's name")),
    responses(
        (status = 200, description = "The stream", body = StreamDetail),
        (status = 404, description = "`unknown_stream`", body = error::ErrorBody),
    ))]
async fn get_stream(
    State(st): State<AppState>,
    Path(name): Path<String>,
) -> Result<Json<StreamDetail>, ApiError> {
    let h = st.stream(&name)?;
    let snap = h.snapshot();
    let features = feature_names(&h);
    let mut detail = StreamDetail {
        summary: summary(&h, &st.health),
        features,
        mean_x: None,
        sd_x: None,
        mean_y: None,
        sd_y: None,
        classes: None,
    };
    match &snap.stats {
        Stats::Regression(s) => {
            let m = moments(s);
            detail.mean_x = Some(m.mean_x);
            detail.sd_x = Some(m.sd_x);
            detail.mean_y = Some(m.mean_y);
            detail.sd_y = Some(m.sd_y);
        }
        Stats::Classification(c) => {
            detail.classes = Some(Classes {
                positive: moments(&c.pos),
                negative: moments(&c.neg),
            });
        }
    }
    Ok(Json(detail))
}

/// The body of `GET /v1/streams/{name}/history`: the stream's default model, alpha, effective
/// sample size and drift alarms over time.
#[derive(Serialize, ToSchema)]
pub struct StreamHistory {
    name: String,
    /// The default model: lasso with `k` nonzeros (`history.k`, capped at p).
    #[schema(examples("lasso"))]
    method: &'static str,
    k: usize,
    /// Time between two points, and the most points kept (the oldest go first).
    interval_ms: u64,
    length: usize,
    /// Feature names (the column index as text where the stream declares none): the points'
    /// `support` indexes this list.
    features: Vec<String>,
    /// Oldest first; a tick whose statistics did not change adds no point. Kept in memory
    /// only: empty after a restart.
    points: Vec<crate::history::HistoryPoint>,
}

/// Periodic snapshots of a stream's default model (support and coefficients), alpha,
/// effective sample size and drift alarms, oldest first (`[history]` in the configuration).
#[utoipa::path(get, path = "/v1/streams/{name}/history", tag = "streams",
    params(("name" = String, Path, description = "The stream's name")),
    responses(
        (status = 200, description = "The stream's history", body = StreamHistory),
        (status = 404, description = "`unknown_stream`", body = error::ErrorBody),
    ))]
async fn history(
    State(st): State<AppState>,
    Path(name): Path<String>,
) -> Result<Json<StreamHistory>, ApiError> {
    let h = st.stream(&name)?;
    let spec = h.history.spec;
    Ok(Json(StreamHistory {
        name: h.name().to_string(),
        method: "lasso",
        k: spec.k,
        interval_ms: spec.interval.as_millis() as u64,
        length: spec.length,
        features: feature_names(&h),
        points: h.history.points(),
    }))
}

fn feature_names(h: &StreamHandle) -> Vec<String> {
    match h.names() {
        Some(n) => n.to_vec(),
        None => (0..h.p()).map(|j| j.to_string()).collect(),
    }
}

/// A JSON body or query turned into a model request: the method is checked first so that an
/// unknown one gets its own error code and the list of methods; the rest is the typed
/// `solve::Request`'s own parsing (unknown fields refused by name).
fn parse_params(mut v: Value) -> Result<ModelRequest, ApiError> {
    let Some(obj) = v.as_object_mut() else {
        return Err(ApiError::bad_request(
            "invalid_body",
            "the body must be a JSON object such as {\"method\": \"lasso\", \"k\": 10}",
        ));
    };
    match obj.get("method") {
        Some(Value::String(m)) => {
            let method: Method = m.parse().map_err(|e: String| {
                ApiError::from(ravel_core::solve::ParamError::UnknownMethod(e))
            })?;
            obj.insert("method".into(), Value::String(method.name().into()));
        }
        Some(_) => {
            return Err(ApiError::bad_request(
                "invalid_body",
                "\"method\" must be a string such as \"lasso\"",
            ));
        }
        None => {
            return Err(ApiError::bad_request(
                "invalid_body",
                format!("missing \"method\": one of {}", Method::estimator_list()),
            ));
        }
    }
    serde_json::from_value(v).map_err(|e| {
        let msg = e.to_string();
        // A parameter the method requires (ridge's lambda, olsth's k) is a request that needs
        // more, as k and lambda together are: `invalid_params`, as before the typed request.
        let code = if msg.starts_with("missing field") {
            "invalid_params"
        } else {
            "invalid_body"
        };
        ApiError::bad_request(code, msg)
    })
}

/// A model extracted from a stream: the model JSON of `ravel fit`, and the stream's `as_of`.
#[derive(Serialize, ToSchema)]
pub struct StreamModel {
    #[serde(flatten)]
    pub model: Model,
    /// Kafka timestamp (Unix ms) of the newest message in the statistics the model was
    /// extracted from (the stream summary's `as_of`); null before the first timestamped
    /// message.
    #[schema(examples(1_700_000_000_000_u64))]
    pub as_of: Option<u64>,
    /// With `state.store = "kafka"`: the partitions merged into the statistics the model was
    /// extracted from, each with its n and freshness (as in the stream summary).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub partition_states: Vec<PartitionStateSummary>,
}

/// A path extracted from a stream: the path JSON of `ravel fit`, and the stream's `as_of`.
#[derive(Serialize, ToSchema)]
pub struct StreamPath {
    #[serde(flatten)]
    pub path: PathModel,
    /// Kafka timestamp (Unix ms) of the newest message in the statistics the path was
    /// extracted from; null before the first timestamped message.
    #[schema(examples(1_700_000_000_000_u64))]
    pub as_of: Option<u64>,
    /// With `state.store = "kafka"`: the partitions merged into the statistics, as in the
    /// model.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub partition_states: Vec<PartitionStateSummary>,
}

/// A model at one sparsity level or penalty, the same JSON (and numbers) as `ravel fit`, with
/// the `as_of` of the statistics it was extracted from.
#[utoipa::path(post, path = "/v1/streams/{name}/model", tag = "streams",
    params(("name" = String, Path, description = "The stream's name")),
    request_body(content = ModelRequest, description = "An estimator (`method` and its \
        parameters) plus `standardize` and the class weights",
        examples(
            ("lasso_k" = (value = json!({"method": "lasso", "k": 2}))),
            ("elastic_net" = (value = json!({"method": "elastic-net", "lambda": 0.05, "l1_ratio": 0.5, "refit": true}))),
            ("iht" = (value = json!({"method": "iht", "k": 2, "lambda": 0.001}))),
        )),
    responses(
        (status = 200, description = "The model", body = StreamModel),
        (status = 400, description = "`unknown_method`, `k_too_large`, `invalid_params`, \
            `invalid_body`, `malformed_json`", body = error::ErrorBody),
        (status = 404, description = "`unknown_stream`", body = error::ErrorBody),
        (status = 409, description = "`no_data`, `one_class`", body = error::ErrorBody),
        (status = 413, description = "`payload_too_large`", body = error::ErrorBody),
        (status = 415, description = "`unsupported_media_type`", body = error::ErrorBody),
        (status = 503, description = "`shutting_down`, `busy` (with Retry-After), `extraction_timeout`", body = error::ErrorBody),
    ))]
async fn model(
    State(st): State<AppState>,
    Path(name): Path<String>,
    body: Result<Json<Value>, JsonRejection>,
) -> Result<Json<StreamModel>, ApiError> {
    let h = st.stream(&name)?;
    let Json(body) = body?;
    let params = parse_params(body)?.check(h.p())?;
    let snap = h.snapshot();
    let as_of = snap.as_of_ms;
    let partition_states = partition_states(&snap);
    let method = params.method();
    let hh = h.clone();
    let model = st
        .extract(&name, "model", method.name(), move || {
            Ok(model_from_folds(
                &snap.stats,
                snap.folds.as_ref(),
                &params,
                hh.names(),
            )?)
        })
        .await?;
    Ok(Json(StreamModel {
        model,
        as_of,
        partition_states,
    }))
}

/// Query values as JSON scalars (`k=10` -> 10, `refit=true` -> true), so that the path takes
/// the same parameters, checked the same way, as the model body.
fn query_to_json(q: HashMap<String, String>) -> Value {
    let obj = q
        .into_iter()
        .map(|(k, s)| {
            let v = if let Ok(b) = s.parse::<bool>() {
                Value::Bool(b)
            } else if let Ok(u) = s.parse::<u64>() {
                Value::from(u)
            } else if let Some(n) = s.parse::<f64>().ok().and_then(serde_json::Number::from_f64) {
                Value::Number(n)
            } else {
                Value::String(s)
            };
            (k, v)
        })
        .collect();
    Value::Object(obj)
}

/// The warm-started path (lambda for the penalized methods, delta for fw-lasso): the
/// query's values as the JSON body of POST, `?method=lasso&path_points=20`.
#[utoipa::path(get, path = "/v1/streams/{name}/path", tag = "streams",
    params(
        ("name" = String, Path, description = "The stream's name"),
        ("request" = ModelRequest, Query, style = Form, explode,
            description = "The fields of the POST body as query parameters, less k / lambda / delta",
            example = json!({"method": "lasso", "path_points": 20})),
    ),
    responses(
        (status = 200, description = "One model per point, largest penalty first", body = StreamPath),
        (status = 400, description = "`unknown_method`, `invalid_params`, `invalid_body`, `invalid_query`",
            body = error::ErrorBody),
        (status = 404, description = "`unknown_stream`", body = error::ErrorBody),
        (status = 409, description = "`no_data`, `one_class`", body = error::ErrorBody),
        (status = 503, description = "`shutting_down`, `busy` (with Retry-After), `extraction_timeout`", body = error::ErrorBody),
    ))]
async fn path(
    State(st): State<AppState>,
    Path(name): Path<String>,
    query: Result<Query<HashMap<String, String>>, QueryRejection>,
) -> Result<Json<StreamPath>, ApiError> {
    let Query(q) = query?;
    path_of(st, name, query_to_json(q)).await
}

/// The warm-started path, with the same JSON body as `POST .../model` less k / lambda / delta.
#[utoipa::path(post, path = "/v1/streams/{name}/path", tag = "streams",
    params(("name" = String, Path, description = "The stream's name")),
    request_body(content = ModelRequest, description = "The body of `/model` without k, lambda or delta",
        examples(("lasso_path" = (value = json!({"method": "lasso", "path_points": 20}))))),
    responses(
        (status = 200, description = "One model per point, largest penalty first", body = StreamPath),
        (status = 400, description = "`unknown_method`, `invalid_params`, `invalid_body`, `malformed_json`",
            body = error::ErrorBody),
        (status = 404, description = "`unknown_stream`", body = error::ErrorBody),
        (status = 409, description = "`no_data`, `one_class`", body = error::ErrorBody),
        (status = 413, description = "`payload_too_large`", body = error::ErrorBody),
        (status = 415, description = "`unsupported_media_type`", body = error::ErrorBody),
        (status = 503, description = "`shutting_down`, `busy` (with Retry-After), `extraction_timeout`", body = error::ErrorBody),
    ))]
async fn path_post(
    State(st): State<AppState>,
    Path(name): Path<String>,
    body: Result<Json<Value>, JsonRejection>,
) -> Result<Json<StreamPath>, ApiError> {
    let Json(body) = body?;
    path_of(st, name, body).await
}

async fn path_of(st: AppState, name: String, body: Value) -> Result<Json<StreamPath>, ApiError> {
    let h = st.stream(&name)?;
    let params = parse_params(body)?.check_path(h.p())?;
    let snap = h.snapshot();
    let as_of = snap.as_of_ms;
    let partition_states = partition_states(&snap);
    let method = params.method();
    let hh = h.clone();
    let path = st
        .extract(&name, "path", method.name(), move || {
            Ok(path_from_folds(
                &snap.stats,
                snap.folds.as_ref(),
                &params,
                hh.names(),
            )?)
        })
        .await?;
    Ok(Json(StreamPath {
        path,
        as_of,
        partition_states,
    }))
}

/// The body of `POST .../predict`: a model request and rows, as arrays or named.
#[derive(serde::Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PredictRequest {
    /// The model to predict with (the body of POST /model).
    #[schema(value_type = ModelRequest)]
    model: Value,
    /// Rows as arrays of p numbers...
    #[serde(default)]
    rows: Option<Vec<Vec<f64>>>,
    /// ...or as objects of named features.
    #[serde(default)]
    features: Option<Vec<HashMap<String, f64>>>,
}

/// Predictions and the model they came from.
#[derive(Serialize, ToSchema)]
pub struct PredictResponse {
    /// b0 + x^T b for each row.
    predictions: Vec<f64>,
    /// Classification: the predicted class (+1 or -1) of each row.
    #[serde(skip_serializing_if = "Option::is_none")]
    labels: Option<Vec<f64>>,
    model: Model,
    /// Kafka timestamp (Unix ms) of the newest message in the statistics the model was
    /// extracted from; null before the first timestamped message.
    #[schema(examples(1_700_000_000_000_u64))]
    as_of: Option<u64>,
}

/// The rows of a predict request as dense vectors of p features.
fn predict_rows(req: PredictRequest, h: &StreamHandle) -> Result<Vec<Vec<f64>>, ApiError> {
    let p = h.p();
    match (req.rows, req.features) {
        (Some(rows), None) => {
            if let Some((i, r)) = rows.iter().enumerate().find(|(_, r)| r.len() != p) {
                return Err(ApiError::bad_request(
                    "dimension",
                    format!(
                        "row {i} has {} features, stream '{}' has {p}",
                        r.len(),
                        h.name()
                    ),
                ));
            }
            Ok(rows)
        }
        (None, Some(named)) => {
            let Some(index) = &h.index else {
                return Err(ApiError::bad_request(
                    "unknown_feature",
                    format!(
                        "stream '{}' declares no feature names; send \"rows\" as arrays",
                        h.name()
                    ),
                ));
            };
            named
                .into_iter()
                .enumerate()
                .map(|(i, m)| {
                    let mut row = vec![f64::NAN; p];
                    for (k, v) in m {
                        let j = *index.get(&k).ok_or_else(|| {
                            ApiError::bad_request(
                                "unknown_feature",
                                format!("row {i}: unknown feature '{k}'"),
                            )
                        })?;
                        row[j] = v;
                    }
                    if let Some(j) = row.iter().position(|v| v.is_nan()) {
                        let name = h.names().map(|n| n[j].clone()).unwrap_or_default();
                        return Err(ApiError::bad_request(
                            "missing_feature",
                            format!("row {i}: feature '{name}' is missing"),
                        ));
                    }
                    Ok(row)
                })
                .collect()
        }
        _ => Err(ApiError::bad_request(
            "invalid_body",
            "give exactly one of \"rows\" (arrays) or \"features\" (objects)",
        )),
    }
}

/// Predictions b0 + x^T b from a model extracted for the request.
#[utoipa::path(post, path = "/v1/streams/{name}/predict", tag = "streams",
    params(("name" = String, Path, description = "The stream's name")),
    request_body(content = PredictRequest, description = "A model request and the rows",
        examples(
            ("rows" = (value = json!({"model": {"method": "ols"}, "rows": [[0.1, 0.2, 0.3]]}))),
            ("named" = (value = json!({"model": {"method": "lasso", "k": 2}, "features": [{"f0": 0.1, "f1": 0.2, "f2": 0.3}]}))),
        )),
    responses(
        (status = 200, description = "One prediction per row", body = PredictResponse),
        (status = 400, description = "the codes of `/model`, and `dimension`, `unknown_feature`, \
            `missing_feature`", body = error::ErrorBody),
        (status = 404, description = "`unknown_stream`", body = error::ErrorBody),
        (status = 409, description = "`no_data`, `one_class`", body = error::ErrorBody),
        (status = 413, description = "`payload_too_large`", body = error::ErrorBody),
        (status = 415, description = "`unsupported_media_type`", body = error::ErrorBody),
        (status = 503, description = "`shutting_down`, `busy` (with Retry-After), `extraction_timeout`", body = error::ErrorBody),
    ))]
async fn predict(
    State(st): State<AppState>,
    Path(name): Path<String>,
    body: Result<Json<Value>, JsonRejection>,
) -> Result<Json<PredictResponse>, ApiError> {
    let h = st.stream(&name)?;
    let Json(body) = body?;
    let req: PredictRequest = serde_json::from_value(body)
        .map_err(|e| ApiError::bad_request("invalid_body", e.to_string()))?;
    let params = parse_params(req.model.clone())?.check(h.p())?;
    let rows = predict_rows(req, &h)?;
    let snap = h.snapshot();
    let as_of = snap.as_of_ms;
    let method = params.method();
    let hh = h.clone();
    let model = st
        .extract(&name, "predict", method.name(), move || {
            Ok(model_from_folds(
                &snap.stats,
                snap.folds.as_ref(),
                &params,
                hh.names(),
            )?)
        })
        .await?;
    let predictions: Vec<f64> = rows.iter().map(|r| model.predict(r)).collect();
    let labels = (h.task() == Task::Classification).then(|| {
        predictions
            .iter()
            .map(|&s| if s >= 0.0 { 1.0 } else { -1.0 })
            .collect()
    });
    Ok(Json(PredictResponse {
        predictions,
        labels,
        model,
        as_of,
    }))
}
