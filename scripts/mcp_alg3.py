"""Where paper 003's MCP column of Table 2 comes from, measured: ravel's MCP k-model (coordinate
descent to convergence from two starts, docs/methods.md "Estimators") against paper 003's Algorithm 3 as the
paper writes it (b = 0, then T steps b <- Theta(b - eta (S_xx b - S_xy); eta lambda) with MCP's
firm threshold, eta = 1 / largest eigenvalue of S_xx), implemented here in numpy,
independently of ravel, with lambda bisected until Algorithm 3 returns exactly k = 100 nonzeros.

Same design and seeds as scripts/table2.py (p = 1000, k* = 100, correlation 0.5, beta = 1).
For each support it prints the detection rate and the training least-squares loss of the OLS
refit on that support (1/2n ||y - X_S b_S||^2 on standardized columns, what the k-model's refit
minimizes): with k fixed, the lower loss is the better k-sparse fit of the data.

`--classification` uses Table 3's design (y = sign(x^T beta + N(0, 1)); ravel with `--task
classification`, Algorithm 3 on least squares on the +-1 labels, which for balanced classes
is the class-weighted problem up to the intercept).
`--weak` uses the weak-signal design (beta = 0.01) and the paper's weak column
(docs/table2.md, "Weak-signal MCP at n = 1000").
Run: cargo build --release && python3 scripts/mcp_alg3.py [--n 300,500,1000] [--seeds 5]
     [--T 1000,3000,5000] [--gamma 3] [--classification | --weak]
(about 20 s per n, seed and T on 2 cores.)
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from table2 import K, PAPER_DR, PAPER_DR_CLASS, PAPER_DR_WEAK, TRUTH, draw  # noqa: E402


def standardized(x, y):
    """S_xx and S_xy of the centred, unit-variance columns (population sd, as ravel), and
    centred y's second moment."""
    xc = x - x.mean(0)
    xs = xc / np.sqrt((xc * xc).mean(0))
    yc = y - y.mean()
    n = len(y)
    return xs.T @ xs / n, xs.T @ yc / n, yc @ yc / n


def prox_mcp(z, lam, gamma, eta):
    """argmin_b (b - z)^2 / (2 eta) + MCP(b; lam, gamma), for gamma > eta (the firm threshold)."""
    a = np.abs(z)
    shrunk = np.sign(z) * (a - eta * lam) / (1.0 - eta / gamma)
    return np.where(a <= eta * lam, 0.0, np.where(a <= gamma * lam, shrunk, z))


def algorithm3(q, c, lam, gamma, eta, steps):
    b = np.zeros_like(c)
    for _ in range(steps):
        b = prox_mcp(b - eta * (q @ b - c), lam, gamma, eta)
    return b


def algorithm3_k(q, c, gamma, steps, k):
    """Algorithm 3 at the lambda (bisected in log scale) where it returns k nonzeros."""
    eta = 1.0 / np.linalg.eigvalsh(q)[-1]
    hi, lo = np.abs(c).max(), np.abs(c).max() * 1e-4
    best = None
    for _ in range(40):
        lam = np.sqrt(hi * lo)
        b = algorithm3(q, c, lam, gamma, eta, steps)
        nnz = np.count_nonzero(b)
        if best is None or abs(nnz - k) <= abs(np.count_nonzero(best) - k):
            best = b
        if nnz == k:
            break
        if nnz > k:
            lo = lam
        else:
            hi = lam
    return np.flatnonzero(best)


def refit_loss(q, c, yy, support):
    """1/2 of the training mean squared error of the OLS refit on `support` (standardized)."""
    qs = q[np.ix_(support, support)]
    bs = np.linalg.lstsq(qs, c[support], rcond=None)[0]
    return 0.5 * (yy - c[support] @ bs)


def ravel_support(ravel, x, y, gamma, work, task):
    path = os.path.join(work, "mcp.npy")
    np.save(path, np.column_stack([x, y]))
    cmd = [ravel, "fit", path, "--method", "mcp", "--k", str(K), "--gamma", str(gamma), "--task", task]
    out = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    return np.array(sorted(c["index"] for c in out["coefficients"] if c["value"] != 0.0))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", default="300,500,1000")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--T", default="1000,3000,5000", help="Algorithm 3 step counts")
    ap.add_argument("--gamma", type=float, default=3.0)
    ap.add_argument("--ravel", default="target/release/ravel")
    ap.add_argument("--classification", action="store_true",
                    help="Table 3's design (y = sign(x^T beta + noise)); Algorithm 3 on least squares on the +-1 "
                         "labels (ravel: --task classification, class-weighted, equal weights)")
    ap.add_argument("--weak", action="store_true",
                    help="the weak-signal design (beta = 0.01, Table 2's second half; regression only)")
    args = ap.parse_args()
    beta = 0.01 if args.weak else 1.0
    ns = [int(v) for v in args.n.split(",")]
    steps = [int(v) for v in args.T.split(",")]
    work = tempfile.mkdtemp(prefix="ravel-mcp-")
    rows = []
    for n in ns:
        dr = {s: [] for s in ["ravel"] + steps}
        loss = {s: [] for s in ["ravel"] + steps}
        for seed in range(args.seeds):
            rng = np.random.default_rng([n, seed])  # scripts/table2.py's draw for (n, seed)
            x, y = draw(n, rng, beta, args.classification)
            q, c, yy = standardized(x, y)
            task = "classification" if args.classification else "regression"
            supports = {"ravel": ravel_support(args.ravel, x, y, args.gamma, work, task)}
            for t in steps:
                supports[t] = algorithm3_k(q, c, args.gamma, t, K)
            for s, sup in supports.items():
                dr[s].append(100.0 * np.isin(TRUTH, sup).sum() / K)
                loss[s].append(refit_loss(q, c, yy, sup))
            print(f"n = {n} seed {seed} done", file=sys.stderr)
        cells = [f"{np.mean(dr[s]):.1f} / {np.mean(loss[s]):.3g}" for s in ["ravel"] + steps]
        table = PAPER_DR_CLASS if args.classification else (PAPER_DR_WEAK if args.weak else PAPER_DR)
        paper = table["mcp"].get(n, "-")
        rows.append(f"| {n} | {paper} | " + " | ".join(cells) + " |")
    head = ["n", "paper DR"] + ["ravel"] + [f"Alg. 3, T = {t}" for t in steps]
    signal = "weak signal (beta = 0.01)" if args.weak else "beta = 1"
    print(f"MCP (gamma = {args.gamma:g}) k = 100, {signal}, {args.seeds} seeds: detection rate % / training loss of the OLS refit on the support")
    print()
    print("| " + " | ".join(head) + " |")
    print("|" + "---:|" * len(head))
    print("\n".join(rows))


if __name__ == "__main__":
    main()
