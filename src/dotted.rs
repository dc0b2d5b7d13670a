//! Dotted paths into JSON events: a declared field such as `customer.age` is the key of that
//! exact name, else `age` inside the object `customer`. One definition for the stream's
//! decoding (`codec::events`) and the API's predictions from events, so both read an
//! event the same way; `Paths` is the same rule compiled once into a trie for the one-pass
//! reader of events (`codec::json::events`).

use ravel_core::fields::Fields;
use serde_json::{Map, Value};
use std::collections::HashMap;

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

/// Where a key leads in one object of the trie.
#[derive(Debug, Default)]
pub struct Entry {
    /// The node of the object this key's value may be: paths that go on inside it.
    pub node: Option<usize>,
    /// The candidates that end at this key: (slot, rank; lower ranks win, as `lookup`'s
    /// order).
    pub ends: Vec<(usize, usize)>,
    /// At the top level: a key the stream uses (a field, the target, or a dotted prefix of
    /// one: `Fields::uses`), not counted among the keys the stream does not use.
    pub used: bool,
}

type Node = HashMap<Box<[u8]>, Entry, foldhash::fast::FixedState>;

/// A stream's mapped paths as a trie of keys, compiled once per stream (the JSON events' fast
/// path, `codec::json::events`, walks it): slot f < n is field f, slot n the target.
/// A path `a.b.c` is found at `["a.b.c"]` (rank 0), `["a", "b.c"]` (rank 1) or `["a", "b",
/// "c"]` (rank 2): the first of them present is the one `lookup` reads.
#[derive(Debug)]
pub struct Paths {
    /// Node 0 is the message's top level.
    nodes: Vec<Node>,
    fields: usize,
}

impl Paths {
    /// The paths of `fields` and `target` (a stream that reads events).
    pub fn new(fields: &Fields, target: &str) -> Paths {
        let mut plan = Paths {
            nodes: vec![Node::default()],
            fields: fields.fields().len(),
        };
        let paths = fields.fields().iter().map(|f| f.name.as_str());
        for (slot, path) in paths.chain([target]).enumerate() {
            let segments: Vec<&str> = path.split('.').collect();
            for rank in 0..segments.len() {
                let mut node = 0;
                for s in &segments[..rank] {
                    node = plan.child(node, s.as_bytes());
                }
                let last = segments[rank..].join(".");
                plan.entry(node, last.as_bytes()).ends.push((slot, rank));
            }
            // The path and each dotted prefix of it: top-level keys the stream uses.
            for (i, _) in path.match_indices('.') {
                plan.entry(0, &path.as_bytes()[..i]).used = true;
            }
            plan.entry(0, path.as_bytes()).used = true;
        }
        plan
    }

    /// The fields' count: the slots before the target's.
    pub fn fields(&self) -> usize {
        self.fields
    }

    /// Where `key` of the object at `node` (0: the top level) leads, if anywhere.
    #[inline]
    pub fn get(&self, node: usize, key: &[u8]) -> Option<&Entry> {
        self.nodes[node].get(key)
    }

    fn entry(&mut self, node: usize, key: &[u8]) -> &mut Entry {
        self.nodes[node].entry(key.into()).or_default()
    }

    /// The node inside `key` of `node`, made if new.
    fn child(&mut self, node: usize, key: &[u8]) -> usize {
        if let Some(n) = self.entry(node, key).node {
            return n;
        }
        let n = self.nodes.len();
        self.nodes.push(Node::default());
        self.entry(node, key).node = Some(n);
        n
    }
}
