//! The model history of each observation stream (`GET /v1/streams/{name}/history`, the web
//! console's "change over time"): every `history.interval_ms`, a snapshot of the stream's
//! default model (lasso with `history.k` nonzeros) with alpha, the effective sample size and
//! the drift alarms and the live quality's window figures (`state::quality`), kept in a ring of
//! `history.length` points.
//!
//! Why a history in the service: the statistics are running averages, so the past models
//! cannot be recomputed from them; someone must keep them as they go. The ring is bounded
//! (`length` points of at most k coefficients each, counted in the memory estimate of
//! `limits.max_memory`) and lives in memory only: it is not in the checkpoint, so it starts
//! empty at every start. A tick whose statistics did not change since the last point (same n)
//! adds nothing. The extraction runs on the blocking pool under the same permits as the
//! API's, so the history never takes more than its share of the CPU.

pub use crate::config::history::HistorySpec;
use serde::Serialize;
use std::collections::VecDeque;
use std::sync::Mutex;
use utoipa::ToSchema;

/// One snapshot: the default model and the drift state at `time_ms`.
#[derive(Debug, Clone, PartialEq, Serialize, ToSchema)]
pub struct HistoryPoint {
    /// Unix time of the snapshot, in milliseconds.
    pub time_ms: u64,
    /// Rows in the statistics.
    pub n: u64,
    /// Kafka timestamp (Unix ms) of the newest message in the statistics.
    pub as_of: Option<u64>,
    /// The alpha the next row gets (003 eq. 6).
    pub alpha: f64,
    /// Effective sample size (Kish) of the rows' weights: n for plain averages.
    pub effective_sample_size: f64,
    /// Drift alarms so far (adaptive schedule; 0 otherwise) and the row of the last one.
    pub alarms: u64,
    pub last_alarm_row: Option<u64>,
    /// The default model's nonzero coefficients: columns (indices into the response's
    /// `features`), in the order of the model JSON, and their values in original units.
    pub support: Vec<u32>,
    pub coefficients: Vec<f64>,
    pub intercept: f64,
    /// R^2 of the default model on the statistics.
    pub r2: f64,
    /// The live quality's window figures at this point (`quality`; none when off).
    pub quality: Option<ravel_core::prequential::Figures>,
}

/// A stream's ring of points; written by its recorder, read by the API.
#[derive(Debug)]
pub struct History {
    pub spec: HistorySpec,
    points: Mutex<VecDeque<HistoryPoint>>,
}

impl History {
    pub fn new(spec: HistorySpec) -> Self {
        History {
            spec,
            points: Mutex::new(VecDeque::new()),
        }
    }
    /// Appends a point, dropping the oldest when the ring is full.
    pub fn push(&self, point: HistoryPoint) {
        let mut q = crate::lock(&self.points);
        while q.len() >= self.spec.length {
            q.pop_front();
        }
        q.push_back(point);
    }
    /// The points, oldest first.
    pub fn points(&self) -> Vec<HistoryPoint> {
        let q = crate::lock(&self.points);
        q.iter().cloned().collect()
    }
    pub(super) fn last_n(&self) -> Option<u64> {
        let q = crate::lock(&self.points);
        q.back().map(|p| p.n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::history::HistoryConfig;

    fn point(n: u64) -> HistoryPoint {
        HistoryPoint {
            time_ms: n,
            n,
            as_of: None,
            alpha: 1.0 / n as f64,
            effective_sample_size: n as f64,
            alarms: 0,
            last_alarm_row: None,
            support: vec![0],
            coefficients: vec![1.0],
            intercept: 0.0,
            r2: 0.5,
            quality: None,
        }
    }

    #[test]
    fn the_ring_keeps_the_newest_length_points() {
        let spec = HistoryConfig {
            length: 3,
            ..Default::default()
        }
        .resolve(None, 100)
        .unwrap();
        let h = History::new(spec);
        for n in 1..=5 {
            h.push(point(n));
        }
        let ns: Vec<u64> = h.points().iter().map(|p| p.n).collect();
        assert_eq!(ns, [3, 4, 5]);
        assert_eq!(h.last_n(), Some(5));
    }

    #[test]
    fn the_configured_point_size_is_the_points_own() {
        // `config::history::POINT_BYTES` counts a point in the memory estimate without
        // importing the state it configures; it must stay the size of the struct.
        assert_eq!(
            crate::config::history::POINT_BYTES,
            std::mem::size_of::<HistoryPoint>() as u64
        );
    }
}
