//! ravel: the service and command line of ravel, sparse linear models learned from streams.
//!
//! The mathematics lives in the `ravel-core` crate (statistics, Gram-form solvers, feature
//! selection, file readers, synthetic designs), which depends on no Kafka, HTTP or CLI crate;
//! this crate wires it to Kafka, HTTP and the command line. Papers are cited by short name
//! ("003 eq. 6"): docs/references.md lists them.
//!
//! # Layout
//! The tree draws the data flow: Kafka -> `ingest` -> `state` -> `api`. Modules are listed
//! bottom-up; each imports only modules above it in this list, no files or folders import
//! each other in a circle, and every file is named here (`tests/layout.rs` holds all three,
//! reading the order from this block).
//! - `shutdown`: the shutdown signal passed down to ingest and HTTP.
//! - `reason`: why a message was refused (`Reason`, `Rejection`), below metrics and ingest.
//! - `health`: what is wrong on the Kafka side (missing topics, held partitions, denied
//!   access), shared by the threads that find it and the API that reports it.
//! - `metrics`: every Prometheus metric, one file an area (`ingest`, `streams`, `features`,
//!   `scorers`, `api`, `cluster`), all in one registry (`mod.rs`); `events`, what the fold
//!   reports as internal events, each emitting its metrics together.
//! - `config`: the configuration schema, file < `RAVEL_...` environment < flags (`mod.rs`
//!   loads the layers and checks the whole); one file per section: `http`, `kafka`, `ingest`
//!   (with `[dlq]` and `[state]`), `schemas` (schema'd formats and the registry), `scorers`,
//!   `limits` (the memory limit files and configured streams are checked against), `demo`,
//!   `log`; `stream/` (`[[streams]]` and `[[feature_streams]]`, with what a stream sets for
//!   itself: `history` (each stream's default model over time), `quality` (its live figures),
//!   `start` (where a new stream starts; RFC 3339 times)); `args` (the serve flags) and
//!   `explain` (errors in the user's words).
//! - `dotted`: dotted paths into JSON events (`customer.age`), read the same way by ingest's
//!   decoding and the API's predictions.
//! - `kafka`: the cluster itself: the one librdkafka client configuration (`client`), the
//!   embedded broker (`broker`, `ravel broker`), every topic checked at start (`topics`),
//!   authorization errors (`authz`), standalone assignment and its watch for a second
//!   instance (`standalone`), the rebalance callback ingest and the scorers share
//!   (`rebalance`), what ravel's producers share when they send (`send`), a topic's latest
//!   messages read without a commit (`sample`).
//! - `codec`: the message codec, one layer below every consumer, by format: `json`
//!   (ravel's own JSON shapes in one pass, its `number` parser, and `json::events`, JSON
//!   events by their mapped paths), `schemad` (schema'd values, `format = "avro"`,
//!   `protobuf`, `json-schema`: the Confluent framing in its `mod.rs`, the Schema Registry
//!   client `registry`, Avro `avro` and `avro_batch` (the datums of one ingest batch decoded
//!   together by arrow-avro), Protobuf `protobuf` with `scan` (the mapped fields read off the
//!   wire)); `events` (the field mapping of named rows, mini-batches and nested events),
//!   `format` (the entry point of every observation format, and the encoders), `schema` (what
//!   a message must match), `feature_format` (feature-stream messages) and `decoder` (a
//!   stream's `Decoder`, built once from its configuration: a message or a batch into rows,
//!   the schema id given as bytes).
//! - `state`: what ingest publishes and the API reads: `published` (a snapshot swapped after
//!   every batch), `streams`, `feature_streams`, `history` (each stream's default model over
//!   time, in a bounded ring), `recorder` (the task that fills the ring), `quality` (each
//!   stream's live test-then-train figures, recorded by ingest), `sightings` (which
//!   declared fields and target a stream's first events carried, and those never seen),
//!   `arrivals` (messages read and refused, and their dead-letter copies, since the start)
//!   and `wide_columns` (the sparse columns a wide feature stream keeps for paper 004's path).
//! - `dead_letters`: a refused message counted, logged at a bounded rate and copied to
//!   `<topic>.dlq`, for ingest and the scorers alike: `rejections` (counted, logged, copied),
//!   `dlq` (the producer thread), `held` (the fence on checkpoints), `log_rate`.
//! - `store`: what survives a restart, one concept with two back ends: `file` (checkpoint
//!   files, `state.dir`) and `kafka` (a compacted changelog topic, `state.store = "kafka"`:
//!   its `writer`, its `reader`, `buckets`, a partition's time buckets as records of
//!   their own so a checkpoint writes only those changed, and `declared`, the API's
//!   declarations as records of the same topic); `bucket_files`, the file store's
//!   time buckets, a file per version of a bucket, for the same reason.
//! - `declared`: streams declared at run time over the API (issue 49): checked as the config
//!   file's, kept in `state.dir/declarations.json` (or the state topic), handed to ingest as
//!   changes between batches (the design is its module comment); `scorers` and `features`:
//!   scorers and feature streams declared the same way; `sync`: with the kafka store, every
//!   replica follows the declarations in the state topic; `data`: a declaration's fields
//!   checked against its topic's latest messages (a PUT, `ravel check`); `keep`: how a change
//!   of any kind is staged, kept (the file or the state topic) and adopted.
//! - `ingest`: the consumer loop, by stage. The loop itself (`mod.rs`: gather, fold, publish,
//!   checkpoint, commit) and its steps: `setup`, `gather` (a batch; `ahead`: JSON decoded on
//!   other threads), `accept` (one message), `denied` (consumer and authorization errors),
//!   `commit_loop` (checkpoints, then commits), `rebalance` (assignment), `resubscribe`
//!   (streams declared or retired over the API, between batches), `join_watch` (a group
//!   member left unassigned, said in the log and `/readyz`), `start` (where a stream
//!   never read starts: its topic's end, or a time), `lag`; folding:
//!   `fold` (rows into statistics; `restore`: a partition's saved state on assignment), `windows` (rows into time buckets), `freshness` (each
//!   message's age once its rows are visible), `cv` (the cross-validation fold of a row), `features`
//!   (feature-stream columns into the selection); `checkpoints/`: `positions`, `persist` (checkpoints written and loaded),
//!   `commit` (which offsets may be committed).
//! - `score`: the scorers of `[[scorers]]`, a pipeline of their own beside ingest: events in
//!   through a stream's decoding, predictions with a model of its snapshot, predictions out;
//!   each on its own thread with its own consumer group (`mod.rs`: the loop); `clients`
//!   (delivery reports, the rebalance callback), `predict` (one event scored), `held` (the
//!   models held: for a scorer of its stream's own topic, a model of the rows before each
//!   event), `output`
//!   (predictions sent, deliveries awaited) and `tail` (where an exactly-once scorer resumes:
//!   its output partitions' tail).
//! - `propose`: a topic's fields from its latest messages, decoded as ingest decodes them,
//!   to declare a stream from (`GET /v1/topics/{topic}/fields`, the console's form).
//! - `api`: the HTTP API (axum; `mod.rs` the router and the shared state): `streams` and
//!   `features` (the handlers of the two stream kinds; a stream's `predict` and `statistics`
//!   routes in `streams/`), `wide` (a wide feature stream's
//!   Lasso path and models, paper 004), `params` (request parsing), `window` (the `"window"`
//!   of a request: parsed, resolved into a span's statistics, refused by name), `health`
//!   (`/healthz`, `/readyz`, `/metrics`), `admission` (extraction slots), `requests` (counted
//!   and timed, fallbacks), `auth` (the token of state-changing requests), `declarations` (streams declared,
//!   changed and retired at run time, with the admin token), `error` (the JSON
//!   error type), `openapi` (`/openapi.json`), `console` (the web console, its files in
//!   `api/console/`) and `http` (the accept loop with its bounds on clients).
//! - `server`: `run(config, brokers, listener, shutdown)`, the service started part by part:
//!   `restore` (the API's declarations and the checkpoints of an earlier run), `parts` (each
//!   part built and started by a method of its own) and `wiring` (what declarations act with,
//!   `declared::Service`).
//! - `cli`: the commands: `serve` (the service with its embedded broker and demo), `fit`
//!   (`fit_wide`: `ravel fit --wide`, paper 004's Lasso path on a wide file's raw sparse
//!   columns), `select`, `produce` (with `schemad`: records through a Schema Registry), `check`
//!   (the preflight: `check/kafka` the cluster's questions, `check/registry` the registry's,
//!   `fields` the declared fields against the topics' latest messages), `replay` (dead
//!   letters produced again), the `demo` producer, `args` (what their clap arguments
//!   share, with the flags of `ravel fit --wide`) and `extract_flags` (the extraction flags
//!   of `fit` and `select`, parsed as the API's request body).
//!
//! Modules are private: what the binary, the tests and the benches use is re-exported below,
//! by name.

mod api;
mod cli;
mod codec;
pub mod config;
mod dead_letters;
mod declared;
mod dotted;
mod health;
mod ingest;
mod kafka;
mod metrics;
mod propose;
mod reason;
mod score;
mod server;
pub mod shutdown;
mod state;
mod store;

// The surface the binary, the tests and the benches use. `config` (the schema a deployment
// writes) and `shutdown` (the signal `run` takes) are public whole; everything else by name.

/// The demo producer of `ravel serve` without Kafka (the deployment's demo profile).
pub use cli::demo::DemoProducer;
/// The commands of the binary: `ravel serve`, `fit`, `select`, `produce`, `check`, `replay`
/// and `broker` (each module has its clap arguments and a `run`).
pub use cli::serve::serve;
pub use cli::{check, fit, fit_wide, produce, replay, select};
/// The bytes of a rejected message a dead-letter copy keeps when the whole would not fit.
pub use dead_letters::dlq::TRUNCATED_BYTES;
/// How far a message's Kafka timestamp may lie ahead of the clock before it is held back as
/// skewed (`ravel_messages_clock_skewed_total`).
pub use ingest::freshness::SKEW_ALLOWANCE_MS;
/// The librdkafka clients built from `[kafka]`, for tools that read the same cluster.
pub use kafka::KafkaClients;
pub use kafka::broker;
/// The service: `run(config, brokers, listener, shutdown)` until `shutdown` fires, and the
/// log subscriber it reports through.
pub use server::{init_logging, run};
/// A stream's statistics as a snapshot, a checkpoint and a state record hold them.
pub use state::streams::Stats;
/// Checkpoint files (`state.dir`): their format, atomic write and load.
pub use store::file as checkpoint;
/// The Kafka state store's records (`state.store = "kafka"`): a partition's state and its
/// time buckets as changelog records, and back (the checkpoint benchmark measures them).
pub use store::kafka as state_records;

/// The observation messages a stream reads (docs/streams.md: Message formats): rows and mini-batches as
/// JSON or ravel's binary form, written by `ravel produce` and by the tests.
pub mod wire {
    pub use crate::codec::format::{
        Schema, decode, encode_binary, encode_json, encode_json_named_batch,
    };
    /// A stream's fields and target compiled for its JSON events (`Schema::plan`).
    pub use crate::dotted::Paths;
}

/// Locks a mutex whether or not a thread panicked while holding it: the data behind every
/// lock of this crate stays consistent at each unlock, so a poisoned lock is still usable.
/// The one way this crate takes a lock (with `read` and `write` for its `RwLock`s).
pub(crate) fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// `lock` for reading an `RwLock`.
pub(crate) fn read<T>(l: &std::sync::RwLock<T>) -> std::sync::RwLockReadGuard<'_, T> {
    l.read().unwrap_or_else(|e| e.into_inner())
}

/// `lock` for writing an `RwLock`.
pub(crate) fn write<T>(l: &std::sync::RwLock<T>) -> std::sync::RwLockWriteGuard<'_, T> {
    l.write().unwrap_or_else(|e| e.into_inner())
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
