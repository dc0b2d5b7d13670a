//! HTTP to the service under test: the client and the two calls every test makes, each
//! answering the status and the JSON body (Null for a body that is not JSON); and the
//! stub servers the service talks to (a schema registry), served from a thread of their own.

use serde_json::Value;
use std::time::Duration;

pub fn client() -> reqwest::blocking::Client {
    reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap()
}

/// `GET base+path`: the status and the JSON body; None when the request fails (the service
/// is not listening yet, or any more).
pub fn try_get(base: &str, path: &str) -> Option<(u16, Value)> {
    let r = client().get(format!("{base}{path}")).send().ok()?;
    let status = r.status().as_u16();
    Some(super::checked_answer(
        &format!("GET {path}"),
        status,
        r.json().unwrap_or(Value::Null),
    ))
}

/// `try_get`, with status 0 when the request fails, for polling across restarts.
pub fn get(base: &str, path: &str) -> (u16, Value) {
    try_get(base, path).unwrap_or((0, Value::Null))
}

/// `POST base+path` with a JSON body: the status and the JSON body.
pub fn post(base: &str, path: &str, body: &Value) -> (u16, Value) {
    let r = client()
        .post(format!("{base}{path}"))
        .json(body)
        .send()
        .expect("POST");
    let status = r.status().as_u16();
    super::checked_answer(
        &format!("POST {path}"),
        status,
        r.json().unwrap_or(Value::Null),
    )
}

/// Serves `app` on 127.0.0.1 (any port) from a thread of its own, as long as the test runs;
/// returns its base URL (`http://127.0.0.1:PORT`).
pub fn serve_stub(app: axum::Router) -> String {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(listener.local_addr().unwrap()).unwrap();
            axum::serve(listener, app).await.unwrap();
        });
    });
    let addr = rx.recv_timeout(Duration::from_secs(10)).unwrap();
    format!("http://{addr}")
}
