//! Scale-out (issue 12): several `ravel serve` processes in one consumer group share a
//! 6-partition topic with the Kafka state store (`state.store = "kafka"`). Each folds the
//! partitions it is assigned, publishes their statistics and offsets to the state topic, and
//! answers for the whole stream by merging the others' latest states.
//!
//! Checked over `ravel broker`, with real processes and real signals: 500k rows produced while
//! one replica is SIGKILLed and another joins; at the end every replica reports n equal to the
//! rows produced and the OLS model of `ravel fit` on exactly those rows (1e-9). Then a rolling
//! restart of every replica (SIGTERM, start again, one at a time) loses and double-counts
//! nothing either.

use crate::common::*;
use serde_json::{Value, json};
use std::path::Path;
use std::time::{Duration, Instant};

const TOPIC: &str = "t.scale";
const GROUP: &str = "scale-group";

fn detail(base: &str) -> Option<Value> {
    let r = client().get(format!("{base}/v1/streams/r")).send().ok()?;
    r.json::<Value>().ok()
}

fn n_of(base: &str) -> Option<u64> {
    stream_n(base, "r")
}

/// Waits until every replica holds `n` rows, then checks that they stay there.
fn wait_all(bases: &[(String, usize)], n: u64, dir: &Path) {
    let deadline = Duration::from_secs(180);
    for (base, run) in bases {
        let start = Instant::now();
        while n_of(base) != Some(n) {
            assert!(
                start.elapsed() < deadline,
                "replica {run}: wanted n = {n}, have {:?}; detail {:?}; log:\n{}",
                n_of(base),
                detail(base).map(|d| d["partition_states"].clone()),
                tail_of(&dir.join(format!("serve{run}.log")))
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    std::thread::sleep(Duration::from_secs(2));
    for (base, run) in bases {
        assert_eq!(
            n_of(base),
            Some(n),
            "replica {run} moved past the rows produced"
        );
    }
}

/// Live partitions over all replicas (the group owns each once when its rebalance is done).
fn live_partitions(bases: &[(String, usize)]) -> usize {
    bases
        .iter()
        .filter_map(|(b, _)| detail(b))
        .map(|d| {
            d["partition_states"]
                .as_array()
                .map_or(0, |a| a.iter().filter(|p| p["source"] == "live").count())
        })
        .sum()
}

/// Waits until the group's rebalance gave every partition to one of `bases`.
fn wait_assigned(bases: &[(String, usize)]) {
    let start = Instant::now();
    while live_partitions(bases) != 6 {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "partitions folded live: {}",
            live_partitions(bases)
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

fn tail_of(path: &Path) -> String {
    let s = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = s.lines().collect();
    lines[lines.len().saturating_sub(40)..].join("\n")
}

/// Every replica answers with the offline OLS model of all the rows, and says which
/// partitions it folds and which it merged from the state topic.
fn check_models(bases: &[(String, usize)], all: &Path, total: u64) {
    let fit: Value =
        serde_json::from_str(&ravel(&["fit", all.to_str().unwrap(), "--method", "ols"])).unwrap();
    let mut live = 0;
    for (base, run) in bases {
        let r = client()
            .post(format!("{base}/v1/streams/r/model"))
            .json(&json!({"method": "ols"}))
            .send()
            .unwrap();
        assert_eq!(r.status().as_u16(), 200);
        let api: Value = r.json().unwrap();
        assert_eq!(api["n"], total);
        assert_same_model(&api, &fit, 1e-9, &format!("ols on replica {run}"));
        // The model says which partitions it was extracted from, and their rows add up.
        let merged = api["partition_states"].as_array().unwrap();
        assert_eq!(merged.len(), 6, "replica {run}: {merged:?}");
        let sum: u64 = merged.iter().map(|p| p["n"].as_u64().unwrap()).sum();
        assert_eq!(sum, total, "replica {run}: {merged:?}");
        let d = detail(base).unwrap();
        let parts = d["partition_states"].as_array().unwrap().clone();
        assert_eq!(parts.len(), 6, "replica {run}: {parts:?}");
        let sum: u64 = parts.iter().map(|p| p["n"].as_u64().unwrap()).sum();
        assert_eq!(sum, total, "replica {run}: {parts:?}");
        // The rows are spread (none near the broker's 5 MB per partition).
        assert!(
            parts.iter().all(|p| p["n"].as_u64().unwrap() < total / 4),
            "{parts:?}"
        );
        live += parts.iter().filter(|p| p["source"] == "live").count();
        // Every partition is somebody's: the others come from the state topic.
        assert!(
            parts
                .iter()
                .all(|p| p["source"] == "live" || p["source"] == "changelog"),
            "{parts:?}"
        );
    }
    // The group owns each partition once.
    assert_eq!(live, 6, "partitions folded live over all replicas");
}

#[test]
fn replicas_share_partitions_and_each_answers_for_every_row_through_kills_and_restarts() {
    let dir = tempfile::tempdir().unwrap();
    // p = 3 in binary messages: 32 bytes a row, 500k rows are about 2.7 MB per partition of
    // the six (spread at random, below), inside the embedded broker's 5 MB per partition.
    let (p, chunks, chunk_rows) = (3, 25, 20_000);
    let total = chunks * chunk_rows;
    let names = names(p);
    let (x, y) = synthetic(p, 2, total, 12);
    let all = dir.path().join("all.csv");
    write_csv(&all, &names, &x, &y);
    let chunk_files = write_chunks(dir.path(), &names, &x, &y, chunk_rows);
    let (mut broker, brokers) = Proc::start(
        "ravel broker",
        &[
            "broker",
            "--topic",
            &format!("{TOPIC}:6"),
            "--topic",
            &format!("{TOPIC}.dlq:1"),
            "--topic",
            &format!("{GROUP}.state:3"),
        ],
        &[],
        &dir.path().join("broker.log"),
    );
    ConfigFile::new(GROUP)
        .quick_rejoin()
        .set("state.store", "kafka")
        .set("state.checkpoint_interval_ms", 500)
        .stream("r", TOPIC, names.clone())
        .write(dir.path());

    let mut replicas: Vec<(Proc, String, usize)> = Vec::new();
    for run in 1..=3 {
        let (p, base) = serve(dir.path(), &brokers, run);
        replicas.push((p, base, run));
    }
    let producer = produce_in_background(
        &brokers,
        TOPIC,
        chunk_files,
        Duration::from_millis(300),
        &[],
    );
    // Mid-stream: SIGKILL a replica that holds rows, and start another.
    let start = Instant::now();
    while n_of(&replicas[0].1).unwrap_or(0) < total as u64 / 4 {
        assert!(start.elapsed() < Duration::from_secs(180), "no rows arrive");
        std::thread::sleep(Duration::from_millis(100));
    }
    let (killed, _, _) = replicas.remove(0);
    killed.signal("-KILL");
    drop(killed);
    let (p4, base4) = serve(dir.path(), &brokers, 4);
    replicas.push((p4, base4, 4));
    producer.join().unwrap();

    let bases: Vec<(String, usize)> = replicas.iter().map(|(_, b, r)| (b.clone(), *r)).collect();
    wait_assigned(&bases);
    wait_all(&bases, total as u64, dir.path());
    check_models(&bases, &all, total as u64);

    // Rolling restart: one replica at a time stops (SIGTERM: a last state and commit) and a
    // new one takes its place.
    let mut run = 4;
    for _ in 0..3 {
        let (mut old, _, r) = replicas.remove(0);
        old.signal("-TERM");
        assert!(old.wait(), "replica {r} did not exit cleanly");
        run += 1;
        let (p, base) = serve(dir.path(), &brokers, run);
        replicas.push((p, base, run));
    }
    let bases: Vec<(String, usize)> = replicas.iter().map(|(_, b, r)| (b.clone(), *r)).collect();
    wait_assigned(&bases);
    wait_all(&bases, total as u64, dir.path());
    check_models(&bases, &all, total as u64);
    // Each stopped replica wrote its partitions' last states, so the new ones restored every
    // row from the state topic and folded none again (re-reading from the beginning would
    // give the same model, so this is what shows the restore).
    for (base, run) in &bases {
        let m = metrics_of(base);
        let applied =
            sample(&m, "ravel_observations_applied_total{stream=\"r\"}").expect("declared");
        assert_eq!(applied, 0.0, "replica {run} folded rows again");
        let log = std::fs::read_to_string(dir.path().join(format!("serve{run}.log"))).unwrap();
        assert!(
            log.contains("partition restored from the state topic"),
            "replica {run}"
        );
    }

    for (mut p, _, _) in replicas {
        p.signal("-TERM");
        assert!(p.wait());
    }
    broker.signal("-TERM");
    assert!(broker.wait());
}

/// The partitions the replica at `base` folds itself (0 while it does not answer).
fn live_of(base: &str) -> usize {
    detail(base).map_or(0, |d| {
        d["partition_states"]
            .as_array()
            .map_or(0, |a| a.iter().filter(|p| p["source"] == "live").count())
    })
}

/// Seconds from `started` until `/readyz` at `base` answers 200 (None: not within `bound`).
fn ready_within(base: &str, started: Instant, bound: Duration) -> Option<f64> {
    while started.elapsed() < bound {
        if try_get(base, "/readyz").is_some_and(|(s, _)| s == 200) {
            return Some(started.elapsed().as_secs_f64());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    None
}

/// Waits until `a` and `b` hold the 8 partitions between them, each some: neither is left
/// unassigned while the other holds every partition.
fn both_hold_partitions(a: &str, b: &str, what: &str, dir: &Path, runs: [usize; 2]) {
    let start = Instant::now();
    loop {
        let (la, lb) = (live_of(a), live_of(b));
        if la + lb == 8 && la > 0 && lb > 0 {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "{what}: partitions held {la} + {lb}; logs:\n{}\n---\n{}",
            tail_of(&dir.join(format!("serve{}.log", runs[0]))),
            tail_of(&dir.join(format!("serve{}.log", runs[1])))
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// Issue 59: two replicas of one group on `ravel broker`, default settings (the embedded
/// broker's 4 s session): one SIGKILLed and started again, and both stopped with SIGTERM and
/// started one after the other, are ready within seconds each time and share the 8
/// partitions (none stuck unassigned while the other holds them all). Two tries of each;
/// `scripts/replicas_rejoin.py` makes ten and prints the times (docs/scaling.md).
#[test]
fn two_replicas_are_ready_within_seconds_after_a_sigkill_and_after_sigterm() {
    let dir = tempfile::tempdir().unwrap();
    let (topic, group) = ("t.rejoin", "rejoin-group");
    let (mut broker, brokers) = Proc::start(
        "ravel broker",
        &[
            "broker",
            "--topic",
            &format!("{topic}:8"),
            "--topic",
            &format!("{topic}.dlq:1"),
            "--topic",
            &format!("{group}.state:3"),
        ],
        &[],
        &dir.path().join("broker.log"),
    );
    let names = names(2);
    let (x, y) = synthetic(2, 1, 4000, 5);
    let rows = dir.path().join("rows.csv");
    write_csv(&rows, &names, &x, &y);
    produce_file(&brokers, topic, &rows, &[]);
    ConfigFile::new(group)
        .set("state.store", "kafka")
        .stream("r", topic, names)
        .write(dir.path());
    // A restart is ready within this (issue 59 asks 10 s; the margin is for a loaded machine,
    // a stuck join takes 18 s and more).
    let bound = Duration::from_secs(15);
    let mut run = 0;
    let start = |run: &mut usize| {
        *run += 1;
        let t = Instant::now();
        let (p, base) = serve(dir.path(), &brokers, *run);
        (p, base, t, *run)
    };
    let (mut a, mut b) = (start(&mut run), start(&mut run));
    for r in [&a, &b] {
        assert!(
            ready_within(&r.1, r.2, Duration::from_secs(60)).is_some(),
            "first start"
        );
    }
    both_hold_partitions(&a.1, &b.1, "first start", dir.path(), [a.3, b.3]);
    let mut times = Vec::new();
    for i in 0..2 {
        a.0.signal("-KILL");
        drop(a);
        a = start(&mut run);
        let t = ready_within(&a.1, a.2, bound);
        assert!(
            t.is_some(),
            "try {i}: not ready {bound:?} after a SIGKILL:\n{}",
            tail_of(&dir.path().join(format!("serve{}.log", a.3)))
        );
        times.push(("sigkill", t));
        both_hold_partitions(
            &a.1,
            &b.1,
            &format!("try {i}, SIGKILL"),
            dir.path(),
            [a.3, b.3],
        );

        for r in [&mut a, &mut b] {
            r.0.signal("-TERM");
        }
        assert!(
            a.0.wait() && b.0.wait(),
            "try {i}: a replica did not exit cleanly"
        );
        a = start(&mut run);
        std::thread::sleep(Duration::from_secs(1));
        b = start(&mut run);
        for (who, r) in [("first", &a), ("second", &b)] {
            let t = ready_within(&r.1, r.2, bound);
            assert!(
                t.is_some(),
                "try {i}: the {who} replica not ready {bound:?} after SIGTERM:\n{}",
                tail_of(&dir.path().join(format!("serve{}.log", r.3)))
            );
            times.push(("sigterm", t));
        }
        both_hold_partitions(
            &a.1,
            &b.1,
            &format!("try {i}, SIGTERM"),
            dir.path(),
            [a.3, b.3],
        );
    }
    eprintln!("seconds to ready: {times:?}");
    // Every row once, over the two.
    for r in [&a, &b] {
        let start = Instant::now();
        while n_of(&r.1) != Some(4000) {
            assert!(
                start.elapsed() < Duration::from_secs(60),
                "n = {:?}",
                n_of(&r.1)
            );
            std::thread::sleep(Duration::from_millis(200));
        }
    }
    for r in [&mut a, &mut b] {
        r.0.signal("-TERM");
        assert!(r.0.wait());
    }
    broker.signal("-TERM");
    assert!(broker.wait());
}

/// Issue 59: a replica whose join the embedded broker never answers says so. Two replicas of
/// one group with different session timeouts (45 s set in one's `kafka.options`, the embedded
/// broker's 4 s in the other's) leave the broker's rebalance waiting longer than it keeps a
/// joining member: the first's `/readyz` and log name it (`unassigned`, since when, what to
/// do), and the second, whose join ravel bounds (`max.poll.interval.ms`), joins again by
/// itself and is ready.
#[test]
fn a_replica_whose_join_is_never_answered_says_so_and_the_other_recovers() {
    let dir = tempfile::tempdir().unwrap();
    let (da, db) = (dir.path().join("a"), dir.path().join("b"));
    std::fs::create_dir_all(&da).unwrap();
    std::fs::create_dir_all(&db).unwrap();
    let (topic, group) = ("t.stuck", "stuck-group");
    let (mut broker, brokers) = Proc::start(
        "ravel broker",
        &[
            "broker",
            "--topic",
            &format!("{topic}:4"),
            "--topic",
            &format!("{topic}.dlq:1"),
            "--topic",
            &format!("{group}.state:3"),
        ],
        &[],
        &dir.path().join("broker.log"),
    );
    let base = ConfigFile::new(group)
        .set("state.store", "kafka")
        .stream("r", topic, 2);
    base.clone()
        .option("session.timeout.ms", "45000")
        .write(&da);
    base.write(&db);
    let (mut a, base_a) = serve(&da, &brokers, 1);
    assert!(ready_within(&base_a, Instant::now(), Duration::from_secs(60)).is_some());
    let (mut b, base_b) = serve(&db, &brokers, 2);
    // The first, revoked for the second's join, waits for an answer that never comes.
    let start = Instant::now();
    let body = loop {
        let (status, body) = get(&base_a, "/readyz");
        if !body["unassigned"].is_null() {
            assert_eq!(status, 503, "{body}");
            break body;
        }
        assert!(
            start.elapsed() < Duration::from_secs(40),
            "no unassigned report: {body}\n{}",
            tail_of(&da.join("serve1.log"))
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    let message = body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("this member of consumer group 'stuck-group' has had no partitions since")
            && message.contains("session.timeout.ms")
            && message.contains("restart"),
        "{message}"
    );
    assert_eq!(body["unassigned"]["group"], group, "{body}");
    let log = std::fs::read_to_string(da.join("serve1.log")).unwrap();
    assert!(
        log.contains("this member of the consumer group has had no partitions since"),
        "{log}"
    );
    // The second gives its join up and joins again: ready, with every partition.
    let start = Instant::now();
    while live_of(&base_b) != 4 {
        assert!(
            start.elapsed() < Duration::from_secs(120),
            "the second replica holds {} partitions:\n{}",
            live_of(&base_b),
            tail_of(&db.join("serve2.log"))
        );
        std::thread::sleep(Duration::from_millis(200));
    }
    assert_eq!(get(&base_b, "/readyz").0, 200);
    for p in [&mut a, &mut b] {
        p.signal("-KILL");
    }
    broker.signal("-TERM");
    assert!(broker.wait());
}
