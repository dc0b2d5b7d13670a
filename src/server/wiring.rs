//! The service's parts that declarations act with (`crate::declared::Service`): a stream's
//! handle built as the service builds it (restored, its metrics declared, its codec's wire and
//! field sampling set up, its history recorder started), the cluster's and the registry's
//! questions about a declaration, and scorers started and stopped. The file's streams and
//! scorers are built by the same methods at start.

use crate::config::{Config, StoreKind, StreamConfig};
use crate::ingest::KafkaClients;
use crate::metrics::Metrics;
use crate::shutdown::Shutdown;
use crate::state::streams::{Snapshot, Stats, StreamHandle, Streams};
use anyhow::anyhow;
use std::collections::BTreeMap;
use std::sync::Arc;
use tokio::sync::Semaphore;

/// What building and starting a declared part needs: the service's configuration and shared
/// parts. One a service.
pub(super) struct Wiring {
    /// The configuration with the API's declarations restored at start.
    pub config: Config,
    pub clients: KafkaClients,
    pub metrics: Arc<Metrics>,
    pub health: Arc<crate::health::Health>,
    /// The Schema Registry client of the streams of schema'd formats.
    pub registry: Option<Arc<crate::codec::schemad::SchemaRegistry>>,
    pub streams: Arc<Streams>,
    /// The extraction slots the history recorders take (`http.max_concurrent_extractions`).
    pub permits: Arc<Semaphore>,
    pub runtime: tokio::runtime::Handle,
    /// The service's shutdown.
    pub shutdown: Shutdown,
}

impl Wiring {
    /// A stream's handle as the service starts it: its snapshot restored (`snapshot`) or
    /// empty, its metrics declared, its decoding of schema'd values and its field sampling set
    /// up. At start and for streams declared over the API.
    pub fn stream_handle(
        &self,
        sc: &StreamConfig,
        snapshot: Option<Snapshot>,
    ) -> anyhow::Result<StreamHandle> {
        let snap = match snapshot {
            Some(s) => s,
            None => Snapshot::whole(Stats::new(sc.task, sc.p(), sc.schedule()?), None, None),
        };
        let config = &self.config;
        self.metrics.declare_stream(&sc.name);
        if config.state.dir().is_some() || config.state.store == StoreKind::Kafka {
            self.metrics.declare_checkpoints(&sc.name);
        }
        self.metrics.set_stream_gauges(
            &sc.name,
            snap.stats.n(),
            snap.stats.current_alpha(),
            snap.as_of_ms,
        );
        let history = sc.history(&config.history)?;
        let mut handle = StreamHandle::new(sc.clone(), snap, history)?;
        handle.codec.wire = crate::codec::schemad::Wire::of_stream(sc, self.registry.as_ref())?;
        handle.sample_fields(config.ingest.field_check_events);
        Ok(handle)
    }

    /// Starts scorer `sc` with its checked `model`; it runs until `shutdown`.
    pub fn start_scorer_until(
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
}

impl crate::declared::Service for Wiring {
    fn build_stream(
        &self,
        sc: &StreamConfig,
        restore: bool,
        epoch: u64,
    ) -> anyhow::Result<(Arc<StreamHandle>, BTreeMap<i32, i64>)> {
        let (snapshot, mut positions) = match self.config.state.dir() {
            Some(dir) if restore => {
                let (mut snaps, positions, _, _) =
                    crate::ingest::load_checkpoints(&dir, std::slice::from_ref(sc))?;
                (snaps.remove(&sc.name), positions)
            }
            _ => Default::default(),
        };
        let mut handle = self.stream_handle(sc, snapshot)?;
        handle.epoch = epoch;
        let handle = Arc::new(handle);
        crate::state::recorder::spawn_recorder(
            handle.clone(),
            self.permits.clone(),
            self.shutdown.clone(),
        );
        Ok((handle, positions.remove(&sc.topic()).unwrap_or_default()))
    }

    fn check_stream(&self, sc: &StreamConfig) -> Result<(), String> {
        let mut one = self.config.clone();
        one.streams = vec![sc.clone()];
        one.feature_streams.clear();
        one.scorers.clear();
        // The registry question of `ravel check`, for a stream that reads its schemas from
        // one (the configuration's check made sure it is configured); before the topics, whose
        // check creates the dead-letter topic: a refused declaration creates nothing.
        match &self.registry {
            Some(r) if !sc.format.is_ravel() && sc.avro_schema_file.is_none() => {
                r.serves(sc.format)?
            }
            _ => {}
        }
        crate::kafka::topics::check_declared(&one, &self.clients)
    }

    fn look_at_fields(&self, sc: &StreamConfig) -> crate::declared::data::Looked {
        use crate::declared::data;
        match data::consumer(&self.clients) {
            Ok(c) => data::look(
                sc,
                &c,
                self.registry.as_ref(),
                None,
                std::time::Instant::now() + data::TIMEOUT,
            ),
            Err(e) => data::Looked::Failed(e),
        }
    }

    fn check_topics(&self, config: &Config) -> Result<(), String> {
        crate::kafka::topics::check_declared(config, &self.clients)
    }

    fn declare_feature_stream(&self, f: &crate::config::FeatureStreamConfig) {
        self.metrics.declare_feature_stream(&f.name, f.workers)
    }

    /// A scorer declared over the API: with a stop of its own, which the service's shutdown
    /// pulls too.
    fn start_scorer(
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
            thread: self.start_scorer_until(sc, model, own)?,
            stop,
        })
    }

    fn forget_scorer(&self, name: &str) {
        self.health.remove_scorer(name)
    }
}
