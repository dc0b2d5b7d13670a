"""The scikit-learn estimators against scikit-learn's own on the same rows (objectives matched),
partial_fit over random chunkings against fit, merges, pickling, and scikit-learn's estimator
checks (each waived check named with its reason)."""

import pickle
import warnings

import numpy as np
import pandas as pd
import pytest
import sklearn.linear_model as sk
from sklearn.base import clone
from sklearn.utils.estimator_checks import parametrize_with_checks

import ravel_lm
from ravel_lm import (
    FSA,
    HTP,
    IHT,
    MCP,
    OLS,
    SCAD,
    ElasticNet,
    Lasso,
    LinearClassifier,
    OLSth,
    Ridge,
)


def design(n=400, p=8, seed=0):
    """Correlated columns of different scales and offsets, 3 true features, Gaussian noise."""
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((n, p))
    x = z + 0.5 * z[:, [0]]  # correlation about 0.2 between columns
    x = x * rng.uniform(0.5, 20, p) + rng.uniform(-50, 50, p)
    b = np.zeros(p)
    b[[1, 3, 6]] = [2.0, -1.0, 0.5]
    y = 3.0 + x @ b + rng.standard_normal(n)
    return x, y


def close(a, b, tol):
    a, b = np.asarray(a, float), np.asarray(b, float)
    scale = max(1.0, float(np.max(np.abs(b))))
    assert np.max(np.abs(a - b)) <= tol * scale, (a, b, np.max(np.abs(a - b)))


# --- equal to scikit-learn on the same rows -----------------------------------------------


def test_ols_equals_linear_regression():
    x, y = design()
    ref = sk.LinearRegression().fit(x, y)
    for standardize in (False, True):  # OLS does not depend on the columns' scale
        ours = OLS(standardize=standardize).fit(x, y)
        close(ours.coef_, ref.coef_, 1e-10)
        close(ours.intercept_, ref.intercept_, 1e-10)
        close(ours.predict(x), ref.predict(x), 1e-10)
        assert abs(ours.score(x, y) - ref.score(x, y)) < 1e-12


def test_ridge_equals_ridge_with_alpha_n_lambda():
    x, y = design()
    n, lam = len(y), 0.3
    # ravel: (1/2n)||y - b0 - Xb||^2 + lam/2 ||b||^2; scikit-learn: ||.||^2 + alpha ||b||^2.
    ref = sk.Ridge(alpha=n * lam, solver="cholesky").fit(x, y)
    ours = Ridge(lam, standardize=False).fit(x, y)
    close(ours.coef_, ref.coef_, 1e-10)
    close(ours.intercept_, ref.intercept_, 1e-10)


@pytest.mark.parametrize("lam", [0.05, 0.5, 5.0])
def test_lasso_equals_lasso(lam):
    x, y = design()
    ref = sk.Lasso(alpha=lam, tol=1e-15, max_iter=1_000_000).fit(x, y)
    ours = Lasso(lam, standardize=False, tol=1e-14).fit(x, y)
    close(ours.coef_, ref.coef_, 1e-10)
    close(ours.intercept_, ref.intercept_, 1e-10)
    assert np.array_equal(ours.coef_ != 0, ref.coef_ != 0)


def test_standardized_lasso_is_lasso_on_unit_variance_columns():
    # standardize=True: the penalty on the coefficients of columns scaled to unit population
    # variance, coefficients reported in the data's units.
    x, y = design()
    lam = 0.2
    sd = x.std(axis=0)
    ref = sk.Lasso(alpha=lam, tol=1e-15, max_iter=1_000_000).fit(x / sd, y)
    ours = Lasso(lam, tol=1e-14).fit(x, y)
    close(ours.coef_ * sd, ref.coef_, 1e-10)
    close(ours.intercept_, ref.intercept_, 1e-10)


@pytest.mark.parametrize("l1_ratio", [0.3, 0.9])
def test_elastic_net_equals_elastic_net(l1_ratio):
    x, y = design()
    lam = 0.4
    ref = sk.ElasticNet(alpha=lam, l1_ratio=l1_ratio, tol=1e-15, max_iter=1_000_000).fit(x, y)
    ours = ElasticNet(lam, l1_ratio=l1_ratio, standardize=False, tol=1e-14).fit(x, y)
    close(ours.coef_, ref.coef_, 1e-10)
    close(ours.intercept_, ref.intercept_, 1e-10)


def test_k_sparse_methods_refit_their_support_by_least_squares():
    # Exactly k nonzeros, and on the support the OLS fit of those columns (numpy's lstsq).
    x, y = design()
    for est in (OLSth(3), FSA(3), IHT(3), HTP(3), Lasso(k=3), MCP(k=3), SCAD(k=3)):
        est.fit(x, y)
        support = np.flatnonzero(est.coef_)
        assert list(support) == [1, 3, 6], (type(est).__name__, support)
        a = np.column_stack([np.ones(len(y)), x[:, support]])
        ref = np.linalg.lstsq(a, y, rcond=None)[0]
        close(est.coef_[support], ref[1:], 1e-9)
        close(est.intercept_, ref[0], 1e-9)


def test_default_sparse_estimators_select_by_ebic():
    x, y = design(n=2000)
    for est in (Lasso(), ElasticNet(), MCP(), SCAD(), OLSth()):
        est.fit(x, y)
        assert list(np.flatnonzero(est.coef_)) == [1, 3, 6], type(est).__name__
        assert est.model_.selection is not None


# --- partial_fit, merge, pickling ----------------------------------------------------------


def estimators():
    return [
        OLS(),
        OLS(standardize=False),
        Ridge(0.1),
        Lasso(0.1),
        Lasso(k=3),
        Lasso(),
        ElasticNet(0.1, l1_ratio=0.5),
        MCP(0.1),
        SCAD(0.1),
        OLSth(3),
        FSA(3),
        IHT(3),
        HTP(3),
    ]


def chunkings(n, count=7, seed=1):
    rng = np.random.default_rng(seed)
    for _ in range(count):
        cuts = np.sort(rng.choice(np.arange(1, n), size=rng.integers(1, 12), replace=False))
        yield np.split(np.arange(n), cuts)


@pytest.mark.parametrize("est", estimators(), ids=lambda e: repr(e))
def test_partial_fit_in_random_chunks_equals_fit(est):
    x, y = design()
    whole = clone(est).fit(x, y)
    for chunks in chunkings(len(y)):
        part = clone(est)
        for idx in chunks:
            part.partial_fit(x[idx], y[idx])
        assert part.stats_.n == len(y)
        close(part.coef_, whole.coef_, 1e-10)
        close(part.intercept_, whole.intercept_, 1e-10)


def test_partial_fit_lasso_equals_scikit_learn():
    x, y = design()
    ref = sk.Lasso(alpha=0.3, tol=1e-15, max_iter=1_000_000).fit(x, y)
    for chunks in chunkings(len(y)):
        part = Lasso(0.3, standardize=False, tol=1e-14)
        for idx in chunks:
            part.partial_fit(x[idx], y[idx])
        close(part.coef_, ref.coef_, 1e-10)


def test_classifier_partial_fit_equals_fit_and_least_squares_on_labels():
    x, y = design()
    labels = np.where(y > np.median(y), "up", "down")
    whole = LinearClassifier().fit(x, labels)
    assert list(whole.classes_) == ["down", "up"]
    # Equal class weights: least squares on +1 / -1 targets (numpy's lstsq).
    t = np.where(labels == "up", 1.0, -1.0)
    ref = np.linalg.lstsq(np.column_stack([np.ones(len(t)), x]), t, rcond=None)[0]
    close(whole.coef_, ref[1:], 1e-9)
    close(whole.intercept_, ref[0], 1e-9)
    assert np.array_equal(whole.predict(x), np.where(x @ ref[1:] + ref[0] > 0, "up", "down"))
    for chunks in chunkings(len(y), count=3):
        part = LinearClassifier()
        for idx in chunks:
            part.partial_fit(x[idx], labels[idx], classes=["down", "up"])
        close(part.coef_, whole.coef_, 1e-10)
    with pytest.raises(ValueError, match="Only binary"):
        LinearClassifier().fit(x, np.arange(len(y)) % 3)


def test_merge_of_two_shards_equals_fit_on_all_rows():
    x, y = design()
    for est in (OLS(), Lasso(0.1), OLSth(3)):
        a = clone(est).fit(x[:150], y[:150])
        b = clone(est).fit(x[150:], y[150:])
        a.merge(b)
        whole = clone(est).fit(x, y)
        close(a.coef_, whole.coef_, 1e-10)
        assert a.stats_.n == len(y)
    with pytest.raises(ValueError, match="same"):
        OLS().fit(x, y).merge(OLS().fit(x[:, :3], y))


def test_pickling_round_trips():
    x, y = design()
    for est in estimators() + [LinearClassifier("lasso", lam=0.05)]:
        target = y if not isinstance(est, LinearClassifier) else (y > np.median(y)).astype(int)
        est.partial_fit(x[:200], target[:200], **(
            {"classes": [0, 1]} if isinstance(est, LinearClassifier) else {}
        ))
        back = pickle.loads(pickle.dumps(est))
        assert back.stats_ == est.stats_
        assert np.array_equal(back.predict(x), est.predict(x))
        # Both go on from the same statistics: the same bits after the same rows.
        est.partial_fit(x[200:], target[200:])
        back.partial_fit(x[200:], target[200:])
        assert np.array_equal(back.coef_, est.coef_)
    stats = OLS().fit(x, y).stats_
    assert ravel_lm.Stats.from_json(stats.to_json()) == stats


def test_feature_names_and_named_coefficients():
    x, y = design()
    df = pd.DataFrame(x, columns=[f"f{j}" for j in range(x.shape[1])])
    est = OLSth(3).fit(df, y)
    assert list(est.feature_names_in_) == list(df.columns)
    assert list(est.model_.coefficients.index) == ["f1", "f3", "f6"]
    assert "f1" in est.model_.summary()
    with pytest.raises(ValueError, match="feature names"):
        est.partial_fit(df.rename(columns={"f0": "other"}), y)


def test_fortran_order_and_pandas_rows_fold_as_c_order():
    x, y = design()
    c = OLS().partial_fit(np.ascontiguousarray(x), y)
    f = OLS().partial_fit(np.asfortranarray(x), y)
    close(f.coef_, c.coef_, 1e-12)


def test_bad_input_is_refused_with_a_clear_error():
    x, y = design()
    est = Lasso(0.1).partial_fit(x, y)
    with pytest.raises(ValueError, match="features"):
        est.partial_fit(x[:, :3], y)
    bad = x.copy()
    bad[3, 2] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        OLS().fit(bad, y)
    with pytest.raises(ValueError, match="larger than the number of features"):
        OLSth(20).fit(x, y)
    with pytest.raises(ValueError, match="select must be one of aic, bic, ebic, cv, cv_1se"):
        Lasso(select="crossval").fit(x, y)
    # A refused first chunk leaves the estimator unfitted (nothing folded).
    refused = OLS()
    with pytest.raises(ValueError, match="NaN"):
        refused.partial_fit(bad, y)
    assert not hasattr(refused, "_fitted")
    with pytest.raises(ValueError, match="fixed|alpha|schedule"):
        OLS(schedule="sometimes").fit(x, y)


def test_path_runs_from_lambda_max_down():
    x, y = design()
    path = Lasso(standardize=False).fit(x, y).path()
    assert len(path) > 10
    lams = path.lambdas
    assert np.all(np.diff(lams) < 0)
    ref = sk.Lasso(alpha=lams[len(lams) // 2], tol=1e-15, max_iter=1_000_000).fit(x, y)
    close(path.coefs(x.shape[1])[len(lams) // 2], ref.coef_, 1e-6)


# --- scikit-learn's estimator checks ------------------------------------------------------

# The checks waived, by estimator, each with its reason: none. Every estimator passes every
# check scikit-learn yields for it; scikit-learn itself skips one, check_array_api_input (it
# runs only with SCIPY_ARRAY_API=1 and array-api-strict installed; the estimators take numpy
# arrays and pandas frames), and says so in the skip's reason.
WAIVED: dict[str, dict[str, str]] = {}


def waived(est):
    return WAIVED.get(type(est).__name__, {})


CHECKED = [OLS(), Ridge(), Lasso(), Lasso(0.01), ElasticNet(), MCP(), SCAD(), OLSth(), FSA(),
           IHT(), HTP(), LinearClassifier(), LinearClassifier("lasso", lam=0.01)]


def collect_checks():
    """parametrize_with_checks over CHECKED, and the warnings it gave while collecting."""
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        marks = parametrize_with_checks(CHECKED, expected_failed_checks=waived)
    return marks, [str(w.message) for w in seen]


# The estimators follow scikit-learn's API without subclassing its BaseEstimator (issue 61:
# importing scikit-learn costs more than `ravel fit`'s whole run), and scikit-learn warns of
# that once per estimator while collecting its checks; test_only_warning_... holds the
# collection to that one warning.
CHECKS, COLLECTION_WARNINGS = collect_checks()


def test_only_warning_collecting_the_checks_is_the_base_class():
    assert COLLECTION_WARNINGS == [
        f"Estimator {type(est).__name__} does not inherit from `sklearn.base.BaseEstimator`. "
        "This might lead to unexpected behavior, or even errors when collecting tests."
        for est in CHECKED
    ]


@CHECKS
def test_scikit_learn_checks(estimator, check):
    check(estimator)


def test_large_arrays_fold_in_blocks_and_a_refused_row_changes_nothing():
    # More rows than one block of the native fold (1,024): C and Fortran order alike, and a
    # bad value in a later block refuses the whole call, naming its row in the call.
    rng = np.random.default_rng(8)
    x = rng.standard_normal((3000, 4))
    y = x @ [1.0, 2.0, 0.0, -1.0] + rng.standard_normal(3000)
    c = ravel_lm.Stats(4)
    c.update(np.ascontiguousarray(x), y)
    f = ravel_lm.Stats(4)
    f.update(np.asfortranarray(x), y)
    assert c == f and c.n == 3000
    ref = sk.LinearRegression().fit(x, y)
    close(OLS().fit(np.asfortranarray(x), y).coef_, ref.coef_, 1e-10)
    bad = x.copy()
    bad[2500, 1] = np.inf
    before = c.copy()
    with pytest.raises(ValueError, match="row 2500"):
        c.update(bad, y)
    assert c == before
