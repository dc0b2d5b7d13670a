//! Every Prometheus metric of the service, named by the Prometheus conventions (`ravel_`
//! prefix, base units, `_total` for counters, `_seconds` for durations), grouped by the area
//! it measures, one file an area: `ingest` (the consumer loop, dead letters, checkpoints),
//! `streams` (each stream's published state and live quality), `features` (feature
//! streams), `scorers`, `api` (HTTP and extractions) and `cluster` (topics, authorization,
//! the Schema Registry). Code reaches a metric by its area: `metrics.ingest.rows_skipped`;
//! what the fold reports is an internal event of `events` (its metrics moved together, once).
//!
//! One `Metrics` value owns a private registry (not the global one), so several services in
//! one process (tests) do not share counters; `/metrics` renders it.

mod api;
mod cluster;
pub mod events;
mod features;
mod ingest;
mod scorers;
mod streams;

pub use api::ApiMetrics;
pub use cluster::ClusterMetrics;
pub use features::FeatureStreamMetrics;
pub use ingest::IngestMetrics;
pub use scorers::ScorerMetrics;
pub use streams::StreamMetrics;

use crate::reason::Reason;
use prometheus::core::Collector;
use prometheus::{
    Encoder, GaugeVec, HistogramOpts, HistogramVec, IntCounterVec, IntGauge, IntGaugeVec, Opts,
    Registry, TextEncoder,
};

pub struct Metrics {
    registry: Registry,
    pub ingest: IngestMetrics,
    pub streams: StreamMetrics,
    pub features: FeatureStreamMetrics,
    pub scorers: ScorerMetrics,
    pub api: ApiMetrics,
    pub cluster: ClusterMetrics,
    /// Version labels (value 1); whether the service is up is Prometheus's own `up`.
    pub build_info: GaugeVec,
}

/// Makes each metric and registers it in the service's registry: what every area's `new`
/// takes. A name registered twice is a bug, caught by the first test that builds `Metrics`.
pub(crate) struct Registrar<'a>(&'a Registry);

impl Registrar<'_> {
    fn register<C: Collector + Clone + 'static>(&self, c: C) -> C {
        self.0.register(Box::new(c.clone())).expect("unique metric");
        c
    }

    pub fn counter(&self, name: &str, help: &str, labels: &[&str]) -> IntCounterVec {
        self.register(IntCounterVec::new(Opts::new(name, help), labels).expect("valid metric"))
    }

    pub fn int_gauge(&self, name: &str, help: &str, labels: &[&str]) -> IntGaugeVec {
        self.register(IntGaugeVec::new(Opts::new(name, help), labels).expect("valid metric"))
    }

    pub fn gauge(&self, name: &str, help: &str, labels: &[&str]) -> GaugeVec {
        self.register(GaugeVec::new(Opts::new(name, help), labels).expect("valid metric"))
    }

    pub fn histogram(
        &self,
        name: &str,
        help: &str,
        labels: &[&str],
        buckets: Vec<f64>,
    ) -> HistogramVec {
        let opts = HistogramOpts::new(name, help).buckets(buckets);
        self.register(HistogramVec::new(opts, labels).expect("valid metric"))
    }

    /// A gauge without labels.
    pub fn scalar_gauge(&self, name: &str, help: &str) -> IntGauge {
        self.register(IntGauge::new(name, help).expect("valid metric"))
    }
}

/// 50 us .. ~100 s: extractions, requests, batches and checkpoints.
fn latency_buckets() -> Vec<f64> {
    prometheus::exponential_buckets(5e-5, 2.5, 16).expect("valid buckets")
}

impl Metrics {
    pub fn new() -> Metrics {
        let registry = Registry::new();
        let r = Registrar(&registry);
        let m = Metrics {
            ingest: IngestMetrics::new(&r),
            streams: StreamMetrics::new(&r),
            features: FeatureStreamMetrics::new(&r),
            scorers: ScorerMetrics::new(&r),
            api: ApiMetrics::new(&r),
            cluster: ClusterMetrics::new(&r),
            build_info: r.gauge(
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
        self.scorers.scorer_messages.with_label_values(&[scorer]);
        for r in Reason::ROWS {
            self.scorers
                .scorer_rejected
                .with_label_values(&[scorer, r.as_str()]);
        }
        self.scorers
            .scorer_delivery_failures
            .with_label_values(&[scorer]);
        self.scorers.scorer_model_rows.with_label_values(&[scorer]);
        self.scorers.scorer_lag.with_label_values(&[scorer]);
        self.scorers
            .scorer_events_in_model
            .with_label_values(&[scorer]);
    }

    /// A stream's gauges of its published statistics: its row count, its current alpha and
    /// the time its rows reach (when it keeps one). At start and after every fold.
    /// A message of `stream` read.
    pub fn messages_consumed(&self, stream: &str) {
        self.ingest
            .messages_consumed
            .with_label_values(&[stream])
            .inc();
    }

    pub fn set_stream_gauges(&self, stream: &str, n: u64, alpha: f64, as_of_ms: Option<u64>) {
        let s = &self.streams;
        s.stream_observations
            .with_label_values(&[stream])
            .set(n as i64);
        s.stream_alpha.with_label_values(&[stream]).set(alpha);
        if let Some(ms) = as_of_ms {
            s.stream_as_of
                .with_label_values(&[stream])
                .set(ms as f64 / 1000.0);
        }
    }

    pub fn declare_stream(&self, stream: &str) {
        self.ingest
            .observations_applied
            .with_label_values(&[stream]);
        self.ingest.messages_consumed.with_label_values(&[stream]);
        for r in Reason::ROWS {
            self.ingest
                .messages_rejected
                .with_label_values(&[stream, r.as_str()]);
        }
        self.ingest.fields_ignored.with_label_values(&[stream]);
        self.ingest.rows_skipped.with_label_values(&[stream]);
        self.ingest
            .messages_before_start
            .with_label_values(&[stream]);
        self.ingest.rows_without_target.with_label_values(&[stream]);
        self.ingest.events_by_tree.with_label_values(&[stream]);
        self.ingest.dead_letters.with_label_values(&[stream]);
        self.ingest
            .dead_letter_failures
            .with_label_values(&[stream]);
        self.ingest
            .dead_letters_skipped
            .with_label_values(&[stream]);
        self.ingest.blocked_partitions.with_label_values(&[stream]);
        self.streams
            .stream_observations
            .with_label_values(&[stream]);
        self.streams.drift_alarms.with_label_values(&[stream]);
        self.streams
            .last_drift_alarm_row
            .with_label_values(&[stream]);
        self.ingest.ingest_freshness.with_label_values(&[stream]);
        self.ingest
            .ingest_future_timestamps
            .with_label_values(&[stream]);
        self.ingest
            .ingest_lost_messages
            .with_label_values(&[stream]);
    }

    /// Creates a stream's checkpoint counters at zero (only when checkpoints are on, so that
    /// their absence says they are off), for the same reason as `declare_stream`.
    pub fn declare_checkpoints(&self, stream: &str) {
        self.ingest.checkpoints.with_label_values(&[stream]);
        self.ingest.checkpoint_failures.with_label_values(&[stream]);
    }

    /// Creates a feature stream's series at zero; staleness for each Asy-OS worker.
    pub fn declare_feature_stream(&self, stream: &str, workers: usize) {
        self.ingest.messages_consumed.with_label_values(&[stream]);
        for r in Reason::FEATURES {
            self.ingest
                .messages_rejected
                .with_label_values(&[stream, r.as_str()]);
        }
        self.ingest.dead_letters.with_label_values(&[stream]);
        self.features
            .features_processed
            .with_label_values(&[stream]);
        self.features
            .feature_substitutions
            .with_label_values(&[stream]);
        self.features
            .feature_stream_labels
            .with_label_values(&[stream]);
        self.features
            .feature_stream_selected
            .with_label_values(&[stream]);
        self.features
            .feature_stream_passes
            .with_label_values(&[stream]);
        if workers > 1 {
            for t in 0..workers {
                let t = t.to_string();
                self.features
                    .feature_staleness_mean
                    .with_label_values(&[stream, &t]);
                self.features
                    .feature_staleness_max
                    .with_label_values(&[stream, &t]);
            }
        }
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
