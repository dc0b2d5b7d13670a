//! What the service knows is wrong with its Kafka side, shared between the threads that find it
//! (start-up checks, ingest, the dead-letter outcomes) and the API that reports it: topics the
//! cluster lacks, partitions held at a message whose dead-letter copy is not delivered,
//! authorization errors, and a Schema Registry that cannot answer. `/readyz` answers 503 while
//! a topic is missing, access is denied or the registry is away, and lists held partitions
//! either way; a stream's summary lists its own held partitions.
//!
//! Nothing here holds a secret: topic names, offsets and broker error texts only.

use serde::Serialize;
use std::sync::Mutex;

/// A topic ravel needs that the cluster does not have.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, utoipa::ToSchema)]
pub struct MissingTopic {
    pub topic: String,
    /// `stream`, `dead_letters` or `feature_stream`.
    pub role: &'static str,
    /// The command that creates it.
    pub create_with: String,
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

#[derive(Debug, Clone, Default, Serialize)]
pub struct HealthState {
    /// Per topic read: partitions assigned here and in all.
    pub partitions: std::collections::BTreeMap<String, PartitionCount>,
    pub missing_topics: Vec<MissingTopic>,
    pub held_partitions: Vec<HeldPartition>,
    pub authorization_errors: Vec<Denied>,
    /// Why the Schema Registry cannot answer (None: it answers, or was not needed yet).
    pub schema_registry: Option<String>,
}

#[derive(Debug, Default)]
pub struct Health {
    state: Mutex<HealthState>,
}

impl Health {
    pub fn new() -> Health {
        Health::default()
    }
    fn lock(&self) -> std::sync::MutexGuard<'_, HealthState> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
    pub fn snapshot(&self) -> HealthState {
        self.lock().clone()
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
