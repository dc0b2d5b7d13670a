//! The live state of every declared feature stream (paper 000), shared by ingest (the one
//! writer) and the HTTP API (many readers), as `streams` is for observation streams.
//!
//! Ingest owns the running selection (`ingest::features::LiveFeatureStream`: OS for
//! `workers = 1`, one worker of Asy-OS being OS exactly without the thread, or Asy-OS on
//! `workers` threads). It applies each decoded message in topic order and, after each batch
//! (and every `ingest::features::PUBLISH_EVERY` within a long one), publishes an immutable `FeatureSnapshot` (a `SelectionSnapshot` plus the offsets read,
//! `published::Published`); readers summarize and refit from that copy for as long as they
//! like, so a refit never blocks ingest and ingest never blocks a reader. This module holds
//! only what readers see; it imports nothing of ingest.
//!
//! How messages are applied (features by name, labels first) is `ingest::features`'s. A wide
//! stream (`wide = true`) also publishes its kept columns (`wide_columns`).
//!
//! Restarts: there is no checkpoint. The state is a function of the whole topic, so ingest
//! reads feature topics from their beginning at every start (labels sent over HTTP are
//! written to the topic too, so they are replayed with the features).

use crate::config::FeatureStreamConfig;
use crate::state::published::{Named, Published, Registry};
use crate::state::wide_columns::WideSnapshot;
use ravel_core::features::SelectionSnapshot;
use serde::Serialize;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::SystemTime;

/// A message ingest refused.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RecentRejection {
    pub partition: i32,
    pub offset: i64,
    pub reason: &'static str,
    pub message: String,
}

/// What readers see: the selection after the last batch and how far the topic was read.
#[derive(Clone, Default)]
pub struct FeatureSnapshot {
    /// None until labels arrived.
    pub selection: Option<Arc<SelectionSnapshot>>,
    /// Partition -> next offset: every message before it was applied or refused.
    pub offsets: BTreeMap<i32, i64>,
    /// Feature messages applied to the selection.
    pub features_applied: u64,
    /// When a message last changed the selection.
    pub last_update: Option<SystemTime>,
    /// The last refused messages, oldest first.
    pub recent_rejections: Vec<RecentRejection>,
    /// A wide stream's kept columns (None: not wide, or no labels yet).
    pub wide: Option<Arc<WideSnapshot>>,
}

impl FeatureSnapshot {
    /// Whether the message at `offset` of `partition` was read (applied or refused).
    pub fn has_read(&self, partition: i32, offset: i64) -> bool {
        self.offsets
            .get(&partition)
            .is_some_and(|&next| next > offset)
    }
    pub fn rejection_at(&self, partition: i32, offset: i64) -> Option<&RecentRejection> {
        self.recent_rejections
            .iter()
            .find(|r| r.partition == partition && r.offset == offset)
    }
}

/// One declared feature stream: its configuration and its current snapshot.
pub struct FeatureStreamHandle {
    pub config: FeatureStreamConfig,
    pub topic: String,
    /// `wide = true`: the bytes its columns may take (`Config::wide_budget`); else 0.
    pub wide_budget: u64,
    snapshot: Published<FeatureSnapshot>,
}

impl FeatureStreamHandle {
    /// A stream; `wide_budget` is its share of `limits.max_memory` when `wide = true`.
    pub fn new(config: FeatureStreamConfig, wide_budget: u64) -> Self {
        FeatureStreamHandle {
            topic: config.topic(),
            wide_budget,
            config,
            snapshot: Published::new(FeatureSnapshot::default()),
        }
    }
    pub fn name(&self) -> &str {
        &self.config.name
    }
    /// "os" or "asy-os".
    pub fn method(&self) -> &'static str {
        if self.config.workers == 1 {
            "os"
        } else {
            "asy-os"
        }
    }
    /// The current snapshot (a pointer copy under the lock).
    pub fn snapshot(&self) -> Arc<FeatureSnapshot> {
        self.snapshot.get()
    }
    /// Replaces the snapshot (ingest, after a batch); readers holding the old one keep it.
    pub fn publish(&self, snapshot: FeatureSnapshot) {
        self.snapshot.publish(snapshot)
    }
}

impl Named for FeatureStreamHandle {
    fn name(&self) -> &str {
        &self.config.name
    }
    fn topic(&self) -> &str {
        &self.topic
    }
}

/// All feature streams of the service, by name.
pub type FeatureStreams = Registry<FeatureStreamHandle>;
