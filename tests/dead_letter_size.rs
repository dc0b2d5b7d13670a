//! A rejected message too large to copy whole (over the dead-letter producer's size limit) is
//! copied as a truncated envelope with its headers and its original length, and the stream
//! goes on: before, the copy failed for good (and with `dlq.on_failure = "block"` its
//! partition would wait forever). Real embedded broker, the service in-process.

use crate::common::*;
use rdkafka::config::ClientConfig;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use std::time::Duration;

#[test]
fn an_oversized_bad_message_is_dead_lettered_truncated_and_the_partition_goes_on() {
    let (_broker, brokers) = broker_with(&[("t.big", 1), ("t.big.dlq", 1)]);
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", &brokers)
        .set("message.max.bytes", "4000000")
        .create()
        .unwrap();
    // A good row, a 2 MB message that is not JSON, a good row.
    let huge = vec![b'z'; 2_000_000];
    let payloads: Vec<Vec<u8>> = vec![
        br#"{"x": [1.0, 2.0], "y": 3.0}"#.to_vec(),
        huge.clone(),
        br#"{"x": [2.0, 1.0], "y": 0.5}"#.to_vec(),
    ];
    for p in &payloads {
        producer
            .send(BaseRecord::<(), [u8]>::to("t.big").payload(&p[..]))
            .map_err(|(e, _)| e)
            .unwrap();
    }
    producer.flush(Duration::from_secs(30)).unwrap();

    let cfg = one_regression("s", "t.big", 2, None);
    let svc = TestService::start(cfg, &brokers);
    // Both good rows are folded: the bad message did not hold its partition.
    svc.wait_rows("s", 2);
    let copies = read_topic(&brokers, "t.big.dlq", 1);
    assert_eq!(copies.len(), 1);
    let (payload, headers) = &copies[0];
    assert_eq!(payload.len(), ravel::TRUNCATED_BYTES);
    assert_eq!(&payload[..], &huge[..payload.len()]);
    assert_eq!(headers["ravel-truncated-from"], "2000000");
    assert_eq!(headers["ravel-source-offset"], "1");
    assert_eq!(headers["ravel-reason"], "malformed");
    let m = svc.metrics();
    assert_eq!(
        sample(&m, "ravel_dead_letters_total{stream=\"s\"}"),
        Some(1.0),
        "{m}"
    );
}
