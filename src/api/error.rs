//! The API's error type: every failure is JSON `{"error": {"code", "message"}}` with a 4xx
//! status for what the client can fix (and 5xx only for the server's own faults).

use axum::Json;
use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use ravel_core::solve::{ParamError, ProblemError};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

/// Declares `Code` from one list of variants and their JSON text.
macro_rules! codes {
    ($( $(#[$doc:meta])* $variant:ident = $text:literal, )*) => {
        /// Every error code the API answers with: the stable, machine-readable `error.code` of
        /// the JSON body (docs/http-api.md: the table of codes). One list: `as_str` is the JSON text.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub enum Code {
            $( $(#[$doc])* $variant, )*
        }

        impl Code {
            /// Every code, in the list's order (the guide's test walks them).
            #[cfg(test)]
            pub const ALL: &[Code] = &[$( Code::$variant, )*];

            /// The code as the JSON body writes it.
            pub fn as_str(self) -> &'static str {
                match self {
                    $( Code::$variant => $text, )*
                }
            }
        }
    };
}

codes! {
    BadRequest = "bad_request",
    Busy = "busy",
    DeclarationConflict = "declaration_conflict",
    Dimension = "dimension",
    ExtractionTimeout = "extraction_timeout",
    FieldType = "field_type",
    Forbidden = "forbidden",
    Internal = "internal",
    InvalidBody = "invalid_body",
    InvalidDeclaration = "invalid_declaration",
    InvalidParams = "invalid_params",
    InvalidPath = "invalid_path",
    InvalidQuery = "invalid_query",
    InvalidWindow = "invalid_window",
    KTooLarge = "k_too_large",
    KafkaUnavailable = "kafka_unavailable",
    Label = "label",
    LabelsConflict = "labels_conflict",
    MalformedJson = "malformed_json",
    MethodNotAllowed = "method_not_allowed",
    MissingFeature = "missing_feature",
    NoData = "no_data",
    NoLabels = "no_labels",
    NotFound = "not_found",
    NotReady = "not_ready",
    NotWide = "not_wide",
    OneClass = "one_class",
    PayloadTooLarge = "payload_too_large",
    RequestRefused = "request_refused",
    ShuttingDown = "shutting_down",
    Unauthorized = "unauthorized",
    Unprocessable = "unprocessable",
    UnknownMethod = "unknown_method",
    UnknownScorer = "unknown_scorer",
    UnknownStream = "unknown_stream",
    UnsupportedMediaType = "unsupported_media_type",
}

impl std::fmt::Display for Code {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ApiError {
    pub status: StatusCode,
    /// Stable, machine-readable (`unknown_stream`, `invalid_params`, ...).
    pub code: Code,
    pub message: String,
}

impl ApiError {
    pub fn new(status: StatusCode, code: Code, message: impl Into<String>) -> Self {
        ApiError {
            status,
            code,
            message: message.into(),
        }
    }
    pub fn bad_request(code: Code, message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, code, message)
    }
    pub fn unknown_stream(name: &str) -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            Code::UnknownStream,
            format!("no stream named '{name}'; GET /v1/streams lists them"),
        )
    }
    /// 503: the server stops; the client should retry against another instance.
    pub fn shutting_down() -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            Code::ShuttingDown,
            "the server is shutting down; retry against another instance",
        )
    }
    /// 503 with Retry-After: every extraction slot is taken and the queue is full.
    pub fn busy(max_waiting: usize) -> Self {
        Self::new(
            StatusCode::SERVICE_UNAVAILABLE,
            Code::Busy,
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
            Code::ExtractionTimeout,
            why.to_string(),
        )
    }
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(StatusCode::INTERNAL_SERVER_ERROR, Code::Internal, message)
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
                code: self.code.as_str().to_string(),
                message: self.message,
            },
        };
        let mut resp = (self.status, Json(body)).into_response();
        if self.code == Code::Busy {
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
            ParamError::UnknownMethod(_) => Code::UnknownMethod,
            ParamError::KTooLarge { .. } => Code::KTooLarge,
            ParamError::UnknownField(_) => Code::InvalidBody,
            ParamError::Problem(ProblemError::Empty) => {
                return ApiError::new(StatusCode::CONFLICT, Code::NoData, e.to_string());
            }
            ParamError::Problem(ProblemError::OneClass { .. }) => {
                return ApiError::new(StatusCode::CONFLICT, Code::OneClass, e.to_string());
            }
            _ => Code::InvalidParams,
        };
        ApiError::bad_request(code, e.to_string())
    }
}

impl From<JsonRejection> for ApiError {
    fn from(r: JsonRejection) -> Self {
        let text = r.body_text();
        match r {
            JsonRejection::JsonSyntaxError(_) => ApiError::bad_request(Code::MalformedJson, text),
            JsonRejection::JsonDataError(_) => ApiError::bad_request(Code::InvalidBody, text),
            JsonRejection::MissingJsonContentType(_) => ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                Code::UnsupportedMediaType,
                "send the body as JSON with Content-Type: application/json",
            ),
            other if other.status() == StatusCode::PAYLOAD_TOO_LARGE => {
                ApiError::new(StatusCode::PAYLOAD_TOO_LARGE, Code::PayloadTooLarge, text)
            }
            other => ApiError::new(other.status(), Code::InvalidBody, text),
        }
    }
}

impl From<QueryRejection> for ApiError {
    fn from(r: QueryRejection) -> Self {
        ApiError::bad_request(Code::InvalidQuery, r.body_text())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_is_documented_in_the_guide() {
        let guide = include_str!("../../docs/http-api.md");
        for code in Code::ALL {
            assert!(
                guide.contains(&format!("`{code}`")),
                "error code `{code}` is not in docs/http-api.md (the table of codes)"
            );
        }
    }
}
