//! Authorization errors from Kafka (topic and group ACLs, cluster permissions), wherever they
//! show up: the topic check at start (describe), the consumer (read, group), the commits
//! (group) and the dead-letter producer (write). Each is logged once per resource and
//! operation with both named, counted in `ravel_kafka_authorization_errors_total`, and kept
//! for `/readyz`, which answers 503 while one stands. Quotas are not errors: a throttled client
//! is only slowed down (librdkafka waits as the broker asks).

use crate::health::{Denied, Health};
use crate::metrics::Metrics;
use rdkafka::error::RDKafkaErrorCode;

/// Whether `code` says Kafka refused the client's principal.
pub fn is_denied(code: RDKafkaErrorCode) -> bool {
    matches!(
        code,
        RDKafkaErrorCode::TopicAuthorizationFailed
            | RDKafkaErrorCode::GroupAuthorizationFailed
            | RDKafkaErrorCode::ClusterAuthorizationFailed
            | RDKafkaErrorCode::TransactionalIdAuthorizationFailed
            | RDKafkaErrorCode::DelegationTokenAuthorizationFailed
    )
}

/// The resource type a denial code is about.
pub fn resource_type(code: RDKafkaErrorCode) -> &'static str {
    match code {
        RDKafkaErrorCode::GroupAuthorizationFailed => "group",
        RDKafkaErrorCode::TopicAuthorizationFailed => "topic",
        _ => "cluster",
    }
}

/// Counts, logs (once per resource and operation) and keeps a denial.
pub fn record(health: &Health, metrics: &Metrics, d: Denied) {
    metrics
        .cluster
        .kafka_authorization_errors
        .with_label_values(&[d.resource_type, d.resource.as_str(), d.operation])
        .inc();
    let (rt, res, op, err) = (
        d.resource_type,
        d.resource.clone(),
        d.operation,
        d.error.clone(),
    );
    if health.deny(d) {
        tracing::error!(
            resource_type = rt, resource = %res, operation = op, error = %err,
            "Kafka denied {op} on {rt} '{res}': grant this client's principal the ACL (not ready until it works)"
        );
    }
}

/// The command that grants `principal` the `operations` (`Describe`, `Read`, `Write`,
/// `Create`) on a `topic` or `group` named `name`.
pub fn grant_command(
    brokers: &str,
    principal: &str,
    resource_type: &str,
    name: &str,
    operations: &[&str],
) -> String {
    let ops: String = operations
        .iter()
        .map(|o| format!(" --operation {o}"))
        .collect();
    format!(
        "kafka-acls.sh --bootstrap-server {brokers} --add --allow-principal {principal}{ops} --{resource_type} {name}"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_grant_names_the_principal_the_operations_and_the_resource() {
        assert_eq!(
            grant_command(
                "k:9092",
                "User:ravel",
                "topic",
                "sales",
                &["Describe", "Read"]
            ),
            "kafka-acls.sh --bootstrap-server k:9092 --add --allow-principal User:ravel \
             --operation Describe --operation Read --topic sales"
        );
    }
}
