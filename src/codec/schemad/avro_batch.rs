//! Avro records of many messages read together (issue 48): the datums of one ingest batch
//! that share a writer schema are decoded by arrow-avro into one Arrow record batch, through a
//! reader schema projected to the stream's mapped fields (its target and features, dotted
//! paths into nested records), and each row's mapped values are then read from the batch's
//! columns into a `Picked`, exactly as `avro::pick` reads them from one datum, or, for plain
//! fields whose values are all finite numbers, straight into the row (`Early::Row`).
//!
//! Only schemas on which both readers agree byte for byte take this way: records at every
//! depth of numbers (ints, longs, floats, doubles, the date and time logical types), strings
//! and nulls; no unions, not even nullable ones (arrow-avro reads a bad branch index as the
//! value's, apache-avro refuses it), no booleans (arrow-avro reads any non-zero byte as true,
//! apache-avro refuses all but 0 and 1). Strings are decoded even when
//! unmapped (arrow-avro checks their UTF-8 when the batch is built; skipped, they would not be
//! checked), numbers that are not mapped are skipped. Every other schema, a value framed in a
//! header, and a datum arrow-avro refuses in any way (a bad datum, one that does not fill its
//! bytes, a batch whose strings are not UTF-8) are read one by one as before
//! (`super::Located`), so refusals and their reasons stay apache-avro's. Memory: the window of
//! `ingest::gather` (1 MiB of payload) bounds a batch, `MAX_BATCH_ROWS` one record batch.

use super::avro::{Entry, Level, Plan, float, scalar};
use super::{AvroSchema, Early, Picked};
use apache_avro::Schema;
use arrow_array::cast::AsArray;
use arrow_array::types::{
    Date32Type, Float32Type, Float64Type, Int32Type, Int64Type, Time32MillisecondType,
    Time64MicrosecondType, TimestampMicrosecondType, TimestampMillisecondType,
    TimestampNanosecondType,
};
use arrow_array::{Array, ArrayRef, RecordBatch, StringArray, StructArray};
use arrow_avro::reader::{Decoder, DecoderMode, ReaderBuilder};
use arrow_avro::schema::{AvroSchema as ArrowAvroSchema, Fingerprint, FingerprintAlgorithm};
use arrow_buffer::NullBuffer;
use arrow_schema::{DataType, TimeUnit};
use serde_json::Value;

/// Rows one arrow-avro batch holds: larger groups are decoded in several.
const MAX_BATCH_ROWS: usize = 4096;

/// Where a mapped path's value goes in the `Picked`.
#[derive(Clone, Copy)]
enum Slot {
    Field(usize),
    Target,
}

/// One writer schema's decoder, projected to a stream's plan.
pub struct Projected {
    writer: String,
    reader: String,
    /// None after an error (its rows are unknown): made again before the next batch.
    decoder: Option<Decoder>,
    /// The mapped paths the writer schema has, as column indexes from the batch's top (the
    /// reader schema's field order).
    leaves: Vec<(Slot, Vec<usize>)>,
    fields: usize,
    /// Top-level fields of the writer schema the plan does not name.
    unused: u64,
    /// `pick`'s `rows`.
    rows: bool,
}

impl Projected {
    /// The projection of `schema` to `plan`, or None when the schema is not one both readers
    /// read alike (see the module's comment) or arrow-avro cannot read it.
    pub fn new(schema: &AvroSchema, plan: &Plan) -> Option<Projected> {
        if !schema.pickable || !alike(&schema.schema) {
            return None;
        }
        let Schema::Record(r) = &schema.schema else {
            return None;
        };
        let json = serde_json::to_value(&schema.schema).ok()?;
        let mut leaves = Vec::new();
        let reader = prune(
            &schema.schema,
            &json,
            &plan.root,
            &mut Vec::new(),
            &mut leaves,
        )??;
        let unused = r
            .fields
            .iter()
            .filter(|f| !plan.root.0.contains_key(&f.name))
            .count() as u64;
        let mut p = Projected {
            writer: json.to_string(),
            reader: reader.to_string(),
            decoder: None,
            leaves,
            fields: plan.fields,
            unused,
            rows: false,
        };
        p.decoder = Some(p.build()?);
        Some(p)
    }

    fn build(&self) -> Option<Decoder> {
        let mut store = arrow_avro::schema::SchemaStore::new_with_type(FingerprintAlgorithm::Id);
        store
            .set(
                Fingerprint::Id(0),
                ArrowAvroSchema::new(self.writer.clone()),
            )
            .ok()?;
        ReaderBuilder::new()
            .with_writer_schema_store(store)
            .with_active_fingerprint(Fingerprint::Id(0))
            .with_reader_schema(ArrowAvroSchema::new(self.reader.clone()))
            .with_decoder_mode(DecoderMode::UnframedDatum)
            .with_batch_size(MAX_BATCH_ROWS)
            .build_decoder()
            .ok()
    }

    /// The mapped values of each datum of `bodies` (each must fill its bytes exactly); None
    /// for a datum arrow-avro refuses (it is then read alone, by apache-avro, which says
    /// why). A refused datum may leave part of a row in the decoder: the decoder is made
    /// again and the datums before it since the last flush decoded again.
    ///
    /// `rows`: the stream's fields are plain (`Fields::is_plain`) and its rows labelled: a
    /// datum whose mapped values are all finite numbers then comes as its row
    /// (`Early::Row`), without the values one by one.
    pub fn pick(&mut self, bodies: &[&[u8]], rows: bool) -> Vec<Option<Early>> {
        self.rows = rows;
        let mut out = Vec::with_capacity(bodies.len());
        // The datums in the decoder: bodies[start..i].
        let mut start = 0;
        for (i, body) in bodies.iter().enumerate() {
            if i - start == MAX_BATCH_ROWS {
                self.flush(&bodies[start..i], &mut out);
                start = i;
            }
            let taken = self
                .decoder()
                .is_some_and(|d| matches!(d.decode(body), Ok(n) if n == body.len()));
            if !taken {
                self.decoder = None;
                self.again(&bodies[start..i], &mut out);
                out.push(None);
                start = i + 1;
            }
        }
        self.flush(&bodies[start..], &mut out);
        out
    }

    /// The decoder, made again if an error dropped it (None: arrow-avro cannot make it).
    fn decoder(&mut self) -> Option<&mut Decoder> {
        if self.decoder.is_none() {
            self.decoder = self.build();
        }
        self.decoder.as_mut()
    }

    /// Decodes `bodies` (taken before) into a fresh decoder and flushes them.
    fn again(&mut self, bodies: &[&[u8]], out: &mut Vec<Option<Early>>) {
        if bodies.is_empty() {
            return;
        }
        let taken = self.decoder().is_some_and(|d| {
            bodies
                .iter()
                .all(|b| matches!(d.decode(b), Ok(n) if n == b.len()))
        });
        if taken {
            self.flush(bodies, out);
        } else {
            self.decoder = None;
            out.extend(bodies.iter().map(|_| None));
        }
    }

    /// The rows of `bodies`, the datums in the decoder, read from its batch (None each when
    /// the batch is refused: a string that is not UTF-8).
    fn flush(&mut self, bodies: &[&[u8]], out: &mut Vec<Option<Early>>) {
        if bodies.is_empty() {
            return;
        }
        let at = out.len();
        let read = match self.decoder.as_mut().map(Decoder::flush) {
            Some(Ok(Some(batch))) if batch.num_rows() == bodies.len() => {
                self.read(&batch, out).is_some()
            }
            _ => false,
        };
        if !read {
            self.decoder = None;
            out.truncate(at);
            out.extend(bodies.iter().map(|_| None));
        }
    }

    /// Each row's mapped values, from the batch's columns.
    fn read(&self, batch: &RecordBatch, out: &mut Vec<Option<Early>>) -> Option<()> {
        let mut leaves = Vec::with_capacity(self.leaves.len());
        for (slot, path) in &self.leaves {
            leaves.push((*slot, Leaf::find(batch, path)?));
        }
        let plain = self.plain(&leaves);
        let mut row = Vec::new();
        for r in 0..batch.num_rows() {
            if let Some((columns, target)) = &plain {
                row.clear();
                row.extend(columns.iter().map(|c| c.number(r)));
                let y = target.number(r);
                if y.is_finite() && row.iter().all(|v| v.is_finite()) {
                    out.push(Some(Early::Row {
                        x: row.clone(),
                        y,
                        unused: self.unused,
                    }));
                    continue;
                }
            }
            let mut p = Picked {
                values: vec![None; self.fields],
                label: None,
                unused: self.unused,
            };
            for (slot, leaf) in &leaves {
                let v = leaf.value(r);
                match slot {
                    Slot::Field(i) => p.values[*i] = v,
                    Slot::Target => p.label = v,
                }
            }
            out.push(Some(Early::Picked(p)));
        }
        Some(())
    }

    /// The columns of the fields in order and the target's when rows can be made of them
    /// (`pick`'s `rows`): every field and the target in the batch, numbers, never null.
    fn plain<'b>(
        &self,
        leaves: &'b [(Slot, Leaf<'b>)],
    ) -> Option<(Vec<&'b Column<'b>>, &'b Column<'b>)> {
        if !self.rows {
            return None;
        }
        let mut columns: Vec<Option<&Column>> = vec![None; self.fields];
        let mut target = None;
        for (slot, leaf) in leaves {
            if !leaf.records.is_empty() || leaf.nulls.is_some() || !leaf.column.is_number() {
                return None;
            }
            match slot {
                Slot::Field(i) => columns[*i] = Some(&leaf.column),
                Slot::Target => target = Some(&leaf.column),
            }
        }
        Some((columns.into_iter().collect::<Option<Vec<_>>>()?, target?))
    }
}

/// Whether both readers read every datum of `s` alike (see the module's comment).
fn alike(s: &Schema) -> bool {
    match s {
        Schema::Record(r) => r.fields.iter().all(|f| alike(&f.schema)),
        // Not even null and one type: arrow-avro reads any branch index but the null's as
        // the value (any but 0 for ["null", T]), where apache-avro refuses an index beyond
        // the union's branches. No booleans: arrow-avro reads any non-zero byte as true.
        Schema::Union(_) | Schema::Boolean => false,
        other => scalar(other),
    }
}

/// Whether `s` holds a string at some depth (which must be decoded to be checked).
fn has_string(s: &Schema) -> bool {
    match s {
        Schema::String => true,
        Schema::Record(r) => r.fields.iter().any(|f| has_string(&f.schema)),
        Schema::Union(u) => u.variants().iter().any(has_string),
        _ => false,
    }
}

/// The record of `s` (a nullable union's record branch too), with its JSON.
fn record_of<'a>(s: &'a Schema, json: &'a Value) -> Option<(&'a Schema, &'a Value)> {
    match s {
        Schema::Record(_) => Some((s, json)),
        Schema::Union(u) => {
            let i = u
                .variants()
                .iter()
                .position(|v| matches!(v, Schema::Record(_)))?;
            Some((&u.variants()[i], json.as_array()?.get(i)?))
        }
        _ => None,
    }
}

/// The reader schema (JSON) of record `s` for `level`: the fields it maps, with their
/// records pruned in turn, and the unmapped fields that hold strings. Some(None): nothing of
/// the record is read. None: a mapped path the fast path does not read (a record as a leaf).
fn prune(
    s: &Schema,
    json: &Value,
    level: &Level,
    prefix: &mut Vec<usize>,
    leaves: &mut Vec<(Slot, Vec<usize>)>,
) -> Option<Option<Value>> {
    let Schema::Record(r) = s else {
        return None;
    };
    let jfields = json.get("fields")?.as_array()?;
    let mut kept = Vec::new();
    for (f, fj) in r.fields.iter().zip(jfields) {
        match level.0.get(&f.name) {
            None => {
                if has_string(&f.schema) {
                    kept.push(fj.clone());
                }
            }
            Some(leaf @ (Entry::Field(_) | Entry::Target)) => {
                if record_of(&f.schema, fj.get("type")?).is_some() {
                    return None;
                }
                let slot = match leaf {
                    Entry::Field(i) => Slot::Field(*i),
                    _ => Slot::Target,
                };
                let mut path = prefix.clone();
                path.push(kept.len());
                leaves.push((slot, path));
                kept.push(fj.clone());
            }
            Some(Entry::Inner(inner)) => {
                let ty = fj.get("type")?;
                let Some((rec, rec_json)) = record_of(&f.schema, ty) else {
                    // A path through a value that is no record: absent, as `avro::pick`
                    // finds nothing there.
                    if has_string(&f.schema) {
                        kept.push(fj.clone());
                    }
                    continue;
                };
                // Its column's index, if it is kept (it is, when a leaf under it is).
                prefix.push(kept.len());
                let pruned = prune(rec, rec_json, inner, prefix, leaves)?;
                prefix.pop();
                // Nothing under it is read: its paths are absent whatever the datum holds.
                let Some(pruned) = pruned else { continue };
                let ty = match ty {
                    Value::Array(branches) => Value::Array(
                        branches
                            .iter()
                            .map(|b| {
                                if b.is_object() {
                                    pruned.clone()
                                } else {
                                    b.clone()
                                }
                            })
                            .collect(),
                    ),
                    _ => pruned,
                };
                let mut fj = fj.clone();
                fj["type"] = ty;
                kept.push(fj);
            }
        }
    }
    if kept.is_empty() {
        return Some(None);
    }
    let mut out = json.clone();
    out["fields"] = Value::Array(kept);
    Some(Some(out))
}

/// A mapped path's column in a batch, with the records on the way (a null one: absent).
struct Leaf<'a> {
    records: Vec<&'a StructArray>,
    nulls: Option<&'a NullBuffer>,
    column: Column<'a>,
}

enum Column<'a> {
    Null,
    I32(&'a [i32]),
    I64(&'a [i64]),
    F32(&'a [f32]),
    F64(&'a [f64]),
    Str(&'a StringArray),
}

impl Column<'_> {
    fn is_number(&self) -> bool {
        matches!(
            self,
            Column::I32(_) | Column::I64(_) | Column::F32(_) | Column::F64(_)
        )
    }

    /// A number column's value at `row` as the field mapping reads its JSON number.
    fn number(&self, row: usize) -> f64 {
        match self {
            Column::I32(v) => f64::from(v[row]),
            Column::I64(v) => v[row] as f64,
            Column::F32(v) => f64::from(v[row]),
            Column::F64(v) => v[row],
            Column::Null | Column::Str(_) => f64::NAN,
        }
    }
}

impl<'a> Leaf<'a> {
    /// The column at `path` (indexes into the batch's columns, then its records'), None when
    /// the batch is not laid out as the reader schema says or the column's type is not one
    /// this reader knows.
    fn find(batch: &'a RecordBatch, path: &[usize]) -> Option<Leaf<'a>> {
        let (last, records_path) = path.split_last()?;
        let mut records = Vec::with_capacity(records_path.len());
        let mut columns: &'a [ArrayRef] = batch.columns();
        for &i in records_path {
            let s = columns.get(i)?.as_struct_opt()?;
            records.push(s);
            columns = s.columns();
        }
        let i = *last;
        let a = columns.get(i)?;
        let column = match a.data_type() {
            DataType::Null => Column::Null,
            DataType::Int32 => Column::I32(a.as_primitive::<Int32Type>().values()),
            DataType::Date32 => Column::I32(a.as_primitive::<Date32Type>().values()),
            DataType::Time32(TimeUnit::Millisecond) => {
                Column::I32(a.as_primitive::<Time32MillisecondType>().values())
            }
            DataType::Int64 => Column::I64(a.as_primitive::<Int64Type>().values()),
            DataType::Time64(TimeUnit::Microsecond) => {
                Column::I64(a.as_primitive::<Time64MicrosecondType>().values())
            }
            DataType::Timestamp(TimeUnit::Millisecond, _) => {
                Column::I64(a.as_primitive::<TimestampMillisecondType>().values())
            }
            DataType::Timestamp(TimeUnit::Microsecond, _) => {
                Column::I64(a.as_primitive::<TimestampMicrosecondType>().values())
            }
            DataType::Timestamp(TimeUnit::Nanosecond, _) => {
                Column::I64(a.as_primitive::<TimestampNanosecondType>().values())
            }
            DataType::Float32 => Column::F32(a.as_primitive::<Float32Type>().values()),
            DataType::Float64 => Column::F64(a.as_primitive::<Float64Type>().values()),
            DataType::Utf8 => Column::Str(a.as_string::<i32>()),
            _ => return None,
        };
        Some(Leaf {
            records,
            nulls: a.nulls(),
            column,
        })
    }

    /// The value of `row` as `avro::pick` reads it (None: absent).
    fn value(&self, row: usize) -> Option<Value> {
        if self.records.iter().any(|r| r.is_null(row)) {
            return None;
        }
        if self.nulls.is_some_and(|n| n.is_null(row)) {
            return Some(Value::Null);
        }
        Some(match &self.column {
            Column::Null => Value::Null,
            Column::I32(v) => Value::from(i64::from(v[row])),
            Column::I64(v) => Value::from(v[row]),
            Column::F32(v) => float(f64::from(v[row])),
            Column::F64(v) => float(v[row]),
            Column::Str(a) => Value::String(a.value(row).to_string()),
        })
    }
}

/// The batches against the existing reading, one datum at a time through apache-avro
/// (`format::decode_tallied`), on fuzzed schemas and datums served by a Schema Registry on a
/// free port: the same rows bit for bit, tallies, refusals and their reasons.
#[cfg(test)]
mod tests {
    use super::super::registry::Registry;
    use super::super::{Early, Wire};
    use crate::codec::format::{Schema as Stream, Tally, decode_early, decode_tallied};
    use crate::config::schemas::{SchemaRegistryConfig, ValueFormat};
    use apache_avro::Schema;
    use apache_avro::types::Value as A;
    use ravel_core::fields::{Field, Fields, Kind, Missing};
    use std::io::{BufRead, BufReader, Write};
    use std::sync::{Arc, Mutex};

    /// splitmix64: a seeded stream of numbers.
    struct Rng(u64);
    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = self.0;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^ (z >> 31)
        }
        fn below(&mut self, n: u64) -> u64 {
            self.next() % n
        }
        fn one_in(&mut self, n: u64) -> bool {
            self.below(n) == 0
        }
    }

    /// A Schema Registry's two calls the client makes (`/subjects`, `/schemas/ids/N`), over
    /// HTTP on a free port, answering the schemas of `schemas` (a 40403 for others).
    fn serve(schemas: Arc<Mutex<Vec<(u32, String)>>>) -> String {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { continue };
                let mut line = String::new();
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                if reader.read_line(&mut line).is_err() {
                    continue;
                }
                // The headers, up to the empty line (GET requests have no body).
                let mut h = String::new();
                while reader.read_line(&mut h).is_ok_and(|n| n > 0) && h.trim() != "" {
                    h.clear();
                }
                let path = line.split(' ').nth(1).unwrap_or("").to_string();
                let path = path.split('?').next().unwrap_or("");
                let (status, body) = if path == "/subjects" {
                    ("200 OK", "[]".to_string())
                } else if let Some(id) = path.strip_prefix("/schemas/ids/") {
                    let id: u32 = id.parse().unwrap_or(u32::MAX);
                    match schemas.lock().unwrap().iter().find(|(i, _)| *i == id) {
                        Some((_, s)) => ("200 OK", serde_json::json!({ "schema": s }).to_string()),
                        None => (
                            "404 Not Found",
                            r#"{"error_code": 40403, "message": "Schema not found"}"#.into(),
                        ),
                    }
                } else {
                    (
                        "404 Not Found",
                        r#"{"error_code": 404, "message": "no"}"#.into(),
                    )
                };
                let _ = write!(
                    stream,
                    "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: \
                     {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        url
    }

    const NAMES: [&str; 6] = ["a", "b", "s", "t", "n", "u"];

    thread_local! {
        static WILD: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
    }

    /// A random type at `depth`: numbers, strings, booleans, nullable unions, nested
    /// records, arrays, maps, enums, wider unions and logical types.
    /// Only one schema in `wild` has the types arrow-avro's batches leave to apache-avro
    /// (booleans, arrays, maps, enums, unions of more than null and one type).
    fn ty(rng: &mut Rng, depth: u32, records: &mut u32) -> serde_json::Value {
        use serde_json::json;
        let wild = WILD.with(|w| w.get());
        let prim = [
            "int", "long", "float", "double", "string", "double", "long", "null", "boolean",
        ];
        let pick = rng.below(20);
        let pick = match pick {
            15..=18 if !wild => 0,
            9..=11 if !wild && rng.below(8) > 0 => 12,
            _ => pick,
        };
        match pick {
            0..=8 => json!(prim[rng.below(prim.len() as u64 - u64::from(!wild)) as usize]),
            9..=11 => {
                let inner = ty(rng, depth + 1, records);
                if inner == json!("null") {
                    return json!(["null", "long"]);
                }
                if inner.is_array() {
                    return inner;
                }
                if rng.one_in(2) {
                    json!(["null", inner])
                } else {
                    json!([inner, "null"])
                }
            }
            12..=14 if depth < 3 => record(rng, depth + 1, records),
            15 => json!({"type": "array", "items": "long"}),
            16 => json!({"type": "map", "values": "double"}),
            17 => {
                *records += 1;
                json!({"type": "enum", "name": format!("E{records}"), "symbols": ["x", "y"]})
            }
            18 => json!(["null", "long", "string"]),
            _ => {
                let l = [
                    ("long", "timestamp-millis"),
                    ("long", "timestamp-micros"),
                    ("long", "local-timestamp-micros"),
                    ("int", "date"),
                    ("int", "time-millis"),
                    ("long", "time-micros"),
                ][rng.below(6) as usize];
                json!({"type": l.0, "logicalType": l.1})
            }
        }
    }

    fn record(rng: &mut Rng, depth: u32, records: &mut u32) -> serde_json::Value {
        *records += 1;
        let name = format!("R{records}");
        let n = 2 + rng.below(4);
        let mut names: Vec<&str> = NAMES.to_vec();
        let mut fields: Vec<serde_json::Value> = (0..n)
            .map(|_| {
                let at = rng.below(names.len() as u64) as usize;
                let name = names.remove(at);
                serde_json::json!({"name": name, "type": ty(rng, depth, records)})
            })
            .collect();
        // Mostly a numeric target and first feature where the stream looks for them, in
        // some place among the others.
        for wanted in ["t", "a"] {
            if names.contains(&wanted) && !rng.one_in(5) {
                let t = ["double", "long", "int", "float"][rng.below(4) as usize];
                let at = rng.below(fields.len() as u64 + 1) as usize;
                fields.insert(at, serde_json::json!({"name": wanted, "type": t}));
            }
        }
        serde_json::json!({"type": "record", "name": name, "fields": fields})
    }

    /// A random datum of `s`.
    fn datum(rng: &mut Rng, s: &Schema) -> A {
        match s {
            Schema::Null => A::Null,
            Schema::Boolean => A::Boolean(rng.one_in(2)),
            Schema::Int => A::Int(rng.below(200) as i32 - 100),
            Schema::Long => A::Long(match rng.below(4) {
                0 => i64::MAX - rng.below(3) as i64,
                _ => rng.below(1 << 40) as i64 - (1 << 39),
            }),
            Schema::Float => A::Float(match rng.below(12) {
                0 => f32::NAN,
                1 => f32::INFINITY,
                _ => (rng.below(1000) as f32 - 500.0) / 7.0,
            }),
            Schema::Double => A::Double(match rng.below(12) {
                0 => f64::NAN,
                1 => f64::NEG_INFINITY,
                2 => 1e300,
                _ => (rng.below(100_000) as f64 - 50_000.0) / 3.0,
            }),
            Schema::String => A::String(["x", "y", "", "é", "zz"][rng.below(5) as usize].into()),
            Schema::Date => A::Date(rng.below(20_000) as i32),
            Schema::TimeMillis => A::TimeMillis(rng.below(86_400_000) as i32),
            Schema::TimeMicros => A::TimeMicros(rng.below(1 << 36) as i64),
            Schema::TimestampMillis => A::TimestampMillis(rng.below(1 << 42) as i64),
            Schema::TimestampMicros => A::TimestampMicros(rng.below(1 << 52) as i64),
            Schema::LocalTimestampMicros => A::LocalTimestampMicros(rng.below(1 << 52) as i64),
            Schema::Array(a) => A::Array((0..rng.below(3)).map(|_| datum(rng, &a.items)).collect()),
            Schema::Map(m) => A::Map(
                (0..rng.below(3))
                    .map(|i| (format!("k{i}"), datum(rng, &m.types)))
                    .collect(),
            ),
            Schema::Enum(e) => {
                let i = rng.below(e.symbols.len() as u64) as usize;
                A::Enum(i as u32, e.symbols[i].clone())
            }
            Schema::Union(u) => {
                let i = rng.below(u.variants().len() as u64) as usize;
                A::Union(i as u32, Box::new(datum(rng, &u.variants()[i])))
            }
            Schema::Record(r) => A::Record(
                r.fields
                    .iter()
                    .map(|f| (f.name.clone(), datum(rng, &f.schema)))
                    .collect(),
            ),
            other => panic!("no datum for {other:?}"),
        }
    }

    /// The stream's fields: numbers by name and dotted path, a categorical string; `missing`
    /// for the top-level ones.
    fn fields(missing: Missing) -> Fields {
        let with = |name: &str| Field {
            missing,
            ..Field::numeric(name)
        };
        // The nested paths, often absent, mostly indicated: rows remain under every policy.
        let indicated = |name: &str| Field {
            missing: Missing::Indicator,
            ..Field::numeric(name)
        };
        Fields::new(vec![
            with("a"),
            indicated("n.b"),
            indicated("n.u.a"),
            Field {
                kind: Kind::Categorical {
                    levels: vec!["x".into(), "y".into()],
                },
                ..with("s")
            },
            indicated("u.s"),
            indicated("n.a"),
        ])
        .unwrap()
    }

    type Outcome = (
        Result<usize, crate::reason::Rejection>,
        Vec<u64>,
        Vec<u64>,
        Tally,
    );

    fn outcome(
        r: Result<usize, crate::reason::Rejection>,
        x: &[f64],
        y: &[f64],
        t: Tally,
    ) -> Outcome {
        let bits = |v: &[f64]| v.iter().map(|f| f.to_bits()).collect();
        (r, bits(x), bits(y), t)
    }

    #[test]
    fn batches_read_as_the_datums_one_by_one() {
        let schemas = Arc::new(Mutex::new(Vec::new()));
        let url = serve(schemas.clone());
        let config = SchemaRegistryConfig {
            url,
            timeout_ms: 2_000,
            ..Default::default()
        };
        let mut rng = Rng(48);
        let (mut messages, mut picked, mut read, mut refused, mut rows) = (0, 0, 0, 0, 0);
        for case in 0..160u32 {
            let mut records = 0;
            WILD.with(|w| w.set(case % 4 == 0));
            let text = record(&mut rng, 0, &mut records).to_string();
            let avro = Schema::parse_str(&text).unwrap();
            let id = 100 + case;
            schemas.lock().unwrap().push((id, text.clone()));
            let registry = Arc::new(
                Registry::new(&config, Arc::new(crate::health::Health::new()), None).unwrap(),
            );
            let missing =
                [Missing::Indicator, Missing::SkipRow, Missing::Reject][case as usize % 3];
            // Plain fields (numbers refusing missing values) in every fifth: rows straight
            // from the columns (`Early::Row`).
            let (missing, fields) = match case % 5 {
                4 => (Missing::Reject, Fields::numeric(&["a".into()]).unwrap()),
                _ => (missing, fields(missing)),
            };
            let target = if case % 4 == 3 { "n.t" } else { "t" };
            let wire = Wire {
                format: ValueFormat::Avro,
                plain: None,
                registry: Some(registry),
                plan: Default::default(),
                proto_plans: Default::default(),
                batches: Default::default(),
            };
            let stream = Stream {
                p: fields.p(),
                fields: Some(&fields),
                target: Some(target),
                skip_missing_target: missing != Missing::Reject,
                classification: false,
                unlabelled: false,
                wire: Some(&wire),
                schema_header: None,
                plan: None,
            };
            let writer = apache_avro::writer::datum::GenericDatumWriter::builder(&avro)
                .build()
                .unwrap();
            // Two batches of each schema: the second reuses the decoder.
            for _ in 0..2 {
                let payloads: Vec<Vec<u8>> = (0..1 + rng.below(40))
                    .map(|_| {
                        let v = datum(&mut rng, &avro);
                        let mut p = vec![0];
                        p.extend(id.to_be_bytes());
                        p.extend(writer.write_value_to_vec(v).unwrap());
                        match rng.below(40) {
                            0 => p.truncate(rng.below(p.len() as u64) as usize),
                            1 => p.push(rng.below(256) as u8),
                            2 if p.len() > 5 => {
                                let at = 5 + rng.below(p.len() as u64 - 5) as usize;
                                p[at] ^= 1 << rng.below(8);
                            }
                            3 => p[4] = p[4].wrapping_add(77), // an id the registry lacks
                            4 => p[0] = 1,
                            _ => {}
                        }
                        p
                    })
                    .collect();
                let values: Vec<(&[u8], Option<&[u8]>)> =
                    payloads.iter().map(|p| (&p[..], None)).collect();
                let early = wire.pick_batch(&values, &fields, target);
                for (i, (p, e)) in payloads.iter().zip(early).enumerate() {
                    messages += 1;
                    let fast = matches!(e, Some(Early::Picked(_) | Early::Row { .. }));
                    picked += usize::from(fast);
                    rows += usize::from(matches!(e, Some(Early::Row { .. })));
                    let (mut x, mut y, mut t) = (vec![], vec![], Tally::default());
                    let r = decode_early(p, &stream, e, &mut x, &mut y, &mut t);
                    let by_batch = outcome(r, &x, &y, t);
                    let (mut x, mut y, mut t) = (vec![], vec![], Tally::default());
                    let r = decode_tallied(p, &stream, &mut x, &mut y, &mut t);
                    let one = outcome(r, &x, &y, t);
                    assert_eq!(
                        by_batch, one,
                        "case {case} message {i}, {missing:?}: {text}"
                    );
                    match (fast, one.0.is_ok()) {
                        (true, true) => read += one.1.len() / fields.p(),
                        (true, false) => refused += 1,
                        _ => {}
                    }
                }
            }
        }
        // A good part of them went through arrow-avro, rows read and refused (by the fields).
        assert!(
            picked * 4 > messages && read > 500 && refused > 100 && rows > 100,
            "{picked} of {messages} messages in batches, {read} rows of them ({rows} made \
             straight from the columns), {refused} refused"
        );
    }
}
