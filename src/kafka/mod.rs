//! Everything that speaks to the Kafka cluster itself, below ingest and the state store: the
//! one librdkafka client configuration (`client`), the embedded broker (`broker`, `ravel
//! broker`), every topic ravel reads or writes checked at start (`topics`), how an
//! authorization error is recognised and reported (`authz`), standalone assignment
//! (`standalone`: an instance's own partitions without the group protocol, and the watch for a
//! second one), the rebalance callback of group consumers (`rebalance`), what ravel's producers share when
//! they send (`send`), and a topic's latest messages read without a commit (`sample`).

pub mod authz;
pub mod broker;
pub mod client;
pub mod rebalance;
pub mod sample;
pub mod send;
pub mod standalone;
pub mod topics;

pub use client::*;

/// The header newer Confluent serializers put the value's schema GUID in.
pub const VALUE_SCHEMA_HEADER: &str = "__value_schema_id";

/// A message's schema id as the codec takes it: the value of its `__value_schema_id` header,
/// if it has one (`crate::codec::Decoder::decode`).
pub fn value_schema_id(headers: Option<&rdkafka::message::BorrowedHeaders>) -> Option<&[u8]> {
    use rdkafka::message::Headers;
    headers?
        .iter()
        .find(|h| h.key == VALUE_SCHEMA_HEADER)
        .and_then(|h| h.value)
}
