//! Readiness means ownership of the whole stream: when a second member of the consumer group
//! takes partitions of a stream topic, the statistics would cover part of the stream, so the
//! service answers not ready until it owns every partition again. Real embedded broker, a
//! real second consumer in the same group.

use crate::common::*;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use std::time::Duration;

fn wait_ready(svc: &TestService, want: u16, intruder: Option<&BaseConsumer>) -> serde_json::Value {
    let what = format!("/readyz never answered {want}");
    svc.wait_get("/readyz", &what, |status, _| {
        // The intruder stays a live member of the group between the probes.
        if let Some(c) = intruder {
            let _ = c.poll(Duration::from_millis(50));
        }
        status == want
    })
}

#[test]
fn a_second_group_member_taking_partitions_makes_the_service_not_ready() {
    let (_broker, brokers) = broker_with(&[("t.own", 3), ("t.own.dlq", 1)]);
    let mut cfg = one_regression("s", "t.own", 2, None);
    cfg.kafka.group_id = "ownership-test".into();
    // The group protocol (on the embedded broker `auto` is standalone assignment, which no
    // member of the group takes partitions from).
    cfg.kafka.assignment = ravel::config::Assignment::Group;
    cfg.kafka
        .options
        .insert("session.timeout.ms".into(), "6000".into());
    let svc = TestService::start(cfg, &brokers);
    wait_ready(&svc, 200, None);
    let (_, summary) = svc.get("/v1/streams/s");
    assert_eq!(
        summary["partitions"],
        serde_json::json!({"assigned": 3, "total": 3})
    );

    // Another member of the same group: the group splits the three partitions.
    let intruder: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", &brokers)
        .set("group.id", "ownership-test")
        .set("session.timeout.ms", "6000")
        .create()
        .unwrap();
    intruder.subscribe(&["t.own"]).unwrap();
    let body = wait_ready(&svc, 503, Some(&intruder));
    assert_eq!(body["error"]["code"], "not_ready", "{body}");
    let m = svc.metrics();
    let assigned = sample(&m, "ravel_consumer_assigned_partitions{topic=\"t.own\"}").unwrap();
    assert!(assigned < 3.0, "{m}");
    let (_, summary) = svc.get("/v1/streams/s");
    assert_eq!(summary["partitions"]["total"], 3, "{summary}");
    assert!(
        summary["partitions"]["assigned"].as_u64().unwrap() < 3,
        "{summary}"
    );

    // It leaves: the service owns the whole stream again.
    intruder.unsubscribe();
    drop(intruder);
    wait_ready(&svc, 200, None);
    let (_, summary) = svc.get("/v1/streams/s");
    assert_eq!(
        summary["partitions"],
        serde_json::json!({"assigned": 3, "total": 3})
    );
}
