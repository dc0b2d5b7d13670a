//! `ravel produce --wire-format avro | protobuf | json-schema --schema-registry URL`: one
//! record per row in the Confluent wire format, its schema registered the way Confluent's
//! serializers do (`POST /subjects/<topic>-value/versions`, the answer's id in every message's
//! header bytes; Protobuf as the base64 of a serialized `FileDescriptorProto`, as Confluent's
//! Python serializer registers it, and the message-index list `[0]`), so a user can try a
//! schema'd stream (`format = "avro"`) without writing a producer. A column named with dots
//! (`user.age`) becomes a field of a nested record (`{"user": {"age": ..}}`, a nested message
//! type in Protobuf), as a stream's dotted feature names read it; every value is a double.

use anyhow::{Context, bail};
use apache_avro::types::Value as Avro;
use base64::Engine;
use prost_reflect::prost::Message as _;
use prost_reflect::prost_types::field_descriptor_proto::{Label, Type};
use prost_reflect::prost_types::{DescriptorProto, FieldDescriptorProto, FileDescriptorProto};
use prost_reflect::{DescriptorPool, DynamicMessage, MessageDescriptor};
use serde_json::{Value, json};

/// The framed formats `ravel produce` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Avro,
    Protobuf,
    JsonSchema,
}

/// The Protobuf package of the rows' message type (`ravel.produce.Row`).
const PROTO_PACKAGE: &str = "ravel.produce";

/// A field of the record: a value, or a nested record of fields.
#[derive(Debug, Clone, PartialEq)]
enum Node {
    Leaf(usize),
    Record(Vec<(String, Node)>),
}

/// The record shape of the names (dotted ones nested), each leaf the index of its value.
fn tree(names: &[String]) -> anyhow::Result<Vec<(String, Node)>> {
    let mut root: Vec<(String, Node)> = Vec::new();
    for (i, name) in names.iter().enumerate() {
        let parts: Vec<&str> = name.split('.').collect();
        for part in &parts {
            let ok = part
                .chars()
                .next()
                .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && part.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !ok {
                bail!(
                    "column '{name}' cannot be a field of a schema'd record: use letters, digits \
                     and '_' (a '.' nests, as in user.age); rename it in the file's header"
                );
            }
        }
        let mut level = &mut root;
        for (depth, part) in parts.iter().enumerate() {
            let found = level.iter().position(|(n, _)| n == part);
            if depth + 1 == parts.len() {
                if found.is_some() {
                    bail!("column '{name}' is given twice, or as a value and a record");
                }
                level.push((part.to_string(), Node::Leaf(i)));
                break;
            }
            let at = found.unwrap_or_else(|| {
                level.push((part.to_string(), Node::Record(Vec::new())));
                level.len() - 1
            });
            level = match &mut level[at].1 {
                Node::Record(children) => children,
                Node::Leaf(_) => {
                    bail!("column '{name}' is given twice, or as a value and a record")
                }
            };
        }
    }
    Ok(root)
}

fn avro_schema(fields: &[(String, Node)], path: &str) -> Value {
    let fields: Vec<Value> = fields
        .iter()
        .map(|(name, node)| match node {
            Node::Leaf(_) => json!({"name": name, "type": "double"}),
            Node::Record(children) => {
                json!({"name": name, "type": avro_schema(children, &format!("{path}_{name}"))})
            }
        })
        .collect();
    json!({"type": "record", "name": path, "fields": fields})
}

fn json_schema(fields: &[(String, Node)]) -> Value {
    let props: serde_json::Map<String, Value> = fields
        .iter()
        .map(|(name, node)| {
            let v = match node {
                Node::Leaf(_) => json!({"type": "number"}),
                Node::Record(children) => json_schema(children),
            };
            (name.clone(), v)
        })
        .collect();
    let required: Vec<&String> = fields.iter().map(|(n, _)| n).collect();
    json!({"type": "object", "properties": props, "required": required})
}

/// The message type `name` of `fields` (records as nested types `<Field>Record`), its fields
/// numbered in order, every value a double (proto3).
fn proto_message(name: &str, fields: &[(String, Node)], scope: &str) -> DescriptorProto {
    let mut m = DescriptorProto {
        name: Some(name.to_string()),
        ..Default::default()
    };
    for (number, (field, node)) in (1..).zip(fields) {
        let mut f = FieldDescriptorProto {
            name: Some(field.clone()),
            number: Some(number),
            label: Some(Label::Optional as i32),
            ..Default::default()
        };
        match node {
            Node::Leaf(_) => f.r#type = Some(Type::Double as i32),
            Node::Record(children) => {
                let nested = proto_record_name(field);
                f.r#type = Some(Type::Message as i32);
                f.type_name = Some(format!(".{scope}.{name}.{nested}"));
                m.nested_type
                    .push(proto_message(&nested, children, &format!("{scope}.{name}")));
            }
        }
        m.field.push(f);
    }
    m
}

/// The nested message type of a record field: `user` -> `UserRecord`.
fn proto_record_name(field: &str) -> String {
    let mut c = field.chars();
    let first = c.next().map(|f| f.to_ascii_uppercase());
    first.into_iter().chain(c).chain("Record".chars()).collect()
}

/// The file of the rows' message type, serialized.
fn proto_file(fields: &[(String, Node)]) -> FileDescriptorProto {
    FileDescriptorProto {
        name: Some("ravel_produce_row.proto".into()),
        package: Some(PROTO_PACKAGE.into()),
        syntax: Some("proto3".into()),
        message_type: vec![proto_message("Row", fields, PROTO_PACKAGE)],
        ..Default::default()
    }
}

/// Registers the record schema of `names` and encodes rows with its id.
pub struct Framed {
    kind: Kind,
    id: u32,
    fields: Vec<(String, Node)>,
    avro: Option<apache_avro::Schema>,
    proto: Option<MessageDescriptor>,
}

impl Framed {
    /// `names`: the features' then the target's.
    pub fn register(
        kind: Kind,
        registry: &str,
        auth: Option<&str>,
        topic: &str,
        names: &[String],
    ) -> anyhow::Result<Framed> {
        let fields = tree(names)?;
        let (schema, schema_type) = match kind {
            Kind::Avro => (avro_schema(&fields, "Row").to_string(), None),
            Kind::Protobuf => (
                base64::engine::general_purpose::STANDARD
                    .encode(proto_file(&fields).encode_to_vec()),
                Some("PROTOBUF"),
            ),
            Kind::JsonSchema => (json_schema(&fields).to_string(), Some("JSON")),
        };
        let mut body = json!({"schema": schema});
        if let Some(t) = schema_type {
            body["schemaType"] = json!(t);
        }
        let url = format!(
            "{}/subjects/{topic}-value/versions",
            registry.trim_end_matches('/')
        );
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(std::time::Duration::from_secs(30)))
            .http_status_as_error(false)
            .build()
            .into();
        let mut req = agent
            .post(&url)
            .header("Content-Type", "application/vnd.schemaregistry.v1+json");
        if let Some(a) = auth {
            req = req.header(
                "Authorization",
                format!(
                    "Basic {}",
                    base64::engine::general_purpose::STANDARD.encode(a)
                ),
            );
        }
        let mut resp = req
            .send(body.to_string())
            .with_context(|| format!("cannot reach the Schema Registry at {registry}"))?;
        let status = resp.status().as_u16();
        let text = resp
            .body_mut()
            .with_config()
            .limit(1 << 20)
            .read_to_string()
            .unwrap_or_default();
        if status != 200 {
            bail!(
                "the Schema Registry at {registry} refused the schema of subject '{topic}-value' ({status}: {text})"
            );
        }
        let id = serde_json::from_str::<Value>(&text)
            .ok()
            .and_then(|v| v["id"].as_u64())
            .and_then(|id| u32::try_from(id).ok())
            .with_context(|| format!("the Schema Registry's answer holds no schema id: {text}"))?;
        let avro = match kind {
            Kind::Avro => {
                Some(apache_avro::Schema::parse_str(&schema).context("the generated Avro schema")?)
            }
            _ => None,
        };
        let proto = match kind {
            Kind::Protobuf => {
                let mut pool = DescriptorPool::new();
                pool.add_file_descriptor_proto(proto_file(&fields))
                    .context("the generated Protobuf schema")?;
                pool.get_message_by_name(&format!("{PROTO_PACKAGE}.Row"))
            }
            _ => None,
        };
        Ok(Framed {
            kind,
            id,
            fields,
            avro,
            proto,
        })
    }

    /// The schema id every message carries.
    pub fn id(&self) -> u32 {
        self.id
    }

    /// One framed record of `values` (the features then the target).
    pub fn encode(&self, values: &[f64], out: &mut Vec<u8>) -> anyhow::Result<()> {
        out.clear();
        out.push(0);
        out.extend_from_slice(&self.id.to_be_bytes());
        match (self.kind, &self.avro) {
            (Kind::Avro, Some(schema)) => {
                let record = built(&self.fields, values, &Avro::Double, &Avro::Record);
                let bytes = apache_avro::writer::datum::GenericDatumWriter::builder(schema)
                    .build()?
                    .write_value_to_vec(record)?;
                out.extend_from_slice(&bytes);
            }
            (Kind::Protobuf, _) => {
                fn message(
                    desc: MessageDescriptor,
                    fields: &[(String, Node)],
                    values: &[f64],
                ) -> DynamicMessage {
                    let mut m = DynamicMessage::new(desc.clone());
                    for ((_, node), field) in fields.iter().zip(desc.fields()) {
                        let v = match node {
                            Node::Leaf(i) => prost_reflect::Value::F64(values[*i]),
                            Node::Record(c) => {
                                let nested = field.kind();
                                let nested = nested.as_message().expect("a record's field");
                                prost_reflect::Value::Message(message(nested.clone(), c, values))
                            }
                        };
                        m.set_field(&field, v);
                    }
                    m
                }
                let desc = self
                    .proto
                    .clone()
                    .expect("registered with its message type");
                // The message-index list [0] (the file's first message type), then the message.
                out.push(0);
                message(desc, &self.fields, values).encode(out)?;
            }
            _ => {
                let object = built(&self.fields, values, &|v| json!(v), &|members| {
                    Value::Object(members.into_iter().collect())
                });
                serde_json::to_writer(&mut *out, &object)?;
            }
        }
        Ok(())
    }
}

/// The record `fields` describe with its leaves' values from `values`, as one format builds
/// it (`leaf`: a value; `record`: the named members of a record).
fn built<T>(
    fields: &[(String, Node)],
    values: &[f64],
    leaf: &impl Fn(f64) -> T,
    record: &impl Fn(Vec<(String, T)>) -> T,
) -> T {
    record(
        fields
            .iter()
            .map(|(n, node)| {
                let v = match node {
                    Node::Leaf(i) => leaf(values[*i]),
                    Node::Record(c) => built(c, values, leaf, record),
                };
                (n.clone(), v)
            })
            .collect(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(n: &[&str]) -> Vec<String> {
        n.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn dotted_names_nest_and_bad_names_are_refused() {
        let t = tree(&names(&["sqft", "user.age", "user.id", "price"])).unwrap();
        assert_eq!(
            t,
            vec![
                ("sqft".into(), Node::Leaf(0)),
                (
                    "user".into(),
                    Node::Record(vec![
                        ("age".into(), Node::Leaf(1)),
                        ("id".into(), Node::Leaf(2))
                    ])
                ),
                ("price".into(), Node::Leaf(3)),
            ]
        );
        let s = avro_schema(&t, "Row");
        apache_avro::Schema::parse_str(&s.to_string()).unwrap();
        assert!(tree(&names(&["a-b"])).is_err());
        assert!(tree(&names(&["user", "user.age"])).is_err());
        assert!(tree(&names(&["a", "a"])).is_err());
    }
}
