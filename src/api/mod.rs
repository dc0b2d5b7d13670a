//! The HTTP API (axum): stream summaries, model extraction, lambda paths, predictions, a
//! stream's running statistics (for the Python package's in-process estimators), health
//! and Prometheus metrics; feature streams in `features`, and the Lasso path of wide ones in
//! `wide`. JSON in and out; every error is
//! `ApiError` JSON.
//!
//! Extraction is CPU-bound (up to ~100 ms at p = 1000), so it runs on the blocking pool, from
//! the stream's current immutable snapshot, and at most `http.max_concurrent_extractions` at
//! once; request bodies are limited to `http.body_limit_bytes`.
//!
//! Every route is declared with its OpenAPI operation (`#[utoipa::path]`) and registered
//! through `utoipa_axum::routes!`, so the router and the description served at
//! `/openapi.json` (see `openapi`) are built from the same list; responses are typed structs.

mod admission;
pub mod auth;
mod console;
pub mod declarations;
pub mod error;
mod features;
mod health;
pub mod http;
pub mod openapi;
mod params;
mod requests;
mod streams;
mod wide;
mod window;

use crate::metrics::Metrics;
use crate::state::feature_streams::FeatureStreams;
use crate::state::streams::Streams;
pub use admission::Extractions;
use axum::Router;
use axum::extract::DefaultBodyLimit;
use axum::middleware::{self};
pub use error::ApiError;
use requests::{json_errors, method_not_allowed, not_found, track};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

/// Shared by every handler.
#[derive(Clone)]
pub struct AppState {
    pub streams: Arc<Streams>,
    /// Streams declared at run time (`crate::declared`, routes in `declarations`).
    pub declarations: Arc<crate::declared::Declarations>,
    /// `http.admin_token`: the token of the declaration routes (empty: they answer 403).
    pub admin_token: Arc<crate::config::Secret>,
    pub feature_streams: Arc<FeatureStreams>,
    /// Writes labels sent over HTTP to their feature stream's topic (None: no feature streams).
    pub producer: Option<rdkafka::producer::FutureProducer>,
    pub metrics: Arc<Metrics>,
    /// Set by ingest once the consumer group assigned partitions of every stream topic.
    pub ready: Arc<AtomicBool>,
    /// Missing topics, held partitions, authorization errors (`crate::health`).
    pub health: Arc<crate::health::Health>,
    pub extractions: Extractions,
    /// Reads a topic's latest messages for `GET /v1/topics/{topic}/fields`.
    pub sampler: Arc<crate::propose::Sampler>,
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
        .layer(middleware::from_fn(json_errors))
        .layer(middleware::from_fn_with_state(state.clone(), track))
        .with_state(state);
    (router, api)
}

/// Every route with its OpenAPI operation: the one list the router and the document share.
fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::with_openapi(openapi::base())
        .routes(routes!(health::healthz))
        .routes(routes!(health::readyz))
        .routes(routes!(health::metrics))
        .routes(routes!(openapi::serve))
        .routes(routes!(streams::list_streams))
        .routes(routes!(
            streams::get_stream,
            declarations::put_stream,
            declarations::delete_stream
        ))
        .routes(routes!(declarations::get_declaration))
        .routes(routes!(declarations::topic_fields))
        .routes(routes!(
            declarations::get_scorer,
            declarations::put_scorer,
            declarations::delete_scorer
        ))
        .routes(routes!(streams::history))
        .routes(routes!(streams::statistics::statistics))
        .routes(routes!(streams::model))
        .routes(routes!(streams::path, streams::path_post))
        .routes(routes!(streams::predict::predict))
        .routes(routes!(features::list))
        .routes(routes!(
            features::get_one,
            declarations::put_feature_stream,
            declarations::delete_feature_stream
        ))
        .routes(routes!(declarations::get_feature_declaration))
        .routes(routes!(features::put_labels))
        .routes(routes!(features::model))
        .routes(routes!(wide::path))
        .routes(routes!(wide::model))
}

/// The router; `body_limit` bounds every request body.
pub fn router(state: AppState, body_limit: usize) -> Router {
    router_and_openapi(state, body_limit).0
}
