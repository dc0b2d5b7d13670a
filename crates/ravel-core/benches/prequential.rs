//! The cost of test-then-train (`prequential`; the service's live `quality`, issue 33) on the
//! ingest path, a bench binary that prints a table (`cargo bench -p ravel-lm --bench
//! prequential`): rows/s of `Stats::update_batch` in batches of 1000 rows against the same
//! rows through `TestThenTrain` (each row predicted by a lasso with k = 10 nonzeros,
//! re-extracted at every multiple of R rows) and `Quality::observe` (a window of 10000 rows),
//! at p = 100 (the issue's target: under 10% cost with R = 1000) and p = 1000, plus the time
//! of one extraction and of the window's figures. Runs alternate, medians of 5.
//! `RAVEL_BENCH_ROWS` sets the rows at p = 100 (default 300000; p = 1000 gets a tenth).

use ravel_core::Task;
use ravel_core::prequential::{Quality, QualitySpec, TestThenTrain};
use ravel_core::solve::Request;
use ravel_core::stats::{AlphaSchedule, Stats};
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

fn row(name: &str, value: f64, unit: &str) {
    println!("{name:<64} {value:>12.1} {unit:>7}");
}

fn main() {
    println!("{:<64} {:>12} {:>7}", "benchmark", "result", "unit");
    let n100: usize = std::env::var("RAVEL_BENCH_ROWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300_000);
    let req: Request = serde_json::from_str(r#"{"method": "lasso", "k": 10}"#).unwrap();
    let batch = 1000;
    for (p, n, refits) in [
        (100, n100, &[1000u64, 10_000][..]),
        (1000, n100 / 10, &[1000, 10_000][..]),
    ] {
        let (x, y) = rows(p, n, 5);
        for &refit in refits {
            let (mut off, mut on) = (Vec::new(), Vec::new());
            for _ in 0..5 {
                let mut stats = Stats::new(Task::Regression, p, AlphaSchedule::Plain);
                let t = Instant::now();
                for c in (0..n).step_by(batch) {
                    let e = (c + batch).min(n);
                    stats.update_batch(&x[c * p..e * p], &y[c..e]).unwrap();
                }
                off.push(n as f64 / t.elapsed().as_secs_f64());

                let mut stats = Stats::new(Task::Regression, p, AlphaSchedule::Plain);
                let mut ttt = TestThenTrain::new(&req, p, refit).unwrap();
                let mut q = Quality::new(QualitySpec {
                    task: Task::Regression,
                    window: 10_000,
                    decay_rows: 10_000.0,
                    w_pos: 1.0,
                    w_neg: 1.0,
                });
                let mut scores = Vec::new();
                let t = Instant::now();
                for c in (0..n).step_by(batch) {
                    let e = (c + batch).min(n);
                    let (xs, ys) = (&x[c * p..e * p], &y[c..e]);
                    scores.clear();
                    ttt.push(&mut stats, xs, ys, &mut scores, |s, r| {
                        s.update_batch(&xs[r.start * p..r.end * p], &ys[r])
                    })
                    .unwrap();
                    q.observe(&scores, ys);
                }
                on.push(n as f64 / t.elapsed().as_secs_f64());
                assert_eq!(q.rows(), n as u64);
                assert_eq!(ttt.extractions().1, 0, "an extraction failed");
            }
            let (off, on) = (median(off), median(on));
            row(
                &format!("p={p}, {n} rows, batches of {batch}: fold only"),
                off,
                "rows/s",
            );
            row(
                &format!("p={p}: fold + test-then-train, R={refit}, lasso k=10"),
                on,
                "rows/s",
            );
            row(
                &format!("p={p}, R={refit}: cost of quality"),
                100.0 * (1.0 - on / off),
                "%",
            );
        }
        // One extraction at the end of the rows, and the window's figures.
        let mut stats = Stats::new(Task::Regression, p, AlphaSchedule::Plain);
        stats.update_batch(&x, &y).unwrap();
        let checked = req.check(p).unwrap();
        let t = Instant::now();
        for _ in 0..5 {
            ravel_core::solve::model_from_stats(&stats, &checked, None).unwrap();
        }
        row(
            &format!("p={p}: one extraction (lasso k=10)"),
            t.elapsed().as_secs_f64() * 1e3 / 5.0,
            "ms",
        );
    }
    let mut q = Quality::new(QualitySpec {
        task: Task::Classification,
        window: 10_000,
        decay_rows: 10_000.0,
        w_pos: 1.0,
        w_neg: 1.0,
    });
    let scores: Vec<f64> = (0..20_000)
        .map(|i| ((i * 7919) % 1000) as f64 / 500.0 - 1.0)
        .collect();
    let labels: Vec<f64> = (0..20_000)
        .map(|i| if (i * 31) % 3 == 0 { 1.0 } else { -1.0 })
        .collect();
    q.observe(&scores, &labels);
    let t = Instant::now();
    for _ in 0..20 {
        std::hint::black_box(q.report());
    }
    row(
        "figures of a 10000-row classification window (AUC)",
        t.elapsed().as_secs_f64() * 1e3 / 20.0,
        "ms",
    );
}
