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

/// The scikit-learn, numpy and statsmodels references of `models_without_an_intercept_...`:
/// argv[1] the regression CSV (header, x columns, y last), argv[2] the classification CSV,
/// argv[3] a JSON list of lambdas per case; prints one JSON object.
const NO_INTERCEPT_REFERENCES: &str = r#"
import json, sys
import numpy as np
import statsmodels.api as sm
from sklearn.linear_model import ElasticNet, Lasso, LinearRegression, Ridge, lasso_path
d = np.loadtxt(sys.argv[1], delimiter=",", skiprows=1)
X, y = d[:, :-1], d[:, -1]
c = np.loadtxt(sys.argv[2], delimiter=",", skiprows=1)
Xc, yc = c[:, :-1], c[:, -1]
ask = json.loads(sys.argv[3])
n = len(y)
tight = dict(fit_intercept=False, tol=1e-14, max_iter=1_000_000)
ols = sm.OLS(y, X).fit()
out = {
    "ols": LinearRegression(fit_intercept=False).fit(X, y).coef_.tolist(),
    "lstsq": np.linalg.lstsq(X, y, rcond=None)[0].tolist(),
    "sm_params": ols.params.tolist(), "sm_bse": ols.bse.tolist(),
    "sm_rsquared": ols.rsquared, "sm_df_resid": ols.df_resid, "sm_scale": ols.scale,
    "ridge": Ridge(alpha=ask["ridge"] * n, fit_intercept=False, solver="cholesky").fit(X, y).coef_.tolist(),
    "lasso": Lasso(alpha=ask["lasso"], **tight).fit(X, y).coef_.tolist(),
    "enet": ElasticNet(alpha=ask["enet"], l1_ratio=0.5, **tight).fit(X, y).coef_.tolist(),
    "path": [Lasso(alpha=a, **tight).fit(X, y).coef_.tolist() for a in ask["path"]],
    "cv": Lasso(alpha=ask["cv"], **tight).fit(X, y).coef_.tolist(),
    "olsth": LinearRegression(fit_intercept=False).fit(X[:, ask["olsth"]], y).coef_.tolist(),
    "toy": [Lasso(alpha=a, **tight).fit([[-1], [0], [1]], [-1, 0, 1]).coef_[0] for a in ask["toy"]],
}
# Classification: w E_class[(x b - label)^2] per class, as weighted least squares.
w = np.where(yc > 0, ask["w_pos"] / np.sum(yc > 0), 1.0 / np.sum(yc < 0))
out["classification"] = LinearRegression(fit_intercept=False).fit(Xc, yc, sample_weight=w).coef_.tolist()
# BIC along the path from scikit-learn's own fits: n ln(RSS / n) + nonzeros ln n.
rss = [float(np.sum((y - X @ np.array(b)) ** 2)) for b in out["path"]]
nz = [int(np.sum(np.abs(b) > 0)) for b in out["path"]]
out["bic"] = [n * np.log(r / n) + k * np.log(n) for r, k in zip(rss, nz)]
print(json.dumps(out))
"#;

/// Largest |got - want| relative to the largest |want| (1 when want is 0).
fn worst_of(got: &[f64], want: &[f64]) -> f64 {
    assert_eq!(got.len(), want.len());
    let scale = want.iter().fold(0.0f64, |m, v| m.max(v.abs())).max(1e-300);
    got.iter()
        .zip(want)
        .fold(0.0f64, |m, (g, w)| m.max((g - w).abs() / scale))
}

fn as_vec(v: &serde_json::Value) -> Vec<f64> {
    v.as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect()
}

/// Issue 58 item 4: a model without an intercept (`--no-intercept`, `"intercept": false`) equals
/// scikit-learn's with `fit_intercept=False` on the same rows, method by method: OLS (and
/// numpy's lstsq without a constant), ridge, lasso, elastic net, the lasso path, a BIC
/// selection along it (the criterion recomputed from scikit-learn's fits), a CV selection's
/// model, OLSth's refit on its support, classification (weighted least squares); the standard
/// errors, the uncentred R^2 and the n - p residual degrees of freedom equal statsmodels' OLS
/// without a constant; and scikit-learn's lasso toy (`test_lasso_toy`: x = y = -1, 0, 1)
/// gives its coefficients 1, 0.85, 0.25, 0 and its predictions at 2, 3, 4. The rows have an
/// intercept of 3 and columns far from 0, so a fit with an intercept is another model (a
/// constant column, kept as a regressor through the origin, is checked in ravel-core's
/// tests/solvers.rs).
#[test]
fn models_without_an_intercept_equal_scikit_learns_fit_intercept_false() {
    let dir = tempfile::tempdir().unwrap();
    let (n, p) = (160usize, 5usize);
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut unif = || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 11) as f64 / (1u64 << 53) as f64 - 0.5
    };
    let truth = [1.5, 0.0, -2.0, 0.0, 0.7];
    let (mut x, mut y) = (Vec::new(), Vec::new());
    for _ in 0..n {
        let row: Vec<f64> = (0..p).map(|j| (j + 1) as f64 + 2.0 * unif()).collect();
        y.push(3.0 + row.iter().zip(&truth).map(|(a, b)| a * b).sum::<f64>() + unif());
        x.extend(row);
    }
    let write = |name: &str, y: &[f64]| -> PathBuf {
        let path = dir.path().join(name);
        let mut text = String::from("a,b,c,d,e,y\n");
        for (row, yi) in x.chunks_exact(p).zip(y) {
            for v in row {
                text.push_str(&format!("{v:?},"));
            }
            text.push_str(&format!("{yi:?}\n"));
        }
        std::fs::write(&path, text).unwrap();
        path
    };
    let file = write("rows.csv", &y);
    let mid = {
        let mut s = y.clone();
        s.sort_by(f64::total_cmp);
        s[n / 2]
    };
    let labels: Vec<f64> = y
        .iter()
        .map(|v| if *v > mid { 1.0 } else { -1.0 })
        .collect();
    let classes = write("classes.csv", &labels);
    let fit = |file: &Path, args: &[&str]| -> serde_json::Value {
        let mut all = vec![
            file.display().to_string(),
            "--no-intercept".into(),
            "--no-standardize".into(),
        ];
        all.extend(args.iter().map(|a| a.to_string()));
        let out = ravel(&all);
        assert!(
            out.status.success(),
            "ravel fit {all:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice(&out.stdout).unwrap()
    };
    let dense = |m: &serde_json::Value| -> Vec<f64> {
        let mut b = vec![0.0; p];
        for c in m["coefficients"].as_array().unwrap() {
            b[c["index"].as_u64().unwrap() as usize] = c["value"].as_f64().unwrap();
        }
        b
    };
    // ravel's answers first: their lambdas and supports are what the references are asked at.
    let ols = fit(&file, &["--method", "ols", "--inference"]);
    let ridge = fit(&file, &["--method", "ridge", "--lambda", "0.3"]);
    let lasso = fit(&file, &["--method", "lasso", "--lambda", "0.05"]);
    let enet = fit(
        &file,
        &[
            "--method",
            "elastic-net",
            "--lambda",
            "0.08",
            "--l1-ratio",
            "0.5",
        ],
    );
    let path = fit(
        &file,
        &[
            "--method",
            "lasso",
            "--path",
            "--path-points",
            "20",
            "--select",
            "bic",
            "--no-refit",
        ],
    );
    let cv = fit(
        &file,
        &[
            "--method",
            "lasso",
            "--select",
            "cv",
            "--folds",
            "5",
            "--no-refit",
        ],
    );
    let olsth = fit(&file, &["--method", "olsth", "--k", "3"]);
    let class = fit(
        &classes,
        &[
            "--method",
            "ols",
            "--task",
            "classification",
            "--w-pos",
            "2",
        ],
    );
    let toy = dir.path().join("toy.csv");
    std::fs::write(&toy, "x,y\n-1,-1\n0,0\n1,1\n").unwrap();
    let toy_alphas = [1e-8, 0.1, 0.5, 1.0];
    let toys: Vec<serde_json::Value> = toy_alphas
        .iter()
        .map(|a| fit(&toy, &["--method", "lasso", "--lambda", &a.to_string()]))
        .collect();
    let points = path["points"].as_array().unwrap();
    let lambdas: Vec<f64> = points
        .iter()
        .map(|m| m["lambda"].as_f64().unwrap())
        .collect();
    let support: Vec<usize> = olsth["coefficients"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["index"].as_u64().unwrap() as usize)
        .collect();
    let ask = serde_json::json!({
        "ridge": 0.3, "lasso": 0.05, "enet": 0.08, "path": lambdas,
        "cv": cv["lambda"].as_f64().unwrap(), "olsth": support, "toy": toy_alphas,
        "w_pos": 2.0,
    });
    let python = crate::common::pyenv_python(
        "import sklearn, statsmodels, numpy",
        "scikit-learn, statsmodels and numpy",
    );
    let out = Command::new(python)
        .arg("-c")
        .arg(NO_INTERCEPT_REFERENCES)
        .arg(&file)
        .arg(&classes)
        .arg(ask.to_string())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "the references failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();

    let mut bad = Vec::new();
    let mut check = |what: &str, got: &[f64], want: &[f64], rtol: f64| {
        let e = worst_of(got, want);
        if e > rtol {
            bad.push(format!("{what}: {got:?} vs {want:?} ({e:.1e})"));
        }
    };
    let every = [
        ("ols", &ols),
        ("ridge", &ridge),
        ("lasso", &lasso),
        ("elastic-net", &enet),
        ("cv", &cv),
        ("olsth", &olsth),
        ("classification", &class),
    ];
    for (what, m) in every {
        assert_eq!(m["intercept"].as_f64(), Some(0.0), "{what}: {m}");
        assert_eq!(m["diagnostics"]["intercept"], false, "{what}: {m}");
    }
    check(
        "ols vs LinearRegression",
        &dense(&ols),
        &as_vec(&r["ols"]),
        1e-9,
    );
    check("ols vs lstsq", &dense(&ols), &as_vec(&r["lstsq"]), 1e-9);
    check(
        "ols vs statsmodels",
        &dense(&ols),
        &as_vec(&r["sm_params"]),
        1e-9,
    );
    let inf = &ols["inference"];
    assert!(inf.get("intercept").is_none(), "{inf}");
    assert_eq!(inf["df_resid"].as_f64(), r["sm_df_resid"].as_f64());
    assert_eq!(inf["df_resid"].as_f64(), Some((n - p) as f64));
    let se: Vec<f64> = inf["coefficients"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["se"].as_f64().unwrap())
        .collect();
    check(
        "standard errors vs statsmodels",
        &se,
        &as_vec(&r["sm_bse"]),
        1e-9,
    );
    check(
        "sigma^2 vs statsmodels' scale",
        &[inf["sigma2"].as_f64().unwrap()],
        &[r["sm_scale"].as_f64().unwrap()],
        1e-9,
    );
    check(
        "uncentred R^2 vs statsmodels",
        &[ols["diagnostics"]["r2"].as_f64().unwrap()],
        &[r["sm_rsquared"].as_f64().unwrap()],
        1e-12,
    );
    check("ridge", &dense(&ridge), &as_vec(&r["ridge"]), 1e-9);
    check("lasso", &dense(&lasso), &as_vec(&r["lasso"]), 1e-6);
    check("elastic-net", &dense(&enet), &as_vec(&r["enet"]), 1e-6);
    for (i, m) in points.iter().enumerate() {
        assert_eq!(m["intercept"].as_f64(), Some(0.0));
        check(
            &format!("lasso path point {i}"),
            &dense(m),
            &as_vec(&r["path"][i]),
            1e-6,
        );
    }
    let bic = as_vec(&r["bic"]);
    let want = (0..bic.len())
        .min_by(|&a, &b| bic[a].total_cmp(&bic[b]))
        .unwrap();
    assert_eq!(
        path["selection"]["chosen"].as_u64(),
        Some(want as u64),
        "BIC's choice; scikit-learn's curve {bic:?}"
    );
    check("cv's chosen model", &dense(&cv), &as_vec(&r["cv"]), 1e-6);
    let refit: Vec<f64> = support.iter().map(|&j| dense(&olsth)[j]).collect();
    check("olsth refit", &refit, &as_vec(&r["olsth"]), 1e-9);
    check(
        "classification",
        &dense(&class),
        &as_vec(&r["classification"]),
        1e-9,
    );
    // scikit-learn's test_lasso_toy: coefficients and the predictions x b at 2, 3, 4.
    for ((a, m), (want, sk)) in toy_alphas
        .iter()
        .zip(&toys)
        .zip([1.0, 0.85, 0.25, 0.0].iter().zip(as_vec(&r["toy"])))
    {
        let b = m["coefficients"][0]["value"].as_f64().unwrap_or(0.0);
        assert!((b - want).abs() < 1e-6, "toy alpha {a}: {b} vs {want}");
        assert!(
            (b - sk).abs() < 1e-9,
            "toy alpha {a}: {b} vs scikit-learn {sk}"
        );
        let model: Model = serde_json::from_value(m.clone()).unwrap();
        for t in [2.0, 3.0, 4.0] {
            assert_eq!(model.predict(&[t]), b * t, "toy alpha {a} at {t}");
        }
    }
    // With an intercept the same rows give another model (the rows' intercept is 3).
    let with = ravel_model(&[
        file.display().to_string(),
        "--method".into(),
        "ols".into(),
        "--no-standardize".into(),
    ]);
    assert!(bad.is_empty(), "{}", bad.join("\n"));
    assert!(
        with.diagnostics.intercept && with.intercept.abs() > 1.0,
        "{}",
        with.intercept
    );
}
