//! What every request goes through besides its handler: counted and timed by route template
//! (`track`, bounded labels), the JSON answers for an unknown route or method, and
//! `json_errors`: a path that does not decode to UTF-8 is refused as `invalid_path`, and any
//! error an extractor or layer answers in plain text (axum's rejections) becomes the JSON
//! error body, so that every error a client sees has the same shape.

use super::{ApiError, AppState};
use crate::api::error::Code;
use axum::extract::{MatchedPath, Request, State};
use axum::http::{StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
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
        .api
        .http_requests
        .with_label_values(&[&route, &method, resp.status().as_str()])
        .inc();
    st.metrics
        .api
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

/// The longest plain-text error body kept as the JSON error's message.
const MAX_TEXT_ERROR: usize = 4096;

/// Refuses a path whose percent-decoded bytes are not UTF-8 (`invalid_path`), and turns every
/// error response that is not JSON into the JSON error body with the same status.
pub(super) async fn json_errors(req: Request, next: Next) -> Response {
    if std::str::from_utf8(&percent_decode(req.uri().path().as_bytes())).is_err() {
        return ApiError::bad_request(
            Code::InvalidPath,
            format!(
                "the path {} is not valid UTF-8 once percent-decoded; stream names are UTF-8 text",
                req.uri().path()
            ),
        )
        .into_response();
    }
    let resp = next.run(req).await;
    let status = resp.status();
    let json = resp
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !(status.is_client_error() || status.is_server_error()) || json {
        return resp;
    }
    let body = axum::body::to_bytes(resp.into_body(), MAX_TEXT_ERROR)
        .await
        .unwrap_or_default();
    let text = String::from_utf8_lossy(&body).trim().to_string();
    let (code, message) = text_error(status, text);
    ApiError::new(status, code, message).into_response()
}

/// The code and message of a plain-text error answered with `status`.
fn text_error(status: StatusCode, text: String) -> (Code, String) {
    let code = match status {
        StatusCode::BAD_REQUEST if text.starts_with("Invalid URL") => Code::InvalidPath,
        StatusCode::BAD_REQUEST => Code::BadRequest,
        StatusCode::NOT_FOUND => Code::NotFound,
        StatusCode::METHOD_NOT_ALLOWED => Code::MethodNotAllowed,
        StatusCode::PAYLOAD_TOO_LARGE => Code::PayloadTooLarge,
        StatusCode::UNSUPPORTED_MEDIA_TYPE => Code::UnsupportedMediaType,
        StatusCode::UNPROCESSABLE_ENTITY => Code::Unprocessable,
        s if s.is_server_error() => Code::Internal,
        _ => Code::RequestRefused,
    };
    let message = if text.is_empty() {
        status
            .canonical_reason()
            .unwrap_or("request refused")
            .to_string()
    } else {
        text
    };
    (code, message)
}

/// `%XX` sequences decoded to their bytes; anything else (a stray `%`) kept as it is.
fn percent_decode(s: &[u8]) -> Vec<u8> {
    let hex = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        if s[i] == b'%'
            && let (Some(h), Some(l)) = (
                s.get(i + 1).copied().and_then(hex),
                s.get(i + 2).copied().and_then(hex),
            )
        {
            out.push(h * 16 + l);
            i += 3;
            continue;
        }
        out.push(s[i]);
        i += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_decoding_finds_paths_that_are_not_utf8() {
        assert_eq!(percent_decode(b"/v1/a%20b"), b"/v1/a b");
        assert!(std::str::from_utf8(&percent_decode(b"/v1/feature-streams/%C3%28")).is_err());
        assert!(std::str::from_utf8(&percent_decode(b"/v1/streams/%C3%A9t%C3%A9")).is_ok());
        // A stray or short escape is kept as text.
        assert_eq!(percent_decode(b"/a%2"), b"/a%2");
        assert_eq!(percent_decode(b"/a%zz"), b"/a%zz");
    }

    #[test]
    fn a_plain_text_rejection_gets_a_code_by_status() {
        let (code, _) = text_error(StatusCode::BAD_REQUEST, "Invalid URL: bad".into());
        assert_eq!(code, Code::InvalidPath);
        let (code, msg) = text_error(StatusCode::PAYLOAD_TOO_LARGE, String::new());
        assert_eq!(
            (code, msg.as_str()),
            (Code::PayloadTooLarge, "Payload Too Large")
        );
    }
}
