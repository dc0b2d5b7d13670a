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
use ravel_core::stats::FoldSet;
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

/// One time bucket's statistics as both stores write them (a bucket file, a bucket record):
/// the version that names it, its span and its statistics.
#[derive(Serialize)]
pub(crate) struct BucketRef<'a> {
    pub version: u64,
    pub start_ms: i64,
    pub width_ms: i64,
    pub stats: &'a Stats,
}

/// `BucketRef` as read back.
#[derive(Deserialize)]
pub(crate) struct BucketValue {
    pub version: u64,
    pub start_ms: i64,
    pub width_ms: i64,
    pub stats: Stats,
}
