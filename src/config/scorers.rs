//! `[[scorers]]`: events read from a topic, scored with a model of a stream's statistics, one
//! prediction per message written to an output topic (`crate::score`). Here the
//! schema, its bounds and its checks against the streams it names.
//!
//! ```toml
//! [[scorers]]
//! name = "sales-scores"
//! stream = "sales"                  # whose statistics the model comes from
//! topic = "sales.requests"          # events to score, in the stream's own format (its
//!                                   # own topic too: each event scored, and folded once)
//! output_topic = "sales.predictions"
//! model = { method = "lasso", k = 10 }
//! refresh_ms = 1000
//! interval = 0.95                   # optional: each prediction's 95 % intervals too
//! ```

use super::{StreamConfig, check_topic, valid_name};
use anyhow::bail;
use ravel_core::solve::Request;
use serde::{Deserialize, Serialize};

/// One `[[scorers]]` table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ScorerConfig {
    /// The name in metrics, logs and the output's headers.
    pub name: String,
    /// The `[[streams]]` whose statistics the model is extracted from; the events are read
    /// through its fields (`features`, `target`, `missing`, `format`).
    pub stream: String,
    /// The topic of the events to score; the stream's own topic too (each event is scored
    /// by the scorer and folded by the stream, once each).
    pub topic: String,
    /// Where the predictions go: one message per event, with the event's key.
    pub output_topic: String,
    /// The model (the body of `POST .../model`); default: the stream's quality model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<Request>,
    /// The model is extracted again at most this often, when the stream's statistics moved.
    #[serde(default = "refresh_ms")]
    pub refresh_ms: u64,
    /// The scorer's consumer group (default `<kafka.group_id>.scorer.<name>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub group_id: Option<String>,
    /// At start, create the output topic when the cluster lacks it (with
    /// `kafka.topic_partitions` partitions), as ravel creates the other topics it owns; off, a
    /// missing one keeps the service not ready, naming it. Independent of
    /// `kafka.create_topics`, which is about the topics ravel reads.
    #[serde(default = "yes")]
    pub create_output_topic: bool,
    /// Write each prediction's intervals at this confidence level (0.95 for 95 %): the
    /// confidence interval of the mean and the prediction interval, as `POST .../predict`
    /// with `interval` answers them. The model is then extracted with inference, so it must
    /// be a least-squares one (ols, ridge, a refitted model) of a regression stream.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval: Option<f64>,
}

fn refresh_ms() -> u64 {
    1000
}

fn yes() -> bool {
    true
}

/// Bounds of `refresh_ms`: 10 ms to one hour.
pub const REFRESH_MS: std::ops::RangeInclusive<u64> = 10..=3_600_000;

impl ScorerConfig {
    /// The consumer group of the scorer.
    pub fn group(&self, service_group: &str) -> String {
        self.group_id
            .clone()
            .unwrap_or_else(|| format!("{service_group}.scorer.{}", self.name))
    }

    /// Checks the scorer against the declared streams; returns the model request it scores
    /// with, checked against the stream's p. `history_k` is the default model's k.
    pub fn check(&self, streams: &[StreamConfig], history_k: usize) -> anyhow::Result<Request> {
        let name = &self.name;
        if !valid_name(name) {
            bail!(
                "scorer name '{name}' must be non-empty and use only letters, digits, '-', '_' or '.'"
            );
        }
        let Some(stream) = streams.iter().find(|s| s.name == self.stream) else {
            let known: Vec<&str> = streams.iter().map(|s| s.name.as_str()).collect();
            bail!(
                "scorer '{name}': stream = \"{}\" is not a declared [[streams]] (declared: {})",
                self.stream,
                if known.is_empty() {
                    "none".to_string()
                } else {
                    known.join(", ")
                }
            );
        };
        check_topic(&self.topic).map_err(|e| anyhow::anyhow!("scorer '{name}': topic: {e}"))?;
        check_topic(&self.output_topic)
            .map_err(|e| anyhow::anyhow!("scorer '{name}': output_topic: {e}"))?;
        if self.topic == self.output_topic {
            bail!(
                "scorer '{name}': topic and output_topic are both '{}': the scorer would read \
                 its own predictions; give the predictions their own topic",
                self.topic
            );
        }
        // The events may be a stream's own (its topic: each event scored, the stream folds
        // it once); the predictions may not (the stream would fold them as rows).
        if let Some(s) = streams.iter().find(|s| s.topic() == self.output_topic) {
            bail!(
                "scorer '{name}': output_topic '{}' is stream '{}''s input: the stream would \
                 fold the predictions as rows; give the predictions a topic of their own",
                s.topic(),
                s.name
            );
        }
        if !REFRESH_MS.contains(&self.refresh_ms) {
            bail!(
                "scorer '{name}': refresh_ms = {} must lie in 10..=3600000 (10 ms to one hour)",
                self.refresh_ms
            );
        }
        if let Some(g) = &self.group_id
            && g.trim().is_empty()
        {
            bail!("scorer '{name}': group_id must not be empty (or leave it out)");
        }
        let model = match &self.model {
            Some(m) => m.clone(),
            None => {
                let settings = stream
                    .quality
                    .clone()
                    .unwrap_or_default()
                    .resolve(stream.task, stream.p(), history_k)
                    .map_err(|e| anyhow::anyhow!("scorer '{name}': {e}"))?;
                match settings {
                    Some(q) => q.model,
                    None => {
                        bail!(
                            "scorer '{name}': give it a model (model = {{ method = \"lasso\", k = 10 }}): \
                             stream '{}' has quality off, whose model is the default",
                            self.stream
                        )
                    }
                }
            }
        };
        let mut model = model;
        if let Some(level) = self.interval {
            if !(level.is_finite() && level > 0.0 && level < 1.0) {
                bail!(
                    "scorer '{name}': interval = {level} must lie strictly between 0 and 1 \
                     (0.95 for 95 % intervals)"
                );
            }
            if stream.task == ravel_core::Task::Classification {
                bail!(
                    "scorer '{name}': interval is for regression streams: stream '{}' is a \
                     classification one, whose scores have no prediction interval",
                    self.stream
                );
            }
            // The intervals need the model's covariance, which inference keeps.
            model.inference = true;
        }
        model.check(stream.p()).map_err(|e| {
            let with = if self.interval.is_some() {
                " (interval needs a least-squares model: ols, ridge, or a refitted one)"
            } else {
                ""
            };
            anyhow::anyhow!("scorer '{name}': model: {e}{with}")
        })?;
        Ok(model)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn streams() -> Vec<StreamConfig> {
        let s: StreamConfig =
            toml::from_str("name = \"r\"\ntopic = \"r.rows\"\nfeatures = [\"a\", \"b\", \"c\"]")
                .unwrap();
        vec![s]
    }

    fn scorer(extra: &str) -> ScorerConfig {
        toml::from_str(&format!(
            "name = \"s\"\nstream = \"r\"\ntopic = \"r.events\"\noutput_topic = \"r.scores\"\n{extra}"
        ))
        .unwrap()
    }

    #[test]
    fn a_scorer_scores_with_its_model_or_the_streams_quality_model() {
        let m = scorer("model = { method = \"ols\" }")
            .check(&streams(), 2)
            .unwrap();
        assert_eq!(m, Request::ols());
        let m = scorer("").check(&streams(), 2).unwrap();
        let quality = crate::config::quality::QualityConfig::default()
            .resolve(ravel_core::Task::Regression, 3, 2)
            .unwrap()
            .unwrap()
            .model;
        assert_eq!(m, quality);
        assert_eq!(scorer("").group("ravel"), "ravel.scorer.s");
    }

    #[test]
    fn a_scorer_with_an_interval_extracts_its_model_with_inference() {
        let m = scorer("model = { method = \"ols\" }\ninterval = 0.9")
            .check(&streams(), 2)
            .unwrap();
        let mut want = Request::ols();
        want.inference = true;
        assert_eq!(m, want);
        let err = |extra: &str| scorer(extra).check(&streams(), 2).unwrap_err().to_string();
        for bad in ["0", "1", "1.5", "-0.1"] {
            assert!(
                err(&format!("interval = {bad}")).contains("must lie strictly between 0 and 1"),
                "{bad}"
            );
        }
        // A penalized model at a lambda has no covariance: refused by key.
        let e = err("model = { method = \"lasso\", lambda = 0.1 }\ninterval = 0.95");
        assert!(
            e.contains("model:") && e.contains("interval needs a least-squares model"),
            "{e}"
        );
        let mut classes = streams();
        classes[0].task = ravel_core::Task::Classification;
        let e = scorer("model = { method = \"ols\" }\ninterval = 0.95")
            .check(&classes, 2)
            .unwrap_err()
            .to_string();
        assert!(e.contains("interval is for regression streams"), "{e}");
    }

    #[test]
    fn what_a_scorer_may_not_be_is_said_by_key() {
        let err = |s: ScorerConfig| s.check(&streams(), 2).unwrap_err().to_string();
        let mut s = scorer("");
        s.stream = "nope".into();
        assert!(err(s).contains("stream = \"nope\" is not a declared [[streams]] (declared: r)"));
        let mut s = scorer("");
        s.output_topic = "r.events".into();
        assert!(err(s).contains("would read its own predictions"));
        let mut s = scorer("");
        s.output_topic = "r.rows".into();
        assert!(err(s).contains("output_topic 'r.rows' is stream 'r''s input"));
        // Its stream's own topic is events to score like any other.
        let mut s = scorer("");
        s.topic = "r.rows".into();
        assert!(s.check(&streams(), 2).is_ok());
        assert!(err(scorer("refresh_ms = 0")).contains("refresh_ms = 0 must lie in 10..=3600000"));
        assert!(err(scorer("model = { method = \"lasso\", k = 9 }")).contains("model:"));
        let mut s = scorer("");
        s.name = "a b".into();
        assert!(err(s).contains("scorer name 'a b'"));
    }
}
