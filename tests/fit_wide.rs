//! `ravel fit --wide` (paper 004's Frank-Wolfe Lasso path on the raw sparse columns) through
//! the real binary, on the 500 x 20,000 LIBSVM fixture of crates/ravel-core/tests/wide.rs (whose
//! path is checked there against scikit-learn's `lasso_path`): the answer's fields agree with
//! each other (the test MSE of the training file is twice the objective, the best point is
//! the densest), the statistics' refusal names --wide, and bad input or flags give one error
//! line.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("crates/ravel-core/tests/fixtures/wide_500x20000.svm")
}

fn ravel(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ravel"))
        .arg("fit")
        .args(args)
        .output()
        .expect("ravel runs")
}

fn answer(args: &[&str]) -> (Value, String) {
    let out = ravel(args);
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    assert!(out.status.success(), "ravel fit {args:?}: {stderr}");
    (
        serde_json::from_slice(&out.stdout).expect("one JSON object"),
        stderr,
    )
}

/// Fails with exactly one `error:` line containing `needle` and nothing on stdout.
fn refused(args: &[&str], needle: &str) {
    let out = ravel(args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{args:?} succeeded");
    assert!(out.stdout.is_empty(), "{args:?}: stdout {:?}", out.stdout);
    let lines: Vec<&str> = stderr.lines().collect();
    assert_eq!(lines.len(), 1, "{args:?}: {stderr}");
    assert!(lines[0].starts_with("error: "), "{stderr}");
    assert!(
        lines[0].contains(needle),
        "'{needle}' missing from: {stderr}"
    );
}

#[test]
fn the_wide_path_answers_with_consistent_points() {
    let f = fixture();
    let f = f.to_str().unwrap();
    let (a, stderr) = answer(&[
        f,
        "--wide",
        "--features",
        "20000",
        "--variant",
        "deterministic",
        "--path-points",
        "12",
        "--delta-max",
        "17.332821352437737",
        "--test",
        f,
        "--tol",
        "1e-4",
        "--gap-rule",
    ]);
    assert_eq!(
        (a["n"].as_u64(), a["p"].as_u64()),
        (Some(500), Some(20_000))
    );
    assert_eq!(a["delta_max_from"], "--delta-max");
    assert!(a["step_tol"].is_null(), "--gap-rule: the gap alone");
    let path = a["path"].as_array().unwrap();
    assert_eq!(path.len(), 12);
    let mut prev = f64::INFINITY;
    for pt in path {
        let (obj, gap) = (
            pt["objective"].as_f64().unwrap(),
            pt["gap"].as_f64().unwrap(),
        );
        assert!(pt["converged"].as_bool().unwrap(), "{pt}");
        assert!((0.0..=1e-4 * obj).contains(&gap), "{pt}");
        // The objective is half the training MSE: the "test" file is the training file.
        let mse = pt["test_mse"].as_f64().unwrap();
        assert!((mse - 2.0 * obj).abs() <= 1e-9 * mse, "{mse} vs 2 x {obj}");
        // A larger ball never fits worse (up to the tolerance).
        assert!(obj <= prev * (1.0 + 1e-4), "{obj} after {prev}");
        prev = obj;
        let coefs = pt["coefficients"].as_object().unwrap();
        assert_eq!(coefs.len() as u64, pt["nonzeros"].as_u64().unwrap());
        let l1: f64 = coefs.values().map(|v| v.as_f64().unwrap().abs()).sum();
        assert!(l1 <= pt["delta"].as_f64().unwrap() * (1.0 + 1e-9));
        // Features are named by the file's index (from 1).
        assert!(
            coefs
                .keys()
                .all(|k| (1..=20_000).contains(&k.parse::<u64>().unwrap()))
        );
        assert!(pt["dot_products"].as_u64().unwrap() >= 20_000);
    }
    let best = &a["best"];
    assert_eq!(best["index"], 11, "{best}");
    assert_eq!(best["test_mse"], path[11]["test_mse"]);
    assert!(
        stderr.contains("test MSE") && stderr.contains("<- best"),
        "{stderr}"
    );
    assert!(
        stderr.contains("n = 500, p = 20000, 24468 nonzeros"),
        "{stderr}"
    );
    assert!(a["empty_columns"].as_u64().unwrap() > 0);
    assert!(
        a["notes"][0].as_str().unwrap().contains("have no nonzero"),
        "{a}"
    );

    // Randomized (the default, 1 % of the used columns) with delta_max found by the solver
    // itself: the same problem, so its densest point's objective is that of the reference's
    // smallest lambda within 1 % (sklearn's 0.0324218 at delta 17.33).
    let (r, _) = answer(&[f, "--wide", "--path-points", "5", "--seed", "3"]);
    assert_eq!(r["variant"], "randomized");
    // Issue 59: paper 004's step rule (1e-3) is the default, not the gap rule alone.
    assert_eq!(r["step_tol"], 1e-3, "{r}");
    // 1 % of the used columns (the draw is among them), not of p: 9,351 of the 20,000.
    let used = r["p"].as_u64().unwrap() - r["empty_columns"].as_u64().unwrap();
    assert_eq!((used, r["kappa"].as_u64()), (9_351, Some(94)), "{r}");
    assert_eq!(r["delta_max_from"], "search");
    let dmax = r["delta_max"].as_f64().unwrap();
    assert!((12.0..25.0).contains(&dmax), "{dmax}");
    assert!(r["best"].is_null());
}

#[test]
fn the_statistics_refusal_names_wide_and_bad_input_is_refused() {
    let f = fixture();
    let f = f.to_str().unwrap();
    // p = 20,000: the statistics would take 3.2 GB.
    refused(
        &[
            f,
            "--method",
            "lasso",
            "--lambda",
            "0.1",
            "--max-memory",
            "1GiB",
        ],
        "ravel fit --wide",
    );
    refused(&[f, "--wide", "--k", "5"], "--k does not apply to --wide");
    let out = ravel(&[f, "--wide", "--gap-rule", "--step-tol", "1e-3"]);
    assert!(
        !out.status.success(),
        "--gap-rule with --step-tol was accepted"
    );
    refused(
        &[f, "--wide", "--method", "lasso"],
        "--wide fits the Frank-Wolfe Lasso path (--method fw-lasso), not --method lasso",
    );
    refused(
        &[f, "--wide", "--features", "100"],
        "above the declared number of features, 100",
    );
    refused(
        &[f, "--wide", "--max-memory", "200KB"],
        "too large for the memory limit",
    );
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.svm");
    std::fs::write(&bad, "1 1:1 5:2\n2 4:1 3:1\n").unwrap();
    refused(
        &[bad.to_str().unwrap(), "--wide"],
        "line 2: feature indices must increase along a line: 3 after 4",
    );
    std::fs::write(&bad, "1 1:1 5:2\n2 3:NaN\n").unwrap();
    refused(
        &[bad.to_str().unwrap(), "--wide"],
        "line 2: feature 3: NaN is not finite",
    );
    // The test file is read row by row against the path, never as a matrix: its rows are
    // still checked, before the path runs.
    refused(
        &[f, "--wide", "--test", bad.to_str().unwrap()],
        "line 2: feature 3: NaN is not finite",
    );
}
