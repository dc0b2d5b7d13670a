//! linfa's traits for ravel's estimators (feature `linfa`): a linfa user swaps
//! linfa-elasticnet's Lasso for ravel's in one line.
//!
//! `Request` and `Estimator` implement `linfa::traits::Fit` on a `DatasetBase` of an `f64`
//! record matrix (any layout) with single targets: the rows are folded into `RunningStats`
//! (one symmetric rank-n update) and the model is extracted from them. The fitted object is
//! a [`Fitted`]: ravel's `Model` (coefficients, intercept and how they were obtained: duality
//! gap, steps; reached through `Deref`) with `PredictInplace`, so `fitted.predict(&dataset)`
//! is linfa's `predict` (on `Model` itself, whose inherent `predict` takes one row, call
//! `Predict::predict(&model, &dataset)`).
//! Regression only: a classification fit needs the task, which `Stats::new` takes.
//!
//! Penalty conventions: linfa-elasticnet minimizes 1/(2n) ||y - b0 - X b||^2 + penalty |b|_1
//! on the raw columns; ravel's Lasso at `lambda` minimizes the same with `standardize: false`
//! (`Request::with_standardize`). `Estimator`'s fit keeps ravel's default (standardized
//! columns, the penalty on the coefficients of unit-variance columns). linfa-elasticnet
//! centres y but not x, so its intercept is the least-squares one only for centred columns;
//! ravel centres both (examples/linfa_lasso.rs).
//!
//! ```
//! use linfa::prelude::*;
//! use ndarray::array;
//! use ravel_core::solve::{Estimator, Request, penalized::Lasso};
//!
//! let x = array![[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [2.0, 1.0], [0.0, 0.0]];
//! let y = array![1.0, 2.0, 3.0, 4.0, 0.1];
//! let data = Dataset::new(x, y);
//! let lasso = Request::from(Estimator::Lasso(Lasso::lambda(0.01))).with_standardize(false);
//! let model = lasso.fit(&data)?;
//! let fitted = model.predict(&data);
//! assert_eq!(fitted.len(), 5);
//! assert!(model.coef()[1] > 1.5);
//! # Ok::<(), ravel_core::linfa_traits::FitError>(())
//! ```

use linfa::dataset::{AsSingleTargets, DatasetBase};
use linfa::traits::{Fit, PredictInplace};
use ndarray::{Array1, ArrayBase, Data, Ix2};

use crate::model::Model;
use crate::solve::{Estimator, ParamError, Request};
use crate::stats::{AlphaSchedule, RunningStats, StatsError};
use std::ops::Deref;

/// Why a linfa fit failed: the rows (non-finite values, shapes), the request, or linfa.
#[derive(Debug, thiserror::Error)]
pub enum FitError {
    /// A row could not be folded (`StatsError`).
    #[error(transparent)]
    Stats(#[from] StatsError),
    /// The request is invalid for these data (`ParamError`).
    #[error(transparent)]
    Param(#[from] ParamError),
    /// An error linfa raised.
    #[error(transparent)]
    Linfa(#[from] linfa::Error),
}

/// A model fitted through linfa's `Fit`: ravel's [`Model`] (through `Deref`) and the number
/// of features, with linfa's `PredictInplace`.
#[derive(Debug, Clone, PartialEq)]
pub struct Fitted {
    /// The model.
    pub model: Model,
    /// Features p of the records it was fitted on.
    pub p: usize,
}

impl Fitted {
    /// The dense coefficient vector (length p).
    pub fn coef(&self) -> Array1<f64> {
        self.model.coef(self.p)
    }
}

impl Deref for Fitted {
    type Target = Model;
    fn deref(&self) -> &Model {
        &self.model
    }
}

impl<D, T> Fit<ArrayBase<D, Ix2>, T, FitError> for Request
where
    D: Data<Elem = f64>,
    T: AsSingleTargets<Elem = f64>,
{
    type Object = Fitted;

    /// Folds the rows into plain running averages and extracts this request's model.
    fn fit(&self, dataset: &DatasetBase<ArrayBase<D, Ix2>, T>) -> Result<Fitted, FitError> {
        let x = dataset.records().view();
        let p = x.ncols();
        let mut stats = RunningStats::new(p, AlphaSchedule::Plain);
        stats.update(x, dataset.as_single_targets())?;
        Ok(Fitted {
            model: stats.extract(self)?,
            p,
        })
    }
}

impl<D, T> Fit<ArrayBase<D, Ix2>, T, FitError> for Estimator
where
    D: Data<Elem = f64>,
    T: AsSingleTargets<Elem = f64>,
{
    type Object = Fitted;

    /// As `Request::from(estimator).fit`: ravel's defaults (standardized columns).
    fn fit(&self, dataset: &DatasetBase<ArrayBase<D, Ix2>, T>) -> Result<Fitted, FitError> {
        Request::from(self.clone()).fit(dataset)
    }
}

impl<D: Data<Elem = f64>> PredictInplace<ArrayBase<D, Ix2>, Array1<f64>> for Model {
    /// b0 + X b for every row of `x` (`Model::predict_rows`).
    fn predict_inplace(&self, x: &ArrayBase<D, Ix2>, y: &mut Array1<f64>) {
        assert_eq!(
            x.nrows(),
            y.len(),
            "the number of rows must match the number of targets"
        );
        *y = self.predict_rows(x.view());
    }

    fn default_target(&self, x: &ArrayBase<D, Ix2>) -> Array1<f64> {
        Array1::zeros(x.nrows())
    }
}

impl<D: Data<Elem = f64>> PredictInplace<ArrayBase<D, Ix2>, Array1<f64>> for Fitted {
    /// b0 + X b for every row of `x`.
    fn predict_inplace(&self, x: &ArrayBase<D, Ix2>, y: &mut Array1<f64>) {
        self.model.predict_inplace(x, y)
    }

    fn default_target(&self, x: &ArrayBase<D, Ix2>) -> Array1<f64> {
        Array1::zeros(x.nrows())
    }
}
