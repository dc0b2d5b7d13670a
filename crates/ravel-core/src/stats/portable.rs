//! The portable twin of the kernel (`syrk`): the same fold through faer's triangular product,
//! for CPUs without AVX2 and FMA and for single rows; tests can force it on this machine
//! (`FORCE_PORTABLE`) to check it against the kernel.

use super::{RunningStats, syrk};
use faer::linalg::matmul::triangular::{BlockStructure, matmul};
use faer::{Accum, MatMut, MatRef, Par};

impl RunningStats {
    /// `apply` without the kernel (other CPUs and single rows): the shifted rows, scaled by
    /// sqrt(omega_i) unless the weights are equal.
    pub(super) fn apply_portable(
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
}

// Tests can send a thread's batches down the portable path (faer) that CPUs without AVX2 and
// FMA take, so that path is checked against the kernel on this machine too.
#[cfg(test)]
thread_local! {
    static FORCE_PORTABLE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// The smallest and largest row weight.
pub(super) fn weight_range(omega: &[f64]) -> (f64, f64) {
    omega
        .iter()
        .fold((f64::INFINITY, 0.0f64), |(l, h), &w| (l.min(w), h.max(w)))
}

#[cfg(test)]
pub(super) fn portable_forced() -> bool {
    FORCE_PORTABLE.with(|f| f.get())
}

#[cfg(not(test))]
#[inline(always)]
pub(super) fn portable_forced() -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::{AlphaSchedule, uniform};

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

    /// Rows the caller validated fold to the same bits without the fold's scan, on the kernel
    /// and the portable path, under every schedule (the adaptive one checks nothing first).
    #[test]
    fn validated_batches_fold_to_the_same_bits() {
        let schedules = [
            AlphaSchedule::Plain,
            AlphaSchedule::Fixed { alpha: 0.01 },
            AlphaSchedule::adaptive(),
        ];
        for portable in [false, true] {
            for p in [1, 13, 100] {
                for schedule in &schedules {
                    FORCE_PORTABLE.with(|f| f.set(portable));
                    let mut a = RunningStats::new(p, schedule.clone());
                    let mut b = RunningStats::new(p, schedule.clone());
                    for (i, rows) in [1, 2, 37, 300, 5].into_iter().enumerate() {
                        let (x, y) = batch(p, rows, 11 + i as u64);
                        a.update_batch(&x, &y).unwrap();
                        b.update_batch_validated(&x, &y).unwrap();
                    }
                    FORCE_PORTABLE.with(|f| f.set(false));
                    assert_eq!(a, b, "p={p} {schedule:?} portable={portable}");
                    // The dimensions are still checked.
                    assert!(b.update_batch_validated(&[1.0; 3], &[1.0]).is_err());
                }
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
