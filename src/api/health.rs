//! The operations endpoints: `/healthz` (the process runs), `/readyz` (Kafka answers, the
//! consumer group has its partitions and no topic is missing or denied) and `/metrics`
//! (Prometheus).

use super::{AppState, error};
use crate::api::error::Code;
use axum::Json;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use std::sync::atomic::Ordering;
use utoipa::ToSchema;

/// `{"status": "ok"}` or `{"status": "ready"}`.
#[derive(Serialize, ToSchema)]
pub struct Status {
    #[schema(examples("ok", "ready"))]
    pub status: &'static str,
}

/// 200 while the process runs.
#[utoipa::path(get, path = "/healthz", tag = "operations",
    responses((status = 200, description = "The process runs", body = Status)))]
pub(super) async fn healthz() -> Json<Status> {
    Json(Status { status: "ok" })
}

/// The body of `/readyz`, ready or not: what is wrong with the Kafka side, if anything.
#[derive(Serialize, ToSchema)]
pub struct Readiness {
    /// `ready` or `not_ready`.
    #[schema(examples("ready", "not_ready"))]
    pub status: &'static str,
    /// Present while the cluster does not answer: the brokers asked and since when.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kafka_unreachable: Option<crate::health::Unreachable>,
    /// Topics ravel needs that the cluster lacks, with the command that creates each.
    pub missing_topics: Vec<crate::health::MissingTopic>,
    /// Partitions held at a message whose dead-letter copy is not delivered yet (listed,
    /// but not a reason to be unready).
    pub held_partitions: Vec<crate::health::HeldPartition>,
    /// Operations Kafka refused.
    pub authorization_errors: Vec<crate::health::Denied>,
    /// The scorers (`[[scorers]]`): their topics, delivery guarantee and state (listed, but
    /// a scorer waiting for its stream's first rows is not a reason to be unready).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub scorers: Vec<crate::health::ScorerHealth>,
    /// The consumers that assign themselves every partition (`kafka.assignment =
    /// "standalone"`), with the other instances seen reading the same partitions that way
    /// (each a reason to be not ready).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub standalone: Vec<crate::health::StandaloneHealth>,
    /// Present while this member of the consumer group has waited longer than a rebalance
    /// takes for partitions (its join is not answered), with what to do.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub unassigned: Option<crate::health::Unassigned>,
    /// When not ready: `not_ready` and every reason.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<error::ErrorDetail>,
}

/// 200 once Kafka answers, partitions of every stream topic are assigned, every topic ravel
/// needs exists and Kafka denied nothing; else 503 saying why. Either way the body lists the missing topics
/// (with the command that creates each), the partitions held at a message whose dead-letter
/// copy is not delivered, and the authorization errors.
#[utoipa::path(get, path = "/readyz", tag = "operations",
    responses(
        (status = 200, description = "Ready to serve current statistics", body = Readiness),
        (status = 503, description = "`not_ready`, with the reasons", body = Readiness),
    ))]
pub(super) async fn readyz(State(st): State<AppState>) -> (StatusCode, Json<Readiness>) {
    let h = st.health.snapshot();
    let assigned = st.ready.load(Ordering::SeqCst);
    let mut reasons: Vec<String> = Vec::new();
    if let Some(u) = &h.kafka_unreachable {
        let (what, fix) =
            crate::health::Refusal::explain(crate::health::Refusal::of(&u.error), &u.brokers);
        reasons.push(format!("{what} since {} ({}): {fix}", u.since, u.error));
    }
    for m in &h.missing_topics {
        reasons.push(format!(
            "topic '{}' does not exist ({}); create it with: {}",
            m.topic, m.why, m.create_with
        ));
    }
    for d in &h.authorization_errors {
        reasons.push(format!(
            "Kafka denies {} on {} '{}': {}",
            d.operation, d.resource_type, d.resource, d.error
        ));
    }
    if let Some(why) = &h.schema_registry {
        reasons.push(format!(
            "messages wait for their schemas: {why} (they are read once it answers)"
        ));
    }
    for s in &h.standalone {
        if !s.other_instances.is_empty() {
            reasons.push(format!(
                "{} of group '{}' reads every partition in standalone mode (kafka.assignment), and so does {} (seen committing to the same group): both read every message; stop one, give each its own kafka.group_id, or use kafka.assignment = \"group\"",
                s.consumer,
                s.group,
                s.other_instances.join(", ")
            ));
        }
    }
    if let Some(u) = &h.unassigned {
        let others = u.others_hold.map_or(String::new(), |[o, n]| {
            format!(" (the other replicas wrote the latest states of {o} of the {n} partitions)")
        });
        reasons.push(format!(
            "this member of consumer group '{}' has had no partitions since {}{others}: {}",
            u.group, u.since, u.what_to_do
        ));
    }
    // Partitions cannot be assigned by a cluster that does not answer: that reason says it.
    if !assigned && h.kafka_unreachable.is_none() && h.unassigned.is_none() {
        reasons.push(
            "the Kafka consumer has not been assigned partitions of every stream topic yet".into(),
        );
    }
    let ready = reasons.is_empty();
    let body = Readiness {
        status: if ready { "ready" } else { "not_ready" },
        kafka_unreachable: h.kafka_unreachable,
        missing_topics: h.missing_topics,
        held_partitions: h.held_partitions,
        authorization_errors: h.authorization_errors,
        scorers: h.scorers,
        standalone: h.standalone,
        unassigned: h.unassigned,
        error: (!ready).then(|| error::ErrorDetail {
            code: Code::NotReady.as_str().into(),
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
pub(super) async fn metrics(State(st): State<AppState>) -> Response {
    st.metrics
        .cluster
        .schema_registry_waiting
        .set(i64::from(st.health.snapshot().schema_registry.is_some()));
    for h in st.streams.iter() {
        if let Some(q) = &h.quality {
            let q = q.summary();
            st.metrics.streams.set_quality(
                h.name(),
                &q.figures,
                &q.floor,
                q.rows,
                q.model_rows,
                q.window_fill,
            );
        }
    }
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        st.metrics.render(),
    )
        .into_response()
}
