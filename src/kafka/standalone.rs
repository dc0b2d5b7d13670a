//! Standalone assignment (`kafka.assignment`): an instance that reads every partition of its
//! topics assigns them to itself, with no group membership, so a restart is ready in the time
//! it takes to ask for metadata instead of a group's rebalance (the embedded broker keeps a
//! departed member for its whole session timeout, 45 s). Offsets are still committed to the
//! consumer group, so lag, `ravel check` and Kafka's tools keep working.
//!
//! Nothing in Kafka stops a second standalone instance from reading the same partitions: this
//! module names it. Every commit of a standalone consumer carries the metadata
//! `ravel;instance=<name>;at=<unix ms>` (a scorer's adds `;out=<offset>`, `crate::score`); before committing (at most once per interval), the
//! instance reads the group's committed offsets back, and a commit by another name made after
//! this instance started is a second instance, named in the log and in `/readyz` (not ready)
//! for as long as its commits keep coming and five intervals after. A dead predecessor's last commit
//! is older than the start, so a restart is not mistaken for one. Limits: a second instance is
//! seen once both have read and committed a message (an idle topic has no commit to read);
//! the times are the hosts' clocks (skew between hosts beyond the start-up gap hides or shows
//! a commit wrongly); a consumer of the group that uses the group protocol is not seen here
//! (its commits carry no such metadata; Kafka refuses ours while it is a member, which the
//! commit's error says). A cluster that does not keep the commits' metadata (Tansu 0.6.0
//! answers every OffsetFetch without it) cannot show a second instance at all: when this
//! instance's own commits read back without metadata, the log (once) and `/readyz`
//! (`commit_metadata_kept: false`) say so.

use crate::health::{Health, StandaloneHealth};
use rdkafka::consumer::{BaseConsumer, Consumer, ConsumerContext};
use rdkafka::topic_partition_list::TopicPartitionList;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// This process's name in the commits: `kafka.instance_id` when set, else the host name and
/// the process id.
pub fn instance_name(configured: Option<&str>) -> String {
    if let Some(id) = configured {
        return id.to_string();
    }
    let host = host_name("/proc/sys/kernel/hostname").unwrap_or_else(|| "host".into());
    format!("{host}-{}", std::process::id())
}

/// The host's name: `$HOSTNAME`, else what `file` holds (trimmed); None when neither says.
pub fn host_name(file: &str) -> Option<String> {
    std::env::var("HOSTNAME")
        .ok()
        .filter(|h| !h.is_empty())
        .or_else(|| {
            std::fs::read_to_string(file)
                .ok()
                .map(|h| h.trim().to_string())
        })
}

/// The metadata of a commit by `instance` at `at_ms`, with more `key=value` fields (a scorer's
/// output end: `out=<offset>`).
pub fn metadata(instance: &str, at_ms: u64, more: &[(&str, String)]) -> String {
    let mut m = format!("ravel;instance={instance};at={at_ms}");
    for (k, v) in more {
        m.push_str(&format!(";{k}={v}"));
    }
    m
}

/// The fields of a commit's metadata written by `metadata` (None: not ravel's).
pub fn fields(meta: &str) -> Option<BTreeMap<&str, &str>> {
    let rest = meta.strip_prefix("ravel;")?;
    Some(
        rest.split(';')
            .filter_map(|kv| kv.split_once('='))
            .collect(),
    )
}

/// The instance and time of a commit's metadata written by `metadata`.
pub fn parse(meta: &str) -> Option<(&str, u64)> {
    let f = fields(meta)?;
    Some((f.get("instance")?, f.get("at")?.parse().ok()?))
}

/// How long another instance stays named after its last commit was seen: this many
/// intervals, and at least `REMEMBER_MIN`.
const REMEMBER_INTERVALS: u32 = 5;
const REMEMBER_MIN: Duration = Duration::from_secs(2);

/// One standalone consumer's name and its watch for another instance on its group.
pub struct Standalone {
    instance: String,
    /// Which consumer of the process (`ingest`, `scorer 'x'`), as `/readyz` names it.
    what: String,
    group: String,
    started_ms: u64,
    every: Duration,
    last_check: Option<Instant>,
    /// Other instances, when each was last seen.
    seen: BTreeMap<String, Instant>,
    /// Whether a commit with this instance's metadata was made (`metadata_with` was asked).
    committed: std::sync::atomic::AtomicBool,
    /// Whether the cluster keeps the commits' metadata (None: not known yet).
    metadata_kept: Option<bool>,
    health: Arc<Health>,
}

impl Standalone {
    pub fn new(
        instance: String,
        what: &str,
        group: &str,
        every: Duration,
        health: Arc<Health>,
    ) -> Standalone {
        let s = Standalone {
            instance,
            what: what.to_string(),
            group: group.to_string(),
            started_ms: crate::unix_ms(std::time::SystemTime::now()),
            every,
            last_check: None,
            seen: BTreeMap::new(),
            committed: std::sync::atomic::AtomicBool::new(false),
            metadata_kept: None,
            health,
        };
        s.report();
        tracing::info!(consumer = %s.what, group = %s.group, instance = %s.instance,
            "standalone assignment: every partition of the topics assigned here, no group membership (kafka.assignment)");
        s
    }

    /// The metadata of a commit made now.
    pub fn metadata(&self) -> String {
        self.metadata_with(&[])
    }

    /// The metadata of a commit made now, with more fields.
    pub fn metadata_with(&self, more: &[(&str, String)]) -> String {
        self.committed
            .store(true, std::sync::atomic::Ordering::Relaxed);
        metadata(
            &self.instance,
            crate::unix_ms(std::time::SystemTime::now()),
            more,
        )
    }

    /// Another instance named now.
    pub fn others(&self) -> Vec<String> {
        self.seen.keys().cloned().collect()
    }

    fn report(&self) {
        self.health.set_standalone(StandaloneHealth {
            consumer: self.what.clone(),
            group: self.group.clone(),
            instance: self.instance.clone(),
            other_instances: self.others(),
            commit_metadata_kept: self.metadata_kept,
        });
    }

    /// Reads the group's committed offsets of `partitions` back (at most once per interval,
    /// waiting at most `timeout`) and names the other instances that committed them since
    /// this one started. Call it before committing: what is read then is the last commit of
    /// whoever committed since this instance's previous one.
    pub fn check<C: ConsumerContext>(
        &mut self,
        consumer: &BaseConsumer<C>,
        partitions: impl IntoIterator<Item = (String, i32)>,
        timeout: Duration,
    ) {
        if self.last_check.is_some_and(|t| t.elapsed() < self.every) {
            return;
        }
        self.last_check = Some(Instant::now());
        let mut tpl = TopicPartitionList::new();
        for (t, p) in partitions {
            tpl.add_partition(&t, p);
        }
        if tpl.count() == 0 {
            return;
        }
        let Ok(committed) = consumer.committed_offsets(tpl, timeout) else {
            return;
        };
        let now = Instant::now();
        let before = self.others();
        // After a commit of this instance: whether any offset read back carries metadata.
        if self.metadata_kept.is_none() && self.committed.load(std::sync::atomic::Ordering::Relaxed)
        {
            let elements = committed.elements();
            let with_offset: Vec<&str> = elements
                .iter()
                .filter(|e| matches!(e.offset(), rdkafka::Offset::Offset(_)))
                .map(|e| e.metadata())
                .collect();
            if let Some(kept) = metadata_kept(&with_offset) {
                self.metadata_kept = Some(kept);
                if !kept {
                    tracing::warn!(
                        consumer = %self.what, group = %self.group,
                        "the cluster does not keep the commits' metadata (Tansu 0.6.0 drops it): a second instance reading the same partitions in standalone mode (kafka.assignment) cannot be named here; run one instance per kafka.group_id, or use kafka.assignment = \"group\""
                    );
                }
                self.report();
            }
        }
        for e in committed.elements() {
            if let Some((who, at)) = parse(e.metadata())
                && who != self.instance
                && at >= self.started_ms
            {
                self.seen.insert(who.to_string(), now);
            }
        }
        let remember = (self.every * REMEMBER_INTERVALS).max(REMEMBER_MIN);
        self.seen.retain(|_, t| now.duration_since(*t) < remember);
        let after = self.others();
        if after != before {
            if after.is_empty() {
                tracing::info!(consumer = %self.what, group = %self.group, "no other standalone instance commits to the group any more");
            } else {
                tracing::error!(
                    consumer = %self.what, group = %self.group, instance = %self.instance, others = ?after,
                    "another instance reads the same partitions in standalone mode (kafka.assignment) and commits to the same group: both read every message; stop one, or give each its own kafka.group_id, or use kafka.assignment = \"group\""
                );
            }
            self.report();
        }
    }
}

/// Whether the cluster kept the metadata of the commits read back (`metadatas`, of the
/// partitions with a committed offset, read after a commit of this instance): kept when any
/// carries ravel's, dropped when none carries any; None when there is nothing to tell by
/// (no committed offset yet, or only another tool's metadata).
fn metadata_kept(metadatas: &[&str]) -> Option<bool> {
    if metadatas.iter().any(|m| fields(m).is_some()) {
        Some(true)
    } else if !metadatas.is_empty() && metadatas.iter().all(|m| m.is_empty()) {
        Some(false)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_metadata_names_the_instance_and_the_time() {
        let m = metadata("ravel-0", 1_700_000_000_123, &[]);
        assert_eq!(parse(&m), Some(("ravel-0", 1_700_000_000_123)));
        let m = metadata("h-1", 5, &[("out", "42".into())]);
        assert_eq!(parse(&m), Some(("h-1", 5)));
        assert_eq!(fields(&m).unwrap()["out"], "42");
        assert_eq!(parse(""), None);
        assert_eq!(parse("some tool"), None);
        assert_eq!(parse("ravel;instance=x;at=soon"), None);
        assert_eq!(instance_name(Some("ravel-1")), "ravel-1");
        assert!(instance_name(None).ends_with(&format!("-{}", std::process::id())));
    }

    #[test]
    fn commits_read_back_without_metadata_mean_the_cluster_drops_it() {
        let ours = metadata("a", 1, &[]);
        assert_eq!(metadata_kept(&[ours.as_str(), ""]), Some(true));
        assert_eq!(metadata_kept(&["", ""]), Some(false));
        assert_eq!(metadata_kept(&[]), None);
        assert_eq!(metadata_kept(&["some tool"]), None);
    }
}
