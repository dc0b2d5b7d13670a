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
        self.declare_read(stream, &Reason::ROWS);
        let (i, s) = (&self.ingest, &self.streams);
        create(
            stream,
            &[
                &i.observations_applied,
                &i.fields_ignored,
                &i.rows_skipped,
                &i.messages_before_start,
                &i.rows_without_target,
                &i.events_by_tree,
                &i.dead_letter_failures,
                &i.dead_letters_skipped,
                &i.blocked_partitions,
                &s.stream_observations,
                &s.drift_alarms,
                &s.last_drift_alarm_row,
                &i.ingest_freshness,
                &i.ingest_future_timestamps,
                &i.ingest_lost_messages,
            ],
        );
    }

    /// The series both kinds of stream count as they read: messages consumed, refused (by
    /// each of `reasons`) and dead-lettered.
    fn declare_read(&self, stream: &str, reasons: &[Reason]) {
        let i = &self.ingest;
        create(stream, &[&i.messages_consumed, &i.dead_letters]);
        for r in reasons {
            i.messages_rejected.with_label_values(&[stream, r.as_str()]);
        }
    }

    /// Creates a stream's checkpoint counters at zero (only when checkpoints are on, so that
    /// their absence says they are off), for the same reason as `declare_stream`.
    pub fn declare_checkpoints(&self, stream: &str) {
        create(
            stream,
            &[&self.ingest.checkpoints, &self.ingest.checkpoint_failures],
        );
    }

    /// Creates a feature stream's series at zero; staleness for each Asy-OS worker.
    pub fn declare_feature_stream(&self, stream: &str, workers: usize) {
        self.declare_read(stream, &Reason::FEATURES);
        let f = &self.features;
        create(
            stream,
            &[
                &f.features_processed,
                &f.feature_substitutions,
                &f.feature_stream_labels,
                &f.feature_stream_selected,
                &f.feature_stream_passes,
            ],
        );
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

/// A labelled metric whose series can be created at zero before anything counts in them.
trait Series {
    fn create(&self, labels: &[&str]);
}

impl<T: prometheus::core::MetricVecBuilder> Series for prometheus::core::MetricVec<T> {
    fn create(&self, labels: &[&str]) {
        self.with_label_values(labels);
    }
}

/// Creates the series of `stream` of each of `metrics` at zero.
fn create(stream: &str, metrics: &[&dyn Series]) {
    for m in metrics {
        m.create(&[stream]);
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}
