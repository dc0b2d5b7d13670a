//! Where a stream that was never read starts (`start` in its table, `crate::config::StartAt`;
//! issue 49). Without a checkpoint of the stream:
//! - `latest` becomes the end of every partition its topic has when the stream is first read
//!   (at the service's start, or when a declaration made over the API is applied), put in the
//!   positions and saved at once with a checkpoint, so a restart goes on from there;
//! - a time is a filter on the messages' Kafka timestamps, the same on every broker (the
//!   embedded one cannot look offsets up by time) and across restarts: a message timestamped
//!   before it, or without a timestamp, is read past and counted
//!   (`ravel_ingest_messages_before_start_total`), never folded; the rest, as windows read
//!   them.
//!
//! A partition the topic gains later is read from its beginning: all of it came after.
//!
//! With the `kafka` store (replicas sharing the partitions, no stream-wide checkpoint) `latest`
//! is per partition: one with no state under the stream's declaration starts at its end when
//! it is first assigned (`rebalance.rs`), and that position is saved as its state at once, so
//! its next owner goes on from there. A partition the topic gains later starts at its end too
//! (the state topic cannot tell it from one never assigned).

use super::fold::StreamIngest;
use super::patiently;
use crate::config::StartAt;
use crate::shutdown::Shutdown;
use crate::state::streams::StreamHandle;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::message::{BorrowedMessage, Message};
use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

/// Whether stream `name` has no checkpoint to go on from (always, without `state.dir`).
pub(super) fn never_read(dir: Option<&Path>, name: &str) -> bool {
    dir.is_none_or(|d| !crate::store::file::path(d, name).exists())
}

/// The next offset of every partition `topic` has now (none when the topic does not exist
/// yet: it is read from its beginning once it does). An error when the cluster does not
/// answer: reading from the beginning instead would fold rows the declaration leaves out.
pub(super) fn ends<C: ConsumerContext>(
    consumer: &BaseConsumer<C>,
    topic: &str,
    shutdown: &Shutdown,
) -> anyhow::Result<BTreeMap<i32, i64>> {
    let unanswered = || {
        anyhow::anyhow!(
            "start = \"latest\": the Kafka cluster did not say where topic '{topic}' ends; \
             ravel stops rather than read the topic from its beginning (start it again once \
             the cluster answers)"
        )
    };
    let md = patiently(shutdown, |t| consumer.fetch_metadata(Some(topic), t).ok())
        .ok_or_else(unanswered)?;
    let Some(t) = md.topics().first().filter(|t| t.error().is_none()) else {
        return Ok(BTreeMap::new());
    };
    let mut ends = BTreeMap::new();
    for p in t.partitions() {
        let (_, high) = patiently(shutdown, |t| {
            consumer.fetch_watermarks(topic, p.id(), t).ok()
        })
        .ok_or_else(unanswered)?;
        ends.insert(p.id(), high);
    }
    Ok(ends)
}

/// The next offset of partition `p` of `topic` now (`kafka` store: a stream that starts at
/// its end takes each partition's when first assigned; the rebalance callback has no shutdown
/// to watch, so three tries of 5 s). None when the cluster does not answer.
pub(super) fn partition_end<C: ConsumerContext>(
    consumer: &BaseConsumer<C>,
    topic: &str,
    p: i32,
) -> Option<i64> {
    (0..3).find_map(|_| {
        consumer
            .fetch_watermarks(topic, p, Duration::from_secs(5))
            .map(|(_, high)| high)
            .map_err(|e| tracing::warn!(topic = %topic, partition = p, error = %e, "where the partition ends: no answer yet"))
            .ok()
    })
}

/// Whether `msg` comes before its stream's `start = TIME` (by its Kafka timestamp).
pub(super) fn before(stream: &StreamIngest, msg: &BorrowedMessage<'_>) -> bool {
    match stream.handle.start {
        StartAt::Time(at) => msg
            .timestamp()
            .to_millis()
            .is_none_or(|ts| ts < 0 || ts < at),
        _ => false,
    }
}

/// Where stream `handle` starts when it was never read and starts at its topic's end
/// (None: it goes on from its checkpoint, or starts at the beginning; or, with the kafka
/// store, `per_partition`, each partition is positioned when first assigned: `rebalance.rs`).
pub(super) fn at_end<C: ConsumerContext>(
    consumer: &BaseConsumer<C>,
    handle: &StreamHandle,
    dir: Option<&Path>,
    per_partition: bool,
    shutdown: &Shutdown,
) -> anyhow::Result<Option<BTreeMap<i32, i64>>> {
    if per_partition || handle.start != StartAt::Latest || !never_read(dir, handle.name()) {
        return Ok(None);
    }
    let ends = ends(consumer, &handle.topic, shutdown)?;
    tracing::info!(stream = %handle.name(), topic = %handle.topic, positions = ?ends, "stream starts at the end of its topic (start = \"latest\")");
    Ok(Some(ends))
}
