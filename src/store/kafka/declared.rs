//! Declarations made over the API (`crate::declared`) in the state topic, with the kafka
//! store: one record a declaration, keyed `@declared/<kind>/<name>` (`@` is in no name, so
//! no key of a state clashes), its value the declaration as JSON, a tombstone when it is
//! retired with its state dropped. The topic is compacted, so it keeps the latest record of
//! each name; every replica's `StateReader` reads them as they come, and a restart reads them
//! again. Records of one name go to one changelog partition, so every replica sees a name's
//! changes in the same order and settles on the same last one.

use super::*;

/// The key prefix of the declaration records.
pub const PREFIX: &str = "@declared/";

/// The record key of declaration `name` of `kind` (`stream`, `feature_stream`, `scorer`).
pub fn key(kind: &str, name: &str) -> String {
    format!("{PREFIX}{kind}/{name}")
}

/// The kind and name of a declaration key.
pub fn parse_key(key: &str) -> Option<(&str, &str)> {
    key.strip_prefix(PREFIX)?.split_once('/')
}

/// The acknowledgement of the last record sent.
#[derive(Default)]
pub struct Acked(Mutex<Option<Result<(), String>>>);

impl ClientContext for Acked {}

impl ProducerContext for Acked {
    type DeliveryOpaque = ();
    fn delivery(&self, result: &DeliveryResult<'_>, _: ()) {
        *crate::lock(&self.0) = Some(result.as_ref().map(|_| ()).map_err(|(e, _)| e.to_string()));
    }
}

/// Writes declaration records and waits until they are in the topic and read back.
pub struct DeclarationLog {
    out: StateProducer<Acked>,
    reader: Arc<StateReader>,
    /// One record at a time: the acknowledgement is the last one's.
    sending: Mutex<()>,
}

impl DeclarationLog {
    pub fn new(
        clients: &KafkaClients,
        topic: &str,
        reader: Arc<StateReader>,
        timeout: Duration,
    ) -> anyhow::Result<DeclarationLog> {
        let out = StateProducer::new(
            clients,
            topic,
            Acked::default(),
            timeout,
            &[],
            "the declarations' producer",
        )?;
        Ok(DeclarationLog {
            out,
            reader,
            sending: Mutex::new(()),
        })
    }

    /// The state topic's name, for errors.
    pub fn topic(&self) -> &str {
        &self.out.topic
    }

    /// Waits until this replica's reader has read every record written before the call.
    pub fn catch_up(&self, timeout: Duration) -> anyhow::Result<()> {
        self.reader.catch_up(timeout)
    }

    /// The reader, whose `declarations_version` says when a declaration record was read.
    pub fn reader(&self) -> Arc<StateReader> {
        self.reader.clone()
    }

    /// The latest record of every declaration, by key.
    pub fn records(&self) -> BTreeMap<String, Vec<u8>> {
        self.reader.declarations()
    }

    /// Writes one record (`value` None: a tombstone), waits for the cluster's
    /// acknowledgement, then for this replica's reader to have read the topic that far.
    pub fn write(&self, key: &str, value: Option<&[u8]>) -> anyhow::Result<()> {
        let _one = crate::lock(&self.sending);
        *crate::lock(&self.out.producer.context().0) = None;
        let headers = OwnedHeaders::new().insert(Header {
            key: KIND,
            value: Some(Kind::Declaration.as_str()),
        });
        let mut record: BaseRecord<'_, str, [u8], ()> = BaseRecord::to(&self.out.topic)
            .key(key)
            .partition(changelog_partition(key, self.out.partitions))
            .headers(headers);
        if let Some(v) = value {
            record = record.payload(v);
        }
        self.out
            .producer
            .send(record)
            .map_err(|(e, _)| anyhow::anyhow!("cannot send to {}: {e}", self.out.topic))?;
        let start = Instant::now();
        let acked = loop {
            self.out.producer.poll(Duration::from_millis(5));
            if let Some(r) = crate::lock(&self.out.producer.context().0).take() {
                break r;
            }
            if start.elapsed() > self.out.timeout {
                break Err(format!("no acknowledgement within {:?}", self.out.timeout));
            }
        };
        acked.map_err(|e| anyhow::anyhow!("{} did not take the record: {e}", self.out.topic))?;
        self.reader.catch_up(
            (self.out.timeout.saturating_sub(start.elapsed())).max(Duration::from_secs(1)),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declaration_keys_are_no_state_keys() {
        let k = key("stream", "sales.eu");
        assert_eq!(parse_key(&k), Some(("stream", "sales.eu")));
        assert_eq!(parse_key("sales/3"), None);
        assert!(!crate::config::valid_name("@declared"));
    }
}
