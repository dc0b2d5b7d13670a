//! Prequential (test-then-train) evaluation: each row is first predicted, then folded in.
//! One definition for `ravel fit --prequential N` (a file, `Prequential`) and the service's
//! live quality of a stream (`TestThenTrain` beside the stream's statistics, `Quality` for the
//! figures), so that both give the same numbers on the same rows in the same order.
//!
//! The model is the request's (`--method` and its parameters; the service's `quality.model`)
//! extracted from the statistics at the refit points: first a warm-up at p + 1, 2 (p + 1),
//! 4 (p + 1), ... rows while those are below R, then every whole multiple of R rows (`refit`,
//! the service's `quality.every_rows`), so that a stream shorter than R is predicted from its
//! first hundreds of rows while the extractions still cost O(log R) + n / R. Row t (1-based)
//! is predicted by the model of the statistics after the last refit point before it, so the
//! schedule does not depend on how rows are batched. A row before the first model has no
//! prediction (`quality::UNSCORED`): the figures count it apart instead of scoring a
//! constant; a failed extraction (too few rows, one class only) keeps the previous model until
//! the next refit point. Statistics that start with rows (a service restarted from a
//! checkpoint) get their first model at once. With R = 1 every row is predicted from all the
//! rows before it, which `tests/drift.rs` checks against brute-force weighted least squares.
//! The default R for a file is max(1, p/4) rows, so an O(p^3) extraction costs about as much
//! as the O(p^2)-per-row updates it spans.
//!
//! `ravel fit --prequential N` reports a line per N rows: `{"rows", "rmse", "alpha",
//! "alarms", "quality"}`: rows seen so far, the RMSE of those N rows' predictions, the alpha
//! the next row gets, the drift alarms so far, and the quality figures (quality.rs) at the
//! end of the window.

pub mod quality;

pub use quality::{Combiner, Figures, Quality, QualitySpec, Report, UNSCORED};

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
    /// p + 1: the first warm-up point.
    warmup: u64,
    model: Option<Scorer>,
    fitted_at: Option<u64>,
    /// Rows the statistics held at the first `push` (None before it): statistics that start
    /// with rows get their first model at once, those that start empty only at R.
    started_at: Option<u64>,
    /// Extractions tried and failed.
    extractions: u64,
    failures: u64,
    /// Why the last extraction failed, if it did (cleared by the next good one).
    last_failure: Option<String>,
    /// Rows of the statistics at the end of the last push.
    rows: u64,
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
            warmup: p as u64 + 1,
            model: None,
            fitted_at: None,
            started_at: None,
            extractions: 0,
            failures: 0,
            last_failure: None,
            rows: 0,
        })
    }

    /// Whether the model is extracted when the statistics hold n rows: a warm-up point
    /// (p + 1) 2^j below R, or a multiple of R.
    pub fn is_refit_point(&self, n: u64) -> bool {
        n > 0
            && (n.is_multiple_of(self.refit)
                || (n < self.refit
                    && n.is_multiple_of(self.warmup)
                    && (n / self.warmup).is_power_of_two()))
    }

    /// The first refit point after n rows.
    pub fn next_refit_point(&self, n: u64) -> u64 {
        let multiple = (n / self.refit + 1).saturating_mul(self.refit);
        let mut warm = self.warmup;
        while warm <= n && warm < self.refit {
            warm = warm.saturating_mul(2);
        }
        if warm > n && warm < self.refit {
            warm.min(multiple)
        } else {
            multiple
        }
    }

    /// When the next model comes: the rows the statistics will hold at the next extraction
    /// (the statistics' rows now when one is due before the next row).
    pub fn next_extraction(&self) -> u64 {
        let n = self.rows;
        let due = self.fitted_at != Some(n)
            && n > 0
            && (self.is_refit_point(n) || (self.fitted_at.is_none() && self.started_at == Some(n)));
        if due { n } else { self.next_refit_point(n) }
    }

    /// Rows the statistics held at the last extraction tried (None before the first).
    pub fn fitted_at(&self) -> Option<u64> {
        self.fitted_at
    }

    /// Why the last extraction failed, when it did (the model predicting is an older one, or
    /// none).
    pub fn last_failure(&self) -> Option<&str> {
        self.last_failure.as_deref()
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
    /// the refit points; the model is re-extracted at each. A row before the first model gets
    /// `UNSCORED`. On an error of `fold` the rows before the failed piece stay folded and
    /// `scores` holds the predictions up to the failed piece's end: callers check the rows
    /// first (the service validates every message; `Prequential` checks the batch).
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
            if n > 0 && self.fitted_at != Some(n) && (restored || self.is_refit_point(n)) {
                self.refit_model(stats);
            }
            let next = self.next_refit_point(n);
            let end = at + ((rows - at) as u64).min(next - n) as usize;
            for i in at..end {
                scores.push(match &self.model {
                    Some(m) => m.score(&x[i * p..(i + 1) * p]),
                    None => UNSCORED,
                });
            }
            let folded = fold(stats, at..end);
            self.rows = stats.n();
            folded?;
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
                });
                self.last_failure = None;
            }
            Err(e) => {
                self.failures += 1;
                self.last_failure = Some(e.to_string());
            }
        }
    }
}

/// One window of the prequential trace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WindowRecord {
    /// Rows seen at the end of the window.
    pub rows: u64,
    /// Test-then-train RMSE of the window's rows that had a model (for classification: of
    /// the scores against the +1 / -1 labels); null (NaN) when none had.
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
    /// Rows of the window that had a prediction (the RMSE's).
    window_scored: u64,
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
            window_scored: 0,
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
            for (y, s) in ys.iter().zip(&self.scores) {
                if !s.is_nan() {
                    self.window_sq += (y - s) * (y - s);
                    self.window_scored += 1;
                }
            }
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
            rmse: (self.window_sq / self.window_scored as f64).sqrt(),
            alpha: self.stats.current_alpha(),
            alarms: drift.alarms,
            quality: self.quality.report(),
        };
        self.window_sq = 0.0;
        self.window_rows = 0;
        self.window_scored = 0;
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
            // Unscored in both (before the first model), within 1e-12 elsewhere.
            assert_eq!(x.is_nan(), y.is_nan(), "{what}: row {i}: {x} vs {y}");
            if x.is_nan() {
                continue;
            }
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
        // The warm-up at p + 1 = 4 and 8 rows (16 is past R = 10), then 10, 20, ..., 50:
        // rows 1-4 have no model and no prediction.
        assert_eq!(ext, 7);
        assert!(one[..4].iter().all(|s| s.is_nan()), "{one:?}");
        assert!(one[4..].iter().all(|s| s.is_finite()), "{one:?}");
        // Rows 5-8 are predicted by OLS on rows 1-4, row 9 by OLS on rows 1-8.
        let ols = |rows: usize, t: usize| {
            let mut st = Stats::new(Task::Regression, p, AlphaSchedule::Plain);
            st.update_batch(&x[..rows * p], &y[..rows]).unwrap();
            let m = solve::model_from_stats(&st, &Request::ols().check(p).unwrap(), None).unwrap();
            m.intercept
                + m.coefficients
                    .iter()
                    .map(|c| c.value * x[t * p + c.index])
                    .sum::<f64>()
        };
        for (t, rows) in [(4, 4), (7, 4), (8, 8), (9, 8), (10, 10), (20, 20)] {
            let want = ols(rows, t);
            assert!(
                (one[t] - want).abs() <= 1e-9 * want.abs().max(1.0),
                "row {}: {} vs OLS of {rows} rows {want}",
                t + 1,
                one[t]
            );
        }
        // Its figures: the four rows counted apart, in no figure.
        let mut q = Quality::new(QualitySpec {
            task: Task::Regression,
            window: 10,
            decay_rows: 10.0,
            w_pos: 1.0,
            w_neg: 1.0,
        });
        q.observe(&one[..10], &y[..10]);
        let r = q.report();
        assert_eq!((r.unscored, r.total.rows), (4, 6.0));
        for batch in [3, 7, 10, 13, 57] {
            // A first batch that ends between refit points extracts no model there.
            let batched = replay(&x, &y, p, 0, batch);
            assert_same(&batched, &(one.clone(), 7), &format!("batch {batch}"));
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
        // Restored at 6: a model at once, then the warm-up's 8, then 10, ...
        assert_eq!(replay(&x, &y, p, 6, 5).1, 7);
        // From row 21 on the predictions are those of a replay from the start.
        let (all, _) = replay(&x, &y, p, 0, 1);
        assert_same(
            &(scores[20 - 14..].to_vec(), 0),
            &(all[20..].to_vec(), 0),
            "after the first refit point",
        );
        assert!(scores[..20 - 14].iter().all(|&s| s.is_finite()));
    }

    #[test]
    fn the_refit_points_are_the_warm_up_then_every_multiple() {
        let t = TestThenTrain::new(&Request::ols(), 6, 5000).unwrap();
        let points: Vec<u64> = std::iter::successors(Some(0), |&n| Some(t.next_refit_point(n)))
            .skip(1)
            .take(13)
            .collect();
        assert_eq!(
            points,
            [
                7, 14, 28, 56, 112, 224, 448, 896, 1792, 3584, 5000, 10000, 15000
            ]
        );
        assert!(points.iter().all(|&n| t.is_refit_point(n)));
        assert!(!t.is_refit_point(21) && !t.is_refit_point(7168) && !t.is_refit_point(0));
        // R at or below p + 1: no warm-up.
        let t = TestThenTrain::new(&Request::ols(), 6, 7).unwrap();
        assert_eq!((t.next_refit_point(0), t.next_refit_point(7)), (7, 14));
        assert!(!t.is_refit_point(8));
    }
}
