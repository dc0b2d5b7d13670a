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
    /// The level of each prediction's intervals, in (0, 1) (0.95 for 95 %): the answer's
    /// `intervals` hold the mean's confidence interval and the prediction interval of a new
    /// observation (a least-squares model: ols, ridge, refitted; `inference` is implied).
    #[serde(default)]
    pub(super) interval: Option<f64>,
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
    // The criterion before the method: `{"select": "ebci"}` is a misspelled criterion, not
    // a request that forgot its method (issue 59).
    match obj.get("select") {
        None | Some(Value::Null) => {}
        Some(Value::String(c)) => {
            if c.parse::<ravel_core::solve::Criterion>().is_err() {
                let names: Vec<String> = ["aic", "bic", "ebic", "cv", "cv_1se"]
                    .map(String::from)
                    .to_vec();
                return Err(ApiError::bad_request(
                    Code::InvalidParams,
                    format!(
                        "unknown criterion \"{c}\" in \"select\": one of aic, bic, ebic, cv, \
                         cv_1se{}",
                        crate::config::explain::did_you_mean(c, &names)
                    ),
                ));
            }
        }
        Some(other) => {
            return Err(ApiError::bad_request(
                Code::InvalidParams,
                format!("\"select\" must be the name of a criterion such as \"bic\", not {other}"),
            ));
        }
    }
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
    let body = v.clone();
    serde_json::from_value(v).map_err(|e| {
        let msg = name_the_field(&e.to_string(), &body);
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

/// serde's `invalid type: string "3", expected usize` says neither which field nor what to
/// write: when one field of the body holds the value the message quotes, the message names
/// it and says what it takes (`"k" must be a whole number such as 3, not the string "3"`).
fn name_the_field(msg: &str, body: &Value) -> String {
    let Some(rest) = msg.strip_prefix("invalid type: ") else {
        return msg.to_string();
    };
    let Some((given, expected)) = rest.split_once(", expected ") else {
        return msg.to_string();
    };
    let Some(obj) = body.as_object() else {
        return msg.to_string();
    };
    let matches = |v: &Value| match v {
        Value::String(s) => given == format!("string {s:?}"),
        Value::Number(n) => {
            given == format!("integer `{n}`") || given == format!("floating point `{n}`")
        }
        Value::Bool(b) => given == format!("boolean `{b}`"),
        Value::Array(_) => given == "sequence",
        Value::Object(_) => given == "map",
        Value::Null => given == "null",
    };
    let keys: Vec<&String> = obj
        .iter()
        .filter(|(_, v)| matches(v))
        .map(|(k, _)| k)
        .collect();
    let [key] = keys[..] else {
        return msg.to_string();
    };
    let takes = match expected {
        "usize" | "u64" | "u32" => "a whole number (such as 3)",
        "f64" | "f32" => "a number (such as 0.1)",
        "a boolean" => "true or false",
        "a string" => "a string",
        _ => return format!("\"{key}\": {msg}"),
    };
    let shown = match &obj[key.as_str()] {
        Value::String(s) => format!("the string {s:?}; write it without quotes"),
        other => other.to_string(),
    };
    format!("\"{key}\" must be {takes}, not {shown}")
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
            let fields = match &h.codec.fields {
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
