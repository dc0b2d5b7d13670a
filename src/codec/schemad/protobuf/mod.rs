//! Confluent-framed Protobuf: the schema is a `.proto` file, which the registry gives as text
//! (compiled here by `protox`) or, asked with `format=serialized`, as the base64 of a
//! serialized `FileDescriptorProto` (what Confluent's Python serializer registers); the
//! message-index list after the schema id picks the message type (`[0]`: the file's first);
//! `prost-reflect` decodes the message dynamically. Fields become named values: scalars as
//! numbers, booleans and text, enums as their value's name, nested messages as objects (unset
//! ones as absent, so a mapped field inside follows the missing-value policy), repeated fields
//! as lists. A schema that imports other registered schemas (the registry's references) is
//! built with them, fetched along with it by the registry client, in either form.

mod scan;

use super::registry::Fetched;
use super::{Picked, schema_error};
use crate::reason::Rejection;
use base64::Engine;
use prost_reflect::prost::Message as _;
use prost_reflect::prost_types::FileDescriptorProto;
use prost_reflect::{
    DescriptorPool, DynamicMessage, FieldDescriptor, FileDescriptor, Kind, MessageDescriptor,
    ReflectMessage,
};
use ravel_core::fields::Fields;
use serde_json::{Map, Value};

/// Longest message-index list (nesting of the message type in its file).
const MAX_INDEXES: usize = 64;

/// The message types of one schema's file.
pub struct Messages {
    file: FileDescriptor,
}

/// A schema's text as a serialized `FileDescriptorProto` (the base64 Confluent's Python
/// serializer registers, and what a registry answers with `format=serialized`), if it is one.
fn serialized(text: &str) -> Option<FileDescriptorProto> {
    base64::engine::general_purpose::STANDARD
        .decode(text.trim())
        .ok()
        .and_then(|bytes| FileDescriptorProto::decode(bytes.as_slice()).ok())
        .filter(|fdp| {
            !fdp.message_type.is_empty() || !fdp.enum_type.is_empty() || fdp.name.is_some()
        })
}

/// The file a schema compiles to, from its serialized or text form, with the files it
/// imports: Google's well-known types from the ones built in, other registered schemas from
/// the registry (its references, fetched with it: `Fetched::imports`).
fn pool_of(f: &Fetched) -> Result<FileDescriptor, String> {
    if let Some(missing) = f
        .references
        .iter()
        .find(|r| !f.imports.iter().any(|(name, _)| *name == r.name))
    {
        return Err(format!(
            "the imported schema '{}' was not fetched",
            missing.name
        ));
    }
    let imports: Option<Vec<FileDescriptorProto>> =
        f.imports.iter().map(|(_, text)| serialized(text)).collect();
    if let (Some(mut fdp), Some(imports)) = (serialized(&f.schema), imports) {
        if fdp.name.is_none() {
            fdp.name = Some(ONE_FILE.into());
        }
        let name = fdp.name().to_string();
        let mut pool = DescriptorPool::global();
        pool.add_file_descriptor_protos(imports.into_iter().chain([fdp]))
            .map_err(|e| format!("the Protobuf schema does not resolve: {e}"))?;
        return pool
            .get_file_by_name(&name)
            .ok_or_else(|| "the Protobuf schema holds no file".to_string());
    }
    let mut resolver = protox::file::ChainFileResolver::new();
    resolver.add(Files(
        std::iter::once((ONE_FILE.to_string(), f.schema.clone()))
            .chain(f.imports.iter().cloned())
            .collect(),
    ));
    resolver.add(protox::file::GoogleFileResolver::new());
    let mut compiler = protox::Compiler::with_file_resolver(resolver);
    compiler
        .open_file(ONE_FILE)
        .map_err(|e| format!("the Protobuf schema does not compile: {e}"))?;
    compiler
        .descriptor_pool()
        .get_file_by_name(ONE_FILE)
        .ok_or_else(|| "the Protobuf schema holds no file".to_string())
}

/// The name the registry's `.proto` text is compiled under.
const ONE_FILE: &str = "registry-schema.proto";

/// Serves the registry's `.proto` texts by file name: the schema's as `ONE_FILE`, its
/// imports' by the names they are imported by.
struct Files(Vec<(String, String)>);

impl protox::file::FileResolver for Files {
    fn open_file(&self, name: &str) -> Result<protox::file::File, protox::Error> {
        match self.0.iter().find(|(n, _)| n == name) {
            Some((n, text)) => protox::file::File::from_source(n, text),
            None => Err(protox::Error::file_not_found(name)),
        }
    }
}

/// Reads a zigzag varint.
fn varint(bytes: &mut &[u8]) -> Option<i64> {
    let mut v: u64 = 0;
    for shift in (0..64).step_by(7) {
        let (&b, rest) = bytes.split_first()?;
        *bytes = rest;
        v |= u64::from(b & 0x7f) << shift;
        if b & 0x80 == 0 {
            return Some(((v >> 1) as i64) ^ -((v & 1) as i64));
        }
    }
    None
}

/// The message-index list at the start of `bytes` and the message after it.
pub fn message_indexes(bytes: &[u8]) -> Result<(Vec<i64>, &[u8]), Rejection> {
    let mut rest = bytes;
    let n = varint(&mut rest)
        .ok_or_else(|| schema_error("the Protobuf message-index list is cut short"))?;
    if n == 0 {
        return Ok((vec![0], rest));
    }
    if n < 0 || n as usize > MAX_INDEXES {
        return Err(schema_error(format!(
            "the Protobuf message-index list claims {n} entries (at most {MAX_INDEXES})"
        )));
    }
    let mut path = Vec::with_capacity(n as usize);
    for _ in 0..n {
        path.push(
            varint(&mut rest)
                .ok_or_else(|| schema_error("the Protobuf message-index list is cut short"))?,
        );
    }
    Ok((path, rest))
}

impl Messages {
    /// The tests' schemas: a Protobuf schema's text, without imports.
    #[cfg(test)]
    pub(crate) fn of_text(schema: &str) -> Messages {
        Messages::parse(&Fetched {
            schema_type: "PROTOBUF".into(),
            schema: schema.into(),
            ..Default::default()
        })
        .unwrap()
    }

    pub fn parse(f: &Fetched) -> Result<Messages, String> {
        Ok(Messages { file: pool_of(f)? })
    }

    /// The message type at `path` (indexes into the file's messages, then nested ones).
    pub fn message(&self, path: &[i64]) -> Result<MessageDescriptor, String> {
        let out_of_range = || {
            format!(
                "the message indexes {path:?} name no message type of {} (it has {} at the top)",
                self.file.name(),
                self.file.messages().len()
            )
        };
        let (&first, rest) = path.split_first().ok_or_else(out_of_range)?;
        let mut m = usize::try_from(first)
            .ok()
            .and_then(|i| self.file.messages().nth(i))
            .ok_or_else(out_of_range)?;
        for &i in rest {
            m = usize::try_from(i)
                .ok()
                .and_then(|i| m.child_messages().nth(i))
                .ok_or_else(out_of_range)?;
        }
        Ok(m)
    }

    /// Decodes one message of the type at `path`.
    pub fn decode(&self, path: &[i64], body: &[u8]) -> Result<Value, Rejection> {
        let desc = self.message(path).map_err(schema_error)?;
        let name = desc.full_name().to_string();
        let msg = DynamicMessage::decode(desc, body)
            .map_err(|e| schema_error(format!("the bytes are not a {name} message: {e}")))?;
        Ok(to_json(&msg))
    }
}

fn scalar(v: &prost_reflect::Value, kind: &Kind) -> Value {
    use prost_reflect::Value as P;
    match v {
        P::Bool(b) => Value::Bool(*b),
        P::I32(i) => Value::from(*i),
        P::I64(i) => Value::from(*i),
        P::U32(i) => Value::from(*i),
        P::U64(i) => Value::from(*i),
        P::F32(f) => super::avro::float(f64::from(*f)),
        P::F64(f) => super::avro::float(*f),
        P::String(s) => Value::String(s.clone()),
        P::Bytes(b) => Value::String(String::from_utf8_lossy(b).into()),
        P::EnumNumber(n) => match kind {
            Kind::Enum(e) => e
                .get_value(*n)
                .map_or_else(|| Value::from(*n), |v| Value::String(v.name().into())),
            _ => Value::from(*n),
        },
        P::Message(m) => to_json(m),
        P::List(items) => Value::Array(items.iter().map(|i| scalar(i, kind)).collect()),
        P::Map(m) => Value::Object(
            m.iter()
                .map(|(k, v)| (map_key(k), scalar(v, kind)))
                .collect(),
        ),
    }
}

fn map_key(k: &prost_reflect::MapKey) -> String {
    use prost_reflect::MapKey as K;
    match k {
        K::Bool(b) => b.to_string(),
        K::I32(i) => i.to_string(),
        K::I64(i) => i.to_string(),
        K::U32(i) => i.to_string(),
        K::U64(i) => i.to_string(),
        K::String(s) => s.clone(),
    }
}

/// A message as named fields: every field of the type, except those with presence that are
/// not set (nested messages, `optional` scalars, oneof members), which are absent.
pub fn to_json(msg: &DynamicMessage) -> Value {
    let mut obj = Map::new();
    for field in msg.descriptor().fields() {
        if let Some(v) = field_value(msg, &field) {
            obj.insert(field.name().to_string(), v);
        }
    }
    Value::Object(obj)
}

/// A field's named value in `msg` (None: a field with presence that is not set).
fn field_value(msg: &DynamicMessage, field: &FieldDescriptor) -> Option<Value> {
    if !present(msg, field) {
        return None;
    }
    let kind = match field.kind() {
        // A map's values are of its entry's value field's kind.
        Kind::Message(m) if field.is_map() => m.map_entry_value_field().kind(),
        k => k,
    };
    Some(scalar(&msg.get_field(field), &kind))
}

fn present(msg: &DynamicMessage, field: &FieldDescriptor) -> bool {
    !field.supports_presence() || msg.has_field(field)
}

/// A stream's fields and target in one message type, read from a decoded message without
/// its tree of named fields (`crate::codec::schemad::Located::pick`): the fields on the way to each
/// (None: a name this type does not have, absent as `to_json` would leave it), and the
/// top-level fields the stream does not use.
pub struct Plan {
    fields: Vec<Option<Vec<FieldDescriptor>>>,
    target: Option<Vec<FieldDescriptor>>,
    unused: Vec<FieldDescriptor>,
    /// The same paths read from the message's bytes without decoding it (`scan`), when the
    /// type allows.
    scanner: Option<scan::Scanner>,
}

impl Plan {
    /// None when the tree must read the type: a dotted path through a map field (whose keys
    /// the tree reads as names), or a `columns` field (a named mini-batch, `events`).
    pub fn new(desc: &MessageDescriptor, fields: &Fields, target: &str) -> Option<Plan> {
        if desc.get_field_by_name("columns").is_some() {
            return None;
        }
        let paths = fields
            .fields()
            .iter()
            .map(|f| path(desc, &f.name))
            .collect::<Option<Vec<_>>>()?;
        let target_prefix = |name: &str| {
            target == name
                || target
                    .strip_prefix(name)
                    .is_some_and(|rest| rest.starts_with('.'))
        };
        let target = path(desc, target)?;
        let unused: Vec<FieldDescriptor> = desc
            .fields()
            .filter(|f| !fields.uses(f.name()) && !target_prefix(f.name()))
            .collect();
        let all: Vec<Option<&[FieldDescriptor]>> = paths
            .iter()
            .chain(std::iter::once(&target))
            .map(|p| p.as_deref())
            .collect();
        Some(Plan {
            scanner: scan::Scanner::new(desc, &all, &unused),
            fields: paths,
            target,
            unused,
        })
    }

    /// The stream's fields of a message of the plan's type, read from its bytes without
    /// decoding it; None when the type or the bytes need the decoded message (`scan`).
    pub fn scan(&self, body: &[u8]) -> Option<Picked> {
        self.scanner.as_ref()?.pick(body)
    }

    /// The stream's fields of `msg`, a message of the plan's type.
    pub fn pick(&self, msg: &DynamicMessage) -> Picked {
        Picked {
            values: self
                .fields
                .iter()
                .map(|p| p.as_deref().and_then(|p| value_at(msg, p)))
                .collect(),
            label: self.target.as_deref().and_then(|p| value_at(msg, p)),
            unused: self.unused.iter().filter(|f| present(msg, f)).count() as u64,
        }
    }
}

/// The fields on the way to `name` (by dotted path) in `desc`, as `crate::dotted::lookup` walks the
/// tree: Some(None) where the path ends (a name the type lacks, a value that is not a
/// message), None where it passes through a map.
fn path(desc: &MessageDescriptor, name: &str) -> Option<Option<Vec<FieldDescriptor>>> {
    let mut out = Vec::new();
    let mut at = desc.clone();
    let mut rest = name;
    loop {
        let (head, tail) = match rest.split_once('.') {
            // Protobuf names have no dots: the whole rest is never one field's name.
            Some((head, tail)) => (head, Some(tail)),
            None => (rest, None),
        };
        let Some(field) = at.get_field_by_name(head) else {
            return Some(None);
        };
        let Some(tail) = tail else {
            out.push(field);
            return Some(Some(out));
        };
        if field.is_map() {
            return None;
        }
        match field.kind() {
            Kind::Message(inner) if !field.is_list() => {
                out.push(field);
                at = inner;
                rest = tail;
            }
            // A scalar or a list: nothing is found inside it.
            _ => return Some(None),
        }
    }
}

/// The value at the end of `path` in `msg` (None: absent on the way).
fn value_at(msg: &DynamicMessage, path: &[FieldDescriptor]) -> Option<Value> {
    let (first, rest) = path.split_first()?;
    if rest.is_empty() {
        return field_value(msg, first);
    }
    if !present(msg, first) {
        return None;
    }
    match &*msg.get_field(first) {
        prost_reflect::Value::Message(inner) => value_at(inner, rest),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn zigzag(v: i64) -> Vec<u8> {
        let mut u = ((v << 1) ^ (v >> 63)) as u64;
        let mut out = Vec::new();
        loop {
            if u < 0x80 {
                out.push(u as u8);
                return out;
            }
            out.push((u as u8 & 0x7f) | 0x80);
            u >>= 7;
        }
    }

    const SALE: &str = r#"syntax = "proto3";
        package shop;
        message Other { string note = 1; }
        message Sale {
          double price = 1;
          int64 sqft = 2;
          User user = 3;
          Region region = 4;
          optional double discount = 5;
          message User { int32 age = 1; }
        }
        enum Region { NORTH = 0; SOUTH = 1; }"#;

    #[test]
    fn text_schemas_compile_and_the_index_list_picks_nested_types() {
        let m = Messages::of_text(SALE);
        // Sale { price: 2.5, sqft: 700, user { age: 41 }, region: SOUTH }
        let body = [
            0x09, 0, 0, 0, 0, 0, 0, 0x04, 0x40, // 1: double 2.5
            0x10, 0xbc, 0x05, // 2: 700
            0x1a, 0x02, 0x08, 41, // 3: User { age: 41 }
            0x20, 0x01, // 4: SOUTH
        ];
        let mut framed = zigzag(1);
        framed.extend(zigzag(1));
        framed.extend(body);
        let (path, rest) = message_indexes(&framed).unwrap();
        assert_eq!(path, vec![1]);
        let v = m.decode(&path, rest).unwrap();
        assert_eq!(
            v,
            serde_json::json!({"price": 2.5, "sqft": 700, "user": {"age": 41}, "region": "SOUTH"})
        );
        // The nested User type: [1, 0].
        let v = m.decode(&[1, 0], &[0x08, 7]).unwrap();
        assert_eq!(v, serde_json::json!({"age": 7}));
        // Out of range, and a list cut short.
        let e = m.decode(&[5], &[]).unwrap_err();
        assert!(e.message.contains("name no message type"), "{e:?}");
        assert!(message_indexes(&[0x04, 0x02]).is_err());
        assert_eq!(message_indexes(&[0]).unwrap().0, vec![0]);
    }

    #[test]
    fn imported_schemas_resolve_as_text_and_serialized() {
        use super::super::registry::Reference;
        const COMMON: &str = r#"syntax = "proto3";
            package shop.common;
            message User { int32 age = 1; }"#;
        const ORDER: &str = r#"syntax = "proto3";
            package shop;
            import "shop/common.proto";
            message Order { double price = 1; shop.common.User user = 2; }"#;
        let reference = Reference {
            name: "shop/common.proto".into(),
            subject: "shop/common.proto".into(),
            version: 1,
        };
        let text = Fetched {
            schema_type: "PROTOBUF".into(),
            schema: ORDER.into(),
            references: vec![reference.clone()],
            imports: vec![(reference.name.clone(), COMMON.into())],
        };
        // Order { price: 2.5, user { age: 41 } }
        let body = [
            0x09, 0, 0, 0, 0, 0, 0, 0x04, 0x40, // 1: double 2.5
            0x12, 0x02, 0x08, 41, // 2: User { age: 41 }
        ];
        let want = serde_json::json!({"price": 2.5, "user": {"age": 41}});
        assert_eq!(
            Messages::parse(&text).unwrap().decode(&[0], &body).unwrap(),
            want
        );
        // The same files serialized, as `format=serialized` answers.
        let m = Messages::parse(&text).unwrap();
        let b64 = |f: &FileDescriptor| {
            base64::engine::general_purpose::STANDARD
                .encode(f.file_descriptor_proto().encode_to_vec())
        };
        let common = m.file.dependencies().next().unwrap();
        let serialized = Fetched {
            schema_type: "PROTOBUF".into(),
            schema: b64(&m.file),
            references: vec![reference.clone()],
            imports: vec![(reference.name.clone(), b64(&common))],
        };
        assert_eq!(
            Messages::parse(&serialized)
                .unwrap()
                .decode(&[0], &body)
                .unwrap(),
            want
        );
        // An import the registry did not give is named.
        let e = Messages::parse(&Fetched {
            imports: vec![],
            ..text
        })
        .err()
        .unwrap();
        assert!(e.contains("'shop/common.proto' was not fetched"), "{e}");
    }
}
