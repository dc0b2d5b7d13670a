//! The file store's time buckets (`windows`, issue 47): one file per version of a bucket in
//! `state.dir/<stream>.buckets/`, named `<start>.<version>.bkt` and never rewritten, so that a
//! checkpoint writes only the buckets changed since the last one (the current minute or two,
//! and the bucket a roll-up makes) instead of every bucket of the retention.
//!
//! The checkpoint names each bucket's file (`FileIndex`); its write goes: the changed buckets'
//! files (each written and synced, then the directory), then the checkpoint itself (atomic,
//! `super::file::write`), then the files no checkpoint names any more are removed. A crash
//! before the checkpoint's rename leaves the previous checkpoint and every file it names
//! intact (the new files are removed by the next checkpoint); a file damaged or of another
//! bucket stops the start with an error naming it, as a damaged checkpoint does. A file is
//! framed as a checkpoint is (magic `RAVELBKT`, version, length, CRC-32, then CBOR).
//!
//! Which buckets changed: a fold replaces a bucket's `Arc` exactly when it changes it
//! (`Windows::shared_buckets`), so the writer keeps the `Arc`s it wrote (`Written`). The first
//! checkpoint after a start writes every bucket once (new files; the loaded ones then go).

use anyhow::{Context, bail};
use ravel_core::stats::Stats;
use ravel_core::stats::windows::{WindowSpec, Windows};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Weak};

const MAGIC: &[u8; 8] = b"RAVELBKT";
const FORMAT: u32 = 1;
const HEADER: usize = 8 + 4 + 8 + 4;

/// One bucket file a checkpoint names: (start, width, version) as an array.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "(i64, i64, u64)", into = "(i64, i64, u64)")]
pub struct FileEntry {
    pub start_ms: i64,
    pub width_ms: i64,
    /// The generation of the checkpoint that wrote it (in its name and in the file).
    pub version: u64,
}

impl From<(i64, i64, u64)> for FileEntry {
    fn from((start_ms, width_ms, version): (i64, i64, u64)) -> FileEntry {
        FileEntry {
            start_ms,
            width_ms,
            version,
        }
    }
}

impl From<FileEntry> for (i64, i64, u64) {
    fn from(e: FileEntry) -> (i64, i64, u64) {
        (e.start_ms, e.width_ms, e.version)
    }
}

/// A checkpoint's windows by reference: the spec, the clock, and the bucket files.
pub type FileIndex = super::WindowIndex<FileEntry>;

/// The bucket files of the last checkpoint written, with the statistics each holds by
/// identity only (a `Weak` keeps the allocation, so no other bucket takes its address, but
/// not the statistics: a bucket replaced since takes no memory here).
#[derive(Debug, Clone, Default)]
pub struct Written {
    entries: BTreeMap<i64, (FileEntry, Weak<Stats>)>,
}

impl Written {
    /// The files `index` names, as a checkpoint loaded them into `windows` (`read`): the
    /// first checkpoint after a start writes only the buckets changed since, not all of them.
    pub fn restored(index: &FileIndex, windows: &Windows) -> Written {
        let named: BTreeMap<i64, &FileEntry> =
            index.buckets.iter().map(|e| (e.start_ms, e)).collect();
        let mut entries = BTreeMap::new();
        for (start, width, stats) in windows.shared_buckets() {
            if let Some(e) = named.get(&start).filter(|e| e.width_ms == width) {
                entries.insert(start, (**e, Arc::downgrade(stats)));
            }
        }
        Written { entries }
    }
}

/// Where a stream's bucket files live.
pub fn dir_of(dir: &Path, stream: &str) -> PathBuf {
    dir.join(format!("{stream}.buckets"))
}

fn file_name(e: &FileEntry) -> String {
    format!("{}.{}.bkt", e.start_ms, e.version)
}

/// Writes the files of the buckets of `windows` changed since `written` (synced, and their
/// directory), before the checkpoint that names them; returns the index naming every bucket,
/// the files as the checkpoint will name them, and how many were written.
pub fn write_changed(
    dir: &Path,
    stream: &str,
    windows: &Windows,
    written: Option<&Written>,
    version: u64,
) -> anyhow::Result<(FileIndex, Written, usize)> {
    let bdir = dir_of(dir, stream);
    if !bdir.is_dir() {
        fs::create_dir_all(&bdir).with_context(|| format!("cannot create {}", bdir.display()))?;
        File::open(dir)
            .and_then(|d| d.sync_all())
            .with_context(|| format!("cannot sync {}", dir.display()))?;
    }
    let empty = Written::default();
    let written = written.unwrap_or(&empty);
    let mut next = Written::default();
    let mut count = 0;
    for (start, width, stats) in windows.shared_buckets() {
        if let Some((e, s)) = written.entries.get(&start)
            && e.width_ms == width
            && std::ptr::eq(s.as_ptr(), Arc::as_ptr(stats))
        {
            next.entries.insert(start, (*e, s.clone()));
            continue;
        }
        let e = FileEntry {
            start_ms: start,
            width_ms: width,
            version,
        };
        let payload = super::BucketRef {
            version,
            start_ms: start,
            width_ms: width,
            stats,
        }
        .encode()?;
        let path = bdir.join(file_name(&e));
        let io = |what: &str| format!("{what} {}", path.display());
        let mut f = File::create(&path).with_context(|| io("cannot create"))?;
        f.write_all(&frame(&payload))
            .with_context(|| io("cannot write"))?;
        f.sync_all().with_context(|| io("cannot sync"))?;
        next.entries.insert(start, (e, Arc::downgrade(stats)));
        count += 1;
    }
    if count > 0 {
        File::open(&bdir)
            .and_then(|d| d.sync_all())
            .with_context(|| format!("cannot sync {}", bdir.display()))?;
    }
    let index = FileIndex::of(windows, next.entries.values().map(|(e, _)| *e).collect());
    Ok((index, next, count))
}

/// Removes the stream's bucket files `index` does not name (replaced, rolled up, past
/// retention, or left by a crash), once the checkpoint naming `index` is durable. Without an
/// index (no windows), every one goes, and the directory.
pub fn remove_unnamed(dir: &Path, stream: &str, index: Option<&FileIndex>) -> anyhow::Result<()> {
    let bdir = dir_of(dir, stream);
    let entries = match fs::read_dir(&bdir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e).with_context(|| format!("cannot read {}", bdir.display())),
    };
    let named: BTreeSet<String> = index
        .map(|i| i.buckets.iter().map(file_name).collect())
        .unwrap_or_default();
    for entry in entries {
        let entry = entry.with_context(|| format!("cannot read {}", bdir.display()))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if !named.contains(&name) {
            fs::remove_file(entry.path())
                .with_context(|| format!("cannot remove {}", entry.path().display()))?;
        }
    }
    if index.is_none() {
        fs::remove_dir(&bdir).with_context(|| format!("cannot remove {}", bdir.display()))?;
    }
    Ok(())
}

/// The windows `index` names, read from their files; an error names the file that is missing,
/// damaged, or holds another bucket.
pub fn read(dir: &Path, stream: &str, index: &FileIndex) -> anyhow::Result<Windows> {
    let spec = WindowSpec::new(index.bucket_ms, index.keep_ms).map_err(anyhow::Error::msg)?;
    let bdir = dir_of(dir, stream);
    let mut parts = Vec::with_capacity(index.buckets.len());
    for e in &index.buckets {
        let path = bdir.join(file_name(e));
        let bytes = fs::read(&path)
            .with_context(|| format!("cannot read the bucket file {}", path.display()))?;
        let b: super::BucketValue = unframe(&bytes)
            .and_then(|p| ciborium::from_reader(p).context("the payload does not decode"))
            .with_context(|| format!("the bucket file {} is not valid", path.display()))?;
        if (b.version, b.start_ms, b.width_ms) != (e.version, e.start_ms, e.width_ms) {
            bail!(
                "the bucket file {} holds the bucket at {} of width {} ms, version {}",
                path.display(),
                b.start_ms,
                b.width_ms,
                b.version
            );
        }
        b.stats
            .validate()
            .map_err(|err| anyhow::anyhow!("the bucket file {}: {err}", path.display()))?;
        parts.push((e.start_ms, e.width_ms, Arc::new(b.stats)));
    }
    Windows::from_shared(spec, index.task, index.p, index.now_ms, parts).map_err(anyhow::Error::msg)
}

fn frame(payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER + payload.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&FORMAT.to_le_bytes());
    out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(payload).to_le_bytes());
    out.extend_from_slice(payload);
    out
}

fn unframe(bytes: &[u8]) -> anyhow::Result<&[u8]> {
    if bytes.len() < HEADER || &bytes[..8] != MAGIC {
        bail!("not a ravel bucket file (no RAVELBKT header)");
    }
    let word = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
    if word(8) != FORMAT {
        bail!("format version {}; this build reads {FORMAT}", word(8));
    }
    let len = u64::from_le_bytes(bytes[12..20].try_into().unwrap());
    let payload = &bytes[HEADER..];
    if payload.len() as u64 != len || crc32fast::hash(payload) != word(20) {
        bail!("truncated or damaged (length or CRC-32 does not match its header)");
    }
    Ok(payload)
}

#[cfg(test)]
mod tests {
    use super::super::file::{Checkpoint, VERSION, load, path, write_with};
    use super::*;
    use ravel_core::stats::windows::{HOUR_MS, MINUTE_MS};

    const T0: i64 = 1_790_006_400_000;

    /// A checkpoint of p = 3 with windows 1m/7d holding 30 minutes of rows.
    fn checkpoint() -> Checkpoint {
        let (stats, w) = crate::store::thirty_minutes(T0);
        Checkpoint {
            version: VERSION,
            stream: "s".into(),
            topic: "t".into(),
            cluster_id: None,
            offsets: [(0, 60)].into(),
            last_update_ms: None,
            as_of_ms: None,
            stats,
            folds: None,
            windows: Some(w),
            bucket_files: None,
        }
    }

    fn files(dir: &Path) -> BTreeSet<String> {
        fs::read_dir(dir_of(dir, "s"))
            .map(|d| {
                d.map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default()
    }

    fn fold_one(cp: &mut Checkpoint, now: i64, ts: i64) {
        let x = [0.2, 0.4, 0.6];
        cp.stats.update_batch(&x, &[1.0]).unwrap();
        let w = cp.windows.as_mut().unwrap();
        w.fold(now, &[ts], &x, &[1.0]).unwrap();
    }

    /// Only the changed buckets get files, the replaced ones go once the checkpoint is
    /// durable, and a load gives back the windows exactly, through roll-ups.
    #[test]
    fn a_checkpoint_writes_the_changed_buckets_files_only() {
        let dir = tempfile::tempdir().unwrap();
        let mut cp = checkpoint();
        let written = write_with(dir.path(), &mut cp, None).unwrap();
        let first = files(dir.path());
        assert_eq!(first.len(), 30);
        assert_eq!(load(dir.path(), "s").unwrap().unwrap(), cp);
        // One row into the last minute: one new file, the one it replaces gone.
        let now = cp.windows.as_ref().unwrap().now_ms().unwrap();
        fold_one(&mut cp, now, now);
        let written = write_with(dir.path(), &mut cp, written.as_ref()).unwrap();
        let second = files(dir.path());
        assert_eq!(second.len(), 30);
        assert_eq!(second.difference(&first).count(), 1);
        assert_eq!(load(dir.path(), "s").unwrap().unwrap(), cp);
        // A day and an hour later the minutes roll up into their hour: two files (the hour,
        // the new minute), the minutes' files gone.
        let later = now + 25 * HOUR_MS;
        fold_one(&mut cp, later, later);
        let written = write_with(dir.path(), &mut cp, written.as_ref()).unwrap();
        assert_eq!(files(dir.path()).len(), 2);
        assert!(files(dir.path()).is_disjoint(&second));
        assert_eq!(load(dir.path(), "s").unwrap().unwrap(), cp);
        // Nothing changed: no file written.
        let before = files(dir.path());
        write_with(dir.path(), &mut cp, written.as_ref()).unwrap();
        assert_eq!(files(dir.path()), before);
        // Without windows the files and their directory go.
        cp.windows = None;
        write_with(dir.path(), &mut cp, None).unwrap();
        assert!(!dir_of(dir.path(), "s").exists());
    }

    /// Killed after some of a checkpoint's bucket files and before the checkpoint: the load
    /// is the previous checkpoint exactly; the next checkpoint removes the stray files.
    #[test]
    fn after_a_restart_the_first_checkpoint_writes_the_changed_buckets_only() {
        let dir = tempfile::tempdir().unwrap();
        let mut cp = checkpoint();
        write_with(dir.path(), &mut cp, None).unwrap();
        // The restart: the checkpoint loaded, its buckets as the writer starts from them.
        let mut loaded = load(dir.path(), "s").unwrap().unwrap();
        let index = loaded.bucket_files.clone().unwrap();
        let restored = Written::restored(&index, loaded.windows.as_ref().unwrap());
        // Ingest folds into a clone of the loaded windows (the snapshot's, the same buckets).
        let now = loaded.windows.as_ref().unwrap().now_ms().unwrap();
        fold_one(&mut loaded, now, now);
        let (_, _, n) = write_changed(
            dir.path(),
            "s",
            loaded.windows.as_ref().unwrap(),
            Some(&restored),
            9,
        )
        .unwrap();
        assert_eq!(n, 1, "one bucket changed since the restart");
        // Without the loaded index, every bucket would be written again.
        let (_, _, all) =
            write_changed(dir.path(), "s", loaded.windows.as_ref().unwrap(), None, 10).unwrap();
        assert_eq!(all, 30);
    }

    #[test]
    fn a_crash_before_the_checkpoint_loads_the_previous_one() {
        let dir = tempfile::tempdir().unwrap();
        let mut cp = checkpoint();
        let written = write_with(dir.path(), &mut cp, None).unwrap();
        let saved = cp.clone();
        let now = cp.windows.as_ref().unwrap().now_ms().unwrap();
        for m in [2, 9, 29] {
            fold_one(&mut cp, now, T0 + m * MINUTE_MS + 5);
        }
        let (_, _, n) = write_changed(
            dir.path(),
            "s",
            cp.windows.as_ref().unwrap(),
            written.as_ref(),
            7,
        )
        .unwrap();
        assert_eq!(n, 3);
        assert_eq!(files(dir.path()).len(), 33);
        assert_eq!(load(dir.path(), "s").unwrap().unwrap(), saved);
        write_with(dir.path(), &mut cp, written.as_ref()).unwrap();
        assert_eq!(files(dir.path()).len(), 30);
        assert_eq!(load(dir.path(), "s").unwrap().unwrap(), cp);
    }

    /// A bucket file damaged, missing or of another bucket stops the load with its name.
    #[test]
    fn a_damaged_bucket_file_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let mut cp = checkpoint();
        write_with(dir.path(), &mut cp, None).unwrap();
        let index = cp.bucket_files.clone().unwrap();
        let f = dir_of(dir.path(), "s").join(file_name(&index.buckets[3]));
        let good = fs::read(&f).unwrap();
        let mut bad = good.clone();
        let last = bad.len() - 1;
        bad[last] ^= 1;
        fs::write(&f, &bad).unwrap();
        let e = format!("{:#}", load(dir.path(), "s").unwrap_err());
        assert!(
            e.contains(&f.display().to_string()) && e.contains("CRC"),
            "{e}"
        );
        assert!(e.contains("move it and"), "{e}");
        // Another bucket's file under this name.
        let other = dir_of(dir.path(), "s").join(file_name(&index.buckets[4]));
        fs::copy(&other, &f).unwrap();
        let e = format!("{:#}", load(dir.path(), "s").unwrap_err());
        assert!(e.contains("holds the bucket at"), "{e}");
        fs::remove_file(&f).unwrap();
        let e = format!("{:#}", load(dir.path(), "s").unwrap_err());
        assert!(e.contains("cannot read the bucket file"), "{e}");
        assert!(path(dir.path(), "s").exists());
    }
}
