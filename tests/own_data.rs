//! Issue 35: the README's "Your own data in five minutes" run as a user runs it. Its code
//! blocks are read from README.md and run as written, in order, in a fresh directory, only
//! the ports changed (9092 and 8080, textually, to free ones): `ravel broker --port`, the
//! `sales.toml` it shows, `ravel serve --config sales.toml`, its Python producer (unseeded,
//! with target/pyenv's confluent-kafka) and its curl commands (with curl, or the same requests
//! with the test's HTTP client where curl is not installed). Then the README's claims: the
//! stream holds the 5,000 events, ready without any topic made by hand, OLS's coefficients
//! are the ones the prose states (within what the noise allows, and numpy's OLS on the same
//! events read back from the topic), the lasso with 5 nonzeros keeps the five features the
//! prose names, the prediction of its event is a number (the producer's own value of it), and
//! the summary it shows (`"inference": true`) is true to the service's answer.

use crate::common::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

const SECTION: &str = "## Your own data in five minutes";

/// The events the producer sends (its `range(5000)`).
const EVENTS: u64 = 5000;

/// A bound on the standard error of each OLS coefficient the README states. With n = 5000
/// events the residual standard deviation is sigma ~ 10.9 (sigma^2 ~ 0.95 * 100 + 0.05 *
/// (100 + 0.81 * 444) = 118: the noise, and on the 5% of events without an age the spread of
/// -0.9 * age about its mean, which the indicator cannot take; ages 18..=90 have variance
/// (73^2 - 1) / 12 = 444), so the standard errors are about:
/// - `home.sqft`: sigma / (sqrt(n) sd(sqft)), sd = 2500 / sqrt(12) = 722: 2.14e-4;
/// - `user.age`: 10 / (sqrt(4750) sqrt(444)) = 6.9e-3 on the rows with an age (7.5e-3 with
///   the pooled sigma, as numpy computes it);
/// - `region=<level>`: a difference of two means of ~1250 events: sigma sqrt(2 / 1250) = 0.44;
/// - `user.age=missing`: the mean of -0.9 * age + noise over the ~250 events without an age,
///   sqrt((0.81 * 444 + 100) / 250) = 1.36.
///
/// Over 300 seeded runs of the producer (numpy, then scikit-learn's lasso_path) these
/// estimates spread by 2.1e-4, 6.9e-3, 0.41-0.44 and 1.45, and the lasso with 5 nonzeros kept
/// the README's five every time. The bounds below are these, rounded up by about 10%; a
/// claim is checked within `SES` of them, which a run misses by chance with probability
/// below 2e-9 per coefficient; numpy's standard errors on the run's own events are checked
/// to be below them.
const STANDARD_ERRORS: [(&str, f64); 6] = [
    ("home.sqft", 2.4e-4),
    ("user.age", 8.5e-3),
    ("region=south", 0.5),
    ("region=east", 0.5),
    ("region=west", 0.5),
    ("user.age=missing", 1.6),
];
const SES: f64 = 6.0;

/// The README's phrase for the lasso's support, and the columns it names.
const LASSO_CLAIM: &str =
    "the lasso with 5 nonzeros keeps sqft, age, its indicator, south and east";
const LASSO_SUPPORT: [&str; 5] = [
    "home.sqft",
    "user.age",
    "user.age=missing",
    "region=south",
    "region=east",
];

/// The design's columns as the stream names them, in the order `design_row` writes them.
const COLUMNS: [&str; 14] = [
    "home.sqft",
    "user.age",
    "user.age=missing",
    "region=south",
    "region=east",
    "region=west",
    "tags#0",
    "tags#1",
    "tags#2",
    "tags#3",
    "tags#4",
    "tags#5",
    "tags#6",
    "tags#7",
];

/// numpy's OLS with an intercept on a CSV of the design (header, then x..., y; the empty
/// buckets of the tags are columns of zeros, which the minimum-norm solution gives 0), with
/// the standard errors of its first six coefficients (the features before the tags).
const NUMPY_OLS: &str = r#"
import json, sys
import numpy as np
d = np.loadtxt(sys.argv[1], delimiter=",", skiprows=1)
X, y = d[:, :-1], d[:, -1]
A = np.column_stack([np.ones(len(y)), X])
beta, _, rank, _ = np.linalg.lstsq(A, y, rcond=None)
r = y - A @ beta
s2 = r @ r / (len(y) - rank)
se = np.sqrt(s2 * np.diag(np.linalg.pinv(A.T @ A)))
print(json.dumps({"coef": beta[1:7].tolist(), "se": se[1:7].tolist()}))
"#;

/// A documented curl command as a request: (method, URL, body), as curl reads its arguments
/// (`-d` makes a POST unless `-X` says otherwise).
fn curl_request(cmd: &str) -> (String, String, Option<String>) {
    let words = words(cmd);
    assert_eq!(words[0], "curl", "{cmd}");
    let (mut method, mut url, mut body) = (None, None, None);
    let mut it = words[1..].iter();
    while let Some(w) = it.next() {
        match w.as_str() {
            "-s" => {}
            "-H" => {
                let h = it.next().unwrap();
                assert_eq!(h.to_lowercase(), "content-type: application/json", "{cmd}");
            }
            "-d" => body = it.next().cloned(),
            "-X" => method = it.next().cloned(),
            x if x.starts_with("-X") => method = Some(x[2..].to_string()),
            x if x.starts_with('-') => panic!("option {x} of {cmd} not known to this test"),
            x => url = Some(x.to_string()),
        }
    }
    let url = url.unwrap_or_else(|| panic!("no URL in {cmd}"));
    let url = if url.starts_with("http") {
        url
    } else {
        format!("http://{url}")
    };
    let method = method.unwrap_or_else(|| if body.is_some() { "POST" } else { "GET" }.into());
    (method, url, body)
}

/// A command line's words as a POSIX shell splits them, for the quoting documented commands
/// use: '...' and "..." (no expansions), a word-initial `#` starting a comment.
fn words(cmd: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word: Option<String> = None;
    let mut chars = cmd.chars();
    while let Some(c) = chars.next() {
        match c {
            ' ' | '\t' => out.extend(word.take()),
            '#' if word.is_none() => break,
            '\'' | '"' => {
                let w = word.get_or_insert_with(String::new);
                for q in chars.by_ref() {
                    if q == c {
                        break;
                    }
                    assert!(c == '\'' || !"$`\\".contains(q), "expansion in {cmd}");
                    w.push(q);
                }
            }
            _ => {
                assert!(!"$`\\".contains(c), "expansion in {cmd}");
                word.get_or_insert_with(String::new).push(c)
            }
        }
    }
    out.extend(word);
    out
}

/// Runs a documented curl command in `dir`: with curl when it is installed, else the same
/// request with the test's HTTP client. Returns what curl prints (`-s`: the body).
fn run_curl(dir: &Path, cmd: &str, have_curl: bool) -> String {
    if have_curl {
        let (ok, out, err) = shell(dir, cmd, &[]);
        assert!(ok, "{cmd}: {err}");
        return out;
    }
    let (method, url, body) = curl_request(cmd);
    let mut req = client().request(method.parse().unwrap(), url);
    if let Some(b) = body {
        req = req.header("content-type", "application/json").body(b);
    }
    req.send()
        .unwrap_or_else(|e| panic!("{cmd}: {e}"))
        .text()
        .unwrap()
}

/// The number a prose claim states after a feature's name: "`home.sqft` 0.15," -> 0.15.
fn claims(prose: &str) -> BTreeMap<String, f64> {
    let parts: Vec<&str> = prose.split('`').collect();
    let mut out = BTreeMap::new();
    for i in (1..parts.len()).step_by(2) {
        let after = parts.get(i + 1).copied().unwrap_or("");
        let first = after.split_whitespace().next().unwrap_or("");
        if let Ok(v) = first.trim_end_matches([',', ';', ')']).parse::<f64>() {
            out.insert(parts[i].to_string(), v);
        }
    }
    out
}

/// An event of the producer as the stream's design row (`COLUMNS`) and its target: a missing
/// age is 0 with the indicator 1; regions against north; each tag +-1 in its bucket (the
/// hasher is scikit-learn's, checked against it in tests/fields.rs).
fn design_row(e: &Value) -> (Vec<f64>, f64) {
    let age = e["user"]["age"].as_f64();
    let region = e["region"].as_str().unwrap();
    let mut row = vec![
        e["home"]["sqft"].as_f64().unwrap(),
        age.unwrap_or(0.0),
        f64::from(age.is_none()),
        f64::from(region == "south"),
        f64::from(region == "east"),
        f64::from(region == "west"),
    ];
    let mut tags = [0.0; 8];
    for t in e["tags"].as_array().unwrap() {
        let (b, sign) = ravel_core::fields::bucket(t.as_str().unwrap(), 8);
        tags[b] += sign;
    }
    row.extend(tags);
    (row, e["price"].as_f64().unwrap())
}

fn coefficients(model: &Value) -> BTreeMap<String, f64> {
    model["coefficients"]
        .as_array()
        .unwrap_or_else(|| panic!("not a model: {model}"))
        .iter()
        .map(|c| {
            (
                c["feature"].as_str().unwrap().to_string(),
                c["value"].as_f64().unwrap(),
            )
        })
        .collect()
}

fn json(what: &str, text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("{what}: {e}: {text}"))
}

#[test]
fn the_readmes_own_data_section_runs_as_written_and_its_claims_hold() {
    let python = pyenv_python(
        "import confluent_kafka, numpy",
        "confluent-kafka and numpy (pip install confluent-kafka numpy)",
    );
    let have_curl = shell(Path::new("."), "curl --version", &[]).0;
    let dir = tempfile::tempdir().unwrap();
    let (broker_port, http_port) = (free_port().to_string(), free_port().to_string());
    let section = doc_section("README.md", SECTION)
        .replace("9092", &broker_port)
        .replace("8080", &http_port);
    let brokers = format!("127.0.0.1:{broker_port}");
    let base = format!("http://127.0.0.1:{http_port}");
    let serve_log = dir.path().join("serve.log");

    // The file the serve command reads the configuration from, which the TOML block is.
    let config_file = section
        .split_whitespace()
        .skip_while(|w| *w != "--config")
        .nth(1)
        .expect("the section runs `ravel serve --config FILE`")
        .to_string();

    // Every block in the order of the README.
    let mut procs = Vec::new();
    let mut answers: Vec<(String, String)> = Vec::new();
    let mut ran = Vec::new();
    let mut excerpts: Vec<(String, Value)> = Vec::new();
    for (lang, block) in code_blocks(&section) {
        match lang.as_str() {
            "toml" => {
                std::fs::write(dir.path().join(&config_file), &block).unwrap();
                ran.push("toml");
            }
            "python" => {
                assert!(
                    block.contains(&format!("range({EVENTS})")),
                    "the producer sends {EVENTS} events: {block}"
                );
                std::fs::write(dir.path().join("producer.py"), &block).unwrap();
                let out = std::process::Command::new(&python)
                    .arg("producer.py")
                    .current_dir(dir.path())
                    .output()
                    .unwrap();
                assert!(
                    out.status.success(),
                    "the README's producer failed: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
                ran.push("python");
            }
            "sh" => {
                for cmd in shell_commands(&block) {
                    if cmd.starts_with("ravel broker") {
                        let (p, line) = Proc::shell(
                            "ravel broker",
                            dir.path(),
                            &cmd,
                            &[],
                            &dir.path().join("broker.log"),
                        );
                        // `# prints 127.0.0.1:9092, ...`: what it prints.
                        let said = cmd
                            .split("# prints ")
                            .nth(1)
                            .and_then(|c| c.split([',', ' ']).next())
                            .expect("the broker's comment says what it prints");
                        assert_eq!(line, said, "{cmd}");
                        assert_eq!(line, brokers);
                        procs.push(p);
                        ran.push("ravel broker");
                    } else if cmd.starts_with("ravel serve") {
                        let (p, line) =
                            Proc::shell("ravel serve", dir.path(), &cmd, &[], &serve_log);
                        assert_eq!(line, format!("listening on {base}"), "{cmd}");
                        procs.push(p);
                        ran.push("ravel serve");
                    } else if cmd.starts_with("curl") {
                        let (method, url, _) = curl_request(&cmd);
                        let out = if method == "GET" && url.ends_with("/v1/streams/sales") {
                            // The summary, asked for until the stream holds every event (as
                            // a user repeats it while the events are read).
                            let mut last = String::new();
                            wait_for("n = 5000 in /v1/streams/sales", &serve_log, || {
                                last = run_curl(dir.path(), &cmd, have_curl);
                                let v: Value = serde_json::from_str(&last).ok()?;
                                (v["n"].as_u64() == Some(EVENTS)).then_some(())
                            });
                            last
                        } else {
                            run_curl(dir.path(), &cmd, have_curl)
                        };
                        answers.push((cmd, out));
                        ran.push("curl");
                    } else {
                        panic!("a command this test does not know how to run: {cmd}");
                    }
                }
            }
            "json" => {
                // An excerpt of the answer to the request before it, checked below.
                let shown: Value = serde_json::from_str(&block)
                    .unwrap_or_else(|e| panic!("the README's excerpt is not JSON ({e}): {block}"));
                let (cmd, _) = answers.last().expect("an excerpt follows a request");
                excerpts.push((cmd.clone(), shown));
                ran.push("json");
            }
            other => panic!("a {other:?} block in the README's section: {block}"),
        }
    }
    assert_eq!(
        ran,
        [
            "ravel broker",
            "toml",
            "ravel serve",
            "python",
            "curl",
            "curl",
            "curl",
            "curl",
            "curl",
            "json"
        ],
        "the section's steps"
    );

    // "`ravel serve` creates the dead-letter topic `sales.dlq` itself": ready, no topic made
    // by hand.
    let ready = client().get(format!("{base}/readyz")).send().unwrap();
    assert_eq!(ready.status().as_u16(), 200, "{}", ready.text().unwrap());
    assert!(topic_partitions(&brokers, "sales.dlq").is_some());

    // Each answer, by its request.
    let mut models = BTreeMap::new();
    let mut prediction = None;
    for (cmd, out) in &answers {
        let (method, url, body) = curl_request(cmd);
        let v = json(cmd, out);
        assert!(v.get("error").is_none(), "{cmd}: {v}");
        match (method.as_str(), url.rsplit('/').next().unwrap()) {
            ("GET", "sales") => assert_eq!(v["n"], EVENTS, "{v}"),
            ("POST", "model") => {
                let body = json(cmd, body.as_deref().unwrap());
                let key = format!("{} {} {}", body["method"], body["k"], body["inference"]);
                assert!(models.insert(key, v).is_none(), "{cmd} twice");
            }
            ("POST", "predict") => prediction = Some(v),
            _ => panic!("a request this test does not check: {cmd}"),
        }
    }
    let (ols, lasso) = (&models[r#""ols" null null"#], &models[r#""lasso" 5 null"#]);
    assert_eq!(ols["n"], EVENTS);
    assert_eq!(lasso["n"], EVENTS);

    // OLS against the prose: every number it states, within SES standard errors.
    let flat = section.split_whitespace().collect::<Vec<_>>().join(" ");
    let prose = &flat[flat
        .find("OLS gives")
        .expect("the section says what OLS gives")..];
    let prose = &prose[..prose.find(LASSO_CLAIM).expect(LASSO_CLAIM)];
    let stated = claims(prose);
    let ses: BTreeMap<&str, f64> = STANDARD_ERRORS.into_iter().collect();
    assert_eq!(
        stated.keys().map(String::as_str).collect::<Vec<_>>(),
        ses.keys().copied().collect::<Vec<_>>(),
        "the coefficients the README states (this test knows their standard errors)"
    );
    let got = coefficients(ols);
    for (name, claim) in &stated {
        let v = got[name];
        let tol = SES * ses[name.as_str()];
        assert!(
            (v - claim).abs() <= tol,
            "OLS {name} = {v}, the README says {claim} (tolerance {tol}): {ols}"
        );
    }
    // "small `tags#...` coefficients": the tags carry no signal. One to three of the four tags
    // an event (pool and view share a bucket, so three columns): a tag's coefficient has a
    // standard error of 0.24-0.32 (numpy, over 100 seeded runs), so each stays within 6 of
    // those.
    for (name, v) in got.iter().filter(|(n, _)| n.starts_with("tags#")) {
        assert!(v.abs() < 2.0, "OLS {name} = {v}: {ols}");
    }
    // A design of full rank: OLS as such, no ridge added for collinear columns.
    assert_eq!(ols["diagnostics"]["singular_ridge"], Value::Null, "{ols}");

    // numpy's OLS on the very events, read back from the topic: the same coefficients (to
    // 1e-9, rounding; they agree to about 1e-13), and standard errors no larger than the
    // table's.
    let events = read_topic(&brokers, "sales", EVENTS as usize);
    assert_eq!(events.len() as u64, EVENTS);
    let mut csv = format!("{},price\n", COLUMNS.join(","));
    for (payload, _) in &events {
        let (row, y) = design_row(&json("an event", &String::from_utf8_lossy(payload)));
        let cells: Vec<String> = row.iter().map(|v| format!("{v:?}")).collect();
        csv.push_str(&format!("{},{y:?}\n", cells.join(",")));
    }
    std::fs::write(dir.path().join("design.csv"), csv).unwrap();
    let out = std::process::Command::new(&python)
        .args(["-c", NUMPY_OLS, "design.csv"])
        .current_dir(dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let reference = json("numpy", &String::from_utf8_lossy(&out.stdout));
    let mut table = String::new();
    let mut off = Vec::new();
    for (j, name) in COLUMNS[..6].iter().enumerate() {
        let (np, se) = (
            reference["coef"][j].as_f64().unwrap(),
            reference["se"][j].as_f64().unwrap(),
        );
        assert!(
            se <= ses[name],
            "{name}: numpy's standard error {se} is above the table's {}",
            ses[name]
        );
        let v = got[*name];
        table.push_str(&format!("\n{name}: service {v}, numpy {np}"));
        if !close(v, np, 1e-9) {
            off.push(*name);
        }
    }
    assert!(
        off.is_empty(),
        "OLS of the service and numpy differ: {off:?}{table}"
    );

    // The lasso with 5 nonzeros keeps the five the README names.
    let mut support: Vec<String> = coefficients(lasso).into_keys().collect();
    support.sort();
    let mut want: Vec<String> = LASSO_SUPPORT.map(String::from).to_vec();
    want.sort();
    assert_eq!(support, want, "{lasso}");

    // The prediction of the README's event: a number, and the producer's mean price of it,
    // 50 + 0.15 * 1200 - 0.9 * 41 - 20 = 173.1 (the lasso refits the five, so east's mean is
    // estimated without bias: standard error about sigma / sqrt(1250) = 0.31, plus 0.15 from
    // the slopes at that sqft and age).
    let prediction = prediction.expect("the section predicts");
    let p = prediction["predictions"][0]
        .as_f64()
        .unwrap_or_else(|| panic!("{prediction}"));
    assert!(p.is_finite() && (p - 173.1).abs() < 2.5, "{prediction}");

    // The summary the section shows, `"inference": true` on OLS: the same model, and its
    // excerpt true to the answer (every key in it, each number within 10 % of the answer's:
    // the events are random).
    let inferred = &models[r#""ols" null true"#];
    assert_eq!(inferred["coefficients"], ols["coefficients"]);
    assert_eq!(excerpts.len(), 1, "one excerpt");
    let (cmd, shown) = &excerpts[0];
    assert!(
        cmd.contains(r#""inference": true"#),
        "the excerpt is of {cmd}"
    );
    check_excerpt(shown, inferred, "answer");
    assert!(
        shown["inference"]["coefficients"]
            .as_array()
            .is_some_and(|c| !c.is_empty())
            && shown["inference"]["summary"].is_object(),
        "the excerpt shows a coefficient and the summary: {shown}"
    );

    procs.reverse();
    drop(procs);
}

/// Whether the README's excerpt `shown` is true to the service's answer `got` (at `at`): each
/// key of an object is in the answer; the entries of a list are the answer's of the same
/// `feature`; a number is within 10 % of the answer's (or both below 1e-6); the rest equal.
fn check_excerpt(shown: &Value, got: &Value, at: &str) {
    match shown {
        Value::Object(m) => {
            for (k, v) in m {
                let g = got.get(k).unwrap_or_else(|| {
                    panic!("{at}.{k}: the README shows it, the answer has none: {got}")
                });
                check_excerpt(v, g, &format!("{at}.{k}"));
            }
        }
        Value::Array(items) => {
            for item in items {
                let feature = &item["feature"];
                let g = got
                    .as_array()
                    .and_then(|a| a.iter().find(|e| e["feature"] == *feature))
                    .unwrap_or_else(|| panic!("{at}: no entry of feature {feature} in {got}"));
                check_excerpt(item, g, &format!("{at}[{feature}]"));
            }
        }
        Value::Number(n) => {
            let (s, g) = (n.as_f64().unwrap(), got.as_f64());
            let g = g.unwrap_or_else(|| panic!("{at}: the README shows {s}, the answer {got}"));
            assert!(
                (s - g).abs() <= 0.1 * g.abs() || (s.abs() < 1e-6 && g.abs() < 1e-6),
                "{at}: the README shows {s}, the service answers {g}"
            );
        }
        other => assert_eq!(other, got, "{at}"),
    }
}
