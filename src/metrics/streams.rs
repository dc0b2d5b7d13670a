//! Each observation stream's state: rows, alpha and effective sample size, drift alarms, the
//! snapshot's time, and the live prequential quality (`crate::state`, set at publication and
//! when `/metrics` is read).

use super::Registrar;
use prometheus::{GaugeVec, IntCounterVec, IntGaugeVec};

/// The state of each observation stream as published.
pub struct StreamMetrics {
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
}

impl StreamMetrics {
    pub(super) fn new(r: &Registrar) -> StreamMetrics {
        StreamMetrics {
                stream_alpha: r.gauge(
                    "ravel_stream_alpha",
                    "Weight the next row gets (003 eq. 6)",
                    &["stream"],
                ),
                stream_effective_sample_size: r.gauge(
                    "ravel_stream_effective_sample_size",
                    "Kish effective sample size of the rows' weights (n for plain averages, (2 - alpha)/alpha at a fixed alpha)",
                    &["stream"],
                ),
                stream_quality_window: r.gauge(
                    "ravel_stream_quality_window",
                    "Prequential quality of the last quality.window_rows rows, by figure (rmse, mae, r2; auc, brier, balanced_accuracy, weighted_loss)",
                    &["stream", "figure"],
                ),
                stream_quality_weighted: r.gauge(
                    "ravel_stream_quality_weighted",
                    "Prequential quality, exponentially weighted over quality.decay_rows rows, by figure",
                    &["stream", "figure"],
                ),
                stream_quality_total: r.gauge(
                    "ravel_stream_quality_total",
                    "Prequential quality of every row predicted since the service started, by figure",
                    &["stream", "figure"],
                ),
                stream_quality_floor: r.gauge(
                    "ravel_stream_quality_floor",
                    "Configured floor of a window figure (quality.floor; alert RavelQualityBelowFloor)",
                    &["stream", "figure"],
                ),
                stream_quality_rows: r.int_gauge(
                    "ravel_stream_quality_rows",
                    "Rows the quality figures observed since the service started (predicted before being folded, or before the first model)",
                    &["stream"],
                ),
                stream_quality_window_fill: r.gauge(
                    "ravel_stream_quality_window_fill",
                    "Rows in the quality window over quality.window_rows (per partition folded here): 1 when full",
                    &["stream"],
                ),
                stream_quality_model_rows: r.int_gauge(
                    "ravel_stream_quality_model_rows",
                    "Rows of the statistics the current quality model was extracted from",
                    &["stream"],
                ),
                drift_alarms: r.counter(
                    "ravel_stream_drift_alarms_total",
                    "Changes detected by the adaptive alpha schedule",
                    &["stream"],
                ),
                last_drift_alarm_row: r.int_gauge(
                    "ravel_stream_last_drift_alarm_row",
                    "Row count n at the last drift alarm (0: none yet)",
                    &["stream"],
                ),
                stream_observations: r.int_gauge(
                    "ravel_stream_observations",
                    "Rows in the statistics (n)",
                    &["stream"],
                ),
                stream_last_update: r.gauge(
                    "ravel_stream_last_update_timestamp_seconds",
                    "Unix time of the last folded batch",
                    &["stream"],
                ),
                stream_as_of: r.gauge(
                    "ravel_stream_as_of_timestamp_seconds",
                    "Kafka timestamp of the newest message in the statistics (the API's as_of)",
                    &["stream"],
                ),
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
            "r2_pooled",
            "auc",
            "accuracy",
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
}
