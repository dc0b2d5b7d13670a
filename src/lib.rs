//! ravel: sparse linear models learned from streams.
//!
//! Rows (x, y) are folded into running-average statistics; any model (OLS, ridge, OLSth, FSA,
//! Lasso, elastic net, MCP, SCAD; regression or class-weighted classification) is extracted
//! from those statistics alone, at any sparsity k or penalty lambda, and equals the offline
//! method on all rows (paper 003). The library knows nothing of Kafka or HTTP.
//!
//! # Layout
//! - [`stats`]: `RunningStats`, `AlphaSchedule`, `ClassStats`: the state of an observation
//!   stream, batch updates (symmetric rank-B) and exact shard merges; `stats::adaptive`, the
//!   drift-adaptive schedule (CUSUM on test-then-train errors).
//! - [`solve`]: the Gram-form problem (standardization, classes) and one solver family per
//!   file; `model_from_stats` / `extract` return the `Model` JSON shared by CLI and API.
//! - [`data`]: streaming readers for CSV, LIBSVM and NPY files.
//! - [`fit`]: `ravel fit`, the offline entry point.
//! - [`prequential`]: test-then-train replay of a file or stream (`ravel fit --prequential`),
//!   to compare weight schedules offline.
//! - [`features`]: feature streams (paper 000): online substitution (OS) and asynchronous
//!   parallel OS (Asy-OS) keep the best s of a stream of columns in O(n s) memory.
//! - [`select`]: `ravel select`, the offline form of a feature stream.
//! - [`synthetic`]: the simulated design of paper 003 (demo stream, tests, benchmarks).
//! - [`scenarios`]: the same design with drifting coefficients (drift checks and report).
//!
//! The service (`ravel serve`) wires the library to Kafka and HTTP:
//! - [`config`]: the configuration schema; file < `RAVEL_...` environment < flags.
//! - [`broker`]: the embedded Kafka-protocol broker (librdkafka's mock cluster), `ravel broker`.
//! - [`ingest`]: the consumer loop, message formats, validation, dead letters, offset commits.
//! - [`streams`]: each stream's statistics snapshot, swapped after every batch for readers.
//! - [`feature_streams`]: each feature stream's running OS / Asy-OS selection (ingest's) and
//!   its snapshot for readers; labels first, features by name, replayed from the topic.
//! - [`checkpoint`]: statistics + next offsets persisted atomically, for exact restarts.
//! - [`api`]: the axum router, handlers and the JSON error type.
//! - [`metrics`]: every Prometheus metric, in one place.
//! - [`server`]: `run(config, brokers, listener, shutdown)` and the `serve` command.
//! - [`shutdown`]: the shutdown signal passed down to ingest and HTTP.
//! - [`produce`], [`demo`]: `ravel produce` and the demo producer of the embedded default.

pub mod api;
pub mod broker;
pub mod checkpoint;
pub mod config;
pub mod data;
pub mod demo;
pub mod feature_streams;
pub mod features;
pub mod fit;
pub mod ingest;
pub mod metrics;
pub mod prequential;
pub mod produce;
pub mod scenarios;
pub mod select;
pub mod server;
pub mod shutdown;
pub mod solve;
pub mod stats;
pub mod streams;
pub mod synthetic;
