//! The user guide (`docs/`, an mdBook) held to the repository: `SUMMARY.md` links every
//! chapter and only chapters that exist, every relative link of the guide and the README
//! reaches a file (and a heading, when it names one), the README's sections moved into the
//! guide are there under their headings, and the configuration reference documents every key
//! of the configuration types with its default and its bounds, the bounds tried against the
//! loader at and just past each end.
//!
//! (Building the book needs `mdbook`, which CI does not install: these checks are the
//! structure the build relies on. `mdbook build docs` renders it.)

use ravel::config::{Config, ServeArgs};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(rel: &str) -> String {
    std::fs::read_to_string(repo().join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

/// The targets of the Markdown links `[text](target)` of a text, outside code blocks.
fn links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut fence = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fence = !fence;
        }
        if fence {
            continue;
        }
        let mut rest = line;
        while let Some(i) = rest.find("](") {
            let after = &rest[i + 2..];
            let Some(end) = after.find(')') else { break };
            out.push(after[..end].to_string());
            rest = &after[end..];
        }
    }
    out
}

/// The anchors of a Markdown file's headings, as GitHub and mdBook make them: lower case,
/// punctuation dropped, spaces as '-'.
fn anchors(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut fence = false;
    for line in text.lines() {
        if line.starts_with("```") {
            fence = !fence;
        }
        if fence || !line.starts_with('#') {
            continue;
        }
        let title = line.trim_start_matches('#').trim();
        let anchor: String = title
            .to_lowercase()
            .chars()
            .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
            .map(|c| if c == ' ' { '-' } else { c })
            .collect();
        out.insert(anchor);
    }
    out
}

/// The chapters on disk: every `.md` file of `docs/` but `SUMMARY.md`.
fn chapters_on_disk() -> BTreeSet<String> {
    std::fs::read_dir(repo().join("docs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".md") && n != "SUMMARY.md")
        .collect()
}

#[test]
fn summary_links_every_chapter_and_only_chapters_that_exist() {
    let summary = read("docs/SUMMARY.md");
    let linked: Vec<String> = links(&summary);
    assert!(!linked.is_empty(), "docs/SUMMARY.md links no chapter");
    let mut seen = BTreeSet::new();
    for target in &linked {
        assert!(
            !target.contains('#') && !target.contains("://") && target.ends_with(".md"),
            "docs/SUMMARY.md: {target} is not a chapter file"
        );
        assert!(
            repo().join("docs").join(target).is_file(),
            "docs/SUMMARY.md links {target}, which does not exist"
        );
        assert!(
            seen.insert(target.clone()),
            "docs/SUMMARY.md links {target} twice"
        );
    }
    let on_disk = chapters_on_disk();
    let unlinked: Vec<&String> = on_disk.difference(&seen).collect();
    assert!(
        unlinked.is_empty(),
        "chapters not in docs/SUMMARY.md (the book would not show them): {unlinked:?}"
    );
    // book.toml reads the chapters from docs/ itself.
    let book = read("docs/book.toml");
    assert!(book.contains("src = \".\""), "{book}");
}

#[test]
fn every_relative_link_of_the_guide_and_the_readme_reaches_its_file_and_heading() {
    let mut files: Vec<String> = chapters_on_disk()
        .into_iter()
        .map(|c| format!("docs/{c}"))
        .collect();
    files.extend(["README.md", "CHANGELOG.md", "docs/SUMMARY.md"].map(String::from));
    let mut broken = Vec::new();
    for file in &files {
        let text = read(file);
        let dir = Path::new(file).parent().unwrap();
        for target in links(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (path, anchor) = match target.split_once('#') {
                Some((p, a)) => (p, Some(a)),
                None => (target.as_str(), None),
            };
            let resolved = if path.is_empty() {
                PathBuf::from(file)
            } else {
                dir.join(path)
            };
            let full = repo().join(&resolved);
            if !full.exists() {
                broken.push(format!("{file}: {target} (no {})", resolved.display()));
                continue;
            }
            if let Some(a) = anchor
                && !anchors(&std::fs::read_to_string(&full).unwrap()).contains(a)
            {
                broken.push(format!("{file}: {target} (no heading #{a})"));
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

/// Every section of the README before the guide (commit c606bf0), and the chapter that holds
/// it now: nothing was dropped in the move.
#[test]
fn the_readmes_former_sections_are_in_the_guide() {
    let sections = [
        ("README.md", "## Two commands"),
        ("docs/introduction.md", "## Two commands"),
        ("docs/concepts.md", "## Running against Kafka"),
        ("docs/configuration.md", "# Configuration reference"),
        ("docs/streams.md", "## Message formats"),
        ("docs/streams.md", "## Your own events: fields to features"),
        (
            "docs/streams.md",
            "## Schema'd topics: Avro, Protobuf and JSON Schema",
        ),
        ("docs/streams.md", "## Bad messages"),
        ("docs/streams.md", "## Topics"),
        ("docs/concepts.md", "## Restarts and offsets"),
        ("docs/concepts.md", "## Feature streams"),
        ("docs/console.md", "# Web console"),
        ("docs/http-api.md", "## Routes"),
        ("docs/http-api.md", "## Access and TLS"),
        ("docs/operations.md", "## Metrics"),
        ("docs/streams.md", "## Quality"),
        ("docs/streams.md", "## Scoring events to a topic"),
        ("docs/concepts.md", "## Freshness"),
        ("docs/operations.md", "# Operations and production"),
        ("docs/operations.md", "## The image"),
        ("docs/operations.md", "## Compose"),
        ("docs/operations.md", "## Kubernetes"),
        ("docs/scaling.md", "# Scaling and state"),
        ("docs/operations.md", "## Preflight: `ravel check`"),
        ("docs/operations.md", "## TLS and SASL"),
        ("docs/cli.md", "## `ravel fit`"),
        ("docs/cli.md", "## Memory limits"),
        ("docs/methods.md", "## The problem solved"),
        ("docs/methods.md", "## Estimators"),
        ("docs/cli.md", "## Output"),
        ("docs/methods.md", "## Choosing k"),
        ("docs/cli.md", "## Feature streams: `ravel select`"),
        ("docs/library.md", "# Use as a library"),
        ("docs/contributing.md", "## Adding a solver"),
        ("docs/contributing.md", "## Layout"),
        ("docs/benchmarks.md", "# Benchmarks"),
        ("docs/benchmarks.md", "## How JSON is decoded"),
        ("CHANGELOG.md", "# Changelog"),
    ];
    for (file, heading) in sections {
        let text = read(file);
        assert!(
            text.lines().any(|l| l == heading),
            "{file} has no heading {heading:?}"
        );
    }
    // The breaking changes left the README for the changelog.
    let changelog = read("CHANGELOG.md");
    assert!(changelog.contains("| `ravel broker --brokers N` | `ravel broker --broker-count N` |"));
    assert!(!read("README.md").contains("| before | now |"));
}

/// A key's value as the configuration reference writes a default: TOML, in backticks.
fn literal(v: &toml::Value) -> String {
    format!("`{v}`")
}

/// `table` flattened to dotted keys (`http.addr`); arrays of tables by their section's name
/// (`streams.cv.folds`). The tables at `opaque` are one key each (`kafka.options`).
fn flatten(
    prefix: &str,
    v: &toml::Value,
    opaque: &[&str],
    out: &mut BTreeMap<String, toml::Value>,
) {
    match v {
        toml::Value::Table(t) if !opaque.contains(&prefix) => {
            for (k, v) in t {
                let key = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                flatten(&key, v, opaque, out);
            }
        }
        toml::Value::Array(a)
            if !opaque.contains(&prefix) && a.iter().all(|e| e.is_table()) && !a.is_empty() =>
        {
            for e in a {
                flatten(prefix, e, opaque, out);
            }
        }
        _ => {
            out.entry(prefix.to_string()).or_insert_with(|| v.clone());
        }
    }
}

const OPAQUE: [&str; 4] = [
    "kafka.options",
    "streams.quality.model",
    "streams.quality.floor",
    "scorers.model",
];

/// Every key of the configuration types: a configuration that sets every optional key
/// (three streams for the three kinds of alpha with parameters), read by the types and
/// written back.
fn every_key() -> BTreeMap<String, toml::Value> {
    let full = r#"
[limits]
max_memory = "8GiB"
[kafka.options]
"security.protocol" = "SSL"
[demo.synthetic]
n = 10
[schema_registry]
url = "http://registry:8081"
ca_file = "ca.pem"
cert_file = "cert.pem"
key_file = "key.pem"
[[streams]]
name = "a"
topic = "t.a"
features = ["x", "y"]
target = "z"
missing = "indicator"
format = "avro"
avro_schema_file = "a.avsc"
task = "regression"
alpha = { kind = "adaptive" }
history = { interval_ms = 1000, length = 10, k = 2 }
cv = { folds = 5, fold_by = "key" }
quality = { enabled = true, every_rows = 10, window_rows = 10, decay_rows = 10, model = { method = "ols" }, floor = { r2 = 0.5 } }
windows = { bucket = "1m", keep = "7d" }
[[streams]]
name = "b"
features = 2
alpha = { kind = "fixed", alpha = 0.1 }
[[streams]]
name = "c"
features = 2
alpha = { kind = "floor", alpha_min = 0.1 }
[[feature_streams]]
name = "f"
topic = "t.f"
n = 10
loss = "logistic"
s = 2
workers = 1
eta = 0.5
[[scorers]]
name = "sc"
stream = "a"
topic = "in"
output_topic = "out"
model = { method = "ols" }
refresh_ms = 1000
group_id = "g"
interval = 0.95
"#;
    let cfg: Config = toml::from_str(full).expect("the full example reads");
    let mut keys = BTreeMap::new();
    flatten(
        "",
        &toml::Value::try_from(&cfg).unwrap(),
        &OPAQUE,
        &mut keys,
    );
    keys
}

/// The keys that take a default, with it: the defaults of the types, and the keys a minimal
/// stream, feature stream and scorer are given by serde (less those the example sets).
fn defaults() -> BTreeMap<String, toml::Value> {
    let mut out = BTreeMap::new();
    let base = Config {
        streams: vec![],
        ..Config::default()
    };
    flatten(
        "",
        &toml::Value::try_from(&base).unwrap(),
        &OPAQUE,
        &mut out,
    );
    // The lists (`streams = []` here) are no keys: their tables' keys follow.
    for list in ["streams", "feature_streams", "scorers"] {
        out.remove(list);
    }
    let minimal = r#"
[[streams]]
name = "a"
features = 2
alpha = { kind = "adaptive" }
cv = { folds = 5 }
quality = {}
[[feature_streams]]
name = "f"
n = 10
s = 2
[[scorers]]
name = "sc"
stream = "a"
topic = "in"
output_topic = "out"
"#;
    let cfg: Config = toml::from_str(minimal).unwrap();
    let mut lists = BTreeMap::new();
    let mut v = toml::Value::try_from(&cfg).unwrap();
    let t = v.as_table_mut().unwrap();
    for list in ["streams", "feature_streams", "scorers"] {
        lists.insert(list, t.remove(list).unwrap());
    }
    let given: BTreeSet<&str> = [
        "streams.name",
        "streams.features",
        "streams.alpha.kind",
        "streams.cv.folds",
        "feature_streams.name",
        "feature_streams.n",
        "feature_streams.s",
        "scorers.name",
        "scorers.stream",
        "scorers.topic",
        "scorers.output_topic",
    ]
    .into();
    for (list, v) in lists {
        let mut keys = BTreeMap::new();
        flatten(list, &v, &OPAQUE, &mut keys);
        for (k, v) in keys {
            if !given.contains(k.as_str()) {
                out.insert(k, v);
            }
        }
    }
    out
}

/// The rows of the configuration reference: key -> (default, bounds).
fn reference_rows() -> BTreeMap<String, (String, String)> {
    let text = read("docs/configuration.md");
    let mut rows = BTreeMap::new();
    for line in text.lines().filter(|l| l.starts_with("| `")) {
        let cells: Vec<&str> = line.trim_matches('|').split(" | ").map(str::trim).collect();
        assert_eq!(
            cells.len(),
            4,
            "docs/configuration.md: a row is key | default | bounds | meaning: {line}"
        );
        let key = cells[0].trim_matches('`').to_string();
        assert!(
            rows.insert(key.clone(), (cells[1].to_string(), cells[2].to_string()))
                .is_none(),
            "docs/configuration.md documents {key} twice"
        );
    }
    rows
}

#[test]
fn configuration_reference_documents_every_key_with_its_default_and_bounds() {
    let rows = reference_rows();
    let keys = every_key();
    let defaults = defaults();
    let mut problems = Vec::new();
    for key in keys.keys() {
        match rows.get(key) {
            None => problems.push(format!("{key}: no row")),
            Some((default, bounds)) => {
                if default.is_empty() || bounds.is_empty() {
                    problems.push(format!("{key}: default or bounds left empty"));
                }
                if let Some(d) = defaults.get(key)
                    && !default.contains(&literal(d))
                {
                    problems.push(format!(
                        "{key}: the default is {}, the row says {default}",
                        literal(d)
                    ));
                }
            }
        }
    }
    for key in defaults.keys() {
        if !keys.contains_key(key) {
            problems.push(format!("{key}: a default the full example does not set"));
        }
    }
    // No row for a key the types do not have (a row may name a table whose keys follow).
    for key in rows.keys() {
        if !keys.contains_key(key) && !keys.keys().any(|k| k.starts_with(&format!("{key}."))) {
            problems.push(format!(
                "{key}: documented, but not a key of the configuration"
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "docs/configuration.md:\n{}",
        problems.join("\n")
    );
}

/// A numeric bound as the reference writes it: `lo..=hi` or `>= lo`.
fn bounds(cell: &str) -> Option<(i128, Option<i128>)> {
    let inner = cell.strip_prefix('`')?.strip_suffix('`')?;
    if let Some(lo) = inner.strip_prefix(">= ") {
        return Some((lo.parse().ok()?, None));
    }
    let (lo, hi) = inner.split_once("..=")?;
    Some((lo.parse().ok()?, Some(hi.parse().ok()?)))
}

/// Loads a configuration with `key` set to `value` (a stream `s` declared; the demo runs
/// only for the demo's keys), as `ravel serve` would.
fn load_with(key: &str, value: i128) -> anyhow::Result<Config> {
    let dir = tempfile::tempdir().unwrap();
    let v = value.to_string();
    let mut root = String::new();
    let mut stream = BTreeMap::from([("name", "\"s\"".to_string()), ("features", "3".into())]);
    let mut feature: Option<BTreeMap<&str, String>> = None;
    let mut scorer: Option<BTreeMap<&str, String>> = None;
    if let Some(k) = key.strip_prefix("streams.") {
        stream.insert(k, v);
    } else if let Some(k) = key.strip_prefix("feature_streams.") {
        let mut f = BTreeMap::from([
            ("name", "\"f\"".to_string()),
            ("n", "10".into()),
            ("s", "1".into()),
        ]);
        f.insert(k, v);
        feature = Some(f);
    } else if let Some(k) = key.strip_prefix("scorers.") {
        let mut sc = BTreeMap::from([
            ("name", "\"sc\"".to_string()),
            ("stream", "\"s\"".into()),
            ("topic", "\"in\"".into()),
            ("output_topic", "\"out\"".into()),
        ]);
        sc.insert(k, v);
        scorer = Some(sc);
    } else {
        root = format!("{key} = {v}\n");
    }
    let table = |name: &str, m: &BTreeMap<&str, String>| {
        let mut s = format!("[[{name}]]\n");
        for (k, v) in m {
            s.push_str(&format!("{k} = {v}\n"));
        }
        s
    };
    let mut text = root + &table("streams", &stream);
    if let Some(f) = &feature {
        text += &table("feature_streams", f);
    }
    if let Some(sc) = &scorer {
        text += &table("scorers", sc);
    }
    let path = dir.path().join("ravel.toml");
    std::fs::write(&path, &text).unwrap();
    let args = ServeArgs {
        config: Some(path),
        brokers: (!key.starts_with("demo.")).then(|| "localhost:9092".to_string()),
        ..ServeArgs::default()
    };
    Config::load_with_env(&args, Some(BTreeMap::new()))
        .map_err(|e| anyhow::anyhow!("{text}: {e:#}"))
}

#[test]
fn configuration_reference_bounds_are_the_loaders() {
    let mut probed = 0;
    let mut problems = Vec::new();
    for (key, (_, cell)) in reference_rows() {
        let Some((lo, hi)) = bounds(&cell) else {
            continue;
        };
        probed += 1;
        let mut try_value = |v: i128, ok: bool| match (load_with(&key, v), ok) {
            (Ok(_), false) => problems.push(format!("{key} = {v} is outside {cell} but loads")),
            (Err(e), true) => problems.push(format!("{key} = {v} is inside {cell} but: {e}")),
            _ => {}
        };
        try_value(lo, true);
        try_value(lo - 1, false);
        if let Some(hi) = hi {
            try_value(hi, true);
            try_value(hi + 1, false);
        }
    }
    assert!(probed >= 25, "only {probed} bounds probed");
    assert!(
        problems.is_empty(),
        "docs/configuration.md:\n{}",
        problems.join("\n")
    );
}
