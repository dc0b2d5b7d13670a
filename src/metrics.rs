//! Every Prometheus metric of the service, in one place, named by the Prometheus conventions
//! (`ravel_` prefix, base units, `_total` for counters, `_seconds` for durations).
//!
//! One `Metrics` value owns a private registry (not the global one), so several services in
//! one process (tests) do not share counters; `/metrics` renders it.

use crate::ingest::format::Reason;
use prometheus::{
    Encoder, Gauge, GaugeVec, HistogramOpts, HistogramVec, IntCounterVec, IntGaugeVec, Opts,
    Registry, TextEncoder,
};

pub struct Metrics {
    registry: Registry,
    /// Rows folded into a stream's statistics.
    pub observations_applied: IntCounterVec,
    /// Kafka messages read, by stream.
    pub messages_consumed: IntCounterVec,
    /// Messages refused, by stream and reason (`Reason::as_str`).
    pub messages_rejected: IntCounterVec,
    /// Rejected messages whose copy reached `<topic>.dlq`, and those whose copy failed.
    pub dead_letters: IntCounterVec,
    pub dead_letter_failures: IntCounterVec,
    /// Time to fold one batch into the statistics and publish the snapshot.
    pub ingest_batch_seconds: HistogramVec,
    /// Rows per folded batch.
    pub ingest_batch_rows: HistogramVec,
    /// Time of one model / path extraction (includes building the Gram problem).
    pub extraction_seconds: HistogramVec,
    /// High watermark minus the next offset the statistics need, per partition.
    pub consumer_lag: IntGaugeVec,
    /// Partitions this service currently owns.
    pub assigned_partitions: IntGaugeVec,
    /// Current alpha and row count per stream.
    pub stream_alpha: GaugeVec,
    /// Rows the averages effectively span (about 1/alpha under forgetting).
    pub stream_effective_sample_size: GaugeVec,
    /// Drift alarms of the adaptive schedule, and the row of the last one.
    pub drift_alarms: IntCounterVec,
    pub last_drift_alarm_row: IntGaugeVec,
    pub stream_observations: IntGaugeVec,
    pub stream_last_update: GaugeVec,
    pub checkpoints: IntCounterVec,
    pub checkpoint_failures: IntCounterVec,
    pub checkpoint_seconds: HistogramVec,
    pub offset_commits: IntCounterVec,
    pub http_requests: IntCounterVec,
    pub http_request_seconds: HistogramVec,
    pub build_info: GaugeVec,
    pub up: Gauge,
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
            extraction_seconds: histogram(
                "ravel_extraction_seconds",
                "Time of one model extraction from the statistics",
                &["stream", "kind", "method"],
                latency_buckets(),
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
                "Rows the running averages effectively span (n for plain averages, ~1/alpha when forgetting)",
                &["stream"],
            ),
            drift_alarms: counter(
                "ravel_drift_alarms_total",
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
            checkpoints: counter(
                "ravel_checkpoints_total",
                "Checkpoints written",
                &["stream"],
            ),
            checkpoint_failures: counter(
                "ravel_checkpoint_failures_total",
                "Checkpoints that could not be written",
                &["stream"],
            ),
            checkpoint_seconds: histogram(
                "ravel_checkpoint_seconds",
                "Time to write one stream's checkpoint durably",
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
            build_info: gauge(
                "ravel_build_info",
                "Build information (value 1)",
                &["version", "librdkafka"],
            ),
            up: {
                let g = Gauge::new("ravel_up", "1 while the service runs").expect("valid metric");
                registry
                    .register(Box::new(g.clone()))
                    .expect("unique metric");
                g
            },
            registry,
        };
        let (_, librdkafka) = rdkafka::util::get_rdkafka_version();
        m.build_info
            .with_label_values(&[env!("CARGO_PKG_VERSION"), librdkafka.as_str()])
            .set(1.0);
        m.up.set(1.0);
        m
    }

    /// Creates the per-stream series at zero so dashboards see them before the first row.
    pub fn declare_stream(&self, stream: &str) {
        self.observations_applied.with_label_values(&[stream]);
        self.messages_consumed.with_label_values(&[stream]);
        for r in Reason::ROWS {
            self.messages_rejected
                .with_label_values(&[stream, r.as_str()]);
        }
        self.dead_letters.with_label_values(&[stream]);
        self.stream_observations.with_label_values(&[stream]);
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
