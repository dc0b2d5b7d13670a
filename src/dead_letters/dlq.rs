//! The dead-letter producer: every rejected message is copied, unchanged, to `<topic>.dlq` with
//! headers saying why (`ravel-reason`: the rejection reason label, `ravel-error`: the
//! message) and where it came from (`ravel-stream`, `ravel-source-topic`,
//! `ravel-source-partition`, `ravel-source-offset`), beside the message's own headers (a
//! schema id in `__value_schema_id`), so a user can inspect, fix and replay it (`ravel
//! replay` re-produces it with its own headers, less ravel's).
//!
//! The producer lives on its own thread (`ravel-dlq`), so the ingest thread never waits on it:
//! ingest hands a `Copy` over a channel and reads `Outcome`s back when it likes. A copy whose
//! delivery fails (the topic is missing, not writable, the cluster is away) is counted in
//! `ravel_dead_letter_failures_total`, logged with the reason and its coordinates, and then,
//! with `dlq.on_failure = "block"`, sent again after a backoff that doubles up to
//! `dlq.retry_max_ms`, until it is delivered; with `"skip"` it is given up, counted in
//! `ravel_dead_letters_skipped_total` and logged. Copies are pipelined: the thread never waits
//! for one before sending the next, so librdkafka batches them like any produce (`linger.ms`),
//! and a burst of bad messages costs about what the same burst of good rows costs. What a
//! checkpoint must wait for is ingest's business (`dead_letters::held`): this module only delivers
//! and reports. Delivery is once across restarts without Kafka transactions: the first copy
//! to a dead-letter topic after a start reads that topic's last `MAX_TAIL` messages (`Tail`),
//! and a copy whose source (stream, topic, partition, offset) is already there, sent before
//! a crash by the process that read the message then, is reported delivered and not sent
//! again. Its limits: more than `MAX_TAIL` copies between the restart's checkpoint and the
//! crash, or retention deleting them, let the older ones be sent again; a dead-letter topic
//! that cannot be read makes delivery at least once (said in the log). Its log lines are bounded per stream and kind (`log_rate`): one line every
//! `LOG_EVERY` at most, with the number of events held back since, never one per copy.
//! A message too large to copy whole is copied as a truncated envelope: its first 16 KiB,
//! the headers, and `ravel-truncated-from` with its length.

use super::log_rate::RateLimit;
use crate::config::{DlqConfig, OnFailure};
use crate::kafka::send::{send_waiting, with_headers};
use crate::metrics::Metrics;
use crate::reason::Rejection;
use crate::state::arrivals::Arrivals;
use rdkafka::ClientContext;
use rdkafka::config::ClientConfig;
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, OwnedHeaders};
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};
use std::collections::{HashMap, HashSet};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// One rejected message to copy, owned (it may be sent several times).
#[derive(Debug, Clone)]
pub struct Copy {
    pub stream: String,
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
    pub key: Option<Vec<u8>>,
    pub payload: Vec<u8>,
    pub reason: String,
    pub error: String,
    /// The original payload's length when the copy carries only its first
    /// `TRUNCATED_BYTES` (the whole message was over the producer's or topic's size limit).
    pub truncated_from: Option<usize>,
    /// The message's own headers (those named `ravel-...` left out: the copy's are ravel's).
    pub headers: Vec<(String, Option<Vec<u8>>)>,
    /// The stream's tallies, where its delivery, failures and skips are counted too (None:
    /// a scorer's copy).
    pub arrivals: Option<Arc<Arrivals>>,
}

/// At most this many messages of each partition of a dead-letter topic are read back at the
/// first copy after a start, for the copies already there.
pub const MAX_TAIL: i64 = 100_000;
/// How long reading a dead-letter topic's tail may take.
const TAIL_WAIT: Duration = Duration::from_secs(30);

/// A copy's source: stream, topic, partition, offset.
type Source = (String, String, i32, i64);

/// Reads the copies already in a dead-letter topic.
struct Tail {
    /// A consumer assigned the topic being read (`KafkaClients::reader`).
    reader: rdkafka::consumer::BaseConsumer,
}

impl Tail {
    /// The sources of the copies among the last `MAX_TAIL` messages of each partition of `dlq`.
    fn sources(&self, dlq: &str) -> Result<HashSet<Source>, String> {
        use rdkafka::consumer::Consumer;
        use rdkafka::message::{Headers, Message};
        use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
        let md = self
            .reader
            .fetch_metadata(Some(dlq), Duration::from_secs(10))
            .map_err(|e| e.to_string())?;
        let parts: Vec<i32> = md
            .topics()
            .first()
            .map(|t| t.partitions().iter().map(|p| p.id()).collect())
            .unwrap_or_default();
        let mut tpl = TopicPartitionList::new();
        let mut ends = HashMap::new();
        for p in parts {
            let (low, high) = self
                .reader
                .fetch_watermarks(dlq, p, Duration::from_secs(10))
                .map_err(|e| e.to_string())?;
            if high > low {
                tpl.add_partition_offset(dlq, p, Offset::Offset((high - MAX_TAIL).max(low)))
                    .map_err(|e| e.to_string())?;
                ends.insert(p, high);
            }
        }
        let mut out = HashSet::new();
        if ends.is_empty() {
            return Ok(out);
        }
        self.reader.assign(&tpl).map_err(|e| e.to_string())?;
        let start = Instant::now();
        let result = loop {
            if ends.is_empty() {
                break Ok(());
            }
            if start.elapsed() > TAIL_WAIT {
                break Err(format!(
                    "not read to its end within {} s",
                    TAIL_WAIT.as_secs()
                ));
            }
            match self.reader.poll(Duration::from_millis(100)) {
                Some(Ok(m)) => {
                    if let Some(h) = m.headers() {
                        let get = |key: &str| {
                            h.iter()
                                .find(|x| x.key == key)
                                .and_then(|x| x.value)
                                .and_then(|v| std::str::from_utf8(v).ok())
                        };
                        if let (Some(st), Some(t), Some(p), Some(o)) = (
                            get("ravel-stream"),
                            get("ravel-source-topic"),
                            get("ravel-source-partition").and_then(|v| v.parse().ok()),
                            get("ravel-source-offset").and_then(|v| v.parse().ok()),
                        ) {
                            out.insert((st.to_string(), t.to_string(), p, o));
                        }
                    }
                    if ends
                        .get(&m.partition())
                        .is_some_and(|&e| m.offset() >= e - 1)
                    {
                        ends.remove(&m.partition());
                    }
                }
                Some(Err(e)) => break Err(e.to_string()),
                None => {}
            }
        };
        let _ = self.reader.unassign();
        result.map(|()| out)
    }
}

/// What a copy keeps of a payload too large to copy whole.
pub const TRUNCATED_BYTES: usize = 16 * 1024;

/// At most one log line per stream and kind of event (failed, skipped, delivered after
/// retries) in this interval; the next line says how many were held back.
pub const LOG_EVERY: Duration = Duration::from_secs(5);

impl Copy {
    /// Counts what became of the copy: in `counter`, by its stream, and in its stream's
    /// arrivals (`arrived`).
    fn counted(&self, counter: &prometheus::IntCounterVec, arrived: fn(&Arrivals)) {
        counter.with_label_values(&[self.stream.as_str()]).inc();
        if let Some(a) = &self.arrivals {
            arrived(a);
        }
    }

    pub fn new(
        stream: &str,
        topic: &str,
        partition: i32,
        offset: i64,
        key: Option<&[u8]>,
        payload: &[u8],
        rejection: &Rejection,
    ) -> Copy {
        Copy {
            stream: stream.to_string(),
            topic: topic.to_string(),
            partition,
            offset,
            key: key.map(<[u8]>::to_vec),
            payload: payload.to_vec(),
            reason: rejection.reason.as_str().to_string(),
            error: rejection.message.clone(),
            truncated_from: None,
            headers: Vec::new(),
            arrivals: None,
        }
    }

    /// The copy counted in its stream's tallies (`crate::state::arrivals`) too.
    pub fn counted_in(mut self, arrivals: Option<Arc<Arrivals>>) -> Copy {
        self.arrivals = arrivals;
        self
    }

    /// The copy with the message's own headers (`ravel-...` ones left out).
    pub fn with_headers(mut self, headers: Option<&rdkafka::message::BorrowedHeaders>) -> Copy {
        use rdkafka::message::Headers;
        self.headers = headers
            .into_iter()
            .flat_map(|h| h.iter())
            .filter(|h| !h.key.starts_with("ravel-"))
            .map(|h| (h.key.to_string(), h.value.map(<[u8]>::to_vec)))
            .collect();
        self
    }
}

/// What became of a copy.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The copy is in `<topic>.dlq`.
    Delivered {
        topic: String,
        partition: i32,
        offset: i64,
    },
    /// An attempt failed; with `block` the next one comes after `retry_in`.
    Failed {
        topic: String,
        partition: i32,
        offset: i64,
        error: String,
        /// Kafka refused this client's principal (an ACL).
        denied: bool,
        attempts: u32,
        retry_in: Option<Duration>,
    },
}

/// A copy in flight: the copy and how many attempts failed before this one.
pub struct Attempt {
    copy: Copy,
    failed: u32,
}

/// A delivery report: the attempt back, and how it went.
type Report = (Box<Attempt>, Result<(), KafkaError>);

pub struct DlqContext {
    reports: Mutex<Vec<Report>>,
}

impl ClientContext for DlqContext {}

impl ProducerContext for DlqContext {
    type DeliveryOpaque = Box<Attempt>;
    fn delivery(&self, result: &DeliveryResult<'_>, attempt: Box<Attempt>) {
        let r = match result {
            Ok(_) => Ok(()),
            Err((e, _)) => Err(e.clone()),
        };
        crate::lock(&self.reports).push((attempt, r));
    }
}

/// Ingest's handle on the dead-letter thread.
pub struct DeadLetters {
    copies: Option<Sender<Copy>>,
    outcomes: Receiver<Outcome>,
    thread: Option<JoinHandle<()>>,
}

impl DeadLetters {
    /// Creates the producer (`config` is the dead-letter client's) and starts its thread;
    /// `reader` (`KafkaClients::reader`'s configuration) reads the copies already in each
    /// dead-letter topic (None: none are looked for, delivery is at least once).
    pub fn start(
        config: &ClientConfig,
        reader: Option<&ClientConfig>,
        dlq: &DlqConfig,
        metrics: Arc<Metrics>,
    ) -> anyhow::Result<Self> {
        let mut config = config.clone();
        // Every attempt ends (delivered or failed) within the delivery timeout; the user's
        // options may still override it.
        if config.get("message.timeout.ms").is_none() {
            config.set("message.timeout.ms", dlq.delivery_timeout_ms.to_string());
        }
        let producer: BaseProducer<DlqContext> = config
            .create_with_context(DlqContext {
                reports: Mutex::new(Vec::new()),
            })
            .map_err(|e| anyhow::anyhow!("cannot create the dead-letter producer: {e}"))?;
        let tail = match reader {
            Some(r) => Some(Tail {
                reader: r
                    .create()
                    .map_err(|e| anyhow::anyhow!("cannot create the dead-letter reader: {e}"))?,
            }),
            None => None,
        };
        let (copies, copies_rx) = mpsc::channel();
        let (outcomes_tx, outcomes) = mpsc::channel();
        let worker = Worker {
            tail,
            there: HashMap::new(),
            producer,
            metrics,
            mode: dlq.on_failure,
            initial: Duration::from_millis(dlq.retry_initial_ms),
            max: Duration::from_millis(dlq.retry_max_ms),
            outcomes: outcomes_tx,
            retries: Vec::new(),
            logs: HashMap::new(),
        };
        let thread = std::thread::Builder::new()
            .name("ravel-dlq".into())
            .spawn(move || worker.run(copies_rx))
            .map_err(|e| anyhow::anyhow!("cannot start the dead-letter thread: {e}"))?;
        Ok(DeadLetters {
            copies: Some(copies),
            outcomes,
            thread: Some(thread),
        })
    }

    /// Hands a copy to the dead-letter thread; never waits.
    pub fn send(&self, copy: Copy) {
        if let Some(tx) = &self.copies
            && tx.send(copy).is_err()
        {
            tracing::error!("the dead-letter thread is gone; copy not sent");
        }
    }

    /// The outcomes reported since the last call.
    pub fn outcomes(&self) -> Vec<Outcome> {
        self.outcomes.try_iter().collect()
    }
}

impl Drop for DeadLetters {
    /// Stops the thread: it serves what is in flight for at most a few seconds.
    fn drop(&mut self) {
        self.copies.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

struct Worker {
    producer: BaseProducer<DlqContext>,
    tail: Option<Tail>,
    /// Per dead-letter topic, the sources of the copies found there at its first copy
    /// (empty when it could not be read).
    there: HashMap<String, HashSet<Source>>,
    metrics: Arc<Metrics>,
    mode: OnFailure,
    initial: Duration,
    max: Duration,
    outcomes: Sender<Outcome>,
    /// Failed copies waiting for their next attempt.
    retries: Vec<(Instant, Attempt)>,
    /// Log rate limits by stream and kind of line.
    logs: HashMap<(String, Kind), RateLimit>,
}

/// The kinds of line the dead-letter thread logs, each limited on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Kind {
    /// A failed attempt, to be retried (`block`).
    Retry,
    /// A failed copy given up (`skip`).
    Skipped,
    /// A copy delivered after failed attempts.
    Recovered,
}

impl Worker {
    fn run(mut self, copies: Receiver<Copy>) {
        loop {
            match copies.recv_timeout(Duration::from_millis(20)) {
                Ok(copy) => self.submit(Attempt { copy, failed: 0 }),
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => break,
            }
            for copy in copies.try_iter().collect::<Vec<_>>() {
                self.submit(Attempt { copy, failed: 0 });
            }
            self.serve_reports();
            self.retry_due();
            self.log_overdue(false);
        }
        // Shutting down: give what is in flight a moment. Nothing depends on it: a partition
        // held at a copy was not committed past it, so the next start sends it again.
        let _ = self.producer.flush(Duration::from_secs(2));
        self.serve_reports();
        self.log_overdue(true);
    }

    /// Whether a line of `kind` for `stream` may be logged now: `Some(held back since the last
    /// one)`.
    fn admit(&mut self, stream: &str, kind: Kind) -> Option<u64> {
        self.logs
            .entry((stream.to_string(), kind))
            .or_insert_with(|| RateLimit::new(LOG_EVERY))
            .admit(Instant::now())
    }

    /// Says how many lines were held back where no line came since to say it (`all`: at
    /// once, at shutdown).
    fn log_overdue(&mut self, all: bool) {
        let now = Instant::now();
        for ((stream, kind), limit) in self.logs.iter_mut() {
            let held_back = if all {
                limit.rest(now)
            } else {
                limit.overdue(now)
            };
            let Some(n) = held_back else {
                continue;
            };
            match kind {
                Kind::Retry => tracing::error!(
                    stream = %stream, suppressed = n,
                    "{n} more dead-letter copies not delivered; they are sent again, and their partitions' checkpoints and commits wait for them"
                ),
                Kind::Skipped => tracing::error!(
                    stream = %stream, suppressed = n,
                    "{n} more dead-letter copies not delivered; messages skipped (dlq.on_failure = skip)"
                ),
                Kind::Recovered => tracing::info!(
                    stream = %stream, suppressed = n,
                    "{n} more dead-letter copies delivered after retries"
                ),
            }
        }
    }

    /// Serves delivery reports and acts on them.
    fn serve_reports(&mut self) {
        self.producer.poll(Duration::ZERO);
        let reports = std::mem::take(&mut *crate::lock(&self.producer.context().reports));
        for (attempt, result) in reports {
            match result {
                Ok(()) => {
                    let c = &attempt.copy;
                    c.counted(&self.metrics.ingest.dead_letters, Arrivals::delivered);
                    if attempt.failed > 0
                        && let Some(suppressed) = self.admit(&c.stream, Kind::Recovered)
                    {
                        tracing::info!(
                            stream = %c.stream, topic = %c.topic, partition = c.partition, offset = c.offset,
                            attempts = attempt.failed + 1, suppressed,
                            "dead-letter copy delivered after retries"
                        );
                    }
                    let _ = self.outcomes.send(Outcome::Delivered {
                        topic: c.topic.clone(),
                        partition: c.partition,
                        offset: c.offset,
                    });
                }
                Err(e) => self.failed(*attempt, e),
            }
        }
    }

    /// Whether the copy is in its dead-letter topic already (sent before a restart); the
    /// topic's tail is read at its first copy.
    fn already_there(&mut self, dlq: &str, c: &Copy) -> bool {
        let Some(tail) = &self.tail else {
            return false;
        };
        let there = self.there.entry(dlq.to_string()).or_insert_with(|| {
            match tail.sources(dlq) {
                Ok(s) => {
                    tracing::info!(topic = %dlq, copies = s.len(), "dead-letter topic's tail read: copies already there are not sent again");
                    s
                }
                Err(e) => {
                    tracing::warn!(topic = %dlq, error = %e, "cannot read the dead-letter topic's tail: copies sent before a crash may be sent again");
                    HashSet::new()
                }
            }
        });
        there.remove(&(c.stream.clone(), c.topic.clone(), c.partition, c.offset))
    }

    /// Queues one attempt; a failure to queue counts as a failed attempt. A first attempt of a
    /// copy already in its topic is reported delivered without sending it.
    fn submit(&mut self, attempt: Attempt) {
        let dlq = crate::config::dlq_of(&attempt.copy.topic);
        if attempt.failed == 0 && self.already_there(&dlq, &attempt.copy) {
            let c = &attempt.copy;
            let _ = self.outcomes.send(Outcome::Delivered {
                topic: c.topic.clone(),
                partition: c.partition,
                offset: c.offset,
            });
            return;
        }
        let c = &attempt.copy;
        let (key, payload) = (c.key.clone(), c.payload.clone());
        let (partition, offset) = (c.partition.to_string(), c.offset.to_string());
        let truncated = c.truncated_from.map(|n| n.to_string());
        let mut headers = OwnedHeaders::new_with_capacity(c.headers.len() + 7);
        for (k, v) in &c.headers {
            headers = headers.insert(Header {
                key: k.as_str(),
                value: v.as_deref(),
            });
        }
        let mut headers = with_headers(
            headers,
            &[
                ("ravel-reason", c.reason.as_str()),
                ("ravel-error", c.error.as_str()),
                ("ravel-stream", c.stream.as_str()),
                ("ravel-source-topic", c.topic.as_str()),
                ("ravel-source-partition", partition.as_str()),
                ("ravel-source-offset", offset.as_str()),
            ],
        );
        if let Some(n) = &truncated {
            headers = with_headers(headers, &[("ravel-truncated-from", n.as_str())]);
        }
        let mut rec = BaseRecord::with_opaque_to(&dlq, Box::new(attempt))
            .payload(&payload)
            .headers(headers);
        if let Some(k) = &key {
            rec = rec.key(k);
        }
        if let Err((e, r)) = send_waiting(&self.producer, rec) {
            self.failed(*r.delivery_opaque, e);
        }
    }

    /// An attempt failed: count, log, and retry (`block`) or give up (`skip`). A copy over the
    /// size limit is sent again at once as a truncated envelope (the first `TRUNCATED_BYTES`
    /// of the payload, the headers, and `ravel-truncated-from` with the original length):
    /// sending it whole again would fail forever.
    fn failed(&mut self, mut attempt: Attempt, error: KafkaError) {
        if error.rdkafka_error_code() == Some(RDKafkaErrorCode::MessageSizeTooLarge)
            && attempt.copy.truncated_from.is_none()
            && attempt.copy.payload.len() > TRUNCATED_BYTES
        {
            let c = &mut attempt.copy;
            tracing::warn!(
                stream = %c.stream, topic = %c.topic, partition = c.partition, offset = c.offset,
                bytes = c.payload.len(), kept = TRUNCATED_BYTES, error = %error,
                "rejected message too large to copy whole; its dead-letter copy is truncated (header ravel-truncated-from)"
            );
            c.truncated_from = Some(c.payload.len());
            c.payload.truncate(TRUNCATED_BYTES);
            self.submit(attempt);
            return;
        }
        let denied = error
            .rdkafka_error_code()
            .is_some_and(crate::kafka::authz::is_denied);
        let error = error.to_string();
        attempt.failed += 1;
        let kind = match self.mode {
            OnFailure::Block => Kind::Retry,
            OnFailure::Skip => Kind::Skipped,
        };
        let log = self.admit(&attempt.copy.stream, kind);
        let c = &attempt.copy;
        c.counted(&self.metrics.ingest.dead_letter_failures, Arrivals::failed);
        let dlq = crate::config::dlq_of(&c.topic);
        let retry_in = match self.mode {
            OnFailure::Block => {
                let doubling = 2u32.saturating_pow(attempt.failed.saturating_sub(1).min(20));
                let wait = self.initial.saturating_mul(doubling).min(self.max);
                if let Some(suppressed) = log {
                    tracing::error!(
                        stream = %c.stream, topic = %c.topic, partition = c.partition, offset = c.offset,
                        dead_letter_topic = %dlq, error = %error, attempts = attempt.failed,
                        retry_in_ms = wait.as_millis() as u64, suppressed,
                        "dead-letter copy not delivered; it is sent again, and the partition's checkpoints and commits stay before this message until it is delivered"
                    );
                }
                Some(wait)
            }
            OnFailure::Skip => {
                c.counted(&self.metrics.ingest.dead_letters_skipped, Arrivals::skipped);
                if let Some(suppressed) = log {
                    tracing::error!(
                        stream = %c.stream, topic = %c.topic, partition = c.partition, offset = c.offset,
                        dead_letter_topic = %dlq, error = %error, suppressed,
                        "dead-letter copy not delivered; message skipped (dlq.on_failure = skip)"
                    );
                }
                None
            }
        };
        let _ = self.outcomes.send(Outcome::Failed {
            topic: c.topic.clone(),
            partition: c.partition,
            offset: c.offset,
            error,
            denied,
            attempts: attempt.failed,
            retry_in,
        });
        if let Some(wait) = retry_in {
            self.retries.push((Instant::now() + wait, attempt));
        }
    }

    /// Sends again every failed copy whose backoff is over. The topic's metadata is asked for
    /// first: librdkafka remembers a missing topic and would fail the new attempt at once.
    fn retry_due(&mut self) {
        let now = Instant::now();
        if !self.retries.iter().any(|(at, _)| *at <= now) {
            return;
        }
        let (due, wait): (Vec<_>, Vec<_>) = std::mem::take(&mut self.retries)
            .into_iter()
            .partition(|(at, _)| *at <= now);
        self.retries = wait;
        let mut refreshed: Vec<String> = Vec::new();
        for (_, attempt) in due {
            let dlq = crate::config::dlq_of(&attempt.copy.topic);
            if !refreshed.contains(&dlq) {
                let _ = self
                    .producer
                    .client()
                    .fetch_metadata(Some(&dlq), Duration::from_secs(5));
                refreshed.push(dlq);
            }
            self.submit(attempt);
        }
    }
}
