//! Internal events (as vector's `internal_events`): what the fold reports, each a small struct
//! that emits its metrics (and its log line, where it has one) together, once, from one
//! place. The loops build the event from what they measured; which metric it moves, with
//! which labels, is written here only.

use super::Metrics;

/// One message of an observation stream decoded: what its decoding counted beside its rows.
pub struct MessageTallied<'a> {
    pub stream: &'a str,
    /// Keys of named messages that match no declared field.
    pub ignored_fields: u64,
    /// Rows skipped for a missing field (`missing = "skip_row"`).
    pub skipped_rows: u64,
    /// Events read as a tree, off the fast path.
    pub events_by_tree: u64,
    /// Rows without a target, skipped.
    pub without_target: u64,
}

impl MessageTallied<'_> {
    pub fn emit(&self, m: &Metrics) {
        let i = &m.ingest;
        m.messages_consumed(self.stream);
        let counts = [
            (&i.fields_ignored, self.ignored_fields),
            (&i.rows_skipped, self.skipped_rows),
            (&i.events_by_tree, self.events_by_tree),
            (&i.rows_without_target, self.without_target),
        ];
        for (counter, n) in counts {
            if n > 0 {
                counter.with_label_values(&[self.stream]).inc_by(n);
            }
        }
    }
}

/// A batch of a stream folded and its snapshot published.
pub struct BatchFolded<'a> {
    pub stream: &'a str,
    /// Rows folded in this batch (0: only another replica's state changed).
    pub rows: usize,
    /// How long the batch took, from its first message to its publication.
    pub seconds: f64,
    /// The published statistics: rows, alpha, effective sample size.
    pub n: u64,
    pub alpha: f64,
    pub effective_sample_size: f64,
    /// The time its rows reach (Unix ms), when it keeps one.
    pub as_of_ms: Option<u64>,
    /// When the statistics last changed (Unix seconds).
    pub last_update_s: Option<f64>,
    /// Drift alarms raised in this batch, and the row of the last.
    pub new_alarms: u64,
    pub last_alarm_row: Option<u64>,
}

impl BatchFolded<'_> {
    pub fn emit(&self, m: &Metrics) {
        let (s, i, name) = (&m.streams, &m.ingest, &[self.stream]);
        if self.new_alarms > 0 {
            s.drift_alarms
                .with_label_values(name)
                .inc_by(self.new_alarms);
            s.last_drift_alarm_row
                .with_label_values(name)
                .set(self.last_alarm_row.unwrap_or(0) as i64);
        }
        s.stream_effective_sample_size
            .with_label_values(name)
            .set(self.effective_sample_size);
        m.set_stream_gauges(self.stream, self.n, self.alpha, self.as_of_ms);
        if let Some(t) = self.last_update_s {
            s.stream_last_update.with_label_values(name).set(t);
        }
        if self.rows > 0 {
            i.observations_applied
                .with_label_values(name)
                .inc_by(self.rows as u64);
            i.ingest_batch_rows
                .with_label_values(name)
                .observe(self.rows as f64);
            i.ingest_batch_seconds
                .with_label_values(name)
                .observe(self.seconds);
        }
    }
}
