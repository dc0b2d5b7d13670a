//! The service's parts, each built and started by a method of its own in the order a start
//! needs them: the shared parts (`Service::new`: metrics, health, the registry, the Kafka
//! clients, the streams and feature streams), the topic check, the kafka store's reader and
//! declaration log, ingest, the scorers, the history recorders, the declarations and the HTTP
//! application. `super::run` calls them in turn.

use super::restore::Restored;
use super::wiring::Wiring;
use crate::api::{self, AppState};
use crate::config::Config;
use crate::ingest::{self, IngestSetup, KafkaClients};
use crate::metrics::Metrics;
use crate::shutdown::Shutdown;
use crate::state::feature_streams::{FeatureStreamHandle, FeatureStreams};
use crate::state::streams::Streams;
use anyhow::anyhow;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// The parts every other part shares.
pub(super) struct Service {
    pub wiring: Arc<Wiring>,
    pub feature_streams: Arc<FeatureStreams>,
    /// Set by ingest once the consumer group assigned partitions of every stream topic.
    pub ready: Arc<AtomicBool>,
    pub extractions: api::Extractions,
    /// Writes labels sent over HTTP to their feature stream's topic.
    producer: Option<rdkafka::producer::FutureProducer>,
}

/// The kafka store's reader of the state topic and its declaration records (both None with
/// the file store).
pub(super) struct StateTopic {
    pub reader: Option<Arc<crate::store::kafka::StateReader>>,
    pub declarations: Option<Arc<crate::store::kafka::declared::DeclarationLog>>,
}

/// The ingest thread, awaited on the runtime, and the signal that it ended.
pub(super) struct Ingesting {
    pub task: tokio::task::JoinHandle<anyhow::Result<()>>,
    pub ended: Arc<tokio::sync::Notify>,
}

impl Ingesting {
    /// Fires when `shutdown` does or ingest ends on its own (a fatal error): the HTTP server
    /// then stops accepting.
    pub fn or_shutdown(&self, shutdown: &Shutdown) -> impl Future<Output = ()> + use<> {
        let (s, ended) = (shutdown.clone(), self.ended.clone());
        async move {
            tokio::select! {
                _ = s.wait() => {}
                _ = ended.notified() => {}
            }
        }
    }

    /// After the HTTP server has drained: ingest's end (its last checkpoint and commit), then,
    /// at a shutdown, the scorers' (declared ones through `declarations`, the file's
    /// threads joined). An ingest that failed on its own leaves the scorers to the exit.
    pub async fn finish(
        self,
        declarations: Arc<crate::declared::Declarations>,
        file_scorers: Vec<std::thread::JoinHandle<()>>,
        shutdown: &Shutdown,
    ) -> anyhow::Result<()> {
        let r = self.task.await.map_err(|e| anyhow!("ingest task: {e}"))?;
        if shutdown.is_triggered() {
            let _ = tokio::task::spawn_blocking(move || declarations.stop_scorers()).await;
            for s in file_scorers {
                let _ = tokio::task::spawn_blocking(move || s.join()).await;
            }
        }
        if r.is_ok() {
            tracing::info!("stopped cleanly");
        }
        r
    }
}

/// The scorers of the config file (they stop with the service), and those declared over the
/// API at an earlier start, running again (each with a stop of its own).
pub(super) struct Scorers {
    pub file: Vec<std::thread::JoinHandle<()>>,
    pub resumed: Vec<(String, crate::declared::scorers::Running)>,
}

impl Service {
    /// The shared parts: every stream's handle (restored from `restored`'s snapshots), the
    /// feature streams, the Schema Registry client, the Kafka clients of `brokers`.
    pub fn new(
        restored: &mut Restored,
        brokers: &str,
        shutdown: &Shutdown,
    ) -> anyhow::Result<Service> {
        let config = &restored.config;
        let metrics = Arc::new(Metrics::new());
        let health = Arc::new(crate::health::Health::new());
        health.set_brokers(brokers);
        let clients = KafkaClients::new(&config.kafka, brokers);
        clients.log_effective(config.ingest.lag_interval_ms);
        let producer = labels_producer(config, &clients)?;
        let extractions = extractions(config, shutdown);
        let mut wiring = Wiring {
            config: config.clone(),
            registry: registry(config, &health, shutdown)?,
            clients,
            metrics,
            health,
            streams: Arc::new(Streams::new(Vec::new())),
            permits: extractions.running.clone(),
            runtime: tokio::runtime::Handle::current(),
            shutdown: shutdown.clone(),
        };
        let mut handles = Vec::new();
        for sc in &config.streams {
            handles.push(wiring.stream_handle(sc, restored.checkpoints.0.remove(&sc.name))?);
        }
        wiring.streams = Arc::new(Streams::new(handles));
        for f in &config.feature_streams {
            wiring.metrics.declare_feature_stream(&f.name, f.workers);
        }
        let wide_budget = config.wide_budget();
        let feature_streams = Arc::new(FeatureStreams::new(
            config.feature_streams.iter().cloned().map(|f| {
                let budget = if f.wide { wide_budget } else { 0 };
                FeatureStreamHandle::new(f, budget)
            }),
        ));
        Ok(Service {
            wiring: Arc::new(wiring),
            feature_streams,
            ready: Arc::new(AtomicBool::new(false)),
            extractions,
            producer,
        })
    }

    fn config(&self) -> &Config {
        &self.wiring.config
    }

    /// Every topic ravel needs, checked (and created when asked to) off the runtime, then
    /// watched.
    pub async fn check_topics(&self) {
        let w = &self.wiring;
        crate::kafka::topics::check_then_watch(
            crate::kafka::topics::TopicCheck::new(self.config(), w.clients.clone()),
            w.health.clone(),
            w.metrics.clone(),
        )
        .await;
    }

    /// The kafka state store's reader, which tails the state topic from its beginning for as
    /// long as the service runs (the topic was checked, or created, by `check_topics`), and
    /// the API's declarations in the same topic.
    pub fn state_topic(&self, shutdown: &Shutdown) -> anyhow::Result<StateTopic> {
        let config = self.config();
        let clients = &self.wiring.clients;
        let Some(topic) = config.state.kafka_topic(&config.kafka.group_id) else {
            return Ok(StateTopic {
                reader: None,
                declarations: None,
            });
        };
        let reader = crate::store::kafka::StateReader::start(clients, &topic, shutdown.clone())?;
        let declarations = crate::store::kafka::declared::DeclarationLog::new(
            clients,
            &topic,
            reader.clone(),
            Duration::from_secs(30),
        )?;
        Ok(StateTopic {
            reader: Some(reader),
            declarations: Some(Arc::new(declarations)),
        })
    }

    /// Starts the ingest thread from the restored positions; the changes of `queue` reach it
    /// between batches.
    pub fn start_ingest(
        &self,
        checkpoints: crate::ingest::checkpoints::persist::Restored,
        reader: Option<Arc<crate::store::kafka::StateReader>>,
        queue: &Arc<crate::declared::Queue>,
        shutdown: &Shutdown,
    ) -> anyhow::Result<Ingesting> {
        let (_, positions, checkpoint_clusters, bucket_files) = checkpoints;
        let (config, w) = (self.config(), &self.wiring);
        let thread = ingest::spawn(IngestSetup {
            clients: w.clients.clone(),
            ingest: config.ingest.clone(),
            dlq: config.dlq.clone(),
            state: config.state.clone(),
            streams: w.streams.clone(),
            feature_streams: self.feature_streams.clone(),
            positions,
            checkpoint_clusters,
            bucket_files,
            metrics: w.metrics.clone(),
            ready: self.ready.clone(),
            health: w.health.clone(),
            state_reader: reader,
            assignment: config.kafka.assignment,
            declarations: Some(queue.clone()),
            shutdown: shutdown.clone(),
        })?;
        let ended = Arc::new(tokio::sync::Notify::new());
        let notify = ended.clone();
        let task = tokio::task::spawn_blocking(move || {
            let r = thread
                .join()
                .unwrap_or_else(|_| Err(anyhow!("the ingest thread panicked")));
            notify.notify_one();
            r
        });
        Ok(Ingesting { task, ended })
    }

    /// Starts the scorers: the file's stop with the service; those declared over the API
    /// (in `declared`) each have a stop of their own too, handed to the declarations.
    pub fn start_scorers(
        &self,
        declared: &crate::declared::Book,
        shutdown: &Shutdown,
    ) -> anyhow::Result<Scorers> {
        use crate::declared::Service as _;
        let mut scorers = Scorers {
            file: Vec::new(),
            resumed: Vec::new(),
        };
        let config = self.config();
        for (sc, model) in config.scorers.iter().zip(config.scorer_models()?) {
            if declared.scorers.iter().any(|d| d.scorer.name == sc.name) {
                let running = self.wiring.start_scorer(sc, model)?;
                scorers.resumed.push((sc.name.clone(), running));
            } else {
                let thread = self
                    .wiring
                    .start_scorer_until(sc, model, shutdown.clone())?;
                scorers.file.push(thread);
            }
        }
        Ok(scorers)
    }

    /// Starts each stream's history recorder: the history's extractions take the API's
    /// permits, so together they use at most `http.max_concurrent_extractions` cores.
    pub fn start_recorders(&self, shutdown: &Shutdown) {
        crate::state::recorder::spawn_recorders(
            &self.wiring.streams,
            self.extractions.running.clone(),
            shutdown.clone(),
        );
    }

    /// The declarations of the file and of the API (`restored`'s), with the scorers
    /// `resumed`; with the kafka store, followed in the state topic.
    pub fn declarations(
        &self,
        restored: Restored,
        log: Option<Arc<crate::store::kafka::declared::DeclarationLog>>,
        queue: Arc<crate::declared::Queue>,
        resumed: Vec<(String, crate::declared::scorers::Running)>,
        shutdown: &Shutdown,
    ) -> Arc<crate::declared::Declarations> {
        let parts = crate::declared::Parts {
            streams: self.wiring.streams.clone(),
            feature_streams: self.feature_streams.clone(),
            service: self.wiring.clone(),
            log: log.clone(),
            queue,
        };
        let d = Arc::new(crate::declared::Declarations::new(
            restored.base,
            restored.declared,
            parts,
        ));
        for (name, running) in resumed {
            d.resumed(&name, running);
        }
        if let Some(log) = &log {
            follow_declarations(&d, log, shutdown.clone());
        }
        d
    }

    /// The HTTP application: the API's router over the service's state, behind the token
    /// (`http.token`) and the body read timeout.
    pub fn app(&self, declarations: Arc<crate::declared::Declarations>) -> axum::Router {
        let (config, w) = (self.config(), &self.wiring);
        let state = AppState {
            declarations,
            admin_token: Arc::new(config.http.admin_token.clone()),
            streams: w.streams.clone(),
            feature_streams: self.feature_streams.clone(),
            producer: self.producer.clone(),
            metrics: w.metrics.clone(),
            ready: self.ready.clone(),
            health: w.health.clone(),
            extractions: self.extractions.clone(),
            sampler: Arc::new(crate::propose::Sampler::new(
                w.clients.clone(),
                w.registry.clone(),
            )),
        };
        let mut app = api::router(state, config.http.body_limit_bytes);
        if !config.http.token.is_empty() {
            let token = Arc::new(config.http.token.expose().to_string());
            app = app.layer(axum::middleware::from_fn_with_state(
                token,
                api::auth::require_token,
            ));
        }
        app.layer(tower_http::timeout::RequestBodyTimeoutLayer::new(
            Duration::from_millis(config.http.body_read_timeout_ms),
        ))
    }
}

/// One Schema Registry client for the streams of schema'd formats (None: none configured),
/// probed only when a stream fetches its schemas from it.
fn registry(
    config: &Config,
    health: &Arc<crate::health::Health>,
    shutdown: &Shutdown,
) -> anyhow::Result<Option<Arc<crate::codec::schemad::SchemaRegistry>>> {
    if !config.schema_registry.configured() {
        return Ok(None);
    }
    let registry = Arc::new(crate::codec::schemad::SchemaRegistry::new(
        &config.schema_registry,
        health.clone(),
        Some(shutdown.clone()),
    )?);
    if config
        .streams
        .iter()
        .any(|s| !s.format.is_ravel() && s.avro_schema_file.is_none())
    {
        registry.watch();
    }
    Ok(Some(registry))
}

/// The producer of labels sent over HTTP (so a restart replays them with the features):
/// with feature streams, or with declarations over the API on (they may add one).
fn labels_producer(
    config: &Config,
    clients: &KafkaClients,
) -> anyhow::Result<Option<rdkafka::producer::FutureProducer>> {
    if config.feature_streams.is_empty() && config.http.admin_token.is_empty() {
        return Ok(None);
    }
    let producer = clients
        .labels()
        .create::<rdkafka::producer::FutureProducer>()
        .map_err(|e| {
            anyhow!(
                "cannot create the labels producer: {}",
                clients.scrub(&e.to_string())
            )
        })?;
    Ok(Some(producer))
}

/// The extraction slots (`http.max_concurrent_extractions`, 0: one a core) and their queue;
/// once the service starts to stop, extractions running stop at their next iteration, so
/// that shutdown is bounded whatever they were asked.
fn extractions(config: &Config, shutdown: &Shutdown) -> api::Extractions {
    let permits = match config.http.max_concurrent_extractions {
        0 => std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(2),
        n => n,
    };
    let stopping = Arc::new(AtomicBool::new(false));
    {
        let (s, flag) = (shutdown.clone(), stopping.clone());
        tokio::spawn(async move {
            s.wait().await;
            flag.store(true, std::sync::atomic::Ordering::SeqCst);
        });
    }
    api::Extractions::new(
        permits,
        config.http.max_queued_extractions,
        Some(Duration::from_millis(config.http.extraction_timeout_ms)),
        stopping,
    )
}

/// Kafka store: adopts the declarations in the state topic now (once it is read to its end),
/// then on a thread of its own whenever the reader reads a declaration record.
fn follow_declarations(
    d: &Arc<crate::declared::Declarations>,
    log: &crate::store::kafka::declared::DeclarationLog,
    shutdown: Shutdown,
) {
    if let Err(e) = log.catch_up(Duration::from_secs(60)) {
        tracing::warn!(error = %format!("{e:#}"), "state topic not read to its end: the streams declared over the API join when it is");
    }
    let reader = log.reader();
    let seen = reader.declarations_version();
    d.sync();
    let d = d.clone();
    // A stream's history recorder is a task of the service's runtime.
    let runtime = tokio::runtime::Handle::current();
    let spawned = std::thread::Builder::new()
        .name("ravel-declarations".into())
        .spawn(move || {
            let _runtime = runtime.enter();
            let mut seen = seen;
            while !shutdown.is_triggered() {
                std::thread::sleep(Duration::from_millis(200));
                let now = reader.declarations_version();
                if now != seen {
                    seen = now;
                    d.sync();
                }
            }
        });
    if let Err(e) = spawned {
        tracing::error!(error = %e, "cannot start the thread that follows declarations");
    }
}
