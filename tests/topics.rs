//! Issue 16: the topics ravel needs, checked at start against a cluster that does not create
//! topics on its own (clients with `allow.auto.create.topics = false`); authorization errors
//! named in `/readyz` and the metrics; and secrets in `kafka.options` never shown. Issue 35:
//! ravel creates the topics it owns (dead letters) unless told not to, never by default the
//! ones it reads; a stream topic made after the start gets its partition count (issue 45).

use crate::common::*;
use ravel::broker::EmbeddedBroker;
use ravel::config::Config;
use rdkafka::types::RDKafkaRespErr;
use serde_json::json;

/// `create`: `kafka.create_topics`, whether ravel also creates the topics it reads.
fn production_like(topic: &str, group: &str, create: bool) -> Config {
    let mut c = one_regression("s", topic, 3, None);
    c.kafka.group_id = group.into();
    c.kafka.create_topics = create;
    c.kafka.topic_partitions = 4;
    c.kafka.topic_replication = 3;
    c.kafka
        .options
        .insert("allow.auto.create.topics".into(), "false".into());
    c.check().unwrap();
    c
}

#[test]
fn a_missing_dead_letter_topic_keeps_the_service_not_ready_and_says_how_to_create_it() {
    let (broker, brokers) = broker_with(&[("t.need", 2)]);
    // The operator keeps the creation of dead-letter topics for themselves.
    let mut c = production_like("t.need", "need", false);
    c.dlq.create_topics = false;
    let svc = TestService::start(c, &brokers);
    // The embedded broker has no kafka-topics.sh: the command is what creates a topic there
    // (`create_command` on other clusters: the unit tests of kafka::topics).
    let command = format!(
        "ravel produce --brokers {brokers} --topic t.need.dlq --input FILE (the embedded broker creates a topic with its first message), or start ravel broker with --topic t.need.dlq:4"
    );
    let v = svc.wait_get("/readyz", "not ready naming t.need.dlq", |s, v| {
        s == 503 && v["missing_topics"][0]["topic"] == "t.need.dlq"
    });
    assert_eq!(v["missing_topics"].as_array().unwrap().len(), 1, "{v}");
    assert_eq!(v["missing_topics"][0]["role"], "dead_letters");
    assert_eq!(v["missing_topics"][0]["create_with"], command.as_str());
    assert_eq!(
        v["missing_topics"][0]["why"],
        "dlq.create_topics = false, so ravel does not create it"
    );
    let msg = v["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("t.need.dlq") && msg.contains(&command) && msg.contains("dlq.create_topics"),
        "{msg}"
    );
    let m = svc.metrics();
    assert_eq!(
        sample(
            &m,
            "ravel_missing_topics{role=\"dead_letters\",topic=\"t.need.dlq\"}"
        ),
        Some(1.0)
    );
    // The topic ravel did not create stays missing; once an operator creates it, ready.
    assert_eq!(topic_partitions(&brokers, "t.need.dlq"), None);
    broker.create_topic("t.need.dlq", 1).unwrap();
    let v = svc.wait_get("/readyz", "ready once the topic exists", |s, _| s == 200);
    assert_eq!(v["missing_topics"], json!([]));
}

#[test]
fn create_topics_creates_every_topic_ravel_needs() {
    let broker = EmbeddedBroker::start(1).unwrap();
    let brokers = broker.bootstrap_servers().to_string();
    assert_eq!(topic_partitions(&brokers, "t.made"), None);
    let svc = TestService::start(production_like("t.made", "made", true), &brokers);
    svc.wait_get("/readyz", "ready with the topics created", |s, _| s == 200);
    // kafka.topic_partitions (4). The embedded broker has no CreateTopics: its topics are
    // made through auto-creating metadata requests, with its default count, also 4.
    assert_eq!(topic_partitions(&brokers, "t.made"), Some(4));
    assert_eq!(topic_partitions(&brokers, "t.made.dlq"), Some(4));
}

#[test]
fn ravel_creates_the_topics_it_owns_and_never_by_default_the_ones_it_reads() {
    let broker = EmbeddedBroker::start(1).unwrap();
    let brokers = broker.bootstrap_servers().to_string();
    // Defaults: dlq.create_topics = true, kafka.create_topics = false.
    let svc = TestService::start(production_like("t.own", "own", false), &brokers);
    let v = svc.wait_get(
        "/readyz",
        "not ready naming only the stream topic",
        |s, v| {
            s == 503
                && v["missing_topics"].as_array().map(Vec::len) == Some(1)
                && v["missing_topics"][0]["topic"] == "t.own"
        },
    );
    assert_eq!(v["missing_topics"][0]["role"], "stream", "{v}");
    let why = v["missing_topics"][0]["why"].as_str().unwrap();
    assert!(
        why.contains("does not create the topics it reads")
            && why.contains("kafka.create_topics = false")
            && why.contains("check the topic name"),
        "{why}"
    );
    let msg = v["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("topic 't.own' does not exist (ravel does not create"),
        "{msg}"
    );
    // The dead-letter topic was made (the embedded broker has no CreateTopics: through the
    // auto-creating metadata request, with its default of 4 partitions, which is also
    // kafka.topic_partitions here); the topic the stream reads was not.
    assert_eq!(topic_partitions(&brokers, "t.own.dlq"), Some(4));
    assert_eq!(topic_partitions(&brokers, "t.own"), None);
    let m = svc.metrics();
    assert_eq!(
        sample(&m, "ravel_missing_topics{role=\"stream\",topic=\"t.own\"}"),
        Some(1.0)
    );
    assert_eq!(
        sample(
            &m,
            "ravel_missing_topics{role=\"dead_letters\",topic=\"t.own.dlq\"}"
        ),
        Some(0.0)
    );
    // Once the producers' side creates it, ready.
    broker.create_topic("t.own", 2).unwrap();
    let v = svc.wait_get("/readyz", "ready once the stream topic exists", |s, _| {
        s == 200
    });
    assert_eq!(v["missing_topics"], json!([]));
    // Issue 45: the stream's partition count follows the topic made after the start (it
    // stayed at 0 until a restart).
    svc.wait_get(
        "/v1/streams/s",
        "partitions of a topic made after the start",
        |_, s| s["partitions"] == json!({"assigned": 2, "total": 2}),
    );
}

#[test]
fn an_authorization_error_names_the_resource_and_the_operation() {
    let (broker, brokers) = broker_with(&[("t.acl", 1), ("t.acl.dlq", 1)]);
    broker
        .topic_error(
            "t.acl",
            RDKafkaRespErr::RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED,
        )
        .unwrap();
    let svc = TestService::start(production_like("t.acl", "acl", false), &brokers);
    let v = svc.wait_get("/readyz", "not ready naming the denied topic", |s, v| {
        s == 503 && v["authorization_errors"][0]["resource"] == "t.acl"
    });
    let d = &v["authorization_errors"][0];
    assert_eq!(d["resource_type"], "topic");
    assert_eq!(d["operation"], "describe");
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("denies describe on topic 't.acl'"),
        "{v}"
    );
    let m = svc.metrics();
    assert!(
        sample(
            &m,
            "ravel_kafka_authorization_errors_total{operation=\"describe\",resource=\"t.acl\",resource_type=\"topic\"}"
        )
        .unwrap_or(0.0)
            >= 1.0,
        "{m}"
    );
}
