//! One event scored: its rows decoded through the stream's own decoding (the target not
//! read), predicted with the scorer's current model, written as the output's JSON with the
//! model's version, with each row's intervals when the scorer writes them (`interval`); and
//! the short hash of a model request that version carries.

use crate::codec::format::{self, Reason, Rejection};
use crate::state::streams::{Snapshot, StreamHandle};
use ravel_core::Task;
use ravel_core::solve::{Model, Request};
use rdkafka::message::{BorrowedMessage, Message};
use std::sync::Arc;
use std::time::Instant;

/// The model a scorer predicts with, and the snapshot it came from.
pub(super) struct Current {
    pub(super) model: Model,
    pub(super) snapshot: Arc<Snapshot>,
    pub(super) at: Instant,
    /// `{"stream", "n", "as_of", "spec"}`, as every prediction carries it.
    pub(super) version: serde_json::Value,
}

/// A message's prediction, as the output's JSON, or why it has none. With `interval` (a
/// level) each row's intervals too: `interval` (one row) or `intervals` (one per row), as
/// `POST .../predict` answers them; a model without a covariance (an exact fit, a singular
/// one) gives the prediction and `no_interval`, the reason.
pub(super) fn score(
    stream: &StreamHandle,
    current: &Current,
    m: &BorrowedMessage<'_>,
    before_event: Option<bool>,
    interval: Option<f64>,
) -> Result<Vec<u8>, Rejection> {
    let Some(payload) = m.payload() else {
        return Err(crate::codec::decoder::no_payload());
    };
    let mut schema = stream
        .codec
        .schema(crate::kafka::value_schema_id(m.headers()));
    schema.unlabelled = true;
    let (mut x, mut y) = (Vec::new(), Vec::new());
    let mut tally = crate::codec::events::Tally::default();
    let rows = format::decode_tallied(payload, &schema, &mut x, &mut y, &mut tally)?;
    if tally.skipped_rows > 0 {
        return Err(Rejection {
            reason: Reason::MissingFeature,
            message: format!(
                "a field is missing and stream '{}' skips such rows (missing = \"skip_row\"): no prediction",
                stream.name()
            ),
        });
    }
    if rows == 0 {
        return Err(Rejection {
            reason: Reason::Malformed,
            message: "the message holds no row to score".into(),
        });
    }
    let p = stream.p();
    let values: Vec<f64> = x.chunks(p).map(|row| current.model.predict(row)).collect();
    let mut out = serde_json::Map::new();
    let classification = stream.task() == Task::Classification;
    let label = |s: f64| if s >= 0.0 { 1.0 } else { -1.0 };
    match (values.as_slice(), classification) {
        ([v], false) => {
            out.insert("prediction".into(), (*v).into());
        }
        ([v], true) => {
            out.insert("score".into(), (*v).into());
            out.insert("label".into(), label(*v).into());
        }
        (vs, false) => {
            out.insert("predictions".into(), vs.into());
        }
        (vs, true) => {
            out.insert("scores".into(), vs.into());
            let labels: Vec<f64> = vs.iter().map(|&v| label(v)).collect();
            out.insert("labels".into(), labels.into());
        }
    }
    if let Some(level) = interval {
        let rows: Vec<&[f64]> = x.chunks(p).collect();
        let (key, value) = intervals(&current.model, &rows, level);
        out.insert(key.into(), value);
    }
    let mut version = current.version.clone();
    if let (Some(b), Some(v)) = (before_event, version.as_object_mut()) {
        v.insert("before_event".into(), b.into());
    }
    out.insert("model".into(), version);
    Ok(serde_json::to_vec(&out).expect("a JSON map serializes"))
}

/// The rows' intervals at `level` as a prediction carries them: `interval` (one row) or
/// `intervals` (one per row), or `no_interval` and the reason, in the model's own words where
/// it noted why it has no inference (an exact fit, a singular one).
fn intervals(model: &Model, rows: &[&[f64]], level: f64) -> (&'static str, serde_json::Value) {
    match ravel_core::solve::summary::prediction_intervals(model, rows, level) {
        Ok(intervals) => {
            let value = |i| serde_json::to_value(i).expect("an interval serializes");
            match intervals.as_slice() {
                [one] => ("interval", value(one)),
                many => (
                    "intervals",
                    serde_json::Value::Array(many.iter().map(value).collect()),
                ),
            }
        }
        Err(why) => {
            let why = match model
                .diagnostics
                .notes
                .iter()
                .find(|n| n.starts_with("no inference"))
            {
                Some(note) => note.clone(),
                None => why,
            };
            ("no_interval", why.into())
        }
    }
}

/// A short, stable name of a model request: FNV-1a (64 bits) of its JSON, in hex.
pub(super) fn spec_hash(request: &Request) -> String {
    let text = serde_json::to_string(request).expect("a request serializes");
    let hash = text.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    format!("{hash:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Rows of three features (the third one a pure function of the row number) and their
    /// OLS model with inference: `noise` 0 makes the targets an exact linear function.
    fn ols_with_inference(noise: f64) -> Model {
        use ravel_core::stats::{AlphaSchedule, RunningStats};
        let n = 40;
        let x: Vec<f64> = (0..n)
            .flat_map(|i| {
                let t = i as f64;
                [t.sin(), (0.7 * t).cos(), (t * 0.31).fract()]
            })
            .collect();
        let y: Vec<f64> = x
            .chunks(3)
            .enumerate()
            .map(|(i, r)| {
                1.0 + 2.0 * r[0] - 3.0 * r[1] + 0.5 * r[2] + noise * ((i * 7919) % 13) as f64
            })
            .collect();
        let mut stats = RunningStats::new(3, AlphaSchedule::Plain);
        stats.update_batch(&x, &y).unwrap();
        let mut request = Request::ols();
        request.inference = true;
        stats.extract(&request).unwrap()
    }

    #[test]
    fn a_scorer_writes_intervals_or_says_why_it_has_none() {
        let rows: [&[f64]; 2] = [&[0.1, 0.2, 0.3], &[1.0, -1.0, 0.5]];
        let fitted = ols_with_inference(0.01);
        let (key, one) = intervals(&fitted, &rows[..1], 0.9);
        assert_eq!(key, "interval");
        let (lo, hi) = (
            one["obs_ci_lower"].as_f64().unwrap(),
            one["obs_ci_upper"].as_f64().unwrap(),
        );
        assert!(
            lo < one["mean"].as_f64().unwrap() && one["mean"].as_f64().unwrap() < hi,
            "{one}"
        );
        let (key, many) = intervals(&fitted, &rows, 0.9);
        assert_eq!(key, "intervals");
        assert_eq!(many.as_array().unwrap().len(), 2);
        assert_eq!(
            many[0], one,
            "a row's interval does not depend on the rows beside it"
        );
        // An exact fit has no covariance: the prediction says so, in the model's words.
        let exact = ols_with_inference(0.0);
        assert!(exact.diagnostics.exact_fit, "{:?}", exact.diagnostics);
        let (key, why) = intervals(&exact, &rows, 0.9);
        assert_eq!(key, "no_interval");
        let why = why.as_str().unwrap();
        assert!(why.starts_with("no inference"), "{why}");
    }

    #[test]
    fn a_model_spec_hashes_the_same_every_time_and_apart_from_others() {
        let ols = spec_hash(&Request::ols());
        assert_eq!(ols, spec_hash(&Request::ols()));
        assert_ne!(ols, spec_hash(&Request::ridge(1.0)));
        assert_eq!(ols.len(), 16);
    }
}
