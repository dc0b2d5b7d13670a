//! What survives a restart: each stream's statistics and the next offsets with them, saved
//! either as files in a directory (`file`, `state.dir`) or per partition in a compacted Kafka
//! topic (`kafka`, `state.store = "kafka"`, for replicas that share a consumer group). Both
//! back ends save the same things, including the cross-validation folds below; ingest decides
//! when to save (`ingest::persist`), these modules how.

pub mod bucket_files;
pub mod file;
pub mod kafka;

use crate::config::FoldBy;
use crate::state::streams::Stats;
use ravel_core::Task;
use ravel_core::stats::FoldSet;
use ravel_core::stats::windows::Windows;
use serde::{Deserialize, Serialize};

/// The folds as a checkpoint or a state record holds them: with how rows were assigned, so
/// that folds built one way are never extended another way.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SavedFolds {
    pub fold_by: FoldBy,
    pub folds: FoldSet,
}

impl SavedFolds {
    /// The saved folds if they are the ones the stream's configuration (K folds assigned
    /// `by`) would keep; otherwise why not, for the log.
    pub fn matching(self, k: usize, by: FoldBy) -> Result<FoldSet, String> {
        if self.folds.k() != k || self.fold_by != by {
            return Err(format!(
                "they are {} folds by {}, the stream now keeps {k} by {}",
                self.folds.k(),
                self.fold_by.name(),
                by.name()
            ));
        }
        Ok(self.folds)
    }
}

/// A saved state's windows by reference, as both stores name them: the spec, the clock, and
/// one entry per bucket (`E`: a bucket file, `bucket_files::FileEntry`, or a bucket record,
/// `kafka::buckets::IndexEntry`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WindowIndex<E> {
    pub bucket_ms: i64,
    pub keep_ms: i64,
    pub task: Task,
    pub p: usize,
    pub now_ms: Option<i64>,
    pub buckets: Vec<E>,
}

impl<E> WindowIndex<E> {
    /// The index of `windows` whose buckets `buckets` names.
    pub fn of(windows: &Windows, buckets: Vec<E>) -> WindowIndex<E> {
        let spec = windows.spec();
        WindowIndex {
            bucket_ms: spec.bucket_ms,
            keep_ms: spec.keep_ms,
            task: windows.task(),
            p: windows.p(),
            now_ms: windows.now_ms(),
            buckets,
        }
    }
}

/// One time bucket's statistics as both stores write them (a bucket file, a bucket record):
/// the version that names it, its span and its statistics.
#[derive(Serialize)]
pub(crate) struct BucketRef<'a> {
    pub version: u64,
    pub start_ms: i64,
    pub width_ms: i64,
    pub stats: &'a Stats,
}

impl BucketRef<'_> {
    /// The bucket's CBOR bytes (a bucket file's payload, a bucket record's value).
    pub fn encode(&self) -> anyhow::Result<Vec<u8>> {
        use anyhow::Context;
        let mut bytes = Vec::new();
        ciborium::into_writer(self, &mut bytes).context("cannot encode a time bucket")?;
        Ok(bytes)
    }
}

/// `BucketRef` as read back.
#[derive(Deserialize)]
pub(crate) struct BucketValue {
    pub version: u64,
    pub start_ms: i64,
    pub width_ms: i64,
    pub stats: Stats,
}

/// What the tests of both stores write: statistics of 60 rows of p = 3, and windows 1m/7d
/// holding the same rows over 30 minutes from `t0`.
#[cfg(test)]
pub(crate) fn thirty_minutes(t0: i64) -> (Stats, Windows) {
    use ravel_core::stats::AlphaSchedule;
    use ravel_core::stats::windows::{MINUTE_MS, WindowSpec};
    let spec: ravel_core::synthetic::SyntheticSpec = "p=3,k=2,n=60,seed=3".parse().unwrap();
    let (mut x, mut y) = (vec![], vec![]);
    spec.rows().fill(60, &mut x, &mut y);
    let mut stats = Stats::new(Task::Regression, 3, AlphaSchedule::Plain);
    stats.update_batch(&x, &y).unwrap();
    let mut w = Windows::new(WindowSpec::parse("1m", "7d").unwrap(), Task::Regression, 3);
    let stamps: Vec<i64> = (0..60).map(|i| t0 + i / 2 * MINUTE_MS + i).collect();
    w.fold(stamps[59], &stamps, &x, &y).unwrap();
    (stats, w)
}
