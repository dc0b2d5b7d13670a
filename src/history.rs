//! The model history of each observation stream (`GET /v1/streams/{name}/history`, the web
//! console's "change over time"): every `history.interval_ms`, a snapshot of the stream's
//! default model (lasso with `history.k` nonzeros) with alpha, the effective sample size and
//! the drift alarms, kept in a ring of `history.length` points.
//!
//! Why a history in the service: the statistics are running averages, so the past models
//! cannot be recomputed from them; someone must keep them as they go. The ring is bounded
//! (`length` points of at most k coefficients each, counted in the memory estimate of
//! `limits.max_memory`) and lives in memory only: it is not in the checkpoint, so it starts
//! empty at every start. A tick whose statistics did not change since the last point (same n)
//! adds nothing. The extraction runs on the blocking pool under the same permits as the
//! API's, so the history never takes more than its share of the CPU.

use crate::shutdown::Shutdown;
use crate::streams::{StreamHandle, Streams};
use ravel_core::solve::{Checked, Request as ModelRequest, model_from_stats};
use serde::{Deserialize, Serialize};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Semaphore;
use utoipa::ToSchema;

/// `[history]`: what the service keeps of each stream's default model over time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HistoryConfig {
    /// Time between two snapshots, in milliseconds.
    pub interval_ms: u64,
    /// Snapshots kept per stream (the oldest is dropped first).
    pub length: usize,
    /// Nonzeros of the default model (lasso), capped at the stream's p.
    pub k: usize,
}

impl Default for HistoryConfig {
    fn default() -> Self {
        HistoryConfig {
            interval_ms: 10_000,
            length: 360,
            k: 10,
        }
    }
}

/// A stream's own `history = { ... }`: any field given replaces `[history]`'s.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HistoryOverride {
    pub interval_ms: Option<u64>,
    pub length: Option<usize>,
    pub k: Option<usize>,
}

/// Bounds of the history's settings.
pub const INTERVAL_MS: std::ops::RangeInclusive<u64> = 100..=86_400_000;
pub const LENGTH: std::ops::RangeInclusive<usize> = 1..=100_000;
pub const K: std::ops::RangeInclusive<usize> = 1..=1_000;

/// One stream's resolved history settings.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HistorySpec {
    pub interval: Duration,
    pub length: usize,
    pub k: usize,
}

impl HistoryConfig {
    /// `[history]` with a stream's override, checked; k is capped at the stream's p.
    pub fn resolve(&self, o: Option<&HistoryOverride>, p: usize) -> Result<HistorySpec, String> {
        let o = o.cloned().unwrap_or_default();
        let interval_ms = o.interval_ms.unwrap_or(self.interval_ms);
        let length = o.length.unwrap_or(self.length);
        let k = o.k.unwrap_or(self.k);
        if !INTERVAL_MS.contains(&interval_ms) {
            return Err(format!(
                "interval_ms must lie in {}..={} (0.1 s to a day), got {interval_ms}",
                INTERVAL_MS.start(),
                INTERVAL_MS.end()
            ));
        }
        if !LENGTH.contains(&length) {
            return Err(format!(
                "length must lie in {}..={}, got {length}",
                LENGTH.start(),
                LENGTH.end()
            ));
        }
        if !K.contains(&k) {
            return Err(format!(
                "k must lie in {}..={}, got {k}",
                K.start(),
                K.end()
            ));
        }
        Ok(HistorySpec {
            interval: Duration::from_millis(interval_ms),
            length,
            k: k.min(p.max(1)),
        })
    }
}

/// Bytes of one point besides its coefficients (the struct and its two vectors' headers).
const POINT_BYTES: u64 = std::mem::size_of::<HistoryPoint>() as u64;

impl HistorySpec {
    /// The most the ring can hold: `length` points of k coefficients (index and value).
    pub fn memory_bytes(&self) -> u64 {
        let per_point = POINT_BYTES + self.k as u64 * (4 + 8);
        (self.length as u64).saturating_mul(per_point)
    }
}

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
    /// Rows the averages effectively span.
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
        let mut q = self.points.lock().unwrap_or_else(|e| e.into_inner());
        while q.len() >= self.spec.length {
            q.pop_front();
        }
        q.push_back(point);
    }
    /// The points, oldest first.
    pub fn points(&self) -> Vec<HistoryPoint> {
        let q = self.points.lock().unwrap_or_else(|e| e.into_inner());
        q.iter().cloned().collect()
    }
    fn last_n(&self) -> Option<u64> {
        let q = self.points.lock().unwrap_or_else(|e| e.into_inner());
        q.back().map(|p| p.n)
    }
}

/// The default model's request: lasso with k nonzeros.
fn default_request(k: usize, p: usize) -> Checked {
    let req: ModelRequest = serde_json::from_value(serde_json::json!({"method": "lasso", "k": k}))
        .expect("a lasso request parses");
    req.check(p).expect("k lies in 1..=p")
}

/// Takes one point of stream `h` unless its statistics are empty or unchanged since the last.
fn record(h: &StreamHandle, req: &Checked) {
    let snap = h.snapshot();
    let n = snap.stats.n();
    if n == 0 || h.history.last_n() == Some(n) {
        return;
    }
    let drift = snap.stats.drift_status();
    let model = match model_from_stats(&snap.stats, req, h.names()) {
        Ok(m) => m,
        Err(e) => {
            tracing::debug!(stream = %h.name(), error = %e, "history: no default model");
            return;
        }
    };
    let time_ms = crate::now_ms();
    h.history.push(HistoryPoint {
        time_ms,
        n,
        as_of: snap.as_of_ms,
        alpha: drift.alpha,
        effective_sample_size: drift.effective_sample_size,
        alarms: drift.alarms,
        last_alarm_row: drift.last_alarm_row,
        support: model.coefficients.iter().map(|c| c.index as u32).collect(),
        coefficients: model.coefficients.iter().map(|c| c.value).collect(),
        intercept: model.intercept,
        r2: model.diagnostics.r2,
    });
}

/// Starts one recorder task per stream; each stops with `shutdown`.
pub fn spawn_recorders(streams: &Streams, permits: Arc<Semaphore>, shutdown: Shutdown) {
    for h in streams.iter() {
        let (h, permits, stop) = (h.clone(), permits.clone(), shutdown.clone());
        tokio::spawn(async move {
            let req = Arc::new(default_request(h.history.spec.k, h.p()));
            let mut tick = tokio::time::interval(h.history.spec.interval);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
            let stopped = stop.clone().wait();
            tokio::pin!(stopped);
            loop {
                tokio::select! {
                    _ = &mut stopped => return,
                    _ = tick.tick() => {}
                }
                let permit = tokio::select! {
                    _ = &mut stopped => return,
                    p = permits.clone().acquire_owned() => match p {
                        Ok(p) => p,
                        Err(_) => return,
                    },
                };
                let (h, req) = (h.clone(), req.clone());
                let _ = tokio::task::spawn_blocking(move || {
                    let _permit = permit;
                    record(&h, &req);
                })
                .await;
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn overrides_replace_fields_and_bounds_are_checked() {
        let c = HistoryConfig::default();
        let o = HistoryOverride {
            length: Some(7),
            k: Some(50),
            ..Default::default()
        };
        let s = c.resolve(Some(&o), 20).unwrap();
        assert_eq!((s.length, s.k), (7, 20), "k is capped at p");
        assert_eq!(s.interval, Duration::from_millis(c.interval_ms));
        let bad = |o: HistoryOverride| c.resolve(Some(&o), 20).unwrap_err();
        assert!(
            bad(HistoryOverride {
                interval_ms: Some(10),
                ..Default::default()
            })
            .contains("interval_ms")
        );
        assert!(
            bad(HistoryOverride {
                length: Some(0),
                ..Default::default()
            })
            .contains("length")
        );
        assert!(
            bad(HistoryOverride {
                k: Some(5000),
                ..Default::default()
            })
            .contains("k must")
        );
        // The bound on memory: length points of k coefficients.
        let big = c
            .resolve(
                Some(&HistoryOverride {
                    length: Some(100_000),
                    k: Some(1000),
                    ..Default::default()
                }),
                5000,
            )
            .unwrap();
        assert_eq!(big.memory_bytes(), 100_000 * (POINT_BYTES + 12_000));
    }
}
