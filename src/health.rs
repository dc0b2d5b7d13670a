//! What the service knows is wrong with its Kafka side, shared between the threads that find it
//! (start-up checks, ingest, the dead-letter outcomes) and the API that reports it: a cluster
//! that does not answer, topics the cluster lacks, partitions held at a message whose
//! dead-letter copy is not delivered, authorization errors, a Schema Registry that cannot
//! answer, and a group member whose join is not answered. `/readyz` answers 503 while Kafka cannot be reached, a topic is missing, access is
//! denied or the registry is away, and lists held partitions
//! either way; a stream's summary lists its own held partitions.
//!
//! Nothing here holds a secret: topic names, offsets and broker error texts only.

use serde::Serialize;
use std::sync::Mutex;

/// A topic ravel needs that the cluster does not have.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct MissingTopic {
    pub topic: String,
    /// `stream`, `feature_stream` (topics ravel reads), `dead_letters` or `state` (its own).
    pub role: &'static str,
    /// The command that creates it.
    pub create_with: String,
    /// Why ravel did not create it: the config key that says not to, or that it tried.
    pub why: String,
}

/// A partition waiting at a rejected message until its dead-letter copy is delivered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct HeldPartition {
    pub stream: String,
    pub topic: String,
    pub partition: i32,
    /// The rejected message; the partition is not committed past it.
    pub offset: i64,
    /// Why: the last delivery error, or that the first attempt is under way.
    pub reason: String,
    /// Failed delivery attempts so far.
    pub failed_attempts: u32,
    /// Unix time the partition was held, in milliseconds.
    pub since_ms: u64,
}

/// Kafka refused an operation on a resource.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct Denied {
    /// `topic`, `group` or `cluster`.
    pub resource_type: &'static str,
    pub resource: String,
    /// `read`, `write`, `describe`, `create`, ...
    pub operation: &'static str,
    pub error: String,
}

/// How many of a topic's partitions this instance owns.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct PartitionCount {
    pub assigned: usize,
    /// From the topic's metadata at start (0 while unknown).
    pub total: usize,
}

/// The cluster has not answered: since when, and what was asked.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct Unreachable {
    /// The bootstrap servers (`kafka.brokers`).
    pub brokers: String,
    /// Unix time of the first unanswered attempt, in milliseconds.
    pub since_ms: u64,
    /// The same instant, in UTC (RFC 3339).
    pub since: String,
    /// What librdkafka said.
    pub error: String,
}

/// A scorer (`[[scorers]]`): where it reads and writes, how it delivers, and what it does.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct ScorerHealth {
    pub name: String,
    pub stream: String,
    pub topic: String,
    pub output_topic: String,
    /// `at_least_once`: predictions are committed after they are acknowledged, so a crash
    /// may score an event again (the headers say which event each prediction is of).
    pub delivery: &'static str,
    /// `waiting_for_rows` (the stream has no model to give yet; the scorer reads nothing)
    /// or `scoring`.
    pub state: &'static str,
    /// Rows of the statistics the current model came from.
    pub model_rows: Option<u64>,
}

/// A consumer that assigns itself every partition of its topics (`kafka.assignment =
/// "standalone"`): its group, the name its commits carry, and the other instances seen
/// committing to the same group in that mode (each one a reason to be not ready: both read
/// every message).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct StandaloneHealth {
    /// `ingest` or `scorer '<name>'`.
    pub consumer: String,
    pub group: String,
    /// This instance's name in its commits (`kafka.instance_id`, else host and process id).
    pub instance: String,
    pub other_instances: Vec<String>,
    /// Whether the cluster keeps the commits' metadata, by which another instance is named:
    /// false on a cluster that drops it (Tansu 0.6.0), where a second instance cannot be seen;
    /// null until this instance's own commit was read back.
    pub commit_metadata_kept: Option<bool>,
}

/// A member of the consumer group that has had no partitions for longer than a rebalance of
/// its group takes (ingest's join watch): its join is not answered.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct Unassigned {
    /// The consumer group (`kafka.group_id`).
    pub group: String,
    /// Unix time since when it has had no partitions, in milliseconds.
    pub since_ms: u64,
    /// The same instant, in UTC (RFC 3339).
    pub since: String,
    /// With the kafka state store: of the stream topics' partitions, how many have their
    /// latest state written by another replica, and how many there are (the others hold
    /// every partition when the two are equal).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub others_hold: Option<[usize; 2]>,
    /// What happens next and what to do.
    pub what_to_do: String,
}

/// Unix milliseconds as `YYYY-MM-DDTHH:MM:SSZ` (UTC), without a date crate: the days since
/// 1970 turned into a civil date (Howard Hinnant's `civil_from_days`).
pub fn utc_rfc3339(unix_ms: u64) -> String {
    let secs = unix_ms / 1000;
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem / 60 % 60,
        rem % 60
    )
}

/// Why a cluster that does not answer turns ravel away, read from librdkafka's words: the
/// difference between "check the address" and "check the password" (the service's `/readyz`
/// and `ravel check` say the same).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// SASL: the mechanism, the user or the password.
    Credentials,
    /// TLS: the handshake (the CA, the certificate, the protocol).
    Tls,
}

impl Refusal {
    /// The refusal librdkafka's `text` reports, if any. The listener's scheme (`sasl_ssl://`)
    /// prefixes many of its lines, so it is taken out first; TLS is tried first, as a failed
    /// handshake ends the connection before SASL starts.
    pub fn of(text: &str) -> Option<Refusal> {
        let mut t = text.to_ascii_lowercase();
        for scheme in ["sasl_ssl://", "sasl_plaintext://", "ssl://", "plaintext://"] {
            t = t.replace(scheme, "//");
        }
        if ["ssl handshake", "certificate", "ssl error", "tls"]
            .iter()
            .any(|m| t.contains(m))
        {
            Some(Refusal::Tls)
        } else if t.contains("authentication") || t.contains("sasl") {
            Some(Refusal::Credentials)
        } else {
            None
        }
    }

    /// What went wrong with the cluster at `brokers`, and what to check.
    /// A failed TLS handshake reads the same whether the CA is wrong or the broker's
    /// certificate expired or names another host (librdkafka says "certificate verify
    /// failed"), so its fix names all three and the command that tells them apart.
    pub fn explain(refusal: Option<Refusal>, brokers: &str) -> (String, String) {
        match refusal {
            Some(Refusal::Credentials) => (
                format!("Kafka at {brokers} refuses ravel's credentials"),
                "check sasl.mechanisms, sasl.username and sasl.password under [kafka.options] \
                 (the user as the cluster knows it, the mechanism it was created with)"
                    .to_string(),
            ),
            Some(Refusal::Tls) => {
                let first = brokers.split(',').next().unwrap_or(brokers).trim();
                (
                    format!("the TLS handshake with Kafka at {brokers} fails"),
                    format!(
                        "check security.protocol and ssl.ca.location (the CA that signed the \
                         brokers' certificates) under [kafka.options], that the brokers' \
                         certificates have not expired and name the host ravel connects to, \
                         and the client certificate if the cluster asks for one; `openssl \
                         s_client -connect {first} -CAfile <ssl.ca.location>` shows the \
                         brokers' certificate and why it is refused"
                    ),
                )
            }
            None => (
                format!("cannot reach Kafka at {brokers}"),
                "check kafka.brokers (--brokers) and that the cluster is up".to_string(),
            ),
        }
    }
}

#[derive(Debug, Clone, Default, Serialize)]
pub struct HealthState {
    /// Set while the cluster does not answer.
    pub kafka_unreachable: Option<Unreachable>,
    /// Per topic read: partitions assigned here and in all.
    pub partitions: std::collections::BTreeMap<String, PartitionCount>,
    pub missing_topics: Vec<MissingTopic>,
    pub held_partitions: Vec<HeldPartition>,
    pub authorization_errors: Vec<Denied>,
    /// Why the Schema Registry cannot answer (None: it answers, or was not needed yet).
    pub schema_registry: Option<String>,
    pub scorers: Vec<ScorerHealth>,
    /// The consumers in standalone assignment (`kafka.assignment`).
    pub standalone: Vec<StandaloneHealth>,
    /// Set while this group member has waited too long for partitions.
    pub unassigned: Option<Unassigned>,
}

#[derive(Debug, Default)]
pub struct Health {
    state: Mutex<HealthState>,
    /// `kafka.brokers`, for the messages.
    brokers: Mutex<String>,
}

impl Health {
    pub fn new() -> Health {
        Health::default()
    }
    fn lock(&self) -> std::sync::MutexGuard<'_, HealthState> {
        crate::lock(&self.state)
    }
    pub fn snapshot(&self) -> HealthState {
        self.lock().clone()
    }
    /// The bootstrap servers the service uses, named when they do not answer.
    pub fn set_brokers(&self, brokers: &str) {
        *crate::lock(&self.brokers) = brokers.to_string();
    }
    /// The cluster did not answer (since `since`, unless it was already not answering). An
    /// error that says why (a [`Refusal`]: credentials, TLS) replaces one that does not, so
    /// `/readyz` names the cause rather than "no answer".
    pub fn unreachable(&self, since: std::time::SystemTime, error: &str) {
        let brokers = crate::lock(&self.brokers).clone();
        let mut s = self.lock();
        let refusal = Refusal::of(error);
        match &mut s.kafka_unreachable {
            Some(u) if refusal.is_none() || Refusal::of(&u.error).is_some() => return,
            Some(u) => u.error = error.to_string(),
            None => {
                let since_ms = crate::unix_ms(since);
                s.kafka_unreachable = Some(Unreachable {
                    brokers: brokers.clone(),
                    since_ms,
                    since: utc_rfc3339(since_ms),
                    error: error.to_string(),
                });
            }
        }
        let (what, fix) = Refusal::explain(refusal, &brokers);
        tracing::error!(
            brokers = %brokers, error = %error,
            "{what}: {fix}; not ready until it answers"
        );
    }
    /// The cluster answered.
    pub fn reachable(&self) {
        let mut s = self.lock();
        if let Some(u) = s.kafka_unreachable.take() {
            tracing::info!(brokers = %u.brokers, "Kafka at {} answers again", u.brokers);
        }
    }
    /// A topic found to exist (a standalone consumer assigned its partitions): no longer missing.
    pub fn topic_found(&self, topic: &str) {
        self.lock().missing_topics.retain(|m| m.topic != topic);
    }

    pub fn set_missing_topics(&self, missing: Vec<MissingTopic>) {
        self.lock().missing_topics = missing;
    }
    pub fn set_partitions(&self, partitions: std::collections::BTreeMap<String, PartitionCount>) {
        self.lock().partitions = partitions;
    }
    /// The registry's outage (`Some(why)`) or its recovery (`None`).
    pub fn set_schema_registry(&self, outage: Option<String>) {
        let mut s = self.lock();
        if s.schema_registry != outage {
            s.schema_registry = outage;
        }
    }
    /// A scorer's state (replacing the last one of that name).
    pub fn set_scorer(&self, scorer: ScorerHealth) {
        let mut state = self.lock();
        match state.scorers.iter_mut().find(|s| s.name == scorer.name) {
            Some(s) => *s = scorer,
            None => state.scorers.push(scorer),
        }
    }
    /// A scorer retired over the API (`crate::declared`): no longer reported.
    pub fn remove_scorer(&self, name: &str) {
        self.lock().scorers.retain(|s| s.name != name);
    }
    /// A standalone consumer's state (replacing the last one of that consumer).
    pub fn set_standalone(&self, s: StandaloneHealth) {
        let mut state = self.lock();
        match state
            .standalone
            .iter_mut()
            .find(|x| x.consumer == s.consumer)
        {
            Some(x) => *x = s,
            None => state.standalone.push(s),
        }
    }
    /// This group member waits too long for partitions (`Some`), or has them again.
    pub fn set_unassigned(&self, u: Option<Unassigned>) {
        self.lock().unassigned = u;
    }
    pub fn set_held(&self, held: Vec<HeldPartition>) {
        self.lock().held_partitions = held;
    }
    /// Records a denial (once per resource and operation); true if it is new.
    pub fn deny(&self, d: Denied) -> bool {
        let mut s = self.lock();
        if s.authorization_errors.iter().any(|x| {
            x.resource_type == d.resource_type
                && x.resource == d.resource
                && x.operation == d.operation
        }) {
            return false;
        }
        s.authorization_errors.push(d);
        true
    }
    /// Forgets the denials of `resource` (it worked since).
    pub fn allow(&self, resource_type: &str, resource: &str) {
        self.lock()
            .authorization_errors
            .retain(|x| !(x.resource_type == resource_type && x.resource == resource));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn utc_times_read_as_dates() {
        assert_eq!(utc_rfc3339(0), "1970-01-01T00:00:00Z");
        // `date -u -d @1700000000`: Tue Nov 14 22:13:20 UTC 2023.
        assert_eq!(utc_rfc3339(1_700_000_000_123), "2023-11-14T22:13:20Z");
        // A leap day, and the last second of a year.
        assert_eq!(utc_rfc3339(951_782_400_000), "2000-02-29T00:00:00Z");
        assert_eq!(utc_rfc3339(1_735_689_599_000), "2024-12-31T23:59:59Z");
    }

    #[test]
    fn unreachable_keeps_its_first_instant_until_kafka_answers() {
        let h = Health::new();
        h.set_brokers("k:9092");
        let t0 = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_000);
        h.unreachable(t0, "no answer");
        h.unreachable(t0 + std::time::Duration::from_secs(5), "later");
        let u = h.snapshot().kafka_unreachable.unwrap();
        assert_eq!(
            (
                u.brokers.as_str(),
                u.since_ms,
                u.since.as_str(),
                u.error.as_str()
            ),
            (
                "k:9092",
                1_700_000_000_000,
                "2023-11-14T22:13:20Z",
                "no answer"
            )
        );
        h.reachable();
        assert_eq!(h.snapshot().kafka_unreachable, None);
    }

    #[test]
    fn a_refusal_names_its_cause_and_replaces_a_bare_no_answer() {
        let h = Health::new();
        let t0 = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_000);
        h.unreachable(t0, "no answer to a metadata request");
        let auth = "Global error: Authentication (Local: Authentication failure): \
                    sasl_ssl://k:9092/bootstrap: SASL authentication error: Authentication failed";
        h.unreachable(t0 + std::time::Duration::from_secs(1), auth);
        let u = h.snapshot().kafka_unreachable.unwrap();
        assert_eq!((u.since_ms, u.error.as_str()), (1_700_000_000_000, auth));
        // A later bare "no answer" does not hide it.
        h.unreachable(t0, "Local: All broker connections are down");
        assert_eq!(h.snapshot().kafka_unreachable.unwrap().error, auth);

        assert_eq!(Refusal::of(auth), Some(Refusal::Credentials));
        // On a SASL_SSL listener a failed TLS handshake is TLS, whatever the scheme says.
        assert_eq!(
            Refusal::of(
                "sasl_ssl://127.0.0.1:9093/bootstrap: SSL handshake failed: \
                 error:0A000086:SSL routines::certificate verify failed"
            ),
            Some(Refusal::Tls)
        );
        assert_eq!(Refusal::of("Local: Broker transport failure"), None);
        assert!(
            Refusal::explain(Some(Refusal::Credentials), "k:9092")
                .0
                .contains("credentials")
        );
    }
}
