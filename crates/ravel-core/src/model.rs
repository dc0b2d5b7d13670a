//! What an extraction returns: the `Model` JSON that `ravel fit` prints and the HTTP API
//! returns, with the `Diagnostics` of how it was obtained (linfa's habit: a fitted model
//! carries its duality gap and step count). Below `solve` and `features`, which both build it.

use serde::{Deserialize, Serialize};

/// One nonzero coefficient.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Coefficient {
    /// Header name, or the column index as text.
    pub feature: String,
    pub index: usize,
    pub value: f64,
}

/// How a model was obtained.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Diagnostics {
    pub method: String,
    pub lambda: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub l1_ratio: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gamma: Option<f64>,
    pub nonzeros: usize,
    /// The k asked for, and whether exactly k nonzeros were reached.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub requested_k: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub k_exact: Option<bool>,
    pub iterations: usize,
    /// Duality gap of the penalized problem (Lasso / elastic net).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub duality_gap: Option<f64>,
    /// Convergence measure of the other solvers (largest coefficient change, or largest
    /// gradient entry on the support after a refit).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub convergence: Option<f64>,
    pub converged: bool,
    pub train_mse: f64,
    pub r2: f64,
    pub standardize: bool,
    pub refit: bool,
    /// Constant columns left out of the fit.
    pub excluded_constant: Vec<usize>,
    #[serde(skip_serializing_if = "Vec::is_empty", default)]
    pub notes: Vec<String>,
    /// Time the extraction alone took.
    pub elapsed_ms: f64,
}

/// The model JSON of `ravel fit` and of the HTTP API.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Model {
    pub method: String,
    /// Number of nonzero coefficients.
    pub k: usize,
    pub lambda: Option<f64>,
    pub intercept: f64,
    pub coefficients: Vec<Coefficient>,
    pub n: u64,
    pub diagnostics: Diagnostics,
}

impl Model {
    /// Prediction b0 + x^T b for one row of p features.
    pub fn predict(&self, x: &[f64]) -> f64 {
        self.intercept
            + self
                .coefficients
                .iter()
                .map(|c| c.value * x[c.index])
                .sum::<f64>()
    }
    /// Dense coefficient vector of length p.
    pub fn dense(&self, p: usize) -> Vec<f64> {
        let mut b = vec![0.0; p];
        for c in &self.coefficients {
            b[c.index] = c.value;
        }
        b
    }
}

/// A whole lambda path.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PathModel {
    pub method: String,
    pub n: u64,
    pub points: Vec<Model>,
    pub elapsed_ms: f64,
}
