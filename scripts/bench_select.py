"""What choosing k costs in `ravel fit` (issue 17): one Lasso path, the same path with
`--select ebic`, and `--select cv --folds 5`, as whole processes (release build) on the same
NPY file, in interleaved rounds (path, ebic, cv, path, ebic, cv, ...) so that load on the
machine hits all alike. The table shows the median seconds per process, the rows per second
of the whole run (reading and folding included), and each over the plain path.

Files: paper 003's Table 2 design (x = z 1 + u, k* = p / 10 coefficients of 1, noise 1) at
the given p and n, written once to --dir.

Run: cargo build --release && python3 scripts/bench_select.py [--rounds 5]
     [--sizes 100:20000 1000:10000] [--dir /tmp/ravel-bench-select]
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
RUNS = {
    "path (100 lambdas)": ["--method", "lasso", "--path"],
    "select ebic": ["--method", "lasso", "--select", "ebic"],
    "select cv, K = 5": ["--method", "lasso", "--select", "cv", "--folds", "5"],
}


def write(path, p, n, seed=1):
    if os.path.exists(path):
        return
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, 1)) + rng.standard_normal((n, p))
    beta = np.zeros(p)
    beta[:: 10] = 1.0
    y = x @ beta + rng.standard_normal(n)
    np.save(path, np.hstack([x, y[:, None]]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--sizes", nargs="+", default=["100:20000", "1000:10000"])
    ap.add_argument("--dir", default="/tmp/ravel-bench-select")
    ap.add_argument("--ravel", default=os.path.join(ROOT, "target", "release", "ravel"))
    args = ap.parse_args()
    os.makedirs(args.dir, exist_ok=True)
    print("| p | n | run | median s | rows/s | over the path |")
    print("|---|---|---|---|---|---|")
    for size in args.sizes:
        p, n = map(int, size.split(":"))
        path = os.path.join(args.dir, f"t2_{p}_{n}.npy")
        write(path, p, n)
        times = {name: [] for name in RUNS}
        for _ in range(args.rounds):
            for name, flags in RUNS.items():
                t0 = time.perf_counter()
                out = subprocess.run([args.ravel, "fit", path, *flags], capture_output=True)
                times[name].append(time.perf_counter() - t0)
                if out.returncode != 0:
                    sys.exit(out.stderr.decode())
        base = statistics.median(times["path (100 lambdas)"])
        for name, t in times.items():
            med = statistics.median(t)
            print(f"| {p} | {n} | {name} | {med:.3f} | {n / med:,.0f} | {med / base:.2f} |")


if __name__ == "__main__":
    main()
