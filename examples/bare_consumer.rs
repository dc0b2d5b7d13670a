//! The peer of the service's ingest benchmark (`scripts/bench_all.py`): a bare rdkafka
//! consumer that reads a topic and only counts, with the service consumer's exact client
//! settings (`KafkaClients::consumer`: group subscription, manual commits, the same fetch
//! settings). It exits once it has read `--messages` messages and prints one JSON line: the
//! messages, the rows their binary headers declare (`RVB1`; JSON messages count as 0) and the
//! seconds from the first message to the last.
//!
//! `cargo run --release --example bare_consumer -- --brokers HOST:PORT --topic T --messages N`

#[path = "common/args.rs"]
mod args;
use ravel::KafkaClients;
use ravel::config::{IngestConfig, KafkaConfig};
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use std::time::{Duration, Instant};

fn main() -> anyhow::Result<()> {
    let arg = args::required;
    let (brokers, topic) = (arg("--brokers")?, arg("--topic")?);
    let (brokers, topic) = (brokers.as_str(), topic.as_str());
    let messages: u64 = arg("--messages")?.parse()?;
    let kafka = KafkaConfig {
        group_id: format!("bare-{}", std::process::id()),
        ..KafkaConfig::default()
    };
    let consumer: BaseConsumer = KafkaClients::new(&kafka, brokers)
        .consumer(IngestConfig::default().lag_interval_ms)
        .create()?;
    consumer.subscribe(&[topic])?;
    let (mut got, mut rows, mut first) = (0u64, 0u64, None);
    while got < messages {
        match consumer.poll(Duration::from_millis(100)) {
            Some(Ok(m)) => {
                first.get_or_insert_with(Instant::now);
                got += 1;
                if let Some(p) = m
                    .payload()
                    .filter(|p| p.len() >= 8 && p.starts_with(b"RVB1"))
                {
                    rows += u32::from_le_bytes(p[4..8].try_into()?) as u64;
                }
            }
            Some(Err(e)) => eprintln!("consumer error: {e}"),
            None => {}
        }
    }
    let seconds = first.map_or(0.0, |t| t.elapsed().as_secs_f64());
    println!("{{\"messages\": {got}, \"rows\": {rows}, \"seconds\": {seconds}}}");
    Ok(())
}
