"""Independent reference solutions for the k-support-norm solver (`crates/ravel-core/tests/
seed_solvers.rs`, paper 002 chapter 2).

Writes tests/fixtures/ksupport.json: small regression problems (the raw rows) with the
minimizer of

    (1/2n) ||y_c - X_c w||^2 + lambda (||w||_k^sp)^2          (X_c, y_c: centred rows)

computed by cvxpy, which is ravel's k-support problem with `standardize = false` (ravel profiles
the intercept out, which is the same as centring). cvxpy never sees the sorting formula of the
norm: it uses the variational form of the squared k-support norm (McDonald, Pontil, Stamos 2016,
the box norm with a = 0, c = 1),

    (||w||_k^sp)^2 = min { sum_i w_i^2 / theta_i : 0 < theta_i <= 1, sum_i theta_i <= k },

a jointly convex program (quad_over_lin). The file also holds norm values of random vectors
computed by the same program, to check ravel's sorting formula on its own.

Regenerate (from the repository root; PyPI must be reachable):

    python3 -m venv .venv
    .venv/bin/pip install cvxpy
    .venv/bin/python scripts/make_ksupport_fixtures.py
"""

import json
import pathlib

import cvxpy as cp
import numpy as np

OUT = pathlib.Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "ksupport.json"

SOLVER_OPTS = dict(
    solver=cp.CLARABEL,
    tol_gap_abs=1e-10,
    tol_gap_rel=1e-10,
    tol_feas=1e-10,
    tol_ktratio=1e-10,
    max_iter=500,
)


def sq_ksupport(w, k):
    """cvxpy expression and constraints for (||w||_k^sp)^2 (variational form)."""
    p = w.shape[0]
    theta = cp.Variable(p)
    expr = sum(cp.quad_over_lin(w[i], theta[i]) for i in range(p))
    return expr, [theta <= 1, cp.sum(theta) <= k, theta >= 0]


def norm_value(v, k):
    w = cp.Variable(len(v))
    expr, cons = sq_ksupport(w, k)
    prob = cp.Problem(cp.Minimize(expr), cons + [w == v])
    prob.solve(**SOLVER_OPTS)
    return float(np.sqrt(prob.value))


def problem(seed, n, p, k, lam):
    rng = np.random.default_rng(seed)
    # Correlated columns with different scales and means, a sparse truth plus noise.
    z = rng.standard_normal((n, 1))
    x = 0.6 * z + rng.standard_normal((n, p))
    x = x * rng.uniform(0.5, 2.0, p) + rng.uniform(-1, 1, p)
    beta = np.zeros(p)
    beta[: max(1, p // 3)] = rng.choice([-1.5, 1.0, 2.0], max(1, p // 3))
    y = x @ beta + 0.5 * rng.standard_normal(n) + 3.0
    xc = x - x.mean(axis=0)
    yc = y - y.mean()
    w = cp.Variable(p)
    pen, cons = sq_ksupport(w, k)
    obj = cp.sum_squares(yc - xc @ w) / (2 * n) + lam * pen
    prob = cp.Problem(cp.Minimize(obj), cons)
    prob.solve(**SOLVER_OPTS)
    assert prob.status == cp.OPTIMAL, prob.status
    return {
        "seed": seed,
        "n": n,
        "p": p,
        "k": k,
        "lambda": lam,
        "x": x.ravel().tolist(),
        "y": y.tolist(),
        "w": w.value.tolist(),
        # Objective with the constant yy/2 left out, as cvxpy computed it.
        "objective": float(prob.value),
    }


def main():
    cases = [
        (1, 40, 6, 1, 0.05),
        (2, 40, 6, 2, 0.05),
        (3, 50, 8, 3, 0.02),
        (4, 50, 8, 3, 0.3),
        (5, 30, 10, 4, 0.01),
        (6, 60, 8, 8, 0.1),
    ]
    problems = [problem(*c) for c in cases]
    rng = np.random.default_rng(11)
    norms = []
    for k in [1, 2, 3, 5]:
        for _ in range(3):
            v = rng.standard_normal(6) * rng.uniform(0.1, 3.0, 6)
            norms.append({"v": v.tolist(), "k": k, "value": norm_value(v, k)})
    OUT.write_text(
        json.dumps(
            {
                "generator": "scripts/make_ksupport_fixtures.py",
                "cvxpy": cp.__version__,
                "numpy": np.__version__,
                "problems": problems,
                "norms": norms,
            },
            indent=1,
        )
        + "\n"
    )
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
