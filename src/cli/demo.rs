//! The demo producer: streams paper 003's synthetic design (correlated rows, sparse truth;
//! `demo.synthetic`) into the embedded broker at `demo.rows_per_second`, so that a bare
//! `cargo run --release` has a live stream to query within seconds. Binary messages of
//! `demo.batch_rows` rows each; it stops when dropped.
//!
//! With `demo.feature_stream` set it also feeds a feature stream (paper 000's design,
//! `ravel_core::synthetic::FeatureDesign`): the labels, then `passes` passes over the p columns at
//! `demo.features_per_second`, as JSON feature messages.

use crate::codec::format;
use crate::config::Config;
use ravel_core::synthetic::FeatureDesign;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

pub struct DemoProducer {
    stop: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

impl DemoProducer {
    pub fn start(config: &Config, brokers: &str) -> anyhow::Result<DemoProducer> {
        let spec = config.demo_spec()?;
        let stream = config.stream(&config.demo.stream).ok_or_else(|| {
            anyhow::anyhow!("demo stream '{}' is not declared", config.demo.stream)
        })?;
        let topic = stream.topic();
        let producer: BaseProducer = crate::kafka::client_config(&config.kafka, brokers)
            .set("linger.ms", "5")
            .create()
            .map_err(|e| anyhow::anyhow!("cannot create the demo producer: {e}"))?;
        let (rate, batch) = (config.demo.rows_per_second as f64, config.demo.batch_rows);
        let stop = Arc::new(AtomicBool::new(false));
        let mut threads = vec![];
        if let Some(spec) = config.demo_feature_spec()? {
            threads.push(feature_demo(config, brokers, spec, stop.clone())?);
        }
        let flag = stop.clone();
        tracing::info!(topic = %topic, rows_per_second = rate, design = ?config.demo.synthetic, "demo producer started");
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
        threads.push(thread);
        Ok(DemoProducer { stop, threads })
    }
}

/// Sends the labels, then `spec.passes` passes over the columns, at the configured rate.
fn feature_demo(
    config: &Config,
    brokers: &str,
    spec: FeatureDesign,
    stop: Arc<AtomicBool>,
) -> anyhow::Result<JoinHandle<()>> {
    let stream = config
        .feature_stream(&config.demo.feature_stream)
        .ok_or_else(|| anyhow::anyhow!("demo feature stream is not declared"))?;
    let topic = stream.topic();
    let producer: BaseProducer = crate::kafka::client_config(&config.kafka, brokers)
        .set("linger.ms", "5")
        .create()
        .map_err(|e| anyhow::anyhow!("cannot create the demo feature producer: {e}"))?;
    let rate = config.demo.features_per_second as f64;
    tracing::info!(topic = %topic, features_per_second = rate, design = ?config.demo.feature_design, "demo feature producer started");
    Ok(std::thread::Builder::new()
        .name("ravel-demo-features".into())
        .spawn(move || {
            let send = |payload: &[u8]| {
                if let Err((e, _)) =
                    producer.send(BaseRecord::<(), [u8]>::to(&topic).payload(payload))
                {
                    tracing::warn!(error = %e, "demo feature producer: send failed");
                }
                producer.poll(Duration::ZERO);
            };
            let labels = serde_json::json!({ "labels": spec.labels() });
            send(&serde_json::to_vec(&labels).expect("JSON"));
            let start = Instant::now();
            let mut sent = 0u64;
            'passes: for _ in 0..spec.passes {
                for j in 0..spec.p {
                    loop {
                        if stop.load(Ordering::Relaxed) {
                            break 'passes;
                        }
                        let due = start + Duration::from_secs_f64(sent as f64 / rate);
                        let now = Instant::now();
                        if due <= now {
                            break;
                        }
                        std::thread::sleep((due - now).min(Duration::from_millis(100)));
                    }
                    let msg =
                        serde_json::json!({"feature": format!("f{j}"), "values": spec.column(j)});
                    send(&serde_json::to_vec(&msg).expect("JSON"));
                    sent += 1;
                }
            }
            let _ = producer.flush(Duration::from_secs(5));
        })?)
}

impl Drop for DemoProducer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}
