//! Schema'd topics (issue 32): a stream's value `format` (`ravel`, `avro`, `protobuf`,
//! `json-schema`), the writer's Avro schema of a topic written without the Confluent framing
//! (`avro_schema_file`), and `[schema_registry]`, the registry the framed formats fetch their
//! schemas from. Checked here once; `crate::codec::schemad` decodes.

use anyhow::bail;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// How a stream's message values are written.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum ValueFormat {
    /// ravel's own: JSON rows, mini-batches, named rows and events, or binary (`RVB1`),
    /// told apart per message.
    #[default]
    Ravel,
    /// Avro datums: Confluent-framed (byte 0, the 4-byte schema id, the datum) with the
    /// schema from the registry, or plain datums of `avro_schema_file`.
    Avro,
    /// Confluent-framed Protobuf (byte 0, the schema id, the message-index list, the message).
    Protobuf,
    /// Confluent-framed JSON (byte 0, the schema id, a JSON event).
    JsonSchema,
}

impl ValueFormat {
    pub const ALL: [ValueFormat; 4] = [
        ValueFormat::Ravel,
        ValueFormat::Avro,
        ValueFormat::Protobuf,
        ValueFormat::JsonSchema,
    ];
    pub fn name(&self) -> &'static str {
        match self {
            ValueFormat::Ravel => "ravel",
            ValueFormat::Avro => "avro",
            ValueFormat::Protobuf => "protobuf",
            ValueFormat::JsonSchema => "json-schema",
        }
    }
    /// The registry's `schemaType` of this format's schemas.
    pub fn schema_type(&self) -> &'static str {
        match self {
            ValueFormat::Ravel | ValueFormat::Avro => "AVRO",
            ValueFormat::Protobuf => "PROTOBUF",
            ValueFormat::JsonSchema => "JSON",
        }
    }
    pub fn is_ravel(&self) -> bool {
        *self == ValueFormat::Ravel
    }
}

/// By name, with the names to use when it is none of them (the config crate's own message
/// names a Rust type).
impl<'de> Deserialize<'de> for ValueFormat {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        ValueFormat::ALL
            .into_iter()
            .find(|f| f.name() == name)
            .ok_or_else(|| {
                serde::de::Error::custom(format!(
                    "format = \"{name}\": use \"ravel\" (the default), \"avro\", \"protobuf\" or \"json-schema\""
                ))
            })
    }
}

/// Longest wait for one registry answer, and the most schemas kept.
pub const MAX_TIMEOUT_MS: u64 = 300_000;
pub const MAX_CACHED_SCHEMAS: usize = 100_000;

/// `[schema_registry]`: where the framed formats' schemas come from. Secrets
/// (`basic_auth_password`, `bearer_token`) may be `${env:NAME}` or `${file:PATH}`, as
/// `kafka.options` are; they are never logged (`Debug` redacts them).
#[derive(Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SchemaRegistryConfig {
    /// The registry's base URL, or several separated by commas (tried in turn).
    pub url: String,
    /// HTTP basic authentication (Confluent Cloud: the API key and secret).
    pub basic_auth_user: String,
    pub basic_auth_password: String,
    /// A bearer token instead of basic authentication.
    pub bearer_token: String,
    /// PEM file of the CA that signs the registry's certificate (default: the web's roots).
    pub ca_file: Option<PathBuf>,
    /// PEM files of a client certificate and its key (mutual TLS).
    pub cert_file: Option<PathBuf>,
    pub key_file: Option<PathBuf>,
    /// Longest wait for one answer, in ms.
    pub timeout_ms: u64,
    /// Schemas kept once fetched (each id is fetched once while it stays cached).
    pub max_schemas: usize,
}

impl Default for SchemaRegistryConfig {
    fn default() -> Self {
        SchemaRegistryConfig {
            url: String::new(),
            basic_auth_user: String::new(),
            basic_auth_password: String::new(),
            bearer_token: String::new(),
            ca_file: None,
            cert_file: None,
            key_file: None,
            timeout_ms: 10_000,
            max_schemas: 1_000,
        }
    }
}

impl std::fmt::Debug for SchemaRegistryConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let redact = |s: &str| if s.is_empty() { "" } else { "[redacted]" };
        f.debug_struct("SchemaRegistryConfig")
            .field("url", &self.url)
            .field("basic_auth_user", &self.basic_auth_user)
            .field("basic_auth_password", &redact(&self.basic_auth_password))
            .field("bearer_token", &redact(&self.bearer_token))
            .field("ca_file", &self.ca_file)
            .field("cert_file", &self.cert_file)
            .field("key_file", &self.key_file)
            .field("timeout_ms", &self.timeout_ms)
            .field("max_schemas", &self.max_schemas)
            .finish()
    }
}

impl SchemaRegistryConfig {
    pub fn configured(&self) -> bool {
        !self.url.trim().is_empty()
    }
    /// The URLs, without trailing slashes.
    pub fn urls(&self) -> Vec<String> {
        self.url
            .split(',')
            .map(|u| u.trim().trim_end_matches('/').to_string())
            .filter(|u| !u.is_empty())
            .collect()
    }
    /// Reads the secrets given as `${env:..}` / `${file:..}` (once, at load).
    pub fn resolve_secrets(&mut self) -> anyhow::Result<()> {
        super::resolve_secret(
            "schema_registry.basic_auth_password",
            &mut self.basic_auth_password,
        )?;
        super::resolve_secret("schema_registry.bearer_token", &mut self.bearer_token)
    }
    pub fn check(&self) -> anyhow::Result<()> {
        for u in self.urls() {
            if !(u.starts_with("http://") || u.starts_with("https://")) {
                bail!(
                    "schema_registry.url: '{u}' is not an http:// or https:// URL (e.g. http://registry:8081)"
                );
            }
        }
        if !self.basic_auth_user.is_empty() && !self.bearer_token.is_empty() {
            bail!(
                "schema_registry: give basic_auth_user (and basic_auth_password) or bearer_token, not both"
            );
        }
        if self.basic_auth_password.is_empty() != self.basic_auth_user.is_empty() {
            bail!(
                "schema_registry: basic authentication needs both basic_auth_user and basic_auth_password"
            );
        }
        if self.cert_file.is_some() != self.key_file.is_some() {
            bail!("schema_registry: a client certificate needs both cert_file and key_file (PEM)");
        }
        if !(1..=MAX_TIMEOUT_MS).contains(&self.timeout_ms) {
            bail!(
                "schema_registry.timeout_ms must lie in 1..={MAX_TIMEOUT_MS}, got {}",
                self.timeout_ms
            );
        }
        if !(1..=MAX_CACHED_SCHEMAS).contains(&self.max_schemas) {
            bail!(
                "schema_registry.max_schemas must lie in 1..={MAX_CACHED_SCHEMAS}, got {}",
                self.max_schemas
            );
        }
        Ok(())
    }
}
