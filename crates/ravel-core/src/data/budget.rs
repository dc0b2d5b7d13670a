//! The memory a file may take: what the caller builds from its rows (`Plan`, estimated from
//! p and n by `memory`), the limit (`Budget`), and the check of a file's dimensions against
//! them (`Dimensions`), which every format runs before it allocates anything that grows with
//! them.

use super::DataError;
use crate::memory::{ByteSize, Estimate, memory_estimate, selection_estimate};
use crate::task::Task;
use std::path::Path;

/// What the caller builds from the rows, so that `RowReader::open` can estimate the memory it
/// will take from the file's dimensions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Plan {
    /// Running statistics of this task, folded `batch_rows` rows at a time, and one extraction
    /// from them (`ravel fit`).
    Stats {
        /// Regression or classification.
        task: Task,
        /// Rows folded at a time.
        batch_rows: usize,
    },
    /// K-fold cross-validation (`ravel fit --select cv --folds K`): the statistics of each
    /// fold, their merge (the totals) and one training merge at a time: K + 2 copies.
    Folds {
        /// Regression or classification.
        task: Task,
        /// Rows folded at a time.
        batch_rows: usize,
        /// K, the number of folds.
        folds: usize,
    },
    /// The whole file in memory and a selection of `s` of its columns (`ravel select`; s = 0:
    /// the file only, `read_all`).
    Select {
        /// Columns selected.
        s: usize,
    },
    /// Batches of `batch_rows` rows, nothing kept (`ravel produce`).
    Rows {
        /// Rows per batch.
        batch_rows: usize,
    },
}

impl Plan {
    /// The estimate for a file of p features and (when known) n rows.
    pub fn estimate(&self, p: usize, n: Option<u64>) -> Estimate {
        match *self {
            Plan::Stats { task, batch_rows } => {
                memory_estimate(p, task).with_batch(batch_rows as u64, p)
            }
            Plan::Folds {
                task,
                batch_rows,
                folds,
            } => memory_estimate(p, task)
                .with_copies(folds as u64 + 2)
                .with_batch(batch_rows as u64, p),
            Plan::Select { s } => {
                let n = n.unwrap_or(0);
                selection_estimate(n, s).with_file(n, p)
            }
            Plan::Rows { batch_rows } => Estimate::default().with_batch(batch_rows as u64, p),
        }
    }

    fn describe(&self) -> String {
        match *self {
            Plan::Stats {
                task: Task::Regression,
                ..
            } => "the statistics (a p x p matrix of second moments) and an extraction from them"
                .into(),
            Plan::Stats {
                task: Task::Classification,
                ..
            } => "the classification statistics (two p x p matrices of second moments, one per \
                  class) and an extraction from them"
                .into(),
            Plan::Folds { folds, .. } => format!(
                "{folds}-fold cross-validation: the statistics of each fold, their totals and one \
                 training merge ({} copies of the p x p second moments) and an extraction",
                folds + 2
            ),
            Plan::Select { s: 0 } => "holding the file in memory (n x p)".into(),
            Plan::Select { s } => {
                format!("holding the file in memory (n x p) and a selection of s = {s}")
            }
            Plan::Rows { batch_rows } => format!("batches of {batch_rows} rows"),
        }
    }
}

/// The memory a caller may use for what it builds from a file: `RowReader::open` refuses a
/// file whose dimensions need more than `max_bytes`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Budget {
    /// What the caller builds from the rows.
    pub plan: Plan,
    /// The bytes it may take (`u64::MAX`: no limit).
    pub max_bytes: u64,
    /// Where the limit comes from and how to raise it, for the error message (e.g.
    /// "--max-memory (default: half of this machine's 15.5 GiB)").
    pub limit: String,
}

impl Budget {
    /// No limit (tests, tools that read known small files).
    pub fn unlimited(plan: Plan) -> Budget {
        Budget {
            plan,
            max_bytes: u64::MAX,
            limit: "no limit".into(),
        }
    }
}

/// The dimensions of a file as read before its rows, and the check of a budget against them.
pub(super) struct Dimensions<'a> {
    pub(super) path: &'a Path,
    pub(super) p: usize,
    /// Rows, when known before reading them (NPY header; LIBSVM first pass; CSV for select).
    pub(super) rows: Option<u64>,
    /// What sets p, in the file's words ("the largest feature index is 200000 (line 1)").
    pub(super) driver: String,
    /// Bytes the reader itself holds beyond a batch.
    pub(super) reader_bytes: u64,
    /// LIBSVM without compaction: the distinct indices used, when far fewer than p.
    pub(super) distinct: Option<usize>,
}

impl Dimensions<'_> {
    pub(super) fn check(&self, budget: &Budget) -> Result<(), DataError> {
        let mut est = budget.plan.estimate(self.p, self.rows);
        est.rows = est.rows.saturating_add(self.reader_bytes);
        if est.total() <= budget.max_bytes {
            return Ok(());
        }
        let rows = match (budget.plan, self.rows) {
            (Plan::Select { .. }, Some(n)) => format!(", and n = {n} rows"),
            _ => String::new(),
        };
        let mut hint = String::new();
        if let Some(d) = self.distinct {
            let compact = budget.plan.estimate(d, self.rows).total();
            hint = format!(
                " The file uses only {d} distinct feature indices: --compact-features renumbers \
                 them (p = {d}, an estimated {}).",
                ByteSize(compact)
            );
        }
        // The statistics hold p^2 numbers; the raw-data path holds the nonzeros only.
        let wide = match budget.plan {
            Plan::Stats {
                task: Task::Regression,
                ..
            } => {
                " Or fit the Lasso path on the raw sparse columns without the statistics \
                 (paper 004's Frank-Wolfe, memory in the nonzeros): ravel fit --wide."
            }
            _ => "",
        };
        Err(DataError::File {
            path: self.path.into(),
            msg: format!(
                "too large for the memory limit: {}{rows}; {} would need an estimated {est}, \
                 over the limit of {} ({}).{hint} Drop or hash features, learn them as a feature \
                 stream (ravel select, [[feature_streams]]), or raise the limit.{wide}",
                self.driver,
                budget.plan.describe(),
                ByteSize(budget.max_bytes),
                budget.limit,
            ),
        })
    }
}
