//! Test data: synthetic designs, CSV files, feature names, feature-stream messages, and the
//! Python of `target/pyenv` for the reference computations.

use std::io::Write;
use std::path::Path;

/// Feature names f0..f{p-1}.
pub fn names(p: usize) -> Vec<String> {
    (0..p).map(|j| format!("f{j}")).collect()
}

/// Writes rows as CSV (header f0..f{p-1},y) with round-trip float formatting.
pub fn write_csv(path: &Path, names: &[String], x: &[f64], y: &[f64]) {
    let p = names.len();
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    writeln!(f, "{},y", names.join(",")).unwrap();
    for (i, yi) in y.iter().enumerate() {
        let row: Vec<String> = x[i * p..(i + 1) * p]
            .iter()
            .map(|v| format!("{v:?}"))
            .collect();
        writeln!(f, "{},{yi:?}", row.join(",")).unwrap();
    }
}

/// Synthetic rows of paper 003's design.
pub fn synthetic(p: usize, k: usize, n: usize, seed: u64) -> (Vec<f64>, Vec<f64>) {
    let spec: ravel_core::synthetic::SyntheticSpec =
        format!("p={p},k={k},n={n},seed={seed}").parse().unwrap();
    let (mut x, mut y) = (vec![], vec![]);
    spec.rows().fill(n, &mut x, &mut y);
    (x, y)
}

/// The Python of `target/pyenv` (which `scripts/test` makes; `RAVEL_TEST_PYTHON` overrides it),
/// checked to run `imports`; panics naming `what` is missing and how to install it.
pub fn pyenv_python(imports: &str, what: &str) -> String {
    let candidate = std::env::var("RAVEL_TEST_PYTHON")
        .unwrap_or_else(|_| format!("{}/target/pyenv/bin/python", env!("CARGO_MANIFEST_DIR")));
    let ok = std::process::Command::new(&candidate)
        .args(["-c", imports])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "no Python with {what} at {candidate}: run scripts/test (it creates target/pyenv) or set \
         RAVEL_TEST_PYTHON"
    );
    candidate
}

/// One column of a feature stream as a message: `{"feature": name, "values": [...]}`, or
/// with `sparse` its nonzeros only, last sample first (any order is allowed):
/// `{"feature": name, "indices": [...], "values": [...]}`.
pub fn feature_message(name: &str, values: &[f64], sparse: bool) -> Vec<u8> {
    let v = if sparse {
        let (indices, vals): (Vec<usize>, Vec<f64>) = values
            .iter()
            .enumerate()
            .rev()
            .filter(|(_, v)| **v != 0.0)
            .map(|(i, v)| (i, *v))
            .unzip();
        serde_json::json!({"feature": name, "indices": indices, "values": vals})
    } else {
        serde_json::json!({"feature": name, "values": values})
    };
    serde_json::to_vec(&v).unwrap()
}
