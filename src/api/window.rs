//! The `"window"` of a model request (issue 47): parsed from a JSON body or a query string,
//! resolved against a stream's time buckets into the statistics of the span (`windowed`), and
//! the requests a window cannot answer exactly refused by name (cross-validation, whose folds
//! are kept for the whole stream only). History takes a window too: its points in the span.

use super::ApiError;
use crate::api::error::Code;
use crate::config::rfc3339_ms;
use crate::state::streams::{Snapshot, StreamHandle};
use axum::extract::Query;
use axum::extract::rejection::QueryRejection;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;
use utoipa::ToSchema;

/// The `"window"` of a model request (issue 47): `{"from": T1, "to": T2}` (Unix ms, or RFC
/// 3339 strings such as `"2026-11-27T10:00:00Z"`) or `{"last": "1h"}`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowRequest {
    /// [from, to) in Unix ms.
    Range { from: i64, to: i64 },
    /// The span up to the end of the current bucket, in ms.
    Last(i64),
}

/// The window of a request, as the answer reports it.
#[derive(Debug, Clone, serde::Serialize, ToSchema)]
pub struct WindowAnswer {
    /// The start of the span the statistics cover (Unix ms): the asked start, moved forward to
    /// the first bucket boundary at or after it.
    #[schema(examples(1_700_000_000_000_i64))]
    pub from: i64,
    /// The end of the covered span (Unix ms, exclusive): the asked end, moved back to a bucket
    /// boundary.
    pub to: i64,
    /// The span as asked (`last` resolved against this service's clock).
    pub asked_from: i64,
    /// The asked end.
    pub asked_to: i64,
    /// Buckets merged (those holding rows).
    pub buckets: usize,
    /// Rows in the window.
    pub n: u64,
    /// `from` in RFC 3339 (UTC).
    #[schema(examples("2023-11-14T22:13:20Z"))]
    pub from_time: String,
    /// `to` in RFC 3339 (UTC).
    pub to_time: String,
    /// `asked_from` in RFC 3339 (UTC).
    pub asked_from_time: String,
    /// `asked_to` in RFC 3339 (UTC).
    pub asked_to_time: String,
}

/// Unix ms in RFC 3339 (UTC), with the milliseconds when there are any.
pub(super) fn rfc3339(ms: i64) -> String {
    let t = crate::health::utc_rfc3339(ms.max(0) as u64);
    match ms.rem_euclid(1000) {
        0 => t,
        frac => format!("{}.{frac:03}Z", t.trim_end_matches('Z')),
    }
}

/// The time buckets a stream keeps (its `windows`), as its summary shows them.
#[derive(Debug, Clone, Copy, serde::Serialize, ToSchema)]
pub struct WindowsKept {
    /// The width of the finest buckets (`windows.bucket`), in milliseconds.
    #[schema(examples(60_000))]
    pub bucket_ms: i64,
    /// How long rows are kept in buckets (`windows.keep`), in milliseconds.
    #[schema(examples(604_800_000))]
    pub keep_ms: i64,
}

fn window_error(msg: impl Into<String>) -> ApiError {
    ApiError::bad_request(Code::InvalidWindow, msg)
}

/// A timestamp of a window: Unix ms (an integer) or an RFC 3339 string.
fn window_time(key: &str, v: &Value) -> Result<i64, ApiError> {
    match v {
        Value::Number(n) => n.as_i64().ok_or_else(|| {
            window_error(format!(
                "window \"{key}\" must be whole Unix milliseconds or an RFC 3339 time such as \"2026-11-27T10:00:00Z\", not {n}"
            ))
        }),
        Value::String(s) => match s.parse::<i64>() {
            Ok(ms) => Ok(ms),
            Err(_) => rfc3339_ms(s).ok_or_else(|| {
                window_error(format!(
                    "window \"{key}\" = \"{s}\" is not an RFC 3339 time such as \"2026-11-27T10:00:00Z\" (or Unix milliseconds)"
                ))
            }),
        },
        other => Err(window_error(format!(
            "window \"{key}\" must be Unix milliseconds or an RFC 3339 string, not {other}"
        ))),
    }
}

/// Takes `"window"` out of a model request body (the rest is the model's own parameters).
pub(super) fn take_window(body: &mut Value) -> Result<Option<WindowRequest>, ApiError> {
    let Some(w) = body.as_object_mut().and_then(|o| o.remove("window")) else {
        return Ok(None);
    };
    parse_window(&w).map(Some)
}

/// `{"from": T1, "to": T2}` or `{"last": "1h"}`.
pub(super) fn parse_window(w: &Value) -> Result<WindowRequest, ApiError> {
    let usage =
        "\"window\" is {\"from\": T1, \"to\": T2} (Unix ms or RFC 3339) or {\"last\": \"1h\"}";
    let Some(obj) = w.as_object() else {
        return Err(window_error(format!("{usage}, not {w}")));
    };
    if let Some(k) = obj
        .keys()
        .find(|k| !["from", "to", "last"].contains(&k.as_str()))
    {
        return Err(window_error(format!(
            "unknown window field \"{k}\": {usage}"
        )));
    }
    match (obj.get("from"), obj.get("to"), obj.get("last")) {
        (None, None, Some(last)) => {
            let s = last.as_str().ok_or_else(|| {
                window_error(format!(
                    "window \"last\" must be a span such as \"1h\" or \"7d\", not {last}"
                ))
            })?;
            ravel_core::stats::windows::parse_span(s)
                .map(WindowRequest::Last)
                .map_err(|e| window_error(format!("window \"last\": {e}")))
        }
        (Some(from), Some(to), None) => {
            let (from, to) = (window_time("from", from)?, window_time("to", to)?);
            Ok(WindowRequest::Range { from, to })
        }
        _ => Err(window_error(format!(
            "{usage}: give both from and to, or last alone"
        ))),
    }
}

/// The `window.from`, `window.to` and `window.last` of a query string (`GET .../path`), taken
/// out of it.
pub(super) fn take_window_query(
    q: &mut HashMap<String, String>,
) -> Result<Option<WindowRequest>, ApiError> {
    let mut obj = serde_json::Map::new();
    for key in ["from", "to", "last"] {
        if let Some(v) = q.remove(&format!("window.{key}")) {
            obj.insert(key.into(), Value::String(v));
        }
    }
    if let Some(k) = q.keys().find(|k| k.starts_with("window")) {
        return Err(window_error(format!(
            "unknown query parameter \"{k}\": a window is window.from and window.to, or window.last"
        )));
    }
    if obj.is_empty() {
        return Ok(None);
    }
    parse_window(&Value::Object(obj)).map(Some)
}

/// The window of a query string that takes nothing else (`GET .../history`,
/// `.../statistics`): any other parameter is refused by name, `takes` saying what the route
/// takes ("the history takes").
pub(super) fn window_only_query(
    query: Result<Query<HashMap<String, String>>, QueryRejection>,
    takes: &str,
) -> Result<Option<WindowRequest>, ApiError> {
    let Query(mut q) = query?;
    let window = take_window_query(&mut q)?;
    if let Some(k) = q.keys().next() {
        return Err(ApiError::bad_request(
            Code::InvalidQuery,
            format!(
                "unknown query parameter \"{k}\": {takes} window.from and window.to, or \
                 window.last"
            ),
        ));
    }
    Ok(window)
}

/// The statistics of a request's window from a snapshot's time buckets, and what the answer
/// reports of it. `now_ms` is this service's clock (`last` ends at the end of its bucket).
///
/// `windows` are the snapshot's sets of buckets (one, or one a partition with the `kafka`
/// store), spanned together; `empty` stands for them when there is none yet (no partition),
/// None when the stream keeps no buckets.
pub(super) fn window_stats(
    stream: &str,
    windows: &[ravel_core::stats::Windows],
    empty: Option<ravel_core::stats::Windows>,
    req: WindowRequest,
    now_ms: i64,
) -> Result<(ravel_core::stats::Stats, WindowAnswer), ApiError> {
    let Some(empty) = empty else {
        return Err(window_error(format!(
            "stream '{stream}' keeps no time buckets: set windows = {{ bucket = \"1m\", keep = \"7d\" }} in its configuration to ask for windows"
        )));
    };
    let (w, others) = match windows.split_first() {
        Some((w, rest)) => (w, rest.iter().collect::<Vec<_>>()),
        None => (&empty, Vec::new()),
    };
    let bucket = w.spec().bucket_ms;
    let (from, to) = match req {
        WindowRequest::Range { from, to } => (from, to),
        WindowRequest::Last(span) => {
            let to = now_ms.div_euclid(bucket) * bucket + bucket;
            (to.saturating_sub(span), to)
        }
    };
    let span = w
        .span_with(&others, from, to)
        .map_err(|e| window_error(e.to_string()))?;
    let n = span.stats.n();
    if n == 0 {
        // Not "the stream has no observations yet", which the extraction would say: the
        // stream may hold many rows, only none in this span (issue 59).
        let held: Vec<(i64, i64)> = std::iter::once(w)
            .chain(others.iter().copied())
            .flat_map(|w| {
                w.buckets()
                    .filter(|b| b.2 > 0)
                    .map(|(s, width, _)| (s, s + width))
            })
            .collect();
        let rows: u64 = std::iter::once(w)
            .chain(others.iter().copied())
            .map(|w| w.n())
            .sum();
        let kept = match (
            held.iter().map(|b| b.0).min(),
            held.iter().map(|b| b.1).max(),
        ) {
            (Some(a), Some(b)) => format!(
                "; its buckets hold {rows} rows from {} ({a}) to {} ({b}): move or widen the window",
                rfc3339(a),
                rfc3339(b)
            ),
            _ => "; its buckets hold no row yet".to_string(),
        };
        return Err(ApiError::new(
            axum::http::StatusCode::CONFLICT,
            Code::NoData,
            format!(
                "the window from {} ({from}) to {} ({to}) holds no rows of stream '{stream}'{kept}",
                rfc3339(from),
                rfc3339(to)
            ),
        ));
    }
    Ok((
        span.stats,
        WindowAnswer {
            from: span.from,
            to: span.to,
            asked_from: from,
            asked_to: to,
            buckets: span.buckets,
            n,
            from_time: rfc3339(span.from),
            to_time: rfc3339(span.to),
            asked_from_time: rfc3339(from),
            asked_to_time: rfc3339(to),
        },
    ))
}

/// The statistics a request asks about: the stream's snapshot, or with a `"window"`, a
/// snapshot of the window's statistics alone (no folds: CV over a window is not kept), and
/// what the answer says of the window.
pub(super) fn windowed(
    h: &StreamHandle,
    window: Option<WindowRequest>,
) -> Result<(Arc<Snapshot>, Option<WindowAnswer>), ApiError> {
    let snap = h.snapshot();
    let Some(req) = window else {
        return Ok((snap, None));
    };
    let now = crate::unix_ms(std::time::SystemTime::now()) as i64;
    let empty = h
        .window_spec
        .map(|spec| ravel_core::stats::Windows::new(spec, h.task(), h.p()));
    let (stats, answer) = window_stats(h.name(), &snap.windows, empty, req, now)?;
    let mut s = Snapshot::whole(stats, snap.last_update, snap.as_of_ms);
    s.parts = snap.parts.clone();
    Ok((Arc::new(s), Some(answer)))
}

/// A window with `select = "cv"` (or `"cv_1se"`) is refused: the stream's fold statistics
/// (`cv.folds`) are those of the whole stream, not kept per time bucket, so the folds of a
/// window's rows do not exist and a CV answer over it could not be exact. The information
/// criteria select exactly over the window's statistics.
pub(super) fn no_cv_in_window(
    window: &Option<WindowAnswer>,
    select: Option<ravel_core::solve::Criterion>,
) -> Result<(), ApiError> {
    match select {
        Some(c) if c.is_cv() && window.is_some() => Err(window_error(format!(
            "select = \"{}\" cannot take a window: the stream's cross-validation folds \
             (cv.folds) hold the statistics of the whole stream, not of each time bucket, so a \
             window's folds are not known; select over the window with \"ebic\", \"bic\" or \
             \"aic\", or cross-validate without a window",
            c.name()
        ))),
        _ => Ok(()),
    }
}

/// The span [from, to) of `GET .../history?window...` in Unix ms: the history's points are
/// snapshots taken at times (`time_ms`), not time buckets, so a window selects the points
/// taken in it; `last` ends now (inclusive). Any stream's history takes one.
pub(super) fn history_span(req: WindowRequest, now_ms: i64) -> Result<(i64, i64), ApiError> {
    let (from, to) = match req {
        WindowRequest::Range { from, to } => (from, to),
        WindowRequest::Last(span) => (now_ms.saturating_add(1).saturating_sub(span), now_ms + 1),
    };
    if to <= from {
        return Err(window_error(format!(
            "window \"to\" ({to}) must be after \"from\" ({from})"
        )));
    }
    Ok((from, to))
}

#[cfg(test)]
mod window_tests {
    use super::*;

    #[test]
    fn windows_parse_or_are_refused_by_name() {
        let ok = |v: Value| parse_window(&v).unwrap();
        assert_eq!(
            ok(serde_json::json!({"last": "1h"})),
            WindowRequest::Last(3_600_000)
        );
        assert_eq!(
            ok(serde_json::json!({"from": 5, "to": "1970-01-01T00:00:01Z"})),
            WindowRequest::Range { from: 5, to: 1000 }
        );
        for (bad, says) in [
            (serde_json::json!({"from": 5}), "both from and to"),
            (
                serde_json::json!({"last": "1h", "from": 1, "to": 2}),
                "last alone",
            ),
            (serde_json::json!({"last": "an hour"}), "last"),
            (
                serde_json::json!({"from": "noon", "to": 2}),
                "\"from\" = \"noon\"",
            ),
            (
                serde_json::json!({"since": 1}),
                "unknown window field \"since\"",
            ),
            (serde_json::json!("1h"), "\"window\" is"),
        ] {
            let e = parse_window(&bad).unwrap_err();
            assert_eq!(e.code, Code::InvalidWindow);
            assert!(e.message.contains(says), "{bad}: {}", e.message);
        }
    }
}
