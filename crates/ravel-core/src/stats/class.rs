//! `ClassStats`, classification statistics: one `RunningStats` per class (+1 / -1), so that
//! each class can be weighted at extraction (003 section 3.6).

use super::error::check_batch;
use super::{AlphaSchedule, Observations, RunningStats, StatsError};
use serde::{Deserialize, Serialize};

/// Class-conditional running averages for +1/-1 labels (003 section 3.6): positives and
/// negatives are averaged separately so that each class can be weighted at extraction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClassStats {
    /// The positive class's statistics.
    pub pos: RunningStats,
    /// The negative class's.
    pub neg: RunningStats,
}

impl ClassStats {
    /// Empty statistics of p features, each class under `schedule`.
    pub fn new(p: usize, schedule: AlphaSchedule) -> Self {
        ClassStats {
            pos: RunningStats::new(p, schedule.clone()),
            neg: RunningStats::new(p, schedule),
        }
    }
    /// Number of features p.
    pub fn p(&self) -> usize {
        self.pos.p()
    }
    /// Rows of both classes.
    pub fn n(&self) -> u64 {
        self.pos.n() + self.neg.n()
    }

    /// Fold rows in, as `RunningStats::update` takes them (a row, or a batch as arrays);
    /// labels as `update_batch` takes them.
    pub fn update<X: Observations<Y>, Y>(&mut self, x: X, y: Y) -> Result<(), StatsError> {
        x.with_rows(self.p(), y, |x, y| self.update_batch(x, y))
    }

    /// Split the batch by label (+1 positive; -1 or 0 negative) and fold each part into its
    /// class. Nothing changes if any row is invalid.
    pub fn update_batch(&mut self, x: &[f64], y: &[f64]) -> Result<(), StatsError> {
        let p = self.p();
        check_batch(p, x, y, true)?;
        let (mut xp, mut yp, mut xn, mut yn) = (vec![], vec![], vec![], vec![]);
        for (i, (row, &label)) in x.chunks_exact(p).zip(y).enumerate() {
            if label == 1.0 {
                xp.extend_from_slice(row);
                yp.push(1.0);
            } else if label == -1.0 || label == 0.0 {
                xn.extend_from_slice(row);
                yn.push(-1.0);
            } else {
                return Err(StatsError::Label {
                    row: i,
                    value: label,
                });
            }
        }
        self.pos.update_batch(&xp, &yp)?;
        self.neg.update_batch(&xn, &yn)?;
        Ok(())
    }

    /// Merges class by class (`RunningStats::merge`).
    pub fn merge(&mut self, other: &ClassStats) -> Result<(), StatsError> {
        self.pos.merge(&other.pos)?;
        self.neg.merge(&other.neg)
    }
}
