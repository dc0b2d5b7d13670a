//! Large feature offsets (issue 11 item 3): columns whose mean is 1e3..1e9 times their spread
//! (timestamps, prices in cents) give the model of the centred data, merged shards with
//! different shifts equal one stream, and checkpoints written before the shift existed load.
//!
//! The rows are quantized to multiples of 2^-20, so adding the (integer) offsets is exact in
//! floating point up to 3e9: raw and centred data are then the same data, and any difference
//! of the models is the statistics' own rounding.

use ravel_core::gram::Moments;
use ravel_core::solve::{Estimator, Request, least_squares, penalized};
use ravel_core::stats::{RunningStats, Stats};
use ravel_core::synthetic::SyntheticSpec;

const OFFSETS: [f64; 5] = [1e3, 1e5, 1e6, 1e7, 1e9];

/// Rows of paper 003's design (p = 20, k = 5), quantized.
fn centred(n: usize, seed: u64) -> (Vec<f64>, Vec<f64>) {
    let spec: SyntheticSpec = format!("p=20,k=5,n={n},seed={seed}").parse().unwrap();
    let (mut x, mut y) = (vec![], vec![]);
    spec.rows().fill(n, &mut x, &mut y);
    let q = |v: &mut f64| *v = (*v * 1048576.0).round() / 1048576.0;
    x.iter_mut().for_each(q);
    y.iter_mut().for_each(q);
    (x, y)
}

/// Column j moves by offset (1 + j mod 3) (up to 3e9), y by offset.
fn shifted(x: &[f64], y: &[f64], p: usize, offset: f64) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let off: Vec<f64> = (0..p).map(|j| offset * (1 + j % 3) as f64).collect();
    let xs = x.iter().enumerate().map(|(i, v)| v + off[i % p]).collect();
    let ys = y.iter().map(|v| v + offset).collect();
    (xs, ys, off)
}

fn fold(x: &[f64], y: &[f64], p: usize, batch: usize, schedule: &str) -> RunningStats {
    let mut s = RunningStats::new(p, schedule.parse().unwrap());
    for (xb, yb) in x.chunks(batch * p).zip(y.chunks(batch)) {
        s.update_batch(xb, yb).unwrap();
    }
    s
}

/// Largest coefficient difference relative to the largest coefficient.
fn worst(a: &[f64], b: &[f64]) -> f64 {
    let scale = a.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    a.iter()
        .zip(b)
        .fold(0.0f64, |m, (u, v)| m.max((u - v).abs() / scale))
}

#[test]
fn large_offsets_give_the_model_of_the_centred_data() {
    let p = 20;
    let (x, y) = centred(600, 3);
    for schedule in ["plain", "fixed:0.005"] {
        let base = Stats::from(fold(&x, &y, p, 64, schedule));
        for params in [
            Request::from(Estimator::Ols(least_squares::Ols {})),
            Request::from(Estimator::Lasso(penalized::Lasso::k(5))),
        ] {
            let want = params.model(&base, None).unwrap();
            let want_b = want.dense(p);
            for offset in OFFSETS {
                let (xs, ys, off) = shifted(&x, &y, p, offset);
                let stats = Stats::from(fold(&xs, &ys, p, 64, schedule));
                let got = params.model(&stats, None).unwrap();
                let what = format!("{} {schedule} offset {offset:e}", params.method());
                assert!(
                    got.diagnostics.excluded_constant.is_empty(),
                    "{what}: columns dropped as constant: {:?}",
                    got.diagnostics.excluded_constant
                );
                assert_eq!(got.k, want.k, "{what}: nonzeros");
                let got_b = got.dense(p);
                let err = worst(&want_b, &got_b);
                assert!(err <= 1e-8, "{what}: coefficients differ by {err:e}");
                // b0' = b0 + t - sum_j b_j o_j: the same model in the raw units.
                let moved: f64 = got_b.iter().zip(&off).map(|(b, o)| b * o).sum();
                let expect = want.intercept + offset - moved;
                let size = offset
                    + got_b
                        .iter()
                        .zip(&off)
                        .map(|(b, o)| (b * o).abs())
                        .sum::<f64>();
                assert!(
                    (got.intercept - expect).abs() <= 1e-8 * size,
                    "{what}: intercept {} vs {expect}",
                    got.intercept
                );
            }
        }
    }
}

#[test]
fn the_centred_moments_of_offset_data_equal_those_of_centred_data() {
    let p = 20;
    let (x, y) = centred(500, 5);
    let base = fold(&x, &y, p, 1, "plain");
    for offset in OFFSETS {
        let (xs, ys, _) = shifted(&x, &y, p, offset);
        // Row by row, in uneven batches, and as merged shards with different shifts.
        let rows = fold(&xs, &ys, p, 1, "plain");
        let batches = fold(&xs, &ys, p, 77, "plain");
        let cut = 173;
        let mut merged = fold(&xs[cut * p..], &ys[cut..], p, 50, "plain");
        merged
            .merge(&fold(&xs[..cut * p], &ys[..cut], p, 40, "plain"))
            .unwrap();
        assert_ne!(
            merged.shift_x(),
            rows.shift_x(),
            "the shards' shifts differ"
        );
        for (s, what) in [(&rows, "rows"), (&batches, "batches"), (&merged, "merged")] {
            let scale = base.cov_at(0, 0);
            let mut err: f64 = 0.0;
            for i in 0..p {
                for j in 0..=i {
                    err = err.max((s.cov_at(i, j) - base.cov_at(i, j)).abs() / scale);
                }
                err = err.max((s.cov_xy(i) - base.cov_xy(i)).abs() / scale);
            }
            err = err.max((s.var_y() - base.var_y()).abs() / base.var_y());
            assert!(
                err <= 1e-11,
                "offset {offset:e} {what}: centred moments differ by {err:e}"
            );
        }
    }
}

#[test]
fn checkpoints_written_before_the_shift_existed_still_load() {
    // Such a checkpoint holds the raw moments under the same names and no shift.
    let p = 20;
    let (x, y) = centred(200, 9);
    let (xs, ys, _) = shifted(&x, &y, p, 10.0);
    let s = fold(&xs, &ys, p, 32, "plain");
    let mut old = serde_json::to_value(&s).unwrap();
    let obj = old.as_object_mut().unwrap();
    obj.remove("shift_x");
    obj.remove("shift_y");
    // Nor the packed triangle of later versions: E[x x^T] is the full `sxx` below.
    obj.remove("sxx_lower");
    obj.insert("mean_x".into(), serde_json::json!(s.mean_x()));
    obj.insert("mean_y".into(), serde_json::json!(s.mean_y()));
    obj.insert("sxx".into(), serde_json::json!(s.sxx_full()));
    obj.insert("sxy".into(), serde_json::json!(s.sxy()));
    obj.insert("syy".into(), serde_json::json!(s.syy()));
    let loaded: RunningStats = serde_json::from_value(old).unwrap();
    assert_eq!(loaded.shift_x(), vec![0.0; p]);
    assert_eq!(loaded.n(), s.n());
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b.abs().max(1.0);
    for i in 0..p {
        assert!(close(loaded.mean_x()[i], s.mean_x()[i]));
        for j in 0..=i {
            assert!(close(loaded.cov_at(i, j), s.cov_at(i, j)), "cov ({i},{j})");
        }
    }
    // It keeps folding rows (around its zero shift) and round-trips with its shift.
    let mut more = loaded.clone();
    more.update_batch(&xs[..10 * p], &ys[..10]).unwrap();
    let again: RunningStats = serde_json::from_str(&serde_json::to_string(&more).unwrap()).unwrap();
    assert_eq!(again, more);
    let fresh = s.clone();
    assert_eq!(
        serde_json::from_str::<RunningStats>(&serde_json::to_string(&fresh).unwrap()).unwrap(),
        fresh
    );
}
