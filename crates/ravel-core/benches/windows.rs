//! Issue 47's figure: a model over a day of one-minute buckets (1,440 of them) at p = 100,
//! from the merge of the buckets (`Windows::span`, the stable pairwise merge) to OLS on the
//! merged statistics, as the service answers `"window": {"last": "1d"}`. A bench binary that
//! prints a table (`cargo bench --bench windows`): the median of 21 rounds of each part.

use ravel_core::Task;
use ravel_core::solve::{Estimator, Request, least_squares};
use ravel_core::stats::windows::{WindowSpec, Windows};
use ravel_core::synthetic::SyntheticSpec;
use std::time::Instant;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let (p, minutes, per_minute) = (100, 1440, 20);
    let n = minutes * per_minute;
    let design: SyntheticSpec = format!("p={p},k=10,n={n},seed=47").parse().unwrap();
    let (mut x, mut y) = (Vec::new(), Vec::new());
    design.rows().fill(n, &mut x, &mut y);
    // A day of rows ending at a day boundary, `per_minute` in each minute.
    let now: i64 = 1_700_006_400_000;
    let start = now - minutes as i64 * 60_000;
    let stamps: Vec<i64> = (0..n)
        .map(|i| start + (i / per_minute) as i64 * 60_000 + 1)
        .collect();
    let spec = WindowSpec::parse("1m", "7d").unwrap();
    let mut w = Windows::new(spec, Task::Regression, p);
    let folded = w.fold(now, &stamps, &x, &y).unwrap();
    assert_eq!(folded.rows, n, "every row in a bucket");
    let ols = Request::from(Estimator::Ols(least_squares::Ols {}));
    let (mut merge, mut model, mut total) = (vec![], vec![], vec![]);
    let mut buckets = 0;
    for _ in 0..21 {
        let t = Instant::now();
        let span = w.span(start, now).unwrap();
        let merged = t.elapsed().as_secs_f64() * 1e3;
        let m = ols.model(&span.stats, None).unwrap();
        let all = t.elapsed().as_secs_f64() * 1e3;
        assert_eq!(m.n, n as u64, "the window holds every row");
        buckets = span.buckets;
        merge.push(merged);
        model.push(all - merged);
        total.push(all);
    }
    assert_eq!(buckets, minutes, "one bucket a minute");
    println!("{:<52} {:>10} {:>6}", "benchmark", "median", "unit");
    for (name, v) in [
        ("merge 1,440 one-minute buckets, p=100", merge),
        ("OLS on the merged statistics, p=100", model),
        ("window model (merge + OLS), p=100", total),
    ] {
        println!("{:<52} {:>10.2} {:>6}", name, median(v), "ms");
    }
}
