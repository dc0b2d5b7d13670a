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
        let m = client()
            .get(format!("{base}/metrics"))
            .send()
            .unwrap()
            .text()
            .unwrap();
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
