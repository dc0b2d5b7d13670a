//! Everything that speaks to the Kafka cluster itself, below ingest and the state store: the
//! one librdkafka client configuration (`client`), the embedded broker (`broker`, `ravel
//! broker`), every topic ravel reads or writes checked at start (`topics`), and how an
//! authorization error is recognised and reported (`authz`).

pub mod authz;
pub mod broker;
pub mod client;
pub mod topics;

pub use client::*;
