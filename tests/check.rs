//! Issue 36 item 3: `ravel check`, the preflight, run as the real binary against the embedded
//! broker (librdkafka's mock cluster, in this process) and a Schema Registry served here (the
//! REST calls the check makes, `GET /subjects` and `GET /schemas/types`, with basic auth). A correct setup
//! passes (text and JSON); a missing input topic, a missing dead-letter topic that ravel is
//! told not to create, a topic the cluster denies, a broker that does not answer and a
//! registry that does not answer or refuses the credentials are each a problem with its fix;
//! secrets never appear; and the check never creates a topic.

use crate::common::*;
use axum::Router;
use axum::http::{HeaderMap, StatusCode};
use axum::routing::get;
use ravel::broker::EmbeddedBroker;
use rdkafka::types::RDKafkaRespErr;
use serde_json::{Value, json};
use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

const KAFKA_PASSWORD: &str = "kafka-pass-5d1f";
const REGISTRY_PASSWORD: &str = "registry-pass-83ce";

/// `ravel check --config dir/ravel.toml --format FORMAT` with `env`: (exit success, stdout,
/// how long it took).
fn check(dir: &Path, format: &str, env: &[(&str, &str)]) -> (bool, String, Duration) {
    let started = Instant::now();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ravel"));
    cmd.args([
        "check",
        "--config",
        dir.join("ravel.toml").to_str().unwrap(),
        "--format",
        format,
        "--timeout-ms",
        "3000",
    ]);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let stdout = String::from_utf8(out.stdout).unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        !stderr.contains(KAFKA_PASSWORD) && !stderr.contains(REGISTRY_PASSWORD),
        "{stderr}"
    );
    (out.status.success(), stdout, started.elapsed())
}

/// The JSON report: its findings by `check`.
fn findings(stdout: &str) -> Vec<Value> {
    let v: Value = serde_json::from_str(stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
    let list = v.as_array().expect("a list of checks").clone();
    for f in &list {
        let keys: Vec<&str> = f.as_object().unwrap().keys().map(String::as_str).collect();
        assert_eq!(keys, ["check", "detail", "fix", "status"], "{f}");
        assert!(
            ["ok", "info", "problem"].contains(&f["status"].as_str().unwrap()),
            "{f}"
        );
    }
    list
}

fn write_config(dir: &Path, brokers: &str, body: &str) {
    std::fs::write(
        dir.join("ravel.toml"),
        format!("[kafka]\nbrokers = \"{brokers}\"\ngroup_id = \"check\"\n{body}"),
    )
    .unwrap();
}

const STREAM: &str = r#"
[[streams]]
name = "sales"
topic = "TOPIC"
features = 3
"#;

/// A Schema Registry's `GET /subjects` and `GET /schemas/types` behind basic auth (user
/// "ravel").
fn registry() -> String {
    async fn types(h: HeaderMap) -> (StatusCode, axum::Json<Value>) {
        answer(h, json!(["JSON", "PROTOBUF", "AVRO"]))
    }
    async fn subjects(h: HeaderMap) -> (StatusCode, axum::Json<Value>) {
        answer(h, json!(["c.ok-value"]))
    }
    fn answer(h: HeaderMap, ok: Value) -> (StatusCode, axum::Json<Value>) {
        use base64::Engine;
        let want = format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(format!("ravel:{REGISTRY_PASSWORD}"))
        );
        if h.get("authorization").and_then(|v| v.to_str().ok()) == Some(want.as_str()) {
            (StatusCode::OK, axum::Json(ok))
        } else {
            (
                StatusCode::UNAUTHORIZED,
                axum::Json(json!({"error_code": 401, "message": "Unauthorized"})),
            )
        }
    }
    let app = Router::new()
        .route("/schemas/types", get(types))
        .route("/subjects", get(subjects));
    serve_stub(app)
}

/// A stream of Avro records from the registry at `url` with `password`.
fn avro_stream(topic: &str, url: &str, password: &str) -> String {
    format!(
        r#"
[schema_registry]
url = "{url}"
basic_auth_user = "ravel"
basic_auth_password = "{password}"
timeout_ms = 2000
[[streams]]
name = "orders"
topic = "{topic}"
format = "avro"
target = "price"
features = ["sqft", "rooms"]
"#
    )
}

#[test]
fn a_correct_setup_passes_in_text_and_json_and_shows_no_secret() {
    let broker = EmbeddedBroker::start(1).unwrap();
    let brokers = broker.bootstrap_servers().to_string();
    for (t, p) in [("c.ok", 2), ("c.ok.dlq", 1)] {
        broker.create_topic(t, p).unwrap();
    }
    let url = registry();
    let dir = tempfile::tempdir().unwrap();
    // The brokers come from the environment layer, over the file's, as with `ravel serve`;
    // the Kafka password from the environment, the registry's from the file.
    write_config(
        dir.path(),
        "file-broker-not-used:9092",
        &format!(
            "[kafka.options]\n\"sasl.username\" = \"alice\"\n\"sasl.password\" = \"${{env:CHECK_KAFKA_PASSWORD}}\"\n{}",
            avro_stream("c.ok", &url, REGISTRY_PASSWORD)
        ),
    );
    let env = [
        ("RAVEL_KAFKA__BROKERS", brokers.as_str()),
        ("CHECK_KAFKA_PASSWORD", KAFKA_PASSWORD),
    ];
    let (ok, text, _) = check(dir.path(), "text", &env);
    assert!(ok, "{text}");
    assert!(
        text.contains(&format!(
            "ok       kafka.brokers: 1 broker answered at {brokers}"
        )),
        "{text}"
    );
    assert!(
        text.contains(
            "ok       topic:c.ok: stream 'orders' reads it: exists, 2 partitions, replication 1"
        ),
        "{text}"
    );
    assert!(text.trim_end().ends_with("info)"), "{text}");
    assert!(text.contains("no problem found"), "{text}");
    for secret in [KAFKA_PASSWORD, REGISTRY_PASSWORD] {
        assert!(!text.contains(secret), "{text}");
    }

    let (ok, out, _) = check(dir.path(), "json", &env);
    assert!(ok, "{out}");
    let list = findings(&out);
    assert!(list.iter().all(|f| f["status"] != "problem"), "{list:#?}");
    assert_eq!(finding(&list, "topic:c.ok.dlq")["status"], "ok");
    assert_eq!(finding(&list, "group:check")["status"], "ok");
    let reg = finding(&list, &format!("schema_registry:{url}"));
    assert_eq!(reg["status"], "ok", "{reg}");
    assert!(
        reg["detail"]
            .as_str()
            .unwrap()
            .contains("accepts ravel's credentials")
    );
    // The effective client configuration, its password redacted.
    let cfg = finding(&list, "kafka.client_config")["detail"]
        .as_str()
        .unwrap();
    assert!(
        cfg.contains("sasl.password = ***")
            && cfg.contains("sasl.username = alice")
            && cfg.contains("client.id = ravel-check-consumer")
            && cfg.contains(&format!("bootstrap.servers = {brokers}")),
        "{cfg}"
    );
    for secret in [KAFKA_PASSWORD, REGISTRY_PASSWORD] {
        assert!(!out.contains(secret), "{out}");
    }
}

#[test]
fn a_missing_input_topic_is_a_problem_with_its_fix_and_the_check_creates_nothing() {
    let broker = EmbeddedBroker::start(1).unwrap();
    let brokers = broker.bootstrap_servers().to_string();
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), &brokers, &STREAM.replace("TOPIC", "c.absent"));
    let (ok, out, _) = check(dir.path(), "json", &[]);
    assert!(!ok, "{out}");
    let list = findings(&out);
    let t = finding(&list, "topic:c.absent");
    assert_eq!(t["status"], "problem", "{t}");
    let detail = t["detail"].as_str().unwrap();
    assert!(
        detail.contains("stream 'sales' reads it: does not exist")
            && detail.contains("kafka.create_topics = false"),
        "{detail}"
    );
    let fix = t["fix"].as_str().unwrap();
    assert!(
        fix.starts_with(&format!(
            "ravel produce --brokers {brokers} --topic c.absent "
        )) && fix.contains("ravel broker with --topic c.absent:4")
            && fix.ends_with("or set kafka.create_topics = true to let ravel create it"),
        "{fix}"
    );
    // The dead-letter topic ravel would create at start is not a problem.
    assert_eq!(finding(&list, "topic:c.absent.dlq")["status"], "info");
    // Neither was created by the check.
    assert_eq!(topic_partitions(&brokers, "c.absent"), None);
    assert_eq!(topic_partitions(&brokers, "c.absent.dlq"), None);

    let (ok, text, _) = check(dir.path(), "text", &[]);
    assert!(!ok);
    assert!(text.contains("PROBLEM  topic:c.absent: "), "{text}");
    assert!(text.contains("         fix: ravel produce"), "{text}");
    assert!(
        text.trim_end()
            .ends_with("1 problem found: ravel will not run as configured until it is fixed"),
        "{text}"
    );
}

#[test]
fn a_missing_dead_letter_topic_is_a_problem_only_when_ravel_may_not_create_it() {
    let (_broker, brokers) = broker_with(&[("c.dl", 1)]);
    let dir = tempfile::tempdir().unwrap();
    let stream = STREAM.replace("TOPIC", "c.dl");
    write_config(
        dir.path(),
        &brokers,
        &format!("[dlq]\ncreate_topics = false\n{stream}"),
    );
    let (ok, out, _) = check(dir.path(), "json", &[]);
    assert!(!ok, "{out}");
    let list = findings(&out);
    let d = finding(&list, "topic:c.dl.dlq");
    assert_eq!(d["status"], "problem", "{d}");
    assert!(
        d["detail"].as_str().unwrap().contains(
            "the dead letters of stream 'sales': does not exist; dlq.create_topics = false"
        ),
        "{d}"
    );
    assert!(
        d["fix"]
            .as_str()
            .unwrap()
            .ends_with("or set dlq.create_topics = true to let ravel create it"),
        "{d}"
    );
    assert_eq!(finding(&list, "topic:c.dl")["status"], "ok");
    // With creation on (the default): ravel will make it, so the check passes.
    write_config(dir.path(), &brokers, &stream);
    let (ok, out, _) = check(dir.path(), "json", &[]);
    assert!(ok, "{out}");
    let d = finding(&findings(&out), "topic:c.dl.dlq").clone();
    assert_eq!(d["status"], "info", "{d}");
    assert!(
        d["detail"]
            .as_str()
            .unwrap()
            .contains("ravel will create it at start (dlq.create_topics = true)"),
        "{d}"
    );
    assert_eq!(topic_partitions(&brokers, "c.dl.dlq"), None);
}

#[test]
fn a_topic_the_cluster_denies_names_the_acl_to_grant() {
    let (broker, brokers) = broker_with(&[("c.acl", 1), ("c.acl.dlq", 1)]);
    broker
        .topic_error(
            "c.acl",
            RDKafkaRespErr::RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED,
        )
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), &brokers, &STREAM.replace("TOPIC", "c.acl"));
    let (ok, out, _) = check(dir.path(), "json", &[]);
    assert!(!ok, "{out}");
    let list = findings(&out);
    let t = finding(&list, "topic:c.acl");
    assert_eq!(t["status"], "problem", "{t}");
    assert!(
        t["detail"]
            .as_str()
            .unwrap()
            .contains("Kafka denies describe on topic 'c.acl'"),
        "{t}"
    );
    assert_eq!(
        t["fix"],
        format!(
            "kafka-acls.sh --bootstrap-server {brokers} --add --allow-principal User:<ravel's principal> --operation Describe --operation Read --topic c.acl"
        )
    );
}

#[test]
fn an_unreachable_broker_is_a_problem_within_the_timeout_naming_the_address() {
    let brokers = format!("127.0.0.1:{}", free_port());
    let dir = tempfile::tempdir().unwrap();
    write_config(dir.path(), &brokers, &STREAM.replace("TOPIC", "c.gone"));
    let (ok, out, took) = check(dir.path(), "json", &[]);
    assert!(!ok, "{out}");
    // --timeout-ms 3000, and the client's teardown.
    assert!(took < Duration::from_secs(15), "took {took:?}");
    let list = findings(&out);
    let b = finding(&list, "kafka.brokers");
    assert_eq!(b["status"], "problem", "{b}");
    let detail = b["detail"].as_str().unwrap();
    assert!(
        detail.contains(&format!("cannot reach Kafka at {brokers} (kafka.brokers)")),
        "{detail}"
    );
    assert!(
        b["fix"]
            .as_str()
            .unwrap()
            .starts_with("check kafka.brokers"),
        "{b}"
    );
}

#[test]
fn a_registry_that_does_not_answer_or_refuses_the_credentials_is_a_problem() {
    let (_broker, brokers) = broker_with(&[("c.reg", 1), ("c.reg.dlq", 1)]);
    let dir = tempfile::tempdir().unwrap();

    // Nothing listens there.
    let closed = format!("http://127.0.0.1:{}", free_port());
    write_config(
        dir.path(),
        &brokers,
        &avro_stream("c.reg", &closed, REGISTRY_PASSWORD),
    );
    let (ok, out, took) = check(dir.path(), "json", &[]);
    assert!(!ok, "{out}");
    assert!(took < Duration::from_secs(15), "took {took:?}");
    let list = findings(&out);
    let r = finding(&list, &format!("schema_registry:{closed}"));
    assert_eq!(r["status"], "problem", "{r}");
    assert!(
        r["detail"]
            .as_str()
            .unwrap()
            .contains(&format!("cannot reach the Schema Registry at {closed}"))
            && r["detail"].as_str().unwrap().contains("stream 'orders'"),
        "{r}"
    );
    assert!(
        r["fix"].as_str().unwrap().contains("schema_registry.url"),
        "{r}"
    );
    // The Kafka side is fine.
    assert_eq!(finding(&list, "topic:c.reg")["status"], "ok");

    // A registry that answers 401 to a wrong password.
    let url = registry();
    write_config(
        dir.path(),
        &brokers,
        &avro_stream("c.reg", &url, "wrong-password"),
    );
    let (ok, out, _) = check(dir.path(), "json", &[]);
    assert!(!ok, "{out}");
    let r = finding(&findings(&out), &format!("schema_registry:{url}")).clone();
    assert_eq!(r["status"], "problem", "{r}");
    assert!(
        r["detail"].as_str().unwrap().contains(&format!(
            "the Schema Registry at {url} refuses ravel's credentials (401)"
        )),
        "{r}"
    );
    assert!(
        r["fix"].as_str().unwrap().contains("basic_auth_password"),
        "{r}"
    );
    assert!(!out.contains("wrong-password"), "{out}");
}

#[test]
fn an_invalid_configuration_is_a_problem_in_the_report() {
    let dir = tempfile::tempdir().unwrap();
    write_config(
        dir.path(),
        "k:9092",
        "[[streams]]\nname = \"s\"\ntopic = \"t\"\n",
    );
    let (ok, out, _) = check(dir.path(), "json", &[]);
    assert!(!ok);
    let list = findings(&out);
    assert_eq!(list.len(), 1, "{list:#?}");
    assert_eq!(list[0]["check"], "config");
    assert_eq!(list[0]["status"], "problem");
}

#[test]
fn the_state_topic_is_checked_and_its_compaction_said_when_it_cannot_be() {
    let (broker, brokers) = broker_with(&[("c.st", 1), ("c.st.dlq", 1)]);
    let dir = tempfile::tempdir().unwrap();
    let stream = STREAM.replace("TOPIC", "c.st");
    write_config(
        dir.path(),
        &brokers,
        &format!(
            "[state]\nstore = \"kafka\"\ntopic = \"c.st.state\"\ncreate_topic = false\n{stream}"
        ),
    );
    let (ok, out, _) = check(dir.path(), "json", &[]);
    assert!(!ok, "{out}");
    let list = findings(&out);
    let s = finding(&list, "topic:c.st.state");
    assert_eq!(s["status"], "problem", "{s}");
    assert!(
        s["detail"]
            .as_str()
            .unwrap()
            .contains("the state store's changelog")
            && s["fix"]
                .as_str()
                .unwrap()
                .ends_with("or set state.create_topic = true to let ravel create it"),
        "{s}"
    );
    assert_eq!(topic_partitions(&brokers, "c.st.state"), None);
    // Once it exists: fine, and its compaction is said to be unchecked (the embedded broker
    // does not answer DescribeConfigs), not assumed.
    broker.create_topic("c.st.state", 1).unwrap();
    let (ok, out, _) = check(dir.path(), "json", &[]);
    assert!(ok, "{out}");
    let list = findings(&out);
    assert_eq!(finding(&list, "topic:c.st.state")["status"], "ok");
    let c = finding(&list, "topic-config:c.st.state");
    assert_eq!(c["status"], "info", "{c}");
    assert!(
        c["detail"]
            .as_str()
            .unwrap()
            .starts_with("compaction (cleanup.policy = compact) could not be checked"),
        "{c}"
    );
}

#[test]
fn a_scorers_missing_topics_are_named_by_the_scorer() {
    let (_broker, brokers) = broker_with(&[("s.rows", 1), ("s.rows.dlq", 1), ("s.events.dlq", 1)]);
    let dir = tempfile::tempdir().unwrap();
    let body = format!(
        "{}\n[[scorers]]\nname = \"sc\"\nstream = \"sales\"\ntopic = \"s.events\"\noutput_topic = \"s.scores\"\nmodel = {{ method = \"ols\" }}\n",
        STREAM.replace("TOPIC", "s.rows")
    );
    write_config(dir.path(), &brokers, &body);
    let (ok, out, _) = check(dir.path(), "json", &[]);
    assert!(!ok, "{out}");
    let list = findings(&out);
    let events = finding(&list, "topic:s.events");
    assert_eq!(events["status"], "problem", "{events}");
    assert!(
        events["detail"]
            .as_str()
            .unwrap()
            .contains("scorer 'sc' reads its events there: does not exist"),
        "{events}"
    );
    let scores = finding(&list, "topic:s.scores");
    assert!(
        scores["detail"]
            .as_str()
            .unwrap()
            .contains("scorer 'sc' writes its predictions there"),
        "{scores}"
    );
    assert_eq!(topic_partitions(&brokers, "s.events"), None);
    assert_eq!(topic_partitions(&brokers, "s.scores"), None);
}
