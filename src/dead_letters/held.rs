//! Unacknowledged dead-letter copies and the fence they put on checkpoints
//! (`dlq.on_failure = "block"`). Kept apart, as plain bookkeeping over the dead-letter
//! outcomes, because the promise "a bad message is never lost" rests on it.
//!
//! The design (issue 30): a rejected message's copy is handed to the dead-letter thread and its
//! partition goes on folding the rows after it at once; its position moves past the message as
//! for any other. What keeps the message from being lost is the fence: every copy sent and not
//! yet acknowledged is kept here by partition and offset, and no checkpoint (file or state
//! record), hence no commit, may cover it. A checkpoint's statistics and positions are taken
//! together, so it cannot be moved back to "before the message" (its statistics already hold
//! the rows after it: that would count them twice after a restart); instead the checkpoint is
//! taken as usual and *waits* (`Fence`) until every copy it covers is acknowledged, normally a
//! few milliseconds, without holding the ingest thread. Until then the last durable checkpoint
//! stays where it was, before the message, and a crash resumes there and sends the copy again
//! (at least once: `.dlq` may hold duplicates, recognizable by `ravel-source-offset`).
//!
//! A copy that fails (missing topic, ACL, the cluster away) is retried with backoff by the
//! dead-letter thread; meanwhile its partition is reported held (`/readyz`, the stream summary,
//! `ravel_blocked_partitions`) at its first failed message. The partition still folds, but the
//! copies it keeps sending pile up in memory, so each partition has a bound: once
//! `dlq.max_unacked_copies` copies or `dlq.max_unacked_bytes` bytes (payload and key) of it
//! wait for an acknowledgement, the partition is paused where it stands, and read again from
//! there once acknowledgements bring it back under half the bound. The memory this costs is at
//! most partitions x `max_unacked_bytes` (plus the copies' headers).

use super::dlq::Outcome;
use crate::health::HeldPartition;
use std::collections::{BTreeMap, BTreeSet};

/// One copy sent and not acknowledged yet.
#[derive(Debug, Clone)]
struct Pending {
    bytes: usize,
    failed_attempts: u32,
    last_error: Option<String>,
    /// When the first attempt failed (Unix ms).
    failed_since_ms: Option<u64>,
}

/// One partition's unacknowledged copies.
#[derive(Debug, Clone, Default)]
struct Copies {
    stream: String,
    by_offset: BTreeMap<i64, Pending>,
    bytes: usize,
    /// Paused at this position (the bound was reached).
    paused_at: Option<i64>,
}

impl Copies {
    /// The copy at `offset` no longer held (acknowledged, or given up).
    fn forget(&mut self, offset: i64) {
        if let Some(p) = self.by_offset.remove(&offset) {
            self.bytes -= p.bytes;
        }
    }
}

/// The bound on one partition's unacknowledged copies.
#[derive(Debug, Clone, Copy)]
pub struct Bound {
    pub copies: usize,
    pub bytes: usize,
}

/// Topic and partition -> its unacknowledged copies.
#[derive(Debug)]
pub struct Held {
    parts: BTreeMap<(String, i32), Copies>,
    bound: Bound,
}

/// A partition to read again from `position` (it was paused at the bound).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resume {
    pub topic: String,
    pub partition: i32,
    pub position: i64,
}

/// The copies a checkpoint covers: it may be written once none of them is unacknowledged.
pub type Fence = Vec<(i32, i64)>;

impl Held {
    pub fn new(bound: Bound) -> Held {
        Held {
            parts: BTreeMap::new(),
            bound,
        }
    }

    #[cfg(test)]
    pub fn is_empty(&self) -> bool {
        self.parts.is_empty()
    }

    /// A copy of the message at `offset` was sent (`bytes`: its payload and key). Returns true
    /// when the partition has reached its bound and must pause: it is then read again from
    /// `offset + 1` (its position) once `resumable` says so.
    pub fn sent(
        &mut self,
        stream: &str,
        topic: &str,
        partition: i32,
        offset: i64,
        bytes: usize,
    ) -> bool {
        let c = self
            .parts
            .entry((topic.to_string(), partition))
            .or_default();
        if c.stream.is_empty() {
            c.stream = stream.to_string();
        }
        let pending = Pending {
            bytes,
            failed_attempts: 0,
            last_error: None,
            failed_since_ms: None,
        };
        if let Some(old) = c.by_offset.insert(offset, pending) {
            c.bytes -= old.bytes;
        }
        c.bytes += bytes;
        if c.by_offset.len() >= self.bound.copies || c.bytes >= self.bound.bytes {
            c.paused_at = Some(offset + 1);
            return true;
        }
        false
    }

    /// Whether `topic`/`partition` is paused at its bound.
    pub fn is_paused(&self, topic: &str, partition: i32) -> bool {
        self.parts
            .get(&(topic.to_string(), partition))
            .is_some_and(|c| c.paused_at.is_some())
    }

    /// Applies a dead-letter outcome: a delivered copy is forgotten (and may let its paused
    /// partition go on); a failed one is recorded as the reason its partition is held.
    pub fn outcome(&mut self, o: &Outcome) -> Option<Resume> {
        match o {
            Outcome::Delivered {
                topic,
                partition,
                offset,
            } => {
                let key = (topic.clone(), *partition);
                let c = self.parts.get_mut(&key)?;
                c.forget(*offset);
                let resume = match c.paused_at {
                    Some(at)
                        if c.by_offset.len() <= self.bound.copies / 2
                            && c.bytes <= self.bound.bytes / 2 =>
                    {
                        c.paused_at = None;
                        Some(Resume {
                            topic: topic.clone(),
                            partition: *partition,
                            position: at,
                        })
                    }
                    _ => None,
                };
                if c.by_offset.is_empty() && c.paused_at.is_none() {
                    self.parts.remove(&key);
                }
                resume
            }
            Outcome::Failed {
                topic,
                partition,
                offset,
                error,
                attempts,
                retry_in,
                ..
            } => {
                let c = self.parts.get_mut(&(topic.clone(), *partition))?;
                if retry_in.is_none() {
                    // Given up (`skip`): nothing will acknowledge it.
                    c.forget(*offset);
                    return None;
                }
                if let Some(p) = c.by_offset.get_mut(offset) {
                    p.failed_attempts = *attempts;
                    p.last_error = Some(error.clone());
                    p.failed_since_ms.get_or_insert_with(crate::now_ms);
                }
                None
            }
        }
    }

    /// The unacknowledged copies of `topic`: what a checkpoint of it taken now must wait for.
    pub fn fence(&self, topic: &str) -> Fence {
        self.parts
            .range((topic.to_string(), i32::MIN)..=(topic.to_string(), i32::MAX))
            .flat_map(|((_, p), c)| c.by_offset.keys().map(move |o| (*p, *o)))
            .collect()
    }

    /// The unacknowledged copies of one partition (a state record of it must wait for them).
    pub fn partition_fence(&self, topic: &str, partition: i32) -> Fence {
        self.parts
            .get(&(topic.to_string(), partition))
            .map(|c| c.by_offset.keys().map(|o| (partition, *o)).collect())
            .unwrap_or_default()
    }

    /// Whether every copy of `fence` (of `topic`) is acknowledged.
    pub fn cleared(&self, topic: &str, fence: &Fence) -> bool {
        fence.iter().all(|(p, o)| {
            self.parts
                .get(&(topic.to_string(), *p))
                .is_none_or(|c| !c.by_offset.contains_key(o))
        })
    }

    /// Copies unacknowledged and not failed: still on their first attempt.
    pub fn in_flight(&self) -> usize {
        self.parts
            .values()
            .flat_map(|c| c.by_offset.values())
            .filter(|p| p.failed_attempts == 0)
            .count()
    }

    /// Lets go of the pause of partitions no longer assigned to this consumer: one that comes
    /// back is read from its position again. Their copies still fence the checkpoints until
    /// acknowledged. Returns whether anything changed.
    pub fn keep_assigned(&mut self, assigned: &BTreeSet<(String, i32)>) -> bool {
        let mut changed = false;
        for (k, c) in self.parts.iter_mut() {
            if !assigned.contains(k) && c.paused_at.is_some() {
                c.paused_at = None;
                changed = true;
            }
        }
        changed
    }

    /// Partitions of `stream` held: a copy failed, or paused at the bound.
    pub fn count(&self, stream: &str) -> usize {
        self.parts
            .values()
            .filter(|c| c.stream == stream && held(c).is_some())
            .count()
    }

    /// What `/readyz` and the stream summaries show: each partition with a failed copy (at its
    /// first failed message, the one its durable state stays before) or paused at the bound.
    pub fn report(&self) -> Vec<HeldPartition> {
        let mut out = Vec::new();
        for ((topic, partition), c) in &self.parts {
            let Some((offset, p)) = held(c) else {
                continue;
            };
            let dlq = crate::config::dlq_of(topic);
            let waiting = format!(
                "{} dead-letter copies ({} bytes) not acknowledged",
                c.by_offset.len(),
                c.bytes
            );
            let mut reason = match &p.last_error {
                Some(e) => format!(
                    "the dead-letter copy to {dlq} failed ({e}); retrying; checkpoints and commits of this partition stay before offset {offset}; {waiting}"
                ),
                None => format!("waiting for dead-letter copies to {dlq}; {waiting}"),
            };
            if c.paused_at.is_some() {
                reason.push_str(&format!(
                    "; partition paused: it reached dlq.max_unacked_copies = {} or dlq.max_unacked_bytes = {}",
                    self.bound.copies, self.bound.bytes
                ));
            }
            out.push(HeldPartition {
                stream: c.stream.clone(),
                topic: topic.clone(),
                partition: *partition,
                offset,
                reason,
                failed_attempts: p.failed_attempts,
                since_ms: p.failed_since_ms.unwrap_or_else(crate::now_ms),
            });
        }
        out
    }
}

/// The copy a partition is held at: its first failed one, or (paused) its first one.
fn held(c: &Copies) -> Option<(i64, &Pending)> {
    c.by_offset
        .iter()
        .find(|(_, p)| p.failed_attempts > 0)
        .or_else(|| c.paused_at.and_then(|_| c.by_offset.iter().next()))
        .map(|(o, p)| (*o, p))
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

    fn failed(t: &str, p: i32, o: i64, attempts: u32) -> Outcome {
        Outcome::Failed {
            topic: t.into(),
            partition: p,
            offset: o,
            error: "Broker: Unknown topic or partition".into(),
            denied: false,
            attempts,
            retry_in: Some(std::time::Duration::from_millis(100)),
        }
    }

    fn big() -> Bound {
        Bound {
            copies: 100,
            bytes: 1 << 20,
        }
    }

    #[test]
    fn a_fence_clears_once_the_copies_it_covers_are_delivered() {
        let mut h = Held::new(big());
        assert!(!h.sent("s", "t", 1, 42, 10));
        assert!(!h.sent("s", "t", 0, 7, 10));
        assert!(!h.sent("s", "u", 0, 3, 10));
        let fence = h.fence("t");
        assert_eq!(fence, vec![(0, 7), (1, 42)]);
        assert_eq!(h.partition_fence("t", 1), vec![(1, 42)]);
        // A copy sent after the checkpoint was taken does not hold it.
        h.sent("s", "t", 1, 50, 10);
        h.outcome(&delivered("t", 1, 42));
        assert!(!h.cleared("t", &fence));
        // Another topic's copy, or an offset no one waits for, changes nothing.
        h.outcome(&delivered("u", 0, 7));
        assert!(!h.cleared("t", &fence));
        h.outcome(&delivered("t", 0, 7));
        assert!(h.cleared("t", &fence));
        assert!(!h.cleared("t", &h.fence("t")));
        h.outcome(&delivered("t", 1, 50));
        h.outcome(&delivered("u", 0, 3));
        assert!(h.is_empty());
    }

    #[test]
    fn a_failed_copy_holds_its_partition_at_the_first_failed_message() {
        let mut h = Held::new(big());
        h.sent("s", "t", 1, 40, 10);
        h.sent("s", "t", 1, 42, 10);
        // Merely in flight: not held.
        assert!(h.report().is_empty());
        assert_eq!(h.count("s"), 0);
        h.outcome(&failed("t", 1, 42, 2));
        let r = h.report();
        assert_eq!(r.len(), 1);
        assert_eq!(
            (r[0].partition, r[0].offset, r[0].failed_attempts),
            (1, 42, 2)
        );
        assert!(r[0].reason.contains("t.dlq") && r[0].reason.contains("Unknown topic"));
        assert_eq!(h.count("s"), 1);
        h.outcome(&failed("t", 1, 40, 1));
        assert_eq!(h.report()[0].offset, 40);
        h.outcome(&delivered("t", 1, 40));
        h.outcome(&delivered("t", 1, 42));
        assert!(h.report().is_empty() && h.is_empty());
    }

    #[test]
    fn a_partition_pauses_at_its_bound_and_resumes_under_half_of_it() {
        let mut h = Held::new(Bound {
            copies: 4,
            bytes: 1000,
        });
        for o in 0..3 {
            assert!(!h.sent("s", "t", 0, o, 10));
        }
        assert!(
            h.sent("s", "t", 0, 3, 10),
            "the fourth copy reaches the bound"
        );
        assert!(h.is_paused("t", 0));
        assert_eq!(h.report()[0].offset, 0);
        assert!(h.report()[0].reason.contains("dlq.max_unacked_copies"));
        assert_eq!(h.outcome(&delivered("t", 0, 0)), None);
        assert_eq!(
            h.outcome(&delivered("t", 0, 1)),
            Some(Resume {
                topic: "t".into(),
                partition: 0,
                position: 4
            })
        );
        assert!(!h.is_paused("t", 0));
        // Bytes count too.
        assert!(h.sent("s", "t", 1, 9, 1000));
    }

    #[test]
    fn a_copy_given_up_no_longer_fences() {
        let mut h = Held::new(big());
        h.sent("s", "t", 0, 5, 10);
        let fence = h.fence("t");
        let mut o = failed("t", 0, 5, 1);
        if let Outcome::Failed { retry_in, .. } = &mut o {
            *retry_in = None;
        }
        h.outcome(&o);
        assert!(h.cleared("t", &fence));
    }

    #[test]
    fn revoked_paused_partitions_are_let_go() {
        let mut h = Held::new(Bound {
            copies: 1,
            bytes: 1000,
        });
        assert!(h.sent("s", "t", 0, 5, 1));
        let assigned: BTreeSet<_> = [("t".to_string(), 1)].into();
        assert!(h.keep_assigned(&assigned));
        assert!(!h.is_paused("t", 0));
        // Its copy still fences the topic's checkpoints.
        assert_eq!(h.fence("t"), vec![(0, 5)]);
        assert!(!h.keep_assigned(&assigned));
    }
}
