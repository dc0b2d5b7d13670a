//! `ravel_lm._native`: the native half of the Python package, PyO3 bindings of ravel-core.
//!
//! One class, `Stats`: a stream's running-average statistics (ravel-core's `Stats`, either
//! task) that numpy rows are folded into, merged with another shard's, widened by new
//! features, serialized (pickling, the service's statistics route) and asked for models and
//! paths. Requests and models cross the boundary as the JSON the service's HTTP API speaks
//! (`{"method": "lasso", "k": 10}` in, a model document out), so the Python estimators, the
//! client and the service share one vocabulary and one set of checks. Everything else (the
//! scikit-learn and River interfaces, the HTTP client) is plain Python in `ravel_lm/`.
//! `FoldStats` (folds.rs) keeps K-fold statistics beside them for `select="cv"`.

mod folds;

use numpy::{PyArray1, PyArray2, PyReadonlyArray1, PyReadonlyArray2};
use numpy::{PyUntypedArrayMethods, ndarray::Array2};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use ravel_core::solve::Request;
use ravel_core::stats::{AlphaSchedule, StatsError, StridedRows};
use ravel_core::{Stats, Task};

/// Rows folded at a time: the fold's blocked kernel streams a batch once per tile of the
/// moments, so a batch that does not fit in cache is read from memory many times (one call
/// of 1M rows x p = 100 took 2.7 CPU s against 0.37 in blocks of 1,024 or 10,000 rows).
/// 1,024 is `ravel fit --batch`'s default, so a numpy array folds as `ravel fit` folds the
/// same rows from a file.
pub(crate) const BLOCK_ROWS: usize = 1024;

/// The running statistics of one stream or data set (`ravel_core::Stats`).
#[pyclass(module = "ravel_lm._native", name = "Stats")]
#[derive(Clone)]
pub(crate) struct PyStats {
    pub(crate) inner: Stats,
}

pub(crate) fn value_error(e: impl std::fmt::Display) -> PyErr {
    PyValueError::new_err(e.to_string())
}

/// Where a 2-D float64 array's rows lie: (row stride, column stride) in values, for the
/// two layouts numpy arrays without gaps have (C: row-major, Fortran: column-major).
fn strides_of(x: &PyReadonlyArray2<'_, f64>) -> PyResult<(usize, usize)> {
    let (n, p) = (x.shape()[0], x.shape()[1]);
    if x.is_c_contiguous() {
        Ok((p, 1))
    } else if x.is_fortran_contiguous() {
        Ok((1, n))
    } else {
        Err(value_error(
            "X must be a contiguous array (C or Fortran order): np.ascontiguousarray(X)",
        ))
    }
}

/// X's values where they lie with its strides (row, column), and y's, for a fold: both
/// contiguous, or a ValueError that says how to make them so.
pub(crate) fn rows_of<'a>(
    x: &'a PyReadonlyArray2<'_, f64>,
    y: &'a PyReadonlyArray1<'_, f64>,
) -> PyResult<(usize, usize, &'a [f64], &'a [f64])> {
    let (row_stride, col_stride) = strides_of(x)?;
    let xs = x.as_slice().map_err(value_error)?;
    let ys = y
        .as_slice()
        .map_err(|_| value_error("y must be a contiguous array: np.ascontiguousarray(y)"))?;
    Ok((row_stride, col_stride, xs, ys))
}

#[pymethods]
impl PyStats {
    /// Empty statistics of `p` features; `task` "regression" or "classification", `schedule`
    /// as `ravel fit --alpha` spells it ("plain", "fixed:0.01", "floor:0.001", "adaptive").
    #[new]
    #[pyo3(signature = (p, task = "regression", schedule = "plain"))]
    fn new(p: usize, task: &str, schedule: &str) -> PyResult<Self> {
        let task: Task = task.parse().map_err(value_error)?;
        let schedule: AlphaSchedule = schedule.parse().map_err(value_error)?;
        Ok(PyStats {
            inner: Stats::new(task, p, schedule),
        })
    }

    /// Folds rows in: `x` (n x p, float64, C or Fortran order, read where it lies) and `y`
    /// (n, float64; labels +1 / -1 or 0 for classification), in blocks of `BLOCK_ROWS` rows
    /// as `ravel fit` reads a file, without the GIL. Nothing changes when a row is refused
    /// (NaN, Inf, beyond 1e150, a bad label).
    fn update(
        &mut self,
        py: Python<'_>,
        x: PyReadonlyArray2<'_, f64>,
        y: PyReadonlyArray1<'_, f64>,
    ) -> PyResult<()> {
        let (rows, p) = (x.shape()[0], x.shape()[1]);
        if p != self.inner.p() {
            return Err(value_error(format!(
                "X has {p} features, but the statistics have {}",
                self.inner.p()
            )));
        }
        if y.len() != rows {
            return Err(value_error(format!(
                "X has {rows} rows but y has {} values",
                y.len()
            )));
        }
        if rows == 0 {
            return Ok(());
        }
        let (row_stride, col_stride, xs, ys) = rows_of(&x, &y)?;
        let inner = &mut self.inner;
        py.detach(|| {
            // One block is refused whole by the fold itself; with more, a refused block puts
            // back the statistics as they were (a copy of O(p^2) against the fold's
            // O(rows p^2)).
            let backup = (rows > BLOCK_ROWS).then(|| inner.clone());
            for start in (0..rows).step_by(BLOCK_ROWS) {
                let block = BLOCK_ROWS.min(rows - start);
                let folded = if (row_stride, col_stride) == (p, 1) {
                    inner.update_batch(
                        &xs[start * p..(start + block) * p],
                        &ys[start..start + block],
                    )
                } else {
                    inner.update_strided(StridedRows {
                        x: &xs[start * row_stride..],
                        row_stride,
                        col_stride,
                        y: &ys[start..],
                        y_stride: 1,
                        rows: block,
                    })
                };
                if let Err(e) = folded {
                    if let Some(b) = backup {
                        *inner = b;
                    }
                    return Err(match e {
                        StatsError::NonFinite { row } => StatsError::NonFinite { row: start + row },
                        StatsError::Overflow { row } => StatsError::Overflow { row: start + row },
                        StatsError::Label { row, value } => StatsError::Label {
                            row: start + row,
                            value,
                        },
                        other => other,
                    });
                }
            }
            Ok(())
        })
        .map_err(value_error)
    }

    /// Folds the rows in one at a time (a rank-1 update each, as a learner's `learn_one`
    /// does), so that the result is, to the bit, that of one `update` call per row.
    fn update_rows(
        &mut self,
        py: Python<'_>,
        x: PyReadonlyArray2<'_, f64>,
        y: PyReadonlyArray1<'_, f64>,
    ) -> PyResult<()> {
        let (rows, p) = (x.shape()[0], x.shape()[1]);
        if p != self.inner.p() || y.len() != rows || !x.is_c_contiguous() {
            return Err(value_error(format!(
                "update_rows takes a C-order X of {} columns and one y per row",
                self.inner.p()
            )));
        }
        let xs = x.as_slice().map_err(value_error)?;
        let ys = y.as_slice().map_err(value_error)?;
        let inner = &mut self.inner;
        py.detach(|| {
            for (i, row) in xs.chunks_exact(p.max(1)).take(rows).enumerate() {
                inner.update_batch(row, &ys[i..i + 1]).map_err(|e| (i, e))?;
            }
            Ok(())
        })
        .map_err(|(i, e)| value_error(format!("row {i}: {e}")))
    }

    /// Adds the statistics of another shard of the same stream (same task and p): exactly
    /// the statistics of both shards' rows.
    fn merge(&mut self, other: &PyStats) -> PyResult<()> {
        self.inner.merge(&other.inner).map_err(value_error)
    }

    /// Widens to `p` features, 0 in every row seen so far.
    fn widen(&mut self, p: usize) -> PyResult<()> {
        self.inner.widen(p).map_err(value_error)
    }

    /// The model `request` (the JSON body of the service's `POST .../model`) asks for, as
    /// the service's model document (JSON); `names` labels the coefficients.
    #[pyo3(signature = (request, names = None))]
    fn model(&self, py: Python<'_>, request: &str, names: Option<Vec<String>>) -> PyResult<String> {
        let request: Request = serde_json::from_str(request).map_err(value_error)?;
        let inner = &self.inner;
        py.detach(|| {
            let model = request.model(inner, names.as_deref())?;
            serde_json::to_string(&model).map_err(|e| e.to_string().into())
        })
        .map_err(|e: Box<dyn std::error::Error + Send + Sync>| value_error(e))
    }

    /// The whole path `request` asks for (the body of `POST .../path`), as JSON.
    #[pyo3(signature = (request, names = None))]
    fn path(&self, py: Python<'_>, request: &str, names: Option<Vec<String>>) -> PyResult<String> {
        let request: Request = serde_json::from_str(request).map_err(value_error)?;
        let inner = &self.inner;
        py.detach(|| {
            let path = request.path(inner, names.as_deref())?;
            serde_json::to_string(&path).map_err(|e| e.to_string().into())
        })
        .map_err(|e: Box<dyn std::error::Error + Send + Sync>| value_error(e))
    }

    /// The statistics as JSON (what the service's statistics route and a checkpoint hold);
    /// every number round-trips exactly.
    fn to_json(&self) -> PyResult<String> {
        serde_json::to_string(&self.inner).map_err(value_error)
    }

    /// Statistics from their JSON form (`to_json`, or the `statistics` of the service's
    /// `GET /v1/streams/{name}/statistics`), validated.
    #[staticmethod]
    fn from_json(text: &str) -> PyResult<PyStats> {
        let inner: Stats = serde_json::from_str(text).map_err(value_error)?;
        inner.validate().map_err(value_error)?;
        Ok(PyStats { inner })
    }

    fn __getnewargs__(&self) -> (usize,) {
        (self.inner.p(),)
    }
    fn __getstate__(&self) -> PyResult<String> {
        self.to_json()
    }
    fn __setstate__(&mut self, state: &str) -> PyResult<()> {
        *self = PyStats::from_json(state)?;
        Ok(())
    }
    fn __copy__(&self) -> PyStats {
        self.clone()
    }
    fn __deepcopy__(&self, _memo: &Bound<'_, PyAny>) -> PyStats {
        self.clone()
    }
    fn copy(&self) -> PyStats {
        self.clone()
    }
    fn __eq__(&self, other: &PyStats) -> bool {
        self.inner == other.inner
    }
    fn __repr__(&self) -> String {
        format!(
            "Stats(task={}, p={}, n={}, schedule={})",
            self.inner.task(),
            self.inner.p(),
            self.inner.n(),
            self.inner.schedule()
        )
    }

    /// Rows folded in.
    #[getter]
    fn n(&self) -> u64 {
        self.inner.n()
    }
    /// Features.
    #[getter]
    fn p(&self) -> usize {
        self.inner.p()
    }
    /// "regression" or "classification".
    #[getter]
    fn task(&self) -> &'static str {
        self.inner.task().name()
    }
    /// The weight schedule, as `--alpha` spells it.
    #[getter]
    fn schedule(&self) -> String {
        self.inner.schedule().to_string()
    }

    /// E[x] (regression statistics).
    fn mean_x<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray1<f64>>> {
        Ok(PyArray1::from_vec(py, self.regression()?.mean_x()))
    }
    /// E[y] (regression statistics).
    fn mean_y(&self) -> PyResult<f64> {
        Ok(self.regression()?.mean_y())
    }
    /// The population covariance of x, p x p (regression statistics).
    fn covariance<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray2<f64>>> {
        let cov = self.regression()?.covariance();
        let p = cov.nrows();
        let values: Vec<f64> = cov.iter().copied().collect();
        let square = Array2::from_shape_vec((p, p), values).map_err(value_error)?;
        Ok(PyArray2::from_owned_array(py, square))
    }
    /// Cov(x_j, y) for every feature (regression statistics).
    fn cov_xy<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyArray1<f64>>> {
        Ok(PyArray1::from_vec(
            py,
            self.regression()?.cov_xy_array().to_vec(),
        ))
    }
}

impl PyStats {
    fn regression(&self) -> PyResult<&ravel_core::RunningStats> {
        match &self.inner {
            Stats::Regression(s) => Ok(s),
            Stats::Classification(_) => Err(value_error(
                "these are classification statistics (one set per class): ask for a model",
            )),
        }
    }
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_class::<PyStats>()?;
    m.add_class::<folds::PyFolds>()?;
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    Ok(())
}
