//! `AlphaSchedule`: the weight alpha_n each new row gets in the running averages (003 eq. 6).
//!
//! A schedule hands out one alpha per row. It is asked for a whole mini-batch at once
//! (`alphas_for_batch`) and sees the rows, so a data-driven schedule fits in as another
//! variant: `Adaptive` (stats/adaptive.rs) tests each row against a reference model and may
//! stop early to have the reference refreshed from the statistics (`wants_refresh`,
//! `refresh`), which `RunningStats::update_batch` does between the pieces of a batch.

use super::RunningStats;
use super::adaptive::{Adaptive, AdaptiveConfig};
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

use crate::spec::{Spec, from_pairs};

/// How much weight the next observation gets.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
#[derive(Default)]
pub enum AlphaSchedule {
    /// alpha_n = 1/(n+1): the plain average, every row weighs the same.
    #[default]
    Plain,
    /// A fixed alpha in (0, 1]: geometric forgetting with memory about 1/alpha rows.
    Fixed {
        /// The alpha.
        alpha: f64,
    },
    /// alpha_n = max(1/(n+1), alpha_min): plain averaging until n = 1/alpha_min, then forgetting.
    Floor {
        /// The floor.
        alpha_min: f64,
    },
    /// Plain averaging until a change detector fires on the prediction errors, then a jump to
    /// forgetting that relaxes back (stats/adaptive.rs).
    Adaptive(Adaptive),
}

impl AlphaSchedule {
    /// Checks the parameters once, so the update path never has to.
    pub fn check(&self) -> Result<(), String> {
        match *self {
            AlphaSchedule::Adaptive(ref a) => a.config.check(),
            _ => self.spec().check(),
        }
    }

    /// The adaptive schedule with default settings.
    pub fn adaptive() -> Self {
        AlphaSchedule::Adaptive(Adaptive::new(AdaptiveConfig::default()))
    }

    /// The raw alpha for the row that arrives when `n` rows have been seen (for `Adaptive`:
    /// unless that row raises an alarm).
    #[inline]
    pub fn alpha_at(&self, n: u64) -> f64 {
        let plain = 1.0 / (n as f64 + 1.0);
        match self {
            AlphaSchedule::Plain => plain,
            AlphaSchedule::Fixed { alpha } => *alpha,
            AlphaSchedule::Floor { alpha_min } => plain.max(*alpha_min),
            AlphaSchedule::Adaptive(a) => a.alpha_at(n),
        }
    }

    /// Alphas for the next rows, the first of which arrives when `n` rows have been seen; `x`
    /// is row-major, `rows` x p. Returns `rows` alphas, except that `Adaptive` may return fewer
    /// (at least one) when its reference must be refreshed (`wants_refresh`) before the next
    /// row: the caller folds those rows in, refreshes, and asks again for the rest.
    pub fn alphas_for_batch(&mut self, n: u64, rows: usize, x: &[f64], y: &[f64]) -> Vec<f64> {
        match self {
            AlphaSchedule::Adaptive(a) => a.alphas_for_batch(n, rows, x, y),
            _ => (0..rows as u64).map(|i| self.alpha_at(n + i)).collect(),
        }
    }

    /// Whether `refresh` must be called before the row at stream position n (p features).
    pub fn wants_refresh(&self, n: u64, p: usize) -> bool {
        match self {
            AlphaSchedule::Adaptive(a) => a.wants_refresh(n, p),
            _ => false,
        }
    }

    /// Lets a data-driven schedule look at the statistics (the rows before position
    /// `stats.n()`); a no-op for the others.
    pub fn refresh(&mut self, stats: &RunningStats) {
        if let AlphaSchedule::Adaptive(a) = self {
            a.refresh(stats);
        }
    }

    /// Drift alarms raised so far (0 for the schedules without a detector).
    pub fn alarms(&self) -> u64 {
        match self {
            AlphaSchedule::Adaptive(a) => a.alarms(),
            _ => 0,
        }
    }

    /// The 1-based row number of the row that raised the last drift alarm.
    pub fn last_alarm_row(&self) -> Option<u64> {
        match self {
            AlphaSchedule::Adaptive(a) => a.last_alarm_row(),
            _ => None,
        }
    }

    /// The alpha the next row would get (reported by the service).
    pub fn current_alpha(&self, n: u64) -> f64 {
        self.alpha_at(n)
    }
}

impl fmt::Display for AlphaSchedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.spec().fmt(f)
    }
}

impl FromStr for AlphaSchedule {
    type Err = String;
    /// `plain`, `fixed:A`, `floor:A`, `adaptive` or `adaptive:key=value,...` (`AlphaSpec`).
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(AlphaSpec::parse_checked(s)?.schedule())
    }
}

/// A weight schedule as configured, without its running state. In a config file a table,
/// tagged by `kind`:
///
/// ```toml
/// alpha = { kind = "plain" }
/// alpha = { kind = "fixed", alpha = 0.01 }
/// alpha = { kind = "floor", alpha_min = 0.01 }
/// alpha = { kind = "adaptive", fa = 1e-6, shift = 1.5 }   # any AdaptiveConfig key
/// ```
///
/// or the shorthand `plain`, `fixed:A`, `floor:A`, `adaptive` or `adaptive:key=value,...`
/// (`FromStr`, `Display`; the command line's `--alpha`).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase", deny_unknown_fields)]
pub enum AlphaSpec {
    /// `AlphaSchedule::Plain`.
    #[default]
    Plain,
    /// `AlphaSchedule::Fixed`.
    Fixed {
        /// The alpha in (0, 1].
        alpha: f64,
    },
    /// `AlphaSchedule::Floor`.
    Floor {
        /// The floor in (0, 1].
        alpha_min: f64,
    },
    /// `AlphaSchedule::Adaptive` with these settings.
    Adaptive(AdaptiveConfig),
}

impl AlphaSpec {
    /// The schedule, from its first row.
    pub fn schedule(&self) -> AlphaSchedule {
        match self {
            AlphaSpec::Plain => AlphaSchedule::Plain,
            AlphaSpec::Fixed { alpha } => AlphaSchedule::Fixed { alpha: *alpha },
            AlphaSpec::Floor { alpha_min } => AlphaSchedule::Floor {
                alpha_min: *alpha_min,
            },
            AlphaSpec::Adaptive(c) => AlphaSchedule::Adaptive(Adaptive::new(c.clone())),
        }
    }
}

impl AlphaSchedule {
    /// The configuration of this schedule (its state left out).
    pub fn spec(&self) -> AlphaSpec {
        match self {
            AlphaSchedule::Plain => AlphaSpec::Plain,
            AlphaSchedule::Fixed { alpha } => AlphaSpec::Fixed { alpha: *alpha },
            AlphaSchedule::Floor { alpha_min } => AlphaSpec::Floor {
                alpha_min: *alpha_min,
            },
            AlphaSchedule::Adaptive(a) => AlphaSpec::Adaptive(a.config.clone()),
        }
    }
}

impl Spec for AlphaSpec {
    fn parse_shorthand(s: &str) -> Result<Self, String> {
        let (kind, arg) = match s.split_once(':') {
            Some((k, a)) => (k.trim(), Some(a)),
            None => (s.trim(), None),
        };
        let num = |a: Option<&str>| -> Result<f64, String> {
            let a =
                a.ok_or_else(|| format!("alpha schedule '{s}' needs a value, e.g. {kind}:0.01"))?;
            a.trim()
                .parse::<f64>()
                .map_err(|_| format!("alpha schedule '{s}': '{a}' is not a number"))
        };
        Ok(match kind {
            "plain" if arg.is_none() => AlphaSpec::Plain,
            "fixed" => AlphaSpec::Fixed { alpha: num(arg)? },
            "floor" => AlphaSpec::Floor {
                alpha_min: num(arg)?,
            },
            "adaptive" => AlphaSpec::Adaptive(
                from_pairs(arg.unwrap_or("")).map_err(|e| format!("adaptive: {e}"))?,
            ),
            _ => {
                return Err(format!(
                    "unknown alpha schedule '{s}': expected plain, fixed:A, floor:A, adaptive or \
                     adaptive:key=value,... (or a table with kind = \"plain\", ...)"
                ));
            }
        })
    }

    fn check(&self) -> Result<(), String> {
        let ok = |a: f64| a.is_finite() && a > 0.0 && a <= 1.0;
        match *self {
            AlphaSpec::Plain => Ok(()),
            AlphaSpec::Fixed { alpha } if ok(alpha) => Ok(()),
            AlphaSpec::Fixed { alpha } => Err(format!("alpha must lie in (0, 1], got {alpha}")),
            AlphaSpec::Floor { alpha_min } if ok(alpha_min) => Ok(()),
            AlphaSpec::Floor { alpha_min } => Err(format!(
                "alpha_min must lie in (0, 1], got {alpha_min} (alpha schedule floor)"
            )),
            AlphaSpec::Adaptive(ref a) => a.check(),
        }
    }
}

impl fmt::Display for AlphaSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AlphaSpec::Plain => write!(f, "plain"),
            AlphaSpec::Fixed { alpha } => write!(f, "fixed:{alpha}"),
            AlphaSpec::Floor { alpha_min } => write!(f, "floor:{alpha_min}"),
            AlphaSpec::Adaptive(c) => write!(f, "{c}"),
        }
    }
}

impl FromStr for AlphaSpec {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Self::parse_checked(s)
    }
}

#[cfg(test)]
mod spec_tests {
    use super::*;

    #[test]
    fn shorthand_and_table_are_one_schedule() {
        for (short, table) in [
            ("plain", r#"{"kind": "plain"}"#),
            ("fixed:0.01", r#"{"kind": "fixed", "alpha": 0.01}"#),
            ("floor:0.5", r#"{"kind": "floor", "alpha_min": 0.5}"#),
            ("adaptive", r#"{"kind": "adaptive"}"#),
            (
                "adaptive:fa=1e-3,refresh=500",
                r#"{"kind": "adaptive", "fa": 1e-3, "refresh": 500}"#,
            ),
        ] {
            let a: AlphaSpec = short.parse().unwrap();
            let b: AlphaSpec = serde_json::from_str(table).unwrap();
            assert_eq!(a, b, "{short}");
            // The shorthand round-trips through Display, and so does the schedule.
            assert_eq!(a.to_string().parse::<AlphaSpec>().unwrap(), a);
            assert_eq!(a.schedule().spec(), a);
            assert_eq!(a.schedule().to_string(), a.to_string());
        }
        for (table, want) in [
            (
                r#"{"kind": "fixed", "value": 0.01}"#,
                "unknown field `value`",
            ),
            (r#"{"kind": "adaptive", "fb": 1}"#, "unknown field `fb`"),
            (r#"{"kind": "slow"}"#, "unknown variant `slow`"),
        ] {
            let e = serde_json::from_str::<AlphaSpec>(table)
                .unwrap_err()
                .to_string();
            assert!(e.contains(want), "{table}: {e}");
        }
        for (short, want) in [
            ("fixed:2", "alpha must lie in (0, 1]"),
            ("floor:0", "alpha_min"),
            ("fixed", "needs a value"),
            ("adaptive:fb=1", "unknown field `fb`"),
            ("adaptive:fa=2", "fa (false alarms per row)"),
            ("plain:1", "unknown alpha schedule"),
        ] {
            let e = short.parse::<AlphaSpec>().unwrap_err();
            assert!(e.contains(want), "{short}: {e}");
        }
    }
}
