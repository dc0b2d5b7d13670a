//! Live prequential quality (issue 33), end to end: rows produced by the real `ravel produce`
//! to a real embedded broker, folded by a real service, read over HTTP and `/metrics`.
//!
//! - Regression, one partition, an abrupt change of the coefficients halfway: the service's
//!   figures (total, window, weighted) equal the last line of the real `ravel fit
//!   --prequential` on the same rows to 1e-9, and the change shows in the trace.
//! - Quality from the first rows (issues 45, 59): on a stationary stream whose targets are far
//!   from 0 and whose every_rows is 2000, the warm-up's first model comes at p + 1 rows, the
//!   rows before it are counted apart, and the R^2 of the first window is a model's; the
//!   service still equals `ravel fit --prequential` to 1e-9.
//! - River's TrumpApproval and Phishing through `ravel serve` with the README's defaults: the
//!   live R^2 and AUC are a model's and equal `ravel fit --prequential`'s.
//! - Classification: the service's window AUC equals scikit-learn's `roc_auc_score` on the
//!   window's prequential scores (replayed through `ravel_core::prequential`), and its
//!   balanced accuracy and Brier score equal scikit-learn's too.
//! - The alert: deploy/prometheus/alerts.yml in a real Prometheus scraping the service:
//!   `RavelQualityBelowFloor` is quiet before an abrupt change and goes off after it.

use crate::common::*;
use ravel::broker::EmbeddedBroker;
use ravel::config::FeatureSchema;
use ravel::config::quality::QualityConfig;
use ravel_core::Task;
use ravel_core::prequential::Prequential;
use ravel_core::scenarios::{Drift, DriftingStream};
use ravel_core::solve::Request;
use ravel_core::stats::{AlphaSchedule, Stats};
use serde_json::Value;
use std::path::Path;

fn produce(brokers: &str, topic: &str, file: &Path) {
    produce_as(brokers, topic, file, "binary", 173, &[]);
}

fn quality(s: &str) -> QualityConfig {
    toml::from_str(s).unwrap()
}

fn rel(a: f64, b: f64) -> f64 {
    (a - b).abs() / a.abs().max(b.abs()).max(1e-300)
}

#[test]
fn the_services_prequential_figures_equal_ravel_fit_prequential_across_an_abrupt_change() {
    let (p, n) = (12, 6000usize);
    let mut stream = DriftingStream::new(p, 3, Drift::Abrupt { at: 3000 }, n as u64, 33);
    let (mut x, mut y) = (Vec::new(), Vec::new());
    stream.fill(n, &mut x, &mut y);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("rows.csv");
    write_csv(&file, &names(p), &x, &y);

    let broker = EmbeddedBroker::start(1).unwrap();
    broker.create_topic("q.reg", 1).unwrap();
    broker.create_topic("q.reg.dlq", 1).unwrap();
    let mut sc = stream_config("reg", "q.reg", p, Task::Regression);
    sc.alpha = "fixed:0.005".parse().unwrap();
    sc.quality = Some(quality(
        "every_rows = 250\nwindow_rows = 1000\nmodel = { method = \"lasso\", k = 3 }\nfloor = { r2 = 0.2 }",
    ));
    // Issue 45: a stationary stream beside it, its targets around 50 and its first model at
    // 2000 rows, on the same service.
    let mut still = DriftingStream::new(p, 3, Drift::None, n as u64, 45);
    let (mut sx, mut sy) = (Vec::new(), Vec::new());
    still.fill(n, &mut sx, &mut sy);
    sy.iter_mut().for_each(|v| *v += 50.0);
    let still_file = dir.path().join("still.csv");
    write_csv(&still_file, &names(p), &sx, &sy);
    broker.create_topic("q.still", 1).unwrap();
    broker.create_topic("q.still.dlq", 1).unwrap();
    let mut st = stream_config("still", "q.still", p, Task::Regression);
    st.quality = Some(quality(
        "every_rows = 2000\nwindow_rows = 500\nmodel = { method = \"ols\" }",
    ));
    let svc = TestService::start(config(vec![sc, st], None), broker.bootstrap_servers());
    produce(broker.bootstrap_servers(), "q.reg", &file);
    produce(broker.bootstrap_servers(), "q.still", &still_file);
    let summary = svc.wait_rows("reg", n as u64);
    let q = &summary["quality"];
    assert_eq!(q["rows"].as_u64(), Some(n as u64), "{q}");
    // Models at the warm-up's 13, 26, 52, 104, 208 rows, then 250, 500, ..., 5750: the
    // last 250 rows were predicted by the last one (the model of 6000 rows waits for the
    // next row); the first 13 rows had no model.
    assert_eq!(q["model_rows"].as_u64(), Some(5750), "{q}");
    assert_eq!(q["extractions"].as_u64(), Some(5 + 23), "{q}");
    assert_eq!(q["unscored_rows"].as_u64(), Some(13), "{q}");
    assert_eq!(q["failed_extractions"].as_u64(), Some(0), "{q}");

    // The same rows through the real `ravel fit --prequential`: its window is the trace's
    // (1000 rows, and the weighted figures decay over as many), so its last line holds the
    // figures the service must show.
    let out = ravel(&[
        "fit",
        file.to_str().unwrap(),
        "--method",
        "lasso",
        "--k",
        "3",
        "--alpha",
        "fixed:0.005",
        "--prequential",
        "1000",
        "--refit-every",
        "250",
    ]);
    let lines: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 6);
    let fit = &lines[5]["quality"];
    for scope in ["window", "weighted", "total"] {
        for figure in ["rmse", "mae", "r2", "r2_pooled"] {
            let (a, b) = (
                q["figures"][scope][figure].as_f64().unwrap(),
                fit[scope][figure].as_f64().unwrap(),
            );
            assert!(
                rel(a, b) < 1e-9,
                "{scope} {figure}: service {a} vs ravel fit {b}"
            );
        }
        assert_eq!(q["figures"][scope]["rows"], fit[scope]["rows"], "{scope}");
    }
    // The change at row 3000 shows: the window right after it predicts worse than the one
    // before, and the trace recovers by the end.
    let rmse = |i: usize| lines[i]["rmse"].as_f64().unwrap();
    assert!(
        rmse(3) > 1.5 * rmse(2),
        "no drop in quality after the change: {out}"
    );
    assert!(rmse(5) < rmse(3), "no recovery: {out}");

    // The same numbers in /metrics, with the floor; and in the history.
    let m = svc.metrics();
    let window_rmse = sample(
        &m,
        "ravel_stream_quality_window{figure=\"rmse\",stream=\"reg\"}",
    )
    .expect("the window rmse gauge");
    assert!(rel(window_rmse, fit["window"]["rmse"].as_f64().unwrap()) < 1e-9);
    assert_eq!(
        sample(
            &m,
            "ravel_stream_quality_floor{figure=\"r2\",stream=\"reg\"}"
        ),
        Some(0.2)
    );
    assert_eq!(
        sample(&m, "ravel_stream_quality_rows{stream=\"reg\"}"),
        Some(n as f64)
    );
    assert_eq!(
        sample(
            &m,
            "ravel_stream_quality_window{figure=\"auc\",stream=\"reg\"}"
        ),
        None,
        "a regression stream has no AUC"
    );

    // The stationary stream (issue 59): its first model at p + 1 = 13 rows, not at
    // every_rows = 2000; the 13 rows before it are counted apart, and from the first window
    // of `ravel fit --prequential` on, the total and weighted R^2 are those of a model (the
    // signal's share of the variance, as the last window's), not the null model's 0; the
    // service ends with the same figures.
    let summary = svc.wait_rows("still", n as u64);
    let q = &summary["quality"];
    let out = ravel(&[
        "fit",
        still_file.to_str().unwrap(),
        "--method",
        "ols",
        "--prequential",
        "500",
        "--refit-every",
        "2000",
    ]);
    let lines: Vec<Value> = out
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), n / 500);
    let last_r2 = lines[n / 500 - 1]["quality"]["total"]["r2"]
        .as_f64()
        .unwrap();
    for (i, l) in lines.iter().enumerate() {
        assert_eq!(l["quality"]["unscored"].as_u64(), Some(13), "{out}");
        for scope in ["total", "weighted"] {
            for figure in ["r2", "r2_pooled"] {
                let r2 = l["quality"][scope][figure].as_f64().unwrap();
                assert!(
                    r2 >= last_r2 / 2.0,
                    "window {i}: {scope} {figure} {r2} against the last window's {last_r2}: {out}"
                );
            }
        }
    }
    assert_eq!(q["unscored_rows"].as_u64(), Some(13), "{q}");
    assert!(
        lines[n / 500 - 1]["quality"]["total"]["r2"]
            .as_f64()
            .unwrap()
            > 0.5,
        "the models explain the signal: {out}"
    );
    let fit = &lines[n / 500 - 1]["quality"];
    for scope in ["window", "weighted", "total"] {
        for figure in ["rmse", "mae", "r2", "r2_pooled"] {
            let (a, b) = (
                q["figures"][scope][figure].as_f64().unwrap(),
                fit[scope][figure].as_f64().unwrap(),
            );
            assert!(
                rel(a, b) < 1e-9,
                "still: {scope} {figure}: service {a} vs ravel fit {b}"
            );
        }
    }
    svc.stop().unwrap();
}

fn stream_config(name: &str, topic: &str, p: usize, task: Task) -> ravel::config::StreamConfig {
    stream(name, topic, FeatureSchema::names(names(p)), task)
}

/// Rows of a noisy linear classifier: labels sign(x^T b + noise), +1 / -1.
fn classification_rows(p: usize, n: usize, seed: u64) -> (Vec<f64>, Vec<f64>) {
    let (x, z) = synthetic(p, 3, n, seed);
    let y = z
        .iter()
        .map(|v| if *v >= 0.3 { 1.0 } else { -1.0 })
        .collect();
    (x, y)
}

#[test]
fn the_services_window_auc_equals_scikit_learns_on_the_windows_prequential_scores() {
    let (p, n, window, refit) = (8, 4000usize, 1500usize, 200u64);
    let (x, y) = classification_rows(p, n, 5);
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("rows.csv");
    write_csv(&file, &names(p), &x, &y);

    let broker = EmbeddedBroker::start(1).unwrap();
    broker.create_topic("q.cls", 1).unwrap();
    broker.create_topic("q.cls.dlq", 1).unwrap();
    let mut sc = stream_config("cls", "q.cls", p, Task::Classification);
    sc.quality = Some(quality(&format!(
        "every_rows = {refit}\nwindow_rows = {window}\nmodel = {{ method = \"lasso\", k = 4, w_pos = 2.0 }}"
    )));
    let svc = TestService::start(config(vec![sc], None), broker.bootstrap_servers());
    produce(broker.bootstrap_servers(), "q.cls", &file);
    let summary = svc.wait_rows("cls", n as u64);
    let figures = &summary["quality"]["figures"]["window"];

    // The window's prequential scores, replayed through the library in odd batches.
    let req: Request =
        serde_json::from_value(serde_json::json!({"method": "lasso", "k": 4, "w_pos": 2.0}))
            .unwrap();
    let mut replay = Prequential::with_stats(
        Stats::new(Task::Classification, p, AlphaSchedule::Plain),
        req,
        window as u64,
        refit,
        None,
    )
    .unwrap();
    let mut recs = Vec::new();
    for c in (0..n).step_by(333) {
        let e = (c + 333).min(n);
        replay.push(&x[c * p..e * p], &y[c..e], &mut recs).unwrap();
    }
    let rows: Vec<(f64, f64)> = replay.quality().window_rows().collect();
    assert_eq!(rows.len(), window);
    let scores = dir.path().join("scores.csv");
    let text: String = rows.iter().map(|(s, y)| format!("{s:?},{y:?}\n")).collect();
    std::fs::write(&scores, text).unwrap();
    let script = r#"
import sys
import numpy as np
from sklearn.metrics import roc_auc_score, balanced_accuracy_score, brier_score_loss
d = np.loadtxt(sys.argv[1], delimiter=",")
s, y = d[:, 0], d[:, 1]
print(repr(roc_auc_score(y > 0, s)))
print(repr(balanced_accuracy_score(y > 0, s >= 0)))
print(repr(brier_score_loss(y > 0, np.clip((s + 1) / 2, 0, 1))))
"#;
    let python = ["python3", "/usr/bin/python3"]
        .into_iter()
        .find(|py| {
            std::process::Command::new(py)
                .args(["-c", "import sklearn"])
                .output()
                .is_ok_and(|o| o.status.success())
        })
        .expect("no python3 with scikit-learn (scripts/test installs python3-sklearn)");
    let out = std::process::Command::new(python)
        .arg("-c")
        .arg(script)
        .arg(&scores)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "scikit-learn reference failed (scripts/test installs python3-sklearn): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let refs: Vec<f64> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| l.trim().parse().unwrap())
        .collect();
    let (auc, bacc, brier) = (refs[0], refs[1], refs[2]);
    assert!(
        auc > 0.6 && auc < 1.0,
        "a useful but imperfect classifier: {auc}"
    );
    for (name, want) in [("auc", auc), ("balanced_accuracy", bacc), ("brier", brier)] {
        let got = figures[name].as_f64().unwrap();
        assert!(
            rel(got, want) < 1e-9,
            "{name}: service {got} vs scikit-learn {want}"
        );
    }
    assert!(figures["weighted_loss"].as_f64().unwrap() > 0.0);
    assert!(figures.get("rmse").is_none(), "{figures}");
    svc.stop().unwrap();
}

/// A child process, killed on drop if still running.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `GET base/api/v1/query?query=expr`: the result vector (panics on a query error).
fn prom_query(base: &str, expr: &str) -> Vec<Value> {
    let url = reqwest::Url::parse_with_params(&format!("{base}/api/v1/query"), &[("query", expr)])
        .unwrap();
    let v: Value = client().get(url).send().unwrap().json().unwrap();
    assert_eq!(v["status"], "success", "query {expr} failed: {v}");
    v["data"]["result"].as_array().cloned().unwrap_or_default()
}

/// Issue 33's alert check: deploy/prometheus/alerts.yml loaded into a real Prometheus that
/// scrapes a real service: `RavelQualityBelowFloor` stays quiet while the stream is predicted
/// well, and becomes pending (its `for` then turns it firing) once an abrupt change drags the
/// window's R^2 under `quality.floor`. The floor lies between the window's R^2 before and
/// after the change, as `ravel fit --prequential` reports them on the same rows.
#[test]
fn the_quality_alert_rule_goes_off_in_a_real_prometheus_after_an_abrupt_change() {
    let (p, n, change, window) = (12, 3500usize, 3000usize, 500usize);
    let mut stream = DriftingStream::new(p, 3, Drift::Abrupt { at: change as u64 }, n as u64, 33);
    let (mut x, mut y) = (Vec::new(), Vec::new());
    stream.fill(n, &mut x, &mut y);
    let dir = tempfile::tempdir().unwrap();
    let (before, after, all) = (
        dir.path().join("before.csv"),
        dir.path().join("after.csv"),
        dir.path().join("all.csv"),
    );
    write_csv(&before, &names(p), &x[..change * p], &y[..change]);
    write_csv(&after, &names(p), &x[change * p..], &y[change..]);
    write_csv(&all, &names(p), &x, &y);
    let out = ravel(&[
        "fit",
        all.to_str().unwrap(),
        "--method",
        "lasso",
        "--k",
        "3",
        "--prequential",
        &window.to_string(),
        "--refit-every",
        "250",
    ]);
    let r2: Vec<f64> = out
        .lines()
        .map(|l| {
            serde_json::from_str::<Value>(l).unwrap()["quality"]["window"]["r2"]
                .as_f64()
                .unwrap()
        })
        .collect();
    let (good, bad) = (r2[change / window - 1], r2[n / window - 1]);
    assert!(good > bad + 0.2, "the change does not show in R^2: {out}");
    let floor = (good + bad) / 2.0;

    let broker = EmbeddedBroker::start(1).unwrap();
    broker.create_topic("q.alert", 1).unwrap();
    broker.create_topic("q.alert.dlq", 1).unwrap();
    let mut sc = stream_config("alert", "q.alert", p, Task::Regression);
    sc.quality = Some(quality(&format!(
        "every_rows = 250\nwindow_rows = {window}\nmodel = {{ method = \"lasso\", k = 3 }}\nfloor = {{ r2 = {floor} }}"
    )));
    let svc = TestService::start(config(vec![sc], None), broker.bootstrap_servers());
    produce(broker.bootstrap_servers(), "q.alert", &before);
    svc.wait_rows("alert", change as u64);

    let prometheus = std::process::Command::new("prometheus")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        prometheus,
        "`prometheus` is not installed: scripts/test installs it"
    );
    let rules = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/prometheus/alerts.yml");
    let cfg = dir.path().join("prometheus.yml");
    std::fs::write(
        &cfg,
        format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files:\n  - {}\nscrape_configs:\n  - job_name: ravel\n    static_configs:\n      - targets: ['{}']\n",
            rules.display(),
            svc.addr
        ),
    )
    .unwrap();
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let _prom = Child(
        std::process::Command::new("prometheus")
            .arg(format!("--config.file={}", cfg.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let alert = "ALERTS{alertname=\"RavelQualityBelowFloor\",stream=\"alert\",figure=\"r2\"}";
    let floor_series = "ravel_stream_quality_floor{stream=\"alert\",figure=\"r2\"}";
    let wait = |what: &str, ok: &dyn Fn() -> bool| {
        let start = std::time::Instant::now();
        while !ok() {
            assert!(start.elapsed() < DEADLINE, "{what}");
            std::thread::sleep(std::time::Duration::from_millis(250));
        }
    };
    let up = || {
        client()
            .get(format!("{base}/-/ready"))
            .send()
            .is_ok_and(|r| r.status().is_success())
    };
    wait("Prometheus did not start", &up);
    wait("Prometheus never scraped the floor", &|| {
        !prom_query(&base, floor_series).is_empty()
    });
    // A few evaluations on the good window: quiet.
    std::thread::sleep(std::time::Duration::from_secs(3));
    assert!(
        prom_query(&base, alert).is_empty(),
        "the alert went off before the change (window R^2 {good}, floor {floor})"
    );

    produce(broker.bootstrap_servers(), "q.alert", &after);
    let summary = svc.wait_rows("alert", n as u64);
    let got = summary["quality"]["figures"]["window"]["r2"]
        .as_f64()
        .unwrap();
    assert!(
        rel(got, bad) < 1e-9,
        "service window R^2 {got} vs ravel fit {bad}"
    );
    wait(
        &format!("RavelQualityBelowFloor did not go off (window R^2 {got}, floor {floor})"),
        &|| {
            prom_query(&base, alert).iter().any(|a| {
                a["metric"]["alertstate"] == "pending" || a["metric"]["alertstate"] == "firing"
            })
        },
    );
    svc.stop().unwrap();
}

/// Issue 59's check: River's TrumpApproval (regression, 1,001 rows, p = 6) and Phishing
/// (classification, 1,250 rows, p = 9), data nobody here wrote, produced as JSON events by a
/// plain confluent-kafka producer to the embedded broker and read by a real `ravel serve` with
/// the README's defaults (no `quality` table: every_rows = 5000, lasso with history.k = 10
/// nonzeros clamped to p). Both streams are shorter than every_rows; the warm-up's models
/// (p + 1, 2 (p + 1), ...) predict them from row p + 2 on, the first p + 1 rows are counted
/// apart, and the live figures equal `ravel fit --prequential --refit-every 5000` on the same
/// rows in the same order (the issue asks for 10 %; they are the same definition, so 1e-6),
/// far from the null model (R^2 0, AUC 0.5).
#[test]
fn rivers_datasets_through_ravel_serve_with_the_defaults_are_predicted_from_the_first_rows() {
    let python = pyenv_python(
        "import river, confluent_kafka",
        "River 0.26.1 and confluent-kafka (scripts/test installs them)",
    );
    let dir = tempfile::tempdir().unwrap();
    let broker = EmbeddedBroker::start(1).unwrap();
    // One partition each, so that the service reads the rows in the file's order.
    broker.create_topic("trump", 1).unwrap();
    broker.create_topic("phishing", 1).unwrap();
    // The datasets as the wheel ships them: each row a JSON event (the features by name and
    // the target), and the same rows in a CSV for `ravel fit` (repr: the same doubles).
    let script = r#"
import csv, json, sys
from confluent_kafka import Producer
from river import datasets
out, brokers = sys.argv[1], sys.argv[2]
producer = Producer({"bootstrap.servers": brokers})
for name, data, target in [("trump", datasets.TrumpApproval(), "approval"),
                           ("phishing", datasets.Phishing(), "phishing")]:
    rows = list(data)
    names = list(rows[0][0])
    with open(f"{out}/{name}.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(names + [target])
        for x, y in rows:
            y = float(y)
            w.writerow([repr(float(x[k])) for k in names] + [repr(y)])
            producer.produce(name, json.dumps({**{k: float(x[k]) for k in names}, target: y}).encode())
    producer.flush()
    print(name, len(rows), ",".join(names))
"#;
    let out = std::process::Command::new(&python)
        .args(["-c", script, dir.path().to_str().unwrap()])
        .arg(broker.bootstrap_servers())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "the River script failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let listing = String::from_utf8(out.stdout).unwrap();
    let mut cfg = crate::common::ConfigFile::new("issue59");
    let mut sets = Vec::new();
    for line in listing.lines() {
        let mut w = line.split(' ');
        let (name, n, names) = (w.next().unwrap(), w.next().unwrap(), w.next().unwrap());
        let names: Vec<String> = names.split(',').map(str::to_string).collect();
        let (target, task) = match name {
            "trump" => ("approval", "regression"),
            _ => ("phishing", "classification"),
        };
        cfg = cfg
            .stream(name, name, names.clone())
            .stream_key("target", target)
            .stream_key("task", task);
        sets.push((
            name.to_string(),
            n.parse::<u64>().unwrap(),
            names.len(),
            task,
        ));
    }
    assert_eq!(sets.len(), 2, "{listing}");
    // The README's defaults but where the checkpoints go: in this test's folder, not the
    // working directory's `ravel-state`, which a second run would restore from.
    let state = dir.path().join("state").display().to_string();
    cfg.set("state.dir", state).write(dir.path());
    let (mut svc, base) = serve(dir.path(), broker.bootstrap_servers(), 0);
    let log = dir.path().join("serve0.log");
    for (name, n, p, task) in &sets {
        let q = wait_for(&format!("{name}: {n} rows"), &log, || {
            let (_, s) = try_get(&base, &format!("/v1/streams/{name}"))?;
            (s["n"].as_u64() == Some(*n)).then(|| s["quality"].clone())
        });
        // The README's defaults: every_rows = max(5000, 10 p), lasso with k = min(10, p).
        assert_eq!(q["every_rows"], 5000, "{q}");
        let k = q["model"]["k"].as_u64().unwrap();
        assert_eq!(k, (*p as u64).min(10), "{q}");
        // The first p + 1 rows came before the first model, counted apart; the model is the
        // warm-up's last below n (p + 1 times a power of two).
        assert_eq!(q["unscored_rows"].as_u64(), Some(*p as u64 + 1), "{q}");
        assert_eq!(
            q["figures"]["unscored"].as_u64(),
            Some(*p as u64 + 1),
            "{q}"
        );
        assert_eq!(q["model_status"], "current", "{q}");
        assert!(q["model_note"].is_null(), "{q}");
        let model_rows = q["model_rows"].as_u64().unwrap();
        assert!(
            model_rows * 2 > *n && model_rows <= *n && model_rows % (*p as u64 + 1) == 0,
            "{q}"
        );
        let file = dir.path().join(format!("{name}.csv"));
        let fit = ravel(&[
            "fit",
            file.to_str().unwrap(),
            "--task",
            task,
            "--method",
            "lasso",
            "--k",
            &k.to_string(),
            "--prequential",
            "100000",
            "--refit-every",
            "5000",
        ]);
        let last: Value = serde_json::from_str(fit.lines().last().unwrap()).unwrap();
        let (live, file_total) = (&q["figures"]["total"], &last["quality"]["total"]);
        eprintln!("{name}: live {live}, ravel fit --prequential {file_total}");
        assert_eq!(last["quality"]["unscored"].as_u64(), Some(*p as u64 + 1));
        let figures: &[&str] = if *task == "regression" {
            &["r2", "r2_pooled", "rmse", "mae"]
        } else {
            &["auc", "accuracy", "balanced_accuracy", "brier"]
        };
        for f in figures {
            let (a, b) = (live[f].as_f64().unwrap(), file_total[f].as_f64().unwrap());
            assert!(
                rel(a, b) < 1e-6,
                "{name} {f}: service {a} vs ravel fit --prequential {b}"
            );
        }
        // Not the null model: most of the variance explained, a sharp classifier.
        if *task == "regression" {
            for f in ["r2", "r2_pooled"] {
                let r2 = live[f].as_f64().unwrap();
                assert!(r2 > 0.5, "{name}: {f} {r2}: {q}");
            }
        } else {
            let auc = live["auc"].as_f64().unwrap();
            assert!(auc > 0.9, "{name}: total AUC {auc}: {q}");
            assert!(live["accuracy"].as_f64().unwrap() > 0.8, "{q}");
        }
    }
    svc.signal("-TERM");
    assert!(svc.wait(), "ravel serve did not stop cleanly");
}
