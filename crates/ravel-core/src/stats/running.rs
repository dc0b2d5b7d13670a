//! `RunningStats`, the running averages of one stream: the struct, its accessors (raw and
//! shifted moments, ndarray views, the drift report) and its `Moments` for the Gram problem.
//! How rows are folded in (`fold`), merged (`merge`) and stored (`stored`) live beside it.

use super::low::Low;
use super::observations;
use super::stored::StoredStats;
use super::{AlphaSchedule, Observations, StatsError};
use ndarray::{Array1, Array2};
use serde::{Deserialize, Serialize};

/// The running averages of one stream, around the shift (s, t) (see the module header). The
/// serialized names of the moments are those of the raw moments they were before the shift
/// existed: a checkpoint written then loads with s = 0 and t = 0, which is what it holds.
/// E\[x x^T\] is serialized as its lower triangle, column by column (`sxx_lower`, p(p+1)/2
/// values: half the bytes of a checkpoint or state record); the full matrix (`sxx`) of
/// earlier checkpoints still loads.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(from = "StoredStats")]
pub struct RunningStats {
    pub(super) p: usize,
    pub(super) n: u64,
    /// Total weight W (1 for plain averages once a row is seen; below 1 early in a
    /// fixed-alpha stream). Kept so the averages can stay normalized.
    pub(super) weight: f64,
    /// sum_i (w_i / W)^2 over the rows' final weights w_i: 1 / the effective sample size
    /// (Kish). 1/n for plain averages, 0 before the first row. Reported, never used by the
    /// statistics or the solvers.
    pub(super) sum_sq_shares: f64,
    /// E[x - s].
    #[serde(rename = "mean_x")]
    pub(super) dx: Vec<f64>,
    /// E[y - t].
    #[serde(rename = "mean_y")]
    pub(super) dy: f64,
    /// E[(x - s)(x - s)^T], column-major p x p; only the lower triangle (i >= j) is maintained.
    #[serde(rename = "sxx")]
    pub(super) dxx: Vec<f64>,
    /// E[(x - s)(y - t)].
    #[serde(rename = "sxy")]
    pub(super) dxy: Vec<f64>,
    /// E[(y - t)^2].
    #[serde(rename = "syy")]
    pub(super) dyy: f64,
    pub(super) schedule: AlphaSchedule,
    /// The shift s of x and t of y (the first batch's central values, moved with the mean:
    /// fold.rs); 0 before the first row.
    pub(super) shift_x: Vec<f64>,
    pub(super) shift_y: f64,
    /// The low-order parts of the moments, for p <= `EXTENDED_MAX_P` (stats/extended.rs):
    /// each moment is then the double-double (field, its low part).
    pub(super) low: Option<Box<Low>>,
}

impl RunningStats {
    /// Empty statistics of p features under `schedule`.
    pub fn new(p: usize, schedule: AlphaSchedule) -> Self {
        RunningStats {
            p,
            n: 0,
            weight: 0.0,
            sum_sq_shares: 0.0,
            dx: vec![0.0; p],
            dy: 0.0,
            dxx: vec![0.0; p * p],
            dxy: vec![0.0; p],
            dyy: 0.0,
            schedule,
            shift_x: vec![0.0; p],
            shift_y: 0.0,
            low: Low::for_p(p),
        }
    }

    /// Whether the moments are kept in double-double (p <= `EXTENDED_MAX_P`).
    pub fn is_extended(&self) -> bool {
        self.low.is_some()
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
    /// The effective sample size of the averages (Kish): (sum_i w_i)^2 / sum_i w_i^2 over the
    /// rows' final weights w_i (row i's alpha times the (1 - alpha) of every later row). n for
    /// plain averages, (2 - alpha)/alpha for a fixed alpha once n >> 1/alpha, 0 for an empty
    /// stream. The figure reported (`drift_status`); the solvers' `effective_n` is `span`.
    pub fn effective_sample_size(&self) -> f64 {
        if self.n == 0 || self.sum_sq_shares <= 0.0 {
            0.0
        } else {
            1.0 / self.sum_sq_shares
        }
    }
    /// The rows the averages span for the solvers (`Moments::effective_n`): the inverse of the
    /// normalized weight the next row will get, W'/alpha with W' = (1 - alpha) W + alpha (n + 1
    /// for plain averages, 1/alpha for a fixed alpha once n >> 1/alpha). The service reported
    /// it as the effective sample size before the Kish figure; kept as it was, so that no
    /// statistic or model changes.
    fn span(&self) -> f64 {
        let a = self.current_alpha();
        ((1.0 - a) * self.weight + a) / a
    }
    /// What `sum_sq_shares` is assumed to be for statistics stored before it was kept: exact
    /// for plain averages (1/n), and the adaptive schedule's own record when it covers every
    /// row; otherwise 1 / min(n, span), the figure reported then, which the next rows' weights
    /// wash out.
    pub(super) fn assumed_sum_sq_shares(&self) -> f64 {
        if self.n == 0 {
            return 0.0;
        }
        match &self.schedule {
            AlphaSchedule::Plain => 1.0 / self.n as f64,
            AlphaSchedule::Adaptive(a) => 1.0 / a.kish_size(self.n).max(1.0),
            _ => 1.0 / (self.n as f64).min(self.span()).max(1.0),
        }
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
}

/// The weighting of a stream as the service reports it (GET /v1/streams/{name}, /metrics).
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DriftStatus {
    /// The schedule, as `--alpha` spells it.
    pub schedule: String,
    /// Raw alpha the next row gets.
    pub alpha: f64,
    /// Effective sample size (Kish): (sum of the rows' weights)^2 / sum of their squares; n
    /// for plain averages, 0 before the first row (`RunningStats::effective_sample_size`).
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

impl crate::gram::Moments for RunningStats {
    fn n(&self) -> u64 {
        self.n
    }
    /// n for plain averages; for a forgetting schedule the rows the averages effectively span
    /// (`span`, about 1/alpha for a fixed alpha), when that is fewer.
    fn effective_n(&self) -> f64 {
        (self.n as f64).min(self.span())
    }
    fn kish_n(&self) -> f64 {
        match self.schedule {
            AlphaSchedule::Plain => self.n as f64,
            _ => self.effective_sample_size(),
        }
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
    fn low(&self) -> Option<crate::gram::LowMoments<'_>> {
        self.low.as_deref().map(Low::view)
    }
}
