//! Named JSON messages through the stream's field mapping (`ravel_core::fields`): named rows
//! (`{"features": {...}, "y": v}`), named mini-batches (`{"columns": [...], "rows": [...]}`)
//! and, on streams that declare a `target`, events (any JSON object, fields found by name or
//! dotted path). Kept apart from `format`, whose positional shapes never allocate per value,
//! because here every message is parsed into a tree first: keys are looked up by name.
//!
//! Rules, the same for every shape:
//! - a field is found by its declared name, or by a dotted path into nested objects
//!   (`user.age` is `{"user": {"age": 41}}` or a key literally named `user.age`);
//! - keys the stream does not use are ignored and counted (`Tally::ignored_fields`);
//! - a missing value (absent, null) follows the field's policy: the message is refused
//!   (`missing_feature`, naming the field), the row is skipped (`Tally::skipped_rows`), or
//!   the indicator column is set;
//! - a value of the wrong type (text in a numeric field, an object or a list where one value
//!   belongs), a key given twice at any depth, nesting beyond serde_json's limit (128) refuse
//!   the whole message: nothing of it is applied.

use super::schema::Schema;
use crate::dotted::lookup;
use crate::reason::{Reason, Rejection, counted, reject};
use ravel_core::fields::{Fields, Refusal, Value as Cell};
use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};
use std::fmt;

/// One sampled event: which declared fields (in declaration order) and whether the target
/// were present (not absent, not null), and its keys as dotted paths.
#[derive(Debug, Clone, PartialEq)]
pub struct Presence {
    pub fields: Vec<bool>,
    pub target: bool,
    pub keys: Vec<String>,
}

/// What a message's rows left aside without refusing it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    /// Keys (of events, named rows or a named batch's columns) the stream does not use.
    pub ignored_fields: u64,
    /// Rows left out under `missing = "skip_row"` (a feature's value missing).
    pub skipped_rows: u64,
    /// Rows left out because their target was absent or null (under any `missing` but
    /// `reject`, which refuses the message).
    pub without_target: u64,
    /// JSON events read as a tree because the fast path (`super::fast_events`) left them
    /// there: refused ones (the tree words the refusal), keys with escapes, a key given
    /// twice, nesting beyond its depth.
    pub events_by_tree: u64,
}

impl Tally {
    /// Adds another message's counts.
    pub fn add(&mut self, other: Tally) {
        self.ignored_fields += other.ignored_fields;
        self.skipped_rows += other.skipped_rows;
        self.without_target += other.without_target;
        self.events_by_tree += other.events_by_tree;
    }
}

/// A JSON value parsed by serde_json that refuses a key given twice in one object (serde_json
/// keeps the last, which would make the row depend on the writer's key order).
struct Strict(Value);

impl<'de> Deserialize<'de> for Strict {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(StrictVisitor)
    }
}

struct StrictVisitor;

impl<'de> Visitor<'de> for StrictVisitor {
    type Value = Strict;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("any JSON value")
    }
    fn visit_bool<E>(self, v: bool) -> Result<Strict, E> {
        Ok(Strict(Value::Bool(v)))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Strict, E> {
        Ok(Strict(Value::from(v)))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Strict, E> {
        Ok(Strict(Value::from(v)))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Strict, E> {
        Ok(Strict(Value::from(v)))
    }
    fn visit_str<E>(self, v: &str) -> Result<Strict, E> {
        Ok(Strict(Value::String(v.to_string())))
    }
    fn visit_string<E>(self, v: String) -> Result<Strict, E> {
        Ok(Strict(Value::String(v)))
    }
    fn visit_unit<E>(self) -> Result<Strict, E> {
        Ok(Strict(Value::Null))
    }
    fn visit_none<E>(self) -> Result<Strict, E> {
        Ok(Strict(Value::Null))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Strict, A::Error> {
        let mut v = Vec::with_capacity(seq.size_hint().unwrap_or(0).min(4096));
        while let Some(Strict(e)) = seq.next_element()? {
            v.push(e);
        }
        Ok(Strict(Value::Array(v)))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Strict, A::Error> {
        let mut m = Map::new();
        while let Some(k) = map.next_key::<String>()? {
            let Strict(v) = map.next_value()?;
            if m.contains_key(&k) {
                return Err(de::Error::custom(format!(
                    "the key \"{k}\" appears twice in one object"
                )));
            }
            m.insert(k, v);
        }
        Ok(Strict(Value::Object(m)))
    }
}

/// The largest message read by name (parsed into a tree first, which takes several times its
/// size in memory); larger ones are refused. Positional and binary messages have no such
/// bound: they are read straight into the rows.
pub const MAX_NAMED_BYTES: usize = 4 << 20;

/// Parses a message as JSON, refusing duplicate keys (and, by serde_json, nesting deeper than
/// 128).
pub fn parse(payload: &[u8]) -> Result<Value, Rejection> {
    if payload.len() > MAX_NAMED_BYTES {
        return reject(
            Reason::Malformed,
            format!(
                "a message of {} bytes is over the {} MiB read by name (named rows, named \
                 mini-batches, events): send smaller messages, or positional or binary \
                 mini-batches",
                payload.len(),
                MAX_NAMED_BYTES >> 20
            ),
        );
    }
    match serde_json::from_slice::<Strict>(payload) {
        Ok(Strict(v)) => Ok(v),
        Err(e) => reject(Reason::Malformed, format!("not valid JSON ({e})")),
    }
}

/// Keys of one event kept for `state::sightings` (dotted paths to its values), and the
/// nesting followed.
const MAX_EVENT_KEYS: usize = 256;
const MAX_KEY_DEPTH: usize = 8;

/// Which declared fields and target an event carries (present and not null), and its keys
/// as dotted paths to its values: one sampled event of `crate::state::sightings`. A named
/// row's fields are those of its `"features"`; a named mini-batch is not sampled (None).
pub fn presence(
    msg: &Map<String, Value>,
    fields: &Fields,
    target: Option<&str>,
) -> Option<Presence> {
    let obj = match (target, msg.get("features")) {
        (Some(_), _) => msg,
        (None, Some(Value::Object(features))) => features,
        (None, _) => return None,
    };
    if target.is_none() && msg.contains_key("columns") {
        return None;
    }
    let carried = |path: &str| lookup(obj, path).is_some_and(|v| !v.is_null());
    let mut keys = Vec::new();
    leaf_paths(obj, "", 0, &mut keys);
    Some(Presence {
        fields: fields.fields().iter().map(|f| carried(&f.name)).collect(),
        target: target.is_some_and(carried),
        keys,
    })
}

/// The dotted paths to the values of `obj` (at most `MAX_EVENT_KEYS`, `MAX_KEY_DEPTH` deep).
fn leaf_paths(obj: &Map<String, Value>, prefix: &str, depth: usize, out: &mut Vec<String>) {
    for (k, v) in obj {
        if out.len() >= MAX_EVENT_KEYS {
            return;
        }
        let path = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        match v {
            Value::Object(inner) if depth + 1 < MAX_KEY_DEPTH && !inner.is_empty() => {
                leaf_paths(inner, &path, depth + 1, out)
            }
            _ => out.push(path),
        }
    }
}

/// Where a row finds its fields: an object (events, named rows) or a named batch's row with
/// its columns' fields.
enum Source<'v> {
    Object(&'v Map<String, Value>),
    /// Each field's value, found already (`crate::codec::schemad::avro::pick`).
    Slots(&'v [Option<Value>]),
    Columns {
        /// The field of each column (None: a column the stream does not use).
        of: &'v [Option<usize>],
        row: &'v [Value],
    },
}

/// What became of one row.
enum Row {
    Placed,
    Skipped,
}

/// Fills `row` (zeroed, the stream's p columns) from `source` through `fields`.
fn fill(fields: &Fields, source: &Source, row: &mut [f64], at: &str) -> Result<Row, Rejection> {
    let mut put = |f: usize, v: Option<&Value>| -> Result<bool, Rejection> {
        let name = &fields.fields()[f].name;
        let placed = match v {
            None | Some(Value::Null) => fields.put(f, Cell::Missing, row),
            Some(Value::Number(n)) => {
                fields.put(f, Cell::Number(n.as_f64().unwrap_or(f64::NAN)), row)
            }
            Some(Value::Bool(b)) => fields.put(f, Cell::Bool(*b), row),
            Some(Value::String(s)) => fields.put(f, Cell::Text(s), row),
            Some(Value::Array(items)) => {
                if !matches!(
                    fields.fields()[f].kind,
                    ravel_core::fields::Kind::Hashed { .. }
                ) {
                    return reject(
                        Reason::FieldType,
                        format!(
                            "{at}feature '{name}' is a list; only a hashed feature takes a list of tokens"
                        ),
                    );
                }
                for item in items {
                    let cell = match item {
                        Value::String(s) => Cell::Text(s),
                        Value::Number(n) => Cell::Number(n.as_f64().unwrap_or(f64::NAN)),
                        Value::Bool(b) => Cell::Bool(*b),
                        _ => {
                            return reject(
                                Reason::FieldType,
                                format!(
                                    "{at}feature '{name}': a hashed feature's list holds strings, numbers or booleans"
                                ),
                            );
                        }
                    };
                    refused(fields.put(f, cell, row), at)?;
                }
                Ok(())
            }
            Some(Value::Object(_)) => {
                return reject(
                    Reason::FieldType,
                    format!(
                        "{at}feature '{name}' is an object, not a value: declare the field inside \
                         it with a dotted path ('{name}.<field>')"
                    ),
                );
            }
        };
        refused(placed, at)
    };
    let mut skipped = false;
    match source {
        Source::Object(obj) => {
            for (f, field) in fields.fields().iter().enumerate() {
                skipped |= !put(f, lookup(obj, &field.name))?;
            }
        }
        Source::Slots(values) => {
            for (f, v) in values.iter().enumerate() {
                skipped |= !put(f, v.as_ref())?;
            }
        }
        Source::Columns { of, row: values } => {
            let mut given = vec![false; fields.fields().len()];
            for (f, v) in of.iter().zip(values.iter()) {
                if let Some(f) = f {
                    given[*f] = true;
                    skipped |= !put(*f, Some(v))?;
                }
            }
            for (f, g) in given.iter().enumerate() {
                if !g {
                    skipped |= !put(f, None)?;
                }
            }
        }
    }
    Ok(if skipped { Row::Skipped } else { Row::Placed })
}

/// A missing field's rejection, naming the keys the stream does not use (a misspelled name
/// is usually among them).
fn with_unused(mut e: Rejection, unused: &[&str]) -> Rejection {
    if e.reason == Reason::MissingFeature && !unused.is_empty() {
        let shown: Vec<&str> = unused.iter().take(5).copied().collect();
        e.message += &format!(
            "; the message has keys the stream does not use: {}",
            shown.join(", ")
        );
    }
    e
}

/// `Ok(true)`: placed; `Ok(false)`: skip the row; a refusal as the message's rejection.
fn refused(r: Result<(), Refusal>, at: &str) -> Result<bool, Rejection> {
    match r {
        Ok(()) => Ok(true),
        Err(Refusal::SkipRow) => Ok(false),
        Err(Refusal::Missing(m)) => reject(Reason::MissingFeature, format!("{at}{m}")),
        Err(Refusal::Wrong(m)) => reject(Reason::FieldType, format!("{at}{m}")),
    }
}

/// A target value: a number (or a boolean as 1 / 0), None when missing.
fn target_value(v: Option<&Value>, name: &str, at: &str) -> Result<Option<f64>, Rejection> {
    match v {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Number(n)) => Ok(n.as_f64()),
        Some(Value::Bool(b)) => Ok(Some(f64::from(u8::from(*b)))),
        Some(other) => reject(
            Reason::FieldType,
            format!(
                "{at}the target '{name}' is {}, not a number",
                kind_of(other)
            ),
        ),
    }
}

fn kind_of(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "text",
        Value::Array(_) => "a list",
        Value::Object(_) => "an object",
    }
}

/// Keys of `obj` no declared field (nor the target) starts with.
fn unused_keys(fields: &Fields, target: Option<&str>, obj: &Map<String, Value>) -> u64 {
    obj.keys()
        .filter(|k| {
            !fields.uses(k) && target.is_none_or(|t| t != *k && !t.starts_with(&format!("{k}.")))
        })
        .count() as u64
}

/// Decodes a named row, a named batch or an event (`schema.fields` is set) into `x` and `y`,
/// counting in `tally` what it left aside. On a rejection some rows may have been appended:
/// the caller truncates (`format::decode_tallied` does, and adds `tally` only on success).
pub fn decode(
    msg: &Map<String, Value>,
    schema: &Schema,
    fields: &Fields,
    x: &mut Vec<f64>,
    y: &mut Vec<f64>,
    tally: &mut Tally,
) -> Result<usize, Rejection> {
    let target = schema.target.unwrap_or("y");
    if msg.contains_key("columns") || (schema.target.is_none() && msg.contains_key("rows")) {
        return batch(msg, schema, fields, x, y, tally);
    }
    let (obj, label, event) = match (schema.target, msg.get("features")) {
        (None, Some(Value::Object(features))) => {
            let extra = msg.keys().filter(|k| *k != "features" && *k != "y").count();
            if extra > 0 {
                return reject(
                    Reason::Malformed,
                    "a named row has \"features\" and \"y\" only (declare target = \"...\" on the \
                     stream to read whole events)",
                );
            }
            (features, msg.get("y"), false)
        }
        (None, Some(_)) => {
            return reject(
                Reason::Malformed,
                "\"features\" must be an object of named values",
            );
        }
        (None, None) => {
            return reject(
                Reason::Malformed,
                "a message needs exactly one of \"x\", \"features\" or \"rows\" (or declare \
                 target = \"...\" on the stream to read whole events)",
            );
        }
        (Some(t), _) => (msg, lookup(msg, t), true),
    };
    let unused = unused_keys(fields, event.then_some(target), obj);
    let refused = |e| {
        let unused: Vec<&str> = obj
            .keys()
            .filter(|k| !fields.uses(k) && (!event || *k != target))
            .map(String::as_str)
            .collect();
        with_unused(e, &unused)
    };
    place(
        &Source::Object(obj),
        label,
        unused,
        refused,
        schema,
        fields,
        x,
        y,
        tally,
    )
}

/// An event whose fields were read straight from a schema'd value (`picked`), exactly as
/// `decode` reads the same event from its tree. A refusal does not name the keys the stream
/// does not use: the caller reads the value again as a tree for that.
pub fn decode_picked(
    picked: &crate::codec::schemad::Picked,
    schema: &Schema,
    fields: &Fields,
    x: &mut Vec<f64>,
    y: &mut Vec<f64>,
    tally: &mut Tally,
) -> Result<usize, Rejection> {
    place(
        &Source::Slots(&picked.values),
        picked.label.as_ref(),
        picked.unused,
        |e| e,
        schema,
        fields,
        x,
        y,
        tally,
    )
}

/// An event's row from `source` and its `label` (the target's value): appended to `x` and
/// `y`, or skipped (counted in `tally`, with the `unused` keys), or refused (a field's refusal
/// through `refused`).
#[allow(clippy::too_many_arguments)]
fn place(
    source: &Source,
    label: Option<&Value>,
    unused: u64,
    refused: impl FnOnce(Rejection) -> Rejection,
    schema: &Schema,
    fields: &Fields,
    x: &mut Vec<f64>,
    y: &mut Vec<f64>,
    tally: &mut Tally,
) -> Result<usize, Rejection> {
    let target = schema.target.unwrap_or("y");
    let start = x.len();
    x.resize(start + fields.p(), 0.0);
    let row = fill(fields, source, &mut x[start..], "").map_err(refused)?;
    tally.ignored_fields += unused;
    let label = if schema.unlabelled {
        Some(f64::NAN)
    } else {
        target_value(label, target, "")?
    };
    let Some(v) = label else {
        x.truncate(start);
        if schema.skip_missing_target {
            tally.without_target += 1;
            return Ok(0);
        }
        return reject(
            Reason::MissingFeature,
            format!("the target '{target}' is missing"),
        );
    };
    if let Row::Skipped = row {
        x.truncate(start);
        tally.skipped_rows += 1;
        return Ok(0);
    }
    y.push(v);
    Ok(1)
}

/// `{"columns": [...], "rows": [[...], ...], "y": [...]}`, or without `y` when the target is
/// one of the columns.
fn batch(
    msg: &Map<String, Value>,
    schema: &Schema,
    fields: &Fields,
    x: &mut Vec<f64>,
    y: &mut Vec<f64>,
    tally: &mut Tally,
) -> Result<usize, Rejection> {
    let p = fields.p();
    let target = schema.target.unwrap_or("y");
    if let Some(k) = msg
        .keys()
        .find(|k| !matches!(k.as_str(), "columns" | "rows" | "y"))
    {
        return reject(
            Reason::Malformed,
            format!("a named mini-batch has \"columns\", \"rows\" and \"y\" only, not \"{k}\""),
        );
    }
    let Some(Value::Array(columns)) = msg.get("columns") else {
        return reject(
            Reason::Malformed,
            "\"columns\" names the columns of \"rows\": a list of names",
        );
    };
    let Some(Value::Array(rows)) = msg.get("rows") else {
        return reject(
            Reason::Malformed,
            "\"columns\" names the columns of \"rows\": a named mini-batch needs both",
        );
    };
    let mut names = Vec::with_capacity(columns.len());
    for c in columns {
        let Value::String(c) = c else {
            return reject(Reason::Malformed, "\"columns\" holds names (strings)");
        };
        if names.contains(&c.as_str()) {
            return reject(Reason::Malformed, format!("\"columns\" names '{c}' twice"));
        }
        names.push(c.as_str());
    }
    let target_column = names.iter().position(|n| *n == target);
    let ys: Option<&Vec<Value>> = match (msg.get("y"), target_column) {
        (Some(Value::Array(v)), None) => Some(v),
        (Some(_), None) => {
            return reject(Reason::Malformed, "a mini-batch needs y as an array");
        }
        (Some(_), Some(_)) => {
            return reject(
                Reason::Malformed,
                format!("the target '{target}' is both a column and \"y\": give it once"),
            );
        }
        (None, Some(_)) => None,
        (None, None) => {
            return reject(
                Reason::MissingFeature,
                format!("the mini-batch has no \"y\" and no column named '{target}' (the target)"),
            );
        }
    };
    if let Some(ys) = ys
        && ys.len() != rows.len()
    {
        return reject(
            Reason::Dimension,
            format!("{} rows but {} values of y", rows.len(), ys.len()),
        );
    }
    let of: Vec<Option<usize>> = names.iter().map(|n| fields.field(n)).collect();
    let unused = of
        .iter()
        .enumerate()
        .filter(|(i, f)| f.is_none() && Some(*i) != target_column)
        .count() as u64;
    let (mut got, mut skipped, mut without_target) = (0, 0, 0);
    x.reserve(rows.len() * p);
    for (i, r) in rows.iter().enumerate() {
        let Value::Array(values) = r else {
            return reject(Reason::Malformed, format!("row {i} is not a list"));
        };
        counted(values.len(), names.len(), || {
            format!(
                "row {i} has {} values, \"columns\" names {}",
                values.len(),
                names.len()
            )
        })?;
        let at = format!("row {i}: ");
        let label = match (ys, target_column) {
            (Some(ys), _) => Some(&ys[i]),
            (None, Some(t)) => Some(&values[t]),
            (None, None) => None,
        };
        let start = x.len();
        x.resize(start + p, 0.0);
        let placed = fill(
            fields,
            &Source::Columns {
                of: &of,
                row: values,
            },
            &mut x[start..],
            &at,
        )
        .map_err(|e| {
            let unused: Vec<&str> = names
                .iter()
                .zip(&of)
                .filter(|(n, f)| f.is_none() && **n != target)
                .map(|(n, _)| *n)
                .collect();
            with_unused(e, &unused)
        })?;
        let v = if schema.unlabelled {
            Some(f64::NAN)
        } else {
            target_value(label, target, &at)?
        };
        match (placed, v) {
            (Row::Placed, Some(v)) => {
                y.push(v);
                got += 1;
            }
            (_, None) if !schema.skip_missing_target => {
                return reject(
                    Reason::MissingFeature,
                    format!("{at}the target '{target}' is missing"),
                );
            }
            (_, None) => {
                x.truncate(start);
                without_target += 1;
            }
            (Row::Skipped, Some(_)) => {
                x.truncate(start);
                skipped += 1;
            }
        }
    }
    tally.ignored_fields += unused * rows.len() as u64;
    tally.skipped_rows += skipped;
    tally.without_target += without_target;
    Ok(got)
}

#[cfg(test)]
mod tests {
    use crate::codec::format::{Reason, Schema, Tally, decode_tallied};
    use ravel_core::fields::{Field, Fields, Kind, Missing};

    fn housing(missing: Missing) -> Fields {
        Fields::new(vec![
            Field {
                missing,
                ..Field::numeric("sqft")
            },
            Field {
                missing,
                ..Field::numeric("user.age")
            },
            Field {
                name: "region".into(),
                kind: Kind::Categorical {
                    levels: vec!["north".into(), "south".into(), "east".into()],
                },
                missing,
            },
        ])
        .unwrap()
    }

    fn events<'a>(fields: &'a Fields, missing: Missing) -> Schema<'a> {
        Schema {
            p: fields.p(),
            fields: Some(fields),
            target: Some("price"),
            skip_missing_target: missing != Missing::Reject,
            classification: false,
            unlabelled: false,
            wire: None,
            schema_header: None,
            plan: None,
        }
    }

    /// Rows, targets and tally, or the rejection's reason and message.
    type Decoded = Result<(Vec<f64>, Vec<f64>, Tally), (Reason, String)>;

    fn dec(msg: &str, s: &Schema) -> Decoded {
        let (mut x, mut y, mut t) = (vec![], vec![], Tally::default());
        match decode_tallied(msg.as_bytes(), s, &mut x, &mut y, &mut t) {
            Ok(_) => Ok((x, y, t)),
            Err(e) => {
                assert!(
                    x.is_empty() && y.is_empty(),
                    "nothing appended on rejection"
                );
                Err((e.reason, e.message))
            }
        }
    }

    #[test]
    fn events_are_read_by_name_and_path_in_any_order() {
        let f = housing(Missing::Reject);
        let s = events(&f, Missing::Reject);
        // Columns: sqft, user.age, region=south, region=east, region=other.
        let (x, y, t) = dec(
            r#"{"id": "e-1", "ts": 17, "region": "east", "user": {"age": 41, "name": "x"},
                "price": 3.5, "sqft": 1200}"#,
            &s,
        )
        .unwrap();
        assert_eq!(x, [1200.0, 41.0, 0.0, 1.0, 0.0]);
        assert_eq!(y, [3.5]);
        assert_eq!(t.ignored_fields, 2, "id and ts");
        // A flat key with the dotted name, a reference level, an undeclared level.
        let (x, _, _) = dec(
            r#"{"user.age": 30, "sqft": 1, "region": "north", "price": 1}"#,
            &s,
        )
        .unwrap();
        assert_eq!(x, [1.0, 30.0, 0.0, 0.0, 0.0]);
        let (x, _, _) = dec(
            r#"{"user": {"age": 30}, "sqft": true, "region": "west", "price": 1}"#,
            &s,
        )
        .unwrap();
        assert_eq!(x, [1.0, 30.0, 0.0, 0.0, 1.0]);
    }

    #[test]
    fn events_to_score_need_no_target_and_their_target_is_not_read() {
        let f = housing(Missing::Reject);
        let s = Schema {
            unlabelled: true,
            ..events(&f, Missing::Reject)
        };
        let (x, y, _) = dec(r#"{"sqft": 1, "user": {"age": 2}, "region": "south"}"#, &s).unwrap();
        assert_eq!(x, [1.0, 2.0, 1.0, 0.0, 0.0]);
        assert!(y[0].is_nan());
        // A target present, even one that is not a number, is not read.
        let (x, _, _) = dec(
            r#"{"sqft": 1, "user": {"age": 2}, "region": "south", "price": "n/a"}"#,
            &s,
        )
        .unwrap();
        assert_eq!(x, [1.0, 2.0, 1.0, 0.0, 0.0]);
        // Features are checked as for the stream.
        let (reason, _) = dec(r#"{"user": {"age": 2}, "region": "south"}"#, &s).unwrap_err();
        assert_eq!(reason, Reason::MissingFeature);
        let (reason, _) = dec(
            r#"{"sqft": "big", "user": {"age": 2}, "region": "south"}"#,
            &s,
        )
        .unwrap_err();
        assert_eq!(reason, Reason::FieldType);
    }

    #[test]
    fn missing_values_follow_the_policy() {
        let msg = r#"{"sqft": null, "user": {}, "region": "south", "price": 2}"#;
        let f = housing(Missing::Reject);
        let (reason, m) = dec(msg, &events(&f, Missing::Reject)).unwrap_err();
        assert_eq!(reason, Reason::MissingFeature);
        assert!(m.contains("'sqft'"), "{m}");
        let f = housing(Missing::SkipRow);
        let (x, y, t) = dec(msg, &events(&f, Missing::SkipRow)).unwrap();
        assert!(x.is_empty() && y.is_empty());
        assert_eq!(t.skipped_rows, 1);
        let f = housing(Missing::Indicator);
        assert_eq!(
            f.columns(),
            [
                "sqft",
                "sqft=missing",
                "user.age",
                "user.age=missing",
                "region=south",
                "region=east",
                "region=other",
                "region=missing"
            ]
        );
        let (x, y, _) = dec(msg, &events(&f, Missing::Indicator)).unwrap();
        assert_eq!(x, [0.0, 1.0, 0.0, 1.0, 1.0, 0.0, 0.0, 0.0]);
        assert_eq!(y, [2.0]);
        // The target missing: refused under reject, skipped otherwise.
        let no_target = r#"{"sqft": 1, "user": {"age": 2}, "region": "south"}"#;
        let f = housing(Missing::Reject);
        let (reason, m) = dec(no_target, &events(&f, Missing::Reject)).unwrap_err();
        assert_eq!(reason, Reason::MissingFeature);
        assert!(m.contains("target 'price'"), "{m}");
        let f = housing(Missing::Indicator);
        let (_, y, t) = dec(no_target, &events(&f, Missing::Indicator)).unwrap();
        assert!(y.is_empty());
        assert_eq!((t.without_target, t.skipped_rows), (1, 0));
    }

    #[test]
    fn named_batches_keep_their_good_rows_and_take_the_target_as_a_column() {
        let f = housing(Missing::SkipRow);
        let s = events(&f, Missing::SkipRow);
        let msg = r#"{"columns": ["region", "price", "user.age", "sqft", "note"],
                      "rows": [["east", 1.5, 40, 100, "a"], ["south", 2.5, null, 200, "b"],
                               ["north", 3.5, 20, 300, "c"]]}"#;
        let (x, y, t) = dec(msg, &s).unwrap();
        assert_eq!(x, [100.0, 40.0, 0.0, 1.0, 0.0, 300.0, 20.0, 0.0, 0.0, 0.0]);
        assert_eq!(y, [1.5, 3.5]);
        assert_eq!(t.skipped_rows, 1);
        assert_eq!(t.ignored_fields, 3, "the note column, on each of 3 rows");
        // A structural fault refuses the whole batch.
        let bad = r#"{"columns": ["region", "price", "user.age", "sqft"],
                      "rows": [["east", 1.5, 40, 100], ["south", 2.5, 200]]}"#;
        assert_eq!(dec(bad, &s).unwrap_err().0, Reason::Dimension);
    }

    #[test]
    fn bad_input_is_refused_whole_with_a_reason() {
        let f = housing(Missing::Indicator);
        let s = events(&f, Missing::Indicator);
        let deep = format!("{}1{}", "[".repeat(1000), "]".repeat(1000));
        let huge = format!(
            r#"{{"sqft": 1, "user": {{"age": 1}}, "region": "east", "price": 1, "note": "{}"}}"#,
            "x".repeat(10 << 20)
        );
        let cases: [(&str, Reason, &str); 8] = [
            (&huge, Reason::Malformed, "over the 4 MiB read by name"),
            (
                r#"{"sqft": "big", "user": {"age": 1}, "region": "east", "price": 1}"#,
                Reason::FieldType,
                "holds text",
            ),
            (
                r#"{"sqft": {"v": 1}, "user": {"age": 1}, "region": "east", "price": 1}"#,
                Reason::FieldType,
                "is an object",
            ),
            (
                r#"{"sqft": [1, 2], "user": {"age": 1}, "region": "east", "price": 1}"#,
                Reason::FieldType,
                "is a list",
            ),
            (
                r#"{"sqft": 1, "sqft": 2, "user": {"age": 1}, "region": "east", "price": 1}"#,
                Reason::Malformed,
                "appears twice",
            ),
            (
                r#"{"sqft": 1, "user": {"age": 1}, "region": "east", "price": "3"}"#,
                Reason::FieldType,
                "target 'price' is text",
            ),
            (&deep, Reason::Malformed, "recursion limit"),
            ("[1, 2]", Reason::Malformed, "JSON object"),
        ];
        for (msg, reason, needle) in cases {
            let (r, m) = dec(msg, &s).unwrap_err();
            assert_eq!(r, reason, "{msg:.80}: {m}");
            assert!(m.contains(needle), "{msg:.80}: {m}");
        }
    }

    #[test]
    fn presence_names_the_fields_and_target_an_event_carries_and_its_keys() {
        let f = housing(Missing::Indicator);
        let msg = |text: &str| match super::parse(text.as_bytes()).unwrap() {
            serde_json::Value::Object(m) => m,
            _ => unreachable!(),
        };
        let p = super::presence(
            &msg(r#"{"sqft": 1, "user": {"agee": 3, "name": null}, "region": null, "price": 2}"#),
            &f,
            Some("price"),
        )
        .unwrap();
        assert_eq!(p.fields, [true, false, false]);
        assert!(p.target);
        let mut keys = p.keys.clone();
        keys.sort();
        assert_eq!(keys, ["price", "region", "sqft", "user.agee", "user.name"]);
        let p = super::presence(&msg(r#"{"sqft": 1, "delivery": 2}"#), &f, Some("price")).unwrap();
        assert!(!p.target);
        // Named rows: the fields of "features"; named mini-batches are not sampled.
        let p = super::presence(
            &msg(r#"{"features": {"region": "east"}, "y": 1}"#),
            &f,
            None,
        )
        .unwrap();
        assert_eq!(p.fields, [false, false, true]);
        assert!(
            super::presence(
                &msg(r#"{"columns": ["sqft"], "rows": [[1]], "y": [1]}"#),
                &f,
                None
            )
            .is_none()
        );
    }

    #[test]
    fn hashed_fields_take_a_token_or_a_list() {
        let f = Fields::new(vec![Field {
            name: "tags".into(),
            kind: Kind::Hashed { buckets: 16 },
            missing: Missing::Reject,
        }])
        .unwrap();
        let s = events(&f, Missing::Reject);
        let (x, _, _) = dec(r#"{"tags": ["a", "b", "a"], "price": 1}"#, &s).unwrap();
        let mut want = vec![0.0; 16];
        for t in ["a", "b", "a"] {
            let (b, sign) = ravel_core::fields::bucket(t, 16);
            want[b] += sign;
        }
        assert_eq!(x, want);
    }
}
