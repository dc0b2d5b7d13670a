//! Service benchmarks (a bench binary that prints tables; `cargo bench --bench ingest`):
//!
//! 1. Message decoding at p = 100: JSON (row and 100-row mini-batch, compact and spaced as
//!    Python's json.dumps writes it) against the binary format (the binary one must decode at
//!    least 5x faster).
//! 2. Rows/s through Kafka at p = 100, JSON and binary: the real service (`server::run`,
//!    consumer + decode + fold + snapshot) next to a bare rdkafka consumer that only reads the
//!    same topic, and the same bare consumer doing the service's decode and fold by hand, on
//!    the embedded broker. Rows are produced first; the clock runs from the first row applied
//!    (first message read) to the last.
//! 3. Latency of POST /v1/streams/{name}/model for Lasso at k = 10, p = 1000 (n = 3000):
//!    p50 / p95 / max over 50 sequential requests, client side, over HTTP.
//!
//! 4. Features/s through Kafka for a feature stream at n = 1000, s = 50 (OS, and Asy-OS with 2
//!    workers): JSON columns produced while the service consumes (the one-partition topic can
//!    hold only 5 MB in the mock broker, so the producer keeps at most 200 columns, 4 MB,
//!    ahead of the service); the clock runs from the first feature applied to the last. The
//!    mock broker answers a fetch only after `fetch.wait.max.ms` (500 ms by default) when it
//!    had nothing new at the time of the request, which caps such a bounded producer at 200
//!    columns per 500 ms; a real broker answers as soon as data arrives, so the service
//!    consumer here sets `fetch.wait.max.ms = 10`.
//!
//! 5. The cost of live prequential quality (`quality`, issue 33) at p = 100, binary rows:
//!    rows/s of the real service with `quality` off and on (the defaults: lasso k = 10
//!    re-extracted every 1000 rows, a window of 10000), three runs each, alternating, medians
//!    (`RAVEL_BENCH_ROWS`, default 300000 here). Target: under 10% cost. The fold alone is
//!    ravel-core's `cargo bench -p ravel-lm --bench prequential`.
//!    `cargo bench --bench ingest -- quality` runs part 5 alone.
//!
//! `RAVEL_BENCH_ROWS` sets the binary rows of part 2 (default 500000; JSON gets 30% of that);
//! the mock broker keeps 5 MB per partition, so the topics have 128 partitions.
//! `cargo bench --bench ingest -- features` runs part 4 alone, `-- decode` part 1.

use ravel::broker::EmbeddedBroker;
use ravel::config::{Config, FeatureStreamConfig, StreamConfig};
use ravel::shutdown::{self, ShutdownTrigger};
use ravel::wire::{self as format, Schema};
use ravel_core::Task;
use ravel_core::stats::{AlphaSchedule, RunningStats};
use ravel_core::synthetic::SyntheticSpec;
use rdkafka::config::ClientConfig;
use rdkafka::consumer::{BaseConsumer, Consumer};
use rdkafka::message::Message;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use serde_json::{Value, json};
use std::net::SocketAddr;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn rows(p: usize, n: usize, seed: u64) -> (Vec<f64>, Vec<f64>) {
    let spec: SyntheticSpec = format!("p={p},k={},n={n},seed={seed}", p / 10)
        .parse()
        .unwrap();
    let (mut x, mut y) = (Vec::new(), Vec::new());
    spec.rows().fill(n, &mut x, &mut y);
    (x, y)
}

fn row(name: &str, value: f64, unit: &str) {
    println!("{name:<66} {value:>12.0} {unit:>7}");
}

/// Messages of `batch` rows in the given format.
fn encode(x: &[f64], y: &[f64], p: usize, batch: usize, binary: bool) -> Vec<Vec<u8>> {
    (0..y.len())
        .step_by(batch)
        .map(|a| {
            let b = (a + batch).min(y.len());
            let mut buf = vec![];
            if binary {
                format::encode_binary(&x[a * p..b * p], &y[a..b], p, &mut buf);
            } else {
                format::encode_json(&x[a * p..b * p], &y[a..b], p, &mut buf);
            }
            buf
        })
        .collect()
}

fn decode_bench() {
    let p = 100;
    let (x, y) = rows(p, 2000, 1);
    let schema = Schema::positional(p, false);
    let mut rates = vec![];
    for (label, batch, binary, python) in [
        ("JSON row {\"x\",\"y\"}", 1, false, false),
        ("JSON mini-batch of 100 rows", 100, false, false),
        (
            "JSON mini-batch of 100 rows, as json.dumps spaces it",
            100,
            false,
            true,
        ),
        ("binary RVB1, 100 rows", 100, true, false),
    ] {
        let mut msgs = encode(&x, &y, p, batch, binary);
        if python {
            // As Python's json.dumps writes them: ", " and ": " between tokens.
            for m in &mut msgs {
                let text = String::from_utf8(std::mem::take(m)).unwrap();
                *m = text.replace(',', ", ").replace(':', ": ").into_bytes();
            }
        }
        let (mut xs, mut ys) = (Vec::with_capacity(x.len()), Vec::with_capacity(y.len()));
        let reps = if binary { 200 } else { 5 };
        let mut times = vec![];
        for _ in 0..5 {
            let t = Instant::now();
            for _ in 0..reps {
                xs.clear();
                ys.clear();
                for m in &msgs {
                    format::decode(m, &schema, &mut xs, &mut ys).unwrap();
                }
            }
            times.push(t.elapsed().as_secs_f64() / reps as f64);
        }
        assert_eq!(ys.len(), y.len());
        let rate = y.len() as f64 / median(times);
        rates.push(rate);
        row(&format!("decode p=100, {label}"), rate, "rows/s");
    }
    // By name (issue 31): the same mini-batches with their column names once, in reversed
    // order (the fast path, each row put back in the stream's order), and each row as a
    // nested event with an id the stream does not use (serde_json into a tree, fields looked
    // up by path).
    let names: Vec<String> = (0..p).map(|j| format!("f{j}")).collect();
    let fields = ravel_core::fields::Fields::numeric(&names).unwrap();
    let named = Schema {
        p,
        fields: Some(&fields),
        ..Schema::positional(p, false)
    };
    let reversed: Vec<String> = names.iter().rev().cloned().collect();
    let named_msgs: Vec<Vec<u8>> = (0..y.len())
        .step_by(100)
        .map(|a| {
            let rows: Vec<f64> = (a..a + 100)
                .flat_map(|i| (0..p).rev().map(move |j| (i, j)))
                .map(|(i, j)| x[i * p + j])
                .collect();
            let mut buf = vec![];
            format::encode_json_named_batch(&reversed, &rows, &y[a..a + 100], &mut buf);
            buf
        })
        .collect();
    let nested: Vec<String> = (0..p)
        .map(|j| format!("{}.f{j}", if j < p / 2 { "a" } else { "b" }))
        .collect();
    let nested_fields = ravel_core::fields::Fields::numeric(&nested).unwrap();
    let events = Schema {
        p,
        fields: Some(&nested_fields),
        target: Some("price"),
        ..Schema::positional(p, false)
    };
    // The same events through the stream's compiled paths (one pass, no tree: issue 48).
    let paths = format::Paths::new(&nested_fields, "price");
    let events_one_pass = Schema {
        plan: Some(&paths),
        ..events
    };
    let event_msgs: Vec<Vec<u8>> = (0..y.len())
        .map(|i| {
            let half = |r: std::ops::Range<usize>| -> serde_json::Map<String, serde_json::Value> {
                r.map(|j| (format!("f{j}"), serde_json::json!(x[i * p + j])))
                    .collect()
            };
            serde_json::to_vec(&serde_json::json!({
                "id": format!("e{i}"), "a": half(0..p / 2), "b": half(p / 2..p), "price": y[i]
            }))
            .unwrap()
        })
        .collect();
    for (label, msgs, schema) in [
        (
            "JSON named mini-batch of 100 rows (columns reversed)",
            &named_msgs,
            &named,
        ),
        (
            "JSON nested event, one row (fields by dotted path, a tree)",
            &event_msgs,
            &events,
        ),
        (
            "JSON nested event, one row (the compiled paths, one pass)",
            &event_msgs,
            &events_one_pass,
        ),
    ] {
        let (mut xs, mut ys) = (Vec::with_capacity(x.len()), Vec::with_capacity(y.len()));
        let mut times = vec![];
        for _ in 0..5 {
            let t = Instant::now();
            xs.clear();
            ys.clear();
            for m in msgs {
                format::decode(m, schema, &mut xs, &mut ys).unwrap();
            }
            times.push(t.elapsed().as_secs_f64());
        }
        assert_eq!((&xs, &ys), (&x, &y), "{label}: the same rows");
        let rate = y.len() as f64 / median(times);
        row(&format!("decode p=100, {label}"), rate, "rows/s");
        println!(
            "{:<66} {:>12.2} {:>7}",
            format!("  / JSON mini-batch of 100 rows by position"),
            rate / rates[1],
            "x"
        );
    }
    // The previous decoder of the same mini-batches: serde_json (float_roundtrip) into the
    // message's shape, no validation (the fast path now takes these messages).
    #[derive(serde::Deserialize)]
    struct Batch {
        rows: Vec<Vec<f64>>,
        y: Vec<f64>,
    }
    let msgs = encode(&x, &y, p, 100, false);
    let mut times = vec![];
    for _ in 0..5 {
        let t = Instant::now();
        let mut got = 0;
        for m in &msgs {
            let b: Batch = serde_json::from_slice(m).unwrap();
            got += b.rows.len() + b.y.len() - b.y.len();
        }
        assert_eq!(got, y.len());
        times.push(t.elapsed().as_secs_f64());
    }
    row(
        "decode p=100, JSON mini-batch by serde_json alone (the old decoder)",
        y.len() as f64 / median(times),
        "rows/s",
    );
    println!(
        "{:<66} {:>12.1} {:>7}",
        "binary / JSON mini-batch decode speed",
        rates[3] / rates[1],
        "x"
    );

    // The fold alone, for scale: what ingest does with the rows after decoding.
    let mut s = RunningStats::new(p, AlphaSchedule::Plain);
    let t = Instant::now();
    for _ in 0..5 {
        for c in 0..(y.len() / 1000) {
            s.update_batch(
                &x[c * 1000 * p..(c + 1) * 1000 * p],
                &y[c * 1000..(c + 1) * 1000],
            )
            .unwrap();
        }
    }
    row(
        "fold (update_batch) p=100, batches of 1000",
        5.0 * y.len() as f64 / t.elapsed().as_secs_f64(),
        "rows/s",
    );
}

/// The real service in-process, on 127.0.0.1:0.
struct Service {
    addr: SocketAddr,
    trigger: ShutdownTrigger,
    thread: JoinHandle<anyhow::Result<()>>,
}

impl Service {
    fn start(streams: Vec<StreamConfig>, brokers: &str, group: &str) -> Service {
        Self::start_with(streams, vec![], &[], brokers, group)
    }
    fn start_with(
        streams: Vec<StreamConfig>,
        feature_streams: Vec<FeatureStreamConfig>,
        options: &[(&str, &str)],
        brokers: &str,
        group: &str,
    ) -> Service {
        let mut cfg = Config {
            streams,
            feature_streams,
            ..Config::default()
        };
        for (k, v) in options {
            cfg.kafka.options.insert(k.to_string(), v.to_string());
        }
        cfg.demo.enabled = false;
        cfg.kafka.brokers = brokers.into();
        cfg.kafka.group_id = group.into();
        cfg.state.dir.clear();
        cfg.check().unwrap();
        let (trigger, shutdown) = shutdown::channel();
        let (tx, rx) = std::sync::mpsc::channel();
        let brokers = brokers.to_string();
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Runtime::new()?;
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
                tx.send(listener.local_addr()?).unwrap();
                ravel::run(cfg, brokers, listener, shutdown).await
            })
        });
        Service {
            addr: rx.recv().unwrap(),
            trigger,
            thread,
        }
    }
    fn n(&self, client: &reqwest::blocking::Client, stream: &str) -> u64 {
        let v: Value = client
            .get(format!("http://{}/v1/streams/{stream}", self.addr))
            .send()
            .unwrap()
            .json()
            .unwrap();
        v["n"].as_u64().unwrap()
    }
    fn stop(self) {
        self.trigger.trigger();
        self.thread.join().unwrap().unwrap();
    }
}

fn stream(name: &str, topic: &str, p: usize) -> StreamConfig {
    StreamConfig {
        topic: Some(topic.into()),
        ..StreamConfig::plain(name.into(), p, Task::Regression)
    }
}

/// Produces the messages round-robin over the partitions (the mock keeps 5 MB per partition).
fn produce(brokers: &str, topic: &str, partitions: i32, msgs: &[Vec<u8>]) {
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("linger.ms", "5")
        .create()
        .unwrap();
    for (i, m) in msgs.iter().enumerate() {
        let mut rec = BaseRecord::<(), [u8]>::to(topic)
            .payload(&m[..])
            .partition(i as i32 % partitions);
        loop {
            match producer.send(rec) {
                Ok(()) => break,
                Err((_, r)) => {
                    rec = r;
                    producer.poll(Duration::from_millis(10));
                }
            }
        }
    }
    producer.flush(Duration::from_secs(120)).unwrap();
}

/// A consumer that only reads: rows/s of the broker and librdkafka alone.
/// A plain rdkafka consumer loop on the same topic: rows/s of reading alone (`work` false), or
/// of the minimal hand-written ingest loop (`work` true: decode every message and fold every
/// 1024 rows, as the service does, without its checkpoints, metrics, snapshots or HTTP).
fn bare_consumer(brokers: &str, topic: &str, messages: usize, rows: usize, work: bool) -> f64 {
    let c: BaseConsumer = ClientConfig::new()
        .set("bootstrap.servers", brokers)
        .set("group.id", format!("bare-{topic}-{work}"))
        // As in the service: short pauses when the prefetch queue is full (the fold is slower).
        .set("fetch.queue.backoff.ms", if work { "10" } else { "1000" })
        .set("auto.offset.reset", "earliest")
        .set("enable.auto.commit", "false")
        .create()
        .unwrap();
    c.subscribe(&[topic]).unwrap();
    let (mut got, mut bytes) = (0, 0usize);
    let mut start = None;
    let schema = Schema::positional(100, false);
    let mut st = RunningStats::new(100, AlphaSchedule::Plain);
    let (mut xs, mut ys) = (vec![], vec![]);
    while got < messages {
        if let Some(Ok(m)) = c.poll(Duration::from_millis(100)) {
            start.get_or_insert_with(Instant::now);
            bytes += m.payload().map_or(0, |p| p.len());
            got += 1;
            if work {
                format::decode(m.payload().unwrap(), &schema, &mut xs, &mut ys).unwrap();
                if ys.len() >= 1024 {
                    st.update_batch(&xs, &ys).unwrap();
                    xs.clear();
                    ys.clear();
                }
            }
        }
    }
    assert!(bytes > 0);
    rows as f64 / start.unwrap().elapsed().as_secs_f64()
}

fn kafka_bench(broker: &EmbeddedBroker) {
    let (p, partitions) = (100, 128);
    let n_binary: usize = std::env::var("RAVEL_BENCH_ROWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(500_000);
    let (x, y) = rows(p, n_binary, 2);
    let client = reqwest::blocking::Client::new();
    for (label, binary) in [
        ("JSON mini-batches of 100", false),
        ("binary RVB1, 100 rows", true),
    ] {
        let n = if binary { n_binary } else { n_binary * 3 / 10 };
        let (x, y) = (&x[..n * p], &y[..n]);
        let topic = format!("bench.{}", if binary { "binary" } else { "json" });
        broker.create_topic(&topic, partitions).unwrap();
        let msgs = encode(x, y, p, 100, binary);
        let mb = msgs.iter().map(|m| m.len()).sum::<usize>() as f64 / 1e6;
        produce(broker.bootstrap_servers(), &topic, partitions, &msgs);

        let bare = bare_consumer(broker.bootstrap_servers(), &topic, msgs.len(), n, false);
        let hand = bare_consumer(broker.bootstrap_servers(), &topic, msgs.len(), n, true);

        let svc = Service::start(
            vec![stream("bench", &topic, p)],
            broker.bootstrap_servers(),
            &format!("ravel-{topic}"),
        );
        let (mut first, mut n0) = (None, 0);
        loop {
            let have = svc.n(&client, "bench");
            if have > 0 && first.is_none() {
                first = Some(Instant::now());
                n0 = have;
            }
            if have == n as u64 {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        let rate = (n as u64 - n0) as f64 / first.unwrap().elapsed().as_secs_f64();
        // How much of that time went into folding (update_batch + snapshot), from /metrics.
        let metrics = client
            .get(format!("http://{}/metrics", svc.addr))
            .send()
            .unwrap()
            .text()
            .unwrap();
        let fold_s: f64 = metrics
            .lines()
            .find_map(|l| l.strip_prefix("ravel_ingest_batch_seconds_sum{stream=\"bench\"} "))
            .and_then(|v| v.parse().ok())
            .unwrap_or(f64::NAN);
        let fold_share = 100.0 * fold_s * rate / n as f64;
        svc.stop();
        row(
            &format!("Kafka p=100, {label}, {n} rows ({mb:.0} MB): ravel serve"),
            rate,
            "rows/s",
        );
        row(
            &format!("Kafka p=100, {label}, {n} rows: bare consumer, read only"),
            bare,
            "rows/s",
        );
        row(
            &format!("Kafka p=100, {label}, {n} rows: bare consumer + decode + fold"),
            hand,
            "rows/s",
        );
        println!(
            "{:<66} {:>12.0} {:>7}",
            "  ravel serve time spent folding (update_batch + snapshot)", fold_share, "%"
        );
    }
}

/// Rows/s of the service on `topic` (n rows already there) with the stream's `quality`.
fn service_rate(
    broker: &EmbeddedBroker,
    topic: &str,
    p: usize,
    n: usize,
    quality: Option<ravel::config::quality::QualityConfig>,
    group: &str,
) -> f64 {
    let client = reqwest::blocking::Client::new();
    let mut sc = stream("bench", topic, p);
    sc.quality = quality;
    let svc = Service::start(vec![sc], broker.bootstrap_servers(), group);
    let (mut first, mut n0) = (None, 0);
    loop {
        let have = svc.n(&client, "bench");
        if have > 0 && first.is_none() {
            first = Some(Instant::now());
            n0 = have;
        }
        if have == n as u64 {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let rate = (n as u64 - n0) as f64 / first.unwrap().elapsed().as_secs_f64();
    svc.stop();
    rate
}

fn quality_bench(broker: &EmbeddedBroker) {
    let p = 100;
    let n: usize = std::env::var("RAVEL_BENCH_ROWS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300_000);
    let (x, y) = rows(p, n, 5);
    // The rows once in a topic; each run reads them with its own group.
    let partitions = 128;
    let topic = "bench.quality";
    broker.create_topic(topic, partitions).unwrap();
    let msgs = encode(&x, &y, p, 100, true);
    produce(broker.bootstrap_servers(), topic, partitions, &msgs);
    let disabled: ravel::config::quality::QualityConfig =
        toml::from_str("enabled = false").unwrap();
    let (mut off, mut on) = (Vec::new(), Vec::new());
    for i in 0..3 {
        off.push(service_rate(
            broker,
            topic,
            p,
            n,
            Some(disabled.clone()),
            &format!("q-off-{i}"),
        ));
        on.push(service_rate(
            broker,
            topic,
            p,
            n,
            None,
            &format!("q-on-{i}"),
        ));
    }
    let (off, on) = (median(off), median(on));
    row(
        &format!("Kafka p=100, binary, {n} rows: ravel serve, quality off"),
        off,
        "rows/s",
    );
    row(
        &format!("Kafka p=100, binary, {n} rows: ravel serve, quality on (defaults)"),
        on,
        "rows/s",
    );
    println!(
        "{:<66} {:>12.1} {:>7}",
        "  service cost of quality",
        100.0 * (1.0 - on / off),
        "%"
    );
}

fn model_latency_bench(broker: &EmbeddedBroker) {
    let (p, n) = (1000, 3000);
    let (x, y) = rows(p, n, 3);
    broker.create_topic("bench.p1000", 8).unwrap();
    produce(
        broker.bootstrap_servers(),
        "bench.p1000",
        8,
        &encode(&x, &y, p, 50, true),
    );
    let svc = Service::start(
        vec![stream("wide", "bench.p1000", p)],
        broker.bootstrap_servers(),
        "ravel-wide",
    );
    let client = reqwest::blocking::Client::new();
    while svc.n(&client, "wide") != n as u64 {
        std::thread::sleep(Duration::from_millis(50));
    }
    let url = format!("http://{}/v1/streams/wide/model", svc.addr);
    let body = json!({"method": "lasso", "k": 10});
    let (mut times, mut server) = (vec![], vec![]);
    for i in 0..55 {
        let t = Instant::now();
        let r = client.post(&url).json(&body).send().unwrap();
        assert_eq!(r.status().as_u16(), 200);
        let m: Value = r.json().unwrap();
        let ms = t.elapsed().as_secs_f64() * 1e3;
        assert_eq!(m["k"], 10);
        if i >= 5 {
            times.push(ms);
            server.push(m["diagnostics"]["elapsed_ms"].as_f64().unwrap());
        }
    }
    svc.stop();
    times.sort_by(f64::total_cmp);
    let pct = |q: f64| times[((times.len() - 1) as f64 * q).round() as usize];
    println!(
        "{:<66} {:>12.1} {:>7}",
        "POST /model lasso k=10, p=1000, n=3000: p50",
        pct(0.5),
        "ms"
    );
    println!(
        "{:<66} {:>12.1} {:>7}",
        "POST /model lasso k=10, p=1000, n=3000: p95",
        pct(0.95),
        "ms"
    );
    println!(
        "{:<66} {:>12.1} {:>7}",
        "POST /model lasso k=10, p=1000, n=3000: max",
        pct(1.0),
        "ms"
    );
    println!(
        "{:<66} {:>12.1} {:>7}",
        "  extraction alone (diagnostics.elapsed_ms), median",
        median(server),
        "ms"
    );
}

/// Features applied so far by feature stream `name`.
fn features_seen(client: &reqwest::blocking::Client, addr: SocketAddr, name: &str) -> u64 {
    let v: Value = client
        .get(format!("http://{addr}/v1/feature-streams/{name}"))
        .send()
        .unwrap()
        .json()
        .unwrap();
    v["features_seen"].as_u64().unwrap_or(0)
}

fn feature_stream_bench(broker: &EmbeddedBroker) {
    let (n, s, p) = (1000, 50, 6000);
    let spec: SyntheticSpec = format!("p=200,k=10,n={n},seed=4").parse().unwrap();
    let (mut x, mut y) = (vec![], vec![]);
    spec.rows().fill(n, &mut x, &mut y);
    // 200 distinct columns, sent under p distinct names (each a new feature to OS).
    let columns: Vec<Vec<f64>> = (0..200)
        .map(|j| (0..n).map(|i| x[i * 200 + j]).collect())
        .collect();
    let msgs: Vec<Vec<u8>> = (0..p)
        .map(|j| {
            serde_json::to_vec(&json!({"feature": format!("f{j}"), "values": columns[j % 200]}))
                .unwrap()
        })
        .collect();
    let kb = msgs[0].len() as f64 / 1e3;
    let client = reqwest::blocking::Client::new();
    for workers in [1, 2] {
        let topic = format!("bench.features.{workers}");
        broker.create_topic(&topic, 1).unwrap();
        let fs = FeatureStreamConfig {
            name: "fbench".into(),
            topic: Some(topic.clone()),
            n,
            loss: ravel_core::features::Loss::Squared,
            s,
            workers,
            eta: None,
            wide: false,
        };
        let svc = Service::start_with(
            vec![],
            vec![fs],
            &[("fetch.wait.max.ms", "10")],
            broker.bootstrap_servers(),
            &format!("ravel-{topic}"),
        );
        let producer: BaseProducer = ClientConfig::new()
            .set("bootstrap.servers", broker.bootstrap_servers())
            .set("linger.ms", "5")
            .create()
            .unwrap();
        let send = |m: &[u8]| {
            let mut rec = BaseRecord::<(), [u8]>::to(&topic).payload(m);
            loop {
                match producer.send(rec) {
                    Ok(()) => break,
                    Err((_, r)) => {
                        rec = r;
                        producer.poll(Duration::from_millis(5));
                    }
                }
            }
        };
        send(&serde_json::to_vec(&json!({ "labels": y })).unwrap());
        let (mut first, mut seen0, mut seen) = (None, 0, 0);
        let mut sent = 0;
        while seen < p as u64 {
            while sent < p && sent as u64 <= seen + 200 {
                send(&msgs[sent]);
                sent += 1;
            }
            producer.poll(Duration::ZERO);
            let _ = producer.flush(Duration::from_millis(1));
            seen = features_seen(&client, svc.addr, "fbench");
            if seen > 0 && first.is_none() {
                first = Some(Instant::now());
                seen0 = seen;
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        let rate = (p as u64 - seen0) as f64 / first.unwrap().elapsed().as_secs_f64();
        svc.stop();
        row(
            &format!(
                "Kafka feature stream n={n}, s={s}, {} ({kb:.0} kB JSON columns)",
                if workers == 1 {
                    "OS".to_string()
                } else {
                    format!("Asy-OS {workers} workers")
                }
            ),
            rate,
            "feat/s",
        );
    }
}

fn main() {
    // Quiet librdkafka and the service unless RUST_LOG says otherwise.
    ravel::init_logging(&ravel::config::LogConfig {
        level: "warn".into(),
        ..Default::default()
    });
    println!("{:<66} {:>12} {:>7}", "benchmark", "result", "unit");
    let broker = EmbeddedBroker::start(1).unwrap();
    if std::env::args().any(|a| a == "features") {
        feature_stream_bench(&broker);
        return;
    }
    if std::env::args().any(|a| a == "quality") {
        quality_bench(&broker);
        return;
    }
    if std::env::args().any(|a| a == "decode") {
        decode_bench();
        return;
    }
    decode_bench();
    kafka_bench(&broker);
    model_latency_bench(&broker);
    feature_stream_bench(&broker);
}
