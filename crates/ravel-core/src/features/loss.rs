//! The losses online substitution minimizes, as functions of the linear score u = b0 + X w:
//! L(u) = (1/n) sum_i l(u_i, y_i). Only l, dl/du and a bound on d2l/du2 are needed: the
//! gradient of any coefficient is x^T dL/du (000 section 3.1, eqs. (4)-(5)), and the
//! curvature bound turns the column geometry into the Lipschitz constant L_F of Theorem 1.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// A smooth loss of the score u against the label y.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Loss {
    /// l = (u - y)^2 / 2 (000 eq. (2)); regression.
    Squared,
    /// l = max(0, 1 - y u)^2 / 2 (000 eq. (3)); labels +1/-1.
    SquaredHinge,
    /// l = log(1 + exp(-y u)); labels +1/-1.
    Logistic,
}

impl Loss {
    /// Every loss, in the order the API lists them.
    pub const ALL: [Loss; 3] = [Loss::Squared, Loss::SquaredHinge, Loss::Logistic];

    /// The loss's name in the API and config (`squared`, `squared-hinge`, `logistic`).
    pub fn name(&self) -> &'static str {
        match self {
            Loss::Squared => "squared",
            Loss::SquaredHinge => "squared-hinge",
            Loss::Logistic => "logistic",
        }
    }

    /// Whether the labels are classes (+1/-1) rather than real numbers.
    pub fn is_classification(&self) -> bool {
        !matches!(self, Loss::Squared)
    }

    /// l(u, y).
    #[inline]
    pub fn value(&self, u: f64, y: f64) -> f64 {
        match self {
            Loss::Squared => 0.5 * (u - y) * (u - y),
            Loss::SquaredHinge => {
                let m = (1.0 - y * u).max(0.0);
                0.5 * m * m
            }
            Loss::Logistic => {
                // log(1 + e^z) without overflow for large z = -y u.
                let z = -y * u;
                if z > 0.0 {
                    z + (-z).exp().ln_1p()
                } else {
                    z.exp().ln_1p()
                }
            }
        }
    }

    /// dl/du at (u, y): 000 eq. (4) is (u - y), eq. (5) is -max(0, 1 - y u) y (before the 1/n).
    #[inline]
    pub fn derivative(&self, u: f64, y: f64) -> f64 {
        match self {
            Loss::Squared => u - y,
            Loss::SquaredHinge => -(1.0 - y * u).max(0.0) * y,
            Loss::Logistic => {
                // -y sigma(-y u), written so that neither branch overflows.
                let z = -y * u;
                let s = if z >= 0.0 {
                    1.0 / (1.0 + (-z).exp())
                } else {
                    let e = z.exp();
                    e / (1.0 + e)
                };
                -y * s
            }
        }
    }

    /// d2l/du2 at (u, y) (the generalized one at the squared hinge's kink: 0 there), for the
    /// Newton refit.
    #[inline]
    pub fn second_derivative(&self, u: f64, y: f64) -> f64 {
        match self {
            Loss::Squared => 1.0,
            Loss::SquaredHinge => {
                if 1.0 - y * u > 0.0 {
                    y * y
                } else {
                    0.0
                }
            }
            Loss::Logistic => {
                let z = y * u;
                let s = if z >= 0.0 {
                    1.0 / (1.0 + (-z).exp())
                } else {
                    let e = z.exp();
                    e / (1.0 + e)
                };
                s * (1.0 - s)
            }
        }
    }

    /// sup d2l/du2 over u (y = +-1 for classification): with standardized columns the
    /// restricted Lipschitz constant L_F of 000 Assumption 1 is this times the largest
    /// eigenvalue of (1/n) X_T^T X_T over the coordinates T one update touches.
    pub fn curvature(&self) -> f64 {
        match self {
            Loss::Squared | Loss::SquaredHinge => 1.0,
            Loss::Logistic => 0.25,
        }
    }

    /// L(u) = (1/n) sum_i l(u_i, y_i).
    pub fn mean(&self, u: &[f64], y: &[f64]) -> f64 {
        let n = y.len().max(1) as f64;
        u.iter()
            .zip(y)
            .map(|(&ui, &yi)| self.value(ui, yi))
            .sum::<f64>()
            / n
    }

    /// g = dL/du = (1/n) (dl/du)(u_i, y_i), written into `g`.
    pub fn gradient(&self, u: &[f64], y: &[f64], g: &mut [f64]) {
        let inv_n = 1.0 / y.len().max(1) as f64;
        for ((gi, &ui), &yi) in g.iter_mut().zip(u).zip(y) {
            *gi = self.derivative(ui, yi) * inv_n;
        }
    }
}

impl fmt::Display for Loss {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Loss {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim().to_ascii_lowercase();
        match s.as_str() {
            "squared" | "ls" | "least-squares" => Ok(Loss::Squared),
            "squared-hinge" | "squared_hinge" | "hinge" => Ok(Loss::SquaredHinge),
            "logistic" | "logit" => Ok(Loss::Logistic),
            _ => Err(format!(
                "unknown loss '{s}': expected squared, squared-hinge or logistic"
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// dl/du against central differences, and the curvature bound against second differences,
    /// on a grid of scores covering both sides of every kink and the logistic tails.
    #[test]
    fn derivative_and_curvature_match_finite_differences() {
        let h = 1e-5;
        for loss in Loss::ALL {
            for &y in &[1.0, -1.0, 0.3] {
                if loss.is_classification() && y == 0.3 {
                    continue;
                }
                for k in -60..=60 {
                    let u = k as f64 * 0.173 + 0.01;
                    let fd = (loss.value(u + h, y) - loss.value(u - h, y)) / (2.0 * h);
                    let d = loss.derivative(u, y);
                    assert!(
                        (fd - d).abs() <= 1e-6 * (1.0 + d.abs()),
                        "{loss} u={u} y={y}: {d} vs {fd}"
                    );
                    let sd = (loss.value(u + h, y) - 2.0 * loss.value(u, y) + loss.value(u - h, y))
                        / (h * h);
                    assert!(
                        sd <= loss.curvature() + 1e-3,
                        "{loss} u={u}: curvature {sd}"
                    );
                    let fd2 = (loss.derivative(u + h, y) - loss.derivative(u - h, y)) / (2.0 * h);
                    let d2 = loss.second_derivative(u, y);
                    assert!(
                        (fd2 - d2).abs() <= 1e-6 * (1.0 + d2.abs()),
                        "{loss} u={u} y={y}: {d2} vs {fd2}"
                    );
                }
            }
        }
        // No overflow in the logistic tails.
        assert!(Loss::Logistic.value(-800.0, 1.0).is_finite());
        assert_eq!(Loss::Logistic.value(800.0, 1.0), 0.0);
        assert!((Loss::Logistic.derivative(-800.0, 1.0) + 1.0).abs() < 1e-12);
    }

    #[test]
    fn names_round_trip() {
        for loss in Loss::ALL {
            assert_eq!(loss.name().parse::<Loss>().unwrap(), loss);
        }
        assert!(
            "hinged"
                .parse::<Loss>()
                .unwrap_err()
                .contains("expected squared")
        );
    }
}
