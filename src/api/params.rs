//! Pure request parsing, apart from the handlers so it can be tested without a server: a
//! model request from a JSON body or a query string, and prediction rows from a request.

use super::ApiError;
use super::streams::PredictRequest;
use crate::api::error::Code;
use crate::state::streams::StreamHandle;
use ravel_core::solve::{Method, Request as ModelRequest};
use serde_json::Value;
use std::collections::HashMap;

/// Fills in the method of a `select` request that names none (issue 34): OLSth's k-path to
/// the body's `k`, else to `select::default_k_max` of the stream's p and n rows
/// (`select::DEFAULT_METHOD`).
/// Returns the note the answer carries on what was chosen and why; None (the body as it was)
/// when a method is named or nothing is selected.
pub(super) fn default_method(v: &mut Value, p: usize, n: u64) -> Option<String> {
    use ravel_core::solve::select;
    let obj = v.as_object_mut()?;
    if obj.contains_key("method") {
        return None;
    }
    let criterion: ravel_core::solve::Criterion = obj.get("select")?.as_str()?.parse().ok()?;
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

/// The rows of a predict request as dense vectors of p features.
pub(super) fn predict_rows(
    req: PredictRequest,
    h: &StreamHandle,
) -> Result<Vec<Vec<f64>>, ApiError> {
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
            Ok(rows)
        }
        (None, Some(named)) => {
            let Some(index) = &h.index else {
                return Err(ApiError::bad_request(
                    Code::UnknownFeature,
                    format!(
                        "stream '{}' declares no feature names; send \"rows\" as arrays",
                        h.name()
                    ),
                ));
            };
            named
                .into_iter()
                .enumerate()
                .map(|(i, m)| {
                    let mut row = vec![f64::NAN; p];
                    for (k, v) in m {
                        let j = *index.get(&k).ok_or_else(|| {
                            ApiError::bad_request(
                                Code::UnknownFeature,
                                format!("row {i}: unknown feature '{k}'"),
                            )
                        })?;
                        row[j] = v;
                    }
                    if let Some(j) = row.iter().position(|v| v.is_nan()) {
                        let name = h.names().map(|n| n[j].clone()).unwrap_or_default();
                        return Err(ApiError::bad_request(
                            Code::MissingFeature,
                            format!("row {i}: feature '{name}' is missing"),
                        ));
                    }
                    Ok(row)
                })
                .collect()
        }
        _ => Err(ApiError::bad_request(
            Code::InvalidBody,
            "give exactly one of \"rows\" (arrays) or \"features\" (objects)",
        )),
    }
}
