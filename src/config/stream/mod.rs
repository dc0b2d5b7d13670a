//! `[[streams]]` and `[[feature_streams]]`: each stream's topic, features, task, schedule,
//! cross-validation folds and history, and the memory each is estimated to keep. What a
//! stream sets for itself beside its fields has a file here: `history` (the `[history]`
//! defaults and a stream's override), `quality` (its live test-then-train figures) and
//! `start` (where a stream never read starts).

pub mod history;
pub mod quality;
mod start;

use crate::config::schemas::ValueFormat;
use anyhow::bail;
use ravel_core::Task;
use ravel_core::features::{Loss, OsParams};
use ravel_core::fields::{Field, Fields, Kind, Missing};
use ravel_core::memory::{Estimate, memory_estimate, selection_estimate};
use ravel_core::spec::{Spec, string_or_table};
use ravel_core::stats::{AlphaSchedule, AlphaSpec, WindowSpec};
use serde::{Deserialize, Serialize};
pub use start::{StartAt, rfc3339_ms};

/// What ingest and the API keep for a stream, estimated from its configuration: two copies
/// of the statistics (the one ingest folds into and the snapshot readers extract from), each
/// with its K fold statistics when `cv.folds = K` (1 + K statistics per copy), one
/// extraction, a batch of `max_batch_rows` rows, and the model history when full; with
/// `windows`, its buckets (`windows_memory`).
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
        .with_windows(windows_memory(s, max_batch_rows))
}

/// The bytes of a stream's time buckets: at most `WindowSpec::max_buckets` of them, each one
/// copy of the statistics (ingest and the readers' snapshot share a bucket until a batch
/// changes it), plus a second copy of each bucket one batch can change (at most one per row of
/// `max_batch_rows`) while readers hold the snapshot before it.
pub fn windows_memory(s: &StreamConfig, max_batch_rows: usize) -> u64 {
    let Ok(Some(spec)) = s.window_spec() else {
        return 0;
    };
    let buckets = spec.max_buckets();
    let copies = buckets.saturating_add(buckets.min(max_batch_rows as u64));
    WindowSpec::bucket_bytes(s.p(), s.task).saturating_mul(copies)
}

/// What a feature stream keeps: its selection of s columns of n samples, and the columns
/// gathered in a batch (one column of n per message).
pub fn feature_stream_memory(f: &FeatureStreamConfig, max_batch_rows: usize) -> Estimate {
    selection_estimate(f.n as u64, f.s).with_file(max_batch_rows as u64, f.n.saturating_sub(1))
}

/// The features of a stream: a count p (positional rows only), or the declared fields, each
/// a name (a numeric field) or a table with its kind (`ravel_core::fields`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(untagged)]
pub enum FeatureSchema {
    Count(usize),
    Names(Vec<FeatureDecl>),
}

/// One declared field: `"sqft"`, or `{ name = "region", kind = "categorical", levels = [...] }`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum FeatureDecl {
    Name(String),
    Table(FeatureTable),
}

/// A field declared as a table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FeatureTable {
    /// The field's name, a dotted path into nested events (`user.age`).
    pub name: String,
    /// `numeric` (default), `categorical` or `hashed`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<String>,
    /// Categorical: the levels, the first the reference.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub levels: Option<Vec<String>>,
    /// Hashed: the number of buckets.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub buckets: Option<usize>,
    /// This field's missing-value policy, replacing the stream's `missing`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub missing: Option<Missing>,
}

impl FeatureSchema {
    /// Numeric fields named `names` (`features = ["a", "b"]`).
    pub fn names(names: Vec<String>) -> FeatureSchema {
        FeatureSchema::Names(names.into_iter().map(FeatureDecl::Name).collect())
    }
}

impl FeatureDecl {
    fn name(&self) -> &str {
        match self {
            FeatureDecl::Name(n) => n,
            FeatureDecl::Table(t) => &t.name,
        }
    }

    /// The field, checked for the keys its kind needs, with the stream's missing policy
    /// where it names none.
    fn field(&self, missing: Missing) -> Result<Field, String> {
        let t = match self {
            FeatureDecl::Name(n) => {
                return Ok(Field {
                    missing,
                    ..Field::numeric(n.clone())
                });
            }
            FeatureDecl::Table(t) => t,
        };
        let name = &t.name;
        let kind = match t.kind.as_deref().unwrap_or("numeric") {
            "numeric" => Kind::Numeric,
            "categorical" => Kind::Categorical {
                levels: t.levels.clone().ok_or_else(|| {
                    format!(
                        "feature '{name}': a categorical feature needs levels = [\"...\", ...] \
                         (the first is the reference level)"
                    )
                })?,
            },
            "hashed" => Kind::Hashed {
                buckets: t.buckets.ok_or_else(|| {
                    format!("feature '{name}': a hashed feature needs buckets = B")
                })?,
            },
            other => {
                return Err(format!(
                    "feature '{name}': kind = \"{other}\": use numeric, categorical or hashed"
                ));
            }
        };
        let stray = match kind {
            Kind::Numeric => [
                ("levels", t.levels.is_some()),
                ("buckets", t.buckets.is_some()),
            ],
            Kind::Categorical { .. } => [("buckets", t.buckets.is_some()), ("", false)],
            Kind::Hashed { .. } => [("levels", t.levels.is_some()), ("", false)],
        };
        if let Some((key, _)) = stray.iter().find(|(_, given)| *given) {
            return Err(format!(
                "feature '{name}': {key} does not apply to a {} feature",
                kind.name()
            ));
        }
        Ok(Field {
            name: name.clone(),
            kind,
            missing: t.missing.unwrap_or(missing),
        })
    }

    /// The columns the field expands into (`Fields::new` checks the declaration).
    fn width(&self, missing: Missing) -> usize {
        let FeatureDecl::Table(t) = self else {
            return 1 + usize::from(missing == Missing::Indicator);
        };
        let block = match t.kind.as_deref() {
            Some("categorical") => t.levels.as_ref().map_or(1, |l| l.len().max(1)),
            Some("hashed") => t.buckets.unwrap_or(1),
            _ => 1,
        };
        block + usize::from(t.missing.unwrap_or(missing) == Missing::Indicator)
    }
}

/// A count or a list, with the message a person needs when it is neither (serde's untagged
/// enums say only "did not match any variant").
impl<'de> Deserialize<'de> for FeatureSchema {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(SchemaVisitor)
    }
}

struct SchemaVisitor;

impl<'de> serde::de::Visitor<'de> for SchemaVisitor {
    type Value = FeatureSchema;
    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str(
            "a count (features = 10) or a list of names and tables \
             (features = [\"sqft\", { name = \"region\", kind = \"categorical\", levels = [\"north\", \"south\"] }])",
        )
    }
    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<FeatureSchema, E> {
        usize::try_from(v)
            .map(FeatureSchema::Count)
            .map_err(|_| E::custom(format!("features = {v} is beyond any machine's memory")))
    }
    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<FeatureSchema, E> {
        if v < 0 {
            return Err(E::custom(format!(
                "features = {v}: a count of features is positive"
            )));
        }
        self.visit_u64(v as u64)
    }
    fn visit_seq<A: serde::de::SeqAccess<'de>>(
        self,
        mut seq: A,
    ) -> Result<FeatureSchema, A::Error> {
        let mut decls = Vec::new();
        while let Some(d) = seq.next_element::<DeclSeed>()? {
            decls.push(d.0);
        }
        Ok(FeatureSchema::Names(decls))
    }
}

/// One list entry: a name or a table, with the table's own error (an unknown key, a wrong
/// type) instead of "did not match any variant".
struct DeclSeed(FeatureDecl);

impl<'de> Deserialize<'de> for DeclSeed {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = DeclSeed;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a feature name or a table { name = \"...\", kind = \"...\", ... }")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<DeclSeed, E> {
                Ok(DeclSeed(FeatureDecl::Name(v.to_string())))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, map: A) -> Result<DeclSeed, A::Error> {
                FeatureTable::deserialize(serde::de::value::MapAccessDeserializer::new(map))
                    .map(|t| DeclSeed(FeatureDecl::Table(t)))
            }
        }
        d.deserialize_any(V)
    }
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
    /// Events: the field that holds y, a name or dotted path (`price`, `sale.price`). Declaring
    /// it makes every JSON message of the stream an event whose fields are found by name (see
    /// `crate::codec::format`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// What a missing value does, for every field that names no policy of its own:
    /// `reject` (default), `skip_row` or `indicator`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub missing: Option<Missing>,
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
    /// How message values are written: `ravel` (default), `avro`, `protobuf` or
    /// `json-schema` (`crate::config::schemas`).
    #[serde(default, skip_serializing_if = "ValueFormat::is_ravel")]
    pub format: ValueFormat,
    /// `format = "avro"` without the Confluent framing: the writer's schema (a `.avsc` file).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub avro_schema_file: Option<std::path::PathBuf>,
    /// Statistics per time bucket of the messages' Kafka timestamps (`windows = { bucket =
    /// "1m", keep = "7d" }`), so that models over any window of time are exact (issue 47).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub windows: Option<WindowsConfig>,
    /// Where the stream starts when it was never read (no checkpoint): `earliest` (default),
    /// `latest` or an RFC 3339 time (`crate::config::StartAt`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<String>,
}

/// `windows = { bucket = "1m", keep = "7d" }`: the finest bucket width and the retention, as
/// spans (`30s`, `1m`, `6h`, `7d`, `2w`); checked by `StreamConfig::window_spec`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WindowsConfig {
    pub bucket: String,
    pub keep: String,
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
    /// Stream `name` of `p` unnamed numeric features for `task`, every other setting its
    /// default (the demo's stream).
    pub fn plain(name: String, p: usize, task: Task) -> StreamConfig {
        StreamConfig {
            name,
            topic: None,
            features: FeatureSchema::Count(p),
            target: None,
            missing: None,
            task,
            alpha: AlphaSpec::Plain,
            history: None,
            cv: None,
            quality: None,
            format: Default::default(),
            avro_schema_file: None,
            windows: None,
            start: None,
        }
    }

    pub fn topic(&self) -> String {
        self.topic
            .clone()
            .unwrap_or_else(|| format!("ravel.{}", self.name))
    }
    /// The dimension of the rows: the count, or the columns the declared fields expand into.
    pub fn p(&self) -> usize {
        match &self.features {
            FeatureSchema::Count(p) => *p,
            FeatureSchema::Names(n) => n.iter().map(|d| d.width(self.missing())).sum(),
        }
    }
    /// The stream's missing-value policy (`missing`, default `reject`).
    pub fn missing(&self) -> Missing {
        self.missing.unwrap_or_default()
    }
    /// The declared fields and their columns (None: a stream declared by count), checked.
    pub fn fields(&self) -> anyhow::Result<Option<Fields>> {
        let FeatureSchema::Names(decls) = &self.features else {
            return Ok(None);
        };
        if let Some(i) = decls.iter().position(|d| d.name().trim().is_empty()) {
            bail!(
                "stream '{}': features: entry {} of the list has an empty name; every feature \
                 needs the name of its field in the messages (a key, or a dotted path such as \
                 user.age)",
                self.name,
                i + 1
            );
        }
        let fields = decls
            .iter()
            .map(|d| d.field(self.missing()))
            .collect::<Result<Vec<_>, _>>()
            .and_then(Fields::new)
            .map_err(|e| anyhow::anyhow!("stream '{}': features: {e}", self.name))?;
        Ok(Some(fields))
    }
    /// The declared field names (not their columns), for messages.
    pub fn field_names(&self) -> Vec<&str> {
        match &self.features {
            FeatureSchema::Count(_) => Vec::new(),
            FeatureSchema::Names(n) => n.iter().map(FeatureDecl::name).collect(),
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
    /// The checked `start` setting (`earliest` when absent).
    pub fn start_at(&self) -> anyhow::Result<crate::config::StartAt> {
        self.start
            .as_deref()
            .map_or(Ok(crate::config::StartAt::Earliest), |s| {
                crate::config::StartAt::parse(s)
                    .map_err(|e| anyhow::anyhow!("stream '{}': {e}", self.name))
            })
    }
    /// The checked `windows` setting (None: the stream keeps no time buckets).
    pub fn window_spec(&self) -> anyhow::Result<Option<WindowSpec>> {
        self.windows
            .as_ref()
            .map(|w| {
                WindowSpec::parse(&w.bucket, &w.keep)
                    .map_err(|e| anyhow::anyhow!("stream '{}': windows.{e}", self.name))
            })
            .transpose()
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
    /// Keep every column received, sparse, for paper 004's Lasso path over HTTP
    /// (`/v1/feature-streams/{name}/wide/...`), within `limits.max_memory` (squared loss).
    #[serde(default)]
    pub wide: bool,
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
        if self.wide && self.loss != Loss::Squared {
            bail!(
                "feature stream '{}': wide = true keeps the columns for paper 004's Lasso path, \
                 which fits the squared loss; it cannot go with loss = \"{}\"",
                self.name,
                self.loss
            );
        }
        Ok(())
    }
}
