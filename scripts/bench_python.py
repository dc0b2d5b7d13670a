#!/usr/bin/env python3
"""The Python package's speed (docs/benchmarks.md, "Python"): `partial_fit` on float64 numpy
arrays against `ravel fit` on the same rows, and scikit-learn's LinearRegression.fit and
SGDRegressor.partial_fit and River's LinearRegression.learn_one, in rows/s, with each model's
R^2 on 20,000 held-out rows of the same design.

Both ravel figures are whole processes timed from outside: `ravel fit rows.npy --method ols`
(the NPY file of the rows with y as its last column) and a Python process that loads X.npy and
y.npy (the same rows), folds them by `OLS().partial_fit` in chunks of 10,000 rows and reads
`coef_`. The other libraries are timed in-process on the loaded arrays (fit, or one pass of
partial_fit / learn_one), River on a prefix of the rows (its rate does not depend on n).

    target/pyenv/bin/python scripts/bench_python.py --ravel target/release/ravel
    (the native module built with `maturin develop --release -m python/Cargo.toml`)
"""

import argparse
import os
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

CHILD = r"""
import sys, time
import numpy as np
from ravel_lm import OLS
x = np.load(sys.argv[1]); y = np.load(sys.argv[2]); chunk = int(sys.argv[3])
t = time.perf_counter()
est = OLS()
for i in range(0, len(y), chunk):
    est.partial_fit(x[i:i + chunk], y[i:i + chunk])
est.coef_
print(time.perf_counter() - t)
"""


def design(n, p, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, p))
    x[:, 1:] += 0.3 * x[:, :-1]  # neighbouring columns correlated
    b = np.zeros(p)
    b[:: max(1, p // 10)] = 1.0
    y = x @ b + rng.standard_normal(n)
    return x, y


def r2(pred, y):
    return 1.0 - np.mean((pred - y) ** 2) / np.var(y)


def timed(f):
    t = time.perf_counter()
    out = f()
    return time.perf_counter() - t, out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ravel", default=os.path.join(ROOT, "target", "release", "ravel"))
    ap.add_argument("--dir", default=os.path.join(ROOT, "target", "bench-python"))
    ap.add_argument("--sizes", default="1000000x100,100000x1000")
    ap.add_argument("--river-rows", type=int, default=20000)
    args = ap.parse_args()
    os.makedirs(args.dir, exist_ok=True)

    from river import linear_model as river_lm
    from sklearn.linear_model import LinearRegression, SGDRegressor

    import ravel_lm

    print(f"ravel_lm {ravel_lm.__version__}, numpy {np.__version__}")
    rows = []
    for size in args.sizes.split(","):
        n, p = map(int, size.split("x"))
        x, y = design(n, p, 1)
        xt, yt = design(20000, p, 2)
        fx, fy, fxy = (os.path.join(args.dir, f"{name}_{n}x{p}.npy") for name in ("x", "y", "xy"))
        np.save(fx, x)
        np.save(fy, y)
        np.save(fxy, np.column_stack([x, y]))

        # ravel fit, the whole process.
        t = time.perf_counter()
        out = subprocess.run(
            [args.ravel, "fit", fxy, "--method", "ols"], check=True, capture_output=True
        )
        fit_wall = time.perf_counter() - t
        import json

        model = json.loads(out.stdout)
        b = np.zeros(p)
        for c in model["coefficients"]:
            b[c["index"]] = c["value"]
        rows.append((f"{n:,} x {p}", "`ravel fit` (whole process)", n / fit_wall,
                     r2(xt @ b + model["intercept"], yt)))

        # partial_fit, the whole process.
        t = time.perf_counter()
        inner = subprocess.run(
            [sys.executable, "-c", CHILD, fx, fy, "10000"], check=True, capture_output=True,
            text=True,
        )
        pf_wall = time.perf_counter() - t
        pf_inner = float(inner.stdout.split()[-1])
        est = ravel_lm.OLS()
        for i in range(0, n, 10000):
            est.partial_fit(x[i:i + 10000], y[i:i + 10000])
        rows.append((f"{n:,} x {p}", "ravel_lm `OLS.partial_fit` (whole process)", n / pf_wall,
                     est.score(xt, yt)))
        rows.append((f"{n:,} x {p}", "ravel_lm `OLS.partial_fit` (the calls alone)",
                     n / pf_inner, est.score(xt, yt)))

        secs, lr = timed(lambda: LinearRegression().fit(x, y))
        rows.append((f"{n:,} x {p}", "scikit-learn `LinearRegression.fit`", n / secs,
                     lr.score(xt, yt)))

        sgd = SGDRegressor(random_state=0)
        t = time.perf_counter()
        for i in range(0, n, 10000):
            sgd.partial_fit(x[i:i + 10000], y[i:i + 10000])
        secs = time.perf_counter() - t
        rows.append((f"{n:,} x {p}", "scikit-learn `SGDRegressor.partial_fit` (one pass)",
                     n / secs, sgd.score(xt, yt)))

        m = min(n, args.river_rows)
        names = [f"x{j}" for j in range(p)]
        dicts = [dict(zip(names, row)) for row in x[:m].tolist()]
        river = river_lm.LinearRegression()
        t = time.perf_counter()
        for d, target in zip(dicts, y[:m].tolist()):
            river.learn_one(d, target)
        secs = time.perf_counter() - t
        tests = [dict(zip(names, row)) for row in xt[:2000].tolist()]
        pred = np.array([river.predict_one(d) for d in tests])
        rows.append((f"{n:,} x {p}", f"River `LinearRegression.learn_one` (first {m:,} rows)",
                     m / secs, r2(pred, yt[:2000])))
        print(f"done {size}: ravel fit {fit_wall:.2f} s, partial_fit process {pf_wall:.2f} s "
              f"(calls {pf_inner:.2f} s): {100 * fit_wall / pf_wall:.0f} % of ravel fit's rows/s",
              flush=True)
        for f in (fx, fy, fxy):
            os.remove(f)

    print("\n| rows x p | what | rows/s | R^2 (held out) |")
    print("|---|---|---:|---:|")
    for size, what, rate, score in rows:
        print(f"| {size} | {what} | {rate:,.0f} | {score:.4f} |")


if __name__ == "__main__":
    main()
