//! `[[streams]]` and `[[feature_streams]]`: each stream's topic, features, task, schedule,
//! cross-validation folds and history, and the memory each is estimated to keep.

use anyhow::bail;
use ravel_core::Task;
use ravel_core::features::{Loss, OsParams};
use ravel_core::memory::{Estimate, memory_estimate, selection_estimate};
use ravel_core::spec::{Spec, string_or_table};
use ravel_core::stats::{AlphaSchedule, AlphaSpec};
use serde::{Deserialize, Serialize};

/// What ingest and the API keep for a stream, estimated from its configuration: two copies
/// of the statistics (the one ingest folds into and the snapshot readers extract from), each
/// with its K fold statistics when `cv.folds = K` (1 + K statistics per copy), one
/// extraction, a batch of `max_batch_rows` rows, and the model history when full.
pub fn stream_memory(
    s: &StreamConfig,
    max_batch_rows: usize,
    history: &crate::config::history::HistorySpec,
) -> Estimate {
    let folds = s.cv.as_ref().map_or(0, |c| c.folds as u64);
    memory_estimate(s.p(), s.task)
        .with_copies(2 * (1 + folds))
        .with_batch(max_batch_rows as u64, s.p())
        .with_history(history.memory_bytes())
}

/// What a feature stream keeps: its selection of s columns of n samples, and the columns
/// gathered in a batch (one column of n per message).
pub fn feature_stream_memory(f: &FeatureStreamConfig, max_batch_rows: usize) -> Estimate {
    selection_estimate(f.n as u64, f.s).with_file(max_batch_rows as u64, f.n.saturating_sub(1))
}

/// The features of a stream: a count p, or the names (JSON named rows need names).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum FeatureSchema {
    Count(usize),
    Names(Vec<String>),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct StreamConfig {
    /// The name in the HTTP API (`/v1/streams/{name}`).
    pub name: String,
    /// Kafka topic; default `ravel.<name>`.
    #[serde(default)]
    pub topic: Option<String>,
    pub features: FeatureSchema,
    #[serde(default = "regression")]
    pub task: Task,
    /// The weight schedule (003 eq. 6): a table tagged by `kind` (`AlphaSpec`) or the
    /// shorthand `plain`, `fixed:A`, `floor:A`, `adaptive[:key=value,...]`.
    #[serde(default, deserialize_with = "string_or_table")]
    pub alpha: AlphaSpec,
    /// This stream's model history settings, each replacing `[history]`'s.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub history: Option<crate::config::history::HistoryOverride>,
    /// Exact K-fold cross-validation (`cv.folds = K`): K fold statistics beside the totals.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cv: Option<CvConfig>,
    /// Live prequential quality (`quality = { ... }`; on by default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quality: Option<crate::config::quality::QualityConfig>,
}

/// A stream's cross-validation folds (issue 17): how many, and what a row's fold is a
/// function of (`crate::ingest::folds`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CvConfig {
    /// K, in 2..=20.
    pub folds: usize,
    #[serde(default)]
    pub fold_by: FoldBy,
}

/// What a row's fold is a hash of.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FoldBy {
    /// Its Kafka coordinates: topic, partition, offset and the row's index in its message.
    #[default]
    Coordinates,
    /// Its message's key (every row of a message, and of every message with that key, in one
    /// fold); messages without a key fall back to their coordinates.
    Key,
}

impl FoldBy {
    pub fn name(&self) -> &'static str {
        match self {
            FoldBy::Coordinates => "coordinates",
            FoldBy::Key => "key",
        }
    }
}

pub(super) fn regression() -> Task {
    Task::Regression
}

impl StreamConfig {
    pub fn topic(&self) -> String {
        self.topic
            .clone()
            .unwrap_or_else(|| format!("ravel.{}", self.name))
    }
    pub fn p(&self) -> usize {
        match &self.features {
            FeatureSchema::Count(p) => *p,
            FeatureSchema::Names(n) => n.len(),
        }
    }
    pub fn names(&self) -> Option<&[String]> {
        match &self.features {
            FeatureSchema::Count(_) => None,
            FeatureSchema::Names(n) => Some(n),
        }
    }
    /// The model history settings: `[history]` with this stream's own.
    pub fn history(
        &self,
        defaults: &crate::config::history::HistoryConfig,
    ) -> anyhow::Result<crate::config::history::HistorySpec> {
        defaults
            .resolve(self.history.as_ref(), self.p())
            .map_err(|e| anyhow::anyhow!("stream '{}': history: {e}", self.name))
    }
    /// K of `cv.folds` (0: no folds), checked.
    pub fn folds(&self) -> anyhow::Result<usize> {
        let Some(cv) = &self.cv else {
            return Ok(0);
        };
        let max = ravel_core::solve::select::MAX_FOLDS;
        if !(2..=max).contains(&cv.folds) {
            anyhow::bail!(
                "stream '{}': cv.folds = {}: it must lie in 2..={max} (remove cv to keep no folds)",
                self.name,
                cv.folds
            );
        }
        Ok(cv.folds)
    }
    pub fn schedule(&self) -> anyhow::Result<AlphaSchedule> {
        self.alpha
            .check()
            .map_err(|e| anyhow::anyhow!("stream '{}': alpha: {e}", self.name))?;
        let schedule = self.alpha.schedule();
        if matches!(schedule, AlphaSchedule::Adaptive(_)) && self.task == Task::Classification {
            anyhow::bail!(
                "stream '{}': the adaptive alpha schedule is for regression streams (its detector \
                 watches prediction errors of y); use plain, fixed:A or floor:A",
                self.name
            );
        }
        Ok(schedule)
    }
}

/// A feature stream (paper 000): n fixed samples with their labels; features arrive as
/// columns and online substitution keeps the best `s` of them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FeatureStreamConfig {
    /// The name in the HTTP API (`/v1/feature-streams/{name}`), unique among all streams.
    pub name: String,
    /// Kafka topic; default `ravel.features.<name>`. One partition keeps the order of labels
    /// and features.
    #[serde(default)]
    pub topic: Option<String>,
    /// Samples: the length of the labels and of every feature column.
    pub n: usize,
    #[serde(default = "squared")]
    pub loss: Loss,
    /// Budget: the number of features kept.
    pub s: usize,
    /// 1: OS; q > 1: Asy-OS with q worker threads, each keeping s/q features.
    #[serde(default = "one_worker")]
    pub workers: usize,
    /// Step size eta; default 1 / the loss's curvature (lowered by the curvature check).
    #[serde(default)]
    pub eta: Option<f64>,
}

pub(super) fn squared() -> Loss {
    Loss::Squared
}
pub(super) fn one_worker() -> usize {
    1
}

impl FeatureStreamConfig {
    pub fn topic(&self) -> String {
        self.topic
            .clone()
            .unwrap_or_else(|| format!("ravel.features.{}", self.name))
    }
    /// The OS / Asy-OS parameters.
    pub fn params(&self) -> OsParams {
        OsParams {
            eta: self.eta,
            ..OsParams::new(self.s, self.loss)
        }
    }
    pub(super) fn check(&self) -> anyhow::Result<()> {
        if self.n < 2 {
            bail!(
                "feature stream '{}': n (the number of samples) must be at least 2",
                self.name
            );
        }
        self.params()
            .check()
            .map_err(|e| anyhow::anyhow!("feature stream '{}': {e}", self.name))?;
        if self.workers == 0 || self.workers > self.s {
            bail!(
                "feature stream '{}': workers must lie in 1..=s = {} (each worker keeps s/workers features), got {}",
                self.name,
                self.s,
                self.workers
            );
        }
        Ok(())
    }
}
