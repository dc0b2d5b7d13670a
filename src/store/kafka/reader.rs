//! The reader of the state topic: tails the compacted changelog on its own thread and keeps
//! the latest whole state of every partition, for restores after a (re)assignment, and the
//! latest record of every declaration made over the API (`declared`).

use super::*;

/// The latest states, shared by the reader thread and ingest.
#[derive(Default)]
struct Latest {
    /// (stream, partition) -> latest state.
    states: BTreeMap<(String, i32), Arc<PartitionState>>,
    /// Changelog partition -> next offset read.
    read: HashMap<i32, i64>,
    /// Declaration key -> its latest record's value (a tombstone removes it).
    declared: BTreeMap<String, Vec<u8>>,
}

struct Shared {
    latest: Mutex<Latest>,
    changed: Condvar,
    version: AtomicU64,
    /// Increases whenever a declaration record is read.
    declared_version: AtomicU64,
}

/// Tails the changelog and keeps the latest state of every stream partition.
pub struct StateReader {
    shared: Arc<Shared>,
    topic: String,
    partitions: i32,
    /// For the end offsets when catching up (the reader's own consumer lives on its thread).
    watermarks: Mutex<BaseConsumer>,
}

impl StateReader {
    /// Starts the reader thread; it stops with `shutdown`.
    pub fn start(
        clients: &KafkaClients,
        topic: &str,
        shutdown: Shutdown,
    ) -> anyhow::Result<Arc<StateReader>> {
        let settings = [
            ("enable.auto.commit", "false".to_string()),
            ("enable.partition.eof", "false".to_string()),
            // A chunk at a time: librdkafka's default fetch limits are far above it.
            ("fetch.wait.max.ms", "50".to_string()),
        ];
        let make = || -> anyhow::Result<BaseConsumer> {
            clients
                .config(Client::StateReader, &settings)
                .set("group.id", format!("{}.state-reader", clients.group()))
                .create()
                .map_err(|e| {
                    anyhow::anyhow!(
                        "cannot create the state reader: {}",
                        clients.scrub(&e.to_string())
                    )
                })
        };
        let consumer = make()?;
        let partitions = changelog_partitions(consumer.client(), topic)?;
        let mut tpl = TopicPartitionList::new();
        for p in 0..partitions {
            tpl.add_partition_offset(topic, p, Offset::Beginning)
                .context("state reader: bad partition")?;
        }
        consumer
            .assign(&tpl)
            .context("state reader: cannot assign the state topic")?;
        let shared = Arc::new(Shared {
            latest: Mutex::new(Latest::default()),
            changed: Condvar::new(),
            version: AtomicU64::new(0),
            declared_version: AtomicU64::new(0),
        });
        let reader = Arc::new(StateReader {
            shared: shared.clone(),
            topic: topic.to_string(),
            partitions,
            watermarks: Mutex::new(make()?),
        });
        std::thread::Builder::new()
            .name("ravel-state-reader".into())
            .spawn(move || tail(consumer, shared, shutdown))
            .context("cannot start the state reader thread")?;
        Ok(reader)
    }

    /// Waits until every state written before this call is read; an error after `timeout`.
    pub fn catch_up(&self, timeout: Duration) -> anyhow::Result<()> {
        let start = Instant::now();
        let mut ends = HashMap::new();
        {
            let c = crate::lock(&self.watermarks);
            for p in 0..self.partitions {
                let (_, high) = c
                    .fetch_watermarks(&self.topic, p, timeout)
                    .with_context(|| format!("cannot read the end of {}/{p}", self.topic))?;
                ends.insert(p, high);
            }
        }
        let mut latest = crate::lock(&self.shared.latest);
        loop {
            let behind: Vec<i32> = ends
                .iter()
                .filter(|(p, high)| latest.read.get(p).copied().unwrap_or(0) < **high)
                .map(|(p, _)| *p)
                .collect();
            if behind.is_empty() {
                return Ok(());
            }
            let left = timeout.saturating_sub(start.elapsed());
            if left.is_zero() {
                bail!(
                    "the state topic {} was not read to its end within {timeout:?} (partitions {behind:?} behind)",
                    self.topic
                );
            }
            latest = self
                .shared
                .changed
                .wait_timeout(latest, left.min(Duration::from_millis(100)))
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// The latest state of a stream's partition.
    pub fn get(&self, stream: &str, partition: i32) -> Option<Arc<PartitionState>> {
        crate::lock(&self.shared.latest)
            .states
            .get(&(stream.to_string(), partition))
            .cloned()
    }

    /// The latest state of every partition of `stream`.
    pub fn of_stream(&self, stream: &str) -> Vec<Arc<PartitionState>> {
        crate::lock(&self.shared.latest)
            .states
            .range((stream.to_string(), i32::MIN)..=(stream.to_string(), i32::MAX))
            .map(|(_, s)| s.clone())
            .collect()
    }

    /// Increases whenever a state is read.
    pub fn version(&self) -> u64 {
        self.shared.version.load(Ordering::SeqCst)
    }

    /// The latest record of every declaration (`declared`), by key.
    pub fn declarations(&self) -> BTreeMap<String, Vec<u8>> {
        crate::lock(&self.shared.latest).declared.clone()
    }

    /// Increases whenever a declaration record is read.
    pub fn declarations_version(&self) -> u64 {
        self.shared.declared_version.load(Ordering::SeqCst)
    }
}

fn tail(consumer: BaseConsumer, shared: Arc<Shared>, shutdown: Shutdown) {
    let mut assembler = Assembler::default();
    let mut last_error: Option<Instant> = None;
    while !shutdown.is_triggered() {
        match consumer.poll(Duration::from_millis(100)) {
            None => {}
            Some(Err(e)) if last_error.is_none_or(|t| t.elapsed() > Duration::from_secs(10)) => {
                tracing::warn!(error = %e, "state reader error");
                last_error = Some(Instant::now());
            }
            Some(Err(_)) => {}
            Some(Ok(m)) => {
                let key = m
                    .key()
                    .map(|k| String::from_utf8_lossy(k).into_owned())
                    .unwrap_or_default();
                let kind = m.headers().and_then(|h| {
                    h.iter()
                        .find(|h| h.key == KIND)
                        .and_then(|h| h.value)
                        .and_then(Kind::parse)
                });
                let done = match kind {
                    Some(Kind::Declaration) => {
                        let mut latest = crate::lock(&shared.latest);
                        match m.payload() {
                            Some(v) => latest.declared.insert(key, v.to_vec()),
                            None => latest.declared.remove(&key),
                        };
                        latest.read.insert(m.partition(), m.offset() + 1);
                        shared.declared_version.fetch_add(1, Ordering::SeqCst);
                        drop(latest);
                        shared.changed.notify_all();
                        continue;
                    }
                    // A retired stream's state, dropped (`StateWriter::forget`).
                    Some(Kind::State) if m.payload().is_none() => {
                        if let Some((stream, p)) = key.rsplit_once('/')
                            && let Ok(p) = p.parse::<i32>()
                        {
                            crate::lock(&shared.latest)
                                .states
                                .remove(&(stream.to_string(), p));
                        }
                        assembler.apply(&key, Kind::State, None)
                    }
                    Some(kind) => assembler.apply(&key, kind, m.payload()),
                    None => Err(anyhow::anyhow!(
                        "record {key} at {}/{} is not a ravel state",
                        m.partition(),
                        m.offset()
                    )),
                };
                let mut latest = crate::lock(&shared.latest);
                match done {
                    Ok(Some(s)) => {
                        latest
                            .states
                            .insert((s.stream.clone(), s.partition), Arc::new(s));
                        shared.version.fetch_add(1, Ordering::SeqCst);
                    }
                    Ok(None) => {}
                    Err(e) => {
                        tracing::warn!(error = %format!("{e:#}"), "state record skipped")
                    }
                }
                latest.read.insert(m.partition(), m.offset() + 1);
                drop(latest);
                shared.changed.notify_all();
            }
        }
    }
}
