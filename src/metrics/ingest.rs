//! The ingest loop's metrics: messages read and refused, rows folded or left out, declared
//! fields never seen, batches, freshness, lost messages, consumer lag and assignment, dead
//! letters, checkpoints and offset commits (`crate::ingest`).

use super::Registrar;
use prometheus::{HistogramVec, IntCounterVec, IntGaugeVec};

/// Messages, rows, batches, dead letters and checkpoints of the ingest loop.
pub struct IngestMetrics {
    /// Rows folded into a stream's statistics.
    pub observations_applied: IntCounterVec,
    /// Kafka messages read, by stream.
    pub messages_consumed: IntCounterVec,
    /// Messages refused, by stream and reason (`Reason::as_str`).
    pub messages_rejected: IntCounterVec,
    /// Keys of named messages and events the stream does not use (ignored, not refused).
    pub fields_ignored: IntCounterVec,
    /// Rows left out under `missing = "skip_row"`: a feature's value missing.
    pub rows_skipped: IntCounterVec,
    /// Rows left out because their target was absent or null (the stream's `missing` is not
    /// `reject`): their own count, because a misspelled `target` leaves out every row.
    pub rows_without_target: IntCounterVec,
    /// JSON events the fast path left to the tree path (refused ones, keys with escapes, a
    /// key given twice, deep nesting): a steady count beside the events read is their cost.
    pub events_by_tree: IntCounterVec,
    /// Declared fields (and the target, as `field = "target:NAME"`) absent from every one of
    /// the stream's first `ingest.field_check_events` events since start (1 each).
    pub fields_never_seen: IntGaugeVec,
    /// Time to fold one batch into the statistics and publish the snapshot.
    pub ingest_batch_seconds: HistogramVec,
    /// Rows per folded batch.
    pub ingest_batch_rows: HistogramVec,
    /// Per message: from its Kafka timestamp to its rows visible to readers (docs/concepts.md,
    /// "Freshness").
    pub ingest_freshness: HistogramVec,
    /// Messages whose timestamp was ahead of the service's clock by more than the skew
    /// allowance (`ingest::freshness::SKEW_ALLOWANCE_MS`): not observed in `ingest_freshness`.
    pub ingest_future_timestamps: IntCounterVec,
    /// Messages deleted from a partition (retention) between the position ravel had reached
    /// and the first message it read after them.
    pub ingest_lost_messages: IntCounterVec,
    /// Rows a stream with `windows` kept out of its time buckets, by reason: `too_old` (before
    /// `windows.keep`), `ahead` (beyond the allowance ahead of the clock), `no_timestamp`.
    pub window_rows_refused: IntCounterVec,
    /// Messages of a stream with `start = TIME` timestamped before it (or without a
    /// timestamp): read past, not folded.
    pub messages_before_start: IntCounterVec,
    /// High watermark minus the next offset the statistics need, per partition.
    pub consumer_lag: IntGaugeVec,
    /// Partitions this service currently owns.
    pub assigned_partitions: IntGaugeVec,
    /// Rejected messages whose copy reached `<topic>.dlq`, and those whose copy failed.
    pub dead_letters: IntCounterVec,
    pub dead_letter_failures: IntCounterVec,
    /// Rejected messages moved past without a delivered copy (`dlq.on_failure = "skip"`).
    pub dead_letters_skipped: IntCounterVec,
    /// Partitions held at a message whose dead-letter copy is not delivered yet.
    pub blocked_partitions: IntGaugeVec,
    pub checkpoints: IntCounterVec,
    pub checkpoint_failures: IntCounterVec,
    pub checkpoint_seconds: HistogramVec,
    pub offset_commits: IntCounterVec,
}

impl IngestMetrics {
    pub(super) fn new(r: &Registrar) -> IngestMetrics {
        IngestMetrics {
                observations_applied: r.counter(
                    "ravel_observations_applied_total",
                    "Rows folded into the running statistics",
                    &["stream"],
                ),
                messages_consumed: r.counter(
                    "ravel_messages_consumed_total",
                    "Kafka messages read",
                    &["stream"],
                ),
                messages_rejected: r.counter(
                    "ravel_messages_rejected_total",
                    "Kafka messages refused (not applied), by reason",
                    &["stream", "reason"],
                ),
                fields_ignored: r.counter(
                    "ravel_ingest_fields_ignored_total",
                    "Keys of named messages and events the stream does not use (ignored, not refused)",
                    &["stream"],
                ),
                events_by_tree: r.counter(
                    "ravel_ingest_events_by_tree_total",
                    "JSON events read as a tree because the fast path left them (refused ones, \
                     keys with escapes, a key given twice, deep nesting)",
                    &["stream"],
                ),
                rows_skipped: r.counter(
                    "ravel_ingest_rows_skipped_total",
                    "Rows left out because a feature's value was missing (missing = \"skip_row\")",
                    &["stream"],
                ),
                rows_without_target: r.counter(
                    "ravel_ingest_rows_without_target_total",
                    "Rows left out because their target was absent or null",
                    &["stream"],
                ),
                fields_never_seen: r.int_gauge(
                    "ravel_ingest_fields_never_seen",
                    "Declared fields (target:NAME for the target) absent from every one of the stream's first ingest.field_check_events events (1 each)",
                    &["stream", "field"],
                ),
                ingest_batch_seconds: r.histogram(
                    "ravel_ingest_batch_seconds",
                    "Time to fold one batch into the statistics and publish the snapshot",
                    &["stream"],
                    super::latency_buckets(),
                ),
                ingest_batch_rows: r.histogram(
                    "ravel_ingest_batch_rows",
                    "Rows per folded batch",
                    &["stream"],
                    prometheus::exponential_buckets(1.0, 4.0, 9).expect("valid buckets"),
                ),
                ingest_freshness: r.histogram(
                    "ravel_ingest_freshness_seconds",
                    "Time from a message's Kafka timestamp (CreateTime or LogAppendTime) to its rows visible to readers",
                    &["stream"],
                    freshness_buckets(),
                ),
                ingest_future_timestamps: r.counter(
                    "ravel_ingest_future_timestamps_total",
                    "Messages timestamped ahead of the service's clock by more than the skew allowance (1 s): not in ravel_ingest_freshness_seconds",
                    &["stream"],
                ),
                ingest_lost_messages: r.counter(
                    "ravel_ingest_lost_messages_total",
                    "Messages the broker deleted (retention) before ravel read them: from the partition's position to its log start",
                    &["stream"],
                ),
            window_rows_refused: r.counter(
                "ravel_window_rows_refused_total",
                "Rows of a stream with windows left out of its time buckets (in its statistics, in no window), by reason: too_old, ahead, no_timestamp",
                &["stream", "reason"],
            ),
            messages_before_start: r.counter(
                "ravel_ingest_messages_before_start_total",
                "Messages of a stream with start = TIME timestamped before it (or without a timestamp): read past, not folded",
                &["stream"],
            ),
                consumer_lag: r.int_gauge(
                    "ravel_consumer_lag",
                    "Messages in the partition not yet applied (high watermark - next offset)",
                    &["topic", "partition"],
                ),
                assigned_partitions: r.int_gauge(
                    "ravel_consumer_assigned_partitions",
                    "Partitions assigned to this service",
                    &["topic"],
                ),
                dead_letters: r.counter(
                    "ravel_dead_letters_total",
                    "Rejected messages delivered to the dead-letter topic",
                    &["stream"],
                ),
                dead_letter_failures: r.counter(
                    "ravel_dead_letter_failures_total",
                    "Rejected messages whose dead-letter copy could not be delivered",
                    &["stream"],
                ),
                dead_letters_skipped: r.counter(
                    "ravel_dead_letters_skipped_total",
                    "Rejected messages moved past although their dead-letter copy failed (dlq.on_failure = skip)",
                    &["stream"],
                ),
                blocked_partitions: r.int_gauge(
                    "ravel_blocked_partitions",
                    "Partitions held at a rejected message whose dead-letter copy is not delivered yet",
                    &["stream"],
                ),
                checkpoints: r.counter(
                    "ravel_checkpoints_total",
                    "Checkpoints written (with the kafka state store: partition states acknowledged)",
                    &["stream"],
                ),
                checkpoint_failures: r.counter(
                    "ravel_checkpoint_failures_total",
                    "Checkpoints (or partition states) that could not be written",
                    &["stream"],
                ),
                checkpoint_seconds: r.histogram(
                    "ravel_checkpoint_seconds",
                    "Time to write one stream's checkpoint (or one round of partition states) durably",
                    &["stream"],
                    super::latency_buckets(),
                ),
                offset_commits: r.counter(
                    "ravel_offset_commits_total",
                    "Offset commits to Kafka, by result",
                    &["result"],
                ),
        }
    }
}

/// 1 ms .. 10 min: a fresh stream sits in the first buckets, one catching up (after a restart,
/// or behind a burst) in the last.
fn freshness_buckets() -> Vec<f64> {
    vec![
        0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
        120.0, 300.0, 600.0,
    ]
}
