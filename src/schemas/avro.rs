//! Avro datums into a tree of named fields: decoded by `apache-avro` with the writer's schema,
//! then records as objects (nested records as nested objects, found by dotted path), unions as
//! their branch, enums as their symbol, numbers of every width (and the date and time logical
//! types, as their integers) as numbers.

use super::schema_error;
use crate::reason::Rejection;
use apache_avro::types::Value as Avro;
use serde_json::{Map, Number, Value};

/// Bytes the decoder may allocate for one datum (a corrupt length cannot ask for more), set
/// once when a schema'd stream is set up (`super::Wire::of_stream`).
pub const MAX_ALLOCATION_BYTES: usize = 64 << 20;

/// Decodes one datum of `schema` that must fill `bytes` exactly.
pub fn decode(schema: &apache_avro::Schema, bytes: &[u8]) -> Result<Value, Rejection> {
    let reader = apache_avro::reader::datum::GenericDatumReader::builder(schema)
        .build()
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
        let schema = apache_avro::Schema::parse_str(SALE).unwrap();
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
        let schema = apache_avro::Schema::parse_str(SALE).unwrap();
        let bytes = sale(3.25, Some(41));
        let e = decode(&schema, &bytes[..bytes.len() - 1]).unwrap_err();
        assert_eq!(e.reason, Reason::Schema, "{e:?}");
        let mut longer = bytes.clone();
        longer.push(7);
        let e = decode(&schema, &longer).unwrap_err();
        assert!(e.message.contains("1 bytes follow"), "{e:?}");
    }
}
