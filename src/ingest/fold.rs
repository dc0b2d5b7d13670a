//! Observation streams on the ingest thread: each message is decoded and validated into the
//! stream's pending rows as it is read, and the rows gathered in one batch are folded into the
//! working statistics with one `update_batch`, after which the stream publishes its snapshot
//! and its gauges. Kept apart from the Kafka loop because this is where rows become statistics.
//!
//! Freshness is measured here too, because this is where rows become visible: each message's
//! Kafka timestamp is kept with its pending rows; the newest becomes the snapshot's `as_of`,
//! and once the snapshot is published each message's age is observed in
//! `ravel_ingest_freshness_seconds` (`age`: what clock skew does to it).

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
    /// Kafka timestamps (Unix ms) of the pending messages that carry rows.
    stamps: Vec<i64>,
    /// The published `as_of`: the newest folded message's timestamp (Unix ms).
    pub as_of_ms: Option<u64>,
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
            stamps: Vec::new(),
            as_of_ms: snap.as_of_ms,
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
            Ok(n) => {
                // Messages without a timestamp (message format v0) have no age.
                if let Some(ts) = msg.timestamp().to_millis().filter(|&ts| n > 0 && ts >= 0) {
                    self.stamps.push(ts);
                }
                Some(n)
            }
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
                // The newest message, never later than now: a timestamp ahead of this clock
                // (skew, or a producer's own timestamps) must not make the answers look
                // fresher than they can be, nor hold `as_of` in the future.
                let now_ms = unix_ms(now);
                if let Some(&newest) = self.stamps.iter().max() {
                    let newest = newest.min(now_ms) as u64;
                    self.as_of_ms = Some(self.as_of_ms.map_or(newest, |a| a.max(newest)));
                }
                self.handle.publish(Snapshot {
                    stats: self.stats.clone(),
                    last_update: self.last_update,
                    as_of_ms: self.as_of_ms,
                });
                self.observe_freshness(metrics, &name);
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
                if let Some(ms) = self.as_of_ms {
                    metrics
                        .stream_as_of
                        .with_label_values(&[&name])
                        .set(ms as f64 / 1000.0);
                }
            }
            // Every message was validated on its own, so this is a bug; the statistics
            // are untouched (update_batch checks before it changes anything).
            Err(e) => {
                tracing::error!(stream = %name, rows, error = %e, "validated batch refused by the statistics")
            }
        }
        self.x.clear();
        self.y.clear();
        self.stamps.clear();
    }

    /// Observes the age of every message of the batch just published, now that its rows are
    /// visible.
    fn observe_freshness(&self, metrics: &Metrics, name: &str) {
        let visible = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs_f64() * 1000.0)
            .unwrap_or(0.0);
        let histogram = metrics.ingest_freshness.with_label_values(&[name]);
        let mut future = 0;
        for &ts in &self.stamps {
            match age(visible, ts) {
                Some(seconds) => histogram.observe(seconds),
                None => future += 1,
            }
        }
        if future > 0 {
            metrics
                .ingest_future_timestamps
                .with_label_values(&[name])
                .inc_by(future);
        }
    }
}

/// How far ahead of the service's clock a message's timestamp may be and still count as just
/// produced (age 0): clocks of different hosts disagree by milliseconds even under NTP.
pub const SKEW_ALLOWANCE_MS: i64 = 1000;

/// The age in seconds of a message timestamped `ts` (Unix ms) whose rows became visible at
/// `visible` (Unix ms, fractional). A timestamp ahead of `visible` by up to
/// `SKEW_ALLOWANCE_MS` is clock skew: age 0. Further ahead the age is unknown (the clocks
/// disagree by more than skew explains, or the producer set its own timestamps): None, so
/// that it is counted apart instead of being observed as a made-up value.
pub fn age(visible: f64, ts: i64) -> Option<f64> {
    let ms = visible - ts as f64;
    if ms >= 0.0 {
        Some(ms / 1000.0)
    } else if ms >= -(SKEW_ALLOWANCE_MS as f64) {
        Some(0.0)
    } else {
        None
    }
}

fn unix_ms(t: SystemTime) -> i64 {
    t.duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ages_are_never_negative_and_skew_beyond_the_allowance_is_not_an_age() {
        let t = 1_700_000_000_000.0;
        assert_eq!(age(t + 1.5, 1_700_000_000_000), Some(0.0015));
        assert_eq!(age(t, 1_700_000_000_000), Some(0.0));
        assert_eq!(age(t + 60_000.0, 1_700_000_000_000), Some(60.0));
        // Ahead of the service's clock: within the allowance it is skew, age 0...
        assert_eq!(age(t, 1_700_000_000_000 + 5), Some(0.0));
        assert_eq!(age(t, 1_700_000_000_000 + SKEW_ALLOWANCE_MS), Some(0.0));
        // ... beyond it, no age.
        assert_eq!(age(t, 1_700_000_000_000 + SKEW_ALLOWANCE_MS + 1), None);
        assert_eq!(age(t, 1_700_000_000_000 + 3_600_000), None);
    }
}
