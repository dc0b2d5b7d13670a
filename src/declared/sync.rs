//! With the kafka store, every replica follows the declarations in the state topic
//! (`crate::store::kafka::declared`): `sync` compares the topic's latest records with what
//! this replica runs and applies the difference, as the replica that answered the change
//! applied it: retired scorers, feature streams and streams stop first, then new or changed
//! streams, feature streams and scorers start. A record this replica cannot apply (its
//! configuration with the others does not pass the checks, say two replicas declared one
//! topic under two names at once) is logged once and left out; every replica reads the same
//! records in the same order, so they agree on it. The service calls `sync` at its start,
//! once the topic is read, and whenever the reader reads a declaration record.

use super::features::ApiFeatureStream;
use super::keep::staged;
use super::scorers::{ApiScorer, model_of};
use super::{ApiDeclaration, Declarations, Declared, Keep, Logged, Refusal};
use crate::store::kafka::declared::parse_key;
use std::collections::BTreeSet;

/// The declarations of the state topic: those in force, and the streams retired with their
/// state kept.
#[derive(Default)]
struct InTopic {
    declared: Declared,
    kept: BTreeSet<String>,
}

impl Declarations {
    /// Adopts the state topic's declarations (kafka store; else nothing to do).
    pub fn sync(&self) {
        let Keep::Log(log) = &self.keep else {
            return;
        };
        // Read under the lock: a change this replica answers holds it until its record is
        // read back, so the records read here always include it (read before, they would
        // retire what it just declared).
        let mut declared = crate::lock(&self.declared);
        let records = log.records();
        let mut topic = InTopic::default();
        for (key, value) in &records {
            let Some((kind, name)) = parse_key(key) else {
                continue;
            };
            let read = match kind {
                "stream" => serde_json::from_slice::<Logged<ApiDeclaration>>(value).map(|l| {
                    if l.retired {
                        topic.kept.insert(name.to_string());
                    } else {
                        topic
                            .declared
                            .streams
                            .insert(name.to_string(), l.declaration);
                    }
                }),
                "feature_stream" => {
                    serde_json::from_slice::<Logged<ApiFeatureStream>>(value).map(|l| {
                        topic
                            .declared
                            .features
                            .insert(name.to_string(), l.declaration);
                    })
                }
                "scorer" => serde_json::from_slice::<Logged<ApiScorer>>(value).map(|l| {
                    topic
                        .declared
                        .scorers
                        .insert(name.to_string(), l.declaration);
                }),
                _ => Ok(()),
            };
            if let Err(e) = read {
                self.refuse_once(value, key, &format!("the record cannot be read: {e}"));
            }
        }
        let want = topic.declared;
        // Retired: scorers first (they score with streams), then feature streams and streams.
        for name in gone(&declared.scorers, &want.scorers) {
            declared.scorers.remove(&name);
            self.stop_scorer(&name);
            tracing::info!(scorer = %name, "scorer retired by another replica");
        }
        for name in gone(&declared.features, &want.features) {
            declared.features.remove(&name);
            self.stop_features(&name);
            tracing::info!(feature_stream = %name, "feature stream retired by another replica");
        }
        for name in gone(&declared.streams, &want.streams) {
            declared.streams.remove(&name);
            let drop_state = !topic.kept.contains(&name);
            self.unregister(&name, drop_state);
            tracing::info!(stream = %name, state = if drop_state { "dropped" } else { "kept" }, "stream retired by another replica");
        }
        // New or changed, each checked with everything adopted so far.
        for (name, d) in &want.streams {
            let Some((next, replaced)) = staged(&declared, name, d, |x| &mut x.streams, |r| r)
            else {
                continue;
            };
            let started = next
                .config(&self.base)
                .check()
                .map_err(|e| format!("{e:#}"))
                .and_then(|()| {
                    self.service
                        .build_stream(&d.stream, !replaced, d.epoch)
                        .map_err(|e| format!("{e:#}"))
                });
            match started {
                Ok((handle, positions)) => {
                    *declared = next;
                    self.register(handle, positions, replaced);
                    tracing::info!(stream = %name, by = %d.by, action = if replaced { "change" } else { "declare" }, "stream declared by another replica");
                }
                Err(e) => self.refuse_once(&records[&key("stream", name)], name, &e),
            }
        }
        for (name, f) in &want.features {
            let Some((next, replaced)) = staged(&declared, name, f, |x| &mut x.features, |r| r)
            else {
                continue;
            };
            match next.config(&self.base).check() {
                Ok(()) => {
                    *declared = next;
                    self.start_features(&f.feature_stream, replaced);
                    tracing::info!(feature_stream = %name, by = %f.by, "feature stream declared by another replica");
                }
                Err(e) => self.refuse_once(
                    &records[&key("feature_stream", name)],
                    name,
                    &format!("{e:#}"),
                ),
            }
        }
        for (name, s) in &want.scorers {
            let Some((next, _)) = staged(&declared, name, s, |x| &mut x.scorers, |r| r) else {
                continue;
            };
            let started = model_of(&next.config(&self.base), name)
                .and_then(|model| self.run_scorer(&s.scorer, model));
            match started {
                Ok(()) => {
                    *declared = next;
                    tracing::info!(scorer = %name, by = %s.by, "scorer declared by another replica");
                }
                Err(Refusal::Invalid(e) | Refusal::Failed(e) | Refusal::Absent(e))
                | Err(Refusal::Conflict(e) | Refusal::Unknown(e)) => {
                    self.refuse_once(&records[&key("scorer", name)], name, &e)
                }
            }
        }
    }

    /// Logs, once per record, that this replica does not run a declaration of the topic.
    fn refuse_once(&self, record: &[u8], name: &str, why: &str) {
        if crate::lock(&self.refused).insert(record.to_vec()) {
            tracing::error!(declaration = %name, reason = %why, "a declaration in the state topic is not run here");
        }
    }
}

fn key(kind: &str, name: &str) -> String {
    crate::store::kafka::declared::key(kind, name)
}

/// The names in `have` that `want` no longer has.
fn gone<T>(
    have: &std::collections::BTreeMap<String, T>,
    want: &std::collections::BTreeMap<String, T>,
) -> Vec<String> {
    have.keys()
        .filter(|n| !want.contains_key(*n))
        .cloned()
        .collect()
}
