//! The ndarray boundary (src/stats/observations.rs): every layout of the same rows folds to the same
//! statistics, bit for bit, as the slice entry point; merges of partitions fed as arrays equal
//! the whole; statistics survive a serde round trip; bad shapes are refused.

use ndarray::{Array1, Array2, ShapeBuilder, s};
use ravel_core::solve::{Estimator, Request, penalized::Lasso};
use ravel_core::stats::{AlphaSchedule, RunningStats, StatsError};
use ravel_core::synthetic::SyntheticSpec;

fn rows(p: usize, n: usize, seed: u64) -> (Vec<f64>, Vec<f64>) {
    let spec: SyntheticSpec = format!("p={p},k=3,n={n},seed={seed}").parse().unwrap();
    let (mut x, mut y) = (Vec::new(), Vec::new());
    spec.rows().fill(n, &mut x, &mut y);
    (x, y)
}

#[test]
fn every_layout_gives_the_statistics_of_the_slice() {
    // p = 37 and 300 rows: the kernel's blocks (stats/syrk.rs) do not divide either.
    let (p, n) = (37, 300);
    let (x, y) = rows(p, n, 7);
    let mut by_slice = RunningStats::new(p, AlphaSchedule::Plain);
    by_slice.update_batch(&x, &y).unwrap();

    let c = Array2::from_shape_vec((n, p), x.clone()).unwrap();
    let yv = Array1::from(y.clone());
    assert!(c.is_standard_layout());

    let mut f = Array2::zeros((n, p).f());
    f.assign(&c);
    assert!(!f.is_standard_layout() && f.t().is_standard_layout());

    // Non-contiguous: the same values as columns 1, 3, 5, ... of a wider array and rows
    // 0, 2, 4, ... of a taller one, with y as a stepped view too.
    let mut wide = Array2::from_elem((2 * n, 2 * p + 1), f64::NAN);
    wide.slice_mut(s![..;2, 1..;2]).assign(&c);
    let stepped = wide.slice(s![..;2, 1..;2]);
    assert!(stepped.as_slice().is_none() && stepped.as_slice_memory_order().is_none());
    let mut ywide = Array1::from_elem(3 * n, f64::NAN);
    ywide.slice_mut(s![..;3]).assign(&yv);
    let ystep = ywide.slice(s![..;3]);

    // Reversed rows of a reversed array: negative strides.
    let mut rev = c.clone();
    rev.invert_axis(ndarray::Axis(0));
    let unrev = rev.slice(s![..;-1, ..]);

    let layouts = [c.view(), f.view(), stepped, unrev];
    for (i, xv) in layouts.into_iter().enumerate() {
        let mut st = RunningStats::new(p, AlphaSchedule::Plain);
        st.update(xv, yv.view()).unwrap();
        assert_eq!(st, by_slice, "layout {i}");
        let mut st = RunningStats::new(p, AlphaSchedule::Plain);
        st.update(xv, ystep).unwrap();
        assert_eq!(st, by_slice, "layout {i} with a stepped y");
    }
    // Owned arrays by reference, and a forgetting schedule (row weights differ).
    let mut owned = RunningStats::new(p, AlphaSchedule::Plain);
    owned.update(&f, &yv).unwrap();
    assert_eq!(owned, by_slice);
    let fixed = AlphaSchedule::Fixed { alpha: 0.01 };
    let mut a = RunningStats::new(p, fixed.clone());
    a.update_batch(&x, &y).unwrap();
    let mut b = RunningStats::new(p, fixed);
    b.update(stepped, ystep).unwrap();
    assert_eq!(a, b);
    // A row as a 1-d view equals the row as a slice, even a column of a Fortran array.
    let mut one = RunningStats::new(p, AlphaSchedule::Plain);
    let mut two = one.clone();
    for i in 0..n {
        one.update(&x[i * p..(i + 1) * p], y[i]).unwrap();
        two.update(f.row(i), y[i]).unwrap();
    }
    assert_eq!(one, two);
}

#[test]
fn arrays_out_agree_with_the_slices_out() {
    let (p, n) = (5, 50);
    let (x, y) = rows(p, n, 3);
    let mut st = RunningStats::new(p, AlphaSchedule::Plain);
    st.update_batch(&x, &y).unwrap();
    assert_eq!(st.mean_x_array().to_vec(), st.mean_x());
    let sxx = st.sxx_array();
    let full = st.sxx_full();
    for i in 0..p {
        for j in 0..p {
            assert_eq!(sxx[[i, j]], full[i + j * p]);
        }
    }
    // Covariance against a two-pass computation on the rows.
    let xa = Array2::from_shape_vec((n, p), x).unwrap();
    let mean = xa.mean_axis(ndarray::Axis(0)).unwrap();
    let centred = &xa - &mean;
    let cov = centred.t().dot(&centred) / n as f64;
    let ya = Array1::from(y);
    let cxy = centred.t().dot(&(&ya - ya.mean().unwrap())) / n as f64;
    let got = st.covariance();
    for ((a, b), scale) in got.iter().zip(&cov).zip(std::iter::repeat(cov[[0, 0]])) {
        assert!((a - b).abs() <= 1e-12 * scale.abs().max(1.0), "{a} vs {b}");
    }
    for (a, b) in st.cov_xy_array().iter().zip(&cxy) {
        assert!((a - b).abs() <= 1e-12 * b.abs().max(1.0), "{a} vs {b}");
    }
    // The model's coefficients and predictions as arrays.
    let model = st.extract(&Request::ols()).unwrap();
    assert_eq!(model.coef(p).to_vec(), model.dense(p));
    let fitted = model.predict_rows(xa.view());
    for (i, row) in xa.rows().into_iter().enumerate() {
        assert!((fitted[i] - model.predict(row.as_slice().unwrap())).abs() < 1e-12);
    }
}

#[test]
fn partitions_merge_to_the_whole_and_round_trip_through_serde() {
    let (p, n) = (8, 400);
    let (x, y) = rows(p, n, 11);
    let xa = Array2::from_shape_vec((n, p), x).unwrap();
    let ya = Array1::from(y);
    let mut whole = RunningStats::new(p, AlphaSchedule::Plain);
    whole.update(xa.view(), ya.view()).unwrap();
    let mut left = RunningStats::new(p, AlphaSchedule::Plain);
    let mut right = left.clone();
    left.update(xa.slice(s![..150, ..]), ya.slice(s![..150]))
        .unwrap();
    right
        .update(xa.slice(s![150.., ..]), ya.slice(s![150..]))
        .unwrap();
    // Through JSON, as two workers would ship them.
    let json = serde_json::to_string(&right).unwrap();
    let shipped: RunningStats = serde_json::from_str(&json).unwrap();
    assert_eq!(shipped, right);
    left.merge(&shipped).unwrap();
    assert_eq!(left.n(), whole.n());
    let req = Request::from(Estimator::Lasso(Lasso::k(3)));
    let (a, b) = (left.extract(&req).unwrap(), whole.extract(&req).unwrap());
    let (ca, cb) = (a.coef(p), b.coef(p));
    for (u, v) in ca.iter().zip(&cb) {
        assert!((u - v).abs() <= 1e-9 * v.abs().max(1.0), "{ca} vs {cb}");
    }
    assert!((a.intercept - b.intercept).abs() < 1e-9);
}

#[test]
fn bad_shapes_are_refused_and_change_nothing() {
    let mut st = RunningStats::new(3, AlphaSchedule::Plain);
    let x = Array2::<f64>::zeros((4, 2));
    let y = Array1::<f64>::zeros(4);
    assert_eq!(
        st.update(x.view(), y.view()),
        Err(StatsError::Dimension {
            expected: 3,
            got: 2
        })
    );
    let x = Array2::<f64>::zeros((4, 3));
    let y = Array1::<f64>::zeros(5);
    assert_eq!(
        st.update(x.view(), y.view()),
        Err(StatsError::Length { rows: 4, ys: 5 })
    );
    let mut bad = Array2::<f64>::zeros((2, 3).f());
    bad[[1, 2]] = f64::NAN;
    assert_eq!(
        st.update(bad.view(), Array1::zeros(2).view()),
        Err(StatsError::NonFinite { row: 1 })
    );
    assert_eq!(st, RunningStats::new(3, AlphaSchedule::Plain));
}
