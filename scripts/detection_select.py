"""Which k, answered by each selection rule (issues 17 and 34): detection rate, support size
and false positives of the chosen model, next to the oracle, on three designs.

Designs (ALGORITHMS.md section 2, `ravel_core::synthetic`): rows x = z 1 + u with
z ~ N(0, 1), u ~ N(0, I) (pairwise correlation 0.5), beta*_j = 1 at j = (p / k*) i,
i = 0..k*-1, y = x beta* + N(0, 1):

- table2: paper 003's Table 2, p = 1000, k* = 100, n = 1000, 3000, 10000
- demo:   the demo stream's design (`demo.synthetic` default), p = 100, k* = 10, n = 2000, 20000
- strong: p = 200, k* = 20, n = 4000 (issue 34's strong-signal case)

For each n and seed the rows are written as one NPY file and one `ravel fit` process (release
build) per rule chooses a model:

- oracle:            `--method lasso --k K*` and `--method olsth --k K*` (told the true k)
- default:           `--select ebic` with no method (OLSth's k-path k = 1..min(p, 300, n / 2))
- default, cv_1se:   `--select cv_1se --folds 5` with no method
- lasso ebic:        `--method lasso --select ebic` (the refitted path, select's default now)
- lasso ebic, penalized: the same with `--no-refit` (the penalized estimates' criteria)
- lasso cv_1se:      `--method lasso --select cv_1se --folds 5` (refitted)
- mcp ebic:          `--method mcp --select ebic` (refitted)

The table gives, per design, n and rule, the detection rate DR = |S intersect S*| / |S*|
(mean over seeds), the mean size |S| of the chosen support, the mean false positives
|S \\ S*|, and the seconds of the whole process (reading, folding, extraction).

Run: cargo build --release && python3 scripts/detection_select.py [--seeds 5] [--designs table2 demo strong]
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
DESIGNS = {
    "table2": (1000, 100, [1000, 3000, 10000]),
    "demo": (100, 10, [2000, 20000]),
    "strong": (200, 20, [4000]),
}


def rules(k):
    return {
        f"oracle: lasso k = {k}": ["--method", "lasso", "--k", str(k)],
        f"oracle: olsth k = {k}": ["--method", "olsth", "--k", str(k)],
        "default: --select ebic (olsth k-path)": ["--select", "ebic"],
        "default: --select cv_1se (olsth k-path)": ["--select", "cv_1se", "--folds", "5"],
        "lasso ebic (refitted path)": ["--method", "lasso", "--select", "ebic"],
        "lasso ebic, penalized (--no-refit)": ["--method", "lasso", "--no-refit", "--select", "ebic"],
        "lasso cv_1se (refitted path)": ["--method", "lasso", "--select", "cv_1se", "--folds", "5"],
        "mcp ebic (refitted path)": ["--method", "mcp", "--select", "ebic"],
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
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--designs", nargs="+", default=list(DESIGNS), choices=list(DESIGNS))
    ap.add_argument("--ravel", default=os.path.join(ROOT, "target", "release", "ravel"))
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.designs:
            p, k, ns = DESIGNS[name]
            for n in ns:
                rs = rules(k)
                stats = {r: [] for r in rs}
                for seed in range(1, args.seeds + 1):
                    data, truth = design(n, p, k, seed)
                    path = os.path.join(tmp, f"{name}_{n}_{seed}.npy")
                    np.save(path, data)
                    for rule, flags in rs.items():
                        t0 = time.perf_counter()
                        out = subprocess.run(
                            [args.ravel, "fit", path, *flags], capture_output=True, text=True
                        )
                        secs = time.perf_counter() - t0
                        if out.returncode != 0:
                            sys.exit(f"{name} n = {n} {rule}: {out.stderr}")
                        model = json.loads(out.stdout)
                        chosen = {c["index"] for c in model["coefficients"]}
                        stats[rule].append(
                            (len(chosen & truth) / k, len(chosen), len(chosen - truth), secs)
                        )
                    os.remove(path)
                for rule, s in stats.items():
                    a = np.array(s)
                    rows.append((name, p, k, n, rule, 100 * a[:, 0].mean(), a[:, 1].mean(),
                                 a[:, 2].mean(), a[:, 2].max(), a[:, 3].mean()))
                print(f"{name} n = {n} done", file=sys.stderr)
    print(f"{args.seeds} seeds each")
    print()
    print("| design | n | rule | DR % | mean size | mean false positives | most false positives | s per fit |")
    print("|---|---|---|---|---|---|---|---|")
    for name, p, k, n, rule, dr, size, fp, fpmax, secs in rows:
        print(f"| {name} (p = {p}, k* = {k}) | {n} | {rule} | {dr:.1f} | {size:.1f} | {fp:.1f} "
              f"| {fpmax:.0f} | {secs:.2f} |")


if __name__ == "__main__":
    main()
