//! `StridedRows`, a batch of rows wherever it lies in memory (row-major, column-major, the rows
//! of a wider memory-mapped table): the checks of its strides, its row-major copy, and the
//! finiteness scan the kernel (`syrk`) runs on it before a fold.

use super::StatsError;
use super::syrk::all_finite;
use std::borrow::Cow;

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
    pub(super) fn checked(&self, p: usize) -> Result<(), StatsError> {
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
    pub(super) fn row_major(self, p: usize) -> (Cow<'a, [f64]>, Cow<'a, [f64]>) {
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

/// The kernel reads a batch's rows wherever they lie in memory (`StridedRows`: row-major
/// rows are `contiguous`; a column-major block has strides (1, its column length); rows of a
/// wider table have its width as row stride), so a memory-mapped file is folded without a
/// copy.
impl<'a> StridedRows<'a> {
    /// Row-major rows of p features and their targets.
    pub(super) fn contiguous(p: usize, x: &'a [f64], y: &'a [f64]) -> StridedRows<'a> {
        StridedRows {
            x,
            row_stride: p,
            col_stride: 1,
            y,
            y_stride: 1,
            rows: y.len(),
        }
    }

    /// Whether the slices hold every value of `rows` rows of p features.
    pub(super) fn holds(&self, p: usize) -> bool {
        let last = |len: usize, stride: usize| (len - 1).checked_mul(stride);
        if self.rows == 0 || p == 0 {
            return true;
        }
        let x_end = last(self.rows, self.row_stride)
            .zip(last(p, self.col_stride))
            .and_then(|(a, b)| a.checked_add(b));
        let y_end = last(self.rows, self.y_stride);
        self.col_stride >= 1
            && matches!(x_end, Some(e) if e < self.x.len())
            && matches!(y_end, Some(e) if e < self.y.len())
    }

    /// Whether every value of rows `r` is finite and within `MAX_ABS_VALUE` (`all_finite`),
    /// scanning whichever way the values are contiguous; many rows are scanned on all threads.
    pub(super) fn finite(&self, p: usize, r: std::ops::Range<usize>) -> bool {
        use rayon::prelude::*;
        const CHUNK: usize = 1 << 17;
        if r.is_empty() {
            return true;
        }
        let ys_ok = if self.y_stride == 1 {
            all_finite(&self.y[r.clone()])
        } else {
            r.clone().all(|i| all_finite(&[self.y[i * self.y_stride]]))
        };
        if !ys_ok {
            return false;
        }
        if self.col_stride == 1 && self.row_stride == p {
            let x = &self.x[r.start * p..r.end * p];
            return if x.len() > 2 * CHUNK {
                x.par_chunks(CHUNK).all(all_finite)
            } else {
                all_finite(x)
            };
        }
        let par = r.len() * p > 2 * CHUNK;
        if self.col_stride == 1 {
            let row = |i: usize| all_finite(&self.x[i * self.row_stride..][..p]);
            if par {
                r.into_par_iter().all(row)
            } else {
                r.into_iter().all(row)
            }
        } else if self.row_stride == 1 {
            let col = |j: usize| {
                all_finite(&self.x[j * self.col_stride + r.start..j * self.col_stride + r.end])
            };
            if par {
                (0..p).into_par_iter().all(col)
            } else {
                (0..p).all(col)
            }
        } else {
            r.into_iter().all(|i| {
                (0..p).all(|j| all_finite(&[self.x[i * self.row_stride + j * self.col_stride]]))
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::stats::{AlphaSchedule, RunningStats, StatsError, StridedRows, uniform};

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
}
