//! A partition's statistics restored from the Kafka state store when it is assigned here:
//! the totals, and beside them the cross-validation folds and time buckets when they are this
//! stream's (same K, spec, task and p). What does not fit starts empty and the log says why,
//! because a row's fold or time cannot be recovered from totals. Also what a checkpoint needs
//! of the parts (which changed, and the bucket records their last saved state names). Kept
//! apart from the fold itself, which never reads saved state.

use super::{Part, StreamIngest};
use crate::state::streams::{FoldSet, Windows};
use crate::store::kafka::{PartitionState, SavedBuckets};
use std::sync::Arc;

impl StreamIngest {
    /// Parts whose statistics are not yet saved.
    pub fn dirty_parts(&self) -> impl Iterator<Item = (i32, &Part)> {
        self.parts
            .iter()
            .filter(|(_, p)| p.dirty)
            .map(|(k, p)| (*k, p))
    }

    pub fn mark_saved(&mut self, partition: i32) {
        if let Some(p) = self.parts.get_mut(&partition) {
            p.dirty = false;
        }
    }

    /// The bucket records a written state of `partition` names (`kafka` store).
    pub fn mark_buckets_saved(&mut self, partition: i32, saved: Option<Arc<SavedBuckets>>) {
        if let Some(p) = self.parts.get_mut(&partition) {
            p.saved_buckets = saved;
        }
    }

    /// A partition assigned here (`kafka` store): its statistics restored from the state
    /// store, or empty.
    pub fn install(&mut self, partition: i32, state: Option<&PartitionState>) {
        let (part, windows) = match state {
            Some(s) => (
                Part::new(
                    s.stats.clone(),
                    self.restored_folds(partition, s),
                    s.last_update(),
                    s.as_of_ms,
                ),
                self.restored_windows(partition, s),
            ),
            None => (
                Part::new(self.empty.clone(), self.empty_folds.clone(), None, None),
                None,
            ),
        };
        // The bucket records the state names, which the restored buckets share: the first
        // checkpoint writes only the buckets changed since.
        let saved = windows
            .as_ref()
            .and_then(|_| state.and_then(|s| s.saved.clone()));
        let mut part = part
            .tracked(&self.handle, partition)
            .windowed(&self.handle, windows);
        part.saved_buckets = saved;
        self.parts.insert(partition, part);
    }

    /// The time buckets of a partition's state if they are this stream's (spec, task, p,
    /// valid); else None, said in the log: the partition's buckets then start empty and hold
    /// only the rows read from now on (a row's time cannot be recovered from the totals).
    fn restored_windows(&self, partition: i32, s: &PartitionState) -> Option<Windows> {
        let spec = self.handle.window_spec?;
        match self.usable_windows(s) {
            Ok(w) => Some(w),
            Err(why) => {
                tracing::warn!(
                    stream = %self.handle.name(), partition,
                    "the partition's state has no usable time buckets ({why}), the stream keeps {}: its windows start empty and hold only the rows read from now on",
                    spec.describe()
                );
                None
            }
        }
    }

    /// The time buckets of a partition's state, if they are this stream's. The state's
    /// buckets were validated against its statistics when the record was read
    /// (`store::kafka`), and the statistics are checked against the stream by the caller; a
    /// clone shares the buckets.
    pub(super) fn usable_windows(&self, s: &PartitionState) -> Result<Windows, String> {
        let Some(spec) = self.handle.window_spec else {
            return Err("the stream keeps no windows".into());
        };
        match &s.windows {
            Some(w) if w.spec() == spec && w.p() == self.handle.p() => Ok(w.clone()),
            Some(w) if w.spec() == spec => Err(format!("they are of p = {}", w.p())),
            Some(w) => Err(format!("they are of {}", w.spec().describe())),
            None => Err("it has none".into()),
        }
    }

    /// The folds of a partition's state if they are this stream's (K, fold_by, shape); else
    /// empty folds, said in the log: they then hold only the rows read from now on, and CV
    /// answers say so (`cross_validate_folds`).
    fn restored_folds(&self, partition: i32, s: &PartitionState) -> Option<FoldSet> {
        let (k, _) = self.handle.folds();
        if k == 0 {
            return None;
        }
        let name = self.handle.name();
        let why = match self.usable_folds(s) {
            Ok(f) => return Some(f),
            Err(why) => why,
        };
        tracing::warn!(
            stream = %name, partition, k,
            "the partition's state has no usable fold statistics ({why}): its folds start empty and hold only the rows read from now on"
        );
        self.empty_folds.clone()
    }

    /// The folds of a partition's state, if they are this stream's.
    pub(super) fn usable_folds(&self, s: &PartitionState) -> Result<FoldSet, String> {
        let (k, by) = self.handle.folds();
        if k == 0 {
            return Err("the stream keeps no folds".into());
        }
        match s.folds.clone().map(|f| f.matching(k, by)) {
            Some(Ok(f)) => match f.validate(self.handle.task(), self.handle.p()) {
                Ok(()) => Ok(f),
                Err(e) => Err(format!("they do not fit the stream ({e})")),
            },
            Some(Err(e)) => Err(e),
            None => Err("it has none".into()),
        }
    }
}
