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
//! implementation (one model at k or lambda, or the warm-started path) are in `params`.
//!
//! Files: `penalty` (the penalties' maths), `cd` (the coordinate-descent engine), `path` (the
//! lambda path and the exact-k search), `nonconvex` (the second start of MCP and SCAD),
//! `params` (the parameters and the `Solver` implementation).

mod cd;
mod nonconvex;
mod params;
mod path;
mod penalty;

pub use cd::{CdInfo, CdOptions, CdState};
pub use nonconvex::{SECOND_START_MAX_M, SECOND_START_STEPS, second_k, second_start, solve_at};
pub use params::{
    DEFAULT_L1_RATIO, ElasticNet, ElasticNetParams, Lasso, LassoParams, Mcp, McpParams, Penalized,
    PenaltyParams, Scad, ScadParams,
};
pub use path::{KSolution, PathPoint, lambda_grid, path, solve_for_k};
pub use penalty::Penalty;
