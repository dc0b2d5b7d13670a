//! The bounds on extraction work through the real service: a deadline
//! (`http.extraction_timeout_ms`) stops a long extraction with 503 `extraction_timeout`, a full
//! queue answers 503 `busy` with Retry-After, a client that goes away cancels its extraction,
//! and other requests are served meanwhile. Real broker, real HTTP server.

use crate::common::*;
use ravel::broker::EmbeddedBroker;
use rdkafka::config::ClientConfig;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use serde_json::json;
use std::time::{Duration, Instant};

/// p = 300, n = 320: k-support at a large k and a tiny penalty to the smallest tolerance is
/// long (the fully corrective Frank-Wolfe re-solves over every atom it has found, thousands
/// of them), whereas OLS at p = 3 is instant.
const P: usize = 300;
const N: usize = 320;

fn heavy() -> serde_json::Value {
    json!({"method": "k-support", "k": 150, "lambda": 1e-6, "tol": 1e-14, "max_iterations": 10000})
}

fn start(timeout_ms: u64, concurrent: usize, queued: usize) -> (EmbeddedBroker, TestService) {
    start_with_drain(timeout_ms, concurrent, queued, 10_000)
}

fn start_with_drain(
    timeout_ms: u64,
    concurrent: usize,
    queued: usize,
    drain_ms: u64,
) -> (EmbeddedBroker, TestService) {
    let broker = EmbeddedBroker::start(1).unwrap();
    let brokers = broker.bootstrap_servers().to_string();
    for t in ["t.big", "t.small"] {
        broker.create_topic(t, 1).unwrap();
        broker.create_topic(&format!("{t}.dlq"), 1).unwrap();
    }
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", &brokers)
        .create()
        .unwrap();
    let (x, y) = synthetic(P, 10, N, 5);
    let (xs, ys) = synthetic(3, 2, 50, 6);
    let send = |topic: &str, p: usize, x: &[f64], y: &[f64]| {
        for i in 0..y.len() {
            let body =
                serde_json::to_vec(&json!({"x": &x[i * p..(i + 1) * p], "y": y[i]})).unwrap();
            producer
                .send(BaseRecord::<(), [u8]>::to(topic).payload(&body[..]))
                .map_err(|(e, _)| e)
                .unwrap();
            producer.poll(Duration::ZERO);
        }
    };
    send("t.big", P, &x, &y);
    send("t.small", 3, &xs, &ys);
    producer.flush(Duration::from_secs(30)).unwrap();
    let mut cfg = config(
        vec![
            regression("big", "t.big", P),
            regression("small", "t.small", 3),
        ],
        None,
    );
    cfg.http.extraction_timeout_ms = timeout_ms;
    cfg.http.max_concurrent_extractions = concurrent;
    cfg.http.max_queued_extractions = queued;
    cfg.http.drain_timeout_ms = drain_ms;
    cfg.check().unwrap();
    let svc = TestService::start(cfg, &brokers);
    svc.wait_rows("big", N as u64);
    svc.wait_rows("small", 50);
    (broker, svc)
}

fn gauge(svc: &TestService, name: &str) -> f64 {
    sample(&svc.metrics(), name).unwrap_or(0.0)
}

/// Waits until `name` reads `value`.
fn wait_gauge(svc: &TestService, name: &str, value: f64) {
    let start = Instant::now();
    while gauge(svc, name) != value {
        assert!(start.elapsed() < DEADLINE, "{name} never reached {value}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_long_extraction_stops_at_its_deadline_and_small_ones_still_answer() {
    let (_broker, svc) = start(300, 2, 8);
    let t = Instant::now();
    let (status, body) = svc.post("/v1/streams/big/model", &heavy());
    let took = t.elapsed();
    assert_eq!(
        status,
        503,
        "{}",
        &body.to_string()[..200.min(body.to_string().len())]
    );
    assert_error_says(&body, "extraction_timeout", "300 ms");
    // The solver stopped at the deadline rather than running to its end (which takes far
    // longer on this design: see the cancellation test below, which waits for it).
    assert!(took < Duration::from_secs(20), "answered after {took:?}");
    let m = svc.metrics();
    assert_eq!(
        sample(&m, "ravel_extractions_refused_total{reason=\"timeout\"}"),
        Some(1.0),
        "{m}"
    );
    wait_gauge(&svc, "ravel_extractions_running", 0.0);
    // Small extractions are not affected by the deadline.
    let (status, body) = svc.post("/v1/streams/small/model", &json!({"method": "ols"}));
    assert_eq!(status, 200, "{body}");
}

#[test]
fn a_full_queue_answers_busy_and_a_client_that_leaves_cancels_its_work() {
    // One slot, no queue, a deadline far away.
    let (_broker, svc) = start(600_000, 1, 0);
    let url = svc.url("/v1/streams/big/model");
    // A client that gives up after a while, while its extraction computes.
    let leaver = std::thread::spawn(move || {
        let r = reqwest::blocking::Client::builder()
            .timeout(Duration::from_millis(1500))
            .build()
            .unwrap()
            .post(url)
            .json(&heavy())
            .send();
        assert!(
            r.is_err(),
            "the heavy extraction answered within 1.5 s: {:?}",
            r.map(|r| r.status())
        );
    });
    wait_gauge(&svc, "ravel_extractions_running", 1.0);
    // The slot is taken and no request may wait: 503 busy with Retry-After.
    let r = client()
        .post(svc.url("/v1/streams/small/model"))
        .json(&json!({"method": "ols"}))
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 503);
    assert_eq!(r.headers()["retry-after"], "1");
    let body: serde_json::Value = r.json().unwrap();
    assert_eq!(body["error"]["code"], "busy", "{body}");
    // Reads do not need a slot.
    assert_eq!(svc.get("/v1/streams/small").0, 200);
    leaver.join().unwrap();
    // The client went away: its extraction is cancelled and the slot is free again.
    wait_gauge(
        &svc,
        "ravel_extractions_refused_total{reason=\"cancelled\"}",
        1.0,
    );
    wait_gauge(&svc, "ravel_extractions_running", 0.0);
    let m = svc.metrics();
    assert_eq!(
        sample(&m, "ravel_extractions_refused_total{reason=\"busy\"}"),
        Some(1.0),
        "{m}"
    );
    let (status, body) = svc.post("/v1/streams/small/model", &json!({"method": "ols"}));
    assert_eq!(status, 200, "{body}");
}

#[test]
fn stopping_the_service_stops_a_running_extraction() {
    // The drain would wait 120 s for the request: only the extraction stopping with the
    // server lets it end within the 30 s below.
    let (_broker, svc) = start_with_drain(600_000, 1, 4, 120_000);
    let url = svc.url("/v1/streams/big/model");
    let request = std::thread::spawn(move || {
        client()
            .post(url)
            .json(&heavy())
            .send()
            .map(|r| r.status().as_u16())
    });
    wait_gauge(&svc, "ravel_extractions_running", 1.0);
    // Stop the service (what SIGTERM triggers) while the extraction computes: the extraction
    // stops at its next iteration, so the server's drain does not wait for it.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || tx.send(svc.stop().map_err(|e| e.to_string())));
    let stopped = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("the service did not stop within 30 s with an extraction running");
    assert!(stopped.is_ok(), "{stopped:?}");
    // The client got 503 shutting_down (or its connection closed), not a model.
    match request.join().unwrap() {
        Ok(status) => assert_eq!(status, 503),
        Err(e) => assert!(!e.is_timeout(), "{e}"),
    }
}
