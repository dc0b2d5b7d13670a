//! The writer of the state topic: each checkpoint interval, every partition's state as
//! records (chunked, with a manifest), produced idempotently and acknowledged before the
//! offsets they cover are committed.

use super::*;

/// Counts the acknowledgements of each state's records.
#[derive(Default)]
pub struct WriteContext {
    /// state index -> (records acknowledged, a record failed)
    acks: Mutex<HashMap<usize, (usize, bool)>>,
    last_error: Mutex<Option<String>>,
}

impl ClientContext for WriteContext {}

impl ProducerContext for WriteContext {
    type DeliveryOpaque = Box<usize>;
    fn delivery(&self, result: &DeliveryResult<'_>, index: Box<usize>) {
        let mut acks = crate::lock(&self.acks);
        let e = acks.entry(*index).or_default();
        match result {
            Ok(_) => e.0 += 1,
            Err((err, _)) => {
                e.1 = true;
                *crate::lock(&self.last_error) = Some(err.to_string());
            }
        }
    }
}

/// Writes partition states to the changelog.
pub struct StateWriter {
    /// Polled here, by `write`: the acknowledgements arrive as soon as the broker sends them
    /// (a `ThreadedProducer`'s flush took about 100 ms a round on the embedded broker).
    out: StateProducer<WriteContext>,
    max_record: usize,
    /// The manifest of each chunked state last delivered, so its chunks can be deleted once a
    /// newer one is.
    chunked: HashMap<String, Manifest>,
    /// Bytes this writer sent to each changelog partition, and the bytes of the bucket
    /// records each state it wrote names (by state key), for `buckets::Refresh`.
    sent: Mutex<HashMap<i32, u64>>,
    named: HashMap<String, (i32, u64)>,
}

/// The least `buckets::Refresh::after`: well under the embedded broker's 5 MB a partition.
const REFRESH_MIN: u64 = 2 << 20;

impl StateWriter {
    pub fn new(
        clients: &KafkaClients,
        topic: &str,
        max_record: usize,
        timeout: Duration,
    ) -> anyhow::Result<StateWriter> {
        let out = StateProducer::new(
            clients,
            topic,
            WriteContext::default(),
            timeout,
            // A chunk plus the record's overhead.
            &[("message.max.bytes", (max_record + 64 * 1024).to_string())],
            "the state producer",
        )?;
        Ok(StateWriter {
            out,
            max_record,
            chunked: HashMap::new(),
            sent: Mutex::new(HashMap::new()),
            named: HashMap::new(),
        })
    }

    /// Writes `states` (each with the bucket records of its windows changed since
    /// `state.saved`, `super::buckets`) and waits for the acknowledgements; returns, per
    /// state, whether all of its records are in the changelog. A state written has `saved`
    /// set to the bucket records it names, for the partition's next checkpoint.
    pub fn write(&mut self, states: &mut [PartitionState]) -> Vec<bool> {
        let generation = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        crate::lock(&self.out.producer.context().acks).clear();
        let mut expected = vec![0usize; states.len()];
        let mut manifests = vec![None; states.len()];
        let mut saved = vec![None; states.len()];
        let mut after = vec![Vec::new(); states.len()];
        let mut ok = vec![true; states.len()];
        for (i, s) in states.iter_mut().enumerate() {
            let k = key(&s.stream, s.partition);
            let cp = changelog_partition(&k, self.out.partitions);
            let named: u64 = self
                .named
                .values()
                .filter(|(p, _)| *p == cp)
                .map(|(_, b)| b)
                .sum();
            let refresh = buckets::Refresh {
                sent: crate::lock(&self.sent).get(&cp).copied().unwrap_or(0),
                after: (4 * named).max(REFRESH_MIN),
            };
            let encoded = match encode_with_buckets(s, self.max_record, generation, refresh) {
                Ok(r) => r,
                Err(e) => {
                    tracing::error!(stream = %s.stream, partition = s.partition, error = %format!("{e:#}"), "cannot encode state");
                    ok[i] = false;
                    continue;
                }
            };
            manifests[i] = encoded.manifest;
            saved[i] = encoded.saved;
            after[i] = encoded.after;
            tracing::debug!(stream = %s.stream, partition = s.partition, buckets = encoded.buckets_written, records = encoded.records.len(), "writing state");
            for r in encoded.records {
                if self.send(&r, Some(i)) {
                    expected[i] += 1;
                } else {
                    ok[i] = false;
                }
            }
        }
        // Wait for every record's acknowledgement (or failure), polling for them.
        let start = Instant::now();
        let outstanding = |acks: &HashMap<usize, (usize, bool)>| {
            (0..states.len()).any(|i| {
                let (n, failed) = acks.get(&i).copied().unwrap_or((0, false));
                ok[i] && !failed && n < expected[i]
            })
        };
        loop {
            self.out.producer.poll(Duration::from_millis(1));
            if !outstanding(&crate::lock(&self.out.producer.context().acks)) {
                break;
            }
            if start.elapsed() > self.out.timeout {
                tracing::warn!("state records not all acknowledged in time");
                break;
            }
        }
        let acks = crate::lock(&self.out.producer.context().acks).clone();
        for (i, s) in states.iter_mut().enumerate() {
            let (n, failed) = acks.get(&i).copied().unwrap_or((0, false));
            ok[i] = ok[i] && !failed && n == expected[i];
            if !ok[i] {
                let err = crate::lock(&self.out.producer.context().last_error).clone();
                tracing::error!(stream = %s.stream, partition = s.partition, error = ?err, "state not written; offsets not committed");
                continue;
            }
            let k = key(&s.stream, s.partition);
            let old = match manifests[i] {
                Some(m) => self.chunked.insert(k.clone(), m),
                None => self.chunked.remove(&k),
            };
            if let Some(old) = old {
                for t in tombstones(&s.stream, s.partition, &old) {
                    self.send(&t, None);
                }
            }
            // The bucket records the acknowledged state no longer names.
            for t in &after[i] {
                self.send(t, None);
            }
            s.saved = saved[i].take();
            let bytes = s.saved.as_ref().map_or(0, |b| b.bytes());
            let cp = changelog_partition(&k, self.out.partitions);
            self.named.insert(k, (cp, bytes));
        }
        ok
    }

    /// Deletes a retired stream's states (`?state=drop`, `crate::declared`): tombstones for
    /// each partition's state record, its bucket records and its chunks, so that compaction
    /// removes them. Waits (up to the timeout) for them to be sent.
    pub fn forget(&mut self, states: &[Arc<PartitionState>]) {
        let mut records = Vec::new();
        for s in states {
            let k = key(&s.stream, s.partition);
            if let Some(old) = self.chunked.remove(&k) {
                records.extend(tombstones(&s.stream, s.partition, &old));
            }
            for b in s.buckets.iter().flat_map(|i| i.buckets.iter()) {
                let bk = buckets::bucket_key(&s.stream, s.partition, b.start_ms, b.slot);
                records.extend((0..b.chunks).map(|i| Record {
                    key: chunk_key(&bk, b.version, i),
                    kind: Kind::Chunk,
                    value: None,
                }));
                records.push(Record {
                    key: bk,
                    kind: Kind::Bucket,
                    value: None,
                });
            }
            records.push(Record {
                key: k.clone(),
                kind: Kind::State,
                value: None,
            });
            self.named.remove(&k);
        }
        for r in &records {
            self.send(r, None);
        }
        if let Err(e) = self.out.producer.flush(self.out.timeout) {
            tracing::warn!(error = %e, "the retired stream's tombstones were not all sent in time");
        }
    }

    /// Queues one record (retrying while the queue is full); false when it cannot be sent.
    fn send(&self, r: &Record, index: Option<usize>) -> bool {
        let partition = changelog_partition(
            r.key.split('#').next().unwrap_or(&r.key),
            self.out.partitions,
        );
        let headers = OwnedHeaders::new().insert(Header {
            key: KIND,
            value: Some(r.kind.as_str()),
        });
        let start = Instant::now();
        loop {
            let mut record: BaseRecord<'_, str, [u8], Box<usize>> =
                BaseRecord::with_opaque_to(&self.out.topic, Box::new(index.unwrap_or(usize::MAX)))
                    .key(r.key.as_str())
                    .partition(partition)
                    .headers(headers.clone());
            if let Some(v) = &r.value {
                record = record.payload(v.as_slice());
            }
            match self.out.producer.send(record) {
                Ok(()) => {
                    let size = r.value.as_ref().map_or(0, Vec::len) + r.key.len();
                    *crate::lock(&self.sent).entry(partition).or_default() += size as u64;
                    return true;
                }
                Err((e, _))
                    if e.rdkafka_error_code()
                        == Some(rdkafka::error::RDKafkaErrorCode::QueueFull)
                        && start.elapsed() < self.out.timeout =>
                {
                    self.out.producer.poll(Duration::from_millis(5));
                }
                Err((e, _)) => {
                    tracing::error!(key = %r.key, error = %e, "cannot send state record");
                    return false;
                }
            }
        }
    }
}
