#!/usr/bin/env python3
"""The Python package's speed (docs/benchmarks.md, "Python"): `partial_fit` on float64 numpy
arrays against `ravel fit` on the same rows, and scikit-learn's LinearRegression.fit and
SGDRegressor.partial_fit and River's LinearRegression.learn_one, in rows/s, with each model's
R^2 on 20,000 held-out rows of the same design.

Both ravel figures are whole processes, started and timed from here (wall time, and the
child's user + system CPU seconds from wait4), in interleaved rounds after one warm-up of each
(the files are then in the page cache for both):
- `ravel fit xy.npy --method ols`: the NPY file of the rows with y as its last column,
  memory-mapped by ravel (docs/benchmarks.md: the fold packs the rows from the mapped pages),
  folded in its default batches of 1,024 rows, OLS extracted, the model printed as JSON.
  With --csv also `ravel fit xy.csv` (the same rows printed %.17g), which parses text.
- a Python process: starts the interpreter, imports numpy and ravel_lm's OLS (which imports
  no scikit-learn, scipy or pandas since issue 61; the child reports any it found loaded),
  memory-maps x.npy and y.npy (the same rows: np.load(mmap_mode="r"), so neither side copies
  the file into its own memory first), calls `OLS().partial_fit` on chunks of --chunk rows
  and reads `coef_` (the extraction). Its own timer also gives the calls alone. And the same
  with `ravel_lm.Stats.update` and `Stats.model` (the statistics without the estimator).
The other libraries are timed in-process on arrays in memory (fit, or one pass of
partial_fit / learn_one), River on the first --river-rows rows (its rate per row does not
depend on n) and said so.

    python -m maturin build --release -m python/Cargo.toml   # or maturin develop --release
    cargo build --release --bin ravel
    target/pyenv/bin/python scripts/bench_python.py --rounds 3
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

CHILD = r"""
import json, sys, time
t0 = time.perf_counter()
import numpy as np
from ravel_lm import OLS
t1 = time.perf_counter()
x = np.load(sys.argv[1], mmap_mode="r"); y = np.load(sys.argv[2], mmap_mode="r")
chunk = int(sys.argv[3])
est = OLS()
for i in range(0, len(y), chunk):
    est.partial_fit(x[i:i + chunk], y[i:i + chunk])
coef = est.coef_
t2 = time.perf_counter()
print(json.dumps({"imports": t1 - t0, "calls": t2 - t1, "intercept": est.intercept_,
                  "coef": coef.tolist(),
                  "loaded": [m for m in ("sklearn", "scipy", "pandas") if m in sys.modules]}))
"""

# The same fold without the estimator: the statistics themselves.
CHILD_STATS = r"""
import json, sys, time
t0 = time.perf_counter()
import numpy as np
from ravel_lm import Stats
t1 = time.perf_counter()
x = np.load(sys.argv[1], mmap_mode="r"); y = np.load(sys.argv[2], mmap_mode="r")
chunk = int(sys.argv[3])
s = Stats(x.shape[1])
for i in range(0, len(y), chunk):
    s.update(x[i:i + chunk], y[i:i + chunk])
model = json.loads(s.model('{"method": "ols"}'))
t2 = time.perf_counter()
print(json.dumps({"imports": t1 - t0, "calls": t2 - t1}))
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


def run(cmd):
    """A child process: (wall s, CPU s of the child, stdout)."""
    t = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = proc.stdout.read(), proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        sys.exit(f"{cmd[0]} failed ({proc.returncode}): {err.decode()[-2000:]}")
    return wall, usage.ru_utime + usage.ru_stime, out


def uptime():
    with open("/proc/loadavg") as f:
        return " / ".join(f.read().split()[:3])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ravel", default=os.path.join(ROOT, "target", "release", "ravel"))
    ap.add_argument("--dir", default=os.path.join(ROOT, "target", "bench-python"))
    ap.add_argument("--sizes", default="1000000x100,100000x1000")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--chunk", type=int, default=10000)
    ap.add_argument("--river-rows", default="20000,2000",
                    help="River's rows for each size (one number for all)")
    ap.add_argument("--csv", action="store_true", help="also `ravel fit` on the rows as CSV")
    ap.add_argument("--no-peers", action="store_true", help="the two ravel processes only")
    args = ap.parse_args()
    os.makedirs(args.dir, exist_ok=True)

    import ravel_lm

    print(f"ravel_lm {ravel_lm.__version__}, numpy {np.__version__}; load {uptime()}",
          flush=True)
    sizes = args.sizes.split(",")
    river_rows = [int(v) for v in args.river_rows.split(",")]
    river_rows += [river_rows[-1]] * (len(sizes) - len(river_rows))
    table = []
    for size, m_river in zip(sizes, river_rows):
        n, p = map(int, size.split("x"))
        label = f"{n:,} x {p}"
        x, y = design(n, p, 1)
        xt, yt = design(20000, p, 2)
        fx, fy, fxy = (os.path.join(args.dir, f"{name}_{n}x{p}.npy") for name in ("x", "y", "xy"))
        np.save(fx, x)
        np.save(fy, y)
        np.save(fxy, np.column_stack([x, y]))
        fcsv = None
        if args.csv:
            fcsv = os.path.join(args.dir, f"xy_{n}x{p}.csv")
            header = ",".join([f"x{j}" for j in range(p)] + ["y"])
            np.savetxt(fcsv, np.column_stack([x, y]), fmt="%.17g", delimiter=",",
                       header=header, comments="")

        jobs = {
            "fit": [args.ravel, "fit", fxy, "--method", "ols"],
            "pf": [sys.executable, "-c", CHILD, fx, fy, str(args.chunk)],
            "stats": [sys.executable, "-c", CHILD_STATS, fx, fy, str(args.chunk)],
        }
        if fcsv:
            jobs["csv"] = [args.ravel, "fit", fcsv, "--method", "ols"]
        for cmd in jobs.values():  # warm-up: page cache, the interpreter's .pyc files
            run(cmd)
        times = {k: [] for k in jobs}
        outs = {}
        for _ in range(args.rounds):
            for k, cmd in jobs.items():
                wall, cpu, out = run(cmd)
                times[k].append((wall, cpu))
                outs[k] = out
        med = {k: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v))
               for k, v in times.items()}

        model = json.loads(outs["fit"])
        b = np.zeros(p)
        for c in model["coefficients"]:
            b[c["index"]] = c["value"]
        fit_r2 = r2(xt @ b + model["intercept"], yt)
        child = json.loads(outs["pf"])
        pf_r2 = r2(xt @ np.array(child["coef"]) + child["intercept"], yt)
        assert np.max(np.abs(np.array(child["coef"]) - b)) < 1e-9, "not the same model"
        calls = child["calls"]
        spread = {k: f"{min(w for w, _ in v):.2f}-{max(w for w, _ in v):.2f}"
                  for k, v in times.items()}
        table.append((label, "`ravel fit xy.npy --method ols` (whole process)",
                      n / med["fit"][0], med["fit"], spread["fit"], fit_r2))
        table.append((label, f"ravel_lm `OLS.partial_fit`, chunks of {args.chunk:,} (whole process)",
                      n / med["pf"][0], med["pf"], spread["pf"], pf_r2))
        table.append((label, "ravel_lm `OLS.partial_fit`: the calls and `coef_` alone (last round)",
                      n / calls, None, None, pf_r2))
        table.append((label, f"ravel_lm `Stats.update`, chunks of {args.chunk:,}, and the OLS "
                      "model (whole process)",
                      n / med["stats"][0], med["stats"], spread["stats"], pf_r2))
        if fcsv:
            table.append((label, "`ravel fit xy.csv --method ols` (whole process)",
                          n / med["csv"][0], med["csv"], spread["csv"], fit_r2))
        ratio = med["fit"][0] / med["pf"][0]
        print(f"{label}: ravel fit {med['fit'][0]:.3f} s ({med['fit'][1]:.2f} CPU s), "
              f"partial_fit process {med['pf'][0]:.3f} s ({med['pf'][1]:.2f} CPU s; imports "
              f"{child['imports']:.2f} s, calls {child['calls']:.3f} s): partial_fit at "
              f"{100 * ratio:.0f} % of ravel fit's rows/s (CPU: "
              f"{100 * med['fit'][1] / med['pf'][1]:.0f} %); Stats alone {med['stats'][0]:.3f} s "
              f"({med['stats'][1]:.2f} CPU s); loaded by the partial_fit child: "
              f"{child['loaded'] or 'none of sklearn, scipy, pandas'}; load {uptime()}",
              flush=True)

        if not args.no_peers:
            from river import linear_model as river_lm
            from sklearn.linear_model import LinearRegression, SGDRegressor

            t = time.perf_counter()
            lr = LinearRegression().fit(x, y)
            secs = time.perf_counter() - t
            table.append((label, "scikit-learn `LinearRegression.fit` (in-process, arrays in memory)",
                          n / secs, None, None, lr.score(xt, yt)))

            sgd = SGDRegressor(random_state=0)
            t = time.perf_counter()
            for i in range(0, n, args.chunk):
                sgd.partial_fit(x[i:i + args.chunk], y[i:i + args.chunk])
            secs = time.perf_counter() - t
            table.append((label, f"scikit-learn `SGDRegressor.partial_fit`, one pass in chunks of "
                          f"{args.chunk:,} (in-process)", n / secs, None, None, sgd.score(xt, yt)))

            from river import optim

            m = min(n, m_river)
            names = [f"x{j}" for j in range(p)]
            dicts = [dict(zip(names, row)) for row in x[:m].tolist()]
            tests = [dict(zip(names, row)) for row in xt[:2000].tolist()]
            # River's default step (SGD 0.01) and one of 0.1 / p, which converges on these
            # unit-variance columns (the default diverges once p is about 100 or more).
            for what, make in (
                ("default SGD(0.01)", lambda: river_lm.LinearRegression()),
                (f"SGD({0.1 / p:g})", lambda: river_lm.LinearRegression(optimizer=optim.SGD(0.1 / p))),
            ):
                river = make()
                t = time.perf_counter()
                for d, target in zip(dicts, y[:m].tolist()):
                    river.learn_one(d, target)
                secs = time.perf_counter() - t
                pred = np.array([river.predict_one(d) for d in tests])
                table.append((label, f"River `LinearRegression.learn_one`, {what} (in-process, "
                              f"the first {m:,} rows only; R^2 on 2,000 held-out rows)", m / secs,
                              None, None, r2(pred, yt[:2000])))
        for f in (fx, fy, fxy, fcsv):
            if f:
                os.remove(f)

    print(f"\nload at the end {uptime()}\n")
    print("| rows x p | what | rows/s | wall s (median; min-max) | CPU s | R^2 (held out) |")
    print("|---|---|---:|---:|---:|---:|")
    for size, what, rate, med, spread, score in table:
        wall = f"{med[0]:.3f} ({spread})" if med else ""
        cpu = f"{med[1]:.2f}" if med else ""
        shown = f"{score:.4f}" if abs(score) < 1e6 else f"{score:.1e} (diverged)"
        print(f"| {size} | {what} | {rate:,.0f} | {wall} | {cpu} | {shown} |")


if __name__ == "__main__":
    main()
