//! Freshness as operators and clients see it, through the real service and a real broker:
//! messages produced with known Kafka timestamps move `ravel_ingest_freshness_seconds` by
//! their age (never below zero; a timestamp ahead of the clock by more than the skew allowance
//! is counted apart, not observed) and `as_of` in the summary, the list and every model
//! answer to the newest message's timestamp (never later than the fold); a checkpoint keeps
//! `as_of` across a restart.

use crate::common::*;
use ravel::SKEW_ALLOWANCE_MS;
use serde_json::{Value, json};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

const STREAM: &str = "fresh";
const TOPIC: &str = "t.fresh";

fn now_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// Sends one message (with this Kafka timestamp, or the producer's clock) and waits for the
/// broker's acknowledgement.
fn send(brokers: &str, payload: &[u8], timestamp: Option<i64>) {
    let record = Record {
        timestamp,
        ..Record::of(payload)
    };
    send_records(brokers, TOPIC, [record], &[]);
}

fn row(i: usize) -> Vec<u8> {
    let x = [i as f64, (i * i) as f64 * 0.5 - 1.0];
    serde_json::to_vec(&json!({"x": x, "y": 2.0 * x[0] - x[1] + 0.1 * i as f64})).unwrap()
}

/// The freshness histogram of the stream: (count, sum, cumulative count at `le`).
struct Histogram {
    count: f64,
    sum: f64,
    metrics: String,
}

impl Histogram {
    fn read(svc: &TestService) -> Histogram {
        let metrics = svc.metrics();
        let get = |suffix: &str| {
            sample(
                &metrics,
                &format!("ravel_ingest_freshness_seconds_{suffix}{{stream=\"{STREAM}\"}}"),
            )
            .unwrap_or_else(|| panic!("no freshness {suffix} in\n{metrics}"))
        };
        Histogram {
            count: get("count"),
            sum: get("sum"),
            metrics: metrics.clone(),
        }
    }
    fn bucket(&self, le: &str) -> f64 {
        sample(
            &self.metrics,
            &format!("ravel_ingest_freshness_seconds_bucket{{stream=\"{STREAM}\",le=\"{le}\"}}"),
        )
        .unwrap_or_else(|| panic!("no bucket le={le}"))
    }
    fn future(&self) -> f64 {
        sample(
            &self.metrics,
            &format!("ravel_ingest_future_timestamps_total{{stream=\"{STREAM}\"}}"),
        )
        .expect("the future-timestamp counter exists from the start")
    }
}

/// Waits until the histogram has `count` observations and the future counter `future`: both
/// move just after the snapshot that shows the rows is published.
fn wait_histogram(svc: &TestService, count: f64, future: f64) -> Histogram {
    let start = Instant::now();
    loop {
        let h = Histogram::read(svc);
        if h.count == count && h.future() == future {
            return h;
        }
        assert!(
            h.count <= count && h.future() <= future,
            "wanted {count} observations and {future} future, have {} and {}",
            h.count,
            h.future()
        );
        assert!(
            start.elapsed() < DEADLINE,
            "freshness never reached {count} observations / {future} future:\n{}",
            h.metrics
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `as_of` of the summary, the list, a model, a path and a prediction: all the same.
fn as_of_everywhere(svc: &TestService) -> i64 {
    let (_, one) = svc.get(&format!("/v1/streams/{STREAM}"));
    let as_of = one["as_of"]
        .as_i64()
        .unwrap_or_else(|| panic!("no as_of in {one}"));
    let (_, list) = svc.get("/v1/streams");
    assert_eq!(list["streams"][0]["as_of"], one["as_of"], "{list}");
    let (status, model) = svc.post(
        &format!("/v1/streams/{STREAM}/model"),
        &json!({"method": "ridge", "lambda": 0.1}),
    );
    assert_eq!(status, 200, "{model}");
    assert_eq!(model["as_of"], one["as_of"], "model {model}");
    let (status, path) = svc.get(&format!(
        "/v1/streams/{STREAM}/path?method=lasso&path_points=3"
    ));
    assert_eq!(status, 200, "{path}");
    assert_eq!(path["as_of"], one["as_of"], "path {path}");
    let (status, pred) = svc.post(
        &format!("/v1/streams/{STREAM}/predict"),
        &json!({"model": {"method": "ridge", "lambda": 0.1}, "rows": [[1.0, 2.0]]}),
    );
    assert_eq!(status, 200, "{pred}");
    assert_eq!(pred["as_of"], one["as_of"], "predict {pred}");
    as_of
}

#[test]
fn freshness_and_as_of_follow_the_produced_timestamps() {
    let (_broker, brokers) = broker_with(&[(TOPIC, 1), (&format!("{TOPIC}.dlq"), 1)]);
    let state = tempfile::tempdir().unwrap();
    let cfg = one_regression(STREAM, TOPIC, 2, Some(state.path()));
    let svc = TestService::start(cfg.clone(), &brokers);

    // Before any row: no as_of, an empty histogram (declared at zero for dashboards).
    let (status, v) = svc.get(&format!("/v1/streams/{STREAM}"));
    assert_eq!(status, 200);
    assert_eq!(v["as_of"], Value::Null, "{v}");
    let h = Histogram::read(&svc);
    assert_eq!((h.count, h.sum, h.future()), (0.0, 0.0, 0.0));

    // 1. A message timestamped 30 s ago: as_of is its timestamp exactly, and its age is
    // over 30 s (and not by more than this test has been waiting).
    let old = now_ms() - 30_000;
    let sent = Instant::now();
    send(&brokers, &row(1), Some(old));
    svc.wait_rows(STREAM, 1);
    let h = wait_histogram(&svc, 1.0, 0.0);
    let waited = sent.elapsed().as_secs_f64();
    assert!(
        h.sum > 30.0 && h.sum <= 30.0 + waited + 0.002,
        "age of a 30 s old message: {} (waited {waited} s)",
        h.sum
    );
    assert_eq!(h.bucket("30"), 0.0);
    if waited < 29.0 {
        assert_eq!(h.bucket("60"), 1.0);
    }
    assert_eq!(as_of_everywhere(&svc), old);

    // 2. A message timestamped by the producer's clock: as_of between the clock before the
    // send and after the acknowledgement; its age between 0 and the time until it was seen.
    let before = now_ms();
    let sent = Instant::now();
    send(&brokers, &row(2), None);
    let acked = now_ms();
    svc.wait_rows(STREAM, 2);
    let h2 = wait_histogram(&svc, 2.0, 0.0);
    let waited = sent.elapsed().as_secs_f64();
    let age = h2.sum - h.sum;
    assert!(
        (0.0..=waited + 0.002).contains(&age),
        "age {age} s of a message sent {waited} s ago"
    );
    let as_of = as_of_everywhere(&svc);
    assert!(
        (before..=acked).contains(&as_of),
        "as_of {as_of} not within [{before}, {acked}]"
    );

    // 3. A bad message and then a good one timestamped 10 s ago: only the good one is
    // observed (rejected messages never become visible), and as_of stays at the newest.
    let (_, v) = svc.get(&format!("/v1/streams/{STREAM}"));
    let as_of_before = v["as_of"].as_i64().unwrap();
    send(&brokers, b"{not json", Some(now_ms()));
    send(&brokers, &row(3), Some(now_ms() - 10_000));
    svc.wait_rows(STREAM, 3);
    let h3 = wait_histogram(&svc, 3.0, 0.0);
    let age = h3.sum - h2.sum;
    assert!(age > 10.0, "age {age} s of a message 10 s old");
    assert_eq!(
        as_of_everywhere(&svc),
        as_of_before,
        "older rows keep as_of"
    );

    // 4. Ahead of the service's clock within the skew allowance: an age of 0 (or, if the fold
    // came later than the timestamp, a small one), never negative and not counted as future.
    let sent = Instant::now();
    send(&brokers, &row(4), Some(now_ms() + SKEW_ALLOWANCE_MS - 100));
    svc.wait_rows(STREAM, 4);
    let h4 = wait_histogram(&svc, 4.0, 0.0);
    let waited = sent.elapsed().as_secs_f64();
    let age = h4.sum - h3.sum;
    assert!(
        (0.0..=waited).contains(&age),
        "age {age} s of a message within the allowance, seen after {waited} s"
    );

    // 5. An hour ahead: counted as a future timestamp, not observed; as_of moves only to the
    // moment of the fold (the summary's last update), not into the future.
    let future = now_ms() + 3_600_000;
    send(&brokers, &row(5), Some(future));
    let v = svc.wait_rows(STREAM, 5);
    let h5 = wait_histogram(&svc, 4.0, 1.0);
    assert_eq!(h5.sum, h4.sum);
    let as_of = as_of_everywhere(&svc);
    assert_eq!(Some(as_of), v["last_update_ms"].as_i64(), "{v}");
    assert!(as_of < future && as_of <= now_ms());
    let gauge = sample(
        &h5.metrics,
        &format!("ravel_stream_as_of_timestamp_seconds{{stream=\"{STREAM}\"}}"),
    )
    .unwrap();
    assert!(
        (gauge - as_of as f64 / 1000.0).abs() < 1e-3,
        "gauge {gauge}, as_of {as_of}"
    );

    // A restart restores as_of from the checkpoint before any message is read.
    svc.stop().unwrap();
    let svc = TestService::start(cfg, &brokers);
    let (status, v) = svc.get(&format!("/v1/streams/{STREAM}"));
    assert_eq!(status, 200);
    assert_eq!(v["n"], 5, "{v}");
    assert_eq!(v["as_of"].as_i64(), Some(as_of), "{v}");
}
