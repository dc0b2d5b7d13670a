//! Accepting one message: which stream or feature stream it belongs to, the retention check
//! (a partition whose unread rows were deleted), folding or rejecting it (its copy handed to
//! the dead-letter thread and recorded in `held`, the partition going on at once), and applying
//! the dead-letter outcomes: acknowledged copies clear checkpoints' fences and may resume a
//! partition paused at its bound.

use super::checkpoints::positions;
use super::{Early, Ingest, Target};
use crate::dead_letters::dlq;
use crate::lock;
use rdkafka::consumer::Consumer;
use rdkafka::message::{BorrowedMessage, Message};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use std::time::{Duration, Instant};

impl Ingest {
    /// Decodes one message into its stream's pending rows, or applies it to its feature stream,
    /// or rejects it; then moves the position past it. A rejected row-stream message's copy is
    /// recorded as unacknowledged (with `block`): no checkpoint covers it until it is
    /// delivered, and the partition pauses once its unacknowledged copies reach the bound.
    /// Messages of a paused partition, and messages before a partition's position (already in
    /// the statistics), are dropped unread. Returns the rows (1 for a feature-stream message).
    pub(super) fn accept(&mut self, msg: &BorrowedMessage<'_>, early: Option<Early>) -> usize {
        let (topic, partition, offset) = (msg.topic(), msg.partition(), msg.offset());
        let Some(&target) = self.by_topic.get(topic) else {
            return 0;
        };
        if self.streams.iter().any(|s| s.halted) {
            // Stopping with a message left unread: nothing after it is read either.
            return 0;
        }
        if self.held.is_paused(topic, partition) {
            // Fetched before the pause took effect, or the partition came back in a
            // rebalance: pause (again); it is read again from its position.
            self.pause(topic, partition);
            return 0;
        }
        let next = positions::next(&lock(&self.positions), topic, partition);
        if next.is_some_and(|n| offset < n) {
            return 0;
        }
        if let Some(n) = next
            && offset > n
        {
            self.check_deleted(target, topic, partition, n, offset);
        }
        let dead_letters = self.dead_letters.as_ref();
        let rows = match target {
            Target::Rows(i) if super::start::before(&self.streams[i], msg) => {
                self.metrics
                    .ingest
                    .messages_before_start
                    .with_label_values(&[self.streams[i].handle.name()])
                    .inc();
                0
            }
            Target::Rows(i) => {
                let early = match early {
                    Some(Early::Rows(d)) => Some(d),
                    _ => None,
                };
                match self.streams[i].accept(&self.metrics, dead_letters, msg, early) {
                    Some(_) if self.streams[i].halted => return 0,
                    Some(n) => n,
                    None if self.block => {
                        let stream = self.streams[i].handle.name().to_string();
                        let bytes =
                            msg.payload().map_or(0, <[u8]>::len) + msg.key().map_or(0, <[u8]>::len);
                        if self.held.sent(&stream, topic, partition, offset, bytes) {
                            self.pause(topic, partition);
                            self.held_changed();
                            tracing::warn!(
                                stream = %stream, topic = %topic, partition, position = offset + 1,
                                "partition paused: its unacknowledged dead-letter copies reached dlq.max_unacked_copies or dlq.max_unacked_bytes; it goes on once they are under half of it"
                            );
                        }
                        0
                    }
                    None => 0,
                }
            }
            Target::Features(i) => {
                let early = match early {
                    Some(Early::Feature(d)) => Some(d),
                    _ => None,
                };
                self.features[i].accept(&self.metrics, dead_letters, msg, early);
                1
            }
        };
        positions::read(&mut lock(&self.positions), topic, partition, offset);
        rows
    }

    /// A message past the partition's position: the offsets between are either not messages
    /// (transaction markers, compacted records) or were deleted by retention before they were
    /// read. The partition's log start (cached from the fetch that brought this message) tells
    /// them apart; deleted messages are logged as an error and counted.
    pub(super) fn check_deleted(
        &self,
        target: Target,
        topic: &str,
        partition: i32,
        next: i64,
        offset: i64,
    ) {
        let Some(low) = self.cached_log_start(topic, partition) else {
            return;
        };
        if low <= next {
            return;
        }
        let lost = low.min(offset) - next;
        let stream = match target {
            Target::Rows(i) => self.streams[i].handle.name().to_string(),
            Target::Features(i) => self.features[i].live.handle.name().to_string(),
        };
        self.metrics
            .ingest
            .ingest_lost_messages
            .with_label_values(&[&stream])
            .inc_by(lost as u64);
        tracing::error!(
            stream = %stream, topic = %topic, partition, position = next, log_start = low, lost,
            "{lost} messages of {topic}/{partition} were deleted before they were read (retention): \
             the partition was read up to offset {next} and its log now starts at {low}; \
             their rows are not in the statistics"
        );
    }

    /// The partition's log start as librdkafka last heard it (`kafka::cached_log_start`).
    pub(super) fn cached_log_start(&self, topic: &str, partition: i32) -> Option<i64> {
        crate::kafka::cached_log_start(self.consumer.as_ref(), topic, partition)
    }

    pub(super) fn pause(&self, topic: &str, partition: i32) {
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition(topic, partition);
        if let Err(e) = self.consumer.pause(&tpl) {
            tracing::warn!(topic = %topic, partition, error = %e, "cannot pause partition");
        }
    }

    /// Applies the dead-letter outcomes: a delivered copy no longer fences the checkpoints
    /// (`held`) and may let a partition paused at its bound go on; failures become the reason
    /// shown for the held partition.
    pub(super) fn dead_letter_outcomes(&mut self) {
        let Some(d) = &self.dead_letters else {
            return;
        };
        let outcomes = d.outcomes();
        let assigned = self.consumer.context().assigned();
        let mut changed = self.held.keep_assigned(&assigned);
        for o in &outcomes {
            if let dlq::Outcome::Failed {
                topic,
                denied: true,
                error,
                ..
            } = o
            {
                crate::kafka::authz::record(
                    &self.health,
                    &self.metrics,
                    crate::health::Denied {
                        resource_type: "topic",
                        resource: crate::config::dlq_of(topic),
                        operation: "write",
                        error: error.clone(),
                    },
                );
            }
            // Only failures, and deliveries after them, change what is reported.
            let reported = match o {
                dlq::Outcome::Failed { .. } => true,
                dlq::Outcome::Delivered { .. } => self.health_shows_held,
            };
            changed |= reported;
            let Some(r) = self.held.outcome(o) else {
                continue;
            };
            changed = true;
            if assigned.contains(&(r.topic.clone(), r.partition)) {
                let mut tpl = TopicPartitionList::new();
                tpl.add_partition(&r.topic, r.partition);
                if let Err(e) = self.consumer.seek(
                    &r.topic,
                    r.partition,
                    Offset::Offset(r.position),
                    Duration::ZERO,
                ) {
                    tracing::warn!(topic = %r.topic, partition = r.partition, error = %e, "cannot seek resumed partition");
                }
                if let Err(e) = self.consumer.resume(&tpl) {
                    tracing::warn!(topic = %r.topic, partition = r.partition, error = %e, "cannot resume partition");
                }
            }
            tracing::info!(
                topic = %r.topic, partition = r.partition, position = r.position,
                "dead-letter copies acknowledged under half of dlq.max_unacked_copies / dlq.max_unacked_bytes; partition goes on"
            );
        }
        if changed {
            self.held_changed();
        }
    }

    /// At shutdown: gives the dead-letter copies in flight (not failed) up to `limit` to be
    /// acknowledged, so that the last checkpoint can cover them.
    pub(super) fn await_copies(&mut self, limit: Duration) {
        let start = Instant::now();
        while self.held.in_flight() > 0 && start.elapsed() < limit {
            std::thread::sleep(Duration::from_millis(10));
            self.dead_letter_outcomes();
        }
    }

    /// Publishes the held partitions (`/readyz`, summaries, `ravel_blocked_partitions`).
    pub(super) fn held_changed(&mut self) {
        for s in &self.streams {
            let name = s.handle.name();
            let n = self.held.count(name);
            self.metrics
                .ingest
                .blocked_partitions
                .with_label_values(&[name])
                .set(n as i64);
        }
        let report = self.held.report();
        self.health_shows_held = !report.is_empty();
        self.health.set_held(report);
    }
}
