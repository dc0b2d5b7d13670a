//! The stored (serialized) form of `RunningStats`: the lower triangle of E[x x^T] on the way
//! out, checkpoints written before the shift or the packed triangle on the way in, and
//! `validate`, the check of statistics that came from outside (a checkpoint, another shard).

use super::low::Low;
use super::{AlphaSchedule, RunningStats};
use serde::{Deserialize, Serialize};

/// `RunningStats` as stored; checkpoints written before the shift existed have none, and
/// those written before the packed triangle hold the full `sxx`.
#[derive(Deserialize)]
pub(super) struct StoredStats {
    p: usize,
    n: u64,
    weight: f64,
    /// Absent before the effective sample size was kept (`assumed_sum_sq_shares`).
    #[serde(default)]
    sum_sq_shares: Option<f64>,
    mean_x: Vec<f64>,
    mean_y: f64,
    #[serde(default)]
    sxx: Vec<f64>,
    #[serde(default)]
    sxx_lower: Option<Vec<f64>>,
    sxy: Vec<f64>,
    syy: f64,
    schedule: AlphaSchedule,
    #[serde(default)]
    shift_x: Vec<f64>,
    #[serde(default)]
    shift_y: f64,
    /// The low-order parts of p <= 16 (absent before they were kept: zeros, the doubles alone).
    #[serde(default)]
    low: Option<Low>,
}

impl From<StoredStats> for RunningStats {
    fn from(s: StoredStats) -> Self {
        let sum_sq_shares = s.sum_sq_shares;
        let mut stats = RunningStats {
            shift_x: if s.shift_x.is_empty() {
                vec![0.0; s.p]
            } else {
                s.shift_x
            },
            p: s.p,
            n: s.n,
            weight: s.weight,
            sum_sq_shares: 0.0,
            dx: s.mean_x,
            dy: s.mean_y,
            dxx: match s.sxx_lower {
                Some(lower) => unpack_lower(lower, s.p),
                None => lower_only(s.sxx, s.p),
            },
            dxy: s.sxy,
            dyy: s.syy,
            schedule: s.schedule,
            shift_y: s.shift_y,
            low: match s.low {
                Some(low) if s.p <= super::EXTENDED_MAX_P => Some(Box::new(low)),
                _ => Low::for_p(s.p),
            },
        };
        stats.sum_sq_shares = sum_sq_shares.unwrap_or_else(|| stats.assumed_sum_sq_shares());
        stats
    }
}

/// The lower triangle of a column-major p x p matrix, column by column.
struct LowerTriangle<'a>(&'a [f64], usize);

impl Serialize for LowerTriangle<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let (m, p) = (self.0, self.1);
        if m.len() != p * p {
            // Not a p x p matrix (statistics that fail `validate`): written as they are, so
            // that they are refused again when read, not cut here.
            return s.collect_seq(m);
        }
        s.collect_seq((0..p).flat_map(|j| m[j * p + j..(j + 1) * p].iter()))
    }
}

/// The full column-major matrix (upper triangle zero, as the fold leaves it) of a packed lower
/// triangle; a triangle of the wrong length is kept as it is, for `validate` to refuse.
fn unpack_lower(lower: Vec<f64>, p: usize) -> Vec<f64> {
    if lower.len() != p * (p + 1) / 2 {
        return lower;
    }
    let mut m = vec![0.0; p * p];
    let mut at = 0;
    for j in 0..p {
        let len = p - j;
        m[j * p + j..(j + 1) * p].copy_from_slice(&lower[at..at + len]);
        at += len;
    }
    m
}

/// A full matrix of an earlier checkpoint with its upper triangle zeroed: only the lower
/// one is read or maintained, and zeros above it are what the fold leaves (so the statistics
/// serialize as the lower triangle and load back equal). A matrix that is not p x p is kept
/// for `validate` to refuse.
fn lower_only(mut m: Vec<f64>, p: usize) -> Vec<f64> {
    if m.len() == p * p {
        for j in 1..p {
            m[j * p..j * p + j].fill(0.0);
        }
    }
    m
}

impl Serialize for RunningStats {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        // The exact count of fields written: a CBOR map's header holds it.
        let fields = 12 + usize::from(self.low.is_some());
        let mut st = s.serialize_struct("RunningStats", fields)?;
        st.serialize_field("p", &self.p)?;
        st.serialize_field("n", &self.n)?;
        st.serialize_field("weight", &self.weight)?;
        st.serialize_field("sum_sq_shares", &self.sum_sq_shares)?;
        st.serialize_field("mean_x", &self.dx)?;
        st.serialize_field("mean_y", &self.dy)?;
        st.serialize_field("sxx_lower", &LowerTriangle(&self.dxx, self.p))?;
        st.serialize_field("sxy", &self.dxy)?;
        st.serialize_field("syy", &self.dyy)?;
        st.serialize_field("schedule", &self.schedule)?;
        st.serialize_field("shift_x", &self.shift_x)?;
        st.serialize_field("shift_y", &self.shift_y)?;
        match &self.low {
            Some(low) => st.serialize_field("low", low)?,
            None => st.skip_field("low")?,
        }
        st.end()
    }
}

impl RunningStats {
    /// Combine the statistics of another shard of the same stream. For plain averages the
    /// result equals one stream that saw both shards' rows (up to rounding); for forgetting
    /// schedules the shards are weighted by their row counts.
    /// Checks statistics that came from outside (a checkpoint, a merge from another shard):
    /// array lengths match p, every value is finite, weights and variances are in range.
    /// Deserialization alone accepts any shape, and a wrong length would panic later, in the
    /// fold or the extraction, far from its cause. The message names the first problem.
    pub fn validate(&self) -> Result<(), String> {
        let p = self.p;
        let lens = [
            ("mean_x", self.dx.len(), p),
            ("sxy", self.dxy.len(), p),
            ("shift_x", self.shift_x.len(), p),
            (
                "sxx",
                self.dxx.len(),
                p.checked_mul(p).ok_or("p * p overflows")?,
            ),
        ];
        for (name, got, want) in lens {
            if got != want {
                return Err(format!("{name} has {got} values, p = {p} needs {want}"));
            }
        }
        let scalars = [
            ("weight", self.weight),
            ("sum_sq_shares", self.sum_sq_shares),
            ("mean_y", self.dy),
            ("syy", self.dyy),
            ("shift_y", self.shift_y),
        ];
        if let Some((name, v)) = scalars.iter().find(|(_, v)| !v.is_finite()) {
            return Err(format!("{name} is not finite ({v})"));
        }
        for (name, values) in [
            ("mean_x", &self.dx),
            ("sxy", &self.dxy),
            ("sxx", &self.dxx),
            ("shift_x", &self.shift_x),
        ] {
            if let Some(i) = values.iter().position(|v| !v.is_finite()) {
                return Err(format!("{name}[{i}] is not finite ({})", values[i]));
            }
        }
        if !(0.0..=1.0 + 1e-9).contains(&self.weight) || (self.n > 0) != (self.weight > 0.0) {
            return Err(format!(
                "total weight {} does not fit n = {} (it lies in (0, 1] once a row is seen)",
                self.weight, self.n
            ));
        }
        if !(0.0..=1.0 + 1e-9).contains(&self.sum_sq_shares) {
            return Err(format!(
                "sum_sq_shares {} is not in [0, 1] (the squared shares of the rows' weights)",
                self.sum_sq_shares
            ));
        }
        if self.dyy < 0.0 || (0..p).any(|j| self.dxx[j + j * p] < 0.0) {
            return Err("a second moment E[x_j^2] or E[y^2] is negative".into());
        }
        if let Some(low) = &self.low {
            low.check(p)?;
        }
        Ok(())
    }
}
