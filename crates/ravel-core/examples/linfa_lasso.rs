//! ravel's Lasso and linfa-elasticnet's on the same data through linfa's `Fit`: the same
//! coefficients at the same penalty, and the times side by side. Needs the `linfa` feature:
//!
//! ```sh
//! cargo run --release -p ravel-lm --features linfa --example linfa_lasso
//! ```
//!
//! Penalty scaling: both minimize 1/(2n) ||y - b0 - X b||^2 + lambda |b|_1 when ravel's request
//! has `standardize: false` (with it, ravel's lambda applies to unit-variance columns, as
//! glmnet's). linfa-elasticnet centres y but not X, so the columns are centred first: then
//! the two problems are the same.

use linfa::prelude::*;
use linfa_elasticnet::ElasticNet;
use ndarray::{Array1, Array2, Axis};
use ravel_core::solve::{Estimator, Request, penalized::Lasso};
use ravel_core::synthetic::SyntheticSpec;
use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    // Paper 003's design: p = 50 correlated features, 5 true ones, n = 5000 rows.
    let (n, p) = (5000, 50);
    let spec: SyntheticSpec = format!("p={p},k=5,n={n},seed=1").parse()?;
    let (mut xs, mut ys) = (Vec::new(), Vec::new());
    spec.rows().fill(n, &mut xs, &mut ys);
    let mut x = Array2::from_shape_vec((n, p), xs)?;
    x -= &x.mean_axis(Axis(0)).expect("n > 0");
    let y = Array1::from(ys);
    let data = Dataset::new(x, y);

    // lambda_max = max_j |x_j^T (y - mean y)| / n: every penalty below selects something.
    let yc = data.targets() - data.targets().mean().expect("n > 0");
    let lambda_max = data
        .records()
        .t()
        .dot(&yc)
        .fold(0.0f64, |m, v| m.max(v.abs()))
        / n as f64;

    println!(
        "{:>12} {:>9} {:>12} {:>12} {:>14}",
        "lambda", "nonzeros", "ravel ms", "linfa ms", "max |b diff|"
    );
    for ratio in [0.5, 0.1, 0.01] {
        let lambda = ratio * lambda_max;
        let t = Instant::now();
        let theirs = ElasticNet::lasso()
            .penalty(lambda)
            .tolerance(1e-12)
            .max_iterations(100_000)
            .fit(&data)?;
        let linfa_ms = t.elapsed().as_secs_f64() * 1e3;

        // The one line that changes: ravel's Lasso at the same lambda, on the raw columns.
        let mut lasso = Lasso::lambda(lambda);
        lasso.tol = Some(1e-14);
        let t = Instant::now();
        let ours = Request::from(Estimator::Lasso(lasso))
            .with_standardize(false)
            .fit(&data)?;
        let ravel_ms = t.elapsed().as_secs_f64() * 1e3;

        let diff = (&ours.coef() - theirs.hyperplane())
            .iter()
            .fold(0.0f64, |m, v| m.max(v.abs()));
        println!(
            "{:>12.6} {:>9} {:>12.2} {:>12.2} {:>14.2e}",
            lambda, ours.k, ravel_ms, linfa_ms, diff
        );
        assert!(
            diff < 1e-6,
            "coefficients differ by {diff} at lambda {lambda}"
        );
        assert!((ours.intercept - theirs.intercept()).abs() < 1e-6);
        // Both predict through linfa's `Predict`.
        let (a, b) = (ours.predict(&data), theirs.predict(&data));
        assert!((&a - &b).iter().all(|d| d.abs() < 1e-5));
    }
    Ok(())
}

#[test]
fn example_runs() {
    main().unwrap();
}
