//! Scorers (`[[scorers]]`): events read from a topic, scored with a model of a stream's
//! statistics, one prediction per message written to an output topic.
//!
//! Each scorer is a thread with its own consumer group and producer. It reads the events
//! through the stream's own decoding (fields, missing values, schema'd formats), with the
//! target not read (`Schema::unlabelled`), so an event scores exactly as the stream would
//! fold it. The model is extracted from the stream's published snapshot, again when the
//! snapshot changed and `refresh_ms` passed; every prediction names the model it came from
//! (the statistics' n and `as_of`, and a hash of the model request). Before its stream has a
//! first row the scorer does not join its group at all.
//!
//! The events may be the stream's own (its topic): the scorer reads them with its own group
//! beside the stream, so each gets one prediction, with the model the scorer holds when it
//! reads it, and the stream folds it once. Refusals there are counted, not dead-lettered:
//! the stream dead-letters its topic's bad messages itself.
//!
//! Delivery is exactly once without Kafka transactions (as Apache Apex's exactly-once Kafka
//! output and Feldera's Kafka output do it), when the output topic has at least as many
//! partitions as the input: the predictions of input partition i go to output partition i,
//! in order, with the idempotent producer, each carrying its source coordinates in headers.
//! On every assignment the scorer reads the tail of each output partition it takes, past the
//! output's end recorded in the last commit's metadata (`out=`, so the scan covers what was
//! written since that commit), and resumes the input right after the last source offset found
//! there: the output topic is the truth, the committed offset a lower bound. A failed delivery
//! resumes the same way. Limits: a writer cut off from the group (a network partition) that
//! still writes is not fenced (Kafka transactions would fence it); retention deleting the
//! output's tail before a restart reads it makes the committed offset the resume point (at
//! least once since it). Dead-letter copies of refusals are sent once the same way
//! (`dlq`: the copies already in the dead-letter topic are not sent again). The key a downstream consumer can deduplicate on: (`ravel-source-topic`,
//! `ravel-source-partition`, `ravel-source-offset`). With fewer output partitions than input
//! ones delivery is at least once: a batch's offsets are committed only after every
//! prediction of it is acknowledged, a failed delivery rewinds to the batch's start, and a
//! crash between acknowledgement and commit scores those events again.
//!
//! Exactly once with Kafka transactions is not offered: no broker these tests run delivers
//! it, so it could not be shown to work (`scripts/txn_probe.py` checks a broker with a plain
//! confluent-kafka client; docs/compatibility.md has the results). The embedded broker
//! accepts every transactional call but writes no markers and its TxnOffsetCommit commits
//! nothing. Tansu 0.6.0 commits, aborts, moves the group's offsets with the transaction and
//! hides open transactions, but answers every Fetch with an empty list of aborted
//! transactions, so a `read_committed` consumer sees aborted records.

mod clients;
mod held;
mod output;
mod predict;
mod tail;

use crate::codec::format::Reason;
use crate::config::DlqConfig;
use crate::config::scorers::ScorerConfig;
use crate::dead_letters::RateLimit;
use crate::dead_letters::dlq::{self, DeadLetters};
use crate::kafka::KafkaClients;
use crate::metrics::Metrics;
use crate::shutdown::Shutdown;
use crate::state::streams::StreamHandle;
use clients::{Reports, ScorerContext};
use held::Held;
use predict::{Current, score, spec_hash};
use ravel_core::solve::{Checked, Request, model_from_folds};
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::error::KafkaError;
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, Producer};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tail::Tail;

/// At most this many messages scored between two commits.
const BATCH_MESSAGES: usize = 1000;
/// How long a batch's predictions may take to be acknowledged before it is scored again.
const DELIVERY_WAIT: Duration = Duration::from_secs(60);

/// What a scorer needs.
pub struct ScorerSetup {
    pub config: ScorerConfig,
    /// The model request, checked against the stream (`ScorerConfig::check`).
    pub model: Request,
    pub stream: Arc<StreamHandle>,
    pub clients: KafkaClients,
    pub dlq: DlqConfig,
    pub dead_letter: bool,
    /// The stream whose own topic the scorer reads, if any: that stream dead-letters the
    /// topic's bad messages (once), so the scorer only counts its refusals.
    pub topic_of_stream: Option<String>,
    pub metrics: Arc<Metrics>,
    pub health: Arc<crate::health::Health>,
    /// `kafka.assignment`, and whether replicas share the scorer's group (`state.store =
    /// "kafka"`: then `auto` is the group protocol).
    pub assignment: crate::config::Assignment,
    pub shared: bool,
    pub shutdown: Shutdown,
}

/// How often the scorer's input lag is computed (`ravel_scorer_lag_messages`).
const LAG_EVERY: Duration = Duration::from_secs(1);

/// How often a standalone scorer looks for new partitions of its topic.
const DISCOVER_EVERY: Duration = Duration::from_secs(10);

/// Starts the scorer's thread; it runs until shutdown.
pub fn spawn(setup: ScorerSetup) -> anyhow::Result<std::thread::JoinHandle<()>> {
    let name = setup.config.name.clone();
    let scorer = Scorer::new(setup)?;
    // Said before the thread starts, so that `/readyz` lists the scorer from the first answer.
    scorer.report();
    std::thread::Builder::new()
        .name(format!("ravel-scorer-{name}"))
        .spawn(move || scorer.run())
        .map_err(|e| anyhow::anyhow!("cannot start scorer '{name}': {e}"))
}

struct Scorer {
    config: ScorerConfig,
    /// The model request, checked once against the stream's p.
    model: Checked,
    /// A hash of the model request, in every prediction's model version.
    spec: String,
    stream: Arc<StreamHandle>,
    clients: KafkaClients,
    consumer: BaseConsumer<ScorerContext>,
    producer: BaseProducer<Reports>,
    /// Whether predictions go to the output partition of their input's number (exactly
    /// once), decided when the scorer starts reading.
    exactly_once: bool,
    dead_letters: Option<DeadLetters>,
    /// The stream whose own topic this is (`ScorerSetup::topic_of_stream`).
    topic_of_stream: Option<String>,
    metrics: Arc<Metrics>,
    health: Arc<crate::health::Health>,
    shutdown: Shutdown,
    /// The models it scores with (`held`).
    held: Held,
    logs: BTreeMap<&'static str, RateLimit>,
    /// The number of the batch being scored (`Reports`).
    batch: u64,
    assignment: crate::config::Assignment,
    shared: bool,
    /// Standalone assignment: the name in the commits, the watch for a second instance, the
    /// partitions assigned and when new ones were last looked for.
    standalone: Option<(crate::kafka::standalone::Standalone, Vec<i32>, Instant)>,
}

impl Scorer {
    fn new(s: ScorerSetup) -> anyhow::Result<Scorer> {
        let name = &s.config.name;
        let scrub = |e: KafkaError| s.clients.scrub(&e.to_string());
        let context = ScorerContext {
            name: name.clone(),
            topic: s.config.topic.clone(),
            tail: Mutex::new(None),
            assigned: Mutex::new(BTreeSet::new()),
        };
        let consumer: BaseConsumer<ScorerContext> = s
            .clients
            .scorer_consumer(&s.config.group(s.clients.group()))
            .create_with_context(context)
            .map_err(|e| {
                anyhow::anyhow!("scorer '{name}': cannot create its consumer: {}", scrub(e))
            })?;
        let producer: BaseProducer<Reports> = s
            .clients
            .scorer_producer()
            .create_with_context(Reports::default())
            .map_err(|e| {
                anyhow::anyhow!("scorer '{name}': cannot create its producer: {}", scrub(e))
            })?;
        let dead_letters = if s.dead_letter && s.topic_of_stream.is_none() {
            Some(DeadLetters::start(
                &s.clients.dead_letters(),
                Some(&s.clients.dead_letter_reader()),
                &s.dlq,
                s.metrics.clone(),
            )?)
        } else {
            None
        };
        let model = s
            .model
            .check(s.stream.p())
            .map_err(|e| anyhow::anyhow!("scorer '{name}': model: {e}"))?;
        s.metrics.declare_scorer(name);
        Ok(Scorer {
            spec: spec_hash(&s.model),
            config: s.config,
            model,
            stream: s.stream,
            clients: s.clients,
            consumer,
            producer,
            exactly_once: false,
            dead_letters,
            held: Held::new(s.topic_of_stream.is_some()),
            topic_of_stream: s.topic_of_stream,
            metrics: s.metrics,
            health: s.health,
            shutdown: s.shutdown,
            logs: BTreeMap::new(),
            batch: 0,
            assignment: s.assignment,
            shared: s.shared,
            standalone: None,
        })
    }

    /// What `/readyz` says of this scorer.
    fn report(&self) {
        self.health.set_scorer(crate::health::ScorerHealth {
            name: self.config.name.clone(),
            stream: self.config.stream.clone(),
            topic: self.config.topic.clone(),
            output_topic: self.config.output_topic.clone(),
            delivery: if self.exactly_once {
                "exactly_once"
            } else {
                "at_least_once"
            },
            state: if self.held.newest().is_some() {
                "scoring"
            } else {
                "waiting_for_rows"
            },
            model_rows: self.held.newest().map(|c| c.model.n),
        });
    }

    fn run(mut self) {
        let name = self.config.name.clone();
        // No group membership (and no events read) before the stream has a model to give.
        while !self.refresh() {
            if self.shutdown.is_triggered() {
                return;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        use crate::config::Assignment;
        let standalone = match self.assignment {
            Assignment::Standalone => true,
            Assignment::Group => false,
            Assignment::Auto => {
                !self.shared
                    && self
                        .consumer
                        .client()
                        .fetch_cluster_id(Duration::from_secs(10))
                        .is_some_and(|id| crate::kafka::is_embedded(Some(&id)))
            }
        };
        let group = self.config.group(self.clients.group());
        self.exactly_once = self.start_exactly_once();
        self.report();
        if standalone {
            let watch = crate::kafka::standalone::Standalone::new(
                crate::kafka::standalone::instance_name(self.clients.instance_id()),
                &format!("scorer '{name}'"),
                &group,
                Duration::from_secs(5),
                self.health.clone(),
            );
            self.standalone = Some((watch, Vec::new(), Instant::now()));
            self.assign_new();
        } else if let Err(e) = self.consumer.subscribe(&[self.config.topic.as_str()]) {
            tracing::error!(scorer = %name, error = %self.clients.scrub(&e.to_string()), "cannot subscribe to the scorer's topic");
            return;
        }
        tracing::info!(scorer = %name, topic = %self.config.topic, output_topic = %self.config.output_topic, group = %group, standalone, topic_of_stream = ?self.topic_of_stream, "scorer started");
        let mut lag_at = Instant::now();
        while !self.shutdown.is_triggered() {
            self.refresh();
            self.batch();
            if lag_at.elapsed() >= LAG_EVERY {
                self.report_lag();
                lag_at = Instant::now();
            }
            if let Some((_, _, at)) = &self.standalone
                && at.elapsed() >= DISCOVER_EVERY
            {
                self.assign_new();
            }
        }
        self.producer.poll(Duration::ZERO);
        tracing::info!(scorer = %name, "scorer stopped");
    }

    /// `ravel_scorer_lag_messages`: over the assigned partitions, the end librdkafka last heard
    /// less the scorer's position (a partition not read yet counts from its log start).
    fn report_lag(&self) {
        let assigned: Vec<i32> = super::lock(&self.consumer.context().assigned)
            .iter()
            .copied()
            .collect();
        let positions = self.consumer.position().ok();
        let mut lag = 0;
        for p in assigned {
            let Some((low, high)) =
                crate::kafka::cached_watermarks(&self.consumer, &self.config.topic, p)
            else {
                continue;
            };
            let at = positions
                .as_ref()
                .and_then(|t| t.find_partition(&self.config.topic, p))
                .and_then(|e| match e.offset() {
                    Offset::Offset(o) => Some(o),
                    _ => None,
                })
                .unwrap_or(low);
            lag += (high - at).max(0);
        }
        self.metrics
            .scorers
            .scorer_lag
            .with_label_values(&[&self.config.name])
            .set(lag);
    }

    /// Exactly once when the output topic has at least as many partitions as the input: then
    /// the output's tail reader is made; else at least once, said in the log.
    fn start_exactly_once(&mut self) -> bool {
        let count = |topic: &str| {
            self.consumer
                .fetch_metadata(Some(topic), Duration::from_secs(10))
                .ok()
                .and_then(|md| md.topics().first().map(|t| t.partitions().len()))
                .filter(|&n| n > 0)
        };
        let (name, topic, output) = (
            &self.config.name,
            &self.config.topic,
            &self.config.output_topic,
        );
        let (input, out) = (count(topic), count(output));
        match (input, out) {
            (Some(i), Some(o)) if o >= i => {}
            _ => {
                tracing::warn!(scorer = %name, topic = %topic, output_topic = %output, input_partitions = ?input, output_partitions = ?out,
                    "scorer delivers at least once: exactly once needs an output topic with at least as many partitions as the input (predictions of input partition i go to output partition i)");
                return false;
            }
        }
        let reader: Result<BaseConsumer, _> = self
            .clients
            .reader(
                crate::kafka::Client::ScorerConsumer,
                &self.config.group(self.clients.group()),
            )
            .create();
        match reader {
            Ok(reader) => {
                *super::lock(&self.consumer.context().tail) = Some(Tail {
                    reader,
                    scorer: name.clone(),
                    topic: topic.clone(),
                    output: output.clone(),
                });
                true
            }
            Err(e) => {
                tracing::warn!(scorer = %name, error = %self.clients.scrub(&e.to_string()), "scorer delivers at least once: cannot create the reader of its output's tail");
                false
            }
        }
    }

    /// Standalone: assigns every partition of the topic not assigned yet, each where it
    /// resumes (`ScorerContext::starts`).
    fn assign_new(&mut self) {
        let Some((_, have, at)) = &mut self.standalone else {
            return;
        };
        *at = Instant::now();
        let Ok(md) = self
            .consumer
            .fetch_metadata(Some(&self.config.topic), Duration::from_secs(5))
        else {
            return;
        };
        let Some(t) = md.topics().first() else { return };
        if t.error().is_some() {
            return;
        }
        let mut tpl = TopicPartitionList::new();
        let mut new = Vec::new();
        for p in t.partitions() {
            if !have.contains(&p.id()) {
                tpl.add_partition(&self.config.topic, p.id());
                new.push(p.id());
            }
        }
        drop(md);
        if new.is_empty() {
            return;
        }
        self.consumer
            .context()
            .assign(&self.consumer, &mut tpl, true);
        let assigned = super::lock(&self.consumer.context().assigned).clone();
        have.extend(new.into_iter().filter(|p| assigned.contains(p)));
    }

    /// Extracts the model again when the stream's snapshot changed and `refresh_ms` passed
    /// (or there is none yet). Returns whether there is a model.
    fn refresh(&mut self) -> bool {
        let snapshot = self.stream.snapshot();
        if let Some(c) = self.held.newest()
            && (Arc::ptr_eq(&c.snapshot, &snapshot)
                || c.at.elapsed() < Duration::from_millis(self.config.refresh_ms))
        {
            return true;
        }
        if snapshot.stats.n() == 0 || !self.held.has_room() {
            return self.held.newest().is_some();
        }
        let extracted = model_from_folds(
            &snapshot.stats,
            snapshot.folds.as_ref(),
            &self.model,
            self.stream.names(),
        );
        match extracted {
            Ok(model) => {
                self.metrics
                    .scorers
                    .scorer_model_rows
                    .with_label_values(&[&self.config.name])
                    .set(model.n as i64);
                let version = serde_json::json!({
                    "stream": self.stream.name(),
                    "n": model.n,
                    "as_of": snapshot.as_of_ms,
                    "spec": self.spec,
                });
                self.held.take(Current {
                    model,
                    snapshot,
                    at: Instant::now(),
                    version,
                });
                self.report();
            }
            Err(e) => {
                if self.admit_log("model") {
                    tracing::warn!(scorer = %self.config.name, stream = %self.stream.name(), error = %e, "cannot extract the scorer's model; it keeps the last one (or waits for one)");
                }
            }
        }
        self.held.newest().is_some()
    }

    fn admit_log(&mut self, kind: &'static str) -> bool {
        admit(&mut self.logs, kind)
    }

    /// Reads a batch, scores it, waits for its predictions and dead letters to be
    /// acknowledged, then commits its offsets.
    fn batch(&mut self) {
        let mut messages = Vec::new();
        let mut wait = Duration::from_millis(100);
        while messages.len() < BATCH_MESSAGES {
            match self.consumer.poll(wait) {
                Some(Ok(m)) => messages.push(m),
                Some(Err(e)) => {
                    if admit(&mut self.logs, "consumer") {
                        tracing::warn!(scorer = %self.config.name, error = %self.clients.scrub(&e.to_string()), "scorer consumer error");
                    }
                    break;
                }
                None => break,
            }
            wait = Duration::ZERO;
        }
        // Messages of partitions revoked while the batch was gathered are another member's now.
        {
            let assigned = super::lock(&self.consumer.context().assigned);
            messages.retain(|m| assigned.contains(&m.partition()));
        }
        if messages.is_empty() {
            return;
        }
        let Some(newest) = self.held.newest() else {
            return;
        };
        // Exactly once: each output partition's end before this batch, where a failed batch's
        // partitions look for what was delivered.
        let ends_before = super::lock(&self.producer.context().ends).clone();
        self.batch += 1;
        // Per partition: the first offset of the batch, and the next one to commit.
        let mut first: BTreeMap<i32, i64> = BTreeMap::new();
        let mut next: BTreeMap<i32, i64> = BTreeMap::new();
        // Partitions stopped at a message whose schema could not be fetched.
        let mut stopped: BTreeMap<i32, i64> = BTreeMap::new();
        let (mut scored, mut copies) = (0u64, 0usize);
        let mut rejected: Vec<(Reason, String)> = Vec::new();
        for m in &messages {
            let (p, o) = (m.partition(), m.offset());
            if stopped.contains_key(&p) {
                continue;
            }
            first.entry(p).or_insert(o);
            let (current, before) = self.held.for_event(p, o).unwrap_or((newest, None));
            match score(&self.stream, current, m, before, self.config.interval) {
                Ok(payload) => {
                    if before == Some(false) {
                        self.metrics
                            .scorers
                            .scorer_events_in_model
                            .with_label_values(&[&self.config.name])
                            .inc();
                    }
                    self.send(m, payload, current.model.n);
                    scored += 1;
                }
                Err(r) if r.reason == Reason::Unavailable => {
                    stopped.insert(p, o);
                    continue;
                }
                Err(r) => {
                    self.metrics
                        .scorers
                        .scorer_rejected
                        .with_label_values(&[&self.config.name, r.reason.as_str()])
                        .inc();
                    if let Some(d) = &self.dead_letters {
                        d.send(dlq::Copy::new(
                            &self.config.name,
                            &self.config.topic,
                            p,
                            o,
                            m.key(),
                            m.payload().unwrap_or_default(),
                            &r,
                        ));
                        copies += 1;
                    }
                    rejected.push((r.reason, r.message));
                }
            }
            next.insert(p, o + 1);
        }
        drop(messages);
        for (reason, message) in rejected {
            if self.admit_log("rejected") {
                match (&self.topic_of_stream, &self.dead_letters) {
                    (Some(stream), _) => {
                        tracing::warn!(scorer = %self.config.name, reason = reason.as_str(), error = %message, stream = %stream, "scorer refused a message of its stream's topic (no prediction; the stream dead-letters it)")
                    }
                    (None, Some(_)) => {
                        tracing::warn!(scorer = %self.config.name, reason = reason.as_str(), error = %message, "scorer refused a message (dead-lettered, no prediction)")
                    }
                    (None, None) => {
                        tracing::warn!(scorer = %self.config.name, reason = reason.as_str(), error = %message, "scorer refused a message (no prediction; ingest.dead_letter = false)")
                    }
                }
            }
        }
        let delivered = self.await_deliveries(scored) && self.await_dead_letters(copies);
        if !delivered {
            // Score the batch again from its start (at least once), or, exactly once, from
            // after the last of its predictions the output holds.
            for (&p, &o) in &first {
                let resumed = if self.exactly_once {
                    let tail = super::lock(&self.consumer.context().tail);
                    tail.as_ref()
                        .and_then(|t| t.resume(p, ends_before.get(&p).copied()).ok())
                        .flatten()
                } else {
                    None
                };
                self.seek(p, resumed.map_or(o, |r| r.max(o)));
            }
            std::thread::sleep(Duration::from_secs(1));
            return;
        }
        for (&p, &o) in &stopped {
            self.seek(p, o);
        }
        self.metrics
            .scorers
            .scorer_messages
            .with_label_values(&[&self.config.name])
            .inc_by(scored);
        let mut tpl = TopicPartitionList::new();
        if let Some((watch, have, _)) = &mut self.standalone {
            let parts = have.iter().map(|&p| (self.config.topic.clone(), p));
            watch.check(&self.consumer, parts, Duration::from_millis(500));
        }
        let ends = super::lock(&self.producer.context().ends).clone();
        for (&p, &o) in &next {
            let mut e = tpl.add_partition(&self.config.topic, p);
            let _ = e.set_offset(Offset::Offset(o));
            // The output's end at this commit: where the next assignment's tail scan starts.
            let more: Vec<(&str, String)> = match ends.get(&p) {
                Some(end) if self.exactly_once => vec![("out", end.to_string())],
                _ => vec![],
            };
            let metadata = match &self.standalone {
                Some((watch, _, _)) => Some(watch.metadata_with(&more)),
                None if !more.is_empty() => Some(crate::kafka::standalone::metadata(
                    &crate::kafka::standalone::instance_name(self.clients.instance_id()),
                    crate::unix_ms(std::time::SystemTime::now()),
                    &more,
                )),
                None => None,
            };
            if let Some(m) = metadata {
                e.set_metadata(m);
            }
        }
        if tpl.count() > 0
            && let Err(e) = self.consumer.commit(&tpl, CommitMode::Sync)
            && self.admit_log("commit")
        {
            tracing::warn!(scorer = %self.config.name, error = %self.clients.scrub(&e.to_string()), "scorer commit failed; its messages may be scored again after a restart");
        }
        if self.topic_of_stream.is_some() {
            let assigned = super::lock(&self.consumer.context().assigned).clone();
            self.held.read(&next, &assigned);
        }
    }
}

/// Whether a log line of `kind` may be written now (`log_rate`).
fn admit(logs: &mut BTreeMap<&'static str, RateLimit>, kind: &'static str) -> bool {
    logs.entry(kind)
        .or_insert_with(|| RateLimit::new(dlq::LOG_EVERY))
        .admit(Instant::now())
        .is_some()
}
