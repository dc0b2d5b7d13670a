//! A stream's `quality = { ... }`: the live prequential quality (`state::quality`), its
//! schema and bounds, resolved per stream into a `QualitySettings`. Here, below the streams,
//! so that the configuration does not import the state it configures.
//!
//! ```toml
//! quality = { every_rows = 1000, window_rows = 10000, model = { method = "lasso", k = 10 }, floor = { r2 = 0.5 } }
//! ```
//! On by default (`enabled = false` turns it off) with the history's model (lasso with
//! `history.k` nonzeros).

use ravel_core::Task;
use ravel_core::prequential::{Figures, Quality, QualitySpec};
use ravel_core::solve::Request;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `quality = { ... }` of a stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct QualityConfig {
    /// Predict every row before it is folded, and keep the figures.
    pub enabled: bool,
    /// R: the model is re-extracted at every multiple of R rows, after a warm-up at p + 1,
    /// 2 (p + 1), 4 (p + 1), ... rows below R (`TestThenTrain`) (default max(5000, 10 p):
    /// an extraction costs about as much as a few hundred rows' folds at p = 100 and more
    /// as p grows, so that the live quality stays under a tenth of the service's cost even on
    /// binary mini-batches, where everything else is cheap; docs/benchmarks.md).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub every_rows: Option<u64>,
    /// W: the window of the exact figures (the last W rows).
    pub window_rows: usize,
    /// The weighted figures weigh a row a rows old by (1 - 1 / decay_rows)^a (default W).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decay_rows: Option<u64>,
    /// The model (the body of `POST .../model`); default lasso with `history.k` nonzeros.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<Request>,
    /// Floors of the window's figures (`r2`, `auc`, `balanced_accuracy`), exported as
    /// `ravel_stream_quality_floor` for the alert rule `RavelQualityBelowFloor`.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub floor: BTreeMap<String, f64>,
}

impl Default for QualityConfig {
    fn default() -> Self {
        QualityConfig {
            enabled: true,
            every_rows: None,
            window_rows: 10_000,
            decay_rows: None,
            model: None,
            floor: BTreeMap::new(),
        }
    }
}

/// Bounds.
pub const EVERY_ROWS: std::ops::RangeInclusive<u64> = 1..=100_000_000;
pub const WINDOW_ROWS: std::ops::RangeInclusive<usize> = 1..=1_000_000;
pub const DECAY_ROWS: std::ops::RangeInclusive<u64> = 1..=1_000_000_000;

/// The figures a floor can be set on: those where higher is better.
pub const FLOORED: [&str; 3] = ["r2", "auc", "balanced_accuracy"];

/// A stream's resolved quality settings.
#[derive(Debug, Clone, PartialEq)]
pub struct QualitySettings {
    pub every_rows: u64,
    pub model: Request,
    pub spec: QualitySpec,
    pub floor: BTreeMap<String, f64>,
}

impl QualityConfig {
    /// Checked against the stream (task, p); `history_k` is the default model's k. `None`
    /// when disabled.
    pub fn resolve(
        &self,
        task: Task,
        p: usize,
        history_k: usize,
    ) -> Result<Option<QualitySettings>, String> {
        if !self.enabled {
            return Ok(None);
        }
        let every_rows = self.every_rows.unwrap_or((10 * p as u64).max(5000));
        if !EVERY_ROWS.contains(&every_rows) {
            return Err(format!(
                "every_rows must lie in {}..={}, got {every_rows}",
                EVERY_ROWS.start(),
                EVERY_ROWS.end(),
            ));
        }
        if !WINDOW_ROWS.contains(&self.window_rows) {
            return Err(format!(
                "window_rows must lie in {}..={}, got {}",
                WINDOW_ROWS.start(),
                WINDOW_ROWS.end(),
                self.window_rows
            ));
        }
        let decay = self.decay_rows.unwrap_or(self.window_rows as u64);
        if !DECAY_ROWS.contains(&decay) {
            return Err(format!(
                "decay_rows must lie in {}..={}, got {decay}",
                DECAY_ROWS.start(),
                DECAY_ROWS.end()
            ));
        }
        let model = match &self.model {
            Some(m) => m.clone(),
            None => serde_json::from_value(
                serde_json::json!({"method": "lasso", "k": history_k.clamp(1, p.max(1))}),
            )
            .map_err(|e| format!("the default model: {e}"))?,
        };
        // The same checks as the service's prequential model will make.
        ravel_core::prequential::TestThenTrain::new(&model, p, every_rows)
            .map_err(|e| format!("model: {e}"))?;
        let names = Figures::names_of(task);
        for (figure, v) in &self.floor {
            if !FLOORED.contains(&figure.as_str()) || !names.contains(&figure.as_str()) {
                let ok: Vec<&str> = FLOORED
                    .iter()
                    .copied()
                    .filter(|f| names.contains(f))
                    .collect();
                return Err(format!(
                    "floor.{figure}: a {task} stream's floors are {} (figures where higher is better)",
                    ok.join(", ")
                ));
            }
            if !v.is_finite() {
                return Err(format!("floor.{figure} must be a finite number"));
            }
        }
        Ok(Some(QualitySettings {
            every_rows,
            spec: QualitySpec {
                task,
                window: self.window_rows,
                decay_rows: decay as f64,
                w_pos: model.w_pos.unwrap_or(1.0),
                w_neg: model.w_neg.unwrap_or(1.0),
            },
            model,
            floor: self.floor.clone(),
        }))
    }
}

/// Stream `s`'s quality settings (`None`: off), its errors naming the stream.
pub fn of_stream(
    s: &crate::config::StreamConfig,
    history: &crate::config::history::HistorySpec,
) -> anyhow::Result<Option<QualitySettings>> {
    s.quality
        .clone()
        .unwrap_or_default()
        .resolve(s.task, s.p(), history.k)
        .map_err(|e| anyhow::anyhow!("stream '{}': quality: {e}", s.name))
}

impl QualitySettings {
    /// The most one part's window holds.
    pub fn memory_bytes(&self) -> u64 {
        Quality::memory_bytes(self.spec.window)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> QualityConfig {
        toml::from_str(s).unwrap()
    }

    #[test]
    fn defaults_bounds_and_floors() {
        let q = QualityConfig::default()
            .resolve(Task::Regression, 20, 10)
            .unwrap()
            .unwrap();
        assert_eq!(q.every_rows, 5000);
        let wide = QualityConfig::default()
            .resolve(Task::Regression, 800, 10)
            .unwrap()
            .unwrap();
        assert_eq!(wide.every_rows, 8000, "max(5000, 10 p)");
        assert_eq!(q.spec.window, 10_000);
        assert_eq!(q.model.method().name(), "lasso");
        assert!(
            parse("enabled = false")
                .resolve(Task::Regression, 20, 10)
                .unwrap()
                .is_none()
        );
        let q = parse("every_rows = 50\nwindow_rows = 7\nmodel = { method = \"ridge\", lambda = 0.1 }\nfloor = { r2 = 0.3 }")
            .resolve(Task::Regression, 20, 10)
            .unwrap()
            .unwrap();
        assert_eq!(
            (q.every_rows, q.spec.window, q.spec.decay_rows),
            (50, 7, 7.0)
        );
        let err = |s: &str, task| parse(s).resolve(task, 20, 10).unwrap_err();
        assert!(err("every_rows = 0", Task::Regression).contains("every_rows"));
        assert!(err("window_rows = 0", Task::Regression).contains("window_rows"));
        assert!(err("decay_rows = 0", Task::Regression).contains("decay_rows"));
        assert!(err("model = { method = \"lasso\", k = 30 }", Task::Regression).contains("model"));
        assert!(
            err(
                "model = { method = \"lasso\", select = \"cv\" }",
                Task::Regression
            )
            .contains("folds")
        );
        let e = err("floor = { rmse = 1.0 }", Task::Regression);
        assert!(e.contains("floor.rmse") && e.contains("r2"), "{e}");
        let e = err("floor = { r2 = 0.5 }", Task::Classification);
        assert!(e.contains("auc, balanced_accuracy"), "{e}");
        assert!(toml::from_str::<QualityConfig>("bogus = 1").is_err());
    }
}
