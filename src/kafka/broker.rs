//! The embedded broker: librdkafka's mock cluster, a Kafka-protocol broker in process that
//! speaks the real protocol over TCP (produce, fetch, consumer groups, commits).
//!
//! `ravel serve` starts one when no brokers are configured, so `cargo run --release` needs no
//! Kafka; `ravel broker` runs one on its own, printing its bootstrap address as the first line
//! of stdout, so tests and users can restart `ravel serve` against a broker that outlives it.
//! The mock binds ephemeral ports only; `ravel broker --port N` puts a relay on the fixed
//! address 127.0.0.1:N in front of it (`Relay`), so a config's `kafka.brokers` stays the same
//! across broker restarts. Clients bootstrap through the relay and then connect to the
//! brokers the metadata advertises (their ephemeral ports, on the same host), as with any
//! Kafka cluster.
//!
//! The `MockCluster` handle is not `Send` (it holds a raw pointer), so one dedicated thread owns
//! it for its whole life and takes topic-creation requests over a channel. Its AdminClient
//! support is partial (no CreateTopics): topics are created through the mock API instead.
//! The mock keeps at most 5 MB (or 100 000 message sets) per partition and drops the oldest
//! beyond that, like a broker with a small retention.

use anyhow::{Context, anyhow};
use rdkafka::mocking::MockCluster;
use std::sync::mpsc;
use std::thread::JoinHandle;

enum Request {
    CreateTopic {
        name: String,
        partitions: i32,
        reply: mpsc::Sender<Result<(), String>>,
    },
    TopicError {
        name: String,
        error: rdkafka::types::RDKafkaRespErr,
        reply: mpsc::Sender<Result<(), String>>,
    },
}

pub struct EmbeddedBroker {
    bootstrap: String,
    requests: Option<mpsc::Sender<Request>>,
    thread: Option<JoinHandle<()>>,
}

impl EmbeddedBroker {
    /// Starts a mock cluster with `brokers` brokers on ephemeral localhost ports.
    pub fn start(brokers: i32) -> anyhow::Result<EmbeddedBroker> {
        let (req_tx, req_rx) = mpsc::channel::<Request>();
        let (ready_tx, ready_rx) = mpsc::channel::<Result<String, String>>();
        let thread = std::thread::Builder::new()
            .name("ravel-broker".into())
            .spawn(move || {
                let cluster = match MockCluster::new(brokers) {
                    Ok(c) => c,
                    Err(e) => {
                        let _ = ready_tx.send(Err(e.to_string()));
                        return;
                    }
                };
                let _ = ready_tx.send(Ok(cluster.bootstrap_servers()));
                // Serve requests until every sender is gone (the EmbeddedBroker was dropped).
                for req in req_rx {
                    match req {
                        Request::CreateTopic {
                            name,
                            partitions,
                            reply,
                        } => {
                            let r = cluster
                                .create_topic(&name, partitions, 1)
                                .map_err(|e| e.to_string());
                            let _ = reply.send(r);
                        }
                        Request::TopicError { name, error, reply } => {
                            let r = cluster.topic_error(&name, error).map_err(|e| e.to_string());
                            let _ = reply.send(r);
                        }
                    }
                }
                drop(cluster);
            })
            .context("cannot start the embedded broker thread")?;
        let bootstrap = ready_rx
            .recv()
            .map_err(|_| anyhow!("the embedded broker thread died while starting"))?
            .map_err(|e| anyhow!("cannot start the embedded Kafka broker: {e}"))?;
        tracing::info!(bootstrap = %bootstrap, "embedded Kafka broker (librdkafka mock cluster) started");
        Ok(EmbeddedBroker {
            bootstrap,
            requests: Some(req_tx),
            thread: Some(thread),
        })
    }

    /// The `bootstrap.servers` string of the cluster.
    pub fn bootstrap_servers(&self) -> &str {
        &self.bootstrap
    }

    /// Creates a topic (replication 1). A topic that already exists is left as it is.
    pub fn create_topic(&self, name: &str, partitions: i32) -> anyhow::Result<()> {
        let answer = self.ask(|reply| Request::CreateTopic {
            name: name.to_string(),
            partitions,
            reply,
        })?;
        match answer {
            Ok(()) => Ok(()),
            Err(e) if e.contains("already exists") || e.contains("TopicAlreadyExists") => Ok(()),
            Err(e) => Err(anyhow!(
                "cannot create topic '{name}' on the embedded broker: {e}"
            )),
        }
    }
}

impl EmbeddedBroker {
    /// Makes the broker answer `error` for `name` in metadata responses (e.g.
    /// `RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED`: what an ACL that denies describe gives).
    pub fn topic_error(
        &self,
        name: &str,
        error: rdkafka::types::RDKafkaRespErr,
    ) -> anyhow::Result<()> {
        self.ask(|reply| Request::TopicError {
            name: name.to_string(),
            error,
            reply,
        })?
        .map_err(|e| anyhow!("cannot set an error on topic '{name}': {e}"))
    }

    /// Sends the owner thread the request `make` builds around its reply channel and waits
    /// for the broker's answer (an error only when the broker has stopped).
    fn ask(
        &self,
        make: impl FnOnce(mpsc::Sender<Result<(), String>>) -> Request,
    ) -> anyhow::Result<Result<(), String>> {
        let (reply, rx) = mpsc::channel();
        self.requests
            .as_ref()
            .expect("broker running")
            .send(make(reply))
            .map_err(|_| anyhow!("embedded broker stopped"))?;
        rx.recv().map_err(|_| anyhow!("embedded broker stopped"))
    }
}

impl Drop for EmbeddedBroker {
    fn drop(&mut self) {
        // Closing the channel ends the owner thread, which destroys the cluster.
        self.requests.take();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// `ravel broker` flags.
#[derive(Debug, Clone, clap::Args)]
pub struct BrokerArgs {
    /// Topic to create, as NAME or NAME:PARTITIONS (default 4 partitions); repeatable. Producers
    /// also create missing topics (4 partitions) on first use.
    #[arg(long = "topic", value_name = "NAME[:PARTITIONS]")]
    pub topics: Vec<String>,
    /// Number of brokers in the cluster.
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub broker_count: i32,
    /// Listen for clients on 127.0.0.1:PORT, the same address at every start (so the
    /// config's kafka.brokers need not change); without it, a free port is picked each time.
    #[arg(long, value_name = "PORT")]
    pub port: Option<u16>,
}

/// A fixed address relaying every connection, byte for byte, to the mock cluster's first
/// broker; stops accepting when dropped (connections already relayed end with their peers).
pub struct Relay {
    addr: std::net::SocketAddr,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Relay {
    /// Listens on 127.0.0.1:`port` and relays to `target` (`host:port`).
    pub fn start(port: u16, target: &str) -> anyhow::Result<Relay> {
        use std::net::{TcpListener, TcpStream, ToSocketAddrs};
        use std::sync::atomic::Ordering;
        let target = target
            .to_socket_addrs()
            .ok()
            .and_then(|mut a| a.next())
            .ok_or_else(|| anyhow!("the embedded broker's address '{target}' does not resolve"))?;
        let listener = TcpListener::bind(("127.0.0.1", port)).map_err(|e| {
            anyhow!(
                "cannot listen on 127.0.0.1:{port} (--port {port}): {e}; another process (another \
                 ravel broker?) may hold it: stop it, or choose another --port"
            )
        })?;
        let addr = listener.local_addr()?;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::Builder::new()
            .name("ravel-broker-relay".into())
            .spawn(move || {
                for client in listener.incoming() {
                    if stopped.load(Ordering::SeqCst) {
                        break;
                    }
                    let Ok(client) = client else { continue };
                    let Ok(broker) = TcpStream::connect(target) else {
                        continue;
                    };
                    let _ = client.set_nodelay(true);
                    let _ = broker.set_nodelay(true);
                    for (from, to) in [(&client, &broker), (&broker, &client)] {
                        let (Ok(mut from), Ok(mut to)) = (from.try_clone(), to.try_clone()) else {
                            continue;
                        };
                        let _ = std::thread::Builder::new()
                            .name("ravel-broker-relay-conn".into())
                            .spawn(move || {
                                let _ = std::io::copy(&mut from, &mut to);
                                let _ = to.shutdown(std::net::Shutdown::Write);
                            });
                    }
                }
            })
            .context("cannot start the relay thread")?;
        Ok(Relay {
            addr,
            stop,
            thread: Some(thread),
        })
    }

    /// The address clients use: 127.0.0.1:PORT.
    pub fn addr(&self) -> std::net::SocketAddr {
        self.addr
    }
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        // Wakes the accept loop so that it sees the flag.
        let _ = std::net::TcpStream::connect(self.addr);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Parses `NAME` or `NAME:PARTITIONS`.
fn parse_topic(spec: &str) -> anyhow::Result<(String, i32)> {
    let (name, parts) = match spec.rsplit_once(':') {
        Some((n, p)) => (
            n,
            p.parse::<i32>()
                .map_err(|_| anyhow!("--topic {spec}: '{p}' is not a partition count"))?,
        ),
        None => (spec, 4),
    };
    if name.is_empty() || !(1..=1000).contains(&parts) {
        return Err(anyhow!(
            "--topic {spec}: need a name and 1..=1000 partitions"
        ));
    }
    Ok((name.to_string(), parts))
}

/// Runs `ravel broker` until SIGINT or SIGTERM: prints the bootstrap address first.
pub fn run(args: &BrokerArgs) -> anyhow::Result<()> {
    let topics = args
        .topics
        .iter()
        .map(|t| parse_topic(t))
        .collect::<anyhow::Result<Vec<_>>>()?;
    if args.broker_count < 1 {
        return Err(anyhow!("--broker-count must be at least 1"));
    }
    let broker = EmbeddedBroker::start(args.broker_count)?;
    for (name, parts) in &topics {
        broker.create_topic(name, *parts)?;
    }
    let relay = match args.port {
        Some(port) => {
            let first = broker.bootstrap_servers().split(',').next().unwrap_or("");
            Some(Relay::start(port, first)?)
        }
        None => None,
    };
    let address = relay.as_ref().map_or_else(
        || broker.bootstrap_servers().to_string(),
        |r| r.addr().to_string(),
    );
    tracing::info!(
        brokers = %address,
        "Kafka broker ready at {address}: run `ravel serve --brokers {address}` (or set kafka.brokers = \"{address}\"); its topics live as long as this process"
    );
    {
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        writeln!(out, "{address}")?;
        out.flush()?;
    }
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(crate::shutdown::signal());
    tracing::info!("stopping the embedded broker");
    drop(relay);
    drop(broker);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn topic_specs() {
        assert_eq!(parse_topic("a").unwrap(), ("a".into(), 4));
        assert_eq!(parse_topic("a.b:2").unwrap(), ("a.b".into(), 2));
        assert!(parse_topic("a:x").is_err());
        assert!(parse_topic("a:0").is_err());
        assert!(parse_topic(":3").is_err());
    }
}
