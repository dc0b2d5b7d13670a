//! Running-average statistics ("RAVEs", paper 003 section 2): the whole state an observation
//! stream keeps, from which every model is extracted.
//!
//! `RunningStats` holds n, the total weight W, E[x], E[y], E[x x^T] (lower triangle),
//! E[x y] and E[y^2]. Rows are folded in one at a time (`update`) or as a mini-batch with one
//! symmetric rank-B update (`update_batch`, the ingest hot path); both give the same numbers
//! under every `AlphaSchedule`. `merge` combines shards exactly. `ClassStats` keeps one
//! `RunningStats` per class for imbalanced classification (003 section 3.6).
//!
//! The stored averages are always normalized (they are proper weighted means even for a fixed
//! alpha at the start of a stream): with W_n = (1 - alpha_n) W_{n-1} + alpha_n the row gets
//! the effective weight alpha_n / W_n. For plain averages W = 1 and nothing changes.
//!
//! A drift-adaptive schedule (`adaptive`) watches the rows through a reference model refreshed
//! from these statistics; `update_batch` cuts a batch where the schedule asks for a refresh, so
//! batches still equal row-by-row updates. `drift_status` reports what it sees.

pub mod adaptive;
mod schedule;
mod syrk;

pub use adaptive::{AdaptiveConfig, Cusum};
pub use schedule::AlphaSchedule;

use faer::linalg::matmul::triangular::{BlockStructure, matmul};
use faer::{Accum, MatMut, MatRef, Par};
use serde::{Deserialize, Serialize};

/// Why a row or batch was refused; the statistics are untouched when this is returned.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum StatsError {
    #[error("row has {got} features, the stream has {expected}")]
    Dimension { expected: usize, got: usize },
    #[error("batch has {rows} rows of x but {ys} values of y")]
    Length { rows: usize, ys: usize },
    #[error("non-finite value (NaN or Inf) in row {row}")]
    NonFinite { row: usize },
    #[error("classification labels must be +1 or -1 (0 counts as -1), got {value} in row {row}")]
    Label { row: usize, value: f64 },
    #[error("cannot merge statistics with {other} features into statistics with {this}")]
    MergeDimension { this: usize, other: usize },
}

/// The running averages of one stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunningStats {
    p: usize,
    n: u64,
    /// Total weight W (1 for plain averages once a row is seen; below 1 early in a
    /// fixed-alpha stream). Kept so the averages can stay normalized.
    weight: f64,
    mean_x: Vec<f64>,
    mean_y: f64,
    /// E[x x^T], column-major p x p; only the lower triangle (i >= j) is maintained.
    sxx: Vec<f64>,
    sxy: Vec<f64>,
    syy: f64,
    schedule: AlphaSchedule,
}

impl RunningStats {
    pub fn new(p: usize, schedule: AlphaSchedule) -> Self {
        RunningStats {
            p,
            n: 0,
            weight: 0.0,
            mean_x: vec![0.0; p],
            mean_y: 0.0,
            sxx: vec![0.0; p * p],
            sxy: vec![0.0; p],
            syy: 0.0,
            schedule,
        }
    }

    pub fn p(&self) -> usize {
        self.p
    }
    pub fn n(&self) -> u64 {
        self.n
    }
    pub fn total_weight(&self) -> f64 {
        self.weight
    }
    pub fn mean_x(&self) -> &[f64] {
        &self.mean_x
    }
    pub fn mean_y(&self) -> f64 {
        self.mean_y
    }
    pub fn sxy(&self) -> &[f64] {
        &self.sxy
    }
    pub fn syy(&self) -> f64 {
        self.syy
    }
    pub fn schedule(&self) -> &AlphaSchedule {
        &self.schedule
    }
    pub fn schedule_mut(&mut self) -> &mut AlphaSchedule {
        &mut self.schedule
    }
    /// The alpha the next row will get (the raw schedule value, before normalization).
    pub fn current_alpha(&self) -> f64 {
        self.schedule.current_alpha(self.n)
    }
    /// How many rows the averages effectively span, counting the next row: the inverse of
    /// the normalized weight that row will get, W'/alpha with W' = (1 - alpha) W + alpha. n + 1
    /// for plain averages, 1/alpha for a fixed alpha once n >> 1/alpha.
    pub fn effective_sample_size(&self) -> f64 {
        let a = self.current_alpha();
        ((1.0 - a) * self.weight + a) / a
    }
    /// Drift alarms raised by an adaptive schedule (0 for the others).
    pub fn drift_alarms(&self) -> u64 {
        self.schedule.alarms()
    }
    /// The 1-based row number (value of n right after it) of the row that raised the last
    /// drift alarm.
    pub fn last_drift_alarm_row(&self) -> Option<u64> {
        self.schedule.last_alarm_row()
    }
    /// Everything the service reports about the weighting of this stream, in one value.
    pub fn drift_status(&self) -> DriftStatus {
        let (armed, cusum, threshold) = match &self.schedule {
            AlphaSchedule::Adaptive(a) => (
                Some(a.armed()),
                Some(a.cusum_statistic()),
                Some(a.config.cusum().threshold()),
            ),
            _ => (None, None, None),
        };
        DriftStatus {
            schedule: self.schedule.to_string(),
            alpha: self.current_alpha(),
            effective_sample_size: self.effective_sample_size(),
            alarms: self.drift_alarms(),
            last_alarm_row: self.last_drift_alarm_row(),
            detector_armed: armed,
            cusum,
            cusum_threshold: threshold,
        }
    }
    /// E[x_i x_j] for any i, j (reads the stored triangle).
    #[inline]
    pub fn sxx_at(&self, i: usize, j: usize) -> f64 {
        let (r, c) = if i >= j { (i, j) } else { (j, i) };
        self.sxx[r + c * self.p]
    }
    /// E[x x^T] as a full symmetric column-major p x p matrix.
    pub fn sxx_full(&self) -> Vec<f64> {
        let p = self.p;
        let mut full = self.sxx.clone();
        for j in 0..p {
            for i in j + 1..p {
                full[j + i * p] = full[i + j * p];
            }
        }
        full
    }
    /// Population variance of each feature, E[x^2] - E[x]^2 (clamped at 0).
    pub fn variances(&self) -> Vec<f64> {
        (0..self.p)
            .map(|j| (self.sxx_at(j, j) - self.mean_x[j] * self.mean_x[j]).max(0.0))
            .collect()
    }

    /// Fold one row in (a rank-1 update, O(p^2)).
    pub fn update(&mut self, x: &[f64], y: f64) -> Result<(), StatsError> {
        self.update_batch(x, std::slice::from_ref(&y))
    }

    /// Fold a mini-batch in: `x` is row-major, `y.len()` rows of p features. One symmetric
    /// rank-B update of E[x x^T]; the result equals B calls of `update` up to rounding.
    pub fn update_batch(&mut self, x: &[f64], y: &[f64]) -> Result<(), StatsError> {
        // An adaptive schedule reads the rows before they are folded: check them first. The
        // others fold the whole batch at once, and the fold checks it on its way (`apply`).
        let adaptive = matches!(self.schedule, AlphaSchedule::Adaptive(_));
        let rows = check_batch(self.p, x, y, adaptive)?;
        let p = self.p;
        let mut at = 0;
        while at < rows {
            if self.schedule.wants_refresh(self.n, p) {
                // The schedule reads the statistics it lives in: lend it out meanwhile.
                let mut schedule = std::mem::take(&mut self.schedule);
                schedule.refresh(self);
                self.schedule = schedule;
            }
            let (xs, ys) = (&x[at * p..], &y[at..]);
            let alphas = self.schedule.alphas_for_batch(self.n, rows - at, xs, ys);
            let got = alphas.len();
            let weight = self.weight;
            let (decay, omega) = self.fold_weights(&alphas);
            if !self.apply(&xs[..got * p], &ys[..got], decay, &omega, adaptive) {
                // Only unchecked batches get here, whole (non-adaptive schedules take every
                // row at once): nothing else has changed yet.
                self.weight = weight;
                return Err(first_non_finite(p, x, y));
            }
            self.n += got as u64;
            at += got;
        }
        Ok(())
    }

    /// Turns raw alphas into (decay of the old state, weight of each row), tracking W so the
    /// averages stay normalized: state <- decay * state + sum_i omega_i * row_i.
    fn fold_weights(&mut self, alphas: &[f64]) -> (f64, Vec<f64>) {
        let mut eff = Vec::with_capacity(alphas.len());
        let mut w = self.weight;
        for &a in alphas {
            w = (1.0 - a) * w + a;
            eff.push(if w > 0.0 { a / w } else { 1.0 });
        }
        self.weight = w;
        // omega_i = eff_i * prod_{j > i} (1 - eff_j); decay = prod_j (1 - eff_j).
        let mut omega = vec![0.0; eff.len()];
        let mut tail = 1.0;
        for i in (0..eff.len()).rev() {
            omega[i] = eff[i] * tail;
            tail *= 1.0 - eff[i];
        }
        (tail, omega)
    }

    /// Folds the rows in; unless `checked`, returns false without touching anything if a value
    /// is NaN or infinite.
    fn apply(&mut self, x: &[f64], y: &[f64], decay: f64, omega: &[f64], checked: bool) -> bool {
        let p = self.p;
        let rows = y.len();
        // Equal row weights (plain averages: every omega_i = 1/(n+B) up to rounding) scale the
        // product instead of the rows; otherwise the rows are scaled by sqrt(omega_i).
        let (lo, hi) = omega
            .iter()
            .fold((f64::INFINITY, 0.0f64), |(l, h), &w| (l.min(w), h.max(w)));
        let equal = hi - lo <= 1e-14 * hi;
        if rows >= 2 && !portable_forced() {
            // The dedicated AVX2 + FMA kernel (`syrk`): the lower triangle of E[x x^T] and, as two
            // more rows of the same product, E[x], E[x y], E[y] and E[y^2]. Measured on the
            // 2-core development machine (Zen 3, quiet), whole `update_batch` against numpy's
            // X.T @ X (OpenBLAS dsyrk, 2 threads) on the same batches: p = 100, B = 1024:
            // 5.4 M rows/s vs 5.0 M; p = 1000, B = 256 / 1024 / 4096: 85 / 86-87 / 85 k rows/s
            // vs 73 / 83 / 84 k (`cargo bench --bench stats -- ingest`,
            // `python3 scripts/bench_numpy.py`). faer's triangular `matmul` below, kept for
            // other CPUs, ran at 2.6 M and 54-58 k.
            let weights = if equal {
                syrk::Weights::Equal(0.5 * (lo + hi))
            } else {
                syrk::Weights::Rows(omega)
            };
            let mut extra = vec![0.0; 2 * (p + 2)];
            match syrk::fold(
                &mut self.sxx,
                &mut extra,
                p,
                x,
                y,
                weights,
                decay,
                checked,
                None,
            ) {
                syrk::Folded::Done => {
                    let (sum_x, sum_xy) = extra.split_at(p + 2);
                    for j in 0..p {
                        self.mean_x[j] = decay * self.mean_x[j] + sum_x[j];
                        self.sxy[j] = decay * self.sxy[j] + sum_xy[j];
                    }
                    self.mean_y = decay * self.mean_y + sum_xy[p];
                    self.syy = decay * self.syy + sum_xy[p + 1];
                    return true;
                }
                syrk::Folded::NotFinite => return false,
                syrk::Folded::Unavailable => {}
            }
        }
        if !checked && !syrk::batch_finite(x, y) {
            return false;
        }
        for v in self.mean_x.iter_mut().chain(self.sxy.iter_mut()) {
            *v *= decay;
        }
        self.mean_y *= decay;
        self.syy *= decay;
        for (i, row) in x.chunks_exact(p).enumerate() {
            let (w, yi) = (omega[i], y[i]);
            self.mean_y += w * yi;
            self.syy += w * yi * yi;
            for j in 0..p {
                self.mean_x[j] += w * row[j];
                self.sxy[j] += w * yi * row[j];
            }
        }
        // Lower triangle: decay, then add Z Z^T with Z = X^T diag(sqrt(omega)).
        for j in 0..p {
            for v in &mut self.sxx[j + j * p..(j + 1) * p] {
                *v *= decay;
            }
        }
        if rows == 1 {
            let (w, row) = (omega[0], x);
            for j in 0..p {
                let wj = w * row[j];
                let col = &mut self.sxx[j * p..(j + 1) * p];
                for i in j..p {
                    col[i] += wj * row[i];
                }
            }
            return true;
        }
        // Other CPUs: faer's triangular product.
        let scaled;
        let (z, alpha): (&[f64], f64) = if equal {
            (x, 0.5 * (lo + hi))
        } else {
            let mut v = x.to_vec();
            for (i, row) in v.chunks_exact_mut(p).enumerate() {
                let s = omega[i].sqrt();
                row.iter_mut().for_each(|e| *e *= s);
            }
            scaled = v;
            (&scaled, 1.0)
        };
        // Row-major B x p is column-major p x B: that is Z itself.
        let zt = MatRef::from_column_major_slice(z, p, rows);
        let dst = MatMut::from_column_major_slice_mut(&mut self.sxx, p, p);
        let par = if (p * p * rows) as f64 > 4e6 {
            Par::rayon(0)
        } else {
            Par::Seq
        };
        // Only the lower triangle: half the flops of X^T X (about 0.7x numpy's speed; faster
        // variants tried then: the system OpenBLAS dsyrk, 66-74 k rows/s at p = 1000, needs
        // libopenblas-dev; faer's full GEMM and a column-blocked triangle were slower).
        matmul(
            dst,
            BlockStructure::TriangularLower,
            Accum::Add,
            zt,
            BlockStructure::Rectangular,
            zt.transpose(),
            BlockStructure::Rectangular,
            alpha,
            par,
        );
        true
    }

    /// Combine the statistics of another shard of the same stream. For plain averages the
    /// result equals one stream that saw both shards' rows (up to rounding); for forgetting
    /// schedules the shards are weighted by their row counts.
    pub fn merge(&mut self, other: &RunningStats) -> Result<(), StatsError> {
        if other.p != self.p {
            return Err(StatsError::MergeDimension {
                this: self.p,
                other: other.p,
            });
        }
        if other.n == 0 {
            return Ok(());
        }
        if self.n == 0 {
            let schedule = self.schedule.clone();
            *self = other.clone();
            self.schedule = schedule;
            return Ok(());
        }
        let n = self.n + other.n;
        let f = other.n as f64 / n as f64;
        let g = 1.0 - f;
        let mix = |a: &mut f64, b: f64| *a = g * *a + f * b;
        mix(&mut self.weight, other.weight);
        mix(&mut self.mean_y, other.mean_y);
        mix(&mut self.syy, other.syy);
        for (a, &b) in self.mean_x.iter_mut().zip(&other.mean_x) {
            mix(a, b);
        }
        for (a, &b) in self.sxy.iter_mut().zip(&other.sxy) {
            mix(a, b);
        }
        let p = self.p;
        for j in 0..p {
            for i in j..p {
                mix(&mut self.sxx[i + j * p], other.sxx[i + j * p]);
            }
        }
        self.n = n;
        Ok(())
    }
}

/// The weighting of a stream as the service reports it (GET /v1/streams/{name}, /metrics).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DriftStatus {
    /// The schedule, as `--alpha` spells it.
    pub schedule: String,
    /// Raw alpha the next row gets.
    pub alpha: f64,
    /// Rows the averages effectively span (`RunningStats::effective_sample_size`).
    pub effective_sample_size: f64,
    /// Drift alarms so far and the row that raised the last one (adaptive schedule only).
    pub alarms: u64,
    pub last_alarm_row: Option<u64>,
    /// Adaptive only: whether the detector is armed (it rests after an alarm until the new
    /// regime has enough rows), its CUSUM statistic and the alarm threshold.
    pub detector_armed: Option<bool>,
    pub cusum: Option<f64>,
    pub cusum_threshold: Option<f64>,
}

/// Validates a batch before anything is changed: dimensions and, if `finite`, finiteness.
fn check_batch(p: usize, x: &[f64], y: &[f64], finite: bool) -> Result<usize, StatsError> {
    let rows = y.len();
    if p == 0 || x.len() != rows * p {
        if rows > 0 && x.len() % rows == 0 {
            return Err(StatsError::Dimension {
                expected: p,
                got: x.len() / rows,
            });
        }
        return Err(StatsError::Length {
            rows: if p == 0 { 0 } else { x.len() / p },
            ys: rows,
        });
    }
    if finite && !syrk::batch_finite(x, y) {
        return Err(first_non_finite(p, x, y));
    }
    Ok(rows)
}

/// The error for the first row with a NaN or infinite value (the batch has one).
fn first_non_finite(p: usize, x: &[f64], y: &[f64]) -> StatsError {
    let row = x
        .chunks_exact(p)
        .zip(y)
        .position(|(row, yi)| !yi.is_finite() || row.iter().any(|v| !v.is_finite()))
        .unwrap_or(0);
    StatsError::NonFinite { row }
}

/// Class-conditional running averages for +1/-1 labels (003 section 3.6): positives and
/// negatives are averaged separately so that each class can be weighted at extraction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClassStats {
    pub pos: RunningStats,
    pub neg: RunningStats,
}

impl ClassStats {
    pub fn new(p: usize, schedule: AlphaSchedule) -> Self {
        ClassStats {
            pos: RunningStats::new(p, schedule.clone()),
            neg: RunningStats::new(p, schedule),
        }
    }
    pub fn p(&self) -> usize {
        self.pos.p()
    }
    pub fn n(&self) -> u64 {
        self.pos.n() + self.neg.n()
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

    pub fn merge(&mut self, other: &ClassStats) -> Result<(), StatsError> {
        self.pos.merge(&other.pos)?;
        self.neg.merge(&other.neg)
    }
}

/// Tests can send a thread's batches down the portable path (faer) that CPUs without AVX2 and
/// FMA take, so that path is checked against the kernel on this machine too.
#[cfg(test)]
thread_local! {
    static FORCE_PORTABLE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

#[cfg(test)]
fn portable_forced() -> bool {
    FORCE_PORTABLE.with(|f| f.get())
}

#[cfg(not(test))]
#[inline(always)]
fn portable_forced() -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch(p: usize, rows: usize, seed: u64) -> (Vec<f64>, Vec<f64>) {
        let mut state = seed;
        let mut next = move || {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((state >> 11) as f64 / (1u64 << 53) as f64) * 4.0 - 1.0
        };
        let x = (0..p * rows).map(|_| next()).collect();
        let y = (0..rows).map(|_| next()).collect();
        (x, y)
    }

    fn fold(p: usize, sizes: &[usize], schedule: &AlphaSchedule, portable: bool) -> RunningStats {
        FORCE_PORTABLE.with(|f| f.set(portable));
        let mut s = RunningStats::new(p, schedule.clone());
        for (i, &rows) in sizes.iter().enumerate() {
            let (x, y) = batch(p, rows, 7 + i as u64);
            s.update_batch(&x, &y).unwrap();
        }
        FORCE_PORTABLE.with(|f| f.set(false));
        s
    }

    fn close(a: f64, b: f64, scale: f64) -> bool {
        (a - b).abs() <= 1e-12 * scale
    }

    #[test]
    fn the_portable_path_equals_the_kernel() {
        let schedules = [
            AlphaSchedule::Plain,
            AlphaSchedule::Fixed { alpha: 0.01 },
            AlphaSchedule::Floor { alpha_min: 0.002 },
        ];
        for p in [1, 5, 13, 100, 300] {
            for schedule in &schedules {
                let sizes = [1, 2, 37, 300, 5];
                let (a, b) = (
                    fold(p, &sizes, schedule, false),
                    fold(p, &sizes, schedule, true),
                );
                assert_eq!(a.n(), b.n());
                let scale = a.sxx_full().iter().fold(1.0f64, |m, v| m.max(v.abs()));
                for i in 0..p {
                    for j in 0..=i {
                        let (u, v) = (a.sxx_at(i, j), b.sxx_at(i, j));
                        assert!(
                            close(u, v, scale),
                            "p={p} {schedule:?} ({i},{j}): {u} vs {v}"
                        );
                    }
                    assert!(close(a.mean_x()[i], b.mean_x()[i], scale));
                    assert!(close(a.sxy()[i], b.sxy()[i], scale));
                }
                assert!(close(a.mean_y(), b.mean_y(), scale));
                assert!(close(a.syy(), b.syy(), scale));
                assert!(close(a.total_weight(), b.total_weight(), 1.0));
            }
        }
    }

    #[test]
    fn the_portable_path_refuses_non_finite_batches_untouched() {
        FORCE_PORTABLE.with(|f| f.set(true));
        let mut s = RunningStats::new(4, AlphaSchedule::Plain);
        let (x, y) = batch(4, 10, 1);
        s.update_batch(&x, &y).unwrap();
        let before = (s.sxx_full(), s.mean_x().to_vec(), s.n(), s.total_weight());
        let (mut x2, y2) = batch(4, 10, 2);
        x2[4 * 6 + 2] = f64::NAN;
        assert!(s.update_batch(&x2, &y2).is_err());
        FORCE_PORTABLE.with(|f| f.set(false));
        assert_eq!(
            before,
            (s.sxx_full(), s.mean_x().to_vec(), s.n(), s.total_weight())
        );
    }
}
