//! The live state of every declared stream, shared by ingest (the one writer) and the HTTP API
//! (many readers).
//!
//! Ingest owns the working statistics and, after each folded batch, publishes an immutable
//! `Snapshot` behind an `Arc`; readers clone the `Arc` under a lock held for a pointer copy and
//! then extract from it for as long as they like. So a slow extraction never blocks ingest and
//! ingest never blocks a reader (STYLE.md: "a reader never blocks the writer").

use crate::config::StreamConfig;
use ravel_core::Task;
pub use ravel_core::stats::Stats;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, RwLock};
use std::time::SystemTime;

/// What readers see: the statistics after the last folded batch.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub stats: Stats,
    /// When the last batch was folded in (None: no row yet since the service started and no
    /// checkpoint said otherwise).
    pub last_update: Option<SystemTime>,
}

/// One declared stream: its configuration and its current snapshot.
#[derive(Debug)]
pub struct StreamHandle {
    pub config: StreamConfig,
    pub topic: String,
    /// Feature name -> column, for JSON named rows.
    pub index: Option<HashMap<String, usize>>,
    snapshot: RwLock<Arc<Snapshot>>,
}

impl StreamHandle {
    pub fn new(config: StreamConfig, initial: Snapshot) -> anyhow::Result<Self> {
        let index = config
            .names()
            .map(|n| n.iter().enumerate().map(|(i, s)| (s.clone(), i)).collect());
        Ok(StreamHandle {
            topic: config.topic(),
            index,
            config,
            snapshot: RwLock::new(Arc::new(initial)),
        })
    }
    pub fn name(&self) -> &str {
        &self.config.name
    }
    pub fn p(&self) -> usize {
        self.config.p()
    }
    pub fn task(&self) -> Task {
        self.config.task
    }
    pub fn names(&self) -> Option<&[String]> {
        self.config.names()
    }
    /// The current snapshot (a pointer copy under the lock).
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.snapshot
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
    /// Replaces the snapshot; readers holding the old one keep it.
    pub fn publish(&self, snapshot: Snapshot) {
        *self.snapshot.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(snapshot);
    }
}

/// All streams of the service, by name (sorted, so listings are stable).
#[derive(Debug, Default)]
pub struct Streams {
    by_name: BTreeMap<String, Arc<StreamHandle>>,
}

impl Streams {
    pub fn new(handles: Vec<StreamHandle>) -> Self {
        Streams {
            by_name: handles
                .into_iter()
                .map(|h| (h.name().to_string(), Arc::new(h)))
                .collect(),
        }
    }
    pub fn get(&self, name: &str) -> Option<&Arc<StreamHandle>> {
        self.by_name.get(name)
    }
    pub fn iter(&self) -> impl Iterator<Item = &Arc<StreamHandle>> {
        self.by_name.values()
    }
    pub fn by_topic(&self, topic: &str) -> Option<&Arc<StreamHandle>> {
        self.by_name.values().find(|h| h.topic == topic)
    }
    pub fn topics(&self) -> Vec<String> {
        self.by_name.values().map(|h| h.topic.clone()).collect()
    }
}
