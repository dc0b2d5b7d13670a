//! One retained set S with its budget: the whole state of an OS run (Algorithm 1), and the
//! private state of one Asy-OS worker (its S(t) of size s/q, Algorithm 3). `Selector::step`
//! is lines 4-9 of Algorithm 1 (= lines 5-11 of Algorithm 3): given the current score vector
//! u it takes the partial gradient step and the projection, and recomputes its own part of u.
//!
//! Memory: the retained columns live in one buffer reserved once for `budget` columns of n
//! values; a newcomer is compared before it is stored, and only replaces an evicted column, so
//! the buffer never grows past `budget * n` whatever the stream length.

use super::loss::Loss;
use crate::linalg::{axpy, dot};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// Whether a column is constant: it carries no information and cannot be standardized. The
/// selection holds the whole column, so the test is exact: every value equal (or a variance
/// that underflows to 0). The former rule, variance below 1e-12 E[x^2], called every column
/// with |mean| / sd above 1e6 constant (timestamps, prices in cents; issue 11 item 3); a column
/// whose values are not all equal has a two-pass variance above 0 however large its mean, and
/// standardizes to a column of the data's own spread.
pub fn is_constant(x: &[f64]) -> bool {
    let Some(&first) = x.first() else {
        return true;
    };
    x.iter().all(|&v| v == first) || Centring::of(x).var <= 0.0
}

/// The mean of a column as hi + lo, and its population variance, by the corrected two-pass
/// algorithm (Chan, Golub and LeVeque): hi is the plain mean, lo = mean(x - hi) what it
/// missed. A value near hi minus hi is exact (Sterbenz), so `centre` gives the deviations to
/// the data's own spread even when |mean| / sd is 1e9: a single rounded mean is off by up to
/// half an ulp of the mean (1e-7 at 1e9), a constant error in every deviation.
struct Centring {
    hi: f64,
    lo: f64,
    var: f64,
}

impl Centring {
    fn of(x: &[f64]) -> Centring {
        let nf = x.len().max(1) as f64;
        let hi = x.iter().sum::<f64>() / nf;
        let (mut s1, mut s2) = (0.0, 0.0);
        for &v in x {
            let d = v - hi;
            s1 += d;
            s2 += d * d;
        }
        let lo = s1 / nf;
        Centring {
            hi,
            lo,
            var: ((s2 - s1 * lo) / nf).max(0.0),
        }
    }
    fn centre(&self, v: f64) -> f64 {
        (v - self.hi) - self.lo
    }
}

/// Reductions of eta tried on one step before the step is skipped (not reached in practice:
/// each one lowers eta below 1 / the curvature met, or halves it).
const MAX_RETRIES: u32 = 60;

/// A retained feature: who it is and how its column was standardized.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Retained {
    /// Column index in the stream.
    pub index: usize,
    /// Column name.
    pub name: String,
    /// Mean and population standard deviation of the raw column: the model in original units
    /// is w / scale, with intercept b0 - sum w mean / scale.
    pub mean: f64,
    /// See `mean`.
    pub scale: f64,
}

/// The feature a step dropped (a rejected newcomer or an evicted member), for Asy-OS to offer
/// to another worker.
#[derive(Clone)]
pub(crate) struct Dropped {
    pub index: usize,
    pub name: String,
    /// |w| when it was dropped.
    pub weight: f64,
    /// An evicted member's raw values (its column de-standardized); none for a rejected
    /// newcomer, whose values the caller passed in and still holds (no copy on the common
    /// outcome).
    pub values: Option<std::sync::Arc<[f64]>>,
}

/// What one arriving feature did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "outcome")]
pub enum Outcome {
    /// The newcomer joined S; `evicted` is the feature it substituted (none while S was not
    /// full).
    Entered {
        /// The feature substituted, if any.
        evicted: Option<usize>,
    },
    /// The newcomer's weight was the smallest of S + {j}: it was dropped at once (the retained
    /// weights still took their step).
    Rejected,
    /// The feature was already in S: its weight took a full step in place.
    Updated,
    /// The column is constant: nothing happened.
    Constant,
    /// No step size passed the curvature check (degenerate input): nothing happened.
    Skipped,
}

/// Counters of one selector.
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Counters {
    /// Features that reached `step` (constant ones included).
    pub steps: u64,
    /// Features that joined S.
    pub entered: u64,
    /// Entries that evicted a retained feature.
    pub substitutions: u64,
    /// Newcomers dropped at once.
    pub rejected: u64,
    /// Features already in S that took a step in place.
    pub updated: u64,
    /// Constant columns (nothing done).
    pub constant: u64,
    /// Steps skipped (no step size passed the curvature check).
    pub skipped: u64,
    /// Times the curvature check lowered eta.
    pub eta_reductions: u64,
    /// Asy-OS: features this worker dropped and offered to a worker whose set they beat.
    #[serde(default)]
    pub handed_off: u64,
}

/// Where the newcomer goes.
#[derive(Clone, Copy, PartialEq)]
enum Place {
    /// Already retained, in this slot.
    Existing(usize),
    /// Into a free slot (S not full).
    Grow,
    /// Into the slot of the evicted feature.
    Replace(usize),
    Reject,
}

/// A retained set and its weights (standardized units). `Clone` copies the retained columns
/// (budget * n floats): what a snapshot of a running stream costs.
#[derive(Clone)]
pub struct Selector {
    n: usize,
    budget: usize,
    loss: Loss,
    /// Slot k's standardized column is `columns[k n .. (k + 1) n]`.
    columns: Vec<f64>,
    entries: Vec<Retained>,
    w: Vec<f64>,
    slot_of: HashMap<usize, usize>,
    /// The intercept is one more retained coordinate, never evicted; in Asy-OS one worker owns
    /// it.
    owns_intercept: bool,
    b0: f64,
    /// This selector's part of u: b0 + X_S w_S (b0 only if it owns the intercept).
    own: Vec<f64>,
    eta: f64,
    m: f64,
    counters: Counters,
    /// Whether `step` records what it drops (Asy-OS with several workers).
    keep_dropped: bool,
    dropped: Option<Dropped>,
    // Scratch of length n (xs, g, next) and of length budget (grad, w_next).
    xs: Vec<f64>,
    g: Vec<f64>,
    next: Vec<f64>,
    grad: Vec<f64>,
    w_next: Vec<f64>,
}

impl Selector {
    /// An empty set for `n` samples. `b0` is the starting intercept when this selector owns it.
    pub(crate) fn new(
        n: usize,
        budget: usize,
        loss: Loss,
        eta: f64,
        m: f64,
        intercept: Option<f64>,
    ) -> Selector {
        let mut columns = Vec::new();
        columns.reserve_exact(budget * n);
        let b0 = intercept.unwrap_or(0.0);
        Selector {
            n,
            budget,
            loss,
            columns,
            entries: Vec::with_capacity(budget),
            w: Vec::with_capacity(budget),
            slot_of: HashMap::with_capacity(budget),
            owns_intercept: intercept.is_some(),
            b0,
            own: vec![b0; n],
            eta,
            m,
            counters: Counters::default(),
            keep_dropped: false,
            dropped: None,
            xs: vec![0.0; n],
            g: vec![0.0; n],
            next: vec![0.0; n],
            grad: Vec::with_capacity(budget),
            w_next: Vec::with_capacity(budget),
        }
    }

    /// The budget of this selector.
    pub fn budget(&self) -> usize {
        self.budget
    }
    /// From now on `step` records the feature it drops, for `take_dropped`.
    pub(crate) fn keep_dropped(&mut self) {
        self.keep_dropped = true;
    }
    /// The feature the last step dropped, if it dropped one (and `keep_dropped` is on).
    pub(crate) fn take_dropped(&mut self) -> Option<Dropped> {
        self.dropped.take()
    }
    /// Asy-OS handed the feature this selector dropped to another worker.
    pub(crate) fn count_handoff(&mut self) {
        self.counters.handed_off += 1;
    }
    /// The smallest |w| a newcomer must beat to enter: 0 while the set has room.
    pub fn floor(&self) -> f64 {
        if self.entries.len() < self.budget {
            0.0
        } else {
            self.w.iter().fold(f64::INFINITY, |m, w| m.min(w.abs()))
        }
    }
    /// The step size now.
    pub fn eta(&self) -> f64 {
        self.eta
    }
    /// Its counters.
    pub fn counters(&self) -> Counters {
        self.counters
    }
    /// The intercept, if this selector owns it.
    pub fn intercept(&self) -> Option<f64> {
        self.owns_intercept.then_some(self.b0)
    }
    /// This selector's part of u = b0 + X w.
    pub fn own(&self) -> &[f64] {
        &self.own
    }
    /// Number of columns held.
    pub fn retained_columns(&self) -> usize {
        self.entries.len()
    }
    /// Floats reserved for columns: never more than budget * n.
    pub fn column_capacity(&self) -> usize {
        self.columns.capacity()
    }
    /// The retained features with their weights (standardized units) and columns.
    pub fn retained(&self) -> impl Iterator<Item = (&Retained, f64, &[f64])> {
        self.entries
            .iter()
            .zip(&self.w)
            .enumerate()
            .map(|(k, (e, &w))| (e, w, &self.columns[k * self.n..(k + 1) * self.n]))
    }
    /// Whether feature `index` is retained.
    pub fn contains(&self, index: usize) -> bool {
        self.slot_of.contains_key(&index)
    }

    fn column(&self, k: usize) -> &[f64] {
        &self.columns[k * self.n..(k + 1) * self.n]
    }

    /// One OS update for the arriving feature `index` with raw values `x` (length n, finite:
    /// the caller checked), given the current scores `u` (the whole model's b0 + X w; in
    /// Asy-OS the worker's possibly stale read of u_C).
    ///
    /// 000 Algorithm 1, lines 4-9: w_S <- w_S - (eta/m) X_S^T dL/du; w_j <- w_j - eta x_j^T
    /// dL/du (w_j = 0 for a newcomer); then the projection onto ||w||_0 <= budget, which drops
    /// the smallest |w_k| of S + {j}. Afterwards `own` = b0 + X_S w_S, recomputed from the
    /// columns (same cost as the incremental form, no drift).
    ///
    /// Step size: Theorem 1 needs eta < 1/L_F on the coordinates one update touches. Before
    /// committing, the step d (all changed coordinates, eviction included) is checked against
    /// the curvature it actually meets: c ||X d||^2 / n <= ||d||^2 / eta, with c the loss's
    /// curvature bound. When it holds, the descent lemma gives
    /// L(new) <= L(old) + <grad, d> + ||d||^2 / (2 eta), and because the projection keeps the
    /// best `budget` of the s + 1 candidates, <grad, d> <= -||d||^2 / (2 eta) (for m = 1), so
    /// the objective cannot increase. When it fails, eta is lowered for good (to 0.9 / the
    /// curvature met) and the step redone. Between such events the algorithm is exactly
    /// Algorithm 1 with a constant eta; a stream lowers eta a few times early on, then rarely.
    pub(crate) fn step(
        &mut self,
        index: usize,
        name: &str,
        x: &[f64],
        u: &[f64],
        y: &[f64],
    ) -> Outcome {
        debug_assert_eq!(x.len(), self.n);
        debug_assert_eq!(u.len(), self.n);
        let n = self.n;
        let nf = n as f64;
        self.counters.steps += 1;
        self.dropped = None;
        let existing = self.slot_of.get(&index).copied();
        // Standardize the newcomer (a retained feature keeps its stored column: the samples,
        // hence a feature's values, are fixed in this setting).
        let mut standardization = (0.0, 1.0);
        if existing.is_none() {
            if is_constant(x) {
                self.counters.constant += 1;
                return Outcome::Constant;
            }
            let centring = Centring::of(x);
            let scale = centring.var.sqrt();
            for (o, &v) in self.xs.iter_mut().zip(x) {
                *o = centring.centre(v) / scale;
            }
            standardization = (centring.hi + centring.lo, scale);
        }
        // g = dL/du (000 eqs. (4)-(5)), then the partial gradient X_{S+j}^T g.
        self.loss.gradient(u, y, &mut self.g);
        let len = self.entries.len();
        self.grad.clear();
        for k in 0..len {
            let gk = dot(self.column(k), &self.g);
            self.grad.push(gk);
        }
        let g_new = match existing {
            Some(k) => self.grad[k],
            None => dot(&self.xs, &self.g),
        };
        let g_b0 = if self.owns_intercept {
            self.g.iter().sum::<f64>()
        } else {
            0.0
        };
        let check_loss = self.m != 1.0;
        let loss_old = if check_loss {
            self.loss.mean(u, y)
        } else {
            0.0
        };

        let mut retries = 0;
        loop {
            let eta = self.eta;
            let small = eta / self.m;
            self.w_next.clear();
            for k in 0..len {
                let step = if Some(k) == existing { eta } else { small };
                self.w_next.push(self.w[k] - step * self.grad[k]);
            }
            let v_new = -eta * g_new;
            let b0_next = self.b0 - small * g_b0;
            let place = match existing {
                Some(k) => Place::Existing(k),
                None if len < self.budget => Place::Grow,
                None => {
                    // k* = argmin_{k in S + {j}} |w_k|; on ties the newcomer goes.
                    let (kmin, wmin) = self.w_next.iter().enumerate().fold(
                        (usize::MAX, f64::INFINITY),
                        |(bk, bw), (k, w)| {
                            if w.abs() < bw { (k, w.abs()) } else { (bk, bw) }
                        },
                    );
                    if v_new.abs() > wmin {
                        Place::Replace(kmin)
                    } else {
                        Place::Reject
                    }
                }
            };
            // ||d||^2 over every coordinate that moves, the eviction included.
            let mut d2 = (b0_next - self.b0).powi(2);
            for k in 0..len {
                let after = if Place::Replace(k) == place {
                    0.0
                } else {
                    self.w_next[k]
                };
                d2 += (after - self.w[k]).powi(2);
            }
            if matches!(place, Place::Grow | Place::Replace(_)) {
                d2 += v_new * v_new;
            }
            // next = b0 + X_S w_S after the step, column by column in slot order.
            self.next.fill(b0_next);
            for k in 0..len {
                if Place::Replace(k) == place {
                    axpy(v_new, &self.xs, &mut self.next);
                } else {
                    axpy(
                        self.w_next[k],
                        &self.columns[k * n..(k + 1) * n],
                        &mut self.next,
                    );
                }
            }
            if place == Place::Grow {
                axpy(v_new, &self.xs, &mut self.next);
            }
            let (mut moved, mut size) = (0.0, 0.0);
            for (a, b) in self.next.iter().zip(&self.own) {
                moved += (a - b) * (a - b);
                size += b * b;
            }
            // Recomputing u from the columns leaves rounding noise of about (s + 2) eps |u| per
            // entry even when d is 0: allow for it so that a converged step is not mistaken
            // for a too-large eta.
            let noise = ((len + 2) as f64 * f64::EPSILON).powi(2) * (size / nf).max(1.0);
            let mut ok = self.loss.curvature() * moved / nf <= d2 / eta * (1.0 + 1e-9) + noise;
            if ok && check_loss {
                // m > 1: the projection argument above does not apply; require descent on u.
                let loss_new: f64 = u
                    .iter()
                    .zip(&self.next)
                    .zip(&self.own)
                    .zip(y)
                    .map(|(((&ui, &a), &b), &yi)| self.loss.value(ui + (a - b), yi))
                    .sum::<f64>()
                    / nf;
                ok = loss_new <= loss_old + 1e-12 * (1.0 + loss_old.abs());
            }
            if !ok {
                // Lower eta below 1 / (the curvature this step met): for the squared loss that
                // curvature does not depend on eta unless the eviction changes, so one retry
                // usually suffices; halving is the fallback when the measure is degenerate.
                retries += 1;
                self.counters.eta_reductions += 1;
                let met = self.loss.curvature() * moved / nf / d2.max(f64::MIN_POSITIVE);
                let lowered = 0.9 / met;
                self.eta = if lowered.is_finite() && lowered < eta {
                    lowered
                } else {
                    0.5 * eta
                };
                if retries >= MAX_RETRIES {
                    self.counters.skipped += 1;
                    return Outcome::Skipped;
                }
                continue;
            }
            // Commit.
            std::mem::swap(&mut self.w, &mut self.w_next);
            self.b0 = b0_next;
            std::mem::swap(&mut self.own, &mut self.next);
            let (mean, scale) = standardization;
            let entry = || Retained {
                index,
                name: name.to_string(),
                mean,
                scale,
            };
            return match place {
                Place::Existing(_) => {
                    self.counters.updated += 1;
                    Outcome::Updated
                }
                Place::Grow => {
                    self.columns.extend_from_slice(&self.xs);
                    self.entries.push(entry());
                    self.w.push(v_new);
                    self.slot_of.insert(index, len);
                    self.counters.entered += 1;
                    Outcome::Entered { evicted: None }
                }
                Place::Replace(k) => {
                    if self.keep_dropped {
                        let e = &self.entries[k];
                        let values = self.columns[k * n..(k + 1) * n]
                            .iter()
                            .map(|&v| v * e.scale + e.mean)
                            .collect();
                        self.dropped = Some(Dropped {
                            index: e.index,
                            name: e.name.clone(),
                            // The step's weight (w and w_next were swapped at the commit).
                            weight: self.w[k].abs(),
                            values: Some(values),
                        });
                    }
                    self.columns[k * n..(k + 1) * n].copy_from_slice(&self.xs);
                    let old = std::mem::replace(&mut self.entries[k], entry());
                    self.w[k] = v_new;
                    self.slot_of.remove(&old.index);
                    self.slot_of.insert(index, k);
                    self.counters.entered += 1;
                    self.counters.substitutions += 1;
                    Outcome::Entered {
                        evicted: Some(old.index),
                    }
                }
                Place::Reject => {
                    if self.keep_dropped {
                        self.dropped = Some(Dropped {
                            index,
                            name: name.to_string(),
                            weight: v_new.abs(),
                            values: None,
                        });
                    }
                    self.counters.rejected += 1;
                    Outcome::Rejected
                }
            };
        }
    }
}
