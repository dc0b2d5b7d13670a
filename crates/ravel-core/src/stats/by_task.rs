//! `Stats`, the one owning type of a stream's or a file's statistics whichever its task
//! (regression: `RunningStats`; classification: `ClassStats`), which the CLI, the service, its
//! checkpoints and the solvers share.

use super::StridedRows;
use super::{AlphaSchedule, ClassStats, DriftStatus, Observations, RunningStats, StatsError};
use crate::gram::{Problem, ProblemError};
use crate::task::Task;
use serde::{Deserialize, Serialize};

/// The statistics of a stream or a file, whichever its task: the one owning type the CLI,
/// the service, its checkpoints and the solvers share.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "task", rename_all = "lowercase")]
// One value per stream, held behind an Arc by readers: the size difference (two
// RunningStats headers, their arrays are on the heap) costs nothing worth a Box.
#[allow(clippy::large_enum_variant)]
pub enum Stats {
    /// A regression stream.
    Regression(RunningStats),
    /// A classification stream.
    Classification(ClassStats),
}

impl From<RunningStats> for Stats {
    fn from(s: RunningStats) -> Self {
        Stats::Regression(s)
    }
}

impl From<ClassStats> for Stats {
    fn from(s: ClassStats) -> Self {
        Stats::Classification(s)
    }
}

impl Stats {
    /// Empty statistics for `task`.
    pub fn new(task: Task, p: usize, schedule: AlphaSchedule) -> Self {
        match task {
            Task::Regression => Stats::Regression(RunningStats::new(p, schedule)),
            Task::Classification => Stats::Classification(ClassStats::new(p, schedule)),
        }
    }
    /// The task.
    pub fn task(&self) -> Task {
        match self {
            Stats::Regression(_) => Task::Regression,
            Stats::Classification(_) => Task::Classification,
        }
    }
    /// Number of features p.
    pub fn p(&self) -> usize {
        match self {
            Stats::Regression(s) => s.p(),
            Stats::Classification(s) => s.p(),
        }
    }
    /// Rows folded in.
    pub fn n(&self) -> u64 {
        match self {
            Stats::Regression(s) => s.n(),
            Stats::Classification(s) => s.n(),
        }
    }
    /// The weight schedule.
    pub fn schedule(&self) -> &AlphaSchedule {
        match self {
            Stats::Regression(s) => s.schedule(),
            Stats::Classification(s) => s.pos.schedule(),
        }
    }
    /// The alpha the next row gets (for classification, the larger of the two classes').
    pub fn current_alpha(&self) -> f64 {
        match self {
            Stats::Regression(s) => s.current_alpha(),
            Stats::Classification(s) => s.pos.current_alpha().max(s.neg.current_alpha()),
        }
    }
    /// Alpha, effective sample size and drift alarms (classification: the negatives', with
    /// both classes' alarms, and the sum of the classes' effective sample sizes, n for plain
    /// averages).
    pub fn drift_status(&self) -> DriftStatus {
        match self {
            Stats::Regression(s) => s.drift_status(),
            Stats::Classification(s) => {
                let mut d = s.neg.drift_status();
                d.alpha = self.current_alpha();
                d.alarms += s.pos.drift_alarms();
                d.effective_sample_size += s.pos.effective_sample_size();
                d
            }
        }
    }
    /// Whether every moment is finite (`RunningStats::is_finite`).
    pub fn is_finite(&self) -> bool {
        match self {
            Stats::Regression(s) => s.is_finite(),
            Stats::Classification(s) => s.pos.is_finite() && s.neg.is_finite(),
        }
    }
    /// Folds a batch of rows (row-major x, one y or label per row); nothing changes on error.
    pub fn update_batch(&mut self, x: &[f64], y: &[f64]) -> Result<(), StatsError> {
        match self {
            Stats::Regression(s) => s.update_batch(x, y),
            Stats::Classification(s) => s.update_batch(x, y),
        }
    }
    /// `update_batch` for rows the caller checked value by value with `within_limit`
    /// (`RunningStats::update_batch_validated`: not scanned again; classification splits the
    /// rows by label and checks them as `update_batch`).
    pub fn update_batch_validated(&mut self, x: &[f64], y: &[f64]) -> Result<(), StatsError> {
        match self {
            Stats::Regression(s) => s.update_batch_validated(x, y),
            Stats::Classification(s) => s.update_batch(x, y),
        }
    }
    /// Folds rows wherever they lie (`RunningStats::update_strided`); classification splits
    /// a row-major copy by label.
    pub fn update_strided(&mut self, rows: StridedRows) -> Result<(), StatsError> {
        match self {
            Stats::Regression(s) => s.update_strided(rows),
            Stats::Classification(s) => {
                let p = s.p();
                rows.checked(p)?;
                let (x, y) = rows.row_major(p);
                s.update_batch(&x, &y)
            }
        }
    }
    /// Fold rows in, as `RunningStats::update` takes them (a row, or a batch as arrays).
    pub fn update<X: Observations<Y>, Y>(&mut self, x: X, y: Y) -> Result<(), StatsError> {
        x.with_rows(self.p(), y, |x, y| self.update_batch(x, y))
    }
    /// `RunningStats::validate` for each part.
    pub fn validate(&self) -> Result<(), String> {
        match self {
            Stats::Regression(s) => s.validate(),
            Stats::Classification(s) => {
                s.pos.validate().map_err(|e| format!("positives: {e}"))?;
                s.neg.validate().map_err(|e| format!("negatives: {e}"))
            }
        }
    }
    /// Exact merge of another shard of the same stream (same task and p).
    pub fn merge(&mut self, other: &Stats) -> Result<(), StatsError> {
        match (self, other) {
            (Stats::Regression(a), Stats::Regression(b)) => a.merge(b),
            (Stats::Classification(a), Stats::Classification(b)) => a.merge(b),
            (a, b) => Err(StatsError::TaskMismatch {
                ours: a.task(),
                theirs: b.task(),
            }),
        }
    }
    /// The Gram problem of these statistics: standardized or not, with an intercept or through
    /// the origin (`Problem::through_origin`); classification weighs the positives by `w_pos`
    /// and the negatives by `w_neg` (003 eqs. 4-5).
    pub fn problem(
        &self,
        standardize: bool,
        intercept: bool,
        w_pos: f64,
        w_neg: f64,
    ) -> Result<Problem, ProblemError> {
        match (self, intercept) {
            (Stats::Regression(s), true) => Problem::regression(s, standardize),
            (Stats::Regression(s), false) => Problem::through_origin(s, standardize),
            (Stats::Classification(s), true) => {
                Problem::classification(&s.pos, &s.neg, w_pos, w_neg, standardize)
            }
            (Stats::Classification(s), false) => {
                Problem::classification_through_origin(&s.pos, &s.neg, w_pos, w_neg, standardize)
            }
        }
    }
}
