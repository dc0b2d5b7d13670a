//! A scorer's output: each prediction sent to the output partition of its source partition
//! (key and source coordinates kept), the wait for a batch's deliveries and dead-letter
//! copies before its offsets are committed, and the rewind of a partition whose delivery
//! failed.

use super::{DELIVERY_WAIT, Scorer};
use crate::dead_letters::dlq;
use crate::kafka::send::{send_waiting, with_headers};
use rdkafka::consumer::Consumer;
use rdkafka::message::{BorrowedMessage, Message, OwnedHeaders};
use rdkafka::producer::{BaseRecord, Producer};
use rdkafka::topic_partition_list::Offset;
use std::time::{Duration, Instant};

impl Scorer {
    /// Sends a prediction: the event's key, its coordinates and the model's n (`rows`) in
    /// headers.
    pub(super) fn send(&self, m: &BorrowedMessage<'_>, payload: Vec<u8>, rows: u64) {
        let (p, o) = (m.partition(), m.offset());
        let (ps, os, rows) = (p.to_string(), o.to_string(), rows.to_string());
        let headers = with_headers(
            OwnedHeaders::new(),
            &[
                ("ravel-scorer", self.config.name.as_str()),
                ("ravel-source-topic", self.config.topic.as_str()),
                ("ravel-source-partition", ps.as_str()),
                ("ravel-source-offset", os.as_str()),
                ("ravel-model-rows", rows.as_str()),
            ],
        );
        let mut record =
            BaseRecord::with_opaque_to(&self.config.output_topic, Box::new((self.batch, p, o)))
                .payload(&payload)
                .headers(headers);
        if self.exactly_once {
            record = record.partition(p);
        }
        if let Some(k) = m.key() {
            record = record.key(k);
        }
        if let Err((e, _)) = send_waiting(&self.producer, record) {
            crate::lock(&self.producer.context().failed).push((self.batch, p, o, e.to_string()));
        }
    }

    /// Waits until `sent` predictions are reported; true when all were delivered.
    pub(super) fn await_deliveries(&mut self, sent: u64) -> bool {
        let start = Instant::now();
        loop {
            self.producer.poll(Duration::from_millis(10));
            let batch = self.batch;
            let failed: Vec<_> = std::mem::take(&mut *crate::lock(&self.producer.context().failed))
                .into_iter()
                .filter(|f| f.0 == batch)
                .collect();
            if !failed.is_empty() {
                self.metrics
                    .scorers
                    .scorer_delivery_failures
                    .with_label_values(&[&self.config.name])
                    .inc_by(failed.len() as u64);
                if self.admit_log("delivery") {
                    let (_, p, o, e) = &failed[0];
                    tracing::warn!(scorer = %self.config.name, output_topic = %self.config.output_topic, partition = p, offset = o, error = %self.clients.scrub(e), "predictions not delivered; their batch is scored again");
                }
                return false;
            }
            let mut delivered = crate::lock(&self.producer.context().delivered);
            // Reports of earlier batches are of no use any more.
            delivered.retain(|&b, _| b >= batch);
            if delivered.get(&batch).copied().unwrap_or(0) >= sent {
                delivered.remove(&batch);
                return true;
            }
            drop(delivered);
            if start.elapsed() > DELIVERY_WAIT
                || self.shutdown.is_triggered() && start.elapsed() > Duration::from_secs(10)
            {
                return false;
            }
        }
    }

    /// Waits until `copies` dead-letter copies are delivered (or given up under
    /// `dlq.on_failure = "skip"`).
    pub(super) fn await_dead_letters(&mut self, copies: usize) -> bool {
        let Some(d) = &self.dead_letters else {
            return true;
        };
        let (start, mut done) = (Instant::now(), 0);
        while done < copies {
            for o in d.outcomes() {
                match o {
                    dlq::Outcome::Delivered { .. } => done += 1,
                    dlq::Outcome::Failed { retry_in: None, .. } => done += 1,
                    dlq::Outcome::Failed { .. } => {}
                }
            }
            if start.elapsed() > DELIVERY_WAIT || self.shutdown.is_triggered() {
                return done >= copies;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        true
    }

    pub(super) fn seek(&self, partition: i32, offset: i64) {
        if let Err(e) = self.consumer.seek(
            &self.config.topic,
            partition,
            Offset::Offset(offset),
            Duration::from_secs(5),
        ) {
            tracing::warn!(scorer = %self.config.name, partition, offset, error = %e, "scorer cannot rewind a partition; its messages are read again after a restart");
        }
    }
}
