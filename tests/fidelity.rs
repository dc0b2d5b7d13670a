//! Issue 11 through the `ravel fit` and `ravel select` binaries, on files: large feature
//! offsets (item 3). The library-level checks are in crates/ravel-core/tests/offsets.rs; here
//! the same question is asked of what a user runs.

use ravel_core::solve::Model;
use ravel_core::synthetic::SyntheticSpec;
use std::path::Path;
use std::process::{Command, Output};

fn run(cmd: &str, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ravel"))
        .arg(cmd)
        .args(args)
        .output()
        .expect("ravel runs")
}

/// Runs `ravel CMD FILE ARGS` and parses its model; panics with stderr when it fails.
fn model(cmd: &str, file: &Path, args: &[&str]) -> Model {
    let mut all = vec![file.to_str().unwrap()];
    all.extend_from_slice(args);
    let out = run(cmd, &all);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "ravel {cmd} {all:?} failed: {stderr}");
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "ravel {cmd} {all:?}: not a model ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

/// A CSV with header x0..x{p-1},y; `{}` prints the shortest text that parses back to the same
/// f64, so the file holds exactly these numbers.
fn write_csv(path: &Path, x: &[f64], y: &[f64], p: usize) {
    let mut text: String = (0..p).map(|j| format!("x{j},")).collect::<String>() + "y\n";
    for (row, yi) in x.chunks_exact(p).zip(y) {
        for v in row {
            text.push_str(&format!("{v},"));
        }
        text.push_str(&format!("{yi}\n"));
    }
    std::fs::write(path, text).unwrap();
}

/// Paper 003's design (p = 20, k = 5), rows quantized to multiples of 2^-20 so that adding
/// integer offsets up to 3e9 is exact: the offset file and the centred file hold the same data.
fn quantized(n: usize, seed: u64) -> (Vec<f64>, Vec<f64>) {
    let spec: SyntheticSpec = format!("p=20,k=5,n={n},seed={seed}").parse().unwrap();
    let (mut x, mut y) = (vec![], vec![]);
    spec.rows().fill(n, &mut x, &mut y);
    let q = |v: &mut f64| *v = (*v * 1048576.0).round() / 1048576.0;
    x.iter_mut().for_each(q);
    y.iter_mut().for_each(q);
    (x, y)
}

/// Largest coefficient difference relative to the largest coefficient.
fn worst(a: &[f64], b: &[f64]) -> f64 {
    let scale = a.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    a.iter()
        .zip(b)
        .fold(0.0f64, |m, (u, v)| m.max((u - v).abs() / scale))
}

/// Item 3: columns whose mean is 1e3..1e9 times their spread (column j moves by
/// offset (1 + j mod 3), y by offset) give the centred file's model to 1e-8 relative, with no
/// column dropped as constant, through `ravel fit`.
#[test]
fn ravel_fit_on_large_offsets_gives_the_model_of_the_centred_file() {
    let dir = tempfile::tempdir().unwrap();
    let p = 20;
    let (x, y) = quantized(600, 3);
    let base = dir.path().join("centred.csv");
    write_csv(&base, &x, &y, p);
    let requests: [&[&str]; 4] = [
        &["--method", "ols"],
        &["--method", "lasso", "--k", "5"],
        &["--method", "mcp", "--lambda", "0.05"],
        &["--method", "olsth", "--k", "5"],
    ];
    for args in requests {
        let want = model("fit", &base, args);
        let want_b = want.dense(p);
        for offset in [1e3, 1e5, 1e6, 1e7, 1e9] {
            let off: Vec<f64> = (0..p).map(|j| offset * (1 + j % 3) as f64).collect();
            let xs: Vec<f64> = x.iter().enumerate().map(|(i, v)| v + off[i % p]).collect();
            let ys: Vec<f64> = y.iter().map(|v| v + offset).collect();
            let file = dir.path().join(format!("offset{offset:e}.csv"));
            write_csv(&file, &xs, &ys, p);
            let got = model("fit", &file, args);
            let what = format!("{args:?} offset {offset:e}");
            assert!(
                got.diagnostics.excluded_constant.is_empty(),
                "{what}: dropped as constant: {:?}",
                got.diagnostics.excluded_constant
            );
            assert_eq!(got.k, want.k, "{what}");
            let got_b = got.dense(p);
            let err = worst(&want_b, &got_b);
            assert!(err <= 1e-8, "{what}: coefficients differ by {err:e}");
            // b0' = b0 + offset - sum_j b_j o_j: the same model in the shifted units.
            let moved: f64 = got_b.iter().zip(&off).map(|(b, o)| b * o).sum();
            let size = offset
                + got_b
                    .iter()
                    .zip(&off)
                    .map(|(b, o)| (b * o).abs())
                    .sum::<f64>();
            let expect = want.intercept + offset - moved;
            assert!(
                (got.intercept - expect).abs() <= 1e-8 * size,
                "{what}: intercept {} vs {expect}",
                got.intercept
            );
        }
    }
}

/// Item 3 for `ravel select`: the feature stream standardizes each column itself; offsets up to
/// 3e9 on the features leave the selection and its coefficients as on the centred file (it
/// used to call every column with mean / sd above 1e6 constant).
#[test]
fn ravel_select_on_large_feature_offsets_selects_as_on_the_centred_file() {
    let dir = tempfile::tempdir().unwrap();
    let p = 20;
    let (x, y) = quantized(400, 4);
    let base = dir.path().join("centred.csv");
    write_csv(&base, &x, &y, p);
    for args in [&["--s", "5"][..], &["--s", "5", "--refit"]] {
        let want = model("select", &base, args);
        assert_eq!(want.k, 5);
        let want_b = want.dense(p);
        for offset in [1e3, 1e6, 1e9] {
            let off: Vec<f64> = (0..p).map(|j| offset * (1 + j % 3) as f64).collect();
            let xs: Vec<f64> = x.iter().enumerate().map(|(i, v)| v + off[i % p]).collect();
            let file = dir.path().join(format!("offset{offset:e}.csv"));
            write_csv(&file, &xs, &y, p);
            let got = model("select", &file, args);
            let what = format!("{args:?} offset {offset:e}");
            assert!(got.diagnostics.excluded_constant.is_empty(), "{what}");
            let err = worst(&want_b, &got.dense(p));
            assert!(err <= 1e-8, "{what}: coefficients differ by {err:e}");
        }
    }
}
