//! Issue 21: files whose dimensions need more memory than the limit are refused with a message
//! (exit 1), never with an allocation abort. The real binary runs under a 4 GiB address-space
//! limit (`ulimit -v`), as on a small machine, on the LIBSVM file, an NPY header that
//! claims 10^12 rows of 10^5 columns over a short body, and a CSV of 10^6 columns. A configured
//! stream of that size is refused at start the same way. `--compact-features` renumbers a
//! LIBSVM file's indices and fits what the dense file of the same columns fits.

use crate::common::*;
use serde_json::Value;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

/// `ravel ARGS` under `ulimit -v 4194304` (4 GiB of address space), killed after 60 s (a
/// generous bound: refusing takes milliseconds; the test only needs it to finish).
fn ravel_4gib(args: &[&str]) -> Output {
    let child = Command::new("sh")
        .arg("-c")
        .arg("ulimit -v 4194304 && exec \"$0\" \"$@\"")
        .arg(env!("CARGO_BIN_EXE_ravel"))
        .args(args)
        .env_remove("RUST_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (out, finished) = output_within(child, Duration::from_secs(60));
    assert!(finished, "ravel {args:?} did not finish within 60 s");
    out
}

/// The run exited 1 (not a signal: an abort is SIGABRT, 134 through a shell) with an error
/// naming the file and containing each of `want`; returns the message.
fn refused(args: &[&str], file: &Path, want: &[&str]) -> String {
    let out = ravel_4gib(args);
    let err = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(
        out.status.code(),
        Some(1),
        "ravel {args:?}: expected exit 1, got {:?}: {err}",
        out.status
    );
    assert!(!err.contains("memory allocation"), "{err}");
    assert!(
        err.starts_with(&format!(
            "error: {}: too large for the memory limit",
            file.display()
        )),
        "{err}"
    );
    for w in want.iter().chain(&[
        "would need an estimated",
        "over the limit of",
        "Drop or hash features",
        "feature stream",
        "raise the limit",
    ]) {
        assert!(err.contains(w), "ravel {args:?}: {w:?} missing from: {err}");
    }
    err
}

/// An NPY v1 header of float64 data in C order with this shape, then `body`.
fn npy(shape: &str, body: &[f64]) -> Vec<u8> {
    let mut dict = format!("{{'descr': '<f8', 'fortran_order': False, 'shape': {shape}, }}");
    while (10 + dict.len() + 1) % 64 != 0 {
        dict.push(' ');
    }
    dict.push('\n');
    let mut out = b"\x93NUMPY\x01\x00".to_vec();
    out.extend_from_slice(&(dict.len() as u16).to_le_bytes());
    out.extend_from_slice(dict.as_bytes());
    for v in body {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out
}

#[test]
fn files_too_large_for_memory_are_refused_with_a_message_not_an_abort() {
    let dir = tempfile::tempdir().unwrap();
    let s = |p: &Path| p.to_str().unwrap().to_string();

    // The file: one index sets p = 200000.
    let mid = dir.path().join("mid.svm");
    std::fs::write(&mid, "1 200000:2\n0 1:1\n").unwrap();
    let err = refused(
        &["fit", &s(&mid), "--method", "ols"],
        &mid,
        &[
            "the largest feature index is 200000 (line 1), so p = 200000",
            "p x p matrix of second moments",
            "the address-space limit (ulimit -v) 4.0 GiB",
            "only 2 distinct feature indices: --compact-features renumbers them",
        ],
    );
    eprintln!("LIBSVM: {err}");
    // Classification keeps two class statistics: a larger estimate, the same refusal.
    refused(
        &[
            "fit",
            &s(&mid),
            "--method",
            "ols",
            "--task",
            "classification",
        ],
        &mid,
        &["two p x p matrices"],
    );

    // An NPY header claiming 10^12 rows of 10^5 columns; the body holds 4 values.
    let huge = dir.path().join("huge.npy");
    std::fs::write(&huge, npy("(1000000000000, 100000)", &[1.0, 2.0, 3.0, 4.0])).unwrap();
    let err = refused(
        &["fit", &s(&huge), "--method", "lasso", "--k", "3"],
        &huge,
        &["the header says 1000000000000 rows of 100000 columns, so p = 99999"],
    );
    eprintln!("NPY: {err}");
    // `ravel select` holds the rows too: n counts.
    refused(
        &["select", &s(&huge), "--s", "3"],
        &huge,
        &["n = 1000000000000 rows", "a selection of s = 3"],
    );

    // A CSV of 10^6 columns (one row).
    let wide = dir.path().join("wide.csv");
    let header: Vec<String> = (0..1_000_000).map(|j| format!("x{j}")).collect();
    let row = vec!["1"; 1_000_000].join(",");
    std::fs::write(&wide, format!("{}\n{row}\n", header.join(","))).unwrap();
    let err = refused(
        &["fit", &s(&wide), "--method", "ols"],
        &wide,
        &["the header (line 1) has 1000000 columns, so p = 999999"],
    );
    eprintln!("CSV: {err}");

    // `ravel produce` holds a message's rows: refused before connecting to any broker.
    refused(
        &[
            "produce",
            "--brokers",
            "127.0.0.1:1",
            "--topic",
            "t",
            "--input",
            &s(&mid),
            "--max-memory",
            "100MB",
            "--quiet",
        ],
        &mid,
        &["batches of 100 rows", "(set by --max-memory)"],
    );

    // An explicit --max-memory replaces the default in the message.
    refused(
        &["fit", &s(&mid), "--method", "ols", "--max-memory", "1.5GiB"],
        &mid,
        &["over the limit of 1.5 GiB (set by --max-memory)"],
    );
    let out = ravel_4gib(&[
        "fit",
        &s(&mid),
        "--method",
        "ols",
        "--max-memory",
        "4 parsecs",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("unknown unit 'parsecs'"), "{err}");
}

/// Indices {3, 70000, 999999}: renumbered, p = 3, and the model is the dense fit on those
/// three columns, named by the file's indices.
#[test]
fn compact_features_fit_the_dense_file_of_the_used_columns() {
    let dir = tempfile::tempdir().unwrap();
    let (n, idx) = (60usize, [3usize, 70_000, 999_999]);
    let (x, y) = synthetic(3, 3, n, 21);
    let mut svm = String::new();
    for (row, yi) in x.chunks_exact(3).zip(&y) {
        svm.push_str(&format!("{yi}"));
        for (j, v) in idx.iter().zip(row) {
            svm.push_str(&format!(" {j}:{v}"));
        }
        svm.push('\n');
    }
    let svm_path = dir.path().join("sparse.libsvm");
    std::fs::write(&svm_path, svm).unwrap();
    let csv_path = dir.path().join("dense.csv");
    let names: Vec<String> = idx.iter().map(|j| j.to_string()).collect();
    write_csv(&csv_path, &names, &x, &y);

    // Without renumbering, p = 999999 does not fit in 4 GiB.
    refused(
        &["fit", svm_path.to_str().unwrap(), "--method", "ols"],
        &svm_path,
        &["index is 999999 (line 1), so p = 999999", "only 3 distinct"],
    );

    let out = ravel_4gib(&[
        "fit",
        svm_path.to_str().unwrap(),
        "--method",
        "ols",
        "--compact-features",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let compact: Value = serde_json::from_slice(&out.stdout).unwrap();
    let dense: Value = serde_json::from_str(&ravel(&[
        "fit",
        csv_path.to_str().unwrap(),
        "--method",
        "ols",
    ]))
    .unwrap();
    let coefs = |m: &Value| -> Vec<(String, u64, f64)> {
        m["coefficients"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| {
                (
                    c["feature"].as_str().unwrap().to_string(),
                    c["index"].as_u64().unwrap(),
                    c["value"].as_f64().unwrap(),
                )
            })
            .collect()
    };
    let (a, b) = (coefs(&compact), coefs(&dense));
    assert_eq!(a.len(), 3, "{compact}");
    assert_eq!(compact["n"], n as u64);
    for ((fa, ia, va), (fb, ib, vb)) in a.iter().zip(&b) {
        assert_eq!((fa, ia), (fb, ib), "features named by the file's indices");
        assert!((va - vb).abs() <= 1e-9, "{fa}: {va} vs {vb}");
    }
    let (ia, ib) = (
        compact["intercept"].as_f64().unwrap(),
        dense["intercept"].as_f64().unwrap(),
    );
    assert!((ia - ib).abs() <= 1e-9, "intercept {ia} vs {ib}");
    assert_eq!(
        a.iter().map(|c| c.0.as_str()).collect::<Vec<_>>(),
        ["3", "70000", "999999"]
    );
}

/// A configured stream with the p is refused at start with the same estimate, naming
/// the stream and the config key.
#[test]
fn a_configured_stream_too_large_for_memory_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ravel.toml");
    std::fs::write(
        &path,
        "[kafka]\nbrokers = \"127.0.0.1:1\"\n[[streams]]\nname = \"wide\"\nfeatures = 200000\n",
    )
    .unwrap();
    let out = ravel_4gib(&["serve", "--config", path.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    for w in [
        "stream 'wide': features = 200000 sets p = 200000",
        "would need an estimated",
        "over limits.max_memory = 2.0 GiB",
        "raise limits.max_memory",
    ] {
        assert!(err.contains(w), "{w:?} missing from: {err}");
    }
}
