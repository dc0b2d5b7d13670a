//! The scorers' metrics (`crate::score`): messages scored and refused, failed deliveries, the
//! current model's rows and the input's lag.

use super::Registrar;
use prometheus::{IntCounterVec, IntGaugeVec};

/// Scorers (`[[scorers]]`): messages scored (a prediction written and acknowledged), messages
/// refused by reason, predictions whose delivery failed, the rows of the statistics the current
/// model came from, and the input lag.
pub struct ScorerMetrics {
    pub scorer_messages: IntCounterVec,
    pub scorer_rejected: IntCounterVec,
    pub scorer_delivery_failures: IntCounterVec,
    pub scorer_model_rows: IntGaugeVec,
    pub scorer_lag: IntGaugeVec,
    pub scorer_events_in_model: IntCounterVec,
}

impl ScorerMetrics {
    pub(super) fn new(r: &Registrar) -> ScorerMetrics {
        ScorerMetrics {
                scorer_messages: r.counter(
                    "ravel_scorer_messages_total",
                    "Messages scored: their prediction written to the output topic and acknowledged",
                    &["scorer"],
                ),
                scorer_rejected: r.counter(
                    "ravel_scorer_messages_rejected_total",
                    "Messages a scorer refused (dead-lettered, no prediction), by reason",
                    &["scorer", "reason"],
                ),
                scorer_delivery_failures: r.counter(
                    "ravel_scorer_delivery_failures_total",
                    "Predictions whose delivery failed (their messages are scored again)",
                    &["scorer"],
                ),
                scorer_model_rows: r.int_gauge(
                    "ravel_scorer_model_rows",
                    "Rows of the statistics the scorer's current model was extracted from",
                    &["scorer"],
                ),
                scorer_lag: r.int_gauge(
                    "ravel_scorer_lag_messages",
                    "Messages of the scorer's input not read yet (the partitions' ends as last fetched, less the scorer's positions), over its assigned partitions",
                    &["scorer"],
                ),
                scorer_events_in_model: r.counter(
                    "ravel_scorer_events_in_model_total",
                    "Events of a scorer of its stream's own topic scored with a model whose rows already held them (no model of the rows before them was held: the stream had folded them before the scorer read them)",
                    &["scorer"],
                ),
        }
    }
}
