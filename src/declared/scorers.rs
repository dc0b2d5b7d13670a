//! Scorers declared at run time (issue 49): `PUT` and `DELETE /v1/scorers/{name}` start and
//! stop a `[[scorers]]` while the service runs, beside the config file's. A declaration is
//! checked as the file's (the table through the `config` crate; the whole configuration with
//! it, so its stream must exist and its model must fit it; its topics on the cluster), kept
//! with the streams' (`Keep`), and started on its own thread with a
//! stop of its own (`Running`), which the service's shutdown also pulls. A changed
//! declaration stops the old scorer and starts the new one; a retired one is stopped and
//! joined before the answer. A stream a scorer scores with cannot be changed or retired
//! until the scorer is.

use super::keep::staged;
use super::{Declarations, Origin, Put, Refusal, from_table, named};
use crate::config::scorers::ScorerConfig;
use crate::shutdown::ShutdownTrigger;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// One scorer declared over the API, as `declarations.json` keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApiScorer {
    /// The declaration, as the config file's `[[scorers]]` table.
    pub scorer: ScorerConfig,
    /// Who declared it: the peer address of the admin request.
    pub by: String,
    /// When (Unix ms).
    pub at_ms: u64,
}

/// A scorer declared over the API while it runs: its stop and its thread.
pub struct Running {
    pub stop: Arc<ShutdownTrigger>,
    pub thread: std::thread::JoinHandle<()>,
}

impl Running {
    /// Stops the scorer and waits for its thread (it commits what it scored).
    fn end(self) {
        self.stop.trigger();
        let _ = self.thread.join();
    }
}

impl Declarations {
    /// A scorer declared over the API at an earlier start, running again (`server`).
    pub fn resumed(&self, name: &str, running: Running) {
        crate::lock(&self.running).insert(name.to_string(), running);
    }

    /// Stops every scorer declared over the API and waits for them (the service stops).
    pub fn stop_scorers(&self) {
        let running = std::mem::take(&mut *crate::lock(&self.running));
        for r in running.into_values() {
            r.end();
        }
    }

    /// Where scorer `name`'s declaration came from (None: no such scorer).
    pub fn scorer_origin(&self, name: &str) -> Option<Origin<ScorerConfig>> {
        let declared = crate::lock(&self.declared);
        let api = declared.scorers.get(name);
        let file = self.base.scorers.iter().find(|s| s.name == name);
        Origin::of(file, api.map(|d| (&d.scorer, &*d.by, d.at_ms)))
    }

    /// Declares (or changes) scorer `name` from the JSON table `body`; `by` is who asks.
    pub fn put_scorer(&self, name: &str, body: &[u8], by: &str) -> Result<Put, Refusal> {
        if let Some(r) = self.unavailable() {
            return Err(r);
        }
        if self.base.scorers.iter().any(|s| s.name == name) {
            return Err(Refusal::Conflict(format!(
                "scorer '{name}' is declared in the config file; change it there (a name is \
                 declared in one place)"
            )));
        }
        let example = r#"{"stream": "sales", "topic": "orders", "output_topic": "predictions"}"#;
        let scorer: ScorerConfig = from_table(&named("scorer", example, name, body)?)?;
        let mut declared = crate::lock(&self.declared);
        let decl = ApiScorer {
            scorer: scorer.clone(),
            by: by.to_string(),
            at_ms: crate::now_ms(),
        };
        let change = staged(&declared, name, &decl, |d| &mut d.scorers, |d| &d.scorer);
        let Some((next, replaced)) = change else {
            return Ok(Put::Unchanged);
        };
        let candidate = next.config(&self.base);
        let model = model_of(&candidate, name)?;
        // Its topics, as `ravel check` asks (the stream's own, already read, included).
        let mut one = candidate.clone();
        one.streams.retain(|s| s.name == scorer.stream);
        one.feature_streams.clear();
        one.scorers = vec![scorer.clone()];
        self.service.check_topics(&one).map_err(Refusal::Invalid)?;
        self.adopt(&mut declared, next, "scorer", name, &decl)?;
        drop(declared);
        self.run_scorer(&scorer, model)?;
        tracing::info!(
            who = %by, action = if replaced { "change" } else { "declare" },
            scorer = %name,
            declaration = %serde_json::to_string(&decl.scorer).unwrap_or_default(),
            "scorer declared over the API"
        );
        Ok(Put::of(replaced))
    }

    /// Retires scorer `name`: stopped (what it scored committed) before this returns.
    pub fn delete_scorer(&self, name: &str, by: &str) -> Result<(), Refusal> {
        let in_file = self.base.scorers.iter().any(|s| s.name == name);
        self.retire(name, ("scorer", "scorer"), in_file, |d| &mut d.scorers)?;
        self.stop_scorer(name);
        tracing::info!(who = %by, action = "retire", scorer = %name, "scorer retired over the API");
        Ok(())
    }

    /// Starts scorer `scorer` with `model` (stopping its older declaration first).
    pub(super) fn run_scorer(
        &self,
        scorer: &ScorerConfig,
        model: ravel_core::solve::Request,
    ) -> Result<(), Refusal> {
        let name = scorer.name.as_str();
        if let Some(previous) = crate::lock(&self.running).remove(name) {
            previous.end();
        }
        let running = self.service.start_scorer(scorer, model).map_err(|e| {
            Refusal::Failed(format!(
                "scorer '{name}' is declared but did not start: {e:#} (it starts with the \
                 service's next start, or PUT it again)"
            ))
        })?;
        crate::lock(&self.running).insert(name.to_string(), running);
        Ok(())
    }

    /// Stops scorer `name` (what it scored committed) and forgets its health.
    pub(super) fn stop_scorer(&self, name: &str) {
        if let Some(running) = crate::lock(&self.running).remove(name) {
            running.end();
        }
        self.service.forget_scorer(name);
    }
}

/// The model request of scorer `name` in `candidate` (checked whole first).
pub(super) fn model_of(
    candidate: &crate::config::Config,
    name: &str,
) -> Result<ravel_core::solve::Request, Refusal> {
    let invalid = |e: anyhow::Error| Refusal::Invalid(format!("{e:#}"));
    candidate.check().map_err(invalid)?;
    let at = (candidate.scorers.iter())
        .position(|s| s.name == name)
        .ok_or_else(|| Refusal::Invalid(format!("scorer '{name}' is not declared")))?;
    Ok(candidate.scorer_models().map_err(invalid)?.swap_remove(at))
}
