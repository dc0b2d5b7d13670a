//! The HTTP server's protections, against the real service over TCP: the bounds on what
//! clients can hold (src/api/http.rs), and the bearer token that state-changing requests need
//! when `http.token` is set (src/api/auth.rs). Bounds: clients that trickle their headers or sit idle are disconnected after
//! `http.header_read_timeout_ms`, at most `http.max_connections` are open at once, and the
//! slots they held go to waiting clients (before, such clients held a socket each for good).

use crate::common::*;
use ravel::broker::EmbeddedBroker;
use ravel::config::{FeatureStreamConfig, Secret};
use ravel_core::features::Loss;
use serde_json::json;
use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// Reads until the server closes the connection (or `limit` passes); true when it closed.
fn closed_by_server(conn: &mut TcpStream, limit: Duration) -> bool {
    conn.set_read_timeout(Some(Duration::from_millis(200)))
        .unwrap();
    let start = Instant::now();
    let mut buf = [0u8; 1024];
    while start.elapsed() < limit {
        match conn.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::ConnectionReset => return true,
            Err(_) => {} // read timeout: still open
        }
    }
    false
}

#[test]
fn trickling_and_idle_clients_are_disconnected_and_give_their_slot_back() {
    let broker = EmbeddedBroker::start(1).unwrap();
    let mut cfg = one_regression("s", "t.http", 2, None);
    cfg.http.max_connections = 4;
    cfg.http.header_read_timeout_ms = 3_000;
    cfg.check().unwrap();
    let svc = TestService::start(cfg, broker.bootstrap_servers());
    let (status, _) = svc.get("/healthz");
    assert_eq!(status, 200);

    // Fill the cap with clients that send half a request line and then nothing more.
    let mut tricklers: Vec<TcpStream> = (0..4)
        .map(|_| {
            let mut c = TcpStream::connect(svc.addr).unwrap();
            c.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n")
                .unwrap();
            c
        })
        .collect();
    // A fifth connection waits in the backlog while the cap is full: no answer for the first
    // half second (the tricklers have 3 s before their header timeout) ...
    let mut waiting = TcpStream::connect(svc.addr).unwrap();
    waiting
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .unwrap();
    waiting
        .set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let mut first = [0u8; 64];
    match waiting.read(&mut first) {
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
        other => panic!("served past max_connections = 4: {other:?}"),
    }
    // ... and each trickler is disconnected once its header timeout passes (before the fix
    // they stayed open for good).
    for (i, c) in tricklers.iter_mut().enumerate() {
        assert!(
            closed_by_server(c, Duration::from_secs(20)),
            "trickling client {i} still connected"
        );
    }
    // Their slots went to the waiting client, which got its answer.
    waiting
        .set_read_timeout(Some(Duration::from_secs(20)))
        .unwrap();
    let mut answer = String::new();
    waiting.read_to_string(&mut answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "answer: {answer:?}");

    // A kept-alive connection that goes idle after one request is closed as well.
    let mut idle = TcpStream::connect(svc.addr).unwrap();
    idle.write_all(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        .unwrap();
    assert!(
        closed_by_server(&mut idle, Duration::from_secs(20)),
        "idle kept-alive connection still open"
    );
    let (status, _) = svc.get("/healthz");
    assert_eq!(status, 200);
    // Every closed connection gives its slot back: once the server has seen the clients'
    // closes (asynchronously), only the one reading /metrics is open.
    let start = Instant::now();
    loop {
        let open = sample(&svc.metrics(), "ravel_http_open_connections");
        if open == Some(1.0) {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "open connections never fell back to 1: {open:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    svc.stop().unwrap();
}

#[test]
fn http_bounds_are_checked_at_start_naming_the_field() {
    let mut cfg = one_regression("s", "t.x", 2, None);
    cfg.http.max_connections = 0;
    let e = cfg.check().unwrap_err().to_string();
    assert!(e.contains("http.max_connections"), "{e}");
    cfg.http.max_connections = 10;
    cfg.http.header_read_timeout_ms = 0;
    let e = cfg.check().unwrap_err().to_string();
    assert!(e.contains("http.header_read_timeout_ms"), "{e}");
}

#[test]
fn with_a_token_writes_need_it_and_reads_stay_open() {
    let broker = EmbeddedBroker::start(1).unwrap();
    let token = "0123456789abcdef0123";
    let mut cfg = feature_config(vec![FeatureStreamConfig {
        name: "f".into(),
        topic: Some("t.f".into()),
        n: 4,
        loss: Loss::Squared,
        s: 2,
        workers: 1,
        eta: None,
        wide: false,
    }]);
    cfg.http.token = Secret(token.into());
    cfg.check().unwrap();
    // The token never shows in the configuration's debug form (it may be logged).
    assert!(!format!("{cfg:?}").contains(token));
    let svc = TestService::start(cfg, broker.bootstrap_servers());
    let labels = json!({"labels": [1.0, 2.0, 3.0, 4.0]});
    let put = |auth: Option<&str>| {
        let mut r = client()
            .put(svc.url("/v1/feature-streams/f/labels"))
            .json(&labels);
        if let Some(a) = auth {
            r = r.header("authorization", a);
        }
        let r = r.send().unwrap();
        let status = r.status().as_u16();
        (status, r.json::<serde_json::Value>().unwrap_or_default())
    };
    for auth in [None, Some("Bearer wrong-token-of-some-length"), Some(token)] {
        let (status, body) = put(auth);
        assert_eq!(status, 401, "{auth:?}: {body}");
        assert_eq!(body["error"]["code"], "unauthorized", "{body}");
    }
    let (status, body) = put(Some(&format!("Bearer {token}")));
    assert!(status == 200 || status == 202, "{status}: {body}");
    // Reads need no token.
    let (status, _) = svc.get("/v1/feature-streams/f");
    assert_eq!(status, 200);
    let (status, _) = svc.get("/healthz");
    assert_eq!(status, 200);
    svc.stop().unwrap();
}

#[test]
fn a_token_file_is_read_at_start_and_bad_tokens_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("token");
    std::fs::write(&file, "  fedcba9876543210fedcba\n").unwrap();
    let mut cfg = one_regression("s", "t.y", 2, None);
    cfg.http.token_file = file.display().to_string();
    cfg.complete().unwrap();
    assert_eq!(cfg.http.token.expose(), "fedcba9876543210fedcba");
    let mut short = cfg.clone();
    short.http.token = Secret("short".into());
    let e = short.check().unwrap_err().to_string();
    assert!(e.contains("http.token"), "{e}");
    let mut missing = cfg.clone();
    missing.http.token = Secret::default();
    missing.http.token_file = dir.path().join("nope").display().to_string();
    let e = format!("{:#}", missing.complete().unwrap_err());
    assert!(e.contains("http.token_file"), "{e}");
}

/// Invented HTTP methods and unknown paths land in bounded label values ("other",
/// "unmatched"), so no request can grow /metrics without bound.
#[test]
fn invented_methods_and_paths_do_not_grow_the_metrics() {
    let broker = EmbeddedBroker::start(1).unwrap();
    let cfg = one_regression("s", "t.labels", 2, None);
    let svc = TestService::start(cfg, broker.bootstrap_servers());
    assert_eq!(svc.get("/healthz").0, 200);
    let before = svc.metrics().len();
    for i in 0..300 {
        let mut c = TcpStream::connect(svc.addr).unwrap();
        write!(
            c,
            "INVENTED{i} /v1/streams/s HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
        )
        .unwrap();
        let mut reply = String::new();
        c.read_to_string(&mut reply).unwrap();
        assert!(reply.starts_with("HTTP/1.1 405"), "{reply}");
        let (status, _) = svc.get(&format!("/no/such/path/{i}"));
        assert_eq!(status, 404);
    }
    let m = svc.metrics();
    assert!(!m.contains("INVENTED"), "an invented method became a label");
    assert!(!m.contains("/no/such/path"), "a raw path became a label");
    assert!(
        sample(
            &m,
            "ravel_http_requests_total{method=\"other\",route=\"/v1/streams/{name}\",status=\"405\"}"
        ) == Some(300.0),
        "{m}"
    );
    // 600 requests with distinct methods and paths added a bounded number of lines.
    assert!(m.len() < before + 8_000, "{} -> {} bytes", before, m.len());
}
