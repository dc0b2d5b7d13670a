//! Everything that speaks to the Kafka cluster itself, below ingest and the state store: the
//! one librdkafka client configuration (`client`), the embedded broker (`broker`, `ravel
//! broker`), every topic ravel reads or writes checked at start (`topics`), how an
//! authorization error is recognised and reported (`authz`), standalone assignment
//! (`standalone`: an instance's own partitions without the group protocol, and the watch for a
//! second one), and a topic's latest messages read without a commit (`sample`).

pub mod authz;
pub mod broker;
pub mod client;
pub mod sample;
pub mod standalone;
pub mod topics;

pub use client::*;
