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
//! This file is the loop itself (set-up, gather, the order of fold / publish / checkpoint /
//! commit); its clients come from `crate::kafka`. The rest, by concern: `rebalance`
//! (assignment), `positions`, `lag`, `fold` (rows into statistics), `cv` (which
//! cross-validation fold a row goes to, `cv.folds`), `checkpoints` (assembly,
//! loading), `commit` (which offsets may be committed), `features` (feature-stream dispatch),
//! `rejections` (counted, logged, dead-lettered), `format` and `feature_format` (message
//! formats; `fast_json` their JSON fast path), `dlq` (dead-letter producer, on its own
//! thread), `held` (partitions waiting at a rejected message until its dead-letter copy is
//! delivered), `ahead` (threads that decode JSON messages, borrowed, while the loop goes
//! on).
//!
//! Dead letters never stall the loop: a rejected message's copy goes to the dead-letter thread
//! and, with `dlq.on_failure = "block"`, only its own partition waits (paused, its position at
//! the message, so no checkpoint or commit passes it) until the copy is delivered.

pub mod ahead;
pub mod checkpoints;
pub mod commit;
pub mod cv;
pub mod dlq;
pub(crate) mod fast_json;
pub mod feature_format;
pub mod features;
pub mod fold;
pub mod format;
pub mod held;
pub mod lag;
pub mod positions;
pub mod rebalance;
pub mod rejections;

pub use crate::kafka::{KafkaClients, client_config};
pub(crate) use crate::lock;

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
pub use checkpoints::{Restored, load_checkpoints};
pub use positions::Positions;

use crate::config::{DlqConfig, IngestConfig, OnFailure, StateConfig};
use crate::feature_streams::FeatureStreams;
use crate::health::Health;
use crate::metrics::Metrics;
use crate::shutdown::Shutdown;
use crate::state_store::{PartitionState, StateReader, StateWriter};
use crate::streams::Streams;
use anyhow::{Context, bail};
use dlq::DeadLetters;
use features::FeatureIngest;
use fold::StreamIngest;
use positions::Restored as Checked;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::{BorrowedMessage, Message};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use rebalance::{Change, IngestContext, Restore};
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
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
    pub metrics: Arc<Metrics>,
    /// Set once every stream topic has at least one assigned partition.
    pub ready: Arc<AtomicBool>,
    /// Held partitions are reported here.
    pub health: Arc<Health>,
    /// The `kafka` state store's reader (`state.store = "kafka"`), started by the server.
    pub state_reader: Option<Arc<StateReader>>,
    pub shutdown: Shutdown,
}

/// Where the statistics are saved at every checkpoint interval.
enum Store {
    /// Nothing: the offsets are committed as they are.
    None,
    /// `state.dir`: one checkpoint per stream, written on the writer's thread.
    Dir(checkpoints::CheckpointWriter),
    /// The state topic: one record per partition.
    Kafka {
        writer: StateWriter,
        reader: Arc<StateReader>,
    },
}

/// Starts the ingest thread; it returns when shutdown is triggered (after a last checkpoint
/// and commit) or on a fatal error.
pub fn spawn(setup: IngestSetup) -> anyhow::Result<std::thread::JoinHandle<anyhow::Result<()>>> {
    std::thread::Builder::new()
        .name("ravel-ingest".into())
        .spawn(move || {
            let r = Ingest::new(setup).and_then(|mut i| i.run());
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
    Rows(fold::Decoded),
    Feature(Result<feature_format::FeatureMessage, format::Rejection>),
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
    held: held::Held,
    health: Arc<Health>,
    group: String,
    streams: Vec<StreamIngest>,
    features: Vec<FeatureIngest>,
    by_topic: HashMap<String, Target>,
    positions: Arc<Mutex<Positions>>,
    /// What Kafka last accepted as committed.
    committed: HashMap<commit::Partition, i64>,
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
}

impl Ingest {
    fn new(setup: IngestSetup) -> anyhow::Result<Ingest> {
        let mut topics = setup.streams.topics();
        topics.extend(setup.feature_streams.topics());
        let positions = Arc::new(Mutex::new(setup.positions));
        let restore = setup.state_reader.clone().map(|reader| Restore {
            reader,
            streams: setup
                .streams
                .iter()
                .map(|h| (h.topic.clone(), h.name().to_string()))
                .collect(),
        });
        let context = IngestContext::new(
            positions.clone(),
            topics.clone(),
            setup.ready.clone(),
            setup.metrics.clone(),
            setup.health.clone(),
            restore,
        );
        let brokers = setup.clients.brokers();
        let consumer: BaseConsumer<IngestContext> = setup
            .clients
            .consumer(setup.ingest.lag_interval_ms)
            .create_with_context(context)
            .map_err(|e| {
                anyhow::anyhow!(
                    "cannot create the Kafka consumer: {}",
                    setup.clients.scrub(&e.to_string())
                )
            })?;

        let shutdown = &setup.shutdown;
        let cluster_id = patiently(shutdown, |t| consumer.client().fetch_cluster_id(t));
        match &cluster_id {
            Some(id) => {
                tracing::info!(cluster_id = %id, brokers = %brokers, "connected to Kafka")
            }
            None => {
                tracing::warn!(brokers = %brokers, "Kafka did not report a cluster id (is it reachable?)")
            }
        }
        // A checkpoint only makes sense against the log it was read from.
        for (stream, cp_cluster) in &setup.checkpoint_clusters {
            if let (Some(have), Some(want)) = (&cluster_id, cp_cluster)
                && have != want
            {
                bail!(
                    "the checkpoint of stream '{stream}' was written against Kafka cluster {want}, but {brokers} is cluster {have}; \
                     move the state directory away to start from the beginning of the topics"
                );
            }
        }
        {
            let positions = lock(&positions);
            for (topic, parts) in positions.iter() {
                for (&p, &next) in parts {
                    let watermarks =
                        patiently(shutdown, |t| consumer.fetch_watermarks(topic, p, t).ok());
                    match watermarks.ok_or("no answer from the cluster") {
                        Ok((low, high)) => match positions::check(next, low, high) {
                            Checked::PastEnd => bail!(
                                "checkpoint says partition {topic}/{p} was read up to offset {next}, but the topic ends at {high}: \
                                 it belongs to another incarnation of the topic; move the state directory away to start afresh"
                            ),
                            Checked::Deleted => tracing::warn!(
                                topic = %topic, partition = p, next, low,
                                "offsets {next}..{low} were deleted by retention before they were read"
                            ),
                            Checked::Valid => {}
                        },
                        Err(e) => {
                            tracing::warn!(topic = %topic, partition = p, error = %e, "cannot check the checkpoint against the topic")
                        }
                    }
                }
            }
        }

        let dead_letters = if setup.ingest.dead_letter {
            Some(
                DeadLetters::start(
                    &setup.clients.dead_letters(),
                    &setup.dlq,
                    setup.metrics.clone(),
                )
                .map_err(|e| anyhow::anyhow!(setup.clients.scrub(&format!("{e:#}"))))?,
            )
        } else {
            None
        };
        let topic_refs: Vec<&str> = topics.iter().map(String::as_str).collect();
        consumer
            .subscribe(&topic_refs)
            .with_context(|| format!("cannot subscribe to {topics:?}"))?;
        tracing::info!(topics = ?topics, group = %setup.clients.group(), "subscribed");
        // How many partitions each topic has: ready needs all of them (rebalance.rs).
        let mut totals = std::collections::BTreeMap::new();
        for topic in &topics {
            if let Some(md) = patiently(shutdown, |t| consumer.fetch_metadata(Some(topic), t).ok())
                && let Some(t) = md.topics().first()
                && !t.partitions().is_empty()
            {
                totals.insert(topic.clone(), t.partitions().len());
            }
        }
        consumer.context().set_totals(totals);
        // Labels must come before features and passes keep their order: one partition.
        for topic in setup.feature_streams.topics() {
            if let Ok(md) = consumer.fetch_metadata(Some(&topic), Duration::from_secs(10))
                && let Some(t) = md.topics().first()
                && t.partitions().len() > 1
            {
                tracing::warn!(
                    topic = %topic, partitions = t.partitions().len(),
                    "feature-stream topic has several partitions: the order of labels and features across them is not kept; use one partition"
                );
            }
        }

        let store = match (&setup.state_reader, setup.state.dir()) {
            (Some(reader), _) => {
                let topic = setup
                    .state
                    .kafka_topic(setup.clients.group())
                    .context("a state reader without the kafka store")?;
                let writer = StateWriter::new(
                    &setup.clients,
                    &topic,
                    setup.state.max_record_bytes,
                    Duration::from_secs(30),
                )?;
                // The others' partitions are in the view before the first row is read.
                if let Err(e) = reader.catch_up(Duration::from_secs(60)) {
                    tracing::warn!(error = %format!("{e:#}"), "state topic not read to its end at start");
                }
                Store::Kafka {
                    writer,
                    reader: reader.clone(),
                }
            }
            (None, Some(dir)) => Store::Dir(checkpoints::CheckpointWriter::start(
                dir,
                setup.metrics.clone(),
            )?),
            (None, None) => Store::None,
        };
        let mut streams = Vec::new();
        let mut by_topic = HashMap::new();
        for handle in setup.streams.iter() {
            by_topic.insert(handle.topic.clone(), Target::Rows(streams.len()));
            let mut s = StreamIngest::new(handle.clone(), setup.state_reader.is_some());
            if let Some(r) = &setup.state_reader {
                s.fold(&setup.metrics, Some(r))?;
            }
            streams.push(s);
        }
        let mut features = Vec::new();
        for handle in setup.feature_streams.iter() {
            by_topic.insert(handle.topic.clone(), Target::Features(features.len()));
            features.push(FeatureIngest::new(handle.clone()));
        }
        Ok(Ingest {
            consumer: Arc::new(consumer),
            dead_letters,
            block: setup.dlq.on_failure == OnFailure::Block,
            held: held::Held::default(),
            health: setup.health,
            group: setup.clients.group().to_string(),
            streams,
            features,
            by_topic,
            positions,
            // Empty: the first cycle commits the restored positions too, in case a crash left
            // Kafka's offsets behind the checkpoint (lag tools read the committed offsets).
            committed: HashMap::new(),
            cluster_id,
            store,
            writer_name: crate::state_store::writer_name(),
            checkpoint_interval: Duration::from_millis(setup.state.checkpoint_interval_ms),
            max_rows: setup.ingest.max_batch_rows,
            max_wait: Duration::from_millis(setup.ingest.max_batch_wait_ms),
            metrics: setup.metrics,
            shutdown: setup.shutdown,
            last_poll_error: None,
            ahead_threads: std::thread::available_parallelism().map_or(2, |n| n.get().clamp(1, 4)),
            features_published: Instant::now(),
        })
    }

    fn run(&mut self) -> anyhow::Result<()> {
        let mut last_checkpoint = Instant::now();
        // The decoding threads borrow the messages, which borrow `consumer`: they live in
        // this scope, and `ahead` ends (joins them) before the loop returns.
        let consumer = self.consumer.clone();
        let threads = self.ahead_threads;
        std::thread::scope(|scope| -> anyhow::Result<()> {
            let mut ahead = ahead::Ahead::new(scope, "ravel-decode", threads);
            while !self.shutdown.is_triggered() {
                if self.gather(&consumer, &mut ahead) > 0
                    || matches!(self.store, Store::Kafka { .. })
                {
                    // With the kafka store, also when only the others' states changed.
                    self.fold()?;
                }
                self.publish_features()?;
                self.dead_letter_outcomes();
                if last_checkpoint.elapsed() >= self.checkpoint_interval {
                    self.checkpoint_and_commit(CommitMode::Async);
                    last_checkpoint = Instant::now();
                }
            }
            Ok(())
        })?;
        // Stop consuming: nothing is gathered any more; save what was applied and commit it.
        tracing::info!("ingest stopping: last checkpoint and commit");
        self.fold()?;
        self.checkpoint_and_commit(CommitMode::Sync);
        Ok(())
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

    /// Reads one batch: waits up to 100 ms for a first message (so shutdown, checkpoints and
    /// snapshots are never late), then takes what the consumer has already buffered without
    /// waiting, and ends the batch as soon as nothing more is: a row of a quiet stream is
    /// folded at once instead of waiting for a batch that will not fill, and under load the
    /// batch grows by itself (messages keep arriving while the previous batch folds).
    /// `max_rows` rows (or feature-stream messages) and `max_wait` since the first message
    /// end it; the messages still in the window (at most `WINDOW_BYTES` of payload) join it,
    /// so a batch can pass `max_rows` by that much and by the last message's rows (a
    /// message's rows are never split). Returns the rows gathered.
    ///
    /// Messages are accepted in the order read, each once `WINDOW_BYTES` of payload were read
    /// after it (or the batch ends): meanwhile the JSON ones are decoded on the `ahead`
    /// threads, so parsing overlaps polling, accepting and applying feature columns, on every
    /// core. Feature streams publish every `features::PUBLISH_EVERY` within a batch.
    fn gather<'scope, 'c: 'scope>(
        &mut self,
        consumer: &'c BaseConsumer<IngestContext>,
        ahead: &mut ahead::Ahead<'scope, '_, Early>,
    ) -> usize {
        let mut rows = 0;
        let mut deadline: Option<Instant> = None;
        let mut window: VecDeque<(Arc<BorrowedMessage<'c>>, bool)> = VecDeque::new();
        let mut window_bytes = 0;
        loop {
            let timeout = match deadline {
                None => Duration::from_millis(100),
                Some(_) => Duration::ZERO,
            };
            let polled = consumer.poll(timeout);
            self.apply_changes();
            match polled {
                None => break,
                Some(Err(e)) => {
                    self.poll_error(e);
                    break;
                }
                Some(Ok(msg)) => {
                    let msg = Arc::new(msg);
                    let early = self.decode_ahead(ahead, &msg);
                    window_bytes += msg.payload_len();
                    window.push_back((msg, early));
                    while window_bytes > WINDOW_BYTES
                        && let Some((msg, early)) = window.pop_front()
                    {
                        window_bytes -= msg.payload_len();
                        rows += self.accept_read(ahead, &msg, early);
                    }
                    self.publish_features_due();
                    let due = *deadline.get_or_insert_with(|| Instant::now() + self.max_wait);
                    if rows >= self.max_rows || Instant::now() >= due {
                        break;
                    }
                }
            }
        }
        for (msg, early) in window.drain(..) {
            rows += self.accept_read(ahead, &msg, early);
        }
        rows
    }

    /// Hands a JSON message of a stream or feature stream to the `ahead` threads (the message
    /// itself, shared: they read its payload where librdkafka holds it); whether it did. Binary
    /// messages are a copy to decode: never.
    fn decode_ahead<'scope, 'm: 'scope>(
        &mut self,
        ahead: &mut ahead::Ahead<'scope, '_, Early>,
        msg: &Arc<BorrowedMessage<'m>>,
    ) -> bool {
        let Some(payload) = msg.payload() else {
            return false;
        };
        if payload.len() < AHEAD_MIN_BYTES {
            return false;
        }
        let job_msg = Arc::clone(msg);
        match self.by_topic.get(msg.topic()) {
            Some(&Target::Rows(i)) if !payload.starts_with(&format::BINARY_MAGIC) => {
                if !ahead.start() {
                    return false;
                }
                let handle = self.streams[i].handle.clone();
                ahead.submit(move || Early::Rows(fold::decode(&handle, job_msg.payload())));
                true
            }
            Some(&Target::Features(i)) => {
                if !ahead.start() {
                    return false;
                }
                let n = self.features[i].live.handle.config.n;
                // The message's payload is the one just read (a message does not change).
                ahead.submit(move || {
                    Early::Feature(feature_format::decode(
                        job_msg.payload().unwrap_or_default(),
                        n,
                    ))
                });
                true
            }
            _ => false,
        }
    }

    /// Accepts a message read in `gather`, with its decoding if it was handed to `ahead`
    /// (taken even if the message is then dropped, so that results stay in step).
    fn accept_read(
        &mut self,
        ahead: &mut ahead::Ahead<'_, '_, Early>,
        msg: &BorrowedMessage<'_>,
        early: bool,
    ) -> usize {
        let early = if early { ahead.take() } else { None };
        self.accept(msg, early)
    }

    /// Publishes the feature streams that changed if `features::PUBLISH_EVERY` passed since
    /// they last did (within a batch; `run` publishes after each). A stream that cannot go on
    /// is marked failed; `publish_features` then stops ingest.
    fn publish_features_due(&mut self) {
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

    fn poll_error(&mut self, e: KafkaError) {
        if let Some(code) = e.rdkafka_error_code()
            && crate::authz::is_denied(code)
        {
            self.denied(code, "read", &e.to_string());
        }
        // Errors such as an unknown topic repeat on every poll: log them at most every 10 s.
        if self
            .last_poll_error
            .is_none_or(|t| t.elapsed() > Duration::from_secs(10))
        {
            tracing::warn!(error = %e, "Kafka consumer error");
            self.last_poll_error = Some(Instant::now());
        }
    }

    /// Records an authorization error of the consumer: on its group, or on whichever of its
    /// topics the broker refuses to describe (looked up once, as this only runs on errors).
    fn denied(&self, code: rdkafka::error::RDKafkaErrorCode, operation: &'static str, error: &str) {
        let record = |resource_type: &'static str, resource: String| {
            crate::authz::record(
                &self.health,
                &self.metrics,
                crate::health::Denied {
                    resource_type,
                    resource,
                    operation,
                    error: error.to_string(),
                },
            )
        };
        match crate::authz::resource_type(code) {
            "group" => record("group", self.group.clone()),
            "topic" => {
                for topic in self.by_topic.keys() {
                    if let Ok(md) = self
                        .consumer
                        .fetch_metadata(Some(topic), Duration::from_secs(2))
                        && md
                            .topics()
                            .first()
                            .and_then(|t| t.error())
                            .is_some_and(|e| crate::authz::is_denied(e.into()))
                    {
                        record("topic", topic.clone());
                    }
                }
            }
            other => record(other, "kafka-cluster".into()),
        }
    }

    /// Folds each stream's pending rows in one batch update and publishes the view (also
    /// when only the others' states changed).
    fn fold(&mut self) -> anyhow::Result<()> {
        let remote = match &self.store {
            Store::Kafka { reader, .. } => Some(reader.as_ref()),
            _ => None,
        };
        for s in &mut self.streams {
            s.fold(&self.metrics, remote)?;
        }
        Ok(())
    }

    /// Applies the partitions that came or went in a rebalance (`kafka` store) to the
    /// statistics: restored ones are installed, revoked ones dropped with their pending rows.
    fn apply_changes(&mut self) {
        for change in self.consumer.context().take_changes() {
            let (topic, partition) = match &change {
                Change::Assigned {
                    topic, partition, ..
                }
                | Change::Revoked { topic, partition } => (topic.clone(), *partition),
            };
            let Some(&Target::Rows(i)) = self.by_topic.get(&topic) else {
                continue;
            };
            match change {
                Change::Assigned { state, .. } => {
                    self.streams[i].install(partition, state.as_deref())
                }
                Change::Revoked { .. } => self.streams[i].remove(partition),
            }
            // The view changes even if no row comes.
            self.streams[i].remote_version = u64::MAX;
        }
    }

    /// Writes the checkpoint of every stream that changed, then commits the offsets they
    /// cover. Without a state directory the offsets are committed as they are (informational:
    /// a restart then re-reads the topics from the beginning).
    fn checkpoint_and_commit(&mut self, mode: CommitMode) {
        let mut positions = lock(&self.positions).clone();
        let (durable, saved_partitions) = match &mut self.store {
            Store::Kafka { writer, .. } => {
                let saved = write_states(
                    &mut self.streams,
                    writer,
                    &positions,
                    &self.writer_name,
                    &self.metrics,
                );
                let topics = self
                    .streams
                    .iter()
                    .map(|s| s.handle.topic.clone())
                    .collect();
                (topics, Some(saved))
            }
            Store::Dir(writer) => {
                writer.submit(&mut self.streams, &self.cluster_id, &positions);
                if matches!(mode, CommitMode::Sync) {
                    writer.flush(&mut self.streams);
                }
                // A stream topic is committed up to its last durable checkpoint's offsets.
                let mut topics = Vec::new();
                for s in &self.streams {
                    let topic = &s.handle.topic;
                    match writer.durable().get(topic) {
                        Some(at) => {
                            positions.insert(topic.clone(), at.clone());
                            topics.push(topic.clone());
                        }
                        None => {
                            positions.remove(topic);
                        }
                    }
                }
                (topics, None)
            }
            // Without saved state the offsets are committed as read (informational: a
            // restart re-reads the topics from the beginning).
            Store::None => (
                self.streams
                    .iter()
                    .map(|s| s.handle.topic.clone())
                    .collect(),
                None,
            ),
        };
        // Feature-stream topics are committed as read (they have no saved state).
        let stream_topics: BTreeSet<&str> = self
            .streams
            .iter()
            .map(|s| s.handle.topic.as_str())
            .collect();
        let durable_partition = |topic: &str, p: i32| match &saved_partitions {
            Some(saved) => {
                !stream_topics.contains(topic) || saved.contains(&(topic.to_string(), p))
            }
            None => true,
        };
        let assigned = self.consumer.context().assigned();
        let mut tpl = TopicPartitionList::new();
        let mut pending = Vec::new();
        for ((topic, p), next) in commit::plan(
            &positions,
            &durable,
            durable_partition,
            &self.committed,
            &assigned,
        ) {
            if tpl
                .add_partition_offset(&topic, p, Offset::Offset(next))
                .is_ok()
            {
                pending.push(((topic, p), next));
            }
        }
        if tpl.count() == 0 {
            return;
        }
        match self.consumer.commit(&tpl, mode) {
            Ok(()) => {
                self.metrics.offset_commits.with_label_values(&["ok"]).inc();
                self.committed.extend(pending);
            }
            Err(e) => {
                if let Some(code) = e.rdkafka_error_code()
                    && crate::authz::is_denied(code)
                {
                    self.denied(code, "read", &e.to_string());
                }
                self.metrics
                    .offset_commits
                    .with_label_values(&["error"])
                    .inc();
                tracing::warn!(error = %e, "offset commit failed; the next checkpoint retries");
            }
        }
    }
}

/// `kafka` store: writes the state of every changed partition; returns the partitions whose
/// rows are durable now (written, or unchanged since the last write).
fn write_states(
    streams: &mut [StreamIngest],
    writer: &mut StateWriter,
    positions: &positions::Positions,
    writer_name: &str,
    metrics: &Metrics,
) -> BTreeSet<commit::Partition> {
    let mut saved = BTreeSet::new();
    let mut states = Vec::new();
    for s in streams.iter() {
        let topic = &s.handle.topic;
        for (&p, _) in s.parts.iter() {
            saved.insert((topic.clone(), p));
        }
        for (p, part) in s.dirty_parts() {
            saved.remove(&(topic.clone(), p));
            // A part with no position has read no message: nothing to save yet.
            let Some(next) = positions::next(positions, topic, p) else {
                continue;
            };
            states.push(PartitionState {
                version: crate::state_store::VERSION,
                stream: s.handle.name().to_string(),
                topic: topic.clone(),
                partition: p,
                next_offset: next,
                last_update_ms: part.last_update.map(crate::unix_ms),
                as_of_ms: part.as_of_ms,
                writer: writer_name.to_string(),
                stats: part.stats.clone(),
                folds: part.folds.clone().map(|folds| cv::SavedFolds {
                    fold_by: s.handle.folds().1,
                    folds,
                }),
            });
        }
    }
    if states.is_empty() {
        return saved;
    }
    let start = Instant::now();
    let delivered = writer.write(&states);
    let elapsed = start.elapsed().as_secs_f64();
    for (st, ok) in states.iter().zip(delivered) {
        let name = st.stream.as_str();
        if ok {
            saved.insert((st.topic.clone(), st.partition));
            if let Some(s) = streams.iter_mut().find(|s| s.handle.name() == name) {
                s.mark_saved(st.partition);
            }
            metrics.checkpoints.with_label_values(&[name]).inc();
            metrics
                .checkpoint_seconds
                .with_label_values(&[name])
                .observe(elapsed);
        } else {
            metrics.checkpoint_failures.with_label_values(&[name]).inc();
        }
    }
    saved
}

impl Ingest {
    /// Decodes one message into its stream's pending rows, or applies it to its feature stream,
    /// or rejects it; then moves the position past it, unless its partition now waits for the
    /// message's dead-letter copy. Messages of a waiting partition, and messages before a
    /// partition's position (already in the statistics), are dropped unread. Returns the rows
    /// (1 for a feature-stream message).
    fn accept(&mut self, msg: &BorrowedMessage<'_>, early: Option<Early>) -> usize {
        let (topic, partition, offset) = (msg.topic(), msg.partition(), msg.offset());
        let Some(&target) = self.by_topic.get(topic) else {
            return 0;
        };
        if self.held.is_held(topic, partition) {
            // Fetched before the pause took effect, or the partition came back in a
            // rebalance: pause (again); it is read again from the held message's successor.
            self.pause(topic, partition);
            return 0;
        }
        let next = positions::next(&lock(&self.positions), topic, partition);
        if next.is_some_and(|n| offset < n) {
            return 0;
        }
        if let Some(n) = next
            && offset > n
        {
            self.check_deleted(target, topic, partition, n, offset);
        }
        let dead_letters = self.dead_letters.as_ref();
        let rows = match target {
            Target::Rows(i) => {
                let early = match early {
                    Some(Early::Rows(d)) => Some(d),
                    _ => None,
                };
                match self.streams[i].accept(&self.metrics, dead_letters, msg, early) {
                    Some(n) => n,
                    None if self.block => {
                        let stream = self.streams[i].handle.name().to_string();
                        self.held.hold(&stream, topic, partition, offset);
                        self.pause(topic, partition);
                        self.metrics
                            .blocked_partitions
                            .with_label_values(&[&stream])
                            .set(self.held.count(&stream) as i64);
                        self.health.set_held(self.held.report());
                        tracing::info!(
                            stream = %stream, topic = %topic, partition, offset,
                            "partition waits at a rejected message until its dead-letter copy is delivered"
                        );
                        return 0;
                    }
                    None => 0,
                }
            }
            Target::Features(i) => {
                let early = match early {
                    Some(Early::Feature(d)) => Some(d),
                    _ => None,
                };
                self.features[i].accept(&self.metrics, dead_letters, msg, early);
                1
            }
        };
        positions::read(&mut lock(&self.positions), topic, partition, offset);
        rows
    }

    /// A message past the partition's position: the offsets between are either not messages
    /// (transaction markers, compacted records) or were deleted by retention before they were
    /// read. The partition's log start (cached from the fetch that brought this message) tells
    /// them apart; deleted messages are logged as an error and counted.
    fn check_deleted(&self, target: Target, topic: &str, partition: i32, next: i64, offset: i64) {
        let Some(low) = self.cached_log_start(topic, partition) else {
            return;
        };
        if low <= next {
            return;
        }
        let lost = low.min(offset) - next;
        let stream = match target {
            Target::Rows(i) => self.streams[i].handle.name().to_string(),
            Target::Features(i) => self.features[i].live.handle.name().to_string(),
        };
        self.metrics
            .ingest_lost_messages
            .with_label_values(&[&stream])
            .inc_by(lost as u64);
        tracing::error!(
            stream = %stream, topic = %topic, partition, position = next, log_start = low, lost,
            "{lost} messages of {topic}/{partition} were deleted before they were read (retention): \
             the partition was read up to offset {next} and its log now starts at {low}; \
             their rows are not in the statistics"
        );
    }

    /// The partition's log start as librdkafka last heard it (every fetch response carries
    /// it). rdkafka's safe API has only `fetch_watermarks`, a broker round trip per call.
    fn cached_log_start(&self, topic: &str, partition: i32) -> Option<i64> {
        use rdkafka::bindings::{rd_kafka_get_watermark_offsets, rd_kafka_resp_err_t};
        let topic = std::ffi::CString::new(topic).ok()?;
        let (mut low, mut high) = (-1_i64, -1_i64);
        // SAFETY: the client handle is valid while `self.consumer` is borrowed, the topic is a
        // NUL-terminated string that outlives the call, and librdkafka only reads its cached
        // watermarks (under the partition's lock) into the two out parameters.
        let err = unsafe {
            rd_kafka_get_watermark_offsets(
                self.consumer.client().native_ptr(),
                topic.as_ptr(),
                partition,
                &mut low,
                &mut high,
            )
        };
        (err == rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR && low >= 0).then_some(low)
    }

    fn pause(&self, topic: &str, partition: i32) {
        let mut tpl = TopicPartitionList::new();
        tpl.add_partition(topic, partition);
        if let Err(e) = self.consumer.pause(&tpl) {
            tracing::warn!(topic = %topic, partition, error = %e, "cannot pause partition");
        }
    }

    /// Applies the dead-letter outcomes: a delivered copy releases its partition, which goes
    /// on after the message; failures become the reason shown for the held partition.
    fn dead_letter_outcomes(&mut self) {
        let Some(d) = &self.dead_letters else {
            return;
        };
        let outcomes = d.outcomes();
        let assigned = self.consumer.context().assigned();
        let mut changed = self.held.keep_assigned(&assigned);
        for o in &outcomes {
            changed = true;
            if let dlq::Outcome::Failed {
                topic,
                denied: true,
                error,
                ..
            } = o
            {
                crate::authz::record(
                    &self.health,
                    &self.metrics,
                    crate::health::Denied {
                        resource_type: "topic",
                        resource: crate::topics::dlq_of(topic),
                        operation: "write",
                        error: error.clone(),
                    },
                );
            }
            let Some(r) = self.held.outcome(o) else {
                continue;
            };
            positions::read(&mut lock(&self.positions), &r.topic, r.partition, r.offset);
            if let Some(&Target::Rows(i)) = self.by_topic.get(&r.topic) {
                self.streams[i].touch(r.partition);
            }
            if assigned.contains(&(r.topic.clone(), r.partition)) {
                let mut tpl = TopicPartitionList::new();
                tpl.add_partition(&r.topic, r.partition);
                if let Err(e) = self.consumer.seek(
                    &r.topic,
                    r.partition,
                    Offset::Offset(r.offset + 1),
                    Duration::ZERO,
                ) {
                    tracing::warn!(topic = %r.topic, partition = r.partition, error = %e, "cannot seek released partition");
                }
                if let Err(e) = self.consumer.resume(&tpl) {
                    tracing::warn!(topic = %r.topic, partition = r.partition, error = %e, "cannot resume partition");
                }
            }
            tracing::info!(
                topic = %r.topic, partition = r.partition, offset = r.offset,
                "dead-letter copy delivered; partition goes on"
            );
        }
        if changed {
            for s in &self.streams {
                let name = s.handle.name();
                self.metrics
                    .blocked_partitions
                    .with_label_values(&[name])
                    .set(self.held.count(name) as i64);
            }
            self.health.set_held(self.held.report());
        }
    }
}
