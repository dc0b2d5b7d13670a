//! Checkpoints as the service meets them at start, through the real service and broker: a
//! checkpoint whose statistics are malformed stops the start with a message naming the file
//! (it used to load and then panic in the first fold or extraction, a crash loop), and an
//! unwritable `state.dir` is refused at start, naming the field, instead of at the first
//! checkpoint after rows were folded.

use crate::common::*;
use ravel::broker::EmbeddedBroker;
use ravel::checkpoint::{self, Checkpoint};
use serde_json::Value;

#[test]
fn a_checkpoint_with_malformed_statistics_stops_the_start_naming_the_file() {
    let (broker, _) = broker_with(&[("t.bad", 1)]);
    let state = tempfile::tempdir().unwrap();
    let cfg = || one_regression("bad", "t.bad", 2, Some(state.path()));
    let cp = two_row_checkpoint("bad", "t.bad", 0);
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
        let msg = TestService::start_refused(cfg(), broker.bootstrap_servers());
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
    let cfg = one_regression("s", "t.s", 2, Some(&blocker.join("state")));
    let msg = TestService::start_refused(cfg, broker.bootstrap_servers());
    assert!(msg.contains("state.dir"), "{msg}");
}
