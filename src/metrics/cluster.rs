//! What ravel needs from outside it: topics the cluster does not have, Kafka's authorization
//! errors, and whether schema'd messages wait for the Schema Registry (`crate::kafka`,
//! `crate::codec::schemad`).

use super::Registrar;
use prometheus::{IntCounterVec, IntGauge, IntGaugeVec};

/// Topics, authorization and the Schema Registry.
pub struct ClusterMetrics {
    /// Topics ravel reads or writes that the cluster does not have (1 each), by role.
    pub missing_topics: IntGaugeVec,
    /// Authorization errors from Kafka, by resource type, resource and operation.
    pub kafka_authorization_errors: IntCounterVec,
    /// 1 while schema'd messages wait for the Schema Registry (unreachable, refusing ravel's
    /// credentials, or not answering as a registry); `/readyz` says why.
    pub schema_registry_waiting: IntGauge,
}

impl ClusterMetrics {
    pub(super) fn new(r: &Registrar) -> ClusterMetrics {
        ClusterMetrics {
            missing_topics: r.int_gauge(
                "ravel_missing_topics",
                "Topics ravel needs that the cluster does not have (1 each)",
                &["topic", "role"],
            ),
            kafka_authorization_errors: r.counter(
                "ravel_kafka_authorization_errors_total",
                "Authorization errors from Kafka, by resource type, resource and operation",
                &["resource_type", "resource", "operation"],
            ),
            schema_registry_waiting: r.scalar_gauge(
                "ravel_schema_registry_waiting",
                "1 while schema'd messages wait for the Schema Registry (/readyz says why)",
            ),
        }
    }
}
