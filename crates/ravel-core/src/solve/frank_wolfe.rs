//! Frank-Wolfe for the constrained Lasso (paper 004): min 1/2 b^T Q b - c^T b + yy/2 subject
//! to ||b||_1 <= delta, on the Gram form, with its duality gap as the stopping rule.
//!
//! The vertices of the l1 ball are +-delta e_i, so the linear subproblem (004 eq. 6) is one
//! argmax over |g_i|, and the step moves b towards a single coordinate: at most one new
//! nonzero per iteration. From the Gram form the gradient follows the step with one column
//! of Q, g <- (1 - gamma) g + gamma (u_i Q[:, i] - c), and the quantities of the exact line
//! search are the scalars b^T Q b and c^T b, updated by 004 eq. (8)'s recursions (S and F
//! there). One iteration is O(m) whatever the number of nonzeros: this is 004's "method of
//! residuals" moved to the Gram form, where the m-vector g plays the part of the residuals.
//!
//! Variants: the deterministic rule takes the argmax over all coordinates; the randomized rule
//! (004 Alg. 2, eq. 9) over kappa sampled coordinates. In the Gram form the gradient update is
//! O(m) in both, so sampling saves the argmax scan only (004 samples because its gradient
//! entries cost a pass over the data each). Away steps (Guelat-Marcotte, 004 ref. 15) move
//! weight off the worst active vertex (or off the origin, the atom of the slack
//! 1 - ||b||_1/delta), and drop it exactly when its weight reaches 0: plain FW zig-zags
//! towards a face of the ball at rate O(1/t) (004 Prop. 1), away steps converge linearly in
//! practice and keep iterates from carrying tiny leftover coefficients.
//!
//! The duality gap G = b^T g + delta ||g||_inf = max over the ball of <g, b - s> bounds
//! f(b) - f* (convexity), so it certifies every iterate; it is the stopping rule.
//!
//! `FwLasso` (the request's parameters) and its `Solver` implementation close the file.

use super::{Fit, ParamError, Problem, Solver, check, limits};
use crate::gram::Gram;
use crate::gram::linear::solve_subset;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

/// How the Frank-Wolfe vertex is chosen.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FwVariant {
    /// argmax over every coordinate (004 eq. 6).
    Deterministic,
    /// argmax over `kappa` coordinates sampled uniformly (with replacement) each iteration
    /// (004 eq. 9); `seed` makes runs reproducible.
    Randomized {
        /// Coordinates sampled per iteration.
        kappa: usize,
        /// Random seed.
        seed: u64,
    },
}

/// Solver settings.
#[derive(Debug, Clone, Copy)]
pub struct FwOptions {
    /// Deterministic or randomized coordinate choice.
    pub variant: FwVariant,
    /// Take away steps when they promise more descent than the FW step.
    pub away_steps: bool,
    /// Stop when the duality gap is <= tol * yy (yy: the loss at b = 0, times 2).
    pub tol: f64,
    /// Iteration cap.
    pub max_iterations: usize,
    /// Record (objective, gap) at every iteration (tests and diagnostics).
    pub trace: bool,
}

impl Default for FwOptions {
    fn default() -> Self {
        FwOptions {
            variant: FwVariant::Deterministic,
            away_steps: true,
            tol: 1e-8,
            max_iterations: 200_000,
            trace: false,
        }
    }
}

/// One iterate's objective and its duality gap (a bound on objective - optimum).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FwTracePoint {
    /// 1/2 b^T Q b - c^T b + yy/2.
    pub objective: f64,
    /// The duality gap.
    pub gap: f64,
}

/// The answer at one delta.
#[derive(Debug, Clone)]
pub struct FwSolution {
    /// The solution (solver units).
    pub b: Vec<f64>,
    /// The l1 radius.
    pub delta: f64,
    /// Iterations made.
    pub iterations: usize,
    /// Of which away steps (drop steps included).
    pub away_iterations: usize,
    /// 1/2 b^T Q b - c^T b + yy/2, recomputed from b at the end.
    pub objective: f64,
    /// Duality gap at b, recomputed from an exact gradient at the end.
    pub gap: f64,
    /// Whether the gap met the tolerance.
    pub converged: bool,
    /// Per iteration, when `FwOptions::trace`.
    pub trace: Vec<FwTracePoint>,
}

/// Frank-Wolfe on ||b||_1 <= delta from `warm` (or 0). A warm start is first moved along its
/// ray to the best feasible multiple (the exact version of 004's "rescale the previous
/// solution to l1-norm delta").
pub fn fw_lasso(g: &Gram, delta: f64, opt: &FwOptions, warm: Option<&[f64]>) -> FwSolution {
    let m = g.m;
    let scale = g.yy.max(f64::MIN_POSITIVE);
    let mut b = vec![0.0; m];
    if let Some(w) = warm {
        let l1: f64 = w.iter().map(|v| v.abs()).sum();
        if l1 > 0.0 && delta > 0.0 {
            let qw = g.gradient(w); // Q w - c
            let wqw: f64 = w
                .iter()
                .zip(&qw)
                .zip(&g.c)
                .map(|((wi, q), c)| wi * (q + c))
                .sum();
            let cw: f64 = w.iter().zip(&g.c).map(|(wi, c)| wi * c).sum();
            let t = if wqw > 0.0 { cw / wqw } else { f64::INFINITY };
            let t = t.clamp(0.0, delta / l1);
            b.iter_mut().zip(w).for_each(|(bi, wi)| *bi = t * wi);
        }
    }
    let mut state = FwState::new(g, b);
    let mut rng = match opt.variant {
        FwVariant::Randomized { seed, .. } => Some(StdRng::seed_from_u64(seed)),
        FwVariant::Deterministic => None,
    };
    let mut trace = vec![];
    let mut iterations = 0;
    let mut away_iterations = 0;
    // Rounding creeps into the recursions; an exact refresh every so often costs O(m nnz)
    // once per REFRESH iterations.
    const REFRESH: usize = 5_000;
    let mut converged = false;
    loop {
        if m == 0 || delta <= 0.0 {
            break; // b = 0 is the only feasible point (its gap is 0 below)
        }
        if super::interrupt::stop() {
            break;
        }
        let (imax, gmax) = argmax_abs(&state.g);
        let gap = state.bg() + delta * gmax;
        if opt.trace {
            trace.push(FwTracePoint {
                objective: state.objective(g),
                gap,
            });
        }
        if gap <= opt.tol * scale {
            converged = true;
            break;
        }
        if iterations >= opt.max_iterations {
            break;
        }
        iterations += 1;
        if iterations % REFRESH == 0 {
            state = FwState::new(g, std::mem::take(&mut state.b));
        }
        let i = match (&mut rng, opt.variant) {
            (Some(rng), FwVariant::Randomized { kappa, .. }) => {
                let mut best = (rng.random_range(0..m), -1.0);
                for _ in 0..kappa.max(1) {
                    let j = rng.random_range(0..m);
                    if state.g[j].abs() > best.1 {
                        best = (j, state.g[j].abs());
                    }
                }
                best.0
            }
            _ => imax,
        };
        let u = -delta * state.g[i].signum();
        // Descent promised by the FW direction: <-g, u e_i - b>.
        let fw_descent = -u * state.g[i] + state.bg();
        if opt.away_steps
            && let Some(away) = state.away_vertex(delta)
            && away.descent > fw_descent
        {
            away_iterations += 1;
            state.away_step(g, delta, &away);
            continue;
        }
        if fw_descent <= 0.0 {
            // A sampled vertex that is no descent direction: nothing to do this time.
            continue;
        }
        state.fw_step(g, i, u);
    }
    // Exact figures from b.
    let exact = FwState::new(g, state.b);
    let gmax = exact.g.iter().fold(0.0f64, |a, v| a.max(v.abs()));
    let gap = (exact.bg() + delta * gmax).max(0.0);
    let objective = exact.objective(g);
    FwSolution {
        converged: converged || gap <= opt.tol * scale,
        b: exact.b,
        delta,
        iterations,
        away_iterations,
        objective,
        gap,
        trace,
    }
}

/// The smallest delta at which the constraint stops binding: ||b_ols||_1 (least squares on
/// every column, with the jitter of `solve_subset` when Q is singular).
pub fn delta_max(g: &Gram) -> f64 {
    let all: Vec<usize> = (0..g.m).collect();
    solve_subset(g, &all, 0.0).b.iter().map(|v| v.abs()).sum()
}

/// A geometric grid of `points` deltas from delta_max * ratio up to delta_max (increasing:
/// sparse to dense, as a lambda path goes from lambda_max down).
pub fn delta_grid(delta_max: f64, ratio: f64, points: usize) -> Vec<f64> {
    if points <= 1 {
        return vec![delta_max];
    }
    (0..points)
        .map(|i| delta_max * ratio.powf(1.0 - i as f64 / (points - 1) as f64))
        .collect()
}

/// Solves along `deltas` (increasing), each warm-started from the previous solution.
pub fn fw_path(g: &Gram, deltas: &[f64], opt: &FwOptions) -> Vec<FwSolution> {
    let mut prev: Option<Vec<f64>> = None;
    deltas
        .iter()
        .map(|&delta| {
            let sol = fw_lasso(g, delta, opt, prev.as_deref());
            prev = Some(sol.b.clone());
            sol
        })
        .collect()
}

fn argmax_abs(v: &[f64]) -> (usize, f64) {
    let mut best = (0, 0.0f64);
    for (i, x) in v.iter().enumerate() {
        if x.abs() > best.1 {
            best = (i, x.abs());
        }
    }
    best
}

/// An active atom to step away from: coordinate `j` (vertex sign(b_j) delta e_j) or the
/// origin (`j = None`), its weight in the convex combination, and the descent it promises.
struct Away {
    j: Option<usize>,
    weight: f64,
    descent: f64,
}

/// The iterate with its gradient and the scalars of the line search (004 eq. 8: bqb is S,
/// cb is F there).
struct FwState {
    b: Vec<f64>,
    g: Vec<f64>,
    bqb: f64,
    cb: f64,
    l1: f64,
    /// Coordinates that have been nonzero (a superset of the support; pruned on refresh).
    touched: Vec<usize>,
}

impl FwState {
    fn new(g: &Gram, b: Vec<f64>) -> Self {
        let grad = g.gradient(&b);
        let touched: Vec<usize> = (0..g.m).filter(|&j| b[j] != 0.0).collect();
        let cb: f64 = touched.iter().map(|&j| g.c[j] * b[j]).sum();
        let bg: f64 = touched.iter().map(|&j| grad[j] * b[j]).sum();
        let l1 = touched.iter().map(|&j| b[j].abs()).sum();
        FwState {
            b,
            g: grad,
            bqb: bg + cb,
            cb,
            l1,
            touched,
        }
    }
    /// b^T g = b^T Q b - c^T b.
    fn bg(&self) -> f64 {
        self.bqb - self.cb
    }
    fn objective(&self, g: &Gram) -> f64 {
        0.5 * self.bqb - self.cb + 0.5 * g.yy
    }

    /// b <- (1 - gamma) b + gamma u e_i with the exact line-search gamma in [0, 1].
    fn fw_step(&mut self, g: &Gram, i: usize, u: f64) {
        let qb_i = self.g[i] + g.c[i]; // (Q b)_i
        let descent = -u * self.g[i] + self.bg(); // -g^T d
        let curv = u * u * g.at(i, i) - 2.0 * u * qb_i + self.bqb; // d^T Q d
        let gamma = if curv > 0.0 {
            (descent / curv).clamp(0.0, 1.0)
        } else {
            1.0
        };
        if gamma == 0.0 {
            return;
        }
        let keep = 1.0 - gamma;
        let old_bi = self.b[i];
        self.bqb = keep * keep * self.bqb
            + 2.0 * gamma * keep * u * qb_i
            + gamma * gamma * u * u * g.at(i, i);
        self.cb = keep * self.cb + gamma * u * g.c[i];
        let new_bi = keep * old_bi + gamma * u;
        self.l1 = keep * (self.l1 - old_bi.abs()) + new_bi.abs();
        for &j in &self.touched {
            self.b[j] *= keep;
        }
        if old_bi == 0.0 {
            self.touched.push(i);
        }
        self.b[i] = new_bi;
        // g <- (1 - gamma) g + gamma (u Q[:, i] - c)
        for ((gj, qji), cj) in self.g.iter_mut().zip(g.col(i)).zip(&g.c) {
            *gj = keep * *gj + gamma * (u * qji - cj);
        }
    }

    /// The active atom with the largest <g, v>: the worst vertex in the current combination.
    fn away_vertex(&self, delta: f64) -> Option<Away> {
        let bg = self.bg();
        let mut best: Option<Away> = None;
        let slack = 1.0 - self.l1 / delta;
        if slack > 1e-12 && self.l1 > 0.0 {
            // The origin: <g, 0> = 0.
            best = Some(Away {
                j: None,
                weight: slack,
                descent: -bg,
            });
        }
        for &j in &self.touched {
            let bj = self.b[j];
            if bj == 0.0 {
                continue;
            }
            let gv = bj.signum() * delta * self.g[j];
            let descent = gv - bg;
            if best.as_ref().is_none_or(|a| descent > a.descent) {
                best = Some(Away {
                    j: Some(j),
                    weight: bj.abs() / delta,
                    descent,
                });
            }
        }
        // An atom holding all the weight cannot be stepped away from.
        best.filter(|a| a.weight < 1.0 - 1e-12 && a.descent > 0.0)
    }

    /// b <- b + gamma (b - v), gamma in [0, weight / (1 - weight)]; at the upper end the atom's
    /// weight is 0 and it is dropped exactly.
    fn away_step(&mut self, g: &Gram, delta: f64, away: &Away) {
        let gamma_max = away.weight / (1.0 - away.weight);
        let (vqb, vqv, cv) = match away.j {
            Some(j) => {
                let v = self.b[j].signum() * delta;
                (v * (self.g[j] + g.c[j]), v * v * g.at(j, j), v * g.c[j])
            }
            None => (0.0, 0.0, 0.0),
        };
        let curv = self.bqb - 2.0 * vqb + vqv;
        let gamma = if curv > 0.0 {
            (away.descent / curv).min(gamma_max)
        } else {
            gamma_max
        };
        if gamma <= 0.0 {
            return;
        }
        let grow = 1.0 + gamma;
        self.bqb = grow * grow * self.bqb - 2.0 * gamma * grow * vqb + gamma * gamma * vqv;
        self.cb = grow * self.cb - gamma * cv;
        for &j in &self.touched {
            self.b[j] *= grow;
        }
        // g <- g + gamma Q (b - v) = (1 + gamma) g + gamma c - gamma Q v
        match away.j {
            Some(j) => {
                let v = self.b[j].signum() * delta;
                let old = self.b[j] / grow;
                self.b[j] = if gamma >= gamma_max {
                    0.0
                } else {
                    grow * old - gamma * v
                };
                self.l1 = grow * (self.l1 - old.abs()) + self.b[j].abs();
                for ((gi, qij), ci) in self.g.iter_mut().zip(g.col(j)).zip(&g.c) {
                    *gi = grow * *gi + gamma * (ci - v * qij);
                }
            }
            None => {
                self.l1 = if gamma >= gamma_max {
                    delta
                } else {
                    grow * self.l1
                };
                for (gi, ci) in self.g.iter_mut().zip(&g.c) {
                    *gi = grow * *gi + gamma * ci;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A small dense problem: Q = A^T A / n for a fixed A, c = Q beta + e.
    fn problem(m: usize, seed: u64) -> Gram {
        let mut rng = StdRng::seed_from_u64(seed);
        let n = 2 * m + 3;
        let a: Vec<f64> = (0..n * m).map(|_| rng.random_range(-1.0..1.0)).collect();
        let y: Vec<f64> = (0..n).map(|_| rng.random_range(-1.0..1.0)).collect();
        let mut q = vec![0.0; m * m];
        for i in 0..m {
            for j in 0..m {
                q[i + j * m] = (0..n).map(|r| a[r * m + i] * a[r * m + j]).sum::<f64>() / n as f64;
            }
        }
        let c = (0..m)
            .map(|i| (0..n).map(|r| a[r * m + i] * y[r]).sum::<f64>() / n as f64)
            .collect();
        let yy = y.iter().map(|v| v * v).sum::<f64>() / n as f64;
        Gram { m, q, c, yy }
    }

    #[test]
    fn tracked_scalars_match_a_recomputation() {
        let g = problem(12, 3);
        for away_steps in [false, true] {
            let opt = FwOptions {
                away_steps,
                max_iterations: 37,
                tol: 0.0,
                ..FwOptions::default()
            };
            let delta = 0.3 * delta_max(&g);
            let mut state = FwState::new(&g, vec![0.0; g.m]);
            for _ in 0..opt.max_iterations {
                let (i, _) = argmax_abs(&state.g);
                let u = -delta * state.g[i].signum();
                match state.away_vertex(delta) {
                    Some(a) if away_steps && a.descent > -u * state.g[i] + state.bg() => {
                        state.away_step(&g, delta, &a)
                    }
                    _ => state.fw_step(&g, i, u),
                }
                let exact = FwState::new(&g, state.b.clone());
                assert!((exact.bqb - state.bqb).abs() < 1e-12);
                assert!((exact.cb - state.cb).abs() < 1e-12);
                assert!((exact.l1 - state.l1).abs() < 1e-12);
                for (a, b) in exact.g.iter().zip(&state.g) {
                    assert!((a - b).abs() < 1e-12);
                }
                assert!(state.l1 <= delta * (1.0 + 1e-12));
            }
        }
    }

    #[test]
    fn large_delta_reaches_least_squares() {
        let g = problem(6, 5);
        let dmax = delta_max(&g);
        let sol = fw_lasso(&g, 2.0 * dmax, &FwOptions::default(), None);
        let all: Vec<usize> = (0..g.m).collect();
        let ols = solve_subset(&g, &all, 0.0);
        assert!(sol.converged);
        assert!(sol.objective - g.loss(&ols.b) <= sol.gap + 1e-12);
    }

    #[test]
    fn zero_delta_is_the_zero_model() {
        let g = problem(4, 1);
        let sol = fw_lasso(&g, 0.0, &FwOptions::default(), None);
        assert!(sol.b.iter().all(|v| *v == 0.0));
        assert_eq!(sol.gap, 0.0);
        assert!(sol.converged);
    }

    #[test]
    fn delta_grid_goes_up_to_delta_max() {
        let d = delta_grid(10.0, 0.01, 5);
        assert!((d[0] - 0.1).abs() < 1e-12 && (d[4] - 10.0).abs() < 1e-12);
        assert!(d.windows(2).all(|w| w[0] < w[1]));
    }
}

/// How the vertex is chosen, in a request.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum VariantName {
    /// argmax over every coordinate.
    #[default]
    Deterministic,
    /// argmax over sampled coordinates.
    Randomized,
}

/// Frank-Wolfe Lasso: `{"method": "fw-lasso", "delta": 2.5}` for one model (the l1 radius, in
/// the solver's units: standardized columns unless `standardize` is false), or the path over
/// delta without it.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FwLasso {
    /// The l1 radius (> 0); required for one model, absent for the path.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delta: Option<f64>,
    /// `deterministic` (default) or `randomized`.
    #[serde(default)]
    pub variant: VariantName,
    /// Randomized: coordinates sampled per iteration (default min(p, 50)).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kappa: Option<usize>,
    /// Randomized: the sampling seed (default 0).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seed: Option<u64>,
    /// Away steps (default true).
    #[serde(default = "super::yes")]
    pub away_steps: bool,
    /// Stop when the duality gap <= tol * var(y) (default 1e-8).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tol: Option<f64>,
    /// At most this many iterations per delta (default 200 000, at most
    /// `limits::MAX_FW_ITERATIONS`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_iterations: Option<usize>,
    /// Path: number of deltas (default 100).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path_points: Option<usize>,
    /// Path: delta_min / delta_max (default 0.01; delta_max = ||b_ols||_1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delta_min_ratio: Option<f64>,
}

impl FwLasso {
    fn options(&self, m: usize) -> FwOptions {
        let d = FwOptions::default();
        FwOptions {
            variant: match self.variant {
                VariantName::Deterministic => FwVariant::Deterministic,
                VariantName::Randomized => FwVariant::Randomized {
                    kappa: self.kappa.unwrap_or(50).min(m.max(1)),
                    seed: self.seed.unwrap_or(0),
                },
            },
            away_steps: self.away_steps,
            tol: self.tol.unwrap_or(d.tol),
            max_iterations: self.max_iterations.unwrap_or(d.max_iterations),
            trace: false,
        }
    }

    fn to_fit(sol: FwSolution) -> Fit {
        let mut notes = Vec::new();
        if sol.away_iterations > 0 {
            notes.push(format!(
                "{} of the {} iterations were away steps",
                sol.away_iterations, sol.iterations
            ));
        }
        Fit {
            b: sol.b,
            delta: Some(sol.delta),
            iterations: sol.iterations,
            gap: Some(sol.gap),
            converged: sol.converged,
            notes,
            ..Fit::default()
        }
    }
}

impl Solver for FwLasso {
    fn check(&self, p: usize, path: bool) -> Result<(), ParamError> {
        if let Some(d) = self.delta
            && !(d.is_finite() && d > 0.0)
        {
            return Err(ParamError::Invalid(format!(
                "delta must be a finite number > 0, got {d}"
            )));
        }
        if self.variant == VariantName::Deterministic
            && (self.kappa.is_some() || self.seed.is_some())
        {
            return Err(ParamError::Invalid(
                "kappa and seed apply to variant \"randomized\" only".into(),
            ));
        }
        check::within("kappa", self.kappa, 1, p.max(1))?;
        check::tol(self.tol)?;
        check::iterations(
            "max_iterations",
            self.max_iterations,
            limits::MAX_FW_ITERATIONS,
        )?;
        check::within("path_points", self.path_points, 1, limits::MAX_PATH_POINTS)?;
        check::within(
            "delta_min_ratio",
            self.delta_min_ratio,
            limits::MIN_PATH_RATIO,
            1.0,
        )?;
        match (path, self.delta) {
            (true, Some(_)) => Err(ParamError::Invalid(
                "the path covers every delta: drop delta (ask for one model instead)".into(),
            )),
            (false, None) => Err(ParamError::Invalid(
                "fw-lasso needs delta, the l1 radius (or ask for the whole path)".into(),
            )),
            _ => Ok(()),
        }
    }

    fn fit(&self, problem: &Problem) -> Fit {
        let g = &problem.gram;
        let sol = fw_lasso(g, self.delta.unwrap_or(0.0), &self.options(g.m), None);
        Self::to_fit(sol)
    }

    fn path(&self, problem: &Problem) -> Vec<Fit> {
        let g = &problem.gram;
        let deltas = delta_grid(
            delta_max(g),
            self.delta_min_ratio.unwrap_or(0.01),
            self.path_points.unwrap_or(100),
        );
        fw_path(g, &deltas, &self.options(g.m))
            .into_iter()
            .map(Self::to_fit)
            .collect()
    }
}
