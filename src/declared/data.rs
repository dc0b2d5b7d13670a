//! A stream's declared fields checked against its topic's data (issue 59): the topic's latest
//! messages (`crate::kafka::sample`: by assignment at each partition's end, never committed)
//! decoded with the stream's format as ingest decodes them, and every declared field and the
//! target absent from all of them named with the event keys closest to it ("did you mean
//! customer.age"). A misspelled name is otherwise learned quietly: a column of zeros, or every
//! event dead-lettered or left out.
//!
//! `ravel check` reports it (`crate::cli::check`); `PUT /v1/streams/{name}` refuses a
//! declaration with absent fields (`Refusal::Absent`, 422) unless the request accepts them
//! (`?absent_fields=accept`), when the answer carries the warning. A topic that holds no
//! message, or none read by name, is accepted and the answer says there was nothing to check.
//! Bounded for the PUT: `PER_PARTITION` messages a partition, at most `MAX_MESSAGES`, within
//! `TIMEOUT`.

use crate::codec::format;
use crate::codec::schema::Schema;
use crate::codec::schemad::{SchemaRegistry, Wire};
use crate::config::StreamConfig;
use crate::kafka::sample::{Sample, latest, partitions};
use crate::kafka::{Client, KafkaClients};
use crate::state::sightings::{NeverSeen, Sightings};
use rdkafka::consumer::BaseConsumer;
use serde::Serialize;
use std::sync::Arc;
use std::time::{Duration, Instant};
use utoipa::ToSchema;

/// A PUT reads this many of the latest messages of each partition,
pub const PER_PARTITION: usize = 10;
/// at most this many in all,
pub const MAX_MESSAGES: usize = 200;
/// within this long.
pub const TIMEOUT: Duration = Duration::from_secs(3);

/// What the latest messages of a stream's topic said about its declared fields.
#[derive(Debug)]
pub enum Looked {
    /// The stream reads no field by name (positional rows, binary mini-batches).
    Unnamed,
    /// The topic has no partition (it does not exist, or the cluster did not answer).
    NoPartition,
    /// Its partitions hold no message.
    Empty,
    /// `read` messages were read, none of them by name (another shape, undecodable, or none
    /// within the time).
    Unread { read: usize },
    /// `events` of the `read` messages were read by name; `absent`: the declared fields and
    /// target none of them carried.
    Events {
        read: usize,
        events: u64,
        absent: Vec<NeverSeen>,
    },
    /// The topic could not be sampled (the consumer, the stream's schemas): why.
    Failed(String),
}

/// A consumer that reads by assignment and commits nothing (`crate::kafka::sample`).
pub fn consumer(clients: &KafkaClients) -> Result<BaseConsumer, String> {
    let mut cfg = clients.config(
        Client::Check,
        &[
            ("group.id", clients.group().to_string()),
            ("enable.auto.commit", "false".into()),
            ("enable.auto.offset.store", "false".into()),
        ],
    );
    cfg.set("allow.auto.create.topics", "false");
    cfg.create().map_err(|e| {
        format!(
            "cannot create a Kafka consumer: {}",
            clients.scrub(&e.to_string())
        )
    })
}

/// Stream `s`'s declared fields against up to `limit` of its topic's latest messages, read
/// before `until` with `consumer`; `limit` None: `PER_PARTITION` a partition, at most
/// `MAX_MESSAGES`.
pub fn look(
    s: &StreamConfig,
    consumer: &BaseConsumer,
    registry: Option<&Arc<SchemaRegistry>>,
    limit: Option<usize>,
    until: Instant,
) -> Looked {
    let fields = match s.fields() {
        Ok(Some(f)) => f,
        _ => return Looked::Unnamed,
    };
    let wire = match Wire::of_stream(s, registry) {
        Ok(w) => w,
        Err(e) => return Looked::Failed(format!("{e:#}")),
    };
    let topic = s.topic();
    let limit = limit.unwrap_or_else(|| {
        (PER_PARTITION * partitions(consumer, &topic, until).max(1)).min(MAX_MESSAGES)
    });
    let sightings = Sightings::new(
        fields.fields().iter().map(|f| f.name.clone()).collect(),
        s.target.clone(),
        limit as u64,
    );
    let sampled = match latest(
        consumer,
        &topic,
        limit,
        until,
        crate::kafka::VALUE_SCHEMA_HEADER,
    ) {
        Sample::NoPartition => return Looked::NoPartition,
        Sample::Empty => return Looked::Empty,
        Sample::Messages(m) => m,
    };
    let schema = Schema {
        p: fields.p(),
        fields: Some(&fields),
        target: s.target.as_deref(),
        skip_missing_target: true,
        classification: false,
        unlabelled: false,
        wire: wire.as_ref(),
        schema_header: None,
        plan: None,
    };
    for m in &sampled {
        let schema = Schema {
            schema_header: wire.as_ref().and(m.schema_header.as_deref()),
            ..schema
        };
        if let Some(seen) = m
            .payload
            .as_deref()
            .and_then(|b| format::presence(b, &schema))
        {
            sightings.record(seen);
        }
    }
    let events = sightings.summary().events;
    if events == 0 {
        return Looked::Unread {
            read: sampled.len(),
        };
    }
    Looked::Events {
        read: sampled.len(),
        events,
        absent: sightings.absent(),
    }
}

/// The absent fields in words, as `ravel check` and a refused PUT say them.
pub fn absent_in_words(absent: &[NeverSeen], events: u64) -> Option<String> {
    crate::state::sightings::warning(absent, events).map(|w| w.replace("the first", "the latest"))
}

/// What a declaration's PUT found in its topic's data (`fields_check` of the answer).
#[derive(Debug, Clone, Serialize, ToSchema, PartialEq)]
pub struct FieldsChecked {
    /// `found` (every declared field and the target is in the topic's latest messages),
    /// `absent_accepted` (some are in none of them, declared anyway with
    /// `?absent_fields=accept`), `empty_topic` (the topic holds no message: nothing to check)
    /// or `not_checked` (the stream reads no field by name, or no message was read by name).
    pub outcome: &'static str,
    /// Messages read from the topic's end.
    pub sampled: usize,
    /// Of them, events read by name (JSON objects, named rows, schema'd records).
    pub events: u64,
    /// The declared fields and target absent from every one of those events, with the event
    /// keys closest to each.
    pub absent: Vec<NeverSeen>,
    /// What was found, in words; with `absent_accepted`, the warning.
    pub note: String,
}

/// The answer to a PUT of stream `s` whose topic gave `looked`: checked, or refused (the
/// message) when fields are absent and `accept_absent` is false.
pub fn judge(
    s: &StreamConfig,
    looked: Looked,
    accept_absent: bool,
) -> Result<FieldsChecked, String> {
    let topic = s.topic();
    let checked = |outcome, sampled, events, note: String| FieldsChecked {
        outcome,
        sampled,
        events,
        absent: Vec::new(),
        note,
    };
    Ok(match looked {
        Looked::Unnamed => checked(
            "not_checked",
            0,
            0,
            "the stream reads its features by position: no field name to check".into(),
        ),
        Looked::NoPartition => checked(
            "not_checked",
            0,
            0,
            format!("topic '{topic}' has no partition to read"),
        ),
        Looked::Empty => checked(
            "empty_topic",
            0,
            0,
            format!(
                "topic '{topic}' holds no message yet: nothing to check the declared fields \
                 against (the stream's summary, fields_seen, names any field absent from its \
                 first events)"
            ),
        ),
        Looked::Unread { read } => checked(
            "not_checked",
            read,
            0,
            format!(
                "none of the {read} latest messages of topic '{topic}' read within {} s is an \
                 event or a named row: nothing to check the declared fields against",
                TIMEOUT.as_secs()
            ),
        ),
        Looked::Failed(why) => checked(
            "not_checked",
            0,
            0,
            format!("topic '{topic}' could not be sampled: {why}"),
        ),
        Looked::Events {
            read,
            events,
            absent,
        } => match absent_in_words(&absent, events) {
            None => checked(
                "found",
                read,
                events,
                format!(
                    "every declared field{} is in the {events} latest events of topic '{topic}'",
                    if s.target.is_some() {
                        " and the target"
                    } else {
                        ""
                    }
                ),
            ),
            Some(w) if accept_absent => FieldsChecked {
                outcome: "absent_accepted",
                sampled: read,
                events,
                absent,
                note: format!("declared with absent_fields=accept although on topic '{topic}' {w}"),
            },
            Some(w) => {
                return Err(format!(
                    "stream '{}' on topic '{topic}': {w}; or, to declare the stream as it is, \
                     send the PUT again with ?absent_fields=accept",
                    s.name
                ));
            }
        },
    })
}
