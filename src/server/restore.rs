//! What a start restores before anything runs: the streams, feature streams and scorers
//! declared over the API in an earlier run (`crate::declared`), joined to the file's and
//! checked with them as one configuration, and the checkpoints of `state.dir`.

use crate::config::Config;
use anyhow::anyhow;

/// The configuration as this start runs it, and what it restored.
pub(super) struct Restored {
    /// The configuration the service was given (the file's streams, the demo's).
    pub base: Config,
    /// `base` with the API's declarations.
    pub config: Config,
    /// The API's declarations loaded from `state.dir` (empty without one).
    pub declared: crate::declared::Book,
    /// The checkpoints of `state.dir`: snapshots, positions, clusters, bucket files.
    pub checkpoints: crate::ingest::checkpoints::persist::Restored,
}

impl Restored {
    /// Loads the API's declarations and the checkpoints of `config.state.dir`.
    pub fn load(config: Config) -> anyhow::Result<Restored> {
        let base = config.clone();
        let declared = match config.state.dir() {
            Some(dir) => {
                crate::store::file::probe_dir(&dir)?;
                crate::declared::load(&dir)?
            }
            None => Default::default(),
        };
        let config = with_declarations(config, &declared)?;
        let checkpoints = match config.state.dir() {
            // Probed above.
            Some(dir) => crate::ingest::load_checkpoints(&dir, &config.streams)?,
            None => Default::default(),
        };
        Ok(Restored {
            base,
            config,
            declared,
            checkpoints,
        })
    }
}

/// `config` with the API's `declared` streams, feature streams and scorers, checked as one.
fn with_declarations(
    mut config: Config,
    declared: &crate::declared::Book,
) -> anyhow::Result<Config> {
    if declared.streams.is_empty()
        && declared.feature_streams.is_empty()
        && declared.scorers.is_empty()
    {
        return Ok(config);
    }
    config
        .streams
        .extend(declared.streams.iter().map(|d| d.stream.clone()));
    config.feature_streams.extend(
        declared
            .feature_streams
            .iter()
            .map(|d| d.feature_stream.clone()),
    );
    config
        .scorers
        .extend(declared.scorers.iter().map(|d| d.scorer.clone()));
    config.check().map_err(|e| {
        anyhow!(
            "the streams and scorers declared over the API ({}) do not go with the \
             configuration: {e:#}; remove the clashing one from the config file, or move {} \
             away to start without the API's declarations",
            declared
                .streams
                .iter()
                .map(|d| d.stream.name.as_str())
                .chain(
                    declared
                        .feature_streams
                        .iter()
                        .map(|d| d.feature_stream.name.as_str())
                )
                .chain(declared.scorers.iter().map(|d| d.scorer.name.as_str()))
                .collect::<Vec<_>>()
                .join(", "),
            config
                .state
                .dir()
                .unwrap_or_default()
                .join(crate::declared::FILE)
                .display()
        )
    })?;
    tracing::info!(
        streams = declared.streams.len(),
        feature_streams = declared.feature_streams.len(),
        scorers = declared.scorers.len(),
        "streams and scorers declared over the API restored"
    );
    Ok(config)
}
