//! The drift-adaptive weight schedule (issue 5; paper 003 section 3.8 leaves alpha open).
//!
//! Plain averaging (alpha_n = 1/(n+1)) is the best a stream can do while nothing changes, and
//! the worst once something does. `Adaptive` averages plainly until a change detector fires on
//! the stream's own prediction errors, then forgets: alpha jumps to `jump` and relaxes back as
//! a plain average of the rows since the alarm, alpha = max(1/(m+1), floor) with
//! m = 1/jump - 1 + (rows since the alarm). The pre-alarm state then weighs like 1/jump - 1
//! rows: a weak prior that fades as 1/m while the new regime accumulates evidence.
//!
//! Detection is test-then-train: each row is predicted, before it is folded in, by a reference
//! ridge model refreshed from the statistics every `refresh` rows (sooner while a regime is
//! young: each time its rows double); the error
//! is standardized by the model's predictive standard deviation and fed to Page's CUSUM for an
//! increase of the error variance (`Cusum`). Why that detector, and what its false-alarm rate
//! is, is written on `Cusum`.
//!
//! Everything here is deterministic in the rows and their order, so `RunningStats` can split a
//! batch at refresh points and still equal row-by-row updates.

use super::RunningStats;
use crate::gram::{Problem, solve_subset};
use serde::{Deserialize, Serialize};
use std::fmt;

/// Page's CUSUM (Page 1954) for a rise of the variance of standardized errors z from 1 to
/// `shift` (= theta^2), on the log-likelihood ratio of N(0, theta^2) against N(0, 1):
///
/// ```text
/// s_t = 1/2 min(z_t^2, clip) (1 - 1/theta^2) - 1/2 ln theta^2,   S_t = max(0, S_{t-1} + s_t),
/// alarm when S_t >= h = ln(1 / false_alarm_rate); S restarts at 0 after an alarm.
/// ```
///
/// Why CUSUM: when coefficients change, the errors of a model fitted before the change stay
/// centred (for centred x) but grow in variance, by a factor r = 1 + d^T Sigma d / sigma^2
/// for a coefficient change d. CUSUM on the likelihood ratio is the optimal detector of a
/// change to a known post-change law (Lorden 1971, Moustakides 1986: least worst-case delay for
/// a given false-alarm rate), costs O(1) per row and keeps one number of state. Page-Hinkley is
/// the same recursion on the raw mean without the likelihood-ratio calibration; ADWIN keeps a
/// window of O(log W) buckets and uses Hoeffding bounds that are loose for Gaussian errors,
/// which costs detection delay. A mean shift of the errors (an intercept change, or
/// uncentred x) also raises E[z^2], so one detector covers both.
///
/// False alarms: while nothing changes z_t ~ N(0, 1) and exp(s_t) is the likelihood ratio, so
/// E[exp(s_t)] = 1; clipping z^2 only lowers s_t, keeping E[exp(s_t)] <= 1. By Lorden's
/// argument (exp(S) is dominated by a non-negative supermartingale started afresh at each
/// zero), the mean number of rows between false alarms is at least e^h = 1 / false_alarm_rate,
/// so `false_alarm_rate` bounds the long-run rate of false alarms per row from above. Measured
/// on iid N(0, 1) input the actual rate is 70 to 80 times lower (docs/drift.md, "Calibration";
/// tests/drift.rs checks the bound).
///
/// Delay: for a change with variance ratio r the statistic climbs by
/// D(r) = r/2 (1 - 1/theta^2) - 1/2 ln theta^2 per row on average, so the expected delay is
/// about h / D(r) rows (defaults theta^2 = 1.3, h = ln 1e9 = 20.7: r = 11 gives 18 rows, r = 2
/// gives 208; the clip adds a few rows for large r, 25 measured for r = 11). Changes with D(r) <= 0, that is
/// r <= ln(theta^2) / (1 - 1/theta^2) (1.14 for theta^2 = 1.3), are not detected: the margin
/// that keeps a standardization a few percent off from raising alarms.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Cusum {
    /// Weight of z^2 in the increment, 1/2 (1 - 1/theta^2).
    gain: f64,
    /// Constant drift of the increment, 1/2 ln theta^2.
    drift: f64,
    clip: f64,
    threshold: f64,
}

impl Cusum {
    /// `shift` = theta^2 > 1, `clip` > 0, `false_alarm_rate` in (0, 1).
    pub fn new(shift: f64, clip: f64, false_alarm_rate: f64) -> Cusum {
        Cusum {
            gain: 0.5 * (1.0 - 1.0 / shift),
            drift: 0.5 * shift.ln(),
            clip,
            threshold: -false_alarm_rate.ln(),
        }
    }
    /// The alarm threshold h = -ln(false alarm rate).
    pub fn threshold(&self) -> f64 {
        self.threshold
    }
    /// Advances the statistic by one squared standardized error; true on an alarm (the
    /// statistic is then reset to 0).
    #[inline]
    pub fn step(&self, stat: &mut f64, z2: f64) -> bool {
        *stat = (*stat + self.gain * z2.min(self.clip) - self.drift).max(0.0);
        if *stat >= self.threshold {
            *stat = 0.0;
            return true;
        }
        false
    }
}

/// Settings of the adaptive schedule: `{ kind = "adaptive", fa = 1e-6, ... }` in a config file,
/// `adaptive:key=value,...` as a shorthand (`crate::spec`); every key is optional.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AdaptiveConfig {
    /// `fa`: bound on the false-alarm rate per row while nothing changes (CUSUM threshold
    /// h = ln(1/fa)); default 1e-9, one false alarm per 10^9 rows at most. Written
    /// `false_alarm_rate` in full (checkpoints do).
    #[serde(alias = "fa")]
    pub false_alarm_rate: f64,
    /// `shift`: the error-variance ratio theta^2 the detector is tuned to; default 1.3. Smaller
    /// values notice smaller changes, later, and are less tolerant of a mis-standardized error
    /// (docs/drift.md compares 1.3, 1.5 and 2).
    pub shift: f64,
    /// `jump`: alpha right after an alarm; default 0.02 (the old state then weighs like 49
    /// rows).
    pub jump: f64,
    /// `floor`: alpha never goes below this; default 0 (relax all the way to plain averaging).
    pub floor: f64,
    /// `refresh`: rows between refreshes of the reference model; 0 (default) means
    /// max(1000, 2p), which keeps the O(p^3) ridge solve below a third of the O(p^2)-per-row
    /// update cost.
    pub refresh: u64,
    /// `warmup`: effective sample size (Kish) the statistics need before the detector arms, and
    /// rows it rests after an alarm; 0 (default) means 4 (p + 1), where the predictive-variance
    /// correction of the reference is below 1/4.
    pub warmup: u64,
    /// `ridge`: penalty of the reference ridge model on standardized columns; default 1e-3.
    pub ridge: f64,
    /// `clip`: squared standardized errors are capped here (one outlier adds at most
    /// (clip/2)(1 - 1/theta^2) to the CUSUM); default 25 (5 sigma).
    pub clip: f64,
}

impl Default for AdaptiveConfig {
    fn default() -> Self {
        AdaptiveConfig {
            false_alarm_rate: 1e-9,
            shift: 1.3,
            jump: 0.02,
            floor: 0.0,
            refresh: 0,
            warmup: 0,
            ridge: 1e-3,
            clip: 25.0,
        }
    }
}

impl AdaptiveConfig {
    /// Checks the settings; the message names the key at fault.
    pub fn check(&self) -> Result<(), String> {
        let bad = |what: &str, v: f64| Err(format!("adaptive: {what}, got {v}"));
        if !(self.false_alarm_rate > 0.0 && self.false_alarm_rate < 1.0) {
            return bad(
                "fa (false alarms per row) must lie in (0, 1)",
                self.false_alarm_rate,
            );
        }
        if !(self.shift.is_finite() && self.shift > 1.0) {
            return bad(
                "shift (variance ratio to detect) must be a finite number > 1",
                self.shift,
            );
        }
        if !(self.jump > 0.0 && self.jump <= 1.0) {
            return bad("jump must lie in (0, 1]", self.jump);
        }
        if !(self.floor >= 0.0 && self.floor <= 1.0) {
            return bad("floor must lie in [0, 1]", self.floor);
        }
        if !(self.ridge.is_finite() && self.ridge >= 0.0) {
            return bad("ridge must be a finite number >= 0", self.ridge);
        }
        if !(self.clip.is_finite() && self.clip > 0.0) {
            return bad("clip must be a finite number > 0", self.clip);
        }
        Ok(())
    }

    /// Rows between reference refreshes for p features.
    pub fn refresh_rows(&self, p: usize) -> u64 {
        if self.refresh > 0 {
            self.refresh
        } else {
            1000.max(2 * p as u64)
        }
    }
    /// Effective sample size needed before the detector arms, for p features.
    pub fn warmup_rows(&self, p: usize) -> u64 {
        if self.warmup > 0 {
            self.warmup
        } else {
            4 * (p as u64 + 1)
        }
    }
    /// A CUSUM with these settings, at 0.
    pub fn cusum(&self) -> Cusum {
        Cusum::new(self.shift, self.clip, self.false_alarm_rate)
    }
}

impl fmt::Display for AdaptiveConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "adaptive:fa={},shift={},jump={},floor={},refresh={},warmup={},ridge={},clip={}",
            self.false_alarm_rate,
            self.shift,
            self.jump,
            self.floor,
            self.refresh,
            self.warmup,
            self.ridge,
            self.clip
        )
    }
}

/// The model the errors are measured against, frozen between refreshes.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Reference {
    beta: Vec<f64>,
    intercept: f64,
    /// Predictive standard deviation of an error: sigma_hat sqrt(1 + (m+1)/ess).
    scale: f64,
}

/// What the schedule has learned from the stream (checkpointed with the statistics).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct DriftState {
    /// CUSUM statistic S_t.
    cusum: f64,
    alarms: u64,
    /// 0-based stream position of the row that raised the last alarm.
    last_alarm: Option<u64>,
    /// Total weight W and sum of squared normalized row weights, tracked (for the Kish
    /// effective sample size 1/sum_sq) up to stream position `tracked`.
    weight: f64,
    sum_sq: f64,
    tracked: u64,
    /// Present while the detector is armed.
    reference: Option<Reference>,
    /// Refresh as soon as the effective sample size reaches the warm-up (start, alarm).
    rearm_pending: bool,
    /// Next scheduled refresh (stream position); None before the first refresh.
    next_refresh: Option<u64>,
}

impl Default for DriftState {
    fn default() -> Self {
        DriftState {
            cusum: 0.0,
            alarms: 0,
            last_alarm: None,
            weight: 0.0,
            sum_sq: 0.0,
            tracked: 0,
            reference: None,
            rearm_pending: true,
            next_refresh: None,
        }
    }
}

/// The drift-adaptive schedule: settings plus state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Adaptive {
    /// The settings.
    pub config: AdaptiveConfig,
    /// The detector's state (alarms, reference model, statistic).
    #[serde(default)]
    pub state: DriftState,
}

impl Adaptive {
    /// The schedule at the start of a stream.
    pub fn new(config: AdaptiveConfig) -> Adaptive {
        Adaptive {
            config,
            state: DriftState::default(),
        }
    }

    /// Raw alpha of the row at stream position n: plain averaging since the start, or since
    /// the last alarm counting the old state as 1/jump - 1 rows.
    #[inline]
    pub fn alpha_at(&self, n: u64) -> f64 {
        let m = match self.state.last_alarm {
            Some(a) => (1.0 / self.config.jump - 1.0) + n.saturating_sub(a) as f64,
            None => n as f64,
        };
        (1.0 / (m + 1.0)).max(self.config.floor)
    }

    /// Alarms raised so far.
    pub fn alarms(&self) -> u64 {
        self.state.alarms
    }
    /// 1-based row number (rows seen when it was folded in) of the row that raised the last
    /// alarm.
    pub fn last_alarm_row(&self) -> Option<u64> {
        self.state.last_alarm.map(|a| a + 1)
    }
    /// Whether a reference model exists yet (the detector watches only then).
    pub fn armed(&self) -> bool {
        self.state.reference.is_some()
    }
    /// The CUSUM statistic now.
    pub fn cusum_statistic(&self) -> f64 {
        self.state.cusum
    }
    /// Kish effective sample size 1 / sum_i w_i^2 of the normalized row weights, valid when
    /// the weights have been tracked up to position n (otherwise n, as for plain averages).
    pub fn kish_size(&self, n: u64) -> f64 {
        if self.state.tracked == n && self.state.sum_sq > 0.0 {
            1.0 / self.state.sum_sq
        } else {
            n as f64
        }
    }

    /// Picks up the weights of a stream it did not see from the start (a schedule swapped in,
    /// statistics merged): assume plain averages so far.
    fn sync(&mut self, n: u64) {
        let s = &mut self.state;
        if s.tracked != n {
            s.tracked = n;
            s.weight = if n > 0 { 1.0 } else { 0.0 };
            s.sum_sq = if n > 0 { 1.0 / n as f64 } else { 0.0 };
        }
    }

    /// Whether the statistics before position n can support a reference: an effective sample
    /// size of `warmup` rows, and `warmup` rows since the last alarm. The second condition
    /// matters: right after an alarm the Kish size is still large, but the statistics are
    /// still the old regime's and a reference fitted on them would raise the alarm again.
    fn warm(&self, n: u64, p: usize) -> bool {
        let w = self.config.warmup_rows(p);
        self.kish_size(n) >= w as f64 && self.state.last_alarm.is_none_or(|a| n >= a + w)
    }

    /// Whether the reference should be refreshed before the row at position n.
    pub fn wants_refresh(&self, n: u64, p: usize) -> bool {
        let s = &self.state;
        if s.next_refresh.is_some_and(|at| n >= at) {
            return true;
        }
        s.rearm_pending && self.warm(n, p)
    }

    /// Alphas for a prefix of the rows starting at stream position n (at least one row, at
    /// most `rows`): stops early when the reference must be refreshed before the next row.
    /// Each row is first tested against the reference (CUSUM), then weighted.
    pub fn alphas_for_batch(&mut self, n: u64, rows: usize, x: &[f64], y: &[f64]) -> Vec<f64> {
        let p = x.len().checked_div(rows).unwrap_or(0);
        let cusum = self.config.cusum();
        self.sync(n);
        let mut out = Vec::with_capacity(rows);
        for i in 0..rows {
            let pos = n + i as u64;
            if let Some(r) = &self.state.reference {
                let row = &x[i * p..(i + 1) * p];
                let pred = r.intercept + row.iter().zip(&r.beta).map(|(a, b)| a * b).sum::<f64>();
                let z = (y[i] - pred) / r.scale;
                if cusum.step(&mut self.state.cusum, z * z) {
                    // The alarm row is the first evidence of the new regime: it already gets
                    // the jump. The stale reference is dropped until the statistics have
                    // forgotten enough to fit the new regime.
                    let s = &mut self.state;
                    s.alarms += 1;
                    s.last_alarm = Some(pos);
                    s.reference = None;
                    s.rearm_pending = true;
                }
            }
            let a = self.alpha_at(pos);
            let s = &mut self.state;
            // 003 eq. (6) with W tracked (stats/mod.rs): the row's normalized weight e.
            s.weight = (1.0 - a) * s.weight + a;
            let e = if s.weight > 0.0 { a / s.weight } else { 1.0 };
            s.sum_sq = (1.0 - e) * (1.0 - e) * s.sum_sq + e * e;
            s.tracked = pos + 1;
            out.push(a);
            if i + 1 < rows && self.wants_refresh(pos + 1, p) {
                break;
            }
        }
        out
    }

    /// Refits the reference ridge model from the statistics (the rows before position
    /// stats.n()). The detector arms only when the fit is usable: enough effective rows, a
    /// residual variance that is not 0.
    pub fn refresh(&mut self, stats: &RunningStats) {
        let n = stats.n();
        let p = stats.p();
        self.sync(n);
        let ess = self.kish_size(n);
        let warm = self.warm(n, p);
        let reference = if warm {
            fit_reference(stats, self.config.ridge, ess)
        } else {
            None
        };
        // A young regime (stream start, alarm) refreshes geometrically, each time its rows have
        // doubled, so that the first, roughest reference does not stand for `refresh` rows.
        let young = n - self.state.last_alarm.map_or(0, |a| a + 1);
        let every = young.clamp(
            self.config.warmup_rows(p),
            self.config.refresh_rows(p).max(1),
        );
        let s = &mut self.state;
        s.next_refresh = Some(n + every);
        // Keep waiting for the warm-up if that is what failed; otherwise retry on schedule.
        s.rearm_pending = reference.is_none() && !warm;
        if reference.is_some() && s.reference.is_none() {
            s.cusum = 0.0;
        }
        s.reference = reference;
    }
}

/// Ridge on standardized columns from the statistics, with the predictive standard deviation
/// of its errors on new rows.
///
/// The weighted training MSE underestimates the noise variance and a new row's error exceeds
/// it: for weighted least squares with normalized weights w_i and m + 1 parameters,
/// E[train MSE] ~ sigma^2 (1 - (m+1) sum w_i^2) and E[new error^2] ~ sigma^2 (1 + (m+1) sum
/// w_i^2) (the leverages x_i^T A^-1 x_i average m + 1 under the weights). sum w_i^2 is 1/ess
/// (Kish); both corrections are below 1/4 once ess >= 4 (m + 1), the default warm-up.
///
/// The variance itself is an estimate with relative standard error about sqrt(2 / dof),
/// dof = ess - (m + 1), and an underestimate persists until the next refresh: a 20% low
/// variance is a 20% rise for the CUSUM, which with shift = 1.3 detects rises above 14%. So the
/// scale is inflated by two standard errors, 1 + 2 sqrt(2 / dof): about +50% at the smallest
/// warm-up (dof = 3 (m + 1), m = 10), +9% at dof = 1000, +3% at 10^4. Without it short
/// stationary streams raised false alarms well above the detector's own rate, a few even at
/// the default fa (docs/drift.md, "Young regimes").
fn fit_reference(stats: &RunningStats, ridge: f64, ess: f64) -> Option<Reference> {
    let problem = Problem::regression(stats, true).ok()?;
    let g = &problem.gram;
    let all: Vec<usize> = (0..g.m).collect();
    let sol = solve_subset(g, &all, ridge);
    if !sol.jitter.is_finite() {
        return None;
    }
    let d = (g.m as f64 + 1.0) / ess;
    if d >= 0.5 {
        return None;
    }
    let mse = (2.0 * g.loss(&sol.b)).max(0.0);
    let dof = ess - (g.m as f64 + 1.0);
    let var = mse / (1.0 - d) * (1.0 + d) * (1.0 + 2.0 * (2.0 / dof).sqrt());
    // An (almost) exact fit cannot standardize errors: stay disarmed rather than alarm on
    // rounding noise.
    if !(var > 1e-10 * g.yy && var.is_finite()) {
        return None;
    }
    let (beta, intercept) = problem.to_original(&sol.b);
    Some(Reference {
        beta,
        intercept,
        scale: var.sqrt(),
    })
}
