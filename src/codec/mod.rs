//! The message codec: a Kafka message's bytes into rows (observation streams) or a column
//! (feature streams), checked before anything reaches the statistics, and rows into bytes for
//! the producers. One layer below every consumer (ingest, the scorers, the field proposal,
//! `ravel check`, `ravel produce`, the demo): none of them reaches into another for decoding.
//!
//! By format: `json` (ravel's own JSON shapes in one pass over the bytes, with its `number`
//! parser, and `json::events`, JSON events read by their mapped paths), `schemad` (schema'd
//! values: the Confluent framing and the Schema Registry client, Avro, Protobuf, JSON Schema);
//! `events` is the field mapping of named rows, named mini-batches and nested events (every
//! format's events end there); `format` the entry point of every observation-stream format
//! (positional JSON, binary, CSV-like, schema'd values) and the encoders; `schema` what a
//! message must match; `feature_format` the messages of a feature stream's topic.
//!
//! `decoder::Decoder` is a stream's codec, built once from its configuration: what its messages
//! must match, its schema'd wire and its compiled paths. It decodes one message (`decode`) or
//! a batch (`decode_batch`), given the value's bytes and its schema id as bytes (the
//! `__value_schema_id` header's value, which the consumer reads off Kafka's headers).
//! A new format is a folder here and one arm in `format`.

pub mod decoder;
pub mod events;
pub mod feature_format;
pub mod format;
pub mod json;
pub mod schema;
pub mod schemad;

pub use decoder::{Decoded, Decoder};
