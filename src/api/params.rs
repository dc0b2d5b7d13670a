//! Pure request parsing, apart from the handlers so it can be tested without a server: a
//! model request from a JSON body or a query string, and prediction rows from a request.

use super::ApiError;
use crate::api::error::Code;
use crate::dotted::lookup;
use crate::state::streams::StreamHandle;
use ravel_core::fields::{Fields, Kind, Missing, Refusal, Value as Cell};
use ravel_core::solve::{Method, Request as ModelRequest};
use serde_json::Value;
use std::collections::HashMap;
use utoipa::ToSchema;

/// The body of `POST .../predict`: a model request and rows, as arrays or named.
#[derive(serde::Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PredictRequest {
    /// The model to predict with (the body of POST /model).
    #[schema(value_type = ModelRequest)]
    pub(super) model: Value,
    /// Rows as arrays of p numbers...
    #[serde(default)]
    pub(super) rows: Option<Vec<Vec<f64>>>,
    /// ...or as objects in the stream's own shape: fields by name or dotted path (nested
    /// objects), category strings, keys the stream does not use ignored; only the fields of
    /// the model's nonzero coefficients are needed. A stream declared by count names its
    /// features "0" to "p-1".
    #[serde(default)]
    #[schema(value_type = Option<Vec<Object>>)]
    pub(super) features: Option<Vec<serde_json::Map<String, Value>>>,
}

/// Fills in the method of a `select` request that names none (issue 34): OLSth's k-path to
/// the body's `k`, else to `select::default_k_max` of the stream's p and n rows
/// (`select::DEFAULT_METHOD`); and the `k` of one that names a method whose path runs over k
/// (`select::selects_over_k`) without it (issue 45), to the same default.
/// Returns the note the answer carries on what was chosen and why; None (the body as it was)
/// when a method is named or nothing is selected.
pub(super) fn default_method(v: &mut Value, p: usize, n: u64) -> Option<String> {
    use ravel_core::solve::select;
    let obj = v.as_object_mut()?;
    let criterion: ravel_core::solve::Criterion = obj.get("select")?.as_str()?.parse().ok()?;
    if let Some(m) = obj.get("method") {
        // A method whose path runs over k, named without k: the default largest k.
        let method: Method = m.as_str()?.parse().ok()?;
        if !select::selects_over_k(method) || obj.contains_key("k") {
            return None;
        }
        let k = select::default_k_max(p, n as f64);
        obj.insert("k".into(), Value::from(k));
        return Some(format!(
            "{} over {}'s k-path k = 1..{k} (no k given: the default largest k, at most {}, \
             p and n / 2)",
            criterion.name(),
            method.name(),
            select::DEFAULT_K_MAX
        ));
    }
    let k = match obj.get("k").and_then(Value::as_u64) {
        Some(k) => k as usize,
        None => {
            let k = select::default_k_max(p, n as f64);
            obj.insert("k".into(), Value::from(k));
            k
        }
    };
    obj.insert(
        "method".into(),
        Value::String(select::DEFAULT_METHOD.name().into()),
    );
    Some(select::default_method_note(criterion, k))
}

/// The note of `default_method` first among the selection's notes.
pub(super) fn note_default(
    selection: Option<&mut ravel_core::solve::Selection>,
    note: Option<String>,
) {
    if let (Some(sel), Some(note)) = (selection, note) {
        sel.notes.insert(0, note);
    }
}

/// A JSON body or query turned into a model request: the method is checked first so that an
/// unknown one gets its own error code and the list of methods; the rest is the typed
/// `solve::Request`'s own parsing (unknown fields refused by name).
pub(super) fn parse_params(mut v: Value) -> Result<ModelRequest, ApiError> {
    let Some(obj) = v.as_object_mut() else {
        return Err(ApiError::bad_request(
            Code::InvalidBody,
            "the body must be a JSON object such as {\"method\": \"lasso\", \"k\": 10}",
        ));
    };
    match obj.get("method") {
        Some(Value::String(m)) => {
            let method: Method = m.parse().map_err(|e: String| {
                ApiError::from(ravel_core::solve::ParamError::UnknownMethod(e))
            })?;
            obj.insert("method".into(), Value::String(method.name().into()));
        }
        Some(_) => {
            return Err(ApiError::bad_request(
                Code::InvalidBody,
                "\"method\" must be a string such as \"lasso\"",
            ));
        }
        None => {
            return Err(ApiError::bad_request(
                Code::InvalidBody,
                format!(
                    "missing \"method\": one of {}, or \"select\" alone (OLSth's k-path)",
                    Method::estimator_list()
                ),
            ));
        }
    }
    serde_json::from_value(v).map_err(|e| {
        let msg = e.to_string();
        // A parameter the method requires (ridge's lambda, olsth's k) is a request that needs
        // more, as k and lambda together are: `invalid_params`, as before the typed request.
        let code = if msg.starts_with("missing field") {
            Code::InvalidParams
        } else {
            Code::InvalidBody
        };
        ApiError::bad_request(code, msg)
    })
}

/// Query values as JSON scalars (`k=10` -> 10, `refit=true` -> true), so that the path takes
/// the same parameters, checked the same way, as the model body.
pub(super) fn query_to_json(q: HashMap<String, String>) -> Value {
    let obj = q
        .into_iter()
        .map(|(k, s)| {
            let v = if let Ok(b) = s.parse::<bool>() {
                Value::Bool(b)
            } else if let Ok(u) = s.parse::<u64>() {
                Value::from(u)
            } else if let Some(n) = s.parse::<f64>().ok().and_then(serde_json::Number::from_f64) {
                Value::Number(n)
            } else {
                Value::String(s)
            };
            (k, v)
        })
        .collect();
    Value::Object(obj)
}

/// One row of a predict request: its p columns, and the fields it did not give (they must be
/// fields the model does not use, `check_missing`).
pub(super) struct PredictRow {
    pub(super) x: Vec<f64>,
    missing: Vec<usize>,
    /// Fields missing under `missing = "indicator"`: their indicator is set, which the model
    /// can only answer for when training saw it set (`check_missing`).
    indicated: Vec<usize>,
    /// Keys of the row no field uses (named in the error when a used field is missing).
    unused: Vec<String>,
}

/// The rows of a predict request as dense vectors of p features. Named rows (`features`)
/// take the stream's own shape: fields by name or dotted path, category strings, keys the
/// stream does not use ignored; a missing field is an indicator where the stream says so and
/// otherwise must be one the model does not use (checked once the model is known,
/// `check_missing`). A stream declared by count names its columns "0" to "p-1".
pub(super) fn predict_rows(
    req: PredictRequest,
    h: &StreamHandle,
) -> Result<Vec<PredictRow>, ApiError> {
    let p = h.p();
    match (req.rows, req.features) {
        (Some(rows), None) => {
            if let Some((i, r)) = rows.iter().enumerate().find(|(_, r)| r.len() != p) {
                return Err(ApiError::bad_request(
                    Code::Dimension,
                    format!(
                        "row {i} has {} features, stream '{}' has {p}",
                        r.len(),
                        h.name()
                    ),
                ));
            }
            Ok(rows
                .into_iter()
                .map(|x| PredictRow {
                    x,
                    missing: Vec::new(),
                    indicated: Vec::new(),
                    unused: Vec::new(),
                })
                .collect())
        }
        (None, Some(named)) => {
            let by_index;
            let fields = match &h.fields {
                Some(f) => f,
                None => {
                    let names: Vec<String> = (0..p).map(|j| j.to_string()).collect();
                    by_index = Fields::numeric(&names)
                        .map_err(|e| ApiError::bad_request(Code::InvalidBody, e))?;
                    &by_index
                }
            };
            named
                .iter()
                .enumerate()
                .map(|(i, obj)| named_row(fields, obj, i))
                .collect()
        }
        _ => Err(ApiError::bad_request(
            Code::InvalidBody,
            "give exactly one of \"rows\" (arrays) or \"features\" (objects)",
        )),
    }
}

/// One named row through the stream's fields (see `predict_rows`).
fn named_row(
    fields: &Fields,
    obj: &serde_json::Map<String, Value>,
    i: usize,
) -> Result<PredictRow, ApiError> {
    let mut x = vec![0.0; fields.p()];
    let mut missing = Vec::new();
    let mut indicated = Vec::new();
    let wrong = |m: String| ApiError::bad_request(Code::FieldType, format!("row {i}: {m}"));
    for (f, field) in fields.fields().iter().enumerate() {
        let name = &field.name;
        let cell = match lookup(obj, name) {
            None | Some(Value::Null) => Cell::Missing,
            Some(Value::Number(n)) => Cell::Number(n.as_f64().unwrap_or(f64::NAN)),
            Some(Value::Bool(b)) => Cell::Bool(*b),
            Some(Value::String(s)) => Cell::Text(s),
            Some(Value::Array(items)) => {
                for item in items {
                    let cell = match item {
                        Value::String(s) => Cell::Text(s),
                        Value::Number(n) => Cell::Number(n.as_f64().unwrap_or(f64::NAN)),
                        _ => {
                            return Err(wrong(format!(
                                "feature '{name}': a list holds tokens (strings or numbers) of a hashed feature"
                            )));
                        }
                    };
                    if !matches!(field.kind, Kind::Hashed { .. }) {
                        return Err(wrong(format!(
                            "feature '{name}' is a list; only a hashed feature takes a list of tokens"
                        )));
                    }
                    fields.put(f, cell, &mut x).map_err(|r| match r {
                        Refusal::Wrong(m) | Refusal::Missing(m) => wrong(m),
                        Refusal::SkipRow => wrong(format!("feature '{name}' is missing")),
                    })?;
                }
                continue;
            }
            Some(Value::Object(_)) => {
                return Err(wrong(format!(
                    "feature '{name}' is an object, not a value: name the field inside it \
                     with a dotted path ('{name}.<field>')"
                )));
            }
        };
        if cell == Cell::Missing {
            if field.missing != Missing::Indicator {
                missing.push(f);
                continue;
            }
            indicated.push(f);
        }
        fields.put(f, cell, &mut x).map_err(|r| match r {
            Refusal::Wrong(m) | Refusal::Missing(m) => wrong(m),
            Refusal::SkipRow => wrong(format!("feature '{name}' is missing")),
        })?;
    }
    let unused = if missing.is_empty() && indicated.is_empty() {
        Vec::new()
    } else {
        obj.keys()
            .filter(|k| !fields.uses(k))
            .take(3)
            .cloned()
            .collect()
    };
    Ok(PredictRow {
        x,
        missing,
        indicated,
        unused,
    })
}

/// Refuses rows that miss a field whose columns the model uses (a nonzero coefficient): a
/// field without an indicator, or one whose indicator column was never 1 in the rows the
/// model was trained on (`stats`): the model then knows nothing of rows without the field,
/// and its answer would be that of a value of 0.
pub(super) fn check_missing(
    rows: &[PredictRow],
    fields: Option<&Fields>,
    model: &ravel_core::Model,
    stats: &ravel_core::stats::Stats,
) -> Result<(), ApiError> {
    let used: std::collections::HashSet<usize> =
        model.coefficients.iter().map(|c| c.index).collect();
    let mut never_set: HashMap<usize, bool> = HashMap::new();
    for (i, r) in rows.iter().enumerate() {
        let hint = || {
            if r.unused.is_empty() {
                String::new()
            } else {
                format!(
                    " (the row has keys the stream does not use: {})",
                    r.unused.join(", ")
                )
            }
        };
        for &f in &r.missing {
            let (name, columns) = match fields {
                Some(fs) => (fs.fields()[f].name.clone(), fs.columns_of(f)),
                None => (f.to_string(), f..f + 1),
            };
            if columns.clone().any(|j| used.contains(&j)) {
                return Err(ApiError::bad_request(
                    Code::MissingFeature,
                    format!(
                        "row {i}: feature '{name}' is missing and the model uses it{}",
                        hint()
                    ),
                ));
            }
        }
        let Some(fs) = fields else { continue };
        for &f in &r.indicated {
            let columns = fs.columns_of(f);
            // The indicator is the block's last column.
            let indicator = columns.end - 1;
            let never = *never_set
                .entry(indicator)
                .or_insert_with(|| indicator_never_set(stats, indicator));
            if never && columns.clone().any(|j| used.contains(&j)) {
                let name = &fs.fields()[f].name;
                return Err(ApiError::bad_request(
                    Code::MissingFeature,
                    format!(
                        "row {i}: feature '{name}' is missing and the model uses it; its \
                         indicator '{}' was never 1 in the {} rows the model learned from, so \
                         the model knows nothing of rows without it{}",
                        fs.columns()[indicator],
                        stats.n(),
                        hint()
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// Whether column `j` was 0 in every row of `stats` (its mean is exactly 0: a running mean of
/// zeros stays exactly 0, and one 1 makes it positive whatever the weights).
fn indicator_never_set(stats: &ravel_core::stats::Stats, j: usize) -> bool {
    use ravel_core::stats::Stats;
    match stats {
        Stats::Regression(s) => s.mean_x().get(j).is_none_or(|m| *m == 0.0),
        Stats::Classification(c) => [&c.pos, &c.neg]
            .iter()
            .all(|s| s.mean_x().get(j).is_none_or(|m| *m == 0.0)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_select_request_gets_the_default_k_path_with_or_without_a_method_named() {
        // No method: OLSth's k-path to min(300, p, n / 2).
        let mut v = json!({"select": "ebic"});
        let note = default_method(&mut v, 40, 300).unwrap();
        assert_eq!(v, json!({"select": "ebic", "method": "olsth", "k": 40}));
        assert!(note.starts_with("no method named"), "{note}");
        // A method whose path runs over k, without k (issue 45): the same largest k.
        for m in ["olsth", "fsa", "iht", "htp"] {
            let mut v = json!({"method": m, "select": "bic"});
            let note = default_method(&mut v, 500, 100).unwrap();
            assert_eq!(v, json!({"method": m, "select": "bic", "k": 50}), "{m}");
            assert!(note.contains("k = 1..50 (no k given"), "{note}");
            assert!(parse_params(v).is_ok(), "{m}");
        }
        // A k given, a method over lambda, no select: untouched.
        for body in [
            json!({"method": "olsth", "select": "bic", "k": 7}),
            json!({"method": "lasso", "select": "bic"}),
            json!({"method": "olsth", "k": 7}),
        ] {
            let mut v = body.clone();
            assert_eq!(default_method(&mut v, 40, 300), None);
            assert_eq!(v, body);
        }
    }
}

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

/// `2026-11-27T10:00:00Z`, `2026-11-27T10:00:00.250+01:00`: Unix ms (None if malformed).
pub(super) fn rfc3339_ms(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    if b[13] != b':' || b[16] != b':' {
        return None;
    }
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let t = s.get(r)?;
        t.bytes()
            .all(|c| c.is_ascii_digit())
            .then(|| t.parse().ok())?
    };
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, sec) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || sec > 60 {
        return None;
    }
    let mut rest = &s[19..];
    let mut ms = 0i64;
    if let Some(frac) = rest.strip_prefix('.') {
        let digits = frac.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return None;
        }
        let f = &frac[..digits];
        ms = format!("{:0<3}", &f[..f.len().min(3)]).parse().ok()?;
        rest = &frac[digits..];
    }
    let offset_min = match rest {
        "Z" | "z" => 0,
        _ if rest.len() == 6 && rest.as_bytes()[3] == b':' => {
            let sign = match rest.as_bytes()[0] {
                b'+' => 1,
                b'-' => -1,
                _ => return None,
            };
            let oh: i64 = rest[1..3].parse().ok()?;
            let om: i64 = rest[4..6].parse().ok()?;
            sign * (oh * 60 + om)
        }
        _ => return None,
    };
    // Days from 1970-01-01 (Howard Hinnant's days_from_civil).
    let y = if mo <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (mo + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(((days * 24 + h) * 60 + mi - offset_min) * 60_000 + sec * 1000 + ms)
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
    Ok((
        span.stats,
        WindowAnswer {
            from: span.from,
            to: span.to,
            asked_from: from,
            asked_to: to,
            buckets: span.buckets,
            n,
        },
    ))
}

#[cfg(test)]
mod window_tests {
    use super::*;

    #[test]
    fn rfc3339_times_read_as_unix_ms() {
        assert_eq!(rfc3339_ms("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(rfc3339_ms("2023-11-14T22:13:20Z"), Some(1_700_000_000_000));
        assert_eq!(
            rfc3339_ms("2023-11-14T22:13:20.5Z"),
            Some(1_700_000_000_500)
        );
        assert_eq!(
            rfc3339_ms("2023-11-14T23:13:20+01:00"),
            Some(1_700_000_000_000)
        );
        assert_eq!(rfc3339_ms("2024-02-29T00:00:00Z"), Some(1_709_164_800_000));
        for bad in [
            "2023-11-14",
            "2023-13-14T00:00:00Z",
            "2023-11-14T22:13:20",
            "yesterday",
            "2023-11-14T22:13:20.Z",
        ] {
            assert_eq!(rfc3339_ms(bad), None, "{bad}");
        }
    }

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
