//! Dotted paths into JSON events: a declared field such as `customer.age` is the key of that
//! exact name, else `age` inside the object `customer`. One definition for the stream's
//! decoding (`ingest::decode::events`) and the API's predictions from events, so both read an
//! event the same way.

use serde_json::{Map, Value};

/// The value at `path` in `obj`: a key of that exact name, else the first dotted segment's
/// object and the rest of the path inside it.
pub fn lookup<'v>(obj: &'v Map<String, Value>, path: &str) -> Option<&'v Value> {
    if let Some(v) = obj.get(path) {
        return Some(v);
    }
    let (head, rest) = path.split_once('.')?;
    match obj.get(head)? {
        Value::Object(inner) => lookup(inner, rest),
        _ => None,
    }
}
