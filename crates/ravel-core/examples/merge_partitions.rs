//! Scale-out: two workers each fold their partition of a stream, ship their statistics as
//! JSON, and one merge gives the statistics (and so every model) of all the rows, equal to a
//! single pass over them up to rounding.
//!
//! ```sh
//! cargo run --release -p ravel-lm --example merge_partitions
//! ```

use ndarray::{Array1, Array2, s};
use ravel_core::solve::{Estimator, Request, penalized::Lasso};
use ravel_core::stats::{AlphaSchedule, RunningStats};
use ravel_core::synthetic::SyntheticSpec;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let (n, p) = (6000, 30);
    let spec: SyntheticSpec = format!("p={p},k=3,n={n},seed=4").parse()?;
    let (mut xs, mut ys) = (Vec::new(), Vec::new());
    spec.rows().fill(n, &mut xs, &mut ys);
    let x = Array2::from_shape_vec((n, p), xs)?;
    let y = Array1::from(ys);

    // Two workers on two threads, each with its own partition (rows 0..2500 and 2500..6000),
    // each shipping its statistics as JSON: O(p^2) bytes, whatever the number of rows.
    let shipped: Vec<String> = std::thread::scope(|scope| {
        let workers: Vec<_> = [0..2500, 2500..n]
            .into_iter()
            .map(|rows| {
                let (x, y) = (x.slice(s![rows.clone(), ..]), y.slice(s![rows]));
                scope.spawn(move || {
                    let mut stats = RunningStats::new(p, AlphaSchedule::Plain);
                    stats.update(x, y).expect("finite rows");
                    serde_json::to_string(&stats).expect("serializable")
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().expect("worker"))
            .collect()
    });
    println!(
        "worker states: {} and {} bytes",
        shipped[0].len(),
        shipped[1].len()
    );

    // The reducer merges them.
    let mut merged = RunningStats::new(p, AlphaSchedule::Plain);
    for json in &shipped {
        merged.merge(&serde_json::from_str::<RunningStats>(json)?)?;
    }

    // One pass over all rows, for comparison.
    let mut whole = RunningStats::new(p, AlphaSchedule::Plain);
    whole.update(x.view(), y.view())?;
    let lasso = Request::from(Estimator::Lasso(Lasso::k(3)));
    let (a, b) = (merged.extract(&lasso)?, whole.extract(&lasso)?);
    let diff = (&a.coef(p) - &b.coef(p))
        .iter()
        .fold(0.0f64, |m, v| m.max(v.abs()));
    println!(
        "merged: {} rows; lasso k=3 support {:?}",
        merged.n(),
        support(&a)
    );
    println!("largest coefficient difference from one pass: {diff:.2e}");
    let cov_diff = (&merged.covariance() - &whole.covariance())
        .iter()
        .fold(0.0f64, |m, v| m.max(v.abs()));
    println!("largest covariance difference: {cov_diff:.2e}");
    assert_eq!(merged.n(), whole.n());
    assert_eq!(support(&a), spec.support());
    assert!(diff < 1e-9 && cov_diff < 1e-12);
    Ok(())
}

fn support(m: &ravel_core::Model) -> Vec<usize> {
    m.coefficients.iter().map(|c| c.index).collect()
}

#[test]
fn example_runs() {
    main().unwrap();
}
