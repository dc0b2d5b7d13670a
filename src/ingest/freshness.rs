//! Freshness: how long a message took from its Kafka timestamp to rows a model can use.
//! Observed once a batch's snapshot is published (`crate::ingest::fold`), into
//! `ravel_ingest_freshness_seconds`, with what clock skew does to an age (`age`).

use crate::metrics::Metrics;
use std::time::{SystemTime, UNIX_EPOCH};

/// Observes the age of every message of the batch just published, now that its rows are
/// visible.
pub(crate) fn observe_freshness(metrics: &Metrics, name: &str, stamps: &[i64]) {
    let visible = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs_f64() * 1000.0)
        .unwrap_or(0.0);
    let histogram = metrics.ingest.ingest_freshness.with_label_values(&[name]);
    let mut future = 0;
    for &ts in stamps {
        match age(visible, ts) {
            Some(seconds) => histogram.observe(seconds),
            None => future += 1,
        }
    }
    if future > 0 {
        metrics
            .ingest
            .ingest_future_timestamps
            .with_label_values(&[name])
            .inc_by(future);
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
