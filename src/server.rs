//! The service: wires configuration, ingest, the state and the HTTP API together.
//!
//! `run(config, brokers, listener, shutdown)` is the service itself: it takes an already bound
//! listener and a shutdown signal, so tests start the real service on `127.0.0.1:0` against
//! a real broker. `cli::serve` is the command around it (embedded broker, demo producer,
//! signals).
//!
//! Shutdown order: ingest stops reading, folds what it holds, writes its last checkpoint and
//! commits synchronously; HTTP stops accepting and drains the requests in flight; then the
//! process exits 0.

use crate::api::{self, AppState};
use crate::config::StoreKind;
use crate::config::{Config, LogConfig, LogFormat};
use crate::ingest::{self, IngestSetup, KafkaClients};
use crate::metrics::Metrics;
use crate::shutdown::Shutdown;
use crate::state::feature_streams::{FeatureStreamHandle, FeatureStreams};
use crate::state::streams::{Snapshot, Stats, StreamHandle, Streams};
use anyhow::anyhow;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;
use tokio::net::TcpListener;
use tracing_subscriber::EnvFilter;

/// Installs the tracing subscriber (stderr; text or JSON). `RUST_LOG` overrides `log.level`.
/// A second call (tests) leaves the first subscriber in place.
pub fn init_logging(log: &LogConfig) {
    let filter = EnvFilter::try_from_default_env()
        .or_else(|_| EnvFilter::try_new(&log.level))
        .unwrap_or_else(|_| EnvFilter::new("info"));
    use std::io::IsTerminal;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal());
    let _ = match log.format {
        LogFormat::Json => builder.json().try_init(),
        LogFormat::Text => builder.try_init(),
    };
}

/// A stream's handle as the service starts it: its snapshot restored (`snapshot`) or empty,
/// its metrics declared, its decoding of schema'd values and its field sampling set up. At
/// start and for streams declared over the API (`crate::declared`).
fn stream_handle(
    config: &Config,
    sc: &crate::config::StreamConfig,
    snapshot: Option<Snapshot>,
    registry: Option<&Arc<crate::schemas::SchemaRegistry>>,
    metrics: &Metrics,
) -> anyhow::Result<StreamHandle> {
    let snap = match snapshot {
        Some(s) => s,
        None => Snapshot::whole(Stats::new(sc.task, sc.p(), sc.schedule()?), None, None),
    };
    metrics.declare_stream(&sc.name);
    if config.state.dir().is_some() || config.state.store == StoreKind::Kafka {
        metrics.declare_checkpoints(&sc.name);
    }
    metrics
        .streams
        .stream_observations
        .with_label_values(&[&sc.name])
        .set(snap.stats.n() as i64);
    metrics
        .streams
        .stream_alpha
        .with_label_values(&[&sc.name])
        .set(snap.stats.current_alpha());
    if let Some(ms) = snap.as_of_ms {
        metrics
            .streams
            .stream_as_of
            .with_label_values(&[&sc.name])
            .set(ms as f64 / 1000.0);
    }
    let history = sc.history(&config.history)?;
    let mut handle = StreamHandle::new(sc.clone(), snap, history)?;
    handle.wire = crate::schemas::Wire::of_stream(sc, registry)?;
    handle.sample_fields(config.ingest.field_check_events);
    Ok(handle)
}

/// Runs the service until `shutdown` fires (or ingest fails): consumes the configured streams
/// from `brokers` and serves the API on `listener`.
pub async fn run(
    config: Config,
    brokers: String,
    listener: TcpListener,
    shutdown: Shutdown,
) -> anyhow::Result<()> {
    let metrics = Arc::new(Metrics::new());
    // Streams declared over the API in an earlier run (`crate::declared`) join the file's,
    // checked with them as one configuration.
    let base = config.clone();
    let declared = match config.state.dir() {
        Some(dir) => {
            crate::store::file::probe_dir(&dir)?;
            crate::declared::load(&dir)?
        }
        None => Default::default(),
    };
    let mut config = config;
    if !declared.streams.is_empty()
        || !declared.feature_streams.is_empty()
        || !declared.scorers.is_empty()
    {
        config
            .streams
            .extend(declared.streams.iter().map(|d| d.stream.clone()));
        config.feature_streams.extend(
            declared
                .feature_streams
                .iter()
                .map(|d| d.feature_stream.clone()),
        );
        config
            .scorers
            .extend(declared.scorers.iter().map(|d| d.scorer.clone()));
        config.check().map_err(|e| {
            anyhow!(
                "the streams and scorers declared over the API ({}) do not go with the \
                 configuration: {e:#}; remove the clashing one from the config file, or move {} \
                 away to start without the API's declarations",
                declared
                    .streams
                    .iter()
                    .map(|d| d.stream.name.as_str())
                    .chain(
                        declared
                            .feature_streams
                            .iter()
                            .map(|d| d.feature_stream.name.as_str())
                    )
                    .chain(declared.scorers.iter().map(|d| d.scorer.name.as_str()))
                    .collect::<Vec<_>>()
                    .join(", "),
                config
                    .state
                    .dir()
                    .unwrap_or_default()
                    .join(crate::declared::FILE)
                    .display()
            )
        })?;
        tracing::info!(
            streams = declared.streams.len(),
            feature_streams = declared.feature_streams.len(),
            scorers = declared.scorers.len(),
            "streams and scorers declared over the API restored"
        );
    }
    let (mut snapshots, positions, clusters, bucket_files) = match config.state.dir() {
        // Probed above.
        Some(dir) => ingest::load_checkpoints(&dir, &config.streams)?,
        None => Default::default(),
    };
    let health = Arc::new(crate::health::Health::new());
    health.set_brokers(&brokers);
    // One Schema Registry client for the streams of schema'd formats.
    let registry = if config.schema_registry.configured() {
        let registry = Arc::new(crate::schemas::SchemaRegistry::new(
            &config.schema_registry,
            health.clone(),
            Some(shutdown.clone()),
        )?);
        // Probed only when a stream fetches its schemas from it.
        if config
            .streams
            .iter()
            .any(|s| !s.format.is_ravel() && s.avro_schema_file.is_none())
        {
            registry.watch();
        }
        Some(registry)
    } else {
        None
    };
    let mut handles = Vec::new();
    for sc in &config.streams {
        handles.push(stream_handle(
            &config,
            sc,
            snapshots.remove(&sc.name),
            registry.as_ref(),
            &metrics,
        )?);
    }
    let streams = Arc::new(Streams::new(handles));
    for f in &config.feature_streams {
        metrics.declare_feature_stream(&f.name, f.workers);
    }
    let wide_budget = config.wide_budget();
    let feature_streams = Arc::new(FeatureStreams::new(
        config.feature_streams.iter().cloned().map(|f| {
            let budget = if f.wide { wide_budget } else { 0 };
            FeatureStreamHandle::new(f, budget)
        }),
    ));
    let clients = KafkaClients::new(&config.kafka, &brokers);
    clients.log_effective(config.ingest.lag_interval_ms);
    // Labels sent over HTTP are written to the feature stream's topic (so a restart replays
    // them with the features).
    // Also with declarations over the API on: they may add a feature stream.
    let producer = if feature_streams.is_empty() && config.http.admin_token.is_empty() {
        None
    } else {
        Some(
            clients
                .labels()
                .create::<rdkafka::producer::FutureProducer>()
                .map_err(|e| {
                    anyhow!(
                        "cannot create the labels producer: {}",
                        clients.scrub(&e.to_string())
                    )
                })?,
        )
    };
    let ready = Arc::new(AtomicBool::new(false));
    // Every topic ravel needs, checked (and created when asked to) off the runtime.
    crate::kafka::topics::check_then_watch(
        crate::kafka::topics::TopicCheck::new(&config, clients.clone()),
        health.clone(),
        metrics.clone(),
    )
    .await;

    // The kafka state store's reader tails the state topic from its beginning for as long as
    // the service runs (the topic was checked, or created, just above).
    let state_reader = match config.state.kafka_topic(&config.kafka.group_id) {
        Some(topic) => Some(crate::store::kafka::StateReader::start(
            &clients,
            &topic,
            shutdown.clone(),
        )?),
        None => None,
    };
    // With the kafka store the API's declarations live in the state topic too.
    let declaration_log = match (
        &state_reader,
        config.state.kafka_topic(&config.kafka.group_id),
    ) {
        (Some(reader), Some(topic)) => Some(Arc::new(
            crate::store::kafka::declared::DeclarationLog::new(
                &clients,
                &topic,
                reader.clone(),
                Duration::from_secs(30),
            )?,
        )),
        _ => None,
    };
    let queue = Arc::new(crate::declared::Queue::default());
    let ingest_thread = ingest::spawn(IngestSetup {
        clients: clients.clone(),
        ingest: config.ingest.clone(),
        dlq: config.dlq.clone(),
        state: config.state.clone(),
        streams: streams.clone(),
        feature_streams: feature_streams.clone(),
        positions,
        checkpoint_clusters: clusters,
        bucket_files,
        metrics: metrics.clone(),
        ready: ready.clone(),
        health: health.clone(),
        state_reader,
        assignment: config.kafka.assignment,
        declarations: Some(queue.clone()),
        shutdown: shutdown.clone(),
    })?;
    // Scorers: each its own consumer group and producer, on its own thread.
    let scorer_parts = ScorerParts {
        clients: clients.clone(),
        config: config.clone(),
        metrics: metrics.clone(),
        health: health.clone(),
        streams: streams.clone(),
        runtime: tokio::runtime::Handle::current(),
        shutdown: shutdown.clone(),
    };
    // The file's scorers stop with the service; those declared over the API each have a stop
    // of their own too (`crate::declared::scorers`), handed to the declarations below.
    let (mut scorers, mut resumed) = (Vec::new(), Vec::new());
    for (sc, model) in config.scorers.iter().zip(config.scorer_models()?) {
        if declared.scorers.iter().any(|d| d.scorer.name == sc.name) {
            resumed.push((sc.name.clone(), scorer_parts.start_own(sc, model)?));
        } else {
            scorers.push(scorer_parts.start(sc, model, shutdown.clone())?);
        }
    }
    let ingest_ended = Arc::new(tokio::sync::Notify::new());
    let ended = ingest_ended.clone();
    let ingest_task = tokio::task::spawn_blocking(move || {
        let r = ingest_thread
            .join()
            .unwrap_or_else(|_| Err(anyhow!("the ingest thread panicked")));
        ended.notify_one();
        r
    });

    let permits = match config.http.max_concurrent_extractions {
        0 => std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(2),
        n => n,
    };
    // Set when the server starts to stop: extractions running then stop at their next
    // iteration, so that shutdown is bounded whatever they were asked.
    let stopping = Arc::new(AtomicBool::new(false));
    {
        let (s, flag) = (shutdown.clone(), stopping.clone());
        tokio::spawn(async move {
            s.wait().await;
            flag.store(true, std::sync::atomic::Ordering::SeqCst);
        });
    }
    let extractions = api::Extractions::new(
        permits,
        config.http.max_queued_extractions,
        Some(Duration::from_millis(config.http.extraction_timeout_ms)),
        stopping,
    );
    // The history's extractions take the API's permits: together they use at most
    // http.max_concurrent_extractions cores.
    crate::state::recorder::spawn_recorders(
        &streams,
        extractions.running.clone(),
        shutdown.clone(),
    );
    let declarations = {
        let (check_config, check_clients, check_registry) =
            (config.clone(), clients.clone(), registry.clone());
        let feature_metrics = metrics.clone();
        let (config, registry, metrics, streams) = (
            config.clone(),
            registry.clone(),
            metrics.clone(),
            streams.clone(),
        );
        let follow_shutdown = shutdown.clone();
        let (permits, shutdown) = (extractions.running.clone(), shutdown.clone());
        let build: crate::declared::Build = Box::new(move |sc, restore, epoch| {
            let (snapshot, mut positions) = match config.state.dir() {
                Some(dir) if restore => {
                    let (mut snaps, positions, _, _) =
                        ingest::load_checkpoints(&dir, std::slice::from_ref(sc))?;
                    (snaps.remove(&sc.name), positions)
                }
                _ => Default::default(),
            };
            let mut handle = stream_handle(&config, sc, snapshot, registry.as_ref(), &metrics)?;
            handle.epoch = epoch;
            let handle = Arc::new(handle);
            crate::state::recorder::spawn_recorder(
                handle.clone(),
                permits.clone(),
                shutdown.clone(),
            );
            Ok((handle, positions.remove(&sc.topic()).unwrap_or_default()))
        });
        let check_topics_clients = check_clients.clone();
        let check: crate::declared::Check = Box::new(move |sc| {
            let mut one = check_config.clone();
            one.streams = vec![sc.clone()];
            one.feature_streams.clear();
            one.scorers.clear();
            crate::kafka::topics::check_declared(&one, &check_clients)?;
            // The registry question of `ravel check`, for a stream that reads its schemas
            // from one (the configuration's check made sure it is configured).
            match &check_registry {
                Some(r) if !sc.format.is_ravel() && sc.avro_schema_file.is_none() => {
                    r.serves(sc.format)
                }
                _ => Ok(()),
            }
        });
        let forget_health = health.clone();
        let hooks = crate::declared::Hooks {
            feature_streams: feature_streams.clone(),
            declare_metrics: Box::new(move |f| {
                feature_metrics.declare_feature_stream(&f.name, f.workers)
            }),
            build,
            check,
            check_topics: Box::new(move |one| {
                crate::kafka::topics::check_declared(one, &check_topics_clients)
            }),
            start_scorer: Box::new(move |sc, model| scorer_parts.start_own(sc, model)),
            forget_scorer: Box::new(move |name| forget_health.remove_scorer(name)),
            log: declaration_log.clone(),
        };
        let d = Arc::new(crate::declared::Declarations::new(
            base, declared, streams, hooks, queue,
        ));
        for (name, running) in resumed {
            d.resumed(&name, running);
        }
        if let Some(log) = &declaration_log {
            follow_declarations(&d, log, follow_shutdown);
        }
        d
    };
    let declarations_at_exit = declarations.clone();
    let state = AppState {
        declarations,
        admin_token: Arc::new(config.http.admin_token.clone()),
        streams,
        feature_streams,
        producer,
        metrics,
        ready,
        health,
        extractions,
        sampler: Arc::new(crate::propose::Sampler::new(
            clients.clone(),
            registry.clone(),
        )),
    };
    let open_connections = state.metrics.api.http_open_connections.clone();
    let mut app = api::router(state, config.http.body_limit_bytes);
    if !config.http.token.is_empty() {
        let token = Arc::new(config.http.token.expose().to_string());
        app = app.layer(axum::middleware::from_fn_with_state(
            token,
            api::auth::require_token,
        ));
    }
    let app = app.layer(tower_http::timeout::RequestBodyTimeoutLayer::new(
        Duration::from_millis(config.http.body_read_timeout_ms),
    ));
    let stop = {
        let s = shutdown.clone();
        async move {
            tokio::select! {
                _ = s.wait() => {}
                _ = ingest_ended.notified() => {}
            }
        }
    };
    crate::api::http::serve(listener, app, config.http.limits(), open_connections, stop).await;
    let r = ingest_task.await.map_err(|e| anyhow!("ingest task: {e}"))?;
    // Scorers stop at shutdown; an ingest that failed on its own leaves them to the exit.
    if shutdown.is_triggered() {
        let _ = tokio::task::spawn_blocking(move || declarations_at_exit.stop_scorers()).await;
        for s in scorers {
            let _ = tokio::task::spawn_blocking(move || s.join()).await;
        }
    }
    if r.is_ok() {
        tracing::info!("stopped cleanly");
    }
    r
}

/// What starting a scorer needs beside its declaration: the file's at start, the API's then
/// and later (`crate::declared::scorers`).
struct ScorerParts {
    clients: KafkaClients,
    config: Config,
    metrics: Arc<Metrics>,
    health: Arc<crate::health::Health>,
    streams: Arc<Streams>,
    runtime: tokio::runtime::Handle,
    /// The service's shutdown.
    shutdown: Shutdown,
}

impl ScorerParts {
    /// Starts scorer `sc` with its checked `model`; it runs until `shutdown`.
    fn start(
        &self,
        sc: &crate::config::scorers::ScorerConfig,
        model: ravel_core::solve::Request,
        shutdown: Shutdown,
    ) -> anyhow::Result<std::thread::JoinHandle<()>> {
        let stream = self
            .streams
            .get(&sc.stream)
            .ok_or_else(|| anyhow!("scorer '{}': no stream '{}'", sc.name, sc.stream))?;
        crate::score::spawn(crate::score::ScorerSetup {
            config: sc.clone(),
            model,
            stream,
            clients: self.clients.clone(),
            dlq: self.config.dlq.clone(),
            dead_letter: self.config.ingest.dead_letter,
            topic_of_stream: self
                .streams
                .by_topic(&sc.topic)
                .map(|h| h.name().to_string()),
            metrics: self.metrics.clone(),
            health: self.health.clone(),
            assignment: self.config.kafka.assignment,
            shared: self.config.state.store == StoreKind::Kafka,
            shutdown,
        })
    }

    /// Starts a scorer declared over the API: with a stop of its own, which the service's
    /// shutdown pulls too.
    fn start_own(
        &self,
        sc: &crate::config::scorers::ScorerConfig,
        model: ravel_core::solve::Request,
    ) -> anyhow::Result<crate::declared::scorers::Running> {
        let (stop, own) = crate::shutdown::channel();
        let stop = Arc::new(stop);
        let (pull, service) = (stop.clone(), self.shutdown.clone());
        self.runtime.spawn(async move {
            service.wait().await;
            pull.trigger();
        });
        Ok(crate::declared::scorers::Running {
            thread: self.start(sc, model, own)?,
            stop,
        })
    }
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
