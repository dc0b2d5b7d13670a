//! Setting the loop up (`Ingest::new`): the consumer and its rebalance context, the
//! positions checked against the cluster, the store of checkpoints or state records, the
//! dead-letter producer, and the subscription (or, in standalone assignment, every partition
//! assigned here: `crate::kafka::standalone`).

use super::checkpoints::{persist, positions};
use super::features::FeatureIngest;
use super::fold::StreamIngest;
use super::rebalance::{IngestContext, Restore, RestoredStream};
use super::{Checked, Ingest, IngestSetup, Store, Target, patiently};
use crate::config::Assignment;
use crate::config::OnFailure;
use crate::dead_letters::dlq::DeadLetters;
use crate::dead_letters::held;
use crate::kafka::standalone;
use crate::lock;
use crate::store::kafka::StateWriter;
use anyhow::{Context, bail};
use rdkafka::consumer::{BaseConsumer, Consumer};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How long the cluster may take to answer at start before it is reported unreachable.
const UNANSWERED: Duration = Duration::from_secs(3);

impl Ingest {
    /// `initial`: the streams read from the start (the registry when the thread was spawned).
    pub(super) fn new(
        mut setup: IngestSetup,
        initial: Vec<Arc<crate::state::streams::StreamHandle>>,
    ) -> anyhow::Result<Ingest> {
        let mut topics: Vec<String> = initial.iter().map(|h| h.topic.clone()).collect();
        topics.extend(setup.feature_streams.topics());
        let positions = Arc::new(Mutex::new(std::mem::take(&mut setup.positions)));
        let make = |setup: &IngestSetup| -> anyhow::Result<BaseConsumer<IngestContext>> {
            let restore = setup.state_reader.clone().map(|reader| Restore {
                reader,
                streams: Mutex::new(
                    initial
                        .iter()
                        .map(|h| (h.topic.clone(), RestoredStream::of(h)))
                        .collect(),
                ),
            });
            let context = IngestContext::new(
                positions.clone(),
                topics.clone(),
                setup.ready.clone(),
                setup.metrics.clone(),
                setup.health.clone(),
                restore,
            );
            setup
                .clients
                .consumer(setup.ingest.lag_interval_ms)
                .create_with_context(context)
                .map_err(|e| {
                    anyhow::anyhow!(
                        "cannot create the Kafka consumer: {}",
                        setup.clients.scrub(&e.to_string())
                    )
                })
        };
        let brokers = setup.clients.brokers().to_string();
        // Made before the cluster's id was heard, the consumer has librdkafka's session; on
        // the embedded broker it is made again below, so that every member of a group has
        // the same session (members of different sessions leave a join unanswered there:
        // docs/compatibility.md).
        let heard_before = setup.clients.cluster_known();
        let mut consumer = make(&setup)?;

        let shutdown = &setup.shutdown;
        // A cluster that has not answered for a few seconds is named in `/readyz` from then
        // on (since the first attempt), until it answers (`lag.rs` notices that later on).
        let (asked, asked_at) = (Instant::now(), std::time::SystemTime::now());
        let cluster_id = patiently(shutdown, |t| {
            let id = consumer.client().fetch_cluster_id(t);
            if id.is_none() && asked.elapsed() >= UNANSWERED {
                setup
                    .health
                    .unreachable(asked_at, "no answer to a metadata request");
            }
            id
        });
        match &cluster_id {
            Some(id) => {
                setup.health.reachable();
                setup.clients.heard_cluster(id);
                tracing::info!(cluster_id = %id, brokers = %brokers, "connected to Kafka");
                if !heard_before && setup.clients.on_embedded() {
                    consumer = make(&setup)?;
                }
            }
            None => {
                tracing::warn!(brokers = %brokers, "Kafka did not report a cluster id (is it reachable?)")
            }
        }
        // A checkpoint only makes sense against the log it was read from.
        for (stream, cp_cluster) in &setup.checkpoint_clusters {
            if let (Some(have), Some(want)) = (&cluster_id, cp_cluster)
                && have != want
            {
                bail!(
                    "the checkpoint of stream '{stream}' was written against Kafka cluster {want}, but {brokers} is cluster {have}; \
                     move the state directory away to start from the beginning of the topics"
                );
            }
        }
        {
            let positions = lock(&positions);
            for (topic, parts) in positions.iter() {
                for (&p, &next) in parts {
                    let watermarks =
                        patiently(shutdown, |t| consumer.fetch_watermarks(topic, p, t).ok());
                    match watermarks.ok_or("no answer from the cluster") {
                        Ok((low, high)) => match positions::check(next, low, high) {
                            Checked::PastEnd => bail!(
                                "checkpoint says partition {topic}/{p} was read up to offset {next}, but the topic ends at {high}: \
                                 it belongs to another incarnation of the topic; move the state directory away to start afresh"
                            ),
                            Checked::Deleted => tracing::warn!(
                                topic = %topic, partition = p, next, low,
                                "offsets {next}..{low} were deleted by retention before they were read"
                            ),
                            Checked::Valid => {}
                        },
                        Err(e) => {
                            tracing::warn!(topic = %topic, partition = p, error = %e, "cannot check the checkpoint against the topic")
                        }
                    }
                }
            }
        }

        // Streams never read that start at their topic's end, before anything is assigned
        // (with the kafka store, each partition when it is first assigned: `rebalance.rs`).
        let mut fresh = std::collections::HashSet::new();
        let per_partition = setup.state.store == crate::config::StoreKind::Kafka;
        let dir = setup.state.dir();
        for h in &initial {
            if let Some(ends) =
                super::start::at_end(&consumer, h, dir.as_deref(), per_partition, shutdown)?
            {
                lock(&positions).insert(h.topic.clone(), ends);
                fresh.insert(h.name().to_string());
            }
        }

        let dead_letters = if setup.ingest.dead_letter {
            Some(
                DeadLetters::start(
                    &setup.clients.dead_letters(),
                    Some(&setup.clients.dead_letter_reader()),
                    &setup.dlq,
                    setup.metrics.clone(),
                )
                .map_err(|e| anyhow::anyhow!(setup.clients.scrub(&format!("{e:#}"))))?,
            )
        } else {
            None
        };
        let standalone = match setup.assignment {
            Assignment::Standalone => true,
            Assignment::Group => false,
            // The embedded broker keeps a departed member for its whole session timeout: a
            // restart would wait that long for its partitions.
            Assignment::Auto => {
                setup.state_reader.is_none() && crate::kafka::is_embedded(cluster_id.as_deref())
            }
        };
        let standalone = if standalone {
            consumer
                .context()
                .assign_standalone(&consumer, Duration::from_secs(5));
            Some(standalone::Standalone::new(
                standalone::instance_name(setup.clients.instance_id()),
                "ingest",
                setup.clients.group(),
                Duration::from_millis(setup.state.checkpoint_interval_ms),
                setup.health.clone(),
            ))
        } else {
            let topic_refs: Vec<&str> = topics.iter().map(String::as_str).collect();
            consumer
                .subscribe(&topic_refs)
                .with_context(|| format!("cannot subscribe to {topics:?}"))?;
            consumer.context().subscribed();
            tracing::info!(topics = ?topics, group = %setup.clients.group(), instance = ?setup.clients.instance_id(), "subscribed");
            // How many partitions each topic has: ready needs all of them (rebalance.rs).
            let mut totals = std::collections::BTreeMap::new();
            for topic in &topics {
                if let Some(md) =
                    patiently(shutdown, |t| consumer.fetch_metadata(Some(topic), t).ok())
                    && let Some(t) = md.topics().first()
                    && !t.partitions().is_empty()
                {
                    totals.insert(topic.clone(), t.partitions().len());
                }
            }
            consumer.context().set_totals(totals);
            None
        };
        // Labels must come before features and passes keep their order: one partition.
        for topic in setup.feature_streams.topics() {
            if let Ok(md) = consumer.fetch_metadata(Some(&topic), Duration::from_secs(10))
                && let Some(t) = md.topics().first()
                && t.partitions().len() > 1
            {
                tracing::warn!(
                    topic = %topic, partitions = t.partitions().len(),
                    "feature-stream topic has several partitions: the order of labels and features across them is not kept; use one partition"
                );
            }
        }

        let store = match (&setup.state_reader, setup.state.dir()) {
            (Some(reader), _) => {
                let topic = setup
                    .state
                    .kafka_topic(setup.clients.group())
                    .context("a state reader without the kafka store")?;
                let writer = StateWriter::new(
                    &setup.clients,
                    &topic,
                    setup.state.max_record_bytes,
                    Duration::from_secs(30),
                )?;
                // The others' partitions are in the view before the first row is read.
                if let Err(e) = reader.catch_up(Duration::from_secs(60)) {
                    tracing::warn!(error = %format!("{e:#}"), "state topic not read to its end at start");
                }
                Store::Kafka {
                    writer,
                    reader: reader.clone(),
                }
            }
            (None, Some(dir)) => Store::Dir(persist::CheckpointWriter::start(
                dir,
                setup.metrics.clone(),
                std::mem::take(&mut setup.bucket_files),
            )?),
            (None, None) => Store::None,
        };
        let mut streams = Vec::new();
        let mut by_topic = HashMap::new();
        for handle in &initial {
            by_topic.insert(handle.topic.clone(), Target::Rows(streams.len()));
            let mut s = StreamIngest::new(handle.clone(), setup.state_reader.is_some());
            if let Some(r) = &setup.state_reader {
                s.fold(&setup.metrics, Some(r), None)?;
            }
            if fresh.contains(handle.name()) {
                s.touch(super::fold::ALL);
            }
            streams.push(s);
        }
        let mut features = Vec::new();
        for handle in setup.feature_streams.iter() {
            by_topic.insert(handle.topic.clone(), Target::Features(features.len()));
            features.push(FeatureIngest::new(handle.clone()));
        }
        Ok(Ingest {
            consumer: Arc::new(consumer),
            dead_letters,
            block: setup.dlq.on_failure == OnFailure::Block,
            held: held::Held::new(held::Bound {
                copies: setup.dlq.max_unacked_copies.max(1),
                bytes: setup.dlq.max_unacked_bytes.max(1),
            }),
            health_shows_held: false,
            health: setup.health,
            group: setup.clients.group().to_string(),
            streams,
            features,
            by_topic,
            positions,
            // Empty: the first cycle commits the restored positions too, in case a crash left
            // Kafka's offsets behind the checkpoint (lag tools read the committed offsets).
            committed: HashMap::new(),
            cluster_id,
            store,
            writer_name: crate::store::kafka::writer_name(),
            checkpoint_interval: Duration::from_millis(setup.state.checkpoint_interval_ms),
            max_rows: setup.ingest.max_batch_rows,
            max_wait: Duration::from_millis(setup.ingest.max_batch_wait_ms),
            metrics: setup.metrics,
            shutdown: setup.shutdown,
            last_poll_error: None,
            ahead_threads: std::thread::available_parallelism().map_or(2, |n| n.get().clamp(1, 4)),
            features_published: Instant::now(),
            standalone,
            discovered: Instant::now(),
            declarations: setup.declarations,
            state_dir: setup.state.dir(),
            checkpoint_due: !fresh.is_empty(),
            unassigned_reported: None,
        })
    }
}
