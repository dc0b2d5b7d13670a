//! A partition's time buckets (`windows`, issue 47) in the state topic, one record per bucket,
//! so that a checkpoint writes only the buckets changed since the last one (the current one or
//! two, and the buckets a roll-up makes) instead of every bucket of the retention: at p = 100
//! with a week of one-minute buckets, about 80 KB a checkpoint instead of 77 MB.
//!
//! Keys: `<stream>/<partition>#b<start>.<slot>`, slot 0 or 1: every bucket has two slots, and
//! a changed bucket is written into the slot the last written state does not name. The state
//! record, written after its buckets (in the same changelog partition, so read after them),
//! names the slot and version (the writing checkpoint's generation) of every bucket it holds
//! (`BucketIndex`). Compaction keeps the latest record of each slot, so it keeps every record
//! a state names:
//! - a crash after some bucket records and before the state record leaves the previous state
//!   naming the other slots, untouched; the new records are ignored (their slots are written
//!   again at the next checkpoint);
//! - a restore takes each named bucket only if its record is of the named version, and refuses
//!   the whole set otherwise (logged: the windows start empty), never mixing two checkpoints;
//! - once a state is acknowledged, the slots it no longer names (the other slot of each
//!   rewritten bucket; both of a bucket rolled up or past retention) get tombstones, so
//!   compaction drops them.
//!
//! A bucket larger than `state.max_record_bytes` (p of about 300 and more) is chunked as a
//! state is (chunks `<key>#0/<i>` and a manifest under the bucket's key); its slot's chunks are
//! overwritten in place, as the slot itself is.
//!
//! Which buckets changed: a fold replaces a bucket's `Arc` exactly when it changes it
//! (`Windows::shared_buckets`), so the writer keeps the `Arc`s it wrote (`SavedBuckets`, on
//! the partition's part) and writes the buckets whose `Arc` differs. A partition restored from
//! the topic starts from the buckets its state named, so its first checkpoint writes only what
//! changed since.

use super::{Kind, PartitionState, Record, key};
use anyhow::{Context, bail};
use ravel_core::stats::Stats;
use ravel_core::stats::windows::{WindowSpec, Windows};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Weak};

/// The key of a bucket's slot.
pub fn bucket_key(stream: &str, partition: i32, start: i64, slot: u8) -> String {
    format!("{}#b{start}.{slot}", key(stream, partition))
}

/// Whether a key is a bucket's (`<stream>/<partition>#b<start>.<slot>`), not a state's or a
/// chunk's.
pub fn is_bucket_key(k: &str) -> bool {
    match k.split_once('#') {
        Some((_, rest)) => rest.starts_with('b') && !rest.contains('#'),
        None => false,
    }
}

/// One bucket record a state names; stored as an array (start, width, slot, version,
/// chunks), 20-odd bytes, as a state names every bucket of its windows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "EntryArray", into = "EntryArray")]
pub struct IndexEntry {
    pub start_ms: i64,
    pub width_ms: i64,
    pub slot: u8,
    /// The generation of the checkpoint that wrote it (in the record too).
    pub version: u64,
    /// Chunks, 0 when the bucket is one record.
    pub chunks: u32,
}

type EntryArray = (i64, i64, u8, u64, u32);

impl From<EntryArray> for IndexEntry {
    fn from((start_ms, width_ms, slot, version, chunks): EntryArray) -> IndexEntry {
        IndexEntry {
            start_ms,
            width_ms,
            slot,
            version,
            chunks,
        }
    }
}

impl From<IndexEntry> for EntryArray {
    fn from(e: IndexEntry) -> EntryArray {
        (e.start_ms, e.width_ms, e.slot, e.version, e.chunks)
    }
}

/// A state's windows by reference: the spec, the clock, and the bucket records holding them.
pub type BucketIndex = crate::store::WindowIndex<IndexEntry>;

/// The bucket records of the last state written (or restored) of a partition, by start: the
/// next checkpoint writes the buckets whose `Arc` is not the one here (and those due for a
/// refresh, `Refresh`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct SavedBuckets {
    pub entries: BTreeMap<i64, Saved>,
}

/// One bucket record as written.
#[derive(Debug, Clone)]
pub struct Saved {
    pub entry: IndexEntry,
    /// The statistics it holds, by identity only: a `Weak` keeps the `Arc`'s allocation (so
    /// no other bucket can take its address) but not the statistics, so a bucket replaced or
    /// dropped since the last checkpoint takes no memory here.
    pub stats: Weak<Stats>,
    /// Its bytes (chunks included).
    pub bytes: u64,
    /// This writer's bytes written to the changelog partition before it (`RESTORED`: read
    /// from the topic, counted from the first write after).
    pub at: u64,
}

impl PartialEq for Saved {
    fn eq(&self, o: &Saved) -> bool {
        (self.entry, self.bytes, self.at) == (o.entry, o.bytes, o.at)
            && Weak::ptr_eq(&self.stats, &o.stats)
    }
}

impl SavedBuckets {
    /// Bytes of every bucket record named.
    pub fn bytes(&self) -> u64 {
        self.entries.values().map(|s| s.bytes).sum()
    }
}

/// `Saved::at` of a record read from the topic.
pub const RESTORED: u64 = u64::MAX;

/// When unchanged bucket records are written again. A compacted topic keeps them for ever,
/// but a topic that drops its oldest records by size (the embedded broker keeps 5 MB a
/// partition) would drop a bucket record that no change has rewritten while a state still
/// names it: so a record is rewritten once the writer has written `after` bytes to its
/// changelog partition since (`StateWriter` takes four times the bucket bytes its states
/// there name, at least 2 MiB: at most a quarter more bytes written, and on the embedded
/// broker every named record stays within the last few MB), at most `ceil(n / 16)` of a
/// state's n buckets a checkpoint, oldest first, so a refresh is spread over checkpoints.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Refresh {
    /// This writer's bytes written to the changelog partition so far.
    pub sent: u64,
    /// Records older than this many bytes are due.
    pub after: u64,
}

/// A bucket record as read, until a state names it.
#[derive(Debug, Clone)]
pub struct HeldBucket {
    version: u64,
    bytes: u64,
    start_ms: i64,
    width_ms: i64,
    stats: Arc<Stats>,
}

/// What a checkpoint writes for one partition's windows.
pub struct Planned {
    /// The records of the changed buckets, to write before the state.
    pub records: Vec<Record>,
    /// The index the state names.
    pub index: BucketIndex,
    /// The bucket records once the state is acknowledged.
    pub saved: SavedBuckets,
    /// Tombstones for the slots the state no longer names, to write once it is acknowledged.
    pub after: Vec<Record>,
    /// Buckets written (changed since `saved`).
    pub written: usize,
}

/// The tombstones of a slot: its chunks, then the slot's key.
fn slot_tombstones(stream: &str, partition: i32, e: &IndexEntry, out: &mut Vec<Record>) {
    let base = bucket_key(stream, partition, e.start_ms, e.slot);
    for i in 0..e.chunks {
        out.push(Record {
            key: super::chunk_key(&base, 0, i),
            kind: Kind::Chunk,
            value: None,
        });
    }
    out.push(Record {
        key: base,
        kind: Kind::Bucket,
        value: None,
    });
}

/// The records of `windows` for the state of `stream`'s `partition` written at `version`,
/// given the buckets its last written state named (`saved`).
pub fn plan(
    stream: &str,
    partition: i32,
    windows: &Windows,
    saved: Option<&SavedBuckets>,
    version: u64,
    max_record: usize,
    refresh: Refresh,
) -> anyhow::Result<Planned> {
    let empty = SavedBuckets::default();
    let saved = saved.unwrap_or(&empty);
    let at = |s: &Saved| match s.at {
        RESTORED => refresh.sent,
        at => at,
    };
    // The unchanged records due for a refresh, oldest first, at most a sixteenth a time.
    let mut due: Vec<(u64, i64)> = saved
        .entries
        .iter()
        .filter(|(_, s)| refresh.sent.saturating_sub(at(s)) > refresh.after)
        .map(|(&start, s)| (at(s), start))
        .collect();
    due.sort_unstable();
    due.truncate(saved.entries.len().div_ceil(16));
    let due: std::collections::BTreeSet<i64> = due.into_iter().map(|(_, s)| s).collect();
    let (mut records, mut after) = (Vec::new(), Vec::new());
    let mut next = SavedBuckets::default();
    let mut written = 0;
    for (start, width, stats) in windows.shared_buckets() {
        let old = saved.entries.get(&start);
        if let Some(s) = old
            && s.entry.width_ms == width
            && std::ptr::eq(s.stats.as_ptr(), Arc::as_ptr(stats))
            && !due.contains(&start)
        {
            let kept = Saved {
                at: at(s),
                ..s.clone()
            };
            next.entries.insert(start, kept);
            continue;
        }
        let slot = old.map_or(0, |s| 1 - s.entry.slot);
        let bytes = crate::store::BucketRef {
            version,
            start_ms: start,
            width_ms: width,
            stats,
        }
        .encode()?;
        let size = bytes.len() as u64;
        let base = bucket_key(stream, partition, start, slot);
        let (mut rs, manifest) = super::records_of(base, Kind::Bucket, bytes, max_record, 0)?;
        records.append(&mut rs);
        let entry = IndexEntry {
            start_ms: start,
            width_ms: width,
            slot,
            version,
            chunks: manifest.map_or(0, |m| m.chunks),
        };
        if let Some(s) = old {
            slot_tombstones(stream, partition, &s.entry, &mut after);
        }
        let s = Saved {
            entry,
            stats: Arc::downgrade(stats),
            bytes: size,
            at: refresh.sent,
        };
        next.entries.insert(start, s);
        written += 1;
    }
    for (start, s) in &saved.entries {
        if !next.entries.contains_key(start) {
            slot_tombstones(stream, partition, &s.entry, &mut after);
        }
    }
    let index = BucketIndex::of(windows, next.entries.values().map(|s| s.entry).collect());
    Ok(Planned {
        records,
        index,
        saved: next,
        after,
        written,
    })
}

/// Reads a bucket record (its whole value, chunks joined) under `key`.
pub fn decode_bucket(key: &str, bytes: &[u8]) -> anyhow::Result<HeldBucket> {
    let b: crate::store::BucketValue =
        ciborium::from_reader(bytes).with_context(|| format!("bucket record {key}: bad value"))?;
    let start = key
        .rsplit_once("#b")
        .and_then(|(_, s)| s.split_once('.'))
        .and_then(|(s, _)| s.parse::<i64>().ok());
    if start != Some(b.start_ms) {
        bail!("bucket record {key} holds the bucket at {}", b.start_ms);
    }
    if let Err(e) = b.stats.validate() {
        bail!("bucket record {key} holds invalid statistics: {e}");
    }
    Ok(HeldBucket {
        version: b.version,
        bytes: bytes.len() as u64,
        start_ms: b.start_ms,
        width_ms: b.width_ms,
        stats: Arc::new(b.stats),
    })
}

/// The windows a state's index names, from the bucket records read so far, and the records
/// as the partition's next checkpoint starts from them; an error when a named record is
/// missing or of another version (a restore never mixes two checkpoints' buckets).
pub fn assemble(
    state: &PartitionState,
    index: &BucketIndex,
    held: &HashMap<String, HeldBucket>,
) -> Result<(Windows, SavedBuckets), String> {
    let spec = WindowSpec::new(index.bucket_ms, index.keep_ms)?;
    let (task, p) = (state.stats.task(), state.stats.p());
    if index.task != task || index.p != p {
        return Err(format!(
            "the windows are of a {} stream of p = {}, not of a {task} stream of p = {p}",
            index.task, index.p
        ));
    }
    let mut saved = SavedBuckets::default();
    let mut parts = Vec::with_capacity(index.buckets.len());
    for e in &index.buckets {
        if e.slot > 1 {
            return Err(format!(
                "the bucket at {} is in slot {}",
                e.start_ms, e.slot
            ));
        }
        let k = bucket_key(&state.stream, state.partition, e.start_ms, e.slot);
        let Some(h) = held.get(&k) else {
            return Err(format!("the bucket record {k} is missing"));
        };
        if (h.version, h.start_ms, h.width_ms) != (e.version, e.start_ms, e.width_ms) {
            return Err(format!(
                "the bucket record {k} is of version {} (width {} ms), the state names version {} (width {} ms)",
                h.version, h.width_ms, e.version, e.width_ms
            ));
        }
        parts.push((e.start_ms, e.width_ms, h.stats.clone()));
        let s = Saved {
            entry: *e,
            stats: Arc::downgrade(&h.stats),
            bytes: h.bytes,
            at: RESTORED,
        };
        saved.entries.insert(e.start_ms, s);
    }
    let w = Windows::from_shared(spec, task, p, index.now_ms, parts)?;
    Ok((w, saved))
}

#[cfg(test)]
mod tests {
    use super::super::{Assembler, Encoded, VERSION, encode_with_buckets};
    use super::*;
    use ravel_core::stats::windows::{HOUR_MS, MINUTE_MS};

    const T0: i64 = 1_790_006_400_000;

    /// A partition state of p = 3 with windows 1m/7d holding 30 minutes of rows.
    fn state() -> PartitionState {
        let (stats, w) = crate::store::thirty_minutes(T0);
        PartitionState {
            version: VERSION,
            stream: "s".into(),
            topic: "t".into(),
            partition: 2,
            next_offset: 60,
            last_update_ms: None,
            as_of_ms: None,
            writer: "h/1".into(),
            stats,
            folds: None,
            windows: Some(w),
            buckets: None,
            saved: None,
            epoch: 0,
        }
    }

    /// One more row into the windows (and statistics) at `ts`, aged to `now`.
    fn fold_one(s: &mut PartitionState, now: i64, ts: i64, v: f64) {
        let x = [v, 1.0 - v, 0.5];
        s.stats.update_batch(&x, &[v * 2.0]).unwrap();
        s.windows
            .as_mut()
            .unwrap()
            .fold(now, &[ts], &x, &[v * 2.0])
            .unwrap();
        s.next_offset += 1;
    }

    /// Encodes the next checkpoint of `s` the way the writer does: from the bucket records
    /// the last one named, leaving `s.saved` at the new ones.
    fn checkpoint(s: &mut PartitionState, generation: u64, max_record: usize) -> Encoded {
        let never = Refresh {
            sent: 0,
            after: u64::MAX,
        };
        refreshed(s, generation, max_record, never)
    }

    fn refreshed(
        s: &mut PartitionState,
        generation: u64,
        max_record: usize,
        refresh: Refresh,
    ) -> Encoded {
        let e = encode_with_buckets(s, max_record, generation, refresh).unwrap();
        s.saved = e.saved.clone();
        e
    }

    /// The bucket records named, without when this writer wrote them.
    fn named(s: &PartitionState) -> Vec<(IndexEntry, Stats, u64)> {
        s.saved
            .as_ref()
            .unwrap()
            .entries
            .values()
            .map(|b| {
                (
                    b.entry,
                    b.stats.upgrade().unwrap().as_ref().clone(),
                    b.bytes,
                )
            })
            .collect()
    }

    /// The states a reader makes of `log`, in order.
    fn read(log: &[Record]) -> Vec<PartitionState> {
        let mut a = Assembler::default();
        log.iter()
            .filter_map(|r| a.apply(&r.key, r.kind, r.value.as_deref()).unwrap())
            .collect()
    }

    /// What compaction may leave of `log`: the last record of each key, in log order.
    fn compacted(log: &[Record]) -> Vec<Record> {
        let last: HashMap<&str, usize> = log
            .iter()
            .enumerate()
            .map(|(i, r)| (r.key.as_str(), i))
            .collect();
        log.iter()
            .enumerate()
            .filter(|(i, r)| last[r.key.as_str()] == *i)
            .map(|(_, r)| r.clone())
            .collect()
    }

    fn windows_of(s: &PartitionState) -> &Windows {
        s.windows.as_ref().expect("windows restored")
    }

    #[test]
    fn a_checkpoint_writes_only_the_changed_buckets_and_restores_them_all() {
        let mut s = state();
        let buckets = windows_of(&s).len();
        assert_eq!(buckets, 30);
        let first = checkpoint(&mut s, 1, 1 << 20);
        // Every bucket, then the state record naming them.
        assert_eq!(first.buckets_written, buckets);
        assert_eq!(first.records.len(), buckets + 1);
        assert!(
            first.records[..buckets]
                .iter()
                .all(|r| r.kind == Kind::Bucket)
        );
        assert_eq!(first.records[buckets].key, "s/2");
        assert!(first.after.is_empty());
        let mut log = first.records.clone();
        let back = read(&log).pop().unwrap();
        assert_eq!(windows_of(&back), windows_of(&s));
        assert_eq!(back.stats, s.stats);

        // One row into the last minute: one bucket record and the state; the bucket's other
        // slot is tombstoned once the state is acknowledged.
        let now = windows_of(&s).now_ms().unwrap();
        fold_one(&mut s, now, now, 0.3);
        // The record's statistics are not kept alive by the writer once the bucket changed.
        let last_minute = now / MINUTE_MS * MINUTE_MS;
        let kept = &s.saved.as_ref().unwrap().entries[&last_minute].stats;
        assert!(kept.upgrade().is_none());
        let second = checkpoint(&mut s, 2, 1 << 20);
        assert_eq!(second.buckets_written, 1);
        assert_eq!(second.records.len(), 2);
        assert_eq!(second.records[0].key, bucket_key("s", 2, last_minute, 1));
        assert_eq!(
            second
                .after
                .iter()
                .map(|r| r.key.as_str())
                .collect::<Vec<_>>(),
            [bucket_key("s", 2, last_minute, 0)]
        );
        log.extend(second.records.clone());
        log.extend(second.after.clone());
        for l in [log.clone(), compacted(&log)] {
            let back = read(&l).pop().unwrap();
            assert_eq!(windows_of(&back), windows_of(&s));
            assert_eq!(back.next_offset, s.next_offset);
        }

        // A day and an hour later the minutes roll up into the hour they start: the hour's
        // bucket is written (into the other slot of its first minute, whose slot 0 is
        // tombstoned), and the slot each other minute's state names is tombstoned.
        let later = now + 25 * HOUR_MS;
        fold_one(&mut s, later, later, 0.7);
        let third = checkpoint(&mut s, 3, 1 << 20);
        assert_eq!(windows_of(&s).len(), 2, "the hour and the new minute");
        assert_eq!(third.buckets_written, 2);
        assert_eq!(third.after.len(), 30, "{:?}", third.after);
        assert!(third.after.iter().all(|r| r.value.is_none()));
        log.extend(third.records.clone());
        log.extend(third.after.clone());
        for l in [log.clone(), compacted(&log)] {
            let back = read(&l).pop().unwrap();
            assert_eq!(windows_of(&back), windows_of(&s));
            // The restored state starts the next checkpoint from the records it names.
            assert_eq!(named(&back), named(&s));
        }
        // Compaction keeps the two buckets' records, the state and tombstones only.
        let live = compacted(&log)
            .into_iter()
            .filter(|r| r.value.is_some())
            .count();
        assert_eq!(live, 2 + 1);
    }

    /// A checkpoint killed after some of its bucket records and before its state record: a
    /// restore (before or after compaction) is exactly the previous checkpoint, and the next
    /// checkpoint writes its buckets again.
    #[test]
    fn a_crash_between_bucket_records_restores_the_previous_checkpoint() {
        let mut s = state();
        let mut log = checkpoint(&mut s, 1, 1 << 20).records;
        let before = s.clone();
        let now = windows_of(&s).now_ms().unwrap();
        let rows = |s: &mut PartitionState| {
            for (i, m) in [3, 11, 29].into_iter().enumerate() {
                fold_one(s, now, T0 + m * MINUTE_MS + 5, 0.1 * i as f64);
            }
        };
        rows(&mut s);
        let mut torn = s.clone();
        let second = checkpoint(&mut torn, 2, 1 << 20);
        assert_eq!(second.buckets_written, 3);
        // Killed after two of the three bucket records.
        log.extend(second.records[..2].iter().cloned());
        for l in [log.clone(), compacted(&log)] {
            let states = read(&l);
            assert_eq!(states.len(), 1);
            assert_eq!(windows_of(&states[0]), windows_of(&before));
            assert_eq!(states[0].next_offset, before.next_offset);
        }
        // The restarted writer starts from the restored state, reads the three rows again and
        // writes their buckets again, into the same slots (those the restored state does not
        // name).
        let mut restored = read(&compacted(&log)).pop().unwrap();
        rows(&mut restored);
        let again = checkpoint(&mut restored, 4, 1 << 20);
        assert_eq!(again.buckets_written, 3);
        let keys = |rs: &[Record]| -> Vec<String> { rs.iter().map(|r| r.key.clone()).collect() };
        assert_eq!(keys(&again.records[..3]), keys(&second.records[..3]));
        log.extend(again.records);
        let back = read(&compacted(&log)).pop().unwrap();
        assert_eq!(windows_of(&back), windows_of(&s));
    }

    /// A state naming a bucket record that is gone or of another checkpoint restores no
    /// windows (logged), never a mix of two checkpoints' buckets.
    #[test]
    fn a_state_whose_bucket_records_do_not_match_restores_no_windows() {
        let mut s = state();
        let first = checkpoint(&mut s, 1, 1 << 20);
        let mut missing = first.records.clone();
        missing.remove(4);
        let back = read(&missing).pop().unwrap();
        assert!(back.windows.is_none() && back.saved.is_none());
        assert_eq!(back.stats, s.stats);
        // The fifth bucket's slot overwritten by another writer's version.
        let mut other = first.records.clone();
        let mut forged = state();
        forged.saved = None;
        let e = checkpoint(&mut forged, 9, 1 << 20);
        other.insert(30, e.records[4].clone());
        assert!(read(&other).pop().unwrap().windows.is_none());
        // A record keyed as a bucket that holds another bucket is refused.
        let mut a = Assembler::default();
        let r = &first.records[4];
        let err = a
            .apply(&bucket_key("s", 2, T0, 0), Kind::Bucket, r.value.as_deref())
            .unwrap_err();
        assert!(err.to_string().contains("holds the bucket at"), "{err}");
    }

    /// Buckets larger than a record are chunked, restored, rewritten in their other slot and
    /// tombstoned chunk by chunk.
    #[test]
    fn large_buckets_are_chunked_per_slot() {
        let mut s = state();
        let first = checkpoint(&mut s, 1, 150);
        let chunked = first
            .saved
            .as_ref()
            .unwrap()
            .entries
            .values()
            .next()
            .unwrap()
            .entry;
        assert!(chunked.chunks > 1, "{chunked:?}");
        assert!(
            first
                .records
                .iter()
                .all(|r| r.value.as_ref().unwrap().len() <= 150)
        );
        let mut log = first.records.clone();
        assert_eq!(windows_of(&read(&log).pop().unwrap()), windows_of(&s));
        let now = windows_of(&s).now_ms().unwrap();
        fold_one(&mut s, now, T0 + 5, 0.9);
        let second = checkpoint(&mut s, 2, 150);
        assert_eq!(second.buckets_written, 1);
        // The slot it leaves is tombstoned record by record: the first version's chunks and
        // its manifest (the new version may take another number of chunks).
        let left = first.saved.as_ref().unwrap().entries[&T0].entry;
        assert_eq!(second.after.len(), left.chunks as usize + 1);
        assert!(
            second
                .after
                .iter()
                .all(|r| r.key.starts_with(&bucket_key("s", 2, T0, 0)))
        );
        log.extend(second.records);
        log.extend(second.after);
        for l in [log.clone(), compacted(&log)] {
            assert_eq!(windows_of(&read(&l).pop().unwrap()), windows_of(&s));
        }
    }

    /// Unchanged bucket records are written again once the writer has written `after` bytes
    /// to the changelog partition since, a sixteenth of them a checkpoint, oldest first; a
    /// restored state's records count from the first write after the restore.
    #[test]
    fn unchanged_buckets_are_refreshed_a_sixteenth_at_a_time() {
        let mut s = state();
        let at = |sent| Refresh { sent, after: 1000 };
        assert_eq!(refreshed(&mut s, 1, 1 << 20, at(0)).buckets_written, 30);
        // Not yet due.
        assert_eq!(refreshed(&mut s, 2, 1 << 20, at(1000)).buckets_written, 0);
        // Due: two (30 / 16 rounded up) a checkpoint, the oldest first, into their other
        // slots, the slot they leave tombstoned.
        let mut firsts = Vec::new();
        for (i, g) in (3..18).enumerate() {
            let e = refreshed(&mut s, g, 1 << 20, at(1001 + i as u64));
            assert_eq!(e.buckets_written, 2, "checkpoint {g}");
            assert_eq!(e.after.len(), 2);
            firsts.push(e.records[0].key.clone());
        }
        assert_eq!(firsts[0], bucket_key("s", 2, T0, 1));
        assert_eq!(firsts[1], bucket_key("s", 2, T0 + 2 * MINUTE_MS, 1));
        let versions: std::collections::BTreeSet<u64> =
            named(&s).iter().map(|(e, _, _)| e.version).collect();
        assert!(
            versions.iter().all(|&v| v >= 3),
            "every bucket rewritten: {versions:?}"
        );
        assert_eq!(refreshed(&mut s, 18, 1 << 20, at(1020)).buckets_written, 0);
        // A restored state's records are as new at the first write after.
        let log = refreshed(&mut state(), 1, 1 << 20, at(0)).records;
        let mut back = read(&log).pop().unwrap();
        assert_eq!(
            refreshed(&mut back, 2, 1 << 20, at(5000)).buckets_written,
            0
        );
        assert_eq!(
            refreshed(&mut back, 3, 1 << 20, at(6001)).buckets_written,
            2
        );
    }

    #[test]
    fn bucket_keys_are_told_from_state_and_chunk_keys() {
        let k = bucket_key("a.b", 3, -60_000, 1);
        assert_eq!(k, "a.b/3#b-60000.1");
        assert!(is_bucket_key(&k));
        assert!(!is_bucket_key("a.b/3"));
        assert!(!is_bucket_key("a.b/3#17/0"));
        assert!(!is_bucket_key(&format!("{k}#0/2")));
    }
}
