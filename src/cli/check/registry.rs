//! `ravel check`'s question to the Schema Registry: when a stream reads its schemas from one,
//! does it answer within `schema_registry.timeout_ms` as a Schema Registry (`GET /subjects`
//! answers a list: a URL with a wrong path answering 404 or an HTML page is a problem) and
//! accept ravel's credentials.

use super::{Finding, Status};
use crate::codec::schemad::registry::Registry;
use crate::config::Config;
use crate::config::schemas::ValueFormat;
use crate::health::Health;
use std::sync::Arc;

/// The Schema Registry, when a stream reads its schemas from one; whether it answered (true
/// when no stream needs it).
pub(super) fn check(config: &Config, out: &mut Vec<Finding>) -> bool {
    let users: Vec<(&str, ValueFormat)> = config
        .streams
        .iter()
        .filter(|s| !s.format.is_ravel() && s.avro_schema_file.is_none())
        .map(|s| (s.name.as_str(), s.format))
        .collect();
    if users.is_empty() {
        return true;
    }
    let registry = match Registry::<()>::new(&config.schema_registry, Arc::new(Health::new()), None)
    {
        Ok(r) => r,
        Err(e) => {
            out.push(
                Finding::new("schema_registry", Status::Problem, format!("{e:#}"))
                    .fix("correct the [schema_registry] setting the message names"),
            );
            return false;
        }
    };
    let answers = registry.probe();
    let any_answers = answers.iter().any(|(_, a)| a.is_ok());
    for (url, answer) in answers {
        let check = format!("schema_registry:{url}");
        match answer {
            Ok(types) => {
                let missing: Vec<String> = users
                    .iter()
                    .filter(|(_, f)| {
                        !types.is_empty() && !types.iter().any(|t| t == f.schema_type())
                    })
                    .map(|(s, f)| format!("stream '{s}' (format = \"{}\")", f.name()))
                    .collect();
                if missing.is_empty() {
                    out.push(Finding::new(
                        check,
                        Status::Ok,
                        format!(
                            "the Schema Registry at {url} (schema_registry.url) answers as a \
                             Schema Registry and accepts ravel's credentials{}",
                            if types.is_empty() {
                                String::new()
                            } else {
                                format!("; it serves {} schemas", types.join(", "))
                            }
                        ),
                    ));
                } else {
                    out.push(
                        Finding::new(
                            check,
                            Status::Problem,
                            format!(
                                "the Schema Registry at {url} serves only {} schemas, not those of {}",
                                types.join(", "),
                                missing.join(", ")
                            ),
                        )
                        .fix("use a registry that serves them (Confluent Schema Registry 5.5 or later serves AVRO, PROTOBUF and JSON)"),
                    );
                }
            }
            Err(why) => out.push(
                Finding::new(
                    check,
                    if any_answers {
                        Status::Info
                    } else {
                        Status::Problem
                    },
                    format!(
                        "{why} (schema_registry.url; needed by {})",
                        users
                            .iter()
                            .map(|(s, _)| format!("stream '{s}'"))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                )
                .fix(if why.contains("credentials") {
                    "set schema_registry.basic_auth_user and basic_auth_password (or \
                     bearer_token) to credentials the registry accepts"
                        .to_string()
                } else {
                    format!(
                        "check schema_registry.url (RAVEL_SCHEMA_REGISTRY__URL; now {}) and \
                         that the registry is up and reachable from here within \
                         schema_registry.timeout_ms = {}",
                        config.schema_registry.url, config.schema_registry.timeout_ms
                    )
                }),
            ),
        }
    }
    any_answers
}
