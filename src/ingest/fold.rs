//! Observation streams on the ingest thread: each message is decoded and validated into the
//! stream's pending rows as it is read, and the rows gathered in one batch are folded into the
//! working statistics with one `update_batch`, after which the stream publishes its snapshot
//! and its gauges. Kept apart from the Kafka loop because this is where rows become statistics.

use super::dlq::DeadLetters;
use super::format::{self, Schema};
use super::rejections::{Warnings, no_payload};
use crate::metrics::Metrics;
use crate::streams::{Snapshot, Stats, StreamHandle};
use rdkafka::message::{BorrowedMessage, Message};
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// One stream's side of the loop: the working statistics and the rows gathered since the
/// last fold.
pub struct StreamIngest {
    pub handle: Arc<StreamHandle>,
    pub stats: Stats,
    x: Vec<f64>,
    y: Vec<f64>,
    pub last_update: Option<SystemTime>,
    /// Changed (rows or positions) since the last checkpoint.
    pub dirty: bool,
    warnings: Warnings,
}

impl StreamIngest {
    /// Starts from the stream's published snapshot (restored from its checkpoint or empty).
    pub fn new(handle: Arc<StreamHandle>) -> Self {
        let snap = handle.snapshot();
        StreamIngest {
            stats: snap.stats.clone(),
            x: Vec::new(),
            y: Vec::new(),
            last_update: snap.last_update,
            dirty: false,
            warnings: Warnings::default(),
            handle,
        }
    }

    /// Decodes one message into the pending rows, or rejects it. Returns the rows, or `None`
    /// when the message was rejected and its copy sent to the dead-letter topic.
    pub fn accept(
        &mut self,
        metrics: &Metrics,
        dead_letters: Option<&DeadLetters>,
        msg: &BorrowedMessage<'_>,
    ) -> Option<usize> {
        let name = self.handle.name();
        metrics.messages_consumed.with_label_values(&[name]).inc();
        let schema = Schema {
            p: self.handle.p(),
            index: self.handle.index.as_ref(),
            classification: self.handle.task() == ravel_core::Task::Classification,
        };
        let result = match msg.payload() {
            None => Err(no_payload()),
            Some(payload) => format::decode(payload, &schema, &mut self.x, &mut self.y),
        };
        self.dirty = true;
        match result {
            Ok(n) => Some(n),
            Err(rej) => {
                if self.warnings.reject(name, metrics, dead_letters, msg, &rej) {
                    None
                } else {
                    Some(0)
                }
            }
        }
    }

    /// Folds the pending rows in one batch update and publishes the snapshot.
    pub fn fold(&mut self, metrics: &Metrics) {
        if self.y.is_empty() {
            return;
        }
        let name = self.handle.name().to_string();
        let start = Instant::now();
        let rows = self.y.len();
        let alarms_before = self.stats.drift_status().alarms;
        match self.stats.update_batch(&self.x, &self.y) {
            // In depth: validation bounds every value (`Reason::Overflow`), so a fold cannot
            // produce an infinite moment; if one ever did, the batch is refused rather than
            // published and checkpointed (a checkpoint would hold `null` and not load):
            // the working statistics go back to the last published ones.
            Ok(()) if !self.stats.is_finite() => {
                tracing::error!(
                    stream = %name,
                    rows,
                    "a validated batch made the statistics non-finite; batch refused"
                );
                self.stats = self.handle.snapshot().stats.clone();
            }
            Ok(()) => {
                let drift = self.stats.drift_status();
                if drift.alarms > alarms_before {
                    tracing::warn!(
                        stream = %name,
                        alarms = drift.alarms,
                        row = drift.last_alarm_row.unwrap_or(0),
                        alpha = drift.alpha,
                        "drift detected: the averages now forget faster"
                    );
                    metrics
                        .drift_alarms
                        .with_label_values(&[&name])
                        .inc_by(drift.alarms - alarms_before);
                    metrics
                        .last_drift_alarm_row
                        .with_label_values(&[&name])
                        .set(drift.last_alarm_row.unwrap_or(0) as i64);
                }
                metrics
                    .stream_effective_sample_size
                    .with_label_values(&[&name])
                    .set(drift.effective_sample_size);
                let now = SystemTime::now();
                self.last_update = Some(now);
                self.handle.publish(Snapshot {
                    stats: self.stats.clone(),
                    last_update: self.last_update,
                });
                metrics
                    .observations_applied
                    .with_label_values(&[&name])
                    .inc_by(rows as u64);
                metrics
                    .ingest_batch_rows
                    .with_label_values(&[&name])
                    .observe(rows as f64);
                metrics
                    .ingest_batch_seconds
                    .with_label_values(&[&name])
                    .observe(start.elapsed().as_secs_f64());
                metrics
                    .stream_alpha
                    .with_label_values(&[&name])
                    .set(self.stats.current_alpha());
                metrics
                    .stream_observations
                    .with_label_values(&[&name])
                    .set(self.stats.n() as i64);
                metrics.stream_last_update.with_label_values(&[&name]).set(
                    now.duration_since(UNIX_EPOCH)
                        .map(|d| d.as_secs_f64())
                        .unwrap_or(0.0),
                );
            }
            // Every message was validated on its own, so this is a bug; the statistics
            // are untouched (update_batch checks before it changes anything).
            Err(e) => {
                tracing::error!(stream = %name, rows, error = %e, "validated batch refused by the statistics")
            }
        }
        self.x.clear();
        self.y.clear();
    }
}
