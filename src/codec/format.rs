//! Kafka message formats: decoding and validation on the way in, encoding for `ravel produce`
//! and the demo producer. One message carries one row or a mini-batch.
//!
//! - JSON row: `{"x": [x1, ..., xp], "y": v}`
//! - JSON named row: `{"features": {"name": v, ...}, "y": v}`
//! - JSON mini-batch: `{"rows": [[..], [..]], "y": [v1, v2]}`
//! - JSON named mini-batch: `{"columns": ["name", ...], "rows": [[..], [..]], "y": [v1, v2]}`
//!   (the names once, in any order, then rows by position in that order), what `ravel produce`
//!   sends from a file with a header
//! - an event (streams that declare `target`): any JSON object
//!
//! Named rows, named mini-batches and events go through the stream's fields
//! (`super::events`): by name, never by position; kinds, missing values and unused keys as
//! `ravel_core::fields` says.
//! - Binary (`RVB1`), all little-endian: bytes 0..4 the magic `RVB1`, 4..8 u32 rows B, 8..12
//!   u32 features p, then B*p f64 (x, row-major), then B f64 (y); exactly 12 + 8 B (p + 1)
//!   bytes. Decoding is a bounds check and a copy, so it is many times faster than JSON
//!   (`cargo bench --bench ingest` measures both).
//!
//! JSON mini-batches and rows (`{"rows", "y"}`, `{"x", "y"}`) take a fast path
//! (`super::fast_json`): one pass over the bytes, the numbers checked against JSON's grammar,
//! read a word at a time and correctly rounded (Eisel-Lemire, fast-float2 beyond its range),
//! straight into the row buffer. Any
//! other message, and any message the fast path does not accept whole (a shape, a key, an
//! escape, a number out of range), goes to serde_json, which gives the same values for what it
//! accepts and decides every rejection and its reason, so the fast path changes only speed.
//!
//! A message is validated whole before anything is appended: a bad message never reaches the
//! statistics, and its `Rejection` names the reason (the label of the rejection metric and the
//! `ravel-reason` header of the dead-letter copy).

use serde::Deserialize;
use serde::de::{self, Deserializer, SeqAccess, Visitor};
use std::fmt;

use super::events;
pub use super::events::Tally;
use super::json as fast_json;
use super::json::events as fast_events;

/// Magic bytes that open a binary message.
pub const BINARY_MAGIC: [u8; 4] = *b"RVB1";
const HEADER: usize = 12;

pub use super::schema::Schema;
use crate::reason::counted;
pub(crate) use crate::reason::reject;
pub use crate::reason::{Reason, Rejection};

/// Decodes one message and appends its rows to `x` (row-major) and `y`; returns how many rows.
/// On rejection nothing is appended.
pub fn decode(
    payload: &[u8],
    schema: &Schema,
    x: &mut Vec<f64>,
    y: &mut Vec<f64>,
) -> Result<usize, Rejection> {
    decode_tallied(payload, schema, x, y, &mut Tally::default())
}

/// `decode`, counting in `tally` what named messages left aside (unused keys, skipped rows).
pub fn decode_tallied(
    payload: &[u8],
    schema: &Schema,
    x: &mut Vec<f64>,
    y: &mut Vec<f64>,
    tally: &mut Tally,
) -> Result<usize, Rejection> {
    decode_early(payload, schema, None, x, y, tally)
}

/// `decode_tallied` of a schema'd value whose mapped fields (or refusal) were read ahead with
/// others of its batch (`crate::codec::schemad::Wire::pick_batch`); None: as `decode_tallied`.
pub fn decode_early(
    payload: &[u8],
    schema: &Schema,
    early: Option<crate::codec::schemad::Early>,
    x: &mut Vec<f64>,
    y: &mut Vec<f64>,
    tally: &mut Tally,
) -> Result<usize, Rejection> {
    let (x0, y0) = (x.len(), y.len());
    let mut local = Tally::default();
    // Binary rows are checked as they are copied; a message that fails that check (or of a
    // classification stream, whose labels are checked too) is read again by `validate`.
    let mut within = false;
    let result = if let Some(wire) = schema.wire {
        decode_schemad(wire, payload, schema, early, x, y, &mut local)
    } else if payload.starts_with(&BINARY_MAGIC) {
        decode_binary(payload, schema, x, y, &mut within)
    } else {
        decode_json(payload, schema, x, y, &mut local)
    };
    let checked = within && !schema.classification && !schema.unlabelled;
    let result = result.and_then(|rows| {
        if checked {
            return Ok(rows);
        }
        validate(schema, &x[x0..], &y[y0..]).map(|_| rows)
    });
    match result {
        Ok(rows) => {
            tally.add(local);
            Ok(rows)
        }
        Err(e) => {
            // Refused messages count where they were read, nothing else of theirs.
            tally.events_by_tree += local.events_by_tree;
            x.truncate(x0);
            y.truncate(y0);
            Err(e)
        }
    }
}

/// Which declared fields and target a message carries (`events::presence`), read as
/// `decode` reads it: a JSON event or named row, or a schema'd value's record. None for what
/// is not read by name (positional and binary rows, named mini-batches) or cannot be read.
pub fn presence(payload: &[u8], schema: &Schema) -> Option<crate::codec::events::Presence> {
    let fields = schema.fields?;
    let value = if let Some(wire) = schema.wire {
        match wire
            .locate(payload, schema.schema_header)
            .ok()?
            .tree()
            .ok()?
        {
            crate::codec::schemad::Record::Tree(v) => v,
            crate::codec::schemad::Record::Json(text) => events::parse(text).ok()?,
        }
    } else if payload.starts_with(&BINARY_MAGIC) {
        return None;
    } else {
        events::parse(payload).ok()?
    };
    match value {
        serde_json::Value::Object(msg) => events::presence(&msg, fields, schema.target),
        _ => None,
    }
}

/// The rows of a value read by its mapped paths alone (`picked`), or None when the field
/// mapping refuses them, with nothing appended or tallied: the caller then reads the value as
/// a tree, whose refusal names the keys the stream does not use (a misspelled name is usually
/// among them).
fn rows_of_picked(
    picked: &crate::codec::schemad::Picked,
    schema: &Schema,
    fields: &ravel_core::fields::Fields,
    x: &mut Vec<f64>,
    y: &mut Vec<f64>,
    tally: &mut Tally,
) -> Option<usize> {
    let (x0, y0) = (x.len(), y.len());
    let mut local = Tally::default();
    match events::decode_picked(picked, schema, fields, x, y, &mut local) {
        Ok(rows) => {
            tally.add(local);
            Some(rows)
        }
        Err(_) => {
            x.truncate(x0);
            y.truncate(y0);
            None
        }
    }
}

/// A schema'd value: its record as named fields, read as an event through the stream's fields.
fn decode_schemad(
    wire: &crate::codec::schemad::Wire,
    payload: &[u8],
    schema: &Schema,
    early: Option<crate::codec::schemad::Early>,
    x: &mut Vec<f64>,
    y: &mut Vec<f64>,
    tally: &mut Tally,
) -> Result<usize, Rejection> {
    let picked_early = match early {
        Some(crate::codec::schemad::Early::Refused(e)) => return Err(e),
        Some(crate::codec::schemad::Early::Picked(p)) => Some(p),
        // As `events::place` places a row of plain fields whose values are all there.
        Some(crate::codec::schemad::Early::Row {
            x: row,
            y: v,
            unused,
        }) if !schema.unlabelled => {
            x.extend_from_slice(&row);
            y.push(v);
            tally.ignored_fields += unused;
            return Ok(1);
        }
        Some(crate::codec::schemad::Early::Row { .. }) | None => None,
    };
    if let (Some(fields), Some(picked)) = (schema.fields, &picked_early)
        && let Some(rows) = rows_of_picked(picked, schema, fields, x, y, tally)
    {
        return Ok(rows);
    }
    // The framing read and the schema found once, for both ways of reading the value.
    let located = wire.locate(payload, schema.schema_header)?;
    if picked_early.is_none()
        && let (Some(fields), Some(target)) = (schema.fields, schema.target)
        && let Some(picked) = located.pick(fields, target)
        && let Some(rows) = rows_of_picked(&picked, schema, fields, x, y, tally)
    {
        return Ok(rows);
    }
    let record = match located.tree()? {
        crate::codec::schemad::Record::Tree(v) => v,
        crate::codec::schemad::Record::Json(text) => events::parse(text)?,
    };
    let (serde_json::Value::Object(obj), Some(fields)) = (&record, schema.fields) else {
        return reject(
            Reason::Schema,
            "the record is not a record of named fields (an Avro record, a Protobuf message, a \
             JSON object)",
        );
    };
    events::decode(obj, schema, fields, x, y, tally)
}

/// Whether every value is finite and within `MAX_ABS_VALUE`: the statistics' own check, one
/// branch-free pass with AVX2 where the CPU has it (as a portable loop here, built for SSE2,
/// which has no 64-bit comparison, it was about 4% of the service's CPU on binary
/// mini-batches at p = 100).
fn within_limit(values: &[f64]) -> bool {
    ravel_core::stats::within_limit(values)
}

/// Finiteness and labels of rows already shaped right.
fn validate(schema: &Schema, x: &[f64], y: &[f64]) -> Result<(), Rejection> {
    if schema.unlabelled {
        return validate_features(schema.p, x);
    }
    // The usual case in one vectorized pass; a message that fails it is read again below,
    // row by row, for the reason and the row to name.
    if !schema.classification && within_limit(x) && within_limit(y) {
        return Ok(());
    }
    for (i, &v) in y.iter().enumerate() {
        if !v.is_finite()
            || x[i * schema.p..(i + 1) * schema.p]
                .iter()
                .any(|v| !v.is_finite())
        {
            return reject(
                Reason::NonFinite,
                format!("row {i} has a NaN or infinite value"),
            );
        }
        let limit = ravel_core::stats::MAX_ABS_VALUE;
        if v.abs() > limit
            || x[i * schema.p..(i + 1) * schema.p]
                .iter()
                .any(|v| v.abs() > limit)
        {
            return reject(
                Reason::Overflow,
                format!("row {i} has a value beyond +-{limit:e}"),
            );
        }
        if schema.classification && !(v == 1.0 || v == -1.0 || v == 0.0) {
            return reject(
                Reason::Label,
                format!("row {i}: label {v} is not +1, -1 or 0"),
            );
        }
    }
    Ok(())
}

/// `validate` for rows without targets: their features only.
fn validate_features(p: usize, x: &[f64]) -> Result<(), Rejection> {
    if within_limit(x) {
        return Ok(());
    }
    for (i, row) in x.chunks(p).enumerate() {
        if row.iter().any(|v| !v.is_finite()) {
            return reject(
                Reason::NonFinite,
                format!("row {i} has a NaN or infinite value"),
            );
        }
        if !within_limit(row) {
            let limit = ravel_core::stats::MAX_ABS_VALUE;
            return reject(
                Reason::Overflow,
                format!("row {i} has a value beyond +-{limit:e}"),
            );
        }
    }
    Ok(())
}

/// A binary message's rows; `within`: whether every value is finite and within
/// `MAX_ABS_VALUE` (checked as the values are copied).
fn decode_binary(
    payload: &[u8],
    schema: &Schema,
    x: &mut Vec<f64>,
    y: &mut Vec<f64>,
    within: &mut bool,
) -> Result<usize, Rejection> {
    if payload.len() < HEADER {
        return reject(
            Reason::Malformed,
            format!(
                "binary message of {} bytes is shorter than its header",
                payload.len()
            ),
        );
    }
    let word =
        |i: usize| u32::from_le_bytes(payload[i..i + 4].try_into().expect("4 bytes")) as usize;
    let (rows, p) = (word(4), word(8));
    counted(p, schema.p, || {
        format!("binary message has p = {p}, the stream has {}", schema.p)
    })?;
    let want = p
        .checked_add(1)
        .and_then(|w| w.checked_mul(rows))
        .and_then(|v| v.checked_mul(8))
        .and_then(|b| b.checked_add(HEADER));
    if want != Some(payload.len()) {
        return reject(
            Reason::Malformed,
            format!(
                "binary message has {} bytes; a header of {rows} rows x {p} features needs {}",
                payload.len(),
                want.map(|w| w.to_string())
                    .unwrap_or_else(|| "more than fits in memory".into())
            ),
        );
    }
    let body = &payload[HEADER..];
    let (xb, yb) = body.split_at(rows * p * 8);
    let within_x = ravel_core::stats::extend_within_limit(x, xb);
    *within = ravel_core::stats::extend_within_limit(y, yb) && within_x;
    Ok(rows)
}

/// `y`: one number or an array.
enum Targets {
    One(f64),
    Many(Vec<f64>),
}

impl<'de> Deserialize<'de> for Targets {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Targets;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a number or an array of numbers")
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Targets, E> {
                Ok(Targets::One(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Targets, E> {
                Ok(Targets::One(v as f64))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Targets, E> {
                Ok(Targets::One(v as f64))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Targets, A::Error> {
                let mut v = Vec::with_capacity(seq.size_hint().unwrap_or(0));
                while let Some(t) = seq.next_element::<f64>()? {
                    v.push(t);
                }
                Ok(Targets::Many(v))
            }
        }
        d.deserialize_any(V)
    }
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JsonMessage {
    #[serde(default)]
    x: Option<Vec<f64>>,
    #[serde(default)]
    features: Option<serde::de::IgnoredAny>,
    #[serde(default)]
    rows: Option<Vec<Vec<f64>>>,
    #[serde(default)]
    columns: Option<Vec<String>>,
    #[serde(default)]
    y: Option<Targets>,
}

fn decode_json(
    payload: &[u8],
    schema: &Schema,
    x: &mut Vec<f64>,
    y: &mut Vec<f64>,
    tally: &mut Tally,
) -> Result<usize, Rejection> {
    // On a stream that reads events, `{"x": ..., "y": ...}` is an event like any other; a
    // named mini-batch of plain numeric features takes the fast path too.
    let column = schema
        .fields
        .filter(|f| f.is_plain())
        .map(|f| move |name: &str| f.field(name));
    let shapes = fast_json::Shapes {
        positional: schema.target.is_none(),
        column: column.as_ref().map(|c| c as fast_json::ColumnOf),
    };
    if let Some(rows) = fast_json::decode_shapes(payload, schema.p, shapes, x, y) {
        return Ok(rows);
    }
    let Some(fields) = schema.fields else {
        return decode_json_serde(payload, schema, x, y);
    };
    if let (Some(plan), Some(_)) = (schema.plan, schema.target) {
        if let Some(picked) = fast_events::pick(payload, plan, !schema.unlabelled)
            && let Some(rows) = rows_of_picked(&picked, schema, fields, x, y, tally)
        {
            return Ok(rows);
        }
        tally.events_by_tree += 1;
    }
    let value = events::parse(payload)?;
    let serde_json::Value::Object(msg) = value else {
        return reject(
            Reason::Malformed,
            "a message is a JSON object (a row, a mini-batch or an event)",
        );
    };
    let positional =
        msg.contains_key("x") || (msg.contains_key("rows") && !msg.contains_key("columns"));
    if schema.target.is_none() && positional {
        return decode_json_serde(payload, schema, x, y);
    }
    events::decode(&msg, schema, fields, x, y, tally)
}

/// Every JSON shape, by serde_json: what the fast path does not take, and every rejection.
fn decode_json_serde(
    payload: &[u8],
    schema: &Schema,
    x: &mut Vec<f64>,
    y: &mut Vec<f64>,
) -> Result<usize, Rejection> {
    let msg: JsonMessage = match serde_json::from_slice(payload) {
        Ok(m) => m,
        Err(e) => return reject(Reason::Malformed, format!("not a ravel JSON message ({e})")),
    };
    let p = schema.p;
    let one_y = |t: Option<Targets>| match t {
        _ if schema.unlabelled => Ok(f64::NAN),
        Some(Targets::One(v)) => Ok(v),
        Some(Targets::Many(_)) => reject(
            Reason::Malformed,
            "a single row needs one number y, not an array",
        ),
        None => reject(Reason::Malformed, "the row has no y"),
    };
    if msg.columns.is_some() && msg.rows.is_none() {
        return reject(
            Reason::Malformed,
            "\"columns\" names the columns of \"rows\": a named mini-batch needs both",
        );
    }
    match (msg.x, msg.features, msg.rows) {
        (Some(row), None, None) => {
            let v = one_y(msg.y)?;
            counted(row.len(), p, || {
                format!("x has {} features, the stream has {p}", row.len())
            })?;
            x.extend_from_slice(&row);
            y.push(v);
            Ok(1)
        }
        (None, Some(_), None) => reject(
            Reason::UnknownFeature,
            "this stream declares no feature names; send {\"x\": [...], \"y\": v}",
        ),
        (None, None, Some(rows)) => {
            let ys = match msg.y {
                _ if schema.unlabelled => vec![f64::NAN; rows.len()],
                Some(Targets::Many(v)) => v,
                Some(Targets::One(_)) => {
                    return reject(Reason::Malformed, "a mini-batch needs y as an array");
                }
                None => return reject(Reason::Malformed, "the mini-batch has no y"),
            };
            counted(ys.len(), rows.len(), || {
                format!("{} rows but {} values of y", rows.len(), ys.len())
            })?;
            let order = match &msg.columns {
                Some(columns) => Some(column_order(columns, schema)?),
                None => None,
            };
            if let Some((i, r)) = rows.iter().enumerate().find(|(_, r)| r.len() != p) {
                return reject(
                    Reason::Dimension,
                    format!("row {i} has {} features, the stream has {p}", r.len()),
                );
            }
            x.reserve(rows.len() * p);
            match order {
                None => {
                    for r in &rows {
                        x.extend_from_slice(r);
                    }
                }
                Some(order) => {
                    for r in &rows {
                        let start = x.len();
                        x.resize(start + p, 0.0);
                        for (value, &j) in r.iter().zip(&order) {
                            x[start + j] = *value;
                        }
                    }
                }
            }
            y.extend_from_slice(&ys);
            Ok(rows.len())
        }
        _ => reject(
            Reason::Malformed,
            "a message needs exactly one of \"x\", \"features\" or \"rows\"",
        ),
    }
}

/// The column of each of a named mini-batch's `columns` on a stream declared by count
/// (`features = p`): it has no names to match, so it takes the columns in the message's order,
/// as a positional mini-batch. (Streams that declare names place them by name,
/// `super::events`.)
fn column_order(columns: &[String], schema: &Schema) -> Result<Vec<usize>, Rejection> {
    let p = schema.p;
    counted(columns.len(), p, || {
        format!(
            "\"columns\" names {} features, the stream has {p}",
            columns.len()
        )
    })?;
    Ok((0..p).collect())
}

/// Encodes rows (row-major `x`, p features) as one binary message.
pub fn encode_binary(x: &[f64], y: &[f64], p: usize, out: &mut Vec<u8>) {
    debug_assert_eq!(x.len(), y.len() * p);
    out.clear();
    out.reserve(HEADER + 8 * (x.len() + y.len()));
    out.extend_from_slice(&BINARY_MAGIC);
    out.extend_from_slice(&(y.len() as u32).to_le_bytes());
    out.extend_from_slice(&(p as u32).to_le_bytes());
    for v in x.iter().chain(y) {
        out.extend_from_slice(&v.to_le_bytes());
    }
}

/// Encodes rows as JSON: a single row `{"x", "y"}`, or a mini-batch `{"rows", "y"}`.
pub fn encode_json(x: &[f64], y: &[f64], p: usize, out: &mut Vec<u8>) {
    out.clear();
    if y.len() == 1 {
        serde_json::to_writer(&mut *out, &serde_json::json!({"x": x, "y": y[0]}))
            .expect("in-memory write");
    } else {
        let rows: Vec<&[f64]> = x.chunks_exact(p.max(1)).collect();
        serde_json::to_writer(&mut *out, &serde_json::json!({"rows": rows, "y": y}))
            .expect("in-memory write");
    }
}

/// Encodes rows (row-major `x`, `names.len()` features) as one named mini-batch
/// `{"columns": [...], "rows": [[...]], "y": [...]}`: the names once, then rows by position.
pub fn encode_json_named_batch(names: &[String], x: &[f64], y: &[f64], out: &mut Vec<u8>) {
    let p = names.len();
    let rows: Vec<&[f64]> = if p == 0 {
        y.iter().map(|_| &x[..0]).collect()
    } else {
        x.chunks(p).collect()
    };
    out.clear();
    serde_json::to_writer(
        &mut *out,
        &serde_json::json!({"columns": names, "rows": rows, "y": y}),
    )
    .expect("numbers and strings serialize");
}

/// Encodes one row as a JSON named row.
pub fn encode_json_named(names: &[String], x: &[f64], y: f64, out: &mut Vec<u8>) {
    out.clear();
    let features: serde_json::Map<String, serde_json::Value> = names
        .iter()
        .zip(x)
        .map(|(n, v)| (n.clone(), serde_json::json!(v)))
        .collect();
    serde_json::to_writer(
        &mut *out,
        &serde_json::json!({"features": features, "y": y}),
    )
    .expect("in-memory write");
}

#[cfg(test)]
mod tests {
    use super::*;
    use ravel_core::fields::Fields;

    fn schema(p: usize) -> Schema<'static> {
        Schema::positional(p, false)
    }

    fn numeric(names: &[&str]) -> Fields {
        Fields::numeric(&names.iter().map(|n| n.to_string()).collect::<Vec<_>>()).unwrap()
    }

    fn named(fields: &Fields) -> Schema<'_> {
        Schema {
            p: fields.p(),
            fields: Some(fields),
            ..Schema::positional(0, false)
        }
    }

    #[test]
    fn rows_to_score_need_no_y_but_finite_features() {
        let s = Schema {
            unlabelled: true,
            ..Schema::positional(2, true)
        };
        let (x, y) = dec(br#"{"x": [1, 2.5]}"#, &s).unwrap();
        assert_eq!(x, [1.0, 2.5]);
        assert!(y[0].is_nan());
        let (x, y) = dec(br#"{"rows": [[1, 2], [3, 4]]}"#, &s).unwrap();
        assert_eq!((x, y.len()), (vec![1.0, 2.0, 3.0, 4.0], 2));
        // A label that is not +-1 is not read; a feature beyond the limit is refused.
        assert!(dec(br#"{"x": [1, 2], "y": 7}"#, &s).is_ok());
        assert_eq!(
            dec(br#"{"x": [1, 1e200]}"#, &s).unwrap_err().reason,
            Reason::Overflow
        );
        assert_eq!(
            dec(br#"{"x": [1]}"#, &s).unwrap_err().reason,
            Reason::Dimension
        );
        // The stream itself still needs its y.
        assert_eq!(
            dec(br#"{"x": [1, 2]}"#, &Schema::positional(2, false))
                .unwrap_err()
                .reason,
            Reason::Malformed
        );
    }

    fn dec(payload: &[u8], s: &Schema) -> Result<(Vec<f64>, Vec<f64>), Rejection> {
        let (mut x, mut y) = (vec![9.0], vec![9.0]);
        match decode(payload, s, &mut x, &mut y) {
            Ok(n) => {
                assert_eq!(y.len(), n + 1);
                Ok((x[1..].to_vec(), y[1..].to_vec()))
            }
            Err(e) => {
                // Nothing appended on rejection.
                assert_eq!((x.len(), y.len()), (1, 1));
                Err(e)
            }
        }
    }

    #[test]
    fn json_shapes() {
        let s = schema(2);
        assert_eq!(
            dec(br#"{"x": [1, 2.5], "y": -3}"#, &s).unwrap(),
            (vec![1.0, 2.5], vec![-3.0])
        );
        assert_eq!(
            dec(br#"{"rows": [[1, 2], [3, 4]], "y": [5, 6]}"#, &s).unwrap(),
            (vec![1.0, 2.0, 3.0, 4.0], vec![5.0, 6.0])
        );
        let fields = numeric(&["a", "b"]);
        let named = named(&fields);
        assert_eq!(
            dec(br#"{"features": {"b": 2, "a": 1}, "y": 0.5}"#, &named).unwrap(),
            (vec![1.0, 2.0], vec![0.5])
        );
    }

    #[test]
    fn named_mini_batches_place_columns_by_name() {
        let fields = numeric(&["a", "b", "c"]);
        let named = named(&fields);
        // Columns in another order than declared, keys in either order (the fast path takes
        // neither: it knows no "columns").
        let want = (vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0], vec![7.0, 8.0]);
        for msg in [
            br#"{"columns": ["c", "a", "b"], "rows": [[3, 1, 2], [6, 4, 5]], "y": [7, 8]}"#
                .as_slice(),
            br#"{"rows": [[3, 1, 2], [6, 4, 5]], "y": [7, 8], "columns": ["c", "a", "b"]}"#,
        ] {
            assert_eq!(dec(msg, &named).unwrap(), want);
            assert!(fast_json::decode(msg, 3, &mut Vec::new(), &mut Vec::new()).is_none());
        }
        // The encoder writes what the decoder reads.
        let names: Vec<String> = ["b", "c", "a"].map(String::from).into();
        let mut buf = Vec::new();
        encode_json_named_batch(
            &names,
            &[2.0, 3.0, 1.0, 5.0, 6.0, 4.0],
            &[7.0, 8.0],
            &mut buf,
        );
        assert_eq!(dec(&buf, &named).unwrap(), want);
        // A column the stream does not use is ignored and counted.
        let mut tally = Tally::default();
        let (mut x, mut y) = (vec![], vec![]);
        let msg = br#"{"columns": ["a", "b", "d", "c"], "rows": [[1, 2, 9, 3]], "y": [1]}"#;
        decode_tallied(msg, &named, &mut x, &mut y, &mut tally).unwrap();
        assert_eq!((x, y), (vec![1.0, 2.0, 3.0], vec![1.0]));
        assert_eq!(tally.ignored_fields, 1);
        // Never by position: each mismatch is refused with the names, nothing appended.
        let refused = |msg: &[u8], s: &Schema| dec(msg, s).unwrap_err();
        let r = refused(
            br#"{"columns": ["a", "b", "d"], "rows": [[1, 2, 3]], "y": [1]}"#,
            &named,
        );
        assert_eq!(r.reason, Reason::MissingFeature);
        assert!(
            r.message.contains("feature 'c' is missing"),
            "{}",
            r.message
        );
        let r = refused(
            br#"{"columns": ["a", "a", "b"], "rows": [[1, 2, 3]], "y": [1]}"#,
            &named,
        );
        assert!(r.message.contains("'a' twice"), "{}", r.message);
        let r = refused(
            br#"{"columns": ["a", "b", "c"], "rows": [[1, 2]], "y": [1]}"#,
            &named,
        );
        assert_eq!(r.reason, Reason::Dimension);
        let r = refused(
            br#"{"columns": ["a", "b", "c"], "x": [1, 2, 3], "y": 1}"#,
            &named,
        );
        assert_eq!(r.reason, Reason::Malformed);
        // A stream declared by count has no names to match: the message's order, as positional.
        let msg = br#"{"columns": ["c", "a", "b"], "rows": [[3, 1, 2]], "y": [1]}"#;
        assert_eq!(
            dec(msg, &schema(3)).unwrap(),
            (vec![3.0, 1.0, 2.0], vec![1.0])
        );
        let r = refused(
            br#"{"columns": ["a", "b"], "rows": [[1, 2]], "y": [1]}"#,
            &schema(3),
        );
        assert_eq!(r.reason, Reason::Dimension);
    }

    /// A named mini-batch of plain numeric features takes the fast path, with the values
    /// serde_json's path gives; what it does not take whole goes to that path.
    #[test]
    fn named_batches_take_the_fast_path_with_the_same_values() {
        let fields = numeric(&["a", "b", "c"]);
        let s = named(&fields);
        let column = |name: &str| fields.field(name);
        let fast = fast_json::Shapes {
            positional: true,
            column: Some(&column),
        };
        for msg in [
            br#"{"columns": ["c", "a", "b"], "rows": [[3, 1, 2.5], [6e-3, 4, -5]], "y": [7, 8]}"#
                .as_slice(),
            br#"{"y": [7, 8], "rows": [[3, 1, 2.5], [6e-3, 4, -5]], "columns": ["c", "a", "b"]}"#,
            br#"{"columns":["a","b","c"],"rows":[[1,2,3]],"y":[0.1]}"#,
        ] {
            let (mut x, mut y) = (vec![], vec![]);
            let rows = fast_json::decode_shapes(msg, 3, fast, &mut x, &mut y).expect("fast");
            let value = events::parse(msg).unwrap();
            let (mut sx, mut sy) = (vec![], vec![]);
            let serde_rows = events::decode(
                value.as_object().unwrap(),
                &s,
                &fields,
                &mut sx,
                &mut sy,
                &mut Tally::default(),
            )
            .unwrap();
            assert_eq!((rows, &x, &y), (serde_rows, &sx, &sy));
            assert_eq!(dec(msg, &s).unwrap(), (x, y));
        }
        for msg in [
            br#"{"columns": ["c", "a", "d"], "rows": [[3, 1, 2]], "y": [7]}"#.as_slice(),
            br#"{"columns": ["c", "a"], "rows": [[3, 1]], "y": [7]}"#,
            br#"{"columns": ["c", "a", "a"], "rows": [[3, 1, 1]], "y": [7]}"#,
            br#"{"columns": ["c", "a", "b"], "rows": [[3, null, 1]], "y": [7]}"#,
            br#"{"columns": ["c", "a", "b"], "rows": [[3, 1, 2]], "y": [7, 8]}"#,
            br#"{"columns": ["c", "a", "b"], "x": [3, 1, 2], "y": 7}"#,
        ] {
            let (mut x, mut y) = (vec![], vec![]);
            assert!(fast_json::decode_shapes(msg, 3, fast, &mut x, &mut y).is_none());
            assert!(x.is_empty() && y.is_empty());
        }
        // Streams that read events take no positional shape on the fast path.
        let events_only = fast_json::Shapes {
            positional: false,
            column: Some(&column),
        };
        let (mut x, mut y) = (vec![], vec![]);
        let row = br#"{"x": [1, 2, 3], "y": 1}"#;
        assert!(fast_json::decode_shapes(row, 3, events_only, &mut x, &mut y).is_none());
    }

    #[test]
    fn json_rejections_name_the_reason() {
        let fields = numeric(&["a", "b"]);
        let named = named(&fields);
        let class = Schema::positional(2, true);
        let two = &schema(2);
        let cases: [(&[u8], &Schema, Reason); 14] = [
            (b"not json", two, Reason::Malformed),
            (b"", two, Reason::Malformed),
            (br#"{"x": [1, 2]}"#, two, Reason::Malformed),
            (br#"{"x": [1, null], "y": 1}"#, two, Reason::Malformed),
            (br#"{"x": [1, 2], "y": 1, "z": 0}"#, two, Reason::Malformed),
            (
                br#"{"x": [1, 2], "rows": [[1, 2]], "y": 1}"#,
                two,
                Reason::Malformed,
            ),
            (br#"{"x": [1, 2, 3], "y": 1}"#, two, Reason::Dimension),
            (
                br#"{"rows": [[1, 2], [3]], "y": [1, 2]}"#,
                two,
                Reason::Dimension,
            ),
            (
                br#"{"rows": [[1, 2]], "y": [1, 2]}"#,
                two,
                Reason::Dimension,
            ),
            (br#"{"x": [1, 1e999], "y": 1}"#, two, Reason::Malformed),
            (
                br#"{"features": {"a": 1, "b": "2"}, "y": 1}"#,
                &named,
                Reason::FieldType,
            ),
            (
                br#"{"features": {"a": 1}, "y": 1}"#,
                &named,
                Reason::MissingFeature,
            ),
            (
                br#"{"features": {"a": 1, "b": 2}, "y": 1}"#,
                two,
                Reason::UnknownFeature,
            ),
            (
                br#"{"rows": [[1, 2], [3, 4]], "y": [1, 0.5]}"#,
                &class,
                Reason::Label,
            ),
        ];
        for (payload, s, want) in cases {
            let got = dec(payload, s).unwrap_err();
            assert_eq!(
                got.reason,
                want,
                "{}: {}",
                String::from_utf8_lossy(payload),
                got.message
            );
        }
        assert!(dec(br#"{"rows": [[1, 2], [3, 4]], "y": [1, 0]}"#, &class).is_ok());
    }

    #[test]
    fn binary_round_trip_and_rejections() {
        let x = [1.0, -2.0, 3.5, 4.0, 1e-300, -0.0];
        let y = [0.25, -7.0];
        let mut buf = vec![];
        encode_binary(&x, &y, 3, &mut buf);
        assert_eq!(buf.len(), 12 + 8 * 8);
        assert_eq!(&buf[..4], b"RVB1");
        assert_eq!(dec(&buf, &schema(3)).unwrap(), (x.to_vec(), y.to_vec()));
        // Written by hand from the documented layout, independent of encode_binary.
        let mut hand = b"RVB1".to_vec();
        hand.extend_from_slice(&1u32.to_le_bytes());
        hand.extend_from_slice(&2u32.to_le_bytes());
        for v in [1.5f64, 2.5, -1.0] {
            hand.extend_from_slice(&v.to_le_bytes());
        }
        assert_eq!(
            dec(&hand, &schema(2)).unwrap(),
            (vec![1.5, 2.5], vec![-1.0])
        );

        assert_eq!(dec(&buf, &schema(4)).unwrap_err().reason, Reason::Dimension);
        assert_eq!(
            dec(&buf[..buf.len() - 1], &schema(3)).unwrap_err().reason,
            Reason::Malformed
        );
        assert_eq!(
            dec(&buf[..7], &schema(3)).unwrap_err().reason,
            Reason::Malformed
        );
        let mut huge = buf.clone();
        huge[4..8].copy_from_slice(&u32::MAX.to_le_bytes());
        assert_eq!(
            dec(&huge, &schema(3)).unwrap_err().reason,
            Reason::Malformed
        );
        for bad in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            let mut xb = x;
            xb[4] = bad;
            encode_binary(&xb, &y, 3, &mut buf);
            assert_eq!(dec(&buf, &schema(3)).unwrap_err().reason, Reason::NonFinite);
            let yb = [0.0, bad];
            encode_binary(&x, &yb, 3, &mut buf);
            assert_eq!(dec(&buf, &schema(3)).unwrap_err().reason, Reason::NonFinite);
        }
    }

    /// The fast path against serde_json on the same messages: the same bits for every number
    /// it takes (integers, long mantissas, subnormals, underflow, -0, exponents), and nothing
    /// appended for any message it declines.
    #[test]
    fn fast_json_agrees_with_serde_json() {
        let mut numbers: Vec<String> = [
            "0",
            "-0",
            "0.0",
            "-0.0",
            "1",
            "-1",
            "9007199254740993",
            "18446744073709551615",
            "18446744073709551616",
            "-9223372036854775808",
            "-9223372036854775809",
            "123456789012345678901234567890",
            "0.1",
            "2.2250738585072011e-308",
            "2.2250738585072012e-308",
            "4.9e-324",
            "2.4e-324",
            "2.5e-324",
            "1e-400",
            "-1e-400",
            "1.7976931348623157e308",
            "1.7976931348623158e308",
            "1E5",
            "1e+5",
            "1e-5",
            "1.5E-05",
            "0.30000000000000004",
            "9.999999999999999e22",
            "3.14159265358979323846264338327950288419716939937510582097494459",
            "0.000000000000000000000000000000000000000000000000000000000000000001",
        ]
        .map(String::from)
        .to_vec();
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for _ in 0..20_000 {
            let v = f64::from_bits(next());
            if v.is_finite() {
                numbers.push(format!("{v}"));
                numbers.push(format!("{v:e}"));
                numbers.push(format!("{v:.25e}"));
            }
            let u = (next() >> 11) as f64 / (1u64 << 53) as f64 - 0.5;
            numbers.push(format!("{u}"));
            numbers.push(format!("{}", next() >> (next() % 64)));
        }
        let s = schema(1);
        for n in &numbers {
            // Also with room after each number for the word-at-a-time paths (`PAD`).
            for msg in [
                format!(r#"{{"x": [{n}], "y": {n}}}"#),
                format!(r#"{{"y":[{n},{n}],"rows":[[{n}],[{n}]]}}"#),
                format!(r#"{{"x": [{n}], "y": {n}}}{PAD}"#),
                format!(r#"{{"y":[{n},{n}],"rows":[[{n}],[{n}]]}}{PAD}"#),
            ] {
                let want =
                    decode_json_serde(msg.as_bytes(), &s, &mut vec![], &mut vec![]).map(|_| ());
                let (mut x, mut y) = (vec![], vec![]);
                let fast = fast_json::decode(msg.as_bytes(), 1, &mut x, &mut y);
                let (mut xs, mut ys) = (vec![], vec![]);
                let slow = decode_json_serde(msg.as_bytes(), &s, &mut xs, &mut ys);
                assert!(want.is_ok(), "{msg}: serde_json refuses it");
                assert!(fast.is_some(), "{msg}: the fast path declines it");
                let bits = |v: &[f64]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
                assert_eq!((bits(&x), bits(&y)), (bits(&xs), bits(&ys)), "{msg}");
                assert_eq!(fast, slow.ok());
            }
        }
        // Declined: not JSON, not this grammar, or not these shapes; serde_json decides.
        let s = schema(2);
        for msg in [
            r#"{"x": [01, 2], "y": 1}"#,
            r#"{"x": [1., 2], "y": 1}"#,
            r#"{"x": [.5, 2], "y": 1}"#,
            r#"{"x": [+1, 2], "y": 1}"#,
            r#"{"x": [1e, 2], "y": 1}"#,
            r#"{"x": [NaN, 2], "y": 1}"#,
            r#"{"x": [Infinity, 2], "y": 1}"#,
            r#"{"x": [1, 2], "y": 1e999}"#,
            r#"{"x": [1, 2], "y": 1} x"#,
            r#"{"x": [1, 2], "y": 1,}"#,
            r#"{"x": [1, 2], "y": 1, "y": 2}"#,
            r#"{"x": [1, 2], "x": [1, 2], "y": 1}"#,
            r#"{"\u0078": [1, 2], "y": 1}"#,
            r#"{"x": [1, 2, 3], "y": 1}"#,
            r#"{"x": [1, 2], "y": [1]}"#,
            r#"{"rows": [[1, 2]], "y": 1}"#,
            r#"{"rows": [[1, 2]], "y": [1, 2]}"#,
            r#"{"rows": [[1, 2], [1]], "y": [1, 2]}"#,
            r#"{"x": [1, 2]}"#,
            r#"{"y": 1}"#,
            r#"{"features": {"a": 1, "b": 2}, "y": 1}"#,
            r#"[1, 2]"#,
            "",
        ] {
            let (mut x, mut y) = (vec![7.0], vec![7.0]);
            assert_eq!(
                fast_json::decode(msg.as_bytes(), 2, &mut x, &mut y),
                None,
                "{msg}"
            );
            assert_eq!((x, y), (vec![7.0], vec![7.0]), "{msg}");
        }
        // Accepted by serde_json, declined by the fast path: decode still takes it.
        assert_eq!(
            dec(br#"{"\u0078": [1, 2], "y": 1}"#, &s).unwrap(),
            (vec![1.0, 2.0], vec![1.0])
        );
        // Whitespace anywhere between tokens, keys in any order.
        let mut x = vec![];
        let mut y = vec![];
        let msg = b" \t{ \"y\" :\r\n[ 3 , 4 ] , \"rows\": [ [1,2] ,[ -0.5 , 1e2 ] ] }\n";
        assert_eq!(fast_json::decode(msg, 2, &mut x, &mut y), Some(2));
        assert_eq!((x, y), (vec![1.0, 2.0, -0.5, 100.0], vec![3.0, 4.0]));
    }

    /// Whitespace after a message, so that every number in it has the bytes the fast
    /// paths read ahead (`fast_json` falls back to its byte-at-a-time path near the end).
    const PAD: &str = "                                                                ";

    /// Each path of the number parser and the boundaries between them, against Rust's own
    /// correctly rounded parser and serde_json, at every distance from the end of the
    /// message (so on both sides of where the word-at-a-time paths stop): one integer digit
    /// and 0 to 25 fraction digits (the common shape is 15 to 18), leading zeros in the
    /// fraction, 2 to 9 integer digits, exponents after every length, -0, and numbers whose
    /// words hold the next token.
    #[test]
    fn fast_json_paths_agree_near_every_boundary() {
        let mut state = 0x853C_49E6_748F_EA9Bu64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let digits = |n: usize, next: &mut dyn FnMut() -> u64| -> String {
            (0..n)
                .map(|_| char::from(b'0' + (next() % 10) as u8))
                .collect()
        };
        let mut numbers: Vec<String> = vec![
            "0.000000000000000".into(),
            "0.0000000000000000".into(),
            "0.00000000000000000".into(),
            "0.000000000000000000".into(),
            "9.999999999999999999".into(),
            "9.9999999999999999999".into(),
            "0.9999999999999999999".into(),
            "1.8446744073709551615".into(),
            "9.007199254740993".into(),
            "9.0071992547409935".into(),
            "0.30000000000000004".into(),
            "1.000000000000000e5".into(),
            "1.0000000000000000E-5".into(),
            "5.000000000000000000e-324".into(),
            "1.797693134862315700e308".into(),
        ];
        for int in ["0", "1", "9", "12", "1234567", "12345678", "123456789"] {
            for fraction in 0..=25 {
                for exp in ["", "e5", "E-7", "e+22", "e-300", "e0123"] {
                    for _ in 0..2 {
                        let mut t = int.to_string();
                        if fraction > 0 {
                            t += ".";
                            // Sometimes leading zeros, as small magnitudes have them.
                            let zeros = (next() % 4) as usize * (next() % 2) as usize;
                            t += &"0".repeat(zeros.min(fraction - 1));
                            t += &digits(fraction - zeros.min(fraction - 1), &mut next);
                        }
                        t += exp;
                        numbers.push(t);
                    }
                }
            }
        }
        let s = schema(3);
        let bits = |v: &[f64]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
        let mut checked = 0;
        for n in &numbers {
            for t in [n.clone(), format!("-{n}")] {
                let want: f64 = t.parse().unwrap();
                if !want.is_finite() {
                    continue;
                }
                // The number first, in the middle and last of the row, and as y; what follows
                // it in the same word varies.
                for pad in 0..=PAD.len() {
                    let msg = format!(r#"{{"rows": [[{t},{t}, {t}]], "y": [{t}]}}{}"#, &PAD[..pad]);
                    let (mut x, mut y) = (vec![], vec![]);
                    assert_eq!(
                        fast_json::decode(msg.as_bytes(), 3, &mut x, &mut y),
                        Some(1),
                        "{msg}"
                    );
                    assert_eq!(bits(&x), vec![want.to_bits(); 3], "{msg}");
                    assert_eq!(bits(&y), vec![want.to_bits()], "{msg}");
                    let (mut xs, mut ys) = (vec![], vec![]);
                    decode_json_serde(msg.as_bytes(), &s, &mut xs, &mut ys).unwrap();
                    assert_eq!((bits(&xs), bits(&ys)), (bits(&x), bits(&y)), "{msg}");
                    checked += 1;
                }
            }
        }
        assert!(checked > 200_000, "{checked}");
        // Not JSON numbers, however much room follows them: declined.
        for bad in [
            "01.5",
            "-01.5",
            "1.",
            "-.5",
            ".5",
            "1.e5",
            "1.5e",
            "1.5e+",
            "1.5.5",
            "1.5e5.5",
            "1.234567890123456.",
            "1.2345678901234567-",
            "--1.5",
            "1.23456789012345678x",
        ] {
            let msg = format!(r#"{{"x": [{bad}, 1, 2], "y": 0}}{PAD}"#);
            let (mut x, mut y) = (vec![], vec![]);
            assert_eq!(
                fast_json::decode(msg.as_bytes(), 3, &mut x, &mut y),
                None,
                "{bad}"
            );
        }
    }

    /// Eisel-Lemire on the gathered digits against Rust's own correctly rounded parser, over
    /// every exponent it takes and 1 to 19 significant digits (ties, 2^53 +- 1, all nines),
    /// written with the point at every place and with an exponent.
    #[test]
    fn fast_json_numbers_round_like_std() {
        let mut state = 0x2545_F491_4F6C_DD1Du64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut mantissas: Vec<u64> = vec![
            1,
            9_007_199_254_740_991,
            9_007_199_254_740_992,
            9_007_199_254_740_993,
            9_999_999_999_999_999_999,
            10_000_000_000_000_000_000 - 1,
            12_345_678_901_234_567,
            18_014_398_509_481_985,
            4_503_599_627_370_497,
        ];
        for digits in 1..=19u32 {
            for _ in 0..300 {
                let lo = 10u64.pow(digits - 1);
                mantissas.push(lo + next() % (lo * 9));
            }
        }
        let mut checked = 0;
        for &m in &mantissas {
            for q in -40..=60i64 {
                let text = m.to_string();
                let mut forms = vec![format!("{m}e{q}"), format!("-{m}E{q}")];
                // The same value with the point inside the digits.
                let point = text.len() as i64 + q;
                if q < 0 && point > 0 {
                    let (a, b) = text.split_at(point as usize);
                    forms.push(format!("{a}.{b}"));
                } else if q < 0 && point > -5 {
                    forms.push(format!("0.{}{text}", "0".repeat((-point) as usize)));
                }
                for t in forms {
                    let want: f64 = t.parse().unwrap();
                    // At the end of the message (byte at a time) and with room after it.
                    for pad in ["", PAD] {
                        let (mut x, mut y) = (vec![], vec![]);
                        let msg = format!(r#"{{"x": [{t}], "y": 0}}{pad}"#);
                        assert_eq!(
                            fast_json::decode(msg.as_bytes(), 1, &mut x, &mut y),
                            Some(1)
                        );
                        assert_eq!(x[0].to_bits(), want.to_bits(), "{t}");
                        checked += 1;
                    }
                }
            }
        }
        assert!(checked > 2_000_000, "{checked}");
    }

    #[test]
    fn json_encoders_decode_back() {
        let x = [1.0, 2.0, 3.0, 4.0];
        let y = [5.0, 6.0];
        let mut buf = vec![];
        encode_json(&x, &y, 2, &mut buf);
        assert_eq!(dec(&buf, &schema(2)).unwrap(), (x.to_vec(), y.to_vec()));
        encode_json(&x[..2], &y[..1], 2, &mut buf);
        assert_eq!(
            dec(&buf, &schema(2)).unwrap(),
            (x[..2].to_vec(), y[..1].to_vec())
        );
        let names = vec!["a".to_string(), "b".to_string()];
        encode_json_named(&names, &x[..2], 0.5, &mut buf);
        let fields = numeric(&["a", "b"]);
        let named = named(&fields);
        assert_eq!(dec(&buf, &named).unwrap(), (vec![1.0, 2.0], vec![0.5]));
    }
}

/// Schema'd values through the field mapping: schema evolution by name.
#[cfg(test)]
mod schemad_tests {
    use super::*;
    use ravel_core::fields::{Field, Fields, Missing};

    /// A later schema of the topic: `rooms` gone, `sqft` widened to a long, fields reordered.
    const V3: &str = r#"{"type": "record", "name": "Sale", "fields": [
        {"name": "sqft", "type": "long"}, {"name": "price", "type": "double"}]}"#;

    fn datum() -> Vec<u8> {
        use apache_avro::types::Value as A;
        let schema = apache_avro::Schema::parse_str(V3).unwrap();
        apache_avro::writer::datum::GenericDatumWriter::builder(&schema)
            .build()
            .unwrap()
            .write_value_to_vec(A::Record(vec![
                ("sqft".into(), A::Long(750)),
                ("price".into(), A::Double(2.5)),
            ]))
            .unwrap()
    }

    fn decode_with(missing: Missing) -> Result<(Vec<f64>, Vec<f64>, Tally), Rejection> {
        let wire = crate::codec::schemad::Wire::plain(apache_avro::Schema::parse_str(V3).unwrap());
        let fields = Fields::new(vec![
            Field::numeric("sqft"),
            Field {
                missing,
                ..Field::numeric("rooms")
            },
        ])
        .unwrap();
        let schema = Schema {
            p: fields.p(),
            fields: Some(&fields),
            target: Some("price"),
            skip_missing_target: false,
            classification: false,
            unlabelled: false,
            wire: Some(&wire),
            schema_header: None,
            plan: None,
        };
        let (mut x, mut y, mut t) = (vec![], vec![], Tally::default());
        decode_tallied(&datum(), &schema, &mut x, &mut y, &mut t).map(|_| (x, y, t))
    }

    #[test]
    fn a_mapped_field_a_new_schema_drops_follows_the_missing_policy() {
        // indicator: rooms 0 and its indicator 1; the widened sqft read as before.
        let (x, y, _) = decode_with(Missing::Indicator).unwrap();
        assert_eq!((x, y), (vec![750.0, 0.0, 1.0], vec![2.5]));
        let (x, y, t) = decode_with(Missing::SkipRow).unwrap();
        assert!(x.is_empty() && y.is_empty());
        assert_eq!(t.skipped_rows, 1);
        let e = decode_with(Missing::Reject).unwrap_err();
        assert_eq!(e.reason, Reason::MissingFeature, "{e:?}");
        assert!(e.message.contains("rooms"), "{e:?}");
    }
}

/// The Avro hot path (`crate::codec::schemad::avro::pick`) against the tree it skips: the same rows,
/// tallies and refusals for every kind of field, nullable and nested records, absent fields
/// and values a field refuses.
#[cfg(test)]
mod picked_tests {
    use super::*;
    use apache_avro::types::Value as A;
    use ravel_core::fields::{Field, Fields, Kind, Missing};

    const SCHEMA: &str = r#"{"type": "record", "name": "Sale", "fields": [
        {"name": "id", "type": "string"},
        {"name": "sqft", "type": "double"},
        {"name": "rooms", "type": ["null", "int"]},
        {"name": "ratio", "type": "float"},
        {"name": "garden", "type": "boolean"},
        {"name": "region", "type": ["null", "string"]},
        {"name": "when", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "user", "type": ["null", {"type": "record", "name": "User", "fields": [
            {"name": "age", "type": ["null", "long"]},
            {"name": "home", "type": {"type": "record", "name": "Home", "fields": [
                {"name": "floor", "type": "int"}, {"name": "note", "type": "string"}]}}]}]},
        {"name": "price", "type": ["null", "double"]}
    ]}"#;

    fn fields(missing: Missing) -> Fields {
        let with = |f: Field| Field { missing, ..f };
        Fields::new(vec![
            with(Field::numeric("sqft")),
            with(Field::numeric("rooms")),
            with(Field::numeric("ratio")),
            with(Field::numeric("garden")),
            with(Field {
                kind: Kind::Categorical {
                    levels: vec!["north".into(), "south".into()],
                },
                ..Field::numeric("region")
            }),
            with(Field::numeric("when")),
            with(Field::numeric("user.age")),
            with(Field::numeric("user.home.floor")),
            // A field no schema has: missing in every record (skipped or indicated; refused
            // under `reject`, which the refused records below cover already).
            Field {
                missing: Missing::Indicator,
                ..Field::numeric("user.shoe")
            },
        ])
        .unwrap()
    }

    /// Record `i` of a deterministic mix: nulls, NaN, absent users, every region.
    fn record(i: u64) -> A {
        let some = |v: A, null: bool| {
            if null {
                A::Union(0, Box::new(A::Null))
            } else {
                A::Union(1, Box::new(v))
            }
        };
        let user = A::Record(vec![
            (
                "age".into(),
                some(A::Long(20 + i as i64 % 50), i.is_multiple_of(7)),
            ),
            (
                "home".into(),
                A::Record(vec![
                    ("floor".into(), A::Int((i % 9) as i32)),
                    ("note".into(), A::String(format!("n{i}"))),
                ]),
            ),
        ]);
        A::Record(vec![
            ("id".into(), A::String(format!("sale-{i}"))),
            ("sqft".into(), A::Double(500.0 + 3.25 * i as f64)),
            (
                "rooms".into(),
                some(A::Int((i % 5) as i32), i.is_multiple_of(4)),
            ),
            (
                "ratio".into(),
                A::Float(if i % 97 == 5 {
                    f32::NAN
                } else {
                    i as f32 / 8.0
                }),
            ),
            ("garden".into(), A::Boolean(i.is_multiple_of(2))),
            (
                "region".into(),
                some(
                    A::String(["north", "south", "east"][i as usize % 3].into()),
                    i.is_multiple_of(11),
                ),
            ),
            (
                "when".into(),
                A::TimestampMillis(1_700_000_000_000 + i as i64),
            ),
            ("user".into(), some(user, i.is_multiple_of(13))),
            (
                "price".into(),
                some(A::Double(i as f64 * 0.5), i.is_multiple_of(29)),
            ),
        ])
    }

    type Decoded = Result<(Vec<f64>, Vec<f64>, Tally), Rejection>;

    /// Through `decode_tallied` (which picks) and through the tree alone.
    fn both(
        wire: &crate::codec::schemad::Wire,
        fields: &Fields,
        bytes: &[u8],
    ) -> (Decoded, Decoded) {
        let schema = Schema {
            p: fields.p(),
            fields: Some(fields),
            target: Some("price"),
            skip_missing_target: true,
            classification: false,
            unlabelled: false,
            wire: Some(wire),
            schema_header: None,
            plan: None,
        };
        let (mut x, mut y, mut t) = (vec![], vec![], Tally::default());
        let picked = decode_tallied(bytes, &schema, &mut x, &mut y, &mut t).map(|_| (x, y, t));
        let (mut x, mut y, mut t) = (vec![], vec![], Tally::default());
        let tree = match wire.decode(bytes, None) {
            Ok(crate::codec::schemad::Record::Tree(serde_json::Value::Object(obj))) => {
                events::decode(&obj, &schema, fields, &mut x, &mut y, &mut t)
                    .and_then(|rows| validate(&schema, &x, &y).map(|_| rows))
                    .map(|_| (x, y, t))
            }
            other => panic!("{other:?}"),
        };
        (picked, tree)
    }

    #[test]
    fn picked_fields_read_as_the_tree_does() {
        let avro = apache_avro::Schema::parse_str(SCHEMA).unwrap();
        assert!(crate::codec::schemad::avro::pickable(&avro));
        let writer = apache_avro::writer::datum::GenericDatumWriter::builder(&avro)
            .build()
            .unwrap();
        for missing in [Missing::Indicator, Missing::SkipRow, Missing::Reject] {
            let wire = crate::codec::schemad::Wire::plain(avro.clone());
            let fields = fields(missing);
            let (mut read, mut refused) = (0, 0);
            for i in 0..400 {
                let bytes = writer.write_value_to_vec(record(i)).unwrap();
                // The hot path does read this datum (it is not left to the tree).
                assert!(
                    wire.locate(&bytes, None)
                        .unwrap()
                        .pick(&fields, "price")
                        .is_some(),
                    "{i}"
                );
                let (picked, tree) = both(&wire, &fields, &bytes);
                assert_eq!(picked, tree, "record {i}, missing = {missing:?}");
                if picked.is_ok() {
                    read += 1;
                } else {
                    refused += 1;
                }
            }
            // Both outcomes were exercised.
            assert!(
                read > 0 && refused > 0,
                "{missing:?}: {read} read, {refused} refused"
            );
        }
    }

    #[test]
    fn schemas_pick_cannot_read_exactly_take_the_tree() {
        let enums = r#"{"type": "record", "name": "R", "fields": [
            {"name": "e", "type": {"type": "enum", "name": "E", "symbols": ["a"]}}]}"#;
        let arrays = r#"{"type": "record", "name": "R", "fields": [
            {"name": "tags", "type": {"type": "array", "items": "string"}}]}"#;
        let batch = r#"{"type": "record", "name": "R", "fields": [
            {"name": "columns", "type": "string"}]}"#;
        for text in [enums, arrays, batch, r#""double""#] {
            let schema = apache_avro::Schema::parse_str(text).unwrap();
            assert!(!crate::codec::schemad::avro::pickable(&schema), "{text}");
        }
        // A datum cut short is not picked: the tree says what is wrong with it.
        let avro = apache_avro::Schema::parse_str(SCHEMA).unwrap();
        let bytes = apache_avro::writer::datum::GenericDatumWriter::builder(&avro)
            .build()
            .unwrap()
            .write_value_to_vec(record(1))
            .unwrap();
        let wire = crate::codec::schemad::Wire::plain(avro);
        let fields = fields(Missing::Indicator);
        let cut = &bytes[..bytes.len() - 3];
        assert!(
            wire.locate(cut, None)
                .unwrap()
                .pick(&fields, "price")
                .is_none()
        );
        let mut longer = bytes.clone();
        longer.push(1);
        assert!(
            wire.locate(&longer, None)
                .unwrap()
                .pick(&fields, "price")
                .is_none()
        );
    }
}

/// The Protobuf plan (`crate::codec::schemad::protobuf::Plan`) against the tree it skips: each
/// mapped field's value, the target's and the unused count as `events` finds them in the
/// message's named fields.
#[cfg(test)]
mod picked_protobuf_tests {
    use crate::codec::schemad::protobuf::{Messages, Plan, to_json};
    use prost_reflect::{DynamicMessage, Value as P};
    use ravel_core::fields::{Field, Fields, Kind, Missing};

    const SALE: &str = r#"syntax = "proto3";
        package shop;
        enum Region { NORTH = 0; SOUTH = 1; EAST = 2; }
        message Sale {
          double price = 1;
          int64 sqft = 2;
          optional int32 rooms = 3;
          float ratio = 4;
          bool garden = 5;
          Region region = 6;
          User user = 7;
          repeated string tags = 8;
          map<string, double> extras = 9;
          string id = 10;
          message User { optional int64 age = 1; Home home = 2; repeated int32 visits = 3; }
          message Home { int32 floor = 1; }
        }"#;

    fn fields() -> Fields {
        let named = |n: &str| Field {
            missing: Missing::Indicator,
            ..Field::numeric(n)
        };
        Fields::new(vec![
            named("sqft"),
            named("rooms"),
            named("ratio"),
            named("garden"),
            Field {
                kind: Kind::Categorical {
                    levels: vec!["NORTH".into(), "SOUTH".into()],
                },
                ..named("region")
            },
            named("user.age"),
            named("user.home.floor"),
            named("user.shoe"),
            named("user.visits.first"),
            named("sqft.inner"),
        ])
        .unwrap()
    }

    #[test]
    fn planned_fields_are_the_trees() {
        let m = Messages::of_text(SALE);
        let desc = m.message(&[0]).unwrap();
        let fields = fields();
        for target in ["price", "user.age"] {
            let plan = Plan::new(&desc, &fields, target).unwrap();
            for i in 0..200i64 {
                let mut msg = DynamicMessage::new(desc.clone());
                msg.set_field_by_name("price", P::F64(i as f64 / 4.0));
                msg.set_field_by_name("sqft", P::I64(500 + i));
                if i % 3 != 0 {
                    msg.set_field_by_name("rooms", P::I32((i % 5) as i32));
                }
                let ratio = if i % 37 == 3 {
                    f32::NAN
                } else {
                    i as f32 / 8.0
                };
                msg.set_field_by_name("ratio", P::F32(ratio));
                msg.set_field_by_name("garden", P::Bool(i % 2 == 0));
                msg.set_field_by_name("region", P::EnumNumber((i % 4) as i32));
                if i % 5 != 0 {
                    let user = desc.get_field_by_name("user").unwrap();
                    let prost_reflect::Kind::Message(ud) = user.kind() else {
                        unreachable!()
                    };
                    let mut u = DynamicMessage::new(ud.clone());
                    if i % 7 != 0 {
                        u.set_field_by_name("age", P::I64(20 + i % 40));
                    }
                    if i % 2 == 1 {
                        let home = ud.get_field_by_name("home").unwrap();
                        let prost_reflect::Kind::Message(hd) = home.kind() else {
                            unreachable!()
                        };
                        let mut h = DynamicMessage::new(hd);
                        h.set_field_by_name("floor", P::I32((i % 9) as i32));
                        u.set_field_by_name("home", P::Message(h));
                    }
                    msg.set_field_by_name("user", P::Message(u));
                }
                msg.set_field_by_name("tags", P::List(vec![P::String(format!("t{i}"))]));
                msg.set_field_by_name("id", P::String(format!("sale-{i}")));
                // Decoded from its bytes, as the service meets it.
                let bytes = prost_reflect::prost::Message::encode_to_vec(&msg);
                let msg = DynamicMessage::decode(desc.clone(), bytes.as_slice()).unwrap();
                let tree = to_json(&msg);
                let obj = tree.as_object().unwrap();
                let picked = plan.pick(&msg);
                for (f, field) in fields.fields().iter().enumerate() {
                    assert_eq!(
                        picked.values[f].as_ref(),
                        crate::dotted::lookup(obj, &field.name),
                        "message {i}, field {}",
                        field.name
                    );
                }
                assert_eq!(
                    picked.label.as_ref(),
                    crate::dotted::lookup(obj, target),
                    "{i}"
                );
                let unused = obj
                    .keys()
                    .filter(|k| {
                        !fields.uses(k) && *k != target && !target.starts_with(&format!("{k}."))
                    })
                    .count() as u64;
                assert_eq!(picked.unused, unused, "{i}");
            }
        }
        // A path through a map, and a `columns` field: the tree reads those.
        let extras = Fields::new(vec![Field::numeric("extras.a")]).unwrap();
        assert!(Plan::new(&desc, &extras, "price").is_none());
        let batch = Messages::of_text(
            "syntax = \"proto3\"; message B { string columns = 1; double y = 2; }",
        );
        let y = Fields::new(vec![Field::numeric("y")]).unwrap();
        assert!(Plan::new(&batch.message(&[0]).unwrap(), &y, "y").is_none());
    }
}
