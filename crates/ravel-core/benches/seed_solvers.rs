//! Benchmarks of the solvers from papers 004 and 002 (a bench binary that prints tables; run
//! with `cargo bench --bench seed_solvers`, or `-- fw10k` / `-- extract` for one half).
//!
//! fw10k: paper 004's speed claim on a p = 10,000 design. Frank-Wolfe adds at most one nonzero
//! per iteration and one iteration costs O(p) whatever the number of nonzeros: the table shows
//! the time per iteration in successive windows while the support grows. The Gram form is the
//! population one of 003's design (unit variances, pairwise correlation 0.5, 100 true features
//! of strength 1) with c perturbed as by n = 50 rows: 800 MB, so building it from rows
//! (p^2 n = 10^12 flops) is left out of the benchmark.
//!
//! extract: extraction times at p = 1000 on 003's Table 2 design (n = 3000), beside the
//! 100-point Lasso path of coordinate descent, for the benchmark table of docs/benchmarks.md; each through the
//! estimator interface (a JSON request, checked, extracted from the statistics) as the HTTP
//! API and `ravel fit` run it.

use rand::SeedableRng;
use rand::rngs::StdRng;
use rand_distr::{Distribution, StandardNormal};
use ravel_core::gram::{Gram, Problem};
use ravel_core::solve::frank_wolfe::{FwOptions, FwVariant, delta_max, fw_lasso};
use ravel_core::solve::{Request, model_from_stats, path_from_stats};
use ravel_core::stats::Stats;
use ravel_core::synthetic::SyntheticSpec;
use serde_json::json;
use std::time::Instant;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn population_gram(p: usize, k: usize, n: f64, seed: u64) -> Gram {
    let rho = 0.5;
    let mut q = vec![rho; p * p];
    for j in 0..p {
        q[j + j * p] = 1.0;
    }
    let step = p / k;
    let beta: Vec<f64> = (0..p)
        .map(|j| if (j + 1) % step == 0 { 1.0 } else { 0.0 })
        .collect();
    let sum_beta: f64 = beta.iter().sum();
    let mut rng = StdRng::seed_from_u64(seed);
    // c = Q beta + e / sqrt(n): Q beta = (1 - rho) beta + rho sum(beta) 1.
    let c: Vec<f64> = beta
        .iter()
        .map(|b| {
            let e: f64 = StandardNormal.sample(&mut rng);
            (1.0 - rho) * b + rho * sum_beta + e / n.sqrt()
        })
        .collect();
    let yy = (1.0 - rho) * sum_beta + rho * sum_beta * sum_beta + 1.0;
    Gram { m: p, q, c, yy }
}

fn fw10k() {
    let p = 10_000;
    let t = Instant::now();
    let g = population_gram(p, 100, 50.0, 1);
    println!(
        "population Gram p={p} built in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    // c as from n = 50 rows (noise sd 0.14 per entry) and a delta well above ||beta*||_1 = 100:
    // the Lasso solution is thousands of nonzeros deep, so the support keeps growing over the
    // windows below.
    let delta = 400.0;
    for (name, variant) in [
        ("deterministic", FwVariant::Deterministic),
        (
            "randomized kappa=500",
            FwVariant::Randomized {
                kappa: 500,
                seed: 1,
            },
        ),
    ] {
        println!("\nFW {name}, delta={delta}, p={p} (cold start; iterations 0..N)");
        println!(
            "{:>8} {:>8} {:>14} {:>18}",
            "N", "nnz", "total ms", "us/iter (window)"
        );
        let mut prev = (0usize, 0.0f64);
        for n_iter in [500usize, 1000, 2000, 4000, 8000, 16000] {
            let opt = FwOptions {
                variant,
                max_iterations: n_iter,
                tol: 0.0,
                ..FwOptions::default()
            };
            let ms = median(
                (0..3)
                    .map(|_| {
                        let t = Instant::now();
                        let s = fw_lasso(&g, delta, &opt, None);
                        std::hint::black_box(&s);
                        t.elapsed().as_secs_f64() * 1e3
                    })
                    .collect(),
            );
            let s = fw_lasso(&g, delta, &opt, None);
            let nnz = s.b.iter().filter(|v| **v != 0.0).count();
            let per = (ms - prev.1) * 1e3 / (n_iter - prev.0) as f64;
            println!("{:>8} {:>8} {:>14.1} {:>18.1}", n_iter, nnz, ms, per);
            prev = (n_iter, ms);
        }
    }
}

fn extract() {
    let p = 1000;
    let spec: SyntheticSpec = "p=1000,k=100,n=3000,seed=7".parse().unwrap();
    let s = spec.running_stats(1000);
    let st = Stats::from(s.clone());
    let time = |f: &dyn Fn()| {
        median(
            (0..5)
                .map(|_| {
                    let t = Instant::now();
                    f();
                    t.elapsed().as_secs_f64() * 1e3
                })
                .collect(),
        )
    };
    // Every row goes through the estimator interface as the HTTP API and `ravel fit` do: the
    // JSON request, checked, then extracted from the statistics (Gram build included).
    let request = |body: serde_json::Value| -> Request {
        serde_json::from_value(body).expect("a valid request")
    };
    let dmax = delta_max(&Problem::regression(&s, true).unwrap().gram);
    println!(
        "\n{:<52} {:>10}",
        "extraction, p=1000, n=3000 (Table 2 design)", "ms"
    );
    let paths = [
        (
            "lasso path (CD), 100 lambdas",
            json!({"method": "lasso", "path_points": 100}),
        ),
        (
            "fw-lasso path, 100 deltas (dmax/100 .. dmax)",
            json!({"method": "fw-lasso", "path_points": 100, "delta_min_ratio": 0.01}),
        ),
    ];
    for (name, body) in paths {
        let r = request(body).check_path(p).unwrap();
        let ms = time(&|| {
            std::hint::black_box(path_from_stats(&st, &r, None).unwrap());
        });
        println!("{:<52} {:>10.1}", name, ms);
    }
    let models = [
        ("lasso k=100", json!({"method": "lasso", "k": 100})),
        (
            "fw-lasso, delta = 0.1 delta_max",
            json!({"method": "fw-lasso", "delta": 0.1 * dmax}),
        ),
        (
            "fw-lasso randomized kappa=50, delta = 0.1 dmax",
            json!({"method": "fw-lasso", "delta": 0.1 * dmax, "variant": "randomized", "kappa": 50, "seed": 1}),
        ),
        (
            "iht k=100, lambda=0.05 (with certificate)",
            json!({"method": "iht", "k": 100, "lambda": 0.05}),
        ),
        (
            "htp k=100, lambda=0.05 (with certificate)",
            json!({"method": "htp", "k": 100, "lambda": 0.05}),
        ),
        (
            "k-support k=100, lambda=0.01 (k-FCFW)",
            json!({"method": "k-support", "k": 100, "lambda": 0.01}),
        ),
    ];
    for (name, body) in models {
        let r = request(body).check(p).unwrap();
        let ms = time(&|| {
            std::hint::black_box(model_from_stats(&st, &r, None).unwrap());
        });
        println!("{:<52} {:>10.1}", name, ms);
    }
}

fn main() {
    let filter: Option<String> = std::env::args().skip(1).find(|a| !a.starts_with("--"));
    let want = |part: &str| filter.as_deref().is_none_or(|f| f == part);
    if want("extract") {
        extract();
    }
    if want("fw10k") {
        fw10k();
    }
}
