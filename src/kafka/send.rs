//! What ravel's own producers (the dead-letter copies, the scorers' predictions, `ravel
//! produce`) share when they send a record: the headers they add, and the send that waits
//! while librdkafka's queue is full instead of dropping the record.

use rdkafka::error::{KafkaError, RDKafkaErrorCode};
use rdkafka::message::{Header, OwnedHeaders, ToBytes};
use rdkafka::producer::{BaseProducer, BaseRecord, ProducerContext};
use std::time::Duration;

/// `headers` with each (key, value) of `more` added, in order.
pub fn with_headers(mut headers: OwnedHeaders, more: &[(&str, &str)]) -> OwnedHeaders {
    for &(key, value) in more {
        headers = headers.insert(Header {
            key,
            value: Some(value),
        });
    }
    headers
}

/// A record the producer refused, with why.
pub type Refused<'a, K, P, C> = (
    KafkaError,
    BaseRecord<'a, K, P, <C as ProducerContext>::DeliveryOpaque>,
);

/// Sends `record`; while the producer's queue is full, polls it (its deliveries make room)
/// and tries again. Any other refusal is returned with the record.
#[allow(clippy::result_large_err)]
pub fn send_waiting<'a, C, K, P>(
    producer: &BaseProducer<C>,
    mut record: BaseRecord<'a, K, P, C::DeliveryOpaque>,
) -> Result<(), Refused<'a, K, P, C>>
where
    C: ProducerContext,
    K: ToBytes + ?Sized,
    P: ToBytes + ?Sized,
{
    loop {
        match producer.send(record) {
            Ok(()) => return Ok(()),
            Err((KafkaError::MessageProduction(RDKafkaErrorCode::QueueFull), r)) => {
                record = r;
                producer.poll(Duration::from_millis(50));
            }
            Err(e) => return Err(e),
        }
    }
}
