//! Issue 16: dead letters against a cluster that does not create topics on its own
//! (`allow.auto.create.topics = false`, as production brokers run with
//! `auto.create.topics.enable = false`), through the real binaries.
//!
//! Block (the default): a bad message whose `<topic>.dlq` is missing holds its own partition
//! at the message (not committed past it, across a SIGKILL and restart) while the other
//! partitions keep folding; once the topic exists the copy lands there exactly once with its
//! headers, the partition catches up, and the model equals `ravel fit` on the good rows.
//! Skip: the same stream finishes with every skipped message counted and logged.

mod common;

use common::*;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use serde_json::{Value, json};
use std::path::Path;
use std::time::{Duration, Instant};

const PARTITIONS: i32 = 3;
const P: usize = 3;

/// `dir/ravel.toml`: stream "r" on `topic`, clients that never create topics, fast retries.
fn write_config(dir: &Path, topic: &str, group: &str, on_failure: &str, create_topics: bool) {
    let names: Vec<String> = names(P).iter().map(|n| format!("\"{n}\"")).collect();
    std::fs::write(
        dir.join("ravel.toml"),
        format!(
            r#"
[http]
addr = "127.0.0.1:0"
[kafka]
group_id = "{group}"
create_topics = {create_topics}
topic_partitions = 2
topic_replication = 1
[kafka.options]
"allow.auto.create.topics" = "false"
"session.timeout.ms" = "6000"
"heartbeat.interval.ms" = "500"
[dlq]
on_failure = "{on_failure}"
delivery_timeout_ms = 1500
retry_initial_ms = 200
retry_max_ms = 1000
[state]
dir = "{}"
checkpoint_interval_ms = 300
[demo]
enabled = false
[[streams]]
name = "r"
topic = "{topic}"
features = [{}]
"#,
            dir.join("state").display(),
            names.join(", ")
        ),
    )
    .unwrap();
}

fn serve(dir: &Path, brokers: &str, run: usize) -> (Proc, String, std::path::PathBuf) {
    let log = dir.join(format!("serve{run}.log"));
    let cfg = dir.join("ravel.toml");
    let (p, line) = Proc::start(
        "ravel serve",
        &["serve", "--config", cfg.to_str().unwrap()],
        &[("RAVEL_KAFKA__BROKERS", brokers), ("RUST_LOG", "info")],
        &log,
    );
    let base = line.strip_prefix("listening on ").unwrap().to_string();
    (p, base, log)
}

fn get(base: &str, path: &str) -> (u16, Value) {
    match client().get(format!("{base}{path}")).send() {
        Ok(r) => {
            let s = r.status().as_u16();
            (s, r.json().unwrap_or(Value::Null))
        }
        Err(_) => (0, Value::Null),
    }
}

fn group_client(brokers: &str, group: &str) -> BaseConsumer {
    ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .set("session.timeout.ms", "6000")
        .create()
        .unwrap()
}

/// The group's committed offset per partition (-1: none).
fn committed(brokers: &str, group: &str, topic: &str) -> Vec<i64> {
    let consumer = group_client(brokers, group);
    let mut tpl = TopicPartitionList::new();
    for p in 0..PARTITIONS {
        tpl.add_partition(topic, p);
    }
    let got = consumer
        .committed_offsets(tpl, Duration::from_secs(30))
        .unwrap();
    let out = (0..PARTITIONS)
        .map(|p| match got.find_partition(topic, p).unwrap().offset() {
            Offset::Offset(o) => o,
            _ => -1,
        })
        .collect();
    drop(got);
    out
}

fn high_watermarks(brokers: &str, topic: &str) -> Vec<i64> {
    let consumer = group_client(brokers, "watermarks");
    let mut out = Vec::new();
    for p in 0..PARTITIONS {
        out.push(
            consumer
                .fetch_watermarks(topic, p, Duration::from_secs(30))
                .unwrap()
                .1,
        );
    }
    out
}

/// Polls `f` every 100 ms until it returns Some, or panics with `what` and the log.
fn wait_for<T>(what: &str, log: &Path, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            start.elapsed() < DEADLINE,
            "{what}; log:\n{}",
            std::fs::read_to_string(log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Streams `rows` good rows, one a message, round robin over the partitions, in chunks with
/// short pauses; `bad` messages (partition, after this many rows) go in between. Returns the
/// offset of every bad message.
fn stream_rows(
    brokers: &str,
    topic: &str,
    x: &[f64],
    y: &[f64],
    bad: &[(i32, usize)],
) -> Vec<(i32, i64)> {
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("linger.ms", "5")
        .create()
        .unwrap();
    let mut bad_offsets = Vec::new();
    let mut counts = [0i64; PARTITIONS as usize];
    for (i, yi) in y.iter().enumerate() {
        for &(bp, after) in bad {
            if after == i {
                let payload = b"{not json";
                producer
                    .send(
                        BaseRecord::<[u8], [u8]>::to(topic)
                            .partition(bp)
                            .key(b"bad".as_slice())
                            .payload(payload.as_slice()),
                    )
                    .unwrap();
                bad_offsets.push((bp, counts[bp as usize]));
                counts[bp as usize] += 1;
            }
        }
        let p = (i % PARTITIONS as usize) as i32;
        let row = json!({"x": &x[i * P..(i + 1) * P], "y": yi}).to_string();
        producer
            .send(
                BaseRecord::<[u8], [u8]>::to(topic)
                    .partition(p)
                    .payload(row.as_bytes()),
            )
            .unwrap();
        counts[p as usize] += 1;
        producer.poll(Duration::ZERO);
        if i % 500 == 499 {
            producer.flush(Duration::from_secs(30)).unwrap();
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    producer.flush(Duration::from_secs(30)).unwrap();
    bad_offsets
}

/// Messages in every partition of `topic`.
fn messages_in(brokers: &str, topic: &str) -> i64 {
    let consumer = group_client(brokers, "count");
    let md = consumer
        .fetch_metadata(Some(topic), Duration::from_secs(10))
        .unwrap();
    let parts = md.topics()[0].partitions().len() as i32;
    (0..parts)
        .map(|p| {
            let (lo, hi) = consumer
                .fetch_watermarks(topic, p, Duration::from_secs(10))
                .unwrap();
            hi - lo
        })
        .sum()
}

fn ols_equals_fit(base: &str, all: &Path, n: usize) {
    let r = client()
        .post(format!("{base}/v1/streams/r/model"))
        .json(&json!({"method": "ols"}))
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let api: Value = r.json().unwrap();
    let fit: Value =
        serde_json::from_str(&ravel(&["fit", all.to_str().unwrap(), "--method", "ols"])).unwrap();
    assert_eq!(api["n"], n as u64);
    assert_same_model(&api, &fit, 1e-9, "ols over the good rows");
}

#[test]
fn a_dead_letter_that_cannot_be_written_holds_its_partition_across_a_crash_until_delivered() {
    const TOPIC: &str = "t.dlhold";
    const GROUP: &str = "dlhold";
    let dir = tempfile::tempdir().unwrap();
    let n = 3000;
    let (x, y) = synthetic(P, 2, n, 161);
    let all = dir.path().join("all.csv");
    write_csv(&all, &names(P), &x, &y);
    let topic_arg = format!("{TOPIC}:{PARTITIONS}");
    let (broker, brokers) = Proc::start(
        "ravel broker",
        &["broker", "--topic", &topic_arg],
        &[],
        &dir.path().join("broker.log"),
    );
    write_config(dir.path(), TOPIC, GROUP, "block", false);
    let (svc, base, log) = serve(dir.path(), &brokers, 1);

    // The bad message lands on partition 1 after a third of the rows.
    let bad = stream_rows(&brokers, TOPIC, &x, &y, &[(1, n / 3)]);
    let bad_offset = bad[0].1;
    let high = high_watermarks(&brokers, TOPIC);
    assert!(high[1] > bad_offset + 100, "rows follow the bad message");

    // The other partitions are read to their end and committed; partition 1 waits at the bad
    // message, and /readyz and the summary say so.
    wait_for(
        "partitions 0 and 2 committed to their end, 1 at the bad message",
        &log,
        || {
            let c = committed(&brokers, GROUP, TOPIC);
            (c[0] == high[0] && c[2] == high[2] && c[1] == bad_offset).then_some(())
        },
    );
    let (_, summary) = get(&base, "/v1/streams/r");
    let held = &summary["held_partitions"];
    assert_eq!(held.as_array().map(Vec::len), Some(1), "{summary}");
    assert_eq!(held[0]["partition"], 1);
    assert_eq!(held[0]["offset"], bad_offset);
    let rows_before = (n as u64) - (high[1] - bad_offset - 1) as u64;
    assert_eq!(
        summary["n"], rows_before,
        "only partition 1's rows after the bad message wait"
    );
    let (_, ready) = get(&base, "/readyz");
    assert_eq!(ready["held_partitions"][0]["topic"], TOPIC, "{ready}");
    // The failure is counted and logged with its reason; nothing was delivered.
    wait_for("a failed delivery counted", &log, || {
        let m = client()
            .get(format!("{base}/metrics"))
            .send()
            .ok()?
            .text()
            .ok()?;
        (sample(&m, "ravel_dead_letter_failures_total{stream=\"r\"}")? >= 1.0
            && sample(&m, "ravel_dead_letters_total{stream=\"r\"}")? == 0.0)
            .then_some(())
    });
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("dead-letter copy not delivered"), "{text}");

    // SIGKILL and restart: the partition is still not committed past the bad message.
    svc.signal("-KILL");
    drop(svc);
    let cp = ravel::checkpoint::load(&dir.path().join("state"), "r")
        .unwrap()
        .unwrap();
    assert_eq!(
        cp.offsets.get(&1),
        Some(&bad_offset),
        "checkpoint holds at the bad message"
    );
    let (mut svc, base, log) = serve(dir.path(), &brokers, 2);
    wait_for(
        "the restarted service holds partition 1 again",
        &log,
        || {
            let (_, v) = get(&base, "/v1/streams/r");
            (v["n"].as_u64() == Some(rows_before)
                && v["held_partitions"][0]["offset"] == bad_offset)
                .then_some(())
        },
    );
    assert_eq!(committed(&brokers, GROUP, TOPIC)[1], bad_offset);

    // The dead-letter topic appears (created by hand, as an operator would): the copy is
    // delivered on the next retry and the partition catches up.
    let admin: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", &brokers)
        .set("allow.auto.create.topics", "true")
        .create()
        .unwrap();
    let _ = admin
        .client()
        .fetch_metadata(Some("t.dlhold.dlq"), Duration::from_secs(10));
    let summary = wait_for("partition 1 caught up", &log, || {
        let (_, v) = get(&base, "/v1/streams/r");
        (v["n"].as_u64() == Some(n as u64)).then_some(v)
    });
    assert_eq!(summary["held_partitions"], json!([]));
    wait_for("every partition committed to its end", &log, || {
        (committed(&brokers, GROUP, TOPIC) == high).then_some(())
    });
    let dlq = read_topic(&brokers, "t.dlhold.dlq", 1);
    assert_eq!(dlq.len(), 1);
    assert_eq!(dlq[0].0, b"{not json");
    let h = &dlq[0].1;
    assert_eq!(h["ravel-reason"], "malformed");
    assert_eq!(h["ravel-stream"], "r");
    assert_eq!(h["ravel-source-topic"], TOPIC);
    assert_eq!(h["ravel-source-partition"], "1");
    assert_eq!(h["ravel-source-offset"], bad_offset.to_string());
    assert_eq!(
        messages_in(&brokers, "t.dlhold.dlq"),
        1,
        "the copy exactly once"
    );
    ols_equals_fit(&base, &all, n);
    svc.signal("-TERM");
    assert!(svc.wait());
    drop(broker);
}

#[test]
fn skip_mode_moves_on_and_counts_and_logs_every_skipped_message() {
    const TOPIC: &str = "t.dlskip";
    const GROUP: &str = "dlskip";
    let dir = tempfile::tempdir().unwrap();
    let n = 1500;
    let (x, y) = synthetic(P, 2, n, 162);
    let all = dir.path().join("all.csv");
    write_csv(&all, &names(P), &x, &y);
    let topic_arg = format!("{TOPIC}:{PARTITIONS}");
    let (broker, brokers) = Proc::start(
        "ravel broker",
        &["broker", "--topic", &topic_arg],
        &[],
        &dir.path().join("broker.log"),
    );
    write_config(dir.path(), TOPIC, GROUP, "skip", false);
    let (mut svc, base, log) = serve(dir.path(), &brokers, 1);
    let bad = stream_rows(&brokers, TOPIC, &x, &y, &[(0, 100), (1, 700), (2, 1200)]);
    let high = high_watermarks(&brokers, TOPIC);
    wait_for(
        "every bad message skipped and every partition committed",
        &log,
        || {
            let m = client()
                .get(format!("{base}/metrics"))
                .send()
                .ok()?
                .text()
                .ok()?;
            (sample(&m, "ravel_dead_letters_skipped_total{stream=\"r\"}")? == 3.0
                && committed(&brokers, GROUP, TOPIC) == high)
                .then_some(())
        },
    );
    let (_, v) = get(&base, "/v1/streams/r");
    assert_eq!(v["n"], n as u64);
    assert_eq!(v["held_partitions"], json!([]));
    let text = std::fs::read_to_string(&log).unwrap();
    for (p, o) in &bad {
        assert!(
            text.lines().any(|l| l.contains("message skipped")
                && l.contains(&format!("partition={p}"))
                && l.contains(&format!("offset={o}"))),
            "skipped message {p}/{o} not logged:\n{text}"
        );
    }
    ols_equals_fit(&base, &all, n);
    svc.signal("-TERM");
    assert!(svc.wait());
    drop(broker);
}

/// Issue 16 item 3: a secret set in `kafka.options` (from the environment) appears neither in the effective-config log line nor in any API response.
#[test]
fn secrets_in_kafka_options_are_never_logged_or_served() {
    const TOPIC: &str = "t.secret";
    let dir = tempfile::tempdir().unwrap();
    let (broker, brokers) = Proc::start(
        "ravel broker",
        &[
            "broker",
            "--topic",
            "t.secret:3",
            "--topic",
            "t.secret.dlq:1",
        ],
        &[],
        &dir.path().join("broker.log"),
    );
    write_config(dir.path(), TOPIC, "secret", "block", false);
    // Plaintext still (the embedded broker has no TLS or SASL): librdkafka keeps the
    // properties, which is what the log line shows. (This librdkafka build has no OpenSSL, so
    // ssl.* and OAUTHBEARER properties are refused; `${file:...}` is tested in config.rs.)
    let mut text = std::fs::read_to_string(dir.path().join("ravel.toml")).unwrap();
    text = text.replace(
        "[kafka.options]\n",
        "[kafka.options]\n\"sasl.password\" = \"${env:SASL_PASSWORD_OF_THE_TEST}\"\n",
    );
    std::fs::write(dir.path().join("ravel.toml"), text).unwrap();
    let secrets = ["s3cret-env-2"];
    let log = dir.path().join("serve.log");
    let cfg = dir.path().join("ravel.toml");
    let (mut svc, line) = Proc::start(
        "ravel serve",
        &["serve", "--config", cfg.to_str().unwrap()],
        &[
            ("RAVEL_KAFKA__BROKERS", brokers.as_str()),
            ("RUST_LOG", "debug"),
            ("SASL_PASSWORD_OF_THE_TEST", "s3cret-env-2"),
        ],
        &log,
    );
    let base = line.strip_prefix("listening on ").unwrap().to_string();
    let (x, y) = synthetic(P, 2, 30, 163);
    stream_rows(&brokers, TOPIC, &x, &y, &[(0, 10)]);
    wait_for(
        "rows folded and the bad message dead-lettered",
        &log,
        || {
            let (_, v) = get(&base, "/v1/streams/r");
            (v["n"] == 30 && v["held_partitions"] == json!([])).then_some(())
        },
    );
    let mut bodies = Vec::new();
    for path in [
        "/readyz",
        "/healthz",
        "/metrics",
        "/v1/streams",
        "/v1/streams/r",
        "/v1/streams/r/path",
        "/v1/feature-streams",
        "/v1/no-such-route",
    ] {
        bodies.push(
            client()
                .get(format!("{base}{path}"))
                .send()
                .unwrap()
                .text()
                .unwrap(),
        );
    }
    for body in [json!({"method": "ols"}), json!({"method": "lasso", "k": 2})] {
        bodies.push(
            client()
                .post(format!("{base}/v1/streams/r/model"))
                .json(&body)
                .send()
                .unwrap()
                .text()
                .unwrap(),
        );
    }
    svc.signal("-TERM");
    assert!(svc.wait());
    let text = std::fs::read_to_string(&log).unwrap();
    let effective: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("effective Kafka client config"))
        .collect();
    assert_eq!(effective.len(), 4, "one line per client:\n{text}");
    for l in &effective {
        assert!(l.contains("\"sasl.password\": \"***\""), "{l}");
    }
    for s in secrets {
        assert!(!text.contains(s), "secret {s} in the log:\n{text}");
        for b in &bodies {
            assert!(!b.contains(s), "secret {s} in a response: {b}");
        }
    }
    drop(broker);
}
