//! Partition assignment: the consumer's context and its rebalance callback, which starts every
//! newly assigned partition at its position (`positions`) instead of at Kafka's committed
//! offset, which may trail the last checkpoint. It also keeps the set of assigned partitions
//! that the lag, the readiness flag and the commits read; ready means every partition of
//! every stream and feature-stream topic is assigned here.
//!
//! With the `kafka` state store (`Restore`) a newly assigned partition of a stream starts
//! where its latest state in the state topic stops (after the reader caught up with the
//! topic's end), and the statistics travel to the loop as a `Change`; a revoked partition's
//! statistics are dropped. Readiness then means this replica took part in a rebalance: the
//! partitions it does not own come from the others' states.

use super::checkpoints::positions::{self, Positions};
use crate::health::{Health, PartitionCount};
use crate::kafka::rebalance::{self, Rebalance, Step};
use crate::lock;
use crate::metrics::Metrics;
use crate::store::kafka::{PartitionState, StateReader};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::topic_partition_list::TopicPartitionList;
use rdkafka::types::RDKafkaRespErr;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How partitions of stream topics are restored from the `kafka` state store.
pub struct Restore {
    pub reader: Arc<StateReader>,
    /// Stream topic -> the stream read from it; changes with streams declared over the API
    /// (`IngestContext::restored`).
    pub streams: Mutex<HashMap<String, RestoredStream>>,
}

/// The stream a topic's partitions are restored into (`kafka` store).
#[derive(Clone, Debug)]
pub struct RestoredStream {
    pub name: String,
    /// Its declaration's epoch: only states written under it are restored.
    pub epoch: u64,
    /// `start = "latest"`: a partition with no state of this epoch starts at its end, taken
    /// when it is first assigned and saved at once (`start.rs`).
    pub at_end: bool,
}

impl RestoredStream {
    pub fn of(handle: &crate::state::streams::StreamHandle) -> RestoredStream {
        RestoredStream {
            name: handle.name().to_string(),
            epoch: handle.epoch,
            at_end: handle.start == crate::config::StartAt::Latest,
        }
    }
}

/// A partition of a stream that came or went, for the loop to apply to its statistics.
pub enum Change {
    Assigned {
        topic: String,
        partition: i32,
        state: Option<Arc<PartitionState>>,
        /// It starts at its end (`start = "latest"`, never read): saved at once.
        at_end: bool,
    },
    /// A partition of a stream that starts at its topic's end could not be positioned (the
    /// cluster did not say where it ends): the ingest stops rather than read it from its
    /// beginning.
    Unpositioned(String),
    Revoked {
        topic: String,
        partition: i32,
    },
}

/// The consumer's callbacks: rebalances (here) and statistics (`lag`).
pub struct IngestContext {
    pub(super) positions: Arc<Mutex<Positions>>,
    pub(super) assigned: Mutex<BTreeSet<(String, i32)>>,
    /// Partitions each topic has (from the metadata at start, then from librdkafka's
    /// statistics: `seen_totals`); a topic not listed yet counts as needing one.
    totals: Mutex<BTreeMap<String, usize>>,
    /// The topics read (they change with streams declared over the API: `set_topics`).
    topics: Mutex<Vec<String>>,
    ready: Arc<AtomicBool>,
    pub(super) metrics: Arc<Metrics>,
    /// Where the API reads the partition counts (and whether Kafka answers: `lag.rs`).
    pub(super) health: Arc<Health>,
    /// The `kafka` state store.
    restore: Option<Restore>,
    /// Partitions that came or went since the loop last looked (`kafka` store).
    pub(super) changes: Mutex<Vec<Change>>,
    /// Whether an assignment was ever received.
    assigned_once: AtomicBool,
    /// Since when this group member has had no assignment: subscribed, or every partition
    /// revoked, and none assigned since (None while it holds one, or in standalone
    /// assignment). `join_watch` reads it.
    unassigned_since: Mutex<Option<Instant>>,
}

impl IngestContext {
    pub(super) fn new(
        positions: Arc<Mutex<Positions>>,
        topics: Vec<String>,
        ready: Arc<AtomicBool>,
        metrics: Arc<Metrics>,
        health: Arc<Health>,
        restore: Option<Restore>,
    ) -> Self {
        IngestContext {
            positions,
            assigned: Mutex::new(BTreeSet::new()),
            totals: Mutex::new(BTreeMap::new()),
            topics: Mutex::new(topics),
            ready,
            metrics,
            health,
            restore,
            changes: Mutex::new(Vec::new()),
            assigned_once: AtomicBool::new(false),
            unassigned_since: Mutex::new(None),
        }
    }

    /// The consumer (re)subscribed: it has no assignment until the group gives one.
    pub(super) fn subscribed(&self) {
        *lock(&self.unassigned_since) = Some(Instant::now());
    }

    /// Since when this group member has had no assignment (None: it has one).
    pub(super) fn unassigned_since(&self) -> Option<Instant> {
        *lock(&self.unassigned_since)
    }

    /// The partitions that came or went since the last call.
    pub(super) fn take_changes(&self) -> Vec<Change> {
        std::mem::take(&mut *lock(&self.changes))
    }

    /// `kafka` store: where each newly assigned stream partition starts, from its latest
    /// state (None: no state, the beginning).
    fn restore_assigned(&self, consumer: &BaseConsumer<Self>, parts: &[(String, i32)]) {
        let Some(r) = &self.restore else {
            return;
        };
        let streams = lock(&r.streams).clone();
        let mine: Vec<&(String, i32)> = parts
            .iter()
            .filter(|(t, _)| streams.contains_key(t))
            .collect();
        if mine.is_empty() {
            return;
        }
        // Every state written before this assignment (the previous owner's last one) must be
        // read first, or the partition would start from an older state: still exact, but
        // re-reading more. Without it at all, the partition starts from its beginning with no
        // statistics, which is exact too while the topic still holds every row.
        let caught_up = (0..3).find_map(|_| match r.reader.catch_up(Duration::from_secs(20)) {
            Ok(()) => Some(()),
            Err(e) => {
                tracing::warn!(error = %format!("{e:#}"), "state topic not caught up; retrying");
                None
            }
        });
        let mut positions = lock(&self.positions);
        let mut changes = lock(&self.changes);
        for (t, p) in mine {
            let RestoredStream {
                name: stream,
                epoch,
                at_end,
            } = &streams[t];
            let mut state = if caught_up.is_some() {
                // A state of an earlier declaration of the name is not this stream's.
                r.reader.get(stream, *p).filter(|s| s.epoch == *epoch)
            } else if *at_end {
                // Neither the beginning nor the end would be where it stopped.
                changes.push(Change::Unpositioned(format!(
                    "stream '{stream}' (start = \"latest\"): the state topic could not be read, so \
                     where partition {p} of '{t}' stopped is unknown; ravel stops rather than \
                     read it from its beginning or its end (start it again once the state topic \
                     answers)"
                )));
                continue;
            } else {
                tracing::error!(stream = %stream, partition = p, "state topic unreadable: the partition starts from the beginning of its topic with no statistics");
                None
            };
            // Never read under this declaration, it starts at the partition's end now.
            let start_at_end = *at_end && state.is_none();
            // A state only makes sense against the log it was read from.
            if let Some(s) = &state
                && let Ok((low, high)) = consumer.fetch_watermarks(t, *p, Duration::from_secs(10))
            {
                match positions::check(s.next_offset, low, high) {
                    positions::Restored::PastEnd => {
                        tracing::error!(
                            stream = %stream, partition = p, next_offset = s.next_offset, high,
                            "the partition's state is ahead of its topic's end (the topic was re-created?): starting it afresh from the beginning"
                        );
                        state = None;
                    }
                    positions::Restored::Deleted => tracing::warn!(
                        stream = %stream, partition = p, next_offset = s.next_offset, low,
                        "offsets after the partition's state were deleted by retention before they were read"
                    ),
                    positions::Restored::Valid => {}
                }
            }
            match &state {
                Some(s) => {
                    positions
                        .entry(t.clone())
                        .or_default()
                        .insert(*p, s.next_offset);
                    tracing::info!(stream = %stream, partition = p, n = s.stats.n(), next_offset = s.next_offset, writer = %s.writer, "partition restored from the state topic");
                }
                None if start_at_end => {
                    let Some(end) = super::start::partition_end(consumer, t, *p) else {
                        changes.push(Change::Unpositioned(format!(
                            "stream '{stream}' (start = \"latest\"): the Kafka cluster did not say \
                             where partition {p} of '{t}' ends; ravel stops rather than read it \
                             from its beginning (start it again once the cluster answers)"
                        )));
                        continue;
                    };
                    positions.entry(t.clone()).or_default().insert(*p, end);
                    tracing::info!(stream = %stream, partition = p, next_offset = end, "partition starts at its end (start = \"latest\", never read)");
                }
                None => {
                    if let Some(m) = positions.get_mut(t) {
                        m.remove(p);
                    }
                }
            }
            changes.push(Change::Assigned {
                topic: t.clone(),
                partition: *p,
                state,
                at_end: start_at_end,
            });
        }
    }

    /// `kafka` store: the stream read from `topic` from now on (None: none), for the
    /// restores of its partitions.
    pub(super) fn restored(&self, topic: &str, stream: Option<RestoredStream>) {
        if let Some(r) = &self.restore {
            match stream {
                Some(s) => lock(&r.streams).insert(topic.to_string(), s),
                None => lock(&r.streams).remove(topic),
            };
        }
    }

    /// `kafka` store: a revoked stream partition's position and statistics go.
    fn forget_revoked(&self, parts: &[(String, i32)]) {
        let Some(r) = &self.restore else {
            return;
        };
        let streams = lock(&r.streams);
        let mut positions = lock(&self.positions);
        let mut changes = lock(&self.changes);
        for (t, p) in parts.iter().filter(|(t, _)| streams.contains_key(t)) {
            if let Some(m) = positions.get_mut(t) {
                m.remove(p);
            }
            changes.push(Change::Revoked {
                topic: t.clone(),
                partition: *p,
            });
        }
    }

    /// Standalone assignment (`kafka.assignment`): assigns to this consumer every partition of
    /// its topics that it does not have yet (all of them at start, partitions and topics that
    /// appear later at the next call), each at its position as after a rebalance; the topics'
    /// partition counts follow the metadata. A topic whose metadata does not come within
    /// `timeout` is asked again at the next call.
    pub(super) fn assign_standalone(&self, consumer: &BaseConsumer<Self>, timeout: Duration) {
        let have = self.assigned();
        let mut totals = lock(&self.totals).clone();
        let mut new = Vec::new();
        for topic in &self.topics() {
            let Ok(md) = consumer.fetch_metadata(Some(topic), timeout) else {
                continue;
            };
            let Some(t) = md.topics().first() else {
                continue;
            };
            if t.error().is_some() || t.partitions().is_empty() {
                continue;
            }
            totals.insert(topic.clone(), t.partitions().len());
            // A topic that appeared after start is read from now on: it is no longer missing
            // (the topic check, which backs off to every 10 s, would say so later).
            self.health.topic_found(topic);
            for p in t.partitions() {
                if !have.contains(&(topic.clone(), p.id())) {
                    new.push((topic.clone(), p.id()));
                }
            }
        }
        *lock(&self.totals) = totals;
        if new.is_empty() {
            self.update_assignment(|_| {});
            return;
        }
        let mut tpl = TopicPartitionList::new();
        for (t, p) in &new {
            tpl.add_partition(t, *p);
        }
        self.set_starts(&mut tpl, &new, "partition assigned (standalone)");
        match consumer.incremental_assign(&tpl) {
            Ok(()) => {
                self.assigned_once.store(true, Ordering::SeqCst);
                self.update_assignment(|a| a.extend(new));
            }
            Err(e) => tracing::error!(error = %e, "cannot assign partitions"),
        }
    }

    /// Sets each of `parts` (all in `tpl`) to start at its position, logged as `what`.
    fn set_starts(&self, tpl: &mut TopicPartitionList, parts: &[(String, i32)], what: &str) {
        let positions = lock(&self.positions);
        for (t, p) in parts {
            let start = positions::start(&positions, t, *p);
            if let Err(e) = tpl.set_partition_offset(t, *p, start) {
                tracing::error!(topic = %t, partition = p, error = %e, "cannot set start offset");
            }
            tracing::info!(topic = %t, partition = p, start = ?start, "{what}");
        }
    }

    /// The topics read now.
    pub(super) fn topics(&self) -> Vec<String> {
        lock(&self.topics).clone()
    }

    /// Reads `topics` from now on (the caller changes the subscription or assignment).
    pub(super) fn set_topics(&self, topics: Vec<String>) {
        lock(&self.totals).retain(|t, _| topics.contains(t));
        *lock(&self.topics) = topics;
    }

    /// Standalone assignment: stops reading every assigned partition of `topics` (a stream
    /// retired, or replaced and to be read again from its new position).
    pub(super) fn unassign_topics(&self, consumer: &BaseConsumer<Self>, topics: &[String]) {
        let gone: Vec<(String, i32)> = self
            .assigned()
            .into_iter()
            .filter(|(t, _)| topics.contains(t))
            .collect();
        if gone.is_empty() {
            return;
        }
        let mut tpl = TopicPartitionList::new();
        for (t, p) in &gone {
            tpl.add_partition(t, *p);
        }
        if let Err(e) = consumer.incremental_unassign(&tpl) {
            tracing::error!(error = %e, "cannot unassign partitions");
        }
        self.update_assignment(|a| {
            for p in &gone {
                a.remove(p);
            }
        });
    }

    /// The partitions assigned now.
    pub(super) fn assigned(&self) -> BTreeSet<(String, i32)> {
        lock(&self.assigned).clone()
    }

    /// Records how many partitions each topic has, and re-evaluates readiness.
    pub(super) fn set_totals(&self, totals: BTreeMap<String, usize>) {
        *lock(&self.totals) = totals;
        self.update_assignment(|_| {});
    }

    /// Records partition counts seen after the start (librdkafka's statistics list each
    /// subscribed topic's partitions from its latest metadata): a topic created after the
    /// start, or given more partitions, is counted as it is now. Only the stream topics, only
    /// when a count changed (then readiness is re-evaluated).
    pub(super) fn seen_totals(&self, seen: impl IntoIterator<Item = (String, usize)>) {
        let changed = {
            let mut totals = lock(&self.totals);
            let mut changed = false;
            for (topic, n) in seen {
                if lock(&self.topics).contains(&topic)
                    && totals.get(&topic).is_none_or(|c| n > *c)
                    && n > 0
                {
                    totals.insert(topic, n);
                    changed = true;
                }
            }
            changed
        };
        if changed {
            self.update_assignment(|_| {});
        }
    }

    fn update_assignment(&self, f: impl FnOnce(&mut BTreeSet<(String, i32)>)) {
        let mut a = lock(&self.assigned);
        let before: BTreeSet<(String, i32)> = a.clone();
        f(&mut a);
        for (t, p) in before.difference(&a) {
            let _ = self
                .metrics
                .ingest
                .consumer_lag
                .remove_label_values(&[t.as_str(), &p.to_string()]);
        }
        // Per topic, the partitions assigned here and in all (0 while the metadata is unknown).
        let counts: BTreeMap<String, PartitionCount> = {
            let totals = lock(&self.totals);
            self.topics()
                .iter()
                .map(|t| {
                    let count = PartitionCount {
                        assigned: a.iter().filter(|(at, _)| at == t).count(),
                        total: totals.get(t).copied().unwrap_or(0),
                    };
                    (t.clone(), count)
                })
                .collect()
        };
        for (t, c) in &counts {
            self.metrics
                .ingest
                .assigned_partitions
                .with_label_values(&[t.as_str()])
                .set(c.assigned as i64);
        }
        // Ready means this instance owns every partition of every topic: a second instance in
        // the same group takes partitions away, and the statistics would then silently cover
        // part of each stream (until scale-out merges them, that is not ready). A topic whose
        // partition count is unknown needs one.
        // With the `kafka` store the partitions of the other replicas come from their states:
        // ready once this replica is in the group with its share.
        let ready = if self.restore.is_some() {
            self.assigned_once.load(Ordering::SeqCst)
        } else {
            counts.values().all(|c| c.assigned >= c.total.max(1))
        };
        self.health.set_partitions(counts);
        if self.ready.swap(ready, Ordering::SeqCst) && !ready && !a.is_empty() {
            tracing::error!(
                assigned = a.len(),
                "partitions of a stream topic are assigned elsewhere (another instance in the consumer group?): not ready; the statistics cover only part of the stream"
            );
        }
    }
}

crate::kafka::rebalance::consumer_context!(IngestContext);

/// Positions every newly assigned partition where the statistics stop, instead of at the
/// committed offset, which may trail the last checkpoint.
impl Rebalance for IngestContext {
    fn assigned(&self, consumer: &BaseConsumer<Self>, tpl: &mut TopicPartitionList) {
        let cooperative = rebalance::cooperative(consumer);
        let parts = partitions(tpl);
        self.restore_assigned(consumer, &parts);
        self.assigned_once.store(true, Ordering::SeqCst);
        // An empty assignment too: the group answered (more members than partitions).
        *lock(&self.unassigned_since) = None;
        self.set_starts(tpl, &parts, "partition assigned");
        if let Err(e) = rebalance::apply(consumer, Step::Assign, tpl, cooperative) {
            tracing::error!(error = %e, "cannot assign partitions");
        }
        self.update_assignment(|a| {
            if !cooperative {
                a.clear();
            }
            a.extend(parts);
        });
    }

    fn revoked(&self, consumer: &BaseConsumer<Self>, tpl: &TopicPartitionList) {
        let cooperative = rebalance::cooperative(consumer);
        let parts = partitions(tpl);
        tracing::info!(partitions = parts.len(), "partitions revoked");
        self.forget_revoked(&parts);
        if let Err(e) = rebalance::apply(consumer, Step::Revoke, tpl, cooperative) {
            tracing::error!(error = %e, "cannot unassign partitions");
        }
        self.update_assignment(|a| {
            if cooperative {
                for p in &parts {
                    a.remove(p);
                }
            } else {
                a.clear();
            }
        });
        if !cooperative || self.assigned().is_empty() {
            self.subscribed();
        }
    }

    fn failed(&self, consumer: &BaseConsumer<Self>, err: RDKafkaRespErr) {
        tracing::error!(error = ?err, "rebalance failed; dropping the assignment");
        let all: Vec<(String, i32)> = self.assigned().into_iter().collect();
        self.forget_revoked(&all);
        let _ = consumer.unassign();
        self.update_assignment(|a| a.clear());
        self.subscribed();
    }
}

/// The (topic, partition) pairs of `tpl`.
fn partitions(tpl: &TopicPartitionList) -> Vec<(String, i32)> {
    tpl.elements()
        .iter()
        .map(|e| (e.topic().to_string(), e.partition()))
        .collect()
}
