//! Drift reporting through the service: an abrupt change streamed through the real broker into
//! a stream with the adaptive schedule shows up in GET /v1/streams/{name} and /metrics with the
//! same alarms the library raises replaying the same rows (batching does not change them).

use crate::common::*;
use ravel::broker::EmbeddedBroker;
use ravel::config::FeatureSchema;
use ravel::produce::{self, ProduceArgs, WireFormat};
use ravel_core::Task;
use ravel_core::scenarios::{Drift, DriftingStream};
use ravel_core::stats::RunningStats;

#[test]
fn drift_alarms_reach_the_api_and_the_metrics() {
    let (p, n, change) = (10, 30_000u64, 15_000u64);
    let mut source = DriftingStream::new(p, 3, Drift::Abrupt { at: change }, n, 5);
    let (mut x, mut y) = (vec![], vec![]);
    while source.fill(5000, &mut x, &mut y) > 0 {}
    let dir = tempfile::tempdir().unwrap();
    let names = names(p);
    let file = dir.path().join("drift.csv");
    write_csv(&file, &names, &x, &y);

    // The library's answer on the same rows, row by row.
    let schedule = "adaptive".parse().unwrap();
    let mut offline = RunningStats::new(p, schedule);
    for i in 0..n as usize {
        offline.update(&x[i * p..(i + 1) * p], y[i]).unwrap();
    }
    let expect = offline.drift_status();
    assert!(
        expect.alarms >= 1,
        "the change must be detected offline: {expect:?}"
    );
    let last = expect.last_alarm_row.unwrap();
    assert!(last > change && last < change + 1000, "{expect:?}");

    let broker = EmbeddedBroker::start(1).unwrap();
    broker.create_topic("t.drift", 1).unwrap();
    let args = ProduceArgs {
        brokers: broker.bootstrap_servers().into(),
        topic: "t.drift".into(),
        input: Some(file.clone()),
        target: None,
        file_format: None,
        synthetic: None,
        wire_format: WireFormat::Binary,
        batch_rows: 97,
        schema_registry: None,
        schema_registry_auth: None,
        options: vec![],
        quiet: true,
        memory: Default::default(),
    };
    assert_eq!(produce::run(&args).unwrap().rows, n);

    let mut s = stream(
        "drift",
        "t.drift",
        FeatureSchema::names(names),
        Task::Regression,
    );
    s.alpha = "adaptive".parse().unwrap();
    let svc = TestService::start(config(vec![s], None), broker.bootstrap_servers());
    svc.wait_rows("drift", n);
    let (status, body) = svc.get("/v1/streams/drift");
    assert_eq!(status, 200);
    let drift = &body["drift"];
    assert_eq!(drift["alarms"].as_u64(), Some(expect.alarms), "{body}");
    assert_eq!(drift["last_alarm_row"].as_u64(), Some(last), "{body}");
    let ess = drift["effective_sample_size"].as_f64().unwrap();
    assert!(
        (ess - expect.effective_sample_size).abs() <= 1e-6 * ess,
        "{body}"
    );
    assert!(
        ess < n as f64,
        "after a change the averages span fewer rows than n: {body}"
    );
    let metrics = svc.metrics();
    assert_eq!(
        sample(
            &metrics,
            "ravel_stream_drift_alarms_total{stream=\"drift\"}"
        ),
        Some(expect.alarms as f64)
    );
    assert_eq!(
        sample(
            &metrics,
            "ravel_stream_last_drift_alarm_row{stream=\"drift\"}"
        ),
        Some(last as f64)
    );
    svc.stop().unwrap();
}

#[test]
fn adaptive_classification_streams_are_refused() {
    let mut s = stream("c", "t.c", FeatureSchema::Count(3), Task::Classification);
    s.alpha = "adaptive".parse().unwrap();
    let err = s.schedule().unwrap_err().to_string();
    assert!(err.contains("regression"), "{err}");
}
