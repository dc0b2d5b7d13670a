//! Feature streams (paper 000, ALGORITHMS.md section 3): the n samples and their labels y are
//! fixed; features arrive one at a time as columns, possibly in several passes, and ravel
//! keeps the best s of them in O(n s) memory with online substitution (OS, Algorithm 1) or its
//! asynchronous parallel form (Asy-OS, Algorithms 2-3). At any time the state answers with the
//! selected set, the weights, the loss and the passes seen (`Summary`), and with the `Model`
//! JSON of `ravel fit` (optionally refit on the selected columns).
//!
//! Files: `loss` (squared, squared hinge, logistic), `selector` (one
//! retained set and the OS step), `online` (Algorithm 1), `asy` (Algorithms 2-3 on threads;
//! `centre` their central machine),
//! `model` (Model JSON and refit), `snapshot` (a frozen copy that readers extract from
//! while the stream goes on), `substitution` (`Substitution`: OS or Asy-OS behind one API).
//! The vector kernels are `crate::linalg`. The service (`feature_streams`) feeds a
//! `Substitution` from one thread and publishes a `SelectionSnapshot` after each batch for
//! its readers.

pub mod asy;
pub mod centre;
pub mod loss;
mod model;
pub mod online;
pub mod selector;
pub mod snapshot;
pub mod substitution;

pub use asy::{AsyncFinished, AsyncSubstitution, DEFAULT_QUEUE};
pub use centre::{CentralState, Centre};
pub use loss::Loss;
pub use online::OnlineSubstitution;
pub use selector::{Counters, Outcome, Retained};
pub use snapshot::SelectionSnapshot;
pub use substitution::Substitution;

use serde::{Deserialize, Serialize};

/// Bad labels, features or parameters: the message says what to fix. Nothing is changed in
/// the state when a call returns one of these.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum FeatureError {
    /// A column whose length is not n.
    #[error("feature '{name}' has {got} values but there are {expected} samples")]
    WrongLength {
        /// The feature.
        name: String,
        /// Samples n.
        expected: usize,
        /// Values it has.
        got: usize,
    },
    /// A column with a NaN or infinite value.
    #[error("feature '{name}': value {position} is {value}, not a finite number")]
    NotFinite {
        /// The feature.
        name: String,
        /// Index of the value.
        position: usize,
        /// The value (NaN or infinite).
        value: f64,
    },
    /// Labels the loss cannot take.
    #[error("labels: {0}")]
    Labels(String),
    /// Parameters out of range.
    #[error("{0}")]
    Params(String),
    /// An Asy-OS worker thread died.
    #[error("an Asy-OS worker stopped unexpectedly: {0}")]
    WorkerGone(String),
}

/// The labels y of the n samples, checked against the loss: finite numbers for the squared
/// loss; +1/-1 for the classification losses (0 counts as -1), both classes present.
#[derive(Debug, Clone, PartialEq)]
pub struct Labels {
    y: Vec<f64>,
    loss: Loss,
}

impl Labels {
    /// Checks `y` for `loss` (see the type).
    pub fn new(y: Vec<f64>, loss: Loss) -> Result<Labels, FeatureError> {
        if y.len() < 2 {
            return Err(FeatureError::Labels(format!(
                "need at least 2 samples, got {}",
                y.len()
            )));
        }
        if let Some((i, v)) = y.iter().enumerate().find(|(_, v)| !v.is_finite()) {
            return Err(FeatureError::Labels(format!(
                "label {i} is {v}, not a finite number"
            )));
        }
        let mut y = y;
        if loss.is_classification() {
            for (i, v) in y.iter_mut().enumerate() {
                *v = match *v {
                    1.0 => 1.0,
                    -1.0 | 0.0 => -1.0,
                    other => {
                        return Err(FeatureError::Labels(format!(
                            "label {i} is {other}: the {loss} loss needs classes +1 and -1 (or 0)"
                        )));
                    }
                }
            }
            let pos = y.iter().filter(|&&v| v > 0.0).count();
            if pos == 0 || pos == y.len() {
                return Err(FeatureError::Labels(format!(
                    "classification needs both classes; positives: {pos}, negatives: {}",
                    y.len() - pos
                )));
            }
        }
        Ok(Labels { y, loss })
    }
    /// Number of samples n.
    pub fn n(&self) -> usize {
        self.y.len()
    }
    /// The loss the labels were checked for.
    pub fn loss(&self) -> Loss {
        self.loss
    }
    /// The labels (classification: +1 / -1).
    pub fn values(&self) -> &[f64] {
        &self.y
    }
    /// The best constant score, where the intercept starts: the mean of y (squared),
    /// pi+ - pi- (squared hinge: the minimizer of pi+ (1-b)^2 + pi- (1+b)^2 on [-1, 1]),
    /// log(pi+ / pi-) (logistic).
    pub fn null_intercept(&self) -> f64 {
        let n = self.n() as f64;
        match self.loss {
            Loss::Squared => self.y.iter().sum::<f64>() / n,
            Loss::SquaredHinge | Loss::Logistic => {
                let pos = self.y.iter().filter(|&&v| v > 0.0).count() as f64 / n;
                if self.loss == Loss::SquaredHinge {
                    2.0 * pos - 1.0
                } else {
                    (pos / (1.0 - pos)).ln()
                }
            }
        }
    }
    /// Checks one arriving column.
    pub fn check_feature(&self, name: &str, values: &[f64]) -> Result<(), FeatureError> {
        if values.len() != self.n() {
            return Err(FeatureError::WrongLength {
                name: name.to_string(),
                expected: self.n(),
                got: values.len(),
            });
        }
        if let Some((position, &value)) = values.iter().enumerate().find(|(_, v)| !v.is_finite()) {
            return Err(FeatureError::NotFinite {
                name: name.to_string(),
                position,
                value,
            });
        }
        Ok(())
    }
}

/// OS / Asy-OS settings, checked once by `check` before a stream starts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OsParams {
    /// Budget: the number of features kept.
    pub s: usize,
    /// The loss minimized.
    pub loss: Loss,
    /// Step size eta; default `default_eta`.
    #[serde(default)]
    pub eta: Option<f64>,
    /// m >= 1: retained weights step by eta/m, the newcomer by eta (000 section 3.1). Default 1,
    /// the only value for which the curvature check alone guarantees descent.
    #[serde(default = "one")]
    pub m: f64,
}

fn one() -> f64 {
    1.0
}

impl OsParams {
    /// Budget s and loss, default eta and m = 1.
    pub fn new(s: usize, loss: Loss) -> OsParams {
        OsParams {
            s,
            loss,
            eta: None,
            m: 1.0,
        }
    }
    /// The same parameters with the step size `eta`.
    pub fn with_eta(mut self, eta: f64) -> OsParams {
        self.eta = Some(eta);
        self
    }

    /// `check`, plus that `labels` were validated for the same loss.
    pub fn check_for(&self, labels: &Labels) -> Result<(), FeatureError> {
        self.check()?;
        if self.loss != labels.loss() {
            return Err(FeatureError::Params(format!(
                "the labels were checked for the {} loss, the parameters ask for {}",
                labels.loss(),
                self.loss
            )));
        }
        Ok(())
    }

    /// Checks the ranges: s >= 1, eta finite > 0, m finite >= 1.
    pub fn check(&self) -> Result<(), FeatureError> {
        if self.s == 0 {
            return Err(FeatureError::Params(
                "the budget s must be at least 1".into(),
            ));
        }
        if let Some(eta) = self.eta
            && !(eta.is_finite() && eta > 0.0)
        {
            return Err(FeatureError::Params(format!(
                "eta must be a finite number > 0, got {eta}"
            )));
        }
        if !(self.m.is_finite() && self.m >= 1.0) {
            return Err(FeatureError::Params(format!(
                "m must be a finite number >= 1, got {}",
                self.m
            )));
        }
        Ok(())
    }

    /// The starting step: 1 / c, with c the loss's curvature bound. Theorem 1 needs
    /// eta < 1/L_F, and L_F >= c because a single standardized column already has curvature
    /// c ||x||^2 / n = c along its own coordinate, so no larger start can be safe; for the
    /// squared loss it is the exact minimizing step for a newcomer alone. The data then set
    /// eta: every step is checked against the curvature it meets (`Selector::step`), and eta
    /// is lowered to 0.9 / that curvature whenever it exceeds 1/eta, so eta ends below
    /// 1 / (the largest curvature the stream showed) and the objective cannot go up.
    pub fn default_eta(&self) -> f64 {
        1.0 / self.loss.curvature()
    }

    /// The step size used: `eta`, else `default_eta`.
    pub fn eta_for(&self) -> f64 {
        self.eta.unwrap_or_else(|| self.default_eta())
    }
}

/// Pass bookkeeping: a pass ends when the stream's first feature comes back (the usual case of
/// repeated scans in one order) or when the caller says so (`end_pass`).
#[derive(Debug, Clone, Default)]
pub(crate) struct PassLog {
    first: Option<usize>,
    in_pass: u64,
    seen: u64,
    /// Loss at the end of each closed pass, and the substitutions made during it.
    closed: Vec<(f64, u64)>,
    substitutions_at_start: u64,
}

impl PassLog {
    /// Called before feature `index` is applied: true when it starts a new pass, in which
    /// case the caller closes the current one first.
    pub fn starts_pass(&mut self, index: usize) -> bool {
        match self.first {
            None => {
                self.first = Some(index);
                false
            }
            Some(f) => f == index && self.in_pass > 0,
        }
    }
    pub fn record(&mut self) {
        self.in_pass += 1;
        self.seen += 1;
    }
    pub fn close(&mut self, loss: f64, substitutions: u64) {
        if self.in_pass == 0 {
            return;
        }
        self.closed
            .push((loss, substitutions - self.substitutions_at_start));
        self.substitutions_at_start = substitutions;
        self.in_pass = 0;
    }
    pub fn passes(&self) -> usize {
        self.closed.len() + usize::from(self.in_pass > 0)
    }
    /// Losses at the end of each pass, the current loss for an open one.
    pub fn losses(&self, current: f64) -> Vec<f64> {
        let mut v: Vec<f64> = self.closed.iter().map(|c| c.0).collect();
        if self.in_pass > 0 {
            v.push(current);
        }
        v
    }
    pub fn seen(&self) -> u64 {
        self.seen
    }
    /// Substitutions in the last closed pass, if at least two passes closed (the first pass
    /// fills S and always substitutes when p > s).
    pub fn last_pass_substitutions(&self) -> Option<u64> {
        (self.closed.len() >= 2).then(|| self.closed.last().map(|c| c.1).unwrap_or(0))
    }
}

/// One selected feature.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Selected {
    /// Column index in the stream.
    pub index: usize,
    /// Column name.
    pub name: String,
    /// Weight on the standardized column (the quantity OS ranks by).
    pub weight: f64,
    /// The same in original units: weight / scale.
    pub coefficient: f64,
    /// The Asy-OS worker whose S(t) holds it (0 for OS).
    pub worker: usize,
}

/// Staleness of one Asy-OS worker: how many times u_C changed between its read of u_C
/// (Algorithm 3 line 4) and its push (line 12); tau_max of 000 Assumption 2 is `max`.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Staleness {
    /// The worker.
    pub worker: usize,
    /// Pushes it made.
    pub steps: u64,
    /// Mean staleness of its pushes.
    pub mean: f64,
    /// Largest staleness.
    pub max: u64,
}

/// The state of a feature stream at one moment: what a service answers at any time.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// `os` or `asy-os`.
    pub method: String,
    /// The loss minimized.
    pub loss_name: Loss,
    /// The budget.
    pub s: usize,
    /// Worker threads (1 for OS).
    pub workers: usize,
    /// Samples n.
    pub n: usize,
    /// Selected features, largest |weight| first.
    pub selected: Vec<Selected>,
    /// Intercept in original units.
    pub intercept: f64,
    /// Current objective L(u) and its value at the end of each pass (the last one is the
    /// current value while a pass is open).
    pub loss: f64,
    /// The objective at the end of each pass over the columns.
    pub loss_per_pass: Vec<f64>,
    /// Passes begun.
    pub passes: usize,
    /// Columns received.
    pub features_seen: u64,
    /// What happened to the columns (entered, rejected ...).
    pub counters: Counters,
    /// The step size now (lower than the starting one if the curvature check lowered it).
    pub eta: f64,
    /// The starting step size.
    pub eta_start: f64,
    /// The retained weights' step divisor m.
    pub m: f64,
    /// Asy-OS: each worker's staleness.
    pub staleness: Vec<Staleness>,
}

/// The selected list of a set of selectors, largest |weight| first.
pub(crate) fn selected_of<'a>(
    sets: impl Iterator<Item = (usize, &'a selector::Selector)>,
) -> Vec<Selected> {
    let mut out: Vec<Selected> = sets
        .flat_map(|(worker, sel)| {
            sel.retained().map(move |(e, w, _)| Selected {
                index: e.index,
                name: e.name.clone(),
                weight: w,
                coefficient: w / e.scale,
                worker,
            })
        })
        .collect();
    out.sort_by(|a, b| {
        b.weight
            .abs()
            .total_cmp(&a.weight.abs())
            .then(a.index.cmp(&b.index))
    });
    out
}

/// The intercept in original units: b0 - sum_j w_j mean_j / scale_j.
pub(crate) fn intercept_of<'a>(b0: f64, sets: impl Iterator<Item = &'a selector::Selector>) -> f64 {
    b0 - sets
        .flat_map(|s| s.retained().map(|(e, w, _)| w * e.mean / e.scale))
        .sum::<f64>()
}
