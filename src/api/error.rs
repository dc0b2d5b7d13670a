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
    AbsentFields = "absent_fields",
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
    /// `unknown_stream`, with the closest of the streams that exist.
    pub fn unknown_stream_among(name: &str, streams: &[String]) -> Self {
        let mut e = Self::unknown_stream(name);
        e.message += &crate::config::explain::did_you_mean(name, streams);
        e
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

/// A parser's message in the user's words (issue 59): serde's and axum's phrasing names the
/// types of the program (`expected usize`, `struct`, `sequence`, `` `a`, `b` ``), which a
/// person writing JSON has never seen. Every error body goes through this, so that no message
/// names a Rust type whichever parser wrote it.
pub fn in_user_words(message: &str) -> String {
    let mut m = message.to_string();
    for (from, to) in [
        (
            "Failed to deserialize the JSON body into the target type: ",
            "the body does not fit this endpoint: ",
        ),
        (
            "Failed to parse the request body as JSON: ",
            "the body is not valid JSON: ",
        ),
        (
            "Failed to deserialize query string: ",
            "the query string does not fit this endpoint: ",
        ),
        ("invalid type: map", "invalid type: an object"),
        ("invalid type: sequence", "invalid type: an array"),
        ("expected a sequence", "expected an array"),
        ("expected a map", "expected an object"),
        ("unit variant", "a bare name"),
        ("newtype variant", "a name with a value"),
        ("tuple variant", "a name with values"),
        ("struct variant", "a name with fields"),
    ] {
        m = m.replace(from, to);
    }
    // `expected usize` and the like, `expected struct Foo`, `untagged enum Foo`.
    let words = |t: &str| match t {
        "usize" | "u64" | "u32" | "u16" | "u8" => Some("a whole number >= 0"),
        "isize" | "i64" | "i32" | "i16" | "i8" => Some("a whole number"),
        "f64" | "f32" => Some("a number"),
        "bool" => Some("true or false"),
        "char" | "String" | "str" => Some("a string"),
        _ => None,
    };
    let mut out = String::with_capacity(m.len());
    let mut rest = m.as_str();
    while let Some(i) = rest.find(|c: char| c.is_ascii_alphabetic()) {
        out.push_str(&rest[..i]);
        rest = &rest[i..];
        let end = rest
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(rest.len());
        let word = &rest[..end];
        let after = &rest[end..];
        // Only where a parser names what it expected: a stream may well be called "f64".
        let expected = out.ends_with("expected ");
        if let Some(w) = words(word).filter(|_| expected) {
            out.push_str(w);
            rest = after;
        } else if matches!(word, "struct" | "enum")
            && after.starts_with(' ')
            && (expected || out.ends_with("untagged "))
        {
            // "struct Foo" / "untagged enum Foo": the name of a type, not the user's.
            let name_end = after[1..]
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
                .map_or(after.len(), |j| j + 1);
            out.push_str(if word == "struct" {
                "an object"
            } else {
                "a value"
            });
            rest = &after[name_end..];
            if out.ends_with("untagged a value") {
                out.truncate(out.len() - "untagged a value".len());
                out.push_str("any accepted shape");
            }
        } else {
            out.push_str(word);
            rest = after;
        }
    }
    out.push_str(rest);
    // serde's quoting of names (`a`, `b`) as JSON's ("a", "b"); other backticks (a command
    // to run) stay.
    let serde_quoting = [
        "unknown field `",
        "unknown variant `",
        "missing field `",
        "duplicate field `",
        "expected one of `",
        "integer `",
        "floating point `",
        "boolean `",
    ];
    if serde_quoting.iter().any(|q| out.contains(q)) {
        out = out.replace('`', "\"");
    }
    out
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = ErrorBody {
            error: ErrorDetail {
                code: self.code.as_str().to_string(),
                message: in_user_words(&self.message),
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
    fn parser_messages_are_put_in_the_users_words() {
        for (given, want) in [
            (
                "invalid type: string \"3\", expected usize",
                "invalid type: string \"3\", expected a whole number >= 0",
            ),
            (
                "invalid type: map, expected f64 at line 1 column 9",
                "invalid type: an object, expected a number at line 1 column 9",
            ),
            (
                "unknown field `kk`, expected one of `k`, `lambda`",
                "unknown field \"kk\", expected one of \"k\", \"lambda\"",
            ),
            (
                "invalid type: sequence, expected struct PutStream",
                "invalid type: an array, expected an object",
            ),
            (
                "data did not match any variant of untagged enum Features",
                "data did not match any variant of any accepted shape",
            ),
            ("a stream of u64s", "a stream of u64s"),
            ("no stream named 'f64'", "no stream named 'f64'"),
            ("fusize", "fusize"),
        ] {
            assert_eq!(in_user_words(given), want, "{given}");
        }
    }

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
