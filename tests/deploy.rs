//! deploy/ checked against the real things this machine has (no container daemon, no
//! registry, no cluster):
//!
//! - Prometheus (the Debian package's `prometheus` and `promtool`, which scripts/test installs;
//!   missing, the test fails) scrapes a running ravel fed by demo traffic, with the alert rules
//!   loaded from deploy/prometheus/alerts.yml into a config derived from
//!   deploy/prometheus/prometheus.yml. Every PromQL expression of the Grafana dashboard must
//!   return series; every alert expression must evaluate, and every metric it names must be one
//!   ravel exports (alerts legitimately return nothing while all is well).
//! - `kubectl kustomize deploy/k8s` renders; its output has the probes on the ports ravel
//!   listens on, the ConfigMap mounted where the container reads its config (a config that
//!   today's service accepts), the PodDisruptionBudget and a grace period longer than a
//!   checkpoint interval.
//! - The Dockerfile's build and run lines are the guide's (docs/operations.md); its cargo build makes the binary
//!   the entrypoint runs; its CMD, with the shipped config, starts a service that its
//!   HEALTHCHECK command sees ready and that exits 0 on its STOPSIGNAL.
//! - compose.yaml parses, references files that exist, and its producer command runs.

use crate::common::*;
use ravel::broker::EmbeddedBroker;
use ravel::config::Config;
use serde_json::{Value, json};
use serde_yaml::Value as Yaml;
use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(repo().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

fn yaml(rel: &str) -> Yaml {
    let mut v: Yaml = serde_yaml::from_str(&read(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"));
    v.apply_merge().unwrap();
    v
}

fn s(v: &Yaml) -> &str {
    v.as_str().unwrap_or_else(|| panic!("not a string: {v:?}"))
}

/// A tool the tests need; missing, the test fails and says how to get it.
fn tool(name: &str, package: &str) -> PathBuf {
    let version: &[&str] = if name == "kubectl" {
        &["version", "--client"]
    } else {
        &["--version"]
    };
    let ok = Command::new(name)
        .args(version)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    assert!(
        ok,
        "`{name}` is not installed: scripts/test installs it (Debian package `{package}`)"
    );
    PathBuf::from(name)
}

/// A child process, killed on drop if still running.
struct Proc(Child);

impl Drop for Proc {
    fn drop(&mut self) {
        if self.0.try_wait().ok().flatten().is_none() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}

/// `GET base/api/v1/query?query=expr`: the result vector (panics on a query error).
fn prom_query(base: &str, expr: &str) -> Vec<Value> {
    let url = reqwest::Url::parse_with_params(&format!("{base}/api/v1/query"), &[("query", expr)])
        .unwrap();
    let v: Value = client().get(url).send().unwrap().json().unwrap();
    assert_eq!(v["status"], "success", "query {expr} failed: {v}");
    v["data"]["result"].as_array().cloned().unwrap_or_default()
}

/// The metric names in a PromQL expression (ravel's, by prefix, and Prometheus' own `up`).
fn metric_names(expr: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let b = expr.as_bytes();
    let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
    let mut i = 0;
    while i < b.len() {
        if ident(b[i]) && (i == 0 || !ident(b[i - 1])) {
            let mut j = i;
            while j < b.len() && ident(b[j]) {
                j += 1;
            }
            let word = &expr[i..j];
            if word.starts_with("ravel_") || (word == "up" && b.get(j) == Some(&b'{')) {
                out.insert(word.to_string());
            }
            i = j;
        } else {
            i += 1;
        }
    }
    out
}

/// The sample names of a Prometheus text exposition (`ravel_x_bucket`, `ravel_x_sum` ...).
fn exported_names(metrics: &str) -> BTreeSet<String> {
    metrics
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| l.split(['{', ' ']).next().unwrap().to_string())
        .collect()
}

/// Every expression of the dashboard, with Grafana's `$__rate_interval` made concrete.
fn dashboard_exprs() -> Vec<(String, String)> {
    let d: Value = serde_json::from_str(&read("deploy/grafana/ravel.json")).unwrap();
    let mut out = vec![];
    for p in d["panels"].as_array().unwrap() {
        let targets = p["targets"].as_array().unwrap();
        assert!(!targets.is_empty(), "panel {} has no query", p["title"]);
        for t in targets {
            let e = t["expr"]
                .as_str()
                .unwrap()
                .replace("$__rate_interval", "1m");
            assert!(!e.contains('$'), "unknown Grafana variable in {e}");
            out.push((p["title"].as_str().unwrap().to_string(), e));
        }
    }
    out
}

/// (name, expr) of every alert rule.
fn alert_exprs() -> Vec<(String, String)> {
    let rules = yaml("deploy/prometheus/alerts.yml");
    let mut out = vec![];
    for g in rules["groups"].as_sequence().unwrap() {
        for r in g["rules"].as_sequence().unwrap() {
            out.push((s(&r["alert"]).to_string(), s(&r["expr"]).to_string()));
        }
    }
    out
}

#[test]
fn prometheus_scrapes_ravel_and_evaluates_every_dashboard_and_alert_expression() {
    let prometheus = tool("prometheus", "prometheus");
    let promtool = tool("promtool", "prometheus");
    for args in [
        ["check", "rules", "deploy/prometheus/alerts.yml"],
        ["check", "config", "deploy/prometheus/prometheus.yml"],
    ] {
        let out = Command::new(&promtool)
            .args(args)
            .current_dir(repo())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "promtool {args:?}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    // The service with the shipped deploy config (adaptive alpha on the demo stream, the Kafka
    // state store), on a broker outside it, fed by the demo producer: rows and a feature
    // stream.
    let demo_config = ravel::config::from_file(&repo().join("deploy/ravel.toml")).unwrap();
    assert!(demo_config.demo_active() && !demo_config.feature_streams.is_empty());
    let broker = EmbeddedBroker::start(1).unwrap();
    for sc in &demo_config.streams {
        broker.create_topic(&sc.topic(), 4).unwrap();
        broker
            .create_topic(&format!("{}.dlq", sc.topic()), 1)
            .unwrap();
    }
    for f in &demo_config.feature_streams {
        broker.create_topic(&f.topic(), 1).unwrap();
        broker
            .create_topic(&format!("{}.dlq", f.topic()), 1)
            .unwrap();
    }
    let state_topic = demo_config
        .state
        .kafka_topic(&demo_config.kafka.group_id)
        .expect("the kafka state store");
    broker.create_topic(&state_topic, 3).unwrap();
    let mut config: Config = demo_config.clone();
    config.kafka.brokers = broker.bootstrap_servers().into();
    config.state.checkpoint_interval_ms = 300;
    config.ingest.lag_interval_ms = 500;
    config.check().unwrap();
    let svc = TestService::start(config, broker.bootstrap_servers());
    let _demo = ravel::DemoProducer::start(&demo_config, broker.bootstrap_servers()).unwrap();

    // Rows, a feature selection and models: every series the dashboard plots exists.
    let start = Instant::now();
    loop {
        let (_, v) = svc.get("/v1/streams/demo");
        let (_, f) = svc.get("/v1/feature-streams/demo-features");
        let rows = v["n"].as_u64().unwrap_or(0);
        let selected = f["selected_count"].as_u64().unwrap_or(0);
        if rows >= 2000 && selected > 0 {
            break;
        }
        assert!(start.elapsed() < DEADLINE, "no demo traffic: {v} / {f}");
        std::thread::sleep(Duration::from_millis(200));
    }
    let (status, _) = svc.get("/readyz");
    assert_eq!(status, 200);
    let extract = || {
        for (path, body) in [
            (
                "/v1/streams/demo/model",
                json!({"method": "lasso", "k": 10}),
            ),
            ("/v1/streams/demo/model", json!({"method": "ols"})),
            (
                "/v1/feature-streams/demo-features/model",
                json!({"refit": true}),
            ),
        ] {
            let (status, v) = svc.post(path, &body);
            assert_eq!(status, 200, "{path}: {v}");
        }
    };
    extract();

    // Prometheus from the shipped scrape config, its target replaced by the service, scraping
    // every second, the alert rules loaded from their file.
    let dir = tempfile::tempdir().unwrap();
    let mut pcfg = yaml("deploy/prometheus/prometheus.yml");
    pcfg["global"]["scrape_interval"] = "1s".into();
    pcfg["global"]["evaluation_interval"] = "1s".into();
    pcfg["rule_files"] = Yaml::Sequence(vec![
        repo()
            .join("deploy/prometheus/alerts.yml")
            .display()
            .to_string()
            .into(),
    ]);
    let jobs = pcfg["scrape_configs"].as_sequence_mut().unwrap();
    let job = jobs
        .iter_mut()
        .find(|j| j["job_name"] == "ravel")
        .expect("a scrape job named ravel (the alerts select job=\"ravel\")");
    job["static_configs"] =
        serde_yaml::from_str(&format!("[{{targets: ['{}']}}]", svc.addr)).unwrap();
    let cfg_path = dir.path().join("prometheus.yml");
    std::fs::write(&cfg_path, serde_yaml::to_string(&pcfg).unwrap()).unwrap();
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let log = dir.path().join("prometheus.log");
    let _prom = Proc(
        Command::new(&prometheus)
            .arg(format!("--config.file={}", cfg_path.display()))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.path().join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap(),
    );
    let prom_log = || std::fs::read_to_string(&log).unwrap_or_default();

    // A few scrapes, and one more round of extractions between them so that the rates over
    // the extraction histograms are not all zero.
    let start = Instant::now();
    let mut extracted_again = false;
    loop {
        let scrapes = client()
            .get(
                reqwest::Url::parse_with_params(
                    &format!("{base}/api/v1/query"),
                    &[("query", "count_over_time(up{job=\"ravel\"}[1m])")],
                )
                .unwrap(),
            )
            .send()
            .ok()
            .and_then(|r| r.json::<Value>().ok())
            .and_then(|v| {
                v["data"]["result"][0]["value"][1]
                    .as_str()
                    .map(String::from)
            })
            .and_then(|c| c.parse::<u32>().ok())
            .unwrap_or(0);
        if scrapes >= 2 && !extracted_again {
            extract();
            extracted_again = true;
        }
        if scrapes >= 5 {
            break;
        }
        assert!(
            start.elapsed() < DEADLINE,
            "Prometheus did not scrape ravel; its log:\n{}",
            prom_log()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    let up = prom_query(&base, "up{job=\"ravel\"}");
    assert_eq!(up.len(), 1);
    assert_eq!(up[0]["value"][1], "1", "scrape failed: {up:?}");

    // What ravel exports right now (the checker below must be able to fail: a made-up name
    // is neither exported nor in Prometheus).
    let exported = exported_names(&svc.metrics());
    assert!(!exported.contains("ravel_no_such_metric"));
    assert!(prom_query(&base, "ravel_no_such_metric").is_empty());
    let mut missing = vec![];
    let mut check_names = |what: &str, expr: &str| {
        let names = metric_names(expr);
        assert!(!names.is_empty(), "{what}: no metric in {expr}");
        for n in names {
            if n != "up" && !exported.contains(&n) {
                missing.push(format!("{what}: {n} is not in ravel's /metrics"));
            } else if prom_query(&base, &n).is_empty() {
                missing.push(format!("{what}: {n} has no series in Prometheus"));
            }
        }
    };
    let dashboard = dashboard_exprs();
    let alerts = alert_exprs();
    for (title, expr) in &dashboard {
        check_names(&format!("panel '{title}'"), expr);
    }
    for (name, expr) in &alerts {
        check_names(&format!("alert {name}"), expr);
    }
    for (title, expr) in &dashboard {
        if prom_query(&base, expr).is_empty() {
            missing.push(format!("panel '{title}': no series for {expr}"));
        }
    }
    // Alert expressions evaluate (prom_query panics on an error); while all is well they
    // return nothing, except the drift alarm's, which may fire on the demo's data.
    for (name, expr) in &alerts {
        let firing = prom_query(&base, expr);
        if name != "RavelDriftDetected" {
            assert!(
                firing.is_empty(),
                "alert {name} fires on a healthy service: {firing:?}"
            );
        }
    }
    assert!(missing.is_empty(), "{}", missing.join("\n"));

    // Prometheus itself evaluated every rule without an error.
    let start = Instant::now();
    loop {
        let v: Value = client()
            .get(format!("{base}/api/v1/rules"))
            .send()
            .unwrap()
            .json()
            .unwrap();
        let rules: Vec<Value> = v["data"]["groups"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|g| g["rules"].as_array().unwrap().clone())
            .collect();
        assert_eq!(rules.len(), alerts.len(), "rules loaded: {v}");
        if rules.iter().all(|r| r["health"] == "ok") {
            break;
        }
        assert!(
            start.elapsed() < DEADLINE && rules.iter().all(|r| r["health"] != "err"),
            "rule evaluation failed: {v}"
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    svc.stop().unwrap();
}

/// The rendered kustomize output, by kind.
fn kustomize() -> Vec<Yaml> {
    let kubectl = tool("kubectl", "kubernetes-client");
    let out = Command::new(kubectl)
        .args(["kustomize", "deploy/k8s"])
        .current_dir(repo())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "kubectl kustomize deploy/k8s: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8(out.stdout).unwrap();
    serde_yaml::Deserializer::from_str(&text)
        .map(|d| serde::Deserialize::deserialize(d).unwrap())
        .collect()
}

fn labels_match(selector: &Yaml, labels: &Yaml) -> bool {
    let sel = selector.as_mapping().expect("a label selector");
    !sel.is_empty() && sel.iter().all(|(k, v)| labels.get(k) == Some(v))
}

#[test]
fn kustomize_renders_probes_config_mount_pdb_and_grace_period() {
    let docs = kustomize();
    let kind = |k: &str| -> Vec<&Yaml> { docs.iter().filter(|d| d["kind"] == k).collect() };
    let [deploy] = kind("StatefulSet")[..] else {
        panic!("one StatefulSet")
    };
    let [cm] = kind("ConfigMap")[..] else {
        panic!("one ConfigMap")
    };
    let [svc] = kind("Service")[..] else {
        panic!("one Service")
    };
    let [pdb] = kind("PodDisruptionBudget")[..] else {
        panic!("one PodDisruptionBudget")
    };
    let [mon] = kind("ServiceMonitor")[..] else {
        panic!("one ServiceMonitor")
    };
    let pod = &deploy["spec"]["template"];
    let pod_labels = &pod["metadata"]["labels"];
    assert!(labels_match(
        &deploy["spec"]["selector"]["matchLabels"],
        pod_labels
    ));
    let spec = &pod["spec"];
    let [c] = &spec["containers"].as_sequence().unwrap()[..] else {
        panic!("one container")
    };

    // The config: the container reads --config PATH; PATH is the ConfigMap's key, mounted.
    let args: Vec<&str> = c["args"].as_sequence().unwrap().iter().map(s).collect();
    let path = args[args.iter().position(|a| *a == "--config").unwrap() + 1];
    assert_eq!(args[0], "serve");
    let (mount_dir, key) = path.rsplit_once('/').unwrap();
    let mount = c["volumeMounts"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|m| m["mountPath"] == mount_dir)
        .unwrap_or_else(|| panic!("nothing mounted at {mount_dir}"));
    let volume = spec["volumes"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|v| v["name"] == mount["name"])
        .unwrap();
    assert_eq!(volume["configMap"]["name"], cm["metadata"]["name"]);
    let toml = s(&cm["data"][key]);
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("ravel.toml"), toml).unwrap();
    // A config today's service accepts.
    let config = ravel::config::from_file(&dir.path().join("ravel.toml")).unwrap();
    assert!(
        !config.kafka.embedded(),
        "the k8s config names real brokers"
    );
    let port: u64 = config
        .http
        .addr
        .rsplit_once(':')
        .unwrap()
        .1
        .parse()
        .unwrap();
    assert!(
        config.http.addr.starts_with("0.0.0.0:"),
        "listen beyond localhost"
    );

    // Probes on the port ravel listens on.
    let ports = c["ports"].as_sequence().unwrap();
    let port_of = |p: &Yaml| -> u64 {
        match p {
            Yaml::Number(n) => n.as_u64().unwrap(),
            Yaml::String(name) => ports
                .iter()
                .find(|q| q["name"] == name.as_str())
                .unwrap_or_else(|| panic!("no container port named {name}"))["containerPort"]
                .as_u64()
                .unwrap(),
            _ => panic!("port {p:?}"),
        }
    };
    for (probe, path) in [("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")] {
        let get = &c[probe]["httpGet"];
        assert_eq!(get["path"], path, "{probe}");
        assert_eq!(port_of(&get["port"]), port, "{probe} port");
    }
    // Static group membership: each pod's stable name (`ravel-0`, `ravel-1`) is its
    // kafka.instance_id, so a restarted pod gets its partitions back without a rebalance.
    let instance = c["env"]
        .as_sequence()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "RAVEL_KAFKA__INSTANCE_ID")
        .expect("RAVEL_KAFKA__INSTANCE_ID is set");
    assert_eq!(
        instance["valueFrom"]["fieldRef"]["fieldPath"],
        "metadata.name"
    );
    assert_eq!(deploy["spec"]["serviceName"], svc["metadata"]["name"]);
    assert!(c["resources"]["requests"]["cpu"].as_str().is_some());
    assert!(c["resources"]["limits"]["memory"].as_str().is_some());

    // Stateless: the state lives in the Kafka state store, so nothing but the config is
    // mounted and the replicas can be more than one.
    assert_eq!(config.state.store, ravel::config::StoreKind::Kafka);
    assert!(config.state.dir().is_none());
    assert_eq!(c["volumeMounts"].as_sequence().unwrap().len(), 1);
    assert!(deploy["spec"]["replicas"].as_u64().unwrap() >= 2);

    // SIGTERM, then the last checkpoint and commit must fit before SIGKILL.
    let grace = spec["terminationGracePeriodSeconds"].as_u64().unwrap();
    let shutdown_ms = config.state.checkpoint_interval_ms + config.http.drain_timeout_ms;
    assert!(
        grace * 1000 > shutdown_ms,
        "terminationGracePeriodSeconds {grace} is not longer than a checkpoint interval plus the \
         HTTP drain ({shutdown_ms} ms)"
    );
    assert_eq!(spec["securityContext"]["runAsNonRoot"], true);

    // The PDB, the Service and the ServiceMonitor select these pods, on the named port.
    assert!(labels_match(
        &pdb["spec"]["selector"]["matchLabels"],
        pod_labels
    ));
    assert!(
        pdb["spec"]["maxUnavailable"].as_u64().is_some()
            || pdb["spec"]["minAvailable"].as_u64().is_some()
    );
    assert!(labels_match(&svc["spec"]["selector"], pod_labels));
    let svc_port = &svc["spec"]["ports"][0];
    assert_eq!(port_of(&svc_port["targetPort"]), port);
    assert!(labels_match(
        &mon["spec"]["selector"]["matchLabels"],
        &svc["metadata"]["labels"]
    ));
    let endpoint = &mon["spec"]["endpoints"][0];
    assert_eq!(endpoint["port"], svc_port["name"]);
    assert_eq!(endpoint["path"], "/metrics");
    // The alerts select job="ravel": the ServiceMonitor's job is the Service's name.
    assert_eq!(svc["metadata"]["name"], "ravel");
}

/// Dockerfile instructions, continuation lines joined.
fn dockerfile() -> (Vec<(String, String)>, String) {
    let text = read("deploy/Dockerfile");
    let mut out = vec![];
    let mut cur = String::new();
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with('#') || t.is_empty() {
            continue;
        }
        if let Some(head) = t.strip_suffix('\\') {
            cur.push_str(head);
            cur.push(' ');
            continue;
        }
        cur.push_str(t);
        let (ins, rest) = cur.split_once(' ').unwrap();
        out.push((ins.to_uppercase(), rest.trim().to_string()));
        cur.clear();
    }
    (out, text)
}

/// `docker ...` command lines of a text: the guide's code lines, or `#   docker ...` comments.
fn docker_lines(text: &str, prefix: &str) -> BTreeSet<String> {
    text.lines()
        .filter_map(|l| l.strip_prefix(prefix))
        .map(str::trim)
        .filter(|l| l.starts_with("docker build") || l.starts_with("docker run"))
        .map(String::from)
        .collect()
}

#[test]
fn dockerfile_matches_readme_and_its_command_serves_until_sigterm() {
    let (ins, text) = dockerfile();
    // The guide's "Operations and production" chapter (docs/operations.md) shows them.
    let guide = read("docs/operations.md");
    let section = &guide[guide
        .find("# Operations and production")
        .expect("docs/operations.md is the 'Operations and production' chapter")..];
    let from_docker = docker_lines(&text, "#");
    let from_readme = docker_lines(section, "");
    assert!(from_docker.iter().any(|l| l.starts_with("docker build")));
    assert!(from_docker.iter().any(|l| l.starts_with("docker run")));
    assert_eq!(
        from_docker, from_readme,
        "Dockerfile comment vs docs/operations.md"
    );
    for line in &from_docker {
        if line.starts_with("docker build") {
            // Run from the repository root, with this Dockerfile, on the root as context.
            assert!(
                line.contains("-f deploy/Dockerfile") && line.ends_with(" ."),
                "{line}"
            );
        }
    }

    let get = |name: &str| -> Vec<&String> {
        ins.iter()
            .filter(|(i, _)| i == name)
            .map(|(_, r)| r)
            .collect()
    };
    // The pinned toolchain.
    let toolchain = read("rust-toolchain.toml");
    let pinned = toolchain
        .lines()
        .find_map(|l| l.strip_prefix("channel = "))
        .unwrap()
        .trim_matches('"');
    assert!(
        get("ARG").contains(&&format!("RUST_VERSION={pinned}")),
        "ARG RUST_VERSION must be rust-toolchain.toml's {pinned}"
    );
    let froms = get("FROM");
    assert!(froms[0].starts_with("rust:${RUST_VERSION}"), "{froms:?}");
    assert!(froms.len() >= 2, "multi-stage");

    // cargo builds the ravel binary; it is copied to where the entrypoint runs it from.
    let runs = get("RUN")
        .into_iter()
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join("\n");
    let build = runs
        .split("&&")
        .chain(runs.split('\n'))
        .map(str::trim)
        .find_map(|c| c.find("cargo build").map(|i| &c[i..]))
        .expect("a cargo build step");
    assert!(
        build.contains("--release") && build.contains("--bin ravel"),
        "{build}"
    );
    assert!(runs.contains("cp target/release/ravel /usr/local/bin/ravel"));
    assert!(
        get("COPY")
            .contains(&&"--from=builder /usr/local/bin/ravel /usr/local/bin/ravel".to_string())
    );
    let entrypoint: Vec<String> = serde_json::from_str(get("ENTRYPOINT")[0]).expect("exec form");
    assert_eq!(entrypoint, ["/usr/local/bin/ravel"]);
    let cmd: Vec<String> = serde_json::from_str(get("CMD")[0]).expect("exec form");
    assert_eq!(get("STOPSIGNAL"), [&"SIGTERM".to_string()]);
    assert!(get("USER")[0].split(':').next().unwrap() != "0" && get("USER")[0] != "root");

    // The config path: shipped there, read from there, and what the guide's -v mounts over.
    let config_path = &cmd[cmd.iter().position(|a| a == "--config").unwrap() + 1];
    assert!(get("COPY").contains(&&format!("deploy/ravel.toml {config_path}")));
    for line in from_readme.iter().filter(|l| l.contains(" -v ")) {
        assert!(
            line.contains(&format!(":{config_path}")),
            "{line} mounts elsewhere"
        );
    }
    // The files the build copies are not excluded by .dockerignore.
    let ignore = read(".dockerignore");
    for needed in [
        "Cargo.toml",
        "Cargo.lock",
        "src/",
        "crates/",
        "deploy/ravel.toml",
    ] {
        for l in ignore
            .lines()
            .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        {
            assert!(
                !needed.starts_with(l.trim()),
                ".dockerignore excludes {needed}"
            );
        }
    }

    // The shipped config listens on the port the image exposes and the healthcheck asks.
    let shipped = ravel::config::from_file(&repo().join("deploy/ravel.toml")).unwrap();
    let port = shipped.http.addr.rsplit_once(':').unwrap().1;
    assert_eq!(get("EXPOSE"), [&port.to_string()]);
    let hc = get("HEALTHCHECK")[0];
    let probe: Vec<String> = serde_json::from_str(&hc[hc.find("CMD ").unwrap() + 4..]).unwrap();
    let script = probe.last().unwrap().clone();
    assert!(script.contains(&format!("/{port} ")) && script.contains("/readyz"));

    // The image's command, with the shipped config and no brokers (embedded broker and demo)
    // on a free port: the HEALTHCHECK command sees it ready, an unknown route fails it, and
    // SIGTERM stops it with exit 0.
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("serve.log");
    let args: Vec<String> = cmd
        .iter()
        .map(|a| {
            if a == config_path {
                repo().join("deploy/ravel.toml").display().to_string()
            } else {
                a.clone()
            }
        })
        .collect();
    let mut child = Proc(
        Command::new(env!("CARGO_BIN_EXE_ravel"))
            .args(&args)
            .env("RAVEL_HTTP__ADDR", "127.0.0.1:0")
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap(),
    );
    let mut line = String::new();
    BufReader::new(child.0.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .trim()
        .strip_prefix("listening on http://")
        .unwrap_or_else(|| {
            panic!(
                "first line {line:?}; log: {}",
                std::fs::read_to_string(&log).unwrap()
            )
        });
    let test_port = addr.rsplit_once(':').unwrap().1;
    let run_probe = |script: &str| -> bool {
        let script = script.replace(&format!("/{port} "), &format!("/{test_port} "));
        Command::new(&probe[0])
            .args(&probe[1..probe.len() - 1])
            .arg(script)
            .status()
            .unwrap()
            .success()
    };
    let start = Instant::now();
    while !run_probe(&script) {
        assert!(
            start.elapsed() < DEADLINE,
            "HEALTHCHECK never passed; log: {}",
            std::fs::read_to_string(&log).unwrap()
        );
        std::thread::sleep(Duration::from_millis(250));
    }
    assert!(!run_probe(&script.replace("/readyz", "/no-such-route")));
    let (status, _) = (
        client()
            .get(format!("http://{addr}/readyz"))
            .send()
            .unwrap()
            .status()
            .as_u16(),
        (),
    );
    assert_eq!(status, 200);
    assert!(
        Command::new("kill")
            .args(["-TERM", &child.0.id().to_string()])
            .status()
            .unwrap()
            .success()
    );
    let start = Instant::now();
    let status = loop {
        if let Some(st) = child.0.try_wait().unwrap() {
            break st;
        }
        assert!(start.elapsed() < DEADLINE, "no exit after SIGTERM");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(
        status.success(),
        "exit {status} after SIGTERM; log: {}",
        std::fs::read_to_string(&log).unwrap()
    );
}

/// The Debian package that holds `path` (`dpkg -S`), without its architecture. With merged
/// /usr the loader names /lib paths that dpkg knows under /usr/lib (or by the file the link
/// points to).
fn package_of(path: &str) -> String {
    let real = std::fs::canonicalize(path).unwrap();
    let candidates = [
        path.to_string(),
        format!("/usr{path}"),
        real.display().to_string(),
    ];
    for c in &candidates {
        let out = std::process::Command::new("dpkg")
            .args(["-S", c])
            .output()
            .unwrap();
        if out.status.success() {
            let text = String::from_utf8(out.stdout).unwrap();
            return text
                .lines()
                .next()
                .unwrap()
                .split(':')
                .next()
                .unwrap()
                .to_string();
        }
    }
    panic!("no package holds {candidates:?}");
}

#[test]
fn the_runtime_image_installs_every_library_the_binary_links() {
    // The shared libraries the binary asks for (its NEEDED entries, not their dependencies,
    // which apt pulls in), resolved to files by the loader and to packages by dpkg.
    let bin = env!("CARGO_BIN_EXE_ravel");
    let run = |cmd: &str, args: &[&str]| {
        let out = std::process::Command::new(cmd).args(args).output().unwrap();
        assert!(out.status.success(), "{cmd} {args:?}");
        String::from_utf8(out.stdout).unwrap()
    };
    let needed: Vec<String> = run("readelf", &["-d", bin])
        .lines()
        .filter(|l| l.contains("(NEEDED)"))
        .map(|l| l[l.find('[').unwrap() + 1..l.find(']').unwrap()].to_string())
        .collect();
    let ldd = run("ldd", &[bin]);
    let (ins, _) = dockerfile();
    let runtime_stage = ins
        .iter()
        .skip_while(|(i, r)| !(i == "FROM" && r.contains("AS runtime")))
        .collect::<Vec<_>>();
    assert!(!runtime_stage.is_empty(), "a stage named runtime");
    let installed: BTreeSet<&str> = runtime_stage
        .iter()
        .filter(|(i, _)| i == "RUN")
        .flat_map(|(_, r)| r.split("&&"))
        .filter_map(|c| c.trim().strip_prefix("apt-get install"))
        .flat_map(str::split_whitespace)
        .filter(|w| !w.starts_with('-'))
        .collect();
    // debian:bookworm-slim's essential set.
    let base = ["libc6", "libgcc-s1"];
    let mut packages = BTreeSet::new();
    for so in needed.iter().filter(|so| !so.starts_with("ld-linux")) {
        let path = ldd
            .lines()
            .find_map(|l| {
                let (name, rest) = l.trim().split_once(" => ")?;
                (name == so).then(|| rest.split_whitespace().next().unwrap().to_string())
            })
            .unwrap_or_else(|| panic!("ldd does not resolve {so}:\n{ldd}"));
        let pkg = package_of(&path);
        assert!(
            base.contains(&pkg.as_str()) || installed.contains(pkg.as_str()),
            "the binary links {so} ({path}, package {pkg}) but the runtime stage installs only {installed:?}"
        );
        packages.insert(pkg);
    }
    // TLS, SASL/SCRAM and OIDC (docs/operations.md, "TLS and SASL") need OpenSSL and libcurl in the image.
    for lib in ["libssl3", "libcurl4"] {
        assert!(packages.contains(lib), "{lib} not linked: {packages:?}");
    }
}

#[test]
fn compose_parses_references_existing_files_and_its_producer_runs() {
    let compose = yaml("deploy/compose.yaml");
    let deploy = repo().join("deploy");
    let services = compose["services"].as_mapping().unwrap();
    let svc = |name: &str| -> &Yaml {
        services
            .get(name)
            .unwrap_or_else(|| panic!("compose has no service {name}"))
    };
    let readme = read("docs/operations.md");
    let header = read("deploy/compose.yaml");
    let up = "docker compose -f deploy/compose.yaml up --build";
    assert!(readme.contains(up) && header.contains(up));
    assert!(readme.contains("kubectl apply -k deploy/k8s"));

    // Every host path mounted or built from exists (relative to deploy/).
    for (name, s_) in services {
        let name = s(name);
        if let Some(b) = s_.get("build") {
            let ctx = deploy.join(s(&b["context"]));
            assert!(ctx.join(s(&b["dockerfile"])).is_file(), "{name}: build");
        }
        for v in s_
            .get("volumes")
            .and_then(Yaml::as_sequence)
            .into_iter()
            .flatten()
        {
            let src = s(v).split(':').next().unwrap();
            if src.starts_with('.') || src.starts_with('/') {
                assert!(deploy.join(src).exists(), "{name}: {src} does not exist");
            } else {
                assert!(
                    compose["volumes"].get(src).is_some(),
                    "{name}: named volume {src} is not declared"
                );
            }
        }
    }

    // Kafka in KRaft mode from the official image.
    let kafka = svc("kafka");
    assert!(s(&kafka["image"]).starts_with("apache/kafka:"));
    assert!(s(&kafka["environment"]["KAFKA_PROCESS_ROLES"]).contains("controller"));
    assert!(
        kafka["environment"]
            .get("KAFKA_ZOOKEEPER_CONNECT")
            .is_none()
    );

    // Two replicas of the image, one group (the config both mount), on the brokers.
    let config = ravel::config::from_file(&deploy.join("ravel.toml")).unwrap();
    let stream = &config.streams[0];
    let replicas: Vec<&str> = services
        .iter()
        .filter(|(_, v)| {
            v.get("volumes")
                .and_then(Yaml::as_sequence)
                .is_some_and(|vs| vs.iter().any(|m| s(m).contains("/etc/ravel/ravel.toml")))
                && v.get("command").is_none()
        })
        .map(|(k, _)| s(k))
        .collect();
    assert_eq!(replicas, ["ravel-1", "ravel-2"]);
    for r in &replicas {
        assert_eq!(svc(r)["environment"]["RAVEL_KAFKA__BROKERS"], "kafka:9092");
        // Static group membership: the service's name, stable across restarts.
        assert_eq!(svc(r)["environment"]["RAVEL_KAFKA__INSTANCE_ID"], *r);
        assert!(svc(r)["build"].is_mapping());
        // SIGTERM, then the last checkpoint and the HTTP drain before SIGKILL.
        let grace: u64 = s(&svc(r)["stop_grace_period"])
            .strip_suffix('s')
            .unwrap()
            .parse()
            .unwrap();
        assert!(grace * 1000 > config.state.checkpoint_interval_ms + config.http.drain_timeout_ms);
    }
    // The topic job creates the stream's topic; Prometheus scrapes both replicas.
    let topics = s(&svc("kafka-topics")["command"][0]);
    assert!(topics.contains(&format!("--topic {} ", stream.topic())));
    let prom = yaml("deploy/prometheus/prometheus.yml");
    let targets: BTreeSet<&str> = prom["scrape_configs"][0]["static_configs"][0]["targets"]
        .as_sequence()
        .unwrap()
        .iter()
        .map(s)
        .collect();
    let port = config.http.addr.rsplit_once(':').unwrap().1;
    let want: BTreeSet<String> = replicas.iter().map(|r| format!("{r}:{port}")).collect();
    assert_eq!(
        targets,
        want.iter().map(String::as_str).collect::<BTreeSet<_>>()
    );
    assert!(
        svc("grafana")["image"]
            .as_str()
            .unwrap()
            .starts_with("grafana/grafana")
    );

    // The producer's `ravel produce` line, run for real against a broker (its loop variable
    // set to 1): it sends the stream's p to the stream's topic.
    let script = s(&svc("producer")["command"][0]).replace("\\\n", " ");
    let produce = script
        .lines()
        .find_map(|l| l.trim().strip_prefix("ravel produce"))
        .expect("the producer runs ravel produce");
    let produce = produce.split("||").next().unwrap().replace("$$i", "1");
    let args: Vec<&str> = produce.split_whitespace().collect();
    let arg = |k: &str| args[args.iter().position(|a| *a == k).unwrap() + 1];
    assert_eq!(arg("--topic"), stream.topic());
    assert!(arg("--synthetic").contains(&format!("p={}", stream.p())));
    let broker = EmbeddedBroker::start(1).unwrap();
    broker.create_topic(&stream.topic(), 6).unwrap();
    let args: Vec<&str> = args
        .iter()
        .map(|a| {
            if *a == "kafka:9092" {
                broker.bootstrap_servers()
            } else {
                a
            }
        })
        .collect();
    let mut all = vec!["produce"];
    all.extend(args);
    ravel(&all);
    let rows: usize = arg("--synthetic")
        .split(',')
        .find_map(|kv| kv.strip_prefix("n="))
        .unwrap()
        .parse()
        .unwrap();
    let batch: usize = arg("--batch-rows").parse().unwrap();
    let messages = rows.div_ceil(batch);
    assert_eq!(
        read_topic(broker.bootstrap_servers(), &stream.topic(), messages).len(),
        messages
    );
}

/// The configs under deploy/ load in the service and keep their state in the Kafka state
/// store, whose topic compose's topic job creates compacted.
#[test]
fn deploy_configs_are_valid_for_todays_service() {
    let job = yaml("deploy/compose.yaml")["services"]["kafka-topics"]["command"][0]
        .as_str()
        .unwrap()
        .to_string();
    for rel in ["deploy/ravel.toml", "deploy/k8s/ravel.toml"] {
        let c =
            ravel::config::from_file(&repo().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e:#}"));
        assert!(c.http.addr.starts_with("0.0.0.0:"), "{rel}");
        let topic = c
            .state
            .kafka_topic(&c.kafka.group_id)
            .unwrap_or_else(|| panic!("{rel}: the kafka state store"));
        assert!(
            job.lines().any(|l| l.contains(&format!("--topic {topic} "))
                && l.contains("cleanup.policy=compact")),
            "{rel}: compose does not create {topic} compacted"
        );
    }
    for rel in [
        "deploy/grafana/provisioning/datasources/prometheus.yml",
        "deploy/grafana/provisioning/dashboards/ravel.yml",
    ] {
        let v = yaml(rel);
        assert_eq!(v["apiVersion"], 1, "{rel}");
    }
}
