//! Accepting one message: which stream or feature stream it belongs to, the retention check
//! (a partition whose unread rows were deleted), folding or rejecting it, and releasing
//! partitions held at a rejected message once its dead-letter copy is delivered.

use super::*;

impl Ingest {
    /// Decodes one message into its stream's pending rows, or applies it to its feature stream,
    /// or rejects it; then moves the position past it, unless its partition now waits for the
    /// message's dead-letter copy. Messages of a waiting partition, and messages before a
    /// partition's position (already in the statistics), are dropped unread. Returns the rows
    /// (1 for a feature-stream message).
    pub(super) fn accept(&mut self, msg: &BorrowedMessage<'_>, early: Option<Early>) -> usize {
        let (topic, partition, offset) = (msg.topic(), msg.partition(), msg.offset());
        let Some(&target) = self.by_topic.get(topic) else {
            return 0;
        };
        if self.held.is_held(topic, partition) {
            // Fetched before the pause took effect, or the partition came back in a
            // rebalance: pause (again); it is read again from the held message's successor.
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
            Target::Rows(i) => {
                let early = match early {
                    Some(Early::Rows(d)) => Some(d),
                    _ => None,
                };
                match self.streams[i].accept(&self.metrics, dead_letters, msg, early) {
                    Some(n) => n,
                    None if self.block => {
                        let stream = self.streams[i].handle.name().to_string();
                        self.held.hold(&stream, topic, partition, offset);
                        self.pause(topic, partition);
                        self.metrics
                            .blocked_partitions
                            .with_label_values(&[&stream])
                            .set(self.held.count(&stream) as i64);
                        self.health.set_held(self.held.report());
                        tracing::info!(
                            stream = %stream, topic = %topic, partition, offset,
                            "partition waits at a rejected message until its dead-letter copy is delivered"
                        );
                        return 0;
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

    /// Applies the dead-letter outcomes: a delivered copy releases its partition, which goes
    /// on after the message; failures become the reason shown for the held partition.
    pub(super) fn dead_letter_outcomes(&mut self) {
        let Some(d) = &self.dead_letters else {
            return;
        };
        let outcomes = d.outcomes();
        let assigned = self.consumer.context().assigned();
        let mut changed = self.held.keep_assigned(&assigned);
        for o in &outcomes {
            changed = true;
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
                        resource: crate::kafka::topics::dlq_of(topic),
                        operation: "write",
                        error: error.clone(),
                    },
                );
            }
            let Some(r) = self.held.outcome(o) else {
                continue;
            };
            positions::read(&mut lock(&self.positions), &r.topic, r.partition, r.offset);
            if let Some(&Target::Rows(i)) = self.by_topic.get(&r.topic) {
                self.streams[i].touch(r.partition);
            }
            if assigned.contains(&(r.topic.clone(), r.partition)) {
                let mut tpl = TopicPartitionList::new();
                tpl.add_partition(&r.topic, r.partition);
                if let Err(e) = self.consumer.seek(
                    &r.topic,
                    r.partition,
                    Offset::Offset(r.offset + 1),
                    Duration::ZERO,
                ) {
                    tracing::warn!(topic = %r.topic, partition = r.partition, error = %e, "cannot seek released partition");
                }
                if let Err(e) = self.consumer.resume(&tpl) {
                    tracing::warn!(topic = %r.topic, partition = r.partition, error = %e, "cannot resume partition");
                }
            }
            tracing::info!(
                topic = %r.topic, partition = r.partition, offset = r.offset,
                "dead-letter copy delivered; partition goes on"
            );
        }
        if changed {
            for s in &self.streams {
                let name = s.handle.name();
                self.metrics
                    .blocked_partitions
                    .with_label_values(&[name])
                    .set(self.held.count(name) as i64);
            }
            self.health.set_held(self.held.report());
        }
    }
}
