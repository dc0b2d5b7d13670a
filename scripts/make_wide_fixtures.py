#!/usr/bin/env python3
"""The reference of crates/ravel-core/tests/wide.rs: a medium sparse problem (500 x 20,000,
0.25 % dense, heavy-tailed column frequencies, y from 20 true features plus noise) written as
LIBSVM, and scikit-learn's exact Lasso path on it.

The raw-data Frank-Wolfe (ravel_core::wide) solves min 1/(2n) ||y_c - X_c b||^2 subject to
||b||_1 <= delta on centered columns (an intercept, no standardization). scikit-learn's
`lasso_path` on the same centered rows (dense here: 80 MB) solves
min 1/(2n) ||y_c - X_c b||^2 + alpha ||b||_1; its solution at each alpha is the constrained
optimum at delta = ||b||_1, with the same objective (004 section 2.1). The grid is 004's:
20 alphas from alpha_max down to alpha_max / 100 (eps = 1e-2), tol 1e-12.

Run: /usr/bin/python3 scripts/make_wide_fixtures.py (numpy, scikit-learn; about 30 s).
"""
import json
import pathlib

import numpy as np
from sklearn.linear_model import lasso_path

OUT = pathlib.Path(__file__).resolve().parent.parent / "crates/ravel-core/tests/fixtures"
N, P, DENSITY, TRUE = 500, 20_000, 0.0025, 20


def main():
    rng = np.random.default_rng(44)
    # Column frequencies from a Zipf-like law, scaled to the density.
    w = 1.0 / np.arange(1, P + 1) ** 0.8
    w = w / w.sum() * DENSITY * N * P
    counts = np.minimum(rng.poisson(w), N)
    x = np.zeros((N, P))
    for j in np.flatnonzero(counts):
        rows = rng.choice(N, size=counts[j], replace=False)
        x[rows, j] = np.round(np.log1p(rng.exponential(2.0, size=counts[j])), 6) + 0.01
    true = rng.choice(np.flatnonzero(counts >= 20), size=TRUE, replace=False)
    beta = rng.normal(0, 1, size=TRUE)
    y = x[:, true] @ beta + 0.3 * rng.normal(size=N) + 2.0
    y = np.round(y, 6)
    lines = []
    for i in range(N):
        nz = np.flatnonzero(x[i])
        lines.append(" ".join([repr(float(y[i]))] + [f"{j + 1}:{x[i, j]!r}" for j in nz]))
    (OUT / "wide_500x20000.svm").write_text("\n".join(lines) + "\n")
    xc = x - x.mean(axis=0)
    yc = y - y.mean()
    alphas, coefs, gaps = lasso_path(xc, yc, eps=1e-2, n_alphas=20, tol=1e-12, max_iter=200_000)
    points = []
    for a, c, g in zip(alphas, coefs.T, gaps):
        r = yc - xc @ c
        points.append(
            {
                "alpha": a,
                "delta": float(np.abs(c).sum()),
                "objective": float(r @ r / (2 * N)),
                "nonzeros": int(np.count_nonzero(c)),
                "dual_gap": float(g),
            }
        )
    ref = {
        "reference": "sklearn.linear_model.lasso_path on the centered rows, eps=1e-2, "
        "n_alphas=20, tol=1e-12 (scripts/make_wide_fixtures.py)",
        "n": N,
        "p": P,
        "nnz": int(np.count_nonzero(x)),
        "points": points,
    }
    (OUT / "wide_lasso_path.json").write_text(json.dumps(ref, indent=1) + "\n")


if __name__ == "__main__":
    main()
