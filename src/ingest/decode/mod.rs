//! Decoding: a Kafka message's bytes into rows (observation streams) or a column (feature
//! streams), checked before anything reaches the statistics. `format` is the entry point of
//! every observation-stream format (positional JSON, binary, CSV-like, schema'd values);
//! `events` reads named rows, named mini-batches and events through the stream's field
//! mapping, JSON events first by `fast_events` (one pass over the bytes, the mapped paths
//! compiled once); `fast_json` is the JSON fast path of positional rows and named
//! mini-batches, with its number parser in `number`; `feature_format` the messages of a
//! feature stream's topic; `message` one observation message decoded with its stream's
//! `Schema`, ahead of the fold or on a scorer's thread.

pub mod events;
pub mod fast_events;
pub(crate) mod fast_json;
pub mod feature_format;
pub mod format;
pub mod message;
mod number;
pub mod schema;
