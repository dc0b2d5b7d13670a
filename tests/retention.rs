//! Issue 10: rows deleted by the broker's retention before ravel read them are not lost
//! silently. ravel reads a stream, stops (checkpoint), the topic grows past what its partition
//! keeps (the embedded broker keeps 5 MB per partition), and the restarted service finds its
//! checkpoint's offset below the partition's log start: it logs the gap and counts it in
//! `ravel_ingest_lost_messages_total`, and the rows it folds plus the lost ones are all the
//! rows produced.

use crate::common::{
    ConfigFile, DEADLINE, metrics_of, ravel, ravel_broker, sample, serve, stream_n,
};
use std::time::{Duration, Instant};

const TOPIC: &str = "t.retention";
const P: usize = 50;

fn produce(brokers: &str, n: usize, seed: u64) {
    let design = format!("p={P},k=5,n={n},seed={seed}");
    ravel(&[
        "produce",
        "--brokers",
        brokers,
        "--topic",
        TOPIC,
        "--synthetic",
        &design,
        "--wire-format",
        "json",
        "--batch-rows",
        "1",
        "--quiet",
    ]);
}

fn rows(base: &str) -> u64 {
    stream_n(base, "r").unwrap_or(0)
}

fn wait_rows(base: &str, want: impl Fn(u64) -> bool) -> u64 {
    let start = Instant::now();
    loop {
        let n = rows(base);
        if want(n) {
            return n;
        }
        assert!(start.elapsed() < DEADLINE, "stream stuck at n = {n}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn metric(base: &str, name: &str) -> f64 {
    let text = metrics_of(base);
    sample(&text, name).unwrap_or_else(|| panic!("no {name} in /metrics"))
}

#[test]
fn messages_deleted_before_they_were_read_are_logged_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let topic = format!("{TOPIC}:1");
    let (_broker, brokers) = ravel_broker(dir.path(), &[&topic]);
    ConfigFile::new("retention")
        .state_in(dir.path(), 200)
        .stream("r", TOPIC, P as i64)
        .write(dir.path());

    // 200 rows read and checkpointed, then the service stops.
    produce(&brokers, 200, 1);
    let (mut first, base) = serve(dir.path(), &brokers, 0);
    wait_rows(&base, |n| n == 200);
    assert_eq!(
        metric(&base, "ravel_ingest_lost_messages_total{stream=\"r\"}"),
        0.0
    );
    first.signal("-TERM");
    assert!(first.wait());

    // About 9 MB of JSON rows (one per message) while it is down: the partition keeps 5 MB,
    // so the oldest messages, the 200 read ones and some never read, are deleted.
    let later = 9000;
    produce(&brokers, later, 2);
    let produced = 200 + later as u64;

    let (mut second, base) = serve(dir.path(), &brokers, 1);
    // Every message still on the partition is read: the position reaches the end.
    let start = Instant::now();
    let (n, lost) = loop {
        let n = rows(&base);
        let lost = metric(&base, "ravel_ingest_lost_messages_total{stream=\"r\"}") as u64;
        if lost > 0 && n + lost == produced {
            break (n, lost);
        }
        assert!(
            start.elapsed() < DEADLINE,
            "n = {n}, lost = {lost}, produced = {produced}"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    assert!(n > 200 && n < produced, "n = {n}");
    second.signal("-TERM");
    assert!(second.wait());
    let log = std::fs::read_to_string(dir.path().join("serve1.log")).unwrap();
    assert!(
        log.contains("deleted before they were read") && log.contains(&format!("{lost}")),
        "{log}"
    );
}
