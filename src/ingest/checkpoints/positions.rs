//! Positions: per topic and partition, the next offset whose row is not yet in the
//! statistics. They start from the checkpoints and move with every message read (good or
//! bad); a (re)assigned partition starts there, or at the beginning of the topic when no row
//! of it was ever applied, so the statistics always cover exactly the rows before the
//! positions. Kept apart, as pure functions, because exactness rests on them: the rebalance
//! callback, the lag, the checkpoints and the commits all read the same map.

use rdkafka::topic_partition_list::Offset;
use std::collections::{BTreeMap, HashMap};

/// Topic -> partition -> next offset not yet in the statistics.
pub type Positions = HashMap<String, BTreeMap<i32, i64>>;

/// The next offset of `topic`/`partition`, if a message of it was ever applied (or restored).
pub fn next(positions: &Positions, topic: &str, partition: i32) -> Option<i64> {
    positions
        .get(topic)
        .and_then(|m| m.get(&partition))
        .copied()
}

/// Where an assigned partition starts: its position, or the beginning of the topic.
pub fn start(positions: &Positions, topic: &str, partition: i32) -> Offset {
    match next(positions, topic, partition) {
        Some(n) => Offset::Offset(n),
        None => Offset::Beginning,
    }
}

/// The message at `offset` was read (applied or refused): the partition goes on after it.
pub fn read(positions: &mut Positions, topic: &str, partition: i32, offset: i64) {
    positions
        .entry(topic.to_string())
        .or_default()
        .insert(partition, offset + 1);
}

/// A restored position checked against its partition's watermarks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Restored {
    /// Within the log.
    Valid,
    /// Beyond the end of the log: the checkpoint belongs to another incarnation of the topic.
    PastEnd,
    /// Before the start of the log: offsets next..low were deleted by retention unread.
    Deleted,
}

/// Checks the restored position `next` against the watermarks `low`..`high`.
pub fn check(next: i64, low: i64, high: i64) -> Restored {
    if next > high {
        Restored::PastEnd
    } else if next < low {
        Restored::Deleted
    } else {
        Restored::Valid
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_partition_never_read_starts_at_the_beginning_and_a_read_one_after_its_last_message() {
        let mut p = Positions::new();
        assert_eq!(start(&p, "t", 0), Offset::Beginning);
        read(&mut p, "t", 0, 41);
        assert_eq!(next(&p, "t", 0), Some(42));
        assert_eq!(start(&p, "t", 0), Offset::Offset(42));
        // Other partitions and topics are untouched.
        assert_eq!(start(&p, "t", 1), Offset::Beginning);
        assert_eq!(start(&p, "u", 0), Offset::Beginning);
        read(&mut p, "t", 0, 42);
        read(&mut p, "u", 3, 0);
        assert_eq!(next(&p, "t", 0), Some(43));
        assert_eq!(start(&p, "u", 3), Offset::Offset(1));
    }

    #[test]
    fn a_restored_position_is_checked_against_the_log() {
        assert_eq!(check(10, 0, 10), Restored::Valid);
        assert_eq!(check(0, 0, 10), Restored::Valid);
        assert_eq!(check(11, 0, 10), Restored::PastEnd);
        assert_eq!(check(3, 5, 10), Restored::Deleted);
    }
}
