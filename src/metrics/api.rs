//! The HTTP API's metrics (`crate::api`): requests and their latency, open connections, and
//! extractions (time, running, waiting, refused).

use super::Registrar;
use prometheus::{HistogramVec, IntCounterVec, IntGauge};

/// Requests, connections and extractions of the HTTP API.
pub struct ApiMetrics {
    /// Time of one model / path extraction (includes building the Gram problem).
    pub extraction_seconds: HistogramVec,
    /// Extractions not answered: `busy` (queue full), `timeout` (deadline), `cancelled`
    /// (client gone or server stopping).
    pub extractions_refused: IntCounterVec,
    /// Extractions computing now, and requests waiting for a slot.
    pub extractions_running: IntGauge,
    pub extractions_waiting: IntGauge,
    pub http_requests: IntCounterVec,
    pub http_request_seconds: HistogramVec,
    /// HTTP connections open now (at most `http.max_connections`).
    pub http_open_connections: IntGauge,
}

impl ApiMetrics {
    pub(super) fn new(r: &Registrar) -> ApiMetrics {
        ApiMetrics {
            extraction_seconds: r.histogram(
                "ravel_extraction_seconds",
                "Time of one model extraction from the statistics",
                &["stream", "kind", "method"],
                super::latency_buckets(),
            ),
            extractions_refused: r.counter(
                "ravel_extractions_refused_total",
                "Extractions not answered, by reason (busy, timeout, cancelled)",
                &["reason"],
            ),
            extractions_running: r.scalar_gauge(
                "ravel_extractions_running",
                "Extractions computing now (at most http.max_concurrent_extractions)",
            ),
            extractions_waiting: r.scalar_gauge(
                "ravel_extractions_waiting",
                "Extraction requests waiting for a slot (at most http.max_queued_extractions)",
            ),
            http_requests: r.counter(
                "ravel_http_requests_total",
                "HTTP requests, by route, method and status",
                &["route", "method", "status"],
            ),
            http_request_seconds: r.histogram(
                "ravel_http_request_duration_seconds",
                "HTTP request latency",
                &["route", "method"],
                super::latency_buckets(),
            ),
            http_open_connections: r.scalar_gauge(
                "ravel_http_open_connections",
                "HTTP connections open now (at most http.max_connections)",
            ),
        }
    }
}
