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
        match ravel_core::solve::summary::prediction_intervals(&current.model, &rows, level) {
            Ok(intervals) => {
                let value = |i| serde_json::to_value(i).expect("an interval serializes");
                match intervals.as_slice() {
                    [one] => out.insert("interval".into(), value(one)),
                    many => out.insert(
                        "intervals".into(),
                        serde_json::Value::Array(many.iter().map(value).collect()),
                    ),
                };
            }
            Err(why) => {
                let why = match current
                    .model
                    .diagnostics
                    .notes
                    .iter()
                    .find(|n| n.starts_with("no inference"))
                {
                    Some(note) => note.clone(),
                    None => why,
                };
                out.insert("no_interval".into(), why.into());
            }
        }
    }
    let mut version = current.version.clone();
    if let (Some(b), Some(v)) = (before_event, version.as_object_mut()) {
        v.insert("before_event".into(), b.into());
    }
    out.insert("model".into(), version);
    Ok(serde_json::to_vec(&out).expect("a JSON map serializes"))
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

    #[test]
    fn a_model_spec_hashes_the_same_every_time_and_apart_from_others() {
        let ols = spec_hash(&Request::ols());
        assert_eq!(ols, spec_hash(&Request::ols()));
        assert_ne!(ols, spec_hash(&Request::ridge(1.0)));
        assert_eq!(ols.len(), 16);
    }
}
