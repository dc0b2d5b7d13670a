//! Partition assignment: the consumer's context and its rebalance callback, which starts every
//! newly assigned partition at its position (`positions`) instead of at Kafka's committed
//! offset, which may trail the last checkpoint. It also keeps the set of assigned partitions
//! that the lag, the readiness flag and the commits read; ready means every partition of
//! every stream and feature-stream topic is assigned here.

use super::lock;
use super::positions::{self, Positions};
use crate::health::{Health, PartitionCount};
use crate::metrics::Metrics;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext, RebalanceProtocol};
use rdkafka::topic_partition_list::TopicPartitionList;
use rdkafka::types::RDKafkaRespErr;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

/// The consumer's callbacks: rebalances (here) and statistics (`lag`).
pub struct IngestContext {
    pub(super) positions: Arc<Mutex<Positions>>,
    pub(super) assigned: Mutex<BTreeSet<(String, i32)>>,
    /// Partitions each topic has (from the metadata at start); a topic not listed yet counts
    /// as needing one.
    totals: Mutex<BTreeMap<String, usize>>,
    topics: Vec<String>,
    ready: Arc<AtomicBool>,
    pub(super) metrics: Arc<Metrics>,
    /// Where the API reads the partition counts.
    health: Arc<Health>,
}

impl IngestContext {
    pub(super) fn new(
        positions: Arc<Mutex<Positions>>,
        topics: Vec<String>,
        ready: Arc<AtomicBool>,
        metrics: Arc<Metrics>,
        health: Arc<Health>,
    ) -> Self {
        IngestContext {
            positions,
            assigned: Mutex::new(BTreeSet::new()),
            totals: Mutex::new(BTreeMap::new()),
            topics,
            ready,
            metrics,
            health,
        }
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

    fn update_assignment(&self, f: impl FnOnce(&mut BTreeSet<(String, i32)>)) {
        let mut a = lock(&self.assigned);
        let before: BTreeSet<(String, i32)> = a.clone();
        f(&mut a);
        for (t, p) in before.difference(&a) {
            let _ = self
                .metrics
                .consumer_lag
                .remove_label_values(&[t.as_str(), &p.to_string()]);
        }
        // Per topic, the partitions assigned here and in all (0 while the metadata is unknown).
        let counts: BTreeMap<String, PartitionCount> = {
            let totals = lock(&self.totals);
            self.topics
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
                .assigned_partitions
                .with_label_values(&[t.as_str()])
                .set(c.assigned as i64);
        }
        // Ready means this instance owns every partition of every topic: a second instance in
        // the same group takes partitions away, and the statistics would then silently cover
        // part of each stream (until scale-out merges them, that is not ready). A topic whose
        // partition count is unknown needs one.
        let ready = counts.values().all(|c| c.assigned >= c.total.max(1));
        self.health.set_partitions(counts);
        if self.ready.swap(ready, Ordering::SeqCst) && !ready && !a.is_empty() {
            tracing::error!(
                assigned = a.len(),
                "partitions of a stream topic are assigned elsewhere (another instance in the consumer group?): not ready; the statistics cover only part of the stream"
            );
        }
    }
}

impl ConsumerContext for IngestContext {
    /// Positions every newly assigned partition where the statistics stop, instead of at the
    /// committed offset, which may trail the last checkpoint.
    fn rebalance(
        &self,
        consumer: &BaseConsumer<Self>,
        err: RDKafkaRespErr,
        tpl: &mut TopicPartitionList,
    ) {
        let cooperative = matches!(
            consumer.rebalance_protocol(),
            RebalanceProtocol::Cooperative
        );
        let parts: Vec<(String, i32)> = tpl
            .elements()
            .iter()
            .map(|e| (e.topic().to_string(), e.partition()))
            .collect();
        match err {
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS => {
                {
                    let positions = lock(&self.positions);
                    for (t, p) in &parts {
                        let start = positions::start(&positions, t, *p);
                        if let Err(e) = tpl.set_partition_offset(t, *p, start) {
                            tracing::error!(topic = %t, partition = p, error = %e, "cannot set start offset");
                        }
                        tracing::info!(topic = %t, partition = p, start = ?start, "partition assigned");
                    }
                }
                let r = if cooperative {
                    consumer.incremental_assign(tpl)
                } else {
                    consumer.assign(tpl)
                };
                if let Err(e) = r {
                    tracing::error!(error = %e, "cannot assign partitions");
                }
                self.update_assignment(|a| {
                    if !cooperative {
                        a.clear();
                    }
                    a.extend(parts);
                });
            }
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS => {
                tracing::info!(partitions = parts.len(), "partitions revoked");
                let r = if cooperative {
                    consumer.incremental_unassign(tpl)
                } else {
                    consumer.unassign()
                };
                if let Err(e) = r {
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
            }
            other => {
                tracing::error!(error = ?other, "rebalance failed; dropping the assignment");
                let _ = consumer.unassign();
                self.update_assignment(|a| a.clear());
            }
        }
    }
}
