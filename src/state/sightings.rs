//! Which declared fields and target a stream's events carry, counted over its first
//! `ingest.field_check_events` events since start, so that a misspelled name is named instead
//! of quietly learned: under `missing = "indicator"` a field that never arrives is a column of
//! zeros beside an indicator of ones (both dropped as constant), and a target that never
//! arrives leaves every row out. A field or target absent from every one of those events is a
//! warning (logged once by ingest, in the stream's summary, `ravel_ingest_fields_never_seen`)
//! with the event keys closest to its name.
//!
//! Ingest records each sampled event's presence (`ingest::events::presence`); the API reads
//! `summary`. Bounded: one counter per declared field, at most `MAX_KEYS` distinct keys kept
//! for suggestions, and nothing counted after the sample.

use serde::Serialize;
use std::collections::BTreeSet;
use std::sync::Mutex;
use utoipa::ToSchema;

/// Distinct event keys (dotted paths) kept for suggestions.
pub const MAX_KEYS: usize = 1024;

/// Suggestions given for one field never seen.
const MAX_SUGGESTIONS: usize = 3;

/// One sampled event (what the codec read of it).
pub use crate::codec::events::Presence;

/// The counts of one stream's sample.
#[derive(Debug)]
pub struct Sightings {
    /// The declared fields' names, and the target's (None: a stream without `target`).
    names: Vec<String>,
    target: Option<String>,
    /// Events in the sample (`ingest.field_check_events`).
    limit: u64,
    seen: Mutex<Seen>,
}

#[derive(Debug, Default)]
struct Seen {
    events: u64,
    fields: Vec<u64>,
    target: u64,
    keys: BTreeSet<String>,
}

/// How many sampled events carried one field.
#[derive(Debug, Clone, Serialize, ToSchema, PartialEq)]
pub struct FieldCount {
    pub field: String,
    pub events: u64,
}

/// A declared field (or the target) absent from every sampled event, with the event keys
/// closest to its name.
#[derive(Debug, Clone, Serialize, ToSchema, PartialEq)]
pub struct NeverSeen {
    pub field: String,
    /// `field` or `target`.
    pub role: &'static str,
    pub did_you_mean: Vec<String>,
}

/// `fields_seen` of a stream's summary.
#[derive(Debug, Clone, Serialize, ToSchema, PartialEq)]
pub struct FieldsSeen {
    /// Events sampled so far, and the sample's size (`ingest.field_check_events`).
    pub events: u64,
    pub sample: u64,
    /// Per declared field, the sampled events that carried it (present and not null).
    pub fields: Vec<FieldCount>,
    /// The sampled events that carried the target (streams that declare one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<FieldCount>,
    /// Once the sample is full: the fields and target absent from all of it.
    pub never_seen: Vec<NeverSeen>,
    /// The warning, in words, when something was never seen.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub warning: Option<String>,
}

impl Sightings {
    pub fn new(names: Vec<String>, target: Option<String>, limit: u64) -> Sightings {
        let seen = Seen {
            fields: vec![0; names.len()],
            ..Seen::default()
        };
        Sightings {
            names,
            target,
            limit,
            seen: Mutex::new(seen),
        }
    }

    /// The declared fields' names and the target's, in order.
    pub fn names(&self) -> (&[String], Option<&str>) {
        (&self.names, self.target.as_deref())
    }

    /// Whether the sample still takes events.
    pub fn wants(&self) -> bool {
        crate::lock(&self.seen).events < self.limit
    }

    /// Counts one event; the fields never seen when this event completes the sample (once),
    /// else None.
    pub fn record(&self, p: Presence) -> Option<Vec<NeverSeen>> {
        let mut s = crate::lock(&self.seen);
        if s.events >= self.limit {
            return None;
        }
        s.events += 1;
        for (count, present) in s.fields.iter_mut().zip(&p.fields) {
            *count += u64::from(*present);
        }
        s.target += u64::from(p.target);
        for k in p.keys {
            if s.keys.len() >= MAX_KEYS {
                break;
            }
            s.keys.insert(k);
        }
        (s.events == self.limit).then(|| self.never_seen(&s))
    }

    fn never_seen(&self, s: &Seen) -> Vec<NeverSeen> {
        let mut out: Vec<NeverSeen> = self
            .names
            .iter()
            .zip(&s.fields)
            .filter(|(_, c)| **c == 0)
            .map(|(n, _)| NeverSeen {
                field: n.clone(),
                role: "field",
                did_you_mean: closest(n, &s.keys),
            })
            .collect();
        if let Some(t) = &self.target
            && s.target == 0
        {
            out.push(NeverSeen {
                field: t.clone(),
                role: "target",
                did_you_mean: closest(t, &s.keys),
            });
        }
        out
    }

    /// The fields and target absent from every event counted so far (none before the
    /// first), whether or not the sample is full: `ravel check`'s sample of a topic's latest
    /// messages, which may hold fewer.
    pub fn absent(&self) -> Vec<NeverSeen> {
        let s = crate::lock(&self.seen);
        if s.events == 0 {
            return Vec::new();
        }
        self.never_seen(&s)
    }

    pub fn summary(&self) -> FieldsSeen {
        let s = crate::lock(&self.seen);
        let never_seen = if s.events >= self.limit {
            self.never_seen(&s)
        } else {
            Vec::new()
        };
        let warning = warning(&never_seen, s.events);
        FieldsSeen {
            events: s.events,
            sample: self.limit,
            fields: self
                .names
                .iter()
                .zip(&s.fields)
                .map(|(n, c)| FieldCount {
                    field: n.clone(),
                    events: *c,
                })
                .collect(),
            target: self.target.as_ref().map(|t| FieldCount {
                field: t.clone(),
                events: s.target,
            }),
            never_seen,
            warning,
        }
    }
}

/// The warning in words: each field never seen in `events` events, with its suggestions.
pub fn warning(never: &[NeverSeen], events: u64) -> Option<String> {
    if never.is_empty() {
        return None;
    }
    let each: Vec<String> = never
        .iter()
        .map(|n| {
            let what = if n.role == "target" {
                format!("the target '{}'", n.field)
            } else {
                format!("field '{}'", n.field)
            };
            match n.did_you_mean.as_slice() {
                [] => what,
                keys => format!("{what} (did you mean {}?)", keys.join(" or ")),
            }
        })
        .collect();
    Some(format!(
        "absent from every one of the first {events} events: {}; check the stream's declared \
         names against the events' keys (a field never seen is all zeros, or all missing; a \
         target never seen leaves every row out)",
        each.join(", ")
    ))
}

/// The keys closest to `name` (case-insensitive edit distance, on the whole path or on its
/// last segment), at most `MAX_SUGGESTIONS`, each within a third of the name's length (at
/// least 2 edits).
pub fn closest<'k>(name: &str, keys: impl IntoIterator<Item = &'k String>) -> Vec<String> {
    let lower = name.to_ascii_lowercase();
    let last = |s: &str| s.rsplit('.').next().unwrap_or("").to_string();
    let name_last = last(&lower);
    let mut scored: Vec<(usize, &String)> = keys
        .into_iter()
        .filter(|k| k.as_str() != name)
        .map(|k| {
            let kl = k.to_ascii_lowercase();
            let whole = crate::config::explain::edit_distance(&lower, &kl);
            let tail = crate::config::explain::edit_distance(&name_last, &last(&kl)) + 1;
            (whole.min(tail), k)
        })
        .filter(|(d, _)| *d <= 2.max(name.len() / 3))
        .collect();
    scored.sort();
    scored
        .into_iter()
        .take(MAX_SUGGESTIONS)
        .map(|(_, k)| k.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(fields: &[bool], target: bool, keys: &[&str]) -> Presence {
        Presence {
            fields: fields.to_vec(),
            target,
            keys: keys.iter().map(|k| k.to_string()).collect(),
        }
    }

    #[test]
    fn fields_absent_from_the_whole_sample_are_named_once_with_the_closest_keys() {
        let s = Sightings::new(
            vec!["customer.agee".into(), "sqft".into()],
            Some("delivery_day".into()),
            3,
        );
        let keys = [
            "customer.age",
            "customer.name",
            "sqft",
            "delivery_days",
            "id",
        ];
        assert!(s.record(event(&[false, true], false, &keys)).is_none());
        assert!(
            s.summary().never_seen.is_empty(),
            "not before the sample is full"
        );
        assert!(s.record(event(&[false, false], false, &keys)).is_none());
        let never = s.record(event(&[false, true], false, &keys)).unwrap();
        assert_eq!(
            never,
            vec![
                NeverSeen {
                    field: "customer.agee".into(),
                    role: "field",
                    did_you_mean: vec!["customer.age".into(), "customer.name".into()],
                },
                NeverSeen {
                    field: "delivery_day".into(),
                    role: "target",
                    did_you_mean: vec!["delivery_days".into()],
                },
            ]
        );
        assert!(!s.wants());
        assert!(
            s.record(event(&[true, true], true, &keys)).is_none(),
            "once"
        );
        let summary = s.summary();
        assert_eq!((summary.events, summary.sample), (3, 3));
        assert_eq!(summary.fields[1].events, 2);
        assert_eq!(summary.target.unwrap().events, 0);
        let w = summary.warning.unwrap();
        assert!(
            w.contains("field 'customer.agee' (did you mean customer.age or customer.name?)")
                && w.contains("the target 'delivery_day' (did you mean delivery_days?)"),
            "{w}"
        );
    }

    #[test]
    fn a_field_seen_once_is_no_warning_and_far_keys_are_no_suggestion() {
        let s = Sightings::new(vec!["price".into(), "zzzzzz".into()], None, 2);
        assert!(s.record(event(&[true, false], false, &["price"])).is_none());
        let never = s
            .record(event(&[false, false], false, &["price", "a"]))
            .unwrap();
        assert_eq!(never.len(), 1);
        assert_eq!(never[0].field, "zzzzzz");
        assert!(never[0].did_you_mean.is_empty());
        // A nested key whose last segment is the name.
        assert_eq!(
            closest("age", &["user.age".to_string(), "agency".to_string()]),
            vec!["user.age".to_string()]
        );
    }
}
