//! The web console in a real browser: `ravel serve` (the binary, on its embedded broker, with
//! the demo) and headless Chromium driven over the DevTools protocol (`headless_chrome`).
//!
//! Checks: no console errors or exceptions on the normal views; the streams table lists
//! `demo` and `demo-features` with their counts growing; the path plot has one series per
//! feature that is ever nonzero on the path the API returns; choosing k = 10 with the
//! keyboard shows exactly the model `POST .../model {"method":"lasso","k":10}` returns; after
//! the test streams an abrupt change into an adaptive stream, the history view marks the
//! drift alarm the API reports; an empty stream shows n 0, effective sample size 0 and no
//! alpha; a stream's page shows its health (ready, the refused message by reason, its
//! dead-letter copy, partitions, lag); the path in original units and standardized (b_j
//! sd_j) plots the API's coefficients; the refitted k-model shows the API's standard errors;
//! the tick labels of every chart are distinct, increasing and inside the data's range (the
//! EBIC curve on real data included); a screenshot of each view is not blank; every request the
//! page makes is a route of `/openapi.json` (or the page and its two assets); an unknown
//! stream, k > p and the service restarting under the page give messages, never a blank page;
//! no horizontal scrolling at phone width. On a stream with windows of time (1 s buckets),
//! the time range shows the API's model of a window, and two windows compared show the API's
//! coefficients of each and their difference.
//!
//! (Not `RAVEL_...` variables: the service reads those as configuration.)
//! `CONSOLE_SCREENSHOTS=DIR` keeps the screenshots in DIR (`scripts/screenshots` writes the
//! guide's, `docs/console/`). Chromium is `chromium` on the PATH (`scripts/test` installs
//! Debian's) or `CHROMIUM_PATH`; without it the test fails, it does not skip.

use crate::common::*;
use headless_chrome::browser::tab::Tab;
use headless_chrome::protocol::cdp::Page::CaptureScreenshotFormatOption;
use headless_chrome::protocol::cdp::types::Event;
use headless_chrome::{Browser, LaunchOptions};
use ravel_core::scenarios::{Drift, DriftingStream};
use serde_json::{Value, json};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The service's bearer token (http.token): the page writes only with it.
const TOKEN: &str = "console-test-token-0123456789";

/// Phases of the test: errors are allowed only where the test provokes them.
const NORMAL: usize = 0;
/// Bad inputs: the API's 4xx answers are logged by Chromium as failed loads.
const BAD_INPUT: usize = 1;
/// The service is down: failed connections are logged too.
const RESTART: usize = 2;
/// A stream before its topic has a message: `/readyz` may answer 503 (a missing topic),
/// which Chromium logs as a failed load.
const EMPTY: usize = 3;

/// What the page did, as the DevTools protocol reported it.
#[derive(Default)]
struct Seen {
    /// (phase, description) of console errors, exceptions and error log entries.
    errors: Vec<(usize, String, String)>,
    /// (method, URL) of every request.
    requests: Vec<(String, String)>,
}

fn chromium() -> PathBuf {
    if let Ok(p) = std::env::var("CHROMIUM_PATH") {
        return p.into();
    }
    for dir in std::env::var("PATH").unwrap_or_default().split(':') {
        for name in ["chromium", "chromium-browser", "google-chrome"] {
            let p = Path::new(dir).join(name);
            if p.is_file() {
                return p;
            }
        }
    }
    panic!(
        "no chromium on the PATH: install it (scripts/test does: apt-get install chromium) or set CHROMIUM_PATH"
    );
}

/// Headless Chromium, 1280 x 900.
fn launch() -> Browser {
    Browser::new(
        LaunchOptions::default_builder()
            .path(Some(chromium()))
            .sandbox(false)
            .window_size(Some((1280, 900)))
            .idle_browser_timeout(Duration::from_secs(120))
            .build()
            .unwrap(),
    )
    .expect("chromium starts")
}

/// Polls `f` until it returns Some, or panics with `what` after `limit`.
fn wait_for<T>(what: &str, limit: Duration, mut f: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(start.elapsed() < limit, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The value of a JavaScript expression (JSON-encoded by the page, decoded here).
fn js(tab: &Tab, expr: &str) -> Value {
    let r = tab
        .evaluate(&format!("JSON.stringify(({expr}))"), false)
        .unwrap_or_else(|e| panic!("evaluate {expr}: {e}"));
    match r.value {
        Some(Value::String(s)) => serde_json::from_str(&s).unwrap(),
        _ => Value::Null,
    }
}

fn text(tab: &Tab, selector: &str) -> String {
    js(
        tab,
        &format!(
            "(document.querySelector({s}) || {{}}).textContent || ''",
            s = json!(selector)
        ),
    )
    .as_str()
    .unwrap_or_default()
    .to_string()
}

fn count(tab: &Tab, selector: &str) -> usize {
    js(
        tab,
        &format!("document.querySelectorAll({}).length", json!(selector)),
    )
    .as_u64()
    .unwrap_or(0) as usize
}

fn number(s: &str) -> u64 {
    s.replace(',', "").trim().parse().unwrap_or(0)
}

/// Takes a screenshot, checks it is not blank (a good share of pixels differ from the
/// background and many colours appear), keeps it in `dir`.
fn screenshot(tab: &Tab, dir: &Path, name: &str) {
    screenshot_at(tab, dir, name, None)
}

/// `screenshot` of the view scrolled to the element `anchor` (a CSS selector), or to the top.
fn screenshot_at(tab: &Tab, dir: &Path, name: &str, anchor: Option<&str>) {
    let scroll = match anchor {
        Some(sel) => format!("document.querySelector({}).scrollIntoView()", json!(sel)),
        None => "window.scrollTo(0, 0)".to_string(),
    };
    js(
        tab,
        &format!(
            "(() => {{ if (document.activeElement) document.activeElement.blur(); {scroll}; return 1; }})()"
        ),
    );
    std::thread::sleep(Duration::from_millis(300));
    let png = tab
        .capture_screenshot(CaptureScreenshotFormatOption::Png, None, None, true)
        .unwrap();
    let decoder = png::Decoder::new(std::io::Cursor::new(&png[..]));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    let channels = info.color_type.samples();
    let pixels: Vec<&[u8]> = buf[..info.buffer_size()]
        .chunks(channels)
        .map(|c| &c[..3])
        .collect();
    let background = pixels[pixels.len() - 1];
    let differing = pixels.iter().filter(|p| **p != background).count();
    let colours: BTreeSet<&[u8]> = pixels.iter().step_by(7).copied().collect();
    let share = differing as f64 / pixels.len() as f64;
    assert!(
        share > 0.02 && colours.len() > 20,
        "screenshot {name} looks blank: {:.1}% of pixels differ from the background, {} colours",
        100.0 * share,
        colours.len()
    );
    std::fs::write(dir.join(format!("{name}.png")), &png).unwrap();
}

/// Whether `path` matches an OpenAPI path template (`{name}` matches one segment).
fn matches(template: &str, path: &str) -> bool {
    let (t, p): (Vec<&str>, Vec<&str>) = (template.split('/').collect(), path.split('/').collect());
    t.len() == p.len()
        && t.iter()
            .zip(&p)
            .all(|(a, b)| a == b || (a.starts_with('{') && !b.is_empty()))
}

fn start(dir: &Path) -> (Proc, String, String) {
    let (proc_, line) = Proc::start(
        "ravel serve",
        &[
            "serve",
            "--config",
            dir.join("ravel.toml").to_str().unwrap(),
        ],
        &[("RUST_LOG", "info")],
        &dir.join("serve.log"),
    );
    let base = line
        .strip_prefix("listening on ")
        .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
        .to_string();
    // The embedded broker's address, from the start-up log line.
    let brokers = wait_for("the broker address in the log", DEADLINE, || {
        let log = std::fs::read_to_string(dir.join("serve.log")).unwrap_or_default();
        log.split_whitespace()
            .find_map(|w| w.strip_prefix("brokers="))
            .map(|b| b.trim_matches('"').to_string())
    });
    (proc_, base, brokers)
}

fn produce(brokers: &str, topic: &str, file: &Path) {
    produce_as(brokers, topic, file, "binary", 200, &[]);
}

/// Waits until the stream's history has a point at n rows.
fn wait_point(base: &str, stream: &str, n: u64) {
    wait_for(
        &format!("a history point of {stream} at n = {n}"),
        DEADLINE,
        || {
            let (s, v) = get(base, &format!("/v1/streams/{stream}/history"));
            let points = v["points"].as_array()?;
            (s == 200 && points.iter().any(|pt| pt["n"].as_u64() == Some(n))).then_some(())
        },
    );
}

/// The range a chart says it plots (its data, not the padding): (min, max) of an axis.
fn chart_range(tab: &Tab, chart: &str, axis: &str) -> (f64, f64) {
    let v = js(
        tab,
        &format!(
            "(() => {{ const c = document.querySelector({c}); \
             return [Number(c.getAttribute('data-{axis}-min')), Number(c.getAttribute('data-{axis}-max'))]; }})()",
            c = json!(chart)
        ),
    );
    (v[0].as_f64().unwrap(), v[1].as_f64().unwrap())
}

/// The tick labels of a chart's axes, read as printed: on each axis at least two, all
/// distinct, increasing along the axis (upwards; rightwards, or leftwards for a reversed x)
/// and inside the range of the data plotted (`want`: the y range the test computed from the
/// API, when it has one). Numbers are read from the text (1,234.5 or 1.2e+4), times of day
/// as seconds. Returns the y labels.
fn check_ticks(tab: &Tab, chart: &str, want_y: Option<(f64, f64)>) -> Vec<String> {
    // One read of the chart (the page redraws it every 2 s).
    let seen = js(
        tab,
        &format!(
            "(() => {{ const c = document.querySelector({}); const a = (k) => Number(c.getAttribute(k)); \
             return {{ ticks: [...c.querySelectorAll('text.tick')].map(t => [t.getAttribute('data-axis'), \
             t.textContent, Number(t.getAttribute('x')), Number(t.getAttribute('y'))]), \
             x: [a('data-x-min'), a('data-x-max')], y: [a('data-y-min'), a('data-y-max')], \
             reversed: c.getAttribute('data-x-reverse') === 'true' }}; }})()",
            json!(chart)
        ),
    );
    let ticks: Vec<(String, String, f64, f64)> =
        serde_json::from_value(seen["ticks"].clone()).unwrap();
    let reversed = seen["reversed"] == json!(true);
    let mut ys = vec![];
    for axis in ["x", "y"] {
        let (lo, hi) = (
            seen[axis][0].as_f64().unwrap(),
            seen[axis][1].as_f64().unwrap(),
        );
        if axis == "y"
            && let Some((a, b)) = want_y
        {
            let close = |u: f64, v: f64| (u - v).abs() <= 1e-9 * u.abs().max(v.abs()).max(1e-12);
            assert!(
                close(lo, a) && close(hi, b),
                "{chart}: plots y in [{lo}, {hi}], the API's data is in [{a}, {b}]"
            );
        }
        let mut on: Vec<(f64, String)> = ticks
            .iter()
            .filter(|t| t.0 == axis)
            .map(|t| (if axis == "y" { -t.3 } else { t.2 }, t.1.clone()))
            .collect();
        on.sort_by(|a, b| a.0.total_cmp(&b.0));
        let labels: Vec<String> = on.into_iter().map(|t| t.1).collect();
        let time = labels.iter().any(|l| l.contains(':'));
        let value = |l: &str| -> f64 {
            if time {
                l.split(':')
                    .map(|p| p.parse::<f64>().unwrap())
                    .fold(0.0, |t, p| t * 60.0 + p)
            } else {
                l.replace(',', "")
                    .parse()
                    .unwrap_or_else(|_| panic!("{chart}: tick label {l:?} is not a number"))
            }
        };
        let values: Vec<f64> = labels.iter().map(|l| value(l)).collect();
        assert!(
            labels.len() >= 2 || hi == lo,
            "{chart}: {axis} ticks {labels:?} on [{lo}, {hi}]"
        );
        let distinct: BTreeSet<&String> = labels.iter().collect();
        assert_eq!(
            distinct.len(),
            labels.len(),
            "{chart}: {axis} ticks {labels:?}"
        );
        let increasing = values.windows(2).all(|w| {
            if axis == "x" && reversed {
                w[0] > w[1]
            } else {
                w[0] < w[1]
            }
        });
        assert!(increasing, "{chart}: {axis} ticks {labels:?} out of order");
        if !time {
            // The labels are round values: printed exactly, inside the data's range.
            let slack = 1e-9 * (hi - lo).abs().max(hi.abs());
            for (l, v) in labels.iter().zip(&values) {
                assert!(
                    *v >= lo - slack && *v <= hi + slack,
                    "{chart}: {axis} tick {l} outside the data's range [{lo}, {hi}]"
                );
            }
        } else {
            // Times of day: within the range's seconds (the local day of the page).
            let span = values.last().unwrap() - values[0];
            assert!(
                span <= hi - lo + 1.0,
                "{chart}: time ticks {labels:?} on [{lo}, {hi}]"
            );
        }
        if axis == "y" {
            ys = labels;
        }
    }
    ys
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as i64
}

/// Sets the time range picker `id` (`window`, `compare-a`, `compare-b`) to `range` (`all`,
/// `1h`, ...; for `custom`, from `from` to `to`, Unix ms written as the page's local time),
/// with one change event.
fn pick(tab: &Tab, id: &str, range: &str, from: i64, to: i64) {
    js(
        tab,
        &format!(
            "(() => {{ document.getElementById('{id}-from').value = localInput({from}); \
             document.getElementById('{id}-to').value = localInput({to}); \
             const r = document.getElementById('{id}-range'); r.value = '{range}'; \
             r.dispatchEvent(new Event('change')); return 1; }})()"
        ),
    );
}

/// (feature, value) of each row of a coefficient table, column `col` (`data-value` of the
/// cell of that `data-col`, or the second cell), by feature.
fn table_values(tab: &Tab, rows: &str, col: Option<&str>) -> Vec<(String, f64)> {
    let cell = match col {
        Some(c) => format!("r.querySelector('[data-col=\"{c}\"]')"),
        None => "r.children[1]".to_string(),
    };
    let shown: Vec<(String, String)> = serde_json::from_value(js(
        tab,
        &format!(
            "[...document.querySelectorAll({})].map(r => [r.getAttribute('data-feature'), {cell}.getAttribute('data-value')])",
            json!(rows)
        ),
    ))
    .unwrap();
    let mut v: Vec<(String, f64)> = shown
        .into_iter()
        .map(|(f, x)| (f, x.parse().unwrap()))
        .collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

/// An API model's (feature, coefficient), by feature.
fn coefficients(model: &Value) -> Vec<(String, f64)> {
    let mut v: Vec<(String, f64)> = model["coefficients"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["feature"].as_str().unwrap().to_string(),
                c["value"].as_f64().unwrap(),
            )
        })
        .collect();
    v.sort_by(|a, b| a.0.cmp(&b.0));
    v
}

/// The stream `shift` keeps 1 s buckets: its page's time range shows the model of a window,
/// and its comparison two windows' coefficients side by side, each the API's windowed
/// answer. Rows before the change are stamped in [t0, mid), `ns` = (rows before, all rows).
fn windows_of_time(tab: &Tab, base: &str, t0: i64, mid: i64, ns: (u64, u64)) {
    tab.navigate_to(&format!("{base}/#/streams/shift")).unwrap();
    wait_for("the stream page with its time range", DEADLINE, || {
        (count(tab, "#window-range") == 1 && count(tab, "#model-table tbody tr") > 0).then_some(())
    });
    // The model over [t0, mid): the rows before the change only.
    pick(tab, "window", "custom", t0, mid);
    wait_for("the model of the window", DEADLINE, || {
        (count(tab, "#model-cards [data-col=\"window\"]") == 1).then_some(())
    });
    let card = |attr: &str| {
        js(
            tab,
            &format!(
                "document.querySelector('#model-cards [data-col=\"window\"]').getAttribute('{attr}')"
            ),
        )
    };
    assert_eq!(
        (card("data-from"), card("data-to")),
        (json!(t0.to_string()), json!(mid.to_string()))
    );
    let body = json!({"method": "lasso", "select": "ebic", "path_points": 40, "window": {"from": t0, "to": mid}});
    let (status, api) = post(base, "/v1/streams/shift/model", &body);
    assert_eq!(status, 200, "{api}");
    assert_eq!(api["window"]["n"], ns.0, "{api}");
    assert_eq!(
        table_values(tab, "#model-table tbody tr", None),
        coefficients(&api),
        "the page's windowed model is the API's"
    );
    // The page writes counts with thousands separators (8,000 rows).
    let rows = ns.0.to_string();
    let (head, tail) = rows.split_at(rows.len() % 3);
    let grouped: Vec<&str> = std::iter::once(head)
        .filter(|h| !h.is_empty())
        .chain(
            tail.as_bytes()
                .chunks(3)
                .map(|c| std::str::from_utf8(c).unwrap()),
        )
        .collect();
    let shown = text(tab, "#model-cards [data-col=\"window\"]");
    assert!(
        shown.contains(&format!("({} rows)", grouped.join(","))),
        "{shown}"
    );

    // Window A = [t0, mid) against B = the last hour (every row): the page's numbers are the
    // API's answers to the requests it made, for the windows picked.
    pick(tab, "compare-a", "custom", t0, mid);
    pick(tab, "compare-b", "1h", 0, 0);
    js(tab, "document.getElementById('compare-button').click()");
    wait_for("the comparison", DEADLINE, || {
        (count(tab, "#compare-table tbody tr") > 1).then_some(())
    });
    let request = |which: &str| -> Value {
        let raw = js(
            tab,
            &format!(
                "document.getElementById('compare-cards').getAttribute('data-request-{which}')"
            ),
        );
        serde_json::from_str(raw.as_str().unwrap()).unwrap()
    };
    let (ra, rb) = (request("a"), request("b"));
    assert_eq!(ra["window"], json!({"from": t0, "to": mid}), "{ra}");
    assert_eq!(rb["window"], json!({"last": "1h"}), "{rb}");
    let (_, ma) = post(base, "/v1/streams/shift/model", &ra);
    let (_, mb) = post(base, "/v1/streams/shift/model", &rb);
    assert_eq!(
        (ma["window"]["n"].as_u64(), mb["window"]["n"].as_u64()),
        (Some(ns.0), Some(ns.1))
    );
    let a = table_values(tab, "#compare-table tbody tr", Some("a"));
    let b = table_values(tab, "#compare-table tbody tr", Some("b"));
    let diff = table_values(tab, "#compare-table tbody tr", Some("diff"));
    let of = |m: &Value, f: &str| {
        if f == "(intercept)" {
            return m["intercept"].as_f64().unwrap();
        }
        coefficients(m)
            .into_iter()
            .find(|c| c.0 == f)
            .map_or(0.0, |c| c.1)
    };
    let mut features: BTreeSet<String> = coefficients(&ma)
        .into_iter()
        .chain(coefficients(&mb))
        .map(|c| c.0)
        .collect();
    features.insert("(intercept)".into());
    assert_eq!(
        a.iter().map(|c| c.0.clone()).collect::<BTreeSet<_>>(),
        features,
        "a row per feature of either model"
    );
    let mut differs = false;
    for (i, (f, va)) in a.iter().enumerate() {
        let (vb, d) = (b[i].1, diff[i].1);
        assert_eq!((*va, vb), (of(&ma, f), of(&mb, f)), "{f}");
        assert_eq!(d, vb - va, "{f}");
        differs |= f != "(intercept)" && d.abs() > 0.1;
    }
    assert!(differs, "the change moves a coefficient: {a:?} {b:?}");
}

#[test]
fn the_console_in_a_real_browser() {
    let started = Instant::now();
    let dir = tempfile::tempdir().unwrap();
    let shots = match std::env::var("CONSOLE_SCREENSHOTS") {
        Ok(d) => PathBuf::from(d),
        Err(_) => dir.path().join("screenshots"),
    };
    std::fs::create_dir_all(&shots).unwrap();

    // An adaptive stream beside the demo: the test streams a change into it, and it holds
    // still between the test's writes, so that the page's model and the test's are of the
    // same statistics.
    let (p, first, second) = (12usize, 8000u64, 6000u64);
    let names = names(p);
    // Port 0: the service binds a free port and prints it (no window in which another process
    // can take a port chosen here); the restart below pins the one it got.
    std::fs::write(
        dir.path().join("ravel.toml"),
        format!(
            r#"
[http]
addr = "127.0.0.1:0"
token = "{TOKEN}"
[demo]
rows_per_second = 400
features_per_second = 40
[history]
interval_ms = 400
length = 500
[[streams]]
name = "shift"
features = {names:?}
alpha = "adaptive"
windows = {{ bucket = "1s", keep = "2h" }}
"#
        ),
    )
    .unwrap();
    let mut source = DriftingStream::new(p, 3, Drift::Abrupt { at: first }, first + second, 7);
    let (mut x, mut y) = (vec![], vec![]);
    while source.fill(5000, &mut x, &mut y) > 0 {}
    // Four pieces before the change and three after: the history gets a point for each.
    let piece = 2000;
    let before = write_chunks(
        dir.path(),
        &names,
        &x[..first as usize * p],
        &y[..first as usize],
        piece,
    );
    let after_dir = dir.path().join("after");
    std::fs::create_dir(&after_dir).unwrap();
    let after = write_chunks(
        &after_dir,
        &names,
        &x[first as usize * p..],
        &y[first as usize..],
        piece,
    );

    // The first second of the rows' Kafka timestamps (windows of time, below).
    let t0 = now_ms() / 1000 * 1000;
    let (mut svc, base, brokers) = start(dir.path());

    let browser = launch();
    let tab = browser.new_tab().unwrap();
    tab.set_default_timeout(Duration::from_secs(30));
    let phase = Arc::new(AtomicUsize::new(NORMAL));
    let seen = Arc::new(Mutex::new(Seen::default()));
    {
        let (phase, seen) = (phase.clone(), seen.clone());
        tab.add_event_listener(Arc::new(move |e: &Event| {
            let now = phase.load(Ordering::SeqCst);
            let mut s = seen.lock().unwrap();
            match e {
                Event::RuntimeExceptionThrown(t) => s.errors.push((
                    now,
                    "exception".into(),
                    format!("{:?}", t.params.exception_details),
                )),
                Event::RuntimeConsoleAPICalled(c)
                    if format!("{:?}", c.params.Type)
                        .to_lowercase()
                        .contains("error") =>
                {
                    s.errors
                        .push((now, "console.error".into(), format!("{:?}", c.params.args)))
                }
                Event::LogEntryAdded(l)
                    if format!("{:?}", l.params.entry.level).to_lowercase() == "error" =>
                {
                    s.errors.push((
                        now,
                        format!("{:?}", l.params.entry.source).to_lowercase(),
                        l.params.entry.text.clone(),
                    ))
                }
                Event::NetworkRequestWillBeSent(r) => s.requests.push((
                    r.params.request.method.clone(),
                    r.params.request.url.clone(),
                )),
                _ => {}
            }
        }))
        .unwrap();
    }
    tab.enable_runtime().unwrap();
    tab.enable_log().unwrap();
    tab.call_method(
        serde_json::from_value::<headless_chrome::protocol::cdp::Network::Enable>(json!({}))
            .unwrap(),
    )
    .unwrap();

    // An empty stream: n 0, effective sample size 0, no alpha to show; its health section
    // says whether the service is ready (its topic may not exist before the first message).
    phase.store(EMPTY, Ordering::SeqCst);
    tab.navigate_to(&format!("{base}/#/streams/shift")).unwrap();
    tab.wait_until_navigated().unwrap();
    wait_for("the empty stream's page", DEADLINE, || {
        (count(&tab, "#stream-health [data-col=\"status\"]") == 1).then_some(())
    });
    let (_, empty) = get(&base, "/v1/streams/shift");
    assert_eq!(
        (
            empty["n"].as_u64(),
            empty["drift"]["effective_sample_size"].as_f64()
        ),
        (Some(0), Some(0.0)),
        "{empty}"
    );
    let card = |col: &str| text(&tab, &format!("#stream-cards [data-col=\"{col}\"] .v"));
    assert_eq!(
        (card("n"), card("alpha"), card("ess")),
        ("0".into(), "—".into(), "0".into())
    );
    assert!(text(&tab, "#path-box").contains("No rows yet"));
    let mut n = 0;
    for file in &before {
        produce(&brokers, "ravel.shift", file);
        n += piece as u64;
        wait_point(&base, "shift", n);
    }
    // Ready once the topic is there: from then on a failed load is an error again (after
    // the page's answers of before have arrived).
    wait_for("the service to be ready", DEADLINE, || {
        (get(&base, "/readyz").0 == 200).then_some(())
    });
    std::thread::sleep(Duration::from_millis(500));
    phase.store(NORMAL, Ordering::SeqCst);

    // Streams: demo and demo-features listed, their counts growing.
    tab.navigate_to(&format!("{base}/")).unwrap();
    tab.wait_until_navigated().unwrap();
    let row = |name: &str| format!("tr[data-stream=\"{name}\"] [data-col=\"n\"]");
    let demo0 = wait_for("demo rows in the table", DEADLINE, || {
        let n = number(&text(&tab, &row("demo")));
        (n > 0).then_some(n)
    });
    let feat0 = wait_for("demo-features in the table", DEADLINE, || {
        let n = number(&text(
            &tab,
            &format!("#feature-streams-table {}", row("demo-features")),
        ));
        (n > 0).then_some(n)
    });
    wait_for("demo and demo-features to grow", DEADLINE, || {
        let d = number(&text(&tab, &row("demo")));
        let f = number(&text(
            &tab,
            &format!("#feature-streams-table {}", row("demo-features")),
        ));
        (d > demo0 && f > feat0).then_some(())
    });
    assert!(text(&tab, "tr[data-stream=\"shift\"]").contains("shift"));
    // Health on the streams page: ready, in words; nothing refused yet.
    wait_for("the health panel to say ready", DEADLINE, || {
        text(&tab, "#health [data-col=\"status\"]")
            .starts_with("Ready")
            .then_some(())
    });
    let refused = "tr[data-stream=\"shift\"] [data-col=\"refused\"]";
    assert_eq!(text(&tab, refused), "0");
    // A message the stream refuses: counted in its row, with its reason in the tooltip.
    let producer: rdkafka::producer::BaseProducer = rdkafka::config::ClientConfig::new()
        .set("bootstrap.servers", &brokers)
        .create()
        .unwrap();
    producer
        .send(rdkafka::producer::BaseRecord::<(), [u8]>::to("ravel.shift").payload(b"not json"))
        .unwrap();
    rdkafka::producer::Producer::flush(&producer, Duration::from_secs(30)).unwrap();
    wait_for("the refused message in the streams table", DEADLINE, || {
        (text(&tab, refused) == "1").then_some(())
    });
    let title = js(
        &tab,
        "document.querySelector('tr[data-stream=\"shift\"] [data-col=\"refused\"]').title",
    );
    assert!(
        title
            .as_str()
            .unwrap_or_default()
            .starts_with("malformed: 1"),
        "{title}"
    );
    screenshot(&tab, &shots, "streams");

    // A stream: one series per feature that is ever nonzero on the API's path.
    tab.navigate_to(&format!("{base}/#/streams/shift")).unwrap();
    wait_for("the path chart and the first model", DEADLINE, || {
        (count(&tab, "#path-chart path.series") > 0 && count(&tab, "#model-table tbody tr") > 0)
            .then_some(())
    });
    let (status, path) = get(&base, "/v1/streams/shift/path?method=lasso&path_points=40");
    assert_eq!(status, 200, "{path}");
    let entered: BTreeSet<String> = path["points"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|pt| pt["coefficients"].as_array().unwrap().iter())
        .filter(|c| c["value"].as_f64() != Some(0.0))
        .map(|c| c["feature"].as_str().unwrap().to_string())
        .collect();
    let series: Vec<String> = serde_json::from_value(js(
        &tab,
        "[...document.querySelectorAll('#path-chart path.series')].map(p => p.getAttribute('data-feature'))",
    ))
    .unwrap();
    assert_eq!(
        series.len(),
        entered.len(),
        "one series per feature: {series:?}"
    );
    assert_eq!(series.into_iter().collect::<BTreeSet<_>>(), entered);

    // The stream's health on its page: ready; the refused message by reason, its
    // dead-letter copy delivered; the partitions and the lag the API and /metrics give.
    let (_, st) = get(&base, "/v1/streams/shift");
    let health = |col: &str| text(&tab, &format!("#arrival-cards [data-col=\"{col}\"] .v"));
    wait_for("the stream's health", DEADLINE, || {
        (text(&tab, "#stream-health [data-col=\"status\"]").starts_with("Ready")
            && health("dead-letters").starts_with("1 /")
            && health("lag").parse::<u64>().is_ok())
        .then_some(())
    });
    assert_eq!(health("refused"), "1");
    assert_eq!(health("topic"), "ravel.shift");
    assert_eq!(
        text(
            &tab,
            "#refusals-table tr[data-reason=\"malformed\"] td:last-child"
        ),
        "1"
    );
    assert_eq!(
        health("partitions"),
        format!(
            "{} / {}",
            st["partitions"]["assigned"], st["partitions"]["total"]
        )
    );
    // alpha and the effective sample size are the API's (Kish's; at most n).
    let ess = st["drift"]["effective_sample_size"].as_f64().unwrap();
    assert!(ess > 0.0 && ess <= first as f64 + 1e-6, "{ess}");
    assert_eq!(
        number(&text(&tab, "#stream-cards [data-col=\"ess\"] .v")),
        ess.round() as u64
    );

    // The path's axes: ticks distinct, increasing, inside the range of the API's
    // coefficients (0 where a feature is out of the model) on the path the page draws, the
    // one that carries the criterion's curve.
    let (_, drawn) = get(
        &base,
        "/v1/streams/shift/path?method=lasso&path_points=40&select=ebic",
    );
    let coef_range = |scale: &dyn Fn(usize) -> f64| {
        let mut r = (0.0f64, 0.0f64);
        for pt in drawn["points"].as_array().unwrap() {
            if pt["lambda"].as_f64().unwrap() <= 0.0 {
                continue;
            }
            for c in pt["coefficients"].as_array().unwrap() {
                let v = c["value"].as_f64().unwrap() * scale(c["index"].as_u64().unwrap() as usize);
                r = (r.0.min(v), r.1.max(v));
            }
        }
        r
    };
    check_ticks(&tab, "#path-chart", Some(coef_range(&|_| 1.0)));
    // Standardized: each coefficient times its feature's sd (GET /v1/streams/{name}).
    let sd: Vec<f64> = serde_json::from_value(st["sd_x"].clone()).unwrap();
    js(
        &tab,
        "document.getElementById('units-standardized').click()",
    );
    wait_for("the standardized path", DEADLINE, || {
        text(&tab, "#units-note")
            .starts_with("Standardized")
            .then_some(())
    });
    assert_eq!(count(&tab, "#path-chart path.series"), entered.len());
    check_ticks(&tab, "#path-chart", Some(coef_range(&|j| sd[j])));
    js(&tab, "document.getElementById('units-original').click()");
    wait_for("the path in original units", DEADLINE, || {
        text(&tab, "#units-note")
            .starts_with("Original")
            .then_some(())
    });

    // The EBIC curve along the same path, with the point the API chooses.
    let (status, sel) = get(
        &base,
        "/v1/streams/shift/path?method=lasso&path_points=40&select=ebic",
    );
    assert_eq!(status, 200, "{sel}");
    let chosen = &sel["selection"]["curve"][sel["selection"]["chosen"].as_u64().unwrap() as usize];
    wait_for("the EBIC curve", DEADLINE, || {
        (count(&tab, "#selection-chart path[data-curve=\"ebic\"]") == 1).then_some(())
    });
    let shown_k = js(
        &tab,
        "document.getElementById('chosen-text').getAttribute('data-chosen-k')",
    );
    let shown_lambda = js(
        &tab,
        "document.getElementById('chosen-text').getAttribute('data-chosen-lambda')",
    );
    assert_eq!(shown_k.as_str(), Some(chosen["k"].to_string().as_str()));
    assert_eq!(
        shown_lambda.as_str().unwrap().parse::<f64>().unwrap(),
        chosen["lambda"].as_f64().unwrap(),
        "the page's chosen lambda is the API's"
    );
    // The EBIC chart's axes on real data: the y ticks once all read 9.5e+4.
    let curve: Vec<f64> = sel["selection"]["curve"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["lambda"].as_f64().unwrap() > 0.0)
        .map(|c| c["value"].as_f64().unwrap())
        .collect();
    let ebic_min = curve.iter().copied().fold(f64::INFINITY, f64::min);
    let (lo, hi) = chart_range(&tab, "#selection-chart", "y");
    assert_eq!(lo, ebic_min);
    assert!(hi <= curve.iter().copied().fold(f64::NEG_INFINITY, f64::max));
    let labels = check_ticks(&tab, "#selection-chart", None);
    eprintln!("EBIC y ticks on [{lo}, {hi}]: {labels:?}");
    // The issue's case, a narrow range far from 0 (an EBIC of 95,1xx, where four significant
    // digits printed 9.5e+4 on every tick), through the page's own tick functions.
    for (lo, hi) in [(95_123.4, 95_161.9), (2.0e6, 2.0003e6), (0.81, 0.8123)] {
        let labels: Vec<String> = serde_json::from_value(js(
            &tab,
            &format!(
                "(() => {{ const t = niceTicks({lo}, {hi}, 5); return t.values.map(v => tickLabel(v, t.step, {hi})); }})()"
            ),
        ))
        .unwrap();
        let values: Vec<f64> = labels
            .iter()
            .map(|l| l.replace(',', "").parse().unwrap())
            .collect();
        assert!(labels.len() >= 2, "{labels:?}");
        assert!(
            values.windows(2).all(|w| w[0] < w[1])
                && values[0] >= lo
                && values[values.len() - 1] <= hi,
            "ticks on [{lo}, {hi}]: {labels:?}"
        );
    }
    // The criterion's model is penalized: no standard errors, and the page says why; its
    // coefficient chart has a dot per coefficient and no interval.
    assert_eq!(count(&tab, "#model-table [data-col=\"se\"]"), 0);
    assert!(text(&tab, "#model-table caption").contains("has no standard errors"));
    assert_eq!(
        count(&tab, "#coef-chart circle.estimate"),
        count(&tab, "#model-table tbody tr")
    );
    assert_eq!(count(&tab, "#coef-chart path.ci"), 0);
    assert!(text(&tab, "#coef-note").contains("No confidence intervals"));
    screenshot_at(&tab, &shots, "selection", Some("#selection-curve"));
    js(&tab, "(() => { window.scrollTo(0, 0); return 1; })()");

    // k = 10, typed and submitted with the keyboard: exactly the API's model.
    js(
        &tab,
        "(() => { const k = document.getElementById('k'); k.focus(); k.select(); return 1; })()",
    );
    tab.type_str("10").unwrap().press_key("Enter").unwrap();
    wait_for("the model at k = 10", DEADLINE, || {
        (text(&tab, "#model-cards [data-col=\"k\"] .v") == "10").then_some(())
    });
    let (status, model) = post(
        &base,
        "/v1/streams/shift/model",
        &json!({"method": "lasso", "k": 10}),
    );
    assert_eq!(status, 200, "{model}");
    let expect = coefficients(&model);
    let shown: Vec<(String, String)> = serde_json::from_value(js(
        &tab,
        "[...document.querySelectorAll('#model-table tbody tr')].map(r => [r.getAttribute('data-feature'), r.children[1].getAttribute('data-value')])",
    ))
    .unwrap();
    let mut shown: Vec<(String, f64)> = shown
        .into_iter()
        .map(|(f, v)| (f, v.parse().unwrap()))
        .collect();
    shown.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(expect.len(), 10);
    assert_eq!(shown, expect, "the page's model is the API's");
    // Refitted at k: the standard errors the API gives for the same model.
    let (status, inferred) = post(
        &base,
        "/v1/streams/shift/model",
        &json!({"method": "lasso", "k": 10, "inference": true}),
    );
    assert_eq!(status, 200, "{inferred}");
    let mut want_se: Vec<(String, f64)> = inferred["inference"]["coefficients"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["feature"].as_str().unwrap().to_string(),
                e["se"].as_f64().unwrap(),
            )
        })
        .collect();
    let shown_se: Vec<(String, String)> = serde_json::from_value(js(
        &tab,
        "[...document.querySelectorAll('#model-table tbody tr')].map(r => [r.getAttribute('data-feature'), r.querySelector('[data-col=\"se\"]').getAttribute('data-value')])",
    ))
    .unwrap();
    let mut shown_se: Vec<(String, f64)> = shown_se
        .into_iter()
        .map(|(f, v)| (f, v.parse().unwrap()))
        .collect();
    want_se.sort_by(|a, b| a.0.cmp(&b.0));
    shown_se.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(
        shown_se, want_se,
        "the page's standard errors are the API's"
    );
    assert!(
        text(&tab, "#model-table caption").contains("standard errors, t and two-sided p-values")
    );
    // The coefficient chart draws each coefficient's confidence interval: one bar per
    // coefficient with the API's bounds (original units), drawn with a width, its dot inside.
    let mut want_ci: Vec<(String, f64, f64)> = inferred["inference"]["coefficients"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            (
                e["feature"].as_str().unwrap().to_string(),
                e["ci_lower"].as_f64().unwrap(),
                e["ci_upper"].as_f64().unwrap(),
            )
        })
        .collect();
    assert_eq!(inferred["inference"]["summary"]["level"], 0.95);
    assert_eq!(count(&tab, "#coef-chart path.ci"), 10);
    assert_eq!(count(&tab, "#coef-chart circle.estimate"), 10);
    let drawn: Vec<(String, f64, f64, f64, f64, f64)> = serde_json::from_value(js(
        &tab,
        "[...document.querySelectorAll('#coef-chart g.coef')].map(g => { const ci = g.querySelector('path.ci'); \
         const b = ci.getBBox(); return [g.getAttribute('data-feature'), Number(ci.getAttribute('data-lower')), \
         Number(ci.getAttribute('data-upper')), b.x, b.x + b.width, Number(g.querySelector('circle.estimate').getAttribute('cx'))]; })",
    ))
    .unwrap();
    // Pixels per unit, from the axis' first and last ticks: every bar's width is its
    // interval's at that scale (to the 0.1 px the page rounds to), and its dot lies on it.
    let ticks: Vec<(f64, f64)> = serde_json::from_value(js(
        &tab,
        "[...document.querySelectorAll('#coef-chart text.tick[data-axis=\"x\"]')].map(t => [Number(t.getAttribute('data-value')), Number(t.getAttribute('x'))])",
    ))
    .unwrap();
    assert!(ticks.len() >= 2, "{ticks:?}");
    let ((v0, x0), (v1, x1)) = (ticks[0], ticks[ticks.len() - 1]);
    let per_unit = (x1 - x0) / (v1 - v0);
    assert!(per_unit > 0.0, "{ticks:?}");
    let mut shown_ci: Vec<(String, f64, f64)> = drawn
        .iter()
        .map(|(f, lo, hi, x0, x1, cx)| {
            assert!(
                ((x1 - x0) - (hi - lo) * per_unit).abs() <= 0.3,
                "{f}: a bar {} px wide for an interval of {} px",
                x1 - x0,
                (hi - lo) * per_unit
            );
            assert!(
                x0 - 0.2 <= *cx && *cx <= x1 + 0.2,
                "{f}: the bar [{x0}, {x1}] is drawn around its dot at {cx}"
            );
            (f.clone(), *lo, *hi)
        })
        .collect();
    want_ci.sort_by(|a, b| a.0.cmp(&b.0));
    shown_ci.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(shown_ci, want_ci, "the chart's intervals are the API's");
    assert!(
        text(&tab, "#coef-note").contains("95 % confidence intervals"),
        "{}",
        text(&tab, "#coef-note")
    );
    screenshot_at(&tab, &shots, "model", Some("#coef-figure"));
    js(&tab, "(() => { window.scrollTo(0, 0); return 1; })()");
    // The history's point at this n is the same default model (lasso, history.k = 10).
    let (_, hist) = get(&base, "/v1/streams/shift/history");
    assert_eq!(
        (hist["method"].as_str(), hist["k"].as_u64()),
        (Some("lasso"), Some(10))
    );
    let point = hist["points"]
        .as_array()
        .unwrap()
        .iter()
        .find(|pt| pt["n"].as_u64() == Some(first))
        .unwrap_or_else(|| panic!("no history point at n = {first}: {hist}"))
        .clone();
    let support: Vec<usize> = model["coefficients"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["index"].as_u64().unwrap() as usize)
        .collect();
    let values: Vec<f64> = model["coefficients"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["value"].as_f64().unwrap())
        .collect();
    assert_eq!(point["support"], json!(support), "{point}");
    assert_eq!(point["coefficients"], json!(values), "{point}");
    assert_eq!(point["r2"], model["diagnostics"]["r2"]);
    assert_eq!(point["alarms"], json!(0), "no alarm before the change");
    let r2 = model["diagnostics"]["r2"].as_f64().unwrap();
    let shown_r2: f64 = text(&tab, "#model-cards [data-col=\"r2\"] .v")
        .parse()
        .unwrap();
    assert!(
        (shown_r2 - r2).abs() <= 1e-3 * r2.abs().max(1e-3),
        "R^2 {shown_r2} vs {r2}"
    );
    // Sortable: by name, ascending, with the keyboard.
    js(
        &tab,
        "document.querySelector('[data-sort=\"name\"]').focus()",
    );
    tab.press_key("Enter").unwrap();
    let order: Vec<String> = serde_json::from_value(js(
        &tab,
        "[...document.querySelectorAll('#model-table tbody tr')].map(r => r.getAttribute('data-feature'))",
    ))
    .unwrap();
    let mut sorted = order.clone();
    sorted.sort();
    assert_eq!(order, sorted, "sorted by name");
    // A model through the origin (issue 58): the "intercept" box unticked asks for
    // "intercept": false; the page shows no intercept, the uncentred R^2 and exactly the
    // API's coefficients; ticked again, the model with an intercept is back.
    let toggle = "(() => { document.getElementById('intercept').click(); document.getElementById('show-model').click(); return 1; })()";
    js(&tab, toggle);
    wait_for("the model through the origin", DEADLINE, || {
        (text(&tab, "#model-cards [data-col=\"intercept\"] .v") == "none").then_some(())
    });
    let (status, origin) = post(
        &base,
        "/v1/streams/shift/model",
        &json!({"method": "lasso", "k": 10, "intercept": false}),
    );
    assert_eq!(status, 200, "{origin}");
    assert_eq!(origin["diagnostics"]["intercept"], json!(false), "{origin}");
    assert_eq!(
        table_values(&tab, "#model-table tbody tr", None),
        coefficients(&origin),
        "the page's model through the origin is the API's"
    );
    assert!(text(&tab, "#model-cards [data-col=\"r2\"]").contains("uncentred"));
    js(&tab, toggle);
    wait_for("the model with an intercept again", DEADLINE, || {
        (text(&tab, "#model-cards [data-col=\"intercept\"] .v") != "none").then_some(())
    });
    screenshot_at(&tab, &shots, "stream", Some("#model-form"));

    // Change over time: stream the change, wait for the API's alarm and a history point
    // with it, then the page marks it. Every row before the change is stamped before `mid`
    // (a whole second: a bucket boundary), every row after it later.
    let mid = (now_ms() / 1000 + 1) * 1000;
    while now_ms() < mid + 50 {
        std::thread::sleep(Duration::from_millis(10));
    }
    for file in &after {
        produce(&brokers, "ravel.shift", file);
        n += piece as u64;
        wait_point(&base, "shift", n);
    }
    assert_eq!(n, first + second);
    let alarms = wait_for("a drift alarm in the history", DEADLINE, || {
        let (_, h) = get(&base, "/v1/streams/shift/history");
        let last = h["points"].as_array()?.last()?.clone();
        (last["n"].as_u64() == Some(first + second) && last["alarms"].as_u64()? >= 1)
            .then(|| last["alarms"].as_u64().unwrap())
    });
    tab.navigate_to(&format!("{base}/#/streams/shift/history"))
        .unwrap();
    wait_for("the alarm on the page", DEADLINE, || {
        (count(&tab, "#alpha-box [data-alarm]") >= 1 && count(&tab, "#heat-strip rect") > 0)
            .then_some(())
    });
    assert!(
        text(&tab, "#alarm-text").starts_with(&format!("{alarms} drift alarm")),
        "{}",
        text(&tab, "#alarm-text")
    );
    // The quality panel (issue 33): the window's figures of the stream summary, and the R^2
    // of the window over time with the same drift alarm marks.
    let (_, st) = get(&base, "/v1/streams/shift");
    assert!(st["quality"]["figures"]["window"]["r2"].is_number(), "{st}");
    wait_for("the quality panel", DEADLINE, || {
        (count(&tab, "#quality-cards [data-figure=\"r2\"]") == 1
            && count(&tab, "#quality-cards [data-figure=\"rmse\"]") == 1
            && count(&tab, "#quality-box [data-alarm]") >= 1
            && count(&tab, "#quality-box path.series") >= 1)
            .then_some(())
    });
    for chart in ["#alpha-box svg", "#ess-box svg", "#quality-box svg"] {
        check_ticks(&tab, chart, None);
    }
    screenshot_at(&tab, &shots, "history", Some(".tabs"));

    windows_of_time(&tab, &base, t0, mid, (first, first + second));
    screenshot_at(&tab, &shots, "windows", Some("#compare"));

    // A feature stream: selected features, loss per pass.
    tab.navigate_to(&format!("{base}/#/feature-streams/demo-features"))
        .unwrap();
    wait_for("selected features", DEADLINE, || {
        (count(&tab, "#selected-table tr[data-feature]") > 0).then_some(())
    });
    assert!(text(&tab, "[data-col=\"labels\"]").contains("received"));
    wait_for("the loss of a pass", DEADLINE, || {
        (count(&tab, "#loss-box path.series") == 1).then_some(())
    });
    check_ticks(&tab, "#loss-box svg", None);
    screenshot(&tab, &shots, "features");

    // Phone width: no horizontal scrolling (wide tables scroll inside their box).
    tab.set_bounds(headless_chrome::types::Bounds::Normal {
        left: None,
        top: None,
        width: Some(390.0),
        height: Some(844.0),
    })
    .unwrap();
    tab.navigate_to(&format!("{base}/#/streams/shift")).unwrap();
    wait_for("the stream page at phone width", DEADLINE, || {
        (count(&tab, "#model-table tbody tr") > 0).then_some(())
    });
    let (scroll, inner) = (
        js(&tab, "document.documentElement.scrollWidth")
            .as_u64()
            .unwrap(),
        js(&tab, "window.innerWidth").as_u64().unwrap(),
    );
    assert!(
        scroll <= inner,
        "page wider than the phone: {scroll} > {inner}"
    );
    screenshot(&tab, &shots, "phone");
    tab.set_bounds(headless_chrome::types::Bounds::Normal {
        left: None,
        top: None,
        width: Some(1280.0),
        height: Some(900.0),
    })
    .unwrap();
    {
        let s = seen.lock().unwrap();
        let errors: Vec<_> = s.errors.iter().filter(|e| e.0 == NORMAL).collect();
        assert!(errors.is_empty(), "console errors: {errors:?}");
    }

    // Bad inputs: CV on a stream without fold statistics, k > p, an unknown stream, an
    // unknown page.
    phase.store(BAD_INPUT, Ordering::SeqCst);
    // CV needs the stream option cv.folds: the page says why and keeps the path.
    js(
        &tab,
        "(() => { const c = document.getElementById('criterion'); c.value = 'cv'; c.dispatchEvent(new Event('change')); return 1; })()",
    );
    wait_for("the CV message", DEADLINE, || {
        let t = text(&tab, "#selection-box");
        (t.contains("Error") && t.to_lowercase().contains("fold")).then_some(())
    });
    assert!(
        count(&tab, "#path-chart path.series") > 0,
        "the path stays without CV"
    );
    js(
        &tab,
        "(() => { const c = document.getElementById('criterion'); c.value = 'ebic'; c.dispatchEvent(new Event('change')); return 1; })()",
    );
    wait_for("the EBIC curve again", DEADLINE, || {
        (count(&tab, "#selection-chart path[data-curve=\"ebic\"]") == 1).then_some(())
    });
    js(
        &tab,
        "(() => { const k = document.getElementById('k'); k.focus(); k.select(); return 1; })()",
    );
    tab.type_str(&(p + 1).to_string())
        .unwrap()
        .press_key("Enter")
        .unwrap();
    wait_for("the k > p message", DEADLINE, || {
        (count(&tab, "#model-error [data-error=\"k_too_large\"]") == 1).then_some(())
    });
    assert!(count(&tab, "#path-chart path.series") > 0, "the path stays");
    tab.navigate_to(&format!("{base}/#/streams/nope")).unwrap();
    wait_for("the unknown stream message", DEADLINE, || {
        let t = text(&tab, "[data-error=\"unknown_stream\"]");
        (t.contains("nope") && text(&tab, "main").contains("demo-features")).then_some(())
    });
    // Read-only without the token: no labels form; with a wrong token the write is refused
    // with the API's message.
    tab.navigate_to(&format!("{base}/#/feature-streams/demo-features"))
        .unwrap();
    wait_for("the read-only labels section", DEADLINE, || {
        (text(&tab, "#labels-box").contains("Read-only") && count(&tab, "#labels-input") == 0)
            .then_some(())
    });
    let send_labels = |token: &str| {
        js(&tab, "document.getElementById('token').focus()");
        tab.type_str(token).unwrap().press_key("Enter").unwrap();
        wait_for("the labels form", DEADLINE, || {
            (count(&tab, "#labels-input") == 1).then_some(())
        });
        // 200 labels: set, not typed key by key (that takes minutes over the protocol).
        js(
            &tab,
            "(() => { const t = document.getElementById('labels-input'); t.focus(); \
             t.value = JSON.stringify(Array(200).fill(1)); \
             document.querySelector('#labels-box button[type=submit]').click(); return 1; })()",
        );
    };
    send_labels("not-the-token-at-all");
    wait_for("the unauthorized message", DEADLINE, || {
        (count(&tab, "#labels-box [data-error=\"unauthorized\"]") == 1).then_some(())
    });
    // With the token the write gets past authorization to the handler, which refuses new
    // labels once features were selected with the old ones, saying why.
    send_labels(TOKEN);
    wait_for("the labels conflict message", DEADLINE, || {
        let t = text(&tab, "#labels-box [data-error=\"labels_conflict\"]");
        t.contains("cannot change").then_some(())
    });
    tab.navigate_to(&format!("{base}/#/elsewhere")).unwrap();
    wait_for("the unknown page message", DEADLINE, || {
        (count(&tab, "[data-error=\"unknown_page\"]") == 1).then_some(())
    });

    // The service restarting under the page: a message over the last data, then back.
    phase.store(RESTART, Ordering::SeqCst);
    tab.navigate_to(&format!("{base}/#/streams/shift/history"))
        .unwrap();
    wait_for("the history page", DEADLINE, || {
        (count(&tab, "#heat-strip") == 1).then_some(())
    });
    svc.signal("-TERM");
    assert!(svc.wait(), "the service stops cleanly");
    // The restart must come back at the address the page uses.
    let config = dir.path().join("ravel.toml");
    let pinned = std::fs::read_to_string(&config).unwrap().replace(
        "127.0.0.1:0",
        base.strip_prefix("http://").expect("an http:// address"),
    );
    std::fs::write(&config, pinned).unwrap();
    wait_for("the restarting message", DEADLINE, || {
        let b = text(&tab, "#banner");
        (b.contains("not answering") && count(&tab, "#heat-strip") == 1).then_some(())
    });
    let (svc2, base2, _) = start(dir.path());
    assert_eq!(base2, base, "same address after the restart");
    wait_for("the message to clear", DEADLINE, || {
        let hidden = js(&tab, "document.getElementById('banner').hidden");
        (hidden == json!(true) && count(&tab, "#view h1") == 1).then_some(())
    });

    // The page and its assets are served with their types; an unknown asset is a JSON 404.
    for (path, ctype) in [
        ("/", "text/html"),
        ("/ui/app.js", "text/javascript"),
        ("/ui/app.css", "text/css"),
    ] {
        let r = client().get(format!("{base}{path}")).send().unwrap();
        assert_eq!(r.status().as_u16(), 200, "{path}");
        let got = r.headers()["content-type"].to_str().unwrap().to_string();
        assert!(got.starts_with(ctype), "{path}: {got}");
    }
    let (status, body) = get(&base, "/ui/nope.js");
    assert_eq!(
        (status, body["error"]["code"].as_str()),
        (404, Some("not_found")),
        "{body}"
    );

    // Every request of the page: the page, its assets, or a documented route.
    let (_, doc) = get(&base, "/openapi.json");
    let ops: Vec<(String, String)> = doc["paths"]
        .as_object()
        .unwrap()
        .iter()
        .flat_map(|(t, item)| {
            item.as_object()
                .unwrap()
                .keys()
                .map(move |m| (m.to_uppercase(), t.clone()))
        })
        .collect();
    let s = seen.lock().unwrap();
    let mut api_calls = BTreeSet::new();
    for (method, url) in &s.requests {
        let Some(rest) = url.strip_prefix(&base) else {
            assert!(
                url.starts_with("data:"),
                "a request outside the service: {url}"
            );
            continue;
        };
        let path = rest.split(['?', '#']).next().unwrap();
        let path = if path.is_empty() { "/" } else { path };
        if method == "GET" && ["/", "/ui/app.js", "/ui/app.css"].contains(&path) {
            continue;
        }
        let op = ops.iter().find(|(m, t)| m == method && matches(t, path));
        assert!(
            op.is_some(),
            "{method} {url} is not a route of /openapi.json"
        );
        api_calls.insert(op.unwrap().clone());
    }
    for want in [
        ("GET", "/v1/streams"),
        ("GET", "/v1/feature-streams"),
        ("GET", "/v1/streams/{name}/path"),
        ("POST", "/v1/streams/{name}/model"),
        ("GET", "/v1/streams/{name}/history"),
        ("GET", "/v1/feature-streams/{name}"),
    ] {
        assert!(
            api_calls.contains(&(want.0.to_string(), want.1.to_string())),
            "the page never called {want:?}"
        );
    }
    // The listener sees errors: the provoked 4xx answers were logged.
    assert!(
        s.errors
            .iter()
            .any(|e| e.0 == BAD_INPUT && e.1 == "network"),
        "the provoked 4xx answers were not seen: {:?}",
        s.errors
    );
    // Errors only where provoked: 4xx answers while bad inputs were tried, failed
    // connections while the service was down; never an exception.
    for (at, source, text) in &s.errors {
        assert!(
            *at != NORMAL && source == "network",
            "unexpected console error ({source}): {text}"
        );
    }
    drop(svc2);
    eprintln!("browser test took {:?}", started.elapsed());
}

/// The declare page (issue 49): the fields of a topic's latest JSON events are proposed
/// (numbers as features), a person picks the target and names the stream, and the stream is
/// declared with the admin token: the API then serves it with those features and target, and
/// folds every event.
#[test]
fn a_stream_is_declared_from_the_console_with_fields_proposed_from_its_topic() {
    const ADMIN: &str = "console-admin-token-0123456789";
    // Declarations are kept in state.dir, which the in-process broker turns off: a broker of
    // the test's own.
    let broker = ravel::broker::EmbeddedBroker::start(1).unwrap();
    let brokers = broker.bootstrap_servers().to_string();
    for (t, parts) in [("f", 1), ("f.dlq", 1), ("orders", 1), ("orders.dlq", 1)] {
        broker.create_topic(t, parts).unwrap();
    }
    let dir = tempfile::tempdir().unwrap();
    ConfigFile::new("console-declare")
        .state_in(dir.path(), 500)
        .stream("file", "f", 2)
        .set("http.admin_token", ADMIN)
        .write(dir.path());
    let (_svc, base) = serve(dir.path(), &brokers, 0);
    let events: Vec<Vec<u8>> = (0..120)
        .map(|i| {
            let (sqft, rooms) = (50.0 + (i * 37 % 101) as f64, (i % 5 + 1) as f64);
            let price = 1000.0 + 30.0 * sqft + 500.0 * rooms + (i * 7919 % 13) as f64;
            let city = ["Oslo", "Bergen"][i % 2];
            serde_json::to_vec(
                &json!({"sale": {"sqft": sqft, "rooms": rooms}, "city": city, "price": price}),
            )
            .unwrap()
        })
        .collect();
    send(&brokers, "orders", None, &events, &[]);

    let browser = launch();
    let tab = browser.new_tab().unwrap();
    tab.set_default_timeout(Duration::from_secs(30));
    tab.navigate_to(&format!("{base}/#/declare")).unwrap();
    wait_for("the declare form", DEADLINE, || {
        (count(&tab, "#declare-sample") == 1).then_some(())
    });
    js(
        &tab,
        &format!(
            "(document.querySelector('#declare-admin').value = {}, \
             document.querySelector('#declare-topic').value = 'orders', \
             document.querySelector('#declare-sample button').click(), true)",
            json!(ADMIN)
        ),
    );
    wait_for("the proposed fields", DEADLINE, || {
        (count(&tab, "#declare-table tbody tr") == 4).then_some(())
    });
    let proposed = js(
        &tab,
        "[...document.querySelectorAll('#declare-table tbody tr')].map((r) => \
         [r.dataset.path, r.children[1].textContent, r.querySelector('input[name=feature]').checked])",
    );
    assert_eq!(
        proposed,
        json!([
            ["city", "string", false],
            ["price", "number", true],
            ["sale.rooms", "number", true],
            ["sale.sqft", "number", true]
        ]),
        "{}",
        text(&tab, "#declare-fields")
    );
    assert_eq!(
        text(&tab, "#declare-summary"),
        "100 of the 100 latest messages are events."
    );
    js(
        &tab,
        "(document.querySelector('#declare-table input[name=target][value=price]').click(), \
         document.querySelector('#declare-name').value = 'sales', \
         document.querySelector('#declare-form button').click(), true)",
    );
    wait_for("the declaration's answer", DEADLINE, || {
        let done = text(&tab, "#declare-done");
        let error = text(&tab, "#declare-result .error");
        assert!(error.is_empty(), "{error}");
        (!done.is_empty()).then_some(done)
    });
    let (status, d) = get(&base, "/v1/streams/sales/declaration");
    assert_eq!(status, 200, "{d}");
    assert_eq!(
        (
            d["origin"].clone(),
            d["declaration"]["features"].clone(),
            d["declaration"]["target"].clone()
        ),
        (
            json!("api"),
            json!(["sale.rooms", "sale.sqft"]),
            json!("price")
        ),
        "{d}"
    );
    wait_for("the declared stream's events folded", DEADLINE, || {
        (stream_n(&base, "sales") == Some(120)).then_some(())
    });
}
