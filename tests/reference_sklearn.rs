//! Independent references for `ravel fit`, and its file formats and bad input.
//!
//! `tests/fixtures/expected.json` holds models scikit-learn (and skglm for MCP / SCAD) fitted on
//! the raw rows of the committed CSV fixtures; `scripts/make_fixtures.py` writes both and
//! documents the mapping of each ravel problem onto the reference estimator. Here every case
//! runs through the real `ravel fit` binary, and through the library with row-by-row updates,
//! and must match intercept and every coefficient to 1e-6 relative. The same data in CSV,
//! LIBSVM and NPY (C and Fortran order) must give identical models, and bad files or requests
//! must give one clear error line and a non-zero exit, never a panic.

use ravel_core::data::{Budget, OpenOptions, Plan, RowReader};
use ravel_core::solve::{Model, Request};
use ravel_core::stats::{AlphaSchedule, ClassStats, RunningStats, Stats};
use serde::Deserialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Agreement asked of every coefficient and intercept (issue 2, "Checks").
const RTOL: f64 = 1e-6;
/// Coefficients that are 0 in the reference may be this small (relative to the largest
/// coefficient of the model) instead of exactly 0: LinearRegression's least-squares solve
/// returns 1e-16 where ravel drops a constant column. Penalized methods must match the zero
/// pattern exactly (see `compare`).
const ZERO_FLOOR: f64 = 1e-12;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests")
        .join("fixtures")
}

#[derive(Debug, Deserialize)]
struct Expected {
    datasets: BTreeMap<String, Dataset>,
    cases: Vec<Case>,
    lasso_paths: Vec<LassoPath>,
}

/// The exact Lasso path of one data set by sklearn's LARS: breakpoints (decreasing alphas)
/// with the coefficients (raw units) and intercept there; linear in between.
#[derive(Debug, Deserialize)]
struct LassoPath {
    dataset: String,
    standardize: bool,
    alphas: Vec<f64>,
    coefficients: Vec<Vec<f64>>,
    intercepts: Vec<f64>,
    reference: String,
}

impl LassoPath {
    /// The path's model at `lambda` (coefficients, intercept), None outside it.
    fn at(&self, lambda: f64) -> Option<(Vec<f64>, f64)> {
        let i = self
            .alphas
            .windows(2)
            .position(|w| w[0] >= lambda && lambda >= w[1])?;
        let (hi, lo) = (self.alphas[i], self.alphas[i + 1]);
        let t = if hi > lo {
            (hi - lambda) / (hi - lo)
        } else {
            0.0
        };
        let mix = |a: f64, b: f64| (1.0 - t) * a + t * b;
        let coef = self.coefficients[i]
            .iter()
            .zip(&self.coefficients[i + 1])
            .map(|(&a, &b)| mix(a, b))
            .collect();
        Some((coef, mix(self.intercepts[i], self.intercepts[i + 1])))
    }
    /// Whether some lambda of the path has exactly k nonzeros (a segment's interior has the
    /// support of its midpoint).
    fn has_k(&self, k: usize) -> bool {
        self.alphas.windows(2).any(|w| {
            let (coef, _) = self.at(0.5 * (w[0] + w[1])).unwrap();
            nonzeros(&coef) == k
        })
    }
}

/// Nonzeros of a reference vector: entries above 1e-12 of its largest (interpolation leaves
/// rounding where a coefficient crosses 0 at a breakpoint).
fn nonzeros(coef: &[f64]) -> usize {
    let scale = coef.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    coef.iter().filter(|v| v.abs() > 1e-12 * scale).count()
}

#[derive(Debug, Deserialize)]
struct Dataset {
    file: String,
    n: u64,
    p: usize,
    target: String,
    features: Vec<String>,
}

#[derive(Debug, Deserialize)]
struct Case {
    name: String,
    dataset: String,
    method: String,
    standardize: bool,
    task: String,
    intercept: f64,
    coefficients: Vec<f64>,
    lambda: Option<f64>,
    l1_ratio: Option<f64>,
    gamma: Option<f64>,
    w_pos: Option<f64>,
    w_neg: Option<f64>,
    reference: String,
}

fn load_expected() -> Expected {
    let path = fixtures().join("expected.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).expect("expected.json parses")
}

impl Case {
    /// The `ravel fit` flags this case stands for (f64 Display prints the shortest text that
    /// parses back to the same number, so lambda reaches ravel bit for bit).
    fn cli_args(&self, data: &Dataset) -> Vec<String> {
        let mut a = vec![
            fixtures().join(&data.file).display().to_string(),
            "--target".into(),
            data.target.clone(),
            "--method".into(),
            self.method.clone(),
            "--task".into(),
            self.task.clone(),
        ];
        let mut opt = |flag: &str, v: Option<f64>| {
            if let Some(v) = v {
                a.push(flag.into());
                a.push(v.to_string());
            }
        };
        opt("--lambda", self.lambda);
        opt("--l1-ratio", self.l1_ratio);
        opt("--gamma", self.gamma);
        opt("--w-pos", self.w_pos);
        opt("--w-neg", self.w_neg);
        if !self.standardize {
            a.push("--no-standardize".into());
        }
        a
    }

    /// The same request as the API's JSON body (absent values left out).
    fn params(&self) -> Request {
        let mut body = serde_json::json!({"method": self.method, "standardize": self.standardize});
        for (key, v) in [
            ("lambda", self.lambda),
            ("l1_ratio", self.l1_ratio),
            ("gamma", self.gamma),
            ("w_pos", self.w_pos),
            ("w_neg", self.w_neg),
        ] {
            if let Some(v) = v {
                body[key] = serde_json::json!(v);
            }
        }
        serde_json::from_value(body).expect("a valid request")
    }

    fn sparse(&self) -> bool {
        matches!(
            self.method.as_str(),
            "lasso" | "elastic-net" | "mcp" | "scad"
        )
    }
}

fn ravel(args: &[String]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ravel"))
        .arg("fit")
        .args(args)
        .output()
        .expect("ravel runs")
}

/// Runs `ravel fit` and parses its model JSON; panics with stderr when it fails.
fn ravel_model(args: &[String]) -> Model {
    let out = ravel(args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "ravel fit {args:?} failed: {stderr}");
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "ravel fit {args:?}: output is not a model ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

/// The library path: the file read whole, folded in one row at a time (the CLI folds
/// mini-batches), then the same extraction.
fn library_model(case: &Case, data: &Dataset) -> Model {
    let opts = OpenOptions {
        target: Some(&data.target),
        ..OpenOptions::new(Budget::unlimited(Plan::Rows { batch_rows: 4096 }))
    };
    let mut reader = RowReader::open(&fixtures().join(&data.file), &opts).unwrap();
    let (mut x, mut y) = (vec![], vec![]);
    while reader.next_batch(4096, &mut x, &mut y).unwrap() > 0 {}
    let p = reader.p;
    let names = reader.names.clone();
    let params = case.params();
    if case.task == "classification" {
        let mut s = ClassStats::new(p, AlphaSchedule::Plain);
        for (row, yi) in x.chunks_exact(p).zip(&y) {
            s.update_batch(row, std::slice::from_ref(yi)).unwrap();
        }
        params
            .model(&Stats::from(s.clone()), names.as_deref())
            .unwrap()
    } else {
        let mut s = RunningStats::new(p, AlphaSchedule::Plain);
        for (row, yi) in x.chunks_exact(p).zip(&y) {
            s.update(row, *yi).unwrap();
        }
        params
            .model(&Stats::from(s.clone()), names.as_deref())
            .unwrap()
    }
}

/// Differences between a ravel model and a reference case, one line each (empty: agreement).
fn compare(case: &Case, data: &Dataset, model: &Model, via: &str) -> Vec<String> {
    let mut bad = vec![];
    let tag = format!("{} [{via}] vs {}", case.name, case.reference);
    if model.n != data.n {
        bad.push(format!("{tag}: n = {}, the file has {}", model.n, data.n));
    }
    let got = model.dense(data.p);
    let big = case.coefficients.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    for (j, (&a, &e)) in got.iter().zip(&case.coefficients).enumerate() {
        let ok = if case.sparse() && (a == 0.0) != (e == 0.0) {
            false
        } else {
            (a - e).abs() <= RTOL * e.abs()
                || (a.abs() <= ZERO_FLOOR * big && e.abs() <= ZERO_FLOOR * big)
        };
        if !ok {
            bad.push(format!(
                "{tag}: coefficient {j} = {a:e}, expected {e:e} (relative error {:.2e})",
                (a - e).abs() / e.abs()
            ));
        }
    }
    for c in &model.coefficients {
        if c.feature != data.features[c.index] {
            bad.push(format!(
                "{tag}: coefficient {} is named {}, not {}",
                c.index, c.feature, data.features[c.index]
            ));
        }
    }
    let (a, e) = (model.intercept, case.intercept);
    if (a - e).abs() > RTOL * e.abs() {
        bad.push(format!(
            "{tag}: intercept = {a:e}, expected {e:e} (relative error {:.2e})",
            (a - e).abs() / e.abs()
        ));
    }
    bad
}

/// Largest relative difference over the intercept and the coefficients not 0 (to the floor)
/// in the reference (printed with `--nocapture`: how much margin the 1e-6 tolerance has).
fn worst_relative(case: &Case, p: usize, model: &Model) -> f64 {
    let got = model.dense(p);
    let big = case.coefficients.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    let coef = got
        .iter()
        .zip(&case.coefficients)
        .filter(|(_, e)| e.abs() > ZERO_FLOOR * big);
    coef.chain(std::iter::once((&model.intercept, &case.intercept)))
        .map(|(a, e)| (a - e).abs() / e.abs())
        .fold(0.0, f64::max)
}

#[test]
fn fixtures_cover_the_issue() {
    let exp = load_expected();
    let has = |method: &str, task: &str, standardize: bool| {
        exp.cases
            .iter()
            .any(|c| c.method == method && c.task == task && c.standardize == standardize)
    };
    for m in ["lasso", "elastic-net", "ridge", "ols", "mcp", "scad"] {
        for std in [false, true] {
            assert!(
                has(m, "regression", std),
                "no {m} regression case with standardize = {std}"
            );
        }
    }
    for m in ["lasso", "elastic-net", "ridge", "ols"] {
        assert!(
            has(m, "classification", false),
            "no {m} classification case"
        );
    }
    assert!(
        exp.cases
            .iter()
            .any(|c| c.task == "classification" && c.w_pos != c.w_neg),
        "no case with unequal class weights"
    );
    // The constant column of `const` must be dropped, not divided by zero: 0 in every model.
    let constant = exp.datasets["const"]
        .features
        .iter()
        .position(|f| f == "x3")
        .unwrap();
    for c in exp.cases.iter().filter(|c| c.dataset == "const") {
        assert!(
            c.coefficients[constant].abs() < 1e-12,
            "{}: reference gives the constant column a weight",
            c.name
        );
    }
    for (name, d) in &exp.datasets {
        assert_eq!(d.features.len(), d.p, "{name}");
        assert!(
            exp.cases.iter().any(|c| &c.dataset == name),
            "data set {name} has no case"
        );
    }
}

#[test]
fn ravel_fit_matches_sklearn() {
    let exp = load_expected();
    let mut bad = vec![];
    let mut worst = (0.0, "");
    for case in &exp.cases {
        let data = &exp.datasets[&case.dataset];
        assert_eq!(case.coefficients.len(), data.p, "{}", case.name);
        let model = ravel_model(&case.cli_args(data));
        bad.extend(compare(case, data, &model, "ravel fit"));
        let rel = worst_relative(case, data.p, &model);
        if rel > worst.0 {
            worst = (rel, case.name.as_str());
        }
        // The constant column x3 of `const` is left out of the fit, and said so.
        let constant: Vec<usize> = data
            .features
            .iter()
            .position(|f| case.dataset == "const" && f == "x3")
            .into_iter()
            .collect();
        if model.diagnostics.excluded_constant != constant {
            bad.push(format!(
                "{}: excluded_constant = {:?}, want {constant:?}",
                case.name, model.diagnostics.excluded_constant
            ));
        }
        if model.diagnostics.method.name() != case.method || !model.diagnostics.converged {
            bad.push(format!(
                "{}: diagnostics {:?}",
                case.name, model.diagnostics
            ));
        }
    }
    println!(
        "{} cases; worst relative difference {:.2e} ({})",
        exp.cases.len(),
        worst.0,
        worst.1
    );
    assert!(
        bad.is_empty(),
        "{} disagreements over {} cases:\n{}",
        bad.len(),
        exp.cases.len(),
        bad.join("\n")
    );
}

/// Exact k against an independent reference (issue 11, "Checks"): every k-model of the Lasso
/// (`--k K --no-refit`, k = 1..p) sits at some lambda* ravel found by its path search and
/// bisection; sklearn's exact LARS path at lambda* must be the same model (coefficients and
/// intercept to 1e-6 relative) with exactly K nonzeros. Where ravel says no lambda gives K
/// (`k_exact: false`), the path must indeed have no K-sparse stretch. The default k request
/// (refit) keeps the support.
#[test]
fn exact_k_models_match_the_lars_path_at_their_lambda() {
    let exp = load_expected();
    assert!(exp.lasso_paths.len() >= 8, "fixtures hold the LARS paths");
    let mut bad = vec![];
    let mut checked = 0;
    for path in &exp.lasso_paths {
        let data = &exp.datasets[&path.dataset];
        let file = fixtures().join(&data.file).display().to_string();
        for k in 1..=data.p {
            let mut args: Vec<String> = [&file, "--target", "y", "--method", "lasso"]
                .iter()
                .map(|s| s.to_string())
                .collect();
            args.extend(["--k".to_string(), k.to_string()]);
            if !path.standardize {
                args.push("--no-standardize".into());
            }
            let refit = ravel_model(&args);
            args.push("--no-refit".into());
            let m = ravel_model(&args);
            let what = format!("{} ({}) k = {k}", path.dataset, path.reference);
            if m.diagnostics.k_exact != Some(true) {
                if path.has_k(k) {
                    bad.push(format!("{what}: ravel found no lambda, the path has one"));
                }
                continue;
            }
            let lambda = m.lambda.expect("a k-model reports its lambda");
            let Some((want, b0)) = path.at(lambda) else {
                bad.push(format!("{what}: lambda* = {lambda} is off the path"));
                continue;
            };
            let got = m.dense(data.p);
            let scale = want.iter().fold(b0.abs(), |a, v| a.max(v.abs()));
            let err = want
                .iter()
                .zip(&got)
                .map(|(a, b)| (a - b).abs())
                .fold((b0 - m.intercept).abs(), f64::max)
                / scale;
            if err > RTOL || nonzeros(&want) != k || m.coefficients.len() != k {
                bad.push(format!(
                    "{what}: lambda* = {lambda}, {} reference nonzeros, {} in ravel, difference \
                     {err:.2e}",
                    nonzeros(&want),
                    m.coefficients.len()
                ));
            }
            let support = |m: &Model| m.coefficients.iter().map(|c| c.index).collect::<Vec<_>>();
            if support(&refit) != support(&m) {
                bad.push(format!("{what}: the refit changed the support"));
            }
            checked += 1;
        }
    }
    println!("{checked} exact k-models checked against the LARS path");
    assert!(checked >= 50, "only {checked} k-models were exact");
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn library_row_by_row_matches_sklearn() {
    let exp = load_expected();
    let mut bad = vec![];
    for case in &exp.cases {
        let data = &exp.datasets[&case.dataset];
        bad.extend(compare(
            case,
            data,
            &library_model(case, data),
            "library, row by row",
        ));
    }
    assert!(
        bad.is_empty(),
        "{} disagreements over {} cases:\n{}",
        bad.len(),
        exp.cases.len(),
        bad.join("\n")
    );
}

// ---------------------------------------------------------------------------------------------
// File formats

/// The `formats` data set in every format and target spelling (see make_fixtures.py).
fn format_variants() -> Vec<(&'static str, Vec<&'static str>)> {
    vec![
        ("formats.csv", vec![]),
        ("formats.csv", vec!["--target", "y"]),
        ("formats.csv", vec!["--target", "6"]),
        ("formats_mid.csv", vec!["--target", "y"]),
        ("formats_mid.csv", vec!["--target", "3"]),
        ("formats.libsvm", vec![]),
        ("formats_c.npy", vec![]),
        ("formats_c.npy", vec!["--target", "6"]),
        ("formats_f.npy", vec!["--target", "0"]),
    ]
}

#[test]
fn format_fixtures_are_what_they_claim() {
    let dir = fixtures();
    let libsvm = std::fs::read_to_string(dir.join("formats.libsvm")).unwrap();
    let mut min_index = usize::MAX;
    let mut omitted = 0;
    for line in libsvm.lines() {
        let toks: Vec<&str> = line.split_whitespace().skip(1).collect();
        omitted += 6 - toks.len();
        for t in toks {
            min_index = min_index.min(t.split_once(':').unwrap().0.parse().unwrap());
        }
    }
    assert_eq!(min_index, 1, "LIBSVM indices must be 1-based");
    assert!(omitted > 0, "the LIBSVM file must leave some zeros out");
    let header = |f: &str| {
        let b = std::fs::read(dir.join(f)).unwrap();
        String::from_utf8_lossy(&b[..128]).to_string()
    };
    assert!(header("formats_c.npy").contains("'fortran_order': False"));
    assert!(header("formats_f.npy").contains("'fortran_order': True"));
    assert!(header("formats_f.npy").contains("'<f8'"));
}

#[test]
fn every_format_gives_the_same_model() {
    let dir = fixtures();
    let requests: [&[&str]; 5] = [
        &["--method", "lasso", "--lambda", "0.05"],
        &["--method", "lasso", "--lambda", "0.05", "--no-standardize"],
        &[
            "--method",
            "elastic-net",
            "--lambda",
            "0.1",
            "--l1-ratio",
            "0.3",
        ],
        &["--method", "ols"],
        &["--method", "olsth", "--k", "3"],
    ];
    for req in requests {
        let mut reference: Option<(String, Model)> = None;
        for (file, target) in format_variants() {
            let mut args = vec![dir.join(file).display().to_string()];
            args.extend(target.iter().chain(req).map(|s| s.to_string()));
            let model = ravel_model(&args);
            let label = format!("{file} {target:?} {req:?}");
            assert_eq!(model.n, 80, "{label}");
            assert!(model.k > 0, "{label}: empty model");
            for c in &model.coefficients {
                // CSV columns are named by the header (x0..x5), the others by index.
                let want = if file.ends_with(".csv") {
                    format!("x{}", c.index)
                } else {
                    c.index.to_string()
                };
                assert_eq!(c.feature, want, "{label}");
            }
            match &reference {
                None => reference = Some((label, model)),
                Some((first, m)) => {
                    // Same numbers folded in the same order: bit-identical statistics.
                    assert_eq!(
                        model.intercept, m.intercept,
                        "{label} vs {first}: intercept"
                    );
                    let ours: Vec<(usize, f64)> = model
                        .coefficients
                        .iter()
                        .map(|c| (c.index, c.value))
                        .collect();
                    let theirs: Vec<(usize, f64)> =
                        m.coefficients.iter().map(|c| (c.index, c.value)).collect();
                    assert_eq!(ours, theirs, "{label} vs {first}: coefficients");
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Bad input

/// An NPY file written by hand (format version 1.0), so that broken files can be made.
fn write_npy(path: &Path, descr: &str, fortran: bool, shape: &[usize], data: &[u8]) {
    let dims: Vec<String> = shape.iter().map(|s| s.to_string()).collect();
    let shape = if dims.len() == 1 {
        format!("({},)", dims[0])
    } else {
        format!("({})", dims.join(", "))
    };
    let order = if fortran { "True" } else { "False" };
    let mut header =
        format!("{{'descr': '{descr}', 'fortran_order': {order}, 'shape': {shape}, }}");
    // Magic (6) + version (2) + length (2) + header + '\n' is a multiple of 64.
    while (10 + header.len() + 1) % 64 != 0 {
        header.push(' ');
    }
    header.push('\n');
    let mut bytes = b"\x93NUMPY\x01\x00".to_vec();
    bytes.extend((header.len() as u16).to_le_bytes());
    bytes.extend(header.as_bytes());
    bytes.extend(data);
    std::fs::write(path, bytes).unwrap();
}

fn f64_bytes(v: &[f64]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

/// Runs `ravel fit` on something broken: it must exit non-zero (not with a panic's 101),
/// print nothing on stdout and exactly one `error: ...` line on stderr containing `needle`.
fn assert_clear_error(args: &[String], needle: &str) {
    let out = ravel(args);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let label = format!("ravel fit {args:?}");
    assert!(!out.status.success(), "{label}: succeeded: {stdout}");
    assert_ne!(
        out.status.code(),
        Some(101),
        "{label}: exit code of a panic: {stderr}"
    );
    assert!(
        out.status.code().is_some(),
        "{label}: killed by a signal: {stderr}"
    );
    assert!(!stderr.contains("panicked"), "{label}: panicked: {stderr}");
    assert!(
        stdout.trim().is_empty(),
        "{label}: printed on stdout: {stdout}"
    );
    let lines: Vec<&str> = stderr.trim_end().lines().collect();
    assert_eq!(
        lines.len(),
        1,
        "{label}: want one error line, got: {stderr}"
    );
    assert!(lines[0].starts_with("error: "), "{label}: {stderr}");
    assert!(
        lines[0].contains(needle),
        "{label}: error does not mention '{needle}': {stderr}"
    );
    // The reason is said once (an error chain printed with its source repeats it).
    assert!(
        stderr.matches("os error").count() <= 1,
        "{label}: repeated reason: {stderr}"
    );
}

#[test]
fn bad_files_give_one_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let file = |name: &str, text: &str| {
        let p = dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p.display().to_string()
    };
    let lasso = ["--method", "lasso", "--lambda", "0.1"].map(String::from);
    let cases: Vec<(String, Vec<&str>, &str)> = vec![
        (
            file("ragged.csv", "a,b,y\n1,2,3\n4,5\n7,8,9\n"),
            vec![],
            "line 3",
        ),
        (
            file("text.csv", "a,b,y\n1,2,3\n4,five,6\n"),
            vec![],
            "line 3: column 'b': 'five' is not a number (text): declare the column categorical (--categorical b) or hashed (--hashed b:<buckets>), or drop it",
        ),
        (
            file("gap.csv", "a,b,y\n1,2,3\n4,,6\n"),
            vec![],
            "line 3: column 'b': '' is not a number (a missing value): fill it, or read missing cells with --missing skip_row",
        ),
        (
            file("na.csv", "a,b,price\n1,2,3\n4,5,NA\n"),
            vec![],
            "column 'price' (the target): 'NA' is not a number (a missing value)",
        ),
        (
            file("nan.csv", "a,b,y\n1,2,3\n4,NaN,6\n"),
            vec![],
            "not finite",
        ),
        (
            file("inf.csv", "a,b,y\n1,2,3\n4,5,inf\n"),
            vec![],
            "not finite",
        ),
        (file("empty.csv", ""), vec![], "need at least two columns"),
        (
            file("semicolons.csv", "a;b;y\n1;2;3\n"),
            vec![],
            "need at least two columns (features and a target) (the header holds ';'",
        ),
        (
            file("case.csv", "a,b,price\n1,2,3\n"),
            vec!["--target", "Price"],
            "did you mean --target price?",
        ),
        (
            file("no_column.csv", "a,b,y\n1,2,3\n"),
            vec!["--categorical", "region"],
            "no column 'region' in the header (a, b, y)",
        ),
        (
            file("no_buckets.csv", "a,b,y\n1,2,3\n"),
            vec!["--hashed", "b"],
            "--hashed b: write NAME:BUCKETS",
        ),
        (
            file(
                "many_levels.csv",
                &format!(
                    "a,zip,y\n{}",
                    (0..1001).map(|i| format!("1,z{i},2\n")).collect::<String>()
                ),
            ),
            vec!["--categorical", "zip"],
            "column 'zip' has more than 1000 distinct values: hash it (--hashed zip:<buckets>)",
        ),
        (
            file("target_gap.csv", "a,b,y\n1,2,3\n4,5,\n"),
            vec!["--categorical", "a"],
            "line 3: column 'y' (the target) is missing: fill it, or leave such rows out with --missing skip_row",
        ),
        (
            file("cats.libsvm", "1 1:0.5 2:1.5\n"),
            vec!["--categorical", "a"],
            "--categorical, --hashed and --missing apply to CSV files",
        ),
        (
            file("header_only.csv", "a,b,y\n"),
            vec![],
            "no observations",
        ),
        (
            file("target.csv", "a,b,y\n1,2,3\n"),
            vec!["--target", "price"],
            "'price' is neither a header name",
        ),
        (
            file("target_range.csv", "a,b,y\n1,2,3\n"),
            vec!["--target", "7"],
            "out of range",
        ),
        (
            file("text.libsvm", "1 1:0.5 2:1.5\n-1 1:abc\n"),
            vec![],
            "'abc' is not a number",
        ),
        (
            file("token.libsvm", "1 1:0.5 2:1.5\n-1 1:0.5 junk\n"),
            vec![],
            "'junk' is not idx:value",
        ),
        (
            file("nan.libsvm", "1 1:0.5 2:1.5\n-1 1:nan\n"),
            vec![],
            "not finite",
        ),
        (
            dir.path().join("missing.csv").display().to_string(),
            vec![],
            "missing.csv",
        ),
    ];
    let npy = |name: &str, descr: &str, shape: &[usize], data: &[u8]| {
        let p = dir.path().join(name);
        write_npy(&p, descr, false, shape, data);
        p.display().to_string()
    };
    let mut cases = cases;
    cases.push((
        npy(
            "nan.npy",
            "<f8",
            &[2, 3],
            &f64_bytes(&[1.0, 2.0, 3.0, 4.0, f64::NAN, 6.0]),
        ),
        vec![],
        "not finite",
    ));
    cases.push((
        npy(
            "inf.npy",
            "<f8",
            &[2, 3],
            &f64_bytes(&[1.0, 2.0, 3.0, 4.0, 5.0, f64::INFINITY]),
        ),
        vec![],
        "not finite",
    ));
    cases.push((
        npy("flat.npy", "<f8", &[3], &f64_bytes(&[1.0, 2.0, 3.0])),
        vec![],
        "2-D",
    ));
    cases.push((
        npy("ints.npy", "<i8", &[2, 2], &[0u8; 32]),
        vec![],
        "float64",
    ));
    cases.push((
        npy("short.npy", "<f8", &[10, 3], &f64_bytes(&[1.0; 15])),
        vec![],
        "shorter",
    ));
    let fortran_short = dir.path().join("short_f.npy");
    write_npy(
        &fortran_short,
        "<f8",
        true,
        &[10, 3],
        &f64_bytes(&[1.0; 15]),
    );
    cases.push((fortran_short.display().to_string(), vec![], "shorter"));
    for (path, extra, needle) in &cases {
        let mut args = vec![path.clone()];
        args.extend(extra.iter().map(|s| s.to_string()));
        args.extend(lasso.iter().cloned());
        assert_clear_error(&args, needle);
    }
    // The hand-written NPY writer itself is sound: a good file through it fits.
    let good = npy(
        "good.npy",
        "<f8",
        &[4, 2],
        &f64_bytes(&[1.0, 2.0, 2.0, 4.1, 3.0, 5.9, 4.0, 8.0]),
    );
    let m = ravel_model(&[good, "--method".into(), "ols".into()]);
    assert_eq!(m.n, 4);
}

#[test]
fn bad_requests_give_one_clear_error() {
    let data = fixtures().join("formats.csv").display().to_string();
    let cases: [(&[&str], &str); 9] = [
        (
            &["--method", "olsth", "--k", "7"],
            "k = 7 is larger than the number of features p = 6",
        ),
        (&["--method", "lasso", "--k", "0"], "k must be at least 1"),
        (
            &["--method", "lasso", "--lambda", "-0.5"],
            "lambda must be a finite number >= 0",
        ),
        (
            &["--method", "ridge", "--lambda", "-1"],
            "lambda must be a finite number >= 0",
        ),
        (
            &["--method", "forest", "--lambda", "0.1"],
            "unknown method 'forest'",
        ),
        (
            &[
                "--method",
                "elastic-net",
                "--lambda",
                "0.1",
                "--l1-ratio",
                "1.5",
            ],
            "l1_ratio must lie in (0, 1]",
        ),
        (
            &["--method", "mcp", "--lambda", "0.1", "--gamma", "0.5"],
            "gamma for mcp must be > 1",
        ),
        (&["--method", "lasso"], "exactly one of k or lambda"),
        (
            &[
                "--method",
                "lasso",
                "--lambda",
                "0.1",
                "--task",
                "classification",
            ],
            "labels must be +1 or -1",
        ),
    ];
    for (req, needle) in cases {
        let mut args = vec![data.clone()];
        args.extend(req.iter().map(|s| s.to_string()));
        assert_clear_error(&args, needle);
    }
}
