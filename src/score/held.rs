//! The models a scorer holds. A scorer of another topic holds one, the latest. A scorer of
//! its stream's own topic holds a few, each with the positions of the snapshot it came from
//! (`Snapshot::positions`), and scores each event with the newest model whose rows do not
//! hold the event: a model of the rows before it, never one that learned the event's own
//! target. A model is dropped once a newer one precedes everything the scorer has still to
//! read; with `MAX_HELD` models held no newer one is taken until the scorer catches up, so a
//! scorer behind its stream scores with older models rather than with models that already
//! hold its events. An event that no held model precedes (the stream folded it before the
//! scorer read it: the topic's backlog at the first start, or a scorer restarted behind its
//! stream) is scored with the newest model, and its prediction and a counter say so.

use super::predict::Current;
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// The most models a scorer of its stream's own topic holds at once.
pub(super) const MAX_HELD: usize = 8;

pub(super) struct Held {
    /// Oldest first.
    models: VecDeque<Current>,
    /// Whether the scorer reads its stream's own topic.
    own_topic: bool,
    /// Per assigned partition, the next offset the scorer reads (after its last committed
    /// batch): no event before it is scored again.
    reading: BTreeMap<i32, i64>,
}

impl Held {
    pub(super) fn new(own_topic: bool) -> Held {
        Held {
            models: VecDeque::new(),
            own_topic,
            reading: BTreeMap::new(),
        }
    }

    /// The latest model taken.
    pub(super) fn newest(&self) -> Option<&Current> {
        self.models.back()
    }

    /// Whether a newer model may be taken now (see the module).
    pub(super) fn has_room(&self) -> bool {
        !self.own_topic || self.models.len() < MAX_HELD
    }

    /// Takes a newer model: the only one of a scorer of another topic.
    pub(super) fn take(&mut self, current: Current) {
        if !self.own_topic {
            self.models.clear();
        }
        self.models.push_back(current);
        self.forget();
    }

    /// The model that scores the event at `partition`/`offset`, and, for a scorer of its
    /// stream's own topic, whether the model's rows precede the event.
    pub(super) fn for_event(
        &self,
        partition: i32,
        offset: i64,
    ) -> Option<(&Current, Option<bool>)> {
        if !self.own_topic {
            return self.newest().map(|c| (c, None));
        }
        match self
            .models
            .iter()
            .rev()
            .find(|c| precedes(c, partition, offset))
        {
            Some(c) => Some((c, Some(true))),
            None => self.newest().map(|c| (c, Some(false))),
        }
    }

    /// A batch was committed (a scorer of its stream's own topic): the scorer reads each
    /// partition of `next` from there on, and only the partitions `assigned` are its own.
    pub(super) fn read(&mut self, next: &BTreeMap<i32, i64>, assigned: &BTreeSet<i32>) {
        self.reading.extend(next);
        self.reading.retain(|p, _| assigned.contains(p));
        self.forget();
    }

    /// Drops the oldest models while the next one precedes every event still to be read
    /// (none before the scorer has read: where it starts is not known yet).
    fn forget(&mut self) {
        while self.models.len() > 1
            && !self.reading.is_empty()
            && self
                .reading
                .iter()
                .all(|(&p, &o)| precedes(&self.models[1], p, o))
        {
            self.models.pop_front();
        }
    }
}

/// Whether the rows of `c`'s model precede the event at `partition`/`offset` (its snapshot
/// holds no row of that offset or later).
fn precedes(c: &Current, partition: i32, offset: i64) -> bool {
    c.snapshot
        .positions
        .get(&partition)
        .is_none_or(|&next| next <= offset)
}
