//! Wide feature streams (`wide = true`) end to end: labels and sparse columns produced to a
//! real Kafka-protocol broker (the embedded one, over TCP) are kept by the real service
//! (`server::run` on 127.0.0.1:0), and paper 004's Lasso path and models served over HTTP
//! equal the real `ravel fit --wide` binary's on the same columns written as a LIBSVM file
//! (deterministic, and randomized with the same seed), to 1e-9. A column past the stream's
//! share of `limits.max_memory` is refused (`memory_limit`) and the answers cover the columns
//! kept; a limit too small for one column stops the start with a message naming it.

use crate::common::*;
use ravel::broker::EmbeddedBroker;
use ravel::config::FeatureStreamConfig;
use ravel_core::data::csc::wide_bytes;
use ravel_core::features::Loss;
use ravel_core::memory::ByteSize;
use serde_json::{Value, json};
use std::path::Path;

fn wide_stream(name: &str, topic: &str, n: usize, wide: bool) -> FeatureStreamConfig {
    FeatureStreamConfig {
        name: name.into(),
        topic: Some(topic.into()),
        n,
        loss: Loss::Squared,
        s: 5,
        workers: 1,
        eta: None,
        wide,
    }
}

fn send(brokers: &str, topic: &str, payloads: &[Vec<u8>]) {
    crate::common::send(
        brokers,
        topic,
        None,
        payloads,
        &[("enable.idempotence", "true")],
    );
}

/// A small LCG: the data need no quality, only reproducibility.
struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> f64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// n x p sparse columns, `per_col` nonzeros each (distinct rows), and y from 6 of them plus
/// noise.
fn design(n: usize, p: usize, per_col: usize, seed: u64) -> (Vec<Vec<f64>>, Vec<f64>) {
    let mut r = Lcg(seed);
    let mut cols = vec![vec![0.0; n]; p];
    for c in cols.iter_mut() {
        let mut k = 0;
        while k < per_col {
            let i = (r.next() * n as f64) as usize % n;
            if c[i] == 0.0 {
                c[i] = 0.25 + r.next();
                k += 1;
            }
        }
    }
    let mut y = vec![0.0; n];
    for (t, w) in [
        (3, 2.0),
        (17, -1.5),
        (40, 1.0),
        (77, 3.0),
        (120, -2.0),
        (151, 1.2),
    ] {
        for i in 0..n {
            y[i] += w * cols[t % p][i];
        }
    }
    for v in y.iter_mut() {
        *v += 0.3 * (r.next() - 0.5) + 4.0;
    }
    (cols, y)
}

/// Column j is feature "j+1": the LIBSVM file's index, so names agree.
fn feature_msg(j: usize, col: &[f64], sparse: bool) -> Vec<u8> {
    feature_message(&(j + 1).to_string(), col, sparse)
}

fn write_libsvm(path: &Path, cols: &[Vec<f64>], y: &[f64]) {
    let mut s = String::new();
    for (i, yi) in y.iter().enumerate() {
        s.push_str(&yi.to_string());
        for (j, c) in cols.iter().enumerate() {
            if c[i] != 0.0 {
                s.push_str(&format!(" {}:{}", j + 1, c[i]));
            }
        }
        s.push('\n');
    }
    std::fs::write(path, s).unwrap();
}

fn fit_wide(file: &Path, p: usize, extra: &[&str]) -> Value {
    let p = p.to_string();
    // The API stops by the gap rule alone; `ravel fit --wide` adds 004's step rule unless told.
    let mut args = vec![
        "fit",
        file.to_str().unwrap(),
        "--wide",
        "--gap-rule",
        "--features",
        &p,
    ];
    args.extend_from_slice(extra);
    serde_json::from_str(&ravel(&args)).unwrap()
}

fn same(a: &Value, b: &Value, what: &str) {
    let (x, y) = (a.as_f64().unwrap(), b.as_f64().unwrap());
    assert!(
        (x - y).abs() <= 1e-9 * x.abs().max(y.abs()) + 1e-15,
        "{what}: service {x} vs ravel fit --wide {y}"
    );
}

/// One point of the service's answer against one of `ravel fit --wide`'s.
fn same_point(api: &Value, fit: &Value, what: &str) {
    for key in ["delta", "objective", "gap", "lambda", "intercept"] {
        same(&api[key], &fit[key], &format!("{what}: {key}"));
    }
    for key in ["nonzeros", "iterations", "dot_products", "converged"] {
        assert_eq!(api[key], fit[key], "{what}: {key}");
    }
    let (ca, cf) = (
        api["coefficients"].as_object().unwrap(),
        fit["coefficients"].as_object().unwrap(),
    );
    assert_eq!(
        ca.keys().collect::<std::collections::BTreeSet<_>>(),
        cf.keys().collect(),
        "{what}: features"
    );
    for (k, v) in ca {
        same(v, &cf[k], &format!("{what}: coefficient of {k}"));
    }
}

fn same_path(api: &Value, fit: &Value, what: &str) {
    for key in ["n", "p", "nnz", "empty_columns", "variant", "kappa", "seed"] {
        assert_eq!(api[key], fit[key], "{what}: {key}");
    }
    for key in ["delta_max", "lambda_max"] {
        same(&api[key], &fit[key], &format!("{what}: {key}"));
    }
    assert_eq!(api["delta_max_from"], "search");
    let (a, f) = (
        api["path"].as_array().unwrap(),
        fit["path"].as_array().unwrap(),
    );
    assert_eq!(a.len(), f.len(), "{what}: points");
    for (k, (x, y)) in a.iter().zip(f).enumerate() {
        same_point(x, y, &format!("{what}: point {k}"));
    }
    assert_eq!(api["dot_products"], fit["dot_products"], "{what}");
    assert_eq!(api["iterations"], fit["iterations"], "{what}");
}

#[test]
fn the_path_of_a_wide_feature_stream_is_ravel_fit_wide_on_the_same_columns() {
    let (n, p) = (60, 300);
    let (mut cols, y) = design(n, p, 6, 11);
    let broker = EmbeddedBroker::start(1).unwrap();
    let brokers = broker.bootstrap_servers().to_string();
    for t in ["t.wide", "t.wide.dlq", "t.narrow", "t.narrow.dlq"] {
        broker.create_topic(t, 1).unwrap();
    }
    // Labels, every column (every third in the sparse format), then column 17 sent again
    // with other values: it is replaced in place, and the file holds its last values.
    let mut msgs = vec![serde_json::to_vec(&json!({ "labels": y })).unwrap()];
    msgs.extend((0..p).map(|j| feature_msg(j, &cols[j], j % 3 == 0)));
    let mut r = Lcg(5);
    cols[17] = cols[17].iter().map(|v| v * (1.0 + r.next())).collect();
    msgs.push(feature_msg(17, &cols[17], true));
    send(&brokers, "t.wide", &msgs);
    send(
        &brokers,
        "t.narrow",
        &[serde_json::to_vec(&json!({"labels": [1.0, 2.0, 3.0]})).unwrap()],
    );
    let cfg = feature_config(vec![
        wide_stream("wide", "t.wide", n, true),
        wide_stream("narrow", "t.narrow", 3, false),
    ]);
    let svc = TestService::start(cfg, &brokers);
    let v = svc.wait_feature_offset("wide", msgs.len() as i64);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("wide.svm");
    write_libsvm(&file, &cols, &y);
    let nnz: usize = cols
        .iter()
        .map(|c| c.iter().filter(|v| **v != 0.0).count())
        .sum();
    assert_eq!(v["features_seen"], p + 1);
    let w = &v["wide"];
    assert_eq!(
        (w["columns"].as_u64(), w["nonzeros"].as_u64()),
        (Some(p as u64), Some(nnz as u64)),
        "{v}"
    );
    assert_eq!(w["columns_refused"], 0);
    assert!(
        w["bytes"].as_u64().unwrap() <= w["budget_bytes"].as_u64().unwrap(),
        "{v}"
    );

    // Deterministic: the whole path (delta_max searched as ravel fit --wide searches it).
    let (status, api) = svc.post(
        "/v1/feature-streams/wide/wide/path",
        &json!({"variant": "deterministic", "path_points": 20}),
    );
    assert_eq!(status, 200, "{api}");
    let fit = fit_wide(
        &file,
        p,
        &["--variant", "deterministic", "--path-points", "20"],
    );
    same_path(&api, &fit, "deterministic");
    let pts = fit["path"].as_array().unwrap();
    assert!(
        pts.last().unwrap()["nonzeros"].as_u64().unwrap() >= 6,
        "a path that selects nothing compares nothing: {}",
        pts.last().unwrap()
    );

    // Randomized, the same seed and kappa.
    let (status, api) = svc.post(
        "/v1/feature-streams/wide/wide/path",
        &json!({"kappa": 30, "seed": 7, "path_points": 15, "tol": 1e-4}),
    );
    assert_eq!(status, 200, "{api}");
    let rfit = fit_wide(
        &file,
        p,
        &[
            "--kappa",
            "30",
            "--seed",
            "7",
            "--path-points",
            "15",
            "--tol",
            "1e-4",
        ],
    );
    same_path(&api, &rfit, "randomized");

    // A model at a delta: solved there from zero, as --delta-max D --path-points 1.
    let d = pts[12]["delta"].as_f64().unwrap();
    let (status, m) = svc.post(
        "/v1/feature-streams/wide/wide/model",
        &json!({"delta": d, "variant": "deterministic"}),
    );
    assert_eq!(status, 200, "{m}");
    let one = fit_wide(
        &file,
        p,
        &[
            "--variant",
            "deterministic",
            "--delta-max",
            &d.to_string(),
            "--path-points",
            "1",
        ],
    );
    same_point(&m["model"], &one["path"][0], "model at delta");
    assert_eq!(m["p"], p);

    // A model with at most k features: the path's densest point with k nonzeros or fewer.
    let k = 4;
    let (status, m) = svc.post(
        "/v1/feature-streams/wide/wide/model",
        &json!({"k": k, "variant": "deterministic", "path_points": 20}),
    );
    assert_eq!(status, 200, "{m}");
    let want = pts
        .iter()
        .rposition(|q| q["nonzeros"].as_u64().unwrap() <= k)
        .unwrap();
    assert!(
        want > 0 && want + 1 < pts.len(),
        "k = {k} must pick inside the path"
    );
    assert_eq!(m["path_index"], want, "{m}");
    assert_eq!(m["requested_k"], k);
    same_point(&m["model"], &pts[want], "model at k");

    // Requests refused with their reason.
    let cases = [
        (
            "wide/path",
            json!({"variant": "fast"}),
            400,
            "invalid_params",
        ),
        (
            "wide/path",
            json!({"kappa": 3, "sample_fraction": 0.1}),
            400,
            "invalid_params",
        ),
        ("wide/path", json!({"tol": 2}), 400, "invalid_params"),
        ("wide/path", json!({"delta": 1.0}), 400, "invalid_params"),
        ("wide/path", json!({"nope": 1}), 400, "invalid_body"),
        ("wide/model", json!({}), 400, "invalid_params"),
        (
            "wide/model",
            json!({"delta": 1.0, "k": 3}),
            400,
            "invalid_params",
        ),
        ("wide/model", json!({"delta": -1.0}), 400, "invalid_params"),
        ("wide/model", json!({"k": 0}), 400, "invalid_params"),
    ];
    for (route, body, status, code) in cases {
        let (got, e) = svc.post(&format!("/v1/feature-streams/wide/{route}"), &body);
        assert_eq!(
            (got, e["error"]["code"].as_str()),
            (status, Some(code)),
            "{route} {body}: {e}"
        );
    }
    let (got, e) = svc.post("/v1/feature-streams/narrow/wide/path", &json!({}));
    assert_eq!(
        (got, e["error"]["code"].as_str()),
        (409, Some("not_wide")),
        "{e}"
    );
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("wide = true"),
        "{e}"
    );
    let (_, narrow) = svc.get("/v1/feature-streams/narrow");
    assert!(narrow.get("wide").is_none(), "{narrow}");
    svc.stop().unwrap();
}

#[test]
fn columns_past_the_memory_limit_are_refused_and_the_path_covers_those_kept() {
    let (n, p, per_col) = (40, 120, 5);
    let (cols, y) = design(n, p, per_col, 23);
    let broker = EmbeddedBroker::start(1).unwrap();
    let brokers = broker.bootstrap_servers().to_string();
    for t in ["t.w", "t.w.dlq"] {
        broker.create_topic(t, 1).unwrap();
    }
    // A limit whose share for the stream holds about half of the columns: what the rest of
    // the service is estimated to take, plus the path's matrix and vectors for p / 2 columns
    // (their nonzeros counted once more for the kept columns themselves).
    let mut cfg = feature_config(vec![wide_stream("w", "t.w", n, true)]);
    cfg.limits.max_memory = Some(ByteSize(1 << 30));
    let rest = (1u64 << 30) - cfg.wide_budget();
    let half = (p / 2) as u64;
    let share = wide_bytes(n as u64, half, half * per_col as u64) + half * per_col as u64 * 12;
    cfg.limits.max_memory = Some(ByteSize(rest + share));
    cfg.check().unwrap();
    assert_eq!(cfg.wide_budget(), share);

    let mut msgs = vec![serde_json::to_vec(&json!({ "labels": y })).unwrap()];
    msgs.extend((0..p).map(|j| feature_msg(j, &cols[j], j % 2 == 0)));
    send(&brokers, "t.w", &msgs);
    let svc = TestService::start(cfg.clone(), &brokers);
    let v = svc.wait_feature_offset("w", msgs.len() as i64);
    let w = &v["wide"];
    let kept = w["columns"].as_u64().unwrap() as usize;
    assert!(kept > 0 && kept <= p / 2, "{v}");
    assert_eq!(w["columns_refused"], p - kept, "{v}");
    assert_eq!(w["budget_bytes"], share);
    assert!(w["bytes"].as_u64().unwrap() <= share, "{v}");
    // Every column has the same size, so the first `kept` were kept and the selection saw
    // the same ones.
    assert_eq!(v["features_seen"], kept);
    let m = svc.metrics();
    assert_eq!(
        sample(
            &m,
            "ravel_messages_rejected_total{reason=\"memory_limit\",stream=\"w\"}"
        ),
        Some((p - kept) as f64)
    );

    // The path is ravel fit --wide's on the kept columns.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("kept.svm");
    write_libsvm(&file, &cols[..kept], &y);
    let (status, api) = svc.post(
        "/v1/feature-streams/w/wide/path",
        &json!({"variant": "deterministic", "path_points": 10}),
    );
    assert_eq!(status, 200, "{api}");
    assert_eq!(api["columns_refused"], p - kept);
    assert!(
        api["notes"].to_string().contains("memory_limit"),
        "{}",
        api["notes"]
    );
    let fit = fit_wide(
        &file,
        kept,
        &["--variant", "deterministic", "--path-points", "10"],
    );
    same_path(&api, &fit, "kept columns");
    svc.stop().unwrap();

    // A limit that leaves less than one column and the path's vectors stops the start.
    cfg.limits.max_memory = Some(ByteSize(rest + 100));
    let e = cfg.check().unwrap_err().to_string();
    assert!(
        e.contains("feature stream 'w'")
            && e.contains("wide = true")
            && e.contains("limits.max_memory"),
        "{e}"
    );
}
