//! The binaries as child processes, stopped with real signals.
//!
//! Restarts: `ravel broker` outlives `ravel serve`. Restarting resumes from the checkpoint and
//! the committed offsets with no row counted twice, also when the commit is behind the
//! checkpoint (a crash between the two) and after a SIGKILL; the model over HTTP then equals
//! `ravel fit` on all the rows (1e-9 relative) with n the number of rows. Crash window: five
//! SIGKILLs, each while the service holds rows no checkpoint has, during a 200k-row stream,
//! and the same checks at the end.
//!
//! The default: `ravel serve` with the shipped config and no Kafka runs the embedded broker and
//! the demo stream, whose Lasso model finds the design's true features.

use crate::common::*;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use serde_json::{Value, json};
use std::path::Path;
use std::time::{Duration, Instant};

const TOPIC: &str = "t.restart";
const GROUP: &str = "restart-group";
const PARTITIONS: i32 = 3;

fn n_of(base: &str) -> Option<u64> {
    stream_n(base, "r")
}

/// Waits until the service at `base` holds `n` rows, then checks that it stays there (a
/// double-counting restart would run past it).
fn wait_rows_stable(base: &str, n: u64, log: &Path) {
    let start = Instant::now();
    while n_of(base) != Some(n) {
        assert!(
            start.elapsed() < DEADLINE,
            "wanted n = {n}, have {:?}; log:\n{}",
            n_of(base),
            std::fs::read_to_string(log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(
        n_of(base),
        Some(n),
        "n moved past the number of rows produced"
    );
}

/// A client of the service's group. The mock broker makes the next join wait for the session
/// timeout of the last member that left (minus 1 s), so every member here uses 6 s, as the
/// service does in this test.
fn group_client(brokers: &str) -> BaseConsumer {
    ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("group.id", GROUP)
        .set("enable.auto.commit", "false")
        .set("session.timeout.ms", "6000")
        .create()
        .unwrap()
}

/// The group's committed offset per partition (0 where none).
fn committed(brokers: &str) -> Vec<i64> {
    committed_offsets(brokers, GROUP, TOPIC, PARTITIONS)
        .into_iter()
        .map(|o| o.max(0))
        .collect()
}

fn high_watermarks(brokers: &str) -> Vec<i64> {
    end_offsets(brokers, TOPIC, PARTITIONS)
}

/// Commits offset 0 for every partition: the state a crash between checkpoint and commit
/// leaves (Kafka's offsets behind the checkpoint's). The commit comes from outside the group,
/// as the service's own in standalone assignment (the default on the embedded broker): the
/// group has never had a member (the mock broker refuses such commits once it had one).
fn rewind_group(brokers: &str) {
    let consumer = group_client(brokers);
    let mut tpl = TopicPartitionList::new();
    for p in 0..PARTITIONS {
        tpl.add_partition_offset(TOPIC, p, Offset::Offset(0))
            .unwrap();
    }
    consumer.commit(&tpl, CommitMode::Sync).unwrap();
}

/// Starts `ravel broker` with `topic` and writes `dir/ravel.toml` for one stream "r" on it
/// (checkpoints in `dir/state` every `checkpoint_ms`, 6 s sessions, no demo). Returns the
/// broker, its address and the state directory.
fn broker_and_config(
    dir: &Path,
    topic: &str,
    partitions: i32,
    group: &str,
    names: &[String],
    checkpoint_ms: u64,
) -> (Proc, String, std::path::PathBuf) {
    let topic_arg = format!("{topic}:{partitions}");
    let (broker, brokers) = Proc::start(
        "ravel broker",
        &["broker", "--topic", &topic_arg],
        &[],
        &dir.join("broker.log"),
    );
    let state = dir.join("state");
    let names_toml: Vec<String> = names.iter().map(|n| format!("\"{n}\"")).collect();
    std::fs::write(
        dir.join("ravel.toml"),
        format!(
            r#"
[http]
addr = "127.0.0.1:0"
[kafka]
group_id = "{group}"
[kafka.options]
"session.timeout.ms" = "6000"
"heartbeat.interval.ms" = "500"
[state]
dir = "{}"
checkpoint_interval_ms = {checkpoint_ms}
[demo]
enabled = false
[[streams]]
name = "r"
topic = "{topic}"
features = [{}]
"#,
            state.display(),
            names_toml.join(", ")
        ),
    )
    .unwrap();
    (broker, brokers, state)
}

fn compare_with_fit(base: &str, file: &Path, n: u64) {
    let file = file.to_str().unwrap();
    for (body, flags) in [
        (
            json!({"method": "lasso", "k": 3}),
            vec!["--method", "lasso", "--k", "3"],
        ),
        (json!({"method": "ols"}), vec!["--method", "ols"]),
    ] {
        let r = client()
            .post(format!("{base}/v1/streams/r/model"))
            .json(&body)
            .send()
            .unwrap();
        assert_eq!(r.status().as_u16(), 200);
        let api: Value = r.json().unwrap();
        let mut args = vec!["fit", file];
        args.extend(flags);
        let fit: Value = serde_json::from_str(&ravel(&args)).unwrap();
        assert_eq!(api["n"], n);
        assert_same_model(&api, &fit, 1e-9, &body.to_string());
    }
}

#[test]
fn restarts_resume_from_checkpoints_without_counting_a_row_twice() {
    let dir = tempfile::tempdir().unwrap();
    let (p, n1, n2, n3) = (8, 1500, 900, 600);
    let names = names(p);
    let (x, y) = synthetic(p, 2, n1 + n2 + n3, 21);
    let write = |name: &str, a: usize, b: usize| {
        let path = dir.path().join(name);
        write_csv(&path, &names, &x[a * p..b * p], &y[a..b]);
        path
    };
    let part1 = write("part1.csv", 0, n1);
    let part2 = write("part2.csv", n1, n1 + n2);
    let part3 = write("part3.csv", n1 + n2, n1 + n2 + n3);
    let upto2 = write("upto2.csv", 0, n1 + n2);
    let all = write("all.csv", 0, n1 + n2 + n3);

    let (mut broker, brokers, state) =
        broker_and_config(dir.path(), TOPIC, PARTITIONS, GROUP, &names, 200);

    let produce = |file: &Path, format: &str, batch: &str| {
        ravel(&[
            "produce",
            "--brokers",
            &brokers,
            "--topic",
            TOPIC,
            "--input",
            file.to_str().unwrap(),
            "--wire-format",
            format,
            "--batch-rows",
            batch,
            "--quiet",
        ]);
    };
    produce(&part1, "json", "10");

    // Run 1: consume part 1, stop with SIGTERM: exit 0, checkpoint and commit at the end.
    let (mut s1, base) = serve(dir.path(), &brokers, 1);
    wait_rows_stable(&base, n1 as u64, &dir.path().join("serve1.log"));
    s1.signal("-TERM");
    assert!(
        s1.wait(),
        "serve did not exit 0 on SIGTERM: {}",
        std::fs::read_to_string(dir.path().join("serve1.log")).unwrap()
    );
    assert_eq!(
        committed(&brokers),
        high_watermarks(&brokers),
        "offsets committed on shutdown"
    );
    assert_eq!(committed(&brokers).iter().sum::<i64>(), (n1 / 10) as i64);

    // A crash between checkpoint and commit leaves Kafka's offsets behind: the checkpoint wins.
    rewind_group(&brokers);
    assert_eq!(committed(&brokers), vec![0; PARTITIONS as usize]);

    // Run 2: more rows in another format; resumes at the checkpoint.
    produce(&part2, "binary", "50");
    let (mut s2, base) = serve(dir.path(), &brokers, 2);
    wait_rows_stable(&base, (n1 + n2) as u64, &dir.path().join("serve2.log"));
    compare_with_fit(&base, &upto2, (n1 + n2) as u64);
    // Let a checkpoint and its commit happen, then crash.
    let cp_deadline = Instant::now();
    while ravel::checkpoint::load(&state, "r")
        .unwrap()
        .unwrap()
        .stats
        .n()
        != (n1 + n2) as u64
    {
        assert!(
            cp_deadline.elapsed() < DEADLINE,
            "no checkpoint with every row"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // ... and its commit: Kafka's offsets catch up with the checkpoint again.
    while committed(&brokers) != high_watermarks(&brokers) {
        assert!(
            cp_deadline.elapsed() < DEADLINE,
            "offsets never committed after the checkpoint"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    s2.signal("-KILL");
    assert!(!s2.wait());

    // Run 3: after a SIGKILL (the dead member leaves the group after its session timeout).
    produce(&part3, "json", "1");
    let (mut s3, base) = serve(dir.path(), &brokers, 3);
    wait_rows_stable(&base, (n1 + n2 + n3) as u64, &dir.path().join("serve3.log"));
    compare_with_fit(&base, &all, (n1 + n2 + n3) as u64);
    s3.signal("-TERM");
    assert!(
        s3.wait(),
        "{}",
        std::fs::read_to_string(dir.path().join("serve3.log")).unwrap()
    );
    assert_eq!(committed(&brokers), high_watermarks(&brokers));

    broker.signal("-TERM");
    assert!(broker.wait(), "ravel broker did not exit 0 on SIGTERM");
}

#[test]
fn the_default_serves_a_live_demo_stream() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("demo.log");
    // The shipped config/ravel.toml (the test runs in the crate root), any free port.
    // With a consumer-only librdkafka property, as docs/concepts.md advises: it goes to the
    // consumers only, so no client logs a CONFWARN about it.
    let (mut s, line) = Proc::start(
        "ravel serve",
        &["serve", "--http-addr", "127.0.0.1:0"],
        &[("RAVEL_KAFKA__OPTIONS__SESSION_TIMEOUT_MS", "30000")],
        &log,
    );
    let base = line.strip_prefix("listening on ").unwrap().to_string();
    let start = Instant::now();
    loop {
        let v: Value = client()
            .get(format!("{base}/v1/streams/demo"))
            .send()
            .unwrap()
            .json()
            .unwrap();
        if v["n"].as_u64().unwrap_or(0) >= 3000 {
            assert_eq!(v["p"], 100);
            break;
        }
        assert!(
            start.elapsed() < DEADLINE,
            "demo stream stalled at {v}; log: {}",
            std::fs::read_to_string(&log).unwrap()
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(
        client()
            .get(format!("{base}/readyz"))
            .send()
            .unwrap()
            .status()
            .as_u16(),
        200
    );
    let m: Value = client()
        .post(format!("{base}/v1/streams/demo/model"))
        .json(&json!({"method": "lasso", "k": 10}))
        .send()
        .unwrap()
        .json()
        .unwrap();
    let support: Vec<u64> = m["coefficients"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["index"].as_u64().unwrap())
        .collect();
    // Paper 003's design with p = 100, k = 10: the true features are 9, 19, ..., 99.
    assert_eq!(
        support,
        (0..10).map(|i| 10 * i + 9).collect::<Vec<u64>>(),
        "{m}"
    );
    // The demo feature stream: after two full passes over its 500 columns, OS holds the true
    // features 49, 99, ..., 499 (synthetic::FeatureDesign).
    let start = Instant::now();
    let f = loop {
        let f: Value = client()
            .get(format!("{base}/v1/feature-streams/demo-features"))
            .send()
            .unwrap()
            .json()
            .unwrap();
        if f["passes"].as_u64().unwrap_or(0) >= 3 {
            break f;
        }
        assert!(
            start.elapsed() < DEADLINE,
            "demo feature stream stalled at {f}; log: {}",
            std::fs::read_to_string(&log).unwrap()
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    let mut selected: Vec<u64> = f["selected"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["index"].as_u64().unwrap())
        .collect();
    selected.sort_unstable();
    assert_eq!(
        selected,
        (1..=10).map(|k| 50 * k - 1).collect::<Vec<u64>>(),
        "{f}"
    );
    s.signal("-INT");
    assert!(
        s.wait(),
        "serve did not exit 0 on SIGINT: {}",
        std::fs::read_to_string(&log).unwrap()
    );
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(
        text.contains("session.timeout.ms"),
        "the option is in the effective config: {text}"
    );
    assert!(!text.contains("CONFWARN"), "{text}");
}

/// Whether `/readyz` at `base` answers 200, and its body.
fn readyz(base: &str) -> (bool, Value) {
    match client().get(format!("{base}/readyz")).send() {
        Ok(r) => (r.status().as_u16() == 200, r.json().unwrap_or(Value::Null)),
        Err(_) => (false, Value::Null),
    }
}

/// Issue 46: one instance with default settings on `ravel broker` needs no group: after a
/// SIGTERM and after a SIGKILL it is ready again within seconds (the group protocol on the
/// embedded broker waits for the departed member's 45 s session), resumes where it stopped,
/// and a second instance reading the same group's partitions on its own is named by both in
/// `/readyz` (not ready) until it stops.
#[test]
fn one_instance_restarts_ready_at_once_and_a_second_one_is_named() {
    const SOLO: &str = "t.solo";
    let dir = tempfile::tempdir().unwrap();
    let (_broker, brokers) = ravel_broker(dir.path(), &[&format!("{SOLO}:3")]);
    let names = names(3);
    let (x, y) = synthetic(3, 2, 900, 5);
    let chunks = write_chunks(dir.path(), &names, &x, &y, 300);
    let config = |state: &str| {
        format!(
            "[http]\naddr = \"127.0.0.1:0\"\n[state]\ndir = \"{}\"\ncheckpoint_interval_ms = 200\n\
             [demo]\nenabled = false\n[[streams]]\nname = \"r\"\ntopic = \"{SOLO}\"\nfeatures = [\"x0\", \"x1\", \"x2\"]\n",
            dir.path().join(state).display()
        )
    };
    std::fs::write(dir.path().join("ravel.toml"), config("state")).unwrap();
    let log = |run: usize| dir.path().join(format!("serve{run}.log"));
    let ready_within = |base: &str, run: usize| {
        let start = Instant::now();
        wait_within("ready", &log(run), Duration::from_secs(20), || {
            readyz(base).0.then_some(())
        });
        start.elapsed()
    };
    let produce = |i: usize| {
        produce_as(
            &brokers,
            SOLO,
            &chunks[i],
            "binary",
            10,
            &["sticky.partitioning.linger.ms=0"],
        )
    };

    let (mut s1, base) = serve(dir.path(), &brokers, 1);
    let first = ready_within(&base, 1);
    let (_, body) = readyz(&base);
    assert_eq!(body["standalone"][0]["consumer"], "ingest", "{body}");
    produce(0);
    wait_for("300 rows", &log(1), || {
        (stream_n(&base, "r")? == 300).then_some(())
    });
    s1.signal("-TERM");
    assert!(s1.wait());

    // After a SIGTERM: ready at once, at the checkpoint.
    let (s2, base) = serve(dir.path(), &brokers, 2);
    let after_term = ready_within(&base, 2);
    produce(1);
    wait_for("600 rows", &log(2), || {
        (stream_n(&base, "r")? == 600).then_some(())
    });
    std::thread::sleep(Duration::from_millis(600));
    s2.signal("-KILL");
    drop(s2);

    // After a SIGKILL: ready at once too.
    let (mut s3, base) = serve(dir.path(), &brokers, 3);
    let after_kill = ready_within(&base, 3);
    wait_for("600 rows again", &log(3), || {
        (stream_n(&base, "r")? == 600).then_some(())
    });
    eprintln!(
        "ready after start {first:?}, after SIGTERM {after_term:?}, after SIGKILL {after_kill:?}"
    );

    // A second instance on the same group (its own state): both name the other.
    std::fs::write(dir.path().join("ravel.toml"), config("state2")).unwrap();
    let (mut s4, base4) = serve(dir.path(), &brokers, 4);
    produce(2);
    for (base, run) in [(&base, 3), (&base4, 4)] {
        let body = wait_for("the other instance named", &log(run), || {
            let (ready, body) = readyz(base);
            let others = body["standalone"][0]["other_instances"].as_array()?.len();
            (!ready && others == 1).then_some(body)
        });
        let why = body["error"]["message"].as_str().unwrap();
        assert!(why.contains("standalone mode"), "{why}");
    }
    let text = std::fs::read_to_string(log(3)).unwrap();
    assert!(
        text.contains("another instance reads the same partitions"),
        "{text}"
    );
    // Once it stops, the first is ready again.
    s4.signal("-TERM");
    assert!(s4.wait());
    wait_for("ready again", &log(3), || readyz(&base).0.then_some(()));
    wait_for("900 rows", &log(3), || {
        (stream_n(&base, "r")? == 900).then_some(())
    });
    s3.signal("-TERM");
    assert!(s3.wait());
}

/// Issue 10 item 10: SIGKILL lands while rows are folded in memory but not yet checkpointed,
/// again and again, while a 200k-row stream is being produced; each restart resumes from the
/// last checkpoint and re-reads what it had not saved. At the end n is exactly the number of
/// rows produced and the model equals `ravel fit` on exactly those rows.
#[test]
fn sigkill_between_checkpoints_during_a_stream_loses_and_double_counts_nothing() {
    const CRASH_TOPIC: &str = "t.crash";
    let dir = tempfile::tempdir().unwrap();
    // p = 5 in binary messages: 48 bytes a row, 1.6 MB per partition of the six, well inside
    // the embedded broker's 5 MB per partition.
    let (p, chunks, chunk_rows) = (5, 20, 10_000);
    let total = chunks * chunk_rows;
    let names = names(p);
    let (x, y) = synthetic(p, 2, total, 33);
    let all = dir.path().join("all.csv");
    write_csv(&all, &names, &x, &y);
    let chunk_files = write_chunks(dir.path(), &names, &x, &y, chunk_rows);

    let (mut broker, brokers, state) =
        broker_and_config(dir.path(), CRASH_TOPIC, 6, "crash-group", &names, 1500);

    // The test paces the producer: whenever the service has read and checkpointed every row
    // produced so far, the next chunk starts on its own thread, so kills land while rows arrive.
    // (A producer on its own clock could finish before a slow machine brought the first
    // service up, which then read and checkpointed everything before the test looked.)
    let checkpointed = || {
        ravel::checkpoint::load(&state, "r")
            .ok()
            .flatten()
            .map_or(0, |cp| cp.stats.n())
    };
    let mut chunks = chunk_files.into_iter();
    let mut producing: Option<std::thread::JoinHandle<()>> = None;
    let mut produced = 0;
    let mut kills = 0;
    let mut run = 0;
    while kills < 5 {
        run += 1;
        let (s, base) = serve(dir.path(), &brokers, run);
        // Kill as soon as the service holds rows that no checkpoint has: the window a crash
        // must not lose (those rows are re-read) nor double-count (the checkpoint's offsets
        // say where its rows end).
        let start = Instant::now();
        loop {
            let (live, saved) = (n_of(&base), checkpointed());
            if live.is_some_and(|live| live > saved) && saved > 0 {
                break;
            }
            let idle = producing.as_ref().is_none_or(|p| p.is_finished());
            if idle && live == Some(saved) && saved == produced {
                if let Some(p) = producing.take() {
                    p.join().unwrap();
                }
                produced += chunk_rows as u64;
                let file = chunks.next().unwrap_or_else(|| {
                    panic!("run {run}: every chunk produced, never a row beyond the checkpoint")
                });
                let brokers = brokers.clone();
                producing = Some(std::thread::spawn(move || {
                    produce_file(&brokers, CRASH_TOPIC, &file, &[])
                }));
            }
            assert!(
                start.elapsed() < DEADLINE,
                "run {run}: no rows beyond the checkpoint (live {live:?}, saved {saved})"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        s.signal("-KILL");
        drop(s);
        kills += 1;
    }
    if let Some(p) = producing.take() {
        p.join().unwrap();
    }
    for file in chunks {
        produce_file(&brokers, CRASH_TOPIC, &file, &[]);
    }
    run += 1;
    let (mut last, base) = serve(dir.path(), &brokers, run);
    wait_rows_stable(
        &base,
        total as u64,
        &dir.path().join(format!("serve{run}.log")),
    );
    // The OLS model over HTTP equals the offline fit of exactly the rows produced.
    let r = client()
        .post(format!("{base}/v1/streams/r/model"))
        .json(&json!({"method": "ols"}))
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let api: Value = r.json().unwrap();
    let fit: Value =
        serde_json::from_str(&ravel(&["fit", all.to_str().unwrap(), "--method", "ols"])).unwrap();
    assert_eq!(api["n"], total as u64);
    assert_same_model(&api, &fit, 1e-9, "ols after 5 SIGKILLs");
    last.signal("-TERM");
    assert!(last.wait());
    broker.signal("-TERM");
    assert!(broker.wait());
}

/// Issue 11 item 3 through the binary: a CSV whose columns sit at 1e9 (and y at 1e9) gives
/// `ravel fit` the model of the same rows centred (raw moments used to drop every column as
/// constant there and return the zero model). The rows are multiples of 2^-20, so adding the
/// offsets is exact and the two files hold the same data.
#[test]
fn ravel_fit_on_a_csv_with_large_offsets_gives_the_model_of_the_centred_rows() {
    let dir = tempfile::tempdir().unwrap();
    let (p, n) = (8, 800);
    let names = names(p);
    let (mut x, mut y) = synthetic(p, 3, n, 17);
    let q = |v: &mut f64| *v = (*v * 1048576.0).round() / 1048576.0;
    x.iter_mut().for_each(q);
    y.iter_mut().for_each(q);
    let offset = 1e9;
    let xs: Vec<f64> = x
        .iter()
        .enumerate()
        .map(|(i, v)| v + offset * (1 + i % p % 3) as f64)
        .collect();
    let ys: Vec<f64> = y.iter().map(|v| v + offset).collect();
    let (plain, moved) = (dir.path().join("c.csv"), dir.path().join("o.csv"));
    write_csv(&plain, &names, &x, &y);
    write_csv(&moved, &names, &xs, &ys);
    for flags in [
        vec!["--method", "ols"],
        vec!["--method", "lasso", "--k", "3"],
    ] {
        let fit = |file: &Path| -> Value {
            let mut args = vec!["fit", file.to_str().unwrap()];
            args.extend(&flags);
            serde_json::from_str(&ravel(&args)).unwrap()
        };
        let (want, got) = (fit(&plain), fit(&moved));
        assert_eq!(
            got["diagnostics"]["excluded_constant"],
            json!([]),
            "{flags:?}: {got}"
        );
        let (cw, cg) = (
            want["coefficients"].as_array().unwrap(),
            got["coefficients"].as_array().unwrap(),
        );
        assert_eq!(cw.len(), cg.len(), "{flags:?}: nonzeros {want} vs {got}");
        let size = cw
            .iter()
            .map(|c| c["value"].as_f64().unwrap().abs())
            .fold(0.0, f64::max);
        for (a, b) in cw.iter().zip(cg) {
            assert_eq!(a["index"], b["index"], "{flags:?}: support");
            let (va, vb) = (a["value"].as_f64().unwrap(), b["value"].as_f64().unwrap());
            assert!(
                (va - vb).abs() <= 1e-8 * size,
                "{flags:?}: coefficient {} {va} vs {vb}",
                a["index"]
            );
        }
    }
}
