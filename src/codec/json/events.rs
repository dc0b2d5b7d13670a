//! The fast path of JSON events (streams that declare a `target`): the stream's mapped dotted
//! paths (its fields and its target) compiled once into a trie (`crate::dotted::Paths`), and
//! one pass over a message's bytes (`pick`) that reads the mapped values and checks and skips
//! everything else (nested objects, lists, strings with escapes) without building a tree or
//! allocating for what it skips. It answers what `events::decode` reads from serde_json's
//! tree: the same lookups (`crate::dotted::lookup`: a key of the path's exact name first, then
//! the first dotted segment's object), the same numbers (`fast_json::number_at`, bit for bit
//! serde_json's), the same count of keys the stream does not use. Whatever it does not take
//! whole it declines (`None`) and the caller reads that message as a tree: JSON that
//! serde_json refuses or might (invalid UTF-8, a bad escape or number, a key given twice), a
//! key with an escape, nesting beyond `MAX_DEPTH`, an object of more than `MAX_KEYS` keys, a
//! named mini-batch (`"columns"`), a mapped value of a kind a field or the target refuses.
//! Every refusal is thus the tree path's, with its reason and wording.

use super::{next_or_end, number_at};
use crate::codec::schemad::Picked;
use crate::dotted::{Entry, Paths as Plan};
use serde_json::{Number, Value};

/// Nesting the fast path follows (serde_json refuses beyond 128).
const MAX_DEPTH: u32 = 100;

/// Keys of one object the fast path checks for duplicates; larger objects go to the tree.
const MAX_KEYS: usize = 256;

/// The mapped values of an event, read in one pass over `payload` by `plan`, as
/// `events::decode_picked` takes them (the fields' values, the target's, the top-level keys
/// the stream does not use); `None` when the message is left to the tree path. With
/// `read_target` false (rows to score) the target's value is not looked at.
pub fn pick(payload: &[u8], plan: &Plan, read_target: bool) -> Option<Picked> {
    if payload.len() > crate::codec::events::MAX_NAMED_BYTES {
        return None;
    }
    let slots = plan.fields() + 1;
    let mut scan = Scan {
        b: payload,
        i: 0,
        plan,
        rank: vec![NONE; slots],
        values: vec![None; slots],
        keys: Vec::with_capacity(64),
        unused: 0,
    };
    scan.ws();
    scan.eat(b'{')?;
    scan.object(Some(0), true, 1)?;
    scan.ws();
    if scan.i != payload.len() {
        return None;
    }
    // A value found but not taken (an object or an unusual list where a value belongs): the
    // tree path refuses it, in its words.
    for (slot, &rank) in scan.rank.iter().enumerate() {
        if rank & ODD != 0 && rank != NONE && (slot < plan.fields() || read_target) {
            return None;
        }
    }
    let label = scan.values.pop().flatten();
    Some(Picked {
        values: scan.values,
        label: if read_target { label } else { None },
        unused: scan.unused,
    })
}

/// No value found for a slot yet.
const NONE: usize = usize::MAX;
/// The rank's flag for a value found that the fast path does not take.
const ODD: usize = 1 << (usize::BITS - 2);

struct Scan<'a, 'p> {
    b: &'a [u8],
    i: usize,
    plan: &'p Plan,
    /// Per slot: the rank of the value found (NONE: none yet), with `ODD`.
    rank: Vec<usize>,
    values: Vec<Option<Value>>,
    /// The keys of the objects open, for duplicates: (hash, start, end).
    keys: Vec<(u64, usize, usize)>,
    unused: u64,
}

impl Scan<'_, '_> {
    #[inline]
    fn ws(&mut self) {
        while let Some(b' ' | b'\n' | b'\r' | b'\t') = self.b.get(self.i) {
            self.i += 1;
        }
    }

    #[inline]
    fn eat(&mut self, c: u8) -> Option<()> {
        (self.b.get(self.i) == Some(&c)).then(|| self.i += 1)
    }

    /// An object's members, after its `{`: at `node` of the plan (None: nothing mapped
    /// inside), `top` for the message itself.
    fn object(&mut self, node: Option<usize>, top: bool, depth: u32) -> Option<()> {
        if depth > MAX_DEPTH {
            return None;
        }
        self.ws();
        if self.eat(b'}').is_some() {
            return Some(());
        }
        let base = self.keys.len();
        let mut bloom = [0u64; 4];
        let plan = self.plan;
        loop {
            self.ws();
            self.eat(b'"')?;
            let (start, end, escaped) = self.string()?;
            if escaped || self.keys.len() - base >= MAX_KEYS {
                return None;
            }
            let key = &self.b[start..end];
            let h = hash(key);
            let bit = (h >> 56) as usize;
            if bloom[bit >> 6] & (1 << (bit & 63)) != 0
                && self.keys[base..]
                    .iter()
                    .any(|&(h2, s, e)| h2 == h && &self.b[s..e] == key)
            {
                return None;
            }
            bloom[bit >> 6] |= 1 << (bit & 63);
            self.keys.push((h, start, end));
            self.ws();
            self.eat(b':')?;
            self.ws();
            let entry = node.and_then(|n| plan.get(n, key));
            if top {
                if key == b"columns" {
                    return None;
                }
                if !entry.is_some_and(|e| e.used) {
                    self.unused += 1;
                }
            }
            match entry {
                Some(e) if e.node.is_some() || !e.ends.is_empty() => self.mapped(e, depth)?,
                _ => self.skip(depth)?,
            }
            if next_or_end(self.b, &mut self.i, b'}')? {
                break;
            }
        }
        self.keys.truncate(base);
        Some(())
    }

    /// The value of a key in the plan: read for the candidates that end there, followed
    /// inside for the paths that go on.
    fn mapped(&mut self, e: &Entry, depth: u32) -> Option<()> {
        let value = match self.b.get(self.i)? {
            b'{' => {
                self.i += 1;
                self.object(e.node, false, depth + 1)?;
                None
            }
            _ if e.ends.is_empty() => {
                self.skip(depth)?;
                return Some(());
            }
            b'[' => {
                self.i += 1;
                self.list(depth + 1)?
            }
            _ => self.scalar(depth)?,
        };
        for &(slot, rank) in &e.ends {
            if rank < self.rank[slot] & !ODD {
                self.rank[slot] = rank | if value.is_none() { ODD } else { 0 };
                self.values[slot].clone_from(&value);
            }
        }
        Some(())
    }

    /// A mapped list, after its `[`: `Some(list)` of strings, numbers and booleans (a hashed
    /// feature's tokens), `Some(None)` for any other list (checked and skipped).
    fn list(&mut self, depth: u32) -> Option<Option<Value>> {
        if depth > MAX_DEPTH {
            return None;
        }
        let mut items = Some(Vec::new());
        self.ws();
        if self.eat(b']').is_some() {
            return Some(items.map(Value::Array));
        }
        loop {
            self.ws();
            match self.b.get(self.i)? {
                b'{' | b'[' | b'n' => {
                    self.skip(depth)?;
                    items = None;
                }
                _ => {
                    let v = self.scalar(depth)?;
                    if let (Some(items), Some(v)) = (items.as_mut(), v) {
                        items.push(v);
                    }
                }
            }
            if next_or_end(self.b, &mut self.i, b']')? {
                return Some(items.map(Value::Array));
            }
        }
    }

    /// A string, number, boolean or null as serde_json's value of it.
    fn scalar(&mut self, depth: u32) -> Option<Option<Value>> {
        Some(Some(match self.b.get(self.i)? {
            b'"' => {
                self.i += 1;
                let (start, end, escaped) = self.string()?;
                let text = if escaped {
                    serde_json::from_slice::<String>(&self.b[start - 1..=end]).ok()?
                } else {
                    std::str::from_utf8(&self.b[start..end]).ok()?.to_string()
                };
                Value::String(text)
            }
            b'-' | b'0'..=b'9' => {
                let (v, end) = number_at(self.b, self.i)?;
                self.i = end;
                Value::Number(Number::from_f64(v)?)
            }
            b't' | b'f' | b'n' => {
                let c = self.b[self.i];
                self.skip(depth)?;
                match c {
                    b't' => Value::Bool(true),
                    b'f' => Value::Bool(false),
                    _ => Value::Null,
                }
            }
            _ => return None,
        }))
    }

    /// Any value, checked as serde_json checks it and skipped.
    fn skip(&mut self, depth: u32) -> Option<()> {
        let b = self.b;
        match b.get(self.i)? {
            b'{' => {
                self.i += 1;
                self.object(None, false, depth + 1)
            }
            b'[' => {
                self.i += 1;
                if depth + 1 > MAX_DEPTH {
                    return None;
                }
                self.ws();
                if self.eat(b']').is_some() {
                    return Some(());
                }
                loop {
                    self.ws();
                    self.skip(depth + 1)?;
                    if next_or_end(b, &mut self.i, b']')? {
                        return Some(());
                    }
                }
            }
            b'"' => {
                self.i += 1;
                self.string().map(|_| ())
            }
            b'-' | b'0'..=b'9' => {
                self.i = skip_number(b, self.i)?;
                Some(())
            }
            c => {
                let word: &[u8] = match c {
                    b't' => b"true",
                    b'f' => b"false",
                    b'n' => b"null",
                    _ => return None,
                };
                b[self.i..].starts_with(word).then(|| self.i += word.len())
            }
        }
    }

    /// A string after its opening quote, checked as serde_json checks a string it reads (no
    /// control characters, escapes of JSON's set, `\u` surrogates paired, valid UTF-8): its
    /// bytes' range and whether it holds an escape. Only strings can hold bytes above ASCII
    /// (anywhere else the scan declines them as it declines any unexpected byte), so UTF-8 is
    /// checked here, for the strings that have such bytes, not over the whole message.
    fn string(&mut self) -> Option<(usize, usize, bool)> {
        let b = self.b;
        let start = self.i;
        let mut i = start;
        let mut escaped = false;
        let mut wide = false;
        loop {
            match *b.get(i)? {
                b'"' => {
                    if wide {
                        std::str::from_utf8(&b[start..i]).ok()?;
                    }
                    self.i = i + 1;
                    return Some((start, i, escaped));
                }
                0x80.. => {
                    wide = true;
                    i += 1;
                }
                0..0x20 => return None,
                b'\\' => {
                    escaped = true;
                    match *b.get(i + 1)? {
                        b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't' => i += 2,
                        b'u' => {
                            let n = hex4(b, i + 2)?;
                            i += 6;
                            if (0xDC00..=0xDFFF).contains(&n) {
                                return None;
                            }
                            if (0xD800..=0xDBFF).contains(&n) {
                                if b.get(i..i + 2) != Some(b"\\u") {
                                    return None;
                                }
                                if !(0xDC00..=0xDFFF).contains(&hex4(b, i + 2)?) {
                                    return None;
                                }
                                i += 6;
                            }
                        }
                        _ => return None,
                    }
                }
                _ => i += 1,
            }
        }
    }
}

/// Four hex digits at `i`.
fn hex4(b: &[u8], i: usize) -> Option<u16> {
    let digits = b.get(i..i + 4)?;
    let mut n = 0u16;
    for &c in digits {
        n = n * 16 + (c as char).to_digit(16)? as u16;
    }
    Some(n)
}

/// A key's hash, for the duplicate check (equal keys have equal hashes; a collision costs
/// one comparison of the bytes). Read as whole words straight from the key, first and last
/// eight (or four) bytes overlapping, and mixed by one wide multiply: no byte-by-byte copy
/// into a word, which stalled the load after it (a third of the pass's time on short keys).
#[inline]
fn hash(key: &[u8]) -> u64 {
    let n = key.len();
    let (a, b) = if n >= 8 {
        (word_at(key, 0), word_at(key, n - 8))
    } else if n >= 4 {
        (half_at(key, 0), half_at(key, n - 4))
    } else if n > 0 {
        let three =
            (u64::from(key[0]) << 16) | (u64::from(key[n / 2]) << 8) | u64::from(key[n - 1]);
        (three, 0)
    } else {
        (0, 0)
    };
    let wide =
        u128::from(a ^ 0x243f_6a88_85a3_08d3) * u128::from(b ^ (n as u64) ^ 0x1319_8a2e_0370_7344);
    (wide as u64) ^ ((wide >> 64) as u64)
}

#[inline(always)]
fn word_at(b: &[u8], i: usize) -> u64 {
    u64::from_le_bytes(b[i..i + 8].try_into().expect("eight bytes"))
}

#[inline(always)]
fn half_at(b: &[u8], i: usize) -> u64 {
    u64::from(u32::from_le_bytes(
        b[i..i + 4].try_into().expect("four bytes"),
    ))
}

/// A number the stream does not use, checked and skipped without its value: JSON's grammar,
/// where it ends. Without an exponent, and with an integer part short enough that it cannot
/// round to infinity, every number of the grammar is one serde_json takes; any other (an
/// exponent, a longer integer part) is read whole by `number_at`, which knows serde_json's
/// range. `None` where `number_at` answers `None`.
#[inline]
fn skip_number(b: &[u8], start: usize) -> Option<usize> {
    let digits = |mut i: usize| {
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        i
    };
    let mut i = start + usize::from(b.get(start) == Some(&b'-'));
    let int_start = i;
    match *b.get(i)? {
        b'0' => i += 1,
        b'1'..=b'9' => i = digits(i + 1),
        _ => return None,
    }
    // 10^300 and below are finite whatever follows the point.
    let long = i - int_start > 300;
    if b.get(i) == Some(&b'.') {
        let end = digits(i + 1);
        if end == i + 1 {
            return None;
        }
        i = end;
    }
    if long || matches!(b.get(i), Some(b'e' | b'E')) {
        return number_at(b, start).map(|(_, end)| end);
    }
    Some(i)
}

#[cfg(test)]
mod tests {
    use super::pick;
    use crate::codec::format::{Reason, Schema, Tally, decode_tallied};
    use crate::dotted::Paths as Plan;
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    use ravel_core::fields::{Field, Fields, Kind, Missing};

    /// Fields at every kind and depth, each with its own policy: a flat key, paths two and
    /// three deep, one whose dotted name may also be a flat key, a categorical and a hashed.
    fn fields(m: [Missing; 6]) -> Fields {
        Fields::new(vec![
            Field {
                missing: m[0],
                ..Field::numeric("sqft")
            },
            Field {
                missing: m[1],
                ..Field::numeric("user.age")
            },
            Field {
                missing: m[2],
                ..Field::numeric("user.geo.lat")
            },
            Field {
                name: "region".into(),
                kind: Kind::Categorical {
                    levels: vec!["north".into(), "south".into(), "é".into()],
                },
                missing: m[3],
            },
            Field {
                name: "tags".into(),
                kind: Kind::Hashed { buckets: 8 },
                missing: m[4],
            },
            Field {
                missing: m[5],
                ..Field::numeric("a.b")
            },
        ])
        .unwrap()
    }

    /// Keys drawn at every level: the mapped paths' segments and joins, and others.
    const KEYS: [&str; 22] = [
        "sqft",
        "user",
        "age",
        "geo",
        "lat",
        "geo.lat",
        "user.age",
        "user.geo",
        "region",
        "tags",
        "a",
        "b",
        "a.b",
        "price",
        "label",
        "value",
        "label.value",
        "id",
        "note",
        "x",
        "rows",
        "",
    ];

    fn space(r: &mut StdRng) -> &'static str {
        ["", "", "", " ", "\n\t ", "  "][r.random_range(0..6)]
    }

    fn number(r: &mut StdRng) -> String {
        match r.random_range(0..20) {
            0 => "42".into(),
            1 => "-7".into(),
            2 => "-0".into(),
            3 => "0.5".into(),
            4 => "1.5e3".into(),
            5 => "2E-2".into(),
            6 => "12345678901234567890123".into(),
            7 => "0.1000000000000000055511151231257827".into(),
            8 => "9007199254740993".into(),
            9 => "-1e-400".into(),
            // Refused by serde_json (out of range, not JSON's grammar), rarely.
            10 if r.random_bool(0.2) => "1e400".into(),
            11 if r.random_bool(0.2) => {
                ["01", "1.", "-", ".5", "1e", "+1", "0x1"][r.random_range(0..7)].into()
            }
            12 => format!("{}", r.random_range(-1e6..1e6f64)),
            13 => format!("{:e}", r.random_range(-1e-3..1e-3f64)),
            _ => format!("{:?}", r.random_range(-10.0..10.0f64)),
        }
    }

    fn string(r: &mut StdRng) -> String {
        let s = match r.random_range(0..16) {
            0 => "north",
            1 => "south",
            2 => r"\u00e9",
            3 => "é",
            4 => r#"a\"b\\c\/d\b\f\n\r\t"#,
            5 => r"\ud83d\ude00 smile",
            6 => r"\u0000",
            7 => "west",
            // Refused by serde_json, rarely: a bad escape, lone surrogates, a control byte.
            8 if r.random_bool(0.2) => r"bad \x escape",
            9 if r.random_bool(0.2) => r"\ud800 lone",
            10 if r.random_bool(0.2) => r"\udc00 trailing",
            11 if r.random_bool(0.2) => "tab\there",
            12 if r.random_bool(0.2) => r"\u12",
            _ => "x",
        };
        format!("\"{s}\"")
    }

    fn key(r: &mut StdRng) -> String {
        let k = KEYS[r.random_range(0..KEYS.len())];
        // A key with an escape, now and then the same as a mapped one.
        match r.random_range(0..30) {
            0 => r"\u0073qft".into(),
            1 => r"us\u0065r".into(),
            2 => r#"n\"ote"#.into(),
            // A named mini-batch's key: the tree path reads the message as one.
            3 => "columns".into(),
            _ => k.into(),
        }
    }

    fn value(r: &mut StdRng, depth: usize, out: &mut String) {
        let pick = r.random_range(0..100);
        match pick {
            0..35 => out.push_str(&number(r)),
            35..45 => out.push_str(&string(r)),
            45..50 => out.push_str(["true", "false"][r.random_range(0..2)]),
            50..58 => out.push_str("null"),
            58..80 if depth < 5 => object(r, depth + 1, out),
            80..92 if depth < 5 => {
                out.push('[');
                let n = r.random_range(0..4);
                for i in 0..n {
                    if i > 0 {
                        out.push(',');
                    }
                    out.push_str(space(r));
                    match r.random_range(0..10) {
                        0..4 => out.push_str(&string(r)),
                        4..7 => out.push_str(&number(r)),
                        7 => out.push_str("true"),
                        8 if r.random_bool(0.3) => out.push_str("null"),
                        _ => value(r, depth + 1, out),
                    }
                    out.push_str(space(r));
                }
                out.push(']');
            }
            _ => out.push_str(&number(r)),
        }
    }

    fn object(r: &mut StdRng, depth: usize, out: &mut String) {
        out.push('{');
        let mut seen = std::collections::HashSet::new();
        let mut keys: Vec<String> = (0..r.random_range(0..7))
            .map(|_| key(r))
            .filter(|k| seen.insert(k.clone()))
            .collect();
        // A key given twice, now and then (at any depth: refused by the tree path).
        if !keys.is_empty() && r.random_bool(0.03) {
            let k = keys[r.random_range(0..keys.len())].clone();
            keys.push(k);
        }
        for (i, k) in keys.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(space(r));
            out.push_str(&format!("\"{k}\"{}:{}", space(r), space(r)));
            value(r, depth, out);
            out.push_str(space(r));
        }
        out.push('}');
    }

    /// One fuzzed event: mostly objects whose keys are the mapped paths' pieces, now and
    /// then cut short or not an object.
    fn event(r: &mut StdRng) -> String {
        let mut out = String::from(space(r));
        object(r, 0, &mut out);
        out.push_str(space(r));
        match r.random_range(0..200) {
            0 => out.truncate(out.len() / 2),
            1 => out = "[1, 2]".into(),
            2 => out.push_str(" x"),
            _ => {}
        }
        out
    }

    /// An event that carries most mapped paths, each at one of the places `lookup` finds it
    /// (a flat dotted key or nested objects), mostly of the right kind, among keys the stream
    /// does not use: most of them make rows.
    fn likely_event(r: &mut StdRng) -> String {
        let mut members: Vec<String> = Vec::new();
        let mut user: Vec<String> = Vec::new();
        let mut a: Vec<String> = Vec::new();
        let mut label: Vec<String> = Vec::new();
        let some = |r: &mut StdRng, v: String| -> String {
            match r.random_range(0..30) {
                0 => "null".into(),
                1 => string(r),
                _ => v,
            }
        };
        let v = number(r);
        members.push(format!("\"sqft\": {}", some(r, v)));
        // A number at its flat dotted key one time in `n`, else inside its object.
        let place = |r: &mut StdRng,
                     n: i32,
                     (flat, key): (&str, &str),
                     members: &mut Vec<String>,
                     inner: &mut Vec<String>| {
            let v = number(r);
            match r.random_range(0..n) {
                0 => members.push(format!("\"{flat}\": {}", some(r, v))),
                _ => inner.push(format!("\"{key}\": {}", some(r, v))),
            }
        };
        place(r, 3, ("user.age", "age"), &mut members, &mut user);
        let v = number(r);
        match r.random_range(0..4) {
            0 => members.push(format!("\"user.geo.lat\": {}", some(r, v))),
            1 => user.push(format!("\"geo.lat\": {}", some(r, v))),
            _ => user.push(format!("\"geo\": {{\"lat\": {}, \"lon\": 1}}", some(r, v))),
        }
        let v = ["\"north\"", "\"south\"", r#""\u00e9""#, "\"west\"", "3"][r.random_range(0..5)];
        members.push(format!("\"region\": {}", some(r, v.into())));
        let v = r#"["a", "b\n", 3, true]"#.to_string();
        members.push(format!("\"tags\": {}", some(r, v)));
        place(r, 2, ("a.b", "b"), &mut members, &mut a);
        let v = number(r);
        members.push(format!("\"price\": {}", some(r, v)));
        let v = number(r);
        label.push(format!("\"value\": {}", some(r, v)));
        for (name, inner) in [("user", user), ("a", a), ("label", label)] {
            if !inner.is_empty() {
                members.push(format!("\"{name}\": {{{}}}", inner.join(", ")));
            }
        }
        for _ in 0..r.random_range(0..4) {
            let mut noise = String::new();
            value(r, 2, &mut noise);
            members.push(format!("\"k{}\": {noise}", r.random_range(0..1000)));
        }
        // Any order.
        for i in (1..members.len()).rev() {
            members.swap(i, r.random_range(0..=i));
        }
        format!("{{{}}}", members.join(", "))
    }

    /// The tree path's schema of events of `f` with `target` (no compiled paths: a test adds
    /// `plan` for the fast path).
    fn tree_schema<'a>(
        f: &'a Fields,
        target: &'a str,
        skip_missing_target: bool,
        unlabelled: bool,
    ) -> Schema<'a> {
        Schema {
            p: f.p(),
            fields: Some(f),
            target: Some(target),
            skip_missing_target,
            classification: false,
            unlabelled,
            wire: None,
            schema_header: None,
            plan: None,
        }
    }

    /// Rows (as bits), targets, tally (but `events_by_tree`), or the refusal.
    type Outcome = Result<(Vec<u64>, Vec<u64>, Tally), (Reason, String)>;

    fn decode(msg: &[u8], s: &Schema) -> (Outcome, bool) {
        let (mut x, mut y, mut t) = (vec![], vec![], Tally::default());
        let r = decode_tallied(msg, s, &mut x, &mut y, &mut t);
        let by_tree = t.events_by_tree > 0;
        t.events_by_tree = 0;
        let bits = |v: Vec<f64>| v.into_iter().map(f64::to_bits).collect();
        let out = match r {
            Ok(_) => Ok((bits(x), bits(y), t)),
            Err(e) => Err((e.reason, e.message)),
        };
        (out, by_tree)
    }

    #[test]
    fn the_fast_path_reads_every_fuzzed_event_as_the_tree_does() {
        use Missing::{Indicator, Reject, SkipRow};
        let mut r = StdRng::seed_from_u64(48);
        let policies = [
            [Reject; 6],
            [SkipRow; 6],
            [Indicator; 6],
            [Indicator, SkipRow, Reject, Indicator, SkipRow, Indicator],
        ];
        let (mut fast, mut accepted, mut total, mut rows) = (0, 0, 0, 0);
        for (k, m) in policies.into_iter().enumerate() {
            let f = fields(m);
            for target in ["price", "label.value"] {
                let plan = Plan::new(&f, target);
                for unlabelled in [false, true] {
                    let tree = tree_schema(&f, target, k != 0, unlabelled);
                    let with_plan = Schema {
                        plan: Some(&plan),
                        ..tree
                    };
                    for i in 0..3000 {
                        let msg = if i % 2 == 0 {
                            event(&mut r)
                        } else {
                            likely_event(&mut r)
                        };
                        let (want, _) = decode(msg.as_bytes(), &tree);
                        let (got, by_tree) = decode(msg.as_bytes(), &with_plan);
                        assert_eq!(got, want, "{msg}");
                        total += 1;
                        if let Ok((_, y, _)) = &want {
                            accepted += 1;
                            fast += usize::from(!by_tree);
                            rows += y.len();
                        }
                        // The fast path answers only what the tree accepts.
                        let picked = pick(msg.as_bytes(), &plan, !unlabelled).is_some();
                        assert!(!picked || !by_tree || want.is_err(), "{msg}");
                    }
                }
            }
        }
        // Both paths are exercised: most accepted events take the fast one, many make rows,
        // and some are refused.
        assert!(
            accepted > total / 3 && accepted < total && rows > total / 4,
            "{accepted} of {total} accepted, {rows} rows"
        );
        assert!(
            fast * 10 > accepted * 7,
            "{fast} of {accepted} accepted read fast"
        );
    }

    #[test]
    fn plain_events_take_the_fast_path_with_the_tree_paths_values() {
        let f = fields([Missing::Indicator; 6]);
        let plan = Plan::new(&f, "label.value");
        let s = Schema {
            plan: Some(&plan),
            ..tree_schema(&f, "label.value", true, false)
        };
        // Unknown nested objects and lists, escapes in values, a flat dotted key beside the
        // object of the same path (the flat key wins), a hashed list.
        let msg = r#"{"id": "e\n\u00e9\"", "skip": [{"a": [1, {"b": null}]}, "\ud83d\ude00"],
            "user": {"age": 41, "geo": {"lat": -0.0, "x": [true]}}, "region": "\u00e9",
            "a": {"b": 1}, "a.b": 2.5e-3, "tags": ["x", 3, false], "sqft": 12345678901234567890,
            "label": {"value": 7}}"#;
        let (got, by_tree) = decode(msg.as_bytes(), &s);
        assert!(!by_tree, "read fast");
        let (x, y, t) = got.unwrap();
        let x: Vec<f64> = x.into_iter().map(f64::from_bits).collect();
        // Columns: sqft(+m), user.age(+m), user.geo.lat(+m), region south, é, other, m;
        // tags#0-7, m; a.b, m.
        assert_eq!(x[0], 12345678901234567890.0);
        assert_eq!((x[2], x[4]), (41.0, -0.0));
        assert!(x[4].is_sign_negative());
        assert_eq!(&x[6..10], [0.0, 1.0, 0.0, 0.0]);
        assert_eq!(x[19], 0.0025);
        assert_eq!(y, [7f64.to_bits()]);
        assert_eq!(t.ignored_fields, 2, "id and skip");
        // A key with an escape, or given twice, goes to the tree path, which reads the
        // first and refuses the second.
        let (got, by_tree) = decode(br#"{"\u0073qft": 1, "label": {"value": 1}}"#, &s);
        assert!(by_tree && got.is_ok());
        let (got, by_tree) = decode(br#"{"n": {"k": 1, "k": 2}, "label": {"value": 1}}"#, &s);
        assert!(by_tree);
        assert_eq!(got.unwrap_err().0, Reason::Malformed);
    }

    /// A number skipped is taken exactly where `number_at` takes it (and ends where it ends):
    /// every number the fuzzed events hold, and the grammar's corners.
    #[test]
    fn numbers_skipped_are_those_number_at_takes() {
        let mut r = StdRng::seed_from_u64(62);
        let mut cases: Vec<String> = (0..20_000).map(|_| number(&mut r)).collect();
        for c in [
            "0",
            "-0",
            "01",
            "-",
            "1.",
            ".5",
            "1e",
            "1e5",
            "1E+5",
            "-1e-400",
            "1e400",
            "0.0",
            "123456789012345678901234567890",
            "-12.000001",
            "7x",
            "1.5.5",
            "00.1",
            "-01",
        ] {
            cases.push(c.into());
        }
        cases.push(format!("{}.5", "9".repeat(300)));
        cases.push("9".repeat(301));
        cases.push("9".repeat(309));
        cases.push(format!("-{}", "1".repeat(320)));
        for c in cases {
            for tail in ["", ",", "}", " ", "]"] {
                let b = format!("{c}{tail}");
                let b = b.as_bytes();
                assert_eq!(
                    super::skip_number(b, 0),
                    super::number_at(b, 0).map(|(_, end)| end),
                    "{c:?} followed by {tail:?}"
                );
            }
        }
    }

    /// UTF-8 is checked in the strings that hold bytes above ASCII: text in any language is
    /// read on the fast path, as the tree reads it; a byte sequence that is not UTF-8, in a
    /// key, in a value the stream reads or skips, or outside any string, leaves the message to
    /// the tree, which refuses it in its words.
    #[test]
    fn utf8_is_checked_where_strings_hold_it() {
        let f = fields([Missing::Indicator; 6]);
        let plan = Plan::new(&f, "price");
        let tree = tree_schema(&f, "price", true, false);
        let with_plan = Schema {
            plan: Some(&plan),
            ..tree
        };
        let good = "{\"note\": \"caf\u{e9} \u{1f600} \u{4e2d}\", \"region\": \"\u{e9}\", \"sqft\": 3, \"price\": 1}";
        assert!(pick(good.as_bytes(), &plan, true).is_some());
        let (fast, by_tree) = decode(good.as_bytes(), &with_plan);
        assert!(!by_tree);
        assert_eq!(fast, decode(good.as_bytes(), &tree).0);
        let bad: [&[u8]; 5] = [
            b"{\"note\": \"caf\xe9\", \"sqft\": 3, \"price\": 1}",
            b"{\"n\xc3\": 1, \"sqft\": 3, \"price\": 1}",
            b"{\"region\": \"\xed\xa0\x80\", \"sqft\": 3, \"price\": 1}",
            b"{\"sqft\": 3, \"price\": 1}\xff",
            b"{\"sqft\": 3,\xc2\xa0\"price\": 1}",
        ];
        for msg in bad {
            assert!(pick(msg, &plan, true).is_none(), "{msg:?}");
            let (fast, by_tree) = decode(msg, &with_plan);
            assert!(by_tree, "{msg:?}");
            assert_eq!(fast, decode(msg, &tree).0, "{msg:?}");
            assert!(fast.is_err(), "{msg:?}");
        }
    }
}
