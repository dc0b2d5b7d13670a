//! The rebalance callback that ingest's and the scorers' consumers share: librdkafka calls
//! `ConsumerContext::rebalance` with an error code that says what happened (partitions
//! assigned, revoked, or a failed rebalance) and the group's protocol decides whether the
//! change is incremental (cooperative) or the whole assignment (eager). Here that dispatch
//! and the (un)assignment of either protocol are written once; each context (`Rebalance`)
//! says only what it does with the partitions, and `consumer_context!` implements
//! `ConsumerContext` for it.

use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext, RebalanceProtocol};
use rdkafka::error::KafkaResult;
use rdkafka::topic_partition_list::TopicPartitionList;
use rdkafka::types::RDKafkaRespErr;

/// What a consumer's context does when the group changes its assignment; the group's
/// protocol (`cooperative`) says whether `tpl` is the change or the whole assignment.
pub trait Rebalance: ConsumerContext + Sized {
    /// `tpl`'s partitions are assigned: the context sets their starts and assigns them
    /// (`apply`).
    fn assigned(&self, consumer: &BaseConsumer<Self>, tpl: &mut TopicPartitionList);
    /// `tpl`'s partitions are revoked: the context unassigns them (`apply`).
    fn revoked(&self, consumer: &BaseConsumer<Self>, tpl: &TopicPartitionList);
    /// The rebalance failed with `err`: the context drops its assignment.
    fn failed(&self, consumer: &BaseConsumer<Self>, err: RDKafkaRespErr);
}

/// The body of `ConsumerContext::rebalance` for a `Rebalance` context.
pub fn dispatch<C: Rebalance>(
    context: &C,
    consumer: &BaseConsumer<C>,
    err: RDKafkaRespErr,
    tpl: &mut TopicPartitionList,
) {
    match err {
        RDKafkaRespErr::RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS => context.assigned(consumer, tpl),
        RDKafkaRespErr::RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS => context.revoked(consumer, tpl),
        other => context.failed(consumer, other),
    }
}

/// Whether the group's protocol is incremental (cooperative) rather than eager.
pub fn cooperative<C: ConsumerContext>(consumer: &BaseConsumer<C>) -> bool {
    matches!(
        consumer.rebalance_protocol(),
        RebalanceProtocol::Cooperative
    )
}

/// What a rebalance does to the assignment.
#[derive(Debug, Clone, Copy)]
pub enum Step {
    Assign,
    Revoke,
}

/// Assigns or unassigns `tpl`: incrementally (`cooperative`), or as the whole assignment.
pub fn apply<C: ConsumerContext>(
    consumer: &BaseConsumer<C>,
    step: Step,
    tpl: &TopicPartitionList,
    cooperative: bool,
) -> KafkaResult<()> {
    match (step, cooperative) {
        (Step::Assign, true) => consumer.incremental_assign(tpl),
        (Step::Assign, false) => consumer.assign(tpl),
        (Step::Revoke, true) => consumer.incremental_unassign(tpl),
        (Step::Revoke, false) => consumer.unassign(),
    }
}

/// Implements `ConsumerContext` for a `Rebalance` context: its rebalance callback is
/// `dispatch`.
macro_rules! consumer_context {
    ($context:ty) => {
        impl rdkafka::consumer::ConsumerContext for $context {
            fn rebalance(
                &self,
                consumer: &rdkafka::consumer::BaseConsumer<Self>,
                err: rdkafka::types::RDKafkaRespErr,
                tpl: &mut rdkafka::topic_partition_list::TopicPartitionList,
            ) {
                $crate::kafka::rebalance::dispatch(self, consumer, err, tpl)
            }
        }
    };
}
pub(crate) use consumer_context;
