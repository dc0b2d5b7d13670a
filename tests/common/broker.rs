//! Talking to the broker directly: producing, reading a topic back with its headers,
//! partitions, committed and end offsets.

use super::DEADLINE;
use ravel::broker::EmbeddedBroker;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Headers, Message};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// Reads every message of `topic` from the beginning, until `want` arrived or the deadline.
pub fn read_topic(
    brokers: &str,
    topic: &str,
    want: usize,
) -> Vec<(Vec<u8>, BTreeMap<String, String>)> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("group.id", "test-reader")
        .set("enable.auto.commit", "false")
        .create()
        .unwrap();
    let md = consumer
        .fetch_metadata(Some(topic), Duration::from_secs(30))
        .unwrap();
    let parts = md.topics()[0].partitions().len() as i32;
    let mut tpl = TopicPartitionList::new();
    for p in 0..parts {
        tpl.add_partition_offset(topic, p, Offset::Beginning)
            .unwrap();
    }
    consumer.assign(&tpl).unwrap();
    let mut out = vec![];
    let start = Instant::now();
    while out.len() < want && start.elapsed() < DEADLINE {
        if let Some(Ok(m)) = consumer.poll(Duration::from_millis(200)) {
            out.push((m.payload().unwrap_or(&[]).to_vec(), headers_of(&m)));
        }
    }
    out
}

/// A message's headers, values as text.
pub fn headers_of(m: &impl Message) -> BTreeMap<String, String> {
    m.headers()
        .map(|h| {
            h.iter()
                .map(|hd| {
                    (
                        hd.key.to_string(),
                        String::from_utf8_lossy(hd.value.unwrap_or(&[])).into_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Partitions of `topic` as the cluster reports them; None when it does not have the topic
/// (the probe never makes the embedded broker create it).
pub fn topic_partitions(brokers: &str, topic: &str) -> Option<usize> {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("allow.auto.create.topics", "false")
        .create()
        .unwrap();
    let md = c
        .fetch_metadata(Some(topic), Duration::from_secs(10))
        .ok()?;
    let t = md.topics().first()?;
    (t.error().is_none() && !t.partitions().is_empty()).then(|| t.partitions().len())
}

/// A consumer of `group` that does not join it, for reading offsets (6 s sessions: the mock
/// broker makes the next join wait for the session timeout of the last member that left).
pub fn group_client(brokers: &str, group: &str) -> BaseConsumer {
    ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .set("session.timeout.ms", "6000")
        .create()
        .unwrap()
}

/// `group`'s committed offset of each of `topic`'s partitions 0..`partitions` (-1: none).
pub fn committed_offsets(brokers: &str, group: &str, topic: &str, partitions: i32) -> Vec<i64> {
    let consumer = group_client(brokers, group);
    let mut tpl = TopicPartitionList::new();
    for p in 0..partitions {
        tpl.add_partition(topic, p);
    }
    let got = consumer
        .committed_offsets(tpl, Duration::from_secs(30))
        .unwrap();
    let out = (0..partitions)
        .map(|p| match got.find_partition(topic, p).unwrap().offset() {
            Offset::Offset(o) => o,
            _ => -1,
        })
        .collect();
    // The list must be gone before the consumer (its destructor hangs otherwise).
    drop(got);
    out
}

/// The end (high watermark, ListOffsets latest) of each of `topic`'s partitions 0..`partitions`.
pub fn end_offsets(brokers: &str, topic: &str, partitions: i32) -> Vec<i64> {
    let consumer = group_client(brokers, "watermarks");
    (0..partitions)
        .map(|p| {
            consumer
                .fetch_watermarks(topic, p, Duration::from_secs(30))
                .unwrap()
                .1
        })
        .collect()
}

/// One message to send: its value (None: a tombstone), and optionally its Kafka timestamp
/// (Unix ms) and partition (else the partitioner's choice).
#[derive(Debug, Clone, Default)]
pub struct Record {
    pub value: Option<Vec<u8>>,
    pub timestamp: Option<i64>,
    pub partition: Option<i32>,
}

impl Record {
    pub fn of(value: impl Into<Vec<u8>>) -> Record {
        Record {
            value: Some(value.into()),
            ..Record::default()
        }
    }
    /// A JSON value's bytes.
    pub fn json(value: &serde_json::Value) -> Record {
        Record::of(serde_json::to_vec(value).unwrap())
    }
    pub fn at(self, timestamp: i64) -> Record {
        Record {
            timestamp: Some(timestamp),
            ..self
        }
    }
}

/// Sends `records` to `topic` in order, with librdkafka properties `options`, and waits until
/// the broker has every one.
pub fn send_records(
    brokers: &str,
    topic: &str,
    records: impl IntoIterator<Item = Record>,
    options: &[(&str, &str)],
) {
    let mut cfg = ClientConfig::new();
    cfg.set("bootstrap.servers", brokers);
    for (k, v) in options {
        cfg.set(*k, *v);
    }
    let producer: BaseProducer = cfg.create().unwrap();
    for r in records {
        let mut record = BaseRecord::<[u8], [u8]>::to(topic);
        if let Some(v) = &r.value {
            record = record.payload(v.as_slice());
        }
        if let Some(t) = r.timestamp {
            record = record.timestamp(t);
        }
        if let Some(p) = r.partition {
            record = record.partition(p);
        }
        producer.send(record).map_err(|(e, _)| e).unwrap();
        producer.poll(Duration::ZERO);
    }
    producer.flush(Duration::from_secs(30)).unwrap();
}

/// Sends `(payload, Kafka timestamp in Unix ms)` pairs to `topic` in order, and waits until
/// the broker has every one.
pub fn send_stamped(brokers: &str, topic: &str, messages: &[(Vec<u8>, i64)]) {
    let records = messages.iter().map(|(v, t)| Record::of(v.clone()).at(*t));
    send_records(brokers, topic, records, &[]);
}

/// Sends `payloads` to `topic` in order (to `partition`, or the partitioner's choice), with
/// librdkafka properties `options`, and waits until the broker has every one.
pub fn send(
    brokers: &str,
    topic: &str,
    partition: Option<i32>,
    payloads: &[Vec<u8>],
    options: &[(&str, &str)],
) {
    let records = payloads.iter().map(|v| Record {
        partition,
        ..Record::of(v.clone())
    });
    send_records(brokers, topic, records, options);
}

/// The records of `topic` from offset `from[p]` up to `to[p]` of each partition p: key, the
/// `ravel-state` header (or ""), and the value's bytes (None for a tombstone).
pub fn read_range(
    brokers: &str,
    topic: &str,
    from: &[i64],
    to: &[i64],
) -> Vec<(String, String, Option<Vec<u8>>)> {
    let consumer = group_client(brokers, "range-reader");
    let mut tpl = TopicPartitionList::new();
    for (p, &o) in from.iter().enumerate() {
        tpl.add_partition_offset(topic, p as i32, Offset::Offset(o))
            .unwrap();
    }
    consumer.assign(&tpl).unwrap();
    let want: i64 = to.iter().zip(from).map(|(t, f)| t - f).sum();
    let mut out = vec![];
    let start = Instant::now();
    while (out.len() as i64) < want && start.elapsed() < DEADLINE {
        if let Some(Ok(m)) = consumer.poll(Duration::from_millis(200))
            && m.offset() < to[m.partition() as usize]
        {
            let kind = headers_of(&m).remove("ravel-state").unwrap_or_default();
            let key = String::from_utf8_lossy(m.key().unwrap_or(&[])).into_owned();
            out.push((key, kind, m.payload().map(<[u8]>::to_vec)));
        }
    }
    assert_eq!(
        out.len() as i64,
        want,
        "records of {topic} in {from:?}..{to:?}"
    );
    out
}

/// An embedded broker of one node with `topics` (name, partitions) created, and its
/// bootstrap servers.
pub fn broker_with(topics: &[(&str, i32)]) -> (EmbeddedBroker, String) {
    let broker = EmbeddedBroker::start(1).unwrap();
    for (t, p) in topics {
        broker.create_topic(t, *p).unwrap();
    }
    let brokers = broker.bootstrap_servers().to_string();
    (broker, brokers)
}

/// Messages in every partition of `topic` (high minus low watermark, summed).
pub fn messages_in(brokers: &str, topic: &str) -> i64 {
    let consumer = group_client(brokers, "count");
    let md = consumer
        .fetch_metadata(Some(topic), Duration::from_secs(10))
        .unwrap();
    let parts = md.topics()[0].partitions().len() as i32;
    (0..parts)
        .map(|p| {
            let (lo, hi) = consumer
                .fetch_watermarks(topic, p, Duration::from_secs(10))
                .unwrap();
            hi - lo
        })
        .sum()
}
