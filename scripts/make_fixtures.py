"""Independent reference fixtures for `tests/reference_sklearn.rs`.

Writes small data sets (CSV, plus the same data as LIBSVM and NPY for the file-format checks)
under tests/fixtures/, and tests/fixtures/expected.json with the models scikit-learn (and skglm
for MCP / SCAD) computes on the raw rows of each CSV. The Rust test runs `ravel fit` on the same
files and compares intercept and every coefficient to 1e-6 relative.

Regenerate (from the repository root; PyPI must be reachable):

    python3 -m venv .venv
    .venv/bin/pip install numpy scikit-learn skglm
    .venv/bin/python scripts/make_fixtures.py

The output is deterministic for given library versions (recorded in expected.json).

Mappings from ravel's problems to the reference estimators (n rows, W = w_pos + w_neg):

- ravel minimizes (1/2n)||y - b0 - X b||^2 + P(b). With `--no-standardize`:
  lasso  lambda            = sklearn Lasso(alpha=lambda)
  elastic-net lambda, r    = sklearn ElasticNet(alpha=lambda, l1_ratio=r)
  ridge  lambda            : P = (lambda/2)||b||^2; times 2n gives ||r||^2 + n lambda ||b||^2,
                             = sklearn Ridge(alpha=n * lambda)
  ols                      = sklearn LinearRegression
  mcp / scad lambda, gamma = skglm Quadratic datafit ((1/2n)||y - Xw||^2) with MCPenalty /
                             SCAD(alpha=lambda, gamma), fit_intercept=True
- Default (`standardize=true`): ravel scales column j by its population sd s_j, solves in those
  units and returns b_j / s_j. Reference: StandardScaler (ddof=0; a constant column gets
  scale 1 and is all zeros after centring, so its coefficient is 0 as in ravel, which drops it),
  the same estimator on the scaled rows, then b = coef_ / scale_ and
  b0 = intercept_ - mean_ . b (the intercept of a model on raw rows).
  Elastic net standardizes y as well, as glmnet does (its support must not depend on y's
  units): ravel minimizes f(b) + lambda (r |b|_1 + (1 - r) / (2 s_y) |b|^2) with s_y the
  population sd of y, which is s_y^2 times the elastic net on y / s_y at lambda / s_y in
  b / s_y. Reference: ElasticNet(alpha=lambda / s_y) on (StandardScaler rows, y / s_y), then
  coef_ and intercept_ times s_y, then as above.
- Classification (`--task classification`, labels +1/-1), ravel minimizes
      w_p E_pos[(x b + b0 - 1)^2]/2 + w_n E_neg[(x b + b0 + 1)^2]/2 + P(b)        (003 eqs. 4-5)
  sklearn's Lasso / ElasticNet with sample_weight s rescale s to sum to n_samples
  (sklearn/linear_model/_coordinate_descent.py, ElasticNet.fit), so their objective is
      (1 / (2 sum_i s_i)) sum_i s_i (y_i - b0 - x_i b)^2 + alpha * pen(b).
  With s_i = w_p / n_p on positives and w_n / n_n on negatives, sum_i s_i = W and
  sum_i s_i r_i^2 = w_p E_pos[r^2] + w_n E_neg[r^2], so sklearn's objective is
  (ravel's loss) / W + alpha pen(b). Multiplying by W: ravel's lambda = alpha W, i.e.
      alpha = lambda / (w_p + w_n).
  Ridge does not normalize its weights: sum_i s_i r_i^2 + alpha ||b||^2 = 2 (ravel's loss) +
  alpha ||b||^2, so alpha = lambda. LinearRegression(sample_weight=s) is `ols` directly.
  `verify_weight_mapping` checks the Lasso mapping numerically against a direct
  minimization of ravel's objective before any fixture is written.
  ravel standardizes classification columns by the negatives' population sd (003 section 3.6);
  the reference scales the raw columns by that sd and maps the coefficients back.

Exact k (`lasso_paths`): the whole Lasso path by LARS for four regression data sets, raw and
standardized (`lasso_lars_path`); the test takes the lambda* of each of ravel's k-models and
checks the model against the path at lambda*.

Every penalized reference is certified: from the reference solution's zero pattern and signs
(and, for MCP / SCAD, which piece of the penalty each coefficient sits on) the stationarity
conditions are linear; the script solves them exactly, checks the pattern is self-consistent
with a margin (no coefficient near a kink, every zero strictly inside its subgradient
interval), and requires the reference output to agree with that exact solution to 1e-9
relative. The numbers stored are the reference estimator's own output.

MCP / SCAD are non-convex in general; the fixtures use a data set whose centred Gram matrix
Q = X_c^T X_c / n has smallest eigenvalue above the penalty's concavity (1/gamma for MCP,
1/(gamma - 1) for SCAD), which makes the whole objective strictly convex: the minimizer is
unique and ravel and skglm must find the same point. The script asserts this.
"""
import json
import os
import sys

import numpy as np
import sklearn
from sklearn.linear_model import ElasticNet, Lasso, LinearRegression, Ridge, lars_path
from sklearn.preprocessing import StandardScaler

try:
    import skglm
    from skglm import GeneralizedLinearEstimator
    from skglm.datafits import Quadratic
    from skglm.penalties import SCAD, MCPenalty
    from skglm.solvers import AndersonCD
except ImportError:  # MCP / SCAD fixtures are skipped without skglm
    skglm = None

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
OUT = os.path.join(ROOT, "tests", "fixtures")
TOL = 1e-12
MAX_ITER = 1_000_000
# Certificate: reference vs exact solution of its own stationarity system.
CERT_RTOL = 1e-9
# Every zero must satisfy |grad_j| <= (1 - KINK_MARGIN) lambda_l1, and every nonzero must
# sit at least KINK_MARGIN (relative) away from a breakpoint of its penalty.
KINK_MARGIN = 1e-3


def fmt(v):
    """Shortest text that parses back to the same float64."""
    return repr(float(v))


# ---------------------------------------------------------------------------------------------
# Data sets


def dataset_corr(rng):
    """n=200, p=12: three correlated pairs/triples, non-zero means, mixed scales."""
    n, p = 200, 12
    z = rng.standard_normal((n, p))
    x = z.copy()
    x[:, 1] = 0.9 * z[:, 0] + np.sqrt(1 - 0.81) * z[:, 1]
    x[:, 3] = -0.75 * z[:, 2] + np.sqrt(1 - 0.5625) * z[:, 3]
    x[:, 5] = 0.6 * z[:, 4] + 0.6 * z[:, 6] + np.sqrt(1 - 0.72) * z[:, 5]
    scales = np.array([1.0, 2.0, 0.5, 3.0, 1.0, 1.5, 4.0, 0.8, 1.0, 2.5, 0.3, 1.2])
    means = np.array([5.0, -3.0, 10.0, 0.5, 20.0, -8.0, 2.0, 1.0, 15.0, -2.0, 7.0, 3.0])
    x = x * scales + means
    beta = np.array([2.0, 0.0, -1.5, 0.0, 0.7, 0.0, 0.0, 1.2, 0.0, 0.0, 3.0, 0.4])
    y = 4.0 + (x - means) @ beta + 1.5 * rng.standard_normal(n) + 10.0
    return np.round(x, 6), np.round(y, 6)


def dataset_const(rng):
    """n=120, p=8: column 3 is constant, column 5 integer-valued, columns 0 and 1 correlated 0.95."""
    n, p = 120, 8
    z = rng.standard_normal((n, p))
    x = z + np.arange(p)
    x[:, 1] = 1.0 + 0.95 * z[:, 0] + np.sqrt(1 - 0.95**2) * z[:, 1]
    x[:, 3] = 3.5
    x[:, 5] = rng.poisson(4.0, n).astype(float)
    beta = np.array([1.0, 1.0, 0.0, 0.0, -2.0, 0.5, 0.0, 0.3])
    y = -2.0 + x @ beta + rng.standard_normal(n)
    return np.round(x, 5), np.round(y, 5)


def dataset_wide(rng):
    """n=60, p=30 (still n > p + 1, so OLS is unique): AR(1) correlation 0.6^|i-j|."""
    n, p = 60, 30
    idx = np.arange(p)
    cov = 0.6 ** np.abs(idx[:, None] - idx[None, :])
    x = rng.standard_normal((n, p)) @ np.linalg.cholesky(cov).T + 1.0 + 0.1 * idx
    beta = np.zeros(p)
    beta[[0, 4, 9, 17, 25]] = [1.5, -1.0, 2.0, 0.8, -0.6]
    y = 0.5 + x @ beta + 0.5 * rng.standard_normal(n)
    return np.round(x, 6), np.round(y, 6)


def dataset_wellcond(rng):
    """n=300, p=6 independent columns, sd 1.5..3: Q's smallest eigenvalue is well above 1/2
    (raw and standardized), so MCP (gamma 3) and SCAD (gamma 3.7) objectives are strictly convex."""
    n, p = 300, 6
    sds = np.array([1.5, 2.0, 3.0, 1.8, 2.5, 1.6])
    means = np.array([1.0, -2.0, 0.5, 4.0, -1.0, 2.0])
    z = rng.standard_normal((n, p))
    # Whiten the sample so the columns are exactly uncorrelated with unit population variance:
    # the standardized Gram is then the identity and the conditioning is known, not sampled.
    z -= z.mean(axis=0)
    l = np.linalg.cholesky(z.T @ z / n)
    z = z @ np.linalg.inv(l).T
    # Mild correlation back in (smallest eigenvalue of the correlation matrix stays > 0.8).
    mix = np.eye(p)
    mix[1, 0] = 0.3
    mix[4, 2] = -0.25
    x = z @ mix.T * sds + means
    beta = np.array([2.5, -1.2, 0.35, 0.0, 0.08, 0.0])
    y = 1.0 + x @ beta + rng.standard_normal(n)
    return np.round(x, 6), np.round(y, 6)


def dataset_classes(rng):
    """n=250, p=10, labels +1/-1 with about 30% positives; class means differ on a few columns."""
    n, p = 250, 10
    pos = rng.random(n) < 0.3
    idx = np.arange(p)
    cov = 0.5 ** np.abs(idx[:, None] - idx[None, :])
    x = rng.standard_normal((n, p)) @ np.linalg.cholesky(cov).T
    x = x * (1.0 + 0.2 * idx) + 2.0
    shift = np.zeros(p)
    shift[[0, 3, 7]] = [1.2, -0.8, 0.6]
    x[pos] += shift * (1.0 + 0.2 * idx)
    y = np.where(pos, 1.0, -1.0)
    return np.round(x, 6), y


def dataset_formats(rng):
    """n=80, p=6 with about a quarter exact zeros (LIBSVM leaves them out)."""
    n, p = 80, 6
    x = rng.standard_normal((n, p)) * [1.0, 2.0, 0.5, 1.0, 3.0, 1.0] + [0.0, 1.0, -1.0, 2.0, 0.0, 0.5]
    x[rng.random((n, p)) < 0.25] = 0.0
    y = 1.0 + x @ np.array([1.0, 0.0, -2.0, 0.5, 0.0, 0.25]) + 0.3 * rng.standard_normal(n)
    x, y = np.round(x, 4), np.round(y, 4)
    x[x == 0.0] = 0.0  # no -0.0 (LIBSVM drops zeros; the other formats must hold the same value)
    return x, y


# ---------------------------------------------------------------------------------------------
# Writers


def write_csv(path, header, rows):
    with open(path, "w") as f:
        f.write(",".join(header) + "\n")
        for r in rows:
            f.write(",".join(fmt(v) for v in r) + "\n")


def write_libsvm(path, x, y):
    """`label idx:value ...` with 1-based indices and zeros left out."""
    with open(path, "w") as f:
        for xi, yi in zip(x, y):
            toks = [fmt(yi)] + [f"{j + 1}:{fmt(v)}" for j, v in enumerate(xi) if v != 0.0]
            f.write(" ".join(toks) + "\n")


def read_csv(path, target):
    """The rows exactly as ravel sees them: (header, x, y) with y the named column."""
    with open(path) as f:
        header = f.readline().strip().split(",")
    data = np.loadtxt(path, delimiter=",", skiprows=1, ndmin=2)
    t = header.index(target)
    keep = [j for j in range(len(header)) if j != t]
    return [header[j] for j in keep], np.ascontiguousarray(data[:, keep]), data[:, t].copy()


# ---------------------------------------------------------------------------------------------
# The problems in Gram form (two-pass centring in numpy, independent of ravel's running sums)


def gram(x, y, sw=None):
    """Q = X_c^T S X_c, c = X_c^T S y_c with S = diag(sw) / sum(sw) (1/n when unweighted)."""
    n = len(y)
    s = np.full(n, 1.0 / n) if sw is None else sw / sw.sum()
    xc = x - s @ x
    yc = y - s @ y
    return xc.T @ (xc * s[:, None]), xc.T @ (s * yc)


def certify(name, x, y, coef, kind, lam, sw=None, l1_ratio=1.0, gamma=None):
    """Solves the stationarity conditions of min 1/2 b'Qb - c'b + P(b) on the reference's own
    pattern exactly and checks the pattern. Returns the largest relative deviation."""
    q, c = gram(x, y, sw)
    p = len(c)
    # Constant columns (all zero once centred) are out of the problem, as in ravel.
    active_cols = np.diag(q) > 1e-12 * np.maximum(np.mean(x * x, axis=0), 1e-300)
    l1 = lam * l1_ratio
    l2 = lam * (1.0 - l1_ratio) if kind in ("lasso", "enet") else 0.0
    scale = max(np.max(np.abs(coef)), 1e-300)
    # Each coefficient: zero, or a piece on which the penalty derivative is affine in b_j:
    # pen'(b) = sgn * a + d * b on that piece (lasso/EN: a = l1, d = l2; MCP: a = lam,
    # d = -1/gamma below gamma*lam, 0 above; SCAD: lam / 0, gamma*lam/(gamma-1) and -1/(gamma-1)
    # in the middle, 0 above gamma*lam).
    pieces = []
    for j in range(p):
        b = abs(coef[j])
        if not active_cols[j] or coef[j] == 0.0:
            pieces.append(None)
            continue
        sg = np.sign(coef[j])
        if kind in ("lasso", "enet"):
            pieces.append((sg * l1, l2, 0.0, np.inf))
        elif kind == "mcp":
            pieces.append((sg * lam, -1.0 / gamma, 0.0, gamma * lam) if b <= gamma * lam else (0.0, 0.0, gamma * lam, np.inf))
        elif kind == "scad":
            if b <= lam:
                pieces.append((sg * lam, 0.0, 0.0, lam))
            elif b <= gamma * lam:
                pieces.append((sg * gamma * lam / (gamma - 1), -1.0 / (gamma - 1), lam, gamma * lam))
            else:
                pieces.append((0.0, 0.0, gamma * lam, np.inf))
        else:
            raise ValueError(kind)
    support = [j for j in range(p) if pieces[j] is not None]
    exact = np.zeros(p)
    if support:
        a = q[np.ix_(support, support)] + np.diag([pieces[j][1] for j in support])
        rhs = c[support] - np.array([pieces[j][0] for j in support])
        exact[support] = np.linalg.solve(a, rhs)
    grad = c - q @ exact
    for j in range(p):
        if pieces[j] is None:
            if active_cols[j]:
                assert abs(grad[j]) <= (1 - KINK_MARGIN) * l1, (
                    f"{name}: zero coefficient {j} is at a kink: |grad| = {abs(grad[j])}, lambda = {l1}")
        else:
            lo, hi = pieces[j][2], pieces[j][3]
            b = abs(exact[j])
            assert np.sign(exact[j]) == np.sign(coef[j]), f"{name}: sign of {j} flips in the exact solve"
            assert b > lo * (1 + KINK_MARGIN) and (hi == np.inf or b < hi * (1 - KINK_MARGIN)), (
                f"{name}: coefficient {j} = {exact[j]} is near a penalty breakpoint ({lo}, {hi})")
    dev = np.max(np.abs(exact - coef)) / scale
    assert dev <= CERT_RTOL, f"{name}: reference deviates from the exact solution by {dev:.3e} relative"
    return float(dev)


def verify_weight_mapping(x, y, w_pos, w_neg, lam):
    """The class-weight mapping, checked by a generic solver: minimize ravel's objective
    w_p E_pos[r^2]/2 + w_n E_neg[r^2]/2 + lam ||b||_1 (r = x b + b0 - y) by proximal gradient on
    (b, b0) directly, and compare with the sklearn mapping."""
    pos, neg = y > 0, y < 0
    n_p, n_n = pos.sum(), neg.sum()
    sw = np.where(pos, w_pos / n_p, w_neg / n_n)
    ref = Lasso(alpha=lam / (w_pos + w_neg), tol=TOL, max_iter=MAX_ITER).fit(x, y, sample_weight=sw)
    xa = np.hstack([x, np.ones((len(y), 1))])
    hess = xa.T @ (xa * sw[:, None])  # gradient of the loss is hess @ theta - xa' (sw y)
    lin = xa.T @ (sw * y)
    step = 1.0 / np.linalg.eigvalsh(hess)[-1]
    theta = np.zeros(x.shape[1] + 1)
    for _ in range(200_000):
        z = theta - step * (hess @ theta - lin)
        new = z.copy()
        new[:-1] = np.sign(z[:-1]) * np.maximum(np.abs(z[:-1]) - step * lam, 0.0)
        if np.max(np.abs(new - theta)) < 1e-15:
            theta = new
            break
        theta = new
    coef = np.append(ref.coef_, ref.intercept_)
    dev = np.max(np.abs(theta - coef)) / np.max(np.abs(coef))
    assert dev < 1e-8, f"class-weight mapping check failed: {dev:.3e}"
    return float(dev)


# ---------------------------------------------------------------------------------------------
# Reference fits


def lambda_max(x, y, sw=None):
    """Smallest lasso lambda with b = 0 (ravel's and glmnet's): max_j |c_j|."""
    return float(np.max(np.abs(gram(x, y, sw)[1])))


def nice(v):
    """Six significant digits: a lambda that prints and parses exactly."""
    return float(f"{v:.6g}")


def lasso_lars_path(ds, x, y, std):
    """The exact Lasso path (LARS with the lasso modification) for the exact-k checks: ravel's
    k-model sits at some lambda*; on the path, the model at lambda* is the linear interpolation
    of the two breakpoints around it (the Lasso solution is piecewise linear in lambda), so the
    test can check any lambda* ravel picks. lars_path has no intercept: it runs on centred
    columns (scaled by the population sd when `std`) and centred y, whose objective is ravel's
    (1/2n)||y - b0 - X b||^2 + lambda ||b||_1 with b0 profiled out. Breakpoint coefficients are
    stored in raw units (b_j / sd_j; the map is linear, so interpolation commutes with it),
    with the intercept mean(y) - mean(x) . b. Self-check: at the midpoint of every segment the
    interpolation equals sklearn's coordinate-descent Lasso to 1e-8 relative."""
    mean = x.mean(axis=0)
    sd = x.std(axis=0) if std else np.ones(x.shape[1])
    xs = (x - mean) / sd
    yc = y - y.mean()
    alphas, _, coefs = lars_path(xs, yc, method="lasso")
    worst = 0.0
    for i in range(len(alphas) - 1):
        mid = 0.5 * (alphas[i] + alphas[i + 1])
        if mid <= 0.0:
            continue
        interp = 0.5 * (coefs[:, i] + coefs[:, i + 1])
        cd = Lasso(alpha=mid, tol=TOL, max_iter=MAX_ITER, fit_intercept=False).fit(xs, yc).coef_
        dev = np.max(np.abs(cd - interp)) / max(np.max(np.abs(interp)), 1e-300)
        worst = max(worst, dev)
    assert worst < 1e-8, f"{ds}: LARS path and coordinate descent differ by {worst:.2e}"
    raw = coefs / sd[:, None]
    return {
        "dataset": ds,
        "standardize": std,
        "alphas": [float(a) for a in alphas],
        "coefficients": [[float(v) for v in raw[:, i]] for i in range(len(alphas))],
        "intercepts": [float(y.mean() - mean @ raw[:, i]) for i in range(len(alphas))],
        "reference": "sklearn lars_path(method='lasso') on centred"
                     + (" StandardScaler" if std else "") + " rows and centred y",
        "midpoint_check_rel_dev": float(worst),
    }


class YScaled:
    """A model fitted on y / s, mapped back to y's units (coefficients and intercept times s)."""

    def __init__(self, model, s):
        self.coef_ = np.asarray(model.coef_, dtype=float) * s
        self.intercept_ = float(model.intercept_) * s


class Cases:
    def __init__(self):
        self.cases = []

    def add(self, name, dataset, method, model, scale=None, shift=None, **opts):
        """A reference model; fitted on (x - shift) / scale when those are given, mapped back
        to the raw columns: b_j = b'_j / scale_j, b0 = b0' - shift . b."""
        coef = np.asarray(model.coef_, dtype=float).ravel()
        intercept = float(model.intercept_)
        if scale is not None:
            coef = coef / scale
        if shift is not None:
            intercept -= float(shift @ coef)
        case = {
            "name": name,
            "dataset": dataset,
            "method": method,
            "standardize": opts.pop("standardize"),
            "task": opts.pop("task", "regression"),
            "intercept": intercept,
            "coefficients": [float(v) for v in coef],
        }
        for key in ("lambda", "l1_ratio", "gamma", "w_pos", "w_neg"):
            if key in opts:
                case[key] = opts.pop(key)
        case["reference"] = opts.pop("reference")
        case.update(opts)
        self.cases.append(case)
        return coef


def regression_cases(cases, ds, x, y, with_nonconvex=False):
    n = len(y)
    scaler = StandardScaler().fit(x)
    xs = scaler.transform(x)
    sd = scaler.scale_
    for std in (False, True):
        xf = xs if std else x
        tag = "std" if std else "raw"
        scale = sd if std else None
        shift = scaler.mean_ if std else None
        lmax = lambda_max(xf, y)
        for frac in (0.5, 0.1, 0.01):
            lam = nice(frac * lmax)
            m = Lasso(alpha=lam, tol=TOL, max_iter=MAX_ITER).fit(xf, y)
            dev = certify(f"{ds}/lasso", xf, y, m.coef_, "lasso", lam)
            cases.add(f"{ds}/{tag}/lasso/{lam}", ds, "lasso", m, scale, shift, standardize=std, **{"lambda": lam},
                      reference=f"sklearn Lasso(alpha={lam})" + (" on StandardScaler rows" if std else ""),
                      certificate_rel_dev=dev)
        for r, frac in ((0.3, 0.05), (0.7, 0.2)):
            lam = nice(frac * lmax / r)
            # Standardized: y / sd(y) too, as glmnet (module docstring).
            sy = float(np.std(y)) if std else 1.0
            m = ElasticNet(alpha=lam / sy, l1_ratio=r, tol=TOL, max_iter=MAX_ITER).fit(xf, y / sy)
            dev = certify(f"{ds}/enet", xf, y / sy, m.coef_, "enet", lam / sy, l1_ratio=r)
            m = YScaled(m, sy)
            cases.add(f"{ds}/{tag}/elastic-net/{lam}/{r}", ds, "elastic-net", m, scale, shift, standardize=std,
                      l1_ratio=r, **{"lambda": lam},
                      reference=(f"sklearn ElasticNet(alpha=lambda/sd(y)={lam / sy}, l1_ratio={r}) on StandardScaler "
                                 "rows and y / sd(y), coefficients times sd(y)") if std
                      else f"sklearn ElasticNet(alpha={lam}, l1_ratio={r})",
                      certificate_rel_dev=dev)
        for lam in (0.01, 1.0):
            m = Ridge(alpha=n * lam, tol=TOL).fit(xf, y)
            cases.add(f"{ds}/{tag}/ridge/{lam}", ds, "ridge", m, scale, shift, standardize=std, **{"lambda": lam},
                      reference=f"sklearn Ridge(alpha=n*lambda={n * lam})" + (" on StandardScaler rows" if std else ""))
        m = LinearRegression().fit(xf, y)
        cases.add(f"{ds}/{tag}/ols", ds, "ols", m, scale, shift, standardize=std,
                  reference="sklearn LinearRegression" + (" on StandardScaler rows" if std else ""))
        if with_nonconvex and skglm is not None:
            nonconvex_cases(cases, ds, xf, y, tag, std, scale, shift)


def nonconvex_cases(cases, ds, x, y, tag, std, scale, shift):
    q, _ = gram(x, y)
    eig_min = float(np.linalg.eigvalsh(q)[0])
    lmax = lambda_max(x, y)
    for kind, gamma, fracs in (("mcp", 3.0, (0.3, 0.05)), ("scad", 3.7, (0.3, 0.05)), ("mcp", 1.8, (0.1,))):
        concavity = 1.0 / gamma if kind == "mcp" else 1.0 / (gamma - 1.0)
        assert eig_min > concavity * 1.2, (
            f"{ds}: smallest eigenvalue {eig_min} does not make {kind} (gamma {gamma}) strictly convex")
        for frac in fracs:
            lam = nice(frac * lmax)
            pen = MCPenalty(alpha=lam, gamma=gamma) if kind == "mcp" else SCAD(alpha=lam, gamma=gamma)
            solver = AndersonCD(tol=TOL, max_iter=10_000, max_epochs=1_000_000, fit_intercept=True)
            m = GeneralizedLinearEstimator(datafit=Quadratic(), penalty=pen, solver=solver).fit(x, y)
            dev = certify(f"{ds}/{kind}", x, y, m.coef_, kind, lam, gamma=gamma)
            cases.add(f"{ds}/{tag}/{kind}/{lam}/{gamma}", ds, kind, m, scale, shift, standardize=std, gamma=gamma,
                      **{"lambda": lam},
                      reference=f"skglm GeneralizedLinearEstimator(Quadratic(), "
                                f"{'MCPenalty' if kind == 'mcp' else 'SCAD'}(alpha={lam}, gamma={gamma}))"
                                + (" on StandardScaler rows" if std else ""),
                      certificate_rel_dev=dev,
                      uniqueness=f"objective strictly convex: min eigenvalue of centred Gram {eig_min:.4f} "
                                 f"> concavity {concavity:.4f}")


def classification_cases(cases, ds, x, y):
    pos, neg = y > 0, y < 0
    n_p, n_n = int(pos.sum()), int(neg.sum())
    sd_neg = x[neg].std(axis=0)  # population sd of the negatives (003 section 3.6)
    for w_pos, w_neg in ((1.0, 1.0), (3.0, 1.0), (0.7, 1.8)):
        wt = w_pos + w_neg
        sw = np.where(pos, w_pos / n_p, w_neg / n_n)
        for std in (False, True):
            if std and (w_pos, w_neg) != (3.0, 1.0):
                continue
            xf = x / sd_neg if std else x
            scale = sd_neg if std else None
            tag = "std" if std else "raw"
            on = " on columns / negatives' sd" if std else ""
            lmax = lambda_max(xf, y, sw) * wt  # ravel's lambda_max: c is in units of W
            for frac in (0.3, 0.05):
                lam = nice(frac * lmax)
                m = Lasso(alpha=lam / wt, tol=TOL, max_iter=MAX_ITER).fit(xf, y, sample_weight=sw)
                dev = certify(f"{ds}/lasso", xf, y, m.coef_, "lasso", lam / wt, sw=sw)
                cases.add(f"{ds}/{tag}/lasso/{lam}/w{w_pos}:{w_neg}", ds, "lasso", m, scale, standardize=std,
                          task="classification", w_pos=w_pos, w_neg=w_neg, **{"lambda": lam},
                          reference=f"sklearn Lasso(alpha=lambda/(w_pos+w_neg)={lam / wt}), "
                                    f"sample_weight w_pos/n_pos, w_neg/n_neg{on}",
                          certificate_rel_dev=dev)
            if std:
                continue
            r = 0.5
            lam = nice(0.1 * lmax / r)
            m = ElasticNet(alpha=lam / wt, l1_ratio=r, tol=TOL, max_iter=MAX_ITER).fit(x, y, sample_weight=sw)
            dev = certify(f"{ds}/enet", x, y, m.coef_, "enet", lam / wt, sw=sw, l1_ratio=r)
            cases.add(f"{ds}/raw/elastic-net/{lam}/w{w_pos}:{w_neg}", ds, "elastic-net", m, standardize=False,
                      task="classification", w_pos=w_pos, w_neg=w_neg, l1_ratio=r, **{"lambda": lam},
                      reference=f"sklearn ElasticNet(alpha=lambda/(w_pos+w_neg)={lam / wt}, l1_ratio={r}), "
                                "sample_weight w_pos/n_pos, w_neg/n_neg",
                      certificate_rel_dev=dev)
            lam = 0.05
            m = Ridge(alpha=lam, tol=TOL).fit(x, y, sample_weight=sw)
            cases.add(f"{ds}/raw/ridge/{lam}/w{w_pos}:{w_neg}", ds, "ridge", m, standardize=False,
                      task="classification", w_pos=w_pos, w_neg=w_neg, **{"lambda": lam},
                      reference="sklearn Ridge(alpha=lambda), sample_weight w_pos/n_pos, w_neg/n_neg")
            m = LinearRegression().fit(x, y, sample_weight=sw)
            cases.add(f"{ds}/raw/ols/w{w_pos}:{w_neg}", ds, "ols", m, standardize=False,
                      task="classification", w_pos=w_pos, w_neg=w_neg,
                      reference="sklearn LinearRegression, sample_weight w_pos/n_pos, w_neg/n_neg")


# ---------------------------------------------------------------------------------------------


def main():
    os.makedirs(OUT, exist_ok=True)
    rng = np.random.default_rng(20240611)
    makers = {
        "corr": dataset_corr,
        "const": dataset_const,
        "wide": dataset_wide,
        "wellcond": dataset_wellcond,
        "classes": dataset_classes,
        "formats": dataset_formats,
    }
    datasets = {}
    cases = Cases()
    lars = []
    for name, make in makers.items():
        x, y = make(rng)
        p = x.shape[1]
        header = [f"x{j}" for j in range(p)] + ["y"]
        path = os.path.join(OUT, f"{name}.csv")
        write_csv(path, header, np.column_stack([x, y]))
        names, x, y = read_csv(path, "y")  # fit on exactly the numbers in the file
        datasets[name] = {"file": f"{name}.csv", "n": len(y), "p": p, "target": "y", "features": names}
        if name == "classes":
            datasets[name]["positives"] = int((y > 0).sum())
            classification_cases(cases, name, x, y)
        else:
            regression_cases(cases, name, x, y, with_nonconvex=(name == "wellcond"))
        if name == "formats":
            write_format_files(x, y)
        if name in ("corr", "wide", "wellcond", "formats"):
            for std in (False, True):
                lars.append(lasso_lars_path(name, x, y, std))

    # The class-weight mapping against a direct minimization of ravel's objective, at
    # w_pos = 3, w_neg = 1 and a lambda with a sparse but non-empty model.
    x, y = read_csv(os.path.join(OUT, "classes.csv"), "y")[1:]
    sw = np.where(y > 0, 3.0 / (y > 0).sum(), 1.0 / (y < 0).sum())
    mapping_dev = verify_weight_mapping(x, y, 3.0, 1.0, nice(0.05 * 4.0 * lambda_max(x, y, sw)))

    expected = {
        "generated_by": "scripts/make_fixtures.py",
        "versions": {
            "python": sys.version.split()[0],
            "numpy": np.__version__,
            "scikit-learn": sklearn.__version__,
            "skglm": getattr(skglm, "__version__", None) if skglm is not None else None,
        },
        "solver_settings": {"tol": TOL, "max_iter": MAX_ITER},
        "certificate_rtol": CERT_RTOL,
        "class_weight_mapping_check_rel_dev": mapping_dev,
        "datasets": datasets,
        "cases": cases.cases,
        "lasso_paths": lars,
    }
    with open(os.path.join(OUT, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1)
        f.write("\n")
    kinds = {}
    for c in cases.cases:
        kinds[c["method"]] = kinds.get(c["method"], 0) + 1
    print(f"{len(cases.cases)} cases {kinds}; class-weight mapping check {mapping_dev:.2e}; "
          f"worst certificate {max(c.get('certificate_rel_dev', 0) for c in cases.cases):.2e}")


def write_format_files(x, y):
    """The `formats` data set in every format ravel reads (all must give identical models):
    - formats.csv: header x0..x5,y, target last (default);
    - formats_mid.csv: target `y` moved to column 3 (`--target y` or `--target 3`);
    - formats.libsvm: label first, 1-based indices, zeros left out;
    - formats_c.npy: C order, target last; formats_f.npy: Fortran order, target first
      (`--target 0`)."""
    p = x.shape[1]
    mid = np.column_stack([x[:, :3], y, x[:, 3:]])
    write_csv(os.path.join(OUT, "formats_mid.csv"), [f"x{j}" for j in range(3)] + ["y"] + [f"x{j}" for j in range(3, p)], mid)
    write_libsvm(os.path.join(OUT, "formats.libsvm"), x, y)
    c = np.ascontiguousarray(np.column_stack([x, y]), dtype="<f8")
    np.save(os.path.join(OUT, "formats_c.npy"), c)
    f = np.asfortranarray(np.column_stack([y, x]), dtype="<f8")
    assert f.flags.f_contiguous and not f.flags.c_contiguous
    np.save(os.path.join(OUT, "formats_f.npy"), f)


if __name__ == "__main__":
    main()
