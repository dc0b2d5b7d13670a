//! Solvers against closed forms, brute force and the paper's recovery targets. Every reference
//! here is computed from the raw rows by code in this file, never from ravel's own statistics.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, StandardNormal};
use ravel_core::solve::{Estimator, Method, Model, PathModel, Request, penalized};
use ravel_core::stats::{AlphaSchedule, ClassStats, RunningStats, Stats};
use ravel_core::synthetic::SyntheticSpec;
use serde_json::{Value, json};

fn stats_of(x: &[f64], y: &[f64], p: usize) -> RunningStats {
    let mut s = RunningStats::new(p, AlphaSchedule::Plain);
    s.update_batch(x, y).unwrap();
    s
}

fn fit(s: &RunningStats, params: &Value) -> Model {
    model(&Stats::from(s.clone()), params).unwrap()
}

/// A request as the API and the CLI write it: JSON, parsed and checked like theirs.
fn request(v: &Value) -> Result<Request, String> {
    serde_json::from_value(v.clone()).map_err(|e| e.to_string())
}

fn model(st: &Stats, v: &Value) -> Result<Model, String> {
    request(v)?.model(st, None).map_err(|e| e.to_string())
}

fn path(st: &Stats, v: &Value) -> Result<PathModel, String> {
    request(v)?.path(st, None).map_err(|e| e.to_string())
}

trait With {
    fn with_k(self, k: usize) -> Value;
    fn with_lambda(self, lambda: f64) -> Value;
}

impl With for Value {
    fn with_k(mut self, k: usize) -> Value {
        self["k"] = json!(k);
        self
    }
    fn with_lambda(mut self, lambda: f64) -> Value {
        self["lambda"] = json!(lambda);
        self
    }
}

fn params(method: Method) -> Value {
    json!({"method": method.name()})
}

fn soft(z: f64, t: f64) -> f64 {
    z.signum() * (z.abs() - t).max(0.0)
}

/// Sylvester's Hadamard matrix of order 8: columns 1..8 are +-1, orthogonal and centred.
fn hadamard8() -> Vec<Vec<f64>> {
    let mut h = vec![vec![1.0]];
    while h.len() < 8 {
        let m = h.len();
        let mut next = vec![vec![0.0; 2 * m]; 2 * m];
        for i in 0..m {
            for j in 0..m {
                next[i][j] = h[i][j];
                next[i][j + m] = h[i][j];
                next[i + m][j] = h[i][j];
                next[i + m][j + m] = -h[i][j];
            }
        }
        h = next;
    }
    h
}

/// Orthogonal design: 7 uncorrelated columns with different scales and means (so that
/// standardization matters), y arbitrary. Returns (x, y, scales).
fn orthogonal_design() -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let h = hadamard8();
    let scales: Vec<f64> = (0..7).map(|j| 0.5 + j as f64).collect();
    let mut x = vec![];
    for row in &h {
        for j in 0..7 {
            x.push(row[j + 1] * scales[j] + 3.0 * j as f64);
        }
    }
    let y = vec![3.1, -1.3, 2.57, 0.71, -2.23, 1.97, 0.13, -0.41];
    (x, y, scales)
}

/// c^_j = corr-scale covariance of standardized column j with y (population moments).
fn standardized_c(x: &[f64], y: &[f64], p: usize) -> Vec<f64> {
    let n = y.len() as f64;
    let ybar = y.iter().sum::<f64>() / n;
    (0..p)
        .map(|j| {
            let col: Vec<f64> = (0..y.len()).map(|i| x[i * p + j]).collect();
            let m = col.iter().sum::<f64>() / n;
            let sd = (col.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / n).sqrt();
            col.iter()
                .zip(y)
                .map(|(v, yi)| (v - m) / sd * (yi - ybar))
                .sum::<f64>()
                / n
        })
        .collect()
}

#[test]
fn orthogonal_design_closed_forms() {
    let (x, y, scales) = orthogonal_design();
    let s = stats_of(&x, &y, 7);
    let c = standardized_c(&x, &y, 7);
    // The l0 checks below need distinct |c_j| (a tie makes top-k ambiguous).
    for a in 0..7 {
        for b in 0..a {
            assert!((c[a].abs() - c[b].abs()).abs() > 1e-3, "tie in |c|: {c:?}");
        }
    }
    let lam = 0.35;
    let ybar = y.iter().sum::<f64>() / y.len() as f64;
    let sd_y = (y.iter().map(|v| (v - ybar) * (v - ybar)).sum::<f64>() / y.len() as f64).sqrt();
    // Lasso = soft threshold of c; elastic net = scaled soft threshold.
    let lasso = fit(&s, &params(Method::Lasso).with_lambda(lam)).dense(7);
    let mut enet_p = params(Method::ElasticNet).with_lambda(lam);
    enet_p["l1_ratio"] = json!(0.3);
    let enet = fit(&s, &enet_p).dense(7);
    // MCP (gamma 3) and SCAD (gamma 3.7) thresholds with unit curvature.
    let mcp = fit(&s, &params(Method::Mcp).with_lambda(lam)).dense(7);
    let scad = fit(&s, &params(Method::Scad).with_lambda(lam)).dense(7);
    for j in 0..7 {
        let z = c[j];
        let expect_lasso = soft(z, lam) / scales[j];
        assert!(
            (lasso[j] - expect_lasso).abs() < 1e-9,
            "lasso[{j}] {} vs {expect_lasso}",
            lasso[j]
        );
        // The l2 term in units of sd(y), as glmnet standardizes y.
        let expect_enet = soft(z, lam * 0.3) / (1.0 + lam * 0.7 / sd_y) / scales[j];
        assert!((enet[j] - expect_enet).abs() < 1e-9, "enet[{j}]");
        let g = 3.0;
        let firm = if z.abs() <= lam {
            0.0
        } else if z.abs() <= g * lam {
            soft(z, lam) / (1.0 - 1.0 / g)
        } else {
            z
        };
        assert!(
            (mcp[j] - firm / scales[j]).abs() < 1e-9,
            "mcp[{j}]: {} vs {}",
            mcp[j],
            firm / scales[j]
        );
        let g = 3.7;
        let sc = if z.abs() <= 2.0 * lam {
            soft(z, lam)
        } else if z.abs() <= g * lam {
            ((g - 1.0) * z - z.signum() * g * lam) / (g - 2.0)
        } else {
            z
        };
        assert!(
            (scad[j] - sc / scales[j]).abs() < 1e-9,
            "scad[{j}]: {} vs {}",
            scad[j],
            sc / scales[j]
        );
    }
    // l0: the k largest |c| and their OLS values (= c on an orthogonal design).
    for k in 1..=7 {
        let mut order: Vec<usize> = (0..7).collect();
        order.sort_by(|&a, &b| c[b].abs().total_cmp(&c[a].abs()));
        let mut top: Vec<usize> = order[..k].to_vec();
        top.sort();
        for method in [Method::Olsth, Method::Fsa] {
            let m = fit(&s, &params(method).with_k(k));
            let idx: Vec<usize> = m.coefficients.iter().map(|c| c.index).collect();
            assert_eq!(idx, top, "{method} k={k}");
            for cf in &m.coefficients {
                assert!((cf.value - c[cf.index] / scales[cf.index]).abs() < 1e-9);
            }
        }
    }
}

/// Dense Gaussian elimination with partial pivoting (the test's own solver).
fn solve_dense(mut a: Vec<Vec<f64>>, mut b: Vec<f64>) -> Vec<f64> {
    let n = b.len();
    for col in 0..n {
        let piv = (col..n)
            .max_by(|&i, &j| a[i][col].abs().total_cmp(&a[j][col].abs()))
            .unwrap();
        a.swap(col, piv);
        b.swap(col, piv);
        for r in col + 1..n {
            let f = a[r][col] / a[col][col];
            let pivot_row = a[col].clone();
            for (arc, pc) in a[r][col..n].iter_mut().zip(&pivot_row[col..n]) {
                *arc -= f * pc;
            }
            b[r] -= f * b[col];
        }
    }
    let mut x = vec![0.0; n];
    for r in (0..n).rev() {
        let s: f64 = (r + 1..n).map(|c| a[r][c] * x[c]).sum();
        x[r] = (b[r] - s) / a[r][r];
    }
    x
}

/// Random correlated design with a sparse truth.
fn design(
    seed: u64,
    n: usize,
    p: usize,
    support: &[(usize, f64)],
    noise: f64,
) -> (Vec<f64>, Vec<f64>) {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut x = Vec::with_capacity(n * p);
    let mut y = Vec::with_capacity(n);
    for _ in 0..n {
        let z: f64 = StandardNormal.sample(&mut rng);
        let row: Vec<f64> = (0..p)
            .map(|j| {
                let u: f64 = StandardNormal.sample(&mut rng);
                0.6 * z + u * (1.0 + 0.2 * j as f64) + j as f64
            })
            .collect();
        let e: f64 = StandardNormal.sample(&mut rng);
        y.push(support.iter().map(|&(j, b)| b * row[j]).sum::<f64>() + noise * e + 2.0);
        x.extend(row);
    }
    (x, y)
}

/// Centered raw moments from the rows: (Q, c, yy) with Q = X_c^T X_c / n.
fn centered(x: &[f64], y: &[f64], p: usize) -> (Vec<Vec<f64>>, Vec<f64>, f64) {
    let n = y.len();
    let nf = n as f64;
    let mx: Vec<f64> = (0..p)
        .map(|j| (0..n).map(|i| x[i * p + j]).sum::<f64>() / nf)
        .collect();
    let my = y.iter().sum::<f64>() / nf;
    let mut q = vec![vec![0.0; p]; p];
    let mut c = vec![0.0; p];
    for i in 0..n {
        for a in 0..p {
            let xa = x[i * p + a] - mx[a];
            c[a] += xa * (y[i] - my) / nf;
            for b in 0..p {
                q[a][b] += xa * (x[i * p + b] - mx[b]) / nf;
            }
        }
    }
    let yy = y.iter().map(|v| (v - my) * (v - my)).sum::<f64>() / nf;
    (q, c, yy)
}

/// Residual sum of squares / n of OLS (with intercept) on a column subset.
fn subset_mse(q: &[Vec<f64>], c: &[f64], yy: f64, sub: &[usize]) -> (f64, Vec<f64>) {
    let a: Vec<Vec<f64>> = sub
        .iter()
        .map(|&i| sub.iter().map(|&j| q[i][j]).collect())
        .collect();
    let b: Vec<f64> = sub.iter().map(|&i| c[i]).collect();
    let beta = solve_dense(a, b.clone());
    let mse = yy - beta.iter().zip(&b).map(|(x, y)| x * y).sum::<f64>();
    (mse, beta)
}

#[test]
fn ridge_and_ols_equal_the_normal_equations() {
    let p = 6;
    let (x, y) = design(7, 80, p, &[(0, 2.0), (3, -1.5)], 0.5);
    let s = stats_of(&x, &y, p);
    let (q, c, _) = centered(&x, &y, p);
    for lam in [0.0, 0.01, 1.0, 25.0] {
        let mut a = q.clone();
        for (j, row) in a.iter_mut().enumerate() {
            row[j] += lam;
        }
        let expect = solve_dense(a, c.clone());
        let mut pr = if lam == 0.0 {
            params(Method::Ols)
        } else {
            params(Method::Ridge).with_lambda(lam)
        };
        pr["standardize"] = json!(false);
        let got = fit(&s, &pr).dense(p);
        for j in 0..p {
            assert!(
                (got[j] - expect[j]).abs() <= 1e-9 * expect[j].abs().max(1.0),
                "lambda {lam} j {j}: {} vs {}",
                got[j],
                expect[j]
            );
        }
    }
}

#[test]
fn best_subset_by_brute_force() {
    // p = 10: every subset of size k is enumerated; with a clear signal OLSth and FSA must
    // find the best subset of the true size, and never report a better fit than the best.
    let p = 10;
    for seed in 0..4 {
        let truth = [(1, 3.0), (4, -2.0), (8, 1.5)];
        let (x, y) = design(100 + seed, 120, p, &truth, 1.0);
        let s = stats_of(&x, &y, p);
        let (q, c, yy) = centered(&x, &y, p);
        for k in 1..=5 {
            let mut best = (f64::INFINITY, vec![]);
            for mask in 0u32..(1 << p) {
                if mask.count_ones() as usize != k {
                    continue;
                }
                let sub: Vec<usize> = (0..p).filter(|j| mask >> j & 1 == 1).collect();
                let (mse, _) = subset_mse(&q, &c, yy, &sub);
                if mse < best.0 {
                    best = (mse, sub);
                }
            }
            for method in [Method::Olsth, Method::Fsa] {
                let m = fit(&s, &params(method).with_k(k));
                let sub: Vec<usize> = m.coefficients.iter().map(|c| c.index).collect();
                assert_eq!(sub.len(), k);
                let (mse, beta) = subset_mse(&q, &c, yy, &sub);
                assert!(mse >= best.0 - 1e-12);
                // The reported training MSE is that of the refit on the chosen subset.
                assert!(
                    (m.diagnostics.train_mse - mse).abs() <= 1e-9 * yy,
                    "{method} k={k}"
                );
                for (cf, b) in m.coefficients.iter().zip(&beta) {
                    assert!((cf.value - b).abs() <= 1e-8 * b.abs().max(1.0));
                }
                if k == truth.len() {
                    assert_eq!(
                        sub, best.1,
                        "{method} seed {seed} k={k} misses the best subset"
                    );
                }
            }
        }
    }
}

/// FISTA on the raw centered rows for (1/2n)||y_c - X_c b||^2 + l1 ||b||_1 + l2/2 ||b||^2.
fn fista(x: &[f64], y: &[f64], p: usize, l1: f64, l2: f64) -> Vec<f64> {
    let n = y.len();
    let nf = n as f64;
    let mx: Vec<f64> = (0..p)
        .map(|j| (0..n).map(|i| x[i * p + j]).sum::<f64>() / nf)
        .collect();
    let my = y.iter().sum::<f64>() / nf;
    let xc: Vec<f64> = (0..n * p).map(|k| x[k] - mx[k % p]).collect();
    let yc: Vec<f64> = y.iter().map(|v| v - my).collect();
    // Lipschitz constant by power iteration on X^T X / n.
    let mut v = vec![1.0; p];
    let mut lip = 0.0;
    for _ in 0..500 {
        let xv: Vec<f64> = (0..n)
            .map(|i| (0..p).map(|j| xc[i * p + j] * v[j]).sum())
            .collect();
        let w: Vec<f64> = (0..p)
            .map(|j| (0..n).map(|i| xc[i * p + j] * xv[i]).sum::<f64>() / nf)
            .collect();
        lip = w.iter().map(|a| a * a).sum::<f64>().sqrt();
        v = w.iter().map(|a| a / lip).collect();
    }
    let step = 1.0 / (lip + l2);
    let (mut b, mut zv, mut t) = (vec![0.0; p], vec![0.0; p], 1.0f64);
    for _ in 0..200_000 {
        let r: Vec<f64> = (0..n)
            .map(|i| (0..p).map(|j| xc[i * p + j] * zv[j]).sum::<f64>() - yc[i])
            .collect();
        let g: Vec<f64> = (0..p)
            .map(|j| (0..n).map(|i| xc[i * p + j] * r[i]).sum::<f64>() / nf + l2 * zv[j])
            .collect();
        let nb: Vec<f64> = (0..p)
            .map(|j| soft(zv[j] - step * g[j], step * l1))
            .collect();
        let nt = (1.0 + (1.0 + 4.0 * t * t).sqrt()) / 2.0;
        let diff: f64 = nb
            .iter()
            .zip(&b)
            .map(|(a, c)| (a - c).abs())
            .fold(0.0, f64::max);
        zv = (0..p)
            .map(|j| nb[j] + (t - 1.0) / nt * (nb[j] - b[j]))
            .collect();
        b = nb;
        t = nt;
        if diff < 1e-15 {
            break;
        }
    }
    b
}

#[test]
fn lasso_and_elastic_net_match_an_independent_solver() {
    let p = 8;
    let (x, y) = design(11, 60, p, &[(0, 1.0), (2, -0.7), (5, 0.4)], 0.8);
    let s = stats_of(&x, &y, p);
    for (lam, ratio) in [(0.05, 1.0), (0.3, 1.0), (1.0, 1.0), (0.2, 0.5), (0.6, 0.2)] {
        let expect = fista(&x, &y, p, lam * ratio, lam * (1.0 - ratio));
        let mut pr = if ratio == 1.0 {
            params(Method::Lasso)
        } else {
            params(Method::ElasticNet)
        };
        pr["lambda"] = json!(lam);
        if ratio < 1.0 {
            pr["l1_ratio"] = json!(ratio);
        }
        pr["standardize"] = json!(false);
        let m = fit(&s, &pr);
        assert!(m.diagnostics.converged);
        let got = m.dense(p);
        for j in 0..p {
            assert!(
                (got[j] - expect[j]).abs() <= 1e-6 * expect[j].abs().max(1e-3),
                "lambda {lam} r {ratio} j {j}: {} vs {}",
                got[j],
                expect[j]
            );
        }
    }
}

#[test]
fn lasso_solution_satisfies_kkt_on_the_raw_rows() {
    let p = 12;
    let (x, y) = design(12, 200, p, &[(0, 1.0), (7, -2.0)], 1.0);
    let s = stats_of(&x, &y, p);
    let (q, c, _) = centered(&x, &y, p);
    let lam = 0.15;
    let mut pr = params(Method::Lasso).with_lambda(lam);
    pr["standardize"] = json!(false);
    let b = fit(&s, &pr).dense(p);
    for j in 0..p {
        let g = c[j] - (0..p).map(|k| q[j][k] * b[k]).sum::<f64>();
        if b[j] != 0.0 {
            assert!((g - lam * b[j].signum()).abs() < 1e-7, "active {j}: {g}");
        } else {
            assert!(g.abs() <= lam + 1e-9, "inactive {j}: {g}");
        }
    }
}

#[test]
fn exact_k_from_the_path_and_path_shape() {
    let p = 20;
    let truth: Vec<(usize, f64)> = (0..6).map(|i| (i * 3, 1.0 + i as f64 * 0.3)).collect();
    let (x, y) = design(13, 300, p, &truth, 1.0);
    let s = stats_of(&x, &y, p);
    for method in [Method::Lasso, Method::ElasticNet, Method::Mcp, Method::Scad] {
        for k in [1, 3, 6, 10] {
            for refit in [false, true] {
                let mut pr = params(method).with_k(k);
                pr["refit"] = json!(refit);
                let m = fit(&s, &pr);
                assert_eq!(m.diagnostics.k_exact, Some(m.k == k));
                assert!(m.k <= k);
                assert_eq!(m.k, k, "{method} k={k}: {:?}", m.diagnostics.notes);
            }
        }
    }
    let path = path(&Stats::from(s.clone()), &params(Method::Lasso)).unwrap();
    assert_eq!(path.points.len(), 100);
    assert_eq!(path.points[0].k, 0);
    assert!(path.points.windows(2).all(|w| w[0].lambda > w[1].lambda));
    // The path ends near the least-squares fit (lambda_min = 1e-4 lambda_max).
    let ols = fit(&s, &params(Method::Ols));
    let last = path.points.last().unwrap();
    assert!(last.k >= truth.len());
    assert!(
        last.diagnostics.train_mse <= ols.diagnostics.train_mse * (1.0 + 1e-3),
        "{:?}",
        last.diagnostics
    );
    // Training error never increases as lambda decreases on the Lasso path.
    assert!(
        path.points
            .windows(2)
            .all(|w| w[1].diagnostics.train_mse <= w[0].diagnostics.train_mse + 1e-12)
    );
}

#[test]
fn refit_is_ols_on_the_support() {
    let p = 9;
    let (x, y) = design(14, 150, p, &[(1, 1.0), (6, -1.0), (7, 0.5)], 0.5);
    let s = stats_of(&x, &y, p);
    let (q, c, _) = centered(&x, &y, p);
    let mut pr = params(Method::Lasso).with_k(3);
    pr["refit"] = json!(true);
    let m = fit(&s, &pr);
    let sub: Vec<usize> = m.coefficients.iter().map(|c| c.index).collect();
    let (_, beta) = subset_mse(&q, &c, 0.0, &sub);
    for (cf, b) in m.coefficients.iter().zip(&beta) {
        assert!((cf.value - b).abs() < 1e-9 * b.abs().max(1.0));
    }
    // Intercept: mean(y) - mean(x)^T b.
    let n = y.len() as f64;
    let expect_b0 = y.iter().sum::<f64>() / n
        - m.coefficients
            .iter()
            .map(|cf| cf.value * (0..y.len()).map(|i| x[i * p + cf.index]).sum::<f64>() / n)
            .sum::<f64>();
    assert!((m.intercept - expect_b0).abs() < 1e-9 * expect_b0.abs().max(1.0));
}

#[test]
fn constant_columns_are_excluded_not_divided_by_zero() {
    let p = 4;
    let (mut x, y) = design(15, 50, p, &[(0, 1.0)], 0.1);
    for i in 0..50 {
        x[i * p + 2] = 7.0;
    }
    let s = stats_of(&x, &y, p);
    for method in [Method::Ols, Method::Lasso, Method::Olsth] {
        let mut pr = params(method);
        if method == Method::Lasso {
            pr["lambda"] = json!(0.01);
        }
        if method == Method::Olsth {
            pr["k"] = json!(4);
        }
        let m = fit(&s, &pr);
        assert_eq!(m.diagnostics.excluded_constant, vec![2]);
        assert!(
            m.coefficients
                .iter()
                .all(|c| c.index != 2 && c.value.is_finite())
        );
        assert!(m.intercept.is_finite());
    }
}

#[test]
fn classification_solution_zeroes_the_papers_gradients() {
    // 003 eqs. (4)-(5): at the minimizer of the class-weighted loss both gradients vanish.
    let p = 5;
    let (x, yv) = design(16, 400, p, &[(0, 1.0), (3, -1.0)], 0.5);
    let med = {
        let mut s = yv.clone();
        s.sort_by(f64::total_cmp);
        s[300]
    };
    let y: Vec<f64> = yv
        .iter()
        .map(|v| if *v > med { 1.0 } else { -1.0 })
        .collect();
    let mut cs = ClassStats::new(p, AlphaSchedule::Plain);
    cs.update_batch(&x, &y).unwrap();
    let (wp, wn) = (3.0, 1.0);
    let mut pr = params(Method::Ols);
    pr["w_pos"] = json!(wp);
    pr["w_neg"] = json!(wn);
    let m = model(&Stats::from(cs.clone()), &pr).unwrap();
    let b = m.dense(p);
    let b0 = m.intercept;
    let (sp, sn) = (&cs.pos, &cs.neg);
    for j in 0..p {
        let g = (0..p)
            .map(|k| (wp * sp.sxx_at(j, k) + wn * sn.sxx_at(j, k)) * b[k])
            .sum::<f64>()
            + (wp * sp.mean_x()[j] + wn * sn.mean_x()[j]) * b0
            + wn * sn.mean_x()[j]
            - wp * sp.mean_x()[j];
        assert!(g.abs() < 1e-9, "dL/db_{j} = {g}");
    }
    let g0 = (0..p)
        .map(|k| (wp * sp.mean_x()[k] + wn * sn.mean_x()[k]) * b[k])
        .sum::<f64>()
        + (wp + wn) * b0
        + wn
        - wp;
    assert!(g0.abs() < 1e-9, "dL/db0 = {g0}");
    // Sparse classification works through the same path.
    let mut pr = params(Method::Lasso).with_k(2);
    pr["w_pos"] = json!(wp);
    let m = model(&Stats::from(cs.clone()), &pr).unwrap();
    let idx: Vec<usize> = m.coefficients.iter().map(|c| c.index).collect();
    assert_eq!(idx, vec![0, 3]);
}

#[test]
fn bad_requests_are_typed_errors() {
    let p = 3;
    let (x, y) = design(17, 30, p, &[(0, 1.0)], 0.1);
    let s = stats_of(&x, &y, p);
    let st = &Stats::from(s.clone());
    let cases = [
        params(Method::Lasso).with_k(4),
        params(Method::Lasso).with_k(0),
        params(Method::Lasso).with_lambda(-1.0),
        params(Method::Lasso),
        params(Method::Lasso).with_k(1).with_lambda(0.1),
        params(Method::Ridge),
        params(Method::Ols).with_k(2),
        params(Method::Olsth),
        json!({"method": "elastic-net", "k": 1, "l1_ratio": 1.5}),
        json!({"method": "mcp", "k": 1, "gamma": 0.5}),
        json!({"method": "lasso", "k": 1, "gamma": 3}),
        json!({"method": "lasso", "path_points": 1_000_000}),
        json!({"method": "lasso", "k": 1, "tol": 0}),
    ];
    for pr in cases {
        assert!(model(st, &pr).is_err(), "{pr:?} should be refused");
    }
    // NaN cannot be written in JSON; the typed request refuses it as well.
    let nan = Request::from(Estimator::Lasso(penalized::Lasso::lambda(f64::NAN)));
    assert!(nan.model(st, None).is_err());
    assert!("lars".parse::<Method>().is_err());
    let empty = RunningStats::new(p, AlphaSchedule::Plain);
    assert!(model(&Stats::from(empty.clone()), &params(Method::Ols)).is_err());
    assert!(path(st, &params(Method::Olsth)).is_err());
}

/// Paper 003 Table 2 design at n = 3000: OLSth and OFSA recover the true support (the paper
/// reports 100% for both over 100 runs; we ask for >= 99% on each of a few seeds).
#[test]
fn table2_recovery_p1000_n3000() {
    for seed in 1..=3 {
        let spec: SyntheticSpec =
            format!("p=1000,k=100,n=3000,signal=1,noise=1,rho=0.5,seed={seed}")
                .parse()
                .unwrap();
        let s = spec.running_stats(500);
        let truth = spec.support();
        for method in [Method::Olsth, Method::Fsa] {
            let m = fit(&s, &params(method).with_k(100));
            let hit = m
                .coefficients
                .iter()
                .filter(|c| truth.binary_search(&c.index).is_ok())
                .count();
            assert!(hit >= 99, "{method} seed {seed}: detection rate {hit}%");
        }
    }
}

#[test]
fn random_rows_never_break_extraction() {
    // Degenerate inputs (p > n, duplicated columns) still give finite models and say so.
    let mut rng = StdRng::seed_from_u64(18);
    let p = 15;
    let n = 8;
    let mut x: Vec<f64> = (0..n * p).map(|_| rng.random_range(-1.0..1.0)).collect();
    for i in 0..n {
        x[i * p + 1] = x[i * p];
    }
    let y: Vec<f64> = (0..n).map(|_| rng.random_range(-1.0..1.0)).collect();
    let s = stats_of(&x, &y, p);
    for pr in [
        params(Method::Ols),
        params(Method::Olsth).with_k(3),
        params(Method::Fsa).with_k(3),
        params(Method::Lasso).with_k(5),
        params(Method::Mcp).with_k(2),
        params(Method::Scad).with_lambda(0.01),
    ] {
        let m = fit(&s, &pr);
        assert!(m.coefficients.iter().all(|c| c.value.is_finite()), "{pr:?}");
        assert!(m.intercept.is_finite());
    }
}

/// Issue 11 item 1: at n = p the centred covariance has rank n - 1. Cholesky used to "succeed"
/// on rounding error (last pivot ~1e-14) and OLSth ranked noise: 10-24% detection on paper
/// 003's Table 2 design (p = 1000, k* = 100, correlation 0.5) where the paper reports 94.53%,
/// often without a note. The singular system is now detected, solved with a data-scaled
/// ridge, and the model says so.
#[test]
fn olsth_at_n_equal_p_detects_like_the_paper_and_says_the_system_was_singular() {
    let mut detected = vec![];
    for seed in [1, 2] {
        let spec: SyntheticSpec = format!("p=1000,k=100,n=1000,seed={seed}").parse().unwrap();
        let (mut x, mut y) = (vec![], vec![]);
        spec.rows().fill(1000, &mut x, &mut y);
        let mut s = RunningStats::new(1000, AlphaSchedule::Plain);
        s.update_batch(&x, &y).unwrap();
        let model = model(&Stats::from(s), &params(Method::Olsth).with_k(100)).unwrap();
        let truth = spec.support();
        let hits = model
            .coefficients
            .iter()
            .filter(|c| truth.contains(&c.index))
            .count();
        detected.push(hits as f64 / truth.len() as f64);
        let notes = &model.diagnostics.notes;
        assert!(
            notes
                .iter()
                .any(|n| n.contains("singular") && n.contains("ridge")),
            "seed {seed}: no note on the singular system: {notes:?}"
        );
    }
    let mean = detected.iter().sum::<f64>() / detected.len() as f64;
    assert!(
        mean >= 0.85 && detected.iter().all(|&d| d >= 0.8),
        "OLSth detection at n = p: {detected:?} (paper: 94.53%)"
    );
}

/// The rows of `x` (p columns) without the columns in `drop`.
fn without_columns(x: &[f64], p: usize, drop: &[usize]) -> Vec<f64> {
    x.chunks_exact(p)
        .flat_map(|row| {
            row.iter()
                .enumerate()
                .filter(|(j, _)| !drop.contains(j))
                .map(|(_, v)| *v)
        })
        .collect()
}

/// Issue 11 item 6: the same column twice (and a column that is another one rescaled, the same
/// column once standardized). Methods indifferent to how weight is split among identical
/// columns fit without the later copy (`diagnostics.excluded_duplicate`), so a copy never takes
/// one of the k slots nor carries a rounding-size coefficient; the reference is the same
/// request on the rows without the copies.
#[test]
fn duplicate_columns_are_merged_into_one() {
    let (n, p) = (200, 8);
    let (mut x, y) = design(21, n, p, &[(1, 1.5), (4, -1.0), (6, 0.8)], 0.5);
    for i in 0..n {
        x[i * p + 5] = x[i * p + 1];
        x[i * p + 7] = 3.0 - 2.0 * x[i * p + 4];
    }
    let s = stats_of(&x, &y, p);
    let kept = [0, 1, 2, 3, 4, 6];
    let reduced = stats_of(&without_columns(&x, p, &[5, 7]), &y, kept.len());
    let mut requests = vec![];
    for k in [1, 3, 5] {
        for method in [Method::Lasso, Method::Mcp, Method::Scad] {
            for refit in [false, true] {
                let mut pr = params(method).with_k(k);
                pr["refit"] = json!(refit);
                requests.push(pr);
            }
        }
        for method in [Method::Olsth, Method::Fsa, Method::Iht, Method::Htp] {
            requests.push(params(method).with_k(k));
        }
        requests.push(params(Method::Lasso).with_lambda(0.02 * k as f64));
    }
    requests.push(params(Method::Ols));
    for pr in &requests {
        let m = fit(&s, pr);
        let d = &m.diagnostics;
        let dups: Vec<(usize, usize)> = d
            .excluded_duplicate
            .iter()
            .map(|d| (d.index, d.of))
            .collect();
        assert_eq!(dups, [(5, 1), (7, 4)], "{pr}");
        assert!(d.excluded_constant.is_empty(), "{pr}");
        assert!(d.singular_ridge.is_none(), "{pr}: {:?}", d.notes);
        if let Some(k) = pr["k"].as_u64() {
            assert_eq!((m.k, d.k_exact), (k as usize, Some(true)), "{pr}");
        }
        let want = fit(&reduced, pr);
        let (got_b, want_b) = (m.dense(p), want.dense(kept.len()));
        let scale = want_b.iter().fold(0.0f64, |a, v| a.max(v.abs()));
        for j in [5, 7] {
            assert_eq!(got_b[j], 0.0, "{pr}: the copy {j} has a coefficient");
        }
        for (r, &j) in kept.iter().enumerate() {
            assert!(
                (got_b[j] - want_b[r]).abs() <= 1e-9 * scale,
                "{pr}: coefficient {j} = {} without the copies {}",
                got_b[j],
                want_b[r]
            );
        }
        assert!((m.intercept - want.intercept).abs() <= 1e-9 * want.intercept.abs().max(1.0));
    }
}

/// Elastic net and ridge keep identical columns: their l2 part makes the solution unique and
/// symmetric, the same coefficient on each copy in solver units (x7 = 3 - 2 x4 standardizes to
/// -x4, so b7 = -b4 / 2 in original units). k-support keeps them too (its norm can prefer
/// spreading weight; its solution need not be unique, so only the merge is checked).
#[test]
fn duplicate_columns_share_the_weight_under_an_l2_penalty() {
    let (n, p) = (200, 8);
    let (mut x, y) = design(21, n, p, &[(1, 1.5), (4, -1.0), (6, 0.8)], 0.5);
    for i in 0..n {
        x[i * p + 5] = x[i * p + 1];
        x[i * p + 7] = 3.0 - 2.0 * x[i * p + 4];
    }
    let s = stats_of(&x, &y, p);
    let mut ksupport = params(Method::KSupport).with_k(3);
    ksupport["lambda"] = json!(0.05);
    assert!(fit(&s, &ksupport).diagnostics.excluded_duplicate.is_empty());
    for pr in [
        params(Method::ElasticNet).with_lambda(0.05),
        params(Method::Ridge).with_lambda(0.1),
    ] {
        let m = fit(&s, &pr);
        assert!(m.diagnostics.excluded_duplicate.is_empty(), "{pr}");
        let b = m.dense(p);
        let tol = 1e-6 * b.iter().fold(0.0f64, |a, v| a.max(v.abs()));
        assert!(b[1] != 0.0 && (b[5] - b[1]).abs() <= tol, "{pr}: {b:?}");
        assert!(
            b[4] != 0.0 && (b[7] + b[4] / 2.0).abs() <= tol,
            "{pr}: {b:?}"
        );
    }
}

/// Unstandardized, a rescaled copy is not the same column to an l1 penalty: the group keeps
/// the column of the largest spread (weight moved to it needs the smallest coefficient), and
/// the Lasso objective on the raw rows is no higher than with the other column kept.
#[test]
fn unstandardized_duplicates_keep_the_widest_column() {
    let (n, p) = (200, 8);
    let (mut x, y) = design(21, n, p, &[(1, 1.5), (4, -1.0), (6, 0.8)], 0.5);
    for i in 0..n {
        x[i * p + 7] = 3.0 - 2.0 * x[i * p + 4];
    }
    let s = stats_of(&x, &y, p);
    let mut pr = params(Method::Lasso).with_lambda(0.05);
    pr["standardize"] = json!(false);
    let m = fit(&s, &pr);
    let dups: Vec<(usize, usize)> = m
        .diagnostics
        .excluded_duplicate
        .iter()
        .map(|d| (d.index, d.of))
        .collect();
    assert_eq!(dups, [(4, 7)]);
    // The Lasso objective on the raw rows, (1/2n)||y_c - X_c b||^2 + lambda ||b||_1.
    let (q, c, yy) = centered(&x, &y, p);
    let objective = |b: &[f64]| {
        let mut f = 0.5 * yy;
        for i in 0..p {
            f -= c[i] * b[i];
            for j in 0..p {
                f += 0.5 * q[i][j] * b[i] * b[j];
            }
        }
        f + 0.05 * b.iter().map(|v| v.abs()).sum::<f64>()
    };
    // The same Lasso with column 7 left out (its copy 4 carries the weight instead).
    let narrow = stats_of(&without_columns(&x, p, &[7]), &y, p - 1);
    let mut other = fit(&narrow, &pr).dense(p - 1);
    other.push(0.0);
    let (got, alt) = (objective(&m.dense(p)), objective(&other));
    assert!(got < alt, "kept the wrong copy: objective {got} vs {alt}");
}

/// Issue 11 item 4: a k request refits OLS on the selected support by default (paper 003
/// Alg. 3); `refit: false` gives the penalized estimate, which is the lambda request at the
/// lambda the k search found. Lambda requests and the path are not refitted by default.
#[test]
fn k_requests_refit_by_default_and_keep_the_penalized_estimate() {
    let p = 9;
    let (x, y) = design(14, 150, p, &[(1, 1.0), (6, -1.0), (7, 0.5)], 0.5);
    let s = stats_of(&x, &y, p);
    let (q, c, _) = centered(&x, &y, p);
    for method in [Method::Lasso, Method::ElasticNet, Method::Mcp, Method::Scad] {
        let m = fit(&s, &params(method).with_k(3));
        assert!(m.diagnostics.refit, "{method}");
        let sub: Vec<usize> = m.coefficients.iter().map(|c| c.index).collect();
        assert_eq!(sub.len(), 3);
        let (_, beta) = subset_mse(&q, &c, 0.0, &sub);
        for (cf, b) in m.coefficients.iter().zip(&beta) {
            assert!((cf.value - b).abs() < 1e-9 * b.abs().max(1.0), "{method}");
        }
        let mut pr = params(method).with_k(3);
        pr["refit"] = json!(false);
        let pen = fit(&s, &pr);
        assert!(!pen.diagnostics.refit);
        let lambda = pen.lambda.expect("the k search reports its lambda");
        // Solved to the tightest tolerance: the default certifies a duality gap of 1e-10
        // var(y), which leaves elastic net's coefficients (now with a weaker l2 term, in units
        // of sd(y)) 2e-9 from the exact point the k search reached.
        let mut at_p = params(method).with_lambda(lambda);
        at_p["tol"] = json!(1e-14);
        let at = fit(&s, &at_p);
        assert!(
            !at.diagnostics.refit,
            "{method}: lambda requests are not refitted"
        );
        let (a, b) = (pen.dense(p), at.dense(p));
        for j in 0..p {
            assert!(
                (a[j] - b[j]).abs() <= 1e-9 * b[j].abs().max(1e-3),
                "{method} {j}: {} vs {}, gaps {:?} {:?}",
                a[j],
                b[j],
                pen.diagnostics.duality_gap,
                at.diagnostics.duality_gap
            );
        }
        // The refit is OLS on the penalized estimate's support.
        let pen_sup: Vec<usize> = pen.coefficients.iter().map(|c| c.index).collect();
        assert_eq!(pen_sup, sub, "{method}");
    }
    let path = path(&Stats::from(s), &params(Method::Lasso)).unwrap();
    assert!(path.points.iter().all(|m| !m.diagnostics.refit));
}

/// Raw (uncentred) moments from the rows: X^T X / n, X^T y / n and y^T y / n.
fn raw_moments(x: &[f64], y: &[f64], p: usize) -> (Vec<Vec<f64>>, Vec<f64>, f64) {
    let nf = y.len() as f64;
    let mut q = vec![vec![0.0; p]; p];
    let mut c = vec![0.0; p];
    for (row, yi) in x.chunks_exact(p).zip(y) {
        for a in 0..p {
            c[a] += row[a] * yi / nf;
            for b in 0..p {
                q[a][b] += row[a] * row[b] / nf;
            }
        }
    }
    (q, c, y.iter().map(|v| v * v).sum::<f64>() / nf)
}

/// A model without an intercept (`"intercept": false`) is least squares through the origin on
/// the raw rows: OLS and ridge solve X^T X b = X^T y (+ n lambda b), with and without
/// standardized columns; a constant column is a regressor there and an all-zero one is left
/// out; R^2 is the uncentred 1 - RSS / y^T y, the residual degrees of freedom n - p, the
/// standard errors sqrt(sigma^2 (X^T X)^-1_jj), there is no intercept estimate, and a
/// prediction is x b alone. Classification through the origin solves the class-weighted
/// normal equations.
#[test]
fn models_through_the_origin_solve_the_raw_normal_equations() {
    let (n, p) = (90, 5);
    let (mut x, y) = design(5, n, p, &[(0, 1.5), (2, -1.0)], 0.5);
    for row in x.chunks_exact_mut(p) {
        row[3] = 0.0;
        row[4] = 3.0;
    }
    let s = stats_of(&x, &y, p);
    let (q, c, yy) = raw_moments(&x, &y, p);
    let active = [0usize, 1, 2, 4];
    let sub = |lam: f64| -> Vec<f64> {
        let a: Vec<Vec<f64>> = active
            .iter()
            .map(|&i| {
                active
                    .iter()
                    .map(|&j| q[i][j] + if i == j { lam } else { 0.0 })
                    .collect()
            })
            .collect();
        let b: Vec<f64> = active.iter().map(|&i| c[i]).collect();
        let sol = solve_dense(a, b);
        let mut full = vec![0.0; p];
        for (k, &j) in active.iter().enumerate() {
            full[j] = sol[k];
        }
        full
    };
    let close = |a: f64, b: f64, rel: f64, what: &str| {
        assert!(
            (a - b).abs() <= rel * b.abs().max(1e-300),
            "{what}: {a} vs {b}"
        );
    };
    for standardize in [false, true] {
        for lam in [0.0, 0.5] {
            let mut pr = if lam == 0.0 {
                params(Method::Ols)
            } else {
                params(Method::Ridge).with_lambda(lam)
            };
            pr["standardize"] = json!(standardize);
            pr["intercept"] = json!(false);
            pr["inference"] = json!(true);
            let m = fit(&s, &pr);
            let what = format!("standardize {standardize} lambda {lam}");
            assert_eq!(m.intercept, 0.0, "{what}");
            assert!(!m.diagnostics.intercept, "{what}");
            assert_eq!(m.diagnostics.excluded_constant, vec![3], "{what}");
            let got = m.dense(p);
            if lam == 0.0 || !standardize {
                let want = sub(lam);
                for j in 0..p {
                    close(got[j], want[j], 1e-9, &format!("{what} b{j}"));
                }
            }
            // R^2 and predictions from the rows, with the model's own coefficients.
            let rss: f64 = x
                .chunks_exact(p)
                .zip(&y)
                .map(|(row, yi)| {
                    let fit: f64 = row.iter().zip(&got).map(|(a, b)| a * b).sum();
                    assert_eq!(m.predict(row), fit, "{what}: a prediction is x b");
                    (yi - fit) * (yi - fit)
                })
                .sum();
            close(m.diagnostics.r2, 1.0 - rss / (n as f64 * yy), 1e-9, &what);
            let inf = m.inference.as_deref().expect("inference");
            assert!(inf.intercept.is_none(), "{what}: no intercept estimate");
            if lam == 0.0 {
                assert_eq!(inf.df_resid, (n - active.len()) as f64, "{what}");
                let sigma2 = rss / inf.df_resid;
                close(inf.sigma2, sigma2, 1e-8, &format!("{what} sigma2"));
                // (X^T X)^-1 = (n Q)^-1 column by column.
                for (k, &j) in active.iter().enumerate() {
                    let a: Vec<Vec<f64>> = active
                        .iter()
                        .map(|&r| active.iter().map(|&t| n as f64 * q[r][t]).collect())
                        .collect();
                    let e: Vec<f64> = (0..active.len()).map(|r| (r == k) as u8 as f64).collect();
                    let inv_jj = solve_dense(a, e)[k];
                    let est = inf
                        .coefficients
                        .iter()
                        .find(|e| e.index == Some(j))
                        .unwrap();
                    close(
                        est.se,
                        (sigma2 * inv_jj).sqrt(),
                        1e-8,
                        &format!("{what} se{j}"),
                    );
                }
            }
        }
    }
    // The model with an intercept is another model on these rows.
    let with = fit(&s, &json!({"method": "ols", "standardize": false}));
    assert!(with.diagnostics.intercept && with.intercept.abs() > 0.1);

    // Classification: labels +1 / -1, w_p E_p[(x b - 1)^2] + w_n E_n[(x b + 1)^2].
    let labels: Vec<f64> = y
        .iter()
        .map(|v| if *v > 0.0 { 1.0 } else { -1.0 })
        .collect();
    let mut cs = ClassStats::new(p, AlphaSchedule::Plain);
    cs.update_batch(&x, &labels).unwrap();
    let (w_pos, w_neg) = (2.0, 1.0);
    let (np, nn) = (
        labels.iter().filter(|v| **v > 0.0).count() as f64,
        labels.iter().filter(|v| **v < 0.0).count() as f64,
    );
    assert!(np > 5.0 && nn > 5.0, "both classes: {np} {nn}");
    let mut a = vec![vec![0.0; active.len()]; active.len()];
    let mut b = vec![0.0; active.len()];
    for (row, l) in x.chunks_exact(p).zip(&labels) {
        let w = if *l > 0.0 { w_pos / np } else { w_neg / nn };
        for (r, &i) in active.iter().enumerate() {
            b[r] += w * row[i] * l;
            for (t, &j) in active.iter().enumerate() {
                a[r][t] += w * row[i] * row[j];
            }
        }
    }
    let want = solve_dense(a, b);
    let st = Stats::from(cs);
    let m = model(
        &st,
        &json!({"method": "ols", "intercept": false, "standardize": false, "w_pos": w_pos, "w_neg": w_neg}),
    )
    .unwrap();
    assert_eq!(m.intercept, 0.0);
    let got = m.dense(p);
    for (k, &j) in active.iter().enumerate() {
        close(got[j], want[k], 1e-9, &format!("classification b{j}"));
    }
}
