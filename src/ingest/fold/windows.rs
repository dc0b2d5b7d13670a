//! A stream's time buckets (`windows`) on the ingest thread: each folded batch also goes into
//! the bucket of each row's Kafka timestamp, aged to this service's clock, and the rows the
//! buckets refuse (older than `windows.keep`, too far ahead, or without a timestamp) are
//! counted and named, never folded into a wrong bucket.

use crate::metrics::Metrics;
use crate::state::streams::Windows;
use std::time::{Instant, SystemTime};

/// The timestamp of a pending row whose message had none (message format v0).
pub(crate) const NO_TIMESTAMP: i64 = i64::MIN;

/// Rows the time buckets refused in one batch: older than retention, too far ahead of this
/// service's clock, or of messages without a timestamp.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct WindowRefusals {
    pub too_old: usize,
    pub oldest: Option<i64>,
    pub ahead: usize,
    pub furthest: Option<i64>,
    pub no_timestamp: usize,
}

/// Folds a batch (already in the stream's statistics) into the time buckets by each row's
/// timestamp, aged to this service's clock. A refusal by the statistics is the same bug as in
/// the main fold (every row was validated): ingest stops.
pub(crate) fn fold_windows(
    w: &mut Windows,
    stamps: &[i64],
    x: &[f64],
    y: &[f64],
    name: &str,
) -> anyhow::Result<WindowRefusals> {
    let now = crate::unix_ms(SystemTime::now()) as i64;
    let p = w.p();
    let mut out = WindowRefusals::default();
    let (mut sx, mut sy, mut ss) = (Vec::new(), Vec::new(), Vec::new());
    let stamped = stamps.iter().all(|&t| t != NO_TIMESTAMP);
    let got = if stamped {
        w.fold(now, stamps, x, y)
    } else {
        for (i, &t) in stamps.iter().enumerate() {
            if t == NO_TIMESTAMP {
                out.no_timestamp += 1;
            } else {
                sx.extend_from_slice(&x[i * p..(i + 1) * p]);
                sy.push(y[i]);
                ss.push(t);
            }
        }
        w.fold(now, &ss, &sx, &sy)
    };
    let got = got.map_err(|e| {
        anyhow::anyhow!(
            "stream '{name}': a validated batch was refused by the time buckets ({e}); ingest stops so that no row is skipped"
        )
    })?;
    out.too_old = got.too_old;
    out.oldest = got.oldest;
    out.ahead = got.ahead;
    out.furthest = got.furthest;
    Ok(out)
}

/// Counts the rows the time buckets refused (`ravel_window_rows_refused_total` by reason) and
/// names them in the log, at most once a minute per stream.
pub(crate) fn window_refusals(
    metrics: &Metrics,
    name: &str,
    r: WindowRefusals,
    warned: &mut Option<Instant>,
) {
    for (reason, n) in [
        ("too_old", r.too_old),
        ("ahead", r.ahead),
        ("no_timestamp", r.no_timestamp),
    ] {
        if n > 0 {
            metrics
                .ingest
                .window_rows_refused
                .with_label_values(&[name, reason])
                .inc_by(n as u64);
        }
    }
    if r.too_old + r.ahead + r.no_timestamp == 0
        || warned.is_some_and(|t| t.elapsed() < std::time::Duration::from_secs(60))
    {
        return;
    }
    *warned = Some(Instant::now());
    tracing::warn!(
        stream = %name,
        too_old = r.too_old,
        oldest_ms = r.oldest,
        ahead = r.ahead,
        furthest_ms = r.furthest,
        no_timestamp = r.no_timestamp,
        "stream '{name}': rows left out of the time buckets (windows): {} older than windows.keep (oldest timestamp {:?} ms), \
         {} more than {} ahead of this service's clock (furthest {:?} ms), {} of messages without a timestamp; \
         they are in the stream's statistics, not in any window (ravel_window_rows_refused_total)",
        r.too_old,
        r.oldest,
        r.ahead,
        ravel_core::stats::windows::format_span(ravel_core::stats::windows::MAX_AHEAD_MS),
        r.furthest,
        r.no_timestamp,
    );
}
