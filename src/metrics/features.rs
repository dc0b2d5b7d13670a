//! Feature streams' metrics: features applied and substituted, labels, loss, selection,
//! passes and Asy-OS staleness (`crate::ingest::features`).

use super::Registrar;
use prometheus::{GaugeVec, IntCounterVec, IntGaugeVec};

/// Feature streams: features applied to the selection, substitutions made, and the state after the
/// last batch (labels received, loss L(u), features selected, passes, Asy-OS staleness per
/// worker).
pub struct FeatureStreamMetrics {
    pub features_processed: IntCounterVec,
    pub feature_substitutions: IntCounterVec,
    pub feature_stream_labels: IntGaugeVec,
    pub feature_stream_loss: GaugeVec,
    pub feature_stream_selected: IntGaugeVec,
    pub feature_stream_passes: IntGaugeVec,
    pub feature_staleness_mean: GaugeVec,
    pub feature_staleness_max: IntGaugeVec,
}

impl FeatureStreamMetrics {
    pub(super) fn new(r: &Registrar) -> FeatureStreamMetrics {
        FeatureStreamMetrics {
            features_processed: r.counter(
                "ravel_feature_stream_features_processed_total",
                "Feature-stream features applied to the selection",
                &["stream"],
            ),
            feature_substitutions: r.counter(
                "ravel_feature_stream_substitutions_total",
                "Feature-stream entries that evicted a retained feature",
                &["stream"],
            ),
            feature_stream_labels: r.int_gauge(
                "ravel_feature_stream_labels",
                "1 once the feature stream has its labels",
                &["stream"],
            ),
            feature_stream_loss: r.gauge(
                "ravel_feature_stream_loss",
                "Current objective L(u) of the feature stream (000 eqs. 2-3)",
                &["stream"],
            ),
            feature_stream_selected: r.int_gauge(
                "ravel_feature_stream_selected",
                "Features currently selected (at most s)",
                &["stream"],
            ),
            feature_stream_passes: r.int_gauge(
                "ravel_feature_stream_passes",
                "Passes over the features seen (the open one included)",
                &["stream"],
            ),
            feature_staleness_mean: r.gauge(
                "ravel_feature_stream_staleness_mean",
                "Asy-OS: mean u_C updates between a worker's read and its push",
                &["stream", "worker"],
            ),
            feature_staleness_max: r.int_gauge(
                "ravel_feature_stream_staleness_max",
                "Asy-OS: largest u_C updates between a worker's read and its push (tau_max)",
                &["stream", "worker"],
            ),
        }
    }
}
