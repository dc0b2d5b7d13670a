//! Every `state.checkpoint_interval_ms`: the checkpoints (files) or state records (Kafka) of
//! each stream, then the commit of the offsets they cover (`commit` decides which).

use super::checkpoints::{commit, positions};
use super::fold::StreamIngest;
use super::{Ingest, Store};
use crate::dead_letters::held;
use crate::lock;
use crate::metrics::Metrics;
use crate::store::kafka::{PartitionState, StateWriter};
use rdkafka::consumer::{CommitMode, Consumer};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use std::collections::BTreeSet;
use std::time::{Duration, Instant};

impl Ingest {
    /// Writes the checkpoint of every stream that changed, then commits the offsets they
    /// cover. Without a state directory the offsets are committed as they are (informational:
    /// a restart then re-reads the topics from the beginning).
    pub(super) fn checkpoint_and_commit(&mut self, mode: CommitMode) {
        let mut positions = lock(&self.positions).clone();
        let (durable, saved_partitions) = match &mut self.store {
            Store::Kafka { writer, .. } => {
                let saved = write_states(
                    &mut self.streams,
                    writer,
                    &positions,
                    &self.held,
                    &self.writer_name,
                    &self.metrics,
                );
                let topics = self
                    .streams
                    .iter()
                    .map(|s| s.handle.topic.clone())
                    .collect();
                (topics, Some(saved))
            }
            Store::Dir(writer) => {
                writer.submit(&mut self.streams, &self.cluster_id, &positions, &self.held);
                if matches!(mode, CommitMode::Sync) {
                    writer.flush(&mut self.streams);
                }
                // A stream topic is committed up to its last durable checkpoint's offsets.
                let mut topics = Vec::new();
                for s in &self.streams {
                    let topic = &s.handle.topic;
                    match writer.durable().get(topic) {
                        Some(at) => {
                            positions.insert(topic.clone(), at.clone());
                            topics.push(topic.clone());
                        }
                        None => {
                            positions.remove(topic);
                        }
                    }
                }
                (topics, None)
            }
            // Without saved state the offsets are committed as read (informational: a
            // restart re-reads the topics from the beginning).
            Store::None => (
                self.streams
                    .iter()
                    .map(|s| s.handle.topic.clone())
                    .collect(),
                None,
            ),
        };
        // Feature-stream topics are committed as read (they have no saved state).
        let stream_topics: BTreeSet<&str> = self
            .streams
            .iter()
            .map(|s| s.handle.topic.as_str())
            .collect();
        let durable_partition = |topic: &str, p: i32| match &saved_partitions {
            Some(saved) => {
                !stream_topics.contains(topic) || saved.contains(&(topic.to_string(), p))
            }
            None => true,
        };
        let assigned = self.consumer.context().assigned();
        let mut plan = commit::plan(
            &positions,
            &durable,
            durable_partition,
            &self.committed,
            &assigned,
        );
        // Standalone: every commit names this instance, every assigned partition with a
        // committed offset is committed again (a heartbeat another instance sees), and the
        // commits are read back first for another instance's (`kafka::standalone`).
        let metadata = match &mut self.standalone {
            Some(s) => {
                s.check(
                    &self.consumer,
                    assigned.iter().cloned(),
                    Duration::from_millis(500),
                );
                for part in &assigned {
                    if let Some(&at) = self.committed.get(part)
                        && !plan.iter().any(|(q, _)| q == part)
                    {
                        plan.push((part.clone(), at));
                    }
                }
                Some(s.metadata())
            }
            None => None,
        };
        let mut tpl = TopicPartitionList::new();
        let mut pending = Vec::new();
        for ((topic, p), next) in plan {
            let mut e = tpl.add_partition(&topic, p);
            if e.set_offset(Offset::Offset(next)).is_ok() {
                if let Some(m) = &metadata {
                    e.set_metadata(m.as_str());
                }
                pending.push(((topic, p), next));
            }
        }
        if tpl.count() == 0 {
            return;
        }
        match self.consumer.commit(&tpl, mode) {
            Ok(()) => {
                self.metrics
                    .ingest
                    .offset_commits
                    .with_label_values(&["ok"])
                    .inc();
                self.committed.extend(pending);
            }
            Err(e) => {
                if let Some(code) = e.rdkafka_error_code()
                    && crate::kafka::authz::is_denied(code)
                {
                    self.denied(code, "read", &e.to_string());
                }
                self.metrics
                    .ingest
                    .offset_commits
                    .with_label_values(&["error"])
                    .inc();
                if self.standalone.is_some()
                    && e.rdkafka_error_code()
                        == Some(rdkafka::types::RDKafkaErrorCode::UnknownMemberId)
                {
                    tracing::error!(error = %e, group = %self.group, "offset commit refused: the group has members using the group protocol (another instance with kafka.assignment = \"group\"?) while this one reads every partition in standalone mode; both read every message");
                } else {
                    tracing::warn!(error = %e, "offset commit failed; the next checkpoint retries");
                }
            }
        }
    }
}

/// `kafka` store: writes the state of every changed partition; returns the partitions whose
/// rows are durable now (written, or unchanged since the last write). A partition whose state
/// covers a dead-letter copy not acknowledged yet (`held`) is not written this time (it stays
/// changed, to be written at the next interval), so neither its state record nor its commit
/// passes the message before the copy is delivered.
fn write_states(
    streams: &mut [StreamIngest],
    writer: &mut StateWriter,
    positions: &positions::Positions,
    held: &held::Held,
    writer_name: &str,
    metrics: &Metrics,
) -> BTreeSet<commit::Partition> {
    let mut saved = BTreeSet::new();
    let mut states = Vec::new();
    for s in streams.iter() {
        let topic = &s.handle.topic;
        for (&p, _) in s.parts.iter() {
            saved.insert((topic.clone(), p));
        }
        for (p, part) in s.dirty_parts() {
            saved.remove(&(topic.clone(), p));
            if !held.partition_fence(topic, p).is_empty() {
                continue;
            }
            // A part with no position has read no message: nothing to save yet.
            let Some(next) = positions::next(positions, topic, p) else {
                continue;
            };
            states.push(PartitionState {
                version: crate::store::kafka::VERSION,
                stream: s.handle.name().to_string(),
                topic: topic.clone(),
                partition: p,
                next_offset: next,
                last_update_ms: part.last_update.map(crate::unix_ms),
                as_of_ms: part.as_of_ms,
                writer: writer_name.to_string(),
                stats: part.stats.clone(),
                folds: s.saved_folds(&part.folds),
                // A copy of the map only: the buckets are shared until a fold changes one,
                // and only those changed since `saved` are written.
                windows: part.windows.clone(),
                buckets: None,
                saved: part.saved_buckets.clone(),
                epoch: s.handle.epoch,
            });
        }
    }
    if states.is_empty() {
        return saved;
    }
    let start = Instant::now();
    let delivered = writer.write(&mut states);
    let elapsed = start.elapsed().as_secs_f64();
    for (st, ok) in states.iter().zip(delivered) {
        let name = st.stream.as_str();
        if ok {
            saved.insert((st.topic.clone(), st.partition));
            if let Some(s) = streams.iter_mut().find(|s| s.handle.name() == name) {
                s.mark_saved(st.partition);
                s.mark_buckets_saved(st.partition, st.saved.clone());
            }
            metrics.ingest.checkpoints.with_label_values(&[name]).inc();
            metrics
                .ingest
                .checkpoint_seconds
                .with_label_values(&[name])
                .observe(elapsed);
        } else {
            metrics
                .ingest
                .checkpoint_failures
                .with_label_values(&[name])
                .inc();
        }
    }
    saved
}
