//! `ravel check`: the preflight of a deployment. It loads the configuration `ravel serve`
//! would (file < `RAVEL_...` < flags, the same code path) and asks the cluster and the Schema
//! Registry for everything the service will need from them, without consuming or producing a
//! message and without creating a topic (its clients set `allow.auto.create.topics = false`;
//! creation is only validated, with CreateTopics' `validate_only`): the brokers answer, every
//! topic ravel reads or owns (`kafka::topics::needed`, the list the service checks at start)
//! exists or will be created, the state topic is compacted and the topics' retention (where
//! the broker answers DescribeConfigs), the consumer group answers, the registry answers as a
//! Schema Registry and accepts ravel's credentials, every declared field and target is in the
//! topic's latest messages (read by assignment, never committed), and the effective client
//! configuration with its secrets redacted. Each problem comes with its fix; the exit status
//! says whether there is one.
//!
//! It exists so that a team finds out what its cluster must allow before it points ravel at
//! it, in one command, rather than from `/readyz` after a deployment. Every wait is bounded:
//! `--timeout-ms` for each Kafka request, `schema_registry.timeout_ms` for the registry.
//!
//! `kafka.rs` asks the cluster, `registry.rs` the Schema Registry, `fields.rs` samples the
//! data; this file holds the command's arguments, its findings and the report.

mod fields;
mod kafka;
mod registry;

use crate::config::{Config, ServeArgs};
use crate::kafka::is_secret;
use serde::Serialize;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, Clone, clap::Args)]
pub struct CheckArgs {
    /// Config file (default: config/ravel.toml when it exists), read as `ravel serve` reads it
    /// (with the `RAVEL_...` environment and these flags over it).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Kafka bootstrap servers (kafka.brokers).
    #[arg(long)]
    pub brokers: Option<String>,
    /// Consumer group (kafka.group_id).
    #[arg(long)]
    pub group_id: Option<String>,
    /// text (one line per check, fixes indented) or json (one document: a list of
    /// {check, status, detail, fix}, status ok, info or problem).
    #[arg(long, default_value = "text", value_parser = ["text", "json"])]
    pub format: String,
    /// Longest wait for each answer from Kafka, in milliseconds.
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(100..=300_000))]
    pub timeout_ms: u64,
}

/// How a check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Status {
    Ok,
    /// Worth knowing, not in the way (a topic ravel will create, a setting not checkable).
    Info,
    /// The service will not work as configured until it is fixed.
    Problem,
}

/// One check's outcome, as `--format json` prints it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Finding {
    /// What was checked: `config`, `kafka.brokers`, `topic:NAME`, `topic-config:NAME`,
    /// `group:ID`, `schema_registry:URL`, `fields:STREAM`, `kafka.client_config`.
    pub check: String,
    pub status: Status,
    pub detail: String,
    /// The command to run or the config line to change; null when there is nothing to do.
    pub fix: Option<String>,
}

impl Finding {
    fn new(check: impl Into<String>, status: Status, detail: impl Into<String>) -> Finding {
        Finding {
            check: check.into(),
            status,
            detail: detail.into(),
            fix: None,
        }
    }
    fn fix(mut self, fix: impl Into<String>) -> Finding {
        self.fix = Some(fix.into());
        self
    }
}

/// Everything `ravel check` found.
#[derive(Debug, Default)]
pub struct Report {
    pub findings: Vec<Finding>,
}

impl Report {
    /// No problem found (infos allowed).
    pub fn passed(&self) -> bool {
        !self.findings.iter().any(|f| f.status == Status::Problem)
    }

    /// The report as text (`json = false`) or as one JSON document.
    pub fn render(&self, json: bool) -> String {
        if json {
            return serde_json::to_string_pretty(&self.findings).expect("findings serialize");
        }
        let mut out = String::new();
        for f in &self.findings {
            let status = match f.status {
                Status::Ok => "ok",
                Status::Info => "info",
                Status::Problem => "PROBLEM",
            };
            out.push_str(&format!(
                "{status:<8} {}: {}\n",
                f.check,
                f.detail.replace('\n', "\n         ")
            ));
            if let Some(fix) = &f.fix {
                out.push_str(&format!("         fix: {fix}\n"));
            }
        }
        let count = |s| self.findings.iter().filter(|f| f.status == s).count();
        let problems = count(Status::Problem);
        out.push_str(&match problems {
            0 => format!(
                "no problem found ({} ok, {} info)",
                count(Status::Ok),
                count(Status::Info)
            ),
            n => format!(
                "{n} problem{} found: ravel will not run as configured until {} fixed",
                if n == 1 { "" } else { "s" },
                if n == 1 { "it is" } else { "they are" }
            ),
        });
        out
    }

    /// Every secret value replaced by `***` (belt and braces: no check quotes one on purpose,
    /// but a broker's or a library's error text might).
    fn scrub(&mut self, secrets: &[String]) {
        let scrub = |s: &mut String| {
            for secret in secrets.iter().filter(|s| !s.is_empty()) {
                *s = s.replace(secret.as_str(), "***");
            }
        };
        for f in &mut self.findings {
            scrub(&mut f.detail);
            if let Some(fix) = &mut f.fix {
                scrub(fix);
            }
        }
    }
}

/// `ravel check`.
pub fn run(args: &CheckArgs) -> Report {
    let serve = ServeArgs {
        config: args.config.clone(),
        brokers: args.brokers.clone(),
        group_id: args.group_id.clone(),
        ..ServeArgs::default()
    };
    let mut report = Report::default();
    let config = match Config::load(&serve) {
        Ok(c) => c,
        Err(e) => {
            report.findings.push(
                Finding::new("config", Status::Problem, format!("{e:#}")).fix(
                    "correct the configuration as the message says (nothing else was checked)",
                ),
            );
            return report;
        }
    };
    let timeout = Duration::from_millis(args.timeout_ms);
    kafka::check(&config, timeout, &mut report.findings);
    let registry_ok = registry::check(&config, &mut report.findings);
    fields::check(&config, timeout, registry_ok, &mut report.findings);
    // The long client configuration last, after what was found (a stable sort).
    report
        .findings
        .sort_by_key(|f| f.check == "kafka.client_config");
    let mut secrets: Vec<String> = config
        .kafka
        .librdkafka_options()
        .filter(|(k, _)| is_secret(k))
        .map(|(_, v)| v.to_string())
        .collect();
    secrets.push(config.schema_registry.basic_auth_password.clone());
    secrets.push(config.schema_registry.bearer_token.clone());
    report.scrub(&secrets);
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_passes_without_problems_and_scrubs_secrets() {
        let mut r = Report::default();
        r.findings.push(Finding::new("a", Status::Ok, "fine"));
        r.findings.push(Finding::new("b", Status::Info, "noted"));
        assert!(r.passed());
        assert!(r.render(false).ends_with("no problem found (1 ok, 1 info)"));
        r.findings
            .push(Finding::new("c", Status::Problem, "said hunter2").fix("x hunter2"));
        r.scrub(&["hunter2".into(), String::new()]);
        assert!(!r.passed());
        let text = r.render(false);
        assert!(
            !text.contains("hunter2") && text.contains("fix: x ***"),
            "{text}"
        );
        let json: serde_json::Value = serde_json::from_str(&r.render(true)).unwrap();
        assert_eq!(json[2]["status"], "problem");
        assert_eq!(json[0]["fix"], serde_json::Value::Null);
    }
}
