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
//! 100-point Lasso path of coordinate descent, for README's benchmark table.

use rand::SeedableRng;
use rand::rngs::StdRng;
use rand_distr::{Distribution, StandardNormal};
use ravel_core::gram::{Gram, Problem};
use ravel_core::solve::frank_wolfe::{
    FwOptions, FwVariant, delta_grid, delta_max, fw_lasso, fw_path,
};
use ravel_core::solve::iht::{HardThreshold, IhtOptions, hard_threshold};
use ravel_core::solve::ksupport::{KsupportOptions, ksupport};
use ravel_core::solve::{Estimator, Request, penalized};
use ravel_core::stats::{AlphaSchedule, RunningStats, Stats};
use ravel_core::synthetic::SyntheticSpec;
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
    let mut s = RunningStats::new(p, AlphaSchedule::Plain);
    let (mut x, mut y) = (Vec::new(), Vec::new());
    let mut source = spec.rows();
    while source.fill(1000, &mut x, &mut y) > 0 {
        s.update_batch(&x, &y).unwrap();
        x.clear();
        y.clear();
    }
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
    println!(
        "\n{:<48} {:>10} {:>6}",
        "extraction, p=1000, n=3000 (Table 2 design)", "ms", ""
    );
    let ms = time(&|| {
        Request::from(Estimator::Lasso(penalized::Lasso::path()))
            .path(&st, None)
            .unwrap();
    });
    println!("{:<48} {:>10.1}", "lasso path (CD), 100 lambdas", ms);
    // The solver-level figures include building the Gram problem, as path_from_stats does.
    let problem = || Problem::regression(&s, true).unwrap();
    let ms = time(&|| {
        let pr = problem();
        let g = &pr.gram;
        let deltas = delta_grid(delta_max(g), 0.01, 100);
        std::hint::black_box(fw_path(g, &deltas, &FwOptions::default()));
    });
    println!("{:<48} {:>10.1}", "fw-lasso path, 100 deltas", ms);
    for (name, variant) in [
        ("fw-lasso, delta = 0.1 delta_max", FwVariant::Deterministic),
        (
            "fw-lasso randomized kappa=50, delta = 0.1 dmax",
            FwVariant::Randomized { kappa: 50, seed: 1 },
        ),
    ] {
        let ms = time(&|| {
            let pr = problem();
            let g = &pr.gram;
            let opt = FwOptions {
                variant,
                ..FwOptions::default()
            };
            std::hint::black_box(fw_lasso(g, 0.1 * delta_max(g), &opt, None));
        });
        println!("{:<48} {:>10.1}", name, ms);
    }
    for (name, method) in [
        ("iht k=100", HardThreshold::Iht),
        ("htp k=100", HardThreshold::Htp),
    ] {
        let ms = time(&|| {
            let pr = problem();
            let opt = IhtOptions {
                lambda: 0.05,
                ..IhtOptions::default()
            };
            std::hint::black_box(hard_threshold(&pr.gram, 100, method, &opt));
        });
        println!(
            "{:<48} {:>10.1}",
            format!("{name}, lambda=0.05 (with certificate)"),
            ms
        );
    }
    let ms = time(&|| {
        let pr = problem();
        std::hint::black_box(ksupport(&pr.gram, 100, 0.01, &KsupportOptions::default()));
    });
    println!(
        "{:<48} {:>10.1}",
        "k-support k=100, lambda=0.01 (k-FCFW)", ms
    );
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
