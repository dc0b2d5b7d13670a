//! The Schema Registry client: schemas fetched by id (or by GUID, for ids carried in the
//! `__value_schema_id` header) over Confluent's REST API, once, and kept in a bounded cache.
//!
//! Outages are not bad messages: while the registry cannot answer (unreachable, a 5xx, a
//! timeout, our credentials refused) the fetch waits with backoff and tries again, and
//! `/readyz` says why (`Health::set_schema_registry`); the message it was fetched for is
//! decoded once the registry answers, so nothing is dead-lettered for an outage. A stop
//! requested meanwhile ends the wait: the message is left unread (`Reason::Unavailable`), its
//! partition's position stays before it, and the next start reads it again. Only an
//! answer about the schema itself makes the message a bad one (reason `schema`): the
//! registry's own "not found" (a 404 with its error body, `error_code` 40403, or 40401 and
//! 40402 for an imported subject version), or a schema that does not parse.
//!
//! A registry is a registry: before its answers count, each URL must answer `GET /subjects`
//! (a route every Confluent-compatible registry serves: Confluent's, Karapace, Redpanda,
//! Apicurio's `ccompat` API) with a list of subjects. A URL that answers anything else (a
//! plain 404 or an HTML page: a wrong path such as `/apis/ccompat/v7` where the registry is
//! served at the root) is an outage like any other, so a wrong `schema_registry.url` makes
//! messages wait and `/readyz` say why instead of dead-lettering every message as `schema`.
//! The service probes at start (`watch`) so that `/readyz` says it before the first message.
//!
//! The client is blocking (ureq): it runs on the ingest thread or a decoding thread, never on
//! the async runtime. Secrets (the password, the token) go into the `Authorization` header
//! only; nothing here logs them.

use crate::config::schemas::{SchemaRegistryConfig, ValueFormat};
use crate::health::Health;
use crate::shutdown::Shutdown;
use base64::Engine;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Largest registry answer read (a schema with its references).
const MAX_ANSWER_BYTES: u64 = 8 << 20;

/// How a message names its schema.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum SchemaRef {
    /// The 4-byte id of the Confluent framing.
    Id(u32),
    /// A GUID, from the `__value_schema_id` header of newer serializers.
    Guid(String),
}

impl std::fmt::Display for SchemaRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SchemaRef::Id(id) => write!(f, "schema id {id}"),
            SchemaRef::Guid(g) => write!(f, "schema GUID {g}"),
        }
    }
}

/// The most schemas one schema may import, directly or through others (each fetched once).
pub const MAX_REFERENCES: usize = 64;

/// The registry's answer for one schema: its type and text (for Protobuf, the text may be
/// the base64 of a serialized `FileDescriptorProto`, asked for with `format=serialized`).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Fetched {
    /// `AVRO` (the registry's default when it names none), `PROTOBUF` or `JSON`.
    pub schema_type: String,
    pub schema: String,
    /// The schemas it imports (Protobuf imports, Avro named types).
    pub references: Vec<Reference>,
    /// Every schema it imports, directly or through others, by import name, with their text
    /// (fetched with it, each once, at most `MAX_REFERENCES`).
    pub imports: Vec<(String, String)>,
}

/// A schema another imports: the name it is imported by (a `.proto` file name) and the
/// subject version the registry keeps it under.
#[derive(Debug, Clone, PartialEq)]
pub struct Reference {
    pub name: String,
    pub subject: String,
    pub version: i64,
}

/// Why a fetch gave no schema.
#[derive(Debug, Clone, PartialEq)]
pub enum FetchError {
    /// The registry answered: no such schema (404), or an answer that is not a schema.
    NotFound(String),
    /// The service stops while the registry is away: the message is neither folded nor
    /// dead-lettered, and its partition's position stays before it.
    Stopping,
}

/// One parsed schema, as the caller keeps it (`super::Parsed`).
pub type Cached<T> = Arc<T>;

/// Schema Registry client with its cache of parsed schemas (parsed by the caller, once).
pub struct Registry<T> {
    urls: Vec<String>,
    agent: ureq::Agent,
    authorization: Option<String>,
    cache: Mutex<HashMap<SchemaRef, Cached<T>>>,
    max_schemas: usize,
    health: Arc<Health>,
    shutdown: Option<Shutdown>,
    /// The URLs that answered `GET /subjects` as a Schema Registry (`is_registry`): only
    /// their "not found" makes a message a bad one.
    verified: Mutex<std::collections::HashSet<String>>,
}

impl<T> std::fmt::Debug for Registry<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("urls", &self.urls)
            .finish()
    }
}

/// Reads a PEM file of `key` (a CA, a certificate, a key).
fn pem(key: &str, path: &std::path::Path) -> anyhow::Result<Vec<u8>> {
    std::fs::read(path)
        .map_err(|e| anyhow::anyhow!("schema_registry.{key}: cannot read {}: {e}", path.display()))
}

/// The certificates of a PEM file's bytes (other items skipped).
fn certificates(pem: &[u8]) -> Vec<ureq::tls::Certificate<'static>> {
    ureq::tls::parse_pem(pem)
        .filter_map(|item| match item {
            Ok(ureq::tls::PemItem::Certificate(c)) => Some(c),
            _ => None,
        })
        .collect()
}

impl<T> Registry<T> {
    pub fn new(
        config: &SchemaRegistryConfig,
        health: Arc<Health>,
        shutdown: Option<Shutdown>,
    ) -> anyhow::Result<Registry<T>> {
        use ureq::tls::{ClientCert, PrivateKey, RootCerts, TlsConfig};
        let mut tls = TlsConfig::builder();
        if let Some(ca) = &config.ca_file {
            let certs = certificates(&pem("ca_file", ca)?);
            if certs.is_empty() {
                anyhow::bail!(
                    "schema_registry.ca_file: {} holds no PEM certificate",
                    ca.display()
                );
            }
            tls = tls.root_certs(RootCerts::new_with_certs(&certs));
        }
        if let (Some(cert), Some(key)) = (&config.cert_file, &config.key_file) {
            let chain = certificates(&pem("cert_file", cert)?);
            let key = PrivateKey::from_pem(&pem("key_file", key)?).map_err(|e| {
                anyhow::anyhow!(
                    "schema_registry.key_file: {} holds no PEM private key ({e})",
                    key.display()
                )
            })?;
            tls = tls.client_cert(Some(ClientCert::new_with_certs(&chain, key)));
        }
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_global(Some(Duration::from_millis(config.timeout_ms)))
            .http_status_as_error(false)
            .tls_config(tls.build())
            .build()
            .into();
        let authorization = if !config.bearer_token.is_empty() {
            Some(format!("Bearer {}", config.bearer_token))
        } else if !config.basic_auth_user.is_empty() {
            let pair = format!("{}:{}", config.basic_auth_user, config.basic_auth_password);
            Some(format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(pair)
            ))
        } else {
            None
        };
        Ok(Registry {
            urls: config.urls(),
            agent,
            authorization,
            cache: Mutex::new(HashMap::new()),
            max_schemas: config.max_schemas,
            health,
            shutdown,
            verified: Mutex::new(Default::default()),
        })
    }

    /// The parsed schema of `at`: from the cache, or fetched (waiting out outages) and parsed
    /// by `parse` (its error makes the message a bad one, as a 404 does).
    pub fn get(
        &self,
        at: &SchemaRef,
        serialized: bool,
        parse: impl FnOnce(Fetched) -> Result<T, String>,
    ) -> Result<Cached<T>, FetchError> {
        if let Some(hit) = self.lock().get(at) {
            return Ok(hit.clone());
        }
        let fetched = self.fetch_with_imports(at, serialized)?;
        let parsed = Arc::new(parse(fetched).map_err(FetchError::NotFound)?);
        let mut cache = self.lock();
        if cache.len() >= self.max_schemas {
            // Bounded: a topic that cycles through more ids than this refetches them.
            cache.clear();
        }
        cache.insert(at.clone(), parsed.clone());
        Ok(parsed)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<SchemaRef, Cached<T>>> {
        crate::lock(&self.cache)
    }

    /// Fetches `at` and every schema it imports (breadth first, each import name once), as
    /// `fetch` does each.
    fn fetch_with_imports(&self, at: &SchemaRef, serialized: bool) -> Result<Fetched, FetchError> {
        let mut fetched = self.fetch(&Target::Schema(at), serialized)?;
        let mut queue: std::collections::VecDeque<Reference> =
            fetched.references.iter().cloned().collect();
        while let Some(r) = queue.pop_front() {
            if fetched.imports.iter().any(|(name, _)| *name == r.name) {
                continue;
            }
            if fetched.imports.len() == MAX_REFERENCES {
                return Err(FetchError::NotFound(format!(
                    "{at} imports more than {MAX_REFERENCES} schemas"
                )));
            }
            let import = self.fetch(&Target::Version(&r), serialized)?;
            queue.extend(import.references);
            fetched.imports.push((r.name, import.schema));
        }
        Ok(fetched)
    }

    /// Fetches `what`, trying the URLs in turn and waiting with backoff (200 ms doubling to 5 s)
    /// while none answers; `/readyz` says why meanwhile.
    fn fetch(&self, at: &Target, serialized: bool) -> Result<Fetched, FetchError> {
        let mut wait = Duration::from_millis(200);
        let mut last_logged: Option<std::time::Instant> = None;
        loop {
            let mut outage = String::new();
            for url in &self.urls {
                match self.fetch_from(url, at, serialized) {
                    Ok(answer) => {
                        self.health.set_schema_registry(None);
                        return answer;
                    }
                    Err(why) => outage = why,
                }
            }
            self.health.set_schema_registry(Some(outage.clone()));
            if last_logged.is_none_or(|t| t.elapsed() > Duration::from_secs(10)) {
                last_logged = Some(std::time::Instant::now());
                tracing::warn!(
                    schema = %at,
                    error = %outage,
                    "waiting for the Schema Registry (its messages are read once it answers; nothing is dead-lettered meanwhile)"
                );
            }
            // Sleep in short steps so that a stop is seen.
            let until = std::time::Instant::now() + wait;
            while std::time::Instant::now() < until {
                if self.shutdown.as_ref().is_some_and(Shutdown::is_triggered) {
                    return Err(FetchError::Stopping);
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            wait = (wait * 2).min(Duration::from_secs(5));
        }
    }

    /// One attempt at one URL: `Ok(answer)` when the registry answered about the schema,
    /// `Err(outage)` when it could not.
    fn fetch_from(
        &self,
        url: &str,
        at: &Target,
        serialized: bool,
    ) -> Result<Result<Fetched, FetchError>, String> {
        if !crate::lock(&self.verified).contains(url) {
            self.is_registry(url)?;
            crate::lock(&self.verified).insert(url.to_string());
        }
        let path = match at {
            Target::Schema(SchemaRef::Id(id)) => format!("{url}/schemas/ids/{id}"),
            Target::Schema(SchemaRef::Guid(g)) => format!("{url}/schemas/guids/{g}"),
            Target::Version(r) => format!(
                "{url}/subjects/{}/versions/{}",
                percent(&r.subject),
                r.version
            ),
        };
        let query = serialized.then_some(("format", "serialized"));
        let (status, body) = self.ask(url, &path, query)?;
        let body = body.map_err(|e| {
            format!(
                "the Schema Registry at {url} answered {status} but its body could not be read: {e}"
            )
        })?;
        match status {
            200 => Ok(parse_answer(at, &body)),
            404 => match registry_error(&body) {
                Some((code, message)) if not_found(at, code) => Ok(Err(FetchError::NotFound(
                    format!("the Schema Registry does not know {at} ({code} {message})"),
                ))),
                // Not the registry's own "not found": the URL may no longer lead to it.
                _ => {
                    crate::lock(&self.verified).remove(url);
                    Err(format!(
                        "{url} answered 404 for {at} without a Schema Registry's error body ({}): \
                         check that schema_registry.url is the registry's base URL",
                        short(&body)
                    ))
                }
            },
            401 | 403 => Err(refused(url, status)),
            _ => Err(format!(
                "the Schema Registry at {url} answered {status} {}",
                short(&body)
            )),
        }
    }
}

impl<T> Registry<T> {
    /// Asks each URL whether it is a Schema Registry (`GET /subjects` answers a list) and the
    /// schema types it serves (`GET /schemas/types`), with ravel's credentials and TLS
    /// settings, within `schema_registry.timeout_ms`, fetching no schema: `ravel check`. Per
    /// URL: the types (empty when the registry predates the endpoint, 404), or why it cannot
    /// answer, in the words `/readyz` uses for an outage.
    pub fn probe(&self) -> Vec<(String, Result<Vec<String>, String>)> {
        self.urls
            .iter()
            .map(|url| (url.clone(), self.probe_one(url)))
            .collect()
    }

    /// Whether a stream of `format` can read its schemas here, asked as `probe` asks: Ok when
    /// a URL answers as a Schema Registry that serves the format's schema type; else why
    /// not, for each URL, with what to check. A stream declared over the API is accepted only
    /// then (`crate::declared`): otherwise every message of it would wait or be refused.
    pub fn serves(&self, format: ValueFormat) -> Result<(), String> {
        let want = format.schema_type();
        let mut why = Vec::new();
        for (url, answer) in self.probe() {
            match answer {
                Ok(types) if types.is_empty() || types.iter().any(|t| t == want) => return Ok(()),
                Ok(types) => why.push(format!(
                    "the Schema Registry at {url} serves only {} schemas, not {want}",
                    types.join(", ")
                )),
                Err(e) => why.push(e),
            }
        }
        Err(format!(
            "{}: check schema_registry.url (and its credentials) as `ravel check` does, then PUT \
             the declaration again",
            why.join("; ")
        ))
    }

    /// GETs `path` (a whole URL under `url`, with `query` if any) with ravel's credentials:
    /// the status and the body (read up to `MAX_ANSWER_BYTES`, or why it could not be), or
    /// why the registry could not be asked.
    fn ask(
        &self,
        url: &str,
        path: &str,
        query: Option<(&str, &str)>,
    ) -> Result<(u16, Result<String, String>), String> {
        let mut req = self.agent.get(path);
        if let Some((k, v)) = query {
            req = req.query(k, v);
        }
        if let Some(a) = &self.authorization {
            req = req.header("Authorization", a);
        }
        let mut resp = req
            .header("Accept", "application/vnd.schemaregistry.v1+json")
            .call()
            .map_err(|e| format!("cannot reach the Schema Registry at {url}: {e}"))?;
        let status = resp.status().as_u16();
        let body = resp
            .body_mut()
            .with_config()
            .limit(MAX_ANSWER_BYTES)
            .read_to_string()
            .map_err(|e| e.to_string());
        Ok((status, body))
    }

    fn probe_one(&self, url: &str) -> Result<Vec<String>, String> {
        self.is_registry(url)?;
        crate::lock(&self.verified).insert(url.to_string());
        let (status, body) = self.ask(url, &format!("{url}/schemas/types"), None)?;
        let body = body.unwrap_or_default();
        match status {
            200 => serde_json::from_str::<Vec<String>>(&body).map_err(|e| {
                format!(
                    "the Schema Registry at {url} answered GET /schemas/types with something \
                     else than a list of types ({e}): is this URL a Schema Registry?"
                )
            }),
            404 => Ok(Vec::new()),
            401 | 403 => Err(refused(url, status)),
            _ => Err(format!(
                "the Schema Registry at {url} answered {status} {}",
                short(&body)
            )),
        }
    }

    /// Whether `url` answers as a Schema Registry: `GET /subjects` (every Confluent-compatible
    /// registry serves it) answers a list of subjects; else why not, as an outage.
    fn is_registry(&self, url: &str) -> Result<(), String> {
        let (status, body) = self.ask(url, &format!("{url}/subjects"), None)?;
        let body = body.unwrap_or_default();
        match status {
            200 if serde_json::from_str::<Vec<String>>(&body).is_ok() => Ok(()),
            401 | 403 => Err(refused(url, status)),
            _ if registry_error(&body).is_some() => Err(format!(
                "the Schema Registry at {url} answered {status} {}",
                short(&body)
            )),
            _ => Err(format!(
                "{url} is not a Schema Registry: GET {url}/subjects answered {status} {}{}; \
                 set schema_registry.url to the registry's base URL (the one its clients use, \
                 e.g. http://host:8081, or Apicurio's .../apis/ccompat/v7)",
                if status == 200 {
                    "with something else than a list of subjects: "
                } else {
                    ""
                },
                short(&body)
            )),
        }
    }

    /// Probes the registry on a thread of its own until one URL answers as a Schema Registry
    /// (backoff 1 s doubling to 30 s), so that `/readyz` names a wrong URL or an outage
    /// before the first schema'd message asks for a schema; ends with the service.
    pub fn watch(self: &Arc<Self>)
    where
        T: Send + Sync + 'static,
    {
        let registry = self.clone();
        let spawned = std::thread::Builder::new()
            .name("ravel-registry-probe".into())
            .spawn(move || {
                let mut wait = Duration::from_secs(1);
                loop {
                    let mut why = String::new();
                    for url in &registry.urls {
                        match registry.is_registry(url) {
                            Ok(()) => {
                                crate::lock(&registry.verified).insert(url.clone());
                                registry.health.set_schema_registry(None);
                                return;
                            }
                            Err(e) => why = e,
                        }
                    }
                    tracing::warn!(error = %why, "the Schema Registry does not answer as one; schema'd messages wait for it");
                    registry.health.set_schema_registry(Some(why));
                    let until = std::time::Instant::now() + wait;
                    while std::time::Instant::now() < until {
                        if registry.shutdown.as_ref().is_none_or(Shutdown::is_triggered) {
                            return;
                        }
                        std::thread::sleep(Duration::from_millis(50));
                    }
                    wait = (wait * 2).min(Duration::from_secs(30));
                }
            });
        if let Err(e) = spawned {
            tracing::warn!("cannot start the Schema Registry probe: {e}");
        }
    }
}

/// The registry's own error body, `{"error_code": 40403, "message": "..."}`: its code and
/// message (None: not a Schema Registry's error).
fn registry_error(body: &str) -> Option<(i64, String)> {
    let v: serde_json::Value = serde_json::from_str(body).ok()?;
    let code = v.get("error_code")?.as_i64()?;
    let message = v.get("message").and_then(|m| m.as_str()).unwrap_or("");
    Some((code, message.to_string()))
}

/// Whether `code` is the registry saying it does not have `at`: 40403 (schema not found),
/// and for an imported subject version also 40401 (subject) and 40402 (version).
fn not_found(at: &Target, code: i64) -> bool {
    match at {
        Target::Schema(_) => code == 40403,
        Target::Version(_) => matches!(code, 40401..=40403),
    }
}

/// The registry at `url` answered 401 or 403.
fn refused(url: &str, status: u16) -> String {
    format!(
        "the Schema Registry at {url} refuses ravel's credentials ({status}): check \
         schema_registry.basic_auth_user / basic_auth_password or bearer_token"
    )
}

/// The first 200 characters of an error body.
fn short(body: &str) -> String {
    body.chars().take(200).collect()
}

/// `{"schema": "...", "schemaType": "...", "references": [{"name": ...}, ...]}`.
/// What a fetch asks for: a schema by id or GUID, or an imported schema by subject version.
enum Target<'a> {
    Schema(&'a SchemaRef),
    Version(&'a Reference),
}

impl std::fmt::Display for Target<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Schema(at) => at.fmt(f),
            Target::Version(r) => write!(
                f,
                "the imported schema '{}' (subject '{}' version {})",
                r.name, r.subject, r.version
            ),
        }
    }
}

/// A subject in a URL path: every byte but letters, digits and `-._~` percent-encoded
/// (subjects of imports are file names such as `shop/common.proto`).
fn percent(subject: &str) -> String {
    subject
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

fn parse_answer(at: &Target, body: &str) -> Result<Fetched, FetchError> {
    let v: serde_json::Value = serde_json::from_str(body).map_err(|e| {
        FetchError::NotFound(format!("the registry's answer for {at} is not JSON ({e})"))
    })?;
    let Some(schema) = v.get("schema").and_then(|s| s.as_str()) else {
        return Err(FetchError::NotFound(format!(
            "the registry's answer for {at} holds no \"schema\""
        )));
    };
    let mut references = Vec::new();
    for r in v
        .get("references")
        .and_then(|r| r.as_array())
        .into_iter()
        .flatten()
    {
        let (Some(name), Some(subject), Some(version)) = (
            r.get("name").and_then(|n| n.as_str()),
            r.get("subject").and_then(|n| n.as_str()),
            r.get("version").and_then(|n| n.as_i64()),
        ) else {
            return Err(FetchError::NotFound(format!(
                "the registry's answer for {at} has a reference without name, subject and version: {r}"
            )));
        };
        references.push(Reference {
            name: name.into(),
            subject: subject.into(),
            version,
        });
    }
    Ok(Fetched {
        schema_type: v
            .get("schemaType")
            .and_then(|t| t.as_str())
            .unwrap_or("AVRO")
            .to_string(),
        schema: schema.to_string(),
        references,
        imports: Vec::new(),
    })
}
