//! Feature streams declared at run time (issue 49): `PUT` and `DELETE
//! /v1/feature-streams/{name}` add and retire a `[[feature_streams]]` while the service runs.
//! A declaration is checked as the file's (the table through the `config` crate; the whole
//! configuration with it: names and topics unique over every kind, the memory limit; its
//! topic on the cluster), kept with the streams' (`Keep`), and handed to ingest as the
//! streams' are (`Change::AddFeatures`, between two batches). A feature stream keeps no
//! checkpoint: it reads its topic from the beginning, as at every start. Wide feature streams
//! (paper 004's kept columns) share a memory budget set at start, so they are declared in the
//! config file.

use super::keep::staged;
use super::{Change, Declarations, Origin, Put, Refusal, from_table, named};
use crate::config::FeatureStreamConfig;
use crate::state::feature_streams::FeatureStreamHandle;
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// One feature stream declared over the API, as `declarations.json` keeps it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ApiFeatureStream {
    /// The declaration, as the config file's `[[feature_streams]]` table.
    pub feature_stream: FeatureStreamConfig,
    /// Who declared it: the peer address of the admin request.
    pub by: String,
    /// When (Unix ms).
    pub at_ms: u64,
}

impl Declarations {
    /// Where feature stream `name`'s declaration came from (None: no such feature stream).
    pub fn feature_origin(&self, name: &str) -> Option<Origin<FeatureStreamConfig>> {
        let declared = crate::lock(&self.declared);
        let api = declared.features.get(name);
        let api = api.map(|d| (&d.feature_stream, &*d.by, d.at_ms));
        Origin::of(self.base.feature_stream(name), api)
    }

    /// Declares (or changes) feature stream `name` from the JSON table `body`.
    pub fn put_feature_stream(&self, name: &str, body: &[u8], by: &str) -> Result<Put, Refusal> {
        if let Some(r) = self.unavailable() {
            return Err(r);
        }
        if self.file_names().contains(name) {
            return Err(Refusal::Conflict(format!(
                "'{name}' is declared in the config file; change it there (a name is declared \
                 in one place)"
            )));
        }
        let example = r#"{"n": 1000, "s": 20, "topic": "genes"}"#;
        let f: FeatureStreamConfig = from_table(&named("feature_stream", example, name, body)?)?;
        if f.wide {
            return Err(Refusal::Invalid(
                "wide: wide feature streams share a memory budget set at start: declare them in \
                 [[feature_streams]] of the config file"
                    .into(),
            ));
        }
        let mut declared = crate::lock(&self.declared);
        let decl = ApiFeatureStream {
            feature_stream: f.clone(),
            by: by.to_string(),
            at_ms: crate::now_ms(),
        };
        let change = staged(
            &declared,
            name,
            &decl,
            |d| &mut d.features,
            |d| &d.feature_stream,
        );
        let Some((next, replaced)) = change else {
            return Ok(Put::Unchanged);
        };
        let candidate = next.config(&self.base);
        candidate
            .check()
            .map_err(|e| Refusal::Invalid(format!("{e:#}")))?;
        let mut one = candidate;
        one.streams.clear();
        one.scorers.clear();
        one.feature_streams.retain(|x| x.name == name);
        self.service.check_topics(&one).map_err(Refusal::Invalid)?;
        self.adopt(&mut declared, next, "feature_stream", name, &decl)?;
        drop(declared);
        self.start_features(&f, replaced);
        tracing::info!(
            who = %by, action = if replaced { "change" } else { "declare" },
            feature_stream = %name,
            declaration = %serde_json::to_string(&f).unwrap_or_default(),
            "feature stream declared over the API"
        );
        Ok(Put::of(replaced))
    }

    /// Retires feature stream `name`: ingest stops reading it at its next batch.
    pub fn delete_feature_stream(&self, name: &str, by: &str) -> Result<(), Refusal> {
        let in_file = self.base.feature_stream(name).is_some();
        self.retire(name, ("feature stream", "feature_stream"), in_file, |d| {
            &mut d.features
        })?;
        self.stop_features(name);
        tracing::info!(who = %by, action = "retire", feature_stream = %name, "feature stream retired over the API");
        Ok(())
    }

    /// Starts reading feature stream `f` (after its older declaration, `replaced`).
    pub(super) fn start_features(&self, f: &FeatureStreamConfig, replaced: bool) {
        self.service.declare_feature_stream(f);
        let handle = Arc::new(FeatureStreamHandle::new(f.clone(), 0));
        self.feature_streams.insert(handle.clone());
        if replaced {
            self.queue.push(Change::RemoveFeatures {
                name: f.name.clone(),
            });
        }
        self.queue.push(Change::AddFeatures { handle });
    }

    /// Stops reading feature stream `name`.
    pub(super) fn stop_features(&self, name: &str) {
        self.feature_streams.remove(name);
        self.queue.push(Change::RemoveFeatures {
            name: name.to_string(),
        });
    }
}
