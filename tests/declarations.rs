//! Streams declared at run time (issue 49): on a real service (`server::run`) over a real
//! Kafka-protocol broker (the embedded one) and real HTTP, a stream declared with `PUT
//! /v1/streams/{name}` is folded, its OLS equals numpy's on the same rows, it survives a
//! restart (declaration and state, from `state.dir`), a changed declaration starts afresh
//! from the beginning of its topic, and `DELETE` retires it (`state=drop` deletes its
//! checkpoint); a file-declared stream's n stays exact at every step. A bad declaration is a
//! 400 naming the key (or the missing topic, or the registry that does not answer), a file's
//! name a 409, and without the admin token 401 (403 when none is configured). A declared
//! stream starts where its `start` says. A declaration whose fields none of its topic's
//! latest events carry is a 422 naming each with its likely intended name, declared only with
//! `absent_fields=accept` (issue 59).

use crate::common::*;
use ravel::broker::EmbeddedBroker;
use ravel::wire as format;
use serde_json::{Value, json};
use std::path::Path;
use std::time::Duration;

const ADMIN: &str = "admin-token-0123456789abcdef";

fn request(
    base: &str,
    method: reqwest::Method,
    path: &str,
    token: Option<&str>,
    body: Option<&Value>,
) -> (u16, Value) {
    let mut r = client().request(method, format!("{base}{path}"));
    if let Some(t) = token {
        r = r.bearer_auth(t);
    }
    if let Some(b) = body {
        r = r.json(b);
    }
    let r = r.send().expect("request");
    let status = r.status().as_u16();
    (status, r.json().unwrap_or(Value::Null))
}

fn put(svc: &TestService, name: &str, token: Option<&str>, body: &Value) -> (u16, Value) {
    put_at(&svc.url(""), name, token, body)
}

/// `PUT /v1/streams/{name}` at the service `base`.
fn put_at(base: &str, name: &str, token: Option<&str>, body: &Value) -> (u16, Value) {
    request(
        base,
        reqwest::Method::PUT,
        &format!("/v1/streams/{name}"),
        token,
        Some(body),
    )
}

/// Rows i in `range` of the file stream (positional JSON, p = 3), to `topic`.
fn send_rows_to(brokers: &str, topic: &str, range: std::ops::Range<usize>) {
    let mut payloads = Vec::new();
    for i in range {
        let x = [i as f64, (i % 7) as f64, ((i * 13) % 11) as f64];
        let y = [1.0 + 0.5 * x[0] - x[1] + 0.25 * x[2]];
        let mut out = Vec::new();
        format::encode_json(&x, &y, 3, &mut out);
        payloads.push(out);
    }
    send(brokers, topic, None, &payloads, &[]);
}

fn send_file_rows(brokers: &str, range: std::ops::Range<usize>) {
    send_rows_to(brokers, "t.file", range)
}

/// Event i of the API stream: fields a, b and the target y.
fn event(i: usize) -> (f64, f64, f64) {
    let a = ((i * 37) % 101) as f64 / 10.0;
    let b = ((i * 53) % 89) as f64 / 7.0 - 3.0;
    let y = 2.0 + 1.5 * a - 0.75 * b + ((i * 7919) % 17) as f64 / 17.0;
    (a, b, y)
}

fn send_events(brokers: &str, range: std::ops::Range<usize>) {
    send_events_to(brokers, "t.api", range)
}

/// Events i in `range` (fields a, b, y) to `topic`.
fn send_events_to(brokers: &str, topic: &str, range: std::ops::Range<usize>) {
    let payloads: Vec<Vec<u8>> = range.map(event_json).collect();
    send(brokers, topic, None, &payloads, &[]);
}

/// Event i's JSON payload.
fn event_json(i: usize) -> Vec<u8> {
    let (a, b, y) = event(i);
    serde_json::to_vec(&json!({"a": a, "b": b, "y": y})).unwrap()
}

/// numpy's least squares (intercept first) on `events`.
fn numpy_ols(dir: &Path, events: std::ops::Range<usize>) -> Vec<f64> {
    let data = dir.join("events.csv");
    let text: String = events
        .map(|i| {
            let (a, b, y) = event(i);
            format!("{a:?},{b:?},{y:?}\n")
        })
        .collect();
    std::fs::write(&data, text).unwrap();
    let script = r#"
import sys
import numpy as np
d = np.loadtxt(sys.argv[1], delimiter=",", ndmin=2)
X = np.hstack([np.ones((d.shape[0], 1)), d[:, :-1]])
print(" ".join(repr(float(v)) for v in np.linalg.lstsq(X, d[:, -1], rcond=None)[0]))
"#;
    let python = pyenv_python("import numpy", "numpy");
    let out = std::process::Command::new(python)
        .args(["-c", script, data.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "numpy: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .split_whitespace()
        .map(|v| v.parse().unwrap())
        .collect()
}

/// The API stream's OLS equals numpy's on its n events.
fn assert_ols_is_numpys(svc: &TestService, dir: &Path, n: usize) {
    assert_ols_at(&svc.url(""), dir, n)
}

/// The API stream's OLS at the service `base` equals numpy's on its n events.
fn assert_ols_at(base: &str, dir: &Path, n: usize) {
    assert_ols_of(base, "api", dir, 0..n)
}

/// The OLS of `stream` at the service `base` equals numpy's on exactly `events`.
fn assert_ols_of(base: &str, stream: &str, dir: &Path, events: std::ops::Range<usize>) {
    assert_ols_everywhere(&[base], stream, dir, events)
}

/// The OLS of `stream` at each service of `bases` equals numpy's on exactly `events`.
fn assert_ols_everywhere(bases: &[&str], stream: &str, dir: &Path, events: std::ops::Range<usize>) {
    let want = numpy_ols(dir, events.clone());
    let scale = want.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    for base in bases {
        let (status, model) = post(
            base,
            &format!("/v1/streams/{stream}/model"),
            &json!({"method": "ols"}),
        );
        assert_eq!(status, 200, "{base}: {model}");
        assert_eq!(model["n"], events.len() as u64, "{base}: {model}");
        let got = intercept_and(&model, &["a", "b"]);
        for (g, w) in got.iter().zip(&want) {
            assert!(
                (g - w).abs() <= 1e-9 * scale,
                "{base}: service {got:?} vs numpy {want:?}"
            );
        }
    }
}

fn service_config(state: &Path, admin: &str) -> ravel::config::Config {
    let mut c = one_regression("file", "t.file", 3, Some(state));
    c.http.admin_token = ravel::config::Secret(admin.into());
    // No registry listens there: a declaration that needs one is refused.
    c.schema_registry.url = "http://127.0.0.1:1/registry".into();
    c.check().unwrap();
    c
}

/// One embedded broker for the tests of this file (each its own topics).
fn broker() -> &'static EmbeddedBroker {
    static BROKER: std::sync::OnceLock<EmbeddedBroker> = std::sync::OnceLock::new();
    BROKER.get_or_init(|| EmbeddedBroker::start(1).unwrap())
}

/// The shared broker's address, with `topics` (name, partitions) created.
fn with_topics(topics: &[(&str, i32)]) -> String {
    let broker = broker();
    for (t, parts) in topics {
        broker.create_topic(t, *parts).unwrap();
    }
    broker.bootstrap_servers().to_string()
}

/// Unix time `ms` as RFC 3339 (UTC, whole seconds), as a `start` takes it.
fn rfc3339(ms: i64) -> String {
    std::process::Command::new("date")
        .args(["-u", "-d", &format!("@{}", ms / 1000)])
        .arg("+%Y-%m-%dT%H:%M:%SZ")
        .output()
        .map(|o| String::from_utf8(o.stdout).unwrap().trim().to_string())
        .unwrap()
}

/// Waits until the service at `base` holds `n` rows of `stream`.
fn wait_n(base: &str, stream: &str, n: u64, log: &Path) {
    wait_for(&format!("{stream}: n = {n}"), log, || {
        (stream_n(base, stream) == Some(n)).then_some(())
    })
}

/// The `ravel` binary, SIGKILLed with a declared stream: the restart has the declaration and
/// its rows, each once (from its last checkpoint on), and the file stream's n is exact.
#[test]
fn a_declared_stream_survives_a_sigkill() {
    let brokers = with_topics(&[
        ("k.file", 2),
        ("k.file.dlq", 1),
        ("k.api", 2),
        ("k.api.dlq", 1),
    ]);
    let dir = tempfile::tempdir().unwrap();
    ConfigFile::new("declared-kill")
        .state_in(dir.path(), 200)
        .stream("file", "k.file", 3)
        .set("http.admin_token", ADMIN)
        .write(dir.path());
    send_rows_to(&brokers, "k.file", 0..300);
    send_events_to(&brokers, "k.api", 0..300);
    let (mut p, base) = serve(dir.path(), &brokers, 0);
    let log = dir.path().join("serve0.log");
    let decl = json!({"topic": "k.api", "features": ["a", "b"], "target": "y"});
    let (status, body) = put_at(&base, "api", Some(ADMIN), &decl);
    assert_eq!(status, 201, "{body}");
    wait_n(&base, "api", 300, &log);
    wait_n(&base, "file", 300, &log);
    send_events_to(&brokers, "k.api", 300..400);
    wait_n(&base, "api", 400, &log);
    std::thread::sleep(Duration::from_millis(500));
    p.signal("-KILL");
    p.wait();
    send_events_to(&brokers, "k.api", 400..450);
    send_rows_to(&brokers, "k.file", 300..350);
    let (_p, base) = serve(dir.path(), &brokers, 1);
    let log = dir.path().join("serve1.log");
    let (_, d) = get(&base, "/v1/streams/api/declaration");
    assert_eq!(d["origin"], "api", "{d}");
    wait_n(&base, "api", 450, &log);
    wait_n(&base, "file", 350, &log);
    assert_ols_at(&base, dir.path(), 450);
}

/// A declared stream starts where its declaration says: `start = "latest"` at its topic's
/// end when it is first read (its checkpoint written at once, so a SIGKILL keeps it), a time
/// by the messages' timestamps (the earlier ones read past and counted). Each OLS equals
/// numpy's on exactly the events after the start. The file stream starts at its topic's end
/// too, at the service's first start, and its n stays exact.
#[test]
fn a_declared_stream_starts_at_the_end_of_its_topic_or_at_a_time() {
    let brokers = with_topics(&[
        ("s.file", 1),
        ("s.file.dlq", 1),
        ("s.late", 2),
        ("s.late.dlq", 1),
        ("s.time", 2),
        ("s.time.dlq", 1),
    ]);
    let dir = tempfile::tempdir().unwrap();
    ConfigFile::new("declared-start")
        .state_in(dir.path(), 200)
        .stream("file", "s.file", 3)
        .stream_key("start", "latest")
        .set("http.admin_token", ADMIN)
        .write(dir.path());
    send_rows_to(&brokers, "s.file", 0..100);
    send_events_to(&brokers, "s.late", 0..200);
    // Events 0..100 an hour old, 100..250 now; the stream starts half an hour ago.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let stamped: Vec<(Vec<u8>, i64)> = (0..250)
        .map(|i| (event_json(i), if i < 100 { now - 3_600_000 } else { now }))
        .collect();
    send_stamped(&brokers, "s.time", &stamped);
    let half_an_hour_ago = rfc3339(now - 1_800_000);
    let (mut p, base) = serve(dir.path(), &brokers, 0);
    let log = dir.path().join("serve0.log");
    let declare = |base: &str, name: &str, topic: &str, start: &str| {
        let decl = json!({"topic": topic, "features": ["a", "b"], "target": "y", "start": start});
        let (status, body) = put_at(base, name, Some(ADMIN), &decl);
        assert_eq!(status, 201, "{body}");
    };
    let now_decl =
        json!({"topic": "s.late", "features": ["a", "b"], "target": "y", "start": "now"});
    let (status, body) = put_at(&base, "late", Some(ADMIN), &now_decl);
    let m = body["error"]["message"].as_str().unwrap_or_default();
    assert_eq!(status, 400, "{body}");
    assert!(
        m.contains("start = \"now\"") && m.contains("earliest, latest"),
        "{m}"
    );
    declare(&base, "late", "s.late", "latest");
    declare(&base, "time", "s.time", &half_an_hour_ago);
    wait_n(&base, "time", 150, &log);
    assert_ols_of(&base, "time", dir.path(), 100..250);
    let before = metrics_of(&base)
        .lines()
        .find(|l| l.starts_with("ravel_ingest_messages_before_start_total{stream=\"time\"}"))
        .map(|l| l.rsplit(' ').next().unwrap().to_string());
    assert_eq!(
        before.as_deref(),
        Some("100"),
        "the events before the start are counted"
    );
    // The end is taken (and saved) when the declaration is applied: rows after it count.
    wait_within(
        "the stream starting at the end has its checkpoint",
        &log,
        Duration::from_secs(30),
        || {
            ravel::checkpoint::path(&dir.path().join("state"), "late")
                .exists()
                .then_some(())
        },
    );
    send_events_to(&brokers, "s.late", 200..300);
    send_rows_to(&brokers, "s.file", 100..130);
    wait_n(&base, "late", 100, &log);
    wait_n(&base, "file", 30, &log);
    assert_ols_of(&base, "late", dir.path(), 200..300);
    std::thread::sleep(Duration::from_millis(500));
    p.signal("-KILL");
    p.wait();
    send_events_to(&brokers, "s.late", 300..350);
    send_rows_to(&brokers, "s.file", 130..160);
    let (_p, base) = serve(dir.path(), &brokers, 1);
    let log = dir.path().join("serve1.log");
    wait_n(&base, "late", 150, &log);
    wait_n(&base, "time", 150, &log);
    wait_n(&base, "file", 60, &log);
    assert_ols_of(&base, "late", dir.path(), 200..350);
    assert_ols_of(&base, "time", dir.path(), 100..250);
}

#[test]
fn a_stream_declared_over_the_api_is_folded_kept_changed_and_retired_while_the_others_stay_exact() {
    let brokers = with_topics(&[
        ("t.file", 3),
        ("t.file.dlq", 1),
        // No t.api.dlq and no t.pred: the PUTs create the topics ravel owns (issue 59).
        ("t.api", 2),
        ("t.score", 1),
        ("t.score.dlq", 1),
        ("t.genes", 1),
        ("t.genes.dlq", 1),
    ]);
    let state = tempfile::tempdir().unwrap();
    let work = tempfile::tempdir().unwrap();
    let mut file_n = 500;
    send_file_rows(&brokers, 0..file_n);
    let svc = TestService::start(service_config(state.path(), ADMIN), &brokers);
    svc.wait_rows("file", file_n as u64);

    // Access: no token, a wrong one, and the write token are refused.
    let decl = json!({"topic": "t.api", "features": ["a", "b"], "target": "y"});
    assert_eq!(put(&svc, "api", None, &decl).0, 401);
    let (status, body) = put(&svc, "api", Some("not-the-admin-token-at-all"), &decl);
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (401, Some("unauthorized")),
        "{body}"
    );
    let (status, body) = request(
        &svc.url(""),
        reqwest::Method::DELETE,
        "/v1/streams/file",
        None,
        None,
    );
    assert_eq!(status, 401, "{body}");
    // A bad declaration names the key, as the config file does; a file's name is refused.
    let (status, body) = put(
        &svc,
        "api",
        Some(ADMIN),
        &json!({"topic": "t.api", "features": ["a", "b"], "taks": "regression"}),
    );
    let m = body["error"]["message"].as_str().unwrap_or_default();
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], "invalid_declaration");
    assert!(
        m.contains("\"taks\"") && m.contains("did you mean \"task\""),
        "{m}"
    );
    let (status, body) = put(
        &svc,
        "api",
        Some(ADMIN),
        &json!({"topic": "t.api", "features": ["a", "b"], "cv": {"folds": 40}}),
    );
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("cv.folds = 40"),
        "{body}"
    );
    // A topic the cluster does not have is named, with the command that creates it, and
    // nothing is declared.
    let (status, body) = put(
        &svc,
        "api",
        Some(ADMIN),
        &json!({"topic": "t.apii", "features": ["a", "b"], "target": "y"}),
    );
    let m = body["error"]["message"].as_str().unwrap_or_default();
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], "invalid_declaration");
    assert!(
        m.contains("topic 't.apii' (stream) does not exist")
            && m.contains("t.apii:")
            && !m.contains("  "),
        "{m}"
    );
    // So is a stream whose schemas come from a Schema Registry that does not answer, as
    // `ravel check` would say it.
    let (status, body) = put(
        &svc,
        "api",
        Some(ADMIN),
        &json!({"topic": "t.api", "features": ["a", "b"], "target": "y", "format": "avro"}),
    );
    let m = body["error"]["message"].as_str().unwrap_or_default();
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], "invalid_declaration");
    assert!(
        m.contains("http://127.0.0.1:1/registry") && m.contains("schema_registry.url"),
        "{m}"
    );
    let (status, body) = put(&svc, "file", Some(ADMIN), &decl);
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (409, Some("declaration_conflict")),
        "{body}"
    );
    let (status, body) = put(
        &svc,
        "api",
        Some(ADMIN),
        &json!({"topic": "t.file", "features": 3}),
    );
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("topic 't.file' is used by two streams"),
        "{body}"
    );
    assert_eq!(svc.get("/v1/streams/api").0, 404);

    // Declared: folded, OLS as numpy's; the file stream reads on, exact.
    let mut api_n = 400;
    send_events(&brokers, 0..api_n);
    // The topic's fields, proposed from its latest messages (the console's form), with the
    // admin token only; bounded; a topic the cluster lacks named.
    let fields = |q: &str, token: Option<&str>| {
        request(
            &svc.url(""),
            reqwest::Method::GET,
            &format!("/v1/topics/{q}"),
            token,
            None,
        )
    };
    let (status, f) = fields("t.api/fields?events=50", Some(ADMIN));
    assert_eq!(status, 200, "{f}");
    assert_eq!(
        (f["sampled"].as_u64(), f["events"].as_u64()),
        (Some(50), Some(50)),
        "{f}"
    );
    for name in ["a", "b", "y"] {
        let seen = f["fields"]
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["path"] == name);
        assert_eq!(
            seen.map(|x| (x["kind"].clone(), x["seen"].clone())),
            Some((json!("number"), json!(50))),
            "{f}"
        );
    }
    // The field named like a target is proposed as the target, not as a feature.
    assert_eq!(
        f["proposal"],
        json!({"topic": "t.api", "features": ["a", "b"], "target": "y"})
    );
    assert_eq!(fields("t.api/fields", None).0, 401);
    let (status, body) = fields("t.api/fields?events=5000", Some(ADMIN));
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (400, Some("invalid_query")),
        "{body}"
    );
    let (status, body) = fields("t.nope/fields", Some(ADMIN));
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("'t.nope' does not exist"),
        "{body}"
    );
    assert_eq!(topic_partitions(&brokers, "t.api.dlq"), None);
    let (status, body) = put(&svc, "api", Some(ADMIN), &decl);
    assert_eq!(status, 201, "{body}");
    assert_eq!(
        (body["origin"].as_str(), body["outcome"].as_str()),
        (Some("api"), Some("created"))
    );
    // Its dead-letter topic did not exist: the PUT created it on the running broker
    // (dlq.create_topics, on by default). The embedded broker creates it through a metadata
    // request, with its own default partition count (logged, as at a start).
    assert!(topic_partitions(&brokers, "t.api.dlq").is_some());
    assert!(body["by"].as_str().unwrap().contains("127.0.0.1"), "{body}");
    let (status, again) = put(&svc, "api", Some(ADMIN), &decl);
    assert_eq!(
        (status, again["outcome"].as_str()),
        (200, Some("unchanged")),
        "{again}"
    );
    send_file_rows(&brokers, file_n..file_n + 300);
    file_n += 300;
    svc.wait_rows("api", api_n as u64);
    svc.wait_rows("file", file_n as u64);
    assert_ols_is_numpys(&svc, work.path(), api_n);
    let (_, d) = svc.get("/v1/streams/api/declaration");
    assert_eq!(
        (d["origin"].as_str(), d["declaration"]["topic"].as_str()),
        (Some("api"), Some("t.api")),
        "{d}"
    );
    let (_, d) = svc.get("/v1/streams/file/declaration");
    assert_eq!(d["origin"], "file", "{d}");
    let (_, list) = svc.get("/v1/streams");
    assert_eq!(list["streams"].as_array().unwrap().len(), 2, "{list}");

    // A scorer declared over the API scores events with the declared stream's model, at
    // once; one on a stream the service lacks is refused.
    let scorer =
        |stream: &str| json!({"stream": stream, "topic": "t.score", "output_topic": "t.pred"});
    let put_scorer = |svc: &TestService, body: &Value| {
        request(
            &svc.url(""),
            reqwest::Method::PUT,
            "/v1/scorers/sc",
            Some(ADMIN),
            Some(body),
        )
    };
    let (status, body) = put_scorer(&svc, &scorer("nope"));
    assert_eq!(status, 400, "{body}");
    assert!(
        body["error"]["message"].as_str().unwrap().contains("nope"),
        "{body}"
    );
    assert_eq!(topic_partitions(&brokers, "t.pred"), None);
    assert_eq!(put_scorer(&svc, &scorer("api")).0, 201);
    // Its output topic likewise (kafka.create_topics).
    assert!(topic_partitions(&brokers, "t.pred").is_some());
    let (status, d) = svc.get("/v1/scorers/sc");
    assert_eq!((status, d["origin"].as_str()), (200, Some("api")), "{d}");
    let score_events = |range: std::ops::Range<usize>| send_events_to(&brokers, "t.score", range);
    score_events(0..20);
    let model = post(
        &svc.url(""),
        "/v1/streams/api/model",
        &json!({"method": "lasso", "k": 2}),
    )
    .1;
    let predictions = read_topic(&brokers, "t.pred", 20);
    assert_eq!(predictions.len(), 20);
    // Each is the model's (the stream holds still meanwhile): intercept + beta . (a, b).
    let beta = intercept_and(&model, &["a", "b"]);
    for (i, (payload, _)) in predictions.iter().enumerate() {
        let v: Value = serde_json::from_slice(payload).unwrap();
        let (a, b, _) = event(i);
        let want = beta[0] + beta[1] * a + beta[2] * b;
        let got = v["prediction"].as_f64().unwrap();
        assert!(
            (got - want).abs() <= 1e-9 * want.abs().max(1.0),
            "{v} vs {want}"
        );
    }

    // A feature stream declared over the API reads its topic's columns: with 20 samples of
    // y = 3 c0 - 2 c1 (+ small noise) and five columns, online substitution keeps c0 and c1.
    let (status, body) = request(
        &svc.url(""),
        reqwest::Method::PUT,
        "/v1/feature-streams/genes",
        Some(ADMIN),
        Some(&json!({"topic": "t.genes", "n": 20, "s": 2})),
    );
    assert_eq!(
        (status, body["origin"].as_str()),
        (201, Some("api")),
        "{body}"
    );
    let column = |j: usize| -> Vec<f64> {
        (0..20)
            .map(|i| (((i * 31 + j * 17) * 7919) % 101) as f64 / 50.0 - 1.0)
            .collect()
    };
    let y: Vec<f64> = (0..20)
        .map(|i| 3.0 * column(0)[i] - 2.0 * column(1)[i] + ((i * 13) % 7) as f64 * 1e-3)
        .collect();
    let mut columns = vec![serde_json::to_vec(&json!({ "labels": y })).unwrap()];
    columns.extend((0..5).map(|j| {
        serde_json::to_vec(&json!({"feature": format!("c{j}"), "values": column(j)})).unwrap()
    }));
    send(&brokers, "t.genes", None, &columns, &[]);
    let selected = |v: &Value| -> Vec<String> {
        let mut names: Vec<String> = v["selected"]
            .as_array()
            .unwrap()
            .iter()
            .map(|f| f["name"].as_str().unwrap().to_string())
            .collect();
        names.sort();
        names
    };
    let v = svc.wait_feature_offset("genes", 6);
    assert_eq!(selected(&v), ["c0", "c1"], "{v}");

    // A restart keeps the declarations and their state; both streams read on from where they
    // stopped, the scorer scores on, and the feature stream reads its topic again.
    std::thread::sleep(Duration::from_millis(800));
    svc.stop().unwrap();
    send_events(&brokers, api_n..api_n + 200);
    api_n += 200;
    send_file_rows(&brokers, file_n..file_n + 200);
    file_n += 200;
    let svc = TestService::start(service_config(state.path(), ADMIN), &brokers);
    assert_eq!(svc.get("/v1/streams/api/declaration").1["origin"], "api");
    svc.wait_rows("api", api_n as u64);
    svc.wait_rows("file", file_n as u64);
    assert_ols_is_numpys(&svc, work.path(), api_n);
    assert_eq!(svc.get("/v1/scorers/sc").1["origin"], "api");
    let (_, d) = svc.get("/v1/feature-streams/genes/declaration");
    assert_eq!(
        (d["origin"].as_str(), d["declaration"]["s"].as_u64()),
        (Some("api"), Some(2)),
        "{d}"
    );
    assert_eq!(selected(&svc.wait_feature_offset("genes", 6)), ["c0", "c1"]);
    let (status, body) = request(
        &svc.url(""),
        reqwest::Method::DELETE,
        "/v1/feature-streams/genes",
        Some(ADMIN),
        None,
    );
    assert_eq!(
        (status, body["state"].as_str()),
        (200, Some("stopped")),
        "{body}"
    );
    assert_eq!(svc.get("/v1/feature-streams/genes").0, 404);
    score_events(20..30);
    assert_eq!(read_topic(&brokers, "t.pred", 30).len(), 30);

    // The scorer's stream cannot change under it; retired, the scorer stops at once.
    let (status, body) = put(
        &svc,
        "api",
        Some(ADMIN),
        &json!({"topic": "t.api", "features": ["a", "b"], "target": "y", "cv": {"folds": 2}}),
    );
    assert_eq!(status, 409, "{body}");
    assert!(
        body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("scorer(s) sc"),
        "{body}"
    );
    let (status, body) = request(
        &svc.url(""),
        reqwest::Method::DELETE,
        "/v1/scorers/sc",
        Some(ADMIN),
        None,
    );
    assert_eq!(
        (status, body["state"].as_str()),
        (200, Some("stopped")),
        "{body}"
    );
    assert_eq!(svc.get("/v1/scorers/sc").0, 404);
    score_events(30..40);
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(end_offsets(&brokers, "t.pred", 1), vec![30]);

    // A changed declaration starts afresh from the beginning of its topic.
    let changed =
        json!({"topic": "t.api", "features": ["a", "b"], "target": "y", "cv": {"folds": 2}});
    let (status, body) = put(&svc, "api", Some(ADMIN), &changed);
    assert_eq!(
        (status, body["outcome"].as_str()),
        (200, Some("replaced")),
        "{body}"
    );
    send_file_rows(&brokers, file_n..file_n + 100);
    file_n += 100;
    svc.wait_rows("api", api_n as u64);
    svc.wait_rows("file", file_n as u64);
    assert_ols_is_numpys(&svc, work.path(), api_n);

    // Retired: no longer served, its checkpoint deleted with state=drop, gone after a
    // restart; the file stream goes on, exact.
    let (status, body) = request(
        &svc.url(""),
        reqwest::Method::DELETE,
        "/v1/streams/api?state=drop",
        Some(ADMIN),
        None,
    );
    assert_eq!(
        (status, body["state"].as_str()),
        (200, Some("dropped")),
        "{body}"
    );
    assert_eq!(svc.get("/v1/streams/api").0, 404);
    let (status, body) = request(
        &svc.url(""),
        reqwest::Method::DELETE,
        "/v1/streams/api",
        Some(ADMIN),
        None,
    );
    assert_eq!(status, 404, "{body}");
    send_events(&brokers, api_n..api_n + 50);
    send_file_rows(&brokers, file_n..file_n + 100);
    file_n += 100;
    svc.wait_rows("file", file_n as u64);
    wait_within(
        "the retired stream's checkpoint deleted",
        Path::new("/dev/null"),
        Duration::from_secs(10),
        || (!ravel::checkpoint::path(state.path(), "api").exists()).then_some(()),
    );
    svc.stop().unwrap();
    let svc = TestService::start(service_config(state.path(), ADMIN), &brokers);
    assert_eq!(svc.get("/v1/streams/api").0, 404);
    svc.wait_rows("file", file_n as u64);
    let (status, body) = svc.get("/v1/streams/api/declaration");
    assert_eq!(status, 404, "{body}");
    svc.stop().unwrap();

    // Without an admin token configured, declarations are off: 403.
    let svc = TestService::start(service_config(state.path(), ""), &brokers);
    let (status, body) = put(&svc, "api", Some(ADMIN), &decl);
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (403, Some("forbidden")),
        "{body}"
    );
}

/// Issue 49's check on two replicas of one group with the kafka store: the declarations live
/// in the group's state topic. A stream declared on one replica is folded by both (each its
/// partitions, each answering for every row), its n and OLS equal numpy's, also across a
/// SIGKILL of the other replica, which has the declaration again from the topic when it
/// restarts; changed on that replica (with a start time), both start it afresh and fold only
/// the events after its start (the old declaration's states under the same keys are not
/// restored into it); retired with its state
/// dropped, both stop serving it. The file stream's n stays exact throughout.
#[test]
fn two_replicas_follow_the_declarations_in_the_state_topic() {
    let group = "declared-pair";
    let brokers = with_topics(&[
        ("g.file", 2),
        ("g.file.dlq", 1),
        ("g.api", 2),
        ("g.api.dlq", 1),
        ("declared-pair.state", 3),
    ]);
    let dir = tempfile::tempdir().unwrap();
    ConfigFile::new(group)
        .quick_rejoin()
        .set("state.store", "kafka")
        .set("state.checkpoint_interval_ms", 300)
        .stream("file", "g.file", 3)
        .set("http.admin_token", ADMIN)
        .write(dir.path());
    // Events before 450 are stamped an hour ago, for the changed declaration's start.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let events_at = |range: std::ops::Range<usize>, ts: i64| {
        let stamped: Vec<(Vec<u8>, i64)> = range.map(|i| (event_json(i), ts)).collect();
        send_stamped(&brokers, "g.api", &stamped);
    };
    let an_hour_ago = now - 3_600_000;
    send_rows_to(&brokers, "g.file", 0..300);
    events_at(0..300, an_hour_ago);
    let (_a, a) = serve(dir.path(), &brokers, 0);
    let (mut b_proc, mut b) = serve(dir.path(), &brokers, 1);
    let logs = |run: usize| dir.path().join(format!("serve{run}.log"));
    let both = |a: &str, b: &str, b_run: usize, stream: &str, n: u64| {
        wait_n(a, stream, n, &logs(0));
        wait_n(b, stream, n, &logs(b_run));
    };

    let put_api = |base: &str, decl: &Value| put_at(base, "api", Some(ADMIN), decl);
    let decl = json!({"topic": "g.api", "features": ["a", "b"], "target": "y"});
    let (status, body) = put_api(&a, &decl);
    assert_eq!(status, 201, "{body}");
    // The other replica picks it up from the topic.
    wait_for("replica 1 serves the declared stream", &logs(1), || {
        let (_, d) = get(&b, "/v1/streams/api/declaration");
        (d["origin"] == "api").then_some(())
    });
    both(&a, &b, 1, "api", 300);
    both(&a, &b, 1, "file", 300);
    events_at(300..400, an_hour_ago);
    both(&a, &b, 1, "api", 400);
    assert_ols_everywhere(&[&a, &b], "api", dir.path(), 0..400);

    // SIGKILL replica 1; rows arrive while it is down; its restart reads the declaration
    // from the topic again.
    std::thread::sleep(Duration::from_millis(600));
    b_proc.signal("-KILL");
    b_proc.wait();
    events_at(400..450, an_hour_ago);
    send_rows_to(&brokers, "g.file", 300..350);
    let (b_proc2, b2) = serve(dir.path(), &brokers, 2);
    (b_proc, b) = (b_proc2, b2);
    let (_, d) = get(&b, "/v1/streams/api/declaration");
    assert_eq!(d["origin"], "api", "{d}");
    both(&a, &b, 2, "api", 450);
    both(&a, &b, 2, "file", 350);
    assert_ols_everywhere(&[&a, &b], "api", dir.path(), 0..450);

    // Changed on replica 2 (its features in another order, on the same topic, from half an
    // hour ago): both start it afresh, and fold only the events after its start. A state of
    // the first declaration restored into it would give each coefficient the other feature's
    // name, and 450 rows too many.
    let half_an_hour_ago = rfc3339(now - 1_800_000);
    let changed = json!({
        "topic": "g.api", "features": ["b", "a"], "target": "y", "start": half_an_hour_ago
    });
    let (status, body) = put_api(&b, &changed);
    assert_eq!(status, 200, "{body}");
    wait_for("replica 0 reads the changed declaration", &logs(0), || {
        let (_, d) = get(&a, "/v1/streams/api/declaration");
        (d["declaration"]["features"][0] == "b").then_some(())
    });
    events_at(450..500, now);
    both(&a, &b, 2, "api", 50);
    assert_ols_everywhere(&[&a, &b], "api", dir.path(), 450..500);

    // Retired on replica 0, its state dropped: neither serves it; the file stream goes on.
    let (status, body) = request(
        &a,
        reqwest::Method::DELETE,
        "/v1/streams/api?state=drop",
        Some(ADMIN),
        None,
    );
    assert_eq!(status, 200, "{body}");
    wait_for("replica 2 retires the stream", &logs(2), || {
        (get(&b, "/v1/streams/api").0 == 404).then_some(())
    });
    assert_eq!(get(&a, "/v1/streams/api").0, 404);
    send_rows_to(&brokers, "g.file", 350..400);
    both(&a, &b, 2, "file", 400);
    drop(b_proc);
}

/// `start = "latest"` with the kafka store, on a stream of the file and on one declared over
/// the API: each partition starts at its end when first assigned, and that position is saved
/// as its state at once (the checkpoint count rises with no row folded), so a SIGKILL right
/// after keeps it: the restart folds exactly the events produced after the start, n and OLS
/// equal numpy's on those.
#[test]
fn with_the_kafka_store_latest_starts_each_partition_at_its_end_and_keeps_it() {
    let brokers = with_topics(&[
        ("k.late", 2),
        ("k.late.dlq", 1),
        ("k.api", 2),
        ("k.api.dlq", 1),
        ("latest-kafka.state", 3),
    ]);
    let dir = tempfile::tempdir().unwrap();
    // No periodic checkpoint within the test: only the saves made at once count.
    ConfigFile::new("latest-kafka")
        .quick_rejoin()
        .set("state.store", "kafka")
        .set("state.checkpoint_interval_ms", 600_000)
        .stream("late", "k.late", vec!["a", "b"])
        .stream_key("target", "y")
        .stream_key("start", "latest")
        .set("http.admin_token", ADMIN)
        .write(dir.path());
    send_events_to(&brokers, "k.late", 0..200);
    send_events_to(&brokers, "k.api", 0..200);
    let (mut p, base) = serve(dir.path(), &brokers, 0);
    let log = dir.path().join("serve0.log");
    // Both partitions positioned at their ends and saved, before any row is folded.
    let saved_at_end = |base: &str, stream: &str| {
        wait_for(
            &format!("{stream}: both partitions start at their end, saved"),
            &log,
            || {
                let text = std::fs::read_to_string(&log).unwrap_or_default();
                let positioned = text
                    .lines()
                    .filter(|l| l.contains("partition starts at its end") && l.contains(stream))
                    .count();
                let label = format!("ravel_checkpoints_total{{stream=\"{stream}\"}}");
                let saved = sample(&metrics_of(base), &label).unwrap_or(0.0);
                (positioned == 2 && saved >= 2.0).then_some(())
            },
        )
    };
    saved_at_end(&base, "late");
    let decl = json!({"topic": "k.api", "features": ["a", "b"], "target": "y", "start": "latest"});
    let (status, body) = put_at(&base, "api", Some(ADMIN), &decl);
    assert_eq!(status, 201, "{body}");
    saved_at_end(&base, "api");
    assert_eq!(stream_n(&base, "late"), Some(0));
    assert_eq!(stream_n(&base, "api"), Some(0));

    // Killed before any row came: the restart goes on from the saved ends, not from the
    // ends it would find now.
    p.signal("-KILL");
    p.wait();
    send_events_to(&brokers, "k.late", 200..300);
    send_events_to(&brokers, "k.api", 200..260);
    let (_p, base) = serve(dir.path(), &brokers, 1);
    let log = dir.path().join("serve1.log");
    wait_n(&base, "late", 100, &log);
    wait_n(&base, "api", 60, &log);
    assert_ols_of(&base, "late", dir.path(), 200..300);
    assert_ols_of(&base, "api", dir.path(), 200..260);
    send_events_to(&brokers, "k.late", 300..350);
    wait_n(&base, "late", 150, &log);
    assert_ols_of(&base, "late", dir.path(), 200..350);
}

/// Issue 59: on a topic holding 3,000 events, a declaration with a misspelled field and a
/// misspelled target is refused (422), the answer naming both and their likely intended names;
/// with `absent_fields=accept` it is declared, the warning in the answer; the right names are
/// found in the data, and the stream folds every event. A declaration on an empty topic is
/// accepted, the answer saying there was nothing to check. The proposal of the topic's fields
/// leaves out the target and the identifiers (by name, and a rising counter).
#[test]
fn a_declaration_is_checked_against_its_topics_events() {
    let brokers = with_topics(&[
        ("c.sales", 3),
        ("c.sales.dlq", 1),
        ("c.empty", 2),
        ("c.empty.dlq", 1),
    ]);
    let state = tempfile::tempdir().unwrap();
    let svc = TestService::start(service_config(state.path(), ADMIN), &brokers);
    let events: Vec<Vec<u8>> = (0..3000)
        .map(|i| {
            let (sqft, rooms) = (50.0 + (i * 37 % 101) as f64, (i % 5 + 1) as f64);
            let price = 1000.0 + 30.0 * sqft + 500.0 * rooms + (i * 7919 % 13) as f64;
            serde_json::to_vec(
                &json!({"order_id": format!("o-{i}"), "seq": i, "city": "Oslo",
                "sale": {"sqft": sqft, "rooms": rooms}, "price": price}),
            )
            .unwrap()
        })
        .collect();
    send(&brokers, "c.sales", None, &events, &[]);

    let put_q = |name: &str, query: &str, body: &Value| {
        request(
            &svc.url(""),
            reqwest::Method::PUT,
            &format!("/v1/streams/{name}{query}"),
            Some(ADMIN),
            Some(body),
        )
    };
    let typo =
        json!({"topic": "c.sales", "features": ["sale.sqtf", "sale.rooms"], "target": "prce"});
    let (status, body) = put(&svc, "sales", Some(ADMIN), &typo);
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (422, Some("absent_fields")),
        "{body}"
    );
    let m = body["error"]["message"].as_str().unwrap();
    for part in [
        "field 'sale.sqtf' (did you mean sale.sqft?)",
        "the target 'prce' (did you mean price?)",
        "?absent_fields=accept",
    ] {
        assert!(m.contains(part), "{part:?} not in {m}");
    }
    assert!(!m.contains("'sale.rooms'"), "{m}");
    // Refused: nothing declared, its dead-letter topic aside.
    assert_eq!(svc.get("/v1/streams/sales").0, 404);
    let (status, body) = put_q("sales", "?absent_fields=yes", &typo);
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (400, Some("invalid_query")),
        "{body}"
    );
    // Accepted with the override: the warning in the answer.
    let (status, body) = put_q("sales", "?absent_fields=accept", &typo);
    assert_eq!(status, 201, "{body}");
    let check = &body["fields_check"];
    assert_eq!(check["outcome"], "absent_accepted", "{body}");
    let absent: Vec<(&str, &str)> = (check["absent"].as_array().unwrap().iter())
        .map(|a| (a["field"].as_str().unwrap(), a["role"].as_str().unwrap()))
        .collect();
    assert_eq!(
        absent,
        [("sale.sqtf", "field"), ("prce", "target")],
        "{body}"
    );
    assert!(
        check["note"]
            .as_str()
            .unwrap()
            .contains("did you mean sale.sqft"),
        "{body}"
    );
    // The bound: 10 of each of the 3 partitions' latest messages.
    assert_eq!(
        (check["sampled"].as_u64(), check["events"].as_u64()),
        (Some(30), Some(30)),
        "{body}"
    );
    // The right names: found in the data (a changed declaration, read afresh).
    let right =
        json!({"topic": "c.sales", "features": ["sale.sqft", "sale.rooms"], "target": "price"});
    let (status, body) = put(&svc, "sales", Some(ADMIN), &right);
    assert_eq!(
        (
            status,
            body["outcome"].as_str(),
            body["fields_check"]["outcome"].as_str()
        ),
        (200, Some("replaced"), Some("found")),
        "{body}"
    );
    assert_eq!(body["fields_check"]["absent"], json!([]), "{body}");
    svc.wait_rows("sales", 3000);
    // An empty topic: nothing to check, said so.
    let (status, body) = put(
        &svc,
        "empty",
        Some(ADMIN),
        &json!({"topic": "c.empty", "features": ["a"], "target": "b"}),
    );
    assert_eq!(status, 201, "{body}");
    assert_eq!(body["fields_check"]["outcome"], "empty_topic", "{body}");
    assert!(
        body["fields_check"]["note"]
            .as_str()
            .unwrap()
            .contains("holds no message yet"),
        "{body}"
    );

    // The proposal: the target named, identifiers left out with why.
    let (status, f) = request(
        &svc.url(""),
        reqwest::Method::GET,
        "/v1/topics/c.sales/fields?events=60&target=price",
        Some(ADMIN),
        None,
    );
    assert_eq!(status, 200, "{f}");
    assert_eq!(
        f["proposal"],
        json!({"topic": "c.sales", "features": ["sale.rooms", "sale.sqft"], "target": "price"}),
        "{f}"
    );
    let why = |path: &str| {
        (f["fields"].as_array().unwrap().iter())
            .find(|x| x["path"] == path)
            .map(|x| x["left_out"].as_str().unwrap_or("").to_string())
            .unwrap_or_default()
    };
    for (path, reason) in [
        ("seq", "only increase in each partition"),
        ("order_id", "a string"),
        ("city", "a string"),
        ("price", "the target"),
        ("sale.sqft", ""),
    ] {
        assert!(
            why(path).contains(reason) && (reason.is_empty() == why(path).is_empty()),
            "{path}: {:?}",
            why(path)
        );
    }
}
