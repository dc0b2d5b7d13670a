//! Fold statistics: K running averages beside a stream's totals, one per cross-validation
//! fold, so that the exact K-fold CV curve of any path is computed from moments alone
//! (issue 17 item 2, `solve::select::cross_validate_folds`). Which fold a row goes to is the
//! caller's business (the service hashes its Kafka coordinates); this module keeps the folds
//! weighted exactly as the stream weighs its rows.
//!
//! Representation. Fold j is a `RunningStats` of its own rows, normalized (its own weighted
//! means, weight 1, the plain schedule as a placeholder: its weights come from the stream),
//! around the stream's shift, plus its share m_j of the stream's normalized weight (the shares
//! sum to 1 once a row is seen). With the stream's update state <- d * state + sum_i omega_i
//! row_i (`stats::Chunk`), fold j becomes
//!
//!   m_j' = d m_j + sum_{i in j} omega_i,
//!   fold_j' = (d m_j / m_j') fold_j + sum_{i in j} (omega_i / m_j') row_i,
//!
//! and the merge of all folds weighted by their shares (`RunningStats::merge_weighted`) is
//! the stream's totals, under plain, fixed, floored and adaptive alpha alike (for the
//! adaptive schedule the chunks are where it refreshes, exactly as the totals were folded).
//!
//! Cost and precision. The decay of a fold that gets no row in a chunk is one multiplication
//! of its share: O(K) per chunk, never O(K p^2). A fold that gets rows is written whole anyway
//! by its rank-B_j update, and its decay d m_j / m_j' rides in the same pass of the kernel
//! (stats/syrk.rs takes a decay), so the folds cost the batch's own O(B p^2) plus O(K p^2) only
//! for folds that received rows. Unlike unnormalized sums with a shared scale factor, this
//! needs no renormalization: every stored moment is a weighted mean of the data's own size
//! (no overflow near `MAX_ABS_VALUE`, no scale that underflows under a fixed alpha), and the
//! only running products are the K shares, which are renormalized to sum 1 after every chunk
//! (O(K)) so that their rounding does not accumulate. A fold unvisited for so long that its
//! share underflows to 0 has been forgotten entirely, which is what the stream says too.

use super::{AlphaSchedule, Chunk, RunningStats, Stats, StatsError, check_batch};
use crate::task::Task;
use serde::{Deserialize, Serialize};

/// The folds of one `RunningStats` (a regression stream, or one class).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Folds {
    /// Fold j's rows as their own normalized averages, around the stream's shift.
    folds: Vec<RunningStats>,
    /// Fold j's share of the stream's normalized weight.
    shares: Vec<f64>,
}

impl Folds {
    /// K empty folds over p features.
    pub fn new(p: usize, k: usize) -> Folds {
        Folds {
            folds: (0..k)
                .map(|_| RunningStats::new(p, AlphaSchedule::Plain))
                .collect(),
            shares: vec![0.0; k],
        }
    }
    /// The number of folds.
    pub fn k(&self) -> usize {
        self.folds.len()
    }
    /// Each fold's rows as their own normalized averages.
    pub fn folds(&self) -> &[RunningStats] {
        &self.folds
    }
    /// Each fold's share of the stream's normalized weight (they sum to 1 once rows came).
    pub fn shares(&self) -> &[f64] {
        &self.shares
    }
    /// Rows in all folds.
    pub fn n(&self) -> u64 {
        self.folds.iter().map(RunningStats::n).sum()
    }

    /// Folds one chunk the stream folded: rows `x` (row-major) and `y`, row i into fold
    /// `ids[i]`, weighted as `chunk` says (module header).
    fn absorb(&mut self, x: &[f64], y: &[f64], ids: &[u8], chunk: &Chunk<'_>) {
        let k = self.k();
        let Some(p) = self.folds.first().map(RunningStats::p) else {
            return;
        };
        let d = chunk.decay;
        let mut rows = vec![0usize; k];
        let mut added = vec![0.0; k];
        for (&f, &w) in ids.iter().zip(chunk.omega) {
            rows[f as usize] += 1;
            added[f as usize] += w;
        }
        let (mut xs, mut ys, mut om) = (Vec::new(), Vec::new(), Vec::new());
        for j in 0..k {
            let old = self.shares[j] * d;
            if rows[j] == 0 {
                self.shares[j] = old;
                continue;
            }
            let new = old + added[j];
            xs.clear();
            ys.clear();
            om.clear();
            for (i, &f) in ids.iter().enumerate() {
                if f as usize == j {
                    xs.extend_from_slice(&x[i * p..(i + 1) * p]);
                    ys.push(y[i]);
                    om.push(if new > 0.0 { chunk.omega[i] / new } else { 0.0 });
                }
            }
            let fold = &mut self.folds[j];
            let (sx, sy) = chunk.shift;
            if fold.n == 0 {
                fold.shift_x.copy_from_slice(sx);
                fold.shift_y = sy;
            } else if fold.shift_x != sx || fold.shift_y != sy {
                fold.recentre(sx, sy);
            }
            let decay = if new > 0.0 { old / new } else { 0.0 };
            // The rows passed the stream's own checks (its fold refuses non-finite rows and
            // calls back only for chunks it folded).
            fold.apply(&xs, &ys, decay, &om, true);
            fold.n += rows[j] as u64;
            fold.weight = 1.0;
            fold.sum_sq_shares = (decay * decay * fold.sum_sq_shares
                + om.iter().map(|w| w * w).sum::<f64>())
            .min(1.0);
            self.shares[j] = new;
        }
        let sum: f64 = self.shares.iter().sum();
        if sum > 0.0 {
            self.shares.iter_mut().for_each(|s| *s /= sum);
        }
    }

    /// Folds a batch into `stats` and into these folds (row i into fold `ids[i]`).
    fn update(
        &mut self,
        stats: &mut RunningStats,
        x: &[f64],
        y: &[f64],
        ids: &[u8],
    ) -> Result<(), StatsError> {
        let p = stats.p();
        stats.update_batch_with(x, y, |chunk| {
            let (from, rows) = (chunk.first_row, chunk.omega.len());
            self.absorb(
                &x[from * p..(from + rows) * p],
                &y[from..from + rows],
                &ids[from..from + rows],
                &chunk,
            );
        })
    }

    /// Merges the folds of another shard of the stream whose totals weigh `theirs` against
    /// `ours` in the merge of the totals (their rows, as `RunningStats::merge`).
    fn merge(&mut self, other: &Folds, ours: f64, theirs: f64) -> Result<(), StatsError> {
        let t = ours + theirs;
        if other.n() == 0 || t <= 0.0 {
            return Ok(());
        }
        let (a, b) = (ours / t, theirs / t);
        for j in 0..self.k() {
            let (sa, sb) = (a * self.shares[j], b * other.shares[j]);
            self.folds[j].merge_weighted(&other.folds[j], sa, sb)?;
            self.shares[j] = sa + sb;
        }
        Ok(())
    }

    /// The merge of all folds weighted by their shares: the stream's totals (to rounding).
    pub fn merged(&self) -> RunningStats {
        let p = self.folds.first().map_or(0, RunningStats::p);
        let mut total = RunningStats::new(p, AlphaSchedule::Plain);
        let mut acc = 0.0;
        for (f, &s) in self.folds.iter().zip(&self.shares) {
            // Same p by construction.
            let _ = total.merge_weighted(f, acc, s);
            acc += s;
        }
        total
    }

    fn validate(&self, p: usize) -> Result<(), String> {
        if self.shares.len() != self.folds.len() {
            return Err(format!(
                "{} shares for {} folds",
                self.shares.len(),
                self.folds.len()
            ));
        }
        for (j, (f, &s)) in self.folds.iter().zip(&self.shares).enumerate() {
            if f.p() != p {
                return Err(format!("fold {j} has p = {}, the stream {p}", f.p()));
            }
            f.validate().map_err(|e| format!("fold {j}: {e}"))?;
            if !(0.0..=1.0 + 1e-9).contains(&s) {
                return Err(format!("fold {j}'s share {s} is not in [0, 1]"));
            }
        }
        Ok(())
    }
}

/// The fold statistics of a stream, whichever its task: K folds of the totals (regression),
/// or of each class (classification, each class weighted by its own schedule as the totals
/// are).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "task", rename_all = "lowercase")]
pub enum FoldSet {
    /// The folds of a regression stream's statistics.
    Regression(Folds),
    /// The folds of each class of a classification stream.
    Classification {
        /// Class +1.
        pos: Folds,
        /// Class -1.
        neg: Folds,
    },
}

impl FoldSet {
    /// K empty folds for a stream of `task` over p features.
    pub fn new(task: Task, p: usize, k: usize) -> FoldSet {
        match task {
            Task::Regression => FoldSet::Regression(Folds::new(p, k)),
            Task::Classification => FoldSet::Classification {
                pos: Folds::new(p, k),
                neg: Folds::new(p, k),
            },
        }
    }
    /// The task these folds serve.
    pub fn task(&self) -> Task {
        match self {
            FoldSet::Regression(_) => Task::Regression,
            FoldSet::Classification { .. } => Task::Classification,
        }
    }
    /// The number of folds.
    pub fn k(&self) -> usize {
        match self {
            FoldSet::Regression(f) => f.k(),
            FoldSet::Classification { pos, .. } => pos.k(),
        }
    }
    /// Rows in all folds.
    pub fn n(&self) -> u64 {
        self.sizes().iter().sum()
    }
    /// Rows of each fold.
    pub fn sizes(&self) -> Vec<u64> {
        match self {
            FoldSet::Regression(f) => f.folds.iter().map(RunningStats::n).collect(),
            FoldSet::Classification { pos, neg } => (0..pos.k())
                .map(|j| pos.folds[j].n() + neg.folds[j].n())
                .collect(),
        }
    }
    /// Each fold's share of the stream's weight: one share (regression), or two, the
    /// positives' and the negatives' (classification).
    pub fn shares(&self) -> Vec<Vec<f64>> {
        match self {
            FoldSet::Regression(f) => f.shares.iter().map(|&s| vec![s]).collect(),
            FoldSet::Classification { pos, neg } => (0..pos.k())
                .map(|j| vec![pos.shares[j], neg.shares[j]])
                .collect(),
        }
    }
    /// Each fold's statistics.
    pub fn stats(&self) -> Vec<Stats> {
        match self {
            FoldSet::Regression(f) => f.folds.iter().cloned().map(Stats::Regression).collect(),
            FoldSet::Classification { pos, neg } => (0..pos.k())
                .map(|j| {
                    Stats::Classification(super::ClassStats {
                        pos: pos.folds[j].clone(),
                        neg: neg.folds[j].clone(),
                    })
                })
                .collect(),
        }
    }
    /// The merge of all folds by their shares: the stream's totals (to rounding) when the
    /// folds have seen all its rows.
    pub fn merged(&self) -> Stats {
        match self {
            FoldSet::Regression(f) => Stats::Regression(f.merged()),
            FoldSet::Classification { pos, neg } => Stats::Classification(super::ClassStats {
                pos: pos.merged(),
                neg: neg.merged(),
            }),
        }
    }

    /// Folds a batch into `stats` and into the folds, row i into fold `ids[i]` (< K); nothing
    /// changes when the batch is refused.
    pub fn update(
        &mut self,
        stats: &mut Stats,
        x: &[f64],
        y: &[f64],
        ids: &[u8],
    ) -> Result<(), StatsError> {
        if ids.len() != y.len() {
            return Err(StatsError::Length {
                rows: ids.len(),
                ys: y.len(),
            });
        }
        let k = self.k();
        if let Some(i) = ids.iter().position(|&f| f as usize >= k) {
            return Err(StatsError::Label {
                row: i,
                value: ids[i] as f64,
            });
        }
        match (self, stats) {
            (FoldSet::Regression(f), Stats::Regression(s)) => f.update(s, x, y, ids),
            (FoldSet::Classification { pos, neg }, Stats::Classification(c)) => {
                // As `ClassStats::update_batch`: split by label, then fold each class.
                let p = c.p();
                check_batch(p, x, y, true)?;
                let (mut xp, mut yp, mut ip) = (vec![], vec![], vec![]);
                let (mut xn, mut yn, mut in_) = (vec![], vec![], vec![]);
                for (i, (row, &label)) in x.chunks_exact(p).zip(y).enumerate() {
                    if label == 1.0 {
                        xp.extend_from_slice(row);
                        yp.push(1.0);
                        ip.push(ids[i]);
                    } else if label == -1.0 || label == 0.0 {
                        xn.extend_from_slice(row);
                        yn.push(-1.0);
                        in_.push(ids[i]);
                    } else {
                        return Err(StatsError::Label {
                            row: i,
                            value: label,
                        });
                    }
                }
                pos.update(&mut c.pos, &xp, &yp, &ip)?;
                neg.update(&mut c.neg, &xn, &yn, &in_)
            }
            (f, s) => Err(StatsError::TaskMismatch {
                ours: f.task(),
                theirs: s.task(),
            }),
        }
    }

    /// Merges the folds of another shard of the same stream (`theirs` its totals, `ours` the
    /// totals of this one before they merge theirs), weighted as the totals merge.
    pub fn merge(&mut self, ours: &Stats, other: &FoldSet, theirs: &Stats) -> Result<(), String> {
        if other.k() != self.k() {
            return Err(format!(
                "cannot merge {} folds into {}",
                other.k(),
                self.k()
            ));
        }
        let e = |e: StatsError| e.to_string();
        match (self, other, ours, theirs) {
            (
                FoldSet::Regression(a),
                FoldSet::Regression(b),
                Stats::Regression(s),
                Stats::Regression(t),
            ) => a.merge(b, s.n() as f64, t.n() as f64).map_err(e),
            (
                FoldSet::Classification { pos, neg },
                FoldSet::Classification { pos: op, neg: on },
                Stats::Classification(s),
                Stats::Classification(t),
            ) => {
                pos.merge(op, s.pos.n() as f64, t.pos.n() as f64)
                    .map_err(e)?;
                neg.merge(on, s.neg.n() as f64, t.neg.n() as f64).map_err(e)
            }
            _ => Err("cannot merge folds of another task".into()),
        }
    }

    /// Checks folds that came from outside (a checkpoint, a state record) against the stream.
    pub fn validate(&self, task: Task, p: usize) -> Result<(), String> {
        if self.task() != task {
            return Err(format!("folds of a {} stream", self.task()));
        }
        match self {
            FoldSet::Regression(f) => f.validate(p),
            FoldSet::Classification { pos, neg } => {
                if pos.k() != neg.k() {
                    return Err("the classes have different numbers of folds".into());
                }
                pos.validate(p).map_err(|e| format!("positives: {e}"))?;
                neg.validate(p).map_err(|e| format!("negatives: {e}"))
            }
        }
    }

    /// Whether every fold's moments are finite.
    pub fn is_finite(&self) -> bool {
        let all = |f: &Folds| f.folds.iter().all(RunningStats::is_finite);
        match self {
            FoldSet::Regression(f) => all(f),
            FoldSet::Classification { pos, neg } => all(pos) && all(neg),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gram::Moments;
    use crate::stats::AdaptiveConfig;

    fn rows(p: usize, n: usize, seed: u64, labels: bool) -> (Vec<f64>, Vec<f64>) {
        let mut next = crate::stats::uniform(seed);
        let mut x: Vec<f64> = (0..p * n).map(|_| next() + 3.0).collect();
        // A drift halfway, so the adaptive schedule alarms and cuts chunks.
        for v in &mut x[p * n / 2..] {
            *v *= 3.0;
        }
        let y = (0..n)
            .map(|i| {
                // The model changes at the drift too.
                let sign = if i < n / 2 { 1.0 } else { -4.0 };
                let v = sign * (x[i * p] - 2.0 * x[i * p + 1]) + 0.1 * next();
                if labels {
                    if v > -3.0 { 1.0 } else { -1.0 }
                } else {
                    v
                }
            })
            .collect();
        (x, y)
    }

    /// Worst relative difference of two statistics' centred moments and means.
    fn diff(a: &RunningStats, b: &RunningStats) -> f64 {
        let p = a.p();
        let scale = |u: f64, v: f64| (u - v).abs() / u.abs().max(v.abs()).max(1e-300);
        let mut worst = scale(a.var_y(), b.var_y()).max(scale(a.mean_y(), b.mean_y()));
        let (ma, mb) = (a.mean_x(), b.mean_x());
        for i in 0..p {
            worst = worst
                .max(scale(ma[i], mb[i]))
                .max(scale(a.cov_xy(i), b.cov_xy(i)));
            for j in 0..=i {
                worst = worst.max(scale(a.cov_at(i, j), b.cov_at(i, j)));
            }
        }
        worst
    }

    /// Issue 17 item 2: every fold decays with the stream's own weights, so the merge of all
    /// folds by their shares is the stream's totals, under every schedule, for batches of any
    /// size, and for a merge of two shards (scale-out) as well.
    #[test]
    fn merging_all_folds_gives_the_totals_under_every_schedule() {
        let adaptive = AdaptiveConfig {
            false_alarm_rate: 1e-3,
            ..AdaptiveConfig::default()
        };
        let schedules = [
            AlphaSchedule::Plain,
            AlphaSchedule::Fixed { alpha: 0.01 },
            AlphaSchedule::Floor { alpha_min: 0.003 },
            AlphaSchedule::Adaptive(super::super::adaptive::Adaptive::new(adaptive)),
        ];
        let (p, n, k) = (6, 3000, 5);
        for schedule in &schedules {
            for task in [Task::Regression, Task::Classification] {
                let (x, y) = rows(p, n, 11, task == Task::Classification);
                let ids: Vec<u8> = (0..n)
                    .map(|i| (crate::solve::select::splitmix64(i as u64) % k as u64) as u8)
                    .collect();
                let mut stats = Stats::new(task, p, schedule.clone());
                let mut folds = FoldSet::new(task, p, k);
                let mut at = 0;
                for (b, size) in [1usize, 2, 37, 500, 1, 999, 1460].into_iter().enumerate() {
                    let end = (at + size).min(n);
                    folds
                        .update(&mut stats, &x[at * p..end * p], &y[at..end], &ids[at..end])
                        .unwrap_or_else(|e| panic!("batch {b}: {e}"));
                    at = end;
                }
                assert_eq!(at, n);
                assert_eq!(folds.n(), stats.n());
                let merged = folds.merged();
                let pairs: Vec<(&RunningStats, &RunningStats)> = match (&stats, &merged) {
                    (Stats::Regression(a), Stats::Regression(b)) => vec![(a, b)],
                    (Stats::Classification(a), Stats::Classification(b)) => {
                        vec![(&a.pos, &b.pos), (&a.neg, &b.neg)]
                    }
                    _ => unreachable!(),
                };
                for (total, m) in pairs {
                    let d = diff(total, m);
                    assert!(d < 1e-10, "{schedule} {task}: folds merge to {d} off");
                }
                if let (AlphaSchedule::Adaptive(_), Stats::Regression(s)) = (schedule, &stats) {
                    assert!(s.drift_alarms() > 0, "the drift should cut chunks");
                }
                // Scale-out: two shards, each with its folds; their merge as the totals'.
                let half = n / 2;
                let mut s1 = Stats::new(task, p, schedule.clone());
                let mut s2 = s1.clone();
                let (mut f1, mut f2) = (FoldSet::new(task, p, k), FoldSet::new(task, p, k));
                f1.update(&mut s1, &x[..half * p], &y[..half], &ids[..half])
                    .unwrap();
                f2.update(&mut s2, &x[half * p..], &y[half..], &ids[half..])
                    .unwrap();
                f1.merge(&s1, &f2, &s2).unwrap();
                s1.merge(&s2).unwrap();
                let m = f1.merged();
                match (&s1, &m) {
                    (Stats::Regression(a), Stats::Regression(b)) => assert!(diff(a, b) < 1e-10),
                    (Stats::Classification(a), Stats::Classification(b)) => {
                        assert!(diff(&a.pos, &b.pos) < 1e-10 && diff(&a.neg, &b.neg) < 1e-10)
                    }
                    _ => unreachable!(),
                }
            }
        }
    }

    /// Plain averages: each fold is exactly the plain average of its own rows.
    #[test]
    fn plain_folds_are_the_averages_of_their_rows() {
        let (p, n, k) = (4, 400, 3);
        let (x, y) = rows(p, n, 5, false);
        let ids: Vec<u8> = (0..n).map(|i| (i % k) as u8).collect();
        let mut stats = Stats::new(Task::Regression, p, AlphaSchedule::Plain);
        let mut folds = FoldSet::new(Task::Regression, p, k);
        for c in (0..n).step_by(64) {
            let e = (c + 64).min(n);
            folds
                .update(&mut stats, &x[c * p..e * p], &y[c..e], &ids[c..e])
                .unwrap();
        }
        let FoldSet::Regression(f) = &folds else {
            unreachable!()
        };
        for j in 0..k {
            let mut own = RunningStats::new(p, AlphaSchedule::Plain);
            for i in (0..n).filter(|i| i % k == j) {
                own.update(&x[i * p..(i + 1) * p], y[i]).unwrap();
            }
            assert_eq!(own.n(), f.folds[j].n());
            assert!(diff(&own, &f.folds[j]) < 1e-11);
            assert!((f.shares[j] - own.n() as f64 / n as f64).abs() < 1e-13);
        }
    }

    #[test]
    fn ids_out_of_range_change_nothing() {
        let mut stats = Stats::new(Task::Regression, 2, AlphaSchedule::Plain);
        let mut folds = FoldSet::new(Task::Regression, 2, 3);
        assert!(folds.update(&mut stats, &[1.0, 2.0], &[3.0], &[3]).is_err());
        assert!(folds.update(&mut stats, &[1.0, 2.0], &[3.0], &[]).is_err());
        assert_eq!((stats.n(), folds.n()), (0, 0));
    }
}
