"""scikit-learn's estimator API without importing scikit-learn (issue 61): the base classes of
the estimators (parameters, repr, tags, score), their input validation and their fitted check.

Importing scikit-learn costs about 1 CPU s (scipy, pandas), more than `ravel fit`'s whole run
on a million rows of p = 100, so nothing here imports it at module import or on the hot path
(fit / partial_fit / predict / score / coef_ with numpy arrays). Plain numpy arrays are
validated here with scikit-learn's own messages and warnings (those of `check_array`,
`check_X_y`, `validate_data`, `check_classification_targets`, `r2_score`, `accuracy_score`);
anything else (pandas frames, lists, sparse matrices, numpy subclasses) goes to
scikit-learn's `validate_data`, imported then. Without scikit-learn installed, such input is
converted by numpy and validated here (a frame's string column names kept as feature names).
`__sklearn_tags__` imports scikit-learn: only scikit-learn calls it, so it is loaded then.
"""

from __future__ import annotations

import inspect
import sys
import warnings
from collections import defaultdict

import numpy as np

_RESHAPE = (
    "Reshape your data either using array.reshape(-1, 1) if your data has a single feature "
    "or array.reshape(1, -1) if it contains a single sample."
)
_NAN_HELP = (
    " does not accept missing values encoded as NaN natively. For supervised learning, you "
    "might want to consider sklearn.ensemble.HistGradientBoostingClassifier and Regressor "
    "which accept missing values encoded as NaNs natively. Alternatively, it is possible to "
    "preprocess the data, for instance by using an imputer transformer in a pipeline or drop "
    "samples with missing values. See https://scikit-learn.org/stable/modules/impute.html You "
    "can find a list of all estimators that handle NaN values at the following page: "
    "https://scikit-learn.org/stable/modules/impute.html#estimators-that-handle-nan-values"
)
_CONTINUOUS = (
    "Unknown label type: {}. Maybe you are trying to fit a classifier, which expects discrete "
    "classes on a regression target with continuous values."
)


class NotFittedError(ValueError, AttributeError):
    """An estimator used before it was fitted, when scikit-learn is not loaded (with it
    loaded, scikit-learn's own `sklearn.exceptions.NotFittedError` is raised; both are a
    ValueError and an AttributeError)."""


def check_fitted(est) -> None:
    """scikit-learn's `check_is_fitted` for these estimators: fitted once rows are folded in.
    The error is scikit-learn's NotFittedError when scikit-learn is loaded (anyone who can
    name that class to catch it has loaded it), else this module's, with the same message."""
    if hasattr(est, "_fitted"):
        return
    msg = (
        f"This {type(est).__name__} instance is not fitted yet. Call 'fit' with appropriate "
        "arguments before using this estimator."
    )
    error = NotFittedError
    if "sklearn" in sys.modules:
        try:
            from sklearn.exceptions import NotFittedError as error
        except ImportError:
            pass
    raise error(msg)


# --- input validation --------------------------------------------------------------------


def _plain(a) -> bool:
    """A numpy array this module validates itself: ndarray or memmap, nothing else."""
    return type(a) is np.ndarray or type(a) is np.memmap


def _assume_finite() -> bool:
    if "sklearn" not in sys.modules:
        return False
    try:
        from sklearn import get_config
    except ImportError:
        return False
    return bool(get_config().get("assume_finite", False))


def _check_finite(a: np.ndarray, input_name: str, estimator_name: str) -> None:
    """scikit-learn's `_assert_all_finite` (NaN not allowed) for a float array."""
    if a.dtype.kind != "f":
        return
    with np.errstate(over="ignore"):
        if np.isfinite(a.sum()):
            return
    has_nan = bool(np.isnan(a).any())
    if not (has_nan or np.isinf(a).any()) or _assume_finite():
        return
    kind = "NaN" if has_nan else f"infinity or a value too large for {a.dtype!r}"
    msg = f"Input {input_name} contains {kind}."
    if input_name == "X" and has_nan:
        msg += f"\n{estimator_name}{_NAN_HELP}"
    raise ValueError(msg)


def _check_names(est, names, reset: bool) -> None:
    """scikit-learn's `_check_feature_names` given X's names (None: a plain array)."""
    if reset:
        if names is not None:
            est.feature_names_in_ = names
        elif hasattr(est, "feature_names_in_"):
            del est.feature_names_in_
        return
    fitted = getattr(est, "feature_names_in_", None)
    name = type(est).__name__
    if fitted is None and names is None:
        return
    if fitted is None:
        warnings.warn(f"X has feature names, but {name} was fitted without feature names",
                      stacklevel=4)
    elif names is None:
        warnings.warn(f"X does not have valid feature names, but {name} was fitted with "
                      "feature names", stacklevel=4)
    elif len(fitted) != len(names) or list(fitted) != list(names):
        unseen = sorted(set(names) - set(fitted))
        missing = sorted(set(fitted) - set(names))
        msg = "The feature names should match those that were passed during fit.\n"
        if unseen:
            msg += "Feature names unseen at fit time:\n" + "".join(f"- {n}\n" for n in unseen[:5])
        if missing:
            msg += "Feature names seen at fit time, yet now missing:\n" + "".join(
                f"- {n}\n" for n in missing[:5]
            )
        if not unseen and not missing:
            msg += "Feature names must be in the same order as they were in fit.\n"
        raise ValueError(msg)


def _check_array(est, X, finite: bool) -> np.ndarray:
    """scikit-learn's `check_array(X, dtype=np.float64)` for a numpy array, its messages."""
    name = type(est).__name__
    if X.dtype.kind == "c":
        raise ValueError("Complex data not supported\n{}\n".format(X))
    # numpy's conversion (object, integers, bools, float32, strings), and its errors, as
    # scikit-learn's: no copy of float64.
    X = np.asarray(X, dtype=np.float64)
    if X.ndim == 0:
        raise ValueError(
            "Expected 2D array, got scalar array instead:\narray={}.\n{}".format(X, _RESHAPE)
        )
    if X.ndim == 1:
        raise ValueError(f"Expected 2D array, got 1D array instead:\narray={X}.\n{_RESHAPE}")
    if X.ndim >= 3:
        raise ValueError(f"Found array with dim {X.ndim}, while dim <= 2 is required by {name}.")
    if finite:
        _check_finite(X, "X", name)
    if X.shape[0] < 1:
        raise ValueError(
            f"Found array with {X.shape[0]} sample(s) (shape={X.shape}) while a minimum of 1 "
            f"is required by {name}."
        )
    if X.shape[1] < 1:
        raise ValueError(
            f"Found array with {X.shape[1]} feature(s) (shape={X.shape}) while a minimum of 1 "
            f"is required by {name}."
        )
    return X


def _check_y(est, y, numeric: bool) -> np.ndarray:
    """scikit-learn's `_check_y` (`column_or_1d`, finite, not complex) for a numpy array."""
    if y.ndim == 2 and y.shape[1] == 1:
        warnings.warn(
            "A column-vector y was passed when a 1d array was expected. Please change the "
            "shape of y to (n_samples, ), for example using ravel().",
            UserWarning,
            stacklevel=4,
        )
        y = y.reshape(-1)
    elif y.ndim != 1:
        raise ValueError(f"y should be a 1d array, got an array of shape {y.shape} instead.")
    y = np.ascontiguousarray(y)
    if y.dtype.kind == "O":
        if any(v is None or (isinstance(v, float) and v != v) for v in y):
            raise ValueError("Input contains NaN")
    _check_finite(y, "y", type(est).__name__)
    if y.dtype.kind == "c":
        raise ValueError("Complex data not supported\n{}\n".format(y))
    if numeric and y.dtype.kind == "O":
        y = y.astype(np.float64)
    return y


def _check_n_features(est, X: np.ndarray, reset: bool) -> None:
    if reset:
        est.n_features_in_ = X.shape[1]
    elif hasattr(est, "n_features_in_") and X.shape[1] != est.n_features_in_:
        raise ValueError(
            f"X has {X.shape[1]} features, but {type(est).__name__} is expecting "
            f"{est.n_features_in_} features as input."
        )


def _own(est, X, y, reset, finite, numeric, names=None, with_y=True):
    """validate_data on numpy arrays, scikit-learn's order of checks and its messages."""
    _check_names(est, names, reset)
    if with_y and y is None:
        raise ValueError(
            f"This {type(est).__name__} estimator requires y to be passed, but the target y "
            "is None."
        )
    X = _check_array(est, X, finite)
    if with_y:
        y = _check_y(est, y, numeric)
        if X.shape[0] != y.shape[0]:
            raise ValueError(
                "Found input variables with inconsistent numbers of samples: "
                f"{[int(X.shape[0]), int(y.shape[0])]!r}"
            )
    _check_n_features(est, X, reset)
    return (X, y) if with_y else X


def _converted(a):
    """Without scikit-learn: a frame's or sequence's values as a numpy array, and a frame's
    column names when all are strings (scikit-learn's feature names)."""
    names = None
    columns = getattr(a, "columns", None)
    if columns is not None:
        columns = list(columns)
        if columns and all(isinstance(c, str) for c in columns):
            names = np.asarray(columns, dtype=object)
    if hasattr(a, "toarray") and hasattr(a, "nnz"):
        raise TypeError(
            "Sparse data was passed, but dense data is required: use X.toarray() (or install "
            "scikit-learn, whose validation this follows)."
        )
    return np.asarray(a), names


_NO_Y = object()


def validate_data(est, X, y=_NO_Y, *, reset: bool, finite: bool, numeric: bool = True):
    """scikit-learn's `validate_data(est, X[, y], reset=reset, dtype=np.float64,
    y_numeric=numeric, ensure_all_finite=finite)`: numpy arrays here, anything else by
    scikit-learn's own (imported now) or, without it installed, converted by numpy."""
    with_y = y is not _NO_Y
    y_plain = not with_y or y is None or (
        _plain(y) and y.ndim == 1 and y.dtype.kind in ("biuf" if numeric else "biufU")
    )
    if _plain(X) and y_plain:
        return _own(est, X, y, reset, finite, numeric, with_y=with_y)
    try:
        from sklearn.utils.validation import validate_data as sk_validate
    except ImportError:
        X, names = _converted(X)
        if with_y and y is not None:
            y, _ = _converted(y)
        return _own(est, X, y, reset, finite, numeric, names=names, with_y=with_y)
    kwargs = {"reset": reset, "dtype": np.float64, "ensure_all_finite": finite}
    if with_y:
        return sk_validate(est, X, y, y_numeric=numeric, **kwargs)
    return sk_validate(est, X, **kwargs)


def check_classification_targets(y) -> None:
    """scikit-learn's `check_classification_targets` (validated y: 1-D, finite): integer,
    bool, string and whole-number float labels here, anything else by scikit-learn's."""
    if _plain(y) and y.ndim == 1 and y.dtype.kind in "biufU":
        if y.dtype.kind == "f" and np.any(y != y.astype(np.int64).astype(y.dtype)):
            raise ValueError(_CONTINUOUS.format("continuous"))
        n = y.shape[0]
        if n > 20:
            distinct = np.unique(y).shape[0]
            if distinct > 2 and distinct > round(0.5 * n):
                warnings.warn(
                    "The number of unique classes is greater than 50% of the number of "
                    "samples. `y` could represent a regression problem, not a classification "
                    "problem.",
                    UserWarning,
                    stacklevel=3,
                )
        return
    try:
        from sklearn.utils.multiclass import check_classification_targets as sk_check
    except ImportError:
        y = np.asarray(y)
        if y.dtype.kind == "O" and not all(isinstance(v, str) for v in y.ravel()):
            raise ValueError(_CONTINUOUS.format("unknown")) from None
        if y.dtype.kind == "f" and np.any(y != y.astype(np.int64).astype(y.dtype)):
            raise ValueError(_CONTINUOUS.format("continuous")) from None
        return
    sk_check(y)


# --- scores ------------------------------------------------------------------------------


def _numeric_1d(a) -> np.ndarray | None:
    """a as a finite float 1-D array (or a column), None when scikit-learn should judge it."""
    if not (_plain(a) or isinstance(a, (list, tuple))):
        return None
    a = np.asarray(a)
    if a.ndim == 2 and a.shape[1] == 1:
        a = a.reshape(-1)
    if a.ndim != 1 or a.dtype.kind not in "biuf":
        return None
    a = a.astype(np.float64, copy=False)
    return a if np.isfinite(a).all() else None


def r2_score(y, pred: np.ndarray, sample_weight=None) -> float:
    """scikit-learn's `r2_score(y, pred, sample_weight=...)` (one output, force_finite)."""
    t = _numeric_1d(y)
    w = None if sample_weight is None else _numeric_1d(sample_weight)
    if (
        t is None
        or (sample_weight is not None and (w is None or w.shape != t.shape))
        or t.shape != pred.shape
        or t.shape[0] < 2
    ):
        try:
            from sklearn.metrics import r2_score as sk_r2
        except ImportError:
            if t is not None and t.shape == pred.shape and t.shape[0] < 2:
                warnings.warn("R^2 score is not well-defined with less than two samples.",
                              stacklevel=3)
                return float("nan")
            raise
        return sk_r2(y, pred, sample_weight=sample_weight)
    weight = 1.0 if w is None else w
    numerator = float(np.sum(weight * (t - pred) ** 2))
    denominator = float(np.sum(weight * (t - np.average(t, weights=w)) ** 2))
    if numerator == 0.0:
        return 1.0
    if denominator == 0.0:
        return 0.0
    return 1.0 - numerator / denominator


def accuracy_score(y, pred: np.ndarray, sample_weight=None) -> float:
    """scikit-learn's `accuracy_score(y, pred, sample_weight=...)` for labels of the kind of
    `pred` (numbers with numbers, strings with strings)."""
    t = np.asarray(y) if (_plain(y) or isinstance(y, (list, tuple))) else None
    w = None if sample_weight is None else _numeric_1d(sample_weight)
    kinds = "biu" if pred.dtype.kind in "biuf" else "U"
    fast = (
        t is not None
        and t.ndim == 1
        and t.shape == pred.shape
        and (t.dtype.kind in kinds or (
            kinds == "biu" and t.dtype.kind == "f" and np.isfinite(t).all()
            and np.all(t == np.round(t))
        ))
        and (sample_weight is None or (w is not None and w.shape == t.shape))
    )
    if not fast:
        try:
            from sklearn.metrics import accuracy_score as sk_accuracy
        except ImportError:
            return float(np.average(np.asarray(y) == pred, weights=sample_weight))
        return sk_accuracy(y, pred, sample_weight=sample_weight)
    return float(np.average(t == pred, weights=w))


# --- the base classes ----------------------------------------------------------------------


class _Base:
    """scikit-learn's BaseEstimator protocol: parameters from `__init__`'s signature,
    `get_params` / `set_params` (scikit-learn's messages), the repr of the parameters changed
    from their defaults, the fitted check. Pickles as any object: its `__dict__`."""

    _estimator_type: str | None = None

    @classmethod
    def _get_param_names(cls) -> list[str]:
        init = cls.__init__
        if init is object.__init__:
            return []
        parameters = [
            p for p in inspect.signature(init).parameters.values()
            if p.name != "self" and p.kind != p.VAR_KEYWORD
        ]
        for p in parameters:
            if p.kind == p.VAR_POSITIONAL:
                raise RuntimeError(
                    "scikit-learn estimators should always specify their parameters in the "
                    f"signature of their __init__ (no varargs). {cls} doesn't follow this "
                    "convention."
                )
        return sorted(p.name for p in parameters)

    def get_params(self, deep: bool = True) -> dict:
        """The estimator's parameters (with deep=True also those of estimator parameters)."""
        out = {}
        for key in self._get_param_names():
            value = getattr(self, key)
            if deep and hasattr(value, "get_params") and not isinstance(value, type):
                out.update((key + "__" + k, v) for k, v in value.get_params().items())
            out[key] = value
        return out

    def set_params(self, **params):
        """Sets parameters (`name=value`, `name__sub=value` for an estimator parameter)."""
        if not params:
            return self
        valid = self.get_params(deep=True)
        nested = defaultdict(dict)
        for key, value in params.items():
            key, delim, sub_key = key.partition("__")
            if key not in valid:
                raise ValueError(
                    f"Invalid parameter {key!r} for estimator {self}. "
                    f"Valid parameters are: {self._get_param_names()!r}."
                )
            if delim:
                nested[key][sub_key] = value
            else:
                setattr(self, key, value)
                valid[key] = value
        for key, sub_params in nested.items():
            valid[key].set_params(**sub_params)
        return self

    def __repr__(self) -> str:
        defaults = {
            name: p.default for name, p in inspect.signature(type(self).__init__).parameters.items()
        }
        changed = []
        for key, value in sorted(self.get_params(deep=False).items()):
            default = defaults.get(key, inspect.Parameter.empty)
            if default is not inspect.Parameter.empty and repr(value) == repr(default):
                continue
            changed.append(f"{key}={value!r}")
        name = type(self).__name__
        one_line = f"{name}({', '.join(changed)})"
        if len(one_line) <= 79:
            return one_line
        return f"{name}(" + (",\n" + " " * (len(name) + 1)).join(changed) + ")"

    def __sklearn_is_fitted__(self) -> bool:
        return hasattr(self, "_fitted")

    def _tags(self):
        from sklearn.utils import InputTags, Tags, TargetTags

        return Tags(
            estimator_type=self._estimator_type,
            target_tags=TargetTags(required=True),
            input_tags=InputTags(allow_nan=False),
        )


class RegressorBase(_Base):
    """A regressor: scikit-learn's regressor tags, and R^2 as `score`."""

    _estimator_type = "regressor"

    def score(self, X, y, sample_weight=None) -> float:
        """R^2 of `predict(X)` against y (scikit-learn's `r2_score`, sample weights too)."""
        return r2_score(y, self.predict(X), sample_weight=sample_weight)

    def __sklearn_tags__(self):
        from sklearn.utils import RegressorTags

        tags = self._tags()
        tags.regressor_tags = RegressorTags()
        return tags


class ClassifierBase(_Base):
    """A binary classifier: scikit-learn's classifier tags (not multi-class), accuracy as
    `score`."""

    _estimator_type = "classifier"

    def score(self, X, y, sample_weight=None) -> float:
        """The fraction of `predict(X)` equal to y (scikit-learn's `accuracy_score`)."""
        return accuracy_score(y, self.predict(X), sample_weight=sample_weight)

    def __sklearn_tags__(self):
        from sklearn.utils import ClassifierTags

        tags = self._tags()
        tags.classifier_tags = ClassifierTags(multi_class=False)
        return tags
