//! Exact merges of shards of one stream: `recentre` moves statistics to another shift, `merge`
//! and `merge_weighted` combine two shards' moments as if one stream had seen both.

use super::{RunningStats, StatsError};

impl RunningStats {
    /// Moves the shift to (`sx`, `sy`): with d = x - s and delta = s - sx, the moments around
    /// the new shift are E(d + delta) = E(d) + delta and
    /// E((d + delta)(d + delta)^T) = E(d d^T) + E(d) delta^T + delta E(d)^T + delta delta^T
    /// (likewise for y), exact up to rounding: the averages are normalized, E(1) = 1.
    pub fn recentre(&mut self, sx: &[f64], sy: f64) {
        let p = self.p;
        assert_eq!(sx.len(), p);
        if self.recentre_extended(sx, sy) {
            return;
        }
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
        // Each shard's rows keep their shares scaled by g and f.
        self.sum_sq_shares = g * g * self.sum_sq_shares + f * f * other.sum_sq_shares;
        if self.mix_extended(other, ours, theirs) {
            self.n = n;
            return Ok(());
        }
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
