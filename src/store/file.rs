//! Checkpoints: a stream's statistics together with the next offset of every partition they
//! cover, written atomically to `state.dir/<stream>.ckpt`.
//!
//! The statistics live in memory, so a restart must restore them, and from exactly the offsets
//! they stop at: a checkpoint is the one place where both are saved together. Offsets are
//! committed to Kafka only after the checkpoint holding those rows is durable, and a restarted
//! service positions its partitions at the checkpoint's offsets (which are never behind the
//! committed ones). A crash between checkpoint and commit therefore neither loses nor
//! double-counts rows. The write is temp file + fsync + rename + directory fsync, so a reader
//! sees the old checkpoint or the new one, never half of one.
//!
//! The file is binary: the magic `RAVELCKP`, the format version (u32), the payload's length
//! (u64) and CRC-32 (u32), all little-endian, then the payload, the checkpoint in CBOR (floats
//! bit-exact, E\[x x^T\] as its lower triangle): about 4.5 MB at p = 1000 where the JSON of
//! earlier versions took 12 MB and most of its time in float formatting. A torn, truncated or
//! altered file fails the length or checksum with an error naming it. A `<stream>.json`
//! checkpoint of an earlier version still loads (and is removed once the binary one is
//! written). The ingest thread only copies the statistics; encoding, writing and syncing run
//! on the writer thread (`ingest::checkpoints::CheckpointWriter`).

use super::bucket_files::{self, FileIndex, Written};
use crate::state::streams::Stats;
use anyhow::{Context, bail};
use ravel_core::Task;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};

pub const VERSION: u32 = 2;

/// The first bytes of a checkpoint file.
const MAGIC: &[u8; 8] = b"RAVELCKP";
/// Magic, version, payload length and CRC-32.
const HEADER: usize = 8 + 4 + 8 + 4;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Checkpoint {
    pub version: u32,
    pub stream: String,
    pub topic: String,
    /// Kafka cluster the offsets belong to (None when the broker did not report one).
    pub cluster_id: Option<String>,
    /// Partition -> next offset to read (every row before it is in `stats`).
    pub offsets: BTreeMap<i32, i64>,
    /// Unix time of the last folded batch, in milliseconds.
    pub last_update_ms: Option<u64>,
    /// Kafka timestamp (Unix ms) of the newest message in `stats` (the streams' `as_of`);
    /// absent from checkpoints written before it was kept, which load with None.
    #[serde(default)]
    pub as_of_ms: Option<u64>,
    pub stats: Stats,
    /// The stream's cross-validation folds (`cv.folds`); absent from checkpoints written
    /// without folds (or before they existed), which load with None.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub folds: Option<crate::store::SavedFolds>,
    /// The stream's time buckets (`windows`): written as files of their own that
    /// `bucket_files` names (`super::bucket_files`), read from them, or from the checkpoint
    /// itself as earlier builds wrote it; absent from checkpoints written without them.
    #[serde(default, skip_serializing)]
    pub windows: Option<ravel_core::stats::Windows>,
    /// The bucket files holding `windows`; set by `write`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bucket_files: Option<FileIndex>,
}

impl Checkpoint {
    /// Checks that a loaded checkpoint belongs to the stream as configured now; the error says
    /// what differs and how to start over.
    ///
    /// The statistics are validated too (lengths against p, finite values): a checkpoint
    /// edited by hand or written by a broken build must stop the start with this message, not
    /// load and panic in the first fold or extraction.
    pub fn check_matches(
        &self,
        stream: &str,
        topic: &str,
        task: Task,
        p: usize,
        alpha: &ravel_core::stats::AlphaSpec,
        path: &Path,
    ) -> anyhow::Result<()> {
        let fresh = format!(
            "move {} away to start this stream from the beginning of its topic",
            path.display()
        );
        if self.version != VERSION {
            bail!(
                "checkpoint {} has version {}, this ravel reads {VERSION}; {fresh}",
                path.display(),
                self.version
            );
        }
        if self.stream != stream || self.topic != topic {
            bail!(
                "checkpoint {} is for stream '{}' on topic '{}', the config says '{stream}' on '{topic}'; {fresh}",
                path.display(),
                self.stream,
                self.topic
            );
        }
        if self.stats.task() != task || self.stats.p() != p {
            bail!(
                "checkpoint {} holds {:?} statistics with p = {}, the config says {task:?} with p = {p}; {fresh}",
                path.display(),
                self.stats.task(),
                self.stats.p()
            );
        }
        if let Err(e) = self.stats.validate() {
            bail!(
                "checkpoint {} holds invalid statistics: {e}; {fresh}",
                path.display()
            );
        }
        if let Some((part, off)) = self
            .offsets
            .iter()
            .find(|(part, off)| **part < 0 || **off < 0)
        {
            bail!(
                "checkpoint {} has offset {off} for partition {part}; {fresh}",
                path.display()
            );
        }
        // Compared as shorthands: checkpoints written before the schedule settings were typed
        // (and any float formatting they hold) compare the same way they always did.
        let schedule = self.stats.schedule().to_string();
        if schedule != alpha.to_string() {
            bail!(
                "checkpoint {} was built with alpha {schedule}, the config says {alpha}; {fresh}",
                path.display()
            );
        }
        Ok(())
    }
}

/// Where a stream's checkpoint lives.
pub fn path(dir: &Path, stream: &str) -> PathBuf {
    dir.join(format!("{stream}.ckpt"))
}

/// Where earlier versions kept it (JSON).
fn legacy_path(dir: &Path, stream: &str) -> PathBuf {
    dir.join(format!("{stream}.json"))
}

/// The file's bytes: header, then the CBOR payload.
pub fn encode(checkpoint: &Checkpoint) -> anyhow::Result<Vec<u8>> {
    let mut payload = Vec::new();
    ciborium::into_writer(checkpoint, &mut payload).context("cannot encode the checkpoint")?;
    let mut out = Vec::with_capacity(HEADER + payload.len());
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&checkpoint.version.to_le_bytes());
    out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    out.extend_from_slice(&crc32fast::hash(&payload).to_le_bytes());
    out.extend_from_slice(&payload);
    Ok(out)
}

/// A checkpoint from the file's bytes; the error says what is wrong (the caller names the
/// file).
pub fn decode(bytes: &[u8]) -> anyhow::Result<Checkpoint> {
    if bytes.len() < HEADER || &bytes[..8] != MAGIC {
        bail!("not a ravel checkpoint (no RAVELCKP header)");
    }
    let word = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap());
    let version = word(8);
    if version != VERSION {
        bail!("format version {version}; this build reads version {VERSION}");
    }
    let len = u64::from_le_bytes(bytes[12..20].try_into().unwrap());
    let payload = &bytes[HEADER..];
    if payload.len() as u64 != len {
        bail!(
            "truncated or extended: the header says {len} bytes of payload, the file has {}",
            payload.len()
        );
    }
    let (want, got) = (word(20), crc32fast::hash(payload));
    if want != got {
        bail!("checksum mismatch (CRC-32 {got:08x}, header says {want:08x}): the file is damaged");
    }
    ciborium::from_reader(payload).context("the payload does not decode")
}

/// Checks at start that checkpoints can be written to `dir` (created when missing): a probe
/// file is written, synced and removed. Without it an unwritable `state.dir` showed only at
/// the first checkpoint, after rows had been folded that could then never be saved.
pub fn probe_dir(dir: &Path) -> anyhow::Result<()> {
    let fix = "set state.dir to a writable directory (or \"\" to run without checkpoints)";
    fs::create_dir_all(dir)
        .with_context(|| format!("state.dir: cannot create {}; {fix}", dir.display()))?;
    let probe = dir.join(".ravel-write-probe");
    let written = File::create(&probe)
        .and_then(|mut f| f.write_all(b"ravel").and_then(|_| f.sync_all()))
        .and_then(|_| fs::remove_file(&probe));
    written.with_context(|| format!("state.dir: cannot write in {}; {fix}", dir.display()))
}

/// Writes atomically and durably, with every bucket of its windows (`write_with`).
pub fn write(dir: &Path, checkpoint: &mut Checkpoint) -> anyhow::Result<()> {
    write_with(dir, checkpoint, None).map(|_| ())
}

/// Writes atomically and durably: the files of the buckets changed since `written` (the
/// bucket files of the stream's last checkpoint, `bucket_files`), then the checkpoint naming
/// every bucket's file (`checkpoint.bucket_files`), then removes the files it does not name.
/// Returns the bucket files it names, for the next checkpoint.
pub fn write_with(
    dir: &Path,
    checkpoint: &mut Checkpoint,
    written: Option<&Written>,
) -> anyhow::Result<Option<Written>> {
    fs::create_dir_all(dir)
        .with_context(|| format!("cannot create state directory {}", dir.display()))?;
    checkpoint.bucket_files = None;
    let mut next = None;
    if let Some(w) = &checkpoint.windows {
        let version = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        let (index, files, _) =
            bucket_files::write_changed(dir, &checkpoint.stream, w, written, version)?;
        checkpoint.bucket_files = Some(index);
        next = Some(files);
    }
    write_file(dir, checkpoint)?;
    // The checkpoint is durable now: a file left behind is removed by the next one.
    if let Err(e) =
        bucket_files::remove_unnamed(dir, &checkpoint.stream, checkpoint.bucket_files.as_ref())
    {
        tracing::warn!(stream = %checkpoint.stream, error = %format!("{e:#}"), "cannot remove bucket files no checkpoint names");
    }
    Ok(next)
}

/// Writes the checkpoint file atomically and durably.
fn write_file(dir: &Path, checkpoint: &Checkpoint) -> anyhow::Result<()> {
    let target = path(dir, &checkpoint.stream);
    let tmp = dir.join(format!(".{}.ckpt.tmp", checkpoint.stream));
    let io = |what: &str| format!("{what} {}", tmp.display());
    let bytes = encode(checkpoint)?;
    {
        let mut f = File::create(&tmp).with_context(|| io("cannot create"))?;
        f.write_all(&bytes).with_context(|| io("cannot write"))?;
        f.sync_all().with_context(|| io("cannot sync"))?;
    }
    fs::rename(&tmp, &target)
        .with_context(|| format!("cannot rename {} to {}", tmp.display(), target.display()))?;
    // An earlier version's JSON checkpoint is superseded now.
    let legacy = legacy_path(dir, &checkpoint.stream);
    match fs::remove_file(&legacy) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(e).with_context(|| format!("cannot remove {}", legacy.display()));
        }
        _ => {}
    }
    // The rename itself is durable only once the directory is synced.
    File::open(dir)
        .and_then(|d| d.sync_all())
        .with_context(|| format!("cannot sync {}", dir.display()))?;
    Ok(())
}

/// The file's bytes, None when it does not exist.
fn read(p: &Path) -> anyhow::Result<Option<Vec<u8>>> {
    match fs::read(p) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("cannot read checkpoint {}", p.display())),
    }
}

/// Reads a stream's checkpoint (binary, or an earlier version's JSON); None when there is
/// none.
pub fn load(dir: &Path, stream: &str) -> anyhow::Result<Option<Checkpoint>> {
    let invalid = |p: &Path| {
        format!(
            "checkpoint {} is not valid; move it away to start the stream afresh",
            p.display()
        )
    };
    let p = path(dir, stream);
    if let Some(bytes) = read(&p)? {
        let mut cp = decode(&bytes).with_context(|| invalid(&p))?;
        if let Some(index) = &cp.bucket_files {
            let w = bucket_files::read(dir, stream, index).with_context(|| {
                format!(
                    "checkpoint {}: its time buckets cannot be read; move it and {} away to start the stream afresh",
                    p.display(),
                    bucket_files::dir_of(dir, stream).display()
                )
            })?;
            cp.windows = Some(w);
        }
        return Ok(Some(cp));
    }
    let legacy = legacy_path(dir, stream);
    let Some(bytes) = read(&legacy)? else {
        return Ok(None);
    };
    let mut cp: Checkpoint = serde_json::from_slice(&bytes).with_context(|| invalid(&legacy))?;
    // Its content is what this version keeps; it is written back in this version's format.
    cp.version = VERSION;
    Ok(Some(cp))
}

#[cfg(test)]
mod tests {
    use super::*;
    use ravel_core::stats::AlphaSchedule;

    #[test]
    fn round_trip_is_exact() {
        let dir = tempfile::tempdir().unwrap();
        let mut stats = Stats::new(
            Task::Regression,
            3,
            AlphaSchedule::Floor { alpha_min: 0.01 },
        );
        let spec: ravel_core::synthetic::SyntheticSpec = "p=3,k=1,n=50,seed=4".parse().unwrap();
        let (mut x, mut y) = (vec![], vec![]);
        spec.rows().fill(50, &mut x, &mut y);
        stats.update_batch(&x, &y).unwrap();
        let cp = Checkpoint {
            offsets: [(0, 17), (3, 4)].into(),
            ..checkpoint(stats)
        };
        write(dir.path(), &mut cp.clone()).unwrap();
        let back = load(dir.path(), "s").unwrap().unwrap();
        // Bit-exact: the restart test compares with `ravel fit` at 1e-9, and a checkpoint
        // must not add rounding of its own.
        assert_eq!(back, cp);
        assert!(load(dir.path(), "other").unwrap().is_none());
        // No temp file is left behind.
        let names: Vec<_> = fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, vec![std::ffi::OsString::from("s.ckpt")]);

        let p = path(dir.path(), "s");
        let floor = ravel_core::stats::AlphaSpec::Floor { alpha_min: 0.01 };
        back.check_matches("s", "t", Task::Regression, 3, &floor, &p)
            .unwrap();
        for (stream, topic, task, pp, alpha, want) in [
            ("s", "u", Task::Regression, 3, "floor:0.01", "topic"),
            ("s", "t", Task::Classification, 3, "floor:0.01", "p = 3"),
            ("s", "t", Task::Regression, 4, "floor:0.01", "p = 4"),
            ("s", "t", Task::Regression, 3, "plain", "alpha"),
        ] {
            let e = back
                .check_matches(stream, topic, task, pp, &alpha.parse().unwrap(), &p)
                .unwrap_err()
                .to_string();
            assert!(e.contains(want) && e.contains("move"), "{e}");
        }
        // A checkpoint of an adaptive stream matches the same settings given as a table.
        let adaptive: AlphaSchedule = "adaptive:fa=0.001,refresh=40".parse().unwrap();
        let cp = Checkpoint {
            stats: Stats::new(Task::Regression, 3, adaptive),
            folds: None,
            windows: None,
            ..cp
        };
        write(dir.path(), &mut cp.clone()).unwrap();
        let back = load(dir.path(), "s").unwrap().unwrap();
        let table: ravel_core::stats::AlphaSpec =
            toml::from_str("kind = \"adaptive\"\nrefresh = 40\nfalse_alarm_rate = 1e-3\n").unwrap();
        back.check_matches("s", "t", Task::Regression, 3, &table, &p)
            .unwrap();
        fs::write(&p, b"{ truncated").unwrap();
        assert!(load(dir.path(), "s").is_err());
    }

    fn sample(p: usize) -> Checkpoint {
        let mut stats = Stats::new(Task::Regression, p, AlphaSchedule::Plain);
        let spec: ravel_core::synthetic::SyntheticSpec =
            format!("p={p},k=2,n=300,seed=5").parse().unwrap();
        let (mut x, mut y) = (vec![], vec![]);
        spec.rows().fill(300, &mut x, &mut y);
        stats.update_batch(&x, &y).unwrap();
        checkpoint(stats)
    }

    /// A checkpoint of stream `s` on topic `t` holding `stats`, read to offset 300 of
    /// partition 0.
    fn checkpoint(stats: Stats) -> Checkpoint {
        Checkpoint {
            version: VERSION,
            stream: "s".into(),
            topic: "t".into(),
            cluster_id: Some("c".into()),
            offsets: [(0, 300)].into(),
            last_update_ms: Some(1),
            as_of_ms: Some(2),
            stats,
            folds: None,
            windows: None,
            bucket_files: None,
        }
    }

    /// Issue 10 item 5: a damaged file (one flipped bit, cut short, a stray byte, another
    /// file) is refused with an error naming it, never loaded.
    #[test]
    fn damaged_checkpoints_are_refused_with_the_file_named() {
        let dir = tempfile::tempdir().unwrap();
        let cp = sample(20);
        write(dir.path(), &mut cp.clone()).unwrap();
        let p = path(dir.path(), "s");
        let good = fs::read(&p).unwrap();
        assert_eq!(&good[..8], MAGIC);
        // The lower triangle: 210 of the 400 values of E[x x^T] (CBOR floats, 9 bytes or
        // fewer each), plus the vectors.
        assert!(
            good.len() < 9 * (210 + 4 * 20) + 400,
            "{} bytes",
            good.len()
        );
        let mut flipped = good.clone();
        let mid = HEADER + (good.len() - HEADER) / 2;
        flipped[mid] ^= 0x10;
        let mut longer = good.clone();
        longer.push(0);
        for (bytes, want) in [
            (flipped, "checksum"),
            (good[..good.len() - 7].to_vec(), "truncated"),
            (longer, "truncated or extended"),
            (b"{\"version\": 1}".to_vec(), "RAVELCKP"),
        ] {
            fs::write(&p, &bytes).unwrap();
            let e = format!("{:#}", load(dir.path(), "s").unwrap_err());
            assert!(
                e.contains(want) && e.contains(&p.display().to_string()),
                "{e}"
            );
        }
        fs::write(&p, &good).unwrap();
        assert_eq!(load(dir.path(), "s").unwrap().unwrap(), cp);
    }

    /// A JSON checkpoint of the previous version (full E[x x^T]) loads the same statistics,
    /// and the first binary checkpoint replaces it.
    #[test]
    fn a_json_checkpoint_of_the_previous_version_loads_and_is_replaced() {
        let dir = tempfile::tempdir().unwrap();
        let cp = sample(5);
        let mut json = serde_json::to_value(&cp).unwrap();
        json["version"] = 1.into();
        let lower: Vec<f64> = json["stats"]["sxx_lower"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| v.as_f64().unwrap())
            .collect();
        let mut full = vec![0.0; 25];
        let mut at = 0;
        for j in 0..5 {
            for i in j..5 {
                full[j * 5 + i] = lower[at];
                at += 1;
            }
        }
        let stats = json["stats"].as_object_mut().unwrap();
        stats.remove("sxx_lower");
        stats.insert("sxx".into(), serde_json::json!(full));
        let legacy = legacy_path(dir.path(), "s");
        fs::write(&legacy, serde_json::to_vec(&json).unwrap()).unwrap();
        let back = load(dir.path(), "s").unwrap().unwrap();
        assert_eq!(back, cp);
        write(dir.path(), &mut back.clone()).unwrap();
        assert!(!legacy.exists());
        assert_eq!(load(dir.path(), "s").unwrap().unwrap(), cp);
    }

    /// Checkpoints written before `as_of_ms` was kept load, with no `as_of`.
    #[test]
    fn a_checkpoint_without_as_of_loads() {
        let dir = tempfile::tempdir().unwrap();
        let cp = Checkpoint {
            version: VERSION,
            stream: "s".into(),
            topic: "t".into(),
            cluster_id: None,
            offsets: [(0, 3)].into(),
            last_update_ms: Some(1),
            as_of_ms: Some(2),
            stats: Stats::new(Task::Regression, 2, ravel_core::stats::AlphaSchedule::Plain),
            folds: None,
            windows: None,
            bucket_files: None,
        };
        let mut json = serde_json::to_value(&cp).unwrap();
        assert_eq!(json["as_of_ms"], 2);
        json.as_object_mut().unwrap().remove("as_of_ms");
        fs::write(
            legacy_path(dir.path(), "s"),
            serde_json::to_vec(&json).unwrap(),
        )
        .unwrap();
        let back = load(dir.path(), "s").unwrap().unwrap();
        assert_eq!(back.as_of_ms, None);
        assert_eq!(
            back,
            Checkpoint {
                as_of_ms: None,
                ..cp
            }
        );
    }
}
