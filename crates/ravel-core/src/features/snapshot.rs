//! A frozen copy of a feature stream's state (OS or Asy-OS): the retained sets, the scores
//! and the pass log at one moment. It answers `summary` and `model` exactly as the live state
//! would have at that moment, and never changes, so a service can publish one after each
//! batch of features and let readers extract from it (refits included) while the stream goes
//! on: a reader never blocks the writer. A finished Asy-OS run is the same thing
//! (`AsyncFinished`).

use super::model::{self, ModelInput};
use super::selector::{Counters, Selector};
use super::{Labels, OsParams, PassLog, Staleness, Summary};
use crate::model::Model;
use std::sync::Arc;

/// The state of an OS or Asy-OS stream at one moment.
#[derive(Clone)]
pub struct SelectionSnapshot {
    pub(crate) method: &'static str,
    pub(crate) labels: Arc<Labels>,
    pub(crate) params: OsParams,
    pub(crate) eta_start: f64,
    /// One selector for OS; worker t's for Asy-OS.
    pub(crate) selectors: Vec<Selector>,
    /// Asy-OS only.
    pub(crate) staleness: Vec<Staleness>,
    /// The scores u = b0 + X w (u_C for Asy-OS).
    pub(crate) u: Vec<f64>,
    pub(crate) passes: PassLog,
}

impl SelectionSnapshot {
    /// The labels y.
    pub fn labels(&self) -> &Labels {
        &self.labels
    }
    /// The objective L(u) at the snapshot.
    pub fn loss(&self) -> f64 {
        self.labels.loss().mean(&self.u, self.labels.values())
    }
    /// The scores b0 + X_S w_S on the standardized columns (u_C for Asy-OS).
    pub fn scores(&self) -> &[f64] {
        &self.u
    }
    /// Columns held by all selectors together (at most s).
    pub fn retained_columns(&self) -> usize {
        self.selectors.iter().map(|s| s.retained_columns()).sum()
    }
    /// Floats reserved for columns by all selectors together (at most s n).
    pub fn column_capacity(&self) -> usize {
        self.selectors.iter().map(|s| s.column_capacity()).sum()
    }
    fn b0(&self) -> f64 {
        self.selectors
            .iter()
            .find_map(|s| s.intercept())
            .unwrap_or(0.0)
    }
    /// The state at the snapshot: selected features, objective, counters.
    pub fn summary(&self) -> Summary {
        let loss = self.loss();
        Summary {
            method: self.method.into(),
            loss_name: self.params.loss,
            s: self.params.s,
            workers: self.selectors.len(),
            n: self.labels.n(),
            selected: super::selected_of(self.selectors.iter().enumerate()),
            intercept: super::intercept_of(self.b0(), self.selectors.iter()),
            loss,
            loss_per_pass: self.passes.losses(loss),
            passes: self.passes.passes(),
            features_seen: self.passes.seen(),
            counters: sum_counters(self.selectors.iter().map(|s| s.counters())),
            eta: self
                .selectors
                .iter()
                .map(|s| s.eta())
                .fold(f64::INFINITY, f64::min),
            eta_start: self.eta_start,
            m: self.params.m,
            staleness: self.staleness.clone(),
        }
    }
    /// The model JSON of `ravel fit` on the selected features; `refit` re-solves the loss on
    /// the selected columns.
    pub fn model(&self, refit: bool) -> Model {
        model::build(ModelInput {
            summary: self.summary(),
            sets: self.selectors.iter().collect(),
            b0: self.b0(),
            labels: &self.labels,
            last_pass_substitutions: self.passes.last_pass_substitutions(),
            refit,
        })
    }
}

pub(crate) fn sum_counters(it: impl Iterator<Item = Counters>) -> Counters {
    it.fold(Counters::default(), |a, c| Counters {
        steps: a.steps + c.steps,
        entered: a.entered + c.entered,
        substitutions: a.substitutions + c.substitutions,
        rejected: a.rejected + c.rejected,
        updated: a.updated + c.updated,
        constant: a.constant + c.constant,
        skipped: a.skipped + c.skipped,
        eta_reductions: a.eta_reductions + c.eta_reductions,
        handed_off: a.handed_off + c.handed_off,
    })
}
