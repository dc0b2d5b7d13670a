//! The service under test in this process: `server::run` on 127.0.0.1:0 in its own runtime
//! (`TestService`, stopped on drop), the HTTP client the tests use, and the configuration
//! builders (`config`, `feature_config`, `stream`, `regression`, `one_regression`).

use super::{DEADLINE, checked_answer, client};
use ravel::config::{Config, FeatureSchema, FeatureStreamConfig, StreamConfig};
use ravel::shutdown::{self, ShutdownTrigger};
use ravel_core::Task;
use serde_json::Value;
use std::net::SocketAddr;
use std::path::Path;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

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

    /// Starts a service that must stop by itself with an error; returns the error with its
    /// causes (`{:#}`).
    pub fn start_refused(config: Config, brokers: &str) -> String {
        let err = TestService::start(config, brokers).join().unwrap_err();
        format!("{err:#}")
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
        self.call(reqwest::Method::GET, path, None)
    }

    pub fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        self.call(reqwest::Method::POST, path, Some(body))
    }

    pub fn put(&self, path: &str, body: &Value) -> (u16, Value) {
        self.call(reqwest::Method::PUT, path, Some(body))
    }

    /// `method path` (with a JSON `body`): the status and the JSON answer (null when the body
    /// is not JSON), every error message checked for Rust's type names.
    fn call(&self, method: reqwest::Method, path: &str, body: Option<&Value>) -> (u16, Value) {
        let mut request = client().request(method.clone(), self.url(path));
        if let Some(body) = body {
            request = request.json(body);
        }
        let r = request
            .send()
            .unwrap_or_else(|e| panic!("{method} {path}: {e}"));
        let status = r.status().as_u16();
        checked_answer(
            &format!("{method} {path}"),
            status,
            r.json().unwrap_or(Value::Null),
        )
    }

    /// Polls GET `path` every 100 ms until `done(status, body)`; returns that body, or panics
    /// with `what` and the last answer after the deadline.
    pub fn wait_get(
        &self,
        path: &str,
        what: &str,
        mut done: impl FnMut(u16, &Value) -> bool,
    ) -> Value {
        let start = Instant::now();
        loop {
            let (status, v) = self.get(path);
            if done(status, &v) {
                return v;
            }
            assert!(
                start.elapsed() < DEADLINE,
                "{what}: last {path} {status} {v} after {DEADLINE:?}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Waits until feature stream `name` has read `messages` messages of its (one-partition)
    /// topic; returns its summary.
    pub fn wait_feature_offset(&self, name: &str, messages: i64) -> Value {
        let what = format!("feature stream {name}: wanted {messages} messages read");
        self.wait_get(
            &format!("/v1/feature-streams/{name}"),
            &what,
            |status, v| status == 200 && v["offsets"]["0"].as_i64() == Some(messages),
        )
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
        let what = format!("stream {name}: wanted n = {n}");
        self.wait_get(&format!("/v1/streams/{name}"), &what, |status, v| {
            status == 200 && v["n"].as_u64() == Some(n)
        })
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
        topic: Some(topic.into()),
        features,
        ..StreamConfig::plain(name.into(), 0, task)
    }
}

/// A regression stream of `p` positional features (`{"x": [...], "y": v}`).
pub fn regression(name: &str, topic: &str, p: usize) -> StreamConfig {
    stream(name, topic, FeatureSchema::Count(p), Task::Regression)
}

/// A config of one regression stream of `p` positional features, checkpoints in `state_dir`
/// (or off).
pub fn one_regression(name: &str, topic: &str, p: usize, state_dir: Option<&Path>) -> Config {
    config(vec![regression(name, topic, p)], state_dir)
}

/// The checkpoint of a 2-feature regression stream `stream` on `topic` that holds two rows,
/// read up to `offset` of partition 0.
pub fn two_row_checkpoint(stream: &str, topic: &str, offset: i64) -> ravel::checkpoint::Checkpoint {
    let mut stats = ravel::Stats::new(Task::Regression, 2, ravel_core::stats::AlphaSchedule::Plain);
    stats
        .update_batch(&[1.0, 2.0, 3.0, 5.0], &[1.0, 2.0])
        .unwrap();
    ravel::checkpoint::Checkpoint {
        version: ravel::checkpoint::VERSION,
        stream: stream.into(),
        topic: topic.into(),
        cluster_id: None,
        offsets: [(0, offset)].into(),
        last_update_ms: None,
        as_of_ms: None,
        stats,
        folds: None,
        windows: None,
        bucket_files: None,
    }
}
