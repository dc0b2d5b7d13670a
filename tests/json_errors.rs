//! Issue 30 item 4: every error the HTTP API answers is the JSON error body
//! (`{"error": {"code", "message"}}`), also those axum's extractors answer before a handler
//! runs: a path segment that is not UTF-8 once percent-decoded is `invalid_path`. Raw HTTP over
//! TCP against the real server, so that no client library re-encodes the path.

use crate::common::*;
use ravel::broker::EmbeddedBroker;
use ravel::config::FeatureSchema;
use ravel_core::Task;
use serde_json::Value;
use std::io::{Read, Write};
use std::net::TcpStream;

/// Sends `METHOD path` and returns (status, content type, body).
fn raw(svc: &TestService, method: &str, path: &str) -> (u16, String, String) {
    let mut c = TcpStream::connect(svc.addr).unwrap();
    write!(
        c,
        "{method} {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut reply = String::new();
    c.read_to_string(&mut reply).unwrap();
    let (head, body) = reply.split_once("\r\n\r\n").unwrap_or((&reply, ""));
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let content_type = head
        .lines()
        .find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case("content-type")
                .then(|| v.trim().to_string())
        })
        .unwrap_or_default();
    (status, content_type, body.to_string())
}

#[test]
fn a_path_that_is_not_utf8_gets_the_json_error_body() {
    let broker = EmbeddedBroker::start(1).unwrap();
    let cfg = config(
        vec![stream(
            "s",
            "t.paths",
            FeatureSchema::Count(2),
            Task::Regression,
        )],
        None,
    );
    let svc = TestService::start(cfg, broker.bootstrap_servers());
    for (method, path) in [
        ("GET", "/v1/feature-streams/%C3%28"),
        ("GET", "/v1/streams/%C3%28"),
        ("GET", "/v1/streams/%FF/path"),
        ("POST", "/v1/streams/%C3%28/model"),
        ("GET", "/no/such/%C3%28"),
    ] {
        let (status, content_type, body) = raw(&svc, method, path);
        assert_eq!(status, 400, "{method} {path}: {body}");
        assert!(
            content_type.starts_with("application/json"),
            "{method} {path}: {content_type}"
        );
        let v: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{body}: {e}"));
        assert_eq!(v["error"]["code"], "invalid_path", "{method} {path}: {v}");
        assert!(
            v["error"]["message"]
                .as_str()
                .is_some_and(|m| m.contains("UTF-8")),
            "{v}"
        );
    }
    // A UTF-8 name percent-encoded is a name like any other.
    let (status, content_type, body) = raw(&svc, "GET", "/v1/streams/%C3%A9t%C3%A9");
    assert_eq!(status, 404, "{body}");
    assert!(content_type.starts_with("application/json"));
    let v: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(v["error"]["code"], "unknown_stream", "{v}");
    // Plain-text answers of the extractors become JSON too: a model request without a body.
    let (status, content_type, body) = raw(&svc, "POST", "/v1/streams/s/model");
    assert!((400..500).contains(&status), "{status} {body}");
    assert!(
        content_type.starts_with("application/json"),
        "{content_type}: {body}"
    );
    let v: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{body}: {e}"));
    assert!(v["error"]["code"].is_string(), "{v}");
    assert_eq!(svc.get("/healthz").0, 200);
}
