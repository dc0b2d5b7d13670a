//! Assertions and polling: models equal within a tolerance, `ravel fit` against the API,
//! Prometheus samples, `ravel check` findings, and waiting with generous deadlines.

use super::{DEADLINE, client, ravel};
use serde_json::Value;
use std::path::Path;
use std::time::{Duration, Instant};

/// `a` and `b` agree to `rel` relative to their size.
pub fn close(a: f64, b: f64, rel: f64) -> bool {
    (a - b).abs() <= rel * a.abs().max(b.abs()).max(1e-300)
}

/// An API model's intercept, then the coefficients of `names` in that order (a name the model
/// lacks fails, naming it).
pub fn intercept_and(model: &Value, names: &[&str]) -> Vec<f64> {
    let mut out = vec![model["intercept"].as_f64().unwrap()];
    for name in names {
        let c = model["coefficients"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["feature"] == *name)
            .unwrap_or_else(|| panic!("no coefficient of {name}: {model}"));
        out.push(c["value"].as_f64().unwrap());
    }
    out
}

/// Asserts that two model JSONs (`ravel fit` and the API) are the same model: method, k, n,
/// lambda, the same coefficients (names and indices) and values within `rel`.
pub fn assert_same_model(api: &Value, fit: &Value, rel: f64, what: &str) {
    assert_eq!(api["method"], fit["method"], "{what}: method");
    assert_eq!(api["k"], fit["k"], "{what}: k (api {api}, fit {fit})");
    assert_eq!(api["n"], fit["n"], "{what}: n");
    let num = |v: &Value| v.as_f64();
    match (num(&api["lambda"]), num(&fit["lambda"])) {
        (Some(a), Some(b)) => assert!(close(a, b, rel), "{what}: lambda {a} vs {b}"),
        (a, b) => assert_eq!(a, b, "{what}: lambda"),
    }
    let (ia, ib) = (
        num(&api["intercept"]).unwrap(),
        num(&fit["intercept"]).unwrap(),
    );
    assert!(close(ia, ib, rel), "{what}: intercept {ia} vs {ib}");
    let (ca, cb) = (
        api["coefficients"].as_array().unwrap(),
        fit["coefficients"].as_array().unwrap(),
    );
    assert_eq!(ca.len(), cb.len(), "{what}: number of coefficients");
    // Rounding (statistics merged in another order, as partitions move between replicas) is
    // relative to the model's size, not to each coefficient's: a feature whose true
    // coefficient is 0 is estimated at about 1e-5 here, and differs by about 1e-13 between
    // two exact summations of the same rows, 1e-9 of its own size but 1e-13 of the model's.
    let scale = ca
        .iter()
        .chain(cb)
        .filter_map(|c| num(&c["value"]))
        .fold(0.0f64, |m, v| m.max(v.abs()));
    for (a, b) in ca.iter().zip(cb) {
        assert_eq!(a["feature"], b["feature"], "{what}: support");
        assert_eq!(a["index"], b["index"], "{what}: support");
        let (va, vb) = (num(&a["value"]).unwrap(), num(&b["value"]).unwrap());
        assert!(
            (va - vb).abs() <= rel * va.abs().max(vb.abs()).max(scale),
            "{what}: coefficient {} {va} vs {vb} (largest coefficient {scale})",
            a["feature"]
        );
    }
}

/// Value of a Prometheus sample `name{labels}` in the text exposition (labels as printed).
pub fn sample(metrics: &str, name_and_labels: &str) -> Option<f64> {
    metrics
        .lines()
        .find(|l| l.starts_with(name_and_labels) && l[name_and_labels.len()..].starts_with(' '))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
}

/// Polls `f` every 50 ms until it returns Some, or panics after `DEADLINE` with `what` and the
/// log.
pub fn wait_for<T>(what: &str, log: &Path, f: impl FnMut() -> Option<T>) -> T {
    wait_within(what, log, DEADLINE, f)
}

/// Polls `f` every 50 ms until it returns Some, or panics after `limit` with `what` and the log.
pub fn wait_within<T>(
    what: &str,
    log: &Path,
    limit: Duration,
    mut f: impl FnMut() -> Option<T>,
) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = f() {
            return v;
        }
        assert!(
            start.elapsed() < limit,
            "{what}: not within {limit:?}; log:\n{}",
            std::fs::read_to_string(log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Asks the service at `base` for `stream`'s model `body` and checks it is the model `ravel fit
/// FILE FLAGS` gives (1e-9 relative), over `n` rows.
pub fn assert_model_is_fits(
    base: &str,
    stream: &str,
    body: &Value,
    file: &Path,
    flags: &[&str],
    n: u64,
) {
    let r = client()
        .post(format!("{base}/v1/streams/{stream}/model"))
        .json(body)
        .send()
        .unwrap();
    assert_eq!(r.status().as_u16(), 200, "{stream}: {body}");
    let api: Value = r.json().unwrap();
    let mut args = vec!["fit", file.to_str().unwrap()];
    args.extend(flags);
    let fit: Value = serde_json::from_str(&ravel(&args)).unwrap();
    assert_eq!(api["n"], n, "{stream}: {body}: {api}");
    assert_same_model(&api, &fit, 1e-9, &format!("{stream}: {body}"));
}

/// [`assert_model_is_fits`] for OLS: `stream`'s OLS model is `ravel fit FILE --method ols`'s.
pub fn assert_ols_is_fits(base: &str, stream: &str, file: &Path, n: u64) {
    let ols = serde_json::json!({"method": "ols"});
    assert_model_is_fits(base, stream, &ols, file, &["--method", "ols"], n);
}

/// The finding of `ravel check --format json` named `check`.
pub fn finding<'a>(list: &'a [Value], check: &str) -> &'a Value {
    list.iter()
        .find(|f| f["check"] == check)
        .unwrap_or_else(|| panic!("no check {check} in {list:#?}"))
}

/// Words of Rust's types and of serde's phrasing that no message for people may hold (issue
/// 59): the number types as whole words, generic types, paths (`a::b`), and serde's `struct`,
/// `untagged enum`, `variant constructor`, `bit integer`.
pub fn rust_words_in(message: &str) -> Vec<String> {
    let mut found = Vec::new();
    let words: Vec<&str> = message
        .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .collect();
    for t in [
        "usize", "isize", "u8", "u16", "u32", "u64", "u128", "i8", "i16", "i32", "i64", "f32",
        "f64",
    ] {
        if words.contains(&t) {
            found.push(t.to_string());
        }
    }
    for t in [
        "Option<",
        "Vec<",
        "HashMap<",
        "Box<",
        "struct ",
        "untagged enum",
        "variant constructor",
        "bit integer",
        "invalid type: map",
    ] {
        if message.contains(t) {
            found.push(t.to_string());
        }
    }
    // A path: `name::name` (not an IPv6 address such as [::1]).
    let b = message.as_bytes();
    if (1..b.len().saturating_sub(2)).any(|i| {
        b[i] == b':'
            && b[i + 1] == b':'
            && b[i - 1].is_ascii_alphabetic()
            && b[i + 2].is_ascii_alphabetic()
    }) {
        found.push("::".to_string());
    }
    found
}

/// Panics when `message` names a Rust type (`rust_words_in`), saying where it came from.
pub fn assert_user_words(message: &str, what: &str) {
    let found = rust_words_in(message);
    assert!(
        found.is_empty(),
        "{what}: the message names Rust's {found:?}: {message}"
    );
}

/// An HTTP answer of the test helpers, its error message (if any) checked for Rust's words:
/// every error the suite provokes through `get`, `post`, `put` passes here.
pub fn checked_answer(what: &str, status: u16, body: Value) -> (u16, Value) {
    if let Some(m) = body["error"]["message"].as_str() {
        assert_user_words(m, what);
    }
    (status, body)
}

/// The answer `body` is an error of code `code` whose message contains `says`.
pub fn assert_error_says(body: &Value, code: &str, says: &str) {
    assert_eq!(body["error"]["code"], code, "{body}");
    let message = body["error"]["message"]
        .as_str()
        .unwrap_or_else(|| panic!("no error message: {body}"));
    assert!(
        message.contains(says),
        "{says:?} not in the message: {body}"
    );
}
