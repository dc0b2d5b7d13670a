//! Online substitution (OS), 000 Algorithm 1: one retained set S of size s, the score vector
//! u = b0 + X_S w_S kept current, one partial gradient step and one projection per arriving
//! feature. Memory: s standardized columns plus a few n-vectors, whatever the stream length.

use super::model::{self, ModelInput};
use super::selector::{Outcome, Selector};
use super::snapshot::SelectionSnapshot;
use super::{FeatureError, Labels, OsParams, PassLog, Summary};
use crate::model::Model;
use std::sync::Arc;

/// The state of one OS stream.
pub struct OnlineSubstitution {
    labels: Arc<Labels>,
    params: OsParams,
    eta_start: f64,
    selector: Selector,
    /// u = b0 + X_S w_S: the selector's own part is all of it.
    u: Vec<f64>,
    passes: PassLog,
}

impl OnlineSubstitution {
    /// A selection with nothing retained yet, for `labels` under `params` (checked).
    pub fn new(labels: Labels, params: &OsParams) -> Result<OnlineSubstitution, FeatureError> {
        params.check_for(&labels)?;
        let n = labels.n();
        let eta = params.eta_for();
        let b0 = labels.null_intercept();
        let selector = Selector::new(n, params.s, params.loss, eta, params.m, Some(b0));
        let u = selector.own().to_vec();
        Ok(OnlineSubstitution {
            labels: Arc::new(labels),
            params: params.clone(),
            eta_start: eta,
            selector,
            u,
            passes: PassLog::default(),
        })
    }

    /// Feature `index` (its identity: a returning index is the same feature) named `name`
    /// arrives with its n values. Bad values are an error and change nothing.
    pub fn push(
        &mut self,
        index: usize,
        name: &str,
        values: &[f64],
    ) -> Result<Outcome, FeatureError> {
        self.labels.check_feature(name, values)?;
        if self.passes.starts_pass(index) {
            self.end_pass();
        }
        let outcome = self
            .selector
            .step(index, name, values, &self.u, self.labels.values());
        self.u.copy_from_slice(self.selector.own());
        self.passes.record();
        Ok(outcome)
    }

    /// Closes the current pass (records its final loss). Also happens by itself when the
    /// stream's first feature comes back.
    pub fn end_pass(&mut self) {
        let loss = self.loss();
        self.passes
            .close(loss, self.selector.counters().substitutions);
    }

    /// The objective L(u) now.
    pub fn loss(&self) -> f64 {
        self.labels.loss().mean(&self.u, self.labels.values())
    }

    /// The scores b0 + X_S w_S on the standardized columns.
    pub fn scores(&self) -> &[f64] {
        &self.u
    }

    /// The labels y.
    pub fn labels(&self) -> &Labels {
        &self.labels
    }

    /// Columns held now (at most s).
    pub fn retained_columns(&self) -> usize {
        self.selector.retained_columns()
    }

    /// Floats reserved for columns (at most s n).
    pub fn column_capacity(&self) -> usize {
        self.selector.column_capacity()
    }

    /// The state now: selected features, objective, counters.
    pub fn summary(&self) -> Summary {
        let loss = self.loss();
        Summary {
            method: "os".into(),
            loss_name: self.params.loss,
            s: self.params.s,
            workers: 1,
            n: self.labels.n(),
            selected: super::selected_of(std::iter::once((0, &self.selector))),
            intercept: super::intercept_of(
                self.selector.intercept().unwrap_or(0.0),
                std::iter::once(&self.selector),
            ),
            loss,
            loss_per_pass: self.passes.losses(loss),
            passes: self.passes.passes(),
            features_seen: self.passes.seen(),
            counters: self.selector.counters(),
            eta: self.selector.eta(),
            eta_start: self.eta_start,
            m: self.params.m,
            staleness: vec![],
        }
    }

    /// A frozen copy of the state (s columns of n values): its `summary` and `model` are this
    /// stream's now, whatever is pushed afterwards.
    pub fn snapshot(&self) -> SelectionSnapshot {
        SelectionSnapshot {
            method: "os",
            labels: self.labels.clone(),
            params: self.params.clone(),
            eta_start: self.eta_start,
            selectors: vec![self.selector.clone()],
            staleness: vec![],
            u: self.u.clone(),
            passes: self.passes.clone(),
        }
    }

    /// The model JSON of `ravel fit` on the selected features; `refit` re-solves the loss on
    /// the selected columns (least squares for the squared loss).
    pub fn model(&self, refit: bool) -> Model {
        model::build(ModelInput {
            summary: self.summary(),
            sets: vec![&self.selector],
            b0: self.selector.intercept().unwrap_or(0.0),
            labels: &self.labels,
            last_pass_substitutions: self.passes.last_pass_substitutions(),
            refit,
        })
    }
}
