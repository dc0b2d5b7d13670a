//! The peer of the scoring benchmark (`scripts/bench_decode.py --scoring`, issue 33): a bare
//! consume-and-produce pipe with a scorer's exact client settings (`KafkaClients::
//! scorer_consumer` and `scorer_producer`: its own group, manual commits, an idempotent
//! producer acknowledged by every in-sync replica) and a scorer's batching (up to 1000
//! messages, each answered on the output topic with its key and a short JSON of its
//! coordinates, about the size of a prediction; the batch's deliveries awaited, then its
//! offsets committed), without decoding, predicting or headers. It exits once it has
//! piped `--messages` messages and prints one JSON line: messages and seconds from the first
//! to the last commit.
//!
//! `cargo run --release --example bare_pipe -- --brokers HOST:PORT --topic T --output-topic O
//!  --messages N`

#[path = "common/args.rs"]
mod args;
use ravel::KafkaClients;
use ravel::config::KafkaConfig;
use rdkafka::consumer::{BaseConsumer, CommitMode, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{BaseRecord, Producer, ThreadedProducer};
use rdkafka::{Offset, TopicPartitionList};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

fn main() -> anyhow::Result<()> {
    let arg = args::required;
    let (brokers, topic, output) = (arg("--brokers")?, arg("--topic")?, arg("--output-topic")?);
    let (brokers, topic, output) = (brokers.as_str(), topic.as_str(), output.as_str());
    let messages: u64 = arg("--messages")?.parse()?;
    let kafka = KafkaConfig::default();
    let clients = KafkaClients::new(&kafka, brokers);
    let consumer: BaseConsumer = clients
        .scorer_consumer(&format!("bare-pipe-{}", std::process::id()))
        .create()?;
    let producer: ThreadedProducer<_> = clients.scorer_producer().create()?;
    consumer.subscribe(&[topic])?;
    let (mut piped, mut first) = (0u64, None);
    while piped < messages {
        let mut batch = Vec::new();
        let mut wait = Duration::from_millis(100);
        while batch.len() < 1000 {
            match consumer.poll(wait) {
                Some(Ok(m)) => batch.push(m),
                Some(Err(e)) => eprintln!("consumer error: {e}"),
                None => break,
            }
            wait = Duration::ZERO;
        }
        if batch.is_empty() {
            continue;
        }
        first.get_or_insert_with(Instant::now);
        let mut next: BTreeMap<i32, i64> = BTreeMap::new();
        for m in &batch {
            let answer = format!(
                "{{\"partition\": {}, \"offset\": {}, \"bytes\": {}}}",
                m.partition(),
                m.offset(),
                m.payload().map_or(0, <[u8]>::len)
            );
            let mut record = BaseRecord::<[u8], [u8]>::to(output).payload(answer.as_bytes());
            if let Some(k) = m.key() {
                record = record.key(k);
            }
            while let Err((_, r)) = producer.send(record) {
                record = r;
                std::thread::sleep(Duration::from_millis(5));
            }
            next.insert(m.partition(), m.offset() + 1);
        }
        piped += batch.len() as u64;
        drop(batch);
        producer.flush(Duration::from_secs(30))?;
        let mut tpl = TopicPartitionList::new();
        for (&p, &o) in &next {
            tpl.add_partition_offset(topic, p, Offset::Offset(o))?;
        }
        consumer.commit(&tpl, CommitMode::Sync)?;
    }
    let seconds = first.map_or(0.0, |t: Instant| t.elapsed().as_secs_f64());
    println!("{{\"messages\": {piped}, \"seconds\": {seconds}}}");
    Ok(())
}
