//! A group member that stays unassigned (issue 59): subscribed, or every partition revoked,
//! and no assignment since, for longer than a rebalance of its group takes (`BOUND_EMBEDDED`
//! on the embedded broker, `BOUND` elsewhere). It says so once in the log and, until
//! partitions come, in `/readyz` (`Health::set_unassigned`), with what to do; with the kafka
//! state store also how many partitions the other replicas hold (wrote the latest states of).
//!
//! On the embedded broker such a join is one the broker will never answer (docs/compatibility.md:
//! a member kept waiting past the group's session timeout is dropped, its connection left
//! unread). The member recovers by itself: librdkafka gives the JoinGroup request up after
//! `max.poll.interval.ms` and 3 s (15 s there, `crate::kafka::client`), reconnects and joins
//! again. Leaving and joining the group from ravel does not help: the leave would wait behind
//! the unanswered request on the same connection.

use super::{Ingest, Store};
use crate::health::{Unassigned, utc_rfc3339};
use rdkafka::consumer::Consumer;
use std::time::Duration;

/// How long a member of a group on the embedded broker may wait for partitions: its join
/// takes the broker's initial delay (3 s) or a session (4 s) at most.
const BOUND_EMBEDDED: Duration = Duration::from_secs(10);
/// Elsewhere: a rebalance waits for the members' rejoins, a session timeout (45 s by
/// default) for a member that died.
const BOUND: Duration = Duration::from_secs(60);

impl Ingest {
    /// Reports a member unassigned past the bound (once), and the end of it.
    pub(super) fn watch_join(&mut self) {
        if self.standalone.is_some() {
            return;
        }
        let since = self.consumer.context().unassigned_since();
        let embedded = crate::kafka::is_embedded(self.cluster_id.as_deref());
        match (since, self.unassigned_reported) {
            (None, Some(at)) => {
                self.health.set_unassigned(None);
                self.unassigned_reported = None;
                tracing::info!(group = %self.group, waited_s = at.elapsed().as_secs(), "partitions assigned: this member of the consumer group has its share again");
            }
            (Some(t), None) if t.elapsed() >= if embedded { BOUND_EMBEDDED } else { BOUND } => {
                self.unassigned_reported = Some(t);
                let since_ms = crate::now_ms().saturating_sub(t.elapsed().as_millis() as u64);
                let what_to_do = if embedded {
                    "its join is not answered: the embedded broker drops a join it keeps waiting \
                     past the group's session timeout (members of one group with different \
                     kafka.options \"session.timeout.ms\" do that) and never answers it; \
                     librdkafka gives the join up after max.poll.interval.ms (15 s) and 3 s and \
                     joins again by itself. If it stays, give every replica the same \
                     kafka.options and restart this one (docs/compatibility.md)"
                } else {
                    "the group's rebalance takes longer than a minute: another member may be \
                     slow to rejoin (its max.poll.interval.ms) or gone (until its \
                     session.timeout.ms ends), or the coordinator does not answer; ravel waits \
                     for the group. If it stays, look at the group with `kafka-consumer-groups.sh \
                     --describe --group <group>` and restart this replica"
                };
                let unassigned = Unassigned {
                    group: self.group.clone(),
                    since_ms,
                    since: utc_rfc3339(since_ms),
                    others_hold: self.others_hold(),
                    what_to_do: what_to_do.to_string(),
                };
                tracing::error!(
                    group = %self.group, waited_s = t.elapsed().as_secs(),
                    others_hold = ?unassigned.others_hold,
                    "this member of the consumer group has had no partitions since {}: {}; not ready until it has",
                    unassigned.since, what_to_do
                );
                self.health.set_unassigned(Some(unassigned));
            }
            _ => {}
        }
    }

    /// With the kafka store: of the stream topics' partitions, those whose latest state
    /// another replica wrote, and all of them.
    fn others_hold(&self) -> Option<[usize; 2]> {
        let Store::Kafka { reader, .. } = &self.store else {
            return None;
        };
        let counts = self.health.snapshot().partitions;
        let (mut others, mut all) = (0, 0);
        for s in &self.streams {
            all += counts.get(&s.handle.topic).map_or(0, |c| c.total);
            others += (reader.of_stream(s.handle.name()).iter())
                .filter(|st| st.epoch == s.handle.epoch && st.writer != self.writer_name)
                .count();
        }
        Some([others, all])
    }
}
