"""The references of tests/inference.rs, from the rows: statsmodels' OLS summary (params, bse,
conf_int, tvalues, pvalues, rsquared_adj, fvalue, f_pvalue, llf, aic, bic, condition_number),
variance_inflation_factor, compare_f_test, f_test and get_prediction(...).summary_frame(alpha);
ridge's prediction intervals from numpy (the sandwich covariance of the standardized ridge);
and the polyhedral lemma of Lee, Sun, Sun & Taylor (2016) built from the rows' matrices.

usage: ols_reference.py ROWS.csv SPEC.json -> JSON on stdout
SPEC: {"columns": [feature indices of the model], "level": 0.95,
       "drop": [[indices]], "restrictions": [[[row of R over (const, columns)], r]...],
       "predict": [[p numbers]], "ridge": lambda or null,
       "selective": {"lambda": l, "support": [...], "signs": [...], "sigma": s or null}}
"""

import json
import sys

import numpy as np
import statsmodels.api as sm
from scipy import optimize, special
from statsmodels.stats.outliers_influence import variance_inflation_factor


def load(path):
    data = np.loadtxt(path, delimiter=",", skiprows=1)
    return data[:, :-1], data[:, -1]


def ols_summary(x, y, spec):
    cols = spec["columns"]
    exog = sm.add_constant(x[:, cols], has_constant="add")
    res = sm.OLS(y, exog).fit()
    alpha = 1.0 - spec.get("level", 0.95)
    out = {
        "params": res.params.tolist(),
        "bse": res.bse.tolist(),
        "conf_int": np.asarray(res.conf_int(alpha)).tolist(),
        "tvalues": res.tvalues.tolist(),
        "pvalues": res.pvalues.tolist(),
        "rsquared_adj": res.rsquared_adj,
        "fvalue": res.fvalue,
        "f_pvalue": res.f_pvalue,
        "llf": res.llf,
        "aic": res.aic,
        "bic": res.bic,
        "condition_number": res.condition_number,
        "vif": [variance_inflation_factor(exog, i) for i in range(1, exog.shape[1])],
    }
    # The standardized design's condition number: centred, unit-variance columns, by SVD.
    xc = x[:, cols] - x[:, cols].mean(axis=0)
    out["condition_number_std"] = float(np.linalg.cond(xc / xc.std(axis=0)))
    out["compare_f"] = []
    for drop in spec.get("drop", []):
        keep = [c for c in cols if c not in drop]
        small = sm.OLS(y, sm.add_constant(x[:, keep], has_constant="add")).fit()
        f, p, df = res.compare_f_test(small)
        out["compare_f"].append([f, p, df])
    out["f_test"] = []
    for rows in spec.get("restrictions", []):
        r = np.array([row for row, _ in rows], dtype=float)
        q = np.array([v for _, v in rows], dtype=float)
        t = res.f_test((r, q))
        out["f_test"].append(
            [float(np.squeeze(t.fvalue)), float(t.pvalue), t.df_num, t.df_denom]
        )
    if spec.get("predict"):
        rows = np.asarray(spec["predict"], dtype=float)[:, cols]
        frame = res.get_prediction(
            sm.add_constant(rows, has_constant="add")
        ).summary_frame(alpha)
        out["predict"] = {k: frame[k].tolist() for k in frame.columns}
        if len(y) <= 1000:
            out["predict_exact"] = exact_predict(x[:, cols], y, rows, alpha)
    return out


def exact_predict(x, y, rows, alpha):
    """summary_frame's columns from the rows in 60-digit arithmetic (mpmath): the reference
    where statsmodels' own rounding (about 1e-16 times cond(X), 5e9 on Longley) shows."""
    import mpmath as mp

    mp.mp.dps = 60
    n, k = x.shape[0], x.shape[1] + 1
    xm = mp.matrix([[1] + [mp.mpf(float(v)) for v in row] for row in x])
    ym = mp.matrix([mp.mpf(float(v)) for v in y])
    inv = mp.inverse(xm.T * xm)
    b = inv * (xm.T * ym)
    r = ym - xm * b
    s2 = (r.T * r)[0] / (n - k)
    t = mp.mpf(float(special.stdtrit(n - k, 1 - alpha / 2)))
    cols = {c: [] for c in ["mean", "mean_se", "mean_ci_lower", "mean_ci_upper", "obs_ci_lower", "obs_ci_upper"]}
    for row in rows:
        x0 = mp.matrix([[1] + [mp.mpf(float(v)) for v in row]])
        mean = (x0 * b)[0]
        var = (x0 * inv * x0.T)[0] * s2
        se, so = mp.sqrt(var), mp.sqrt(var + s2)
        for c, v in [("mean", mean), ("mean_se", se), ("mean_ci_lower", mean - t * se),
                     ("mean_ci_upper", mean + t * se), ("obs_ci_lower", mean - t * so),
                     ("obs_ci_upper", mean + t * so)]:
            cols[c].append(float(v))
    return cols


def ridge_predict(x, y, spec):
    """Ridge at lambda on standardized columns (population sd), intercept unpenalized."""
    n = len(y)
    mu, sd = x.mean(axis=0), x.std(axis=0)
    z = (x - mu) / sd
    yc = y - y.mean()
    q = z.T @ z / n
    a = q + spec["ridge"] * np.eye(x.shape[1])
    ainv = np.linalg.inv(a)
    b = ainv @ (z.T @ yc / n)
    resid = yc - z @ b
    df = np.trace(q @ ainv)
    df_resid = n - df - 1
    sigma2 = resid @ resid / df_resid
    cov = sigma2 / n * ainv @ q @ ainv
    rows = np.asarray(spec["predict"], dtype=float)
    zr = (rows - mu) / sd
    mean = y.mean() + zr @ b
    var = sigma2 / n + np.einsum("ij,jk,ik->i", zr, cov, zr)
    t = special.stdtrit(df_resid, 1.0 - (1.0 - spec.get("level", 0.95)) / 2.0)
    se, se_obs = np.sqrt(var), np.sqrt(var + sigma2)
    return {
        "mean": mean.tolist(),
        "mean_se": se.tolist(),
        "mean_ci_lower": (mean - t * se).tolist(),
        "mean_ci_upper": (mean + t * se).tolist(),
        "obs_ci_lower": (mean - t * se_obs).tolist(),
        "obs_ci_upper": (mean + t * se_obs).tolist(),
    }


def log_sf_diff(a, b):
    """log(Phi(b) - Phi(a)) for a < b, in the tail where it is accurate."""
    if a >= 0:  # upper tail: sf(a) - sf(b)
        la, lb = special.log_ndtr(-a), special.log_ndtr(-b)
    else:
        if b <= 0:
            la, lb = special.log_ndtr(b), special.log_ndtr(a)
        else:
            return np.log(special.ndtr(b) - special.ndtr(a))
    return la + np.log1p(-np.exp(lb - la))


def truncnorm_cdf(x, a, b):
    if x <= a:
        return 0.0
    if x >= b:
        return 1.0
    return float(np.exp(log_sf_diff(a, x) - log_sf_diff(a, b)))


def selective(x, y, spec):
    """Lee et al.'s polyhedron {A y <= b} for the Lasso (1/2n)||y - Z b||^2 + lambda ||b||_1
    on the standardized, centred columns Z, built from the rows; its limits, pivot, p-value
    and interval for each selected coefficient."""
    s = spec["selective"]
    n, p = x.shape
    mu, sd = x.mean(axis=0), x.std(axis=0)
    z = (x - mu) / sd
    yc = y - y.mean()
    lam = n * s["lambda"]
    e = s["support"]
    signs = np.array(s["signs"], dtype=float)
    out_cols = [j for j in range(p) if j not in e]
    ze, zo = z[:, e], z[:, out_cols]
    ge_inv = np.linalg.inv(ze.T @ ze)
    pe = ze @ ge_inv @ ze.T
    zpinv = ze @ ge_inv  # (Z_E^T)^+
    a0 = np.vstack([zo.T @ (np.eye(n) - pe), -zo.T @ (np.eye(n) - pe)]) / lam
    b0 = np.concatenate(
        [1 - zo.T @ zpinv @ signs, 1 + zo.T @ zpinv @ signs]
    )
    a1 = -np.diag(signs) @ ge_inv @ ze.T
    b1 = -lam * np.diag(signs) @ ge_inv @ signs
    a = np.vstack([a0, a1])
    b = np.concatenate([b0, b1])
    slack = float((b - a @ yc).min())
    if s.get("sigma") is not None:
        sigma = s["sigma"]
    else:
        full = np.column_stack([np.ones(n), x])
        beta, *_ = np.linalg.lstsq(full, y, rcond=None)
        r = y - full @ beta
        sigma = float(np.sqrt(r @ r / (n - p - 1)))
    level = spec.get("level", 0.95)
    alpha = 1 - level
    out = []
    for j in range(len(e)):
        eta = zpinv[:, j]
        ety = float(eta @ yc)
        ee = float(eta @ eta)
        c = eta / ee
        zz = yc - c * ety
        ac, az = a @ c, a @ zz
        with np.errstate(divide="ignore", invalid="ignore"):
            v = (b - az) / ac
        lo = float(np.max(v[ac < 0], initial=-np.inf))
        hi = float(np.min(v[ac > 0], initial=np.inf))
        sdv = sigma * np.sqrt(ee)

        def piv(m):
            return truncnorm_cdf((ety - m) / sdv, (lo - m) / sdv, (hi - m) / sdv)

        # The smaller tail, each from its own logarithms (no 1 - F cancellation).
        lower = np.exp(log_sf_diff(lo / sdv, ety / sdv) - log_sf_diff(lo / sdv, hi / sdv))
        upper = np.exp(log_sf_diff(ety / sdv, hi / sdv) - log_sf_diff(lo / sdv, hi / sdv))
        pval = float(min(1.0, 2 * min(lower, upper)))

        def root(want):
            lo_m, hi_m = ety - 10 * sdv, ety + 10 * sdv
            while piv(lo_m) < want:
                lo_m -= 10 * sdv
            while piv(hi_m) > want:
                hi_m += 10 * sdv
            return optimize.brentq(lambda m: piv(m) - want, lo_m, hi_m, xtol=1e-14 * max(1.0, abs(ety)), rtol=1e-15, maxiter=500)

        scale = sd[e[j]]
        out.append(
            {
                "value": ety / scale,
                "lower_limit": lo / scale,
                "upper_limit": hi / scale,
                "p_value": pval,
                "ci_lower": root(1 - alpha / 2) / scale,
                "ci_upper": root(alpha / 2) / scale,
            }
        )
    return {"slack": slack, "sigma": sigma, "coefficients": out}


def finite(v):
    """Infinite numbers as null, as serde_json writes them."""
    if isinstance(v, dict):
        return {k: finite(x) for k, x in v.items()}
    if isinstance(v, list):
        return [finite(x) for x in v]
    if isinstance(v, float) and not np.isfinite(v):
        return None
    return v


def main():
    x, y = load(sys.argv[1])
    spec = json.loads(open(sys.argv[2]).read())
    if spec.get("selective"):
        out = selective(x, y, spec)
    elif spec.get("ridge") is not None:
        out = {"predict": ridge_predict(x, y, spec)}
    else:
        out = ols_summary(x, y, spec)
    print(json.dumps(finite(out)))


main()
