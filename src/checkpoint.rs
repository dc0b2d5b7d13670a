//! Checkpoints: a stream's statistics together with the next offset of every partition they
//! cover, written atomically to `state.dir/<stream>.json`.
//!
//! The statistics live in memory, so a restart must restore them, and from exactly the offsets
//! they stop at: a checkpoint is the one place where both are saved together. Offsets are
//! committed to Kafka only after the checkpoint holding those rows is durable, and a restarted
//! service positions its partitions at the checkpoint's offsets (which are never behind the
//! committed ones). A crash between checkpoint and commit therefore neither loses nor
//! double-counts rows. The write is temp file + fsync + rename + directory fsync, so a reader
//! sees the old checkpoint or the new one, never half of one.

use crate::streams::Stats;
use anyhow::{Context, bail};
use ravel_core::Task;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::Write;
use std::path::{Path, PathBuf};

pub const VERSION: u32 = 1;

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
    dir.join(format!("{stream}.json"))
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

/// Writes atomically and durably.
pub fn write(dir: &Path, checkpoint: &Checkpoint) -> anyhow::Result<()> {
    fs::create_dir_all(dir)
        .with_context(|| format!("cannot create state directory {}", dir.display()))?;
    let target = path(dir, &checkpoint.stream);
    let tmp = dir.join(format!(".{}.json.tmp", checkpoint.stream));
    let io = |what: &str| format!("{what} {}", tmp.display());
    {
        let mut f =
            std::io::BufWriter::new(File::create(&tmp).with_context(|| io("cannot create"))?);
        serde_json::to_writer(&mut f, checkpoint).with_context(|| io("cannot write"))?;
        f.flush().with_context(|| io("cannot write"))?;
        f.get_ref().sync_all().with_context(|| io("cannot sync"))?;
    }
    fs::rename(&tmp, &target)
        .with_context(|| format!("cannot rename {} to {}", tmp.display(), target.display()))?;
    // The rename itself is durable only once the directory is synced.
    File::open(dir)
        .and_then(|d| d.sync_all())
        .with_context(|| format!("cannot sync {}", dir.display()))?;
    Ok(())
}

/// Reads a stream's checkpoint; None when there is none.
pub fn load(dir: &Path, stream: &str) -> anyhow::Result<Option<Checkpoint>> {
    let p = path(dir, stream);
    let bytes = match fs::read(&p) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e).with_context(|| format!("cannot read checkpoint {}", p.display())),
    };
    let cp: Checkpoint = serde_json::from_slice(&bytes).with_context(|| {
        format!(
            "checkpoint {} is not valid; move it away to start the stream afresh",
            p.display()
        )
    })?;
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
            version: VERSION,
            stream: "s".into(),
            topic: "t".into(),
            cluster_id: Some("c".into()),
            offsets: [(0, 17), (3, 4)].into(),
            last_update_ms: Some(1),
            as_of_ms: Some(2),
            stats,
        };
        write(dir.path(), &cp).unwrap();
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
        assert_eq!(names, vec![std::ffi::OsString::from("s.json")]);

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
            ..cp
        };
        write(dir.path(), &cp).unwrap();
        let back = load(dir.path(), "s").unwrap().unwrap();
        let table: ravel_core::stats::AlphaSpec =
            toml::from_str("kind = \"adaptive\"\nrefresh = 40\nfalse_alarm_rate = 1e-3\n").unwrap();
        back.check_matches("s", "t", Task::Regression, 3, &table, &p)
            .unwrap();
        fs::write(&p, b"{ truncated").unwrap();
        assert!(load(dir.path(), "s").is_err());
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
        };
        write(dir.path(), &cp).unwrap();
        let p = path(dir.path(), "s");
        let mut json: serde_json::Value = serde_json::from_slice(&fs::read(&p).unwrap()).unwrap();
        assert_eq!(json["as_of_ms"], 2);
        json.as_object_mut().unwrap().remove("as_of_ms");
        fs::write(&p, serde_json::to_vec(&json).unwrap()).unwrap();
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
