//! The HTTP accept loop: the API's router served over HTTP/1.1 with bounds on what a client
//! can hold. `axum::serve` has no connection cap and no header timeout, so a few thousand
//! clients that open a connection and trickle bytes kept every socket open until the process
//! ran out of file descriptors (and then `/healthz`, the Kafka clients and the checkpoint
//! files failed with it). Here, following axum's serve-with-hyper pattern:
//!
//! - at most `max_connections` connections are open at once; past it the next connection is
//!   accepted when one closes (the kernel's backlog holds it meanwhile);
//! - a client has `header_read_timeout` to send a request's headers, on a new connection and
//!   between requests of a kept-alive one (hyper closes it otherwise), so idle and trickling
//!   clients give their slot back;
//! - the body has `body_read_timeout` (tower-http's request body timeout, applied by
//!   `server::run`);
//! - on shutdown the listener closes at once and open connections get `drain_timeout` to
//!   finish; the ones still open after it are dropped, so SIGTERM exits in bounded time.

use axum::Router;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use hyper_util::service::TowerToHyperService;
use prometheus::IntGauge;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;

use crate::config::HttpLimits as Limits;

/// Serves `app` on `listener` until `stop` resolves, then drains (see the module doc).
/// `open` is the gauge of open connections.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: Limits,
    open: IntGauge,
    stop: impl Future<Output = ()>,
) {
    let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let graceful = GracefulShutdown::new();
    let mut http = hyper::server::conn::http1::Builder::new();
    http.timer(TokioTimer::new())
        .header_read_timeout(limits.header_read_timeout);
    tokio::pin!(stop);
    loop {
        let slot = tokio::select! {
            s = slots.clone().acquire_owned() => s.expect("the semaphore is never closed"),
            _ = &mut stop => break,
        };
        let stream = tokio::select! {
            r = listener.accept() => match r {
                Ok(accepted) => accepted,
                Err(e) => {
                    // EMFILE and friends: the process is out of descriptors for a moment
                    // (Kafka sockets, checkpoint files). Back off instead of spinning.
                    tracing::warn!(error = %e, "accepting an HTTP connection failed");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            _ = &mut stop => break,
        };
        let (stream, peer) = stream;
        let _ = stream.set_nodelay(true);
        // The peer's address, for the log of declarations (`api::declarations`): one layer a
        // connection (not a request).
        let service = TowerToHyperService::new(
            app.clone()
                .layer(axum::Extension(axum::extract::ConnectInfo(peer))),
        );
        let conn = http.serve_connection(TokioIo::new(stream), service);
        let conn = graceful.watch(conn);
        let open = open.clone();
        open.inc();
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!(error = %e, "HTTP connection ended with an error");
            }
            open.dec();
            drop(slot);
        });
    }
    drop(listener);
    tokio::select! {
        _ = graceful.shutdown() => {}
        _ = tokio::time::sleep(limits.drain_timeout) => {
            tracing::warn!(
                drain_timeout_ms = limits.drain_timeout.as_millis() as u64,
                "HTTP connections still open after the drain timeout are dropped"
            );
        }
    }
}
