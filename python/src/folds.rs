//! `ravel_lm._native.FoldStats`: K-fold statistics for `select="cv"` / `"cv_1se"` in the
//! estimators, exactly as `ravel fit --select cv --folds K` keeps them: row i (0-based over
//! every row folded in, in order) goes to fold `splitmix64(i) mod K`
//! (`ravel_core::solve::select::fold_of`), each fold is its rows' plain running averages, and
//! the CV curve of any path is computed from the folds' moments alone
//! (`ravel_core::solve::select::cross_validate`): each fold's path on the merge of the others,
//! its held-out error from its own moments, the full path on the merge of all folds. So the
//! folds, like the statistics, do not depend on how the rows were chunked.

use crate::{BLOCK_ROWS, PyStats, rows_of, value_error};
use numpy::{PyReadonlyArray1, PyReadonlyArray2, PyUntypedArrayMethods};
use pyo3::prelude::*;
use ravel_core::solve::Request;
use ravel_core::solve::select::{MAX_FOLDS, chosen_model, cross_validate, fold_of};
use ravel_core::stats::AlphaSchedule;
use ravel_core::{Stats, Task};

/// The statistics of each of K folds of the rows (plain averages).
#[pyclass(module = "ravel_lm._native", name = "FoldStats")]
#[derive(Clone)]
pub(crate) struct PyFolds {
    folds: Vec<Stats>,
}

impl PyFolds {
    /// Every fold's rows merged: the statistics of all rows.
    fn merged(&self) -> Result<Stats, String> {
        let mut total = self.folds[0].clone();
        for f in &self.folds[1..] {
            total.merge(f).map_err(|e| e.to_string())?;
        }
        Ok(total)
    }

    /// The cross-validated path `request` (select = cv or cv_1se) asks for.
    fn cv_path(
        &self,
        request: &str,
        names: Option<&[String]>,
    ) -> Result<ravel_core::solve::PathModel, String> {
        let request: Request = serde_json::from_str(request).map_err(|e| e.to_string())?;
        if !request.select.is_some_and(|c| c.is_cv()) {
            return Err("the folds answer select = \"cv\" or \"cv_1se\"".into());
        }
        let p = self.folds[0].p();
        let checked = request.check_path(p).map_err(|e| e.to_string())?;
        let total = self.merged()?;
        cross_validate(&total, &self.folds, &checked, names).map_err(|e| e.to_string())
    }
}

#[pymethods]
impl PyFolds {
    /// K (2..=20) empty folds of `p` features for `task` ("regression" or "classification").
    #[new]
    #[pyo3(signature = (p, k, task = "regression"))]
    fn new(p: usize, k: usize, task: &str) -> PyResult<Self> {
        let task: Task = task.parse().map_err(value_error)?;
        if !(2..=MAX_FOLDS).contains(&k) {
            return Err(value_error(format!(
                "folds = {k}: cross-validation takes 2 to {MAX_FOLDS} folds"
            )));
        }
        Ok(PyFolds {
            folds: (0..k)
                .map(|_| Stats::new(task, p, AlphaSchedule::Plain))
                .collect(),
        })
    }

    /// Folds rows in (`x` n x p float64 in C or Fortran order, `y` n values), row i of this
    /// call into fold `fold_of(n + i, K)` where n is the rows folded before. Nothing changes
    /// when a row is refused.
    fn update(
        &mut self,
        py: Python<'_>,
        x: PyReadonlyArray2<'_, f64>,
        y: PyReadonlyArray1<'_, f64>,
    ) -> PyResult<()> {
        let (rows, p) = (x.shape()[0], x.shape()[1]);
        if p != self.folds[0].p() || y.len() != rows {
            return Err(value_error(format!(
                "the folds take X of {} columns and one y per row (X is {rows} x {p}, y has {})",
                self.folds[0].p(),
                y.len()
            )));
        }
        if rows == 0 {
            return Ok(());
        }
        let (row_stride, col_stride, xs, ys) = rows_of(&x, &y)?;
        let folds = &mut self.folds;
        py.detach(|| {
            let k = folds.len();
            let first: u64 = folds.iter().map(Stats::n).sum();
            let (mut fx, mut fy) = (vec![Vec::new(); k], vec![Vec::new(); k]);
            for (i, &v) in ys.iter().enumerate() {
                let f = fold_of(first + i as u64, k);
                fx[f].extend((0..p).map(|c| xs[i * row_stride + c * col_stride]));
                fy[f].push(v);
            }
            let backup = folds.clone();
            for f in 0..k {
                // In blocks, as `Stats.update` folds (`BLOCK_ROWS`).
                let blocks = fx[f]
                    .chunks(BLOCK_ROWS * p.max(1))
                    .zip(fy[f].chunks(BLOCK_ROWS));
                for (bx, by) in blocks {
                    if let Err(e) = folds[f].update_batch(bx, by) {
                        *folds = backup;
                        return Err(e.to_string());
                    }
                }
            }
            Ok(())
        })
        .map_err(value_error)
    }

    /// Adds another shard's folds (same K, task and p): fold j of both shards' rows.
    fn merge(&mut self, other: &PyFolds) -> PyResult<()> {
        if other.folds.len() != self.folds.len() {
            return Err(value_error(format!(
                "folds of {} and of {} folds do not merge",
                self.folds.len(),
                other.folds.len()
            )));
        }
        let mut merged = self.folds.clone();
        for (a, b) in merged.iter_mut().zip(&other.folds) {
            a.merge(b).map_err(value_error)?;
        }
        self.folds = merged;
        Ok(())
    }

    /// The statistics of all rows (every fold merged).
    fn total(&self) -> PyResult<PyStats> {
        Ok(PyStats {
            inner: self.merged().map_err(value_error)?,
        })
    }

    /// Fold `j`'s statistics.
    fn fold(&self, j: usize) -> PyResult<PyStats> {
        let inner = self.folds.get(j).cloned().ok_or_else(|| {
            value_error(format!(
                "fold {j} of {}: folds count from 0",
                self.folds.len()
            ))
        })?;
        Ok(PyStats { inner })
    }

    /// The model `request` (select = "cv" or "cv_1se") chooses along its path by K-fold
    /// cross-validation, as JSON (its `selection` holds the curve and each fold's errors).
    #[pyo3(signature = (request, names = None))]
    fn model(&self, py: Python<'_>, request: &str, names: Option<Vec<String>>) -> PyResult<String> {
        py.detach(|| {
            let path = self.cv_path(request, names.as_deref())?;
            let model = chosen_model(path).map_err(|e| e.to_string())?;
            serde_json::to_string(&model).map_err(|e| e.to_string())
        })
        .map_err(value_error)
    }

    /// The whole path with the CV selection, as JSON.
    #[pyo3(signature = (request, names = None))]
    fn path(&self, py: Python<'_>, request: &str, names: Option<Vec<String>>) -> PyResult<String> {
        py.detach(|| {
            let path = self.cv_path(request, names.as_deref())?;
            serde_json::to_string(&path).map_err(|e| e.to_string())
        })
        .map_err(value_error)
    }

    /// The folds as JSON (a list of statistics); every number round-trips exactly.
    fn to_json(&self) -> PyResult<String> {
        serde_json::to_string(&self.folds).map_err(value_error)
    }

    /// Folds from `to_json`, validated.
    #[staticmethod]
    fn from_json(text: &str) -> PyResult<PyFolds> {
        let folds: Vec<Stats> = serde_json::from_str(text).map_err(value_error)?;
        if !(2..=MAX_FOLDS).contains(&folds.len()) {
            return Err(value_error(format!(
                "{} folds: cross-validation takes 2 to {MAX_FOLDS}",
                folds.len()
            )));
        }
        let (task, p) = (folds[0].task(), folds[0].p());
        for (j, f) in folds.iter().enumerate() {
            f.validate()
                .map_err(|e| value_error(format!("fold {j}: {e}")))?;
            if f.task() != task || f.p() != p {
                return Err(value_error(format!(
                    "fold {j} is of another task or width than fold 0"
                )));
            }
        }
        Ok(PyFolds { folds })
    }

    fn __getnewargs__(&self) -> (usize, usize) {
        (self.folds[0].p(), self.folds.len())
    }
    fn __getstate__(&self) -> PyResult<String> {
        self.to_json()
    }
    fn __setstate__(&mut self, state: &str) -> PyResult<()> {
        *self = PyFolds::from_json(state)?;
        Ok(())
    }
    fn copy(&self) -> PyFolds {
        self.clone()
    }
    fn __copy__(&self) -> PyFolds {
        self.clone()
    }
    fn __deepcopy__(&self, _memo: &Bound<'_, PyAny>) -> PyFolds {
        self.clone()
    }
    fn __eq__(&self, other: &PyFolds) -> bool {
        self.folds == other.folds
    }
    fn __repr__(&self) -> String {
        format!(
            "FoldStats(task={}, p={}, k={}, n={})",
            self.folds[0].task(),
            self.p(),
            self.k(),
            self.n()
        )
    }

    /// Rows folded in (all folds).
    #[getter]
    fn n(&self) -> u64 {
        self.folds.iter().map(Stats::n).sum()
    }
    /// Features.
    #[getter]
    fn p(&self) -> usize {
        self.folds[0].p()
    }
    /// The number of folds.
    #[getter]
    fn k(&self) -> usize {
        self.folds.len()
    }
    /// Rows in each fold.
    #[getter]
    fn sizes(&self) -> Vec<u64> {
        self.folds.iter().map(Stats::n).collect()
    }
}
