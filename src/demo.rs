//! The demo producer: streams paper 003's synthetic design (correlated rows, sparse truth;
//! `demo.synthetic`) into the embedded broker at `demo.rows_per_second`, so that a bare
//! `cargo run --release` has a live stream to query within seconds. Binary messages of
//! `demo.batch_rows` rows each; it stops when dropped.
//!
//! With `demo.feature_stream` set it also feeds a feature stream (paper 000's design,
//! `FeatureDemoSpec`): the labels, then `passes` passes over the p columns at
//! `demo.features_per_second`, as JSON feature messages.

use crate::config::Config;
use crate::ingest::{self, format};
use rand::SeedableRng;
use rand::rngs::StdRng;
use rand_distr::{Distribution, StandardNormal};
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// The demo feature stream's design, `n=200,p=500,s=10,passes=3,seed=1`: n samples, p
/// features with N(0, 1) values, the true ones every p/s-th (p/s - 1, 2 p/s - 1, ...) with
/// weights of size 1 to 2 and alternating signs, y = X w + N(0, 0.1^2) (000 section 5, with
/// weights large enough to stand out of the noise). Each column is a function of (seed, j),
/// so a pass regenerates it instead of holding n p values.
#[derive(Debug, Clone, PartialEq)]
pub struct FeatureDemoSpec {
    pub n: usize,
    pub p: usize,
    pub s: usize,
    pub passes: usize,
    pub seed: u64,
}

impl FromStr for FeatureDemoSpec {
    type Err = String;
    fn from_str(text: &str) -> Result<Self, String> {
        let mut spec = FeatureDemoSpec {
            n: 200,
            p: 500,
            s: 10,
            passes: 3,
            seed: 1,
        };
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, v) = part
                .split_once('=')
                .ok_or_else(|| format!("'{part}' is not key=value"))?;
            let v: u64 = v
                .trim()
                .parse()
                .map_err(|_| format!("{k} = '{v}' is not a whole number"))?;
            match k.trim() {
                "n" => spec.n = v as usize,
                "p" => spec.p = v as usize,
                "s" => spec.s = v as usize,
                "passes" => spec.passes = v as usize,
                "seed" => spec.seed = v,
                other => return Err(format!("unknown key '{other}': use n, p, s, passes, seed")),
            }
        }
        if spec.n < 2 || spec.s == 0 || spec.p < spec.s || spec.passes == 0 {
            return Err(format!(
                "need n >= 2, 1 <= s <= p and passes >= 1; got {text}"
            ));
        }
        Ok(spec)
    }
}

impl FeatureDemoSpec {
    /// The true features, increasing.
    pub fn support(&self) -> Vec<usize> {
        let step = self.p / self.s;
        (1..=self.s).map(|k| k * step - 1).collect()
    }
    fn weight(k: usize) -> f64 {
        let size = 1.0 + (k % 5) as f64 / 4.0;
        if k.is_multiple_of(2) { size } else { -size }
    }
    /// Column j's n values.
    pub fn column(&self, j: usize) -> Vec<f64> {
        let mut rng =
            StdRng::seed_from_u64(self.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ j as u64);
        (0..self.n)
            .map(|_| StandardNormal.sample(&mut rng))
            .collect()
    }
    pub fn labels(&self) -> Vec<f64> {
        let mut rng = StdRng::seed_from_u64(self.seed ^ 0x5EED_1AB3_1500_0000);
        let mut y: Vec<f64> = (0..self.n)
            .map(|_| 0.1 * Distribution::<f64>::sample(&StandardNormal, &mut rng))
            .collect();
        for (k, j) in self.support().into_iter().enumerate() {
            let w = Self::weight(k);
            for (yi, xi) in y.iter_mut().zip(self.column(j)) {
                *yi += w * xi;
            }
        }
        y
    }
}

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
        let producer: BaseProducer = ingest::client_config(&config.kafka, brokers)
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
        threads.push(thread);
        Ok(DemoProducer { stop, threads })
    }
}

/// Sends the labels, then `spec.passes` passes over the columns, at the configured rate.
fn feature_demo(
    config: &Config,
    brokers: &str,
    spec: FeatureDemoSpec,
    stop: Arc<AtomicBool>,
) -> anyhow::Result<JoinHandle<()>> {
    let stream = config
        .feature_stream(&config.demo.feature_stream)
        .ok_or_else(|| anyhow::anyhow!("demo feature stream is not declared"))?;
    let topic = stream.topic();
    let producer: BaseProducer = ingest::client_config(&config.kafka, brokers)
        .set("linger.ms", "5")
        .create()
        .map_err(|e| anyhow::anyhow!("cannot create the demo feature producer: {e}"))?;
    let rate = config.demo.features_per_second as f64;
    tracing::info!(topic = %topic, features_per_second = rate, design = %config.demo.feature_design, "demo feature producer started");
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
