//! Prequential (test-then-train) evaluation of a weight schedule: `ravel fit --prequential N`.
//!
//! Rows are replayed through the same `RunningStats` the service keeps. Each row is first
//! predicted by the model as it stands before the row, then folded in; the squared errors are
//! summed per window of N rows. The model is the one `ravel fit` would print (the user's
//! `--method` and its parameters) extracted from the statistics, refitted every `refit` rows
//! (default: max(1, p/4) rows, so an O(p^3) extraction costs about as much as the O(p^2)-per-row
//! updates it spans) and once the statistics hold a row: row t is predicted by the model of the
//! statistics after row r(t) = the last refit point before t, with t - r(t) <= refit. Before
//! the first row there is no model and the prediction is 0. With `refit` = 1 every row is
//! predicted from all the rows before it, which `tests/drift.rs` checks against brute-force
//! weighted least squares.
//!
//! A window reports `{"rows", "rmse", "alpha", "alarms"}`: rows seen so far, the RMSE of the
//! window's predictions, the alpha the next row gets, and the drift alarms so far.

use crate::solve::{self, Checked, ParamError, Problem, Request};
use crate::stats::{RunningStats, StatsError};
use serde::{Deserialize, Serialize};

/// One window of the prequential trace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WindowRecord {
    /// Rows seen at the end of the window.
    pub rows: u64,
    /// Test-then-train RMSE of the window's rows.
    pub rmse: f64,
    /// Alpha the next row will get.
    pub alpha: f64,
    /// Drift alarms raised so far.
    pub alarms: u64,
}

/// The replay state: statistics, the current model, the running window.
pub struct Prequential {
    stats: RunningStats,
    params: Checked,
    window: u64,
    refit: u64,
    /// Dense coefficients and intercept of the current model, and n when it was fitted.
    model: Option<(Vec<f64>, f64)>,
    fitted_at: Option<u64>,
    window_sq: f64,
    window_rows: u64,
    total_sq: f64,
    total_rows: u64,
}

impl Prequential {
    /// Default refit interval for p features.
    pub fn default_refit(p: usize) -> u64 {
        (p as u64 / 4).max(1)
    }

    /// `stats` is usually empty (a replay from the start); `params` must describe one model
    /// (not a path).
    pub fn new(
        stats: RunningStats,
        params: Request,
        window: u64,
        refit: u64,
    ) -> Result<Prequential, ParamError> {
        if window == 0 || refit == 0 {
            return Err(ParamError::Invalid(
                "the prequential window and the refit interval must be at least 1 row".into(),
            ));
        }
        let params = params.check(stats.p())?;
        Ok(Prequential {
            stats,
            params,
            window,
            refit,
            model: None,
            fitted_at: None,
            window_sq: 0.0,
            window_rows: 0,
            total_sq: 0.0,
            total_rows: 0,
        })
    }

    /// The statistics folded so far.
    pub fn stats(&self) -> &RunningStats {
        &self.stats
    }

    /// RMSE over every row predicted so far.
    pub fn overall_rmse(&self) -> f64 {
        if self.total_rows == 0 {
            f64::NAN
        } else {
            (self.total_sq / self.total_rows as f64).sqrt()
        }
    }

    /// Predicts then folds in a batch (row-major x); appends a record for every window that
    /// closes. A batch with a bad row (dimensions, NaN or infinity) changes nothing.
    pub fn push(
        &mut self,
        x: &[f64],
        y: &[f64],
        out: &mut Vec<WindowRecord>,
    ) -> Result<(), StatsError> {
        let p = self.stats.p();
        if x.len() != y.len() * p {
            // Let the statistics word the error.
            return self.stats.update_batch(x, y);
        }
        // Checked up front: the batch is folded in pieces, and a piece's error would both come
        // too late and number the row within the piece.
        let bad =
            |i: usize| !y[i].is_finite() || x[i * p..(i + 1) * p].iter().any(|v| !v.is_finite());
        if let Some(row) = (0..y.len()).find(|&i| bad(i)) {
            return Err(StatsError::NonFinite { row });
        }
        let mut at = 0;
        while at < y.len() {
            let n = self.stats.n();
            if n > 0 && self.fitted_at.is_none_or(|f| n - f >= self.refit) {
                self.refit_model();
            }
            // A piece shares one model and one window.
            let mut len = (y.len() - at) as u64;
            len = len.min(self.window - self.window_rows);
            len = len.min(match self.fitted_at {
                Some(f) => self.refit - (n - f),
                None => 1,
            });
            let end = at + len as usize;
            let mut sq = 0.0;
            for i in at..end {
                let pred = match &self.model {
                    Some((b, b0)) => {
                        b0 + x[i * p..(i + 1) * p]
                            .iter()
                            .zip(b)
                            .map(|(a, c)| a * c)
                            .sum::<f64>()
                    }
                    None => 0.0,
                };
                sq += (y[i] - pred) * (y[i] - pred);
            }
            self.stats.update_batch(&x[at * p..end * p], &y[at..end])?;
            self.window_sq += sq;
            self.window_rows += len;
            self.total_sq += sq;
            self.total_rows += len;
            if self.window_rows == self.window {
                out.push(self.close_window());
            }
            at = end;
        }
        Ok(())
    }

    /// The record of the last, partial window, if it holds rows.
    pub fn finish(&mut self) -> Option<WindowRecord> {
        (self.window_rows > 0).then(|| self.close_window())
    }

    fn close_window(&mut self) -> WindowRecord {
        let rec = WindowRecord {
            rows: self.stats.n(),
            rmse: (self.window_sq / self.window_rows as f64).sqrt(),
            alpha: self.stats.current_alpha(),
            alarms: self.stats.drift_alarms(),
        };
        self.window_sq = 0.0;
        self.window_rows = 0;
        rec
    }

    /// A failed extraction keeps the previous model until the next refit point.
    fn refit_model(&mut self) {
        self.fitted_at = Some(self.stats.n());
        let problem = Problem::regression(&self.stats, self.params.request().standardize);
        if let Ok(m) = problem
            .map_err(ParamError::from)
            .and_then(|pr| solve::extract(&pr, &self.params, None))
        {
            self.model = Some((m.dense(self.stats.p()), m.intercept));
        }
    }
}
