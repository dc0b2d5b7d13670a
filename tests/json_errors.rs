//! Issue 30 item 4: every error the HTTP API answers is the JSON error body
//! (`{"error": {"code", "message"}}`), also those axum's extractors answer before a handler
//! runs: a path segment that is not UTF-8 once percent-decoded is `invalid_path`. Raw HTTP over
//! TCP against the real server, so that no client library re-encodes the path.

use crate::common::*;
use ravel::broker::EmbeddedBroker;
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
    let cfg = one_regression("s", "t.paths", 2, None);
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

/// Issue 59 item 8: the mistakes a new team made, each answered in its own words: a
/// misspelled criterion is named with "did you mean" (not `missing "method"`), `"k": "3"` says
/// k is a whole number (not `expected usize`), a window that holds none of the stream's rows
/// says so with its bounds in RFC 3339 (not "the stream has no observations yet"), a
/// misspelled stream gets the stream that exists, and the selection names the chosen k. Every
/// answer here (and every error any test reads through the common helpers) is checked for
/// Rust's type names (`crate::common::checked_answer`).
#[test]
fn the_first_days_mistakes_are_answered_in_the_users_words() {
    let broker = EmbeddedBroker::start(1).unwrap();
    broker.create_topic("t.words", 1).unwrap();
    broker.create_topic("t.words.dlq", 1).unwrap();
    let mut sc = regression("sales", "t.words", 3);
    sc.windows = Some(toml::from_str("bucket = \"1m\"\nkeep = \"7d\"").unwrap());
    let svc = TestService::start(config(vec![sc], None), broker.bootstrap_servers());
    let (x, y) = synthetic(3, 2, 200, 59);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64;
    let messages: Vec<(Vec<u8>, i64)> = (0..200)
        .map(|i| {
            let row = serde_json::json!({"x": &x[i * 3..i * 3 + 3], "y": y[i]});
            (row.to_string().into_bytes(), now)
        })
        .collect();
    send_stamped(broker.bootstrap_servers(), "t.words", &messages);
    svc.wait_rows("sales", 200);
    let message = |v: &Value| v["error"]["message"].as_str().unwrap_or("").to_string();

    let (status, v) = svc.post(
        "/v1/streams/sales/model",
        &serde_json::json!({"select": "ebci"}),
    );
    let m = message(&v);
    assert_eq!(status, 400, "{v}");
    assert!(
        m.contains("\"ebci\"") && m.contains("did you mean \"ebic\"") && !m.contains("method"),
        "{m}"
    );

    let (status, v) = svc.post(
        "/v1/streams/sales/model",
        &serde_json::json!({"method": "lasso", "k": "3"}),
    );
    let m = message(&v);
    assert_eq!(status, 400, "{v}");
    assert!(m.contains("\"k\" must be a whole number"), "{m}");

    // A day within the kept week but before the rows: none of the 200, which the answer
    // says, with both clocks.
    let day = 86_400_000i64;
    let (from, to) = (now / day * day - 5 * day, now / day * day - 4 * day);
    let (status, v) = svc.post(
        "/v1/streams/sales/model",
        &serde_json::json!({"method": "ols", "window": {"from": from, "to": to}}),
    );
    let m = message(&v);
    assert_eq!(
        (status, v["error"]["code"].as_str()),
        (409, Some("no_data")),
        "{v}"
    );
    assert!(
        m.contains("holds no rows")
            && m.contains(&format!("T00:00:00Z ({from})"))
            && m.contains("200 rows")
            && !m.contains("no observations"),
        "{m}"
    );
    // A window that holds them: its bounds in both forms.
    let (status, v) = svc.post(
        "/v1/streams/sales/model",
        &serde_json::json!({"method": "ols", "window": {"last": "1h"}}),
    );
    assert_eq!(status, 200, "{v}");
    let w = &v["window"];
    assert_eq!(w["n"], 200, "{w}");
    for key in ["from", "to", "asked_from", "asked_to"] {
        let ms = w[key].as_i64().unwrap();
        let text = w[format!("{key}_time")].as_str().unwrap();
        assert_eq!(
            ravel::config::rfc3339_ms(text),
            Some(ms),
            "{key}: {text} is not {ms}"
        );
    }

    let (status, v) = svc.get("/v1/streams/sale");
    assert_eq!(status, 404, "{v}");
    assert!(message(&v).contains("did you mean \"sales\""), "{v}");

    // The selection names the chosen k beside the index into its curve.
    let (status, v) = svc.post(
        "/v1/streams/sales/model",
        &serde_json::json!({"method": "lasso", "select": "bic"}),
    );
    assert_eq!(status, 200, "{v}");
    let sel = &v["selection"];
    let chosen = sel["chosen"].as_u64().unwrap() as usize;
    assert_eq!(sel["chosen_k"], sel["curve"][chosen]["k"], "{sel}");
    assert_eq!(sel["chosen_k"], v["k"], "{v}");
}
