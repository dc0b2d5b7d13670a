//! The scorer's Kafka clients' contexts: the producer's delivery reports (by batch, with each
//! output partition's end) and the consumer's rebalance callback, which assigns each new
//! partition where it resumes (the group's commit, or exactly once the output's tail).

use super::tail::Tail;
use crate::kafka::rebalance::{self, Rebalance, Step};
use rdkafka::ClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{DeliveryResult, ProducerContext};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use rdkafka::types::RDKafkaRespErr;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;
use std::time::Duration;

/// Delivery reports of the predictions, by batch (a report of an earlier batch, late after
/// that batch was given up, must not count for the next): how many were delivered, and the
/// source partition and offset of each failed one.
#[derive(Default)]
pub(super) struct Reports {
    pub(super) delivered: Mutex<BTreeMap<u64, u64>>,
    pub(super) failed: Mutex<Vec<(u64, i32, i64, String)>>,
    /// Per output partition, the offset after the last prediction delivered there.
    pub(super) ends: Mutex<BTreeMap<i32, i64>>,
}

impl ClientContext for Reports {}

impl ProducerContext for Reports {
    /// The batch, and the source partition and offset.
    type DeliveryOpaque = Box<(u64, i32, i64)>;
    fn delivery(&self, result: &DeliveryResult<'_>, source: Box<(u64, i32, i64)>) {
        let (batch, p, o) = *source;
        match result {
            Ok(m) => {
                *crate::lock(&self.delivered).entry(batch).or_default() += 1;
                let mut ends = crate::lock(&self.ends);
                let end = ends.entry(m.partition()).or_insert(0);
                *end = (*end).max(m.offset() + 1);
            }
            Err((e, _)) => crate::lock(&self.failed).push((batch, p, o, e.to_string())),
        }
    }
}

/// The scorer consumer's context: the partitions assigned now, and (exactly once) the reader
/// of the output's tail that says where each newly assigned partition resumes.
pub(super) struct ScorerContext {
    pub(super) name: String,
    pub(super) topic: String,
    pub(super) tail: Mutex<Option<Tail>>,
    pub(super) assigned: Mutex<BTreeSet<i32>>,
}

impl ClientContext for ScorerContext {}

impl ScorerContext {
    /// Where each of `parts` starts: the group's committed offset (else the beginning), or,
    /// exactly once, right after the last source offset its output partition holds past the
    /// commit's recorded output end, when that is later. A tail that cannot be read leaves the
    /// committed offset (at least once for that partition), said in the log.
    pub(super) fn starts(
        &self,
        consumer: &BaseConsumer<Self>,
        parts: &[i32],
    ) -> Vec<(i32, Offset)> {
        let mut tpl = TopicPartitionList::new();
        for &p in parts {
            tpl.add_partition(&self.topic, p);
        }
        let committed = consumer
            .committed_offsets(tpl, Duration::from_secs(10))
            .ok();
        let tail = crate::lock(&self.tail);
        parts
            .iter()
            .map(|&p| {
                let e = committed
                    .as_ref()
                    .and_then(|c| c.find_partition(&self.topic, p));
                let (at, hint) = match &e {
                    Some(e) => (
                        match e.offset() {
                            Offset::Offset(o) => Some(o),
                            _ => None,
                        },
                        crate::kafka::standalone::fields(e.metadata())
                            .and_then(|f| f.get("out")?.parse::<i64>().ok()),
                    ),
                    None => (None, None),
                };
                let resumed = tail.as_ref().and_then(|t| match t.resume(p, hint) {
                    Ok(r) => r,
                    Err(e) => {
                        tracing::error!(scorer = %self.name, partition = p, error = %e, "cannot read the output's tail: the partition resumes at its committed offset (at least once for it)");
                        None
                    }
                });
                let start = match (at, resumed) {
                    (Some(a), Some(r)) => Offset::Offset(a.max(r)),
                    (None, Some(r)) => Offset::Offset(r),
                    (Some(a), None) => Offset::Offset(a),
                    (None, None) => Offset::Beginning,
                };
                tracing::info!(scorer = %self.name, partition = p, committed = ?at, output_end_hint = ?hint, from_output = ?resumed, start = ?start, "scorer partition assigned");
                (p, start)
            })
            .collect()
    }

    /// Assigns `tpl`'s partitions at their starts.
    pub(super) fn assign(
        &self,
        consumer: &BaseConsumer<Self>,
        tpl: &mut TopicPartitionList,
        incremental: bool,
    ) {
        let parts: Vec<i32> = tpl.elements().iter().map(|e| e.partition()).collect();
        for (p, start) in self.starts(consumer, &parts) {
            let _ = tpl.set_partition_offset(&self.topic, p, start);
        }
        match rebalance::apply(consumer, Step::Assign, tpl, incremental) {
            Ok(()) => {
                let mut a = crate::lock(&self.assigned);
                if !incremental {
                    a.clear();
                }
                a.extend(parts);
            }
            Err(e) => tracing::error!(scorer = %self.name, error = %e, "cannot assign partitions"),
        }
    }
}

crate::kafka::rebalance::consumer_context!(ScorerContext);

impl Rebalance for ScorerContext {
    fn assigned(&self, consumer: &BaseConsumer<Self>, tpl: &mut TopicPartitionList) {
        self.assign(consumer, tpl, rebalance::cooperative(consumer))
    }

    fn revoked(&self, consumer: &BaseConsumer<Self>, tpl: &TopicPartitionList) {
        let cooperative = rebalance::cooperative(consumer);
        // Every prediction of the batches before was acknowledged (a batch waits for its
        // deliveries before the next poll); the messages of the batch being gathered from
        // these partitions are dropped (`Scorer::batch`).
        if let Err(e) = rebalance::apply(consumer, Step::Revoke, tpl, cooperative) {
            tracing::error!(scorer = %self.name, error = %e, "cannot unassign partitions");
        }
        let mut a = crate::lock(&self.assigned);
        if cooperative {
            for e in tpl.elements() {
                a.remove(&e.partition());
            }
        } else {
            a.clear();
        }
    }

    fn failed(&self, consumer: &BaseConsumer<Self>, err: RDKafkaRespErr) {
        tracing::error!(scorer = %self.name, error = ?err, "rebalance failed; dropping the assignment");
        let _ = consumer.unassign();
        crate::lock(&self.assigned).clear();
    }
}
