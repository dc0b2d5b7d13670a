//! Ingest: Kafka messages -> decode/validate -> `RunningStats` -> snapshot for readers, with
//! checkpoints and offset commits that never count a row twice.
//!
//! One consumer (one consumer group per service) reads every stream's topic on a dedicated
//! thread: folding a batch is CPU-bound, so it stays off the async runtime that serves HTTP.
//! The loop gathers up to `ingest.max_batch_rows` rows (or waits `ingest.max_batch_wait_ms`),
//! folds each stream's rows with one `update_batch`, publishes the new snapshot, and every
//! `state.checkpoint_interval_ms` writes checkpoints and then commits their offsets.
//!
//! Positions: `Positions` holds, per partition, the next offset whose row is not yet in the
//! statistics. It starts from the checkpoints and moves with every message read (good or bad);
//! on (re)assignment the rebalance callback starts each partition there, or at the beginning
//! of the topic when no row of it was ever applied, so the statistics always cover exactly the
//! rows before the positions. Kafka's committed offsets trail the last durable checkpoint.
//!
//! Feature streams (`feature_streams`) share the consumer: their messages are applied to the
//! selection as they are read (each is a whole column, O(n s) work), and after each batch
//! every changed feature stream publishes its snapshot. They have no checkpoint and no
//! committed offsets: their partitions start at the beginning of the topic at every start
//! (and, after a rebalance within one run, where this process stopped reading them).
//!
//! Files: `format` (message formats), `feature_format` (feature-stream messages), `dlq`
//! (dead-letter producer).

pub mod dlq;
pub mod feature_format;
pub mod format;

use crate::checkpoint::{self, Checkpoint};
use crate::config::{IngestConfig, KafkaConfig, StateConfig};
use crate::feature_streams::{Applied, ApplyError, FeatureStreams, LiveFeatureStream};
use crate::metrics::Metrics;
use crate::shutdown::Shutdown;
use crate::streams::{Snapshot, Stats, StreamHandle, Streams};
use anyhow::{Context, bail};
use dlq::{DeadLetters, Source};
use format::{Reason, Rejection, Schema};
use rdkafka::client::ClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer, ConsumerContext, RebalanceProtocol};
use rdkafka::error::KafkaError;
use rdkafka::message::{BorrowedMessage, Message};
use rdkafka::statistics::Statistics;
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use rdkafka::types::RDKafkaRespErr;
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Topic -> partition -> next offset not yet in the statistics.
pub type Positions = HashMap<String, BTreeMap<i32, i64>>;

/// A librdkafka client configuration for `brokers` with the pass-through options applied last.
pub fn client_config(kafka: &KafkaConfig, brokers: &str) -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", brokers)
        .set("client.id", "ravel");
    for (k, v) in kafka.librdkafka_options() {
        c.set(k, v);
    }
    c
}

/// Everything the ingest thread needs.
pub struct IngestSetup {
    pub brokers: String,
    pub kafka: KafkaConfig,
    pub ingest: IngestConfig,
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
    pub shutdown: Shutdown,
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

/// The consumer's callbacks: rebalances (where partitions are positioned) and statistics (lag).
pub struct IngestContext {
    positions: Arc<Mutex<Positions>>,
    assigned: Mutex<BTreeSet<(String, i32)>>,
    topics: Vec<String>,
    ready: Arc<AtomicBool>,
    metrics: Arc<Metrics>,
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl IngestContext {
    fn update_assignment(&self, f: impl FnOnce(&mut BTreeSet<(String, i32)>)) {
        let mut a = lock(&self.assigned);
        let before: BTreeSet<(String, i32)> = a.clone();
        f(&mut a);
        for (t, p) in before.difference(&a) {
            let _ = self
                .metrics
                .consumer_lag
                .remove_label_values(&[t.as_str(), &p.to_string()]);
        }
        for t in &self.topics {
            let n = a.iter().filter(|(at, _)| at == t).count();
            self.metrics
                .assigned_partitions
                .with_label_values(&[t.as_str()])
                .set(n as i64);
        }
        let ready = self.topics.iter().all(|t| a.iter().any(|(at, _)| at == t));
        self.ready.store(ready, Ordering::SeqCst);
    }
}

impl ClientContext for IngestContext {
    fn stats(&self, s: Statistics) {
        let assigned = lock(&self.assigned).clone();
        let positions = lock(&self.positions);
        for (topic, t) in &s.topics {
            for part in t.partitions.values() {
                if part.partition < 0
                    || part.hi_offset < 0
                    || !assigned.contains(&(topic.clone(), part.partition))
                {
                    continue;
                }
                let next = positions
                    .get(topic)
                    .and_then(|m| m.get(&part.partition))
                    .copied()
                    .unwrap_or(part.lo_offset.max(0));
                self.metrics
                    .consumer_lag
                    .with_label_values(&[topic.as_str(), &part.partition.to_string()])
                    .set((part.hi_offset - next).max(0));
            }
        }
    }
}

impl ConsumerContext for IngestContext {
    /// Positions every newly assigned partition where the statistics stop, instead of at the
    /// committed offset, which may trail the last checkpoint.
    fn rebalance(
        &self,
        consumer: &BaseConsumer<Self>,
        err: RDKafkaRespErr,
        tpl: &mut TopicPartitionList,
    ) {
        let cooperative = matches!(
            consumer.rebalance_protocol(),
            RebalanceProtocol::Cooperative
        );
        let parts: Vec<(String, i32)> = tpl
            .elements()
            .iter()
            .map(|e| (e.topic().to_string(), e.partition()))
            .collect();
        match err {
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__ASSIGN_PARTITIONS => {
                {
                    let positions = lock(&self.positions);
                    for (t, p) in &parts {
                        let start = match positions.get(t).and_then(|m| m.get(p)) {
                            Some(&next) => Offset::Offset(next),
                            None => Offset::Beginning,
                        };
                        if let Err(e) = tpl.set_partition_offset(t, *p, start) {
                            tracing::error!(topic = %t, partition = p, error = %e, "cannot set start offset");
                        }
                        tracing::info!(topic = %t, partition = p, start = ?start, "partition assigned");
                    }
                }
                let r = if cooperative {
                    consumer.incremental_assign(tpl)
                } else {
                    consumer.assign(tpl)
                };
                if let Err(e) = r {
                    tracing::error!(error = %e, "cannot assign partitions");
                }
                self.update_assignment(|a| {
                    if !cooperative {
                        a.clear();
                    }
                    a.extend(parts);
                });
            }
            RDKafkaRespErr::RD_KAFKA_RESP_ERR__REVOKE_PARTITIONS => {
                tracing::info!(partitions = parts.len(), "partitions revoked");
                let r = if cooperative {
                    consumer.incremental_unassign(tpl)
                } else {
                    consumer.unassign()
                };
                if let Err(e) = r {
                    tracing::error!(error = %e, "cannot unassign partitions");
                }
                self.update_assignment(|a| {
                    if cooperative {
                        for p in &parts {
                            a.remove(p);
                        }
                    } else {
                        a.clear();
                    }
                });
            }
            other => {
                tracing::error!(error = ?other, "rebalance failed; dropping the assignment");
                let _ = consumer.unassign();
                self.update_assignment(|a| a.clear());
            }
        }
    }
}

/// One stream's side of the loop: the working statistics and the rows gathered since the
/// last fold.
struct StreamIngest {
    handle: Arc<StreamHandle>,
    stats: Stats,
    x: Vec<f64>,
    y: Vec<f64>,
    last_update: Option<SystemTime>,
    /// Changed (rows or positions) since the last checkpoint.
    dirty: bool,
    warnings: Warnings,
}

/// One feature stream's side of the loop.
struct FeatureIngest {
    live: LiveFeatureStream,
    warnings: Warnings,
    /// Set when the selection cannot go on (an Asy-OS worker died): ingest stops.
    failed: Option<String>,
}

/// Where a topic's messages go.
#[derive(Clone, Copy)]
enum Target {
    Rows(usize),
    Features(usize),
}

/// Rejection logging, limited to one line per second per stream.
#[derive(Default)]
struct Warnings {
    /// Rejections not logged yet.
    suppressed: u64,
    last: Option<Instant>,
}

impl Warnings {
    /// Counts a refused message, logs it (rate-limited) and copies it to the dead-letter topic.
    fn reject(
        &mut self,
        stream: &str,
        metrics: &Metrics,
        dead_letters: Option<&DeadLetters>,
        msg: &BorrowedMessage<'_>,
        rej: &Rejection,
    ) {
        metrics
            .messages_rejected
            .with_label_values(&[stream, rej.reason.as_str()])
            .inc();
        let now = Instant::now();
        if self
            .last
            .is_none_or(|t| now.duration_since(t) >= Duration::from_secs(1))
        {
            tracing::warn!(
                stream = %stream, topic = %msg.topic(), partition = msg.partition(), offset = msg.offset(),
                reason = rej.reason.as_str(), error = %rej.message, suppressed = self.suppressed,
                "message rejected (copied to the dead-letter topic)"
            );
            self.last = Some(now);
            self.suppressed = 0;
        } else {
            self.suppressed += 1;
        }
        if let Some(d) = dead_letters {
            let src = Source {
                stream,
                topic: msg.topic(),
                partition: msg.partition(),
                offset: msg.offset(),
                key: msg.key(),
                payload: msg.payload().unwrap_or(&[]),
            };
            d.send(&src, rej);
        }
    }
}

struct Ingest {
    consumer: BaseConsumer<IngestContext>,
    dead_letters: Option<DeadLetters>,
    streams: Vec<StreamIngest>,
    features: Vec<FeatureIngest>,
    by_topic: HashMap<String, Target>,
    positions: Arc<Mutex<Positions>>,
    /// What Kafka last accepted as committed.
    committed: HashMap<(String, i32), i64>,
    cluster_id: Option<String>,
    state_dir: Option<PathBuf>,
    checkpoint_interval: Duration,
    max_rows: usize,
    max_wait: Duration,
    metrics: Arc<Metrics>,
    shutdown: Shutdown,
    last_poll_error: Option<Instant>,
}

impl Ingest {
    fn new(setup: IngestSetup) -> anyhow::Result<Ingest> {
        let mut topics = setup.streams.topics();
        topics.extend(setup.feature_streams.topics());
        let positions = Arc::new(Mutex::new(setup.positions));
        let context = IngestContext {
            positions: positions.clone(),
            assigned: Mutex::new(BTreeSet::new()),
            topics: topics.clone(),
            ready: setup.ready.clone(),
            metrics: setup.metrics.clone(),
        };
        let base = client_config(&setup.kafka, &setup.brokers);
        let mut cc = ClientConfig::new();
        cc.set("bootstrap.servers", &setup.brokers)
            .set("client.id", "ravel")
            .set("group.id", &setup.kafka.group_id)
            // Offsets are committed by hand, after the checkpoint that holds the rows.
            .set("enable.auto.commit", "false")
            .set("enable.auto.offset.store", "false")
            .set("auto.offset.reset", "earliest")
            // Folding is slower than fetching, so the prefetch queue fills up; librdkafka then
            // pauses each partition's fetching for this long (default 1 s), which starved the
            // loop for most of the time (bench: binary rows/s several times lower).
            .set("fetch.queue.backoff.ms", "10")
            .set(
                "statistics.interval.ms",
                setup.ingest.lag_interval_ms.to_string(),
            );
        for (k, v) in setup.kafka.librdkafka_options() {
            cc.set(k, v);
        }
        let consumer: BaseConsumer<IngestContext> = cc
            .create_with_context(context)
            .map_err(|e| anyhow::anyhow!("cannot create the Kafka consumer: {e}"))?;

        let cluster_id = consumer.client().fetch_cluster_id(Duration::from_secs(10));
        match &cluster_id {
            Some(id) => {
                tracing::info!(cluster_id = %id, brokers = %setup.brokers, "connected to Kafka")
            }
            None => {
                tracing::warn!(brokers = %setup.brokers, "Kafka did not report a cluster id (is it reachable?)")
            }
        }
        // A checkpoint only makes sense against the log it was read from.
        for (stream, cp_cluster) in &setup.checkpoint_clusters {
            if let (Some(have), Some(want)) = (&cluster_id, cp_cluster)
                && have != want
            {
                bail!(
                    "the checkpoint of stream '{stream}' was written against Kafka cluster {want}, but {} is cluster {have}; \
                     move the state directory away to start from the beginning of the topics",
                    setup.brokers
                );
            }
        }
        {
            let positions = lock(&positions);
            for (topic, parts) in positions.iter() {
                for (&p, &next) in parts {
                    match consumer.fetch_watermarks(topic, p, Duration::from_secs(10)) {
                        Ok((_, high)) if next > high => bail!(
                            "checkpoint says partition {topic}/{p} was read up to offset {next}, but the topic ends at {high}: \
                             it belongs to another incarnation of the topic; move the state directory away to start afresh"
                        ),
                        Ok((low, _)) if next < low => tracing::warn!(
                            topic = %topic, partition = p, next, low,
                            "offsets {next}..{low} were deleted by retention before they were read"
                        ),
                        Ok(_) => {}
                        Err(e) => {
                            tracing::warn!(topic = %topic, partition = p, error = %e, "cannot check the checkpoint against the topic")
                        }
                    }
                }
            }
        }

        let dead_letters = if setup.ingest.dead_letter {
            Some(DeadLetters::new(&base, setup.metrics.clone())?)
        } else {
            None
        };
        let topic_refs: Vec<&str> = topics.iter().map(String::as_str).collect();
        consumer
            .subscribe(&topic_refs)
            .with_context(|| format!("cannot subscribe to {topics:?}"))?;
        tracing::info!(topics = ?topics, group = %setup.kafka.group_id, "subscribed");
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

        let mut streams = Vec::new();
        let mut by_topic = HashMap::new();
        for handle in setup.streams.iter() {
            let snap = handle.snapshot();
            by_topic.insert(handle.topic.clone(), Target::Rows(streams.len()));
            streams.push(StreamIngest {
                handle: handle.clone(),
                stats: snap.stats.clone(),
                x: Vec::new(),
                y: Vec::new(),
                last_update: snap.last_update,
                dirty: false,
                warnings: Warnings::default(),
            });
        }
        let mut features = Vec::new();
        for handle in setup.feature_streams.iter() {
            by_topic.insert(handle.topic.clone(), Target::Features(features.len()));
            features.push(FeatureIngest {
                live: LiveFeatureStream::new(handle.clone()),
                warnings: Warnings::default(),
                failed: None,
            });
        }
        Ok(Ingest {
            consumer,
            dead_letters,
            streams,
            features,
            by_topic,
            positions,
            // Empty: the first cycle commits the restored positions too, in case a crash left
            // Kafka's offsets behind the checkpoint (lag tools read the committed offsets).
            committed: HashMap::new(),
            cluster_id,
            state_dir: setup.state.dir(),
            checkpoint_interval: Duration::from_millis(setup.state.checkpoint_interval_ms),
            max_rows: setup.ingest.max_batch_rows,
            max_wait: Duration::from_millis(setup.ingest.max_batch_wait_ms),
            metrics: setup.metrics,
            shutdown: setup.shutdown,
            last_poll_error: None,
        })
    }

    fn run(&mut self) -> anyhow::Result<()> {
        let mut last_checkpoint = Instant::now();
        while !self.shutdown.is_triggered() {
            if self.gather() > 0 {
                self.fold();
            }
            self.publish_features()?;
            if let Some(d) = &self.dead_letters {
                d.poll();
            }
            if last_checkpoint.elapsed() >= self.checkpoint_interval {
                self.checkpoint_and_commit(CommitMode::Async);
                last_checkpoint = Instant::now();
            }
        }
        // Stop consuming: nothing is gathered any more; save what was applied and commit it.
        tracing::info!("ingest stopping: last checkpoint and commit");
        self.fold();
        self.checkpoint_and_commit(CommitMode::Sync);
        Ok(())
    }

    /// Publishes the snapshot of every feature stream that changed; an error if one cannot
    /// go on.
    fn publish_features(&mut self) -> anyhow::Result<()> {
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

    /// Reads messages until `max_rows` rows (or feature-stream messages) are gathered,
    /// `max_wait` passed since the first, or (with nothing gathered) 100 ms passed, so
    /// shutdown, checkpoints and snapshots are never late.
    fn gather(&mut self) -> usize {
        let mut rows = 0;
        let mut deadline: Option<Instant> = None;
        loop {
            let timeout = match deadline {
                None => Duration::from_millis(100),
                Some(d) => d.saturating_duration_since(Instant::now()),
            };
            match self.consumer.poll(timeout) {
                None => break,
                Some(Err(e)) => {
                    self.poll_error(e);
                    break;
                }
                Some(Ok(msg)) => {
                    rows += accept(
                        &mut self.streams,
                        &mut self.features,
                        &self.by_topic,
                        &self.positions,
                        &self.metrics,
                        self.dead_letters.as_ref(),
                        &msg,
                    );
                    let due = *deadline.get_or_insert_with(|| Instant::now() + self.max_wait);
                    if rows >= self.max_rows || Instant::now() >= due {
                        break;
                    }
                }
            }
        }
        rows
    }

    fn poll_error(&mut self, e: KafkaError) {
        // Errors such as an unknown topic repeat on every poll: log them at most every 10 s.
        if self
            .last_poll_error
            .is_none_or(|t| t.elapsed() > Duration::from_secs(10))
        {
            tracing::warn!(error = %e, "Kafka consumer error");
            self.last_poll_error = Some(Instant::now());
        }
    }

    /// Folds each stream's pending rows in one batch update and publishes the snapshot.
    fn fold(&mut self) {
        for s in &mut self.streams {
            if s.y.is_empty() {
                continue;
            }
            let name = s.handle.name().to_string();
            let start = Instant::now();
            let rows = s.y.len();
            let alarms_before = s.stats.drift_status().alarms;
            match s.stats.update_batch(&s.x, &s.y) {
                // In depth: validation bounds every value (`Reason::Overflow`), so a fold cannot
                // produce an infinite moment; if one ever did, the batch is refused rather than
                // published and checkpointed (a checkpoint would hold `null` and not load):
                // the working statistics go back to the last published ones.
                Ok(()) if !s.stats.is_finite() => {
                    tracing::error!(
                        stream = %name,
                        rows,
                        "a validated batch made the statistics non-finite; batch refused"
                    );
                    s.stats = s.handle.snapshot().stats.clone();
                }
                Ok(()) => {
                    let drift = s.stats.drift_status();
                    if drift.alarms > alarms_before {
                        tracing::warn!(
                            stream = %name,
                            alarms = drift.alarms,
                            row = drift.last_alarm_row.unwrap_or(0),
                            alpha = drift.alpha,
                            "drift detected: the averages now forget faster"
                        );
                        self.metrics
                            .drift_alarms
                            .with_label_values(&[&name])
                            .inc_by(drift.alarms - alarms_before);
                        self.metrics
                            .last_drift_alarm_row
                            .with_label_values(&[&name])
                            .set(drift.last_alarm_row.unwrap_or(0) as i64);
                    }
                    self.metrics
                        .stream_effective_sample_size
                        .with_label_values(&[&name])
                        .set(drift.effective_sample_size);
                    let now = SystemTime::now();
                    s.last_update = Some(now);
                    s.handle.publish(Snapshot {
                        stats: s.stats.clone(),
                        last_update: s.last_update,
                    });
                    self.metrics
                        .observations_applied
                        .with_label_values(&[&name])
                        .inc_by(rows as u64);
                    self.metrics
                        .ingest_batch_rows
                        .with_label_values(&[&name])
                        .observe(rows as f64);
                    self.metrics
                        .ingest_batch_seconds
                        .with_label_values(&[&name])
                        .observe(start.elapsed().as_secs_f64());
                    self.metrics
                        .stream_alpha
                        .with_label_values(&[&name])
                        .set(s.stats.current_alpha());
                    self.metrics
                        .stream_observations
                        .with_label_values(&[&name])
                        .set(s.stats.n() as i64);
                    self.metrics
                        .stream_last_update
                        .with_label_values(&[&name])
                        .set(
                            now.duration_since(UNIX_EPOCH)
                                .map(|d| d.as_secs_f64())
                                .unwrap_or(0.0),
                        );
                }
                // Every message was validated on its own, so this is a bug; the statistics
                // are untouched (update_batch checks before it changes anything).
                Err(e) => {
                    tracing::error!(stream = %name, rows, error = %e, "validated batch refused by the statistics")
                }
            }
            s.x.clear();
            s.y.clear();
        }
    }

    /// Writes the checkpoint of every stream that changed, then commits the offsets they
    /// cover. Without a state directory the offsets are committed as they are (informational:
    /// a restart then re-reads the topics from the beginning).
    fn checkpoint_and_commit(&mut self, mode: CommitMode) {
        if let Some(d) = &self.dead_letters {
            d.flush(Duration::from_secs(10));
        }
        let positions = lock(&self.positions).clone();
        let mut durable: Vec<String> = Vec::new();
        for s in &mut self.streams {
            let topic = &s.handle.topic;
            let Some(dir) = &self.state_dir else {
                durable.push(topic.clone());
                continue;
            };
            if !s.dirty {
                durable.push(topic.clone());
                continue;
            }
            let name = s.handle.name();
            let cp = Checkpoint {
                version: checkpoint::VERSION,
                stream: name.to_string(),
                topic: topic.clone(),
                cluster_id: self.cluster_id.clone(),
                offsets: positions.get(topic).cloned().unwrap_or_default(),
                last_update_ms: s
                    .last_update
                    .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
                    .map(|d| d.as_millis() as u64),
                stats: s.stats.clone(),
            };
            let start = Instant::now();
            match checkpoint::write(dir, &cp) {
                Ok(()) => {
                    s.dirty = false;
                    durable.push(topic.clone());
                    self.metrics.checkpoints.with_label_values(&[name]).inc();
                    self.metrics
                        .checkpoint_seconds
                        .with_label_values(&[name])
                        .observe(start.elapsed().as_secs_f64());
                    tracing::debug!(stream = %name, n = cp.stats.n(), "checkpoint written");
                }
                Err(e) => {
                    self.metrics
                        .checkpoint_failures
                        .with_label_values(&[name])
                        .inc();
                    tracing::error!(stream = %name, error = %format!("{e:#}"), "checkpoint failed; offsets not committed");
                }
            }
        }
        let assigned: BTreeSet<(String, i32)> = lock(&self.consumer.context().assigned).clone();
        let mut tpl = TopicPartitionList::new();
        let mut pending = Vec::new();
        for topic in durable {
            for (&p, &next) in positions.get(&topic).into_iter().flatten() {
                let key = (topic.clone(), p);
                if self.committed.get(&key) == Some(&next) || !assigned.contains(&key) {
                    continue;
                }
                if tpl
                    .add_partition_offset(&topic, p, Offset::Offset(next))
                    .is_ok()
                {
                    pending.push((key, next));
                }
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
                self.metrics
                    .offset_commits
                    .with_label_values(&["error"])
                    .inc();
                tracing::warn!(error = %e, "offset commit failed; the next checkpoint retries");
            }
        }
    }
}

/// Decodes one message into its stream's pending rows, or applies it to its feature stream,
/// or rejects it. Returns the rows (1 for a feature-stream message).
fn accept(
    streams: &mut [StreamIngest],
    features: &mut [FeatureIngest],
    by_topic: &HashMap<String, Target>,
    positions: &Mutex<Positions>,
    metrics: &Metrics,
    dead_letters: Option<&DeadLetters>,
    msg: &BorrowedMessage<'_>,
) -> usize {
    let rows = match by_topic.get(msg.topic()) {
        None => return 0,
        Some(&Target::Rows(i)) => accept_rows(&mut streams[i], metrics, dead_letters, msg),
        Some(&Target::Features(i)) => {
            accept_feature(&mut features[i], metrics, dead_letters, msg);
            1
        }
    };
    lock(positions)
        .entry(msg.topic().to_string())
        .or_default()
        .insert(msg.partition(), msg.offset() + 1);
    rows
}

fn no_payload() -> Rejection {
    Rejection {
        reason: Reason::Malformed,
        message: "message has no payload".into(),
    }
}

fn accept_rows(
    s: &mut StreamIngest,
    metrics: &Metrics,
    dead_letters: Option<&DeadLetters>,
    msg: &BorrowedMessage<'_>,
) -> usize {
    let name = s.handle.name();
    metrics.messages_consumed.with_label_values(&[name]).inc();
    let schema = Schema {
        p: s.handle.p(),
        index: s.handle.index.as_ref(),
        classification: s.handle.task() == ravel_core::Task::Classification,
    };
    let result = match msg.payload() {
        None => Err(no_payload()),
        Some(payload) => format::decode(payload, &schema, &mut s.x, &mut s.y),
    };
    s.dirty = true;
    match result {
        Ok(n) => n,
        Err(rej) => {
            s.warnings.reject(name, metrics, dead_letters, msg, &rej);
            0
        }
    }
}

fn accept_feature(
    f: &mut FeatureIngest,
    metrics: &Metrics,
    dead_letters: Option<&DeadLetters>,
    msg: &BorrowedMessage<'_>,
) {
    let handle = f.live.handle.clone();
    let name = handle.name();
    metrics.messages_consumed.with_label_values(&[name]).inc();
    let result = match msg.payload() {
        None => Err(ApplyError::Rejected(no_payload())),
        Some(payload) => feature_format::decode(payload, handle.config.n)
            .map_err(ApplyError::Rejected)
            .and_then(|m| f.live.apply(m)),
    };
    let rejection = match result {
        Ok(Applied::Feature) => {
            metrics.features_processed.with_label_values(&[name]).inc();
            None
        }
        Ok(Applied::Labels) => {
            tracing::info!(stream = %name, n = handle.config.n, offset = msg.offset(), "feature stream: labels received");
            None
        }
        Ok(Applied::SameLabels) => None,
        Err(ApplyError::Rejected(rej)) => {
            f.warnings.reject(name, metrics, dead_letters, msg, &rej);
            Some(rej)
        }
        Err(ApplyError::Failed(e)) => {
            tracing::error!(stream = %name, error = %e, "feature stream failed");
            f.failed = Some(e.to_string());
            None
        }
    };
    f.live
        .read(msg.partition(), msg.offset(), rejection.as_ref());
}

/// What the checkpoints restore: stream -> initial snapshot, positions, stream -> cluster id.
pub type Restored = (
    HashMap<String, Snapshot>,
    Positions,
    BTreeMap<String, Option<String>>,
);

/// Loads the checkpoints of all streams in `dir`: (stream -> initial snapshot, positions,
/// cluster ids). A checkpoint that does not match its stream's configuration is an error.
pub fn load_checkpoints(
    dir: &std::path::Path,
    configs: &[crate::config::StreamConfig],
) -> anyhow::Result<Restored> {
    let (mut snaps, mut positions, mut clusters) =
        (HashMap::new(), Positions::new(), BTreeMap::new());
    for c in configs {
        let Some(cp) = checkpoint::load(dir, &c.name)? else {
            continue;
        };
        let path = checkpoint::path(dir, &c.name);
        cp.check_matches(&c.name, &c.topic(), c.task, c.p(), &c.alpha, &path)?;
        tracing::info!(stream = %c.name, n = cp.stats.n(), offsets = ?cp.offsets, "checkpoint restored");
        let last_update = cp
            .last_update_ms
            .map(|ms| UNIX_EPOCH + Duration::from_millis(ms));
        positions.insert(cp.topic.clone(), cp.offsets.clone());
        clusters.insert(c.name.clone(), cp.cluster_id.clone());
        snaps.insert(
            c.name.clone(),
            Snapshot {
                stats: cp.stats,
                last_update,
            },
        );
    }
    Ok((snaps, positions, clusters))
}
