//! Models over windows of time (issue 47), through the binaries: rows go through `ravel
//! broker` with explicit Kafka timestamps (CreateTime) spread over the last three hours into a
//! `ravel serve` stream with `windows = { bucket = "1m", keep = "7d" }`, which is SIGKILLed
//! mid-stream (rows folded in memory that no checkpoint has) and restarted; then the model of
//! several windows [T1, T2) (`POST .../model`, `POST .../path`, `GET .../path`) equals `ravel
//! fit` on exactly the rows stamped in them (1e-9). The rows change regime half-way (bar 05's
//! abrupt change): each half's window gives its own coefficients, where the all-time model
//! averages them. Selection by a criterion over a window equals `ravel fit --select` on its
//! rows; cross-validation with a window is refused by name (the folds are the whole stream's);
//! the history takes a window too (the points taken in it). Bad windows are refused with
//! `invalid_window` naming the problem, and rows older than `keep` are counted, not folded
//! into a bucket. The same windows with the Kafka
//! state store, over two replicas and a SIGKILL, in the second test.

use crate::common::*;
use serde_json::{Value, json};
use std::path::Path;
use std::time::{Duration, Instant};

const P: usize = 4;
const ROWS_PER_MESSAGE: usize = 5;
const MESSAGES: usize = 360;
const MINUTE: i64 = 60_000;

/// Rows of two regimes (coefficients before and after message MESSAGES / 2), noisy.
fn rows() -> (Vec<f64>, Vec<f64>) {
    let n = MESSAGES * ROWS_PER_MESSAGE;
    let mut state = 42u64;
    let mut next = move || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 11) as f64 / (1u64 << 53) as f64 - 0.5
    };
    let (mut x, mut y) = (Vec::new(), Vec::new());
    for i in 0..n {
        let row: Vec<f64> = (0..P).map(|j| 100.0 * j as f64 + next() * 4.0).collect();
        let b = if i < n / 2 {
            [2.0, -1.0, 0.5, 0.0]
        } else {
            [-1.0, 0.0, 0.5, 3.0]
        };
        let yi = 1.0 + row.iter().zip(b).map(|(v, c)| v * c).sum::<f64>() + 0.1 * next();
        x.extend_from_slice(&row);
        y.push(yi);
    }
    (x, y)
}

/// A binary (RVB1) message of rows `a..b`.
fn message(x: &[f64], y: &[f64], a: usize, b: usize) -> Vec<u8> {
    let mut m = b"RVB1".to_vec();
    m.extend_from_slice(&((b - a) as u32).to_le_bytes());
    m.extend_from_slice(&(P as u32).to_le_bytes());
    for v in x[a * P..b * P].iter().chain(&y[a..b]) {
        m.extend_from_slice(&v.to_le_bytes());
    }
    m
}

/// Sends messages `from..to`, message m stamped `stamps[m]`, and waits for the broker.
fn produce(brokers: &str, data: &(Vec<f64>, Vec<f64>), stamps: &[i64], from: usize, to: usize) {
    let records = stamps
        .iter()
        .enumerate()
        .take(to)
        .skip(from)
        .map(|(m, &stamp)| {
            let (a, b) = (m * ROWS_PER_MESSAGE, (m + 1) * ROWS_PER_MESSAGE);
            Record {
                partition: Some(m as i32 % 2),
                ..Record::of(message(&data.0, &data.1, a, b)).at(stamp)
            }
        });
    send_records(brokers, "win", records, &[("enable.idempotence", "true")]);
}

/// The rows of messages stamped in [from, to), as a CSV for `ravel fit`; their count.
fn window_file(
    dir: &Path,
    data: &(Vec<f64>, Vec<f64>),
    stamps: &[i64],
    from: i64,
    to: i64,
    kept: &[bool],
) -> (std::path::PathBuf, u64) {
    let (mut x, mut y) = (Vec::new(), Vec::new());
    for (m, &t) in stamps.iter().enumerate() {
        if kept[m] && (from..to).contains(&t) {
            let r = m * ROWS_PER_MESSAGE..(m + 1) * ROWS_PER_MESSAGE;
            x.extend_from_slice(&data.0[r.start * P..r.end * P]);
            y.extend_from_slice(&data.1[r]);
        }
    }
    let file = dir.join(format!("window_{from}_{to}.csv"));
    // Named as a stream declared by count names its features.
    let names: Vec<String> = (0..P).map(|j| j.to_string()).collect();
    write_csv(&file, &names, &x, &y);
    (file, y.len() as u64)
}

/// The OLS and Lasso (k = 2) models of window [from, to) (on minute boundaries) from the
/// service at `base` equal `ravel fit` on exactly the rows stamped in it (1e-9), and the
/// answer says the window and its rows. Returns the rows' file and count.
fn assert_window_models(
    base: &str,
    dir: &Path,
    data: &(Vec<f64>, Vec<f64>),
    stamps: &[i64],
    kept: &[bool],
    from: i64,
    to: i64,
) -> (std::path::PathBuf, u64) {
    let (file, rows) = window_file(dir, data, stamps, from, to, kept);
    let what = format!("{base} [{from}, {to})");
    for (body, flags) in [
        (json!({"method": "ols"}), vec!["--method", "ols"]),
        (
            json!({"method": "lasso", "k": 2}),
            vec!["--method", "lasso", "--k", "2"],
        ),
        // Selection by a criterion over the window's statistics (`select` alone: OLSth's
        // k-path to a k the window's n sets; lasso's lambda path, chosen by BIC).
        (json!({"select": "ebic"}), vec!["--select", "ebic"]),
        (
            json!({"method": "lasso", "select": "bic", "path_points": 20}),
            vec![
                "--method",
                "lasso",
                "--select",
                "bic",
                "--path-points",
                "20",
            ],
        ),
    ] {
        let mut b = body.clone();
        b["window"] = json!({"from": from, "to": to});
        let (code, api) = post(base, "/v1/streams/w/model", &b);
        assert_eq!(code, 200, "{what}: {api}");
        assert_eq!(api["window"]["from"], from, "{what}: snapped");
        assert_eq!(api["window"]["to"], to, "{what}: snapped");
        assert_eq!(api["window"]["n"], rows, "{what}");
        let mut args = vec!["fit", file.to_str().unwrap()];
        args.extend(&flags);
        let fit: Value = serde_json::from_str(&ravel(&args)).unwrap();
        assert_same_model(&api, &fit, 1e-9, &format!("{what} {body}"));
        assert_eq!(
            api["selection"].is_null(),
            body.get("select").is_none(),
            "{what} {body}: {api}"
        );
        assert_same_selection(&api, &fit, &format!("{what} {body}"));
    }
    (file, rows)
}

/// The same selection (criterion, chosen point, the curve within 1e-9), or none in both.
fn assert_same_selection(api: &Value, fit: &Value, what: &str) {
    let (a, f) = (&api["selection"], &fit["selection"]);
    assert_eq!(a.is_null(), f.is_null(), "{what}: selection {a} vs {f}");
    if a.is_null() {
        return;
    }
    for key in ["criterion", "chosen", "df_rule", "notes"] {
        assert_eq!(a[key], f[key], "{what}: selection {key}");
    }
    let (ca, cf) = (
        a["curve"].as_array().unwrap(),
        f["curve"].as_array().unwrap(),
    );
    assert_eq!(ca.len(), cf.len(), "{what}: curve length");
    for (pa, pf) in ca.iter().zip(cf) {
        assert_eq!(pa["k"], pf["k"], "{what}: curve k");
        let (va, vf) = (pa["value"].as_f64().unwrap(), pf["value"].as_f64().unwrap());
        assert!(close(va, vf, 1e-9), "{what}: criterion {va} vs {vf}");
    }
}

/// Three hours of message timestamps, one every 30 s, the last about a minute before `now`;
/// every 40th is stamped 8 days back (older than keep: counted, in no window). Returns the
/// stamps, which messages a window can hold, and the first minute.
fn three_hours(now: i64) -> (Vec<i64>, Vec<bool>, i64) {
    let start = (now - 3 * 60 * MINUTE) / MINUTE * MINUTE;
    let stamps: Vec<i64> = (0..MESSAGES)
        .map(|m| {
            if m % 40 == 39 {
                now - 8 * 24 * 60 * MINUTE
            } else {
                start + m as i64 * 30_000 + 1234
            }
        })
        .collect();
    let kept: Vec<bool> = (0..MESSAGES).map(|m| m % 40 != 39).collect();
    (stamps, kept, start)
}

/// `windows = { bucket = "1m", keep = "7d" }`.
fn minute_buckets() -> toml::Table {
    toml::from_str("bucket = \"1m\"\nkeep = \"7d\"").unwrap()
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

#[test]
fn window_models_equal_ravel_fit_on_their_rows_across_a_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let data = rows();
    let now = now_ms();
    let (stamps, kept, start) = three_hours(now);
    let old = kept.iter().filter(|k| !**k).count() * ROWS_PER_MESSAGE;
    let n = (MESSAGES * ROWS_PER_MESSAGE) as u64;

    let (mut broker, brokers) = Proc::start(
        "ravel broker",
        &["broker", "--topic", "win:2", "--topic", "other:1"],
        &[],
        &dir.path().join("broker.log"),
    );
    let state = dir.path().join("state");
    ConfigFile::new("windows-group")
        .quick_rejoin()
        .state_in(dir.path(), 300)
        .set("history.interval_ms", 100)
        .stream("w", "win", P as i64)
        .stream_key("windows", minute_buckets())
        .stream_key("cv", toml::from_str::<toml::Table>("folds = 3").unwrap())
        .stream("plain", "other", P as i64)
        .write(dir.path());
    let saved = || {
        ravel::checkpoint::load(&state, "w")
            .ok()
            .flatten()
            .and_then(|cp| cp.windows.map(|w| (cp.stats.n(), w.n())))
            .unwrap_or((0, 0))
    };

    // Run 1: a first part is checkpointed with its buckets, then more arrives and the service
    // is killed while it holds rows no checkpoint has.
    let (s, base) = serve(dir.path(), &brokers, 1);
    produce(&brokers, &data, &stamps, 0, MESSAGES / 3);
    let t = Instant::now();
    while saved().0 < (MESSAGES / 3 * ROWS_PER_MESSAGE) as u64 {
        assert!(t.elapsed() < DEADLINE, "no checkpoint of the first rows");
        std::thread::sleep(Duration::from_millis(50));
    }
    let (rows1, bucketed1) = saved();
    assert!(
        bucketed1 > 0 && bucketed1 < rows1,
        "old rows are in no bucket: {rows1} {bucketed1}"
    );
    produce(&brokers, &data, &stamps, MESSAGES / 3, 2 * MESSAGES / 3);
    let t = Instant::now();
    loop {
        let (live, ckpt) = (stream_n(&base, "w").unwrap_or(0), saved().0);
        if live > ckpt {
            break;
        }
        assert!(t.elapsed() < DEADLINE, "live {live}, saved {ckpt}");
        std::thread::sleep(Duration::from_millis(5));
    }
    s.signal("-KILL");
    drop(s);
    assert!(saved().0 < n);

    // The rest arrives while the service is down; run 2 resumes from the checkpoint.
    produce(&brokers, &data, &stamps, 2 * MESSAGES / 3, MESSAGES);
    let (mut s, base) = serve(dir.path(), &brokers, 2);
    let log = dir.path().join("serve2.log");
    wait_for("every row", &log, || {
        (stream_n(&base, "w") == Some(n)).then_some(())
    });
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(stream_n(&base, "w"), Some(n), "no row counted twice");

    // Windows on minute boundaries: the first regime, the second, one across the change, a
    // short one, and everything kept.
    let change = stamps[MESSAGES / 2] / MINUTE * MINUTE;
    let end = (now / MINUTE + 1) * MINUTE;
    let windows = [
        (start, change),
        (change, end),
        (change - 20 * MINUTE, change + 25 * MINUTE),
        (start + 61 * MINUTE, start + 75 * MINUTE),
        (start - 60 * MINUTE, end),
    ];
    for (from, to) in windows {
        let (file, rows) = assert_window_models(&base, dir.path(), &data, &stamps, &kept, from, to);
        let what = format!("[{from}, {to})");
        // The statistics route takes the same window: the window's rows alone (issue 61).
        let stats: Value = client()
            .get(format!(
                "{base}/v1/streams/w/statistics?window.from={from}&window.to={to}"
            ))
            .send()
            .unwrap()
            .json()
            .unwrap();
        assert_eq!(stats["n"], rows, "{what}: {stats}");
        assert_eq!(stats["window"]["n"], rows, "{what}");
        assert_eq!(stats["statistics"]["n"], rows, "{what}");
        // The path, by POST and by GET, is the same path.
        let (code, path) = post(
            &base,
            "/v1/streams/w/path",
            &json!({"method": "lasso", "path_points": 5, "window": {"from": from, "to": to}}),
        );
        assert_eq!(code, 200, "{what}: {path}");
        let get = client()
            .get(format!(
                "{base}/v1/streams/w/path?method=lasso&path_points=5&window.from={from}&window.to={to}"
            ))
            .send()
            .unwrap();
        assert_eq!(get.status().as_u16(), 200);
        let get: Value = get.json().unwrap();
        assert_eq!(get["window"]["n"], rows);
        let fit: Value = serde_json::from_str(&ravel(&[
            "fit",
            file.to_str().unwrap(),
            "--method",
            "lasso",
            "--path",
            "--path-points",
            "5",
        ]))
        .unwrap();
        let points = path["points"].as_array().unwrap();
        assert_eq!(
            points.len(),
            fit["points"].as_array().unwrap().len(),
            "{what}"
        );
        for (i, point) in points.iter().enumerate() {
            let at = format!("{what} path point {i}");
            assert_same_model(point, &get["points"][i], 1e-12, &at);
            assert_same_model(point, &fit["points"][i], 1e-9, &at);
        }
    }

    // The drift: each regime's window gives its own coefficients; the all-time model mixes.
    let coef = |m: &Value, j: usize| {
        m["coefficients"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["index"] == j)
            .map_or(0.0, |c| c["value"].as_f64().unwrap())
    };
    let (_, before) = post(
        &base,
        "/v1/streams/w/model",
        &json!({"method": "ols", "window": {"from": start, "to": change}}),
    );
    let (_, after) = post(
        &base,
        "/v1/streams/w/model",
        &json!({"method": "ols", "window": {"from": change, "to": end}}),
    );
    let (_, all) = post(&base, "/v1/streams/w/model", &json!({"method": "ols"}));
    for (j, (b, a)) in [(2.0, -1.0), (-1.0, 0.0), (0.5, 0.5), (0.0, 3.0)]
        .into_iter()
        .enumerate()
    {
        assert!(
            (coef(&before, j) - b).abs() < 0.01,
            "before, {j}: {}",
            coef(&before, j)
        );
        assert!(
            (coef(&after, j) - a).abs() < 0.01,
            "after, {j}: {}",
            coef(&after, j)
        );
    }
    assert!((coef(&all, 3) - 0.0).abs() > 0.2 && (coef(&all, 3) - 3.0).abs() > 0.2);
    // The stream without windows answers as before, and says it keeps no windows.
    let (code, e) = post(
        &base,
        "/v1/streams/plain/model",
        &json!({"method": "ols", "window": {"last": "1h"}}),
    );
    assert_eq!(
        (code, e["error"]["code"].as_str()),
        (400, Some("invalid_window")),
        "{e}"
    );
    assert!(
        e["error"]["message"]
            .as_str()
            .unwrap()
            .contains("windows = {"),
        "{e}"
    );

    // And its statistics take no window either; unknown query parameters are named.
    for (stream, query, code, says) in [
        ("plain", "?window.last=1h", "invalid_window", "windows = {"),
        (
            "w",
            "?since=5",
            "invalid_query",
            "unknown query parameter \"since\"",
        ),
        ("w", "?window.from=5", "invalid_window", "both from and to"),
    ] {
        let r = client()
            .get(format!("{base}/v1/streams/{stream}/statistics{query}"))
            .send()
            .unwrap();
        let status = r.status().as_u16();
        let e: Value = r.json().unwrap();
        assert_eq!(
            (status, e["error"]["code"].as_str()),
            (400, Some(code)),
            "{stream} {query}: {e}"
        );
        assert!(
            e["error"]["message"].as_str().unwrap().contains(says),
            "{stream} {query}: {e}"
        );
    }

    // `last`: the buckets up to the end of the current one.
    let (code, last) = post(
        &base,
        "/v1/streams/w/model",
        &json!({"method": "ols", "window": {"last": "1h"}}),
    );
    assert_eq!(code, 200, "{last}");
    let to = last["window"]["to"].as_i64().unwrap();
    assert_eq!(last["window"]["from"].as_i64().unwrap(), to - 60 * MINUTE);
    let (_, rows) = window_file(dir.path(), &data, &stamps, to - 60 * MINUTE, to, &kept);
    assert_eq!(last["window"]["n"], rows);

    // Bad windows: 400 invalid_window, naming the problem.
    for (window, says) in [
        (json!({"from": end, "to": start}), "must be after"),
        (
            json!({"from": now - 9 * 24 * 60 * MINUTE, "to": end}),
            "oldest kept bucket",
        ),
        (json!({"from": "yesterday", "to": end}), "RFC 3339"),
        (json!({"last": "an hour"}), "last"),
        (json!({"from": start}), "both from and to"),
        (
            json!({"from": start + 1000, "to": start + 2000}),
            "no whole bucket",
        ),
    ] {
        let (code, e) = post(
            &base,
            "/v1/streams/w/model",
            &json!({"method": "ols", "window": window}),
        );
        assert_eq!(
            (code, e["error"]["code"].as_str()),
            (400, Some("invalid_window")),
            "{window}: {e}"
        );
        assert!(
            e["error"]["message"].as_str().unwrap().contains(says),
            "{window}: {e}"
        );
        let (code, e) = post(
            &base,
            "/v1/streams/w/path",
            &json!({"method": "lasso", "window": window}),
        );
        assert_eq!(
            (code, e["error"]["code"].as_str()),
            (400, Some("invalid_window")),
            "path {window}: {e}"
        );
    }

    // Cross-validation with a window is refused by name (the folds are the whole stream's),
    // on every route that extracts; without a window it answers.
    let cv = json!({"method": "lasso", "select": "cv", "path_points": 5});
    let mut cv_window = cv.clone();
    cv_window["window"] = json!({"from": start, "to": change});
    for (route, body) in [
        ("model", cv_window.clone()),
        ("path", cv_window.clone()),
        (
            "predict",
            json!({"model": cv_window, "rows": [vec![0.0; P]]}),
        ),
    ] {
        let (code, e) = post(&base, &format!("/v1/streams/w/{route}"), &body);
        assert_eq!(
            (code, e["error"]["code"].as_str()),
            (400, Some("invalid_window")),
            "{route}: {e}"
        );
        let msg = e["error"]["message"].as_str().unwrap();
        assert!(
            msg.contains("select = \"cv\" cannot take a window") && msg.contains("cv.folds"),
            "{route}: {e}"
        );
    }
    let (code, whole) = post(&base, "/v1/streams/w/model", &cv);
    assert_eq!(code, 200, "{whole}");
    assert_eq!(whole["selection"]["criterion"], "cv");

    // The history with a window: the points taken in it, the same points as without.
    let history = |query: &str| -> (u16, Value) {
        let r = client()
            .get(format!("{base}/v1/streams/w/history{query}"))
            .send()
            .unwrap();
        (r.status().as_u16(), r.json().unwrap())
    };
    let (code, all) = history("");
    assert_eq!(code, 200, "{all}");
    let points = all["points"].as_array().unwrap().clone();
    assert!(!points.is_empty(), "history points at 100 ms: {all}");
    let time = |i: usize| points[i]["time_ms"].as_i64().unwrap();
    let last = time(points.len() - 1);
    for i in 0..points.len() {
        let (code, h) = history(&format!("?window.from={}&window.to={}", time(i), last + 1));
        assert_eq!(code, 200, "{h}");
        assert_eq!(
            h["points"].as_array().unwrap()[..],
            points[i..],
            "from point {i}"
        );
        if i > 0 {
            let (_, h) = history(&format!("?window.from={}&window.to={}", time(0), time(i)));
            assert_eq!(
                h["points"].as_array().unwrap()[..],
                points[..i],
                "to point {i}"
            );
        }
    }
    let (_, h) = history("?window.last=1h");
    assert_eq!(
        h["points"], all["points"],
        "every point is from the last hour"
    );
    let (_, h) = history(&format!("?window.from={}&window.to={}", last + 1, last + 2));
    assert_eq!(h["points"], json!([]), "no point after the last");
    for (query, code, says) in [
        (
            "?window.from=5&window.to=3",
            "invalid_window",
            "must be after",
        ),
        ("?window.last=soon", "invalid_window", "last"),
        ("?window.from=5", "invalid_window", "both from and to"),
        (
            "?since=5",
            "invalid_query",
            "unknown query parameter \"since\"",
        ),
    ] {
        let (status, e) = history(query);
        assert_eq!(
            (status, e["error"]["code"].as_str()),
            (400, Some(code)),
            "{query}: {e}"
        );
        assert!(
            e["error"]["message"].as_str().unwrap().contains(says),
            "{query}: {e}"
        );
    }

    // Rows older than keep are counted by reason (run 2 saw the last third's).
    let metrics = metrics_of(&base);
    let refused = sample(
        &metrics,
        "ravel_window_rows_refused_total{reason=\"too_old\",stream=\"w\"}",
    )
    .unwrap_or(0.0);
    assert!(refused > 0.0 && refused <= old as f64, "{refused} of {old}");

    s.signal("-TERM");
    assert!(s.wait());
    let cp = ravel::checkpoint::load(&state, "w").unwrap().unwrap();
    assert_eq!(
        cp.windows.unwrap().n(),
        n - old as u64,
        "every kept row in a bucket"
    );
    broker.signal("-TERM");
    broker.wait();
}

/// Issue 47 with the Kafka store: each partition keeps its own buckets, as bucket records
/// its state records name, and each of two replicas answers a window over the whole stream from the buckets it folds
/// and those the other published. One replica is SIGKILLed holding rows no state record has;
/// the other takes its partition over, restores the partition's buckets from the state topic
/// and reads the rest again; a third joins. Every replica's window models equal `ravel fit`
/// on exactly the rows stamped in the window (1e-9), and no row is in a window twice. Then
/// a checkpoint writes only the bucket a new message changes.
#[test]
fn windows_with_the_kafka_store_span_every_partition_on_every_replica_across_a_sigkill() {
    let dir = tempfile::tempdir().unwrap();
    let data = rows();
    let now = now_ms();
    let (stamps, kept, start) = three_hours(now);
    let n = (MESSAGES * ROWS_PER_MESSAGE) as u64;
    let group = "windows-kafka";
    let (mut broker, brokers) = Proc::start(
        "ravel broker",
        &[
            "broker",
            "--topic",
            "win:2",
            "--topic",
            "win.dlq:1",
            "--topic",
            &format!("{group}.state:2"),
        ],
        &[],
        &dir.path().join("broker.log"),
    );
    ConfigFile::new(group)
        .quick_rejoin()
        .set("state.store", "kafka")
        .set("state.checkpoint_interval_ms", 300)
        .stream("w", "win", P as i64)
        .stream_key("windows", minute_buckets())
        .write(dir.path());
    let live = |base: &str| -> usize {
        client()
            .get(format!("{base}/v1/streams/w"))
            .send()
            .ok()
            .and_then(|r| r.json::<Value>().ok())
            .and_then(|d| {
                d["partition_states"]
                    .as_array()
                    .map(|a| a.iter().filter(|p| p["source"] == "live").count())
            })
            .unwrap_or(0)
    };
    let (a, base_a) = serve(dir.path(), &brokers, 1);
    let (mut b, base_b) = serve(dir.path(), &brokers, 2);
    wait_for(
        "each replica folds a partition",
        &dir.path().join("serve2.log"),
        || (live(&base_a) == 1 && live(&base_b) == 1).then_some(()),
    );
    let produced = |m: usize| (m * ROWS_PER_MESSAGE) as u64;
    produce(&brokers, &data, &stamps, 0, 2 * MESSAGES / 3);
    for base in [&base_a, &base_b] {
        wait_for(
            "the first rows on both replicas",
            &dir.path().join("serve1.log"),
            || (stream_n(base, "w") == Some(produced(2 * MESSAGES / 3))).then_some(()),
        );
    }
    // Replica 1 is killed (its last state record up to a checkpoint interval behind); the rest
    // arrives while the group hands its partition over.
    a.signal("-KILL");
    drop(a);
    produce(&brokers, &data, &stamps, 2 * MESSAGES / 3, MESSAGES);
    let (mut c, base_c) = serve(dir.path(), &brokers, 3);
    for (base, run) in [(&base_b, 2), (&base_c, 3)] {
        wait_for(
            "every row on the replica",
            &dir.path().join(format!("serve{run}.log")),
            || (stream_n(base, "w") == Some(n)).then_some(()),
        );
    }
    wait_for(
        "each partition folded once",
        &dir.path().join("serve3.log"),
        || (live(&base_b) + live(&base_c) == 2).then_some(()),
    );
    std::thread::sleep(Duration::from_millis(500));
    let change = stamps[MESSAGES / 2] / MINUTE * MINUTE;
    let end = (now / MINUTE + 1) * MINUTE;
    for base in [&base_b, &base_c] {
        assert_eq!(stream_n(base, "w"), Some(n), "{base}: no row counted twice");
        for (from, to) in [
            (start, change),
            (change - 20 * MINUTE, change + 25 * MINUTE),
            (start - 60 * MINUTE, end),
        ] {
            assert_window_models(base, dir.path(), &data, &stamps, &kept, from, to);
        }
    }
    let log = dir.path().join("serve3.log");
    a_checkpoint_writes_only_the_changed_buckets(&brokers, group, &data, [&base_b, &base_c], &log);
    for p in [&mut b, &mut c] {
        p.signal("-TERM");
        assert!(p.wait());
    }
    broker.signal("-TERM");
    broker.wait();
}

/// With every row in, one more message (partition 0, stamped now) makes the next checkpoint
/// write one bucket record (its minute's) and the partition's state record: a small part of
/// the partition's buckets, which a checkpoint wrote whole before the buckets had records of
/// their own.
fn a_checkpoint_writes_only_the_changed_buckets(
    brokers: &str,
    group: &str,
    data: &(Vec<f64>, Vec<f64>),
    bases: [&str; 2],
    log: &Path,
) {
    let topic = format!("{group}.state");
    let before = end_offsets(brokers, &topic, 2);
    let records = read_range(brokers, &topic, &[0, 0], &before);
    // The latest record of each bucket slot of partition 0: what the partition's buckets
    // take in the topic.
    let mut latest = std::collections::BTreeMap::new();
    for (key, kind, value) in &records {
        if kind == "bucket" && key.starts_with("w/0#b") {
            latest.insert(key.clone(), value.as_ref().map_or(0, Vec::len));
        }
    }
    let bucket_bytes: usize = latest.values().sum();
    assert!(
        latest.len() > 100,
        "{} bucket records of partition 0",
        latest.len()
    );
    let n = stream_n(bases[0], "w").unwrap();
    produce(brokers, data, &[now_ms()], 0, 1);
    for base in bases {
        wait_within(
            "the new message on both replicas",
            log,
            Duration::from_secs(30),
            || (stream_n(base, "w") == Some(n + ROWS_PER_MESSAGE as u64)).then_some(()),
        );
    }
    wait_within(
        "the partition's next state record",
        log,
        Duration::from_secs(30),
        || {
            let end = end_offsets(brokers, &topic, 2);
            let new = read_range(brokers, &topic, &before, &end);
            new.iter()
                .any(|(k, kind, _)| kind == "state" && k == "w/0")
                .then_some(())
        },
    );
    // Checkpoints go on every 300 ms, and write nothing while no part changes.
    std::thread::sleep(Duration::from_millis(1000));
    let end = end_offsets(brokers, &topic, 2);
    let new = read_range(brokers, &topic, &before, &end);
    let states: Vec<&String> = new
        .iter()
        .filter(|(_, kind, _)| kind == "state")
        .map(|(k, _, _)| k)
        .collect();
    assert_eq!(states, ["w/0"], "{new:?}");
    // A tombstone for the bucket's other slot when the minute already had a bucket.
    let tombstones = new.iter().filter(|(_, _, v)| v.is_none()).count();
    assert!(tombstones <= 1, "{new:?}");
    let written: Vec<&String> = new
        .iter()
        .filter(|(_, kind, v)| kind == "bucket" && v.is_some())
        .map(|(k, _, _)| k)
        .collect();
    let bytes: usize = new
        .iter()
        .map(|(_, _, v)| v.as_ref().map_or(0, Vec::len))
        .sum();
    assert_eq!(written.len(), 1, "one bucket record: {new:?}");
    assert!(
        bytes * 5 < bucket_bytes,
        "the checkpoint wrote {bytes} bytes, partition 0's {} buckets take {bucket_bytes}",
        latest.len()
    );
}
