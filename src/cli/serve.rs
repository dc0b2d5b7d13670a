//! `ravel serve`, the command around `server::run`: it loads the configuration, starts the
//! embedded broker and the demo producer when no Kafka is configured, prints the listen
//! address as the first line of stdout and the Kafka address as the second (the embedded
//! broker's is where producers send the user's own rows), and turns SIGTERM/SIGINT into a
//! shutdown.

use crate::config::{Config, ServeArgs};
use crate::kafka::broker::EmbeddedBroker;
use crate::server::{init_logging, run};
use crate::shutdown;
use anyhow::Context;
use tokio::net::TcpListener;

/// Freed memory glibc's malloc keeps for reuse instead of returning it to the kernel, and the
/// size from which a block is mapped on its own (`keep_freed_memory`).
const MALLOC_KEEP_BYTES: i32 = 32 << 20;

/// Sets glibc's malloc thresholds (`M_TRIM_THRESHOLD`, `M_MMAP_THRESHOLD`) to
/// `MALLOC_KEEP_BYTES`, unless `GLIBC_TUNABLES` sets malloc's own. With the defaults, the
/// fetch buffers librdkafka allocates and the ingest thread frees in bursts (several MB at once)
/// were returned to the kernel and faulted back in, page by page, on the next fetches: 5-10%
/// of the service's CPU on binary mini-batches (docs/benchmarks.md, "Binary mini-batches").
/// The cost: up to 32 MiB freed per malloc arena stays with the process. Elsewhere: nothing.
/// The one libc call of the service.
#[allow(unsafe_code)]
fn keep_freed_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        if std::env::var("GLIBC_TUNABLES").is_ok_and(|t| t.contains("glibc.malloc.")) {
            return;
        }
        // SAFETY: `mallopt` only sets the allocator's parameters (it takes its own lock); the
        // values are positive byte counts it accepts.
        let set = unsafe {
            libc::mallopt(libc::M_TRIM_THRESHOLD, MALLOC_KEEP_BYTES) == 1
                && libc::mallopt(libc::M_MMAP_THRESHOLD, MALLOC_KEEP_BYTES) == 1
        };
        if !set {
            tracing::warn!(
                "cannot set glibc's malloc thresholds: freed memory goes back to the kernel at once (more page faults)"
            );
        }
    }
}

/// `ravel serve`.
pub fn serve(args: &ServeArgs) -> anyhow::Result<()> {
    let mut config = Config::load(args)?;
    init_logging(&config.log);
    keep_freed_memory();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let (trigger, shutdown) = shutdown::channel();
        let embedded = if config.kafka.embedded() {
            let b = EmbeddedBroker::start(1)?;
            for s in &config.streams {
                b.create_topic(&s.topic(), config.kafka.embedded_partitions)?;
                b.create_topic(&crate::config::dlq_of(&s.topic()), 1)?;
            }
            // One partition: labels before features, passes in order.
            for f in &config.feature_streams {
                b.create_topic(&f.topic(), 1)?;
                b.create_topic(&crate::config::dlq_of(&f.topic()), 1)?;
            }
            if config.state.dir().is_some() {
                tracing::info!("embedded broker: its topics live only as long as this process, so checkpoints are off");
                config.state.dir.clear();
            }
            if let Some(topic) = config.state.kafka_topic(&config.kafka.group_id) {
                b.create_topic(&topic, config.kafka.embedded_partitions)?;
            }
            Some(b)
        } else {
            None
        };
        let brokers = match &embedded {
            Some(b) => b.bootstrap_servers().to_string(),
            None => config.kafka.brokers.clone(),
        };
        let listener = TcpListener::bind(&config.http.addr)
            .await
            .with_context(|| format!("cannot listen on {} (http.addr / --http-addr)", config.http.addr))?;
        let addr = listener.local_addr()?;
        let kafka = if embedded.is_some() {
            format!("kafka at {brokers} (the embedded broker, in this process: its topics end with it; `ravel broker --port N` keeps one running apart)")
        } else {
            format!("kafka at {brokers}")
        };
        {
            use std::io::Write;
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "listening on http://{addr}");
            let _ = writeln!(out, "{kafka}");
            let _ = out.flush();
        }
        tracing::info!(
            addr = %addr, brokers = %brokers, embedded = embedded.is_some(), streams = config.streams.len(),
            feature_streams = config.feature_streams.len(), "ravel serving on http://{addr}, {kafka}"
        );
        let demo = if config.demo_active() {
            Some(super::demo::DemoProducer::start(&config, &brokers)?)
        } else {
            None
        };
        tokio::spawn(async move {
            shutdown::signal().await;
            trigger.trigger();
        });
        let r = run(config, brokers, listener, shutdown).await;
        drop(demo);
        // The broker goes last: the consumer has left its group by now.
        drop(embedded);
        r
    })
}
