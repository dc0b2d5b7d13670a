//! `Request` (an estimator and how its problem is built) and its checked forms: `check`
//! validates everything once, so `extract` never re-checks (`Checked`, `CheckedPath`).

use super::*;

/// What to extract: the estimator and how the Gram problem is built. The JSON body of
/// `POST .../model` and `.../path`: `{"method": "lasso", "k": 10, "standardize": true}`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Request {
    /// The method and its parameters.
    #[serde(flatten)]
    pub estimator: Estimator,
    /// Scale columns to unit variance before the fit (coefficients come back in original
    /// units). Default true.
    #[serde(default = "yes")]
    pub standardize: bool,
    /// Fit an intercept (default true). False: the model through the origin (R's `y ~ x - 1`,
    /// scikit-learn's `fit_intercept=False`), fitted on the raw moments E[x x^T], E[x y]; its
    /// R^2 is the uncentred one and its residual degrees of freedom n - p.
    #[serde(default = "yes", skip_serializing_if = "is_true")]
    pub intercept: bool,
    /// Classification: weight of the positive class (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub w_pos: Option<f64>,
    /// Classification: weight of the negative class (default 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub w_neg: Option<f64>,
    /// Choose the model along the path instead of giving k or lambda: aic, bic, ebic, or
    /// (with fold statistics) cv, cv_1se (`select`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub select: Option<Criterion>,
    /// EBIC's gamma in [0, 1] (default 1 - ln n / (2 ln p), clipped; `select`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ebic_gamma: Option<f64>,
    /// Standard errors, t statistics and p-values (OLS, ridge, refitted models; `inference`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub inference: bool,
    /// With `inference`: the confidence level of the intervals, in (0, 1) (default 0.95).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub level: Option<f64>,
    /// With `inference`: hypotheses to test (`summary::Hypothesis`): features to drop (the
    /// nested model's F test) or linear restrictions R b = r (a Wald test).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hypotheses: Vec<summary::Hypothesis>,
    /// With `inference` on a Lasso at a fixed lambda: the noise standard deviation of the
    /// selective inference (default: from the OLS residual on every column).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sigma: Option<f64>,
}

impl From<Estimator> for Request {
    fn from(estimator: Estimator) -> Self {
        Request {
            estimator,
            standardize: true,
            intercept: true,
            w_pos: None,
            w_neg: None,
            select: None,
            ebic_gamma: None,
            inference: false,
            level: None,
            hypotheses: Vec::new(),
            sigma: None,
        }
    }
}

/// A request validated for one model on a stream of p features: what `extract` accepts.
#[derive(Debug, Clone, PartialEq)]
pub struct Checked {
    pub(super) request: Request,
    pub(super) p: usize,
}

/// A request validated for a whole path: what `extract_path` accepts.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckedPath(pub(super) Checked);

impl Request {
    /// OLS with standardized columns: the commonest request, in one call.
    pub fn ols() -> Request {
        Estimator::Ols(least_squares::Ols {}).into()
    }
    /// Ridge at `lambda` with standardized columns.
    pub fn ridge(lambda: f64) -> Request {
        Estimator::Ridge(least_squares::Ridge { lambda }).into()
    }
    /// The same request with or without standardized columns. Without, penalties apply to
    /// the coefficients in the data's own units (scikit-learn's and linfa's convention);
    /// with (the default), to the coefficients of unit-variance columns (glmnet's).
    ///
    /// ```
    /// use ravel_core::solve::{Estimator, Request, penalized::Lasso};
    ///
    /// let raw = Request::from(Estimator::Lasso(Lasso::lambda(0.1))).with_standardize(false);
    /// assert!(!raw.standardize);
    /// ```
    pub fn with_standardize(mut self, standardize: bool) -> Request {
        self.standardize = standardize;
        self
    }

    /// The same request with or without an intercept (`intercept`).
    ///
    /// ```
    /// use ravel_core::solve::Request;
    ///
    /// assert!(!Request::ols().with_intercept(false).intercept);
    /// ```
    pub fn with_intercept(mut self, intercept: bool) -> Request {
        self.intercept = intercept;
        self
    }

    /// The method this request extracts.
    pub fn method(&self) -> Method {
        self.estimator.method()
    }

    fn check_common(&self) -> Result<(), ParamError> {
        check::nonneg("w_pos", self.w_pos)?;
        check::nonneg("w_neg", self.w_neg)?;
        if self.w_pos == Some(0.0) && self.w_neg == Some(0.0) {
            return Err(ParamError::Invalid(
                "w_pos and w_neg cannot both be 0".into(),
            ));
        }
        Ok(())
    }

    /// Validates the request for one model on a stream with p features.
    pub fn check(&self, p: usize) -> Result<Checked, ParamError> {
        self.check_common()?;
        select::check_select(self, p)?;
        if self.select.is_none() {
            self.estimator.solver().check(p, false)?;
        }
        inference::check(self)?;
        summary::check(self, p)?;
        Ok(Checked {
            request: select::with_select_defaults(self.clone()),
            p,
        })
    }

    /// Validates the request for the whole path on a stream with p features.
    pub fn check_path(&self, p: usize) -> Result<CheckedPath, ParamError> {
        self.check_common()?;
        select::check_select(self, p)?;
        if self.select.is_none() {
            self.estimator.solver().check(p, true)?;
        }
        if self.inference && self.select.is_none() {
            return Err(ParamError::Invalid(
                "inference is for one model: ask POST .../model (or ravel fit without --path), \
                 or select one point of the path (select)"
                    .into(),
            ));
        }
        inference::check(self)?;
        summary::check(self, p)?;
        Ok(CheckedPath(Checked {
            request: select::with_select_defaults(self.clone()),
            p,
        }))
    }

    /// Checks the request against `stats` and extracts the model (the one-call form).
    pub fn model(&self, stats: &Stats, names: Option<&[String]>) -> Result<Model, ParamError> {
        model_from_stats(stats, &self.check(stats.p())?, names)
    }

    /// Checks the request against `stats` and extracts the whole path.
    pub fn path(&self, stats: &Stats, names: Option<&[String]>) -> Result<PathModel, ParamError> {
        path_from_stats(stats, &self.check_path(stats.p())?, names)
    }
}

impl Checked {
    /// The request that was checked.
    pub fn request(&self) -> &Request {
        &self.request
    }
    /// Its method.
    pub fn method(&self) -> Method {
        self.request.method()
    }
    pub(super) fn same_p(&self, problem: &Problem) -> Result<(), ParamError> {
        if problem.p != self.p {
            return Err(ParamError::Invalid(format!(
                "the request was checked for p = {} but the problem has p = {}",
                self.p, problem.p
            )));
        }
        Ok(())
    }
}

impl CheckedPath {
    /// The request that was checked.
    pub fn request(&self) -> &Request {
        &self.0.request
    }
    /// Its method.
    pub fn method(&self) -> Method {
        self.0.method()
    }
}
