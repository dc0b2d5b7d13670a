"""select="cv" in the estimators: exact K-fold cross-validation from fold statistics, against a
brute-force CV (scikit-learn's Lasso refitted on the other folds' rows at every lambda of the
path, its mean squared error on the held-out fold) on the same folds, the same answer over any
chunking of partial_fit, and `ravel fit --select cv --folds K` on the same rows as a CSV file."""

import json
import os
import pickle
import subprocess
from pathlib import Path

import numpy as np
import pytest
import sklearn.linear_model as sk

from ravel_lm import MCP, OLSth, FoldStats, Lasso, LinearClassifier

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(os.environ.get("SERVICE_BIN", ROOT / "target" / "debug" / "ravel"))
ENV = {k: v for k, v in os.environ.items() if not k.startswith("RAVEL_")}
MASK = (1 << 64) - 1


def splitmix64(x):
    """splitmix64's output function (Steele, Lea & Flood 2014), written out here."""
    z = (x + 0x9E3779B97F4A7C15) & MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def fold_ids(n, k):
    return np.array([splitmix64(i) % k for i in range(n)])


def design(n=300, p=10, seed=4):
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((n, p))
    x = (z + 0.4 * z[:, [0]]) * rng.uniform(0.5, 5, p) + rng.uniform(-10, 10, p)
    b = np.zeros(p)
    b[[0, 2, 5]] = [1.5, -2.0, 0.7]
    y = 1.0 + x @ b + 2.0 * rng.standard_normal(n)
    return x, y


def brute_force_curve(x, y, lambdas, k, refit):
    """errors[point][fold]: scikit-learn's Lasso on the other folds at each lambda (with
    `refit`, least squares on its support after it: the relaxed Lasso that selection fits by
    default), its MSE on the held-out fold; and the fold sizes."""
    ids = fold_ids(len(y), k)
    errors = np.zeros((len(lambdas), k))
    for j in range(k):
        train, held = ids != j, ids == j
        for i, lam in enumerate(lambdas):
            ref = sk.Lasso(alpha=lam, tol=1e-13, max_iter=1_000_000).fit(x[train], y[train])
            pred = ref.predict(x[held])
            support = np.flatnonzero(ref.coef_)
            if refit and len(support):
                ols = sk.LinearRegression().fit(x[train][:, support], y[train])
                pred = ols.predict(x[held][:, support])
            elif refit:
                pred = np.full(held.sum(), y[train].mean())
            errors[i, j] = np.mean((y[held] - pred) ** 2)
    return errors, np.bincount(ids, minlength=k)


@pytest.mark.parametrize("refit", [False, True])
def test_lasso_cv_curve_equals_a_brute_force_cv_on_the_same_folds(refit):
    x, y = design()
    k = 5
    est = Lasso(select="cv", folds=k, refit=refit, standardize=False, tol=1e-13, path_points=25)
    est.fit(x, y)
    path = est.path()
    sel = path.selection
    assert sel["criterion"] == "cv"
    lambdas = path.lambdas
    got = np.array([c["fold_errors"] for c in sel["curve"]])
    want, sizes = brute_force_curve(x, y, lambdas, k, refit)
    assert sel["fold_sizes"] == sizes.tolist()
    assert np.max(np.abs(got - want) / want) < 1e-7, np.max(np.abs(got - want) / want)
    mean = want @ sizes / sizes.sum()
    values = np.array([c["value"] for c in sel["curve"]])
    assert np.max(np.abs(values - mean) / mean) < 1e-7
    chosen = int(np.argmin(mean))
    assert sel["chosen"] == chosen
    # The chosen model is the full path's point at that lambda (all rows), as the estimator
    # predicts with it.
    assert est.model_.lam == lambdas[chosen]
    full = sk.Lasso(alpha=lambdas[chosen], tol=1e-13, max_iter=1_000_000).fit(x, y)
    coef = full.coef_
    if refit:
        support = np.flatnonzero(coef)
        coef = np.zeros_like(coef)
        coef[support] = sk.LinearRegression().fit(x[:, support], y).coef_
    assert np.max(np.abs(est.coef_ - coef)) < 1e-7
    # cv_1se: the sparsest point within one standard error of the minimum (glmnet's rule),
    # the standard error of the fold errors weighted by the fold sizes.
    w = sizes / sizes.sum()
    se = np.sqrt(((want - mean[:, None]) ** 2 @ w) / (k - 1))
    one_se = Lasso(select="cv_1se", folds=k, refit=refit, standardize=False, tol=1e-13,
                   path_points=25)
    one_se.fit(x, y)
    bar = mean[chosen] + se[chosen]
    assert one_se.model_.selection["chosen"] == int(np.argmax(mean <= bar))
    assert one_se.model_.selection["minimum"] == chosen
    assert np.count_nonzero(one_se.coef_) <= np.count_nonzero(est.coef_)


def test_cv_over_random_chunkings_of_partial_fit_equals_fit():
    x, y = design()
    whole = MCP(select="cv", folds=4)
    whole.fit(x, y)
    want = whole.path().selection
    rng = np.random.default_rng(1)
    for _ in range(3):
        cuts = np.sort(rng.choice(np.arange(1, len(y)), size=6, replace=False))
        part = MCP(select="cv", folds=4)
        for idx in np.split(np.arange(len(y)), cuts):
            part.partial_fit(x[idx], y[idx])
        got = part.path().selection
        assert got["chosen"] == want["chosen"] and got["fold_sizes"] == want["fold_sizes"]
        a = np.array([c["value"] for c in got["curve"]])
        b = np.array([c["value"] for c in want["curve"]])
        assert np.max(np.abs(a - b) / b) < 1e-10
        assert np.max(np.abs(part.coef_ - whole.coef_)) < 1e-10 * max(1, np.abs(whole.coef_).max())
    # The k-sparse methods cross-validate along k.
    olsth = OLSth(select="cv", folds=4).fit(x, y)
    assert olsth.model_.selection["criterion"] == "cv"
    assert olsth.model_.k == olsth.model_.selection["chosen_k"]


@pytest.mark.parametrize("task", ["regression", "classification"])
def test_cv_equals_ravel_fit_on_the_same_rows(tmp_path, task):
    assert BIN.exists(), f"{BIN} is missing: build the service (cargo build) or set SERVICE_BIN"
    x, y = design(n=240)
    if task == "classification":
        y = np.where(y > np.median(y), 1.0, -1.0)
        est = LinearClassifier("lasso", select="cv", folds=3)
    else:
        est = Lasso(select="cv", folds=3)
    est.fit(x, y)
    csv = tmp_path / "rows.csv"
    names = [f"x{j}" for j in range(x.shape[1])]
    with open(csv, "w") as f:
        f.write(",".join(names + ["y"]) + "\n")
        for row, target in zip(x, y):
            f.write(",".join(repr(float(v)) for v in [*row, target]) + "\n")
    out = subprocess.run(
        [str(BIN), "fit", str(csv), "--task", task, "--method", "lasso", "--select", "cv",
         "--folds", "3"],
        check=True, capture_output=True, text=True, env=ENV,
    )
    served = json.loads(out.stdout)
    model = est.model_
    assert model.selection["chosen"] == served["selection"]["chosen"]
    assert model.lam == pytest.approx(served["lambda"], rel=1e-12)
    want = np.zeros(x.shape[1])
    for c in served["coefficients"]:
        want[c["index"]] = c["value"]
    assert np.max(np.abs(est.coef_ - want)) < 1e-10 * max(1.0, np.abs(want).max())
    curve = [c["value"] for c in model.selection["curve"]]
    assert np.allclose(curve, [c["value"] for c in served["selection"]["curve"]], rtol=1e-10)


def test_folds_pickle_merge_and_refusals():
    x, y = design()
    est = Lasso(select="cv", folds=5).fit(x, y)
    back = pickle.loads(pickle.dumps(est))
    assert back._fitted.folds == est._fitted.folds
    assert np.array_equal(back.coef_, est.coef_)
    folds = FoldStats.from_json(est._fitted.folds.to_json())
    assert folds.sizes == est.model_.selection["fold_sizes"] and folds.n == len(y)
    # Two shards' folds merge fold by fold: the merged statistics are all rows'.
    a = Lasso(select="cv", folds=5).fit(x[:120], y[:120])
    b = Lasso(select="cv", folds=5).fit(x[120:], y[120:])
    a.merge(b)
    assert a._fitted.folds.n == len(y)
    assert np.allclose(a._fitted.folds.total().covariance(), est.stats_.covariance(),
                       rtol=1e-12, atol=1e-12)
    assert a.model_.selection["criterion"] == "cv"
    with pytest.raises(ValueError, match="both keep folds"):
        Lasso(select="cv").fit(x, y).merge(Lasso(select="ebic").fit(x, y))
    with pytest.raises(ValueError, match="plain averages"):
        Lasso(select="cv", schedule="fixed:0.01").fit(x, y)
    with pytest.raises(ValueError, match="2 to 20"):
        Lasso(select="cv", folds=1).fit(x, y)
    with pytest.raises(ValueError, match="needs fold statistics"):
        Lasso(select="cv").fit_stats(est.stats_)
    with pytest.raises(ValueError, match="neither k nor lam"):
        Lasso(0.1, select="cv").fit(x, y)
    # A refused row changes neither the statistics nor the folds.
    bad = x[:10].copy()
    bad[3, 2] = np.inf
    part = Lasso(select="cv").partial_fit(x[:50], y[:50])
    before = (part.stats_.copy(), part._fitted.folds.copy())
    with pytest.raises(ValueError):
        part._fitted.folds.update(bad, y[:10])
    assert part._fitted.folds == before[1] and part.stats_ == before[0]
