//! Shared by the service tests: a real service (`server::run`) on 127.0.0.1:0 in its own
//! runtime, a real embedded broker, HTTP over TCP, CSV files in temp dirs, polling with
//! generous deadlines (group joins can take 8 s on a slow machine).

#![allow(dead_code)]

use ravel::config::{Config, FeatureSchema, FeatureStreamConfig, StreamConfig};
use ravel::shutdown::{self, ShutdownTrigger};
use ravel_core::Task;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Headers, Message};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use serde_json::Value;
use std::collections::BTreeMap;
use std::io::Write;
use std::net::SocketAddr;
use std::path::Path;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub const DEADLINE: Duration = Duration::from_secs(60);

mod procs;
#[allow(unused_imports)]
pub use procs::{
    Proc, Tansu, free_port, interop_broker, metrics_of, produce_as, produce_file,
    produce_in_background, serve, serve_with, shell, shell_path, start_tansu_family, stream_n,
    tansu_binary, wait_listening, write_chunks,
};

/// The service under test; stopped (and joined) on drop.
pub struct TestService {
    pub addr: SocketAddr,
    trigger: Option<ShutdownTrigger>,
    thread: Option<JoinHandle<anyhow::Result<()>>>,
}

impl TestService {
    pub fn start(config: Config, brokers: &str) -> TestService {
        let (trigger, shutdown) = shutdown::channel();
        let (tx, rx) = std::sync::mpsc::channel();
        let brokers = brokers.to_string();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()?;
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
                tx.send(listener.local_addr()?)
                    .expect("test waits for the address");
                ravel::run(config, brokers, listener, shutdown).await
            })
        });
        let addr = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("service did not bind");
        TestService {
            addr,
            trigger: Some(trigger),
            thread: Some(thread),
        }
    }

    /// Waits for the service to end on its own (a fatal error) and returns its result.
    pub fn join(mut self) -> anyhow::Result<()> {
        let h = self.thread.take().unwrap();
        let start = Instant::now();
        while !h.is_finished() {
            assert!(
                start.elapsed() < DEADLINE,
                "the service did not stop by itself"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        h.join().expect("service thread panicked")
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Triggers shutdown and returns what `server::run` returned.
    pub fn stop(mut self) -> anyhow::Result<()> {
        self.trigger.take().unwrap().trigger();
        self.thread
            .take()
            .unwrap()
            .join()
            .expect("service thread panicked")
    }

    pub fn get(&self, path: &str) -> (u16, Value) {
        let r = client().get(self.url(path)).send().expect("GET");
        let status = r.status().as_u16();
        (status, r.json().unwrap_or(Value::Null))
    }

    pub fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        let r = client()
            .post(self.url(path))
            .json(body)
            .send()
            .expect("POST");
        let status = r.status().as_u16();
        (status, r.json().unwrap_or(Value::Null))
    }

    pub fn put(&self, path: &str, body: &Value) -> (u16, Value) {
        let r = client().put(self.url(path)).json(body).send().expect("PUT");
        let status = r.status().as_u16();
        (status, r.json().unwrap_or(Value::Null))
    }

    /// Waits until feature stream `name` has read `messages` messages of its (one-partition)
    /// topic; returns its summary.
    pub fn wait_feature_offset(&self, name: &str, messages: i64) -> Value {
        let start = Instant::now();
        loop {
            let (status, v) = self.get(&format!("/v1/feature-streams/{name}"));
            if status == 200 && v["offsets"]["0"].as_i64() == Some(messages) {
                return v;
            }
            if start.elapsed() > DEADLINE {
                panic!(
                    "feature stream {name}: wanted {messages} messages read, have {v} after {DEADLINE:?}"
                );
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    pub fn metrics(&self) -> String {
        client()
            .get(self.url("/metrics"))
            .send()
            .unwrap()
            .text()
            .unwrap()
    }

    /// Waits until stream `name` holds `n` rows; panics with the last state after the deadline.
    pub fn wait_rows(&self, name: &str, n: u64) -> Value {
        let start = Instant::now();
        loop {
            let (status, v) = self.get(&format!("/v1/streams/{name}"));
            if status == 200 && v["n"].as_u64() == Some(n) {
                return v;
            }
            if start.elapsed() > DEADLINE {
                panic!("stream {name}: wanted n = {n}, have {v} after {DEADLINE:?}");
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for TestService {
    fn drop(&mut self) {
        if let Some(t) = self.trigger.take() {
            t.trigger();
        }
        if let Some(h) = self.thread.take() {
            let _ = h.join();
        }
    }
}

pub fn client() -> reqwest::blocking::Client {
    reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap()
}

/// A config for tests: given streams, no demo, checkpoints in `state_dir` (or off).
pub fn config(streams: Vec<StreamConfig>, state_dir: Option<&Path>) -> Config {
    let mut c = Config {
        streams,
        ..Config::default()
    };
    c.demo.enabled = false;
    c.kafka.brokers = "set by the test".into();
    c.state.dir = state_dir
        .map(|d| d.display().to_string())
        .unwrap_or_default();
    c.state.checkpoint_interval_ms = 300;
    c.ingest.lag_interval_ms = 500;
    c.check().expect("test config is valid");
    c
}

/// A config for tests with feature streams only: no demo, no checkpoints, and a short
/// session timeout so that a restarted service rejoins the group at once.
pub fn feature_config(feature_streams: Vec<FeatureStreamConfig>) -> Config {
    let mut c = Config {
        feature_streams,
        ..Config::default()
    };
    c.demo.enabled = false;
    c.kafka.brokers = "set by the test".into();
    c.kafka
        .options
        .insert("session.timeout.ms".into(), "6000".into());
    c.state.dir = String::new();
    c.ingest.lag_interval_ms = 500;
    c.check().expect("test config is valid");
    c
}

pub fn stream(name: &str, topic: &str, features: FeatureSchema, task: Task) -> StreamConfig {
    StreamConfig {
        name: name.into(),
        topic: Some(topic.into()),
        features,
        target: None,
        missing: None,
        task,
        alpha: ravel_core::stats::AlphaSpec::Plain,
        history: None,
        cv: None,
        quality: None,
        format: Default::default(),
        avro_schema_file: None,
    }
}

pub fn names(p: usize) -> Vec<String> {
    (0..p).map(|j| format!("f{j}")).collect()
}

/// Writes rows as CSV (header f0..f{p-1},y) with round-trip float formatting.
pub fn write_csv(path: &Path, names: &[String], x: &[f64], y: &[f64]) {
    let p = names.len();
    let mut f = std::io::BufWriter::new(std::fs::File::create(path).unwrap());
    writeln!(f, "{},y", names.join(",")).unwrap();
    for (i, yi) in y.iter().enumerate() {
        let row: Vec<String> = x[i * p..(i + 1) * p]
            .iter()
            .map(|v| format!("{v:?}"))
            .collect();
        writeln!(f, "{},{yi:?}", row.join(",")).unwrap();
    }
}

/// Synthetic rows of paper 003's design.
pub fn synthetic(p: usize, k: usize, n: usize, seed: u64) -> (Vec<f64>, Vec<f64>) {
    let spec: ravel_core::synthetic::SyntheticSpec =
        format!("p={p},k={k},n={n},seed={seed}").parse().unwrap();
    let (mut x, mut y) = (vec![], vec![]);
    spec.rows().fill(n, &mut x, &mut y);
    (x, y)
}

/// `a` and `b` agree to `rel` relative to their size.
pub fn close(a: f64, b: f64, rel: f64) -> bool {
    (a - b).abs() <= rel * a.abs().max(b.abs()).max(1e-300)
}

/// Asserts that two model JSONs (`ravel fit` and the API) are the same model: method, k, n,
/// lambda, the same coefficients (names and indices) and values within `rel`.
pub fn assert_same_model(api: &Value, fit: &Value, rel: f64, what: &str) {
    assert_eq!(api["method"], fit["method"], "{what}: method");
    assert_eq!(api["k"], fit["k"], "{what}: k (api {api}, fit {fit})");
    assert_eq!(api["n"], fit["n"], "{what}: n");
    let num = |v: &Value| v.as_f64();
    match (num(&api["lambda"]), num(&fit["lambda"])) {
        (Some(a), Some(b)) => assert!(close(a, b, rel), "{what}: lambda {a} vs {b}"),
        (a, b) => assert_eq!(a, b, "{what}: lambda"),
    }
    let (ia, ib) = (
        num(&api["intercept"]).unwrap(),
        num(&fit["intercept"]).unwrap(),
    );
    assert!(close(ia, ib, rel), "{what}: intercept {ia} vs {ib}");
    let (ca, cb) = (
        api["coefficients"].as_array().unwrap(),
        fit["coefficients"].as_array().unwrap(),
    );
    assert_eq!(ca.len(), cb.len(), "{what}: number of coefficients");
    // Rounding (statistics merged in another order, as partitions move between replicas) is
    // relative to the model's size, not to each coefficient's: a feature whose true
    // coefficient is 0 is estimated at about 1e-5 here, and differs by about 1e-13 between
    // two exact summations of the same rows, 1e-9 of its own size but 1e-13 of the model's.
    let scale = ca
        .iter()
        .chain(cb)
        .filter_map(|c| num(&c["value"]))
        .fold(0.0f64, |m, v| m.max(v.abs()));
    for (a, b) in ca.iter().zip(cb) {
        assert_eq!(a["feature"], b["feature"], "{what}: support");
        assert_eq!(a["index"], b["index"], "{what}: support");
        let (va, vb) = (num(&a["value"]).unwrap(), num(&b["value"]).unwrap());
        assert!(
            (va - vb).abs() <= rel * va.abs().max(vb.abs()).max(scale),
            "{what}: coefficient {} {va} vs {vb} (largest coefficient {scale})",
            a["feature"]
        );
    }
}

/// Runs the real `ravel` binary and returns its stdout; panics with stderr on failure.
pub fn ravel(args: &[&str]) -> String {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_ravel"))
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "ravel {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// The Python of `target/pyenv` (which `scripts/test` makes; `RAVEL_TEST_PYTHON` overrides it),
/// checked to run `imports`; panics naming `what` is missing and how to install it.
pub fn pyenv_python(imports: &str, what: &str) -> String {
    let candidate = std::env::var("RAVEL_TEST_PYTHON")
        .unwrap_or_else(|_| format!("{}/target/pyenv/bin/python", env!("CARGO_MANIFEST_DIR")));
    let ok = std::process::Command::new(&candidate)
        .args(["-c", imports])
        .output()
        .is_ok_and(|o| o.status.success());
    assert!(
        ok,
        "no Python with {what} at {candidate}: run scripts/test (it creates target/pyenv) or set \
         RAVEL_TEST_PYTHON"
    );
    candidate
}

/// Value of a Prometheus sample `name{labels}` in the text exposition (labels as printed).
pub fn sample(metrics: &str, name_and_labels: &str) -> Option<f64> {
    metrics
        .lines()
        .find(|l| l.starts_with(name_and_labels) && l[name_and_labels.len()..].starts_with(' '))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

/// Reads every message of `topic` from the beginning, until `want` arrived or the deadline.
pub fn read_topic(
    brokers: &str,
    topic: &str,
    want: usize,
) -> Vec<(Vec<u8>, BTreeMap<String, String>)> {
    let consumer: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("group.id", "test-reader")
        .set("enable.auto.commit", "false")
        .create()
        .unwrap();
    let md = consumer
        .fetch_metadata(Some(topic), Duration::from_secs(30))
        .unwrap();
    let parts = md.topics()[0].partitions().len() as i32;
    let mut tpl = TopicPartitionList::new();
    for p in 0..parts {
        tpl.add_partition_offset(topic, p, Offset::Beginning)
            .unwrap();
    }
    consumer.assign(&tpl).unwrap();
    let mut out = vec![];
    let start = Instant::now();
    while out.len() < want && start.elapsed() < DEADLINE {
        if let Some(Ok(m)) = consumer.poll(Duration::from_millis(200)) {
            out.push((m.payload().unwrap_or(&[]).to_vec(), headers_of(&m)));
        }
    }
    out
}

/// A message's headers, values as text.
pub fn headers_of(m: &impl Message) -> BTreeMap<String, String> {
    m.headers()
        .map(|h| {
            h.iter()
                .map(|hd| {
                    (
                        hd.key.to_string(),
                        String::from_utf8_lossy(hd.value.unwrap_or(&[])).into_owned(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

/// Partitions of `topic` as the cluster reports them; None when it does not have the topic
/// (the probe never makes the embedded broker create it).
pub fn topic_partitions(brokers: &str, topic: &str) -> Option<usize> {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("allow.auto.create.topics", "false")
        .create()
        .unwrap();
    let md = c
        .fetch_metadata(Some(topic), Duration::from_secs(10))
        .ok()?;
    let t = md.topics().first()?;
    (t.error().is_none() && !t.partitions().is_empty()).then(|| t.partitions().len())
}

/// A consumer of `group` that does not join it, for reading offsets (6 s sessions: the mock
/// broker makes the next join wait for the session timeout of the last member that left).
pub fn group_client(brokers: &str, group: &str) -> BaseConsumer {
    ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("group.id", group)
        .set("enable.auto.commit", "false")
        .set("session.timeout.ms", "6000")
        .create()
        .unwrap()
}

/// `group`'s committed offset of each of `topic`'s partitions 0..`partitions` (-1: none).
pub fn committed_offsets(brokers: &str, group: &str, topic: &str, partitions: i32) -> Vec<i64> {
    let consumer = group_client(brokers, group);
    let mut tpl = TopicPartitionList::new();
    for p in 0..partitions {
        tpl.add_partition(topic, p);
    }
    let got = consumer
        .committed_offsets(tpl, Duration::from_secs(30))
        .unwrap();
    let out = (0..partitions)
        .map(|p| match got.find_partition(topic, p).unwrap().offset() {
            Offset::Offset(o) => o,
            _ => -1,
        })
        .collect();
    // The list must be gone before the consumer (its destructor hangs otherwise).
    drop(got);
    out
}

/// The end (high watermark, ListOffsets latest) of each of `topic`'s partitions 0..`partitions`.
pub fn end_offsets(brokers: &str, topic: &str, partitions: i32) -> Vec<i64> {
    let consumer = group_client(brokers, "watermarks");
    (0..partitions)
        .map(|p| {
            consumer
                .fetch_watermarks(topic, p, Duration::from_secs(30))
                .unwrap()
                .1
        })
        .collect()
}

/// Polls `f` every 50 ms until it returns Some, or panics after `DEADLINE` with `what` and the
/// log.
pub fn wait_for<T>(what: &str, log: &Path, f: impl FnMut() -> Option<T>) -> T {
    wait_within(what, log, DEADLINE, f)
}

/// Polls `f` every 50 ms until it returns Some, or panics after `limit` with `what` and the log.
pub fn wait_within<T>(
    what: &str,
    log: &Path,
    limit: Duration,
    mut f: impl FnMut() -> Option<T>,
) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            start.elapsed() < limit,
            "{what}: not within {limit:?}; log:\n{}",
            std::fs::read_to_string(log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Asks the service at `base` for `stream`'s model `body` and checks it is the model `ravel fit
/// FILE FLAGS` gives (1e-9 relative), over `n` rows.
pub fn assert_model_is_fits(
    base: &str,
    stream: &str,
    body: &Value,
    file: &Path,
    flags: &[&str],
    n: u64,
) {
    let r = client()
        .post(format!("{base}/v1/streams/{stream}/model"))
        .json(body)
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 200, "{stream}: {body}");
    let api: Value = r.json().unwrap();
    let mut args = vec!["fit", file.to_str().unwrap()];
    args.extend(flags);
    let fit: Value = serde_json::from_str(&ravel(&args)).unwrap();
    assert_eq!(api["n"], n, "{stream}: {body}: {api}");
    assert_same_model(&api, &fit, 1e-9, &format!("{stream}: {body}"));
}

/// Sends `payloads` to `topic` in order (to `partition`, or the partitioner's choice), with
/// librdkafka properties `options`, and waits until the broker has every one.
pub fn send(
    brokers: &str,
    topic: &str,
    partition: Option<i32>,
    payloads: &[Vec<u8>],
    options: &[(&str, &str)],
) {
    let mut cfg = ClientConfig::new();
    cfg.set("bootstrap.servers", brokers);
    for (k, v) in options {
        cfg.set(*k, *v);
    }
    let producer: BaseProducer = cfg.create().unwrap();
    for payload in payloads {
        let mut record = BaseRecord::<[u8], [u8]>::to(topic).payload(payload.as_slice());
        if let Some(p) = partition {
            record = record.partition(p);
        }
        producer.send(record).map_err(|(e, _)| e).unwrap();
        producer.poll(Duration::ZERO);
    }
    producer.flush(Duration::from_secs(30)).unwrap();
}

/// The finding of `ravel check --format json` named `check`.
pub fn finding<'a>(list: &'a [Value], check: &str) -> &'a Value {
    list.iter()
        .find(|f| f["check"] == check)
        .unwrap_or_else(|| panic!("no check {check} in {list:#?}"))
}

/// The section of the repository's Markdown file `rel` under the heading line `heading`
/// (`"## Routes"`), without that line, up to the next heading of the same or a higher level
/// (lines starting with '#' inside code blocks are comments, not headings).
pub fn doc_section(rel: &str, heading: &str) -> String {
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(rel))
        .unwrap_or_else(|e| panic!("{rel}: {e}"));
    let level = heading.len() - heading.trim_start_matches('#').len();
    let mut lines = text.lines();
    assert!(
        lines.any(|l| l == heading),
        "{rel} has no heading {heading:?}"
    );
    let mut out = String::new();
    let mut fence = false;
    for line in lines {
        if line.starts_with("```") {
            fence = !fence;
        }
        let hashes = line.len() - line.trim_start_matches('#').len();
        if !fence && (1..=level).contains(&hashes) && line[hashes..].starts_with(' ') {
            break;
        }
        out.push_str(line);
        out.push('\n');
    }
    out
}

/// The fenced code blocks of a Markdown text, in order: (language, content).
pub fn code_blocks(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut open: Option<(String, String)> = None;
    for line in text.lines() {
        match (&mut open, line.strip_prefix("```")) {
            (None, Some(lang)) => open = Some((lang.trim().to_string(), String::new())),
            (Some(_), Some(_)) => out.push(open.take().unwrap()),
            (Some((_, body)), None) => {
                body.push_str(line);
                body.push('\n');
            }
            (None, None) => {}
        }
    }
    out
}

/// The commands of a shell code block as a user pastes them: lines continued with a trailing
/// backslash joined, empty and comment-only lines left out (a comment after a command stays:
/// the shell ignores it).
pub fn shell_commands(block: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    for line in block.lines() {
        if current.is_empty() && (line.trim().is_empty() || line.trim_start().starts_with('#')) {
            continue;
        }
        match line.strip_suffix('\\') {
            Some(head) => current.push_str(head),
            None => {
                current.push_str(line);
                out.push(std::mem::take(&mut current).trim().to_string());
            }
        }
    }
    assert!(
        current.is_empty(),
        "a command continued past its block: {current}"
    );
    out
}

/// The `toml` code blocks of the guide's "TLS and SASL" section (docs/operations.md), in
/// order (the secured tests run the documented configurations).
pub fn readme_examples() -> Vec<String> {
    code_blocks(&doc_section("docs/operations.md", "## TLS and SASL"))
        .into_iter()
        .filter(|(lang, _)| lang == "toml")
        .map(|(_, body)| body)
        .collect()
}

/// Runs `openssl ARGS` in `dir` (certificates for the secured tests).
pub fn openssl(dir: &Path, args: &[&str]) {
    let out = std::process::Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .expect("the openssl command (scripts/test installs it)");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A self-signed CA in `dir/NAME.pem` (its key in `dir/NAME.key`), for 2 days.
pub fn make_ca(dir: &Path, name: &str) {
    let (key, pem, subject) = (
        format!("{name}.key"),
        format!("{name}.pem"),
        format!("/CN=ravel-{name}"),
    );
    openssl(
        dir,
        &[
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", &key, "-out", &pem,
            "-days", "2", "-subj", &subject,
        ],
    );
}

/// The CAs `ca` and `other-ca` (the wrong one) in `dir`, and the key and signing request of
/// a broker certificate for 127.0.0.1 and localhost (`broker.key`, `broker.csr`, and
/// `san.ext` for `sign_with_ca`'s `-extfile`).
pub fn broker_request(dir: &Path) {
    make_ca(dir, "ca");
    make_ca(dir, "other-ca");
    openssl(
        dir,
        &[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "broker.key",
            "-out",
            "broker.csr",
            "-subj",
            "/CN=127.0.0.1",
        ],
    );
    std::fs::write(
        dir.join("san.ext"),
        "subjectAltName = IP:127.0.0.1, DNS:localhost\n",
    )
    .unwrap();
}

/// Signs `dir/NAME.csr` with the CA `dir/CA.pem` into `dir/NAME.pem` (2 days), with more
/// `openssl x509` arguments `extra` (`-extfile` for names).
pub fn sign_with_ca(dir: &Path, name: &str, ca: &str, extra: &[&str]) {
    let (csr, pem, ca_pem, ca_key) = (
        format!("{name}.csr"),
        format!("{name}.pem"),
        format!("{ca}.pem"),
        format!("{ca}.key"),
    );
    let mut args = vec![
        "x509",
        "-req",
        "-in",
        &csr,
        "-CA",
        &ca_pem,
        "-CAkey",
        &ca_key,
        "-CAcreateserial",
        "-out",
        &pem,
        "-days",
        "2",
    ];
    args.extend(extra);
    openssl(dir, &args);
}

/// `ravel check --config dir/ravel.toml --format json --timeout-ms 5000` with `env`: (exit
/// success, the findings, everything it printed on stdout and stderr).
pub fn ravel_check(dir: &Path, env: &[(&str, &str)]) -> (bool, Vec<Value>, String) {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_ravel"));
    cmd.args([
        "check",
        "--config",
        dir.join("ravel.toml").to_str().unwrap(),
        "--format",
        "json",
        "--timeout-ms",
        "5000",
    ]);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    let (stdout, stderr) = (
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    let list: Value =
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}{stderr}"));
    (
        out.status.success(),
        list.as_array().expect("a list of checks").clone(),
        stdout + &stderr,
    )
}
