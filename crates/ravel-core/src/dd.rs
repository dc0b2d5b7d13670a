//! Double-double arithmetic (`Dd`): a number as the unevaluated sum hi + lo of two doubles, about
//! 32 significant digits, from error-free transformations (Knuth's TwoSum, and TwoProduct by one
//! fused multiply-add: a * b - fl(a * b) is exact in `f64::mul_add`). The statistics of small p
//! are accumulated in it (stats/extended.rs) and the least-squares solve, the residual sum of
//! squares and the standard errors of those streams are computed in it (gram/extended.rs): the
//! normal equations square the condition number, and R^2 near 1 makes RSS = Syy - b'Sxy cancel;
//! both cost digits in double precision that twice the digits pay back (issue 58).
//!
//! An addition costs about 20 flops, a product about 10 (Bailey's QD, the "sloppy" product and
//! the accurate sum).

use std::ops::{Add, Div, Mul, Neg, Sub};

/// hi + lo with |lo| <= ulp(hi) / 2.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Dd {
    /// The leading double: the value rounded to double precision.
    pub hi: f64,
    /// The remainder.
    pub lo: f64,
}

/// s + e = a + b exactly (Knuth).
#[inline]
fn two_sum(a: f64, b: f64) -> (f64, f64) {
    let s = a + b;
    let bb = s - a;
    (s, (a - (s - bb)) + (b - bb))
}

/// s + e = a + b exactly, when |a| >= |b| or a = 0.
#[inline]
fn quick_two_sum(a: f64, b: f64) -> (f64, f64) {
    let s = a + b;
    (s, b - (s - a))
}

/// p + e = a * b exactly (barring underflow).
#[inline]
fn two_prod(a: f64, b: f64) -> (f64, f64) {
    let p = a * b;
    (p, a.mul_add(b, -p))
}

impl Dd {
    /// Zero.
    pub const ZERO: Dd = Dd { hi: 0.0, lo: 0.0 };
    /// One.
    pub const ONE: Dd = Dd { hi: 1.0, lo: 0.0 };

    /// hi + lo, renormalized.
    #[inline]
    pub fn new(hi: f64, lo: f64) -> Dd {
        let (hi, lo) = two_sum(hi, lo);
        Dd { hi, lo }
    }

    /// a - b exactly.
    #[inline]
    pub fn diff(a: f64, b: f64) -> Dd {
        let (hi, lo) = two_sum(a, -b);
        Dd { hi, lo }
    }

    /// a * b exactly.
    #[inline]
    pub fn prod(a: f64, b: f64) -> Dd {
        let (hi, lo) = two_prod(a, b);
        Dd { hi, lo }
    }

    /// The value rounded to double precision.
    #[inline]
    pub fn to_f64(self) -> f64 {
        self.hi + self.lo
    }

    /// self * b for a double b.
    #[inline]
    pub fn mul_f64(self, b: f64) -> Dd {
        let (p, e) = two_prod(self.hi, b);
        let (hi, lo) = quick_two_sum(p, self.lo.mul_add(b, e));
        Dd { hi, lo }
    }

    /// The absolute value.
    #[inline]
    pub fn abs(self) -> Dd {
        if self.hi < 0.0 { -self } else { self }
    }

    /// The square root (0 for a value <= 0).
    pub fn sqrt(self) -> Dd {
        if self.hi <= 0.0 {
            return Dd::ZERO;
        }
        let x = self.hi.sqrt();
        let r = self - Dd::prod(x, x);
        Dd::new(x, r.hi / (2.0 * x))
    }

    /// Whether both parts are finite.
    pub fn is_finite(self) -> bool {
        self.hi.is_finite() && self.lo.is_finite()
    }
}

impl From<f64> for Dd {
    #[inline]
    fn from(hi: f64) -> Dd {
        Dd { hi, lo: 0.0 }
    }
}

impl Add for Dd {
    type Output = Dd;
    /// The accurate sum (IEEE-style error bound, QD's `ieee_add`).
    #[inline]
    fn add(self, o: Dd) -> Dd {
        let (s, e) = two_sum(self.hi, o.hi);
        let (t, f) = two_sum(self.lo, o.lo);
        let (s, e) = quick_two_sum(s, e + t);
        let (hi, lo) = quick_two_sum(s, e + f);
        Dd { hi, lo }
    }
}

impl Neg for Dd {
    type Output = Dd;
    #[inline]
    fn neg(self) -> Dd {
        Dd {
            hi: -self.hi,
            lo: -self.lo,
        }
    }
}

impl Sub for Dd {
    type Output = Dd;
    #[inline]
    fn sub(self, o: Dd) -> Dd {
        self + (-o)
    }
}

impl Mul for Dd {
    type Output = Dd;
    #[inline]
    fn mul(self, o: Dd) -> Dd {
        let (p, e) = two_prod(self.hi, o.hi);
        let e = self.hi.mul_add(o.lo, self.lo.mul_add(o.hi, e));
        let (hi, lo) = quick_two_sum(p, e);
        Dd { hi, lo }
    }
}

impl Div for Dd {
    type Output = Dd;
    /// Long division, three quotient digits.
    fn div(self, o: Dd) -> Dd {
        let q1 = self.hi / o.hi;
        let r = self - o.mul_f64(q1);
        let q2 = r.hi / o.hi;
        let r = r - o.mul_f64(q2);
        let q3 = r.hi / o.hi;
        let (hi, lo) = quick_two_sum(q1, q2);
        Dd { hi, lo } + Dd::from(q3)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn products_and_sums_keep_the_digits_a_double_drops() {
        // (1 + 2^-40)^2 = 1 + 2^-39 + 2^-80: the last term is below a double's ulp of 1.
        let a = Dd::from(1.0 + 2f64.powi(-40));
        let sq = a * a;
        assert_eq!(sq.hi, 1.0 + 2f64.powi(-39));
        assert_eq!(sq.lo, 2f64.powi(-80));
        // 1e16 + 1 - 1e16 = 1, which a double rounds to 0 or 2.
        let s = Dd::from(1e16) + Dd::from(1.0) - Dd::from(1e16);
        assert_eq!(s.to_f64(), 1.0);
        // 1/3 * 3 = 1 to about 32 digits.
        let third = Dd::ONE / Dd::from(3.0);
        let back = third.mul_f64(3.0) - Dd::ONE;
        assert!(back.to_f64().abs() < 1e-31, "{back:?}");
        let r = Dd::from(2.0).sqrt();
        assert!((r * r - Dd::from(2.0)).to_f64().abs() < 1e-31);
        // 1e16 - 1 is not a double (the ulp there is 2): the difference keeps the 1.
        let d = Dd::diff(1e16, 1.0);
        assert_eq!((d.hi, d.lo), (1e16, -1.0));
    }
}
