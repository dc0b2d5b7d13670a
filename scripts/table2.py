"""Paper 003's Table 2 (strong signal) through `ravel fit`, next to the paper's figures.

The design (003 section 5): p = 1000 features x = z 1 + u (z ~ N(0, 1), u ~ N(0, I), pairwise
correlation 0.5), k* = 100 true coefficients beta_{10 j} = 1 (0-based 9, 19, ..., 999),
y = x^T beta + N(0, 1). For each n and seed the rows are drawn here with numpy (independently
of ravel's own generator), written to an NPY file, and every method is asked for the model
with k = 100 nonzeros by a whole `ravel fit FILE --method M --k 100` process (release build),
with the defaults a user gets. Detection rate (DR) = the share of the 100 true features among
the selected ones; RMSE = root mean squared error of the model's predictions on 2000 fresh rows
of the same design. The paper averages 100 runs, this script `--seeds` (default 5). `--weak`
runs the weak-signal rows (beta = 0.01; n = 500, 1000, 10000 by default, 1e5 on request).
`--classification` runs Table 3 instead (y = sign(x^T beta + N(0, 1)), `--task classification`,
test AUC in place of RMSE; n = 1000, 10000, 30000 by default; FSA, OLSth, Lasso, MCP).

Run: cargo build --release && python3 scripts/table2.py [--seeds 5] [--n 300,500,...] [--weak]
     [--classification] [--methods olsth,fsa,lasso,mcp,elastic-net] [--extra 'fsa=--fsa-mu 10']
     [--markdown FILE]
It prints one row per n: the paper's DR, ravel's mean DR (and the range over seeds), the same
for RMSE, and the wall time of the ravel processes; `--markdown FILE` also writes the table
(docs/table2.md holds the strong and weak tables of one run each, with comments).
"""
import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time

import numpy as np

P, K = 1000, 100
# 003 Table 2, p = 1000, k = 100, strong signal: detection rate (%) and RMSE per n.
PAPER_DR = {
    "lasso": {300: 24.68, 500: 27.72, 1000: 32.14, 3000: 46.05, 10000: 72.40},
    "olsth": {300: 64.56, 500: 85.09, 1000: 94.53, 3000: 100, 10000: 100},
    "fsa": {300: 71.09, 500: 94.05, 1000: 99.81, 3000: 100, 10000: 100},
    "mcp": {300: 41.24, 500: 53.50, 1000: 73.71, 3000: 98.02, 10000: 100},
    "elastic-net": {300: 24.68, 500: 27.68, 1000: 32.12, 3000: 45.19, 10000: 72.42},
}
PAPER_RMSE = {
    "lasso": {300: 14.15, 500: 12.89, 1000: 11.63, 3000: 9.464, 10000: 6.07},
    "olsth": {300: 8.641, 500: 4.758, 1000: 2.657, 3000: 1.017, 10000: 1.003},
    "fsa": {300: 7.605, 500: 2.989, 1000: 1.136, 3000: 1.017, 10000: 1.003},
    "mcp": {300: 12.40, 500: 9.786, 1000: 6.282, 3000: 1.745, 10000: 1.003},
    "elastic-net": {300: 14.16, 500: 12.91, 1000: 11.61, 3000: 9.557, 10000: 6.042},
}
# The weak-signal half of Table 2 (beta = 0.01), n up to 1e5 (1e6 has no Lasso figure).
PAPER_DR_WEAK = {
    "lasso": {500: 11.77, 1000: 14.09, 10000: 31.58, 100000: 81.93},
    "olsth": {500: 10.66, 1000: 10.53, 10000: 22.48, 100000: 80.55},
    "fsa": {500: 11.18, 1000: 12.40, 10000: 32.47, 100000: 85.14},
    "mcp": {500: 12.82, 1000: 15.55, 10000: 32.32, 100000: 84.86},
    "elastic-net": {500: 11.70, 1000: 14.08, 10000: 31.54, 100000: 81.80},
}
PAPER_RMSE_WEAK = {
    "lasso": {500: 1.219, 1000: 1.128, 10000: 1.009, 100000: 1.001},
    "olsth": {500: 1.270, 1000: 1.075, 10000: 1.025, 100000: 1.003},
    "fsa": {500: 1.248, 1000: 1.169, 10000: 1.006, 100000: 1.003},
    "mcp": {500: 1.168, 1000: 1.049, 10000: 1.005, 100000: 1.003},
    "elastic-net": {500: 1.217, 1000: 1.124, 10000: 1.006, 100000: 1.003},
}
# Table 3: classification, y = sign(x^T beta + N(0, 1)), the same x; detection rate (%) and test
# AUC. The paper's columns OFSA, OLSth, OLasso, OMCP.
PAPER_DR_CLASS = {
    "fsa": {1000: 14.44, 10000: 38.89, 30000: 67.67, 100000: 94.95},
    "olsth": {1000: 9.90, 10000: 30.30, 30000: 59.32, 100000: 93.21},
    "lasso": {1000: 16.58, 10000: 34.70, 30000: 56.18, 100000: 86.90},
    "mcp": {1000: 18.57, 10000: 41.54, 30000: 67.52, 100000: 94.77},
}
PAPER_AUC_CLASS = {
    "fsa": {1000: 0.973, 10000: 0.995, 30000: 0.998, 100000: 1.000},
    "olsth": {1000: 0.975, 10000: 0.990, 30000: 0.996, 100000: 1.000},
    "lasso": {1000: 0.986, 10000: 0.996, 30000: 0.997, 100000: 0.999},
    "mcp": {1000: 0.992, 10000: 0.996, 30000: 0.998, 100000: 1.000},
}
PAPER_DR_CLASS_WEAK = {
    "fsa": {1000: 10.57, 10000: 19.41, 30000: 34.46, 100000: 64.84},
    "olsth": {1000: 9.98, 10000: 15.93, 30000: 27.35, 100000: 56.42},
    "lasso": {1000: 12.94, 10000: 22.55, 30000: 35.14, 100000: 61.07},
    "mcp": {1000: 12.47, 10000: 23.81, 30000: 37.70, 100000: 64.95},
}
PAPER_AUC_CLASS_WEAK = {
    "fsa": {1000: 0.783, 10000: 0.824, 30000: 0.831, 100000: 0.834},
    "olsth": {1000: 0.797, 10000: 0.815, 30000: 0.827, 100000: 0.833},
    "lasso": {1000: 0.823, 10000: 0.829, 30000: 0.832, 100000: 0.834},
    "mcp": {1000: 0.773, 10000: 0.830, 30000: 0.832, 100000: 0.834},
}

TRUTH = np.arange(9, P, 10)


def draw(n, rng, beta, classification=False):
    z = rng.standard_normal((n, 1))
    x = z + rng.standard_normal((n, P))
    y = beta * x[:, TRUTH].sum(axis=1) + rng.standard_normal(n)
    return x, (np.where(y > 0, 1.0, -1.0) if classification else y)


def auc(score, label):
    """Area under the ROC curve: the chance a positive scores above a negative (ties half)."""
    order = np.argsort(score, kind="mergesort")
    ranks = np.empty(len(score))
    s = score[order]
    i = 0
    while i < len(s):  # average ranks over ties
        j = i
        while j + 1 < len(s) and s[j + 1] == s[i]:
            j += 1
        ranks[order[i:j + 1]] = (i + j) / 2.0 + 1.0
        i = j + 1
    pos = label > 0
    n_pos, n_neg = pos.sum(), (~pos).sum()
    return (ranks[pos].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg)


def fmt(v, spec):
    return "-" if v is None else format(v, spec)


def fit(ravel, path, method, extra):
    cmd = [ravel, "fit", path, "--method", method, "--k", str(K)] + extra
    t = time.perf_counter()
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return json.loads(out.stdout), time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--n", default=None, help="default 300,500,1000,3000,10000 (weak: 500,1000,10000)")
    ap.add_argument("--weak", action="store_true", help="the weak-signal rows (beta = 0.01)")
    ap.add_argument("--classification", action="store_true",
                    help="Table 3: y = sign(x^T beta + noise), `--task classification`, AUC "
                         "instead of RMSE; n = 1000,10000,30000 by default; methods fsa, olsth, lasso, mcp")
    ap.add_argument("--methods", default="olsth,fsa,lasso,mcp,elastic-net")
    ap.add_argument(
        "--extra",
        action="append",
        default=[],
        help="METHOD=FLAGS: extra ravel fit flags for one method (repeatable)",
    )
    ap.add_argument("--ravel", default="target/release/ravel")
    ap.add_argument("--dir", default=None, help="where the NPY files go (default: a temp dir)")
    ap.add_argument("--markdown", default=None)
    args = ap.parse_args()
    cls = args.classification
    default_n = "1000,10000,30000" if cls else ("500,1000,10000" if args.weak else "300,500,1000,3000,10000")
    ns = [int(v) for v in (args.n or default_n).split(",")]
    beta = 0.01 if args.weak else 1.0
    if cls:
        paper_dr = PAPER_DR_CLASS_WEAK if args.weak else PAPER_DR_CLASS
        paper_rmse = PAPER_AUC_CLASS_WEAK if args.weak else PAPER_AUC_CLASS
        if args.methods == ap.get_default("methods"):
            args.methods = "fsa,olsth,lasso,mcp"
    else:
        paper_dr = PAPER_DR_WEAK if args.weak else PAPER_DR
        paper_rmse = PAPER_RMSE_WEAK if args.weak else PAPER_RMSE
    task = ["--task", "classification"] if cls else []
    methods = args.methods.split(",")
    extra = {m: [] for m in methods}
    for e in args.extra:
        m, flags = e.split("=", 1)
        extra[m] = shlex.split(flags)
    work = args.dir or tempfile.mkdtemp(prefix="ravel-table2-")
    os.makedirs(work, exist_ok=True)

    dr = {(m, n): [] for m in methods for n in ns}
    rmse = {(m, n): [] for m in methods for n in ns}
    secs = {(m, n): 0.0 for m in methods for n in ns}
    notes = {}
    start = time.perf_counter()
    for n in ns:
        for seed in range(args.seeds):
            rng = np.random.default_rng([n, seed])
            x, y = draw(n, rng, beta, cls)
            xt, yt = draw(2000, rng, beta, cls)
            path = os.path.join(work, f"table2-n{n}-s{seed}.npy")
            np.save(path, np.column_stack([x, y]))
            del x, y
            for m in methods:
                model, dt = fit(args.ravel, path, m, task + extra[m])
                secs[(m, n)] += dt
                idx = np.array([c["index"] for c in model["coefficients"]], dtype=int)
                val = np.array([c["value"] for c in model["coefficients"]])
                dr[(m, n)].append(100.0 * np.isin(TRUTH, idx).sum() / K)
                pred = model["intercept"] + (xt[:, idx] @ val if len(idx) else 0.0)
                if cls:
                    rmse[(m, n)].append(float(auc(np.broadcast_to(pred, yt.shape), yt)))
                else:
                    rmse[(m, n)].append(float(np.sqrt(np.mean((yt - pred) ** 2))))
                for note in model["diagnostics"].get("notes", []):
                    notes.setdefault((m, n), set()).add(note.split(";")[0])
            os.remove(path)
            print(f"n = {n} seed {seed} done ({time.perf_counter() - start:.0f} s)", file=sys.stderr)
    total = time.perf_counter() - start

    lines = []
    flags = ", ".join(f"{m}: `{' '.join(extra[m])}`" for m in methods if extra[m])
    score = "AUC" if cls else "RMSE"
    lines.append(
        f"Paper 003 Table {3 if cls else 2} (p = 1000, k* = 100, correlation 0.5, beta = {beta:g}"
        f"{', y = sign(x^T beta + noise)' if cls else ''}), `ravel fit --k 100{' --task classification' if cls else ''}`"
        f" with the defaults{' except ' + flags if flags else ''}; {args.seeds} seeds "
        f"(paper: 100 runs). DR in %, mean [min, max] over seeds; {score} on 2000 fresh rows."
    )
    lines.append("")
    lines.append(f"| method | n | paper DR | ravel DR | paper {score} | ravel {score} | ravel s/fit |")
    lines.append("|---|---:|---:|---:|---:|---:|---:|")
    for m in methods:
        for n in ns:
            d, r = np.array(dr[(m, n)]), np.array(rmse[(m, n)])
            lines.append(
                f"| {m} | {n} | {fmt(paper_dr[m].get(n), '.2f')} | {d.mean():.2f} [{d.min():.0f}, {d.max():.0f}]"
                f" | {fmt(paper_rmse[m].get(n), '.3g')} | {r.mean():.3g} | {secs[(m, n)] / args.seeds:.2f} |"
            )
    lines.append("")
    lines.append(
        f"Wall time {total:.0f} s in all (data generation included), "
        f"{sum(secs.values()):.0f} s of it in `ravel fit` processes."
    )
    if notes:
        lines.append("")
        lines.append("Notes ravel gave (first clause, distinct):")
        for (m, n), ns_ in sorted(notes.items(), key=lambda kv: (kv[0][0], kv[0][1])):
            for note in sorted(ns_):
                lines.append(f"- {m}, n = {n}: {note}")
    text = "\n".join(lines)
    print(text)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write("# Paper 003 Table 2 through ravel fit\n\n")
            f.write("Made by `python3 scripts/table2.py --markdown docs/table2.md` "
                    "(release build).\n\n")
            f.write(text + "\n")


if __name__ == "__main__":
    main()
