//! Choosing k (issue 17) through the real `ravel fit` binary: the information criteria of
//! every path point against a brute force from the raw rows, exact K-fold cross-validation
//! against scikit-learn's Lasso on the same folds, and standard errors against statsmodels'
//! OLS (`scripts/make_selection_fixtures.py` writes the references and documents the mapping).

use crate::common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/selection")
        .join(name)
}

fn expected() -> Value {
    let text = std::fs::read_to_string(fixture("expected.json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn fit_json(args: &[&str]) -> Value {
    let mut all = vec!["fit"];
    all.extend_from_slice(args);
    serde_json::from_str(&ravel(&all)).unwrap()
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}

/// Rows of a CSV written by `write_csv`.
struct Rows {
    p: usize,
    x: Vec<f64>,
    y: Vec<f64>,
}

impl Rows {
    fn n(&self) -> usize {
        self.y.len()
    }
    fn row(&self, i: usize) -> &[f64] {
        &self.x[i * self.p..(i + 1) * self.p]
    }
    /// Weighted mean of squared residuals of a model JSON (weights `w`, one per row).
    fn mse(&self, model: &Value, w: &[f64]) -> f64 {
        let b0 = f(&model["intercept"]);
        let mut num = 0.0;
        for (i, (wi, yi)) in w.iter().zip(&self.y).enumerate() {
            let mut fitted = b0;
            for c in model["coefficients"].as_array().unwrap() {
                fitted += f(&c["value"]) * self.row(i)[c["index"].as_u64().unwrap() as usize];
            }
            num += wi * (yi - fitted).powi(2);
        }
        num / w.iter().sum::<f64>()
    }
    /// The elastic net's degrees of freedom tr(Z_A (Z_A'Z_A + n mu I)^-1 Z_A') on the
    /// centred, standardized columns of the support, by Gauss-Jordan on the rows' own
    /// cross-products (not the service's eigenvalues).
    fn ridge_df(&self, support: &[usize], mu: f64) -> f64 {
        let n = self.n() as f64;
        let s = support.len();
        let z: Vec<Vec<f64>> = support
            .iter()
            .map(|&j| {
                let col: Vec<f64> = (0..self.n()).map(|i| self.row(i)[j]).collect();
                let m = col.iter().sum::<f64>() / n;
                let sd = (col.iter().map(|v| (v - m).powi(2)).sum::<f64>() / n).sqrt();
                col.iter().map(|v| (v - m) / sd).collect()
            })
            .collect();
        let g: Vec<Vec<f64>> = (0..s)
            .map(|a| {
                (0..s)
                    .map(|b| z[a].iter().zip(&z[b]).map(|(u, v)| u * v).sum())
                    .collect()
            })
            .collect();
        // Solve (G + n mu I) X = G; df = tr(X).
        let mut a: Vec<Vec<f64>> = (0..s)
            .map(|i| {
                let mut r = g[i].clone();
                r[i] += n * mu;
                r.extend_from_slice(&g[i]);
                r
            })
            .collect();
        for c in 0..s {
            let piv = (c..s)
                .max_by(|&i, &j| a[i][c].abs().total_cmp(&a[j][c].abs()))
                .unwrap();
            a.swap(c, piv);
            let d = a[c][c];
            for v in a[c].iter_mut() {
                *v /= d;
            }
            for r in 0..s {
                if r != c {
                    let fac = a[r][c];
                    let pivot_row = a[c].clone();
                    for (v, pv) in a[r].iter_mut().zip(&pivot_row) {
                        *v -= fac * pv;
                    }
                }
            }
        }
        (0..s).map(|i| a[i][s + i]).sum()
    }
}

fn ln_choose(p: usize, s: usize) -> f64 {
    (1..=s).map(|i| ((p - s + i) as f64 / i as f64).ln()).sum()
}

fn data(dir: &Path, p: usize, k: usize, n: usize, seed: u64) -> (PathBuf, Rows) {
    let (x, y) = synthetic(p, k, n, seed);
    let file = dir.join(format!("rows_{p}_{n}_{seed}.csv"));
    write_csv(&file, &names(p), &x, &y);
    // The CSV holds round-trip text: the rows ravel reads are these very numbers.
    (file, Rows { p, x, y })
}

/// Every point's RSS, df, AIC, BIC and EBIC equal the brute force from the rows, to 1e-9, and
/// the selection is the brute force's argmin; the chosen model (without --path) is that point.
fn check_path(rows: &Rows, file: &Path, args: &[&str], criterion: &str, weights: &[f64]) {
    let fstr = file.to_str().unwrap();
    let mut all = vec![fstr, "--select", criterion];
    all.extend_from_slice(args);
    let mut with_path = all.clone();
    with_path.push("--path");
    let path = fit_json(&with_path);
    let what = format!("{args:?} {criterion}");
    let points = path["points"].as_array().unwrap();
    assert!(points.len() >= 5, "{what}: {} points", points.len());
    let p = rows.p;
    // Plain averages: n; a forgetting schedule: the effective sample size the service states.
    let n = f(&points[0]["diagnostics"]["criteria"]["n_eff"]);
    let gamma = (1.0 - n.ln() / (2.0 * (p as f64).ln())).clamp(0.0, 1.0);
    let mut values = Vec::new();
    for (i, m) in points.iter().enumerate() {
        let c = &m["diagnostics"]["criteria"];
        let s = m["k"].as_u64().unwrap() as usize;
        let mse = rows.mse(m, weights);
        let df = if args.contains(&"elastic-net") && args.contains(&"--no-refit") && s > 0 {
            let support: Vec<usize> = m["coefficients"]
                .as_array()
                .unwrap()
                .iter()
                .map(|c| c["index"].as_u64().unwrap() as usize)
                .collect();
            let l1 = 0.5;
            rows.ridge_df(&support, f(&m["lambda"]) * (1.0 - l1))
        } else {
            s as f64
        };
        let rss = n * mse;
        let aic = n * mse.ln() + 2.0 * df;
        let bic = n * mse.ln() + df * n.ln();
        let ebic = bic + 2.0 * gamma * ln_choose(p, s);
        for (name, want) in [
            ("df", df),
            ("rss", rss),
            ("aic", aic),
            ("bic", bic),
            ("ebic", ebic),
            ("ebic_gamma", gamma),
        ] {
            let got = f(&c[name]);
            // Relative to the size of the terms the criterion adds (n ln(RSS/n) and the
            // penalty), not to a sum that may cross 0.
            let scale = want.abs().max(n * mse.ln().abs()).max(1.0);
            assert!(
                (got - want).abs() <= 1e-9 * scale,
                "{what}: point {i} {name} {got} vs brute force {want}"
            );
        }
        values.push(match criterion {
            "aic" => aic,
            "bic" => bic,
            _ => ebic,
        });
    }
    let best = (0..values.len())
        .min_by(|&a, &b| values[a].total_cmp(&values[b]))
        .unwrap();
    let sel = &path["selection"];
    assert_eq!(sel["criterion"], criterion, "{what}");
    assert_eq!(
        sel["chosen"].as_u64().unwrap() as usize,
        best,
        "{what}: chosen"
    );
    for (c, v) in sel["curve"].as_array().unwrap().iter().zip(&values) {
        assert!(
            (f(&c["value"]) - v).abs() <= 1e-9 * v.abs().max(n),
            "{what}: curve"
        );
    }
    // The model request returns that point with the curve.
    let model = fit_json(&all);
    assert_same_model(&model, &points[best], 1e-12, &what);
    assert_eq!(model["selection"]["chosen"], sel["chosen"], "{what}");
}

#[test]
fn criteria_along_every_path_equal_a_brute_force_from_the_rows() {
    let dir = tempfile::tempdir().unwrap();
    let (file, rows) = data(dir.path(), 40, 6, 300, 7);
    let ones = vec![1.0; rows.n()];
    let pp = ["--path-points", "25"];
    for (args, criterion) in [
        (vec!["--method", "lasso", "--no-refit"], "ebic"),
        // select refits the penalized paths by default (issue 34): --refit is the default.
        (vec!["--method", "lasso"], "bic"),
        (vec!["--method", "lasso", "--refit"], "bic"),
        (
            vec!["--method", "elastic-net", "--l1-ratio", "0.5", "--no-refit"],
            "aic",
        ),
        (vec!["--method", "elastic-net", "--l1-ratio", "0.5"], "aic"),
        (vec!["--method", "mcp"], "bic"),
        (vec!["--method", "scad"], "ebic"),
        (vec!["--method", "fw-lasso"], "aic"),
        (vec!["--method", "olsth", "--k", "12"], "ebic"),
        (vec!["--method", "fsa", "--k", "10"], "bic"),
        (vec!["--method", "iht", "--k", "10"], "aic"),
    ] {
        let mut a = args.clone();
        if !args.contains(&"--k") {
            a.extend_from_slice(&pp);
        }
        check_path(&rows, &file, &a, criterion, &ones);
    }
    // p >> n: EBIC's gamma is positive and the brute force still agrees.
    let (file, rows) = data(dir.path(), 200, 5, 120, 8);
    check_path(
        &rows,
        &file,
        &["--method", "lasso", "--path-points", "25"],
        "ebic",
        &vec![1.0; rows.n()],
    );
}

/// `--select` without `--method` (issue 34): OLSth's k-path to min(p, 300, n / 2), the same model
/// as asking for it by name, with a first note saying what was chosen and why; `--k` bounds
/// the path; CV works on it too. A k-path method named without `--k` (issue 45) takes the same
/// default.
#[test]
fn select_without_a_method_chooses_along_olsths_k_path() {
    let dir = tempfile::tempdir().unwrap();
    let (file, _) = data(dir.path(), 40, 6, 300, 7);
    let fstr = file.to_str().unwrap();
    let model = fit_json(&[fstr, "--select", "ebic"]);
    assert_eq!(model["method"], "olsth");
    let notes = model["selection"]["notes"].as_array().unwrap();
    let first = notes[0].as_str().unwrap();
    assert!(
        first.starts_with("no method named: ebic over OLSth's k-path k = 1..40"),
        "{first}"
    );
    let named = fit_json(&[fstr, "--method", "olsth", "--k", "40", "--select", "ebic"]);
    assert_same_model(&model, &named, 0.0, "default k-path");
    assert_eq!(model["selection"]["curve"], named["selection"]["curve"]);
    // Issue 45: a method whose path runs over k, named without --k, takes the same default
    // largest k (it failed with "missing field `--k`").
    for method in ["olsth", "fsa", "iht", "htp"] {
        let unbounded = fit_json(&[fstr, "--method", method, "--select", "ebic"]);
        let bounded = fit_json(&[fstr, "--method", method, "--k", "40", "--select", "ebic"]);
        assert_same_model(&unbounded, &bounded, 0.0, method);
        assert_eq!(
            unbounded["selection"]["curve"], bounded["selection"]["curve"],
            "{method}"
        );
        let note = unbounded["selection"]["notes"][0].as_str().unwrap();
        assert!(
            note.starts_with(&format!(
                "ebic over {method}'s k-path k = 1..40 (no --k given"
            )),
            "{method}: {note}"
        );
    }
    let path = fit_json(&[fstr, "--select", "bic", "--k", "12", "--path"]);
    assert_eq!(path["points"].as_array().unwrap().len(), 12);
    assert!(
        path["selection"]["notes"][0]
            .as_str()
            .unwrap()
            .contains("k = 1..12")
    );
    let cv = fit_json(&[fstr, "--select", "cv_1se", "--folds", "5"]);
    assert_eq!(cv["method"], "olsth");
    assert_eq!(cv["selection"]["curve"].as_array().unwrap().len(), 40);
    assert!(
        cv["selection"]["notes"][0]
            .as_str()
            .unwrap()
            .contains("cv_1se")
    );
}

/// A forgetting schedule: the criteria use the effective sample size and the weighted RSS of
/// the schedule's own weights (row i of n weighs alpha (1 - alpha)^(n - 1 - i)).
#[test]
fn criteria_under_forgetting_use_the_effective_sample_size() {
    let dir = tempfile::tempdir().unwrap();
    let (file, rows) = data(dir.path(), 20, 4, 600, 9);
    let alpha: f64 = 0.01;
    let n = rows.n();
    let w: Vec<f64> = (0..n)
        .map(|i| alpha * (1.0 - alpha).powi((n - 1 - i) as i32))
        .collect();
    let total: f64 = w.iter().sum();
    let ess = ((1.0 - alpha) * total + alpha) / alpha;
    let path = fit_json(&[
        file.to_str().unwrap(),
        "--method",
        "lasso",
        "--alpha",
        "fixed:0.01",
        "--path",
        "--select",
        "bic",
    ]);
    let got = f(&path["points"][3]["diagnostics"]["criteria"]["n_eff"]);
    assert!(close(got, ess.min(n as f64), 1e-12), "n_eff {got} vs {ess}");
    assert!(got < 110.0, "n_eff {got}: about 1/alpha");
    check_path(
        &rows,
        &file,
        &["--method", "lasso", "--alpha", "fixed:0.01"],
        "bic",
        &w,
    );
}

/// K-fold CV of the Lasso on the fixture's folds equals scikit-learn's loop of Lasso fits
/// (same lambdas, same per-fold standardization) at every point to 1e-6, with the same
/// choice for the minimum and the one-standard-error rule.
#[test]
fn cross_validation_equals_scikit_learn_on_the_same_folds() {
    let e = expected();
    let cv = &e["cv"];
    let file = fixture(cv["file"].as_str().unwrap());
    let pts = cv["path_points"].to_string();
    let ratio = f(&cv["lambda_min_ratio"]).to_string();
    let folds = cv["folds"].to_string();
    for (criterion, want_key) in [("cv", "chosen_min"), ("cv_1se", "chosen_1se")] {
        let args = [
            file.to_str().unwrap(),
            "--method",
            "lasso",
            "--no-refit",
            "--select",
            criterion,
            "--folds",
            &folds,
            "--path-points",
            &pts,
            "--lambda-min-ratio",
            &ratio,
        ];
        let mut with_path = args.to_vec();
        with_path.push("--path");
        let path = fit_json(&with_path);
        let sel = &path["selection"];
        assert_eq!(sel["fold_sizes"], cv["fold_sizes"], "fold assignment");
        let curve = sel["curve"].as_array().unwrap();
        assert_eq!(curve.len(), cv["lambdas"].as_array().unwrap().len());
        for (i, c) in curve.iter().enumerate() {
            let lambda = f(&cv["lambdas"][i]);
            assert!(close(f(&c["lambda"]), lambda, 1e-12), "lambda {i}");
            let (m, se) = (f(&cv["cv_mean"][i]), f(&cv["cv_se"][i]));
            assert!(
                close(f(&c["value"]), m, 1e-6),
                "{criterion} point {i}: mean {} vs {m}",
                c["value"]
            );
            assert!(
                close(f(&c["se"].clone()), se, 1e-6),
                "{criterion} point {i}: se {} vs {se}",
                c["se"]
            );
            for j in 0..5 {
                let (got, want) = (f(&c["fold_errors"][j]), f(&cv["fold_errors"][i][j]));
                assert!(
                    close(got, want, 1e-6),
                    "point {i} fold {j}: {got} vs {want}"
                );
            }
        }
        let want = cv[want_key].as_u64().unwrap();
        assert_eq!(sel["chosen"].as_u64().unwrap(), want, "{criterion}");
        if criterion == "cv_1se" {
            assert_eq!(sel["minimum"], cv["chosen_min"]);
            assert!(
                want < cv["chosen_min"].as_u64().unwrap(),
                "the 1-SE rule picks a sparser model here"
            );
        }
        // Without --path: the full-data model at the chosen lambda, with the curve.
        let model = fit_json(&args);
        assert_same_model(&model, &path["points"][want as usize], 1e-12, criterion);
        assert_eq!(model["selection"]["chosen"].as_u64().unwrap(), want);
    }
}

fn check_inference(got: &Value, want: &Value, what: &str) {
    let mut est = vec![got["intercept"].clone()];
    est.extend(got["coefficients"].as_array().unwrap().iter().cloned());
    assert_eq!(
        est.len(),
        want["se"].as_array().unwrap().len(),
        "{what}: size"
    );
    for (i, e) in est.iter().enumerate() {
        for (key, wkey) in [
            ("value", "values"),
            ("se", "se"),
            ("t", "t"),
            ("p_value", "p"),
        ] {
            let (g, w) = (f(&e[key]), f(&want[wkey][i]));
            assert!(close(g, w, 1e-8), "{what}: estimate {i} {key} {g} vs {w}");
        }
    }
    assert!(
        close(f(&got["sigma2"]), f(&want["sigma2"]), 1e-8),
        "{what}: sigma2"
    );
    assert!(
        close(f(&got["df_resid"]), f(&want["df_resid"]), 1e-12),
        "{what}: df_resid"
    );
}

/// Standard errors, t and p-values of OLS and of OLSth's refit equal statsmodels' OLS on the
/// same rows, and ridge's equal numpy's sandwich from the rows, to 1e-8.
#[test]
fn standard_errors_equal_statsmodels() {
    let e = expected();
    let inf = &e["inference"];
    let file = fixture(inf["file"].as_str().unwrap());
    let file = file.to_str().unwrap();
    let ols = fit_json(&[file, "--method", "ols", "--inference"]);
    check_inference(&ols["inference"], &inf["ols"], "ols");
    assert_eq!(ols["inference"]["post_selection"], false);
    let th = fit_json(&[file, "--method", "olsth", "--k", "3", "--inference"]);
    let support: Vec<Value> = th["coefficients"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["index"].clone())
        .collect();
    assert_eq!(Value::from(support), inf["olsth_k3"]["support"]);
    check_inference(&th["inference"], &inf["olsth_k3"], "olsth k = 3");
    assert_eq!(th["inference"]["post_selection"], true);
    // The refitted Lasso at k = 3 has the same support, so the same numbers.
    let lasso = fit_json(&[file, "--method", "lasso", "--k", "3", "--inference"]);
    check_inference(
        &lasso["inference"],
        &inf["olsth_k3"],
        "lasso k = 3 refitted",
    );
    let lam = f(&inf["ridge"]["lambda"]).to_string();
    let ridge = fit_json(&[file, "--method", "ridge", "--lambda", &lam, "--inference"]);
    check_inference(&ridge["inference"], &inf["ridge"], "ridge");
}

/// `select` with `inference`: standard errors for the chosen model only (not every point of
/// the path), equal to those of the same model asked for directly.
#[test]
fn a_selected_model_carries_its_standard_errors() {
    let file = fixture("inference.csv");
    let file = file.to_str().unwrap();
    let path = fit_json(&[
        file,
        "--method",
        "olsth",
        "--k",
        "5",
        "--select",
        "bic",
        "--inference",
        "--path",
    ]);
    let chosen = path["selection"]["chosen"].as_u64().unwrap() as usize;
    for (i, m) in path["points"].as_array().unwrap().iter().enumerate() {
        assert_eq!(m["inference"].is_object(), i == chosen, "point {i}");
    }
    let k = path["points"][chosen]["k"].to_string();
    let direct = fit_json(&[file, "--method", "olsth", "--k", &k, "--inference"]);
    let (a, b) = (&path["points"][chosen]["inference"], &direct["inference"]);
    assert_eq!(a["post_selection"], true);
    for (x, y) in a["coefficients"]
        .as_array()
        .unwrap()
        .iter()
        .zip(b["coefficients"].as_array().unwrap())
    {
        assert_eq!(x["index"], y["index"]);
        assert!(close(f(&x["se"]), f(&y["se"]), 1e-12), "{x} vs {y}");
    }
    // Cross-validation too: the full-data model at the chosen lambda, refitted, with its SEs.
    let cv = fit_json(&[
        fixture("cv.csv").to_str().unwrap(),
        "--method",
        "lasso",
        "--refit",
        "--select",
        "cv",
        "--inference",
    ]);
    let inf = &cv["inference"];
    assert_eq!(
        inf["coefficients"].as_array().unwrap().len(),
        cv["k"].as_u64().unwrap() as usize
    );
    assert!(f(&inf["intercept"]["se"]) > 0.0);
}

/// Requests `select` and `inference` cannot serve are refused with a message, not a panic.
#[test]
fn impossible_selections_are_refused_by_name() {
    let file = fixture("inference.csv");
    let file = file.to_str().unwrap();
    for (args, says) in [
        (
            vec!["--method", "ols", "--select", "bic"],
            "no path to select",
        ),
        (
            vec!["--method", "lasso", "--k", "3", "--select", "bic"],
            "drop k",
        ),
        (
            vec!["--method", "lasso", "--select", "mdl"],
            "unknown criterion",
        ),
        (
            vec!["--method", "lasso", "--select", "cv", "--folds", "1"],
            "[2, 20]",
        ),
        (
            vec!["--method", "lasso", "--select", "cv", "--folds", "21"],
            "[2, 20]",
        ),
        (
            vec![
                "--method",
                "lasso",
                "--select",
                "cv",
                "--alpha",
                "fixed:0.1",
            ],
            "plain",
        ),
        (
            vec!["--method", "lasso", "--folds", "5", "--lambda", "0.1"],
            "--folds is for",
        ),
        (
            vec!["--method", "fw-lasso", "--select", "cv"],
            "fw-lasso takes",
        ),
        (
            vec!["--method", "lasso", "--lambda", "0.1", "--inference"],
            "inference is for",
        ),
        (
            vec!["--method", "lasso", "--select", "ebic", "--ebic-gamma", "2"],
            "ebic_gamma",
        ),
        (vec!["--k", "3"], "--method is required"),
        (
            vec![
                "--method",
                "lasso",
                "--ebic-gamma",
                "0.5",
                "--lambda",
                "0.1",
            ],
            "ebic_gamma",
        ),
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_ravel"))
            .arg("fit")
            .arg(file)
            .args(&args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(err.contains(says), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
    }
}

/// The same requests over HTTP on a stream fed through the real broker: `select` on
/// `POST .../model`, `GET` and `POST .../path`, and `inference`, equal `ravel fit` on the same
/// rows; a cv request on a stream without fold statistics is a clear 400.
#[test]
fn select_and_inference_over_http_equal_ravel_fit() {
    use ravel::broker::EmbeddedBroker;
    use ravel::config::FeatureSchema;
    use ravel::produce::{self, ProduceArgs, WireFormat};
    use ravel_core::Task;
    use serde_json::json;

    let dir = tempfile::tempdir().unwrap();
    let (p, n) = (15, 800);
    let (file, _) = data(dir.path(), p, 4, n, 11);
    let broker = EmbeddedBroker::start(1).unwrap();
    broker.create_topic("t.sel", 1).unwrap();
    broker.create_topic("t.sel.dlq", 1).unwrap();
    let sent = produce::run(&ProduceArgs {
        brokers: broker.bootstrap_servers().into(),
        topic: "t.sel".into(),
        input: Some(file.clone()),
        target: None,
        file_format: None,
        synthetic: None,
        wire_format: WireFormat::Binary,
        batch_rows: 50,
        schema_registry: None,
        schema_registry_auth: None,
        options: vec![],
        quiet: true,
        memory: Default::default(),
    })
    .unwrap()
    .rows;
    assert_eq!(sent, n as u64);
    let state = tempfile::tempdir().unwrap();
    let cfg = config(
        vec![stream(
            "sel",
            "t.sel",
            FeatureSchema::names(names(p)),
            Task::Regression,
        )],
        Some(state.path()),
    );
    let svc = TestService::start(cfg, broker.bootstrap_servers());
    svc.wait_rows("sel", n as u64);
    let f = file.to_str().unwrap();

    let (status, model) = svc.post(
        "/v1/streams/sel/model",
        &json!({"method": "lasso", "select": "ebic", "path_points": 20}),
    );
    assert_eq!(status, 200, "{model}");
    let want = fit_json(&[
        f,
        "--method",
        "lasso",
        "--select",
        "ebic",
        "--path-points",
        "20",
    ]);
    assert_same_model(&model, &want, 1e-8, "lasso ebic");
    assert_eq!(model["selection"]["chosen"], want["selection"]["chosen"]);
    assert_eq!(model["selection"]["curve"].as_array().unwrap().len(), 20);
    for (a, b) in model["selection"]["curve"]
        .as_array()
        .unwrap()
        .iter()
        .zip(want["selection"]["curve"].as_array().unwrap())
    {
        assert!(
            close(f64_of(&a["value"]), f64_of(&b["value"]), 1e-9),
            "curve {a} vs {b}"
        );
    }

    // No method: OLSth's k-path, as `ravel fit --select ebic` without --method.
    let (status, model) = svc.post("/v1/streams/sel/model", &json!({"select": "ebic"}));
    assert_eq!(status, 200, "{model}");
    let want = fit_json(&[f, "--select", "ebic"]);
    assert_eq!(model["method"], "olsth");
    assert_same_model(&model, &want, 1e-8, "default select");
    assert_eq!(model["selection"]["chosen"], want["selection"]["chosen"]);
    assert_eq!(
        model["selection"]["notes"][0],
        want["selection"]["notes"][0]
    );
    let (status, path) = svc.get("/v1/streams/sel/path?select=bic&k=6");
    assert_eq!(status, 200, "{path}");
    assert_eq!(path["points"].as_array().unwrap().len(), 6);
    assert!(
        path["selection"]["notes"][0]
            .as_str()
            .unwrap()
            .starts_with("no method named: bic")
    );

    let (status, path) = svc.get("/v1/streams/sel/path?method=olsth&k=6&select=bic");
    assert_eq!(status, 200, "{path}");
    let want = fit_json(&[
        f, "--method", "olsth", "--k", "6", "--select", "bic", "--path",
    ]);
    assert_eq!(path["points"].as_array().unwrap().len(), 6);
    assert_eq!(path["selection"]["chosen"], want["selection"]["chosen"]);
    for (a, b) in path["points"]
        .as_array()
        .unwrap()
        .iter()
        .zip(want["points"].as_array().unwrap())
    {
        assert_same_model(a, b, 1e-8, "olsth k-path");
    }

    let (status, path) = svc.post(
        "/v1/streams/sel/path",
        &json!({"method": "mcp", "select": "aic", "path_points": 15}),
    );
    assert_eq!(status, 200, "{path}");
    assert_eq!(path["selection"]["criterion"], "aic");
    assert!(path["points"][0]["diagnostics"]["criteria"]["aic"].is_number());

    let (status, ols) = svc.post(
        "/v1/streams/sel/model",
        &json!({"method": "ols", "inference": true}),
    );
    assert_eq!(status, 200, "{ols}");
    let want = fit_json(&[f, "--method", "ols", "--inference"]);
    let (a, b) = (&ols["inference"], &want["inference"]);
    for (x, y) in a["coefficients"]
        .as_array()
        .unwrap()
        .iter()
        .zip(b["coefficients"].as_array().unwrap())
    {
        for key in ["se", "t"] {
            assert!(
                close(f64_of(&x[key]), f64_of(&y[key]), 1e-8),
                "{key}: {x} vs {y}"
            );
        }
    }

    for (body, says) in [
        (json!({"method": "lasso", "select": "cv"}), "cv.folds"),
        (
            json!({"method": "lasso", "select": "bic", "k": 3}),
            "drop k",
        ),
        (
            json!({"method": "ridge", "lambda": 1.0, "select": "aic"}),
            "no path",
        ),
        (
            json!({"method": "lasso", "select": "best"}),
            "one of aic, bic, ebic, cv, cv_1se",
        ),
        (
            json!({"method": "lasso", "lambda": 0.1, "inference": true}),
            "inference is for",
        ),
    ] {
        let (status, err) = svc.post("/v1/streams/sel/model", &body);
        assert_eq!(status, 400, "{body}: {err}");
        assert!(err.to_string().contains(says), "{body}: {err}");
    }
    svc.stop().unwrap();
}

fn f64_of(v: &Value) -> f64 {
    v.as_f64().unwrap()
}
