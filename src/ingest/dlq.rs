//! The dead-letter producer: every rejected message is copied, unchanged, to `<topic>.dlq` with
//! headers saying why (`ravel-reason`: the rejection reason label, `ravel-error`: the
//! message) and where it came from (`ravel-stream`, `ravel-source-topic`,
//! `ravel-source-partition`, `ravel-source-offset`), so a user can inspect, fix and replay it.
//!
//! Delivery is asynchronous; results are counted in `ravel_dead_letters_total` and
//! `ravel_dead_letter_failures_total`. Ingest flushes the producer before each checkpoint, so
//! offsets are committed past a bad message only after its copy was handed to Kafka (or its
//! failure was counted and logged).

use super::format::Rejection;
use crate::metrics::Metrics;
use rdkafka::ClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};
use std::sync::Arc;
use std::time::Duration;

/// The name of a topic's dead-letter topic.
pub fn topic_of(topic: &str) -> String {
    format!("{topic}.dlq")
}

pub struct DlqContext {
    metrics: Arc<Metrics>,
}

impl ClientContext for DlqContext {}

impl ProducerContext for DlqContext {
    type DeliveryOpaque = Box<String>;
    fn delivery(&self, result: &DeliveryResult<'_>, stream: Box<String>) {
        match result {
            Ok(_) => self
                .metrics
                .dead_letters
                .with_label_values(&[stream.as_str()])
                .inc(),
            Err((e, _)) => {
                self.metrics
                    .dead_letter_failures
                    .with_label_values(&[stream.as_str()])
                    .inc();
                tracing::error!(stream = %stream, error = %e, "dead-letter copy was not delivered");
            }
        }
    }
}

/// Where a rejected message came from.
pub struct Source<'a> {
    pub stream: &'a str,
    pub topic: &'a str,
    pub partition: i32,
    pub offset: i64,
    pub key: Option<&'a [u8]>,
    pub payload: &'a [u8],
}

pub struct DeadLetters {
    producer: BaseProducer<DlqContext>,
}

impl DeadLetters {
    pub fn new(config: &ClientConfig, metrics: Arc<Metrics>) -> anyhow::Result<Self> {
        let producer = config
            .clone()
            .set("linger.ms", "20")
            .create_with_context(DlqContext { metrics })
            .map_err(|e| anyhow::anyhow!("cannot create the dead-letter producer: {e}"))?;
        Ok(DeadLetters { producer })
    }

    /// Queues a copy of the rejected message; waits only while the local queue is full.
    pub fn send(&self, src: &Source, rejection: &Rejection) {
        let dlq = topic_of(src.topic);
        let (partition, offset) = (src.partition.to_string(), src.offset.to_string());
        let headers = OwnedHeaders::new()
            .insert(Header {
                key: "ravel-reason",
                value: Some(rejection.reason.as_str()),
            })
            .insert(Header {
                key: "ravel-error",
                value: Some(rejection.message.as_str()),
            })
            .insert(Header {
                key: "ravel-stream",
                value: Some(src.stream),
            })
            .insert(Header {
                key: "ravel-source-topic",
                value: Some(src.topic),
            })
            .insert(Header {
                key: "ravel-source-partition",
                value: Some(partition.as_str()),
            })
            .insert(Header {
                key: "ravel-source-offset",
                value: Some(offset.as_str()),
            });
        let mut record = BaseRecord::with_opaque_to(&dlq, Box::new(src.stream.to_string()))
            .payload(src.payload)
            .headers(headers);
        if let Some(k) = src.key {
            record = record.key(k);
        }
        loop {
            match self.producer.send(record) {
                Ok(()) => break,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), r)) => {
                    record = r;
                    self.producer.poll(Duration::from_millis(50));
                }
                Err((e, r)) => {
                    let stream = r.delivery_opaque;
                    self.producer
                        .context()
                        .metrics
                        .dead_letter_failures
                        .with_label_values(&[stream.as_str()])
                        .inc();
                    tracing::error!(stream = %stream, topic = %dlq, error = %e, "cannot queue dead-letter copy");
                    break;
                }
            }
        }
        self.producer.poll(Duration::ZERO);
    }

    /// Serves delivery reports without waiting.
    pub fn poll(&self) {
        self.producer.poll(Duration::ZERO);
    }

    /// Waits until every queued copy is delivered or failed.
    pub fn flush(&self, timeout: Duration) {
        if self.producer.in_flight_count() == 0 {
            return;
        }
        if let Err(e) = self.producer.flush(timeout) {
            tracing::error!(error = %e, "dead-letter copies still queued after {timeout:?}");
        }
    }
}
