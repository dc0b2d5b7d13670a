#!/usr/bin/env python3
"""Paper 004's Tables 4-5 on the stand-ins of scripts/make_wide.py: `ravel fit --wide` (the
randomized Frank-Wolfe path on the raw columns) against scikit-learn's `lasso_path` (coordinate
descent, the glmnet-style peer) on the same centered sparse CSC matrix, whole processes, release
build, interleaved rounds.

Protocol (004 section 5): scikit-learn runs first in each round: its 100-alpha path from
alpha_max to alpha_max / 100 (eps = 1e-2, its default tol 1e-4), on the CSC matrix with the
column means passed as X_offset (implicit centering, as LassoCV does for sparse X), so both
solve the same centered problem; delta_max is the l1 norm of its last solution, and ravel
runs its 100 deltas from delta_max / 100 to delta_max with --delta-max (as 004 takes delta_max
from glmnet). A second ravel run finds delta_max itself (no --delta-max).

With --skglm PYTHON (a Python where skglm is installed), skglm's Lasso runs as a second peer
after scikit-learn (see SKGLM below); --no-sklearn leaves scikit-learn out, and delta_max then
comes from skglm's path. --step-tol EPS sets ravel's step rule (004's, its default 1e-3);
--defaults runs ravel with no flag but --wide and --test, as a newcomer would.

Measured per process (os.wait4): wall seconds, CPU seconds (user + system), peak RSS; from
their answers: the solver's own seconds, iterations (ravel: FW iterations; sklearn: CD epochs,
sum of n_iter), dot products (ravel: column dot products; sklearn: epochs x p, as 004 counts
a CD cycle as p), mean active features along the path, and with a test file the least test
MSE along the path.

Run (release build first: cargo build --release --bin ravel):
  /usr/bin/python3 scripts/bench_wide.py --data DIR --sets pyrim tfidf --rounds 3
Prints a JSON line per run and a Markdown table at the end (docs/table5.md).
"""
import argparse
import json
import pathlib
import resource
import subprocess
import sys
import time

# What both Python peers share: reading the training file (NPY or LIBSVM) into CSC, and, after
# their path (coefs: p x points, icpts: each point's intercept, nnz, out), the least test MSE
# along it when there is a test file.
READ = r'''
import json, sys, time
import numpy as np
from scipy import sparse
t0 = time.time()
train, test = sys.argv[1], sys.argv[2]
def load(path):
    if path.endswith(".npy"):
        a = np.load(path)
        return sparse.csc_matrix(a[:, :-1]), a[:, -1].copy()
    from sklearn.datasets import load_svmlight_file
    x, y = load_svmlight_file(path)
    return x.tocsc(), y
x, y = load(train)
'''
TEST_MSE = r'''
if test != "-":
    xt, yt = load(test)
    if xt.shape[1] < p:
        xt = sparse.hstack([xt, sparse.csc_matrix((xt.shape[0], p - xt.shape[1]))]).tocsc()
    xt = xt[:, :p]
    pred = np.asarray(xt @ coefs) + icpts
    mse = ((pred - yt[:, None]) ** 2).mean(axis=0)
    k = int(np.argmin(mse))
    out.update(test_mse_min=float(mse[k]), best_index=k, best_nonzeros=int(nnz[k]))
print(json.dumps(out))
'''

SKLEARN = READ + r'''
from sklearn.linear_model import lasso_path
n, p = x.shape
mean = np.asarray(x.mean(axis=0)).ravel()
ym = y.mean()
# One lasso_path call per alpha, warm-started from the previous point (what lasso_path does
# inside its own loop), so that a progress line per point can be written to argv[3]: a path
# that is stopped at its CPU cap still tells how far it came and the test MSE it reached.
progress = open(sys.argv[3], "w") if len(sys.argv) > 3 else None
if progress and test != "-":
    xt, yt = load(test)
    if xt.shape[1] < p:
        xt = sparse.hstack([xt, sparse.csc_matrix((xt.shape[0], p - xt.shape[1]))]).tocsc()
    xt = xt[:, :p]
t1 = time.time()
alpha_max = np.abs(x.T @ (y - ym) - mean * (y - ym).sum()).max() / n
alphas = alpha_max * np.geomspace(1.0, 1e-2, 100)
coefs, iters, c = np.zeros((p, len(alphas))), [], np.zeros(p)
for i, a in enumerate(alphas):
    _, cs, _, it = lasso_path(x, y - ym, alphas=[a], coef_init=c, X_offset=mean,
                              X_scale=np.ones(p), copy_X=False, return_n_iter=True)
    c = cs[:, 0].copy()
    coefs[:, i] = c
    iters.append(int(it[0]))
    if progress:
        line = {"point": i + 1, "alpha": float(a), "n_iter": iters[-1], "nonzeros": int((c != 0).sum()),
                "l1": float(np.abs(c).sum()), "cpu": time.process_time(), "wall": time.time() - t0}
        if test != "-":
            line["test_mse"] = float((((xt @ c) + ym - mean @ c - yt) ** 2).mean())
        progress.write(json.dumps(line) + "\n")
        progress.flush()
t2 = time.time()
nnz = (coefs != 0).sum(axis=0)
out = {"n": n, "p": p, "nnz": int(x.nnz), "read_seconds": t1 - t0, "path_seconds": t2 - t1,
       "iterations": int(np.sum(iters)), "dot_products": int(np.sum(iters)) * p,
       "mean_active_features": float(nnz.mean()),
       "delta_max": float(np.abs(coefs[:, -1]).sum())}
icpts = ym - mean @ coefs
''' + TEST_MSE

# skglm (working sets and Anderson acceleration, the fastest Python Lasso; issue 44 names it as
# a second peer "where it installs"): its Lasso with an unpenalized intercept, which is the
# Lasso of the centered problem, warm-started along the same 100 alphas as lasso_path's (from
# alpha_max = ||X_c^T y_c||_inf / n down to alpha_max / 100), tol 1e-4. Its iterations are
# working-set iterations, not epochs, so no dot-product count. The first fit includes numba's
# compilation of its kernels (a few CPU seconds), part of the whole process as a user runs it.
SKGLM = READ + r'''
from skglm import Lasso
n, p = x.shape
ym = y.mean()
t1 = time.time()
alpha_max = np.abs(x.T @ (y - ym)).max() / n
alphas = alpha_max * np.geomspace(1.0, 1e-2, 100)
clf = Lasso(alpha=alphas[0], fit_intercept=True, warm_start=True, tol=1e-4)
coefs, icpts, iters = np.zeros((p, len(alphas))), np.zeros(len(alphas)), 0
for i, a in enumerate(alphas):
    clf.alpha = a
    clf.fit(x, y)
    coefs[:, i], icpts[i] = clf.coef_, clf.intercept_
    iters += int(np.sum(clf.n_iter_))
t2 = time.time()
nnz = (coefs != 0).sum(axis=0)
out = {"n": n, "p": p, "nnz": int(x.nnz), "read_seconds": t1 - t0, "path_seconds": t2 - t1,
       "iterations": iters, "dot_products": float("nan"),
       "mean_active_features": float(nnz.mean()),
       "delta_max": float(np.abs(coefs[:, -1]).sum())}
''' + TEST_MSE


def measured(cmd, cpu_cap=None):
    """A whole process under /usr/bin/time: wall and CPU seconds (user + system), peak RSS.
    With cpu_cap (CPU seconds) the process is stopped there (RLIMIT_CPU); its stdout is then
    None and the figures are those at the cap."""
    def cap():
        if cpu_cap:
            resource.setrlimit(resource.RLIMIT_CPU, (int(cpu_cap), int(cpu_cap) + 5))
    t = time.time()
    proc = subprocess.run(["/usr/bin/time", "-f", "%M %U %S"] + cmd, capture_output=True,
                          text=True, preexec_fn=cap)
    wall = time.time() - t
    last = proc.stderr.strip().splitlines()[-1].split() if proc.stderr.strip() else []
    if proc.returncode != 0 and not (cpu_cap and len(last) == 3):
        sys.exit(f"{' '.join(cmd)} failed:\n{proc.stderr[-3000:]}")
    peak_kb, user, system = int(last[0]), float(last[1]), float(last[2])
    out = proc.stdout if proc.returncode == 0 else None
    return out, {"wall": wall, "cpu": user + system, "peak_mib": peak_kb / 1024}


def files(data, name):
    if name in ("pyrim", "triazines"):
        return data / f"{name}.npy", None
    return data / f"{name}.train.svm", data / f"{name}.test.svm"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", type=pathlib.Path, required=True)
    ap.add_argument("--sets", nargs="+", default=["pyrim", "tfidf"])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--fraction", type=float, default=0.01)
    ap.add_argument("--tol", type=float, default=None, help="ravel --tol (default its own)")
    ap.add_argument("--step-tol", type=float, default=None,
                    help="ravel --step-tol: 004's own stopping rule (its experiments: 1e-3)")
    ap.add_argument("--ravel", default="target/release/ravel")
    ap.add_argument("--python", default="/usr/bin/python3")
    ap.add_argument("--no-search", action="store_true", help="skip the run without --delta-max")
    ap.add_argument("--skglm", default=None,
                    help="a Python with skglm installed: adds skglm's path as a second peer")
    ap.add_argument("--cpu-cap", type=float, default=None,
                    help="stop scikit-learn's path after this many CPU seconds (RLIMIT_CPU); "
                         "its per-point progress (--progress) says how far it came")
    ap.add_argument("--progress", type=pathlib.Path, default=None,
                    help="a directory: scikit-learn writes SET.sklearn.progress.jsonl there, one "
                         "line per path point (its CPU seconds, iterations, test MSE)")
    ap.add_argument("--no-ravel", action="store_true", help="run the peers only")
    ap.add_argument("--keep", type=pathlib.Path, default=None,
                    help="a directory: ravel's whole answers go there (SET.TOOL.ROUND.json)")
    ap.add_argument("--defaults", action="store_true",
                    help="ravel as a newcomer runs it: `ravel fit TRAIN --wide --test TEST`, "
                         "every other flag its default (no --sample-fraction, --seed, "
                         "--delta-max; ravel finds delta_max itself)")
    ap.add_argument("--no-sklearn", action="store_true",
                    help="skip scikit-learn's lasso_path (delta_max then from skglm's path)")
    a = ap.parse_args()
    results = {}
    for name in a.sets:
        train, test = files(a.data, name)
        rows = results.setdefault(
            name, {"sklearn": [], "skglm": [], "ravel": [], "ravel_search": [],
                   "ravel_defaults": []})
        for r in range(a.rounds):
            peers = [] if a.no_sklearn else [("sklearn", a.python, SKLEARN)]
            if a.skglm:
                peers.append(("skglm", a.skglm, SKGLM))
            if not peers:
                sys.exit("--no-sklearn needs --skglm: delta_max comes from a peer's path")
            done = []  # the peers whose path finished this round
            for tool, python, program in peers:
                cmd = [python, "-c", program, str(train), str(test or "-")]
                prog = None
                if tool == "sklearn" and a.progress:
                    prog = a.progress / f"{name}.sklearn.progress.jsonl"
                    cmd.append(str(prog))
                out, m = measured(cmd, a.cpu_cap if tool == "sklearn" else None)
                if out is None:
                    lines = prog.read_text().splitlines() if prog and prog.exists() else []
                    reached = json.loads(lines[-1]) if lines else {}
                    print(json.dumps({"set": name, "round": r, "tool": tool, "unfinished": True,
                                      "cpu_cap": a.cpu_cap, "reached": reached, **m}),
                          flush=True)
                    continue
                sk = json.loads(out)
                sk.update(m)
                rows[tool].append(sk)
                done.append(tool)
                print(json.dumps({"set": name, "round": r, "tool": tool, **sk}), flush=True)
            if a.no_ravel or not done:
                continue
            # delta_max from the first finished peer's last solution (scikit-learn's unless
            # skipped or stopped at its CPU cap).
            sk = rows[done[0]][-1]
            base = [a.ravel, "fit", str(train), "--wide", "--sample-fraction", str(a.fraction),
                    "--seed", str(r)]
            if test:
                base += ["--test", str(test)]
            if a.tol:
                base += ["--tol", str(a.tol)]
            if a.step_tol:
                base += ["--step-tol", str(a.step_tol)]
            runs = [("ravel", base + ["--delta-max", repr(sk["delta_max"])])]
            if not a.no_search:
                runs.append(("ravel_search", base))
            if a.defaults:
                runs = [("ravel_defaults", [a.ravel, "fit", str(train), "--wide"]
                         + (["--test", str(test)] if test else []))]
            for tool, cmd in runs:
                out, m = measured(cmd)
                if a.keep:
                    (a.keep / f"{name}.{tool}.{r}.json").write_text(out)
                rv = json.loads(out)
                row = {k: rv[k] for k in ("n", "p", "nnz", "iterations", "dot_products",
                                          "mean_active_features", "delta_max",
                                          "memory_estimate")}
                row["read_seconds"] = rv["seconds"]["read"]
                row["path_seconds"] = rv["seconds"]["path"]
                row["csc_mib"] = (rv["nnz"] * 12 + (rv["p"] + 1) * 8 + rv["n"] * 8) / 2**20
                row["not_converged"] = sum(1 for p in rv["path"] if not p["converged"])
                if rv.get("best"):
                    row["test_mse_min"] = rv["best"]["test_mse"]
                    row["best_nonzeros"] = rv["best"]["nonzeros"]
                row.update(m)
                rows[tool].append(row)
                print(json.dumps({"set": name, "round": r, "tool": tool, **row}), flush=True)
    table(results)


def med(xs):
    xs = sorted(xs)
    return xs[len(xs) // 2] if xs else float("nan")


def table(results):
    print("\n| set | solver | wall s | CPU s | path s | iterations | dot products | "
          "active (mean) | peak MiB | CSC MiB | test MSE min |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name, rows in results.items():
        for tool, rs in rows.items():
            if not rs:
                continue
            f = lambda k: med([r.get(k, float("nan")) for r in rs])
            print(f"| {name} | {tool} | {f('wall'):.2f} | {f('cpu'):.2f} | "
                  f"{f('path_seconds'):.2f} | {f('iterations'):.0f} | {f('dot_products'):.3g} | "
                  f"{f('mean_active_features'):.1f} | {f('peak_mib'):.0f} | "
                  f"{f('csc_mib') if 'csc_mib' in rs[0] else float('nan'):.0f} | "
                  f"{f('test_mse_min'):.5f} |")


if __name__ == "__main__":
    main()
