//! Checkpoint assembly on the ingest side: what a stream's checkpoint holds (its working
//! statistics and the positions of its topic, which they cover exactly), writing those that
//! changed, and, at start, loading them back into snapshots and positions. The file format and
//! atomic write are `crate::checkpoint`'s; which offsets may be committed afterwards is
//! `commit`'s.

use super::fold::{ALL, Part, StreamIngest};
use super::positions::Positions;
use crate::checkpoint::{self, Checkpoint};
use crate::config::StreamConfig;
use crate::metrics::Metrics;
use crate::streams::Snapshot;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
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
        last_update_ms: whole
            .last_update
            .and_then(|t| t.duration_since(UNIX_EPOCH).ok())
            .map(|d| d.as_millis() as u64),
        as_of_ms: whole.as_of_ms,
        stats: whole.stats.clone(),
    }
}

/// Writes the checkpoint of every stream that changed; returns the topics whose positions are
/// durable now (so their offsets may be committed). Without a state directory every topic
/// counts as durable (the commits are then informational: a restart re-reads the topics from
/// the beginning).
pub fn write_changed(
    streams: &mut [StreamIngest],
    state_dir: Option<&Path>,
    cluster_id: &Option<String>,
    positions: &Positions,
    metrics: &Metrics,
) -> Vec<String> {
    let mut durable: Vec<String> = Vec::new();
    for s in streams {
        let topic = s.handle.topic.clone();
        let Some(dir) = state_dir else {
            durable.push(topic);
            continue;
        };
        let Some(whole) = s.whole().filter(|w| w.dirty) else {
            durable.push(topic);
            continue;
        };
        let cp = assemble(s, whole, cluster_id.clone(), positions);
        let handle = s.handle.clone();
        let name = handle.name();
        let start = Instant::now();
        match checkpoint::write(dir, &cp) {
            Ok(()) => {
                s.mark_saved(ALL);
                durable.push(topic);
                metrics.checkpoints.with_label_values(&[name]).inc();
                metrics
                    .checkpoint_seconds
                    .with_label_values(&[name])
                    .observe(start.elapsed().as_secs_f64());
                tracing::debug!(stream = %name, n = cp.stats.n(), "checkpoint written");
            }
            Err(e) => {
                metrics.checkpoint_failures.with_label_values(&[name]).inc();
                tracing::error!(stream = %name, error = %format!("{e:#}"), "checkpoint failed; offsets not committed");
            }
        }
    }
    durable
}

/// What the checkpoints restore: stream -> initial snapshot, positions, stream -> cluster id.
pub type Restored = (
    HashMap<String, Snapshot>,
    Positions,
    BTreeMap<String, Option<String>>,
);

/// Loads the checkpoints of all streams in `dir`: (stream -> initial snapshot, positions,
/// cluster ids). A checkpoint that does not match its stream's configuration is an error.
pub fn load_checkpoints(dir: &Path, configs: &[StreamConfig]) -> anyhow::Result<Restored> {
    let (mut snaps, mut positions, mut clusters) =
        (HashMap::new(), Positions::new(), BTreeMap::new());
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
        snaps.insert(
            c.name.clone(),
            Snapshot::whole(cp.stats, last_update, cp.as_of_ms),
        );
    }
    Ok((snaps, positions, clusters))
}
