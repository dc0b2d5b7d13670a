//! The topics ravel reads or writes, checked against the cluster at start: every stream topic,
//! every feature-stream topic (labels sent over HTTP are written there too), with dead
//! letters on each one's `<topic>.dlq`, and with `state.store = "kafka"` the compacted state
//! topic. Production clusters do not create topics on first use, and a dead-letter topic that
//! does not exist holds its partition (`ingest::held`), so a missing topic is found here
//! rather than at the first bad message.
//!
//! Whose topic it is decides who creates it, as in Kafka Streams and Kafka Connect: the
//! topics ravel owns (dead letters, state) are created when missing unless
//! `dlq.create_topics` / `state.create_topic` say not to; the topics it reads are created
//! only with `kafka.create_topics = true` (a typo in a topic name is reported, not
//! created). Partitions `kafka.topic_partitions` (one for feature-stream topics and their
//! dead letters: their order matters), replication `kafka.topic_replication` capped by the
//! cluster's broker count, through the AdminClient's CreateTopics. The embedded broker
//! (librdkafka's mock cluster, `ravel broker`) does not implement CreateTopics (the client
//! answers "unsupported feature" at once); there, and on any broker that answers so, ravel
//! falls back to the one other way the protocol has: a metadata request that allows automatic
//! creation, which creates the topic with the broker's default partition count (a warning
//! says so when that differs). A cluster that refuses the creation is an authorization error
//! (`kafka::authz`) naming the topic, the key that asked for it and the way out. A topic
//! still missing keeps the service not ready: the log line and `/readyz` name it with the
//! command that creates it, and the check is repeated until it exists.

use crate::config::Config;
use crate::config::dlq_of;
use crate::health::{Denied, Health, MissingTopic, Refusal};
use crate::kafka::{Client, Heard, KafkaClients, is_embedded};
use crate::metrics::Metrics;
use rdkafka::admin::{AdminClient, AdminOptions, NewTopic, TopicReplication};
use rdkafka::client::DefaultClientContext;
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::producer::Producer;
use std::time::Duration;

/// A topic ravel needs, and how it would create it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Needed {
    pub topic: String,
    /// `stream`, `dead_letters`, `feature_stream`, `state`, `scorer` (events a scorer reads)
    /// or `scorer_output` (its predictions).
    pub role: &'static str,
    pub partitions: i32,
    /// Whether ravel creates it when missing (the value of `switch`).
    pub create: bool,
    /// The config key that decides `create`.
    pub switch: &'static str,
}

impl Needed {
    /// Whether ravel only reads this topic (someone else's): a stream or feature-stream topic.
    pub fn is_input(&self) -> bool {
        matches!(self.role, "stream" | "feature_stream" | "scorer")
    }

    /// The CreateTopics request for it, with `replication` replicas and its settings.
    pub fn new_topic(&self, replication: i16) -> NewTopic<'_> {
        self.settings().iter().fold(
            NewTopic::new(
                &self.topic,
                self.partitions,
                TopicReplication::Fixed(i32::from(replication)),
            ),
            |t, (k, v)| t.set(k, v),
        )
    }

    /// The topic-level settings ravel creates it with: the state topic is compacted (only
    /// the latest record of each key matters).
    pub fn settings(&self) -> &'static [(&'static str, &'static str)] {
        if self.role == "state" {
            &[("cleanup.policy", "compact")]
        } else {
            &[]
        }
    }
}

/// Every topic the configuration reads or writes, in a stable order.
pub fn needed(config: &Config) -> Vec<Needed> {
    let mut out = Vec::new();
    let parts = config.kafka.topic_partitions;
    let input = |topic: String, role, partitions| Needed {
        topic,
        role,
        partitions,
        create: config.kafka.create_topics,
        switch: "kafka.create_topics",
    };
    let dead_letters = |topic: &str, partitions| Needed {
        topic: dlq_of(topic),
        role: "dead_letters",
        partitions,
        create: config.dlq.create_topics,
        switch: "dlq.create_topics",
    };
    for s in &config.streams {
        out.push(input(s.topic(), "stream", parts));
        if config.ingest.dead_letter {
            out.push(dead_letters(&s.topic(), parts));
        }
    }
    for f in &config.feature_streams {
        out.push(input(f.topic(), "feature_stream", 1));
        if config.ingest.dead_letter {
            out.push(dead_letters(&f.topic(), 1));
        }
    }
    for sc in &config.scorers {
        // A scorer of a stream's own topic: the topic and its dead letters are the stream's.
        let of_stream = out.iter().any(|n| n.topic == sc.topic);
        if !of_stream {
            out.push(input(sc.topic.clone(), "scorer", parts));
        }
        out.push(Needed {
            topic: sc.output_topic.clone(),
            role: "scorer_output",
            partitions: parts,
            create: sc.create_output_topic,
            switch: "scorers.create_output_topic",
        });
        if config.ingest.dead_letter && !of_stream {
            out.push(dead_letters(&sc.topic, parts));
        }
    }
    if let Some(topic) = config.state.kafka_topic(&config.kafka.group_id) {
        out.push(Needed {
            topic,
            role: "state",
            partitions: parts,
            create: config.state.create_topic,
            switch: "state.create_topic",
        });
    }
    out
}

/// What an authorization error on creating `n` means and what to do, in the user's words:
/// which key asked for it, the ACL to grant, or the command to run and the key to turn off.
pub fn create_denied(n: &Needed, error: &str, command: &str) -> String {
    format!(
        "{error}. ravel creates topic '{}' because {} = true; grant this client's principal \
         the CREATE operation on the topic (or on the cluster), or create it with `{command}` \
         and set {} = false",
        n.topic, n.switch, n.switch
    )
}

/// The topics a metadata answer lists (but Kafka's internal `__` ones): where a missing
/// topic's "did you mean" looks.
fn topic_names(md: &rdkafka::metadata::Metadata) -> Vec<String> {
    md.topics()
        .iter()
        .map(|t| t.name().to_string())
        .filter(|t| !t.starts_with("__"))
        .collect()
}

/// ` (did you mean "sales"?)` when a topic of the cluster is close to `topic`.
fn similar(topic: &str, existing: &[String]) -> String {
    match crate::config::explain::did_you_mean(topic, existing) {
        s if s.is_empty() => s,
        s => format!(" ({})", s.trim_start_matches("; ")),
    }
}

/// Why a missing topic is not created, for the log and `/readyz`.
pub fn missing_reason(n: &Needed, created_tried: bool) -> String {
    match (n.is_input(), created_tried) {
        (_, true) => format!(
            "ravel could not create it ({} = true; see the log for the broker's answer)",
            n.switch
        ),
        (true, false) => format!(
            "ravel does not create the topics it reads ({} = false): check the topic name in \
             the config, produce to it, or create it",
            n.switch
        ),
        (false, false) => format!("{} = false, so ravel does not create it", n.switch),
    }
}

/// What creates `n` on the cluster whose id is `cluster_id`: on the embedded broker, a
/// producer's first message (`ravel produce`) or `ravel broker --topic`; elsewhere
/// kafka-topics.sh (`create_command`).
pub fn create_command_on(
    cluster_id: Option<&str>,
    brokers: &str,
    n: &Needed,
    replication: i16,
) -> String {
    if is_embedded(cluster_id) {
        return format!(
            "ravel produce --brokers {brokers} --topic {} --input FILE (the embedded broker \
             creates a topic with its first message), or start ravel broker with --topic {}:{}",
            n.topic, n.topic, n.partitions
        );
    }
    create_command(brokers, n, replication)
}

/// The command that creates `n` (replication `replication`).
pub fn create_command(brokers: &str, n: &Needed, replication: i16) -> String {
    let mut cmd = format!(
        "kafka-topics.sh --bootstrap-server {brokers} --create --topic {} --partitions {} --replication-factor {replication}",
        n.topic, n.partitions
    );
    for (k, v) in n.settings() {
        cmd.push_str(&format!(" --config {k}={v}"));
    }
    cmd
}

/// What the cluster says about one topic.
pub enum Found {
    Exists {
        partitions: usize,
        /// Replicas of its first partition.
        replication: usize,
    },
    Missing,
    /// Describe refused: the broker's error.
    Denied(String),
}

/// Checks the topics ravel needs.
pub struct TopicCheck {
    clients: KafkaClients,
    needed: Vec<Needed>,
    replication: i16,
}

impl TopicCheck {
    pub fn new(config: &Config, clients: KafkaClients) -> TopicCheck {
        TopicCheck {
            clients,
            needed: needed(config),
            replication: config.kafka.topic_replication,
        }
    }

    /// Looks every topic up (creating the missing ones when asked to); records and logs what is
    /// missing or denied. Returns the number still missing.
    pub fn run(&self, health: &Health, metrics: &Metrics) -> usize {
        // A metadata request that never creates a topic, whatever the user's options say.
        let mut cfg = self.clients.config(Client::Admin, &[]);
        cfg.set("allow.auto.create.topics", "false");
        let probe: BaseConsumer<Heard> = match cfg.create_with_context(Heard::default()) {
            Ok(c) => c,
            Err(e) => {
                tracing::error!(error = %self.clients.scrub(&e.to_string()), "cannot create the client that checks the topics");
                return self.needed.len();
            }
        };
        // A cluster that has not answered within 4 s is named in `/readyz`, and the check is
        // left to the next round: the first one holds the start of the HTTP server and of
        // ingest.
        let asked_at = std::time::SystemTime::now();
        let answer = probe.fetch_metadata(None::<&str>, Duration::from_secs(4));
        if let Err(e) = &answer {
            // A refused login or TLS handshake (librdkafka says so on its own, not in the
            // request's error) is the reason to name.
            let why = Heard::said_by(&probe)
                .into_iter()
                .find(|h| Refusal::of(h).is_some())
                .unwrap_or_else(|| e.to_string());
            health.unreachable(asked_at, &self.clients.scrub(&why));
        }
        let (brokers, existing) = match answer {
            Ok(md) => {
                health.reachable();
                (md.brokers().len().max(1), topic_names(&md))
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot read the cluster's metadata; topics not checked yet");
                return self.needed.len();
            }
        };
        let replication = self.replication.min(brokers as i16).max(1);
        let cluster_id = probe.client().fetch_cluster_id(Duration::from_secs(2));
        if let Some(id) = &cluster_id {
            self.clients.heard_cluster(id);
        }
        let mut missing: Vec<&Needed> = Vec::new();
        for n in &self.needed {
            match found(&probe, &n.topic, LOOKUP_TIMEOUT) {
                Found::Exists { .. } => {
                    health.allow("topic", &n.topic);
                }
                Found::Missing => missing.push(n),
                Found::Denied(e) => {
                    let d = Denied {
                        resource_type: "topic",
                        resource: n.topic.clone(),
                        operation: "describe",
                        error: e,
                    };
                    crate::kafka::authz::record(health, metrics, d);
                }
            }
        }
        let to_create: Vec<&Needed> = missing.iter().copied().filter(|n| n.create).collect();
        if !to_create.is_empty() {
            let embedded = is_embedded(cluster_id.as_deref());
            create_topics(
                &self.clients,
                &probe,
                &to_create,
                replication,
                embedded,
                &|d| crate::kafka::authz::record(health, metrics, d),
            );
            missing.retain(|n| match found(&probe, &n.topic, LOOKUP_TIMEOUT) {
                Found::Exists { .. } => {
                    health.allow("topic", &n.topic);
                    false
                }
                _ => true,
            });
        }
        let report: Vec<MissingTopic> = missing
            .iter()
            .map(|n| MissingTopic {
                topic: n.topic.clone(),
                role: n.role,
                create_with: create_command_on(
                    cluster_id.as_deref(),
                    self.clients.brokers(),
                    n,
                    replication,
                ),
                why: missing_reason(n, n.create) + &similar(&n.topic, &existing),
            })
            .collect();
        for n in &self.needed {
            let is_missing = report.iter().any(|m| m.topic == n.topic);
            metrics
                .cluster
                .missing_topics
                .with_label_values(&[n.topic.as_str(), n.role])
                .set(i64::from(is_missing));
        }
        for m in &report {
            tracing::error!(
                topic = %m.topic, role = m.role, create_with = %m.create_with,
                "topic '{}' does not exist: {}; not ready until it exists; create it with: {}",
                m.topic, m.why, m.create_with
            );
        }
        let left = report.len();
        health.set_missing_topics(report);
        left
    }
}

/// Creates `missing` through CreateTopics, or, where the broker does not support it, through
/// a metadata request that allows automatic creation. The `embedded` broker is known not to
/// serve CreateTopics (it lets the request time out, 10 s at every start): it goes straight
/// to the metadata requests. A creation the cluster refuses goes to `on_denied` (at start
/// `/readyz` and the metrics; for a run-time declaration, its answer).
fn create_topics(
    clients: &KafkaClients,
    probe: &BaseConsumer<Heard>,
    missing: &[&Needed],
    replication: i16,
    embedded: bool,
    on_denied: &dyn Fn(Denied),
) {
    let denied = |n: &Needed, code: RDKafkaErrorCode| {
        let command = create_command(clients.brokers(), n, replication);
        on_denied(Denied {
            resource_type: "topic",
            resource: n.topic.clone(),
            operation: "create",
            error: create_denied(n, &code.to_string(), &command),
        });
    };
    let of = |t: &str| missing.iter().copied().find(|n| n.topic == t);
    let admin: AdminClient<DefaultClientContext> = match clients.config(Client::Admin, &[]).create()
    {
        Ok(a) => a,
        Err(e) => {
            tracing::error!(error = %clients.scrub(&e.to_string()), "cannot create the admin client");
            return;
        }
    };
    let new: Vec<NewTopic> = missing.iter().map(|n| n.new_topic(replication)).collect();
    let opts = AdminOptions::new()
        .operation_timeout(Some(Duration::from_secs(10)))
        .request_timeout(Some(Duration::from_secs(10)));
    let mut unsupported = Vec::new();
    let result = if embedded {
        unsupported = missing.iter().map(|n| n.topic.clone()).collect();
        Ok(Vec::new())
    } else {
        futures::executor::block_on(admin.create_topics(&new, &opts))
    };
    match result {
        Ok(per_topic) => {
            for r in per_topic {
                match r {
                    Ok(t) => tracing::info!(topic = %t, replication, "topic created"),
                    Err((t, RDKafkaErrorCode::TopicAlreadyExists)) => {
                        tracing::info!(topic = %t, "topic already exists")
                    }
                    Err((t, code)) if is_unsupported(code) => unsupported.push(t),
                    Err((t, code)) if crate::kafka::authz::is_denied(code) => {
                        if let Some(n) = of(&t) {
                            denied(n, code)
                        }
                    }
                    Err((t, code)) => {
                        tracing::error!(topic = %t, error = %code, "cannot create topic")
                    }
                }
            }
        }
        Err(KafkaError::AdminOp(code)) if is_unsupported(code) => {
            unsupported = missing.iter().map(|n| n.topic.clone()).collect();
        }
        Err(KafkaError::AdminOp(code)) if crate::kafka::authz::is_denied(code) => {
            missing.iter().for_each(|n| denied(n, code));
        }
        Err(e) => tracing::error!(error = %e, "CreateTopics failed"),
    }
    if unsupported.is_empty() {
        return;
    }
    if embedded {
        tracing::info!(
            topics = ?unsupported,
            "creating the topics on the embedded broker through metadata requests that allow automatic creation (it does not serve CreateTopics)"
        );
    } else {
        tracing::warn!(
            topics = ?unsupported,
            "the broker did not serve CreateTopics; creating the topics through metadata requests that allow automatic creation"
        );
    }
    let mut cfg = clients.config(Client::Admin, &[]);
    cfg.set("allow.auto.create.topics", "true");
    let Ok(auto): Result<rdkafka::producer::BaseProducer, _> = cfg.create() else {
        return;
    };
    for t in &unsupported {
        // A cluster that refuses to create it says so in the answer to this request.
        let asked = auto
            .client()
            .fetch_metadata(Some(t), Duration::from_secs(10));
        if let Ok(md) = &asked
            && let Some(code) = md.topics().first().and_then(|mt| mt.error())
            && let code = RDKafkaErrorCode::from(code)
            && crate::kafka::authz::is_denied(code)
        {
            if let Some(n) = of(t) {
                denied(n, code);
            }
            continue;
        }
        let want = missing
            .iter()
            .find(|n| &n.topic == t)
            .map_or(0, |n| n.partitions);
        match probe.fetch_metadata(Some(t), Duration::from_secs(10)) {
            Ok(md) => match md.topics().first() {
                Some(mt) if mt.error().is_none() => {
                    let have = mt.partitions().len() as i32;
                    if have != want {
                        tracing::warn!(
                            topic = %t, partitions = have, configured = want,
                            "topic created with the broker's default partition count, not kafka.topic_partitions"
                        );
                    } else {
                        tracing::info!(topic = %t, partitions = have, "topic created");
                    }
                }
                _ => tracing::error!(topic = %t, "the broker did not create the topic"),
            },
            Err(e) => tracing::error!(topic = %t, error = %e, "cannot check the created topic"),
        }
    }
}

/// Whether CreateTopics failed because the broker does not serve it: it says so, or (the
/// embedded broker: librdkafka waits for a broker that supports the request) never answers.
/// Falling back is harmless either way: a cluster that does not create topics on metadata
/// requests leaves them missing, and they are reported as such.
fn is_unsupported(code: RDKafkaErrorCode) -> bool {
    matches!(
        code,
        RDKafkaErrorCode::UnsupportedFeature
            | RDKafkaErrorCode::UnsupportedVersion
            | RDKafkaErrorCode::InvalidRequest
            | RDKafkaErrorCode::OperationTimedOut
            | RDKafkaErrorCode::RequestTimedOut
    )
}

/// The longest wait for one topic's metadata at start.
const LOOKUP_TIMEOUT: Duration = Duration::from_secs(10);

/// Looks one topic up without creating it (`probe` must have `allow.auto.create.topics =
/// false`), waiting at most `timeout`.
pub fn found<C: ConsumerContext>(probe: &BaseConsumer<C>, topic: &str, timeout: Duration) -> Found {
    match probe.fetch_metadata(Some(topic), timeout) {
        Ok(md) => match md.topics().first() {
            Some(t) => match t.error() {
                None if !t.partitions().is_empty() => Found::Exists {
                    partitions: t.partitions().len(),
                    replication: t.partitions()[0].replicas().len(),
                },
                None => Found::Missing,
                Some(e) => {
                    let code: RDKafkaErrorCode = e.into();
                    if crate::kafka::authz::is_denied(code) {
                        Found::Denied(code.to_string())
                    } else {
                        Found::Missing
                    }
                }
            },
            None => Found::Missing,
        },
        Err(KafkaError::MetadataFetch(code)) if crate::kafka::authz::is_denied(code) => {
            Found::Denied(code.to_string())
        }
        Err(_) => Found::Missing,
    }
}

/// The topics a stream declared over the API needs (its own and, with
/// `ingest.dead_letter`, its dead letters), looked up before the declaration is accepted, so
/// that a typo in a topic is refused, naming the topic and the command that creates it, rather
/// than read as a topic that never gets a message. A cluster that does not answer within a few
/// seconds leaves the topics unchecked (logged): the declaration is accepted, as the file's
/// streams are at a start without a cluster.
pub fn check_declared(config: &Config, clients: &KafkaClients) -> Result<(), String> {
    let mut cfg = clients.config(Client::Admin, &[]);
    cfg.set("allow.auto.create.topics", "false");
    let probe: BaseConsumer<Heard> = cfg
        .create_with_context(Heard::default())
        .map_err(|e| clients.scrub(&e.to_string()))?;
    let (brokers, existing) = match probe.fetch_metadata(None::<&str>, Duration::from_secs(4)) {
        Ok(md) => (md.brokers().len().max(1), topic_names(&md)),
        Err(e) => {
            tracing::warn!(error = %clients.scrub(&e.to_string()), "the Kafka cluster did not answer: the topics of a stream declared over the API are not checked");
            return Ok(());
        }
    };
    let replication = config.kafka.topic_replication.min(brokers as i16).max(1);
    let cluster_id = probe.client().fetch_cluster_id(Duration::from_secs(2));
    // The topics ravel reads first: a declaration refused for one of them creates nothing.
    let mut needs = needed(config);
    needs.sort_by_key(|n| !n.is_input());
    for n in needs {
        let mut look = found(&probe, &n.topic, LOOKUP_TIMEOUT);
        // The topics ravel owns (dead letters, a scorer's output) are created now, as at the
        // start, when their switch allows (issue 59: on `ravel broker` the only other ways
        // were a file written into the dead-letter topic or a restart of the broker).
        let mut refused = None;
        if matches!(look, Found::Missing) && n.create {
            let denials = std::sync::Mutex::new(Vec::new());
            let record = |d: Denied| crate::lock(&denials).push(d.error);
            create_topics(
                clients,
                &probe,
                &[&n],
                replication,
                is_embedded(cluster_id.as_deref()),
                &record,
            );
            refused = crate::lock(&denials).pop();
            look = found(&probe, &n.topic, LOOKUP_TIMEOUT);
        }
        match look {
            Found::Exists { .. } => {}
            Found::Missing if n.create => {
                return Err(format!(
                    "topic '{}' ({}) does not exist and ravel could not create it ({}; \
                     {} = true): create it with: {}; then PUT the declaration again",
                    n.topic,
                    n.role.replace('_', " "),
                    refused.unwrap_or_else(|| "the broker did not say why: see ravel's log".into()),
                    n.switch,
                    create_command_on(cluster_id.as_deref(), clients.brokers(), &n, replication),
                ));
            }
            Found::Missing => {
                return Err(format!(
                    "topic '{}' ({}) does not exist on the cluster: check the name{}, or create \
                     it with: {}; then PUT the declaration again ({})",
                    n.topic,
                    n.role.replace('_', " "),
                    similar(&n.topic, &existing),
                    create_command_on(cluster_id.as_deref(), clients.brokers(), &n, replication),
                    if n.is_input() {
                        "ravel does not create the topics it reads".to_string()
                    } else {
                        format!("{} = false, so ravel does not create it", n.switch)
                    }
                ));
            }
            Found::Denied(e) => {
                return Err(format!(
                    "the cluster refused to describe topic '{}' ({e}): grant ravel's principal \
                     Describe and Read on it, then PUT the declaration again",
                    n.topic
                ));
            }
        }
    }
    Ok(())
}

/// Runs the check once, before ingest subscribes (so that the topics it creates are there
/// when the consumer looks), then, while a topic is missing, again with a growing pause (2 s
/// to 10 s) on a thread of its own until none is.
pub async fn check_then_watch(
    check: TopicCheck,
    health: std::sync::Arc<Health>,
    metrics: std::sync::Arc<Metrics>,
) {
    let (h, m) = (health.clone(), metrics.clone());
    let Ok((check, left)) = tokio::task::spawn_blocking(move || {
        let left = check.run(&h, &m);
        (check, left)
    })
    .await
    else {
        return;
    };
    if left == 0 {
        return;
    }
    std::thread::Builder::new()
        .name("ravel-topics".into())
        .spawn(move || {
            let mut wait = Duration::from_secs(2);
            loop {
                std::thread::sleep(wait);
                if check.run(&health, &metrics) == 0 {
                    break;
                }
                // One metadata request every 10 s at most: a topic a producer creates later
                // (the first `ravel produce` on `ravel broker`) is seen within seconds.
                wait = (wait * 2).min(Duration::from_secs(10));
            }
        })
        .map(|_| ())
        .unwrap_or_else(|e| tracing::error!(error = %e, "cannot start the topic check"));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_topic_read_or_written_is_needed_with_its_command() {
        let mut c = Config {
            streams: vec![crate::config::StreamConfig {
                name: "s".into(),
                topic: Some("obs".into()),
                ..serde_json::from_value(serde_json::json!({"name": "s", "features": 3})).unwrap()
            }],
            ..Config::default()
        };
        c.kafka.topic_partitions = 6;
        let n = needed(&c);
        let names: Vec<_> = n
            .iter()
            .map(|n| (n.topic.as_str(), n.role, n.partitions, n.create, n.switch))
            .collect();
        // ravel creates its own topics by default, never by default the ones it reads.
        assert_eq!(
            names,
            [
                ("obs", "stream", 6, false, "kafka.create_topics"),
                ("obs.dlq", "dead_letters", 6, true, "dlq.create_topics")
            ]
        );
        assert_eq!(
            create_command("k:9092", &n[1], 3),
            "kafka-topics.sh --bootstrap-server k:9092 --create --topic obs.dlq --partitions 6 --replication-factor 3"
        );
        c.kafka.create_topics = true;
        c.dlq.create_topics = false;
        c.state.store = crate::config::StoreKind::Kafka;
        let n = needed(&c);
        let created: Vec<_> = n.iter().map(|n| (n.role, n.create)).collect();
        assert_eq!(
            created,
            [("stream", true), ("dead_letters", false), ("state", true)]
        );
        assert_eq!(n[2].topic, "ravel.state");
        assert_eq!(n[2].settings(), [("cleanup.policy", "compact")]);
        c.state.create_topic = false;
        assert!(!needed(&c)[2].create);
        c.state.store = crate::config::StoreKind::Dir;
        c.ingest.dead_letter = false;
        assert_eq!(needed(&c).len(), 1);
        // A scorer of the stream's own topic: the topic and its dead letters once, the
        // stream's; the scorer's output its own.
        c.ingest.dead_letter = true;
        c.scorers.push(
            toml::from_str(
                "name = \"sc\"\nstream = \"s\"\ntopic = \"obs\"\noutput_topic = \"obs.scores\"",
            )
            .unwrap(),
        );
        let roles: Vec<_> = needed(&c)
            .iter()
            .map(|n| (n.topic.clone(), n.role))
            .collect();
        assert_eq!(
            roles,
            [
                ("obs".to_string(), "stream"),
                ("obs.dlq".to_string(), "dead_letters"),
                ("obs.scores".to_string(), "scorer_output")
            ]
        );
    }

    #[test]
    fn a_refused_creation_names_the_key_the_grant_and_the_way_out() {
        let n = Needed {
            topic: "sales.dlq".into(),
            role: "dead_letters",
            partitions: 4,
            create: true,
            switch: "dlq.create_topics",
        };
        let cmd = create_command("k:9092", &n, 3);
        let m = create_denied(&n, "Broker: Topic authorization failed", &cmd);
        for part in [
            "Broker: Topic authorization failed",
            "topic 'sales.dlq' because dlq.create_topics = true",
            "CREATE",
            &format!("create it with `{cmd}`"),
            "set dlq.create_topics = false",
        ] {
            assert!(m.contains(part), "'{part}' missing from: {m}");
        }
        assert!(missing_reason(&n, true).contains("could not create it"));
        // On the embedded broker there is no kafka-topics.sh: what creates a topic there.
        assert_eq!(create_command_on(Some("abc"), "k:9092", &n, 3), cmd);
        assert_eq!(
            create_command_on(Some("mockCluster1a2b"), "127.0.0.1:9092", &n, 3),
            "ravel produce --brokers 127.0.0.1:9092 --topic sales.dlq --input FILE (the \
             embedded broker creates a topic with its first message), or start ravel broker \
             with --topic sales.dlq:4"
        );
        let input = Needed {
            topic: "sales".into(),
            role: "stream",
            create: false,
            switch: "kafka.create_topics",
            ..n
        };
        let why = missing_reason(&input, false);
        assert!(
            why.contains("does not create the topics it reads")
                && why.contains("kafka.create_topics = false")
                && why.contains("check the topic name"),
            "{why}"
        );
    }
}
