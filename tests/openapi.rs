//! The OpenAPI description against the running service: every route the service answers is
//! in `/openapi.json` (and in the guide's HTTP API chapter), every example in the document validates against
//! its schema, and every answer of a real service (a real broker, rows produced over TCP)
//! has a status the document declares and a body its schema accepts. And the guide's HTTP API
//! chapter's commands, run as a user pastes them.

use crate::common::*;
use ravel::broker::EmbeddedBroker;
use ravel::config::{FeatureSchema, FeatureStreamConfig};
use ravel_core::Task;
use ravel_core::features::Loss;
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;

fn send(brokers: &str, topic: &str, payloads: &[Value]) {
    send_records(brokers, topic, payloads.iter().map(Record::json), &[]);
}

/// `schema` (inline or a `$ref`) as a JSON Schema 2020-12 document that can resolve the
/// document's components.
fn validator(doc: &Value, schema: &Value) -> jsonschema::Validator {
    let mut root = match schema {
        Value::Object(m) => m.clone(),
        _ => panic!("not a schema: {schema}"),
    };
    root.insert(
        "$schema".into(),
        json!("https://json-schema.org/draft/2020-12/schema"),
    );
    root.insert("components".into(), doc["components"].clone());
    jsonschema::validator_for(&Value::Object(root))
        .unwrap_or_else(|e| panic!("invalid schema {schema}: {e}"))
}

fn assert_valid(doc: &Value, schema: &Value, instance: &Value, what: &str) {
    let v = validator(doc, schema);
    let errors: Vec<String> = v.iter_errors(instance).map(|e| e.to_string()).collect();
    assert!(
        errors.is_empty(),
        "{what}: {instance} does not match {schema}: {errors:?}"
    );
}

fn assert_invalid(doc: &Value, schema: &Value, instance: &Value, what: &str) {
    assert!(
        !validator(doc, schema).is_valid(instance),
        "{what}: {instance} should not match {schema}"
    );
}

/// The operations of the document as (METHOD, path template).
fn operations(doc: &Value) -> BTreeSet<(String, String)> {
    let mut ops = BTreeSet::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for method in item.as_object().unwrap().keys() {
            if ["get", "post", "put", "delete", "patch"].contains(&method.as_str()) {
                ops.insert((method.to_uppercase(), path.clone()));
            }
        }
    }
    ops
}

/// The routes the guide's HTTP API chapter shows with curl (docs/http-api.md, "Routes"), as
/// (METHOD, path template):
/// `-XPOST localhost:8080/v1/streams/demo/model` -> (POST, /v1/streams/{name}/model).
fn readme_routes() -> BTreeSet<(String, String)> {
    let section = doc_section("docs/http-api.md", "## Routes");
    let mut routes = BTreeSet::new();
    for line in section.lines().filter(|l| l.starts_with("curl")) {
        let method = ["POST", "PUT", "DELETE"]
            .into_iter()
            .find(|m| line.contains(&format!("-X{m}")))
            .unwrap_or("GET");
        let url = line
            .split_whitespace()
            .find_map(|w| w.trim_matches('\'').strip_prefix("localhost:8080"))
            .unwrap_or_else(|| panic!("no URL in docs/http-api.md line {line}"));
        let path = url.split('?').next().unwrap();
        let template: Vec<String> = path
            .split('/')
            .enumerate()
            .map(|(i, seg)| match (i, seg) {
                // /v1/<kind>/<name>/...: the third segment is the stream's name.
                (3, _) => "{name}".to_string(),
                _ => seg.to_string(),
            })
            .collect();
        routes.insert((method.to_string(), template.join("/")));
    }
    routes
}

/// Every `examples` list in the document (request bodies, parameters, schema properties),
/// with the schema each example must satisfy.
fn examples(doc: &Value) -> Vec<(String, Value, Value)> {
    let mut out = Vec::new();
    fn walk(v: &Value, at: &str, out: &mut Vec<(String, Value, Value)>) {
        match v {
            Value::Object(m) => {
                // A schema object that lists examples of itself.
                if let Some(Value::Array(ex)) = m.get("examples")
                    && (m.contains_key("type") || m.contains_key("$ref"))
                {
                    let mut schema = m.clone();
                    schema.remove("examples");
                    for e in ex {
                        out.push((at.to_string(), Value::Object(schema.clone()), e.clone()));
                    }
                }
                // A media type or parameter: named examples (or one example) of its schema.
                if let Some(schema) = m.get("schema") {
                    if let Some(Value::Object(named)) = m.get("examples") {
                        for (name, e) in named {
                            out.push((format!("{at}/{name}"), schema.clone(), e["value"].clone()));
                        }
                    }
                    if let Some(e) = m.get("example") {
                        out.push((format!("{at}/example"), schema.clone(), e.clone()));
                    }
                }
                for (k, child) in m {
                    walk(child, &format!("{at}/{k}"), out);
                }
            }
            Value::Array(a) => {
                for (i, child) in a.iter().enumerate() {
                    walk(child, &format!("{at}/{i}"), out);
                }
            }
            _ => {}
        }
    }
    walk(doc, "#", &mut out);
    out
}

struct Call {
    method: &'static str,
    template: &'static str,
    path: String,
    body: Option<Value>,
    status: u16,
}

fn call(
    method: &'static str,
    template: &'static str,
    path: &str,
    body: Option<Value>,
    status: u16,
) -> Call {
    Call {
        method,
        template,
        path: path.to_string(),
        body,
        status,
    }
}

/// The named examples of an operation's request body.
fn body_examples(doc: &Value, method: &str, template: &str) -> Vec<Value> {
    doc["paths"][template][method]["requestBody"]["content"]["application/json"]["examples"]
        .as_object()
        .unwrap_or_else(|| panic!("{method} {template} has no request examples"))
        .values()
        .map(|e| e["value"].clone())
        .collect()
}

#[test]
fn every_route_is_described_and_every_answer_matches_its_schema() {
    let broker = EmbeddedBroker::start(1).unwrap();
    let brokers = broker.bootstrap_servers();
    for t in ["t.reg", "t.cls", "t.genes", "t.empty"] {
        broker.create_topic(t, 1).unwrap();
        broker.create_topic(&format!("{t}.dlq"), 1).unwrap();
    }
    // Regression on three named features (the names the document's examples use), and a
    // classification stream.
    let (p, n) = (3, 200);
    let (x, y) = synthetic(p, 2, n, 11);
    let rows: Vec<Value> = (0..n)
        .map(|i| json!({"x": &x[i * p..(i + 1) * p], "y": y[i]}))
        .collect();
    send(brokers, "t.reg", &rows);
    let cls: Vec<Value> = (0..n)
        .map(|i| json!({"x": &x[i * p..(i + 1) * p], "y": if y[i] > 0.0 { 1.0 } else { -1.0 }}))
        .collect();
    send(brokers, "t.cls", &cls);
    // A feature stream with labels and columns, and one without labels.
    let labels = [0.5, -1.0, 2.0, 0.3, -0.7, 1.1];
    let mut genes = vec![json!({ "labels": labels })];
    for j in 0..4 {
        let values: Vec<f64> = (0..6).map(|i| ((i * 7 + j * 3) % 5) as f64 - 2.0).collect();
        genes.push(json!({"feature": format!("g{j}"), "values": values}));
    }
    send(brokers, "t.genes", &genes);

    let mut cfg = config(
        vec![
            stream(
                "reg",
                "t.reg",
                FeatureSchema::names(names(p)),
                Task::Regression,
            ),
            stream(
                "cls",
                "t.cls",
                FeatureSchema::Count(p),
                Task::Classification,
            ),
        ],
        None,
    );
    // genes keeps its columns (wide = true) for the wide routes.
    let fs = |name: &str, topic: &str, wide: bool| FeatureStreamConfig {
        name: name.into(),
        topic: Some(topic.into()),
        n: 6,
        loss: Loss::Squared,
        s: 2,
        workers: 1,
        eta: None,
        wide,
    };
    cfg.feature_streams = vec![fs("genes", "t.genes", true), fs("empty", "t.empty", false)];
    cfg.check().unwrap();
    let svc = TestService::start(cfg, brokers);
    svc.wait_rows("reg", n as u64);
    svc.wait_rows("cls", n as u64);
    svc.wait_feature_offset("genes", genes.len() as i64);
    let deadline = std::time::Instant::now() + DEADLINE;
    while svc.get("/readyz").0 != 200 {
        assert!(std::time::Instant::now() < deadline, "never ready");
        std::thread::sleep(Duration::from_millis(100));
    }

    let r = client().get(svc.url("/openapi.json")).send().unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let text = r.text().unwrap();
    // The document is the API's contract: byte for byte what tests/fixtures/openapi.json
    // holds (written from the service at ee00ce2, before the crate's restructuring). A change
    // of the API changes that file in the same commit, where a reviewer sees it.
    let fixture = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/openapi.json"),
    )
    .unwrap();
    if text != fixture {
        let (line, (served, fixed)) = text
            .lines()
            .chain(std::iter::repeat("<end>"))
            .zip(fixture.lines().chain(std::iter::repeat("<end>")))
            .enumerate()
            .find(|(_, (a, b))| a != b)
            .expect("two different texts differ in a line");
        let served_path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("openapi.json");
        std::fs::write(&served_path, &text).unwrap();
        panic!(
            "/openapi.json differs from tests/fixtures/openapi.json at line {}:\n  served:  {served}\n  fixture: {fixed}\n\
             The served document is in {}: when the API changed on purpose, copy it over the fixture.",
            line + 1,
            served_path.display()
        );
    }
    let doc: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(doc["openapi"], "3.1.0");

    // Every route is described, and the guide shows the same routes (less /openapi.json,
    // which it names in prose, and the operations' second method on /path).
    let ops = operations(&doc);
    let readme = readme_routes();
    for r in &readme {
        assert!(
            ops.contains(r),
            "docs/http-api.md route {r:?} is not in /openapi.json"
        );
    }
    for op in &ops {
        let (m, t) = (op.0.as_str(), op.1.as_str());
        if !readme.contains(op) && t != "/openapi.json" && !(m == "GET" && t.ends_with("/path")) {
            panic!("{op:?} is in /openapi.json but not in docs/http-api.md's Routes section");
        }
    }

    // Every example in the document satisfies its schema, and the request schema refuses
    // what the service refuses.
    let found = examples(&doc);
    assert!(found.len() >= 10, "only {} examples", found.len());
    for (at, schema, example) in &found {
        assert_valid(&doc, schema, example, at);
    }
    let request = json!({"$ref": "#/components/schemas/Request"});
    assert_invalid(
        &doc,
        &request,
        &json!({"method": "lasso", "l1_ratio": 0.5}),
        "lasso takes no l1_ratio",
    );
    assert_invalid(
        &doc,
        &request,
        &json!({"method": "ridge"}),
        "ridge needs lambda",
    );
    assert_invalid(&doc, &request, &json!({"k": 3}), "no method");
    assert_valid(
        &doc,
        &request,
        &json!({"method": "mcp", "k": 2, "gamma": 3.0, "standardize": false}),
        "mcp",
    );

    // Every operation, called on the real service: declared status, body valid.
    let mut calls = vec![
        call("get", "/healthz", "/healthz", None, 200),
        call("get", "/readyz", "/readyz", None, 200),
        call("get", "/metrics", "/metrics", None, 200),
        call("get", "/openapi.json", "/openapi.json", None, 200),
        call("get", "/v1/streams", "/v1/streams", None, 200),
        call("get", "/v1/streams/{name}", "/v1/streams/reg", None, 200),
        call("get", "/v1/streams/{name}", "/v1/streams/cls", None, 200),
        call("get", "/v1/streams/{name}", "/v1/streams/nope", None, 404),
        call(
            "get",
            "/v1/streams/{name}/declaration",
            "/v1/streams/reg/declaration",
            None,
            200,
        ),
        call(
            "get",
            "/v1/streams/{name}/declaration",
            "/v1/streams/nope/declaration",
            None,
            404,
        ),
        // Declarations are off without http.admin_token (tests/declarations.rs has them on).
        call(
            "put",
            "/v1/streams/{name}",
            "/v1/streams/new",
            Some(json!({"features": 2})),
            403,
        ),
        call("delete", "/v1/streams/{name}", "/v1/streams/reg", None, 403),
        call("get", "/v1/scorers/{name}", "/v1/scorers/nope", None, 404),
        call(
            "put",
            "/v1/feature-streams/{name}",
            "/v1/feature-streams/new",
            Some(json!({"n": 10, "s": 2})),
            403,
        ),
        call(
            "delete",
            "/v1/feature-streams/{name}",
            "/v1/feature-streams/new",
            None,
            403,
        ),
        call(
            "get",
            "/v1/feature-streams/{name}/declaration",
            "/v1/feature-streams/nope/declaration",
            None,
            404,
        ),
        call(
            "put",
            "/v1/scorers/{name}",
            "/v1/scorers/new",
            Some(json!({"stream": "reg", "topic": "t.reg", "output_topic": "t.out"})),
            403,
        ),
        call(
            "delete",
            "/v1/scorers/{name}",
            "/v1/scorers/nope",
            None,
            403,
        ),
        call(
            "get",
            "/v1/topics/{name}/fields",
            "/v1/topics/t.reg/fields",
            None,
            403,
        ),
        call(
            "get",
            "/v1/streams/{name}/history",
            "/v1/streams/reg/history",
            None,
            200,
        ),
        call(
            "get",
            "/v1/streams/{name}/history",
            "/v1/streams/nope/history",
            None,
            404,
        ),
        call(
            "get",
            "/v1/streams/{name}/statistics",
            "/v1/streams/reg/statistics",
            None,
            200,
        ),
        call(
            "get",
            "/v1/streams/{name}/statistics",
            "/v1/streams/cls/statistics",
            None,
            200,
        ),
        call(
            "get",
            "/v1/streams/{name}/statistics",
            "/v1/streams/nope/statistics",
            None,
            404,
        ),
        call(
            "post",
            "/v1/streams/{name}/model",
            "/v1/streams/reg/model",
            Some(json!({"method": "lasso", "k": 9})),
            400,
        ),
        call(
            "post",
            "/v1/streams/{name}/model",
            "/v1/streams/nope/model",
            Some(json!({"method": "ols"})),
            404,
        ),
        call(
            "post",
            "/v1/streams/{name}/model",
            "/v1/streams/cls/model",
            Some(json!({"method": "fsa", "k": 2, "w_pos": 2.0})),
            200,
        ),
        call(
            "get",
            "/v1/streams/{name}/path",
            "/v1/streams/reg/path?method=lasso&path_points=5",
            None,
            200,
        ),
        call(
            "get",
            "/v1/streams/{name}/path",
            "/v1/streams/reg/path?method=fw-lasso&path_points=4",
            None,
            200,
        ),
        call(
            "get",
            "/v1/streams/{name}/path",
            "/v1/streams/reg/path?method=lasso&k=2",
            None,
            400,
        ),
        call(
            "post",
            "/v1/streams/{name}/path",
            "/v1/streams/reg/path",
            Some(json!({"method": "bogus"})),
            400,
        ),
        call(
            "post",
            "/v1/streams/{name}/predict",
            "/v1/streams/reg/predict",
            Some(json!({"model": {"method": "ols"}, "rows": [[1.0, 2.0]]})),
            400,
        ),
        call(
            "get",
            "/v1/feature-streams",
            "/v1/feature-streams",
            None,
            200,
        ),
        call(
            "get",
            "/v1/feature-streams/{name}",
            "/v1/feature-streams/genes",
            None,
            200,
        ),
        call(
            "get",
            "/v1/feature-streams/{name}",
            "/v1/feature-streams/nope",
            None,
            404,
        ),
        call(
            "put",
            "/v1/feature-streams/{name}/labels",
            "/v1/feature-streams/genes/labels",
            Some(json!({ "labels": labels })),
            200,
        ),
        call(
            "put",
            "/v1/feature-streams/{name}/labels",
            "/v1/feature-streams/genes/labels",
            Some(json!({"labels": [1.0]})),
            400,
        ),
        call(
            "post",
            "/v1/feature-streams/{name}/model",
            "/v1/feature-streams/genes/model",
            Some(json!({"refit": true})),
            200,
        ),
        call(
            "post",
            "/v1/feature-streams/{name}/model",
            "/v1/feature-streams/empty/model",
            Some(json!({})),
            409,
        ),
        call(
            "post",
            "/v1/feature-streams/{name}/wide/path",
            "/v1/feature-streams/genes/wide/path",
            Some(json!({"variant": "deterministic", "path_points": 5})),
            200,
        ),
        call(
            "post",
            "/v1/feature-streams/{name}/wide/path",
            "/v1/feature-streams/empty/wide/path",
            Some(json!({})),
            409,
        ),
        call(
            "post",
            "/v1/feature-streams/{name}/wide/model",
            "/v1/feature-streams/genes/wide/model",
            Some(json!({"k": 2, "path_points": 5})),
            200,
        ),
        call(
            "post",
            "/v1/feature-streams/{name}/wide/model",
            "/v1/feature-streams/genes/wide/model",
            Some(json!({"delta": -1.0})),
            400,
        ),
    ];
    // The document's own request examples, sent as they are.
    for (method, template, path) in [
        ("post", "/v1/streams/{name}/model", "/v1/streams/reg/model"),
        ("post", "/v1/streams/{name}/path", "/v1/streams/reg/path"),
        (
            "post",
            "/v1/streams/{name}/predict",
            "/v1/streams/reg/predict",
        ),
        (
            "post",
            "/v1/feature-streams/{name}/wide/path",
            "/v1/feature-streams/genes/wide/path",
        ),
        (
            "post",
            "/v1/feature-streams/{name}/wide/model",
            "/v1/feature-streams/genes/wide/model",
        ),
    ] {
        for body in body_examples(&doc, method, template) {
            calls.push(call(method, template, path, Some(body), 200));
        }
    }

    let mut called = BTreeSet::new();
    for c in &calls {
        let url = svc.url(&c.path);
        let req = match c.method {
            "get" => client().get(url),
            "post" => client().post(url),
            "put" => client().put(url),
            "delete" => client().delete(url),
            m => panic!("{m}"),
        };
        let req = match &c.body {
            Some(b) => req.json(b),
            None => req,
        };
        let resp = req.send().unwrap();
        let status = resp.status().as_u16();
        let ctype = resp
            .headers()
            .get("content-type")
            .map(|v| v.to_str().unwrap().to_string())
            .unwrap_or_default();
        let text = resp.text().unwrap();
        let what = format!("{} {} {:?}", c.method, c.path, c.body);
        assert_eq!(status, c.status, "{what}: {text}");
        let op = &doc["paths"][c.template][c.method];
        assert!(
            op.is_object(),
            "{what}: {} {} not in the document",
            c.method,
            c.template
        );
        let declared = &op["responses"][status.to_string()];
        assert!(declared.is_object(), "{what}: status {status} not declared");
        let content = declared["content"].as_object();
        if ctype.starts_with("application/json") {
            let body: Value = serde_json::from_str(&text).unwrap();
            match content.and_then(|c| c.get("application/json")) {
                Some(media) if media.get("schema").is_some() => {
                    assert_valid(&doc, &media["schema"], &body, &what)
                }
                // /openapi.json: the document itself, checked above.
                _ => assert_eq!(c.template, "/openapi.json", "{what}: no JSON schema"),
            }
        } else {
            assert!(
                ctype.starts_with("text/plain"),
                "{what}: content type {ctype}"
            );
            assert!(
                content.is_some_and(|c| c.contains_key("text/plain")),
                "{what}"
            );
            assert!(text.contains("ravel_"), "{what}: {text}");
        }
        called.insert((c.method.to_uppercase(), c.template.to_string()));
    }
    assert_eq!(
        called, ops,
        "operations in the document that the test never called"
    );
}

/// Starts `cmd` (`ravel serve`, as the guide shows it) in a new directory whose
/// config/ravel.toml (what `ravel serve` reads by default) listens on a free port and declares
/// the `genes` feature stream of docs/concepts.md beside the demo; with more environment
/// `env`. Returns the directory, the service and its port, once ready with demo rows.
fn serve_as_documented(cmd: &str, env: &[(&str, &str)]) -> (tempfile::TempDir, Proc, String) {
    let genes = code_blocks(&doc_section("docs/concepts.md", "## Feature streams"))
        .into_iter()
        .find(|(lang, b)| lang == "toml" && b.contains("name = \"genes\""))
        .expect("docs/concepts.md declares the genes feature stream")
        .1;
    let dir = tempfile::tempdir().unwrap();
    let port = free_port().to_string();
    std::fs::create_dir(dir.path().join("config")).unwrap();
    std::fs::write(
        dir.path().join("config/ravel.toml"),
        format!("[http]\naddr = \"127.0.0.1:{port}\"\n\n{genes}"),
    )
    .unwrap();
    let log = dir.path().join("serve.log");
    let (proc, line) = Proc::shell("ravel serve", dir.path(), cmd, env, &log);
    let base = format!("http://127.0.0.1:{port}");
    assert_eq!(line, format!("listening on {base}"));
    wait_for("ready, with 1000 demo rows", &log, || {
        let ready = client().get(format!("{base}/readyz")).send().ok()?;
        (ready.status().as_u16() == 200 && stream_n(&base, "demo")? >= 1000).then_some(())
    });
    (dir, proc, port)
}

/// Runs `commands` (one shell session, stopping at the first that fails) in `dir` with
/// `env`; returns what each printed.
fn run_commands(dir: &Path, commands: &[String], env: &[(&str, &str)]) -> Vec<String> {
    const MARK: &str = "--- end of command ---";
    let script: String = std::iter::once("set -e\n".to_string())
        .chain(
            commands
                .iter()
                .map(|c| format!("{c}\nprintf '\\n{MARK}\\n'\n")),
        )
        .collect();
    let (ok, out, err) = shell(dir, &script, env);
    assert!(ok, "{err}\n{out}");
    let outputs: Vec<String> = out.split(MARK).map(|o| o.trim().to_string()).collect();
    assert_eq!(outputs.len(), commands.len() + 1, "{out}");
    outputs[..commands.len()].to_vec()
}

/// docs/http-api.md's commands as a user pastes them (bash, curl, python3), only the port
/// changed: the Routes section against the demo (and the genes feature stream of
/// docs/concepts.md), every answer not an error, the prediction a number and the labels
/// applied; then the Access section's `ravel serve` with a token and its request, which the
/// token authorizes (and a wrong one does not).
#[test]
fn the_guides_http_api_commands_run_as_written() {
    for (tool, package) in [("curl", "curl"), ("python3", "python3")] {
        assert!(
            shell(Path::new("."), &format!("{tool} --version"), &[]).0,
            "`{tool}` is not installed: apt-get install {package}"
        );
    }
    // The shell blocks of a section, as commands.
    let blocks = |heading: &str| -> Vec<Vec<String>> {
        code_blocks(&doc_section("docs/http-api.md", heading))
            .into_iter()
            .filter(|(lang, _)| lang == "sh")
            .map(|(_, b)| shell_commands(&b))
            .collect()
    };
    let on = |cmd: &String, port: &str| cmd.replace("8080", port);

    let (dir, svc, port) = serve_as_documented("ravel serve", &[]);
    let routes: Vec<String> = blocks("## Routes")
        .concat()
        .iter()
        .map(|c| on(c, &port))
        .collect();
    let outputs = run_commands(dir.path(), &routes, &[]);
    let mut curls = 0;
    for (cmd, out) in routes.iter().zip(&outputs) {
        if !cmd.starts_with("curl") {
            assert!(out.is_empty(), "{cmd}: {out}");
            continue;
        }
        curls += 1;
        let Ok(v) = serde_json::from_str::<Value>(out) else {
            assert!(
                cmd.contains("/metrics") && out.contains("# TYPE ravel_"),
                "{cmd}: {out}"
            );
            continue;
        };
        assert!(v.get("error").is_none(), "{cmd}: {v}");
        if cmd.contains("/predict") {
            let p = v["predictions"][0].as_f64();
            assert!(p.is_some_and(f64::is_finite), "{cmd}: {v}");
        }
        if cmd.contains("/labels") {
            assert_eq!(
                (&v["status"], &v["n"]),
                (&json!("applied"), &json!(200)),
                "{v}"
            );
        }
    }
    assert!(curls >= 15, "only {curls} curl commands in Routes");
    assert!(routes.iter().any(|c| c.contains("/predict")));
    let labels = routes
        .iter()
        .find(|c| c.starts_with("labels="))
        .expect("Routes makes $labels")
        .clone();
    drop(svc);

    // Access: `ravel serve` with the token its first line exports, and the request.
    let access = blocks("## Access and TLS");
    let serve = &access[0];
    assert!(
        serve[0].starts_with("export RAVEL_HTTP__TOKEN=") && serve[1] == "ravel serve",
        "{serve:?}"
    );
    let token = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";
    let (dir, _svc, port) = serve_as_documented(&serve[1], &[("RAVEL_HTTP__TOKEN", token)]);
    let request = on(&access[1][0], &port);
    let put = vec![labels, request];
    for (token, status) in [(token, json!("applied")), ("not-the-token", Value::Null)] {
        let out = run_commands(dir.path(), &put, &[("RAVEL_HTTP__TOKEN", token)]);
        let v: Value = serde_json::from_str(&out[1]).unwrap_or_else(|e| panic!("{e}: {out:?}"));
        assert_eq!(v["status"], status, "token {token}: {v}");
        if status.is_null() {
            assert_eq!(v["error"]["code"], "unauthorized", "{v}");
        }
    }
}
