//! A topic's fields, to declare a stream from (issue 49: `GET /v1/topics/{topic}/fields`, and
//! the console's form that proposes them). The topic's latest messages are read as `ravel
//! check` reads them (`crate::kafka::sample`: by assignment at each partition's end, never
//! committed), each decoded as a tree (a JSON event; with a `format`, a Confluent-framed Avro,
//! Protobuf or JSON Schema value through the Schema Registry, as ingest decodes it), and every
//! leaf counted by its dotted path (`sale.price`, as a stream's `features` name it) and kind.
//! The numbers and booleans seen in at least half the events are proposed as features, but
//! the target (named with `target`, or else a field named like one: `y`, `target`, `label`)
//! and identifiers (a name like `id` or `order_id`, or whole numbers that only increase in
//! each partition: a counter, a timestamp); each field left out says why (`left_out`).

use crate::codec::schemad::{Record, SchemaRegistry, Wire};
use crate::config::StreamConfig;
use crate::kafka::KafkaClients;
use crate::kafka::sample::{Sample, latest};
use serde::Serialize;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
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
    /// A declaration to start from: the topic, the format, the target (the one asked for,
    /// or a field named like one: check it), and as features the numeric and boolean paths
    /// seen in at least half the events but the target and identifiers (`left_out` of each
    /// field says why it is not one). Check the target (and add a name) before a PUT.
    #[schema(value_type = Object)]
    pub proposal: Value,
    /// Numeric paths whose values only increased in each partition (identifiers).
    #[serde(skip)]
    counters: BTreeSet<String>,
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
    /// Why the proposal does not list it as a feature (absent: it does).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub left_out: Option<String>,
}

/// The last segment of a dotted path, as a name is judged by.
fn last_segment(path: &str) -> &str {
    path.rsplit('.').next().unwrap_or(path)
}

/// A name that says it holds an identifier: `id`, `order_id`, `order-id`, `orderId`, `ID`.
fn named_like_an_id(path: &str) -> bool {
    let last = last_segment(path);
    let lower = last.to_ascii_lowercase();
    lower == "id"
        || lower.ends_with("_id")
        || lower.ends_with("-id")
        || (last.ends_with("Id") && last[..last.len() - 2].ends_with(|c: char| c.is_lowercase()))
}

/// A name that says it holds the target.
fn named_like_a_target(path: &str) -> bool {
    matches!(
        last_segment(path).to_ascii_lowercase().as_str(),
        "y" | "target" | "label"
    )
}

/// Per numeric path, whether its values are whole numbers that only increase within each
/// partition (in offset order): a counter, a sequence number, a timestamp.
#[derive(Default)]
struct Rising {
    last: BTreeMap<i32, f64>,
    values: usize,
    steps: usize,
    broken: bool,
}

impl Rising {
    fn see(&mut self, partition: i32, v: f64) {
        self.values += 1;
        if v.fract() != 0.0 {
            self.broken = true;
        }
        if let Some(l) = self.last.insert(partition, v) {
            self.steps += 1;
            if v <= l {
                self.broken = true;
            }
        }
    }
    /// Judged from five values and three steps at least.
    fn counter(&self) -> bool {
        !self.broken && self.values >= 5 && self.steps >= 3
    }
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

    /// The fields of `topic`'s latest `events` messages, read as `format` (None: JSON), the
    /// proposal without `target` (None: a field named like one). Errors are in the caller's
    /// words (the query parameter, the topic).
    pub fn fields(
        &self,
        topic: &str,
        events: usize,
        format: Option<&str>,
        target: Option<&str>,
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
        let consumer = crate::declared::data::consumer(&self.clients)?;
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
            Ok::<(i32, Value), String>((m.partition, tree))
        });
        let mut fields = tally(topic, trees);
        fields.sampled = messages.len();
        propose(&mut fields, target);
        if let Some(f) = format {
            fields.proposal["format"] = f.into();
        }
        Ok(fields)
    }
}

/// The proposal of `fields` (tallied): the numbers and booleans seen in at least half the
/// events, but the target and identifiers, each left out with why.
fn propose(fields: &mut TopicFields, target: Option<&str>) {
    let events = fields.events;
    let guessed: Vec<&str> = fields
        .fields
        .iter()
        .filter(|f| (f.kind == "number" || f.kind == "boolean") && named_like_a_target(&f.path))
        .map(|f| f.path.as_str())
        .collect();
    // The target named, or the one field named like one.
    let (target, named) = match (target, guessed.as_slice()) {
        (Some(t), _) => (Some(t.to_string()), true),
        (None, [one]) => (Some(one.to_string()), false),
        _ => (None, false),
    };
    for f in &mut fields.fields {
        f.left_out = if Some(&f.path) == target.as_ref() {
            Some(if named {
                "the target (target = ...)".to_string()
            } else {
                "the target, by its name (name another with ?target=...)".to_string()
            })
        } else if f.kind == "null" {
            Some("never held a value".to_string())
        } else if f.kind != "number" && f.kind != "boolean" {
            Some(format!(
                "a {} (features are numbers or booleans here; text can be one-hot or hashed: docs/streams.md)",
                f.kind
            ))
        } else if named_like_an_id(&f.path) {
            Some("an identifier, by its name".to_string())
        } else if fields.counters.contains(&f.path) {
            Some("an identifier: whole numbers that only increase in each partition (a counter, a timestamp)".to_string())
        } else if 2 * f.seen < events {
            Some("held a value in fewer than half the events".to_string())
        } else {
            None
        };
    }
    let features: Vec<String> = (fields.fields.iter())
        .filter(|f| f.left_out.is_none())
        .map(|f| f.path.clone())
        .collect();
    fields.proposal = serde_json::json!({"topic": fields.topic, "features": features});
    if let Some(t) = target {
        fields.proposal["target"] = t.into();
    }
}

/// Counts the leaf paths of decoded messages (`Err`: not an event, with why), each with its
/// partition, in each partition's order.
fn tally(topic: &str, trees: impl Iterator<Item = Result<(i32, Value), String>>) -> TopicFields {
    // Path -> events with a value, and kind -> count.
    let mut paths: BTreeMap<String, (usize, BTreeMap<&'static str, usize>)> = BTreeMap::new();
    let mut rising: BTreeMap<String, Rising> = BTreeMap::new();
    let (mut events, mut unreadable, mut first_unreadable, mut more) = (0, 0, None, 0);
    for tree in trees {
        match tree {
            Ok((partition, Value::Object(map))) => {
                events += 1;
                let mut prefix = String::new();
                walk(&map, &mut prefix, &mut |path, kind, number| {
                    if let Some(v) = number
                        && (rising.contains_key(path) || rising.len() < MAX_PATHS)
                    {
                        rising
                            .entry(path.to_string())
                            .or_default()
                            .see(partition, v);
                    }
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
                left_out: None,
            }
        })
        .collect();
    fields.sort_by(|a, b| b.seen.cmp(&a.seen).then_with(|| a.path.cmp(&b.path)));
    let counters = (rising.into_iter())
        .filter(|(_, r)| r.counter())
        .map(|(p, _)| p)
        .collect();
    TopicFields {
        topic: topic.to_string(),
        sampled: 0,
        events,
        unreadable,
        first_unreadable,
        fields,
        more_paths: more,
        proposal: Value::Null,
        counters,
    }
}

/// Calls `leaf(path, kind, number)` for every leaf of `map` (objects are walked into, with
/// dots; `number`: a number's value).
fn walk(
    map: &serde_json::Map<String, Value>,
    prefix: &mut String,
    leaf: &mut impl FnMut(&str, &'static str, Option<f64>),
) {
    for (key, value) in map {
        let len = prefix.len();
        if !prefix.is_empty() {
            prefix.push('.');
        }
        prefix.push_str(key);
        match value {
            Value::Object(inner) if !inner.is_empty() => walk(inner, prefix, leaf),
            Value::Object(_) | Value::Null => leaf(prefix, "null", None),
            Value::Number(n) => leaf(prefix, "number", n.as_f64()),
            Value::Bool(_) => leaf(prefix, "boolean", None),
            Value::String(_) => leaf(prefix, "string", None),
            Value::Array(_) => leaf(prefix, "list", None),
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
            Ok((
                0,
                json!({"sale": {"price": 10.5, "rooms": 3}, "city": "Oslo", "new": true}),
            )),
            Ok((
                0,
                json!({"sale": {"price": 12.0, "rooms": null}, "city": "Bergen", "tags": [1]}),
            )),
            Ok((1, json!({"sale": {"price": 9.0}, "city": null}))),
            Ok((1, json!([1, 2]))),
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

    /// Events of two partitions: a sequence number and a timestamp rising in each (one
    /// partition's behind the other's), a rating that rises by chance in one partition only,
    /// ids by name, a string, and the target.
    fn shop(i: i64) -> (i32, Value) {
        let part = (i % 2) as i32;
        let seq = i / 2 + 1000 * i64::from(part);
        (
            part,
            json!({"seq": seq, "at": 1_700_000_000_000i64 + i * 1000 - 500_000 * i64::from(part),
                   "order": {"customerId": (i * 7919) % 13}, "sku_id": (i * 31) % 7,
                   "rating": if part == 0 { i } else { (i * 5) % 3 },
                   "price": 3.5 + (i % 4) as f64, "city": "Oslo", "label": i % 2 == 0}),
        )
    }

    #[test]
    fn the_proposal_leaves_out_the_target_and_identifiers_saying_why() {
        let t = |target: Option<&str>| {
            let mut f = tally("t", (0..12).map(shop).map(Ok));
            propose(&mut f, target);
            f
        };
        let f = t(None);
        assert_eq!(
            f.proposal,
            json!({"topic": "t", "features": ["price", "rating"], "target": "label"})
        );
        let why = |f: &TopicFields, path: &str| {
            f.fields
                .iter()
                .find(|x| x.path == path)
                .and_then(|x| x.left_out.clone())
                .unwrap_or_default()
        };
        for (path, reason) in [
            ("seq", "only increase"),
            ("at", "only increase"),
            ("order.customerId", "by its name"),
            ("sku_id", "by its name"),
            ("city", "a string"),
            ("label", "the target, by its name"),
        ] {
            assert!(
                why(&f, path).contains(reason),
                "{path}: {:?}",
                why(&f, path)
            );
        }
        // The target named: the field named like one is a feature again.
        let f = t(Some("price"));
        assert_eq!(
            f.proposal,
            json!({"topic": "t", "features": ["label", "rating"], "target": "price"})
        );
        // Too few values to call a rising field a counter.
        let mut few = tally("t", (0..4).map(shop).map(Ok));
        propose(&mut few, None);
        assert!(
            few.proposal["features"]
                .as_array()
                .unwrap()
                .contains(&json!("seq"))
        );
        assert!(named_like_an_id("ID") && named_like_an_id("user.Id") && !named_like_an_id("paid"));
    }
}
