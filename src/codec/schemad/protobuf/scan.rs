//! Protobuf messages read by the stream's mapped paths alone (issue 48): a scanner driven by
//! the message type's descriptor over prost's own wire primitives, the functions
//! prost-reflect's `DynamicMessage` decodes with (`prost::encoding::*::merge`, `merge_loop`,
//! `decode_key`, in the same order), so every field is checked exactly as there (wire types,
//! lengths, UTF-8, nesting depth), but only the mapped fields become values: the others are
//! checked and dropped, and no message is built. Its answer is what `Plan::pick` reads from
//! the decoded message, or none (a group or an extension field it does not take, a path
//! through a oneof, a leaf that is a list, map or message, or bytes prost-reflect would
//! refuse): the caller then decodes the message and reads it as before, and a refusal keeps
//! its reason. Checked against that path on fuzzed messages of every field type (tests).

use super::scalar;
use crate::codec::schemad::Picked;
use crate::codec::schemad::avro::float;
use prost_reflect::prost::DecodeError;
use prost_reflect::prost::Message;
use prost_reflect::prost::bytes::{Buf, BufMut};
use prost_reflect::prost::encoding::{self, DecodeContext, WireType};
use prost_reflect::{FieldDescriptor, Kind, MessageDescriptor, Value as P};
use serde_json::Value;
use std::collections::HashMap;

/// Values by field number: a table indexed by the number when the numbers are small (as
/// they nearly always are), else a map. Looked up once or twice for every field on the wire.
struct ByNumber<T> {
    dense: Vec<Option<T>>,
    sparse: HashMap<u32, T>,
}

/// The largest field number kept in the dense table.
const DENSE_NUMBERS: u32 = 4096;

impl<T> ByNumber<T> {
    fn new() -> ByNumber<T> {
        ByNumber {
            dense: Vec::new(),
            sparse: HashMap::new(),
        }
    }

    fn get(&self, n: u32) -> Option<&T> {
        match self.dense.get(n as usize) {
            Some(v) => v.as_ref(),
            None => self.sparse.get(&n),
        }
    }

    fn get_mut(&mut self, n: u32) -> Option<&mut T> {
        if n < DENSE_NUMBERS {
            self.dense.get_mut(n as usize).and_then(Option::as_mut)
        } else {
            self.sparse.get_mut(&n)
        }
    }

    fn insert(&mut self, n: u32, v: T) {
        if n < DENSE_NUMBERS {
            let i = n as usize;
            if self.dense.len() <= i {
                self.dense.resize_with(i + 1, || None);
            }
            self.dense[i] = Some(v);
        } else {
            self.sparse.insert(n, v);
        }
    }
}

/// One field of a message type, as the scanner needs it.
struct Field {
    kind: Kind,
    list: bool,
    map: bool,
    group: bool,
    /// The message type (index into `Scanner::types`) of a message field, or of a map's
    /// values when they are messages.
    child: Option<usize>,
    /// The oneof it belongs to (index among its type's oneofs).
    oneof: Option<usize>,
}

/// A message type: its fields by number.
struct Type {
    desc: MessageDescriptor,
    fields: ByNumber<Field>,
}

/// What a field on the mapped paths leads to.
enum Target {
    /// A leaf: its value goes to these slots.
    Leaf(Vec<usize>),
    /// A message on the way to leaves: its node.
    Into(usize),
}

/// A message on the mapped paths (node 0: the top-level message).
struct Node {
    ty: usize,
    targets: ByNumber<Target>,
    /// Where this node's oneofs start in `State::oneof_last`.
    oneof_base: usize,
}

/// One slot (a stream field, then the target): its leaf, or None for a name the type
/// lacks (always absent).
struct Slot {
    number: u32,
    /// The nodes on the way below the top-level message (the leaf's own message last; empty
    /// for a top-level field).
    chain: Vec<usize>,
    /// The value of a field without presence that was not on the wire (proto3 scalars).
    default: Option<Value>,
    /// The oneof the leaf belongs to, as an index into `State::oneof_last`.
    oneof: Option<usize>,
}

/// A top-level field the stream does not use, counted when present as `Plan::pick` counts it.
struct Unused {
    number: u32,
    presence: bool,
    oneof: Option<usize>,
}

/// The scanner of one message type for one stream's fields and target.
pub struct Scanner {
    types: Vec<Type>,
    nodes: Vec<Node>,
    slots: Vec<Option<Slot>>,
    unused: Vec<Unused>,
    oneofs: usize,
    /// Whether an unused top-level field is counted only when on the wire (presence, no
    /// oneof): then the top-level numbers seen are kept.
    track_seen: bool,
}

/// The most message types a scanner compiles (beyond, the decoded message is read).
const MAX_TYPES: usize = 4096;

/// The index of a field's oneof among its message's oneofs.
fn oneof_index(f: &FieldDescriptor) -> Option<usize> {
    let o = f.containing_oneof()?;
    f.parent_message()
        .oneofs()
        .position(|x| x.name() == o.name())
}

fn packable(kind: &Kind) -> bool {
    !matches!(kind, Kind::String | Kind::Bytes | Kind::Message(_))
}

impl Scanner {
    /// The scanner of `desc` for the paths of `Plan` (`fields`, then the target; None: a
    /// name the type lacks) and its unused top-level fields; None when a path passes
    /// through a oneof or ends at a list, a map or a message (the decoded message is read).
    pub fn new(
        desc: &MessageDescriptor,
        paths: &[Option<&[FieldDescriptor]>],
        unused: &[FieldDescriptor],
    ) -> Option<Scanner> {
        let mut s = Scanner {
            types: Vec::new(),
            nodes: Vec::new(),
            slots: Vec::new(),
            unused: Vec::new(),
            oneofs: 0,
            track_seen: false,
        };
        let mut by_name = HashMap::new();
        let root = s.type_of(desc, &mut by_name)?;
        s.node(root, desc);
        for (i, path) in paths.iter().enumerate() {
            let Some(path) = path else {
                s.slots.push(None);
                continue;
            };
            let (leaf, steps) = path.split_last()?;
            let mut node = 0;
            let mut chain = Vec::new();
            for step in steps {
                if step.containing_oneof().is_some() || step.is_list() || step.is_map() {
                    return None;
                }
                let Kind::Message(inner) = step.kind() else {
                    return None;
                };
                let next = match s.nodes[node].targets.get(step.number()) {
                    Some(Target::Into(n)) => *n,
                    Some(Target::Leaf(_)) => return None,
                    None => {
                        let ty = s.type_of(&inner, &mut by_name)?;
                        let n = s.node(ty, &inner);
                        s.nodes[node].targets.insert(step.number(), Target::Into(n));
                        n
                    }
                };
                node = next;
                chain.push(node);
            }
            let kind = leaf.kind();
            if leaf.is_list() || leaf.is_map() || matches!(kind, Kind::Message(_)) {
                return None;
            }
            let targets = &mut s.nodes[node].targets;
            match targets.get_mut(leaf.number()) {
                Some(Target::Leaf(slots)) => slots.push(i),
                Some(Target::Into(_)) => return None,
                None => targets.insert(leaf.number(), Target::Leaf(vec![i])),
            }
            let oneof = oneof_index(leaf).map(|o| s.nodes[node].oneof_base + o);
            s.slots.push(Some(Slot {
                number: leaf.number(),
                default: (!leaf.supports_presence())
                    .then(|| scalar(&P::default_value_for_field(leaf), &kind)),
                chain,
                oneof,
            }));
        }
        s.unused = unused
            .iter()
            .map(|f| Unused {
                number: f.number(),
                presence: f.supports_presence(),
                oneof: oneof_index(f),
            })
            .collect();
        s.track_seen = s.unused.iter().any(|u| u.presence && u.oneof.is_none());
        Some(s)
    }

    /// A node for a message of type `ty` on the mapped paths.
    fn node(&mut self, ty: usize, desc: &MessageDescriptor) -> usize {
        self.nodes.push(Node {
            ty,
            targets: ByNumber::new(),
            oneof_base: self.oneofs,
        });
        self.oneofs += desc.oneofs().len();
        self.nodes.len() - 1
    }

    /// The index of message type `desc`, compiled with every type its fields reach.
    fn type_of(
        &mut self,
        desc: &MessageDescriptor,
        by_name: &mut HashMap<String, usize>,
    ) -> Option<usize> {
        if let Some(&i) = by_name.get(desc.full_name()) {
            return Some(i);
        }
        if self.types.len() >= MAX_TYPES {
            return None;
        }
        let i = self.types.len();
        by_name.insert(desc.full_name().to_string(), i);
        self.types.push(Type {
            desc: desc.clone(),
            fields: ByNumber::new(),
        });
        let mut fields = ByNumber::new();
        for f in desc.fields() {
            let kind = f.kind();
            let child = match &kind {
                Kind::Message(m) if f.is_map() => match m.map_entry_value_field().kind() {
                    Kind::Message(v) => Some(self.type_of(&v, by_name)?),
                    _ => None,
                },
                Kind::Message(m) => Some(self.type_of(m, by_name)?),
                _ => None,
            };
            fields.insert(
                f.number(),
                Field {
                    list: f.is_list(),
                    map: f.is_map(),
                    group: f.is_group(),
                    oneof: oneof_index(&f),
                    kind,
                    child,
                },
            );
        }
        self.types[i].fields = fields;
        Some(i)
    }

    /// The stream's fields and target of one message's bytes, or None (see the module).
    pub fn pick(&self, body: &[u8]) -> Option<Picked> {
        let mut state = State {
            values: vec![None; self.slots.len()],
            present: vec![false; self.nodes.len()],
            oneof_last: vec![0; self.oneofs],
            seen: Vec::new(),
            text: String::new(),
            bytes: Vec::new(),
        };
        state.present[0] = true;
        let mut scan = Scan {
            scanner: self,
            ty: self.nodes[0].ty,
            node: Some(0),
            state: &mut state,
        };
        scan.merge(body).ok()?;
        // Each slot's value where its leaf is present, in place.
        let mut values = std::mem::take(&mut state.values);
        for (v, slot) in values.iter_mut().zip(&self.slots) {
            let seen = v.take();
            *v = slot.as_ref().and_then(|s| {
                if !s.chain.iter().all(|&n| state.present[n]) {
                    return None;
                }
                if let Some(o) = s.oneof
                    && state.oneof_last[o] != s.number
                {
                    return None;
                }
                seen.or_else(|| s.default.clone())
            });
        }
        let unused = self
            .unused
            .iter()
            .filter(|u| match u.oneof {
                Some(o) => state.oneof_last[o] == u.number,
                None => !u.presence || state.seen.contains(&u.number),
            })
            .count() as u64;
        let label = values.pop().flatten();
        Some(Picked {
            values,
            label,
            unused,
        })
    }
}

/// What one scan gathers.
struct State {
    values: Vec<Option<Value>>,
    /// Which nodes' messages were on the wire.
    present: Vec<bool>,
    /// Per oneof of the nodes, the number of its member last on the wire (0: none).
    oneof_last: Vec<u32>,
    /// The top-level field numbers seen on the wire (for the unused count).
    seen: Vec<u32>,
    /// Scratch for the strings and bytes that are checked, not kept.
    text: String,
    bytes: Vec<u8>,
}

/// One message being scanned: its type, its node when on the mapped paths, and the scan's
/// state. A `prost::Message` so that prost's `message::merge` and `group::merge` nest it
/// exactly as they nest `DynamicMessage` (length, wire type, recursion limit); it is only
/// ever decoded into, never encoded.
struct Scan<'a> {
    scanner: &'a Scanner,
    ty: usize,
    node: Option<usize>,
    state: &'a mut State,
}

impl std::fmt::Debug for Scan<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Scan({})", self.scanner.types[self.ty].desc.full_name())
    }
}

impl Message for Scan<'_> {
    fn encode_raw(&self, _: &mut impl BufMut) {}

    fn merge_field(
        &mut self,
        tag: u32,
        wire_type: WireType,
        buf: &mut impl Buf,
        ctx: DecodeContext,
    ) -> Result<(), DecodeError> {
        let sc = self.scanner;
        let ty = &sc.types[self.ty];
        let Some(field) = ty.fields.get(tag) else {
            return unknown(&ty.desc, tag, wire_type, buf, ctx);
        };
        if let Some(node) = self.node {
            let n = &sc.nodes[node];
            if let Some(o) = field.oneof {
                self.state.oneof_last[n.oneof_base + o] = tag;
            }
            if node == 0 && sc.track_seen {
                self.state.seen.push(tag);
            }
            match n.targets.get(tag) {
                Some(Target::Leaf(slots)) => {
                    // Doubles and floats, the usual features, straight to their value; the
                    // rest through prost-reflect's value, as the decoded message reads them.
                    let v = match field.kind {
                        Kind::Double => {
                            let mut v = 0.0;
                            encoding::double::merge(wire_type, &mut v, buf, ctx)?;
                            float(v)
                        }
                        Kind::Float => {
                            let mut v = 0.0f32;
                            encoding::float::merge(wire_type, &mut v, buf, ctx)?;
                            float(f64::from(v))
                        }
                        _ => scalar(
                            &value(&field.kind, wire_type, buf, ctx, self.state)?,
                            &field.kind,
                        ),
                    };
                    if let Some((&last, others)) = slots.split_last() {
                        for &s in others {
                            self.state.values[s] = Some(v.clone());
                        }
                        self.state.values[last] = Some(v);
                    }
                    return Ok(());
                }
                Some(&Target::Into(inner)) => {
                    self.state.present[inner] = true;
                    let mut scan = Scan {
                        scanner: sc,
                        ty: sc.nodes[inner].ty,
                        node: Some(inner),
                        state: &mut *self.state,
                    };
                    return encoding::message::merge(wire_type, &mut scan, buf, ctx);
                }
                None => {}
            }
        }
        self.check(field, tag, wire_type, buf, ctx)
    }

    fn encoded_len(&self) -> usize {
        0
    }

    fn clear(&mut self) {}
}

impl Scan<'_> {
    /// A field off the mapped paths, checked as `DynamicMessage` reads it
    /// (prost-reflect's `Value::merge_field`) and dropped.
    fn check(
        &mut self,
        field: &Field,
        tag: u32,
        wire_type: WireType,
        buf: &mut impl Buf,
        ctx: DecodeContext,
    ) -> Result<(), DecodeError> {
        if field.map {
            let Kind::Message(entry) = &field.kind else {
                return Err(declined());
            };
            let key = entry.map_entry_key_field().kind();
            let val = entry.map_entry_value_field();
            let val_kind = val.kind();
            let val_group = val.is_group();
            return encoding::merge_loop(self, buf, ctx, |scan, buf, ctx| {
                let (number, wire_type) = encoding::decode_key(buf)?;
                match number {
                    1 => scan.one(&key, false, None, 1, wire_type, buf, ctx),
                    2 => scan.one(&val_kind, val_group, field.child, 2, wire_type, buf, ctx),
                    _ => encoding::skip_field(wire_type, number, buf, ctx),
                }
            });
        }
        if field.list && wire_type == WireType::LengthDelimited && packable(&field.kind) {
            let element = field.kind.wire_type();
            return encoding::merge_loop(self, buf, ctx, |scan, buf, ctx| {
                scan.one(&field.kind, false, None, tag, element, buf, ctx)
            });
        }
        self.one(
            &field.kind,
            field.group,
            field.child,
            tag,
            wire_type,
            buf,
            ctx,
        )
    }

    /// One value of `kind`, checked and dropped.
    #[allow(clippy::too_many_arguments)]
    fn one(
        &mut self,
        kind: &Kind,
        group: bool,
        child: Option<usize>,
        tag: u32,
        wire_type: WireType,
        buf: &mut impl Buf,
        ctx: DecodeContext,
    ) -> Result<(), DecodeError> {
        let Kind::Message(_) = kind else {
            return value(kind, wire_type, buf, ctx, self.state).map(drop);
        };
        let mut scan = Scan {
            scanner: self.scanner,
            ty: child.ok_or_else(declined)?,
            node: None,
            state: &mut *self.state,
        };
        if group {
            encoding::group::merge(tag, wire_type, &mut scan, buf, ctx)
        } else {
            encoding::message::merge(wire_type, &mut scan, buf, ctx)
        }
    }
}

/// A scalar of `kind` read as prost-reflect reads it into its `Value`.
fn value(
    kind: &Kind,
    wire_type: WireType,
    buf: &mut impl Buf,
    ctx: DecodeContext,
    state: &mut State,
) -> Result<P, DecodeError> {
    use encoding as e;
    Ok(match kind {
        Kind::Double => P::F64(read(e::double::merge, wire_type, buf, ctx)?),
        Kind::Float => P::F32(read(e::float::merge, wire_type, buf, ctx)?),
        Kind::Int32 | Kind::Sint32 | Kind::Sfixed32 | Kind::Enum(_) => {
            let v = match kind {
                Kind::Sint32 => read(e::sint32::merge, wire_type, buf, ctx)?,
                Kind::Sfixed32 => read(e::sfixed32::merge, wire_type, buf, ctx)?,
                _ => read(e::int32::merge, wire_type, buf, ctx)?,
            };
            if let Kind::Enum(_) = kind {
                P::EnumNumber(v)
            } else {
                P::I32(v)
            }
        }
        Kind::Int64 | Kind::Sint64 | Kind::Sfixed64 => P::I64(match kind {
            Kind::Sint64 => read(e::sint64::merge, wire_type, buf, ctx)?,
            Kind::Sfixed64 => read(e::sfixed64::merge, wire_type, buf, ctx)?,
            _ => read(e::int64::merge, wire_type, buf, ctx)?,
        }),
        Kind::Uint32 | Kind::Fixed32 => P::U32(match kind {
            Kind::Fixed32 => read(e::fixed32::merge, wire_type, buf, ctx)?,
            _ => read(e::uint32::merge, wire_type, buf, ctx)?,
        }),
        Kind::Uint64 | Kind::Fixed64 => P::U64(match kind {
            Kind::Fixed64 => read(e::fixed64::merge, wire_type, buf, ctx)?,
            _ => read(e::uint64::merge, wire_type, buf, ctx)?,
        }),
        Kind::Bool => P::Bool(read(e::bool::merge, wire_type, buf, ctx)?),
        Kind::String => {
            e::string::merge(wire_type, &mut state.text, buf, ctx)?;
            P::String(std::mem::take(&mut state.text))
        }
        Kind::Bytes => {
            e::bytes::merge(wire_type, &mut state.bytes, buf, ctx)?;
            P::Bytes(std::mem::take(&mut state.bytes).into())
        }
        Kind::Message(_) => return Err(declined()),
    })
}

/// The scalar one of prost's `encoding::<type>::merge` reads, from its default.
fn read<T: Default, B: Buf>(
    merge: fn(WireType, &mut T, &mut B, DecodeContext) -> Result<(), DecodeError>,
    wire_type: WireType,
    buf: &mut B,
    ctx: DecodeContext,
) -> Result<T, DecodeError> {
    let mut v = T::default();
    merge(wire_type, &mut v, buf, ctx)?;
    Ok(v)
}

/// A field number the type does not have, skipped as prost-reflect keeps it as an unknown
/// field (`UnknownField::decode_value`); a group, or an extension of the type, is declined.
fn unknown(
    desc: &MessageDescriptor,
    tag: u32,
    wire_type: WireType,
    buf: &mut impl Buf,
    ctx: DecodeContext,
) -> Result<(), DecodeError> {
    if desc.get_extension(tag).is_some() {
        return Err(declined());
    }
    match wire_type {
        WireType::Varint => encoding::decode_varint(buf).map(drop),
        WireType::SixtyFourBit => encoding::fixed64::merge(wire_type, &mut 0, buf, ctx),
        WireType::ThirtyTwoBit => encoding::fixed32::merge(wire_type, &mut 0, buf, ctx),
        WireType::LengthDelimited => {
            let len = encoding::decode_varint(buf)?;
            if len > buf.remaining() as u64 {
                return Err(declined());
            }
            buf.advance(len as usize);
            Ok(())
        }
        WireType::StartGroup | WireType::EndGroup => Err(declined()),
    }
}

/// The error that ends a scan the scanner does not take (the decoded message is read).
fn declined() -> DecodeError {
    // prost has no public constructor of its own errors; a wire-type mismatch is one.
    encoding::check_wire_type(WireType::Varint, WireType::LengthDelimited)
        .expect_err("two different wire types")
}

#[cfg(test)]
mod tests {
    use super::super::{Messages, Plan};
    use crate::codec::schemad::Picked;
    use prost_reflect::prost::Message as _;
    use prost_reflect::{DynamicMessage, Kind, MapKey, MessageDescriptor, Value as P};
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    use ravel_core::fields::Fields;
    use std::collections::HashMap;

    /// Every field type: scalars of each kind, presence (`optional`, messages, oneofs at the
    /// top and nested), lists packed and not, maps, nested and recursive messages.
    const EVENTS: &str = r#"syntax = "proto3";
        package fz;
        enum Color { RED = 0; GREEN = 1; BLUE = 2; }
        message Inner {
          double d = 1; int32 i = 2; string s = 3; optional float f = 4;
          Inner next = 5; repeated int64 r = 6;
          oneof pick { sint32 a = 7; string b = 8; }
        }
        message Ev {
          double x_double = 1; float x_float = 2; int32 x_int32 = 3; int64 x_int64 = 4;
          uint32 x_uint32 = 5; uint64 x_uint64 = 6; sint32 x_sint32 = 7; sint64 x_sint64 = 8;
          fixed32 x_fixed32 = 9; fixed64 x_fixed64 = 10; sfixed32 x_sfixed32 = 11;
          sfixed64 x_sfixed64 = 12; bool x_bool = 13; string x_string = 14; bytes x_bytes = 15;
          Color x_enum = 16; optional double o_double = 17; Inner inner = 18;
          repeated double r_double = 19; repeated string r_string = 20;
          repeated Inner r_inner = 21; map<string, double> m = 22; map<int32, Inner> mi = 23;
          oneof choice { double c_double = 24; Inner c_inner = 25; string c_string = 26; }
          double y = 27; optional Color o_enum = 28;
        }"#;

    /// proto2: explicit presence, defaults, required fields and groups.
    const LEGACY: &str = r#"syntax = "proto2";
        package fz2;
        message Old {
          optional int32 a = 1 [default = 7]; required double y = 2;
          optional group G = 3 { optional int32 g = 4; }
          repeated int32 packed = 5 [packed = true]; repeated int32 loose = 6;
          optional string s = 7;
        }"#;

    fn descriptor(schema: &str, path: &[i64]) -> MessageDescriptor {
        Messages::of_text(schema).message(path).unwrap()
    }

    fn plan(desc: &MessageDescriptor, names: &[&str], target: &str) -> Plan {
        let names: Vec<String> = names.iter().map(|s| s.to_string()).collect();
        Plan::new(desc, &Fields::numeric(&names).unwrap(), target).unwrap()
    }

    /// A random value of `kind` (a message at `depth` gets nested ones down to depth 3).
    fn random(r: &mut StdRng, kind: &Kind, depth: usize) -> P {
        let small = r.random_bool(0.3);
        match kind {
            Kind::Double => P::F64(if small {
                0.0
            } else {
                r.random_range(-1e6..1e6)
            }),
            Kind::Float => P::F32(if small {
                0.0
            } else {
                r.random_range(-1e3..1e3)
            }),
            Kind::Int32 | Kind::Sint32 | Kind::Sfixed32 => {
                P::I32(if small { 0 } else { r.random() })
            }
            Kind::Int64 | Kind::Sint64 | Kind::Sfixed64 => {
                P::I64(if small { 0 } else { r.random() })
            }
            Kind::Uint32 | Kind::Fixed32 => P::U32(if small { 0 } else { r.random() }),
            Kind::Uint64 | Kind::Fixed64 => P::U64(if small { 0 } else { r.random() }),
            Kind::Bool => P::Bool(r.random()),
            Kind::String => P::String(["", "east", "ünï", "a.b"][r.random_range(0..4)].into()),
            Kind::Bytes => P::Bytes(vec![r.random::<u8>(); r.random_range(0..4)].into()),
            Kind::Enum(_) => P::EnumNumber(r.random_range(0..4)),
            // Nested messages up to depth 3, empty below.
            Kind::Message(m) if depth < 3 => P::Message(message(r, m, depth + 1)),
            Kind::Message(m) => P::Message(DynamicMessage::new(m.clone())),
        }
    }

    /// A message of `desc` with random fields set (nested ones up to depth 3).
    fn message(r: &mut StdRng, desc: &MessageDescriptor, depth: usize) -> DynamicMessage {
        let mut m = DynamicMessage::new(desc.clone());
        for f in desc.fields() {
            if !r.random_bool(0.6) {
                continue;
            }
            let kind = f.kind();
            let value = if f.is_map() {
                let Kind::Message(entry) = &kind else {
                    unreachable!()
                };
                let (kk, vk) = (
                    entry.map_entry_key_field().kind(),
                    entry.map_entry_value_field().kind(),
                );
                let mut map = HashMap::new();
                for _ in 0..r.random_range(0..3) {
                    let key = match random(r, &kk, depth) {
                        P::String(s) => MapKey::String(s),
                        P::I32(i) => MapKey::I32(i),
                        _ => continue,
                    };
                    map.insert(key, random(r, &vk, depth));
                }
                P::Map(map)
            } else {
                if f.is_list() {
                    P::List(
                        (0..r.random_range(0..4))
                            .map(|_| random(r, &kind, depth))
                            .collect(),
                    )
                } else {
                    random(r, &kind, depth)
                }
            };
            m.set_field(&f, value);
        }
        m
    }

    /// Random damage: a byte changed, bytes cut off, a byte inserted, or unknown fields of
    /// every wire type appended.
    fn damage(r: &mut StdRng, mut b: Vec<u8>) -> Vec<u8> {
        match r.random_range(0..5) {
            0 if !b.is_empty() => {
                let i = r.random_range(0..b.len());
                b[i] = r.random();
            }
            1 if !b.is_empty() => b.truncate(r.random_range(0..b.len())),
            2 => {
                let i = r.random_range(0..=b.len());
                b.insert(i, r.random());
            }
            3 => {
                // Unknown fields 100 (varint), 101 (bytes), 102 (fixed32), 103 (fixed64).
                b.extend([0xa0, 0x06, 0x96, 0x01, 0xaa, 0x06, 0x02, b'h', b'i']);
                b.extend([0xb5, 0x06, 1, 2, 3, 4, 0xb9, 0x06, 1, 2, 3, 4, 5, 6, 7, 8]);
            }
            _ => b.extend([0xa3, 0x06, 0x08, 0x01, 0xa4, 0x06]), // an unknown group
        }
        b
    }

    fn same(a: &Picked, b: &Picked) -> bool {
        a.values == b.values && a.label == b.label && a.unused == b.unused
    }

    /// The plan of `names` with `target` scans (and counts the unused fields it sees, when
    /// `tracking`), and agrees with the decoded message on `n` fuzzed messages of `seed`.
    fn scans(
        desc: &MessageDescriptor,
        (names, target): (&[&str], &str),
        tracking: bool,
        (seed, n): (u64, usize),
    ) {
        let p = plan(desc, names, target);
        assert!(
            p.scanner
                .as_ref()
                .is_some_and(|s| s.track_seen || !tracking)
        );
        fuzz(desc, &p, seed, n);
    }

    /// The scan equals the decoded message's pick on every message it takes, takes nearly
    /// every undamaged one, and takes no message prost-reflect refuses.
    fn fuzz(desc: &MessageDescriptor, plan: &Plan, seed: u64, n: usize) {
        let mut r = StdRng::seed_from_u64(seed);
        let (mut good, mut scanned, mut refused) = (0, 0, 0);
        for i in 0..n {
            // Two messages concatenated: Protobuf merges them (last value wins, lists
            // append, messages merge, a later oneof member clears the earlier).
            let mut body = message(&mut r, desc, 0).encode_to_vec();
            if r.random_bool(0.5) {
                body.extend(message(&mut r, desc, 0).encode_to_vec());
            }
            let damaged = r.random_bool(0.4);
            if damaged {
                body = damage(&mut r, body);
            }
            let scan = plan.scan(&body);
            match DynamicMessage::decode(desc.clone(), body.as_slice()) {
                Ok(msg) => {
                    let want = plan.pick(&msg);
                    if let Some(got) = &scan {
                        assert!(
                            same(got, &want),
                            "message {i}: scanned {:?} / {:?} / {}, decoded {:?} / {:?} / {}",
                            got.values,
                            got.label,
                            got.unused,
                            want.values,
                            want.label,
                            want.unused
                        );
                        scanned += 1;
                    }
                    good += usize::from(!damaged);
                }
                Err(_) => {
                    assert!(
                        scan.is_none(),
                        "message {i}: prost-reflect refuses it, the scan took it"
                    );
                    refused += 1;
                }
            }
        }
        assert!(
            refused > n / 20,
            "{refused} of {n} refused: the damage is too mild"
        );
        assert!(
            scanned >= good,
            "{scanned} scanned of {good} undamaged messages"
        );
    }

    #[test]
    fn the_scan_equals_the_decoded_message_on_fuzzed_messages_of_every_field_type() {
        let desc = descriptor(EVENTS, &[1]);
        let names = [
            "x_double",
            "x_float",
            "x_int32",
            "x_int64",
            "x_uint32",
            "x_uint64",
            "x_sint32",
            "x_sint64",
            "x_fixed32",
            "x_fixed64",
            "x_sfixed32",
            "x_sfixed64",
            "x_bool",
            "x_string",
            "x_bytes",
            "x_enum",
            "o_double",
            "o_enum",
            "inner.d",
            "inner.i",
            "inner.s",
            "inner.f",
            "inner.a",
            "inner.b",
            "inner.next.d",
            "inner.next.next.i",
            "c_double",
            "c_string",
            "no_such",
            "inner.no_such",
        ];
        let p = plan(&desc, &names, "y");
        assert!(
            p.scanner.is_some(),
            "the plan takes every field type as a leaf"
        );
        fuzz(&desc, &p, 48, 6000);
        // A target inside a message, and nothing but the target.
        scans(&desc, (&["inner.next.d"], "inner.d"), false, (49, 1500));
        // Unused top-level messages, counted when on the wire.
        scans(&desc, (&["x_double"], "y"), true, (50, 1500));
    }

    #[test]
    fn proto2_presence_defaults_and_groups_scan_as_they_decode() {
        let desc = descriptor(LEGACY, &[0]);
        scans(&desc, (&["a", "s", "G.g"], "y"), false, (2, 3000));
        // Unused optional scalars and groups, counted when on the wire.
        scans(&desc, (&["s"], "y"), true, (3, 1500));
    }

    #[test]
    fn paths_the_scan_does_not_take_leave_the_plan_to_the_decoded_message() {
        let desc = descriptor(EVENTS, &[1]);
        // A list, a map's value and a message as leaves; a path through a oneof.
        for names in [&["r_double"][..], &["inner"], &["c_inner.d"], &["inner.r"]] {
            assert!(plan(&desc, names, "y").scanner.is_none(), "{names:?}");
        }
    }
}
