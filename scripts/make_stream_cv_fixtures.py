"""Independent reference for `tests/stream_cv.rs` (issue 17 item 2): exact K-fold
cross-validation of a stream with `cv.folds = 5`, by scikit-learn on the same rows and the
same fold assignment.

Regenerate (from the repository root; numpy and scikit-learn installed):

    python3 scripts/make_stream_cv_fixtures.py

Writes tests/fixtures/stream_cv/{rows.csv, expected.json}.

The stream: N rows of P features sent as binary messages of R rows, message m (0-based) to
partition m % 3 of topic "t.cv" (3 partitions), so its offset is m // 3 (the test produces
them in that order into a fresh topic). A row's fold is the service's documented hash
(src/ingest/cv.rs), reimplemented here: FNV-1a 64 of topic bytes, a zero byte, the partition
(i32 big-endian), the offset (i64 big-endian) and the row's index in its message (u32
big-endian), then splitmix64 of that, mod K.

The CV itself is `make_selection_fixtures.py`'s (same lambda grid, StandardScaler on the
training rows, sklearn's Lasso, cv.glmnet's mean and standard error weighted by fold sizes,
the minimum and the one-standard-error rule).
"""
import json
import os
import struct

import numpy as np
import sklearn
from sklearn.linear_model import Lasso
from sklearn.preprocessing import StandardScaler

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
OUT = os.path.join(ROOT, "tests", "fixtures", "stream_cv")
M64 = (1 << 64) - 1
TOPIC, PARTITIONS, N, P, R, K = "t.cv", 3, 1200, 10, 20, 5
POINTS, RATIO = 30, 1e-3


def splitmix64(x):
    z = (x + 0x9E3779B97F4A7C15) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    return z ^ (z >> 31)


def fnv1a64(data, h=0xCBF29CE484222325):
    for b in data:
        h = ((h ^ b) * 0x100000001B3) & M64
    return h


def fold_of(topic, partition, offset, row):
    key = topic.encode() + b"\0" + struct.pack(">i", partition) + struct.pack(">q", offset)
    return splitmix64(fnv1a64(key + struct.pack(">I", row))) % K


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(23)
    x = rng.normal(size=(N, P)) * rng.uniform(0.5, 3.0, size=P) + rng.normal(size=P) * 5
    beta = np.zeros(P)
    beta[:4] = [1.5, -1.0, 0.6, 0.3]
    y = 2.0 + x @ beta + rng.normal(size=N) * 2.0
    with open(os.path.join(OUT, "rows.csv"), "w") as f:
        f.write(",".join([f"f{j}" for j in range(P)] + ["y"]) + "\n")
        for row, v in zip(x, y):
            f.write(",".join(repr(float(a)) for a in row) + "," + repr(float(v)) + "\n")
    # Read back what the test sends (the text's numbers).
    data = np.loadtxt(os.path.join(OUT, "rows.csv"), delimiter=",", skiprows=1)
    x, y = data[:, :P], data[:, P]
    fold = np.array(
        [fold_of(TOPIC, (i // R) % PARTITIONS, (i // R) // PARTITIONS, i % R) for i in range(N)]
    )
    n = N
    xc = x - x.mean(0)
    sd = x.std(0)
    lmax = np.max(np.abs(xc.T @ (y - y.mean()) / n / sd))
    lambdas = [lmax * RATIO ** (i / (POINTS - 1)) for i in range(POINTS)]
    errors = np.zeros((POINTS, K))
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
    expected = {
        "generator": f"scripts/make_stream_cv_fixtures.py (numpy {np.__version__}, scikit-learn {sklearn.__version__})",
        "topic": TOPIC,
        "partitions": PARTITIONS,
        "rows_per_message": R,
        "folds": K,
        "path_points": POINTS,
        "lambda_min_ratio": RATIO,
        "fold_of_row": fold.tolist(),
        "fold_sizes": sizes.tolist(),
        "lambdas": lambdas,
        "cv_mean": cvm.tolist(),
        "cv_se": cvse.tolist(),
        "fold_errors": errors.tolist(),
        "chosen_min": imin,
        "chosen_1se": i1se,
    }
    with open(os.path.join(OUT, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1)
    print(f"fold sizes {sizes.tolist()}, chosen min {imin}, 1se {i1se}")


if __name__ == "__main__":
    main()
