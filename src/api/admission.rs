//! Admission control for extractions, the API's CPU-bound work: at most
//! `http.max_concurrent_extractions` run at once on the blocking pool, at most
//! `http.max_waiting_extractions` wait for a slot (503 `busy` beyond), each under
//! `http.extraction_timeout_ms`, and each cancelled when its client goes away or the server
//! stops. `AppState::extract` is the one way a handler runs one.

use super::{ApiError, AppState};
use ravel_core::solve::interrupt::{Interrupt, Interruption};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};
use tokio::sync::Semaphore;

/// The bounds on extraction work: how many run at once, how many may wait for a slot, how
/// long one may take, and the flag that stops them all when the server stops.
#[derive(Clone)]
pub struct Extractions {
    pub running: Arc<Semaphore>,
    pub waiting: Arc<AtomicUsize>,
    pub max_waiting: usize,
    /// None: no deadline.
    pub timeout: Option<Duration>,
    pub stopping: Arc<AtomicBool>,
}

impl Extractions {
    pub fn new(
        concurrent: usize,
        max_waiting: usize,
        timeout: Option<Duration>,
        stopping: Arc<AtomicBool>,
    ) -> Self {
        Extractions {
            running: Arc::new(Semaphore::new(concurrent)),
            waiting: Arc::new(AtomicUsize::new(0)),
            max_waiting,
            timeout,
            stopping,
        }
    }
}

/// Counts a request waiting for an extraction slot while it waits.
struct Waiting(Arc<AtomicUsize>, prometheus::IntGauge);
impl Drop for Waiting {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
        self.1.dec();
    }
}

/// Counts an extraction while it computes (held by the blocking task).
struct Running(prometheus::IntGauge);
impl Drop for Running {
    fn drop(&mut self) {
        self.0.dec();
    }
}

/// Cancels the extraction when the request's future is dropped before it finished: the
/// client went away, or the server dropped the connection at the end of its drain.
struct CancelOnDrop(Option<Interrupt>);
impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(i) = self.0.take() {
            i.cancel();
        }
    }
}

impl AppState {
    /// Runs a CPU-bound extraction on the blocking pool: at most `running` at once, at most
    /// `max_waiting` queued (503 `busy` beyond), under a deadline, and cancelled when the
    /// client goes away or the server stops. Times it.
    pub(super) async fn extract<T: Send + 'static>(
        &self,
        stream: &str,
        kind: &'static str,
        method: &'static str,
        f: impl FnOnce() -> Result<T, ApiError> + Send + 'static,
    ) -> Result<T, ApiError> {
        let ex = &self.extractions;
        if ex.stopping.load(Ordering::SeqCst) {
            return Err(ApiError::shutting_down());
        }
        let permit = match ex.running.clone().try_acquire_owned() {
            Ok(p) => p,
            Err(_) => {
                if ex.waiting.fetch_add(1, Ordering::SeqCst) >= ex.max_waiting {
                    ex.waiting.fetch_sub(1, Ordering::SeqCst);
                    self.metrics
                        .api
                        .extractions_refused
                        .with_label_values(&["busy"])
                        .inc();
                    return Err(ApiError::busy(ex.max_waiting));
                }
                self.metrics.api.extractions_waiting.inc();
                let _waiting = Waiting(
                    ex.waiting.clone(),
                    self.metrics.api.extractions_waiting.clone(),
                );
                ex.running
                    .clone()
                    .acquire_owned()
                    .await
                    .map_err(|_| ApiError::shutting_down())?
            }
        };
        let interrupt = Interrupt::new(ex.timeout).linked(ex.stopping.clone());
        let mut guard = CancelOnDrop(Some(interrupt.clone()));
        let start = Instant::now();
        self.metrics.api.extractions_running.inc();
        let running = Running(self.metrics.api.extractions_running.clone());
        // Counted on the blocking thread: when the client went away, nobody awaits the result.
        let refused = self.metrics.api.extractions_refused.clone();
        let result = tokio::task::spawn_blocking(move || {
            let (_permit, _running) = (permit, running);
            let r = interrupt.run(f);
            if let Err(why) = &r {
                let reason = match why {
                    Interruption::Deadline(_) => "timeout",
                    Interruption::Cancelled => "cancelled",
                };
                refused.with_label_values(&[reason]).inc();
            }
            r
        })
        .await
        .map_err(|e| ApiError::internal(format!("extraction failed: {e}")))?;
        guard.0 = None;
        self.metrics
            .api
            .extraction_seconds
            .with_label_values(&[stream, kind, method])
            .observe(start.elapsed().as_secs_f64());
        match result {
            Ok(answer) => answer,
            Err(why @ Interruption::Deadline(_)) => Err(ApiError::extraction_timeout(why)),
            Err(Interruption::Cancelled) => Err(ApiError::shutting_down()),
        }
    }
}
