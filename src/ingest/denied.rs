//! Errors the consumer reports while polling, and authorization errors recorded where
//! `/readyz` and the metrics show them (`kafka::authz`).

use super::Ingest;
use rdkafka::consumer::Consumer;
use rdkafka::error::KafkaError;
use std::time::{Duration, Instant};

impl Ingest {
    pub(super) fn poll_error(&mut self, e: KafkaError) {
        if let Some(code) = e.rdkafka_error_code()
            && crate::kafka::authz::is_denied(code)
        {
            self.denied(code, "read", &e.to_string());
        }
        // Errors such as an unknown topic repeat on every poll: log them at most every 10 s.
        if self
            .last_poll_error
            .is_none_or(|t| t.elapsed() > Duration::from_secs(10))
        {
            tracing::warn!(error = %e, "Kafka consumer error");
            self.last_poll_error = Some(Instant::now());
        }
    }

    /// Records an authorization error of the consumer: on its group, or on whichever of its
    /// topics the broker refuses to describe (looked up once, as this only runs on errors).
    pub(super) fn denied(
        &self,
        code: rdkafka::error::RDKafkaErrorCode,
        operation: &'static str,
        error: &str,
    ) {
        let record = |resource_type: &'static str, resource: String| {
            crate::kafka::authz::record(
                &self.health,
                &self.metrics,
                crate::health::Denied {
                    resource_type,
                    resource,
                    operation,
                    error: error.to_string(),
                },
            )
        };
        match crate::kafka::authz::resource_type(code) {
            "group" => record("group", self.group.clone()),
            "topic" => {
                for topic in self.by_topic.keys() {
                    if let Ok(md) = self
                        .consumer
                        .fetch_metadata(Some(topic), Duration::from_secs(2))
                        && md
                            .topics()
                            .first()
                            .and_then(|t| t.error())
                            .is_some_and(|e| crate::kafka::authz::is_denied(e.into()))
                    {
                        record("topic", topic.clone());
                    }
                }
            }
            other => record(other, "kafka-cluster".into()),
        }
    }
}
