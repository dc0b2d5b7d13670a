//! The latest messages of a topic, read by assignment at each partition's end less its share
//! of the limit, never committed: what `ravel check` compares a stream's declared fields with,
//! and what the console proposes a new declaration's fields from (`GET
//! /v1/topics/{topic}/fields`).

use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::message::{Headers, Message};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use std::time::{Duration, Instant};

/// One message read: where it is, its value and its value-schema header (Confluent's header
/// framing).
pub struct Sampled {
    pub partition: i32,
    pub offset: i64,
    pub payload: Option<Vec<u8>>,
    pub schema_header: Option<Vec<u8>>,
}

/// What a topic gave.
pub enum Sample {
    /// The topic has no partition (it does not exist, or the cluster did not answer).
    NoPartition,
    /// Its partitions hold no message.
    Empty,
    /// Up to `limit` of its latest messages, shared out between its partitions (all of them
    /// when it holds fewer; fewer when `until` came first).
    Messages(Vec<Sampled>),
}

/// How many partitions `topic` has (0: none, or no answer before `until`).
pub fn partitions<C: ConsumerContext>(
    consumer: &BaseConsumer<C>,
    topic: &str,
    until: Instant,
) -> usize {
    let left = until.saturating_duration_since(Instant::now());
    consumer.fetch_metadata(Some(topic), left).map_or(0, |md| {
        md.topics()
            .iter()
            .filter(|t| t.error().is_none())
            .map(|t| t.partitions().len())
            .sum()
    })
}

/// Reads up to `limit` of `topic`'s latest messages with `consumer` (its assignment is
/// replaced, then dropped) before `until`, each with its header `schema_header` (the value
/// schema's, `crate::codec::schemad::VALUE_SCHEMA_HEADER`).
pub fn latest<C: ConsumerContext>(
    consumer: &BaseConsumer<C>,
    topic: &str,
    limit: usize,
    until: Instant,
    schema_header: &str,
) -> Sample {
    let left = |until: Instant| until.saturating_duration_since(Instant::now());
    let partitions: Vec<i32> = match consumer.fetch_metadata(Some(topic), left(until)) {
        Ok(md) => md
            .topics()
            .iter()
            .filter(|t| t.error().is_none())
            .flat_map(|t| t.partitions().iter().map(|p| p.id()))
            .collect(),
        Err(_) => Vec::new(),
    };
    if partitions.is_empty() {
        return Sample::NoPartition;
    }
    // What each partition holds; the limit shared out from the smallest up, so that a
    // partition holding less than its share leaves the rest to the others.
    let mut held: Vec<(i32, i64, i64)> = partitions
        .iter()
        .filter_map(|p| {
            let (low, high) = consumer.fetch_watermarks(topic, *p, left(until)).ok()?;
            Some((*p, low, high))
        })
        .collect();
    held.sort_by_key(|(_, low, high)| high - low);
    let mut tpl = TopicPartitionList::new();
    let (mut expected, mut left_over) = (0i64, limit as i64);
    for (i, (p, low, high)) in held.iter().enumerate() {
        let parts = (held.len() - i) as i64;
        let share = (left_over + parts - 1) / parts;
        let take = (high - low).min(share).max(0);
        left_over -= take;
        if take > 0 {
            expected += take;
            let _ = tpl.add_partition_offset(topic, *p, Offset::Offset(high - take));
        }
    }
    if expected == 0 || consumer.assign(&tpl).is_err() {
        return Sample::Empty;
    }
    let mut read = Vec::new();
    while (read.len() as i64) < expected.min(limit as i64) && Instant::now() < until {
        let Some(Ok(m)) = consumer.poll(left(until).min(Duration::from_millis(200))) else {
            continue;
        };
        let schema_header = m.headers().and_then(|h| {
            h.iter()
                .find(|h| h.key == schema_header)
                .and_then(|h| h.value.map(<[u8]>::to_vec))
        });
        read.push(Sampled {
            partition: m.partition(),
            offset: m.offset(),
            payload: m.payload().map(<[u8]>::to_vec),
            schema_header,
        });
    }
    let _ = consumer.unassign();
    // In each partition's order (the polls interleave them).
    read.sort_by_key(|m| (m.partition, m.offset));
    Sample::Messages(read)
}
