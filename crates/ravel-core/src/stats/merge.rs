//! Exact merges of shards of one stream: `recentre` moves statistics to another shift, `merge`
//! and `merge_weighted` combine two shards' moments as if one stream had seen both; `widen`
//! adds features that every row seen so far held as 0 (the Python package's learners over
//! named features, whose new names arrive mid-stream).

use super::{AlphaSchedule, ClassStats, RunningStats, Stats, StatsError};

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

impl RunningStats {
    /// Widens the statistics to `p` features: the new ones are 0 in every row seen so far,
    /// shifted by 0, so their moments are exactly 0 (as if the rows had held them all along).
    /// Refused for fewer features, and for an adaptive schedule once rows are folded (its
    /// reference model has the old p).
    pub fn widen(&mut self, p: usize) -> Result<(), String> {
        let old = self.p;
        if p < old {
            return Err(format!("cannot narrow statistics of {old} features to {p}"));
        }
        if p == old {
            return Ok(());
        }
        if self.n > 0 && matches!(self.schedule, AlphaSchedule::Adaptive(_)) {
            return Err(format!(
                "an adaptive schedule cannot take new features after {} rows (its reference \
                 model has {old}); declare every feature before the first row",
                self.n
            ));
        }
        if self.n == 0 {
            let schedule = std::mem::take(&mut self.schedule);
            let schedule = match schedule {
                AlphaSchedule::Adaptive(a) => {
                    AlphaSchedule::Adaptive(super::adaptive::Adaptive::new(a.config))
                }
                other => other,
            };
            *self = RunningStats::new(p, schedule);
            return Ok(());
        }
        let widen_square = |m: &[f64]| {
            let mut out = vec![0.0; p * p];
            for j in 0..old {
                out[j * p..j * p + old].copy_from_slice(&m[j * old..(j + 1) * old]);
            }
            out
        };
        self.dxx = widen_square(&self.dxx);
        self.dx.resize(p, 0.0);
        self.dxy.resize(p, 0.0);
        self.shift_x.resize(p, 0.0);
        // The double-double low parts widen alike while p stays small enough to keep them;
        // past `EXTENDED_MAX_P` the doubles alone go on (as every stream of that p does).
        self.low = match self.low.take() {
            Some(mut low) if p <= super::EXTENDED_MAX_P => {
                low.dxx = widen_square(&low.dxx);
                low.dx.resize(p, 0.0);
                low.dxy.resize(p, 0.0);
                Some(low)
            }
            _ => None,
        };
        self.p = p;
        Ok(())
    }
}

impl Stats {
    /// Widens either task's statistics to `p` features (`RunningStats::widen`).
    pub fn widen(&mut self, p: usize) -> Result<(), String> {
        match self {
            Stats::Regression(s) => s.widen(p),
            Stats::Classification(ClassStats { pos, neg }) => {
                pos.widen(p)?;
                neg.widen(p)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::uniform;
    use super::*;

    /// Rows folded at p, widened, then rows at p + 2: the statistics of all the rows with the
    /// new features 0 in the first ones.
    #[test]
    fn widen_equals_the_rows_with_zeros() {
        let (p, n1, n2) = (3, 40, 60);
        let mut u = uniform(7);
        let first: Vec<f64> = (0..n1 * p).map(|_| u()).collect();
        let y1: Vec<f64> = (0..n1).map(|_| u()).collect();
        let later: Vec<f64> = (0..n2 * (p + 2)).map(|_| u()).collect();
        let y2: Vec<f64> = (0..n2).map(|_| u()).collect();
        let mut widened = RunningStats::new(p, AlphaSchedule::Plain);
        widened.update_batch(&first, &y1).unwrap();
        widened.widen(p + 2).unwrap();
        widened.update_batch(&later, &y2).unwrap();
        let mut padded = RunningStats::new(p + 2, AlphaSchedule::Plain);
        let rows: Vec<f64> = first
            .chunks(p)
            .flat_map(|r| r.iter().copied().chain([0.0, 0.0]))
            .collect();
        padded.update_batch(&rows, &y1).unwrap();
        padded.update_batch(&later, &y2).unwrap();
        assert_eq!(widened.n(), padded.n());
        let (a, b) = (widened.covariance(), padded.covariance());
        assert!((&a - &b).iter().all(|d| d.abs() < 1e-13), "{a}\n{b}");
        let (a, b) = (widened.cov_xy_array(), padded.cov_xy_array());
        assert!((&a - &b).iter().all(|d| d.abs() < 1e-13), "{a}\n{b}");
        assert!(widened.widen(p).is_err());
        let mut adaptive = RunningStats::new(p, AlphaSchedule::adaptive());
        adaptive.update_batch(&first, &y1).unwrap();
        assert!(adaptive.widen(p + 1).unwrap_err().contains("adaptive"));
    }
}
