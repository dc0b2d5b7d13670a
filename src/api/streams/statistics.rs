//! `GET /v1/streams/{name}/statistics`: a stream's running statistics as its snapshot holds
//! them, the state every model of the API is extracted from (issue 61's bridge: the Python
//! package runs any model, path or selection on them in a notebook). With `window.from` and
//! `window.to` (or `window.last`), the statistics of that span of a stream that keeps time
//! buckets (`windows`), as the model routes' `"window"` merges them (`api::window`).

use super::feature_names;
use crate::api::window::{WindowAnswer, window_only_query, windowed};
use crate::api::{ApiError, AppState, error};
use axum::Json;
use axum::extract::rejection::QueryRejection;
use axum::extract::{Path, Query, State};
use ravel_core::Task;
use serde::Serialize;
use serde_json::Value;
use std::collections::HashMap;
use utoipa::ToSchema;

/// The body of `GET /v1/streams/{name}/statistics`: the stream's running statistics, from
/// which every model the service answers is extracted.
#[derive(Serialize, ToSchema)]
pub struct StreamStatistics {
    name: String,
    task: Task,
    /// Feature names in the statistics' column order (the column index as text where the
    /// stream declares none).
    features: Vec<String>,
    /// Rows in the statistics (with a window: in the window).
    n: u64,
    /// Kafka timestamp (Unix ms) of the newest message in the statistics; null before the
    /// first timestamped message.
    #[schema(examples(1_700_000_000_000_u64))]
    as_of: Option<u64>,
    /// The statistics as a checkpoint holds them (`task`, then for regression n, the total
    /// weight, E[x - s], E[y - t], the lower triangle of E[(x - s)(x - s)^T] column by column,
    /// E[(x - s)(y - t)], E[(y - t)^2], the schedule and the shift (s, t); classification:
    /// `pos` and `neg`, one such set per class). Every number round-trips exactly; the Python
    /// package reads them (`ravel_lm.Stats.from_json`) to run any model, path or selection on
    /// the service's state in a notebook.
    #[schema(value_type = Object)]
    statistics: Value,
    /// With `window.from` and `window.to` (or `window.last`): the span the statistics cover,
    /// as a model's `window` reports it.
    #[serde(skip_serializing_if = "Option::is_none")]
    window: Option<WindowAnswer>,
}

/// The stream's running statistics (n, the moments, the weight schedule), read from its
/// current snapshot: the state every model of `POST .../model` is extracted from, so the
/// same request on them gives the same model. Open to readers as the models are; serialized
/// on the extraction pool, under its bounds (`http.max_concurrent_extractions`). With
/// `window.from` and `window.to` (or `window.last`), a stream that keeps time buckets
/// (`windows`) answers the statistics of that span alone, merged from its buckets as a model
/// request's `"window"` is, so a model of them equals the model of `POST .../model` with the
/// same window.
#[utoipa::path(get, path = "/v1/streams/{name}/statistics", tag = "streams",
    params(
        ("name" = String, Path, description = "The stream's name"),
        ("window.from" = Option<String>, Query, description = "With `window.to`: the \
            statistics of the rows from this time on (Unix ms or RFC 3339), from the stream's \
            time buckets (`windows`)"),
        ("window.to" = Option<String>, Query, description = "With `window.from`: the end of \
            the span (exclusive; Unix ms or RFC 3339)"),
        ("window.last" = Option<String>, Query, description = "Instead of `window.from` and \
            `window.to`: the last span up to the end of the current bucket, such as `1h`"),
    ),
    responses(
        (status = 200, description = "The statistics", body = StreamStatistics),
        (status = 400, description = "`invalid_window` (also: the stream keeps no time \
            buckets), `invalid_query`", body = error::ErrorBody),
        (status = 404, description = "`unknown_stream`", body = error::ErrorBody),
        (status = 409, description = "`no_data`: the window holds no rows", body = error::ErrorBody),
        (status = 503, description = "`shutting_down`, `busy` (with Retry-After), `extraction_timeout`", body = error::ErrorBody),
    ))]
pub(in crate::api) async fn statistics(
    State(st): State<AppState>,
    Path(name): Path<String>,
    query: Result<Query<HashMap<String, String>>, QueryRejection>,
) -> Result<Json<StreamStatistics>, ApiError> {
    let h = st.stream(&name)?;
    let window = window_only_query(query, "the statistics take")?;
    let (snap, window) = windowed(&h, window)?;
    let (n, as_of) = (snap.stats.n(), snap.as_of_ms);
    let statistics = st
        .extract(h.name(), "statistics", "none", move || {
            serde_json::to_value(&snap.stats)
                .map_err(|e| ApiError::internal(format!("the statistics did not serialize: {e}")))
        })
        .await?;
    Ok(Json(StreamStatistics {
        name: h.name().to_string(),
        task: h.task(),
        features: feature_names(&h),
        n,
        as_of,
        statistics,
        window,
    }))
}
