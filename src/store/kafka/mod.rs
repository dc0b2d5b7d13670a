//! The Kafka state store (`state.store = "kafka"`): each partition's statistics and the next
//! offset they stop at, in one record of a compacted changelog topic (`<group_id>.state` by
//! default), so that ravel runs as several replicas in one consumer group and moves between
//! machines without a disk, as Kafka Streams keeps its state stores.
//!
//! Why per partition: the consumer group hands partitions from instance to instance, and a
//! partition's statistics must travel with it. The record holds both the statistics and the
//! offset, written together, so the instance that takes a partition over restores it and seeks
//! to that offset: the rows before it are in the statistics, the rows after it are read again,
//! and none is lost or counted twice, whatever happened to the previous owner.
//!
//! Records: key `<stream>/<partition>`, value the CBOR encoding of `PartitionState` (binary
//! floats, so a round trip is bit-exact), header `ravel-state: state`. A state larger than
//! `state.max_record_bytes` (brokers refuse messages over `message.max.bytes`, 1 MB by
//! default; p = 2000 takes about 36 MB) is cut into chunks with keys
//! `<stream>/<partition>#<generation>/<i>` (`ravel-state: chunk`), followed by a manifest under
//! the partition's key (`ravel-state: manifest`) naming the generation and the number of
//! chunks. All records of a partition go to the same changelog partition, so a reader meets
//! the chunks before their manifest. Once a newer generation is delivered, the writer deletes
//! the old chunks with tombstones, so compaction removes them.
//!
//! A partition's time buckets (`windows`) are records of their own, one per bucket
//! (`buckets`: keys `<stream>/<partition>#b<start>.<slot>`, `ravel-state: bucket`), written
//! before the state record that names them, so that a checkpoint writes only the buckets
//! changed since the last one and a restore never mixes two checkpoints' buckets.
//!
//! Streams, feature streams and scorers declared over the API live in the same topic, one
//! record a declaration (`declared`: keys `@declared/<kind>/<name>`, `ravel-state:
//! declaration`), so that every replica of the group reads them and a restart keeps them.
//!
//! Writing (`StateWriter`, on the ingest thread at every checkpoint interval): the records are
//! produced with `acks=all` and idempotence, then flushed; a partition's offsets are committed
//! only once all of its records are acknowledged. Reading (`StateReader`, its own thread):
//! one consumer outside any group reads every changelog partition from the beginning and
//! keeps the latest state of every stream partition. Ingest uses it twice: to restore a
//! partition it is assigned (after catching up to the changelog's end), and to merge the
//! partitions other instances own into the stream's view, so any instance answers for the
//! whole stream.
//!
//! The embedded broker (librdkafka's mock cluster) neither compacts nor keeps more than about
//! 5 MB per partition: there the store suits tests and demos at small p; production uses a
//! real, compacted topic.

use crate::kafka::{Client, KafkaClients};
use crate::shutdown::Shutdown;
use crate::state::streams::Stats;
use anyhow::{Context, bail};
use rdkafka::ClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::{Header, Headers, Message, OwnedHeaders};
use rdkafka::producer::{BaseProducer, BaseRecord, DeliveryResult, Producer, ProducerContext};
use rdkafka::topic_partition_list::{Offset, TopicPartitionList};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

pub mod buckets;
pub mod declared;
mod reader;
mod writer;

pub use buckets::{BucketIndex, SavedBuckets};
pub use reader::StateReader;
pub use writer::StateWriter;

/// Version of `PartitionState`'s encoding.
pub const VERSION: u32 = 1;
/// The header that says what a record is.
const KIND: &str = "ravel-state";

/// One partition's statistics and where they stop.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PartitionState {
    pub version: u32,
    pub stream: String,
    pub topic: String,
    pub partition: i32,
    /// Every row of the partition before this offset is in `stats`, none after it.
    pub next_offset: i64,
    /// Unix time of the last folded batch, in milliseconds.
    pub last_update_ms: Option<u64>,
    /// Kafka timestamp (Unix ms) of the newest message in `stats`.
    #[serde(default)]
    pub as_of_ms: Option<u64>,
    /// The instance that wrote it (`host/pid`), for the operator.
    pub writer: String,
    pub stats: Stats,
    /// The partition's cross-validation folds (`cv.folds`); absent from records written
    /// without folds (or before they existed), whose partitions then start their folds empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub folds: Option<crate::store::SavedFolds>,
    /// The partition's time buckets (`windows`): each partition keeps its own, and a view
    /// spans them together (`Windows::span_with`). Written as bucket records (`buckets`) that
    /// `buckets` names; read from them, or from the record itself as earlier builds wrote it.
    #[serde(default, skip_serializing)]
    pub windows: Option<ravel_core::stats::Windows>,
    /// The bucket records holding `windows` (`buckets::BucketIndex`); set by the writer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub buckets: Option<BucketIndex>,
    /// The declaration the state was folded under (`declared`: a stream declared over the
    /// API); 0 for the config file's streams. A state of an earlier declaration of the same
    /// name (changed, or retired with its state dropped) is never restored into a later one.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub epoch: u64,
    /// Not stored: to write, the bucket records of the partition's last written state (the
    /// buckets unchanged since are not written again); as read, those this state names.
    #[serde(skip)]
    pub saved: Option<Arc<SavedBuckets>>,
}

impl PartitionState {
    pub fn last_update(&self) -> Option<SystemTime> {
        self.last_update_ms
            .map(|ms| UNIX_EPOCH + Duration::from_millis(ms))
    }
}

fn is_zero(e: &u64) -> bool {
    *e == 0
}

/// The changelog key of a stream's partition.
pub fn key(stream: &str, partition: i32) -> String {
    format!("{stream}/{partition}")
}

/// What this process calls itself in the records it writes.
pub fn writer_name() -> String {
    let host =
        crate::kafka::standalone::host_name("/etc/hostname").unwrap_or_else(|| "unknown".into());
    format!("{host}/{}", std::process::id())
}

/// A record kind (the `ravel-state` header).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    State,
    Chunk,
    Manifest,
    /// A time bucket (`buckets`).
    Bucket,
    /// A stream, feature stream or scorer declared over the API (`declared`).
    Declaration,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Kind::State => "state",
            Kind::Chunk => "chunk",
            Kind::Manifest => "manifest",
            Kind::Bucket => "bucket",
            Kind::Declaration => "declaration",
        }
    }
    fn parse(s: &[u8]) -> Option<Kind> {
        match s {
            b"state" => Some(Kind::State),
            b"chunk" => Some(Kind::Chunk),
            b"manifest" => Some(Kind::Manifest),
            b"bucket" => Some(Kind::Bucket),
            b"declaration" => Some(Kind::Declaration),
            _ => None,
        }
    }
}

/// A chunked state's manifest.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    pub generation: u64,
    pub chunks: u32,
    pub bytes: u64,
}

/// One changelog record to write.
#[derive(Debug, Clone, PartialEq)]
pub struct Record {
    pub key: String,
    pub kind: Kind,
    /// None: a tombstone.
    pub value: Option<Vec<u8>>,
}

fn chunk_key(base: &str, generation: u64, i: u32) -> String {
    format!("{base}#{generation}/{i}")
}

/// The key and generation a chunk key (`chunk_key`) belongs to.
fn chunk_of(k: &str) -> Option<(&str, u64)> {
    let (base, rest) = k.rsplit_once('#')?;
    let (generation, i) = rest.split_once('/')?;
    i.parse::<u32>().ok()?;
    Some((base, generation.parse().ok()?))
}

/// The records of one value under `base`: one record of `kind`, or chunks of at most
/// `max_record` bytes and their manifest (last). Returns the manifest too when chunked.
pub(crate) fn records_of(
    base: String,
    kind: Kind,
    bytes: Vec<u8>,
    max_record: usize,
    generation: u64,
) -> anyhow::Result<(Vec<Record>, Option<Manifest>)> {
    if bytes.len() <= max_record {
        let r = Record {
            key: base,
            kind,
            value: Some(bytes),
        };
        return Ok((vec![r], None));
    }
    let mut out = Vec::new();
    for (i, c) in bytes.chunks(max_record.max(1)).enumerate() {
        out.push(Record {
            key: chunk_key(&base, generation, i as u32),
            kind: Kind::Chunk,
            value: Some(c.to_vec()),
        });
    }
    let m = Manifest {
        generation,
        chunks: out.len() as u32,
        bytes: bytes.len() as u64,
    };
    let mut mb = Vec::new();
    ciborium::into_writer(&m, &mut mb).context("cannot encode a manifest")?;
    out.push(Record {
        key: base,
        kind: Kind::Manifest,
        value: Some(mb),
    });
    Ok((out, Some(m)))
}

/// The records of one state: one `state` record, or chunks of at most `max_record` bytes and
/// their manifest (last). Returns the manifest too when chunked. Its windows are not in it:
/// see `encode_with_buckets`.
pub fn encode(
    state: &PartitionState,
    max_record: usize,
    generation: u64,
) -> anyhow::Result<(Vec<Record>, Option<Manifest>)> {
    let mut bytes = Vec::new();
    ciborium::into_writer(state, &mut bytes).context("cannot encode a partition state")?;
    records_of(
        key(&state.stream, state.partition),
        Kind::State,
        bytes,
        max_record,
        generation,
    )
}

/// A state's records with its time buckets.
pub struct Encoded {
    /// The changed buckets' records, then the state's (its manifest last when chunked).
    pub records: Vec<Record>,
    pub manifest: Option<Manifest>,
    /// The bucket records once the state is acknowledged (None without windows).
    pub saved: Option<Arc<SavedBuckets>>,
    /// Tombstones of the bucket records it no longer names, once it is acknowledged.
    pub after: Vec<Record>,
    /// Buckets written.
    pub buckets_written: usize,
}

/// The records of one state and of its buckets changed since `state.saved` (or due for a
/// `refresh`; `buckets`); sets `state.buckets` to the index the state record names.
pub fn encode_with_buckets(
    state: &mut PartitionState,
    max_record: usize,
    generation: u64,
    refresh: buckets::Refresh,
) -> anyhow::Result<Encoded> {
    let (mut records, mut saved, mut after, mut written) = (Vec::new(), None, Vec::new(), 0);
    state.buckets = None;
    if let Some(w) = &state.windows {
        let planned = buckets::plan(
            &state.stream,
            state.partition,
            w,
            state.saved.as_deref(),
            generation,
            max_record,
            refresh,
        )?;
        records = planned.records;
        after = planned.after;
        written = planned.written;
        saved = Some(Arc::new(planned.saved));
        state.buckets = Some(planned.index);
    }
    let (mut rs, manifest) = encode(state, max_record, generation)?;
    records.append(&mut rs);
    Ok(Encoded {
        records,
        manifest,
        saved,
        after,
        buckets_written: written,
    })
}

/// Tombstones for the chunks of an older generation.
pub fn tombstones(stream: &str, partition: i32, old: &Manifest) -> Vec<Record> {
    let base = key(stream, partition);
    (0..old.chunks)
        .map(|i| Record {
            key: chunk_key(&base, old.generation, i),
            kind: Kind::Chunk,
            value: None,
        })
        .collect()
}

/// Rebuilds states from changelog records in log order: keeps chunks until their manifest,
/// and bucket records (`buckets`) for the states that name them.
#[derive(Default)]
pub struct Assembler {
    chunks: HashMap<String, Vec<u8>>,
    buckets: HashMap<String, buckets::HeldBucket>,
}

impl Assembler {
    /// Applies one record; returns the state it completes, if any. A record that cannot be
    /// read is an error (the caller logs it and goes on: a later record replaces it).
    pub fn apply(
        &mut self,
        key: &str,
        kind: Kind,
        value: Option<&[u8]>,
    ) -> anyhow::Result<Option<PartitionState>> {
        let Some(value) = value else {
            self.chunks.remove(key);
            self.buckets.remove(key);
            return Ok(None);
        };
        match kind {
            Kind::Chunk => {
                self.chunks.insert(key.to_string(), value.to_vec());
                Ok(None)
            }
            Kind::State => self.decode(key, value).map(Some),
            Kind::Bucket => {
                self.hold(key, value)?;
                Ok(None)
            }
            // Kept by the reader itself (`reader`), never part of a state.
            Kind::Declaration => Ok(None),
            Kind::Manifest => {
                let m: Manifest = ciborium::from_reader(value)
                    .with_context(|| format!("state record {key}: bad manifest"))?;
                let mut bytes = Vec::with_capacity(m.bytes.min(1 << 32) as usize);
                for i in 0..m.chunks {
                    let ck = chunk_key(key, m.generation, i);
                    match self.chunks.get(&ck) {
                        Some(c) => bytes.extend_from_slice(c),
                        None => bail!(
                            "state record {key}: chunk {i} of generation {} is missing",
                            m.generation
                        ),
                    }
                }
                if bytes.len() as u64 != m.bytes {
                    bail!(
                        "state record {key}: chunks hold {} bytes, the manifest says {}",
                        bytes.len(),
                        m.bytes
                    );
                }
                // Older generations of this key's chunks are no longer needed, nor the
                // current ones of a bucket (its slot is written whole again).
                let bucket = buckets::is_bucket_key(key);
                self.chunks.retain(|k, _| match chunk_of(k) {
                    Some((base, generation)) if base == key => {
                        generation == m.generation && !bucket
                    }
                    _ => true,
                });
                if bucket {
                    self.hold(key, &bytes)?;
                    return Ok(None);
                }
                self.decode(key, &bytes).map(Some)
            }
        }
    }

    /// Keeps a bucket record until a state names it.
    fn hold(&mut self, key: &str, bytes: &[u8]) -> anyhow::Result<()> {
        if !buckets::is_bucket_key(key) {
            bail!("record {key} is marked a time bucket but is not keyed as one");
        }
        let b = buckets::decode_bucket(key, bytes)?;
        self.buckets.insert(key.to_string(), b);
        Ok(())
    }

    /// A state record's value, with the time buckets it names.
    fn decode(&self, key: &str, bytes: &[u8]) -> anyhow::Result<PartitionState> {
        let mut s = decode_state(key, bytes)?;
        if let Some(index) = &s.buckets {
            match buckets::assemble(&s, index, &self.buckets) {
                Ok((w, saved)) => {
                    s.windows = Some(w);
                    s.saved = Some(Arc::new(saved));
                }
                Err(e) => tracing::warn!(
                    "state record {key}: its time buckets cannot be restored ({e}); the partition's windows start empty"
                ),
            }
        }
        Ok(s)
    }
}

/// A state record's value, checked (its windows if inline, as earlier builds wrote them).
fn decode_state(key: &str, bytes: &[u8]) -> anyhow::Result<PartitionState> {
    let s: PartitionState =
        ciborium::from_reader(bytes).with_context(|| format!("state record {key}: bad value"))?;
    if s.version != VERSION {
        bail!(
            "state record {key} has version {}, this ravel reads {VERSION}",
            s.version
        );
    }
    if key != self::key(&s.stream, s.partition) {
        bail!(
            "state record {key} holds stream '{}' partition {}",
            s.stream,
            s.partition
        );
    }
    if s.next_offset < 0 {
        bail!("state record {key} has offset {}", s.next_offset);
    }
    if let Err(e) = s.stats.validate() {
        bail!("state record {key} holds invalid statistics: {e}");
    }
    if let Some(w) = &s.windows
        && let Err(e) = w.validate(s.stats.task(), s.stats.p())
    {
        bail!("state record {key} holds invalid time buckets: {e}");
    }
    Ok(s)
}

/// A stable partition of the changelog for a key (FNV-1a), so every record of one stream
/// partition lands in one changelog partition, in order.
pub fn changelog_partition(key: &str, partitions: i32) -> i32 {
    let mut h: u64 = 0xcbf29ce484222325;
    for b in key.as_bytes() {
        h ^= u64::from(*b);
        h = h.wrapping_mul(0x100000001b3);
    }
    (h % partitions.max(1) as u64) as i32
}

/// A producer of the state topic, as the state writer and the declarations' log both use it:
/// every record acknowledged by all in-sync replicas, idempotent, sent at once and given up
/// after `timeout`; with the topic's name and its partition count.
struct StateProducer<C: ProducerContext> {
    producer: BaseProducer<C>,
    topic: String,
    partitions: i32,
    timeout: Duration,
}

impl<C: ProducerContext> StateProducer<C> {
    /// `extra`: this producer's own options; `what` names it in the error.
    fn new(
        clients: &KafkaClients,
        topic: &str,
        context: C,
        timeout: Duration,
        extra: &[(&str, String)],
        what: &str,
    ) -> anyhow::Result<StateProducer<C>> {
        let mut options = vec![
            ("acks", "all".to_string()),
            ("enable.idempotence", "true".into()),
            // A round is waited for at once: nothing to gain from lingering.
            ("linger.ms", "0".into()),
        ];
        options.extend(extra.iter().cloned());
        options.push(("message.timeout.ms", timeout.as_millis().to_string()));
        let producer: BaseProducer<C> = clients
            .config(Client::StateWriter, &options)
            .create_with_context(context)
            .map_err(|e| {
                anyhow::anyhow!("cannot create {what}: {}", clients.scrub(&e.to_string()))
            })?;
        let partitions = changelog_partitions(producer.client(), topic)?;
        Ok(StateProducer {
            producer,
            topic: topic.to_string(),
            partitions,
            timeout,
        })
    }
}

/// The changelog's partition count (the topic must exist: `crate::kafka::topics` checks it).
fn changelog_partitions<C: ClientContext>(
    client: &rdkafka::client::Client<C>,
    topic: &str,
) -> anyhow::Result<i32> {
    let start = Instant::now();
    loop {
        let md = client.fetch_metadata(Some(topic), Duration::from_secs(10));
        if let Ok(md) = &md
            && let Some(t) = md.topics().first()
            && !t.partitions().is_empty()
        {
            return Ok(t.partitions().len() as i32);
        }
        if start.elapsed() > Duration::from_secs(30) {
            bail!(
                "the state topic {topic} does not exist or has no partitions (ravel creates it unless state.create_topic = false: see /readyz and the log for why it did not; or create it compacted)"
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ravel_core::Task;
    use ravel_core::stats::AlphaSchedule;

    fn state(p: usize, partition: i32, n: usize) -> PartitionState {
        let mut stats = Stats::new(Task::Regression, p, AlphaSchedule::Plain);
        let spec: ravel_core::synthetic::SyntheticSpec =
            format!("p={p},k=2,n={n},seed=7").parse().unwrap();
        let (mut x, mut y) = (vec![], vec![]);
        spec.rows().fill(n, &mut x, &mut y);
        stats.update_batch(&x, &y).unwrap();
        PartitionState {
            version: VERSION,
            stream: "s".into(),
            topic: "t".into(),
            partition,
            next_offset: 42,
            last_update_ms: Some(7),
            as_of_ms: Some(5),
            writer: "h/1".into(),
            stats,
            folds: None,
            windows: None,
            buckets: None,
            saved: None,
            epoch: 0,
        }
    }

    fn apply_all(a: &mut Assembler, records: &[Record]) -> Vec<PartitionState> {
        records
            .iter()
            .filter_map(|r| a.apply(&r.key, r.kind, r.value.as_deref()).unwrap())
            .collect()
    }

    #[test]
    fn a_small_state_is_one_record_and_round_trips_bit_exactly() {
        let s = state(5, 3, 100);
        let (records, manifest) = encode(&s, 1 << 20, 1).unwrap();
        assert_eq!(records.len(), 1);
        assert!(manifest.is_none());
        assert_eq!(records[0].key, "s/3");
        let back = apply_all(&mut Assembler::default(), &records);
        assert_eq!(back, vec![s]);
    }

    #[test]
    fn a_large_state_is_chunked_and_reassembled_and_old_chunks_are_deleted() {
        // p = 300 is over 360 KB of CBOR (the triangle of E[xx'] alone); 64 KB chunks make
        // several.
        let s = state(300, 0, 400);
        let (records, m) = encode(&s, 64 * 1024, 10).unwrap();
        let m = m.unwrap();
        assert!(m.bytes > 300 * 301 / 2 * 8 && m.chunks > 5, "{m:?}");
        assert_eq!(records.len(), m.chunks as usize + 1);
        assert_eq!(records.last().unwrap().kind, Kind::Manifest);
        assert!(
            records[..records.len() - 1]
                .iter()
                .all(|r| r.value.as_ref().unwrap().len() <= 64 * 1024)
        );
        let mut a = Assembler::default();
        assert_eq!(apply_all(&mut a, &records), vec![s.clone()]);

        // A newer generation, then the tombstones of the old one: the reader keeps only the
        // new chunks.
        let mut s2 = s.clone();
        s2.next_offset = 99;
        let (records2, m2) = encode(&s2, 64 * 1024, 11).unwrap();
        assert_eq!(apply_all(&mut a, &records2), vec![s2]);
        let t = tombstones("s", 0, &m);
        assert_eq!(t.len(), m.chunks as usize);
        assert!(apply_all(&mut a, &t).is_empty());
        assert_eq!(a.chunks.len(), m2.unwrap().chunks as usize);

        // A manifest whose chunks were lost is an error, not a wrong state.
        let mut b = Assembler::default();
        let mut missing = records.clone();
        missing.remove(3);
        let last = missing.pop().unwrap();
        apply_all(&mut b, &missing);
        let e = b
            .apply(&last.key, last.kind, last.value.as_deref())
            .unwrap_err();
        assert!(e.to_string().contains("chunk 3"), "{e}");
    }

    #[test]
    fn p_2000_fits_through_chunks() {
        let s = state(2000, 1, 3);
        let (records, m) = encode(&s, 900_000, 5).unwrap();
        let m = m.unwrap();
        assert!(m.bytes > 2000 * 2001 / 2 * 8 && m.chunks > 16, "{m:?}");
        assert_eq!(apply_all(&mut Assembler::default(), &records), vec![s]);
    }

    #[test]
    fn bad_records_are_refused() {
        let s = state(3, 0, 10);
        let (records, _) = encode(&s, 1 << 20, 1).unwrap();
        let v = records[0].value.clone().unwrap();
        // Under another key.
        let e = Assembler::default()
            .apply("s/1", Kind::State, Some(&v))
            .unwrap_err();
        assert!(e.to_string().contains("partition 0"), "{e}");
        // Truncated.
        assert!(
            Assembler::default()
                .apply("s/0", Kind::State, Some(&v[..v.len() / 2]))
                .is_err()
        );
        // Non-finite statistics.
        let mut bad = s.clone();
        if let Stats::Regression(r) = &mut bad.stats {
            let mut j = serde_json::to_value(&*r).unwrap();
            j["mean_y"] = serde_json::json!(1e308);
            j["syy"] = serde_json::json!(-1.0);
            *r = serde_json::from_value(j).unwrap();
        }
        let (records, _) = encode(&bad, 1 << 20, 1).unwrap();
        let e = Assembler::default()
            .apply("s/0", Kind::State, records[0].value.as_deref())
            .unwrap_err();
        assert!(e.to_string().contains("invalid statistics"), "{e}");
    }

    #[test]
    fn a_key_always_lands_in_the_same_changelog_partition() {
        for parts in [1, 3, 12] {
            let a = changelog_partition("s/3", parts);
            assert!((0..parts).contains(&a));
            assert_eq!(a, changelog_partition("s/3", parts));
        }
        // Different keys spread out.
        let used: std::collections::BTreeSet<i32> = (0..32)
            .map(|p| changelog_partition(&key("s", p), 6))
            .collect();
        assert!(used.len() > 3, "{used:?}");
    }
}
