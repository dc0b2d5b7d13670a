//! Streams declared at run time (issue 49): `PUT` and `DELETE /v1/streams/{name}` add, change
//! and retire observation streams while the service runs, beside the config file's.
//!
//! Design (the smallest change that keeps the others exact). There stays one consumer for
//! every topic (`crate::ingest`); the stream set changes only between two batches of its loop,
//! at a checkpoint boundary:
//!
//! 1. The API checks a declaration exactly as the file's: the JSON body goes through the
//!    `config` crate and `config::explain` (so a bad key is named, with "did you mean"), then
//!    the whole configuration with it (`Config::check`: names and topics unique over both
//!    kinds, formats, the memory limit over all streams). A name of the file is refused (409).
//! 2. It writes the new set of API declarations to `state.dir/declarations.json` (atomically)
//!    before anything changes, so a restart keeps exactly what was answered 200/201; then the
//!    handle goes into the registry the API reads, and a `Change` into the queue ingest reads.
//! 3. Ingest, at its next loop turn, folds what it holds, writes every stream's checkpoint and
//!    commits (synchronously), then starts or stops the stream's `StreamIngest` and changes the
//!    subscription (group assignment: unsubscribe, subscribe again: every partition is
//!    assigned again at its position; standalone: the topic's partitions unassigned or
//!    assigned at their positions). Positions are per partition and untouched for the other
//!    streams, so none of their rows is lost or folded twice: the mechanism is the one every
//!    rebalance already relies on.
//! 4. A retired stream's checkpoint stays (`?state=keep`, the default: a later PUT of the same
//!    declaration resumes from it) or is deleted (`?state=drop`). A changed declaration starts
//!    its statistics afresh from the beginning of its topic (its old state is dropped).
//!
//! A declaration whose topic (or dead-letter topic) the cluster does not have is refused,
//! naming it and the command that creates it, as `ravel check` would; so is one that reads
//! its schemas from a Schema Registry that does not answer as one (or does not serve its
//! format).
//!
//! Scorers (`scorers`: started and stopped on their own threads) and feature streams
//! (`features`: handed to ingest as streams are) are declared the same way.
//!
//! Where they are kept (`Keep`): with the file store in `state.dir/declarations.json`; with
//! the kafka store in the group's state topic, one record a declaration
//! (`crate::store::kafka::declared`). There the replica that answers a change writes its
//! record, waits until the topic has it, and applies it; every other replica reads it from
//! the topic and applies it within a second (`sync`, on a thread of the service), and so
//! does a replica at its start. A stream's states carry its declaration's `epoch`, so a
//! replaced or dropped declaration's states are never restored into the next one of the same
//! name, whichever replica wrote them last. Where a new stream starts is its `start`
//! (`crate::ingest`'s `start`; with the kafka store, the beginning of its topic).

pub mod data;
pub mod features;
mod keep;
pub mod scorers;
mod sync;

use crate::config::{Config, StoreKind, StreamConfig};
use crate::state::streams::{StreamHandle, Streams};
use crate::store::kafka::declared::DeclarationLog;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

/// The file in `state.dir` that holds the API's declarations.
pub const FILE: &str = "declarations.json";

/// One stream declared over the API, as `declarations.json` keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApiDeclaration {
    /// The declaration, as the config file's `[[streams]]` table.
    pub stream: StreamConfig,
    /// Who declared it: the peer address of the admin request.
    pub by: String,
    /// When (Unix ms).
    pub at_ms: u64,
    /// Which declaration of the name this is (`StreamHandle::epoch`): new with each change;
    /// a stream retired with its state kept and declared again the same resumes its epoch.
    #[serde(default)]
    pub epoch: u64,
}

/// A declaration as the state topic keeps it: the API's record, and whether it is retired
/// with its state kept (retired with its state dropped: a tombstone).
#[derive(Serialize, Deserialize)]
struct Logged<T> {
    #[serde(flatten)]
    declaration: T,
    #[serde(default)]
    retired: bool,
}

/// Where the API's declarations are kept.
pub enum Keep {
    /// `state.dir/declarations.json` (the file store).
    File(PathBuf),
    /// The group's state topic (`state.store = "kafka"`).
    Log(Arc<DeclarationLog>),
    /// Nowhere: declarations are refused.
    Nowhere,
}

/// What `declarations.json` holds.
#[derive(Default, Serialize, Deserialize)]
pub struct Book {
    version: u32,
    pub streams: Vec<ApiDeclaration>,
    /// Feature streams declared over the API (`features`); absent from files written before.
    #[serde(default)]
    pub feature_streams: Vec<features::ApiFeatureStream>,
    /// Scorers declared over the API (`scorers`); absent from files written before them.
    #[serde(default)]
    pub scorers: Vec<scorers::ApiScorer>,
}

/// The API's declarations by kind and name, as the service holds them.
#[derive(Clone, Default)]
struct Declared {
    streams: BTreeMap<String, ApiDeclaration>,
    features: BTreeMap<String, features::ApiFeatureStream>,
    scorers: BTreeMap<String, scorers::ApiScorer>,
}

impl Declared {
    fn of(book: Book) -> Declared {
        Declared {
            streams: (book.streams.into_iter())
                .map(|d| (d.stream.name.clone(), d))
                .collect(),
            features: (book.feature_streams.into_iter())
                .map(|d| (d.feature_stream.name.clone(), d))
                .collect(),
            scorers: (book.scorers.into_iter())
                .map(|d| (d.scorer.name.clone(), d))
                .collect(),
        }
    }

    /// `base` (the config file's) with every declaration here: the configuration they make
    /// together, checked as one.
    fn config(&self, base: &Config) -> Config {
        let mut c = base.clone();
        c.streams
            .extend(self.streams.values().map(|d| d.stream.clone()));
        c.feature_streams
            .extend(self.features.values().map(|d| d.feature_stream.clone()));
        c.scorers
            .extend(self.scorers.values().map(|d| d.scorer.clone()));
        c
    }
}

/// Reads the API's declarations from `dir` (none when the file does not exist).
pub fn load(dir: &Path) -> anyhow::Result<Book> {
    let path = dir.join(FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Book::default()),
        Err(e) => anyhow::bail!("cannot read {}: {e}", path.display()),
    };
    let book: Book = serde_json::from_str(&text).map_err(|e| {
        anyhow::anyhow!(
            "{} (the streams declared over the API) is damaged: {e}; move it away to start \
             without them",
            path.display()
        )
    })?;
    Ok(book)
}

/// Writes the declarations atomically (a temporary file renamed over the old one, synced).
fn save(dir: &Path, declared: &Declared) -> anyhow::Result<()> {
    use std::io::Write;
    let book = Book {
        version: 1,
        streams: declared.streams.values().cloned().collect(),
        feature_streams: declared.features.values().cloned().collect(),
        scorers: declared.scorers.values().cloned().collect(),
    };
    let bytes = serde_json::to_vec_pretty(&book)?;
    let (path, tmp) = (dir.join(FILE), dir.join(format!(".{FILE}.tmp")));
    let io = |what: &str, p: &Path| format!("cannot {what} {}", p.display());
    {
        let mut f = std::fs::File::create(&tmp)
            .map_err(|e| anyhow::anyhow!("{}: {e}", io("create", &tmp)))?;
        f.write_all(&bytes)
            .and_then(|_| f.sync_all())
            .map_err(|e| anyhow::anyhow!("{}: {e}", io("write", &tmp)))?;
    }
    std::fs::rename(&tmp, &path).map_err(|e| anyhow::anyhow!("{}: {e}", io("replace", &path)))?;
    std::fs::File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| anyhow::anyhow!("{}: {e}", io("sync", dir)))
}

/// What ingest applies between two batches, in order.
pub enum Change {
    /// Start reading a stream (its handle is in the registry already) from `positions`
    /// (partition -> next offset, from its kept checkpoint; empty: the beginning).
    Add {
        handle: Arc<StreamHandle>,
        positions: BTreeMap<i32, i64>,
    },
    /// Stop reading a stream; `drop_state`: delete its checkpoint; `replaced`: a changed
    /// declaration of the name follows (with the kafka store its states are then not
    /// tombstoned: the new declaration's states, under the same keys, replace them, and a
    /// tombstone sent late could delete one of those).
    Remove {
        name: String,
        drop_state: bool,
        replaced: bool,
    },
    /// Start reading a feature stream (in the registry already) from its topic's beginning.
    AddFeatures {
        handle: Arc<crate::state::feature_streams::FeatureStreamHandle>,
    },
    /// Stop reading a feature stream.
    RemoveFeatures { name: String },
}

/// The changes the API made and ingest has not applied yet.
#[derive(Default)]
pub struct Queue(Mutex<Vec<Change>>);

impl Queue {
    fn push(&self, c: Change) {
        crate::lock(&self.0).push(c);
    }
    /// The changes since the last call, oldest first.
    pub fn take(&self) -> Vec<Change> {
        std::mem::take(&mut *crate::lock(&self.0))
    }
}

/// What declarations act with: the service's own parts, which build a stream's handle, ask
/// the cluster and the registry about a declaration, and start and stop scorers
/// (`crate::server`'s `Wiring` is the one implementation). Declared here, below the service,
/// so that this module calls each by name without importing ingest, the scorers or the API.
pub trait Service: Send + Sync {
    /// A stream's handle as the service builds it: the snapshot restored from its checkpoint
    /// when `restore` says so (else empty), metrics declared, its history recorder started,
    /// under its declaration's `epoch`; and the positions the checkpoint holds.
    fn build_stream(
        &self,
        stream: &StreamConfig,
        restore: bool,
        epoch: u64,
    ) -> anyhow::Result<(Arc<StreamHandle>, BTreeMap<i32, i64>)>;
    /// Asks the cluster for the topics a stream reads and writes before it is accepted
    /// (`crate::kafka::topics::check_declared`), and the registry whether it serves the
    /// stream's format: an error names what is missing and how to make it.
    fn check_stream(&self, stream: &StreamConfig) -> Result<(), String>;
    /// The stream's declared fields against its topic's latest messages (`data::look`,
    /// bounded by `data::PER_PARTITION`, `data::MAX_MESSAGES` and `data::TIMEOUT`).
    fn look_at_fields(&self, stream: &StreamConfig) -> data::Looked;
    /// Asks the cluster for the topics of a configuration (a scorer's, a feature stream's).
    fn check_topics(&self, config: &Config) -> Result<(), String>;
    /// Declares a new feature stream's metrics.
    fn declare_feature_stream(&self, f: &crate::config::FeatureStreamConfig);
    /// Starts a checked scorer: its model request, the scorer's thread.
    fn start_scorer(
        &self,
        scorer: &crate::config::scorers::ScorerConfig,
        model: ravel_core::solve::Request,
    ) -> anyhow::Result<scorers::Running>;
    /// A retired scorer leaves the health report.
    fn forget_scorer(&self, name: &str);
}

/// Why a declaration was refused; the API answers it with the status said.
#[derive(Debug, PartialEq)]
pub enum Refusal {
    /// 400: the declaration does not pass the configuration's checks.
    Invalid(String),
    /// 422: declared fields none of the topic's latest events carry (`data`).
    Absent(String),
    /// 404: no stream declared over the API has this name.
    Unknown(String),
    /// 409: a name of the config file, or declarations cannot be kept here.
    Conflict(String),
    /// 500: the declarations could not be written.
    Failed(String),
}

/// Where a stream's (or a scorer's) declaration came from.
#[derive(Debug, Clone, Serialize)]
pub struct Origin<T = StreamConfig> {
    /// `file` or `api`.
    pub origin: &'static str,
    /// API declarations: who and when (Unix ms).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub at_ms: Option<u64>,
    pub declaration: T,
}

impl<T: Clone> Origin<T> {
    /// The config file's declaration (`file`) if it has one, else the API's (`api`: the
    /// declaration, who and when).
    fn of(file: Option<&T>, api: Option<(&T, &str, u64)>) -> Option<Origin<T>> {
        match (file, api) {
            (Some(f), _) => Some(Origin::file(f.clone())),
            (None, Some((d, by, at_ms))) => Some(Origin::api(d.clone(), by, at_ms)),
            (None, None) => None,
        }
    }
}

impl<T> Origin<T> {
    /// A declaration of the config file.
    fn file(declaration: T) -> Origin<T> {
        Origin {
            origin: "file",
            by: None,
            at_ms: None,
            declaration,
        }
    }
    /// A declaration made over the API by `by` at `at_ms`.
    fn api(declaration: T, by: &str, at_ms: u64) -> Origin<T> {
        Origin {
            origin: "api",
            by: Some(by.to_string()),
            at_ms: Some(at_ms),
            declaration,
        }
    }
}

/// What a PUT did.
#[derive(Debug, PartialEq)]
pub enum Put {
    Created,
    /// A changed declaration: the stream starts afresh.
    Replaced,
    /// The same declaration as now: nothing changed.
    Unchanged,
}

impl Put {
    /// A new declaration, or one that `replaced` another.
    fn of(replaced: bool) -> Put {
        if replaced {
            Put::Replaced
        } else {
            Put::Created
        }
    }
}

/// The service's declarations: the file's (fixed) and the API's (changing, persisted).
pub struct Declarations {
    /// The configuration the service started with (the file's streams, the demo's).
    base: Config,
    /// The API's declarations; the lock also orders concurrent changes.
    declared: Mutex<Declared>,
    keep: Keep,
    streams: Arc<Streams>,
    /// The service's parts that build and check what is declared.
    service: Arc<dyn Service>,
    queue: Arc<Queue>,
    /// The scorers declared over the API that run (`scorers`).
    running: Mutex<BTreeMap<String, scorers::Running>>,
    /// The feature streams the API reads (`features`).
    feature_streams: Arc<crate::state::feature_streams::FeatureStreams>,
    /// Records of the state topic this replica could not adopt (`sync`), each logged once.
    refused: Mutex<BTreeSet<Vec<u8>>>,
}

/// What the service gives `Declarations` to act with (`server`).
pub struct Parts {
    pub streams: Arc<Streams>,
    pub feature_streams: Arc<crate::state::feature_streams::FeatureStreams>,
    pub service: Arc<dyn Service>,
    /// With the kafka store: the state topic's declaration records.
    pub log: Option<Arc<DeclarationLog>>,
    /// The changes ingest reads between batches.
    pub queue: Arc<Queue>,
}

impl Declarations {
    /// `base` holds the file's streams only; `api` the declarations loaded at start (already
    /// in `streams`).
    pub fn new(base: Config, book: Book, parts: Parts) -> Declarations {
        let keep = match (parts.log, base.state.dir()) {
            (Some(log), _) => Keep::Log(log),
            (None, Some(dir)) => Keep::File(dir),
            (None, None) => Keep::Nowhere,
        };
        Declarations {
            keep,
            declared: Mutex::new(Declared::of(book)),
            running: Mutex::new(BTreeMap::new()),
            feature_streams: parts.feature_streams,
            service: parts.service,
            base,
            streams: parts.streams,
            queue: parts.queue,
            refused: Mutex::new(BTreeSet::new()),
        }
    }

    /// The names the config file declares, over both kinds.
    fn file_names(&self) -> BTreeSet<&str> {
        self.base
            .streams
            .iter()
            .map(|s| s.name.as_str())
            .chain(self.base.feature_streams.iter().map(|f| f.name.as_str()))
            .collect()
    }

    /// Where the declaration of stream `name` came from (None: no such stream).
    pub fn origin(&self, name: &str) -> Option<Origin> {
        let declared = crate::lock(&self.declared);
        let api = declared.streams.get(name);
        Origin::of(
            self.base.stream(name),
            api.map(|d| (&d.stream, &*d.by, d.at_ms)),
        )
    }

    /// Why declarations cannot be made here, if they cannot.
    fn unavailable(&self) -> Option<Refusal> {
        match self.keep {
            Keep::Nowhere if self.base.state.store == StoreKind::Kafka => Some(Refusal::Conflict(
                "streams and scorers declared over the API are kept in the state topic, \
                     which this replica cannot write: see its log at start"
                    .into(),
            )),
            Keep::Nowhere => Some(Refusal::Conflict(
                "streams and scorers declared over the API are kept in state.dir so that a \
                 restart keeps them: set state.dir"
                    .into(),
            )),
            _ => None,
        }
    }

    /// Declares (or changes) stream `name` from the JSON table `body`; `by` is who asks. Its
    /// fields are checked against its topic's latest messages (`data`): absent ones refuse it
    /// unless `accept_absent`; the check comes with a declaration made.
    pub fn put(
        &self,
        name: &str,
        body: &[u8],
        by: &str,
        accept_absent: bool,
    ) -> Result<(Put, Option<data::FieldsChecked>), Refusal> {
        if let Some(r) = self.unavailable() {
            return Err(r);
        }
        if self.file_names().contains(name) {
            return Err(Refusal::Conflict(format!(
                "stream '{name}' is declared in the config file; change it there (a name is \
                 declared in one place)"
            )));
        }
        let stream = parse(name, body)?;
        let mut declared = crate::lock(&self.declared);
        let old = declared.streams.get(name).map(|d| d.stream.clone());
        if old.as_ref() == Some(&stream) {
            return Ok((Put::Unchanged, None));
        }
        if old.is_some() {
            unscored(&self.base, &declared, name, "changed")?;
        }
        let decl = ApiDeclaration {
            stream: stream.clone(),
            by: by.to_string(),
            at_ms: crate::now_ms(),
            epoch: self.epoch_of(name, &stream, old.is_some()),
        };
        let mut next = declared.clone();
        next.streams.insert(name.to_string(), decl.clone());
        next.config(&self.base)
            .check()
            .map_err(|e| Refusal::Invalid(format!("{e:#}")))?;
        // Before the topics' check, which may create the dead-letter topic.
        let fields = data::judge(&stream, self.service.look_at_fields(&stream), accept_absent)
            .map_err(Refusal::Absent)?;
        if old.as_ref().map(|o| (o.topic(), o.format)) != Some((stream.topic(), stream.format)) {
            self.service
                .check_stream(&stream)
                .map_err(Refusal::Invalid)?;
        }
        // A new stream resumes from a kept checkpoint; a changed one starts afresh.
        let (handle, positions) = self
            .service
            .build_stream(&stream, old.is_none(), decl.epoch)
            .map_err(|e| Refusal::Conflict(format!("{e:#}")))?;
        if let Err(e) = self.adopt(&mut declared, next, "stream", name, &decl) {
            // Never served: its history recorder stops.
            handle.retire();
            return Err(e);
        }
        tracing::info!(
            who = %by, action = if old.is_some() { "change" } else { "declare" },
            stream = %name,
            declaration = %serde_json::to_string(&decl.stream).unwrap_or_default(),
            "stream declared over the API"
        );
        if !fields.absent.is_empty() {
            tracing::warn!(stream = %name, "{}", fields.note);
        }
        self.register(handle, positions, old.is_some());
        Ok((Put::of(old.is_some()), Some(fields)))
    }

    /// The epoch of a new declaration of stream `name`: with the kafka store, the one it had
    /// when it was retired with its state kept, if it is declared again the same (its states
    /// are restored); else a new one.
    fn epoch_of(&self, name: &str, stream: &StreamConfig, replaced: bool) -> u64 {
        let fresh = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64);
        let Keep::Log(log) = &self.keep else {
            return fresh;
        };
        if replaced {
            return fresh;
        }
        let key = crate::store::kafka::declared::key("stream", name);
        log.records()
            .get(&key)
            .and_then(|v| serde_json::from_slice::<Logged<ApiDeclaration>>(v).ok())
            .filter(|l| l.retired && l.declaration.stream == *stream)
            .map_or(fresh, |l| l.declaration.epoch)
    }

    /// Serves a built stream and hands it to ingest (after its older declaration, `replaced`).
    fn register(&self, handle: Arc<StreamHandle>, positions: BTreeMap<i32, i64>, replaced: bool) {
        let name = handle.name().to_string();
        if let Some(previous) = self.streams.insert(handle.clone()) {
            previous.retire();
        }
        if replaced {
            self.queue.push(Change::Remove {
                name,
                drop_state: true,
                replaced: true,
            });
        }
        self.queue.push(Change::Add { handle, positions });
    }

    /// Stops serving stream `name` and tells ingest to stop reading it.
    fn unregister(&self, name: &str, drop_state: bool) {
        if let Some(h) = self.streams.remove(name) {
            h.retire();
        }
        self.queue.push(Change::Remove {
            name: name.to_string(),
            drop_state,
            replaced: false,
        });
    }

    /// Retires stream `name`, keeping its checkpoint or deleting it (`drop_state`).
    pub fn delete(&self, name: &str, drop_state: bool, by: &str) -> Result<(), Refusal> {
        if self.file_names().contains(name) {
            return Err(Refusal::Conflict(format!(
                "stream '{name}' is declared in the config file; remove it there"
            )));
        }
        let mut declared = crate::lock(&self.declared);
        let Some(old) = declared.streams.get(name).cloned() else {
            return Err(Refusal::Unknown(format!(
                "no stream named '{name}' was declared over the API; GET /v1/streams lists the streams"
            )));
        };
        unscored(&self.base, &declared, name, "retired")?;
        let mut next = declared.clone();
        next.streams.remove(name);
        let logged = Logged {
            declaration: &old,
            retired: true,
        };
        self.persist(&next, "stream", name, (!drop_state).then_some(&logged))?;
        *declared = next;
        tracing::info!(
            who = %by, action = "retire", stream = %name,
            state = if drop_state { "dropped" } else { "kept" },
            "stream retired over the API"
        );
        self.unregister(name, drop_state);
        Ok(())
    }
}

/// A stream scorers score with (the file's or the API's) is not changed or retired under
/// them.
fn unscored(base: &Config, declared: &Declared, name: &str, what: &str) -> Result<(), Refusal> {
    let by: Vec<&str> = (base.scorers.iter())
        .chain(declared.scorers.values().map(|d| &d.scorer))
        .filter(|s| s.stream == name)
        .map(|s| s.name.as_str())
        .collect();
    if by.is_empty() {
        return Ok(());
    }
    Err(Refusal::Conflict(format!(
        "stream '{name}' cannot be {what} while scorer(s) {} score with it: retire them first \
         (DELETE /v1/scorers/{{name}})",
        by.join(", ")
    )))
}

/// The declaration of stream `name` from a JSON table, read as the config file's
/// `[[streams]]` tables are (the `config` crate, errors in words by `config::explain`). A
/// `name` in the body must be the path's.
pub fn parse(name: &str, body: &[u8]) -> Result<StreamConfig, Refusal> {
    from_table(&named(
        "stream",
        r#"{"topic": "sales", "features": ["sqft", "rooms"], "target": "price"}"#,
        name,
        body,
    )?)
}

/// The JSON table `body` of a `kind` (`stream`, `scorer`) with its `name` the path's (or
/// refused, the message showing `example`).
fn named(kind: &str, example: &str, name: &str, body: &[u8]) -> Result<serde_json::Value, Refusal> {
    let mut value: serde_json::Value = serde_json::from_slice(body).map_err(|e| {
        Refusal::Invalid(format!(
            "the body is not JSON ({e}): send the {kind}'s table as a JSON object, e.g. \
             {example}"
        ))
    })?;
    let Some(table) = value.as_object_mut() else {
        return Err(Refusal::Invalid(format!(
            "the body must be a JSON object: the {kind}'s table, as in [[{kind}s]] of the \
             config file"
        )));
    };
    match table.get("name") {
        None => {
            table.insert("name".into(), name.into());
        }
        Some(serde_json::Value::String(n)) if n == name => {}
        Some(other) => {
            return Err(Refusal::Invalid(format!(
                "name: the body says {other} but the path says \"{name}\"; leave name out of \
                 the body or make them the same"
            )));
        }
    }
    if !crate::config::valid_name(name) {
        return Err(Refusal::Invalid(format!(
            "{kind} name '{name}' must be non-empty and use only letters, digits, '-', '_' or '.'"
        )));
    }
    Ok(value)
}

/// A table of the config file (`[[streams]]`, `[[scorers]]`) read from JSON by the `config`
/// crate, errors in words by `config::explain`.
fn from_table<T: serde::de::DeserializeOwned>(value: &serde_json::Value) -> Result<T, Refusal> {
    config::Config::builder()
        .add_source(config::File::from_str(
            &value.to_string(),
            config::FileFormat::Json,
        ))
        .build()
        .and_then(|c| c.try_deserialize::<T>())
        .map_err(|e| Refusal::Invalid(crate::config::explain::explain(&e)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn invalid(body: &str) -> String {
        match parse("s", body.as_bytes()) {
            Err(Refusal::Invalid(m)) => m,
            other => panic!("{body}: {other:?}"),
        }
    }

    #[test]
    fn a_declaration_reads_as_the_file_and_bad_keys_are_named() {
        let s = parse(
            "s",
            br#"{"topic": "t.s", "features": ["a", "b"], "target": "y", "cv": {"folds": 3}}"#,
        )
        .unwrap();
        assert_eq!(
            (s.name.as_str(), s.topic().as_str(), s.p()),
            ("s", "t.s", 2)
        );
        assert_eq!(s.cv.unwrap().folds, 3);
        let m = invalid(r#"{"features": 3, "taks": "regression"}"#);
        assert!(
            m.contains("taks") && m.contains("did you mean \"task\""),
            "{m}"
        );
        let m = invalid(r#"{"features": 3, "task": "regresion"}"#);
        assert!(m.contains("task") && m.contains("regression"), "{m}");
        let m = invalid(r#"{"features": 3, "name": "other"}"#);
        assert!(m.starts_with("name:"), "{m}");
        assert!(invalid("[1]").contains("JSON object"));
        assert!(invalid("{").contains("not JSON"));
        assert!(invalid(r#"{"topic": "t"}"#).contains("features"));
    }
}
