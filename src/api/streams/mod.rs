//! The observation-stream endpoints under `/v1/streams`: listing, summary, history, model and
//! path; predict (`predict`) and the statistics (`statistics`) in files of their own.
//! Extractions go through `AppState::extract` (`admission`).

use super::params::{
    PredictRequest, check_missing, default_method, note_default, parse_params, predict_rows,
    query_to_json,
};
use super::window::{
    WindowAnswer, WindowRequest, WindowsKept, history_span, no_cv_in_window, take_window,
    take_window_query, window_only_query, windowed,
};
use super::{ApiError, AppState, error};
use crate::api::error::Code;
use crate::state::streams::{Snapshot, Stats, StreamHandle};
use axum::Json;
use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{Path, Query, State};
use ravel_core::Task;
use ravel_core::solve::{
    Model, PathModel, Request as ModelRequest, model_from_folds, path_from_folds,
};
use ravel_core::stats::{DriftStatus, RunningStats};
use serde::Serialize;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;
use utoipa::ToSchema;

pub(super) mod predict;
pub(super) mod statistics;

impl AppState {
    pub(super) fn stream(&self, name: &str) -> Result<Arc<StreamHandle>, ApiError> {
        self.streams.get(name).ok_or_else(|| {
            let names: Vec<String> = self.streams.iter().map(|h| h.name().to_string()).collect();
            ApiError::unknown_stream_among(name, &names)
        })
    }
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
    /// The live prequential quality (`quality`): each row predicted by the quality model
    /// before it is folded; null when the stream's quality is off.
    quality: Option<crate::state::quality::QualitySummary>,
    /// What arrived on `topic` since the service started, and what was refused.
    arrivals: Arrivals,
    /// The time buckets the stream keeps (`windows`): model, path and predict requests may
    /// then take a `"window"`. Absent when it keeps none.
    #[serde(skip_serializing_if = "Option::is_none")]
    windows: Option<WindowsKept>,
    /// Streams declared with names: which declared fields and target the first events since
    /// the start carried (`ingest.field_check_events` of them), and, once that many were
    /// read, those absent from all of them with the closest event keys.
    #[serde(skip_serializing_if = "Option::is_none")]
    fields_seen: Option<crate::state::sightings::FieldsSeen>,
}

/// The messages a stream read since the service started (the counters of `/metrics`), so that
/// a stream reading the wrong topic, or refusing its messages, says so where it is looked at.
#[derive(Serialize, ToSchema)]
pub struct Arrivals {
    /// Kafka messages read from the topic (`ravel_messages_consumed_total`).
    messages: u64,
    /// Messages refused, by reason (`ravel_messages_rejected_total`; the reason is the
    /// `ravel-reason` header of their dead-letter copies).
    rejected: std::collections::BTreeMap<&'static str, u64>,
    /// Copies of the refused messages delivered to `<topic>.dlq`, failed (retried or, with
    /// `dlq.on_failure = "skip"`, skipped), and skipped.
    dead_letters: DeadLetterCounts,
    /// When something needs a look: no message read yet (the topic may be misspelled, or
    /// nothing produces to it), or messages refused; or, not an alarm, that a stream restored
    /// from its checkpoint has read nothing new.
    #[serde(skip_serializing_if = "Option::is_none")]
    note: Option<String>,
    /// Whether the note is an alarm, read from the stream's state rather than the process's
    /// age (issue 59): no row at all (none read, none restored), or messages refused. A
    /// stream restored from its checkpoint that has read nothing since is not one: its lag
    /// says whether the topic holds more.
    alarm: bool,
}

/// The outcomes of dead-letter copies.
#[derive(Serialize, ToSchema)]
pub struct DeadLetterCounts {
    delivered: u64,
    failed: u64,
    skipped: u64,
}

fn arrivals(h: &StreamHandle, snap: &crate::state::streams::Snapshot) -> Arrivals {
    let t = h.arrivals.tally();
    let (messages, rejected) = (t.messages, t.rejected);
    let refused: u64 = rejected.values().sum();
    let n = snap.stats.n();
    let note = if messages == 0 && n == 0 {
        Some(format!(
            "no message read from topic '{}' and no row in the statistics: check that \
             producers write to this topic (the stream's topic in the config) and /readyz",
            h.topic
        ))
    } else if messages == 0 {
        let last = snap
            .last_update
            .map(|t| {
                format!(
                    ", the last folded at {}",
                    crate::health::utc_rfc3339(crate::unix_ms(t))
                )
            })
            .unwrap_or_default();
        Some(format!(
            "no new message on topic '{}' since this start: the statistics restored from the \
             checkpoint hold {n} rows{last}; the consumer lag (ravel_consumer_lag) is 0 when \
             the stream is caught up",
            h.topic
        ))
    } else if refused > 0 {
        Some(format!(
            "{refused} of {messages} messages refused (by reason in `rejected`); the messages \
             are in '{}' with a ravel-reason header",
            crate::config::dlq_of(&h.topic)
        ))
    } else {
        None
    };
    Arrivals {
        messages,
        rejected,
        dead_letters: DeadLetterCounts {
            delivered: t.delivered,
            failed: t.failed,
            skipped: t.skipped,
        },
        note,
        alarm: refused > 0 || (messages == 0 && n == 0),
    }
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
        quality: h.quality.as_ref().map(|q| q.summary()),
        arrivals: arrivals(h, &snap),
        windows: h.window_spec.map(|w| WindowsKept {
            bucket_ms: w.bucket_ms,
            keep_ms: w.keep_ms,
        }),
        fields_seen: h.sightings.as_ref().map(|s| s.summary()),
    }
}

/// The partitions merged into a snapshot (`state.store = "kafka"`; empty otherwise).
fn partition_states(snap: &crate::state::streams::Snapshot) -> Vec<PartitionStateSummary> {
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
pub(super) async fn list_streams(State(st): State<AppState>) -> Json<StreamList> {
    Json(StreamList {
        streams: st.streams.iter().map(|h| summary(&h, &st.health)).collect(),
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
pub(super) async fn get_stream(
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
    /// only: empty after a restart. With a window, those taken in it.
    points: Vec<crate::state::history::HistoryPoint>,
}

/// Periodic snapshots of a stream's default model (support and coefficients), alpha,
/// effective sample size and drift alarms, oldest first (`[history]` in the configuration);
/// with `window.from` and `window.to` (or `window.last`), the points taken in that span.
#[utoipa::path(get, path = "/v1/streams/{name}/history", tag = "streams",
    params(
        ("name" = String, Path, description = "The stream's name"),
        ("window.from" = Option<String>, Query, description = "With `window.to`: only the \
            points taken at or after this time (Unix ms or RFC 3339)"),
        ("window.to" = Option<String>, Query, description = "With `window.from`: only the \
            points taken before this time (Unix ms or RFC 3339)"),
        ("window.last" = Option<String>, Query, description = "Instead of `window.from` and \
            `window.to`: only the points of this last span up to now, such as `1h`"),
    ),
    responses(
        (status = 200, description = "The stream's history", body = StreamHistory),
        (status = 400, description = "`invalid_window`, `invalid_query`", body = error::ErrorBody),
        (status = 404, description = "`unknown_stream`", body = error::ErrorBody),
    ))]
pub(super) async fn history(
    State(st): State<AppState>,
    Path(name): Path<String>,
    query: Result<Query<HashMap<String, String>>, QueryRejection>,
) -> Result<Json<StreamHistory>, ApiError> {
    let h = st.stream(&name)?;
    let window = window_only_query(query, "the history takes")?;
    let mut points = h.history.points();
    if let Some(req) = window {
        let now = crate::unix_ms(std::time::SystemTime::now()) as i64;
        let (from, to) = history_span(req, now)?;
        points.retain(|p| (from..to).contains(&(p.time_ms as i64)));
    }
    let spec = h.history.spec;
    Ok(Json(StreamHistory {
        name: h.name().to_string(),
        method: "lasso",
        k: spec.k,
        interval_ms: spec.interval.as_millis() as u64,
        length: spec.length,
        features: feature_names(&h),
        points,
    }))
}

fn feature_names(h: &StreamHandle) -> Vec<String> {
    match h.names() {
        Some(n) => n.to_vec(),
        None => (0..h.p()).map(|j| j.to_string()).collect(),
    }
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
    /// With a `"window"` in the request: the span of time the statistics cover (the stream's
    /// time buckets there, merged) and its rows.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window: Option<WindowAnswer>,
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
    /// With a `"window"`: the span the statistics cover, as in the model.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub window: Option<WindowAnswer>,
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
pub(super) async fn model(
    State(st): State<AppState>,
    Path(name): Path<String>,
    body: Result<Json<Value>, JsonRejection>,
) -> Result<Json<StreamModel>, ApiError> {
    let h = st.stream(&name)?;
    let Json(mut body) = body?;
    let window = take_window(&mut body)?;
    let (snap, answer) = windowed(&h, window)?;
    let note = default_method(&mut body, h.p(), snap.stats.n());
    let params = parse_params(body)?.check(h.p())?;
    no_cv_in_window(&answer, params.request().select)?;
    let method = params.method().name();
    let mut at = extract_from(&st, &h, snap, "model", method, move |snap, names| {
        model_from_folds(&snap.stats, snap.folds.as_ref(), &params, names)
    })
    .await?;
    note_default(at.answer.selection.as_deref_mut(), note);
    Ok(Json(StreamModel {
        model: at.answer,
        as_of: at.as_of,
        partition_states: at.partition_states,
        window: answer,
    }))
}

/// An answer extracted from a stream's snapshot, with where the snapshot stands.
struct Extracted<T> {
    answer: T,
    /// The snapshot's `as_of` (Kafka timestamp of its newest message).
    as_of: Option<u64>,
    /// The partitions merged into it (`state.store = "kafka"`).
    partition_states: Vec<PartitionStateSummary>,
    /// The snapshot itself.
    snapshot: Arc<Snapshot>,
}

/// The one way the stream handlers extract: `f` runs on `snap` (the stream's current
/// snapshot, or a window's, `windowed`) and the feature names under the API's admission
/// (`AppState::extract`: slots, timeout, metrics by `kind` and `method`).
async fn extract_from<T, E>(
    st: &AppState,
    h: &Arc<StreamHandle>,
    snap: Arc<Snapshot>,
    kind: &'static str,
    method: &'static str,
    f: impl FnOnce(&Snapshot, Option<&[String]>) -> Result<T, E> + Send + 'static,
) -> Result<Extracted<T>, ApiError>
where
    T: Send + 'static,
    ApiError: From<E>,
{
    let snapshot = snap.clone();
    let as_of = snap.as_of_ms;
    let partition_states = partition_states(&snap);
    let hh = h.clone();
    let answer = st
        .extract(h.name(), kind, method, move || Ok(f(&snap, hh.names())?))
        .await?;
    Ok(Extracted {
        answer,
        as_of,
        partition_states,
        snapshot,
    })
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
pub(super) async fn path(
    State(st): State<AppState>,
    Path(name): Path<String>,
    query: Result<Query<HashMap<String, String>>, QueryRejection>,
) -> Result<Json<StreamPath>, ApiError> {
    let Query(mut q) = query?;
    let window = take_window_query(&mut q)?;
    path_of(st, name, query_to_json(q), window).await
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
pub(super) async fn path_post(
    State(st): State<AppState>,
    Path(name): Path<String>,
    body: Result<Json<Value>, JsonRejection>,
) -> Result<Json<StreamPath>, ApiError> {
    let Json(mut body) = body?;
    let window = take_window(&mut body)?;
    path_of(st, name, body, window).await
}

async fn path_of(
    st: AppState,
    name: String,
    mut body: Value,
    window: Option<WindowRequest>,
) -> Result<Json<StreamPath>, ApiError> {
    let h = st.stream(&name)?;
    let (snap, answer) = windowed(&h, window)?;
    let note = default_method(&mut body, h.p(), snap.stats.n());
    let params = parse_params(body)?.check_path(h.p())?;
    no_cv_in_window(&answer, params.request().select)?;
    let method = params.method().name();
    let mut at = extract_from(&st, &h, snap, "path", method, move |snap, names| {
        path_from_folds(&snap.stats, snap.folds.as_ref(), &params, names)
    })
    .await?;
    note_default(at.answer.selection.as_mut(), note);
    Ok(Json(StreamPath {
        path: at.answer,
        as_of: at.as_of,
        partition_states: at.partition_states,
        window: answer,
    }))
}
