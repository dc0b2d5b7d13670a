//! What every request goes through besides its handler: counted and timed by route template
//! (`track`, bounded labels), and the JSON answers for an unknown route or method.

use super::{ApiError, AppState};
use crate::api::error::Code;
use axum::extract::{MatchedPath, Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::Response;
use std::time::Instant;

/// Counts and times every request by route template (never by raw path: bounded labels).
pub(super) async fn track(State(st): State<AppState>, req: Request, next: Next) -> Response {
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

pub(super) async fn not_found(req: Request) -> ApiError {
    ApiError::new(
        StatusCode::NOT_FOUND,
        Code::NotFound,
        format!(
            "no route for {} {}; the API lives under /v1/streams and /v1/feature-streams",
            req.method(),
            req.uri().path()
        ),
    )
}

pub(super) async fn method_not_allowed(req: Request) -> ApiError {
    ApiError::new(
        StatusCode::METHOD_NOT_ALLOWED,
        Code::MethodNotAllowed,
        format!("{} is not allowed on {}", req.method(), req.uri().path()),
    )
}
