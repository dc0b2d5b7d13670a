//! Every Prometheus metric of the service, in one place, named by the Prometheus conventions
//! (`ravel_` prefix, base units, `_total` for counters, `_seconds` for durations).
//!
//! One `Metrics` value owns a private registry (not the global one), so several services in
//! one process (tests) do not share counters; `/metrics` renders it.

use crate::reason::Reason;
use prometheus::{
    Encoder, GaugeVec, HistogramOpts, HistogramVec, IntCounterVec, IntGauge, IntGaugeVec, Opts,
    Registry, TextEncoder,
};

pub struct Metrics {
    registry: Registry,
    /// Scorers (`[[scorers]]`): messages scored (a prediction written and acknowledged),
    /// messages refused by reason, predictions whose delivery failed, and the rows of the
    /// statistics the current model came from.
    pub scorer_messages: IntCounterVec,
    pub scorer_rejected: IntCounterVec,
    pub scorer_delivery_failures: IntCounterVec,
    pub scorer_model_rows: IntGaugeVec,
    pub scorer_lag: IntGaugeVec,
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
    /// Declared fields (and the target, as `field = "target:NAME"`) absent from every one of
    /// the stream's first `ingest.field_check_events` events since start (1 each).
    pub fields_never_seen: IntGaugeVec,
    /// 1 while schema'd messages wait for the Schema Registry (unreachable, refusing ravel's
    /// credentials, or not answering as a registry); `/readyz` says why.
    pub schema_registry_waiting: IntGauge,
    /// Rejected messages whose copy reached `<topic>.dlq`, and those whose copy failed.
    pub dead_letters: IntCounterVec,
    pub dead_letter_failures: IntCounterVec,
    /// Rejected messages moved past without a delivered copy (`dlq.on_failure = "skip"`).
    pub dead_letters_skipped: IntCounterVec,
    /// Partitions held at a message whose dead-letter copy is not delivered yet.
    pub blocked_partitions: IntGaugeVec,
    /// Topics ravel reads or writes that the cluster does not have (1 each), by role.
    pub missing_topics: IntGaugeVec,
    /// Authorization errors from Kafka, by resource type, resource and operation.
    pub kafka_authorization_errors: IntCounterVec,
    /// Time to fold one batch into the statistics and publish the snapshot.
    pub ingest_batch_seconds: HistogramVec,
    /// Rows per folded batch.
    pub ingest_batch_rows: HistogramVec,
    /// Per message: from its Kafka timestamp to its rows visible to readers (docs/concepts.md,
    /// "Freshness").
    pub ingest_freshness: HistogramVec,
    /// Messages whose timestamp was ahead of the service's clock by more than the skew
    /// allowance (`ingest::fold::SKEW_ALLOWANCE_MS`): not observed in `ingest_freshness`.
    pub ingest_future_timestamps: IntCounterVec,
    /// Rows a stream with `windows` kept out of its time buckets, by reason: `too_old` (before
    /// `windows.keep`), `ahead` (beyond the allowance ahead of the clock), `no_timestamp`.
    pub window_rows_refused: IntCounterVec,
    /// Messages deleted from a partition (retention) between the position ravel had reached
    /// and the first message it read after them.
    pub ingest_lost_messages: IntCounterVec,
    /// Time of one model / path extraction (includes building the Gram problem).
    pub extraction_seconds: HistogramVec,
    /// Extractions not answered: `busy` (queue full), `timeout` (deadline), `cancelled`
    /// (client gone or server stopping).
    pub extractions_refused: IntCounterVec,
    /// High watermark minus the next offset the statistics need, per partition.
    pub consumer_lag: IntGaugeVec,
    /// Partitions this service currently owns.
    pub assigned_partitions: IntGaugeVec,
    /// Current alpha and row count per stream.
    pub stream_alpha: GaugeVec,
    /// Rows the averages effectively span (about 1/alpha under forgetting).
    pub stream_effective_sample_size: GaugeVec,
    /// Live prequential quality by stream and figure (`quality`): the last W rows, weighted,
    /// in total, the configured floors, rows predicted and the quality model's rows. Set when
    /// `/metrics` is read (`set_quality`).
    pub stream_quality_window: GaugeVec,
    pub stream_quality_weighted: GaugeVec,
    pub stream_quality_total: GaugeVec,
    pub stream_quality_floor: GaugeVec,
    pub stream_quality_rows: IntGaugeVec,
    pub stream_quality_window_fill: GaugeVec,
    pub stream_quality_model_rows: IntGaugeVec,
    /// Drift alarms of the adaptive schedule, and the row of the last one.
    pub drift_alarms: IntCounterVec,
    pub last_drift_alarm_row: IntGaugeVec,
    pub stream_observations: IntGaugeVec,
    pub stream_last_update: GaugeVec,
    /// The snapshot's `as_of`: Kafka timestamp of the newest message in the statistics.
    pub stream_as_of: GaugeVec,
    /// Feature streams: features applied to the selection, substitutions made, and the state
    /// after the last batch (labels received, loss L(u), features selected, passes,
    /// Asy-OS staleness per worker).
    pub features_processed: IntCounterVec,
    pub feature_substitutions: IntCounterVec,
    pub feature_stream_labels: IntGaugeVec,
    pub feature_stream_loss: GaugeVec,
    pub feature_stream_selected: IntGaugeVec,
    pub feature_stream_passes: IntGaugeVec,
    pub feature_staleness_mean: GaugeVec,
    pub feature_staleness_max: IntGaugeVec,
    pub checkpoints: IntCounterVec,
    pub checkpoint_failures: IntCounterVec,
    pub checkpoint_seconds: HistogramVec,
    pub offset_commits: IntCounterVec,
    pub http_requests: IntCounterVec,
    pub http_request_seconds: HistogramVec,
    /// HTTP connections open now (at most `http.max_connections`).
    pub http_open_connections: IntGauge,
    /// Extractions computing now, and requests waiting for a slot.
    pub extractions_running: IntGauge,
    pub extractions_waiting: IntGauge,
    /// Version labels (value 1); whether the service is up is Prometheus's own `up`.
    pub build_info: GaugeVec,
}

/// 1 ms .. 10 min: a fresh stream sits in the first buckets, one catching up (after a restart,
/// or behind a burst) in the last.
fn freshness_buckets() -> Vec<f64> {
    vec![
        0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
        120.0, 300.0, 600.0,
    ]
}

fn latency_buckets() -> Vec<f64> {
    // 50 us .. ~100 s
    prometheus::exponential_buckets(5e-5, 2.5, 16).expect("valid buckets")
}

impl Metrics {
    pub fn new() -> Metrics {
        let registry = Registry::new();
        let counter = |name: &str, help: &str, labels: &[&str]| {
            let c = IntCounterVec::new(Opts::new(name, help), labels).expect("valid metric");
            registry
                .register(Box::new(c.clone()))
                .expect("unique metric");
            c
        };
        let int_gauge = |name: &str, help: &str, labels: &[&str]| {
            let g = IntGaugeVec::new(Opts::new(name, help), labels).expect("valid metric");
            registry
                .register(Box::new(g.clone()))
                .expect("unique metric");
            g
        };
        let gauge = |name: &str, help: &str, labels: &[&str]| {
            let g = GaugeVec::new(Opts::new(name, help), labels).expect("valid metric");
            registry
                .register(Box::new(g.clone()))
                .expect("unique metric");
            g
        };
        let histogram = |name: &str, help: &str, labels: &[&str], buckets: Vec<f64>| {
            let h = HistogramVec::new(HistogramOpts::new(name, help).buckets(buckets), labels)
                .expect("valid metric");
            registry
                .register(Box::new(h.clone()))
                .expect("unique metric");
            h
        };
        let m = Metrics {
            observations_applied: counter(
                "ravel_observations_applied_total",
                "Rows folded into the running statistics",
                &["stream"],
            ),
            messages_consumed: counter(
                "ravel_messages_consumed_total",
                "Kafka messages read",
                &["stream"],
            ),
            messages_rejected: counter(
                "ravel_messages_rejected_total",
                "Kafka messages refused (not applied), by reason",
                &["stream", "reason"],
            ),
            fields_ignored: counter(
                "ravel_ingest_fields_ignored_total",
                "Keys of named messages and events the stream does not use (ignored, not refused)",
                &["stream"],
            ),
            rows_skipped: counter(
                "ravel_ingest_rows_skipped_total",
                "Rows left out because a feature's value was missing (missing = \"skip_row\")",
                &["stream"],
            ),
            rows_without_target: counter(
                "ravel_ingest_rows_without_target_total",
                "Rows left out because their target was absent or null",
                &["stream"],
            ),
            fields_never_seen: int_gauge(
                "ravel_ingest_fields_never_seen",
                "Declared fields (target:NAME for the target) absent from every one of the stream's first ingest.field_check_events events (1 each)",
                &["stream", "field"],
            ),
            dead_letters: counter(
                "ravel_dead_letters_total",
                "Rejected messages delivered to the dead-letter topic",
                &["stream"],
            ),
            dead_letter_failures: counter(
                "ravel_dead_letter_failures_total",
                "Rejected messages whose dead-letter copy could not be delivered",
                &["stream"],
            ),
            dead_letters_skipped: counter(
                "ravel_dead_letters_skipped_total",
                "Rejected messages moved past although their dead-letter copy failed (dlq.on_failure = skip)",
                &["stream"],
            ),
            blocked_partitions: int_gauge(
                "ravel_blocked_partitions",
                "Partitions held at a rejected message whose dead-letter copy is not delivered yet",
                &["stream"],
            ),
            missing_topics: int_gauge(
                "ravel_missing_topics",
                "Topics ravel needs that the cluster does not have (1 each)",
                &["topic", "role"],
            ),
            kafka_authorization_errors: counter(
                "ravel_kafka_authorization_errors_total",
                "Authorization errors from Kafka, by resource type, resource and operation",
                &["resource_type", "resource", "operation"],
            ),
            ingest_batch_seconds: histogram(
                "ravel_ingest_batch_seconds",
                "Time to fold one batch into the statistics and publish the snapshot",
                &["stream"],
                latency_buckets(),
            ),
            ingest_batch_rows: histogram(
                "ravel_ingest_batch_rows",
                "Rows per folded batch",
                &["stream"],
                prometheus::exponential_buckets(1.0, 4.0, 9).expect("valid buckets"),
            ),
            ingest_freshness: histogram(
                "ravel_ingest_freshness_seconds",
                "Time from a message's Kafka timestamp (CreateTime or LogAppendTime) to its rows visible to readers",
                &["stream"],
                freshness_buckets(),
            ),
            ingest_future_timestamps: counter(
                "ravel_ingest_future_timestamps_total",
                "Messages timestamped ahead of the service's clock by more than the skew allowance (1 s): not in ravel_ingest_freshness_seconds",
                &["stream"],
            ),
            window_rows_refused: counter(
                "ravel_window_rows_refused_total",
                "Rows of a stream with windows left out of its time buckets (in its statistics, in no window), by reason: too_old, ahead, no_timestamp",
                &["stream", "reason"],
            ),
            ingest_lost_messages: counter(
                "ravel_ingest_lost_messages_total",
                "Messages the broker deleted (retention) before ravel read them: from the partition's position to its log start",
                &["stream"],
            ),
            extraction_seconds: histogram(
                "ravel_extraction_seconds",
                "Time of one model extraction from the statistics",
                &["stream", "kind", "method"],
                latency_buckets(),
            ),
            extractions_refused: counter(
                "ravel_extractions_refused_total",
                "Extractions not answered, by reason (busy, timeout, cancelled)",
                &["reason"],
            ),
            consumer_lag: int_gauge(
                "ravel_consumer_lag",
                "Messages in the partition not yet applied (high watermark - next offset)",
                &["topic", "partition"],
            ),
            assigned_partitions: int_gauge(
                "ravel_consumer_assigned_partitions",
                "Partitions assigned to this service",
                &["topic"],
            ),
            stream_alpha: gauge(
                "ravel_stream_alpha",
                "Weight the next row gets (003 eq. 6)",
                &["stream"],
            ),
            stream_effective_sample_size: gauge(
                "ravel_stream_effective_sample_size",
                "Kish effective sample size of the rows' weights (n for plain averages, (2 - alpha)/alpha at a fixed alpha)",
                &["stream"],
            ),
            stream_quality_window: gauge(
                "ravel_stream_quality_window",
                "Prequential quality of the last quality.window_rows rows, by figure (rmse, mae, r2; auc, brier, balanced_accuracy, weighted_loss)",
                &["stream", "figure"],
            ),
            stream_quality_weighted: gauge(
                "ravel_stream_quality_weighted",
                "Prequential quality, exponentially weighted over quality.decay_rows rows, by figure",
                &["stream", "figure"],
            ),
            stream_quality_total: gauge(
                "ravel_stream_quality_total",
                "Prequential quality of every row predicted since the service started, by figure",
                &["stream", "figure"],
            ),
            stream_quality_floor: gauge(
                "ravel_stream_quality_floor",
                "Configured floor of a window figure (quality.floor; alert RavelQualityBelowFloor)",
                &["stream", "figure"],
            ),
            stream_quality_rows: int_gauge(
                "ravel_stream_quality_rows",
                "Rows predicted before being folded since the service started",
                &["stream"],
            ),
            scorer_messages: counter(
                "ravel_scorer_messages_total",
                "Messages scored: their prediction written to the output topic and acknowledged",
                &["scorer"],
            ),
            scorer_rejected: counter(
                "ravel_scorer_messages_rejected_total",
                "Messages a scorer refused (dead-lettered, no prediction), by reason",
                &["scorer", "reason"],
            ),
            scorer_delivery_failures: counter(
                "ravel_scorer_delivery_failures_total",
                "Predictions whose delivery failed (their messages are scored again)",
                &["scorer"],
            ),
            scorer_model_rows: int_gauge(
                "ravel_scorer_model_rows",
                "Rows of the statistics the scorer's current model was extracted from",
                &["scorer"],
            ),
            scorer_lag: int_gauge(
                "ravel_scorer_lag_messages",
                "Messages of the scorer's input not read yet (the partitions' ends as last fetched, less the scorer's positions), over its assigned partitions",
                &["scorer"],
            ),
            stream_quality_window_fill: gauge(
                "ravel_stream_quality_window_fill",
                "Rows in the quality window over quality.window_rows (per partition folded here): 1 when full",
                &["stream"],
            ),
            stream_quality_model_rows: int_gauge(
                "ravel_stream_quality_model_rows",
                "Rows of the statistics the current quality model was extracted from",
                &["stream"],
            ),
            drift_alarms: counter(
                "ravel_stream_drift_alarms_total",
                "Changes detected by the adaptive alpha schedule",
                &["stream"],
            ),
            last_drift_alarm_row: int_gauge(
                "ravel_stream_last_drift_alarm_row",
                "Row count n at the last drift alarm (0: none yet)",
                &["stream"],
            ),
            stream_observations: int_gauge(
                "ravel_stream_observations",
                "Rows in the statistics (n)",
                &["stream"],
            ),
            stream_last_update: gauge(
                "ravel_stream_last_update_timestamp_seconds",
                "Unix time of the last folded batch",
                &["stream"],
            ),
            stream_as_of: gauge(
                "ravel_stream_as_of_timestamp_seconds",
                "Kafka timestamp of the newest message in the statistics (the API's as_of)",
                &["stream"],
            ),
            features_processed: counter(
                "ravel_feature_stream_features_processed_total",
                "Feature-stream features applied to the selection",
                &["stream"],
            ),
            feature_substitutions: counter(
                "ravel_feature_stream_substitutions_total",
                "Feature-stream entries that evicted a retained feature",
                &["stream"],
            ),
            feature_stream_labels: int_gauge(
                "ravel_feature_stream_labels",
                "1 once the feature stream has its labels",
                &["stream"],
            ),
            feature_stream_loss: gauge(
                "ravel_feature_stream_loss",
                "Current objective L(u) of the feature stream (000 eqs. 2-3)",
                &["stream"],
            ),
            feature_stream_selected: int_gauge(
                "ravel_feature_stream_selected",
                "Features currently selected (at most s)",
                &["stream"],
            ),
            feature_stream_passes: int_gauge(
                "ravel_feature_stream_passes",
                "Passes over the features seen (the open one included)",
                &["stream"],
            ),
            feature_staleness_mean: gauge(
                "ravel_feature_stream_staleness_mean",
                "Asy-OS: mean u_C updates between a worker's read and its push",
                &["stream", "worker"],
            ),
            feature_staleness_max: int_gauge(
                "ravel_feature_stream_staleness_max",
                "Asy-OS: largest u_C updates between a worker's read and its push (tau_max)",
                &["stream", "worker"],
            ),
            checkpoints: counter(
                "ravel_checkpoints_total",
                "Checkpoints written (with the kafka state store: partition states acknowledged)",
                &["stream"],
            ),
            checkpoint_failures: counter(
                "ravel_checkpoint_failures_total",
                "Checkpoints (or partition states) that could not be written",
                &["stream"],
            ),
            checkpoint_seconds: histogram(
                "ravel_checkpoint_seconds",
                "Time to write one stream's checkpoint (or one round of partition states) durably",
                &["stream"],
                latency_buckets(),
            ),
            offset_commits: counter(
                "ravel_offset_commits_total",
                "Offset commits to Kafka, by result",
                &["result"],
            ),
            http_requests: counter(
                "ravel_http_requests_total",
                "HTTP requests, by route, method and status",
                &["route", "method", "status"],
            ),
            http_request_seconds: histogram(
                "ravel_http_request_duration_seconds",
                "HTTP request latency",
                &["route", "method"],
                latency_buckets(),
            ),
            extractions_running: {
                let g = IntGauge::new(
                    "ravel_extractions_running",
                    "Extractions computing now (at most http.max_concurrent_extractions)",
                )
                .expect("valid metric");
                registry
                    .register(Box::new(g.clone()))
                    .expect("unique metric");
                g
            },
            extractions_waiting: {
                let g = IntGauge::new(
                    "ravel_extractions_waiting",
                    "Extraction requests waiting for a slot (at most http.max_queued_extractions)",
                )
                .expect("valid metric");
                registry
                    .register(Box::new(g.clone()))
                    .expect("unique metric");
                g
            },
            http_open_connections: {
                let g = IntGauge::new(
                    "ravel_http_open_connections",
                    "HTTP connections open now (at most http.max_connections)",
                )
                .expect("valid metric");
                registry
                    .register(Box::new(g.clone()))
                    .expect("unique metric");
                g
            },
            schema_registry_waiting: {
                let g = IntGauge::new(
                    "ravel_schema_registry_waiting",
                    "1 while schema'd messages wait for the Schema Registry (/readyz says why)",
                )
                .expect("valid metric");
                registry
                    .register(Box::new(g.clone()))
                    .expect("unique metric");
                g
            },
            build_info: gauge(
                "ravel_build_info",
                "Build information (value 1)",
                &["version", "librdkafka"],
            ),
            registry,
        };
        let (_, librdkafka) = rdkafka::util::get_rdkafka_version();
        m.build_info
            .with_label_values(&[env!("CARGO_PKG_VERSION"), librdkafka.as_str()])
            .set(1.0);
        m
    }

    /// Creates the per-stream series at zero so dashboards see them before the first row, and
    /// so alert rules on counters (`increase(ravel_stream_drift_alarms_total[..]) > 0`) see the first
    /// event: Prometheus computes no increase for a series that appears already at 1.
    pub fn declare_scorer(&self, scorer: &str) {
        self.scorer_messages.with_label_values(&[scorer]);
        for r in Reason::ROWS {
            self.scorer_rejected
                .with_label_values(&[scorer, r.as_str()]);
        }
        self.scorer_delivery_failures.with_label_values(&[scorer]);
        self.scorer_model_rows.with_label_values(&[scorer]);
        self.scorer_lag.with_label_values(&[scorer]);
    }

    pub fn declare_stream(&self, stream: &str) {
        self.observations_applied.with_label_values(&[stream]);
        self.messages_consumed.with_label_values(&[stream]);
        for r in Reason::ROWS {
            self.messages_rejected
                .with_label_values(&[stream, r.as_str()]);
        }
        self.fields_ignored.with_label_values(&[stream]);
        self.rows_skipped.with_label_values(&[stream]);
        self.rows_without_target.with_label_values(&[stream]);
        self.dead_letters.with_label_values(&[stream]);
        self.dead_letter_failures.with_label_values(&[stream]);
        self.dead_letters_skipped.with_label_values(&[stream]);
        self.blocked_partitions.with_label_values(&[stream]);
        self.stream_observations.with_label_values(&[stream]);
        self.drift_alarms.with_label_values(&[stream]);
        self.last_drift_alarm_row.with_label_values(&[stream]);
        self.ingest_freshness.with_label_values(&[stream]);
        self.ingest_future_timestamps.with_label_values(&[stream]);
        self.ingest_lost_messages.with_label_values(&[stream]);
    }

    /// Creates a stream's checkpoint counters at zero (only when checkpoints are on, so that
    /// their absence says they are off), for the same reason as `declare_stream`.
    pub fn declare_checkpoints(&self, stream: &str) {
        self.checkpoints.with_label_values(&[stream]);
        self.checkpoint_failures.with_label_values(&[stream]);
    }

    /// Creates a feature stream's series at zero; staleness for each Asy-OS worker.
    pub fn declare_feature_stream(&self, stream: &str, workers: usize) {
        self.messages_consumed.with_label_values(&[stream]);
        for r in Reason::FEATURES {
            self.messages_rejected
                .with_label_values(&[stream, r.as_str()]);
        }
        self.dead_letters.with_label_values(&[stream]);
        self.features_processed.with_label_values(&[stream]);
        self.feature_substitutions.with_label_values(&[stream]);
        self.feature_stream_labels.with_label_values(&[stream]);
        self.feature_stream_selected.with_label_values(&[stream]);
        self.feature_stream_passes.with_label_values(&[stream]);
        if workers > 1 {
            for t in 0..workers {
                let t = t.to_string();
                self.feature_staleness_mean.with_label_values(&[stream, &t]);
                self.feature_staleness_max.with_label_values(&[stream, &t]);
            }
        }
    }

    /// Sets stream `name`'s quality gauges from its figures (`/metrics` calls it before it
    /// renders, so the figures are those of the moment of the scrape). A figure not defined
    /// yet (no row, one class only) has no series.
    pub fn set_quality(
        &self,
        name: &str,
        figures: &ravel_core::prequential::Report,
        floor: &std::collections::BTreeMap<String, f64>,
        rows: u64,
        model_rows: Option<u64>,
        window_fill: f64,
    ) {
        self.stream_quality_window_fill
            .with_label_values(&[name])
            .set(window_fill);
        let task_figures = [
            "rmse",
            "mae",
            "r2",
            "auc",
            "brier",
            "balanced_accuracy",
            "weighted_loss",
        ];
        for (gauge, figures) in [
            (&self.stream_quality_window, &figures.window),
            (&self.stream_quality_weighted, &figures.weighted),
            (&self.stream_quality_total, &figures.total),
        ] {
            let named = figures.named();
            for f in task_figures {
                match named.iter().find(|(k, _)| *k == f) {
                    Some((_, v)) => gauge.with_label_values(&[name, f]).set(*v),
                    None => {
                        let _ = gauge.remove_label_values(&[name, f]);
                    }
                }
            }
        }
        for (f, v) in floor {
            self.stream_quality_floor
                .with_label_values(&[name, f])
                .set(*v);
        }
        self.stream_quality_rows
            .with_label_values(&[name])
            .set(rows.min(i64::MAX as u64) as i64);
        self.stream_quality_model_rows
            .with_label_values(&[name])
            .set(model_rows.unwrap_or(0).min(i64::MAX as u64) as i64);
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        let mut buf = Vec::new();
        TextEncoder::new()
            .encode(&self.registry.gather(), &mut buf)
            .expect("text encoding");
        String::from_utf8(buf).expect("prometheus text is UTF-8")
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Prometheus conventions, one prefix per subsystem: every series declared for a stream
    /// and a feature stream is checked by name and type.
    #[test]
    fn names_follow_the_conventions() {
        let m = Metrics::new();
        m.declare_stream("s");
        m.declare_checkpoints("s");
        m.declare_feature_stream("f", 2);
        let families = m.registry.gather();
        let names: Vec<&str> = families.iter().map(|f| f.name()).collect();
        assert!(!names.contains(&"ravel_up"), "{names:?}");
        assert!(names.contains(&"ravel_build_info"));
        assert!(names.contains(&"ravel_feature_stream_features_processed_total"));
        assert!(names.contains(&"ravel_stream_drift_alarms_total"));
        for f in &families {
            let name = f.name();
            assert!(name.starts_with("ravel_"), "{name}");
            // Feature-stream series share one prefix (they used to be ravel_features_* and
            // ravel_feature_*).
            if name.contains("feature") {
                assert!(name.starts_with("ravel_feature_stream_"), "{name}");
            }
            // Drift belongs to a stream's schedule.
            if name.contains("drift") || name.contains("alpha") {
                assert!(name.starts_with("ravel_stream_"), "{name}");
            }
            match f.get_field_type() {
                prometheus::proto::MetricType::COUNTER => {
                    assert!(name.ends_with("_total"), "counter {name}")
                }
                prometheus::proto::MetricType::HISTOGRAM => assert!(
                    name.ends_with("_seconds") || name.ends_with("_rows"),
                    "histogram {name}: durations in seconds"
                ),
                _ => assert!(!name.ends_with("_total"), "gauge {name}"),
            }
            assert!(
                !name.ends_with("_ms") && !name.contains("millis"),
                "{name}: base units"
            );
        }
    }
}
