//! The service: wires configuration, ingest, the state and the HTTP API together.
//!
//! `run(config, brokers, listener, shutdown)` is the service itself: it takes an already bound
//! listener and a shutdown signal, so tests start the real service on `127.0.0.1:0` against
//! a real broker. `cli::serve` is the command around it (embedded broker, demo producer,
//! signals). `run` starts the parts in turn, each built by a method of its own: `restore`
//! (the API's declarations and the checkpoints of an earlier run), `parts` (the shared parts,
//! the topic check, the state topic, ingest, scorers, recorders, declarations, the HTTP
//! application) and `wiring` (what declarations act with: `crate::declared::Service`).
//!
//! Shutdown order: ingest stops reading, folds what it holds, writes its last checkpoint and
//! commits synchronously; HTTP stops accepting and drains the requests in flight; then the
//! process exits 0.

mod parts;
mod restore;
mod wiring;

use crate::config::{Config, LogConfig, LogFormat};
use crate::shutdown::Shutdown;
use parts::Service;
use restore::Restored;
use std::sync::Arc;
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

/// Runs the service until `shutdown` fires (or ingest fails): consumes the configured streams
/// from `brokers` and serves the API on `listener`.
pub async fn run(
    config: Config,
    brokers: String,
    listener: TcpListener,
    shutdown: Shutdown,
) -> anyhow::Result<()> {
    let mut restored = Restored::load(config)?;
    let service = Service::new(&mut restored, &brokers, &shutdown)?;
    service.check_topics().await;
    let state_topic = service.state_topic(&shutdown)?;
    let queue = Arc::new(crate::declared::Queue::default());
    let checkpoints = std::mem::take(&mut restored.checkpoints);
    let ingest = service.start_ingest(checkpoints, state_topic.reader, &queue, &shutdown)?;
    let scorers = service.start_scorers(&restored.declared, &shutdown)?;
    service.start_recorders(&shutdown);
    let log = state_topic.declarations;
    let declarations = service.declarations(restored, log, queue, scorers.resumed, &shutdown);
    let app = service.app(declarations.clone());
    let open_connections = service.wiring.metrics.api.http_open_connections.clone();
    let limits = service.wiring.config.http.limits();
    let stop = ingest.or_shutdown(&shutdown);
    crate::api::http::serve(listener, app, limits, open_connections, stop).await;
    ingest.finish(declarations, scorers.file, &shutdown).await
}
