//! The librdkafka client configuration, in one place: the service's consumer, its
//! dead-letter producer, its labels producer and the state store's clients are built from one `KafkaClients` (the
//! brokers, the group, the user's `kafka.options`), each with its own `client.id`
//! (`ravel-<group>-consumer`, `-dlq`, `-labels`, so broker logs and quotas tell them apart)
//! and its own settings, with the user's options applied last to every one of them.

use crate::config::KafkaConfig;
use rdkafka::ClientContext;
use rdkafka::config::{ClientConfig, RDKafkaLogLevel};
use rdkafka::consumer::ConsumerContext;
use rdkafka::error::KafkaError;
use std::sync::Mutex;

/// A librdkafka client configuration for `brokers` with the pass-through options applied last
/// (`client.id` "ravel"): the command-line producers (`ravel produce`, the demo).
pub fn client_config(kafka: &KafkaConfig, brokers: &str) -> ClientConfig {
    let mut c = ClientConfig::new();
    c.set("bootstrap.servers", brokers)
        .set("client.id", "ravel");
    for (k, v) in kafka.librdkafka_options() {
        if !consumer_only(&k) {
            c.set(k, v);
        }
    }
    c
}

/// librdkafka's consumer-only properties (scope `C` in its CONFIGURATION.md): given to a
/// producer or an admin client, librdkafka ignores them with a CONFWARN line at every start,
/// so they go to the consumers only.
const CONSUMER_ONLY: &[&str] = &[
    "group.id",
    "group.instance.id",
    "partition.assignment.strategy",
    "session.timeout.ms",
    "heartbeat.interval.ms",
    "group.protocol.type",
    "group.protocol",
    "group.remote.assignor",
    "coordinator.query.interval.ms",
    "max.poll.interval.ms",
    "enable.auto.commit",
    "auto.commit.interval.ms",
    "enable.auto.offset.store",
    "queued.min.messages",
    "queued.max.messages.kbytes",
    "fetch.wait.max.ms",
    "fetch.queue.backoff.ms",
    "fetch.message.max.bytes",
    "max.partition.fetch.bytes",
    "fetch.max.bytes",
    "fetch.min.bytes",
    "fetch.error.backoff.ms",
    "offset.store.method",
    "isolation.level",
    "consume_cb",
    "rebalance_cb",
    "offset_commit_cb",
    "enable.partition.eof",
    "check.crcs",
    "auto.commit.enable",
    "auto.offset.reset",
    "offset.store.path",
    "offset.store.sync.interval.ms",
    "consume.callback.max.messages",
];

/// Whether librdkafka property `key` is for consumers only.
pub fn consumer_only(key: &str) -> bool {
    CONSUMER_ONLY.contains(&key)
}

/// Whether a librdkafka property holds a secret (passwords, keys, OAuth secrets and tokens,
/// JAAS configs): such values are never logged nor shown.
pub fn is_secret(key: &str) -> bool {
    let k = key.to_ascii_lowercase();
    [
        "password",
        "secret",
        "token",
        "jaas",
        "sasl.oauthbearer.config",
        "key.pem",
        "ssl.key",
        "keystore",
    ]
    .iter()
    .any(|s| k.contains(s))
        && !k.ends_with(".location")
}

/// `config` with every secret value replaced by `***`, for the log.
pub fn redacted(config: &ClientConfig) -> std::collections::BTreeMap<String, String> {
    config
        .config_map()
        .iter()
        .map(|(k, v)| {
            let v = if is_secret(k) { "***" } else { v };
            (k.to_string(), v.to_string())
        })
        .collect()
}

/// The consumers' `fetch.wait.max.ms` on the embedded broker (docs/concepts.md "Freshness"),
/// which answers a waiting fetch only when the wait is over; `kafka.options` may override it.
/// Other brokers keep librdkafka's default (500 ms): Kafka and Tansu answer a waiting fetch as
/// soon as a message arrives, and Tansu 0.6.0 answers a 5 ms fetch with nothing at all once a
/// partition holds some ten thousand record batches (its fetch costs time in proportion to
/// the partition's length: docs/compatibility.md).
pub const EMBEDDED_FETCH_WAIT_MAX_MS: u64 = 5;

/// A group member's session timeout on the embedded broker (`KafkaClients::session`).
pub const EMBEDDED_SESSION_TIMEOUT_MS: u64 = 4000;

/// The ingest consumer's `max.poll.interval.ms` on the embedded broker (`KafkaClients::join_bound`):
/// librdkafka gives up a JoinGroup request after this and 3 s, reconnects and joins again,
/// which is what frees a member whose join the embedded broker never answers
/// (docs/compatibility.md).
pub const EMBEDDED_MAX_POLL_INTERVAL_MS: u64 = 15_000;

/// The prefix of the embedded broker's cluster id (librdkafka's mock cluster, in `ravel serve`
/// or `ravel broker`).
const MOCK_CLUSTER_ID: &str = "mockCluster";

/// Whether the cluster whose id is `cluster_id` is the embedded broker (no CreateTopics, no
/// DescribeConfigs, no kafka-topics.sh; it answers a waiting fetch only when the wait is over).
pub fn is_embedded(cluster_id: Option<&str>) -> bool {
    cluster_id.is_some_and(|id| id.starts_with(MOCK_CLUSTER_ID))
}

/// The service's Kafka clients.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Client {
    /// The one consumer of every stream topic.
    Consumer,
    /// The dead-letter producer (`dead_letters::dlq`).
    DeadLetters,
    /// The reader of the copies already in a dead-letter topic (`dead_letters::dlq`).
    DeadLetterReader,
    /// The producer of labels sent over HTTP to feature-stream topics.
    Labels,
    /// The topic check and creation at start (`crate::kafka::topics`).
    Admin,
    /// The producer of partition states (`crate::store::kafka`).
    StateWriter,
    /// The consumer that tails the state topic (`crate::store::kafka`).
    StateReader,
    /// A scorer's consumer of events and producer of predictions (`crate::score`).
    ScorerConsumer,
    ScorerProducer,
    /// `ravel check`'s consumer: metadata, committed offsets, and the latest messages of the
    /// streams' topics (read by assignment, never committed).
    Check,
    /// `ravel check`'s admin client: topic configs.
    CheckAdmin,
    /// `ravel replay`'s consumer of a dead-letter topic and producer of its messages.
    Replay,
}

impl Client {
    fn suffix(self) -> &'static str {
        match self {
            Client::Consumer => "consumer",
            Client::DeadLetters => "dlq",
            Client::DeadLetterReader => "dlq-reader",
            Client::Labels => "labels",
            Client::Admin => "admin",
            Client::StateWriter => "state-writer",
            Client::StateReader => "state-reader",
            Client::ScorerConsumer => "scorer",
            Client::ScorerProducer => "scorer-output",
            Client::Check | Client::CheckAdmin => "check",
            Client::Replay => "replay",
        }
    }

    /// Whether the client is a consumer (it takes the consumer-only properties).
    fn consumes(self) -> bool {
        matches!(
            self,
            Client::Consumer
                | Client::StateReader
                | Client::ScorerConsumer
                | Client::Check
                | Client::DeadLetterReader
        )
    }
}

/// What every client of the service is built from.
#[derive(Debug, Clone)]
pub struct KafkaClients {
    brokers: String,
    group: String,
    /// `kafka.options`, dots restored.
    options: Vec<(String, String)>,
    /// `kafka.instance_id` (empty: none).
    instance_id: String,
    /// The cluster's id, once a client of the service heard it (the topic check at start):
    /// the settings made for the embedded broker apply to it only. Shared by every clone.
    cluster_id: std::sync::Arc<std::sync::OnceLock<String>>,
}

impl KafkaClients {
    pub fn new(kafka: &KafkaConfig, brokers: &str) -> Self {
        KafkaClients {
            brokers: brokers.to_string(),
            group: kafka.group_id.clone(),
            options: kafka
                .librdkafka_options()
                .map(|(k, v)| (k, v.to_string()))
                .collect(),
            instance_id: kafka.instance_id.clone(),
            cluster_id: Default::default(),
        }
    }

    /// Records the cluster's id (`cluster_id`, as a metadata answer gave it; the first one
    /// heard stays): the consumers made from then on take the settings of that broker.
    pub fn heard_cluster(&self, cluster_id: &str) {
        if self.cluster_id.set(cluster_id.to_string()).is_ok() {
            let embedded = is_embedded(Some(cluster_id));
            tracing::info!(
                cluster_id,
                embedded,
                "Kafka cluster identified; group members' session set for it (the embedded broker: 4 s)"
            );
        }
    }

    /// Whether a client of the service heard the cluster's id yet (`heard_cluster`).
    pub fn cluster_known(&self) -> bool {
        self.cluster_id.get().is_some()
    }

    /// Whether the cluster heard is the embedded broker (false while none was heard).
    pub fn on_embedded(&self) -> bool {
        is_embedded(self.cluster_id.get().map(|s| s.as_str()))
    }

    /// The consumers' fetch wait for this cluster: `EMBEDDED_FETCH_WAIT_MAX_MS` on the
    /// embedded broker, none (librdkafka's default) elsewhere or while the cluster is unknown.
    fn fetch_wait(&self) -> Option<(&'static str, String)> {
        self.on_embedded()
            .then(|| ("fetch.wait.max.ms", EMBEDDED_FETCH_WAIT_MAX_MS.to_string()))
    }

    /// A group member's session on the embedded broker: 4 s, heartbeats every 0.5 s. The
    /// embedded broker keeps a departed (SIGKILLed) member for its whole session timeout before
    /// its partitions go to the others, and librdkafka's default is 45 s: a replica restarted
    /// after a SIGKILL was ready after 44 s. The ingest consumer's JoinGroup wait is bounded
    /// too (`join_bound`). Elsewhere
    /// librdkafka's defaults (a cluster's own `group.min.session.timeout.ms` bounds them;
    /// docs/scaling.md says what to set).
    fn session(&self) -> Vec<(&'static str, String)> {
        if !self.on_embedded() {
            return Vec::new();
        }
        vec![
            (
                "session.timeout.ms",
                EMBEDDED_SESSION_TIMEOUT_MS.to_string(),
            ),
            ("heartbeat.interval.ms", "500".to_string()),
        ]
    }

    /// The ingest consumer's bound on a JoinGroup request on the embedded broker
    /// (`max.poll.interval.ms`, see `session`); not when the user set the session (the
    /// interval may not be shorter), nor for the scorers, whose loop may wait longer for its
    /// deliveries between two polls.
    fn join_bound(&self) -> Option<(&'static str, String)> {
        (self.on_embedded() && !self.options.iter().any(|(k, _)| k == "session.timeout.ms")).then(
            || {
                (
                    "max.poll.interval.ms",
                    EMBEDDED_MAX_POLL_INTERVAL_MS.to_string(),
                )
            },
        )
    }
    /// `text` (an error from librdkafka, which may quote a property's value) with the value of
    /// every secret option replaced by `***`.
    pub fn scrub(&self, text: &str) -> String {
        let mut out = text.to_string();
        for (k, v) in &self.options {
            if is_secret(k) && !v.is_empty() {
                out = out.replace(v.as_str(), "***");
            }
        }
        out
    }
    pub fn brokers(&self) -> &str {
        &self.brokers
    }
    pub fn group(&self) -> &str {
        &self.group
    }
    /// `ravel-<group>-<client>`.
    pub fn client_id(&self, client: Client) -> String {
        format!("ravel-{}-{}", self.group, client.suffix())
    }

    /// `kafka.instance_id`, when set.
    pub fn instance_id(&self) -> Option<&str> {
        (!self.instance_id.is_empty()).then_some(self.instance_id.as_str())
    }

    /// The configuration of `client`: brokers, its `client.id`, its own settings, then the
    /// user's options (the consumer-only ones for consumers only).
    pub fn config(&self, client: Client, settings: &[(&str, String)]) -> ClientConfig {
        let mut c = ClientConfig::new();
        c.set("bootstrap.servers", &self.brokers)
            .set("client.id", self.client_id(client));
        for (k, v) in settings {
            c.set(*k, v);
        }
        for (k, v) in &self.options {
            if client.consumes() || !consumer_only(k) {
                c.set(k, v);
            }
        }
        c
    }

    /// `group.id`, and `group.instance.id` when `kafka.instance_id` is set (static
    /// membership), for a consumer of `group`.
    fn membership(&self, group: &str) -> Vec<(&'static str, String)> {
        let mut m = vec![("group.id", group.to_string())];
        if let Some(id) = self.instance_id() {
            m.push(("group.instance.id", id.to_string()));
        }
        m
    }

    /// The consumer: offsets committed by hand, lag statistics every `lag_interval_ms`.
    pub fn consumer(&self, lag_interval_ms: u64) -> ClientConfig {
        let mut settings = self.membership(&self.group);
        settings.extend([
            // Offsets are committed by hand, after the checkpoint that holds the rows.
            ("enable.auto.commit", "false".into()),
            ("enable.auto.offset.store", "false".into()),
            ("auto.offset.reset", "earliest".into()),
            // Folding is slower than fetching, so the prefetch queue fills up; librdkafka
            // then pauses each partition's fetching for this long (default 1 s), which
            // starved the loop for most of the time (bench: binary rows/s several times
            // lower).
            ("fetch.queue.backoff.ms", "10".into()),
            ("statistics.interval.ms", lag_interval_ms.to_string()),
        ]);
        // Freshness: the embedded broker answers a waiting fetch only when the wait is over,
        // so there the wait is the delay of every row of a quiet stream (librdkafka's default
        // of 500 ms: ~450 ms from the producer's ack to the snapshot). Kafka and Tansu answer
        // as soon as a message arrives (fetch.min.bytes = 1), so elsewhere the default holds.
        settings.extend(self.fetch_wait());
        settings.extend(self.session());
        settings.extend(self.join_bound());
        self.config(Client::Consumer, &settings)
    }

    /// A scorer's consumer (`group`: its own group): offsets committed by hand, after the
    /// predictions of the messages before them are acknowledged.
    pub fn scorer_consumer(&self, group: &str) -> ClientConfig {
        let mut settings = self.membership(group);
        settings.extend([
            ("enable.auto.commit", "false".into()),
            ("enable.auto.offset.store", "false".into()),
            ("auto.offset.reset", "earliest".into()),
        ]);
        settings.extend(self.fetch_wait());
        settings.extend(self.session());
        self.config(Client::ScorerConsumer, &settings)
    }

    /// A scorer's producer of predictions: idempotent, acknowledged by every in-sync replica.
    pub fn scorer_producer(&self) -> ClientConfig {
        self.config(
            Client::ScorerProducer,
            &[
                ("enable.idempotence", "true".into()),
                ("acks", "all".into()),
                ("linger.ms", "5".into()),
                ("message.timeout.ms", "30000".into()),
            ],
        )
    }

    /// The dead-letter producer.
    pub fn dead_letters(&self) -> ClientConfig {
        self.config(Client::DeadLetters, &[("linger.ms", "20".into())])
    }

    /// The reader of the copies already in a dead-letter topic: a consumer that assigns
    /// itself partitions and never joins nor commits to its group `<group>.reader`
    /// (librdkafka refuses an assignment to a consumer without a group id).
    pub fn dead_letter_reader(&self) -> ClientConfig {
        self.reader(Client::DeadLetterReader, &self.group)
    }

    /// A consumer that reads topics back by assigning itself partitions (never joining nor
    /// committing to `<group>.reader`): the dead-letter reader, a scorer's output reader.
    pub fn reader(&self, client: Client, group: &str) -> ClientConfig {
        let mut settings = vec![
            ("group.id", format!("{group}.reader")),
            ("enable.auto.commit", "false".into()),
            ("auto.offset.reset", "earliest".into()),
        ];
        settings.extend(self.fetch_wait());
        self.config(client, &settings)
    }

    /// Logs the effective configuration of every client, secrets redacted.
    pub fn log_effective(&self, lag_interval_ms: u64) {
        for (name, c) in [
            ("consumer", self.consumer(lag_interval_ms)),
            ("dead_letters", self.dead_letters()),
            ("labels", self.labels()),
            ("admin", self.config(Client::Admin, &[])),
        ] {
            tracing::info!(client = name, config = ?redacted(&c), "effective Kafka client config");
        }
    }

    /// The labels producer of the HTTP API.
    pub fn labels(&self) -> ClientConfig {
        self.config(Client::Labels, &[("message.timeout.ms", "10000".into())])
    }
}

/// A partition's log start as librdkafka last heard it (every fetch response carries it),
/// without a broker round trip: rdkafka's safe API has only `fetch_watermarks`, a round trip
/// per call. None when librdkafka has not heard it yet.
pub fn cached_log_start<C: rdkafka::consumer::ConsumerContext>(
    consumer: &rdkafka::consumer::BaseConsumer<C>,
    topic: &str,
    partition: i32,
) -> Option<i64> {
    cached_watermarks(consumer, topic, partition).map(|(low, _)| low)
}

/// A partition's log start and end as librdkafka last heard them (every fetch response
/// carries them), without a broker round trip. None when librdkafka has not heard the log
/// start yet (the end is then -1 too, or not yet heard). The one FFI call of the service.
#[allow(unsafe_code)]
pub fn cached_watermarks<C: rdkafka::consumer::ConsumerContext>(
    consumer: &rdkafka::consumer::BaseConsumer<C>,
    topic: &str,
    partition: i32,
) -> Option<(i64, i64)> {
    use rdkafka::bindings::{rd_kafka_get_watermark_offsets, rd_kafka_resp_err_t};
    use rdkafka::consumer::Consumer;
    let topic = std::ffi::CString::new(topic).ok()?;
    let (mut low, mut high) = (-1_i64, -1_i64);
    // SAFETY: the client handle is valid while `consumer` is borrowed, the topic is a
    // NUL-terminated string that outlives the call, and librdkafka only reads its cached
    // watermarks (under the partition's lock) into the two out parameters.
    let err = unsafe {
        rd_kafka_get_watermark_offsets(
            consumer.client().native_ptr(),
            topic.as_ptr(),
            partition,
            &mut low,
            &mut high,
        )
    };
    (err == rd_kafka_resp_err_t::RD_KAFKA_RESP_ERR_NO_ERROR && low >= 0).then_some((low, high))
}

/// What librdkafka said on its own while a client ran (connection refused, authentication
/// failed, TLS errors): the reason behind a request that timed out (`ravel check`, and the
/// service's topic probe, which names a refused login in `/readyz`). Nothing is logged.
#[derive(Default)]
pub struct Heard(Mutex<Vec<String>>);

impl Heard {
    fn push(&self, line: String) {
        let mut v = crate::lock(&self.0);
        if !v.contains(&line) && v.len() < 5 {
            v.push(line);
        }
    }

    /// What `probe`'s librdkafka said so far. Its errors and logs wait in the client's queue
    /// until the client is polled (rdkafka routes logs there too), and a probe that only asks
    /// for metadata is never polled otherwise: without this a refused login or TLS handshake
    /// reads as "cannot reach Kafka". At most 1000 queued events are served, without waiting.
    pub fn said_by(probe: &rdkafka::consumer::BaseConsumer<Heard>) -> Vec<String> {
        for _ in 0..1000 {
            if probe.poll(std::time::Duration::ZERO).is_none() {
                break;
            }
        }
        use rdkafka::consumer::Consumer;
        crate::lock(&probe.context().0).clone()
    }
}

impl ClientContext for Heard {
    fn log(&self, level: RDKafkaLogLevel, _fac: &str, message: &str) {
        if (level as i32) <= (RDKafkaLogLevel::Error as i32) {
            self.push(message.to_string());
        }
    }
    fn error(&self, error: KafkaError, reason: &str) {
        self.push(format!("{error}: {reason}"));
    }
}

impl ConsumerContext for Heard {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_broker_is_known_by_its_cluster_id() {
        assert!(is_embedded(Some("mockCluster1a2b")));
        assert!(!is_embedded(Some("tansu")));
        assert!(!is_embedded(None));
    }

    fn clients() -> KafkaClients {
        let mut kafka = KafkaConfig {
            group_id: "g1".into(),
            ..KafkaConfig::default()
        };
        clients_of(
            &mut kafka,
            &[("security_protocol", "SASL_SSL"), ("linger.ms", "7")],
        )
    }

    /// The clients of `kafka` on "b:9092", the user's `options` (kafka.options) added to it.
    fn clients_of(kafka: &mut KafkaConfig, options: &[(&str, &str)]) -> KafkaClients {
        for (k, v) in options {
            kafka.options.insert(k.to_string(), v.to_string());
        }
        KafkaClients::new(kafka, "b:9092")
    }

    #[test]
    fn the_fetch_wait_and_session_fit_the_embedded_broker_only_and_the_user_has_the_last_word() {
        // Before the cluster is known, and on any other broker: librdkafka's fetch wait and
        // session.
        let k = clients();
        let tansu = k.clone();
        tansu.heard_cluster("tansu");
        for k in [&k, &tansu] {
            for c in [
                k.consumer(100),
                k.scorer_consumer("s"),
                k.dead_letter_reader(),
            ] {
                assert_eq!(c.get("fetch.wait.max.ms"), None);
                assert_eq!(c.get("session.timeout.ms"), None);
            }
        }
        // The embedded broker, heard by a clone (the topic check's): every group member made
        // from the service's clients takes it; the first id heard stays; the reader joins no
        // group.
        let k = clients();
        k.clone().heard_cluster("mockCluster1a2b");
        k.heard_cluster("tansu");
        for c in [
            k.consumer(100),
            k.scorer_consumer("s"),
            k.dead_letter_reader(),
        ] {
            assert_eq!(c.get("fetch.wait.max.ms"), Some("5"));
        }
        for c in [k.consumer(100), k.scorer_consumer("s")] {
            assert_eq!(c.get("session.timeout.ms"), Some("4000"));
            assert_eq!(c.get("heartbeat.interval.ms"), Some("500"));
        }
        assert_eq!(k.consumer(100).get("max.poll.interval.ms"), Some("15000"));
        assert_eq!(k.scorer_consumer("s").get("max.poll.interval.ms"), None);
        assert_eq!(k.dead_letter_reader().get("session.timeout.ms"), None);
        let k = clients_of(
            &mut KafkaConfig::default(),
            &[
                ("fetch.wait.max.ms", "500"),
                ("session.timeout.ms", "30000"),
            ],
        );
        k.heard_cluster("mockCluster1a2b");
        assert_eq!(k.consumer(100).get("fetch.wait.max.ms"), Some("500"));
        assert_eq!(k.consumer(100).get("session.timeout.ms"), Some("30000"));
        // A session set by the user: the poll interval is librdkafka's (never below it).
        assert_eq!(k.consumer(100).get("max.poll.interval.ms"), None);
    }

    #[test]
    fn every_client_has_its_own_id_and_the_user_options() {
        let k = clients();
        let all = [k.consumer(100), k.dead_letters(), k.labels()];
        let ids: Vec<_> = all.iter().map(|c| c.get("client.id").unwrap()).collect();
        assert_eq!(
            ids,
            ["ravel-g1-consumer", "ravel-g1-dlq", "ravel-g1-labels"]
        );
        for c in &all {
            assert_eq!(c.get("bootstrap.servers"), Some("b:9092"));
            assert_eq!(c.get("security.protocol"), Some("SASL_SSL"));
            // The user's options come last, over the client's own settings.
            assert_eq!(c.get("linger.ms"), Some("7"));
        }
        let c = &all[0];
        assert_eq!(c.get("group.id"), Some("g1"));
        assert_eq!(c.get("enable.auto.commit"), Some("false"));
        assert_eq!(c.get("statistics.interval.ms"), Some("100"));
        assert_eq!(all[1].get("group.id"), None);
        assert_eq!(all[2].get("message.timeout.ms"), Some("10000"));
    }

    #[test]
    fn consumer_only_options_go_to_consumers_only_and_the_instance_id_to_group_members() {
        let mut kafka = KafkaConfig {
            instance_id: "ravel-0".into(),
            ..KafkaConfig::default()
        };
        let k = clients_of(
            &mut kafka,
            &[("session.timeout.ms", "30000"), ("linger.ms", "7")],
        );
        for c in [k.consumer(100), k.scorer_consumer("g.scorer.s")] {
            assert_eq!(c.get("session.timeout.ms"), Some("30000"));
            assert_eq!(c.get("group.instance.id"), Some("ravel-0"));
        }
        assert_eq!(
            k.dead_letter_reader().get("session.timeout.ms"),
            Some("30000")
        );
        assert_eq!(k.dead_letter_reader().get("group.id"), Some("ravel.reader"));
        for c in [
            k.dead_letters(),
            k.labels(),
            k.scorer_producer(),
            k.config(Client::Admin, &[]),
            k.config(Client::CheckAdmin, &[]),
            client_config(&kafka, "b:9092"),
        ] {
            assert_eq!(c.get("session.timeout.ms"), None);
            assert_eq!(c.get("group.instance.id"), None);
            assert_eq!(c.get("linger.ms"), Some("7"));
        }
        // Without an instance id, dynamic membership.
        let k = KafkaClients::new(&KafkaConfig::default(), "b:9092");
        assert_eq!(k.consumer(100).get("group.instance.id"), None);
    }

    #[test]
    fn secrets_are_redacted_and_locations_are_not() {
        let mut c = ClientConfig::new();
        for (k, v) in [
            ("sasl.password", "p1"),
            ("ssl.key.password", "p2"),
            ("sasl.oauthbearer.client.secret", "p3"),
            ("sasl.oauthbearer.config", "principal=x token=p4"),
            ("ssl.key.pem", "p5"),
            ("ssl.keystore.password", "p6"),
            ("sasl.jaas.config", "p7"),
            ("sasl.username", "alice"),
            ("ssl.key.location", "/etc/k.pem"),
            ("sasl.mechanisms", "SCRAM-SHA-512"),
        ] {
            c.set(k, v);
        }
        let r = redacted(&c);
        let shown = format!("{r:?}");
        for p in ["p1", "p2", "p3", "p4", "p5", "p6", "p7"] {
            assert!(!shown.contains(p), "{shown}");
        }
        assert_eq!(r["sasl.username"], "alice");
        assert_eq!(r["ssl.key.location"], "/etc/k.pem");
        assert_eq!(r["sasl.mechanisms"], "SCRAM-SHA-512");
        assert_eq!(r["sasl.password"], "***");
        let k = clients_of(
            &mut KafkaConfig::default(),
            &[("sasl.password", "hunter2"), ("sasl.username", "alice")],
        );
        assert_eq!(
            k.scrub("property sasl.password hunter2 invalid for alice"),
            "property sasl.password *** invalid for alice"
        );
    }
}
