//! Commit planning: which offsets may be committed to Kafka after a checkpoint. A topic's
//! positions are committed only once the rows before them are durable (its checkpoint was
//! written, or it had nothing new), only for partitions this consumer is assigned (committing
//! a revoked partition would overwrite its new owner's progress), and only when Kafka does not
//! already hold that offset. So Kafka's committed offsets trail the last durable checkpoint and
//! never count a row the statistics could lose.

use super::positions::Positions;
use std::collections::{BTreeSet, HashMap};

/// A partition of a topic.
pub type Partition = (String, i32);

/// The offsets to commit: for each durable topic, every assigned partition's next offset that
/// differs from the one Kafka last accepted (`committed`), if that partition is durable too
/// (`durable_partition`: the `kafka` state store saves partitions one by one). In topic order
/// as given, then partition order.
pub fn plan(
    positions: &Positions,
    durable: &[String],
    durable_partition: impl Fn(&str, i32) -> bool,
    committed: &HashMap<Partition, i64>,
    assigned: &BTreeSet<Partition>,
) -> Vec<(Partition, i64)> {
    let mut out = Vec::new();
    for topic in durable {
        for (&p, &next) in positions.get(topic).into_iter().flatten() {
            let key = (topic.clone(), p);
            if committed.get(&key) == Some(&next)
                || !assigned.contains(&key)
                || !durable_partition(topic, p)
            {
                continue;
            }
            out.push((key, next));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn positions(entries: &[(&str, i32, i64)]) -> Positions {
        let mut p = Positions::new();
        for &(t, part, next) in entries {
            p.entry(t.to_string()).or_default().insert(part, next);
        }
        p
    }

    fn parts(entries: &[(&str, i32)]) -> BTreeSet<Partition> {
        entries.iter().map(|&(t, p)| (t.to_string(), p)).collect()
    }

    #[test]
    fn only_durable_topics_are_committed() {
        let pos = positions(&[("a", 0, 10), ("b", 0, 20)]);
        let assigned = parts(&[("a", 0), ("b", 0)]);
        let plan = plan(&pos, &["b".into()], |_, _| true, &HashMap::new(), &assigned);
        assert_eq!(plan, vec![(("b".to_string(), 0), 20)]);
        let none = super::plan(&pos, &[], |_, _| true, &HashMap::new(), &assigned);
        assert!(none.is_empty());
    }

    #[test]
    fn unassigned_partitions_are_not_committed() {
        let pos = positions(&[("a", 0, 10), ("a", 1, 11), ("a", 2, 12)]);
        let assigned = parts(&[("a", 0), ("a", 2), ("b", 1)]);
        let plan = plan(&pos, &["a".into()], |_, _| true, &HashMap::new(), &assigned);
        assert_eq!(
            plan,
            vec![(("a".to_string(), 0), 10), (("a".to_string(), 2), 12)]
        );
    }

    #[test]
    fn offsets_kafka_already_holds_are_not_committed_again() {
        let pos = positions(&[("a", 0, 10), ("a", 1, 11)]);
        let assigned = parts(&[("a", 0), ("a", 1)]);
        let committed: HashMap<Partition, i64> =
            [(("a".to_string(), 0), 10), (("a".to_string(), 1), 5)].into();
        let plan = plan(&pos, &["a".into()], |_, _| true, &committed, &assigned);
        // Partition 1 moved on since its last commit; partition 0 did not.
        assert_eq!(plan, vec![(("a".to_string(), 1), 11)]);
    }

    #[test]
    fn partitions_whose_state_is_not_saved_are_not_committed() {
        let pos = positions(&[("a", 0, 10), ("a", 1, 11)]);
        let assigned = parts(&[("a", 0), ("a", 1)]);
        let plan = plan(
            &pos,
            &["a".into()],
            |_, p| p == 1,
            &HashMap::new(),
            &assigned,
        );
        assert_eq!(plan, vec![(("a".to_string(), 1), 11)]);
    }

    #[test]
    fn a_topic_never_read_has_nothing_to_commit() {
        let pos = positions(&[("a", 0, 10)]);
        let assigned = parts(&[("a", 0), ("c", 0)]);
        let plan = plan(&pos, &["c".into()], |_, _| true, &HashMap::new(), &assigned);
        assert!(plan.is_empty());
    }
}
