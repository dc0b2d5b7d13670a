//! Checkpoint assembly on the ingest side: what a stream's checkpoint holds (its working
//! statistics and the positions of its topic, which they cover exactly), the writer thread
//! that saves those that changed, and, at start, loading them back into snapshots and
//! positions. The file format and atomic write are `crate::store::file`'s; which offsets may be
//! committed afterwards is `commit`'s.
//!
//! The ingest thread only copies a changed stream's statistics and positions into a job
//! (a memory copy: about 4 ms at p = 1000); `CheckpointWriter`'s thread encodes, writes and
//! syncs it while the ingest thread goes on folding. The offsets a job holds become
//! committable when its file is durable, so Kafka's committed offsets still trail the last
//! durable checkpoint; a stream has at most one job in flight (a newer one waits for the next
//! interval), and a failed write leaves the stream changed, to be written again.
//!
//! A job is fenced (`held`, `dlq.on_failure = "block"`): when the statistics it holds cover a
//! rejected message whose dead-letter copy is not acknowledged yet, it waits, assembled, until
//! every such copy is (`release`, called after each batch: normally a few milliseconds later),
//! and only then goes to the writer thread. While a copy keeps failing the job keeps waiting,
//! so the stream's last durable checkpoint, and its committed offsets, stay before the message.

use super::positions::Positions;
use crate::config::StreamConfig;
use crate::dead_letters::held::{Fence, Held};
use crate::ingest::fold::{ALL, Part, StreamIngest};
use crate::metrics::Metrics;
use crate::state::streams::Snapshot;
use crate::store::file::{self as checkpoint, Checkpoint};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::mpsc::{Receiver, Sender, channel};
use std::thread::JoinHandle;
use std::time::{Duration, Instant, UNIX_EPOCH};

/// The checkpoint of one stream now: its statistics and the positions of its topic.
pub fn assemble(
    s: &StreamIngest,
    whole: &Part,
    cluster_id: Option<String>,
    positions: &Positions,
) -> Checkpoint {
    let topic = &s.handle.topic;
    Checkpoint {
        version: checkpoint::VERSION,
        stream: s.handle.name().to_string(),
        topic: topic.clone(),
        cluster_id,
        offsets: positions.get(topic).cloned().unwrap_or_default(),
        last_update_ms: whole.last_update.map(crate::unix_ms),
        as_of_ms: whole.as_of_ms,
        stats: whole.stats.clone(),
        folds: s.saved_folds(&whole.folds),
        // A copy of the map only: the buckets themselves are shared until a fold changes one.
        windows: whole.windows.clone(),
        bucket_files: None,
    }
}

/// What the writer thread says of one job.
struct Report {
    stream: String,
    topic: String,
    offsets: BTreeMap<i32, i64>,
    written: bool,
}

/// The `dir` store's writer (see the module header).
pub struct CheckpointWriter {
    jobs: Option<Sender<Checkpoint>>,
    reports: Receiver<Report>,
    thread: Option<JoinHandle<()>>,
    /// Streams with a job not reported yet (waiting or with the writer thread).
    in_flight: HashSet<String>,
    /// Jobs waiting for the dead-letter copies they cover to be acknowledged.
    waiting: Vec<(Checkpoint, Fence)>,
    /// Topic -> the offsets of its last durable checkpoint (or, with nothing unsaved, its
    /// positions): what may be committed.
    durable: Positions,
}

impl CheckpointWriter {
    /// Starts the writer thread on `dir`.
    /// `files`: each stream's bucket files as loaded (`load_checkpoints`).
    pub fn start(
        dir: PathBuf,
        metrics: Arc<Metrics>,
        files: BucketFiles,
    ) -> anyhow::Result<CheckpointWriter> {
        let (jobs, rx) = channel::<Checkpoint>();
        let (tx, reports) = channel();
        let thread = std::thread::Builder::new()
            .name("ravel-checkpoints".into())
            .spawn(move || {
                // Each stream's bucket files as its last checkpoint names them: a checkpoint
                // writes only the buckets changed since (`store::bucket_files`).
                let mut files = files;
                for mut cp in rx {
                    let start = Instant::now();
                    let last = files.get(&cp.stream).cloned();
                    let result = checkpoint::write_with(&dir, &mut cp, last.as_ref());
                    let name = cp.stream.as_str();
                    let written = match result {
                        Ok(next) => {
                            match next {
                                Some(f) => files.insert(cp.stream.clone(), f),
                                None => files.remove(&cp.stream),
                            };
                            metrics.ingest.checkpoints.with_label_values(&[name]).inc();
                            metrics
                                .ingest.checkpoint_seconds
                                .with_label_values(&[name])
                                .observe(start.elapsed().as_secs_f64());
                            tracing::debug!(stream = %name, n = cp.stats.n(), "checkpoint written");
                            true
                        }
                        Err(e) => {
                            metrics.ingest.checkpoint_failures.with_label_values(&[name]).inc();
                            tracing::error!(stream = %name, error = %format!("{e:#}"), "checkpoint failed; offsets not committed");
                            false
                        }
                    };
                    let report = Report {
                        stream: cp.stream,
                        topic: cp.topic,
                        offsets: cp.offsets,
                        written,
                    };
                    if tx.send(report).is_err() {
                        break;
                    }
                }
            })
            .map_err(|e| anyhow::anyhow!("cannot start the checkpoint writer: {e}"))?;
        Ok(CheckpointWriter {
            jobs: Some(jobs),
            reports,
            thread: Some(thread),
            in_flight: HashSet::new(),
            waiting: Vec::new(),
            durable: Positions::new(),
        })
    }

    /// Hands the checkpoint of every changed stream without a job in flight to the writer
    /// thread, or, when it covers unacknowledged dead-letter copies (`held`), keeps it waiting
    /// for them; a stream with nothing unsaved and nothing in flight is durable where it stands.
    pub fn submit(
        &mut self,
        streams: &mut [StreamIngest],
        cluster_id: &Option<String>,
        positions: &Positions,
        held: &Held,
    ) {
        self.collect(streams);
        self.release(held);
        for s in streams.iter_mut() {
            let name = s.handle.name().to_string();
            if self.in_flight.contains(&name) {
                continue;
            }
            let topic = s.handle.topic.clone();
            let fence = held.fence(&topic);
            let Some(whole) = s.whole().filter(|w| w.dirty) else {
                if fence.is_empty() {
                    let at = positions.get(&topic).cloned().unwrap_or_default();
                    self.durable.insert(topic, at);
                }
                continue;
            };
            let cp = assemble(s, whole, cluster_id.clone(), positions);
            s.mark_saved(ALL);
            self.in_flight.insert(name);
            if fence.is_empty() {
                if !self.send(cp) {
                    s.touch(ALL);
                }
            } else {
                self.waiting.push((cp, fence));
            }
        }
    }

    /// Sends the waiting jobs whose dead-letter copies are all acknowledged now.
    pub fn release(&mut self, held: &Held) {
        if self.waiting.is_empty() {
            return;
        }
        let (ready, wait): (Vec<_>, Vec<_>) = std::mem::take(&mut self.waiting)
            .into_iter()
            .partition(|(cp, fence)| held.cleared(&cp.topic, fence));
        self.waiting = wait;
        for (cp, _) in ready {
            // A stopped writer was already logged; the stream is not durable either way.
            let _ = self.send(cp);
        }
    }

    /// Hands one job to the writer thread; false if it has stopped.
    fn send(&mut self, cp: Checkpoint) -> bool {
        let name = cp.stream.clone();
        if self.jobs.as_ref().is_some_and(|j| j.send(cp).is_ok()) {
            return true;
        }
        // Nothing will report it: the stream's offsets stay where they were.
        self.in_flight.remove(&name);
        tracing::error!(stream = %name, "the checkpoint writer has stopped; offsets not committed");
        false
    }

    /// Takes the writer's reports: written jobs make their offsets committable, failed ones
    /// leave their stream changed.
    fn collect(&mut self, streams: &mut [StreamIngest]) {
        while let Ok(r) = self.reports.try_recv() {
            self.report(r, streams);
        }
    }

    fn report(&mut self, r: Report, streams: &mut [StreamIngest]) {
        self.in_flight.remove(&r.stream);
        if r.written {
            self.durable.insert(r.topic, r.offsets);
        } else if let Some(s) = streams.iter_mut().find(|s| s.handle.name() == r.stream) {
            s.touch(ALL);
        }
    }

    /// Waits until every job with the writer thread is written (or failed): the last
    /// checkpoint at shutdown. Jobs still waiting for dead-letter copies are dropped: the last
    /// durable checkpoint stays before those messages, and the next start reads them again.
    pub fn flush(&mut self, streams: &mut [StreamIngest]) {
        for (cp, fence) in std::mem::take(&mut self.waiting) {
            tracing::warn!(
                stream = %cp.stream, copies = fence.len(),
                "last checkpoint not written: dead-letter copies it covers are not acknowledged; the next start reads those messages again"
            );
            self.in_flight.remove(&cp.stream);
            if let Some(s) = streams.iter_mut().find(|s| s.handle.name() == cp.stream) {
                s.touch(ALL);
            }
        }
        while !self.in_flight.is_empty() {
            match self.reports.recv() {
                Ok(r) => self.report(r, streams),
                Err(_) => break,
            }
        }
    }

    /// Forgets a retired stream's topic: nothing of it is committed any more.
    pub fn forget(&mut self, topic: &str) {
        self.durable.remove(topic);
    }

    /// Each stream topic's committable offsets (absent: nothing durable yet).
    pub fn durable(&self) -> &Positions {
        &self.durable
    }
}

impl Drop for CheckpointWriter {
    fn drop(&mut self) {
        self.jobs.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// What the checkpoints restore: stream -> initial snapshot, positions, stream -> cluster id.
pub type Restored = (
    HashMap<String, Snapshot>,
    Positions,
    BTreeMap<String, Option<String>>,
    BucketFiles,
);

/// Each stream's bucket files as its checkpoint named them when loaded, for the checkpoint
/// writer to start from (`CheckpointWriter::start`).
pub type BucketFiles = HashMap<String, crate::store::bucket_files::Written>;

/// Loads the checkpoints of all streams in `dir`: (stream -> initial snapshot, positions,
/// cluster ids). A checkpoint that does not match its stream's configuration is an error.
pub fn load_checkpoints(dir: &Path, configs: &[StreamConfig]) -> anyhow::Result<Restored> {
    let (mut snaps, mut positions, mut clusters, mut files) = (
        HashMap::new(),
        Positions::new(),
        BTreeMap::new(),
        BucketFiles::new(),
    );
    for c in configs {
        let Some(cp) = checkpoint::load(dir, &c.name)? else {
            continue;
        };
        let path = checkpoint::path(dir, &c.name);
        cp.check_matches(&c.name, &c.topic(), c.task, c.p(), &c.alpha, &path)?;
        tracing::info!(stream = %c.name, n = cp.stats.n(), offsets = ?cp.offsets, "checkpoint restored");
        let last_update = cp
            .last_update_ms
            .map(|ms| UNIX_EPOCH + Duration::from_millis(ms));
        positions.insert(cp.topic.clone(), cp.offsets.clone());
        clusters.insert(c.name.clone(), cp.cluster_id.clone());
        let folds = restore_folds(c, cp.folds, cp.stats.n(), &path)?;
        let windows = restore_windows(c, cp.windows, &path)?;
        // The snapshot's buckets are these (their `Arc`s), and so are ingest's after it.
        if let (Some(index), Some(w)) = (&cp.bucket_files, &windows) {
            files.insert(
                c.name.clone(),
                crate::store::bucket_files::Written::restored(index, w),
            );
        }
        snaps.insert(
            c.name.clone(),
            Snapshot::whole(cp.stats, last_update, cp.as_of_ms)
                .with_positions(cp.offsets.clone())
                .with_folds(folds)
                .with_windows(windows.into_iter().collect()),
        );
    }
    Ok((snaps, positions, clusters, files))
}

/// The time buckets a checkpoint restores for stream `c`: its own when they are the ones the
/// stream keeps now (`windows`; damaged ones stop the start like damaged statistics). When the
/// stream keeps other windows or the checkpoint has none (`windows` was set or changed since),
/// they start empty and hold only the rows read from now on (logged): a row's time cannot be
/// recovered from the totals. Empty windows start with the stream (`fold::Part`).
fn restore_windows(
    c: &StreamConfig,
    saved: Option<ravel_core::stats::Windows>,
    path: &Path,
) -> anyhow::Result<Option<ravel_core::stats::Windows>> {
    let Some(spec) = c.window_spec()? else {
        return Ok(None);
    };
    let why = match saved {
        Some(w) if w.spec() == spec => {
            w.validate(c.task, c.p())
                .map_err(damaged(path, "time buckets (windows)"))?;
            return Ok(Some(w));
        }
        Some(w) => format!("its time buckets are of {}", w.spec().describe()),
        None => "it has no time buckets".into(),
    };
    tracing::warn!(
        stream = %c.name,
        "checkpoint {}: {why}, the stream keeps {}: its windows start empty and hold only the rows read from now on. \
         Move the checkpoint away to fold every row of the topic into them.",
        path.display(),
        spec.describe()
    );
    Ok(None)
}

/// The error of checkpoint `path` whose `what` do not validate: the stream cannot go on
/// from it.
fn damaged<E: std::fmt::Display>(path: &Path, what: &str) -> impl FnOnce(E) -> anyhow::Error {
    let path = path.display().to_string();
    let what = what.to_string();
    move |e| {
        anyhow::anyhow!(
            "checkpoint {path}: its {what} are damaged ({e}); move it away to start this stream from the beginning of its topic"
        )
    }
}

/// The folds a checkpoint restores for stream `c`: its own when they are the ones the stream
/// keeps now (K and fold_by; damaged folds stop the start like damaged statistics). When the
/// stream keeps other folds or the checkpoint has none (cv.folds was set or changed since),
/// the folds start empty and hold only the rows read from now on: a row's fold cannot be
/// recovered from the totals. The log says so, and so does every CV answer (the folds hold
/// fewer rows than the stream); to have every row in a fold, move the checkpoint away so the
/// stream is read again from the beginning of its topic.
fn restore_folds(
    c: &StreamConfig,
    saved: Option<crate::store::SavedFolds>,
    rows: u64,
    path: &Path,
) -> anyhow::Result<Option<ravel_core::stats::FoldSet>> {
    let k = c.folds()?;
    if k == 0 {
        return Ok(None);
    }
    let by = c.cv.as_ref().map(|cv| cv.fold_by).unwrap_or_default();
    let why = match saved.map(|s| s.matching(k, by)) {
        Some(Ok(folds)) => {
            folds
                .validate(c.task, c.p())
                .map_err(damaged(path, "fold statistics"))?;
            return Ok(Some(folds));
        }
        Some(Err(why)) => format!("its folds do not fit: {why}"),
        None => "it has no fold statistics".into(),
    };
    tracing::warn!(
        stream = %c.name, k, rows,
        "checkpoint {}: {why}. The {k} folds start empty and hold only the rows read from now on; \
         select = cv answers from those rows and says so. Move the checkpoint away to fold every row of the topic.",
        path.display()
    );
    Ok(Some(ravel_core::stats::FoldSet::new(c.task, c.p(), k)))
}
