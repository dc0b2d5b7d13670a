//! Partitions held at a rejected message (`dlq.on_failure = "block"`): until the message's
//! dead-letter copy is delivered, its partition's position stays at the message (so no
//! checkpoint or commit moves past it and a restart reads it again), the partition is paused
//! and the messages after it that were already fetched are dropped unread (they are fetched
//! again once it is released). Other partitions go on. Kept apart, as plain bookkeeping over
//! the dead-letter outcomes, because the promise "a bad message is never lost" rests on it.

use super::dlq::Outcome;
use crate::health::HeldPartition;
use std::collections::{BTreeMap, BTreeSet};

#[derive(Debug, Clone)]
struct Hold {
    stream: String,
    offset: i64,
    since_ms: u64,
    failed_attempts: u32,
    last_error: Option<String>,
}

/// Topic and partition -> the hold.
#[derive(Debug, Default)]
pub struct Held {
    holds: BTreeMap<(String, i32), Hold>,
}

/// A partition let go: it goes on after `offset`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Released {
    pub topic: String,
    pub partition: i32,
    pub offset: i64,
}

impl Held {
    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.holds.is_empty()
    }

    /// Holds `topic`/`partition` at `offset`, whose copy was just sent.
    pub fn hold(&mut self, stream: &str, topic: &str, partition: i32, offset: i64) {
        let since_ms = crate::now_ms();
        self.holds.insert(
            (topic.to_string(), partition),
            Hold {
                stream: stream.to_string(),
                offset,
                since_ms,
                failed_attempts: 0,
                last_error: None,
            },
        );
    }

    pub fn is_held(&self, topic: &str, partition: i32) -> bool {
        self.holds.contains_key(&(topic.to_string(), partition))
    }

    /// Applies a dead-letter outcome: a delivered copy releases its partition; a failed one is
    /// recorded as the reason it waits. Outcomes of copies no hold waits for change nothing.
    pub fn outcome(&mut self, o: &Outcome) -> Option<Released> {
        match o {
            Outcome::Delivered {
                topic,
                partition,
                offset,
            } => {
                let key = (topic.clone(), *partition);
                if self.holds.get(&key).is_some_and(|h| h.offset == *offset) {
                    self.holds.remove(&key);
                    return Some(Released {
                        topic: topic.clone(),
                        partition: *partition,
                        offset: *offset,
                    });
                }
                None
            }
            Outcome::Failed {
                topic,
                partition,
                offset,
                error,
                attempts,
                ..
            } => {
                if let Some(h) = self.holds.get_mut(&(topic.clone(), *partition))
                    && h.offset == *offset
                {
                    h.failed_attempts = *attempts;
                    h.last_error = Some(error.clone());
                }
                None
            }
        }
    }

    /// Drops the holds of partitions no longer assigned: their new owner (or this consumer,
    /// when they come back) starts at the held message and sends its copy again.
    pub fn keep_assigned(&mut self, assigned: &BTreeSet<(String, i32)>) -> bool {
        let before = self.holds.len();
        self.holds.retain(|k, _| assigned.contains(k));
        self.holds.len() != before
    }

    /// Held partitions of `stream`.
    pub fn count(&self, stream: &str) -> usize {
        self.holds.values().filter(|h| h.stream == stream).count()
    }

    /// What `/readyz` and the stream summaries show.
    pub fn report(&self) -> Vec<HeldPartition> {
        self.holds
            .iter()
            .map(|((topic, partition), h)| HeldPartition {
                stream: h.stream.clone(),
                topic: topic.clone(),
                partition: *partition,
                offset: h.offset,
                reason: match &h.last_error {
                    Some(e) => format!(
                        "the dead-letter copy to {} failed ({e}); retrying",
                        crate::kafka::topics::dlq_of(topic)
                    ),
                    None => format!(
                        "waiting for the dead-letter copy to {} to be delivered",
                        crate::kafka::topics::dlq_of(topic)
                    ),
                },
                failed_attempts: h.failed_attempts,
                since_ms: h.since_ms,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn delivered(t: &str, p: i32, o: i64) -> Outcome {
        Outcome::Delivered {
            topic: t.into(),
            partition: p,
            offset: o,
        }
    }

    #[test]
    fn a_hold_is_released_by_its_own_delivery_only() {
        let mut h = Held::default();
        h.hold("s", "t", 1, 42);
        assert!(h.is_held("t", 1) && !h.is_held("t", 0));
        // Another partition's copy, or an older copy of this one, changes nothing.
        assert_eq!(h.outcome(&delivered("t", 0, 42)), None);
        assert_eq!(h.outcome(&delivered("t", 1, 41)), None);
        let failed = Outcome::Failed {
            topic: "t".into(),
            partition: 1,
            offset: 42,
            error: "Broker: Unknown topic or partition".into(),
            denied: false,
            attempts: 2,
            retry_in: None,
        };
        assert_eq!(h.outcome(&failed), None);
        let r = h.report();
        assert_eq!(r.len(), 1);
        assert_eq!(
            (r[0].partition, r[0].offset, r[0].failed_attempts),
            (1, 42, 2)
        );
        assert!(r[0].reason.contains("t.dlq") && r[0].reason.contains("Unknown topic"));
        assert_eq!(h.count("s"), 1);
        assert_eq!(
            h.outcome(&delivered("t", 1, 42)),
            Some(Released {
                topic: "t".into(),
                partition: 1,
                offset: 42
            })
        );
        assert!(h.is_empty());
    }

    #[test]
    fn revoked_partitions_are_let_go() {
        let mut h = Held::default();
        h.hold("s", "t", 0, 5);
        h.hold("s", "t", 1, 6);
        let assigned: BTreeSet<_> = [("t".to_string(), 1)].into();
        assert!(h.keep_assigned(&assigned));
        assert!(!h.is_held("t", 0) && h.is_held("t", 1));
        assert!(!h.keep_assigned(&assigned));
    }
}
