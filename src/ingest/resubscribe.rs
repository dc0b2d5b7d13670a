//! Streams and feature streams declared or retired over the API while the loop runs
//! (`crate::declared`): applied
//! between two batches, at a checkpoint boundary. What the loop holds is folded, every
//! stream's checkpoint written and its offsets committed; then the stream's `StreamIngest`
//! starts or stops, and the subscription changes. Group assignment: unsubscribe and subscribe
//! again, so that every partition is assigned again at its position (a replaced stream's
//! topic too, which a subscription to the same topics would not move); standalone: the
//! retired or replaced topics' partitions are unassigned, and the new ones assigned at their
//! positions. The other streams' positions are untouched, so none of their rows is lost or
//! folded twice.

use super::features::FeatureIngest;
use super::fold::StreamIngest;
use super::rebalance::RestoredStream;
use super::{Ingest, Store, Target};
use crate::declared::Change;
use crate::lock;
use anyhow::Context;
use rdkafka::consumer::{CommitMode, Consumer};
use std::time::Duration;

impl Ingest {
    /// Applies the declarations made since the last call, if any.
    pub(super) fn apply_declarations(&mut self) -> anyhow::Result<()> {
        let Some(queue) = &self.declarations else {
            return Ok(());
        };
        let changes = queue.take();
        if changes.is_empty() {
            return Ok(());
        }
        self.fold()?;
        self.checkpoint_and_commit(CommitMode::Sync);
        let mut moved = Vec::new();
        let mut started_at_end = false;
        for change in changes {
            match change {
                Change::Remove {
                    name,
                    drop_state,
                    replaced,
                } => {
                    let Some(i) = self.streams.iter().position(|s| s.handle.name() == name) else {
                        continue;
                    };
                    let s = self.streams.remove(i);
                    let topic = s.handle.topic.clone();
                    lock(&self.positions).remove(&topic);
                    self.consumer.context().restored(&topic, None);
                    match &mut self.store {
                        Store::Dir(w) => w.forget(&topic),
                        // Its states, with its partitions' last ones written just above
                        // (those of its declaration only: the reader may hold a newer
                        // one's already). Not when a changed declaration replaces them.
                        Store::Kafka { writer, reader } if drop_state && !replaced => {
                            let states: Vec<_> = (reader.of_stream(&name).into_iter())
                                .filter(|st| st.epoch == s.handle.epoch)
                                .collect();
                            writer.forget(&states);
                        }
                        _ => {}
                    }
                    if drop_state && let Some(dir) = &self.state_dir {
                        let path = crate::store::file::path(dir, &name);
                        match std::fs::remove_file(&path) {
                            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                                tracing::error!(stream = %name, path = %path.display(), error = %e, "cannot delete the retired stream's checkpoint");
                            }
                            _ => {}
                        }
                        // Its time buckets' files (`windows`), which only that checkpoint named.
                        let buckets = crate::store::bucket_files::dir_of(dir, &name);
                        match std::fs::remove_dir_all(&buckets) {
                            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                                tracing::error!(stream = %name, path = %buckets.display(), error = %e, "cannot delete the retired stream's bucket files");
                            }
                            _ => {}
                        }
                    }
                    tracing::info!(stream = %name, topic = %topic, n = s.handle.snapshot().stats.n(), state = if drop_state { "dropped" } else { "kept" }, "stream no longer read");
                    moved.push(topic);
                }
                Change::AddFeatures { handle } => {
                    let topic = handle.topic.clone();
                    self.features
                        .retain(|f| f.live.handle.name() != handle.name());
                    // A feature stream keeps no checkpoint: its topic from the beginning.
                    lock(&self.positions).remove(&topic);
                    tracing::info!(feature_stream = %handle.name(), topic = %topic, "feature stream read from now on");
                    self.features.push(FeatureIngest::new(handle));
                    moved.push(topic);
                }
                Change::RemoveFeatures { name } => {
                    let Some(i) = self
                        .features
                        .iter()
                        .position(|f| f.live.handle.name() == name)
                    else {
                        continue;
                    };
                    let topic = self.features.remove(i).live.handle.topic.clone();
                    lock(&self.positions).remove(&topic);
                    tracing::info!(feature_stream = %name, topic = %topic, "feature stream no longer read");
                    moved.push(topic);
                }
                Change::Add { handle, positions } => {
                    let topic = handle.topic.clone();
                    // Never two readers of one stream.
                    self.streams.retain(|s| s.handle.name() != handle.name());
                    let positions_empty = positions.is_empty();
                    if positions_empty {
                        lock(&self.positions).remove(&topic);
                    } else {
                        lock(&self.positions).insert(topic.clone(), positions);
                    }
                    tracing::info!(stream = %handle.name(), topic = %topic, n = handle.snapshot().stats.n(), "stream read from now on");
                    let per_partition = matches!(self.store, Store::Kafka { .. });
                    (self.consumer.context()).restored(&topic, Some(RestoredStream::of(&handle)));
                    self.streams.push(StreamIngest::new(handle, per_partition));
                    if positions_empty {
                        started_at_end |= self.start_declared(self.streams.len() - 1)?;
                    }
                    moved.push(topic);
                }
            }
        }
        self.by_topic.clear();
        for (i, s) in self.streams.iter().enumerate() {
            self.by_topic
                .insert(s.handle.topic.clone(), Target::Rows(i));
        }
        for (i, f) in self.features.iter().enumerate() {
            self.by_topic
                .insert(f.live.handle.topic.clone(), Target::Features(i));
        }
        let topics: Vec<String> = self
            .streams
            .iter()
            .map(|s| s.handle.topic.clone())
            .chain(self.features.iter().map(|f| f.live.handle.topic.clone()))
            .collect();
        if started_at_end {
            self.checkpoint_and_commit(CommitMode::Sync);
        }
        let context = self.consumer.context();
        context.set_topics(topics.clone());
        if self.standalone.is_some() {
            context.unassign_topics(&self.consumer, &moved);
            context.assign_standalone(&self.consumer, Duration::from_secs(5));
        } else {
            self.consumer.unsubscribe();
            let refs: Vec<&str> = topics.iter().map(String::as_str).collect();
            self.consumer
                .subscribe(&refs)
                .with_context(|| format!("cannot subscribe to {topics:?}"))?;
            context.subscribed();
            tracing::info!(topics = ?topics, "subscribed again after a declaration");
        }
        Ok(())
    }

    /// Stream `i`, just declared, starts where its `start` says: its positions set and its
    /// checkpoint due at once. Returns whether it was.
    fn start_declared(&mut self, i: usize) -> anyhow::Result<bool> {
        let handle = self.streams[i].handle.clone();
        let Some(ends) = super::start::at_end(
            &self.consumer,
            &handle,
            self.state_dir.as_deref(),
            matches!(self.store, super::Store::Kafka { .. }),
            &self.shutdown,
        )?
        else {
            return Ok(false);
        };
        crate::lock(&self.positions).insert(handle.topic.clone(), ends);
        self.streams[i].touch(super::fold::ALL);
        Ok(true)
    }
}
