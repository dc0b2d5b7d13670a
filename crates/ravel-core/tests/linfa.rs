//! linfa compatibility (feature `linfa`, src/linfa_traits.rs): ravel's Lasso fitted through
//! linfa's `Fit` equals linfa-elasticnet's Lasso (an independent coordinate descent on the
//! rows) to 1e-6 at the same penalty, on uncorrelated and correlated designs, for
//! standard-layout and Fortran-layout records; `Predict` gives b0 + X b.

use linfa::prelude::*;
use linfa_elasticnet::ElasticNet;
use ndarray::{Array1, Array2, Axis, ShapeBuilder};
use ravel_core::linfa_traits::FitError;
use ravel_core::solve::{Estimator, Request, penalized::Lasso};
use ravel_core::synthetic::SyntheticSpec;

fn design(spec: &str, n: usize, p: usize) -> (Array2<f64>, Array1<f64>) {
    let spec: SyntheticSpec = spec.parse().unwrap();
    let (mut xs, mut ys) = (Vec::new(), Vec::new());
    spec.rows().fill(n, &mut xs, &mut ys);
    let mut x = Array2::from_shape_vec((n, p), xs).unwrap();
    // linfa-elasticnet centres y only: centred columns make its problem the least-squares one.
    x -= &x.mean_axis(Axis(0)).unwrap();
    (x, Array1::from(ys))
}

fn max_diff(a: &Array1<f64>, b: &Array1<f64>) -> f64 {
    (a - b).iter().fold(0.0f64, |m, v| m.max(v.abs()))
}

#[test]
fn lasso_equals_linfa_elasticnet_at_the_same_penalty() {
    for (spec, n, p) in [
        ("p=20,k=4,n=400,seed=3,rho=0", 400, 20),
        ("p=40,k=5,n=300,seed=5,rho=0.7", 300, 40),
    ] {
        let (x, y) = design(spec, n, p);
        let yc = &y - y.mean().unwrap();
        let lambda_max = x.t().dot(&yc).fold(0.0f64, |m, v| m.max(v.abs())) / n as f64;
        let mut fortran = Array2::zeros((n, p).f());
        fortran.assign(&x);
        let data = Dataset::new(x, y.clone());
        let data_f = Dataset::new(fortran, y);
        for ratio in [0.3, 0.05, 0.005] {
            let lambda = ratio * lambda_max;
            let theirs = ElasticNet::lasso()
                .penalty(lambda)
                .tolerance(1e-12)
                .max_iterations(100_000)
                .fit(&data)
                .unwrap();
            let mut lasso = Lasso::lambda(lambda);
            lasso.tol = Some(1e-14);
            let req = Request::from(Estimator::Lasso(lasso)).with_standardize(false);
            let ours = req.fit(&data).unwrap();
            let b = ours.coef();
            let d = max_diff(&b, theirs.hyperplane());
            assert!(d < 1e-6, "{spec} lambda {lambda}: max |diff| {d}");
            assert!((ours.intercept - theirs.intercept()).abs() < 1e-6);
            // Something is selected and something is not: the comparison is not trivial.
            assert!(
                ours.k > 0 && (ratio < 0.1 || ours.k < p),
                "{spec}: k = {}",
                ours.k
            );
            // Fortran-layout records fit the same model.
            let of = req.fit(&data_f).unwrap();
            assert_eq!(of.coef(), b);
            let pred = ours.predict(&data);
            let direct = data.records().dot(&b) + ours.intercept;
            assert!(max_diff(&pred, &direct) < 1e-12);
        }
    }
}

#[test]
fn estimator_fits_with_ravel_defaults_and_errors_are_typed() {
    let (x, y) = design("p=10,k=3,n=200,seed=9", 200, 10);
    let data = Dataset::new(x, y);
    let est = Estimator::Lasso(Lasso::k(3));
    let model = est.fit(&data).unwrap();
    assert_eq!(model.k, 3);
    let too_many = Estimator::Lasso(Lasso::k(11));
    assert!(matches!(too_many.fit(&data), Err(FitError::Param(_))));
    let mut bad = data.records().clone();
    bad[[3, 4]] = f64::NAN;
    let bad = Dataset::new(bad, data.targets().clone());
    assert!(matches!(est.fit(&bad), Err(FitError::Stats(_))));
}
