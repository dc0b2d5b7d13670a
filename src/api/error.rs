//! The API's error type: every failure is JSON `{"error": {"code", "message"}}` with a 4xx
//! status for what the client can fix (and 5xx only for the server's own faults).

use axum::Json;
use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use ravel_core::solve::{ParamError, ProblemError};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub status: StatusCode,
    /// Stable, machine-readable (`unknown_stream`, `invalid_params`, ...).
    pub code: &'static str,
    pub message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
        }
    }
    pub fn bad_request(code: &'static str, message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, code, message)
    }
    pub fn unknown_stream(name: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "unknown_stream",
            format!("no stream named '{name}'; GET /v1/streams lists them"),
        )
    }
    /// 503: the server stops; the client should retry against another instance.
    pub fn shutting_down() -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "shutting_down",
            "the server is shutting down; retry against another instance",
        )
    }
    /// 503 with Retry-After: every extraction slot is taken and the queue is full.
    pub fn busy(max_waiting: usize) -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "busy",
            format!(
                "every extraction slot is busy and {max_waiting} requests already wait \
                 (http.max_queued_extractions); retry shortly"
            ),
        )
    }
    /// 503: the extraction ran past `http.extraction_timeout_ms` and was stopped.
    pub fn extraction_timeout(why: impl std::fmt::Display) -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            "extraction_timeout",
            why.to_string(),
        )
    }
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", message)
    }
}

/// The JSON body of every error response.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

/// What went wrong: a stable code and a message for people.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct ErrorDetail {
    /// Stable, machine-readable (README: the table of codes).
    #[schema(examples("unknown_stream", "invalid_params"))]
    pub code: String,
    pub message: String,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            error: ErrorDetail {
                code: self.code.to_string(),
                message: self.message,
            },
        };
        let mut resp = (self.status, Json(body)).into_response();
        if self.code == "busy" {
            resp.headers_mut().insert(
                axum::http::header::RETRY_AFTER,
                axum::http::HeaderValue::from_static("1"),
            );
        }
        resp
    }
}

impl From<ParamError> for ApiError {
    fn from(e: ParamError) -> Self {
        let code = match &e {
            ParamError::UnknownMethod(_) => "unknown_method",
            ParamError::KTooLarge { .. } => "k_too_large",
            ParamError::UnknownField(_) => "invalid_body",
            ParamError::Problem(ProblemError::Empty) => {
                return ApiError::new(StatusCode::CONFLICT, "no_data", e.to_string());
            }
            ParamError::Problem(ProblemError::OneClass { .. }) => {
                return ApiError::new(StatusCode::CONFLICT, "one_class", e.to_string());
            }
            _ => "invalid_params",
        };
        ApiError::bad_request(code, e.to_string())
    }
}

impl From<JsonRejection> for ApiError {
    fn from(r: JsonRejection) -> Self {
        let text = r.body_text();
        match r {
            JsonRejection::JsonSyntaxError(_) => ApiError::bad_request("malformed_json", text),
            JsonRejection::JsonDataError(_) => ApiError::bad_request("invalid_body", text),
            JsonRejection::MissingJsonContentType(_) => ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                "unsupported_media_type",
                "send the body as JSON with Content-Type: application/json",
            ),
            other if other.status() == StatusCode::PAYLOAD_TOO_LARGE => {
                ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, "payload_too_large", text)
            }
            other => ApiError::new(other.status(), "invalid_body", text),
        }
    }
}

impl From<QueryRejection> for ApiError {
    fn from(r: QueryRejection) -> Self {
        ApiError::bad_request("invalid_query", r.body_text())
    }
}
