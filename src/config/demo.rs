//! `[demo]`: the synthetic stream `ravel serve` produces when no Kafka is configured.

use ravel_core::spec::string_or_table;
use ravel_core::synthetic::{FeatureDesign, SyntheticSpec};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DemoConfig {
    /// Stream the synthetic design into the embedded broker (ignored with real brokers).
    pub enabled: bool,
    /// The stream the demo feeds; declared automatically when the config has no such stream.
    pub stream: String,
    /// The design: a table of p, k, signal, noise, rho, seed, task (or the `ravel produce
    /// --synthetic` shorthand); n is ignored (the demo is endless).
    #[serde(deserialize_with = "string_or_table")]
    pub synthetic: SyntheticSpec,
    pub rows_per_second: u32,
    /// Rows per Kafka message.
    pub batch_rows: usize,
    /// The demo feature stream (declared automatically when missing); empty: none.
    pub feature_stream: String,
    /// Its design: a table of n, p, s, passes, seed (`synthetic::FeatureDesign`; or the
    /// shorthand `n=200,p=500,...`).
    #[serde(deserialize_with = "string_or_table")]
    pub feature_design: FeatureDesign,
    pub features_per_second: u32,
}

impl Default for DemoConfig {
    fn default() -> Self {
        DemoConfig {
            enabled: true,
            stream: "demo".into(),
            synthetic: SyntheticSpec {
                p: 100,
                k: 10,
                seed: 1,
                ..SyntheticSpec::default()
            },
            rows_per_second: 500,
            batch_rows: 50,
            feature_stream: "demo-features".into(),
            feature_design: FeatureDesign::default(),
            features_per_second: 200,
        }
    }
}
