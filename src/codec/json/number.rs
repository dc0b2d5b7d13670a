//! The JSON fast path's numbers (`fast_json`): the SWAR digit primitives, the Eisel-Lemire
//! rounding on digits the parser already gathered, and the short shape shortest round-trip
//! writers give most doubles (`-0.24836162209524854`), checked and converted with SSE2 on
//! x86-64 (`sse2`, this file's only `unsafe`) or as three eight-byte words elsewhere
//! (`short_body_scalar`, also the reference the SSE2 path is tested against). Each path
//! rounds correctly; fast-float2 takes what lies beyond their range. Kept apart from the
//! message shapes because it is arithmetic on bytes, tested on its own terms.

/// Bytes a number's fast path may read past its start: a sign, a word of integer digits,
/// the point, three words of fraction digits, `e`, a sign and a word of exponent digits.
pub(super) const AHEAD: usize = 1 + 8 + 1 + 24 + 2 + 8;

/// 10^k for k in 0..=8.
pub(super) const POW10_U64: [u64; 9] = [
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
pub(super) fn word(b: &[u8], i: usize) -> u64 {
    u64::from_le_bytes(b[i..i + 8].try_into().expect("eight bytes"))
}

/// The bytes of `w` minus `'0'` (each a digit's value where the byte is a digit) and how many
/// of its first bytes are ASCII digits (0 to 8), without a branch: a byte is a digit when
/// `byte ^ 0x30` is below 10, which adding 0x76 carries into its top bit (no carry leaves
/// a byte: the top bit is cleared first and tested apart).
#[inline(always)]
pub(super) fn digit_run(w: u64) -> (u64, u32) {
    const LOW7: u64 = 0x7F7F_7F7F_7F7F_7F7F;
    let t = w ^ 0x3030_3030_3030_3030;
    let not_digit = (((t & LOW7) + 0x7676_7676_7676_7676) | t) & 0x8080_8080_8080_8080;
    (t, not_digit.trailing_zeros() / 8)
}

/// The value of the eight digits of `t` from `digit_run` (all digits), combined pairwise as
/// fast-float does.
#[inline(always)]
pub(super) fn eight_value(t: u64) -> u64 {
    let v = t.wrapping_mul(10).wrapping_add(t >> 8);
    ((v & 0x0000_00FF_0000_00FF).wrapping_mul(100 + (1_000_000 << 32)))
        .wrapping_add(((v >> 16) & 0x0000_00FF_0000_00FF).wrapping_mul(1 + (10_000 << 32)))
        >> 32
}

/// The value of the first `n` (0 to 3) digits of `t` from `digit_run`: shifted so that
/// those digits are the last `n` of its first three bytes (zeros come in front).
#[inline(always)]
pub(super) fn few_value(t: u64, n: u32) -> u64 {
    let d = t << (24 - 8 * (n & 3));
    (d & 0xFF) * 100 + ((d >> 8) & 0xFF) * 10 + ((d >> 16) & 0xFF)
}

/// The value of the first `n` (0 to 8) digits of `t` from `digit_run`: shifted so that they
/// are the last `n` of eight (the bytes after them drop out, zeros come in front), then
/// combined pairwise as fast-float does.
#[inline(always)]
pub(super) fn run_value(t: u64, n: u32) -> u64 {
    // Through u128 so that n = 0 (a shift by 64) gives 0.
    eight_value(((t as u128) << (64 - 8 * n)) as u64)
}

/// Whether the eight bytes of `w` are all ASCII digits (as fast-float tests it).
#[inline(always)]
pub(super) fn all_digits(w: u64) -> bool {
    (w & 0xF0F0_F0F0_F0F0_F0F0)
        | (((w.wrapping_add(0x0606_0606_0606_0606)) & 0xF0F0_F0F0_F0F0_F0F0) >> 4)
        == 0x3333_3333_3333_3333
}

/// The value of the eight bytes at `i` when they are all ASCII digits (SWAR, as
/// fast-float does).
#[inline]
pub(super) fn eight_digits(b: &[u8], i: usize) -> Option<u64> {
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
pub(super) const EL_MIN: i64 = -27;
pub(super) const EL_MAX: i64 = 55;

/// 5^q for q in `EL_MIN..=EL_MAX`, as fast_float tabulates it: the 128 most significant
/// bits (high word first) of 5^q, and of 2^b / 5^-q + 1 for negative q (b such that the
/// quotient has 128 bits). Computed at compile time (exact: u128 for 5^55, and 64-bit
/// long division by 5^27 < 2^63).
pub(super) const POW5: [(u64, u64); (EL_MAX - EL_MIN + 1) as usize] = {
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
pub(super) fn eisel_lemire(w: u64, q: i64) -> Option<f64> {
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

/// Bytes `short_number` reads from a number's start: a sign and `SHORT_BODY`.
pub(super) const SHORT: usize = 1 + SHORT_BODY;

/// Bytes the paths of the short shape read from its integer digit: the SSE2 one 16 bytes
/// (the digit, the point and 14 fraction digits) and a word (the last 1 to 4 fraction
/// digits and the byte after them); the scalar one three words from the point.
pub(super) const SHORT_BODY: usize = 25;

/// The shape shortest round-trip writers give most doubles (`-0.24836162209524854`: a
/// sign or not, one integer digit, the point and 14 to 18 fraction digits, no exponent),
/// at `start`, when the `SHORT` bytes it reads are there: its value and where it ends.
/// `None` for anything else (whitespace first included), which `Parser::number_slow` reads.
#[inline(always)]
pub(super) fn short_number(b: &[u8], start: usize) -> Option<(f64, usize)> {
    let c: &[u8; SHORT] = b.get(start..start + SHORT)?.try_into().ok()?;
    let negative = c[0] == b'-';
    let i = negative as usize;
    let body: &[u8; SHORT_BODY] = c[i..i + SHORT_BODY].try_into().ok()?;
    let (v, len) = short_body(body)?;
    // The sign bit without a branch (-0 stays -0, as serde_json has it).
    let v = f64::from_bits(v.to_bits() | (u64::from(negative) << 63));
    Some((v, start + i + len))
}

#[cfg(not(all(target_arch = "x86_64", target_feature = "sse2")))]
use short_body_scalar as short_body;
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
use sse2::short_body;

/// `short_number` after the sign, a word at a time: the integer digit with the first seven
/// fraction digits (the point's byte replaced), the next seven or eight, and 0 to 3 more
/// after eight (`digit_run`), converted without a branch on their count and rounded by
/// Eisel-Lemire. The unsigned value and the bytes read. The path where SSE2 is not there
/// (other CPUs than x86-64), and the reference the SSE2 path is tested against.
#[cfg_attr(all(target_arch = "x86_64", target_feature = "sse2"), allow(dead_code))]
#[inline(always)]
pub(super) fn short_body_scalar(c: &[u8; SHORT_BODY]) -> Option<(f64, usize)> {
    let point = word(c, 1);
    if point as u8 != b'.' {
        return None;
    }
    let w1 = (point & !0xFF) | u64::from(c[0]);
    let (t2, n2) = digit_run(word(c, 9));
    let (t3, n3) = digit_run(word(c, 17));
    // The third word counts only after a whole second one.
    let n3 = if n2 == 8 { n3 } else { 0 };
    let end = 9 + n2 as usize + (n3 as usize & 3);
    if !(all_digits(w1) && n2 >= 7 && n3 <= 3 && c[end] | 0x20 != b'e') {
        return None;
    }
    let mantissa = (eight_value(w1 - 0x3030_3030_3030_3030) * POW10_U64[n2 as usize]
        + run_value(t2, n2))
        * POW10_U64[n3 as usize & 3]
        + few_value(t3, n3);
    Some((eisel_lemire(mantissa, -7 - i64::from(n2 + n3))?, end))
}

/// `short_body_scalar` with SSE2, compiled only where the build enables SSE2 (every x86-64
/// target does: it is part of the architecture's baseline, so there is nothing to detect at
/// run time). This module owns the only `unsafe` of the JSON fast path: the SSE2 intrinsics
/// (whose one requirement is that feature, which the `cfg` above guarantees) and one
/// unaligned 16-byte load from an array that holds the bytes.
#[cfg(all(target_arch = "x86_64", target_feature = "sse2"))]
#[allow(unsafe_code)]
pub(super) mod sse2 {
    use super::{SHORT_BODY, digit_run, eisel_lemire_short, word};
    use std::arch::x86_64::*;

    /// One vector checks and converts the first 15 digits: the bytes minus `'0'` (minus
    /// `'.'` in the point's lane, which weighs 0) must all be at most 9 (the point's 0),
    /// then lanes are combined into pairs, fours and eights by multiply-adds (as simdjson
    /// converts digits, here with SSE2's 16-bit one after widening). The word after them
    /// holds the last 0 to 4 fraction digits; they count as four, the missing ones zeros,
    /// so the mantissa is the number's digits times 10^(4 - count) and the exponent is
    /// always -18: one Eisel-Lemire constant, no branch or table on the count.
    #[inline(always)]
    pub(super) fn short_body(c: &[u8; SHORT_BODY]) -> Option<(f64, usize)> {
        const _: () = assert!(SHORT_BODY >= 24);
        // SAFETY: SSE2 is enabled for this build (the module's `cfg`), which is all the
        // intrinsics below require; `c` holds SHORT_BODY >= 16 bytes from its start, and
        // `loadu` reads 16 bytes with no alignment requirement.
        let two = unsafe {
            let v = _mm_loadu_si128(c.as_ptr().cast());
            let (z, p) = (b'0' as i8, b'.' as i8);
            let t = _mm_sub_epi8(
                v,
                _mm_setr_epi8(z, p, z, z, z, z, z, z, z, z, z, z, z, z, z, z),
            );
            let limit = _mm_setr_epi8(9, 0, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9, 9);
            if _mm_movemask_epi8(_mm_cmpeq_epi8(_mm_min_epu8(t, limit), t)) != 0xFFFF {
                return None;
            }
            let zero = _mm_setzero_si128();
            // 16-bit lanes times (10, 1) pairwise; the integer digit's pair is (digit, point)
            // times (1, 0).
            let lo = _mm_madd_epi16(
                _mm_unpacklo_epi8(t, zero),
                _mm_setr_epi16(1, 0, 10, 1, 10, 1, 10, 1),
            );
            let hi = _mm_madd_epi16(_mm_unpackhi_epi8(t, zero), _mm_set1_epi32(0x0001_000A));
            // Pairs (< 100) times (100, 1): fours; fours (< 10^4) times (10^4, 1): eights.
            let fours = _mm_madd_epi16(_mm_packs_epi32(lo, hi), _mm_set1_epi32(0x0001_0064));
            let eights = _mm_madd_epi16(_mm_packs_epi32(fours, fours), _mm_set1_epi32(0x0001_2710));
            _mm_cvtsi128_si64(eights) as u64
        };
        // The integer digit and 6 fraction digits, then 8 more.
        let head = (two & 0xFFFF_FFFF) * 100_000_000 + (two >> 32);
        let (t4, r) = digit_run(word(c, 16));
        if r > 4 || c[16 + r as usize] | 0x20 == b'e' {
            return None;
        }
        // The run's digits (the bytes after it cleared), as four: pairs, then one sum.
        let t4 = t4 & !(u64::MAX << (8 * r));
        let pairs = (t4.wrapping_mul(10).wrapping_add(t4 >> 8)) & 0x00FF_00FF;
        let tail = (pairs.wrapping_mul(1 + (100 << 16)) >> 16) & 0xFFFF;
        Some((eisel_lemire_short(head * 10_000 + tail), 16 + r as usize))
    }
}

/// `eisel_lemire(w, -18)` for w < 10^19 (the SSE2 short shape's mantissa), with the last
/// steps done by the FPU: the same product's high word, with the bit below the rounding bit
/// forced on, converted to f64 rounds exactly as Eisel-Lemire does (up when the bit after
/// the 53 kept is 1: an exact tie cannot occur at this exponent, as `eisel_lemire` notes),
/// and a power of two scales it exactly (the result, below 10 and at least 10^-18, is
/// normal). About half the instructions of the general steps.
#[cfg_attr(
    not(all(target_arch = "x86_64", target_feature = "sse2")),
    allow(dead_code)
)]
#[inline(always)]
pub(super) fn eisel_lemire_short(w: u64) -> f64 {
    const Q: i64 = -18;
    const MASK: u64 = u64::MAX >> (52 + 3);
    if w == 0 {
        return 0.0;
    }
    let lz = w.leading_zeros();
    let w = w << lz;
    let (hi5, lo5) = POW5[(Q - EL_MIN) as usize];
    let full = (w as u128) * (hi5 as u128);
    let (lo, mut hi) = (full as u64, (full >> 64) as u64);
    if hi & MASK == MASK {
        let second_hi = (((w as u128) * (lo5 as u128)) >> 64) as u64;
        hi += u64::from(lo.wrapping_add(second_hi) < second_hi);
    }
    // hi * 2^(power - lz - 62) is the value (`eisel_lemire`'s exponent with its shifts
    // undone), power = 3 at q = -18; halved so that the conversion is signed.
    const POWER: i32 = ((Q as i32).wrapping_mul(152_170 + 65536) >> 16) + 63;
    let scale = f64::from_bits(((1023 + POWER - 61 - lz as i32) as u64) << 52);
    (((hi >> 1) | 1) as i64 as f64) * scale
}

#[cfg(test)]
mod tests {
    use super::*;

    fn xorshift(mut state: u64) -> impl FnMut() -> u64 {
        move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        }
    }

    /// The body `short_number` gets: `text`, then `after` cycled to fill `SHORT_BODY`.
    fn body(text: &[u8], after: &[u8]) -> [u8; SHORT_BODY] {
        let mut c = [0u8; SHORT_BODY];
        for (k, slot) in c.iter_mut().enumerate() {
            *slot = match text.get(k) {
                Some(&t) => t,
                None => after[(k - text.len()) % after.len()],
            };
        }
        c
    }

    /// The short shape's answer for `c`: the bits of the value and the bytes read.
    fn answer(
        f: fn(&[u8; SHORT_BODY]) -> Option<(f64, usize)>,
        c: &[u8; SHORT_BODY],
    ) -> Option<(u64, usize)> {
        f(c).map(|(v, n)| (v.to_bits(), n))
    }

    /// The short shape (`short_body`: SSE2 on x86-64) against the scalar path it replaces
    /// there (`short_body_scalar`, which is what other CPUs run) and against Rust's own
    /// correctly rounded parser: one integer digit then 0 to 22 fraction digits (14 to 18
    /// taken), leading zeros, all zeros and all nines, followed by each byte that may end a
    /// number or must not (`e`, `E`, a digit after a separator, `.`), and with one byte of
    /// the number changed to a byte that is not a digit or is one (so every lane's check is
    /// seen failing). Both answer the same for every body, and what they take is the
    /// number the text says.
    #[test]
    fn the_short_shape_agrees_with_the_scalar_path_and_std() {
        let mut next = xorshift(0x9E37_79B9_7F4A_7C15);
        let afters: [&[u8]; 12] = [
            b",", b", ", b"]", b"]}", b" ", b"e5", b"E-3", b"e+1", b".5", b",1", b"x", b"\0",
        ];
        let odd = b"0123456789.-+eE ,]x/:\0\xFF\x80\xB0";
        let (mut taken, mut declined) = (0, 0);
        for fraction in 0..=22usize {
            for case in 0..400 {
                let mut text = vec![b'0' + (next() % 10) as u8];
                if fraction > 0 || case % 2 == 0 {
                    text.push(b'.');
                }
                for k in 0..fraction {
                    text.push(match case % 8 {
                        0 => b'0',
                        1 => b'9',
                        2 if k < 3 => b'0',
                        _ => b'0' + (next() % 10) as u8,
                    });
                }
                let after = afters[case % afters.len()];
                let mut c = body(&text, after);
                if case % 5 == 4 {
                    let k = (next() % SHORT_BODY as u64) as usize;
                    c[k] = odd[(next() % odd.len() as u64) as usize];
                }
                let fast = answer(short_body, &c);
                assert_eq!(
                    fast,
                    answer(short_body_scalar, &c),
                    "{:?}",
                    String::from_utf8_lossy(&c)
                );
                let Some((bits, n)) = fast else {
                    declined += 1;
                    continue;
                };
                taken += 1;
                let number = std::str::from_utf8(&c[..n]).unwrap();
                assert!((16..=20).contains(&n), "{number}");
                assert!(!c[n].is_ascii_digit() && c[n] | 0x20 != b'e', "{number}");
                let want: f64 = number.parse().unwrap();
                assert_eq!(bits, want.to_bits(), "{number}");
            }
        }
        assert!(taken > 800 && declined > 5000, "{taken} {declined}");
    }

    /// `eisel_lemire_short` against `eisel_lemire` at q = -18 and against Rust's parser:
    /// mantissas of every bit length up to 10^19, and the 19-digit neighbours of the exact
    /// half-way points between adjacent doubles from 10^-18 to 10 (where the rounding bit
    /// decides and the forced bit below it must not).
    #[test]
    fn the_short_rounding_agrees_with_eisel_lemire() {
        let mut next = xorshift(0xD1B5_4A32_D192_ED03);
        let limit = 10_000_000_000_000_000_000u64;
        let mut ws = vec![0, 1, 9, limit - 1, 1 << 53, (1 << 53) + 1, 1 << 63];
        for bits in 1..=64 {
            for _ in 0..2000 {
                let w = next() >> (64 - bits);
                if w < limit {
                    ws.push(w);
                }
            }
        }
        for _ in 0..20_000 {
            // A double in [1e-18, 10) and the exact half-way point above it, M * 2^-e.
            let v = 10f64.powf(-18.0 + 19.0 * (next() >> 11) as f64 / (1u64 << 53) as f64);
            let (mantissa, exp) = {
                let b = v.to_bits();
                ((b & ((1 << 52) - 1)) | (1 << 52), (b >> 52) as i32 - 1075)
            };
            let (m, e) = (u128::from(2 * mantissa + 1), -(exp - 1));
            // floor(M 2^-e 10^18), exact: M < 2^54 and 10^18 < 2^60, e <= 114.
            let floor = (m * 1_000_000_000_000_000_000) >> e;
            for w in [floor.saturating_sub(1), floor, floor + 1] {
                if w < u128::from(limit) {
                    ws.push(w as u64);
                }
            }
        }
        let mut hard = 0;
        for &w in &ws {
            let got = eisel_lemire_short(w);
            assert_eq!(
                Some(got.to_bits()),
                eisel_lemire(w, -18).map(f64::to_bits),
                "{w}"
            );
            let want: f64 = format!("{w}e-18").parse().unwrap();
            assert_eq!(got.to_bits(), want.to_bits(), "{w}");
            let lz = w.leading_zeros();
            let hi = ((u128::from(w << (lz & 63)) * u128::from(POW5[(-18 - EL_MIN) as usize].0))
                >> 64) as u64;
            hard += usize::from(w != 0 && hi & 0x1FF == 0x1FF);
        }
        assert!(ws.len() > 150_000 && hard > 100, "{} {hard}", ws.len());
    }

    /// `short_number` with a sign, at every distance from the end of the input: taken only
    /// when the `SHORT` bytes it reads are there, and then the value and end std and the
    /// scalar path give.
    #[test]
    fn the_short_number_reads_only_what_is_there() {
        for text in [
            "-0.24836162209524854",
            "0.123456789012345",
            "-9.999999999999999999",
            "-0.000000000000000",
        ] {
            for pad in 0..40 {
                let input = format!("{text}{}", ",".repeat(pad));
                let got = short_number(input.as_bytes(), 0);
                if input.len() < SHORT {
                    assert_eq!(got, None, "{input}");
                    continue;
                }
                let (v, end) = got.expect(text);
                assert_eq!(end, text.len(), "{input}");
                assert_eq!(
                    v.to_bits(),
                    text.parse::<f64>().unwrap().to_bits(),
                    "{input}"
                );
            }
        }
    }
}
