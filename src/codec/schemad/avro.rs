//! Avro datums into a tree of named fields: decoded by `apache-avro` with the writer's schema,
//! then records as objects (nested records as nested objects, found by dotted path), unions as
//! their branch, enums as their symbol, numbers of every width (and the date and time logical
//! types, as their integers) as numbers.
//!
//! `pick` is the hot path of the usual schema (records of numbers, strings, booleans and
//! nullable unions): it reads only the fields a stream maps, straight from the datum through
//! the crate's serde deserializer, into one value per field, with neither the crate's value
//! tree nor the JSON tree. Whatever it cannot read exactly as the tree would (other types, a
//! datum that does not match) it leaves to `decode`, which then says what is wrong.

use super::{AvroSchema, Picked, schema_error};
use crate::reason::Rejection;
use apache_avro::Schema;
use apache_avro::types::Value as Avro;
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};
use serde_json::{Map, Number, Value};
use std::cell::RefCell;
use std::fmt;
use std::sync::Arc;

/// Bytes the decoder may allocate for one datum (a corrupt length cannot ask for more), set
/// once when a schema'd stream is set up (`super::Wire::of_stream`).
pub const MAX_ALLOCATION_BYTES: usize = 64 << 20;

/// Decodes one datum of `schema` (with the named types of its references) that must fill
/// `bytes` exactly.
pub fn decode(schema: &AvroSchema, bytes: &[u8]) -> Result<Value, Rejection> {
    use apache_avro::reader::datum::GenericDatumReader;
    let reader = if schema.refs.is_empty() {
        GenericDatumReader::builder(&schema.schema).build()
    } else {
        // The referenced types first, then the schema's own.
        let all = schema.refs.iter().chain([&schema.schema]).collect();
        GenericDatumReader::builder(&schema.schema)
            .writer_schemata(all)
            .and_then(|b| b.build())
    }
    .map_err(|e| schema_error(format!("the Avro schema cannot be used: {e}")))?;
    let mut rest = bytes;
    let value = reader
        .read_value(&mut rest)
        .map_err(|e| schema_error(format!("the datum does not match its Avro schema: {e}")))?;
    if !rest.is_empty() {
        return Err(schema_error(format!(
            "{} bytes follow the Avro datum: it does not match its schema",
            rest.len()
        )));
    }
    Ok(to_json(value))
}

/// A number, or text when it is not finite.
pub(super) fn float(v: f64) -> Value {
    // Not finite: text, which a numeric field refuses (`field_type`), never a silent gap.
    Number::from_f64(v).map_or_else(|| Value::String(v.to_string()), Value::Number)
}

/// The tree the field mapping reads.
pub fn to_json(v: Avro) -> Value {
    match v {
        Avro::Null => Value::Null,
        Avro::Boolean(b) => Value::Bool(b),
        Avro::Int(i) | Avro::Date(i) | Avro::TimeMillis(i) => Value::from(i),
        Avro::Long(i)
        | Avro::TimeMicros(i)
        | Avro::TimestampMillis(i)
        | Avro::TimestampMicros(i)
        | Avro::TimestampNanos(i)
        | Avro::LocalTimestampMillis(i)
        | Avro::LocalTimestampMicros(i)
        | Avro::LocalTimestampNanos(i) => Value::from(i),
        Avro::Float(f) => float(f64::from(f)),
        Avro::Double(f) => float(f),
        Avro::String(s) | Avro::Enum(_, s) => Value::String(s),
        Avro::Bytes(b) | Avro::Fixed(_, b) => Value::String(String::from_utf8_lossy(&b).into()),
        Avro::Union(_, inner) => to_json(*inner),
        Avro::Array(items) => Value::Array(items.into_iter().map(to_json).collect()),
        Avro::Map(m) => Value::Object(m.into_iter().map(|(k, v)| (k, to_json(v))).collect()),
        Avro::Record(fields) => {
            let mut obj = Map::with_capacity(fields.len());
            for (k, v) in fields {
                obj.insert(k, to_json(v));
            }
            Value::Object(obj)
        }
        Avro::BigDecimal(d) => d
            .to_string()
            .parse::<f64>()
            .map_or_else(|_| Value::String(d.to_string()), float),
        // Decimals without their scale, durations and UUIDs are no numbers: text.
        Avro::Decimal(_) => Value::String("an Avro decimal".into()),
        Avro::Duration(_) => Value::String("an Avro duration".into()),
        Avro::Uuid(u) => Value::String(u.to_string()),
    }
}

/// Whether `pick` reads datums of `schema` exactly as `decode` and the field mapping would: a
/// record whose types, at every depth, are records, nullable unions, numbers (the date and
/// time logical types among them), strings and booleans. Enums, bytes, fixed, decimals,
/// UUIDs, arrays, maps and named references take the tree.
pub fn pickable(schema: &Schema) -> bool {
    fn plain(s: &Schema) -> bool {
        match s {
            Schema::Boolean => true,
            Schema::Record(r) => r.fields.iter().all(|f| plain(&f.schema)),
            Schema::Union(u) => u.variants().iter().all(plain),
            other => scalar(other),
        }
    }
    // A top-level field named `columns` makes the record a named mini-batch (`events`).
    matches!(schema, Schema::Record(r) if !r.lookup.contains_key("columns")) && plain(schema)
}

/// Whether `s` is null, a number (the date and time logical types among them) or a string:
/// the leaves both `pick` and the batch reader (`avro_batch`) take; `pick` also booleans.
pub(super) fn scalar(s: &Schema) -> bool {
    matches!(
        s,
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
            | Schema::LocalTimestampNanos
    )
}

/// The fields a stream maps and its target, as a tree of record field names: what `pick`
/// reads of a datum.
pub struct Plan {
    pub(super) root: Level,
    pub(super) fields: usize,
}

#[derive(Default)]
pub(super) struct Level(pub(super) foldhash::HashMap<String, Entry>);

pub(super) enum Entry {
    /// The value of the field of this index.
    Field(usize),
    Target,
    /// A record holding mapped fields (a dotted path's segment).
    Inner(Level),
}

impl Level {
    fn insert(&mut self, path: &str, leaf: Entry) -> Option<()> {
        match path.split_once('.') {
            None => match self.0.entry(path.to_string()) {
                std::collections::hash_map::Entry::Vacant(v) => {
                    v.insert(leaf);
                    Some(())
                }
                std::collections::hash_map::Entry::Occupied(_) => None,
            },
            Some((head, rest)) => match self
                .0
                .entry(head.to_string())
                .or_insert_with(|| Entry::Inner(Level::default()))
            {
                Entry::Inner(inner) => inner.insert(rest, leaf),
                _ => None,
            },
        }
    }
}

impl Plan {
    /// The plan of fields named `names` (by name or dotted path, in the field order) and the
    /// target; None when one name is a prefix of another (a field inside a field), which the
    /// tree answers with its own refusal.
    pub fn new<'a>(names: impl IntoIterator<Item = &'a str>, target: &str) -> Option<Plan> {
        let mut root = Level::default();
        let mut fields = 0;
        for (i, name) in names.into_iter().enumerate() {
            root.insert(name, Entry::Field(i))?;
            fields = i + 1;
        }
        root.insert(target, Entry::Target)?;
        Some(Plan { root, fields })
    }
}

thread_local! {
    /// The plan of the datum being read: `read_deser` takes an owned type and no seed, so the
    /// plan reaches `Picked::deserialize` this way, for the length of one `pick`.
    static PLAN: RefCell<Option<Arc<Plan>>> = const { RefCell::new(None) };
}

/// Reads the fields of `plan` from one datum of a `pickable` schema that must fill `bytes`
/// exactly; None when it cannot (the datum does not match its schema ...): `decode` then
/// reads it and says why.
pub fn pick(schema: &Schema, bytes: &[u8], plan: &Arc<Plan>) -> Option<Picked> {
    let reader = apache_avro::reader::datum::GenericDatumReader::builder(schema)
        .build()
        .ok()?;
    PLAN.with(|p| *p.borrow_mut() = Some(Arc::clone(plan)));
    let mut rest = bytes;
    let picked = reader.read_deser::<Picked>(&mut rest);
    PLAN.with(|p| p.borrow_mut().take());
    picked.ok().filter(|_| rest.is_empty())
}

impl<'de> de::Deserialize<'de> for Picked {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Picked, D::Error> {
        let plan = PLAN
            .with(|p| p.borrow().clone())
            .ok_or_else(|| de::Error::custom("no plan to read the datum with"))?;
        let mut out = Picked {
            values: vec![None; plan.fields],
            label: None,
            unused: 0,
        };
        d.deserialize_any(Record {
            level: &plan.root,
            out: &mut out,
            top: true,
        })?;
        Ok(out)
    }
}

/// A record's fields, the mapped ones read and the others skipped.
struct Record<'a> {
    level: &'a Level,
    out: &'a mut Picked,
    top: bool,
}

impl<'de> DeserializeSeed<'de> for Record<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Record<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a record")
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let Record { level, out, top } = self;
        while let Some(entry) = map.next_key_seed(Key(level))? {
            match entry {
                Some(Entry::Field(i)) => out.values[*i] = Some(map.next_value_seed(Scalar)?),
                Some(Entry::Target) => out.label = Some(map.next_value_seed(Scalar)?),
                Some(Entry::Inner(level)) => map.next_value_seed(Record {
                    level,
                    out: &mut *out,
                    top: false,
                })?,
                None => {
                    map.next_value::<IgnoredAny>()?;
                    out.unused += u64::from(top);
                }
            }
        }
        Ok(())
    }
    // A dotted path into a value that is not a record (a null branch of a union): the fields
    // under it are absent, as `crate::dotted::lookup` finds none there.
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_bool<E>(self, _: bool) -> Result<(), E> {
        Ok(())
    }
    fn visit_i64<E>(self, _: i64) -> Result<(), E> {
        Ok(())
    }
    fn visit_u64<E>(self, _: u64) -> Result<(), E> {
        Ok(())
    }
    fn visit_f64<E>(self, _: f64) -> Result<(), E> {
        Ok(())
    }
    fn visit_str<E>(self, _: &str) -> Result<(), E> {
        Ok(())
    }
}

/// A field's name, looked up in its level without a copy.
struct Key<'a>(&'a Level);

impl<'de, 'a> DeserializeSeed<'de> for Key<'a> {
    type Value = Option<&'a Entry>;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_identifier(self)
    }
}

impl<'de, 'a> Visitor<'de> for Key<'a> {
    type Value = Option<&'a Entry>;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a field name")
    }
    fn visit_str<E>(self, name: &str) -> Result<Self::Value, E> {
        Ok(self.0.0.get(name))
    }
}

/// A mapped field's value as `to_json` makes it (numbers of every width, text, booleans,
/// null); anything else is an error, and the datum goes to the tree.
struct Scalar;

impl<'de> DeserializeSeed<'de> for Scalar {
    type Value = Value;
    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Scalar {
    type Value = Value;
    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a number, a string, a boolean or null")
    }
    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_none<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
    fn visit_bool<E>(self, v: bool) -> Result<Value, E> {
        Ok(Value::Bool(v))
    }
    fn visit_i64<E>(self, v: i64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_u64<E>(self, v: u64) -> Result<Value, E> {
        Ok(Value::from(v))
    }
    fn visit_f32<E>(self, v: f32) -> Result<Value, E> {
        Ok(float(f64::from(v)))
    }
    fn visit_f64<E>(self, v: f64) -> Result<Value, E> {
        Ok(float(v))
    }
    fn visit_str<E>(self, v: &str) -> Result<Value, E> {
        Ok(Value::String(v.to_string()))
    }
    fn visit_string<E>(self, v: String) -> Result<Value, E> {
        Ok(Value::String(v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reason::Reason;

    const SALE: &str = r#"{"type": "record", "name": "Sale", "fields": [
        {"name": "price", "type": "double"},
        {"name": "rooms", "type": "int"},
        {"name": "region", "type": {"type": "enum", "name": "Region", "symbols": ["north", "south"]}},
        {"name": "user", "type": {"type": "record", "name": "User", "fields": [
            {"name": "age", "type": ["null", "long"], "default": null}]}}
    ]}"#;

    fn sale(price: f64, age: Option<i64>) -> Vec<u8> {
        let schema = apache_avro::Schema::parse_str(SALE).unwrap();
        let age = match age {
            Some(a) => Avro::Union(1, Box::new(Avro::Long(a))),
            None => Avro::Union(0, Box::new(Avro::Null)),
        };
        let v = Avro::Record(vec![
            ("price".into(), Avro::Double(price)),
            ("rooms".into(), Avro::Int(3)),
            ("region".into(), Avro::Enum(1, "south".into())),
            ("user".into(), Avro::Record(vec![("age".into(), age)])),
        ]);
        apache_avro::writer::datum::GenericDatumWriter::builder(&schema)
            .build()
            .unwrap()
            .write_value_to_vec(v)
            .unwrap()
    }

    #[test]
    fn a_record_becomes_named_nested_fields() {
        let schema = AvroSchema::new(apache_avro::Schema::parse_str(SALE).unwrap());
        let v = decode(&schema, &sale(3.25, Some(41))).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"price": 3.25, "rooms": 3, "region": "south", "user": {"age": 41}})
        );
        let v = decode(&schema, &sale(1.0, None)).unwrap();
        assert_eq!(v["user"]["age"], Value::Null);
    }

    #[test]
    fn a_datum_that_does_not_fill_its_bytes_is_refused() {
        let schema = AvroSchema::new(apache_avro::Schema::parse_str(SALE).unwrap());
        let bytes = sale(3.25, Some(41));
        let e = decode(&schema, &bytes[..bytes.len() - 1]).unwrap_err();
        assert_eq!(e.reason, Reason::Schema, "{e:?}");
        let mut longer = bytes.clone();
        longer.push(7);
        let e = decode(&schema, &longer).unwrap_err();
        assert!(e.message.contains("1 bytes follow"), "{e:?}");
    }

    #[test]
    fn schemas_with_references_read_their_named_types() {
        use super::super::registry::Fetched;
        // `shop.User` lives in another subject; the order's second user reuses it by name.
        const USER: &str = r#"{"type": "record", "name": "User", "namespace": "shop",
            "fields": [{"name": "age", "type": "long"}]}"#;
        const ORDER: &str = r#"{"type": "record", "name": "Order", "namespace": "shop",
            "fields": [{"name": "price", "type": "double"}, {"name": "buyer", "type": "User"},
                       {"name": "home", "type": {"type": "record", "name": "Home",
                           "fields": [{"name": "floor", "type": "int"}]}},
                       {"name": "away", "type": "Home"}]}"#;
        let fetched = Fetched {
            schema_type: "AVRO".into(),
            schema: ORDER.into(),
            imports: vec![("shop.User".into(), USER.into())],
            ..Default::default()
        };
        let at = super::super::registry::SchemaRef::Id(7);
        let Ok(super::super::Parsed::Avro(schema)) =
            super::super::parse(crate::config::schemas::ValueFormat::Avro, &at, fetched)
        else {
            panic!("the schema with its reference does not parse");
        };
        assert!(!schema.pickable, "references go through the tree");
        // The datum, written with the referenced type defined inline (same bytes).
        let full = apache_avro::Schema::parse_str(&ORDER.replace("\"User\"", USER)).unwrap();
        let bytes = apache_avro::writer::datum::GenericDatumWriter::builder(&full)
            .build()
            .unwrap()
            .write_value_to_vec(Avro::Record(vec![
                ("price".into(), Avro::Double(9.5)),
                (
                    "buyer".into(),
                    Avro::Record(vec![("age".into(), Avro::Long(33))]),
                ),
                (
                    "home".into(),
                    Avro::Record(vec![("floor".into(), Avro::Int(2))]),
                ),
                (
                    "away".into(),
                    Avro::Record(vec![("floor".into(), Avro::Int(5))]),
                ),
            ]))
            .unwrap();
        assert_eq!(
            decode(&schema, &bytes).unwrap(),
            serde_json::json!({"price": 9.5, "buyer": {"age": 33}, "home": {"floor": 2},
                               "away": {"floor": 5}})
        );
        // Without the referenced subject the schema is refused, naming it.
        let alone = Fetched {
            schema_type: "AVRO".into(),
            schema: ORDER.into(),
            ..Default::default()
        };
        let e = super::super::parse(crate::config::schemas::ValueFormat::Avro, &at, alone)
            .err()
            .unwrap();
        assert!(e.contains("User"), "{e}");
    }
}
