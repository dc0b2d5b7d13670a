//! Checkpoints as the service meets them at start, through the real service and broker: a
//! checkpoint whose statistics are malformed stops the start with a message naming the file
//! (it used to load and then panic in the first fold or extraction, a crash loop), and an
//! unwritable `state.dir` is refused at start, naming the field, instead of at the first
//! checkpoint after rows were folded.

use crate::common::*;
use ravel::Stats;
use ravel::broker::EmbeddedBroker;
use ravel::checkpoint::{self, Checkpoint};
use ravel::config::FeatureSchema;
use ravel_core::Task;
use ravel_core::stats::AlphaSchedule;
use serde_json::Value;

#[test]
fn a_checkpoint_with_malformed_statistics_stops_the_start_naming_the_file() {
    let broker = EmbeddedBroker::start(1).unwrap();
    broker.create_topic("t.bad", 1).unwrap();
    let state = tempfile::tempdir().unwrap();
    let cfg = || {
        config(
            vec![stream(
                "bad",
                "t.bad",
                FeatureSchema::Count(2),
                Task::Regression,
            )],
            Some(state.path()),
        )
    };
    let mut stats = Stats::new(Task::Regression, 2, AlphaSchedule::Plain);
    stats
        .update_batch(&[1.0, 2.0, 3.0, 5.0], &[1.0, 2.0])
        .unwrap();
    let cp = Checkpoint {
        version: checkpoint::VERSION,
        stream: "bad".into(),
        topic: "t.bad".into(),
        cluster_id: None,
        offsets: [(0, 0)].into(),
        last_update_ms: None,
        as_of_ms: None,
        stats,
        folds: None,
        windows: None,
        bucket_files: None,
    };
    let file = checkpoint::path(state.path(), "bad");
    // Each edit leaves a checkpoint of the right shape, written as a sound file (header and
    // checksum right, as a broken build would write it), with statistics that do not hold
    // together.
    type Edit = fn(&mut Value);
    let edits: [(&str, Edit); 4] = [
        ("sxx", |v| {
            v["stats"]["sxx_lower"].as_array_mut().unwrap().pop();
        }),
        ("mean_x", |v| {
            v["stats"]["mean_x"] = serde_json::json!([1.0])
        }),
        ("negative", |v| v["stats"]["syy"] = serde_json::json!(-1.0)),
        ("offset", |v| v["offsets"] = serde_json::json!({"0": -5})),
    ];
    for (what, edit) in edits {
        let mut v: Value = serde_json::to_value(&cp).unwrap();
        edit(&mut v);
        let bad: Checkpoint = serde_json::from_value(v).unwrap();
        checkpoint::write(state.path(), &mut bad.clone()).unwrap();
        let err = TestService::start(cfg(), broker.bootstrap_servers())
            .join()
            .unwrap_err();
        let msg = format!("{err:#}");
        assert!(
            msg.contains(&file.display().to_string()) && msg.contains(what),
            "{what}: {msg}"
        );
    }
    // The untouched checkpoint still loads.
    checkpoint::write(state.path(), &mut cp.clone()).unwrap();
    let svc = TestService::start(cfg(), broker.bootstrap_servers());
    let v = svc.wait_rows("bad", 2);
    assert_eq!(v["n"], 2);
    // Issue 59: restored and caught up (the topic is empty), it has read nothing since the
    // start, which is not an alarm: the note says what the statistics hold.
    let a = &v["arrivals"];
    assert_eq!(
        (a["messages"].as_u64(), a["alarm"].as_bool()),
        (Some(0), Some(false)),
        "{a}"
    );
    assert!(
        a["note"]
            .as_str()
            .is_some_and(|n| n.contains("restored from the checkpoint hold 2 rows")),
        "{a}"
    );
    svc.stop().unwrap();
}

#[test]
fn an_unwritable_state_dir_is_refused_at_start_naming_the_field() {
    let broker = EmbeddedBroker::start(1).unwrap();
    let tmp = tempfile::tempdir().unwrap();
    // A directory below a regular file can be neither created nor written (even by root).
    let blocker = tmp.path().join("a-file");
    std::fs::write(&blocker, b"not a directory").unwrap();
    let cfg = config(
        vec![stream(
            "s",
            "t.s",
            FeatureSchema::Count(2),
            Task::Regression,
        )],
        Some(&blocker.join("state")),
    );
    let err = TestService::start(cfg, broker.bootstrap_servers())
        .join()
        .unwrap_err();
    let msg = format!("{err:#}");
    assert!(msg.contains("state.dir"), "{msg}");
}
