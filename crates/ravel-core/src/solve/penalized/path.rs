//! The lambda path (a geometric grid solved warm-started, `path`) and the search for the
//! model with exactly k nonzeros along it (`solve_for_k`, `KSolution`).

use super::{CdInfo, CdOptions, CdState, Penalty};
use crate::gram::Gram;

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
}
