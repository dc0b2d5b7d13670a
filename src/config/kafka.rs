//! `[kafka]`: the cluster (or the embedded broker), the consumer group, the topics ravel
//! creates, and the librdkafka options passed through (secrets from `${env:..}` / `${file:..}`).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct KafkaConfig {
    /// Bootstrap servers of a real Kafka; empty starts the embedded broker.
    pub brokers: String,
    /// Consumer group of this service (one group for all its streams).
    pub group_id: String,
    /// Partitions of each stream topic the embedded broker creates.
    pub embedded_partitions: i32,
    /// At start, also create the topics ravel reads (stream and feature-stream topics) when
    /// the cluster lacks them; off (the default), a missing one keeps it not ready, naming it.
    /// The topics ravel owns (dead letters, state) follow `dlq.create_topics` and
    /// `state.create_topic`.
    pub create_topics: bool,
    /// Partitions of the topics ravel creates (feature-stream topics and their dead-letter
    /// topics always get one: their order matters).
    pub topic_partitions: i32,
    /// Replication factor of the topics ravel creates, capped by the cluster's broker count.
    pub topic_replication: i16,
    /// librdkafka properties passed through to every client (SASL, TLS, timeouts). A value
    /// `${env:NAME}` is read from the environment, `${file:PATH}` from a file (trimmed).
    pub options: BTreeMap<String, String>,
}

impl Default for KafkaConfig {
    fn default() -> Self {
        KafkaConfig {
            brokers: String::new(),
            group_id: "ravel".into(),
            embedded_partitions: 4,
            create_topics: false,
            topic_partitions: 4,
            topic_replication: 3,
            options: BTreeMap::new(),
        }
    }
}

impl KafkaConfig {
    pub fn embedded(&self) -> bool {
        self.brokers.trim().is_empty()
    }
    /// librdkafka properties. Environment variables cannot hold dots, so an option key coming
    /// from `RAVEL_KAFKA__OPTIONS__SECURITY_PROTOCOL` arrives as `security_protocol`; no
    /// librdkafka property has an underscore, so underscores are read as dots.
    /// Replaces every option value `${env:NAME}` by that environment variable and
    /// `${file:PATH}` by the file's contents (surrounding whitespace trimmed), so secrets need
    /// not sit in the config file. Done once at load: a missing variable or file stops the start.
    pub fn resolve_options(&mut self) -> anyhow::Result<()> {
        for (k, v) in self.options.iter_mut() {
            super::resolve_secret(&format!("kafka.options.{k}"), v)?;
        }
        Ok(())
    }

    pub fn librdkafka_options(&self) -> impl Iterator<Item = (String, &str)> {
        self.options
            .iter()
            .map(|(k, v)| (k.replace('_', "."), v.as_str()))
    }
}
