//! What the real binary refuses before it starts, naming what to fix: bad configuration
//! (log filter, Kafka topic names, the extraction bound, unknown keys of the settings tables)
//! and the command-line flags renamed so that each name means one thing in every command.

use crate::common::output_within;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::Duration;

/// Runs `ravel args...`, killed after 30 s (a service that started instead of refusing).
fn run(args: &[&str]) -> Output {
    let child = Command::new(env!("CARGO_BIN_EXE_ravel"))
        .args(args)
        .env_remove("RUST_LOG")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    output_within(child, Duration::from_secs(30)).0
}

/// `ravel serve` with this config file must exit with an error whose text contains each of
/// `want`.
fn refused(dir: &Path, config: &str, want: &[&str]) {
    let path = dir.join("ravel.toml");
    std::fs::write(&path, config).unwrap();
    let out = run(&["serve", "--config", path.to_str().unwrap()]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && out.status.code().is_some(),
        "config {config:?} was not refused (status {:?}): {err}",
        out.status
    );
    for w in want {
        assert!(
            err.contains(w),
            "config {config:?}: error {err:?} should mention {w:?}"
        );
    }
}

/// Real brokers (never reached: the check comes first), one stream.
const BASE: &str = "[kafka]\nbrokers = \"127.0.0.1:1\"\n";

fn stream(extra: &str) -> String {
    format!("{BASE}[[streams]]\nname = \"a\"\nfeatures = 2\n{extra}")
}

#[test]
fn an_invalid_log_level_is_refused_at_start_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    refused(
        dir.path(),
        &format!("[log]\nlevel = \"ravel=loud\"\n{}", stream("")),
        &["log.level", "ravel=loud"],
    );
    // The flag is checked the same way.
    let path = dir.path().join("ok.toml");
    std::fs::write(&path, stream("")).unwrap();
    let out = run(&[
        "serve",
        "--config",
        path.to_str().unwrap(),
        "--log-level",
        "ravel=loud",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("log.level"),
        "{:?}: {err}",
        out.status
    );
}

#[test]
fn topic_names_are_checked_against_kafkas_rules_at_start() {
    let dir = tempfile::tempdir().unwrap();
    for topic in ["bad topic", ".", "..", "t/x", "tëst"] {
        refused(
            dir.path(),
            &stream(&format!("topic = \"{topic}\"\n")),
            &[&format!("topic '{topic}'"), "not a valid Kafka topic name"],
        );
    }
    let long = "t".repeat(250);
    refused(
        dir.path(),
        &stream(&format!("topic = \"{long}\"\n")),
        &["250 characters", "at most 245"],
    );
    // A feature stream's topic too, and a stream name that makes an invalid default topic.
    refused(
        dir.path(),
        &format!("{BASE}[[feature_streams]]\nname = \"f\"\ntopic = \"a:b\"\nn = 10\ns = 2\n"),
        &["topic 'a:b'"],
    );
}

#[test]
fn the_extraction_bound_is_checked_at_start_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    refused(
        dir.path(),
        &format!("[http]\nmax_concurrent_extractions = 1025\n{}", stream("")),
        &["http.max_concurrent_extractions", "1025"],
    );
}

#[test]
fn settings_tables_refuse_unknown_keys_naming_them() {
    let dir = tempfile::tempdir().unwrap();
    refused(
        dir.path(),
        &stream("alpha = { kind = \"fixed\", value = 0.01 }\n"),
        &["unknown field `value`", "streams"],
    );
    refused(
        dir.path(),
        &stream("[streams.alpha]\nkind = \"adaptive\"\nfa = 2.0\n"),
        &["fa (false alarms per row)"],
    );
    refused(
        dir.path(),
        "[demo.synthetic]\np = 100\nsparsity = 3\n",
        &["unknown field `sparsity`", "demo.synthetic"],
    );
    refused(
        dir.path(),
        "[demo]\nfeature_design = { n = 200, budget = 3 }\n",
        &["unknown field `budget`", "demo.feature_design"],
    );
}

#[test]
fn each_flag_name_means_one_thing_in_every_command() {
    let help = |cmd: &str| {
        let out = run(&[cmd, "--help"]);
        assert!(out.status.success(), "ravel {cmd} --help");
        String::from_utf8(out.stdout).unwrap()
    };
    // `--brokers` is a bootstrap list; the embedded broker count has its own name.
    let broker = help("broker");
    assert!(broker.contains("--broker-count") && !broker.contains("--brokers"));
    assert!(help("produce").contains("--brokers <BROKERS>"));
    assert!(help("serve").contains("--brokers <BROKERS>"));
    // Files have a file format, messages a wire format; both list their values.
    for cmd in ["fit", "select", "produce"] {
        let h = help(cmd);
        assert!(
            h.contains("--file-format <FORMAT>") && h.contains("possible values: csv, libsvm, npy"),
            "ravel {cmd} --help: {h}"
        );
        assert!(!h.contains("--format"), "ravel {cmd} --help: {h}");
    }
    let produce = help("produce");
    for v in [
        "--wire-format <FORMAT>",
        "json-named",
        "binary",
        "--batch-rows",
    ] {
        assert!(produce.contains(v), "{v}: {produce}");
    }
    assert!(help("serve").contains("possible values: text, json"));
    // The old spellings are refused.
    for args in [
        &["broker", "--brokers", "2"][..],
        &[
            "produce",
            "--brokers",
            "b:1",
            "--topic",
            "t",
            "--format",
            "json",
        ],
        &["select", "x.csv", "--s", "2", "--format", "csv"],
    ] {
        let out = run(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            !out.status.success() && err.contains("unexpected argument"),
            "ravel {args:?}: {err}"
        );
    }
}
