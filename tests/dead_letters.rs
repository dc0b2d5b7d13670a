//! Issue 16: dead letters against a cluster that does not create topics on its own
//! (`allow.auto.create.topics = false`, as production brokers run with
//! `auto.create.topics.enable = false`), through the real binaries.
//!
//! Block (the default): a bad message whose `<topic>.dlq` is missing holds its partition's
//! durable state before the message (no checkpoint or commit past it, across a SIGKILL and
//! restart) while every partition keeps folding (issue 30: the partition no longer waits);
//! once the topic exists the copy lands there exactly once with its headers, the checkpoint
//! and commits catch up, and the model equals `ravel fit` on the good rows.
//! Skip: the same stream finishes with every skipped message counted and logged (at a bounded
//! rate: the lines and the numbers they say were held back add up to every skipped message).

use crate::common::*;
use rdkafka::config::ClientConfig;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use serde_json::json;
use std::path::Path;
use std::time::Duration;

const PARTITIONS: i32 = 3;
const P: usize = 3;

/// `dir/ravel.toml`: stream "r" on `topic`, clients that never create topics, fast retries.
fn write_config(dir: &Path, topic: &str, group: &str, on_failure: &str, create_topics: bool) {
    ConfigFile::new(group)
        .set("kafka.create_topics", create_topics)
        .set("kafka.topic_partitions", 2)
        .set("kafka.topic_replication", 1)
        .option("allow.auto.create.topics", "false")
        .quick_rejoin()
        .set("dlq.on_failure", on_failure)
        .set("dlq.create_topics", create_topics)
        .set("dlq.delivery_timeout_ms", 1500)
        .set("dlq.retry_initial_ms", 200)
        .set("dlq.retry_max_ms", 1000)
        .state_in(dir, 300)
        .stream("r", topic, names(P))
        .write(dir);
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
    let (broker, brokers) = ravel_broker(dir.path(), &[&topic_arg]);
    write_config(dir.path(), TOPIC, GROUP, "block", false);
    let (svc, base, log) = serve(dir.path(), &brokers, 1);

    // The bad message lands on partition 1 after a third of the rows.
    let bad = stream_rows(&brokers, TOPIC, &x, &y, &[(1, n / 3)]);
    let bad_offset = bad[0].1;
    let high = end_offsets(&brokers, TOPIC, PARTITIONS);
    assert!(high[1] > bad_offset + 100, "rows follow the bad message");

    // Every row is folded (the partition goes on past the bad message: issue 30), but no
    // checkpoint or commit passes the bad message while its copy is not delivered; the
    // stream's checkpoint is one file for all its partitions, so it (and the commits of every
    // partition) stays at the last one written before the message was read. /readyz and the
    // summary say which partition is held, and where.
    let summary = wait_for(
        "every row folded and partition 1 held at the bad message",
        &log,
        || {
            let (_, v) = get(&base, "/v1/streams/r");
            (v["n"].as_u64() == Some(n as u64)
                && v["held_partitions"][0]["offset"] == bad_offset
                && v["held_partitions"][0]["failed_attempts"].as_u64() >= Some(1))
            .then_some(v)
        },
    );
    let held = &summary["held_partitions"];
    assert_eq!(held.as_array().map(Vec::len), Some(1), "{summary}");
    assert_eq!(held[0]["partition"], 1);
    // A few checkpoint intervals pass: nothing durable moves past the message.
    std::thread::sleep(Duration::from_millis(1000));
    let cp_at = |what: &str| {
        // No checkpoint at all (the service read past the message before its first one) is
        // nothing durable past it either.
        let Some(cp) = ravel::checkpoint::load(&dir.path().join("state"), "r").unwrap() else {
            return;
        };
        let at = cp.offsets.get(&1).copied().unwrap_or(0);
        assert!(
            at <= bad_offset,
            "{what}: checkpoint of partition 1 at {at}, past the bad message at {bad_offset}"
        );
        assert!(
            cp.stats.n() < n as u64,
            "{what}: the checkpoint holds rows after the bad message"
        );
    };
    cp_at("held");
    assert!(committed_offsets(&brokers, GROUP, TOPIC, PARTITIONS)[1] <= bad_offset);
    let (_, ready) = get(&base, "/readyz");
    assert_eq!(ready["held_partitions"][0]["topic"], TOPIC, "{ready}");
    // The failure is counted and logged with its reason; nothing was delivered.
    wait_for("a failed delivery counted", &log, || {
        let m = try_metrics_of(&base)?;
        (sample(&m, "ravel_dead_letter_failures_total{stream=\"r\"}")? >= 1.0
            && sample(&m, "ravel_dead_letters_total{stream=\"r\"}")? == 0.0)
            .then_some(())
    });
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(text.contains("dead-letter copy not delivered"), "{text}");

    // SIGKILL and restart: the partition is still not committed past the bad message; the
    // restart reads from the last checkpoint, folds every row again and holds partition 1 at
    // the bad message again.
    svc.signal("-KILL");
    drop(svc);
    cp_at("after SIGKILL");
    let (mut svc, base, log) = serve(dir.path(), &brokers, 2);
    wait_for(
        "the restarted service holds partition 1 again",
        &log,
        || {
            let (_, v) = get(&base, "/v1/streams/r");
            (v["n"].as_u64() == Some(n as u64) && v["held_partitions"][0]["offset"] == bad_offset)
                .then_some(())
        },
    );
    assert!(committed_offsets(&brokers, GROUP, TOPIC, PARTITIONS)[1] <= bad_offset);
    cp_at("held after the restart");

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
    wait_for("partition 1 released", &log, || {
        let (_, v) = get(&base, "/v1/streams/r");
        (v["n"].as_u64() == Some(n as u64) && v["held_partitions"] == json!([])).then_some(())
    });
    wait_for("every partition committed to its end", &log, || {
        (committed_offsets(&brokers, GROUP, TOPIC, PARTITIONS) == high).then_some(())
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
    assert_ols_is_fits(&base, "r", &all, n as u64);
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
    let (broker, brokers) = ravel_broker(dir.path(), &[&topic_arg]);
    write_config(dir.path(), TOPIC, GROUP, "skip", false);
    let (mut svc, base, log) = serve(dir.path(), &brokers, 1);
    let bad = stream_rows(&brokers, TOPIC, &x, &y, &[(0, 100), (1, 700), (2, 1200)]);
    let high = end_offsets(&brokers, TOPIC, PARTITIONS);
    wait_for(
        "every bad message skipped and every partition committed",
        &log,
        || {
            let m = try_metrics_of(&base)?;
            (sample(&m, "ravel_dead_letters_skipped_total{stream=\"r\"}")? == 3.0
                && committed_offsets(&brokers, GROUP, TOPIC, PARTITIONS) == high)
                .then_some(())
        },
    );
    let (_, v) = get(&base, "/v1/streams/r");
    assert_eq!(v["n"], n as u64);
    assert_eq!(v["held_partitions"], json!([]));
    assert_ols_is_fits(&base, "r", &all, n as u64);
    svc.signal("-TERM");
    assert!(svc.wait());
    // Logged at a bounded rate (issue 30): the first skipped message with its coordinates, the
    // others in the number a later line says were held back (at the latest at shutdown).
    // Which bad message comes first depends on the order the partitions are read in: the
    // first line names one of them.
    let text = std::fs::read_to_string(&log).unwrap();
    let first = text
        .lines()
        .find(|l| l.contains("message skipped"))
        .unwrap_or_else(|| panic!("no skipped message logged:\n{text}"));
    assert!(
        bad.iter()
            .any(|(p, o)| first.contains(&format!("partition={p} "))
                && first.contains(&format!("offset={o} "))),
        "the first skipped line names none of the skipped messages {bad:?}:\n{text}"
    );
    let said: u64 = text
        .lines()
        .filter(|l| l.contains("skipped (dlq.on_failure = skip)"))
        .map(|l| {
            let held_back = l
                .split("suppressed=")
                .nth(1)
                .and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next())
                .and_then(|d| d.parse::<u64>().ok())
                .unwrap_or(0);
            // A line about one message says it and those held back before it; a summary line
            // only those held back.
            held_back + u64::from(l.contains("message skipped"))
        })
        .sum();
    assert_eq!(
        said,
        bad.len() as u64,
        "every skipped message is in the log:\n{text}"
    );
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

/// Issue 46: bad messages among good ones while the service is SIGKILLed at random points:
/// each restart re-reads what its last checkpoint did not hold, and each bad message's copy is
/// in `.dlq` exactly once (by source partition and offset); n and OLS are those of the good
/// rows. `DLQ_ONCE_BAD` and `DLQ_ONCE_KILLS` set the size (CI: 1500 bad messages among 6000
/// rows, 3 kills; issue 46: 5000 and 3).
#[test]
fn each_bad_message_has_one_dead_letter_copy_across_sigkills() {
    let env = |name: &str, default: usize| -> usize {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    };
    let (bad_n, kills) = (env("DLQ_ONCE_BAD", 1500), env("DLQ_ONCE_KILLS", 3));
    let rows = 4 * bad_n;
    const TOPIC: &str = "t.once";
    let dir = tempfile::tempdir().unwrap();
    let (_broker, brokers) = Proc::start(
        "ravel broker",
        &[
            "broker",
            "--topic",
            &format!("{TOPIC}:{PARTITIONS}"),
            "--topic",
            &format!("{TOPIC}.dlq:1"),
        ],
        &[],
        &dir.path().join("broker.log"),
    );
    write_config(dir.path(), TOPIC, "once", "block", false);
    let names = names(P);
    let (x, y) = synthetic(P, 2, rows, 46);
    let all = dir.path().join("all.csv");
    write_csv(&all, &names, &x, &y);
    // Bad messages spread over the partitions and the stream.
    let bad: Vec<(i32, usize)> = (0..bad_n)
        .map(|i| ((i % PARTITIONS as usize) as i32, i * rows / bad_n))
        .collect();
    let dead_here = |base: &str| {
        try_metrics_of(base)
            .and_then(|m| sample(&m, "ravel_dead_letters_total{stream=\"r\"}"))
            .unwrap_or(0.0)
    };
    let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
    let mut random_ms = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % 1000
    };
    let mut producing = None;
    let mut bad_offsets = None;
    for run in 1..=kills {
        let (s, base, log) = serve(dir.path(), &brokers, run);
        if run == 1 {
            wait_for("ready", &log, || {
                (get(&base, "/readyz").0 == 200).then_some(())
            });
            let (b, x, y, bad) = (brokers.clone(), x.clone(), y.clone(), bad.clone());
            producing = Some(std::thread::spawn(move || {
                stream_rows(&b, TOPIC, &x, &y, &bad)
            }));
        }
        // Kill once this run has sent copies, at a random point after; or, when the run before
        // had already read every message (its checkpoint is at the topic's end: nothing is
        // left here to copy), once this run has restored every row.
        wait_for("a dead-letter copy, or every row restored", &log, || {
            (dead_here(&base) >= 1.0 || get(&base, "/v1/streams/r").1["n"].as_u64()? == rows as u64)
                .then_some(())
        });
        std::thread::sleep(Duration::from_millis(random_ms()));
        s.signal("-KILL");
        drop(s);
        if run == kills {
            bad_offsets = producing.take().map(|t| t.join().unwrap());
        }
    }
    let bad_offsets = bad_offsets.unwrap();
    let (mut last, base, log) = serve(dir.path(), &brokers, kills + 1);
    wait_for("every good row", &log, || {
        (get(&base, "/v1/streams/r").1["n"].as_u64()? == rows as u64).then_some(())
    });
    assert_ols_is_fits(&base, "r", &all, rows as u64);
    // Every copy delivered (nothing held), then the topic holds one per bad message.
    wait_for("no held partition", &log, || {
        get(&base, "/readyz").1["held_partitions"]
            .as_array()?
            .is_empty()
            .then_some(())
    });
    std::thread::sleep(Duration::from_secs(1));
    let copies = read_topic(&brokers, &format!("{TOPIC}.dlq"), bad_n);
    let mut seen = std::collections::BTreeMap::new();
    for (_, h) in &copies {
        let source: (i32, i64) = (
            h["ravel-source-partition"].parse().unwrap(),
            h["ravel-source-offset"].parse().unwrap(),
        );
        *seen.entry(source).or_insert(0) += 1;
    }
    let twice: Vec<_> = seen.iter().filter(|(_, n)| **n > 1).collect();
    // What each run found in the dead-letter topic at its first copy.
    let found: Vec<String> = (1..=kills + 1)
        .flat_map(|run| {
            let text = std::fs::read_to_string(dir.path().join(format!("serve{run}.log")))
                .unwrap_or_default();
            text.lines()
                .filter(|l| l.contains("dead-letter topic"))
                .map(|l| format!("run {run}: {l}"))
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(
        found
            .iter()
            .all(|l| !l.contains("cannot read the dead-letter topic")),
        "{found:#?}"
    );
    assert!(
        twice.is_empty(),
        "{} bad messages copied more than once (first {:?}); {found:#?}",
        twice.len(),
        &twice[..twice.len().min(5)]
    );
    let want: std::collections::BTreeSet<(i32, i64)> = bad_offsets.into_iter().collect();
    let have: std::collections::BTreeSet<(i32, i64)> = seen.keys().copied().collect();
    assert_eq!(have, want, "one copy of each bad message");
    assert_eq!(messages_in(&brokers, &format!("{TOPIC}.dlq")), bad_n as i64);
    last.signal("-TERM");
    assert!(last.wait());
}
