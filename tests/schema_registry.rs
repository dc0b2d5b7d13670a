//! Schema'd topics (issue 32), end to end: records written by Confluent's own serializers
//! (Python confluent-kafka's AvroSerializer, ProtobufSerializer and JSONSerializer, run by
//! tests/python/confluent_produce.py) through the embedded broker, against a Schema Registry
//! served here: no registry server installs from the package registries, so `Registry` below
//! answers the REST calls the real client makes (register, schema by id and by GUID, subject
//! versions, basic auth, 404s), and can fail or hang on demand.
//!
//! - n and the OLS model of the real service equal numpy's least squares on the same rows to
//!   1e-9 for each format, across schema changes mid-stream (fields reordered, added, an int
//!   widened to a long and a double), nested records, and ids in the `__value_schema_id` header.
//! - Bad input: a wrong magic byte, a header cut short, an unknown id, a datum that does not
//!   match its schema, a Protobuf message-index list out of range: each dead-lettered with
//!   reason `schema`. A registry answering 500 then recovering: nothing dead-lettered, n exact.
//!   A registry that never answers: not ready, and `/readyz` names it.
//! - The three formats through Tansu 0.6.0 too (issue 36's interop suite: a broker we did not
//!   write), with the same serializers and registry.
//!
//! Python with confluent-kafka, fastavro, protobuf and numpy: `$RAVEL_TEST_PYTHON`, else
//! `target/pyenv/bin/python`, which `scripts/test` creates; without it these tests fail
//! (never skip) and say so.

use crate::common::*;
use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::routing::{get, post};
use ravel::broker::EmbeddedBroker;
use ravel::config::schemas::ValueFormat;
use ravel::config::{Config, FeatureSchema, StreamConfig};
use ravel_core::Task;
use rdkafka::ClientConfig;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use serde_json::{Value, json};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const USER: &str = "ravel";
const PASSWORD: &str = "s3cret-registry";

/// One registered schema.
#[derive(Clone)]
struct Registered {
    subject: String,
    schema_type: String,
    schema: String,
    guid: String,
    /// The schemas it imports: `[{"name", "subject", "version"}]`.
    references: Value,
}

#[derive(Default)]
struct RegistryState {
    schemas: Mutex<Vec<Registered>>,
    /// Answer 500 to this many schema lookups.
    fail_next: AtomicUsize,
    /// Never answer schema lookups.
    hang: AtomicBool,
    /// Answer every lookup by id "Schema not found" (40403), as a registry whose schemas were
    /// deleted does.
    gone: AtomicBool,
    /// Every request: method, path and query.
    log: Mutex<Vec<String>>,
}

/// The Schema Registry REST calls Confluent's client makes, with basic auth, on a free port.
struct Registry {
    url: String,
    state: Arc<RegistryState>,
}

type Shared = Arc<RegistryState>;

fn authorized(h: &HeaderMap) -> bool {
    use base64::Engine;
    let want = format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{USER}:{PASSWORD}"))
    );
    h.get("authorization")
        .is_some_and(|v| v.to_str().ok() == Some(want.as_str()))
}

fn error(status: StatusCode, code: u32, message: &str) -> (StatusCode, axum::Json<Value>) {
    (
        status,
        axum::Json(json!({"error_code": code, "message": message})),
    )
}

type Answer = (StatusCode, axum::Json<Value>);

/// Logs the request, then checks its credentials (401 without them).
fn admit(
    st: &Shared,
    method: &str,
    path: &str,
    q: &HashMap<String, String>,
    h: &HeaderMap,
) -> Result<(), Answer> {
    record(st, method, path, q);
    if authorized(h) {
        Ok(())
    } else {
        Err(error(StatusCode::UNAUTHORIZED, 401, "Unauthorized"))
    }
}

fn record(st: &Shared, method: &str, path: &str, q: &HashMap<String, String>) {
    let mut query: Vec<_> = q.iter().map(|(k, v)| format!("{k}={v}")).collect();
    query.sort();
    st.log
        .lock()
        .unwrap()
        .push(format!("{method} {path}?{}", query.join("&")));
}

async fn register(
    State(st): State<Shared>,
    Path(subject): Path<String>,
    Query(q): Query<HashMap<String, String>>,
    h: HeaderMap,
    body: Bytes,
) -> Answer {
    if let Err(refused) = admit(
        &st,
        "POST",
        &format!("/subjects/{subject}/versions"),
        &q,
        &h,
    ) {
        return refused;
    }
    let body: Value = serde_json::from_slice(&body).unwrap();
    let schema = body["schema"].as_str().unwrap().to_string();
    let schema_type = body["schemaType"].as_str().unwrap_or("AVRO").to_string();
    let references = body.get("references").cloned().unwrap_or(json!([]));
    let mut all = st.schemas.lock().unwrap();
    let id = match all
        .iter()
        .position(|r| r.schema == schema && r.schema_type == schema_type)
    {
        Some(i) => i + 1,
        None => {
            let guid = format!("00000000-0000-4000-8000-{:012x}", all.len() + 1);
            all.push(Registered {
                subject: subject.clone(),
                schema_type,
                schema,
                guid,
                references,
            });
            all.len()
        }
    };
    let r = &all[id - 1];
    (
        StatusCode::OK,
        axum::Json(json!({"id": id, "guid": r.guid, "subject": subject, "version": id})),
    )
}

/// A schema as the registry gives it; versions are numbered by id here (increasing within a
/// subject, as a real registry's are).
fn answer(r: &Registered) -> Value {
    let mut v = json!({"schema": r.schema, "guid": r.guid, "subject": r.subject});
    if r.schema_type != "AVRO" {
        v["schemaType"] = json!(r.schema_type);
    }
    if r.references.as_array().is_some_and(|a| !a.is_empty()) {
        v["references"] = r.references.clone();
    }
    v
}

async fn by(st: &Shared, found: Option<Registered>) -> Answer {
    if st.hang.load(Ordering::SeqCst) {
        tokio::time::sleep(Duration::from_secs(3600)).await;
    }
    if st
        .fail_next
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
        .is_ok()
    {
        return error(
            StatusCode::INTERNAL_SERVER_ERROR,
            50001,
            "Error in the backend data store",
        );
    }
    match found {
        Some(r) => (StatusCode::OK, axum::Json(answer(&r))),
        None => error(StatusCode::NOT_FOUND, 40403, "Schema not found"),
    }
}

async fn by_id(
    State(st): State<Shared>,
    Path(id): Path<usize>,
    Query(q): Query<HashMap<String, String>>,
    h: HeaderMap,
) -> Answer {
    if let Err(refused) = admit(&st, "GET", &format!("/schemas/ids/{id}"), &q, &h) {
        return refused;
    }
    let found = id
        .checked_sub(1)
        .and_then(|i| st.schemas.lock().unwrap().get(i).cloned())
        .filter(|_| !st.gone.load(Ordering::SeqCst));
    by(&st, found).await
}

/// `GET /subjects`: the route every registry serves, which ravel asks before trusting one.
async fn subjects(
    State(st): State<Shared>,
    Query(q): Query<HashMap<String, String>>,
    h: HeaderMap,
) -> Answer {
    if let Err(refused) = admit(&st, "GET", "/subjects", &q, &h) {
        return refused;
    }
    let mut names: Vec<String> = st
        .schemas
        .lock()
        .unwrap()
        .iter()
        .map(|r| r.subject.clone())
        .collect();
    names.sort();
    names.dedup();
    (StatusCode::OK, axum::Json(json!(names)))
}

/// A web page where a registry was expected (a proxy's or a console's).
async fn html() -> (
    StatusCode,
    [(axum::http::HeaderName, &'static str); 1],
    &'static str,
) {
    (
        StatusCode::OK,
        [(axum::http::header::CONTENT_TYPE, "text/html")],
        "<html><body><h1>Welcome</h1></body></html>",
    )
}

async fn by_guid(
    State(st): State<Shared>,
    Path(guid): Path<String>,
    Query(q): Query<HashMap<String, String>>,
    h: HeaderMap,
) -> Answer {
    if let Err(refused) = admit(&st, "GET", &format!("/schemas/guids/{guid}"), &q, &h) {
        return refused;
    }
    let found = st
        .schemas
        .lock()
        .unwrap()
        .iter()
        .find(|r| r.guid == guid)
        .cloned();
    by(&st, found).await
}

/// `GET /subjects/S/versions/V`: an imported schema, as the service fetches it.
async fn by_version(
    State(st): State<Shared>,
    Path((subject, version)): Path<(String, usize)>,
    Query(q): Query<HashMap<String, String>>,
    h: HeaderMap,
) -> Answer {
    let path = format!("/subjects/{subject}/versions/{version}");
    if let Err(refused) = admit(&st, "GET", &path, &q, &h) {
        return refused;
    }
    let found = version
        .checked_sub(1)
        .and_then(|i| st.schemas.lock().unwrap().get(i).cloned())
        .filter(|r| r.subject == subject);
    by(&st, found).await
}

/// `POST /subjects/S`: is this schema registered under S, and as which version (what
/// Confluent's Protobuf serializer asks of each file the message imports).
async fn lookup(
    State(st): State<Shared>,
    Path(subject): Path<String>,
    Query(q): Query<HashMap<String, String>>,
    h: HeaderMap,
    body: Bytes,
) -> Answer {
    if let Err(refused) = admit(&st, "POST", &format!("/subjects/{subject}"), &q, &h) {
        return refused;
    }
    let body: Value = serde_json::from_slice(&body).unwrap();
    let all = st.schemas.lock().unwrap();
    match all
        .iter()
        .position(|r| r.subject == subject && Some(r.schema.as_str()) == body["schema"].as_str())
    {
        Some(i) => {
            let mut v = answer(&all[i]);
            v["id"] = json!(i + 1);
            v["version"] = json!(i + 1);
            (StatusCode::OK, axum::Json(v))
        }
        None => error(StatusCode::NOT_FOUND, 40403, "Schema not found"),
    }
}

async fn versions(State(st): State<Shared>, Path(subject): Path<String>) -> Answer {
    let all = st.schemas.lock().unwrap();
    let v: Vec<usize> = (1..=all.len())
        .filter(|i| all[i - 1].subject == subject)
        .collect();
    if v.is_empty() {
        return error(StatusCode::NOT_FOUND, 40401, "Subject not found");
    }
    (StatusCode::OK, axum::Json(json!(v)))
}

impl Registry {
    fn start() -> Registry {
        let state: Shared = Arc::new(RegistryState::default());
        let app = Router::new()
            .route("/subjects", get(subjects))
            .route("/console/subjects", get(html))
            .route("/subjects/{subject}", post(lookup))
            .route("/subjects/{subject}/versions", post(register).get(versions))
            .route("/subjects/{subject}/versions/{version}", get(by_version))
            .route("/schemas/ids/{id}", get(by_id))
            .route("/schemas/guids/{guid}", get(by_guid))
            .with_state(state.clone());
        Registry {
            url: serve_stub(app),
            state,
        }
    }
    fn log(&self) -> Vec<String> {
        self.state.log.lock().unwrap().clone()
    }
}

/// The Python with Confluent's serializers and numpy.
fn python() -> String {
    pyenv_python(
        "import confluent_kafka.schema_registry.avro, confluent_kafka.schema_registry.protobuf, \
         confluent_kafka.schema_registry.json_schema, numpy",
        "confluent-kafka's Schema Registry serializers and numpy",
    )
}

fn run_python(args: &[&str]) -> String {
    let out = std::process::Command::new(python())
        .args(args)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "python {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// Produces `parts` (each with its schema and records) with Confluent's serializers.
fn confluent_produce(
    broker: &EmbeddedBroker,
    registry: &Registry,
    topic: &str,
    format: &str,
    header_id: bool,
    parts: Value,
) {
    confluent_produce_to(
        broker.bootstrap_servers(),
        json!({}),
        registry,
        topic,
        format,
        header_id,
        parts,
    );
}

/// `confluent_produce` to any broker, with more producer settings `producer`.
fn confluent_produce_to(
    brokers: &str,
    producer: Value,
    registry: &Registry,
    topic: &str,
    format: &str,
    header_id: bool,
    parts: Value,
) {
    let dir = tempfile::tempdir().unwrap();
    let plan = dir.path().join("plan.json");
    let body = json!({
        "brokers": brokers,
        "producer": producer,
        "topic": topic,
        "registry": registry.url,
        "user": USER,
        "password": PASSWORD,
        "format": format,
        "header_id": header_id,
        "parts": parts,
    });
    std::fs::write(&plan, body.to_string()).unwrap();
    let script = format!(
        "{}/tests/python/confluent_produce.py",
        env!("CARGO_MANIFEST_DIR")
    );
    run_python(&[&script, plan.to_str().unwrap()]);
}

/// One sale: the row behind every format's record.
#[derive(Clone, Copy)]
struct Sale {
    price: f64,
    sqft: i64,
    rooms: i64,
    age: i64,
    region: &'static str,
}

const REGIONS: [&str; 3] = ["north", "south", "east"];

fn sales(n: usize, seed: u64) -> Vec<Sale> {
    (0..n as u64)
        .map(|i| {
            let h = (i + seed) * 2654435761 % 4294967291;
            let sqft = 400 + (h % 1600) as i64;
            let rooms = 1 + ((h / 7) % 5) as i64;
            let age = 18 + ((h / 11) % 60) as i64;
            let region = REGIONS[((h / 13) % 3) as usize];
            let bump = match region {
                "north" => 0.0,
                "south" => 25.0,
                _ => -40.0,
            };
            let noise = ((h / 17) % 1000) as f64 / 100.0 - 5.0;
            Sale {
                price: 50.0 + 0.2 * sqft as f64 + 12.0 * rooms as f64 - 0.8 * age as f64
                    + bump
                    + noise,
                sqft,
                rooms,
                age,
                region,
            }
        })
        .collect()
}

/// The stream every format test reads: nested `user.age`, a categorical region.
fn sales_stream(name: &str, topic: &str, format: ValueFormat) -> StreamConfig {
    let features: FeatureSchema = serde_json::from_value(json!([
        "sqft",
        "rooms",
        "user.age",
        {"name": "region", "kind": "categorical", "levels": ["north", "south"]}
    ]))
    .unwrap();
    let mut s = stream(name, topic, features, Task::Regression);
    s.target = Some("price".into());
    s.format = format;
    s
}

fn registry_config(streams: Vec<StreamConfig>, registry: &Registry) -> Config {
    let formats: Vec<ValueFormat> = streams.iter().map(|s| s.format).collect();
    let mut streams = streams;
    for s in &mut streams {
        s.format = ValueFormat::Ravel;
    }
    let mut c = config(streams, None);
    c.schema_registry.url = registry.url.clone();
    c.schema_registry.basic_auth_user = USER.into();
    c.schema_registry.basic_auth_password = PASSWORD.into();
    for (s, f) in c.streams.iter_mut().zip(formats) {
        s.format = f;
    }
    c.check().expect("a valid config");
    c
}

/// numpy's least squares (with an intercept) on the sales, in the model's feature names.
fn numpy_ols(rows: &[Sale], names: &[String]) -> Vec<f64> {
    let column = |s: &Sale, name: &str| -> f64 {
        match name {
            "sqft" => s.sqft as f64,
            "rooms" => s.rooms as f64,
            "user.age" => s.age as f64,
            "region=other" => f64::from(u8::from(!["north", "south"].contains(&s.region))),
            n => {
                let level = n.strip_prefix("region=").expect("a known feature");
                f64::from(u8::from(s.region == level))
            }
        }
    };
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("rows.csv");
    let text: String = rows
        .iter()
        .map(|s| {
            let mut cells: Vec<String> = names
                .iter()
                .map(|n| format!("{:?}", column(s, n)))
                .collect();
            cells.push(format!("{:?}", s.price));
            cells.join(",") + "\n"
        })
        .collect();
    std::fs::write(&file, text).unwrap();
    let script = r#"
import sys
import numpy as np
d = np.loadtxt(sys.argv[1], delimiter=",", ndmin=2)
X = np.hstack([np.ones((d.shape[0], 1)), d[:, :-1]])
b = np.linalg.lstsq(X, d[:, -1], rcond=None)[0]
print(" ".join(repr(float(v)) for v in b))
"#;
    run_python(&["-c", script, file.to_str().unwrap()])
        .split_whitespace()
        .map(|v| v.parse().unwrap())
        .collect()
}

/// The service's OLS model equals numpy's on `rows` to 1e-9 (intercept first).
fn assert_ols_is_numpys(svc: &TestService, stream: &str, rows: &[Sale], p: usize) {
    let (status, model) = svc.post(
        &format!("/v1/streams/{stream}/model"),
        &json!({"method": "ols"}),
    );
    assert_eq!(status, 200, "{model}");
    assert_eq!(model["n"].as_u64(), Some(rows.len() as u64), "{model}");
    let coefs = model["coefficients"].as_array().unwrap();
    assert_eq!(coefs.len(), p, "{model}");
    let names: Vec<String> = coefs
        .iter()
        .map(|c| c["feature"].as_str().unwrap().to_string())
        .collect();
    let want = numpy_ols(rows, &names);
    let mut got = vec![model["intercept"].as_f64().unwrap()];
    got.extend(coefs.iter().map(|c| c["value"].as_f64().unwrap()));
    assert_eq!(got.len(), want.len());
    let scale = want.iter().fold(0.0f64, |m, v| m.max(v.abs()));
    for ((g, w), name) in got
        .iter()
        .zip(&want)
        .zip(std::iter::once(&"intercept".to_string()).chain(&names))
    {
        assert!(
            (g - w).abs() <= 1e-9 * scale,
            "{stream}: {name}: service {g} vs numpy {w}\n{model}"
        );
    }
}

fn avro_v1() -> Value {
    json!({"type": "record", "name": "Sale", "namespace": "shop", "fields": [
        {"name": "price", "type": "double"},
        {"name": "sqft", "type": "int"},
        {"name": "rooms", "type": "int"},
        {"name": "region", "type": {"type": "enum", "name": "Region", "symbols": ["north", "south", "east"]}},
        {"name": "user", "type": {"type": "record", "name": "User", "fields": [{"name": "age", "type": "int"}]}}
    ]})
}

/// Reordered, `sqft` widened to long and `rooms` to double, an unused field added.
fn avro_v2() -> Value {
    json!({"type": "record", "name": "Sale", "namespace": "shop", "fields": [
        {"name": "user", "type": {"type": "record", "name": "User", "fields": [
            {"name": "id", "type": "string"}, {"name": "age", "type": "long"}]}},
        {"name": "note", "type": ["null", "string"], "default": null},
        {"name": "rooms", "type": "double"},
        {"name": "region", "type": "string"},
        {"name": "sqft", "type": "long"},
        {"name": "price", "type": "double"}
    ]})
}

fn avro_records(rows: &[Sale], v2: bool) -> Value {
    rows.iter()
        .enumerate()
        .map(|(i, s)| {
            if v2 {
                json!({"user": {"id": format!("u{i}"), "age": s.age}, "note": "hello",
                       "rooms": s.rooms as f64, "region": s.region, "sqft": s.sqft, "price": s.price})
            } else {
                json!({"price": s.price, "sqft": s.sqft, "rooms": s.rooms, "region": s.region,
                       "user": {"age": s.age}})
            }
        })
        .collect()
}

/// Waits until `stream` holds `n` rows.
fn wait_n(svc: &TestService, stream: &str, n: usize) {
    let s = svc.wait_rows(stream, n as u64);
    assert_eq!(s["n"].as_u64(), Some(n as u64), "{s}");
}

/// A registry, a broker with topic `sr.<name>` (and its dead letters) and the service reading
/// it as Avro stream `name` (`sales_stream`).
fn avro_service(name: &str) -> (Registry, EmbeddedBroker, TestService) {
    let registry = Registry::start();
    let broker = EmbeddedBroker::start(1).unwrap();
    let topic = format!("sr.{name}");
    broker.create_topic(&topic, 1).unwrap();
    broker.create_topic(&format!("{topic}.dlq"), 1).unwrap();
    let svc = TestService::start(
        registry_config(
            vec![sales_stream(name, &topic, ValueFormat::Avro)],
            &registry,
        ),
        broker.bootstrap_servers(),
    );
    (registry, broker, svc)
}

#[test]
fn avro_from_confluents_serializer_gives_numpys_ols_across_schema_changes_and_header_ids() {
    let (registry, broker, svc) = avro_service("avro");
    let rows = sales(900, 1);
    confluent_produce(
        &broker,
        &registry,
        "sr.avro",
        "avro",
        false,
        json!([
            {"schema": avro_v1(), "records": avro_records(&rows[..400], false)},
            {"schema": avro_v2(), "records": avro_records(&rows[400..700], true)},
        ]),
    );
    // Newer serializers: the schema's GUID in the `__value_schema_id` header.
    confluent_produce(
        &broker,
        &registry,
        "sr.avro",
        "avro",
        true,
        json!([{"schema": avro_v2(), "records": avro_records(&rows[700..], true)}]),
    );
    wait_n(&svc, "avro", rows.len());
    assert_ols_is_numpys(&svc, "avro", &rows, 5);
    let log = registry.log();
    assert!(
        log.iter().any(|l| l.starts_with("GET /schemas/guids/")),
        "the header's GUID was looked up: {log:?}"
    );
    // Each schema fetched once.
    let fetches = log
        .iter()
        .filter(|l| l.starts_with("GET /schemas/"))
        .count();
    assert_eq!(fetches, 3, "{log:?}");
    let m = svc.metrics();
    assert_eq!(
        sample(
            &m,
            "ravel_messages_rejected_total{reason=\"schema\",stream=\"avro\"}"
        ),
        Some(0.0)
    );
    svc.stop().unwrap();
}

/// Issue 32: an Avro schema whose `User` type lives in another subject (a registry reference,
/// as Confluent's serializer registers it): fetched along with the schema, by subject and
/// version, and the records read as any other.
#[test]
fn avro_schemas_with_references_give_numpys_ols() {
    let (registry, broker, svc) = avro_service("avroref");
    let user = json!({"type": "record", "name": "User", "namespace": "shop", "fields": [
        {"name": "id", "type": "string"}, {"name": "age", "type": "long"}]});
    let mut sale = avro_v2();
    sale["fields"][0]["type"] = json!("shop.User");
    let rows = sales(500, 7);
    confluent_produce(
        &broker,
        &registry,
        "sr.avroref",
        "avro",
        false,
        json!([{"schema": sale, "references": {"shop.User": user},
                "records": avro_records(&rows, true)}]),
    );
    // Every record read (none refused as `schema`: without its reference the schema does not
    // parse, `shop.User` being unknown) and the model numpy's.
    wait_n(&svc, "avroref", rows.len());
    assert_ols_is_numpys(&svc, "avroref", &rows, 5);
    let log = registry.log();
    assert!(
        log.iter()
            .any(|l| l.starts_with("GET /subjects/shop.User/versions/")),
        "the referenced subject was fetched (by the serializer and the service): {log:?}"
    );
    let m = svc.metrics();
    assert_eq!(
        sample(
            &m,
            "ravel_messages_rejected_total{reason=\"schema\",stream=\"avroref\"}"
        ),
        Some(0.0)
    );
    svc.stop().unwrap();
}

fn proto_v1() -> Value {
    json!({"name": "Sale", "fields": [["price", "double"], ["sqft", "int32"], ["rooms", "int32"],
        ["region", "string"], ["user", "User"]], "nested": {"User": [["age", "int32"]]}})
}

/// Reordered and widened (`sqft` int64, `rooms` double), fields added (one a well-known
/// Timestamp, an import the serializer does not register).
fn proto_v2() -> Value {
    json!({"name": "Sale", "fields": [["note", "string"], ["sold_at", "timestamp"], ["user", "User"], ["sqft", "int64"],
        ["region", "string"], ["rooms", "double"], ["price", "double"]],
        "nested": {"User": [["id", "string"], ["age", "int64"]]}})
}

/// `User` from another file the serializer registers as a reference (subject
/// `shop/people.proto`), which the service fetches with the schema.
fn proto_v3() -> Value {
    json!({"name": "Sale", "fields": [["price", "double"], ["sqft", "int64"], ["rooms", "double"],
        ["region", "string"], ["user", "shop.people.User"]],
        "imports": {"shop/people.proto": {"package": "shop.people", "messages": {"User": [["age", "int64"]]}}}})
}

fn proto_records(rows: &[Sale], v2: bool) -> Value {
    rows.iter()
        .map(|s| {
            if v2 {
                json!({"note": "n", "sold_at": "2026-11-26T10:00:00Z", "user": {"id": "u", "age": s.age}, "sqft": s.sqft,
                       "region": s.region, "rooms": s.rooms as f64, "price": s.price})
            } else {
                json!({"price": s.price, "sqft": s.sqft, "rooms": s.rooms, "region": s.region,
                       "user": {"age": s.age}})
            }
        })
        .collect()
}

fn json_schema() -> Value {
    json!({"$schema": "http://json-schema.org/draft-07/schema#", "title": "Sale", "type": "object",
        "properties": {"price": {"type": "number"}, "sqft": {"type": "integer"},
            "rooms": {"type": "integer"}, "region": {"type": "string"},
            "user": {"type": "object", "properties": {"age": {"type": "integer"}}}},
        "required": ["price"]})
}

#[test]
fn protobuf_and_json_schema_from_confluents_serializers_give_numpys_ols() {
    let registry = Registry::start();
    let broker = EmbeddedBroker::start(1).unwrap();
    for t in ["sr.proto", "sr.proto.dlq", "sr.json", "sr.json.dlq"] {
        broker.create_topic(t, 1).unwrap();
    }
    let svc = TestService::start(
        registry_config(
            vec![
                sales_stream("proto", "sr.proto", ValueFormat::Protobuf),
                sales_stream("json", "sr.json", ValueFormat::JsonSchema),
            ],
            &registry,
        ),
        broker.bootstrap_servers(),
    );
    let rows = sales(900, 2);
    confluent_produce(
        &broker,
        &registry,
        "sr.proto",
        "protobuf",
        false,
        json!([
            {"schema": proto_v1(), "records": proto_records(&rows[..300], false)},
            {"schema": proto_v2(), "records": proto_records(&rows[300..700], true)},
            {"schema": proto_v3(), "records": proto_records(&rows[700..], false)},
        ]),
    );
    let json_rows = sales(500, 3);
    confluent_produce(
        &broker,
        &registry,
        "sr.json",
        "json",
        false,
        json!([{"schema": json_schema(), "records": avro_records(&json_rows, false)}]),
    );
    wait_n(&svc, "proto", rows.len());
    wait_n(&svc, "json", json_rows.len());
    assert_ols_is_numpys(&svc, "proto", &rows, 5);
    assert_ols_is_numpys(&svc, "json", &json_rows, 5);
    // Protobuf schemas are asked for in the serialized form the Python serializer registered.
    let log = registry.log();
    let proto_fetches: Vec<&String> = log
        .iter()
        .filter(|l| l.starts_with("GET /schemas/ids/") && l.contains("format=serialized"))
        .collect();
    assert_eq!(proto_fetches.len(), 3, "{log:?}");
    // The imported file, by the subject and version its reference names, serialized too.
    assert!(
        log.iter().any(
            |l| l.starts_with("GET /subjects/shop/people.proto/versions/")
                && l.contains("format=serialized")
        ),
        "{log:?}"
    );
    svc.stop().unwrap();
}

/// Issue 36 item 1: the schema'd formats through a broker neither we nor librdkafka's authors
/// wrote (Tansu 0.6.0, tests/interop.rs): Confluent's Avro, Protobuf and JSON Schema
/// serializers, each with a schema change or a reference, one record a batch (Tansu's batch
/// defects); n and the OLS model equal numpy's.
#[test]
fn schemad_formats_through_tansu_give_numpys_ols() {
    let dir = tempfile::tempdir().unwrap();
    let tansu = Tansu::start(dir.path());
    let registry = Registry::start();
    let formats = [
        ("avro", ValueFormat::Avro),
        ("proto", ValueFormat::Protobuf),
        ("json", ValueFormat::JsonSchema),
    ];
    for (name, _) in formats {
        tansu.create_topic(&format!("tansu.{name}"), 1, None);
        tansu.create_topic(&format!("tansu.{name}.dlq"), 1, None);
    }
    let mut c = registry_config(
        formats
            .iter()
            .map(|(name, f)| sales_stream(name, &format!("tansu.{name}"), *f))
            .collect(),
        &registry,
    );
    c.kafka
        .options
        .insert("batch.num.messages".into(), "1".into());
    let svc = TestService::start(c, &tansu.brokers);
    let one_per_batch = json!({"batch.num.messages": 1});
    let rows = sales(600, 11);
    let (a, b) = rows.split_at(300);
    let parts = [
        (
            "avro",
            json!([
                {"schema": avro_v1(), "records": avro_records(a, false)},
                {"schema": avro_v2(), "records": avro_records(b, true)},
            ]),
        ),
        (
            "protobuf",
            json!([
                {"schema": proto_v1(), "records": proto_records(a, false)},
                {"schema": proto_v3(), "records": proto_records(b, false)},
            ]),
        ),
        (
            "json",
            json!([{"schema": json_schema(), "records": avro_records(&rows, false)}]),
        ),
    ];
    for ((name, _), (format, parts)) in formats.iter().zip(parts) {
        confluent_produce_to(
            &tansu.brokers,
            one_per_batch.clone(),
            &registry,
            &format!("tansu.{name}"),
            format,
            false,
            parts,
        );
    }
    for (name, _) in formats {
        wait_n(&svc, name, rows.len());
        assert_ols_is_numpys(&svc, name, &rows, 5);
    }
    svc.stop().unwrap();
}

fn produce_raw(broker: &EmbeddedBroker, topic: &str, values: &[Vec<u8>]) {
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", broker.bootstrap_servers())
        .create()
        .unwrap();
    for v in values {
        producer
            .send(BaseRecord::<(), [u8]>::to(topic).payload(v.as_slice()))
            .unwrap();
    }
    producer.flush(Duration::from_secs(30)).unwrap();
}

#[test]
fn bad_framing_unknown_ids_and_mismatched_datums_are_dead_lettered_and_outages_waited_out() {
    let registry = Registry::start();
    let broker = EmbeddedBroker::start(1).unwrap();
    for t in ["sr.bad", "sr.bad.dlq", "sr.pbad", "sr.pbad.dlq"] {
        broker.create_topic(t, 1).unwrap();
    }
    let mut c = registry_config(
        vec![
            sales_stream("bad", "sr.bad", ValueFormat::Avro),
            sales_stream("pbad", "sr.pbad", ValueFormat::Protobuf),
        ],
        &registry,
    );
    c.schema_registry.timeout_ms = 2000;
    let svc = TestService::start(c, broker.bootstrap_servers());
    let rows = sales(100, 4);
    confluent_produce(
        &broker,
        &registry,
        "sr.bad",
        "avro",
        false,
        json!([{"schema": avro_v1(), "records": avro_records(&rows[..50], false)}]),
    );
    confluent_produce(
        &broker,
        &registry,
        "sr.pbad",
        "protobuf",
        false,
        json!([{"schema": proto_v1(), "records": proto_records(&rows[..20], false)}]),
    );
    wait_n(&svc, "bad", 50);
    wait_n(&svc, "pbad", 20);
    // Schema 1 is the Avro one, 2 the Protobuf one.
    produce_raw(
        &broker,
        "sr.bad",
        &[
            br#"{"price": 1.0}"#.to_vec(),   // plain JSON: no framing
            vec![0, 0, 0],                   // a header cut short
            vec![0, 0, 0, 0, 99, 2, 4],      // an unknown id
            vec![0, 0, 0, 0, 1, 0xff, 0xff], // not a Sale datum
        ],
    );
    // A Protobuf message-index list naming a fourth top-level message of a one-message file.
    produce_raw(&broker, "sr.pbad", &[vec![0, 0, 0, 0, 2, 2, 6, 0x09]]);
    let dead = read_topic(broker.bootstrap_servers(), "sr.bad.dlq", 4);
    assert_eq!(dead.len(), 4, "{dead:?}");
    for (_, headers) in &dead {
        assert_eq!(headers["ravel-reason"], "schema", "{headers:?}");
    }
    let errors: Vec<&str> = dead
        .iter()
        .map(|(_, h)| h["ravel-error"].as_str())
        .collect();
    assert!(
        errors[0].contains("not in the Confluent wire format"),
        "{errors:?}"
    );
    assert!(errors[2].contains("schema id 99"), "{errors:?}");
    assert!(
        errors[3].contains("does not match its Avro schema"),
        "{errors:?}"
    );
    let pdead = read_topic(broker.bootstrap_servers(), "sr.pbad.dlq", 1);
    assert_eq!(pdead.len(), 1);
    assert!(
        pdead[0].1["ravel-error"].contains("name no message type"),
        "{pdead:?}"
    );

    // The registry fails (500) for a while: a new schema's messages wait, nothing is
    // dead-lettered, and n is exact once it answers.
    registry.state.fail_next.store(6, Ordering::SeqCst);
    confluent_produce(
        &broker,
        &registry,
        "sr.bad",
        "avro",
        false,
        json!([{"schema": avro_v2(), "records": avro_records(&rows[50..], true)}]),
    );
    wait_n(&svc, "bad", 100);
    assert_eq!(registry.state.fail_next.load(Ordering::SeqCst), 0);
    let good: Vec<Sale> = rows.clone();
    assert_ols_is_numpys(&svc, "bad", &good, 5);
    let m = svc.metrics();
    assert_eq!(
        sample(
            &m,
            "ravel_messages_rejected_total{reason=\"schema\",stream=\"bad\"}"
        ),
        Some(4.0)
    );

    // A registry that never answers: not ready, and /readyz says why.
    registry.state.hang.store(true, Ordering::SeqCst);
    produce_raw(&broker, "sr.bad", &[vec![0, 0, 0, 0, 7, 1]]);
    let start = Instant::now();
    let body = loop {
        let (status, body) = svc.get("/readyz");
        if status == 503 {
            break body;
        }
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "still ready: {body}"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    let why = body["error"]["message"].as_str().unwrap();
    assert!(
        why.contains("Schema Registry") && why.contains(&registry.url),
        "{why}"
    );
    // Stopping while it waits: the message is left unread, and the stop is prompt.
    let t = Instant::now();
    svc.stop().unwrap();
    assert!(t.elapsed() < Duration::from_secs(30), "{:?}", t.elapsed());
}

#[test]
fn ravel_produce_registers_the_rows_schema_and_writes_framed_avro_protobuf_and_json() {
    let registry = Registry::start();
    let broker = EmbeddedBroker::start(1).unwrap();
    for t in [
        "sr.prod",
        "sr.prod.dlq",
        "sr.prodp",
        "sr.prodp.dlq",
        "sr.prodj",
        "sr.prodj.dlq",
    ] {
        broker.create_topic(t, 1).unwrap();
    }
    let numeric = |name: &str, topic: &str, format: ValueFormat| {
        let mut s = stream(
            name,
            topic,
            FeatureSchema::names(vec!["sqft".into(), "rooms".into(), "user.age".into()]),
            Task::Regression,
        );
        s.target = Some("price".into());
        s.format = format;
        s
    };
    let svc = TestService::start(
        registry_config(
            vec![
                numeric("prod", "sr.prod", ValueFormat::Avro),
                numeric("prodp", "sr.prodp", ValueFormat::Protobuf),
                numeric("prodj", "sr.prodj", ValueFormat::JsonSchema),
            ],
            &registry,
        ),
        broker.bootstrap_servers(),
    );
    let rows = sales(300, 5);
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("sales.csv");
    // The file's columns in another order than the stream's.
    let text: String = std::iter::once("user.age,price,sqft,rooms\n".to_string())
        .chain(
            rows.iter()
                .map(|s| format!("{},{:?},{},{}\n", s.age, s.price, s.sqft, s.rooms)),
        )
        .collect();
    std::fs::write(&csv, text).unwrap();
    let auth = format!("{USER}:{PASSWORD}");
    for (topic, wire) in [
        ("sr.prod", "avro"),
        ("sr.prodp", "protobuf"),
        ("sr.prodj", "json-schema"),
    ] {
        ravel(&[
            "produce",
            "--brokers",
            broker.bootstrap_servers(),
            "--topic",
            topic,
            "--input",
            csv.to_str().unwrap(),
            "--target",
            "price",
            "--wire-format",
            wire,
            "--schema-registry",
            &registry.url,
            "--schema-registry-auth",
            &auth,
            "--quiet",
        ]);
    }
    for name in ["prod", "prodp", "prodj"] {
        wait_n(&svc, name, rows.len());
        assert_ols_is_numpys(&svc, name, &rows, 3);
    }
    let log = registry.log();
    for subject in ["sr.prod-value", "sr.prodp-value", "sr.prodj-value"] {
        assert!(
            log.iter()
                .any(|l| l.starts_with(&format!("POST /subjects/{subject}/versions"))),
            "{log:?}"
        );
    }
    svc.stop().unwrap();
}

#[test]
fn plain_avro_datums_of_a_configured_schema_need_no_registry() {
    let broker = EmbeddedBroker::start(1).unwrap();
    broker.create_topic("sr.plain", 1).unwrap();
    broker.create_topic("sr.plain.dlq", 1).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let avsc = dir.path().join("sale.avsc");
    std::fs::write(&avsc, avro_v1().to_string()).unwrap();
    let mut s = sales_stream("plain", "sr.plain", ValueFormat::Avro);
    s.avro_schema_file = Some(avsc);
    let svc = TestService::start(config(vec![s], None), broker.bootstrap_servers());
    let rows = sales(200, 6);
    let schema = apache_avro::Schema::parse_str(&avro_v1().to_string()).unwrap();
    let writer = apache_avro::writer::datum::GenericDatumWriter::builder(&schema)
        .build()
        .unwrap();
    let mut values: Vec<Vec<u8>> = rows
        .iter()
        .map(|s| {
            use apache_avro::types::Value as A;
            let region = REGIONS.iter().position(|r| *r == s.region).unwrap() as u32;
            writer
                .write_value_to_vec(A::Record(vec![
                    ("price".into(), A::Double(s.price)),
                    ("sqft".into(), A::Int(s.sqft as i32)),
                    ("rooms".into(), A::Int(s.rooms as i32)),
                    ("region".into(), A::Enum(region, s.region.into())),
                    (
                        "user".into(),
                        A::Record(vec![("age".into(), A::Int(s.age as i32))]),
                    ),
                ]))
                .unwrap()
        })
        .collect();
    // A datum cut short is a bad message, never a silently wrong row.
    let mut cut = values[0].clone();
    cut.truncate(cut.len() - 3);
    values.push(cut);
    produce_raw(&broker, "sr.plain", &values);
    wait_n(&svc, "plain", rows.len());
    assert_ols_is_numpys(&svc, "plain", &rows, 5);
    let dead = read_topic(broker.bootstrap_servers(), "sr.plain.dlq", 1);
    assert_eq!(dead.len(), 1);
    assert_eq!(dead[0].1["ravel-reason"], "schema", "{dead:?}");
    svc.stop().unwrap();
}

/// `dir/ravel.toml` for the real binary's `ravel check` and `ravel replay`: the Avro stream
/// `name` on `topic` (as `sales_stream`), its schemas from `url`.
fn write_avro_config(dir: &std::path::Path, name: &str, topic: &str, url: &str) {
    std::fs::write(
        dir.join("ravel.toml"),
        format!(
            r#"
[schema_registry]
url = "{url}"
basic_auth_user = "{USER}"
basic_auth_password = "{PASSWORD}"
timeout_ms = 2000
[[streams]]
name = "{name}"
topic = "{topic}"
format = "avro"
target = "price"
features = ["sqft", "rooms", "user.age", {{ name = "region", kind = "categorical", levels = ["north", "south"] }}]
"#
        ),
    )
    .unwrap();
}

/// Issue 45: a registry is a registry. A `schema_registry.url` with a wrong path (the server
/// answers a plain 404, or a web page): `ravel check` reports a problem, `/readyz` is 503
/// saying why, `ravel_schema_registry_waiting` is 1 and nothing is dead-lettered; after the
/// URL is fixed and the service restarted, n and OLS equal numpy's on every good event. Then
/// the registry's own "schema not found" (40403) does dead-letter good events, and once the
/// schema is back `ravel replay` brings n and OLS to numpy's on all of them, each once.
#[test]
fn a_wrong_registry_path_waits_and_replayed_dead_letters_come_back_once() {
    let registry = Registry::start();
    let broker = EmbeddedBroker::start(1).unwrap();
    let b = broker.bootstrap_servers().to_string();
    broker.create_topic("sr.path", 1).unwrap();
    broker.create_topic("sr.path.dlq", 1).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let env = [("RAVEL_KAFKA__BROKERS", b.as_str())];

    // `ravel check`: a plain 404 and a web page are each a problem naming the URL.
    for wrong in [
        format!("{}/apis/ccompat/v7", registry.url),
        format!("{}/console", registry.url),
    ] {
        write_avro_config(dir.path(), "path", "sr.path", &wrong);
        let (ok, list, out) = ravel_check(dir.path(), &env);
        assert!(!ok, "{out}");
        let f = finding(&list, &format!("schema_registry:{wrong}"));
        assert_eq!(f["status"], "problem", "{f}");
        let detail = f["detail"].as_str().unwrap();
        assert!(
            detail.contains(&format!(
                "{wrong} is not a Schema Registry: GET {wrong}/subjects answered"
            )),
            "{detail}"
        );
    }

    // The service on the wrong path: the messages wait, nothing is dead-lettered.
    let wrong = format!("{}/apis/ccompat/v7", registry.url);
    let mut c = registry_config(
        vec![sales_stream("path", "sr.path", ValueFormat::Avro)],
        &registry,
    );
    c.schema_registry.url = wrong.clone();
    c.schema_registry.timeout_ms = 2000;
    let svc = TestService::start(c.clone(), &b);
    let rows = sales(500, 45);
    confluent_produce(
        &broker,
        &registry,
        "sr.path",
        "avro",
        false,
        json!([{"schema": avro_v1(), "records": avro_records(&rows[..300], false)}]),
    );
    // The old client dead-lettered each such message within milliseconds of reading it.
    std::thread::sleep(Duration::from_secs(2));
    let (status, body) = svc.get("/readyz");
    assert_eq!(status, 503, "{body}");
    let why = body["error"]["message"].as_str().unwrap().to_string();
    assert!(
        why.contains(&format!("{wrong} is not a Schema Registry")) && why.contains("messages wait"),
        "{why}"
    );
    let m = svc.metrics();
    assert_eq!(
        sample(&m, "ravel_schema_registry_waiting"),
        Some(1.0),
        "{m}"
    );
    assert_eq!(
        sample(&m, "ravel_dead_letters_total{stream=\"path\"}"),
        Some(0.0)
    );
    assert_eq!(
        sample(
            &m,
            "ravel_messages_rejected_total{reason=\"schema\",stream=\"path\"}"
        ),
        Some(0.0)
    );
    assert_eq!(svc.get("/v1/streams/path").1["n"], 0);
    svc.stop().unwrap();

    // Fixed and restarted: every good event, numpy's model.
    c.schema_registry.url = registry.url.clone();
    let svc = TestService::start(c, &b);
    wait_n(&svc, "path", 300);
    assert_ols_is_numpys(&svc, "path", &rows[..300], 5);
    assert_eq!(
        sample(&svc.metrics(), "ravel_schema_registry_waiting"),
        Some(0.0)
    );

    // The registry says a new schema is not found (deleted, say): its good events are
    // dead-lettered as `schema`, by the registry's own answer.
    registry.state.gone.store(true, Ordering::SeqCst);
    confluent_produce(
        &broker,
        &registry,
        "sr.path",
        "avro",
        false,
        json!([{"schema": avro_v2(), "records": avro_records(&rows[300..], true)}]),
    );
    let dead = read_topic(&b, "sr.path.dlq", 200);
    assert_eq!(dead.len(), 200);
    assert!(
        dead.iter().all(|(_, h)| h["ravel-reason"] == "schema"),
        "{:?}",
        dead[0]
    );
    assert_eq!(svc.get("/v1/streams/path").1["n"], 300);

    // Restored: `ravel replay` produces them again, each once; n and OLS are numpy's on all.
    registry.state.gone.store(false, Ordering::SeqCst);
    write_avro_config(dir.path(), "path", "sr.path", &registry.url);
    let out = ravel(&[
        "replay",
        "--config",
        dir.path().join("ravel.toml").to_str().unwrap(),
        "--brokers",
        b.as_str(),
        "--stream",
        "path",
        "--reason",
        "schema",
    ]);
    assert!(
        out.starts_with("replayed 200 of 200 dead letters (200 to sr.path)"),
        "{out}"
    );
    wait_n(&svc, "path", 500);
    assert_ols_is_numpys(&svc, "path", &rows, 5);
    let m = svc.metrics();
    assert_eq!(
        sample(&m, "ravel_dead_letters_total{stream=\"path\"}"),
        Some(200.0)
    );
    // Nothing else arrives: each replayed event once.
    std::thread::sleep(Duration::from_millis(500));
    assert_eq!(svc.get("/v1/streams/path").1["n"], 500);
    svc.stop().unwrap();
}
