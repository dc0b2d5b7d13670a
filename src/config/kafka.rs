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
    /// Consumer-only properties (`session.timeout.ms`, ...) go to the consumers only.
    pub options: BTreeMap<String, String>,
    /// This instance's static group membership (KIP-345, librdkafka's `group.instance.id`) in
    /// every consumer group it joins; empty: dynamic membership. A restart within the
    /// session timeout gets its partitions back without a rebalance; a stop does not hand them
    /// over at once (the group waits for the member's session to end).
    pub instance_id: String,
    /// How partitions are had: `group` (the group protocol shares them among the group's
    /// members), `standalone` (this instance reads every partition of its topics itself, offsets
    /// still committed to the group), `auto` (standalone on the embedded broker unless
    /// `state.store = "kafka"`, group elsewhere).
    pub assignment: Assignment,
}

/// `kafka.assignment`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Assignment {
    /// `standalone` on the embedded broker (unless `state.store = "kafka"`), `group` elsewhere.
    #[default]
    Auto,
    /// The group protocol: partitions shared among the members of the consumer group.
    Group,
    /// Every partition of every topic assigned by this instance to itself, no group membership.
    Standalone,
}

/// What `group.instance.id` may hold (as a group id): letters, digits, `.`, `_`, `-`.
pub fn check_instance_id(id: &str) -> anyhow::Result<()> {
    if id.len() > 249 {
        anyhow::bail!(
            "kafka.instance_id is {} characters long: at most 249",
            id.len()
        );
    }
    if let Some(c) = id
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-')))
    {
        anyhow::bail!(
            "kafka.instance_id {id:?} holds {c:?}: only letters, digits, '.', '_' and '-' are allowed"
        );
    }
    Ok(())
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
            instance_id: String::new(),
            assignment: Assignment::Auto,
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
