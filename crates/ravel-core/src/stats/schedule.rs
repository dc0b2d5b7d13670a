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

/// How much weight the next observation gets.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
#[derive(Default)]
pub enum AlphaSchedule {
    /// alpha_n = 1/(n+1): the plain average, every row weighs the same.
    #[default]
    Plain,
    /// A fixed alpha in (0, 1]: geometric forgetting with memory about 1/alpha rows.
    Fixed { alpha: f64 },
    /// alpha_n = max(1/(n+1), alpha_min): plain averaging until n = 1/alpha_min, then forgetting.
    Floor { alpha_min: f64 },
    /// Plain averaging until a change detector fires on the prediction errors, then a jump to
    /// forgetting that relaxes back (stats/adaptive.rs).
    Adaptive(Adaptive),
}

impl AlphaSchedule {
    /// Checks the parameters once, so the update path never has to.
    pub fn check(&self) -> Result<(), String> {
        let ok = |a: f64| a.is_finite() && a > 0.0 && a <= 1.0;
        match *self {
            AlphaSchedule::Plain => Ok(()),
            AlphaSchedule::Fixed { alpha } if ok(alpha) => Ok(()),
            AlphaSchedule::Floor { alpha_min } if ok(alpha_min) => Ok(()),
            AlphaSchedule::Adaptive(ref a) => a.config.check(),
            _ => Err(format!("alpha must lie in (0, 1], got {self}")),
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
        match self {
            AlphaSchedule::Plain => write!(f, "plain"),
            AlphaSchedule::Fixed { alpha } => write!(f, "fixed:{alpha}"),
            AlphaSchedule::Floor { alpha_min } => write!(f, "floor:{alpha_min}"),
            AlphaSchedule::Adaptive(a) => write!(f, "{}", a.config),
        }
    }
}

impl FromStr for AlphaSchedule {
    type Err = String;
    /// `plain`, `fixed:A`, `floor:A`, `adaptive` or `adaptive:key=value,...`.
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
            "adaptive" => {
                AlphaSchedule::Adaptive(Adaptive::new(AdaptiveConfig::parse(arg.unwrap_or(""))?))
            }
            _ => {
                return Err(format!(
                    "unknown alpha schedule '{s}': expected plain, fixed:A, floor:A, adaptive or \
                     adaptive:key=value,..."
                ));
            }
        };
        sched.check()?;
        Ok(sched)
    }
}
