//! Running-average statistics ("RAVEs", paper 003 section 2): the whole state an observation
//! stream keeps, from which every model is extracted.
//!
//! `RunningStats` holds n, the total weight W, E\[x\], E\[y\], E\[x x^T\] (lower triangle),
//! E[x y] and E[y^2]. Rows are folded in one at a time (`update`) or as a mini-batch with one
//! symmetric rank-B update (`update_batch`, the ingest hot path); both give the same numbers
//! under every `AlphaSchedule`. `merge` combines shards exactly. `ClassStats` keeps one
//! `RunningStats` per class for imbalanced classification (003 section 3.6).
//!
//! The moments are accumulated around a shift (s, t), the stream's first row: the state holds
//! E[x - s], E[y - t], E[(x - s)(x - s)^T], E[(x - s)(y - t)] and E[(y - t)^2], and the
//! centred moments the Gram problem needs (`Moments::cov_at`, `cov_xy`, `var_y`) are
//! differences of numbers of the data's own spread. Raw moments lose everything to
//! cancellation once |mean| / sd nears 1e8 (timestamps, prices in cents): Var = E\[x^2\] - E\[x\]^2
//! subtracts two numbers near mean^2 whose rounding error, eps mean^2, is then the size of the
//! variance itself (issue 11). A data row as the shift makes a constant column exactly 0 after
//! the shift (its variance is then exactly 0), costs no pass over the batch, and is the same for
//! a batch and for the rows one at a time. The kernel subtracts the shift while it packs a block
//! (stats/syrk.rs); shards with different shifts are re-centred algebraically before a merge
//! (`recentre`), which is exact up to rounding.
//!
//! The stored averages are always normalized (they are proper weighted means even for a fixed
//! alpha at the start of a stream): with W_n = (1 - alpha_n) W_{n-1} + alpha_n the row gets
//! the effective weight alpha_n / W_n. For plain averages W = 1 and nothing changes.
//!
//! A drift-adaptive schedule (`adaptive`) watches the rows through a reference model refreshed
//! from these statistics; `update_batch` cuts a batch where the schedule asks for a refresh, so
//! batches still equal row-by-row updates. `drift_status` reports what it sees.

pub mod adaptive;
pub mod folds;
mod observations;
mod schedule;
mod syrk;

pub use adaptive::{AdaptiveConfig, Cusum};
pub use folds::{FoldSet, Folds};
pub use observations::Observations;
pub use schedule::{AlphaSchedule, AlphaSpec};

use crate::gram::{Problem, ProblemError};
use crate::task::Task;
use ndarray::{Array1, Array2};

use faer::linalg::matmul::triangular::{BlockStructure, matmul};
use faer::{Accum, MatMut, MatRef, Par};
use serde::{Deserialize, Serialize};
use std::borrow::Cow;

/// Why a row or batch was refused; the statistics are untouched when this is returned.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum StatsError {
    /// A row whose width is not p.
    #[error("row has {got} features, the stream has {expected}")]
    Dimension {
        /// The statistics' p.
        expected: usize,
        /// The row's width.
        got: usize,
    },
    /// x and y hold different numbers of rows.
    #[error("batch has {rows} rows of x but {ys} values of y")]
    Length {
        /// Rows of x.
        rows: usize,
        /// Values of y.
        ys: usize,
    },
    /// Strided rows (`StridedRows`) whose slices do not hold every value their strides
    /// point to (or p = 0, or a column stride of 0).
    #[error(
        "{rows} rows with strides ({row_stride}, {col_stride}) and target stride {y_stride} \
         reach past their slices"
    )]
    Strides {
        /// Rows.
        rows: usize,
        /// From a row to the next.
        row_stride: usize,
        /// From a feature to the next.
        col_stride: usize,
        /// From a target to the next.
        y_stride: usize,
    },
    /// A NaN or infinite value.
    #[error("non-finite value (NaN or Inf) in row {row}")]
    NonFinite {
        /// The first bad row of the batch.
        row: usize,
    },
    /// A value beyond `MAX_ABS_VALUE`.
    #[error("value beyond +-1e150 in row {row}: its square would overflow the moments")]
    Overflow {
        /// The first bad row of the batch.
        row: usize,
    },
    /// A classification label other than +1, -1 or 0.
    #[error("classification labels must be +1 or -1 (0 counts as -1), got {value} in row {row}")]
    Label {
        /// The first bad row of the batch.
        row: usize,
        /// Its label.
        value: f64,
    },
    /// Statistics of different p.
    #[error("cannot merge statistics with {other} features into statistics with {this}")]
    MergeDimension {
        /// Our p.
        this: usize,
        /// Theirs.
        other: usize,
    },
    /// Regression and classification statistics.
    #[error("cannot merge {theirs} statistics into {ours} statistics")]
    TaskMismatch {
        /// Our task.
        ours: Task,
        /// Theirs.
        theirs: Task,
    },
}

/// Largest |value| of x or y a row may have (`StatsError::Overflow` beyond), checked on the raw
/// values before anything is folded. Squares and products of shifted values are then at most
/// (2e150)^2 = 4e300 and the kernel adds at most a block of 160 of them unscaled (stats/syrk.rs,
/// KC) before weighting: 6.4e302, 280 times below f64::MAX (1.8e308). Without it a value near
/// 1e200 turns E[x x^T] into infinity for good (issue 10), and the checkpoint cannot be read
/// back. Real data (timestamps, money, counts) sit a hundred orders of magnitude below.
pub const MAX_ABS_VALUE: f64 = 1e150;

/// The running averages of one stream, around the shift (s, t) (see the module header). The
/// serialized names of the moments are those of the raw moments they were before the shift
/// existed: a checkpoint written then loads with s = 0 and t = 0, which is what it holds.
/// E\[x x^T\] is serialized as its lower triangle, column by column (`sxx_lower`, p(p+1)/2
/// values: half the bytes of a checkpoint or state record); the full matrix (`sxx`) of
/// earlier checkpoints still loads.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(from = "StoredStats")]
pub struct RunningStats {
    p: usize,
    n: u64,
    /// Total weight W (1 for plain averages once a row is seen; below 1 early in a
    /// fixed-alpha stream). Kept so the averages can stay normalized.
    weight: f64,
    /// E[x - s].
    #[serde(rename = "mean_x")]
    dx: Vec<f64>,
    /// E[y - t].
    #[serde(rename = "mean_y")]
    dy: f64,
    /// E[(x - s)(x - s)^T], column-major p x p; only the lower triangle (i >= j) is maintained.
    #[serde(rename = "sxx")]
    dxx: Vec<f64>,
    /// E[(x - s)(y - t)].
    #[serde(rename = "sxy")]
    dxy: Vec<f64>,
    /// E[(y - t)^2].
    #[serde(rename = "syy")]
    dyy: f64,
    schedule: AlphaSchedule,
    /// The shift s (the first row's x) and t (its y); 0 before the first row.
    shift_x: Vec<f64>,
    shift_y: f64,
}

/// `RunningStats` as stored; checkpoints written before the shift existed have none, and
/// those written before the packed triangle hold the full `sxx`.
#[derive(Deserialize)]
struct StoredStats {
    p: usize,
    n: u64,
    weight: f64,
    mean_x: Vec<f64>,
    mean_y: f64,
    #[serde(default)]
    sxx: Vec<f64>,
    #[serde(default)]
    sxx_lower: Option<Vec<f64>>,
    sxy: Vec<f64>,
    syy: f64,
    schedule: AlphaSchedule,
    #[serde(default)]
    shift_x: Vec<f64>,
    #[serde(default)]
    shift_y: f64,
}

impl From<StoredStats> for RunningStats {
    fn from(s: StoredStats) -> Self {
        RunningStats {
            shift_x: if s.shift_x.is_empty() {
                vec![0.0; s.p]
            } else {
                s.shift_x
            },
            p: s.p,
            n: s.n,
            weight: s.weight,
            dx: s.mean_x,
            dy: s.mean_y,
            dxx: match s.sxx_lower {
                Some(lower) => unpack_lower(lower, s.p),
                None => lower_only(s.sxx, s.p),
            },
            dxy: s.sxy,
            dyy: s.syy,
            schedule: s.schedule,
            shift_y: s.shift_y,
        }
    }
}

/// The lower triangle of a column-major p x p matrix, column by column.
struct LowerTriangle<'a>(&'a [f64], usize);

impl Serialize for LowerTriangle<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let (m, p) = (self.0, self.1);
        if m.len() != p * p {
            // Not a p x p matrix (statistics that fail `validate`): written as they are, so
            // that they are refused again when read, not cut here.
            return s.collect_seq(m);
        }
        s.collect_seq((0..p).flat_map(|j| m[j * p + j..(j + 1) * p].iter()))
    }
}

/// The full column-major matrix (upper triangle zero, as the fold leaves it) of a packed lower
/// triangle; a triangle of the wrong length is kept as it is, for `validate` to refuse.
fn unpack_lower(lower: Vec<f64>, p: usize) -> Vec<f64> {
    if lower.len() != p * (p + 1) / 2 {
        return lower;
    }
    let mut m = vec![0.0; p * p];
    let mut at = 0;
    for j in 0..p {
        let len = p - j;
        m[j * p + j..(j + 1) * p].copy_from_slice(&lower[at..at + len]);
        at += len;
    }
    m
}

/// A full matrix of an earlier checkpoint with its upper triangle zeroed: only the lower
/// one is read or maintained, and zeros above it are what the fold leaves (so the statistics
/// serialize as the lower triangle and load back equal). A matrix that is not p x p is kept
/// for `validate` to refuse.
fn lower_only(mut m: Vec<f64>, p: usize) -> Vec<f64> {
    if m.len() == p * p {
        for j in 1..p {
            m[j * p..j * p + j].fill(0.0);
        }
    }
    m
}

impl Serialize for RunningStats {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        let mut st = s.serialize_struct("RunningStats", 11)?;
        st.serialize_field("p", &self.p)?;
        st.serialize_field("n", &self.n)?;
        st.serialize_field("weight", &self.weight)?;
        st.serialize_field("mean_x", &self.dx)?;
        st.serialize_field("mean_y", &self.dy)?;
        st.serialize_field("sxx_lower", &LowerTriangle(&self.dxx, self.p))?;
        st.serialize_field("sxy", &self.dxy)?;
        st.serialize_field("syy", &self.dyy)?;
        st.serialize_field("schedule", &self.schedule)?;
        st.serialize_field("shift_x", &self.shift_x)?;
        st.serialize_field("shift_y", &self.shift_y)?;
        st.end()
    }
}

impl RunningStats {
    /// Empty statistics of p features under `schedule`.
    pub fn new(p: usize, schedule: AlphaSchedule) -> Self {
        RunningStats {
            p,
            n: 0,
            weight: 0.0,
            dx: vec![0.0; p],
            dy: 0.0,
            dxx: vec![0.0; p * p],
            dxy: vec![0.0; p],
            dyy: 0.0,
            schedule,
            shift_x: vec![0.0; p],
            shift_y: 0.0,
        }
    }

    /// Number of features p.
    pub fn p(&self) -> usize {
        self.p
    }
    /// Rows folded in.
    pub fn n(&self) -> u64 {
        self.n
    }
    /// The total weight W (1 for plain averages once a row is seen).
    pub fn total_weight(&self) -> f64 {
        self.weight
    }
    /// E\[x\].
    pub fn mean_x(&self) -> Vec<f64> {
        self.shift_x
            .iter()
            .zip(&self.dx)
            .map(|(s, d)| s + d)
            .collect()
    }
    /// E\[y\].
    pub fn mean_y(&self) -> f64 {
        self.shift_y + self.dy
    }
    /// The shift s of x and t of y the moments are accumulated around.
    pub fn shift_x(&self) -> &[f64] {
        &self.shift_x
    }
    /// The shift t of y.
    pub fn shift_y(&self) -> f64 {
        self.shift_y
    }
    /// Raw E[x y] (recombined from the shifted moments: for large offsets prefer the centred
    /// `Moments::cov_xy`).
    pub fn sxy(&self) -> Vec<f64> {
        let (t, e) = (self.shift_y, self.dy);
        (0..self.p)
            .map(|j| {
                let (s, d) = (self.shift_x[j], self.dx[j]);
                self.dxy[j] + s * e + d * t + s * t
            })
            .collect()
    }
    /// Whether every moment is a finite number: always, since rows are bounded
    /// (`MAX_ABS_VALUE`); the service checks it before it publishes a fold, in depth. O(p): a
    /// finite diagonal bounds the rest of E[(x - s)(x - s)^T] (Cauchy-Schwarz).
    pub fn is_finite(&self) -> bool {
        let p = self.p;
        self.weight.is_finite()
            && self.dy.is_finite()
            && self.dyy.is_finite()
            && self.dx.iter().chain(&self.dxy).all(|v| v.is_finite())
            && (0..p).all(|j| self.dxx[j + j * p].is_finite())
    }
    /// Raw E[y^2] (see `sxy`).
    pub fn syy(&self) -> f64 {
        let t = self.shift_y;
        self.dyy + 2.0 * t * self.dy + t * t
    }
    /// The weight schedule.
    pub fn schedule(&self) -> &AlphaSchedule {
        &self.schedule
    }
    /// The weight schedule, to change its settings.
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
    /// E[(x_i - s_i)(x_j - s_j)] for any i, j (reads the stored triangle).
    #[inline]
    pub fn dxx_at(&self, i: usize, j: usize) -> f64 {
        let (r, c) = if i >= j { (i, j) } else { (j, i) };
        self.dxx[r + c * self.p]
    }
    /// Raw E[x_i x_j], recombined from the shifted moments (for large offsets prefer the
    /// centred `Moments::cov_at`).
    #[inline]
    pub fn sxx_at(&self, i: usize, j: usize) -> f64 {
        let (si, sj) = (self.shift_x[i], self.shift_x[j]);
        self.dxx_at(i, j) + si * self.dx[j] + self.dx[i] * sj + si * sj
    }
    /// Raw E[x x^T] as a full symmetric column-major p x p matrix.
    pub fn sxx_full(&self) -> Vec<f64> {
        let p = self.p;
        let mut full = vec![0.0; p * p];
        for j in 0..p {
            for i in j..p {
                let v = self.sxx_at(i, j);
                full[i + j * p] = v;
                full[j + i * p] = v;
            }
        }
        full
    }
    /// Population variance of each feature (clamped at 0), from the shifted moments.
    pub fn variances(&self) -> Vec<f64> {
        crate::gram::Moments::variances(self)
    }

    /// Fold rows in: one row (`&[f64]` or `ArrayView1<f64>` with an `f64` target, a rank-1
    /// update, O(p^2)) or a batch (`ArrayView2<f64>` with an `ArrayView1<f64>` of targets,
    /// or `&Array2` with `&Array1`), folded as `update_batch` folds it. A standard-layout
    /// batch is folded where it lies; other layouts are copied once (`Observations`).
    ///
    /// ```
    /// use ndarray::array;
    /// use ravel_core::stats::{AlphaSchedule, RunningStats};
    ///
    /// let mut stats = RunningStats::new(2, AlphaSchedule::Plain);
    /// stats.update(array![[1.0, 2.0], [3.0, 4.0]].view(), array![1.0, 0.0].view())?;
    /// stats.update(&[5.0, 6.0][..], 2.0)?;
    /// assert_eq!(stats.n(), 3);
    /// assert_eq!(stats.mean_x(), vec![3.0, 4.0]);
    /// # Ok::<(), ravel_core::stats::StatsError>(())
    /// ```
    pub fn update<X: Observations<Y>, Y>(&mut self, x: X, y: Y) -> Result<(), StatsError> {
        x.with_rows(self.p, y, |x, y| self.update_batch(x, y))
    }

    /// E\[x\] as an array of length p.
    pub fn mean_x_array(&self) -> Array1<f64> {
        Array1::from(self.mean_x())
    }

    /// The population covariance matrix Cov(x) (p x p, symmetric), from the shifted moments.
    ///
    /// ```
    /// use ndarray::array;
    /// use ravel_core::stats::{AlphaSchedule, RunningStats};
    ///
    /// let mut stats = RunningStats::new(2, AlphaSchedule::Plain);
    /// stats.update(array![[1.0, 2.0], [3.0, 6.0]].view(), array![0.0, 1.0].view())?;
    /// assert_eq!(stats.covariance(), array![[1.0, 2.0], [2.0, 4.0]]);
    /// assert_eq!(stats.cov_xy_array(), array![0.5, 1.0]);
    /// # Ok::<(), ravel_core::stats::StatsError>(())
    /// ```
    pub fn covariance(&self) -> Array2<f64> {
        let p = self.p;
        let mut full = vec![0.0; p * p];
        for j in 0..p {
            for i in j..p {
                let v = crate::gram::Moments::cov_at(self, i, j);
                full[i + j * p] = v;
                full[j + i * p] = v;
            }
        }
        observations::square(p, full)
    }

    /// Cov(x_j, y) for every feature, as an array of length p.
    pub fn cov_xy_array(&self) -> Array1<f64> {
        (0..self.p)
            .map(|j| crate::gram::Moments::cov_xy(self, j))
            .collect()
    }

    /// E\[x x^T\] (p x p, symmetric) as an array: `sxx_full` in ndarray form.
    pub fn sxx_array(&self) -> Array2<f64> {
        observations::square(self.p, self.sxx_full())
    }

    /// Fold a mini-batch in: `x` is row-major, `y.len()` rows of p features. One symmetric
    /// rank-B update of E[x x^T]; the result equals B calls of `update` up to rounding.
    pub fn update_batch(&mut self, x: &[f64], y: &[f64]) -> Result<(), StatsError> {
        self.update_batch_with(x, y, |_| {})
    }

    /// `update_batch`, telling `each` how every chunk of the batch was weighted once it is
    /// folded (the decay of the old state and each row's weight): fold statistics follow the
    /// stream's own weights with it (`folds`). A refused batch calls it for nothing.
    pub fn update_batch_with(
        &mut self,
        x: &[f64],
        y: &[f64],
        mut each: impl FnMut(Chunk<'_>),
    ) -> Result<(), StatsError> {
        // An adaptive schedule reads the rows before they are folded: check them first. The
        // others fold the whole batch at once, and the fold checks it on its way (`apply`).
        let adaptive = matches!(self.schedule, AlphaSchedule::Adaptive(_));
        let rows = check_batch(self.p, x, y, adaptive)?;
        let p = self.p;
        if !adaptive {
            return self.fold_whole(StridedRows::contiguous(p, x, y), each);
        }
        // The first row of the stream becomes the shift (module header): empty statistics
        // hold no moments, so the shift can change freely.
        if self.n == 0 && rows > 0 {
            self.shift_x.copy_from_slice(&x[..p]);
            self.shift_y = y[0];
        }
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
            let (decay, omega) = self.fold_weights(&alphas);
            // The batch was checked above: a checked fold cannot refuse it.
            let folded = self.apply(&xs[..got * p], &ys[..got], decay, &omega, true);
            debug_assert!(folded);
            each(Chunk {
                first_row: at,
                decay,
                omega: &omega,
                shift: (&self.shift_x, self.shift_y),
            });
            self.n += got as u64;
            at += got;
        }
        Ok(())
    }

    /// `update_batch_with` for a schedule that does not read the rows: the whole batch in one
    /// chunk, from wherever its rows lie (the kernel packs them there; other CPUs and single
    /// rows fold a row-major view, borrowed when the rows are row-major already). The first
    /// row of the stream becomes the shift; a refused batch (a value that is not finite, or
    /// beyond `MAX_ABS_VALUE`) leaves the weight and the shift as they were.
    fn fold_whole(
        &mut self,
        data: StridedRows,
        mut each: impl FnMut(Chunk<'_>),
    ) -> Result<(), StatsError> {
        let (p, rows) = (self.p, data.rows);
        if rows == 0 {
            return Ok(());
        }
        // Empty statistics hold no moments, so the shift can change freely.
        let old_shift = (self.n == 0).then(|| (self.shift_x.clone(), self.shift_y));
        if old_shift.is_some() {
            for (j, s) in self.shift_x.iter_mut().enumerate() {
                *s = data.x[j * data.col_stride];
            }
            self.shift_y = data.y[0];
        }
        let alphas = self.schedule.alphas_for_batch(self.n, rows, &[], &[]);
        let weight = self.weight;
        let (decay, omega) = self.fold_weights(&alphas);
        let folded = match self.apply_kernel(data, decay, &omega, false) {
            Some(folded) => folded,
            None => {
                let (x, y) = data.row_major(p);
                self.apply_portable(&x, &y, decay, &omega, false)
            }
        };
        if !folded {
            self.weight = weight;
            if let Some((sx, sy)) = old_shift {
                self.shift_x = sx;
                self.shift_y = sy;
            }
            let (x, y) = data.row_major(p);
            return Err(first_non_finite(p, &x, &y));
        }
        each(Chunk {
            first_row: 0,
            decay,
            omega: &omega,
            shift: (&self.shift_x, self.shift_y),
        });
        self.n += rows as u64;
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

    /// Folds the rows in (shifted by (s, t)); unless `checked`, returns false without touching
    /// anything if a value is NaN or infinite.
    fn apply(&mut self, x: &[f64], y: &[f64], decay: f64, omega: &[f64], checked: bool) -> bool {
        let data = StridedRows::contiguous(self.p, x, y);
        match self.apply_kernel(data, decay, omega, checked) {
            Some(folded) => folded,
            None => self.apply_portable(x, y, decay, omega, checked),
        }
    }

    /// `apply` without the kernel (other CPUs and single rows): the shifted rows, scaled by
    /// sqrt(omega_i) unless the weights are equal.
    fn apply_portable(
        &mut self,
        x: &[f64],
        y: &[f64],
        decay: f64,
        omega: &[f64],
        checked: bool,
    ) -> bool {
        let p = self.p;
        let rows = y.len();
        let (lo, hi) = weight_range(omega);
        let equal = hi - lo <= 1e-14 * hi;
        if !checked && !syrk::batch_finite(x, y) {
            return false;
        }
        let mut z = x.to_vec();
        for row in z.chunks_exact_mut(p) {
            row.iter_mut().zip(&self.shift_x).for_each(|(v, s)| *v -= s);
        }
        for v in self.dx.iter_mut().chain(self.dxy.iter_mut()) {
            *v *= decay;
        }
        self.dy *= decay;
        self.dyy *= decay;
        for (i, row) in z.chunks_exact(p).enumerate() {
            let (w, e) = (omega[i], y[i] - self.shift_y);
            self.dy += w * e;
            self.dyy += w * e * e;
            for ((m, dxy), &d) in self.dx.iter_mut().zip(&mut self.dxy).zip(row) {
                *m += w * d;
                *dxy += w * e * d;
            }
        }
        // Lower triangle: decay, then add Z Z^T with Z = (X - s)^T diag(sqrt(omega)).
        for j in 0..p {
            for v in &mut self.dxx[j + j * p..(j + 1) * p] {
                *v *= decay;
            }
        }
        if rows == 1 {
            let (w, row) = (omega[0], &z);
            for j in 0..p {
                let wj = w * row[j];
                let col = &mut self.dxx[j * p..(j + 1) * p];
                for i in j..p {
                    col[i] += wj * row[i];
                }
            }
            return true;
        }
        // Other CPUs: faer's triangular product.
        let alpha = if equal {
            0.5 * (lo + hi)
        } else {
            for (i, row) in z.chunks_exact_mut(p).enumerate() {
                let s = omega[i].sqrt();
                row.iter_mut().for_each(|e| *e *= s);
            }
            1.0
        };
        // Row-major B x p is column-major p x B: that is Z itself.
        let zt = MatRef::from_column_major_slice(&z, p, rows);
        let dst = MatMut::from_column_major_slice_mut(&mut self.dxx, p, p);
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

    /// The dedicated AVX2 + FMA kernel (`syrk`): the lower triangle of E[x x^T] and, as two
    /// more rows of the same product, E[x], E[x y], E[y] and E[y^2], all around the shift,
    /// which the kernel subtracts as it packs the rows (from wherever they lie: `StridedRows`).
    /// Measured on the 2-core development machine (Zen 3, quiet), whole `update_batch` against
    /// numpy's X.T @ X (OpenBLAS dsyrk, 2 threads) on the same batches: p = 100, B = 1024:
    /// 5.4 M rows/s vs 5.0 M; p = 1000, B = 256 / 1024 / 4096: 85 / 86-87 / 85 k rows/s vs
    /// 73 / 83 / 84 k (`cargo bench --bench stats -- ingest`, `python3 scripts/bench_numpy.py`).
    /// faer's triangular `matmul` in `apply`, kept for other CPUs, ran at 2.6 M and 54-58 k.
    ///
    /// `Some(folded)` as `apply` answers; `None`, with nothing touched or checked, when the
    /// kernel does not run (fewer than two rows, another CPU, or the portable path forced).
    fn apply_kernel(
        &mut self,
        data: StridedRows,
        decay: f64,
        omega: &[f64],
        checked: bool,
    ) -> Option<bool> {
        let p = self.p;
        if data.rows < 2 || portable_forced() {
            return None;
        }
        // Equal row weights (plain averages: every omega_i = 1/(n+B) up to rounding) scale the
        // product instead of the rows; otherwise the rows are scaled by sqrt(omega_i).
        let (lo, hi) = weight_range(omega);
        let weights = if hi - lo <= 1e-14 * hi {
            syrk::Weights::Equal(0.5 * (lo + hi))
        } else {
            syrk::Weights::Rows(omega)
        };
        let mut extra = vec![0.0; 2 * (p + 2)];
        match syrk::fold(
            &mut self.dxx,
            &mut extra,
            p,
            data,
            weights,
            (&self.shift_x, self.shift_y),
            decay,
            checked,
            None,
        ) {
            syrk::Folded::Done => {
                let (sum_x, sum_xy) = extra.split_at(p + 2);
                for j in 0..p {
                    self.dx[j] = decay * self.dx[j] + sum_x[j];
                    self.dxy[j] = decay * self.dxy[j] + sum_xy[j];
                }
                self.dy = decay * self.dy + sum_xy[p];
                self.dyy = decay * self.dyy + sum_xy[p + 1];
                Some(true)
            }
            syrk::Folded::NotFinite => Some(false),
            syrk::Folded::Unavailable => None,
        }
    }

    /// Folds a batch of rows wherever they lie in memory, without copying them: feature j of
    /// row i at `x[i * row_stride + j * col_stride]`, its target at `y[i * y_stride]`. A
    /// column-major (Fortran-order) block of `rows` rows has strides (1, rows); rows of a
    /// wider table (a memory-mapped C-order file whose last column is the target) have
    /// (width, 1), with `y` starting at the target column and `y_stride` = width. The result
    /// is `update_batch` on the same rows, to the bit. The fold's kernel packs the rows from
    /// there; an adaptive schedule (which reads the rows first), another CPU and single rows
    /// take a row-major copy instead. Errors as `update_batch`'s, and `StatsError::Strides`
    /// when the slices do not hold every value the strides point to.
    ///
    /// ```
    /// use ravel_core::stats::{AlphaSchedule, RunningStats, StridedRows};
    ///
    /// // Three rows in column-major order: x = [[1, 4], [2, 5], [3, 6]], y = [7, 8, 9].
    /// let table = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0];
    /// let mut a = RunningStats::new(2, AlphaSchedule::Plain);
    /// a.update_strided(StridedRows {
    ///     x: &table[..6],
    ///     row_stride: 1,
    ///     col_stride: 3,
    ///     y: &table[6..],
    ///     y_stride: 1,
    ///     rows: 3,
    /// })?;
    /// let mut b = RunningStats::new(2, AlphaSchedule::Plain);
    /// b.update_batch(&[1.0, 4.0, 2.0, 5.0, 3.0, 6.0], &[7.0, 8.0, 9.0])?;
    /// assert_eq!(a, b);
    /// # Ok::<(), ravel_core::stats::StatsError>(())
    /// ```
    pub fn update_strided(&mut self, rows: StridedRows) -> Result<(), StatsError> {
        rows.checked(self.p)?;
        if matches!(self.schedule, AlphaSchedule::Adaptive(_)) {
            let (x, y) = rows.row_major(self.p);
            return self.update_batch(&x, &y);
        }
        self.fold_whole(rows, |_| {})
    }

    /// Moves the shift to (`sx`, `sy`): with d = x - s and delta = s - sx, the moments around
    /// the new shift are E(d + delta) = E(d) + delta and
    /// E((d + delta)(d + delta)^T) = E(d d^T) + E(d) delta^T + delta E(d)^T + delta delta^T
    /// (likewise for y), exact up to rounding: the averages are normalized, E(1) = 1.
    pub fn recentre(&mut self, sx: &[f64], sy: f64) {
        let p = self.p;
        assert_eq!(sx.len(), p);
        let delta: Vec<f64> = self.shift_x.iter().zip(sx).map(|(s, n)| s - n).collect();
        let eps = self.shift_y - sy;
        if self.n > 0 {
            for j in 0..p {
                let (dj, mj) = (delta[j], self.dx[j]);
                let col = &mut self.dxx[j * p..(j + 1) * p];
                for i in j..p {
                    col[i] += self.dx[i] * dj + delta[i] * mj + delta[i] * dj;
                }
            }
            for ((xy, &d), &m) in self.dxy.iter_mut().zip(&delta).zip(&self.dx) {
                *xy += d * self.dy + m * eps + d * eps;
            }
            self.dyy += 2.0 * eps * self.dy + eps * eps;
            for (m, d) in self.dx.iter_mut().zip(&delta) {
                *m += d;
            }
            self.dy += eps;
        }
        self.shift_x.copy_from_slice(sx);
        self.shift_y = sy;
    }

    /// Combine the statistics of another shard of the same stream. For plain averages the
    /// result equals one stream that saw both shards' rows (up to rounding); for forgetting
    /// schedules the shards are weighted by their row counts.
    /// Checks statistics that came from outside (a checkpoint, a merge from another shard):
    /// array lengths match p, every value is finite, weights and variances are in range.
    /// Deserialization alone accepts any shape, and a wrong length would panic later, in the
    /// fold or the extraction, far from its cause. The message names the first problem.
    pub fn validate(&self) -> Result<(), String> {
        let p = self.p;
        let lens = [
            ("mean_x", self.dx.len(), p),
            ("sxy", self.dxy.len(), p),
            ("shift_x", self.shift_x.len(), p),
            (
                "sxx",
                self.dxx.len(),
                p.checked_mul(p).ok_or("p * p overflows")?,
            ),
        ];
        for (name, got, want) in lens {
            if got != want {
                return Err(format!("{name} has {got} values, p = {p} needs {want}"));
            }
        }
        let scalars = [
            ("weight", self.weight),
            ("mean_y", self.dy),
            ("syy", self.dyy),
            ("shift_y", self.shift_y),
        ];
        if let Some((name, v)) = scalars.iter().find(|(_, v)| !v.is_finite()) {
            return Err(format!("{name} is not finite ({v})"));
        }
        for (name, values) in [
            ("mean_x", &self.dx),
            ("sxy", &self.dxy),
            ("sxx", &self.dxx),
            ("shift_x", &self.shift_x),
        ] {
            if let Some(i) = values.iter().position(|v| !v.is_finite()) {
                return Err(format!("{name}[{i}] is not finite ({})", values[i]));
            }
        }
        if !(0.0..=1.0 + 1e-9).contains(&self.weight) || (self.n > 0) != (self.weight > 0.0) {
            return Err(format!(
                "total weight {} does not fit n = {} (it lies in (0, 1] once a row is seen)",
                self.weight, self.n
            ));
        }
        if self.dyy < 0.0 || (0..p).any(|j| self.dxx[j + j * p] < 0.0) {
            return Err("a second moment E[x_j^2] or E[y^2] is negative".into());
        }
        Ok(())
    }

    /// Folds `other`'s rows in, exactly (up to rounding): the result equals statistics that saw
    /// both shards' rows. Shards around different shifts are re-centred first. The scale-out
    /// pattern: each worker folds its partition, ships its statistics (serde), and one merge
    /// gives the model of all rows:
    ///
    /// ```
    /// use ndarray::{Array1, Array2, s};
    /// use ravel_core::solve::{Estimator, Request, penalized::Lasso};
    /// use ravel_core::stats::{AlphaSchedule, RunningStats};
    ///
    /// let x = Array2::from_shape_fn((200, 4), |(i, j)| ((i * 7 + j * 13) % 17) as f64);
    /// let y: Array1<f64> = x.column(0).to_owned() * 2.0 - x.column(2) + 1.0;
    /// let fold = |rows: std::ops::Range<usize>| {
    ///     let mut st = RunningStats::new(4, AlphaSchedule::Plain);
    ///     st.update(x.slice(s![rows.clone(), ..]), y.slice(s![rows])).map(|_| st)
    /// };
    /// let (a, b) = (fold(0..120)?, fold(120..200)?);                 // two workers
    /// let shipped: RunningStats = serde_json::from_str(&serde_json::to_string(&b)?)?;
    /// let mut all = a.clone();
    /// all.merge(&shipped)?;                                          // the reducer
    /// let model = all.extract(&Request::from(Estimator::Lasso(Lasso::k(2))))?;
    /// assert_eq!((all.n(), model.k), (200, 2));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn merge(&mut self, other: &RunningStats) -> Result<(), StatsError> {
        let (ours, theirs) = (self.n as f64, other.n as f64);
        self.merge_weighted(other, ours, theirs)
    }

    /// `merge` with the shards weighted `ours` : `theirs` instead of by their rows (fold
    /// statistics weighted by their share of a forgetting stream's weight, `folds`).
    pub fn merge_weighted(
        &mut self,
        other: &RunningStats,
        ours: f64,
        theirs: f64,
    ) -> Result<(), StatsError> {
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
        // Both shards around the same shift (ours) first.
        let moved;
        let other = if other.shift_x == self.shift_x && other.shift_y == self.shift_y {
            other
        } else {
            let mut o = other.clone();
            o.recentre(&self.shift_x, self.shift_y);
            moved = o;
            &moved
        };
        let n = self.n + other.n;
        let f = if ours + theirs > 0.0 {
            theirs / (ours + theirs)
        } else {
            other.n as f64 / n as f64
        };
        let g = 1.0 - f;
        let mix = |a: &mut f64, b: f64| *a = g * *a + f * b;
        mix(&mut self.weight, other.weight);
        mix(&mut self.dy, other.dy);
        mix(&mut self.dyy, other.dyy);
        for (a, &b) in self.dx.iter_mut().zip(&other.dx) {
            mix(a, b);
        }
        for (a, &b) in self.dxy.iter_mut().zip(&other.dxy) {
            mix(a, b);
        }
        let p = self.p;
        for j in 0..p {
            for i in j..p {
                mix(&mut self.dxx[i + j * p], other.dxx[i + j * p]);
            }
        }
        self.n = n;
        Ok(())
    }
}

/// How one chunk of a batch was folded (`RunningStats::update_batch_with`): the rows from
/// `first_row` on, `omega.len()` of them, with state <- decay * state + sum_i omega_i row_i,
/// around `shift`.
pub struct Chunk<'a> {
    /// Index in the batch of the chunk's first row.
    pub first_row: usize,
    /// What the state was multiplied by before the chunk's rows were added.
    pub decay: f64,
    /// Each row's weight.
    pub omega: &'a [f64],
    /// The shift the rows were taken around: (x's, y's).
    pub shift: (&'a [f64], f64),
}

/// The weighting of a stream as the service reports it (GET /v1/streams/{name}, /metrics).
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
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
    /// 1-based row that raised the last alarm.
    pub last_alarm_row: Option<u64>,
    /// Adaptive only: whether the detector is armed (it rests after an alarm until the new
    /// regime has enough rows), its CUSUM statistic and the alarm threshold.
    pub detector_armed: Option<bool>,
    /// The CUSUM statistic now (adaptive schedules).
    pub cusum: Option<f64>,
    /// Its alarm threshold.
    pub cusum_threshold: Option<f64>,
}

/// Validates a batch before anything is changed: dimensions and, if `finite`, finiteness and
/// the `MAX_ABS_VALUE` bound.
/// The smallest and largest row weight.
fn weight_range(omega: &[f64]) -> (f64, f64) {
    omega
        .iter()
        .fold((f64::INFINITY, 0.0f64), |(l, h), &w| (l.min(w), h.max(w)))
}

/// A batch of rows wherever they lie in memory (`RunningStats::update_strided`): feature j of
/// row i at `x[i * row_stride + j * col_stride]`, the target of row i at `y[i * y_stride]`.
#[derive(Debug, Clone, Copy)]
pub struct StridedRows<'a> {
    /// The features' values (and whatever lies between them).
    pub x: &'a [f64],
    /// From a row to the next in `x`.
    pub row_stride: usize,
    /// From a feature to the next in `x` (at least 1).
    pub col_stride: usize,
    /// The targets (and whatever lies between them).
    pub y: &'a [f64],
    /// From a target to the next in `y`.
    pub y_stride: usize,
    /// How many rows.
    pub rows: usize,
}

impl<'a> StridedRows<'a> {
    /// `StatsError::Strides` unless the slices hold every value of p features (p > 0).
    fn checked(&self, p: usize) -> Result<(), StatsError> {
        if p == 0 || !self.holds(p) {
            return Err(StatsError::Strides {
                rows: self.rows,
                row_stride: self.row_stride,
                col_stride: self.col_stride,
                y_stride: self.y_stride,
            });
        }
        Ok(())
    }

    /// The rows as row-major x and their targets (the strides were checked): borrowed when
    /// they are laid out so already, else copied.
    fn row_major(self, p: usize) -> (Cow<'a, [f64]>, Cow<'a, [f64]>) {
        let n = self.rows;
        if self.row_stride == p && self.col_stride == 1 && self.y_stride == 1 {
            return (Cow::Borrowed(&self.x[..n * p]), Cow::Borrowed(&self.y[..n]));
        }
        let x = (0..n)
            .flat_map(|i| (0..p).map(move |j| self.x[i * self.row_stride + j * self.col_stride]))
            .collect();
        let y = (0..n).map(|i| self.y[i * self.y_stride]).collect();
        (Cow::Owned(x), Cow::Owned(y))
    }
}

fn check_batch(p: usize, x: &[f64], y: &[f64], finite: bool) -> Result<usize, StatsError> {
    let rows = y.len();
    if p == 0 || x.len() != rows * p {
        if rows > 0 && x.len().is_multiple_of(rows) {
            return Err(StatsError::Dimension {
                expected: p,
                got: x.len() / rows,
            });
        }
        return Err(StatsError::Length {
            rows: x.len().checked_div(p).unwrap_or(0),
            ys: rows,
        });
    }
    if finite && !syrk::batch_finite(x, y) {
        return Err(first_non_finite(p, x, y));
    }
    Ok(rows)
}

/// The error for the first row with a NaN, an infinite value or one beyond `MAX_ABS_VALUE`
/// (the batch has one).
fn first_non_finite(p: usize, x: &[f64], y: &[f64]) -> StatsError {
    let bad = |v: &f64| v.is_nan() || v.abs() > MAX_ABS_VALUE;
    let row = x
        .chunks_exact(p)
        .zip(y)
        .position(|(row, yi)| bad(yi) || row.iter().any(bad))
        .unwrap_or(0);
    let finite = y[row].is_finite() && x[row * p..(row + 1) * p].iter().all(|v| v.is_finite());
    if finite {
        StatsError::Overflow { row }
    } else {
        StatsError::NonFinite { row }
    }
}

impl crate::gram::Moments for RunningStats {
    fn n(&self) -> u64 {
        self.n
    }
    /// n for plain averages; for a forgetting schedule the rows the averages effectively span
    /// (`effective_sample_size`, about 1/alpha for a fixed alpha), when that is fewer.
    fn effective_n(&self) -> f64 {
        (self.n as f64).min(self.effective_sample_size())
    }
    fn p(&self) -> usize {
        self.p
    }
    fn shift_x(&self) -> &[f64] {
        &self.shift_x
    }
    fn shift_y(&self) -> f64 {
        self.shift_y
    }
    fn dx(&self) -> &[f64] {
        &self.dx
    }
    fn dy(&self) -> f64 {
        self.dy
    }
    fn dxx_at(&self, i: usize, j: usize) -> f64 {
        self.dxx_at(i, j)
    }
    fn dxy(&self) -> &[f64] {
        &self.dxy
    }
    fn dyy(&self) -> f64 {
        self.dyy
    }
}

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
    /// both classes' alarms).
    pub fn drift_status(&self) -> DriftStatus {
        match self {
            Stats::Regression(s) => s.drift_status(),
            Stats::Classification(s) => {
                let mut d = s.neg.drift_status();
                d.alpha = self.current_alpha();
                d.alarms += s.pos.drift_alarms();
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
    /// The Gram problem of these statistics: standardized or not; classification weighs the
    /// positives by `w_pos` and the negatives by `w_neg` (003 eqs. 4-5).
    pub fn problem(
        &self,
        standardize: bool,
        w_pos: f64,
        w_neg: f64,
    ) -> Result<Problem, ProblemError> {
        match self {
            Stats::Regression(s) => Problem::regression(s, standardize),
            Stats::Classification(s) => {
                Problem::classification(&s.pos, &s.neg, w_pos, w_neg, standardize)
            }
        }
    }
}

// Tests can send a thread's batches down the portable path (faer) that CPUs without AVX2 and
// FMA take, so that path is checked against the kernel on this machine too.
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

/// Test data: a linear congruential generator of values uniform in [-1, 3), reproducible
/// from `seed` (this module's tests and `folds`').
#[cfg(test)]
pub(crate) fn uniform(seed: u64) -> impl FnMut() -> f64 {
    let mut state = seed;
    move || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((state >> 11) as f64 / (1u64 << 53) as f64) * 4.0 - 1.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strided_rows_fold_to_the_bits_of_their_row_major_copy() {
        // Column-major blocks and the rows of C- and Fortran-order tables (the target their
        // last column), under each schedule (the adaptive one takes the copy), at p where the
        // kernel splits by rows and by columns; batches of 1, 2 and 150 rows.
        let schedules = [
            AlphaSchedule::Plain,
            AlphaSchedule::Fixed { alpha: 0.01 },
            AlphaSchedule::Floor { alpha_min: 0.05 },
            AlphaSchedule::default(),
        ];
        for p in [3usize, 40, 400] {
            let mut rnd = uniform(p as u64);
            let total = 153;
            let x: Vec<f64> = (0..total * p).map(|_| rnd()).collect();
            let y: Vec<f64> = (0..total).map(|_| rnd()).collect();
            for schedule in &schedules {
                let mut want = RunningStats::new(p, schedule.clone());
                let mut got = [(); 3].map(|_| RunningStats::new(p, schedule.clone()));
                let mut at = 0;
                for b in [1usize, 2, 150] {
                    let (xs, ys) = (&x[at * p..(at + b) * p], &y[at..at + b]);
                    want.update_batch(xs, ys).unwrap();
                    let cm: Vec<f64> = (0..p)
                        .flat_map(|j| (0..b).map(move |i| xs[i * p + j]))
                        .chain(ys.iter().copied())
                        .collect();
                    let c: Vec<f64> = (0..b)
                        .flat_map(|i| xs[i * p..(i + 1) * p].iter().chain([&ys[i]]).copied())
                        .collect();
                    let layouts = [
                        (&cm[..b * p], 1, b, &cm[b * p..], 1),
                        (&c[..], p + 1, 1, &c[p..], p + 1),
                        (&cm[..], 1, b, &cm[b * p..], 1),
                    ];
                    for (k, (xv, rs, cs, yv, ys_)) in layouts.into_iter().enumerate() {
                        got[k]
                            .update_strided(StridedRows {
                                x: xv,
                                row_stride: rs,
                                col_stride: cs,
                                y: yv,
                                y_stride: ys_,
                                rows: b,
                            })
                            .unwrap();
                    }
                    at += b;
                }
                for (k, g) in got.iter().enumerate() {
                    assert_eq!(g, &want, "p = {p}, {schedule:?}, layout {k}");
                }
            }
            // A NaN: the error of the row-major batch, nothing folded.
            let mut bad = x[..50 * p].to_vec();
            bad[17 * p + p / 2] = f64::NAN;
            let cm: Vec<f64> = (0..p)
                .flat_map(|j| (0..50).map(|i| bad[i * p + j]).collect::<Vec<_>>())
                .collect();
            let mut a = RunningStats::new(p, AlphaSchedule::Plain);
            a.update_batch(&x[..p], &y[..1]).unwrap();
            let before = a.clone();
            let e = a.update_strided(StridedRows {
                x: &cm,
                row_stride: 1,
                col_stride: 50,
                y: &y[..50],
                y_stride: 1,
                rows: 50,
            });
            let want = before.clone().update_batch(&bad, &y[..50]);
            assert_eq!(e.unwrap_err().to_string(), want.unwrap_err().to_string());
            assert_eq!(a, before);
            // Slices that do not hold the rows: an error, nothing read past them.
            for (xl, rows, cs) in [(50 * p - 1, 50, 50), (50 * p, 51, 50), (50 * p, 50, 0)] {
                let e = a.update_strided(StridedRows {
                    x: &cm[..xl],
                    row_stride: 1,
                    col_stride: cs,
                    y: &y[..60],
                    y_stride: 1,
                    rows,
                });
                assert!(matches!(e, Err(StatsError::Strides { .. })), "{e:?}");
            }
            assert_eq!(a, before);
        }
    }

    fn batch(p: usize, rows: usize, seed: u64) -> (Vec<f64>, Vec<f64>) {
        let mut next = uniform(seed);
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
