//! The fast path of the JSON row and mini-batch shapes (and of feature-stream columns). It
//! accepts a strict subset of what serde_json accepts, with the same values (both parsers
//! round correctly); on anything else it appends nothing and answers `None`, and the caller's
//! serde_json path decides.
//!
//! Numbers are most of the bytes and of the time, so they have three paths, fastest first:
//! the shape shortest round-trip writers give most doubles (`-0.24836162209524854`: one
//! integer digit and 15 to 18 fraction digits) as three eight-byte words with no branch on
//! their length; any number of up to 19 digits a word at a time; and a byte at a time, for
//! the rest and for the last `AHEAD` bytes of a message. Each rounds correctly (Eisel-Lemire
//! on the digits gathered, or fast-float2 beyond its range).

/// Decodes `{"x": [p numbers], "y": number}` or `{"rows": [[p numbers], ...], "y":
/// [numbers]}` (keys in any order, JSON whitespace anywhere between tokens) and appends the
/// rows; `None`, with nothing appended, for anything else.
pub fn decode(payload: &[u8], p: usize, x: &mut Vec<f64>, y: &mut Vec<f64>) -> Option<usize> {
    let (x0, y0) = (x.len(), y.len());
    let out = Parser { b: payload, i: 0 }.message(p, x, y);
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
    let mut p = Parser { b: payload, i: 0 };
    let (mut name, mut values) = (None, None);
    p.eat(b'{')?;
    loop {
        let key = p.key()?;
        p.eat(b':')?;
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
        p.ws();
        match p.b.get(p.i) {
            Some(b',') => p.i += 1,
            Some(b'}') => {
                p.i += 1;
                break;
            }
            _ => return None,
        }
    }
    p.ws();
    (p.i == payload.len()).then_some(())?;
    Some((name?, values?))
}

enum Shape {
    Row,
    Rows(usize),
}

/// Bytes a number's fast path may read past its start: a sign, a word of integer digits,
/// the point, three words of fraction digits, `e`, a sign and a word of exponent digits.
const AHEAD: usize = 1 + 8 + 1 + 24 + 2 + 8;

/// 10^k for k in 0..=8.
const POW10_U64: [u64; 9] = [
    1,
    10,
    100,
    1_000,
    10_000,
    100_000,
    1_000_000,
    10_000_000,
    100_000_000,
];

/// The eight bytes at `i`, little-endian (the first byte lowest).
#[inline(always)]
fn word(b: &[u8], i: usize) -> u64 {
    u64::from_le_bytes(b[i..i + 8].try_into().expect("eight bytes"))
}

/// The bytes of `w` minus `'0'` (each a digit's value where the byte is a digit) and how many
/// of its first bytes are ASCII digits (0 to 8), without a branch: a byte is a digit when
/// `byte ^ 0x30` is below 10, which adding 0x76 carries into its top bit (no carry leaves
/// a byte: the top bit is cleared first and tested apart).
#[inline(always)]
fn digit_run(w: u64) -> (u64, u32) {
    const LOW7: u64 = 0x7F7F_7F7F_7F7F_7F7F;
    let t = w ^ 0x3030_3030_3030_3030;
    let not_digit = (((t & LOW7) + 0x7676_7676_7676_7676) | t) & 0x8080_8080_8080_8080;
    (t, not_digit.trailing_zeros() / 8)
}

/// The value of the eight digits of `t` from `digit_run` (all digits), combined pairwise as
/// fast-float does.
#[inline(always)]
fn eight_value(t: u64) -> u64 {
    let v = t.wrapping_mul(10).wrapping_add(t >> 8);
    ((v & 0x0000_00FF_0000_00FF).wrapping_mul(100 + (1_000_000 << 32)))
        .wrapping_add(((v >> 16) & 0x0000_00FF_0000_00FF).wrapping_mul(1 + (10_000 << 32)))
        >> 32
}

/// The value of the first `n` (0 to 3) digits of `t` from `digit_run`: shifted so that
/// those digits are the last `n` of its first three bytes (zeros come in front).
#[inline(always)]
fn few_value(t: u64, n: u32) -> u64 {
    let d = t << (24 - 8 * (n & 3));
    (d & 0xFF) * 100 + ((d >> 8) & 0xFF) * 10 + ((d >> 16) & 0xFF)
}

/// The value of the first `n` (0 to 8) digits of `t` from `digit_run`: shifted so that they
/// are the last `n` of eight (the bytes after them drop out, zeros come in front), then
/// combined pairwise as fast-float does.
#[inline(always)]
fn run_value(t: u64, n: u32) -> u64 {
    // Through u128 so that n = 0 (a shift by 64) gives 0.
    eight_value(((t as u128) << (64 - 8 * n)) as u64)
}

/// Whether the eight bytes of `w` are all ASCII digits (as fast-float tests it).
#[inline(always)]
fn all_digits(w: u64) -> bool {
    (w & 0xF0F0_F0F0_F0F0_F0F0)
        | (((w.wrapping_add(0x0606_0606_0606_0606)) & 0xF0F0_F0F0_F0F0_F0F0) >> 4)
        == 0x3333_3333_3333_3333
}

/// The value of the eight bytes at `i` when they are all ASCII digits (SWAR, as
/// fast-float does).
#[inline]
fn eight_digits(b: &[u8], i: usize) -> Option<u64> {
    let v = u64::from_le_bytes(b.get(i..i + 8)?.try_into().ok()?);
    let all_digits = (v & 0xF0F0_F0F0_F0F0_F0F0)
        | (((v.wrapping_add(0x0606_0606_0606_0606)) & 0xF0F0_F0F0_F0F0_F0F0) >> 4)
        == 0x3333_3333_3333_3333;
    if !all_digits {
        return None;
    }
    let v = v - 0x3030_3030_3030_3030;
    let v = v.wrapping_mul(10).wrapping_add(v >> 8);
    let v = ((v & 0x0000_00FF_0000_00FF).wrapping_mul(100 + (1_000_000 << 32)))
        .wrapping_add(((v >> 16) & 0x0000_00FF_0000_00FF).wrapping_mul(1 + (10_000 << 32)))
        >> 32;
    Some(v)
}

/// Decimal exponents `eisel_lemire` takes: 5^q fits 128 bits for q <= 55, and 5^-q 64
/// bits for q >= -27 (the range where fast_float's product never needs its error path).
/// Seventeen significant digits with the point anywhere in them fall inside.
const EL_MIN: i64 = -27;
const EL_MAX: i64 = 55;

/// 5^q for q in `EL_MIN..=EL_MAX`, as fast_float tabulates it: the 128 most significant
/// bits (high word first) of 5^q, and of 2^b / 5^-q + 1 for negative q (b such that the
/// quotient has 128 bits). Computed at compile time (exact: u128 for 5^55, and 64-bit
/// long division by 5^27 < 2^63).
const POW5: [(u64, u64); (EL_MAX - EL_MIN + 1) as usize] = {
    let mut table = [(0u64, 0u64); (EL_MAX - EL_MIN + 1) as usize];
    let mut k = 0;
    while k < table.len() {
        let q = EL_MIN + k as i64;
        let c: u128 = if q >= 0 {
            let mut c = 1u128;
            let mut j = 0;
            while j < q {
                c *= 5;
                j += 1;
            }
            c << c.leading_zeros()
        } else {
            let mut d = 1u64;
            let mut j = 0;
            while j < -q {
                d *= 5;
                j += 1;
            }
            // z: the bits of d (5^-q is never a power of two), b = z + 127, so the
            // quotient 2^b / d lies in [2^127, 2^128). Long division of the limbs of 2^b.
            let z = 64 - d.leading_zeros();
            let b = z + 127;
            let mut limbs = [0u64; 3];
            limbs[(b / 64) as usize] = 1 << (b % 64);
            let (mut rem, mut quot) = (0u128, [0u64; 3]);
            let mut l = 3;
            while l > 0 {
                l -= 1;
                let cur = (rem << 64) | limbs[l] as u128;
                quot[l] = (cur / d as u128) as u64;
                rem = cur % d as u128;
            }
            let c = ((quot[1] as u128) << 64) | quot[0] as u128;
            match c.checked_add(1) {
                Some(c) => c,
                None => 1 << 127,
            }
        };
        table[k] = ((c >> 64) as u64, c as u64);
        k += 1;
    }
    table
};

/// `w * 10^q` correctly rounded to f64 (w < 10^19, q in `EL_MIN..=EL_MAX`), by the
/// Eisel-Lemire algorithm as fast-float2's `compute_float` does it (the same table
/// entries and steps, for f64), from the digits the parser already gathered instead of a
/// second pass over the bytes. `None` outside that range.
#[inline]
fn eisel_lemire(w: u64, q: i64) -> Option<f64> {
    const EXPLICIT: i32 = 52;
    if !(EL_MIN..=EL_MAX).contains(&q) {
        return None;
    }
    if w == 0 {
        return Some(0.0);
    }
    let lz = w.leading_zeros() as i32;
    let w = w << lz;
    // The product's high 128 bits, as far as they matter for `EXPLICIT + 3` bits.
    let (hi5, lo5) = POW5[(q - EL_MIN) as usize];
    let full = (w as u128) * (hi5 as u128);
    let (mut lo, mut hi) = (full as u64, (full >> 64) as u64);
    let mask = u64::MAX >> (EXPLICIT + 3);
    if hi & mask == mask {
        let second_hi = (((w as u128) * (lo5 as u128)) >> 64) as u64;
        lo = lo.wrapping_add(second_hi);
        if second_hi > lo {
            hi += 1;
        }
    }
    let upperbit = (hi >> 63) as i32;
    let shift = upperbit + 64 - EXPLICIT - 3;
    let mut mantissa = hi >> shift;
    let power = ((q as i32).wrapping_mul(152_170 + 65536) >> 16) + 63;
    let mut power2 = power + upperbit - lz + 1023;
    if power2 <= 0 {
        // Subnormal: not reached for q >= -27, kept as fast_float has it.
        if -power2 + 1 >= 64 {
            return Some(0.0);
        }
        mantissa >>= -power2 + 1;
        mantissa += mantissa & 1;
        mantissa >>= 1;
        power2 = (mantissa >= (1u64 << EXPLICIT)) as i32;
        return Some(f64::from_bits(mantissa | ((power2 as u64) << EXPLICIT)));
    }
    // A tie (the product exact and half-way): round to even.
    if lo <= 1 && (-4..=23).contains(&q) && mantissa & 3 == 1 && (mantissa << shift) == hi {
        mantissa &= !1;
    }
    mantissa += mantissa & 1;
    mantissa >>= 1;
    if mantissa >= (2u64 << EXPLICIT) {
        mantissa = 1u64 << EXPLICIT;
        power2 += 1;
    }
    mantissa &= !(1u64 << EXPLICIT);
    if power2 >= 0x7FF {
        return None;
    }
    Some(f64::from_bits(mantissa | ((power2 as u64) << EXPLICIT)))
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
    /// finite once rounded to f64, as `number_general` reads it but faster for the numbers
    /// it sees most: what a shortest round-trip writer (Python's `repr`, ryu) makes of a
    /// double of magnitude 1e-1 to 10, one integer digit and 15 to 18 fraction digits
    /// (`-0.24836162209524854`). Their digits are three words: the integer digit with the
    /// first seven fraction digits (the point's byte replaced), the next eight, and 0 to 3
    /// more (`digit_run`), converted without a branch on their count and rounded by
    /// Eisel-Lemire. Other numbers go to `number_words`, then `number_general`.
    #[inline(always)]
    fn number(&mut self) -> Option<f64> {
        self.ws();
        let b = self.b;
        let start = self.i;
        // The bytes the fast paths may read, as an array: no bounds check past this one.
        let Some(c) = b.get(start..start + AHEAD) else {
            return self.number_general();
        };
        let c: &[u8; AHEAD] = c.try_into().expect("AHEAD bytes");
        let negative = c[0] == b'-';
        let i = negative as usize;
        let point = word(c, i + 1);
        if point as u8 == b'.' {
            let w1 = (point & !0xFF) | u64::from(c[i]);
            let w2 = word(c, i + 9);
            let (t3, n3) = digit_run(word(c, i + 17));
            let end = i + 17 + (n3 as usize & 3);
            if all_digits(w1) & all_digits(w2) && n3 <= 3 && c[end] | 0x20 != b'e' {
                const ZEROS: u64 = 0x3030_3030_3030_3030;
                let mantissa = (eight_value(w1 - ZEROS) * 100_000_000 + eight_value(w2 - ZEROS))
                    * POW10_U64[n3 as usize & 3]
                    + few_value(t3, n3);
                if let Some(v) = eisel_lemire(mantissa, -15 - i64::from(n3)) {
                    self.i = start + end;
                    // The sign bit without a branch (-0 stays -0, as serde_json has it).
                    return Some(f64::from_bits(v.to_bits() | (u64::from(negative) << 63)));
                }
            }
        }
        self.number_words(start)
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

    /// `[numbers]` appended to `out`; returns how many.
    fn numbers(&mut self, out: &mut Vec<f64>) -> Option<usize> {
        self.eat(b'[')?;
        if self.peek(b']') {
            self.i += 1;
            return Some(0);
        }
        let mut n = 0;
        loop {
            out.push(self.number()?);
            n += 1;
            // Most often a comma follows at once (`number` skips whitespace before a number).
            if self.b.get(self.i) == Some(&b',') {
                self.i += 1;
                continue;
            }
            self.ws();
            match self.b.get(self.i) {
                Some(b',') => self.i += 1,
                Some(b']') => {
                    self.i += 1;
                    return Some(n);
                }
                _ => return None,
            }
        }
    }

    /// `[[p numbers], ...]` appended to `x`; returns the rows.
    fn rows(&mut self, p: usize, x: &mut Vec<f64>) -> Option<usize> {
        self.eat(b'[')?;
        if self.peek(b']') {
            self.i += 1;
            return Some(0);
        }
        let mut rows = 0;
        loop {
            if self.numbers(x)? != p {
                return None;
            }
            rows += 1;
            self.ws();
            match self.b.get(self.i) {
                Some(b',') => self.i += 1,
                Some(b']') => {
                    self.i += 1;
                    return Some(rows);
                }
                _ => return None,
            }
        }
    }

    fn message(mut self, p: usize, x: &mut Vec<f64>, y: &mut Vec<f64>) -> Option<usize> {
        let y0 = y.len();
        let mut shape = None;
        let mut y_one = None;
        let mut y_many = false;
        self.eat(b'{')?;
        loop {
            let key = self.key()?;
            self.eat(b':')?;
            match key {
                b"x" if shape.is_none() => {
                    if self.numbers(x)? != p {
                        return None;
                    }
                    shape = Some(Shape::Row);
                }
                b"rows" if shape.is_none() => shape = Some(Shape::Rows(self.rows(p, x)?)),
                b"y" if y_one.is_none() && !y_many => {
                    if self.peek(b'[') {
                        self.numbers(y)?;
                        y_many = true;
                    } else {
                        y_one = Some(self.number()?);
                    }
                }
                _ => return None,
            }
            self.ws();
            match self.b.get(self.i) {
                Some(b',') => self.i += 1,
                Some(b'}') => {
                    self.i += 1;
                    break;
                }
                _ => return None,
            }
        }
        self.ws();
        if self.i != self.b.len() {
            return None;
        }
        match (shape?, y_one) {
            (Shape::Row, Some(v)) => {
                y.push(v);
                Some(1)
            }
            (Shape::Rows(rows), None) if y_many && y.len() - y0 == rows => Some(rows),
            _ => None,
        }
    }
}
