//! Schema'd message values (issue 32): Avro, Protobuf and JSON Schema in the Confluent wire
//! format (byte 0 = 0, bytes 1..5 = the big-endian schema id, then the Avro datum, the
//! Protobuf message-index list and message, or the JSON text), the schema id in the
//! `__value_schema_id` header of newer serializers instead (a GUID), and plain Avro datums of a
//! schema given in the config. Each record is decoded with its own writer's schema by the
//! maintained crates (`apache-avro`, `prost-reflect`) into a tree of named fields, which the
//! stream's field mapping reads exactly as it reads a JSON event (ingest's `events`): fields
//! by name or dotted path, so schema changes mid-stream (fields added, removed, reordered, an int
//! widened to a long or a double) are followed by name and never change the row's expansion.
//!
//! A message that is not framed, names a schema the registry does not know, or does not match
//! its schema is a bad message (reason `schema`); a registry that cannot answer is not
//! (`registry`: the message waits). JSON Schema values come back as the JSON text after the
//! framing, for ingest's own parser (its `events`), which refuses duplicate keys.

pub mod avro;
pub mod avro_batch;
pub mod protobuf;
pub mod registry;

use crate::config::StreamConfig;
use crate::config::schemas::ValueFormat;
use crate::reason::{Reason, Rejection};
use ravel_core::fields::Fields;
use registry::{FetchError, Fetched, Registry, SchemaRef};
use serde_json::Value;
use std::sync::Arc;

pub use crate::kafka::VALUE_SCHEMA_HEADER;

/// A decoded value: a tree of named fields, or JSON text for ingest's parser.
#[derive(Debug, PartialEq)]
pub enum Record<'a> {
    Tree(Value),
    Json(&'a [u8]),
}

/// A value's mapped fields read without its tree (`Located::pick`): each field's value (None:
/// absent), the target's, and how many top-level fields the stream does not use.
#[derive(Debug, PartialEq)]
pub struct Picked {
    pub values: Vec<Option<Value>>,
    pub label: Option<Value>,
    pub unused: u64,
}

/// A schema as decoding needs it, parsed once per id.
pub enum Parsed {
    Avro(Box<AvroSchema>),
    Protobuf(protobuf::Messages),
    /// JSON Schema: the id is checked to be known and of this type; the JSON is read as an
    /// event.
    Json,
}

/// An Avro schema, the named types it references, and whether `avro::pick` reads its datums.
pub struct AvroSchema {
    pub schema: apache_avro::Schema,
    /// The schemas of the registry's references (`Fetched::imports`), where the schema's
    /// references to named types of other subjects are defined.
    pub refs: Vec<apache_avro::Schema>,
    pub pickable: bool,
}

impl AvroSchema {
    pub fn new(schema: apache_avro::Schema) -> AvroSchema {
        AvroSchema::with_refs(schema, Vec::new())
    }

    pub fn with_refs(schema: apache_avro::Schema, refs: Vec<apache_avro::Schema>) -> AvroSchema {
        AvroSchema {
            pickable: refs.is_empty() && avro::pickable(&schema),
            schema,
            refs,
        }
    }
}

/// The registry the framed formats share.
pub type SchemaRegistry = Registry<Parsed>;

/// How one stream's values are decoded.
pub struct Wire {
    format: ValueFormat,
    /// `avro_schema_file`: plain datums of this schema.
    plain: Option<AvroSchema>,
    registry: Option<Arc<SchemaRegistry>>,
    /// The stream's fields and target as `avro::pick` reads them, made on first use (None:
    /// fields it cannot lay out, read through the tree).
    plan: std::sync::OnceLock<Option<Arc<avro::Plan>>>,
    /// Its plans in the Protobuf message types met so far.
    proto_plans: std::sync::Mutex<ProtoPlans>,
    /// Its arrow-avro decoders of the Avro schemas met so far (`pick_batch`).
    batches: std::sync::Mutex<AvroBatches>,
}

/// A schema's projected decoder (None: its values are read one by one), by the schema's
/// registry entry (None: the stream's `avro_schema_file`).
type AvroBatches = Vec<(Option<Arc<Parsed>>, Option<avro_batch::Projected>)>;

/// What `Wire::pick_batch` found for one value: its mapped fields, or its refusal (the
/// framing, the schema id), or nothing (it is read one by one, `Wire::locate`).
pub enum Early {
    Picked(Picked),
    /// The row of a stream whose fields are all numbers refusing missing values
    /// (`Fields::is_plain`), every value and the target a finite number: what the field
    /// mapping makes of its `Picked`, with `unused` fields left aside.
    Row {
        x: Vec<f64>,
        y: f64,
        unused: u64,
    },
    Refused(Rejection),
}

/// Where one value's schema was found (`Wire::locate`).
enum Found<'w> {
    /// The stream's `avro_schema_file`.
    Plain(&'w AvroSchema),
    /// The registry's schema of this reference.
    Registry(SchemaRef, Arc<Parsed>),
}

/// One value with its schema: read by `pick` without its tree when the schema allows, or
/// as a tree by `tree`.
pub struct Located<'w, 'a> {
    wire: &'w Wire,
    schema: Found<'w>,
    payload: &'a [u8],
    /// The payload after the framing.
    rest: &'a [u8],
    /// Where the Protobuf message indexes are (after the framing, or in the header).
    indexes: &'a [u8],
    /// The schema id came in the header: the payload is the message itself.
    header: bool,
}

impl<'a> Located<'_, 'a> {
    /// The Avro schema, if the value is Avro.
    fn avro(&self) -> Option<&AvroSchema> {
        match &self.schema {
            Found::Plain(schema) => Some(schema),
            Found::Registry(_, parsed) => match &**parsed {
                Parsed::Avro(schema) => Some(schema),
                _ => None,
            },
        }
    }

    /// The Protobuf message's type path and bytes.
    fn protobuf(&self) -> Result<(Vec<i64>, &'a [u8]), Rejection> {
        let (path, body) = protobuf::message_indexes(self.indexes)?;
        Ok((path, if self.header { self.payload } else { body }))
    }

    /// The stream's `fields` and `target` of the value, read without its tree when its
    /// schema allows: an Avro datum straight through the crate's deserializer
    /// (`avro::pick`), a Protobuf message from its decoded fields (`protobuf::Plan`). None
    /// when the schema does not allow it, or the bytes do not match it: `tree` then reads
    /// the value and says what is wrong.
    pub fn pick(&self, fields: &Fields, target: &str) -> Option<Picked> {
        if let Some(schema) = self.avro() {
            let plan = self.wire.avro_plan(fields, target)?;
            return avro::pick(schema.pickable.then_some(&schema.schema)?, self.rest, plan);
        }
        let Found::Registry(_, parsed) = &self.schema else {
            return None;
        };
        let Parsed::Protobuf(messages) = &**parsed else {
            return None;
        };
        let (path, body) = self.protobuf().ok()?;
        let desc = messages.message(&path).ok()?;
        let plan = self.wire.proto_plan(&desc, fields, target)?;
        if let Some(picked) = plan.scan(body) {
            return Some(picked);
        }
        let msg = prost_reflect::DynamicMessage::decode(desc, body).ok()?;
        Some(plan.pick(&msg))
    }

    /// The value as a tree of named fields (or the JSON text of a JSON Schema value).
    pub fn tree(&self) -> Result<Record<'a>, Rejection> {
        let (at, parsed) = match &self.schema {
            Found::Plain(schema) => return avro::decode(schema, self.rest).map(Record::Tree),
            Found::Registry(at, parsed) => (at, parsed),
        };
        match &**parsed {
            Parsed::Avro(schema) => avro::decode(schema, self.rest)
                .map(Record::Tree)
                .map_err(|e| schema_error(format!("{at}: {}", e.message))),
            Parsed::Protobuf(messages) => {
                let (path, body) = self.protobuf()?;
                messages
                    .decode(&path, body)
                    .map(Record::Tree)
                    .map_err(|e| schema_error(format!("{at}: {}", e.message)))
            }
            Parsed::Json => Ok(Record::Json(self.rest)),
        }
    }
}

type ProtoPlans = Vec<(
    prost_reflect::MessageDescriptor,
    Option<Arc<protobuf::Plan>>,
)>;

/// Message types a stream keeps a Protobuf plan for (schema versions times types).
const MAX_PROTOBUF_PLANS: usize = 64;

/// Avro schemas a stream keeps an arrow-avro decoder for.
const MAX_AVRO_BATCHES: usize = 64;

impl std::fmt::Debug for Wire {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Wire")
            .field("format", &self.format)
            .field("plain", &self.plain.is_some())
            .finish()
    }
}

/// A bad message of reason `schema`.
fn schema_error(message: impl Into<String>) -> Rejection {
    Rejection {
        reason: Reason::Schema,
        message: message.into(),
    }
}

impl Wire {
    /// The stream's decoder (None for `format = "ravel"`), its plain Avro schema read and
    /// parsed now (an error stops the start, naming the file).
    pub fn of_stream(
        s: &StreamConfig,
        registry: Option<&Arc<SchemaRegistry>>,
    ) -> anyhow::Result<Option<Wire>> {
        if s.format.is_ravel() {
            return Ok(None);
        }
        // Once for the process: a corrupt length in a datum cannot ask for more.
        apache_avro::util::max_allocation_bytes(avro::MAX_ALLOCATION_BYTES);
        let plain = match &s.avro_schema_file {
            Some(path) => {
                let text = std::fs::read_to_string(path).map_err(|e| {
                    anyhow::anyhow!(
                        "stream '{}': avro_schema_file: cannot read {}: {e}",
                        s.name,
                        path.display()
                    )
                })?;
                Some(AvroSchema::new(
                    apache_avro::Schema::parse_str(&text).map_err(|e| {
                        anyhow::anyhow!(
                            "stream '{}': avro_schema_file {} is not an Avro schema: {e}",
                            s.name,
                            path.display()
                        )
                    })?,
                ))
            }
            None => None,
        };
        if plain.is_none() && registry.is_none() {
            anyhow::bail!(
                "stream '{}': format = \"{}\" needs [schema_registry] url",
                s.name,
                s.format.name()
            );
        }
        Ok(Some(Wire {
            format: s.format,
            plain,
            registry: registry.cloned(),
            plan: Default::default(),
            proto_plans: Default::default(),
            batches: Default::default(),
        }))
    }

    /// Whether the stream's values are Avro.
    pub fn is_avro(&self) -> bool {
        self.format == ValueFormat::Avro
    }

    /// Plain datums of `schema` (what `avro_schema_file` configures).
    pub fn plain(schema: apache_avro::Schema) -> Wire {
        Wire {
            format: ValueFormat::Avro,
            plain: Some(AvroSchema::new(schema)),
            registry: None,
            plan: Default::default(),
            proto_plans: Default::default(),
            batches: Default::default(),
        }
    }

    /// Decodes one value into a tree of named fields (or the JSON text of a JSON Schema
    /// value). `header` is the `__value_schema_id` header's value, when the message has one.
    pub fn decode<'a>(
        &self,
        payload: &'a [u8],
        header: Option<&'a [u8]>,
    ) -> Result<Record<'a>, Rejection> {
        self.locate(payload, header)?.tree()
    }

    /// The schema of one value (its framing or header read, its schema fetched or cached),
    /// once, for `Located::pick` and then, if need be, `Located::tree`.
    pub fn locate<'a>(
        &self,
        payload: &'a [u8],
        header: Option<&'a [u8]>,
    ) -> Result<Located<'_, 'a>, Rejection> {
        if let Some(schema) = &self.plain {
            return Ok(Located {
                wire: self,
                schema: Found::Plain(schema),
                payload,
                rest: payload,
                indexes: payload,
                header: false,
            });
        }
        let (at, rest, indexes) = match header {
            Some(h) => {
                let (at, indexes) = header_ref(h)?;
                (at, payload, indexes)
            }
            None => {
                let (at, rest) = framed(payload, self.format)?;
                (at, rest, rest)
            }
        };
        let format = self.format;
        let registry = self
            .registry
            .as_ref()
            .ok_or_else(|| schema_error("no [schema_registry] to fetch the schema from"))?;
        let parsed = registry
            .get(&at, format == ValueFormat::Protobuf, |f| {
                parse(format, &at, f)
            })
            .map_err(|e| match e {
                FetchError::NotFound(why) => schema_error(why),
                FetchError::Stopping => Rejection {
                    reason: Reason::Unavailable,
                    message: format!("stopping before the Schema Registry gave {at}"),
                },
            })?;
        Ok(Located {
            wire: self,
            schema: Found::Registry(at, parsed),
            payload,
            rest,
            indexes,
            header: header.is_some(),
        })
    }

    /// The stream's fields and target as `avro::pick` reads them, made on first use.
    fn avro_plan(&self, fields: &Fields, target: &str) -> Option<&Arc<avro::Plan>> {
        self.plan
            .get_or_init(|| {
                let names = fields.fields().iter().map(|f| f.name.as_str());
                avro::Plan::new(names, target).map(Arc::new)
            })
            .as_ref()
    }

    /// The stream's `fields` and `target` of many Avro values (payload and schema-id header
    /// each) read at once (`avro_batch`): the values of one schema decoded by arrow-avro into
    /// one record batch. One entry per value: its mapped fields (or its row, for plain
    /// fields: `Early::Row`, for labelled rows only), its refusal (framing, schema id: what
    /// `locate` says), or None when it is to be read one by one (a value framed in a header, a
    /// schema `avro_batch` does not read, a datum arrow-avro refused).
    pub fn pick_batch(
        &self,
        values: &[(&[u8], Option<&[u8]>)],
        fields: &Fields,
        target: &str,
    ) -> Vec<Option<Early>> {
        let mut out: Vec<Option<Early>> = values.iter().map(|_| None).collect();
        if self.format != ValueFormat::Avro {
            return out;
        }
        let Some(plan) = self.avro_plan(fields, target) else {
            return out;
        };
        let same = |a: &Option<Arc<Parsed>>, b: &Option<Arc<Parsed>>| match (a, b) {
            (None, None) => true,
            (Some(a), Some(b)) => Arc::ptr_eq(a, b),
            _ => false,
        };
        // The values by schema, in their order.
        type Group<'v> = (Option<Arc<Parsed>>, Vec<(usize, &'v [u8])>);
        let mut groups: Vec<Group> = Vec::new();
        for (i, (payload, header)) in values.iter().enumerate() {
            if header.is_some() {
                continue;
            }
            let located = match self.locate(payload, None) {
                Ok(l) => l,
                Err(e) => {
                    out[i] = Some(Early::Refused(e));
                    continue;
                }
            };
            let key = match &located.schema {
                Found::Plain(_) => None,
                Found::Registry(_, parsed) => Some(Arc::clone(parsed)),
            };
            match groups.iter_mut().find(|(k, _)| same(k, &key)) {
                Some((_, members)) => members.push((i, located.rest)),
                None => groups.push((key, vec![(i, located.rest)])),
            }
        }
        let mut batches = crate::lock(&self.batches);
        for (key, members) in groups {
            let schema = match &key {
                None => self.plain.as_ref(),
                Some(parsed) => match &**parsed {
                    Parsed::Avro(schema) => Some(&**schema),
                    _ => None,
                },
            };
            let Some(schema) = schema else { continue };
            let at = match batches.iter().position(|(k, _)| same(k, &key)) {
                Some(at) => at,
                None => {
                    if batches.len() >= MAX_AVRO_BATCHES {
                        // Bounded, as the registry's cache: schemas seen again are made again.
                        batches.clear();
                    }
                    batches.push((key.clone(), avro_batch::Projected::new(schema, plan)));
                    batches.len() - 1
                }
            };
            let Some(projected) = &mut batches[at].1 else {
                continue;
            };
            let bodies: Vec<&[u8]> = members.iter().map(|(_, body)| *body).collect();
            let rows = fields.is_plain();
            for ((i, _), early) in members.iter().zip(projected.pick(&bodies, rows)) {
                out[*i] = early;
            }
        }
        out
    }

    /// The stream's plan in message type `desc`, made once per type (at most
    /// `MAX_PROTOBUF_PLANS`; beyond, None: the tree reads those).
    fn proto_plan(
        &self,
        desc: &prost_reflect::MessageDescriptor,
        fields: &Fields,
        target: &str,
    ) -> Option<Arc<protobuf::Plan>> {
        let mut plans = self
            .proto_plans
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some((_, plan)) = plans.iter().find(|(d, _)| d == desc) {
            return plan.clone();
        }
        let plan = protobuf::Plan::new(desc, fields, target).map(Arc::new);
        if plans.len() < MAX_PROTOBUF_PLANS {
            plans.push((desc.clone(), plan.clone()));
        }
        plan
    }
}

/// The schema reference and the rest of a framed payload.
fn framed(payload: &[u8], format: ValueFormat) -> Result<(SchemaRef, &[u8]), Rejection> {
    match payload {
        [0, a, b, c, d, rest @ ..] => {
            Ok((SchemaRef::Id(u32::from_be_bytes([*a, *b, *c, *d])), rest))
        }
        [0, ..] => Err(schema_error(format!(
            "a Confluent-framed value has byte 0 then a 4-byte schema id; this one has {} bytes",
            payload.len()
        ))),
        [] => Err(schema_error(
            "an empty value: a Confluent-framed value has byte 0 then a 4-byte schema id",
        )),
        [first, ..] => Err(schema_error(format!(
            "not in the Confluent wire format: the first byte is {first:#04x}, not 0 (the \
             stream reads format = \"{}\" written by a Confluent serializer; is the topic written \
             as plain {}?)",
            format.name(),
            if *first == b'{' { "JSON" } else { "data" }
        ))),
    }
}

/// The `__value_schema_id` header: byte 1 and a 16-byte GUID (or byte 0 and a 4-byte id),
/// then, for Protobuf, the message indexes.
fn header_ref(h: &[u8]) -> Result<(SchemaRef, &[u8]), Rejection> {
    match h {
        [1, rest @ ..] if rest.len() >= 16 => {
            let g = &rest[..16];
            let hex: String = g.iter().map(|b| format!("{b:02x}")).collect();
            let guid = format!(
                "{}-{}-{}-{}-{}",
                &hex[0..8],
                &hex[8..12],
                &hex[12..16],
                &hex[16..20],
                &hex[20..32]
            );
            Ok((SchemaRef::Guid(guid), &rest[16..]))
        }
        [0, a, b, c, d, rest @ ..] => {
            Ok((SchemaRef::Id(u32::from_be_bytes([*a, *b, *c, *d])), rest))
        }
        _ => Err(schema_error(format!(
            "the {VALUE_SCHEMA_HEADER} header holds {} bytes: expected byte 1 and a 16-byte GUID \
             (or byte 0 and a 4-byte id)",
            h.len()
        ))),
    }
}

/// Parses a fetched schema of the stream's format.
fn parse(format: ValueFormat, at: &SchemaRef, f: Fetched) -> Result<Parsed, String> {
    if f.schema_type != format.schema_type() {
        return Err(format!(
            "{at} is a {} schema; the stream reads format = \"{}\"",
            f.schema_type,
            format.name()
        ));
    }
    match format {
        ValueFormat::Avro | ValueFormat::Ravel => {
            let parsed = if f.imports.is_empty() {
                apache_avro::Schema::parse_str(&f.schema).map(AvroSchema::new)
            } else {
                // Named types of other subjects (the registry's references), defined there.
                let imported = f.imports.iter().map(|(_, text)| text);
                apache_avro::Schema::parse_str_with_list(&f.schema, imported)
                    .map(|(schema, refs)| AvroSchema::with_refs(schema, refs))
            };
            parsed
                .map(|s| Parsed::Avro(Box::new(s)))
                .map_err(|e| format!("{at} is not an Avro schema (with its references): {e}"))
        }
        ValueFormat::Protobuf => protobuf::Messages::parse(&f)
            .map(Parsed::Protobuf)
            .map_err(|e| format!("{at}: {e}")),
        ValueFormat::JsonSchema => Ok(Parsed::Json),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn framing_errors_say_what_the_bytes_are() {
        let e = framed(b"{\"price\": 1}", ValueFormat::Avro).unwrap_err();
        assert!(e.message.contains("first byte is 0x7b"), "{e:?}");
        let e = framed(&[0, 0, 1], ValueFormat::Avro).unwrap_err();
        assert!(e.message.contains("has 3 bytes"), "{e:?}");
        assert_eq!(
            framed(&[0, 0, 0, 1, 2, 9], ValueFormat::Avro).unwrap(),
            (SchemaRef::Id(258), &[9u8][..])
        );
        let mut h = vec![1];
        h.extend(0u8..16);
        let (at, rest) = header_ref(&h).unwrap();
        assert_eq!(
            at,
            SchemaRef::Guid("00010203-0405-0607-0809-0a0b0c0d0e0f".into())
        );
        assert!(rest.is_empty());
        assert!(header_ref(&[1, 2, 3]).is_err());
    }
}
