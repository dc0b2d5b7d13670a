//! `ravel replay`: dead letters brought back. Once the cause of a refusal is fixed (a field
//! renamed in the config, a schema restored in the registry), the copies in a stream's
//! `<topic>.dlq` are produced again, to the topic each came from (`ravel-source-topic`) or to
//! `--to`, with the original key, value and headers (the copy's `ravel-...` headers left out),
//! so that the service reads them as any new message.
//!
//! Filters: the stream (`ravel-stream`: streams reading one topic share its dead-letter topic),
//! the reasons (`ravel-reason`), the source partition and a range of source offsets. Once per
//! run: the dead-letter topic is read from its start up to its end as it was when the command
//! began, so a message refused again while the command runs is not replayed twice by it.
//! Truncated copies (`ravel-truncated-from`: the message was over the size limit) cannot be
//! replayed whole and are counted apart. Every produced message is acknowledged by the
//! brokers (`acks = all`, idempotent) before the command reports success.
//!
//! Replaying changes the order in which rows arrive: under plain averages (`alpha = "1/n"`) a
//! stream's statistics do not depend on order, so the replayed model equals the one where the
//! rows had arrived in time; under a fixed or adaptive alpha recent rows weigh more, so the
//! replayed rows count as the newest (docs/streams.md, "Bringing dead letters back").

use crate::config::{Config, ServeArgs};
use crate::kafka::{Client, KafkaClients};
use anyhow::{Context, anyhow, bail};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Header, Headers, Message, OwnedHeaders};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Counts the deliveries that failed, keeping the first error.
#[derive(Default)]
struct Deliveries {
    failed: Mutex<(u64, Option<String>)>,
}

impl rdkafka::ClientContext for Deliveries {}

impl rdkafka::producer::ProducerContext for Deliveries {
    type DeliveryOpaque = ();
    fn delivery(&self, result: &rdkafka::producer::DeliveryResult<'_>, _: ()) {
        if let Err((e, _)) = result {
            let mut f = crate::lock(&self.failed);
            f.0 += 1;
            f.1.get_or_insert_with(|| e.to_string());
        }
    }
}

#[derive(Debug, Clone, clap::Args)]
pub struct ReplayArgs {
    /// Config file (default: config/ravel.toml when it exists), read as `ravel serve` reads it
    /// (with the `RAVEL_...` environment and these flags over it): the brokers, the client
    /// options and the stream's topic.
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Kafka bootstrap servers (kafka.brokers).
    #[arg(long)]
    pub brokers: Option<String>,
    /// The stream whose dead letters are replayed: the copies in `<its topic>.dlq` that it
    /// refused (header ravel-stream).
    #[arg(long)]
    pub stream: String,
    /// Only copies refused for these reasons (header ravel-reason; comma-separated, e.g.
    /// `missing_feature,schema`). Default: every reason.
    #[arg(long, value_delimiter = ',')]
    pub reason: Vec<String>,
    /// Only copies of messages from this partition of the source topic.
    #[arg(long)]
    pub partition: Option<i32>,
    /// Only copies of messages at this source offset or later.
    #[arg(long)]
    pub from_offset: Option<i64>,
    /// Only copies of messages before this source offset.
    #[arg(long)]
    pub until_offset: Option<i64>,
    /// Produce to this topic instead of each message's source topic (ravel-source-topic).
    #[arg(long)]
    pub to: Option<String>,
    /// Count what would be replayed, producing nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Longest wait for each answer from Kafka (and for the acknowledgements), in
    /// milliseconds.
    #[arg(long, default_value_t = 30_000, value_parser = clap::value_parser!(u64).range(100..=600_000))]
    pub timeout_ms: u64,
}

/// What a run did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Replayed {
    /// Copies read from the dead-letter topic.
    pub read: u64,
    /// Messages produced again (or, with `--dry-run`, that would be), by destination topic.
    pub replayed: BTreeMap<String, u64>,
    /// Copies the filters left out.
    pub filtered: u64,
    /// Truncated copies (over the size limit when refused): not replayable whole.
    pub truncated: u64,
}

impl Replayed {
    pub fn total(&self) -> u64 {
        self.replayed.values().sum()
    }
}

/// One dead-letter copy's ravel headers.
struct Copy<'m> {
    stream: Option<&'m str>,
    reason: Option<&'m str>,
    topic: Option<&'m str>,
    partition: Option<i32>,
    offset: Option<i64>,
    truncated: bool,
}

fn copy_of<'m>(h: Option<&'m rdkafka::message::BorrowedHeaders>) -> Copy<'m> {
    let text = |key: &str| -> Option<&'m str> {
        h?.iter()
            .find(|x| x.key == key)
            .and_then(|x| std::str::from_utf8(x.value?).ok())
    };
    Copy {
        stream: text("ravel-stream"),
        reason: text("ravel-reason"),
        topic: text("ravel-source-topic"),
        partition: text("ravel-source-partition").and_then(|v| v.parse().ok()),
        offset: text("ravel-source-offset").and_then(|v| v.parse().ok()),
        truncated: text("ravel-truncated-from").is_some(),
    }
}

impl ReplayArgs {
    /// Whether a copy passes the filters.
    fn wants(&self, c: &Copy) -> bool {
        c.stream == Some(self.stream.as_str())
            && (self.reason.is_empty()
                || c.reason.is_some_and(|r| self.reason.iter().any(|x| x == r)))
            && self.partition.is_none_or(|p| c.partition == Some(p))
            && self
                .from_offset
                .is_none_or(|o| c.offset.is_some_and(|x| x >= o))
            && self
                .until_offset
                .is_none_or(|o| c.offset.is_some_and(|x| x < o))
    }
}

/// `ravel replay`.
pub fn run(args: &ReplayArgs) -> anyhow::Result<Replayed> {
    let config = Config::load(&ServeArgs {
        config: args.config.clone(),
        brokers: args.brokers.clone(),
        ..ServeArgs::default()
    })?;
    if config.kafka.embedded() {
        bail!("no Kafka to replay to: set kafka.brokers (--brokers, RAVEL_KAFKA__BROKERS)");
    }
    let stream = config
        .streams
        .iter()
        .find(|s| s.name == args.stream)
        .ok_or_else(|| {
            let names: Vec<&str> = config.streams.iter().map(|s| s.name.as_str()).collect();
            anyhow!(
                "--stream {}: the configuration has no such stream (it has: {})",
                args.stream,
                names.join(", ")
            )
        })?;
    let dlq = crate::config::dlq_of(&stream.topic());
    let timeout = Duration::from_millis(args.timeout_ms);
    let clients = KafkaClients::new(&config.kafka, &config.kafka.brokers);
    let consumer: BaseConsumer = clients
        .config(
            Client::Replay,
            &[
                ("group.id", format!("{}-replay", clients.group())),
                ("enable.auto.commit", "false".into()),
                ("enable.auto.offset.store", "false".into()),
                ("allow.auto.create.topics", "false".into()),
                // Copies of an aborted transaction are not dead letters.
                ("isolation.level", "read_committed".into()),
            ],
        )
        .create()
        .map_err(|e| {
            anyhow!(
                "cannot create the consumer: {}",
                clients.scrub(&e.to_string())
            )
        })?;
    let producer: BaseProducer<Deliveries> = clients
        .config(
            Client::Replay,
            &[
                ("enable.idempotence", "true".into()),
                ("acks", "all".into()),
            ],
        )
        .create_with_context(Deliveries::default())
        .map_err(|e| {
            anyhow!(
                "cannot create the producer: {}",
                clients.scrub(&e.to_string())
            )
        })?;
    let md = consumer
        .fetch_metadata(Some(dlq.as_str()), timeout)
        .map_err(|e| {
            anyhow!(
                "cannot read the metadata of '{dlq}': {}",
                clients.scrub(&e.to_string())
            )
        })?;
    let partitions: Vec<i32> = md
        .topics()
        .iter()
        .filter(|t| t.error().is_none())
        .flat_map(|t| t.partitions().iter().map(|p| p.id()))
        .collect();
    if partitions.is_empty() {
        bail!(
            "the dead-letter topic '{dlq}' of stream '{}' does not exist",
            args.stream
        );
    }
    // Its end now: what this run replays.
    let mut tpl = TopicPartitionList::new();
    let mut ends = BTreeMap::new();
    for p in partitions {
        let (low, high) = consumer
            .fetch_watermarks(&dlq, p, timeout)
            .with_context(|| format!("the offsets of '{dlq}' partition {p}"))?;
        if high > low {
            ends.insert(p, high);
            tpl.add_partition_offset(&dlq, p, Offset::Offset(low))?;
        }
    }
    let mut done = Replayed::default();
    if ends.is_empty() {
        return Ok(done);
    }
    consumer.assign(&tpl)?;
    let mut waiting = Instant::now();
    while !ends.is_empty() {
        let Some(m) = consumer.poll(Duration::from_millis(200)) else {
            // A partition whose last offsets hold no message (transaction markers) ends
            // where the consumer's position passes this run's end.
            if let Ok(positions) = consumer.position() {
                for e in positions.elements() {
                    if let Offset::Offset(at) = e.offset()
                        && ends.get(&e.partition()).is_some_and(|end| at >= *end)
                    {
                        ends.remove(&e.partition());
                    }
                }
            }
            if !ends.is_empty() && waiting.elapsed() > timeout {
                bail!(
                    "no message from '{dlq}' within --timeout-ms {} ({} produced so far; run \
                     again with --from-offset past them, or they arrive twice)",
                    args.timeout_ms,
                    done.total()
                );
            }
            continue;
        };
        waiting = Instant::now();
        let m = m.map_err(|e| anyhow!("reading '{dlq}': {}", clients.scrub(&e.to_string())))?;
        // Past this run's end of its partition (a copy added meanwhile): not this run's.
        let Some(&end) = ends.get(&m.partition()) else {
            continue;
        };
        if m.offset() + 1 >= end {
            ends.remove(&m.partition());
            if m.offset() >= end {
                continue;
            }
        }
        done.read += 1;
        let c = copy_of(m.headers());
        if !args.wants(&c) {
            done.filtered += 1;
            continue;
        }
        if c.truncated {
            done.truncated += 1;
            continue;
        }
        let to = match (&args.to, c.topic) {
            (Some(t), _) => t.as_str(),
            (None, Some(t)) => t,
            (None, None) => {
                bail!(
                    "the copy at '{dlq}' partition {} offset {} has no ravel-source-topic \
                     header: give --to",
                    m.partition(),
                    m.offset()
                )
            }
        };
        *done.replayed.entry(to.to_string()).or_default() += 1;
        if args.dry_run {
            continue;
        }
        let mut headers = OwnedHeaders::new();
        for h in m.headers().into_iter().flat_map(|h| h.iter()) {
            if !h.key.starts_with("ravel-") {
                headers = headers.insert(Header {
                    key: h.key,
                    value: h.value,
                });
            }
        }
        let mut rec = BaseRecord::<[u8], [u8]>::to(to)
            .payload(m.payload().unwrap_or(&[]))
            .headers(headers);
        if let Some(k) = m.key() {
            rec = rec.key(k);
        }
        let mut rec = Some(rec);
        while let Some(r) = rec.take() {
            if let Err((e, r)) = producer.send(r) {
                if matches!(
                    e,
                    rdkafka::error::KafkaError::MessageProduction(
                        rdkafka::error::RDKafkaErrorCode::QueueFull
                    )
                ) {
                    producer.poll(Duration::from_millis(50));
                    rec = Some(r);
                } else {
                    bail!(
                        "cannot produce to '{to}': {}",
                        clients.scrub(&e.to_string())
                    );
                }
            }
        }
        producer.poll(Duration::ZERO);
    }
    if !args.dry_run {
        producer.flush(timeout).map_err(|e| {
            anyhow!(
                "not every replayed message was acknowledged within --timeout-ms {}: {} \
                 (run again with --from-offset to resume; a message may then arrive twice)",
                args.timeout_ms,
                clients.scrub(&e.to_string())
            )
        })?;
        let (failed, first) = crate::lock(&producer.context().failed).clone();
        if failed > 0 {
            bail!(
                "{failed} of {} replayed messages were not delivered: {}",
                done.total(),
                clients.scrub(&first.unwrap_or_default())
            );
        }
    }
    Ok(done)
}
