#!/usr/bin/env python3
"""NIST's linear least-squares reference datasets (tests/fixtures/nist/): ravel beside QR, numpy's
lstsq, statsmodels and scikit-learn, as the table of docs/methods.md ("NIST's reference
datasets") shows it.

    cargo build && target/pyenv/bin/python scripts/nist_table.py --ravel target/debug/ravel

prints that table: per dataset the smallest LRE (McCullough 1998: -log10(|est - cert| / |cert|),
the digits that agree with NIST's certified value, at most 15) of the coefficients, of the
standard errors and of the residual standard deviation, for `ravel fit --method ols --inference`
(default and --no-standardize; NoInt1 and NoInt2 with --no-intercept), a Householder QR of the
rows (numpy.linalg.qr, then back substitution), numpy.linalg.lstsq (an SVD), statsmodels' OLS
and scikit-learn's LinearRegression (which gives no standard errors). Figures whose certified
value is 0 (Wampler1's standard errors and residual SD: an exact fit) are left out of the
minimum; "-" is a figure the package does not give.

    python scripts/nist_table.py qr SPEC.json

is the QR that tests/nist.rs compares ravel with: SPEC maps a key to {"csv": FILE, "intercept":
bool} (FILE: a header row, the x columns, y last) and the answer maps it to {"b": [b0, b1, ...]
(b0 only with an intercept), "se": [...], "sd": residual SD, "r2": R^2 (uncentred without an
intercept)}. Only numpy is needed for it; the table needs statsmodels and scikit-learn too.
"""

import json
import math
import os
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NIST = os.path.join(ROOT, "tests", "fixtures", "nist")
# Dataset: the model's columns, "columns" (the file's x columns) or the polynomial degree.
DATASETS = [
    ("Norris", "columns"), ("Pontius", 2), ("NoInt1", "columns"), ("NoInt2", "columns"),
    ("Filip", 10), ("Longley", "columns"), ("Wampler1", 5), ("Wampler2", 5), ("Wampler3", 5),
    ("Wampler4", 5), ("Wampler5", 5),
]


def parse(name):
    """(certified {"b", "se", "sd", "r2"}, intercept, rows [y, x...]) of one NIST file."""
    lines = open(os.path.join(NIST, name + ".dat")).read().splitlines()
    data = next(l for l in lines if "Data" in l and "(lines" in l)
    a, b = [int(w) for w in data.replace(")", " ").split() if w.isdigit()]
    b_cert, se_cert, sd, r2, intercept = {}, {}, None, None, False
    for line in lines[: a - 1]:
        w = line.split()
        if len(w) == 3 and w[0].startswith("B") and w[0][1:].isdigit():
            i = int(w[0][1:])
            b_cert[i], se_cert[i] = float(w[1]), float(w[2])
            intercept |= i == 0
        elif line.strip().startswith("Standard Deviation") and len(w) == 3:
            sd = float(w[2])
        elif line.strip().startswith("R-Squared"):
            r2 = float(w[1])
    keys = sorted(b_cert)
    rows = [[float(v) for v in l.split()] for l in lines[a - 1 : b]]
    cert = {"b": [b_cert[i] for i in keys], "se": [se_cert[i] for i in keys], "sd": sd, "r2": r2}
    return cert, intercept, rows


def design(rows, kind):
    """(X without the constant, y) of the model: the file's columns or x, x^2, ..., x^d."""
    y = np.array([r[0] for r in rows])
    if kind == "columns":
        x = np.array([r[1:] for r in rows])
    else:
        x = np.array([[r[1] ** k for k in range(1, kind + 1)] for r in rows])
    return x, y


def r_squared(y, rss, intercept):
    tss = np.sum((y - y.mean()) ** 2) if intercept else np.sum(y * y)
    return 1.0 - rss / tss


def back_substitute(r, z):
    out = np.zeros(len(z))
    for i in range(len(z) - 1, -1, -1):
        out[i] = (z[i] - r[i, i + 1 :] @ out[i + 1 :]) / r[i, i]
    return out


def qr_fit(x, y, intercept):
    """Householder QR (LAPACK dgeqrf through numpy), coefficients by back substitution,
    standard errors from R^-1."""
    a = np.column_stack([np.ones(len(y)), x]) if intercept else x
    q, r = np.linalg.qr(a)
    b = back_substitute(r, q.T @ y)
    res = y - a @ b
    rss = float(res @ res)
    dof = len(y) - a.shape[1]
    sigma2 = rss / dof
    rinv = np.column_stack([back_substitute(r, e) for e in np.eye(a.shape[1])])
    se = np.sqrt(sigma2 * np.sum(rinv * rinv, axis=1))
    return {"b": b.tolist(), "se": se.tolist(), "sd": math.sqrt(sigma2),
            "r2": float(r_squared(y, rss, intercept))}


def lre(est, cert):
    if est is None or not math.isfinite(est):
        return 0.0
    rel = abs(est) if cert == 0 else abs(est - cert) / abs(cert)
    return 15.0 if rel == 0 else min(15.0, max(0.0, -math.log10(rel)))


def smallest(fit, cert):
    """Smallest LRE of the coefficients, of the SEs and of the residual SD (certified nonzero)."""
    if fit is None:
        return None
    out = [min(lre(e, c) for e, c in zip(fit["b"], cert["b"]))]
    if fit.get("se") is None:
        out.append(None)
    else:
        se = [lre(e, c) for e, c in zip(fit["se"], cert["se"]) if c != 0]
        out.append(min(se) if se else None)
    out.append(None if fit.get("sd") is None or cert["sd"] == 0 else lre(fit["sd"], cert["sd"]))
    return out


def ravel_fit(binary, csv, intercept, standardize):
    args = [binary, "fit", csv, "--method", "ols", "--inference"]
    if not standardize:
        args.append("--no-standardize")
    if not intercept:
        args.append("--no-intercept")
    out = subprocess.run(args, capture_output=True, text=True)
    if out.returncode != 0:
        return None, out.stderr.strip()
    m = json.loads(out.stdout)
    names = [f"x{j + 1}" for j in range(len(open(csv).readline().split(",")) - 1)]
    coef = {c["feature"]: c["value"] for c in m["coefficients"]}
    b = ([m["intercept"]] if intercept else []) + [coef.get(n, 0.0) for n in names]
    inf = m.get("inference")
    fit = {"b": b, "se": None, "sd": None}
    if inf:
        se = {e["feature"]: e["se"] for e in inf["coefficients"]}
        fit["se"] = ([inf["intercept"]["se"]] if intercept else []) + [se.get(n, 0.0) for n in names]
        fit["sd"] = math.sqrt(inf["sigma2"])
    notes = "; ".join(m["diagnostics"].get("notes", []))
    return fit, notes


def references(x, y, intercept):
    import statsmodels.api as sm
    from sklearn.linear_model import LinearRegression

    a = np.column_stack([np.ones(len(y)), x]) if intercept else x
    dof = len(y) - a.shape[1]
    b, rss, _, _ = np.linalg.lstsq(a, y, rcond=None)
    res = y - a @ b
    sigma2 = float(res @ res) / dof
    lstsq = {"b": b.tolist(), "se": None, "sd": math.sqrt(sigma2)}
    ols = sm.OLS(y, a).fit()
    smf = {"b": ols.params.tolist(), "se": ols.bse.tolist(), "sd": math.sqrt(ols.scale)}
    lr = LinearRegression(fit_intercept=intercept).fit(x, y)
    lb = ([float(lr.intercept_)] if intercept else []) + lr.coef_.tolist()
    res = y - lr.predict(x)
    sk = {"b": lb, "se": None, "sd": math.sqrt(float(res @ res) / dof)}
    return {"lstsq": lstsq, "statsmodels": smf, "sklearn": sk}


def cell(figs):
    if figs is None:
        return "refused"
    return " / ".join("-" if f is None else f"{f:.1f}" for f in figs)


def table(binary):
    import sklearn
    import statsmodels

    cols = ["ravel default", "ravel --no-standardize", "QR", "numpy lstsq", "statsmodels",
            "scikit-learn LinearRegression"]
    print("| dataset | " + " | ".join(cols) + " |")
    print("|---" * (len(cols) + 1) + "|")
    with tempfile.TemporaryDirectory() as tmp:
        for name, kind in DATASETS:
            cert, intercept, rows = parse(name)
            x, y = design(rows, kind)
            csv = os.path.join(tmp, name + ".csv")
            with open(csv, "w") as f:
                f.write(",".join(f"x{j + 1}" for j in range(x.shape[1])) + ",y\n")
                for xi, yi in zip(x, y):
                    f.write(",".join(repr(float(v)) for v in xi) + f",{float(yi)!r}\n")
            row = []
            for standardize in (True, False):
                fit, notes = ravel_fit(binary, csv, intercept, standardize)
                text = cell(smallest(fit, cert))
                if fit is not None and fit["se"] is None:
                    text += " (no inference)"
                row.append(text)
            row.append(cell(smallest(qr_fit(x, y, intercept), cert)))
            refs = references(x, y, intercept)
            row += [cell(smallest(refs[k], cert)) for k in ("lstsq", "statsmodels", "sklearn")]
            label = name + ("" if intercept else " (no intercept)")
            print(f"| {label} | " + " | ".join(row) + " |")
    print()
    print(f"numpy {np.__version__}, statsmodels {statsmodels.__version__}, "
          f"scikit-learn {sklearn.__version__}; smallest LRE of the coefficients / the standard "
          "errors / the residual SD, file order.")


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "qr":
        spec = json.load(open(sys.argv[2]))
        out = {}
        for key, s in spec.items():
            d = np.loadtxt(s["csv"], delimiter=",", skiprows=1, ndmin=2)
            out[key] = qr_fit(d[:, :-1], d[:, -1], s["intercept"])
        json.dump(out, sys.stdout)
        return
    if len(sys.argv) == 3 and sys.argv[1] == "--ravel":
        table(sys.argv[2])
        return
    sys.exit(__doc__)


if __name__ == "__main__":
    main()
