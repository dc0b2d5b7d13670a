//! One message of an observation stream decoded into rows, off the ingest thread when
//! `ingest.decode_threads` allows (`crate::ingest::gather`): the stream's `Schema` (what its
//! messages must match, with the message's schema-id header) and the rows, tallies or refusal
//! that `crate::ingest::fold`'s `accept` takes.

use super::format::{self, Schema};
use crate::ingest::dead_letters::rejections::no_payload;
use crate::state::streams::StreamHandle;
use rdkafka::message::{BorrowedHeaders, Headers};

/// A message's rows decoded ahead of `StreamIngest::accept`, on another thread (`decode`),
/// or its rejection.
pub struct Decoded {
    pub(crate) x: Vec<f64>,
    pub(crate) y: Vec<f64>,
    pub(crate) result: Result<usize, format::Rejection>,
    pub(crate) tally: format::Tally,
}

/// What a stream's messages must match (`headers`: the message's, for a schema id there).
pub(crate) fn schema<'a>(
    handle: &'a StreamHandle,
    headers: Option<&'a BorrowedHeaders>,
) -> Schema<'a> {
    let wire = handle.wire.as_ref();
    Schema {
        p: handle.p(),
        fields: handle.fields.as_ref(),
        target: handle.config.target.as_deref(),
        skip_missing_target: handle.config.missing() != ravel_core::fields::Missing::Reject,
        classification: handle.task() == ravel_core::Task::Classification,
        unlabelled: false,
        wire,
        schema_header: wire.and(headers).and_then(|h| {
            h.iter()
                .find(|h| h.key == crate::schemas::VALUE_SCHEMA_HEADER)
                .and_then(|h| h.value)
        }),
        plan: handle.events.as_ref(),
    }
}

/// Decodes a message of `handle`'s stream as `StreamIngest::accept` would, into its own
/// buffers: callable from any thread.
pub fn decode(
    handle: &StreamHandle,
    payload: Option<&[u8]>,
    headers: Option<&BorrowedHeaders>,
) -> Decoded {
    // Room for the rows of a JSON message of shortest round-trip doubles (about 20 bytes a
    // number) at once, instead of doubling (and copying) the buffer as it fills.
    let guess = payload.map_or(0, |b| b.len() / 20);
    let (mut x, mut y) = (Vec::with_capacity(guess), Vec::new());
    let mut tally = format::Tally::default();
    let result = match payload {
        None => Err(no_payload()),
        Some(payload) => format::decode_tallied(
            payload,
            &schema(handle, headers),
            &mut x,
            &mut y,
            &mut tally,
        ),
    };
    Decoded {
        x,
        y,
        result,
        tally,
    }
}

/// Whether `handle`'s messages are decoded a batch at a time (`decode_batch`): Avro values
/// read by the stream's fields and target.
pub fn batched(handle: &StreamHandle) -> bool {
    handle.wire.as_ref().is_some_and(|w| w.is_avro())
        && handle.fields.is_some()
        && handle.config.target.is_some()
}

/// Decodes messages of `handle`'s stream (payload and headers each) as `decode` decodes each,
/// their Avro values read together (`crate::schemas::Wire::pick_batch`).
pub fn decode_batch(
    handle: &StreamHandle,
    msgs: &[(Option<&[u8]>, Option<&BorrowedHeaders>)],
) -> Vec<Decoded> {
    let schemas: Vec<Schema> = msgs.iter().map(|(_, h)| schema(handle, *h)).collect();
    let mut early = match (
        handle.wire.as_ref(),
        handle.fields.as_ref(),
        &handle.config.target,
    ) {
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
