//! How a batch is folded into `RunningStats`: the rows' weights under the schedule
//! (`fold_weights`), the shift taken from the stream's first batch and moved with its mean
//! (`central`, `follow_mean`), the adaptive schedule's cuts
//! (`update_batch_with`, `Chunk`), rows in any layout (`update_strided`), and the choice between
//! the AVX2 + FMA kernel (`syrk`), its portable twin (`portable`) and the double-double fold
//! of small p (`extended`).

use super::error::{check_batch, first_non_finite};
use super::portable::{portable_forced, weight_range};
use super::{AlphaSchedule, RunningStats, StatsError, StridedRows, syrk};

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

impl RunningStats {
    /// Fold a mini-batch in: `x` is row-major, `y.len()` rows of p features. One symmetric
    /// rank-B update of E[x x^T]; the result equals B calls of `update` up to rounding.
    pub fn update_batch(&mut self, x: &[f64], y: &[f64]) -> Result<(), StatsError> {
        self.fold_batch(x, y, false, |_| {})
    }

    /// `update_batch` for rows whose every value the caller has already checked with
    /// `within_limit` (the service checks each message as it decodes it, to refuse that
    /// message alone): the batch is not scanned a second time (docs/benchmarks.md, "Binary
    /// mini-batches"). The dimensions are still checked. The same
    /// bits as `update_batch` on the same rows; should a value beyond the limit come through
    /// anyway (the caller's bug), the moments may become infinite or NaN, which `is_finite`
    /// tells.
    pub fn update_batch_validated(&mut self, x: &[f64], y: &[f64]) -> Result<(), StatsError> {
        self.fold_batch(x, y, true, |_| {})
    }

    /// `update_batch`, telling `each` how every chunk of the batch was weighted once it is
    /// folded (the decay of the old state and each row's weight): fold statistics follow the
    /// stream's own weights with it (`folds`). A refused batch calls it for nothing.
    pub fn update_batch_with(
        &mut self,
        x: &[f64],
        y: &[f64],
        each: impl FnMut(Chunk<'_>),
    ) -> Result<(), StatsError> {
        self.fold_batch(x, y, false, each)
    }

    /// `update_batch_with`; `validated`: the caller checked every value (no scan here).
    fn fold_batch(
        &mut self,
        x: &[f64],
        y: &[f64],
        validated: bool,
        mut each: impl FnMut(Chunk<'_>),
    ) -> Result<(), StatsError> {
        // An adaptive schedule reads the rows before they are folded: check them first. The
        // others fold the whole batch at once, and the fold checks it on its way (`apply`).
        let adaptive = matches!(self.schedule, AlphaSchedule::Adaptive(_));
        let rows = check_batch(self.p, x, y, adaptive && !validated)?;
        let p = self.p;
        if !adaptive {
            return self.fold_whole(StridedRows::contiguous(p, x, y), validated, each);
        }
        // The first batch's central values become the shift (`central`): empty statistics
        // hold no moments, so the shift can change freely.
        if self.n == 0 && rows > 0 {
            (self.shift_x, self.shift_y) = central(&StridedRows::contiguous(p, x, y), p);
        } else {
            self.follow_mean();
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
    /// batch's central values become the shift (`central`); a refused batch (a value that is not finite, or
    /// beyond `MAX_ABS_VALUE`) leaves the weight and the shift as they were.
    fn fold_whole(
        &mut self,
        data: StridedRows,
        checked: bool,
        mut each: impl FnMut(Chunk<'_>),
    ) -> Result<(), StatsError> {
        let (p, rows) = (self.p, data.rows);
        if rows == 0 {
            return Ok(());
        }
        // Empty statistics hold no moments, so the shift can change freely.
        let old_shift = (self.n == 0).then(|| (self.shift_x.clone(), self.shift_y));
        if old_shift.is_some() {
            (self.shift_x, self.shift_y) = central(&data, p);
        } else {
            self.follow_mean();
        }
        let alphas = self.schedule.alphas_for_batch(self.n, rows, &[], &[]);
        let (weight, sum_sq) = (self.weight, self.sum_sq_shares);
        let (decay, omega) = self.fold_weights(&alphas);
        let folded = if self.low.is_some() {
            let (x, y) = data.row_major(p);
            self.apply_extended(&x, &y, decay, &omega, checked)
        } else {
            match self.apply_kernel(data, decay, &omega, checked) {
                Some(folded) => folded,
                None => {
                    let (x, y) = data.row_major(p);
                    self.apply_portable(&x, &y, decay, &omega, checked)
                }
            }
        };
        if !folded {
            (self.weight, self.sum_sq_shares) = (weight, sum_sq);
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

    /// Moves the shift to the mean (rounded) when the mean has moved further than one standard
    /// deviation from it in some column, x's or y's: the fold's rounding is eps E[(x - s)^2] =
    /// eps (Var + (mean - s)^2), so this keeps it within twice the variance's own, whatever
    /// the first rows were and however the stream drifts. O(p) to check; the O(p^2) move is
    /// rare (once after a first batch of a single row, then only when the data drift). A
    /// constant column keeps its shift (its E[x - s] is exactly 0). The double-double moments
    /// of small p do not need it (stats/extended.rs).
    fn follow_mean(&mut self) {
        use crate::gram::Moments;
        if self.n == 0 || self.low.is_some() {
            return;
        }
        let far = |d: f64, var: f64| d * d > var.max(0.0);
        let moved =
            (0..self.p).any(|j| far(self.dx[j], self.cov_at(j, j))) || far(self.dy, self.var_y());
        if moved {
            let sx: Vec<f64> = self.mean_x();
            let sy = self.mean_y();
            self.recentre(&sx, sy);
        }
    }

    /// Turns raw alphas into (decay of the old state, weight of each row), tracking W so the
    /// averages stay normalized: state <- decay * state + sum_i omega_i * row_i.
    fn fold_weights(&mut self, alphas: &[f64]) -> (f64, Vec<f64>) {
        let mut eff = Vec::with_capacity(alphas.len());
        let mut w = self.weight;
        let mut sq = self.sum_sq_shares;
        for &a in alphas {
            w = (1.0 - a) * w + a;
            let e = if w > 0.0 { a / w } else { 1.0 };
            // Every earlier row's share shrinks by 1 - e, the new row's is e.
            sq = (1.0 - e) * (1.0 - e) * sq + e * e;
            eff.push(e);
        }
        self.weight = w;
        self.sum_sq_shares = sq;
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
    pub(super) fn apply(
        &mut self,
        x: &[f64],
        y: &[f64],
        decay: f64,
        omega: &[f64],
        checked: bool,
    ) -> bool {
        if self.low.is_some() {
            return self.apply_extended(x, y, decay, omega, checked);
        }
        let data = StridedRows::contiguous(self.p, x, y);
        match self.apply_kernel(data, decay, omega, checked) {
            Some(folded) => folded,
            None => self.apply_portable(x, y, decay, omega, checked),
        }
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
        self.fold_whole(rows, false, |_| {})
    }
}

/// The shift of a stream's first batch: in each column (and y) the batch's value nearest to
/// the batch's mean. A value of the data, so a constant column is exactly 0 after the shift;
/// near the mean, so the first rows' order does not matter (the first row of a batch sorted
/// by a column, Wampler's x^5 reversed, lies 3 standard deviations from the mean: a tenth
/// of the digits of the fold's products, issue 58). Two passes over the batch, once a stream.
fn central(data: &StridedRows, p: usize) -> (Vec<f64>, f64) {
    let rows = data.rows;
    let at = |i: usize, j: usize| data.x[i * data.row_stride + j * data.col_stride];
    let nearest = |value: &dyn Fn(usize) -> f64| {
        let mean = (0..rows).map(value).sum::<f64>() / rows as f64;
        let mut best = value(0);
        for i in 1..rows {
            let v = value(i);
            if (v - mean).abs() < (best - mean).abs() {
                best = v;
            }
        }
        best
    };
    let sx = (0..p).map(|j| nearest(&|i| at(i, j))).collect();
    let sy = nearest(&|i| data.y[i * data.y_stride]);
    (sx, sy)
}
