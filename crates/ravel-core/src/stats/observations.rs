//! The ndarray boundary: rows in as `ArrayView2<f64>` / `ArrayView1<f64>` (or slices), and
//! statistics, coefficients and predictions out as `Array1` / `Array2`.
//!
//! ndarray is the array type of the Rust numerical ecosystem (linfa, ndarray-npy, polars'
//! `to_ndarray`, numpy through PyO3), so this is what the library speaks at its edge. Inside,
//! the statistics stay flat `Vec<f64>` and the factorizations stay on faer and the dedicated
//! kernel: the fold of a batch is one symmetric rank-B update by the AVX2 + FMA kernel of
//! `stats/syrk.rs` (faster than numpy's OpenBLAS dsyrk on the same batches, and about twice
//! faster than faer's triangular product; figures in `stats/fold.rs`), and the factorizations
//! stay faer's: Cholesky in `gram::linear` and `solve::cholesky`, eigenvalues in
//! `solve::select`. ndarray has no factorization of its own; ndarray-linalg needs a system
//! LAPACK (not measured against faer here: it would add a C dependency to a crate that has
//! none, and a copy into its layout per solve).
//!
//! A batch in standard (row-major, C) layout is handed to the kernel as the slice it already
//! is: no copy (`benches/stats.rs` checks the rate against the slice entry point). Any other
//! layout (Fortran order, a column slice, a stepped or reversed view) is copied once into
//! row-major order and then folded the same way, so every layout of the same rows gives the
//! same statistics, bit for bit. `RunningStats::update_strided` folds rows of any strides
//! without that copy (the kernel packs them from where they lie); it takes the slice and
//! the strides (`StridedRows`), e.g. `as_slice_memory_order` of a Fortran-order array.
//!
//! Coefficients and predictions as arrays are `Model::coef` and `Model::predict_rows`
//! (model.rs).
//!
//! [`Observations`] is the one trait behind `RunningStats::update`, `ClassStats::update` and
//! `Stats::update`: a row as a slice or an `ArrayView1` with its `f64` target, or a batch as
//! an `ArrayView2` (or `&Array2`) with its targets as an `ArrayView1` (or `&Array1`).

use ndarray::{Array2, ArrayBase, ArrayView1, ArrayView2, Data, Ix1, Ix2};

use super::StatsError;

/// Rows a statistics type can fold, paired with their targets `Y`: one row (`&[f64]`,
/// `&Vec<f64>`, `ArrayView1<f64>`) with one `f64`, or a batch of rows (`ArrayView2<f64>`,
/// `&Array2<f64>`) with one target per row (`ArrayView1<f64>`, `&Array1<f64>`).
///
/// `with_rows` hands the rows to `fold` as a row-major slice of `y.len()` rows and the
/// targets as a slice: standard-layout arrays as they are, other layouts after one copy.
///
/// ```
/// use ndarray::{array, ShapeBuilder, Array2};
/// use ravel_core::stats::{AlphaSchedule, RunningStats};
///
/// let x = array![[1.0, 2.0], [3.0, 5.0], [4.0, 1.0]];
/// let y = array![1.0, 2.0, 0.5];
/// let mut c = RunningStats::new(2, AlphaSchedule::Plain);
/// c.update(x.view(), y.view()).unwrap();
///
/// // The same rows in Fortran (column-major) order: copied once, same statistics.
/// let mut f = Array2::zeros((3, 2).f());
/// f.assign(&x);
/// let mut s = RunningStats::new(2, AlphaSchedule::Plain);
/// s.update(f.view(), y.view()).unwrap();
/// assert_eq!(c, s);
///
/// // One row at a time, as a slice or a 1-d view.
/// let mut r = RunningStats::new(2, AlphaSchedule::Plain);
/// r.update(&[1.0, 2.0][..], 1.0).unwrap();
/// r.update(x.row(1), 2.0).unwrap();
/// assert_eq!(r.n(), 2);
/// ```
pub trait Observations<Y> {
    /// Calls `fold` with the rows as one row-major slice and their targets; a batch whose
    /// width is not `p`, or whose targets do not match its rows, is refused before.
    fn with_rows<R>(
        self,
        p: usize,
        y: Y,
        fold: impl FnOnce(&[f64], &[f64]) -> Result<R, StatsError>,
    ) -> Result<R, StatsError>;
}

impl Observations<f64> for &[f64] {
    fn with_rows<R>(
        self,
        _p: usize,
        y: f64,
        fold: impl FnOnce(&[f64], &[f64]) -> Result<R, StatsError>,
    ) -> Result<R, StatsError> {
        fold(self, std::slice::from_ref(&y))
    }
}

impl Observations<f64> for &Vec<f64> {
    fn with_rows<R>(
        self,
        p: usize,
        y: f64,
        fold: impl FnOnce(&[f64], &[f64]) -> Result<R, StatsError>,
    ) -> Result<R, StatsError> {
        self.as_slice().with_rows(p, y, fold)
    }
}

impl Observations<f64> for ArrayView1<'_, f64> {
    fn with_rows<R>(
        self,
        _p: usize,
        y: f64,
        fold: impl FnOnce(&[f64], &[f64]) -> Result<R, StatsError>,
    ) -> Result<R, StatsError> {
        let row = self.as_standard_layout();
        match row.as_slice() {
            Some(x) => fold(x, std::slice::from_ref(&y)),
            None => unreachable!("an owned standard-layout array is contiguous"),
        }
    }
}

impl<'y> Observations<ArrayView1<'y, f64>> for ArrayView2<'_, f64> {
    fn with_rows<R>(
        self,
        p: usize,
        y: ArrayView1<'y, f64>,
        fold: impl FnOnce(&[f64], &[f64]) -> Result<R, StatsError>,
    ) -> Result<R, StatsError> {
        if self.ncols() != p {
            return Err(StatsError::Dimension {
                expected: p,
                got: self.ncols(),
            });
        }
        if self.nrows() != y.len() {
            return Err(StatsError::Length {
                rows: self.nrows(),
                ys: y.len(),
            });
        }
        let x = self.as_standard_layout();
        let y = y.as_standard_layout();
        // Standard layout: `as_standard_layout` borrowed, `as_slice` is the caller's memory.
        match (x.as_slice(), y.as_slice()) {
            (Some(xs), Some(ys)) => fold(xs, ys),
            _ => unreachable!("as_standard_layout is contiguous"),
        }
    }
}

impl<'a, S, T> Observations<&'a ArrayBase<T, Ix1>> for &'a ArrayBase<S, Ix2>
where
    S: Data<Elem = f64>,
    T: Data<Elem = f64>,
{
    fn with_rows<R>(
        self,
        p: usize,
        y: &'a ArrayBase<T, Ix1>,
        fold: impl FnOnce(&[f64], &[f64]) -> Result<R, StatsError>,
    ) -> Result<R, StatsError> {
        self.view().with_rows(p, y.view(), fold)
    }
}

/// A slice of `p * p` values in column-major order as a p x p array (symmetric matrices,
/// where the order does not matter).
pub(crate) fn square(p: usize, values: Vec<f64>) -> Array2<f64> {
    Array2::from_shape_vec((p, p), values).expect("p * p values")
}
