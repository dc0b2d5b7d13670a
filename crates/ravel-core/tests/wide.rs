//! Paper 004's raw-data Frank-Wolfe path (`ravel_core::wide`) against scikit-learn's exact
//! Lasso path on a medium sparse problem (500 x 20,000, 0.25 % dense, read from LIBSVM into a
//! `Csc`): at each reference delta the objective equals the constrained optimum within 1e-3
//! relative, and the reported duality gap bounds the suboptimality (f - gap <= f* <= f).
//! The fixture and its reference come from scripts/make_wide_fixtures.py.

use ravel_core::data::csc::{CscOptions, read_csc};
use ravel_core::data::{Budget, Plan};
use ravel_core::wide::{Sampling, WideOptions, WideProblem, path};
use serde::Deserialize;
use std::path::Path;

#[derive(Deserialize)]
struct Reference {
    n: usize,
    p: usize,
    nnz: usize,
    points: Vec<Point>,
}

#[derive(Deserialize)]
struct Point {
    delta: f64,
    objective: f64,
}

#[test]
fn the_path_matches_sklearns_lasso_path_and_its_gaps_bound_the_error() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures");
    let reference: Reference =
        serde_json::from_str(&std::fs::read_to_string(dir.join("wide_lasso_path.json")).unwrap())
            .unwrap();
    let opts = CscOptions {
        target: None,
        format: None,
        p: Some(reference.p),
        budget: Budget::unlimited(Plan::Rows { batch_rows: 1 }),
    };
    let x = read_csc(&dir.join("wide_500x20000.svm"), &opts).unwrap();
    assert_eq!(
        (x.n, x.p, x.nnz()),
        (reference.n, reference.p, reference.nnz)
    );
    let pr = WideProblem::new(&x);
    assert!((pr.f0 - reference.points[0].objective).abs() <= 1e-12 * pr.f0);
    let points: Vec<&Point> = reference.points.iter().filter(|p| p.delta > 0.0).collect();
    let deltas: Vec<f64> = points.iter().map(|p| p.delta).collect();
    for sampling in [
        Sampling::Full,
        Sampling::Randomized {
            kappa: 400,
            seed: 1,
        },
    ] {
        let opt = WideOptions {
            sampling,
            tol: 2e-4,
            ..WideOptions::default()
        };
        let got = path(&pr, &deltas, opt);
        for (pt, r) in got.iter().zip(&points) {
            let f_star = r.objective;
            let l1: f64 = pt.coefficients.iter().map(|c| c.1.abs()).sum();
            assert!(
                l1 <= pt.delta * (1.0 + 1e-9),
                "{sampling:?}: ||b||_1 {l1} > {pt:?}"
            );
            assert!(pt.converged, "{sampling:?} at delta {}: {pt:?}", pt.delta);
            let rel = (pt.objective - f_star) / f_star;
            assert!(
                rel.abs() <= 1e-3,
                "{sampling:?} delta {}: objective {} vs {f_star} ({rel:e})",
                pt.delta,
                pt.objective
            );
            // The gap brackets the optimum: f - gap <= f* <= f.
            assert!(
                pt.objective >= f_star * (1.0 - 1e-9),
                "{pt:?} below {f_star}"
            );
            assert!(
                pt.objective - pt.gap <= f_star * (1.0 + 1e-9),
                "{sampling:?} delta {}: gap {} does not reach {f_star} from {}",
                pt.delta,
                pt.gap,
                pt.objective
            );
        }
    }
}
