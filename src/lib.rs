//! ravel: the service and command line of ravel, sparse linear models learned from streams.
//!
//! The mathematics lives in the `ravel-core` crate (statistics, Gram-form solvers, feature
//! selection, file readers, synthetic designs), which depends on no Kafka, HTTP or CLI crate;
//! this crate wires it to Kafka, HTTP and the command line.
//!
//! # Layout
//! The command line (`src/main.rs` parses, these modules run):
//! - [`fit`]: `ravel fit`, the offline entry point (a file through the streaming statistics).
//! - [`select`]: `ravel select`, the offline form of a feature stream.
//! - [`produce`], [`demo`]: `ravel produce` and the demo producer of the embedded default.
//! - [`limits`]: the memory limit (`--max-memory`, `limits.max_memory`) files and configured
//!   streams are checked against before anything of their size is allocated.
//!
//! The service (`ravel serve`) wires the library to Kafka and HTTP:
//! - [`config`]: the configuration schema; file < `RAVEL_...` environment < flags.
//! - [`broker`]: the embedded Kafka-protocol broker (librdkafka's mock cluster), `ravel broker`.
//! - [`reason`]: why a message was refused (`Reason`, `Rejection`), below metrics and ingest.
//! - [`published`]: `Published<S>` (a snapshot swapped after every batch, readers clone an
//!   `Arc`) and `Registry<H>` (handles by name), shared by both stream kinds.
//! - [`kafka`]: the one librdkafka client configuration (consumer, dead-letter, labels and
//!   state-store producers, admin), below ingest, topics and the state store.
//! - [`ingest`]: the consumer loop (`mod.rs`), one file per concern: `rebalance`,
//!   `positions`, `lag`, `fold`, `cv` (a row's cross-validation fold), `checkpoints`,
//!   `commit` (which offsets may be committed), `features` (feature-stream dispatch: the
//!   running OS / Asy-OS selection), `rejections`, `format`, `feature_format`, `dlq`.
//! - [`streams`]: each stream's statistics snapshot, swapped after every batch for readers.
//! - [`feature_streams`]: each feature stream's snapshot for readers (the selection, offsets
//!   read, recent rejections); imports nothing of ingest.
//! - [`history`]: each stream's default model, alpha, effective sample size and drift
//!   alarms over time, in a bounded ring (`GET /v1/streams/{name}/history`).
//! - [`checkpoint`]: statistics + next offsets persisted atomically, for exact restarts.
//! - [`topics`]: every topic ravel reads or writes, checked (and created when asked) at start;
//!   topic names (`dlq_of`).
//! - [`state_store`]: the same per partition in a compacted Kafka topic, for replicas that
//!   share a consumer group (`state.store = "kafka"`).
//! - [`api`]: the axum router, handlers and the JSON error type; the web console (the page at
//!   `/` and its assets, embedded).
//! - [`metrics`]: every Prometheus metric, in one place.
//! - [`server`]: `run(config, brokers, listener, shutdown)` and the `serve` command.
//! - [`shutdown`]: the shutdown signal passed down to ingest and HTTP.
//! - [`produce`], [`demo`]: `ravel produce` and the demo producer of the embedded default.

pub mod api;
pub mod authz;
pub mod broker;
pub mod checkpoint;
pub mod cli;
pub mod config;
pub mod demo;
pub mod feature_streams;
pub mod fit;
pub mod health;
pub mod history;
pub mod http;
pub mod ingest;
pub mod kafka;
pub mod limits;
pub mod metrics;
pub mod produce;
pub mod published;
pub mod reason;
pub mod select;
pub mod server;
pub mod shutdown;
pub mod state_store;
pub mod streams;
pub mod topics;

/// Locks a mutex whether or not a thread panicked while holding it: the data behind every
/// lock of this crate stays consistent at each unlock, so a poisoned lock is still usable.
pub(crate) fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Milliseconds since the Unix epoch of `t`; 0 for a time before it (a clock set before
/// 1970). The one conversion for every `*_ms` field, log and checkpoint.
pub(crate) fn unix_ms(t: std::time::SystemTime) -> u64 {
    t.duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}

/// `unix_ms` of now.
pub(crate) fn now_ms() -> u64 {
    unix_ms(std::time::SystemTime::now())
}
