//! `[http]`: the API's listen address, its bounds on clients and extractions, and the token
//! that state-changing requests carry (`Secret`, never printed).

use anyhow::{Context, bail};
use serde::{Deserialize, Serialize};
use std::time::Duration;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HttpConfig {
    /// Listen address of the HTTP API.
    pub addr: String,
    /// Largest request body accepted, in bytes (larger bodies get 413).
    pub body_limit_bytes: usize,
    /// Model extractions run at once (CPU-bound); 0 means one per CPU core.
    pub max_concurrent_extractions: usize,
    /// Extraction requests that may wait for a slot; past it, 503 `busy` with Retry-After.
    pub max_queued_extractions: usize,
    /// Time one extraction may compute before it is stopped (503 `extraction_timeout`).
    pub extraction_timeout_ms: u64,
    /// Connections open at once; past it the next is accepted when one closes.
    pub max_connections: usize,
    /// Time a client has to send a request's headers (new or kept-alive connection).
    pub header_read_timeout_ms: u64,
    /// Time a client has to send a request's body.
    pub body_read_timeout_ms: u64,
    /// On shutdown, time open connections get to finish before they are dropped.
    pub drain_timeout_ms: u64,
    /// Bearer token that state-changing requests (PUT, POST that writes, DELETE) must carry;
    /// empty: no token required. Prefer `token_file` or `RAVEL_HTTP__TOKEN` to the file.
    pub token: Secret,
    /// File holding the token (read at start, surrounding whitespace trimmed).
    pub token_file: String,
    /// Bearer token of the declaration routes (`PUT` and `DELETE /v1/streams/{name}`: streams
    /// declared at run time); empty: those routes answer 403, streams come from the file only.
    pub admin_token: Secret,
    /// File holding the admin token (read at start, surrounding whitespace trimmed).
    pub admin_token_file: String,
}

/// A secret string (a token, a password): never printed by `Debug`, so a logged or
/// panicking configuration does not leak it.
#[derive(Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Secret(pub String);

impl Secret {
    pub fn expose(&self) -> &str {
        &self.0
    }
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl std::fmt::Debug for Secret {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(if self.0.is_empty() { "\"\"" } else { "\"***\"" })
    }
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            addr: "127.0.0.1:8080".into(),
            body_limit_bytes: 4 << 20,
            max_concurrent_extractions: 0,
            max_queued_extractions: 64,
            extraction_timeout_ms: 30_000,
            max_connections: 1024,
            header_read_timeout_ms: 10_000,
            body_read_timeout_ms: 30_000,
            drain_timeout_ms: 10_000,
            token: Secret::default(),
            token_file: String::new(),
            admin_token: Secret::default(),
            admin_token_file: String::new(),
        }
    }
}

/// What one client may hold (config `http.*`).
#[derive(Debug, Clone)]
pub struct HttpLimits {
    pub max_connections: usize,
    pub header_read_timeout: Duration,
    pub drain_timeout: Duration,
}

/// `<key>_file` read into `<key>` (trimmed); both set is an error.
fn read_secret_file(key: &str, file: &str, secret: &mut Secret) -> anyhow::Result<()> {
    if file.is_empty() {
        return Ok(());
    }
    if !secret.is_empty() {
        bail!("set one of {key} and {key}_file, not both");
    }
    let text =
        std::fs::read_to_string(file).with_context(|| format!("{key}_file: cannot read {file}"))?;
    let token = text.trim();
    if token.is_empty() {
        bail!("{key}_file: {file} is empty");
    }
    *secret = Secret(token.to_string());
    Ok(())
}

impl HttpConfig {
    /// The bounds of the HTTP server (`api::http`): every limit positive, timeouts at most an
    /// hour (a typo of a few zeros should not disable them).
    pub(super) fn check(&self) -> anyhow::Result<()> {
        const HOUR_MS: u64 = 3_600_000;
        if !(1..=1_000_000).contains(&self.max_connections) {
            bail!(
                "http.max_connections must lie in 1..=1000000, got {}",
                self.max_connections
            );
        }
        for (field, v) in [
            ("http.header_read_timeout_ms", self.header_read_timeout_ms),
            ("http.body_read_timeout_ms", self.body_read_timeout_ms),
            ("http.drain_timeout_ms", self.drain_timeout_ms),
            ("http.extraction_timeout_ms", self.extraction_timeout_ms),
        ] {
            if !(1..=HOUR_MS).contains(&v) {
                bail!("{field} must lie in 1..={HOUR_MS} (one hour), got {v}");
            }
        }
        if self.max_queued_extractions > 100_000 {
            bail!(
                "http.max_queued_extractions must lie in 0..=100000, got {}",
                self.max_queued_extractions
            );
        }
        for (key, t) in [
            ("http.token", self.token.expose()),
            ("http.admin_token", self.admin_token.expose()),
        ] {
            if !t.is_empty() && (t.len() < 16 || !t.chars().all(|c| c.is_ascii_graphic())) {
                bail!(
                    "{key} must be at least 16 printable ASCII characters without spaces (e.g. `openssl rand -hex 32`)"
                );
            }
        }
        if !self.admin_token.is_empty() && self.admin_token == self.token {
            bail!(
                "http.admin_token is the same as http.token: the admin token declares and retires \
                 streams, give it a value of its own"
            );
        }
        Ok(())
    }

    /// Reads `token_file` into `token` and `admin_token_file` into `admin_token` (at load, so
    /// a missing file stops the start).
    pub(super) fn read_token_file(&mut self) -> anyhow::Result<()> {
        read_secret_file("http.token", &self.token_file, &mut self.token)?;
        read_secret_file(
            "http.admin_token",
            &self.admin_token_file,
            &mut self.admin_token,
        )
    }

    pub fn limits(&self) -> crate::config::HttpLimits {
        crate::config::HttpLimits {
            max_connections: self.max_connections,
            header_read_timeout: Duration::from_millis(self.header_read_timeout_ms),
            drain_timeout: Duration::from_millis(self.drain_timeout_ms),
        }
    }
}
