//! Configuration errors in the user's words. The `config` crate and serde describe a bad value
//! in Rust's terms ("invalid type: map, expected a sequence for key `streams`", "enum Task does
//! not have variant constructor regresion", "expected an unsigned 16 bit integer"); `explain`
//! turns each into the key as it is written in the file (`task` of the first `[[streams]]`),
//! what it holds, what it takes (the allowed values with a "did you mean", the number's
//! bounds, `[[streams]]` for a list of tables) and where it came from (the file or a `RAVEL_*`
//! variable). Messages that are already in words (`Config::check`, the custom deserializers)
//! pass through with their key in front.

use config::ConfigError;
use serde::de::DeserializeOwned;

/// The whole explanation of a configuration error.
pub fn explain(e: &ConfigError) -> String {
    match e {
        ConfigError::Type {
            origin,
            unexpected,
            expected,
            key,
        } => type_error(
            key.as_deref(),
            &unexpected.to_string(),
            expected,
            origin.as_deref(),
        ),
        ConfigError::At { error, origin, key } => {
            if let (Some(k), ConfigError::Message(m)) = (key.as_deref(), &**error)
                && let Some(said) = section_as_value(k, m)
            {
                return said;
            }
            let inner = match &**error {
                ConfigError::Message(m) => in_words(m, key.as_deref()),
                other => explain(other),
            };
            match key {
                Some(k) if !inner.contains(&key_words(k)) => {
                    format!("{}: {inner}{}", key_words(k), from(origin.as_deref()))
                }
                _ => format!("{inner}{}", from(origin.as_deref())),
            }
        }
        ConfigError::NotFound(key) => format!(
            "{} is missing: it has no default and must be set",
            key_words(key)
        ),
        ConfigError::FileParse { uri, cause } => file_error(
            &cause.to_string(),
            uri.as_deref().unwrap_or("the config file"),
        ),
        ConfigError::Message(m) => in_words(m, None),
        other => other.to_string(),
    }
}

/// At most this many mistakes of one configuration are reported in one run.
pub const MAX_ERRORS: usize = 10;

/// Deserializes `c`, reporting every mistake it holds (up to `MAX_ERRORS`) rather than the
/// first only (issue 59: a file with two mistakes took two runs to learn both). serde stops
/// at the first bad value; each one found is explained, its key taken out (so that its
/// default stands in) and the rest deserialized again. A key that cannot be taken out alone
/// (an entry of a list) or whose removal only makes it missing ends the search: what follows
/// would be a consequence, not a mistake of the file.
pub fn deserialize_all<T: DeserializeOwned>(mut c: config::Config) -> Result<T, Vec<String>> {
    let mut errors: Vec<String> = Vec::new();
    loop {
        match c.clone().try_deserialize::<T>() {
            Ok(v) if errors.is_empty() => return Ok(v),
            Ok(_) => return Err(errors),
            Err(e) => {
                let missing = matches!(e, ConfigError::NotFound(_))
                    || e.to_string().contains("missing field");
                if missing && !errors.is_empty() {
                    return Err(errors);
                }
                let said = explain(&e);
                if errors.contains(&said) {
                    return Err(errors);
                }
                errors.push(said);
                let removed = errors.len() < MAX_ERRORS
                    && key_of(&e).is_some_and(|k| remove_key(&mut c.cache, &k));
                if !removed {
                    return Err(errors);
                }
            }
        }
    }
}

/// The key an error is about, as a dotted path (`streams[0].task`); an unknown field's own
/// path (`http.adr`), not its table's.
fn key_of(e: &ConfigError) -> Option<String> {
    let (key, inner) = match e {
        ConfigError::Type { key, .. } => (key.as_deref(), e.to_string()),
        ConfigError::At { key, error, .. } => (key.as_deref(), error.to_string()),
        _ => (None, e.to_string()),
    };
    let unknown = inner
        .split_once("unknown field `")
        .and_then(|(_, r)| r.split_once('`'))
        .map(|(f, _)| f.to_string());
    match (key, unknown) {
        (Some(k), Some(f)) => Some(format!("{k}.{f}")),
        (None, Some(f)) => Some(f),
        (Some(k), None) => Some(k.to_string()),
        (None, None) => None,
    }
}

/// Takes `key` (`a.b[2].c`) out of the configuration's tree; false when it is not there or
/// is an entry of a list (the entries after it would change places).
fn remove_key(tree: &mut config::Value, key: &str) -> bool {
    use config::ValueKind;
    // `a.b[2].c`, and `streams[0]task` as the crate writes an entry's key.
    let mut steps: Vec<Result<String, usize>> = Vec::new();
    let mut name = String::new();
    let mut chars = key.chars();
    while let Some(c) = chars.next() {
        match c {
            '.' | '[' => {
                if !name.is_empty() {
                    steps.push(Ok(std::mem::take(&mut name)));
                }
                if c == '[' {
                    let index: String = chars.by_ref().take_while(|&c| c != ']').collect();
                    let Ok(i) = index.parse() else {
                        return false;
                    };
                    steps.push(Err(i));
                }
            }
            c => name.push(c),
        }
    }
    if !name.is_empty() {
        steps.push(Ok(name));
    }
    let Some((Ok(last), path)) = steps.split_last() else {
        return false;
    };
    let mut at = tree;
    for step in path {
        at = match (&mut at.kind, step) {
            (ValueKind::Table(t), Ok(name)) => match t.get_mut(name) {
                Some(v) => v,
                None => return false,
            },
            (ValueKind::Array(a), Err(i)) => match a.get_mut(*i) {
                Some(v) => v,
                None => return false,
            },
            _ => return false,
        };
    }
    match &mut at.kind {
        ValueKind::Table(t) => {
            // `retain`: the map is a HashMap or an IndexMap, as the crate's features say.
            let before = t.len();
            t.retain(|k, _| k != last);
            t.len() < before
        }
        _ => false,
    }
}

/// A list of tables written as one table (`[streams]`), or a section given a value
/// (`log = "debug"`, or `RAVEL_LOG=debug` as with RUST_LOG).
fn section_as_value(key: &str, m: &str) -> Option<String> {
    let rest = m.strip_prefix("invalid type: ")?;
    let (got, want) = rest.split_once(", expected ")?;
    if matches!(key, "streams" | "feature_streams") && got == "map" {
        return Some(format!(
            "{key} is written as one table ([{key}] or {key} = {{ ... }}), but it is a list of \
             tables: write [[{key}]] (two brackets) above each entry's keys, one [[{key}]] per \
             entry"
        ));
    }
    if !key.contains(['.', '[']) && want.starts_with("struct ") {
        let var = format!("RAVEL_{}", key.to_ascii_uppercase());
        return Some(format!(
            "{key} is {}, but {key} is a section of the configuration, not a value: in the file \
             write [{key}] and its keys below it; in the environment, {var} cannot be set \
             (the names are RAVEL_<SECTION>__<KEY>, e.g. RAVEL_LOG__LEVEL=debug for log.level)",
            value_words(got)
        ));
    }
    None
}

/// ` (from the environment)` / ` (in FILE)`, where the value came from.
fn from(origin: Option<&str>) -> String {
    match origin {
        Some("the environment") => " (set by a RAVEL_* environment variable)".into(),
        Some(o) => format!(" (in {o})"),
        None => String::new(),
    }
}

/// `streams[0].task` as the user wrote it: `task of the 1st [[streams]]`.
pub fn key_words(key: &str) -> String {
    for list in ["streams", "feature_streams"] {
        if let Some(rest) = key.strip_prefix(&format!("{list}["))
            && let Some((idx, field)) = rest.split_once(']')
            && let Ok(i) = idx.parse::<usize>()
        {
            let field = field.trim_start_matches('.');
            let which = format!("the {} [[{list}]]", ordinal(i + 1));
            return if field.is_empty() {
                which
            } else {
                format!("{field} of {which}")
            };
        }
    }
    key.to_string()
}

fn ordinal(n: usize) -> String {
    let suffix = match (n % 10, n % 100) {
        (_, 11..=13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

/// A value of the wrong kind: a table where a list goes (`[streams]` for `[[streams]]`), a
/// section set to a string (`RAVEL_LOG=debug`), a number out of its type's bounds.
fn type_error(key: Option<&str>, unexpected: &str, expected: &str, origin: Option<&str>) -> String {
    let raw = key.unwrap_or("a value");
    let k = &key.map(key_words).unwrap_or_else(|| "a value".into());
    let got = value_words(unexpected);
    if matches!(raw, "streams" | "feature_streams") && unexpected == "map" {
        let k = raw;
        return format!(
            "{k} is written as one table ([{k}] or {k} = {{ ... }}), but it is a list of \
             tables: write [[{k}]] (two brackets) above each entry's keys, one [[{k}]] per \
             entry{}",
            from(origin)
        );
    }
    if let Some((lo, hi)) = integer_bounds(expected) {
        return format!(
            "{k} = {}: out of bounds; {k} takes a whole number from {lo} to {hi}{}",
            number_of(unexpected).unwrap_or(got),
            from(origin)
        );
    }
    let want = expected_words(expected);
    if origin == Some("the environment") && want.starts_with("a table") {
        let var = format!("RAVEL_{}", raw.to_ascii_uppercase().replace('.', "__"));
        return format!(
            "{var} is set ({got}), but {k} is a section of the configuration, not a value: set \
             one of its keys instead, e.g. {var}__LEVEL for log.level (the names are \
             RAVEL_<SECTION>__<KEY>), or unset {var}"
        );
    }
    format!("{k} is {got}, but it takes {want}{}", from(origin))
}

/// The digits of `64-bit integer `5`` and its kin.
fn number_of(unexpected: &str) -> Option<String> {
    let inner = unexpected.split('`').nth(1)?;
    inner.parse::<i128>().ok().map(|n| n.to_string())
}

/// The bounds of the integer type the config crate names ("an unsigned 16 bit integer").
fn integer_bounds(expected: &str) -> Option<(i128, i128)> {
    let signed = expected.contains("an signed") || expected.contains("a signed");
    let unsigned = expected.contains("unsigned");
    if !(signed || unsigned) || !expected.contains("integer") {
        return None;
    }
    let bits: u32 = expected
        .split_whitespace()
        .find_map(|w| w.parse().ok())
        .unwrap_or(64);
    if unsigned {
        Some((0, (1i128 << bits) - 1))
    } else {
        Some((-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1))
    }
}

/// serde's and the config crate's names of values, in words.
fn value_words(unexpected: &str) -> String {
    match unexpected {
        "map" => "a table".into(),
        "sequence" => "a list".into(),
        "unit value" => "empty".into(),
        s if s.starts_with("string ") => format!("the text {}", &s["string ".len()..]),
        s if s.starts_with("boolean ") => format!("the boolean {}", &s["boolean ".len()..]),
        s if s.contains("integer `") => format!("the number {}", number_of(s).unwrap_or_default()),
        s if s.starts_with("floating point ") => {
            format!(
                "the number {}",
                s["floating point ".len()..].trim_matches('`')
            )
        }
        s => s.to_string(),
    }
}

fn expected_words(expected: &str) -> String {
    match expected {
        "a sequence" => "a list [ ... ]".into(),
        "a map" => "a table".into(),
        "a boolean" => "true or false".into(),
        "a string" => "a text in quotes".into(),
        e if e.starts_with("struct ") => "a table of keys".into(),
        e if e.contains("float") => "a number".into(),
        e => strip_rust_names(e),
    }
}

/// The names between backticks in serde's list after a message's first backticked name
/// (`` ...`given`, expected one of `a`, `b` `` -> a, b).
fn backticked(tail: &str) -> Vec<String> {
    tail.split('`')
        .skip(1)
        .step_by(2)
        .map(String::from)
        .collect()
}

/// Messages of serde and the custom deserializers, with their Rust type names replaced and,
/// for an unknown value of an enumeration, the allowed ones and a "did you mean".
fn in_words(m: &str, key: Option<&str>) -> String {
    // The config crate's own enum access: "enum Task does not have variant constructor x".
    if let Some(rest) = m.strip_prefix("enum ")
        && let Some((ty, given)) = rest.split_once(" does not have variant constructor ")
    {
        let k = key.map(key_words).unwrap_or_else(|| "the value".into());
        return match allowed_values(ty) {
            Some(values) => format!(
                "{k} = \"{given}\" is not one of {}{}",
                values.join(", "),
                did_you_mean(given, &values)
            ),
            None => format!("{k} = \"{given}\" is not one of the values it takes"),
        };
    }
    if let Some(rest) = m.strip_prefix("value of enum ") {
        let k = key.map(key_words).unwrap_or_else(|| "the value".into());
        let ty = rest.split(' ').next().unwrap_or_default();
        return match allowed_values(ty) {
            Some(values) => format!("{k} takes one of {}, in quotes", values.join(", ")),
            None => format!("{k} takes one of its values, in quotes"),
        };
    }
    // serde's, from a custom deserializer: "invalid type: map, expected a count (...)".
    if let Some(rest) = m.strip_prefix("invalid type: ")
        && let Some((got, want)) = rest.split_once(", expected ")
    {
        return format!(
            "it is {}, but it takes {}",
            value_words(got),
            expected_words(want)
        );
    }
    // serde's: "unknown variant `slow`, expected one of `plain`, `fixed`".
    if let Some(rest) = m.strip_prefix("unknown variant `")
        && let Some((given, tail)) = rest.split_once('`')
    {
        let values = backticked(tail);
        return format!("{m}{}", did_you_mean(given, &values));
    }
    if let Some(rest) = m.strip_prefix("unknown field `")
        && let Some((given, tail)) = rest.split_once('`')
    {
        let values = backticked(tail);
        return format!(
            "unknown field `{given}`{}{}",
            if values.is_empty() {
                String::new()
            } else {
                format!(" (the keys here: {})", values.join(", "))
            },
            did_you_mean(given, &values)
        );
    }
    strip_rust_names(m)
}

/// The values an enumeration of the configuration takes, read from its own deserializer (so
/// the list cannot drift from the code): serde names them when refusing a value.
fn allowed_values(type_name: &str) -> Option<Vec<String>> {
    fn of<T: DeserializeOwned>() -> Vec<String> {
        match serde_json::from_value::<T>(serde_json::Value::String("\u{1}".into())) {
            Err(e) => e
                .to_string()
                .split_once("expected")
                .map(|(_, tail)| {
                    tail.split('`')
                        .skip(1)
                        .step_by(2)
                        .map(String::from)
                        .collect()
                })
                .unwrap_or_default(),
            Ok(_) => Vec::new(),
        }
    }
    let values = match type_name {
        "Task" => of::<ravel_core::Task>(),
        "LogFormat" => of::<super::LogFormat>(),
        "OnFailure" => of::<super::OnFailure>(),
        "StoreKind" => of::<super::StoreKind>(),
        "Assignment" => of::<super::Assignment>(),
        "FoldBy" => of::<super::FoldBy>(),
        "Loss" => of::<ravel_core::features::Loss>(),
        "Missing" => of::<ravel_core::fields::Missing>(),
        _ => return None,
    };
    (!values.is_empty()).then_some(values)
}

/// `; did you mean "regression"?` when one value is close to what was written.
pub fn did_you_mean(given: &str, values: &[String]) -> String {
    let g = given.to_ascii_lowercase();
    values
        .iter()
        .map(|v| (edit_distance(&g, &v.to_ascii_lowercase()), v))
        .filter(|(d, v)| *d <= 2.max(v.len() / 3))
        .min_by_key(|(d, _)| *d)
        .map(|(_, v)| format!("; did you mean \"{v}\"?"))
        .unwrap_or_default()
}

/// Levenshtein distance.
pub(crate) fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.chars().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != *cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

/// "struct LogConfig" -> "a table", "enum Task" -> "a value", "untagged enum X" -> "any form
/// it takes": Rust's type names mean nothing to the user.
fn strip_rust_names(m: &str) -> String {
    let mut out = String::with_capacity(m.len());
    let mut words = m.split(' ').peekable();
    let mut first = true;
    while let Some(w) = words.next() {
        let next_is_type = words
            .peek()
            .is_some_and(|n| n.chars().next().is_some_and(char::is_uppercase));
        let replaced = match w {
            "struct" if next_is_type => Some("a table"),
            "enum" if next_is_type => Some("a value"),
            _ => None,
        };
        if !first {
            out.push(' ');
        }
        first = false;
        match replaced {
            Some(r) => {
                out.push_str(r);
                let ty = words.next().unwrap_or_default();
                // Keep what follows the name ("FeatureSchema," keeps its comma).
                out.push_str(ty.trim_start_matches(|c: char| c.is_alphanumeric() || c == '_'));
            }
            None => out.push_str(w),
        }
    }
    out.replace("untagged a value", "any form it takes")
}

/// A file that is not TOML, or a number TOML cannot hold; the parser's message names the line
/// and shows it, so the key is taken from there.
fn file_error(cause: &str, uri: &str) -> String {
    if cause.contains("number too large to fit in target type")
        || cause.contains("number too small to fit in target type")
    {
        // The key: from the file itself (the line whose number TOML cannot hold), else from
        // the parser's quote of the line.
        let too_large = |line: &str| -> Option<String> {
            let code = line.split_once(" | ").map_or(line, |(_, c)| c);
            let (k, v) = code.split_once('=')?;
            let v = v.trim().replace('_', "");
            let digits = v.trim_start_matches(['+', '-']);
            (!digits.is_empty()
                && digits.chars().all(|c| c.is_ascii_digit())
                && v.parse::<i64>().is_err())
            .then(|| k.trim().trim_matches('"').to_string())
        };
        let key = std::fs::read_to_string(uri)
            .ok()
            .and_then(|text| text.lines().find_map(too_large))
            .or_else(|| cause.lines().find_map(too_large))
            .unwrap_or_else(|| "a number".into());
        return format!(
            "{key} in {uri}: the number is beyond what a TOML file holds (whole numbers from \
             {} to {}); no key of ravel takes one that large: see config/ravel.toml for its \
             bounds",
            i64::MIN,
            i64::MAX
        );
    }
    format!("{uri} is not valid TOML: {cause}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_read_as_written() {
        assert_eq!(key_words("streams[0].task"), "task of the 1st [[streams]]");
        assert_eq!(
            key_words("feature_streams[11].n"),
            "n of the 12th [[feature_streams]]"
        );
        assert_eq!(key_words("streams[2]"), "the 3rd [[streams]]");
        assert_eq!(key_words("kafka.brokers"), "kafka.brokers");
    }

    #[test]
    fn enumerations_name_their_values_from_their_own_deserializers() {
        assert_eq!(
            allowed_values("Task").unwrap(),
            ["regression", "classification"]
        );
        assert_eq!(
            allowed_values("StoreKind").unwrap(),
            ["dir", "kafka", "none"]
        );
        assert_eq!(allowed_values("NoSuchType"), None);
        assert_eq!(
            did_you_mean("regresion", &allowed_values("Task").unwrap()),
            "; did you mean \"regression\"?"
        );
        assert_eq!(did_you_mean("banana", &allowed_values("Task").unwrap()), "");
    }

    #[test]
    fn integer_bounds_come_from_the_type() {
        assert_eq!(
            integer_bounds("an unsigned 16 bit integer"),
            Some((0, 65535))
        );
        assert_eq!(
            integer_bounds("an signed 32 bit integer"),
            Some((-2147483648, 2147483647))
        );
        assert_eq!(integer_bounds("a boolean"), None);
    }

    #[test]
    fn rust_type_names_are_replaced() {
        assert_eq!(
            strip_rust_names("invalid type: string \"\", expected struct LogConfig"),
            "invalid type: string \"\", expected a table"
        );
        assert_eq!(
            strip_rust_names("data did not match any variant of untagged enum FeatureSchema"),
            "data did not match any variant of any form it takes"
        );
    }
}
