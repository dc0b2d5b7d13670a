//! Foundation benchmarks (a bench binary that prints a table; run with `cargo bench --bench
//! stats`): ingest rows/s of `RunningStats::update_batch` at p = 16 (the largest p folded in
//! double-double), p = 17 (the smallest the kernel folds), p = 100 and p = 1000, and
//! extraction times at p = 1000 (100-point Lasso path, Lasso at k = 100, OLSth and FSA at
//! k = 100) on paper 003's design. Compare the ingest figures with `scripts/bench_numpy.py`.
//! `cargo bench --bench stats -- array` times the ndarray entry point (`RunningStats::update`
//! on an `ArrayView2`) against the slice one (`update_batch`) in interleaved rounds: a
//! standard-layout view is folded without a copy, so the two rates agree; a Fortran-layout
//! view pays one copy of the batch.

use ndarray::{Array1, Array2, ShapeBuilder};
use ravel_core::solve::{Estimator, Request, least_squares, penalized, threshold};
use ravel_core::stats::{AlphaSchedule, RunningStats, Stats};
use ravel_core::synthetic::SyntheticSpec;
use std::time::Instant;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn rows(p: usize, n: usize, seed: u64) -> (Vec<f64>, Vec<f64>) {
    let spec: SyntheticSpec = format!("p={p},k={},n={n},seed={seed}", p / 10)
        .parse()
        .unwrap();
    let (mut x, mut y) = (Vec::new(), Vec::new());
    spec.rows().fill(n, &mut x, &mut y);
    (x, y)
}

fn main() {
    // `cargo bench --bench stats -- ingest|extract` runs one half (`--bench` is ignored).
    let filter: Option<String> = std::env::args().skip(1).find(|a| !a.starts_with("--"));
    let want = |part: &str| filter.as_deref().is_none_or(|f| f == part);
    println!("{:<44} {:>14} {:>10}", "benchmark", "result", "unit");
    let ingest = if want("ingest") {
        // p = 16 folds in double-double (stats/extended.rs), p = 17 with the kernel.
        vec![
            (16, 1024),
            (17, 1024),
            (100, 1024),
            (1000, 256),
            (1000, 1024),
            (1000, 4096),
        ]
    } else {
        vec![]
    };
    for (p, batch) in ingest {
        let (x, y) = rows(p, batch, 1);
        let mut s = RunningStats::new(p, AlphaSchedule::Plain);
        let reps = (2e10 / (p * p * batch) as f64).clamp(3.0, 2000.0) as usize;
        s.update_batch(&x, &y).unwrap();
        let mut times = vec![];
        for _ in 0..5 {
            let t = Instant::now();
            for _ in 0..reps {
                s.update_batch(&x, &y).unwrap();
            }
            times.push(t.elapsed().as_secs_f64() / reps as f64);
        }
        let rate = batch as f64 / median(times);
        println!(
            "{:<44} {:>14.0} {:>10}",
            format!("update_batch p={p} B={batch}"),
            rate,
            "rows/s"
        );
    }
    // Row-by-row for contrast (rank-1 updates).
    if want("ingest") {
        let p = 1000;
        let (x, y) = rows(p, 200, 2);
        let mut s = RunningStats::new(p, AlphaSchedule::Plain);
        let t = Instant::now();
        for i in 0..200 {
            s.update(&x[i * p..(i + 1) * p], y[i]).unwrap();
        }
        println!(
            "{:<44} {:>14.0} {:>10}",
            "update (row by row) p=1000",
            200.0 / t.elapsed().as_secs_f64(),
            "rows/s"
        );
    }
    if want("array") {
        array_vs_slice();
    }
    if !want("extract") {
        return;
    }

    // Extraction at p = 1000 on the Table 2 design (n = 3000, k* = 100).
    let spec: SyntheticSpec = "p=1000,k=100,n=3000,seed=7".parse().unwrap();
    let s = spec.running_stats(1000);
    let st = &Stats::from(s.clone());
    let time = |f: &dyn Fn() -> f64| median((0..5).map(|_| f()).collect());
    let path_ms = time(&|| {
        Request::from(Estimator::Lasso(penalized::Lasso::path()))
            .path(st, None)
            .unwrap()
            .elapsed_ms
    });
    println!(
        "{:<44} {:>14.1} {:>10}",
        "lasso path, 100 lambdas, p=1000", path_ms, "ms"
    );
    for (name, params) in [
        (
            "lasso k=100, p=1000",
            Request::from(Estimator::Lasso(penalized::Lasso::k(100))),
        ),
        (
            "mcp k=100, p=1000",
            Request::from(Estimator::Mcp(penalized::Mcp::k(100))),
        ),
        (
            "olsth k=100, p=1000",
            Request::from(Estimator::Olsth(threshold::Olsth {
                k: 100,
                lambda: None,
            })),
        ),
        (
            "fsa k=100, p=1000",
            Request::from(Estimator::Fsa(threshold::Fsa {
                k: 100,
                fsa_iterations: None,
                fsa_mu: None,
            })),
        ),
        (
            "ols p=1000",
            Request::from(Estimator::Ols(least_squares::Ols {})),
        ),
    ] {
        let ms = time(&|| params.model(st, None).unwrap().diagnostics.elapsed_ms);
        println!("{:<44} {:>14.1} {:>10}", name, ms, "ms");
    }
}

/// Slice vs standard-layout `ArrayView2` vs Fortran-layout view, the same rows, in interleaved
/// rounds (slice, standard, Fortran, slice, ...) so a busy machine slows all three alike; the
/// median of 15 rounds of each.
fn array_vs_slice() {
    for (p, batch) in [(100, 1024), (1000, 1024)] {
        let (x, y) = rows(p, batch, 3);
        let xa = Array2::from_shape_vec((batch, p), x.clone()).unwrap();
        let mut xf = Array2::zeros((batch, p).f());
        xf.assign(&xa);
        let ya = Array1::from(y.clone());
        let reps = (1e10 / (p * p * batch) as f64).clamp(3.0, 1000.0) as usize;
        let mut s = RunningStats::new(p, AlphaSchedule::Plain);
        s.update_batch(&x, &y).unwrap();
        let (mut slice, mut standard, mut fortran) = (vec![], vec![], vec![]);
        for _ in 0..15 {
            let t = Instant::now();
            for _ in 0..reps {
                s.update_batch(&x, &y).unwrap();
            }
            slice.push(t.elapsed().as_secs_f64() / reps as f64);
            let t = Instant::now();
            for _ in 0..reps {
                s.update(xa.view(), ya.view()).unwrap();
            }
            standard.push(t.elapsed().as_secs_f64() / reps as f64);
            let t = Instant::now();
            for _ in 0..reps {
                s.update(xf.view(), ya.view()).unwrap();
            }
            fortran.push(t.elapsed().as_secs_f64() / reps as f64);
        }
        let (a, b, c) = (
            batch as f64 / median(slice),
            batch as f64 / median(standard),
            batch as f64 / median(fortran),
        );
        for (name, rate) in [
            ("slice (update_batch)", a),
            ("ArrayView2 standard", b),
            ("ArrayView2 Fortran", c),
        ] {
            println!(
                "{:<44} {:>14.0} {:>10}",
                format!("{name} p={p} B={batch}"),
                rate,
                "rows/s"
            );
        }
        println!(
            "{:<44} {:>14.3} {:>10}",
            format!("standard / slice p={p}"),
            b / a,
            "ratio"
        );
    }
}
