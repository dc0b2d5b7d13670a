//! Issue 35, item 4: configuration errors in the user's words (the key as written in the
//! file, what it takes, a "did you mean"), never a Rust type name; values the service would
//! only trip over later (an empty feature name, a lag interval librdkafka refuses) refused at
//! load, by their key; `RAVEL_LOG=` in the environment harmless; `ravel --http-addr X` the same
//! as `ravel serve --http-addr X`. Through the config loader and the real binary.

use ravel::config::{Config, ServeArgs, from_file};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

const STREAM: &str = "[[streams]]\nname = \"a\"\nfeatures = 2\n";

fn write(dir: &Path, text: &str) -> PathBuf {
    let path = dir.join("ravel.toml");
    std::fs::write(&path, text).unwrap();
    path
}

/// The error loading `text` gives, whole (every context).
/// The error of a config file, with its temporary directory written `<dir>` (a random name
/// such as `.tmpeFpi64` would otherwise look like a Rust type to the checks below).
fn error_of(text: &str) -> String {
    let dir = tempfile::tempdir().unwrap();
    match from_file(&write(dir.path(), text)) {
        Ok(_) => panic!("config accepted:\n{text}"),
        Err(e) => format!("{e:#}").replace(dir.path().to_str().unwrap(), "<dir>"),
    }
}

fn assert_says(text: &str, parts: &[&str]) {
    let e = error_of(text);
    for part in parts {
        assert!(
            e.contains(part),
            "config:\n{text}\nerror: {e}\nmissing: {part}"
        );
    }
}

#[test]
fn an_empty_feature_name_is_refused_naming_the_entry() {
    assert_says(
        "[[streams]]\nname = \"a\"\nfeatures = [\"x\", \"\", \"z\"]\n",
        &[
            "stream 'a': features: entry 2 of the list has an empty name",
            "every feature needs the name of its field",
        ],
    );
    assert_says(
        "[[streams]]\nname = \"a\"\nfeatures = [\"x\", { name = \" \", kind = \"numeric\" }]\n",
        &["entry 2 of the list has an empty name"],
    );
}

#[test]
fn a_misspelled_value_names_the_key_the_values_and_the_likely_one() {
    assert_says(
        &format!("{STREAM}task = \"regresion\"\n"),
        &[
            "task of the 1st [[streams]] = \"regresion\" is not one of regression, classification; did you mean \"regression\"?",
        ],
    );
    assert_says(
        &format!("[state]\nstore = \"kafak\"\n{STREAM}"),
        &["state.store = \"kafak\" is not one of dir, kafka, none; did you mean \"kafka\"?"],
    );
    // Nothing close: the values, no guess.
    let e = error_of(&format!("[log]\nformat = \"yaml\"\n{STREAM}"));
    assert!(
        e.contains("log.format = \"yaml\" is not one of text, json") && !e.contains("did you mean"),
        "{e}"
    );
    assert_says(
        &format!("{STREAM}cv = {{ folds = 5, fold_bi = \"key\" }}\n"),
        &["unknown field `fold_bi`", "did you mean \"fold_by\"?"],
    );
}

#[test]
fn streams_written_as_one_table_are_told_to_use_double_brackets() {
    for text in [
        "[streams]\nname = \"a\"\nfeatures = 2\n",
        "streams = { name = \"a\", features = 2 }\n",
    ] {
        assert_says(
            text,
            &["streams is written as one table", "write [[streams]]"],
        );
    }
    assert_says(
        "[feature_streams]\nname = \"f\"\nn = 10\ns = 2\n",
        &["write [[feature_streams]]"],
    );
}

#[test]
fn numbers_out_of_bounds_name_the_key_and_the_bound() {
    // Beyond what TOML holds.
    assert_says(
        "[[streams]]\nname = \"a\"\nfeatures = 99999999999999999999\n",
        &["features in ", "9223372036854775807"],
    );
    // Beyond what the key's type holds.
    assert_says(
        &format!("[kafka]\ntopic_replication = 100000\n{STREAM}"),
        &[
            "kafka.topic_replication = 100000: out of bounds; kafka.topic_replication takes a whole number from -32768 to 32767",
        ],
    );
    assert_says(
        &format!("[ingest]\nmax_batch_rows = -1\n{STREAM}"),
        &[
            "ingest.max_batch_rows = -1: out of bounds; ingest.max_batch_rows takes a whole number from 0 to",
        ],
    );
    // Beyond what librdkafka takes: refused by its key before librdkafka sees it.
    assert_says(
        &format!("[ingest]\nlag_interval_ms = 100000000000\n{STREAM}"),
        &["ingest.lag_interval_ms = 100000000000: it must lie in 100..=86400000"],
    );
}

/// Issue 59: a file with several mistakes reports them all in one run, each by its key, and
/// no more than `MAX_ERRORS`.
#[test]
fn every_mistake_of_a_file_is_reported_in_one_run() {
    let e = error_of(
        "[http]\nadr = \"127.0.0.1:1\"\n[kafka]\ntopic_replication = 100000\n\
         [[streams]]\nname = \"a\"\nfeatures = 2\ntask = \"regresion\"\n",
    );
    for part in [
        "3 mistakes",
        "adr",
        "topic_replication",
        "regresion",
        "did you mean \"regression\"",
    ] {
        assert!(e.contains(part), "missing {part:?} from: {e}");
    }
    // Many mistakes: the first MAX_ERRORS, and the advice to run again.
    let mut text = String::from("[http]\n");
    for i in 0..15 {
        text.push_str(&format!("bad{i} = 1\n"));
    }
    text.push_str(STREAM);
    let e = error_of(&text);
    let max = ravel::config::explain::MAX_ERRORS;
    assert!(e.contains(&format!("the first {max} mistakes")), "{e}");
    let named = (0..15)
        .filter(|i| {
            let key = format!("bad{i}");
            e.match_indices(&key)
                .any(|(at, _)| !e[at + key.len()..].starts_with(|c: char| c.is_ascii_digit()))
        })
        .count();
    assert_eq!(named, max, "{e}");
}

#[test]
fn no_error_names_a_rust_type() {
    let bad = [
        "[[streams]]\nname = \"a\"\nfeatures = [\"x\", \"\", \"z\"]\n".to_string(),
        format!("{STREAM}task = \"regresion\"\n"),
        format!("{STREAM}task = 3\n"),
        format!("{STREAM}missing = \"drop\"\n"),
        format!("{STREAM}features = {{ a = 1 }}\n"),
        format!("{STREAM}cv = 3\n"),
        "[streams]\nname = \"a\"\nfeatures = 2\n".into(),
        "streams = 5\n".into(),
        "[[streams]]\nfeatures = 2\n".into(),
        "[[streams]]\nname = \"a\"\n".into(),
        format!("http = 5\n{STREAM}"),
        format!("log = \"debug\"\n{STREAM}"),
        format!("[log]\nformat = \"yaml\"\n{STREAM}"),
        format!("[dlq]\non_failure = \"ignore\"\n{STREAM}"),
        format!("[dlq]\ncreate_topics = \"yes please\"\n{STREAM}"),
        format!("[state]\nstore = \"s3\"\n{STREAM}"),
        format!("[kafka]\ntopic_replication = 100000\n{STREAM}"),
        format!("[ingest]\nmax_batch_rows = -1\n{STREAM}"),
        format!("[ingest]\nlag_interval_ms = 100000000000\n{STREAM}"),
        "[[feature_streams]]\nname = \"f\"\nn = -5\ns = 2\n".into(),
        "[[feature_streams]]\nname = \"f\"\nn = 10\ns = 2\nloss = \"hinge\"\n".into(),
        "[[streams]]\nname = \"a\"\nfeatures = 99999999999999999999\n".into(),
        "[[streams]\nname = \"a\"\n".into(),
    ];
    let rust = [
        "struct ",
        "enum ",
        "variant constructor",
        "sequence",
        "untagged",
        "bit integer",
        "u64",
        "i64",
        "usize",
        "f64",
        "Option<",
        "::",
        "invalid type: map",
    ];
    for text in &bad {
        let e = error_of(text);
        for word in rust {
            assert!(
                !e.contains(word),
                "config:\n{text}\nerror names Rust's '{word}': {e}"
            );
        }
    }
}

#[test]
fn an_empty_ravel_log_variable_does_not_stop_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), &format!("[kafka]\nbrokers = \"b:1\"\n{STREAM}"));
    let args = ServeArgs {
        config: Some(path),
        ..Default::default()
    };
    let env = |pairs: &[(&str, &str)]| -> Option<BTreeMap<String, String>> {
        Some(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    };
    let c = Config::load_with_env(&args, env(&[("RAVEL_LOG", "")])).unwrap();
    assert_eq!(c.log.level, "info");
    // Set to a level, as RUST_LOG is: the variable that does it is named.
    let e = format!(
        "{:#}",
        Config::load_with_env(&args, env(&[("RAVEL_LOG", "debug")])).unwrap_err()
    );
    assert!(
        e.contains("log is the text \"debug\", but log is a section")
            && e.contains("RAVEL_LOG cannot be set")
            && e.contains("RAVEL_LOG__LEVEL=debug"),
        "{e}"
    );
    let c = Config::load_with_env(&args, env(&[("RAVEL_LOG__LEVEL", "debug")])).unwrap();
    assert_eq!(c.log.level, "debug");
}

/// Runs `ravel ARGS` in `cwd` and returns its first two lines of stdout, then stops it.
fn first_two_lines(args: &[&str], cwd: &Path, env: &[(&str, &str)]) -> (String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ravel"));
    cmd.args(args)
        .current_dir(cwd)
        .stdout(Stdio::piped())
        .stderr(std::fs::File::create(cwd.join("serve.log")).unwrap());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut r = BufReader::new(stdout);
        let (mut a, mut b) = (String::new(), String::new());
        let _ = r.read_line(&mut a);
        let _ = r.read_line(&mut b);
        let _ = tx.send((a.trim().to_string(), b.trim().to_string()));
    });
    let lines = rx.recv_timeout(Duration::from_secs(60));
    let _ = child.kill();
    let _ = child.wait();
    lines.unwrap_or_else(|_| {
        panic!(
            "ravel {args:?} printed no two lines; log: {}",
            std::fs::read_to_string(cwd.join("serve.log")).unwrap_or_default()
        )
    })
}

#[test]
fn serve_flags_work_without_the_serve_command_and_the_banner_names_kafka() {
    // No config file in the working directory: the defaults, the demo on the embedded broker.
    let dir = tempfile::tempdir().unwrap();
    let (first, second) = first_two_lines(
        &["--http-addr", "127.0.0.1:0"],
        dir.path(),
        &[("RAVEL_LOG", "")],
    );
    let addr = first
        .strip_prefix("listening on http://127.0.0.1:")
        .unwrap_or_else(|| panic!("{first}"));
    // Port 0 was taken from the flag: not the default 8080.
    assert_ne!(addr, "8080", "{first}");
    assert!(
        second.starts_with("kafka at 127.0.0.1:") && second.contains("the embedded broker"),
        "{second}"
    );
    // A misspelled value stops the binary with the key and the likely value.
    std::fs::write(
        dir.path().join("bad.toml"),
        format!("{STREAM}task = \"regresion\"\n"),
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_ravel"))
        .args(["--config", "bad.toml"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("did you mean \"regression\"?"), "{err}");
}
