//! Issue 11 through the `ravel fit` and `ravel select` binaries, on files: large feature
//! offsets (item 3), OLSth at n = p (item 1), FSA's defaults at n < p (item 2), k-models
//! refitted by default (item 4), and duplicate columns (item 6). The library-level checks, against brute force on the raw rows,
//! are in crates/ravel-core/tests (offsets.rs, solvers.rs); here the same questions are asked of
//! what a user runs.

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

/// A 2-D float64 NPY file, rows of x with y last.
fn write_npy(path: &Path, x: &[f64], y: &[f64], p: usize) {
    let mut header = format!(
        "{{'descr': '<f8', 'fortran_order': False, 'shape': ({}, {}), }}",
        y.len(),
        p + 1
    );
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend((header.len() as u16).to_le_bytes());
    bytes.extend(header.as_bytes());
    for (row, yi) in x.chunks_exact(p).zip(y) {
        for v in row.iter().chain(std::iter::once(yi)) {
            bytes.extend(v.to_le_bytes());
        }
    }
    std::fs::write(path, bytes).unwrap();
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
    let requests: [&[&str]; 5] = [
        &["--method", "ols"],
        &["--method", "lasso", "--k", "5"],
        &["--method", "lasso", "--k", "5", "--no-refit"],
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

/// Paper 003's Table 2 design (p = 1000, k* = 100, pairwise correlation 0.5, beta = 1) at n
/// rows, as an NPY file; returns it with the true support.
fn table2_file(dir: &Path, n: usize, seed: u64) -> (std::path::PathBuf, Vec<usize>) {
    let spec: SyntheticSpec = format!("p=1000,k=100,n={n},seed={seed}").parse().unwrap();
    let (mut x, mut y) = (vec![], vec![]);
    spec.rows().fill(n, &mut x, &mut y);
    let file = dir.join(format!("table2-{n}-{seed}.npy"));
    write_npy(&file, &x, &y, 1000);
    (file, spec.support())
}

/// The share of the true features among the model's nonzeros.
fn detected(m: &Model, truth: &[usize]) -> f64 {
    m.coefficients
        .iter()
        .filter(|c| truth.binary_search(&c.index).is_ok())
        .count() as f64
        / truth.len() as f64
}

/// Item 1: paper 003's Table 2 design at n = p = 1000 (the centred covariance has rank 999).
/// OLSth finds the singular system, solves it with a data-scaled ridge and says so, in the notes
/// and in `diagnostics.singular_ridge`; the paper's own remedy, a ridge first fit, goes through
/// the CLI as through the API (`--k` with `--lambda`). Paper: 94.53% detection.
#[test]
fn olsth_at_n_equal_p_through_ravel_fit() {
    let dir = tempfile::tempdir().unwrap();
    let (file, truth) = table2_file(dir.path(), 1000, 3);
    let plain = model("fit", &file, &["--method", "olsth", "--k", "100"]);
    assert_eq!(plain.k, 100);
    let ridge = plain
        .diagnostics
        .singular_ridge
        .expect("the singular system is reported");
    assert!(ridge > 0.0 && ridge.is_finite());
    assert!(
        plain
            .diagnostics
            .notes
            .iter()
            .any(|n| n.contains("singular")),
        "{:?}",
        plain.diagnostics.notes
    );
    assert!(
        detected(&plain, &truth) >= 0.9,
        "detection {}",
        detected(&plain, &truth)
    );
    let remedy = model(
        "fit",
        &file,
        &["--method", "olsth", "--k", "100", "--lambda", "1e-3"],
    );
    assert_eq!(remedy.diagnostics.lambda, Some(1e-3));
    assert!(
        detected(&remedy, &truth) >= 0.9,
        "detection {}",
        detected(&remedy, &truth)
    );
}

/// Item 2: FSA with its defaults at n < p on the Table 2 design, 3 seeds (scripts/table2.py
/// runs 5 seeds and every n). Paper: 71.09% at n = 300, 94.05% at n = 500; the earlier defaults
/// (T = 300, mu = 100) gave 58 and 85 in scripts/table2.py. The mean over the seeds must be within 3 points of
/// the paper or above it.
#[test]
fn fsa_defaults_meet_the_paper_at_n_below_p() {
    let dir = tempfile::tempdir().unwrap();
    for (n, paper) in [(300, 0.7109), (500, 0.9405)] {
        let mut rates = vec![];
        for seed in 1..=3 {
            let (file, truth) = table2_file(dir.path(), n, seed);
            let m = model("fit", &file, &["--method", "fsa", "--k", "100"]);
            assert_eq!(m.diagnostics.nonzeros, 100);
            rates.push(detected(&m, &truth));
        }
        let mean = rates.iter().sum::<f64>() / rates.len() as f64;
        assert!(
            mean >= paper - 0.03,
            "n = {n}: detection {rates:?}, paper {paper}"
        );
    }
}

/// Item 4: `--k` with a penalized method refits OLS on the support by default (paper 003
/// Alg. 3); `--no-refit` returns the penalized estimate; both flags at once are refused.
#[test]
fn k_models_refit_by_default_through_ravel_fit() {
    let dir = tempfile::tempdir().unwrap();
    let p = 20;
    let (x, y) = quantized(300, 5);
    let file = dir.path().join("rows.csv");
    write_csv(&file, &x, &y, p);
    let refit = model("fit", &file, &["--method", "lasso", "--k", "5"]);
    let pen = model(
        "fit",
        &file,
        &["--method", "lasso", "--k", "5", "--no-refit"],
    );
    assert!(refit.diagnostics.refit && !pen.diagnostics.refit);
    let support = |m: &Model| m.coefficients.iter().map(|c| c.index).collect::<Vec<_>>();
    assert_eq!(support(&refit), support(&pen));
    // Shrinkage: the penalized coefficients are smaller than their refit.
    let (a, b) = (refit.dense(p), pen.dense(p));
    let (l1a, l1b): (f64, f64) = (
        a.iter().map(|v| v.abs()).sum(),
        b.iter().map(|v| v.abs()).sum(),
    );
    assert!(l1b < l1a, "penalized {l1b} vs refit {l1a}");
    assert!(refit.diagnostics.train_mse < pen.diagnostics.train_mse);
    // The lambda request is not refitted unless asked.
    let at = model("fit", &file, &["--method", "lasso", "--lambda", "0.1"]);
    assert!(!at.diagnostics.refit);
    let out = run(
        "fit",
        &[
            file.to_str().unwrap(),
            "--method",
            "lasso",
            "--k",
            "5",
            "--refit",
            "--no-refit",
        ],
    );
    assert!(!out.status.success());
}

/// Item 6: the same column twice. Lasso at k = 3 keeps 3 distinct features, none of them the
/// copy, and says which column was left out as whose duplicate.
#[test]
fn duplicate_columns_through_ravel_fit() {
    let dir = tempfile::tempdir().unwrap();
    let p = 20;
    let (mut x, y) = quantized(300, 6);
    // Column 11 is column 0 (a true feature) again.
    for row in x.chunks_exact_mut(p) {
        row[11] = row[0];
    }
    let file = dir.path().join("dup.csv");
    write_csv(&file, &x, &y, p);
    for args in [
        &["--method", "lasso", "--k", "3", "--no-refit"][..],
        &["--method", "lasso", "--k", "3"],
        &["--method", "olsth", "--k", "3"],
    ] {
        let m = model("fit", &file, args);
        assert_eq!((m.k, m.diagnostics.k_exact), (3, Some(true)), "{args:?}");
        let dups: Vec<(usize, usize)> = m
            .diagnostics
            .excluded_duplicate
            .iter()
            .map(|d| (d.index, d.of))
            .collect();
        assert_eq!(dups, [(11, 0)], "{args:?}");
        assert!(m.coefficients.iter().all(|c| c.index != 11), "{args:?}");
        let big = m
            .coefficients
            .iter()
            .fold(0.0f64, |a, c| a.max(c.value.abs()));
        assert!(
            m.coefficients.iter().all(|c| c.value.abs() > 1e-6 * big),
            "{args:?}: {:?}",
            m.coefficients
        );
    }
}

/// Item 5: elastic net standardizes y as glmnet does, so its selection does not depend on y's
/// units: y / 100 gives the same support and coefficients / 100, at k and at lambda / 100.
/// (Before, the l2 term acted on raw y and the lambda pair below selected different models.)
/// The scikit-learn fixtures (tests/reference_sklearn.rs) check the objective itself.
#[test]
fn elastic_net_selection_does_not_depend_on_y_units() {
    let dir = tempfile::tempdir().unwrap();
    let p = 20;
    let (x, y) = quantized(300, 8);
    let small: Vec<f64> = y.iter().map(|v| v * 0.01).collect();
    let (a, b) = (dir.path().join("y.npy"), dir.path().join("y-small.npy"));
    write_npy(&a, &x, &y, p);
    write_npy(&b, &x, &small, p);
    let support = |m: &Model| m.coefficients.iter().map(|c| c.index).collect::<Vec<_>>();
    for (args_a, args_b) in [
        (vec!["--k", "5"], vec!["--k", "5"]),
        (
            vec!["--k", "8", "--no-refit"],
            vec!["--k", "8", "--no-refit"],
        ),
        (vec!["--lambda", "0.5"], vec!["--lambda", "0.005"]),
        (
            vec!["--lambda", "0.2", "--l1-ratio", "0.2"],
            vec!["--lambda", "0.002", "--l1-ratio", "0.2"],
        ),
    ] {
        let with = |file: &Path, extra: &[&str]| {
            let mut args = vec!["--method", "elastic-net"];
            args.extend_from_slice(extra);
            model("fit", file, &args)
        };
        let (ma, mb) = (with(&a, &args_a), with(&b, &args_b));
        assert!(!ma.coefficients.is_empty(), "{args_a:?}");
        assert_eq!(support(&ma), support(&mb), "{args_a:?}");
        let scaled: Vec<f64> = ma.dense(p).iter().map(|v| v * 0.01).collect();
        let err = worst(&scaled, &mb.dense(p));
        assert!(err < 1e-6, "{args_a:?}: coefficients differ by {err:e}");
    }
}

/// Items 5 and 9: a model that explains almost none of y's variance says so. Paper 003's design
/// (p = 20, k = 5) with Cauchy noise of scale 10 (least squares silently fails under it) and a
/// target unrelated to x are warned about; the same design with normal noise is not.
#[test]
fn near_null_models_are_warned_about() {
    let dir = tempfile::tempdir().unwrap();
    let p = 20;
    let spec: SyntheticSpec = "p=20,k=5,n=2000,noise=0,seed=9".parse().unwrap();
    let (mut x, mut clean) = (vec![], vec![]);
    spec.rows().fill(2000, &mut x, &mut clean);
    // Uniforms from a fixed 64-bit LCG; Cauchy by inversion.
    let mut state = 0x2545_F491_4F6C_DD1Du64;
    let mut uniform = || {
        state = state
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        ((state >> 11) as f64 + 0.5) / (1u64 << 53) as f64
    };
    let cauchy: Vec<f64> = clean
        .iter()
        .map(|v| v + 10.0 * (std::f64::consts::PI * (uniform() - 0.5)).tan())
        .collect();
    let normal = quantized(2000, 9);
    let unrelated: Vec<f64> = (0..2000).map(|_| uniform() - 0.5).collect();
    let warned = |m: &Model| m.diagnostics.notes.iter().any(|n| n.starts_with("R^2 = "));
    for (name, x, y, want) in [
        ("cauchy", &x, &cauchy, true),
        ("unrelated", &x, &unrelated, true),
        ("normal", &normal.0, &normal.1, false),
    ] {
        let file = dir.path().join(format!("{name}.npy"));
        write_npy(&file, x, y, p);
        for method in ["ols", "lasso", "elastic-net"] {
            let mut args = vec!["--method", method];
            if method != "ols" {
                args.extend(["--k", "5"]);
            }
            let m = model("fit", &file, &args);
            assert_eq!(
                warned(&m),
                want,
                "{name} {method}: r2 {} notes {:?}",
                m.diagnostics.r2,
                m.diagnostics.notes
            );
            assert_eq!(m.diagnostics.r2 < ravel_core::solve::LOW_R2, want);
        }
    }
}
