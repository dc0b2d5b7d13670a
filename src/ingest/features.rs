//! Feature-stream dispatch on the ingest thread: each feature-stream message is decoded
//! (`feature_format`) and applied to the stream's running selection (`Substitution`: OS or
//! Asy-OS) as it is read, since each is a whole column (O(n s) work); large columns are
//! decoded ahead on another thread (`ingest::ahead`) while earlier ones are applied. After each
//! batch, and every `PUBLISH_EVERY` within a long one, every changed stream publishes its
//! `FeatureSnapshot` for readers (`crate::state::feature_streams`).
//! This is the writer's side of a feature stream; the reader's side imports nothing of it.
//!
//! Features are identified by name: a name gets the next index the first time it arrives and
//! keeps it, so a returning feature is the same one (it is updated in place if retained) and a
//! pass ends when the stream's first feature comes back (`features::PassLog`).
//!
//! Labels: the first labels message starts the selection; the same labels again change
//! nothing; different labels replace the old ones while no feature has arrived, and are refused
//! (`labels_conflict`) afterwards, since every retained weight was fitted to the old ones.
//! Features before any labels are refused (`no_labels`).
//!
//! Wide streams (`wide = true`) also keep every applied column, sparse (`state::wide_columns`),
//! within their share of `limits.max_memory`: a column that would not fit is refused whole
//! (`memory_limit`), before the selection sees it.

use crate::codec::decoder::no_payload;
use crate::codec::feature_format::{self, FeatureMessage};
use crate::dead_letters::dlq::DeadLetters;
use crate::dead_letters::rejections::Warnings;
use crate::metrics::Metrics;
use crate::reason::{Reason, Rejection};
use crate::state::feature_streams::{FeatureSnapshot, FeatureStreamHandle, RecentRejection};
use crate::state::wide_columns::{Column, WideColumns, WideSnapshot};
use ravel_core::features::{FeatureError, Labels, SelectionSnapshot, Substitution};
use ravel_core::memory::ByteSize;
use rdkafka::message::{BorrowedMessage, Message};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;
use std::time::SystemTime;

/// How often a changed feature stream publishes its snapshot while a batch goes on (ingest
/// publishes after every batch too): readers see a column applied within about this long,
/// and a snapshot (a copy of the s n retained values) costs at most 1/PUBLISH_EVERY copies a
/// second, not one per column.
pub const PUBLISH_EVERY: std::time::Duration = std::time::Duration::from_millis(10);

/// Rejections kept in the snapshot (the labels endpoint finds its own message's there).
const RECENT_REJECTIONS: usize = 32;

/// What an applied message did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// Labels started (or, before any feature, restarted) the selection.
    Labels,
    /// The labels the selection already has: nothing changed.
    SameLabels,
    Feature,
}

#[derive(Debug)]
pub enum ApplyError {
    /// The message is refused; nothing changed.
    Rejected(Rejection),
    /// An Asy-OS worker is gone: the selection cannot go on.
    Failed(FeatureError),
}

fn rejected<T>(reason: Reason, message: impl Into<String>) -> Result<T, ApplyError> {
    Err(ApplyError::Rejected(Rejection {
        reason,
        message: message.into(),
    }))
}

/// Ingest's side of one feature stream.
pub struct LiveFeatureStream {
    pub handle: Arc<FeatureStreamHandle>,
    selection: Option<Substitution>,
    /// Feature name -> index, in order of first arrival.
    index: HashMap<String, usize>,
    features_applied: u64,
    offsets: BTreeMap<i32, i64>,
    recent: VecDeque<RecentRejection>,
    last_update: Option<SystemTime>,
    /// The selection changed since the last publish; anything did.
    selection_changed: bool,
    dirty: bool,
    published: Option<Arc<SelectionSnapshot>>,
    substitutions_counted: u64,
    /// `wide = true`: every applied column, sparse (None before labels or when not wide).
    wide: Option<WideColumns>,
    wide_changed: bool,
    published_wide: Option<Arc<WideSnapshot>>,
}

impl LiveFeatureStream {
    pub fn new(handle: Arc<FeatureStreamHandle>) -> Self {
        LiveFeatureStream {
            handle,
            selection: None,
            index: HashMap::new(),
            features_applied: 0,
            offsets: BTreeMap::new(),
            recent: VecDeque::new(),
            last_update: None,
            selection_changed: false,
            dirty: false,
            published: None,
            substitutions_counted: 0,
            wide: None,
            wide_changed: false,
            published_wide: None,
        }
    }

    /// Applies one decoded message; a refused one changes nothing.
    pub fn apply(&mut self, msg: FeatureMessage) -> Result<Applied, ApplyError> {
        let config = &self.handle.config;
        let applied = match msg {
            FeatureMessage::Labels(y) => {
                let wide_y = config.wide.then(|| y.clone());
                let labels = match Labels::new(y, config.loss) {
                    Ok(l) => l,
                    Err(e) => return rejected(Reason::Label, e.to_string()),
                };
                if let Some(sel) = &self.selection {
                    if *sel.labels() == labels {
                        return Ok(Applied::SameLabels);
                    }
                    if self.features_applied > 0 {
                        return rejected(
                            Reason::LabelsConflict,
                            format!(
                                "these labels differ from those the {} features so far were selected with; \
                                 a feature stream keeps its labels once features arrived (use a new stream or topic)",
                                self.features_applied
                            ),
                        );
                    }
                }
                // Replacing labels before any feature: the old selection (threads) goes first.
                self.selection = None;
                self.selection = Some(
                    Substitution::start(labels, &config.params(), config.workers)
                        .map_err(ApplyError::Failed)?,
                );
                self.index.clear();
                self.wide = wide_y.map(|y| WideColumns::new(y, self.handle.wide_budget));
                self.wide_changed = true;
                Applied::Labels
            }
            FeatureMessage::Feature { name, values } => {
                let Some(sel) = &mut self.selection else {
                    return rejected(
                        Reason::NoLabels,
                        format!(
                            "feature '{name}' arrived before the labels; send {{\"labels\": [...]}} first \
                             (on the topic or PUT /v1/feature-streams/{}/labels)",
                            config.name
                        ),
                    );
                };
                let index = self.index.get(&name).copied().unwrap_or(self.index.len());
                // A wide stream keeps the column, or refuses the whole message: the selection
                // and the path cover the same columns.
                let column = match &mut self.wide {
                    None => None,
                    Some(wide) => {
                        let column = Column::from_dense(&name, &values);
                        if let Err(e) = wide.check(index, &column) {
                            wide.refuse();
                            self.wide_changed = true;
                            return rejected(
                                Reason::MemoryLimit,
                                format!(
                                    "feature '{name}' ({} nonzeros) would take wide feature stream '{}' \
                                     to {} with the path's matrix and vectors, over its share of \
                                     limits.max_memory ({}); the message is refused and the \
                                     selection unchanged: raise limits.max_memory, or send fewer \
                                     or sparser columns",
                                    column.rows.len(),
                                    config.name,
                                    ByteSize(e.needed),
                                    ByteSize(e.budget),
                                ),
                            );
                        }
                        Some(column)
                    }
                };
                match sel.push(index, &name, values.into()) {
                    Ok(_) => {}
                    // Decoding checked length and finiteness already; kept for safety.
                    Err(e @ FeatureError::WrongLength { .. }) => {
                        return rejected(Reason::Dimension, e.to_string());
                    }
                    Err(e @ FeatureError::NotFinite { .. }) => {
                        return rejected(Reason::NonFinite, e.to_string());
                    }
                    Err(e) => return Err(ApplyError::Failed(e)),
                }
                self.index.entry(name).or_insert(index);
                if let (Some(wide), Some(column)) = (&mut self.wide, column) {
                    wide.put(index, column);
                    self.wide_changed = true;
                }
                self.features_applied += 1;
                Applied::Feature
            }
        };
        self.selection_changed = true;
        self.last_update = Some(SystemTime::now());
        Ok(applied)
    }

    /// Records that the message at `offset` of `partition` was read, and why it was refused.
    pub fn read(&mut self, partition: i32, offset: i64, rejection: Option<&Rejection>) {
        self.offsets.insert(partition, offset + 1);
        if let Some(r) = rejection {
            if self.recent.len() == RECENT_REJECTIONS {
                self.recent.pop_front();
            }
            self.recent.push_back(RecentRejection {
                partition,
                offset,
                reason: r.reason.as_str(),
                message: r.message.clone(),
            });
        }
        self.dirty = true;
    }

    /// Publishes a new snapshot if anything changed since the last one, and the stream's
    /// gauges. Asy-OS: waits until the workers applied every queued feature.
    pub fn publish(&mut self, metrics: &Metrics) -> Result<(), FeatureError> {
        if !self.dirty && !self.selection_changed {
            return Ok(());
        }
        let name = self.handle.name().to_string();
        if self.selection_changed {
            self.published = match &self.selection {
                Some(sel) => Some(Arc::new(sel.snapshot()?)),
                None => None,
            };
            self.selection_changed = false;
            if let Some(snap) = &self.published {
                let sm = snap.summary();
                metrics
                    .features
                    .feature_stream_labels
                    .with_label_values(&[&name])
                    .set(1);
                metrics
                    .features
                    .feature_stream_loss
                    .with_label_values(&[&name])
                    .set(sm.loss);
                metrics
                    .features
                    .feature_stream_selected
                    .with_label_values(&[&name])
                    .set(sm.selected.len() as i64);
                metrics
                    .features
                    .feature_stream_passes
                    .with_label_values(&[&name])
                    .set(sm.passes as i64);
                let subs = sm.counters.substitutions;
                metrics
                    .features
                    .feature_substitutions
                    .with_label_values(&[&name])
                    .inc_by(subs.saturating_sub(self.substitutions_counted));
                self.substitutions_counted = subs;
                for st in &sm.staleness {
                    let worker = st.worker.to_string();
                    metrics
                        .features
                        .feature_staleness_mean
                        .with_label_values(&[&name, &worker])
                        .set(st.mean);
                    metrics
                        .features
                        .feature_staleness_max
                        .with_label_values(&[&name, &worker])
                        .set(st.max as i64);
                }
            }
        }
        if self.wide_changed {
            self.published_wide = self.wide.as_ref().map(|w| Arc::new(w.snapshot()));
            self.wide_changed = false;
        }
        self.handle.publish(FeatureSnapshot {
            selection: self.published.clone(),
            offsets: self.offsets.clone(),
            features_applied: self.features_applied,
            last_update: self.last_update,
            recent_rejections: self.recent.iter().cloned().collect(),
            wide: self.published_wide.clone(),
        });
        self.dirty = false;
        Ok(())
    }
}

/// One feature stream's side of the loop.
pub struct FeatureIngest {
    pub live: LiveFeatureStream,
    warnings: Warnings,
    /// Set when the selection cannot go on (an Asy-OS worker died): ingest stops.
    pub failed: Option<String>,
}

impl FeatureIngest {
    pub fn new(handle: Arc<FeatureStreamHandle>) -> Self {
        FeatureIngest {
            live: LiveFeatureStream::new(handle),
            warnings: Warnings::default(),
            failed: None,
        }
    }

    /// Decodes one message (unless `decoded` is its decoding, done ahead on another thread:
    /// `ingest::ahead`) and applies it to the selection, or rejects it.
    pub fn accept(
        &mut self,
        metrics: &Metrics,
        dead_letters: Option<&DeadLetters>,
        msg: &BorrowedMessage<'_>,
        decoded: Option<Result<FeatureMessage, Rejection>>,
    ) {
        let handle = self.live.handle.clone();
        let name = handle.name();
        metrics
            .ingest
            .messages_consumed
            .with_label_values(&[name])
            .inc();
        let decoded = match (decoded, msg.payload()) {
            (Some(d), _) => d,
            (None, None) => Err(no_payload()),
            (None, Some(payload)) => feature_format::decode(payload, handle.config.n),
        };
        let result = decoded
            .map_err(ApplyError::Rejected)
            .and_then(|m| self.live.apply(m));
        let rejection = match result {
            Ok(Applied::Feature) => {
                metrics
                    .features
                    .features_processed
                    .with_label_values(&[name])
                    .inc();
                None
            }
            Ok(Applied::Labels) => {
                tracing::info!(stream = %name, n = handle.config.n, offset = msg.offset(), "feature stream: labels received");
                None
            }
            Ok(Applied::SameLabels) => None,
            Err(ApplyError::Rejected(rej)) => {
                let _copied = self
                    .warnings
                    .reject(name, metrics, None, dead_letters, msg, &rej);
                Some(rej)
            }
            Err(ApplyError::Failed(e)) => {
                tracing::error!(stream = %name, error = %e, "feature stream failed");
                self.failed = Some(e.to_string());
                None
            }
        };
        self.live
            .read(msg.partition(), msg.offset(), rejection.as_ref());
    }
}
