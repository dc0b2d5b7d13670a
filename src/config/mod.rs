//! The service configuration: one schema, loaded in layers so that every knob has one name.
//!
//! Precedence, lowest first: built-in defaults, the TOML file (`--config FILE`, else
//! `config/ravel.toml` when it exists), environment variables `RAVEL_<SECTION>__<FIELD>`
//! (e.g. `RAVEL_KAFKA__BROKERS`, `RAVEL_HTTP__ADDR`), then command-line flags. Every field is
//! documented in `config/ravel.toml`; `Config::check` validates the whole thing once, so the
//! rest of the service never re-checks it.

mod args;
mod demo;
pub mod explain;
mod http;
mod ingest;
mod kafka;
pub mod limits;
mod log;
pub mod schemas;
pub mod scorers;
mod stream;

pub use args::*;
pub use demo::*;
pub use http::*;
pub use ingest::*;
pub use kafka::*;
pub use limits::LimitsConfig;
pub use log::*;
pub use stream::*;
pub use stream::{history, quality};

use anyhow::{Context, bail};
use ravel_core::data::csc::wide_bytes;
use ravel_core::features::Loss;
use ravel_core::memory::{ByteSize, Estimate};
use ravel_core::synthetic::{FeatureDesign, SyntheticSpec};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};

/// The default config file, read when it exists and no `--config` is given.
pub const DEFAULT_CONFIG_FILE: &str = "config/ravel.toml";

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    pub http: HttpConfig,
    pub kafka: KafkaConfig,
    pub ingest: IngestConfig,
    pub dlq: DlqConfig,
    pub state: StateConfig,
    pub demo: DemoConfig,
    pub log: LogConfig,
    pub limits: LimitsConfig,
    pub history: crate::config::history::HistoryConfig,
    /// `[schema_registry]`: where `avro`, `protobuf` and `json-schema` streams find their
    /// schemas.
    pub schema_registry: schemas::SchemaRegistryConfig,
    pub streams: Vec<StreamConfig>,
    pub feature_streams: Vec<FeatureStreamConfig>,
    /// `[[scorers]]`: events scored with a stream's model, predictions out to a topic.
    pub scorers: Vec<scorers::ScorerConfig>,
}

/// Kafka's rules for topic names: 1 to 249 characters among letters, digits, '.', '_' and
/// '-', and not "." or "..". ravel also writes `<topic>.dlq`, so a topic it reads may have at
/// most 245 characters.
fn check_topic(topic: &str) -> anyhow::Result<()> {
    let ok_chars = topic
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-'));
    if topic.is_empty() || topic == "." || topic == ".." || !ok_chars {
        bail!(
            "topic '{topic}' is not a valid Kafka topic name: use letters, digits, '.', '_' or '-' (and not \".\" or \"..\")"
        );
    }
    if topic.len() > 245 {
        bail!(
            "topic '{topic}' has {} characters; Kafka allows 249 and ravel appends '.dlq' for dead letters, so at most 245",
            topic.len()
        );
    }
    Ok(())
}

/// Whether `name` may name a stream or a scorer: non-empty, letters, digits, '-', '_' or '.'
/// (it labels metrics and appears in URLs).
pub(crate) fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

/// `${env:NAME}` from the environment, `${file:PATH}` from a file (trimmed), else as given.
/// (`kafka.options` and the registry's secrets.)
pub(crate) fn resolve_secret(key: &str, value: &mut String) -> anyhow::Result<()> {
    if let Some(name) = value
        .strip_prefix("${env:")
        .and_then(|r| r.strip_suffix('}'))
    {
        *value = std::env::var(name)
            .with_context(|| format!("{key}: environment variable {name} is not set"))?;
    } else if let Some(path) = value
        .strip_prefix("${file:")
        .and_then(|r| r.strip_suffix('}'))
    {
        *value = std::fs::read_to_string(path)
            .with_context(|| format!("{key}: cannot read {path}"))?
            .trim()
            .to_string();
    }
    Ok(())
}

impl Config {
    /// Each `[[scorers]]` checked against the streams, with the model it scores with.
    pub fn scorer_models(&self) -> anyhow::Result<Vec<ravel_core::solve::Request>> {
        let mut names = HashSet::new();
        let mut out = Vec::new();
        for sc in &self.scorers {
            if !names.insert(sc.name.as_str()) {
                bail!("scorer '{}' is declared twice in [[scorers]]", sc.name);
            }
            let history_k = match self.streams.iter().find(|s| s.name == sc.stream) {
                Some(s) => s.history(&self.history)?.k,
                None => 0,
            };
            out.push(sc.check(&self.streams, history_k)?);
        }
        Ok(out)
    }

    /// Loads defaults < file < environment (`RAVEL_...`) < flags, then checks the result.
    pub fn load(args: &ServeArgs) -> anyhow::Result<Config> {
        Self::load_with_env(args, None)
    }

    /// As `load`, with the environment given explicitly (None: the process environment).
    pub fn load_with_env(
        args: &ServeArgs,
        env: Option<BTreeMap<String, String>>,
    ) -> anyhow::Result<Config> {
        use config::{Environment, File, FileFormat};
        let mut builder = config::Config::builder();
        let file = match &args.config {
            Some(path) => {
                if !path.exists() {
                    bail!("config file {} does not exist", path.display());
                }
                Some(path.clone())
            }
            None => Some(PathBuf::from(DEFAULT_CONFIG_FILE)).filter(|p| p.exists()),
        };
        if let Some(path) = &file {
            builder = builder.add_source(
                File::from(path.as_path())
                    .format(FileFormat::Toml)
                    .required(true),
            );
        }
        // An empty variable is unset: `RAVEL_LOG=` (a name people use like RUST_LOG) must not
        // stop the start.
        let mut environment = Environment::with_prefix("RAVEL")
            .prefix_separator("_")
            .separator("__")
            .ignore_empty(true);
        if let Some(env) = env {
            environment = environment.source(Some(env.into_iter().collect()));
        }
        builder = builder
            .add_source(environment)
            .set_override_option("http.addr", args.http_addr.clone())?
            .set_override_option("kafka.brokers", args.brokers.clone())?
            .set_override_option("kafka.group_id", args.group_id.clone())?
            .set_override_option("state.dir", args.state_dir.clone())?
            .set_override_option("log.level", args.log_level.clone())?
            .set_override_option(
                "log.format",
                args.log_format
                    .map(|f| if f == LogFormat::Json { "json" } else { "text" }),
            )?;
        if args.no_demo {
            builder = builder.set_override("demo.enabled", false)?;
        }
        let where_ = file
            .as_deref()
            .map(|p| p.display().to_string())
            .unwrap_or_else(|| "defaults".into());
        let built = builder
            .build()
            .map_err(|e| anyhow::anyhow!("{}", explain::explain(&e)))
            .with_context(|| {
                format!("invalid configuration (from {where_} and RAVEL_* variables)")
            })?;
        // Every mistake of the file in one run (up to a bound), one a line.
        let mut cfg: Config = explain::deserialize_all(built).map_err(|errors| {
            let n = errors.len();
            let head = match n {
                1 => String::new(),
                _ if n >= explain::MAX_ERRORS => {
                    format!("the first {n} mistakes (fix them and run again for more):\n")
                }
                _ => format!("{n} mistakes:\n"),
            };
            anyhow::anyhow!("{head}{}", errors.join("\n")).context(format!(
                "invalid configuration (from {where_} and RAVEL_* variables)"
            ))
        })?;
        cfg.complete()?;
        cfg.check()?;
        Ok(cfg)
    }

    /// Whether the demo producer runs: only into the embedded broker.
    pub fn demo_active(&self) -> bool {
        self.demo.enabled && self.kafka.embedded()
    }

    /// Declares the demo stream when the demo runs and no stream of that name exists.
    pub fn complete(&mut self) -> anyhow::Result<()> {
        self.http.read_token_file()?;
        self.kafka.resolve_options()?;
        self.schema_registry.resolve_secrets()?;
        if self.demo_active() && !self.streams.iter().any(|s| s.name == self.demo.stream) {
            let spec = self.demo_spec()?;
            let stream = StreamConfig::plain(self.demo.stream.clone(), spec.p, spec.task);
            self.streams.push(stream);
        }
        if let Some(spec) = self.demo_feature_spec()?
            && self.feature_stream(&self.demo.feature_stream).is_none()
        {
            self.feature_streams.push(FeatureStreamConfig {
                name: self.demo.feature_stream.clone(),
                topic: None,
                n: spec.n,
                loss: Loss::Squared,
                s: spec.s,
                workers: 1,
                eta: None,
                // The demo's 500 columns of 200 samples (1.2 MB) also show paper 004's path.
                wide: true,
            });
        }
        Ok(())
    }

    /// The demo feature stream's design, when the demo runs one.
    pub fn demo_feature_spec(&self) -> anyhow::Result<Option<FeatureDesign>> {
        if !self.demo_active() || self.demo.feature_stream.trim().is_empty() {
            return Ok(None);
        }
        Ok(Some(self.demo.feature_design.clone()))
    }

    /// The demo stream's design, endless.
    pub fn demo_spec(&self) -> anyhow::Result<SyntheticSpec> {
        Ok(SyntheticSpec {
            n: None,
            ..self.demo.synthetic.clone()
        })
    }

    /// A stream's `format`: the schema'd formats read fields by name and need a schema
    /// source (the registry, or the writer's Avro schema for unframed datums).
    fn check_format(&self, s: &StreamConfig) -> anyhow::Result<()> {
        use schemas::ValueFormat;
        let (name, format) = (&s.name, s.format.name());
        if s.format.is_ravel() {
            if s.avro_schema_file.is_some() {
                bail!("stream '{name}': avro_schema_file applies to format = \"avro\" only");
            }
            return Ok(());
        }
        if s.target.is_none() || matches!(s.features, FeatureSchema::Count(_)) {
            bail!(
                "stream '{name}': format = \"{format}\" reads records by field name: declare \
                 target = \"<the field that holds y>\" and the features by name or dotted path \
                 (features = [\"sqft\", \"user.age\"])"
            );
        }
        match (&s.avro_schema_file, s.format) {
            (Some(_), ValueFormat::Avro) => Ok(()),
            (Some(_), _) => {
                bail!("stream '{name}': avro_schema_file applies to format = \"avro\" only")
            }
            (None, _) if self.schema_registry.configured() => Ok(()),
            (None, f) => bail!(
                "stream '{name}': format = \"{format}\" fetches each message's schema from a \
                 Schema Registry: set [schema_registry] url = \"http://registry:8081\"{}",
                if f == ValueFormat::Avro {
                    " (or avro_schema_file = \"sales.avsc\" for a topic of plain Avro datums \
                     without the Confluent framing)"
                } else {
                    ""
                }
            ),
        }
    }

    /// Validates everything once; messages say which field to fix.
    pub fn check(&self) -> anyhow::Result<()> {
        if self.streams.is_empty() && self.feature_streams.is_empty() {
            bail!(
                "no streams configured: declare at least one [[streams]] (name, topic, features) or [[feature_streams]] (name, n, s) in the config file"
            );
        }
        // Names are unique over both kinds: they label the same metrics.
        let (mut names, mut topics) = (HashSet::new(), HashSet::new());
        let all = self
            .streams
            .iter()
            .map(|s| (&s.name, s.topic()))
            .chain(self.feature_streams.iter().map(|f| (&f.name, f.topic())));
        for (name, topic) in all {
            if !valid_name(name) {
                bail!(
                    "stream name '{name}' must be non-empty and use only letters, digits, '-', '_' or '.'"
                );
            }
            if !names.insert(name.clone()) {
                bail!(
                    "stream '{name}' is declared twice (names are unique over [[streams]] and [[feature_streams]])"
                );
            }
            check_topic(&topic)?;
            if !topics.insert(topic.clone()) {
                bail!("topic '{topic}' is used by two streams; give each stream its own topic");
            }
        }
        for f in &self.feature_streams {
            f.check()?;
        }
        self.http.check()?;
        if self.http.max_concurrent_extractions > 1024 {
            bail!(
                "http.max_concurrent_extractions must lie in 0..=1024 (0: one per CPU core), got {}",
                self.http.max_concurrent_extractions
            );
        }
        if let Err(e) = tracing_subscriber::EnvFilter::try_new(&self.log.level) {
            bail!(
                "log.level '{}' is not a valid filter ({e}); use e.g. info, debug or ravel=debug,librdkafka=warn",
                self.log.level
            );
        }
        for s in &self.streams {
            if s.p() == 0 {
                bail!(
                    "stream '{}': features must be a positive count or a non-empty list of names",
                    s.name
                );
            }
            s.fields()?;
            if let Some(t) = &s.target
                && s.field_names().contains(&t.as_str())
            {
                bail!(
                    "stream '{}': target = \"{t}\" is also declared as a feature: a row's y \
                     cannot be one of its features",
                    s.name
                );
            }
            s.schedule()?;
            self.check_format(s)?;
        }
        self.schema_registry.check()?;
        self.scorer_models()?;
        if self.demo_active() {
            let spec = self.demo_spec()?;
            // `complete` declares it; a configuration built in code may not have run that.
            let Some(s) = self.streams.iter().find(|s| s.name == self.demo.stream) else {
                bail!(
                    "the demo runs (no kafka.brokers) but no stream '{}' (demo.stream) is declared",
                    self.demo.stream
                );
            };
            if s.p() != spec.p {
                bail!(
                    "demo stream '{}' has {} features but demo.synthetic makes p = {}",
                    s.name,
                    s.p(),
                    spec.p
                );
            }
            if let Some(spec) = self.demo_feature_spec()? {
                let Some(f) = self.feature_stream(&self.demo.feature_stream) else {
                    bail!(
                        "the demo runs (no kafka.brokers) but no feature stream '{}' \
                         (demo.feature_stream) is declared",
                        self.demo.feature_stream
                    );
                };
                if f.n != spec.n {
                    bail!(
                        "demo feature stream '{}' has n = {} but demo.feature_design makes n = {}",
                        f.name,
                        f.n,
                        spec.n
                    );
                }
                if self.demo.features_per_second == 0 {
                    bail!("demo.features_per_second must be positive");
                }
            }
            if self.demo.rows_per_second == 0 || self.demo.batch_rows == 0 {
                bail!("demo.rows_per_second and demo.batch_rows must be positive");
            }
        }
        // librdkafka's statistics.interval.ms takes at most a day; refused here, by its name.
        if !(100..=86_400_000).contains(&self.ingest.lag_interval_ms) {
            bail!(
                "ingest.lag_interval_ms = {}: it must lie in 100..=86400000 (0.1 s to one day)",
                self.ingest.lag_interval_ms
            );
        }
        if !(1..=100_000).contains(&self.ingest.field_check_events) {
            bail!(
                "ingest.field_check_events = {}: it must lie in 1..=100000 (the events of each \
                 stream in which ravel looks for every declared field and the target)",
                self.ingest.field_check_events
            );
        }
        if self.ingest.max_batch_rows == 0 {
            bail!("ingest.max_batch_rows must be at least 1");
        }
        if self.http.body_limit_bytes < 1024 {
            bail!("http.body_limit_bytes must be at least 1024");
        }
        if self.kafka.group_id.trim().is_empty() {
            bail!("kafka.group_id must not be empty");
        }
        kafka::check_instance_id(&self.kafka.instance_id)?;
        if self.kafka.assignment == kafka::Assignment::Standalone
            && self.state.store == StoreKind::Kafka
        {
            bail!(
                "kafka.assignment = \"standalone\" cannot go with state.store = \"kafka\": the replicas of the kafka store share the group's partitions (use \"group\" or \"auto\")"
            );
        }
        if !(1..=1000).contains(&self.kafka.embedded_partitions) {
            bail!("kafka.embedded_partitions must lie in 1..=1000");
        }
        if self.state.checkpoint_interval_ms == 0 {
            bail!("state.checkpoint_interval_ms must be positive");
        }
        if let Some(topic) = self.state.kafka_topic(&self.kafka.group_id) {
            check_topic(&topic).context("state.topic")?;
        }
        if !(64 * 1024..=100 * 1024 * 1024).contains(&self.state.max_record_bytes) {
            bail!(
                "state.max_record_bytes must lie in 65536..=104857600 (64 KiB to 100 MiB), got {}",
                self.state.max_record_bytes
            );
        }
        if !(1..=10_000).contains(&self.kafka.topic_partitions) {
            bail!("kafka.topic_partitions must lie in 1..=10000");
        }
        if self.kafka.topic_replication < 1 {
            bail!("kafka.topic_replication must be at least 1");
        }
        if self.dlq.delivery_timeout_ms == 0
            || self.dlq.retry_initial_ms == 0
            || self.dlq.retry_max_ms < self.dlq.retry_initial_ms
        {
            bail!(
                "dlq.delivery_timeout_ms and dlq.retry_initial_ms must be positive, and dlq.retry_max_ms at least dlq.retry_initial_ms"
            );
        }
        for s in &self.streams {
            s.folds()?;
            s.window_spec()?;
            s.start_at()?;
            quality::of_stream(s, &s.history(&self.history)?)?;
        }
        self.check_memory()
    }

    /// The streams' estimated memory against `limits.max_memory`: a stream whose p x p
    /// statistics cannot be held is refused here, naming it, instead of aborting on the
    /// allocation when the service starts it (issue 21).
    fn check_memory(&self) -> anyhow::Result<()> {
        let limit = self.limits.max_memory();
        let over = |est: &Estimate| est.total() > limit.bytes;
        let advice = "Drop or hash features, learn them as a feature stream ([[feature_streams]]), \
                      or raise limits.max_memory.";
        let mut total = Estimate::default();
        for s in &self.streams {
            let history = s.history(&self.history)?;
            // The quality window counts with the history (one window; with the kafka store
            // each partition this replica owns keeps its own).
            let windows = quality::of_stream(s, &history)?.map_or(0, |q| q.memory_bytes());
            let est = stream_memory(s, self.ingest.max_batch_rows, &history).with_history(windows);
            if over(&est) {
                bail!(
                    "stream '{}': features = {} sets p = {}, so two copies of its {} statistics \
                     (ingest's and the readers' snapshot, each a p x p matrix of second moments \
                     per class, and as many again per cross-validation fold, cv.folds = {}), one extraction, a batch of ingest.max_batch_rows = {} rows and \
                     its model history ([history]) and quality window (quality.window_rows) would need an estimated {est}, over limits.max_memory = {} ({}). {advice}",
                    s.name,
                    match &s.features {
                        FeatureSchema::Count(p) => p.to_string(),
                        FeatureSchema::Names(n) => format!("a list of {} fields", n.len()),
                    },
                    s.p(),
                    s.task,
                    s.cv.as_ref().map_or(0, |c| c.folds),
                    self.ingest.max_batch_rows,
                    ByteSize(limit.bytes),
                    limit.source,
                );
            }
            total = total.plus(est);
        }
        for f in &self.feature_streams {
            let est = feature_stream_memory(f, self.ingest.max_batch_rows);
            if over(&est) {
                bail!(
                    "feature stream '{}': n = {} samples and s = {} kept features would need an \
                     estimated {est}, over limits.max_memory = {} ({}). Lower n or s, or raise \
                     limits.max_memory.",
                    f.name,
                    f.n,
                    f.s,
                    ByteSize(limit.bytes),
                    limit.source,
                );
            }
            total = total.plus(est);
        }
        if over(&total) {
            bail!(
                "the {} streams together would need an estimated {total}, over limits.max_memory \
                 = {} ({}). Serve fewer streams per instance, drop or hash features, or raise \
                 limits.max_memory.",
                self.streams.len() + self.feature_streams.len(),
                ByteSize(limit.bytes),
                limit.source,
            );
        }
        let wide = self.feature_streams.iter().filter(|f| f.wide).count() as u64;
        if let Some(each) = (limit.bytes - total.total()).checked_div(wide) {
            for f in self.feature_streams.iter().filter(|f| f.wide) {
                let least = wide_bytes(f.n as u64, 1, f.n as u64);
                if each < least {
                    bail!(
                        "feature stream '{}': wide = true keeps its columns in what \
                         limits.max_memory = {} ({}) leaves after every stream's estimate \
                         ({total}), shared by the {wide} wide feature streams: {} each, less than \
                         the {} one column of n = {} samples and the path's vectors need. Raise \
                         limits.max_memory.",
                        f.name,
                        ByteSize(limit.bytes),
                        limit.source,
                        ByteSize(each),
                        ByteSize(least),
                        f.n,
                    );
                }
            }
        }
        Ok(())
    }

    /// The bytes each wide feature stream (`wide = true`) may keep in columns: what
    /// `limits.max_memory` leaves after every stream's estimate (`check_memory`), shared
    /// equally among the wide feature streams. Each has its own share, so which columns a
    /// stream keeps depends on its topic alone (a restart replays it to the same state).
    /// 0 when there is no wide feature stream.
    pub fn wide_budget(&self) -> u64 {
        let wide = self.feature_streams.iter().filter(|f| f.wide).count() as u64;
        if wide == 0 {
            return 0;
        }
        let mut total = Estimate::default();
        for s in &self.streams {
            let Ok(history) = s.history(&self.history) else {
                continue;
            };
            let windows = quality::of_stream(s, &history)
                .ok()
                .flatten()
                .map_or(0, |q| q.memory_bytes());
            total = total
                .plus(stream_memory(s, self.ingest.max_batch_rows, &history).with_history(windows));
        }
        for f in &self.feature_streams {
            total = total.plus(feature_stream_memory(f, self.ingest.max_batch_rows));
        }
        self.limits.max_memory().bytes.saturating_sub(total.total()) / wide
    }

    /// The stream declared with this name.
    pub fn stream(&self, name: &str) -> Option<&StreamConfig> {
        self.streams.iter().find(|s| s.name == name)
    }

    /// The feature stream declared with this name.
    pub fn feature_stream(&self, name: &str) -> Option<&FeatureStreamConfig> {
        self.feature_streams.iter().find(|s| s.name == name)
    }
}

/// Reads a config file on its own (tests, tools); same checks as `Config::load`.
pub fn from_file(path: &Path) -> anyhow::Result<Config> {
    Config::load_with_env(
        &ServeArgs {
            config: Some(path.into()),
            ..Default::default()
        },
        Some(BTreeMap::new()),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use ravel_core::Task;

    #[test]
    fn kafka_option_secrets_come_from_files_and_the_environment() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("pw");
        std::fs::write(&f, "  from-file \n").unwrap();
        let mut k = KafkaConfig::default();
        k.options
            .insert("sasl.password".into(), format!("${{file:{}}}", f.display()));
        // PATH is set wherever tests run.
        k.options
            .insert("ssl.key.password".into(), "${env:PATH}".into());
        k.options.insert("sasl.username".into(), "plain".into());
        k.resolve_options().unwrap();
        assert_eq!(k.options["sasl.password"], "from-file");
        assert_eq!(
            k.options["ssl.key.password"],
            std::env::var("PATH").unwrap()
        );
        assert_eq!(k.options["sasl.username"], "plain");
        k.options
            .insert("x".into(), "${env:RAVEL_NO_SUCH_VARIABLE_SET}".into());
        let e = k.resolve_options().unwrap_err().to_string();
        assert!(e.contains("RAVEL_NO_SUCH_VARIABLE_SET"), "{e}");
    }

    fn env(pairs: &[(&str, &str)]) -> Option<BTreeMap<String, String>> {
        Some(
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        )
    }

    fn write(dir: &Path, text: &str) -> PathBuf {
        let path = dir.join("ravel.toml");
        std::fs::write(&path, text).unwrap();
        path
    }

    /// A config file of `text` in a directory of its own (kept while the first is).
    fn written(text: &str) -> (tempfile::TempDir, PathBuf) {
        let dir = tempfile::tempdir().unwrap();
        let path = write(dir.path(), text);
        (dir, path)
    }

    #[test]
    fn defaults_declare_the_demo_stream() {
        let cfg = Config::load_with_env(&ServeArgs::default(), env(&[])).unwrap();
        assert!(cfg.kafka.embedded());
        assert_eq!(cfg.streams.len(), 1);
        assert_eq!(cfg.streams[0].name, "demo");
        assert_eq!(cfg.streams[0].p(), 100);
        assert_eq!(cfg.http.addr, "127.0.0.1:8080");
        assert_eq!(cfg.feature_streams.len(), 1);
        let f = &cfg.feature_streams[0];
        assert_eq!(
            (f.name.as_str(), f.n, f.s, f.workers),
            ("demo-features", 200, 10, 1)
        );
        assert_eq!(f.topic(), "ravel.features.demo-features");
    }

    #[test]
    fn layers_file_env_flags() {
        let (_dir, path) = written(
            r#"
            [http]
            addr = "127.0.0.1:9000"
            [kafka]
            brokers = "file:9092"
            [kafka.options]
            "security.protocol" = "SASL_SSL"
            [[streams]]
            name = "a"
            features = ["u", "v"]
            task = "classification"
            alpha = "floor:0.01"
            "#,
        );
        let args = ServeArgs {
            config: Some(path.clone()),
            ..Default::default()
        };
        let cfg = Config::load_with_env(
            &args,
            env(&[
                ("RAVEL_KAFKA__BROKERS", "env:9092"),
                ("RAVEL_KAFKA__OPTIONS__SASL_MECHANISM", "PLAIN"),
                ("RAVEL_INGEST__MAX_BATCH_ROWS", "77"),
            ]),
        )
        .unwrap();
        assert_eq!(cfg.kafka.brokers, "env:9092");
        assert_eq!(cfg.http.addr, "127.0.0.1:9000");
        assert_eq!(cfg.ingest.max_batch_rows, 77);
        let opts: BTreeMap<String, String> = cfg
            .kafka
            .librdkafka_options()
            .map(|(k, v)| (k, v.to_string()))
            .collect();
        assert_eq!(
            opts.get("security.protocol").map(String::as_str),
            Some("SASL_SSL")
        );
        assert_eq!(
            opts.get("sasl.mechanism").map(String::as_str),
            Some("PLAIN")
        );
        // Real brokers: no demo stream is added.
        assert_eq!(cfg.streams.len(), 1);
        assert!(cfg.feature_streams.is_empty());
        assert_eq!(cfg.streams[0].topic(), "ravel.a");
        assert_eq!(cfg.streams[0].task, Task::Classification);
        let args = ServeArgs {
            config: Some(path),
            brokers: Some("flag:9092".into()),
            ..Default::default()
        };
        let cfg =
            Config::load_with_env(&args, env(&[("RAVEL_KAFKA__BROKERS", "env:9092")])).unwrap();
        assert_eq!(cfg.kafka.brokers, "flag:9092");
    }

    #[test]
    fn a_configuration_built_in_code_without_its_demo_stream_is_refused_not_a_panic() {
        // `check` without `complete`: the demo runs (no brokers) but its stream was never
        // declared. An error naming the setting, where it used to be an `expect`.
        let mut cfg = Config::default();
        cfg.streams
            .push(StreamConfig::plain("other".into(), 3, Task::Regression));
        let e = cfg.check().unwrap_err().to_string();
        assert!(
            e.contains("no stream 'demo' (demo.stream) is declared"),
            "{e}"
        );
        cfg.complete().unwrap();
        cfg.check().unwrap();
    }

    #[test]
    fn bad_configs_say_what_to_fix() {
        let dir = tempfile::tempdir().unwrap();
        let cases = [
            ("[http]\nport = 1\n", "port"),
            ("[kafka]\nbrokers = \"b:1\"\n", "no streams"),
            (
                "[[streams]]\nname = \"a\"\nfeatures = 3\nalpha = \"fixed:2\"\n",
                "alpha",
            ),
            ("[[streams]]\nname = \"a\"\nfeatures = 0\n", "features"),
            (
                "[[streams]]\nname = \"a\"\nfeatures = 2\n[[streams]]\nname = \"a\"\nfeatures = 2\n",
                "twice",
            ),
            ("[[streams]]\nname = \"a b\"\nfeatures = 2\n", "letters"),
            (
                "[[streams]]\nname = \"a\"\nfeatures = [\"x\", \"x\"]\n",
                "feature 'x' is declared twice",
            ),
            (
                "[[streams]]\nname = \"a\"\nfeatures = [{ name = \"r\", kind = \"categorical\" }]\n",
                "feature 'r': a categorical feature needs levels",
            ),
            (
                "[[streams]]\nname = \"a\"\nfeatures = [{ name = \"r\", kind = \"text\" }]\n",
                "use numeric, categorical or hashed",
            ),
            (
                "[[streams]]\nname = \"a\"\nfeatures = [{ name = \"r\", levls = [\"a\"] }]\n",
                "unknown field `levls`",
            ),
            (
                "[[streams]]\nname = \"a\"\nfeatures = [{ name = \"t\", kind = \"hashed\", buckets = 100000 }]\n",
                "feature 't': buckets = 100000",
            ),
            (
                "[[streams]]\nname = \"a\"\nfeatures = [{ name = \"t\", buckets = 3 }]\n",
                "buckets does not apply to a numeric feature",
            ),
            (
                "[[streams]]\nname = \"a\"\nfeatures = [\"x\"]\nmissing = \"drop\"\n",
                "missing",
            ),
            (
                "[[streams]]\nname = \"a\"\nfeatures = [\"x\", \"price\"]\ntarget = \"price\"\n",
                "target = \"price\" is also declared as a feature",
            ),
            (
                "[[streams]]\nname = \"a\"\nfeatures = { x = 1 }\n",
                "a count (features = 10) or a list of names and tables",
            ),
            (
                "[[streams]]\nname = \"demo\"\nfeatures = 5\n",
                "demo stream",
            ),
            (
                "[[feature_streams]]\nname = \"f\"\nn = 1\ns = 3\n",
                "at least 2",
            ),
            (
                "[[feature_streams]]\nname = \"f\"\nn = 10\ns = 0\n",
                "budget",
            ),
            (
                "[[feature_streams]]\nname = \"f\"\nn = 10\ns = 2\nworkers = 3\n",
                "workers",
            ),
            (
                "[[feature_streams]]\nname = \"f\"\nn = 10\ns = 2\neta = -1.0\n",
                "eta",
            ),
            (
                "[[feature_streams]]\nname = \"f\"\nn = 10\ns = 2\nloss = \"hinge\"\n",
                "loss",
            ),
            (
                "[[feature_streams]]\nname = \"f\"\nn = 10\ns = 2\nbudget = 3\n",
                "budget",
            ),
            (
                "[[streams]]\nname = \"a\"\nfeatures = 2\n[[feature_streams]]\nname = \"a\"\nn = 10\ns = 2\n",
                "twice",
            ),
            (
                "[[streams]]\nname = \"a\"\nfeatures = 2\n[[feature_streams]]\nname = \"b\"\ntopic = \"ravel.a\"\nn = 10\ns = 2\n",
                "two streams",
            ),
        ];
        for (text, want) in cases {
            let path = write(dir.path(), text);
            let err = from_file(&path).unwrap_err();
            let msg = format!("{err:#}");
            assert!(
                msg.contains(want),
                "config {text:?}: error {msg:?} should mention {want:?}"
            );
        }
        let missing = ServeArgs {
            config: Some(dir.path().join("nope.toml")),
            ..Default::default()
        };
        assert!(Config::load_with_env(&missing, env(&[])).is_err());
    }

    #[test]
    fn topics_log_levels_and_extraction_bounds_are_checked() {
        let dir = tempfile::tempdir().unwrap();
        let long = "t".repeat(246);
        let cases = [
            (
                "[[streams]]\nname = \"a\"\ntopic = \"bad topic\"\nfeatures = 2\n".to_string(),
                "not a valid Kafka topic name",
            ),
            (
                "[[streams]]\nname = \"a\"\ntopic = \"..\"\nfeatures = 2\n".to_string(),
                "not a valid Kafka topic name",
            ),
            (
                format!("[[streams]]\nname = \"a\"\ntopic = \"{long}\"\nfeatures = 2\n"),
                "at most 245",
            ),
            (
                "[log]\nlevel = \"ravel=loud\"\n[[streams]]\nname = \"a\"\nfeatures = 2\n".to_string(),
                "log.level",
            ),
            (
                "[http]\nmax_concurrent_extractions = 100000\n[[streams]]\nname = \"a\"\nfeatures = 2\n".to_string(),
                "http.max_concurrent_extractions",
            ),
        ];
        for (text, want) in cases {
            let path = write(dir.path(), &text);
            let msg = format!("{:#}", from_file(&path).unwrap_err());
            assert!(
                msg.contains(want),
                "config {text:?}: {msg:?} should mention {want:?}"
            );
        }
        let ok = "[[streams]]\nname = \"a\"\ntopic = \"Team_a.sales-v2\"\nfeatures = 2\n";
        from_file(&write(dir.path(), ok)).unwrap();
    }

    #[test]
    fn settings_tables_and_shorthands_load_alike() {
        let (dir, path) = written(
            r#"
            [demo]
            synthetic = { p = 6, k = 2, rho = 0.25, task = "classification" }
            feature_design = "n=40,p=30,s=3"
            [[streams]]
            name = "demo"
            features = 6
            task = "classification"
            [[streams]]
            name = "a"
            features = 3
            alpha = { kind = "adaptive", fa = 1e-4, refresh = 500 }
            [[streams]]
            name = "b"
            features = 3
            alpha = "adaptive:fa=1e-4,refresh=500"
            [[streams]]
            name = "c"
            features = 3
            [streams.alpha]
            kind = "floor"
            alpha_min = 0.01
            [[streams]]
            name = "d"
            features = 3
            alpha = "fixed:0.5"
            "#,
        );
        let cfg = from_file(&path).unwrap();
        let alpha = |name: &str| cfg.stream(name).unwrap().alpha.to_string();
        assert_eq!(alpha("a"), alpha("b"));
        assert!(
            alpha("a").starts_with("adaptive:fa=0.0001,"),
            "{}",
            alpha("a")
        );
        assert_eq!(alpha("c"), "floor:0.01");
        assert_eq!(alpha("d"), "fixed:0.5");
        assert_eq!(alpha("demo"), "plain");
        let s = &cfg.demo.synthetic;
        assert_eq!(
            (s.p, s.k, s.rho, s.task),
            (6, 2, 0.25, Task::Classification)
        );
        let f = &cfg.demo.feature_design;
        assert_eq!((f.n, f.p, f.s, f.passes), (40, 30, 3, 3));
        assert_eq!(cfg.feature_stream("demo-features").unwrap().n, 40);

        let stream = "[[streams]]\nname = \"a\"\nfeatures = 3\n";
        for (text, want) in [
            (
                format!("{stream}alpha = {{ kind = \"fixed\", value = 0.01 }}\n"),
                "unknown field `value`",
            ),
            (
                format!("{stream}alpha = {{ kind = \"fixed\", alpha = 2.0 }}\n"),
                "alpha must lie in (0, 1]",
            ),
            (
                format!("{stream}alpha = {{ kind = \"adaptive\", fb = 1 }}\n"),
                "unknown field `fb`",
            ),
            (
                format!("{stream}alpha = {{ kind = \"slow\" }}\n"),
                "unknown variant `slow`",
            ),
            (format!("{stream}alpha = \"fixed:x\"\n"), "not a number"),
            (
                format!("[demo]\nsynthetic = {{ p = 5, q = 1 }}\n{stream}"),
                "unknown field `q`",
            ),
            (
                format!("[demo]\nsynthetic = {{ p = 20, rho = 1.0 }}\n{stream}"),
                "rho must lie in [0, 1)",
            ),
            (
                format!("[demo]\nfeature_design = {{ n = 1 }}\n{stream}"),
                "n >= 2",
            ),
            (
                format!("[demo]\nfeature_design = \"n=10,budget=3\"\n{stream}"),
                "unknown field `budget`",
            ),
            (
                format!("{stream}format = \"avro\"\n"),
                "format = \"avro\" reads records by field name: declare target",
            ),
            (
                "[[streams]]\nname = \"a\"\nfeatures = [\"x\"]\ntarget = \"y\"\nformat = \"protobuf\"\n"
                    .to_string(),
                "fetches each message's schema from a Schema Registry: set [schema_registry] url",
            ),
            (
                format!("{stream}avro_schema_file = \"a.avsc\"\n"),
                "avro_schema_file applies to format = \"avro\" only",
            ),
            (
                format!("{stream}format = \"parquet\"\n"),
                "format = \"parquet\": use \"ravel\" (the default), \"avro\", \"protobuf\" or \"json-schema\"",
            ),
            (
                format!("[schema_registry]\nurl = \"registry:8081\"\n{stream}"),
                "schema_registry.url: 'registry:8081' is not an http:// or https:// URL",
            ),
            (
                format!("[schema_registry]\nurl = \"http://r\"\nbasic_auth_user = \"u\"\n{stream}"),
                "basic authentication needs both basic_auth_user and basic_auth_password",
            ),
        ] {
            let msg = format!("{:#}", from_file(&write(dir.path(), &text)).unwrap_err());
            assert!(
                msg.contains(want),
                "config {text:?}: {msg:?} should mention {want:?}"
            );
        }
    }

    #[test]
    fn shipped_config_file_is_valid_and_complete() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(DEFAULT_CONFIG_FILE);
        let cfg = from_file(&path).unwrap();
        // Every field of the schema appears in the shipped file (documented there).
        let text = std::fs::read_to_string(&path).unwrap();
        let defaults = toml::to_string(&Config {
            streams: vec![],
            ..Config::default()
        })
        .unwrap();
        for line in defaults.lines() {
            if let Some((key, _)) = line
                .split_once(" = ")
                .filter(|(k, _)| !matches!(k.trim(), "streams" | "feature_streams" | "scorers"))
            {
                assert!(
                    text.contains(&format!("{} =", key.trim())),
                    "config/ravel.toml does not document `{key}`"
                );
            }
        }
        assert!(cfg.stream("demo").is_some());
        // Every field of a scorer is described in the [[scorers]] comment.
        let scorer = scorers::ScorerConfig {
            name: "s".into(),
            stream: "demo".into(),
            topic: "t".into(),
            output_topic: "o".into(),
            model: Some(ravel_core::solve::Request::ols()),
            refresh_ms: 1000,
            group_id: Some("g".into()),
            create_output_topic: true,
            interval: Some(0.95),
        };
        let comment = &text[text
            .find("# One [[scorers]] table")
            .expect("[[scorers]] comment")..];
        let fields = toml::to_string(&scorer).unwrap();
        // The top-level keys (before the first table), and the tables' names (`[model]`).
        let mut in_table = false;
        for line in fields.lines().filter(|l| !l.is_empty()) {
            let key = match line.strip_prefix('[') {
                Some(table) => {
                    in_table = true;
                    table.trim_end_matches(']')
                }
                None if in_table => continue,
                None => line.split_once(" = ").map_or(line, |(k, _)| k),
            };
            assert!(
                comment.contains(&format!("#   {key} ")),
                "config/ravel.toml's [[scorers]] comment does not describe `{key}`"
            );
        }
        assert!(fields.contains("[model]"), "{fields}");
        // Every field of a feature stream is described in the [[feature_streams]] comment.
        let example = FeatureStreamConfig {
            name: "f".into(),
            topic: Some("t".into()),
            n: 10,
            loss: Loss::Squared,
            s: 2,
            workers: 1,
            eta: Some(1.0),
            wide: true,
        };
        let fields = toml::to_string(&example).unwrap();
        for line in fields.lines() {
            let key = line.split_once(" = ").unwrap().0.trim();
            assert!(
                text.lines().any(|l| l.starts_with(&format!("#   {key} "))),
                "config/ravel.toml does not describe the feature-stream field `{key}`"
            );
        }
    }

    #[test]
    fn feature_streams_load_with_defaults() {
        let (_dir, path) = written(
            "[kafka]\nbrokers = \"b:1\"\n[[feature_streams]]\nname = \"genes\"\nn = 200\ns = 10\n\
             [[feature_streams]]\nname = \"cls\"\ntopic = \"t.cls\"\nn = 50\ns = 4\nloss = \"logistic\"\nworkers = 2\neta = 0.5\n",
        );
        let cfg = from_file(&path).unwrap();
        assert!(cfg.streams.is_empty());
        let g = cfg.feature_stream("genes").unwrap();
        assert_eq!(g.topic(), "ravel.features.genes");
        assert_eq!(
            (g.n, g.s, g.workers, g.loss, g.eta),
            (200, 10, 1, Loss::Squared, None)
        );
        let c = cfg.feature_stream("cls").unwrap();
        assert_eq!(c.topic(), "t.cls");
        assert_eq!((c.workers, c.loss, c.eta), (2, Loss::Logistic, Some(0.5)));
        assert_eq!(c.params().eta_for(), 0.5);
    }

    #[test]
    fn windows_are_checked_by_name_and_counted_in_the_memory_limit() {
        let dir = tempfile::tempdir().unwrap();
        let load = |text: &str| {
            let path = write(dir.path(), text);
            let args = ServeArgs {
                config: Some(path),
                ..Default::default()
            };
            Config::load_with_env(&args, env(&[])).map_err(|e| format!("{e:#}"))
        };
        let stream = |windows: &str| {
            format!(
                "[kafka]\nbrokers = \"b:1\"\n[limits]\nmax_memory = \"1GiB\"\n[[streams]]\nname = \"s\"\nfeatures = 100\n{windows}\n"
            )
        };
        let cfg = load(&stream("windows = { bucket = \"1m\", keep = \"7d\" }")).unwrap();
        let s = &cfg.streams[0];
        let spec = s.window_spec().unwrap().unwrap();
        assert_eq!(spec.max_buckets(), 1655);
        // Each bucket once, plus a second copy of as many as one batch can change.
        let per = ravel_core::stats::WindowSpec::bucket_bytes(100, Task::Regression);
        assert_eq!(stream::windows_memory(s, 10), per * (1655 + 10), "{per}");
        let e = load(&stream("windows = { bucket = \"7m\", keep = \"7d\" }")).unwrap_err();
        assert!(e.contains("stream 's': windows.bucket = \"7m\""), "{e}");
        let e = load(&stream("windows = { bucket = \"1m\", keep = \"forever\" }")).unwrap_err();
        assert!(e.contains("windows.keep"), "{e}");
        let e = load(&stream("windows = { bucket = \"1m\" }")).unwrap_err();
        assert!(e.contains("keep"), "{e}");
        // 1,655 buckets of 82 KB do not fit 100 MB: refused naming the limit.
        let e =
            load(&stream("windows = { bucket = \"1m\", keep = \"7d\" }").replace("1GiB", "100MB"))
                .unwrap_err();
        assert!(
            e.contains("limits.max_memory") && e.contains("windows"),
            "{e}"
        );
        // The kafka store keeps them too (each partition's buckets in its state record).
        load(&format!(
            "{}[state]\nstore = \"kafka\"\n",
            stream("windows = { bucket = \"1m\", keep = \"7d\" }")
        ))
        .unwrap();
    }

    #[test]
    fn streams_too_large_for_the_memory_limit_are_refused_at_start() {
        let dir = tempfile::tempdir().unwrap();
        let base = "[kafka]\nbrokers = \"b:1\"\n";
        let load = |text: &str, env_pairs: &[(&str, &str)]| {
            let path = write(dir.path(), text);
            let args = ServeArgs {
                config: Some(path),
                ..Default::default()
            };
            Config::load_with_env(&args, env(env_pairs)).map_err(|e| format!("{e:#}"))
        };
        // The issue's p: its statistics alone are 320 GB a copy.
        let huge = format!(
            "{base}[limits]\nmax_memory = \"64GiB\"\n[[streams]]\nname = \"wide\"\nfeatures = 200000\n"
        );
        // A configuration `load` refuses, its error naming each of `parts`.
        let refused = |text: String, parts: &[&str]| {
            let e = load(&text, &[]).unwrap_err();
            for part in parts {
                assert!(e.contains(part), "'{part}' missing from: {e}");
            }
        };
        refused(
            huge.clone(),
            &[
                "stream 'wide': features = 200000 sets p = 200000",
                "two copies of its regression statistics",
                "an estimated 1.5 TiB",
                "over limits.max_memory = 64.0 GiB (set by limits.max_memory)",
                "Drop or hash features",
                "[[feature_streams]]",
            ],
        );
        // The default limit is the machine's: still refused, saying so.
        refused(
            huge.replace("max_memory = \"64GiB\"", ""),
            &["limits.max_memory"],
        );
        // p = 1000: 2 x 8 MB statistics, 24 MB extraction, 16 MB batch.
        let small = format!(
            "{base}[[streams]]\nname = \"a\"\nfeatures = 1000\ntask = \"classification\"\n"
        );
        let cfg = load(&format!("{small}[limits]\nmax_memory = \"1GiB\"\n"), &[]).unwrap();
        assert_eq!(cfg.limits.max_memory, Some(ByteSize(1 << 30)));
        refused(
            format!("{small}[limits]\nmax_memory = \"50MB\"\n"),
            &["classification statistics"],
        );
        // The environment and bytes work too; a bad amount names the field.
        assert!(load(&small, &[("RAVEL_LIMITS__MAX_MEMORY", "50MB")]).is_err());
        assert!(load(&small, &[("RAVEL_LIMITS__MAX_MEMORY", "1073741824")]).is_ok());
        refused(
            format!("{small}[limits]\nmax_memory = \"lots\"\n"),
            &["max_memory", "'lots'"],
        );
        // Feature streams count too, and so does the sum of all streams.
        refused(
            format!(
                "{base}[limits]\nmax_memory = \"1GiB\"\n[[feature_streams]]\nname = \"f\"\nn = 100000000\ns = 10\n"
            ),
            &["feature stream 'f': n = 100000000"],
        );
        let mut many = format!("{base}[limits]\nmax_memory = \"100MB\"\n");
        for i in 0..4 {
            many.push_str(&format!("[[streams]]\nname = \"s{i}\"\nfeatures = 1000\n"));
        }
        refused(many, &["the 4 streams together"]);
        // The model history counts: p = 1000 fits in 100 MB, but not with a full history of
        // 100 000 points of 1000 coefficients (about 1.2 GB); bad history settings name the
        // stream and the field.
        let one = format!(
            "{base}[limits]\nmax_memory = \"100MB\"\n[[streams]]\nname = \"h\"\nfeatures = 1000\n"
        );
        assert!(load(&one, &[]).is_ok());
        let settings: [(&str, &[&str]); 3] = [
            (
                "history = { length = 100000, k = 1000 }",
                &["stream 'h'", "history"],
            ),
            (
                "history = { interval_ms = 5 }",
                &["stream 'h': history: interval_ms"],
            ),
            ("[history]\nlength = 0", &["history: length"]),
        ];
        for (setting, parts) in settings {
            refused(format!("{one}{setting}\n"), parts);
        }
        // The stream's quality (issue 33): the issue's example, its model table included,
        // loads through the layers; bad settings name the stream and the key; a window of a
        // million rows (24 MB) counts against the limit with the rest.
        let c = load(
            &format!("{one}quality = {{ every_rows = 500, window_rows = 2000, model = {{ method = \"lasso\", k = 10 }}, floor = {{ r2 = 0.5 }} }}\n"),
            &[],
        )
        .unwrap();
        let q = c.streams[0].quality.clone().unwrap();
        assert_eq!((q.every_rows, q.window_rows), (Some(500), 2000));
        assert_eq!(q.model.unwrap().method().name(), "lasso");
        assert_eq!(q.floor.get("r2"), Some(&0.5));
        let settings: [(&str, &[&str]); 2] = [
            (
                "quality = { every_rows = 0 }",
                &["stream 'h': quality: every_rows"],
            ),
            (
                "quality = { model = { method = \"lasso\", k = 2000 } }",
                &["stream 'h': quality: model"],
            ),
        ];
        for (setting, parts) in settings {
            refused(format!("{one}{setting}\n"), parts);
        }
        let tight = format!(
            "{base}[limits]\nmax_memory = \"20MB\"\n[[streams]]\nname = \"h\"\nfeatures = 100\n"
        );
        assert!(load(&tight, &[]).is_ok());
        refused(
            format!("{tight}quality = {{ window_rows = 1000000 }}\n"),
            &["stream 'h'", "quality window"],
        );
        // Cross-validation folds count: p = 1000 (two 8 MB copies) fits in 100 MB with 2
        // folds (6 copies, 48 MB), not with 20 (42 copies, 336 MB).
        assert!(load(&format!("{one}cv.folds = 2\n"), &[]).is_ok());
        refused(
            format!("{one}cv.folds = 20\n"),
            &["stream 'h'", "cv.folds = 20"],
        );
        refused(
            format!("{one}cv.folds = 21\n"),
            &["stream 'h': cv.folds = 21: it must lie in 2..=20"],
        );
        let e = load(
            &format!("{one}cv = {{ folds = 5, fold_by = \"row\" }}\n"),
            &[],
        )
        .unwrap_err();
        assert!(e.contains("fold_by") || e.contains("row"), "{e}");
    }
}
