//! The demo producer: streams paper 003's synthetic design (correlated rows, sparse truth;
//! `demo.synthetic`) into the embedded broker at `demo.rows_per_second`, so that a bare
//! `cargo run --release` has a live stream to query within seconds. Binary messages of
//! `demo.batch_rows` rows each; it stops when dropped.

use crate::config::Config;
use crate::ingest::{self, format};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub struct DemoProducer {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl DemoProducer {
    pub fn start(config: &Config, brokers: &str) -> anyhow::Result<DemoProducer> {
        let spec = config.demo_spec()?;
        let stream = config.stream(&config.demo.stream).ok_or_else(|| {
            anyhow::anyhow!("demo stream '{}' is not declared", config.demo.stream)
        })?;
        let topic = stream.topic();
        let producer: BaseProducer = ingest::client_config(&config.kafka, brokers)
            .set("linger.ms", "5")
            .create()
            .map_err(|e| anyhow::anyhow!("cannot create the demo producer: {e}"))?;
        let (rate, batch) = (config.demo.rows_per_second as f64, config.demo.batch_rows);
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        tracing::info!(topic = %topic, rows_per_second = rate, design = %config.demo.synthetic, "demo producer started");
        let thread = std::thread::Builder::new()
            .name("ravel-demo".into())
            .spawn(move || {
                let mut rows = spec.rows();
                let (mut x, mut y, mut buf) = (Vec::new(), Vec::new(), Vec::new());
                let start = Instant::now();
                let mut sent = 0u64;
                while !flag.load(Ordering::Relaxed) {
                    // Keep to the rate on average: sleep until the next batch is due.
                    let due = start + Duration::from_secs_f64(sent as f64 / rate);
                    let now = Instant::now();
                    if due > now {
                        std::thread::sleep((due - now).min(Duration::from_millis(100)));
                        continue;
                    }
                    x.clear();
                    y.clear();
                    let got = rows.fill(batch, &mut x, &mut y);
                    format::encode_binary(&x, &y, spec.p, &mut buf);
                    if let Err((e, _)) =
                        producer.send(BaseRecord::<(), [u8]>::to(&topic).payload(&buf[..]))
                    {
                        tracing::warn!(error = %e, "demo producer: send failed");
                    }
                    producer.poll(Duration::ZERO);
                    sent += got as u64;
                }
                let _ = producer.flush(Duration::from_secs(5));
            })?;
        Ok(DemoProducer {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for DemoProducer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
