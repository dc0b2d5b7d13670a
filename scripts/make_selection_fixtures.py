"""Independent references for `tests/selection.rs` (issue 17): cross-validation by
scikit-learn and standard errors by statsmodels, on rows this script writes.

Regenerate (from the repository root; PyPI must be reachable):

    python3 -m venv .venv
    .venv/bin/pip install numpy scikit-learn statsmodels
    .venv/bin/python scripts/make_selection_fixtures.py

Writes tests/fixtures/selection/{cv.csv, inference.csv, expected.json}.

Cross-validation (`ravel fit --method lasso --select cv --folds 5`): row i (0-based, file
order) is in fold splitmix64(i) mod 5 (ravel_core::solve::select::fold_of, reimplemented
below). The lambda grid is ravel's: lambda_max = max_j |cov(x_j, y)| / sd_j (population sd),
then path_points values geometric down to lambda_max * lambda_min_ratio. For each fold j the
training rows (fold != j) are standardized by their own mean and population sd
(StandardScaler), sklearn's Lasso(alpha=lambda) is fitted on them (its objective
(1/2n)||y - b0 - Xw||^2 + alpha ||w||_1 is ravel's in standardized units), the coefficients are
mapped back (w / sd, b0 = intercept - mean . w) and the mean squared error on fold j is taken.
The CV mean and standard error are cv.glmnet's: cvm = sum_j n_j e_j / n,
cvse = sqrt(sum_j n_j (e_j - cvm)^2 / n / (K - 1)); `cv` picks the smallest cvm (first among
ties), `cv_1se` the first (largest) lambda with cvm <= cvm_min + cvse_min.

Inference: statsmodels OLS (with a constant) on all columns, and on the support OLSth picks at
k = 3 (the three columns with a strong signal; the test checks ravel picks the same). Ridge
(ravel minimizes (1/2n)||y - b0 - Xb||^2 + lambda/2 ||b||^2 on standardized columns) has no
statsmodels counterpart; its reference is numpy from the raw rows: with Z the centred,
standardized design, A = Z'Z + n lambda I, b = A^-1 Z'y, H = Z A^-1 Z' + 11'/n,
df = tr(Z A^-1 Z'), sigma^2 = RSS / (n - df - 1), Cov(b) = sigma^2 A^-1 Z'Z A^-1.
"""
import json
import os

import numpy as np
import sklearn
import statsmodels
import statsmodels.api as sm
from scipy import stats as sps
from sklearn.linear_model import Lasso
from sklearn.preprocessing import StandardScaler

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
OUT = os.path.join(ROOT, "tests", "fixtures", "selection")
M64 = (1 << 64) - 1


def splitmix64(x):
    z = (x + 0x9E3779B97F4A7C15) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def write_csv(path, x, y):
    p = x.shape[1]
    with open(path, "w") as f:
        f.write(",".join([f"x{j}" for j in range(p)] + ["y"]) + "\n")
        for row, v in zip(x, y):
            f.write(",".join(repr(float(a)) for a in row) + "," + repr(float(v)) + "\n")


def cv_case():
    rng = np.random.default_rng(17)
    n, p, k = 300, 20, 4
    x = rng.normal(size=(n, p)) * rng.uniform(0.5, 3.0, size=p) + rng.normal(size=p) * 5
    beta = np.zeros(p)
    beta[:k] = [1.5, -1.0, 0.6, 0.3]
    y = 2.0 + x @ beta + rng.normal(size=n) * 2.0
    # Round-trip through text so the fixture and ravel read the same numbers.
    write_csv(os.path.join(OUT, "cv.csv"), x, y)
    K, points, ratio = 5, 30, 1e-3
    fold = np.array([splitmix64(i) % K for i in range(n)])
    return {
        "file": "cv.csv",
        "folds": K,
        "path_points": points,
        "lambda_min_ratio": ratio,
        **lasso_cv(x, y, fold, K, points, ratio),
    }


def lasso_cv(x, y, fold, K, points, ratio):
    """The CV curve of the module comment on rows (x, y) with fold ids `fold`: fold sizes,
    ravel's lambda grid, the mean and standard error per lambda, each fold's error, and the
    minimum and one-standard-error choices (also `make_stream_cv_fixtures.py`'s)."""
    n = len(y)
    xc = x - x.mean(0)
    sd = x.std(0)
    lmax = np.max(np.abs(xc.T @ (y - y.mean()) / n / sd))
    lambdas = [lmax * ratio ** (i / (points - 1)) for i in range(points)]
    errors = np.zeros((points, K))
    for j in range(K):
        tr, te = fold != j, fold == j
        sc = StandardScaler().fit(x[tr])
        zt = sc.transform(x[tr])
        for i, lam in enumerate(lambdas):
            m = Lasso(alpha=lam, tol=1e-13, max_iter=1_000_000).fit(zt, y[tr])
            w = m.coef_ / sc.scale_
            b0 = m.intercept_ - sc.mean_ @ w
            errors[i, j] = np.mean((y[te] - b0 - x[te] @ w) ** 2)
    sizes = np.array([np.sum(fold == j) for j in range(K)])
    cvm = errors @ sizes / n
    cvse = np.sqrt(((errors - cvm[:, None]) ** 2) @ sizes / n / (K - 1))
    imin = int(np.argmin(cvm))
    i1se = int(np.nonzero(cvm <= cvm[imin] + cvse[imin])[0][0])
    return {
        "fold_sizes": sizes.tolist(),
        "lambdas": lambdas,
        "cv_mean": cvm.tolist(),
        "cv_se": cvse.tolist(),
        "fold_errors": errors.tolist(),
        "chosen_min": imin,
        "chosen_1se": i1se,
    }


def ols_reference(x, y, cols, names):
    res = sm.OLS(y, sm.add_constant(x[:, cols])).fit()
    return {
        "support": [int(c) for c in cols],
        "features": [names[c] for c in cols],
        "values": res.params.tolist(),
        "se": res.bse.tolist(),
        "t": res.tvalues.tolist(),
        "p": res.pvalues.tolist(),
        "sigma2": float(res.scale),
        "df_resid": float(res.df_resid),
    }


def ridge_reference(x, y, lam):
    n = len(y)
    mu, sd = x.mean(0), x.std(0)
    z = (x - mu) / sd
    yc = y - y.mean()
    a = z.T @ z + n * lam * np.eye(x.shape[1])
    ainv = np.linalg.inv(a)
    b = ainv @ z.T @ yc
    beta = b / sd
    b0 = y.mean() - mu @ beta
    resid = y - b0 - x @ beta
    df = np.trace(z @ ainv @ z.T)
    df_resid = n - df - 1
    sigma2 = resid @ resid / df_resid
    cov_b = sigma2 * ainv @ (z.T @ z) @ ainv
    cov_beta = cov_b / np.outer(sd, sd)
    se = np.sqrt(np.diag(cov_beta))
    se0 = np.sqrt(sigma2 / n + mu @ cov_beta @ mu)
    values = np.concatenate([[b0], beta])
    ses = np.concatenate([[se0], se])
    t = values / ses
    return {
        "lambda": lam,
        "values": values.tolist(),
        "se": ses.tolist(),
        "t": t.tolist(),
        "p": (2 * sps.t.sf(np.abs(t), df_resid)).tolist(),
        "sigma2": float(sigma2),
        "df_resid": float(df_resid),
    }


def inference_case():
    rng = np.random.default_rng(3)
    n, p = 120, 6
    x = rng.normal(size=(n, p)) * [1.0, 2.0, 0.5, 3.0, 1.0, 1.5]
    x[:, 4] += 1000.0  # far from 0: the intercept's SE depends on the means
    x[:, 2] += 0.6 * x[:, 0]  # correlated columns
    y = 4.0 + 2.0 * x[:, 0] - 1.5 * x[:, 1] + 1.2 * x[:, 3] + 0.05 * x[:, 5] + rng.normal(size=n)
    write_csv(os.path.join(OUT, "inference.csv"), x, y)
    # Read back the rounded text, as ravel does.
    data = np.loadtxt(os.path.join(OUT, "inference.csv"), delimiter=",", skiprows=1)
    x, y = data[:, :-1], data[:, -1]
    names = [f"x{j}" for j in range(p)]
    return {
        "file": "inference.csv",
        "ols": ols_reference(x, y, list(range(p)), names),
        "olsth_k3": ols_reference(x, y, [0, 1, 3], names),
        "ridge": ridge_reference(x, y, 0.05),
    }


def main():
    os.makedirs(OUT, exist_ok=True)
    cv = cv_case()
    # repr() round-trips a double exactly: the CSV holds the very rows the references used.
    data = np.loadtxt(os.path.join(OUT, "cv.csv"), delimiter=",", skiprows=1)
    assert data.shape == (300, 21)
    expected = {
        "versions": {
            "numpy": np.__version__,
            "scikit-learn": sklearn.__version__,
            "statsmodels": statsmodels.__version__,
        },
        "cv": cv,
        "inference": inference_case(),
    }
    with open(os.path.join(OUT, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
