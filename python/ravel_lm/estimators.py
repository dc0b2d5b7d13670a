"""scikit-learn estimators over ravel's running statistics.

They follow scikit-learn's estimator API (get_params / set_params, clone, tags, score, its
checks) without importing scikit-learn (ravel_lm._sklearn, issue 61): `partial_fit` on numpy
arrays needs numpy alone; pandas frames and other input are validated by scikit-learn's own
`validate_data`, imported when such input first comes.

Each estimator folds its rows into running-average statistics (`ravel_lm.Stats`: n, E[x],
E[y], E[x x^T], E[x y], E[y^2]) and extracts its model from them alone. So `partial_fit` is
exact: the moments of every chunk are folded in, and the model extracted on demand (when
`coef_`, `predict` or `score` next needs it) is the batch model on all the rows seen, whatever
the chunking. `merge(other)` adds another shard's statistics: the model of both shards' rows.

Objectives (n rows, the intercept unpenalized), as ravel states them (docs/methods.md):
  OLS            (1/2n) ||y - b0 - X b||^2
  Ridge          ... + lam/2 ||b||^2                 (scikit-learn's Ridge: alpha = n lam)
  Lasso          ... + lam ||b||_1                   (scikit-learn's Lasso: alpha = lam)
  ElasticNet     ... + lam (r ||b||_1 + (1 - r)/2 ||b||^2)   (ElasticNet: alpha = lam)
  MCP, SCAD      ... + the concave penalty at lam, gamma
  OLSth, FSA, IHT, HTP   least squares with exactly k nonzeros
with `standardize=False`. With `standardize=True` (ravel's default, glmnet's convention) the
penalty applies to the coefficients of unit-variance columns (coefficients still come back in
the data's units); for elastic net its l2 part is also divided by sd(y), as glmnet does.

A sparse estimator given neither `k` nor `lam` chooses its model along its path by EBIC
(`select="ebic"`; "aic" and "bic" too): the service's `select`. `select="cv"` (or "cv_1se",
glmnet's one-standard-error rule) chooses by exact K-fold cross-validation (`folds`, default
5): the estimator then also keeps each fold's statistics (`ravel_lm.FoldStats`; row i of all
rows folded in, in order, goes to fold splitmix64(i) mod K, as `ravel fit --select cv --folds K`
numbers a file's rows), and the CV curve comes from the folds' moments alone, whatever the
chunking of `partial_fit`.

Forgetting: `schedule` is ravel's weight schedule ("plain", "fixed:0.01", "floor:0.001",
"adaptive"): scikit-learn's `alpha` is a penalty, so the schedule has its own name.
"""

from __future__ import annotations

import json

import numpy as np

from ._model import Model, Path
from ._native import FoldStats, Stats
from ._sklearn import (
    ClassifierBase,
    NotFittedError,
    RegressorBase,
    check_classification_targets,
    check_fitted,
    validate_data,
)

__all__ = [
    "OLS",
    "Ridge",
    "Lasso",
    "ElasticNet",
    "MCP",
    "SCAD",
    "OLSth",
    "FSA",
    "IHT",
    "HTP",
    "LinearClassifier",
    "NotFittedError",
]

# The service's default largest k of a k-path (ravel-core `select::DEFAULT_K_MAX`).
DEFAULT_K_MAX = 300
SELECT = ("aic", "bic", "ebic", "cv", "cv_1se")
CV = ("cv", "cv_1se")


def default_k_max(p: int, n: int) -> int:
    """The largest k of a k-path when none is given: 300, at most p and n / 2
    (ravel-core's `select::default_k_max`)."""
    return max(1, min(DEFAULT_K_MAX, p, n // 2))


class _Fitted:
    """A fitted estimator's statistics and the model last extracted from them (None once new
    rows are folded in: the next reader extracts it). One object, so reading the model never
    changes the estimator's attributes."""

    __slots__ = ("stats", "folds", "model")

    def __init__(self, stats: Stats, folds: FoldStats | None = None):
        self.stats = stats
        self.folds = folds  # the K folds' statistics, for select="cv" (None otherwise)
        self.model: Model | None = None

    def __getstate__(self):
        return {"stats": self.stats, "folds": self.folds, "model": self.model}

    def __setstate__(self, state):
        self.stats = state["stats"]
        self.folds = state.get("folds")
        self.model = state["model"]


def _rows(X: np.ndarray) -> np.ndarray:
    """X as float64 in C or Fortran order (copied only when it is neither)."""
    if X.flags.c_contiguous or X.flags.f_contiguous:
        return X
    return np.ascontiguousarray(X)


class _RavelEstimator:
    """What every estimator shares: the statistics, the request, the model on demand."""

    # The method's JSON name, and each parameter's JSON key (None: not part of the request).
    _method: str = ""
    _fields: dict[str, str] = {}
    _k_family = False
    _path_family = False
    _task = "regression"

    # --- the request -----------------------------------------------------------------
    def _request(self, n: int, p: int) -> dict:
        req = {"method": self._method}
        for name, key in self._fields.items():
            value = getattr(self, name)
            if value is not None:
                req[key] = value.item() if isinstance(value, np.generic) else value
        req["standardize"] = bool(self.standardize)
        if getattr(self, "inference", False):
            req["inference"] = True
        select = getattr(self, "select", None)
        if select is not None and select not in SELECT:
            raise ValueError(
                f"select must be one of {', '.join(SELECT)} (or None), got {select!r}"
            )
        path_family, k_family = self._families()
        if k_family:
            if req.get("k") is None:
                req["k"] = default_k_max(p, n)
                req["select"] = select or "ebic"
        elif path_family:
            if req.get("k") is None and req.get("lambda") is None:
                req["select"] = select or "ebic"
        return req

    def _families(self) -> tuple[bool, bool]:
        """Whether the method has a lambda path, and whether its path runs over k."""
        return self._path_family, self._k_family

    def _path_request(self) -> dict:
        req = self._request(self._fitted.stats.n, self.n_features_in_)
        for key in ("k", "lambda", "select", "inference", "ebic_gamma"):
            req.pop(key, None)
        return req

    def _schedule(self) -> str:
        return str(self.schedule)

    def _cv(self) -> bool:
        """Whether the model is chosen by K-fold cross-validation (select="cv" / "cv_1se")."""
        return getattr(self, "select", None) in CV

    def _new_folds(self, p: int) -> FoldStats | None:
        if not self._cv():
            return None
        if str(self.schedule) != "plain":
            raise ValueError(
                f"select={self.select!r} takes plain averages (each fold a sample of the rows), "
                f"not schedule={self.schedule!r}: drop the schedule or select by 'ebic'"
            )
        folds = getattr(self, "folds", 5)
        if isinstance(folds, bool) or not isinstance(folds, (int, np.integer)):
            raise ValueError(f"folds must be a whole number of folds (2 to 20), got {folds!r}")
        return FoldStats(p, int(folds), self._task)

    # --- folding rows ----------------------------------------------------------------
    def _targets(self, y, first: bool, classes=None) -> np.ndarray:
        return np.ascontiguousarray(y, dtype=np.float64)

    def _fold(self, X, y, reset: bool, classes=None):
        # Not scikit-learn's finiteness scan (a pass over X, 15 % of a p = 100 fold): the
        # native fold checks every value itself and refuses the chunk whole, naming the row
        # ("non-finite value (NaN or Inf) in row i", a ValueError). numpy arrays are validated
        # without scikit-learn (ravel_lm._sklearn), with its messages.
        X, y = validate_data(
            self, X, y, reset=reset, finite=False, numeric=self._task == "regression"
        )
        y = self._targets(y, reset, classes)
        if reset:  # kept only once the rows are in: a refused first chunk leaves it unfitted
            fitted = _Fitted(
                Stats(X.shape[1], self._task, self._schedule()), self._new_folds(X.shape[1])
            )
        else:
            fitted = self._fitted
        X = _rows(X)
        if fitted.folds is not None:
            before = fitted.stats.copy()
            fitted.stats.update(X, y)
            try:
                fitted.folds.update(X, y)
            except ValueError:
                fitted.stats = before
                raise
        else:
            fitted.stats.update(X, y)
        fitted.model = None
        self._fitted = fitted

    def fit(self, X, y):
        """Statistics of these rows (any earlier ones are forgotten), and their model."""
        self._fold(X, y, reset=True)
        self._model()  # a request the statistics cannot answer fails here, at fit
        return self

    def partial_fit(self, X, y, classes=None):
        """Folds these rows into the statistics; the model of all rows so far is extracted
        when it is next read. Exact: any chunking gives `fit`'s model on all the rows."""
        self._fold(X, y, reset=not hasattr(self, "_fitted"), classes=classes)
        return self

    def fit_stats(self, stats: Stats, feature_names=None):
        """Fitted on statistics folded elsewhere (a service's stream: `Client.stream(name)
        .statistics()`, another process's `Stats.to_json`): a copy of them, so this estimator's
        `partial_fit` does not change the original. A classifier's classes are then -1, 1."""
        if stats.task != self._task:
            raise ValueError(f"{type(self).__name__} takes {self._task} statistics, not {stats.task}")
        for attr in ("feature_names_in_", "classes_"):
            self.__dict__.pop(attr, None)
        self.n_features_in_ = stats.p
        if feature_names is not None:
            if len(feature_names) != stats.p:
                raise ValueError(
                    f"{len(feature_names)} feature names for statistics of {stats.p} features"
                )
            self.feature_names_in_ = np.asarray([str(n) for n in feature_names], dtype=object)
        if self._task == "classification":
            self.classes_ = np.array([-1, 1])
        self._fitted = _Fitted(stats.copy())
        self._model()
        return self

    def merge(self, other: "_RavelEstimator"):
        """Adds the statistics of `other` (fitted on other rows with the same features):
        the model is then that of both shards' rows, exactly."""
        check_fitted(self)
        check_fitted(other)
        if type(other) is not type(self) or other.n_features_in_ != self.n_features_in_:
            raise ValueError(
                "merge takes an estimator of the same kind fitted on the same features"
            )
        mine = getattr(self, "feature_names_in_", None)
        theirs = getattr(other, "feature_names_in_", None)
        if (mine is None) != (theirs is None) or (
            mine is not None and list(mine) != list(theirs)
        ):
            raise ValueError("merge takes an estimator fitted on the same feature names")
        mine, theirs = self._fitted.folds, other._fitted.folds
        if (mine is None) != (theirs is None):
            raise ValueError(
                "merge takes two estimators that both keep folds (select='cv') or neither"
            )
        if mine is not None:
            merged = mine.copy()
            merged.merge(theirs)
        self._fitted.stats.merge(other._fitted.stats)
        if mine is not None:
            self._fitted.folds = merged
        self._fitted.model = None
        return self

    # --- the model -------------------------------------------------------------------
    def _names(self) -> list[str] | None:
        names = getattr(self, "feature_names_in_", None)
        return None if names is None else [str(n) for n in names]

    def _model(self) -> Model:
        check_fitted(self)
        fitted = self._fitted
        if fitted.model is None:
            req = self._request(fitted.stats.n, self.n_features_in_)
            if "select" in req and fitted.stats.n < 2:
                raise ValueError(
                    f"select chooses along a path, which needs at least 2 rows: n_samples = "
                    f"{fitted.stats.n} (give k or lam for a model of fewer rows)"
                )
            if self._cv() and "select" not in req:
                raise ValueError(
                    f"select={self.select!r} chooses a point of a path: give a method with one "
                    "(a penalized or k-sparse method) and neither k nor lam"
                )
            source = self._cv_folds() if self._cv() else fitted.stats
            fitted.model = Model.from_json(
                json.loads(source.model(json.dumps(req), self._names()))
            )
        return fitted.model

    def _cv_folds(self) -> FoldStats:
        folds = self._fitted.folds
        if folds is None:
            raise ValueError(
                f"select={self.select!r} needs fold statistics, which the estimator keeps while "
                "it folds rows with select='cv' (fit / partial_fit); statistics without folds "
                "(fit_stats, or fitted with another select) cannot cross-validate: fit again, "
                "or select by 'ebic'"
            )
        k = getattr(self, "folds", 5)
        if folds.k != k:
            raise ValueError(f"the folds were kept with folds={folds.k}, not {k}: fit again")
        return folds

    @property
    def model_(self) -> Model:
        """The model of every row folded in so far (extracted now if rows came since)."""
        return self._model()

    @property
    def stats_(self) -> Stats:
        """The running statistics (n, p, moments; `to_json`, `merge`)."""
        check_fitted(self)
        return self._fitted.stats

    @property
    def coef_(self) -> np.ndarray:
        """The coefficients, one per feature, in the data's units."""
        return self._model().coef(self.n_features_in_)

    @property
    def intercept_(self) -> float:
        """The intercept."""
        return self._model().intercept

    @property
    def inference_(self) -> dict | None:
        """Standard errors, t statistics and p-values (`inference=True`; least-squares
        models: OLS, ridge, and the refitted sparse ones)."""
        return self._model().inference

    def path(self) -> Path:
        """The method's whole warm-started path on the statistics (penalized methods: over
        lambda; k-sparse ones: select's k-path), sparsest first; with select="cv" (or
        "cv_1se") its `selection` holds the CV curve, each fold's held-out errors and the
        choice."""
        check_fitted(self)
        req = self._path_request()
        source = self._fitted.stats
        if self._cv():
            req["select"] = self.select
            source = self._cv_folds()
        if self._families()[1]:
            req["k"] = default_k_max(self.n_features_in_, self._fitted.stats.n)
            req.setdefault("select", "ebic")
        return Path.from_json(json.loads(source.path(json.dumps(req), self._names())))

    def _decision(self, X) -> np.ndarray:
        model = self._model()
        X = validate_data(self, X, reset=False, finite=True)
        out = np.full(X.shape[0], model.intercept)
        if len(model.indices):
            out += X[:, model.indices] @ model.values
        return out


class _Regressor(RegressorBase, _RavelEstimator):
    def predict(self, X) -> np.ndarray:
        """b0 + X b."""
        return self._decision(X)


class OLS(_Regressor):
    """Ordinary least squares on every column."""

    _method = "ols"
    _fields = {}

    def __init__(self, *, standardize=True, inference=False, schedule="plain"):
        self.standardize = standardize
        self.inference = inference
        self.schedule = schedule


class Ridge(_Regressor):
    """Ridge: (1/2n)||y - b0 - X b||^2 + lam/2 ||b||^2 (scikit-learn's Ridge with
    alpha = n lam, standardize=False)."""

    _method = "ridge"
    _fields = {"lam": "lambda"}

    def __init__(self, lam=1.0, *, standardize=True, inference=False, schedule="plain"):
        self.lam = lam
        self.standardize = standardize
        self.inference = inference
        self.schedule = schedule


_PENALIZED = {
    "lam": "lambda",
    "k": "k",
    "refit": "refit",
    "path_points": "path_points",
    "lambda_min_ratio": "lambda_min_ratio",
    "tol": "tol",
    "ebic_gamma": "ebic_gamma",
}


class _Penalized(_Regressor):
    _path_family = True

    def __init__(
        self,
        lam=None,
        *,
        k=None,
        select=None,
        folds=5,
        refit=None,
        standardize=True,
        path_points=None,
        lambda_min_ratio=None,
        tol=None,
        ebic_gamma=None,
        inference=False,
        schedule="plain",
    ):
        self.lam = lam
        self.k = k
        self.select = select
        self.folds = folds
        self.refit = refit
        self.standardize = standardize
        self.path_points = path_points
        self.lambda_min_ratio = lambda_min_ratio
        self.tol = tol
        self.ebic_gamma = ebic_gamma
        self.inference = inference
        self.schedule = schedule


class Lasso(_Penalized):
    """Lasso by coordinate descent: at `lam` (scikit-learn's Lasso with alpha = lam,
    standardize=False), at exactly `k` nonzeros (refitted by least squares unless
    refit=False), or chosen by `select` (default EBIC when neither is given)."""

    _method = "lasso"
    _fields = _PENALIZED


class ElasticNet(_Regressor):
    """Elastic net: lam (l1_ratio ||b||_1 + (1 - l1_ratio)/2 ||b||^2) (scikit-learn's
    ElasticNet with alpha = lam, standardize=False); `k` and `select` as Lasso."""

    _method = "elastic-net"
    _fields = {**_PENALIZED, "l1_ratio": "l1_ratio"}
    _path_family = True

    def __init__(
        self,
        lam=None,
        *,
        l1_ratio=None,
        k=None,
        select=None,
        folds=5,
        refit=None,
        standardize=True,
        path_points=None,
        lambda_min_ratio=None,
        tol=None,
        ebic_gamma=None,
        inference=False,
        schedule="plain",
    ):
        self.lam = lam
        self.l1_ratio = l1_ratio
        self.k = k
        self.select = select
        self.folds = folds
        self.refit = refit
        self.standardize = standardize
        self.path_points = path_points
        self.lambda_min_ratio = lambda_min_ratio
        self.tol = tol
        self.ebic_gamma = ebic_gamma
        self.inference = inference
        self.schedule = schedule


class _Concave(_Regressor):
    _fields = {**_PENALIZED, "gamma": "gamma"}
    _path_family = True

    def __init__(
        self,
        lam=None,
        *,
        gamma=None,
        k=None,
        select=None,
        folds=5,
        refit=None,
        standardize=True,
        path_points=None,
        lambda_min_ratio=None,
        tol=None,
        ebic_gamma=None,
        inference=False,
        schedule="plain",
    ):
        self.lam = lam
        self.gamma = gamma
        self.k = k
        self.select = select
        self.folds = folds
        self.refit = refit
        self.standardize = standardize
        self.path_points = path_points
        self.lambda_min_ratio = lambda_min_ratio
        self.tol = tol
        self.ebic_gamma = ebic_gamma
        self.inference = inference
        self.schedule = schedule


class MCP(_Concave):
    """Minimax concave penalty (gamma > 1, default 3); `lam`, `k` and `select` as Lasso."""

    _method = "mcp"


class SCAD(_Concave):
    """Smoothly clipped absolute deviation (gamma > 2, default 3.7); as Lasso."""

    _method = "scad"


class _KSparse(_Regressor):
    _k_family = True

    def __init__(
        self, k=None, *, select=None, folds=5, standardize=True, ebic_gamma=None,
        inference=False, schedule="plain",
    ):
        self.k = k
        self.select = select
        self.folds = folds
        self.standardize = standardize
        self.ebic_gamma = ebic_gamma
        self.inference = inference
        self.schedule = schedule


class OLSth(_KSparse):
    """OLS with thresholding (paper 003 Alg. 1): the k largest OLS coefficients, refitted.
    Without `k`: EBIC along k = 1, 2, ... (`select`)."""

    _method = "olsth"
    _fields = {"k": "k", "ebic_gamma": "ebic_gamma"}


class FSA(_KSparse):
    """Feature selection with annealing (paper 003 Alg. 2) to exactly k features."""

    _method = "fsa"
    _fields = {"k": "k", "ebic_gamma": "ebic_gamma"}


class IHT(_KSparse):
    """Iterative hard thresholding to exactly k features, with the sparse duality
    certificate (paper 002)."""

    _method = "iht"
    _fields = {"k": "k", "ebic_gamma": "ebic_gamma"}


class HTP(_KSparse):
    """Hard thresholding pursuit to exactly k features, with IHT's certificate."""

    _method = "htp"
    _fields = {"k": "k", "ebic_gamma": "ebic_gamma"}


_CLASSIFIER_METHODS = {
    "ols": (False, False),
    "ridge": (False, False),
    "lasso": (True, False),
    "elastic-net": (True, False),
    "mcp": (True, False),
    "scad": (True, False),
    "olsth": (False, True),
    "fsa": (False, True),
    "iht": (False, True),
    "htp": (False, True),
}


class LinearClassifier(ClassifierBase, _RavelEstimator):
    """Binary classification by class-weighted least squares on +1 / -1 targets (paper 003
    section 3.6): the positives' and the negatives' statistics are kept apart, so `w_pos`
    and `w_neg` weigh the classes at extraction. `method` is any regression method's name
    ("ols", "ridge", "lasso", "elastic-net", "mcp", "scad", "olsth", "fsa", "iht", "htp")
    with its `k`, `lam`, `l1_ratio`, `gamma`. `classes_[1]` is the positive class."""

    _task = "classification"
    _fields = {
        "k": "k",
        "lam": "lambda",
        "l1_ratio": "l1_ratio",
        "gamma": "gamma",
        "refit": "refit",
        "w_pos": "w_pos",
        "w_neg": "w_neg",
    }

    def __init__(
        self,
        method="ols",
        *,
        k=None,
        lam=None,
        l1_ratio=None,
        gamma=None,
        select=None,
        folds=5,
        refit=None,
        standardize=True,
        w_pos=None,
        w_neg=None,
        schedule="plain",
    ):
        self.method = method
        self.k = k
        self.lam = lam
        self.l1_ratio = l1_ratio
        self.gamma = gamma
        self.select = select
        self.folds = folds
        self.refit = refit
        self.standardize = standardize
        self.w_pos = w_pos
        self.w_neg = w_neg
        self.schedule = schedule

    @property
    def _method(self) -> str:
        if self.method not in _CLASSIFIER_METHODS:
            raise ValueError(
                f"method must be one of {', '.join(_CLASSIFIER_METHODS)}, got {self.method!r}"
            )
        return self.method

    def _families(self):
        return _CLASSIFIER_METHODS[self._method]

    def _request(self, n, p):
        req = super()._request(n, p)
        if self.method == "ridge" and "lambda" not in req:
            req["lambda"] = 1.0
        return req

    def _targets(self, y, first, classes=None):
        check_classification_targets(y)
        if first:
            found = np.unique(y if classes is None else classes)
            if len(found) != 2:
                raise ValueError(
                    f"Only binary classification is supported: y has {len(found)} classes "
                    f"({', '.join(map(str, found[:5]))}), LinearClassifier needs two (for "
                    "more, wrap it in sklearn.multiclass.OneVsRestClassifier)"
                )
            self.classes_ = found
        unknown = ~np.isin(y, self.classes_)
        if unknown.any():
            raise ValueError(
                f"y holds {y[unknown][0]!r}, which is not one of classes_ {list(self.classes_)}"
            )
        return np.where(y == self.classes_[1], 1.0, -1.0)

    def decision_function(self, X) -> np.ndarray:
        """b0 + X b: positive for `classes_[1]`."""
        return self._decision(X)

    def predict(self, X) -> np.ndarray:
        check_fitted(self)
        return self.classes_[(self.decision_function(X) > 0).astype(int)]
