//! The fast path of the JSON row and mini-batch shapes (and of feature-stream columns). It
//! accepts a strict subset of what serde_json accepts, with the same values (both parsers
//! round correctly); on anything else it appends nothing and answers `None`, and the caller's
//! serde_json path decides.
//!
//! Numbers are most of the bytes and of the time, so they have three paths, fastest first:
//! the shape shortest round-trip writers give most doubles (`-0.24836162209524854`: one
//! integer digit and 14 to 18 fraction digits, `short_number`), checked and converted with
//! SSE2 on x86-64 (`sse2`: one vector for the digit, the point and 14 digits, a word for
//! the last 0 to 4, rounded at one fixed exponent) or as three eight-byte words elsewhere
//! (`short_body_scalar`, also the reference the SSE2 path is tested against), with no branch
//! on their length; any number of up to 19 digits a word at a time; and a byte at a time,
//! for the rest and for the last `AHEAD` bytes of a message. Each rounds correctly
//! (Eisel-Lemire on the digits gathered, or fast-float2 beyond its range). Rows go straight
//! into their slots in the output (`Parser::row`). The `sse2` module owns this file's only
//! `unsafe`.

pub mod events;
mod number;

use number::{
    AHEAD, POW10_U64, digit_run, eight_digits, eisel_lemire, run_value, short_number, word,
};

/// Decodes `{"x": [p numbers], "y": number}` or `{"rows": [[p numbers], ...], "y":
/// [numbers]}` (keys in any order, JSON whitespace anywhere between tokens) and appends the
/// rows; `None`, with nothing appended, for anything else.
#[cfg(test)]
pub fn decode(payload: &[u8], p: usize, x: &mut Vec<f64>, y: &mut Vec<f64>) -> Option<usize> {
    decode_shapes(payload, p, Shapes::POSITIONAL, x, y)
}

/// The stream's column of a name in a named mini-batch's `columns`.
pub type ColumnOf<'a> = &'a dyn Fn(&str) -> Option<usize>;

/// Which shapes `decode_shapes` takes.
#[derive(Clone, Copy)]
pub struct Shapes<'a> {
    /// `{"x", "y"}` and `{"rows", "y"}` (not on streams that read events).
    pub positional: bool,
    /// The column of a name of a named mini-batch's `columns`, for a stream whose features
    /// are all plain numbers (None: named mini-batches go to serde_json).
    pub column: Option<ColumnOf<'a>>,
}

#[cfg(test)]
impl Shapes<'static> {
    /// The positional shapes only.
    pub const POSITIONAL: Shapes<'static> = Shapes {
        positional: true,
        column: None,
    };
}

/// `decode`, and with `shapes.column` the named mini-batch `{"columns": [p names], "rows":
/// [[p numbers], ...], "y": [numbers]}` whose names are each of the stream's p columns once
/// (any order, no escapes): its rows are read as positional rows, then each is put in the
/// stream's order. Anything else (a name the stream does not use, one missing, text or null
/// among the values) answers `None`, for serde_json to decide.
pub fn decode_shapes(
    payload: &[u8],
    p: usize,
    shapes: Shapes,
    x: &mut Vec<f64>,
    y: &mut Vec<f64>,
) -> Option<usize> {
    let (x0, y0) = (x.len(), y.len());
    let out = Parser { b: payload, i: 0 }.message(p, shapes, x, y, (x0, y0));
    if out.is_none() {
        x.truncate(x0);
        y.truncate(y0);
    }
    out
}

/// Decodes a dense feature-stream column `{"feature": "name", "values": [n numbers]}`
/// (keys in either order; a non-empty name without escapes or control characters);
/// `None` for anything else.
pub fn feature(payload: &[u8], n: usize) -> Option<(String, Vec<f64>)> {
    let (mut name, mut values) = (None, None);
    Parser { b: payload, i: 0 }.whole_object(|p, key| {
        match key {
            b"feature" if name.is_none() => {
                let raw = p.key()?;
                if raw.is_empty() || raw.iter().any(|&c| c < 0x20) {
                    return None;
                }
                name = Some(std::str::from_utf8(raw).ok()?.to_string());
            }
            b"values" if values.is_none() => {
                let mut v = Vec::with_capacity(n);
                if p.numbers(&mut v)? != n {
                    return None;
                }
                values = Some(v);
            }
            _ => return None,
        }
        Some(())
    })?;
    Some((name?, values?))
}

/// A JSON number at `i` (after optional whitespace) as the rows' parser reads it (JSON's
/// grammar, finite once rounded, bit for bit serde_json's value): the value and where it
/// ends; `None` for anything else. For the events' fast path (`super::fast_events`).
#[inline]
pub(super) fn number_at(b: &[u8], i: usize) -> Option<(f64, usize)> {
    match short_number(b, i) {
        Some(r) => Some(r),
        None => Parser { b, i }.number_slow(i),
    }
}

enum Shape {
    Row,
    Rows(usize),
}

/// After an object's member or a list's item: whitespace, then `,` (taken: `Some(false)`,
/// another follows) or `close` (taken: `Some(true)`, the object or list ends); `None` for
/// anything else. Both parsers end their members and items with it (`Parser`,
/// `events::Scan`).
#[inline]
fn next_or_end(b: &[u8], i: &mut usize, close: u8) -> Option<bool> {
    while let Some(b' ' | b'\n' | b'\r' | b'\t') = b.get(*i) {
        *i += 1;
    }
    match b.get(*i) {
        Some(b',') => {
            *i += 1;
            Some(false)
        }
        Some(&c) if c == close => {
            *i += 1;
            Some(true)
        }
        _ => None,
    }
}

struct Parser<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> Parser<'a> {
    #[inline]
    fn ws(&mut self) {
        let mut i = self.i;
        while let Some(b' ' | b'\n' | b'\r' | b'\t') = self.b.get(i) {
            i += 1;
        }
        self.i = i;
    }

    /// Skips whitespace and takes `c`.
    #[inline]
    fn eat(&mut self, c: u8) -> Option<()> {
        self.ws();
        (self.b.get(self.i) == Some(&c)).then(|| self.i += 1)
    }

    /// Skips whitespace and reports whether the next byte is `c` (not taken).
    #[inline]
    fn peek(&mut self, c: u8) -> bool {
        self.ws();
        self.b.get(self.i) == Some(&c)
    }

    /// A key without escapes.
    fn key(&mut self) -> Option<&'a [u8]> {
        self.eat(b'"')?;
        let start = self.i;
        let len = self.b[start..].iter().position(|&c| c == b'"')?;
        let b: &'a [u8] = self.b;
        let key = &b[start..start + len];
        if key.contains(&b'\\') {
            return None;
        }
        self.i = start + len + 1;
        Some(key)
    }

    /// A number by JSON's grammar (`-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`),
    /// finite once rounded to f64, after optional whitespace: `short_number` for the shape
    /// it takes, else `number_slow`.
    #[inline(always)]
    fn number(&mut self) -> Option<f64> {
        let (v, end) = match short_number(self.b, self.i) {
            Some(r) => r,
            None => self.number_slow(self.i)?,
        };
        self.i = end;
        Some(v)
    }

    /// A number at `start` (after optional whitespace) that `short_number` does not take:
    /// `number_words` when the bytes it reads ahead are there, else `number_general`.
    /// Answers the value and where the number ends.
    #[cold]
    #[inline(never)]
    fn number_slow(&mut self, start: usize) -> Option<(f64, usize)> {
        self.i = start;
        self.ws();
        let v = if self.b.len() - self.i >= AHEAD {
            self.number_words(self.i)?
        } else {
            self.number_general()?
        };
        Some((v, self.i))
    }

    /// A number as `number` reads it, starting at `start` (with `AHEAD` bytes there), when it
    /// has an integer part of 1 to 7 digits, up to 23 fraction digits, 19 significant ones in
    /// all (leading zeros of the fraction included) and an exponent of at most 7 digits: the
    /// digits gathered eight bytes at a time (`digit_run`, `run_value`: a run that ends inside
    /// a word ends the number there) and rounded by Eisel-Lemire (exact for every exponent it
    /// takes). Anything else goes to `number_general`.
    #[inline(never)]
    fn number_words(&mut self, start: usize) -> Option<f64> {
        let b = self.b;
        let negative = b[start] == b'-';
        let i = start + negative as usize;
        let (t0, n0) = digit_run(word(b, i));
        // No digit, eight or more (an integer: `number_general`), or a leading zero.
        if n0 == 0 || n0 == 8 || (n0 > 1 && b[i] == b'0') {
            return self.number_general();
        }
        let int = run_value(t0, n0);
        // Digits that count against the 19 a u64 holds: not the integer part's lone 0.
        let significant = if int == 0 { 0 } else { n0 };
        let mut j = i + n0 as usize;
        let (mut mantissa, mut exp10) = (int, 0i64);
        if b[j] == b'.' {
            // Up to three words of fraction digits; a word counts only when every word
            // before it was all digits.
            let (t1, n1) = digit_run(word(b, j + 1));
            let (t2, n2) = digit_run(word(b, j + 9));
            let (t3, n3) = digit_run(word(b, j + 17));
            let n2 = if n1 == 8 { n2 } else { 0 };
            let n3 = if n1 + n2 == 16 { n3 } else { 0 };
            let fraction = n1 + n2 + n3;
            if fraction == 0 || n3 == 8 || significant + fraction > 19 {
                return self.number_general();
            }
            mantissa = mantissa * POW10_U64[n1 as usize] + run_value(t1, n1);
            mantissa = mantissa * POW10_U64[n2 as usize] + run_value(t2, n2);
            mantissa = mantissa * POW10_U64[n3 as usize] + run_value(t3, n3);
            exp10 = -i64::from(fraction);
            j += 1 + fraction as usize;
        }
        if b[j] | 0x20 == b'e' {
            j += 1;
            let minus = b[j] == b'-';
            j += (minus || b[j] == b'+') as usize;
            let (te, ne) = digit_run(word(b, j));
            if ne == 0 || ne == 8 {
                return self.number_general();
            }
            let e = run_value(te, ne) as i64;
            exp10 += if minus { -e } else { e };
            j += ne as usize;
        }
        let Some(v) = eisel_lemire(mantissa, exp10) else {
            return self.number_general();
        };
        self.i = j;
        // The sign bit, without a branch (-0 stays -0, as serde_json has it).
        Some(f64::from_bits(v.to_bits() | (u64::from(negative) << 63)))
    }

    /// A number by JSON's grammar (`-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`),
    /// finite once rounded to f64, any length. One pass gathers the significant digits; when
    /// they fit in 2^53 and the decimal exponent in +-22, both are exact doubles and one IEEE
    /// multiplication or division rounds correctly (Clinger's fast path); otherwise
    /// Eisel-Lemire, or fast-float2 on the number's bytes beyond 19 digits or its exponents.
    #[cold]
    #[inline(never)]
    fn number_general(&mut self) -> Option<f64> {
        self.ws();
        let b = self.b;
        let start = self.i;
        let mut i = start;
        let negative = b.get(i) == Some(&b'-');
        i += negative as usize;
        // Significant digits (saturating: past 19 digits `digits` says so) and the
        // decimal exponent of the last one gathered.
        let (mut mantissa, mut digits, mut exp10) = (0u64, 0u32, 0i64);
        match b.get(i) {
            Some(b'0') => i += 1,
            Some(b'1'..=b'9') => {
                while digits <= 11
                    && let Some(v) = eight_digits(b, i)
                {
                    (mantissa, digits, i) = (mantissa * 100_000_000 + v, digits + 8, i + 8);
                }
                while let Some(&c @ b'0'..=b'9') = b.get(i) {
                    if digits < 19 {
                        mantissa = mantissa * 10 + u64::from(c - b'0');
                        digits += 1;
                    } else {
                        exp10 += 1;
                        digits = 20;
                    }
                    i += 1;
                }
            }
            _ => return None,
        }
        if b.get(i) == Some(&b'.') {
            i += 1;
            let first = i;
            // Eight digits at a time (leading zeros then count as digits: more numbers
            // go to fast-float2, never a wrong one).
            while digits <= 11
                && let Some(v) = eight_digits(b, i)
            {
                mantissa = mantissa * 100_000_000 + v;
                (digits, exp10, i) = (digits + 8, exp10 - 8, i + 8);
            }
            while let Some(&c @ b'0'..=b'9') = b.get(i) {
                if digits < 19 {
                    if mantissa != 0 || c != b'0' {
                        mantissa = mantissa * 10 + u64::from(c - b'0');
                        digits += 1;
                    }
                    exp10 -= 1;
                } else {
                    digits = 20;
                }
                i += 1;
            }
            if i == first {
                return None;
            }
        }
        if let Some(b'e' | b'E') = b.get(i) {
            i += 1;
            let minus = b.get(i) == Some(&b'-');
            if let Some(b'+' | b'-') = b.get(i) {
                i += 1;
            }
            let first = i;
            let mut e = 0i64;
            while let Some(&c @ b'0'..=b'9') = b.get(i) {
                e = (e * 10 + i64::from(c - b'0')).min(1 << 20);
                i += 1;
            }
            if i == first {
                return None;
            }
            exp10 += if minus { -e } else { e };
        }
        self.i = i;
        const POW10: [f64; 23] = [
            1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
            1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22,
        ];
        let v = if digits <= 19 && mantissa <= 1 << 53 && exp10.abs() <= 22 {
            let m = mantissa as f64;
            let v = if exp10 < 0 {
                m / POW10[(-exp10) as usize]
            } else {
                m * POW10[exp10 as usize]
            };
            if negative { -v } else { v }
        } else if digits <= 19
            && let Some(v) = eisel_lemire(mantissa, exp10)
        {
            if negative { -v } else { v }
        } else {
            fast_float2::parse(&b[start..i]).ok()?
        };
        v.is_finite().then_some(v)
    }

    /// A payload that is one object and nothing after it: each member's key to `member`,
    /// which reads its value (`None`: the payload is refused).
    #[inline]
    fn whole_object(
        &mut self,
        mut member: impl FnMut(&mut Self, &'a [u8]) -> Option<()>,
    ) -> Option<()> {
        self.eat(b'{')?;
        loop {
            let key = self.key()?;
            self.eat(b':')?;
            member(self, key)?;
            if next_or_end(self.b, &mut self.i, b'}')? {
                break;
            }
        }
        self.ws();
        (self.i == self.b.len()).then_some(())
    }

    /// A list's `[` (after whitespace), and whether the list is empty (its `]` taken too).
    #[inline]
    fn open_list(&mut self) -> Option<bool> {
        self.eat(b'[')?;
        let empty = self.peek(b']');
        if empty {
            self.i += 1;
        }
        Some(empty)
    }

    /// `[numbers]` appended to `out`; returns how many.
    fn numbers(&mut self, out: &mut Vec<f64>) -> Option<usize> {
        if self.open_list()? {
            return Some(0);
        }
        let mut n = 0;
        loop {
            out.push(self.number()?);
            n += 1;
            if !self.comma()? {
                return Some(n);
            }
        }
    }

    /// `[p numbers]` written into `x`, p > 0 (`x` grows by p; the caller truncates it when
    /// this answers `None`). The rows are most of the bytes: each number goes straight to
    /// its slot, the position stays in a register, and `, ` (json.dumps) or `,` between
    /// numbers is one comparison.
    #[inline(always)]
    fn row(&mut self, p: usize, x: &mut Vec<f64>) -> Option<()> {
        self.eat(b'[')?;
        let x0 = x.len();
        x.resize(x0 + p, 0.0);
        let b = self.b;
        let mut i = self.i;
        let (last, rest) = x[x0..].split_last_mut()?;
        for slot in rest {
            (*slot, i) = match short_number(b, i) {
                Some(r) => r,
                None => self.number_slow(i)?,
            };
            i = match b.get(i..i + 2) {
                Some(b", ") => i + 2,
                _ if b.get(i) == Some(&b',') => i + 1,
                _ => {
                    self.i = i;
                    self.comma()?.then_some(self.i)?
                }
            };
        }
        (*last, self.i) = match short_number(b, i) {
            Some(r) => r,
            None => self.number_slow(i)?,
        };
        self.eat(b']')
    }

    /// After a number in a list: `,` (taken: `true`) or `]` (taken: `false`), whitespace
    /// around them skipped; `None` for anything else.
    #[inline]
    fn comma(&mut self) -> Option<bool> {
        // Most often a comma follows at once (`number` skips whitespace before a number).
        if self.b.get(self.i) != Some(&b',') {
            self.ws();
        }
        match self.b.get(self.i) {
            Some(b',') => {
                self.i += 1;
                Some(true)
            }
            Some(b']') => {
                self.i += 1;
                Some(false)
            }
            _ => None,
        }
    }

    /// `[[p numbers], ...]` appended to `x`; returns the rows.
    fn rows(&mut self, p: usize, x: &mut Vec<f64>) -> Option<usize> {
        if self.open_list()? {
            return Some(0);
        }
        let mut rows = 0;
        loop {
            if p == 0 {
                self.eat(b'[')?;
                self.eat(b']')?;
            } else {
                self.row(p, x)?;
            }
            rows += 1;
            if next_or_end(self.b, &mut self.i, b']')? {
                return Some(rows);
            }
        }
    }

    /// A named mini-batch's `columns`: the stream's column of each, every one of the p
    /// exactly once.
    fn columns(&mut self, p: usize, column: &dyn Fn(&str) -> Option<usize>) -> Option<Vec<usize>> {
        self.eat(b'[')?;
        let mut order = Vec::with_capacity(p);
        let mut seen = vec![false; p];
        loop {
            let name = std::str::from_utf8(self.key()?).ok()?;
            let j = column(name)?;
            if std::mem::replace(seen.get_mut(j)?, true) {
                return None;
            }
            order.push(j);
            if !self.comma()? {
                break;
            }
        }
        (order.len() == p).then_some(order)
    }

    /// The message's rows appended to `x` and `y`, which held `x0` and `y0` values before it.
    fn message(
        mut self,
        p: usize,
        shapes: Shapes,
        x: &mut Vec<f64>,
        y: &mut Vec<f64>,
        (x0, y0): (usize, usize),
    ) -> Option<usize> {
        let mut shape = None;
        let mut y_one = None;
        let mut y_many = false;
        let mut order = None;
        self.whole_object(|s, key| {
            match key {
                b"columns" if order.is_none() => {
                    order = Some(s.columns(p, shapes.column?)?);
                }
                b"x" if shape.is_none() => {
                    if p > 0 {
                        s.row(p, x)?;
                    } else if s.numbers(x)? != 0 {
                        return None;
                    }
                    shape = Some(Shape::Row);
                }
                b"rows" if shape.is_none() => shape = Some(Shape::Rows(s.rows(p, x)?)),
                b"y" if y_one.is_none() && !y_many => {
                    if s.peek(b'[') {
                        s.numbers(y)?;
                        y_many = true;
                    } else {
                        y_one = Some(s.number()?);
                    }
                }
                _ => return None,
            }
            Some(())
        })?;
        match (shape?, y_one, order) {
            (Shape::Row, Some(v), None) if shapes.positional => {
                y.push(v);
                Some(1)
            }
            (Shape::Rows(rows), None, None)
                if shapes.positional && y_many && y.len() - y0 == rows =>
            {
                Some(rows)
            }
            (Shape::Rows(rows), None, Some(order)) if y_many && y.len() - y0 == rows => {
                // Each row from the message's column order into the stream's.
                if order.iter().enumerate().any(|(i, &j)| i != j) {
                    let mut scratch = vec![0.0; p];
                    for row in x[x0..].chunks_exact_mut(p.max(1)) {
                        for (v, &j) in row.iter().zip(&order) {
                            scratch[j] = *v;
                        }
                        row.copy_from_slice(&scratch);
                    }
                }
                Some(rows)
            }
            _ => None,
        }
    }
}
