//! The feature-stream endpoints (paper 000): list and summary (selected features with
//! weights, passes, loss, staleness), labels over HTTP, and the model JSON of `ravel fit` /
//! `ravel select` with an optional refit.
//!
//! Summaries and models come from the stream's published `FeatureSnapshot`, never from the
//! running selection; the refit runs on the blocking pool like every extraction. Labels sent
//! with PUT are not applied here: they are written to the stream's topic, so that the state
//! stays a function of the topic (a restart replays them), and the request waits until
//! ingest has read them back to answer with what happened.

use super::error::ErrorBody;
use super::{ApiError, AppState};
use crate::api::error::Code;
use crate::state::feature_streams::{FeatureSnapshot, FeatureStreamHandle};
use axum::Json;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use ravel_core::features::{Counters, Labels, Loss, Selected, Staleness};
use ravel_core::solve::Model;
use rdkafka::producer::FutureRecord;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::{Duration, Instant};
use utoipa::ToSchema;

/// How long PUT /labels waits for ingest to read its message back before answering 202.
const LABELS_WAIT: Duration = Duration::from_secs(30);

impl AppState {
    pub(super) fn feature_stream(&self, name: &str) -> Result<Arc<FeatureStreamHandle>, ApiError> {
        self.feature_streams.get(name).ok_or_else(|| {
            ApiError::new(
                StatusCode::NOT_FOUND,
                Code::UnknownStream,
                format!("no feature stream named '{name}'; GET /v1/feature-streams lists them"),
            )
        })
    }
}

/// A feature stream's state as the API shows it.
#[derive(Serialize, ToSchema)]
pub struct FeatureStreamSummary {
    name: String,
    topic: String,
    /// "os" or "asy-os".
    #[schema(examples("os", "asy-os"))]
    method: &'static str,
    loss_name: Loss,
    n: usize,
    s: usize,
    workers: usize,
    /// Whether the labels arrived (nothing is selected before).
    labels: bool,
    /// Features applied (every pass counted).
    features_seen: u64,
    passes: usize,
    /// Current objective L(u) and its value at the end of each pass (null before labels).
    loss: Option<f64>,
    loss_per_pass: Vec<f64>,
    /// Selected features, largest |weight| first (`weight`: standardized; `coefficient`:
    /// original units). Only in the single-stream view.
    #[serde(skip_serializing_if = "Option::is_none")]
    selected: Option<Vec<Selected>>,
    selected_count: usize,
    intercept: Option<f64>,
    counters: Counters,
    eta: Option<f64>,
    /// Asy-OS: per worker, u_C updates between its read and its push.
    staleness: Vec<Staleness>,
    /// Unix time of the last applied message, in milliseconds.
    last_update_ms: Option<u64>,
    /// The next offset of each partition (keyed by the partition number as text): every
    /// message before it was applied or refused.
    #[schema(value_type = std::collections::BTreeMap<String, i64>)]
    offsets: std::collections::BTreeMap<i32, i64>,
    /// `wide = true`: the columns kept for paper 004's path (`.../wide/path`).
    #[serde(skip_serializing_if = "Option::is_none")]
    wide: Option<WideSummary>,
}

/// What a wide feature stream keeps.
#[derive(Serialize, ToSchema)]
pub struct WideSummary {
    /// Columns kept (one per feature applied, sent again or not).
    columns: usize,
    /// Their nonzeros.
    nonzeros: u64,
    /// Bytes counted against the budget: the columns, and the matrix and vectors a path
    /// request builds from them.
    bytes: u64,
    /// The stream's share of `limits.max_memory`.
    budget_bytes: u64,
    /// Feature messages refused because their column would not fit (`memory_limit`).
    columns_refused: u64,
}

fn summary(h: &FeatureStreamHandle, snap: &FeatureSnapshot, detail: bool) -> FeatureStreamSummary {
    let c = &h.config;
    let sm = snap.selection.as_ref().map(|s| s.summary());
    FeatureStreamSummary {
        name: c.name.clone(),
        topic: h.topic.clone(),
        method: h.method(),
        loss_name: c.loss,
        n: c.n,
        s: c.s,
        workers: c.workers,
        labels: sm.is_some(),
        features_seen: snap.features_applied,
        passes: sm.as_ref().map_or(0, |s| s.passes),
        loss: sm.as_ref().map(|s| s.loss),
        loss_per_pass: sm
            .as_ref()
            .map(|s| s.loss_per_pass.clone())
            .unwrap_or_default(),
        selected_count: sm.as_ref().map_or(0, |s| s.selected.len()),
        selected: detail.then(|| sm.as_ref().map(|s| s.selected.clone()).unwrap_or_default()),
        intercept: sm.as_ref().map(|s| s.intercept),
        counters: sm.as_ref().map(|s| s.counters).unwrap_or_default(),
        eta: sm.as_ref().map(|s| s.eta),
        staleness: sm.map(|s| s.staleness).unwrap_or_default(),
        last_update_ms: snap.last_update.map(crate::unix_ms),
        offsets: snap.offsets.clone(),
        wide: c.wide.then(|| match &snap.wide {
            Some(w) => WideSummary {
                columns: w.p,
                nonzeros: w.nnz,
                bytes: w.bytes,
                budget_bytes: w.budget,
                columns_refused: w.refused,
            },
            None => WideSummary {
                columns: 0,
                nonzeros: 0,
                bytes: 0,
                budget_bytes: h.wide_budget,
                columns_refused: 0,
            },
        }),
    }
}

/// The body of `GET /v1/feature-streams`.
#[derive(Serialize, ToSchema)]
pub struct FeatureStreamList {
    /// Without the selected list (see the single-stream view).
    pub feature_streams: Vec<FeatureStreamSummary>,
}

/// Every feature stream, in name order.
#[utoipa::path(get, path = "/v1/feature-streams", tag = "feature streams",
    responses((status = 200, description = "Every feature stream", body = FeatureStreamList)))]
pub(super) async fn list(State(st): State<AppState>) -> Json<FeatureStreamList> {
    Json(FeatureStreamList {
        feature_streams: st
            .feature_streams
            .iter()
            .map(|h| summary(&h, &h.snapshot(), false))
            .collect(),
    })
}

/// One feature stream with its selected features.
#[utoipa::path(get, path = "/v1/feature-streams/{name}", tag = "feature streams",
    params(("name" = String, Path, description = "The feature stream's name")),
    responses(
        (status = 200, description = "The feature stream", body = FeatureStreamSummary),
        (status = 404, description = "`unknown_stream`", body = ErrorBody),
    ))]
pub(super) async fn get_one(
    State(st): State<AppState>,
    Path(name): Path<String>,
) -> Result<Json<FeatureStreamSummary>, ApiError> {
    let h = st.feature_stream(&name)?;
    Ok(Json(summary(&h, &h.snapshot(), true)))
}

/// The body of `POST /v1/feature-streams/{name}/model`.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct FeatureModelRequest {
    /// Re-solve the loss on the selected columns (least squares for the squared loss).
    #[serde(default)]
    refit: bool,
}

/// The model JSON of `ravel fit` / `ravel select` on the selected features.
#[utoipa::path(post, path = "/v1/feature-streams/{name}/model", tag = "feature streams",
    params(("name" = String, Path, description = "The feature stream's name")),
    request_body(content = FeatureModelRequest, examples(("refit" = (value = json!({"refit": true}))))),
    responses(
        (status = 200, description = "The model on the selected features", body = Model),
        (status = 400, description = "`invalid_body`, `malformed_json`", body = ErrorBody),
        (status = 404, description = "`unknown_stream`", body = ErrorBody),
        (status = 409, description = "`no_labels`", body = ErrorBody),
        (status = 415, description = "`unsupported_media_type`", body = ErrorBody),
        (status = 503, description = "`shutting_down`, `busy` (with Retry-After), `extraction_timeout`", body = ErrorBody),
    ))]
pub(super) async fn model(
    State(st): State<AppState>,
    Path(name): Path<String>,
    body: Result<Json<Value>, JsonRejection>,
) -> Result<Json<Model>, ApiError> {
    let h = st.feature_stream(&name)?;
    let Json(body) = body?;
    if !body.is_object() {
        return Err(ApiError::bad_request(
            Code::InvalidBody,
            "the body must be a JSON object such as {\"refit\": true}",
        ));
    }
    let req: FeatureModelRequest = serde_json::from_value(body)
        .map_err(|e| ApiError::bad_request(Code::InvalidBody, e.to_string()))?;
    let Some(selection) = h.snapshot().selection.clone() else {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            Code::NoLabels,
            format!(
                "feature stream '{name}' has no labels yet: send them on topic {} or with PUT /v1/feature-streams/{name}/labels",
                h.topic
            ),
        ));
    };
    let m = st
        .extract(&name, "feature_model", h.method(), move || {
            Ok(selection.model(req.refit))
        })
        .await?;
    Ok(Json(m))
}

/// The body of `PUT /v1/feature-streams/{name}/labels`.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct LabelsRequest {
    /// One label per sample (n of them).
    labels: Vec<f64>,
}

/// What became of labels sent with PUT.
#[derive(Default, Serialize, ToSchema)]
pub struct LabelsStatus {
    /// `applied` (200), `unchanged` (200) or `queued` (202: on the topic, not read back yet).
    #[schema(examples("applied", "unchanged", "queued"))]
    pub status: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub n: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<&'static str>,
    /// Where the labels were written.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub topic: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub partition: Option<i32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub offset: Option<i64>,
}

/// Labels over HTTP: written to the stream's topic, answered once ingest applied them.
#[utoipa::path(put, path = "/v1/feature-streams/{name}/labels", tag = "feature streams",
    params(("name" = String, Path, description = "The feature stream's name")),
    request_body(content = LabelsRequest, examples(("labels" = (value = json!({"labels": [0.3, -1.2, 0.8]}))))),
    responses(
        (status = 200, description = "Applied, or unchanged", body = LabelsStatus),
        (status = 202, description = "On the topic; ingest has not read them within 30 s", body = LabelsStatus),
        (status = 400, description = "`dimension`, `label`, `invalid_body`, `malformed_json`", body = ErrorBody),
        (status = 401, description = "`unauthorized` (with `http.token`)", body = ErrorBody),
        (status = 404, description = "`unknown_stream`", body = ErrorBody),
        (status = 409, description = "`labels_conflict`", body = ErrorBody),
        (status = 415, description = "`unsupported_media_type`", body = ErrorBody),
        (status = 503, description = "`kafka_unavailable`", body = ErrorBody),
    ))]
pub(super) async fn put_labels(
    State(st): State<AppState>,
    Path(name): Path<String>,
    body: Result<Json<Value>, JsonRejection>,
) -> Result<(StatusCode, Json<LabelsStatus>), ApiError> {
    let h = st.feature_stream(&name)?;
    let Json(body) = body?;
    let req: LabelsRequest = serde_json::from_value(body).map_err(|e| {
        ApiError::bad_request(
            Code::InvalidBody,
            format!("{e}; the body is {{\"labels\": [y1, ..., yn]}}"),
        )
    })?;
    let c = &h.config;
    if req.labels.len() != c.n {
        return Err(ApiError::bad_request(
            Code::Dimension,
            format!(
                "{} labels, but feature stream '{name}' has n = {} samples",
                req.labels.len(),
                c.n
            ),
        ));
    }
    let labels = Labels::new(req.labels.clone(), c.loss)
        .map_err(|e| ApiError::bad_request(Code::Label, e.to_string()))?;
    let snap = h.snapshot();
    if let Some(sel) = &snap.selection {
        if *sel.labels() == labels {
            return Ok((
                StatusCode::OK,
                Json(LabelsStatus {
                    status: "unchanged",
                    n: Some(c.n),
                    ..Default::default()
                }),
            ));
        }
        if snap.features_applied > 0 {
            return Err(labels_conflict(&format!(
                "feature stream '{name}' already selected from {} features with other labels; \
                 its labels cannot change (use a new stream or topic)",
                snap.features_applied
            )));
        }
    }
    let producer = st.producer.as_ref().ok_or_else(|| {
        ApiError::new(
            StatusCode::SERVICE_UNAVAILABLE,
            Code::KafkaUnavailable,
            "no producer for feature streams",
        )
    })?;
    let payload = serde_json::to_vec(&json!({"labels": req.labels}))
        .map_err(|e| ApiError::internal(e.to_string()))?;
    let delivery = producer
        .send(
            FutureRecord::to(&h.topic).key("labels").payload(&payload),
            Duration::from_secs(10),
        )
        .await
        .map_err(|(e, _)| {
            ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                Code::KafkaUnavailable,
                format!("cannot write the labels to topic {}: {e}", h.topic),
            )
        })?;
    let (partition, offset) = (delivery.partition, delivery.offset);
    let start = Instant::now();
    let snap = loop {
        let snap = h.snapshot();
        if snap.has_read(partition, offset) {
            break snap;
        }
        if start.elapsed() > LABELS_WAIT {
            return Ok((
                StatusCode::ACCEPTED,
                Json(LabelsStatus {
                    status: "queued",
                    n: None,
                    message: Some("the labels are on the topic; ingest has not read them yet"),
                    topic: Some(h.topic.clone()),
                    partition: Some(partition),
                    offset: Some(offset),
                }),
            ));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    if let Some(r) = snap.rejection_at(partition, offset) {
        return Err(if r.reason == "labels_conflict" {
            labels_conflict(&r.message)
        } else {
            ApiError::new(StatusCode::BAD_REQUEST, Code::Label, r.message.clone())
        });
    }
    match &snap.selection {
        Some(sel) if *sel.labels() == labels => Ok((
            StatusCode::OK,
            Json(LabelsStatus {
                status: "applied",
                n: Some(c.n),
                message: None,
                topic: Some(h.topic.clone()),
                partition: Some(partition),
                offset: Some(offset),
            }),
        )),
        _ => Err(labels_conflict(
            "the labels were written, but other labels arrived on the topic in the meantime",
        )),
    }
}

fn labels_conflict(message: &str) -> ApiError {
    ApiError::new(StatusCode::CONFLICT, Code::LabelsConflict, message)
}
