//! Fields to features (issue 31), through the real binary and a real broker: a housing-like
//! table with named columns in a shuffled order, a categorical column with values never
//! declared, tokens to hash and 5% missing cells.
//!
//! - `ravel fit` with one-hot, hashing and missing indicators equals scikit-learn's
//!   ColumnTransformer (SimpleImputer with indicators, OneHotEncoder with a reference level,
//!   FeatureHasher) and LinearRegression on the same rows: `tests/fixtures/housing_expected.json`,
//!   written by `scripts/make_fields_fixtures.py`;
//! - the same rows as nested JSON events (ids and timestamps beside the fields, missing values
//!   absent or null) and as `ravel produce` named batches of the CSV's cells give the model of
//!   `ravel fit` on the file;
//! - a prediction from an event needs only the fields of the model's nonzero coefficients;
//! - an event of the wrong shape is dead-lettered with its reason, nothing of it applied;
//! - a misspelled feature or target is named once the first events are read (issue 45), in the
//!   log, the summary, the metrics and `ravel check`, with the closest keys.

use crate::common::*;
use ravel::broker::EmbeddedBroker;
use ravel::config::{FeatureSchema, StreamConfig};
use ravel::produce::{self, ProduceArgs, WireFormat};
use ravel_core::Task;
use rdkafka::config::ClientConfig;
use rdkafka::producer::{BaseProducer, BaseRecord, Producer};
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

const FIT_FLAGS: [&str; 10] = [
    "--target",
    "price",
    "--method",
    "ols",
    "--categorical",
    "region=north,south,east,west",
    "--hashed",
    "tags:8",
    "--missing",
    "indicator",
];

/// `ravel fit` on the housing table: coefficients by feature name, and the intercept.
fn fit() -> (BTreeMap<String, f64>, f64) {
    let file = fixture("housing.csv");
    let mut args = vec!["fit", file.to_str().unwrap()];
    args.extend(FIT_FLAGS);
    let model: Value = serde_json::from_str(&ravel(&args)).unwrap();
    by_name(&model, |n| n.to_string())
}

fn by_name(model: &Value, rename: impl Fn(&str) -> String) -> (BTreeMap<String, f64>, f64) {
    let coef = model["coefficients"]
        .as_array()
        .unwrap_or_else(|| panic!("no coefficients: {model}"))
        .iter()
        .map(|c| {
            (
                rename(c["feature"].as_str().unwrap()),
                c["value"].as_f64().unwrap(),
            )
        })
        .collect();
    (coef, model["intercept"].as_f64().unwrap())
}

/// Every coefficient of `want` in `got` within `rel` of the model's largest; a name `got`
/// lacks must be 0 in `want`, and a name `want` lacks must be 0 in `got`.
fn assert_same(
    got: &(BTreeMap<String, f64>, f64),
    want: &(BTreeMap<String, f64>, f64),
    rel: f64,
    what: &str,
) {
    let scale = want.0.values().fold(want.1.abs(), |m, v| m.max(v.abs()));
    assert!(
        (got.1 - want.1).abs() <= rel * scale,
        "{what}: intercept {} vs {}",
        got.1,
        want.1
    );
    for name in got.0.keys().chain(want.0.keys()) {
        let (g, w) = (
            got.0.get(name).copied().unwrap_or(0.0),
            want.0.get(name).copied().unwrap_or(0.0),
        );
        assert!(
            (g - w).abs() <= rel * scale,
            "{what}: {name}: {g} vs {w} (largest {scale})"
        );
    }
}

#[test]
fn ravel_fit_equals_scikit_learns_column_transformer() {
    let expected: Value =
        serde_json::from_str(&std::fs::read_to_string(fixture("housing_expected.json")).unwrap())
            .unwrap();
    let want: BTreeMap<String, f64> = expected["coefficients"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, v)| (k.clone(), v.as_f64().unwrap()))
        .collect();
    assert!(want.contains_key("region=other") && want.contains_key("tags#7"));
    let got = fit();
    // The reference level (north) has no column; the hashed bucket no token reaches is 0.
    assert!(!got.0.contains_key("region=north"), "{:?}", got.0);
    assert_same(
        &got,
        &(want, expected["intercept"].as_f64().unwrap()),
        1e-8,
        "ravel fit vs scikit-learn",
    );
}

/// The housing CSV's rows: header and cells.
fn rows() -> (Vec<String>, Vec<Vec<String>>) {
    let text = std::fs::read_to_string(fixture("housing.csv")).unwrap();
    let mut lines = text.lines();
    let header = lines.next().unwrap().split(',').map(String::from).collect();
    let rows = lines
        .map(|l| l.split(',').map(String::from).collect())
        .collect();
    (header, rows)
}

/// One row as the event an application would write: nested objects, an id and a timestamp
/// the stream does not use, a missing value absent or null.
fn event(i: usize, header: &[String], row: &[String]) -> Value {
    let cell = |name: &str| -> Option<&String> {
        let c = &row[header.iter().position(|h| h == name).unwrap()];
        (!c.is_empty() && c != "NA").then_some(c)
    };
    let num = |name: &str| cell(name).map(|c| json!(c.parse::<f64>().unwrap()));
    let mut home = Map::new();
    let mut user = Map::new();
    let mut top = Map::new();
    top.insert("id".into(), json!(format!("sale-{i}")));
    top.insert("ts".into(), json!(1_700_000_000 + i));
    let put = |obj: &mut Map<String, Value>, name: &str| match num(name) {
        Some(v) => {
            obj.insert(name.into(), v);
        }
        // Half the missing values absent, half null.
        None if i.is_multiple_of(2) => {
            obj.insert(name.into(), Value::Null);
        }
        None => {}
    };
    put(&mut home, "sqft");
    put(&mut home, "rooms");
    put(&mut user, "age");
    top.insert("home".into(), Value::Object(home));
    top.insert("user".into(), Value::Object(user));
    top.insert(
        "region".into(),
        cell("region").map_or(Value::Null, |r| json!(r)),
    );
    top.insert("tags".into(), json!(cell("tags").unwrap()));
    top.insert("price".into(), num("price").unwrap());
    Value::Object(top)
}

fn stream(name: &str, topic: &str, target: Option<&str>, features: Value) -> StreamConfig {
    let mut s = crate::common::stream(
        name,
        topic,
        serde_json::from_value::<FeatureSchema>(features).unwrap(),
        Task::Regression,
    );
    s.target = target.map(String::from);
    s.missing = Some(ravel_core::fields::Missing::Indicator);
    s
}

fn region() -> Value {
    json!({"name": "region", "kind": "categorical", "levels": ["north", "south", "east", "west"]})
}

fn tags() -> Value {
    json!({"name": "tags", "kind": "hashed", "buckets": 8, "missing": "reject"})
}

#[test]
fn events_and_named_batches_give_the_model_of_ravel_fit() {
    let (header, cells) = rows();
    let n = cells.len() as u64;
    let broker = EmbeddedBroker::start(1).unwrap();
    let b = broker.bootstrap_servers().to_string();
    for t in ["t.events", "t.batches", "t.events.dlq", "t.batches.dlq"] {
        broker.create_topic(t, 1).unwrap();
    }
    let producer: BaseProducer = ClientConfig::new()
        .set("bootstrap.servers", &b)
        .create()
        .unwrap();
    for (i, row) in cells.iter().enumerate() {
        let payload = serde_json::to_vec(&event(i, &header, row)).unwrap();
        producer
            .send(BaseRecord::<(), [u8]>::to("t.events").payload(&payload))
            .unwrap();
    }
    // Two bad events: text in a numeric field, an object where a number belongs.
    for bad in [
        json!({"home": {"sqft": "big", "rooms": 2}, "user": {"age": 3}, "region": "east", "tags": "t1", "price": 1}),
        json!({"home": {"sqft": 1, "rooms": 2}, "user": {"age": {"years": 3}}, "region": "east", "tags": "t1", "price": 1}),
    ] {
        producer
            .send(
                BaseRecord::<(), [u8]>::to("t.events").payload(&serde_json::to_vec(&bad).unwrap()),
            )
            .unwrap();
    }
    producer.flush(Duration::from_secs(30)).unwrap();
    // The CSV's cells by name, in the file's column order (not the stream's).
    let sent = produce::run(&ProduceArgs {
        brokers: b.clone(),
        topic: "t.batches".into(),
        input: Some(fixture("housing.csv")),
        target: Some("price".into()),
        file_format: None,
        synthetic: None,
        wire_format: WireFormat::Auto,
        batch_rows: 64,
        schema_registry: None,
        schema_registry_auth: None,
        options: vec![],
        quiet: true,
        memory: Default::default(),
    })
    .unwrap();
    assert_eq!(sent.rows, n);

    let cfg = config(
        vec![
            stream(
                "events",
                "t.events",
                Some("price"),
                json!(["home.sqft", "user.age", "home.rooms", region(), tags()]),
            ),
            stream(
                "batches",
                "t.batches",
                None,
                json!([tags(), "rooms", region(), "sqft", "age"]),
            ),
        ],
        None,
    );
    let svc = TestService::start(cfg, &b);
    svc.wait_rows("events", n);
    svc.wait_rows("batches", n);

    let want = fit();
    let unnest = |f: &str| {
        f.trim_start_matches("home.")
            .trim_start_matches("user.")
            .to_string()
    };
    for name in ["events", "batches"] {
        let (status, model) = svc.post(
            &format!("/v1/streams/{name}/model"),
            &json!({"method": "ols"}),
        );
        assert_eq!(status, 200, "{model}");
        assert_eq!(model["n"], n, "{name}: {model}");
        assert_same(&by_name(&model, unnest), &want, 1e-9, name);
    }

    // The events' ids and timestamps are counted as fields the stream does not use; the
    // two bad events are dead-lettered with their reasons.
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let m = svc.metrics();
        let ignored = sample(&m, r#"ravel_ingest_fields_ignored_total{stream="events"}"#);
        let refused = sample(
            &m,
            r#"ravel_messages_rejected_total{reason="field_type",stream="events"}"#,
        );
        if ignored == Some(2.0 * n as f64) && refused == Some(2.0) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "ignored {ignored:?}, refused {refused:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let copies = read_topic(&b, "t.events.dlq", 2);
    let errors: Vec<&str> = copies
        .iter()
        .map(|(_, h)| h["ravel-error"].as_str())
        .collect();
    assert!(
        errors[0].contains("feature 'home.sqft' holds text ('big')"),
        "{errors:?}"
    );
    assert!(
        errors[1].contains("feature 'user.age' is an object"),
        "{errors:?}"
    );

    // A prediction from an event in the stream's shape, with only the fields the model
    // uses: the full event's prediction, from an event that keeps only the fields a column of
    // the two-feature model comes from (an id the stream does not use beside them).
    let spec = json!({"method": "lasso", "k": 2});
    let (_, small) = svc.post("/v1/streams/events/model", &spec);
    let used: Vec<String> = small["coefficients"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["feature"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(used.len(), 2, "{small}");
    let full = event(0, &header, &cells[0]);
    let fields = ["home.sqft", "user.age", "home.rooms", "region", "tags"];
    let keep: Vec<&str> = fields
        .iter()
        .copied()
        .filter(|f| {
            used.iter().any(|u| {
                u == f || u.starts_with(&format!("{f}=")) || u.starts_with(&format!("{f}#"))
            })
        })
        .collect();
    assert!(keep.len() <= 2, "{keep:?} from {used:?}");
    let mut trimmed = json!({"id": "not a feature"});
    for f in &keep {
        let path: Vec<&str> = f.split('.').collect();
        let mut v = &full;
        for seg in &path {
            v = &v[*seg];
        }
        match path.as_slice() {
            [one] => trimmed[*one] = v.clone(),
            [outer, inner] => {
                if trimmed.get(*outer).is_none() {
                    trimmed[*outer] = json!({});
                }
                trimmed[*outer][*inner] = v.clone();
            }
            _ => unreachable!(),
        }
    }
    let predict = |ev: &Value| {
        let (status, pred) = svc.post(
            "/v1/streams/events/predict",
            &json!({"model": spec, "features": [ev]}),
        );
        assert_eq!(status, 200, "{pred} for {ev}");
        pred["predictions"][0].as_f64().unwrap()
    };
    let (got, want_pred) = (predict(&trimmed), predict(&full));
    assert!(
        close(got, want_pred, 1e-12),
        "{got} vs {want_pred}: {trimmed} for {used:?}"
    );
    // A field the model uses, missing, under missing = "reject": refused, naming it.
    let (status, body) = svc.post(
        "/v1/streams/events/predict",
        &json!({"model": {"method": "ols"}, "features": [{"region": "east", "tag": "t1"}]}),
    );
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], "missing_feature", "{body}");
    let msg = body["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("feature 'tags' is missing and the model uses it")
            && msg.contains("does not use: tag"),
        "{body}"
    );
}

/// `ravel fit --config FILE --stream NAME` reads the file's columns as the stream reads its
/// events: the same model as the flags that say the same.
#[test]
fn ravel_fit_reads_a_file_as_a_configured_stream() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = dir.path().join("ravel.toml");
    std::fs::write(
        &cfg,
        r#"
[kafka]
brokers = "localhost:9092"

[[streams]]
name = "sales"
target = "price"
missing = "indicator"
features = [
  "sqft", "age", "rooms",
  { name = "region", kind = "categorical", levels = ["north", "south", "east", "west"] },
  { name = "tags", kind = "hashed", buckets = 8, missing = "reject" },
]
"#,
    )
    .unwrap();
    let file = fixture("housing.csv");
    let out = ravel(&[
        "fit",
        file.to_str().unwrap(),
        "--config",
        cfg.to_str().unwrap(),
        "--stream",
        "sales",
        "--method",
        "ols",
    ]);
    let model: Value = serde_json::from_str(&out).unwrap();
    assert_same(
        &by_name(&model, |n| n.to_string()),
        &fit(),
        1e-9,
        "--stream",
    );
    // A stream the file does not name, and a column the stream needs that the file lacks.
    let err = std::process::Command::new(env!("CARGO_BIN_EXE_ravel"))
        .args([
            "fit",
            file.to_str().unwrap(),
            "--config",
            cfg.to_str().unwrap(),
        ])
        .args(["--stream", "other", "--method", "ols"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&err.stderr);
    assert!(
        !err.status.success() && stderr.contains("--stream other") && stderr.contains("sales"),
        "{stderr}"
    );
}

/// Issue 45: a misspelled feature under `missing = "indicator"` and a misspelled target are
/// named once the stream's first `ingest.field_check_events` events are read, with the event
/// keys closest to them: in the log, the stream's summary, `ravel_ingest_fields_never_seen`
/// and `ravel check`; the rows the target's absence leaves out are counted apart. And a
/// prediction without a field no training row lacked is `missing_feature`, naming it.
#[test]
fn misspelled_fields_and_targets_are_named_with_the_closest_keys() {
    let broker = EmbeddedBroker::start(1).unwrap();
    let b = broker.bootstrap_servers().to_string();
    for t in ["t.orders", "t.orders.dlq", "t.days", "t.days.dlq"] {
        broker.create_topic(t, 1).unwrap();
    }
    let n = 50usize;
    let events: Vec<Vec<u8>> = (0..n)
        .map(|i| {
            serde_json::to_vec(&json!({
                "id": format!("o-{i}"),
                "customer": {"age": 20 + (i * 7) % 50, "name": "c"},
                "qty": 1 + (i * 3) % 7,
                "price": 10.0 + 0.5 * ((i * 7) % 50) as f64 + 2.0 * ((i * 3) % 7) as f64
                    + ((i * 13) % 5) as f64 / 10.0,
                "delivery_days": 1 + i % 4,
            }))
            .unwrap()
        })
        .collect();
    send(&b, "t.orders", None, &events, &[]);
    send(&b, "t.days", None, &events, &[]);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("ravel.toml"),
        r#"
[http]
addr = "127.0.0.1:0"
[ingest]
field_check_events = 40
[state]
store = "none"
[demo]
enabled = false
[[streams]]
name = "orders"
topic = "t.orders"
target = "price"
missing = "indicator"
features = ["customer.agee", "qty"]
[[streams]]
name = "days"
topic = "t.days"
target = "delivery_day"
missing = "indicator"
features = ["customer.age", "qty"]
"#,
    )
    .unwrap();
    // The real binary, its log in dir/serve1.log.
    let (svc, base) = serve(dir.path(), &b, 1);
    let summary = |name: &str| -> Value {
        client()
            .get(format!("{base}/v1/streams/{name}"))
            .send()
            .unwrap()
            .json()
            .unwrap()
    };
    let log = dir.path().join("serve1.log");
    let (orders, days) = wait_for("both samples full", &log, || {
        let (o, d) = (summary("orders"), summary("days"));
        let full = |s: &Value| {
            s["fields_seen"]["never_seen"]
                .as_array()
                .is_some_and(|v| !v.is_empty())
        };
        (full(&o) && full(&d) && o["n"] == n).then_some((o, d))
    });
    // The summary: counts over the 40 events, the misspelled names with the closest keys.
    let seen = &orders["fields_seen"];
    assert_eq!(
        (seen["events"].as_u64(), seen["sample"].as_u64()),
        (Some(40), Some(40)),
        "{seen}"
    );
    assert_eq!(
        seen["fields"],
        json!([{"field": "customer.agee", "events": 0}, {"field": "qty", "events": 40}])
    );
    assert_eq!(seen["target"], json!({"field": "price", "events": 40}));
    assert_eq!(seen["never_seen"].as_array().unwrap().len(), 1, "{seen}");
    assert_eq!(seen["never_seen"][0]["field"], "customer.agee");
    assert_eq!(seen["never_seen"][0]["role"], "field");
    assert_eq!(
        seen["never_seen"][0]["did_you_mean"][0], "customer.age",
        "{seen}"
    );
    let seen = &days["fields_seen"];
    assert_eq!(seen["never_seen"].as_array().unwrap().len(), 1, "{seen}");
    assert_eq!(seen["never_seen"][0]["field"], "delivery_day");
    assert_eq!(seen["never_seen"][0]["role"], "target");
    assert_eq!(
        seen["never_seen"][0]["did_you_mean"][0], "delivery_days",
        "{seen}"
    );
    assert_eq!(days["n"], 0, "{days}");
    // The log, once per stream.
    let text = std::fs::read_to_string(&log).unwrap();
    let line = "absent from every one of the first 40 events: field 'customer.agee' (did you mean customer.age";
    assert_eq!(text.matches(line).count(), 1, "{text}");
    assert_eq!(
        text.matches("the target 'delivery_day' (did you mean delivery_days")
            .count(),
        1,
        "{text}"
    );
    // The metrics.
    let m = metrics_of(&base);
    let never = |field: &str, stream: &str| {
        sample(
            &m,
            &format!("ravel_ingest_fields_never_seen{{field=\"{field}\",stream=\"{stream}\"}}"),
        )
    };
    assert_eq!(never("customer.agee", "orders"), Some(1.0), "{m}");
    assert_eq!(never("qty", "orders"), Some(0.0));
    assert_eq!(never("target:price", "orders"), Some(0.0));
    assert_eq!(never("target:delivery_day", "days"), Some(1.0));
    assert_eq!(never("customer.age", "days"), Some(0.0));
    let without = |s: &str| {
        sample(
            &m,
            &format!("ravel_ingest_rows_without_target_total{{stream=\"{s}\"}}"),
        )
    };
    assert_eq!(
        (without("days"), without("orders")),
        (Some(n as f64), Some(0.0))
    );
    assert_eq!(
        sample(&m, "ravel_ingest_rows_skipped_total{stream=\"days\"}"),
        Some(0.0)
    );

    // A prediction without qty, which every training row had: the model uses it and knows
    // nothing of rows without it. With qty: answered.
    let predict = |features: Value| {
        let r = client()
            .post(format!("{base}/v1/streams/orders/predict"))
            .json(&json!({"model": {"method": "ols"}, "features": [features]}))
            .send()
            .unwrap();
        (r.status().as_u16(), r.json::<Value>().unwrap())
    };
    let (status, body) = predict(json!({"customer": {"age": 30}, "qtty": 2}));
    assert_eq!(status, 400, "{body}");
    assert_eq!(body["error"]["code"], "missing_feature", "{body}");
    let msg = body["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("feature 'qty' is missing and the model uses it; its indicator 'qty=missing' was never 1 in the 50 rows")
            && msg.contains("does not use: qtty"),
        "{msg}"
    );
    let (status, body) = predict(json!({"customer": {"age": 30}, "qty": 2}));
    assert_eq!(status, 200, "{body}");

    // `ravel check` reads the topics' latest messages and names the same.
    let (ok, list, out) = ravel_check(dir.path(), &[("RAVEL_KAFKA__BROKERS", b.as_str())]);
    assert!(!ok, "{out}");
    let f = finding(&list, "fields:orders");
    assert_eq!(f["status"], "problem", "{f}");
    let detail = f["detail"].as_str().unwrap();
    assert!(
        detail.contains("absent from every one of the latest 40 events: field 'customer.agee' (did you mean customer.age"),
        "{detail}"
    );
    assert!(
        f["fix"].as_str().unwrap().contains("name = \"orders\""),
        "{f}"
    );
    let f = finding(&list, "fields:days");
    assert!(
        f["detail"]
            .as_str()
            .unwrap()
            .contains("the target 'delivery_day' (did you mean delivery_days?)"),
        "{f}"
    );
    drop(svc);
}
