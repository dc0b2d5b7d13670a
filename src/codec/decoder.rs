//! A stream's codec (`Decoder`), built once from its configuration: what its messages must
//! match (p, the declared fields and target, how a missing target and the task's labels are
//! read), its schema'd wire and its fields and target compiled for the JSON events' fast path.
//! It decodes one observation message into rows, off the ingest thread when
//! `ingest.decode_threads` allows, on a scorer's thread, or a batch of Avro values together;
//! the rows, tallies or refusal are what ingest's fold takes. The schema id comes as bytes (the
//! `__value_schema_id` header's value: `crate::kafka::value_schema_id` reads it off a
//! message), so nothing here knows Kafka.

use super::format::{self, Schema};
use super::schemad::Wire;
use crate::config::StreamConfig;
use crate::dotted::Paths;
use crate::reason::{Reason, Rejection};
use ravel_core::fields::Fields;

/// A message's rows decoded ahead of `StreamIngest::accept`, on another thread (`decode`),
/// or its rejection.
pub struct Decoded {
    pub(crate) x: Vec<f64>,
    pub(crate) y: Vec<f64>,
    pub(crate) result: Result<usize, format::Rejection>,
    pub(crate) tally: format::Tally,
}

/// One message as the codec takes it: its value's bytes (None: no payload) and its schema id
/// (the `__value_schema_id` header's value, if any).
pub type Message<'a> = (Option<&'a [u8]>, Option<&'a [u8]>);

/// One stream's codec: built once from its configuration (`of_stream`), its schema'd wire set
/// when the registry is known (`crate::server`).
#[derive(Debug)]
pub struct Decoder {
    /// Columns: the declared fields' (counted once, as every message asks), else the count.
    pub p: usize,
    /// The declared fields and their columns (None: declared by count).
    pub fields: Option<Fields>,
    /// The target's name or dotted path (streams that declare `target`).
    pub target: Option<String>,
    /// A row whose target is missing is skipped (the stream's `missing` is not `reject`).
    pub skip_missing_target: bool,
    /// Targets must be +1, -1 or 0.
    pub classification: bool,
    /// How schema'd values are decoded (`format`; None: ravel's own formats).
    pub wire: Option<Wire>,
    /// The fields and target compiled for the JSON events' fast path (None: a stream that
    /// reads no events).
    pub plan: Option<Paths>,
}

/// The refusal of a message without a payload (a tombstone on an observation topic).
pub fn no_payload() -> Rejection {
    Rejection {
        reason: Reason::Malformed,
        message: "message has no payload".into(),
    }
}

impl Decoder {
    /// The codec of a configured or declared stream (its wire comes later: `wire`).
    pub fn of_stream(config: &StreamConfig) -> anyhow::Result<Decoder> {
        let fields = config.fields()?;
        let plan = fields
            .as_ref()
            .zip(config.target.as_deref())
            .map(|(f, t)| Paths::new(f, t));
        Ok(Decoder {
            p: fields.as_ref().map_or_else(|| config.p(), Fields::p),
            target: config.target.clone(),
            skip_missing_target: config.missing() != ravel_core::fields::Missing::Reject,
            classification: config.task == ravel_core::Task::Classification,
            wire: None,
            plan,
            fields,
        })
    }

    /// What a message must match, given its schema id (the `__value_schema_id` header's
    /// value, if any; read only for schema'd values).
    pub fn schema<'a>(&'a self, schema_id: Option<&'a [u8]>) -> Schema<'a> {
        let wire = self.wire.as_ref();
        Schema {
            p: self.p,
            fields: self.fields.as_ref(),
            target: self.target.as_deref(),
            skip_missing_target: self.skip_missing_target,
            classification: self.classification,
            unlabelled: false,
            wire,
            schema_header: wire.and(schema_id),
            plan: self.plan.as_ref(),
        }
    }

    /// Decodes a message as `StreamIngest::accept` would, into its own buffers: callable from
    /// any thread.
    pub fn decode(&self, payload: Option<&[u8]>, schema_id: Option<&[u8]>) -> Decoded {
        // Room for the rows of a JSON message of shortest round-trip doubles (about 20 bytes
        // a number) at once, instead of doubling (and copying) the buffer as it fills.
        let guess = payload.map_or(0, |b| b.len() / 20);
        let (mut x, mut y) = (Vec::with_capacity(guess), Vec::new());
        let mut tally = format::Tally::default();
        let result = match payload {
            None => Err(no_payload()),
            Some(payload) => {
                format::decode_tallied(payload, &self.schema(schema_id), &mut x, &mut y, &mut tally)
            }
        };
        Decoded {
            x,
            y,
            result,
            tally,
        }
    }

    /// Whether messages are decoded a batch at a time (`decode_batch`): Avro values read by
    /// the stream's fields and target.
    pub fn batched(&self) -> bool {
        self.wire.as_ref().is_some_and(|w| w.is_avro())
            && self.fields.is_some()
            && self.target.is_some()
    }

    /// Decodes messages (payload and schema id each) as `decode` decodes each, their Avro
    /// values read together (`Wire::pick_batch`).
    pub fn decode_batch(&self, msgs: &[Message]) -> Vec<Decoded> {
        let schemas: Vec<Schema> = msgs.iter().map(|(_, id)| self.schema(*id)).collect();
        let mut early = match (self.wire.as_ref(), self.fields.as_ref(), &self.target) {
            (Some(wire), Some(fields), Some(target)) => {
                let values: Vec<(&[u8], Option<&[u8]>)> = msgs
                    .iter()
                    .zip(&schemas)
                    .filter_map(|((p, _), s)| p.map(|p| (p, s.schema_header)))
                    .collect();
                wire.pick_batch(&values, fields, target)
            }
            _ => Vec::new(),
        }
        .into_iter();
        msgs.iter()
            .zip(&schemas)
            .map(|((payload, _), schema)| {
                let (mut x, mut y) = (Vec::new(), Vec::new());
                let mut tally = format::Tally::default();
                let result = match payload {
                    None => Err(no_payload()),
                    Some(payload) => {
                        let early = early.next().flatten();
                        format::decode_early(payload, schema, early, &mut x, &mut y, &mut tally)
                    }
                };
                Decoded {
                    x,
                    y,
                    result,
                    tally,
                }
            })
            .collect()
    }
}
