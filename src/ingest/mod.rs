//! Ingest: Kafka messages -> decode/validate -> `RunningStats` -> snapshot for readers, with
//! checkpoints and offset commits that never count a row twice.
//!
//! One consumer (one consumer group per service) reads every stream's topic on a dedicated
//! thread: folding a batch is CPU-bound, so it stays off the async runtime that serves HTTP.
//! The loop gathers a batch (what the consumer has buffered once a first message arrived, up
//! to `ingest.max_batch_rows` rows or `ingest.max_batch_wait_ms`: `gather`), folds each
//! stream's rows with one `update_batch`, publishes the new snapshot, and every
//! `state.checkpoint_interval_ms` writes checkpoints and then commits their offsets.
//!
//! Positions (`positions`): per partition, the next offset whose row is not yet in the
//! statistics. They start from the checkpoints and move with every message read (good or
//! bad); on (re)assignment the rebalance callback starts each partition there, or at the
//! beginning of the topic when no row of it was ever applied, so the statistics always cover
//! exactly the rows before the positions. Kafka's committed offsets trail the last durable
//! checkpoint (`commit`).
//!
//! Feature streams (`features`) share the consumer: their messages are applied to the
//! selection as they are read (each is a whole column, O(n s) work), and after each batch
//! every changed feature stream publishes its snapshot. They have no checkpoint and no
//! committed offsets: their partitions start at the beginning of the topic at every start
//! (and, after a rebalance within one run, where this process stopped reading them).
//!
//! This file is the loop itself (the order of gather / fold / publish / checkpoint / commit);
//! its clients come from `crate::kafka`. The folder is laid out by stage:
//!
//! - the loop's own steps. `Ingest` is the loop's one state (the consumer, every stream's
//!   `StreamIngest`, the positions, the store, the dead-letter fence) and each step reads and
//!   changes much of it, so a step is an `impl Ingest` in the file of its concern, one block
//!   a file: this file (the loop: `run`, fold, publish, the queued changes), `setup`
//!   (`Ingest::new`), `gather` (a batch, JSON decoded ahead on the `ahead` threads), `accept`
//!   (one message: fold or reject, the retention check, releasing held partitions),
//!   `commit_loop` (checkpoints, then commits), `resubscribe` (streams declared or retired
//!   between batches, and where a declared one starts), `denied` (consumer errors and
//!   authorization, for both `gather`'s polls and `commit_loop`'s commits) and `join_watch`
//!   (a member left unassigned). The other files hold no `impl Ingest`:
//!   `rebalance` (the consumer's context: assignment), `start` (where a never-read stream
//!   starts: functions of a consumer, for `setup` and `resubscribe`) and `lag`;
//! - folding: `fold` (rows into statistics; `windows`, rows into a stream's time buckets;
//!   `cv`, which cross-validation fold a row goes to, `cv.folds`; `restore`, a partition's
//!   saved state on assignment), `freshness` (each message's age once its rows are visible),
//!   `features` (feature-stream columns into the selection);
//! - `checkpoints/`: `positions`, `persist` (checkpoint assembly, loading), `commit` (which
//!   offsets may be committed).
//!
//! Decoding is `crate::codec`'s and dead letters are `crate::dead_letters`' (counted, logged
//! at a bounded rate, copied); the loop calls both.
//!
//! The scorers (`crate::score`) are not part of the loop: each is a thread of its own that
//! reads events through a stream's decoding and predicts them with a model of its snapshot.
//!
//! Dead letters never stall the loop: a rejected message's copy goes to the dead-letter thread
//! and its partition goes on at once. With `dlq.on_failure = "block"` the checkpoints (and so
//! the commits) wait until the copies they cover are acknowledged (`held`, `persist`), so a
//! crash never loses a bad message: the restart reads it again from the last checkpoint before
//! it and sends its copy again.

mod accept;
pub mod ahead;
pub mod checkpoints;
mod commit_loop;
mod denied;
pub mod features;
pub mod fold;
pub mod freshness;
mod gather;
mod join_watch;
pub mod lag;
pub mod rebalance;
mod resubscribe;
mod setup;
mod start;

pub use crate::kafka::KafkaClients;

/// Asks the cluster with short timeouts until it answers, 10 s pass or shutdown is triggered:
/// the start-up requests (cluster id, watermarks, partition counts) to an unreachable cluster
/// must not hold a SIGTERM for their whole timeout each (it took 27 s with one stream).
fn patiently<T>(shutdown: &Shutdown, mut ask: impl FnMut(Duration) -> Option<T>) -> Option<T> {
    const TOTAL: Duration = Duration::from_secs(10);
    let start = Instant::now();
    loop {
        let attempt = Instant::now();
        let left = TOTAL.saturating_sub(start.elapsed());
        if let Some(v) = ask(left.min(Duration::from_millis(500))) {
            return Some(v);
        }
        if shutdown.is_triggered() || start.elapsed() >= TOTAL {
            return None;
        }
        // A refused connection fails at once: do not spin.
        if attempt.elapsed() < Duration::from_millis(100) {
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}
pub use checkpoints::persist::load_checkpoints;
pub use checkpoints::positions::Positions;

use crate::config::{DlqConfig, IngestConfig, StateConfig};
use crate::dead_letters::dlq::DeadLetters;
use crate::health::Health;
use crate::metrics::Metrics;
use crate::shutdown::Shutdown;
use crate::state::feature_streams::FeatureStreams;
use crate::state::streams::Streams;
use crate::store::kafka::{StateReader, StateWriter};
use anyhow::{Context, bail};
use checkpoints::positions::Restored as Checked;
use features::FeatureIngest;
use fold::StreamIngest;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rebalance::{Change, IngestContext};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Everything the ingest thread needs.
pub struct IngestSetup {
    /// The brokers, the group and the user's options of every Kafka client.
    pub clients: KafkaClients,
    pub ingest: IngestConfig,
    pub dlq: DlqConfig,
    pub state: StateConfig,
    pub streams: Arc<Streams>,
    pub feature_streams: Arc<FeatureStreams>,
    /// Positions loaded from the checkpoints.
    pub positions: Positions,
    /// Cluster id the checkpoints were written against (must match the broker's).
    pub checkpoint_clusters: BTreeMap<String, Option<String>>,
    /// The loaded checkpoints' bucket files (`checkpoints::persist::BucketFiles`).
    pub bucket_files: checkpoints::persist::BucketFiles,
    pub metrics: Arc<Metrics>,
    /// Set once every stream topic has at least one assigned partition.
    pub ready: Arc<AtomicBool>,
    /// Held partitions are reported here.
    pub health: Arc<Health>,
    /// The `kafka` state store's reader (`state.store = "kafka"`), started by the server.
    pub state_reader: Option<Arc<StateReader>>,
    /// `kafka.assignment`.
    pub assignment: crate::config::Assignment,
    /// Streams declared or retired over the API (`crate::declared`), applied between batches.
    pub declarations: Option<Arc<crate::declared::Queue>>,
    pub shutdown: Shutdown,
}

/// How often a standalone consumer looks for new partitions and topics.
const DISCOVER_EVERY: Duration = Duration::from_secs(10);

/// Where the statistics are saved at every checkpoint interval.
enum Store {
    /// Nothing: the offsets are committed as they are.
    None,
    /// `state.dir`: one checkpoint per stream, written on the writer's thread.
    Dir(checkpoints::persist::CheckpointWriter),
    /// The state topic: one record per partition.
    Kafka {
        writer: StateWriter,
        reader: Arc<StateReader>,
    },
}

/// Starts the ingest thread; it returns when shutdown is triggered (after a last checkpoint
/// and commit) or on a fatal error.
pub fn spawn(setup: IngestSetup) -> anyhow::Result<std::thread::JoinHandle<anyhow::Result<()>>> {
    // The streams as they are now, before the API can declare or retire one: later changes
    // come through `declarations` only (a stream in both would be read twice).
    let initial: Vec<_> = setup.streams.iter().collect();
    std::thread::Builder::new()
        .name("ravel-ingest".into())
        .spawn(move || {
            let r = Ingest::new(setup, initial).and_then(|mut i| i.run());
            if let Err(e) = &r {
                tracing::error!(error = %format!("{e:#}"), "ingest stopped");
            }
            r
        })
        .context("cannot start the ingest thread")
}

/// Payload bytes read ahead of the message being accepted (`Ingest::gather`): the JSON
/// messages among them are being decoded on the `ahead` threads meanwhile.
const WINDOW_BYTES: usize = 1 << 20;
/// Smaller JSON messages are decoded on the ingest thread (handing one to another thread costs
/// about as much as decoding it).
const AHEAD_MIN_BYTES: usize = 1 << 10;

/// A message decoded on an `ahead` thread.
enum Early {
    Rows(crate::codec::decoder::Decoded),
    Feature(Result<crate::codec::feature_format::FeatureMessage, crate::reason::Rejection>),
}

/// Where a topic's messages go.
#[derive(Clone, Copy)]
enum Target {
    Rows(usize),
    Features(usize),
}

struct Ingest {
    /// Shared so that a polled message (which borrows the consumer) can be handled by `&mut
    /// self` methods.
    consumer: Arc<BaseConsumer<IngestContext>>,
    dead_letters: Option<DeadLetters>,
    /// Whether a partition waits for its rejected message's copy (`dlq.on_failure`).
    block: bool,
    held: crate::dead_letters::held::Held,
    /// Whether the health report lists held partitions now.
    health_shows_held: bool,
    health: Arc<Health>,
    group: String,
    streams: Vec<StreamIngest>,
    features: Vec<FeatureIngest>,
    by_topic: HashMap<String, Target>,
    positions: Arc<Mutex<Positions>>,
    /// What Kafka last accepted as committed.
    committed: HashMap<checkpoints::commit::Partition, i64>,
    cluster_id: Option<String>,
    store: Store,
    /// This process, as the state records name their writer.
    writer_name: String,
    checkpoint_interval: Duration,
    max_rows: usize,
    max_wait: Duration,
    metrics: Arc<Metrics>,
    shutdown: Shutdown,
    last_poll_error: Option<Instant>,
    /// How many threads decode JSON messages while a batch is gathered (`ahead`).
    ahead_threads: usize,
    /// When the feature streams last published.
    features_published: Instant,
    /// Standalone assignment (`kafka.assignment`): this instance's name in its commits and
    /// the watch for a second one. None: the group protocol.
    standalone: Option<crate::kafka::standalone::Standalone>,
    /// When a standalone consumer last looked for new partitions.
    discovered: Instant,
    /// Streams declared or retired over the API (`resubscribe`).
    declarations: Option<Arc<crate::declared::Queue>>,
    /// `state.dir`: where a retired stream's checkpoint is deleted (`?state=drop`).
    state_dir: Option<std::path::PathBuf>,
    /// A stream or a partition starts at its topic's end (`start = "latest"`): that position
    /// is saved at the loop's next turn (before the first batch, at the service's start).
    checkpoint_due: bool,
    /// Since when this group member has had no partitions, once reported (`join_watch`).
    unassigned_reported: Option<Instant>,
}

impl Ingest {
    fn run(&mut self) -> anyhow::Result<()> {
        let mut last_checkpoint = Instant::now();
        // The decoding threads borrow the messages, which borrow `consumer`: they live in
        // this scope, and `ahead` ends (joins them) before the loop returns.
        let consumer = self.consumer.clone();
        let threads = self.ahead_threads;
        std::thread::scope(|scope| -> anyhow::Result<()> {
            let mut ahead = ahead::Ahead::new(scope, "ravel-decode", threads);
            if std::mem::take(&mut self.checkpoint_due) {
                self.checkpoint_and_commit(CommitMode::Sync);
            }
            while !self.shutdown.is_triggered() {
                self.apply_declarations()?;
                self.watch_join();
                if self.gather(&consumer, &mut ahead)? > 0
                    || matches!(self.store, Store::Kafka { .. })
                {
                    // With the kafka store, also when only the others' states changed.
                    self.fold()?;
                }
                self.publish_features()?;
                self.dead_letter_outcomes();
                if let Store::Dir(w) = &mut self.store {
                    w.release(&self.held);
                }
                if std::mem::take(&mut self.checkpoint_due) {
                    self.checkpoint_and_commit(CommitMode::Sync);
                    last_checkpoint = Instant::now();
                } else if last_checkpoint.elapsed() >= self.checkpoint_interval {
                    self.checkpoint_and_commit(CommitMode::Async);
                    last_checkpoint = Instant::now();
                }
                if self.standalone.is_some() && self.discovered.elapsed() >= DISCOVER_EVERY {
                    self.consumer
                        .context()
                        .assign_standalone(&self.consumer, Duration::from_secs(1));
                    self.discovered = Instant::now();
                }
            }
            Ok(())
        })?;
        // Stop consuming: nothing is gathered any more; save what was applied and commit it.
        tracing::info!("ingest stopping: last checkpoint and commit");
        self.fold()?;
        self.await_copies(Duration::from_secs(3));
        self.checkpoint_and_commit(CommitMode::Sync);
        Ok(())
    }

    /// Publishes the feature streams that changed if `features::PUBLISH_EVERY` passed since
    /// they last did (within a batch; `run` publishes after each). A stream that cannot go on
    /// is marked failed; `publish_features` then stops ingest.
    pub(super) fn publish_features_due(&mut self) {
        if self.features.is_empty() || self.features_published.elapsed() < features::PUBLISH_EVERY {
            return;
        }
        self.features_published = Instant::now();
        for f in &mut self.features {
            if f.failed.is_none()
                && let Err(e) = f.live.publish(&self.metrics)
            {
                f.failed = Some(e.to_string());
            }
        }
    }

    /// Publishes the snapshot of every feature stream that changed; an error if one cannot
    /// go on.
    fn publish_features(&mut self) -> anyhow::Result<()> {
        self.features_published = Instant::now();
        for f in &mut self.features {
            if let Some(e) = &f.failed {
                bail!("feature stream '{}' stopped: {e}", f.live.handle.name());
            }
            f.live
                .publish(&self.metrics)
                .with_context(|| format!("feature stream '{}' stopped", f.live.handle.name()))?;
        }
        Ok(())
    }

    /// Folds each stream's pending rows in one batch update and publishes the view (also
    /// when only the others' states changed).
    fn fold(&mut self) -> anyhow::Result<()> {
        let remote = match &self.store {
            Store::Kafka { reader, .. } => Some(reader.as_ref()),
            _ => None,
        };
        let positions = crate::lock(&self.positions);
        for s in &mut self.streams {
            s.fold(&self.metrics, remote, positions.get(&s.handle.topic))?;
        }
        Ok(())
    }

    /// Applies the partitions that came or went in a rebalance (`kafka` store) to the
    /// statistics: restored ones are installed, revoked ones dropped with their pending rows.
    /// One that starts at its end is saved at the loop's next checkpoint, due at once; one
    /// that could not be positioned stops the ingest.
    fn apply_changes(&mut self) -> anyhow::Result<()> {
        for change in self.consumer.context().take_changes() {
            // (topic, partition, the assigned one's state and whether it starts at its end)
            let (topic, partition, assigned) = match change {
                Change::Assigned {
                    topic,
                    partition,
                    state,
                    at_end,
                } => (topic, partition, Some((state, at_end))),
                Change::Revoked { topic, partition } => (topic, partition, None),
                Change::Unpositioned(why) => bail!("{why}"),
            };
            let Some(&Target::Rows(i)) = self.by_topic.get(&topic) else {
                continue;
            };
            match assigned {
                Some((state, at_end)) => {
                    self.streams[i].install(partition, state.as_deref());
                    if at_end {
                        self.streams[i].touch(partition);
                        self.checkpoint_due = true;
                    }
                }
                None => self.streams[i].remove(partition),
            }
            // The view changes even if no row comes.
            self.streams[i].remote_version = u64::MAX;
        }
        Ok(())
    }
}
