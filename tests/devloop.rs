//! Issue 35: from the demo to one's own data with `ravel broker`, as a new user does it: a
//! broker on a fixed port (`--port`), a config with one `[[streams]]`, rows produced with
//! `ravel produce`, `ravel serve`; ready without creating any topic by hand (ravel creates
//! its dead-letter topic), the stream's summary saying what arrived, and the model the same as
//! `ravel fit` on the file. And what the user sees when it goes wrong: a broker that does not
//! answer is named in `/readyz` within 10 s; a stream whose topic nobody writes to says so.

use crate::common::*;
use serde_json::{Value, json};
use std::process::Command;
use std::time::{Duration, Instant};

#[test]
fn own_data_on_ravel_broker_is_ready_without_a_topic_made_by_hand() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port().to_string();
    let (_broker, address) = Proc::start(
        "ravel broker",
        &["broker", "--port", &port],
        &[],
        &dir.path().join("broker.log"),
    );
    // The fixed address, the same at every start.
    assert_eq!(address, format!("127.0.0.1:{port}"));
    // A second broker on that port is refused, saying what to do.
    let second = Command::new(env!("CARGO_BIN_EXE_ravel"))
        .args(["broker", "--port", &port])
        .output()
        .unwrap();
    assert!(!second.status.success());
    let err = String::from_utf8_lossy(&second.stderr);
    assert!(
        err.contains(&format!(
            "cannot listen on 127.0.0.1:{port} (--port {port})"
        )) && err.contains("choose another --port"),
        "{err}"
    );

    // The user's own rows, in a CSV with a header.
    let p = 4;
    let (x, y) = synthetic(p, 2, 3000, 35);
    let cols = ["sqft", "rooms", "age", "floor"].map(String::from);
    let csv = dir.path().join("sales.csv");
    write_csv(&csv, &cols, &x, &y);
    ConfigFile::new("devloop")
        .set("kafka.brokers", address.as_str())
        .set("state.dir", dir.path().join("state").display().to_string())
        .stream("sales", "sales", cols.to_vec())
        .write(dir.path());
    let log = dir.path().join("serve1.log");
    let (_svc, base) = serve(dir.path(), &address, 1);
    // Started before anything was produced: the stream's topic does not exist yet, and
    // /readyz says what creates it on this broker (no kafka-topics.sh here).
    let waiting = wait_for("/readyz naming the stream topic", &log, || {
        try_get(&base, "/readyz")
            .map(|(_, v)| v)
            .filter(|v| v["missing_topics"][0]["topic"] == "sales")
    });
    assert_eq!(
        waiting["missing_topics"].as_array().map(Vec::len),
        Some(1),
        "{waiting}"
    );
    let create_with = waiting["missing_topics"][0]["create_with"]
        .as_str()
        .unwrap();
    assert!(
        create_with.starts_with(&format!("ravel produce --brokers {address} --topic sales ")),
        "{create_with}"
    );
    ravel(&[
        "produce",
        "--brokers",
        &address,
        "--topic",
        "sales",
        "--input",
        csv.to_str().unwrap(),
        "--quiet",
    ]);

    // Ready, with no topic made by hand: ravel made its dead-letter topic.
    let ready = wait_for("/readyz 200", &log, || {
        try_get(&base, "/readyz")
            .filter(|(s, _)| *s == 200)
            .map(|(_, v)| v)
    });
    assert_eq!(ready["missing_topics"], json!([]), "{ready}");
    assert!(topic_partitions(&address, "sales.dlq").is_some());
    let summary = wait_for("every row folded", &log, || {
        try_get(&base, "/v1/streams/sales")
            .map(|(_, v)| v)
            .filter(|v| v["n"].as_u64() == Some(3000))
    });
    assert_eq!(summary["topic"], "sales");
    let arrivals = &summary["arrivals"];
    assert!(arrivals["messages"].as_u64() >= Some(1), "{summary}");
    assert!(
        arrivals["rejected"]
            .as_object()
            .unwrap()
            .values()
            .all(|v| v == 0),
        "{summary}"
    );
    assert_eq!(arrivals["note"], Value::Null, "{summary}");

    // The model is the one `ravel fit` finds in the file.
    let (status, api) = {
        let r = client()
            .post(format!("{base}/v1/streams/sales/model"))
            .json(&json!({"method": "lasso", "k": 2}))
            .send()
            .unwrap();
        (r.status().as_u16(), r.json::<Value>().unwrap())
    };
    assert_eq!(status, 200, "{api}");
    let fit: Value = serde_json::from_str(&ravel(&[
        "fit",
        csv.to_str().unwrap(),
        "--method",
        "lasso",
        "--k",
        "2",
    ]))
    .unwrap();
    assert_same_model(&api, &fit, 1e-9, "lasso k = 2");
}

#[test]
fn an_unreachable_broker_is_named_in_readyz_within_ten_seconds() {
    let port = free_port();
    let brokers = format!("127.0.0.1:{port}");
    let started = Instant::now();
    let svc = TestService::start(one_regression("s", "t.reach", 3, None), &brokers);
    let want = format!("cannot reach Kafka at {brokers} since ");
    let v = loop {
        let (status, v) = svc.get("/readyz");
        if status == 503
            && v["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains(&want))
        {
            break v;
        }
        assert!(
            started.elapsed() < Duration::from_secs(10),
            "/readyz does not say '{want}' within 10 s: {status} {v}"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    let msg = v["error"]["message"].as_str().unwrap();
    assert!(msg.contains("check kafka.brokers"), "{msg}");
    // What cannot be reached is the reason, not its consequence.
    assert!(!msg.contains("not been assigned partitions"), "{msg}");
    let u = &v["kafka_unreachable"];
    assert_eq!(u["brokers"], brokers.as_str());
    let since = u["since"].as_str().unwrap();
    assert!(
        since.len() == 20 && since.ends_with('Z') && msg.contains(since),
        "{since} in {msg}"
    );
    let since_ms = u["since_ms"].as_u64().unwrap();
    let now_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    assert!(since_ms <= now_ms && now_ms - since_ms < 15_000, "{u}");

    // A broker comes up at that address: the reason goes.
    let dir = tempfile::tempdir().unwrap();
    let (_broker, _) = Proc::start(
        "ravel broker",
        &[
            "broker",
            "--port",
            &port.to_string(),
            "--topic",
            "t.reach:2",
        ],
        &[],
        &dir.path().join("broker.log"),
    );
    svc.wait_get(
        "/readyz",
        "still unreachable once the broker runs",
        |_, v| v.get("kafka_unreachable").is_none(),
    );
}

#[test]
fn a_stream_whose_topic_receives_nothing_says_so_and_refusals_are_counted_by_reason() {
    let (_broker, brokers) = broker_with(&[("t.quiet", 1), ("t.loud", 1)]);
    let schema = || ravel::config::FeatureSchema::Count(2);
    let svc = TestService::start(
        config(
            vec![
                stream("quiet", "t.quiet", schema(), ravel_core::Task::Regression),
                stream("loud", "t.loud", schema(), ravel_core::Task::Regression),
            ],
            None,
        ),
        &brokers,
    );
    let (_, quiet) = svc.get("/v1/streams/quiet");
    assert_eq!(quiet["topic"], "t.quiet");
    assert_eq!(quiet["arrivals"]["messages"], 0, "{quiet}");
    let note = quiet["arrivals"]["note"].as_str().unwrap();
    assert!(
        note.contains("no message read from topic 't.quiet'")
            && note.contains("check that producers write to this topic"),
        "{note}"
    );
    assert_eq!(quiet["arrivals"]["alarm"], true, "no row at all: {quiet}");
    // Two good rows, one with three features (the stream has two), one that is not JSON.
    let producer: rdkafka::producer::BaseProducer = rdkafka::config::ClientConfig::new()
        .set("bootstrap.servers", &brokers)
        .create()
        .unwrap();
    for payload in [
        r#"{"x": [1.0, 2.0], "y": 3.0}"#,
        r#"{"x": [1.0, 2.0, 3.0], "y": 4.0}"#,
        "not json",
        r#"{"x": [2.0, 1.0], "y": 0.5}"#,
    ] {
        producer
            .send(rdkafka::producer::BaseRecord::<(), str>::to("t.loud").payload(payload))
            .unwrap();
    }
    rdkafka::producer::Producer::flush(&producer, Duration::from_secs(10)).unwrap();
    let start = Instant::now();
    let loud = loop {
        let (_, v) = svc.get("/v1/streams/loud");
        if v["arrivals"]["messages"] == 4 && v["arrivals"]["dead_letters"]["delivered"] == 2 {
            break v;
        }
        assert!(start.elapsed() < DEADLINE, "{v}");
        std::thread::sleep(Duration::from_millis(100));
    };
    let a = &loud["arrivals"];
    assert_eq!(loud["n"], 2, "{loud}");
    assert_eq!(a["rejected"]["dimension"], 1, "{loud}");
    assert_eq!(a["rejected"]["malformed"], 1, "{loud}");
    assert_eq!(a["rejected"]["non_finite"], 0, "{loud}");
    assert_eq!(a["dead_letters"]["failed"], 0, "{loud}");
    let note = a["note"].as_str().unwrap();
    assert!(
        note.contains("2 of 4 messages refused") && note.contains("'t.loud.dlq'"),
        "{note}"
    );
}
