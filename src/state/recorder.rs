//! The history recorder: one task per stream that, every `history.interval_ms`, extracts the
//! stream's default model (lasso with `history.k` nonzeros) from its snapshot and pushes a
//! point to its ring (`state::history`). It runs on the blocking pool under the API's
//! extraction permits, so the history never takes more than its share of the CPU. Kept apart
//! from the ring because it reads the streams, which own the rings.

use crate::shutdown::Shutdown;
use crate::state::history::HistoryPoint;
use crate::state::streams::{StreamHandle, Streams};
use ravel_core::solve::{Checked, Request as ModelRequest, model_from_stats};
use std::sync::Arc;
use tokio::sync::Semaphore;

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
        quality: h.quality.as_ref().map(|q| q.summary().figures.window),
    });
}

/// Starts one recorder task per stream; each stops with `shutdown`.
pub fn spawn_recorders(streams: &Streams, permits: Arc<Semaphore>, shutdown: Shutdown) {
    for h in streams.iter() {
        spawn_recorder(h, permits.clone(), shutdown.clone());
    }
}

/// Starts the recorder task of one stream; it stops with `shutdown` or when the stream is
/// retired (`StreamHandle::retire`).
pub fn spawn_recorder(h: Arc<StreamHandle>, permits: Arc<Semaphore>, shutdown: Shutdown) {
    {
        let stop = shutdown;
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
                if h.is_retired() {
                    return;
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
