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
//! Delivery is at least once: a batch's offsets are committed only after every prediction
//! (and every dead-letter copy) of it is acknowledged; a failed delivery rewinds its
//! partitions to the batch's start and scores them again. A crash between acknowledgement and
//! commit scores those events again (the source coordinates in each prediction's headers let
//! a consumer drop the repeats).
//!
//! Exactly once with Kafka transactions is not offered: no broker these tests run delivers
//! it, so it could not be shown to work (`scripts/txn_probe.py` checks a broker with a plain
//! confluent-kafka client; docs/compatibility.md has the results). The embedded broker
//! accepts every transactional call but writes no markers and its TxnOffsetCommit commits
//! nothing. Tansu 0.6.0 commits, aborts, moves the group's offsets with the transaction and
//! hides open transactions, but answers every Fetch with an empty list of aborted
//! transactions, so a `read_committed` consumer sees aborted records: after a SIGKILL, the
//! killed scorer's transaction, which the restarted one's `init_transactions` aborts, would
//! show next to the rescored predictions, exactly the duplicates transactions exist to hide.

use crate::config::DlqConfig;
use crate::config::scorers::ScorerConfig;
use crate::ingest::dead_letters::RateLimit;
use crate::ingest::dead_letters::dlq::{self, DeadLetters};
use crate::ingest::decode::format::{self, Reason, Rejection};
use crate::kafka::KafkaClients;
use crate::metrics::Metrics;
use crate::shutdown::Shutdown;
use crate::state::streams::{Snapshot, StreamHandle};
use ravel_core::Task;
use ravel_core::solve::{Checked, Model, Request, model_from_folds};
use rdkafka::ClientContext;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{BorrowedMessage, Header, Message, OwnedHeaders};
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

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
    pub metrics: Arc<Metrics>,
    pub health: Arc<crate::health::Health>,
    pub shutdown: Shutdown,
}

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

/// The model a scorer predicts with, and the snapshot it came from.
struct Current {
    model: Model,
    snapshot: Arc<Snapshot>,
    at: Instant,
    /// `{"stream", "n", "as_of", "spec"}`, as every prediction carries it.
    version: serde_json::Value,
}

/// Delivery reports of the predictions, by batch (a report of an earlier batch, late after
/// that batch was given up, must not count for the next): how many were delivered, and the
/// source partition and offset of each failed one.
#[derive(Default)]
struct Reports {
    delivered: Mutex<BTreeMap<u64, u64>>,
    failed: Mutex<Vec<(u64, i32, i64, String)>>,
}

impl ClientContext for Reports {}

impl ProducerContext for Reports {
    /// The batch, and the source partition and offset.
    type DeliveryOpaque = Box<(u64, i32, i64)>;
    fn delivery(&self, result: &DeliveryResult<'_>, source: Box<(u64, i32, i64)>) {
        let (batch, p, o) = *source;
        match result {
            Ok(_) => *crate::lock(&self.delivered).entry(batch).or_default() += 1,
            Err((e, _)) => crate::lock(&self.failed).push((batch, p, o, e.to_string())),
        }
    }
}

struct Scorer {
    config: ScorerConfig,
    /// The model request, checked once against the stream's p.
    model: Checked,
    /// A hash of the model request, in every prediction's model version.
    spec: String,
    stream: Arc<StreamHandle>,
    clients: KafkaClients,
    consumer: BaseConsumer,
    producer: BaseProducer<Reports>,
    dead_letters: Option<DeadLetters>,
    metrics: Arc<Metrics>,
    health: Arc<crate::health::Health>,
    shutdown: Shutdown,
    current: Option<Current>,
    logs: BTreeMap<&'static str, RateLimit>,
    /// The number of the batch being scored (`Reports`).
    batch: u64,
}

impl Scorer {
    fn new(s: ScorerSetup) -> anyhow::Result<Scorer> {
        let name = &s.config.name;
        let scrub = |e: KafkaError| s.clients.scrub(&e.to_string());
        let consumer: BaseConsumer = s
            .clients
            .scorer_consumer(&s.config.group(s.clients.group()))
            .create()
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
        let dead_letters = if s.dead_letter {
            Some(DeadLetters::start(
                &s.clients.dead_letters(),
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
            dead_letters,
            metrics: s.metrics,
            health: s.health,
            shutdown: s.shutdown,
            current: None,
            logs: BTreeMap::new(),
            batch: 0,
        })
    }

    /// What `/readyz` says of this scorer.
    fn report(&self) {
        self.health.set_scorer(crate::health::ScorerHealth {
            name: self.config.name.clone(),
            stream: self.config.stream.clone(),
            topic: self.config.topic.clone(),
            output_topic: self.config.output_topic.clone(),
            delivery: "at_least_once",
            state: if self.current.is_some() {
                "scoring"
            } else {
                "waiting_for_rows"
            },
            model_rows: self.current.as_ref().map(|c| c.model.n),
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
        if let Err(e) = self.consumer.subscribe(&[self.config.topic.as_str()]) {
            tracing::error!(scorer = %name, error = %self.clients.scrub(&e.to_string()), "cannot subscribe to the scorer's topic");
            return;
        }
        tracing::info!(scorer = %name, topic = %self.config.topic, output_topic = %self.config.output_topic, "scorer started");
        while !self.shutdown.is_triggered() {
            self.refresh();
            self.batch();
        }
        self.producer.poll(Duration::ZERO);
        tracing::info!(scorer = %name, "scorer stopped");
    }

    /// Extracts the model again when the stream's snapshot changed and `refresh_ms` passed
    /// (or there is none yet). Returns whether there is a model.
    fn refresh(&mut self) -> bool {
        let snapshot = self.stream.snapshot();
        if let Some(c) = &self.current
            && (Arc::ptr_eq(&c.snapshot, &snapshot)
                || c.at.elapsed() < Duration::from_millis(self.config.refresh_ms))
        {
            return true;
        }
        if snapshot.stats.n() == 0 {
            return self.current.is_some();
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
                    .scorer_model_rows
                    .with_label_values(&[&self.config.name])
                    .set(model.n as i64);
                let version = serde_json::json!({
                    "stream": self.stream.name(),
                    "n": model.n,
                    "as_of": snapshot.as_of_ms,
                    "spec": self.spec,
                });
                self.current = Some(Current {
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
        self.current.is_some()
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
        if messages.is_empty() {
            return;
        }
        let Some(current) = &self.current else { return };
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
            match score(&self.stream, current, m) {
                Ok(payload) => {
                    self.send(m, payload);
                    scored += 1;
                }
                Err(r) if r.reason == Reason::Unavailable => {
                    stopped.insert(p, o);
                    continue;
                }
                Err(r) => {
                    self.metrics
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
                tracing::warn!(scorer = %self.config.name, reason = reason.as_str(), error = %message, "scorer refused a message (dead-lettered, no prediction)");
            }
        }
        let delivered = self.await_deliveries(scored) && self.await_dead_letters(copies);
        if !delivered {
            // Score the batch again from its start: at least once.
            for (&p, &o) in &first {
                self.seek(p, o);
            }
            std::thread::sleep(Duration::from_secs(1));
            return;
        }
        for (&p, &o) in &stopped {
            self.seek(p, o);
        }
        self.metrics
            .scorer_messages
            .with_label_values(&[&self.config.name])
            .inc_by(scored);
        let mut tpl = TopicPartitionList::new();
        for (&p, &o) in &next {
            let _ = tpl.add_partition_offset(&self.config.topic, p, Offset::Offset(o));
        }
        if tpl.count() > 0
            && let Err(e) = self.consumer.commit(&tpl, CommitMode::Sync)
            && self.admit_log("commit")
        {
            tracing::warn!(scorer = %self.config.name, error = %self.clients.scrub(&e.to_string()), "scorer commit failed; its messages may be scored again after a restart");
        }
    }

    /// Sends a prediction: the event's key, its coordinates and the model's n in headers.
    fn send(&self, m: &BorrowedMessage<'_>, payload: Vec<u8>) {
        let (p, o) = (m.partition(), m.offset());
        let (ps, os, rows) = (
            p.to_string(),
            o.to_string(),
            self.current.as_ref().map_or(0, |c| c.model.n).to_string(),
        );
        let headers = OwnedHeaders::new()
            .insert(Header {
                key: "ravel-scorer",
                value: Some(self.config.name.as_str()),
            })
            .insert(Header {
                key: "ravel-source-topic",
                value: Some(self.config.topic.as_str()),
            })
            .insert(Header {
                key: "ravel-source-partition",
                value: Some(ps.as_str()),
            })
            .insert(Header {
                key: "ravel-source-offset",
                value: Some(os.as_str()),
            })
            .insert(Header {
                key: "ravel-model-rows",
                value: Some(rows.as_str()),
            });
        let mut record =
            BaseRecord::with_opaque_to(&self.config.output_topic, Box::new((self.batch, p, o)))
                .payload(&payload)
                .headers(headers);
        if let Some(k) = m.key() {
            record = record.key(k);
        }
        loop {
            match self.producer.send(record) {
                Ok(()) => return,
                Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), r)) => {
                    record = r;
                    self.producer.poll(Duration::from_millis(50));
                }
                Err((e, _)) => {
                    crate::lock(&self.producer.context().failed).push((
                        self.batch,
                        p,
                        o,
                        e.to_string(),
                    ));
                    return;
                }
            }
        }
    }

    /// Waits until `sent` predictions are reported; true when all were delivered.
    fn await_deliveries(&mut self, sent: u64) -> bool {
        let start = Instant::now();
        loop {
            self.producer.poll(Duration::from_millis(10));
            let batch = self.batch;
            let failed: Vec<_> = std::mem::take(&mut *crate::lock(&self.producer.context().failed))
                .into_iter()
                .filter(|f| f.0 == batch)
                .collect();
            if !failed.is_empty() {
                self.metrics
                    .scorer_delivery_failures
                    .with_label_values(&[&self.config.name])
                    .inc_by(failed.len() as u64);
                if self.admit_log("delivery") {
                    let (_, p, o, e) = &failed[0];
                    tracing::warn!(scorer = %self.config.name, output_topic = %self.config.output_topic, partition = p, offset = o, error = %self.clients.scrub(e), "predictions not delivered; their batch is scored again");
                }
                return false;
            }
            let mut delivered = crate::lock(&self.producer.context().delivered);
            // Reports of earlier batches are of no use any more.
            delivered.retain(|&b, _| b >= batch);
            if delivered.get(&batch).copied().unwrap_or(0) >= sent {
                delivered.remove(&batch);
                return true;
            }
            drop(delivered);
            if start.elapsed() > DELIVERY_WAIT
                || self.shutdown.is_triggered() && start.elapsed() > Duration::from_secs(10)
            {
                return false;
            }
        }
    }

    /// Waits until `copies` dead-letter copies are delivered (or given up under
    /// `dlq.on_failure = "skip"`).
    fn await_dead_letters(&mut self, copies: usize) -> bool {
        let Some(d) = &self.dead_letters else {
            return true;
        };
        let (start, mut done) = (Instant::now(), 0);
        while done < copies {
            for o in d.outcomes() {
                match o {
                    dlq::Outcome::Delivered { .. } => done += 1,
                    dlq::Outcome::Failed { retry_in: None, .. } => done += 1,
                    dlq::Outcome::Failed { .. } => {}
                }
            }
            if start.elapsed() > DELIVERY_WAIT || self.shutdown.is_triggered() {
                return done >= copies;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        true
    }

    fn seek(&self, partition: i32, offset: i64) {
        if let Err(e) = self.consumer.seek(
            &self.config.topic,
            partition,
            Offset::Offset(offset),
            Duration::from_secs(5),
        ) {
            tracing::warn!(scorer = %self.config.name, partition, offset, error = %e, "scorer cannot rewind a partition; its messages are read again after a restart");
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

/// A message's prediction, as the output's JSON, or why it has none.
fn score(
    stream: &StreamHandle,
    current: &Current,
    m: &BorrowedMessage<'_>,
) -> Result<Vec<u8>, Rejection> {
    let Some(payload) = m.payload() else {
        return Err(crate::ingest::dead_letters::rejections::no_payload());
    };
    let mut schema = crate::ingest::fold::schema(stream, m.headers());
    schema.unlabelled = true;
    let (mut x, mut y) = (Vec::new(), Vec::new());
    let mut tally = crate::ingest::decode::events::Tally::default();
    let rows = format::decode_tallied(payload, &schema, &mut x, &mut y, &mut tally)?;
    if tally.skipped_rows > 0 {
        return Err(Rejection {
            reason: Reason::MissingFeature,
            message: format!(
                "a field is missing and stream '{}' skips such rows (missing = \"skip_row\"): no prediction",
                stream.name()
            ),
        });
    }
    if rows == 0 {
        return Err(Rejection {
            reason: Reason::Malformed,
            message: "the message holds no row to score".into(),
        });
    }
    let p = stream.p();
    let values: Vec<f64> = x.chunks(p).map(|row| current.model.predict(row)).collect();
    let mut out = serde_json::Map::new();
    let classification = stream.task() == Task::Classification;
    let label = |s: f64| if s >= 0.0 { 1.0 } else { -1.0 };
    match (values.as_slice(), classification) {
        ([v], false) => {
            out.insert("prediction".into(), (*v).into());
        }
        ([v], true) => {
            out.insert("score".into(), (*v).into());
            out.insert("label".into(), label(*v).into());
        }
        (vs, false) => {
            out.insert("predictions".into(), vs.into());
        }
        (vs, true) => {
            out.insert("scores".into(), vs.into());
            let labels: Vec<f64> = vs.iter().map(|&v| label(v)).collect();
            out.insert("labels".into(), labels.into());
        }
    }
    out.insert("model".into(), current.version.clone());
    Ok(serde_json::to_vec(&out).expect("a JSON map serializes"))
}

/// A short, stable name of a model request: FNV-1a (64 bits) of its JSON, in hex.
fn spec_hash(request: &Request) -> String {
    let text = serde_json::to_string(request).expect("a request serializes");
    let hash = text.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    format!("{hash:016x}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_model_spec_hashes_the_same_every_time_and_apart_from_others() {
        let ols = spec_hash(&Request::ols());
        assert_eq!(ols, spec_hash(&Request::ols()));
        assert_ne!(ols, spec_hash(&Request::ridge(1.0)));
        assert_eq!(ols.len(), 16);
    }
}
