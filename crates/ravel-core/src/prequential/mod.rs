//! Prequential (test-then-train) evaluation: each row is first predicted, then folded in.
//! One definition for `ravel fit --prequential N` (a file, `Prequential`) and the service's
//! live quality of a stream (`TestThenTrain` beside the stream's statistics, `Quality` for the
//! figures), so that both give the same numbers on the same rows in the same order.
//!
//! The model is the request's (`--method` and its parameters; the service's `quality.model`)
//! extracted from the statistics at every whole multiple of R rows (`refit`, the service's
//! `quality.every_rows`): row t (1-based) is predicted by the model of the statistics after
//! the first floor((t - 1) / R) R rows, so the schedule does not depend on how rows are
//! batched. Before the first model the prediction is the null model's: the running mean of
//! the targets pushed before the row (0 for the first), the baseline the figures' R^2 compares
//! with (`quality`), so R^2 is 0 until the first model instead of below it; a failed
//! extraction (too few rows, one class only) keeps the previous model until the next refit
//! point. Statistics that start with rows (a service restarted from a checkpoint at n not a
//! multiple of R) get their first model at once. With R = 1 every row is predicted from all
//! the rows before it, which `tests/drift.rs` checks against brute-force weighted least
//! squares. The default R for a file is max(1, p/4) rows, so an O(p^3) extraction costs about
//! as much as the O(p^2)-per-row updates it spans.
//!
//! `ravel fit --prequential N` reports a line per N rows: `{"rows", "rmse", "alpha",
//! "alarms", "quality"}`: rows seen so far, the RMSE of those N rows' predictions, the alpha
//! the next row gets, the drift alarms so far, and the quality figures (quality.rs) at the
//! end of the window.

pub mod quality;

pub use quality::{Combiner, Figures, Quality, QualitySpec, Report};

use crate::solve::{self, Checked, ParamError, Request};
use crate::stats::{RunningStats, Stats, StatsError};
use crate::task::Task;
use serde::{Deserialize, Serialize};
use std::ops::Range;

/// The model a row is predicted with: its nonzero coefficients and intercept, and the rows
/// the statistics held when it was extracted.
#[derive(Debug, Clone, PartialEq)]
pub struct Scorer {
    /// Columns of the nonzero coefficients.
    pub support: Vec<usize>,
    /// Their values, in the data's units.
    pub values: Vec<f64>,
    /// The intercept b0.
    pub intercept: f64,
    /// Rows in the statistics it was extracted from.
    pub n: u64,
}

impl Scorer {
    /// b0 + x^T b for one row of p features: O(nonzeros).
    pub fn score(&self, row: &[f64]) -> f64 {
        self.intercept
            + self
                .support
                .iter()
                .zip(&self.values)
                .map(|(&j, &v)| v * row[j])
                .sum::<f64>()
    }
}

/// The test-then-train schedule beside a stream's statistics: which model predicts each row,
/// and when it is extracted. The statistics stay the caller's; `push` folds them through the
/// caller's closure, split at the refit points.
#[derive(Debug, Clone)]
pub struct TestThenTrain {
    params: Checked,
    refit: u64,
    model: Option<Scorer>,
    fitted_at: Option<u64>,
    /// Rows the statistics held at the first `push` (None before it): statistics that start
    /// with rows get their first model at once, those that start empty only at R.
    started_at: Option<u64>,
    /// Extractions tried and failed.
    extractions: u64,
    failures: u64,
    /// The targets pushed so far and their running mean: the null model's prediction.
    targets: u64,
    mean_y: f64,
}

impl TestThenTrain {
    /// `params` must describe one model of p features (not a path, not cross-validation,
    /// which needs folds); `refit` >= 1.
    pub fn new(params: &Request, p: usize, refit: u64) -> Result<TestThenTrain, ParamError> {
        if refit == 0 {
            return Err(ParamError::Invalid(
                "the refit interval must be at least 1 row".into(),
            ));
        }
        if params.select.is_some_and(|c| c.is_cv()) {
            return Err(ParamError::Invalid(
                "select = cv / cv_1se needs the stream's folds; a prequential model takes \
                 aic, bic or ebic, or a fixed k or lambda"
                    .into(),
            ));
        }
        Ok(TestThenTrain {
            params: params.check(p)?,
            refit,
            model: None,
            fitted_at: None,
            started_at: None,
            extractions: 0,
            failures: 0,
            targets: 0,
            mean_y: 0.0,
        })
    }

    /// The model rows are predicted with now.
    pub fn model(&self) -> Option<&Scorer> {
        self.model.as_ref()
    }

    /// The request.
    pub fn request(&self) -> &Request {
        self.params.request()
    }

    /// R.
    pub fn refit_every(&self) -> u64 {
        self.refit
    }

    /// Extractions tried, and those that failed.
    pub fn extractions(&self) -> (u64, u64) {
        (self.extractions, self.failures)
    }

    /// Predicts each row of a batch (row-major x, p per row; `y` its targets) into `scores`
    /// (appended), then folds it into `stats` with `fold(stats, rows)`, in pieces that end at
    /// the refit points; the model is re-extracted at each. Before the first model a row is
    /// predicted by the running mean of the targets before it (the null model). On an error of `fold` the rows before the
    /// failed piece stay folded and `scores` holds the predictions up to the failed piece's
    /// end: callers check the rows first (the service validates every message; `Prequential`
    /// checks the batch).
    pub fn push<E>(
        &mut self,
        stats: &mut Stats,
        x: &[f64],
        y: &[f64],
        scores: &mut Vec<f64>,
        mut fold: impl FnMut(&mut Stats, Range<usize>) -> Result<(), E>,
    ) -> Result<(), E> {
        let p = stats.p();
        let rows = y.len();
        let started_at = *self.started_at.get_or_insert(stats.n());
        let mut at = 0;
        while at < rows {
            let n = stats.n();
            // At a refit point; or, once, at the rows the statistics started with (a
            // restored checkpoint), never at the end of a batch that happens to be the first
            // (the schedule must not depend on how the rows are batched).
            let restored = self.fitted_at.is_none() && n == started_at;
            if n > 0 && self.fitted_at != Some(n) && (restored || n.is_multiple_of(self.refit)) {
                self.refit_model(stats);
            }
            let next = (n / self.refit + 1) * self.refit;
            let end = at + ((rows - at) as u64).min(next - n) as usize;
            for (i, &target) in y.iter().enumerate().take(end).skip(at) {
                scores.push(match &self.model {
                    Some(m) => m.score(&x[i * p..(i + 1) * p]),
                    None => self.mean_y,
                });
                // As `Quality::observe` updates its baseline, so that the null model's
                // prediction is that baseline to the bit.
                self.targets += 1;
                self.mean_y += (target - self.mean_y) / self.targets as f64;
            }
            fold(stats, at..end)?;
            at = end;
        }
        Ok(())
    }

    fn refit_model(&mut self, stats: &Stats) {
        self.fitted_at = Some(stats.n());
        self.extractions += 1;
        match solve::model_from_stats(stats, &self.params, None) {
            Ok(m) => {
                self.model = Some(Scorer {
                    support: m.coefficients.iter().map(|c| c.index).collect(),
                    values: m.coefficients.iter().map(|c| c.value).collect(),
                    intercept: m.intercept,
                    n: stats.n(),
                })
            }
            Err(_) => self.failures += 1,
        }
    }
}

/// One window of the prequential trace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WindowRecord {
    /// Rows seen at the end of the window.
    pub rows: u64,
    /// Test-then-train RMSE of the window's rows (for classification: of the scores against
    /// the +1 / -1 labels).
    pub rmse: f64,
    /// Alpha the next row will get.
    pub alpha: f64,
    /// Drift alarms raised so far.
    pub alarms: u64,
    /// The quality figures after the window's last row.
    pub quality: Report,
}

/// A file's replay: statistics, the schedule, the figures, the running window.
pub struct Prequential {
    stats: Stats,
    ttt: TestThenTrain,
    quality: Quality,
    window: u64,
    window_sq: f64,
    window_rows: u64,
    scores: Vec<f64>,
}

impl Prequential {
    /// Default refit interval for p features.
    pub fn default_refit(p: usize) -> u64 {
        (p as u64 / 4).max(1)
    }

    /// A regression replay: `stats` is usually empty (a replay from the start); `params`
    /// must describe one model (not a path). The quality window is the trace's (`window`
    /// rows) and the weighted figures decay over as many.
    pub fn new(
        stats: RunningStats,
        params: Request,
        window: u64,
        refit: u64,
    ) -> Result<Prequential, ParamError> {
        Prequential::with_stats(Stats::Regression(stats), params, window, refit, None)
    }

    /// A replay of either task; `quality` sets the figures' window and decay (default: the
    /// trace's window for both).
    pub fn with_stats(
        stats: Stats,
        params: Request,
        window: u64,
        refit: u64,
        quality: Option<QualitySpec>,
    ) -> Result<Prequential, ParamError> {
        if window == 0 || refit == 0 {
            return Err(ParamError::Invalid(
                "the prequential window and the refit interval must be at least 1 row".into(),
            ));
        }
        let ttt = TestThenTrain::new(&params, stats.p(), refit)?;
        let spec = quality.unwrap_or(QualitySpec {
            task: stats.task(),
            window: window.min(usize::MAX as u64) as usize,
            decay_rows: window as f64,
            w_pos: params.w_pos.unwrap_or(1.0),
            w_neg: params.w_neg.unwrap_or(1.0),
        });
        Ok(Prequential {
            stats,
            ttt,
            quality: Quality::new(spec),
            window,
            window_sq: 0.0,
            window_rows: 0,
            scores: Vec::new(),
        })
    }

    /// The statistics folded so far.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// The figures so far.
    pub fn quality(&self) -> &Quality {
        &self.quality
    }

    /// RMSE over every row predicted so far.
    pub fn overall_rmse(&self) -> f64 {
        let t = self.quality.report().total;
        match self.stats.task() {
            Task::Regression => t.rmse.unwrap_or(f64::NAN),
            // The figures of a classification replay do not include the RMSE.
            Task::Classification => f64::NAN,
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
            // A piece ends at the window's end, so a record sees the statistics after it.
            let len = ((y.len() - at) as u64).min(self.window - self.window_rows) as usize;
            let end = at + len;
            let (xs, ys) = (&x[at * p..end * p], &y[at..end]);
            self.scores.clear();
            self.ttt
                .push(&mut self.stats, xs, ys, &mut self.scores, |s, r| {
                    s.update_batch(&xs[r.start * p..r.end * p], &ys[r])
                })?;
            self.window_sq += ys
                .iter()
                .zip(&self.scores)
                .map(|(y, s)| (y - s) * (y - s))
                .sum::<f64>();
            self.window_rows += len as u64;
            self.quality.observe(&self.scores, ys);
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
        let drift = self.stats.drift_status();
        let rec = WindowRecord {
            rows: self.stats.n(),
            rmse: (self.window_sq / self.window_rows as f64).sqrt(),
            alpha: self.stats.current_alpha(),
            alarms: drift.alarms,
            quality: self.quality.report(),
        };
        self.window_sq = 0.0;
        self.window_rows = 0;
        rec
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::AlphaSchedule;

    /// Rows of a small regression, row-major.
    fn rows(n: usize, p: usize) -> (Vec<f64>, Vec<f64>) {
        let (mut x, mut y) = (Vec::new(), Vec::new());
        for i in 0..n {
            let row: Vec<f64> = (0..p)
                .map(|j| (((i * 7 + j * 13) % 17) as f64 - 8.0) / 3.0)
                .collect();
            y.push(1.5 * row[0] - 0.5 * row[p - 1] + ((i % 5) as f64 - 2.0) / 10.0);
            x.extend(row);
        }
        (x, y)
    }

    /// Predictions and extractions of the rows pushed in batches of `batch` rows into
    /// statistics that already hold `start` of them.
    fn replay(x: &[f64], y: &[f64], p: usize, start: usize, batch: usize) -> (Vec<f64>, u64) {
        let mut stats = Stats::new(Task::Regression, p, AlphaSchedule::Plain);
        stats.update_batch(&x[..start * p], &y[..start]).unwrap();
        let mut ttt = TestThenTrain::new(&Request::ols(), p, 10).unwrap();
        let mut scores = Vec::new();
        let mut at = start;
        while at < y.len() {
            let end = (at + batch).min(y.len());
            let (bx, by) = (&x[at * p..end * p], &y[at..end]);
            ttt.push(&mut stats, bx, by, &mut scores, |s, r| {
                s.update_batch(&bx[r.start * p..r.end * p], &by[r])
            })
            .unwrap();
            at = end;
        }
        (scores, ttt.extractions().0)
    }

    /// The same predictions to rounding (a batch is folded in another order of sums), and
    /// the same extractions.
    fn assert_same(a: &(Vec<f64>, u64), b: &(Vec<f64>, u64), what: &str) {
        assert_eq!(a.1, b.1, "{what}: extractions");
        assert_eq!(a.0.len(), b.0.len(), "{what}");
        for (i, (x, y)) in a.0.iter().zip(&b.0).enumerate() {
            // Exactly 0 where both predict 0 (the null model's first row), within 1e-12
            // elsewhere.
            assert_eq!(*x == 0.0, *y == 0.0, "{what}: row {i}: {x} vs {y}");
            assert!(
                (x - y).abs() <= 1e-12 * x.abs().max(1.0),
                "{what}: row {i}: {x} vs {y}"
            );
        }
    }

    #[test]
    fn the_schedule_does_not_depend_on_how_rows_are_batched() {
        let (p, n) = (3, 57);
        let (x, y) = rows(n, p);
        let (one, ext) = replay(&x, &y, p, 0, 1);
        // Models at 10, 20, ..., 50 rows; rows 1-10 are predicted by the null model: the mean
        // of the targets before each (0 for the first), exactly as the figures' baseline.
        assert_eq!(ext, 5);
        let mut mean = 0.0;
        for (i, &s) in one[..10].iter().enumerate() {
            assert_eq!(s, mean, "row {}", i + 1);
            mean += (y[i] - mean) / (i + 1) as f64;
        }
        let plain: f64 = y[..9].iter().sum::<f64>() / 9.0;
        assert!(
            (one[9] - plain).abs() <= 1e-12 * plain.abs(),
            "{} vs {plain}",
            one[9]
        );
        assert!(one[10..].iter().all(|&s| s != 0.0));
        // Its figures: R^2 exactly 0 over those rows (the baseline predicts the same).
        let mut q = Quality::new(QualitySpec {
            task: Task::Regression,
            window: 10,
            decay_rows: 10.0,
            w_pos: 1.0,
            w_neg: 1.0,
        });
        q.observe(&one[..10], &y[..10]);
        assert_eq!(q.report().total.r2, Some(0.0));
        for batch in [3, 7, 10, 13, 57] {
            // A first batch that ends between refit points extracts no model there.
            let batched = replay(&x, &y, p, 0, batch);
            assert_same(&batched, &(one.clone(), 5), &format!("batch {batch}"));
        }
    }

    #[test]
    fn statistics_that_start_with_rows_get_a_model_at_once() {
        let (p, n) = (3, 57);
        let (x, y) = rows(n, p);
        // Restored at 14 rows: a model of those 14 predicts rows 15-20, then 20, ..., 50.
        let (scores, ext) = replay(&x, &y, p, 14, 4);
        assert_eq!(ext, 5);
        assert_same(&replay(&x, &y, p, 14, 1), &(scores.clone(), 5), "restored");
        // From row 21 on the predictions are those of a replay from the start.
        let (all, _) = replay(&x, &y, p, 0, 1);
        assert_same(
            &(scores[20 - 14..].to_vec(), 0),
            &(all[20..].to_vec(), 0),
            "after the first refit point",
        );
        assert!(scores[..20 - 14].iter().all(|&s| s != 0.0));
    }
}
