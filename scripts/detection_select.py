"""Detection rate of a selected Lasso on paper 003's Table 2 design (issue 17), next to the
oracle k.

Design (ALGORITHMS.md section 2, `ravel_core::synthetic`): p = 1000, k* = 100, rows
x = z 1 + u with z ~ N(0, 1), u ~ N(0, I) (pairwise correlation 0.5), beta*_j = 1 (strong
signal) at j = 10 i, i = 0..99, y = x beta* + N(0, 1). For each n and seed the rows are written
as one NPY file and three `ravel fit` processes (release build) choose a Lasso model:

- oracle: `--method lasso --k 100` (told the true k; refitted, which leaves the support alone)
- ebic:   `--method lasso --select ebic` (default gamma 1 - ln n / (2 ln p), clipped)
- cv_1se: `--method lasso --select cv_1se --folds 5`
- the same two on the refitted path (`--refit`: each point's support refitted by OLS, df = its
  size; the "relaxed Lasso"), and OLSth's k-path k = 1..150 by EBIC

and the table gives, per n and rule, the detection rate DR = |S intersect S*| / |S*| (mean
over seeds), the mean size |S| of the chosen support, and the mean false positives |S \\ S*|.

Run: cargo build --release && python3 scripts/detection_select.py [--seeds 3] [--n 1000 3000 10000]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
RULES = {
    "oracle k = 100": ["--method", "lasso", "--k", "100"],
    "ebic": ["--method", "lasso", "--select", "ebic"],
    "cv_1se (K = 5)": ["--method", "lasso", "--select", "cv_1se", "--folds", "5"],
    "ebic, refitted path": ["--method", "lasso", "--refit", "--select", "ebic"],
    "cv_1se, refitted path": ["--method", "lasso", "--refit", "--select", "cv_1se"],
    "olsth ebic, k = 1..150": ["--method", "olsth", "--k", "150", "--select", "ebic"],
}


def design(n, p, k, seed):
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((n, 1))
    x = z + rng.standard_normal((n, p))
    truth = np.arange(k) * (p // k)
    beta = np.zeros(p)
    beta[truth] = 1.0
    y = x @ beta + rng.standard_normal(n)
    return np.hstack([x, y[:, None]]), set(truth.tolist())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--n", type=int, nargs="+", default=[1000, 3000, 10000])
    ap.add_argument("--ravel", default=os.path.join(ROOT, "target", "release", "ravel"))
    args = ap.parse_args()
    p, k = 1000, 100
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.n:
            stats = {r: [] for r in RULES}
            for seed in range(1, args.seeds + 1):
                data, truth = design(n, p, k, seed)
                path = os.path.join(tmp, f"t2_{n}_{seed}.npy")
                np.save(path, data)
                for rule, flags in RULES.items():
                    t0 = time.perf_counter()
                    out = subprocess.run(
                        [args.ravel, "fit", path, *flags], capture_output=True, text=True
                    )
                    secs = time.perf_counter() - t0
                    if out.returncode != 0:
                        sys.exit(f"{rule}: {out.stderr}")
                    model = json.loads(out.stdout)
                    chosen = {c["index"] for c in model["coefficients"]}
                    stats[rule].append(
                        (len(chosen & truth) / k, len(chosen), len(chosen - truth), secs)
                    )
                os.remove(path)
            for rule, s in stats.items():
                a = np.array(s)
                rows.append((n, rule, 100 * a[:, 0].mean(), a[:, 1].mean(), a[:, 2].mean(),
                             a[:, 3].mean()))
            print(f"n = {n} done", file=sys.stderr)
    print(f"Lasso on paper 003's Table 2 design (p = {p}, k* = {k}, signal 1), "
          f"{args.seeds} seeds")
    print()
    print("| n | rule | DR % | mean size | mean false positives | s per fit |")
    print("|---|---|---|---|---|---|")
    for n, rule, dr, size, fp, secs in rows:
        print(f"| {n} | {rule} | {dr:.1f} | {size:.1f} | {fp:.1f} | {secs:.2f} |")


if __name__ == "__main__":
    main()
