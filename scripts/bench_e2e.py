"""End-to-end speed of `ravel fit` next to numpy doing the same job, as whole processes.

The job: read a float64 NPY file of n rows (p features and y as the last column) and return
the OLS model of all the rows. ravel: `ravel fit FILE --method ols` (release build). The peer:
a Python process that memory-maps the file with numpy, accumulates X'X and the column sums
over batches of 4096 rows (BLAS), centres, and solves. Both are timed from process start to
exit, in interleaved rounds (ravel, numpy, ravel, numpy, ...) so that load on the machine
hits both alike; the table shows the medians and numpy's time over ravel's (> 1: ravel is
faster). C-order and Fortran-order files are both measured.

Run: python3 -m pip install numpy && cargo build --release && python3 scripts/bench_e2e.py
     [--rounds 5] [--dir /tmp/ravel-bench] [--ravel PATH]
"""
import argparse
import os
import statistics
import subprocess
import sys
import time

import numpy as np

PEER = r"""
import sys
import numpy as np
x = np.load(sys.argv[1], mmap_mode="r")
n, w = x.shape
p = w - 1
g = np.zeros((w, w))
s = np.zeros(w)
for i in range(0, n, 4096):
    b = np.asarray(x[i:i + 4096])
    g += b.T @ b
    s += b.sum(axis=0)
mean = s / n
c = g / n - np.outer(mean, mean)
beta = np.linalg.solve(c[:p, :p], c[:p, p])
print(mean[p] - mean[:p] @ beta, beta[:3])
"""


def make(path, n, p, fortran):
    if os.path.exists(path):
        return
    rng = np.random.default_rng(7)
    x = rng.standard_normal((n, p + 1))
    x[:, p] = x[:, :10] @ np.arange(1, 11) + rng.standard_normal(n)
    np.save(path, np.asfortranarray(x) if fortran else x)


def timed(cmd):
    t = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--dir", default="/tmp/ravel-bench")
    ap.add_argument("--ravel", help="the ravel binary (default target/release/ravel)")
    args = ap.parse_args()
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ravel = args.ravel or os.path.join(root, "target", "release", "ravel")
    if not os.path.exists(ravel):
        sys.exit("build the release binary first: cargo build --release")
    os.makedirs(args.dir, exist_ok=True)
    peer = os.path.join(args.dir, "peer_ols.py")
    with open(peer, "w") as f:
        f.write(PEER)
    cases = []
    for p, n in [(100, 400_000), (1000, 40_000)]:
        for order in ["C", "F"]:
            path = os.path.join(args.dir, f"p{p}_n{n}_{order}.npy")
            make(path, n, p, order == "F")
            cases.append((p, n, order, path))
    print(f"numpy {np.__version__}, {args.rounds} interleaved rounds, whole processes")
    print(f"{'job':<40} {'ravel s':>9} {'numpy s':>9} {'numpy/ravel':>12} {'ravel rows/s':>13}")
    for p, n, order, path in cases:
        r, q = [], []
        for _ in range(args.rounds):
            r.append(timed([ravel, "fit", path, "--method", "ols"]))
            q.append(timed([sys.executable, peer, path]))
        rm, qm = statistics.median(r), statistics.median(q)
        job = f"fit OLS, NPY {order}-order, p={p} n={n}"
        print(f"{job:<40} {rm:>9.3f} {qm:>9.3f} {qm / rm:>12.2f} {n / rm:>13.0f}")


if __name__ == "__main__":
    main()
