//! `ravel select` end to end: the real binary on real CSV and NPY files in a temp dir,
//! printing the model JSON of `ravel fit`; bad files and bad options are clear errors.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rand_distr::StandardNormal;
use ravel_core::solve::Model;
use std::path::Path;
use std::process::Command;

const N: usize = 150;
const P: usize = 30;
const CONSTANT: usize = 7;

/// Rows of 30 features (own means and scales, column 7 constant) and a target
/// y = 2 x3 - 1.5 x11 + x20 + noise (classification: its sign).
fn rows(classification: bool) -> (Vec<Vec<f64>>, Vec<f64>) {
    let mut rng = StdRng::seed_from_u64(17);
    let x: Vec<Vec<f64>> = (0..N)
        .map(|_| {
            (0..P)
                .map(|j| {
                    if j == CONSTANT {
                        4.0
                    } else {
                        j as f64 + (1.0 + j as f64 / 10.0) * rng.sample::<f64, _>(StandardNormal)
                    }
                })
                .collect()
        })
        .collect();
    let y = x
        .iter()
        .map(|r| {
            let t = 2.0 * (r[3] - 3.0) - 1.5 * (r[11] - 11.0)
                + (r[20] - 20.0)
                + 0.1 * rng.sample::<f64, _>(StandardNormal);
            if classification {
                if t > 0.0 { 1.0 } else { -1.0 }
            } else {
                t + 10.0
            }
        })
        .collect();
    (x, y)
}

/// CSV with the target in the middle, named "y".
fn write_csv(path: &Path, x: &[Vec<f64>], y: &[f64]) {
    let mut s = String::new();
    let names: Vec<String> = (0..P).map(|j| format!("f{j}")).collect();
    s += &names[..15].join(",");
    s += ",y,";
    s += &names[15..].join(",");
    s += "\n";
    for (r, t) in x.iter().zip(y) {
        let cells: Vec<String> = r.iter().map(|v| v.to_string()).collect();
        s += &format!("{},{t},{}\n", cells[..15].join(","), cells[15..].join(","));
    }
    std::fs::write(path, s).unwrap();
}

/// NPY (float64, C order) with the target as the last column.
fn write_npy(path: &Path, x: &[Vec<f64>], y: &[f64]) {
    use npyz::WriterBuilder;
    let file = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    let mut w = npyz::WriteOptions::new()
        .default_dtype()
        .shape(&[N as u64, P as u64 + 1])
        .writer(file)
        .begin_nd()
        .unwrap();
    for (r, t) in x.iter().zip(y) {
        w.extend(r.iter().copied().chain([*t])).unwrap();
    }
    w.finish().unwrap();
}

fn ravel(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_ravel"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

fn model(args: &[&str]) -> Model {
    let (ok, out, err) = ravel(args);
    assert!(ok, "ravel {args:?} failed: {err}");
    serde_json::from_str(out.trim()).unwrap_or_else(|e| panic!("not a model ({e}): {out}"))
}

fn names(m: &Model) -> Vec<&str> {
    let mut v: Vec<&str> = m.coefficients.iter().map(|c| c.feature.as_str()).collect();
    v.sort_unstable();
    v
}

#[test]
fn select_finds_the_true_features_of_a_csv_with_os_and_asy_os() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("data.csv");
    let (x, y) = rows(false);
    write_csv(&path, &x, &y);
    let file = path.to_str().unwrap();

    let m = model(&[
        "select", file, "--target", "y", "--s", "3", "--passes", "3", "--refit",
    ]);
    assert_eq!(m.method, "os");
    assert_eq!(names(&m), ["f11", "f20", "f3"]);
    // Indices are those of the features (the target column is not a feature).
    let idx: Vec<usize> = m.coefficients.iter().map(|c| c.index).collect();
    assert_eq!(idx, [3, 11, 20]);
    // The least-squares refit recovers the coefficients and intercept in original units.
    let want = [2.0, -1.5, 1.0];
    for (c, w) in m.coefficients.iter().zip(want) {
        assert!(
            (c.value - w).abs() < 0.03,
            "{}: {} vs {w}",
            c.feature,
            c.value
        );
    }
    let b0 = 10.0 - 2.0 * 3.0 + 1.5 * 11.0 - 20.0;
    assert!(
        (m.intercept - b0).abs() < 0.5,
        "intercept {} vs {b0}",
        m.intercept
    );
    let d = &m.diagnostics;
    assert_eq!(
        (d.method.name(), d.iterations, d.requested_k, d.k_exact),
        ("os", 3, Some(3), Some(true))
    );
    assert!(d.refit && d.r2 > 0.99 && d.train_mse < 0.02, "{d:?}");
    assert_eq!(d.excluded_constant, [CONSTANT]);
    assert!(d.elapsed_ms > 0.0);
    assert!(
        d.notes
            .iter()
            .any(|n| n.contains("loss at the end of each pass")),
        "{:?}",
        d.notes
    );

    // Two workers keep 2 + 2 of s = 4, drawing features from one pool: the three true
    // features are selected whichever worker takes them.
    let m = model(&[
        "select",
        file,
        "--target",
        "y",
        "--s",
        "4",
        "--workers",
        "2",
    ]);
    assert_eq!(m.method, "asy-os");
    let got = names(&m);
    assert_eq!(got.len(), 4);
    for f in ["f3", "f11", "f20"] {
        assert!(got.contains(&f), "{f} not selected: {got:?}");
    }
    // The default number of passes.
    assert_eq!(m.diagnostics.iterations, 3);
    assert_eq!(m.diagnostics.excluded_constant, [CONSTANT]);
    assert!(
        m.diagnostics.notes.iter().any(|n| n.contains("staleness")),
        "{:?}",
        m.diagnostics.notes
    );
}

#[test]
fn select_reads_npy_and_classifies_with_the_squared_hinge() {
    let dir = tempfile::tempdir().unwrap();
    let (x, y) = rows(false);
    let npy = dir.path().join("data.npy");
    write_npy(&npy, &x, &y);
    let m = model(&["select", npy.to_str().unwrap(), "--s", "3"]);
    let idx: Vec<usize> = m.coefficients.iter().map(|c| c.index).collect();
    assert_eq!(idx, [3, 11, 20]);
    assert_eq!(names(&m), ["11", "20", "3"]);

    let (x, y) = rows(true);
    let csv = dir.path().join("labels.csv");
    write_csv(&csv, &x, &y);
    let m = model(&[
        "select",
        csv.to_str().unwrap(),
        "--target",
        "y",
        "--s",
        "3",
        "--loss",
        "squared-hinge",
        "--refit",
    ]);
    assert_eq!(names(&m), ["f11", "f20", "f3"]);
    let rate: f64 = m
        .diagnostics
        .notes
        .iter()
        .find_map(|n| {
            n.strip_prefix("training error rate ")
                .map(|v| v.parse().unwrap())
        })
        .expect("error rate note");
    // The training error rate computed here from the printed model.
    let wrong = x
        .iter()
        .zip(&y)
        .filter(|(r, t)| (m.predict(r) >= 0.0) != (**t > 0.0))
        .count();
    assert!(
        (rate - wrong as f64 / N as f64).abs() < 1e-4,
        "{rate} vs {wrong}/{N}"
    );
    assert!(rate < 0.1);
}

#[test]
fn bad_files_and_options_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let (x, mut y) = rows(false);
    let path = dir.path().join("data.csv");
    write_csv(&path, &x, &y);
    let file = path.to_str().unwrap();
    let fails = |args: &[&str], needle: &str| {
        let (ok, out, err) = ravel(args);
        assert!(!ok, "ravel {args:?} succeeded: {out}");
        assert!(
            err.contains(needle),
            "ravel {args:?}: expected '{needle}' in: {err}"
        );
        assert!(!err.contains("panicked"), "{err}");
    };
    fails(
        &["select", file, "--target", "y", "--s", "0"],
        "budget s must be at least 1",
    );
    fails(
        &[
            "select",
            file,
            "--target",
            "y",
            "--s",
            "3",
            "--workers",
            "4",
        ],
        "--workers must lie in 1..=3",
    );
    fails(
        &["select", file, "--target", "y", "--s", "3", "--passes", "0"],
        "--passes must be at least 1",
    );
    fails(
        &["select", file, "--target", "y", "--s", "3", "--eta", "-1"],
        "eta must be a finite number > 0",
    );
    fails(
        &[
            "select", file, "--target", "y", "--s", "3", "--loss", "hinge2",
        ],
        "invalid value 'hinge2'",
    );
    fails(
        &["select", file, "--target", "nope", "--s", "3"],
        "neither a header name nor a column index",
    );
    fails(
        &[
            "select", file, "--target", "y", "--s", "3", "--loss", "logistic",
        ],
        "label 0 is",
    );
    let missing = dir.path().join("missing.csv");
    fails(
        &["select", missing.to_str().unwrap(), "--s", "3"],
        "missing.csv",
    );
    // A cell that is not a number names its line.
    y[4] = f64::NAN;
    write_csv(&path, &x, &y);
    fails(&["select", file, "--target", "y", "--s", "3"], "line 6");
}
