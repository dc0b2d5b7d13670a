//! Observation streams on the ingest thread: each message is decoded and validated into the
//! pending rows of its part as it is read, and the rows gathered in one batch are folded into
//! each part's working statistics with one `update_batch`, after which the stream publishes
//! its view and its gauges. Kept apart from the Kafka loop because this is where rows become
//! statistics.
//!
//! Parts: with the `dir` store a stream has one part (`ALL`) whose statistics cover every
//! partition in arrival order, exactly the single-stream schedule. With the `kafka` store each
//! partition is a part, because partitions move between replicas with their statistics
//! (`crate::store::kafka`); the stream's view is the merge of its parts and of the states other
//! replicas published for the partitions they own, in partition order (so every replica
//! computes the same view from the same states). For plain averages the merge is exact
//! (count-weighted); with forgetting each partition forgets over its own rows and the view
//! weighs the partitions by the rows they have seen.
//!
//! Cross-validation folds (`cv.folds = K`): a part keeps K fold statistics beside its own
//! (`ravel_core::stats::FoldSet`); `accept` gives each decoded row its fold from its Kafka
//! coordinates (`cv`), `fold` folds the batch into both with the same weights, and
//! `view` merges the parts' folds as it merges their statistics. A part whose saved state has
//! no usable folds starts them empty (logged), and CV answers then say the folds hold fewer
//! rows than the stream.
//!
//! Freshness is measured from here, because this is where rows become visible: each message's
//! Kafka timestamp is kept with its pending rows; the newest becomes the snapshot's `as_of`,
//! and once the snapshot is published each message's age is observed in
//! `ravel_ingest_freshness_seconds` (`super::freshness`: what clock skew does to an age).

pub mod cv;
mod restore;
pub mod windows;

use super::freshness::observe_freshness;
use crate::codec::Decoded;
use crate::codec::decoder::no_payload;
use crate::codec::format;
use crate::dead_letters::dlq::DeadLetters;
use crate::dead_letters::rejections::Warnings;
use crate::kafka::value_schema_id;
use crate::metrics::Metrics;
use crate::state::quality::PartQuality;
use crate::state::streams::{FoldSet, PartInfo, Snapshot, Stats, StreamHandle, Windows};
use crate::store::kafka::{SavedBuckets, StateReader};
use rdkafka::message::{BorrowedMessage, Message};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Instant, SystemTime, UNIX_EPOCH};
use windows::{NO_TIMESTAMP, fold_windows, window_refusals};

/// The end of a stream's field sample (`crate::state::sightings`): each declared field's and
/// the target's `ravel_ingest_fields_never_seen` (1 when absent from every sampled event),
/// and one warning naming those, with the closest keys.
fn never_seen(
    stream: &str,
    metrics: &Metrics,
    sightings: &crate::state::sightings::Sightings,
    never: &[crate::state::sightings::NeverSeen],
) {
    let (names, target) = sightings.names();
    let label = |n: &crate::state::sightings::NeverSeen| match n.role {
        "target" => format!("target:{}", n.field),
        _ => n.field.clone(),
    };
    for f in names {
        let absent = never.iter().any(|n| n.role == "field" && n.field == *f);
        metrics
            .ingest
            .fields_never_seen
            .with_label_values(&[stream, f])
            .set(i64::from(absent));
    }
    if let Some(t) = target {
        let absent = never.iter().any(|n| n.role == "target");
        metrics
            .ingest
            .fields_never_seen
            .with_label_values(&[stream, &format!("target:{t}")])
            .set(i64::from(absent));
    }
    let summary = sightings.summary();
    if let Some(w) = crate::state::sightings::warning(never, summary.events) {
        let fields: Vec<String> = never.iter().map(label).collect();
        tracing::warn!(stream = %stream, fields = %fields.join(","), "stream '{stream}': {w}");
    }
}

/// The key of a stream's one part with the `dir` store: all its partitions.
pub const ALL: i32 = -1;

/// The statistics of one partition (or of all, `ALL`) and the rows gathered since the last
/// fold.
pub struct Part {
    pub stats: Stats,
    /// The cross-validation folds beside `stats` (`cv.folds`).
    pub folds: Option<FoldSet>,
    x: Vec<f64>,
    y: Vec<f64>,
    /// The fold of each pending row (with folds).
    ids: Vec<u8>,
    pub last_update: Option<SystemTime>,
    /// Kafka timestamps (Unix ms) of the pending messages that carry rows.
    stamps: Vec<i64>,
    /// The newest folded message's timestamp (Unix ms).
    pub as_of_ms: Option<u64>,
    /// Changed (rows or positions) since the last checkpoint.
    pub dirty: bool,
    /// The live quality of this part's rows (`quality`; `state::quality`).
    pub quality: Option<PartQuality>,
    /// The statistics per time bucket (`windows`; the `dir` store's one part).
    pub windows: Option<Windows>,
    /// With windows and the `kafka` store: the bucket records of the partition's last
    /// written (or restored) state, so a checkpoint writes only the buckets changed since
    /// (`store::kafka::buckets`).
    pub saved_buckets: Option<Arc<SavedBuckets>>,
    /// With windows: the Kafka timestamp (Unix ms) of each pending row, `NO_TIMESTAMP` for a
    /// message without one.
    row_stamps: Vec<i64>,
}

impl Part {
    pub fn new(
        stats: Stats,
        folds: Option<FoldSet>,
        last_update: Option<SystemTime>,
        as_of_ms: Option<u64>,
    ) -> Part {
        Part {
            stats,
            folds,
            x: Vec::new(),
            y: Vec::new(),
            ids: Vec::new(),
            last_update,
            stamps: Vec::new(),
            as_of_ms,
            dirty: false,
            quality: None,
            windows: None,
            saved_buckets: None,
            row_stamps: Vec::new(),
        }
    }

    /// This part with the stream's time buckets (`windows`): `restored` (checked against the
    /// configuration when the checkpoint was loaded), else none yet.
    fn windowed(mut self, handle: &StreamHandle, restored: Option<Windows>) -> Part {
        self.windows = handle
            .window_spec
            .map(|spec| restored.unwrap_or_else(|| Windows::new(spec, handle.task(), handle.p())));
        self
    }

    /// This part with the stream's quality tracker (if it keeps one) as part `key`.
    fn tracked(mut self, handle: &StreamHandle, key: i32) -> Part {
        self.quality = handle
            .quality
            .as_ref()
            .and_then(|q| q.start_part(key, handle.p()));
        self
    }
}

/// One stream's side of the loop: the working statistics of its parts and the rows gathered
/// since the last fold.
pub struct StreamIngest {
    pub handle: Arc<StreamHandle>,
    /// Partition -> its part (`kafka` store), or the one part `ALL` (`dir` store).
    pub parts: BTreeMap<i32, Part>,
    per_partition: bool,
    /// The statistics (and folds) of a part with no row yet.
    empty: Stats,
    empty_folds: Option<FoldSet>,
    /// The reader's version last merged into the view.
    pub remote_version: u64,
    warnings: Warnings,
    /// A message was left unread because the service stops while its schema could not be
    /// fetched (`Reason::Unavailable`): nothing after it may move a position.
    pub halted: bool,
    /// When rows refused by the time buckets were last logged (at most one line a minute).
    window_warned: Option<Instant>,
}

impl StreamIngest {
    /// `folds` (a part's, or the whole stream's) as a checkpoint or a state record saves them:
    /// with how the stream assigns rows to them.
    pub fn saved_folds(&self, folds: &Option<FoldSet>) -> Option<crate::store::SavedFolds> {
        folds.clone().map(|folds| crate::store::SavedFolds {
            fold_by: self.handle.folds().1,
            folds,
        })
    }

    /// Starts from the stream's published snapshot (restored from its checkpoint or empty):
    /// with `per_partition` (the `kafka` store) from no part at all, as partitions bring
    /// theirs when they are assigned.
    pub fn new(handle: Arc<StreamHandle>, per_partition: bool) -> Self {
        let snap = handle.snapshot();
        let empty = Stats::new(handle.task(), handle.p(), snap.stats.schedule().clone());
        let (k, _) = handle.folds();
        let empty_folds = (k > 0).then(|| FoldSet::new(handle.task(), handle.p(), k));
        let mut parts = BTreeMap::new();
        if !per_partition {
            // The snapshot's folds were checked against the configuration when it was
            // restored (`checkpoints::load_checkpoints`).
            let folds = if k > 0 {
                snap.folds.clone().or_else(|| empty_folds.clone())
            } else {
                None
            };
            parts.insert(
                ALL,
                Part::new(snap.stats.clone(), folds, snap.last_update, snap.as_of_ms)
                    .tracked(&handle, ALL)
                    .windowed(&handle, snap.windows.first().cloned()),
            );
        }
        StreamIngest {
            parts,
            per_partition,
            empty,
            empty_folds,
            remote_version: u64::MAX,
            warnings: Warnings::default(),
            halted: false,
            window_warned: None,
            handle,
        }
    }

    fn key(&self, partition: i32) -> i32 {
        if self.per_partition { partition } else { ALL }
    }

    /// The part of `partition` (a fresh one if it has none yet).
    fn part(&mut self, partition: i32) -> &mut Part {
        let key = self.key(partition);
        let (empty, folds, handle) = (&self.empty, &self.empty_folds, &self.handle);
        self.parts.entry(key).or_insert_with(|| {
            Part::new(empty.clone(), folds.clone(), None, None)
                .tracked(handle, key)
                .windowed(handle, None)
        })
    }

    /// Marks the part of `partition` as changed (its position moved).
    pub fn touch(&mut self, partition: i32) {
        self.part(partition).dirty = true;
    }

    /// A partition revoked (`kafka` store): its statistics and pending rows go; its new owner
    /// restores them from the state store.
    pub fn remove(&mut self, partition: i32) {
        self.parts.remove(&partition);
        if let Some(q) = &self.handle.quality {
            q.end_part(partition);
        }
    }

    /// The statistics of the `dir` store's one part.
    pub fn whole(&self) -> Option<&Part> {
        self.parts.get(&ALL)
    }

    /// Decodes one message into the pending rows (or takes its rows decoded ahead, `ahead`), or
    /// rejects it. Returns the rows, or `None` when the message was rejected and its copy sent
    /// to the dead-letter topic.
    pub fn accept(
        &mut self,
        metrics: &Metrics,
        dead_letters: Option<&DeadLetters>,
        msg: &BorrowedMessage<'_>,
        ahead: Option<Decoded>,
    ) -> Option<usize> {
        let handle = self.handle.clone();
        let name = handle.name();
        handle.arrivals.message();
        let (k, by) = handle.folds();
        let part = self.part(msg.partition());
        let mut tally = format::Tally::default();
        // A refused message's tally holds only its events read as a tree.
        if let Some(d) = &ahead {
            tally = d.tally;
        }
        let result = match (ahead, msg.payload()) {
            (Some(d), _) => d.result.inspect(|_| {
                // The first message of a partition in a batch (most of them, with many
                // partitions) hands over its buffers instead of a copy.
                if part.x.is_empty() && part.y.is_empty() {
                    (part.x, part.y) = (d.x, d.y);
                } else {
                    part.x.extend_from_slice(&d.x);
                    part.y.extend_from_slice(&d.y);
                }
            }),
            (None, None) => Err(no_payload()),
            (None, Some(payload)) => format::decode_tallied(
                payload,
                &handle.codec.schema(value_schema_id(msg.headers())),
                &mut part.x,
                &mut part.y,
                &mut tally,
            ),
        };
        part.dirty = true;
        if let Some(sightings) = &handle.sightings
            && sightings.wants()
            && result
                .as_ref()
                .err()
                .is_none_or(|r| r.reason == format::Reason::MissingFeature)
            && let Some(seen) = msg.payload().and_then(|b| {
                format::presence(b, &handle.codec.schema(value_schema_id(msg.headers())))
            })
            && let Some(never) = sightings.record(seen)
        {
            never_seen(name, metrics, sightings, &never);
        }
        crate::metrics::events::MessageTallied {
            stream: name,
            ignored_fields: tally.ignored_fields,
            skipped_rows: tally.skipped_rows,
            events_by_tree: tally.events_by_tree,
            without_target: tally.without_target,
        }
        .emit(metrics);
        match result {
            Ok(n) => {
                if k > 0 {
                    let at = cv::Coordinates {
                        topic: msg.topic(),
                        partition: msg.partition(),
                        offset: msg.offset(),
                        key: msg.key(),
                    };
                    cv::assign(&mut part.ids, k, by, &at, n);
                }
                // Messages without a timestamp (message format v0) have no age.
                let ts = msg.timestamp().to_millis().filter(|&ts| ts >= 0);
                if let Some(ts) = ts.filter(|_| n > 0) {
                    part.stamps.push(ts);
                }
                if part.windows.is_some() {
                    let at = part.row_stamps.len() + n;
                    part.row_stamps.resize(at, ts.unwrap_or(NO_TIMESTAMP));
                }
                Some(n)
            }
            Err(rej) if rej.reason == format::Reason::Unavailable => {
                tracing::warn!(stream = %name, partition = msg.partition(), offset = msg.offset(), "{}: the message is left unread", rej.message);
                self.halted = true;
                Some(0)
            }
            Err(rej) => {
                if self.warnings.reject(
                    name,
                    metrics,
                    Some(&handle.arrivals),
                    dead_letters,
                    msg,
                    &rej,
                ) {
                    None
                } else {
                    Some(0)
                }
            }
        }
    }

    /// Folds each part's pending rows in one batch update, then publishes the view when it
    /// changed (rows folded, or newer states of other replicas' partitions in `remote`).
    ///
    /// An error when the statistics refuse a batch whose every message was validated (a bug:
    /// nothing a producer sends gets there): the positions have already moved past those
    /// rows, so the ingest stops rather than go on without them; the statistics stay the last
    /// good ones and nothing after them is checkpointed, so a restart reads the rows again.
    /// `positions`: the stream's topic's positions (`Snapshot::positions`), which the rows
    /// pending here reach once folded.
    pub fn fold(
        &mut self,
        metrics: &Metrics,
        remote: Option<&StateReader>,
        positions: Option<&BTreeMap<i32, i64>>,
    ) -> anyhow::Result<()> {
        let name = self.handle.name().to_string();
        self.warnings.overdue(&name);
        let start = Instant::now();
        let (mut rows, mut new_alarms) = (0usize, 0u64);
        let mut last_alarm_row = None;
        // The timestamps of the messages whose rows become visible with this view.
        let mut stamps: Vec<i64> = Vec::new();
        for (&key, part) in self.parts.iter_mut() {
            if part.y.is_empty() {
                part.stamps.clear();
                continue;
            }
            let batch = part.y.len();
            let alarms_before = part.stats.drift_status().alarms;
            // With several parts the view is not this part, so keep what to go back to.
            let before = (key != ALL).then(|| (part.stats.clone(), part.folds.clone()));
            let p = self.handle.p();
            let (x, y, ids) = (&part.x, &part.y, &part.ids);
            let folds = &mut part.folds;
            // Every pending row was checked as its message was decoded (`format::validate`,
            // to refuse that message alone): the fold does not scan them again.
            let mut fold = |stats: &mut Stats, r: std::ops::Range<usize>| match folds.as_mut() {
                Some(f) => f.update(stats, &x[r.start * p..r.end * p], &y[r.clone()], &ids[r]),
                None => stats.update_batch_validated(&x[r.start * p..r.end * p], &y[r]),
            };
            // Test then train: each row is predicted by the quality model before it is
            // folded (the batch folded in pieces that end where the model is re-extracted).
            let folded = match part.quality.as_mut() {
                Some(q) => {
                    q.scores.clear();
                    q.ttt.push(&mut part.stats, x, y, &mut q.scores, &mut fold)
                }
                None => fold(&mut part.stats, 0..batch),
            };
            match folded {
                // In depth: validation bounds every value (`Reason::Overflow`), so a fold
                // cannot produce an infinite moment; if one ever did, the batch is refused
                // rather than published and saved (a checkpoint would hold `null` and not
                // load): the working statistics go back to the last good ones.
                Ok(())
                    if !part.stats.is_finite()
                        || !part.folds.as_ref().is_none_or(FoldSet::is_finite) =>
                {
                    (part.stats, part.folds) = match before {
                        Some(b) => b,
                        None => {
                            let snap = self.handle.snapshot();
                            (snap.stats.clone(), snap.folds.clone())
                        }
                    };
                    anyhow::bail!(
                        "stream '{name}' (partition {key}): a validated batch of {batch} rows made the statistics non-finite; \
                         ingest stops so that no row is skipped (the last checkpoint holds the statistics before it)"
                    );
                }
                Ok(()) => {
                    if let Some(q) = part.quality.as_mut() {
                        q.record(&part.y);
                    }
                    if let Some(w) = part.windows.as_mut() {
                        let refused = fold_windows(w, &part.row_stamps, &part.x, &part.y, &name)?;
                        window_refusals(metrics, &name, refused, &mut self.window_warned);
                    }
                    let drift = part.stats.drift_status();
                    if drift.alarms > alarms_before {
                        new_alarms += drift.alarms - alarms_before;
                        last_alarm_row = drift.last_alarm_row;
                        tracing::warn!(
                            stream = %name,
                            partition = key,
                            alarms = drift.alarms,
                            row = drift.last_alarm_row.unwrap_or(0),
                            alpha = drift.alpha,
                            "drift detected: the averages now forget faster"
                        );
                    }
                    let now = SystemTime::now();
                    part.last_update = Some(now);
                    // The newest message, never later than now: a timestamp ahead of this
                    // clock (skew, or a producer's own timestamps) must not make the answers
                    // look fresher than they can be, nor hold `as_of` in the future.
                    if let Some(&newest) = part.stamps.iter().max() {
                        let newest = (newest as u64).min(crate::unix_ms(now));
                        part.as_of_ms = Some(part.as_of_ms.map_or(newest, |a| a.max(newest)));
                    }
                    stamps.append(&mut part.stamps);
                    rows += batch;
                }
                // Every message was validated on its own, so this is a bug; the statistics
                // are untouched (update_batch checks before it changes anything).
                Err(e) => anyhow::bail!(
                    "stream '{name}' (partition {key}): a validated batch of {batch} rows was refused by the statistics ({e}); \
                     ingest stops so that no row is skipped (the last checkpoint holds the statistics before it)"
                ),
            }
            part.x.clear();
            part.y.clear();
            part.ids.clear();
            part.stamps.clear();
            part.row_stamps.clear();
        }
        let remote_changed = remote.is_some_and(|r| r.version() != self.remote_version);
        if rows == 0 && !remote_changed {
            return Ok(());
        }
        if let Some(r) = remote {
            self.remote_version = r.version();
        }
        let snap = self.view(remote, positions);
        let event = crate::metrics::events::BatchFolded {
            stream: &name,
            rows,
            seconds: start.elapsed().as_secs_f64(),
            n: snap.stats.n(),
            alpha: snap.stats.current_alpha(),
            effective_sample_size: snap.stats.drift_status().effective_sample_size,
            as_of_ms: snap.as_of_ms,
            last_update_s: snap.last_update.map(|t| {
                t.duration_since(UNIX_EPOCH)
                    .map(|d| d.as_secs_f64())
                    .unwrap_or(0.0)
            }),
            new_alarms,
            last_alarm_row,
        };
        self.handle.publish(snap);
        observe_freshness(metrics, &name, &stamps);
        event.emit(metrics);
        Ok(())
    }

    /// The stream as readers see it: the `dir` store's one part, or the merge of the parts
    /// here and the latest states of the others in `remote`, in partition order.
    pub fn view(
        &self,
        remote: Option<&StateReader>,
        positions: Option<&BTreeMap<i32, i64>>,
    ) -> Snapshot {
        if let Some(all) = self.parts.get(&ALL) {
            return Snapshot::whole(all.stats.clone(), all.last_update, all.as_of_ms)
                .with_positions(positions.cloned().unwrap_or_default())
                .with_folds(all.folds.clone())
                .with_windows(all.windows.clone().into_iter().collect());
        }
        type Piece<'a> = (
            PartInfo,
            std::borrow::Cow<'a, Stats>,
            Option<std::borrow::Cow<'a, FoldSet>>,
            Option<Windows>,
        );
        let name = self.handle.name();
        let mut pieces: BTreeMap<i32, Piece<'_>> = BTreeMap::new();
        for (&p, part) in &self.parts {
            let info = PartInfo {
                partition: p,
                n: part.stats.n(),
                source: "live",
                last_update: part.last_update,
                as_of_ms: part.as_of_ms,
                writer: None,
            };
            let folds = part.folds.as_ref().map(std::borrow::Cow::Borrowed);
            pieces.insert(
                p,
                (
                    info,
                    std::borrow::Cow::Borrowed(&part.stats),
                    folds,
                    part.windows.clone(),
                ),
            );
        }
        let remote_states = remote.map(|r| r.of_stream(name)).unwrap_or_default();
        for s in &remote_states {
            // Owned here, or written under an earlier declaration of the name (`declared`).
            if pieces.contains_key(&s.partition) || s.epoch != self.handle.epoch {
                continue;
            }
            if s.topic != self.handle.topic
                || s.stats.task() != self.handle.task()
                || s.stats.p() != self.handle.p()
                || s.stats.schedule().to_string() != self.empty.schedule().to_string()
            {
                tracing::warn!(
                    stream = %name, partition = s.partition, writer = %s.writer,
                    "a state in the state topic does not match this stream's configuration (topic, task, p, alpha); left out of the view"
                );
                continue;
            }
            let info = PartInfo {
                partition: s.partition,
                n: s.stats.n(),
                source: "changelog",
                last_update: s.last_update(),
                as_of_ms: s.as_of_ms,
                writer: Some(s.writer.clone()),
            };
            let folds = self.usable_folds(s).ok().map(std::borrow::Cow::Owned);
            // A state without usable buckets leaves its rows out of every window: the
            // partition's new owner starts its buckets empty too (`restored_windows`).
            let windows = self.usable_windows(s).ok();
            pieces.insert(
                s.partition,
                (info, std::borrow::Cow::Borrowed(&s.stats), folds, windows),
            );
        }
        let mut stats = self.empty.clone();
        // A piece without usable folds leaves them out: the folds then hold fewer rows than
        // the view, and a CV answer says so (`cross_validate_folds`).
        let mut folds = self.empty_folds.clone();
        let mut parts = Vec::with_capacity(pieces.len());
        let mut windows = Vec::new();
        for (_, (info, st, piece_folds, piece_windows)) in pieces {
            if let (Some(f), Some(pf)) = (folds.as_mut(), piece_folds.as_deref())
                && let Err(e) = f.merge(&stats, pf, &st)
            {
                tracing::error!(stream = %name, partition = info.partition, error = %e, "cannot merge a partition's folds");
            }
            if let Err(e) = stats.merge(&st) {
                tracing::error!(stream = %name, partition = info.partition, error = %e, "cannot merge a partition's statistics");
                continue;
            }
            windows.extend(piece_windows);
            parts.push(info);
        }
        // Each merged partition's position: this replica's own, or the one its state was
        // published with.
        let positions = parts
            .iter()
            .filter_map(|i| {
                let next = match i.source {
                    "live" => positions.and_then(|m| m.get(&i.partition).copied()),
                    _ => remote_states
                        .iter()
                        .find(|s| s.partition == i.partition)
                        .map(|s| s.next_offset),
                };
                next.map(|o| (i.partition, o))
            })
            .collect();
        Snapshot {
            positions,
            last_update: parts.iter().filter_map(|p| p.last_update).max(),
            as_of_ms: parts.iter().filter_map(|p| p.as_of_ms).max(),
            stats,
            parts,
            folds,
            windows,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::StreamConfig;

    /// Issue 10 item 5: rows that reach the fold without passing validation (a bug, never a
    /// producer's message) stop the ingest with an error instead of being dropped after the
    /// positions moved past them, and the statistics stay the last good ones.
    #[test]
    fn a_batch_the_statistics_refuse_stops_the_fold_and_changes_nothing() {
        let config: StreamConfig =
            toml::from_str("name = \"s\"\ntopic = \"t\"\nfeatures = 2\n").unwrap();
        let empty = Stats::new(config.task, 2, ravel_core::stats::AlphaSchedule::Plain);
        let history = crate::config::history::HistoryConfig::default()
            .resolve(None, 2)
            .unwrap();
        let handle = Arc::new(
            StreamHandle::new(config, Snapshot::whole(empty, None, None), history).unwrap(),
        );
        let metrics = Metrics::new();
        let mut s = StreamIngest::new(handle.clone(), false);
        let part = s.parts.get_mut(&ALL).unwrap();
        part.x.extend([1.0, 2.0, 3.0, 4.0]);
        part.y.extend([1.0, 2.0]);
        s.fold(&metrics, None, None).unwrap();
        assert_eq!(handle.snapshot().stats.n(), 2);
        for bad in [f64::NAN, 1e200] {
            let part = s.parts.get_mut(&ALL).unwrap();
            part.x.extend([5.0, bad]);
            part.y.push(3.0);
            let e = s.fold(&metrics, None, None).unwrap_err().to_string();
            assert!(e.contains("ingest stops") && e.contains("'s'"), "{e}");
            assert_eq!(s.whole().unwrap().stats.n(), 2);
            assert_eq!(handle.snapshot().stats.n(), 2);
            let part = s.parts.get_mut(&ALL).unwrap();
            part.x.clear();
            part.y.clear();
        }
    }
}
