//! `[ingest]`, `[dlq]` and `[state]`: how rows are batched, what happens to a partition whose
//! dead-letter copy cannot be delivered, and where statistics are kept across restarts.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct IngestConfig {
    /// Rows gathered before they are folded into the statistics in one update (a feature-stream
    /// message counts as one; feature streams publish their snapshot after each batch).
    pub max_batch_rows: usize,
    /// Longest a batch gathers messages after its first, in milliseconds. A batch is folded
    /// as soon as the consumer has nothing more buffered, so this only caps it under a steady
    /// flow.
    pub max_batch_wait_ms: u64,
    /// Forward bad messages to `<topic>.dlq`.
    pub dead_letter: bool,
    /// How often consumer lag is refreshed (librdkafka statistics interval), in milliseconds.
    pub lag_interval_ms: u64,
    /// Events of each stream (since start) in which ravel counts which declared fields and
    /// target arrive; one absent from every one of them is a warning (a misspelled name), in
    /// the log, the stream's summary, `ravel_ingest_fields_never_seen` and `ravel check`.
    pub field_check_events: u64,
}

impl Default for IngestConfig {
    fn default() -> Self {
        IngestConfig {
            max_batch_rows: 1024,
            max_batch_wait_ms: 50,
            dead_letter: true,
            lag_interval_ms: 5000,
            field_check_events: 300,
        }
    }
}

/// What happens to a partition whose dead-letter copy cannot be delivered.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnFailure {
    /// The partition goes on, but no checkpoint or commit of it passes the rejected message
    /// until its copy is delivered (retried with backoff); it pauses once
    /// `max_unacked_copies` / `max_unacked_bytes` copies wait.
    #[default]
    Block,
    /// The partition moves on; the message is counted and logged with its coordinates.
    Skip,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DlqConfig {
    /// `block` or `skip` (see `OnFailure`).
    pub on_failure: OnFailure,
    /// Time librdkafka gets to deliver one copy before the attempt counts as failed.
    pub delivery_timeout_ms: u64,
    /// First wait before a failed copy is sent again; doubles up to `retry_max_ms`.
    pub retry_initial_ms: u64,
    pub retry_max_ms: u64,
    /// With `block`: a partition pauses once this many of its copies are not acknowledged
    /// (each is held in memory until it is), and goes on under half of it.
    pub max_unacked_copies: usize,
    /// The same bound in bytes (payload and key of the unacknowledged copies, per partition).
    pub max_unacked_bytes: usize,
    /// Create the dead-letter topics (`<topic>.dlq`) the cluster lacks, at start: they are
    /// ravel's own, as Kafka Connect creates its dead-letter topics. Off: a missing one keeps
    /// the service not ready, naming it with the command that creates it.
    pub create_topics: bool,
}

impl Default for DlqConfig {
    fn default() -> Self {
        DlqConfig {
            on_failure: OnFailure::Block,
            delivery_timeout_ms: 30_000,
            retry_initial_ms: 1000,
            retry_max_ms: 60_000,
            max_unacked_copies: 10_000,
            max_unacked_bytes: 16 << 20,
            create_topics: true,
        }
    }
}

/// Where the statistics and their offsets are kept across restarts (`state.store`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StoreKind {
    /// Checkpoints in `state.dir`: one process owns every partition of its streams.
    #[default]
    Dir,
    /// Per partition, in the compacted changelog topic `state.topic` (`crate::store::kafka`):
    /// several replicas in one consumer group, no disk.
    Kafka,
    /// Nothing: a restart re-reads every topic from its beginning.
    None,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct StateConfig {
    /// `dir`, `kafka` or `none`.
    pub store: StoreKind,
    /// Directory of the checkpoints (statistics + next offset of every partition) of the `dir`
    /// store; empty disables them, and a restart then re-reads every topic from its beginning.
    pub dir: String,
    /// Time between checkpoints (or state records), in milliseconds; offsets are committed to
    /// Kafka right after each is durable.
    pub checkpoint_interval_ms: u64,
    /// The `kafka` store's changelog topic; empty: `<kafka.group_id>.state`.
    pub topic: String,
    /// The `kafka` store's largest record, in bytes: a larger state is written in chunks
    /// (keep it below the brokers' `message.max.bytes`).
    pub max_record_bytes: usize,
    /// Create the `kafka` store's topic (compacted) when the cluster lacks it, at start: it is
    /// ravel's own, as Kafka Streams creates its changelogs. Off: a missing one keeps the
    /// service not ready, naming it with the command that creates it.
    pub create_topic: bool,
}

impl Default for StateConfig {
    fn default() -> Self {
        StateConfig {
            store: StoreKind::Dir,
            dir: "ravel-state".into(),
            checkpoint_interval_ms: 5000,
            topic: String::new(),
            max_record_bytes: 900_000,
            create_topic: true,
        }
    }
}

impl StateConfig {
    /// The checkpoint directory, when the `dir` store is on.
    pub fn dir(&self) -> Option<PathBuf> {
        let d = self.dir.trim();
        (self.store == StoreKind::Dir && !d.is_empty()).then(|| PathBuf::from(d))
    }
    /// The changelog topic, when the `kafka` store is on.
    pub fn kafka_topic(&self, group_id: &str) -> Option<String> {
        (self.store == StoreKind::Kafka).then(|| {
            if self.topic.trim().is_empty() {
                format!("{group_id}.state")
            } else {
                self.topic.trim().to_string()
            }
        })
    }
}

/// The name of a topic's dead-letter topic.
pub fn dlq_of(topic: &str) -> String {
    format!("{topic}.dlq")
}
