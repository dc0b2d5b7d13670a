//! The feature-stream endpoints (paper 000): list and summary (selected features with
//! weights, passes, loss, staleness), labels over HTTP, and the model JSON of `ravel fit` /
//! `ravel select` with an optional refit.
//!
//! Summaries and models come from the stream's published `FeatureSnapshot`, never from the
//! running selection; the refit runs on the blocking pool like every extraction. Labels sent
//! with PUT are not applied here: they are written to the stream's topic, so that the state
//! stays a function of the topic (a restart replays them), and the request waits until
//! ingest has read them back to answer with what happened.

use super::{ApiError, AppState};
use crate::feature_streams::{FeatureSnapshot, FeatureStreamHandle};
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
use std::time::{Duration, Instant, UNIX_EPOCH};

/// How long PUT /labels waits for ingest to read its message back before answering 202.
const LABELS_WAIT: Duration = Duration::from_secs(30);

impl AppState {
    fn feature_stream(&self, name: &str) -> Result<Arc<FeatureStreamHandle>, ApiError> {
        self.feature_streams.get(name).cloned().ok_or_else(|| {
            ApiError::new(
                StatusCode::NOT_FOUND,
                "unknown_stream",
                format!("no feature stream named '{name}'; GET /v1/feature-streams lists them"),
            )
        })
    }
}

/// A feature stream's state as the API shows it.
#[derive(Serialize)]
struct FeatureStreamSummary {
    name: String,
    topic: String,
    /// "os" or "asy-os".
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
    /// The next offset of each partition: every message before it was applied or refused.
    offsets: std::collections::BTreeMap<i32, i64>,
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
        last_update_ms: snap
            .last_update
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map(|d| d.as_millis() as u64),
        offsets: snap.offsets.clone(),
    }
}

pub(super) async fn list(State(st): State<AppState>) -> Json<Value> {
    let list: Vec<FeatureStreamSummary> = st
        .feature_streams
        .iter()
        .map(|h| summary(h, &h.snapshot(), false))
        .collect();
    Json(json!({"feature_streams": list}))
}

pub(super) async fn get_one(
    State(st): State<AppState>,
    Path(name): Path<String>,
) -> Result<Json<Value>, ApiError> {
    let h = st.feature_stream(&name)?;
    let v = serde_json::to_value(summary(&h, &h.snapshot(), true))
        .map_err(|e| ApiError::internal(e.to_string()))?;
    Ok(Json(v))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ModelRequest {
    /// Re-solve the loss on the selected columns (least squares for the squared loss).
    #[serde(default)]
    refit: bool,
}

pub(super) async fn model(
    State(st): State<AppState>,
    Path(name): Path<String>,
    body: Result<Json<Value>, JsonRejection>,
) -> Result<Json<Model>, ApiError> {
    let h = st.feature_stream(&name)?;
    let Json(body) = body?;
    if !body.is_object() {
        return Err(ApiError::bad_request(
            "invalid_body",
            "the body must be a JSON object such as {\"refit\": true}",
        ));
    }
    let req: ModelRequest = serde_json::from_value(body)
        .map_err(|e| ApiError::bad_request("invalid_body", e.to_string()))?;
    let Some(selection) = h.snapshot().selection.clone() else {
        return Err(ApiError::new(
            StatusCode::CONFLICT,
            "no_labels",
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

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct LabelsRequest {
    labels: Vec<f64>,
}

pub(super) async fn put_labels(
    State(st): State<AppState>,
    Path(name): Path<String>,
    body: Result<Json<Value>, JsonRejection>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let h = st.feature_stream(&name)?;
    let Json(body) = body?;
    let req: LabelsRequest = serde_json::from_value(body).map_err(|e| {
        ApiError::bad_request(
            "invalid_body",
            format!("{e}; the body is {{\"labels\": [y1, ..., yn]}}"),
        )
    })?;
    let c = &h.config;
    if req.labels.len() != c.n {
        return Err(ApiError::bad_request(
            "dimension",
            format!(
                "{} labels, but feature stream '{name}' has n = {} samples",
                req.labels.len(),
                c.n
            ),
        ));
    }
    let labels = Labels::new(req.labels.clone(), c.loss)
        .map_err(|e| ApiError::bad_request("label", e.to_string()))?;
    let snap = h.snapshot();
    if let Some(sel) = &snap.selection {
        if *sel.labels() == labels {
            return Ok((
                StatusCode::OK,
                Json(json!({"status": "unchanged", "n": c.n})),
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
            "kafka_unavailable",
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
                "kafka_unavailable",
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
                Json(json!({
                    "status": "queued",
                    "message": "the labels are on the topic; ingest has not read them yet",
                    "topic": h.topic, "partition": partition, "offset": offset,
                })),
            ));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    if let Some(r) = snap.rejection_at(partition, offset) {
        return Err(if r.reason == "labels_conflict" {
            labels_conflict(&r.message)
        } else {
            ApiError::new(StatusCode::BAD_REQUEST, "label", r.message.clone())
        });
    }
    match &snap.selection {
        Some(sel) if *sel.labels() == labels => Ok((
            StatusCode::OK,
            Json(json!({
                "status": "applied", "n": c.n,
                "topic": h.topic, "partition": partition, "offset": offset,
            })),
        )),
        _ => Err(labels_conflict(
            "the labels were written, but other labels arrived on the topic in the meantime",
        )),
    }
}

fn labels_conflict(message: &str) -> ApiError {
    ApiError::new(StatusCode::CONFLICT, "labels_conflict", message)
}
