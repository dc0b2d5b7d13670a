//! k-path extraction (issue 34): OLSth's k = 1..K path chosen by EBIC, the fast path
//! (`solve::select::kpath`: one full fit, then the nested refits on one growing Cholesky
//! factor) against the per-k solves it replaced (each k fitted from scratch, as
//! `select::k_fits_one_by_one` still does). Run with `cargo bench --bench kpath` (release);
//! `-- p1000` or `-- p5000` for one half, `-- families` for FSA, IHT and HTP (minutes).
//!
//! p1000: paper 003's Table 2 design (`SyntheticSpec` p = 1000, k* = 100, n = 3000), through
//! the request interface as the HTTP API and `ravel fit` run it: `{"method": "olsth", "k": 150,
//! "select": "ebic"}` from the statistics, against the per-k fits alone on the same problem
//! (a lower bound on the old extraction, which also built the problem and the 150 models).
//! Also FSA, IHT and HTP at K = 150 (their later iterations stay per k; what they share is the
//! step size and the warm-up). Each fast path is checked against the per-k one: the same
//! supports, and the EBIC values to 1e-9.
//!
//! p5000: the population Gram form of the same design at p = 5000 (200 MB; rows would cost
//! p^2 n flops to fold), c perturbed as by n = 20000 rows. The per-k solves take seconds each:
//! three are timed and the figure is scaled to K = 150.

use rand::SeedableRng;
use rand::rngs::StdRng;
use rand_distr::{Distribution, StandardNormal};
use ravel_core::gram::Gram;
use ravel_core::solve::select::kpath::olsth_path;
use ravel_core::solve::select::{criteria, default_ebic_gamma, k_fits_one_by_one};
use ravel_core::solve::threshold::olsth;
use ravel_core::solve::{Request, path_from_stats, problem_of};
use ravel_core::stats::Stats;
use ravel_core::synthetic::SyntheticSpec;
use serde_json::json;
use std::time::Instant;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn ms_of(runs: usize, f: &mut dyn FnMut()) -> f64 {
    median(
        (0..runs)
            .map(|_| {
                let t = Instant::now();
                f();
                t.elapsed().as_secs_f64() * 1e3
            })
            .collect(),
    )
}

fn support(b: &[f64]) -> Vec<usize> {
    (0..b.len()).filter(|&j| b[j] != 0.0).collect()
}

fn p1000(methods: &[&str]) {
    let p = 1000;
    let spec: SyntheticSpec = "p=1000,k=100,n=3000,seed=7".parse().unwrap();
    let st = Stats::from(spec.running_stats(1000));
    println!(
        "\nk-path extraction, p = 1000, n = 3000 (Table 2 design), K = 150, select = ebic\n\
         {:<10} {:>14} {:>16} {:>9} {:>8} {:>12}",
        "method", "fast path ms", "per-k fits ms", "speed-up", "chosen", "max |dEBIC|"
    );
    for (name, body, runs) in [
        (
            "olsth",
            json!({"method": "olsth", "k": 150, "select": "ebic"}),
            5,
        ),
        // K = 300: the default of a select request without a method at p = 1000, n = 3000.
        (
            "olsth300",
            json!({"method": "olsth", "k": 300, "select": "ebic"}),
            5,
        ),
        (
            "fsa",
            json!({"method": "fsa", "k": 150, "select": "ebic"}),
            1,
        ),
        (
            "iht",
            json!({"method": "iht", "k": 150, "select": "ebic"}),
            1,
        ),
        (
            "htp",
            json!({"method": "htp", "k": 150, "select": "ebic"}),
            1,
        ),
    ] {
        if !methods.contains(&name) {
            continue;
        }
        let req: Request = serde_json::from_value(body).unwrap();
        let checked = req.check_path(p).unwrap();
        let mut path = None;
        let fast = ms_of(runs, &mut || {
            path = Some(path_from_stats(&st, &checked, None).unwrap());
        });
        let path = path.unwrap();
        let problem = problem_of(&st, &req).unwrap();
        let (reduced, _) = problem.without_duplicates();
        let mut slow_fits = Vec::new();
        let slow = ms_of(1, &mut || {
            slow_fits = k_fits_one_by_one(&reduced, &req.estimator, path.points.len());
        });
        // The same supports and criteria as the per-k fits.
        let gamma = default_ebic_gamma(problem.n_eff, p);
        let mut worst = 0.0f64;
        for (point, fit) in path.points.iter().zip(&slow_fits) {
            let s = support(&fit.b);
            let got: Vec<usize> = point.coefficients.iter().map(|c| c.index).collect();
            let want: Vec<usize> = s.iter().map(|&j| reduced.active[j]).collect();
            assert_eq!(got, want, "{name}: supports differ at k = {}", s.len());
            let mse = (2.0 * reduced.gram.loss(&fit.b)).max(0.0);
            let c = criteria(problem.n_eff, p, s.len() as f64, s.len(), mse, gamma);
            let fast_ebic = point.diagnostics.criteria.unwrap().ebic;
            worst = worst.max((fast_ebic - c.ebic).abs() / c.ebic.abs().max(1.0));
        }
        assert_eq!(path.points.len(), slow_fits.len());
        assert!(worst <= 1e-9, "{name}: EBIC differs by {worst:e}");
        let chosen = path.selection.as_ref().unwrap().chosen + 1;
        println!(
            "{:<10} {:>14.1} {:>16.1} {:>8.1}x {:>8} {:>12.1e}",
            name,
            fast,
            slow,
            slow / fast,
            chosen,
            worst
        );
    }
}

/// The population Gram form of 003's design (unit variances, pairwise correlation 0.5, k*
/// true features of strength 1 every p / k* columns), c perturbed as by n rows.
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

fn p5000() {
    let (p, big_k, n) = (5000, 150, 20_000.0);
    let g = population_gram(p, 100, n, 3);
    let gamma = default_ebic_gamma(n, p);
    let ebic = |b: &[f64]| {
        let s = support(b).len();
        criteria(n, p, s as f64, s, 2.0 * g.loss(b), gamma).ebic
    };
    let mut path = Vec::new();
    let fast = ms_of(3, &mut || path = olsth_path(&g, big_k, 0.0));
    // The criteria only check that both ways agree: a population Gram with c perturbed is not
    // the moments of any rows, so which k they choose here means nothing.
    let curve: Vec<f64> = path.iter().map(|s| ebic(&s.b)).collect();
    let ks = [1, 75, 150];
    let mut worst = 0.0f64;
    let per_k = ms_of(1, &mut || {
        for &k in &ks {
            let one = olsth(&g, k, 0.0);
            assert_eq!(
                one.support,
                path[k - 1].support,
                "supports differ at k = {k}"
            );
            let (a, b) = (ebic(&one.b), curve[k - 1]);
            worst = worst.max((a - b).abs() / a.abs().max(1.0));
        }
    }) / ks.len() as f64;
    assert!(worst <= 1e-9, "EBIC differs by {worst:e}");
    println!(
        "\nOLSth k-path, p = 5000 (population Gram, c as from n = 20000), K = 150\n\
         fast path {fast:.0} ms; per-k solve {per_k:.0} ms each, x 150 = {:.1} s \
         (speed-up {:.0}x); max |dEBIC| at k = 1, 75, 150: {worst:.1e}",
        per_k * big_k as f64 / 1e3,
        per_k * big_k as f64 / fast
    );
}

fn main() {
    let filter: Option<String> = std::env::args().skip(1).find(|a| !a.starts_with("--"));
    let want = |part: &str| filter.as_deref().is_none_or(|f| f == part);
    if want("p1000") {
        p1000(&["olsth", "olsth300"]);
    }
    if filter.as_deref() == Some("families") {
        p1000(&["fsa", "iht", "htp"]);
    }
    if want("p5000") {
        p5000();
    }
}
