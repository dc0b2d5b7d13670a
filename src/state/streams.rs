//! The live state of every declared stream, shared by ingest (the one writer) and the HTTP API
//! (many readers).
//!
//! Ingest owns the working statistics and, after each folded batch, publishes an immutable
//! `Snapshot` (`published::Published`); readers extract from their copy for as long as they
//! like, so a slow extraction never blocks ingest and ingest never blocks a reader.

use crate::config::StreamConfig;
use crate::state::published::{Named, Published, Registry};
use ravel_core::Task;
use ravel_core::fields::Fields;
pub use ravel_core::stats::{FoldSet, Stats, Windows};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::SystemTime;

/// What readers see: the statistics after the last folded batch.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub stats: Stats,
    /// When the last batch was folded in (None: no row yet since the service started and no
    /// checkpoint said otherwise).
    pub last_update: Option<SystemTime>,
    /// Kafka timestamp (Unix ms) of the newest message whose rows are in `stats`, never later
    /// than the fold that took it in (None: no timestamped message yet; checkpoints written
    /// before it was kept).
    pub as_of_ms: Option<u64>,
    /// With the `kafka` state store, the partitions merged into `stats` (empty otherwise).
    pub parts: Vec<PartInfo>,
    /// The cross-validation folds beside `stats` (`cv.folds`; None without).
    pub folds: Option<FoldSet>,
    /// The statistics per time bucket (`windows`; empty without): the `dir` store's one set,
    /// or with the `kafka` store one set a partition (each partition keeps its own buckets,
    /// merged per request by `Windows::span_with`). Buckets are shared with ingest's working
    /// copy until a fold changes them.
    pub windows: Vec<Windows>,
    /// Partition -> the next offset of the stream's topic whose rows are not in `stats`
    /// (every row of a lower offset is in, or its message held none): what a scorer of the
    /// stream's own topic reads to tell a model of the rows before an event from one that
    /// holds it. Empty before the first message.
    pub positions: BTreeMap<i32, i64>,
}

impl Snapshot {
    /// A snapshot of statistics that are not split by partition.
    pub fn whole(stats: Stats, last_update: Option<SystemTime>, as_of_ms: Option<u64>) -> Snapshot {
        Snapshot {
            stats,
            last_update,
            as_of_ms,
            parts: Vec::new(),
            folds: None,
            windows: Vec::new(),
            positions: BTreeMap::new(),
        }
    }
    /// This snapshot with the topic's positions `positions` (`Snapshot::positions`).
    pub fn with_positions(mut self, positions: BTreeMap<i32, i64>) -> Snapshot {
        self.positions = positions;
        self
    }
    /// This snapshot with the time buckets `windows`.
    pub fn with_windows(mut self, windows: Vec<Windows>) -> Snapshot {
        self.windows = windows;
        self
    }
    /// This snapshot with the folds `folds`.
    pub fn with_folds(mut self, folds: Option<FoldSet>) -> Snapshot {
        self.folds = folds;
        self
    }
}

/// One partition merged into a stream's view (`kafka` state store).
#[derive(Debug, Clone, PartialEq)]
pub struct PartInfo {
    pub partition: i32,
    /// Rows of the partition in the view.
    pub n: u64,
    /// `live`: folded here; `changelog`: the latest state another replica published.
    pub source: &'static str,
    pub last_update: Option<SystemTime>,
    /// The newest message's Kafka timestamp in this partition's statistics (Unix ms).
    pub as_of_ms: Option<u64>,
    /// Who wrote the state (`changelog` parts).
    pub writer: Option<String>,
}

/// One declared stream: its configuration and its current snapshot.
#[derive(Debug)]
pub struct StreamHandle {
    pub config: StreamConfig,
    pub topic: String,
    /// How its messages are decoded (its declared fields, target and schema'd wire).
    pub codec: crate::codec::Decoder,
    snapshot: Published<Snapshot>,
    /// Snapshots of the default model over time (`history`).
    pub history: crate::state::history::History,
    /// The live prequential quality (`quality`; None when off).
    pub quality: Option<crate::state::quality::LiveQuality>,
    /// Which declared fields and target the first events carried (`sightings`; None: a
    /// stream declared by count, or before `sample_fields`).
    pub sightings: Option<crate::state::sightings::Sightings>,
    /// Messages read and refused since the start, and their dead-letter copies (`arrivals`).
    pub arrivals: std::sync::Arc<crate::state::arrivals::Arrivals>,
    /// The stream's time buckets (`windows`; None: it keeps none).
    pub window_spec: Option<ravel_core::stats::WindowSpec>,
    /// Where it starts when never read (`start`, checked).
    pub start: crate::config::StartAt,
    /// Set when the stream is retired or replaced over the API (`crate::declared`): its
    /// history recorder stops.
    retired: std::sync::atomic::AtomicBool,
    /// Which declaration of its name this is (`crate::declared`; 0: the config file's): with
    /// the kafka store only the states written under it are restored.
    pub epoch: u64,
}

impl StreamHandle {
    pub fn new(
        config: StreamConfig,
        initial: Snapshot,
        history: crate::config::history::HistorySpec,
    ) -> anyhow::Result<Self> {
        let codec = crate::codec::Decoder::of_stream(&config)?;
        let quality = crate::config::quality::of_stream(&config, &history)?
            .map(crate::state::quality::LiveQuality::new);
        Ok(StreamHandle {
            codec,
            window_spec: config.window_spec()?,
            start: config.start_at()?,
            retired: Default::default(),
            epoch: 0,
            sightings: None,
            arrivals: Default::default(),
            quality,
            topic: config.topic(),
            config,
            snapshot: Published::new(initial),
            history: crate::state::history::History::new(history),
        })
    }
    pub fn name(&self) -> &str {
        &self.config.name
    }
    /// Marks the stream retired (`crate::declared`): no longer in the registry.
    pub fn retire(&self) {
        self.retired
            .store(true, std::sync::atomic::Ordering::SeqCst);
    }
    /// Whether the stream was retired or replaced.
    pub fn is_retired(&self) -> bool {
        self.retired.load(std::sync::atomic::Ordering::SeqCst)
    }
    /// Counts which declared fields and target the first `events` events carry (streams
    /// declared with names).
    pub fn sample_fields(&mut self, events: u64) {
        self.sightings = self.codec.fields.as_ref().map(|f| {
            crate::state::sightings::Sightings::new(
                f.fields().iter().map(|f| f.name.clone()).collect(),
                self.config.target.clone(),
                events,
            )
        });
    }
    /// Columns: the declared fields' (counted once, as every message asks), else the count.
    pub fn p(&self) -> usize {
        self.codec.p
    }
    pub fn task(&self) -> Task {
        self.config.task
    }
    /// The columns' names (None: declared by count, columns named by index).
    pub fn names(&self) -> Option<&[String]> {
        self.codec.fields.as_ref().map(Fields::columns)
    }
    /// K of `cv.folds` (0: none; checked at start) and how rows are assigned.
    pub fn folds(&self) -> (usize, crate::config::FoldBy) {
        let cv = self.config.cv.as_ref();
        (
            cv.map_or(0, |c| c.folds),
            cv.map_or(Default::default(), |c| c.fold_by),
        )
    }
    /// The current snapshot (a pointer copy under the lock).
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.snapshot.get()
    }
    /// Replaces the snapshot; readers holding the old one keep it.
    pub fn publish(&self, snapshot: Snapshot) {
        self.snapshot.publish(snapshot)
    }
}

impl Named for StreamHandle {
    fn name(&self) -> &str {
        &self.config.name
    }
    fn topic(&self) -> &str {
        &self.topic
    }
}

/// All streams of the service, by name (sorted, so listings are stable).
pub type Streams = Registry<StreamHandle>;
