"""The estimators without scikit-learn (issue 61): a fresh interpreter fits, predicts and scores
on numpy arrays with none of scikit-learn, scipy or pandas imported; the numpy-only validation
gives scikit-learn's own errors and warnings (compared with `validate_data` on a scikit-learn
estimator of the same name); the own base class's parameters, repr, tags, score and fitted
check against scikit-learn's; and with scikit-learn not installed at all (its import blocked),
lists and frames still fit."""

import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.base import BaseEstimator, ClassifierMixin, RegressorMixin, clone, is_classifier
from sklearn.base import is_regressor
from sklearn.exceptions import NotFittedError
from sklearn.metrics import accuracy_score, r2_score
from sklearn.utils import get_tags
from sklearn.utils.validation import check_is_fitted, validate_data

from ravel_lm import OLS, Lasso, LinearClassifier


def run_fresh(code: str) -> str:
    """code in a new interpreter; its stdout (the test fails on its exit status)."""
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    return out.stdout


def test_numpy_rows_import_no_scikit_learn_scipy_or_pandas():
    out = run_fresh("""
        import sys
        import numpy as np
        import ravel_lm.estimators as est

        rng = np.random.default_rng(0)
        X = rng.standard_normal((500, 6))
        y = X @ [1.0, 0, 2.0, 0, 0, -1.0] + 0.1 * rng.standard_normal(500)
        ols = est.OLS().partial_fit(X[:200], y[:200]).partial_fit(X[200:], y[200:])
        coef = ols.coef_
        assert np.abs(coef - [1.0, 0, 2.0, 0, 0, -1.0]).max() < 0.05, coef
        assert ols.predict(X).shape == (500,)
        assert ols.score(X, y) > 0.99
        lasso = est.Lasso().fit(X, y)
        assert list(np.flatnonzero(lasso.coef_)) == [0, 2, 5]
        labels = np.where(y > 0, "up", "down")
        clf = est.LinearClassifier().partial_fit(X, labels, classes=["down", "up"])
        assert clf.score(X, labels) > 0.9 and clf.predict(X[:3]).dtype.kind == "U"
        try:
            est.OLS().predict(X)
        except ValueError as e:
            assert "not fitted yet" in str(e) and isinstance(e, AttributeError)
        else:
            raise AssertionError("an unfitted predict passed")
        loaded = sorted(m for m in ("sklearn", "scipy", "pandas") if m in sys.modules)
        print("loaded:", loaded)
    """)
    assert out.strip() == "loaded: []", out


# --- scikit-learn's validation messages, from numpy alone --------------------------------


class RefOLS(RegressorMixin, BaseEstimator):
    """scikit-learn's validate_data as the estimators called it before issue 61."""

    def fit(self, X, y):
        validate_data(self, X, y, dtype=np.float64, y_numeric=True, ensure_all_finite=False)
        return self

    def partial_fit(self, X, y):
        validate_data(self, X, y, reset=not hasattr(self, "n_features_in_"), dtype=np.float64,
                      y_numeric=True, ensure_all_finite=False)
        return self

    def predict(self, X):
        return validate_data(self, X, reset=False, dtype=np.float64)


RefOLS.__name__ = "OLS"


def outcome(call):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        try:
            call()
            result = "ok"
        except Exception as e:  # the comparison is of the exact type and message
            result = (type(e).__name__, str(e))
    return result, [(w.category.__name__, str(w.message)) for w in seen]


rng = np.random.default_rng(3)
X = rng.standard_normal((30, 4))
Y = X @ [1.0, 2.0, 0.0, -1.0] + rng.standard_normal(30)


def with_nan(a, where, value=np.nan):
    a = a.copy()
    a[where] = value
    return a


BAD_FITS = {
    "1-D X": (X[:, 0], Y),
    "scalar X": (np.float64(2.0), Y),
    "3-D X": (X.reshape(30, 2, 2), Y),
    "0 samples": (X[:0], Y[:0]),
    "0 features": (X[:, :0], Y),
    "complex X": (X + 1j, Y),
    "object X with a dict": (with_nan(X.astype(object), (0, 0), {"a": 1}), Y),
    "string X": (np.full((30, 4), "abc", dtype=object), Y),
    "y None": (X, None),
    "y of another length": (X, Y[:29]),
    "y NaN": (X, with_nan(Y, 3)),
    "y inf": (X, with_nan(Y, 3, np.inf)),
    "y 2-D": (X, np.column_stack([Y, Y])),
}


@pytest.mark.parametrize("case", list(BAD_FITS))
def test_fit_refuses_bad_input_in_scikit_learns_words(case):
    x, y = BAD_FITS[case]
    ours, theirs = outcome(lambda: OLS().fit(x, y)), outcome(lambda: RefOLS().fit(x, y))
    assert theirs[0] != "ok"
    assert ours == theirs


def test_fitted_estimators_check_features_and_names_in_scikit_learns_words():
    df = pd.DataFrame(X, columns=list("abcd"))
    calls = {
        "predict: fewer features": lambda e: e.predict(X[:, :3]),
        "partial_fit: more features": lambda e: e.partial_fit(np.hstack([X, X]), Y),
        "predict: NaN": lambda e: e.predict(with_nan(X, (2, 1))),
        "predict: inf": lambda e: e.predict(with_nan(X, (2, 1), -np.inf)),
        "predict: 1-D": lambda e: e.predict(X[0]),
        "predict: complex": lambda e: e.predict(X + 0j),
    }
    for fitted_on in (X, df):
        for what, call in calls.items():
            ours = outcome(lambda: call(OLS().fit(fitted_on, Y)))
            theirs = outcome(lambda: call(RefOLS().fit(fitted_on, Y)))
            assert theirs[0] != "ok", what
            assert ours == theirs, (what, type(fitted_on).__name__)
    # Names: fitted with a frame, given an array (a warning), and the other way round.
    for fitted_on, given in ((df, X), (X, df)):
        ours = outcome(lambda: OLS().fit(fitted_on, Y).predict(given))
        theirs = outcome(lambda: RefOLS().fit(fitted_on, Y).predict(given))
        assert ours[1] == theirs[1] and len(ours[1]) == 1, (ours, theirs)
    # Refitted on an array, the estimator forgets the frame's names.
    est = OLS().fit(df, Y)
    assert list(est.feature_names_in_) == list("abcd")
    est.fit(X, Y)
    assert not hasattr(est, "feature_names_in_")


def test_classification_targets_in_scikit_learns_words():
    from sklearn.utils.multiclass import check_classification_targets

    for y in (Y, np.arange(30) * 0.5):
        ours = outcome(lambda: LinearClassifier().fit(X, y))
        theirs = outcome(lambda: check_classification_targets(y))
        assert ours[0] == theirs[0] and ours[0][1].startswith("Unknown label type: continuous")
    many = np.arange(30)
    assert outcome(lambda: check_classification_targets(many))[1] == [
        w for w in outcome(lambda: LinearClassifier().fit(X, many))[1] if w[0] == "UserWarning"
    ]


# --- the base class against scikit-learn's -------------------------------------------------


def test_params_repr_tags_and_clone_as_scikit_learns():
    est = Lasso(0.1, standardize=False)
    assert est.get_params() == {
        "ebic_gamma": None, "folds": 5, "inference": False, "k": None, "lam": 0.1,
        "lambda_min_ratio": None, "path_points": None, "refit": None, "schedule": "plain",
        "select": None, "standardize": False, "tol": None,
    }
    assert repr(est) == "Lasso(lam=0.1, standardize=False)"
    assert repr(OLS()) == "OLS()"
    assert repr(LinearClassifier("lasso", lam=0.01)) == "LinearClassifier(lam=0.01, method='lasso')"
    assert est.set_params(lam=0.2, k=3) is est and (est.lam, est.k) == (0.2, 3)
    with pytest.raises(ValueError) as ours:
        OLS().set_params(alpha=0.1)

    class OLSRef(BaseEstimator):
        def __init__(self, *, standardize=True, inference=False, schedule="plain"):
            self.standardize, self.inference, self.schedule = standardize, inference, schedule

    OLSRef.__name__ = "OLS"
    with pytest.raises(ValueError) as theirs:
        OLSRef().set_params(alpha=0.1)
    assert str(ours.value) == str(theirs.value)
    copy = clone(est)
    assert copy is not est and copy.get_params() == est.get_params()
    assert is_regressor(OLS()) and not is_classifier(OLS())
    assert is_classifier(LinearClassifier()) and not is_regressor(LinearClassifier())
    assert OLS()._estimator_type == "regressor"
    assert LinearClassifier()._estimator_type == "classifier"
    reg, clf = get_tags(OLS()), get_tags(LinearClassifier())
    ref_reg = get_tags(type("R", (RegressorMixin, BaseEstimator), {})())
    ref_clf = get_tags(type("C", (ClassifierMixin, BaseEstimator), {})())
    assert reg == ref_reg
    ref_clf.classifier_tags.multi_class = False
    assert clf == ref_clf and not clf.input_tags.allow_nan


def test_unfitted_estimators_raise_scikit_learns_not_fitted_error():
    for est in (OLS(), LinearClassifier()):
        with pytest.raises(NotFittedError, match="instance is not fitted yet"):
            est.predict(X)
        with pytest.raises(NotFittedError):
            check_is_fitted(est)
        with pytest.raises(NotFittedError):
            est.coef_


def test_score_is_scikit_learns_r2_and_accuracy():
    est = Lasso(0.3).fit(X, Y)
    w = rng.uniform(0, 3, 30)
    assert est.score(X, Y) == pytest.approx(r2_score(Y, est.predict(X)), abs=1e-14)
    assert est.score(X, Y, sample_weight=w) == pytest.approx(
        r2_score(Y, est.predict(X), sample_weight=w), abs=1e-14
    )
    assert est.score(X, est.predict(X)) == 1.0  # no residual: 1, as r2_score
    flat = np.full(30, 2.0)  # residuals about a constant y: 0, as r2_score
    assert est.score(X, flat) == r2_score(flat, est.predict(X)) == 0.0
    with pytest.warns(UserWarning, match="less than two samples"):
        assert np.isnan(est.score(X[:1], Y[:1]))
    labels = np.where(Y > 0, "pos", "neg")
    clf = LinearClassifier().fit(X, labels)
    pred = clf.predict(X)
    assert clf.score(X, labels) == accuracy_score(labels, pred)
    assert clf.score(X, labels, sample_weight=w) == pytest.approx(
        accuracy_score(labels, pred, sample_weight=w), abs=1e-15
    )
    assert clf.score(X, list(labels)) == accuracy_score(labels, pred)


# --- scikit-learn not installed ------------------------------------------------------------


def test_without_scikit_learn_lists_and_frames_fit():
    out = run_fresh("""
        import sys
        sys.modules["sklearn"] = None  # `import sklearn` raises ImportError: not installed
        import warnings
        import numpy as np
        import pandas as pd
        from ravel_lm.estimators import OLS, LinearClassifier, NotFittedError

        rng = np.random.default_rng(1)
        X = rng.standard_normal((50, 3))
        y = X @ [1.0, -1.0, 0.5] + 0.01 * rng.standard_normal(50)
        arrays = OLS().fit(X, y)
        lists = OLS().fit(X.tolist(), y.tolist())
        assert np.abs(lists.coef_ - arrays.coef_).max() < 1e-12
        frame = OLS().fit(pd.DataFrame(X, columns=["a", "b", "c"]), pd.Series(y))
        assert list(frame.feature_names_in_) == ["a", "b", "c"]
        assert np.abs(frame.coef_ - arrays.coef_).max() < 1e-12
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            frame.predict(X)
        assert [str(w.message) for w in seen] == [
            "X does not have valid feature names, but OLS was fitted with feature names"
        ], seen
        try:
            frame.predict(pd.DataFrame(X, columns=["a", "c", "b"]))
        except ValueError as e:
            assert "must be in the same order" in str(e), e
        else:
            raise AssertionError("reordered columns passed")
        try:
            OLS().predict(X)
        except NotFittedError as e:
            assert isinstance(e, ValueError) and isinstance(e, AttributeError)
        else:
            raise AssertionError("an unfitted predict passed")
        clf = LinearClassifier().fit(X, list(np.where(y > 0, "a", "b")))
        assert clf.score(X, np.where(y > 0, "a", "b")) > 0.8
        print("sklearn loaded:", any(m.startswith("sklearn") and sys.modules[m] is not None
                                     for m in sys.modules))
    """)
    assert out.strip() == "sklearn loaded: False", out
