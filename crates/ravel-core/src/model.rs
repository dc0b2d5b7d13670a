//! What an extraction returns: the `Model` JSON that `ravel fit` prints and the HTTP API
//! returns, with the `Diagnostics` of how it was obtained (linfa's habit: a fitted model
//! carries its duality gap and step count). Below `solve` and `features`, which both build it.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// The one list of the estimators' names: each `Method` variant that `solve` extracts, its name
/// (JSON, command line, metric labels; what `Method::name` returns and serde writes) and the
/// aliases read as it (serde and `FromStr` alike), in the order `--help` and error messages
/// list them. `estimator_names!(callback { args })` hands `{ args }` and the list to
/// `callback!`: `Method` is generated from it here, and `solve`'s `Estimator` (one variant per
/// estimator, with its parameters' type) there, so a name or an alias is written once.
macro_rules! estimator_names {
    ($cb:ident { $($args:tt)* }) => {
        $cb! {
            { $($args)* }
            /// Ordinary least squares.
            Ols = "ols";
            /// Ridge regression.
            Ridge = "ridge";
            /// OLS with thresholding (003 Alg. 1).
            Olsth = "olsth";
            /// Feature selection with annealing (003 Alg. 2).
            Fsa = "fsa";
            /// Lasso.
            Lasso = "lasso";
            /// Elastic net.
            ElasticNet = "elastic-net" | "elasticnet" | "enet";
            /// Minimax concave penalty.
            Mcp = "mcp";
            /// Smoothly clipped absolute deviation.
            Scad = "scad";
            /// Frank-Wolfe for the l1-constrained Lasso (004).
            FwLasso = "fw-lasso" | "frank-wolfe" | "fw";
            /// Iterative hard thresholding (002).
            Iht = "iht";
            /// Hard thresholding pursuit (002).
            Htp = "htp";
            /// k-support-norm regression (002).
            KSupport = "k-support" | "ksupport";
        }
    };
}
pub(crate) use estimator_names;

/// 1 for each token: counts a macro repetition.
macro_rules! one {
    ($x:ident) => {
        1
    };
}

/// `Method` and its names from `estimator_names!`, with the feature-stream methods (`$s`).
macro_rules! define_method {
    (
        { $( $(#[$sdoc:meta])* $s:ident = $sname:literal; )* }
        $( $(#[$doc:meta])* $variant:ident = $name:literal $(| $alias:literal)* ; )*
    ) => {
        /// Every method a `Model` can come from: the estimators `solve` extracts from statistics, and
        /// the feature-stream selections (`os`, `asy-os`) of `features`. Serialized by `name`.
        #[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        // The names are the variants in kebab case (a test holds each equal to its listed
        // name): utoipa reads `rename_all` but not a `rename` that a macro passes in, and the
        // OpenAPI document must list the names, not the variants.
        #[serde(rename_all = "kebab-case")]
        pub enum Method {
            $( $(#[$doc])* $(#[serde(alias = $alias)])* $variant, )*
            $( $(#[$sdoc])* $s, )*
        }

        impl Method {
            /// The methods `solve::extract` takes (a `solve::Estimator` variant each), in the order
            /// `--help` and error messages list them.
            pub const ESTIMATORS: [Method; 0 $(+ one!($variant))*] = [ $( Method::$variant, )* ];
            /// The name in JSON, on the command line and in metric labels.
            pub fn name(&self) -> &'static str {
                match self {
                    $( Method::$variant => $name, )*
                    $( Method::$s => $sname, )*
                }
            }
            /// The other names read as this method (serde and `FromStr`): `enet` for
            /// `elastic-net`, `fw` for `fw-lasso`, ...
            pub fn aliases(&self) -> &'static [&'static str] {
                match self {
                    $( Method::$variant => &[$($alias),*], )*
                    $( Method::$s => &[], )*
                }
            }
        }
    };
}

estimator_names!(define_method {
    /// Online substitution of a feature stream (000).
    Os = "os";
    /// Asynchronous parallel online substitution (000).
    AsyOs = "asy-os";
});

impl Method {
    /// The estimators' names joined for messages: "ols, ridge, ...".
    pub fn estimator_list() -> String {
        Method::ESTIMATORS.map(|m| m.name()).join(", ")
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// `model.method == "lasso"` compares by name.
impl PartialEq<&str> for Method {
    fn eq(&self, other: &&str) -> bool {
        self.name() == *other
    }
}

/// Parses an estimator's name or one of its aliases (`Method::aliases`: `elasticnet`, `enet`,
/// `frank-wolfe`, `fw`, `ksupport`), case-insensitive, `_` read as `-`. The error lists the
/// estimators.
impl FromStr for Method {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim().to_ascii_lowercase().replace('_', "-");
        Method::ESTIMATORS
            .into_iter()
            .find(|m| m.name() == s || m.aliases().contains(&s.as_str()))
            .ok_or_else(|| {
                format!(
                    "unknown method '{s}': expected one of {}",
                    Method::estimator_list()
                )
            })
    }
}

/// The sparse-duality certificate of IHT / HTP (paper 002): a bound on how far the model's
/// objective can be from the best k-subset's.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Certificate {
    /// The l0-constrained ridge objective at the model.
    pub primal: f64,
    /// The best dual value found: a lower bound on the optimum.
    pub dual: f64,
    /// primal - dual, >= objective - optimum.
    pub gap: f64,
    /// The gap is zero up to rounding: the support is the best k-subset (global optimum).
    pub optimal: bool,
}

/// One nonzero coefficient.
/// One nonzero coefficient of a model.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Coefficient {
    /// Header name, or the column index as text.
    pub feature: String,
    /// Column index.
    pub index: usize,
    /// The coefficient, in the data's units.
    pub value: f64,
}

/// A column left out of the fit as a duplicate of another.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Duplicate {
    /// The column left out (its coefficient is 0).
    pub index: usize,
    /// The column that carries the pair's coefficient.
    pub of: usize,
}

/// How a model was obtained.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Diagnostics {
    /// The method.
    pub method: Method,
    /// The penalty level (penalized methods).
    pub lambda: Option<f64>,
    /// Elastic net's mixing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub l1_ratio: Option<f64>,
    /// MCP's or SCAD's concavity.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gamma: Option<f64>,
    /// Frank-Wolfe: the l1 radius of the constraint ||b||_1 <= delta (standardized units).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub delta: Option<f64>,
    /// IHT / HTP with lambda > 0: the optimality certificate.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub certificate: Option<Certificate>,
    /// Nonzero coefficients.
    pub nonzeros: usize,
    /// The k asked for, and whether exactly k nonzeros were reached.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requested_k: Option<usize>,
    /// Whether exactly `requested_k` nonzeros were reached.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub k_exact: Option<bool>,
    /// Iterations (or sweeps) the solver made.
    pub iterations: usize,
    /// Duality gap of a convex problem (Lasso, elastic net, Frank-Wolfe, k-support).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duality_gap: Option<f64>,
    /// Convergence measure of the other solvers (largest coefficient change, or largest
    /// gradient entry on the support after a refit).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub convergence: Option<f64>,
    /// Whether the solver met its tolerance.
    pub converged: bool,
    /// Mean squared error on the rows the statistics hold.
    pub train_mse: f64,
    /// R^2 on those rows (without an intercept the uncentred R^2, as R and statsmodels give it).
    pub r2: f64,
    /// Whether the columns were standardized.
    pub standardize: bool,
    /// Whether the model has an intercept (false: fitted through the origin; `r2` is then the
    /// uncentred R^2, 1 - RSS / sum y^2).
    #[serde(default = "yes")]
    pub intercept: bool,
    /// Whether the support was refitted by least squares.
    pub refit: bool,
    /// Constant columns left out of the fit.
    pub excluded_constant: Vec<usize>,
    /// Columns left out as duplicates of another (correlation +-1 to rounding, e.g. the same
    /// column twice): their coefficient is carried by `of` (`solve::duplicates`). Only methods
    /// whose answer does not depend on how weight is split among identical columns merge them;
    /// ridge, elastic net and k-support (whose penalties spread it) keep every column.
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub excluded_duplicate: Vec<Duplicate>,
    /// The ridge added to a least-squares system found singular or too ill-conditioned to solve
    /// (`gram::linear::solve_subset`: n <= p, collinear columns); absent when none was needed.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub singular_ridge: Option<f64>,
    /// The residuals are zero to working precision: the model reproduces every row, its
    /// standard errors are 0 and none are reported. Absent when false.
    #[serde(skip_serializing_if = "std::ops::Not::not", default)]
    pub exact_fit: bool,
    /// Anything the caller should know (in words).
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub notes: Vec<String>,
    /// Information criteria of the model (paths and `select` requests; `solve::select`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub criteria: Option<Criteria>,
    /// Time the extraction alone took.
    pub elapsed_ms: f64,
}

/// AIC, BIC and extended BIC of one model, from its residual sum of squares, which is exact
/// from the moments (`solve::select`). With n the (effective) sample size and s the nonzeros:
/// AIC = n ln(RSS/n) + 2 df, BIC = n ln(RSS/n) + df ln n, EBIC = BIC + 2 gamma ln C(p, s)
/// (Chen & Chen 2008).
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Criteria {
    /// Degrees of freedom (README "Choosing k": nonzeros, or the elastic net's trace).
    pub df: f64,
    /// Residual sum of squares n * train_mse (classification: the class-weighted loss).
    pub rss: f64,
    /// The sample size the criteria use: rows, or the effective sample size of a forgetting
    /// schedule.
    pub n_eff: f64,
    /// Akaike's criterion.
    pub aic: f64,
    /// Bayesian (Schwarz) criterion.
    pub bic: f64,
    /// Extended BIC (Chen and Chen).
    pub ebic: f64,
    /// The EBIC's gamma.
    pub ebic_gamma: f64,
}

/// How a `select` request chose its model: the criterion per path point and the choice.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Selection {
    /// aic, bic, ebic, cv or cv_1se.
    pub criterion: String,
    /// Index into `curve` of the chosen point (0-based: the position, not k).
    pub chosen: usize,
    /// Nonzeros of the chosen model: `curve[chosen].k` (issue 59: `"chosen": 5` beside a
    /// curve whose entries carry `k` read as k = 5).
    #[serde(default)]
    pub chosen_k: usize,
    /// For cv_1se: the index of the CV minimum.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub minimum: Option<usize>,
    /// One entry per path point, from the sparsest (largest lambda, or k = 1) on.
    pub curve: Vec<CurvePoint>,
    /// Cross-validation: rows per fold (a stream's: the rows its `cv.folds` hashed into each).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub fold_sizes: Option<Vec<u64>>,
    /// The degrees of freedom used, in words.
    pub df_rule: String,
    /// What qualifies the answer (for a stream's CV: folds that hold fewer rows than the
    /// stream, after cv.folds was set on a stream with a checkpoint without folds).
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub notes: Vec<String>,
}

/// The criterion at one path point.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CurvePoint {
    /// The point's penalty (lambda paths).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub lambda: Option<f64>,
    /// The point's l1 radius (Frank-Wolfe paths).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub delta: Option<f64>,
    /// Nonzeros of the model at this point (on all rows).
    pub k: usize,
    /// Degrees of freedom of that model.
    pub df: f64,
    /// The criterion's value (for cv and cv_1se: the mean held-out error).
    pub value: f64,
    /// cv and cv_1se: the standard error of the mean held-out error.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub se: Option<f64>,
    /// cv and cv_1se: the held-out mean squared error of each fold.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub fold_errors: Option<Vec<f64>>,
}

/// Standard errors, t statistics and p-values of a least-squares model (`solve::inference`),
/// with the full summary (`solve::summary`): intervals, VIFs, the model's figures, tests of
/// hypotheses and, for the Lasso at a fixed lambda, inference valid after the selection.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Inference {
    /// The residual variance estimate RSS / df_resid.
    pub sigma2: f64,
    /// Residual degrees of freedom: n - df - 1 (n - df without an intercept).
    pub df_resid: f64,
    /// The support was chosen from the same data (a refitted k-model): the standard errors
    /// ignore the selection, so they are too small and the p-values too optimistic.
    pub post_selection: bool,
    /// The intercept's estimate (absent for a model without an intercept).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub intercept: Option<Estimate>,
    /// One per nonzero coefficient, in the order of `coefficients`.
    pub coefficients: Vec<Estimate>,
    /// The model's figures as statsmodels' OLS summary prints them (`solve::summary`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub summary: Option<Summary>,
    /// The request's `hypotheses`, tested (nested-model F tests and Wald tests).
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub hypotheses: Vec<HypothesisTest>,
    /// Lasso at a fixed lambda, refitted: inference conditional on the selection (Lee, Sun,
    /// Sun & Taylor 2016). Its p-values and intervals replace the naive ones in `coefficients`.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub selective: Option<Selective>,
    /// Anything the caller should know (in words).
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub notes: Vec<String>,
    /// The covariance of the coefficients, for prediction intervals
    /// (`solve::summary::prediction_intervals`); not part of the JSON.
    #[serde(skip)]
    pub covariance: Option<std::sync::Arc<Covariance>>,
}

/// The covariance of a least-squares model's coefficients on its support, in the data's units:
/// what the intervals of its predictions need.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Covariance {
    /// The support's feature indices.
    pub index: Vec<usize>,
    /// `E[x]` of the support's features.
    pub mean: Vec<f64>,
    /// Cov(beta_S), s x s column-major.
    pub cov: Vec<f64>,
    /// The residual variance estimate.
    pub sigma2: f64,
    /// The sample size (Kish's effective size under forgetting).
    pub n: f64,
    /// Residual degrees of freedom.
    pub df_resid: f64,
}

/// A least-squares model's figures, as statsmodels' `OLS(...).fit()` defines them.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// The confidence level of every interval of the answer.
    pub level: f64,
    /// The sample size of the figures: the rows, or Kish's effective sample size
    /// (sum w)^2 / sum w^2 under a forgetting schedule.
    pub nobs: f64,
    /// How `nobs` was obtained, in words.
    pub nobs_rule: String,
    /// The model's degrees of freedom (support size; ridge: tr(Q A^-1)).
    pub df_model: f64,
    /// Residual degrees of freedom nobs - df_model - 1.
    pub df_resid: f64,
    /// Residual sum of squares nobs * train_mse.
    pub ssr: f64,
    /// R^2 (centred).
    pub r2: f64,
    /// Adjusted R^2: 1 - (nobs - 1) / df_resid (1 - R^2).
    pub r2_adj: f64,
    /// The regression's F statistic (all slopes 0), with (df_model, df_resid) degrees of
    /// freedom.
    pub f_statistic: f64,
    /// Its p-value.
    pub f_p_value: f64,
    /// The Gaussian log-likelihood at the estimate: -nobs / 2 (ln 2 pi + ln(ssr / nobs) + 1).
    pub log_likelihood: f64,
    /// statsmodels' AIC: -2 log_likelihood + 2 (df_model + 1). Not `criteria.aic`, ravel's
    /// selection criterion n ln(RSS / n) + 2 df, which differs by constants.
    pub likelihood_aic: f64,
    /// statsmodels' BIC: -2 log_likelihood + ln(nobs) (df_model + 1). Not `criteria.bic`.
    pub likelihood_bic: f64,
    /// Condition number of the standardized design (centred, unit-variance columns of the
    /// support): largest / smallest singular value; absent when the design is singular.
    pub condition_number: Option<f64>,
    /// Condition number of the raw design with its constant column, as statsmodels'
    /// `condition_number` (largest / smallest singular value; absent as above). Its relative
    /// rounding is about 1e-16 times itself, in statsmodels as here: at 1e9 (Longley) only
    /// its first 6 or 7 digits mean something.
    pub condition_number_raw: Option<f64>,
}

/// One test of a hypothesis on a least-squares model.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HypothesisTest {
    /// `nested_f` (the features of `drop` are 0: the F test of the nested model, statsmodels'
    /// `compare_f_test`) or `wald` (R b = r: statsmodels' `f_test`).
    pub test: String,
    /// What was tested, in words.
    pub hypothesis: String,
    /// The F statistic.
    pub f_statistic: f64,
    /// Numerator degrees of freedom (features dropped, or rows of R).
    pub df_num: f64,
    /// Denominator degrees of freedom (the full model's residual ones).
    pub df_denom: f64,
    /// P(F >= f_statistic).
    pub p_value: f64,
    /// `nested_f`: the residual sum of squares of the nested model.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub ssr_restricted: Option<f64>,
    /// `wald`: the chi-squared form df_num * F and its p-value.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub chi2: Option<f64>,
    /// `wald`: P(chi2(df_num) >= chi2).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub chi2_p_value: Option<f64>,
}

/// Inference after the Lasso chose the support at a fixed lambda (Lee, Sun, Sun & Taylor
/// 2016): each selected coefficient's partial-regression target, conditional on the selected
/// set and signs.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Selective {
    /// The event conditioned on, in words.
    pub event: String,
    /// The noise standard deviation used.
    pub sigma: f64,
    /// Where sigma came from: `given` or `full_ols` (the OLS residual on every column).
    pub sigma_source: String,
    /// The lambda of the selection (solver units: the request's).
    pub lambda: f64,
    /// One per selected coefficient, in the order of `coefficients`.
    pub coefficients: Vec<SelectiveEstimate>,
}

/// One selected coefficient's selective and naive figures.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SelectiveEstimate {
    /// Feature name.
    pub feature: String,
    /// Column index.
    pub index: usize,
    /// The partial-regression estimate (the refitted coefficient).
    pub value: f64,
    /// The truncation limits of the estimate given the selection (data units); absent when
    /// the selection does not bound it on that side.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub lower_limit: Option<f64>,
    /// See `lower_limit`.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub upper_limit: Option<f64>,
    /// The selective two-sided p-value of target = 0.
    pub p_value: f64,
    /// The selective interval; an end is absent when the interval is unbounded there (an
    /// estimate close to its truncation limit leaves the target undetermined on one side).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub ci_lower: Option<f64>,
    /// See `ci_lower`.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub ci_upper: Option<f64>,
    /// The naive p-value (the selection ignored), for comparison.
    pub naive_p_value: f64,
    /// The naive interval.
    pub naive_ci_lower: f64,
    /// See `naive_ci_lower`.
    pub naive_ci_upper: f64,
}

/// The intervals of one prediction, as statsmodels' `get_prediction(x).summary_frame(alpha)`.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct PredictionInterval {
    /// The prediction b0 + x^T b.
    pub mean: f64,
    /// Its standard error.
    pub mean_se: f64,
    /// The confidence interval of the mean response.
    pub mean_ci_lower: f64,
    /// See `mean_ci_lower`.
    pub mean_ci_upper: f64,
    /// The prediction interval of a new observation.
    pub obs_ci_lower: f64,
    /// See `obs_ci_lower`.
    pub obs_ci_upper: f64,
}

/// One estimate with its standard error, t statistic and two-sided p-value (Student t with
/// df_resid degrees of freedom).
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Estimate {
    /// Feature name (`intercept` for the intercept).
    pub feature: String,
    /// Column index (absent for the intercept).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub index: Option<usize>,
    /// The estimate.
    pub value: f64,
    /// Its standard error.
    pub se: f64,
    /// value / se.
    pub t: f64,
    /// Two-sided p-value.
    pub p_value: f64,
    /// The confidence interval at `summary.level` (selective when `selective` is present).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub ci_lower: Option<f64>,
    /// See `ci_lower`.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub ci_upper: Option<f64>,
    /// The variance inflation factor 1 / (1 - R_j^2) (absent for the intercept).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub vif: Option<f64>,
}

/// serde default of `Diagnostics::intercept` (models written before it had one).
fn yes() -> bool {
    true
}

/// The model JSON of `ravel fit` and of the HTTP API.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Model {
    /// The method.
    pub method: Method,
    /// Number of nonzero coefficients.
    pub k: usize,
    /// The penalty level (penalized methods).
    pub lambda: Option<f64>,
    /// The intercept b0 (0 for a model without one: `diagnostics.intercept`).
    pub intercept: f64,
    /// The nonzero coefficients, in the data's units.
    pub coefficients: Vec<Coefficient>,
    /// Rows the statistics held.
    pub n: u64,
    /// How the model was obtained.
    pub diagnostics: Diagnostics,
    /// A `select` request: the criterion curve and the chosen point (this model).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub selection: Option<Box<Selection>>,
    /// An `inference` request: standard errors, t and p-values.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub inference: Option<Box<Inference>>,
}

impl Model {
    /// Prediction b0 + x^T b for one row of p features.
    pub fn predict(&self, x: &[f64]) -> f64 {
        self.intercept
            + self
                .coefficients
                .iter()
                .map(|c| c.value * x[c.index])
                .sum::<f64>()
    }
    /// Dense coefficient vector of length p.
    pub fn dense(&self, p: usize) -> Vec<f64> {
        let mut b = vec![0.0; p];
        for c in &self.coefficients {
            b[c.index] = c.value;
        }
        b
    }
}

/// A whole path (over lambda, or over delta for Frank-Wolfe).
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PathModel {
    /// The method.
    pub method: Method,
    /// Rows the statistics held.
    pub n: u64,
    /// One model per path point, sparsest first.
    pub points: Vec<Model>,
    /// A `select` request: the criterion curve and the chosen point (an index into `points`).
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub selection: Option<Selection>,
    /// Time the whole path took.
    pub elapsed_ms: f64,
}

impl Model {
    /// The dense coefficient vector of length `p` as an array (zeros off the support).
    ///
    /// ```
    /// use ndarray::array;
    /// use ravel_core::{Model, RunningStats};
    /// use ravel_core::solve::Request;
    /// use ravel_core::stats::AlphaSchedule;
    ///
    /// let x = array![[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [2.0, 1.0]];
    /// let y = array![1.0, 2.0, 3.0, 4.0];
    /// let mut stats = RunningStats::new(2, AlphaSchedule::Plain);
    /// stats.update(x.view(), y.view()).unwrap();
    /// let model = stats.extract(&Request::ols()).unwrap();
    /// let b = model.coef(2);
    /// assert!((b[0] - 1.0).abs() < 1e-9 && (b[1] - 2.0).abs() < 1e-9);
    /// ```
    pub fn coef(&self, p: usize) -> ndarray::Array1<f64> {
        ndarray::Array1::from(self.dense(p))
    }

    /// Predictions b0 + X b for every row of `x` (any layout).
    ///
    /// ```
    /// use ndarray::array;
    /// use ravel_core::RunningStats;
    /// use ravel_core::solve::Request;
    /// use ravel_core::stats::AlphaSchedule;
    ///
    /// let x = array![[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [2.0, 1.0]];
    /// let y = array![1.0, 2.0, 3.0, 4.0];
    /// let mut stats = RunningStats::new(2, AlphaSchedule::Plain);
    /// stats.update(x.view(), y.view()).unwrap();
    /// let fitted = stats.extract(&Request::ols()).unwrap().predict_rows(x.view());
    /// assert!(fitted.iter().zip(&y).all(|(f, y)| (f - y).abs() < 1e-9));
    /// ```
    pub fn predict_rows(&self, x: ndarray::ArrayView2<'_, f64>) -> ndarray::Array1<f64> {
        let mut out = ndarray::Array1::from_elem(x.nrows(), self.intercept);
        for c in &self.coefficients {
            out.scaled_add(c.value, &x.column(c.index));
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every name and alias of every method reads as that method through serde (the feature
    /// stream methods too) and `FromStr` (the estimators), in any case and with `_` for `-`;
    /// a method is written as its name, and its name reads back as it.
    #[test]
    fn every_name_and_alias_round_trips_through_serde_and_from_str() {
        let streams = [Method::Os, Method::AsyOs];
        for m in Method::ESTIMATORS.into_iter().chain(streams) {
            let json = serde_json::to_string(&m).unwrap();
            assert_eq!(json, format!("\"{}\"", m.name()));
            assert_eq!(serde_json::from_str::<Method>(&json).unwrap(), m);
            assert_eq!(m.to_string(), m.name());
            for s in std::iter::once(m.name()).chain(m.aliases().iter().copied()) {
                let read: Method = serde_json::from_str(&format!("\"{s}\"")).unwrap();
                assert_eq!(read, m, "serde {s}");
                if Method::ESTIMATORS.contains(&m) {
                    assert_eq!(s.parse::<Method>().unwrap(), m, "FromStr {s}");
                    let loud = s.to_ascii_uppercase().replace('-', "_");
                    assert_eq!(loud.parse::<Method>().unwrap(), m, "FromStr {loud}");
                }
            }
        }
        for (alias, m) in [
            ("fw", Method::FwLasso),
            ("frank-wolfe", Method::FwLasso),
            ("enet", Method::ElasticNet),
            ("elasticnet", Method::ElasticNet),
            ("ksupport", Method::KSupport),
        ] {
            assert_eq!(alias.parse::<Method>().unwrap(), m);
            let read: Method = serde_json::from_str(&format!("\"{alias}\"")).unwrap();
            assert_eq!(read, m);
        }
        let e = "lars".parse::<Method>().unwrap_err();
        assert_eq!(
            e,
            "unknown method 'lars': expected one of ols, ridge, olsth, fsa, lasso, elastic-net, \
             mcp, scad, fw-lasso, iht, htp, k-support"
        );
        assert!("os".parse::<Method>().is_err());
    }
}
