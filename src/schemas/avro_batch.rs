//! Avro records of many messages read together (issue 48): the datums of one ingest batch
//! that share a writer schema are decoded by arrow-avro into one Arrow record batch, through a
//! reader schema projected to the stream's mapped fields (its target and features, dotted
//! paths into nested records), and each row's mapped values are then read from the batch's
//! columns into a `Picked`, exactly as `avro::pick` reads them from one datum.
//!
//! Only schemas on which both readers agree byte for byte take this way: records at every
//! depth of numbers (ints, longs, floats, doubles, the date and time logical types), strings
//! and nulls, unions only of null and one other type, no booleans (arrow-avro reads any
//! non-zero byte as true, apache-avro refuses all but 0 and 1). Strings are decoded even when
//! unmapped (arrow-avro checks their UTF-8 when the batch is built; skipped, they would not be
//! checked), numbers that are not mapped are skipped. Every other schema, a value framed in a
//! header, and a batch arrow-avro refuses in any way (a bad datum, a datum that does not fill
//! its bytes) are read one by one as before (`super::Located`), so refusals and their reasons
//! stay apache-avro's.

use super::avro::{Entry, Level, Plan, float};
use super::{AvroSchema, Picked};
use apache_avro::Schema;
use arrow_array::cast::AsArray;
use arrow_array::types::{
    Date32Type, Float32Type, Float64Type, Int32Type, Int64Type, Time32MillisecondType,
    Time64MicrosecondType, TimestampMicrosecondType, TimestampMillisecondType,
    TimestampNanosecondType,
};
use arrow_array::{Array, ArrayRef, RecordBatch, StringArray, StructArray};
use arrow_buffer::NullBuffer;
use arrow_avro::reader::{Decoder, DecoderMode, ReaderBuilder};
use arrow_avro::schema::{AvroSchema as ArrowAvroSchema, Fingerprint, FingerprintAlgorithm};
use arrow_schema::{DataType, Fields, TimeUnit};
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
    /// The mapped paths the writer schema has, as column names from the batch's top.
    leaves: Vec<(Slot, Vec<String>)>,
    fields: usize,
    /// Top-level fields of the writer schema the plan does not name.
    unused: u64,
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
        let reader = prune(&schema.schema, &json, &plan.root, &mut Vec::new(), &mut leaves)??;
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
        };
        p.decoder = Some(p.build()?);
        Some(p)
    }

    fn build(&self) -> Option<Decoder> {
        let mut store =
            arrow_avro::schema::SchemaStore::new_with_type(FingerprintAlgorithm::Id);
        store
            .set(Fingerprint::Id(0), ArrowAvroSchema::new(self.writer.clone()))
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

    /// The mapped values of each datum of `bodies` (each must fill its bytes exactly), or
    /// None when arrow-avro refuses one of them: they are then read one by one.
    pub fn pick(&mut self, bodies: &[&[u8]]) -> Option<Vec<Picked>> {
        let picked = self.decode(bodies);
        if picked.is_none() {
            // Rows of the refused batch may be left in it.
            self.decoder = None;
        }
        picked
    }

    fn decode(&mut self, bodies: &[&[u8]]) -> Option<Vec<Picked>> {
        if self.decoder.is_none() {
            self.decoder = Some(self.build()?);
        }
        let mut out = Vec::with_capacity(bodies.len());
        for chunk in bodies.chunks(MAX_BATCH_ROWS) {
            let decoder = self.decoder.as_mut()?;
            for body in chunk {
                if decoder.decode(body).ok()? != body.len() {
                    return None;
                }
            }
            let batch = decoder.flush().ok()??;
            if batch.num_rows() != chunk.len() {
                return None;
            }
            self.read(&batch, &mut out)?;
        }
        Some(out)
    }

    /// Each row's mapped values, from the batch's columns.
    fn read(&self, batch: &RecordBatch, out: &mut Vec<Picked>) -> Option<()> {
        let mut leaves = Vec::with_capacity(self.leaves.len());
        for (slot, path) in &self.leaves {
            if let Some(leaf) = Leaf::find(batch, path)? {
                leaves.push((*slot, leaf));
            }
        }
        for row in 0..batch.num_rows() {
            let mut p = Picked {
                values: vec![None; self.fields],
                label: None,
                unused: self.unused,
            };
            for (slot, leaf) in &leaves {
                let v = leaf.value(row);
                match slot {
                    Slot::Field(i) => p.values[*i] = v,
                    Slot::Target => p.label = v,
                }
            }
            out.push(p);
        }
        Some(())
    }
}

/// Whether both readers read every datum of `s` alike (see the module's comment).
fn alike(s: &Schema) -> bool {
    match s {
        Schema::Null
        | Schema::Int
        | Schema::Long
        | Schema::Float
        | Schema::Double
        | Schema::String
        | Schema::Date
        | Schema::TimeMillis
        | Schema::TimeMicros
        | Schema::TimestampMillis
        | Schema::TimestampMicros
        | Schema::TimestampNanos
        | Schema::LocalTimestampMillis
        | Schema::LocalTimestampMicros
        | Schema::LocalTimestampNanos => true,
        Schema::Record(r) => r.fields.iter().all(|f| alike(&f.schema)),
        Schema::Union(u) => match u.variants() {
            [Schema::Null, other] | [other, Schema::Null] => {
                !matches!(other, Schema::Null) && alike(other)
            }
            _ => false,
        },
        _ => false,
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
/// the record is read. None: a mapped path the fast path does not read (a record as a leaf,
/// a path through a number or a string).
fn prune(
    s: &Schema,
    json: &Value,
    level: &Level,
    prefix: &mut Vec<String>,
    leaves: &mut Vec<(Slot, Vec<String>)>,
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
                path.push(f.name.clone());
                leaves.push((slot, path));
                kept.push(fj.clone());
            }
            Some(Entry::Inner(inner)) => {
                let ty = fj.get("type")?;
                let (rec, rec_json) = record_of(&f.schema, ty)?;
                prefix.push(f.name.clone());
                let pruned = prune(rec, rec_json, inner, prefix, leaves)?;
                prefix.pop();
                // Nothing under it is read: its paths are absent whatever the datum holds.
                let Some(pruned) = pruned else { continue };
                let ty = match ty {
                    Value::Array(branches) => Value::Array(
                        branches
                            .iter()
                            .map(|b| if b.is_object() { pruned.clone() } else { b.clone() })
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

impl<'a> Leaf<'a> {
    /// Some(None): the path is not in the batch (absent in every row); None: a column of a
    /// type this reader does not know.
    fn find(batch: &'a RecordBatch, path: &[String]) -> Option<Option<Leaf<'a>>> {
        let (last, records_path) = path.split_last()?;
        let mut records = Vec::with_capacity(records_path.len());
        let mut columns: &'a [ArrayRef] = batch.columns();
        let mut names: &'a Fields = batch.schema_ref().fields();
        for name in records_path {
            let Some(i) = names.iter().position(|f| f.name() == name) else {
                return Some(None);
            };
            let s = columns[i].as_struct_opt()?;
            records.push(s);
            names = s.fields();
            columns = s.columns();
        }
        let Some(i) = names.iter().position(|f| f.name() == last) else {
            return Some(None);
        };
        let a = &columns[i];
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
        Some(Some(Leaf {
            records,
            nulls: a.nulls(),
            column,
        }))
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
