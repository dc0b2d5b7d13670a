//! Consumer lag: librdkafka's statistics (every `ingest.lag_interval_ms`) give each
//! partition's high watermark; the lag is measured from the position (`positions`), the next
//! row not yet in the statistics, not from the consumer's fetch position, so it counts what is
//! still to be applied. Only assigned partitions are reported.
//!
//! The same callbacks say whether the cluster answers: librdkafka reports "all brokers down"
//! as a client error, and the statistics list each broker's connection state, so `/readyz`
//! names an unreachable cluster while the consumer waits for it, and forgets it once a
//! connection is up again; and they list each topic's partitions, so a stream topic created
//! or grown after the start gets its partition count (`partitions.total`).

use super::checkpoints::positions;
use super::rebalance::IngestContext;
use crate::health::Refusal;
use crate::lock;
use rdkafka::client::ClientContext;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::statistics::Statistics;

/// Messages of a partition not applied yet: from its position (or, never read, its low
/// watermark) to its high watermark.
pub fn partition_lag(next: Option<i64>, low: i64, high: i64) -> i64 {
    (high - next.unwrap_or(low.max(0))).max(0)
}

impl ClientContext for IngestContext {
    fn error(&self, error: KafkaError, reason: &str) {
        let text = format!("{error}: {reason}");
        // A refused login or TLS handshake is why no broker answers: `/readyz` says so.
        let refused = matches!(
            error.rdkafka_error_code(),
            Some(RDKafkaErrorCode::Authentication | RDKafkaErrorCode::SSL)
        ) && Refusal::of(&text).is_some();
        if refused || error.rdkafka_error_code() == Some(RDKafkaErrorCode::AllBrokersDown) {
            self.health.unreachable(std::time::SystemTime::now(), &text);
        } else {
            tracing::warn!(error = %error, reason, "Kafka client error");
        }
    }

    fn stats(&self, s: Statistics) {
        if s.brokers.values().any(|b| b.state == "UP") {
            self.health.reachable();
        }
        // Topics created or grown after the start (`partitions.total` of the summaries).
        self.seen_totals(s.topics.iter().map(|(topic, t)| {
            let n = t.partitions.keys().filter(|p| **p >= 0).count();
            (topic.clone(), n)
        }));
        let assigned = self.assigned();
        let positions = lock(&self.positions);
        for (topic, t) in &s.topics {
            for part in t.partitions.values() {
                if part.partition < 0
                    || part.hi_offset < 0
                    || !assigned.contains(&(topic.clone(), part.partition))
                {
                    continue;
                }
                let next = positions::next(&positions, topic, part.partition);
                self.metrics
                    .ingest
                    .consumer_lag
                    .with_label_values(&[topic.as_str(), &part.partition.to_string()])
                    .set(partition_lag(next, part.lo_offset, part.hi_offset));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lag_runs_from_the_position_or_the_low_watermark_to_the_high_one() {
        assert_eq!(partition_lag(Some(7), 0, 10), 3);
        assert_eq!(partition_lag(Some(10), 0, 10), 0);
        assert_eq!(partition_lag(None, 4, 10), 6);
        // librdkafka reports -1 for an unknown low watermark.
        assert_eq!(partition_lag(None, -1, 10), 10);
        // A position ahead of a stale high watermark is no negative lag.
        assert_eq!(partition_lag(Some(12), 0, 10), 0);
    }
}
