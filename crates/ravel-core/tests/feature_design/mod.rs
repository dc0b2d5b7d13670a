//! Shared by the feature-stream tests: paper 000's simulated design and the batch reference,
//! iterative hard thresholding (IHT, the "Proj-GD" of 000 section 5), written here from the
//! formulas and independent of ravel's OS code (it shares only the loss functions, which
//! have their own finite-difference tests).
#![allow(dead_code)]

use rand::SeedableRng;
use rand::rngs::StdRng;
use rand::seq::index::sample;
use rand_distr::{Distribution, StandardNormal};
use ravel_core::features::Loss;

/// 000 section 5: X ~ N(0, 1), w* with s nonzeros at random positions, N(0, 1) values;
/// regression y = X w* + N(0, 0.1^2), classification y = sign(X w*). Columns are stored one
/// vector each (the order they stream in).
pub struct Design {
    pub n: usize,
    pub p: usize,
    pub cols: Vec<Vec<f64>>,
    pub y: Vec<f64>,
    pub support: Vec<usize>,
    pub w: Vec<f64>,
    /// Test rows (column-major as `cols`) and labels, drawn from the same model.
    pub test_cols: Vec<Vec<f64>>,
    pub test_y: Vec<f64>,
}

/// n = 1.2 s log2 p, as in 000 section 5.
pub fn paper_n(s: usize, p: usize) -> usize {
    (1.2 * s as f64 * (p as f64).log2()).round() as usize
}

pub fn design(n: usize, p: usize, s: usize, classification: bool, seed: u64) -> Design {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut support: Vec<usize> = sample(&mut rng, p, s).into_vec();
    support.sort_unstable();
    let mut w = vec![0.0; p];
    for &j in &support {
        w[j] = StandardNormal.sample(&mut rng);
    }
    let draw = |rows: usize, rng: &mut StdRng| {
        let cols: Vec<Vec<f64>> = (0..p)
            .map(|_| {
                (0..rows)
                    .map(|_| StandardNormal.sample(&mut *rng))
                    .collect()
            })
            .collect();
        let mut y = vec![0.0; rows];
        for &j in &support {
            for (yi, xi) in y.iter_mut().zip(&cols[j]) {
                *yi += w[j] * xi;
            }
        }
        for yi in y.iter_mut() {
            if classification {
                *yi = if *yi >= 0.0 { 1.0 } else { -1.0 };
            } else {
                let e: f64 = StandardNormal.sample(&mut *rng);
                *yi += 0.1 * e;
            }
        }
        (cols, y)
    };
    let (cols, y) = draw(n, &mut rng);
    let (test_cols, test_y) = if classification {
        draw(n, &mut rng)
    } else {
        (vec![], vec![])
    };
    Design {
        n,
        p,
        cols,
        y,
        support,
        w,
        test_cols,
        test_y,
    }
}

/// Share of the true features found.
pub fn recall(selected: &[usize], support: &[usize]) -> f64 {
    selected
        .iter()
        .filter(|j| support.binary_search(j).is_ok())
        .count() as f64
        / support.len() as f64
}

// The library's dot kernel (tested against the naive loop in its unit tests): the naive
// iterator sum is several times slower at the test profile's opt-level 1.
use ravel_core::linalg::dot;

/// A fitted sparse linear model in original units.
pub struct Fitted {
    pub support: Vec<usize>,
    pub b: Vec<f64>,
    pub b0: f64,
}

impl Fitted {
    pub fn score(&self, cols: &[Vec<f64>], i: usize) -> f64 {
        self.b0
            + self
                .support
                .iter()
                .map(|&j| self.b[j] * cols[j][i])
                .sum::<f64>()
    }
}

/// Misclassification rate of sign(score) on (cols, y).
pub fn error_rate(score: impl Fn(usize) -> f64, y: &[f64]) -> f64 {
    (0..y.len())
        .filter(|&i| (score(i) >= 0.0) != (y[i] > 0.0))
        .count() as f64
        / y.len() as f64
}

/// Batch IHT on standardized columns: b <- H_s(b - eta grad L(b0 + Z b)), b0 <- b0 - eta
/// dL/db0, with eta = 1 / (c lambda_max(Z^T Z / n)) (a step that guarantees descent, from
/// power iteration with a 5% margin), until the support is stable and the step is tiny. Then
/// a refit on the support by gradient descent (least squares by its normal equations would
/// need a solver; gradient descent to convergence gives the same point).
pub fn iht(cols: &[Vec<f64>], y: &[f64], s: usize, loss: Loss, iterations: usize) -> Fitted {
    let (n, p) = (y.len(), cols.len());
    let nf = n as f64;
    let mut mean = vec![0.0; p];
    let mut sd = vec![0.0; p];
    let z: Vec<Vec<f64>> = cols
        .iter()
        .enumerate()
        .map(|(j, c)| {
            mean[j] = c.iter().sum::<f64>() / nf;
            sd[j] = (c.iter().map(|v| (v - mean[j]).powi(2)).sum::<f64>() / nf).sqrt();
            c.iter().map(|v| (v - mean[j]) / sd[j]).collect()
        })
        .collect();
    // lambda_max(Z^T Z / n) by power iteration.
    let mut v = vec![1.0 / (p as f64).sqrt(); p];
    let mut lam = 0.0;
    for _ in 0..50 {
        let mut zv = vec![0.0; n];
        for (zj, vj) in z.iter().zip(&v) {
            for (a, b) in zv.iter_mut().zip(zj) {
                *a += vj * b;
            }
        }
        let w: Vec<f64> = z.iter().map(|zj| dot(zj, &zv) / nf).collect();
        let norm = dot(&w, &w).sqrt();
        v = w.iter().map(|x| x / norm).collect();
        if (norm - lam).abs() < 1e-4 * norm {
            lam = norm;
            break;
        }
        lam = norm;
    }
    let eta = 1.0 / (loss.curvature() * lam.max(1.0) * 1.05);
    let mut b = vec![0.0; p];
    let mut b0 = match loss {
        Loss::Squared => y.iter().sum::<f64>() / nf,
        _ => 0.0,
    };
    let mut support: Vec<usize> = vec![];
    let mut g = vec![0.0; n];
    let mut u = vec![b0; n];
    for _ in 0..iterations {
        loss.gradient(&u, y, &mut g);
        let gb: f64 = g.iter().sum();
        let mut next: Vec<f64> = (0..p).map(|j| b[j] - eta * dot(&z[j], &g)).collect();
        let mut order: Vec<usize> = (0..p).collect();
        order.sort_by(|&a, &c| next[c].abs().total_cmp(&next[a].abs()));
        let mut keep: Vec<usize> = order[..s].to_vec();
        keep.sort_unstable();
        for &j in &order[s..] {
            next[j] = 0.0;
        }
        let change: f64 = next
            .iter()
            .zip(&b)
            .map(|(a, c)| (a - c).powi(2))
            .sum::<f64>()
            .sqrt();
        let size: f64 = next.iter().map(|a| a * a).sum::<f64>().sqrt();
        let stable = keep == support;
        b = next;
        b0 -= eta * gb;
        support = keep;
        u.iter_mut().for_each(|ui| *ui = b0);
        for &j in &support {
            for (ui, zj) in u.iter_mut().zip(&z[j]) {
                *ui += b[j] * zj;
            }
        }
        if stable && change <= 1e-9 * size.max(1e-300) {
            break;
        }
    }
    // Refit on the support (gradient descent, same step bound).
    for _ in 0..2000 {
        loss.gradient(&u, y, &mut g);
        let gb: f64 = g.iter().sum();
        let grads: Vec<f64> = support.iter().map(|&j| dot(&z[j], &g)).collect();
        let gmax = grads.iter().fold(gb.abs(), |m, v| m.max(v.abs()));
        if gmax < 1e-9 {
            break;
        }
        for (&j, gj) in support.iter().zip(&grads) {
            b[j] -= eta * gj;
        }
        b0 -= eta * gb;
        u.iter_mut().for_each(|ui| *ui = b0);
        for &j in &support {
            for (ui, zj) in u.iter_mut().zip(&z[j]) {
                *ui += b[j] * zj;
            }
        }
    }
    // Back to original units.
    let mut bo = vec![0.0; p];
    let mut b0o = b0;
    for &j in &support {
        bo[j] = b[j] / sd[j];
        b0o -= bo[j] * mean[j];
    }
    Fitted {
        support,
        b: bo,
        b0: b0o,
    }
}
