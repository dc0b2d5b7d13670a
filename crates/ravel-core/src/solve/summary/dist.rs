//! The distributions the summary needs, to double precision: Student's t (CDF and quantile),
//! Fisher's F and chi-squared tails, the standard normal (CDF, tail, quantile) and the
//! truncated normal CDF of selective inference, computed in the tail it sits in so that a
//! truncation interval 40 standard deviations out keeps its digits. Built on the regularized
//! incomplete beta function of `solve::inference` and the incomplete gamma function here
//! (Numerical Recipes 6.2: series below a + 1, continued fraction above).

use crate::solve::inference::{beta_inc, ln_gamma};

/// P(T <= t) for Student's t with `df` degrees of freedom.
pub fn t_cdf(t: f64, df: f64) -> f64 {
    if t.is_nan() {
        return f64::NAN;
    }
    let tail = 0.5 * beta_inc(df / 2.0, 0.5, df / (df + t * t));
    if t < 0.0 { tail } else { 1.0 - tail }
}

/// P(T >= t) for t >= 0 (no cancellation in the upper tail).
fn t_upper(t: f64, df: f64) -> f64 {
    0.5 * beta_inc(df / 2.0, 0.5, df / (df + t * t))
}

/// The density of Student's t.
fn t_pdf(t: f64, df: f64) -> f64 {
    let ln_c =
        ln_gamma((df + 1.0) / 2.0) - ln_gamma(df / 2.0) - 0.5 * (df * std::f64::consts::PI).ln();
    (ln_c - (df + 1.0) / 2.0 * (t * t / df).ln_1p()).exp()
}

/// The quantile of Student's t: the q with P(T <= q) = p, p in (0, 1). Newton's method on the
/// tail that holds p, inside a bracket that bisection keeps.
pub fn t_quantile(p: f64, df: f64) -> f64 {
    if !(p > 0.0 && p < 1.0) || df.is_nan() || df <= 0.0 {
        return f64::NAN;
    }
    if p == 0.5 {
        return 0.0;
    }
    let a = p.min(1.0 - p);
    let (mut lo, mut hi) = (0.0f64, 1.0f64);
    while t_upper(hi, df) > a && hi < 1e300 {
        lo = hi;
        hi *= 2.0;
    }
    let mut q = (-norm_quantile(a)).clamp(lo, hi);
    if !(q > lo && q < hi) {
        q = 0.5 * (lo + hi);
    }
    for _ in 0..200 {
        let f = t_upper(q, df) - a;
        if f > 0.0 {
            lo = q;
        } else {
            hi = q;
        }
        let step = f / t_pdf(q, df);
        let mut next = q + step;
        if !(next > lo && next < hi) {
            next = 0.5 * (lo + hi);
        }
        if (next - q).abs() <= 1e-16 * q.abs() || hi - lo <= 1e-16 * hi {
            q = next;
            break;
        }
        q = next;
    }
    if p < 0.5 { -q } else { q }
}

/// P(F >= f) for Fisher's F with (d1, d2) degrees of freedom.
pub fn f_sf(f: f64, d1: f64, d2: f64) -> f64 {
    if f.is_nan() {
        return f64::NAN;
    }
    if f <= 0.0 {
        return 1.0;
    }
    if f.is_infinite() {
        return 0.0;
    }
    beta_inc(d2 / 2.0, d1 / 2.0, d2 / (d2 + d1 * f))
}

/// P(chi2(k) >= x).
pub fn chi2_sf(x: f64, k: f64) -> f64 {
    if x.is_nan() {
        return f64::NAN;
    }
    if x <= 0.0 {
        return 1.0;
    }
    gamma_q(k / 2.0, x / 2.0)
}

/// The regularized upper incomplete gamma function Q(a, x) = Gamma(a, x) / Gamma(a).
pub fn gamma_q(a: f64, x: f64) -> f64 {
    if x <= 0.0 {
        return 1.0;
    }
    if x.is_infinite() {
        return 0.0;
    }
    if x < a + 1.0 {
        1.0 - gamma_p_series(a, x)
    } else {
        (a * x.ln() - x - ln_gamma(a)).exp() * gamma_cf(a, x)
    }
}

/// P(a, x) by its series (x < a + 1).
fn gamma_p_series(a: f64, x: f64) -> f64 {
    let mut ap = a;
    let mut del = 1.0 / a;
    let mut sum = del;
    for _ in 0..10_000 {
        ap += 1.0;
        del *= x / ap;
        sum += del;
        if del.abs() < sum.abs() * 1e-17 {
            break;
        }
    }
    sum * (a * x.ln() - x - ln_gamma(a)).exp()
}

/// The continued fraction of Q(a, x) without its prefactor x^a e^-x / Gamma(a) (x >= a + 1;
/// modified Lentz).
fn gamma_cf(a: f64, x: f64) -> f64 {
    const TINY: f64 = 1e-300;
    let mut b = x + 1.0 - a;
    let mut c = 1.0 / TINY;
    let mut d = 1.0 / b;
    let mut h = d;
    for i in 1..100_000 {
        let an = -(i as f64) * (i as f64 - a);
        b += 2.0;
        d = an * d + b;
        if d.abs() < TINY {
            d = TINY;
        }
        c = b + an / c;
        if c.abs() < TINY {
            c = TINY;
        }
        d = 1.0 / d;
        let del = d * c;
        h *= del;
        if (del - 1.0).abs() < 1e-16 {
            break;
        }
    }
    h
}

/// The scaled complementary error function erfcx(z) = exp(z^2) erfc(z), z >= 0: finite and
/// accurate where erfc itself underflows.
pub fn erfcx(z: f64) -> f64 {
    debug_assert!(z >= 0.0);
    let x = z * z;
    if x < 1.5 {
        // erfc(z) = Q(1/2, z^2) = 1 - P(1/2, z^2), at least 0.08 here.
        x.exp() * (1.0 - gamma_p_series(0.5, x))
    } else if z.is_infinite() {
        0.0
    } else {
        // Q(1/2, x) = x^(1/2) e^-x / Gamma(1/2) * cf.
        z / std::f64::consts::PI.sqrt() * gamma_cf(0.5, x)
    }
}

/// erfc(z) for any z.
pub fn erfc(z: f64) -> f64 {
    if z >= 0.0 {
        (-z * z).exp() * erfcx(z)
    } else {
        2.0 - (-z * z).exp() * erfcx(-z)
    }
}

/// P(Z >= z) for a standard normal Z.
pub fn norm_sf(z: f64) -> f64 {
    0.5 * erfc(z / std::f64::consts::SQRT_2)
}

/// P(Z <= z).
pub fn norm_cdf(z: f64) -> f64 {
    norm_sf(-z)
}

/// The standard normal quantile (Acklam's rational approximation, relative error 1.2e-9,
/// then one Halley step on `norm_cdf`).
pub fn norm_quantile(p: f64) -> f64 {
    if !(p > 0.0 && p < 1.0) {
        return match p {
            0.0 => f64::NEG_INFINITY,
            1.0 => f64::INFINITY,
            _ => f64::NAN,
        };
    }
    const A: [f64; 6] = [
        -3.969_683_028_665_376e1,
        2.209_460_984_245_205e2,
        -2.759_285_104_469_687e2,
        1.383_577_518_672_69e2,
        -3.066_479_806_614_716e1,
        2.506_628_277_459_239,
    ];
    const B: [f64; 5] = [
        -5.447_609_879_822_406e1,
        1.615_858_368_580_409e2,
        -1.556_989_798_598_866e2,
        6.680_131_188_771_972e1,
        -1.328_068_155_288_572e1,
    ];
    const C: [f64; 6] = [
        -7.784_894_002_430_293e-3,
        -3.223_964_580_411_365e-1,
        -2.400_758_277_161_838,
        -2.549_732_539_343_734,
        4.374_664_141_464_968,
        2.938_163_982_698_783,
    ];
    const D: [f64; 4] = [
        7.784_695_709_041_462e-3,
        3.224_671_290_700_398e-1,
        2.445_134_137_142_996,
        3.754_408_661_907_416,
    ];
    let tail = |q: f64| {
        let t = (-2.0 * q.ln()).sqrt();
        (((((C[0] * t + C[1]) * t + C[2]) * t + C[3]) * t + C[4]) * t + C[5])
            / ((((D[0] * t + D[1]) * t + D[2]) * t + D[3]) * t + 1.0)
    };
    let x = if p < 0.02425 {
        tail(p)
    } else if p > 1.0 - 0.02425 {
        -tail(1.0 - p)
    } else {
        let q = p - 0.5;
        let r = q * q;
        (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q
            / (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1.0)
    };
    // Halley on the side of p's tail.
    let e = if p < 0.5 {
        norm_cdf(x) - p
    } else {
        (1.0 - p) - norm_sf(x)
    };
    let u = e * (2.0 * std::f64::consts::PI).sqrt() * (x * x / 2.0).exp();
    x - u / (1.0 + x * u / 2.0)
}

/// P(Z <= x | a <= Z <= b) for a standard normal Z, a < b (either may be infinite), computed
/// in the tail the interval sits in.
pub fn truncnorm_cdf(x: f64, a: f64, b: f64) -> f64 {
    truncnorm_cdf_sf(x, a, b).0
}

/// (P(Z <= x | a <= Z <= b), P(Z > x | a <= Z <= b)), each without cancellation: the smaller
/// keeps its digits however far in the tail (a p-value of 1e-60 stays 1e-60).
pub fn truncnorm_cdf_sf(x: f64, a: f64, b: f64) -> (f64, f64) {
    if x <= a {
        return (0.0, 1.0);
    }
    if x >= b {
        return (1.0, 0.0);
    }
    if a >= 0.0 {
        // Upper tail: sf(t) = erfcx(t/sqrt2) e^(-t^2/2), each over the common factor
        // e^(-a^2/2).
        let s = |t: f64| {
            if t.is_infinite() {
                0.0
            } else {
                erfcx(t / std::f64::consts::SQRT_2) * (-(t - a) * (t + a) / 2.0).exp()
            }
        };
        let (sa, sx, sb) = (s(a), s(x), s(b));
        ((sa - sx) / (sa - sb), (sx - sb) / (sa - sb))
    } else if b <= 0.0 {
        // Lower tail, by symmetry: Z <= x given [a, b] is -Z >= -x given [-b, -a].
        let (c, s) = truncnorm_cdf_sf(-x, -b, -a);
        (s, c)
    } else {
        let (ca, sb) = (norm_cdf(a), norm_sf(b));
        let total = 1.0 - ca - sb;
        let (below, above) = if x <= 0.0 {
            let cx = norm_cdf(x);
            (cx - ca, (1.0 - cx) - sb)
        } else {
            let sx = norm_sf(x);
            ((1.0 - sx) - ca, sx - sb)
        };
        (below / total, above / total)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normal_tails_and_quantiles_in_closed_form() {
        // erfc(0) = 1, erfc(1) and erfc(5) from Abramowitz & Stegun's tables (to 16 digits).
        assert!((erfc(0.0) - 1.0).abs() < 1e-16);
        assert!(
            (erfc(1.0) / 0.157_299_207_050_285_13 - 1.0).abs() < 1e-14,
            "{}",
            erfc(1.0)
        );
        assert!((erfc(5.0) / 1.537_459_794_428_034_8e-12 - 1.0).abs() < 1e-13);
        // Phi(1.959963984540054) = 0.975.
        assert!((norm_quantile(0.975) - 1.959_963_984_540_054).abs() < 1e-14);
        assert!((norm_quantile(1e-10) + 6.361_340_902_404_056).abs() < 1e-12);
        for p in [1e-300, 1e-12, 0.01, 0.3, 0.5, 0.77, 0.999] {
            let x = norm_quantile(p);
            let back = if p < 0.5 {
                norm_cdf(x)
            } else {
                1.0 - norm_sf(x)
            };
            // d ln Phi / dx is about |x| (37 at 1e-300): x's own rounding moves p by 1e-13.
            assert!((back / p - 1.0).abs() < 1e-12, "{p}: {back}");
        }
    }

    #[test]
    fn t_quantiles_invert_the_cdf() {
        // df = 1: the Cauchy quantile tan(pi (p - 1/2)); df = 2: (2p - 1) sqrt(2 / (4p(1-p))).
        for p in [0.001, 0.025, 0.3, 0.9, 0.975, 0.9995] {
            let want = (std::f64::consts::PI * (p - 0.5)).tan();
            assert!((t_quantile(p, 1.0) / want - 1.0).abs() < 1e-12, "{p}");
            let want = (2.0 * p - 1.0) * (2.0 / (4.0 * p * (1.0 - p))).sqrt();
            assert!((t_quantile(p, 2.0) / want - 1.0).abs() < 1e-12, "{p}");
        }
        // At df = 1e6 ln Gamma(df / 2) is 6e6 and the incomplete beta's prefactor, a
        // difference of such logarithms, keeps about 1e-10 of the result: the CDF (and so any
        // p-value at a million residual degrees of freedom) holds 9 to 10 digits.
        for (df, tol) in [(3.0, 1e-12), (12.5, 1e-12), (300.0, 1e-12), (1e6, 1e-9)] {
            for p in [1e-8, 0.025, 0.6, 0.975] {
                let q = t_quantile(p, df);
                assert!(
                    (t_cdf(q, df) / p - 1.0).abs() < tol,
                    "{df} {p}: q = {q}, cdf {}",
                    t_cdf(q, df)
                );
            }
        }
    }

    #[test]
    fn chi2_and_f_tails_in_closed_form() {
        // chi2(2): P(X >= x) = e^(-x/2); F(2, 2): P(F >= f) = 1 / (1 + f).
        for x in [0.1, 1.0, 10.0, 200.0] {
            assert!(
                (chi2_sf(x, 2.0) / (-x / 2.0f64).exp() - 1.0).abs() < 1e-13,
                "{x}"
            );
            assert!((f_sf(x, 2.0, 2.0) * (1.0 + x) - 1.0).abs() < 1e-13, "{x}");
        }
    }

    #[test]
    fn truncated_normal_far_in_the_tail() {
        // Given Z >= 40, Z - 40 is about exponential with rate 40: P(Z <= 40 + 1/40) ~ 1 - 1/e.
        let c = truncnorm_cdf(40.0 + 1.0 / 40.0, 40.0, f64::INFINITY);
        assert!((c - (1.0 - (-1.0f64).exp())).abs() < 2e-3, "{c}");
        // Symmetric and exact in the middle.
        let mid = truncnorm_cdf(0.0, -1.0, 1.0);
        assert!((mid - 0.5).abs() < 1e-15);
        let lo = truncnorm_cdf(-40.0 - 1.0 / 40.0, f64::NEG_INFINITY, -40.0);
        assert!((lo - (-1.0f64).exp()).abs() < 2e-3, "{lo}");
    }
}
