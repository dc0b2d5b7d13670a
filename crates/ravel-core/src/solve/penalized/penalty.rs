//! The penalties (Lasso, elastic net, MCP, SCAD): their value, lambda_max, and the exact
//! minimizer of one coordinate's problem, which the coordinate descent (`cd`) and the second
//! start's proximal steps (`nonconvex`) both take.

use super::super::Problem;
use crate::gram::Gram;

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
pub(super) fn soft(z: f64, t: f64) -> f64 {
    if z > t {
        z - t
    } else if z < -t {
        z + t
    } else {
        0.0
    }
}
