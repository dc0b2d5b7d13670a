//! A topic's fields, to declare a stream from (issue 49: `GET /v1/topics/{topic}/fields`, and
//! the console's form that proposes them). The topic's latest messages are read as `ravel
//! check` reads them (`crate::kafka::sample`: by assignment at each partition's end, never
//! committed), each decoded as a tree (a JSON event; with a `format`, a Confluent-framed Avro,
//! Protobuf or JSON Schema value through the Schema Registry, as ingest decodes it), and every
//! leaf counted by its dotted path (`sale.price`, as a stream's `features` name it) and kind.
//! The numbers and booleans are proposed as features; which one is the target is the
//! person's call.

use crate::codec::schemad::{Record, SchemaRegistry, Wire};
use crate::config::StreamConfig;
use crate::kafka::sample::{Sample, latest};
use crate::kafka::{Client, KafkaClients};
use rdkafka::consumer::BaseConsumer;
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};
use utoipa::ToSchema;

/// At most this many messages a request (`events`).
pub const MAX_EVENTS: usize = 1000;
/// At most this many distinct paths are listed (the rest counted in `more_paths`).
const MAX_PATHS: usize = 2000;
/// How long the sampling may take.
const TIMEOUT: Duration = Duration::from_secs(5);

/// What the latest messages of a topic carry.
#[derive(Debug, Serialize, ToSchema)]
pub struct TopicFields {
    pub topic: String,
    /// Messages read.
    pub sampled: usize,
    /// Of them, events decoded to a record (a JSON object, or a schema'd record).
    pub events: usize,
    /// Messages that are not such an event (other formats, damaged, no value), with the first
    /// reason.
    pub unreadable: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub first_unreadable: Option<String>,
    /// Every leaf path, most seen first.
    pub fields: Vec<FieldSeen>,
    /// Paths beyond the listed ones.
    pub more_paths: usize,
    /// A declaration to start from: the topic, the format, the numeric and boolean paths seen
    /// in at least half the events as features. Add `target` (and a name) before a PUT.
    #[schema(value_type = Object)]
    pub proposal: Value,
}

/// One leaf path of the events.
#[derive(Debug, Serialize, ToSchema, PartialEq)]
pub struct FieldSeen {
    /// Dotted path, as `features` and `target` name it.
    pub path: String,
    /// What it held most often: `number`, `boolean`, `string`, `list` or `null`.
    pub kind: String,
    /// Events in which it held a value (not null).
    pub seen: usize,
}

/// The Kafka clients and the Schema Registry of the service, to sample topics with.
pub struct Sampler {
    clients: KafkaClients,
    registry: Option<Arc<SchemaRegistry>>,
}

impl Sampler {
    pub fn new(clients: KafkaClients, registry: Option<Arc<SchemaRegistry>>) -> Sampler {
        Sampler { clients, registry }
    }

    /// The fields of `topic`'s latest `events` messages, read as `format` (None: JSON).
    /// Errors are in the caller's words (the query parameter, the topic).
    pub fn fields(
        &self,
        topic: &str,
        events: usize,
        format: Option<&str>,
    ) -> Result<TopicFields, String> {
        if !(1..=MAX_EVENTS).contains(&events) {
            return Err(format!(
                "events = {events}: ask for 1 to {MAX_EVENTS} messages"
            ));
        }
        // The format read as a declaration reads it (its errors, its registry).
        let mut table = serde_json::json!({"topic": topic, "features": 1});
        if let Some(f) = format {
            table["format"] = f.into();
        }
        let stream: StreamConfig = crate::declared::parse("sample", table.to_string().as_bytes())
            .map_err(|r| match r {
            crate::declared::Refusal::Invalid(m) => m,
            other => format!("{other:?}"),
        })?;
        if !stream.format.is_ravel() && self.registry.is_none() {
            return Err(format!(
                "format = \"{}\" reads each message's schema from a Schema Registry: set \
                 [schema_registry] url",
                stream.format.name()
            ));
        }
        let wire =
            Wire::of_stream(&stream, self.registry.as_ref()).map_err(|e| format!("{e:#}"))?;
        let mut cfg = self.clients.config(
            Client::Check,
            &[
                ("group.id", self.clients.group().to_string()),
                ("enable.auto.commit", "false".into()),
                ("enable.auto.offset.store", "false".into()),
            ],
        );
        cfg.set("allow.auto.create.topics", "false");
        let consumer: BaseConsumer = cfg.create().map_err(|e| {
            format!(
                "cannot create a Kafka consumer: {}",
                self.clients.scrub(&e.to_string())
            )
        })?;
        let messages = match latest(
            &consumer,
            topic,
            events,
            Instant::now() + TIMEOUT,
            crate::kafka::VALUE_SCHEMA_HEADER,
        ) {
            Sample::NoPartition => {
                return Err(format!(
                    "topic '{topic}' does not exist on the cluster (or the cluster did not answer \
                     within {} s)",
                    TIMEOUT.as_secs()
                ));
            }
            Sample::Empty => Vec::new(),
            Sample::Messages(m) => m,
        };
        let trees = messages.iter().map(|m| {
            let payload = m.payload.as_deref().ok_or("a message without a value")?;
            let tree = match &wire {
                None => crate::codec::events::parse(payload).map_err(|r| r.message)?,
                Some(w) => match w
                    .locate(payload, m.schema_header.as_deref())
                    .and_then(|l| l.tree())
                    .map_err(|r| r.message)?
                {
                    Record::Tree(v) => v,
                    Record::Json(text) => {
                        crate::codec::events::parse(text).map_err(|r| r.message)?
                    }
                },
            };
            Ok::<Value, String>(tree)
        });
        let mut fields = tally(topic, trees);
        fields.sampled = messages.len();
        fields.proposal = serde_json::json!({"topic": topic, "features": fields
            .fields
            .iter()
            .filter(|f| (f.kind == "number" || f.kind == "boolean") && 2 * f.seen >= fields.events)
            .map(|f| f.path.clone())
            .collect::<Vec<_>>()});
        if let Some(f) = format {
            fields.proposal["format"] = f.into();
        }
        Ok(fields)
    }
}

/// Counts the leaf paths of decoded messages (`Err`: not an event, with why).
fn tally(topic: &str, trees: impl Iterator<Item = Result<Value, String>>) -> TopicFields {
    // Path -> events with a value, and kind -> count.
    let mut paths: BTreeMap<String, (usize, BTreeMap<&'static str, usize>)> = BTreeMap::new();
    let (mut events, mut unreadable, mut first_unreadable, mut more) = (0, 0, None, 0);
    for tree in trees {
        match tree {
            Ok(Value::Object(map)) => {
                events += 1;
                let mut prefix = String::new();
                walk(&map, &mut prefix, &mut |path, kind| {
                    if let Some(e) = paths.get_mut(path) {
                        e.0 += usize::from(kind != "null");
                        *e.1.entry(kind).or_default() += 1;
                    } else if paths.len() < MAX_PATHS {
                        let counts = BTreeMap::from([(kind, 1)]);
                        paths.insert(path.to_string(), (usize::from(kind != "null"), counts));
                    } else {
                        more += 1;
                    }
                });
            }
            Ok(_) => {
                unreadable += 1;
                first_unreadable.get_or_insert_with(|| "a JSON value that is not an object".into());
            }
            Err(why) => {
                unreadable += 1;
                first_unreadable.get_or_insert(why);
            }
        }
    }
    let mut fields: Vec<FieldSeen> = paths
        .into_iter()
        .map(|(path, (seen, kinds))| {
            // The kind held most often, a value before null.
            let kind = kinds
                .iter()
                .max_by_key(|(k, n)| (**k != "null", **n))
                .map_or("null", |(k, _)| k);
            FieldSeen {
                path,
                kind: kind.to_string(),
                seen,
            }
        })
        .collect();
    fields.sort_by(|a, b| b.seen.cmp(&a.seen).then_with(|| a.path.cmp(&b.path)));
    TopicFields {
        topic: topic.to_string(),
        sampled: 0,
        events,
        unreadable,
        first_unreadable,
        fields,
        more_paths: more,
        proposal: Value::Null,
    }
}

/// Calls `leaf(path, kind)` for every leaf of `map` (objects are walked into, with dots).
fn walk(
    map: &serde_json::Map<String, Value>,
    prefix: &mut String,
    leaf: &mut impl FnMut(&str, &'static str),
) {
    for (key, value) in map {
        let len = prefix.len();
        if !prefix.is_empty() {
            prefix.push('.');
        }
        prefix.push_str(key);
        match value {
            Value::Object(inner) if !inner.is_empty() => walk(inner, prefix, leaf),
            Value::Object(_) | Value::Null => leaf(prefix, "null"),
            Value::Number(_) => leaf(prefix, "number"),
            Value::Bool(_) => leaf(prefix, "boolean"),
            Value::String(_) => leaf(prefix, "string"),
            Value::Array(_) => leaf(prefix, "list"),
        }
        prefix.truncate(len);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn leaves_are_counted_by_dotted_path_and_kind() {
        let events = vec![
            Ok(json!({"sale": {"price": 10.5, "rooms": 3}, "city": "Oslo", "new": true})),
            Ok(json!({"sale": {"price": 12.0, "rooms": null}, "city": "Bergen", "tags": [1]})),
            Ok(json!({"sale": {"price": 9.0}, "city": null})),
            Ok(json!([1, 2])),
            Err("not JSON".to_string()),
        ];
        let t = tally("t", events.into_iter());
        assert_eq!((t.events, t.unreadable), (3, 2));
        assert_eq!(
            t.first_unreadable.as_deref(),
            Some("a JSON value that is not an object")
        );
        let got: Vec<(&str, &str, usize)> = t
            .fields
            .iter()
            .map(|f| (f.path.as_str(), f.kind.as_str(), f.seen))
            .collect();
        assert_eq!(
            got,
            vec![
                ("sale.price", "number", 3),
                ("city", "string", 2),
                ("new", "boolean", 1),
                ("sale.rooms", "number", 1),
                ("tags", "list", 1),
            ]
        );
    }
}
