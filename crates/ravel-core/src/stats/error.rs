//! Why a row or batch is refused (`StatsError`), the bound on its values (`MAX_ABS_VALUE`) and
//! the checks that raise them before anything is folded: one place for what a batch must be,
//! shared by `RunningStats`, `ClassStats` and the fold statistics.

use super::syrk;
use crate::task::Task;

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

/// Whether every value is finite and |v| <= `MAX_ABS_VALUE`: the check a batch passes before
/// it is folded, for callers that validate values on their own (the service, message by
/// message). One branch-free pass, with AVX2 where the CPU has it (4 values a step; without
/// it, SSE2 has no 64-bit comparison and the same loop costs about 6 instructions a value).
pub fn within_limit(values: &[f64]) -> bool {
    syrk::all_finite(values)
}

/// Appends the little-endian doubles of `bytes` (8 bytes each; a trailing part is ignored) to
/// `dst` and says whether every one is within the limit (`within_limit`), in one pass: how the
/// service reads a binary message's rows and checks them.
pub fn extend_within_limit(dst: &mut Vec<f64>, bytes: &[u8]) -> bool {
    syrk::extend_within_limit(dst, bytes)
}

/// Validates a batch before anything is changed: dimensions and, if `finite`, finiteness and
/// the `MAX_ABS_VALUE` bound.
pub(super) fn check_batch(
    p: usize,
    x: &[f64],
    y: &[f64],
    finite: bool,
) -> Result<usize, StatsError> {
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
pub(super) fn first_non_finite(p: usize, x: &[f64], y: &[f64]) -> StatsError {
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
