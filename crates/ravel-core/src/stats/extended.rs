//! The statistics of small p in double-double (`crate::dd`): at most `EXTENDED_MAX_P` features,
//! every moment is kept as hi + lo, the hi parts in `RunningStats`' own fields (so every reader
//! of the doubles sees what it saw before) and the lo parts in `Low`. The fold, the merges and
//! the re-centring of these streams run in double-double; the Gram problem takes both parts
//! (`Moments::low`) and solves ordinary least squares in double-double (gram/extended.rs).
//!
//! Why: the normal equations square the design's condition number, and a residual sum of
//! squares from moments is Syy - b'Sxy, which cancels when R^2 is near 1. In doubles these cost
//! NIST's harder datasets (Wampler, Pontius, Filip) between 3 and 16 digits against a QR of the
//! rows; with the moments to about 32 digits the solve keeps a careful QR's digits, in any row
//! order (a shift far from the mean costs nothing here) and at any mean. The weights of a
//! batch are renormalized in double-double so that they and the old state's decay sum to 1:
//! the f64 weights of the schedule carry a relative error of eps, which, times the squared
//! distance of the mean from the shift, would come back at double precision in the covariance.
//!
//! What it costs: about 10 flops a product instead of one fused multiply-add, on p(p+1)/2
//! products a row; the fold of p <= 16 does not use the AVX2 kernel (docs/benchmarks.md,
//! "Extended precision"). Above 16 features the kernel's doubles are kept, unchanged.
//! Statistics that pass through centred form (time windows, `centred`) come back without lo
//! parts (zeros: the doubles alone, as before), which is consistent, only less precise.

use super::portable::weight_range;
use super::{RunningStats, syrk};
use crate::dd::Dd;

/// One moment as a double-double from its two parts.
#[inline]
fn dd(hi: f64, lo: f64) -> Dd {
    Dd { hi, lo }
}

/// Every moment of `s` in double-double (lower triangle of dxx packed column by column), or
/// None without lo parts.
struct Full {
    dx: Vec<Dd>,
    dy: Dd,
    dxx: Vec<Dd>,
    dxy: Vec<Dd>,
    dyy: Dd,
}

impl RunningStats {
    /// The moments in double-double (None above `EXTENDED_MAX_P`).
    fn full(&self) -> Option<Full> {
        let low = self.low.as_ref()?;
        let p = self.p;
        let mut dxx = Vec::with_capacity(p * (p + 1) / 2);
        for j in 0..p {
            for i in j..p {
                dxx.push(dd(self.dxx[i + j * p], low.dxx[i + j * p]));
            }
        }
        Some(Full {
            dx: (0..p).map(|j| dd(self.dx[j], low.dx[j])).collect(),
            dy: dd(self.dy, low.dy),
            dxx,
            dxy: (0..p).map(|j| dd(self.dxy[j], low.dxy[j])).collect(),
            dyy: dd(self.dyy, low.dyy),
        })
    }

    /// Writes moments back as hi and lo parts.
    fn store(&mut self, f: &Full) {
        let p = self.p;
        let Some(low) = self.low.as_mut() else {
            return;
        };
        let mut at = 0;
        for j in 0..p {
            for i in j..p {
                (self.dxx[i + j * p], low.dxx[i + j * p]) = (f.dxx[at].hi, f.dxx[at].lo);
                at += 1;
            }
        }
        for j in 0..p {
            (self.dx[j], low.dx[j]) = (f.dx[j].hi, f.dx[j].lo);
            (self.dxy[j], low.dxy[j]) = (f.dxy[j].hi, f.dxy[j].lo);
        }
        (self.dy, low.dy) = (f.dy.hi, f.dy.lo);
        (self.dyy, low.dyy) = (f.dyy.hi, f.dyy.lo);
    }

    /// `apply` in double-double (statistics with lo parts): state <- decay * state +
    /// sum_i omega_i (row_i - shift) (row_i - shift)^T, the differences from the shift exact,
    /// the weights renormalized so that they and the decay sum to 1 (module header). Unless
    /// `checked`, returns false without touching anything if a value is NaN or infinite.
    pub(super) fn apply_extended(
        &mut self,
        x: &[f64],
        y: &[f64],
        decay: f64,
        omega: &[f64],
        checked: bool,
    ) -> bool {
        if !checked && !syrk::batch_finite(x, y) {
            return false;
        }
        let Some(mut f) = self.full() else {
            return false;
        };
        let p = self.p;
        // Plain averages (n rows, then B weights 1 / (n + B)): the exact weights, not their
        // doubles, which carry the rounding of the schedule's products (up to B eps apart)
        // and would weigh the rows apart (a reweighted data set: its variance moves at double
        // precision). Any weights within 1e-9 of those are plain averages in intent.
        let (n, rows) = (self.n as f64, omega.len() as f64);
        let (lo, hi) = weight_range(omega);
        let near = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b;
        let plain = near(lo, 1.0 / (n + rows))
            && near(hi, 1.0 / (n + rows))
            && (near(decay, n / (n + rows)) || (n == 0.0 && decay == 0.0));
        let total = omega.iter().fold(Dd::from(decay), |t, &w| t + Dd::from(w));
        let exact_share = Dd::ONE / Dd::from(n + rows);
        let share = |w: f64| {
            if plain {
                exact_share
            } else {
                Dd::from(w) / total
            }
        };
        let decay = if plain {
            Dd::from(n) / Dd::from(n + rows)
        } else {
            Dd::from(decay) / total
        };
        for v in
            f.dx.iter_mut()
                .chain(f.dxy.iter_mut())
                .chain(f.dxx.iter_mut())
        {
            *v = *v * decay;
        }
        f.dy = f.dy * decay;
        f.dyy = f.dyy * decay;
        let mut d = vec![Dd::ZERO; p];
        let mut a = vec![Dd::ZERO; p];
        for (row, (&yi, &w)) in x.chunks_exact(p).zip(y.iter().zip(omega)) {
            let w = share(w);
            for j in 0..p {
                d[j] = Dd::diff(row[j], self.shift_x[j]);
                a[j] = d[j] * w;
            }
            let e = Dd::diff(yi, self.shift_y);
            let we = e * w;
            f.dy = f.dy + we;
            f.dyy = f.dyy + we * e;
            let mut at = 0;
            #[allow(clippy::needless_range_loop)] // the moments' index, as in the formulas
            for j in 0..p {
                f.dx[j] = f.dx[j] + a[j];
                f.dxy[j] = f.dxy[j] + a[j] * e;
                for i in j..p {
                    f.dxx[at] = f.dxx[at] + a[i] * d[j];
                    at += 1;
                }
            }
        }
        self.store(&f);
        true
    }

    /// `recentre` in double-double: with delta = s - sx exact, the moments around sx are
    /// E(d + delta) and E((d + delta)(d + delta)^T) (merge.rs). False without lo parts.
    pub(super) fn recentre_extended(&mut self, sx: &[f64], sy: f64) -> bool {
        let Some(mut f) = self.full() else {
            return false;
        };
        let p = self.p;
        if self.n > 0 {
            let delta: Vec<Dd> = (0..p).map(|j| Dd::diff(self.shift_x[j], sx[j])).collect();
            let eps = Dd::diff(self.shift_y, sy);
            let mut at = 0;
            for j in 0..p {
                for i in j..p {
                    f.dxx[at] =
                        f.dxx[at] + f.dx[i] * delta[j] + delta[i] * f.dx[j] + delta[i] * delta[j];
                    at += 1;
                }
            }
            #[allow(clippy::needless_range_loop)]
            for j in 0..p {
                f.dxy[j] = f.dxy[j] + delta[j] * f.dy + f.dx[j] * eps + delta[j] * eps;
            }
            f.dyy = f.dyy + (eps * f.dy).mul_f64(2.0) + eps * eps;
            #[allow(clippy::needless_range_loop)]
            for j in 0..p {
                f.dx[j] = f.dx[j] + delta[j];
            }
            f.dy = f.dy + eps;
            self.store(&f);
        }
        self.shift_x.copy_from_slice(sx);
        self.shift_y = sy;
        true
    }

    /// The moments of `merge_weighted` in double-double: self <- g self + f other with
    /// f = theirs / (ours + theirs) and g = 1 - f, both shards around the same shift. False
    /// (nothing touched) when either has no lo parts.
    pub(super) fn mix_extended(&mut self, other: &RunningStats, ours: f64, theirs: f64) -> bool {
        let (Some(mut a), Some(b)) = (self.full(), other.full()) else {
            return false;
        };
        let f = if ours + theirs > 0.0 {
            Dd::from(theirs) / (Dd::from(ours) + Dd::from(theirs))
        } else {
            Dd::from(other.n as f64) / Dd::from((self.n + other.n) as f64)
        };
        let g = Dd::ONE - f;
        let mix = |x: &mut Dd, y: Dd| *x = *x * g + y * f;
        for (x, &y) in a.dx.iter_mut().zip(&b.dx) {
            mix(x, y);
        }
        for (x, &y) in a.dxy.iter_mut().zip(&b.dxy) {
            mix(x, y);
        }
        for (x, &y) in a.dxx.iter_mut().zip(&b.dxx) {
            mix(x, y);
        }
        mix(&mut a.dy, b.dy);
        mix(&mut a.dyy, b.dyy);
        self.store(&a);
        true
    }
}

#[cfg(test)]
mod tests {
    use crate::dd::Dd;
    use crate::gram::Moments;
    use crate::stats::{AlphaSchedule, RunningStats};

    /// Var(x) of the rows in double-double from the stored parts.
    fn var_dd(s: &RunningStats) -> f64 {
        let low = s.low().expect("lo parts");
        let dx = Dd {
            hi: s.dx()[0],
            lo: low.dx[0],
        };
        let dxx = Dd {
            hi: s.dxx_at(0, 0),
            lo: low.dxx[0],
        };
        (dxx - dx * dx).to_f64()
    }

    #[test]
    fn a_large_mean_and_any_row_order_keep_the_variance_to_the_last_digit() {
        // Rows 1e9 + k for k = 0..1000 (and y = the same): variance (n^2 - 1)/12 exactly.
        let n = 1000usize;
        let x: Vec<f64> = (0..n).map(|k| 1e9 + k as f64).collect();
        let want = ((n * n - 1) as f64) / 12.0;
        for order in [false, true] {
            let mut rows = x.clone();
            if order {
                rows.reverse();
            }
            let mut s = RunningStats::new(1, AlphaSchedule::Plain);
            for chunk in rows.chunks(37) {
                s.update_batch(chunk, chunk).unwrap();
            }
            assert_eq!(var_dd(&s), want, "reversed: {order}");
            // Merged halves, and a shard around another shift, give the same.
            let (mut a, mut b) = (
                RunningStats::new(1, AlphaSchedule::Plain),
                RunningStats::new(1, AlphaSchedule::Plain),
            );
            a.update_batch(&rows[..300], &rows[..300]).unwrap();
            b.update_batch(&rows[300..], &rows[300..]).unwrap();
            a.merge(&b).unwrap();
            assert_eq!(var_dd(&a), want);
            assert!((a.var_y() - want).abs() <= 1e-12 * want);
        }
    }

    #[test]
    fn statistics_stored_without_low_parts_load_and_fold_on() {
        let x: Vec<f64> = (0..60).map(|i| 1e6 + (i as f64 * 0.7).sin()).collect();
        let y: Vec<f64> = (0..20).map(|i| (i as f64).cos()).collect();
        let mut s = RunningStats::new(3, AlphaSchedule::Plain);
        s.update_batch(&x, &y).unwrap();
        let stored = serde_json::to_value(&s).unwrap();
        let back: RunningStats = serde_json::from_value(stored.clone()).unwrap();
        assert_eq!(back, s, "the low parts round-trip");
        // A checkpoint written before the low parts were kept: the doubles alone.
        let mut old = stored;
        assert!(old.as_object_mut().unwrap().remove("low").is_some());
        let mut old: RunningStats = serde_json::from_value(old).unwrap();
        assert!(old.is_extended() && old.validate().is_ok());
        assert_eq!((old.n(), old.mean_x()), (s.n(), s.mean_x()));
        assert_eq!(old.low().unwrap().dxx, vec![0.0; 9]);
        old.update_batch(&x, &y).unwrap();
        s.update_batch(&x, &y).unwrap();
        for i in 0..3 {
            for j in 0..=i {
                let (a, b) = (old.cov_at(i, j), s.cov_at(i, j));
                assert!(
                    (a - b).abs() <= 1e-12 * s.cov_at(i, i),
                    "({i}, {j}): {a} vs {b}"
                );
            }
        }
    }
}
