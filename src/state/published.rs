//! The one pattern both stream kinds share between ingest (the one writer) and the HTTP API
//! (many readers): `Published<S>` holds an immutable snapshot that ingest swaps after every
//! batch, and readers clone an `Arc` of it under a lock held for a pointer copy, then extract
//! from their copy for as long as they like. So a slow reader never blocks ingest and ingest
//! never blocks a reader (a reader never blocks the writer). `Registry<H>` holds
//! the service's handles of one kind by name (sorted, so listings are stable).
//!
//! `streams` (observation streams) and `feature_streams` each define their handle (their
//! configuration and a `Published` snapshot) and name their registry.

use std::collections::BTreeMap;
use std::sync::{Arc, RwLock};

/// The current snapshot of one stream, replaced whole by the writer.
#[derive(Debug)]
pub struct Published<S> {
    current: RwLock<Arc<S>>,
}

impl<S> Published<S> {
    pub fn new(initial: S) -> Self {
        Published {
            current: RwLock::new(Arc::new(initial)),
        }
    }
    /// The current snapshot (a pointer copy under the lock).
    pub fn get(&self) -> Arc<S> {
        crate::read(&self.current).clone()
    }
    /// Replaces the snapshot; readers holding the old one keep it.
    pub fn publish(&self, snapshot: S) {
        *crate::write(&self.current) = Arc::new(snapshot);
    }
}

/// What a registry needs of a handle.
pub trait Named {
    /// The stream's name, unique among the handles of one registry.
    fn name(&self) -> &str;
    /// The Kafka topic it is read from.
    fn topic(&self) -> &str;
}

/// All handles of one kind, by name. The set changes at run time (streams declared over the
/// API, `crate::declared`): readers take a handle (an `Arc`) or a listing under a lock held
/// for a copy, and keep it for as long as they like.
#[derive(Debug)]
pub struct Registry<H> {
    by_name: RwLock<BTreeMap<String, Arc<H>>>,
}

impl<H> Default for Registry<H> {
    fn default() -> Self {
        Registry {
            by_name: RwLock::new(BTreeMap::new()),
        }
    }
}

impl<H: Named> Registry<H> {
    pub fn new(handles: impl IntoIterator<Item = H>) -> Self {
        Registry {
            by_name: RwLock::new(
                handles
                    .into_iter()
                    .map(|h| (h.name().to_string(), Arc::new(h)))
                    .collect(),
            ),
        }
    }
    pub fn get(&self, name: &str) -> Option<Arc<H>> {
        crate::read(&self.by_name).get(name).cloned()
    }
    /// The handles in name order, as they are now.
    pub fn iter(&self) -> std::vec::IntoIter<Arc<H>> {
        crate::read(&self.by_name)
            .values()
            .cloned()
            .collect::<Vec<_>>()
            .into_iter()
    }
    /// The handle that reads `topic`, if any.
    pub fn by_topic(&self, topic: &str) -> Option<Arc<H>> {
        crate::read(&self.by_name)
            .values()
            .find(|h| h.topic() == topic)
            .cloned()
    }
    /// The topics, in name order.
    pub fn topics(&self) -> Vec<String> {
        crate::read(&self.by_name)
            .values()
            .map(|h| h.topic().to_string())
            .collect()
    }
    #[cfg(test)]
    pub fn len(&self) -> usize {
        crate::read(&self.by_name).len()
    }
    /// Adds `handle`, replacing one of the same name (returned).
    pub fn insert(&self, handle: Arc<H>) -> Option<Arc<H>> {
        crate::write(&self.by_name).insert(handle.name().to_string(), handle)
    }
    /// Takes the handle named `name` out.
    pub fn remove(&self, name: &str) -> Option<Arc<H>> {
        crate::write(&self.by_name).remove(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    struct H {
        name: &'static str,
        topic: &'static str,
        snap: Published<u64>,
    }
    impl Named for H {
        fn name(&self) -> &str {
            self.name
        }
        fn topic(&self) -> &str {
            self.topic
        }
    }

    #[test]
    fn a_reader_keeps_its_snapshot_while_the_writer_publishes() {
        let p = Published::new(1u64);
        let old = p.get();
        p.publish(2);
        assert_eq!((*old, *p.get()), (1, 2));
    }

    #[test]
    fn handles_are_listed_by_name_and_found_by_name_or_topic() {
        let h = |name, topic| H {
            name,
            topic,
            snap: Published::new(0),
        };
        let r = Registry::new([h("b", "t.b"), h("a", "t.a")]);
        assert_eq!(r.topics(), ["t.a", "t.b"]);
        assert_eq!(r.len(), 2);
        assert!(r.get("b").is_some_and(|h| h.topic == "t.b"));
        assert!(r.by_topic("t.a").is_some_and(|h| h.name == "a"));
        assert!(r.get("c").is_none() && r.by_topic("t.c").is_none());
        r.get("a").unwrap().snap.publish(5);
        assert_eq!(*r.by_topic("t.a").unwrap().snap.get(), 5);
        assert_eq!(Registry::<H>::default().len(), 0);
    }
}
