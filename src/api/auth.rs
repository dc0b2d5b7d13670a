//! Access to state-changing requests: with `http.token` set, a request that writes (every
//! method but GET, HEAD and OPTIONS, except the read-only POSTs listed in `READ_ONLY_POSTS`:
//! model extraction and prediction compute from a snapshot and change nothing) must carry
//! `Authorization: Bearer <token>`; reads stay open. The comparison takes the same time
//! whatever the token's prefix, so response timing does not reveal it. Declaring and retiring
//! streams (`declarations`) needs the admin token (`http.admin_token`) instead.

use super::error::ApiError;
use crate::api::error::Code;
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use std::sync::Arc;

/// POST routes that read: they extract from a snapshot and change nothing.
const READ_ONLY_POSTS: [&str; 3] = ["/model", "/predict", "/path"];

/// Does this request change state?
pub fn writes(method: &Method, path: &str) -> bool {
    match *method {
        Method::GET | Method::HEAD | Method::OPTIONS => false,
        Method::POST => !READ_ONLY_POSTS.iter().any(|s| path.ends_with(s)),
        _ => true,
    }
}

/// Whether two tokens are equal, in a time that does not depend on where they differ.
pub(super) fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Whether a request is a declaration (PUT or DELETE of `/v1/streams/{name}`,
/// `/v1/feature-streams/{name}` or `/v1/scorers/{name}`): it carries the
/// admin token, not `http.token` (`require_token` lets it through to `declarations::Admin`).
pub fn is_declaration(method: &Method, path: &str) -> bool {
    (method == Method::PUT || method == Method::DELETE)
        && ["/v1/streams/", "/v1/scorers/", "/v1/feature-streams/"]
            .iter()
            .any(|kind| {
                path.strip_prefix(kind)
                    .is_some_and(|name| !name.is_empty() && !name.contains('/'))
            })
}

/// The middleware: 401 with the JSON error envelope when a writing request lacks the token.
pub async fn require_token(State(token): State<Arc<String>>, req: Request, next: Next) -> Response {
    // Declarations carry the admin token instead (`declarations::Admin`).
    if !writes(req.method(), req.uri().path()) || is_declaration(req.method(), req.uri().path()) {
        return next.run(req).await;
    }
    let given = req
        .headers()
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "));
    match given {
        Some(t) if same(t.trim().as_bytes(), token.as_bytes()) => next.run(req).await,
        _ => {
            let mut r = ApiError::new(
                StatusCode::UNAUTHORIZED,
                Code::Unauthorized,
                "this request changes state: send the service's token as `Authorization: Bearer <token>` (http.token)",
            )
            .into_response();
            r.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                header::HeaderValue::from_static("Bearer"),
            );
            r
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_writing_requests_need_the_token() {
        assert!(!writes(&Method::GET, "/v1/streams"));
        assert!(!writes(&Method::POST, "/v1/streams/s/model"));
        assert!(!writes(&Method::POST, "/v1/streams/s/predict"));
        assert!(!writes(&Method::POST, "/v1/feature-streams/f/model"));
        assert!(writes(&Method::PUT, "/v1/feature-streams/f/labels"));
        assert!(writes(&Method::DELETE, "/v1/streams/s"));
        assert!(writes(&Method::POST, "/v1/streams/s/reset"));
    }

    #[test]
    fn declarations_are_put_and_delete_of_one_stream() {
        assert!(is_declaration(&Method::PUT, "/v1/streams/s"));
        assert!(is_declaration(&Method::DELETE, "/v1/streams/s"));
        assert!(is_declaration(&Method::PUT, "/v1/scorers/s"));
        assert!(is_declaration(&Method::DELETE, "/v1/feature-streams/f"));
        assert!(!is_declaration(
            &Method::PUT,
            "/v1/feature-streams/f/labels"
        ));
        assert!(!is_declaration(&Method::GET, "/v1/streams/s"));
        assert!(!is_declaration(&Method::POST, "/v1/streams/s"));
        assert!(!is_declaration(&Method::PUT, "/v1/streams/s/labels"));
        assert!(!is_declaration(
            &Method::PUT,
            "/v1/feature-streams/f/labels"
        ));
        assert!(!is_declaration(&Method::PUT, "/v1/streams/"));
    }

    #[test]
    fn tokens_compare_whole() {
        assert!(same(b"abcdefgh", b"abcdefgh"));
        assert!(!same(b"abcdefgh", b"abcdefgX"));
        assert!(!same(b"abcdefg", b"abcdefgh"));
        assert!(!same(b"", b"abcdefgh"));
    }
}
