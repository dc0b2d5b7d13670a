//! `AlphaSchedule`: the weight alpha_n each new row gets in the running averages (003 eq. 6).
//!
//! A schedule hands out one alpha per row. It is asked for a whole mini-batch at once
//! (`alphas_for_batch`) and sees the rows, so a data-driven (drift-adaptive) schedule can be
//! added as another variant without touching `RunningStats` or its callers.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// How much weight the next observation gets.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum AlphaSchedule {
    /// alpha_n = 1/(n+1): the plain average, every row weighs the same.
    Plain,
    /// A fixed alpha in (0, 1]: geometric forgetting with memory about 1/alpha rows.
    Fixed { alpha: f64 },
    /// alpha_n = max(1/(n+1), alpha_min): plain averaging until n = 1/alpha_min, then forgetting.
    Floor { alpha_min: f64 },
}

impl Default for AlphaSchedule {
    fn default() -> Self {
        AlphaSchedule::Plain
    }
}

impl AlphaSchedule {
    /// Checks the parameters once, so the update path never has to.
    pub fn check(&self) -> Result<(), String> {
        let ok = |a: f64| a.is_finite() && a > 0.0 && a <= 1.0;
        match *self {
            AlphaSchedule::Plain => Ok(()),
            AlphaSchedule::Fixed { alpha } if ok(alpha) => Ok(()),
            AlphaSchedule::Floor { alpha_min } if ok(alpha_min) => Ok(()),
            _ => Err(format!("alpha must lie in (0, 1], got {self}")),
        }
    }

    /// The raw alpha for the row that arrives when `n` rows have been seen.
    #[inline]
    pub fn alpha_at(&self, n: u64) -> f64 {
        let plain = 1.0 / (n as f64 + 1.0);
        match *self {
            AlphaSchedule::Plain => plain,
            AlphaSchedule::Fixed { alpha } => alpha,
            AlphaSchedule::Floor { alpha_min } => plain.max(alpha_min),
        }
    }

    /// Alphas for the next `rows` rows, the first of which arrives when `n` rows have been
    /// seen. `x` (row-major, `rows` x p) and `y` are there for data-driven schedules.
    pub fn alphas_for_batch(&mut self, n: u64, rows: usize, _x: &[f64], _y: &[f64]) -> Vec<f64> {
        (0..rows as u64).map(|i| self.alpha_at(n + i)).collect()
    }

    /// The alpha the next row would get (reported by the service).
    pub fn current_alpha(&self, n: u64) -> f64 {
        self.alpha_at(n)
    }
}

impl fmt::Display for AlphaSchedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AlphaSchedule::Plain => write!(f, "plain"),
            AlphaSchedule::Fixed { alpha } => write!(f, "fixed:{alpha}"),
            AlphaSchedule::Floor { alpha_min } => write!(f, "floor:{alpha_min}"),
        }
    }
}

impl FromStr for AlphaSchedule {
    type Err = String;
    /// `plain`, `fixed:A` or `floor:A`.
    fn from_str(s: &str) -> Result<Self, String> {
        let (kind, arg) = match s.split_once(':') {
            Some((k, a)) => (k, Some(a)),
            None => (s, None),
        };
        let num = |a: Option<&str>| -> Result<f64, String> {
            let a =
                a.ok_or_else(|| format!("alpha schedule '{s}' needs a value, e.g. {kind}:0.01"))?;
            a.trim()
                .parse::<f64>()
                .map_err(|_| format!("alpha schedule '{s}': '{a}' is not a number"))
        };
        let sched = match kind.trim() {
            "plain" if arg.is_none() => AlphaSchedule::Plain,
            "fixed" => AlphaSchedule::Fixed { alpha: num(arg)? },
            "floor" => AlphaSchedule::Floor {
                alpha_min: num(arg)?,
            },
            _ => {
                return Err(format!(
                    "unknown alpha schedule '{s}': expected plain, fixed:A or floor:A"
                ));
            }
        };
        sched.check()?;
        Ok(sched)
    }
}
