//! Paper 004's path: `points` deltas geometric from delta_max / 100 to delta_max, solved
//! from the sparsest, each warm-started from the previous solution moved along its ray to the
//! best feasible multiple (004 rescales it to l1 norm delta). 004 takes delta_max = ||b||_1 of
//! glmnet's solution at lambda_min = lambda_max / 100; without a given delta_max,
//! `find_delta_max` finds it with the solver itself: deltas doubled until the multiplier of the
//! constraint, lambda(delta) = ||grad||_inf at the solution, falls to lambda_max / 100, then
//! bisected (in log delta) to within 10 % of that lambda.

use super::{PathSpec, WideOptions, WidePoint, WideProblem, WideSolver};

/// 004's grid: the Gram-form Frank-Wolfe's, geometric from delta_max * ratio up to delta_max.
pub use crate::solve::frank_wolfe::delta_grid;

/// The path along increasing `deltas`, warm-started.
pub fn path(pr: &WideProblem, deltas: &[f64], opt: WideOptions) -> Vec<WidePoint> {
    let mut s = WideSolver::new(pr, opt);
    deltas.iter().map(|&d| s.solve(d)).collect()
}

/// What `find_delta_max` found.
#[derive(Debug, Clone)]
pub struct DeltaSearch {
    /// The delta whose multiplier is within 10 % of lambda_max * ratio.
    pub delta_max: f64,
    /// lambda_max.
    pub lambda_max: f64,
    /// Deltas tried.
    pub tried: usize,
    /// Iterations and dot products spent.
    pub iterations: usize,
    /// Dot products spent (lambda_max included).
    pub dot_products: u64,
}

/// 004's delta_max without glmnet: the l1 norm of the Lasso solution at lambda_max * ratio,
/// found by doubling delta (warm-started, by `opt`'s rule) until the constraint's
/// multiplier (`multiplier`) falls to that lambda, then bisecting.
pub fn find_delta_max(pr: &WideProblem, ratio: f64, opt: WideOptions) -> DeltaSearch {
    let lambda_max = pr.lambda_max();
    let target = lambda_max * ratio;
    let mut out = DeltaSearch {
        delta_max: 0.0,
        lambda_max,
        tried: 0,
        iterations: 0,
        dot_products: pr.x.p as u64,
    };
    if lambda_max <= 0.0 {
        return out;
    }
    // The first delta: the one-column least-squares coefficient of the best column.
    let s: f64 = pr.yc.iter().sum();
    let (mut j0, mut c0) = (0, 0.0f64);
    for j in 0..pr.x.p {
        let c = pr.corr(j, &pr.yc, s).abs();
        if c > c0 {
            (j0, c0) = (j, c);
        }
    }
    let mut delta = c0 / pr.norm2[j0].max(f64::MIN_POSITIVE);
    let mut solver = WideSolver::new(pr, opt);
    let mut lo: Option<f64> = None;
    let mut solve = |delta: f64, out: &mut DeltaSearch| {
        let pt = solver.solve(delta);
        out.tried += 1;
        out.iterations += pt.iterations;
        out.dot_products += pt.dot_products;
        multiplier(&pt)
    };
    // Doubling until the multiplier falls to the target ...
    loop {
        let lam = solve(delta, &mut out);
        if lam <= target || out.tried >= 60 {
            break;
        }
        lo = Some(delta);
        delta *= 2.0;
    }
    // ... then bisection (in log delta) to within 10 % of it. lambda(delta) falls to 0 at
    // the least-squares norm when n > p, so interpolating it could overshoot.
    let (mut lo, mut hi) = (lo.unwrap_or(delta), delta);
    let mut best = hi;
    for _ in 0..8 {
        if hi <= lo {
            break;
        }
        let mid = (lo * hi).sqrt();
        let lam = solve(mid, &mut out);
        if lam > target {
            lo = mid;
        } else {
            hi = mid;
            best = mid;
        }
        if (lam / target - 1.0).abs() <= 0.1 {
            best = mid;
            break;
        }
    }
    out.delta_max = best;
    out
}

/// The constraint's multiplier as a point estimates it: -grad^T b / ||b||_1 (the mean of
/// -sign(b_j) grad_j over the support, weighted by |b_j|), which equals ||grad||_inf at the
/// solution on the boundary (every support column's |grad_j| is the multiplier there), and is
/// (delta ||grad||_inf - gap) / ||b||_1 anywhere. Unlike ||grad||_inf it is not inflated by a
/// column about to enter, so a point stopped by 004's step rule before its gap is small still
/// estimates it well (issue 59: the search by the gap rule took 90 % of a path's time).
fn multiplier(pt: &WidePoint) -> f64 {
    let l1: f64 = pt.coefficients.iter().map(|c| c.1.abs()).sum();
    if l1 <= 0.0 {
        return pt.lambda;
    }
    ((pt.delta * pt.lambda - pt.gap) / l1).max(0.0)
}

/// A whole path: where it ends, how that was found, and its points (increasing delta).
#[derive(Debug, Clone)]
pub struct WidePath {
    /// The largest delta (0 when y or every column is constant: no point).
    pub delta_max: f64,
    /// The search for delta_max, when none was given.
    pub search: Option<DeltaSearch>,
    /// The points, sparsest first.
    pub points: Vec<WidePoint>,
}

/// The path of `spec`: delta_max given or found, 004's grid, then `path`. The one sequence
/// `ravel fit --wide` and a wide feature stream's HTTP path both run, so the same columns give
/// the same answer.
pub fn run_path(pr: &WideProblem, spec: PathSpec, opt: WideOptions) -> WidePath {
    let (delta_max, search) = match spec.delta_max {
        Some(d) => (d, None),
        None => {
            // The search by the points' own rule: judged by ||grad||_inf, 004's step rule
            // stopped the search's solves early enough to double delta_max (34.1 against
            // 17.3 on the fixture of tests/fit_wide.rs), so it ran by the gap rule, which took
            // 90 % of the time of a default path on a file of 004's shape (issue 59); judged
            // by `multiplier`, the step rule's points land where the gap rule's did.
            let s = find_delta_max(pr, spec.lambda_min_ratio, opt);
            (s.delta_max, Some(s))
        }
    };
    let points = if delta_max > 0.0 {
        path(
            pr,
            &delta_grid(delta_max, spec.delta_min_ratio, spec.points),
            opt,
        )
    } else {
        Vec::new()
    };
    WidePath {
        delta_max,
        search,
        points,
    }
}

/// The point of a path (increasing delta) with at most `k` nonzeros and the largest delta:
/// the model with k features or fewer that fits best. None when even the first has more.
pub fn point_with_k(points: &[WidePoint], k: usize) -> Option<usize> {
    points.iter().rposition(|p| p.coefficients.len() <= k)
}
