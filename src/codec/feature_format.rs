//! The messages of a feature stream's topic (paper 000: fixed samples, features as columns),
//! decoded and checked against the stream's n before anything reaches the selection:
//!
//! - labels: `{"labels": [y1, ..., yn]}`
//! - dense feature: `{"feature": "name", "values": [x1, ..., xn]}`
//! - sparse feature: `{"feature": "name", "indices": [i, ...], "values": [v, ...]}`: sample
//!   `indices[k]` (0-based, each at most once, any order) has value `values[k]`, every other
//!   sample 0.
//!
//! Unknown fields are refused. What needs the stream's state (labels before features, labels
//! that change under features already seen, classification labels) is checked by
//! `feature_streams`; the reasons are those of the row formats (`format::Reason`) plus
//! `index`, `no_labels` and `labels_conflict`.

use crate::reason::{Reason, Rejection, counted, reject};
use serde::Deserialize;

/// A decoded, shape-checked message.
#[derive(Debug, Clone, PartialEq)]
pub enum FeatureMessage {
    /// n finite labels (their classes are checked against the loss by the stream).
    Labels(Vec<f64>),
    /// A feature's n finite values (sparse ones expanded).
    Feature { name: String, values: Vec<f64> },
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Raw {
    #[serde(default)]
    labels: Option<Vec<f64>>,
    #[serde(default)]
    feature: Option<String>,
    #[serde(default)]
    values: Option<Vec<f64>>,
    #[serde(default)]
    indices: Option<Vec<i64>>,
}

/// Decodes one message of a feature stream with `n` samples.
pub fn decode(payload: &[u8], n: usize) -> Result<FeatureMessage, Rejection> {
    // Dense columns take the row formats' fast JSON path (the same values; serde_json below
    // decides everything it declines, and every rejection).
    if let Some((name, values)) = super::json::feature(payload, n) {
        return Ok(FeatureMessage::Feature { name, values });
    }
    let raw: Raw = match serde_json::from_slice(payload) {
        Ok(r) => r,
        Err(e) if non_finite_literal(payload) || e.to_string().contains("out of range") => {
            return reject(
                Reason::NonFinite,
                format!(
                    "a value is NaN, Infinity or out of range ({e}); JSON has no such numbers \
                     (Python's json.dumps writes NaN unless allow_nan=False)"
                ),
            );
        }
        Err(e) => {
            return reject(
                Reason::Malformed,
                format!("not a feature-stream JSON message ({e})"),
            );
        }
    };
    match raw {
        Raw {
            labels: Some(y),
            feature: None,
            values: None,
            indices: None,
        } => {
            counted(y.len(), n, || {
                format!("{} labels, but the stream has n = {n} samples", y.len())
            })?;
            finite("labels", &y)?;
            Ok(FeatureMessage::Labels(y))
        }
        Raw {
            labels: Some(_), ..
        } => reject(
            Reason::Malformed,
            "a labels message has the field \"labels\" only",
        ),
        Raw {
            feature: Some(name),
            values: Some(values),
            indices,
            labels: None,
        } => {
            if name.is_empty() {
                return reject(Reason::Malformed, "the feature name is empty");
            }
            let what = format!("feature '{name}'");
            let values = match indices {
                None => {
                    counted(values.len(), n, || {
                        format!(
                            "{what} has {} values, but the stream has n = {n} samples",
                            values.len()
                        )
                    })?;
                    finite(&what, &values)?;
                    values
                }
                Some(indices) => {
                    counted(indices.len(), values.len(), || {
                        format!(
                            "{what} has {} indices but {} values",
                            indices.len(),
                            values.len()
                        )
                    })?;
                    finite(&what, &values)?;
                    let mut dense = vec![0.0; n];
                    let mut seen = vec![false; n];
                    for (&i, &v) in indices.iter().zip(&values) {
                        let Some(k) = usize::try_from(i).ok().filter(|&k| k < n) else {
                            return reject(
                                Reason::Index,
                                format!("{what}: index {i} is outside 0..{n}"),
                            );
                        };
                        if std::mem::replace(&mut seen[k], true) {
                            return reject(
                                Reason::Index,
                                format!("{what}: index {i} appears twice"),
                            );
                        }
                        dense[k] = v;
                    }
                    dense
                }
            };
            Ok(FeatureMessage::Feature { name, values })
        }
        Raw {
            feature: Some(name),
            values: None,
            ..
        } => reject(
            Reason::Malformed,
            format!("feature '{name}' has no \"values\""),
        ),
        _ => reject(
            Reason::Malformed,
            "expected {\"labels\": [...]} or {\"feature\": name, \"values\": [...]} \
             (sparse: with \"indices\")",
        ),
    }
}

fn finite(what: &str, v: &[f64]) -> Result<(), Rejection> {
    match v.iter().position(|x| !x.is_finite()) {
        Some(i) => reject(Reason::NonFinite, format!("{what}: value {i} is {}", v[i])),
        None => Ok(()),
    }
}

/// Whether the payload holds a bare `NaN` or `Infinity` outside strings: what producers
/// that write non-standard JSON send for non-finite numbers.
fn non_finite_literal(payload: &[u8]) -> bool {
    let (mut in_string, mut escaped) = (false, false);
    for (i, &b) in payload.iter().enumerate() {
        if in_string {
            match (escaped, b) {
                (true, _) => escaped = false,
                (false, b'\\') => escaped = true,
                (false, b'"') => in_string = false,
                _ => {}
            }
        } else if b == b'"' {
            in_string = true;
        } else if payload[i..].starts_with(b"NaN") || payload[i..].starts_with(b"Infinity") {
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reason(payload: &str, n: usize) -> &'static str {
        decode(payload.as_bytes(), n).unwrap_err().reason.as_str()
    }

    #[test]
    fn decodes_labels_dense_and_sparse_features() {
        assert_eq!(
            decode(br#"{"labels": [1, -1, 0.5]}"#, 3).unwrap(),
            FeatureMessage::Labels(vec![1.0, -1.0, 0.5])
        );
        assert_eq!(
            decode(br#"{"feature": "g1", "values": [1, 2.5, -3]}"#, 3).unwrap(),
            FeatureMessage::Feature {
                name: "g1".into(),
                values: vec![1.0, 2.5, -3.0]
            }
        );
        assert_eq!(
            decode(
                br#"{"feature": "s", "indices": [3, 0], "values": [7, -1]}"#,
                5
            )
            .unwrap(),
            FeatureMessage::Feature {
                name: "s".into(),
                values: vec![-1.0, 0.0, 0.0, 7.0, 0.0]
            }
        );
        assert_eq!(
            decode(br#"{"feature": "z", "indices": [], "values": []}"#, 2).unwrap(),
            FeatureMessage::Feature {
                name: "z".into(),
                values: vec![0.0, 0.0]
            }
        );
    }

    /// The fast path of dense columns gives what serde_json gives, and declines the rest.
    #[test]
    fn the_fast_path_of_dense_columns_agrees_with_serde_json() {
        for msg in [
            r#"{"feature": "a", "values": [1, -0.5, 3e2]}"#,
            r#"{ "values" : [0.1,2.2250738585072011e-308,-0] , "feature" : "été x" }"#,
            r#"{"feature": "x1", "values": [123456789012345678901234567890, 1e-400, 5]}"#,
        ] {
            let fast = crate::codec::json::feature(msg.as_bytes(), 3);
            let raw: Raw = serde_json::from_str(msg).unwrap();
            let want = (raw.feature.unwrap(), raw.values.unwrap());
            let (name, values) = fast.expect(msg);
            assert_eq!(name, want.0);
            let bits = |v: &[f64]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
            assert_eq!(bits(&values), bits(&want.1), "{msg}");
            assert_eq!(
                decode(msg.as_bytes(), 3).unwrap(),
                FeatureMessage::Feature { name, values }
            );
        }
        for msg in [
            r#"{"feature": "", "values": [1, 2, 3]}"#,
            r#"{"feature": "a\"b", "values": [1, 2, 3]}"#,
            r#"{"feature": "a", "values": [1, 2]}"#,
            r#"{"feature": "a", "values": [1, 2, 1e999]}"#,
            r#"{"feature": "a", "values": [1, 2, 3], "feature": "b"}"#,
            r#"{"feature": "a", "indices": [0], "values": [1]}"#,
            r#"{"labels": [1, 2, 3]}"#,
        ] {
            assert_eq!(
                crate::codec::json::feature(msg.as_bytes(), 3),
                None,
                "{msg}"
            );
        }
    }

    #[test]
    fn rejects_with_a_reason() {
        let cases = [
            ("not json", "malformed"),
            (r#"{"labels": [1, 2], "extra": 1}"#, "malformed"),
            (r#"{"labels": [1, 2], "feature": "a"}"#, "malformed"),
            (r#"{"feature": "a"}"#, "malformed"),
            (r#"{"feature": "", "values": [1, 2]}"#, "malformed"),
            (r#"{"values": [1, 2]}"#, "malformed"),
            (r#"{"feature": "a", "values": ["x", 2]}"#, "malformed"),
            (
                r#"{"feature": "a", "indices": [0.5], "values": [1]}"#,
                "malformed",
            ),
            (r#"{}"#, "malformed"),
            (r#"[1, 2]"#, "malformed"),
            (r#"{"labels": [1, 2, 3]}"#, "dimension"),
            (r#"{"feature": "a", "values": [1]}"#, "dimension"),
            (
                r#"{"feature": "a", "indices": [0, 1], "values": [1]}"#,
                "dimension",
            ),
            (r#"{"feature": "a", "values": [1, NaN]}"#, "non_finite"),
            (r#"{"labels": [Infinity, 1]}"#, "non_finite"),
            (r#"{"feature": "a", "values": [1, 1e999]}"#, "non_finite"),
            (
                r#"{"feature": "a", "indices": [2], "values": [1]}"#,
                "index",
            ),
            (
                r#"{"feature": "a", "indices": [-1], "values": [1]}"#,
                "index",
            ),
            (
                r#"{"feature": "a", "indices": [1, 1], "values": [1, 2]}"#,
                "index",
            ),
        ];
        for (payload, want) in cases {
            assert_eq!(reason(payload, 2), want, "{payload}");
        }
        // "NaN" inside a string is a name, not a number.
        assert_eq!(
            reason(r#"{"feature": "NaN", "values": [1, 2], "x": 1}"#, 2),
            "malformed"
        );
    }
}
