//! Penalized least squares by coordinate descent in covariance (Gram) form, glmnet style:
//! Lasso, elastic net, MCP and SCAD (003 Alg. 3 solves the same problems by proximal
//! gradient; coordinate descent reaches the same minimizer faster).
//!
//! The state keeps r = c - Q b, so a coordinate step reads one entry of r and, when b_j
//! moves, updates r with one column of Q: O(m) per change, never O(m^2) per sweep.
//! Sweeps alternate between all coordinates and the active set. Lasso and elastic net stop on
//! the duality gap (scikit-learn's Gram-form gap, divided by n), so the answer is certified;
//! MCP and SCAD (non-convex) stop when no coefficient moves more than the tolerance.
//!
//! A non-convex penalty has several minima and coordinate descent finds the one its start
//! leads to. A point (k or lambda) of MCP or SCAD is therefore solved from two starts: the
//! usual one (the warm-started path for k, b = 0 for lambda) and paper 003's Algorithm 3 run
//! for `SECOND_START_STEPS` proximal-gradient steps from b = 0, each then descended to
//! convergence; the lower objective wins at a lambda, the better least-squares fit of its k
//! features for k (`second_k`). The path stays one warm-started continuation.
//!
//! The family's parameters (`Penalized<P>`, with `P` the penalty's own) and its `Solver`
//! implementation (one model at k or lambda, or the warm-started path) close the file.

use super::cholesky::ColumnCholesky;
use super::{
    Fit, Method, ParamError, Problem, Solver, Sparsity, check, jitter_note, limits, usable_k,
};
use crate::gram::Gram;
use crate::gram::linear::{largest_eigenvalue, solve_subset};
use serde::de::IgnoredAny;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The penalty P(b) = sum_j pen(|b_j|).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Penalty {
    /// lambda |b|
    Lasso,
    /// lambda (r |b| + (1 - r)/(2 y_scale) b^2): y_scale is y's sd on standardized problems
    /// (glmnet solves on y / sd(y) and reports lambda in y's units, which is this penalty), so
    /// the support does not depend on y's units; 1 on raw ones (then scikit-learn's
    /// ElasticNet). `for_problem` sets it.
    ElasticNet {
        /// The l1 share r in (0, 1].
        l1_ratio: f64,
        /// y's sd on standardized problems, else 1.
        y_scale: f64,
    },
    /// Minimax concave penalty with concavity gamma > 1.
    Mcp {
        /// The concavity.
        gamma: f64,
    },
    /// Smoothly clipped absolute deviation with gamma > 2.
    Scad {
        /// The concavity.
        gamma: f64,
    },
}

impl Penalty {
    /// Smallest lambda at which b = 0 is a solution.
    pub fn lambda_max(&self, g: &Gram) -> f64 {
        let cmax = g.c.iter().fold(0.0f64, |a, v| a.max(v.abs()));
        match *self {
            Penalty::ElasticNet { l1_ratio, .. } => cmax / l1_ratio,
            _ => cmax,
        }
    }

    /// pen(|t|) at this lambda.
    pub fn value(&self, lambda: f64, t: f64) -> f64 {
        let t = t.abs();
        match *self {
            Penalty::Lasso => lambda * t,
            Penalty::ElasticNet { l1_ratio, y_scale } => {
                lambda * (l1_ratio * t + 0.5 * (1.0 - l1_ratio) / y_scale * t * t)
            }
            Penalty::Mcp { gamma } => {
                if t <= gamma * lambda {
                    lambda * t - t * t / (2.0 * gamma)
                } else {
                    0.5 * gamma * lambda * lambda
                }
            }
            Penalty::Scad { gamma } => {
                if t <= lambda {
                    lambda * t
                } else if t <= gamma * lambda {
                    (2.0 * gamma * lambda * t - t * t - lambda * lambda) / (2.0 * (gamma - 1.0))
                } else {
                    0.5 * lambda * lambda * (gamma + 1.0)
                }
            }
        }
    }

    /// argmin_b v/2 b^2 - z b + pen(|b|): the coordinate-wise minimizer (v = Q_jj > 0).
    #[inline]
    pub fn coordinate(&self, lambda: f64, z: f64, v: f64) -> f64 {
        match *self {
            Penalty::Lasso => soft(z, lambda) / v,
            Penalty::ElasticNet { l1_ratio, y_scale } => {
                soft(z, lambda * l1_ratio) / (v + lambda * (1.0 - l1_ratio) / y_scale)
            }
            Penalty::Mcp { gamma } => {
                // Closed form when the 1-D problem is convex (v > 1/gamma), else compare the
                // candidate minimizers of each piece.
                if v > 1.0 / gamma {
                    if z.abs() <= gamma * lambda * v {
                        soft(z, lambda) / (v - 1.0 / gamma)
                    } else {
                        z / v
                    }
                } else {
                    let inner = soft(z, lambda) / (v - 1.0 / gamma);
                    let cands = [0.0, inner.clamp(-gamma * lambda, gamma * lambda), z / v];
                    self.best_of(lambda, z, v, &cands)
                }
            }
            Penalty::Scad { gamma } => {
                let t = z.abs();
                if v > 1.0 / (gamma - 1.0) {
                    if t <= lambda * (1.0 + v) {
                        soft(z, lambda) / v
                    } else if t <= gamma * lambda * v {
                        soft(z, gamma * lambda / (gamma - 1.0)) / (v - 1.0 / (gamma - 1.0))
                    } else {
                        z / v
                    }
                } else {
                    let s1 = (soft(z, lambda) / v).clamp(-lambda, lambda);
                    let s2 = soft(z, gamma * lambda / (gamma - 1.0)) / (v - 1.0 / (gamma - 1.0));
                    let cands = [0.0, s1, s2.clamp(-gamma * lambda, gamma * lambda), z / v];
                    self.best_of(lambda, z, v, &cands)
                }
            }
        }
    }

    fn best_of(&self, lambda: f64, z: f64, v: f64, cands: &[f64]) -> f64 {
        let f = |b: f64| 0.5 * v * b * b - z * b + self.value(lambda, b);
        cands
            .iter()
            .copied()
            .filter(|b| b.is_finite())
            .fold(
                (0.0, f(0.0)),
                |(bb, fb), b| if f(b) < fb { (b, f(b)) } else { (bb, fb) },
            )
            .0
    }

    /// On the piece of the penalty that contains t != 0, pen'(t) = alpha + beta t (every
    /// penalty here is piecewise quadratic). Returns (alpha, beta, piece id).
    pub fn piece(&self, lambda: f64, t: f64) -> (f64, f64, u8) {
        let s = t.signum();
        let a = t.abs();
        match *self {
            Penalty::Lasso => (lambda * s, 0.0, 0),
            Penalty::ElasticNet { l1_ratio, y_scale } => (
                lambda * l1_ratio * s,
                lambda * (1.0 - l1_ratio) / y_scale,
                0,
            ),
            Penalty::Mcp { gamma } => {
                if a < gamma * lambda {
                    (lambda * s, -1.0 / gamma, 0)
                } else {
                    (0.0, 0.0, 1)
                }
            }
            Penalty::Scad { gamma } => {
                if a <= lambda {
                    (lambda * s, 0.0, 0)
                } else if a < gamma * lambda {
                    (gamma * lambda * s / (gamma - 1.0), -1.0 / (gamma - 1.0), 1)
                } else {
                    (0.0, 0.0, 2)
                }
            }
        }
    }

    /// The penalty as it applies to `problem`: elastic net's l2 term in units of y's sd on
    /// standardized regression problems (`Problem::y_scale`).
    pub fn for_problem(self, problem: &Problem) -> Penalty {
        match self {
            Penalty::ElasticNet { l1_ratio, .. } => Penalty::ElasticNet {
                l1_ratio,
                y_scale: problem.y_scale,
            },
            other => other,
        }
    }

    /// Whether the penalty is convex (Lasso, elastic net): then the duality gap certifies the answer.
    pub fn is_convex(&self) -> bool {
        matches!(self, Penalty::Lasso | Penalty::ElasticNet { .. })
    }
}

#[inline]
fn soft(z: f64, t: f64) -> f64 {
    if z > t {
        z - t
    } else if z < -t {
        z + t
    } else {
        0.0
    }
}

/// Solver settings.
#[derive(Debug, Clone, Copy)]
pub struct CdOptions {
    /// Lasso/EN: stop when the duality gap <= tol * yy. MCP/SCAD: when the largest
    /// coefficient change (in units of Q_jj^(1/2) b) is <= tol * sqrt(yy).
    pub tol: f64,
    /// Most full sweeps per lambda.
    pub max_sweeps: usize,
}

impl Default for CdOptions {
    fn default() -> Self {
        CdOptions {
            tol: 1e-10,
            max_sweeps: 100_000,
        }
    }
}

/// Active-set sweeps before the first exact (Newton) step; then after 2x, 4x, ... as many.
const NEWTON_AFTER: usize = 5;

/// A coordinate step smaller than this, relative to the coefficient, is rounding noise (an
/// exact Newton solution re-swept moves every nonzero by an ulp or so): it is skipped, which
/// saves an O(m) update of r per nonzero and leaves b and r consistent.
const NOISE: f64 = 1e-13;

/// A warm-startable coordinate-descent state: b and r = c - Q b, and the factor of the
/// active-set step. A state belongs to one Gram form.
#[derive(Debug, Clone)]
pub struct CdState {
    /// The coefficients.
    pub b: Vec<f64>,
    /// r = c - Q b.
    pub r: Vec<f64>,
    factor: ColumnCholesky,
}

/// What one solve reports.
#[derive(Debug, Clone, Copy)]
pub struct CdInfo {
    /// Coordinate sweeps (full or active-set).
    pub iterations: usize,
    /// Duality gap (Lasso/EN) or the final coefficient change (MCP/SCAD).
    pub measure: f64,
    /// Whether the tolerance was met.
    pub converged: bool,
}

impl CdState {
    /// The state at b = 0.
    pub fn zeros(g: &Gram) -> Self {
        CdState {
            b: vec![0.0; g.m],
            r: g.c.clone(),
            factor: ColumnCholesky::default(),
        }
    }

    /// Nonzero coefficients.
    pub fn nonzeros(&self) -> usize {
        self.b.iter().filter(|v| **v != 0.0).count()
    }

    /// One sweep over `coords`; returns the largest scaled change.
    fn sweep(&mut self, g: &Gram, pen: &Penalty, lambda: f64, coords: &[usize]) -> f64 {
        let mut max_change = 0.0f64;
        for &j in coords {
            let v = g.at(j, j);
            let old = self.b[j];
            let z = self.r[j] + v * old;
            let new = pen.coordinate(lambda, z, v);
            if (new - old).abs() > NOISE * old.abs() {
                let d = new - old;
                self.b[j] = new;
                for (ri, qij) in self.r.iter_mut().zip(g.col(j)) {
                    *ri -= d * qij;
                }
                max_change = max_change.max(d.abs() * v.sqrt());
            }
        }
        max_change
    }

    /// Exact minimization on the current sign/piece pattern of the nonzeros, the active-set
    /// ("feature-sign") step: with each nonzero b_j held on its piece the objective is the
    /// quadratic 1/2 b^T (Q + diag(beta)) b - (c - alpha)^T b, minimized by one Cholesky solve.
    /// If that minimizer leaves the pattern, move toward it up to the first coefficient that
    /// reaches 0 (the objective decreases along the segment: it agrees with the convex quadratic
    /// there), drop it and solve again. Accepted only with a positive definite system. CD alone
    /// converges linearly and on strongly correlated designs (003's) needs thousands of sweeps;
    /// this lands on the exact solution once the support is right. r is updated on `active`.
    /// The factor of Q_SS + diag(beta) is kept in the state and follows the support (a few
    /// columns in and out per call along a path) instead of being recomputed each time.
    fn newton(&mut self, g: &Gram, pen: &Penalty, lambda: f64, active: &[usize]) -> bool {
        let mut support: Vec<usize> = active
            .iter()
            .copied()
            .filter(|&j| self.b[j] != 0.0)
            .collect();
        let mut moved = false;
        for _ in 0..support.len().min(50) + 1 {
            if support.is_empty() {
                break;
            }
            let wanted: Vec<(usize, f64)> = support
                .iter()
                .map(|&j| (j, pen.piece(lambda, self.b[j]).1))
                .collect();
            if !self.factor.sync(g, &wanted) {
                self.factor.clear();
                break;
            }
            // From here on, the factor's order.
            support.clear();
            support.extend_from_slice(self.factor.columns());
            let pieces: Vec<(f64, f64, u8)> = support
                .iter()
                .map(|&j| pen.piece(lambda, self.b[j]))
                .collect();
            let mut x: Vec<f64> = support
                .iter()
                .zip(&pieces)
                .map(|(&j, p)| g.c[j] - p.0)
                .collect();
            self.factor.solve(&mut x);
            // Largest step t in (0, 1] that keeps every coefficient on its sign and piece.
            let mut t_max = 1.0f64;
            let mut hit = None;
            for (i, &j) in support.iter().enumerate() {
                let (b, v) = (self.b[j], x[i]);
                if !v.is_finite() {
                    return self.finish(g, active, &support, moved);
                }
                if v.signum() != b.signum() || v == 0.0 {
                    let t = b / (b - v);
                    if t < t_max {
                        t_max = t;
                        hit = Some(i);
                    }
                } else if pen.piece(lambda, v).2 != pieces[i].2 {
                    // A piece boundary away from 0 (MCP/SCAD): leave it to coordinate descent.
                    return self.finish(g, active, &support, moved);
                }
            }
            for (i, &j) in support.iter().enumerate() {
                self.b[j] += t_max * (x[i] - self.b[j]);
            }
            moved = true;
            match hit {
                None => return self.finish(g, active, &support, true),
                Some(i) => {
                    self.b[support[i]] = 0.0;
                    support.remove(i);
                }
            }
            if !pen.is_convex() {
                break;
            }
        }
        self.finish(g, active, &support, moved)
    }

    /// Recomputes r on `active` after `newton` moved b (zero outside `support`).
    fn finish(&mut self, g: &Gram, active: &[usize], support: &[usize], moved: bool) -> bool {
        if moved && active.len() == g.m {
            // Whole r: one column per nonzero, four at a time (one pass over r per four
            // columns; this streams |S| columns of Q and is most of a warm-started lambda).
            self.r.copy_from_slice(&g.c);
            let mut quads = support.chunks_exact(4);
            for q in &mut quads {
                let n = self.r.len();
                let (c0, c1, c2, c3) = (
                    &g.col(q[0])[..n],
                    &g.col(q[1])[..n],
                    &g.col(q[2])[..n],
                    &g.col(q[3])[..n],
                );
                let (b0, b1, b2, b3) = (self.b[q[0]], self.b[q[1]], self.b[q[2]], self.b[q[3]]);
                for (i, ri) in self.r.iter_mut().enumerate() {
                    *ri -= (b0 * c0[i] + b1 * c1[i]) + (b2 * c2[i] + b3 * c3[i]);
                }
            }
            for &j in quads.remainder() {
                let bj = self.b[j];
                for (ri, qij) in self.r.iter_mut().zip(g.col(j)) {
                    *ri -= bj * qij;
                }
            }
        } else if moved {
            for &i in active {
                let row = g.col(i);
                self.r[i] = g.c[i] - support.iter().map(|&j| row[j] * self.b[j]).sum::<f64>();
            }
        }
        moved
    }

    /// A sweep over `active` that keeps r exact on `active` only (see `solve`).
    fn sweep_active(&mut self, g: &Gram, pen: &Penalty, lambda: f64, active: &[usize]) -> f64 {
        let mut max_change = 0.0f64;
        for &j in active {
            let v = g.at(j, j);
            let old = self.b[j];
            let new = pen.coordinate(lambda, self.r[j] + v * old, v);
            if (new - old).abs() > NOISE * old.abs() {
                let d = new - old;
                self.b[j] = new;
                let col = g.col(j);
                for &i in active {
                    self.r[i] -= d * col[i];
                }
                max_change = max_change.max(d.abs() * v.sqrt());
            }
        }
        max_change
    }

    /// Duality gap for Lasso / elastic net at this lambda (Gram form; 0 <= gap, and
    /// gap >= primal - optimum).
    pub fn duality_gap(&self, g: &Gram, pen: &Penalty, lambda: f64) -> f64 {
        let (l1, l2) = match *pen {
            Penalty::Lasso => (lambda, 0.0),
            Penalty::ElasticNet { l1_ratio, y_scale } => {
                (lambda * l1_ratio, lambda * (1.0 - l1_ratio) / y_scale)
            }
            _ => return f64::NAN,
        };
        let cb: f64 = g.c.iter().zip(&self.b).map(|(c, b)| c * b).sum();
        let br: f64 = self.b.iter().zip(&self.r).map(|(b, r)| b * r).sum();
        let r2 = (g.yy - cb - br).max(0.0);
        let mut dual_norm = 0.0f64;
        let (mut l1_norm, mut l2_norm) = (0.0, 0.0);
        for (b, r) in self.b.iter().zip(&self.r) {
            dual_norm = dual_norm.max((r - l2 * b).abs());
            l1_norm += b.abs();
            l2_norm += b * b;
        }
        let (konst, mut gap) = if dual_norm > l1 {
            let k = l1 / dual_norm;
            (k, 0.5 * (r2 + r2 * k * k))
        } else {
            (1.0, r2)
        };
        gap += l1 * l1_norm - konst * (g.yy - cb) + 0.5 * l2 * (1.0 + konst * konst) * l2_norm;
        gap.max(0.0)
    }

    /// Minimizes 1/2 b^T Q b - c^T b + P_lambda(b) from the current state; coefficients whose
    /// being nonzero is rounding are then set to 0 (`drop_rounding`).
    pub fn solve(&mut self, g: &Gram, pen: &Penalty, lambda: f64, opt: &CdOptions) -> CdInfo {
        let info = self.descend(g, pen, lambda, opt);
        self.drop_rounding(g);
        info
    }

    /// Sets to 0 every coefficient too small to be told from 0 in floating point, and updates
    /// r. A coordinate's value is v b_j = z_j - lambda (Lasso; the other penalties alike up to a
    /// factor of order 1) with z_j = c_j - sum_{i != j} Q_ji b_i, a sum whose rounding error is
    /// a few eps times (s + 1) times sigma_j = |c_j| + sum_i |Q_ji b_i| over the s nonzeros. A
    /// coefficient with |Q_jj b_j| below 16 (s + 1) eps sigma_j is that rounding, not a
    /// feature: with the same column twice, Lasso left 1e-16 on the second copy and counted
    /// it as one of the k (issue 11 item 6). A real coefficient entering the path is that small
    /// only within a relative 1e-13 of its lambda, below the k search's bisection resolution.
    pub fn drop_rounding(&mut self, g: &Gram) {
        let support: Vec<usize> = (0..g.m).filter(|&j| self.b[j] != 0.0).collect();
        let bound = 16.0 * (support.len() + 1) as f64 * f64::EPSILON;
        let negligible: Vec<usize> = support
            .iter()
            .copied()
            .filter(|&j| {
                let col = g.col(j);
                let sigma = g.c[j].abs()
                    + support
                        .iter()
                        .map(|&i| (col[i] * self.b[i]).abs())
                        .sum::<f64>();
                (g.at(j, j) * self.b[j]).abs() <= bound * sigma
            })
            .collect();
        for j in negligible {
            let bj = std::mem::take(&mut self.b[j]);
            for (ri, qij) in self.r.iter_mut().zip(g.col(j)) {
                *ri += bj * qij;
            }
        }
    }

    fn descend(&mut self, g: &Gram, pen: &Penalty, lambda: f64, opt: &CdOptions) -> CdInfo {
        let all: Vec<usize> = (0..g.m).filter(|&j| g.at(j, j) > 0.0).collect();
        let scale = g.yy.max(f64::MIN_POSITIVE);
        let change_tol = opt.tol.sqrt() * 1e-2 * scale.sqrt();
        let mut iterations = 0;
        let mut measure = f64::INFINITY;
        let (mut outer, mut next_outer) = (0usize, 1usize);
        // Warm start along a path: the support rarely changes between neighbouring lambdas, so
        // the exact step on the previous pattern is usually the answer already.
        if self.b.iter().any(|v| *v != 0.0) {
            let everything: Vec<usize> = (0..g.m).collect();
            self.newton(g, pen, lambda, &everything);
        }
        while iterations < opt.max_sweeps {
            if super::interrupt::stop() {
                break;
            }
            let full_change = self.sweep(g, pen, lambda, &all);
            iterations += 1;
            if pen.is_convex() {
                measure = self.duality_gap(g, pen, lambda);
                if measure <= opt.tol * scale {
                    return CdInfo {
                        iterations,
                        measure,
                        converged: true,
                    };
                }
            } else if full_change <= change_tol {
                return CdInfo {
                    iterations,
                    measure: full_change,
                    converged: true,
                };
            }
            // After 1, 2, 4, 8, ... full sweeps, the exact step on the current pattern (cheap: the
            // factor follows the support).
            outer += 1;
            if outer == next_outer && g.m > 0 {
                next_outer *= 2;
                let everything: Vec<usize> = (0..g.m).collect();
                if self.newton(g, pen, lambda, &everything) {
                    continue;
                }
            }
            // Converge on the active set before the next full sweep. Inside this loop r is
            // kept exact on the active set only (O(|A|) per change instead of O(m)); the other
            // entries catch up once at the end, with one column per moved coefficient.
            let active: Vec<usize> = all.iter().copied().filter(|&j| self.b[j] != 0.0).collect();
            let before: Vec<f64> = active.iter().map(|&j| self.b[j]).collect();
            let mut inner = 0;
            let mut next_try = NEWTON_AFTER;
            loop {
                if iterations >= opt.max_sweeps {
                    break;
                }
                if super::interrupt::stop() {
                    break;
                }
                let change = self.sweep_active(g, pen, lambda, &active);
                iterations += 1;
                measure = change;
                if change <= change_tol {
                    break;
                }
                // Every so often (5, 10, 20, ... sweeps) jump to the exact minimizer of the
                // current pattern; the sweeps that follow confirm it or move on.
                inner += 1;
                if inner == next_try {
                    self.newton(g, pen, lambda, &active);
                    next_try *= 2;
                }
            }
            let saved: Vec<f64> = active.iter().map(|&j| self.r[j]).collect();
            for (&j, b0) in active.iter().zip(&before) {
                let d = self.b[j] - b0;
                if d != 0.0 {
                    for (ri, qij) in self.r.iter_mut().zip(g.col(j)) {
                        *ri -= d * qij;
                    }
                }
            }
            for (&j, r) in active.iter().zip(saved) {
                self.r[j] = r;
            }
        }
        if pen.is_convex() {
            measure = self.duality_gap(g, pen, lambda);
        }
        CdInfo {
            iterations,
            measure,
            converged: false,
        }
    }
}

/// A geometric lambda grid from lambda_max down to lambda_max * ratio.
pub fn lambda_grid(lambda_max: f64, ratio: f64, points: usize) -> Vec<f64> {
    if points <= 1 {
        return vec![lambda_max];
    }
    (0..points)
        .map(|i| lambda_max * ratio.powf(i as f64 / (points - 1) as f64))
        .collect()
}

/// A solution at one lambda.
#[derive(Debug, Clone)]
pub struct PathPoint {
    /// The penalty level.
    pub lambda: f64,
    /// The coefficients.
    pub b: Vec<f64>,
    /// How the solve went.
    pub info: CdInfo,
}

/// Solves along `lambdas` (decreasing), each warm-started from the previous.
pub fn path(g: &Gram, pen: &Penalty, lambdas: &[f64], opt: &CdOptions) -> Vec<PathPoint> {
    let mut state = CdState::zeros(g);
    lambdas
        .iter()
        .map(|&lambda| {
            let info = state.solve(g, pen, lambda, opt);
            PathPoint {
                lambda,
                b: state.b.clone(),
                info,
            }
        })
        .collect()
}

/// The model with exactly k nonzeros, found along the path and by bisection between path
/// points. `exact` is false when no lambda gives k: nonconvex penalties (MCP, SCAD) can jump
/// past k as lambda falls. Then `point` is the closest model below k, and `above` the
/// closest model above it (fewest nonzeros over k), when one was met.
pub struct KSolution {
    /// The solution.
    pub point: PathPoint,
    /// Whether it has exactly k nonzeros.
    pub exact: bool,
    /// When not exact: the closest model above k, if one was met.
    pub above: Option<PathPoint>,
    /// Lambdas solved on the way, for the diagnostics.
    pub solves: usize,
}

impl KSolution {
    /// The k-model when no lambda gives exactly k: the k largest coefficients of the closest
    /// model above k, measured as |b_j| sqrt(Q_jj) (the size of feature j's contribution,
    /// whatever the scaling), ties to the lower index; the closest model below k when no
    /// model above was met. Returns the point and the nonzeros of the model it came from.
    pub fn truncated(self, g: &Gram, k: usize) -> (PathPoint, usize) {
        let nonzeros = |b: &[f64]| b.iter().filter(|v| **v != 0.0).count();
        match self.above {
            Some(mut above) if !self.exact => {
                let from = nonzeros(&above.b);
                let mut order: Vec<usize> =
                    (0..above.b.len()).filter(|&j| above.b[j] != 0.0).collect();
                let size = |j: usize| above.b[j].abs() * g.at(j, j).max(0.0).sqrt();
                order.sort_by(|&a, &b| size(b).total_cmp(&size(a)).then(a.cmp(&b)));
                for &j in &order[k.min(order.len())..] {
                    above.b[j] = 0.0;
                }
                (above, from)
            }
            _ => {
                let from = nonzeros(&self.point.b);
                (self.point, from)
            }
        }
    }
}

/// The penalized solution with k nonzeros: along a path of `points` lambdas down to `ratio` lambda_max,
/// then bisection between the points around k.
pub fn solve_for_k(
    g: &Gram,
    pen: &Penalty,
    k: usize,
    ratio: f64,
    points: usize,
    opt: &CdOptions,
) -> KSolution {
    let lmax = pen.lambda_max(g);
    let mut state = CdState::zeros(g);
    let mut best_below = PathPoint {
        lambda: lmax,
        b: state.b.clone(),
        info: CdInfo {
            iterations: 0,
            measure: 0.0,
            converged: true,
        },
    };
    let mut solves = 0;
    if k == 0 || lmax == 0.0 {
        return KSolution {
            point: best_below,
            exact: k == 0,
            above: None,
            solves,
        };
    }
    // The grid continues past `ratio` (six more decades) in case k needs a smaller lambda.
    let decades = -ratio.log10() + 6.0;
    let total = ((points as f64) * decades / -ratio.log10()).ceil() as usize;
    let grid = lambda_grid(lmax, ratio * 1e-6, total.max(points));
    let mut prev_state = state.clone();
    for &lambda in grid.iter().skip(1) {
        let info = state.solve(g, pen, lambda, opt);
        solves += 1;
        let nnz = state.nonzeros();
        if nnz == k {
            return KSolution {
                point: PathPoint {
                    lambda,
                    b: state.b,
                    info,
                },
                exact: true,
                above: None,
                solves,
            };
        }
        if nnz < k {
            best_below = PathPoint {
                lambda,
                b: state.b.clone(),
                info,
            };
            prev_state = state.clone();
            continue;
        }
        // Bisect (in log lambda) between best_below.lambda (< k) and lambda (> k).
        let mut above = PathPoint {
            lambda,
            b: state.b.clone(),
            info,
        };
        let (mut hi, mut lo) = (best_below.lambda, lambda);
        for _ in 0..60 {
            if hi / lo - 1.0 < 1e-12 {
                break;
            }
            let mid = (hi * lo).sqrt();
            let mut trial = prev_state.clone();
            let info = trial.solve(g, pen, mid, opt);
            solves += 1;
            let nnz = trial.nonzeros();
            if nnz == k {
                return KSolution {
                    point: PathPoint {
                        lambda: mid,
                        b: trial.b,
                        info,
                    },
                    exact: true,
                    above: None,
                    solves,
                };
            }
            if nnz < k {
                hi = mid;
                best_below = PathPoint {
                    lambda: mid,
                    b: trial.b.clone(),
                    info,
                };
                prev_state = trial;
            } else {
                lo = mid;
                if nnz <= above.b.iter().filter(|v| **v != 0.0).count() {
                    above = PathPoint {
                        lambda: mid,
                        b: trial.b,
                        info,
                    };
                }
            }
        }
        return KSolution {
            point: best_below,
            exact: false,
            above: Some(above),
            solves,
        };
    }
    KSolution {
        point: best_below,
        exact: false,
        above: None,
        solves,
    }
}

/// Proximal-gradient steps of the second start (paper 003 Algorithm 3 from b = 0, stopped
/// early, then coordinate descent). On 003's Table 2 design at n = 300 (p = 1000, k = 100,
/// seeds 0-3) 300 to 3000 steps all led coordinate descent to the same minimum, lower than the
/// warm-started path's, with the 100 true features; 100 steps did on seeds 0-2 but not 3, and
/// 30 steps not on seeds 1 and 2.
pub const SECOND_START_STEPS: usize = 300;

/// The second start runs when the problem has at most this many columns: its steps and the
/// power iteration for the step size cost m^2 multiply-adds each (2e8 in all at m = 1000,
/// 1.25e9 at the bound); above it a point has the usual start only.
pub const SECOND_START_MAX_M: usize = 2500;

impl CdState {
    /// The state paper 003's Algorithm 3 reaches after `steps` proximal-gradient steps from
    /// b = 0 at `lambda`: b <- prox(b + eta r) with eta = 1 / (1.05 L), L the largest
    /// eigenvalue of Q by power iteration. The prox of each coordinate is the coordinate
    /// minimizer with curvature 1 / eta.
    pub fn proximal(g: &Gram, pen: &Penalty, lambda: f64, steps: usize) -> CdState {
        let mut state = CdState::zeros(g);
        let all: Vec<usize> = (0..g.m).collect();
        let curvature = largest_eigenvalue(g, &all, 100) * 1.05;
        if !(curvature > 0.0 && curvature.is_finite()) {
            return state;
        }
        for _ in 0..steps {
            if super::interrupt::stop() {
                break;
            }
            // Every coordinate from the same r (a gradient step), then r = c - Q b once.
            for (b, r) in state.b.iter_mut().zip(&state.r) {
                *b = pen.coordinate(lambda, curvature * *b + r, curvature);
            }
            let support: Vec<usize> = (0..g.m).filter(|&j| state.b[j] != 0.0).collect();
            state.finish(g, &all, &support, true);
        }
        state
    }

    /// The objective 1/2 b^T Q b - c^T b + P_lambda(b), from b and r (b^T Q b = b^T (c - r)).
    pub fn objective(&self, g: &Gram, pen: &Penalty, lambda: f64) -> f64 {
        self.b
            .iter()
            .zip(&g.c)
            .zip(&self.r)
            .filter(|((b, _), _)| **b != 0.0)
            .map(|((b, c), r)| -0.5 * b * (c + r) + pen.value(lambda, *b))
            .sum()
    }
}

/// The second start's solution at `lambda` (see the module header); None for a convex
/// penalty (one minimum) or a problem wider than `SECOND_START_MAX_M`.
pub fn second_start(
    g: &Gram,
    pen: &Penalty,
    lambda: f64,
    opt: &CdOptions,
) -> Option<(CdState, CdInfo)> {
    if pen.is_convex() || g.m == 0 || g.m > SECOND_START_MAX_M {
        return None;
    }
    let mut state = CdState::proximal(g, pen, lambda, SECOND_START_STEPS);
    let info = state.solve(g, pen, lambda, opt);
    Some((state, info))
}

/// The solution at `lambda` with the lower objective of the two starts: b = 0, and for a
/// non-convex penalty the second start (kept only when strictly lower beyond rounding).
pub fn solve_at(g: &Gram, pen: &Penalty, lambda: f64, opt: &CdOptions) -> PathPoint {
    let mut state = CdState::zeros(g);
    let mut info = state.solve(g, pen, lambda, opt);
    if let Some((other, other_info)) = second_start(g, pen, lambda, opt) {
        let (mine, theirs) = (
            state.objective(g, pen, lambda),
            other.objective(g, pen, lambda),
        );
        if below_rounding(theirs, mine, g) {
            state = other;
            info = other_info;
        }
    }
    PathPoint {
        lambda,
        b: state.b,
        info,
    }
}

/// The k-model of the second start: its solution at `lambda` (the warm-started path's
/// k-model), then, when that has more (fewer) than k nonzeros, the path warm-started from it
/// up (down) in lambda to the nearest lambda with exactly k, by growing steps and bisection.
/// None without a second start, or when that path jumps over k.
pub fn second_k(
    g: &Gram,
    pen: &Penalty,
    k: usize,
    lambda: f64,
    opt: &CdOptions,
) -> Option<PathPoint> {
    let (state, info) = second_start(g, pen, lambda, opt)?;
    let nnz = state.nonzeros();
    if nnz == k {
        return Some(PathPoint {
            lambda,
            b: state.b,
            info,
        });
    }
    let up = nnz > k;
    let lmax = pen.lambda_max(g);
    let floor = lmax * limits::MIN_PATH_RATIO * 1e-6;
    // Solves at a lambda warm from `start`: the point if it has exactly k nonzeros, else the
    // state and its count (boxed: a state is large beside a point).
    type Other = Box<(CdState, usize)>;
    let solve = |start: &CdState, lambda: f64| -> Result<PathPoint, Other> {
        let mut state = start.clone();
        let info = state.solve(g, pen, lambda, opt);
        match state.nonzeros() {
            z if z == k => Ok(PathPoint {
                lambda,
                b: state.b,
                info,
            }),
            z => Err(Box::new((state, z))),
        }
    };
    // `from`: the last solution on the starting side of k, warm start of the next ones.
    let (mut at, mut from) = (lambda, state);
    let mut step = 1.02f64;
    for _ in 0..64 {
        let next = if up {
            (at * step).min(lmax)
        } else {
            (at / step).max(floor)
        };
        let (trial, z) = match solve(&from, next) {
            Ok(point) => return Some(point),
            Err(other) => *other,
        };
        if (z > k) == up {
            if next == lmax || next == floor {
                return None;
            }
            (at, from) = (next, trial);
            step *= step;
            continue;
        }
        // Crossed k between `at` and `next`: bisect in log lambda, warm from the start side.
        let mut across = next;
        for _ in 0..60 {
            if (at / across).ln().abs() < 1e-12 {
                break;
            }
            let mid = (at * across).sqrt();
            match solve(&from, mid) {
                Ok(point) => return Some(point),
                Err(other) if (other.1 > k) == up => (at, from) = (mid, other.0),
                Err(_) => across = mid,
            }
        }
        return None;
    }
    None
}

/// Whether the second start's value (an objective or a loss of `g`) is below the first's by
/// more than rounding: otherwise the usual start's answer stays.
fn below_rounding(theirs: f64, mine: f64, g: &Gram) -> bool {
    theirs < mine - 1e-12 * (mine.abs() + g.yy)
}

/// Training loss (1/2 the mean squared error, `Gram::loss`) of the OLS refit on b's support:
/// how well k features fit, whatever their penalized coefficients.
fn refit_loss(g: &Gram, b: &[f64]) -> f64 {
    let support: Vec<usize> = (0..g.m).filter(|&j| b[j] != 0.0).collect();
    g.loss(&solve_subset(g, &support, 0.0).b)
}

/// The parameters every coordinate-descent method shares, with its own (`P`: none for Lasso,
/// `l1_ratio` for elastic net, `gamma` for MCP and SCAD) in the same JSON object:
/// `{"method": "mcp", "k": 10, "gamma": 3}`. One model takes exactly one of `k` or `lambda`;
/// the path takes neither.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Penalized<P> {
    /// Exactly k nonzeros (the lambda is searched along the path, then bisected).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub k: Option<usize>,
    /// The penalty level (>= 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lambda: Option<f64>,
    /// Refit OLS on the selected support. Default: true for a k request (paper 003 Alg. 3
    /// selects k features with the penalty, then fits them by OLS), false for a lambda request
    /// and the path (the penalized estimate). `false` with `k` gives the penalized estimate at
    /// the lambda that selects k.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refit: Option<bool>,
    /// Lambda path length (default 100, at most `limits::MAX_PATH_POINTS`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path_points: Option<usize>,
    /// lambda_min / lambda_max (default 1e-4 when n > p, else 1e-2, as glmnet).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lambda_min_ratio: Option<f64>,
    /// Convergence tolerance (default 1e-10; see `CdOptions::tol`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tol: Option<f64>,
    /// The penalty's own parameters (flattened into the same JSON object).
    #[serde(flatten)]
    pub penalty: P,
    /// Fields no parameter claims (refused by `check`: serde cannot deny unknown fields
    /// through a flattened struct).
    #[serde(flatten, skip_serializing)]
    #[cfg_attr(feature = "openapi", schema(ignore))]
    unknown: BTreeMap<String, IgnoredAny>,
}

impl<P: Default> Default for Penalized<P> {
    fn default() -> Self {
        Penalized {
            k: None,
            lambda: None,
            refit: None,
            path_points: None,
            lambda_min_ratio: None,
            tol: None,
            penalty: P::default(),
            unknown: BTreeMap::new(),
        }
    }
}

impl<P: Default> Penalized<P> {
    /// Exactly k nonzeros, other settings default.
    pub fn k(k: usize) -> Self {
        Penalized {
            k: Some(k),
            ..Self::default()
        }
    }
    /// At penalty lambda, other settings default.
    pub fn lambda(lambda: f64) -> Self {
        Penalized {
            lambda: Some(lambda),
            ..Self::default()
        }
    }
    /// The whole path, default settings.
    pub fn path() -> Self {
        Self::default()
    }
}

/// A penalty's own parameters.
pub trait PenaltyParams {
    /// The method these parameters are for.
    const METHOD: Method;
    /// Whether the penalty is indifferent to how weight is split among identical columns
    /// (`Solver::merges_duplicates`): not elastic net, whose l2 part splits it evenly.
    const MERGES_DUPLICATES: bool = true;
    /// Checks the penalty's own parameters.
    fn check(&self) -> Result<(), ParamError>;
    /// The penalty they define.
    fn penalty(&self) -> Penalty;
}

/// Lasso has no parameter of its own.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LassoParams {}

/// Elastic net's default mixing. Measured on paper 003's Table 2 design with y standardized
/// (`scripts/table2.py --methods elastic-net --extra 'elastic-net=--l1-ratio R'`, 5 seeds, k =
/// 100, n = 300 / 500 / 1000 / 3000 / 10000; paper 24.7 / 27.7 / 32.1 / 45.2 / 72.4): R = 0.5
/// detects 21.6 / 23.0 / 24.0 / 38.6 / 58.8, R = 0.8 23.8 / 26.8 / 28.0 / 43.6 / 68.0, R = 0.9
/// 25.8 / 27.6 / 30.4 / 46.4 / 70.4, R = 0.95 26.0 / 28.0 / 31.2 / 47.6 / 71.6. 0.9 is the
/// largest l2 share within 3 points of the paper at every n (the paper's elastic net, like
/// this one, trails its Lasso by about a point).
pub const DEFAULT_L1_RATIO: f64 = 0.9;

/// Elastic net's mixing: 1 is Lasso, towards 0 ridge.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ElasticNetParams {
    /// In (0, 1]; default 0.9 (`DEFAULT_L1_RATIO`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub l1_ratio: Option<f64>,
}

/// MCP's concavity.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct McpParams {
    /// > 1; default 3.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gamma: Option<f64>,
}

/// SCAD's concavity.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ScadParams {
    /// > 2; default 3.7.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gamma: Option<f64>,
}

/// Lasso: `{"method": "lasso", "k": 10}` or `{"method": "lasso", "lambda": 0.1}`.
pub type Lasso = Penalized<LassoParams>;
/// Elastic net, with `l1_ratio`.
pub type ElasticNet = Penalized<ElasticNetParams>;
/// MCP, with `gamma`.
pub type Mcp = Penalized<McpParams>;
/// SCAD, with `gamma`.
pub type Scad = Penalized<ScadParams>;

impl PenaltyParams for LassoParams {
    const METHOD: Method = Method::Lasso;
    fn check(&self) -> Result<(), ParamError> {
        Ok(())
    }
    fn penalty(&self) -> Penalty {
        Penalty::Lasso
    }
}

impl PenaltyParams for ElasticNetParams {
    const METHOD: Method = Method::ElasticNet;
    const MERGES_DUPLICATES: bool = false;
    fn check(&self) -> Result<(), ParamError> {
        match self.l1_ratio {
            Some(r) if !(r.is_finite() && r > 0.0 && r <= 1.0) => Err(ParamError::Invalid(
                format!("l1_ratio must lie in (0, 1], got {r}"),
            )),
            _ => Ok(()),
        }
    }
    fn penalty(&self) -> Penalty {
        Penalty::ElasticNet {
            l1_ratio: self.l1_ratio.unwrap_or(DEFAULT_L1_RATIO),
            y_scale: 1.0,
        }
    }
}

fn check_gamma(method: Method, gamma: Option<f64>, min: f64) -> Result<(), ParamError> {
    match gamma {
        Some(gm) if !(gm.is_finite() && gm > min) => Err(ParamError::Invalid(format!(
            "gamma for {method} must be > {min}, got {gm}"
        ))),
        _ => Ok(()),
    }
}

impl PenaltyParams for McpParams {
    const METHOD: Method = Method::Mcp;
    fn check(&self) -> Result<(), ParamError> {
        check_gamma(Self::METHOD, self.gamma, 1.0)
    }
    fn penalty(&self) -> Penalty {
        Penalty::Mcp {
            gamma: self.gamma.unwrap_or(3.0),
        }
    }
}

impl PenaltyParams for ScadParams {
    const METHOD: Method = Method::Scad;
    fn check(&self) -> Result<(), ParamError> {
        check_gamma(Self::METHOD, self.gamma, 2.0)
    }
    fn penalty(&self) -> Penalty {
        Penalty::Scad {
            gamma: self.gamma.unwrap_or(3.7),
        }
    }
}

impl<P: PenaltyParams> Penalized<P> {
    fn options(&self) -> CdOptions {
        CdOptions {
            tol: self.tol.unwrap_or(1e-10),
            ..CdOptions::default()
        }
    }
    fn ratio(&self, problem: &Problem) -> f64 {
        self.lambda_min_ratio
            .unwrap_or(if problem.n as usize > problem.p {
                1e-4
            } else {
                1e-2
            })
    }
    /// The solver's answer at one point as a `Fit` (refitted when asked).
    fn point_fit(&self, g: &Gram, point: PathPoint, k_exact: Option<bool>) -> Fit {
        let pen = self.penalty.penalty();
        let convex = pen.is_convex();
        let mut notes = Vec::new();
        let mut b = point.b;
        let mut singular_ridge = None;
        if self.refits() {
            let support: Vec<usize> = (0..g.m).filter(|&j| b[j] != 0.0).collect();
            let sol = solve_subset(g, &support, 0.0);
            singular_ridge = jitter_note(sol.jitter, &mut notes);
            b = sol.b;
        }
        let (l1_ratio, gamma) = match pen {
            Penalty::ElasticNet { l1_ratio, .. } => (Some(l1_ratio), None),
            Penalty::Mcp { gamma } | Penalty::Scad { gamma } => (None, Some(gamma)),
            Penalty::Lasso => (None, None),
        };
        Fit {
            b,
            lambda: Some(point.lambda),
            l1_ratio,
            gamma,
            iterations: point.info.iterations,
            gap: convex.then_some(point.info.measure),
            convergence: (!convex).then_some(point.info.measure),
            converged: point.info.converged,
            requested_k: self.k,
            k_exact,
            refit: self.refits(),
            singular_ridge,
            notes,
            ..Fit::default()
        }
    }
}

impl<P: PenaltyParams> Solver for Penalized<P> {
    fn check(&self, p: usize, path: bool) -> Result<(), ParamError> {
        if let Some(name) = self.unknown.keys().next() {
            return Err(ParamError::UnknownField(format!(
                "unknown field `{name}` for {}: expected k, lambda, refit, path_points, \
                 lambda_min_ratio, tol{}",
                P::METHOD,
                match P::METHOD {
                    Method::ElasticNet => ", l1_ratio",
                    Method::Mcp | Method::Scad => ", gamma",
                    _ => "",
                }
            )));
        }
        self.penalty.check()?;
        check::nonneg("lambda", self.lambda)?;
        if let Some(k) = self.k {
            check::k(k, p)?;
        }
        check::within(
            "lambda_min_ratio",
            self.lambda_min_ratio,
            limits::MIN_PATH_RATIO,
            1.0 - f64::EPSILON,
        )?;
        check::within("path_points", self.path_points, 1, limits::MAX_PATH_POINTS)?;
        check::tol(self.tol)?;
        check::no_point(path, self.k, self.lambda)?;
        if !path && self.k.is_some() == self.lambda.is_some() {
            return Err(ParamError::Invalid(format!(
                "{} needs exactly one of k or lambda (or ask for the whole path)",
                P::METHOD
            )));
        }
        Ok(())
    }

    fn fit(&self, problem: &Problem) -> Fit {
        let g = &problem.gram;
        let pen = self.penalty.penalty().for_problem(problem);
        let opt = self.options();
        let mut notes = Vec::new();
        let mut fit = match self.sparsity() {
            Sparsity::K(k) => {
                let k = usable_k(k, g, &mut notes);
                let sol = solve_for_k(
                    g,
                    &pen,
                    k,
                    self.ratio(problem),
                    self.path_points.unwrap_or(100),
                    &opt,
                );
                let mut exact = sol.exact;
                let had_above = sol.above.is_some();
                let (mut point, from) = sol.truncated(g, k);
                if let Some(other) = second_k(g, &pen, k, point.lambda, &opt) {
                    let (mine, theirs) = (refit_loss(g, &point.b), refit_loss(g, &other.b));
                    if below_rounding(theirs, mine, g) {
                        notes.push(format!(
                            "the {k} features come from the second start (003 Algorithm 3 \
                             from 0, then coordinate descent; lambda = {:.4e}): their least-squares \
                             fit is better than the warm-started path's (training loss {theirs:.4e} \
                             against {mine:.4e})",
                            other.lambda
                        ));
                        point = other;
                        exact = true;
                    }
                }
                if !exact {
                    notes.push(if had_above {
                        format!(
                            "no lambda gives exactly {k} nonzeros (the path jumps from fewer to \
                             {from}); returning the {k} largest of that {from}-feature model \
                             (lambda = {:.4e}){}",
                            point.lambda,
                            if self.refits() {
                                ", refitted on them"
                            } else {
                                ": its coefficients are not a penalized solution"
                            }
                        )
                    } else {
                        format!(
                            "no lambda gives exactly {k} nonzeros; returning the closest below \
                             ({from})"
                        )
                    });
                }
                self.point_fit(g, point, Some(exact))
            }
            Sparsity::Lambda(lambda) => self.point_fit(g, solve_at(g, &pen, lambda, &opt), None),
        };
        notes.append(&mut fit.notes);
        fit.notes = notes;
        fit
    }

    fn path(&self, problem: &Problem) -> Vec<Fit> {
        let g = &problem.gram;
        let pen = self.penalty.penalty().for_problem(problem);
        let lambdas = lambda_grid(
            pen.lambda_max(g),
            self.ratio(problem),
            self.path_points.unwrap_or(100),
        );
        path(g, &pen, &lambdas, &self.options())
            .into_iter()
            .map(|pt| self.point_fit(g, pt, None))
            .collect()
    }

    fn merges_duplicates(&self) -> bool {
        P::MERGES_DUPLICATES
    }
}

impl<P: PenaltyParams> Penalized<P> {
    /// The path at given lambdas (decreasing), warm-started: a cross-validation fold follows
    /// the full data's grid (`select`).
    pub fn path_at(&self, problem: &Problem, lambdas: &[f64]) -> Vec<Fit> {
        let g = &problem.gram;
        path(g, &self.penalty.penalty(), lambdas, &self.options())
            .into_iter()
            .map(|pt| self.point_fit(g, pt, None))
            .collect()
    }
}

impl<P> Penalized<P> {
    /// Whether the answer is refitted by OLS on its support: as asked, else for a k request
    /// only (see `refit`). Why the default follows the paper: on 003's Table 2 design at
    /// n = 3000 (p = 1000, k = 100; seeds 1-3, RMSE on 2000 fresh rows) the penalized Lasso at
    /// k = 100 (the most shrunk point of its k plateau) predicts with RMSE 59.2-63.5 against
    /// the paper's 9.5; refitted, 9.40-9.51 (issue 11 item 4).
    pub fn refits(&self) -> bool {
        self.refit.unwrap_or(self.k.is_some())
    }

    /// k or lambda, whichever `check` let through (k when both are absent is impossible
    /// after a model check).
    fn sparsity(&self) -> Sparsity {
        match (self.k, self.lambda) {
            (Some(k), _) => Sparsity::K(k),
            (None, lambda) => Sparsity::Lambda(lambda.unwrap_or(0.0)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two columns symmetric in Q and c enter at the same lambda: no lambda gives k = 1. The
    /// k-model is then the larger of the two-feature model's coefficients (the lower index on
    /// a tie), not the empty model below; k = 2 is exact.
    #[test]
    fn a_k_the_path_jumps_over_keeps_the_k_largest_of_the_model_above() {
        let g = Gram {
            m: 3,
            q: vec![1.0, 0.6, 0.1, 0.6, 1.0, 0.1, 0.1, 0.1, 1.0],
            c: vec![0.8, 0.8, 0.05],
            yy: 2.0,
        };
        for pen in [Penalty::Lasso, Penalty::Mcp { gamma: 3.0 }] {
            let opt = CdOptions::default();
            let sol = solve_for_k(&g, &pen, 1, 1e-4, 100, &opt);
            assert!(!sol.exact, "{pen:?}");
            let below = sol.point.b.iter().filter(|v| **v != 0.0).count();
            assert_eq!(below, 0, "{pen:?}: {:?}", sol.point.b);
            let above = sol.above.as_ref().expect("a model above k").b.clone();
            assert!(above[0] != 0.0 && above[1] != 0.0, "{pen:?}: {above:?}");
            let (point, from) = sol.truncated(&g, 1);
            assert_eq!(from, above.iter().filter(|v| **v != 0.0).count());
            assert_eq!(point.b[0], above[0], "{pen:?}");
            assert_eq!(&point.b[1..], &[0.0, 0.0], "{pen:?}: {:?}", point.b);
            let two = solve_for_k(&g, &pen, 2, 1e-4, 100, &opt);
            assert!(two.exact && two.above.is_none(), "{pen:?}");
            let (point, from) = two.truncated(&g, 2);
            assert_eq!(
                (from, point.b.iter().filter(|v| **v != 0.0).count()),
                (2, 2)
            );
        }
    }

    /// Columns 0 and 2 are the same column (bitwise equal in Q and c), as a solver sees them
    /// when nothing merged them. Once column 0 is in, column 2's z equals lambda up to rounding;
    /// whatever rounding leaves on it must not count as a nonzero.
    #[test]
    fn rounding_on_an_identical_column_is_not_a_nonzero() {
        for rho in [0.1, 0.3, 0.55, 0.7] {
            let q = vec![1.0, rho, 1.0, rho, 1.0, rho, 1.0, rho, 1.0];
            let g = Gram {
                m: 3,
                q,
                c: vec![0.9, 0.5, 0.9],
                yy: 2.0,
            };
            for i in 1..40 {
                let lambda = 0.9 * i as f64 / 41.0;
                for pen in [Penalty::Lasso, Penalty::Mcp { gamma: 3.0 }] {
                    let mut state = CdState::zeros(&g);
                    state.solve(&g, &pen, lambda, &CdOptions::default());
                    let size = state.b.iter().fold(0.0f64, |a, v| a.max(v.abs()));
                    let tiny = state.b.iter().any(|v| *v != 0.0 && v.abs() < 1e-12 * size);
                    assert!(
                        !tiny,
                        "{pen:?} rho {rho} lambda {lambda}: b = {:?}",
                        state.b
                    );
                    // r still equals c - Q b after the drop.
                    for (i, ri) in state.r.iter().enumerate() {
                        let want = g.c[i] - (0..3).map(|j| g.at(i, j) * state.b[j]).sum::<f64>();
                        assert!((ri - want).abs() <= 1e-14, "r[{i}] = {ri} vs {want}");
                    }
                }
            }
        }
    }

    /// b with r = c - Q b computed from scratch.
    fn state_of(g: &Gram, b: &[f64]) -> CdState {
        let mut state = CdState::zeros(g);
        state.b = b.to_vec();
        for (i, r) in state.r.iter_mut().enumerate() {
            *r = g.c[i] - (0..g.m).map(|j| g.at(i, j) * b[j]).sum::<f64>();
        }
        state
    }

    /// Paper 003's Table 2 design scaled down (p = 400, k* = 40, n = 120 < p, correlation
    /// 0.5, signal 1). Coordinate descent along the warm-started path stops in a minimum with
    /// a minority of the true features; the second start (Algorithm 3 from 0, then coordinate
    /// descent) reaches a lower objective at the same lambda, and the k-model is the true
    /// support. At a lambda, the answer's objective is the lower of the two starts and below
    /// the path's (measured at full size, p = 1000, n = 300: detection 35% on the path, 100% on
    /// 19 of 20 seeds with both starts; docs/table2.md).
    #[test]
    fn two_starts_find_the_lower_mcp_minimum_on_003s_design() {
        use crate::synthetic::SyntheticSpec;
        let (p, k) = (400, 40);
        for seed in 1..=3 {
            let spec = SyntheticSpec {
                p,
                k,
                n: Some(120),
                seed,
                ..SyntheticSpec::default()
            };
            let problem = Problem::regression(&spec.running_stats(64), true).unwrap();
            assert_eq!(problem.active.len(), p);
            let g = &problem.gram;
            let pen = Penalty::Mcp { gamma: 3.0 };
            let opt = CdOptions::default();
            let truth = spec.support();
            let support = |b: &[f64]| -> Vec<usize> { (0..p).filter(|&j| b[j] != 0.0).collect() };
            let hits = |b: &[f64]| support(b).iter().filter(|j| truth.contains(j)).count();

            let (warm, _) = solve_for_k(g, &pen, k, 1e-2, 100, &opt).truncated(g, k);
            let fit = Penalized::<McpParams>::k(k).fit(&problem);
            assert_eq!(
                support(&fit.b),
                truth,
                "seed {seed}: {} true of {k} (the path alone: {}); {:?}",
                hits(&fit.b),
                hits(&warm.b),
                fit.notes
            );
            assert!(
                refit_loss(g, &fit.b) < refit_loss(g, &warm.b),
                "seed {seed}"
            );

            let lambda = warm.lambda;
            let at = state_of(g, &solve_at(g, &pen, lambda, &opt).b).objective(g, &pen, lambda);
            let path = state_of(g, &warm.b).objective(g, &pen, lambda);
            let mut cold = CdState::zeros(g);
            cold.solve(g, &pen, lambda, &opt);
            let cold = cold.objective(g, &pen, lambda);
            assert!(
                at <= cold && at < path,
                "seed {seed}: {at} vs {cold}, {path}"
            );
        }
    }
}
